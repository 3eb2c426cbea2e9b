"""Declarative field tables: the one place a header's bit positions are written.

A :class:`HeaderSpec` is an ordered list of :class:`Field` s (most significant bit first,
big-endian on the wire, as every IETF/IEEE/IBTA diagram draws them).  From that table alone
this module derives the plain codec (``unpack`` compiled once per spec: one
``struct.unpack_from`` of the header's byte units, then shifts and masks; ``pack`` by shifts
into one integer); :mod:`wire.construct_defs`, :mod:`wire.scapy_layers`,
:mod:`wire.strategies` and :mod:`wire.docgen` derive the Construct struct, the Scapy layer,
the Hypothesis strategy and the docs table from the same object, and
``tests/test_derived_forms.py`` proves they agree.

Value formats (``Field.fmt``) only change how a value is *shown* (and accepted on build):
``int`` (default), ``mac`` (``"aa:bb:cc:dd:ee:ff"``), ``ipv4`` (dotted quad), ``ipv6``
(RFC 5952 text) and ``hex`` (a hex string of the field's bytes; for wide opaque fields).
A field with ``count > 1`` is an array of equal-width elements (PFC's eight quanta), shown as
a list.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from .errors import BadValue, Truncated, describe

__all__ = ["Field", "HeaderSpec", "Layer", "format_value", "parse_value", "stack_getter"]

FMTS = ("int", "mac", "ipv4", "ipv6", "hex")


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a header: ``bits`` wide (per element), most significant bit first."""

    name: str
    bits: int
    doc: str = ""
    enum: type[IntEnum] | None = None
    fmt: str = "int"
    default: int = 0
    count: int = 1
    reserved: bool = False

    def __post_init__(self) -> None:
        if self.bits <= 0 or self.count <= 0:
            raise ValueError(f"field {self.name}: bits and count must be positive")
        if self.fmt not in FMTS:
            raise ValueError(f"field {self.name}: unknown fmt {self.fmt!r}")
        if self.fmt == "hex" and self.bits % 8:
            raise ValueError(f"field {self.name}: hex fields must be whole bytes")

    @property
    def total_bits(self) -> int:
        return self.bits * self.count

    @property
    def max_value(self) -> int:
        return (1 << self.bits) - 1


def _fmt_mac(v: int) -> str:
    h = f"{v:012x}"
    return f"{h[0:2]}:{h[2:4]}:{h[4:6]}:{h[6:8]}:{h[8:10]}:{h[10:12]}"


def _fmt_ipv4(v: int) -> str:
    return f"{v >> 24}.{(v >> 16) & 255}.{(v >> 8) & 255}.{v & 255}"


#: An integer as ``int(s, 0)`` reads it (decimal, 0x, 0o, 0b; underscores between digits).
_NUMBER_RE = re.compile(r"[+-]?(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|[0-9][0-9_]*)")
_MAC_RE = re.compile(r"[0-9a-fA-F]{12}|[0-9a-fA-F]{2}([:-])[0-9a-fA-F]{2}(\1[0-9a-fA-F]{2}){4}")


def _fmt_ipv6(v: int) -> str:
    # RFC 5952 section 5: IPv4-mapped addresses in mixed notation.  Done by hand because
    # Python < 3.13 prints ::ffff:a00:1 and 3.13 ::ffff:10.0.0.1 (JSON must not depend on it).
    if v >> 32 == 0xFFFF:
        return "::ffff:" + _fmt_ipv4(v & 0xFFFFFFFF)
    return str(ipaddress.IPv6Address(v))


def format_value(f: Field, v: int) -> object:
    """Raw integer -> shown value for one element of field ``f``."""
    if f.fmt == "int":
        return v
    if f.fmt == "mac":
        return _fmt_mac(v)
    if f.fmt == "ipv4":
        return _fmt_ipv4(v)
    if f.fmt == "ipv6":
        return _fmt_ipv6(v)
    return v.to_bytes(f.bits // 8, "big").hex()


def parse_value(f: Field, v: object, layer: str = "") -> int:
    """Shown value (or a raw int) -> raw integer, range-checked.  Raises BadValue."""
    try:
        if isinstance(v, bool):
            raw = int(v)
        elif isinstance(v, int):
            raw = v
        elif isinstance(v, str):
            s = v.strip()
            if f.fmt == "mac":
                if not _MAC_RE.fullmatch(s):
                    raise ValueError("a MAC address is 6 hex bytes, e.g. 02:00:00:00:00:01")
                raw = int(re.sub("[:-]", "", s), 16)
            elif f.fmt == "ipv4":
                raw = int(ipaddress.IPv4Address(s))
            elif f.fmt == "ipv6":
                raw = int(ipaddress.IPv6Address(s))
            elif f.fmt == "hex":
                b = bytes.fromhex(s.replace(":", ""))
                if len(b) != f.bits // 8:
                    raise ValueError(f"expected {f.bits // 8} bytes of hex, got {len(b)}")
                raw = int.from_bytes(b, "big")
            elif f.enum is not None and s in f.enum.__members__:
                raw = int(f.enum[s])
            elif f.enum is not None and not _NUMBER_RE.fullmatch(s):
                names = list(f.enum.__members__)
                raise ValueError(f"expected a number or a name like {names[0]!r} (one of "
                                 f"{len(names)}: {', '.join(names[:4])}...)"
                                 if len(names) > 4 else
                                 f"expected a number or one of {', '.join(names)}")
            elif _NUMBER_RE.fullmatch(s):
                raw = int(s, 0)
            else:
                raise ValueError("expected a number like 64 or 0x40")
        else:
            raise TypeError(f"expected an integer or a string, got {describe(v)}")
    except (ValueError, TypeError) as e:
        raise BadValue(f"cannot use {v!r}: {e}", layer=layer, field=f.name) from None
    if not 0 <= raw <= f.max_value:
        raise BadValue(f"{raw} does not fit in {f.bits} bits", layer=layer, field=f.name)
    return raw


class Layer(dict):
    """One decoded header: a dict of field values (as shown in JSON) with attribute access.

    Keys are the spec's field names plus any derived, output-only keys
    (``opcode_name``, ``checksum_ok``...).  ``layer.psn`` is ``layer["psn"]``.
    """

    __slots__ = ("name",)

    def __init__(self, name: str, values: Mapping[str, object] = (), /, **kw: object) -> None:
        super().__init__(values, **kw)
        self.name = name

    def __getattr__(self, key: str) -> object:
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"layer {self.name!r} has no field {key!r}") from None

    def __reduce__(self) -> tuple:
        # pickle/copy: rebuild with the name (the default protocol looked ``name`` up through
        # __getattr__ before it was set, and recursed)
        return (Layer, (self.name, dict(self)))

    def __repr__(self) -> str:
        inner = ", ".join(f"{k}={v!r}" for k, v in self.items())
        return f"{self.name}({inner})"


@dataclass(eq=False)
class HeaderSpec:
    """A header's field table and the plain codec compiled from it.

    ``title`` and ``source`` are shown in the docs; ``derived`` names the output-only keys a
    dissector adds (accepted and ignored on build).
    """

    name: str
    fields: Sequence[Field]
    title: str = ""
    source: str = ""
    doc: str = ""
    derived: tuple[str, ...] = ()
    size_bytes: int = field(init=False)
    _unpack_raw: object = field(init=False, repr=False)
    _unpack: object = field(init=False, repr=False)
    _layer: object = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.fields = tuple(self.fields)
        total = sum(f.total_bits for f in self.fields)
        if total % 8:
            raise ValueError(f"{self.name}: {total} bits is not a whole number of bytes")
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise ValueError(f"{self.name}: duplicate field names")
        self.size_bytes = total // 8
        self._by_name = {f.name: f for f in self.fields}
        self._compile()

    # ---------------------------------------------------------------- layout
    def layout(self) -> list[tuple[Field, int, int]]:
        """(field, element index, bit offset from the header start) for every element."""
        out, pos = [], 0
        for f in self.fields:
            for i in range(f.count):
                out.append((f, i, pos))
                pos += f.bits
        return out

    def field(self, name: str) -> Field:
        return self._by_name[name]

    def byte_field(self, name: str) -> tuple[int, int, int]:
        """(byte offset, shift, mask) of a field that lies within one byte, or (byte offset
        of its first byte, 0, mask) for a byte-aligned multi-byte field: for in-place rewriters
        (ECN marking, TTL decrement, checksum update) that must not write bit positions."""
        for f, _i, pos in self.layout():
            if f.name != name:
                continue
            byte, end = pos // 8, pos + f.bits
            if (end - 1) // 8 == byte:
                return byte, 8 * (byte + 1) - end, f.max_value
            if pos % 8 or f.bits % 8:
                raise ValueError(f"{self.name}.{name} is neither within a byte nor byte-aligned")
            return byte, 0, f.max_value
        raise KeyError(f"{self.name} has no field {name!r}")

    @property
    def field_names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    # --------------------------------------------------------------- codegen
    def _units(self) -> tuple[str, list[str], list[str], list[tuple[str, bool, int]]]:
        """How the compiled codec reads this header with one ``struct.unpack_from``: the
        struct format, its item variables, the lines turning a wide item's bytes into an int,
        and for every layout element (in :meth:`layout`'s order) its variable, whether it is
        the whole of it, and its shift in it.

        A unit is the smallest run of bytes that ends where a field element ends on a byte; a
        unit with no struct code (3, 5, 6, 7 or more than 8 bytes) is read as bytes and made an
        int, unless it and the unit before make 2, 4 or 8 bytes (BTH's 1-byte flags and
        3-byte QP: one ``I``).  Small integers instead of one wide one: the shifts and masks
        stay on one-digit ints."""
        bounds = [0]                        # unit boundaries, in bits
        for f, _i, pos in self.layout():
            if (pos + f.bits) % 8 == 0:
                bounds.append(pos + f.bits)
        merged, fused = [0], False
        for end in bounds[1:]:
            if ((end - merged[-1]) // 8 not in _STRUCT_CODES and len(merged) > 1 and not fused
                    and (end - merged[-2]) // 8 in (2, 4, 8)):
                merged[-1], fused = end, True    # one unit with the one before
                continue
            merged.append(end)
            fused = False
        fmt, units, conv = [">"], [], []
        for start, end in itertools.pairwise(merged):
            _unit_item((end - start) // 8, fmt, units, conv)
        where: list[tuple[str, bool, int]] = []
        k = 0
        for f, _i, pos in self.layout():
            while merged[k + 1] <= pos:
                k += 1
            shift = merged[k + 1] - pos - f.bits
            where.append((units[k], pos == merged[k] and shift == 0, shift))
        return "".join(fmt), units, conv, where

    def _compile(self) -> None:
        fmt, units, conv, where = self._units()
        ns: dict[str, object] = {
            "_Truncated": Truncated, "_mac": _fmt_mac, "_ip4": _fmt_ipv4, "_ip6": _fmt_ipv6,
            "_from": int.from_bytes, "_new": dict.__new__, "_Layer": Layer,
            "_unpack": struct.Struct(fmt).unpack_from,
        }
        raw_items, shown_items, sets = [], [], []
        by_field: dict[str, list[str]] = {}
        for (f, _i, _off), (var, whole, shift) in zip(self.layout(), where, strict=True):
            expr = (var if whole else f"({var} >> {shift}) & {f.max_value:#x}" if shift
                    else f"{var} & {f.max_value:#x}")
            by_field.setdefault(f.name, []).append(expr)
        for f in self.fields:
            exprs = by_field[f.name]
            raw = exprs[0] if f.count == 1 else "[" + ", ".join(exprs) + "]"
            raw_items.append(f"{f.name!r}: {raw}")
            if f.fmt == "int":
                shown = raw
            elif f.fmt == "mac":
                shown = f"_mac({exprs[0]})"
            elif f.fmt == "ipv4":
                shown = f"_ip4({exprs[0]})"
            elif f.fmt == "ipv6":
                shown = f"_ip6({exprs[0]})"
            else:
                shown = f"({exprs[0]}).to_bytes({f.bits // 8}, 'big').hex()"
            shown_items.append(f"{f.name!r}: {shown}")
            sets.append(f"    out[{f.name!r}] = {shown}\n")
        n = self.size_bytes
        read = f"    {', '.join(units)}, = _unpack(buf, off)\n" + "".join(conv)
        head = (
            "    if off < 0:\n"
            "        raise ValueError(f'offset {off} < 0')\n"
            f"    if len(buf) - off < {n}:\n"
            f"        raise _Truncated('need {n} bytes, have ' + str(max(len(buf) - off, 0)),"
            f" layer={self.name!r}, offset=off)\n" + read
        )
        src = (
            "def unpack_raw(buf, off=0):\n" + head
            + "    return {" + ", ".join(raw_items) + "}\n"
            "def unpack(buf, off=0):\n" + head
            + "    return {" + ", ".join(shown_items) + "}\n"
            # a Layer without the Python-level Layer.__init__, filled key by key (in C)
            "def layer(buf, off=0):\n" + read
            + "    out = _new(_Layer)\n"
            f"    out.name = {self.name!r}\n"
            + "".join(sets)
            + "    return out\n"
        )
        exec(compile(src, f"<spec {self.name}>", "exec"), ns)
        self._unpack_raw = ns["unpack_raw"]
        self._unpack = ns["unpack"]
        self._layer = ns["layer"]

    def getter(self, *names: str) -> Callable[..., tuple[int, ...]]:
        """A compiled ``f(buf, off=0) -> tuple`` of the raw integer values of ``names`` (in that
        order; no length check: the caller has checked that the header fits).  For dissectors
        that read a few fields to find the next header and decode the rest on demand."""
        cache = self.__dict__.setdefault("_getters", {})
        fn = cache.get(names)
        if fn is not None:
            return fn
        total = self.size_bytes * 8
        pos = {}
        for f, i, off in self.layout():
            if i == 0 and f.count == 1:
                pos[f.name] = (f, off)
        exprs = []
        for name in names:
            if name not in pos:
                raise KeyError(f"{self.name} has no scalar field {name!r}")
            f, off = pos[name]
            shift = total - off - f.bits
            exprs.append(f"(v >> {shift}) & {f.max_value:#x}" if shift else
                         f"v & {f.max_value:#x}")
        src = (f"def get(buf, off=0):\n"
               f"    v = _from(buf[off:off + {self.size_bytes}], 'big')\n"
               f"    return ({', '.join(exprs)},)\n")
        ns: dict[str, object] = {"_from": int.from_bytes}
        exec(compile(src, f"<getter {self.name}>", "exec"), ns)
        fn = cache[names] = ns["get"]
        return fn

    # ----------------------------------------------------------------- codec
    def unpack_raw(self, buf: bytes | bytearray | memoryview, offset: int = 0) -> dict[str, object]:
        """Field values as raw integers (arrays as lists).  Raises :class:`Truncated`."""
        return self._unpack_raw(buf, offset)  # type: ignore[operator]

    def unpack(self, buf: bytes | bytearray | memoryview, offset: int = 0) -> dict[str, object]:
        """Field values as shown in JSON (addresses as text).  Raises :class:`Truncated`."""
        return self._unpack(buf, offset)  # type: ignore[operator]

    def decode(self, buf: bytes | bytearray | memoryview, offset: int = 0) -> Layer:
        return Layer(self.name, self._unpack(buf, offset))  # type: ignore[operator]

    def layer_at(self, buf: bytes, offset: int = 0) -> Layer:
        """:meth:`decode` without the length check, for a header known to fit (dissectors
        call the compiled code directly: no Python-level ``Layer.__init__``)."""
        return self._layer(buf, offset)  # type: ignore[operator]

    def pack(self, values: Mapping[str, object] | None = None, /, **kw: object) -> bytes:
        """Build the header from field values (shown or raw); missing fields take defaults.

        Unknown keys raise :class:`BadValue` unless they are this spec's derived keys.
        """
        vals = dict(values or {}, **kw)
        unknown = set(vals) - set(self._by_name) - set(self.derived)
        if unknown:
            raise BadValue(
                f"unknown field(s) {sorted(unknown)}; known: {list(self._by_name)}",
                layer=self.name,
            )
        acc = 0
        for f in self.fields:
            v = vals.get(f.name, f.default)
            if f.count == 1:
                acc = (acc << f.bits) | parse_value(f, v, self.name)
            else:
                if isinstance(v, int):
                    v = [v] * f.count
                if not isinstance(v, list | tuple) or len(v) != f.count:
                    like = [0] * f.count
                    like[min(3, f.count - 1)] = 100
                    raise BadValue(f"expected a list of {f.count} integers like {like} (or one "
                                   f"integer for all {f.count}), got {describe(v)}",
                                   layer=self.name, field=f.name)
                for el in v:
                    acc = (acc << f.bits) | parse_value(f, el, self.name)
        return acc.to_bytes(self.size_bytes, "big")

    def shown(self, raw: Mapping[str, object]) -> dict[str, object]:
        """Raw integer values -> shown values (inverse of ``parse_value`` per field)."""
        out = {}
        for f in self.fields:
            v = raw[f.name]
            out[f.name] = [format_value(f, x) for x in v] if f.count > 1 else format_value(f, v)
        return out


#: struct codes of the byte units one ``unpack_from`` reads as integers.
_STRUCT_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _unit_item(nbytes: int, fmt: list[str], units: list[str], conv: list[str]) -> str:
    """Add a byte unit of ``nbytes`` to a compiled reader: its struct item to ``fmt``, its
    variable to ``units`` and, for a unit with no struct integer code, the line making its
    bytes an int to ``conv``; returns the variable."""
    var = f"u{len(units)}"
    units.append(var)
    code = _STRUCT_CODES.get(nbytes)
    if code is None:
        fmt.append(f"{nbytes}s")
        conv.append(f"    {var} = _from({var}, 'big')\n")
    else:
        fmt.append(code)
    return var


def stack_getter(*parts: tuple[HeaderSpec, Sequence[str]]
                 ) -> Callable[..., tuple[int, ...]]:
    """A compiled ``f(buf, off=0) -> tuple`` of raw field values of headers laid end to end
    (each ``spec.size_bytes`` long, in the order given): for every ``(spec, names)``, the
    values of ``names`` in that order, all in one flat tuple.  One ``struct.unpack_from``
    reads every byte unit that holds a wanted field and skips the others; no bit position is
    written here, they come from the specs' layouts.  No length check (the caller has checked
    that every header fits), scalar fields only.  For a dissector's fast path over a common
    stack of headers (``wire.stack``: Ethernet + IPv4 + UDP + BTH)."""
    fmt = [">"]
    units: list[str] = []   # struct items that are kept, by variable
    conv: list[str] = []    # lines turning a wide unit's bytes into an int
    exprs: list[str] = []
    base = 0                # bit offset of the current header in the stack
    for spec, names in parts:
        fields: dict[str, tuple[Field, int]] = {}
        for f, i, pos in spec.layout():
            if i == 0 and f.count == 1:
                fields[f.name] = (f, base + pos)
        for name in names:
            if name not in fields:
                raise KeyError(f"{spec.name} has no scalar field {name!r}")
        want = {fields[n][1]: n for n in names}
        # the header's smallest byte-aligned units (a unit ends where a field ends on a byte)
        start = base
        where: dict[str, tuple[str, int, int]] = {}  # field -> (unit variable, start, end bit)
        for f, _i, pos in spec.layout():
            end = base + pos + f.bits
            if end % 8:
                continue
            inside = [n for p, n in want.items() if start <= p < end]
            nbytes = (end - start) // 8
            if not inside:
                fmt.append(f"{nbytes}x")
            else:
                var = _unit_item(nbytes, fmt, units, conv)
                for n in inside:
                    where[n] = (var, start, end)
            start = end
        for name in names:
            f, pos = fields[name]
            var, ustart, end = where[name]
            shift = end - pos - f.bits
            if pos == ustart and shift == 0:  # the field is the whole unit
                exprs.append(var)
            else:
                exprs.append(f"({var} >> {shift}) & {f.max_value:#x}" if shift else
                             f"{var} & {f.max_value:#x}")
        base += spec.size_bytes * 8
    s = struct.Struct("".join(fmt))
    head = f"    {', '.join(units)}, = _unpack(buf, off)\n" if units else ""
    src = (f"def get(buf, off=0):\n{head}{''.join(conv)}"
           f"    return ({''.join(e + ', ' for e in exprs)})\n")
    ns: dict[str, object] = {"_from": int.from_bytes, "_unpack": s.unpack_from}
    exec(compile(src, "<stack getter>", "exec"), ns)
    fn = ns["get"]
    fn.size_bytes = s.size  # type: ignore[attr-defined]
    fn.source = src  # type: ignore[attr-defined]
    return fn  # type: ignore[return-value]

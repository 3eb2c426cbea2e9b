"""pcap records <-> JSON objects (the ``lossless decode -f jsonl`` / ``lossless craft`` schema).

A JSON record is the layer dict of :meth:`wire.Decoded.to_dict` plus record keys:
``index`` (0-based, output only), ``ts_ns`` (integer ns since the epoch), ``caplen``
(captured bytes), ``len`` (bytes on the wire), and, when not the defaults, ``interface``
(pcapng interface id) and ``linktype``.  Records are decoded by linktype
(:func:`wire.ib_stack.dissect_record`): 1 Ethernet, 247 InfiniBand, 197 ERF (InfiniBand
inside); any other linktype is kept as ``raw``.  See ``docs/reference/jsonl.md``.

On craft: a record with ``caplen < len`` was cut by the capture's snaplen, so the built frame
is cut to ``caplen`` and keeps ``len``; a record with ``caplen`` but no ``len`` is cut to
``caplen`` with ``len`` = the built length; otherwise (``caplen == len``) the record is
complete and both lengths are taken from the built frame, so editing a decoded record with jq
never truncates it.  A
missing ``ts_ns`` is the previous record's plus 1 µs (0 for the first).

Format lines (``meta_to_dict``/``meta_from_dict``): besides records, a decoded stream holds
one-key objects describing the file itself, so that craft writes the same format back:
``{"pcap": {...}}`` (a classic pcap File Header that is not craft's default),
``{"pcapng_shb": {...}}``, ``{"pcapng_idb": {...}}`` and ``{"pcapng_block": {...}}`` (every
non-packet block of a pcapng file, in file order).  :func:`parse_line` reads one JSON line
with integral floats (what jq 1.6 prints for big integers, e.g. ``1.7e+18``) turned into
ints; :func:`int_strings` writes integers beyond 2**53 as decimal strings, which every
integer field accepts back.
"""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Iterable, Mapping
from decimal import Decimal, InvalidOperation

from .errors import BadValue
from .ib_stack import build_record_data, dissect_record
from .pcapio import Block, CaptureReader, Record
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .stack import ROCE_PORTS

__all__ = ["LINKTYPE_ETHERNET", "record_to_dict", "record_from_dict", "DEFAULT_TS_STEP_NS",
           "META_KEYS", "pcap_header_to_dict", "meta_to_dict", "meta_from_dict", "parse_line",
           "int_strings", "JSON_SAFE_INT"]

#: LINKTYPE_ETHERNET (tcpdump.org link-layer header types).
LINKTYPE_ETHERNET = 1
DEFAULT_TS_STEP_NS = 1000
#: The largest integer every JSON reader keeps exactly: 2**53 (IEEE 754 doubles, RFC 8259
#: section 6; jq 1.6 reads every number as a double).
JSON_SAFE_INT = 1 << 53
#: Keys of the format lines (one-key objects that are not records).
META_KEYS = ("pcap", "pcapng_shb", "pcapng_idb", "pcapng_block")
#: The classic pcap File Header craft writes when told nothing (decode omits a "pcap" line
#: for a file that has exactly this header): little-endian, ns, 2.4, snaplen 262144,
#: linktype 1 (Ethernet).
DEFAULT_PCAP_HEADER = {"byte_order": "little", "ts_resolution": "ns", "version": [2, 4],
                       "thiszone": 0, "sigfigs": 0, "snaplen": 262144, "linktype": 1,
                       "linktype_flags": 0}
_BT_SHB, _BT_IDB = 0x0A0D0D0A, 1  # draft-ietf-opsawg-pcapng sections 4.1, 4.2
_SHB_FIXED = "IHHq"  # byte-order magic, major, minor, section length (section 4.1)
_IDB_FIXED = "HHI"   # linktype, reserved, snaplen (section 4.2)
#: A JSON number literal with a fraction or exponent whose value is an integer of at most
#: this many digits becomes an int (larger ones stay floats and are refused by range checks).
_MAX_INT_DIGITS = 40


def _float(text: str) -> float | int:
    """``parse_float`` hook: an integral literal (``1.7e+18``, ``3.0``) is the exact int."""
    if "e" in text or "E" in text or "." in text:
        try:
            d = Decimal(text)
        except InvalidOperation:
            return float(text)
        if d.is_finite() and d == d.to_integral_value() and d.adjusted() < _MAX_INT_DIGITS:
            return int(d)
    return float(text)


def parse_line(text: str | bytes) -> object:
    """One JSON Lines line -> object, integral float literals as ints (see module doc).

    Raises ``json.JSONDecodeError``, ``RecursionError`` (nesting too deep) or
    ``ValueError`` (an integer literal of more than 4300 digits)."""
    return json.loads(text, parse_float=_float)


def int_strings(obj: object) -> object:
    """``obj`` with every integer of magnitude above 2**53 as a decimal string (jq-safe)."""
    if isinstance(obj, bool):
        return obj
    if isinstance(obj, int):
        return str(obj) if not -JSON_SAFE_INT <= obj <= JSON_SAFE_INT else obj
    if isinstance(obj, dict):
        return {k: int_strings(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [int_strings(v) for v in obj]
    return obj


def pcap_header_to_dict(reader: CaptureReader) -> dict[str, object] | None:
    """The ``{"pcap": {...}}`` line for a classic pcap reader, or None when its File Header is
    craft's default (:data:`DEFAULT_PCAP_HEADER`)."""
    if reader.format != "pcap":
        return None
    lt = reader.linktype_field or 0
    head = {"byte_order": reader.byte_order,
            "ts_resolution": "ns" if reader.ts_units_per_second == 10**9 else "us",
            "version": list(reader.version), "thiszone": reader.thiszone,
            "sigfigs": reader.sigfigs, "snaplen": reader.snaplen, "linktype": lt & 0xFFFF,
            "linktype_flags": lt >> 16}
    return None if head == DEFAULT_PCAP_HEADER else {"pcap": head}


def meta_to_dict(block: Block) -> dict[str, object]:
    """A pcapng non-packet block -> its format line (see module doc and docs/reference/jsonl.md)."""
    e = "<" if block.byte_order == "little" else ">"
    body = block.body
    if block.type == _BT_SHB and len(body) >= 16:
        _bom, major, minor, section_len = struct.unpack_from(e + _SHB_FIXED, body)
        return {"pcapng_shb": {"byte_order": block.byte_order, "version": [major, minor],
                               "section_length": section_len, "options": body[16:].hex()}}
    if block.type == _BT_IDB and len(body) >= 8:
        linktype, reserved, snaplen = struct.unpack_from(e + _IDB_FIXED, body)
        d: dict[str, object] = {"linktype": linktype, "snaplen": snaplen}
        if reserved:
            d["reserved"] = reserved
        d["options"] = body[8:].hex()
        return {"pcapng_idb": d}
    return {"pcapng_block": {"type": block.type, "body": body.hex()}}


def _meta_int(d: Mapping, key: str, lo: int, hi: int, default: int | None = None) -> int:
    v = d.get(key, default)
    if isinstance(v, str) and re.fullmatch(r"-?[0-9]+", v.strip()):
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise BadValue(f"expected an integer in {lo}..{hi}, got {v!r}", field=key)
    return v


def _meta_hex(d: Mapping, key: str) -> bytes:
    v = d.get(key, "")
    try:
        b = bytes.fromhex(v) if isinstance(v, str) else None
    except ValueError:
        b = None
    if b is None:
        raise BadValue(f"expected hex bytes, got {v!r}", field=key)
    if len(b) & 3:
        raise BadValue(f"{len(b)} bytes is not a multiple of 4 (pcapng pads to 32 bits)",
                       field=key)
    return b


def _check_keys(d: Mapping, known: tuple[str, ...], layer: str) -> None:
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise BadValue(f"unknown key(s) {unknown}; known: {list(known)}", layer=layer)


def meta_from_dict(obj: Mapping[str, object], byte_order: str = "little"
                   ) -> tuple[str, dict[str, object]] | Block | None:
    """A format line -> ``("pcap", CaptureWriter keyword arguments)`` or a :class:`Block`
    (IDBs and other blocks in ``byte_order``, the current section's); ``None`` for a record.
    Raises :class:`~wire.errors.BadValue` naming the key at fault."""
    if len(obj) != 1:
        return None
    (key, d), = obj.items()
    if key not in META_KEYS:
        return None
    if not isinstance(d, Mapping):
        raise BadValue(f"expected a JSON object, got {type(d).__name__}", layer=key)
    if key == "pcap":
        _check_keys(d, tuple(DEFAULT_PCAP_HEADER), key)
        full = {**DEFAULT_PCAP_HEADER, **d}
        bo, res, ver = full["byte_order"], full["ts_resolution"], full["version"]
        if bo not in ("little", "big"):
            raise BadValue(f"expected 'little' or 'big', got {bo!r}", layer=key,
                           field="byte_order")
        if res not in ("ns", "us"):
            raise BadValue(f"expected 'ns' or 'us', got {res!r}", layer=key,
                           field="ts_resolution")
        if not (isinstance(ver, list) and len(ver) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 0xFFFF
                        for x in ver)):
            raise BadValue(f"expected [major, minor], got {ver!r}", layer=key, field="version")
        return "pcap", {"byte_order": bo, "nanosecond": res == "ns", "version": tuple(ver),
                        "thiszone": _meta_int(full, "thiszone", -(1 << 31), (1 << 31) - 1),
                        "sigfigs": _meta_int(full, "sigfigs", 0, 0xFFFF_FFFF),
                        "snaplen": _meta_int(full, "snaplen", 0, 0xFFFF_FFFF),
                        "linktype": _meta_int(full, "linktype", 0, 0xFFFF),
                        "linktype_flags": _meta_int(full, "linktype_flags", 0, 0xFFFF),
                        "truncate": False}  # records as they were, whatever the snaplen
    try:
        if key == "pcapng_shb":
            _check_keys(d, ("byte_order", "version", "section_length", "options"), key)
            bo = d.get("byte_order", "little")
            if bo not in ("little", "big"):
                raise BadValue(f"expected 'little' or 'big', got {bo!r}", field="byte_order")
            ver = d.get("version", [1, 0])
            if not (isinstance(ver, list) and len(ver) == 2 and ver[0] == 1
                    and isinstance(ver[1], int) and not isinstance(ver[1], bool)
                    and 0 <= ver[1] <= 0xFFFF):
                raise BadValue(f"expected [1, minor], got {ver!r}", field="version")
            sl = _meta_int(d, "section_length", -(1 << 63), (1 << 63) - 1, -1)
            e = "<" if bo == "little" else ">"
            body = struct.pack(e + _SHB_FIXED, 0x1A2B3C4D, 1, ver[1], sl)
            return Block(_BT_SHB, body + _meta_hex(d, "options"), bo)
        e = "<" if byte_order == "little" else ">"
        if key == "pcapng_idb":
            _check_keys(d, ("linktype", "snaplen", "reserved", "options"), key)
            body = struct.pack(e + _IDB_FIXED, _meta_int(d, "linktype", 0, 0xFFFF, 1),
                               _meta_int(d, "reserved", 0, 0xFFFF, 0),
                               _meta_int(d, "snaplen", 0, 0xFFFF_FFFF, 0))
            return Block(_BT_IDB, body + _meta_hex(d, "options"), byte_order)
        _check_keys(d, ("type", "body"), key)
        btype = _meta_int(d, "type", 0, 0xFFFF_FFFF)
        if btype in (_BT_SHB, _BT_IDB, 2, 3, 6):
            raise BadValue(f"block type {btype} is written from its own line (pcapng_shb, "
                           "pcapng_idb) or from a record", field="type")
        return Block(btype, _meta_hex(d, "body"), byte_order)
    except BadValue as exc:
        if exc.layer is None:
            raise BadValue(str(exc), layer=key) from None
        raise


def record_to_dict(index: int, rec: Record, *, roce_ports: Iterable[int] = ROCE_PORTS,
                   scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> dict[str, object]:
    """Decode one record into the JSON schema."""
    out: dict[str, object] = {"index": index, "ts_ns": rec.ts_ns, "caplen": len(rec.data),
                              "len": rec.orig_len}
    if rec.interface:
        out["interface"] = rec.interface
    if rec.options:
        out["epb_options"] = rec.options.hex()
    if rec.linktype != LINKTYPE_ETHERNET:
        out["linktype"] = rec.linktype
    # By linktype: 1 Ethernet, 247 InfiniBand, 197 ERF; others raw with a problem.
    out.update(dissect_record(rec, roce_ports=roce_ports, scaleup=scaleup).to_dict())
    return out


def _int_key(obj: Mapping, key: str, default: int | None) -> int | None:
    v = obj.get(key)
    if v is None:  # absent, or null: the default
        v = default
    if v is None:
        return None
    if isinstance(v, str) and re.fullmatch(r"[0-9]+", v.strip()):
        v = int(v)  # a 64-bit value written as a string (decode --int-strings)
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise BadValue(f"expected a non-negative integer, got {v!r}", field=key)
    return v


def record_from_dict(obj: Mapping[str, object], prev_ts_ns: int | None = None, *,
                     recompute: bool = False, roce_ports: Iterable[int] = ROCE_PORTS,
                     scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> Record:
    """Build one record from the JSON schema.  Raises :class:`~wire.errors.BadValue`."""
    if not isinstance(obj, Mapping):
        raise BadValue(f"a record must be a JSON object, got {type(obj).__name__}")
    default_ts = 0 if prev_ts_ns is None else prev_ts_ns + DEFAULT_TS_STEP_NS
    ts_ns = _int_key(obj, "ts_ns", default_ts)
    linktype = _int_key(obj, "linktype", LINKTYPE_ETHERNET)
    interface = _int_key(obj, "interface", 0)
    caplen = _int_key(obj, "caplen", None)
    orig_len = _int_key(obj, "len", None)
    options = b""
    if "epb_options" in obj:
        v = obj["epb_options"]
        try:
            options = bytes.fromhex(v) if isinstance(v, str) else None
        except ValueError:
            options = None
        if options is None or len(options) & 3:
            raise BadValue(f"expected hex bytes, a multiple of 4 long, got {v!r}",
                           field="epb_options")
    layers = {k: v for k, v in obj.items() if k not in ("index", "ts_ns", "caplen", "len",
                                                         "interface", "linktype",
                                                         "epb_options")}
    data = build_record_data(linktype, layers, recompute=recompute, roce_ports=roce_ports,
                             scaleup=scaleup, ts_ns=ts_ns)
    full = len(data)
    if caplen is not None and not recompute:
        if orig_len is None and caplen < full:  # hand-written: "capture only caplen bytes"
            data = data[:caplen]
        elif orig_len is not None and caplen < orig_len:  # cut by snaplen: reproduce the cut
            data = data[:caplen]
            full = orig_len
        elif orig_len is not None and caplen > orig_len and caplen == len(data):
            full = orig_len  # an odd record (incl_len > orig_len) kept as it was
    assert ts_ns is not None and linktype is not None and interface is not None
    return Record(ts_ns=ts_ns, data=data, orig_len=full, linktype=linktype, interface=interface,
                  options=options)

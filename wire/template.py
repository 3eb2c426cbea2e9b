"""Fast crafting of many similar RoCEv2 frames: build one frame with :func:`wire.build`, then
patch a few fields per frame and fix the IPv4 header checksum and the ICRC; and of native
InfiniBand packets (:class:`IbTemplate`: :func:`wire.build_ib`, then the ICRC and VCRC).

Every patched field is located through its header's field table
(:meth:`wire.spec.HeaderSpec.byte_field`), so no bit position is written here.  The result is
byte-identical to what :func:`wire.build` gives for the same values (tested), at a fraction of
the cost: the simulator's captures and ACKs and bulk crafting use it.

.. code-block:: python

    t = RoceTemplate({"eth": {}, "ipv4": {"ecn": 2}, "udp": {},
                      "bth": {"opcode": "RC_RDMA_WRITE_MIDDLE", "dest_qp": 7},
                      "payload": {"data": "00" * 1024}}, patch=("bth.psn", "ipv4.ecn"))
    frame = t.make(**{"bth.psn": 41, "ipv4.ecn": 3})

Patchable fields: fields of the IP header (``ipv4.*``/``ipv6.*``) and of every header after UDP
up to the payload (``bth.*``, ``aeth.*``, ``reth.*`` ...) that lie within one byte or are
byte-aligned; of an IB packet, those of the BTH and the headers after it.  Length fields are
not patchable (the frame's size is the template's).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from .checksum import internet_checksum
from .ecn import ip_offset
from .ib import LRH, VCRC_BYTES, crc16, icrc_native, vcrc_bytes
from .ib_stack import build_ib, dissect_ib
from .pcapio import Record
from .roce import ICRC_BYTES, ICRC_STRUCT, icrc, icrc_bytes, icrc_state
from .spec import _STRUCT_CODES
from .stack import SPECS, build, dissect

__all__ = ["IbTemplate", "RoceTemplate", "craft_flow", "make_rows"]

_IPV4_CSUM = SPECS["ipv4"].byte_field("checksum")[0]
#: IP fields the ICRC masks (IBA Annex A17.8): changing them leaves the ICRC as it is.
_ICRC_MASKED = {"ipv4": {"dscp", "ecn", "ttl"}, "ipv6": {"dscp", "ecn", "flow_label",
                                                          "hop_limit"}}

#: Big-endian stores of a whole 2-, 4- and 8-byte field (:meth:`_Template.maker`), the struct
#: codes the field tables' compiled readers use (:data:`wire.spec._STRUCT_CODES`).
_PACKERS = {n: struct.Struct(">" + code).pack_into for n, code in _STRUCT_CODES.items() if n > 1}


def _layer_offsets(names: Sequence[str], first: str, at: int) -> dict[str, int]:
    """Byte offset of each fixed-size header of a dissected frame's ``names`` from layer
    ``first`` (at ``at``) up to its payload or ICRC, each size its field table's."""
    offsets: dict[str, int] = {}
    for name in names[names.index(first):]:
        if name in ("payload", "icrc"):
            break
        offsets[name] = at
        at += SPECS[name].size_bytes
    return offsets

class _Template:
    """What the two templates share: ``_frame`` (the packet as built), ``names`` and
    ``_slots`` (the patched fields: byte, shift, mask, width), ``_icrc_end`` (where the ICRC
    ends), ``_crc_from`` and ``_crc_state`` (the ICRC's running CRC over everything before the
    first patched byte, None when a patch changes an earlier byte it covers), ``_ip_patched``
    (the IPv4 checksum must be made again), ``_vcrc`` (a VCRC follows the ICRC: IB),
    ``_fast`` (:meth:`maker`'s function, made on first use)."""

    __slots__ = ()

    def maker(self) -> Callable[..., bytearray]:
        """A function of a value for every patched field, in ``patch`` order, giving what
        :meth:`make` gives: ``t.maker()(41, 3)`` is ``t.make(**{"bth.psn": 41, "ipv4.ecn":
        3})``, with a third of the work per frame (straight-line code made for the template
        once; the simulator's ACKs)."""
        if self._fast is None:
            self._fast = self._compile()
        return self._fast

    def _compile(self) -> Any:
        """:meth:`maker`'s function: each field written with one ``struct`` store
        (a 3-byte field with the byte before it, as it is in the frame at that moment), the
        range checked as :meth:`_patch` does, then :meth:`_finish`, inlined for a RoCEv2
        frame whose ICRC goes on from its precomputed prefix."""
        args = [f"v{i}" for i in range(len(self._slots))]
        body = []
        env: dict[str, Any] = {"FRAME": self._frame, "finish": self._finish, "_P": _PACKERS,
                               "crc32": zlib.crc32, "STATE": self._crc_state,
                               "ValueError": ValueError}
        for v, key, (_at, _shift, mask, _width) in zip(args, self.names, self._slots,
                                                        strict=True):
            body.append(f"    if {v} < 0 or {v} > {mask}:\n"
                        f"        raise ValueError(f'{key} = {{{v}}} does not fit (0..{mask})')")
        body.append("    f = bytearray(FRAME)")
        for v, (at, shift, mask, width) in zip(args, self._slots, strict=True):
            if width == 1:
                keep = ~(mask << shift) & 0xFF
                body.append(f"    f[{at}] = (f[{at}] & {keep}) | ({v} << {shift})")
            elif width in _PACKERS:
                body.append(f"    _P[{width}](f, {at}, {v})")
            elif width == 3 and at >= 1:
                body.append(f"    _P[4](f, {at - 1}, (f[{at - 1}] << 24) | {v})")
            else:
                body.append(f"    f[{at}:{at + width}] = {v}.to_bytes({width}, 'big')")
        if not self._vcrc and self._crc_state is not None and not self._ip_patched:
            end = self._udp_end - ICRC_BYTES
            body.append(f"    _LE(f, {end}, crc32(f[{self._crc_from}:{end}], STATE))")
            body.append("    return f")
            env["_LE"] = ICRC_STRUCT.pack_into
        else:
            body.append("    return finish(f)")
        src = f"def make({', '.join(args)}):\n" + "\n".join(body) + "\n"
        exec(compile(src, f"<{type(self).__name__}.maker>", "exec"), env)
        return env["make"]

    @property
    def size_bytes(self) -> int:
        return len(self._frame)

    def make_array(self, values: Any) -> Any:
        """Frames for many values of the template's one patched field, as a numpy ``uint8``
        array of shape ``(len(values), size_bytes)``: row ``i`` is byte for byte
        ``make(**{name: values[i]})`` (:func:`make_rows` of this one template)."""
        import numpy as np

        vals = np.asarray(values, dtype=np.int64).reshape(-1)
        return make_rows((self,), np.zeros(len(vals), dtype=np.intp), vals)

    def _patch(self, values: Mapping[str, int]) -> bytearray:
        """A copy of the frame with ``values`` patched in (no CRC or checksum made)."""
        f = bytearray(self._frame)
        for key, (at, shift, mask, width) in zip(self.names, self._slots, strict=True):
            v = values.get(key)
            if v is None:
                continue
            if v < 0 or v > mask:
                raise ValueError(f"{key} = {v} does not fit (0..{mask})")
            if width == 1:
                f[at] = (f[at] & ~(mask << shift) & 0xFF) | (v << shift)
            else:
                f[at:at + width] = v.to_bytes(width, "big")
        return f

    def _icrc_tables(self) -> Any:
        """The linear part of the ICRC for each byte of the patched field: ``t[j][b]`` is what
        changing that byte by XOR ``b`` does to the ICRC value (see :func:`make_rows`)."""
        import numpy as np

        if self._lin is None:
            at, _shift, _mask, width = self._slots[0]
            lo, end = self._crc_from, self._icrc_end - ICRC_BYTES
            zero = bytearray(end - lo)
            base = zlib.crc32(zero)
            tables = np.empty((width, 256), dtype=np.uint32)
            for j in range(width):
                pos = at + j - lo
                for b in range(256):
                    zero[pos] = b
                    tables[j, b] = zlib.crc32(zero) ^ base
                zero[pos] = 0
            self._lin = tables
        return self._lin


class RoceTemplate(_Template):
    """A RoCEv2 frame (IPv4 or IPv6, UDP 4791, BTH ...) to stamp out with some fields changed."""

    __slots__ = ("_crc_from", "_crc_state", "_fast", "_frame", "_icrc_end", "_ip", "_ip_patched",
                 "_lin", "_slots", "_udp", "_udp_end", "_v4", "names")
    _vcrc = False

    def __init__(self, layers: Mapping[str, Any], patch: Iterable[str] = ("bth.psn",)) -> None:
        frame = build(layers)
        d = dissect(frame)
        if "bth" not in d.names or "icrc" not in d.names:
            raise ValueError("a RoceTemplate needs a RoCEv2 frame (IP, UDP, BTH, ICRC)")
        loc = ip_offset(frame)
        assert loc is not None
        self._frame = bytes(frame)
        self._ip, ver = loc
        self._v4 = ver == 4
        hdr = d.get("ipv4")["ihl"] * 4 if self._v4 else SPECS["ipv6"].size_bytes
        self._udp = self._ip + hdr
        self._udp_end = self._icrc_end = self._udp + d.get("udp")["length"]
        offsets = {"ipv4" if self._v4 else "ipv6": self._ip,
                   **_layer_offsets(d.names, "udp", self._udp)}
        self.names = tuple(patch)
        slots = []
        self._ip_patched = False
        crc_from: int | None = len(frame)  # first datagram byte the patches may change
        for key in self.names:
            layer, _, field = key.partition(".")
            if layer not in offsets or layer == "udp":
                raise ValueError(f"cannot patch {key!r}: layer {layer!r} is not a patchable "
                                 f"header of this frame ({sorted(set(offsets) - {'udp'})})")
            byte, shift, mask = SPECS[layer].byte_field(field)
            width = 1 if mask << shift <= 0xFF else (mask.bit_length() + 7) // 8
            at = offsets[layer] + byte
            slots.append((at, shift, mask, width))
            if layer in _ICRC_MASKED:
                self._ip_patched = self._ip_patched or self._v4
                if field not in _ICRC_MASKED[layer]:
                    crc_from = None  # an IP field the ICRC covers: recompute it whole
            elif crc_from is not None:
                crc_from = min(crc_from, at)
        self._slots = tuple(slots)
        self._lin = None  # make_rows's ICRC tables, made on first use
        self._fast = None
        # The ICRC's running CRC over everything before the first patched byte (when that is
        # past the masked bytes), computed once: each frame only adds the rest.
        self._crc_from = self._crc_state = None
        if crc_from is not None and crc_from - self._udp >= 13:
            end = self._udp_end - ICRC_BYTES
            crc_from = min(crc_from, end)
            self._crc_from = crc_from
            self._crc_state = icrc_state(frame[self._ip:self._udp], frame[self._udp:crc_from])

    def make(self, **values: int) -> bytearray:
        """A new frame with ``values`` (keys as given in ``patch``; missing keys keep the
        template's value) and a correct IPv4 checksum and ICRC."""
        return self._finish(self._patch(values))

    def _finish(self, f: bytearray) -> bytearray:
        ip, udp = self._ip, self._udp
        if self._ip_patched:
            ck = ip + _IPV4_CSUM
            f[ck] = f[ck + 1] = 0
            f[ck:ck + 2] = internet_checksum(f[ip:udp]).to_bytes(2, "big")
        end = self._udp_end - ICRC_BYTES
        if self._crc_state is not None:
            value = zlib.crc32(f[self._crc_from:end], self._crc_state)
        else:
            value = icrc(f[ip:udp], f[udp:end])
        f[end:self._udp_end] = icrc_bytes(value)
        return f

    def stamp(self, count: int, start: Mapping[str, int] | None = None,
              step: int = 1) -> Iterator[bytearray]:
        """``count`` frames; each patched field starts at ``start[name]`` (default: the
        template's value) and advances by ``step`` per frame, wrapping at its width (a PSN
        sequence, a QP sweep...)."""
        if count < 0:
            raise ValueError("count must be >= 0")
        vals = []
        tpl = self._frame
        for key, (at, shift, mask, width) in zip(self.names, self._slots, strict=True):
            if start is not None and key in start:
                v = start[key]
            elif width == 1:
                v = (tpl[at] >> shift) & mask
            else:
                v = int.from_bytes(tpl[at:at + width], "big")
            if not 0 <= v <= mask:
                raise ValueError(f"{key} = {v} does not fit (0..{mask})")
            vals.append(v)
        slots = self._slots
        finish = self._finish
        if (len(slots) == 1 and slots[0][3] > 1 and step == 1 and self._crc_state is not None
                and not self._ip_patched):
            yield from self._stamp_one(count, vals[0])
            return
        for i in range(count):
            f = bytearray(tpl)
            for v0, (at, shift, mask, width) in zip(vals, slots, strict=True):
                v = (v0 + i * step) & mask if mask & (mask + 1) == 0 else (v0 + i * step) % (
                    mask + 1)
                if width == 1:
                    f[at] = (f[at] & ~(mask << shift) & 0xFF) | (v << shift)
                else:
                    f[at:at + width] = v.to_bytes(width, "big")
            yield finish(f)


    def _stamp_one(self, count: int, v0: int) -> Iterator[bytearray]:
        """The common case (one byte-aligned field such as the PSN counting up, ICRC from the
        precomputed prefix state): the same bytes as the general loop, less work per frame."""
        at, _shift, mask, width = self._slots[0]
        tpl = self._frame
        crc32, state, lo = zlib.crc32, self._crc_state, self._crc_from
        end = self._udp_end - ICRC_BYTES
        put_icrc = ICRC_STRUCT.pack_into
        modulus = mask + 1
        for i in range(count):
            f = bytearray(tpl)
            f[at:at + width] = ((v0 + i) % modulus).to_bytes(width, "big")
            put_icrc(f, end, crc32(memoryview(f)[lo:end], state))
            yield f


#: Where the VCRC masks nothing and the ICRC masks the LRH's VL and the BTH's byte 4 (FECN,
#: BECN, reserved): a patch from the BTH's byte 5 on leaves the ICRC's prefix as it is.
_BTH_ICRC_PREFIX = 5


class IbTemplate(_Template):
    """A local native InfiniBand packet (LRH, BTH and the headers after it, payload, ICRC,
    VCRC: :func:`wire.build_ib` of ``layers``) to stamp out with fields of the BTH and the
    headers after it changed; the ICRC (IBA 7.8.1) and the VCRC (IBA 7.8.2) are made again.
    :func:`make_rows` makes many at once as it does RoCEv2 frames."""

    __slots__ = ("_crc_from", "_crc_state", "_fast", "_frame", "_icrc_end", "_lin", "_slots",
                 "_vstate", "names")
    _vcrc = True
    _ip_patched = False

    def __init__(self, layers: Mapping[str, Any], patch: Iterable[str] = ("bth.psn",)) -> None:
        frame = build_ib(layers)
        d = dissect_ib(frame)
        if "grh" in d.names or not {"bth", "icrc", "vcrc"} <= set(d.names):
            raise ValueError("an IbTemplate needs a local InfiniBand packet (LRH, BTH, ICRC, "
                             "VCRC; no GRH)")
        self._frame = bytes(frame)
        self._icrc_end = len(frame) - VCRC_BYTES
        offsets = _layer_offsets(d.names, "bth", LRH.size_bytes)
        self.names = tuple(patch)
        slots = []
        crc_from = self._icrc_end - ICRC_BYTES
        for key in self.names:
            layer, _, field = key.partition(".")
            if layer not in offsets:
                raise ValueError(f"cannot patch {key!r}: layer {layer!r} is not a patchable "
                                 f"header of this packet ({sorted(offsets)})")
            byte, shift, mask = SPECS[layer].byte_field(field)
            width = 1 if mask << shift <= 0xFF else (mask.bit_length() + 7) // 8
            slots.append((offsets[layer] + byte, shift, mask, width))
            crc_from = min(crc_from, offsets[layer] + byte)
        self._slots = tuple(slots)
        self._lin = None
        self._fast = None
        self._crc_from = crc_from
        self._crc_state = None  # a patch inside the masked bytes: the ICRC made whole
        if crc_from >= offsets["bth"] + _BTH_ICRC_PREFIX:
            masked = frame[:self._icrc_end - ICRC_BYTES]
            self._crc_state = zlib.crc32(_masked_prefix(masked, crc_from))
        self._vstate = crc16(frame[:crc_from])

    def make(self, **values: int) -> bytearray:
        """A new packet with ``values`` (keys as given in ``patch``; missing keys keep the
        template's value) and a correct ICRC and VCRC."""
        return self._finish(self._patch(values))

    def _finish(self, f: bytearray) -> bytearray:
        end = self._icrc_end - ICRC_BYTES
        if self._crc_state is not None:
            value = zlib.crc32(memoryview(f)[self._crc_from:end], self._crc_state)
        else:
            value = icrc_native(f[:end], LRH.size_bytes)
        f[end:self._icrc_end] = icrc_bytes(value)
        # nothing before the first patched byte changed: the VCRC goes on from its state there
        f[self._icrc_end:] = vcrc_bytes(crc16(memoryview(f)[self._crc_from:self._icrc_end],
                                              self._vstate))
        return f

    def _vcrc_tables(self) -> tuple[Any, Any]:
        """The linear part of the VCRC: for each byte of the patched field (``t[j][b]``, as
        :meth:`_icrc_tables`) and for each ICRC byte (``u[k][b]``)."""
        at, _shift, _mask, width = self._slots[0]
        return (_vcrc_lin(self._icrc_end - at, width),
                _vcrc_lin(ICRC_BYTES, ICRC_BYTES))


def _masked_prefix(packet: bytes | bytearray, end: int) -> bytes:
    """The first ``end`` bytes of a local IB packet with the fields the ICRC masks set to
    ones (:func:`wire.ib.icrc_native`: the CRC over them is the ICRC's running CRC)."""
    from .bth import BTH
    from .ib import mask_fields

    buf = bytearray(packet[:max(end, LRH.size_bytes + BTH.size_bytes)])
    mask_fields(buf, LRH, 0, ("vl",))
    mask_fields(buf, BTH, LRH.size_bytes, ("fecn", "becn", "resv6"))
    return bytes(buf[:end])


#: :func:`_vcrc_lin`'s tables by (tail, width).
_VCRC_LIN: dict[tuple[int, int], Any] = {}


def _vcrc_lin(tail: int, width: int) -> Any:
    """``t[j][b]``: what XOR ``b`` on the ``j``-th of ``width`` bytes that start ``tail``
    bytes before the end of the VCRC's range does to the VCRC.  The CRC-16 is affine, so this
    is the CRC (no initial or final XOR) of that change alone, from its first byte (zeros
    before it change nothing); linear in ``b``, so made from the 8 bits (cached per place)."""
    import numpy as np

    from .ib import _VCRC_TABLE as table

    got = _VCRC_LIN.get((tail, width))
    if got is not None:
        return got
    out = np.zeros((width, 256), dtype=np.uint16)
    for j in range(width):
        bits = []
        for k in range(8):
            c = 0
            c = table[(c ^ (1 << k)) & 0xFF] ^ (c >> 8)
            for _ in range(tail - j - 1):
                c = table[c & 0xFF] ^ (c >> 8)
            bits.append(c)
        for b in range(256):
            v = 0
            for k in range(8):
                if b >> k & 1:
                    v ^= bits[k]
            out[j, b] = v
    _VCRC_LIN[(tail, width)] = out
    return out


def make_rows(templates: Sequence[_Template], which: Any, values: Any,
              out: Any = None) -> Any:
    """Frames of one length from a few templates that patch the same one field at the same
    place (the flows of a capture): row ``i`` is byte for byte
    ``templates[which[i]].make(**{name: values[i]})``, as a numpy ``uint8`` array of shape
    ``(len(values), size_bytes)``, written into ``out`` when given (any array of that shape
    and dtype, a strided view included: the frame columns of pcap records,
    :meth:`wire.pcapio.CaptureWriter.write_made_rows`), else a new one.

    Made without a CRC pass per frame where it can be (one byte-aligned field of two or more
    bytes after the masked bytes, such as ``bth.psn``): the ICRC is a CRC-32, affine over
    GF(2), so for frames of one length that differ only in that field
    ``crc(F) = crc(T) ^ L(F ^ T)`` with ``L`` linear: a table per field byte, 256 entries
    each, made once per template from ``zlib.crc32`` (the same for every template of one
    layout).  Every row starts as the first template; the bytes where another template
    differs (addresses, ports, QP, checksums: a few dozen) are then copied column by column.
    Anything else is :meth:`RoceTemplate.make` per row."""
    import numpy as np

    tpls = tuple(templates)
    if not tpls:
        raise ValueError("make_rows needs at least one template")
    first = tpls[0]
    if len(first.names) != 1:
        raise ValueError("make_rows needs templates with one patched field")
    name = first.names[0]
    slot = first._slots[0]
    size = first.size_bytes
    for t in tpls[1:]:
        if t.names != first.names or t._slots[0] != slot or t.size_bytes != size:
            raise ValueError("make_rows needs templates of one length patching one field at "
                             "one place")
    vals = np.asarray(values, dtype=np.int64).reshape(-1)
    idx = np.asarray(which, dtype=np.intp).reshape(-1)
    n = len(vals)
    if len(idx) != n:
        raise ValueError("make_rows takes one template index per value")
    at, _shift, mask, width = slot
    if n and (int(vals.min()) < 0 or int(vals.max()) > mask):
        bad = vals[(vals < 0) | (vals > mask)][0]
        raise ValueError(f"{name} = {int(bad)} does not fit (0..{mask})")
    if n and (int(idx.min()) < 0 or int(idx.max()) >= len(tpls)):
        raise ValueError(f"make_rows: template index out of range (0..{len(tpls) - 1})")
    if out is None:
        out = np.empty((n, size), dtype=np.uint8)
    elif out.shape != (n, size) or out.dtype != np.uint8:
        raise ValueError(f"make_rows: out must be a ({n}, {size}) uint8 array")
    if not n:
        return out
    layout = (first._crc_from, first._icrc_end, first._vcrc)
    if width < 2 or any(t._crc_state is None or t._ip_patched
                        or (t._crc_from, t._icrc_end, t._vcrc) != layout for t in tpls):
        for i, (g, v) in enumerate(zip(idx.tolist(), vals.tolist(), strict=True)):
            out[i] = np.frombuffer(tpls[g].make(**{name: v}), dtype=np.uint8)
        return out
    frames = np.frombuffer(b"".join(t._frame for t in tpls), dtype=np.uint8).reshape(
        len(tpls), size)
    out[...] = frames[0]
    if len(tpls) > 1:
        cols = np.flatnonzero((frames != frames[0]).any(axis=0))
        if len(cols):
            out[:, cols] = np.ascontiguousarray(frames[:, cols]).take(idx, axis=0)
    diff = np.zeros(n, dtype=np.uint32)
    lin = first._icrc_tables()
    vdiff = np.zeros(n, dtype=np.uint16) if first._vcrc else None
    vlin = first._vcrc_tables() if first._vcrc else None
    for j in range(width):
        byte = ((vals >> (8 * (width - 1 - j))) & 0xFF).astype(np.uint8)
        out[:, at + j] = byte
        change = byte ^ frames[:, at + j].take(idx)
        diff ^= lin[j][change]
        if vdiff is not None:
            vdiff ^= vlin[0][j][change]
    hi = first._icrc_end
    end = hi - ICRC_BYTES
    icrc0 = np.array([int.from_bytes(t._frame[end:hi], "little") for t in tpls],
                     dtype=np.uint32)
    out[:, end:hi] = (diff ^ icrc0.take(idx)).astype("<u4").view(
        np.uint8).reshape(-1, ICRC_BYTES)
    if vdiff is not None:  # the VCRC covers the ICRC too (sent least significant byte first)
        for k in range(ICRC_BYTES):
            vdiff ^= vlin[1][k][((diff >> (8 * k)) & 0xFF).astype(np.uint8)]
        vcrc0 = np.array([int.from_bytes(t._frame[hi:hi + VCRC_BYTES], "little") for t in tpls],
                         dtype=np.uint16)
        out[:, hi:hi + VCRC_BYTES] = (vdiff ^ vcrc0.take(idx)).astype("<u2").view(
            np.uint8).reshape(-1, VCRC_BYTES)
    return out


def craft_flow(layers: Mapping[str, Any], count: int, *, vary: Iterable[str] = ("bth.psn",),
               start: Mapping[str, int] | None = None, ts_ns: int = 0, gap_ns: int = 0,
               ) -> Iterator[Record]:
    """``count`` records of one RoCEv2 flow: the frame ``layers`` builds (``wire.build``), with
    each field in ``vary`` counting up by one per frame from ``start`` (default: the value in
    ``layers``), at ``ts_ns``, ``ts_ns + gap_ns``, ...  IPv4 checksum and ICRC are valid."""
    if gap_ns < 0 or ts_ns < 0:
        raise ValueError("ts_ns and gap_ns must be >= 0")
    t = RoceTemplate(layers, patch=tuple(vary))
    n = t.size_bytes
    for i, frame in enumerate(t.stamp(count, start)):
        yield Record(ts_ns + i * gap_ns, bytes(frame), n)

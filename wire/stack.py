"""Dispatch between headers: ``dissect(frame) -> Decoded`` and ``build(dict) -> bytes``.

This is the only hand-written layering code; every header's bits come from its field table.
The dict shape of :meth:`Decoded.to_dict` and the input of :func:`build` are the same JSON
schema (``docs/reference/jsonl.md``), so ``build(dissect(f).to_dict()) == f`` for every frame.

Rules stated once:

* RoCEv2 is recognised by the UDP **destination** port only (IBA Annex A17; 4791 by default,
  more via ``roce_ports``).  The source port is flow entropy.
* A RoCEv2 datagram ends at the UDP length, not at the end of the frame: bytes after the IP
  datagram are the Ethernet padding, shown as ``trailer``.
* Truncation explained by the capture's snaplen (``orig_len`` > captured bytes) is not a
  problem: what is missing is reported as not captured (``icrc.valid = None``).  Length fields
  that claim more than the frame holds, on a record that was not cut, are problems.
* Bytes after the last header that could be decoded (unknown EtherType or protocol, or a
  header cut short) are kept as ``raw``; nothing is ever dropped.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from typing import Any

from .bth import BTH, EXT_HEADERS, opcode_name
from .errors import BadValue, describe
from .esun import ESUN
from .ethernet import ETHERNET, MIN_FRAME_BYTES, VLAN_TAG, VLAN_TPIDS, EtherType
from .ib import IB_SPECS
from .ib_ext import AETH, CNP, EXT_SPECS, AethKind, NakCode, aeth_decode, aeth_syndrome
from .ipv4 import IPPROTO_UDP, IPV4, ipv4_checksum
from .ipv6 import IPV6
from .pfc import MAC_CONTROL, PAUSE, PAUSE_DST, PFC, MacControlOpcode
from .roce import _MASKED_END as _ICRC_HEAD
from .roce import CNP_OPCODE, ICRC_BYTES, icrc, icrc_bytes, icrc_ipv4_ok, icrc_state
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .spec import Field, HeaderSpec, Layer, format_value, parse_value, stack_getter
from .sue import (
    AFH_FORMS,
    AFH_GEN1,
    MAX_TXN_DATA_BYTES,
    RCRC,
    SUE_RH,
    SUE_TXN8,
    SUE_TXN16,
    SueOp,
    rcrc,
    txn_spec,
)
from .sunh import SUNH
from .udp import ROCEV2_PORT, UDP, udp_checksum

__all__ = ["Decoded", "dissect", "build", "ROCE_PORTS", "LAYER_ORDER", "SPECS"]

#: Default UDP destination ports recognised as RoCEv2.
ROCE_PORTS: frozenset[int] = frozenset({ROCEV2_PORT})

#: Every layer key of the schema, in wire order.
LAYER_ORDER = (
    "afh", "eth", "vlan", "ipv4", "ipv6", "esun", "sunh", "udp", "bth", "rdeth", "deth",
    "xrceth", "reth", "atomic_eth", "aeth", "atomic_ack_eth", "immdt", "ieth", "cnp",
    "mac_control", "pfc", "pause", "sue_rh", "sue_txn", "rcrc", "payload", "icrc",
)
#: Every header's field table by layer name (the input of every derived form).
SPECS: dict[str, HeaderSpec] = {
    s.name: s for s in (ETHERNET, VLAN_TAG, IPV4, IPV6, UDP, BTH, *EXT_SPECS.values(),
                        MAC_CONTROL, PFC, PAUSE, ESUN, SUNH, *AFH_FORMS.values(), SUE_RH,
                        SUE_TXN8, SUE_TXN16, RCRC, *IB_SPECS.values())
}
_RECORD_KEYS = ("index", "ts_ns", "caplen", "len", "interface", "linktype")
_EXTRA_KEYS = ("raw", "trailer", "problems")


class _Lazy(tuple):
    """A layer found but not decoded yet: ``(fn, *args)``; ``fn(name, *args)`` makes the layer
    stored under ``name``, on first access.  The fast path stores the one marker
    :data:`_FAST` for every layer of a frame instead, made from the Decoded's ``_fast``
    tuple (:func:`_roce4_layer`).

    Dissection finds every header's boundaries and does every check that decides
    ``problems`` eagerly, reading only the raw fields it needs (:meth:`HeaderSpec.getter`);
    formatting a layer's fields (addresses as text, opcode names, hex data) waits until the
    layer is read.  The frame is an immutable ``bytes``, so decoding later gives what decoding
    at once would have.  (A tuple: built in C, the cheapest object per layer.)
    """

    __slots__ = ()

    def make(self, name: str) -> object:
        return self[0](name, *self[1:])


class Decoded:
    """A dissected frame: layers by name in wire order, plus what did not fit a header.

    ``layers["vlan"]`` is a list of tags (outer first); every other layer is a
    :class:`~wire.spec.Layer`.  ``raw`` holds bytes after the last decoded header that were
    not dissected; ``trailer`` the bytes after the IP datagram or MAC Control frame
    (Ethernet padding); ``problems`` one line per thing wrong with the frame.  ``cut`` is
    true when dissection stopped inside a header (``to_dict`` then always shows ``raw``, so
    that :func:`build` stops at the same place).

    Layers are decoded on first access (``d["bth"]``, ``d.layers``, ``to_dict()``); ``names``
    and ``in`` need no decoding.  The checks that cost a pass over bytes (the IPv4 header
    checksum, the UDP checksum, the ICRC) run when their result is first needed: reading
    ``problems`` (or ``to_dict()``, ``==``, pickling), or the layer that shows it
    (``ipv4.checksum_ok``, ``icrc.valid``); each runs once per frame, and ``problems`` lists
    what it finds at the place it would have had if run at once (see :class:`_Check`).
    """

    __slots__ = ("_cells", "_fast", "_layers", "_pending", "_problems", "caplen", "cut",
                 "orig_len", "raw", "trailer")

    def __init__(self, layers: dict[str, object] | None = None,
                 problems: list[str] | None = None, raw: bytes = b"",
                 trailer: bytes | None = None, cut: bool = False, caplen: int = 0,
                 orig_len: int = 0) -> None:
        self._layers: dict[str, object] = {} if layers is None else layers
        self._problems: list = [] if problems is None else problems
        self._pending = False
        self._fast: tuple | None = None
        self._cells: tuple | list | None = None
        self.raw = raw
        self.trailer = trailer
        self.cut = cut
        self.caplen = caplen
        self.orig_len = orig_len

    @property
    def problems(self) -> list[str]:
        """One line per thing wrong with the frame (the list itself: changes to it are kept).
        Deferred checks run on first access."""
        p = self._problems
        if self._pending:
            fast = self._fast
            if fast is not None and self._cells is None:
                # A fast-path frame none of whose checks has run: when they all pass (the
                # usual case) this says so at once and makes no check's cell: the UDP
                # checksum is 0 (not used, as RoCEv2 senders leave it), the IPv4 header's is
                # right (ipv4_checksum_ok, inline: a version 4 header is never zero but for
                # its checksum) and so is the ICRC.  Else the general path's cells, into p.
                frame, icrc_at, _pos, _pad, _exts, ip_sum, udp_sum = fast
                if (not udp_sum and ip_sum != 0xFFFF
                        and not int.from_bytes(frame[_IP_OFF:_UDP_OFF], "big") % 0xFFFF
                        and icrc_ipv4_ok(frame, _IP_OFF, icrc_at + ICRC_BYTES)):
                    self._pending = False
                    self._cells = _CLEAN_CELLS
                    return p
                _roce4_cells(self)
            self._pending = False
            out = []
            for x in p:
                if type(x) is str:
                    out.append(x)
                    continue
                if x[0] is not None:  # a deferred check (see _check_ok), run now
                    x[:] = (None, *x[0](*x[1:]))
                if x[2] is not None:
                    out.append(x[2])
            p[:] = out
        return p

    @problems.setter
    def problems(self, value: list[str]) -> None:
        self._problems = value
        self._pending = False

    @property
    def layers(self) -> dict[str, object]:
        """Every layer, decoded (the dict itself: changes to it are kept)."""
        store = self._layers
        for name, v in store.items():
            if type(v) is _Lazy:
                store[name] = _roce4_layer(self, name) if v is _FAST else v[0](name, *v[1:])
        return store

    @layers.setter
    def layers(self, value: dict[str, object]) -> None:
        self._layers = value

    def __getitem__(self, name: str):
        v = self._layers[name]
        if type(v) is _Lazy:
            v = self._layers[name] = (_roce4_layer(self, name) if v is _FAST else
                                      v[0](name, *v[1:]))
        return v

    def __contains__(self, name: object) -> bool:
        return name in self._layers

    def get(self, name: str, default: Any = None) -> Any:
        v = self._layers.get(name, default)
        if type(v) is _Lazy:
            v = self._layers[name] = (_roce4_layer(self, name) if v is _FAST else
                                      v[0](name, *v[1:]))
        return v

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return (self.layers, self.problems, self.raw, self.trailer, self.cut, self.caplen,
                self.orig_len) == (other.layers, other.problems, other.raw, other.trailer,
                                   other.cut, other.caplen, other.orig_len)

    __hash__ = None  # type: ignore[assignment]

    def __reduce__(self) -> tuple:
        # pickle and copy see the decoded layers (a deferred layer holds compiled code)
        return (Decoded, (self.layers, self.problems, self.raw, self.trailer, self.cut,
                          self.caplen, self.orig_len))

    def __repr__(self) -> str:
        return (f"Decoded(layers={self.layers!r}, problems={self.problems!r}, raw={self.raw!r}, "
                f"trailer={self.trailer!r}, cut={self.cut!r}, caplen={self.caplen!r}, "
                f"orig_len={self.orig_len!r})")

    @property
    def names(self) -> list[str]:
        return list(self._layers)

    def to_dict(self) -> dict[str, object]:
        """The JSON schema of ``docs/reference/jsonl.md`` (without the record keys)."""
        out: dict[str, object] = {}
        store = self._layers
        for name, layer in store.items():
            if type(layer) is _Lazy:
                layer = store[name] = (_roce4_layer(self, name) if layer is _FAST else
                                       layer[0](name, *layer[1:]))
            if isinstance(layer, list):
                out[name] = [dict(t) for t in layer]
            else:
                out[name] = dict(layer)
        if self.raw or self.cut:
            out["raw"] = self.raw.hex()
        if self.trailer is not None:
            out["trailer"] = self.trailer.hex()
        if self.problems:
            out["problems"] = list(self.problems)
        return out


# ====================================================================== checks
# A deferred check is a plain list (the cheapest mutable object to make): ``[fn, *args]``
# until it has run, ``[None, ok, message]`` after; ``fn(*args)`` returns ``(ok, message or
# None)``.  The same cell sits in ``Decoded._problems`` (where its message goes) and in the
# deferred layer that shows ``ok``, so it runs once whichever is read first.  The frame is an
# immutable ``bytes``: running later gives what running at once would have.

def _check_ok(cell: list) -> bool:
    if cell[0] is not None:
        cell[:] = (None, *cell[0](*cell[1:]))
    return cell[1]


def _check_message(cell: list) -> str | None:
    if cell[0] is not None:
        cell[:] = (None, *cell[0](*cell[1:]))
    return cell[2]


def _ipv4_check(ip_header: bytes, checksum: int) -> tuple[bool, str | None]:
    calc = ipv4_checksum(ip_header)
    if calc == checksum:
        return True, None
    return False, f"ipv4.checksum: 0x{checksum:04x} on the wire, 0x{calc:04x} computed"


def _udp_check(version: int, ip_header: bytes, datagram: bytes, checksum: int
               ) -> tuple[bool, str | None]:
    src, dst = (ip_header[12:16], ip_header[16:20]) if version == 4 else (
        ip_header[8:24], ip_header[24:40])
    calc = udp_checksum(version, src, dst, datagram)
    if calc == checksum:
        return True, None
    return False, f"udp.checksum: 0x{checksum:04x} on the wire, 0x{calc:04x} computed"


def _icrc_check(frame: bytes, uoff: int, icrc_at: int, ip_header: bytes
                ) -> tuple[bool, str | None]:
    wire_val = int.from_bytes(frame[icrc_at:icrc_at + ICRC_BYTES], "little")
    # icrc() of the datagram, without copying the payload twice (roce.icrc_state's use)
    calc = zlib.crc32(memoryview(frame)[uoff + _ICRC_HEAD:icrc_at],
                      icrc_state(ip_header, frame[uoff:uoff + _ICRC_HEAD]))
    if calc == wire_val:
        return True, None
    return False, f"icrc: 0x{wire_val:08x} on the wire, 0x{calc:08x} computed"


# ====================================================================== dissect
class _Ctx:
    """State of one dissection."""

    __slots__ = ("ambiguous", "d", "frame", "n", "orig_len", "roce_ports", "sc", "snapped")

    def __init__(self, frame: bytes, orig_len: int, roce_ports: frozenset[int],
                 sc: ScaleUpConfig = DEFAULT_SCALEUP) -> None:
        self.sc = sc
        self.frame = frame
        self.n = len(frame)
        self.orig_len = orig_len
        self.snapped = orig_len > self.n
        self.d = Decoded(caplen=self.n, orig_len=orig_len)
        self.roce_ports = roce_ports
        self.ambiguous = False

    def short(self, layer: str, need: int, have: int, off: int, end: int | None = None) -> None:
        """A header does not fit in what was captured: raw remainder (up to ``end``, the end of
        the enclosing datagram when there is one), problem unless snapped."""
        self.d.raw = bytes(self.frame[off:end])
        self.d.cut = True
        if not self.snapped:
            self.d._problems.append(
                f"{layer}: truncated at byte {off}: needs {need} bytes, {max(have, 0)} present")


# The raw fields dissection reads to find the next header and decide ``problems``.
_IP4_GET = IPV4.getter("version", "ihl", "flags", "frag_offset", "total_length", "protocol",
                       "checksum")
_IP6_GET = IPV6.getter("version", "payload_length", "next_header")
_UDP_GET = UDP.getter("dport", "length", "checksum")
_BTH_GET = BTH.getter("opcode", "pad_count")
_MC_GET = MAC_CONTROL.getter("opcode")
_PFC_GET = PFC.getter("class_enable")
_ETH_DST_GET = ETHERNET.getter("dst")
_ETH_DST = ETHERNET.field("dst")
_PAUSE_DST_RAW = parse_value(_ETH_DST, PAUSE_DST)
_MAC_CONTROL_SPECS = {MacControlOpcode.PFC: PFC, MacControlOpcode.PAUSE: PAUSE}


def _spec_layer(_name: str, spec: HeaderSpec, frame: bytes, off: int, extra: dict | None
                ) -> Layer:
    """``spec`` decoded at ``off``, then the derived keys of ``extra`` (in their order).
    (The layer makers call the compiled ``HeaderSpec._layer`` directly: no length check and
    no Python-level ``Layer.__init__``; the header is known to fit.)"""
    layer = spec._layer(frame, off)
    if extra:
        layer.update(extra)
    return layer


def _eth_tagged(_name: str, frame: bytes, type_off: int) -> Layer:
    """The Ethernet header of a tagged frame: addresses, then the EtherType after the tags."""
    return Layer("eth", ETHERNET._unpack(frame[:12] + frame[type_off:type_off + 2]))


#: opcode_name of every opcode, by opcode.
_OPCODE_NAMES = tuple(opcode_name(op) for op in range(256))


def _bth_layer(_name: str, frame: bytes, off: int) -> Layer:
    bth = BTH._layer(frame, off)
    bth["opcode_name"] = _OPCODE_NAMES[bth["opcode"]]
    return bth


def _ext_layer(name: str, spec: HeaderSpec, frame: bytes, off: int) -> Layer:
    layer = spec._layer(frame, off)
    layer.name = name
    if spec is AETH:
        layer.update(aeth_decode(layer["syndrome"]))
    elif spec is CNP and layer["reserved"] == "00" * 16:
        del layer["reserved"]
    return layer


def _ipv4_layer(_name: str, frame: bytes, off: int, hlen: int, check: list) -> Layer:
    layer = IPV4._layer(frame, off)
    if hlen > 20:
        layer["options"] = frame[off + 20:off + hlen].hex()
    layer["checksum_ok"] = _check_ok(check)
    return layer


def _icrc_layer(_name: str, frame: bytes, icrc_at: int, check: list) -> Layer:
    return Layer("icrc", {"value": int.from_bytes(frame[icrc_at:icrc_at + ICRC_BYTES], "little"),
                          "valid": _check_ok(check)})


def _payload_layer(_name: str, frame: bytes, start: int, end: int, pad: int, n: int) -> Layer:
    data = frame[start:min(end - pad, n)]
    p = Layer("payload", {"length": end - pad - start, "data": data.hex()})
    if pad:
        p["pad"] = frame[end - pad:min(end, n)].hex()
    return p


def dissect(frame: bytes | bytearray | memoryview, orig_len: int | None = None, *,
            roce_ports: Iterable[int] = ROCE_PORTS,
            scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> Decoded:
    """Decode an Ethernet frame.  Never raises on any input; problems go to ``problems``.

    ``orig_len`` is the length on the wire (a pcap record's orig_len); when larger than the
    frame, missing bytes are reported as not captured rather than as errors.  ``scaleup``
    says where the scale-up headers (ESUN, SUNH, AFH, SUE) are found (placeholder EtherTypes).
    Boundaries and the cheap checks are done at once; each layer's fields are decoded when
    first read, the checksums and the ICRC checked when first needed (see :class:`Decoded`).
    A whole untagged RoCEv2-over-IPv4 frame whose lengths agree takes a fast path with the
    same result (below; every other frame the general path, :func:`_dissect`).
    """
    if type(frame) is not bytes:
        frame = bytes(frame)
    ports = roce_ports if isinstance(roce_ports, frozenset) else frozenset(roce_ports)
    n = len(frame)
    if orig_len is None:
        orig_len = n
    if n < _FAST_MIN_BYTES or orig_len > n:
        return _dissect(frame, orig_len, ports, scaleup)
    # The fast path: Ethernet + IPv4 (no options, not a fragment) + UDP to a RoCEv2 port +
    # BTH + its extended headers + payload + ICRC, every length in agreement, nothing cut.
    # It gives what the general path gives (tests/test_dissect_speed_paths.py).
    (etype, version, ihl, flags, frag_offset, total, proto, ip_sum, dport, ulen, udp_sum, op,
     pad) = _ROCE4_GET(frame)
    ip_end = _IP_OFF + total
    if (etype != _ETHERTYPE_IPV4 or version != 4 or ihl != _IP_WORDS or proto != IPPROTO_UDP
            or frag_offset or flags & 1 or ip_end > n or ulen != ip_end - _UDP_OFF
            or ulen < _MIN_ULEN or dport not in ports or dport == scaleup.sue_udp_port):
        return _dissect(frame, orig_len, ports, scaleup)
    pos, exts, with_payload, without_payload = _EXT_PLANS[op]
    icrc_at = ip_end - ICRC_BYTES
    if pos > icrc_at or pad > icrc_at - pos:
        return _dissect(frame, orig_len, ports, scaleup)
    # Every layer is the one marker _FAST (a copy of the opcode's dict of them: cheaper than
    # building one), made from d._fast when read (_roce4_layer); the checks run when first
    # needed, on the same tuple (Decoded.problems, _roce4_cells).
    d = _new(Decoded)
    d._layers = (with_payload if icrc_at > pos else without_payload).copy()
    d._fast = (frame, icrc_at, pos, pad, exts, ip_sum, udp_sum)
    d._cells = None
    d._problems = []
    d._pending = True
    d.raw = b""
    d.trailer = frame[ip_end:] if ip_end < n else None
    d.cut = False
    d.caplen = n
    d.orig_len = orig_len
    return d


# The fast path's stack: Ethernet (untagged) + IPv4 without options + UDP + BTH, read by one
# struct.unpack_from compiled from the four field tables (wire.spec.stack_getter).
_ROCE4_GET = stack_getter(
    (ETHERNET, ("type",)),
    (IPV4, ("version", "ihl", "flags", "frag_offset", "total_length", "protocol", "checksum")),
    (UDP, ("dport", "length", "checksum")),
    (BTH, ("opcode", "pad_count")))
_IP_OFF = ETHERNET.size_bytes
_IP_WORDS = IPV4.size_bytes // 4          # IHL of a header without options
_UDP_OFF = _IP_OFF + IPV4.size_bytes
_BTH_OFF = _UDP_OFF + UDP.size_bytes
_PAY_OFF = _BTH_OFF + BTH.size_bytes
_MIN_ULEN = UDP.size_bytes + BTH.size_bytes + ICRC_BYTES
_FAST_MIN_BYTES = max(MIN_FRAME_BYTES, _PAY_OFF + ICRC_BYTES)
_ETHERTYPE_IPV4 = int(EtherType.IPV4)


#: The marker every layer of a fast-path frame holds until read (:func:`_roce4_layer`).
_FAST = _Lazy((None,))


def _ext_plan(op: int) -> tuple[int, dict[str, tuple[HeaderSpec, int]], dict[str, _Lazy],
                                dict[str, _Lazy]]:
    """For opcode ``op`` after a BTH at ``_BTH_OFF``: where the payload starts, the extended
    headers' (spec, offset) by name, and the frame's layers (every one :data:`_FAST`, in wire
    order) with and without a payload."""
    exts, pos = {}, _PAY_OFF
    for h in EXT_HEADERS.get(op, ("", ()))[1]:
        exts[h] = (EXT_SPECS[h], pos)
        pos += EXT_SPECS[h].size_bytes
    names = ("eth", "ipv4", "udp", "bth", *exts)
    return (pos, exts, dict.fromkeys((*names, "payload", "icrc"), _FAST),
            dict.fromkeys((*names, "icrc"), _FAST))


def _roce4_layer(d: Decoded, name: str) -> Layer:
    """Any layer of a frame the fast path decoded (the makers of the general path)."""
    if name == "bth":  # _bth_layer, inline (the layer most read)
        bth = _BTH_LAYER(d._fast[0], _BTH_OFF)  # type: ignore[index]
        bth["opcode_name"] = _OPCODE_NAMES[bth["opcode"]]
        return bth
    frame, icrc_at, pos, pad, exts, _ip_sum, _udp_sum = d._fast  # type: ignore[misc]
    if name == "eth":
        return _spec_layer(name, ETHERNET, frame, 0, None)
    if name == "ipv4":
        return _ipv4_layer(name, frame, _IP_OFF, IPV4.size_bytes, _roce4_cells(d)[0])
    if name == "udp":
        return _spec_layer(name, UDP, frame, _UDP_OFF, None)
    if name == "payload":
        return _payload_layer(name, frame, pos, icrc_at, pad, len(frame))
    if name == "icrc":
        return _icrc_layer(name, frame, icrc_at, _roce4_cells(d)[-1])
    spec, at = exts[name]
    return _ext_layer(name, spec, frame, at)


#: The cells of a fast-path frame whose checks all passed (IPv4 header, ICRC): run, no message.
_CLEAN_CELLS = ((None, True, None), (None, True, None))


def _roce4_cells(d: Decoded) -> tuple | list:
    """The deferred checks of a fast-path frame as the general path makes them (IPv4 header
    first, the ICRC last, the UDP checksum between when it is not 0), made on first need;
    while ``problems`` is pending they go into it, in that order."""
    cells = d._cells
    if cells is None:
        frame, icrc_at, _pos, _pad, _exts, ip_sum, udp_sum = d._fast  # type: ignore[misc]
        ip_header = frame[_IP_OFF:_UDP_OFF]
        ip_check = [_ipv4_check, ip_header, ip_sum]
        icrc_check = [_icrc_check, frame, _UDP_OFF, icrc_at, ip_header]
        cells = d._cells = [ip_check, [_udp_check, 4, ip_header,
                                       frame[_UDP_OFF:icrc_at + ICRC_BYTES], udp_sum],
                            icrc_check] if udp_sum else [ip_check, icrc_check]
        if d._pending:
            d._problems.extend(cells)
    return cells


_EXT_PLANS = {op: _ext_plan(op) for op in range(256)}
_new = object.__new__
_BTH_LAYER = BTH._layer


def _roce4_untouched(d: Decoded) -> tuple | None:
    """The fast path's tuple of ``d`` (``d._fast``) if ``d`` came from :func:`dissect`'s fast
    path and no layer of it has been read, replaced, added or removed since (its layers are
    then exactly what the frame's bytes say); else None.  For readers of a few fields of
    many frames (``wire.stats.summary_line``) that can take them from the bytes at once."""
    fast = d._fast
    if fast is None:
        return None
    store = d._layers
    if len(store) != 5 + len(fast[4]) + (fast[1] > fast[2]):
        return None
    for v in store.values():
        if v is not _FAST:
            return None
    return fast


def _dissect(frame: bytes, orig_len: int, ports: frozenset[int], scaleup: ScaleUpConfig
             ) -> Decoded:
    """The general path of :func:`dissect` (every frame; ``frame`` is ``bytes``)."""
    c = _Ctx(frame, orig_len, ports, scaleup)
    d = c.d
    layers = d._layers
    n = c.n
    if n == 0:
        if not c.snapped:
            d._problems.append("empty record (0 bytes)")
        d.trailer = b""
        return d
    if n < 14:
        c.short("eth", 14, n, 0)
        _min_trailer(c)
        return d
    off = 12
    tags: list[Layer] = []
    while n - off >= 4 and ((frame[off] << 8) | frame[off + 1]) in VLAN_TPIDS:
        tags.append(Layer("vlan", VLAN_TAG.unpack(frame, off)))
        off += 4
    partial_tag = n - off >= 2 and ((frame[off] << 8) | frame[off + 1]) in VLAN_TPIDS
    if n - off < 2 or partial_tag:
        # The EtherType after the tags was not captured: eth.type is null, the rest is raw.
        eth = Layer("eth", ETHERNET.unpack(frame[:12] + b"\0\0"))
        eth["type"] = None
        layers["eth"] = eth
        if tags:
            layers["vlan"] = tags
        if partial_tag:
            c.short("vlan", 4, n - off, off)
        else:
            c.short("eth" if not tags else "vlan", 2, n - off, off)
        _min_trailer(c)
        return d
    etype = (frame[off] << 8) | frame[off + 1]  # the EtherType after the tags
    if tags:
        layers["eth"] = _Lazy((_eth_tagged, frame, off))
        layers["vlan"] = tags
    else:
        layers["eth"] = _Lazy((_spec_layer, ETHERNET, frame, 0, None))
    off += 2
    if etype == EtherType.IPV4:
        _ipv4(c, off)
    elif etype == EtherType.IPV6:
        _ipv6(c, off)
    elif etype == EtherType.MAC_CONTROL:
        _mac_control(c, off)
    elif etype == scaleup.esun_ethertype:
        _esun(c, off)
    elif etype == scaleup.sunh_ethertype:
        _sunh(c, off)
    elif etype == scaleup.afh_gen1_ethertype:
        _afh_gen1(c, off)
    elif etype == scaleup.sue_ethertype and not tags:
        _afh_gen2(c, off)
    elif off < n:
        d.raw = frame[off:]
    if n < MIN_FRAME_BYTES:
        _min_trailer(c)
    return d


def _min_trailer(c: _Ctx) -> None:
    # A frame under the Ethernet minimum with no padding shows trailer "" so that build()
    # does not pad it (a capture on the sending host sees frames before the NIC pads them).
    if c.d.trailer is None and c.n < MIN_FRAME_BYTES and not c.snapped:
        c.d.trailer = b""


def _ipv4(c: _Ctx, off: int) -> None:
    frame, n, d = c.frame, c.n, c.d
    if n - off < 20:
        c.short("ipv4", 20, n - off, off)
        return
    version, ihl, flags, frag_offset, total, proto, checksum = _IP4_GET(frame, off)
    hlen = ihl * 4
    if version != 4:
        d._problems.append(f"ipv4.version: {version} (expected 4)")
    if hlen < 20:
        d._layers["ipv4"] = _Lazy((_spec_layer, IPV4, frame, off, None))
        d._problems.append(f"ipv4.ihl: {ihl} is below the minimum 5")
        d.raw = frame[off + 20:]
        return
    if n - off < hlen:
        c.short("ipv4", hlen, n - off, off)
        return
    ip_header = frame[off:off + hlen]
    check = [_ipv4_check, ip_header, checksum]
    d._layers["ipv4"] = _Lazy((_ipv4_layer, frame, off, hlen, check))
    d._problems.append(check)
    d._pending = True
    end = off + total
    if total < hlen:
        d._problems.append(f"ipv4.total_length: {total} is less than the header length {hlen}")
        _mark_ambiguous(c)
        end = n
    else:
        end = _ip_extent(c, end, "ipv4.total_length", total, off, "Ethernet")
    pay = off + hlen
    if frag_offset or flags & 1:
        d.raw = frame[pay:min(end, n)]  # fragment: upper layers cannot be decoded alone
        return
    _ip_payload(c, proto, pay, end, ip_header, 4)


def _ipv6(c: _Ctx, off: int) -> None:
    frame, n, d = c.frame, c.n, c.d
    if n - off < 40:
        c.short("ipv6", 40, n - off, off)
        return
    version, payload_length, next_header = _IP6_GET(frame, off)
    d._layers["ipv6"] = _Lazy((_spec_layer, IPV6, frame, off, None))
    if version != 6:
        d._problems.append(f"ipv6.version: {version} (expected 6)")
    pay = off + 40
    end = _ip_extent(c, pay + payload_length, "ipv6.payload_length", payload_length, pay,
                     "IPv6")
    _ip_payload(c, next_header, pay, end, frame[off:pay], 6)


def _ip_extent(c: _Ctx, end: int, field: str, value: int, after: int, header: str) -> int:
    """Where the IP datagram ends.  Beyond the frame: fine if the snaplen explains it (the
    claimed end is kept), else a problem and the frame's end.  Within it: the rest is the
    Ethernet trailer.  The problem says ``field`` claims ``value`` but only the bytes after
    offset ``after`` (the end of the ``header`` header) follow."""
    if end <= c.n:
        _set_trailer(c, end)
        return end
    if c.snapped and end <= c.orig_len:
        return end
    c.d._problems.append(f"{field}: {value} but only {c.n - after} bytes follow the {header} "
                        f"header")
    _mark_ambiguous(c)
    return c.n


def _ip_payload(c: _Ctx, proto: int, pay: int, end: int, ip_header: bytes, version: int) -> None:
    if proto == IPPROTO_UDP:
        _udp(c, pay, end, ip_header, version)
    elif pay < min(end, c.n):
        c.d.raw = c.frame[pay:min(end, c.n)]


def _set_trailer(c: _Ctx, end: int) -> None:
    if end < c.n:
        c.d.trailer = c.frame[end:]


def _mark_ambiguous(c: _Ctx) -> None:
    c.ambiguous = True


def _udp(c: _Ctx, off: int, ip_end: int, ip_header: bytes, version: int) -> None:
    """``ip_end`` is where the IP datagram says it ends (may exceed the captured bytes)."""
    frame, n, d = c.frame, c.n, c.d
    avail = min(ip_end, n)
    if avail - off < 8:
        if ip_end - off < 8 and not c.snapped:
            d._problems.append(f"udp: the IP payload has {ip_end - off} bytes, a UDP header "
                              f"needs 8")
            d.raw = frame[off:avail]
        else:
            c.short("udp", 8, avail - off, off)
            d.raw = frame[off:avail]
        return
    dport, ulen, checksum = _UDP_GET(frame, off)
    d._layers["udp"] = _Lazy((_spec_layer, UDP, frame, off, None))
    if ulen < 8:
        d._problems.append(f"udp.length: {ulen} is less than the 8-byte header")
        d.raw = frame[off + 8:avail]
        return
    end = off + ulen
    if end > ip_end:
        d._problems.append(f"udp.length: {ulen} exceeds the IP payload ({ip_end - off} bytes)")
        _mark_ambiguous(c)
        end = ip_end
    elif end < ip_end:
        d._problems.append(f"udp.length: {ulen} is less than the IP payload "
                          f"({ip_end - off} bytes)")
        _mark_ambiguous(c)
        if end < n:
            c.d.trailer = frame[end:]
    if checksum and end <= n and version:  # SUNH (version 0): no pseudo-header
        d._problems.append([_udp_check, version, ip_header, frame[off:end], checksum])
        d._pending = True
    if dport == c.sc.sue_udp_port:
        _sue(c, off + 8, end, rh=True)
    elif dport in c.roce_ports and version:
        _roce(c, off, end, ip_header)
    else:  # RoCEv2 over SUNH has no defined ICRC pseudo-header: shown as payload
        _payload(c, off + 8, end)


def not_captured(name: str, c: _Ctx, start: int) -> Layer:
    """The layer of a trailing CRC (``icrc``, ``vcrc``) that the record's snaplen cut off:
    no value, ``valid`` None with the reason, and the bytes of it that were captured (from
    ``start``), so build() reproduces the record exactly."""
    n = c.n
    layer = Layer(name, value=None, valid=None,
                  reason=f"not captured: record cut at {n} of {c.orig_len} bytes")
    if start < n:
        layer["captured"] = c.frame[start:n].hex()
    return layer


def _payload(c: _Ctx, start: int, end: int, pad: int = 0) -> None:
    """Payload layer for bytes [start, end) (end may exceed the capture); ``pad`` trailing
    bytes of it are RoCE pad bytes."""
    if end <= start:
        return
    c.d._layers["payload"] = _Lazy((_payload_layer, c.frame, start, end, pad, c.n))


def _roce(c: _Ctx, uoff: int, udp_end: int, ip_header: bytes) -> None:
    frame, n, d = c.frame, c.n, c.d
    layers = d._layers
    boff = uoff + 8
    cap_end = min(udp_end, n)
    if udp_end - boff < 12 + ICRC_BYTES:
        if udp_end - boff < 12:
            d._problems.append(f"bth: the UDP payload has {udp_end - boff} bytes, a BTH needs 12")
        else:
            d._problems.append(f"icrc: the UDP payload has {udp_end - boff} bytes, no room for "
                              f"a BTH and a 4-byte ICRC")
        d.raw = frame[boff:cap_end]
        return
    if cap_end - boff < 12:
        c.short("bth", 12, cap_end - boff, boff)
        return
    op, pad = _BTH_GET(frame, boff)
    layers["bth"] = _Lazy((_bth_layer, frame, boff))
    icrc_at = udp_end - ICRC_BYTES
    pos = boff + 12
    for hname in EXT_HEADERS.get(op, ("", ()))[1]:
        spec = EXT_SPECS[hname]
        if pos + spec.size_bytes > icrc_at:
            d._problems.append(f"{hname}: {opcode_name(op)} needs {spec.size_bytes} bytes "
                              f"here, the datagram has {max(icrc_at - pos, 0)} before the ICRC")
            d.raw = frame[pos:cap_end]
            d.cut = True
            return
        if pos + spec.size_bytes > n:
            c.short(hname, spec.size_bytes, n - pos, pos)
            return
        layers[hname] = _Lazy((_ext_layer, spec, frame, pos))
        pos += spec.size_bytes
    if pad > icrc_at - pos:
        d._problems.append(f"bth.pad_count: {pad} but the payload has {icrc_at - pos} bytes")
        pad = icrc_at - pos
        # Keep the (clamped) pad explicit so build() reproduces these bytes exactly.
        layers["payload"] = Layer("payload", length=0, data="",
                                  pad=frame[pos:min(icrc_at, n)].hex())
    else:
        _payload(c, pos, icrc_at, pad)
    if udp_end > n:
        layers["icrc"] = not_captured("icrc", c, icrc_at)  # keeps the 1..3 bytes captured
        return
    wire_val = int.from_bytes(frame[icrc_at:udp_end], "little")
    if c.ambiguous:
        layers["icrc"] = Layer("icrc", value=wire_val, valid=None, reason="length fields "
                               "disagree with the frame; extent of the datagram unknown")
    else:
        check = [_icrc_check, frame, uoff, icrc_at, ip_header]
        layers["icrc"] = _Lazy((_icrc_layer, frame, icrc_at, check))
        d._problems.append(check)
        d._pending = True


def _mac_control(c: _Ctx, off: int) -> None:
    frame, n, d = c.frame, c.n, c.d
    if n - off < 2:
        c.short("mac_control", 2, n - off, off)
        return
    (opcode,) = _MC_GET(frame, off)
    d._layers["mac_control"] = _Lazy((_spec_layer, MAC_CONTROL, frame, off, None))
    off += 2
    spec = _MAC_CONTROL_SPECS.get(opcode)
    if spec is None:
        d.raw = frame[off:]
        return
    (dst,) = _ETH_DST_GET(frame)
    if dst != _PAUSE_DST_RAW:
        d._problems.append(f"eth.dst: {format_value(_ETH_DST, dst)} is not the MAC Control "
                          f"address {PAUSE_DST}")
    if n - off < spec.size_bytes:
        c.short(spec.name, spec.size_bytes, n - off, off)
        return
    d._layers[spec.name] = _Lazy((_spec_layer, spec, frame, off, None))
    if spec is PFC:
        (class_enable,) = _PFC_GET(frame, off)
        if class_enable & 0xFF00:
            d._problems.append(f"pfc.class_enable: reserved high byte is 0x{class_enable >> 8:02x}"
                              f", not 0")
    c.d.trailer = frame[off + spec.size_bytes:]


# ============================================================ scale-up headers
def _esun(c: _Ctx, off: int) -> None:
    if c.n - off < ESUN.size_bytes:
        c.short("esun", ESUN.size_bytes, c.n - off, off)
        return
    c.d._layers["esun"] = Layer("esun", ESUN.unpack(c.frame, off))
    _transport(c, off + ESUN.size_bytes, c.sc.esun_transport, None)


def _sunh(c: _Ctx, off: int) -> None:
    frame, n = c.frame, c.n
    if n - off < SUNH.size_bytes:
        c.short("sunh", SUNH.size_bytes, n - off, off)
        return
    sh = Layer("sunh", SUNH.unpack(frame, off))
    c.d._layers["sunh"] = sh
    pay = off + SUNH.size_bytes
    if sh["next_header"] == IPPROTO_UDP:
        # SUNH has no length: the UDP length says where the datagram ends.
        end = n
        if n - pay >= 8:
            claimed = pay + max(int.from_bytes(frame[pay + 4:pay + 6], "big"), 8)
            if claimed <= n:
                end = claimed
                _set_trailer(c, end)
            elif c.snapped and claimed <= c.orig_len:
                end = claimed
        _udp(c, pay, end, b"", 0)
    elif sh["next_header"] == c.sc.sunh_sue_protocol:
        _transport(c, pay, "sue_rh", None)
    elif pay < n:
        c.d.raw = frame[pay:]


def _afh_gen1(c: _Ctx, off: int) -> None:
    if c.n - off < AFH_GEN1.size_bytes:
        c.short("afh", AFH_GEN1.size_bytes, c.n - off, off)
        return
    afh = Layer("afh", {"form": "gen1", **AFH_GEN1.unpack(c.frame, off)})
    c.d._layers["afh"] = afh
    pay = off + AFH_GEN1.size_bytes
    _transport(c, pay, "sue_rh" if afh["type"] == c.sc.sue_ethertype else "raw", None)


def _afh_gen2(c: _Ctx, off: int) -> None:
    """EtherType ``sue_ethertype`` right after the addresses: they are an AFH Gen2 header."""
    form = "gen2_12" if c.sc.afh_gen2_form == "12" else "gen2_6"
    spec = AFH_FORMS[form]
    c.d._layers.pop("eth")
    c.d._layers["afh"] = Layer("afh", {"form": form, **spec.unpack(c.frame, 0)})
    kind = c.sc.afh_gen2_12_transport if form == "gen2_12" else c.sc.afh_gen2_6_transport
    _transport(c, off, kind, None)


def _transport(c: _Ctx, off: int, kind: str, end: int | None) -> None:
    if kind == "sue_rh":
        _sue(c, off, end, rh=True)
    elif kind == "sue_lite":
        _sue(c, off, end, rh=False)
    elif off < min(c.n, end or c.n):
        c.d.raw = c.frame[off:min(c.n, end or c.n)]


def _sue(c: _Ctx, off: int, end: int | None, *, rh: bool) -> None:
    """SUE transport from ``off``: [RH] transactions [R-CRC].  ``end`` is where a UDP datagram
    ends; None at the Ethernet level, where padding may follow (the ``last`` bit ends the
    transactions, so padding is never read as one)."""
    frame, n, d, sc = c.frame, c.n, c.d, c.sc
    limit = n if end is None else min(end, n)
    start = off
    expect_txns = True
    if rh:
        if limit - off < SUE_RH.size_bytes:
            if end is not None and end - off < SUE_RH.size_bytes and not c.snapped:
                d._problems.append(f"sue_rh: the datagram has {end - off} bytes, an RH needs 8")
                d.raw, d.cut = frame[off:limit], True
            else:
                c.short("sue_rh", SUE_RH.size_bytes, limit - off, off, end and limit)
            return
        rhl = Layer("sue_rh", SUE_RH.unpack(frame, off))
        d._layers["sue_rh"] = rhl
        off += SUE_RH.size_bytes
        expect_txns = rhl["op"] == SueOp.DATA
    spec = txn_spec(sc.txn_hdr_bytes)
    h = spec.size_bytes
    txns: list[Layer] = []
    pdu_bytes = 0
    if expect_txns:
        d._layers["sue_txn"] = txns
        while True:
            i = len(txns)
            if limit - off < h:
                if off == limit and c.snapped:
                    d.cut = True
                else:
                    c.short(f"sue_txn[{i}]", h, limit - off, off, end and limit)
                return
            t = Layer("sue_txn", spec.unpack(frame, off))
            if t["opcode"] == 0:
                d._problems.append(f"sue_txn[{i}].opcode: 0 is not a transaction (no descriptor "
                                  f"with last=1 before byte {off})")
                d.raw, d.cut = frame[off:limit], True
                return
            length = t["length"]
            dstart = off + h
            explained = c.snapped and (end is None or dstart + length <= end)
            if dstart + length > limit and not explained:
                d._problems.append(f"sue_txn[{i}].length: {length} but only "
                                  f"{max(limit - dstart, 0)} bytes follow the descriptor")
                d.raw, d.cut = frame[off:limit], True
                return
            t["data"] = frame[dstart:min(dstart + length, limit)].hex()
            txns.append(t)
            if length > MAX_TXN_DATA_BYTES:
                d._problems.append(f"sue_txn[{i}].length: {length} exceeds the "
                                  f"{MAX_TXN_DATA_BYTES}-byte SUE limit")
            pdu_bytes += h + length
            off = dstart + length
            if off > limit:  # data cut by the snaplen
                d.cut = True
                return
            if t["last"]:
                break
        cap = sc.max_pdu_bytes if rh else sc.max_pdu_lite_bytes
        if pdu_bytes > cap:
            d._problems.append(f"sue: {pdu_bytes} bytes of transactions exceed the {cap}-byte "
                              f"{'SUE' if rh else 'SUE-Lite'} PDU limit")
    if rh:
        if limit - off < RCRC.size_bytes:
            c.short("rcrc", RCRC.size_bytes, limit - off, off, end and limit)
            return
        val = int.from_bytes(frame[off:off + 4], "big")
        calc = rcrc(frame[start:off])
        d._layers["rcrc"] = Layer("rcrc", value=val, valid=calc == val)
        if calc != val:
            d._problems.append(f"rcrc: 0x{val:08x} on the wire, 0x{calc:08x} computed")
        off += RCRC.size_bytes
    if end is None:
        _set_trailer(c, off)
    elif off < limit:
        d._problems.append(f"sue: {limit - off} bytes after the end of the PDU inside the UDP "
                          f"datagram")
        d.raw = frame[off:limit]


# ======================================================================== build
_ETHERTYPE_OF = {"ipv4": EtherType.IPV4, "ipv6": EtherType.IPV6,
                 "mac_control": EtherType.MAC_CONTROL, "pfc": EtherType.MAC_CONTROL,
                 "pause": EtherType.MAC_CONTROL}
_ICRC_FIELD = Field("value", 32, "ICRC")
_DEFAULT_SRC = "02:00:00:00:00:01"
_DEFAULT_DST = "02:00:00:00:00:02"
_DEFAULT_IP4 = ("10.0.0.1", "10.0.0.2")
_DEFAULT_IP6 = ("fd00::1", "fd00::2")


#: The form of each layer, shown when a layer is not an object (``{}`` alone is every
#: field's default).
_LIKE = {
    "eth": '{"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}',
    "ipv4": '{"src": "10.0.0.1", "dst": "10.0.0.2", "ecn": 1}',
    "ipv6": '{"src": "fd00::1", "dst": "fd00::2", "ecn": 1}',
    "udp": '{"sport": 49152, "dport": 4791}',
    "bth": '{"opcode": "RC_SEND_ONLY", "dest_qp": 17, "psn": 0}',
    "reth": '{"va": 4096, "rkey": 119, "dma_length": 4096}',
    "aeth": '{"kind": "ACK", "msn": 1}',
    "deth": '{"qkey": 0, "src_qp": 1}',
    "immdt": '{"data": 1}',
    "payload": '{"data": "68656c6c6f"} or {"length": 1024}',
    "icrc": '{"value": 59521547} or {} (computed)',
    "pfc": '{"quanta": [0, 0, 0, 65535, 0, 0, 0, 0]}',
    "pause": '{"quanta": 65535}',
    "mac_control": '{"opcode": 257}',
    "afh": '{"form": "gen1", "ttl": 64}',
    "erf": '{"type": 21, "flags": 4}',
    "lrh": '{"vl": 0, "sl": 0, "dlid": 18, "slid": 52}',
    "grh": '{"sgid": "fe80::1", "dgid": "fe80::2"}',
    "vcrc": '{"value": 4386} or {} (computed)',
    "ib_fc": '{"op": 0, "fctbs": 100, "vl": 0, "fccl": 200}',
}
_VLAN_LIKE = '{"pcp": 3, "vid": 100}'
_TXN_LIKE = '{"opcode": "WRITE", "tag": 1, "data": "00112233"}'
#: The form of a whole frame (a dict of layers).
FRAME_LIKE = '{"eth": {}, "ipv4": {}, "udp": {}, "bth": {}, "payload": {"length": 64}}'


def _hex(d: Mapping, key: str, layer: str) -> bytes:
    v = d.get(key, "")
    try:
        if isinstance(v, str):
            return bytes.fromhex(v)
        if isinstance(v, bytes | bytearray | memoryview):
            return bytes(v)
    except ValueError:
        pass
    raise BadValue(f"expected hex bytes like \"0a1b2c\", got {describe(v)}", layer=layer,
                   field=None if key == layer else key)


def _layer(d: Mapping, name: str) -> dict:
    v = d.get(name, {})
    if not isinstance(v, Mapping):
        like = _LIKE.get(name, "{}")
        raise BadValue(f"expected an object of {name} fields like {like}, got {describe(v)}",
                       layer=name)
    return dict(v)


def _data_length(p: Mapping, data: bytes, layer: str) -> int:
    """``length`` of a payload or a transaction (its data bytes, zero-filled past ``data``):
    the given one, else ``len(data)``."""
    length = p.get("length", len(data))
    if isinstance(length, bool) or not isinstance(length, int):
        raise BadValue(f"expected a number of bytes like 64, got {describe(length)}",
                       layer=layer, field="length")
    if length < len(data):
        raise BadValue(f"length {length} is less than the {len(data)} bytes of data",
                       layer=layer, field="length")
    return length


def frame_object(d: object) -> None:
    """Raise :class:`BadValue` unless ``d`` is a dict (of layers)."""
    if not isinstance(d, Mapping):
        raise BadValue(f"expected an object of layers like {FRAME_LIKE}, got {describe(d)}")


def _given(layer: Mapping, key: str, recompute: bool) -> bool:
    return not recompute and layer.get(key) is not None


def build(d: Mapping[str, object], *, recompute: bool = False,
          roce_ports: Iterable[int] = ROCE_PORTS,
          scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> bytes:
    """Build an Ethernet frame from a dict in the schema of :meth:`Decoded.to_dict`.

    Omitted fields take defaults.  Lengths, checksums, PadCnt and the ICRC are computed
    unless given (so broken packets can be crafted); ``recompute=True`` ignores the given
    ones.  A frame shorter than 60 bytes is zero-padded unless ``trailer`` is given (``""``
    for none).  Raises :class:`~wire.errors.BadValue` naming the layer and field at fault.
    """
    frame_object(d)
    unknown = set(d) - set(LAYER_ORDER) - set(_RECORD_KEYS) - set(_EXTRA_KEYS)
    if unknown:
        raise BadValue(f"unknown key(s) {sorted(unknown)}; known layers: {list(LAYER_ORDER)}")
    ports = frozenset(roce_ports)
    if not any(k in d for k in LAYER_ORDER):  # no headers at all: the bytes as given
        frame = _hex(d, "raw", "raw")
        if "trailer" in d:
            return frame + _hex(d, "trailer", "trailer")
        return frame + bytes(max(MIN_FRAME_BYTES - len(frame), 0))
    _check_placement(d)
    sc = scaleup
    afh = _layer(d, "afh") if "afh" in d else None
    form = afh.get("form", "gen1") if afh is not None else None
    if form is not None and form not in AFH_FORMS:
        raise BadValue(f"form {form!r} is not one of {list(AFH_FORMS)}", layer="afh",
                       field="form")
    if form in ("gen2_12", "gen2_6"):  # AFH Gen2 replaces the Ethernet addresses
        if "eth" in d or "vlan" in d:
            raise BadValue("an AFH Gen2 header replaces the Ethernet header: no eth or vlan",
                           layer="afh", field="form")
        fields = {k: v for k, v in afh.items() if k != "form"}
        fields.setdefault("type", sc.sue_ethertype)
        frame = AFH_FORMS[form].pack(fields) + _build_sue(d, sc, recompute)
        return _finish(d, frame + _hex(d, "raw", "raw"))
    eth = _layer(d, "eth")
    l3 = next((k for k in ("ipv4", "ipv6", "mac_control", "pfc", "pause", "esun", "sunh",
                           "afh") if k in d), None)
    if "type" not in eth:
        eth["type"] = {"esun": sc.esun_ethertype, "sunh": sc.sunh_ethertype,
                       "afh": sc.afh_gen1_ethertype}.get(
            l3, _ETHERTYPE_OF.get(l3, EtherType.IPV4) if l3 else EtherType.IPV4)
    if l3 in ("mac_control", "pfc", "pause"):
        eth.setdefault("dst", PAUSE_DST)
    eth.setdefault("dst", _DEFAULT_DST)
    eth.setdefault("src", _DEFAULT_SRC)
    head = ETHERNET.pack({k: v for k, v in eth.items() if k != "type"}, type=0)[:12]
    tags = d.get("vlan", [])
    if not isinstance(tags, list):
        raise BadValue(f"expected a list of tags like [{_VLAN_LIKE}] (outer tag first), got "
                       f"{describe(tags)}", layer="vlan")
    for i, t in enumerate(tags):
        if not isinstance(t, Mapping):
            raise BadValue(f"expected a tag like {_VLAN_LIKE}, got {describe(t)}",
                           layer=f"vlan[{i}]")
    tag_bytes = b"".join(VLAN_TAG.pack(t) for t in tags)
    # type null: the EtherType was not captured (a record cut inside the VLAN tags).
    etype = b"" if eth["type"] is None else ETHERNET.pack(type=eth["type"])[12:]
    if l3 == "ipv4":
        body = _build_ip(d, 4, recompute, ports, sc)
    elif l3 == "ipv6":
        body = _build_ip(d, 6, recompute, ports, sc)
    elif l3 == "esun":
        body = ESUN.pack(_layer(d, "esun")) + _build_sue(d, sc, recompute)
    elif l3 == "afh":
        fields = {k: v for k, v in _layer(d, "afh").items() if k != "form"}
        fields.setdefault("type", sc.sue_ethertype)
        body = AFH_GEN1.pack(fields) + _build_sue(d, sc, recompute)
    elif l3 == "sunh":
        body = _build_sunh(d, sc, recompute)
    elif l3 is not None:
        body = _build_mac_control(d)
    else:
        body = b""
    frame = head + tag_bytes + etype + body
    if l3 not in ("ipv4", "ipv6", "sunh"):  # these builders place raw inside the datagram
        frame += _hex(d, "raw", "raw")
    return _finish(d, frame)


def _finish(d: Mapping, frame: bytes) -> bytes:
    """Append the trailer, or pad to the Ethernet minimum when none is given."""
    if "trailer" in d:
        frame += _hex(d, "trailer", "trailer")
    elif len(frame) < MIN_FRAME_BYTES:
        frame += bytes(MIN_FRAME_BYTES - len(frame))
    return frame


def _check_placement(d: Mapping) -> None:
    """Refuse layer combinations that cannot be placed in one frame (never drop a layer)."""
    ips = [k for k in ("ipv4", "ipv6") if k in d]
    macs = [k for k in ("mac_control", "pfc", "pause") if k in d]
    nets = [k for k in ("ipv4", "ipv6", "esun", "sunh", "afh") if k in d]
    if len(nets) > 1:
        raise BadValue(f"a frame carries one network header, not {nets}", layer=nets[1])
    if nets and macs:
        raise BadValue(f"{macs[0]} cannot follow {nets[0]}", layer=macs[0])
    if "pfc" in d and "pause" in d:
        raise BadValue("a MAC Control frame is PFC or PAUSE, not both", layer="pause")
    if "udp" in d and not ips and "sunh" not in d:
        raise BadValue("udp needs an ipv4, ipv6 or sunh layer under it", layer="udp")
    sue = [k for k in ("sue_rh", "sue_txn") if k in d]
    if sue and not (set(nets) & {"esun", "sunh", "afh"} or "udp" in d):
        raise BadValue("the SUE transport needs an esun, sunh, afh or udp layer under it",
                       layer=sue[0])
    if sue and "bth" in d:
        raise BadValue("a frame carries RoCEv2 or SUE, not both", layer=sue[0])
    if "rcrc" in d and "sue_rh" not in d:
        raise BadValue("rcrc needs a sue_rh layer before it", layer="rcrc")
    if sue and "payload" in d:
        raise BadValue("SUE carries its data in sue_txn, not payload", layer="payload")
    if ips and "udp" in d:
        key = "protocol" if ips[0] == "ipv4" else "next_header"
        proto = _layer(d, ips[0]).get(key, IPPROTO_UDP)
        if parse_value(IPV4.field("protocol"), proto, ips[0]) != IPPROTO_UDP:
            raise BadValue(f"is {proto}, so the udp layer cannot follow", layer=ips[0],
                           field=key)
    if "bth" in d and "udp" not in d:
        raise BadValue("bth needs a udp layer under it", layer="bth")
    for k in (*EXT_SPECS, "icrc"):
        if k in d and "bth" not in d:
            raise BadValue(f"{k} needs a bth layer before it", layer=k)
    if "payload" in d and "udp" not in d:
        raise BadValue("payload follows udp (use raw for other bytes)", layer="payload")
    if macs and "mac_control" in d and ("pfc" in d or "pause" in d):
        op = parse_value(MAC_CONTROL.field("opcode"), _layer(d, "mac_control").get(
            "opcode", MacControlOpcode.PFC if "pfc" in d else MacControlOpcode.PAUSE),
            "mac_control")
        want = MacControlOpcode.PFC if "pfc" in d else MacControlOpcode.PAUSE
        if op != want:
            raise BadValue(f"opcode 0x{op:04x} does not carry a {'pfc' if 'pfc' in d else 'pause'}"
                           " layer", layer="mac_control", field="opcode")


def _build_sue(d: Mapping, sc: ScaleUpConfig, recompute: bool) -> bytes:
    """[RH] + transactions (+ R-CRC after an RH), or b"" when the dict has no SUE layers.
    ``raw`` is not included (the caller places it)."""
    if "sue_rh" not in d and "sue_txn" not in d:
        return b""
    # ``raw`` without an ``rcrc`` layer: dissection stopped inside the PDU.  With an ``rcrc``
    # layer the PDU was whole and ``raw`` holds bytes after it (inside a UDP datagram).
    cut = "raw" in d and "rcrc" not in d
    spec = txn_spec(sc.txn_hdr_bytes)
    out = SUE_RH.pack(_layer(d, "sue_rh")) if "sue_rh" in d else b""
    txns = d.get("sue_txn", [])
    if not isinstance(txns, list):
        raise BadValue(f"expected a list of transactions like [{_TXN_LIKE}], got "
                       f"{describe(txns)}", layer="sue_txn")
    for i, t in enumerate(txns):
        if not isinstance(t, Mapping):
            raise BadValue(f"expected a transaction like {_TXN_LIKE}, got {describe(t)}",
                           layer=f"sue_txn[{i}]")
        t = dict(t)
        data = _hex(t, "data", f"sue_txn[{i}]")
        if not _given(t, "length", recompute):
            t["length"] = len(data)
        t["length"] = _data_length(t, data, f"sue_txn[{i}]")
        if not _given(t, "last", recompute):
            t["last"] = int(i == len(txns) - 1 and not cut)
        t.pop("data", None)
        try:
            out += spec.pack(t)
        except BadValue as e:
            raise BadValue(str(e).split(": ", 1)[-1], layer=f"sue_txn[{i}]",
                           field=e.field) from None
        out += data + bytes(t["length"] - len(data)) if not cut or i < len(txns) - 1 else data
    if "sue_rh" in d and not cut:
        rc = _layer(d, "rcrc")
        if _given(rc, "value", recompute):
            out += parse_value(RCRC.field("value"), rc["value"], "rcrc").to_bytes(4, "big")
        else:
            out += rcrc(out).to_bytes(4, "big")
    return out


def _build_sunh(d: Mapping, sc: ScaleUpConfig, recompute: bool) -> bytes:
    sh = _layer(d, "sunh")
    if "udp" in d:
        sh.setdefault("next_header", IPPROTO_UDP)
        udp = _layer(d, "udp")
        want_csum = udp.pop("checksum", None)
        udp.pop("checksum_ok", None)
        if "sue_rh" in d or "sue_txn" in d:
            udp.setdefault("dport", sc.sue_udp_port)
            body = _build_sue(d, sc, recompute)
        else:
            body = _build_plain_payload(d)
        body += _hex(d, "raw", "raw")
        if not _given(udp, "length", recompute):
            udp["length"] = 8 + len(body)
        # No pseudo-header is defined over SUNH: the checksum is 0 unless given.
        udp["checksum"] = 0 if want_csum in (None, "auto") else want_csum
        return SUNH.pack(sh) + UDP.pack(udp) + body
    sh.setdefault("next_header", sc.sunh_sue_protocol)
    return SUNH.pack(sh) + _build_sue(d, sc, recompute) + _hex(d, "raw", "raw")


def _build_mac_control(d: Mapping) -> bytes:
    mc = _layer(d, "mac_control")
    if "opcode" not in mc:
        mc["opcode"] = MacControlOpcode.PAUSE if "pause" in d else MacControlOpcode.PFC
    out = MAC_CONTROL.pack(mc)
    op = MAC_CONTROL.unpack(out)["opcode"]
    if op == MacControlOpcode.PFC and "raw" not in d:
        pfc = _layer(d, "pfc")
        if "class_enable" not in pfc and "quanta" in pfc and isinstance(pfc["quanta"], list):
            pfc["class_enable"] = sum(1 << i for i, q in enumerate(pfc["quanta"]) if q)
        out += PFC.pack(pfc)
    elif op == MacControlOpcode.PAUSE and "raw" not in d:
        out += PAUSE.pack(_layer(d, "pause"))
    return out


def _build_ip(d: Mapping, version: int, recompute: bool, ports: frozenset[int],
              sc: ScaleUpConfig) -> bytes:
    name = "ipv4" if version == 4 else "ipv6"
    ip = _layer(d, name)
    defaults = _DEFAULT_IP4 if version == 4 else _DEFAULT_IP6
    ip.setdefault("src", defaults[0])
    ip.setdefault("dst", defaults[1])
    proto_key = "protocol" if version == 4 else "next_header"
    if "udp" in d:
        ip.setdefault(proto_key, IPPROTO_UDP)
    if version == 4:
        options = _hex(ip, "options", name)
        if len(options) % 4:
            raise BadValue(f"{len(options)} bytes of options is not a multiple of 4",
                           layer=name, field="options")
        if not _given(ip, "ihl", recompute):
            ip["ihl"] = 5 + len(options) // 4
        hlen = 20 + len(options)
    else:
        options = b""
        hlen = 40
    # Packed addresses for the UDP pseudo-header.
    probe = (IPV4 if version == 4 else IPV6).pack({k: ip.get(k, 0) for k in ("src", "dst")})
    src, dst = (probe[12:16], probe[16:20]) if version == 4 else (probe[8:24], probe[24:40])
    udp_present = "udp" in d and int(ip.get(proto_key, IPPROTO_UDP)) == IPPROTO_UDP
    ip_fields = {k: v for k, v in ip.items() if k not in ("options", "checksum_ok")}

    def header(payload_len: int) -> bytes:
        f = dict(ip_fields)
        if version == 4:
            if not _given(f, "total_length", recompute):
                f["total_length"] = hlen + payload_len
            f.setdefault("checksum", 0)
            raw = bytearray(IPV4.pack(f) + options)
            if not _given(ip, "checksum", recompute):
                raw[10:12] = ipv4_checksum(raw).to_bytes(2, "big")
            return bytes(raw)
        if not _given(f, "payload_length", recompute):
            f["payload_length"] = payload_len
        return IPV6.pack(f)

    if not udp_present:
        raw = _hex(d, "raw", "raw")
        return header(len(raw)) + raw
    return _build_udp(d, version, header, src, dst, recompute, ports, sc)


def _build_udp(d: Mapping, version: int, ip_header, src: bytes, dst: bytes, recompute: bool,
               ports: frozenset[int], sc: ScaleUpConfig) -> bytes:
    udp = _layer(d, "udp")
    udp.pop("checksum_ok", None)
    want_csum = udp.get("checksum")
    if want_csum == "auto":
        udp.pop("checksum")
    sue = "sue_rh" in d or "sue_txn" in d
    if sue:
        udp.setdefault("dport", sc.sue_udp_port)
    dport = UDP.pack({"dport": udp.get("dport", ROCEV2_PORT)})[2:4]
    is_roce = int.from_bytes(dport, "big") in ports
    if "bth" in d and not is_roce:
        raise BadValue(f"{int.from_bytes(dport, 'big')} is not a RoCEv2 port "
                       f"(roce_ports={sorted(ports)}), so a bth cannot follow", layer="udp",
                       field="dport")
    raw_tail = _hex(d, "raw", "raw")
    if is_roce and "bth" in d:
        body, has_icrc = _build_roce_body(d, recompute)
    elif sue:
        body, has_icrc = _build_sue(d, sc, recompute), False
    else:
        body, has_icrc = _build_plain_payload(d), False
    icrc_len = ICRC_BYTES if has_icrc else 0
    if not _given(udp, "length", recompute):
        udp["length"] = 8 + len(body) + icrc_len + len(raw_tail)
    udp_fields = dict(udp, checksum=0)
    iph = ip_header(8 + len(body) + icrc_len + len(raw_tail))
    udp_hdr = UDP.pack(udp_fields)
    tail = b""
    if has_icrc:
        ic = _layer(d, "icrc")
        if _given(ic, "value", recompute):
            tail = icrc_bytes(parse_value(_ICRC_FIELD, ic["value"], "icrc"))
        elif ic.get("captured") and not recompute:  # a snaplen cut inside the ICRC
            got = _hex(ic, "captured", "icrc")[:ICRC_BYTES]
            tail = got + bytes(ICRC_BYTES - len(got))
        else:
            tail = icrc_bytes(icrc(iph, udp_hdr + body))
    datagram = bytearray(udp_hdr + body + tail + raw_tail)
    given = want_csum not in (None, "auto") and not recompute
    if given:
        csum = UDP.pack({"checksum": want_csum})[6:8]
        datagram[6:8] = csum
    elif want_csum == "auto" or (recompute and want_csum) or (want_csum is None and not is_roce):
        datagram[6:8] = udp_checksum(version, src, dst, datagram).to_bytes(2, "big")
    return iph + bytes(datagram)


def _aeth_syndrome_of(hd: Mapping) -> int:
    """AETH syndrome from ``kind`` and ``value`` or ``nak`` (used when no syndrome is given)."""
    try:
        kind = AethKind[str(hd["kind"])]
        if "nak" in hd and "value" not in hd:
            value = int(NakCode[str(hd["nak"])])
        else:
            value = int(hd.get("value", 0))
        return aeth_syndrome(kind, value)
    except (KeyError, ValueError, TypeError) as e:
        raise BadValue(f"cannot make a syndrome from kind={hd.get('kind')!r}, "
                       f"value={hd.get('value')!r}, nak={hd.get('nak')!r}: {e}", layer="aeth",
                       field="kind") from None


def _build_plain_payload(d: Mapping) -> bytes:
    if "payload" not in d:
        return b""
    p = _layer(d, "payload")
    data = _hex(p, "data", "payload")
    return data + bytes(_data_length(p, data, "payload") - len(data))


def _build_roce_body(d: Mapping, recompute: bool) -> tuple[bytes, bool]:
    """BTH + extended headers + payload + pad; and whether an ICRC follows."""
    return build_transport(d, recompute, roce=True)


def build_transport(d: Mapping, recompute: bool, *, roce: bool,
                    mad: bytes = b"") -> tuple[bytes, bool]:
    """The IBA transport part of a packet, RoCEv2 or native InfiniBand: BTH + the opcode's
    extended headers + ``mad`` (a packed MAD common header, native IB's QP0/QP1) + payload +
    pad; and whether an ICRC follows (not for a record cut inside a header).  ``roce``: a CNP
    opcode gets BECN set by default (IBA Annex A17.9.3; CNPs are RoCEv2's).  PadCnt counts the
    pad after the MAD and payload."""
    bth = _layer(d, "bth")
    bth.pop("opcode_name", None)
    op_raw = BTH.pack({"opcode": bth.get("opcode", BTH.field("opcode").default)})[0]
    if roce and op_raw == CNP_OPCODE:
        bth.setdefault("becn", 1)  # IBA Annex A17.9.3: a CNP has BECN set
    hdr_names = EXT_HEADERS.get(op_raw, ("", ()))[1]
    extra = [k for k in d if k in EXT_SPECS and k not in hdr_names]
    if extra:
        raise BadValue(f"opcode {opcode_name(op_raw)} carries {list(hdr_names) or 'no'} "
                       f"extended headers, not {extra}", layer="bth", field="opcode")
    cut = "raw" in d  # a record cut inside a header: emit only the headers given
    exts = b""
    for h in hdr_names:
        if h not in d and cut:
            break
        spec: HeaderSpec = EXT_SPECS[h]
        hd = _layer(d, h)
        if spec is AETH and "syndrome" not in hd and "kind" in hd:
            hd["syndrome"] = _aeth_syndrome_of(hd)
        exts += spec.pack(hd)
    if cut and ("payload" not in d):
        pay = b""
        pad = b""
        bth.setdefault("pad_count", 0)
    else:
        p = _layer(d, "payload")
        data = _hex(p, "data", "payload")
        pay = data + bytes(_data_length(p, data, "payload") - len(data))
        if not _given(bth, "pad_count", recompute):
            bth["pad_count"] = -(len(mad) + len(pay)) % 4
        pc = parse_value(BTH.field("pad_count"), bth["pad_count"], "bth")
        # Given pad bytes are used as they are (a decoded frame's exact bytes); otherwise
        # PadCnt zero bytes (IBA 9.2: pad bytes are zero).
        pad = _hex(p, "pad", "payload") if "pad" in p and not recompute else bytes(pc)
    return BTH.pack(bth) + exts + mad + pay + pad, not cut

"""Native InfiniBand frames and ERF records: ``dissect_ib``/``build_ib``,
``dissect_erf``/``build_erf``, and :func:`dissect_record` (a capture record by its linktype).

A native IB data packet (linktype 247, LINKTYPE_INFINIBAND; ERF type 21) is::

    LRH | GRH (LNH 3) | BTH | extended headers | [MAD header] | payload | pad | ICRC | VCRC
    LRH | RWH (LNH 0) | payload | VCRC            (raw packet: no ICRC)
    LRH | IPv6 (LNH 1) | payload | VCRC           (IP non-IBA transport: no ICRC)

Rules stated once (the layers, lengths and CRCs are in :mod:`wire.ib`):

* The packet ends where ``lrh.pkt_len`` (4-byte words, LRH to ICRC) says; the 2-byte VCRC
  follows.  A record that ends exactly at ``pkt_len`` has no VCRC (``vcrc: {"absent":
  true}``: some capture tools drop it).  A record cut by its snaplen shows the CRCs it lacks
  as not captured (``valid: null``); any other disagreement between ``pkt_len`` and the
  record is a problem, the VCRC is then taken as the record's last 2 bytes and the ICRC is
  not judged (``valid: null``).
* ``grh.pay_len`` is checked against ``pkt_len``; the MAD common header is shown for UD
  SEND ONLY datagrams to QP0/QP1 (IBA 13.4.1) whose payload holds one.
* Bytes that could not be dissected (a header that does not fit before the ICRC, a GRH whose
  ``nxt_hdr`` is not IBA transport) are ``raw``, up to the end of the packet; the VCRC
  still follows them, and no ICRC is shown or built after ``raw``.  Bytes after the VCRC
  are the ``trailer`` (a problem).
* So ``build_ib(dissect_ib(f).to_dict()) == f`` and ``build_erf(dissect_erf(f).to_dict())
  == f`` for every input, as for Ethernet (``wire.stack``).

An ERF record (linktype 197) is the 16-byte ERF header, its 8-byte extension headers
(``erf.ext_headers``), ``wlen`` bytes of packet (fewer when the capture card truncated it:
``rlen`` says how many were kept), and ``erf.pad`` (bytes after the packet, up to ``rlen``
or beyond).  Type 21 carries an IB data packet, type 25 an IB link packet (the 6-byte
flow-control packet, layer ``ib_fc``); other types are kept as ``raw``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .bth import BTH, EXT_HEADERS, Opcode, opcode_name
from .errors import BadValue, describe
from .ib import (
    ERF,
    GRH,
    GRH_NXT_HDR_IBA,
    IB_FC,
    ICRC_BYTES,
    LINKTYPE_ERF,
    LINKTYPE_INFINIBAND,
    LRH,
    MAD,
    MAD_QPS,
    RWH,
    VCRC_BYTES,
    ErfType,
    IbFcOp,
    Lnh,
    crc16,
    icrc_native,
    vcrc,
    vcrc_bytes,
)
from .ib_ext import AETH, CNP, EXT_SPECS, aeth_decode
from .ipv6 import IPV6
from .pcapio import Record
from .roce import icrc_bytes
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .spec import Field, HeaderSpec, Layer, parse_value
from .stack import (
    ROCE_PORTS,
    Decoded,
    _build_plain_payload,
    _Ctx,
    _given,
    _hex,
    _layer,
    _payload,
    build_transport,
    dissect,
    not_captured,
)

__all__ = ["dissect_ib", "build_ib", "dissect_erf", "build_erf", "dissect_record",
           "build_record_data", "erf_ts", "erf_time_ns", "IB_LAYER_ORDER", "ERF_LAYER_ORDER",
           "DECODED_LINKTYPES",
           "LINKTYPE_ETHERNET"]

LINKTYPE_ETHERNET = 1
#: Linktypes :func:`dissect_record` decodes.
DECODED_LINKTYPES = frozenset({LINKTYPE_ETHERNET, LINKTYPE_INFINIBAND, LINKTYPE_ERF})
#: Layer keys of a native IB packet, in wire order.
IB_LAYER_ORDER = ("lrh", "grh", "rwh", "ipv6", "bth", "rdeth", "deth", "xrceth", "reth",
                  "atomic_eth", "aeth", "atomic_ack_eth", "immdt", "ieth", "cnp", "mad",
                  "payload", "icrc", "vcrc")
#: Layer keys of an ERF record.
ERF_LAYER_ORDER = ("erf", *IB_LAYER_ORDER, "ib_fc")
_RECORD_KEYS = ("index", "ts_ns", "caplen", "len", "interface", "linktype")
_EXTRA_KEYS = ("raw", "trailer", "problems")
_ICRC_FIELD = Field("value", 32, "ICRC")
_VCRC_FIELD = Field("value", 16, "VCRC")
_UD_SEND_ONLY = int(Opcode.UD_SEND_ONLY)
_EXT_BYTES = 8  # an ERF extension header (Endace ERF types reference)
_ERF_MORE_EXT = 0x80  # bit 7 of an extension header's first byte: another follows


def _ctx(frame: bytes | bytearray | memoryview, orig_len: int | None) -> _Ctx:
    frame = bytes(frame)
    return _Ctx(frame, len(frame) if orig_len is None else orig_len, ROCE_PORTS)


# ====================================================================== dissect
def dissect_ib(frame: bytes | bytearray | memoryview, orig_len: int | None = None) -> Decoded:
    """Decode a native InfiniBand packet (starting at the LRH).  Never raises; problems go
    to ``problems``.  ``orig_len`` as for :func:`wire.dissect` (snaplen cuts)."""
    c = _ctx(frame, orig_len)
    _ib(c)
    return c.d


def _ib(c: _Ctx) -> None:
    frame, n, d = c.frame, c.n, c.d
    if n == 0:
        if not c.snapped:
            d.problems.append("empty record (0 bytes)")
        return
    if n < LRH.size_bytes:
        c.short("lrh", LRH.size_bytes, n, 0)
        return
    lrh = Layer("lrh", LRH.unpack(frame))
    d.layers["lrh"] = lrh
    declared = 4 * lrh["pkt_len"]
    vstate = "here"
    if declared < LRH.size_bytes:
        d.problems.append(f"lrh.pkt_len: {lrh['pkt_len']} words is less than the 8-byte LRH")
        c.ambiguous = True
        pkt_end = n - VCRC_BYTES
    elif declared == n:
        pkt_end, vstate = n, "absent"
    elif declared + VCRC_BYTES <= n:
        pkt_end = declared
        if declared + VCRC_BYTES < n:
            d.trailer = frame[declared + VCRC_BYTES:]
            d.problems.append(f"lrh.pkt_len: {lrh['pkt_len']} words end the packet at byte "
                              f"{declared}: {n - declared - VCRC_BYTES} bytes follow the VCRC")
    elif c.snapped and declared + VCRC_BYTES <= c.orig_len:
        pkt_end, vstate = declared, "cut"
    else:
        d.problems.append(f"lrh.pkt_len: {lrh['pkt_len']} words ({declared} bytes) but the "
                          f"record has {c.orig_len} bytes")
        c.ambiguous = True
        pkt_end = n - VCRC_BYTES
    if pkt_end < LRH.size_bytes:  # no room for a VCRC after the LRH: the rest is raw
        d.raw, d.cut = frame[LRH.size_bytes:], True
        return
    lnh = lrh["lnh"]
    if lnh == Lnh.IBA_LOCAL:
        _transport(c, LRH.size_bytes, pkt_end)
    elif lnh == Lnh.IBA_GLOBAL:
        _grh(c, pkt_end)
    elif lnh == Lnh.RAW:
        if _header(c, RWH, LRH.size_bytes, pkt_end):
            _payload(c, LRH.size_bytes + RWH.size_bytes, pkt_end)
    else:
        if _header(c, IPV6, LRH.size_bytes, pkt_end):
            ip = d.layers["ipv6"]
            have = pkt_end - LRH.size_bytes - IPV6.size_bytes
            if ip["payload_length"] != have:
                d.problems.append(f"ipv6.payload_length: {ip['payload_length']} but the LRH's "
                                  f"pkt_len leaves {have} bytes after the IPv6 header")
            _payload(c, LRH.size_bytes + IPV6.size_bytes, pkt_end)
    _vcrc(c, pkt_end, vstate)


def _header(c: _Ctx, spec: HeaderSpec, off: int, end: int) -> bool:
    """Decode ``spec`` at ``off`` if it fits before ``end`` and in the capture."""
    frame, n, d = c.frame, c.n, c.d
    if end - off < spec.size_bytes:
        d.problems.append(f"{spec.name}: the packet has {max(end - off, 0)} bytes here, the "
                          f"header needs {spec.size_bytes}")
        d.raw, d.cut = frame[off:min(end, n)], True
        return False
    if n - off < spec.size_bytes:
        c.short(spec.name, spec.size_bytes, n - off, off, end)
        return False
    d.layers[spec.name] = Layer(spec.name, spec.unpack(frame, off))
    return True


def _grh(c: _Ctx, pkt_end: int) -> None:
    d = c.d
    off = LRH.size_bytes
    if not _header(c, GRH, off, pkt_end):
        return
    grh = d.layers["grh"]
    after = off + GRH.size_bytes
    if after + grh["pay_len"] != pkt_end:
        d.problems.append(f"grh.pay_len: {grh['pay_len']} but the LRH's pkt_len leaves "
                          f"{pkt_end - after} bytes after the GRH")
    if grh["nxt_hdr"] != GRH_NXT_HDR_IBA:
        d.problems.append(f"grh.nxt_hdr: 0x{grh['nxt_hdr']:02x} is not IBA transport "
                          f"(0x{GRH_NXT_HDR_IBA:02x})")
        d.raw, d.cut = c.frame[after:min(pkt_end, c.n)], True
        return
    _transport(c, after, pkt_end)


def _transport(c: _Ctx, boff: int, pkt_end: int) -> None:
    """BTH, extended headers, [MAD], payload and ICRC in [boff, pkt_end)."""
    frame, n, d = c.frame, c.n, c.d
    avail = min(pkt_end, n)
    if pkt_end - boff < BTH.size_bytes + ICRC_BYTES:
        if pkt_end - boff < BTH.size_bytes:
            d.problems.append(f"bth: the packet has {pkt_end - boff} bytes after the network "
                              f"headers, a BTH needs 12")
        else:
            d.problems.append(f"icrc: the packet has {pkt_end - boff} bytes after the network "
                              f"headers, no room for a BTH and a 4-byte ICRC")
        d.raw, d.cut = frame[boff:avail], True
        return
    if n - boff < BTH.size_bytes:
        c.short("bth", BTH.size_bytes, n - boff, boff, pkt_end)
        return
    bth = Layer("bth", BTH.unpack(frame, boff))
    op = bth["opcode"]
    bth["opcode_name"] = opcode_name(op)
    d.layers["bth"] = bth
    icrc_at = pkt_end - ICRC_BYTES
    pos = boff + BTH.size_bytes
    hdrs = EXT_HEADERS.get(op, ("", ()))[1]
    for hname in hdrs:
        spec = EXT_SPECS[hname]
        if pos + spec.size_bytes > icrc_at:
            d.problems.append(f"{hname}: {bth['opcode_name']} needs {spec.size_bytes} bytes "
                              f"here, the packet has {max(icrc_at - pos, 0)} before the ICRC")
            d.raw, d.cut = frame[pos:avail], True
            return
        if pos + spec.size_bytes > n:
            c.short(hname, spec.size_bytes, n - pos, pos, pkt_end)
            return
        layer = Layer(hname, spec.unpack(frame, pos))
        if spec is AETH:
            layer.update(aeth_decode(layer["syndrome"]))
        elif spec is CNP and layer["reserved"] == "00" * 16:
            del layer["reserved"]
        d.layers[hname] = layer
        pos += spec.size_bytes
    pad = bth["pad_count"]
    if (op == _UD_SEND_ONLY and bth["dest_qp"] in MAD_QPS
            and icrc_at - pos - pad >= MAD.size_bytes and pos + MAD.size_bytes <= n):
        d.layers["mad"] = Layer("mad", MAD.unpack(frame, pos))
        pos += MAD.size_bytes
    if pad > icrc_at - pos:
        d.problems.append(f"bth.pad_count: {pad} but the payload has {icrc_at - pos} bytes")
        d.layers["payload"] = Layer("payload", length=0, data="",
                                    pad=frame[pos:min(icrc_at, n)].hex())
    else:
        _payload(c, pos, icrc_at, pad)
    if pkt_end > n:
        d.layers["icrc"] = not_captured("icrc", c, icrc_at)
        return
    wire_val = int.from_bytes(frame[icrc_at:pkt_end], "little")
    ic = Layer("icrc", value=wire_val)
    if c.ambiguous:
        ic["valid"] = None
        ic["reason"] = "lrh.pkt_len disagrees with the record; extent of the packet unknown"
    else:
        calc = icrc_native(frame[:icrc_at], boff)
        ic["valid"] = calc == wire_val
        if calc != wire_val:
            d.problems.append(f"icrc: 0x{wire_val:08x} on the wire, 0x{calc:08x} computed")
    d.layers["icrc"] = ic


def _vcrc(c: _Ctx, pkt_end: int, vstate: str) -> None:
    frame, n, d = c.frame, c.n, c.d
    if vstate == "absent":
        d.layers["vcrc"] = Layer("vcrc", absent=True)
        return
    end = pkt_end + VCRC_BYTES
    if end > n:
        d.layers["vcrc"] = not_captured("vcrc", c, pkt_end)
        return
    wire_val = int.from_bytes(frame[pkt_end:end], "little")
    calc = vcrc(frame[:pkt_end])
    d.layers["vcrc"] = Layer("vcrc", value=wire_val, valid=calc == wire_val)
    if calc != wire_val:
        d.problems.append(f"vcrc: 0x{wire_val:04x} on the wire, 0x{calc:04x} computed")


def _ib_fc(c: _Ctx) -> None:
    frame, n, d = c.frame, c.n, c.d
    if n < IB_FC.size_bytes:
        c.short("ib_fc", IB_FC.size_bytes, n, 0)
        return
    fc = Layer("ib_fc", IB_FC.unpack(frame))
    calc = crc16(frame[:IB_FC.size_bytes - 2])
    fc["valid"] = calc == fc["lpcrc"]
    d.layers["ib_fc"] = fc
    if fc["op"] not in IbFcOp._value2member_map_:
        d.problems.append(f"ib_fc.op: {fc['op']} is reserved (0 flow control, 1 init)")
    if calc != fc["lpcrc"]:
        d.problems.append(f"ib_fc.lpcrc: 0x{fc['lpcrc']:04x} on the wire, 0x{calc:04x} "
                          f"computed")
    if n > IB_FC.size_bytes:
        d.trailer = frame[IB_FC.size_bytes:]


def dissect_erf(frame: bytes | bytearray | memoryview, orig_len: int | None = None) -> Decoded:
    """Decode one LINKTYPE_ERF record (ERF header, extension headers, packet).  Never
    raises."""
    c = _ctx(frame, orig_len)
    frame, n, d = c.frame, c.n, c.d
    if n == 0:
        if not c.snapped:
            d.problems.append("empty record (0 bytes)")
        return d
    if n < ERF.size_bytes:
        c.short("erf", ERF.size_bytes, n, 0)
        return d
    head = ERF.unpack(frame)
    erf = Layer("erf", {"ts": head["ts"],
                        "ts_ns": erf_time_ns(int.from_bytes(frame[:8], "little")), **head})
    d.layers["erf"] = erf
    _erf_flags(erf, d.problems)
    off = ERF.size_bytes
    more = erf["ext"]
    while more:
        if n - off < _EXT_BYTES:
            break
        more = frame[off] & _ERF_MORE_EXT
        off += _EXT_BYTES
    if off > ERF.size_bytes:
        erf["ext_headers"] = frame[ERF.size_bytes:off].hex()
    if more:  # the extension headers run past the record
        c.short("erf", _EXT_BYTES, n - off, off)
        return d
    rlen, wlen = erf["rlen"], erf["wlen"]
    if rlen < off:
        d.problems.append(f"erf.rlen: {rlen} is less than the {off} bytes of ERF headers")
        cap_end = n
    elif rlen > n:
        # rlen counts the padding after the packet (to 8 bytes with the varying-length
        # flag); a capture that did not keep it is not at fault when the packet is whole
        if off + wlen > n and not (c.snapped and rlen <= c.orig_len):
            d.problems.append(f"erf.rlen: {rlen} but the record has {n} bytes, and the "
                              f"packet (wlen {wlen}) ends at byte {off + wlen}")
        cap_end = n
    else:
        cap_end = rlen
    pkt_cap = min(off + wlen, cap_end)
    sub_frame = frame[off:pkt_cap]
    # A packet cut by the card (rlen) or by the capture's snaplen is "not captured" beyond
    # its end; a record shorter than its rlen otherwise (a problem above) is taken as is.
    explained = off + wlen > pkt_cap and (cap_end == rlen or c.snapped)
    sub_orig = wlen if explained else len(sub_frame)
    if pkt_cap < n:
        erf["pad"] = frame[pkt_cap:].hex()
    sub = _Ctx(sub_frame, sub_orig, ROCE_PORTS)
    if erf["type"] == ErfType.INFINIBAND:
        _ib(sub)
    elif erf["type"] == ErfType.INFINIBAND_LINK:
        _ib_fc(sub)
    else:
        sub.d.raw = sub_frame
    s = sub.d
    d.layers.update(s.layers)
    d.problems.extend(s.problems)
    d.raw, d.cut, d.trailer = s.raw, s.cut, s.trailer
    return d


#: ERF flag bits a capture card sets on a record it could not capture cleanly (Endace ERF
#: types reference; Wireshark's packet-erf.c shows each as an expert error).
_ERF_FLAG_PROBLEMS = ((0x08, "truncated (bit 3): the card ran out of buffer space"),
                      (0x10, "RX error (bit 4): the link reported a receive error"),
                      (0x20, "DS error (bit 5): an internal error of the card"))
#: Record types whose ``lctr`` is a loss counter (the colour types use it for a colour).
_ERF_LOSS_COUNTED = frozenset({ErfType.ETH, ErfType.INFINIBAND, ErfType.INFINIBAND_LINK})


def _erf_flags(erf: Layer, problems: list[str]) -> None:
    for bit, what in _ERF_FLAG_PROBLEMS:
        if erf["flags"] & bit:
            problems.append(f"erf.flags: 0x{erf['flags']:02x}: {what}")
    if erf["lctr"] and erf["type"] in _ERF_LOSS_COUNTED:
        problems.append(f"erf.lctr: {erf['lctr']} record(s) lost before this one (loss "
                        f"counter)")


def erf_time_ns(ts: int) -> int:
    """ns since 1970 of an ERF timestamp (the 64-bit number: whole seconds in the upper 32
    bits, a binary fraction of a second in the lower 32), the fraction rounded to the
    nearest ns, halves up, as Wireshark does (``wiretap/pcap-common.c``,
    ``pcap_read_erf_pseudoheader``)."""
    return (ts >> 32) * 10**9 + (((ts & 0xFFFFFFFF) * 10**9 + (1 << 31)) >> 32)


def dissect_record(rec: Record, *, roce_ports: Iterable[int] = ROCE_PORTS,
                   scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> Decoded:
    """Dissect a capture record by its linktype: 1 Ethernet (:func:`wire.dissect`), 247
    InfiniBand (:func:`dissect_ib`), 197 ERF (:func:`dissect_erf`); any other linktype is
    kept as ``raw`` with the problem "linktype N is not decoded"."""
    if rec.linktype == LINKTYPE_ETHERNET:
        return dissect(rec.data, rec.orig_len, roce_ports=roce_ports, scaleup=scaleup)
    if rec.linktype == LINKTYPE_INFINIBAND:
        return dissect_ib(rec.data, rec.orig_len)
    if rec.linktype == LINKTYPE_ERF:
        return dissect_erf(rec.data, rec.orig_len)
    d = Decoded(raw=bytes(rec.data), cut=True, caplen=len(rec.data), orig_len=rec.orig_len)
    d.problems.append(f"linktype {rec.linktype} is not decoded (only Ethernet 1, "
                      f"InfiniBand 247 and ERF 197)")
    return d


# ======================================================================== build
def _check_keys(d: Mapping, order: tuple[str, ...]) -> None:
    if not isinstance(d, Mapping):
        like = ('{"lrh": {}, "bth": {}, "payload": {"length": 64}}' if "erf" not in order else
                '{"erf": {}, "lrh": {}, "bth": {}, "payload": {"length": 64}}')
        raise BadValue(f"expected an object of layers like {like}, got {describe(d)}")
    unknown = set(d) - set(order) - set(_RECORD_KEYS) - set(_EXTRA_KEYS)
    if unknown:
        raise BadValue(f"unknown key(s) {sorted(unknown)}; known layers: {list(order)}")


def _int_field(spec: HeaderSpec, name: str, v: object) -> int:
    return parse_value(spec.field(name), v, spec.name)


def build_ib(d: Mapping[str, object], *, recompute: bool = False) -> bytes:
    """Build a native IB packet from a dict in the schema of :meth:`Decoded.to_dict`.

    Omitted fields take defaults; ``pkt_len``, ``pay_len``, PadCnt, the ICRC and the VCRC
    are computed unless given (``recompute=True`` ignores the given ones).  Raises
    :class:`~wire.errors.BadValue` naming the layer and field at fault."""
    _check_keys(d, IB_LAYER_ORDER)
    if not any(k in d for k in IB_LAYER_ORDER):
        return _hex(d, "raw", "raw") + _hex(d, "trailer", "trailer")
    nets = [k for k in ("grh", "rwh", "ipv6") if k in d]
    if len(nets) > 1:
        raise BadValue(f"a packet carries one of grh, rwh, ipv6, not {nets}", layer=nets[1])
    for k in (*EXT_SPECS, "mad", "icrc"):
        if k in d and "bth" not in d:
            raise BadValue(f"{k} needs a bth layer before it", layer=k)
    if "bth" in d and nets and nets[0] != "grh":
        raise BadValue(f"a bth cannot follow {nets[0]}", layer="bth")
    lrh = _layer(d, "lrh")
    default_lnh = {"grh": Lnh.IBA_GLOBAL, "rwh": Lnh.RAW, "ipv6": Lnh.IPV6}.get(
        nets[0] if nets else "", Lnh.IBA_LOCAL)
    lrh.setdefault("lnh", default_lnh)
    lnh = _int_field(LRH, "lnh", lrh["lnh"])
    want = {Lnh.IBA_GLOBAL: "grh", Lnh.RAW: "rwh", Lnh.IPV6: "ipv6"}.get(Lnh(lnh))
    if nets and want != nets[0]:
        raise BadValue(f"LNH {Lnh(lnh).name} does not carry a {nets[0]} layer", layer="lrh",
                       field="lnh")
    raw = _hex(d, "raw", "raw")
    cut = "raw" in d
    has_bth = "bth" in d
    body = _build_transport(d, recompute) if has_bth else _build_plain_payload(d)
    has_icrc = has_bth and not cut
    icrc_len = ICRC_BYTES if has_icrc else 0
    after_net = len(body) + len(raw) + icrc_len
    net = b""
    if "grh" in d:
        g = _layer(d, "grh")
        if not _given(g, "pay_len", recompute):
            g["pay_len"] = after_net
        net = GRH.pack(g)
    elif "rwh" in d:
        net = RWH.pack(_layer(d, "rwh"))
    elif "ipv6" in d:
        ip = _layer(d, "ipv6")
        ip.pop("checksum_ok", None)
        if not _given(ip, "payload_length", recompute):
            ip["payload_length"] = after_net
        net = IPV6.pack(ip)
    pkt_bytes = LRH.size_bytes + len(net) + after_net
    if not _given(lrh, "pkt_len", recompute):
        if pkt_bytes % 4:
            raise BadValue(f"the packet is {pkt_bytes} bytes, not a whole number of 4-byte "
                           f"words: pad the payload or give lrh.pkt_len", layer="lrh",
                           field="pkt_len")
        lrh["pkt_len"] = pkt_bytes // 4
    packet = LRH.pack(lrh) + net + body + raw
    if has_icrc:
        ic = _layer(d, "icrc")
        if _given(ic, "value", recompute):
            packet += icrc_bytes(parse_value(_ICRC_FIELD, ic["value"], "icrc"))
        elif ic.get("captured") and not recompute:
            got = _hex(ic, "captured", "icrc")[:ICRC_BYTES]
            packet += got + bytes(ICRC_BYTES - len(got))
        else:
            packet += icrc_bytes(icrc_native(packet, LRH.size_bytes + len(net)))
    vc = _layer(d, "vcrc")
    if ("vcrc" in d or not cut) and not vc.get("absent"):
        if _given(vc, "value", recompute):
            packet += vcrc_bytes(parse_value(_VCRC_FIELD, vc["value"], "vcrc"))
        elif vc.get("captured") and not recompute:
            got = _hex(vc, "captured", "vcrc")[:VCRC_BYTES]
            packet += got + bytes(VCRC_BYTES - len(got))
        else:
            packet += vcrc_bytes(vcrc(packet))
    return packet + _hex(d, "trailer", "trailer")


def _build_transport(d: Mapping, recompute: bool) -> bytes:
    """BTH + extended headers + [MAD] + payload + pad (no ICRC): the one transport builder
    shared with RoCEv2 (:func:`wire.stack.build_transport`)."""
    mad = MAD.pack(_layer(d, "mad")) if "mad" in d else b""
    return build_transport(d, recompute, roce=False, mad=mad)[0]


def _build_fc(d: Mapping, recompute: bool) -> bytes:
    fc = _layer(d, "ib_fc")
    fc.pop("valid", None)
    if not _given(fc, "lpcrc", recompute):
        fc["lpcrc"] = 0
        fc["lpcrc"] = crc16(IB_FC.pack(fc)[:IB_FC.size_bytes - 2])
    return IB_FC.pack(fc) + _hex(d, "trailer", "trailer")


def erf_ts(ts_ns: int) -> str:
    """The ERF timestamp (wire bytes, hex) of a time in ns: 64-bit little-endian 32.32
    fixed-point seconds, the fraction rounded up so that it reads back as the same ns."""
    sec, ns = divmod(ts_ns, 10**9)
    frac = -((-ns << 32) // 10**9)  # ceil(ns * 2**32 / 10**9) < 2**32
    return ((sec << 32) | frac).to_bytes(8, "little").hex()


_ERF_TS_NS = Field("ts_ns", 64, "ERF time in ns")
#: The first time an ERF timestamp cannot hold (its seconds are 32 bits).
_ERF_TS_END_NS = (1 << 32) * 10**9


def _erf_time(erf: dict, recompute: bool) -> None:
    """``erf.ts`` from ``erf.ts_ns`` when only the latter is given (or with ``recompute``);
    both given must agree."""
    given = erf.pop("ts_ns", None)
    if given is None:
        return
    ns = parse_value(_ERF_TS_NS, given, "erf")
    if ns >= _ERF_TS_END_NS:
        raise BadValue(f"{ns} is past what an ERF timestamp holds (32-bit seconds: before "
                       f"{_ERF_TS_END_NS})", layer="erf", field="ts_ns")
    if erf.get("ts") is None or recompute:
        erf["ts"] = erf_ts(ns)
        return
    ts = int.from_bytes(parse_value(ERF.field("ts"), erf["ts"], "erf").to_bytes(8, "big"),
                        "little")
    if erf_time_ns(ts) != ns:
        raise BadValue(f"{ns} disagrees with erf.ts (that is {erf_time_ns(ts)} ns): give one "
                       f"of them, or use --recompute to take ts_ns", layer="erf",
                       field="ts_ns")


def build_erf(d: Mapping[str, object], *, recompute: bool = False,
              ts_ns: int | None = None) -> bytes:
    """Build one LINKTYPE_ERF record: the ERF header (type, ``ext``, ``rlen``, ``wlen``
    computed unless given; ``ts`` from ``ts_ns`` (:func:`erf_ts`) unless given, tools such
    as Wireshark show the ERF time) and its packet (an IB data packet from the IB layers, an
    IB flow-control packet from ``ib_fc``, else ``raw``)."""
    _check_keys(d, ERF_LAYER_ORDER)
    if not any(k in d for k in ERF_LAYER_ORDER):  # too short for an ERF header: as given
        return _hex(d, "raw", "raw") + _hex(d, "trailer", "trailer")
    erf = _layer(d, "erf")
    ext = _hex(erf, "ext_headers", "erf")
    pad = _hex(erf, "pad", "erf")
    if len(ext) % _EXT_BYTES:
        raise BadValue(f"{len(ext)} bytes is not a whole number of 8-byte extension headers",
                       layer="erf", field="ext_headers")
    ib_keys = [k for k in IB_LAYER_ORDER if k in d]
    if "ib_fc" in d and ib_keys:
        raise BadValue(f"an ERF record carries ib_fc or a data packet, not both ({ib_keys})",
                       layer="ib_fc")
    sub = {k: v for k, v in d.items() if k not in ("erf", *_RECORD_KEYS)}
    if "ib_fc" in d:
        erf.setdefault("type", ErfType.INFINIBAND_LINK)
        packet = _build_fc(sub, recompute)
    elif ib_keys:
        erf.setdefault("type", ErfType.INFINIBAND)
        packet = build_ib(sub, recompute=recompute)
    else:
        packet = _hex(d, "raw", "raw") + _hex(d, "trailer", "trailer")
    if not _given(erf, "ext", recompute):
        erf["ext"] = int(bool(ext))
    _erf_time(erf, recompute)
    if erf.get("ts") is None and ts_ns is not None and 0 <= ts_ns < _ERF_TS_END_NS:
        erf["ts"] = erf_ts(ts_ns)
    if not _given(erf, "wlen", recompute):
        erf["wlen"] = len(packet)
    head_bytes = ERF.size_bytes + len(ext)
    if not _given(erf, "rlen", recompute):
        erf["rlen"] = head_bytes + len(packet) + len(pad)
    else:  # a record the capture card truncated keeps only rlen's bytes of the packet
        keep = _int_field(ERF, "rlen", erf["rlen"]) - head_bytes
        if 0 <= keep < len(packet):
            packet = packet[:keep]
    fields = {k: v for k, v in erf.items() if k not in ("ext_headers", "pad")}
    return ERF.pack(fields) + ext + packet + pad


def build_record_data(linktype: int, layers: Mapping[str, object], *, recompute: bool = False,
                      roce_ports: Iterable[int] = ROCE_PORTS,
                      scaleup: ScaleUpConfig = DEFAULT_SCALEUP,
                      ts_ns: int | None = None) -> bytes:
    """The record bytes for ``layers`` under ``linktype``: :func:`wire.build` (1),
    :func:`build_ib` (247), :func:`build_erf` (197); any other linktype takes ``raw``."""
    from .stack import build

    if linktype == LINKTYPE_ETHERNET:
        return build(layers, recompute=recompute, roce_ports=roce_ports, scaleup=scaleup)
    if linktype == LINKTYPE_INFINIBAND:
        return build_ib(layers, recompute=recompute)
    if linktype == LINKTYPE_ERF:
        return build_erf(layers, recompute=recompute, ts_ns=ts_ns)
    raw = layers.get("raw", "")
    try:
        return bytes.fromhex(raw) if isinstance(raw, str) else b""
    except ValueError:
        raise BadValue(f"expected hex bytes, got {raw!r}", layer="raw") from None

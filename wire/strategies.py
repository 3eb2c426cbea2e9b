"""Hypothesis strategies derived from the field tables, and whole valid frames.

Per header (any :class:`~wire.spec.HeaderSpec`, e.g. ``wire.SPECS["bth"]``):

* :func:`raw_values` - a dict of raw integers, each in range for its width (lists for arrays),
  every field present (reserved bits and unknown enum values included: every bit round-trips);
* :func:`shown_values` - the same as ``spec.unpack`` shows them: MACs as ``"aa:bb:.."``, dotted
  quads, RFC 5952 IPv6 text, hex strings (drawn as bytes and formatted here, independently of
  :func:`wire.spec.format_value`);
* :func:`header_bytes` - ``spec.size_bytes`` random bytes.

Whole frames, through :func:`wire.build`:

* :func:`frame_dicts` - the dict given to ``build``: RoCEv2 (Ethernet + 0..2 VLAN tags, IPv4
  with or without options or IPv6, UDP to port 4791, a BTH with any opcode of
  :data:`wire.bth.EXT_HEADERS` (CNP included) with the right extended headers holding random
  values and 0..64 bytes of payload), PFC and PAUSE frames;
* :func:`frames` - the same, built to bytes;
* :func:`scaleup_frame_dicts` / :func:`scaleup_frames` - every scale-up stack of
  :data:`SCALEUP_STACKS` for a :class:`~wire.scaleup.ScaleUpConfig`: ESUN (after 0..2 VLAN
  tags), SUNH + SUE, SUNH + UDP (a payload, or SUE to ``sue_udp_port``), AFH Gen1 + SUE,
  AFH Gen2 (the configured 12- or 6-byte form) + its transport, SUE over IPv4 / IPv6 + UDP;
  random values in every header field (reserved bits included), RH ops DATA (1..8
  transactions of 0..256 data bytes, the PDU within ``max_pdu_bytes`` /
  ``max_pdu_lite_bytes``), ACK, NACK and the reserved op 3 (no transactions).  Kept apart
  from :func:`frame_dicts`, whose frames other tools (Scapy's contrib, tshark) must know.
* :func:`ib_frame_dicts` / :func:`ib_frames` - native InfiniBand packets (linktype 247):
  local, global (GRH), MADs on QP0/QP1, raw (RWH) and IPv6 LNH variants;
  :func:`ib_fc_dicts` - ERF records of link flow-control packets.

"Valid" means what a correct sender emits around the randomised fields: lengths, checksums,
PadCnt and ICRC computed by ``build``, no IP fragments, PFC class-enable vectors with the
reserved high byte zero, MAC Control frames to 01:80:c2:00:00:01.  This module is the only
one that imports Hypothesis; ``import wire`` does not.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Any

from hypothesis import strategies as st

from . import build
from .bth import EXT_HEADERS
from .ethernet import VLAN_TPIDS
from .ib_ext import EXT_SPECS
from .ipv4 import IPPROTO_UDP
from .roce import CNP_OPCODE
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .spec import Field, HeaderSpec
from .stack import SPECS
from .sue import AFH_FORMS, MAX_TXN_DATA_BYTES, SueOp, TxnOpcode, txn_spec

__all__ = [
    "FRAME_KINDS", "OPCODES", "SCALEUP_STACKS", "field_values", "frame_dicts", "frames",
    "header_bytes", "ip_options", "raw_values", "scaleup_frame_dicts", "scaleup_frames",
    "shown_values", "sue_transport", "IB_KINDS", "ib_frame_dicts", "ib_frames", "ib_fc_dicts",
]

#: Every opcode with a defined set of extended headers (CNP included).
OPCODES: tuple[int, ...] = tuple(EXT_HEADERS)
#: The kinds of frame :func:`frame_dicts` draws.
FRAME_KINDS = ("roce", "pfc", "pause")
#: The scale-up stacks :func:`scaleup_frame_dicts` draws.
SCALEUP_STACKS = ("esun", "sunh_sue", "sunh_udp", "afh_gen1", "afh_gen2", "sue_ipv4",
                  "sue_ipv6")


def _element(f: Field) -> st.SearchStrategy[int]:
    # The edges (all zeros, lowest bit, all ones) are drawn often on purpose.
    return st.one_of(st.sampled_from((0, 1, f.max_value)),
                     st.integers(min_value=0, max_value=f.max_value))


def field_values(f: Field) -> st.SearchStrategy:
    """Raw values of one field: an int in range, or a list of ``count`` of them."""
    el = _element(f)
    return el if f.count == 1 else st.lists(el, min_size=f.count, max_size=f.count)


def raw_values(spec: HeaderSpec) -> st.SearchStrategy[dict[str, object]]:
    """Every field of ``spec`` as raw integers in range (lists for arrays)."""
    return st.fixed_dictionaries({f.name: field_values(f) for f in spec.fields})


def _ipv6_text(b: bytes) -> str:
    """RFC 5952 text, IPv4-mapped addresses in mixed notation (section 5) on every Python."""
    if b[:12] == bytes(10) + b"\xff\xff":
        return "::ffff:" + ".".join(str(x) for x in b[12:])
    return str(ipaddress.IPv6Address(b))


def _shown_element(f: Field) -> st.SearchStrategy[object]:
    n = f.bits // 8
    if f.fmt == "mac":
        return st.binary(min_size=6, max_size=6).map(lambda b: ":".join(f"{x:02x}" for x in b))
    if f.fmt == "ipv4":
        return st.binary(min_size=4, max_size=4).map(lambda b: ".".join(str(x) for x in b))
    if f.fmt == "ipv6":
        return st.one_of(
            st.binary(min_size=16, max_size=16),
            st.binary(min_size=4, max_size=4).map(lambda b: bytes(10) + b"\xff\xff" + b),
        ).map(_ipv6_text)
    if f.fmt == "hex":
        return st.binary(min_size=n, max_size=n).map(bytes.hex)
    return _element(f)


def shown_values(spec: HeaderSpec) -> st.SearchStrategy[dict[str, object]]:
    """Every field of ``spec`` as :meth:`HeaderSpec.unpack` shows it."""
    out = {}
    for f in spec.fields:
        el = _shown_element(f)
        out[f.name] = el if f.count == 1 else st.lists(el, min_size=f.count, max_size=f.count)
    return st.fixed_dictionaries(out)


def header_bytes(spec: HeaderSpec) -> st.SearchStrategy[bytes]:
    """``spec.size_bytes`` arbitrary bytes (every bit pattern decodes)."""
    return st.binary(min_size=spec.size_bytes, max_size=spec.size_bytes)


# ---------------------------------------------------------------------- frames
def _mac() -> st.SearchStrategy[str]:
    return _shown_element(SPECS["eth"].field("src"))


@st.composite
def ip_options(draw) -> str:
    """Well-formed IPv4 options (RFC 791 3.1), 4..40 bytes, as hex: NOPs, Router Alert
    (RFC 2113) and unassigned type-length-value options, padded with End of Options."""
    out = b""
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("nop", "ra", "tlv")))
        if kind == "nop":
            item = b"\x01"
        elif kind == "ra":
            item = b"\x94\x04\x00\x00"
        else:
            data = draw(st.binary(max_size=6))
            item = bytes((draw(st.sampled_from((0x1E, 0x5E, 0x9E))), 2 + len(data))) + data
        if len(out) + len(item) > 40:
            break
        out += item
    out += bytes(-len(out) % 4)
    return out.hex()


def _vlan_tags(max_tags: int, tpids: Iterable[int]) -> st.SearchStrategy[list[dict]]:
    tag = st.fixed_dictionaries({
        "tpid": st.sampled_from(sorted(tpids)),
        "pcp": st.integers(0, 7), "dei": st.integers(0, 1), "vid": st.integers(0, 4095),
    })
    return st.lists(tag, min_size=0, max_size=max_tags)


def _ip_layer(draw, d: dict, version: int, with_options: bool) -> None:
    """An ipv4 or ipv6 layer with random addresses, DSCP/ECN and the rest, into ``d``."""
    if version == 4:
        ip = {
            "src": draw(_shown_element(SPECS["ipv4"].field("src"))),
            "dst": draw(_shown_element(SPECS["ipv4"].field("dst"))),
            "dscp": draw(st.integers(0, 63)), "ecn": draw(st.integers(0, 3)),
            "id": draw(st.integers(0, 0xFFFF)), "flags": draw(st.sampled_from((0, 2))),
            "ttl": draw(st.integers(1, 255)),
        }
        if with_options and draw(st.booleans()):
            ip["options"] = draw(ip_options())
        d["ipv4"] = ip
    else:
        d["ipv6"] = {
            "src": draw(_shown_element(SPECS["ipv6"].field("src"))),
            "dst": draw(_shown_element(SPECS["ipv6"].field("dst"))),
            "dscp": draw(st.integers(0, 63)), "ecn": draw(st.integers(0, 3)),
            "flow_label": draw(st.integers(0, 0xFFFFF)), "hop_limit": draw(st.integers(1, 255)),
        }


@st.composite
def _roce(draw, opcodes, ip_versions, max_vlan_tags, tpids, with_options) -> dict:
    d: dict[str, object] = {"eth": {"src": draw(_mac()), "dst": draw(_mac())}}
    tags = draw(_vlan_tags(max_vlan_tags, tpids))
    if tags:
        d["vlan"] = tags
    _ip_layer(draw, d, draw(st.sampled_from(sorted(ip_versions))), with_options)
    d["udp"] = {"sport": draw(st.integers(0, 0xFFFF)),
                **({"checksum": "auto"} if draw(st.booleans()) else {})}
    op = draw(st.sampled_from(sorted(opcodes)))
    bth = draw(raw_values(SPECS["bth"]))
    bth["opcode"] = op
    del bth["pad_count"]  # computed by build from the payload length
    d["bth"] = bth
    for h in EXT_HEADERS[op][1]:
        d[h] = draw(raw_values(EXT_SPECS[h]))
    if op == CNP_OPCODE:
        # A CNP carries no payload; its reserved bytes are zero, or anything (every bit
        # round-trips) now and then.
        d["bth"]["becn"] = draw(st.sampled_from((1, 1, 1, 0)))
        if draw(st.integers(0, 3)) != 0:
            d["cnp"] = {"reserved": "00" * 16}
    else:
        d["payload"] = {"data": draw(st.binary(max_size=64)).hex()}
    return d


@st.composite
def _pfc(draw) -> dict:
    return {
        "eth": {"src": draw(_mac())},
        "mac_control": {},
        "pfc": {"class_enable": draw(st.integers(0, 0xFF)),
                "quanta": draw(field_values(SPECS["pfc"].field("quanta")))},
    }


@st.composite
def _pause(draw) -> dict:
    return {"eth": {"src": draw(_mac())}, "mac_control": {},
            "pause": {"quanta": draw(st.integers(0, 0xFFFF))}}


def frame_dicts(kinds: Iterable[str] = FRAME_KINDS, *, opcodes: Iterable[int] = OPCODES,
                ip_versions: Iterable[int] = (4, 6), max_vlan_tags: int = 2,
                tpids: Iterable[int] = VLAN_TPIDS, ipv4_options: bool = True,
                ) -> st.SearchStrategy[dict]:
    """Dicts for :func:`wire.build` describing complete, valid frames of the given kinds.

    ``opcodes``, ``ip_versions``, ``max_vlan_tags``, ``tpids`` and ``ipv4_options`` narrow
    the RoCEv2 frames (e.g. to what another tool supports).
    """
    kinds = tuple(kinds)
    bad = set(kinds) - set(FRAME_KINDS)
    if bad or not kinds:
        raise ValueError(f"kinds must be a non-empty subset of {FRAME_KINDS}, got {kinds}")
    ops = tuple(opcodes)
    unknown = set(ops) - set(OPCODES)
    if unknown:
        raise ValueError(f"opcodes without a defined header layout: {sorted(unknown)}")
    by_kind: dict[str, st.SearchStrategy[dict]] = {}
    if "roce" in kinds:
        by_kind["roce"] = _roce(ops, tuple(ip_versions), max_vlan_tags, tuple(tpids),
                                ipv4_options)
    if "pfc" in kinds:
        by_kind["pfc"] = _pfc()
    if "pause" in kinds:
        by_kind["pause"] = _pause()
    # RoCEv2 frames have far more shapes than MAC Control frames: draw them 4 times as often.
    weighted = [k for k in by_kind for _ in range(4 if k == "roce" else 1)]
    return st.sampled_from(weighted).flatmap(by_kind.__getitem__)


def frames(kinds: Iterable[str] = FRAME_KINDS, **kw: Any) -> st.SearchStrategy[bytes]:
    """Complete valid frames as bytes: :func:`frame_dicts` built with :func:`wire.build`."""
    return frame_dicts(kinds, **kw).map(build)


# ---------------------------------------------------------------------- scale-up frames
def _txn_data(draw, n: int) -> str:
    """``n`` data bytes as hex: random when short, a drawn arithmetic pattern when long (the
    Hypothesis buffer stays small for 8 x 256 bytes)."""
    if n <= 64:
        return draw(st.binary(min_size=n, max_size=n)).hex()
    start, step = draw(st.integers(0, 255)), draw(st.integers(1, 255))
    return bytes((start + i * step) & 0xFF for i in range(n)).hex()


@st.composite
def sue_transport(draw, kind: str = "sue_rh", scaleup: ScaleUpConfig = DEFAULT_SCALEUP,
                  max_txns: int = 8) -> dict:
    """The transport layers of one PDU for :func:`wire.build`: ``sue_rh`` (+ ``sue_txn``) for
    ``"sue_rh"``, ``sue_txn`` only for ``"sue_lite"``, ``raw`` bytes for ``"raw"``.

    RH fields are random (reserved bits included); op DATA (drawn most often) carries
    1..``max_txns`` transactions, ACK / NACK / reserved op 3 none.  Each transaction has a
    non-zero opcode (unknown values too), random flags, tag (and address), and
    0..256 data bytes; descriptors plus data stay within the PDU limit of the kind.
    """
    if kind == "raw":
        return {"raw": draw(st.binary(max_size=64)).hex()}
    out: dict[str, object] = {}
    with_txns = True
    if kind == "sue_rh":
        rh = draw(raw_values(SPECS["sue_rh"]))
        rh["op"] = draw(st.sampled_from((SueOp.DATA,) * 5 + (SueOp.ACK, SueOp.NACK,
                                                               SueOp.RESERVED)))
        out["sue_rh"] = rh
        with_txns = rh["op"] == SueOp.DATA
        budget = scaleup.max_pdu_bytes
    else:
        budget = scaleup.max_pdu_lite_bytes
    if not with_txns:
        return out
    spec = txn_spec(scaleup.txn_hdr_bytes)
    h = spec.size_bytes
    txns = []
    for _ in range(draw(st.integers(1, max_txns))):
        if budget < h:
            break
        cap = min(MAX_TXN_DATA_BYTES, budget - h)
        n = draw(st.one_of(st.sampled_from(sorted({0, 1, cap})), st.integers(0, cap)))
        t = draw(raw_values(spec))
        for k in ("last", "length"):  # computed by build
            del t[k]
        t["opcode"] = draw(st.one_of(st.sampled_from([int(o) for o in TxnOpcode]),
                                     st.integers(1, spec.field("opcode").max_value)))
        t["data"] = _txn_data(draw, n)
        txns.append(t)
        budget -= h + n
    out["sue_txn"] = txns
    return out


@st.composite
def _scaleup(draw, stack: str, sc: ScaleUpConfig, max_vlan_tags: int, tpids) -> dict:
    d: dict[str, object] = {}
    if stack != "afh_gen2":
        d["eth"] = {"src": draw(_mac()), "dst": draw(_mac())}
    kind = "sue_rh"
    if stack == "esun":
        tags = draw(_vlan_tags(max_vlan_tags, tpids))
        if tags:
            d["vlan"] = tags
        d["esun"] = draw(raw_values(SPECS["esun"]))
        kind = sc.esun_transport
    elif stack in ("sunh_sue", "sunh_udp"):
        sh = draw(raw_values(SPECS["sunh"]))
        d["sunh"] = sh
        if stack == "sunh_sue":
            sh["next_header"] = sc.sunh_sue_protocol
        else:
            sh["next_header"] = IPPROTO_UDP
            sport = draw(st.integers(0, 0xFFFF))
            if draw(st.booleans()):
                d["udp"] = {"sport": sport, "dport": sc.sue_udp_port}
            else:
                dport = draw(st.integers(0, 0xFFFF).filter(lambda p: p != sc.sue_udp_port))
                d["udp"] = {"sport": sport, "dport": dport}
                d["payload"] = {"data": draw(st.binary(max_size=64)).hex()}
                return d
    elif stack == "afh_gen1":
        afh = draw(raw_values(AFH_FORMS["gen1"]))
        afh.update(form="gen1", type=sc.sue_ethertype)
        d["afh"] = afh
    elif stack == "afh_gen2":
        form = "gen2_12" if sc.afh_gen2_form == "12" else "gen2_6"
        afh = draw(raw_values(AFH_FORMS[form]))
        afh.update(form=form, type=sc.sue_ethertype)
        d["afh"] = afh
        kind = sc.afh_gen2_12_transport if form == "gen2_12" else sc.afh_gen2_6_transport
    else:  # sue_ipv4 / sue_ipv6
        _ip_layer(draw, d, 4 if stack == "sue_ipv4" else 6, True)
        d["udp"] = {"sport": draw(st.integers(0, 0xFFFF)), "dport": sc.sue_udp_port}
    d.update(draw(sue_transport(kind, sc)))
    return d


def scaleup_frame_dicts(stacks: Iterable[str] = SCALEUP_STACKS, *,
                        scaleup: ScaleUpConfig = DEFAULT_SCALEUP, max_vlan_tags: int = 2,
                        tpids: Iterable[int] = VLAN_TPIDS,
                        ) -> st.SearchStrategy[dict]:
    """Dicts for :func:`wire.build` (with ``scaleup=``) of complete, valid scale-up frames.

    ``stacks`` is a non-empty subset of :data:`SCALEUP_STACKS`; ``afh_gen2`` draws the form
    ``scaleup.afh_gen2_form`` selects (the other form is not dissected under that config).
    Build and dissect them with the same ``scaleup``.
    """
    stacks = tuple(stacks)
    bad = set(stacks) - set(SCALEUP_STACKS)
    if bad or not stacks:
        raise ValueError(f"stacks must be a non-empty subset of {SCALEUP_STACKS}, got {stacks}")
    tp = tuple(tpids)
    return st.sampled_from(stacks).flatmap(
        lambda s: _scaleup(s, scaleup, max_vlan_tags, tp))


def scaleup_frames(stacks: Iterable[str] = SCALEUP_STACKS, *,
                   scaleup: ScaleUpConfig = DEFAULT_SCALEUP, **kw: Any,
                   ) -> st.SearchStrategy[bytes]:
    """:func:`scaleup_frame_dicts` built to bytes with :func:`wire.build` (same config)."""
    return scaleup_frame_dicts(stacks, scaleup=scaleup, **kw).map(
        lambda d: build(d, scaleup=scaleup))


# ------------------------------------------------------------- native InfiniBand frames
#: The kinds of native IB packet :func:`ib_frame_dicts` draws (LNH variants and MADs).
IB_KINDS = ("local", "global", "mad", "raw", "ipv6")


@st.composite
def _ib(draw, kind: str, opcodes) -> dict:
    from .ib import GRH_NXT_HDR_IBA, Lnh

    lrh = draw(raw_values(SPECS["lrh"]))
    del lrh["pkt_len"]  # computed by build
    lrh["lnh"] = {"local": Lnh.IBA_LOCAL, "mad": Lnh.IBA_LOCAL, "global": Lnh.IBA_GLOBAL,
                  "raw": Lnh.RAW, "ipv6": Lnh.IPV6}[kind]
    d: dict[str, object] = {"lrh": lrh}
    if kind == "raw":
        d["rwh"] = draw(raw_values(SPECS["rwh"]))
        d["payload"] = {"data": (draw(st.binary(max_size=16)) * 4).hex()}
        return d
    if kind == "ipv6":
        ip = draw(raw_values(SPECS["ipv6"]))
        del ip["payload_length"]
        d["ipv6"] = ip
        d["payload"] = {"data": (draw(st.binary(max_size=16)) * 4).hex()}
        return d
    if kind == "global":
        g = draw(raw_values(SPECS["grh"]))
        del g["pay_len"]
        g["nxt_hdr"] = GRH_NXT_HDR_IBA
        d["grh"] = g
    bth = draw(raw_values(SPECS["bth"]))
    del bth["pad_count"]
    if kind == "mad":
        bth["opcode"] = 0x64  # UD SEND ONLY to QP0/QP1 (IBA 13.4.1)
        bth["dest_qp"] = draw(st.sampled_from((0, 1)))
        d["bth"] = bth
        d["deth"] = draw(raw_values(EXT_SPECS["deth"]))
        d["mad"] = draw(raw_values(SPECS["mad"]))
        d["payload"] = {"data": draw(st.binary(max_size=232)).hex()}
        return d
    op = draw(st.sampled_from(sorted(opcodes)))
    bth["opcode"] = op
    if op == 0x64 and bth["dest_qp"] in (0, 1):
        bth["dest_qp"] += 2  # MADs are the "mad" kind
    d["bth"] = bth
    for h in EXT_HEADERS[op][1]:
        d[h] = draw(raw_values(EXT_SPECS[h]))
    if op != CNP_OPCODE:
        d["payload"] = {"data": draw(st.binary(max_size=64)).hex()}
    return d


def ib_frame_dicts(kinds: Iterable[str] = IB_KINDS, *, opcodes: Iterable[int] = OPCODES,
                   ) -> st.SearchStrategy[dict]:
    """Dicts for :func:`wire.ib_stack.build_ib`: valid native IB packets (random values in
    every LRH/GRH/BTH/extended header/MAD field, reserved bits included; lengths, PadCnt,
    ICRC and VCRC computed by build) of the given :data:`IB_KINDS`."""
    kinds = tuple(kinds)
    if not kinds or set(kinds) - set(IB_KINDS):
        raise ValueError(f"kinds must be a non-empty subset of {IB_KINDS}, got {kinds}")
    ops = tuple(opcodes)
    return st.sampled_from(kinds).flatmap(lambda k: _ib(k, ops))


def ib_frames(kinds: Iterable[str] = IB_KINDS, **kw: Any) -> st.SearchStrategy[bytes]:
    """:func:`ib_frame_dicts` built to bytes (linktype 247 records)."""
    from .ib_stack import build_ib

    return ib_frame_dicts(kinds, **kw).map(build_ib)


@st.composite
def ib_fc_dicts(draw) -> dict:
    """An ERF type 25 record dict holding one link flow-control packet (LPCRC computed)."""
    fc = draw(raw_values(SPECS["ib_fc"]))
    del fc["lpcrc"]
    fc["op"] = draw(st.integers(0, 1))  # 2..15 are reserved (IBA 7.9.4)
    return {"erf": {"ts": draw(st.binary(min_size=8, max_size=8)).hex()}, "ib_fc": fc}

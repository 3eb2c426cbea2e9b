"""SUE-T framing: the scale-up header stacks (``esun``: Ethernet + ESUN EH;
``afh_gen1``; ``afh_gen2``: the 12-byte address form; ``sunh``; ``eth_ipv4_udp``), the
SUE reliability header, :class:`SuePacket`, :class:`SueFramer` and the per-hop rewrite
(:func:`forward_hop`).

Frames are real: the network header of ``header`` (``esun``: Ethernet + ESUN EH;
``afh_gen1``; ``afh_gen2``: the 12-byte address form; ``sunh``; ``eth_ipv4_udp``), the SUE
reliability header (RH), the packed transactions (descriptor + data each) and the R-CRC, all
made by :func:`wire.build`, so captures decode with ``wire.dissect``, ``lossless decode`` and
Wireshark with our Lua dissector.  The receiver reads the RH from the bytes it got; the
transactions travel beside the frame (:class:`SuePacket`) so latency can be measured without
decoding every frame (tests check that the bytes decode to the same transactions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sim.addresses import node_ip, node_mac
from sim.packet import NOT_ECT, SimPacket
from sim.scaleup.packing import DEFAULT_MAX_PDU_BYTES, DEFAULT_TXN_HDR_BYTES, Pdu, Txn
from wire import build
from wire.esun import ESUN, esun_forward_ttl
from wire.ethernet import ETHERNET, EtherType, payload_start
from wire.ipv4 import IPV4, ipv4_checksum
from wire.scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from wire.sue import AFH_GEN1, AFH_GEN2_12, SUE_RH
from wire.sunh import SUNH
from wire.udp import UDP

__all__ = ["HEADERS", "OVERHEAD_STACK", "DATA_TC", "ACK_TC", "ECT0", "PSN_MOD", "SueConfig",
           "SuePacket", "SueFramer", "forward_hop", "max_frame_bytes", "rh_offset", "txn_data"]

#: Network header stacks the endpoint can put in front of the RH.
HEADERS = ("esun", "afh_gen1", "afh_gen2", "sunh", "eth_ipv4_udp")
#: header -> the matching stack of :mod:`wire.overhead` (same bytes, same arithmetic).
OVERHEAD_STACK = {"esun": "esun", "afh_gen1": "afh_gen1", "afh_gen2": "afh_gen2",
                  "sunh": "sunh", "eth_ipv4_udp": "sue_ipv4_udp"}
#: [A] traffic class (and ESUN CoS) of DATA frames: lossless class 3, as the other built-ins.
DATA_TC = 3
#: [A] traffic class of ACK/NACK frames: a second lossless class (OCP SUE v1.0 via the MiracleFarms
#: summary: PFC needs >= 2 lossless classes, requests vs ACKs; docs/explanation/sue.md row 19).
ACK_TC = 6
#: ECN codepoint the endpoints send where the header has an ECN field (ECT(0)).
ECT0 = 2
PSN_MOD = 1 << 16


@dataclass(frozen=True)
class SueConfig:
    """Endpoint transport settings; every default is an assumption [A] unless noted."""

    header: str = "esun"
    #: SUE 4096 B (public); 1024 for SUE-Lite-sized PDUs.
    max_pdu_bytes: int = DEFAULT_MAX_PDU_BYTES
    txn_hdr_bytes: int = DEFAULT_TXN_HDR_BYTES
    hold_ps: int = 0
    selector: str = "oldest"
    window_pdus: int = 32
    rto_ps: int = 50_000_000
    ack_delay_ps: int = 1_000_000
    ack_every_pdus: int = 8
    ttl: int = 15
    loss_rate: float = 0.0
    data_tc: int = DATA_TC
    ack_tc: int = ACK_TC
    partition: int = 0

    def __post_init__(self) -> None:
        if self.header not in HEADERS:
            raise ValueError(f"header must be one of {HEADERS}, got {self.header!r}")
        if not 1 <= self.window_pdus <= 1 << 14:
            raise ValueError("window_pdus must be 1..16384 (well inside the 16-bit PSN space)")
        if self.ack_every_pdus < 1:
            raise ValueError("ack_every_pdus must be >= 1")
        if self.rto_ps <= 0 or self.ack_delay_ps < 0 or self.hold_ps < 0:
            raise ValueError("rto_ps must be > 0, ack_delay_ps and hold_ps >= 0")
        if not 1 <= self.ttl <= 15:
            raise ValueError("ttl must be 1..15 (4-bit TTL / hop limit)")
        if not 0.0 <= self.loss_rate < 1.0:
            raise ValueError("loss_rate must be in [0, 1)")

    @property
    def scaleup(self) -> ScaleUpConfig:
        return DEFAULT_SCALEUP.with_(txn_hdr_bytes=self.txn_hdr_bytes)


class SuePacket(SimPacket):
    """A SimPacket carrying a SUE frame, plus the transactions it holds (``pdu``, None for
    ACK/NACK) and its unwrapped PSN (``psn``) -- simulator bookkeeping beside the bytes."""

    __slots__ = ("pdu", "psn")

    def __init__(self, *args: Any, pdu: Pdu | None = None, psn: int = 0, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.pdu = pdu
        self.psn = psn


def txn_data(tag: int, n: int) -> str:
    """Deterministic data bytes of transaction ``tag`` (hex): its tag repeated."""
    return ((tag & 0xFFFFFFFF).to_bytes(4, "big") * 64)[:n].hex()


def rh_offset(header: str) -> int:
    return {
        "esun": ETHERNET.size_bytes + ESUN.size_bytes,
        "afh_gen1": ETHERNET.size_bytes + AFH_GEN1.size_bytes,
        "afh_gen2": AFH_GEN2_12.size_bytes,
        "sunh": ETHERNET.size_bytes + SUNH.size_bytes,
        "eth_ipv4_udp": ETHERNET.size_bytes + IPV4.size_bytes + UDP.size_bytes,
    }[header]


class SueFramer:
    """Real frames of one header stack (``wire.build``), and the RH read back from bytes."""

    def __init__(self, header: str = "esun", *, ttl: int = 15,
                 scaleup: ScaleUpConfig = DEFAULT_SCALEUP, partition: int = 0) -> None:
        if header not in HEADERS:
            raise ValueError(f"header must be one of {HEADERS}, got {header!r}")
        self.header = header
        self.ttl = ttl
        self.scaleup = scaleup
        self.partition = partition
        self.rh_offset = rh_offset(header)
        #: ECN codepoint of the frames (afh_gen2 has no ECN field: Not-ECT).
        self.ecn = NOT_ECT if header == "afh_gen2" else ECT0

    def net(self, src: int, dst: int, vc: int, tc: int) -> dict[str, Any]:
        """The network layers of the build dict."""
        h = self.header
        label = ((src * 0x9E37) ^ (dst * 0x85EB) ^ (vc << 14)) & 0xFFFF
        eth = {"eth": {"src": node_mac(src), "dst": node_mac(dst)}}
        if h == "esun":
            return {**eth, "esun": {"f": 1, "cos": tc, "ecn": self.ecn, "flow_label": label,
                                    "ttl": self.ttl}}
        if h == "afh_gen1":
            return {**eth, "afh": {"form": "gen1", "f": 1, "dscp": tc << 3, "ecn": self.ecn,
                                   "ttl": self.ttl}}
        if h == "afh_gen2":
            return {"afh": {"form": "gen2_12", "dst_xpu": dst, "src_xpu": src, "tc": tc,
                            "hop_limit": self.ttl, "entropy0": label & 0xF,
                            "entropy1": label >> 8}}
        if h == "sunh":
            return {**eth, "sunh": {"src": src, "dst": dst, "dscp": tc << 3, "ecn": self.ecn,
                                    "hop_limit": self.ttl, "flow_label": label & 0xFFF}}
        return {**eth, "ipv4": {"src": node_ip(src), "dst": node_ip(dst), "dscp": tc << 3,
                                "ecn": self.ecn, "ttl": self.ttl},
                "udp": {"sport": 0xC000 | (label & 0x3FFF)}}

    def frame(self, src: int, dst: int, vc: int, tc: int, op: int, npsn: int, apsn: int,
              txns: Sequence[Txn] = ()) -> bytes:
        d = self.net(src, dst, vc, tc)
        d["sue_rh"] = {"op": int(op), "xpuid": src & 0x3FF, "npsn": npsn % PSN_MOD,
                       "vc": vc, "partition": self.partition, "apsn": apsn % PSN_MOD}
        if txns:
            d["sue_txn"] = [{"opcode": t.opcode, "tag": t.tag & 0xFFFFFFFF,
                             "data": txn_data(t.tag, t.data_bytes)} for t in txns]
        return build(d, scaleup=self.scaleup)

    def rh(self, frame: bytes | bytearray) -> dict[str, Any]:
        return SUE_RH.unpack(frame, self.rh_offset)


def _dec(frame: bytearray, off: int, spec: Any, name: str) -> bool:
    byte, shift, mask = spec.byte_field(name)
    v = (frame[off + byte] >> shift) & mask
    if v <= 1:
        return False
    frame[off + byte] = (frame[off + byte] & ~(mask << shift) & 0xFF) | ((v - 1) << shift)
    return True


_IPV4_CSUM = IPV4.byte_field("checksum")[0]
_IPV4_IHL = IPV4.byte_field("ihl")
_ETH_TYPE = ETHERNET.byte_field("type")[0]


def forward_hop(frame: bytearray, scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> bool:
    """A switch's hop step on a scale-up frame, in place, via the field tables: TTL (ESUN EH,
    AFH Gen1, IPv4) or hop limit (SUNH, AFH Gen2 12-byte form) decremented, False (drop,
    ``ttl_expired``) when it arrives <= 1 ([A] as the sonic-mgmt ESUN test plan's E5, "TTL=0 or
    TTL=1 is dropped"; docs/explanation/sue.md row 18; draft-herbert-sunh-00: discard at 0).
    IPv4's header checksum is recomputed.  Other frames pass unchanged (True)."""
    if (len(frame) >= ETHERNET.size_bytes
            and int.from_bytes(frame[_ETH_TYPE:_ETH_TYPE + 2], "big") == scaleup.sue_ethertype):
        return _dec(frame, 0, AFH_GEN2_12, "hop_limit")
    loc = payload_start(frame)
    if loc is None:
        return True
    off, et = loc
    if et == scaleup.esun_ethertype:
        return esun_forward_ttl(frame, scaleup)
    if et == scaleup.sunh_ethertype and len(frame) >= off + SUNH.size_bytes:
        return _dec(frame, off, SUNH, "hop_limit")
    if et == scaleup.afh_gen1_ethertype and len(frame) >= off + AFH_GEN1.size_bytes:
        return _dec(frame, off, AFH_GEN1, "ttl")
    if et == EtherType.IPV4 and len(frame) >= off + IPV4.size_bytes:
        if not _dec(frame, off, IPV4, "ttl"):
            return False
        byte, shift, mask = _IPV4_IHL
        ihl = (frame[off + byte] >> shift & mask) * 4
        c = ipv4_checksum(frame[off:off + ihl])
        frame[off + _IPV4_CSUM:off + _IPV4_CSUM + 2] = c.to_bytes(2, "big")
    return True



def max_frame_bytes(header: str, max_pdu_bytes: int) -> int:
    """Largest DATA frame (bytes without FCS): network header + RH (8) + PDU + R-CRC (4)."""
    return rh_offset(header) + 8 + max_pdu_bytes + 4


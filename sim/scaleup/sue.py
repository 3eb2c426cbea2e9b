"""SUE-T over ESUN (and other scale-up header stacks): XPU endpoints with the transaction
packer and go-back-N reliability, a switch that forwards scale-up frames (TTL/hop-limit
decrement, ECN in the header, PFC), the SUE figures of a run (:func:`sue_summary`) and
parameter studies (:func:`study`, :func:`plot_study`).  docs/sue.md states every assumption.

Frames are real: the network header of ``header`` (``esun``: Ethernet + ESUN EH;
``afh_gen1``; ``afh_gen2``: the 12-byte address form; ``sunh``; ``eth_ipv4_udp``), the SUE
reliability header (RH), the packed transactions (descriptor + data each) and the R-CRC, all
made by :func:`wire.build`, so captures decode with ``wire.dissect``, ``lossless decode`` and
Wireshark with our Lua dissector.  The receiver reads the RH from the bytes it got; the
transactions travel beside the frame (:class:`SuePacket`) so latency can be measured without
decoding every frame (tests check that the bytes decode to the same transactions).

Reliability (shared/specs/esun_sue.md 2.3 item 4, **[A]** where marked):

* PSN space per {source, destination, VC} **[A]**; 16-bit NPSN on the wire, unwrapped with a
  window far below 2**15.
* APSN = the next PSN the receiver expects (everything below it arrived) **[A]**; carried in
  every DATA frame going the other way on the same VC (piggy-back) or in a standalone ACK
  frame (RH op ACK, no transactions) when no such data frame left within ``ack_delay_ps``
  of the first unacknowledged PDU, or at once when ``ack_every_pdus`` PDUs are
  unacknowledged (so a small window is not stalled by the delay).
* A frame whose PSN is above the expected one is discarded and answered by one NACK (RH op
  NACK, APSN = the expected PSN) per gap; a duplicate is discarded and re-acknowledged.
* The sender keeps at most ``window_pdus`` PDUs unacknowledged per {destination, VC} (fixed
  window, SUE's congestion control); on NACK, or ``rto_ps`` after the oldest unacknowledged PDU
  was (re)sent without progress, it goes back N: resends everything from the oldest
  unacknowledged PDU, in order, before any new PDU of that stream.
* Link errors: each frame crossing a link into a switch or an XPU is lost with probability
  ``loss_rate`` (one draw of the engine's seeded RNG per frame per hop), as a frame failing its
  FCS would be; PFC frames are never lost.

Link use (shared/specs/esun_sue.md 2.3 item 1): an XPU has at most one DATA frame in its port
(queued or being serialised); when it finishes, the packer cuts the next PDU at once
(work conserving), unless the data class is paused by PFC, in which case packing waits for the
resume.  ACK/NACK frames use their own lossless class (``ack_tc``) so they never wait behind
paused data (deadlock hygiene, item 5).

Credit-based flow control (CBFC, UEC 1.0 via SAI; esun_sue.md 1.1 and 1.3 item 5), at message
granularity, when the XPUs and the switch are given a :class:`CbfcConfig`: every link direction
is a :class:`CreditPort` (switch egress) or :class:`CreditXpuPort` (XPU egress) that starts a
frame of a credited class (VC = traffic class; the model's VC space is the 8 TCs) only if
``CU + pkt_credits <= CL``; the receiver frees the credits when the frame leaves its buffer
(switch: when it starts leaving the egress queue; XPU: on receipt) and returns them in a
CF_Update (no bandwidth: CtlOS replace idle) ``prop_ps`` later, at most once per
``min_spacing_bytes`` of link time per VC.  docs/sue.md, section "Credit-based flow control".
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sim.addresses import node_ip, node_mac
from sim.engine import Engine, Timer
from sim.events import Dropped, TxnPacked
from sim.net.port import Port
from sim.net.switch import Switch, _apply_pause, is_mac_control
from sim.packet import NOT_ECT, SimPacket
from sim.scaleup.packing import DEFAULT_MAX_PDU_BYTES, DEFAULT_TXN_HDR_BYTES, Packer, Pdu, Txn
from sim.trace import NullTracer, Tracer
from sim.units import frame_ser_time_ps
from wire import build
from wire.esun import ESUN, esun_forward_ttl
from wire.ethernet import ETHERNET, EtherType, payload_start
from wire.ipv4 import IPV4, ipv4_checksum
from wire.overhead import efficiency
from wire.scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from wire.sue import AFH_GEN1, AFH_GEN2_12, SUE_RH, SueOp, TxnOpcode
from wire.sunh import SUNH
from wire.udp import UDP

__all__ = [
    "HEADERS", "OVERHEAD_STACK", "DATA_TC", "ACK_TC", "ECT0", "SueConfig", "SuePacket",
    "SueFramer", "forward_hop", "XpuPort", "Xpu", "EsunSwitch", "sue_summary",
    "expected_goodput_pct", "percentile", "study", "plot_study", "CbfcConfig", "CreditPort",
    "CreditXpuPort", "cbfc_credits", "max_frame_bytes",
]

#: Network header stacks the endpoint can put in front of the RH.
HEADERS = ("esun", "afh_gen1", "afh_gen2", "sunh", "eth_ipv4_udp")
#: header -> the matching stack of :mod:`wire.overhead` (same bytes, same arithmetic).
OVERHEAD_STACK = {"esun": "esun", "afh_gen1": "afh_gen1", "afh_gen2": "afh_gen2",
                  "sunh": "sunh", "eth_ipv4_udp": "sue_ipv4_udp"}
#: [A] traffic class (and ESUN CoS) of DATA frames: lossless class 3, as the other built-ins.
DATA_TC = 3
#: [A] traffic class of ACK/NACK frames: a second lossless class (esun_sue.md 2.1: PFC needs
#: >= 2 lossless classes, requests vs ACKs).
ACK_TC = 6
#: ECN codepoint the endpoints send where the header has an ECN field (ECT(0)).
ECT0 = 2
_PSN_MOD = 1 << 16


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

    __slots__ = ("cbfc", "pdu", "psn")

    def __init__(self, *args: Any, pdu: Pdu | None = None, psn: int = 0, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.pdu = pdu
        self.psn = psn
        #: CBFC: (sending CreditPort, VC, credits) charged on the link the frame is on, until
        #: the receiver frees them; None without CBFC.
        self.cbfc: tuple[Any, int, int] | None = None


def _txn_data(tag: int, n: int) -> str:
    """Deterministic data bytes of transaction ``tag`` (hex): its tag repeated."""
    return ((tag & 0xFFFFFFFF).to_bytes(4, "big") * 64)[:n].hex()


def _rh_offset(header: str) -> int:
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
        self.rh_offset = _rh_offset(header)
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
        d["sue_rh"] = {"op": int(op), "xpuid": src & 0x3FF, "npsn": npsn % _PSN_MOD,
                       "vc": vc, "partition": self.partition, "apsn": apsn % _PSN_MOD}
        if txns:
            d["sue_txn"] = [{"opcode": t.opcode, "tag": t.tag & 0xFFFFFFFF,
                             "data": _txn_data(t.tag, t.data_bytes)} for t in txns]
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
    ``ttl_expired``) when it arrives <= 1 (esun_sue.md 1.3 item 2; SUNH -00: discard at 0).
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


class XpuPort(Port):
    """The XPU's egress port: a :class:`sim.net.port.Port` that also tells its owner when a
    priority resumes (pause expired or quanta 0), so the packer runs at that instant."""

    on_resume: Callable[[int], None] | None = None

    def pause(self, prio: int, quanta: int) -> None:
        super().pause(prio, quanta)
        if not quanta and self.on_resume is not None:
            self.engine.schedule_in(0, self.on_resume, prio, priority=1)

    def _expire(self, prio: int) -> None:
        super()._expire(prio)
        if self.on_resume is not None:
            self.engine.schedule_in(0, self.on_resume, prio, priority=1)


def max_frame_bytes(header: str, max_pdu_bytes: int) -> int:
    """Largest DATA frame (bytes without FCS): network header + RH (8) + PDU + R-CRC (4)."""
    return _rh_offset(header) + 8 + max_pdu_bytes + 4


#: Ethernet FCS bytes: CBFC's ``pkt_len`` counts the frame from DA to FCS.
_FCS_BYTES = 4
#: Never-ending pause used to mask a credit-blocked class from the base scheduler.
_FOREVER_PS = 1 << 62


def cbfc_credits(nbytes: int, credit_bytes: int, overhead_bytes: int = 0) -> int:
    """``pkt_credits = ceil((pkt_len + PktOvhd) / CreditSize)`` (esun_sue.md 1.1), ``pkt_len``
    = ``nbytes`` (frame without FCS, the simulator's unit) + 4 FCS; at least 1."""
    return max(1, -(-(nbytes + _FCS_BYTES + overhead_bytes) // credit_bytes))


@dataclass(frozen=True)
class CbfcConfig:
    """CBFC settings of every credited link direction.  Defaults are the SAI CBFC defaults
    (esun_sue.md 1.1) except ``limit_credits`` (the receiver buffer per VC per link, a
    scenario choice) and ``vcs``.

    ``limit_credits``: CL, per VC, in credits; ``credit_bytes``: CreditSize (SAI 128 B);
    ``min_spacing_bytes``: CF_min_spacing (SAI 6400 B, >= 800): a VC's CF_Update goes at most
    once per this many bytes of link time; ``overhead_bytes``: PktOvhd (SAI range -16..127;
    0 here); ``cc_update_ps``: the CC_Update timer (SAI 256 us), which only matters when
    frames are lost on a link (their credits leak until the next CC_Update resyncs them);
    ``vcs``: the traffic classes under credit control (the others are not credited)."""

    limit_credits: int
    credit_bytes: int = 128
    min_spacing_bytes: int = 6400
    overhead_bytes: int = 0
    cc_update_ps: int = 256_000_000
    vcs: tuple[int, ...] = (DATA_TC, ACK_TC)

    def __post_init__(self) -> None:
        if self.credit_bytes < 1:
            raise ValueError("credit_bytes must be >= 1")
        if self.limit_credits < 1:
            raise ValueError("limit_credits must be >= 1")
        if self.min_spacing_bytes < 800:
            raise ValueError("min_spacing_bytes must be >= 800 (SAI CF_min_spacing minimum)")
        if not -16 <= self.overhead_bytes <= 127:
            raise ValueError("overhead_bytes must be in -16..127 (SAI packet overhead)")
        if self.cc_update_ps < 1:
            raise ValueError("cc_update_ps must be >= 1")
        if not self.vcs or any(not 0 <= v < 8 for v in self.vcs):
            raise ValueError("vcs must be traffic classes 0..7")

    def credits(self, nbytes: int) -> int:
        return cbfc_credits(nbytes, self.credit_bytes, self.overhead_bytes)


class _CreditMixin:
    """CBFC on an egress :class:`sim.net.port.Port` (the sender's counters) plus, for the same
    link, the receiver's freed-but-unreported counters (kept here: one object per link
    direction; the receiver reports through :meth:`freed` / :meth:`lost`).

    Sender: ``credits_used[vc]`` (CU: Credits Consumed - Credits Freed as last reported; the
    20-bit cyclic counters of the wire are not modelled, only their difference) and
    ``credit_limit[vc]`` (CL).  A credited class whose head frame does not fit is masked from
    the port's own scheduler exactly like a paused class (work conserving for the others);
    frames already started complete.  Credits are charged when a frame starts (dequeue)."""

    # Attributes of sim.net.port.Port used here (for the type checker).
    engine: Engine
    queues: list[deque[SimPacket]]
    _paused_until_ps: list[int]
    busy: bool
    prop_ps: int
    rate_bps: int
    on_dequeue: Callable[[int, SimPacket], None] | None

    def __init__(self, *args: Any, cbfc: CbfcConfig, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.cbfc = cbfc
        vcs = tuple(sorted(set(cbfc.vcs)))
        self._credited = vcs
        self.credit_limit = [cbfc.limit_credits if tc in vcs else 0 for tc in range(8)]
        self.credits_used = [0] * 8
        self.max_credits_used = [0] * 8
        #: Credit-blocking episodes (a class found blocked after it was not).
        self.cbfc_stalls = 0
        self._stalled = [False] * 8
        # receiver side of this link
        self.unreported = [0] * 8
        self._cf_last_ps: list[int | None] = [None] * 8
        self._cf_timer: list[Timer | None] = [None] * 8
        self.cf_updates = 0
        self.leaked = [0] * 8
        self.cc_updates = 0
        self._cc_timer: Timer | None = None
        self._spacing_ps = -(-cbfc.min_spacing_bytes * 8 * 10**12 // self.rate_bps)
        self._owner_dequeue = self.on_dequeue
        self.on_dequeue = self._cbfc_dequeue
        self._rr_fast = False  # enqueue's cut-through knows pauses, not credits
        self._base_pick = self._pick  # type: ignore[has-type]
        self._pick = self._cbfc_pick

    # ------------------------------------------------------------------ sender
    def credit_blocked(self, tc: int, nbytes: int) -> bool:
        """True (and a stall counted if this starts one) when a frame of ``nbytes`` on class
        ``tc`` could not start now for lack of credits."""
        if tc not in self._credited:
            return False
        if self.credits_used[tc] + self.cbfc.credits(nbytes) > self.credit_limit[tc]:
            if not self._stalled[tc]:
                self._stalled[tc] = True
                self.cbfc_stalls += 1
            return True
        self._stalled[tc] = False
        return False

    def _cbfc_pick(self) -> int | None:
        blocked = [tc for tc in self._credited
                   if self.queues[tc] and self.credit_blocked(tc, self.queues[tc][0].nbytes)]
        if not blocked:
            return self._base_pick()
        until = self._paused_until_ps
        saved = [until[tc] for tc in blocked]
        for tc in blocked:
            until[tc] = _FOREVER_PS
        try:
            return self._base_pick()
        finally:
            for tc, u in zip(blocked, saved, strict=True):
                until[tc] = u

    def _cbfc_dequeue(self, index: int, pkt: SimPacket) -> None:
        if self._owner_dequeue is not None:
            self._owner_dequeue(index, pkt)  # the receiver side frees the previous link first
        tc = pkt.tc
        if tc in self._credited and isinstance(pkt, SuePacket):
            n = self.cbfc.credits(pkt.nbytes)
            used = self.credits_used[tc] + n
            self.credits_used[tc] = used
            if used > self.max_credits_used[tc]:
                self.max_credits_used[tc] = used
            pkt.cbfc = (self, tc, n)

    def _cf_arrive(self, tc: int, n: int) -> None:
        """A CF_Update (or a CC_Update resync) reaches the sender: ``n`` credits back."""
        self.credits_used[tc] -= n
        self._credits_back(tc)

    def _credits_back(self, tc: int) -> None:
        if not self.busy:
            self._start()  # type: ignore[attr-defined]

    # ---------------------------------------------------------------- receiver
    def freed(self, tc: int, n: int) -> None:
        """The receiver freed ``n`` credits of VC ``tc`` (the frame left its buffer).  They are
        reported in a CF_Update now if the VC's last one was at least ``min_spacing_bytes`` of
        link time ago, else when that spacing has passed (with whatever accrued meanwhile)."""
        self.unreported[tc] += n
        if self._cf_timer[tc] is not None:
            return
        now = self.engine.now_ps
        last = self._cf_last_ps[tc]
        if last is None or now - last >= self._spacing_ps:
            self._cf_send(tc)
        else:
            self._cf_timer[tc] = self.engine.schedule(last + self._spacing_ps, self._cf_send,
                                                      tc, priority=1)

    def _cf_send(self, tc: int) -> None:
        self._cf_timer[tc] = None
        n = self.unreported[tc]
        if not n:
            return
        self.unreported[tc] = 0
        self._cf_last_ps[tc] = self.engine.now_ps
        self.cf_updates += 1
        self.engine.schedule_in(self.prop_ps, self._cf_arrive, tc, n)

    def lost(self, tc: int, n: int) -> None:
        """A frame holding ``n`` credits of ``tc`` was lost on the link: the receiver never
        frees them; the sender's next CC_Update (every ``cc_update_ps`` on a grid from t = 0)
        lets the receiver see the gap and return them (one round trip later)."""
        self.leaked[tc] += n
        if self._cc_timer is None:
            period = self.cbfc.cc_update_ps
            at = (self.engine.now_ps // period + 1) * period
            self._cc_timer = self.engine.schedule(at, self._cc_update)

    def _cc_update(self) -> None:
        self._cc_timer = None
        self.cc_updates += 1
        for tc in range(8):
            n = self.leaked[tc]
            if n:
                self.leaked[tc] = 0
                self.engine.schedule_in(2 * self.prop_ps, self._cf_arrive, tc, n)


class CreditPort(_CreditMixin, Port):
    """A switch egress :class:`sim.net.port.Port` under CBFC (see :class:`_CreditMixin`)."""


class CreditXpuPort(_CreditMixin, XpuPort):
    """The XPU's egress port under CBFC: also tells its owner (``on_resume``) when credits
    of a class come back, so the packer runs at that instant."""

    def _credits_back(self, tc: int) -> None:
        super()._credits_back(tc)
        if self.on_resume is not None:
            self.engine.schedule_in(0, self.on_resume, tc, priority=1)


def cbfc_free(pkt: SimPacket) -> None:
    """The receiver of ``pkt`` frees its credits (no-op without CBFC)."""
    info = getattr(pkt, "cbfc", None)
    if info is not None:
        pkt.cbfc = None  # type: ignore[attr-defined]
        info[0].freed(info[1], info[2])


def cbfc_lose(pkt: SimPacket) -> None:
    """``pkt`` was lost on its link: its credits leak until a CC_Update (no-op without CBFC)."""
    info = getattr(pkt, "cbfc", None)
    if info is not None:
        pkt.cbfc = None  # type: ignore[attr-defined]
        info[0].lost(info[1], info[2])


@dataclass
class _Tx:
    """Sender state of one {destination, VC} stream."""

    next_psn: int = 0
    base: int = 0
    unacked: deque[Pdu] = field(default_factory=deque)
    resend: int | None = None
    rto: Timer | None = None
    order: int = 0


@dataclass
class _Rx:
    """Receiver state of one {source, VC} stream."""

    expected: int = 0
    nack_sent: bool = False
    ack_timer: Timer | None = None
    unacked: int = 0


def _unwrap(wire_psn: int, ref: int) -> int:
    """The PSN nearest to ``ref`` whose low 16 bits are ``wire_psn``."""
    d = (wire_psn - ref) % _PSN_MOD
    if d >= _PSN_MOD // 2:
        d -= _PSN_MOD
    return ref + d


class Xpu:
    """An XPU endpoint: traffic source, transaction packer, go-back-N sender and receiver.

    ``ids`` is the fabric's packet-id source; ``record`` keeps every delivery as
    ``(t_ps, src, vc, tag, opcode)`` in ``deliveries`` (tests)."""

    def __init__(self, engine: Engine, node_id: int, rate_bps: int, cfg: SueConfig, *,
                 ids: Callable[[], int], tracer: Tracer | None = None,
                 record: bool = False, cbfc: CbfcConfig | None = None) -> None:
        self.engine = engine
        self.node_id = node_id
        self.rate_bps = rate_bps
        self.cfg = cfg
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        self._ids = ids
        self.cbfc = cbfc
        self.port: XpuPort
        if cbfc is None:
            self.port = XpuPort(engine, node_id, 0, rate_bps, tracer=self.tracer,
                                on_dequeue=self._dequeued)
        else:
            self.port = CreditXpuPort(engine, node_id, 0, rate_bps, tracer=self.tracer,
                                      on_dequeue=self._dequeued, cbfc=cbfc)
        #: CBFC: packing waits until the data class has credits for a largest frame.
        self._max_frame = max_frame_bytes(cfg.header, cfg.max_pdu_bytes)
        self.port.on_resume = self._resumed
        self.ports = {0: self.port}
        self.framer = SueFramer(cfg.header, ttl=cfg.ttl, scaleup=cfg.scaleup,
                                partition=cfg.partition)
        self.packer = Packer(cfg.max_pdu_bytes, cfg.txn_hdr_bytes, cfg.hold_ps, cfg.selector)
        self.tx: dict[tuple[int, int], _Tx] = {}
        self.rx: dict[tuple[int, int], _Rx] = {}
        self.record = record
        self.deliveries: list[tuple[int, int, int, int, int]] = []
        self._data_in_port = False
        self._hold_timer: Timer | None = None
        self._tag = 0
        # counters
        self.txns_offered = 0
        self.txns_delivered = 0
        self.bytes_delivered = 0
        #: (t_ps, data bytes) of every PDU delivered in order.
        self.pdu_deliveries: list[tuple[int, int]] = []
        self.latencies_ps: list[int] = []
        self.read_latencies_ps: list[int] = []
        self.frames_sent = 0
        self.new_pdus = 0
        self.txns_packed = 0
        self.retransmissions = 0
        self.timeouts = 0
        self.nacks_sent = 0
        self.acks_sent = 0
        self.piggybacked_acks = 0
        self.duplicates = 0
        self.out_of_order = 0
        self.link_errors = 0
        self.ce_received = 0
        self.read_frac = 0.0
        #: Data bytes of a READ_RESP (start_traffic sets it to txn_bytes).
        self.read_bytes = 256
        self.read_resp_vc: Callable[[int], int] = lambda vc: vc

    # ---------------------------------------------------------------- traffic
    def submit(self, dst: int, vc: int, data_bytes: int,
               opcode: int = TxnOpcode.WRITE, origin_ps: int = -1,
               tag: int | None = None) -> Txn:
        """Queue a transaction now (the XPU's command interface)."""
        if tag is None:
            tag = self._tag
            self._tag += 1
        t = Txn(dst, vc, data_bytes, self.engine.now_ps, int(opcode), tag, self.node_id,
                origin_ps)
        self.txns_offered += 1
        self.packer.push(t)
        self._try_send()
        return t

    def start_traffic(self, *, load: float, txn_bytes: int, dests: Callable[[], int],
                      vcs: int, until_ps: int, arrivals: str = "poisson",
                      read_frac: float = 0.0, rng: random.Random | None = None) -> None:
        """Generate transactions of ``txn_bytes`` data at ``load`` x line rate (data bytes)
        until ``until_ps``; destinations from ``dests()``, VCs uniform over ``vcs``;
        ``read_frac`` of them are reads (READ_REQ with no data, answered by a READ_RESP of
        ``txn_bytes`` on the next VC)."""
        r = rng if rng is not None else self.engine.rng
        mean_ps = txn_bytes * 8 * 10**12 / (load * self.rate_bps)
        self.read_frac = read_frac
        self.read_bytes = txn_bytes
        self.read_resp_vc = lambda vc: (vc + 1) % vcs

        def gap() -> int:
            if arrivals == "cbr":
                return max(1, round(mean_ps))
            return max(1, round(r.expovariate(1.0 / mean_ps)))

        def arrive() -> None:
            vc = r.randrange(vcs) if vcs > 1 else 0
            dst = dests()
            if read_frac and r.random() < read_frac:
                self.submit(dst, vc, 0, TxnOpcode.READ_REQ)
            else:
                self.submit(dst, vc, txn_bytes, TxnOpcode.WRITE)
            nxt = self.engine.now_ps + gap()
            if nxt < until_ps:
                self.engine.schedule(nxt, arrive)

        first = gap() if arrivals == "poisson" else r.randrange(max(1, round(mean_ps)))
        if first < until_ps:
            self.engine.schedule(self.engine.now_ps + first, arrive)

    # ------------------------------------------------------------------ sending
    def _stream(self, key: tuple[int, int]) -> _Tx:
        st = self.tx.get(key)
        if st is None:
            st = self.tx[key] = _Tx(order=len(self.tx))
        return st

    def _window_open(self, key: tuple[int, int]) -> bool:
        st = self.tx.get(key)
        if st is None:
            return True
        return st.resend is None and st.next_psn - st.base < self.cfg.window_pdus

    def _try_send(self) -> None:
        if self._data_in_port or self.port.paused(self.cfg.data_tc):
            return
        if self.cbfc is not None and self.port.credit_blocked(  # type: ignore[attr-defined]
                self.cfg.data_tc, self._max_frame):
            return
        now = self.engine.now_ps
        # 1. go-back-N resends first (oldest stream first)
        resending = [(st.order, k) for k, st in self.tx.items() if st.resend is not None]
        if resending:
            key = min(resending)[1]
            st = self.tx[key]
            assert st.resend is not None
            psn = st.resend
            pdu = st.unacked[psn - st.base]
            st.resend = psn + 1 if psn + 1 < st.next_psn else None
            self.retransmissions += 1
            self._send_data(key, psn, pdu)
            return
        pdu = self.packer.pack(now, self._window_open)
        if pdu is None:
            self._arm_hold()
            return
        key = (pdu.dst, pdu.vc)
        st = self._stream(key)
        psn = st.next_psn
        st.next_psn += 1
        st.unacked.append(pdu)
        self.new_pdus += 1
        self.txns_packed += pdu.info.txns
        pkt = self._send_data(key, psn, pdu)
        if not isinstance(self.tracer, NullTracer):
            self.tracer.emit(TxnPacked(now, self.node_id, pdu.dst, pdu.vc, pdu.info.txns,
                                       pkt.nbytes))

    def _arm_hold(self) -> None:
        at = self.packer.next_timer_ps(self._window_open)
        if at is None:
            return
        at = max(at, self.engine.now_ps)
        t = self._hold_timer
        if t is not None and not t.cancelled:
            if t.at_ps <= at:
                return
            t.cancel()
        self._hold_timer = self.engine.schedule(at, self._hold_fired, priority=1)

    def _hold_fired(self) -> None:
        self._hold_timer = None
        self._try_send()

    def _send_data(self, key: tuple[int, int], psn: int, pdu: Pdu) -> SuePacket:
        dst, vc = key
        now = self.engine.now_ps
        rx = self.rx.get((dst, vc))
        apsn = rx.expected if rx is not None else 0
        if rx is not None and rx.unacked:
            if rx.ack_timer is not None:
                rx.ack_timer.cancel()
                rx.ack_timer = None
            rx.unacked = 0
            self.piggybacked_acks += 1
        tc = self.cfg.data_tc
        frame = self.framer.frame(self.node_id, dst, vc, tc, SueOp.DATA, psn, apsn, pdu.txns)
        pkt = SuePacket(self._ids(), now, len(frame), flow=self._flow(dst, vc), tc=tc,
                        ecn=self.framer.ecn, src=self.node_id, dst=dst, frame=frame,
                        pdu=pdu, psn=psn)
        st = self.tx[key]
        if st.rto is None:
            st.rto = self.engine.schedule_in(self.cfg.rto_ps, self._timeout, key)
        self.frames_sent += 1
        self._data_in_port = True
        self.port.enqueue(pkt)
        return pkt

    def _flow(self, dst: int, vc: int) -> int:
        return (self.node_id << 12 | dst << 2 | vc) & 0xFFFFF

    def _dequeued(self, index: int, pkt: SimPacket) -> None:
        if pkt.tc == self.cfg.data_tc:
            t = frame_ser_time_ps(pkt.nbytes, self.rate_bps)
            self.engine.schedule_in(t, self._link_free, priority=1)

    def _link_free(self) -> None:
        self._data_in_port = False
        self._try_send()

    def _resumed(self, prio: int) -> None:
        if prio == self.cfg.data_tc:
            self._try_send()

    def _send_ctl(self, dst: int, vc: int, op: SueOp, apsn: int) -> None:
        tc = self.cfg.ack_tc
        frame = self.framer.frame(self.node_id, dst, vc, tc, op, 0, apsn)
        pkt = SuePacket(self._ids(), self.engine.now_ps, len(frame), flow=self._flow(dst, vc),
                        tc=tc, ecn=self.framer.ecn, src=self.node_id, dst=dst, frame=frame)
        self.port.enqueue(pkt)

    # ------------------------------------------------------------- reliability
    def _timeout(self, key: tuple[int, int]) -> None:
        st = self.tx[key]
        st.rto = None
        if st.base < st.next_psn:
            self.timeouts += 1
            st.resend = st.base
            st.rto = self.engine.schedule_in(self.cfg.rto_ps, self._timeout, key)
            self._try_send()

    def _on_ack(self, key: tuple[int, int], apsn_wire: int, nack: bool) -> None:
        st = self.tx.get(key)
        if st is None:
            return
        n = (apsn_wire - st.base) % _PSN_MOD
        if n > st.next_psn - st.base:
            return  # stale or foreign
        if n:
            for _ in range(n):
                st.unacked.popleft()
            st.base += n
            if st.resend is not None and st.resend < st.base:
                st.resend = st.base if st.base < st.next_psn else None
            if st.rto is not None:
                st.rto.cancel()
                st.rto = None
            if st.base < st.next_psn:
                st.rto = self.engine.schedule_in(self.cfg.rto_ps, self._timeout, key)
        if nack and st.base < st.next_psn:
            st.resend = st.base
        self._try_send()

    # ---------------------------------------------------------------- receive
    def receive(self, port: int, pkt: SimPacket) -> None:
        frame = pkt.frame
        if frame is not None and is_mac_control(frame):
            _apply_pause(self.port, pkt)
            return
        cfg = self.cfg
        if cfg.loss_rate and self.engine.rng.random() < cfg.loss_rate:
            cbfc_lose(pkt)
            self.link_errors += 1
            self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pkt.tc, pkt.id,
                                     pkt.flow, pkt.nbytes, "link_error"))
            return
        cbfc_free(pkt)  # an XPU absorbs at line rate: the buffer is freed on receipt
        if frame is None:
            return
        if pkt.ecn == 3:
            self.ce_received += 1
        rh = self.framer.rh(frame)
        src = pkt.src
        vc = rh["vc"]
        op = rh["op"]
        self._on_ack((src, vc), rh["apsn"], op == SueOp.NACK)
        if op != SueOp.DATA or not isinstance(pkt, SuePacket) or pkt.pdu is None:
            return
        rx = self.rx.get((src, vc))
        if rx is None:
            rx = self.rx[(src, vc)] = _Rx()
        psn = _unwrap(rh["npsn"], rx.expected)
        now = self.engine.now_ps
        if psn == rx.expected:
            rx.expected += 1
            rx.nack_sent = False
            rx.unacked += 1
            self._deliver(pkt.pdu, now)
            if rx.unacked >= cfg.ack_every_pdus:
                if rx.ack_timer is not None:
                    rx.ack_timer.cancel()
                self._ack_due(src, vc)
            elif rx.ack_timer is None:
                rx.ack_timer = self.engine.schedule_in(cfg.ack_delay_ps, self._ack_due, src, vc)
        elif psn > rx.expected:
            self.out_of_order += 1
            if not rx.nack_sent:
                rx.nack_sent = True
                self.nacks_sent += 1
                self._send_ctl(src, vc, SueOp.NACK, rx.expected)
        else:
            self.duplicates += 1
            rx.unacked += 1
            if rx.ack_timer is None:
                rx.ack_timer = self.engine.schedule_in(cfg.ack_delay_ps, self._ack_due, src, vc)

    def _ack_due(self, src: int, vc: int) -> None:
        rx = self.rx[(src, vc)]
        rx.ack_timer = None
        rx.unacked = 0
        self.acks_sent += 1
        self._send_ctl(src, vc, SueOp.ACK, rx.expected)

    def _deliver(self, pdu: Pdu, now: int) -> None:
        nbytes = 0
        for t in pdu.txns:
            nbytes += t.data_bytes
            self.latencies_ps.append(now - t.t_ps)
            if t.opcode == TxnOpcode.READ_RESP:
                self.read_latencies_ps.append(now - t.origin_ps)
            if self.record:
                self.deliveries.append((now, t.src, t.vc, t.tag, t.opcode))
        self.txns_delivered += len(pdu.txns)
        self.bytes_delivered += nbytes
        self.pdu_deliveries.append((now, nbytes))
        for t in pdu.txns:
            if t.opcode == TxnOpcode.READ_REQ:
                self.submit(t.src, self.read_resp_vc(t.vc), self.read_bytes,
                            TxnOpcode.READ_RESP, origin_ps=t.origin_ps)


class EsunSwitch(Switch):
    """:class:`sim.net.switch.Switch` for scale-up frames: on arrival a frame may be lost
    (``loss_rate``, link error), then its TTL / hop limit is decremented in the real bytes
    (:func:`forward_hop`; drop ``ttl_expired`` at <= 1) and, for ESUN, its traffic class is
    taken from the EH CoS (``ScaleUpConfig.cos_to_tc``; the EH overrides any PCP).  MMU
    admission, forwarding on the destination, ECN marking in the header (``SimPacket.mark_ce``
    -> ``wire.mark_ce``) and PFC are the base class's."""

    def __init__(self, *args: Any, loss_rate: float = 0.0,
                 scaleup: ScaleUpConfig = DEFAULT_SCALEUP, cbfc: CbfcConfig | None = None,
                 **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.loss_rate = loss_rate
        self.scaleup = scaleup
        #: CBFC on every port (egress: :class:`CreditPort`; ingress: credits freed when the
        #: frame starts leaving its egress queue), or None (PFC / lossy, the base switch).
        self.cbfc = cbfc
        self.link_errors = 0
        self.ttl_drops = 0
        self._cos = ESUN.byte_field("cos")

    def add_port(self, index: int, rate_bps: int, *, scheduler: str | None = None,
                 weights: Sequence[int] | None = None,
                 quantum_bytes: int | None = None) -> Port:
        if self.cbfc is None:
            return super().add_port(index, rate_bps, scheduler=scheduler, weights=weights,
                                    quantum_bytes=quantum_bytes)
        p = CreditPort(self.engine, self.node_id, index, rate_bps, tracer=self.tracer,
                       on_dequeue=self._on_dequeue,
                       scheduler=self.scheduler if scheduler is None else scheduler,
                       weights=self.weights if weights is None else weights,
                       quantum_bytes=self.quantum_bytes if quantum_bytes is None
                       else quantum_bytes, cbfc=self.cbfc)
        self.ports[index] = p
        self._fwd.clear()
        return p

    def receive(self, port: int, pkt: SimPacket) -> None:
        frame = pkt.frame
        if frame is not None and not is_mac_control(frame):
            if self.loss_rate and self.engine.rng.random() < self.loss_rate:
                cbfc_lose(pkt)
                self.link_errors += 1
                self._drop(port, pkt, "link_error")
                return
            if not isinstance(frame, bytearray):
                frame = pkt.frame = bytearray(frame)
            if not forward_hop(frame, self.scaleup):
                cbfc_free(pkt)
                self.ttl_drops += 1
                self._drop(port, pkt, "ttl_expired")
                return
            loc = payload_start(frame)
            if loc is not None and loc[1] == self.scaleup.esun_ethertype:
                byte, shift, mask = self._cos
                pkt.tc = self.scaleup.cos_to_tc[(frame[loc[0] + byte] >> shift) & mask]
        up = getattr(pkt, "cbfc", None)
        super().receive(port, pkt)
        if up is not None and pkt.cbfc is up and pkt.id not in self._ingress:  # type: ignore
            cbfc_free(pkt)  # dropped by the base switch (MMU, route, hop budget): freed now

    def _on_dequeue(self, port: int, pkt: SimPacket) -> None:
        cbfc_free(pkt)  # leaves the buffer: the ingress link's credits go back upstream
        super()._on_dequeue(port, pkt)

    def _drop(self, port: int, pkt: SimPacket, reason: str) -> None:
        self.drops += 1
        self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pkt.tc, pkt.id,
                                 pkt.flow, pkt.nbytes, reason))


# ----------------------------------------------------------------------- results
def percentile(values: Sequence[int], q: float) -> int | None:
    """Nearest-rank percentile (``q`` in (0, 100]) of integers; None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def expected_goodput_pct(header: str, txn_bytes: int, max_pdu_bytes: int = 4096,
                         txn_hdr_bytes: int = 8) -> float:
    """Goodput of back-to-back full PDUs by the byte arithmetic of :mod:`wire.overhead`
    (``k = max_pdu_bytes // (txn_bytes + txn_hdr_bytes)`` transactions per frame)."""
    k = max_pdu_bytes // (txn_bytes + txn_hdr_bytes)
    e = efficiency(OVERHEAD_STACK[header], txn_bytes, k,
                   DEFAULT_SCALEUP.with_(txn_hdr_bytes=txn_hdr_bytes))
    assert e.goodput_pct is not None
    return e.goodput_pct


def _xpus(scenario: Any) -> list[Xpu]:
    nodes = scenario.fabric.nodes
    ids = scenario.info.get("xpus") or sorted(n for n, x in nodes.items() if isinstance(x, Xpu))
    return [nodes[i] for i in ids]


def sue_summary(scenario: Any) -> dict[str, Any]:
    """SUE figures of a run scenario (``sue_packing``), for summary.json's ``sue`` key.

    ``goodput_bps``: transaction data bits delivered in order by all XPUs / run time;
    ``goodput_per_xpu_bps`` the same per XPU; ``steady_goodput_bps``: per receiving XPU, over
    the PDUs it delivered in the second half of the run, the data after the first of them
    divided by the time from the first to the last, averaged over the receivers (no start-up
    transient; at saturation this is what wire.overhead's arithmetic predicts);
    latency: transaction queued at the source -> delivered in order at the destination
    (ps, nearest rank); ``frames`` DATA frames sent (retransmissions included).  With CBFC
    also ``cbfc_stalls`` (credit-blocking episodes over every credited port, XPUs' and
    switch's), ``cf_updates`` (CF_Update messages), ``cc_updates`` (CC_Update resyncs, only
    after link losses), ``pfc_frames`` (PFC frames the switch sent: 0) and ``switch_drops``."""
    xs = _xpus(scenario)
    fab = scenario.fabric
    dur = fab.engine.now_ps or scenario.duration_ps
    rate = scenario.info.get("rate_bps") or (xs[0].rate_bps if xs else 0)
    lat: list[int] = []
    rlat: list[int] = []
    steady = []
    for x in xs:
        lat.extend(x.latencies_ps)
        rlat.extend(x.read_latencies_ps)
        late = [d for d in x.pdu_deliveries if d[0] >= dur // 2]
        if len(late) >= 2 and late[-1][0] > late[0][0]:
            got = sum(b for _, b in late[1:])
            steady.append(got * 8 * 10**12 / (late[-1][0] - late[0][0]))
    delivered = sum(x.bytes_delivered for x in xs)
    new_pdus = sum(x.new_pdus for x in xs)
    goodput = delivered * 8 * 10**12 / dur if dur else 0.0
    switches = [n for n in fab.nodes.values() if isinstance(n, EsunSwitch)]
    steady_bps = sum(steady) / len(steady) if steady else 0.0
    out = {
        "xpus": len(xs),
        "link_bps": rate,
        "txns_offered": sum(x.txns_offered for x in xs),
        "txns_delivered": sum(x.txns_delivered for x in xs),
        "bytes_delivered": delivered,
        "goodput_bps": round(goodput),
        "goodput_per_xpu_bps": round(goodput / len(xs)) if xs else 0,
        "steady_goodput_bps": round(steady_bps),
        "steady_efficiency_pct": round(100 * steady_bps / rate, 3) if rate else 0.0,
        "latency_p50_ps": percentile(lat, 50),
        "latency_p99_ps": percentile(lat, 99),
        "latency_mean_ps": round(sum(lat) / len(lat)) if lat else None,
        "read_latency_p50_ps": percentile(rlat, 50),
        "read_latency_p99_ps": percentile(rlat, 99),
        "frames": sum(x.frames_sent for x in xs),
        "new_pdus": new_pdus,
        "mean_txns_per_frame": round(sum(x.txns_packed for x in xs) / new_pdus, 4)
        if new_pdus else 0.0,
        "retransmissions": sum(x.retransmissions for x in xs),
        "timeouts": sum(x.timeouts for x in xs),
        "nacks": sum(x.nacks_sent for x in xs),
        "standalone_acks": sum(x.acks_sent for x in xs),
        "duplicates": sum(x.duplicates for x in xs),
        "link_errors": sum(x.link_errors for x in xs) + sum(s.link_errors for s in switches),
        "ttl_drops": sum(s.ttl_drops for s in switches),
        "ce_received": sum(x.ce_received for x in xs),
        "queued_txns": sum(len(x.packer) for x in xs),
    }
    if any(s.cbfc is not None for s in switches):
        ports: list[Any] = [x.port for x in xs]
        for sw in switches:
            ports.extend(sw.ports.values())
        ports = [p for p in ports if isinstance(p, _CreditMixin)]
        out["cbfc_stalls"] = sum(p.cbfc_stalls for p in ports)
        out["cf_updates"] = sum(p.cf_updates for p in ports)
        out["cc_updates"] = sum(p.cc_updates for p in ports)
        out["pfc_frames"] = sum(sum(sw.pause_sent.values()) for sw in switches)
        out["switch_drops"] = sum(sw.drops for sw in switches)
    hdr = scenario.params.get("header")
    if hdr in OVERHEAD_STACK:
        out["saturation_goodput_pct"] = round(expected_goodput_pct(
            hdr, scenario.params["txn_bytes"], scenario.params["max_pdu_bytes"],
            scenario.params["txn_hdr_bytes"]), 4)
    return out


# ----------------------------------------------------------------------- studies
STUDY_COLUMNS = ("header", "txn_bytes", "load", "hold_ns", "link_bps", "goodput_bps",
                 "goodput_per_xpu_bps", "steady_efficiency_pct", "saturation_goodput_pct",
                 "latency_p50_ps", "latency_p99_ps", "mean_txns_per_frame", "retransmissions")


def study(txn_bytes: Iterable[int] = (64, 128, 256), loads: Iterable[float] = (0.1, 0.5, 1.0),
          headers: Iterable[str] = ("esun",), base: Mapping[str, Any] | None = None,
          hold_ns: Iterable[float] | None = None,
          progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``sue_packing`` over every (header, transaction size, load[, hold]) combination,
    in this process and without output files (``lossless sweep sue_packing`` is the same study
    with outputs, seeds and Dask); ``base`` holds the other parameters.  Returns one row per
    run: the varied parameters, goodput, efficiency, p50/p99 latency (ps), transactions per
    frame, retransmissions."""
    from sim.scenarios import get
    from sim.study.sweep import expand

    builder = get("sue_packing").builder
    holds = list(hold_ns) if hold_ns is not None else [
        (base or {}).get("hold_ns", 0.0)]
    grid = {"header": list(headers), "txn_bytes": list(txn_bytes), "load": list(loads),
            "hold_ns": holds}
    rows = []
    for spec in expand("sue_packing", grid):  # the grid order of ``lossless sweep``
        sc = builder({**(base or {}), **spec["params"]})
        sc.fabric.run(sc.duration_ps)  # no output files: figures only
        s = sue_summary(sc)
        row = dict(spec["params"])
        row.update({k: s.get(k) for k in STUDY_COLUMNS if k not in row})
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def plot_study(rows: Sequence[Mapping[str, Any]], path: str, x: str = "load") -> str:
    """Two panels against ``x`` (``load``, ``txn_bytes`` or ``hold_ns``): goodput (% of
    line rate, with the saturation arithmetic dashed) and p50/p99 latency (ns); one line per
    combination of the other varied parameters.  matplotlib is imported here (Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    varied = [k for k in ("header", "txn_bytes", "load", "hold_ns")
              if k != x and len({r[k] for r in rows}) > 1]
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in varied), []).append(r)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: r[x])
        label = ", ".join(f"{k}={v}" for k, v in zip(varied, key, strict=True)) or "run"
        xs = [r[x] for r in rs]
        rate = [r["goodput_per_xpu_bps"] for r in rs]
        link = [r.get("link_bps") for r in rs]
        pct = [100 * g / lk if lk else None for g, lk in zip(rate, link, strict=True)]
        if all(p is None for p in pct):
            pct = [r["steady_efficiency_pct"] for r in rs]
        line = ax1.plot(xs, pct, marker="o", label=label)[0]
        ax1.plot(xs, [r["saturation_goodput_pct"] for r in rs], linestyle="--",
                 color=line.get_color(), linewidth=0.8)
        ax2.plot(xs, [(r["latency_p50_ps"] or 0) / 1000 for r in rs], marker="o",
                 color=line.get_color(), label=f"{label} p50")
        ax2.plot(xs, [(r["latency_p99_ps"] or 0) / 1000 for r in rs], marker="x",
                 linestyle=":", color=line.get_color(), label=f"{label} p99")
    ax1.set(xlabel=x, ylabel="goodput per XPU (% of line rate)",
            title="SUE goodput (dashed: full-PDU arithmetic)")
    ax2.set(xlabel=x, ylabel="transaction latency (ns)", yscale="log",
            title="SUE transaction latency")
    ax1.legend(fontsize="x-small")
    ax2.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

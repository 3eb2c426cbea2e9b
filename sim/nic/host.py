"""A host NIC: paced senders per flow, PFC reaction on its port, a counting receiver.

Sender: each flow sends ``packet_bytes`` frames (headers included, no FCS) at ``rate_bps``
(measured on the wire: a frame of ``n`` bytes every ``ser_time_ps(port.wire_bytes(n),
rate_bps)``, the port's framing: Ethernet's, or an InfiniBand link's packet alone), from
``start_ps`` until ``stop_ps`` or until ``size_bytes`` are sent.  Traffic shapes (all optional,
CBR is the default):

* on/off: with ``on_ps`` and ``off_ps`` the flow sends for ``on_ps``, is silent for ``off_ps``,
  and so on, starting "on" at ``start_ps``.  ``onoff="fixed"`` (default) uses exactly these
  durations; ``onoff="exponential"`` draws every on and off duration from an exponential
  distribution with these means (``engine.rng``, rounded to whole ps, at least 1 ps).  A frame
  is started only inside an on period; a frame started there always completes.
* messages: with ``message_bytes`` the flow sends messages of that many bytes back to back; the
  last frame of a message is cut short (``min(packet_bytes, bytes left in the message)``).
  ``size_bytes`` still ends the flow (its last message may be cut).  Like ``size_bytes``,
  ``message_bytes`` counts frame bytes (headers included).

* posted (:meth:`Host.add_posted_flow`, :meth:`Host.post`): the flow sends only the messages
  posted to it, in order, like an RDMA QP fed work requests, and is idle in between;
  ``Host.on_data`` (a callback per received data frame) lets a workload see them arrive.

Pacing: the next frame of a flow goes at ``max(now, last send + gap)`` where ``gap`` is the
serialisation time of the last frame at the flow's current rate, so a flow never exceeds its
rate.  A NIC does not drop: when its port queue for the flow's class already holds
``queue_limit_bytes`` (the port is paused or slower), the flow blocks, with no timer, in a
per-class waiter list; when the port dequeues a frame of that class (``Port(on_dequeue=...)``)
the waiters are served first blocked, first served while the queue has room (each sends then or
at its pacing time).  A flow whose pacing timer fires while others wait joins the end of the
list, so flows sharing a class share the port fairly (flow-id order would starve the higher
ids when the queue stays full).

Congestion control: each flow's rate comes from a :mod:`sim.cc` algorithm (``cc``, default
``fixed``), driven with ``on_tx`` per frame, ``on_cnp`` per CNP and ``on_timer`` at the time it
asks for; a rate change is a ``RateChanged`` event.

Receiver: counts bytes and packets per flow, completed messages, and the completion time (FCT)
of finite flows.  As the DCQCN notification point (NP) it turns CE marks into CNPs: a real
RoCEv2 CNP frame (BTH opcode 0x81, BECN, DestQP = the flow's QP, :func:`sim.addresses.flow_qp`)
sent back to the sender on
``cnp_tc`` (6: NVIDIA's default ``cnp_802p_prio``), per flow and ``cnp_interval_ps`` (N, 50 µs:
the DCQCN paper's value) -- DCQCN, Zhu et al., SIGCOMM 2015, Sec. 3; NS3RDMA
(github.com/bobzhuyb/ns3-rdma) for the window variant:

* ``cnp_mode="immediate"`` (default, the paper's NP): a CNP on a CE if none was sent for the
  flow in the last N, so on the first CE and then at most one per N.
* ``cnp_mode="window"`` (NS3RDMA style): the first CE of a flow opens a window of N; at the
  end of each window in which a CE arrived, one CNP, and the next window starts; a window
  without a CE ends the timer (no timers for idle flows).

ACKs of an unreliable flow (``reliable=False``, ``ack_every`` > 0): the receiver of a flow it
was told about (``expect``) sends a real RoCEv2 RC ACKNOWLEDGE frame (opcode 0x11 + AETH, to
the flow's QP, kind
ACK, credit 31 = none, MSN = completed messages) every ``ack_every`` data frames of the flow
and on its last frame, with PSN = the number of the frame acknowledged (from 0), on
``ack_tc`` (default: the flow's own class); the sender counts ``acked_bytes`` per flow.  A
reliable flow's ACKs are the RC transport's (below).  CNPs and ACKs are told from data by their
UDP port 4791 and BTH opcode (:func:`roce_bth`).

On an InfiniBand link (the port's header stack, :attr:`sim.net.port.Port.stack`, is
:data:`wire.linkstack.IB`) the same CNPs and ACKs are native IB packets (:func:`ib_bth`):
LRH (the nodes' LIDs, :func:`sim.addresses.node_lid`; SL the class, VL from the link's
SL-to-VL map), BTH, ICRC and VCRC.  The CNP is IBA's congestion notification packet (BTH
opcode 0x80, BECN set, DestQP the flow's QP, PSN 0, no payload: 26 bytes; IBA vol. 1 table
38 and annex A10, as Linux's ``IB_OPCODE_CNP`` in ``include/rdma/ib_pack.h`` and the hfi1
driver's ``return_cnp`` build it), the ACK an RC ACKNOWLEDGE (BTH + AETH: 30 bytes).

Message places: every data frame a flow sends is marked with its place in its message
(``SimPacket.place``, :func:`sim.packet.place_of`: first and/or last, and on a first frame
the message's frame bytes), as its opcode would say (RDMA WRITE FIRST, MIDDLE, LAST, ONLY);
a resent frame carries the place it had.  A message is a posted message, every
``message_bytes`` of a flow that has them, else (a stream) every
:data:`sim.packet.STREAM_MESSAGE_FRAMES` frames; a flow's size ends its last.  Captures show
them (:class:`sim.study.results.Capture`).

PCIe (docs/explanation/collectives.md "The PCIe budget"), both off by default (None):

* receive buffer (``pcie_write_bps``, ``rx_buffer_bytes``): an arriving data frame enters the
  NIC's receive buffer (``rx_buffer_bytes``, default :data:`RX_BUFFER_BYTES`), which drains
  to GPU memory over PCIe at ``pcie_write_bps`` (:meth:`sim.nic.pcie.PcieLink.write_bps`):
  first in, first out, one frame at a time, each taking the PCIe time of its payload (the
  frame less ``pcie_header_bytes``: headers and ICRC are the NIC's, not written).  The frame
  is *received* (``rx_bytes``, ``on_data``, messages, FCT, ACKs, ``delivered``) when its
  write ends: only then is the data in memory, and an RC ACK or a completion promises that.
  The CNP of a CE-marked frame is sent on *arrival*: the NP reads the ECN bits from the
  header as the frame comes in (DCQCN's NP runs in the NIC's receive pipeline), and a CNP
  that waited behind the backlog would report congestion late.  CNPs and ACKs are consumed
  by the NIC's transport at arrival and never enter the buffer (nothing to write).  When the
  buffer's occupancy reaches XOFF (after an arrival), the NIC pauses the arriving frame's
  priority if it is one of ``rx_pause_tcs`` (default (3,); () = PFC off): a real 802.1Qbb
  PAUSE (:func:`sim.flowctl.pfc.pfc_packet`, ``0xFFFF`` quanta, refreshed every half pause
  time); when a drain brings it down to XON, quanta 0 for every priority it paused.  The
  thresholds are mlx5's receive-buffer rule (Linux commit 0696d60853d5, "net/mlx5e: Receive
  buffer configuration", H. Nguyen, 2018: ``xoff_threshold = buffer_size - xoff``,
  ``xon_threshold = xoff_threshold - MTU``) with the headroom ``xoff`` from
  :func:`sim.net.mmu.headroom_bytes` (the NIC's link rate and propagation, ``rx_mtu_bytes``,
  a 1 us response): :func:`rx_thresholds`.  A frame that does not fit is dropped
  (``rx_buffer_dropped_packets``/``_bytes``, a ``Dropped`` event with reason
  ``"rx_buffer_full"``), as Mellanox's adapters do ("Packets arriving while the buffer is
  full are dropped immediately", Mellanox OFED user manual, "Lossless TCP"): with PFC off,
  whenever the drain is slower than the arrivals.  Credits (CBFC) are still freed on arrival.
* send pacer (``pcie_read_bps``): the NIC reads what it sends from GPU memory over PCIe
  (:meth:`sim.nic.pcie.PcieLink.read_bps`), so frames cannot leave faster than their
  payloads arrive: one pacer per host, shared by all its flows, lets a frame go only when
  the read of the previous one's payload is done (``max(now, free) + payload time``); flows
  that find it busy wait in one first-come first-served list (like the port's waiters).
  Read latency and outstanding read requests are not modelled.

Broken receiver (PFC pause storm, Guo et al., SIGCOMM 2016, Sec. 4.3): :meth:`Host.stall_rx`
(``start_ps``, optional ``end_ps``) makes the NIC's receive pipeline stop: from ``start_ps`` it
delivers nothing (every arriving data/CNP/ACK frame is dropped and counted, a ``Dropped`` event
with reason ``"rx_stalled"``) and sends real 802.1Qbb PAUSE frames
(:func:`sim.flowctl.pfc.pfc_packet`,
``0xFFFF`` quanta) for the stalled priorities, refreshed every half pause time, so its switch
port stays paused.  NIC pause-storm prevention (mlx5 "PFC stall prevention"): when the receive
side has been stalled while pausing for ``pause_storm_timeout_ps`` the NIC stops sending PAUSE
(a ``WatchdogTriggered`` event with action ``"stop_pause"``; the last pause then expires) and
the frames reaching it are dropped there.  Default 8 s, mlx5's default critical timeout;
mlx5's "auto" is 100 ms (Linux netdev patches by Inbar Karmy, 2018).  None disables it.

RC reliability (``reliable=True``, the default, as in every RoCE and InfiniBand RC NIC;
``reliable=False`` is the idealised NIC that never resends): every data frame of the flows
this host sends gets a PSN (``SimPacket.psn``) and the transport of :mod:`sim.nic.rc` runs.
The sender sets AckReq (``SimPacket.ackreq``) on the last frame of each message (a posted
message, ``message_bytes``, the flow's end, the last frame before ``stop_ps`` or an off
period) and on every :data:`sim.nic.rc.ACK_REQ_EVERY`-th frame; the receiver checks PSNs when
a frame is received (after its PCIe write, with the receive buffer), delivers in order and
ACKs the frames that asked (and every ``ack_every``-th when that is > 0), NAKs a gap (a real
AETH NAK, PSN sequence error) and drops out-of-order frames (``retransmit="gbn"``) or keeps
them (``"sr"``); duplicates are dropped and re-ACKed.  Out-of-order placement (``ooo``:
True, False, or None = "auto", on when the fabric routes adaptively,
:meth:`Host.set_adaptive_routing`): the receiver keeps a frame ahead of the expected PSN
without a NAK and NAKs a gap only when it is still open ``ooo_timeout_ps`` after the first
frame past it arrived (:mod:`sim.nic.rc`, mode ``"ooo"``); the sender then resends
selectively.  The sender resends on NAK and on the
local ACK timeout (``ack_timeout``: 4.096 us x 2^ack_timeout) up to ``retry_cnt`` times, then
the flow's QP is in error: it stops (a ``QpError`` event).  Resends go before new data, paced
like it.  Counters: :meth:`rc_stats`; the conservation check :func:`rc_conservation`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from sim import cc as cc_registry
from sim.addresses import flow_qp, node_ip, node_lid, node_mac, qp_flow
from sim.engine import Engine, Timer
from sim.events import CNPSent, Dropped, PauseSent, QpError, RateChanged, WatchdogTriggered
from sim.flowctl.credit import CbfcConfig, cbfc_free
from sim.flowctl.pfc import apply_pause, is_mac_control, pfc_packet
from sim.net.port import PRIORITIES, CreditPort, Port
from sim.nic.rc import (
    ACK_TIMEOUT,
    OOO_TIMEOUT_PS,
    RETRY_CNT,
    RcReceiver,
    RcSender,
    ack_timeout_ps,
)
from sim.packet import (
    NOT_ECT,
    PLACE_FIRST,
    PLACE_LAST,
    REPLAY_FLOW_BASE,
    STREAM_MESSAGE_FRAMES,
    PacketIds,
    SimPacket,
)
from sim.trace import Interest, NullTracer, Tracer, interest
from sim.units import ser_time_ps
from wire import build
from wire.bth import BTH
from wire.ecn import ip_offset
from wire.ethernet import ETHERNET, EtherType
from wire.ib import GRH, LRH, Lnh
from wire.ib_ext import AETH, AethKind, aeth_decode
from wire.ib_stack import build_ib
from wire.ipv4 import IPPROTO_UDP, IPV4
from wire.ipv6 import IPV6
from wire.linkstack import ROCE
from wire.pfc import quanta_to_ps
from wire.roce import CNP_OPCODE
from wire.spec import stack_getter
from wire.template import IbTemplate, RoceTemplate
from wire.udp import ROCEV2_PORT, UDP

__all__ = ["ACK_OPCODE", "CNP_MODES", "IB_CNP_OPCODE", "ONOFF_MODES", "RX_BUFFER_BYTES",
           "RX_MTU_BYTES", "RX_RESPONSE_PS", "Flow", "Host", "ib_bth", "rc_conservation",
           "roce_aeth_kind", "roce_bth", "rx_thresholds"]

#: BTH opcode of an RC ACKNOWLEDGE (IBA 9.2, table 38): BTH + AETH.
ACK_OPCODE = 0x11
#: BTH opcode of a native InfiniBand congestion notification packet (IBA vol. 1 table 38,
#: annex A10; Linux ``IB_OPCODE_CNP``, include/rdma/ib_pack.h).  RoCEv2's is 0x81.
IB_CNP_OPCODE = 0x80
CNP_MODES = ("immediate", "window")
ONOFF_MODES = ("fixed", "exponential")
#: mlx5 PFC stall prevention default critical timeout (8 s); "auto" is 100 ms (Linux netdev
#: patches by Inbar Karmy, 2018).
PAUSE_STORM_TIMEOUT_PS = 8 * 10**12
PAUSE_STORM_AUTO_PS = 100 * 10**9
_STALL_QUANTA = 0xFFFF
#: NIC receive buffer (assumption: no public ConnectX-7 figure was found; ~2 MB of shared
#: receive buffer, 2,048,000 bytes, is the order of what ``dcb buffer show total-size``
#: reports for ConnectX NICs and what the mlx5 driver splits among priorities).
RX_BUFFER_BYTES = 2_048_000
#: Largest frame the receive thresholds allow for (jumbo, the simulator's packet limit).
RX_MTU_BYTES = 9216
#: Response time of the NIC's link partner to a PAUSE in the headroom (1 us, as the scenarios'
#: switch headroom, sim.scenarios.common.RESPONSE_PS).
RX_RESPONSE_PS = 1_000_000


#: Bytes of headers per RoCEv2 data frame (FCS not counted, as everywhere in the simulator):
#: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 = 58 (IBA Annex A17 RoCEv2), derived from
#: the field tables (:data:`wire.linkstack.ROCE`); the default ``Flow.packet_bytes`` is
#: 1082 = 1024 + 58.
ROCE_HEADER_BYTES = ROCE.header_bytes
#: Bytes of a frame the NIC makes or strips itself, not carried over PCIe: its RoCE headers
#: (an InfiniBand fabric's hosts get ``pcie_header_bytes`` = its 26, sim.scenarios.common).
PCIE_HEADER_BYTES = ROCE_HEADER_BYTES


def rx_thresholds(buffer_bytes: int, link_bps: int, prop_ps: int,
                  mtu_bytes: int = RX_MTU_BYTES, headroom: int | None = None
                  ) -> tuple[int, int, int]:
    """(XOFF, XON, headroom) in bytes of a NIC receive buffer (mlx5's rule, module docstring):
    headroom from :func:`sim.net.mmu.headroom_bytes` for a link of ``link_bps`` with
    ``prop_ps`` one way (unless given), ``XOFF = buffer - headroom``, ``XON = XOFF - MTU``.
    ValueError when the buffer cannot hold the headroom and one MTU above XON."""
    from sim.net.mmu import headroom_bytes

    if headroom is None:
        headroom = headroom_bytes(link_bps, 1, mtu_bytes, RX_RESPONSE_PS,
                                  propagation_ps_per_m=prop_ps)
    xoff = buffer_bytes - headroom
    if xoff - mtu_bytes < 0:
        raise ValueError(f"rx_buffer_bytes ({buffer_bytes}) must be at least the PFC "
                         f"headroom ({headroom}) plus one MTU ({mtu_bytes})")
    return xoff, xoff - mtu_bytes, headroom
_PSN_MASK = BTH.field("psn").max_value  # PSN, DestQP and MSN are 24-bit fields
#: The rate-control hook :meth:`Host._cc_event` runs: ``on_tx``, ``on_timer``, ``on_cnp``.
_ON_TX, _ON_TIMER, _ON_CNP = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Flow:
    id: int
    src: int
    dst: int
    rate_bps: int
    tc: int = 3
    packet_bytes: int = 1082  # Eth 14 + IPv4 20 + UDP 8 + BTH 12 + 1024 + ICRC 4
    size_bytes: int | None = None
    start_ps: int = 0
    stop_ps: int | None = None
    ecn: int = 2  # ECT(0): RoCEv2 data is ECN-capable
    on_ps: int | None = None
    off_ps: int | None = None
    onoff: str = "fixed"
    message_bytes: int | None = None

    def __post_init__(self) -> None:
        def bad(msg: str) -> ValueError:
            return ValueError(f"flow {self.id}: {msg}")

        for name in ("rate_bps", "packet_bytes"):
            if getattr(self, name) <= 0:
                raise bad(f"{name} must be > 0")
        for name in ("size_bytes", "message_bytes", "on_ps", "off_ps"):
            v = getattr(self, name)
            if v is not None and v <= 0:
                raise bad(f"{name} must be > 0")
        if (self.on_ps is None) != (self.off_ps is None):
            raise bad("on_ps and off_ps go together (give both or neither)")
        if self.onoff not in ONOFF_MODES:
            raise bad(f"onoff must be one of {', '.join(ONOFF_MODES)}, got {self.onoff!r}")
        if self.onoff != "fixed" and self.on_ps is None:
            raise bad(f"onoff={self.onoff!r} needs on_ps and off_ps")
        if self.start_ps < 0:
            raise bad("start_ps must be >= 0")
        if not 0 <= self.tc < PRIORITIES:
            raise bad(f"tc must be 0..{PRIORITIES - 1}")

    def frame_bytes(self, sent: int) -> int:
        """Size of the next frame after ``sent`` bytes (0: the flow has sent everything)."""
        return _frame_bytes(self.packet_bytes, self.message_bytes, self.size_bytes, sent)

    def bytes_in_packets(self, k: int) -> int:
        """Bytes in the flow's first ``k`` frames."""
        p, m = self.packet_bytes, self.message_bytes
        if m is None:
            b = k * p
        else:
            per_msg = -(-m // p)
            q, r = divmod(k, per_msg)
            b = q * m + r * p
        return b if self.size_bytes is None else min(b, self.size_bytes)


def _ends_message(message_bytes: int | None, size_bytes: int | None, after: int) -> bool:
    """Whether a frame that brings the flow to ``after`` bytes sent ends a message (or the
    flow)."""
    return ((size_bytes is not None and after >= size_bytes)
            or (message_bytes is not None and after % message_bytes == 0))


def _frame_bytes(packet_bytes: int, message_bytes: int | None, size_bytes: int | None,
                 sent: int) -> int:
    """:meth:`Flow.frame_bytes` of a flow with these sizes (what the NIC calls per frame)."""
    n = packet_bytes
    if message_bytes is not None:
        n = min(n, message_bytes - sent % message_bytes)
    if size_bytes is not None:
        n = min(n, size_bytes - sent)
    return n if n > 0 else 0


class _Tx:
    """A flow this host sends: what :meth:`Host._send` reads of it for every frame (copied
    from the frozen :class:`Flow`; fields in the compiled core, host.pxd) and when its next
    frame may leave (pacing).  ``_send`` events, and the flows waiting for the port or for
    PCIe, carry these."""

    __slots__ = ("dst", "ecn", "fid", "flow", "message_bytes", "msg_end", "next_send_ps", "on",
                 "packet_bytes", "size_bytes", "stop_ps", "tc")

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.fid = flow.id
        self.tc = flow.tc
        self.ecn = flow.ecn
        self.dst = flow.dst
        self.stop_ps = flow.stop_ps
        self.on = flow.on_ps is not None
        self.packet_bytes = flow.packet_bytes
        self.message_bytes = flow.message_bytes
        self.size_bytes = flow.size_bytes
        self.next_send_ps = flow.start_ps
        self.msg_end = 0  # where the message of the last new frame ends (Host._place)


class Host:
    def __init__(self, engine: Engine, node_id: int, rate_bps: int, *, tracer: Tracer | None = None,
                 queue_limit_bytes: int = 4 * 1082, ids: PacketIds | None = None, cc: str = "fixed",
                 cc_params: dict | None = None, cnp_interval_ps: int = 50_000_000,
                 cnp_tc: int = 6, cnp_mode: str = "immediate", ack_every: int = 0,
                 ack_tc: int | None = None,
                 pause_storm_timeout_ps: int | None = PAUSE_STORM_TIMEOUT_PS,
                 pcie_write_bps: int | None = None, pcie_read_bps: int | None = None,
                 rx_buffer_bytes: int | None = None, rx_pause_tcs: tuple[int, ...] = (3,),
                 rx_mtu_bytes: int = RX_MTU_BYTES, rx_headroom_bytes: int | None = None,
                 pcie_header_bytes: int = PCIE_HEADER_BYTES, reliable: bool = True,
                 retransmit: str = "gbn", ack_timeout: int = ACK_TIMEOUT,
                 retry_cnt: int = RETRY_CNT, ooo: bool | None = None,
                 ooo_timeout_ps: int = OOO_TIMEOUT_PS) -> None:
        if cnp_interval_ps < 0:
            raise ValueError("cnp_interval_ps must be >= 0")
        if cnp_mode not in CNP_MODES:
            raise ValueError(f"cnp_mode must be one of {', '.join(CNP_MODES)}, got {cnp_mode!r}")
        if cnp_mode == "window" and cnp_interval_ps <= 0:
            raise ValueError('cnp_interval_ps must be > 0 with cnp_mode="window"')
        if ack_every < 0:
            raise ValueError("ack_every must be >= 0 (0: no ACKs)")
        for name, tc in (("cnp_tc", cnp_tc), ("ack_tc", ack_tc)):
            if tc is not None and not 0 <= tc < PRIORITIES:
                raise ValueError(f"{name} must be 0..{PRIORITIES - 1}")
        if queue_limit_bytes <= 0:
            raise ValueError("queue_limit_bytes must be > 0")
        if pause_storm_timeout_ps is not None and pause_storm_timeout_ps <= 0:
            raise ValueError("pause_storm_timeout_ps must be > 0 (None: no NIC watchdog)")
        self.pause_storm_timeout_ps = pause_storm_timeout_ps
        for name, v in (("pcie_write_bps", pcie_write_bps), ("pcie_read_bps", pcie_read_bps),
                        ("rx_buffer_bytes", rx_buffer_bytes),
                        ("rx_headroom_bytes", rx_headroom_bytes)):
            if v is not None and v <= 0:
                raise ValueError(f"{name} must be > 0 (None: not modelled)")
        if rx_buffer_bytes is not None and pcie_write_bps is None:
            raise ValueError("rx_buffer_bytes needs pcie_write_bps (the buffer's drain)")
        if any(not 0 <= c < PRIORITIES for c in rx_pause_tcs):
            raise ValueError(f"rx_pause_tcs must be in 0..{PRIORITIES - 1}")
        if not 64 <= rx_mtu_bytes <= 9216:
            raise ValueError("rx_mtu_bytes must be in 64..9216")
        if pcie_header_bytes < 0:
            raise ValueError("pcie_header_bytes must be >= 0")
        #: RC reliability (module docstring): options, per-flow sender/receiver state, the
        #: flows with nothing to send (a resend wakes them), the ACK timers, drops by reason
        #: of reliable frames this NIC received, flows whose QP went to error.
        #: ``adaptive_routing``: the fabric routes adaptively (:meth:`set_adaptive_routing`),
        #: which turns the out-of-order receiver on when ``ooo`` is None ("auto").
        self.adaptive_routing = False
        self._rc_tx: dict[int, RcSender] = {}
        self.set_reliable(reliable, retransmit, ack_timeout, retry_cnt, ooo, ooo_timeout_ps)
        self._rc_rx: dict[int, RcReceiver] = {}
        self._rc_idle: set[int] = set()
        self._rc_timer: dict[int, Timer] = {}
        self._rc_rx_timer: dict[int, Timer] = {}
        self.rc_drops: dict[int, dict[str, int]] = {}
        self.qp_error_ps: dict[int, int] = {}
        #: Called as ``on_qp_error(flow id, now)`` when a QP this host sends goes to error.
        self.on_qp_error: Callable[[int, int], None] | None = None
        self.pcie_write_bps = pcie_write_bps
        self.pcie_read_bps = pcie_read_bps
        self.pcie_header_bytes = pcie_header_bytes
        #: Receive buffer (pcie_write_bps): frames waiting for their PCIe write, capacity,
        #: occupancy now and at most, drops, the priorities paused for it and its thresholds
        #: (XOFF, XON, headroom; from the link when the first frame arrives).
        self._rx_q: deque[SimPacket] | None = deque() if pcie_write_bps is not None else None
        self.rx_buffer_bytes = (None if pcie_write_bps is None
                                else rx_buffer_bytes or RX_BUFFER_BYTES)
        self.rx_buffer_used_bytes = 0
        self.rx_buffer_max_bytes = 0
        self.rx_buffer_dropped_packets = 0
        self.rx_buffer_dropped_bytes = 0
        self.rx_pause_tcs = frozenset(rx_pause_tcs)
        self.rx_mtu_bytes = rx_mtu_bytes
        self._rx_headroom = rx_headroom_bytes
        self.rx_xoff_bytes: int | None = None
        self.rx_xon_bytes: int | None = None
        if self.rx_buffer_bytes is not None and rx_pause_tcs and rx_headroom_bytes is not None:
            rx_thresholds(self.rx_buffer_bytes, 1, 0, rx_mtu_bytes, rx_headroom_bytes)
        self._rx_draining = False
        self._rx_paused: set[int] = set()
        self._rx_refresh: Timer | None = None
        #: Send pacer (pcie_read_bps): when the PCIe read path is free, flows waiting for it.
        self._read_free_ps = 0
        self._read_wait: deque[_Tx] = deque()
        self._read_timer = False
        #: Receive-pipeline stall (stall_rx): stalled now, pausing now, counters.
        self.rx_stalled = False
        self.stall_pausing = False
        self._stall_prios: tuple[int, ...] = ()
        self._stall_timers: list[Timer] = []
        self.rx_stall_dropped_packets = 0
        self.rx_stall_dropped_bytes = 0
        self.pause_sent_count = 0
        #: When the NIC watchdog stopped the pauses (None: it did not).
        self.storm_stopped_ps: int | None = None
        self.cc_name = cc
        self.cc_params = dict(cc_params or {})
        if cc not in cc_registry.names():
            raise ValueError(f"unknown congestion control {cc!r}; known: "
                             f"{', '.join(cc_registry.names())}")
        self.cnp_interval_ps = cnp_interval_ps
        self.cnp_tc = cnp_tc
        self.cnp_mode = cnp_mode
        self.ack_every = ack_every
        self.ack_tc = ack_tc
        self.cc: dict[int, cc_registry.RateControl] = {}
        self._cc_timer: dict[int, Timer] = {}
        self._last_cnp_ps: dict[int, int] = {}
        self._cnp_window: dict[int, Timer] = {}
        self._ce_in_window: set[int] = set()
        self.cnp_sent = 0
        self.cnp_received = 0
        self.ack_sent = 0
        self.ack_received = 0
        self.engine = engine
        self.node_id = node_id
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        #: What the tracer reads (sim.trace.Interest): an event is built only when it is read.
        self._int: Interest = interest(self.tracer)
        self.port: Port = Port(engine, node_id, 0, rate_bps, tracer=self.tracer,
                               on_dequeue=self._dequeued)
        #: The pacing event's callback, bound once (no bound-method object per frame).
        self._send_cb = self._send
        self.ports = {0: self.port}
        self.queue_limit_bytes = queue_limit_bytes
        self._ids = ids if ids is not None else PacketIds()
        # sender
        self.sent_bytes: dict[int, int] = {}
        self.sent_packets: dict[int, int] = {}
        self.acked_bytes: dict[int, int] = {}
        self._acked_packets: dict[int, int] = {}
        #: The flows this host sends (flow id -> :class:`_Tx`).
        self._tx: dict[int, _Tx] = {}
        self._blocked: list[deque[_Tx]] = [deque() for _ in range(PRIORITIES)]
        self._wake_due = [False] * PRIORITIES
        self._phase: dict[int, list] = {}  # exponential on/off: [on?, phase end ps]
        self._gap_ps: dict[tuple[int, int], int] = {}
        #: (flow, to node, class, kind) -> the maker of that ACK's frames
        #: (:meth:`wire.template.RoceTemplate.maker`: PSN and MSN in).
        self._ack_makers: dict[tuple[int, int, int, str], Callable[..., bytearray]] = {}
        #: The CNP frame of each (flow, destination) (bytes, so shared by every CNP).
        self._cnp_frames: dict[tuple[int, int], bytes] = {}
        # receiver
        self.rx_bytes: dict[int, int] = {}
        self.rx_packets: dict[int, int] = {}
        self.rx_first_ps: dict[int, int] = {}
        self.rx_last_ps: dict[int, int] = {}
        self.rx_ce: dict[int, int] = {}
        #: Out-of-order data frames per flow: arrived with a packet id below the highest seen
        #: (ids are handed out in send order, so a flow's ids are its sequence; counted as
        #: they reach the transport, before the RC receiver drops, keeps or delivers them).
        self.rx_ooo: dict[int, int] = {}
        self._rx_top_id: dict[int, int] = {}
        #: Completed messages per flow (flows with ``message_bytes``), and when each completed.
        self.rx_messages: dict[int, int] = {}
        self.rx_message_done_ps: dict[int, list[int]] = {}
        self.fct_ps: dict[int, int] = {}
        self._flows: dict[int, Flow] = {}
        self._expected: dict[int, int] = {}
        #: When a list, every delivered data packet is appended as (t_ps, packet) (replay checks).
        self.delivered: list[tuple[int, SimPacket]] | None = None
        #: Posted flows (:meth:`add_posted_flow`): end offsets (frame bytes) of the messages
        #: not yet fully sent, and the posted flows with nothing left to send.
        self._posted: dict[int, deque[int]] = {}
        self._posted_idle: set[int] = set()
        #: When set, called as ``on_data(flow_id, rx_bytes_so_far, now_ps)`` for every data
        #: frame this host receives (a workload runner counts its messages with it).
        self.on_data = None
        #: When set, called as ``rx_tap(now_ps, packet)`` for every data frame delivered (in
        #: order, to memory): not for one the RC receiver drops (out of sequence, duplicate),
        #: so a throughput series of it is what the application got.
        self.rx_tap = None

    def inject(self, pkt: SimPacket) -> None:
        """Hand a ready packet (e.g. a replayed pcap frame) to the NIC's port now."""
        self.port.enqueue(pkt)

    # ---------------------------------------------------------------- sending
    def add_flow(self, flow: Flow) -> None:
        if flow.src != self.node_id:
            raise ValueError(f"flow {flow.id} starts at node {flow.src}, not {self.node_id}")
        self._flows[flow.id] = flow
        self.sent_bytes[flow.id] = 0
        self.sent_packets[flow.id] = 0
        self.acked_bytes[flow.id] = 0
        tx = self._tx[flow.id] = _Tx(flow)
        if self.reliable:
            self._rc_tx[flow.id] = RcSender(self._tx_mode(), self.rc_timeout_ps,
                                            self.retry_cnt)
        self.cc[flow.id] = cc_registry.create(self.cc_name, line_rate_bps=flow.rate_bps,
                                              **self.cc_params)
        self.engine.schedule(flow.start_ps, self._send, tx)

    def add_posted_flow(self, flow: Flow) -> None:
        """A flow that sends only what :meth:`post` gives it (an RDMA QP fed work requests):
        it starts idle; ``size_bytes``, ``message_bytes`` and on/off are not used."""
        if flow.size_bytes is not None or flow.message_bytes is not None \
                or flow.on_ps is not None:
            raise ValueError(f"flow {flow.id}: a posted flow has no size, messages or on/off")
        self._posted[flow.id] = deque()
        self.add_flow(flow)  # its first _send (at start_ps) finds nothing and goes idle

    def post(self, flow_id: int, nbytes: int) -> None:
        """Queue one message of ``nbytes`` frame bytes (headers included, like
        ``message_bytes``) on a posted flow; messages leave in the order posted, each cut into
        frames of at most ``packet_bytes`` with its last frame short."""
        ends = self._posted[flow_id]
        if nbytes <= 0:
            raise ValueError(f"flow {flow_id}: a message must have > 0 bytes")
        ends.append((ends[-1] if ends else self.sent_bytes[flow_id]) + nbytes)
        if flow_id in self._posted_idle:
            self._posted_idle.discard(flow_id)
            self._rc_idle.discard(flow_id)  # running again: a resend must not start it twice
            self.engine.schedule(self.engine.now_ps, self._send, self._tx[flow_id])

    def expect(self, flow: Flow) -> None:
        """Register a flow this host receives (for its FCT, messages and ACKs)."""
        if flow.size_bytes is not None:
            self._expected[flow.id] = flow.size_bytes
        self._flows.setdefault(flow.id, flow)

    def _send(self, tx: _Tx, waking: bool = False, reading: bool = False) -> None:
        """Send the flow's next frame now if it may; otherwise arrange to be called again (a
        timer for pacing and off periods, a place in the class's waiter list when the port
        queue is full or other flows already wait: :meth:`_wake` serves them in order)."""
        now = self.engine.now_ps
        fid = tx.fid
        if tx.stop_ps is not None and now >= tx.stop_ps:
            return
        sent = self.sent_bytes[fid]
        rc = self._rc_tx.get(fid) if self._rc_tx else None
        if rc is not None and rc.error:
            return
        last = False  # a new frame that ends its message (reliable: it asks for an ACK)
        if rc is not None and rc.has_resend():
            nbytes = -1  # a resend: its size is known when it goes
        else:
            ends = self._posted.get(fid)
            if ends is None:
                nbytes = _frame_bytes(tx.packet_bytes, tx.message_bytes, tx.size_bytes, sent)
                if rc is not None and nbytes > 0:
                    last = _ends_message(tx.message_bytes, tx.size_bytes, sent + nbytes)
            else:
                while ends and ends[0] <= sent:
                    ends.popleft()
                nbytes = min(tx.packet_bytes, ends[0] - sent) if ends else 0
                if nbytes <= 0:
                    self._posted_idle.add(fid)
                else:
                    last = ends[0] - sent == nbytes
            if nbytes <= 0:
                if rc is not None:
                    self._rc_idle.add(fid)
                return
        at = tx.next_send_ps
        if tx.on:
            at = self._on_at(tx.flow, max(at, now))
        if at > now:
            if tx.stop_ps is None or at < tx.stop_ps:
                self.engine.call_at(at, self._send, tx)
            return
        tc = tx.tc
        waiters = self._blocked[tc]
        if (waiters and not waking) or self.port.queue_bytes[tc] >= self.queue_limit_bytes:
            waiters.append(tx)  # served by _wake after a dequeue, in order
            return
        if self.pcie_read_bps is not None:
            if now < self._read_free_ps or (self._read_wait and not reading):
                self._read_wait.append(tx)  # served by _read_wake, in order
                if not self._read_timer:
                    self._read_timer = True
                    self.engine.call_at(max(self._read_free_ps, now), self._read_wake)
                return
            if nbytes < 0:
                nbytes = rc.peek_resend_bytes()
            self._read_free_ps = now + ser_time_ps(max(nbytes - self.pcie_header_bytes, 0),
                                                   self.pcie_read_bps)
        psn = None
        resent = False
        if rc is not None and rc.has_resend():
            res = rc.pop_resend(now)
            assert res is not None
            psn, nbytes = res
            resent = True
            place = rc.place_of(psn)
        else:
            place = self._place(tx, sent, nbytes)
        ctl = self.cc[fid]
        rate = ctl.rate_bps
        gap = self._gap_ps.get((nbytes, rate))
        if gap is None:
            gap = self._gap_ps[(nbytes, rate)] = ser_time_ps(self.port.wire_bytes(nbytes),
                                                             rate)
        ask = False
        if rc is not None:
            if not resent:
                if not last and (tx.stop_ps is not None or tx.on):
                    last = self._pauses_at(tx, now + gap)
                psn = rc.send_new(nbytes, now, last, place)
            ask = rc.asks_ack(psn)
            self._rc_arm(fid)
        pkt = SimPacket._new(self._ids.take(), now, nbytes, fid, tc, tx.ecn, self.node_id,
                             tx.dst, None, 0)
        pkt.place = place
        if psn is not None:
            pkt.psn = psn & _PSN_MASK
            if ask:
                pkt.ackreq = True
        if not resent:  # sent_bytes/_packets: new data only (resends: rc_stats)
            self.sent_bytes[fid] = sent + nbytes
            self.sent_packets[fid] += 1
        tx.next_send_ps = now + gap
        self.port._enq(pkt)
        if getattr(ctl, "reacts_to_tx", True):
            self._cc_event(fid, ctl, _ON_TX, nbytes)
        self.engine._after(gap, self._send_cb, (tx,))

    def _place(self, tx: _Tx, sent: int, nbytes: int) -> int:
        """``SimPacket.place`` of the flow's new frame of ``nbytes`` after ``sent`` bytes:
        a message is a posted one, every ``message_bytes`` of a flow that has them, else
        every :data:`sim.packet.STREAM_MESSAGE_FRAMES` frames; the flow's size ends its last
        (``tx.msg_end``: the end of the current message, frame bytes)."""
        end = tx.msg_end
        if sent >= end:
            ends = self._posted.get(tx.fid)
            if ends is not None:
                end = ends[0]
            else:
                m = tx.message_bytes
                if m is None:
                    m = tx.packet_bytes * STREAM_MESSAGE_FRAMES
                end = (sent // m + 1) * m
                size = tx.size_bytes
                if size is not None and end > size:
                    end = size
            tx.msg_end = end
            place = (end - sent) << 2 | PLACE_FIRST
        else:
            place = 0
        if sent + nbytes >= end:
            place |= PLACE_LAST
        return place

    def _read_wake(self) -> None:
        """The PCIe read path is free: serve the flows waiting for it, first come first
        served, until one of them takes it (each may still wait on its port or pacing)."""
        self._read_timer = False
        waiting = self._read_wait
        while waiting and self.engine.now_ps >= self._read_free_ps:
            self._send(waiting.popleft(), reading=True)
        if waiting and not self._read_timer:
            self._read_timer = True
            self.engine.call_at(max(self._read_free_ps, self.engine.now_ps), self._read_wake)

    def _pauses_at(self, tx: _Tx, t: int) -> bool:
        """Whether the flow is stopped or in an off period at ``t`` (the frame it sends now is
        then the last before a pause: it asks for an ACK)."""
        if tx.stop_ps is not None and t >= tx.stop_ps:
            return True
        if not tx.on:
            return False
        flow = tx.flow
        if flow.onoff == "fixed":
            return (t - flow.start_ps) % (flow.on_ps + flow.off_ps) >= flow.on_ps
        st = self._phase.get(tx.fid)
        return st is not None and st[0] and t >= st[1]

    def _on_at(self, flow: Flow, t: int) -> int:
        """``t`` if the flow is in an on period at ``t``, else the start of the next one."""
        on, off = flow.on_ps, flow.off_ps
        assert on is not None and off is not None
        if flow.onoff == "fixed":
            period = on + off
            phase = (t - flow.start_ps) % period
            return t if phase < on else t + period - phase
        st = self._phase.get(flow.id)
        if st is None:
            st = self._phase[flow.id] = [True, flow.start_ps + self._exp(on)]
        while t >= st[1]:
            st[0] = not st[0]
            st[1] += self._exp(on if st[0] else off)
        return t if st[0] else st[1]

    def _exp(self, mean_ps: int) -> int:
        return max(1, round(self.engine.rng.expovariate(1.0 / mean_ps)))

    def _dequeued(self, port_index: int, pkt: SimPacket) -> None:
        """Port callback: a frame of class ``pkt.tc`` left the queue; if flows wait on the
        class and there is room, serve them in a separate event (the port is inside its
        dequeue here, not ready for an enqueue)."""
        tc = pkt.tc
        if (self._blocked[tc] and not self._wake_due[tc]
                and self.port.queue_bytes[tc] < self.queue_limit_bytes):
            self._wake_due[tc] = True
            self.engine.schedule(self.engine.now_ps, self._wake, tc)

    def _wake(self, tc: int) -> None:
        """Serve the flows waiting on class ``tc`` in the order they blocked (first blocked,
        first served) while the queue has room; each sends now or at its pacing time."""
        self._wake_due[tc] = False
        waiters = self._blocked[tc]
        port, limit = self.port, self.queue_limit_bytes
        while waiters and port.queue_bytes[tc] < limit:
            self._send(waiters.popleft(), True)

    def _cc_event(self, flow_id: int, ctl: cc_registry.RateControl, hook: int,
                  nbytes: int = 0) -> None:
        """Run hook ``hook`` of ``flow_id``'s rate control ``ctl`` (:data:`_ON_TX` of
        ``nbytes``, :data:`_ON_TIMER`, :data:`_ON_CNP`); trace a rate change; (re)arm its
        timer."""
        now = self.engine.now_ps
        traced = RateChanged in self._int.types
        before = (ctl.rate_bps, ctl.target_rate_bps, ctl.alpha) if traced else None
        if hook == _ON_TX:
            ctl.on_tx(nbytes, now)
        elif hook == _ON_TIMER:
            ctl.on_timer(now)
        else:
            ctl.on_cnp(now)
        if traced:
            after = (ctl.rate_bps, ctl.target_rate_bps, ctl.alpha)
            if after != before:
                hooks = self._int.hooks
                if hooks is not None:  # the runner's recorder: the fields, no event object
                    hooks._rate_changed(now, self.node_id, flow_id, after[0], after[1],
                                        after[2])
                else:
                    self.tracer.emit(RateChanged(now, self.node_id, flow_id, *after))
        self._cc_rearm(flow_id, ctl, now)

    def _cc_rearm(self, flow_id: int, ctl: cc_registry.RateControl, now: int) -> None:
        """(Re)arm the timer of ``flow_id``'s rate control after one of its hooks ran."""
        due = ctl.next_timer_ps()
        old = self._cc_timer.get(flow_id)
        if due is None:
            if old is not None:
                old.cancel()
                del self._cc_timer[flow_id]
        elif old is None or old.callback is None or old.at_ps != due:  # (None: cancelled)
            if old is not None:
                old.cancel()
            self._cc_timer[flow_id] = self.engine.schedule(max(due, now), self._cc_timer_due,
                                                           flow_id)

    def _cc_timer_due(self, flow_id: int) -> None:
        self._cc_timer.pop(flow_id, None)
        self._cc_event(flow_id, self.cc[flow_id], _ON_TIMER)

    def _on_ack(self, qp: int, psn: int) -> None:
        self.ack_received += 1
        flow = self._flows.get(qp)
        if flow is None or flow.src != self.node_id:
            return
        acked = self._acked_packets.get(qp, 0)
        acked += (psn - (acked - 1)) & _PSN_MASK  # PSN of the frame acknowledged, unwrapped
        if acked > self.sent_packets[qp]:
            return  # not one of ours (stale or foreign PSN): ignore
        self._acked_packets[qp] = acked
        self.acked_bytes[qp] = flow.bytes_in_packets(acked)

    # ------------------------------------------------------------ RC reliability
    def _rc_on_ack(self, fid: int, psn: int, kind: int | None) -> None:
        self.ack_received += 1
        rc = self._rc_tx[fid]
        now = self.engine.now_ps
        if kind == AethKind.NAK:
            if not rc.on_nak(psn, now):
                return
        else:
            rc.on_ack(psn, now)
        self.acked_bytes[fid] = rc.acked_bytes
        self._rc_arm(fid)
        if rc.has_resend():
            self._rc_wake(fid)

    def _rc_wake(self, fid: int) -> None:
        """A flow with nothing to send has a resend: start it again (a flow that is sending
        picks the resend up on its next frame)."""
        if fid in self._rc_idle:
            self._rc_idle.discard(fid)
            self._posted_idle.discard(fid)
            self.engine.schedule(self.engine.now_ps, self._send, self._tx[fid])

    def _rc_arm(self, fid: int) -> None:
        """Make sure a timer runs for the flow's ACK deadline (lazy: a timer that fires
        before the deadline, which moves later with resends and ACKs, sleeps again)."""
        due = self._rc_tx[fid].deadline_ps
        old = self._rc_timer.get(fid)
        if old is not None and due is not None and old.at_ps <= due:
            return  # the timer already due no later stays (_arm_timer, its usual case)
        self._arm_timer(self._rc_timer, fid, due, self._rc_timer_due, fid)

    def _arm_timer(self, timers: dict, fid: int, due: int | None, fn: Callable[..., None],
                   *args: object) -> None:
        """The one timer of ``timers[fid]`` due at ``due`` (None: none left behind), lazily:
        a timer already due no later stays (it sleeps again when it fires early), one due
        later is replaced (the deadline moved earlier)."""
        old = timers.get(fid)
        if due is None:
            if old is not None:
                old.cancel()
                del timers[fid]
            return
        if old is not None:
            if old.at_ps <= due:
                return
            old.cancel()
        timers[fid] = self.engine.schedule(max(due, self.engine.now_ps), fn, *args)

    def _rc_timer_due(self, fid: int) -> None:
        del self._rc_timer[fid]
        rc = self._rc_tx[fid]
        now = self.engine.now_ps
        due = rc.deadline_ps
        if due is None:
            return
        if due > now:
            self._rc_arm(fid)
            return
        if rc.on_timeout(now):
            self._rc_arm(fid)
            self._rc_wake(fid)
            return
        self.qp_error_ps[fid] = now
        if QpError in self._int.types:
            self.tracer.emit(QpError(now, self.node_id, fid, rc.retries, rc.outstanding))
        if self.on_qp_error is not None:
            self.on_qp_error(fid, now)

    def set_reliable(self, reliable: bool = True, retransmit: str = "gbn",
                     ack_timeout: int = ACK_TIMEOUT, retry_cnt: int = RETRY_CNT,
                     ooo: bool | None = None, ooo_timeout_ps: int = OOO_TIMEOUT_PS) -> None:
        """Turn RC reliability on (or off) for the flows this host adds from now on, and set
        the mode its receiver uses (module docstring): ``ooo`` True places out-of-order
        frames (:mod:`sim.nic.rc`, mode ``"ooo"``, NAK after ``ooo_timeout_ps``), False
        uses ``retransmit``, None ("auto") places them when the fabric routes adaptively
        (:attr:`adaptive_routing`); ValueError for a bad option."""
        timeout_ps = ack_timeout_ps(ack_timeout)
        RcSender(retransmit, timeout_ps, retry_cnt)  # checks the options
        RcReceiver("ooo", timeout_ps=ooo_timeout_ps)
        if ooo is not None and not isinstance(ooo, bool):
            raise ValueError(f"ooo must be True, False or None (auto), got {ooo!r}")
        self.reliable = reliable
        self.retransmit = retransmit
        self.ack_timeout = ack_timeout
        self.rc_timeout_ps = timeout_ps
        self.retry_cnt = retry_cnt
        self.ooo = ooo
        self.ooo_timeout_ps = ooo_timeout_ps
        self._retune_senders()

    @property
    def ooo_on(self) -> bool:
        """Whether the RC receivers of the flows this host receives place out-of-order frames
        (``ooo``, or with None the fabric's :attr:`adaptive_routing`)."""
        return self.adaptive_routing if self.ooo is None else self.ooo

    def _tx_mode(self) -> str:
        """The retransmission mode of a QP this host sends: selective with an out-of-order
        receiver at the other end (the NICs of one fabric are set alike), else ``retransmit``."""
        return "sr" if self.ooo_on else self.retransmit

    def _retune_senders(self) -> None:
        mode = self._tx_mode()
        for rc in self._rc_tx.values():
            rc.mode = mode

    def set_adaptive_routing(self, adaptive: bool) -> None:
        """The fabric routes adaptively (or no longer does): with ``ooo`` None ("auto") the
        QPs this host sends resend selectively from now on, and those it starts receiving
        place out-of-order frames (a receiver keeps the mode it started with).  Called by
        :meth:`sim.fabric.core.Fabric.run`."""
        self.adaptive_routing = bool(adaptive)
        self._retune_senders()

    def rc_held(self, fid: int) -> tuple[int, int]:
        """(frames, bytes) of flow ``fid`` that this receiver holds out of order (SR)."""
        rx = self._rc_rx.get(fid)
        held = [] if rx is None else rx.held()
        return len(held), sum(p.nbytes for p in held)

    def rx_buffered(self) -> list[SimPacket]:
        """The data frames in the NIC's receive buffer, waiting for their PCIe write: arrived
        at the NIC, not yet received (in flight, for the conservation checks)."""
        return list(self._rx_q) if self._rx_q else []

    def rc_flows(self) -> list[int]:
        """The reliable flows this host sends or receives, by id."""
        return sorted({*self._rc_tx, *self._rc_rx})

    def rc_stats(self, fid: int) -> dict[str, int]:
        """RC counters of flow ``fid`` at this host: its sender's if it sends it, its
        receiver's if it receives it (both when it does both)."""
        out: dict[str, int] = {}
        tx = self._rc_tx.get(fid)
        if tx is not None:
            out.update(sent_frames=tx.sent_frames, sent_bytes=tx.sent_bytes,
                       retransmitted_frames=tx.retransmitted_frames,
                       retransmitted_bytes=tx.retransmitted_bytes,
                       naks_received=tx.naks_received, timeouts=tx.timeouts,
                       unacked_frames=tx.outstanding, qp_error=int(tx.error))
        rx = self._rc_rx.get(fid)
        if rx is not None:
            out.update(naks_sent=rx.naks_sent, duplicates=rx.duplicates,
                       out_of_sequence=rx.out_of_sequence)
            if rx.ooo:
                out["placed_out_of_order"] = rx.placed_out_of_order
        drops = self.rc_drops.get(fid)
        if drops:
            out.update({f"dropped_{k}": v for k, v in sorted(drops.items())})
        return out

    # ------------------------------------------------------------ rx stall
    def stall_rx(self, start_ps: int, end_ps: int | None = None,
                 priorities: tuple[int, ...] = (3,)) -> None:
        """From ``start_ps`` (until ``end_ps``, None: forever) the receive side is stalled
        and the NIC pauses ``priorities`` continuously (module docstring)."""
        if end_ps is not None and end_ps <= start_ps:
            raise ValueError("end_ps must be > start_ps")
        if not priorities or any(not 0 <= c < PRIORITIES for c in priorities):
            raise ValueError(f"priorities must be in 0..{PRIORITIES - 1}")
        self._stall_prios = tuple(sorted(set(priorities)))
        self.engine.schedule(start_ps, self._stall_begin)
        if end_ps is not None:
            self.engine.schedule(end_ps, self._stall_end)

    def _stall_begin(self) -> None:
        self.rx_stalled = True
        self.stall_pausing = True
        self._stall_pause()
        if self.pause_storm_timeout_ps is not None:
            self._stall_timers.append(self.engine.schedule_in(self.pause_storm_timeout_ps,
                                                              self._storm_timeout))

    def _stall_pause(self) -> None:
        if not self.stall_pausing:
            return
        now = self.engine.now_ps
        for prio in self._stall_prios:
            self._send_pause(now, prio, _STALL_QUANTA)
        half = quanta_to_ps(_STALL_QUANTA, self.port.rate_bps) // 2
        self._stall_timers.append(self.engine.schedule_in(half, self._stall_pause))

    def _send_pause(self, now: int, prio: int, quanta: int) -> None:
        self.port.send_control(pfc_packet(self._ids(), now, self.node_id, 0, prio, quanta))
        self.pause_sent_count += 1
        if PauseSent in self._int.types:
            self.tracer.emit(PauseSent(now, self.node_id, 0, prio, quanta))

    def _storm_timeout(self) -> None:
        if not (self.rx_stalled and self.stall_pausing):
            return
        now = self.engine.now_ps
        self.stall_pausing = False
        self.storm_stopped_ps = now
        for prio in self._stall_prios:
            if WatchdogTriggered in self._int.types:
                self.tracer.emit(WatchdogTriggered(now, self.node_id, 0, prio, "stop_pause"))

    def _stall_end(self) -> None:
        for t in self._stall_timers:
            t.cancel()
        self._stall_timers.clear()
        was_pausing = self.stall_pausing
        self.rx_stalled = False
        self.stall_pausing = False
        if was_pausing:
            now = self.engine.now_ps
            for prio in self._stall_prios:
                if prio not in self._rx_paused:  # the receive buffer still holds it paused
                    self._send_pause(now, prio, 0)

    def use_credits(self, cbfc: CbfcConfig) -> CreditPort:
        """Put this NIC's link under credit-based flow control (before it is connected): its
        egress port becomes a :class:`sim.net.port.CreditPort`; what it receives frees its
        credits on receipt (the NIC absorbs at line rate)."""
        old = self.port
        if isinstance(old, CreditPort):
            return old
        if old.peer is not None or old.queues[0] or old.busy:
            raise ValueError(f"host {self.node_id}: credits must be set before connecting")
        p = CreditPort(self.engine, self.node_id, 0, old.rate_bps, tracer=self.tracer,
                       on_dequeue=self._dequeued, cbfc=cbfc)
        self.port = p
        self.ports = {0: p}
        return p

    # -------------------------------------------------------------- receiving
    def receive(self, port: int, pkt: SimPacket) -> None:
        frame = pkt.frame
        if frame is not None and is_mac_control(frame):
            apply_pause(self.port, pkt)
            return
        if pkt.fc is not None:
            cbfc_free(pkt)  # credits: freed on receipt
        if self.rx_stalled:
            self.rx_stall_dropped_packets += 1
            self.rx_stall_dropped_bytes += pkt.nbytes
            if pkt.psn is not None:
                self._rc_count(pkt.flow, "rx_stalled")
            if Dropped in self._int.types:
                self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, 0, pkt.tc, pkt.id,
                                         pkt.flow, pkt.nbytes, "rx_stalled"))
            return
        if frame is not None and pkt.flow < REPLAY_FLOW_BASE:  # replayed: carried as is
            ib = not self.port.stack.ethernet  # an InfiniBand link: native IB packets
            bth = ib_bth(frame) if ib else roce_bth(frame)
            if bth is not None:
                op, qp, psn = bth
                fid = qp_flow(qp)
                if op == (IB_CNP_OPCODE if ib else CNP_OPCODE):
                    self.cnp_received += 1
                    if fid in self.cc:
                        self._cc_event(fid, self.cc[fid], _ON_CNP)
                    return
                if op == ACK_OPCODE:
                    if self._rc_tx and fid in self._rc_tx:
                        self._rc_on_ack(fid, psn, roce_aeth_kind(frame, ib))
                    elif fid is not None:
                        self._on_ack(fid, psn)
                    return
        if self._rx_q is not None:
            self._rx_arrive(pkt)
            return
        now = self.engine.now_ps
        if pkt.ecn == 3:
            self._on_ce(pkt.flow, pkt.src, now)
        self._deliver(pkt, now)

    def _on_ce(self, f: int, src: int, now: int) -> None:
        """A CE-marked data frame of flow ``f`` arrived: count it; the NP's CNP (none for a
        replayed flow, whose sender is a recording)."""
        self.rx_ce[f] = self.rx_ce.get(f, 0) + 1
        if f >= REPLAY_FLOW_BASE:
            return
        if self.cnp_mode == "immediate":
            last = self._last_cnp_ps.get(f)
            if last is None or now - last >= self.cnp_interval_ps:
                self._last_cnp_ps[f] = now
                self._send_cnp(f, src)
        else:
            self._ce_in_window.add(f)
            if f not in self._cnp_window:
                self._cnp_window[f] = self.engine.schedule_in(
                    self.cnp_interval_ps, self._cnp_window_end, f, src)

    def _deliver(self, pkt: SimPacket, now: int) -> None:
        """A data frame is received: a reliable one (``psn`` set) goes through its flow's
        :class:`sim.nic.rc.RcReceiver` first (module docstring).  It counts in ``rx_ooo``
        if it arrived out of order (the network's reordering, whatever the receiver then
        does with it)."""
        f = pkt.flow
        if pkt.id < self._rx_top_id.get(f, -1):
            self.rx_ooo[f] = self.rx_ooo.get(f, 0) + 1
        else:
            self._rx_top_id[f] = pkt.id
        if pkt.psn is None:
            self._deliver_frame(pkt, now)
            return
        rx = self._rc_rx.get(f)
        if rx is None:
            rx = self._rc_rx[f] = RcReceiver("ooo" if self.ooo_on else self.retransmit,
                                             timeout_ps=self.ooo_timeout_ps)
        verdict, ready, reply = rx.on_frame(pkt.psn, pkt, now)
        if rx.ooo:
            self._rc_rx_arm(f, pkt.tc, pkt.src)
        if verdict in ("out_of_sequence", "duplicate"):
            self._rc_drop(pkt, verdict, now)
        ask = False  # a frame delivered asked for an ACK (or ack_every came round)
        every = self.ack_every
        for p in ready:
            self._deliver_frame(p, now)
            if p.ackreq or (every and self.rx_packets[f] % every == 0):
                ask = True
        if reply is not None:  # a NAK acknowledges every frame before its PSN, too
            self._send_ack(f, pkt.tc, reply[1], pkt.src, "NAK" if reply[0] == "nak" else "ACK")
        elif ask:
            self._send_ack(f, pkt.tc, (rx.expected - 1) & _PSN_MASK, pkt.src)

    def _rc_rx_arm(self, fid: int, tc: int, src: int) -> None:
        """Make sure a timer runs for the open gap of out-of-order receiver ``fid`` (none
        when no gap is open; lazy, as :meth:`_rc_arm`)."""
        self._arm_timer(self._rc_rx_timer, fid, self._rc_rx[fid].deadline_ps,
                        self._rc_rx_due, fid, tc, src)

    def _rc_rx_due(self, fid: int, tc: int, src: int) -> None:
        """The gap timer of receiver ``fid``: its NAK when the gap is still open."""
        del self._rc_rx_timer[fid]
        reply = self._rc_rx[fid].on_timeout(self.engine.now_ps)
        if reply is not None:
            self._send_ack(fid, tc, reply[1], src, "NAK")
        self._rc_rx_arm(fid, tc, src)

    def _rc_count(self, fid: int, reason: str) -> None:
        """A reliable frame of flow ``fid`` dropped by this NIC (``rc_drops``, by reason)."""
        by = self.rc_drops.setdefault(fid, {})
        by[reason] = by.get(reason, 0) + 1

    def _rc_drop(self, pkt: SimPacket, reason: str, now: int) -> None:
        self._rc_count(pkt.flow, reason)
        if Dropped in self._int.types:
            self.tracer.emit(Dropped(now, self.node_id, 0, pkt.tc, pkt.id, pkt.flow, pkt.nbytes,
                                     reason))

    def _deliver_frame(self, pkt: SimPacket, now: int) -> None:
        """A data frame is received (in memory): counters, ``on_data``, messages, FCT, ACKs."""
        f = pkt.flow
        got = self.rx_bytes.get(f, 0) + pkt.nbytes
        self.rx_bytes[f] = got
        n = self.rx_packets.get(f, 0) + 1
        self.rx_packets[f] = n
        if n == 1:
            self.rx_first_ps[f] = now
        self.rx_last_ps[f] = now
        if self.delivered is not None:
            self.delivered.append((now, pkt))
        if self.rx_tap is not None:
            self.rx_tap(now, pkt)
        if self.on_data is not None:
            self.on_data(f, got, now)
        want = self._expected.get(f)
        done = want is not None and got >= want
        flow = self._flows.get(f)
        if flow is not None and flow.message_bytes is not None:
            m = flow.message_bytes
            msgs = got // m
            if done and want % m:
                msgs += 1  # size_bytes cut the last message
            old = self.rx_messages.get(f, 0)
            if msgs > old:
                self.rx_messages[f] = msgs
                self.rx_message_done_ps.setdefault(f, []).extend([now] * (msgs - old))
        if done and f not in self.fct_ps:
            self.fct_ps[f] = now - self._flows[f].start_ps
        every = self.ack_every  # (a reliable flow's ACKs: _deliver)
        if every and flow is not None and pkt.psn is None and (n % every == 0 or done):
            self._send_ack(f, flow.tc, n - 1, pkt.src)

    # ------------------------------------------------------- receive buffer
    def _rx_arrive(self, pkt: SimPacket) -> None:
        """A data frame reaches the NIC's receive buffer (module docstring, PCIe)."""
        now = self.engine.now_ps
        n = pkt.nbytes
        cap = self.rx_buffer_bytes
        assert cap is not None and self._rx_q is not None
        if self.rx_xoff_bytes is None and self.rx_pause_tcs:
            self.rx_xoff_bytes, self.rx_xon_bytes, self._rx_headroom = rx_thresholds(
                cap, self.port.rate_bps, self.port.prop_ps, self.rx_mtu_bytes,
                self._rx_headroom)
        used = self.rx_buffer_used_bytes + n
        if used > cap:
            self.rx_buffer_dropped_packets += 1
            self.rx_buffer_dropped_bytes += n
            if pkt.psn is not None:
                self._rc_count(pkt.flow, "rx_buffer_full")
            if Dropped in self._int.types:
                self.tracer.emit(Dropped(now, self.node_id, 0, pkt.tc, pkt.id, pkt.flow, n,
                                         "rx_buffer_full"))
            return
        if pkt.ecn == 3:
            self._on_ce(pkt.flow, pkt.src, now)
        self._rx_q.append(pkt)
        self.rx_buffer_used_bytes = used
        if used > self.rx_buffer_max_bytes:
            self.rx_buffer_max_bytes = used
        tc = pkt.tc
        xoff = self.rx_xoff_bytes
        if (xoff is not None and used >= xoff and tc in self.rx_pause_tcs
                and tc not in self._rx_paused):
            self._rx_paused.add(tc)
            self._send_pause(now, tc, _STALL_QUANTA)
            if self._rx_refresh is None:
                half = quanta_to_ps(_STALL_QUANTA, self.port.rate_bps) // 2
                self._rx_refresh = self.engine.schedule_in(half, self._rx_pause_refresh)
        if not self._rx_draining:
            self._rx_draining = True
            self._rx_write_next()

    def _rx_write_next(self) -> None:
        assert self._rx_q is not None and self.pcie_write_bps is not None
        payload = max(self._rx_q[0].nbytes - self.pcie_header_bytes, 0)
        self.engine.call_in(ser_time_ps(payload, self.pcie_write_bps), self._rx_written)

    def _rx_written(self) -> None:
        """The head frame's PCIe write ended: it is received; XON at or below XON."""
        assert self._rx_q is not None
        pkt = self._rx_q.popleft()
        now = self.engine.now_ps
        self.rx_buffer_used_bytes -= pkt.nbytes
        self._deliver(pkt, now)
        if self._rx_paused and self.rx_xon_bytes is not None \
                and self.rx_buffer_used_bytes <= self.rx_xon_bytes:
            for prio in sorted(self._rx_paused):
                if not (self.stall_pausing and prio in self._stall_prios):
                    self._send_pause(now, prio, 0)
            self._rx_paused.clear()
            if self._rx_refresh is not None:
                self._rx_refresh.cancel()
                self._rx_refresh = None
        if self._rx_q:
            self._rx_write_next()
        else:
            self._rx_draining = False

    def _rx_pause_refresh(self) -> None:
        self._rx_refresh = None
        if not self._rx_paused:
            return
        now = self.engine.now_ps
        for prio in sorted(self._rx_paused):
            self._send_pause(now, prio, _STALL_QUANTA)
        half = quanta_to_ps(_STALL_QUANTA, self.port.rate_bps) // 2
        self._rx_refresh = self.engine.schedule_in(half, self._rx_pause_refresh)

    def _cnp_window_end(self, flow_id: int, to_node: int) -> None:
        if flow_id in self._ce_in_window:
            self._ce_in_window.discard(flow_id)
            self._send_cnp(flow_id, to_node)
            self._cnp_window[flow_id] = self.engine.schedule_in(
                self.cnp_interval_ps, self._cnp_window_end, flow_id, to_node)
        else:
            del self._cnp_window[flow_id]

    def _lrh(self, to_node: int, tc: int) -> dict:
        """The LRH of a native IB packet this NIC sends to ``to_node`` on class (SL) ``tc``:
        the VL of the link's SL-to-VL map, the nodes' LIDs."""
        ib = getattr(self.port, "ib", None)
        return {"vl": tc if ib is None else ib.vl_of[tc], "sl": tc,
                "dlid": node_lid(to_node), "slid": node_lid(self.node_id)}

    def _send_cnp(self, flow_id: int, to_node: int) -> None:
        now = self.engine.now_ps
        key = (flow_id, to_node)
        frame = self._cnp_frames.get(key)
        if frame is None:  # the same bytes every time (immutable): built once per QP
            if self.port.stack.ethernet:
                frame = build({
                    "eth": {"src": node_mac(self.node_id), "dst": node_mac(to_node)},
                    "ipv4": {"src": node_ip(self.node_id), "dst": node_ip(to_node),
                             "dscp": 48},
                    "udp": {}, "bth": {"opcode": "CNP", "dest_qp": flow_qp(flow_id)}})
            else:  # IBA's CN packet: LRH, BTH (opcode 0x80, BECN), ICRC, VCRC
                frame = build_ib({"lrh": self._lrh(to_node, self.cnp_tc),
                                  "bth": {"opcode": IB_CNP_OPCODE, "becn": 1,
                                          "dest_qp": flow_qp(flow_id)}})
            self._cnp_frames[key] = frame
        cnp = SimPacket(self._ids(), now, len(frame), flow=flow_id, tc=self.cnp_tc,
                        src=self.node_id, dst=to_node, frame=frame)
        self.cnp_sent += 1
        if CNPSent in self._int.types:
            self.tracer.emit(CNPSent(now, self.node_id, flow_id))
        self.port._enq(cnp)

    def _send_ack(self, fid: int, flow_tc: int, psn: int, to_node: int,
                  kind: str = "ACK") -> None:
        """An RC ACKNOWLEDGE (BTH + AETH) for the flow's frames up to number ``psn``; with
        ``kind="NAK"`` a NAK (PSN sequence error, IBA 9.3.5 table 45) with the expected PSN."""
        now = self.engine.now_ps
        tc = flow_tc if self.ack_tc is None else self.ack_tc
        key = (fid, to_node, tc, kind)
        make = self._ack_makers.get(key)
        if make is None:
            # built once; each ACK patches PSN and MSN through the field tables and gets a
            # fresh ICRC (and on IB VCRC; wire.template): the bytes wire.build would give,
            # much faster
            tail = {"bth": {"opcode": ACK_OPCODE, "dest_qp": flow_qp(fid), "psn": 0},
                    "aeth": {"kind": kind, "value": 31 if kind == "ACK" else 0, "msn": 0}}
            if self.port.stack.ethernet:
                tpl = RoceTemplate({
                    "eth": {"src": node_mac(self.node_id), "dst": node_mac(to_node)},
                    "ipv4": {"src": node_ip(self.node_id), "dst": node_ip(to_node),
                             "dscp": tc << 3},
                    "udp": {}, **tail}, patch=("bth.psn", "aeth.msn"))
            else:
                tpl = IbTemplate({"lrh": self._lrh(to_node, tc), **tail},
                                 patch=("bth.psn", "aeth.msn"))
            make = self._ack_makers[key] = tpl.maker()
        frame = make(psn & _PSN_MASK, self.rx_messages.get(fid, 0) & _PSN_MASK)
        ack = SimPacket._new(self._ids.take(), now, len(frame), fid, tc, NOT_ECT, self.node_id,
                             to_node, frame, 0)  # frame: a bytearray of its own
        self.ack_sent += 1
        self.port._enq(ack)


def rc_conservation(sender: Host, receiver: Host, fid: int, network_dropped: int = 0,
                    ) -> dict[str, int]:
    """Frame conservation of reliable flow ``fid``: ``sent`` (every transmission, resends
    included) = ``delivered`` + ``dropped`` (by the receiving NIC: out of sequence,
    duplicate, held by SR, buffer full, stalled; plus ``network_dropped``, the frames the
    switches dropped) + ``in_flight``.  ``in_flight`` is what is left: never negative, and 0
    once the fabric is idle -- nothing is lost silently."""
    tx = sender._rc_tx[fid]
    rx = receiver._rc_rx.get(fid)
    delivered = receiver.rx_packets.get(fid, 0)
    nic = sum(receiver.rc_drops.get(fid, {}).values())
    held = len(rx.held()) if rx is not None else 0
    dropped = nic + network_dropped
    return {"sent": tx.sent_frames, "delivered": delivered, "dropped": dropped, "held": held,
            "in_flight": tx.sent_frames - delivered - dropped - held}


# The frames a NIC makes and reads most (its ACKs, CNPs and data): untagged Ethernet, IPv4
# without options, UDP, BTH (and an ACK's AETH), read with one struct.unpack_from each
# (wire.spec.stack_getter, from the field tables); any other frame takes the general path.
_ROCE4_BTH = stack_getter((ETHERNET, ("type",)), (IPV4, ("ihl", "protocol")), (UDP, ("dport",)),
                          (BTH, ("opcode", "dest_qp", "psn")))
_ROCE4_AETH = stack_getter((ETHERNET, ("type",)), (IPV4, ("ihl", "protocol")),
                           (UDP, ("dport",)), (BTH, ()), (AETH, ("syndrome",)))
#: What those getters' first four values are for such a frame (EtherType, IHL, protocol,
#: destination port).
_ROCE4_HEAD = (int(EtherType.IPV4), IPV4.size_bytes // 4, IPPROTO_UDP, ROCEV2_PORT)
#: The AETH kind of every syndrome (wire.ib_ext.aeth_decode: the one layout).
_AETH_KINDS = tuple(int(AethKind[aeth_decode(syndrome)["kind"]]) for syndrome in range(256))


def roce_aeth_kind(frame: bytes | bytearray, ib: bool = False) -> int | None:
    """The AETH kind (:class:`wire.ib_ext.AethKind`) of a RoCEv2 ACKNOWLEDGE frame (BTH +
    AETH; ``ib``: of a native InfiniBand packet), from the field tables; None if it is not
    one."""
    if not ib and len(frame) >= _ROCE4_AETH.size_bytes:
        got = _ROCE4_AETH(frame)
        if got[:4] == _ROCE4_HEAD:
            return _AETH_KINDS[got[4]]
    loc = _ib_bth_offset(frame) if ib else _bth_offset(frame)
    if loc is None or len(frame) < loc + BTH.size_bytes + AETH.size_bytes:
        return None
    return _AETH_KINDS[AETH.unpack_raw(frame, loc + BTH.size_bytes)["syndrome"]]


def _bth_offset(frame: bytes | bytearray) -> int | None:
    """Offset of the BTH of a RoCEv2 frame (IPv4/IPv6, UDP dport 4791), else None."""
    loc = ip_offset(frame)
    if loc is None:
        return None
    off, ver = loc
    if ver == 4:
        ip = IPV4.unpack_raw(frame, off)
        if ip["protocol"] != 17:
            return None
        udp = off + ip["ihl"] * 4
    else:
        if IPV6.unpack_raw(frame, off)["next_header"] != 17:
            return None
        udp = off + IPV6.size_bytes
    if len(frame) < udp + UDP.size_bytes + BTH.size_bytes:
        return None
    if UDP.unpack_raw(frame, udp)["dport"] != ROCEV2_PORT:
        return None
    return udp + UDP.size_bytes


def _ib_bth_offset(frame: bytes | bytearray) -> int | None:
    """Offset of the BTH of a native InfiniBand packet (LRH, GRH if its LNH says so), else
    None (a raw or IPv6 packet, or one too short)."""
    if len(frame) < LRH.size_bytes:
        return None
    lnh = LRH.unpack_raw(frame, 0)["lnh"]
    if lnh == Lnh.IBA_LOCAL:
        off = LRH.size_bytes
    elif lnh == Lnh.IBA_GLOBAL:
        off = LRH.size_bytes + GRH.size_bytes
    else:
        return None
    return off if len(frame) >= off + BTH.size_bytes else None


def ib_bth(frame: bytes | bytearray) -> tuple[int, int, int] | None:
    """(BTH opcode, DestQP, PSN) of a native InfiniBand packet, else None: what
    :func:`roce_bth` is on an InfiniBand link."""
    loc = _ib_bth_offset(frame)
    if loc is None:
        return None
    bth = BTH.unpack_raw(frame, loc)
    return bth["opcode"], bth["dest_qp"], bth["psn"]


def roce_bth(frame: bytes | bytearray) -> tuple[int, int, int] | None:
    """(BTH opcode, DestQP, PSN) of a RoCEv2 frame (IPv4/IPv6, UDP dport 4791), else None.
    Reads only the IP, UDP and BTH field tables (no full dissection): the one parser the NIC
    uses to tell CNPs and ACKs from data."""
    if len(frame) >= _ROCE4_BTH.size_bytes:
        got = _ROCE4_BTH(frame)
        if got[:4] == _ROCE4_HEAD:
            return got[4:]
    loc = _bth_offset(frame)
    if loc is None:
        return None
    bth = BTH.unpack_raw(frame, loc)
    return bth["opcode"], bth["dest_qp"], bth["psn"]


# Compiled (host.pxd), a cpdef method's Python signature has lost its return annotation: put
# back the one written above (interpreted, it is there already and this does nothing).
vars(Host)["receive"].__annotations__.setdefault("return", "None")

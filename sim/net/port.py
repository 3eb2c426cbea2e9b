"""Egress port and link: per-priority queues, a scheduler, PFC pause reaction, serialisation
and propagation.

Rules (IEEE 802.1Qbb / IEEE 802.3 Annex 31B and 31D; the same semantics as the ns-3 DCB module's
``ReceivePfc`` and htsim's ``sim/queue_lossless_output.cpp``, github.com/Broadcom/csg-htsim):

* A port starts a frame only when the frame's priority is not paused; a frame already on the
  wire always completes (pause is checked when a transmission *starts*).
* A PFC frame received on this port pauses each enabled priority for ``quanta x 512 bit
  times`` at this port's rate (``wire.pfc.quanta_to_ps``); a new frame replaces the timer
  (refresh extends, quanta 0 resumes at once).  Other priorities keep flowing.
* Control frames (PFC) go first and are never paused (MAC Control is not subject to PFC).
* Scheduling among data queues: strict priority for ``strict_tcs`` (highest first), then,
  over the other non-empty, unpaused queues, either packet round robin (``scheduler="rr"``,
  the default) or deficit weighted round robin (``scheduler="dwrr"``, below).
* Serialisation counts the wire size of the port's header stack (:attr:`Port.stack`,
  :mod:`wire.linkstack`): on Ethernet (RoCE, the default) the frame with FCS, preamble/SFD,
  IFG and the 64-byte minimum (``sim.units.frame_ser_time_ps``), on an InfiniBand link (set
  by :class:`sim.flowctl.ib.IbLink`) the packet's bytes alone; the frame reaches the peer
  ``prop_ps`` after its last bit.

Paused time per priority is accounted as the union of pause intervals (a refresh does not
count twice).

DWRR (deficit round robin, Shreedhar & Varghese, SIGCOMM 1995, with per-class quanta):
traffic class ``tc`` has quantum ``weights[tc] * quantum_bytes`` (``quantum_bytes`` defaults
to 1500, one MTU-sized frame) and a deficit counter.  The non-strict classes are visited in
cyclic order; a visited class that is non-empty and unpaused adds its quantum to its deficit
and then sends head frames while the deficit covers the head frame's ``nbytes`` (the frame
length without FCS, the unit of ``tx_bytes``), each send subtracting the frame's size.  The
visit ends when the deficit no longer covers the head (the deficit is kept for the next
round), when the queue empties (its deficit resets to 0, as in the paper) or when the class
is paused (its deficit is kept, but a paused class is skipped without gaining quantum, so it
cannot bank credit while paused).  If no eligible class can send after a pass, passes repeat
(each adding a quantum) until one can, so the port is work conserving.  Weights must be
positive for every non-strict class (a zero weight would starve it; use ``strict_tcs`` for
precedence); entries for strict classes are ignored.

VL arbitration (``scheduler="vlarb"``, InfiniBand Architecture Specification Vol. 1, 7.6.9;
the parameters as OpenSM's ``qos_<type>_vlarb_high`` / ``_vlarb_low`` / ``_high_limit`` name
them, opensm ``doc/QoS_management_in_OpenSM.txt``): ``weights`` is ``(high, low, limit)``
(:func:`vlarb_weights`), two tables of ``(VL, weight)`` entries, weight 0..255 in 64-byte
units (credits; an entry of weight 0 is skipped), and ``limit`` (Limit of High-Priority,
0..255, in 4 KiB units; 255 = unbounded; 0 = one high-priority packet).  A traffic class
queues on the VL its ``sl2vl`` gives (:meth:`Port.set_vl_map`; identity by default).  Strict
classes go first (as for the other schedulers).  Within a table the entries are served in
order: the entry's VL sends packets while its weight left is positive, each packet taking
its 64-byte blocks (``sim.flowctl.ib.ib_blocks``) from it (the packet that crosses zero
completes [A]); then the next entry.  An entry whose VL has nothing eligible (empty, paused
or credit-blocked) is skipped and loses the rest of its turn: work conserving.  The high
table is served first while fewer than ``limit x 4096`` bytes (one packet for 0) were sent
from it since the low table last sent; then one low-table packet, if the low table has one
eligible (else the high table goes on).  A VL of a non-strict class must have a positive
weight in one of the tables (ValueError), or its traffic would never be sent.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from sim.engine import Engine, Timer
from sim.events import PauseExpired, PauseReceived
from sim.flowctl.base import Gate
from sim.flowctl.credit import CreditFlowControl
from sim.flowctl.ib import MGMT_VL, IbLink, ib_blocks
from sim.packet import PRIORITIES, SimPacket
from sim.trace import Interest, NullTracer, QueueSampler, SampleBuffer, Tracer, interest
from sim.units import ser_time_ps
from wire.linkstack import ROCE, HeaderStack
from wire.pfc import quanta_to_ps

__all__ = ["Port", "CreditPort", "Receiver", "PRIORITIES", "QUANTUM_BYTES", "SCHEDULERS",
           "VLARB_DEFAULT", "check_scheduler", "vlarb_cover", "vlarb_weights"]

SCHEDULERS = ("rr", "dwrr", "vlarb")
#: OpenSM's hard-coded defaults for CAs and switch external ports (opensm
#: ``doc/QoS_management_in_OpenSM.txt``: ``qos_*_vlarb_high 0:4``, ``qos_*_vlarb_low
#: 0:0,1:4,...,14:4``, ``qos_*_high_limit 0``), restricted to the 8 VLs of the traffic classes.
VLARB_DEFAULT = (((0, 4),), tuple((vl, 4) for vl in range(1, PRIORITIES)), 0)
#: Limit of High-Priority meaning "unbounded" (IBA 7.6.9).
_VLARB_UNBOUNDED = 255
#: Never-ending pause used to mask a gated class from the base scheduler for one pick.
_FOREVER_PS = 1 << 62
#: What an egress queue that never held a frame is (Port.queues): empty and shared.
_NO_FRAMES: tuple = ()

_RR_PLANS: dict[tuple[int, ...], tuple[frozenset[int], list[tuple[int, ...]]]] = {}


def _rr_plan(strict_tcs: tuple[int, ...]) -> tuple[frozenset[int], list[tuple[int, ...]]]:
    """(the strict classes as a set, the non-strict classes in round-robin order from each
    class) for ports with ``strict_tcs``, made once and shared (read-only)."""
    plan = _RR_PLANS.get(strict_tcs)
    if plan is None:
        strict = frozenset(strict_tcs)
        orders = [tuple(tc for tc in ((s + i) % PRIORITIES for i in range(PRIORITIES))
                        if tc not in strict) for s in range(PRIORITIES)]
        plan = _RR_PLANS[strict_tcs] = (strict, orders)
    return plan


#: The number of traffic classes (PRIORITIES), a C int in the compiled core.
_NPRIO = PRIORITIES
#: Default DWRR quantum unit: one MTU-sized (1500-byte) frame per unit of weight.
QUANTUM_BYTES = 1500


def check_scheduler(scheduler: str, weights: Sequence[int] | None, quantum_bytes: int,
                    strict_tcs: Iterable[int] = (7,)) -> tuple[int, ...] | None:
    """Validate scheduler arguments; return the weights as a tuple (None for ``"rr"`` without
    weights).  Raises ValueError naming the bad argument."""
    if scheduler not in SCHEDULERS:
        raise ValueError(f"scheduler must be one of {SCHEDULERS}, got {scheduler!r}")
    if (not isinstance(quantum_bytes, int) or isinstance(quantum_bytes, bool)
            or quantum_bytes < 1):
        raise ValueError(f"quantum_bytes must be a positive int, got {quantum_bytes!r}")
    if scheduler == "vlarb":
        w = VLARB_DEFAULT if weights is None else vlarb_weights(*weights)
        vlarb_cover(w, tuple(range(PRIORITIES)), strict_tcs)
        return w  # type: ignore[return-value]
    if weights is None:
        return (1,) * PRIORITIES if scheduler == "dwrr" else None
    w = tuple(weights)
    if len(w) != PRIORITIES or any(not isinstance(x, int) or isinstance(x, bool) or x < 0
                                   for x in w):
        raise ValueError(f"weights must be {PRIORITIES} non-negative ints, got {weights!r}")
    strict = set(strict_tcs)
    zero = [tc for tc in range(PRIORITIES) if tc not in strict and w[tc] == 0]
    if zero:
        raise ValueError(f"weights must be positive for non-strict traffic classes; "
                         f"weights[{zero[0]}] is 0")
    return w


def _int_in(x: object, lo: int, hi: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi


def vlarb_weights(high: Iterable[Sequence[int]] = (), low: Iterable[Sequence[int]] = (),
                  limit: int = 0) -> tuple[tuple[tuple[int, int], ...],
                                           tuple[tuple[int, int], ...], int]:
    """The ``weights`` of a ``"vlarb"`` port: ``(high, low, limit)`` checked and normalised
    (tables of ``(VL 0..14, weight 0..255)``, ``limit`` 0..255; module docstring).  Raises
    ValueError naming the bad part."""
    tables = []
    for name, table in (("high", high), ("low", low)):
        try:
            entries = tuple(tuple(e) for e in table)
        except TypeError:
            raise ValueError(f"vlarb {name} table must be a list of [VL, weight] pairs, "
                             f"got {table!r}") from None
        for e in entries:
            if len(e) != 2 or not _int_in(e[0], 0, MGMT_VL - 1) or not _int_in(e[1], 0, 255):
                raise ValueError(f"vlarb {name} table entry {list(e)!r}: must be [VL 0..14, "
                                 f"weight 0..255]")
        tables.append(entries)
    if not _int_in(limit, 0, 255):
        raise ValueError(f"vlarb limit of high priority must be an int 0..255 (4 KiB units, "
                         f"255 unbounded), got {limit!r}")
    return tables[0], tables[1], limit  # type: ignore[return-value]


def vlarb_cover(w: tuple, vl_of: Sequence[int], strict_tcs: Iterable[int] = (7,)) -> None:
    """ValueError unless every non-strict class's VL (``vl_of``: the SL-to-VL map) has a
    positive weight in one of the ``"vlarb"`` tables of ``w`` (else its traffic starves)."""
    served = {vl for table in w[:2] for vl, weight in table if weight > 0}
    strict = set(strict_tcs)
    for tc in range(PRIORITIES):
        vl = vl_of[tc]
        if tc not in strict and vl != MGMT_VL and vl not in served:
            raise ValueError(f"vlarb: VL {vl} (traffic class {tc}) has no positive weight in "
                             f"the high or low table")


class Receiver(Protocol):
    """A node: something a link delivers frames to."""

    node_id: int

    def receive(self, port: int, pkt: SimPacket) -> None: ...


class Port:
    """One direction of a link: the egress side of ``node``'s port ``index``.

    ``scheduler`` is ``"rr"`` (packet round robin, the default) or ``"dwrr"``; ``weights``
    (8 ints, default all 1) and ``quantum_bytes`` (default 1500) set the DWRR quanta
    ``weights[tc] * quantum_bytes``; see the module docstring."""

    def __init__(self, engine: Engine, node_id: int, index: int, rate_bps: int, *,
                 tracer: Tracer | None = None, strict_tcs: Iterable[int] = (7,),
                 on_dequeue: Callable[[int, SimPacket], None] | None = None,
                 scheduler: str = "rr", weights: Sequence[int] | None = None,
                 quantum_bytes: int = QUANTUM_BYTES) -> None:
        if rate_bps <= 0:
            raise ValueError("rate_bps must be positive")
        strict_tcs = tuple(strict_tcs)
        w = check_scheduler(scheduler, weights, quantum_bytes, strict_tcs)
        self.scheduler = scheduler
        self.weights = w
        self.quantum_bytes = quantum_bytes
        self.engine = engine
        self.node_id = node_id
        self.index = index
        self.rate_bps = rate_bps
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        #: What the tracer reads (sim.trace.Interest): an event is built only when it is read.
        self._int: Interest = interest(self.tracer)
        #: The sampler whose sample buffers ``_qbufs`` (one per class, made on first use)
        #: this port keeps (:meth:`_sample`).
        self._qbuf_owner: QueueSampler | None = None
        self._qbufs: list[SampleBuffer | None] | None = None
        self.strict_tcs = sorted(set(strict_tcs), reverse=True)
        # The strict set and the round-robin visiting order of the non-strict queues for each
        # starting queue: the same for every port with these strict classes, so shared.
        self._strict, self._rr_orders = _rr_plan(tuple(self.strict_tcs))
        self._queued = 0  # data frames in all queues (fast path of the scheduler)
        self._last_tc = 0  # the data queue picked last (fast path of the "rr" scheduler)
        self._ser_cache: dict[int, int] = {}
        self._pause_ps: dict[int, int] = {}  # quanta -> pause time at rate_bps
        self._cached_rate = rate_bps  # the rate of _ser_cache's and _pause_ps's times
        #: The header stack of the frames this port sends, for their size on the wire
        #: (:meth:`set_stack`; RoCEv2 on Ethernet unless an InfiniBand link says otherwise).
        self.stack: HeaderStack = ROCE
        self.on_dequeue = on_dequeue
        self.peer: Receiver | None = None
        self.peer_port = 0
        self.prop_ps = 0
        #: One FIFO per traffic class.  A class that never queued a frame holds the shared
        #: empty tuple :data:`_NO_FRAMES` instead (len 0, false, nothing to iterate), its
        #: deque made on its first frame: most ports queue on one or two classes, and eight
        #: empty deques are 6 KB a port (a 2,048-host fabric has ten thousand ports).
        self.queues: list[deque[SimPacket]] = [_NO_FRAMES] * PRIORITIES  # type: ignore[list-item]
        self.queue_bytes = [0] * PRIORITIES
        self.max_queue_bytes = [0] * PRIORITIES
        self.control: deque[SimPacket] = deque()
        self.busy = False
        self._rr = 0
        self._paused_until_ps = [0] * PRIORITIES
        self._pause_start_ps: list[int | None] = [None] * PRIORITIES
        self._paused_acc_ps = [0] * PRIORITIES
        self._expiry: list[Timer | None] = [None] * PRIORITIES
        self._wake: Timer | None = None
        #: Callbacks ``tap(t_ps, pkt)`` run when a frame starts leaving this port (pcap capture).
        self.taps: list[Callable[[int, SimPacket], None]] = []
        self.tx_bytes = 0
        self.tx_packets = 0
        self.pause_received = 0
        #: PFC (or PAUSE) frames received per priority (None until the first: most ports
        #: never get one); ``pause_received`` is their sum.
        self.pause_rx_prio: list[int] | None = None
        self.busy_ps = 0
        self._tx_end_ps = 0  # end of the frame on the wire (valid while busy)
        self._rr_fast = scheduler == "rr"  # enqueue's cut-through applies to "rr" only
        self._rr_pick = scheduler == "rr"  # _send_next picks with _pick_rr (no gate)
        #: The scheduler as a number for :meth:`_sched_pick`: 0 rr, 1 dwrr, 2 vlarb.
        self._sched = SCHEDULERS.index(scheduler)
        #: The link-level flow control's gate (:meth:`add_gate`; None: none), and the same
        #: object when it is an InfiniBand link's (its gate is then a C call, port.pxd).
        self._gate: Gate | None = None
        self._ib_gate: IbLink | None = None
        #: The InfiniBand link of this port (sim.flowctl.ib sets it; None: not an IB link).
        self.ib: IbLink | None = None
        # Hot-path handles, bound once (no bound-method object per frame).
        self._done_cb = self._done
        #: When set, ``enqueue`` hands every frame to it instead of queueing it (the dropper of
        #: a link that is down, sim/fabric/faults.py).  Port's per-frame methods are final in
        #: the compiled core, so this is how a frame's way in is changed, not by replacing
        #: ``enqueue`` on the instance.
        self._divert: Callable[[SimPacket], None] | None = None
        self.deficit: list[int] | None = None
        if scheduler == "dwrr":
            assert w is not None
            #: DWRR quantum (bytes) and deficit counter per traffic class.
            self.quantum = [x * quantum_bytes for x in w]
            self.deficit = [0] * PRIORITIES
            self._dw_cur = -1  # class whose visit is in progress, -1 for none
            self._dw_next = 0  # where the next pass starts
        self._vl_of: tuple[int, ...] = tuple(range(PRIORITIES))
        if scheduler == "vlarb":
            assert w is not None
            self._va_tables = (tuple(e for e in w[0] if e[1] > 0),
                               tuple(e for e in w[1] if e[1] > 0))
            lim = w[2]
            #: High-table bytes allowed before the low table gets a turn (None: unbounded).
            self._va_limit = None if lim == _VLARB_UNBOUNDED else lim * 4096
            self._va_hi_sent = 0
            self._va_idx = [0, 0]  # current entry per table
            self._va_left = [0, 0]  # weight (blocks) left in the current entry's turn
            self._va_rr = [0] * (MGMT_VL + 1)  # round robin among classes sharing a VL
            self.set_vl_map(self._vl_of)

    def connect(self, peer: Receiver, peer_port: int, prop_ps: int) -> None:
        self.peer, self.peer_port, self.prop_ps = peer, peer_port, prop_ps

    # ------------------------------------------------------------------ queues
    def enqueue(self, pkt: SimPacket) -> None:
        """Queue ``pkt`` on its class (``pkt.tc``) and start it if the port is idle."""
        self._enq(pkt)

    def _enq(self, pkt: SimPacket) -> None:
        """:meth:`enqueue`; in the compiled core a C method that the NIC and the switch call
        directly (port.pxd)."""
        if self._divert is not None:
            self._divert(pkt)
            return
        tc = pkt.tc
        paused_to = self._paused_until_ps[tc]
        if (not self.busy and not self._queued and not self.control and self._rr_fast
                and paused_to <= self.engine.now_ps):
            self._cut_through(pkt, tc)
            return
        q = self.queues[tc]
        if q is _NO_FRAMES:
            q = self.queues[tc] = deque()
        q.append(pkt)
        self._queued += 1
        qb = self.queue_bytes[tc] + pkt.nbytes
        self.queue_bytes[tc] = qb
        if qb > self.max_queue_bytes[tc]:
            self.max_queue_bytes[tc] = qb
        f = self._int.enqueued
        if f is not None:
            self._sample(f, self.engine.now_ps, tc, pkt, pkt.nbytes, qb)
        if not self.busy:
            self._send_next()

    def _sample(self, hook: Callable[..., None], now: int, tc: int, pkt: SimPacket,
                nbytes: int, queue_bytes: int) -> None:
        """A queue sample after an enqueue or dequeue (``hook``: the Interest's ``enqueued``
        or ``dequeued``, not None): straight to the runner's sampler's buffer for the class
        when it takes them (C calls, the same sample), else through ``hook`` with an
        Enqueued / Dequeued's fields."""
        smp = self._int.sampler
        if smp is not None:
            if smp is not self._qbuf_owner:
                self._qbuf_owner = smp
                self._qbufs = [None] * PRIORITIES
            b = self._qbufs[tc]
            if b is None:
                b = self._qbufs[tc] = smp._queue_buffer(self.node_id, self.index, tc)
            b.add(now, queue_bytes)
        else:
            hook(now, self.node_id, self.index, tc, pkt.id, pkt.flow, nbytes, queue_bytes)

    def _cut_through(self, pkt: SimPacket, tc: int) -> None:
        """Enqueue on an idle ``"rr"`` port with nothing queued, ``tc`` not paused: the frame
        would be queued and picked at once, so do exactly that without the deque round trip.
        Same side effects in the same order as ``enqueue`` + ``_start`` (the Enqueued and
        Dequeued events, ``max_queue_bytes``, the round-robin pointer; ``queue_bytes`` is back
        to its value after the dequeue when ``on_dequeue`` runs), same events scheduled."""
        now = self.engine.now_ps
        nbytes = pkt.nbytes
        qb = self.queue_bytes[tc] + nbytes
        if qb > self.max_queue_bytes[tc]:
            self.max_queue_bytes[tc] = qb
        f = self._int.enqueued
        if f is not None:
            self._sample(f, now, tc, pkt, nbytes, qb)
        if tc not in self._strict:
            self._rr = (tc + 1) % _NPRIO
        self._last_tc = tc
        if self.on_dequeue is not None:
            self.on_dequeue(self.index, pkt)
        f = self._int.dequeued
        if f is not None:
            self._sample(f, now, tc, pkt, nbytes, self.queue_bytes[tc])
        if self.taps:
            for tap in self.taps:
                tap(now, pkt)
        self.busy = True
        t = self._ser_ps(nbytes)
        self.busy_ps += t
        self._tx_end_ps = now + t
        self.engine._after(t, self._done_cb, (pkt,))

    def set_rate(self, rate_bps: int) -> None:
        """Serialise at ``rate_bps`` from now on (a degraded link; the frame on the wire keeps
        its time); pause quanta are counted at the new rate too.  (Setting ``rate_bps``
        directly does the same: the times worked out at the old rate are dropped when the
        next frame or pause finds the rate changed.)"""
        self.rate_bps = rate_bps

    def ser_time_ps(self, nbytes: int) -> int:
        """Serialisation time of a frame of ``nbytes`` at this port's rate now."""
        return self._ser_ps(nbytes)

    def _rate_changed(self) -> None:
        """``rate_bps`` is not the one the cached times were worked out at: drop them."""
        self._cached_rate = self.rate_bps
        self._ser_cache.clear()
        self._pause_ps.clear()

    def _ser_ps(self, nbytes: int) -> int:
        """Serialisation time of a frame of ``nbytes`` at this port's rate (worked out once
        per size and rate and kept)."""
        if self.rate_bps is not self._cached_rate:
            self._rate_changed()
        t = self._ser_cache.get(nbytes)
        if t is None:
            t = self._ser_cache[nbytes] = ser_time_ps(self.stack.wire_bytes(nbytes),
                                                      self.rate_bps)
        return t

    def wire_bytes(self, nbytes: int) -> int:
        """Bytes a frame of ``nbytes`` (FCS not counted) occupies on this port's link
        (:meth:`wire.linkstack.HeaderStack.wire_bytes` of :attr:`stack`)."""
        return self.stack.wire_bytes(nbytes)

    def set_stack(self, stack: HeaderStack) -> None:
        """Send frames of header stack ``stack`` from now on (their wire size: an
        InfiniBand link's packets carry no Ethernet framing)."""
        self.stack = stack
        self._ser_cache.clear()

    def send_control(self, pkt: SimPacket) -> None:
        """A MAC Control frame (PFC): ahead of all data, never paused."""
        self.control.append(pkt)
        if not self.busy:
            self._send_next()

    def busy_ps_until(self, now_ps: int) -> int:
        """Time spent serialising up to ``now_ps`` (``busy_ps`` counts a frame whole when it
        starts; the part of the frame on the wire still to come is left out here)."""
        if self.busy and self._tx_end_ps > now_ps:
            return self.busy_ps - (self._tx_end_ps - now_ps)
        return self.busy_ps

    def paused(self, prio: int) -> bool:
        return self._paused_until_ps[prio] > self.engine.now_ps

    def flush(self, prio: int) -> list[SimPacket]:
        """Remove every frame queued for ``prio`` and return them, oldest first (a PFC
        watchdog's drop action).  No ``on_dequeue`` call and no event: the caller accounts
        for the frames.  The frame on the wire, if any, is not affected."""
        if self._ib_gate is not None:
            self._ib_gate._sync()  # the credits arrived so far see the queue as it was
        q = self.queues[prio]
        pkts = list(q)
        if pkts:
            q.clear()
        self._queued -= len(pkts)
        self.queue_bytes[prio] = 0
        if self.deficit is not None:
            self.deficit[prio] = 0
            if self._dw_cur == prio:
                self._dw_cur = -1
                self._dw_next = (prio + 1) % PRIORITIES
        return pkts

    def _pick(self) -> int | None:
        """The data queue to send from next (None: none may send): the scheduler's choice
        among the classes that are not paused and, with a gate, not blocked by it.  A C
        method in the compiled core (port.pxd); ``_send_next`` calls :meth:`_pick_rr` itself
        on an "rr" port without a gate."""
        if self._gate is not None:
            return self._gated_pick()
        return self._sched_pick()

    def _sched_pick(self) -> int | None:
        """The scheduler's pick among the classes that are not paused: "rr"
        (:meth:`_pick_rr`), or the strict classes then "dwrr" or "vlarb"."""
        sched = self._sched
        if sched == 0:
            return self._pick_rr()
        if not self._queued:
            return None
        now = self.engine.now_ps
        until = self._paused_until_ps
        queues = self.queues
        for tc in self.strict_tcs:
            if queues[tc] and until[tc] <= now:
                return tc
        if sched == 1:
            return self._pick_dwrr(now)
        return self._pick_vlarb(now)

    def _pick_rr(self) -> int | None:
        """:meth:`_pick` of the "rr" scheduler; a C method in the compiled core (port.pxd)."""
        queued = self._queued
        if not queued:
            return None
        now = self.engine.now_ps
        until = self._paused_until_ps
        queues = self.queues
        tc = self._last_tc
        if len(queues[tc]) == queued:
            # Fast path: every queued data frame is in the queue picked last, so the scans
            # below could only find this one (same result, same round-robin update).
            paused_to = until[tc]
            if paused_to > now:
                return None
            if tc not in self._strict:
                self._rr = (tc + 1) % _NPRIO
            return tc
        for tc in self.strict_tcs:
            if queues[tc] and until[tc] <= now:
                self._last_tc = tc
                return tc
        for tc in self._rr_orders[self._rr]:
            if queues[tc] and until[tc] <= now:
                self._rr = (tc + 1) % _NPRIO
                self._last_tc = tc
                return tc
        return None

    def _pick_dwrr(self, now: int) -> int | None:
        """DWRR among the weighted classes (after the strict ones, _sched_pick)."""
        until = self._paused_until_ps
        queues = self.queues
        deficit = self.deficit
        cur = self._dw_cur
        if cur >= 0:
            q = queues[cur]
            if q and until[cur] <= now and deficit[cur] >= q[0].nbytes:
                return self._dw_take(cur, q)
            # The visit is over: head not covered (deficit kept) or paused (kept, too).
            if not q:
                deficit[cur] = 0
            self._dw_cur = -1
            self._dw_next = (cur + 1) % PRIORITIES
        order = self._rr_orders[self._dw_next]
        quantum = self.quantum
        while True:
            eligible = False
            for tc in order:
                q = queues[tc]
                if q and until[tc] <= now:
                    eligible = True
                    d = deficit[tc] + quantum[tc]
                    deficit[tc] = d
                    if d >= q[0].nbytes:
                        self._dw_cur = tc
                        return self._dw_take(tc, q)
            if not eligible:
                return None

    def set_vl_map(self, sl2vl: Sequence[int]) -> None:
        """The VL of each traffic class (IBA SL-to-VL table; ``"vlarb"`` reads it).  Raises
        ValueError if a non-strict class's VL would never be served."""
        vl_of = tuple(sl2vl)
        if self.scheduler == "vlarb":
            vlarb_cover(self.weights, vl_of, self._strict)  # type: ignore[arg-type]
            tcs: list[tuple[int, ...]] = [() for _ in range(MGMT_VL + 1)]
            for tc in range(PRIORITIES):
                if tc not in self._strict:
                    tcs[vl_of[tc]] += (tc,)
            self._va_tcs = tcs
        self._vl_of = vl_of

    def _pick_vlarb(self, now: int) -> int | None:
        """IBA VL arbitration of the weighted classes (after the strict ones)."""
        limit = self._va_limit
        sent = self._va_hi_sent
        high_ok = limit is None or sent == 0 or sent < limit
        if high_ok:
            tc = self._va_arb(0, now)
            if tc is not None:
                return tc
        tc = self._va_arb(1, now)
        if tc is not None:
            self._va_hi_sent = 0
            return tc
        if not high_ok:  # the low table has nothing eligible: the high table goes on
            return self._va_arb(0, now)
        return None

    def _va_arb(self, t: int, now: int) -> int | None:
        """The next packet's class from table ``t`` (0 high, 1 low), its weight charged."""
        entries = self._va_tables[t]
        n = len(entries)
        if not n:
            return None
        queues = self.queues
        until = self._paused_until_ps
        i = self._va_idx[t]
        for k in range(n):
            j = (i + k) % n
            vl, weight = entries[j]
            left = self._va_left[t] if k == 0 and self._va_left[t] > 0 else weight
            group = self._va_tcs[vl]
            m = len(group)
            r = self._va_rr[vl]
            for g in range(m):
                tc = group[(r + g) % m]
                q = queues[tc]
                if q and until[tc] <= now:
                    self._va_rr[vl] = (r + g + 1) % m
                    b = ib_blocks(q[0].nbytes)
                    left -= b
                    if left > 0:
                        self._va_idx[t], self._va_left[t] = j, left
                    else:
                        self._va_idx[t], self._va_left[t] = (j + 1) % n, 0
                    if t == 0:
                        self._va_hi_sent += b * 64
                    return tc
        # nothing eligible in the whole table: the current entry's turn is over
        self._va_idx[t], self._va_left[t] = (i + 1) % n, 0
        return None

    def _dw_take(self, tc: int, q: deque[SimPacket]) -> int:
        """Charge ``tc``'s head frame (about to be sent) to its deficit."""
        if len(q) == 1:  # the queue empties: deficit back to 0, the visit ends
            self.deficit[tc] = 0
            self._dw_cur = -1
            self._dw_next = (tc + 1) % PRIORITIES
        else:
            self.deficit[tc] -= q[0].nbytes
        return tc

    def _start(self) -> None:
        """Start the next frame if one may go (the port must be idle)."""
        self._send_next()

    def _send_next(self) -> None:
        """:meth:`_start`; a C method in the compiled core (port.pxd)."""
        now = self.engine.now_ps
        if self.control:
            pkt = self.control.popleft()
        else:
            tc = self._pick_rr() if self._rr_pick else self._pick()
            if tc is None:
                ib = self._ib_gate
                if ib is not None and self._queued:  # waits for credits: FC packets wake it
                    ib._idle()
                self._sleep_until_unpaused()
                return
            pkt = self.queues[tc].popleft()
            self._queued -= 1
            nbytes = pkt.nbytes
            self.queue_bytes[tc] -= nbytes
            if self.on_dequeue is not None:
                self.on_dequeue(self.index, pkt)
            ib = self._ib_gate
            if ib is not None:
                ib._take(pkt)
            f = self._int.dequeued
            if f is not None:
                self._sample(f, now, tc, pkt, nbytes, self.queue_bytes[tc])
        if self.taps:
            for tap in self.taps:
                tap(now, pkt)
        self.busy = True
        t = self._ser_ps(pkt.nbytes)
        self.busy_ps += t
        self._tx_end_ps = now + t
        self.engine._after(t, self._done_cb, (pkt,))

    def _done(self, pkt: SimPacket) -> None:
        """End of a frame's serialisation: count it, send it down the wire, start the next."""
        self.busy = False
        self.tx_bytes += pkt.nbytes
        self.tx_packets += 1
        peer = self.peer
        ib = self._ib_gate
        if ib is not None and pkt.fc is not None:  # its receiver's VL buffer counts it first
            self.engine._after(self.prop_ps, ib._land_cb, (peer, self.peer_port, pkt))
        elif peer is not None:
            self.engine._after(self.prop_ps, peer.receive, (self.peer_port, pkt))
        if self._queued or self.control:  # else _start would find nothing to send or wait for
            self._send_next()

    def _sleep_until_unpaused(self) -> None:
        """Nothing eligible: wake when the earliest pause on a non-empty queue ends."""
        if not self._queued:
            return
        now = self.engine.now_ps
        at = 0  # the earliest pause end after now of a class with frames (0: none)
        for tc in range(_NPRIO):
            if self.queues[tc]:
                paused_to = self._paused_until_ps[tc]
                if paused_to > now and (not at or paused_to < at):
                    at = paused_to
        if not at:
            return
        wake = self._wake
        if wake is not None and wake.callback is not None and wake.at_ps <= at:
            return  # (callback None: cancelled)
        if wake is not None:
            wake.cancel()
        self._wake = self.engine.schedule(at, self._wakeup)

    def _wakeup(self) -> None:
        self._wake = None
        if not self.busy:
            self._send_next()

    # ------------------------------------------------- link-level flow control
    def add_gate(self, gate: Gate) -> None:
        """Consult ``gate`` (:class:`sim.flowctl.base.Gate`: ``classes``, ``blocked(tc,
        nbytes)``) before starting a data frame: a blocked class is skipped by the scheduler
        exactly like a paused one (its pause timers are masked for the pick), the others go on.
        PFC needs no gate: its sender half is this port's pause timers (:meth:`pause`)."""
        self._gate = gate
        self._ib_gate = gate if isinstance(gate, IbLink) else None
        self._rr_fast = False  # enqueue's cut-through knows pauses, not gates
        self._rr_pick = False

    def _gated_pick(self) -> int | None:
        """:meth:`_sched_pick` with the classes the gate blocks masked as paused."""
        gate = self._gate
        ib = self._ib_gate
        queues = self.queues
        until = self._paused_until_ps
        blocked = None
        for tc in (ib.classes if ib is not None else gate.classes):
            q = queues[tc]
            if q:
                nbytes = q[0].nbytes
                if ib._blocked(tc, nbytes) if ib is not None else gate.blocked(tc, nbytes):
                    if blocked is None:
                        blocked = []
                    blocked.append(tc)
        if blocked is None:
            return self._sched_pick()
        saved = [until[tc] for tc in blocked]
        for tc in blocked:
            until[tc] = _FOREVER_PS
        try:
            return self._sched_pick()
        finally:
            for tc, u in zip(blocked, saved, strict=True):
                until[tc] = u

    def wake(self, tc: int) -> None:
        """A gate reopened class ``tc`` (e.g. credits came back): start a frame if idle."""
        if not self.busy:
            self._send_next()

    # -------------------------------------------------------------------- PFC
    def pause(self, prio: int, quanta: int) -> None:
        """A PFC (or PAUSE, for every priority) frame received on this port."""
        now = self.engine.now_ps
        self.pause_received += 1
        if self.pause_rx_prio is None:
            self.pause_rx_prio = [0] * PRIORITIES
        self.pause_rx_prio[prio] += 1
        if PauseReceived in self._int.types:
            self.tracer.emit(PauseReceived(now, self.node_id, self.index, prio, quanta))
        if self.rate_bps is not self._cached_rate:
            self._rate_changed()
        t = self._pause_ps.get(quanta)
        if t is None:
            t = self._pause_ps[quanta] = quanta_to_ps(quanta, self.rate_bps)
        until = now + t
        if self._pause_start_ps[prio] is not None and self._paused_until_ps[prio] <= now:
            self._close_pause(prio)  # the previous pause had already run out
        if quanta and self._pause_start_ps[prio] is None:
            self._pause_start_ps[prio] = now
        if not quanta and self._pause_start_ps[prio] is not None:
            self._paused_acc_ps[prio] += now - self._pause_start_ps[prio]
            self._pause_start_ps[prio] = None
        self._paused_until_ps[prio] = until
        old = self._expiry[prio]
        if old is not None:
            old.cancel()
        self._expiry[prio] = self.engine.schedule(until, self._expire, prio) if quanta else None
        if not quanta and not self.busy:
            self._send_next()

    def _close_pause(self, prio: int) -> None:
        start = self._pause_start_ps[prio]
        if start is not None:
            self._paused_acc_ps[prio] += self._paused_until_ps[prio] - start
            self._pause_start_ps[prio] = None

    def _expire(self, prio: int) -> None:
        self._expiry[prio] = None
        self._close_pause(prio)
        if PauseExpired in self._int.types:
            self.tracer.emit(PauseExpired(self.engine.now_ps, self.node_id, self.index, prio))
        if not self.busy:
            self._send_next()

    def paused_ps(self, prio: int | None = None) -> int:
        """Time paused so far (one priority, or the sum over priorities)."""
        prios = range(PRIORITIES) if prio is None else (prio,)
        now = self.engine.now_ps
        total = 0
        for p in prios:
            total += self._paused_acc_ps[p]
            start = self._pause_start_ps[p]
            if start is not None:
                total += min(self._paused_until_ps[p], now) - start
        return total


class CreditPort(CreditFlowControl, Port):
    """An egress :class:`Port` under credit-based flow control
    (:class:`sim.flowctl.credit.CreditFlowControl`: its gate and the link's credit counters)."""


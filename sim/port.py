"""Egress port and link: per-priority queues, a scheduler, PFC pause reaction, serialisation
and propagation.

Rules (IEEE 802.1Qbb / 802.3 Annex 31B, as shared/specs/dcqcn_pfc.md summarises them):

* A port starts a frame only when the frame's priority is not paused; a frame already on the
  wire always completes (pause is checked when a transmission *starts*).
* A PFC frame received on this port pauses each enabled priority for ``quanta x 512 bit
  times`` at this port's rate (``wire.pfc.quanta_to_ps``); a new frame replaces the timer
  (refresh extends, quanta 0 resumes at once).  Other priorities keep flowing.
* Control frames (PFC) go first and are never paused (MAC Control is not subject to PFC).
* Scheduling among data queues: strict priority for ``strict_tcs`` (highest first), then
  round robin over the other non-empty, unpaused queues.
* Serialisation counts the wire size (FCS, preamble/SFD, IFG, 64-byte minimum:
  ``sim.units.frame_ser_time_ps``); the frame reaches the peer ``prop_ps`` after its last bit.

Paused time per priority is accounted as the union of pause intervals (a refresh does not
count twice).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable
from typing import Protocol

from wire.pfc import quanta_to_ps

from .engine import Engine, Timer
from .events import Dequeued, Enqueued, PauseExpired, PauseReceived
from .packet import SimPacket
from .trace import NullTracer, Tracer
from .units import frame_ser_time_ps

__all__ = ["Port", "Receiver", "PRIORITIES"]

PRIORITIES = 8


class Receiver(Protocol):
    """A node: something a link delivers frames to."""

    node_id: int

    def receive(self, port: int, pkt: SimPacket) -> None: ...


class Port:
    """One direction of a link: the egress side of ``node``'s port ``index``."""

    def __init__(self, engine: Engine, node_id: int, index: int, rate_bps: int, *,
                 tracer: Tracer | None = None, strict_tcs: Iterable[int] = (7,),
                 on_dequeue: Callable[[int, SimPacket], None] | None = None) -> None:
        if rate_bps <= 0:
            raise ValueError("rate_bps must be positive")
        self.engine = engine
        self.node_id = node_id
        self.index = index
        self.rate_bps = rate_bps
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        self._tracing = not isinstance(self.tracer, NullTracer)
        self.strict_tcs = sorted(set(strict_tcs), reverse=True)
        self._strict = frozenset(self.strict_tcs)
        # Round-robin visiting order of the non-strict queues, for each starting queue.
        self._rr_orders = [tuple(tc for tc in ((s + i) % PRIORITIES for i in range(PRIORITIES))
                                 if tc not in self._strict) for s in range(PRIORITIES)]
        self._queued = 0  # data frames in all queues (fast path of the scheduler)
        self._ser_cache: dict[int, int] = {}
        self.on_dequeue = on_dequeue
        self.peer: Receiver | None = None
        self.peer_port = 0
        self.prop_ps = 0
        self.queues: list[deque[SimPacket]] = [deque() for _ in range(PRIORITIES)]
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
        self.busy_ps = 0

    def connect(self, peer: Receiver, peer_port: int, prop_ps: int) -> None:
        self.peer, self.peer_port, self.prop_ps = peer, peer_port, prop_ps

    # ------------------------------------------------------------------ queues
    def enqueue(self, pkt: SimPacket) -> None:
        tc = pkt.tc
        self.queues[tc].append(pkt)
        self._queued += 1
        qb = self.queue_bytes[tc] + pkt.nbytes
        self.queue_bytes[tc] = qb
        if qb > self.max_queue_bytes[tc]:
            self.max_queue_bytes[tc] = qb
        if self._tracing:
            self.tracer.emit(Enqueued(self.engine.now_ps, self.node_id, self.index, tc, pkt.id,
                                      pkt.flow, pkt.nbytes, qb))
        if not self.busy:
            self._start()

    def send_control(self, pkt: SimPacket) -> None:
        """A MAC Control frame (PFC): ahead of all data, never paused."""
        self.control.append(pkt)
        if not self.busy:
            self._start()

    def paused(self, prio: int) -> bool:
        return self._paused_until_ps[prio] > self.engine.now_ps

    def _pick(self) -> int | None:
        if not self._queued:
            return None
        now = self.engine.now_ps
        until = self._paused_until_ps
        for tc in self.strict_tcs:
            if self.queues[tc] and until[tc] <= now:
                return tc
        queues = self.queues
        for tc in self._rr_orders[self._rr]:
            if queues[tc] and until[tc] <= now:
                self._rr = (tc + 1) % PRIORITIES
                return tc
        return None

    def _start(self) -> None:
        now = self.engine.now_ps
        if self.control:
            pkt = self.control.popleft()
        else:
            tc = self._pick()
            if tc is None:
                self._sleep_until_unpaused()
                return
            pkt = self.queues[tc].popleft()
            self._queued -= 1
            self.queue_bytes[tc] -= pkt.nbytes
            if self.on_dequeue is not None:
                self.on_dequeue(self.index, pkt)
            if self._tracing:
                self.tracer.emit(Dequeued(now, self.node_id, self.index, tc, pkt.id, pkt.flow,
                                          pkt.nbytes, self.queue_bytes[tc]))
        for tap in self.taps:
            tap(now, pkt)
        self.busy = True
        t = self._ser_cache.get(pkt.nbytes)
        if t is None:
            t = self._ser_cache[pkt.nbytes] = frame_ser_time_ps(pkt.nbytes, self.rate_bps)
        self.busy_ps += t
        self.engine.schedule_in(t, self._done, pkt)

    def _done(self, pkt: SimPacket) -> None:
        self.busy = False
        self.tx_bytes += pkt.nbytes
        self.tx_packets += 1
        if self.peer is not None:
            self.engine.schedule_in(self.prop_ps, self.peer.receive, self.peer_port, pkt)
        self._start()

    def _sleep_until_unpaused(self) -> None:
        """Nothing eligible: wake when the earliest pause on a non-empty queue ends."""
        if not self._queued:
            return
        now = self.engine.now_ps
        waits = [self._paused_until_ps[tc] for tc in range(PRIORITIES)
                 if self.queues[tc] and self._paused_until_ps[tc] > now]
        if not waits:
            return
        at = min(waits)
        if self._wake is not None and not self._wake.cancelled and self._wake.at_ps <= at:
            return
        if self._wake is not None:
            self._wake.cancel()
        self._wake = self.engine.schedule(at, self._wakeup)

    def _wakeup(self) -> None:
        self._wake = None
        if not self.busy:
            self._start()

    # -------------------------------------------------------------------- PFC
    def pause(self, prio: int, quanta: int) -> None:
        """A PFC (or PAUSE, for every priority) frame received on this port."""
        now = self.engine.now_ps
        self.pause_received += 1
        self.tracer.emit(PauseReceived(now, self.node_id, self.index, prio, quanta))
        until = now + quanta_to_ps(quanta, self.rate_bps)
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
            self._start()

    def _close_pause(self, prio: int) -> None:
        start = self._pause_start_ps[prio]
        if start is not None:
            self._paused_acc_ps[prio] += self._paused_until_ps[prio] - start
            self._pause_start_ps[prio] = None

    def _expire(self, prio: int) -> None:
        self._expiry[prio] = None
        self._close_pause(prio)
        self.tracer.emit(PauseExpired(self.engine.now_ps, self.node_id, self.index, prio))
        if not self.busy:
            self._start()

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

"""A shared-buffer switch: ingress admission by the MMU, static forwarding, PFC generation and
RED-style ECN marking on the egress queue.

* Ingress: every data frame is admitted or dropped by :class:`sim.mmu.Mmu` per (ingress port,
  priority group = the frame's traffic class); a drop is a ``Dropped`` event with the MMU's
  reason.  XOFF/XON transitions the MMU reports become real 802.1Qbb frames (``wire.build``)
  sent out of the ingress port, ahead of data.  While a (port, PG) stays XOFF the PAUSE is
  refreshed every half pause time, so the upstream never resumes early; XON sends quanta 0.
* Forwarding: ``routes[destination node] -> egress port`` (static tables).
* ECN (DCQCN CP, shared/specs/dcqcn_pfc.md 1.2): on dequeue by default (``mark_at``), with the
  instantaneous egress queue bytes left behind: p = 0 up to ``kmin_bytes``, linear to ``pmax``
  at ``kmax_bytes``, 1 above; only ECN-capable frames are marked; one draw of the run's seeded
  RNG per candidate frame.
* The MMU releases a frame's bytes when it starts leaving the switch (dequeue).
"""

from __future__ import annotations

from dataclasses import dataclass

from wire import build
from wire.ethernet import EtherType, payload_start
from wire.pfc import quanta_to_ps

from .addresses import node_mac
from .engine import Engine, Timer
from .events import CEMarked, Dropped, PauseSent
from .mmu import XOFF, Mmu
from .packet import SimPacket
from .port import PRIORITIES, Port
from .trace import NullTracer, Tracer

__all__ = ["EcnConfig", "Switch", "pfc_packet", "node_mac"]

#: PAUSE frame on the wire without FCS (IEEE 802.3 Annex 31B: padded to the minimum frame).
PFC_FRAME_BYTES = 60


@dataclass(frozen=True, slots=True)
class EcnConfig:
    """RED-style marking (the DCQCN CP curve).  Paper values at 40 Gb/s: Kmin 5 KB, Kmax 200
    KB, Pmax 1 % (DCQCN, SIGCOMM 2015, per shared/specs/dcqcn_pfc.md 1.2)."""

    kmin_bytes: int
    kmax_bytes: int
    pmax: float
    mark_at: str = "dequeue"

    def __post_init__(self) -> None:
        if not 0 <= self.kmin_bytes <= self.kmax_bytes:
            raise ValueError("need 0 <= kmin_bytes <= kmax_bytes")
        if not 0.0 <= self.pmax <= 1.0:
            raise ValueError("pmax must be in [0, 1]")
        if self.mark_at not in ("dequeue", "enqueue"):
            raise ValueError('mark_at must be "dequeue" or "enqueue"')

    def probability(self, queue_bytes: int) -> float:
        if queue_bytes <= self.kmin_bytes:
            return 0.0
        if queue_bytes > self.kmax_bytes:
            return 1.0
        span = self.kmax_bytes - self.kmin_bytes
        return self.pmax * (queue_bytes - self.kmin_bytes) / span if span else 1.0


def pfc_packet(pkt_id: int, now_ps: int, node_id: int, port: int, prio: int,
               quanta: int) -> SimPacket:
    """A real 802.1Qbb frame pausing (or, with quanta 0, resuming) one priority."""
    q = [0] * PRIORITIES
    q[prio] = quanta
    frame = build({"eth": {"src": node_mac(node_id, port)},
                   "pfc": {"class_enable": 1 << prio, "quanta": q}})
    return SimPacket(pkt_id, now_ps, len(frame), tc=7, src=node_id, frame=frame)


class Switch:
    """``ports`` egress ports at ``rate_bps`` each (set per port by :meth:`port`)."""

    def __init__(self, engine: Engine, node_id: int, mmu: Mmu, *, routes: dict[int, int],
                 ecn: EcnConfig | None = None, tracer: Tracer | None = None,
                 xoff_quanta: int = 0xFFFF, ids: object = None) -> None:
        self.engine = engine
        self.node_id = node_id
        self.mmu = mmu
        self.routes = routes
        self.ecn = ecn
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        self.xoff_quanta = xoff_quanta
        self.ports: dict[int, Port] = {}
        self._ingress: dict[int, tuple[int, int, str]] = {}  # packet id -> (port, pg, where)
        self._refresh: dict[tuple[int, int], Timer] = {}
        self._ids = ids if ids is not None else _Ids()
        self.drops = 0
        self.ce_marked = 0
        self.pause_sent: dict[int, int] = {}

    def add_port(self, index: int, rate_bps: int) -> Port:
        p = Port(self.engine, self.node_id, index, rate_bps, tracer=self.tracer,
                 on_dequeue=self._on_dequeue)
        self.ports[index] = p
        return p

    # ---------------------------------------------------------------- receive
    def receive(self, port: int, pkt: SimPacket) -> None:
        if pkt.frame is not None and is_mac_control(pkt.frame):
            _apply_pause(self.ports[port], pkt)
            return
        pg = pkt.tc
        adm = self.mmu.admit(port, pg, pkt.nbytes)
        if not adm.admitted:
            self.drops += 1
            self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pg, pkt.id,
                                     pkt.flow, pkt.nbytes, adm.reason or "dropped"))
            self._pfc(adm.pause_changes)
            return
        self._pfc(adm.pause_changes)
        out = self.routes.get(pkt.dst)
        if out is None:
            self.mmu.release(port, pg, pkt.nbytes, adm.where)
            self.drops += 1
            self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pg, pkt.id,
                                     pkt.flow, pkt.nbytes, "no_route"))
            return
        self._ingress[pkt.id] = (port, pg, adm.where)
        pkt.hops += 1
        self.mmu.egress_enqueue(out, pkt.tc, pkt.nbytes)
        if self.ecn is not None and self.ecn.mark_at == "enqueue":
            self._maybe_mark(out, pkt, self.mmu.egress_bytes(out, pkt.tc))
        self.ports[out].enqueue(pkt)

    def _on_dequeue(self, port: int, pkt: SimPacket) -> None:
        left = self.mmu.egress_dequeue(port, pkt.tc, pkt.nbytes)
        if self.ecn is not None and self.ecn.mark_at == "dequeue":
            self._maybe_mark(port, pkt, left)
        ing = self._ingress.pop(pkt.id, None)
        if ing is not None:
            self._pfc(self.mmu.release(ing[0], ing[1], pkt.nbytes, ing[2]))

    def _maybe_mark(self, port: int, pkt: SimPacket, queue_bytes: int) -> None:
        assert self.ecn is not None
        if not pkt.ecn_capable or pkt.ecn == 3:
            return
        p = self.ecn.probability(queue_bytes)
        if p and (p >= 1.0 or self.engine.rng.random() < p):
            pkt.mark_ce()
            self.ce_marked += 1
            self.tracer.emit(CEMarked(self.engine.now_ps, self.node_id, port, pkt.tc, pkt.id,
                                      pkt.flow))

    # -------------------------------------------------------------------- PFC
    def _pfc(self, changes) -> None:
        for port, pg, action in changes:
            key = (port, pg)
            old = self._refresh.pop(key, None)
            if old is not None:
                old.cancel()
            if action == XOFF:
                self._send_pause(port, pg, self.xoff_quanta)
            else:
                self._send_pause(port, pg, 0)

    def _send_pause(self, port: int, pg: int, quanta: int) -> None:
        now = self.engine.now_ps
        self.ports[port].send_control(pfc_packet(self._ids(), now, self.node_id, port, pg, quanta))
        self.pause_sent[port] = self.pause_sent.get(port, 0) + 1
        self.tracer.emit(PauseSent(now, self.node_id, port, pg, quanta))
        if quanta:
            half = quanta_to_ps(quanta, self.ports[port].rate_bps) // 2
            self._refresh[(port, pg)] = self.engine.schedule_in(half, self._refresh_pause,
                                                                port, pg)

    def _refresh_pause(self, port: int, pg: int) -> None:
        self._refresh.pop((port, pg), None)
        if self.mmu.paused(port, pg):
            self._send_pause(port, pg, self.xoff_quanta)


def is_mac_control(frame: bytes | bytearray | None) -> bool:
    """True for a MAC Control (PFC/PAUSE) frame, VLAN-tagged or not."""
    if frame is None:
        return False
    loc = payload_start(frame)
    return loc is not None and loc[1] == EtherType.MAC_CONTROL


def _apply_pause(port: Port, pkt: SimPacket) -> None:
    """Apply a received PFC or 802.3x PAUSE frame to the egress port it arrived on."""
    from wire import dissect

    d = dissect(bytes(pkt.frame or b""))
    pfc = d.get("pfc")
    if pfc is not None:
        for prio in range(PRIORITIES):
            if pfc["class_enable"] >> prio & 1:  # times of disabled classes are ignored
                port.pause(prio, pfc["quanta"][prio])
        return
    pause = d.get("pause")
    if pause is not None:
        for prio in range(PRIORITIES):
            port.pause(prio, pause["quanta"])


class _Ids:
    """Packet id source shared by the nodes of one fabric (deterministic)."""

    def __init__(self) -> None:
        self.next = 1 << 40  # control frames; data packets count from 0

    def __call__(self) -> int:
        self.next += 1
        return self.next

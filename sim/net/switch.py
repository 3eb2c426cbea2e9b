"""A shared-buffer switch: ingress admission by the MMU, static forwarding, PFC generation and
RED-style ECN marking on the egress queue.

* Ingress: every data frame is admitted or dropped by :class:`sim.net.mmu.Mmu` per (ingress port,
  priority group = the frame's traffic class); a drop is a ``Dropped`` event with the MMU's
  reason.  XOFF/XON transitions the MMU reports become real 802.1Qbb frames (``wire.build``)
  sent out of the ingress port, ahead of data.  While a (port, PG) stays XOFF the PAUSE is
  refreshed every half pause time, so the upstream never resumes early; XON sends quanta 0.
* Forwarding: ``routes[destination node] -> egress port`` (static tables).  A route may also
  be a tuple (or list) of ports, an ECMP group: the egress port is chosen per flow by
  :func:`ecmp_hash` of ``(pkt.src, pkt.dst, pkt.flow)`` salted with this switch's node id and
  ``ecmp_seed`` (default: the engine's seed), so every packet of a flow takes the same port
  (no reordering) and different switches hash independently (no polarisation).  Route values
  are type-checked at construction; the ports they name must exist when a route is first used
  (or when :meth:`Switch.check_routes` is called), else ValueError.
* Routing modes (``routing``, :data:`ROUTING_MODES`; docs/explanation/infiniband.md "Routing"):
  ``"ecmp"`` (default) hashes a flow onto one member of a group as above; ``"static"`` takes
  only single-port routes (a linear forwarding table, :func:`sim.fabric.lft.min_hop_lft`), a
  group is a ValueError; ``"adaptive"`` picks a group member **per packet**: the member with the
  fewest bytes queued for the packet's class (``Port.queue_bytes[tc]``); ties keep the flow's
  ECMP-hash member, else the first least-loaded member in group order.  NVIDIA's InfiniBand
  switches select "the output port based on the port's load" among an AR group of "all ports
  with minimal hops" (NVIDIA, InfiniBand Cluster Bring-up Procedure, "Adaptive Routing",
  docs.nvidia.com/networking/display/ibclusterbringupprocedure/adaptive+routing); that the load
  is the class's queued bytes, and the tie rule, are our assumptions [A].
* Egress scheduling: every port gets the switch's ``scheduler``, ``weights`` and
  ``quantum_bytes`` (:class:`sim.net.port.Port`: ``"rr"`` or ``"dwrr"``).
* ECN (DCQCN CP: Zhu et al., SIGCOMM 2015, Sec. 3; on dequeue as HPCC's ``switch-node.cc``
  ``SwitchNotifyDequeue``, github.com/alibaba-edu/High-Precision-Congestion-Control): on dequeue by
  default (``mark_at``), with the instantaneous egress queue bytes left behind: p = 0 up to
  ``kmin_bytes``, linear to ``pmax`` at ``kmax_bytes``, 1 above; only ECN-capable frames are marked;
  one draw of the run's seeded RNG per candidate frame.
* The MMU releases a frame's bytes when it starts leaving the switch (dequeue).
* TTL (``max_hops``, default None = off): a data frame that has already crossed ``max_hops``
  switches (``SimPacket.hops``) is dropped on arrival, reason ``"ttl_expired"``, before MMU
  admission (the hop budget of a routing loop, Hu et al., HotNets 2016; [A] toy model of ours,
  docs/reference/builtin-scenarios.md section ``pfc_deadlock_loop``).
* PFC watchdog (``watchdog``, a :class:`sim.health.watchdog.PfcWatchdog`, attached with
  :func:`sim.health.watchdog.attach_watchdogs`): while it mitigates (port, priority) with action
  ``drop``, frames routed to that queue are dropped (reason ``"pfc_watchdog"``, MMU bytes
  released); with action ``forward``, PAUSE frames for that priority received on that port
  are ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sim.addresses import node_mac
from sim.engine import Engine
from sim.events import CEMarked, Dropped
from sim.flowctl.credit import CbfcConfig, cbfc_free
from sim.flowctl.ib import BLOCK_BYTES
from sim.flowctl.pfc import PfcResponder, apply_pause, is_mac_control, pfc_packet
from sim.net.mmu import Mmu
from sim.net.port import QUANTUM_BYTES, CreditPort, Port, check_scheduler
from sim.net.routes import RouteRule
from sim.packet import CE, NOT_ECT, PacketIds, SimPacket
from sim.trace import (
    Interest,
    NullTracer,
    QueueSampler,
    SampleBuffer,
    Tracer,
    ingress_sampler,
    interest,
)

__all__ = ["EcnConfig", "ROUTING_MODES", "Route", "Switch", "ecmp_hash", "ecmp_salt",
           "pfc_packet", "node_mac"]

_M64 = (1 << 64) - 1


def _mix64(x: int) -> int:
    """splitmix64's finaliser (Steele, Lea & Flood, OOPSLA 2014; the constants of Java's
    SplittableRandom): a bijective 64-bit mix with good avalanche."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def ecmp_salt(node_id: int, seed: int) -> int:
    """The per-switch hash salt: mixes the run seed and the switch's node id."""
    return _mix64(_mix64(seed & _M64) ^ (node_id & _M64))


def ecmp_hash(src: int, dst: int, flow: int, salt: int) -> int:
    """64-bit hash of a flow's identity, chained splitmix64 mixes (deterministic across
    processes, unlike ``hash()`` of str); the ECMP member is ``hash % len(group)``."""
    h = _mix64(salt ^ (src & _M64))
    h = _mix64(h ^ (dst & _M64))
    return _mix64(h ^ (flow & _M64))

#: PAUSE frame on the wire without FCS (IEEE 802.3 Annex 31B: padded to the minimum frame).
PFC_FRAME_BYTES = 60


#: OpenSM's packet_size is in flow-control credits: one is an IBA credit block
#: (:data:`sim.flowctl.ib.BLOCK_BYTES`, 64 bytes, IBA 7.9.1).
IB_CREDIT_BYTES = BLOCK_BYTES
#: [A] ours: one step of the 4-bit IB marking threshold (see :func:`ib_threshold_bytes`).
IB_THRESHOLD_STEP_BYTES = 4096


def ib_threshold_bytes(threshold: int, step_bytes: int = IB_THRESHOLD_STEP_BYTES) -> int | None:
    """The egress queue depth at which an IB switch port starts marking FECN, for OpenSM's
    ``cc_sw_cong_setting_threshold`` (4 bits: "0x0 - none, 0x1 - loose, ..., 0xF -
    aggressive", opensm/osm_subnet.c).  IBA leaves the mapping to the switch; ours [A] is
    linear: ``(16 - threshold) * step_bytes`` (0xF: 4 KiB, 0x1: 60 KiB by default), None for
    0 (no marking)."""
    if isinstance(threshold, bool) or not isinstance(threshold, int) \
            or not 0 <= threshold <= 15:
        raise ValueError(f"threshold must be 0..15, got {threshold!r}")
    return None if threshold == 0 else (16 - threshold) * step_bytes


@dataclass(frozen=True, slots=True)
class EcnConfig:
    """Congestion marking of the switch's egress queues; the mark is the packet's CE
    codepoint, which on InfiniBand is the BTH FECN bit (wire.bth ``fecn``).

    ``mode="red"`` (default): RED-style marking (the DCQCN CP curve).  Paper values at 40
    Gb/s: Kmin 5 KB, Kmax 200 KB, Pmax 1 % (DCQCN, Zhu et al., SIGCOMM 2015,
    doi:10.1145/2785956.2787484; the same values in the parameter block of
    github.com/lzhtan/Fluid-Model-for-DCQCN-ECN-PFC).

    ``mode="ib"``: the congestion-control agent of an IB switch port (IBA annex A10,
    SwitchCongestionSetting; OpenSM ``cc_sw_cong_setting_*``): a packet is a candidate when
    the egress queue of its class (= its VL with the identity SL2VL map) holds at least
    ``threshold_bytes`` (see :func:`ib_threshold_bytes`) and the packet has at least
    ``packet_size_bytes``; of the candidates of a (port, class), one is marked, then
    ``marking_rate`` are skipped, and so on (OpenSM: "Marking Rate - mean number of packets
    between markings"; deterministic here [A], no RNG draw).  Not modelled: victim_mask
    (every port marks, as with all mask bits set), credit starvation.
    """

    kmin_bytes: int = 0
    kmax_bytes: int = 0
    pmax: float = 0.0
    mark_at: str = "dequeue"
    mode: str = "red"
    threshold_bytes: int = 0
    marking_rate: int = 0
    packet_size_bytes: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.kmin_bytes <= self.kmax_bytes:
            raise ValueError("need 0 <= kmin_bytes <= kmax_bytes")
        if not 0.0 <= self.pmax <= 1.0:
            raise ValueError("pmax must be in [0, 1]")
        if self.mark_at not in ("dequeue", "enqueue"):
            raise ValueError('mark_at must be "dequeue" or "enqueue"')
        if self.mode not in ("red", "ib"):
            raise ValueError('mode must be "red" or "ib"')
        for name in ("threshold_bytes", "marking_rate", "packet_size_bytes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")

    def probability(self, queue_bytes: int) -> float:
        """The RED marking probability at ``queue_bytes`` (``mode="red"``)."""
        return _red_probability(queue_bytes, self.kmin_bytes, self.kmax_bytes, self.pmax)


def _red_probability(queue_bytes: int, kmin_bytes: int, kmax_bytes: int, pmax: float) -> float:
    """0 up to ``kmin_bytes``, rising linearly to ``pmax`` at ``kmax_bytes``, 1 above."""
    if queue_bytes <= kmin_bytes:
        return 0.0
    if queue_bytes > kmax_bytes:
        return 1.0
    span = kmax_bytes - kmin_bytes
    return pmax * (queue_bytes - kmin_bytes) / span if span else 1.0


Route = int | tuple[int, ...] | list[int]

#: How a switch uses a route that is a group of ports (module docstring).
ROUTING_MODES = ("ecmp", "static", "adaptive")


class Switch:
    """A switch whose egress ports are added by :meth:`add_port` (``Fabric.connect`` does).

    ``routes``: destination node -> egress port, or -> a tuple/list of ports (ECMP group);
    read (and type-checked) at construction: later changes to the dict are not seen.  A
    :class:`sim.net.routes.RouteRule` (a table by formula) is asked per destination on
    first use, its values type-checked at construction.
    ``ecmp_seed``: salt of the ECMP hash (None: the engine's seed).  ``scheduler``,
    ``weights``, ``quantum_bytes``: egress scheduling of every port (:class:`sim.net.port.Port`).
    """

    def __init__(self, engine: Engine, node_id: int, mmu: Mmu, *, routes: dict[int, Route],
                 ecn: EcnConfig | None = None, tracer: Tracer | None = None,
                 xoff_quanta: int = 0xFFFF, ids: object = None, ecmp_seed: int | None = None,
                 scheduler: str = "rr", weights: Sequence[int] | None = None,
                 quantum_bytes: int = QUANTUM_BYTES, routing: str = "ecmp") -> None:
        self.engine = engine
        self.node_id = node_id
        self.mmu = mmu
        #: Destination -> egress Port, resolved (and checked) on first use.
        self._fwd: dict[int, Port] = {}
        #: ECMP decisions: (src, dst, flow) -> chosen egress port index.
        self.ecmp_choices: dict[tuple[int, int, int], int] = {}
        #: Adaptive routing: packets sent on another member than their flow's hash member.
        self.adaptive_moves = 0
        self.set_routes(routes, routing)
        check_scheduler(scheduler, weights, quantum_bytes)
        self.scheduler = scheduler
        self.weights = None if weights is None else tuple(weights)
        self.quantum_bytes = quantum_bytes
        self.ecmp_seed = engine.seed if ecmp_seed is None else ecmp_seed
        self._salt = ecmp_salt(node_id, self.ecmp_seed)
        self.ecn = ecn
        self._ib_marking = ecn is not None and ecn.mode == "ib"
        #: The RED curve of ``ecn`` (read per frame; ``ecn`` is not replaced after this).
        self._kmin, self._kmax, self._pmax = ((ecn.kmin_bytes, ecn.kmax_bytes, ecn.pmax)
                                              if ecn is not None else (0, 0, 0.0))
        #: IB marking: (port, class) -> candidates still to skip before the next mark.
        self._ib_skip: dict[tuple[int, int], int] = {}
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        #: What the tracer reads (sim.trace.Interest): an event is built only when it is read.
        self._int: Interest = interest(self.tracer)
        self.xoff_quanta = xoff_quanta
        self.ports: dict[int, Port] = {}
        self._ingress: dict[int, tuple[int, int, str]] = {}  # packet id -> (port, pg, where)
        #: Packet ids of the frames this switch makes (PFC), shared with its fabric.
        self.ids = ids if ids is not None else PacketIds()
        #: The receiver half of PFC: XOFF/XON frames from the MMU's transitions.
        self.pfc = PfcResponder(self)
        self.drops = 0
        #: frames dropped per port where they came in (buffer admission, TTL, no route),
        #: and per egress port the PFC watchdog's
        self.drops_by_port: dict[int, int] = {}
        self.tx_drops_by_port: dict[int, int] = {}
        self.ce_marked = 0
        self.pause_sent: dict[int, int] = {}
        #: Hop budget (TTL): drop data frames that already crossed this many switches.
        self.max_hops: int | None = None
        self._ingress_tap: Callable[..., None] | None = None
        self._isampler: QueueSampler | None = None
        #: The sampler's buffer of each ingress (port x PGs + PG), made on first use.
        self._ibufs: list[SampleBuffer | None] | None = None
        #: The PFC watchdog (sim.health.watchdog), if any, and its mitigated queues.
        self.watchdog = None
        self._wd_drop: set[tuple[int, int]] = set()
        self._wd_ignore: set[tuple[int, int]] = set()

    def add_port(self, index: int, rate_bps: int, *, scheduler: str | None = None,
                 weights: Sequence[int] | None = None,
                 quantum_bytes: int | None = None, cbfc: CbfcConfig | None = None) -> Port:
        """A new egress port; scheduler arguments default to the switch's.  ``cbfc``: the
        link is under credit-based flow control (a :class:`CreditPort`)."""
        kw = {} if cbfc is None else {"cbfc": cbfc}
        p = (Port if cbfc is None else CreditPort)(
            self.engine, self.node_id, index, rate_bps, tracer=self.tracer,
            on_dequeue=self._on_dequeue,
            scheduler=self.scheduler if scheduler is None else scheduler,
            weights=self.weights if weights is None else weights,
            quantum_bytes=self.quantum_bytes if quantum_bytes is None else quantum_bytes, **kw)
        self.ports[index] = p
        self._fwd.clear()
        return p

    # ---------------------------------------------------------------- routing
    def set_routes(self, routes: dict[int, Route], routing: str | None = None) -> None:
        """Replace the routing table (type-checked; ports checked on first use) and, if
        given, the routing mode (:data:`ROUTING_MODES`); earlier decisions are forgotten."""
        routing = getattr(self, "routing", "ecmp") if routing is None else routing
        if routing not in ROUTING_MODES:
            raise ValueError(f"switch {self.node_id}: routing must be one of "
                             f"{list(ROUTING_MODES)}, got {routing!r}")
        single: dict[int, int] = {}
        groups: dict[int, tuple[int, ...]] = {}
        rule = routes if isinstance(routes, RouteRule) else None
        # a rule's values are checked once (each destination's is one of them) and its
        # answers kept as they are asked for (_resolve)
        for dst, r in (((f"any ({v!r})", v) for v in rule.outs) if rule is not None
                       else routes.items()):
            if isinstance(r, int) and not isinstance(r, bool):
                if rule is None:
                    single[dst] = r
            elif (isinstance(r, (tuple, list)) and r
                  and all(isinstance(p, int) and not isinstance(p, bool) for p in r)):
                if routing == "static" and len(r) > 1:
                    raise ValueError(f"switch {self.node_id}: routing 'static' takes one port "
                                     f"per destination; route to {dst} is {r!r}")
                if rule is None:
                    groups[dst] = tuple(r)
            else:
                raise ValueError(f"switch {self.node_id}: route to {dst} must be a port (int) "
                                 f"or a non-empty tuple/list of ports, got {r!r}")
        self.routes = routes
        self._rule = rule
        self.routing = routing
        self._adaptive = routing == "adaptive"
        self._single, self._groups = single, groups
        self._fwd.clear()
        self.ecmp_choices.clear()

    def _port_for(self, dst: int, port: int) -> Port:
        p = self.ports.get(port)
        if p is None:
            raise ValueError(f"switch {self.node_id}: route to {dst} uses port {port}, which "
                             f"this switch does not have (ports: {sorted(self.ports)})")
        return p

    def check_routes(self) -> None:
        """Raise ValueError if any route names a port this switch does not have."""
        for dst, out in self._single.items():
            self._port_for(dst, out)
        for dst, group in self._groups.items():
            for out in group:
                self._port_for(dst, out)
        if self._rule is not None:
            for r in self._rule.outs:
                for out in (r if isinstance(r, tuple | list) else (r,)):
                    self._port_for("any", out)

    def _resolve(self, pkt: SimPacket) -> Port | None:
        """Slow path of forwarding: a first use of a single-port route, or an ECMP group."""
        dst = pkt.dst
        group = self._groups.get(dst)
        if group is None:
            out = self._single.get(dst)
            if out is None:
                rule = self._rule
                r = None if rule is None else rule.get(dst)
                if r is None:
                    return None
                if isinstance(r, int):
                    out = self._single[dst] = r
                else:
                    group = self._groups[dst] = tuple(r)
        if group is None:
            p = self._fwd[dst] = self._port_for(dst, out)
            return p
        key = (pkt.src, dst, pkt.flow)
        out = self.ecmp_choices.get(key)
        if out is None:
            out = group[ecmp_hash(pkt.src, dst, pkt.flow, self._salt) % len(group)]
            for o in (group if self._adaptive else (out,)):
                self._port_for(dst, o)
            self.ecmp_choices[key] = out
        best = self.ports[out]
        if self._adaptive:  # per packet: the member with the least queued for this class
            tc = pkt.tc
            least = best.queue_bytes[tc]
            if least:
                for o in group:
                    p = self.ports[o]
                    q = p.queue_bytes[tc]
                    if q < least:
                        best, least = p, q
                        if not q:
                            break
                if best.index != out:
                    self.adaptive_moves += 1
        return best

    # ---------------------------------------------------------------- receive
    def receive(self, port: int, pkt: SimPacket) -> None:
        if pkt.frame is not None and is_mac_control(pkt.frame):
            apply_pause(self.ports[port], pkt, self._wd_ignore)
            return
        pg = pkt.tc
        if self.max_hops is not None and pkt.hops >= self.max_hops:
            self.drops += 1
            self.drops_by_port[port] = self.drops_by_port.get(port, 0) + 1
            if Dropped in self._int.types:
                self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pg, pkt.id,
                                         pkt.flow, pkt.nbytes, "ttl_expired"))
            if pkt.fc is not None:
                cbfc_free(pkt)  # credits of a dropped frame go back at once
            return
        adm = self.mmu._admit(port, pg, pkt.nbytes)
        if not adm.admitted:
            self.drops += 1
            self.drops_by_port[port] = self.drops_by_port.get(port, 0) + 1
            if Dropped in self._int.types:
                self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pg, pkt.id,
                                         pkt.flow, pkt.nbytes, adm.reason or "dropped"))
            self._pfc(adm.pause_changes)
            if pkt.fc is not None:
                cbfc_free(pkt)
            return
        if adm.pause_changes:
            self._pfc(adm.pause_changes)
        if self._ingress_tap is not None:
            self._occupancy(port, pg)
        egress = self._fwd.get(pkt.dst)
        if egress is None:
            egress = self._resolve(pkt)
            if egress is None:
                self._pfc(self.mmu.release(port, pg, pkt.nbytes, adm.where))
                self._occupancy(port, pg)
                self.drops += 1
                self.drops_by_port[port] = self.drops_by_port.get(port, 0) + 1
                if Dropped in self._int.types:
                    self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pg, pkt.id,
                                             pkt.flow, pkt.nbytes, "no_route"))
                if pkt.fc is not None:
                    cbfc_free(pkt)
                return
        out = egress.index
        if self._wd_drop and (out, pkt.tc) in self._wd_drop:
            self._pfc(self.mmu.release(port, pg, pkt.nbytes, adm.where))
            self._occupancy(port, pg)
            self._wd_dropped(out, pkt)
            if pkt.fc is not None:
                cbfc_free(pkt)
            return
        self._ingress[pkt.id] = (port, pg, adm.where)
        pkt.hops += 1
        held = self.mmu._egress_add(self.mmu._queue_at(out, pkt.tc), pkt.nbytes)
        if self.ecn is not None and self.ecn.mark_at == "enqueue":
            self._mark(out, pkt, held)
        egress._enq(pkt)

    def _on_dequeue(self, port: int, pkt: SimPacket) -> None:
        if pkt.fc is not None:
            cbfc_free(pkt)  # leaves the buffer: the ingress link's credits go back upstream
        left = self.mmu._egress_sub(self.mmu._queue_at(port, pkt.tc), pkt.nbytes)
        if self.ecn is not None and self.ecn.mark_at == "dequeue":
            self._mark(port, pkt, left)
        ing = self._ingress.pop(pkt.id, None)
        if ing is not None:
            changes = self.mmu._release(ing[0], ing[1], pkt.nbytes)
            if changes:
                self._pfc(changes)
            if self._ingress_tap is not None:
                self._occupancy(ing[0], ing[1])

    @property
    def ingress_tap(self) -> Callable[..., None] | None:
        """``tap(t_ps, node, port, pg, ingress_bytes)`` after every change of an ingress
        (port, PG) counter (results' ingress occupancy series); None: no cost.  When it is a
        :class:`sim.trace.QueueSampler`'s own ``ingress_sample``, the switch adds the samples
        to that sampler's buffers itself (C calls)."""
        return self._ingress_tap

    @ingress_tap.setter
    def ingress_tap(self, tap: Callable[..., None] | None) -> None:
        self._ingress_tap = tap
        self._isampler = ingress_sampler(tap)
        self._ibufs = None

    def _occupancy(self, port: int, pg: int) -> None:
        """Report the bytes held for ingress (port, PG) to ``ingress_tap`` (if set)."""
        tap = self._ingress_tap
        if tap is None:
            return
        held = self.mmu._held(port, pg)
        if self._isampler is not None:
            npgs = self.mmu._npgs
            if self._ibufs is None:
                self._ibufs = [None] * (self.mmu._nports * npgs)
            i = port * npgs + pg
            b = self._ibufs[i]
            if b is None:
                b = self._ibufs[i] = self._isampler._ingress_buffer(self.node_id, port, pg)
            b.add_changed(self.engine.now_ps, held)
        else:
            tap(self.engine.now_ps, self.node_id, port, pg, held)

    def _maybe_mark(self, port: int, pkt: SimPacket, queue_bytes: int) -> None:
        """ECN-mark ``pkt`` leaving (or joining) egress ``port`` whose queue holds
        ``queue_bytes``, as ``ecn`` says."""
        self._mark(port, pkt, queue_bytes)

    def _mark(self, port: int, pkt: SimPacket, queue_bytes: int) -> None:
        """:meth:`_maybe_mark`; a C method in the compiled core (switch.pxd)."""
        assert self.ecn is not None
        ecn = pkt.ecn
        if ecn == NOT_ECT or ecn == CE:  # not ECN-capable (pkt.ecn_capable), or marked
            return
        if self._ib_marking:
            cfg = self.ecn
            if queue_bytes < cfg.threshold_bytes or pkt.nbytes < cfg.packet_size_bytes:
                return
            key = (port, pkt.tc)
            skip = self._ib_skip.get(key, 0)
            if skip:
                self._ib_skip[key] = skip - 1
                return
            self._ib_skip[key] = cfg.marking_rate
        else:
            p = _red_probability(queue_bytes, self._kmin, self._kmax, self._pmax)
            if not p or (p < 1.0 and self.engine.rng.random() >= p):
                return
        pkt.mark_ce()
        self.ce_marked += 1
        if CEMarked in self._int.types:
            hooks = self._int.hooks
            if hooks is not None:  # the runner's recorder: the fields, no event object
                hooks._ce_marked(self.engine.now_ps, self.node_id, port, pkt.tc, pkt.id,
                                 pkt.flow)
            else:
                self.tracer.emit(CEMarked(self.engine.now_ps, self.node_id, port, pkt.tc,
                                          pkt.id, pkt.flow))

    # -------------------------------------------------------------- watchdog
    def _wd_dropped(self, out: int, pkt: SimPacket) -> None:
        self.drops += 1
        self.tx_drops_by_port[out] = self.tx_drops_by_port.get(out, 0) + 1
        if Dropped in self._int.types:
            self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, out, pkt.tc, pkt.id,
                                     pkt.flow, pkt.nbytes, "pfc_watchdog"))
        if self.watchdog is not None:
            self.watchdog.note_drop(out, pkt.tc, pkt.nbytes)

    def _wd_flush(self, out: int, prio: int) -> int:
        """Drop every frame queued at egress (out, prio), releasing its MMU bytes (the
        watchdog's drop action).  Returns the number of frames dropped."""
        pkts = self.ports[out].flush(prio)
        left = sum(pkt.nbytes for pkt in pkts)
        for pkt in pkts:
            left -= pkt.nbytes
            f = self._int.dequeued
            if f is not None:  # keeps depth series right
                f(self.engine.now_ps, self.node_id, out, prio, pkt.id, pkt.flow, pkt.nbytes, left)
            self.mmu.egress_dequeue(out, pkt.tc, pkt.nbytes)
            ing = self._ingress.pop(pkt.id, None)
            if ing is not None:
                self._pfc(self.mmu.release(ing[0], ing[1], pkt.nbytes, ing[2]))
                self._occupancy(ing[0], ing[1])
            self._wd_dropped(out, pkt)
        return len(pkts)

    # -------------------------------------------------------------------- PFC
    def _pfc(self, changes) -> None:
        self.pfc.changes(changes)


# Compiled (switch.pxd), a cpdef method's Python signature has lost its return annotation: put
# back the one written above (interpreted, it is there already and this does nothing).
vars(Switch)["receive"].__annotations__.setdefault("return", "None")

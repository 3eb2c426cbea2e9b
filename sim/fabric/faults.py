"""Faults over time on a built :class:`sim.fabric.core.Fabric` and the switches' reactions
(docs/explanation/faults.md).

A :class:`Fault` names a ``kind`` (:data:`KINDS`), a target (``node`` and, for a link, ``port``:
one end of the link; the other end is found from the port's peer) and a time (``at_ps``, and
``until_ps`` for a fault that ends; ``None``: it lasts to the end of the run) or, for ``"flap"``,
a random process (exponential times between failures ``mtbf_ps`` and to repair ``mttr_ps``).
:func:`schedule_faults` installs the engine events.  Nothing changes on a fabric without faults:
the only hooks are on the faulted links (their ports' ``peer`` is a :class:`_FaultyWire`, and a
down port's ``enqueue`` is shadowed by a dropping one), so the fault-free hot path is untouched.

* ``link_down`` (``at_ps``..``until_ps``): both directions.  Frames queued for the link at ``at``
  and frames given to it while down are lost; a frame on the wire (being serialised or
  propagating) when the link goes down, or sent while it is down, is lost at the receiving end.
  All counted by reason ``"link_down"`` (a ``Dropped`` event at the node that lost it; a
  lost control frame -- PFC, CNP, RC ACK/NAK -- has flow -1: :func:`_control`).
* ``flap``: ``link_down`` intervals drawn from the fault rng (``random.Random`` seeded with the
  run's seed and the fault's index: deterministic per seed, and the engine rng's other users
  (ECN marking) are not disturbed): up for Exp(mtbf), down for Exp(mttr), repeated to ``until``
  (or for ever); each time is drawn when the event before it happens, so only the next one
  is pending.
* ``loss``: from ``at`` to ``until``, each frame crossing the link (either direction) is lost at
  the receiving end with probability ``loss_rate``, or for a raw (pre-FEC) bit error ratio
  ``ber`` as the link's FEC lets it through (:func:`sim.fabric.fec.frame_loss`: ``fec`` "auto"
  is the code of the link's rate, "none" loses a frame on any bit error, IEEE 802.3 3.2.9);
  reason ``"corrupt"``.  With ``plr`` (InfiniBand) the link resends what its FEC cannot
  correct: the frame and those behind it arrive a round trip (twice the propagation and a
  codeword's time) later, none lost (``plr_resent`` per port).
* ``degrade``: both ports of the link run at ``rate_gbps`` from ``at`` (e.g. a 400G link
  with half its lanes down at 200G), back to the old rate at ``until``.
* ``nic_down``: the host's link down.  ``switch_down``: every link of the switch down.
  Overlapping faults keep a link down until the last of them ends; in the log, those of one
  kind on one target are one interval (:meth:`_Engine.link_event`).
* ``slow_pcie``: the host's GPU-NIC PCIe link (``Host.pcie_write_bps`` / ``pcie_read_bps``,
  sim.nic.pcie) runs at ``rate_gbps`` both ways, or at the rates of PCIe generation
  ``pcie_gen`` with ``pcie_lanes`` lanes (:class:`sim.nic.pcie.PcieLink`, 256-byte MPS), from
  ``at`` to ``until`` (e.g. a Gen5 x16 slot trained down to Gen3 x8).  The host must model
  PCIe (built with ``pcie_write_bps``); the NIC's receive buffer and its thresholds stay.

Reaction (:class:`Reroute`): ``detect_ps + converge_ps`` after a link goes down (or comes back),
every switch's routes are recomputed from its original routes: an ECMP / adaptive group keeps
the members whose link is up and whose next hop still reaches the destination; a destination
with no member left is unreachable (frames dropped by the switch, ``"no_route"``); static
routing (``routing="static"``, the IB LFT) is recomputed by OpenSM's min-hop rule
(:func:`sim.fabric.lft.min_hop_lft`) over the links that are up.  ``Switch.set_routes`` clears
the per-flow ECMP cache.  Until then, frames hashed to the dead port are lost (``"link_down"``).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sim.events import Dropped
from sim.flowctl.credit import cbfc_free
from sim.flowctl.pfc import is_mac_control
from sim.net.port import Port
from sim.net.routes import RouteRule
from sim.net.switch import Switch
from sim.nic.host import ACK_OPCODE, roce_bth
from sim.trace import interest
from sim.units import gbps, ser_time_ps, wire_bytes
from wire.roce import CNP_OPCODE

#: a RS(544,514) codeword's bytes on the wire (544 10-bit symbols): what physical-layer
#: retransmission sends again
CODEWORD_BYTES = 680

__all__ = ["KINDS", "Fault", "FaultLog", "Reroute", "schedule_faults", "peer_node",
           "link_down", "DETECT_PS", "CONVERGE_PS", "IB_REROUTE_PS", "loss_probability"]

KINDS = ("link_down", "flap", "loss", "degrade", "nic_down", "switch_down", "slow_pcie")

#: Failure detection: BFD with a 50 ms detection time (3 x 16.7 ms; RFC 5880 section 6.8.4
#: defines detection time = multiplier x interval; 3 x ~16 ms is the common sub-50 ms
#: "fast-failover" configuration of data-centre fabrics) [A: a typical setting, not a standard].
DETECT_PS = 50 * 10**9
#: ECMP convergence after the withdrawal (BGP in a Clos fabric, RFC 7938 section 7: the group
#: shrinks locally as soon as the next hop is down; the update reaches the other tiers within
#: tens of ms) [A: 10 ms].
CONVERGE_PS = 10 * 10**9
#: InfiniBand: OpenSM sweeps on the trap of a port state change and re-computes and uploads
#: the LFTs; a heavy sweep on a small fabric takes on the order of 100 ms [A].
IB_REROUTE_PS = 100 * 10**9


@dataclass(frozen=True)
class Fault:
    """One fault (module docstring).  Times in ps; ``until_ps`` None: to the end of the run."""

    kind: str
    node: int
    port: int = 0
    at_ps: int = 0
    until_ps: int | None = None
    mtbf_ps: int | None = None
    mttr_ps: int | None = None
    loss_rate: float | None = None
    ber: float | None = None
    rate_gbps: float | None = None
    pcie_gen: int | None = None
    pcie_lanes: int | None = None
    #: loss by ``ber``: the link's FEC (sim.fabric.fec: "auto", "none", "rs528", "rs544",
    #: "ll272") and, on InfiniBand, physical-layer retransmission of the codewords it
    #: cannot correct (delayed, not lost)
    fec: str = "auto"
    plr: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {self.kind!r}")
        if self.at_ps < 0:
            raise ValueError(f"at must be >= 0, got {self.at_ps}")
        if self.until_ps is not None and self.until_ps <= self.at_ps:
            raise ValueError(f"until ({self.until_ps} ps) must be after at ({self.at_ps} ps)")
        if self.kind == "flap" and not (self.mtbf_ps and self.mttr_ps and self.mtbf_ps > 0
                                        and self.mttr_ps > 0):
            raise ValueError("flap needs positive mtbf and mttr")
        if self.kind == "loss":
            if (self.loss_rate is None) == (self.ber is None):
                raise ValueError("loss needs exactly one of loss_rate and ber")
            x = self.loss_rate if self.loss_rate is not None else self.ber
            if not 0.0 <= x <= 1.0:  # type: ignore[operator]
                raise ValueError(f"loss_rate/ber must be in [0, 1], got {x}")
            from sim.fabric.fec import FEC_NAMES

            if self.fec not in FEC_NAMES:
                raise ValueError(f"fec must be one of {', '.join(FEC_NAMES)}, got {self.fec!r}")
            if self.ber is None and (self.fec != "auto" or self.plr):
                raise ValueError("fec and plr go with ber (a raw bit error ratio), not "
                                 "loss_rate")
        if self.kind == "degrade" and not (self.rate_gbps and self.rate_gbps > 0):
            raise ValueError("degrade needs a positive rate_gbps")
        if self.kind in ("degrade", "slow_pcie") and self.rate_gbps:
            gbps(self.rate_gbps)  # ValueError for a rate the ports cannot run at
        if self.kind == "slow_pcie":
            if (self.rate_gbps is None) == (self.pcie_gen is None):
                raise ValueError("slow_pcie needs exactly one of rate_gbps and pcie_gen")
            if self.rate_gbps is not None and not self.rate_gbps > 0:
                raise ValueError("slow_pcie needs a positive rate_gbps")
            if self.pcie_gen is not None:
                from sim.nic.pcie import PcieLink

                PcieLink(self.pcie_gen, self.pcie_lanes or 16)  # ValueError for a bad one

    def pcie_rates_bps(self) -> tuple[int, int]:
        """slow_pcie: (write, read) b/s of the slowed link."""
        if self.rate_gbps is not None:
            r = gbps(self.rate_gbps)
            return r, r
        from sim.nic.pcie import PcieLink

        link = PcieLink(self.pcie_gen, self.pcie_lanes or 16)  # type: ignore[arg-type]
        return link.write_bps(), link.read_bps()


@dataclass(frozen=True)
class Reroute:
    """Reaction times: a switch's routes change ``detect_ps + converge_ps`` after a link state
    change (defaults: :data:`DETECT_PS`, :data:`CONVERGE_PS`; for IB fabrics use
    ``Reroute(0, IB_REROUTE_PS)``).  ``enabled=False``: routes never change."""

    detect_ps: int = DETECT_PS
    converge_ps: int = CONVERGE_PS
    enabled: bool = True

    @property
    def delay_ps(self) -> int:
        return self.detect_ps + self.converge_ps


@dataclass
class FaultLog:
    """What happened: ``events`` (``{"t_ps", "what", ...}`` in time order) and the drops the
    faults caused, packets and bytes per reason."""

    events: list[dict[str, Any]] = field(default_factory=list)
    drops: dict[str, int] = field(default_factory=dict)
    dropped_bytes: dict[str, int] = field(default_factory=dict)
    #: called with each event as it is noted, after the fault has acted (a link down, a
    #: rate changed, routes recomputed): what models the fabric without packets follows
    listeners: list[Callable[[dict[str, Any]], None]] = field(default_factory=list)
    #: the kinds of the faults installed (:func:`schedule_faults`)
    kinds: set[str] = field(default_factory=set)
    #: per (node, port, reason) the frames dropped there: where a corrupt frame arrived,
    #: the port a link going down flushed (sim.fabric.counters)
    drops_at: dict[tuple[int, int, str], int] = field(default_factory=dict)
    #: per (node, port) how many times the port's link went down
    link_downs: dict[tuple[int, int], int] = field(default_factory=dict)
    #: per (node, port) the frames physical-layer retransmission resent to it
    plr_resent: dict[tuple[int, int], int] = field(default_factory=dict)

    def note(self, t_ps: int, what: str, **kw: Any) -> None:
        ev = {"t_ps": t_ps, "what": what, **kw}
        self.events.append(ev)
        for fn in self.listeners:
            fn(ev)

    def summary(self) -> dict[str, Any]:
        out = {"events": list(self.events), "drops": dict(self.drops),
               "dropped_bytes": dict(self.dropped_bytes)}
        if self.plr_resent:  # only with plr: other summaries keep their keys
            out["plr_resent_frames"] = sum(self.plr_resent.values())
        return out


def _control(pkt: Any) -> bool:
    """A control frame, which belongs to no flow's data: a PFC frame (link-local), a CNP or
    an RC ACK/NAK (``sim.nic.host``: real bytes, the data flow's id).  The engine drops them
    with flow -1 in their ``Dropped`` event: one lost before it left its NIC (queued at a
    port going down) was never seen as sent, so counting it against the flow would break
    the flow's conservation (sent = delivered + dropped + in flight)."""
    frame = pkt.frame
    if frame is None:
        return False
    if is_mac_control(frame):
        return True
    bth = roce_bth(frame)
    return bth is not None and bth[0] in (ACK_OPCODE, CNP_OPCODE)


def link_down(port: Any) -> bool:
    """Whether a fault holds ``port``'s link down now."""
    peer = getattr(port, "peer", None)
    return isinstance(peer, _FaultyWire) and peer.down


def peer_node(port: Any) -> Any:
    """The node at the other end of ``port``'s link, or None: the node itself when the link
    carries a fault (:class:`_FaultyWire` stands between them then)."""
    peer = getattr(port, "peer", None)
    return peer.real if isinstance(peer, _FaultyWire) else peer


class _FaultyWire:
    """The ``peer`` of a faulted link's port: delivers to the real node unless the frame is
    lost (link down during its flight, or corrupt)."""

    def __init__(self, eng: _Engine, port: Port, real: Any) -> None:
        self.eng, self.port, self.real = eng, port, real
        self.node_id = real.node_id
        self.down = False
        self.down_since_ps = -1  # last time the link went down (-1: never)
        #: the loss faults active on the link
        self.losses: list[_Loss] = []
        #: physical-layer retransmission: frames are delivered no earlier than this
        self.hold_until_ps = 0

    def receive(self, port: int, pkt: Any) -> None:
        now = self.eng.engine.now_ps
        # lost if the link is down now or went down since the frame's first bit left
        # (down_since_ps -1: never down; a degraded rate's longer serialisation time must not
        # reach back past 0 and count it)
        since = self.down_since_ps
        if self.down or (since >= 0 and since >= now - self.port.prop_ps - ser_time_ps(
                self.port.wire_bytes(pkt.nbytes), self.port.rate_bps)):
            self.eng.drop(self.real.node_id, port, pkt, "link_down")
            return
        for loss in self.losses:  # each loss fault on its own
            p = loss.probability(self.port.wire_bytes(pkt.nbytes), self.port.rate_bps)
            if p and (p >= 1.0 or loss.rng.random() < p):
                if not loss.plr:
                    self.eng.drop(self.real.node_id, port, pkt, "corrupt")
                    return
                # resent by the link: the frame, and those behind it, a round trip later
                # (the receiver's request back, the codeword again)
                log = self.eng.log
                at = (self.real.node_id, port)
                log.plr_resent[at] = log.plr_resent.get(at, 0) + 1
                self.hold_until_ps = max(self.hold_until_ps, now) + 2 * self.port.prop_ps \
                    + ser_time_ps(CODEWORD_BYTES, self.port.rate_bps)
        if self.hold_until_ps > now:  # in order behind a resent codeword
            self.eng.engine.schedule(self.hold_until_ps, self.real.receive, port, pkt)
            return
        self.real.receive(port, pkt)


class _Loss:
    """One loss fault on a link: a frame's loss probability by ``loss_rate``, or by
    ``ber`` through the link's FEC (:func:`sim.fabric.fec.frame_loss`, kept per frame size
    and rate), its random draws, and whether the link resends instead (``plr``)."""

    __slots__ = ("ber", "cache", "fec", "ib", "plr", "rate", "rng")

    def __init__(self, rate: float | None, ber: float | None, fec: str, plr: bool,
                 rng: random.Random, ib: bool) -> None:
        self.rate, self.ber, self.fec, self.plr, self.rng, self.ib = rate, ber, fec, plr, rng, ib
        self.cache: dict[tuple[int, int], float] = {}

    def probability(self, wire: int, rate_bps: int) -> float:
        if self.rate is not None:
            return self.rate
        p = self.cache.get((wire, rate_bps))
        if p is None:
            from sim.fabric.fec import frame_loss

            p = frame_loss(self.ber, wire, self.fec, int(rate_bps),  # type: ignore[arg-type]
                           self.ib)
            self.cache[(wire, rate_bps)] = p
        return p


class _Engine:
    def __init__(self, fabric: Any, seed: int, reroute: Reroute) -> None:
        self.fabric = fabric
        self.engine = fabric.engine
        self.seed = seed
        self.reroute = reroute
        self.ib = getattr(fabric, "flow_control", None) == "ib"
        self.log = FaultLog()
        self.count = 0
        self.wires: dict[tuple[int, int], _FaultyWire] = {}
        self.down: dict[tuple[int, int], int] = {}  # egress (node, port) -> down count
        self.held: dict[tuple, int] = {}  # (kind, target) -> faults of that kind holding it
        # (kind, target) -> (rate before the first, {fault index: its rate}): degrade, slow_pcie
        self.slowed: dict[tuple, tuple[Any, dict[int, Any]]] = {}
        self.orig_routes = {n: (_snapshot(s.routes), s.routing) for n, s in fabric.nodes.items()
                            if isinstance(s, Switch)}

    # ----------------------------------------------------------- bookkeeping
    def drop(self, node: int, port: int, pkt: Any, reason: str) -> None:
        log = self.log
        log.drops[reason] = log.drops.get(reason, 0) + 1
        log.dropped_bytes[reason] = log.dropped_bytes.get(reason, 0) + pkt.nbytes
        at = (node, port, reason)
        log.drops_at[at] = log.drops_at.get(at, 0) + 1
        tracer = self.fabric.tracer
        if Dropped in interest(tracer).types:
            flow = -1 if _control(pkt) else pkt.flow
            tracer.emit(Dropped(self.engine.now_ps, node, port, pkt.tc, pkt.id, flow,
                                pkt.nbytes, reason))
        if getattr(pkt, "fc", None) is not None:
            cbfc_free(pkt)

    def port(self, node: int, index: int) -> Port:
        n = self.fabric.nodes.get(node)
        if n is None:
            raise ValueError(f"node {node}: no such node")
        p = n.ports.get(index)
        if p is None:
            raise ValueError(f"node {node} port {index}: no such port")
        return p

    def link(self, node: int, index: int) -> tuple[Port, Port]:
        """Both egress ports of the link at (node, index)."""
        a = self.port(node, index)
        peer = a.peer
        if peer is None:
            raise ValueError(f"node {node} port {index}: not connected")
        real = peer.real if isinstance(peer, _FaultyWire) else peer
        return a, self.port(real.node_id, a.peer_port)

    def wire(self, p: Port) -> _FaultyWire:
        key = (p.node_id, p.index)
        w = self.wires.get(key)
        if w is None:
            w = self.wires[key] = _FaultyWire(self, p, p.peer)
            p.peer = w
        return w

    # ------------------------------------------------------------ link state
    def set_down(self, ports: tuple[Port, ...], down: bool) -> None:
        now = self.engine.now_ps
        changed = False
        for p in ports:
            key = (p.node_id, p.index)
            n = self.down.get(key, 0) + (1 if down else -1)
            self.down[key] = max(n, 0)
            w = self.wire(p)
            if down and n == 1:
                changed = True
                self.log.link_downs[key] = self.log.link_downs.get(key, 0) + 1
                w.down, w.down_since_ps = True, now
                self._flush(p)
                p._divert = self._dropper(p)
            elif not down and n == 0:
                changed = True
                w.down = False
                p._divert = None
        if changed and self.reroute.enabled:
            self.engine.call_in(self.reroute.delay_ps, self.recompute)

    def _flush(self, p: Port) -> None:
        for prio in range(len(p.queues)):
            for pkt in p.flush(prio):
                if p.on_dequeue is not None:
                    p.on_dequeue(p.index, pkt)  # the node's accounting (MMU, credits)
                self.drop(p.node_id, p.index, pkt, "link_down")

    def _dropper(self, p: Port):
        def enqueue(pkt: Any) -> None:
            if p.on_dequeue is not None:
                p.on_dequeue(p.index, pkt)
            self.drop(p.node_id, p.index, pkt, "link_down")
        return enqueue

    # --------------------------------------------------------------- reroute
    def recompute(self) -> None:
        """Every switch's routes from its original ones over the links that are up."""
        fab = self.fabric
        dead = {k for k, n in self.down.items() if n > 0}
        static = {n for n, (_, mode) in self.orig_routes.items() if mode == "static"}
        lft = None
        if static:
            from sim.fabric.lft import min_hop_lft, updn_lft
            roots = getattr(fab, "updn_roots", None)  # [topology] routing = "updn"
            lft = (updn_lft(fab, roots, getattr(fab, "node_guid", None), dead)
                   if roots is not None else min_hop_lft(fab, dead))
        memo: dict[tuple[int, int], bool] = {}

        def reaches(sw: int, dst: int, path: frozenset[int]) -> bool:
            key = (sw, dst)
            if key in memo:
                return memo[key]
            routes, _ = self.orig_routes[sw]
            r = routes.get(dst)
            ok = r is not None and bool(members(sw, dst, r, path | {sw}))
            memo[key] = ok
            return ok

        def members(sw: int, dst: int, r: Any, path: frozenset[int]) -> list[int]:
            group = [r] if isinstance(r, int) else list(r)
            out = []
            for o in group:
                if (sw, o) in dead:
                    continue
                p = fab.nodes[sw].ports.get(o)
                if p is None or p.peer is None:
                    continue
                nxt = p.peer.node_id
                if nxt == dst or (nxt not in path and isinstance(fab.nodes.get(nxt), Switch)
                                  and reaches(nxt, dst, path)):
                    out.append(o)
            return out

        changes = []
        for sid, (routes, mode) in self.orig_routes.items():
            sw = fab.nodes[sid]
            if mode == "static":
                new: dict[int, Any] = dict(lft.get(sid, {}))  # type: ignore[union-attr]
            else:
                new = {}
                for dst, r in routes.items():
                    m = members(sid, dst, r, frozenset({sid}))
                    if not m:
                        continue
                    new[dst] = m[0] if isinstance(r, int) else (
                        tuple(r) if len(m) == len(tuple(r)) else tuple(m))
            if new != sw.routes:
                sw.set_routes(new, mode)
                changes.append(sid)
        self.log.note(self.engine.now_ps, "reroute", switches=changes)

    # -------------------------------------------------------------- schedule
    def at(self, t_ps: int, fn, *args: Any) -> None:
        self.engine.schedule(t_ps, fn, *args)

    def link_event(self, ports: tuple[Port, ...], down: bool, what: str, target: dict) -> None:
        """A fault of kind ``what`` takes ``ports`` down or gives them back.  Faults of one
        kind on one target that overlap are one interval in the log: its start when the
        first takes the target down, its end when the last gives it back (the ports' own
        count, :meth:`set_down`, keeps a link down while any fault of any kind holds it)."""
        key = (what.replace("_up", "_down"), *sorted(target.items()))
        n = self.held.get(key, 0)
        self.held[key] = n + 1 if down else max(n - 1, 0)
        if n == (0 if down else 1):
            self.log.note(self.engine.now_ps, what, **target)
        self.set_down(ports, down)

    def install(self, i: int, f: Fault) -> None:
        target = {"node": f.node} if f.kind in ("nic_down", "switch_down", "slow_pcie") else {
            "node": f.node, "port": f.port}
        if f.kind == "slow_pcie":
            host = self.fabric.nodes.get(f.node)
            if host is None or isinstance(host, Switch) or not hasattr(host, "pcie_write_bps"):
                raise ValueError(f"node {f.node}: not a host")
            if host.pcie_write_bps is None or host.pcie_read_bps is None:
                raise ValueError(f"node {f.node}: the host has no PCIe model (give its hosts "
                                 f"a PCIe generation, pcie_gen)")
            self.at(f.at_ps, self._slow, ("slow_pcie", host), i, f.pcie_rates_bps(), True,
                    target)
            if f.until_ps is not None:
                self.at(f.until_ps, self._slow, ("slow_pcie", host), i, None, False, target)
            return
        if f.kind == "switch_down":
            sw = self.fabric.nodes.get(f.node)
            if not isinstance(sw, Switch):
                raise ValueError(f"node {f.node}: not a switch")
            ports = tuple(p for idx in sorted(sw.ports) for p in self.link(f.node, idx)
                          if sw.ports[idx].peer is not None)
        elif f.kind == "nic_down":
            if isinstance(self.fabric.nodes.get(f.node), Switch) or f.node not in \
                    self.fabric.nodes:
                raise ValueError(f"node {f.node}: not a host")
            ports = self.link(f.node, 0)
        else:
            ports = self.link(f.node, f.port)
        for p in ports:
            self.wire(p)
        if f.kind in ("link_down", "nic_down", "switch_down"):
            self.at(f.at_ps, self.link_event, ports, True, f"{f.kind}", target)
            if f.until_ps is not None:
                up = "link_up" if f.kind == "link_down" else f.kind.replace("down", "up")
                self.at(f.until_ps, self.link_event, ports, False, up, target)
        elif f.kind == "flap":
            self._flap_next(ports, target, f, random.Random(f"flap:{self.seed}:{i}"), f.at_ps)
        elif f.kind == "loss":
            if f.plr and not self.ib:
                raise ValueError("plr: physical-layer retransmission is InfiniBand's (NDR, "
                                 "XDR); this fabric runs Ethernet")
            loss = _Loss(f.loss_rate, f.ber, f.fec, f.plr,
                         random.Random(f"loss:{self.seed}:{i}"), self.ib)
            self.at(f.at_ps, self._loss, ports, loss, True, target)
            if f.until_ps is not None:
                self.at(f.until_ps, self._loss, ports, loss, False, target)
        elif f.kind == "degrade":
            rate = gbps(f.rate_gbps)  # type: ignore[arg-type]
            self.at(f.at_ps, self._slow, ("degrade", ports), i, rate, True, target)
            if f.until_ps is not None:
                self.at(f.until_ps, self._slow, ("degrade", ports), i, None, False, target)

    # A flap draws each time when the one before it happens, so only its next event is
    # pending: a flap without an end costs nothing beyond the run (the engine is run to a
    # time or until the work is done, never until it has no event).  The draws alternate
    # up Exp(mtbf), down Exp(mttr) from the fault's rng as one sequence, whenever made.
    def _flap_next(self, ports: tuple[Port, ...], target: dict, f: Fault, rng: random.Random,
                   up_ps: int) -> None:
        """The link came up at ``up_ps`` (or the flap starts): its next failure."""
        t = up_ps + max(1, round(rng.expovariate(1.0 / f.mtbf_ps)))  # type: ignore[operator]
        if f.until_ps is None or t < f.until_ps:
            self.at(t, self._flap_down, ports, target, f, rng)

    def _flap_down(self, ports: tuple[Port, ...], target: dict, f: Fault,
                   rng: random.Random) -> None:
        now = self.engine.now_ps
        back = now + max(1, round(rng.expovariate(1.0 / f.mttr_ps)))  # type: ignore[operator]
        self.link_event(ports, True, "link_down", target)
        if f.until_ps is not None and back >= f.until_ps:
            self.at(f.until_ps, self.link_event, ports, False, "link_up", target)
        else:
            self.at(back, self._flap_up, ports, target, f, rng)

    def _flap_up(self, ports: tuple[Port, ...], target: dict, f: Fault,
                 rng: random.Random) -> None:
        self.link_event(ports, False, "link_up", target)
        self._flap_next(ports, target, f, rng, self.engine.now_ps)

    def _loss(self, ports: tuple[Port, ...], loss: Any, start: bool, target: dict) -> None:
        """A loss fault starts or ends on the link; overlapping ones each keep drawing (a
        frame is lost if any of them loses it), and are one interval in the log, as
        :meth:`link_event`'s."""
        key = ("loss", *sorted(target.items()))
        n = self.held.get(key, 0)
        self.held[key] = n + 1 if start else max(n - 1, 0)
        if n == (0 if start else 1):
            self.log.note(self.engine.now_ps, "loss_start" if start else "loss_end", **target)
        for p in ports:
            w = self.wire(p)
            if start:
                w.losses.append(loss)
            elif loss in w.losses:
                w.losses.remove(loss)

    def _pcie(self, host: Any, rates: tuple[int, int], target: dict) -> None:
        self.log.note(self.engine.now_ps, "pcie", write_bps=rates[0], read_bps=rates[1],
                      **target)
        host.pcie_write_bps, host.pcie_read_bps = rates

    def _slow(self, what: tuple[str, Any], i: int, rate: Any, start: bool,
              target: dict) -> None:
        """Fault ``i`` slows a link (``("degrade", ports)``: ``rate`` b/s) or a host's PCIe
        link (``("slow_pcie", host)``: ``rate`` (write, read) b/s) from now, or (``start``
        False) stops.  Overlapping ones: the slowest of those holding it applies, and the
        rate from before the first comes back when the last ends."""
        kind, obj = what
        key = (kind, *sorted(target.items()))
        base, holds = self.slowed.get(key, (None, {}))
        if start:
            if not holds:
                base = self._rates_of(kind, obj)
            holds[i] = rate
        else:
            holds.pop(i, None)
        if holds:
            self.slowed[key] = (base, holds)
            now = min(holds.values())  # the slowest (tuples: by write rate, then read)
        else:
            self.slowed.pop(key, None)
            now = base
        if now != self._rates_of(kind, obj):
            if kind == "degrade":
                self.log.note(self.engine.now_ps, "rate", rate_bps=now, **target)
                for p in obj:
                    p.set_rate(now)
            else:
                self._pcie(obj, now, target)

    @staticmethod
    def _rates_of(kind: str, obj: Any) -> Any:
        return obj[0].rate_bps if kind == "degrade" else (obj.pcie_write_bps, obj.pcie_read_bps)


def schedule_faults(fabric: Any, faults: list[Fault] | tuple[Fault, ...], seed: int | None = None,
                    reroute: Reroute | None = None) -> FaultLog:
    """Install ``faults`` on ``fabric`` (before or during a run); returns the log that fills
    as the run goes (also ``fabric.fault_log``, read by ``Fabric.summary()``).  ``seed``
    (default the engine's) seeds the random processes.  ``reroute`` on a fabric that has
    faults already replaces its reaction times (for the link changes still to come).  Raises
    ValueError naming a bad target."""
    eng = getattr(fabric, "_fault_engine", None)
    if eng is not None and reroute is not None:
        eng.reroute = reroute
    if eng is None:
        if reroute is None:
            reroute = Reroute(0, IB_REROUTE_PS) if getattr(fabric, "flow_control", "") == "ib" \
                else Reroute()
        eng = _Engine(fabric, fabric.engine.seed if seed is None else seed, reroute)
        fabric._fault_engine = eng
        fabric.fault_log = eng.log
    eng.log.kinds.update(f.kind for f in faults)
    for f in faults:
        eng.install(eng.count, f)  # the fault's index seeds its random process
        eng.count += 1
    return eng.log


def loss_probability(nbytes: int, ber: float) -> float:
    """Frame loss probability for a bit error rate without FEC (``fec="none"``):
    ``1 - (1 - ber) ** (8 * wire bytes)``."""
    from sim.fabric.fec import frame_loss

    return frame_loss(ber, wire_bytes(nbytes), "none", 0)


def _snapshot(routes: Any) -> Any:
    """A switch's table as it is now (a rule is read-only: itself)."""
    return routes if isinstance(routes, RouteRule) else dict(routes)

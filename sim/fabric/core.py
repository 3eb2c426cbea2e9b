"""Wiring nodes into a fabric, running it, and summarising what happened.

``Fabric`` owns the engine, the tracer and the nodes; ``connect`` makes a full-duplex link
(one :class:`sim.net.port.Port` per direction); ``star`` builds the single-switch topology the
``incast`` scenario uses.  ``summary()`` gives the per-flow and per-port figures of
``summary.json`` (docs/reference/results-folder.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim.engine import Engine
from sim.flowctl.base import check_flow_control
from sim.flowctl.credit import CbfcConfig
from sim.flowctl.ib import IbConfig, attach_ib
from sim.net.mmu import Mmu, MmuConfig
from sim.net.port import QUANTUM_BYTES, CreditPort
from sim.net.switch import EcnConfig, Route, Switch
from sim.nic.host import Flow, Host, rc_conservation
from sim.packet import PacketIds
from sim.trace import NullTracer, Tracer
from wire.linkstack import IB, ROCE, HeaderStack

__all__ = ["Fabric", "star"]


class Fabric:
    """Nodes and the links between them.  ``flow_control`` / ``cbfc`` / ``ib``: the
    link-level flow control of the links :meth:`connect` makes unless it is told otherwise
    (:data:`sim.flowctl.base.FLOW_CONTROLS`: ``"pfc"``, the switches' PFC as configured,
    ``"credit"``, credit-based flow control with ``cbfc`` on both directions of the link, or
    ``"ib"``, InfiniBand per-VL credits with ``ib``, default :class:`IbConfig()
    <sim.flowctl.ib.IbConfig>`)."""

    def __init__(self, seed: int = 0, tracer: Tracer | None = None, *,
                 flow_control: str = "pfc", cbfc: CbfcConfig | None = None,
                 ib: IbConfig | None = None) -> None:
        self.flow_control = _check_link_fc(flow_control, cbfc)
        self.cbfc = cbfc
        self.ib = ib
        self.engine = Engine(seed)
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        self.nodes: dict[int, Host | Switch] = {}
        self.flows: dict[int, Flow] = {}
        self.ids = PacketIds()
        self.ids.next = 0  # data and control packets share one deterministic counter
        #: The flows of replayed captures by flow id (:class:`sim.workloads.replay.ReplayedFlow`,
        #: registered by :func:`sim.workloads.replay.inject_records`): not sent by a NIC's
        #: flow logic, so not in :attr:`flows`, but reported as flows are.
        self.replayed: dict[int, Any] = {}
        #: Names the builder gives its nodes (``leaf0``, ``spine1``, ``switch``); the others
        #: are named by :meth:`node_names`.
        self.names: dict[int, str] = {}

    def node_names(self) -> dict[int, str]:
        """node id -> the one name every output shows for the node (summary.json ``labels``,
        plots, ``lossless collective``'s links, command-line messages): the builder's
        (:attr:`names`: ``leafN``/``spineN`` of a leaf-spine or rail fabric, ``edgeN``/
        ``aggN``/``coreN`` of a fat-tree, ``swN`` of a ring, ``switch`` of a star), else
        ``h<id>`` for a host and ``sw<id>`` for a switch (the ids a fabric file gives its
        custom topology); ``N`` counts the switches of a role in node-id order."""
        out = {nid: (f"h{nid}" if isinstance(node, Host) else f"sw{nid}")
               for nid, node in sorted(self.nodes.items())}
        out.update(self.names)
        return out

    @property
    def stack(self) -> HeaderStack:
        """The header stack of the fabric's data packets (:mod:`wire.linkstack`):
        InfiniBand's (LRH + BTH + ICRC + VCRC, no Ethernet framing) when its links run IB
        credits (``flow_control="ib"``), else RoCEv2's."""
        return IB if self.flow_control == "ib" else ROCE

    def next_packet_id(self) -> int:
        """A fresh packet id (one deterministic counter per fabric)."""
        return self.ids()

    def add_host(self, node_id: int, rate_bps: int, **kw: Any) -> Host:
        h = Host(self.engine, node_id, rate_bps, tracer=self.tracer, ids=self.ids, **kw)
        self._add(node_id, h)
        return h

    def add_switch(self, node_id: int, mmu: Mmu, routes: dict[int, Route],
                   ecn: EcnConfig | None = None, *, ecmp_seed: int | None = None,
                   scheduler: str = "rr", weights: Sequence[int] | None = None,
                   quantum_bytes: int = QUANTUM_BYTES) -> Switch:
        """A switch; ``routes`` values are a port or a tuple of ports (ECMP group, hashed per
        flow with ``ecmp_seed``, default the fabric's seed); ``scheduler``/``weights``/
        ``quantum_bytes`` set the egress scheduling of its ports (``sim.net.port.Port``)."""
        s = Switch(self.engine, node_id, mmu, routes=routes, ecn=ecn, tracer=self.tracer,
                   ids=self.ids, ecmp_seed=ecmp_seed, scheduler=scheduler, weights=weights,
                   quantum_bytes=quantum_bytes)
        self._add(node_id, s)
        return s

    def _add(self, node_id: int, node: Host | Switch) -> None:
        if node_id in self.nodes:
            raise ValueError(f"node {node_id} exists already")
        self.nodes[node_id] = node

    def connect(self, a: int, a_port: int, b: int, b_port: int, rate_bps: int,
                prop_ps: int, *, flow_control: str | None = None,
                cbfc: CbfcConfig | None = None, ib: IbConfig | None = None) -> None:
        """A full-duplex link between (a, a_port) and (b, b_port).  ``flow_control``
        (default: the fabric's) ``"credit"`` puts both directions under credits (``cbfc``,
        default the fabric's): each end's egress port is a :class:`sim.net.port.CreditPort`
        and each end frees the credits of what it received (a switch when the frame leaves
        its buffer, a host on receipt).  ``"ib"``: both directions under InfiniBand per-VL
        credits (``ib``, default the fabric's or :class:`IbConfig()
        <sim.flowctl.ib.IbConfig>`), attached to the two ports
        (:func:`sim.flowctl.ib.attach_ib`), freed the same way."""
        fc = self.flow_control if flow_control is None else flow_control
        credits = (self.cbfc if cbfc is None else cbfc) if fc == "credit" else None
        _check_link_fc(fc, credits)
        pa = self._port(a, a_port, rate_bps, credits)
        pb = self._port(b, b_port, rate_bps, credits)
        if fc == "ib":
            for nid, p in ((a, pa), (b, pb)):
                if getattr(p, "ib", None) is not None or getattr(p, "_gate", None) is not None:
                    raise ValueError(f"node {nid} port {p.index}: has link-level credits "
                                     f"already")
            cfg = ib if ib is not None else self.ib if self.ib is not None else IbConfig()
            pa.connect(self.nodes[b], b_port, prop_ps)
            pb.connect(self.nodes[a], a_port, prop_ps)
            attach_ib(pa, pb, cfg)
            return
        pa.connect(self.nodes[b], b_port, prop_ps)
        pb.connect(self.nodes[a], a_port, prop_ps)

    def _port(self, node_id: int, index: int, rate_bps: int, cbfc: CbfcConfig | None = None):
        node = self.nodes[node_id]
        if isinstance(node, Switch):
            p = node.ports.get(index) or node.add_port(index, rate_bps, cbfc=cbfc)
        elif index != 0:
            raise ValueError(f"host {node_id} has one port (0)")
        else:
            p = node.use_credits(cbfc) if cbfc is not None else node.port
        if cbfc is not None and not isinstance(p, CreditPort):
            raise ValueError(f"node {node_id} port {index}: exists already without credits")
        return p

    def add_flow(self, flow: Flow) -> None:
        if flow.id in self.flows:
            raise ValueError(f"flow {flow.id} exists already")
        self.flows[flow.id] = flow
        src, dst = self.nodes.get(flow.src), self.nodes.get(flow.dst)
        if not isinstance(src, Host) or not isinstance(dst, Host):
            raise ValueError(f"flow {flow.id}: source and destination must be hosts")
        src.add_flow(flow)
        dst.expect(flow)

    def run(self, until_ps: int) -> int:
        """Run the engine until ``until_ps``; first, every host learns whether a switch
        routes adaptively (:meth:`sim.nic.host.Host.set_adaptive_routing`: the NICs of an
        adaptively routed fabric place out-of-order frames, unless a host's ``ooo`` says
        otherwise)."""
        adaptive = any(getattr(n, "routing", "") == "adaptive" for n in self.nodes.values()
                       if isinstance(n, Switch))
        for n in self.nodes.values():
            if isinstance(n, Host) and n.adaptive_routing != adaptive:
                n.set_adaptive_routing(adaptive)
        return self.engine.run(until_ps)

    def dropped_packets(self) -> int:
        """Frames the network lost so far: at the switches (buffer, TTL, no route, watchdog),
        at the hosts (a stalled receiver, a full receive buffer) and to the faults
        (:mod:`sim.fabric.faults`: a down link, a corrupt frame).  The one count of
        ``summary()["totals"]["drops"]`` and of a collective's ``drops`` counter."""
        n = 0
        for node in self.nodes.values():
            if isinstance(node, Switch):
                n += node.drops
            elif isinstance(node, Host):
                n += node.rx_stall_dropped_packets + node.rx_buffer_dropped_packets
        faults = getattr(self, "fault_log", None)
        return n + (sum(faults.drops.values()) if faults is not None else 0)

    def summary(self) -> dict[str, object]:
        now = self.engine.now_ps
        flows = []
        for f in self.flows.values():
            dst = self.nodes[f.dst]
            assert isinstance(dst, Host)
            got = dst.rx_bytes.get(f.id, 0)
            first, last = dst.rx_first_ps.get(f.id), dst.rx_last_ps.get(f.id)
            span = throughput_span_ps(f, dst.fct_ps.get(f.id), last, now)
            flows.append({
                "id": f.id, "src": f.src, "dst": f.dst, "bytes_delivered": got,
                "throughput_bps": (got * 8 * 10**12 // span) if span > 0 else 0,
                "fct_ps": dst.fct_ps.get(f.id), "first_rx_ps": first,
                "ce_received": dst.rx_ce.get(f.id, 0), "ooo_packets": dst.rx_ooo.get(f.id, 0),
            })
            src = self.nodes[f.src]
            if getattr(src, "reliable", False):  # RC counters only when reliable is on
                assert isinstance(src, Host)
                # sent - delivered - dropped by the NIC - held (SR): in flight or dropped
                # by a switch (per-flow switch drops: the Dropped events)
                flows[-1]["rc"] = {**src.rc_stats(f.id), **dst.rc_stats(f.id),
                                   "network_or_in_flight_frames": rc_conservation(
                                       src, dst, f.id)["in_flight"]}
        ports = []
        for nid, node in sorted(self.nodes.items()):
            for idx, p in sorted(node.ports.items()):
                ports.append({
                    "node": nid, "port": idx, "tx_bytes": p.tx_bytes,
                    "busy_ps": p.busy_ps_until(now), "pause_received": p.pause_received,
                    "paused_ps": p.paused_ps(), "max_queue_bytes": max(p.max_queue_bytes),
                    "pause_sent": node.pause_sent.get(idx, 0) if isinstance(node, Switch)
                    else 0,
                })
                ib = getattr(p, "ib", None)
                if ib is not None:  # only on IB links: other summaries keep their keys
                    ports[-1].update(ib.counters())
        switches = [n for n in self.nodes.values() if isinstance(n, Switch)]
        hosts = [n for n in self.nodes.values() if isinstance(n, Host)]
        by_reason = _merge(s.mmu.drops_by_reason for s in switches)
        for reason, nbytes in (("rx_stalled", sum(h.rx_stall_dropped_bytes for h in hosts)),
                               ("rx_buffer_full",
                                sum(h.rx_buffer_dropped_bytes for h in hosts))):
            if nbytes:
                by_reason[reason] = by_reason.get(reason, 0) + nbytes
        faults = getattr(self, "fault_log", None)  # sim.fabric.faults: only with faults
        if faults is not None:
            for k, v in faults.dropped_bytes.items():
                by_reason[k] = by_reason.get(k, 0) + v
        out = {
            "duration_ps": now, "flows": flows, "ports": ports,
            "totals": {
                # switches (buffer, TTL, no route, watchdog), receivers, faults
                "drops": self.dropped_packets(),
                "ce_marked": sum(s.ce_marked for s in switches),
                "pauses_sent": sum(sum(s.pause_sent.values()) for s in switches),
                # MMU admission reasons and rx_stalled (summary.json has every reason, from
                # the Dropped events: sim.study.results)
                "dropped_bytes_by_reason": by_reason,
            },
        }
        if faults is not None:
            out["faults"] = faults.summary()
        return out


def throughput_span_ps(flow: Flow, fct_ps: int | None, last_rx_ps: int | None,
                       now_ps: int) -> int:
    """The time a flow's throughput is averaged over: from its start to its completion (FCT)
    when it completed; else to the end of the run, or to when it stopped sending (or its last
    arrival after that) if it stopped.  So a flow that stalls (paused, deadlocked) shows the
    rate it really got over the run, not the rate it had before the stall."""
    if fct_ps is not None:
        return fct_ps
    end = now_ps
    if flow.stop_ps is not None and flow.stop_ps < now_ps:
        end = max(flow.stop_ps, last_rx_ps or 0)
    return max(end - flow.start_ps, 0)


def _merge(dicts) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def _check_link_fc(flow_control: str, cbfc: CbfcConfig | None) -> str:
    check_flow_control(flow_control)
    if flow_control == "credit" and cbfc is None:
        raise ValueError('flow_control "credit" needs a CbfcConfig (cbfc=)')
    return flow_control


def star(senders: int, rate_bps: int, prop_ps: int, mmu_config: MmuConfig, *,
         seed: int = 0, ecn: EcnConfig | None = None, tracer: Tracer | None = None,
         host_kw: Mapping[str, Any] | None = None,
         switch_kw: Mapping[str, Any] | None = None,
         link_kw: Mapping[str, Any] | None = None) -> tuple[Fabric, int, list[int]]:
    """One switch (node 0), ``senders`` hosts (nodes 1..n) and one receiver (node n+1), each
    on its own switch port (host i on port i).  Returns (fabric, receiver id, sender ids).
    ``host_kw``/``switch_kw`` go to every ``add_host``/``add_switch`` (as in
    sim.fabric.topology), ``link_kw`` (``flow_control``, ``cbfc``, ``ib``) to the
    :class:`Fabric`."""
    fab = Fabric(seed, tracer, **dict(link_kw or {}))
    recv = senders + 1
    hosts = list(range(1, senders + 2))
    fab.add_switch(0, Mmu(mmu_config), routes={h: h for h in hosts}, ecn=ecn,
                   **dict(switch_kw or {}))
    fab.names[0] = "switch"
    for h in hosts:
        fab.add_host(h, rate_bps, **dict(host_kw or {}))
        fab.connect(0, h, h, 0, rate_bps, prop_ps)
    return fab, recv, hosts[:-1]

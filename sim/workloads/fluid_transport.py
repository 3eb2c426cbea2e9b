"""QPs as fluid flows: a collective's network sends without packets (flow fidelity).

:class:`FluidTransport` stands where the NICs' packets stand in
:class:`sim.workloads.collective.CollectiveJob`: a QP opened between two hosts gets its path
(:func:`sim.fabric.paths.path_links`, as the switches forward its packets); while it has
bytes posted it is a fluid flow on that path at its max-min fair rate among the flows that
share its links (:class:`sim.workloads.fluid.FluidNet`, updated on every start and end of a
QP's activity); a posted message is received ``latency_ps`` after its last byte left: the
links' propagation, and one full frame stored and forwarded at every switch [A].  No
packets, so no queues, PFC, ECN, congestion control or losses.  Faults
(:mod:`sim.fabric.faults`, through its log's listeners) act on the flows: a link down has no
capacity until it is up again (its QPs wait with their bytes, where packets would be lost
and resent [A]), a degraded link or PCIe slot its new rate, and new routes move every QP
whose path changed (one without a route waits for one).

Bytes are wire bytes: the frames' bytes (headers included, :func:`sim.workloads.collective.
frames_bytes`) plus each frame's framing on the link (Ethernet's FCS, preamble and gap; none
on InfiniBand), as the packet model serialises them; what they send through each port is
counted as a port counts it (:meth:`FluidTransport.port_counters`: the link use of the
outputs).  One transport per fabric, shared by the jobs on it (:func:`fluid_transport`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any
from weakref import WeakKeyDictionary

from sim.fabric.paths import PathError, path_links
from sim.units import ser_time_ps
from sim.workloads.fluid import FluidNet

__all__ = ["FluidTransport", "fluid_transport", "transport_of"]


class _Qp:
    __slots__ = (
        "active",
        "delivered_bytes",
        "dst",
        "frame_bytes",
        "latency_ps",
        "left_bytes",
        "links",
        "on_data",
        "overhead_bytes",
        "path",
        "queue",
        "rate_Bpps",
        "since_ps",
        "src",
        "version",
    )

    def __init__(self, path: tuple, links: tuple, latency_ps: int, on_data: Callable,
                 frame_bytes: int, overhead_bytes: int) -> None:
        #: the flow's links in the max-min problem (the PCIe ones included) and the fabric's
        #: ports it leaves through, whose counters it adds to
        self.path, self.links = path, links
        self.latency_ps, self.on_data = latency_ps, on_data
        #: messages posted and not yet sent: (wire bytes, frame bytes, frames, cumulative
        #: frame bytes at its end)
        self.queue: deque[tuple[int, int, int, int]] = deque()
        self.left_bytes = 0.0  # wire bytes of the head message still to send
        self.rate_Bpps = 0.0  # bytes per ps
        self.since_ps = 0
        self.delivered_bytes = 0  # cumulative frame bytes handed over (sent)
        self.version = 0
        self.active = False
        self.frame_bytes, self.overhead_bytes = frame_bytes, overhead_bytes
        self.src = self.dst = -1  # its hosts (open)


class FluidTransport:
    """The QPs of one fabric as fluid flows (module docstring)."""

    def __init__(self, fabric: Any) -> None:
        self.fabric, self.engine = fabric, fabric.engine
        caps = {}
        for nid, node in fabric.nodes.items():
            for idx, port in node.ports.items():
                caps[(nid, idx)] = port.rate_bps
        self.net = FluidNet(caps)
        #: a PCIe link's capacity per bit/s of the host's rate (wire bytes over payload)
        self._pcie_scale: dict[tuple[str, int], float] = {}
        self.qps: dict[int, _Qp] = {}
        #: (node, port) -> [tx_bytes, busy_ps, tx_packets] the fluid flows sent through it,
        #: as a port counts them (:meth:`port_counters`)
        self.sent: dict[tuple[int, int], list[int]] = {}
        #: flows whose component changed at this instant, recomputed once by _flush
        self._touched: set[int] = set()
        self._flush_due = False
        #: faults (sim.fabric.faults): a link down carries nothing, a degraded one its new
        #: rate, new routes move the QPs onto their new paths; checked once per instant
        self._fault_due = False
        self._rerouted = False
        log = getattr(fabric, "fault_log", None)
        if log is not None:
            if "loss" in log.kinds:
                raise ValueError("flow fidelity: a loss fault drops packets, and fluid flows "
                                 "have none (use packets)")
            log.listeners.append(self._fault)

    # ---------------------------------------------------------------- faults
    def _fault(self, event: dict[str, Any]) -> None:
        self._rerouted |= event["what"] == "reroute"
        if not self._fault_due:
            self._fault_due = True
            self.engine.call_at(self.engine.now_ps, self._refault)

    def _refault(self) -> None:
        """The links' capacities as the faults left them (0 while down), the PCIe links'
        rates, and after new routes every QP's path; the flows they touch recomputed."""
        from sim.fabric.faults import link_down

        self._fault_due = False
        net, nodes = self.net, self.fabric.nodes
        touched: set[int] = set()
        for link in list(net.capacity_Bpps):
            if link[0] == "no route":
                continue
            if isinstance(link[0], str):  # a host's PCIe read or write (open)
                attr, host = link
                bps = getattr(nodes[host], attr, None) or 0
                cap = bps * self._pcie_scale.get(link, 0.0) / 8e12
            else:
                port = nodes[link[0]].ports[link[1]]
                cap = 0.0 if link_down(port) else port.rate_bps / 8e12
            if cap != net.capacity_Bpps[link]:
                net.capacity_Bpps[link] = cap
                touched |= net.on.get(link, set())
        if self._rerouted:
            self._rerouted = False
            for fid, q in self.qps.items():
                try:
                    path = path_links(self.fabric, q.src, q.dst, fid)
                except PathError:  # no route now: it sends nothing until one comes back,
                    path = (("no route", fid),)  # as its packets would be dropped [A]
                    net.capacity_Bpps[path[0]] = 0.0
                if path == q.links:
                    continue
                # the hosts' PCIe read and write links stay at the ends of the flow's path
                read = tuple(x for x in q.path[:1] if x[0] == "pcie_read_bps")
                write = tuple(x for x in q.path[-1:] if x[0] == "pcie_write_bps")
                q.links, q.path = path, (*read, *path, *write)
                if not isinstance(path[0][0], str):
                    q.latency_ps = self._latency(path, q.frame_bytes + q.overhead_bytes)
                if q.active:
                    net.remove(fid, update=False)
                    net.add(fid, q.path, update=False)
                    touched.add(fid)
        if touched:
            self._touch(touched)

    def _latency(self, path: tuple, wire_frame: int) -> int:
        """The links' propagation and, at each switch, one full frame stored and forwarded
        [A]."""
        nodes = self.fabric.nodes
        ports = [nodes[nid].ports[idx] for nid, idx in path]
        return sum(p.prop_ps for p in ports) + sum(ser_time_ps(wire_frame, p.rate_bps)
                                                   for p in ports[1:])

    # ---------------------------------------------------------------- QPs
    def open(self, fid: int, src: int, dst: int, on_data: Callable[[int, int, int], None],
             frame_bytes: int, header_bytes: int = 0) -> int:
        """Open QP ``fid`` from host ``src`` to host ``dst``; ``on_data(fid, got, now)`` is
        called as its messages arrive (``got``: its cumulative frame bytes received).
        Returns the bytes it delivered before (a QP reused by the next iteration).  With
        the hosts' PCIe model (``pcie_read_bps`` of the sender, ``pcie_write_bps`` of the
        receiver) the flow also crosses the sender's PCIe read and the receiver's PCIe
        write, links that carry the frames' payloads (``frame_bytes - header_bytes``) at
        those rates [A: in wire bytes, scaled by a full frame's wire over payload]."""
        q = self.qps.get(fid)
        if q is not None:
            if q.queue or q.active:
                raise ValueError(f"QP {fid} still has bytes in flight")
            q.on_data = on_data
            return q.delivered_bytes
        flow_path, path, latency, overhead = self.route(fid, src, dst, frame_bytes,
                                                        header_bytes)
        self.qps[fid] = _Qp(flow_path, path, latency, on_data, frame_bytes, overhead)
        self.qps[fid].src, self.qps[fid].dst = src, dst
        return 0

    def route(self, fid: int, src: int, dst: int, frame_bytes: int,
              header_bytes: int = 0) -> tuple[tuple, tuple, int, int]:
        """What QP ``fid`` from host ``src`` to host ``dst`` would be (:meth:`open`) without
        opening it: its links in the max-min problem (the PCIe ones included), the fabric's
        ports it leaves through, its path's latency and its wire overhead a frame."""
        path = path_links(self.fabric, src, dst, fid)
        nodes = self.fabric.nodes
        ports = [nodes[nid].ports[idx] for nid, idx in path]
        overhead = ports[0].wire_bytes(frame_bytes) - frame_bytes
        latency = self._latency(path, frame_bytes + overhead)
        payload = frame_bytes - header_bytes
        pcie: list[tuple[str, int] | None] = []
        for end, attr in ((src, "pcie_read_bps"), (dst, "pcie_write_bps")):
            bps = getattr(nodes[end], attr, None)
            key = (attr, end) if bps and payload > 0 else None
            if key is not None and key not in self.net.capacity_Bpps:
                self._pcie_scale[key] = (frame_bytes + overhead) / payload
                self.net.capacity_Bpps[key] = bps * self._pcie_scale[key] / 8e12
            pcie.append(key)
        read, write = pcie
        flow_path = (*((read,) if read else ()), *path, *((write,) if write else ()))
        return flow_path, path, latency, overhead

    def port_counters(self) -> dict[tuple[int, int], tuple[int, int, int]]:
        """(node id, port index) -> (tx_bytes, busy_ps, tx_packets) the fluid flows sent
        through every port of the fabric so far, in the form of
        :func:`sim.workloads.collective_stats.port_counters`."""
        return {(nid, idx): tuple(self.sent.get((nid, idx), (0, 0, 0)))
                for nid, node in self.fabric.nodes.items() for idx in node.ports}

    def post(self, fid: int, nbytes: int) -> None:
        """Send ``nbytes`` of frame bytes on QP ``fid`` after what it has posted."""
        q = self.qps[fid]
        frames = -(-nbytes // q.frame_bytes)
        end = (q.queue[-1][3] if q.queue else q.delivered_bytes) + nbytes
        q.queue.append((nbytes + frames * q.overhead_bytes, nbytes, frames, end))
        if not q.active:
            q.active = True
            q.left_bytes = float(q.queue[0][0])
            q.since_ps = self.engine.now_ps
            self.net.add(fid, q.path, update=False)
            self._touch((fid,))

    # ---------------------------------------------------------------- rates
    def _apply(self, changed: dict[int, float]) -> None:
        now = self.engine.now_ps
        for fid, rate in changed.items():
            q = self.qps[fid]
            q.left_bytes -= q.rate_Bpps * (now - q.since_ps)
            q.since_ps, q.rate_Bpps = now, rate
            q.version += 1
            if rate > 0:
                self.engine.call_at(now + _ceil_ps(q.left_bytes, rate), self._sent, fid,
                                    q.version)

    def _sent(self, fid: int, version: int) -> None:
        q = self.qps[fid]
        if version != q.version:
            return  # the rate changed since: another timer is set
        now = self.engine.now_ps
        wire, nbytes, frames, end = q.queue.popleft()
        q.delivered_bytes = end
        self._count(q, nbytes, wire, frames)
        self.engine.call_at(now + q.latency_ps, q.on_data, fid, end, now + q.latency_ps)
        if q.queue:  # the next message at the same rate
            q.left_bytes, q.since_ps = float(q.queue[0][0]), now
            q.version += 1
            self.engine.call_at(now + _ceil_ps(q.left_bytes, q.rate_Bpps), self._sent, fid,
                                q.version)
            return
        q.active, q.rate_Bpps, q.left_bytes = False, 0.0, 0.0
        q.version += 1
        self._touch(self.net.remove(fid, update=False))

    def _count(self, q: _Qp, nbytes: int, wire: int, frames: int) -> None:
        """What the ports of ``q``'s path would count for ``nbytes`` of frames (``frames``
        of them, ``wire`` bytes on the wire): frame bytes, frames, the time the wire bytes
        took."""
        self.count_on(q.links, nbytes, wire, frames)

    def count_on(self, ports: Sequence[tuple[int, int]], nbytes: int, wire: int,
                 frames: int, times: int = 1) -> None:
        """Ports ``ports`` (node id, port index) sent ``nbytes`` of frames (``frames`` of
        them, ``wire`` bytes on the wire) of one QP timed by an engine of its own (the
        chunk engine, which routes its QPs without opening them), or of each of ``times``
        such QPs: what they count."""
        nodes = self.fabric.nodes
        for nid, idx in ports:
            c = self.sent.get((nid, idx))
            if c is None:
                c = self.sent[(nid, idx)] = [0, 0, 0]
            c[0] += nbytes * times
            c[1] += ser_time_ps(wire, nodes[nid].ports[idx].rate_bps) * times
            c[2] += frames * times

    def sent_elsewhere(self, fid: int, nbytes: int, frames: int) -> None:
        """QP ``fid`` delivered ``nbytes`` of frames (``frames`` of them) timed by an
        engine of its own (the ring and chunk engines): its counters and its ports' as if
        this transport had sent them."""
        q = self.qps[fid]
        q.delivered_bytes += nbytes
        self._count(q, nbytes, nbytes + frames * q.overhead_bytes, frames)

    def _touch(self, flows: Any) -> None:
        """Recompute these flows' components once, at the end of this instant's changes."""
        self._touched.update(flows)
        if not self._flush_due:
            self._flush_due = True
            self.engine.call_at(self.engine.now_ps, self._flush)

    def _flush(self) -> None:
        self._flush_due = False
        touched, self._touched = self._touched, set()
        self._apply(self.net.refresh(touched))


def _ceil_ps(left_bytes: float, rate_Bpps: float) -> int:
    """Whole picoseconds to send ``left_bytes`` at ``rate_Bpps`` (rounded up, at least 0)."""
    return max(0, -int(-left_bytes // rate_Bpps))


_TRANSPORTS: WeakKeyDictionary[Any, FluidTransport] = WeakKeyDictionary()


def transport_of(fabric: Any) -> FluidTransport | None:
    """The fabric's :class:`FluidTransport` if a flow-fidelity run made one, else None."""
    return _TRANSPORTS.get(fabric)


def fluid_transport(fabric: Any) -> FluidTransport:
    """The fabric's :class:`FluidTransport` (made on first use, after the fabric is built:
    its links' rates then are the flows' capacities)."""
    t = _TRANSPORTS.get(fabric)
    if t is None:
        t = _TRANSPORTS[fabric] = FluidTransport(fabric)
    return t


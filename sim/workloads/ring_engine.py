"""A ring collective at flow fidelity without transfer objects: the ring engine.

A ring call of ``n`` ranks on ``c`` channels makes ``c x n x 2(n-1)`` sends per loop and
slice (AllReduce): 67 million at 1,024 GPUs and 1 GiB, too many to hold as
:class:`sim.workloads.nccl.Transfer` s and drive one by one
(:class:`sim.workloads.collective.CollectiveJob`).  But every send of one ring hop has the
same shape: edge ``p`` of channel ``ch`` (ring position ``p`` to ``p + 1``) sends, at hop
``h`` and slice ``s``, slice ``s`` of the piece the edge before it sent at hop ``h - 1``
(:func:`sim.workloads.nccl.ring_piece`, :func:`~sim.workloads.nccl.ring_slices`), once it
has been received there and once the send ``max_inflight`` earlier on its own connection
has been received (the FIFO slot), and after the one before it on its connection.  So the
ring engine keeps per edge (arrays over the ``c x n`` edges) what the job keeps per
transfer, on one grid of (loop, hop, slice) positions, and
:class:`sim.workloads.ring_kernel.RingKernel` (compiled with the simulator's core) plays
every send:

* posted as soon as its data and slot are there, after NCCL's host side as
  :class:`~sim.workloads.collective.CollectiveJob` applies it (the step latency, the
  sending GPU channel, one send at a time per edge) and the connection's order;
* booked in the order of the post times (ties as the schedule lists the sends): NVLink as
  :class:`~sim.workloads.collective.NvlinkDomain` books it (each GPU's egress and ingress a
  FIFO in the order sends are posted), the receiving channel's copy inside a node, the
  network as fluid flows (:mod:`sim.workloads.fluid_transport`: each QP on the path its
  packets take, a message after the one before on its QP, received its path's latency
  after its last byte left).  A booking enables only sends posted later, so the order is
  the one an event-driven run gives.

What it gives up against the job at flow fidelity: a QP's rate is its max-min fair share
with **every** QP of the ring sending (:func:`sim.workloads.fluid.max_min_rates` once),
where the job recomputes the shares as QPs go busy and idle, so it is slow where QPs share
a link and leave gaps (four QPs a NIC, LL128: 1-2.5 %).  Where no link is shared the
two post and receive every send at the same picosecond (tests/test_ring_engine.py); with
NCCL's host side sends posted at the same picosecond may take a port in another order than
the job's events.  No faults, stragglers, broadcast or CollNet (refused: the job runs
those).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.units import ser_time_ps
from sim.workloads.nccl import (
    Algorithm,
    Collective,
    Protocol,
    Schedule,
    connection_qps,
    qp_split,
    ring_first_sender,
    ring_hops,
    ring_loops,
    ring_piece,
    ring_slices,
    send_nic_rank,
    wire_bytes,
)
from sim.workloads.ring_kernel import RingKernel, edge_records, int_array

__all__ = ["RingRun", "ring_engine_problem", "ring_sends", "run_ring", "size_tables",
           "time_at_ps"]

#: a test's hook: (loop, hop, slice, channel, sender) -> (posted, received) of every send
_TRACE: dict | None = None


@dataclass(slots=True)
class RingRun:
    """What :func:`run_ring` measured (ps of the fabric's clock): the call's launch (None
    without NCCL's host side), first post and last receipt, the sends it made, the frame
    bytes each QP carried, and what the NVLink ports moved."""

    launch_ps: int | None
    first_start_ps: int
    last_finish_ps: int
    transfers: int
    #: flow id (QP number) -> frame bytes posted
    posted_bytes: dict[int, int] = field(default_factory=dict)
    #: flow id -> (src rank, dst rank, channel, QP index, UDP source port)
    flows: dict[int, tuple[int, int, int, int, int]] = field(default_factory=dict)
    nvlink_bytes: int = 0
    #: times an edge that could send waited because it ran too far ahead of the next edge
    #: (more receive times than the engine keeps): 0 unless a ring is very uneven; its
    #: figures may then be late
    held_back: int = 0

    @property
    def time_ps(self) -> int:
        """Last receipt minus the launch (with the host side) or the first post."""
        if not self.transfers:
            return 0
        start = self.first_start_ps if self.launch_ps is None else self.launch_ps
        return self.last_finish_ps - start


def ring_engine_problem(sch: Schedule, delay_ps: Any = None) -> str | None:
    """Why the ring engine cannot run ``sch`` (None: it can)."""
    if sch.algorithm is not Algorithm.RING or sch.collective not in (
            Collective.ALLREDUCE, Collective.ALLGATHER, Collective.REDUCESCATTER):
        return f"{sch.algorithm.value} {sch.collective.value} is not a ring AllReduce, " \
               f"AllGather or ReduceScatter"
    if sch.aggregators or sch.buffers:
        return "NVLS buffers or SHARP aggregators"
    if delay_ps:
        return "stragglers"
    if not sch.rings:
        return "no rings"
    return None


def size_tables(sizes_bytes: Sequence[int], protocol: Protocol, qps: int, mtu_bytes: int,
                header_bytes: int, overhead_bytes: int, host: Any, nvlink_bps: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per data size of ``sizes_bytes`` (numpy int64 arrays): the wire bytes, per QP the
    frame bytes (``qp_split``, ``frames_bytes``) and the wire bytes with ``overhead_bytes``
    a frame, the sending GPU channel's time (``host.busy_ps``, 0 without a host side) and
    the NVLink time (as :class:`~sim.workloads.collective.NvlinkDomain` times a transfer),
    as the ring and chunk engines look them up by size index."""
    from sim.workloads.collective import frames_bytes

    frame = mtu_bytes + header_bytes
    wire = np.array([wire_bytes(int(b), protocol) for b in sizes_bytes], dtype=np.int64)
    qp_frame = np.array([[frames_bytes(p, mtu_bytes, header_bytes) for p in qp_split(int(w), qps)]
                         for w in wire], dtype=np.int64).reshape(len(wire), qps)
    qp_wire = qp_frame + -(-qp_frame // frame) * overhead_bytes
    busy = np.array([host.busy_ps(int(b)) if host is not None else 0 for b in sizes_bytes],
                    dtype=np.int64)
    nvl = np.array([ser_time_ps(int(w), nvlink_bps) for w in wire], dtype=np.int64)
    return wire, qp_frame, qp_wire, busy, nvl


def time_at_ps(nbytes: np.ndarray, rate_Bpps: np.ndarray) -> np.ndarray:
    """Whole picoseconds (rounded up, at least 0; int64) to send ``nbytes`` at ``rate_Bpps``
    bytes a picosecond, element by element (numpy broadcasting)."""
    return np.maximum(0, -np.floor_divide(-np.asarray(nbytes, dtype=float),
                                          rate_Bpps)).astype(np.int64)


def ring_sends(sch: Schedule) -> int:
    """The sends (transfers) of ring schedule ``sch`` (built or not)."""
    hops = ring_hops(sch.collective, sch.nranks)
    total, memo = 0, {}
    for grid, real in ring_loops(sch):
        for ch in range(sch.nchannels):
            for c in range(sch.nranks):
                nelem = ring_piece(sch, grid, real, ch, c)[1]
                if nelem > 0:
                    if nelem not in memo:
                        memo[nelem] = len(ring_slices(sch, nelem))
                    total += memo[nelem] * hops
    return total


def run_ring(sch: Schedule, fabric: Any, hosts: Sequence[int], *, mtu_bytes: int,
             header_bytes: int | None = None, gpus_per_node: int = 1, nvlink: bool = True,
             nvlink_bps: int, nvlink_latency_ps: int, pxn: bool = True, host: Any = None,
             qp_base: int = 0x100,
             progress: Callable[[int, int], None] | None = None, fidelity: str = "flow",
             tc: int = 3, limit_ps: int = 10**12) -> RingRun:
    """Run ring schedule ``sch`` (built or not: its rings and parameters are what is read)
    on ``fabric``'s hosts ``hosts`` from the engine's current time (module docstring);
    the keywords are :func:`sim.workloads.collective.run_schedule`'s.  The fabric's clock
    is moved to the last receipt; its :class:`~sim.workloads.collective.NvlinkDomain`
    keeps what the GPUs' ports are booked to.

    ``fidelity="packet"``: the network sends are the fabric's packets (QPs made or reused
    as :class:`~sim.workloads.collective.CollectiveJob` makes them, class ``tc``); the
    kernel books every send posted up to the engine's time, hands the network ones to
    their NICs and hears of their receipt from the receiving hosts (a connection's sends
    received in order), while the engine runs in slices until the last receipt or
    ``limit_ps`` (RuntimeError: incomplete)."""
    from sim.workloads.collective import nvlink_domain
    from sim.workloads.fluid import max_min_rates
    from sim.workloads.fluid_transport import fluid_transport

    why = ring_engine_problem(sch)
    if why is not None:
        raise ValueError(f"the ring engine runs rings only: {why}")
    if fidelity not in ("flow", "packet"):
        raise ValueError(f"fidelity must be flow or packet, got {fidelity!r}")
    n, nc, coll = sch.nranks, sch.nchannels, sch.collective
    g = gpus_per_node
    hdr = fabric.stack.header_bytes if header_bytes is None else header_bytes
    nvl_on = bool(nvlink) and g > 1
    eng = fabric.engine
    t0 = eng.now_ps
    launch_ps = None if host is None else t0  # the call; its first sends' data are ready
    ready0_ps = t0 if host is None else t0 + host.launch_ps  # launch_ps later
    E = nc * n
    rings = np.asarray(sch.rings[:nc], dtype=np.int64)  # (nc, n) ranks
    src = rings.reshape(-1)
    dst = np.roll(rings, -1, axis=1).reshape(-1)
    ch_of = np.repeat(np.arange(nc), n)
    pos_of = np.tile(np.arange(n), nc)
    prev_e = ch_of * n + (pos_of - 1) % n  # the edge before on the same ring
    node = np.arange(n) // g
    inter = node[src] != node[dst]
    # how each edge sends: over NVLink to its receiver, from its own NIC, or by PXN from
    # another GPU's NIC of its node (send_nic_rank)
    relay = np.array([send_nic_rank(int(a), int(b), g, pxn) if nvl_on else int(a)
                      for a, b in zip(src, dst, strict=True)], dtype=np.int64)
    relay[relay >= n] = src[relay >= n]
    nvl_edge = ~inter if nvl_on else np.zeros(E, dtype=bool)
    net_edge = ~nvl_edge
    pxn_edge = net_edge & (relay != src)
    loops = ring_loops(sch)
    hops = ring_hops(coll, n)
    first = np.array([[ring_first_sender(coll, c, sch.rings[ch], sch.root) for c in range(n)]
                      for ch in range(nc)], dtype=np.int64)
    # position -> piece it sends at hop 0: pos = first[c] + hop  =>  c = piece_at[ch, pos - hop]
    piece_at = np.empty((nc, n), dtype=np.int64)
    for ch in range(nc):
        piece_at[ch, first[ch]] = np.arange(n)
    # which connections send anything: QP numbers as the schedule numbers them (sorted
    # (src, dst, channel) keys, qps_per_connection each)
    q = sch.qps_per_connection
    live_piece = np.zeros((nc, n), dtype=bool)  # pieces with elements in some loop
    for grid, real in loops:
        live_piece |= np.array([[ring_piece(sch, grid, real, ch, c)[1] > 0 for c in range(n)]
                                for ch in range(nc)])
    sends_any = live_piece.any(axis=1)[ch_of]
    if hops < n:  # each edge sends every piece but one: the one its successor starts
        per_ch = live_piece.sum(axis=1)[ch_of]
        skipped = live_piece[ch_of, piece_at[ch_of, (pos_of - hops) % n]]
        sends_any = per_ch - skipped > 0
    keys = sorted((int(src[e]), int(dst[e]), int(ch_of[e])) for e in np.flatnonzero(sends_any))
    conn_index = {k: i for i, k in enumerate(keys)}
    qpn = np.full((E, q), -1, dtype=np.int64)
    sport: dict[int, int] = {}  # QP number -> its UDP source port
    for e in range(E):
        i = conn_index.get((int(src[e]), int(dst[e]), int(ch_of[e])))
        if i is not None:
            lq, _, ports = connection_qps(i, q, qp_base)
            qpn[e] = lq
            sport.update(zip(lq, ports, strict=True))
    packets = fidelity == "packet"
    frame = mtu_bytes + hdr
    host_of = list(hosts)
    rate_Bpps = np.ones((E, q))
    lat_ps = np.zeros((E, q), dtype=np.int64)
    overhead = 0
    flows: dict[int, tuple[int, int, int, int, int]] = {}
    paths = {}
    base: dict[int, int] = {}
    net_qps = [(int(e), j) for e in np.flatnonzero(net_edge & (qpn[:, 0] >= 0))
               for j in range(q)]
    if packets:  # the network QPs: the fabric's flows of packets
        from sim.workloads.collective import open_packet_qp

        rx = _PacketReceipts(fabric, E)
        for e, j in net_qps:
            fid = int(qpn[e, j])
            key = (int(src[e]), int(dst[e]), int(ch_of[e]))
            base[fid] = open_packet_qp(fabric, fid, fabric.nodes[host_of[relay[e]]],
                                       fabric.nodes[host_of[dst[e]]], tc=tc,
                                       packet_bytes=frame, conn=str(key), on_data=rx.on_data)
            flows[fid] = (*key, j, sport[fid])
            rx.posted[fid] = 0
        net_qps = []
    else:  # fluid flows on their paths at their max-min shares, all sending
        fluid = fluid_transport(fabric)
    for e, j in net_qps:
        fid = int(qpn[e, j])
        fluid.open(fid, host_of[relay[e]], host_of[dst[e]], _no_data, frame, hdr)
        qp = fluid.qps[fid]
        paths[fid] = qp.path
        lat_ps[e, j] = qp.latency_ps
        overhead = qp.overhead_bytes
        flows[fid] = (int(src[e]), int(dst[e]), int(ch_of[e]), j, sport[fid])
    if paths:
        shares = max_min_rates(fluid.net.capacity_Bpps, paths)
        for e, j in net_qps:
            rate_Bpps[e, j] = shares[int(qpn[e, j])]
    # every edge's sends on one grid of (loop, hop, slice) positions, loop by loop, and
    # the distinct sizes (bytes) of the slices (index 0: none)
    elt, mi = sch.elem_bytes, sch.max_inflight
    sizes_l, size_ix, tables, grid_rows, tables_S = [0], {0: 0}, [], [], []
    for li, (grid, real) in enumerate(loops):
        pieces = np.array([[max(0, ring_piece(sch, grid, real, ch, c)[1]) for c in range(n)]
                           for ch in range(nc)], dtype=np.int64)
        cut = {int(v): [x[1] * elt for x in ring_slices(sch, int(v))] if v > 0 else []
               for v in np.unique(pieces)}
        S = max(len(v) for v in cut.values())
        for nb in {b for v in cut.values() for b in v}:
            size_ix.setdefault(nb, len(sizes_l))
            if size_ix[nb] == len(sizes_l):
                sizes_l.append(nb)
        tables.append((pieces, cut))
        tables_S.append(S)
        grid_rows += [(li, h, s_, S) for h in range(hops) for s_ in range(S)]
    Smax = max(r[3] for r in grid_rows)
    inv = np.zeros((len(loops), nc, n, Smax), dtype=np.int64)  # (loop, ch, piece, slice)
    for li, (pieces, cut) in enumerate(tables):
        for ch in range(nc):
            for c in range(n):
                for s_, nb in enumerate(cut[int(pieces[ch, c])]):
                    inv[li, ch, c, s_] = size_ix[nb]
    g_loop, g_hop, g_s, g_S = (np.array(col, dtype=np.int64)
                               for col in zip(*grid_rows, strict=True))
    # how far (grid positions) from (loop, channel, ring place r = pos - hop, slice) to the
    # next position with a send, along the edge's positions (hop up, r down), within the
    # loop: empty pieces are jumped over at once
    ends, start = [], 0
    for li in range(len(loops)):
        S = tables_S[li]
        start += hops * S
        ends.append(start)
    loop_end = np.array(ends, dtype=np.int64)
    gap = np.zeros((len(loops), nc, n, Smax), dtype=np.int64)
    for li in range(len(loops)):
        S = tables_S[li]
        for ch in range(nc):
            # the edge's order of (r, s): r = n-1, n-2, ..., 0 (cyclic), s = 0 .. S-1
            order = [(r, s_) for r in range(n - 1, -1, -1) for s_ in range(S)]
            lv = np.array([inv[li, ch, piece_at[ch, r], s_] != 0 for r, s_ in order] * 2)
            at = np.flatnonzero(lv)
            idx = np.arange(len(lv))
            nxt = at[np.minimum(np.searchsorted(at, idx), len(at) - 1)] if len(at) else idx
            d = np.where(len(at) > 0, nxt - idx, 1 << 40)[: len(order)]
            d = np.where(d < 0, 1 << 40, d)
            rr = np.array([o[0] for o in order])
            ss = np.array([o[1] for o in order])
            gap[li, ch, rr, ss] = d
    g_lh = g_loop * hops + g_hop
    J = len(grid_rows)
    size_wire_bytes, qp_frame_bytes, qp_wire_bytes, busy_ps, nvl_ps = size_tables(
        sizes_l, sch.protocol, q, mtu_bytes, hdr, overhead, host, nvlink_bps)

    # receive times kept per edge (by grid position) for the next edge's data: an edge
    # may run this far ahead of the next one (256 MB of them at most); further, it waits,
    # which NCCL's FIFO slots would not make it do (counted: RingRun.held_back)
    W = int(min(J + 2 * Smax, max(64, 8 * Smax, (256 << 20) // (8 * E))))
    succ_e = ch_of * n + (pos_of + 1) % n
    dom = nvlink_domain(fabric) if nvl_on else None
    key = np.asarray(host_of[:n], dtype=np.int64)  # a GPU's NVLink key: its NIC's host id
    egress_free_ps = np.zeros(n, dtype=np.int64)
    ingress_free_ps = np.zeros(n, dtype=np.int64)
    if dom is not None:
        egress_free_ps = np.array([dom.egress_free_ps.get(int(k), 0) for k in key],
                                  dtype=np.int64)
        ingress_free_ps = np.array([dom.ingress_free_ps.get(int(k), 0) for k in key],
                                   dtype=np.int64)
    nvl_user = (nvl_edge | pxn_edge) if dom is not None else np.zeros(E, dtype=bool)
    nvl_to_e = np.where(nvl_edge, dst, relay)  # the GPU whose ingress an NVLink user takes
    step_ps = np.zeros(E, dtype=np.int64)
    if host is not None:
        step_ps = np.where(inter, host.inter_ps, host.intra_ps)
    # each QP's time for a message of each size at its share
    dur_ps = time_at_ps(qp_wire_bytes[:, None, :], rate_Bpps[None, :, :])
    A = int_array
    kern = RingKernel(
        (E, n, nc, q, mi, Smax, J, ready0_ps, nvlink_latency_ps, frame),
        edge_records(prev_e, succ_e, ch_of, pos_of, src, nvl_to_e, nvl_edge, nvl_user,
                     pxn_edge, net_edge, step_ps, mi),
        (A(lat_ps.ravel()), A(dur_ps.ravel())),
        (A(busy_ps), A(nvl_ps), A(size_wire_bytes), A(qp_frame_bytes.ravel())),
        tuple(A(x.ravel()) for x in (g_loop, g_hop, g_s, g_S, g_lh, inv, gap, piece_at,
                                     loop_end)),
        A(egress_free_ps), A(ingress_free_ps),
        (host is not None, bool(host is not None and host.recv_copy),
         sch.protocol is Protocol.SIMPLE), W, _TRACE, rx.post if packets else None)
    if packets:
        rx.drive(kern, ring_sends(sch), [[int(x) for x in row] for row in qpn],
                 [[int(x) for x in row] for row in qp_frame_bytes], host_of, relay, base,
                 progress, limit_ps)
    else:
        total = ring_sends(sch) if progress is not None else 0
        if kern.run(progress, total):
            raise RuntimeError("ring engine: no send can go on")  # pragma: no cover
    count, nvl_bytes, held_back = kern.count, kern.nvl_bytes, kern.held_back
    first_post_ps = kern.first_post_ps if count else None
    last_recv_ps = kern.last_recv_ps
    egress_free_ps = np.frombuffer(kern.egress_free_ps, dtype=np.int64)
    ingress_free_ps = np.frombuffer(kern.ingress_free_ps, dtype=np.int64)
    posted_bytes_qp = np.frombuffer(kern.posted_bytes, dtype=np.int64).reshape(E, q)
    frames = np.frombuffer(kern.frames, dtype=np.int64).reshape(E, q)
    if dom is not None:
        for i, k in enumerate(key):
            dom.egress_free_ps[int(k)] = int(egress_free_ps[i])
            dom.ingress_free_ps[int(k)] = int(ingress_free_ps[i])
        dom.nbytes += nvl_bytes
    out = RingRun(launch_ps, t0 if first_post_ps is None else int(first_post_ps),
                  t0 if not count else last_recv_ps, count, nvlink_bytes=nvl_bytes,
                  held_back=held_back)
    out.flows = flows
    if packets:  # what the NICs were given (the ports counted the frames)
        out.posted_bytes = dict(rx.posted)
        return out
    for e in np.flatnonzero(qpn[:, 0] >= 0):
        for j in range(q):
            fid = int(qpn[e, j])
            if fid not in flows:
                continue
            out.posted_bytes[fid] = nb = int(posted_bytes_qp[e, j])
            fluid.sent_elsewhere(fid, nb, int(frames[e, j]))  # what the ports count
    if out.last_finish_ps > eng.now_ps:
        fabric.run(out.last_finish_ps)
    return out


class _PacketReceipts:
    """Packet fidelity: the ring engine's network sends as the fabric's packets.  The
    kernel books a send (:meth:`post`: at its post time, after NVLink for PXN) and this
    hands its QP pieces to the sending NIC; each QP's deliveries (``on_data``) end pieces,
    and an edge's sends count as received in the order they were booked, once all their
    pieces are in (the receiver takes its FIFO's steps in order).  The kernel is woken
    at each post time it has to book (an engine event)."""

    def __init__(self, fabric: Any, E: int) -> None:
        self.fabric, self.eng = fabric, fabric.engine
        self.inflight: list[deque[list[int]] | None] = [None] * E  # per edge: [pieces left]
        self.ends: dict[int, deque[tuple[int, list[int], int]]] = {}  # fid -> (end, rec, e)
        self.posted: dict[int, int] = {}
        self.wakes: set[int] = set()
        self.kern: Any = None

    def post(self, e: int, at_ps: int, sz: int) -> None:
        rec = [-1]  # pieces left: -1 until handed to the NIC
        dq = self.inflight[e]
        if dq is None:
            dq = self.inflight[e] = deque()
        dq.append(rec)
        self.eng.call_at(at_ps, self._send, e, sz, rec)

    def _send(self, e: int, sz: int, rec: list[int]) -> None:
        pieces = 0
        nic = self.fabric.nodes[self.host_of[self.relay[e]]]
        for k, qb in enumerate(self.frame_bytes[sz]):
            if qb:
                fid = self.qpn[e][k]
                end = self.posted[fid] = self.posted[fid] + qb
                self.ends.setdefault(fid, deque()).append((self.base[fid] + end, rec, e))
                pieces += 1
                nic.post(fid, qb)
        rec[0] = pieces
        if not pieces:
            self._deliver(e)

    def on_data(self, fid: int, got: int, now: int) -> None:
        ends = self.ends.get(fid)
        while ends and got >= ends[0][0]:
            _, rec, e = ends.popleft()
            rec[0] -= 1
            if not rec[0]:
                self._deliver(e)

    def _deliver(self, e: int) -> None:
        dq = self.inflight[e]
        now = self.eng.now_ps
        while dq and dq[0][0] == 0:
            dq.popleft()
            self.kern.received(e, now)
        self._wake_at_next()

    def _wake_at_next(self) -> None:
        t = self.kern.next_ps()
        if t is not None and (not self.wakes or t < min(self.wakes)):
            self.wakes.add(t)
            self.eng.call_at(t, self._wake, t)

    def _wake(self, t: int) -> None:
        self.wakes.discard(t)
        self.kern.run_until(self.eng.now_ps)
        self._wake_at_next()

    def drive(self, kern: Any, total: int, qpn: list[list[int]], frame_bytes: list[list[int]],
              host_of: list[int], relay: Any, base: dict[int, int],
              progress: Callable[[int, int], None] | None, limit_ps: int) -> None:
        """Run the engine in slices until every send is received (RuntimeError after
        ``limit_ps``, or when nothing is left to happen)."""
        from sim.workloads.collective import DEFAULT_SLICE_PS

        self.kern, self.qpn, self.frame_bytes = kern, qpn, frame_bytes
        self.host_of, self.relay, self.base = host_of, [int(x) for x in relay], base
        eng = self.eng
        t0 = eng.now_ps
        kern.start()
        self._wake_at_next()
        while kern.count < total and eng.now_ps - t0 < limit_ps:
            if not len(eng):
                break
            self.fabric.run(min(eng.now_ps + DEFAULT_SLICE_PS, t0 + limit_ps))
            if progress is not None:
                progress(kern.count, total)
        if kern.count < total:
            from sim.workloads.collective import fabric_counters

            c = fabric_counters(self.fabric)
            raise RuntimeError(f"ring engine: {kern.count} of {total} sends received after "
                               f"{(eng.now_ps - t0) / 1e6:g} us (pauses {c['pfc_pauses']}, "
                               f"drops {c['drops']}; --engine job says more)")


def _no_data(fid: int, got: int, now: int) -> None:
    """The ring engine's QPs are timed here, not by the fluid transport."""

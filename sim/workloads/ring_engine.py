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
ring engine keeps per edge (arrays over the ``c x n`` edges, numpy) what the job keeps per
transfer, on one grid of (loop, hop, slice) positions, and works out every edge's next
sends at once:

* posted: when its data and slot are there, after NCCL's host side as
  :class:`~sim.workloads.collective.CollectiveJob` applies it (the step latency, the
  sending GPU channel, one send at a time per edge) and the connection's order;
* booked, in rounds, once no send still to be booked can take one of its NVLink ports
  before it (:func:`_safe`: a send not yet posted comes no sooner than what it waits for
  plus the shortest time a receipt can enable a send, the NVLink or path latency plus a
  step; a send without NVLink at once): NVLink as
  :class:`~sim.workloads.collective.NvlinkDomain` books it (each GPU's egress and ingress a
  FIFO in the order sends are posted, ties as the schedule lists them), the receiving
  channel's copy inside a node, the network as fluid flows
  (:mod:`sim.workloads.fluid_transport`: each QP on the path its packets take, a message
  after the one before on its QP, received its path's latency after its last byte left).

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

import time
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
    qp_split,
    ring_first_sender,
    ring_loops,
    ring_piece,
    ring_slices,
    send_nic_rank,
    udp_sport,
    wire_bytes,
)

__all__ = ["RingRun", "ring_engine_problem", "ring_sends", "run_ring"]

_NEVER = -(1 << 62)  # "no such time": below every time, harmless under max
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
    #: rounds in which an edge that could send waited because it ran too far ahead of the
    #: next edge (more receive times than the engine keeps): 0 unless a ring is very
    #: uneven; its figures may then be late
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


def ring_sends(sch: Schedule) -> int:
    """The sends (transfers) of ring schedule ``sch`` (built or not)."""
    hops = _hops(sch)
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


def _hops(sch: Schedule) -> int:
    return 2 * (sch.nranks - 1) if sch.collective is Collective.ALLREDUCE else sch.nranks - 1


def run_ring(sch: Schedule, fabric: Any, hosts: Sequence[int], *, mtu_bytes: int,
             header_bytes: int | None = None, gpus_per_node: int = 1, nvlink: bool = True,
             nvlink_bps: int, nvlink_latency_ps: int, pxn: bool = True, host: Any = None,
             qp_base: int = 0x100,
             progress: Callable[[int, int], None] | None = None) -> RingRun:
    """Run ring schedule ``sch`` (built or not: its rings and parameters are what is read)
    on ``fabric``'s hosts ``hosts`` from the engine's current time (module docstring);
    the keywords are :func:`sim.workloads.collective.run_schedule`'s.  The fabric's clock
    is moved to the last receipt; its :class:`~sim.workloads.collective.NvlinkDomain`
    keeps what the GPUs' ports are booked to."""
    from sim.workloads.collective import frames_bytes, nvlink_domain
    from sim.workloads.fluid import max_min_rates
    from sim.workloads.fluid_transport import fluid_transport

    why = ring_engine_problem(sch)
    if why is not None:
        raise ValueError(f"the ring engine runs rings only: {why}")
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
    hops = _hops(sch)
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
    for e in range(E):
        i = conn_index.get((int(src[e]), int(dst[e]), int(ch_of[e])))
        if i is not None:
            qpn[e] = qp_base + i * q + np.arange(q)
    # the network QPs: fluid flows on their paths at their max-min shares, all sending
    fluid = fluid_transport(fabric)
    frame = mtu_bytes + hdr
    host_of = list(hosts)
    rate_Bpps = np.ones((E, q))
    lat_ps = np.zeros((E, q), dtype=np.int64)
    overhead = 0
    flows: dict[int, tuple[int, int, int, int, int]] = {}
    paths = {}
    for e in np.flatnonzero(net_edge & (qpn[:, 0] >= 0)):
        for j in range(q):
            fid = int(qpn[e, j])
            fluid.open(fid, host_of[relay[e]], host_of[dst[e]], _no_data, frame, hdr)
            qp = fluid.qps[fid]
            paths[fid] = qp.path
            lat_ps[e, j] = qp.latency_ps
            overhead = qp.overhead_bytes
            flows[fid] = (int(src[e]), int(dst[e]), int(ch_of[e]), j,
                          udp_sport(fid, 0x800000 + (fid - qp_base)))
    shares = max_min_rates(fluid.net.capacity_Bpps, paths)
    for e in np.flatnonzero(net_edge & (qpn[:, 0] >= 0)):
        for j in range(q):
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
    size_bytes = np.array(sizes_l, dtype=np.int64)
    # per size: wire bytes, per QP frame and wire bytes, channel and NVLink times
    size_wire_bytes = np.array([wire_bytes(int(b), sch.protocol) for b in size_bytes],
                               dtype=np.int64)
    qp_frame_bytes = np.array([[frames_bytes(p, mtu_bytes, hdr) for p in qp_split(int(w), q)]
                    for w in size_wire_bytes], dtype=np.int64).reshape(len(size_bytes), q)
    qp_wire_bytes = qp_frame_bytes + -(-qp_frame_bytes // frame) * overhead
    busy_ps = np.array([host.busy_ps(int(b)) if host is not None else 0 for b in size_bytes],
                    dtype=np.int64)
    nvl_ps = -(-size_wire_bytes * 8 * 10**12 // nvlink_bps)
    qdur_ps = np.maximum(0, -np.floor_divide(-qp_wire_bytes[:, None, :].astype(float),
                                             rate_Bpps[None, :, :])
                      ).astype(np.int64) if len(size_bytes) * E * q <= 1 << 24 else None

    def size_at(j: np.ndarray, e: np.ndarray) -> np.ndarray:
        ch = ch_of[e]
        return inv[g_loop[j], ch, piece_at[ch, (pos_of[e] - g_hop[j]) % n], g_s[j]]

    # state per edge: the next grid position to post (jp) and the sends posted (kp) and
    # received (kc); posted sends wait (at most max_inflight: the FIFO slots) to be booked
    edges = np.arange(E)
    succ_e = ch_of * n + (pos_of + 1) % n
    # receive times kept per edge (by grid position) for the next edge's data: an edge
    # may run this far ahead of the next one (256 MB of them at most); further, it waits,
    # which NCCL's FIFO slots would not make it do (counted: RingRun.held_back)
    W = int(min(J + 2 * Smax, max(64, 8 * Smax, (256 << 20) // (8 * E))))
    recv_at_ps = np.full((W, E), _NEVER, dtype=np.int64)
    held_back = 0
    hist_ps = np.full((mi, E), _NEVER, dtype=np.int64)  # receive times of the last mi sends
    jp = np.zeros(E, dtype=np.int64)
    kp = np.zeros(E, dtype=np.int64)
    kc = np.zeros(E, dtype=np.int64)
    pend_pos = np.zeros((mi, E), dtype=np.int64)
    pend_post_ps = np.zeros((mi, E), dtype=np.int64)
    pend_sz = np.zeros((mi, E), dtype=np.int64)
    pend_copy_ps = np.full((mi, E), _NEVER, dtype=np.int64)
    last_post_ps = np.full(E, _NEVER, dtype=np.int64)
    chan_free_ps = np.full(E, _NEVER, dtype=np.int64)
    recv_free_ps = np.full(E, _NEVER, dtype=np.int64)
    qp_free_ps = np.full((E, q), _NEVER, dtype=np.int64)
    posted_bytes_qp = np.zeros((E, q), dtype=np.int64)
    frames = np.zeros((E, q), dtype=np.int64)
    dom = nvlink_domain(fabric) if nvl_on else None
    key = np.asarray(host_of[:n], dtype=np.int64)  # a GPU's NVLink key: its NIC's host id
    egress_free_ps = ingress_free_ps = None
    if dom is not None:
        egress_free_ps = np.array([dom.egress_free_ps.get(int(k), 0) for k in key], dtype=np.int64)
        ingress_free_ps = np.array([dom.ingress_free_ps.get(int(k), 0) for k in key],
                           dtype=np.int64)
    nvl_users = np.flatnonzero(nvl_edge | pxn_edge) if dom is not None else np.empty(0, int)
    nvl_to = np.where(nvl_edge, dst, relay)[nvl_users]
    nvl_user = np.zeros(E, dtype=bool)
    nvl_user[nvl_users] = True
    nvl_to_e = np.where(nvl_edge, dst, relay)  # the GPU whose ingress an NVLink user takes
    eg_rows = _Fifo(src[nvl_users], n)
    in_rows = _Fifo(nvl_to, n)
    step_ps = np.zeros(E, dtype=np.int64)
    if host is not None:
        step_ps = np.where(inter, host.inter_ps, host.intra_ps)
    simple = sch.protocol is Protocol.SIMPLE
    # lookahead: a send booked now enables others no sooner than its receipt plus a step,
    # so every send posted before the first one waiting plus this is booked in one round
    delays = []
    if len(nvl_users):
        delays.append(nvlink_latency_ps)
    if (net_edge & (qpn[:, 0] >= 0)).any():
        delays.append(int(lat_ps[net_edge & (qpn[:, 0] >= 0)].min()))
    look_ps = (min(delays) if delays else 0) + (
        min(host.inter_ps, host.intra_ps) if host is not None else 0)
    look_ps = max(1, look_ps)
    first_post_ps, last_recv_ps, count, nvl_bytes = None, _NEVER, 0, 0
    steps = np.arange(mi)[:, None]
    cur_sz = size_at(np.zeros(E, dtype=np.int64), edges)  # the size at each edge's jp
    total = ring_sends(sch) if progress is not None else 0
    told = time.monotonic()
    while True:
        if progress is not None and time.monotonic() - told > 1.0:
            progress(count, total)
            told = time.monotonic()
        # 1. post every send whose data and slot are there
        while True:
            act = jp < J
            jj = np.minimum(jp, J - 1)
            empty = act & (cur_sz == 0)
            if empty.any():  # no send here (an empty piece): on to the next that has one
                e0 = np.flatnonzero(empty)
                j0 = jp[e0]
                li = g_loop[j0]
                ch = ch_of[e0]
                step = gap[li, ch, (pos_of[e0] - g_hop[j0]) % n, g_s[j0]]
                jp[e0] = np.minimum(j0 + step, loop_end[li])
                cur_sz[e0] = size_at(np.minimum(jp[e0], J - 1), e0)
                continue
            first_unc = np.where(kc < kp, pend_pos[kc % mi, edges], jp)
            S_ = g_S[jj]
            could = act & ((g_hop[jj] == 0) | (first_unc[prev_e] > jj - S_)) & (kp - kc < mi)
            can = could & (jp < jp[succ_e] + W - 2 * Smax)
            if not can.any():
                held_back += int(could.sum())
                break
            e_ = np.flatnonzero(can)
            je = jj[e_]
            ready = np.where(g_hop[je] > 0, recv_at_ps[(je - S_[e_]) % W, prev_e[e_]], _NEVER)
            slot_ps = np.where(kp[e_] >= mi, hist_ps[kp[e_] % mi, e_], _NEVER)
            ready = np.maximum(np.maximum(ready, slot_ps), ready0_ps)
            sz = cur_sz[e_]
            copy = np.full(len(e_), _NEVER, dtype=np.int64)
            if host is not None:  # step latency, then the sending channel
                t1 = ready + step_ps[e_]
                b = busy_ps[sz]
                cs = np.maximum(t1, chan_free_ps[e_])
                chan_free_ps[e_] = np.where(b > 0, cs + b, chan_free_ps[e_])
                nv = nvl_edge[e_]
                ready = np.where(b > 0, np.where(nv, cs, cs + b), t1)
                if simple:
                    copy = np.where(nv & (b > 0), cs + b, _NEVER)
            post = np.maximum(ready, last_post_ps[e_])  # the connection's order
            last_post_ps[e_] = post
            si = kp[e_] % mi
            pend_pos[si, e_], pend_post_ps[si, e_] = je, post
            pend_sz[si, e_], pend_copy_ps[si, e_] = sz, copy
            kp[e_] += 1
            jp[e_] += 1
            cur_sz[e_] = size_at(np.minimum(jp[e_], J - 1), e_)
        waiting = kp > kc
        if not waiting.any():
            if (jp >= J).all():
                break
            raise RuntimeError("ring engine: no send can go on")  # pragma: no cover
        # 2. book every waiting send that no send still to be booked can come before on
        #    its NVLink ports (sends without NVLink: at once, their QP is their own)
        rows = steps[:int((kp - kc).max())]  # as deep as the most sends waiting on an edge
        flat = ((kc[None, :] + rows) % mi) * E + edges[None, :]  # oldest first
        post_ps = pend_post_ps.ravel()[flat]
        POS = pend_pos.ravel()[flat]
        held = rows < (kp - kc)[None, :]
        tstar_ps = int(post_ps[0][waiting].min())
        ok = _safe(post_ps, POS, held, tstar_ps, look_ps, jp, kp, kc, last_post_ps, nvl_user,
                   src, nvl_to_e, prev_e, g_hop, g_S, J, mi, n)
        depth = int(ok.any(axis=1).sum())  # the rows booked now (a prefix: in post order)
        ok, post_ps, POS, flat = ok[:depth], post_ps[:depth], POS[:depth], flat[:depth]
        SZ = np.where(ok, pend_sz.ravel()[flat], 0)
        recv = np.full((depth, E), _NEVER, dtype=np.int64)
        net_at = post_ps
        if len(nvl_users):
            u = nvl_users
            lu = ok[:, u]
            t = np.where(lu, post_ps[:, u], _NEVER)
            d = np.where(lu, nvl_ps[SZ[:, u]], 0)
            pj = POS[:, u]
            c = piece_at[ch_of[u][None, :], (pos_of[u][None, :] - g_hop[pj]) % n]
            tie = ((g_lh[pj] * nc + ch_of[u][None, :]) * n + c) * Smax + g_s[pj]
            left = eg_rows.book(t, d, egress_free_ps, start=True, order=t, tie=tie)
            end = in_rows.book(left, d, ingress_free_ps, start=False, order=t, tie=tie)
            nvl_bytes += int(size_wire_bytes[SZ[:, u]][lu].sum())
            full = np.full((depth, E), _NEVER, dtype=np.int64)
            full[:, u] = end + nvlink_latency_ps
            full = np.maximum(full, np.where(ok, pend_copy_ps.ravel()[flat], _NEVER))
            if host is not None and host.recv_copy:
                for m in range(depth):
                    rs = np.maximum(full[m], recv_free_ps)
                    rc = rs + busy_ps[SZ[m]]
                    recv_free_ps = np.where(ok[m] & nvl_edge, rc, recv_free_ps)
                    full[m] = np.where(nvl_edge, rc, full[m])
            recv = np.where(nvl_edge, full, recv)
            net_at = np.where(pxn_edge, full, post_ps)
        for m in range(depth):  # 3. the network: each QP's message after the one before
            qb = qp_frame_bytes[SZ[m]]  # (E, q) frame bytes per QP
            go = ok[m][:, None] & net_edge[:, None] & (qb > 0)
            if qdur_ps is not None:
                dur = qdur_ps[SZ[m], edges]
            else:
                dur = np.maximum(0, -np.floor_divide(-qp_wire_bytes[SZ[m]].astype(float), rate_Bpps)
                                 ).astype(np.int64)
            done = np.maximum(net_at[m][:, None], qp_free_ps) + dur
            qp_free_ps = np.where(go, done, qp_free_ps)
            posted_bytes_qp += np.where(go, qb, 0)
            frames += np.where(go, -(-qb // frame), 0)
            arrive = np.where(go, done + lat_ps, _NEVER).max(axis=1)
            recv[m] = np.where(net_edge, np.where(go.any(axis=1), arrive, post_ps[m]), recv[m])
        # 4. what the next sends wait for: the data (by grid position) and the slots
        for m in range(depth):
            okm = ok[m]
            if not okm.any():
                break
            e_ = np.flatnonzero(okm)
            recv_at_ps[POS[m, e_] % W, e_] = recv[m, e_]
            hist_ps[(kc[e_] + m) % mi, e_] = recv[m, e_]
            if _TRACE is not None:
                for e in e_:
                    j = int(POS[m, e])
                    _TRACE[(int(g_loop[j]), int(g_hop[j]), int(g_s[j]), int(ch_of[e]),
                            int(src[e]))] = (int(post_ps[m, e]), int(recv[m, e]))
        nok = ok.sum(axis=0)
        kc += nok
        count += int(nok.sum())
        first_post_ps = int(post_ps[ok].min()) if first_post_ps is None else min(first_post_ps,
                                                                      int(post_ps[ok].min()))
        last_recv_ps = max(last_recv_ps, int(recv[ok].max()))
    if dom is not None:
        for i, k in enumerate(key):
            dom.egress_free_ps[int(k)] = int(egress_free_ps[i])
            dom.ingress_free_ps[int(k)] = int(ingress_free_ps[i])
        dom.nbytes += nvl_bytes
    out = RingRun(launch_ps, t0 if first_post_ps is None else int(first_post_ps),
                  t0 if not count else last_recv_ps, count, nvlink_bytes=nvl_bytes,
                  held_back=held_back)
    out.flows = flows
    nodes = fabric.nodes
    for e in np.flatnonzero(qpn[:, 0] >= 0):
        for j in range(q):
            fid = int(qpn[e, j])
            if fid not in flows:
                continue
            nb, nf = int(posted_bytes_qp[e, j]), int(frames[e, j])
            out.posted_bytes[fid] = nb
            fluid.qps[fid].delivered_bytes += nb
            for nid, idx in fluid.qps[fid].links:  # what the ports count, as the fluid
                c = fluid.sent.setdefault((nid, idx), [0, 0, 0])  # transport counts it
                c[0] += nb
                c[1] += ser_time_ps(nb + nf * overhead, nodes[nid].ports[idx].rate_bps)
                c[2] += nf
    if out.last_finish_ps > eng.now_ps:
        fabric.run(out.last_finish_ps)
    return out


def _no_data(fid: int, got: int, now: int) -> None:
    """The ring engine's QPs are timed here, not by the fluid transport."""


def _safe(post_ps: np.ndarray, POS: np.ndarray, held: np.ndarray, tstar_ps: int, look_ps: int,
          jp: np.ndarray, kp: np.ndarray, kc: np.ndarray, last_post_ps: np.ndarray,
          nvl_user: np.ndarray, src: np.ndarray, to: np.ndarray, prev_e: np.ndarray,
          g_hop: np.ndarray, g_S: np.ndarray, J: int, mi: int, n: int) -> np.ndarray:
    """Which waiting sends (``(mi, E)``, oldest first: posted at ``post_ps`` at grid positions
    ``POS``, ``held`` where there is one) can be booked now: on an edge without NVLink all
    of them; on one with NVLink those posted before every send not yet booked that will
    take one of its ports: the others waiting there, and each user's next sends, posted no
    sooner than a lower bound (its connection's last post; the receipt of what it waits
    for, a send waiting on the edge before, or that edge's own bound, plus ``look_ps``).  With
    none, those posted before ``tstar_ps + look_ps`` (no send can be posted sooner)."""
    E = len(jp)
    big = np.iinfo(np.int64).max // 4
    jj = np.minimum(jp, J - 1)
    dep = jj - g_S[jj]                       # the position of the data the next send needs
    pv = prev_e
    match = held[:, pv] & (POS[:, pv] == dep[None, :])
    dep_post_ps = np.where(match, post_ps[:, pv], big).min(axis=0)  # waiting on the edge before
    needs = g_hop[jj] > 0
    slot_ps = np.where(kp - kc >= mi, post_ps[0] + look_ps, 0)  # its slot: the oldest waiting send
    lb_ps = np.full(E, tstar_ps + look_ps, dtype=np.int64)
    for _ in range(4):  # each pass carries the bounds one edge further round the ring
        data = np.where(needs, np.where(dep_post_ps < big, dep_post_ps + look_ps,
                                        lb_ps[pv] + look_ps), 0)
        lb_ps = np.maximum(np.maximum(np.maximum(lb_ps, last_post_ps), data), slot_ps)
        lb_ps = np.where(jp >= J, big, lb_ps)
    cand = held.copy()
    u = np.flatnonzero(nvl_user)
    for _ in range(8):
        h_eg = np.full(n, big, dtype=np.int64)
        h_in = np.full(n, big, dtype=np.int64)
        np.minimum.at(h_eg, src[u], lb_ps[u])
        np.minimum.at(h_in, to[u], lb_ps[u])
        out = held & ~cand  # waiting but not booked now: they come first at their ports
        if out[:, u].any():
            pu = np.where(out[:, u], post_ps[:, u], big).min(axis=0)
            np.minimum.at(h_eg, src[u], pu)
            np.minimum.at(h_in, to[u], pu)
        lim = np.minimum(h_eg[src], h_in[to])
        new = held & np.where(nvl_user[None, :], post_ps < lim[None, :], True)
        new = np.logical_and.accumulate(new, axis=0)
        if (new == cand).all():
            break
        cand = new
    else:  # pragma: no cover - not settled: the plain rule
        cand = np.zeros_like(held)
    if not cand.any():
        cand = np.logical_and.accumulate(held & (post_ps < tstar_ps + look_ps), axis=0)
    return cand


class _Fifo:
    """The NVLink ports of ``ports`` (one per user, GPUs ``0 .. n-1``) as FIFOs: a user's
    transfer starts when its port is free, in the order of ``order`` (ties by ``tie``),
    the port then busy for its duration.  Users come in rows (``(rows, users)`` arrays)."""

    def __init__(self, ports: np.ndarray, n: int) -> None:
        self.ports, self.n = ports, n

    def book(self, t: np.ndarray, d: np.ndarray, free: np.ndarray, *, start: bool,
             order: np.ndarray, tie: np.ndarray) -> np.ndarray:
        """Book the users arriving at ``t`` for ``d`` (0: none); ``free`` (per port) is
        moved on.  Returns when each starts (``start``) or ends (others: ``t``)."""
        out = t.copy()
        valid = d > 0
        if not valid.any():
            return out
        rows = np.broadcast_to(self.ports[None, :], t.shape)[valid]
        tv, dv = t[valid], d[valid]
        idx = np.lexsort((tie[valid], order[valid], rows))  # by port, order, tie
        r, T, D = rows[idx], tv[idx], dv[idx]
        head = np.empty(len(r), dtype=bool)  # the first of each port's run
        head[0] = True
        head[1:] = r[1:] != r[:-1]
        grp = np.cumsum(head) - 1
        cum = np.cumsum(D)
        cum -= (cum - D)[head][grp]  # the durations so far within the port's run
        # E_i = cum_i + max(free, max_{j<=i}(T_j - cum_{j-1})): a running max per run,
        # made one running max by lifting each run above the ones before it
        x = T - (cum - D)
        lift = (x.max() - x.min() + 1) * grp
        x = np.maximum.accumulate(x + lift) - lift
        end = cum + np.maximum(x, free[r])
        tail = np.empty(len(r), dtype=bool)
        tail[-1] = True
        tail[:-1] = head[1:]
        free[r[tail]] = end[tail]
        res = np.empty(len(r), dtype=np.int64)
        res[idx] = end - D if start else end
        out[valid] = res
        return out

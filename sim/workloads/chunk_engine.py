"""Collectives of repeated chunks at flow fidelity without transfer objects: the chunk
engine.

NCCL's picks for AllReduce on many nodes are trees: the tree (:func:`sim.workloads.nccl.
tree_chunks`: per channel a chunk per loop, partial sums up NCCL's double binary tree of
nodes, each node's GPUs chained under one head, and the total down) for small and middle
sizes, the NVLS tree (:func:`sim.workloads.nccl.nvls_chunks`: per channel and head a chunk
per loop, the GPUs' copies into the NVSwitch's reduce buffer, the sum to the head, partial
sums up the tree of nodes and the total down, the multicast store to every GPU) for large
ones.  At 1,024 nodes of 8 GPUs a 1 GiB NVLS tree call is 16,384 chunks of 19,454
transfers, 319 million; a 16 MiB tree call 8 million: too many to hold as
:class:`sim.workloads.nccl.Transfer` s and drive one by one
(:class:`sim.workloads.collective.CollectiveJob`).  But every chunk of one *stream* (a
channel, or a channel and head) has the same transfers, only their size differing, and
its connections carry one transfer each, so a transfer's FIFO slot is freed by the same
transfers of the chunk ``max_inflight`` earlier (the twin itself in a tree;
:func:`sim.workloads.nccl.nvls_slot_freers` in an NVLS tree).  The chunk engine builds
each chunk's transfers once per template (:func:`sim.workloads.nccl.tree_chunk_transfers`,
:func:`sim.workloads.nccl.nvls_chunk_transfers`) and
:class:`sim.workloads.chunk_kernel.ChunkKernel` (compiled with the simulator's core) plays
every transfer of every chunk, holding only the chunks in flight, as the job drives them:
NCCL's host side, the connections' order, NVLink as
:class:`~sim.workloads.collective.NvlinkDomain` books it; the network as FIFO links: each
message on every link of its QP's path, a link busy for its bytes at the link's rate from
when it is free (in the order messages are posted), received its path's latency after its
last link is done.

What it gives up against the job at flow fidelity: where QPs share a link the job shares
it among them (max-min rates, recomputed as QPs go busy and idle) and the engine serves
their messages one after another; where no link is shared the two post and receive every
transfer at the same picosecond (tests/test_chunk_engine.py; with NCCL's host side,
transfers that line up on one picosecond may take a port in another order).  Fixed
max-min shares with every QP sending, as the ring engine has them, are slow for a tree
whose QPs idle while chunks climb and descend.

Pooled NVLink (``pool_nvlink``, ``lossless collective --pool-nvlink``), NVLS and NVLS
trees only: most of an NVLS tree's transfers are inside nodes (per node and chunk the
GPUs' copies into the NVSwitch's reduce buffer, the sum to the head, its store and the
copies out to every GPU: 17 of 19 at 8 GPUs a node).  Pooled, a node's GPUs' copies into
one buffer are one transfer and the multicast copies out another, and every NVLink
transfer of a node books the node's ports as one resource as fast as its GPUs' together
(a transfer of ``k`` copies takes ``k / g`` of one copy's time on it), each GPU channel
still busy for its copy: every port carries the bytes it carried, the GPU channels their
work, and a chunk is 6 transfers a node instead of 19.  What it changes: a copy no longer
waits behind the copies another head's chunk put on *its* GPU's port but behind the
node's, so copies that would queue on one port overlap on the pool: measured on NVLS
trees of 2 to 1,024 nodes, the call's time moves by 0.6 % or less and a large run takes
2.2 to 2.7 times less CPU (docs/explanation/collectives.md, "Pooled NVLink").

No faults, stragglers, SHARP or NVLS nodes of more than :data:`MAX_GPUS_PER_NODE` GPUs
(:func:`sim.scenarios.collective.run_size` runs those on the job).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sim.workloads.nccl import (
    Algorithm,
    Collective,
    Protocol,
    Schedule,
    Transfer,
    chunk_users,
    connection_qps,
    nvls_chunk_transfers,
    nvls_chunks,
    nvls_slot_freers,
    send_nic_rank,
    tree_chunk_transfers,
    tree_chunks,
    tree_key,
)
from sim.workloads.ring_engine import RingRun, size_tables, time_at_ps
from sim.workloads.ring_kernel import int_array

__all__ = ["chunk_engine_problem", "chunk_sends", "nvlink_poolable", "pooled_template",
           "run_chunks"]

#: a test's hook: (stream, loop, template transfer) -> [posted, received]
_TRACE: dict | None = None
#: the most GPUs a node the chunk kernel takes in an NVLS tree: a transfer waits for at most
#: gpus + 3 others (the store into the multicast buffer: its data and every GPU's copy out
#: of the chunk max_inflight earlier), and the kernel counts them in a signed byte
MAX_GPUS_PER_NODE = 124
#: the last run's most chunks in flight and most events in its heap at once
LAST_STATS: dict[str, int] = {}


def chunk_engine_problem(sch: Schedule, delay_ps: Any = None) -> str | None:
    """Why the chunk engine cannot run ``sch`` (None: it can)."""
    if sch.collective is not Collective.ALLREDUCE or sch.algorithm not in (
            Algorithm.TREE, Algorithm.NVLS_TREE, Algorithm.NVLS):
        return (f"{sch.algorithm.value} {sch.collective.value} is not a tree or NVLS "
                f"AllReduce")
    if sch.aggregators:
        return "SHARP aggregators"
    if delay_ps:
        return "stragglers"
    if sch.algorithm is Algorithm.NVLS and sch.nranks > sch.gpus_per_node:
        return "NVLS across nodes runs on SHARP"
    if sch.algorithm is not Algorithm.TREE and sch.gpus_per_node > MAX_GPUS_PER_NODE:
        return f"more than {MAX_GPUS_PER_NODE} GPUs a node"
    return None


def chunk_sends(sch: Schedule) -> int:
    """The transfers of tree, NVLS or NVLS tree schedule ``sch`` (built or not)."""
    if sch.algorithm is Algorithm.TREE:  # an edge of the tree up and one down a chunk
        return 2 * (sch.nranks - 1) * sum(1 for _ in tree_chunks(sch))
    g = sch.gpus_per_node
    nodes = sch.nranks // g
    tree = sch.algorithm is Algorithm.NVLS_TREE
    # per node: the GPUs' copies in (the head's own added by itself in the tree), the sum
    # to the head, its store, the copies out; in the tree a send up and one down per edge
    per_chunk = nodes * (2 * g + 1 + (0 if tree else 1)) + (2 * (nodes - 1) if tree else 0)
    return per_chunk * sum(1 for _ in nvls_chunks(sch))


def nvlink_poolable(sch: Schedule) -> bool:
    """Whether :func:`run_chunks` can pool the nodes' NVLink of ``sch``: an NVLS or NVLS
    tree AllReduce on nodes of two or more GPUs."""
    return sch.algorithm in (Algorithm.NVLS, Algorithm.NVLS_TREE) and sch.gpus_per_node > 1


def pooled_template(trs: Sequence[Transfer], n: int, g: int, pool0: int
                    ) -> tuple[list[Transfer], list[int]]:
    """One NVLS chunk's transfers (:func:`sim.workloads.nccl.nvls_chunk_transfers`, ids from
    0, in order) on nodes whose NVLink ports are pooled (``pool_nvlink`` of
    :func:`run_chunks`), and per transfer how (the kernel's ``_TPOOL``).  A node ``k``'s
    pool is pseudo-rank ``pool0 + k``: its GPUs' copies into a reduce buffer become one
    transfer from the pool (``-copies``: ``copies / g`` of one copy's time on the pool's
    ports, every GPU channel that makes one busy for it), the multicast buffer's copies out
    one transfer to the pool (the same, with the GPUs' channels that take them out); the
    head's read of the sum and its store into the multicast buffer keep the head's channel
    and take the pool's ports (``1``: ``1 / g`` of their time); the network's transfers stay
    as they are (``0``).  Every port of a node then carries what it carried, as one resource
    ``g`` times as fast."""
    # each transfer's new id: a copy joins the group of the copy before it (a chunk lists
    # a buffer's copies together)
    new_id = [0] * len(trs)
    ends: list[tuple[int, int]] = []  # per new transfer: src, dst
    how: list[int] = []
    first: list[int] = []  # per new transfer: the first transfer it stands for
    group = None
    for i, t in enumerate(trs):
        if t.id != i:
            raise ValueError("pooled_template: a chunk's transfers numbered from 0, in order")
        src, dst = t.src, t.dst
        key = None
        if src < n <= dst and (dst - n) % 2 == 0:  # a GPU's copy into the reduce buffer
            key = dst
        elif dst < n <= src and (src - n) % 2 == 1:  # the multicast buffer's copy out
            key = src
        if key is not None and key == group:
            new_id[i] = len(how) - 1
            how[-1] -= 1
            continue
        new_id[i] = len(how)
        first.append(i)
        if key is None:  # the network (0), or the head's read of the sum or store (1)
            ends.append((src, dst))
            how.append(0 if (src < n) == (dst < n) else 1)
        elif src < n:
            ends.append((pool0 + src // g, dst))
            how.append(-1)
        else:
            ends.append((src, pool0 + dst // g))
            how.append(-1)
        group = key
    deps: list[set[int]] = [set() for _ in how]
    for i, t in enumerate(trs):
        deps[new_id[i]].update(new_id[d] for d in t.depends_on)
    out = []
    for j, ((src, dst), i) in enumerate(zip(ends, first, strict=True)):
        t = trs[i]
        out.append(Transfer(j, src, dst, t.channel, t.nbytes, t.wire_bytes, t.step, t.loop,
                            t.seq, t.reduce, t.src_block, t.dst_block, t.offset_bytes,
                            tuple(sorted(deps[j])), t.qp_bytes))
    return out, how


def _plan(sch: Schedule) -> tuple[list[int], list[int], list[list[Transfer]],
                                  list[list[tuple[int, ...]]], list[tuple[int, int, int]]]:
    """The streams of ``sch``: per stream its channel and template; the templates (a
    chunk's transfers, sized 1 byte) and per template transfer the transfers that free its
    slot; the chunks as (stream, loop, bytes), in the order the schedule lists them."""
    elt = sch.elem_bytes
    if sch.algorithm is Algorithm.TREE:  # a stream a channel; a template a (tree, head)
        keys: dict[tuple, int] = {}
        st_ch, st_tpl, tpls = [], [], []
        for ch in range(sch.nchannels):
            key = tree_key(sch, ch)
            if key not in keys:
                keys[key] = len(tpls)
                tpls.append(tree_chunk_transfers(sch, ch, 1))
            st_ch.append(ch)
            st_tpl.append(keys[key])
        freers = [[(j,) for j in range(len(t))] for t in tpls]  # the twin's own receipt
        chunks = [(ch, loop, nelem * elt) for ch, loop, _, nelem in tree_chunks(sch)]
        return st_ch, st_tpl, tpls, freers, chunks
    g = sch.gpus_per_node  # a stream a (channel, head); a template a (tree, head)
    tree = sch.algorithm is Algorithm.NVLS_TREE
    whiches = (0, 1) if tree else (0,)
    tpls = [nvls_chunk_transfers(sch, w, h, w, 1) for w in whiches for h in range(g)]
    st_ch = [ch for ch in range(sch.nchannels) for _ in range(g)]
    st_tpl = [(ch % 2 if tree else 0) * g + h for ch in range(sch.nchannels)
              for h in range(g)]
    freers = [nvls_slot_freers(t) for t in tpls]
    chunks = [(ch * g + h, loop, nelem * elt) for ch, loop, h, _, nelem in nvls_chunks(sch)]
    return st_ch, st_tpl, tpls, freers, chunks


def run_chunks(sch: Schedule, fabric: Any, hosts: Sequence[int], *, mtu_bytes: int,
               header_bytes: int | None = None, gpus_per_node: int = 1,
               nvlink: bool = True, nvlink_bps: int, nvlink_latency_ps: int,
               pxn: bool = True, host: Any = None, qp_base: int = 0x100,
               progress: Callable[[int, int], None] | None = None,
               pool_nvlink: bool = False) -> RingRun:
    """Run tree, NVLS or NVLS tree schedule ``sch`` (built or not: its parameters are what
    is read) on
    ``fabric``'s hosts ``hosts`` from the engine's current time at flow fidelity (module
    docstring); the keywords are :func:`sim.workloads.collective.run_schedule`'s.  The
    fabric's clock is moved to the last receipt; its
    :class:`~sim.workloads.collective.NvlinkDomain` keeps what the GPUs' ports are booked
    to.  ``pool_nvlink`` (NVLS and NVLS trees, :func:`nvlink_poolable`) runs the nodes'
    NVLink pooled (module docstring; :func:`pooled_template`).  Returns a
    :class:`~sim.workloads.ring_engine.RingRun` (its ``held_back`` 0)."""
    from sim.workloads.chunk_kernel import ChunkKernel
    from sim.workloads.collective import nvlink_domain
    from sim.workloads.fluid_transport import fluid_transport

    why = chunk_engine_problem(sch)
    if why is not None:
        raise ValueError(f"the chunk engine runs tree and NVLS AllReduces only: {why}")
    g = gpus_per_node
    if g != sch.gpus_per_node or not (nvlink or g == 1) or (
            sch.algorithm is not Algorithm.TREE and g == 1):
        raise ValueError(f"the chunk engine: {sch.algorithm.value} needs NVLink between the "
                         f"GPUs of a node (nvlink on, gpus_per_node {sch.gpus_per_node})")
    n, nc, q, mi = sch.nranks, sch.nchannels, sch.qps_per_connection, sch.max_inflight
    hdr_bytes = fabric.stack.header_bytes if header_bytes is None else header_bytes
    eng = fabric.engine
    t0 = eng.now_ps
    launch_ps = None if host is None else t0
    ready0_ps = t0 if host is None else t0 + host.launch_ps
    # the streams and their chunks' sizes, in the schedule's order; the templates
    st_ch_l, st_tpl_l, tpls, freers, chunks = _plan(sch)
    # the connections and QPs are the schedule's (so are ECMP's hashes) pooled or not
    conn_ends = [(np.array([t.src for t in trs], dtype=np.int64),
                  np.array([t.dst for t in trs], dtype=np.int64)) for trs in tpls]
    P0 = n + sch.buffers  # the pseudo-ranks without pools
    pools: list[list[int]] | None = None
    if pool_nvlink:
        if not nvlink_poolable(sch):
            raise ValueError("the chunk engine pools the NVLink of NVLS and NVLS trees only")
        pooled = [pooled_template(t, n, g, P0) for t in tpls]
        tpls = [p[0] for p in pooled]
        pools = [p[1] for p in pooled]
        freers = [nvls_slot_freers(t) for t in tpls]
    S = len(st_ch_l)
    size_list_bytes, size_ix = [0], {0: 0}  # the chunks' sizes (index 0: none)
    per_stream: list[list[int]] = [[] for _ in range(S)]
    for s, loop, nb in chunks:
        if nb not in size_ix:
            size_ix[nb] = len(size_list_bytes)
            size_list_bytes.append(nb)
        lst = per_stream[s]
        if loop != len(lst):
            raise ValueError("chunk engine: a stream's chunks are not its loops 0, 1, ..")
        lst.append(size_ix[nb])
    Lmax = max(1, max(len(x) for x in per_stream))
    st_loops = np.array([len(x) for x in per_stream], dtype=np.int64)
    st_sz = np.zeros((S, Lmax), dtype=np.int64)
    for s, lst in enumerate(per_stream):
        st_sz[s, :len(lst)] = lst
    st_ch = np.array(st_ch_l, dtype=np.int64)
    st_tpl = np.array(st_tpl_l, dtype=np.int64)
    # (a template's transfers carry its first stream's channel: the streams' are theirs)
    node = np.array([sch.node_of(r) for r in range(n + sch.buffers)], dtype=np.int64) \
        if sch.buffers else np.arange(n) // g
    if pools is not None:  # node k's pool: pseudo-rank P0 + k
        node = np.concatenate([node, np.arange(n // g, dtype=np.int64)])
    m = len(tpls[0])
    if any(len(t) != m for t in tpls) or m >= 1 << 20:
        raise ValueError("chunk engine: templates of unequal or too many transfers")
    T = len(tpls)
    tp = {k: np.zeros(T * m, dtype=np.int64) for k in
          ("src", "dst", "kind", "from", "to", "pool", "gpu", "ndeps", "net", "relay", "cix",
           "fifo")}
    uoff = np.zeros(T * m + 1, dtype=np.int64)
    users: list[int] = []
    soff = np.zeros(T * m + 1, dtype=np.int64)
    slot_users: list[int] = []
    nslot = np.zeros(T * m, dtype=np.int64)
    mnet = 0
    for ti, trs in enumerate(tpls):
        src = np.array([t.src for t in trs], dtype=np.int64)
        dst = np.array([t.dst for t in trs], dtype=np.int64)
        sl = slice(ti * m, (ti + 1) * m)
        tp["src"][sl], tp["dst"][sl] = src, dst
        same = node[src] == node[dst]
        relay = np.array([s_ if sm else send_nic_rank(int(s_), int(d), g, pxn)
                          for s_, d, sm in zip(src, dst, same, strict=True)], dtype=np.int64)
        relay[relay >= n] = src[relay >= n]
        kind = np.where(same, 0, np.where(relay == src, 1, 2))
        tp["kind"][sl], tp["relay"][sl] = kind, relay
        to = np.where(same, dst, relay)
        gpu = src < n
        if pools is None:
            tp["from"][sl] = np.where(src < n, src, -1)
            tp["to"][sl] = np.where(to < n, to, -1)
        else:  # a pooled transfer takes its node's pooled ports (n + node)
            how = np.array(pools[ti], dtype=np.int64)
            tp["pool"][sl] = how
            gpu |= src >= P0
            tp["from"][sl] = np.where(how != 0, np.where(gpu, n + node[src], -1),
                                      np.where(src < n, src, -1))
            tp["to"][sl] = np.where(how != 0, np.where((dst < n) | (dst >= P0),
                                                       n + node[dst], -1),
                                    np.where(to < n, to, -1))
        tp["gpu"][sl] = gpu
        copy = same & gpu  # a GPU channel's copy over NVLink: its end is kept
        tp["cix"][sl] = np.where(copy, 0, -1)
        tp["fifo"][sl] = np.where(same, 0, 1)
        tp["ndeps"][sl] = [len(t.depends_on) for t in trs]
        net = kind != 0
        k = int(net.sum())
        if ti and k != mnet:
            raise ValueError("chunk engine: templates of unequal network transfers")
        mnet = k
        tp["net"][sl] = np.where(net, np.cumsum(net) - 1, -1)
        us = chunk_users(trs)
        for j in range(m):
            uoff[ti * m + j + 1] = uoff[ti * m + j] + len(us[j])
            users.extend(us[j])
        # the FIFO slots: j's twin a chunk mi later waits for the freers of j in this one
        freed: list[list[int]] = [[] for _ in range(m)]
        for j, fr in enumerate(freers[ti]):
            nslot[ti * m + j] = len(fr)
            for f in fr:
                freed[f].append(j)
        for j in range(m):
            soff[ti * m + j + 1] = soff[ti * m + j] + len(freed[j])
            slot_users.extend(freed[j])
    # connections: the schedule's, numbered in (src, dst, channel) order (connection_qps)
    live = st_loops > 0
    P2 = 3 * n
    keys = []
    for s in np.flatnonzero(live):
        a, b = conn_ends[int(st_tpl[s])]
        keys.append((a * P2 + b) * nc + int(st_ch[s]))
    allkeys = np.sort(np.concatenate(keys)) if keys else np.zeros(0, dtype=np.int64)
    frame_bytes = mtu_bytes + hdr_bytes
    fluid = fluid_transport(fabric)
    host_of = list(hosts)
    # the QPs, (stream, network transfer, QP) in that order, as arrays: routed as the fluid
    # transport would open them (fluid.route) but not opened (a flow object each is 1.5 KB
    # and millions at 65,536 GPUs); their ports counted after the run (fluid.count_on)
    nq = S * mnet * q
    # per QP (its index e): path latency, connection (-1: no such QP), links, wire overhead
    # a frame, gathered in lists (a numpy item set is slow, millions at 65,536 GPUs)
    qp_e: list[int] = []
    lat_l: list[int] = []
    conn_l: list[int] = []
    nlinks_l: list[int] = []
    over_l: list[int] = []
    qp_links_l = array("q")
    link_ix: dict[Any, int] = {}  # the QPs' links (ports and PCIe), numbered by first use
    overhead_bytes = 0
    route = fluid.route
    for s in np.flatnonzero(live).tolist():
        ti, ch = int(st_tpl[s]), int(st_ch[s])
        sl = slice(ti * m, (ti + 1) * m)
        js = np.flatnonzero(tp["kind"][sl] != 0)
        conns = np.searchsorted(allkeys, (tp["src"][sl][js] * P2 + tp["dst"][sl][js]) * nc + ch)
        for b, net, relay, i in zip(tp["dst"][sl][js].tolist(), tp["net"][sl][js].tolist(),
                                    tp["relay"][sl][js].tolist(), conns.tolist(), strict=True):
            base = (s * mnet + net) * q
            for x in range(q):
                flow_path, _, lat, overhead_bytes = route(
                    qp_base + i * q + x, host_of[relay], host_of[b], frame_bytes, hdr_bytes)
                qp_e.append(base + x)
                lat_l.append(lat)
                over_l.append(overhead_bytes)
                conn_l.append(i)
                nlinks_l.append(len(flow_path))
                qp_links_l.extend([link_ix.setdefault(lk, len(link_ix)) for lk in flow_path])
    lat_ps = np.zeros(nq, dtype=np.int64)
    qp_conn = np.full(nq, -1, dtype=np.int64)
    qp_nlinks = np.zeros(nq, dtype=np.int64)
    qp_over_bytes = np.zeros(nq, dtype=np.int64)
    for arr, vals in ((lat_ps, lat_l), (qp_conn, conn_l), (qp_nlinks, nlinks_l),
                      (qp_over_bytes, over_l)):
        arr[qp_e] = vals
    nsz = len(size_list_bytes)
    size_wire_bytes, qp_frame_bytes, qp_wire_bytes, busy_ps, nvl_ps = size_tables(
        size_list_bytes, sch.protocol, q, mtu_bytes, hdr_bytes, overhead_bytes, host, nvlink_bps)
    # (link, size, piece): a link's time for a piece at its capacity
    cap_Bpps = np.array([fluid.net.capacity_Bpps[lk] for lk in link_ix], dtype=float)
    link_dur_ps = time_at_ps(qp_wire_bytes[None, :, :], cap_Bpps[:, None, None])
    qp_poff = np.zeros(nq + 1, dtype=np.int64)
    qp_poff[1:] = np.cumsum(qp_nlinks)
    qp_links = np.frombuffer(qp_links_l, dtype=np.int64) if qp_links_l else \
        np.zeros(0, dtype=np.int64)
    dom = nvlink_domain(fabric)
    key = np.asarray(host_of[:n], dtype=np.int64)  # a GPU's NVLink key: its NIC's host id
    egress_free_ps = np.array([dom.egress_free_ps.get(int(k), 0) for k in key], dtype=np.int64)
    ingress_free_ps = np.array([dom.ingress_free_ps.get(int(k), 0) for k in key],
                               dtype=np.int64)
    if pools is not None:  # a pool is free when its node's last port is
        egress_free_ps = np.concatenate([egress_free_ps, egress_free_ps.reshape(-1, g).max(1)])
        ingress_free_ps = np.concatenate([ingress_free_ps,
                                          ingress_free_ps.reshape(-1, g).max(1)])
    if int((tp["ndeps"] + nslot).max(initial=0)) > 127:  # the kernel's signed byte
        raise ValueError("chunk engine: a transfer waits for more than 127 others")
    # each template transfer's record (chunk_kernel's _T* fields, in their order)
    rec = np.stack([tp["src"], tp["dst"], tp["kind"], tp["from"], tp["to"], tp["pool"],
                    tp["gpu"], tp["ndeps"], uoff[:-1], uoff[1:], tp["net"], nslot, soff[:-1],
                    soff[1:], tp["cix"], tp["fifo"]], axis=1)
    A = int_array

    def A32(values):  # the templates' int32 arrays (checked: they fit)
        v = np.asarray(values, dtype=np.int64)
        if v.size and (v.min() < -(1 << 31) or v.max() >= 1 << 31):
            raise ValueError("chunk engine: a template field does not fit 32 bits")
        out = array("i")
        out.frombytes(v.astype("<i4").tobytes())
        return out

    kern = ChunkKernel(
        (S, m, mnet, q, mi, Lmax, n, nc, P0 + (n // g if pools is not None else 0), nsz,
         ready0_ps, nvlink_latency_ps, frame_bytes, g,
         0 if host is None else host.intra_ps, 0 if host is None else host.inter_ps),
        (A32(rec.ravel()), A32(users), A32(slot_users)),
        (A(st_tpl), A(st_ch), A(st_loops), A(st_sz.ravel())),
        (A(lat_ps), A(qp_poff), A(qp_links), A(link_dur_ps.ravel()),
         A(np.full(len(link_ix), -(1 << 62), dtype=np.int64))),
        (A(busy_ps), A(nvl_ps), A(size_wire_bytes), A(qp_frame_bytes.ravel())),
        A(egress_free_ps), A(ingress_free_ps),
        (host is not None, bool(host is not None and host.recv_copy),
         sch.protocol is Protocol.SIMPLE), _TRACE,
        # chunks in flight: a stream's GPUs may run max_inflight chunks ahead of each hop
        # of the tree, up and down (measured: 10,973 of 16,384 at 1,024 nodes of an NVLS
        # tree); a tree's chain through a node's GPUs adds its hops
        min(len(chunks), S * mi * (2 * (max(1, (n // g - 1).bit_length())
                                         + (g if sch.algorithm is Algorithm.TREE else 0))
                                    + 4)))
    order = [x for s, loop, _ in chunks if loop < mi for x in (s, loop)]
    total = m * len(chunks)  # (records: pooled, fewer than the transfers they stand for)
    prog = progress
    if pools is not None and progress is not None:  # counted in the transfers pooled ones
        real = chunk_sends(sch)                      # stand for, as the table counts them
        prog = lambda done, _total: progress(done * real // total, real)  # noqa: E731
    kern.start(A(order))
    left = kern.run(prog, total)
    LAST_STATS.update(chunks_in_flight=kern.peak_chunks, heap_peak=kern.peak_events,
                      transfers_per_chunk=m, chunks=len(chunks))
    if left or kern.count != total:
        raise RuntimeError(f"chunk engine: {kern.count} of {total} transfers received"
                           + (" (pooled records)" if pools is not None else ""))
    for i, k in enumerate(key):  # (pooled: a GPU's ports are free when its pool's are)
        e, f = int(kern.egress_free_ps[i]), int(kern.ingress_free_ps[i])
        if pools is not None:
            e = max(e, int(kern.egress_free_ps[n + i // g]))
            f = max(f, int(kern.ingress_free_ps[n + i // g]))
        dom.egress_free_ps[int(k)] = e
        dom.ingress_free_ps[int(k)] = f
    dom.nbytes += kern.nvl_bytes
    count = kern.count if pools is None else chunk_sends(sch)
    out = RingRun(launch_ps, int(kern.first_post_ps) if count else t0,
                  int(kern.last_recv_ps) if count else t0, count,
                  nvlink_bytes=kern.nvl_bytes)
    posted = np.frombuffer(kern.posted_bytes, dtype=np.int64).copy()
    frames = np.frombuffer(kern.frames, dtype=np.int64).copy()
    del kern
    # the QPs as the run reports them, and what their ports count (as the fluid transport
    # counts a QP's bytes: sent_elsewhere)
    link_of = list(link_ix)
    sports: dict[int, tuple[int, ...]] = {}
    live_e = np.flatnonzero(qp_conn >= 0)
    for e, i, nb in zip(live_e.tolist(), qp_conn[live_e].tolist(), posted[live_e].tolist(),
                        strict=True):
        fid = qp_base + i * q + e % q
        if i not in sports:
            sports[i] = connection_qps(i, q, qp_base)[2]
            ab, ch = divmod(int(allkeys[i]), nc)
            a, b = divmod(ab, P2)
            for y in range(q):
                out.flows[qp_base + i * q + y] = (a, b, ch, y, sports[i][y])
        out.posted_bytes[fid] = out.posted_bytes.get(fid, 0) + nb
    # what the ports count: each QP's bytes, wire time and frames on each port of its path
    # (as the fluid transport counts a QP's, sent_elsewhere), added once per (port, bytes,
    # wire bytes, frames) times the QPs that have them: the same integers
    if len(qp_links):
        kinds, kind_of = np.unique(np.stack([posted, posted + frames * qp_over_bytes, frames],
                                            axis=1), axis=0, return_inverse=True)
        nk = len(kinds)
        link_kinds, counts = np.unique(qp_links * nk + np.repeat(kind_of.ravel(), qp_nlinks),
                                       return_counts=True)
        kinds_l = kinds.tolist()
        for lk_kind, times in zip(link_kinds.tolist(), counts.tolist(), strict=True):
            li, kd = divmod(lk_kind, nk)
            if not isinstance(link_of[li][0], str):  # (not a PCIe link)
                nb, wire, nf = kinds_l[kd]
                fluid.count_on((link_of[li],), nb, wire, nf, times)
    if out.last_finish_ps > eng.now_ps:
        fabric.run(out.last_finish_ps)
    return out

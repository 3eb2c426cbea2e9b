"""NCCL's collectives as a dependency graph of network transfers (sans-IO, no engine).

:func:`schedule` turns one collective call (what ``ncclAllReduce`` & co. are given: the
collective, rank count, element count, datatype, channels, algorithm, protocol) into the list of
point-to-point :class:`Transfer` s NCCL performs, each naming its sender, receiver, channel,
bytes (data and on the wire), and the transfers it waits for.  A simulator drives the list
later; here nothing happens in time.  :func:`simulate_ownership` replays a schedule
symbolically (which rank holds which partial reduction of which bytes) and
:func:`verify` says whether every rank ends with what the collective promises.

Everything below follows NVIDIA/nccl; file names are of that repository.  The AllReduce
loops are ``runRing`` and ``runTreeSplit`` of ``src/device/all_reduce.h`` at commit 0e35f5d3
(the per-loop ``gridOffset`` kernels of the NCCL 2.1x series); ReduceScatter, AllGather and
Broadcast are modelled with the same loop over one rank's block (``loopSize = nChannels x
chunk``), as their ``runRing`` in that series did (from memory, not re-read for this model).
Later releases cut the buffer into one contiguous part per channel (``ncclCollCbdPart`` in
``src/include/device.h``); this model does not follow that yet.

The rules modelled (each with its source):

* Buffers and steps.  ``NCCL_STEPS`` = 8 FIFO slots per connection
  (``src/include/device.h``).  Simple's buffer is 4 MiB (``DEFAULT_BUFFSIZE``, ``src/init.cc``
  / ``comm.h``), so a step is 512 KiB; LL's buffer is ``NCCL_LL_LINES_PER_THREAD`` (8) x
  ``NCCL_LL_MAX_NTHREADS`` (512) x ``NCCL_STEPS`` x 16-byte ``ncclLLFifoLine`` = 512 KiB, half of
  it flags; LL128's is ``NCCL_LL128_ELEMS_PER_THREAD`` (120) x ``NCCL_LL128_MAX_NTHREADS`` (640)
  x ``NCCL_STEPS`` x 8 B = 4,915,200 B, 15 of every 16 words data (``device.h``).  The data
  bytes per step are ``Proto::calcBytePerStep()`` (``src/device/primitives.h``).
* Chunks and slices.  ``ALLREDUCE/ALLGATHER/REDUCESCATTER_CHUNKSTEPS`` = ``NCCL_STEPS/2`` = 4
  and ``..._SLICESTEPS`` = ``NCCL_STEPS/4`` = 2; ``BROADCAST_*`` = 1
  (``src/include/collectives.h``); only Simple ring uses them, every other
  algorithm/protocol uses 1/1 (``computeColl`` in ``src/enqueue.cc``).  So a Simple ring
  chunk is 2 MiB in two 1 MiB slices; the proxy posts each slice as one network send and at
  most ``NCCL_STEPS / slice_steps`` (4) are in flight per connection.  A slice is
  ``max(ceil(nelem / 32) * 16, sliceSize / 32)`` elements (``genericOp``,
  ``src/device/prims_simple.h``).
* Ring loop.  ``loopSize = nChannels x nRanks x chunk``; per loop the chunk shrinks to
  ``min(chunk, ceil(remaining / (nChannels x nRanks)))`` rounded up to
  ``(nthreads - WARP_SIZE) x 8`` bytes (Simple) or to ``nthreads x grain`` (LL, LL128), and
  chunk ``c`` of channel ``b`` starts at ``gridOffset + b*nRanks*chunk + c*chunk`` (Simple) or
  ``gridOffset + (c*nChannels + b)*chunk`` (LL, LL128) (``runRing``).  AllReduce is
  ``2(n-1)`` steps per chunk (n-1 reduce-and-forward, then n-1 copy-forward);
  ReduceScatter and AllGather ``n-1``; Broadcast a pipeline of ``n-1`` hops from the root.
* Dataflow.  Step k+1 of a chunk is sent only after step k was received from the
  predecessor (the kernel's ``recvReduceSend``/``recvCopySend``), so a slow hop delays
  the ring.
* Channel dropping.  ``while nBytes < nc * nt * threadThreshold``: drop a channel while
  ``nc >= 2``, else halve the threads while ``nt % 128 == 0`` (``getAlgoInfo``,
  ``src/enqueue.cc``), with ``threadThreshold`` = 64 (Simple), 8 (LL, times nRanks for ring)
  and 8 (LL128) (``NCCL_*_THREAD_THRESHOLD`` in ``src/include/comm.h``; the ``x nRanks`` in
  ``ncclTopoTuneModel``, ``src/graph/tuning.cc``): about 32 KiB per channel for Simple at
  512 threads.
* Tree AllReduce.  NCCL's double binary tree across nodes (``ncclGetBtree`` /
  ``ncclGetDtree``, ``src/graph/trees.cc``) with the GPUs of a node chained under the node's
  first GPU; the first half of the channels use tree 0, the second half the mirrored or
  shifted tree 1 (``connectTrees``, ``src/graph/connect.cc``).  Chunk = one step (512 KiB),
  halved while ``nBytes / (nChannels*chunk)`` is below ``8*depth`` (down to 128 KiB),
  ``4*depth`` (64 KiB) and ``depth`` (32 KiB) (``computeColl``, ``src/enqueue.cc``), with
  ``depth = nRanks/nNodes - 1 + log2(nNodes)`` (``connectTrees``); LL128's chunk (one
  step) is halved while a channel gets fewer than 64, then 16, x (1 + log2(nNodes) + 0.1
  ppn) / ppn chunks, down to 128 KiB, then 32 KiB, in 1920-byte grains
  (``calcCollChunking``, ``src/enqueue.cc``, NCCL 2.30.7); a node forwards a chunk up
  after it received it from all its children, and down after it received it from its parent.
* NVLS and the NVLS tree AllReduce (NVLink SHARP: :func:`_nvls_allreduce`,
  ``RunWorkColl<.., NCCL_ALGO_NVLS / NCCL_ALGO_NVLS_TREE, ..>`` of ``all_reduce.h``,
  ``connectNvls`` of ``src/graph/connect.cc``).  Every GPU of a node is a head (one per
  NIC).  A channel takes a contiguous part of the buffer in loops of one chunk per head;
  the chunk is 128 KiB (``NCCL_NVLS_CHUNKSIZE``), at most 64 KiB for the tree from 4 nodes
  (``NCCL_NVLSTREE_MAX_CHUNKSIZE``), and shrinks for small calls (``calcCollChunking``).
  The NVSwitch's buffers are pseudo-ranks from ``nranks`` on (:func:`nvls_buffer`, as NCCL's
  NVLS peers ``nRanks + 1 + h``): per chunk every GPU sends its copy to the head's reduce
  buffer, the head receives the sum (``multimem.ld_reduce``), stores it once to the
  multicast buffer (``multimem.st``), which sends it to every GPU of the node.  Across nodes
  the heads of one index form NCCL's double binary tree over nodes (channel ``c`` on tree
  ``c % 2``), adding their children's partial sums before sending up, and storing what comes
  down.  NVLS runs on one node (across nodes NCCL needs CollNet for it), the NVLS tree on
  several; both Simple only, no channel dropping.
* CollNet on SHARP (:func:`_collnet_allreduce`, :func:`_nvls_sharp_gather`;
  ``RunWorkColl<.., NCCL_ALGO_NVLS / NCCL_ALGO_COLLNET_DIRECT / NCCL_ALGO_COLLNET_CHAIN,
  ..>`` across nodes and ``src/transport/coll_net.cc``): head k of every node sends its
  node's share to the SHARP aggregator of rail k (a pseudo-rank, :func:`sharp_aggregator`),
  which answers every head k once it has the chunks of a group of 8 channels from every
  node (:class:`_Sharp`: with rails over several leaves, each leaf's aggregator sums its
  nodes and a root per rail answers the leaves); inside the node NVLS, Direct (GPUs to the
  heads and back) or Chain (a chain of the node's GPUs).  AllReduce with all three,
  AllGather and ReduceScatter with NVLS and Direct.
* AllToAll and SendRecv are grouped ``ncclSend``/``ncclRecv`` (nccl-tests ``src/alltoall.cu``,
  ``src/sendrecv.cu``): in round d rank r sends to r+d; each peer's bytes are split into
  ``NCCL_NCHANNELS_PER_NET_PEER`` (2) parts aligned to 4 KiB (``ncclP2pPartBounds``,
  ``src/include/device.h``), each on a channel, the rounds moving over all channels (NCCL
  spreads them with ``ncclP2pChannelForPart``'s bit reversal; we take the next channels), and
  each part goes in 128 KiB chunks (``NCCL_P2P_NET_CHUNKSIZE``, ``src/init.cc``; 512 KiB,
  ``NCCL_P2P_NVL_CHUNKSIZE``, when every peer is on one node's NVLink), at most
  ``NCCL_STEPS`` in flight.
* Protocols on the wire.  LL: each 16-byte line carries 8 bytes of data and two 4-byte flags
  (``union ncclLLFifoLine``); LL128: each 128-byte line carries 120 bytes of data
  (``NCCL_LL128_LINESIZE``, ``NCCL_LL128_DATAELEMS``).
* QPs.  ``NCCL_IB_QPS_PER_CONNECTION`` (default 1) QPs per connection; every send is striped
  over them in ``ceil(ceil(size / nqps) / 128) * 128``-byte pieces (``ncclIbMultiSend``,
  ``src/transport/net_ib.cc``).  Each QP's RoCEv2 UDP source port is the kernel's
  ``rdma_get_udp_sport(0, lqpn, rqpn)`` (Linux ``include/rdma/ib_verbs.h``).

* Rings on several nodes (:func:`nccl_rings`, the default when the ranks fill more than one
  node): NCCL searches each channel's ring from a NIC (``src/graph/search.cc``, "Search
  Patterns": ``NET n -> GPU a -> GPU b -> .. -> GPU x -> NET n (or m if crossNic)``).
  ``ncclTopoSearchRecNet`` gives channel ``c`` the ``c``-th NIC of its list
  (``nets[(nChannels+i) % netCount]``) and starts at that NIC's local GPU
  (``net->net.localGpu``); on an NVSwitch node ``ncclTopoSearchNextGpuSort`` tries the
  neighbours first, the previous GPU ahead of the next one, so the ring runs ``r, r-1, ..,
  r+1`` (mod G) from rail ``r = c mod G``; ``NCCL_CROSS_NIC``'s default 2 starts the search
  with ``crossNic = 0`` (``ncclTopoCompute``), and then the ring leaves the node through the
  NIC it entered on (``backToNet``: ``net.asic``/``net.port`` must match the start NIC).
  So every inter-node hop goes NIC ``r`` to NIC ``r``: one rail.  The last GPU reaches that
  NIC over NVLink through GPU ``r`` (a ``PATH_PXN`` path, ``src/graph/topo.h``: "a GPU and a
  NIC using an intermediate GPU ... rail-local").  Not followed: the search's timeouts and
  bandwidth retries, ``ncclTopoDupChannels``, and the ``crossNic = 2`` rings that
  ``src/graph/connect.cc`` alternates between odd and even nodes ("Alternate rings to avoid
  crossing rails"), another in-rail solution that needs no PXN.
* Which NIC sends (:func:`send_nic_rank`): a network send from rank s to a GPU on another
  node leaves through the NIC of s's node on the destination GPU's rail (the GPU of s's node
  with the destination's local index), reached over NVLink when that is not s itself: PXN
  (``NCCL_PXN_DISABLE=0``, the default since NCCL 2.12; NVIDIA's blog "Doubling all2all
  Performance with NVIDIA Collective Communication Library 2.12", 2022).  For the rings of
  :func:`nccl_rings` that is the rail of the ring; for AllToAll and SendRecv it keeps every
  network byte in-rail.  Without PXN the send leaves through s's own NIC.

Not modelled: PAT, NVLS AllGather and ReduceScatter on one node, SHARP trees of more than
two levels, user-buffer registration, Reduce/Gather/Scatter; the algorithm and protocol are
the caller's (:mod:`sim.workloads.tuner` picks them as NCCL does).  Which hops go over NVLink is
decided where the schedule runs (:mod:`sim.workloads.collective`); the schedule itself lists
every send.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

__all__ = [
    "Collective", "Algorithm", "Protocol", "Transfer", "Connection", "Schedule",
    "ScheduleError", "schedule", "simulate_ownership", "verify", "topological_order",
    "Inputs", "inputs_set", "default_channels",
    "finish_times", "nccl_rings", "send_nic_rank", "nvls_buffer", "nvls_buffer_of", "rank_label",
    "nvls_tree_max_chunk_bytes", "nvls_chunks", "nvls_chunk_transfers",
    "nvls_slot_freers", "chunk_users", "sharp_aggregator",
    "collnet_direct_channels",
    "COLLNET_GROUP_CHANNELS",
    "btree", "dtree", "channel_tree", "qp_split", "step_data_bytes", "udp_sport", "wire_bytes",
    "connection_qps", "REMOTE_QP_BASE", "ring_hops",
    "DTYPE_BYTES",
    "NCCL_STEPS", "SIMPLE_BUFFSIZE_BYTES", "LL_BUFFSIZE_BYTES", "LL128_BUFFSIZE_BYTES",
    "P2P_NET_CHUNK_BYTES", "P2P_NVL_CHUNK_BYTES", "MAXCHANNELS", "WARP_SIZE",
]

# ---- constants (NVIDIA/nccl; see the module docstring for each file) ------------------------

#: FIFO slots per connection (``src/include/device.h``).
NCCL_STEPS = 8
#: Threads per warp (``device.h``).
WARP_SIZE = 32
#: Most channels a communicator has (``device.h``).
MAXCHANNELS = 64
#: Simple protocol buffer per connection, 4 MiB (``DEFAULT_BUFFSIZE``, ``src/init.cc``).
SIMPLE_BUFFSIZE_BYTES = 1 << 22
#: 16-byte ``ncclLLFifoLine``: data1, flag1, data2, flag2 (4 bytes each) (``device.h``).
LL_LINE_BYTES = 16
LL_LINE_DATA_BYTES = 8
#: LL buffer: 8 lines/thread x 512 threads x NCCL_STEPS x 16 B (``device.h``).
LL_BUFFSIZE_BYTES = 8 * 512 * NCCL_STEPS * LL_LINE_BYTES
#: LL128 line: 16 eight-byte words, 15 of them data (``NCCL_LL128_LINESIZE``/``DATAELEMS``).
LL128_LINE_BYTES = 128
LL128_LINE_DATA_BYTES = 120
#: LL128 buffer: 120 elements/thread x 640 threads x NCCL_STEPS x 8 B (``device.h``).
LL128_BUFFSIZE_BYTES = 120 * 640 * NCCL_STEPS * 8
#: P2P chunk over the network (``NCCL_P2P_NET_CHUNKSIZE`` default, ``src/init.cc``).
P2P_NET_CHUNK_BYTES = 128 * 1024
#: P2P chunk when every peer is on NVLink (one node), 512 KiB (``NCCL_P2P_NVL_CHUNKSIZE``,
#: ``src/init.cc``); with several nodes every peer's chunk is the network's (``p2pChunkSize``).
P2P_NVL_CHUNK_BYTES = 512 * 1024
#: NVLS chunk, 128 KiB (``NCCL_NVLS_CHUNKSIZE``, ``src/transport/nvls.cc``); the NVLS tree's
#: is at most 64 KiB from 4 nodes up (``NCCL_NVLSTREE_MAX_CHUNKSIZE``'s default, same file).
NVLS_CHUNK_BYTES = 128 * 1024
NVLS_TREE_MAX_CHUNK_BYTES = 64 * 1024
#: Channels whose chunks the collnet proxy posts as one network operation
#: (``COLLNET_GROUP_NSUBS``, ``src/transport/coll_net.cc``).
COLLNET_GROUP_CHANNELS = 8
#: Threads of a CollNet channel (``NCCL_MAX_NTHREADS``, ``src/include/device.h``) and the
#: bytes a thread before fewer channels (``ncclTopoTuneModel``, ``src/graph/tuning.cc``).
NCCL_MAX_NTHREADS = 640
COLLNET_THREAD_THRESHOLD = 512
#: the smallest chunk calcCollChunking shrinks an NVLS chunk to
NVLS_MIN_CHUNK_BYTES = 16 * 1024
#: P2P per-channel parts are aligned to 4 KiB (``ncclP2pPartBounds``, ``device.h``).
P2P_PART_ALIGN_BYTES = 4096
#: Multi-QP sends are cut in 128-byte multiples (``ncclIbMultiSend``, ``net_ib.cc``).
IB_QP_ALIGN_BYTES = 128
#: RoCEv2 UDP source ports start at 0xC000 (``IB_ROCE_UDP_ENCAP_VALID_PORT_MIN``,
#: Linux ``include/rdma/ib_verbs.h``).
ROCE_UDP_SPORT_MIN = 0xC000

#: Datatype sizes, named as nccl-tests names them (``test_typenames``, nccl-tests
#: ``src/common.cu``; sizes from ``ncclTypeSize``, ``src/include/collectives.h``).
DTYPE_BYTES: dict[str, int] = {
    "int8": 1, "uint8": 1, "int32": 4, "uint32": 4, "int64": 8, "uint64": 8,
    "half": 2, "float": 4, "double": 8, "bfloat16": 2,
}


class Collective(StrEnum):
    ALLREDUCE = "allreduce"
    REDUCESCATTER = "reducescatter"
    ALLGATHER = "allgather"
    ALLTOALL = "alltoall"
    SENDRECV = "sendrecv"
    BROADCAST = "broadcast"


class Algorithm(StrEnum):
    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"
    NVLS_TREE = "nvls_tree"
    COLLNET_DIRECT = "collnet_direct"
    COLLNET_CHAIN = "collnet_chain"


class Protocol(StrEnum):
    SIMPLE = "simple"
    LL = "ll"
    LL128 = "ll128"


#: Per-protocol (max threads, thread threshold): ``NCCL_*_MAX_NTHREADS`` (``device.h``),
#: ``NCCL_*_THREAD_THRESHOLD`` (``src/include/comm.h``).
_THREADS = {Protocol.SIMPLE: (512, 64), Protocol.LL: (512, 8), Protocol.LL128: (640, 8)}
#: (chunk steps, slice steps) of Simple ring (``src/include/collectives.h``).
_RING_STEPS = {
    Collective.ALLREDUCE: (NCCL_STEPS // 2, NCCL_STEPS // 4),
    Collective.ALLGATHER: (NCCL_STEPS // 2, NCCL_STEPS // 4),
    Collective.REDUCESCATTER: (NCCL_STEPS // 2, NCCL_STEPS // 4),
    Collective.BROADCAST: (1, 1),
}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _align_up(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


def step_data_bytes(protocol: Protocol | str) -> int:
    """Data bytes one FIFO step carries (``calcBytePerStep``, ``src/device/primitives.h``):
    Simple 512 KiB, LL 32 KiB (half of a 64 KiB step is flags), LL128 576,000 B."""
    protocol = Protocol(protocol)
    if protocol is Protocol.SIMPLE:
        return SIMPLE_BUFFSIZE_BYTES // NCCL_STEPS
    if protocol is Protocol.LL:
        return LL_BUFFSIZE_BYTES // NCCL_STEPS // 2
    return LL128_BUFFSIZE_BYTES // NCCL_STEPS * LL128_LINE_DATA_BYTES // LL128_LINE_BYTES


def wire_bytes(data_bytes: int, protocol: Protocol | str) -> int:
    """Bytes a protocol puts in the peer's buffer (what the NIC sends) for ``data_bytes``:
    Simple as is; LL one 16-byte line per 8 data bytes; LL128 one 128-byte line per 120."""
    protocol = Protocol(protocol)
    if protocol is Protocol.SIMPLE:
        return data_bytes
    if protocol is Protocol.LL:
        return -(-data_bytes // LL_LINE_DATA_BYTES) * LL_LINE_BYTES
    return -(-data_bytes // LL128_LINE_DATA_BYTES) * LL128_LINE_BYTES


def qp_split(nbytes: int, nqps: int) -> tuple[int, ...]:
    """How ``ncclIbMultiSend`` stripes one send over ``nqps`` QPs: each QP takes
    ``ceil(ceil(nbytes / nqps) / 128) * 128`` bytes of what is left (the last ones may get 0)."""
    if nqps < 1:
        raise ValueError(f"qps_per_connection must be >= 1, got {nqps}")
    piece = _align_up(_ceil_div(nbytes, nqps), IB_QP_ALIGN_BYTES)
    out, left = [], nbytes
    for _ in range(nqps):
        take = min(piece, left)
        out.append(take)
        left -= take
    return tuple(out)


def udp_sport(lqpn: int, rqpn: int) -> int:
    """RoCEv2 UDP source port of a QP pair when the GRH flow label is 0:
    ``rdma_calc_flow_label`` (the product of the QP numbers folded to 20 bits) then
    ``rdma_flow_label_to_udp_sport`` (14 low bits xor the 6 high ones, | 0xC000)
    (Linux ``include/rdma/ib_verbs.h``)."""
    v = (lqpn & 0xFFFFFF) * (rqpn & 0xFFFFFF)
    v ^= v >> 20
    v ^= v >> 40
    fl = v & 0xFFFFF
    low = (fl & 0x3FFF) ^ ((fl & 0xFC000) >> 14)
    return low | ROCE_UDP_SPORT_MIN


# ---- trees (src/graph/trees.cc) -------------------------------------------------------------

def btree(nranks: int, rank: int) -> tuple[int, tuple[int, ...]]:
    """(parent, children) of ``rank`` in NCCL's binary tree of ``nranks`` (``ncclGetBtree``):
    the lowest set bit ``b`` of the rank; parent ``(rank ^ b) | (b << 1)``, or ``rank ^ b`` when
    that is out of range; children ``rank - b/2`` and the largest ``rank + b/2^k`` in range.
    Rank 0 is the root and has one child.  -1 means none."""
    if not 0 <= rank < nranks:
        raise ValueError(f"rank {rank} not in 0..{nranks - 1}")
    bit = 1
    while bit < nranks and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, ((bit >> 1,) if nranks > 1 else ())
    up = (rank ^ bit) | (bit << 1)
    if up >= nranks:
        up = rank ^ bit
    low = bit >> 1
    kids: list[int] = []
    if low:
        kids.append(rank - low)
        d1 = rank + low
        while d1 >= nranks:
            d1 = rank + low if low else -1
            low >>= 1
        if d1 != -1:
            kids.append(d1)
    return up, tuple(kids)


def dtree(nranks: int, rank: int, which: int) -> tuple[int, tuple[int, ...]]:
    """(parent, children) in tree ``which`` (0 or 1) of NCCL's double binary tree
    (``ncclGetDtree``): tree 1 mirrors tree 0 (``nranks-1-r``) when ``nranks`` is even and
    shifts it by one rank when odd."""
    if which == 0:
        return btree(nranks, rank)
    if nranks % 2:
        up, kids = btree(nranks, (rank - 1) % nranks)
        return (-1 if up == -1 else (up + 1) % nranks), tuple((k + 1) % nranks for k in kids)
    up, kids = btree(nranks, nranks - 1 - rank)
    return (-1 if up == -1 else nranks - 1 - up), tuple(nranks - 1 - k for k in kids)


def channel_tree(nranks: int, gpus_per_node: int, which: int,
                 head: int = 0, chain: Sequence[int] | None = None
                 ) -> dict[int, tuple[int, tuple]]:
    """Every rank's (parent, children) in one channel's tree: the double binary tree ``which``
    over nodes, each node's GPUs chained under its ``head`` GPU (local ``head``, ``head +
    1``, ... mod ``gpus_per_node``; rank = node*gpus_per_node + local), the head linked to
    the parent and children nodes' heads.  A channel's head is the GPU of the NIC its tree
    leaves the node through: NCCL's tree search, like its ring search, starts channel ``c``
    at the ``c``-th NIC and its GPU (``ncclTopoSearchRecNet``, ``src/graph/search.cc``), so
    the channels' trees spread over a node's NICs (:func:`_tree_allreduce` gives channel
    ``c`` head ``c % gpus_per_node``).  [A] NCCL's default BALANCED_TREE pattern puts a
    node's second child on the chain's last GPU; here both children are on the head (its
    TREE pattern).  ``chain`` (local GPUs, ``head`` first): the chain NCCL's graph file
    gives instead."""
    g = gpus_per_node
    if nranks % g:
        raise ValueError(f"{nranks} ranks are not whole nodes of {g} GPUs")
    if not 0 <= head < g:
        raise ValueError(f"head {head}: a local GPU 0..{g - 1}")
    nnodes = nranks // g
    if chain is None:
        chain = [(head + i) % g for i in range(g)]
    elif sorted(chain) != list(range(g)) or chain[0] != head:
        raise ValueError(f"chain {list(chain)}: the node's {g} GPUs from head {head}")
    out: dict[int, tuple[int, tuple]] = {}
    for node in range(nnodes):
        up, kids = dtree(nnodes, node, which)
        base = node * g
        for i, local in enumerate(chain):
            r = base + local
            children = [base + chain[i + 1]] if i + 1 < g else []
            if i == 0:
                parent = -1 if up == -1 else up * g + head
                children += [k * g + head for k in kids]
            else:
                parent = base + chain[i - 1]
            out[r] = (parent, tuple(children))
    return out


# ---- rings and NICs on several nodes (src/graph/search.cc, connect.cc) ----------------------

def nccl_rings(nodes: int, gpus_per_node: int, nchannels: int) -> list[list[int]]:
    """Each channel's ring over ``nodes`` nodes of ``gpus_per_node`` GPUs (rank = node *
    gpus_per_node + local GPU), as NCCL builds them on a node with one NIC per GPU behind an
    NVSwitch (the module docstring gives the rule and its source): channel ``c`` enters and
    leaves every node on rail ``r = c % gpus_per_node`` and visits the node's GPUs ``r, r-1,
    ..., r+1`` (mod ``gpus_per_node``), the nodes in order 0..nodes-1.  The hop from a node's
    last GPU to the next node's first (local ``r``) is the only one between nodes."""
    for name, v in (("nodes", nodes), ("gpus_per_node", gpus_per_node),
                    ("nchannels", nchannels)):
        if not isinstance(v, int) or v < 1:
            raise ScheduleError(f"{name} must be a positive int, got {v!r}")
    g = gpus_per_node
    out = []
    for c in range(nchannels):
        r = c % g
        local = [(r - i) % g for i in range(g)]
        out.append([n * g + x for n in range(nodes) for x in local])
    return out


def default_channels(nodes: int, gpus_per_node: int) -> int:
    """The channel count when the caller names none: one ring per NIC of a node when the
    ranks fill several nodes of several GPUs (NCCL's ring search gives channel ``c`` the
    ``c``-th NIC, ``ncclTopoSearchRecNet`` in ``src/graph/search.cc``, and NCCL keeps
    searching for more channels while bandwidth allows, so a DGX-like node with one NIC per
    GPU gets at least one channel per NIC; its duplication of channels,
    ``ncclTopoDupChannels``, is not followed); else 2 (an assumption: a NIC-bound
    reference with one GPU per node)."""
    if nodes > 1 and gpus_per_node > 1:
        return min(gpus_per_node, MAXCHANNELS)
    return 2


def send_nic_rank(src: int, dst: int, gpus_per_node: int, pxn: bool = True) -> int:
    """The rank whose NIC sends a network transfer from ``src`` to ``dst`` (ranks node-major,
    ``gpus_per_node`` per node): with ``pxn`` the GPU of ``src``'s node on ``dst``'s rail
    (``dst``'s local index), which ``src`` reaches over NVLink when it is another GPU; without,
    ``src`` itself.  A transfer inside one node is ``src`` too (it needs no NIC)."""
    g = gpus_per_node
    if not pxn or g <= 1 or src // g == dst // g:
        return src
    return src // g * g + dst % g


# ---- the schedule -------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class Transfer:
    """One network send NCCL's proxy posts: ``nbytes`` of data (``wire_bytes`` in the peer's
    buffer) from rank ``src`` to ``dst`` on ``channel``.

    ``depends_on``: transfers that must have been *received* first, for data (the previous
    hop of the same chunk, or a tree node's children) and for a free FIFO slot (the send
    ``max_inflight`` places earlier on the same connection; in NVLS schedules the transfers
    that used what that send brought, :func:`nvls_slot_freers`).  ``seq`` is the position on the
    connection ``(src, dst, channel)``: sends leave in that order.  What it carries:
    bytes ``[offset_bytes, offset_bytes + nbytes)`` of block ``src_block`` as the sender holds
    it, stored by the receiver in block ``dst_block`` (``reduce``: combined with what it has).
    ``step`` is the hop of the chunk (ring), the tree phase, or the P2P round; ``loop`` the
    NCCL loop index; ``qp_bytes`` the wire bytes per QP.
    """

    id: int
    src: int
    dst: int
    channel: int
    nbytes: int
    wire_bytes: int
    step: int
    loop: int
    seq: int
    reduce: bool
    src_block: int
    dst_block: int
    offset_bytes: int
    depends_on: tuple[int, ...]
    qp_bytes: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Connection:
    """A (sender, receiver, channel) connection with its QP numbers and UDP source ports."""

    src: int
    dst: int
    channel: int
    qpns: tuple[int, ...]
    remote_qpns: tuple[int, ...]
    udp_sports: tuple[int, ...]


@dataclass(slots=True)
class Schedule:
    """A collective as NCCL runs it: the parameters it resolved and its transfers.

    ``nchannels``/``nthreads``: after channel dropping.  ``chunk_bytes``: the chunk of a full
    loop (ring: chunk steps x step data; tree: after the small-call halving; P2P: 128 KiB);
    a ring's last loop may use a smaller one.  ``slice_steps``/``max_inflight``: FIFO steps
    per network send and sends in flight per connection.  ``steps_per_loop``: hops per chunk
    (ring), 1 otherwise.  ``loops``: NCCL loops (P2P: most chunks per channel part).
    ``block_bytes``: ``count`` x element size, the block each rank contributes or receives.
    """

    collective: Collective
    algorithm: Algorithm
    protocol: Protocol
    nranks: int
    count: int
    dtype: str
    elem_bytes: int
    nchannels: int
    nthreads: int
    chunk_bytes: int
    slice_steps: int
    max_inflight: int
    steps_per_loop: int
    loops: int
    block_bytes: int
    root: int = 0
    gpus_per_node: int = 1
    qps_per_connection: int = 1
    p2p_channels_per_peer: int = 2
    #: NVLS: ``nvlsChunkSize`` and ``nvlsTreeMaxChunkSize`` (0: NCCL's default)
    nvls_chunk_bytes: int = NVLS_CHUNK_BYTES
    nvls_tree_max_chunk_bytes: int = 0
    transfers: list[Transfer] = field(default_factory=list)
    connections: dict[tuple[int, int, int], Connection] = field(default_factory=dict)
    #: each channel's ring order (ring algorithms; empty otherwise)
    rings: list[list[int]] = field(default_factory=list)
    #: the tree's chains of a node's GPUs (local order, head first), one per tree channel of
    #: NCCL's graph (:func:`tree_key`); empty: NCCL's default chain from each channel's head
    tree_chains: list[list[int]] = field(default_factory=list)
    #: NVLS buffers (NVLS, NVLS tree): ranks ``nranks ..`` that are no GPU but a node's
    #: NVLink SHARP buffer of one head, two per head (:func:`nvls_buffer`); 0 otherwise
    buffers: int = 0
    #: SHARP aggregators (CollNet: NVLS across nodes with ``sharp``, CollNet Direct and
    #: Chain): ranks ``3 x nranks ..``, one per rail (head index), that are no GPU but the
    #: InfiniBand switch's aggregation node of that rail (:func:`sharp_aggregator`); 0
    #: otherwise
    aggregators: int = 0
    #: CollNet: the nodes under one rail leaf, the first level of a SHARP tree (0: every
    #: node under one leaf per rail, a tree of one switch)
    sharp_nodes_per_leaf: int = 0
    #: elements one full loop moves (ring, tree, NVLS, NVLS tree; 0 for the others); for a
    #: ring or a tree a call ``k x loop_elems`` elements shorter has ``k`` loops fewer and
    #: the same last loop (:func:`truncated_count`)
    loop_elems: int = 0
    #: the count the channels, threads and chunks were resolved for (``full_count`` of
    #: :func:`schedule`: the call these are the first and last loops of; else ``count``)
    full_count: int = 0
    #: the communicator's channels (``nchannels`` of :func:`schedule`, before a small call
    #: drops some): a tree's channels are split between its two trees by it
    comm_channels: int = 0

    def node_of(self, rank: int) -> int:
        """The node of ``rank``: a GPU's (``rank // gpus_per_node``), an NVLS buffer's, or
        for a SHARP aggregator ``nodes + rail`` (a node of its own, in the network)."""
        if rank < self.nranks:
            return rank // self.gpus_per_node
        if rank >= 3 * self.nranks:
            return self.nranks // self.gpus_per_node + rank - 3 * self.nranks
        return nvls_buffer_of(rank, self.nranks, self.gpus_per_node)[0]

    def pseudo_ranks(self) -> list[int]:
        """Every rank of the schedule's transfers: the GPUs, the NVLS buffers, the SHARP
        aggregators."""
        n = self.nranks
        return [*range(n + self.buffers), *range(3 * n, 3 * n + self.aggregators)]

    def sent_bytes(self, rank: int) -> int:
        return sum(t.nbytes for t in self.transfers if t.src == rank)

    def received_bytes(self, rank: int) -> int:
        return sum(t.nbytes for t in self.transfers if t.dst == rank)


class ScheduleError(ValueError):
    """A schedule does not deliver what its collective promises (or bad arguments)."""


class _Builder:
    def __init__(self, sch: Schedule, comm_channels: int, qp_base: int = 0x100):
        self.sch = sch
        self.qp_base = qp_base
        self.comm_channels = comm_channels
        self.conn_sends: dict[tuple[int, int, int], list[int]] = defaultdict(list)
        self.last_hop: dict[tuple[int, int, int, int], int] = {}
        #: data bytes -> (wire bytes, wire bytes per QP): a schedule has few sizes, so these
        #: are worked out (and their tuples held) once per size, not per transfer
        self.sizes: dict[int, tuple[int, tuple[int, ...]]] = {}
        #: NVLS: (channel, head) -> per loop, per transfer of its chunk, the transfers that
        #: free its slot (nvls_slot_freers), None once no later chunk needs them
        self.nvls_freers: dict[tuple[int, int], list[list[tuple[int, ...]] | None]] = {}

    def add(self, src: int, dst: int, channel: int, nbytes: int, *, step: int, loop: int,
            reduce: bool, src_block: int, dst_block: int, offset_bytes: int,
            deps: Iterable[int] = (), slot: tuple[int, ...] | None = None) -> int:
        """Add a transfer; its FIFO slot: the send ``max_inflight`` before on its connection
        received, or (``slot``) the transfers that free that slot."""
        sch = self.sch
        sends = self.conn_sends[(src, dst, channel)]
        deps = deps if deps.__class__ is tuple else tuple(deps)
        if slot is not None:
            deps = (*deps, *slot)
        elif len(sends) >= sch.max_inflight:  # the FIFO slot: the send max_inflight before
            deps = (*deps, sends[len(sends) - sch.max_inflight])
        if len(deps) > 1:  # sorted, without repeats ((), (d,) are already)
            deps = tuple(sorted(set(deps)))
        tid = len(sch.transfers)
        sized = self.sizes.get(nbytes)
        if sized is None:
            wb = wire_bytes(nbytes, sch.protocol)
            sized = self.sizes[nbytes] = (wb, qp_split(wb, sch.qps_per_connection))
        sch.transfers.append(Transfer(
            id=tid, src=src, dst=dst, channel=channel, nbytes=nbytes, wire_bytes=sized[0],
            step=step, loop=loop, seq=len(sends), reduce=reduce, src_block=src_block,
            dst_block=dst_block, offset_bytes=offset_bytes, depends_on=deps,
            qp_bytes=sized[1]))
        sends.append(tid)
        return tid

    def finish(self) -> Schedule:
        sch = self.sch
        q = sch.qps_per_connection
        for i, key in enumerate(sorted(self.conn_sends)):
            src, dst, ch = key
            sch.connections[key] = Connection(src, dst, ch, *connection_qps(i, q, self.qp_base))
        return sch


#: The first remote QP number of a schedule's connections (connection_qps).
REMOTE_QP_BASE = 0x800000


def connection_qps(index: int, qps: int, qp_base: int = 0x100
                   ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The QP numbers, remote QP numbers and UDP source ports of connection ``index`` (the
    schedule's connections sorted by (src, dst, channel)) with ``qps`` QPs each:
    deterministic, ``qp_base + index * qps + i`` and ``REMOTE_QP_BASE + index * qps + i``."""
    lq = tuple(qp_base + index * qps + j for j in range(qps))
    rq = tuple(REMOTE_QP_BASE + index * qps + j for j in range(qps))
    return lq, rq, tuple(udp_sport(a, b) for a, b in zip(lq, rq, strict=True))


def _drop_channels(nbytes: int, nc: int, nt: int, threshold: int) -> tuple[int, int]:
    """``getAlgoInfo`` (src/enqueue.cc): fewer channels, then fewer threads, for small calls."""
    while nbytes < nc * nt * threshold:
        if nc >= 2:
            nc -= 1
        elif nt % 128 == 0:
            nt //= 2
        else:
            break
    return nc, nt


def _simple_slices(nelem: int, slice_elems: int, slice_per_chunk: int) -> list[tuple[int, int]]:
    """(offset, nelem) of the slices ``genericOp`` cuts a chunk into (prims_simple.h)."""
    size = max(-(-nelem // (16 * slice_per_chunk)) * 16, slice_elems // 32)
    out, off = [], 0
    while len(out) < slice_per_chunk and off < nelem:
        take = min(size, nelem - off)
        out.append((off, take))
        off += take
    return out


def schedule(collective: Collective | str, nranks: int, count: int, dtype: str = "float", *,
             nchannels: int = 8, algorithm: Algorithm | str = Algorithm.RING,
             protocol: Protocol | str = Protocol.SIMPLE, root: int = 0,
             gpus_per_node: int | None = None, qps_per_connection: int = 1,
             nthreads: int | None = None, rings: Sequence[Sequence[int]] | None = None,
             drop_channels: bool = True, p2p_channels_per_peer: int = 2,
             qp_base: int = 0x100, nvls_chunk_bytes: int = NVLS_CHUNK_BYTES,
             nvls_tree_max_chunk_bytes: int = 0, sharp: bool = False,
             sharp_nodes_per_leaf: int = 0, full_count: int | None = None,
             build: bool = True,
             tree_chains: Sequence[Sequence[int]] | None = None) -> Schedule:
    """The transfers NCCL performs for one call.

    ``count`` is the element count the NCCL call takes: ``ncclAllReduce``/``ncclBroadcast``
    count, ``ncclReduceScatter`` recvcount (per rank), ``ncclAllGather`` sendcount (per rank),
    and for AllToAll/SendRecv the elements sent to each peer.  ``nchannels`` is the
    communicator's channel count (``NCCL_MIN/MAX_NCHANNELS``); small calls use fewer
    (``drop_channels``).  ``rings`` gives each channel's ring order (default: NCCL's rail
    rings of :func:`nccl_rings` when the ranks fill several nodes of ``gpus_per_node``
    GPUs, else 0..n-1);
    ``gpus_per_node`` groups ranks into nodes for the tree and the rings (default: all on one
    node for ``nranks <= 8``, else 8).  SendRecv: rank r sends to r+1 and receives from r-1.
    ``p2p_channels_per_peer``: channels one AllToAll/SendRecv peer's bytes are spread over
    (``NCCL_NCHANNELS_PER_NET_PEER``: 2 in older ``src/graph/paths.cc``; newer releases
    default to -1 and compute it); the peers of successive rounds take the next channels,
    so an AllToAll uses them all.  ``qp_base``: the first local QP number (QPs are numbered
    from it, connection by connection); schedules that run at once on one fabric (several
    jobs, ``[[collective]]`` of a fabric file) need disjoint ranges.  NVLS and the NVLS tree:
    ``nvls_chunk_bytes`` (``nvlsChunkSize``) and ``nvls_tree_max_chunk_bytes``
    (``nvlsTreeMaxChunkSize``; 0: NCCL's default, 64 KiB from 4 nodes, else the chunk), as
    :func:`sim.workloads.tuner.nvls_tuning` gives them for a node.  ``sharp``: NVLS across
    nodes as NCCL runs it with CollNet (NVLS+SHARP, :func:`_nvls_sharp_allreduce`): the
    InfiniBand switches' SHARP aggregators (pseudo-ranks, :func:`sharp_aggregator`) sum the
    heads' node sums; on one node NCCL has no CollNet and ``sharp`` changes nothing.
    ``sharp_nodes_per_leaf``: the nodes under one rail leaf when the rails span several
    leaves (a SuperPOD's SUs), whose aggregators then send to each rail's root (0: one leaf
    per rail).  ``full_count`` (ring and tree): resolve the channels, threads
    and chunks for a call of that count, and build the transfers of ``count``: with
    ``count`` from :func:`truncated_count`, the first loops and the last loop of that call.
    ``build`` False: the parameters, the rings, ``loops`` and ``loop_elems`` only, no
    transfers and no connections (a call too big to hold transfer by transfer).
    """
    coll, algo, proto = Collective(collective), Algorithm(algorithm), Protocol(protocol)
    if dtype not in DTYPE_BYTES:
        raise ScheduleError(f"dtype {dtype!r}: expected one of {', '.join(DTYPE_BYTES)}")
    if not 1 <= nranks <= 1 << 16:
        raise ScheduleError(f"nranks must be in 1..65536, got {nranks}")
    if count < 0:
        raise ScheduleError(f"count must be >= 0, got {count}")
    if not 1 <= nchannels <= MAXCHANNELS:
        raise ScheduleError(f"nchannels must be in 1..{MAXCHANNELS}, got {nchannels}")
    if qps_per_connection < 1:
        raise ScheduleError(f"qps_per_connection must be >= 1, got {qps_per_connection}")
    if not 1 <= p2p_channels_per_peer <= MAXCHANNELS:
        raise ScheduleError(f"p2p_channels_per_peer must be in 1..{MAXCHANNELS}, "
                            f"got {p2p_channels_per_peer}")
    if not 0 <= root < nranks:
        raise ScheduleError(f"root {root} not in 0..{nranks - 1}")
    if not (NVLS_MIN_CHUNK_BYTES <= nvls_chunk_bytes <= 1 << 20
            and (nvls_tree_max_chunk_bytes == 0
                 or NVLS_MIN_CHUNK_BYTES <= nvls_tree_max_chunk_bytes <= 1 << 20)):
        raise ScheduleError(f"NVLS chunk sizes must be in {NVLS_MIN_CHUNK_BYTES}..{1 << 20} "
                            f"bytes, got {nvls_chunk_bytes} and {nvls_tree_max_chunk_bytes}")
    if not 0 < qp_base < 1 << 23:
        raise ScheduleError(f"qp_base must be in 1..{(1 << 23) - 1}, got {qp_base}")
    gpn = gpus_per_node or (nranks if nranks <= 8 else 8)
    sharp_gather = (algo in (Algorithm.NVLS, Algorithm.COLLNET_DIRECT) and sharp
                    and nranks > gpn
                    and coll in (Collective.ALLGATHER, Collective.REDUCESCATTER))
    if algo is not Algorithm.RING and coll is not Collective.ALLREDUCE and not sharp_gather:
        raise ScheduleError(f"the {algo.value} algorithm is modelled for allreduce only, not "
                            f"{coll.value} (nvls and collnet_direct across nodes with "
                            f"sharp: allgather and reducescatter too)")
    if algo is not Algorithm.RING and (gpn < 1 or nranks % gpn):
        raise ScheduleError(f"{algo.value}: {nranks} ranks are not whole nodes of {gpn} GPUs")
    nvls = algo in (Algorithm.NVLS, Algorithm.NVLS_TREE)
    if nvls and protocol != Protocol.SIMPLE:
        raise ScheduleError(f"{algo.value} runs the simple protocol only (NCCL's), not "
                            f"{Protocol(protocol).value}")
    if nvls and gpn < 2:
        raise ScheduleError(f"{algo.value}: NVLink SHARP needs 2 or more GPUs per node")
    if algo is Algorithm.NVLS and nranks > gpn and not sharp:
        raise ScheduleError("nvls across nodes runs with CollNet (NVLS+SHARP): sharp=True, "
                            "on a fabric with SHARP aggregators; nvls_tree is the NVLS tree")
    collnet = algo in (Algorithm.COLLNET_DIRECT, Algorithm.COLLNET_CHAIN)
    if sharp and algo not in (Algorithm.NVLS, Algorithm.COLLNET_DIRECT,
                              Algorithm.COLLNET_CHAIN):
        raise ScheduleError(f"sharp: CollNet's algorithms only (nvls across nodes, "
                            f"collnet_direct, collnet_chain), not {algo.value}")
    if collnet and not (sharp and nranks > gpn):
        raise ScheduleError(f"{algo.value}: CollNet runs across nodes on SHARP switches "
                            f"(sharp=True, two or more nodes)")
    if collnet and protocol != Protocol.SIMPLE:
        raise ScheduleError(f"{algo.value} runs the simple protocol only (NCCL's), not "
                            f"{Protocol(protocol).value}")
    if algo is Algorithm.NVLS_TREE and nranks == gpn:
        raise ScheduleError("nvls_tree: two or more nodes (one node runs nvls)")
    elt = DTYPE_BYTES[dtype]
    max_nt, threshold = _THREADS[proto]
    nt = max_nt if nthreads is None else nthreads
    if not (2 * WARP_SIZE <= nt <= max_nt and nt % WARP_SIZE == 0):
        raise ScheduleError(f"nthreads must be a multiple of {WARP_SIZE} in "
                            f"{2 * WARP_SIZE}..{max_nt} for {proto.value}, got {nt}")
    if algo is Algorithm.RING and proto is Protocol.LL:
        threshold *= nranks
    p2p = coll in (Collective.ALLTOALL, Collective.SENDRECV)
    full = count if full_count is None else full_count
    if full < count:
        raise ScheduleError(f"full_count {full} is below count {count}")
    if full != count and (p2p or algo not in (Algorithm.RING, Algorithm.TREE) or sharp):
        raise ScheduleError(f"full_count: ring and tree loops only, not "
                            f"{'p2p' if p2p else algo.value}")
    if coll in (Collective.ALLGATHER, Collective.REDUCESCATTER):
        total = full * elt * nranks  # "count is per rank" (computeColl, enqueue.cc)
    else:
        total = full * elt
    nc = nchannels
    if collnet:  # 640 threads, 512 bytes a thread (ncclTopoTuneModel)
        nt, threshold = NCCL_MAX_NTHREADS if nthreads is None else nt, COLLNET_THREAD_THRESHOLD
    if drop_channels and algo is Algorithm.COLLNET_DIRECT:
        nc = collnet_direct_channels(total, nc, nt, gpn)
    elif drop_channels and not p2p and not nvls:  # NVLS keeps its channels (getAlgoInfo)
        nc, nt = _drop_channels(total, nc, nt, threshold)
    if rings is None:
        nodes = nranks // gpn if gpn and nranks % gpn == 0 else 1
        rings = nccl_rings(nodes, gpn, nc) if nodes > 1 and gpn > 1 \
            else [list(range(nranks))] * nc
    if len(rings) < nc or any(sorted(r) != list(range(nranks)) for r in rings[:nc]):
        raise ScheduleError("rings: one permutation of 0..nranks-1 per channel")
    if p2p:
        chunk_steps, slice_steps = 1, 1
        chunk_bytes = P2P_NVL_CHUNK_BYTES if nranks <= gpn else P2P_NET_CHUNK_BYTES
    elif algo is Algorithm.RING and proto is Protocol.SIMPLE:
        chunk_steps, slice_steps = _RING_STEPS[coll]
        chunk_bytes = step_data_bytes(proto) * chunk_steps
    else:
        chunk_steps, slice_steps = 1, 1
        chunk_bytes = step_data_bytes(proto)
    block = count * elt
    sch = Schedule(coll, algo, proto, nranks, count, dtype, elt, nc, nt, chunk_bytes,
                   slice_steps, NCCL_STEPS // slice_steps, 0, 0, block, root, gpn,
                   qps_per_connection, p2p_channels_per_peer, nvls_chunk_bytes,
                   nvls_tree_max_chunk_bytes)
    if sharp_nodes_per_leaf < 0:
        raise ScheduleError(f"sharp_nodes_per_leaf must be >= 0, got {sharp_nodes_per_leaf}")
    sch.sharp_nodes_per_leaf = sharp_nodes_per_leaf
    sch.full_count = full
    sch.comm_channels = nchannels
    if tree_chains:
        if any(sorted(c) != list(range(gpn)) for c in tree_chains):
            raise ScheduleError(f"tree_chains: each a permutation of the node's {gpn} GPUs")
        sch.tree_chains = [list(c) for c in tree_chains]
    b = _Builder(sch, nchannels, qp_base)
    if nranks == 1 or count == 0:
        return b.finish()
    if not build:
        if algo is Algorithm.RING and not p2p:
            sch.rings = [list(r) for r in rings[:nc]]
        _loop_geometry(sch, coll)
        return sch
    if p2p:
        _p2p(b, coll)
    elif algo is Algorithm.TREE:
        _tree_allreduce(b)
    elif sharp_gather:
        _nvls_sharp_gather(b, coll)
    elif (nvls or collnet) and sharp and nranks > gpn:
        _collnet_allreduce(b)
    elif nvls:
        _nvls_allreduce(b)
    else:
        sch.rings = [list(r) for r in rings[:nc]]
        _ring(b, coll, sch.rings)
    return b.finish()


def _grain_bytes(protocol: Protocol) -> int:
    """``calcBytePerGrain`` (primitives.h): LL 8 data bytes per thread; LL128
    ``NCCL_LL128_SHMEM_ELEMS_PER_THREAD`` (8) x 15 / 16 eight-byte words = 60 bytes."""
    return LL_LINE_DATA_BYTES if protocol is Protocol.LL else 8 * 15 * 8 // 16


def _ring_chunk_elems(sch: Schedule, rem: int, parts: int) -> int:
    """The chunk of one ring loop (runRing): shrunk for the last loop, aligned as the kernel
    aligns it."""
    chunk = sch.chunk_bytes // sch.elem_bytes
    if sch.protocol is Protocol.SIMPLE:
        real = min(chunk, -(-rem // parts))
        # (nthreads - WARP_SIZE) * 8 bytes; nthreads in the kernel includes the sync warp.
        align = max(1, sch.nthreads * 8 // sch.elem_bytes)
        return -(-real // align) * align
    min_chunk = sch.nthreads * _grain_bytes(sch.protocol) // sch.elem_bytes
    if sch.protocol is Protocol.LL128:
        min_chunk //= 2
    min_chunk = max(1, min_chunk)
    return min(chunk, -(-rem // (parts * min_chunk)) * min_chunk)


def _loop_geometry(sch: Schedule, coll: Collective) -> None:
    """``loop_elems``, ``loops``, ``steps_per_loop`` and the chunk of a schedule built
    without its transfers (``build`` False), as its builder works them out."""
    n, nc, elt, algo = sch.nranks, sch.nchannels, sch.elem_bytes, sch.algorithm
    size = sch.count
    if coll in (Collective.ALLTOALL, Collective.SENDRECV) or sch.aggregators or (
            algo not in (Algorithm.RING, Algorithm.TREE, Algorithm.NVLS,
                         Algorithm.NVLS_TREE)):
        raise ScheduleError(f"a schedule without its transfers: ring, tree, nvls and "
                            f"nvls_tree loops only, not {algo.value} {coll.value}")
    if algo is Algorithm.RING:
        sch.steps_per_loop = ring_hops(coll, n)
        sch.loop_elems = nc * (n if coll is Collective.ALLREDUCE else 1) * (
            sch.chunk_bytes // elt)
        sch.loops = _ceil_div(size, sch.loop_elems)
    elif algo is Algorithm.TREE:
        chunk = _tree_chunk_elems(sch)
        sch.steps_per_loop, sch.loop_elems = 1, nc * chunk
        sch.loops = _ceil_div(size, sch.loop_elems)
    else:
        g = sch.gpus_per_node
        chunk = _nvls_chunk_bytes(sch, sch.full_count * elt, n // g) // elt
        sch.chunk_bytes, sch.steps_per_loop, sch.buffers = chunk * elt, 1, 2 * n
        sch.loop_elems = nc * g * chunk
        sch.loops = _ceil_div(_ceil_div(size, nc), g * chunk)


def truncated_count(sch: Schedule, loops: int) -> int:
    """The count of a call with ``loops`` loops of ``sch`` (a ring or tree schedule, built
    or not): its first ``loops - 1`` loops and its last loop, the same loops as ``sch``'s
    (:func:`schedule` with ``full_count=sch.count``); ``sch.count`` when it has no more
    loops than that.  Every full loop of a call has the same transfers (only the last one's
    chunk shrinks to what is left), so a call ``k x loop_elems`` elements shorter has ``k``
    full loops fewer and the same last loop.  (NVLS loops run in one part of the buffer per
    channel, the last channel's part shorter: not cut.)"""
    if not sch.loop_elems or sch.algorithm not in (Algorithm.RING, Algorithm.TREE):
        raise ScheduleError(f"{sch.algorithm.value} {sch.collective.value}: not a schedule of "
                            f"whole-buffer loops (ring and tree)")
    if loops < 2:
        raise ScheduleError(f"a truncated call keeps 2 or more loops, not {loops}")
    return sch.count - max(0, sch.loops - loops) * sch.loop_elems


def ring_hops(coll: Collective, n: int) -> int:
    """Hops of a ring chunk: AllReduce 2(n-1), the others n-1."""
    return 2 * (n - 1) if coll is Collective.ALLREDUCE else n - 1


def ring_loops(sch: Schedule) -> list[tuple[int, int]]:
    """(first element, chunk elements) of each loop of a ring schedule (``runRing``: the
    chunk shrinks in the last loop to what is left)."""
    per_loop = sch.nranks if sch.collective is Collective.ALLREDUCE else 1
    loop_elems = sch.nchannels * per_loop * (sch.chunk_bytes // sch.elem_bytes)
    return [(grid, _ring_chunk_elems(sch, sch.count - grid, sch.nchannels * per_loop))
            for grid in range(0, sch.count, loop_elems)]


def ring_piece(sch: Schedule, grid: int, real: int, ch: int, c: int) -> tuple[int, int]:
    """(first element, elements) of piece ``c`` of channel ``ch`` in the ring loop at
    ``grid`` with chunk ``real`` (AllReduce: chunk ``c``; the others: the channel's chunk
    of the block at ring position ``c``); elements <= 0: no such piece."""
    if sch.collective is Collective.ALLREDUCE:
        if sch.protocol is Protocol.SIMPLE:
            off = grid + ch * sch.nranks * real + c * real
        else:
            off = grid + (c * sch.nchannels + ch) * real
    else:
        off = grid + ch * real
    return off, min(real, sch.count - off)


def ring_slices(sch: Schedule, nelem: int) -> list[tuple[int, int]]:
    """(offset, elements) of the network sends one ring hop of a piece of ``nelem``
    elements takes: Simple's slices, else the piece whole."""
    if sch.protocol is not Protocol.SIMPLE:
        return [(0, nelem)]
    slice_elems = step_data_bytes(sch.protocol) // sch.elem_bytes * sch.slice_steps
    return _simple_slices(nelem, slice_elems, (sch.chunk_bytes // sch.elem_bytes)
                          // slice_elems)


def ring_first_sender(coll: Collective, c: int, ring: Sequence[int], root: int) -> int:
    """The ring position that sends hop 0 of piece ``c`` (``runRing``'s step 0)."""
    if coll in (Collective.ALLREDUCE, Collective.REDUCESCATTER):
        return (c + 1) % len(ring)  # RS: the block of position c reduced along c+1, ..., c
    if coll is Collective.ALLGATHER:
        return c                    # position c sends its own block first
    return ring.index(root)         # broadcast: a pipeline from the root


def _ring(b: _Builder, coll: Collective, rings: list[list[int]]) -> None:
    sch = b.sch
    n, nc = sch.nranks, sch.nchannels
    hops = ring_hops(coll, n)
    sch.steps_per_loop = hops
    sch.loop_elems = nc * (n if coll is Collective.ALLREDUCE else 1) * (
        sch.chunk_bytes // sch.elem_bytes)
    loops = ring_loops(sch)
    for loop, (grid, real) in enumerate(loops):
        # pieces: (channel, block id, chunk-local offset, nelem, ring of the piece)
        for hop in range(hops):
            for ch in range(nc):
                ring = rings[ch]
                for c in range(n):
                    off, nelem = ring_piece(sch, grid, real, ch, c)
                    if nelem <= 0:
                        continue
                    _ring_hop(b, coll, ring, ch, c, hop, loop, off, nelem)
    sch.loops = len(loops)


def _ring_hop(b: _Builder, coll: Collective, ring: list[int], ch: int, c: int, hop: int,
              loop: int, off: int, nelem: int) -> None:
    """Hop ``hop`` of piece ``c`` (AR: chunk index; RS/AG/BC: block by ring position)."""
    sch = b.sch
    n, elt = sch.nranks, sch.elem_bytes
    if coll is Collective.BROADCAST and c != 0:
        return
    reduce = (hop < n - 1 if coll is Collective.ALLREDUCE
              else coll is Collective.REDUCESCATTER)
    blk_src = blk_dst = 0 if coll in (Collective.ALLREDUCE, Collective.BROADCAST) \
        else ring[c]
    pos = (ring_first_sender(coll, c, ring, sch.root) + hop) % n
    src, dst = ring[pos], ring[(pos + 1) % n]
    for s, (soff, slen) in enumerate(ring_slices(sch, nelem)):
        key = (loop, ch, c, s)
        prev = b.last_hop.get(key)
        b.last_hop[key] = b.add(src, dst, ch, slen * elt, step=hop, loop=loop, reduce=reduce,
                                src_block=blk_src, dst_block=blk_dst,
                                offset_bytes=(off + soff) * elt,
                                deps=() if prev is None else (prev,))


def _tree_chunk_elems(sch: Schedule) -> int:
    """The tree's chunk in elements (``computeColl``/``calcCollChunking`` for the call of
    ``full_count`` elements; a call in one loop gets ``runTreeSplit``'s), set as
    ``sch.chunk_bytes``."""
    n, nc, elt, gpn = sch.nranks, sch.nchannels, sch.elem_bytes, sch.gpus_per_node
    nnodes = n // gpn
    nbytes = sch.full_count * elt
    depth = n // nnodes - 1 + int(math.log2(nnodes))
    chunk_b = sch.chunk_bytes
    # computeColl (enqueue.cc): halve the tree chunk for small calls.
    for mult, floor_b in ((8, 131072), (4, 65536), (1, 32768)):
        while (sch.protocol is Protocol.SIMPLE and nbytes // (nc * chunk_b) < depth * mult
               and chunk_b > floor_b):
            chunk_b //= 2
    if sch.protocol is Protocol.LL128:
        # calcCollChunking (src/enqueue.cc, NCCL 2.30.7): Tree/LL128 halves its chunk while
        # a channel would get fewer than 64 (then 16) x (1 + log2(nodes) + 0.1 ppn) / ppn
        # chunks, down to 128 KiB (then 32 KiB), aligned to the protocol's grain
        ppn = n / nnodes
        steps = 1 + int(math.log2(nnodes)) + 0.1 * ppn
        while nbytes // (nc * chunk_b) < steps * 64 / ppn and chunk_b > 131072:
            chunk_b //= 2
        while nbytes // (nc * chunk_b) < steps * 16 / ppn and chunk_b > 32768:
            chunk_b //= 2
        grain = _grain_bytes(sch.protocol) * 32  # per warp: NCCL_LL128 grain 1920 B
        chunk_b = max(grain, chunk_b // grain * grain)
    chunk = chunk_b // elt
    size = sch.full_count
    # runTreeSplit: if one loop covers it all, chunk = ceil(size / (nc * minChunk)) * minChunk.
    threads = sch.nthreads + WARP_SIZE + 3 * WARP_SIZE if sch.protocol is Protocol.SIMPLE \
        else sch.nthreads
    if sch.protocol is Protocol.SIMPLE:
        min_chunk = (threads - 2 * WARP_SIZE) * 8 * 8 // elt
    else:
        min_chunk = threads * _grain_bytes(sch.protocol) // elt
        if sch.protocol is Protocol.LL128:
            min_chunk //= 8
    min_chunk = max(1, min_chunk)
    if nc * chunk > size:
        chunk = -(-size // (nc * min_chunk)) * min_chunk
    sch.chunk_bytes = chunk * elt
    return chunk


def _tree_allreduce(b: _Builder) -> None:
    sch = b.sch
    chunk = _tree_chunk_elems(sch)
    sch.steps_per_loop = 1
    sch.loop_elems = sch.nchannels * chunk
    trees = [tree_of_channel(sch, ch) for ch in range(sch.nchannels)]
    orders = [_postorder(t) for t in trees]
    loops = 0
    for ch, loop, off, nelem in tree_chunks(sch):
        loops = max(loops, loop + 1)
        _tree_chunk(b, trees[ch], orders[ch], ch, loop, off * sch.elem_bytes,
                    nelem * sch.elem_bytes)
    sch.loops = loops


def tree_of_channel(sch: Schedule, ch: int) -> dict[int, tuple[int, tuple]]:
    """Channel ``ch``'s tree (:func:`channel_tree`): ``connectTrees`` doubles the
    communicator's channels, the first half on tree 0, the second on tree 1 (a call that
    dropped channels uses the first ones), head GPU ``ch % gpus_per_node``."""
    return channel_tree(sch.nranks, sch.gpus_per_node, *tree_key(sch, ch))


def tree_key(sch: Schedule, ch: int) -> tuple[Any, ...]:
    """(tree, head GPU) of channel ``ch`` of tree schedule ``sch`` (:func:`tree_of_channel`):
    channels of one key have the same tree.  With ``sch.tree_chains`` (NCCL's graph): (tree,
    head, chain), the chain of the graph's channel ``ch`` modulo the half, modulo its
    channels (the two trees' channels take the same chains, as ``connectTrees`` duplicates
    them)."""
    half = -(-(sch.comm_channels or sch.nchannels) // 2)
    which = 0 if ch < half else 1
    if sch.tree_chains:
        chain = tuple(sch.tree_chains[(ch % half) % len(sch.tree_chains)])
        return which, chain[0], chain
    return which, ch % sch.gpus_per_node


def tree_chunks(sch: Schedule) -> Iterator[tuple[int, int, int, int]]:
    """The chunks of tree schedule ``sch`` (built or not) in the order its transfers are
    listed: (channel, loop, first element, elements): loops of one chunk per channel, the
    last loop's chunks cut to what is left (a channel left without elements has none)."""
    chunk = sch.chunk_bytes // sch.elem_bytes
    size = sch.count
    nc = sch.nchannels
    for loop, grid in enumerate(range(0, size, nc * chunk)):
        for ch in range(nc):
            off = grid + ch * chunk
            nelem = min(chunk, size - off)
            if nelem > 0:
                yield ch, loop, off, nelem


def _tree_chunk(b: _Builder, tree: dict[int, tuple[int, tuple]], order: list[int], ch: int,
                loop: int, off: int, nbytes: int) -> None:
    """One chunk of a tree AllReduce on channel ``ch``: partial sums up ``tree`` (children
    before parents, ``order`` its post-order), then the total down.  Each connection
    carries one of its transfers: a transfer's FIFO slot is its twin's of the chunk
    ``max_inflight`` loops earlier."""
    kw = {"loop": loop, "src_block": 0, "dst_block": 0, "offset_bytes": off}
    up_of: dict[int, int] = {}
    for r in order:  # children before parents: reduce up
        parent, kids = tree[r]
        if parent == -1:
            continue
        up_of[r] = b.add(r, parent, ch, nbytes, step=0, reduce=True,
                         deps=[up_of[k] for k in kids], **kw)
    down_of: dict[int, int] = {}
    for r in reversed(order):  # parents before children: broadcast down
        parent, kids = tree[r]
        got = [up_of[k] for k in kids] if parent == -1 else [down_of[r]]
        for k in kids:
            down_of[k] = b.add(r, k, ch, nbytes, step=1, reduce=False, deps=got, **kw)


def tree_chunk_transfers(sch: Schedule, ch: int, nbytes: int) -> list[Transfer]:
    """The transfers of one chunk of ``nbytes`` on channel ``ch`` of tree schedule ``sch``
    (built or not), as its builder makes them, ids from 0 and without FIFO slots (each
    connection of a chunk carries one of its transfers, whose slot is freed by its twin
    of the chunk ``max_inflight`` loops earlier)."""
    one = replace(sch, transfers=[], connections={}, max_inflight=1 << 62)
    tree = tree_of_channel(sch, ch)
    _tree_chunk(_Builder(one, sch.comm_channels or sch.nchannels), tree, _postorder(tree),
                ch, 0, 0, nbytes)
    return one.transfers


def nvls_buffer(sch: Schedule, node: int, head: int, multicast: bool) -> int:
    """The pseudo-rank of node ``node``'s NVLS buffer of head ``head`` (NCCL's peers
    ``nRanks + 1 + h`` of ``connectNvls``, ``src/graph/connect.cc``): the reduce side
    (``multicast`` False: GPUs' data in, ``multimem.ld_reduce`` out) or the multicast side
    (``multimem.st`` in, every GPU out)."""
    return sch.nranks + 2 * (node * sch.gpus_per_node + head) + int(multicast)


def nvls_buffer_of(rank: int, nranks: int, gpus_per_node: int) -> tuple[int, int, bool]:
    """(node, head, multicast) of the NVLS buffer ``rank`` (``>= nranks``): the inverse of
    :func:`nvls_buffer`."""
    node_head, multicast = divmod(rank - nranks, 2)
    node, head = divmod(node_head, max(1, gpus_per_node))
    return node, head, bool(multicast)


def sharp_aggregator(sch: Schedule, rail: int) -> int:
    """The pseudo-rank of rail ``rail``'s SHARP aggregator (CollNet): ``3 x nranks + rail``,
    past every NVLS buffer a schedule may have."""
    return 3 * sch.nranks + rail


def collnet_direct_channels(nbytes: int, nc: int, nt: int, heads: int) -> int:
    """CollNet Direct's channels for a call of ``nbytes`` (``topoGetAlgoInfo``,
    ``src/enqueue.cc``): fewer while ``nbytes < nc x nt x heads x threshold``, first down to
    16, then 8, 4, 2, 1, the threshold halved on the way at 1.5 x each step."""
    thr = COLLNET_THREAD_THRESHOLD
    switch, flag = 16, True
    while switch >= 1 and flag:
        while (flag := nbytes < nc * nt * heads * thr) and nc > switch:
            if nc == switch + switch // 2:
                thr //= 2
            nc -= 1
        switch //= 2
    return nc


def _collnet_chunk_bytes(sch: Schedule, nbytes: int) -> int:
    """``calcCollChunking`` (``src/enqueue.cc``, NCCL 2.30.7) for CollNet Direct (chunks of
    one step, 512 KiB, halved against ``nChannels x nHeads x depth`` (depth 2) concurrent
    chunks) and Chain (256 KiB, against ``nChannels x depth``, depth the GPUs per node)."""
    nc, g = sch.nchannels, sch.gpus_per_node
    if sch.algorithm is Algorithm.COLLNET_DIRECT:
        chunk, per, depth = step_data_bytes(Protocol.SIMPLE), nc * g, 2
        rules = ((64, 131072), (8, 65536), (8, 32768))
    else:
        chunk, per, depth = min(256 * 1024, step_data_bytes(Protocol.SIMPLE)), nc, g
        rules = ((64, 131072), (8, 65536), (1, 32768))
    for mult, floor in rules:
        while nbytes // (per * chunk) < depth * mult and chunk > floor:
            chunk //= 2
    return chunk


def rank_label(rank: int, nranks: int, gpus_per_node: int, aggregators: int = 0) -> str:
    """How the outputs name a schedule's ``rank``: ``rank 5``, for an NVLS buffer
    (:func:`nvls_buffer`) ``NVLS reduce of head 1 (node 0)`` / ``NVLS multicast of ..``, for
    a SHARP aggregator (:func:`sharp_aggregator`, from ``3 x nranks``) ``SHARP aggregator
    of rail 1``; in a tree of two levels (``aggregators``: the schedule's count, more than
    one per rail) ``SHARP aggregator of rail 1 (leaf 0)`` / ``(root)``."""
    if rank < nranks:
        return f"rank {rank}"
    if rank >= 3 * nranks:  # rail h's under leaf l at l x GPUs + h (the roots after them)
        g = max(1, gpus_per_node)
        tree, rail = divmod(rank - 3 * nranks, g)
        levels = aggregators // g
        where = "" if levels <= 1 else " (root)" if tree == levels - 1 else f" (leaf {tree})"
        return f"SHARP aggregator of rail {rail}{where}"
    node, head, multicast = nvls_buffer_of(rank, nranks, gpus_per_node)
    return f"NVLS {'multicast' if multicast else 'reduce'} of head {head} (node {node})"


def nvls_tree_max_chunk_bytes(nodes: int, chunk_bytes: int) -> int:
    """``nvlsTreeMaxChunkSize`` by default (``NCCL_NVLSTREE_MAX_CHUNKSIZE`` unset and no
    Blackwell tuning, ``src/transport/nvls.cc``): 64 KiB from 4 nodes, else the chunk."""
    return NVLS_TREE_MAX_CHUNK_BYTES if nodes >= 4 else chunk_bytes


def _nvls_chunk_bytes(sch: Schedule, nbytes: int, nodes: int) -> int:
    """``calcCollChunking`` (``src/enqueue.cc``, NCCL 2.30.7) for NVLS and the NVLS tree: the
    chunk shrinks for small calls against ``nChannels x nHeads`` concurrent chunks."""
    ops = sch.nchannels * sch.gpus_per_node
    if sch.algorithm is Algorithm.NVLS:
        chunk = min(step_data_bytes(Protocol.SIMPLE), sch.nvls_chunk_bytes)
        rules = ((64, 65536), (8, 32768), (2, 16384))
    else:
        tree_max = (sch.nvls_tree_max_chunk_bytes
                    or nvls_tree_max_chunk_bytes(nodes, sch.nvls_chunk_bytes))
        chunk = min(sch.nvls_chunk_bytes, tree_max)
        rules = ((32, 262144), (16, 131072), (4, 65536), (1, 32768))
    for mult, to in rules:
        if nbytes < mult * ops * chunk and chunk > to:
            chunk = to
    return chunk


def _nvls_allreduce(b: _Builder) -> None:
    """NVLink SHARP AllReduce (``RunWorkColl<.., NCCL_ALGO_NVLS / NCCL_ALGO_NVLS_TREE,
    NCCL_PROTO_SIMPLE>``, ``src/device/all_reduce.h``).  Each channel takes a contiguous part
    of the buffer in loops of one chunk per head (every GPU of a node is a head, one per NIC);
    per chunk of head ``h`` on node ``k``: every GPU's copy of it goes through the NVSwitch
    (the ``multimem.ld_reduce`` of ``h``: GPU -> reduce buffer), ``h`` receives the sum
    (buffer -> ``h``), and ``h`` stores the result once to the multicast buffer
    (``multimem.st``: ``h`` -> buffer) that the switch copies to every GPU of the node
    (buffer -> GPU).  The NVLS tree (several nodes) puts NCCL's double binary tree over
    nodes between the heads of one index (channel ``c`` on tree ``c % 2``, as
    ``connectNvls``): ``h`` adds its children's partial sums to its node's, sends that to its
    parent's ``h`` and stores what comes down (the root: its total).  In the tree, ``h``'s own
    copy is added by ``h`` itself, not read through the switch, so that the symbolic replay
    counts it once: ``1/ppn`` of the reduce bytes are not on NVLink there."""
    sch = b.sch
    n, elt, g = sch.nranks, sch.elem_bytes, sch.gpus_per_node
    nodes = n // g
    chunk = _nvls_chunk_bytes(sch, sch.full_count * elt, nodes) // elt
    sch.chunk_bytes = chunk * elt
    sch.steps_per_loop = 1
    sch.buffers = 2 * n
    sch.loop_elems = sch.nchannels * g * chunk
    tree = sch.algorithm is Algorithm.NVLS_TREE
    loops = 0
    for ch, loop, h, off, nelem in nvls_chunks(sch):
        loops = max(loops, loop + 1)
        _nvls_chunk(b, tree, nodes, ch % 2, h, ch, loop, off * elt, nelem * elt)
    sch.loops = loops


def nvls_chunks(sch: Schedule) -> Iterator[tuple[int, int, int, int, int]]:
    """The chunks of NVLS or NVLS tree schedule ``sch`` (built or not) in the order its
    transfers are listed: (channel, loop, head, first element, elements).  Each channel
    takes a contiguous part of the buffer in loops of one chunk per head; the last loop
    shares the remainder over the heads (a head left without elements has no chunk)."""
    n, nc, elt, g = sch.nranks, sch.nchannels, sch.elem_bytes, sch.gpus_per_node
    size = sch.count
    chunk = _nvls_chunk_bytes(sch, sch.full_count * elt, n // g) // elt
    tree = sch.algorithm is Algorithm.NVLS_TREE
    last_align = max(1, (16384 if not tree else 16) // elt)
    part = _ceil_div(size, nc)
    for ch in range(nc):
        lo, hi = min(ch * part, size), min((ch + 1) * part, size)
        ck = chunk
        for loop, at in enumerate(range(lo, hi, g * chunk)):
            if hi - at < g * chunk:  # the last loop: the remainder over the heads
                ck = _align_up(_ceil_div(hi - at, g), last_align)
            for h in range(g):
                off = at + h * ck
                nelem = min(ck, hi - off)
                if nelem > 0:
                    yield ch, loop, h, off, nelem


def nvls_chunk_transfers(sch: Schedule, which: int, h: int, channel: int,
                         nbytes: int) -> list[Transfer]:
    """The transfers of one chunk of ``nbytes`` of head ``h`` on ``channel`` (tree
    ``which``) of NVLS or NVLS tree schedule ``sch``, as its builder makes them, ids from 0
    and without FIFO slots (every connection of a chunk carries one of its transfers; a
    transfer's slot is freed by :func:`nvls_slot_freers` of the chunk ``max_inflight``
    loops earlier)."""
    one = replace(sch, transfers=[], connections={}, max_inflight=1 << 62)
    b = _Builder(one, sch.nchannels)
    _nvls_chunk(b, sch.algorithm is Algorithm.NVLS_TREE, sch.nranks // sch.gpus_per_node,
                which, h, channel, 0, 0, nbytes)
    return one.transfers


class _Sharp:
    """The SHARP trees of a CollNet schedule: rail ``h``'s aggregator under each leaf
    (``nodes_per_leaf`` nodes a leaf; all nodes under one when 0) and, with several leaves,
    its root (:func:`sharp_aggregator` numbers them: leaf ``l``'s of rail ``h`` is ``3 x
    nranks + l x GPUs + h``, the roots follow).  A head sends a chunk to its leaf's
    aggregator (:meth:`leaf_of`, recorded by :meth:`up`); :meth:`settle` adds, per chunk,
    the leaf -> root and root -> leaf transfers (two levels) and says, per leaf, who sends
    the result down and what that waits for: the ups of the chunk's group of 8 channels from
    every node (one level), or the root's answer, which waits for every leaf's part of the
    group."""

    def __init__(self, sch: Schedule, nodes: int, nodes_per_leaf: int) -> None:
        self.sch, self.g = sch, sch.gpus_per_node
        self.npl = nodes_per_leaf if 0 < nodes_per_leaf < nodes else nodes
        self.leaves = _ceil_div(nodes, self.npl)
        sch.aggregators = self.g * (self.leaves + (1 if self.leaves > 1 else 0))
        #: the hops a chunk makes in the tree beyond head -> leaf -> head: leaf -> root ->
        #: leaf with two levels (the steps after them move on by as many)
        self.extra_steps = 2 if self.leaves > 1 else 0
        self.ups: dict[tuple[int, int], dict[int, list[int]]] = defaultdict(
            lambda: defaultdict(list))

    def leaf_of(self, node: int, rail: int) -> int:
        return 3 * self.sch.nranks + (node // self.npl) * self.g + rail

    def up(self, rail: int, group: int, node: int, tid: int) -> None:
        self.ups[(rail, group)][node // self.npl].append(tid)

    def settle(self, b: _Builder, pieces: list[tuple], reduce: bool, step: int
               ) -> list[dict[int, tuple[int, tuple[int, ...]]]]:
        """``pieces``: (channel, rail, group, nbytes, transfer keywords, leaves that need the
        result) of one loop; returns per piece {leaf: (sender, deps)} of the result.  The
        leaf -> root and root -> leaf transfers are steps ``step`` and ``step + 1``."""
        n, g = self.sch.nranks, self.g
        if self.leaves == 1:
            return [{0: (3 * n + h, tuple(self.ups[(h, grp)][0]))}
                    for _ch, h, grp, _nb, _kw, _need in pieces]
        root = 3 * n + self.leaves * g
        to_root: dict[tuple[int, int], list[int]] = defaultdict(list)
        for ch, h, grp, nb, kw, _need in pieces:
            for leaf, ups in sorted(self.ups[(h, grp)].items()):
                if not reduce and not any(b.sch.transfers[u].offset_bytes
                                          == kw["offset_bytes"]
                                          and b.sch.transfers[u].src_block == kw["src_block"]
                                          for u in ups):
                    continue  # a copy: only the leaf that has the chunk sends it up
                to_root[(h, grp)].append(b.add(3 * n + leaf * g + h, root + h, ch, nb,
                                               step=step, reduce=reduce, deps=ups, **kw))
        out = []
        for ch, h, grp, nb, kw, need in pieces:
            deps = tuple(to_root[(h, grp)])
            out.append({leaf: (3 * n + leaf * g + h,
                               (b.add(root + h, 3 * n + leaf * g + h, ch, nb, step=step + 1,
                                      reduce=False, deps=deps, **kw),))
                        for leaf in sorted(need)})
        return out


def _collnet_allreduce(b: _Builder) -> None:
    """CollNet AllReduce across nodes on SHARP switches (``RunWorkColl<.., NCCL_ALGO_NVLS /
    NCCL_ALGO_COLLNET_DIRECT / NCCL_ALGO_COLLNET_CHAIN, ..>`` of ``src/device/all_reduce.h``
    with ``oneNode`` false, and the collnet proxy, ``src/transport/coll_net.cc``; NCCL 2.30.7).

    Layout: NVLS and Direct: a loop covers ``nChannels x nHeads`` chunks, channel ``b``'s
    chunk of head ``k`` at ``loop x loopSize + (b x nHeads + k) x chunk``; Chain: one head per
    channel (the GPU of the channel's NIC, ``b mod GPUs``), channel ``b``'s chunk at ``loop x
    loopSize + b x chunk``; chunks clipped to the buffer.  Per chunk and node, inside the
    node: NVLS: every GPU's copy into the NVSwitch, the head reads the sum; Direct: every
    other GPU sends its copy to the head, which adds them; Chain: a reduce chain from the
    last GPU of the channel's chain to its head.  Then head ``k`` sends the node's sum to
    the SHARP aggregator of its rail (``reduce``, over the head's own NIC); the aggregator
    returns the sum of every node to every node's head ``k``, which passes it on: NVLS: one
    store to the multicast buffer, copied to every GPU; Direct: a copy to every other GPU;
    Chain: down the chain.

    The aggregator answers a chunk only when it has the chunks of the same loop of every
    channel of its group, from every node: the proxy posts one ``iallreduce`` per group of
    ``COLLNET_GROUP_NSUBS`` (8) of a NIC's channels and step once each has its data
    (``coll_net.cc``), and the switch returns a reduction when all its members contributed.
    The group's chunks go as separate transfers (one connection per channel) where the
    proxy posts one message of the group's bytes [A]."""
    sch = b.sch
    n, nc, elt, g = sch.nranks, sch.nchannels, sch.elem_bytes, sch.gpus_per_node
    nodes = n // g
    size = sch.count
    algo = sch.algorithm
    if algo is Algorithm.NVLS:
        chunk = _nvls_chunk_bytes(sch, size * elt, nodes) // elt
        sch.buffers = 2 * n
    else:
        chunk = _collnet_chunk_bytes(sch, size * elt) // elt
    sch.chunk_bytes = chunk * elt
    sch.steps_per_loop = 1
    net = _Sharp(sch, nodes, sch.sharp_nodes_per_leaf)
    chain = algo is Algorithm.COLLNET_CHAIN
    heads_per_channel = 1 if chain else g
    loop_elems = nc * heads_per_channel * chunk
    loops = _ceil_div(size, loop_elems)
    kw = {"src_block": 0, "dst_block": 0}
    for loop in range(loops):
        net.ups.clear()  # per (rail, group of 8 of its NIC's channels, leaf): the ups
        pieces = []
        for ch in range(nc):
            for j in range(heads_per_channel):
                h = ch % g if chain else j
                off = loop * loop_elems + (ch * heads_per_channel + j) * chunk
                nelem = min(chunk, size - off)
                if nelem <= 0:
                    continue
                # the channel's place among its NIC's channels: every channel is on every
                # head's NIC, except in the chain (channel b on NIC b mod GPUs)
                group = (ch // g if chain else ch) // COLLNET_GROUP_CHANNELS
                nb, ob = nelem * elt, off * elt
                order = [(h + i) % g for i in range(g)]  # the chain: head first [A]
                for k in range(nodes):
                    gpu = [k * g + i for i in order]
                    if algo is Algorithm.NVLS:
                        red = nvls_buffer(sch, k, h, False)
                        ins = [b.add(k * g + i, red, ch, nb, step=0, loop=loop, reduce=True,
                                     offset_bytes=ob, **kw) for i in range(g)]
                        last = (b.add(red, gpu[0], ch, nb, step=1, loop=loop, reduce=False,
                                      offset_bytes=ob, deps=ins, **kw),)
                    elif algo is Algorithm.COLLNET_DIRECT:
                        last = tuple(b.add(r, gpu[0], ch, nb, step=0, loop=loop, reduce=True,
                                           offset_bytes=ob, **kw) for r in gpu[1:])
                    else:  # up the chain, from its last GPU to its head
                        last = ()
                        for a in range(g - 1, 0, -1):
                            last = (b.add(gpu[a], gpu[a - 1], ch, nb, step=g - a - 1,
                                          loop=loop, reduce=True, offset_bytes=ob, deps=last,
                                          **kw),)
                    t = b.add(gpu[0], net.leaf_of(k, h), ch, nb, step=g, loop=loop,
                              reduce=True, offset_bytes=ob, deps=last, **kw)
                    net.up(h, group, k, t)
                pieces.append((ch, h, group, nb, {"loop": loop, "offset_bytes": ob, **kw},
                               range(net.leaves)))
        for (ch, h, _group, nb, pkw, _need), res in zip(
                pieces, net.settle(b, pieces, True, g + 1), strict=True):
            ob = pkw["offset_bytes"]
            order = [(h + i) % g for i in range(g)]
            for k in range(nodes):
                gpu = [k * g + i for i in order]
                agg, deps = res[k // net.npl]
                x = net.extra_steps
                got = b.add(agg, gpu[0], ch, nb, step=g + 1 + x, loop=loop, reduce=False,
                            offset_bytes=ob, deps=deps, **kw)
                if algo is Algorithm.NVLS:
                    mc = nvls_buffer(sch, k, h, True)
                    st = b.add(gpu[0], mc, ch, nb, step=g + 2 + x, loop=loop, reduce=False,
                               offset_bytes=ob, deps=(got,), **kw)
                    for i in range(g):
                        b.add(mc, k * g + i, ch, nb, step=g + 3 + x, loop=loop, reduce=False,
                              offset_bytes=ob, deps=(st,), **kw)
                elif algo is Algorithm.COLLNET_DIRECT:
                    for r in gpu[1:]:
                        b.add(gpu[0], r, ch, nb, step=g + 2 + x, loop=loop, reduce=False,
                              offset_bytes=ob, deps=(got,), **kw)
                else:  # down the chain
                    for a in range(1, g):
                        got = b.add(gpu[a - 1], gpu[a], ch, nb, step=g + 1 + a + x, loop=loop,
                                    reduce=False, offset_bytes=ob, deps=(got,), **kw)
    sch.loops = loops


def _nvls_sharp_gather(b: _Builder, coll: Collective) -> None:
    """AllGather and ReduceScatter across nodes on SHARP, NVLS+SHARP and CollNet Direct
    (``RunWorkColl<ncclFuncAllGather / ncclFuncReduceScatter, .., NCCL_ALGO_NVLS /
    NCCL_ALGO_COLLNET_DIRECT, ..>``, the "NVLS + IB SHARP" branch and the CollNet Direct
    kernel of ``src/device/all_gather.h`` / ``reduce_scatter.h``, NCCL 2.30.7).  Rail ``h``
    (GPU ``h`` of every node) has a window of ``nodes x count`` elements, node ``k``'s block
    at ``k x count``; a loop covers ``nChannels`` chunks of it, channel ``b``'s at ``loop x
    nChannels x chunk + b x chunk``, cut where it crosses from one node's block to the next.

    AllGather, per piece of node ``k``'s block on rail ``h``: its owner (GPU ``h`` of node
    ``k``) sends it to the rail's SHARP aggregator, which returns it to head ``h`` of every
    node (SHARP's allgather: every member receives the whole window); each head passes it
    to the other GPUs of its node: NVLS: one store to the node's multicast buffer, which
    copies it to every GPU; Direct: a copy to each.  ReduceScatter, per piece of the block of
    rank ``k x GPUs + h``: every GPU of every node sends its copy to head ``h`` of its node
    (NVLS: into the NVSwitch's reduce buffer, whose sum the head reads; Direct: to the head,
    which adds them to its own), the head sends the node's sum to the aggregator, which
    returns the sum of every node to the block's owner (head ``h`` of node ``k``).  The
    aggregator answers a piece when it has the pieces of the same loop of every channel of
    its group of 8 (as AllReduce's)."""
    sch = b.sch
    n, nc, elt, g = sch.nranks, sch.nchannels, sch.elem_bytes, sch.gpus_per_node
    nodes = n // g
    count = sch.count
    direct = sch.algorithm is Algorithm.COLLNET_DIRECT
    if direct:
        chunk = _collnet_chunk_bytes(sch, count * elt * n) // elt
    else:
        chunk = _nvls_chunk_bytes(sch, count * elt * n, nodes) // elt
        sch.buffers = 2 * n
    sch.chunk_bytes = chunk * elt
    sch.steps_per_loop = 1
    net = _Sharp(sch, nodes, sch.sharp_nodes_per_leaf)
    window = nodes * count
    loop_elems = nc * chunk
    loops = _ceil_div(window, loop_elems)
    gather = coll is Collective.ALLGATHER
    for loop in range(loops):
        net.ups.clear()
        pieces = []
        for ch in range(nc):
            lo = loop * loop_elems + ch * chunk
            hi = min(lo + chunk, window)
            group = ch // COLLNET_GROUP_CHANNELS
            while lo < hi:  # cut at the nodes' blocks
                k, off = divmod(lo, count)
                ln = min(hi, (k + 1) * count) - lo
                for h in range(g):
                    owner = k * g + h
                    kw = {"loop": loop, "src_block": owner, "dst_block": owner,
                          "offset_bytes": off * elt}
                    nb = ln * elt
                    if gather:
                        t = b.add(owner, net.leaf_of(k, h), ch, nb, step=0, reduce=False,
                                  **kw)
                        net.up(h, group, k, t)
                    else:
                        for m in range(nodes):
                            head = m * g + h
                            if direct:  # the node's other GPUs to the head, which adds them
                                got = tuple(b.add(m * g + i, head, ch, nb, step=0,
                                                  reduce=True, **kw)
                                            for i in range(g) if i != h)
                            else:  # every GPU into the NVSwitch, the head reads the sum
                                red = nvls_buffer(sch, m, h, False)
                                ins = [b.add(m * g + i, red, ch, nb, step=0, reduce=True,
                                             **kw) for i in range(g)]
                                got = (b.add(red, head, ch, nb, step=1, reduce=False,
                                             deps=ins, **kw),)
                            t = b.add(head, net.leaf_of(m, h), ch, nb, step=2, reduce=True,
                                      deps=got, **kw)
                            net.up(h, group, m, t)
                    need = range(net.leaves) if gather else (k // net.npl,)
                    pieces.append((ch, h, group, nb, kw, need))
                lo += ln
        for (ch, h, _group, nb, kw, _need), res in zip(
                pieces, net.settle(b, pieces, not gather, 1 if gather else 3), strict=True):
            x = net.extra_steps
            owner = kw["src_block"]
            if not gather:  # the sum of every node to the block's owner
                agg, deps = res[owner // g // net.npl]
                b.add(agg, owner, ch, nb, step=3 + x, reduce=False, deps=deps, **kw)
                continue
            for m in range(nodes):  # the window to every node's head, then its GPUs
                head = m * g + h
                agg, deps = res[m // net.npl]
                got = b.add(agg, head, ch, nb, step=1 + x, reduce=False, deps=deps, **kw)
                if direct:
                    for i in range(g):
                        if i != h and m * g + i != owner:
                            b.add(head, m * g + i, ch, nb, step=2 + x, reduce=False,
                                  deps=(got,), **kw)
                    continue
                mc = nvls_buffer(sch, m, h, True)
                st = b.add(head, mc, ch, nb, step=2 + x, reduce=False, deps=(got,), **kw)
                for i in range(g):
                    if m * g + i != owner:
                        b.add(mc, m * g + i, ch, nb, step=3 + x, reduce=False, deps=(st,),
                              **kw)
    sch.loops = loops


def _nvls_chunk(b: _Builder, tree: bool, nodes: int, which: int, h: int, ch: int, loop: int,
                off: int, nbytes: int) -> None:
    """The transfers of one chunk of head ``h`` on every node (:func:`_nvls_allreduce`).
    A transfer's FIFO slot is freed when what it brought has been used: by the
    transfers of the chunk ``max_inflight`` loops earlier that take its twin's data
    (:func:`nvls_slot_freers`)."""
    sch = b.sch
    g = sch.gpus_per_node
    kw = {"loop": loop, "src_block": 0, "dst_block": 0, "offset_bytes": off}
    hist = b.nvls_freers.setdefault((ch, h), [])
    mi = sch.max_inflight
    freers = hist[loop - mi] if loop >= mi else None
    first = len(sch.transfers)

    def add(src: int, dst: int, step: int, reduce: bool, deps: Iterable[int] = ()) -> int:
        slot = None if freers is None else freers[len(sch.transfers) - first]
        return b.add(src, dst, ch, nbytes, step=step, reduce=reduce, deps=deps, slot=slot, **kw)

    head = [k * g + h for k in range(nodes)]
    summed: list[int] = []  # per node: the transfer that gave head h its node's sum
    for k in range(nodes):
        red = nvls_buffer(sch, k, h, False)
        ins = [add(k * g + i, red, 0, True) for i in range(g) if not (tree and i == h)]
        summed.append(add(red, head[k], 1, tree, ins))
    up: dict[int, int] = {}
    if tree:  # children before parents: partial sums up the tree of nodes
        kids_of = {k: dtree(nodes, k, which) for k in range(nodes)}
        for k in _postorder(kids_of):
            parent, kids = kids_of[k]
            if parent != -1:
                up[k] = add(head[k], head[parent], 2, True,
                            [summed[k], *(up[c] for c in kids_of[k][1])])
        order = list(reversed(_postorder(kids_of)))
    else:
        kids_of, order = {0: (-1, ())}, [0]
    down: dict[int, int] = {}
    for k in order:  # parents before children: the result down, then to every GPU
        parent, kids = kids_of[k]
        got = [summed[k], *(up[c] for c in kids)] if parent == -1 else [down[k]]
        for c in kids:
            down[c] = add(head[k], head[c], 3, False, got)
        mc = nvls_buffer(sch, k, h, True)
        st = add(head[k], mc, 4, False, got)
        for i in range(g):
            add(mc, k * g + i, 5, False, (st,))
    hist.append(nvls_slot_freers(sch.transfers[first:], first))
    if loop >= mi:
        hist[loop - mi] = None


def nvls_slot_freers(chunk: Sequence[Transfer], first: int = 0) -> list[tuple[int, ...]]:
    """Per transfer of one NVLS chunk (ids from ``first``): the transfers whose receipt
    frees its FIFO slot for the twin ``max_inflight`` chunks later, the ones that use
    the data it brought (NCCL's receiver releases a slot once it has read it: the NVSwitch
    buffer's once the head has read the sum or the GPUs the result, a head's once its next
    send has used it), or the transfer itself when no transfer of the chunk uses it."""
    return [tuple(u) if u else (t.id,)
            for t, u in zip(chunk, chunk_users(chunk, first), strict=True)]


def chunk_users(chunk: Sequence[Transfer], first: int = 0) -> list[list[int]]:
    """Per transfer of ``chunk`` (ids from ``first``, in order): the ids of the transfers of
    the chunk that depend on it, in id order."""
    users: list[list[int]] = [[] for _ in chunk]
    for t in chunk:
        for d in t.depends_on:
            if d >= first:
                users[d - first].append(t.id)
    return users


def _postorder(tree: dict[int, tuple[int, tuple]]) -> list[int]:
    root = next(r for r, (p, _) in tree.items() if p == -1)
    out: list[int] = []
    stack = [(root, False)]
    while stack:
        r, done = stack.pop()
        if done:
            out.append(r)
            continue
        stack.append((r, True))
        stack.extend((k, False) for k in reversed(tree[r][1]))
    return out


def _p2p(b: _Builder, coll: Collective) -> None:
    """Grouped send/recv: per peer ``p2p_channels_per_peer`` parts (4 KiB aligned), each on
    its own channel, in chunks of ``sch.chunk_bytes`` (512 KiB on one node, 128 KiB across
    nodes); successive rounds move to the next channels."""
    sch = b.sch
    n, nc, elt = sch.nranks, sch.nchannels, sch.elem_bytes
    nbytes = sch.count * elt
    nparts = min(sch.p2p_channels_per_peer, nc)
    part = _align_up(_ceil_div(nbytes, nparts), P2P_PART_ALIGN_BYTES)
    sch.steps_per_loop = 1
    if coll is Collective.SENDRECV:
        rounds = [1]
    else:  # in round d rank r sends to r+d and receives from r-d (NCCL's P2P schedule)
        rounds = list(range(1, n))
    chunks = 0
    for rnd in rounds:
        base = (rnd - 1) * nparts
        for src in range(n):
            dst = (src + rnd) % n
            for k in range(nparts):
                ch = (base + k) % nc
                beg, end = min(k * part, nbytes), min((k + 1) * part, nbytes)
                for i, o in enumerate(range(beg, end, sch.chunk_bytes)):
                    ln = min(sch.chunk_bytes, end - o)
                    if coll is Collective.SENDRECV:
                        sblk, dblk = 0, 0
                    else:  # src's input block dst lands in dst's output block src
                        sblk, dblk = dst, src
                    b.add(src, dst, ch, ln, step=rnd, loop=i, reduce=False, src_block=sblk,
                          dst_block=dblk, offset_bytes=o)
                    chunks = max(chunks, i + 1)
    sch.loops = chunks


def finish_times(sch: Schedule, duration_ps: Callable[[Transfer], int]) -> list[int]:
    """When each transfer would be received if it took ``duration_ps(t)`` picoseconds and
    started as soon as its dependencies were received and the previous send of its
    connection was done (no other contention): a lower bound, not a network simulation.
    Shows the dataflow: one slow hop delays everything after it."""
    done = [0] * len(sch.transfers)
    conn_free: dict[tuple[int, int, int], int] = {}
    for tid in topological_order(sch):
        t = sch.transfers[tid]
        key = (t.src, t.dst, t.channel)
        start = max([conn_free.get(key, 0), *(done[d] for d in t.depends_on)])
        done[tid] = conn_free[key] = start + duration_ps(t)
    return done


# ---- symbolic execution -----------------------------------------------------------------

def topological_order(sch: Schedule, rng: random.Random | None = None) -> list[int]:
    """An order of transfer ids that respects ``depends_on`` and each connection's ``seq``;
    with ``rng``, a random one among them (to show the result does not depend on timing)."""
    ts = sch.transfers
    waiting = [0] * len(ts)
    users: dict[int, list[int]] = defaultdict(list)
    prev_on_conn: dict[tuple[int, int, int], int] = {}
    for t in ts:
        deps = set(t.depends_on)
        key = (t.src, t.dst, t.channel)
        if key in prev_on_conn:
            deps.add(prev_on_conn[key])
        prev_on_conn[key] = t.id
        waiting[t.id] = len(deps)
        for d in deps:
            users[d].append(t.id)
    ready = [t.id for t in ts if waiting[t.id] == 0]
    out: list[int] = []
    while ready:
        if rng is not None:
            i = rng.randrange(len(ready))
            ready[i], ready[-1] = ready[-1], ready[i]
        tid = ready.pop()
        out.append(tid)
        for u in users[tid]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if len(out) != len(ts):
        raise ScheduleError("the dependency graph has a cycle")
    return out


#: What a piece of data is made of: ``(origin block, bit mask of origin ranks)``, the inputs
#: ``(rank, block)`` for every rank whose bit is set; ``(None, 0)`` is nothing.  A correct
#: schedule never combines two origin blocks into one piece (a reduction sums the same block
#: of different ranks), so one block and a mask of ranks is exact, and it is small: n bits
#: per piece where a set of n (rank, block) pairs took n objects (1,016 ranks: verify went
#: from 5.4 GB to a few hundred MB).
Inputs = tuple[int | None, int]
_NOTHING: Inputs = (None, 0)


def _initial(sch: Schedule, rank: int, block: int) -> Inputs:
    if rank >= sch.nranks:  # an NVLS buffer holds nothing of its own
        return _NOTHING
    c = sch.collective
    if c is Collective.ALLREDUCE:
        return (0, 1 << rank)
    if c is Collective.REDUCESCATTER:
        return (block, 1 << rank)
    if c is Collective.ALLGATHER:
        return (0, 1 << rank) if block == rank else _NOTHING
    if c is Collective.BROADCAST:
        return (0, 1 << rank) if rank == sch.root else _NOTHING
    if c is Collective.ALLTOALL:
        return (block, 1 << rank)  # reading its input block `block`
    return (0, 1 << rank)  # sendrecv: its send buffer


def inputs_set(v: Inputs) -> frozenset[tuple[int, int]]:
    """The ``(origin rank, origin block)`` pairs of an :data:`Inputs` value."""
    block, mask = v
    return frozenset((r, block) for r in range(mask.bit_length()) if mask >> r & 1)


def simulate_ownership(sch: Schedule, order: Sequence[int] | None = None
                       ) -> dict[int, dict[tuple[int, int, int], Inputs]]:
    """Run the transfers in ``order`` (default: a topological order) on symbolic data.

    Each rank holds, per (block, offset_bytes, nbytes) piece, the inputs combined into it
    (:data:`Inputs`: origin block and origin ranks; :func:`inputs_set` lists them as (rank,
    block) pairs).  A send carries what the sender holds then (its own input if it never
    received that piece); a reducing receive adds it to what the receiver holds (counting an
    input twice, or combining two origin blocks, is an error), a copying receive replaces
    it.  A transfer run before one it depends on is an error.  Returns the received pieces
    per rank.
    """
    order = topological_order(sch) if order is None else order
    ts = sch.transfers
    done = [False] * len(ts)
    held: dict[int, dict[tuple[int, int, int], Inputs]] = defaultdict(dict)
    # P2P sends read the send buffer, never what the rank received.
    from_input = sch.collective in (Collective.ALLTOALL, Collective.SENDRECV)
    for tid in order:
        t = ts[tid]
        for d in t.depends_on:
            if not done[d]:
                raise ScheduleError(f"transfer {tid} ran before transfer {d} it depends on")
        skey = (t.src_block, t.offset_bytes, t.nbytes)
        dkey = (t.dst_block, t.offset_bytes, t.nbytes)
        if from_input:
            val = _initial(sch, t.src, t.src_block)
        else:
            val = held[t.src].get(skey) or _initial(sch, t.src, t.src_block)
        if t.reduce:
            cur = held[t.dst].get(dkey) or _initial(sch, t.dst, t.dst_block)
            if cur[1] and val[1] and cur[0] != val[0]:
                raise ScheduleError(f"transfer {tid}: rank {t.dst} would combine block "
                                    f"{val[0]} into block {cur[0]}")
            if cur[1] & val[1]:
                both = sorted(inputs_set((cur[0], cur[1] & val[1])))
                raise ScheduleError(f"transfer {tid}: rank {t.dst} would count {both} twice")
            held[t.dst][dkey] = (cur[0] if cur[1] else val[0], cur[1] | val[1])
        else:
            held[t.dst][dkey] = val
        done[tid] = True
    return held


def _covers(pieces: dict[tuple[int, int, int], Inputs], block: int, block_bytes: int,
            want: Inputs) -> str | None:
    spans = sorted((o, ln) for (b, o, ln), v in pieces.items() if b == block and v == want)
    at = 0
    for o, ln in spans:
        if o != at:
            return f"bytes {at}..{o} of block {block} missing or wrong"
        at = o + ln
    if at != block_bytes:
        return f"bytes {at}..{block_bytes} of block {block} missing or wrong"
    return None


def verify(sch: Schedule, order: Sequence[int] | None = None) -> None:
    """Raise :class:`ScheduleError` unless every rank ends with what the collective promises:
    AllReduce every rank the reduction of all inputs; ReduceScatter rank r block r reduced;
    AllGather every block from its owner; AllToAll rank r, from every j, j's block r;
    Broadcast the root's buffer; SendRecv the previous rank's buffer."""
    n, c, bb = sch.nranks, sch.collective, sch.block_bytes
    if n == 1 or bb == 0:
        return
    held = simulate_ownership(sch, order)
    everyone = (1 << n) - 1
    for r in range(n):
        checks: list[tuple[int, Inputs]]
        if c is Collective.ALLREDUCE:
            checks = [(0, (0, everyone))]
        elif c is Collective.REDUCESCATTER:
            checks = [(r, (r, everyone))]
        elif c is Collective.ALLGATHER:
            checks = [(j, (0, 1 << j)) for j in range(n) if j != r]
        elif c is Collective.ALLTOALL:
            checks = [(j, (r, 1 << j)) for j in range(n) if j != r]
        elif c is Collective.BROADCAST:
            checks = [] if r == sch.root else [(0, (0, 1 << sch.root))]
        else:
            checks = [(0, (0, 1 << (r - 1) % n))]
        for block, want in checks:
            why = _covers(held.get(r, {}), block, bb, want)
            if why:
                raise ScheduleError(f"rank {r}: {why}")

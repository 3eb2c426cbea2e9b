"""The NCCL collective model (sim.workloads.nccl) and nccl-tests' reporting
(sim.workloads.nccl_tests).

Hand-derived schedules (bytes per rank per step, steps per loop, slices in flight) from
NVIDIA/nccl's kernels, NCCL's own tree illustrations (src/graph/trees.cc), published
nccl-tests output lines, and Hypothesis properties: for any rank count, channels, protocol,
QPs and size, bytes are conserved, dependencies come first, and every rank ends with what
the collective promises whatever order the transfers run in.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter, defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.units import gbps, ser_time_ps
from sim.workloads import nccl_tests as nt
from sim.workloads.nccl import (
    LL128_BUFFSIZE_BYTES,
    LL_BUFFSIZE_BYTES,
    NCCL_STEPS,
    Collective,
    ScheduleError,
    btree,
    channel_tree,
    dtree,
    finish_times,
    qp_split,
    schedule,
    simulate_ownership,
    step_data_bytes,
    topological_order,
    udp_sport,
    verify,
    wire_bytes,
)

MIB = 1 << 20


# ---- constants and hand-derived schedules -------------------------------------------------

def test_buffers_steps_chunks_slices():
    assert NCCL_STEPS == 8
    assert step_data_bytes("simple") == 512 * 1024
    assert LL_BUFFSIZE_BYTES == 512 * 1024 and step_data_bytes("ll") == 32 * 1024
    assert LL128_BUFFSIZE_BYTES == 4_915_200 and step_data_bytes("ll128") == 576_000
    s = schedule("allreduce", 4, 64 * MIB // 4, nchannels=2)
    assert s.chunk_bytes == 2 * MIB and s.slice_steps == 2 and s.max_inflight == 4
    assert s.steps_per_loop == 2 * (4 - 1)
    assert s.loops == 4  # loopSize = 2 channels x 4 ranks x 2 MiB = 16 MiB
    assert {t.nbytes for t in s.transfers} == {MIB}  # the proxy posts 1 MiB slices
    assert len(s.transfers) == 4 * 2 * 4 * 6 * 2  # loops x channels x chunks x hops x slices


def test_ring_allreduce_by_hand():
    """4 ranks, one channel, 8 MiB of float: one loop of four 2 MiB chunks.  Rank 0 (ring
    index 0) sends chunk 3, reduces-and-sends 2 then 1, finishes 0 and forwards it, then
    forwards 3 and 2 (runRing): 6 = 2(n-1) sends of 2 slices each."""
    s = schedule("allreduce", 4, 8 * MIB // 4, nchannels=1)
    mine = sorted((t for t in s.transfers if t.src == 0), key=lambda t: t.seq)
    assert [t.offset_bytes // (2 * MIB) for t in mine[::2]] == [3, 2, 1, 0, 3, 2]
    assert [t.reduce for t in mine[::2]] == [True, True, True, False, False, False]
    assert [t.dst for t in mine] == [1] * 12 and [t.step for t in mine[::2]] == list(range(6))
    assert s.sent_bytes(0) == s.received_bytes(0) == 12 * MIB  # 2(n-1)/n x S
    for t in s.transfers:  # dataflow: hop k+1 waits for hop k from the predecessor
        data = [d for d in t.depends_on if s.transfers[d].dst == t.src
                and s.transfers[d].offset_bytes == t.offset_bytes]
        assert len(data) == (t.step > 0)
        if data:
            assert s.transfers[data[0]].step == t.step - 1


def test_at_most_four_slices_in_flight_per_connection():
    s = schedule("allreduce", 3, 48 * MIB // 4, nchannels=1)
    by_conn = defaultdict(list)
    for t in s.transfers:
        by_conn[(t.src, t.dst, t.channel)].append(t)
    for sends in by_conn.values():
        assert [t.seq for t in sends] == list(range(len(sends)))
        for k, t in enumerate(sends):
            if k >= 4:  # slot k reuses the slot of send k-4: it must have been received
                assert sends[k - 4].id in t.depends_on
            assert not any(sends[j].id in t.depends_on for j in range(max(0, k - 3), k))


def test_channel_dropping_and_chunk_shrinking():
    """getAlgoInfo: drop channels while nBytes < nc x 512 threads x 64 B (32 KiB each), then
    halve threads; runRing: the last loop's chunk is ceil(rem / (nc x n)) aligned to 4 KiB."""
    assert schedule("allreduce", 2, 64 * 1024 // 4, nchannels=8).nchannels == 2
    assert schedule("allreduce", 2, 64 * 1024 // 4 - 1, nchannels=8).nchannels == 1
    tiny = schedule("allreduce", 2, 256, nchannels=8)
    assert (tiny.nchannels, tiny.nthreads) == (1, 64)
    s = schedule("allreduce", 2, MIB // 4, nchannels=8)
    assert s.nchannels == 8
    assert {t.nbytes for t in s.transfers} == {32 * 1024}  # 64 KiB chunks, two slices
    no = schedule("allreduce", 2, 64 * 1024 // 4, nchannels=8, drop_channels=False)
    assert no.nchannels == 8


def test_a_ring_is_two_n_minus_one_hops_not_two_g_minus_one():
    """htsim's generator chains 2g-1 flows; NCCL's ring AllReduce is 2(n-1) hops per piece,
    ReduceScatter and AllGather n-1."""
    for coll, hops in (("allreduce", lambda n: 2 * (n - 1)), ("reducescatter", lambda n: n - 1),
                       ("allgather", lambda n: n - 1), ("broadcast", lambda n: n - 1)):
        for n in (2, 3, 5, 8):
            s = schedule(coll, n, 3 * MIB // 4, nchannels=2)
            per_piece = Counter((t.channel, t.loop, t.src_block, t.offset_bytes)
                                for t in s.transfers)
            assert set(per_piece.values()) == {hops(n)}, (coll, n)


def test_ring_broken_like_htsim_is_caught():
    s = schedule("allreduce", 4, MIB, nchannels=1)
    last = max(t.step for t in s.transfers)
    s.transfers = [t for t in s.transfers if t.step != last]  # 2(n-1)-1 hops
    with pytest.raises(ScheduleError, match="missing or wrong"):
        verify(s)


def test_ownership_catches_a_copy_for_a_reduce_and_a_double_count():
    s = schedule("allreduce", 4, MIB, nchannels=1)
    i = next(k for k, t in enumerate(s.transfers) if t.reduce and t.step == 1)
    bad = list(s.transfers)
    bad[i] = dataclasses.replace(bad[i], reduce=False)
    with pytest.raises(ScheduleError):
        verify(dataclasses.replace(s, transfers=bad))
    twice = list(s.transfers)
    j = next(k for k, t in enumerate(s.transfers) if t.reduce and t.step == 2)
    twice[j] = dataclasses.replace(twice[j], depends_on=(*twice[j].depends_on, i))
    dup = dataclasses.replace(s.transfers[i], id=len(twice), depends_on=(i,), seq=10**6)
    twice.append(dup)
    with pytest.raises(ScheduleError, match="twice"):
        simulate_ownership(dataclasses.replace(s, transfers=twice))


def test_ownership_catches_a_reduction_into_another_block():
    """ReduceScatter: a reducing hop that lands in another rank's block would sum two
    different blocks: caught when it happens, and verify fails."""
    from sim.workloads.nccl import inputs_set

    s = schedule("reducescatter", 4, MIB, nchannels=1)
    i = next(k for k, t in enumerate(s.transfers) if t.reduce and t.step == 1)
    bad = list(s.transfers)
    t = bad[i]
    bad[i] = dataclasses.replace(t, dst_block=(t.dst_block + 1) % 4)
    with pytest.raises(ScheduleError, match="combine block"):
        simulate_ownership(dataclasses.replace(s, transfers=bad))
    held = simulate_ownership(s)
    pieces = [v for (b, _o, _n), v in held[2].items() if b == 2]
    assert pieces  # every piece of rank 2's block 2 ends as the sum of all ranks' block 2
    assert all(inputs_set(v) == {(j, 2) for j in range(4)} for v in pieces)


def test_running_a_transfer_before_its_dependency_is_an_error():
    s = schedule("allgather", 3, 1000, nchannels=1)
    order = topological_order(s)
    t = next(t for t in s.transfers if t.depends_on)
    order.remove(t.id)
    order.insert(0, t.id)
    with pytest.raises(ScheduleError, match="before"):
        simulate_ownership(s, order)


def test_a_slow_link_slows_the_whole_ring():
    """The dataflow: with one 100G hop in a 400G ring every rank finishes later, and the
    slow hop's bytes at its rate bound the whole collective."""
    s = schedule("allreduce", 8, 16 * MIB // 4, nchannels=1)

    def last_receive(slow):
        def dur(t):
            return ser_time_ps(t.nbytes, gbps(100 if (t.src, t.dst) == slow else 400))
        done = finish_times(s, dur)
        return {r: max(done[t.id] for t in s.transfers if t.dst == r) for r in range(8)}

    fast, slow = last_receive(None), last_receive((3, 4))
    assert all(slow[r] > fast[r] for r in range(8))
    on_slow = sum(t.nbytes for t in s.transfers if (t.src, t.dst) == (3, 4))
    assert max(slow.values()) >= ser_time_ps(on_slow, gbps(100))
    assert max(fast.values()) >= ser_time_ps(s.sent_bytes(0), gbps(400))


# ---- trees (src/graph/trees.cc) -------------------------------------------------------------

def test_btree_matches_ncclGetBtree_illustration():
    """The 14-rank tree drawn above ncclGetBtree in src/graph/trees.cc."""
    kids = {r: btree(14, r)[1] for r in range(14)}
    assert kids[0] == (8,) and kids[8] == (4, 12) and kids[4] == (2, 6)
    assert kids[2] == (1, 3) and kids[6] == (5, 7) and kids[12] == (10, 13)
    assert kids[10] == (9, 11)
    assert all(kids[r] == () for r in (1, 3, 5, 7, 9, 11, 13))
    assert btree(14, 13)[0] == 12 and btree(14, 0)[0] == -1


def test_dtree_mirror_and_shift_match_ncclGetDtree_illustration():
    # 12 ranks (even): tree 1 mirrors tree 0; root 11 with child 3, 3 -> 1 and 7.
    assert dtree(12, 11, 1) == (-1, (3,))
    assert set(dtree(12, 3, 1)[1]) == {1, 7} and set(dtree(12, 7, 1)[1]) == {5, 9}
    # 13 ranks (odd): tree 1 shifts by one; root 1 with child 9, 9 -> 5 and 0.
    assert dtree(13, 1, 1) == (-1, (9,))
    assert set(dtree(13, 9, 1)[1]) == {5, 0} and set(dtree(13, 0, 1)[1]) == {11}
    for n in range(1, 40):
        for which in (0, 1):
            parents = [dtree(n, r, which)[0] for r in range(n)]
            assert parents.count(-1) == 1
            for r in range(n):
                p, ks = dtree(n, r, which)
                assert all(dtree(n, k, which)[0] == r for k in ks)
                assert p == -1 or r in dtree(n, p, which)[1]


def test_tree_allreduce_is_a_tree_not_a_ring():
    """SimAI maps TREE to ring (github.com/aliyun/SimAI issue #147); ours uses only the double
    binary tree's edges plus each node's chain, both trees, each channel's tree through its
    own NIC's GPU (head c % gpus_per_node), 2(n-1) transfers per chunk."""
    n, gpn, nc = 16, 4, 4
    s = schedule("allreduce", n, 8 * MIB // 4, nchannels=nc, algorithm="tree",
                 gpus_per_node=gpn)
    edges = {}
    for ch in range(nc):
        tree = channel_tree(n, gpn, 0 if ch < nc // 2 else 1, ch % gpn)
        edges[ch] = {(r, p) for r, (p, _) in tree.items() if p != -1}
    used = set()
    for t in s.transfers:
        assert (t.src, t.dst) in edges[t.channel] or (t.dst, t.src) in edges[t.channel]
        used.add(t.channel)
    assert used == set(range(nc))
    assert len({frozenset(e) for e in edges.values()}) == nc  # each channel its own tree
    per = Counter((t.channel, t.loop) for t in s.transfers)
    assert set(per.values()) == {2 * (n - 1)}
    verify(s)


def test_tree_chunk_is_one_step_and_shrinks_for_small_calls():
    big = schedule("allreduce", 16, 512 * MIB // 4, nchannels=2, algorithm="tree",
                   gpus_per_node=8)
    assert big.chunk_bytes == 512 * 1024 and big.max_inflight == NCCL_STEPS
    small = schedule("allreduce", 16, 8 * MIB // 4, nchannels=2, algorithm="tree",
                     gpus_per_node=8)
    assert small.chunk_bytes < 512 * 1024


# ---- P2P, protocols, QPs -----------------------------------------------------------------

def test_alltoall_uses_every_channel_in_128k_chunks():
    """SimAI puts AllToAll on channel 0 without chunking (github.com/aliyun/SimAI issue #252).  Here
    each peer's 4 MiB goes over NCCL_NCHANNELS_PER_NET_PEER = 2 channels in 128 KiB sends, and the
    seven rounds of 8 ranks (8 nodes) move over all 8 channels; on one node of 8 GPUs every
    peer is on NVLink and the chunk is NCCL_P2P_NVL_CHUNKSIZE, 512 KiB."""
    one = schedule("alltoall", 8, 4 * MIB // 4, nchannels=8, gpus_per_node=8)
    assert {t.nbytes for t in one.transfers} == {512 * 1024}
    verify(one)
    s = schedule("alltoall", 8, 4 * MIB // 4, nchannels=8, gpus_per_node=1)
    assert {t.channel for t in s.transfers} == set(range(8))
    assert {t.nbytes for t in s.transfers} == {128 * 1024}
    pairs = Counter((t.src, t.dst) for t in s.transfers)
    assert len(pairs) == 8 * 7 and set(pairs.values()) == {32}
    per_pair = defaultdict(set)
    for t in s.transfers:
        per_pair[(t.src, t.dst)].add(t.channel)
    assert {len(c) for c in per_pair.values()} == {2}
    assert max(t.seq for t in s.transfers) == 15 and s.max_inflight == NCCL_STEPS
    conn = {(t.src, t.dst, t.channel, t.seq): t.id for t in s.transfers}
    assert all(conn[(t.src, t.dst, t.channel, t.seq - 8)] in t.depends_on
               for t in s.transfers if t.seq >= 8)
    verify(s)
    wide = schedule("alltoall", 4, 4 * MIB // 4, nchannels=8, p2p_channels_per_peer=8,
                    gpus_per_node=1)
    assert {len({t.channel for t in wide.transfers if (t.src, t.dst) == (0, 1)})} == {8}
    verify(wide)


def test_protocol_wire_bytes():
    assert wire_bytes(8, "ll") == 16 and wire_bytes(9, "ll") == 32
    assert wire_bytes(120, "ll128") == 128 and wire_bytes(121, "ll128") == 256
    assert wire_bytes(1000, "simple") == 1000
    s = schedule("allreduce", 4, 100_000, nchannels=2, protocol="ll")
    assert all(t.wire_bytes == -(-t.nbytes // 8) * 16 for t in s.transfers)
    s = schedule("allreduce", 4, 100_000, nchannels=2, protocol="ll128")
    assert all(t.wire_bytes == -(-t.nbytes // 120) * 128 for t in s.transfers)


def test_qp_striping_and_source_ports():
    assert qp_split(MIB, 4) == (256 * 1024,) * 4
    assert qp_split(1000, 4) == (256, 256, 256, 232)  # 128-byte multiples, rest last
    assert qp_split(100, 4) == (100, 0, 0, 0)
    # rdma_calc_flow_label(0x100, 0x800000) = 0x800 (2**31 folded), | 0xC000.
    assert udp_sport(0x100, 0x800000) == 0xC800
    s = schedule("allreduce", 8, MIB, nchannels=2, qps_per_connection=4)
    assert all(len(t.qp_bytes) == 4 and sum(t.qp_bytes) == t.wire_bytes for t in s.transfers)
    ports = [p for c in s.connections.values() for p in c.udp_sports]
    assert len(s.connections) == 8 * 2 and all(0xC000 <= p <= 0xFFFF for p in ports)
    assert len(set(ports)) > len(ports) // 2  # entropy for ECMP


@given(st.integers(0, 1 << 24), st.integers(1, 16))
def test_qp_split_conserves_bytes(nbytes, q):
    parts = qp_split(nbytes, q)
    assert sum(parts) == nbytes and len(parts) == q
    assert all(p % 128 == 0 for p in parts[:-1] if parts[-1])


def test_bad_arguments():
    for kw in ({"dtype": "float7"}, {"nchannels": 0}, {"nchannels": 65},
               {"qps_per_connection": 0}, {"root": 9}, {"nthreads": 100},
               {"nthreads": 1024}, {"nthreads": 0},
               {"p2p_channels_per_peer": 0}):
        with pytest.raises(ScheduleError):
            schedule("allreduce", 4, 100, **kw)
    with pytest.raises(ScheduleError):
        schedule("allgather", 4, 100, algorithm="tree")
    with pytest.raises(ScheduleError):
        schedule("allreduce", 6, 100, algorithm="tree", gpus_per_node=4)
    with pytest.raises(ValueError):
        schedule("gather", 4, 100)


# ---- properties ---------------------------------------------------------------------------

HOPS = {"allreduce": lambda n: 2 * (n - 1), "reducescatter": lambda n: (n - 1) * n,
        "allgather": lambda n: (n - 1) * n, "broadcast": lambda n: n - 1,
        "alltoall": lambda n: n * (n - 1), "sendrecv": lambda n: n}


@given(coll=st.sampled_from([c.value for c in Collective]),
       n=st.integers(2, 16), count=st.integers(0, 1 << 22) | st.integers(0, 5000),
       nchannels=st.integers(1, 8), protocol=st.sampled_from(["simple", "ll", "ll128"]),
       dtype=st.sampled_from(["float", "half", "int8", "double"]),
       q=st.integers(1, 4), rnd=st.randoms(use_true_random=False))
def test_every_rank_ends_with_what_the_collective_promises(coll, n, count, nchannels, protocol,
                                                           dtype, q, rnd):
    s = schedule(coll, n, count, dtype, nchannels=nchannels, protocol=protocol,
                 qps_per_connection=q, root=rnd.randrange(n))
    verify(s, topological_order(s, random.Random(rnd.random())))
    total = sum(t.nbytes for t in s.transfers)  # bytes conserved: each piece, each hop
    assert total == HOPS[coll](n) * s.block_bytes
    ids = {t.id: t for t in s.transfers}
    assert all(d < t.id and ids[d].id == d for t in s.transfers for d in t.depends_on)


@pytest.mark.parametrize("coll", [c.value for c in Collective])
def test_every_n_from_2_to_16_at_a_multi_loop_size(coll):
    """Hypothesis favours small sizes; this covers 2..16 ranks at sizes that need several
    loops, shrunk last chunks and two slices per chunk."""
    for n in range(2, 17):
        for count in ((1 << 20) + 3, 5 * (1 << 20) + 12345):
            s = schedule(coll, n, count, "float", nchannels=4)
            verify(s, topological_order(s, random.Random(n)))


@given(n=st.integers(2, 16), gpn=st.sampled_from([1, 2, 4, 8]),
       count=st.integers(1, 1 << 20), nchannels=st.integers(1, 8),
       protocol=st.sampled_from(["simple", "ll", "ll128"]),
       rnd=st.randoms(use_true_random=False))
def test_tree_allreduce_every_rank_gets_the_full_reduction(n, gpn, count, nchannels, protocol,
                                                           rnd):
    if n % gpn:
        gpn = 1
    s = schedule("allreduce", n, count, "float", nchannels=nchannels, algorithm="tree",
                 protocol=protocol, gpus_per_node=gpn)
    verify(s, topological_order(s, random.Random(rnd.random())))
    assert sum(t.nbytes for t in s.transfers) == 2 * (n - 1) * s.block_bytes


# ---- nccl-tests reporting --------------------------------------------------------------------

def test_coll_counts_as_nccl_tests():
    ag = nt.coll_counts("allgather", MIB, "float", 8)
    assert (ag.send_bytes, ag.recv_bytes, ag.param_count, ag.size_bytes) == \
        (MIB // 8, MIB, MIB // 32, MIB)
    rs = nt.coll_counts("reducescatter", MIB, "float", 8)
    assert (rs.send_bytes, rs.recv_bytes, rs.param_count) == (MIB, MIB // 8, MIB // 32)
    # a rank's share trimmed to 16 bytes: 83 floats -> 80
    a2a = nt.coll_counts("alltoall", 1000, "float", 3)
    assert (a2a.send_bytes, a2a.recv_bytes, a2a.param_count) == (960, 960, 80)
    # the size and count columns of a published 80-rank alltoall_perf (double; NCCL 2.29.2,
    # nccl-tests 2.17.8, xxrjun/nccl-tests-cluster's example-cluster01): -b 32M -f 2
    for size, shown, count in ((33554432, 33553920, 52428), (67108864, 67107840, 104856),
                               (134217728, 134216960, 209714)):
        c = nt.coll_counts("alltoall", size, "double", 80)
        assert (c.size_bytes, c.param_count) == (shown, count)
    rs3 = nt.coll_counts("reducescatter", 1000, "half", 3)
    assert (rs3.send_bytes, rs3.param_count) == (3 * 160 * 2, 160)
    ar = nt.coll_counts("allreduce", 1002, "half", 8)
    assert (ar.send_bytes, ar.param_count) == (1002, 501)
    # S: AllGather's is the whole output, ReduceScatter's the whole input.
    assert nt.s_bytes("allgather", ag.param_count, "float", 8) == MIB
    assert nt.s_bytes("reducescatter", rs.param_count, "float", 8) == MIB
    assert nt.s_bytes("allreduce", ar.param_count, "half", 8) == 1002


def test_bus_factors():
    assert nt.bus_factor("allreduce", 8) == 2 * 7 / 8
    for c in ("allgather", "reducescatter", "alltoall"):
        assert nt.bus_factor(c, 8) == 7 / 8
    for c in ("broadcast", "sendrecv"):
        assert nt.bus_factor(c, 8) == 1


@pytest.mark.parametrize("size, time_us, algbw, busbw", [
    # 8-rank AllReduce lines published in kvcache-ai/Mooncake pull request 3484.
    (1048576, 27.76, 37.78, 66.11),
    (33554432, 195.40, 171.72, 300.51),
    (16777216, 121.33, 138.28, 242.00),
])
def test_algbw_busbw_against_published_lines(size, time_us, algbw, busbw):
    c = nt.coll_counts("allreduce", size, "float", 8)
    alg, bus = nt.algbw_busbw("allreduce", c.param_count, "float", 8, time_us * 1e-6)
    assert alg == pytest.approx(algbw, abs=0.01)  # the time is printed rounded
    assert bus == pytest.approx(busbw, abs=0.02)


def test_table_lines_as_nccl_tests_prints_them():
    line = ("     1048576        262144     float     sum      -1    27.76   37.78   66.11"
            "       0    27.49   38.15   66.76       0")
    assert nt.format_row(1048576, 262144, "float", "sum", -1, (27.76, 37.78, 66.11, 0),
                         (27.49, 38.15, 66.76, 0)) == line
    assert nt.header_lines()[2] == (
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong"
        "     time   algbw   busbw  #wrong ")
    assert nt.header_lines()[3].rstrip() == (
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
        "             (us)  (GB/s)  (GB/s)")
    assert nt.format_row(8, 2, "float", "none", -1, (5.0, 0.0, 0.0, None), None).endswith(
        "   5.00    0.00    0.00    N/A" + " " * 32)
    assert nt.root_of("broadcast", 3) == 3 and nt.root_of("allgather", 3) == -1


@pytest.mark.parametrize("value, width, text", [
    (5.7, 7, "   5.70"), (1234.5, 7, "1234.50"), (12345.6, 7, "12345.6"),
    (123456.7, 7, " 123457"), (1234567.0, 7, "1234567"), (12345678.0, 7, "1.2e+07"),
    (0.0, 6, "  0.00"), (123.456, 6, "123.46"), (1234.5, 6, "1234.5"),
    (12345.0, 6, " 12345"), (123456.0, 6, "123456"), (1234567.0, 6, " 1e+06"),
])
def test_float_str_as_getFloatStr(value, width, text):
    assert nt.float_str(value, width) == text


def test_sizes_and_parse_size():
    assert nt.parse_size("1M") == MIB and nt.parse_size("1g") == 1 << 30
    assert nt.parse_size("64K") == 65536 and nt.parse_size("1.5K") == 1536
    assert nt.parse_size("8") == 8
    for bad in ("1T", "", "M", "-1M"):
        with pytest.raises(ValueError):
            nt.parse_size(bad)
    sizes = nt.size_list(MIB, 1 << 30, 2)
    assert sizes[0] == MIB and sizes[-1] == 1 << 30 and len(sizes) == 11
    assert nt.size_list(8, 40, step_bytes=16) == [8, 24, 40]
    with pytest.raises(ValueError):
        nt.size_list(64, 8, 2)


def test_tree_channels_leave_each_node_through_their_own_nic():
    """Channel c's tree crosses between nodes from local GPU c % gpus_per_node (its NIC), so
    8 channels on 2 DGX-like nodes use all 8 NICs evenly (they all went through GPU 0's NIC,
    which held a 64 MiB tree AllReduce to a quarter of the ring's busbw)."""
    gpn = 8
    s = schedule("allreduce", 2 * gpn, 64 * MIB // 4, nchannels=8, algorithm="tree",
                 gpus_per_node=gpn)
    net = Counter()
    for t in s.transfers:
        if t.src // gpn != t.dst // gpn:
            assert t.src % gpn == t.dst % gpn == t.channel % gpn  # in rail, the channel's
            net[t.src % gpn] += t.nbytes
    assert sorted(net) == list(range(gpn)) and len(set(net.values())) == 1
    verify(s)


@pytest.mark.parametrize("mib, chunk", [(4, 34_560), (64, 144_000), (1024, 576_000)])
def test_tree_ll128_chunk_as_calcCollChunking(mib, chunk):
    """NCCL 2.30.7's Tree/LL128 chunk on 2 nodes of 8 GPUs, 16 channels: one step (576,000
    data bytes) halved while nBytes / (16 x chunk) < 64 x 2.8 / 8 = 22.4 (to 144,000), then
    while < 16 x 2.8 / 8 = 5.6 (to 36,000), in 1,920-byte grains (34,560); a large call
    keeps the whole step."""
    s = schedule("allreduce", 16, (mib << 20) // 4, nchannels=16, algorithm="tree",
                 protocol="ll128", gpus_per_node=8)
    assert s.chunk_bytes == chunk
    verify(s)


# ---- NVLS and the NVLS tree ----------------------------------------------------------------

@given(nodes=st.integers(1, 6), gpn=st.sampled_from([2, 3, 4, 8]),
       count=st.integers(1, 1 << 20), nchannels=st.integers(1, 16),
       dtype=st.sampled_from(["float", "half", "double", "int8"]),
       rnd=st.randoms(use_true_random=False))
def test_nvls_every_rank_gets_the_full_reduction(nodes, gpn, count, nchannels, dtype, rnd):
    """NVLS (one node) and the NVLS tree (several): every GPU ends with the sum of all, in
    any order the dependencies allow, and no transfer sends nothing."""
    algo = "nvls" if nodes == 1 else "nvls_tree"
    s = schedule("allreduce", nodes * gpn, count, dtype, nchannels=nchannels, algorithm=algo,
                 gpus_per_node=gpn)
    verify(s, topological_order(s, random.Random(rnd.random())))
    assert s.buffers == 2 * nodes * gpn and s.nchannels == nchannels  # no channel dropping
    assert all(t.nbytes > 0 for t in s.transfers)
    for t in s.transfers:  # an NVLS buffer talks to the GPUs of its own node only
        assert s.node_of(t.src) == s.node_of(t.dst) or max(t.src, t.dst) < s.nranks


def test_nvls_one_node_moves_what_nvlink_sharp_moves():
    """One node of n GPUs: each GPU sends every chunk once into the switch (ld_reduce reads
    all n copies) and the sums of its heads once (multimem.st): (n + 1) / n of the buffer;
    it receives its heads' sums and every result: (n + 1) / n too; nothing crosses nodes."""
    n, size = 8, 64 * MIB
    s = schedule("allreduce", n, size // 4, nchannels=16, algorithm="nvls", gpus_per_node=n)
    for r in range(n):
        assert s.sent_bytes(r) == s.received_bytes(r) == size * (n + 1) // n
    assert s.chunk_bytes == 64 * 1024  # 64 MiB < 64 x (16 x 8) x 128 KiB
    verify(s)


def test_nvls_tree_crosses_nodes_head_to_head_on_every_rail():
    """The NVLS tree: only heads of one index talk across nodes (a rail each), every rail
    carries the same bytes, and on 2 nodes each head's chunk crosses once up and once
    down: the network carries 2 x buffer / GPUs per node per rail."""
    gpn, size = 8, 64 * MIB
    s = schedule("allreduce", 2 * gpn, size // 4, nchannels=16, algorithm="nvls_tree",
                 gpus_per_node=gpn)
    net = Counter()
    for t in s.transfers:
        if s.node_of(t.src) != s.node_of(t.dst):
            assert t.src < s.nranks and t.dst < s.nranks and t.src % gpn == t.dst % gpn
            net[t.src % gpn] += t.nbytes
    assert net == {h: 2 * size // gpn for h in range(gpn)}
    verify(s)


@pytest.mark.parametrize("algo, nodes, mib, chunk", [
    ("nvls", 1, 1024, 128 << 10), ("nvls", 1, 512, 64 << 10), ("nvls", 1, 16, 32 << 10),
    ("nvls", 1, 4, 16 << 10), ("nvls_tree", 2, 1024, 128 << 10),
    ("nvls_tree", 2, 32, 64 << 10), ("nvls_tree", 2, 4, 32 << 10),
    ("nvls_tree", 4, 1024, 64 << 10)])
def test_nvls_chunk_as_calcCollChunking(algo, nodes, mib, chunk):
    """NCCL 2.30.7's NVLS chunk (128 KiB, NCCL_NVLS_CHUNKSIZE) shrinks to 64, 32, 16 KiB
    below 64, 8, 2 x (channels x heads) chunks; the NVLS tree's (at most 64 KiB from 4
    nodes) to 64 and 32 KiB below 4 and 1 x; 16 channels, 8 heads."""
    s = schedule("allreduce", 8 * nodes, (mib << 20) // 4, nchannels=16, algorithm=algo,
                 gpus_per_node=8)
    assert s.chunk_bytes == chunk


@pytest.mark.parametrize("kw, why", [
    ({"algorithm": "nvls", "nranks": 16}, "NVLS\\+SHARP"),
    ({"algorithm": "ring", "nranks": 16, "sharp": True}, "CollNet's algorithms only"),
    ({"algorithm": "collnet_chain", "nranks": 16}, "on SHARP switches"),
    ({"algorithm": "collnet_direct", "nranks": 8, "sharp": True}, "two or more nodes"),
    ({"algorithm": "collnet_direct", "nranks": 16, "sharp": True, "protocol": "ll"},
     "simple protocol only"),
    ({"algorithm": "nvls_tree", "nranks": 8}, "two or more nodes"),
    ({"algorithm": "nvls", "nranks": 8, "protocol": "ll128"}, "simple protocol only"),
    ({"algorithm": "nvls", "nranks": 8, "collective": "allgather"}, "allreduce only"),
])
def test_nvls_refuses_what_nccl_does_not_run(kw, why):
    args = {"collective": "allreduce", "count": 1024, "gpus_per_node": 8, **kw}
    with pytest.raises(ScheduleError, match=why):
        schedule(args.pop("collective"), args.pop("nranks"), args.pop("count"), **args)


def test_nvls_buffer_of_inverts_nvls_buffer():
    from sim.workloads.nccl import nvls_buffer, nvls_buffer_of, rank_label

    s = schedule("allreduce", 12, 1 << 12, nchannels=2, algorithm="nvls_tree", gpus_per_node=4)
    for node in range(3):
        for head in range(4):
            for mc in (False, True):
                r = nvls_buffer(s, node, head, mc)
                assert nvls_buffer_of(r, 12, 4) == (node, head, mc) and s.node_of(r) == node
    assert rank_label(nvls_buffer(s, 2, 3, True), 12, 4) == "NVLS multicast of head 3 (node 2)"
    assert rank_label(5, 12, 4) == "rank 5"


# ---- NVLS+SHARP (CollNet) --------------------------------------------------------------------

@given(nodes=st.integers(2, 5), gpn=st.sampled_from([1, 2, 3, 4, 8]),
       count=st.integers(1, 1 << 20), nchannels=st.integers(1, 20),
       dtype=st.sampled_from(["float", "half", "double", "int8"]),
       algo=st.sampled_from(["nvls", "collnet_direct", "collnet_chain"]),
       rnd=st.randoms(use_true_random=False))
def test_collnet_every_rank_gets_the_full_reduction(nodes, gpn, count, nchannels, dtype,
                                                     algo, rnd):
    """CollNet across nodes on SHARP (NVLS+SHARP, Direct, Chain): every GPU ends with the
    sum of all in any order the dependencies allow; the network carries only head <-> its
    rail's aggregator, and per node the heads send up and get back the whole buffer once."""
    from sim.workloads.nccl import sharp_aggregator

    if algo == "nvls" and gpn == 1:
        gpn = 2  # NVLink SHARP needs 2 GPUs or more
    s = schedule("allreduce", nodes * gpn, count, dtype, nchannels=nchannels,
                 algorithm=algo, gpus_per_node=gpn, sharp=True)
    verify(s, topological_order(s, random.Random(rnd.random())))
    assert s.aggregators == gpn
    assert s.buffers == (2 * nodes * gpn if algo == "nvls" else 0)
    _only_heads_and_aggregators_cross(s, nodes, gpn, sharp_aggregator)


@given(nodes=st.integers(2, 4), gpn=st.sampled_from([1, 2, 3, 8]),
       count=st.integers(1, 1 << 17), nchannels=st.integers(1, 20),
       coll=st.sampled_from(["allgather", "reducescatter"]),
       algo=st.sampled_from(["nvls", "collnet_direct"]),
       rnd=st.randoms(use_true_random=False))
def test_sharp_allgather_and_reducescatter_deliver(nodes, gpn, count, nchannels, coll, algo,
                                                    rnd):
    """AllGather and ReduceScatter on SHARP (NVLS+SHARP, CollNet Direct): every rank ends
    with every block (AllGather) or its own block reduced over all (ReduceScatter); a NIC
    sends its block and receives its rail's window (AllGather), or the reverse."""
    from sim.workloads.nccl import sharp_aggregator

    if algo == "nvls" and gpn == 1:
        gpn = 2
    n = nodes * gpn
    s = schedule(coll, n, count, "float", nchannels=nchannels, algorithm=algo,
                 gpus_per_node=gpn, sharp=True)
    verify(s, topological_order(s, random.Random(rnd.random())))
    up, down = Counter(), Counter()
    for t in s.transfers:
        if t.dst >= 3 * n:
            up[t.src] += t.nbytes
        elif t.src >= 3 * n:
            down[t.dst] += t.nbytes
    block = count * 4
    sent, got = (block, nodes * block) if coll == "allgather" else (nodes * block, block)
    assert up == dict.fromkeys(range(n), sent) and down == dict.fromkeys(range(n), got)
    _only_heads_and_aggregators_cross(s, nodes, gpn, sharp_aggregator)


def _only_heads_and_aggregators_cross(s, nodes, gpn, sharp_aggregator):
    up, down = Counter(), Counter()
    for t in s.transfers:
        assert t.nbytes > 0
        if s.node_of(t.src) == s.node_of(t.dst):
            continue
        head, agg = (t.src, t.dst) if t.dst >= s.nranks else (t.dst, t.src)
        assert head < s.nranks and agg == sharp_aggregator(s, head % gpn)
        assert s.node_of(agg) == nodes + head % gpn  # a node of its own
        (up if t.dst == agg else down)[head] += t.nbytes
    if s.collective == "allreduce":
        assert up == down
        for k in range(nodes):
            assert sum(up[k * gpn + h] for h in range(gpn)) == s.block_bytes


def test_nvls_sharp_layout_and_group_dependencies():
    """NCCL's collnet layout: channel b's chunk of head k in loop L at L x loopSize +
    (b x heads + k) x chunk; the aggregator answers a chunk once every node sent the chunks
    of the same loop of every channel of its group of 8 (the proxy's one iallreduce per
    group); each head sends and receives a heads-th of the buffer over the network."""
    from sim.workloads.nccl import COLLNET_GROUP_CHANNELS, rank_label, sharp_aggregator

    nodes, g, nc, size = 2, 8, 16, 64 * MIB
    s = schedule("allreduce", nodes * g, size // 4, nchannels=nc, algorithm="nvls",
                 gpus_per_node=g, sharp=True)
    c = s.chunk_bytes
    assert c == 64 << 10 and s.loops == size // (nc * g * c)  # 64 MiB < 64 x 128 x 128 KiB
    ts = s.transfers
    ups = [t for t in ts if t.dst >= sharp_aggregator(s, 0)]
    for t in ups:
        b, k = t.channel, t.src % g
        assert t.offset_bytes == t.loop * nc * g * c + (b * g + k) * c
    for t in ts:
        if t.src >= sharp_aggregator(s, 0):
            b, k = t.channel, t.dst % g
            group = {u.id for u in ups if u.loop == t.loop and u.src % g == k
                     and u.channel // COLLNET_GROUP_CHANNELS == b // COLLNET_GROUP_CHANNELS}
            assert len(group) == nodes * COLLNET_GROUP_CHANNELS
            assert group <= set(t.depends_on)
    for r in range(nodes * g):
        net = sum(t.nbytes for t in ups if t.src == r)
        assert net == size // g
    assert rank_label(sharp_aggregator(s, 3), s.nranks, g) == "SHARP aggregator of rail 3"


def test_nvls_sharp_on_one_node_is_nvls():
    """NCCL has no CollNet on one node (NCCL_COLLNET_NODE_THRESHOLD 2): sharp changes
    nothing there."""
    a = schedule("allreduce", 8, 1 << 20, nchannels=16, algorithm="nvls", gpus_per_node=8)
    b = schedule("allreduce", 8, 1 << 20, nchannels=16, algorithm="nvls", gpus_per_node=8,
                 sharp=True)
    assert a.transfers == b.transfers and b.aggregators == 0

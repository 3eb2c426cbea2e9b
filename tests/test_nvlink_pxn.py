"""NVLink inside a node, NCCL's rail-aligned rings and PXN between nodes.

Hand-derived: an intra-node transfer takes wire bytes / NVLink rate + latency, two on one
GPU's egress serialise; on a rail-optimised fabric the default rings and PXN put no byte on
the spines while the old every-hop-over-the-network model does; the rings keep every
inter-node hop on one rail and still deliver the collective (Hypothesis); a 2 x 8 ring with
a channel per rail runs close to the NICs' bound."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.fabric.rail import rail_optimized
from sim.workloads.collective import (
    NVLINK_BPS,
    NVLINK_LATENCY_PS,
    ROCE_HEADER_BYTES,
    NvlinkDomain,
    run_schedule,
)
from sim.workloads.nccl import nccl_rings, schedule, send_nic_rank, verify


def _spine_bytes(rf) -> int:
    return sum(p.tx_bytes for s in rf.spines for p in rf.fabric.nodes[s].ports.values())


def _ps(nbytes: int, bps: int = NVLINK_BPS) -> int:
    return -(-nbytes * 8 * 10**12 // bps)


# ---- the NVLink model -------------------------------------------------------------------

def test_intra_node_transfer_is_bytes_over_nvlink_rate_plus_latency():
    # 2 GPUs of one node, SendRecv of 64 KiB on one channel: 0 -> 1 and 1 -> 0, one send each
    rf = rail_optimized(1, 2)
    s = schedule("sendrecv", 2, 65536 // 4, "float", nchannels=1, gpus_per_node=2)
    assert [(t.src, t.dst, t.wire_bytes) for t in s.transfers] == [(0, 1, 65536), (1, 0, 65536)]
    run = run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=2)
    want = _ps(65536) + NVLINK_LATENCY_PS  # 145,636 ps + 1 us
    assert [f - st for f, st in zip(run.finish_ps, run.start_ps, strict=True)] == [want] * 2
    assert run.time_ps == want
    assert sum(h.port.tx_bytes for h in (rf.fabric.nodes[x] for x in rf.ranks)) == 0


def test_two_transfers_on_one_egress_serialise():
    # 1 MiB to one peer: two 512 KiB P2P chunks (NCCL_P2P_NVL_CHUNKSIZE: one node) on one
    # connection, both posted at once
    rf = rail_optimized(1, 2)
    s = schedule("sendrecv", 2, (1 << 20) // 4, "float", nchannels=1, gpus_per_node=2)
    mine = [t for t in s.transfers if t.src == 0]
    assert [t.wire_bytes for t in mine] == [524288, 524288] and not mine[1].depends_on
    run = run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=2, nvlink_bps=800 * 10**9,
                       nvlink_latency_ps=5000)
    t0 = run.first_start_ps
    d = _ps(524288, 800 * 10**9)
    assert [run.finish_ps[t.id] - t0 for t in mine] == [d + 5000, 2 * d + 5000]


def test_domain_egress_and_ingress_are_fifo():
    dom = NvlinkDomain()
    # two sends from GPU 1 at t=0 serialise on its egress; a send from GPU 2 to GPU 3 does not
    assert dom.reserve(1, 2, 1000, 8 * 10**9, 10, 0) == 1_000_000 + 10
    assert dom.reserve(1, 3, 1000, 8 * 10**9, 10, 0) == 2_000_000 + 10
    assert dom.reserve(4, 5, 1000, 8 * 10**9, 10, 0) == 1_000_000 + 10
    # two senders to one GPU share its ingress
    assert dom.reserve(6, 5, 1000, 8 * 10**9, 10, 0) == 2_000_000 + 10
    assert dom.nbytes == 4000


def test_nvlink_false_keeps_every_hop_on_the_network():
    rf = rail_optimized(1, 2)
    s = schedule("sendrecv", 2, 65536 // 4, "float", nchannels=1, gpus_per_node=2)
    run = run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=2, nvlink=False)
    sent = sum(rf.fabric.nodes[x].port.tx_bytes for x in rf.ranks)
    # 64 frames of 1024 B each way, and each way one RC ACK (62 B) of the message's last
    assert sent == 2 * (65536 + 64 * ROCE_HEADER_BYTES + 62)
    assert run.time_ps > _ps(65536) + NVLINK_LATENCY_PS


# ---- rings and NICs ---------------------------------------------------------------------

def test_nccl_rings_by_hand():
    # 2 nodes x 4 GPUs, 2 channels: rails 0 and 1, each node's GPUs r, r-1, ..., r+1
    assert nccl_rings(2, 4, 2) == [[0, 3, 2, 1, 4, 7, 6, 5], [1, 0, 3, 2, 5, 4, 7, 6]]
    # channel 0's hop 1 -> 4 leaves through GPU 0's NIC (PXN over NVLink), rail 0 to rail 0
    assert send_nic_rank(1, 4, 4) == 0 and send_nic_rank(1, 4, 4, pxn=False) == 1
    assert send_nic_rank(5, 0, 4) == 4 and send_nic_rank(2, 3, 4) == 2  # same node: no NIC
    assert nccl_rings(3, 1, 2) == [[0, 1, 2], [0, 1, 2]]


@given(nodes=st.integers(2, 4), gpn=st.integers(1, 8), nc=st.integers(1, 9),
       coll=st.sampled_from(["allreduce", "allgather", "reducescatter", "broadcast"]),
       kib=st.integers(1, 300))
def test_rings_stay_in_rail_and_deliver(nodes, gpn, nc, coll, kib):
    n = nodes * gpn
    rings = nccl_rings(nodes, gpn, nc)
    for c, ring in enumerate(rings):
        assert sorted(ring) == list(range(n))
        hops = [(a, ring[(i + 1) % n]) for i, a in enumerate(ring)]
        between = [(a, b) for a, b in hops if a // gpn != b // gpn]
        assert len(between) == nodes  # one hop from each node to the next
        for a, b in between:  # enters on rail c mod G and leaves through that rail's NIC
            assert b % gpn == c % gpn and send_nic_rank(a, b, gpn) % gpn == c % gpn
            assert send_nic_rank(a, b, gpn) // gpn == a // gpn
    s = schedule(coll, n, kib * 256, "float", nchannels=nc, gpus_per_node=gpn)
    assert s.rings == rings[:s.nchannels]
    verify(s)


# ---- on the rail fabric -----------------------------------------------------------------

def test_ring_allreduce_puts_nothing_on_the_spines():
    rf = rail_optimized(2, 4, link_gbps=400)
    s = schedule("allreduce", 8, (4 << 20) // 4, "float", nchannels=2, gpus_per_node=4)
    run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=4)
    assert _spine_bytes(rf) == 0
    old = rail_optimized(2, 4, link_gbps=400)
    run_schedule(s, old.fabric, old.ranks, gpus_per_node=4, nvlink=False)
    assert _spine_bytes(old) > 0


@pytest.mark.parametrize(("pxn", "spine"), [(True, False), (False, True)])
def test_alltoall_pxn_keeps_the_network_in_rail(pxn, spine):
    rf = rail_optimized(2, 4, link_gbps=400)
    s = schedule("alltoall", 8, (256 << 10) // 4, "float", nchannels=2, gpus_per_node=4)
    run = run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=4, pxn=pxn)
    assert run.complete
    assert (_spine_bytes(rf) > 0) is spine
    order = sorted(range(len(s.transfers)), key=lambda i: (run.start_ps[i], i))
    verify(s, order)


def test_ring_on_2x8_rails_approaches_the_nic_bound():
    # 8 channels, one per rail: every NIC carries one channel each way, so busbw is bounded
    # by 8 x 50 GB/s x 4096 / 4154 (RoCE headers); NVLink's 450 GB/s per GPU is not the limit
    rf = rail_optimized(2, 8, link_gbps=400)
    nbytes = 32 << 20
    s = schedule("allreduce", 16, nbytes // 4, "float", nchannels=8, gpus_per_node=8)
    run = run_schedule(s, rf.fabric, rf.ranks, mtu_bytes=4096, gpus_per_node=8)
    busbw = nbytes * 2 * 15 / 16 / (run.time_ps / 1e12) / 1e9
    bound = 8 * 50 * 4096 / (4096 + ROCE_HEADER_BYTES)
    assert 0.9 * bound < busbw < bound
    assert _spine_bytes(rf) == 0


# ---- wired through lossless collective's library ----------------------------------------

def test_run_size_places_the_fabrics_nodes_and_takes_the_nvlink_keys():
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    def row(fabric: str, **kw):  # Ring Simple on the network alone: NVLink is what differs
        p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 4,
                                                 "nccl_host": False, **kw})
        return run_size("allreduce", 1 << 20, fabric, p, algorithm="ring", protocol="simple",
                        inplace=False)

    on, off = row("rail"), row("rail", nvlink=False)
    assert on["wrong"] == off["wrong"] == 0
    assert on["nvlink_bytes"] > 0 and off["nvlink_bytes"] == 0
    assert on["busbw_GB_per_s"] > 2 * off["busbw_GB_per_s"]
    slow = row("rail", nvlink_gbps=100.0, nvlink_latency_ns=5000.0)
    assert slow["nvlink_bytes"] == on["nvlink_bytes"] and slow["time_ps"] > on["time_ps"]
    assert row("rail", pxn=False)["counters"]["max_queue_bytes"] > on["counters"][
        "max_queue_bytes"]  # the ring's node-to-node hops cross the rails through a spine
    assert row("star")["nvlink_bytes"] > 0  # 2 nodes of 4 GPUs on the star too
    assert row("star", nodes=8, gpus_per_node=1)["nvlink_bytes"] == 0  # one GPU per node


def test_an_nvls_schedule_and_a_job_of_other_nodes_are_refused():
    """An NVLS schedule's buffers belong to its nodes: a job grouping the ranks otherwise is
    one error before the fabric is touched."""
    rf = rail_optimized(2, 4)
    s = schedule("allreduce", 8, 1 << 12, nchannels=2, algorithm="nvls_tree", gpus_per_node=4)
    with pytest.raises(ValueError, match="the schedule's nodes have 4 GPUs, the job's 2"):
        run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=2)

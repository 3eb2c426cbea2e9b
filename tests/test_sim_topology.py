"""Leaf-spine and ring builders: full reachability, loop-free routes, determinism."""

from __future__ import annotations

import pytest

from sim.fabric.topology import leaf_spine, ring
from sim.net.mmu import MmuConfig, headroom_bytes
from sim.nic.host import Flow
from sim.trace import ListTracer
from sim.units import gbps, prop_delay_ps

RATE = gbps(100)
SIZE = 3 * 1082


def _cfg(ports: int = 8) -> MmuConfig:
    return MmuConfig(buffer_bytes=2_000_000, ports=ports, reserved_bytes=2000,
                     headroom_bytes=headroom_bytes(RATE, 10, 1082, 1_000_000),
                     lossless_pgs=frozenset({3}), xoff_mode="static", xoff_bytes=20_000,
                     xon_delta_bytes=2000)


def _all_pairs(topo, max_hops: int, duration_ps: int = 200_000_000):
    """One small flow between every ordered host pair; record each delivered packet's hops."""
    fab = topo.fabric
    hosts = topo.all_hosts
    hops: dict[int, list[int]] = {}
    for h in hosts:
        node = fab.nodes[h]
        orig = node.receive

        def rec(port, pkt, _orig=orig):
            if pkt.frame is None:
                hops.setdefault(pkt.flow, []).append(pkt.hops)
            _orig(port, pkt)

        node.receive = rec
    fid = 0
    for s in hosts:
        for d in hosts:
            if s != d:
                fab.add_flow(Flow(fid, s, d, RATE // 4, size_bytes=SIZE, start_ps=fid * 1000))
                fid += 1
    fab.run(duration_ps)
    summ = fab.summary()
    assert summ["totals"]["drops"] == 0
    for f in summ["flows"]:
        assert f["bytes_delivered"] == SIZE, f
        assert f["fct_ps"] is not None
    assert len(hops) == fid
    assert all(1 <= h <= max_hops for hs in hops.values() for h in hs)
    return summ, hops


def test_leaf_spine_numbering() -> None:
    t = leaf_spine(2, 2, 2, RATE, prop_delay_ps(10), _cfg())
    assert t.spines == [0, 1] and t.leaves == [2, 3] and t.hosts == [[4, 5], [6, 7]]
    leaf0 = t.fabric.nodes[2]
    assert leaf0.routes == {4: 0, 5: 1, 6: 2, 7: 3}  # down, down, up to spine 0, up to spine 1
    assert t.fabric.nodes[0].routes == {4: 0, 5: 0, 6: 1, 7: 1}


def test_leaf_spine_2x2x2_all_pairs_reach_loop_free() -> None:
    t = leaf_spine(2, 2, 2, RATE, prop_delay_ps(10), _cfg())
    _, hops = _all_pairs(t, max_hops=3)
    hosts = t.all_hosts
    # same leaf: 1 switch; other leaf: leaf, spine, leaf
    fid = 0
    for s in hosts:
        for d in hosts:
            if s != d:
                want = 1 if (s - 4) // 2 == (d - 4) // 2 else 3
                assert set(hops[fid]) == {want}
                fid += 1


def test_ring_4_all_pairs_reach_loop_free() -> None:
    t = ring(4, RATE, prop_delay_ps(10), _cfg())
    assert t.switches == [0, 1, 2, 3] and t.all_hosts == [4, 5, 6, 7]
    _, hops = _all_pairs(t, max_hops=4)
    # clockwise: from switch s to switch t crosses (t - s) % 4 + 1 switches
    fid = 0
    for s in range(4):
        for d in range(4):
            if s != d:
                assert set(hops[fid]) == {(d - s) % 4 + 1}
                fid += 1


def test_ring_shortest_routing_and_two_hosts_per_switch() -> None:
    t = ring(4, RATE, prop_delay_ps(10), _cfg(), hosts_per_switch=2, routing="shortest")
    assert t.hosts == [[4, 5], [6, 7], [8, 9], [10, 11]]
    assert t.fabric.nodes[0].routes[10] == 3  # switch 3 is one hop counter-clockwise (port K+1)
    _all_pairs(t, max_hops=3)


def test_determinism() -> None:
    def run():
        tr = ListTracer()
        t = leaf_spine(2, 2, 2, RATE, prop_delay_ps(10), _cfg(), seed=3, tracer=tr)
        summ, _ = _all_pairs(t, max_hops=3)
        return summ, tr.events

    assert run() == run()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        leaf_spine(2, 2, 8, RATE, 0, _cfg(ports=8))  # leaves need 10 ports
    with pytest.raises(ValueError):
        ring(1, RATE, 0, _cfg())
    with pytest.raises(ValueError):
        ring(3, RATE, 0, _cfg(), routing="anticlockwise")

"""A flow's path without packets (sim.fabric.paths) against the packets' own: after a
packet run every switch's ECMP choice of a flow (``Switch.ecmp_choices``, keyed by the
packets' (src, dst, flow)) is the port :func:`path_links` gives at that switch."""

from __future__ import annotations

import pytest

from sim.fabric.fattree import fat_tree
from sim.fabric.paths import PathError, path_links
from sim.fabric.rail import rail_optimized
from sim.net.switch import Switch
from sim.workloads.collective import run_schedule
from sim.workloads.nccl import schedule


def _check(fab) -> int:
    checked = 0
    for sw in fab.nodes.values():
        if not isinstance(sw, Switch):
            continue
        for (src, dst, flow), port in sw.ecmp_choices.items():
            hops = dict(path_links(fab, src, dst, flow))
            assert hops[sw.node_id] == port, (sw.node_id, src, dst, flow)
            checked += 1
    return checked


@pytest.mark.parametrize("qps", [1, 4, 16])
def test_paths_are_the_packets_on_a_fat_tree(qps):
    """A ring AllReduce over a k=4 fat-tree with ECMP (one GPU per host, every hop on the
    network): every (switch, flow) choice the packets made, data and RC ACKs, is the
    path's; and each path ends at its receiver."""
    ft = fat_tree(4, 1, link_gbps=100, seed=3)
    n = len(ft.ranks)
    s = schedule("allreduce", n, (1 << 20) // 4, nchannels=2, gpus_per_node=1,
                 qps_per_connection=qps)
    run_schedule(s, ft.fabric, ft.ranks)
    assert _check(ft.fabric) > 0
    for fid, flow in ft.fabric.flows.items():
        links = path_links(ft.fabric, flow.src, flow.dst, fid)
        assert links[0] == (flow.src, 0) and len(links) in (2, 4, 6)


def test_paths_on_a_rail_fabric_with_pxn():
    rf = rail_optimized(2, 4, spines=2, link_gbps=100)
    s = schedule("alltoall", 8, 1 << 14, gpus_per_node=4, qps_per_connection=2)
    run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=4, pxn=False)
    assert _check(rf.fabric) > 0


def test_no_single_path_is_one_error():
    ft = fat_tree(4, 1, link_gbps=100)
    edge = ft.fabric.nodes[ft.ranks[0]].port.peer  # the sender's edge switch: up by ECMP
    edge.set_routes(edge.routes, routing="adaptive")
    with pytest.raises(PathError, match="routes adaptively"):
        path_links(ft.fabric, ft.ranks[0], ft.ranks[-1], 7)
    with pytest.raises(PathError, match="no host"):
        path_links(ft.fabric, ft.ranks[0], 10**6, 7)


def test_a_faulted_link_leads_to_the_node_behind_it():
    """A lossy link has the fault's wire between its ports; the path still names the
    switches and ports the packets cross."""
    from sim.fabric.faults import Fault, peer_node, schedule_faults

    ft = fat_tree(4, 1, link_gbps=100)
    src, dst = ft.ranks[0], ft.ranks[-1]
    before = path_links(ft.fabric, src, dst, 9)
    node, port = before[1]  # the sender's edge switch's uplink
    schedule_faults(ft.fabric, [Fault("loss", node, port, loss_rate=0.01)])
    ft.fabric.run(1)
    wire = ft.fabric.nodes[node].ports[port].peer
    assert wire is not peer_node(ft.fabric.nodes[node].ports[port])  # a wire stands between
    assert path_links(ft.fabric, src, dst, 9) == before

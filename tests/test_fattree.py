"""Fat-tree and DGX H100 SuperPOD fabrics: sim.fabric.fattree, the
``lossless collective --fabric fattree|superpod`` options and fabric files' ``[topology] kind
= "fat_tree" | "rail" | "superpod"``.

Expected counts are derived here from the definitions (Al-Fares et al., SIGCOMM 2008 §3.3;
the DGX SuperPOD H100 reference architecture's table), not read from the builder."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
from sim.fabric.fattree import check_built, fat_tree, superpod
from sim.net.routes import RouteRule, route_values
from sim.net.switch import Switch, ecmp_hash, ecmp_salt
from sim.workloads.collective import frames_bytes, run_schedule
from sim.workloads.nccl import schedule, verify


def _switches(fab) -> list[Switch]:
    return [n for n in fab.nodes.values() if isinstance(n, Switch)]


def _links(fab) -> int:
    return sum(len(n.ports) for n in fab.nodes.values()) // 2


def _path(fab, src: int, dst: int, flow: int = 0) -> list[int]:
    """The switches a frame of (src, dst, flow) crosses, following the tables and hashing
    ECMP groups as sim.net.switch.Switch does."""
    node, out = fab.nodes[fab.nodes[src].port.peer.node_id], []
    while isinstance(node, Switch):
        assert node.node_id not in out, "loop"
        out.append(node.node_id)
        r = node.routes[dst]
        if isinstance(r, tuple):
            r = r[ecmp_hash(src, dst, flow, ecmp_salt(node.node_id, node.ecmp_seed)) % len(r)]
        node = node.ports[r].peer
    assert node.node_id == dst
    return out


# ------------------------------------------------------------------ fat-tree structure
@given(k=st.sampled_from([2, 4, 6, 8]), o=st.integers(1, 3), ecmp=st.booleans())
def test_fat_tree_counts_follow_al_fares(k, o, ecmp):
    ft = fat_tree(k, o, ecmp=ecmp)
    h = k // 2
    assert len(ft.cores) == h * h
    assert [len(p) for p in ft.aggs] == [h] * k and [len(p) for p in ft.edges] == [h] * k
    assert len(ft.ranks) == k * h * h * o == len(set(ft.ranks))
    assert all(len(g) == o * h for g in ft.hosts)
    sw = {s.node_id: len(s.ports) for s in _switches(ft.fabric)}
    assert len(sw) == h * h + k * k
    assert all(sw[c] == k for c in ft.cores)
    assert all(sw[a] == k for pod in ft.aggs for a in pod)
    assert all(sw[e] == (1 + o) * h for pod in ft.edges for e in pod)
    assert _links(ft.fabric) == k * h * h * o + 2 * k * h * h  # hosts, edge-agg, agg-core


def test_fat_tree_paths_are_shortest_and_loop_free():
    ft = fat_tree(4)
    h0 = ft.hosts[0][0]
    for dst in ft.ranks[1:]:
        p = ft.ranks.index(dst)
        same_edge, same_pod = p < 2, p < 4
        for flow in range(4):
            hops = len(_path(ft.fabric, h0, dst, flow))
            assert hops == (1 if same_edge else 3 if same_pod else 5)


def test_fat_tree_ecmp_spreads_over_every_core_and_deterministic_down():
    ft = fat_tree(4)
    fab = ft.fabric
    src_pod, dst_pod = ft.ranks[:4], ft.ranks[4:8]
    used = Counter(_path(fab, s, d, f)[2] for s in src_pod for d in dst_pod for f in range(8))
    assert set(used) == set(ft.cores)
    assert min(used.values()) >= 0.1 * sum(used.values())  # no core starved (4 cores, 128)
    # down from a core is one port per pod; from an aggregation switch one per edge
    for c in ft.cores:
        assert all(isinstance(r, int) for r in fab.nodes[c].routes.values())
    # without ECMP every flow to one destination takes one core, destinations spread
    det = fat_tree(4, ecmp=False).fabric
    for d in dst_pod:
        assert len({_path(det, s, d, f)[2] for s in src_pod for f in range(4)}) == 1
    assert {_path(det, src_pod[0], d)[2] for d in dst_pod} == set(ft.cores)


def test_fat_tree_refuses_bad_shapes_and_radix():
    with pytest.raises(ValueError, match="k must be even"):
        fat_tree(5)
    with pytest.raises(ValueError, match="oversubscription must be a positive int"):
        fat_tree(4, 0)
    with pytest.raises(ValueError, match=r"switch .* needs 6 ports, more than the radix 4"):
        fat_tree(4, 2, radix=4)  # edges: 4 hosts + 2 uplinks
    with pytest.raises(ValueError, match="does not divide the 16 hosts"):
        fat_tree(4, gpus_per_node=3)


def test_check_built_catches_a_loop_a_hole_and_wrong_counts():
    ft = fat_tree(4)
    fab, ports = ft.fabric, {s.node_id: len(s.ports) for s in _switches(ft.fabric)}
    links = _links(fab)
    check_built(fab, ft.ranks, ports, links, None)
    with pytest.raises(ValueError, match="expected 17"):
        check_built(fab, ft.ranks, ports, 17, None)
    with pytest.raises(ValueError, match="has 4 ports, expected 5"):
        check_built(fab, ft.ranks, {**ports, ft.cores[0]: 5}, links, None)
    # a core sending pod 1's first host back up to pod 0 (an aggregation switch, which sends
    # it up again): a loop between tiers, found by following the tables
    dst = ft.hosts[2][0]
    agg = fab.nodes[ft.aggs[0][0]]
    core = fab.nodes[agg.ports[2].peer.node_id]
    core.routes = dict(core.routes)  # the built table is a rule (read-only): a dict copy
    core.routes[dst] = 0
    with pytest.raises(ValueError, match=f"cannot reach host {dst}: loops at switch"):
        check_built(fab, ft.ranks, ports, links, None)
    del core.routes[dst]
    with pytest.raises(ValueError, match=f"no route to {dst}"):
        check_built(fab, ft.ranks, ports, links, None)


@pytest.mark.parametrize("k, o, ecmp", [(4, 1, True), (4, 2, False), (6, 1, True),
                                         (8, 1, False), (8, 3, True)])
def test_fat_tree_rules_are_the_tables_of_the_module_docstring(k, o, ecmp):
    """Every switch's rule (RouteRule) equals, destination by destination, the table the
    module docstring's numbering and routes give, written out here as a dict."""
    ft = fat_tree(k, o, ecmp=ecmp)
    h, H = k // 2, o * k // 2
    base = h * h + 2 * k * h
    up, e_up = tuple(range(h, 2 * h)), tuple(range(H, H + h))
    for node, sw in ft.fabric.nodes.items():
        if not isinstance(sw, Switch):
            continue
        want = {}
        for d in ft.ranks:
            j = d - base
            dp, de, di = j // (h * H), (j // H) % h, j % H
            if node < h * h:  # a core: the destination's pod
                want[d] = dp
            elif node < h * h + k * h:  # aggregation switch of pod p
                p = (node - h * h) // h
                want[d] = de if dp == p else (up if ecmp else h + (d // h) % h)
            else:
                p, e = divmod(node - h * h - k * h, h)
                want[d] = di if (dp, de) == (p, e) else (e_up if ecmp else H + d % h)
        assert isinstance(sw.routes, RouteRule)
        assert dict(sw.routes) == want and sw.routes == want and len(sw.routes) == len(want)
        assert set(route_values(sw.routes)) == set(want.values())
        assert sw.routes.get(-1) is None and -1 not in sw.routes


def test_large_fat_tree_builds_with_sampled_route_checks():
    """k=32 (8,192 hosts, 1,280 switches): built in seconds (rules, no per-destination
    tables); the check still finds a switch without a route to a sampled host."""
    ft = fat_tree(32, gpus_per_node=8)
    assert len(ft.ranks) == 8192 and len(_switches(ft.fabric)) == 1280
    assert len(ft.fabric.nodes[ft.cores[0]].routes) == 8192
    fab = ft.fabric
    ports = {s.node_id: len(s.ports) for s in _switches(fab)}
    edge = fab.nodes[ft.edges[5][3]]
    edge.routes = {d: r for d, r in edge.routes.items() if d != ft.ranks[-1]}
    with pytest.raises(ValueError, match=f"no route to {ft.ranks[-1]}"):
        check_built(fab, ft.ranks, ports, _links(fab), None)


# ------------------------------------------------------------------ SuperPOD
@pytest.mark.parametrize("sus, nodes, leaves, spines, node_cables, trunk_cables", [
    (1, 31, 8, 4, 252 - 4, 256),      # RA table: 252 node cables include the UFM's 4
    (4, 127, 32, 16, 1020 - 4, 1024),
])
def test_superpod_matches_the_reference_architecture(sus, nodes, leaves, spines,
                                                     node_cables, trunk_cables):
    sp = superpod(sus)
    assert (sp.nodes, sum(len(u) for u in sp.leaves), len(sp.spines)) == (nodes, leaves,
                                                                          spines)
    assert len(sp.ranks) == 8 * nodes
    fab = sp.fabric
    sw = {s.node_id: s for s in _switches(fab)}
    assert len(sw) == leaves + spines
    assert _links(fab) == node_cables + trunk_cables
    assert all(len(sw[s].ports) == 64 for s in sp.spines)  # QM9700: 64 ports
    assert all(len(sw[x].ports) <= 64 for u in sp.leaves for x in u)
    # rail-optimised: GPU g of every node of SU u is on that SU's leaf g
    for r, host in enumerate(sp.ranks):
        n, g = divmod(r, 8)
        assert fab.nodes[host].port.peer.node_id == sp.leaves[n // 32][g]
    # same rail in an SU: one switch; another rail or SU: leaf, spine, leaf
    a = sp.ranks[0]
    assert len(_path(fab, a, sp.ranks[8])) == 1
    assert len(_path(fab, a, sp.ranks[1])) == 3


def test_superpod_partial_and_refusals():
    sp = superpod(2, nodes=3)
    assert len(sp.ranks) == 24 and len(sp.spines) == 8
    with pytest.raises(ValueError, match=r"sus must be one of \[1, 2, 4, 8\]"):
        superpod(3)
    with pytest.raises(ValueError, match="1 SU hold 31 nodes, got 32"):
        superpod(1, nodes=32)


# ------------------------------------------------------------------ a collective on it
def test_ring_allreduce_on_a_k4_fat_tree_delivers_every_byte():
    ft = fat_tree(4, link_gbps=100)
    sch = schedule("allreduce", len(ft.ranks), 2**18, "float", nchannels=2,
                   qps_per_connection=2)
    run = run_schedule(sch, ft.fabric, ft.ranks)
    assert run.complete and run.counters["drops"] == 0
    fab = ft.fabric
    for fid, (src, dst, *_rest) in run.flows.items():
        assert (fab.nodes[ft.ranks[src]].sent_bytes[fid]
                == fab.nodes[ft.ranks[dst]].rx_bytes.get(fid, 0) == run.posted_bytes[fid])
    assert sum(run.posted_bytes.values()) == sum(
        frames_bytes(b) for t in sch.transfers for b in t.qp_bytes)
    verify(sch, sorted(range(len(sch.transfers)), key=lambda i: (run.start_ps[i], i)))
    crossed = [p for p in fab.nodes[ft.cores[0]].ports.values() if p.tx_bytes]
    assert crossed  # the ring leaves its pods through the cores


# ------------------------------------------------------------------ CLI
def test_cli_collective_on_fattree_and_superpod(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "--fabric", "fattree", "-p", "k=4",
                 "-b", "256K", "-e", "256K", "--json", str(out)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "16 ranks (4 nodes x 4 GPUs), fabric fattree" in head
    doc = json.loads(out.read_text())
    assert doc["nranks"] == 16 and doc["results"][0]["wrong"] == 0
    assert main(["collective", "allreduce", "--fabric", "superpod", "-p", "superpod_nodes=2",
                 "-b", "64K", "-e", "64K"]) == 0
    assert "16 ranks (2 nodes x 8 GPUs), fabric superpod" in capsys.readouterr().out


@pytest.mark.parametrize("args, msg", [
    (["--fabric", "fattree", "-p", "k=3"], "parameter 'k': must be an even int in 2..64"),
    (["--fabric", "fattree", "-p", "k=66"], "parameter 'k': must be an even int in 2..64"),
    (["--fabric", "fattree", "-p", "oversubscription=0"], "oversubscription"),
    (["--fabric", "fattree", "-p", "gpus_per_node=3"], "does not divide the 16 hosts"),
    (["--fabric", "fattree", "-p", "sus=2"], "-p sus: does not apply to --fabric fattree"),
    (["--fabric", "superpod", "-p", "sus=3"], "parameter 'sus': must be one of [1, 2, 4, 8]"),
    (["--fabric", "superpod", "-p", "nodes=4"], "-p nodes: does not apply to --fabric "
                                                "superpod"),
    (["--fabric", "superpod", "-p", "superpod_nodes=40"], "1 SU hold 31 nodes, got 40"),
    (["--fabric", "rail", "-p", "k=4"], "-p k: does not apply to --fabric rail"),
])
def test_cli_fabric_errors_are_one_line_exit_2(args, msg, capsys):
    assert main(["collective", "allreduce", "-b", "1K", "-e", "1K", *args]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    lines = cap.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lossless: ") and msg in lines[0], lines


# ------------------------------------------------------------------ fabric files
def _file(tmp_path, topology: str, extra: str = "") -> str:
    p = tmp_path / "f.toml"
    p.write_text(f"[topology]\n{topology}\n[run]\nduration_ms = 0.02\n"
                 f"[traffic]\npattern = \"shift\"\n{extra}")
    return str(p)


@pytest.mark.parametrize("topology, extra, hosts, switches", [
    ('kind = "fat_tree"\nk = 4\noversubscription = 2\necmp = true', "", 32, 20),
    ('kind = "rail"\nnodes = 2\ngpus_per_node = 4\nspines = 2', "", 8, 6),
    ('kind = "superpod"\nsuperpod_nodes = 2', "[switch]\nbuffer_kb = 32000\n", 16, 12),
])
def test_fabric_file_kinds_build(tmp_path, topology, extra, hosts, switches):
    from sim.scenarios import loader

    sc = loader.build(_file(tmp_path, topology, extra))
    sw = _switches(sc.fabric)
    assert len(sw) == switches and len(sc.fabric.nodes) - len(sw) == hosts
    assert len(sc.fabric.flows) == hosts  # shift: one flow per host


@pytest.mark.parametrize("topology, msg", [
    ('kind = "fat_tree"\nk = 5', "[topology] parameter 'k': must be an even int in 2..64"),
    ('kind = "fat_tree"\nsus = 2', "[topology] ['sus'] do(es) not apply to kind = 'fat_tree'"),
    ('kind = "superpod"\nsus = 2\nsuperpod_nodes = 70', "[topology] nodes: 2 SU hold 63"),
    ('kind = "rail"\nk = 4', "[topology] ['k'] do(es) not apply to kind = 'rail'"),
    ('kind = "rail"\nnodes = 70', "[topology] switch 2 needs 72 ports, more than the radix 64"),
])
def test_fabric_file_errors_one_line_exit_2(tmp_path, topology, msg, capsys):
    f = _file(tmp_path, topology, "[switch]\nbuffer_kb = 32000\n")
    assert main(["replay", f, "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and msg in err[0], err

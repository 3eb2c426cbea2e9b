"""NCCL's graph file (NCCL_GRAPH_FILE): read (sim.fabric.nccl_xml.read_nccl_graph), its
ring graph's channel orders run as the collective's rings, reported by lossless fabric."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.fabric.nccl_xml import NcclTopoError, graph_rings, read_nccl_graph
from tests.helpers import real_file


def _write(path, channels_by_graph):
    root = ET.Element("graphs", version="1")
    for gid, (pattern, channels) in enumerate(channels_by_graph):
        g = ET.SubElement(root, "graph", id=str(gid), pattern=str(pattern),
                          nchannels=str(len(channels)))
        for ch in channels:
            c = ET.SubElement(g, "channel")
            ET.SubElement(c, "net", dev="0")
            for d in ch:
                ET.SubElement(c, "gpu", dev=str(d))
            ET.SubElement(c, "net", dev="0")
    ET.ElementTree(root).write(path)


def test_real_azure_graph():
    graphs = read_nccl_graph(real_file("nccl/azure_ncv4-graph.xml"))
    assert [(g.id, g.pattern, g.kind, len(g.gpus)) for g in graphs] == [
        (0, 4, "ring", 2), (1, 1, "balanced tree", 4), (2, 3, "tree", 4)]
    assert graphs[0].gpus == [[0, 1, 2, 3], [0, 3, 2, 1]]
    # 4 channels over 2 nodes: the file's 2 channels again (NCCL duplicates them)
    assert graph_rings(graphs, 2, 4, 4) == [[0, 1, 2, 3, 4, 5, 6, 7],
                                            [0, 3, 2, 1, 4, 7, 6, 5]] * 2


@settings(max_examples=30)
@given(st.integers(1, 8).flatmap(lambda g: st.tuples(
    st.just(g), st.lists(st.permutations(list(range(g))), min_size=1, max_size=6))),
       st.integers(1, 5), st.integers(1, 12))
def test_rings_follow_the_files_channels(tmp_path_factory, gc, nodes, nchannels):
    g, channels = gc
    path = tmp_path_factory.mktemp("g") / "graph.xml"
    _write(path, [(3, channels), (4, channels)])
    graphs = read_nccl_graph(path)
    assert graphs[1].gpus == [list(c) for c in channels] and graphs[1].nets[0] == [0, 0]
    rings = graph_rings(graphs, nodes, g, nchannels)
    for c, ring in enumerate(rings):
        order = list(channels[c % len(channels)])
        assert ring == [n * g + x for n in range(nodes) for x in order]
        assert sorted(ring) == list(range(nodes * g))


def test_a_collective_runs_the_files_rings(tmp_path, capsys, monkeypatch):
    path = tmp_path / "graph.xml"
    _write(path, [(4, [[0, 2, 1, 3], [3, 1, 2, 0]])])
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective_plan import plan_size
    from sim.scenarios.common import collective_params
    from sim.workloads.nccl_tests import coll_counts

    params = resolve_params(collective_params(), {"graph": str(path), "nccl_host": False})
    plan = plan_size("allreduce", coll_counts("allreduce", 1 << 20, "float", 8), 2, 4,
                     params, algorithm="ring", protocol="simple", channels=4)
    assert plan.schedule.rings == [[0, 2, 1, 3, 4, 6, 5, 7], [3, 1, 2, 0, 7, 5, 6, 4]] * 2
    # from the environment, as NCCL reads it; the result is right (#wrong 0)
    monkeypatch.setenv("NCCL_GRAPH_FILE", str(path))
    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--fabric", "rail",
                 "-p", "nodes=2", "-p", "gpus_per_node=4", "--algo", "ring", "--proto",
                 "simple", "--json", str(out), "--quiet"]) == 0
    doc = json.loads(out.read_text())
    assert doc["params"]["graph"] == str(path) and doc["results"][0]["wrong"] == 0


@pytest.mark.parametrize("text, why", [
    ("<graphs><graph id='0' pattern='4' nchannels='2'><channel><gpu dev='0'/></channel>"
     "</graph></graphs>", "nchannels=2 but 1 <channel>s"),
    ("<graphs><graph id='0' pattern='4'><channel><net dev='0'/></channel></graph></graphs>",
     "channel 0: no <gpu>"),
    ("<graphs><graph id='0' pattern='4'><channel><gpu dev='x'/></channel></graph></graphs>",
     "dev='x': not a number"),
    ("<system/>", "NCCL's graph file is a <graphs>"),
    ("<graphs", "not XML"),
])
def test_bad_graph_files(tmp_path, text, why):
    p = tmp_path / "g.xml"
    p.write_text(text)
    with pytest.raises(NcclTopoError, match=None) as e:
        read_nccl_graph(p)
    assert why in str(e.value) and str(p) in str(e.value)


def test_rings_that_are_not_the_nodes_gpus(tmp_path):
    p = tmp_path / "g.xml"
    _write(p, [(4, [[0, 1, 2]]), (1, [[0, 1, 2, 3]])])
    with pytest.raises(ValueError, match=r"ring channel 0 visits GPUs \[0, 1, 2\]"):
        graph_rings(read_nccl_graph(p), 2, 4, 2)
    _write(p, [(1, [[0, 1, 2, 3]])])
    with pytest.raises(ValueError, match="no ring graph"):
        graph_rings(read_nccl_graph(p), 2, 4, 2)


def test_fabric_reports_a_graph(capsys):
    path = str(real_file("nccl/azure_ncv4-graph.xml"))
    assert main(["fabric", path]) == 0
    out = capsys.readouterr().out
    assert "graph 0 (ring): 2 channels" in out and "channel 1: GPU 0 -> 3 -> 2 -> 1" in out
    assert main(["fabric", path, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[1]["kind"] == "balanced tree"


def test_a_tree_runs_the_files_chains(tmp_path):
    """The tree graph's channels chain each node's GPUs from their first (the head, where
    the tree leaves the node); both trees' channels take the same chains."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective_plan import plan_size
    from sim.scenarios.common import collective_params
    from sim.workloads.nccl import tree_key, tree_of_channel, verify
    from sim.workloads.nccl_tests import coll_counts

    path = tmp_path / "graph.xml"
    _write(path, [(4, [[0, 1, 2, 3]]), (1, [[2, 0, 3, 1], [1, 3, 0, 2]])])
    params = resolve_params(collective_params(), {"graph": str(path), "nccl_host": False})
    plan = plan_size("allreduce", coll_counts("allreduce", 1 << 20, "float", 8), 2, 4,
                     params, algorithm="tree", protocol="simple", channels=4)
    sch = plan.schedule
    assert [tree_key(sch, c) for c in range(4)] == [
        (0, 2, (2, 0, 3, 1)), (0, 1, (1, 3, 0, 2)), (1, 2, (2, 0, 3, 1)), (1, 1, (1, 3, 0, 2))]
    t = tree_of_channel(sch, 0)
    assert t[2] == (-1, (0, 6)) and t[0] == (2, (3,)) and t[3] == (0, (1,)) and t[1] == (3, ())
    verify(sch)  # every rank ends with the sum


def test_the_files_trees_change_a_network_bound_call(capsys):
    """Azure's NC A100 v4 tree graph leaves its nodes by GPUs 0-3 in turn like NCCL's
    default; a graph whose chains all start at GPU 0 puts the trees on one rail."""
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "g.xml"
        _write(path, [(1, [[0, 1, 2, 3], [0, 3, 2, 1]])])
        got = []
        for extra in ([], ["-p", f"graph={path}"]):
            assert main(["collective", "allreduce", "-b", "64M", "-e", "64M", "--fabric", "rail",
                         "-p", "nodes=2", "-p", "gpus_per_node=4", "--algo", "tree", "--proto",
                         "simple", "--fidelity", "flow", "-p", "nccl_host=false",
                         "-p", "link_gbps=100", "--json", str(Path(d) / "r.json"),
                         "--quiet", *extra]) == 0
            got.append(json.loads((Path(d) / "r.json").read_text())["results"][0])
    default, one_rail = (g["busbw_GB_per_s"] for g in got)
    assert one_rail < 0.6 * default and got[1]["wrong"] in (0, None)

"""ibnetdiscover's topology file and -p listing (sim.fabric.ibnetdiscover), the fabric report
(sim.fabric.survey), OpenSM's forwarding tables and routes (sim.fabric.opensm) and
``lossless fabric``: on real files of a DGX H100 NDR fabric (and what OpenSM, ibsim and
infiniband-diags made of it) and of infiniband_exporter, and on generated fabrics."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.fabric.ibnetdiscover import (
    LANE_DATA_BPS,
    IbLink,
    IbnetdiscoverError,
    IbNode,
    IbTopology,
    format_ibnetdiscover,
    is_ibnetdiscover,
    parse_ibnetdiscover,
    read_ibnetdiscover,
)
from sim.fabric.opensm import LftError, Lfts, read_lfts, route, route_text
from sim.fabric.survey import Graph, graph_of_ibnetdiscover, survey, survey_text
from tests.helpers import real_file

DGX = "ib/topograph_ibnetdiscover_dgxh100_ndr_fattree.out"
DGX_P = "ib/generated/sim_ibnetdiscover_p.txt"  # ibsim's -p of the same fabric
EXPORTER_P = "ib/infiniband_exporter/ibnetdiscover_ports_test.out"


def _shape(topo: IbTopology) -> tuple[set, set]:
    """Nodes and links as sets, whatever the order and the end a link was read from (a
    CA's LID is written on its links' lines: none without one)."""
    linked = {g for ln in topo.links for g in (ln.a, ln.b)}
    return ({(n.kind, n.guid, n.nports, n.desc,
              n.lid if n.kind == "switch" or n.guid in linked else None)
             for n in topo.nodes.values()},
            {(frozenset([(ln.a, ln.a_port), (ln.b, ln.b_port)]), ln.label)
             for ln in topo.links})


# ---------------------------------------------------------------- real files
def test_the_dgx_h100_fabric_as_ibnetdiscover_wrote_it():
    topo = read_ibnetdiscover(real_file(DGX))
    assert topo.form == "topology"
    kinds = Counter(n.kind for n in topo.nodes.values())
    assert kinds == {"switch": 40, "ca": 582}
    # 2,228 port lines, each link written from both ends
    assert len(topo.links) == 1114
    assert {ln.label for ln in topo.links} == {"4xNDR"}
    assert {ln.rate_bps for ln in topo.links} == {400_000_000_000}
    leaf = topo.nodes[0x2C5EAB0300B87B40]
    assert (leaf.kind, leaf.nports, leaf.lid) == ("switch", 65, 73)
    assert leaf.desc == "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1"
    ca = topo.nodes[0xE09D7303007A4BD8]
    assert (ca.kind, ca.desc, ca.lid) == ("ca", "a08-p1-dgx-04-c01 mlx5_5", 647)
    ends = {(ln.a, ln.a_port): (ln.b, ln.b_port) for ln in topo.links}
    ends |= {v: k for k, v in ends.items()}
    assert ends[(0x2C5EAB0300B87B40, 35)] == (0x2C5EAB0300C26280, 32)  # leaf -> spine 02
    assert ends[(0x2C5EAB0300B87B40, 65)] == (0x2C5EAB0300B87B50, 1)  # its SHARP node


def test_the_ports_listing_of_the_same_fabric_has_the_same_links():
    """ibsim served the topology file and ibnetdiscover -p listed it (at SDR: ibsim 0.10
    knows no NDR): per switch, the same links to the same switches and CAs."""
    topo, listed = read_ibnetdiscover(real_file(DGX)), read_ibnetdiscover(real_file(DGX_P))
    assert listed.form == "ports"
    assert len(listed.links) == len(topo.links)
    assert {ln.label for ln in listed.links} == {"4xSDR"}

    def per_switch(t: IbTopology) -> Counter:
        out: Counter = Counter()
        for ln in t.links:
            for x, y in ((ln.a, ln.b), (ln.b, ln.a)):
                if t.nodes[x].kind == "switch":
                    out[(t.nodes[x].desc, t.nodes[y].kind, t.nodes[y].desc)] += 1
        return out

    assert per_switch(listed) == per_switch(topo)
    # every switch port with no cable is listed with ??? (65-port switches)
    used = Counter(ln.a for ln in listed.links) + Counter(ln.b for ln in listed.links)
    assert len(listed.unlinked) == sum(65 - used[n.guid] for n in listed.by_kind("switch"))


def test_infiniband_exporters_ports_listing():
    topo = read_ibnetdiscover(real_file(EXPORTER_P))
    assert topo.form == "ports"
    assert len(topo.links) == 4 and {ln.label for ln in topo.links} == {"4xEDR"}
    assert sorted(p for _, p in topo.unlinked) == [37, 80]
    assert topo.nodes[0x7CFE9003003B4BDE].desc == "o0001 HCA-1"
    assert topo.nodes[0x7CFE9003009CE5B0].lid == 1719


def test_the_report_of_the_dgx_h100_fabric():
    rep = survey(graph_of_ibnetdiscover(read_ibnetdiscover(real_file(DGX))))
    assert rep["switches"] == {"leaf": 31, "spine": 9}
    assert rep["rails"] == 4 and rep["nics_per_node"] == 4
    assert rep["leaves_per_rail"] == {0: 8, 1: 8, 2: 7, 3: 8}
    assert rep["sharp_aggregation_nodes"] == 40
    assert {h["host"] for h in rep["other_hosts"]} == {"ubuntu", "B11-P1-CUFM-02"}
    assert rep["links"] == {"4xNDR": 1114}
    leaf = rep["tiers"][0]
    assert (leaf["links_down"], leaf["links_up"]) == (18, 18)
    assert rep["tiers"][1]["links_down"] == 62  # 31 leaves x 2 links to each spine
    off = rep["off"]
    whys = {s["switch"]: s["why"] for s in off["switches"]}
    assert whys["A09-P1-IBLEAF-01-02"].startswith("14 of 18 uplinks (")
    assert "A10-P1-IBSPINE-04: 0 of 2" in whys["A09-P1-IBLEAF-01-02"]
    assert whys["A10-P1-IBSPINE-04"] == "52 of 62 downlinks"
    # the HCA swap: HCA-5 and HCA-6 of one node cabled to each other's rail
    swapped = {(w["nic"], w["rail"], w["leaf_rail"]) for w in off["nics_on_another_rail"]}
    assert swapped == {("b08-p1-dgx-08-c01 HCA-5", 2, 3), ("b08-p1-dgx-08-c01 HCA-6", 3, 2)}
    # the first unit has no leaf of rail 2: its nodes have 3 NICs
    units = off["units_without_a_rail"]
    assert [(u["rail"], u["nodes"]) for u in units] == [(2, 17)]
    assert off["nics_without_host_name"]["count"] == 69
    text = survey_text(rep)
    assert "31 leaves, 9 spines" in text
    assert "NIC b08-p1-dgx-08-c01 HCA-5 (rail 2) on B09-P1-IBLEAF-04-08 port 1" in text


# ---------------------------------------------------------------- generated fabrics
_SPEEDS = sorted(LANE_DATA_BPS)


@st.composite
def _topologies(draw):
    """A random fabric: switches and CAs with links between free ports, random widths,
    speeds, descriptions (quotes and # inside: ibnetdiscover does not escape them) and
    LIDs."""
    nsw = draw(st.integers(1, 5))
    nca = draw(st.integers(0, 8))
    guids = draw(st.lists(st.integers(1, (1 << 64) - 1), min_size=nsw + nca,
                          max_size=nsw + nca, unique=True))
    desc = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=20
                   ).map(str.strip)
    topo = IbTopology("<generated>", "topology")
    for i, g in enumerate(guids):
        kind = "switch" if i < nsw else "ca"
        nports = draw(st.integers(1, 8)) if kind == "switch" else draw(st.integers(1, 2))
        topo.nodes[g] = IbNode(kind, g, nports, draw(desc), draw(st.integers(1, 0xBFFF)), 0)
    free = [(g, p) for g, n in topo.nodes.items() for p in range(1, n.nports + 1)]
    free = draw(st.permutations(free))
    for i in range(0, len(free) - 1, 2):
        (a, ap), (b, bp) = free[i], free[i + 1]
        if a == b or not draw(st.booleans()):
            continue
        if topo.nodes[a].kind == "ca" and topo.nodes[b].kind == "ca":
            continue
        # (width 0 and speed ???: what ibnetdiscover prints for ones it does not know)
        topo.links.append(IbLink(a, ap, b, bp, draw(st.sampled_from((0, 1, 2, 4, 8, 12))),
                                 draw(st.sampled_from([*_SPEEDS, "???"])), 0))
    return topo


@settings(max_examples=60, deadline=None)
@given(_topologies())
def test_a_written_topology_file_reads_back(topo):
    text = format_ibnetdiscover(topo)
    back = parse_ibnetdiscover(text, "t.out")
    assert _shape(back) == _shape(topo)
    for ln in back.links:
        assert ln.rate_bps == ln.width * LANE_DATA_BPS.get(ln.speed, 0)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 6), st.integers(2, 4), st.data())
def test_a_regular_rail_fabric_and_what_one_missing_link_shows(nodes, rails, data):
    """Nodes of ``rails`` NICs, a leaf per rail, 2 spines with 2 links to each leaf:
    nothing is off; a leaf's uplink taken away, that leaf and that spine are listed."""
    g = Graph("gen")
    leaves = list(range(100, 100 + rails))
    spines = [200, 201]
    for s in leaves + spines:
        g.switches[s] = f"sw{s}"
    for n in range(nodes):
        for r in range(rails):
            nic = 1000 + n * rails + r
            g.nics[nic] = f"h{n} mlx5_{r}"
            g.nic_host[nic] = (f"h{n}", r)
            g.links.append((nic, 1, leaves[r], 1 + n, 400, "4xNDR"))
    for s in leaves:
        for k, sp in enumerate(spines):
            for j in range(2):
                g.links.append((s, 50 + 2 * k + j, sp, 10 * s + j, 400, "4xNDR"))
    rep = survey(g)
    assert rep["rails"] == rails and rep["nodes"] == nodes
    assert not any(rep["off"][k] for k in ("switches", "links", "nodes_missing_nics",
                                           "nics_on_another_rail"))
    assert "nothing" in survey_text(rep)
    gone = data.draw(st.sampled_from([i for i, x in enumerate(g.links) if x[0] in leaves]))
    leaf, spine = g.links[gone][0], g.links[gone][2]
    del g.links[gone]
    rep = survey(g)
    whys = {s["switch"]: s["why"] for s in rep["off"]["switches"]}
    assert whys[f"sw{leaf}"] == f"3 of 4 uplinks (sw{spine}: 1 of 2)"
    assert whys[f"sw{spine}"] == f"{2 * rails - 1} of {2 * rails} downlinks"


# ---------------------------------------------------------------- bad input
_GOOD = ('Switch\t4 "S-0000000000000001"\t\t# "sw" enhanced port 0 lid 1 lmc 0\n'
         '[1]\t"H-0000000000000002"[1](0000000000000002) \t\t# "h mlx5_0" lid 2 4xNDR\n'
         '\n'
         'Ca\t1 "H-0000000000000002"\t\t# "h mlx5_0"\n'
         '[1](0000000000000002) \t"S-0000000000000001"[1]\t\t# lid 2 lmc 0 "sw" lid 1 '
         '4xNDR\n')


def test_the_small_file_reads():
    topo = parse_ibnetdiscover(_GOOD, "t.out")
    assert len(topo.links) == 1 and topo.nodes[2].lid == 2


@pytest.mark.parametrize("bad,line,says", [
    (_GOOD.replace("lid 2 4xNDR", "lid 2 4xNDX", 1), 2, "speed 'NDX'"),
    (_GOOD.replace("lid 2 4xNDR", "lid 2 3xNDR", 1), 2, "width 3x"),
    (_GOOD.replace("[1]\t", "[7]\t", 1), 2, "port 7: switch"),
    (_GOOD.replace('lid 1 4xNDR', 'lid 1 4xHDR'), 5, "width and speed 4xHDR"),
    (_GOOD.replace('"S-0000000000000001"[1]\t', '"S-0000000000000001"[3]\t'), 5,
     "but line 2 joins port 1 of 0x0000000000000001 to it"),
    (_GOOD + 'Ca\t1 "H-0000000000000002"\t\t# "again"\n', 6, "declared again"),
    (_GOOD + "what is this\n", 6, "not a node"),
    (_GOOD.replace('Switch\t4 "S-', 'Switch\t4 "H-'), 1, "a Switch is S-"),
])
def test_bad_lines_are_named_by_file_line_and_field(bad, line, says):
    with pytest.raises(IbnetdiscoverError) as e:
        parse_ibnetdiscover(bad, "t.out")
    assert str(e.value).startswith(f"t.out:{line}: ")
    assert says in str(e.value)


def test_a_file_of_something_else_is_not_ibnetdiscover(tmp_path):
    (tmp_path / "x.txt").write_text("hello\n")
    assert not is_ibnetdiscover(tmp_path / "x.txt")
    (tmp_path / "t.out").write_text(_GOOD)
    assert is_ibnetdiscover(tmp_path / "t.out")
    with pytest.raises(IbnetdiscoverError, match="neither"):
        parse_ibnetdiscover("hello\n", "x.txt")


# ---------------------------------------------------------------- the command
def test_the_command_on_a_real_file(capsys):
    assert main(["fabric", str(real_file(DGX)), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["switches"] == {"leaf": 31, "spine": 9}
    assert main(["fabric", str(real_file(EXPORTER_P))]) == 0
    assert "4 4xEDR" in capsys.readouterr().out


def test_the_command_on_built_fabrics_and_files(capsys, tmp_path):
    assert main(["fabric", "fattree", "-p", "k=4", "-p", "gpus_per_node=2"]) == 0
    out = capsys.readouterr().out
    assert "8 leaves, 8 spines, 4 cores" in out and "nothing" in out
    assert main(["fabric", "rail", "-p", "nodes=4", "-p", "gpus_per_node=8"]) == 0
    assert "8 rails" in capsys.readouterr().out
    assert main(["fabric", "docs/examples/two_switches.toml"]) == 0
    assert "2 switches" in capsys.readouterr().out


@pytest.mark.parametrize("argv,says", [
    (["fabric", "nosuchkind"], "no such file, and not a built-in fabric"),
    (["fabric", "fattree", "-p", "nosuchkey=1"], "nosuchkey"),
    (["fabric", "fattree", "-p", "k=4", "-p", "k=6"], "-p k: given twice"),
])
def test_the_command_refuses_in_one_line(argv, says, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_the_command_names_the_bad_line(tmp_path, capsys):
    bad = tmp_path / "fabric.out"
    bad.write_text(_GOOD.replace("lid 2 4xNDR", "lid 2 4xNDX", 1))
    assert main(["fabric", str(bad)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"lossless: {bad}:2: speed 'NDX': one of {', '.join(LANE_DATA_BPS)}"
    other = tmp_path / "notes.txt"
    other.write_text("hello\n")
    assert main(["fabric", str(other)]) == 2
    assert "neither ibnetdiscover's output, NCCL's topology or graph XML nor a fabric file" in \
        capsys.readouterr().err


# ---------------------------------------------------------------- OpenSM's tables, routes
LFTS = "ib/generated/osm_updn/opensm-lfts.dump.gz"


def test_opensms_tables_fit_the_fabric_they_were_made_on():
    """OpenSM (up/down, the spines as roots) on ibsim serving the real file: a table per
    switch, at its LID, every output port one with a cable."""
    topo, lfts = read_ibnetdiscover(real_file(DGX)), read_lfts(real_file(LFTS))
    switches = {g for g, n in topo.nodes.items() if n.kind == "switch"}
    assert set(lfts.tables) == switches
    assert all(lfts.switch_lid[g] == topo.nodes[g].lid for g in switches)
    cabled = {(ln.a, ln.a_port) for ln in topo.links} | {(ln.b, ln.b_port)
                                                          for ln in topo.links}
    entries = [(g, p) for g, t in lfts.tables.items() for p in t.values()]
    assert len(entries) == 24526
    assert all(p == 0 or (g, p) in cabled for g, p in entries)
    assert all(p == 0 for g, t in lfts.tables.items() for lid, p in t.items()
               if lid == lfts.switch_lid[g])


def test_a_route_by_opensms_tables_is_the_one_ibtracert_printed():
    topo, lfts = read_ibnetdiscover(real_file(DGX)), read_lfts(real_file(LFTS))
    traced = real_file("ib/generated/sim_ibtracert.txt").read_text().splitlines()
    got = route_text(topo, route(topo, "647", "a06-p1-dgx-02-c01 HCA-6", lfts), "647",
                     "a06-p1-dgx-02-c01 HCA-6").splitlines()
    # ibsim numbers a CA's port GUID its node GUID + 1; the real fabric, as ibnetdiscover
    # printed it, the same
    assert got[:-2] == traced[:-2] and got[-1] == traced[-1]
    assert got[-2] == traced[-2].replace("0xe09d730300857d79", "0xe09d730300857d78")


def test_routes_by_the_tables_and_by_least_hops_are_as_long():
    """Up/down on a two-tier fat tree takes least-hop paths: 2 links inside a leaf, 4
    through a spine, whichever CAs."""
    topo, lfts = read_ibnetdiscover(real_file(DGX)), read_lfts(real_file(LFTS))
    cas = sorted(g for g, n in topo.nodes.items()
                 if n.kind == "ca" and "Aggregation" not in n.desc)
    for a, b in zip(cas[::7], cas[3::7], strict=False):
        by_sm = route(topo, f"{a:#018x}", f"{b:#018x}", lfts)
        least = route(topo, f"{a:#018x}", f"{b:#018x}")
        assert len(by_sm) == len(least) in (2, 4)
        assert by_sm[-1].peer == least[-1].peer == b


def test_ibroutes_listing_reads_as_a_table():
    lfts = read_lfts(real_file("ib/generated/sim_ibroute_28.txt"))
    (guid,) = lfts.tables
    assert guid == 0x2C5EAB0300C25F00 and lfts.switch_lid[guid] == 28
    table = lfts.tables[guid]
    assert len(table) == 622 and table[0x1] == 61 and table[0x1C] == 0


@pytest.mark.parametrize("text,line,says", [
    ("0x0001 001 # x\n", 1, "an entry before any switch's header"),
    ("Unicast lids [0-2] of switch Lid 1 guid 0x0000000000000001 ('s'):\nhello\n", 2,
     "not a forwarding-table line"),
    ("Unicast lids [0-2] of switch Lid 1 guid 0x0000000000000001 ('s'):\n0x0002 001 # a\n"
     "0x0002 003 # b\n", 3, "LID 2: listed twice"),
    ("", 1, "no switch's table"),
])
def test_bad_tables_are_named_by_file_and_line(tmp_path, text, line, says):
    f = tmp_path / "lfts.dump"
    f.write_text(text)
    with pytest.raises(LftError) as e:
        read_lfts(f)
    assert str(e.value).startswith(f"{f}:{line}: ") and says in str(e.value)


def test_a_route_the_tables_cannot_follow_says_why():
    topo = parse_ibnetdiscover(_GOOD, "t.out")
    lfts = Lfts("lfts.dump", {1: {}}, {1: 1})
    with pytest.raises(LftError, match="has no route to LID 2"):
        route(topo, "sw", "h mlx5_0", lfts)
    assert [h.port for h in route(topo, "sw", "h mlx5_0")] == [1]
    with pytest.raises(LftError, match="no node has this"):
        route(topo, "sw", "nobody")


def test_the_command_routes(capsys):
    assert main(["fabric", str(real_file(DGX)), "--lft", str(real_file(LFTS)), "--route",
                 "647", "522"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[2].startswith("[45] -> switch port {0x2c5eab0300c25f00}[31] lid 28-28")
    assert main(["fabric", "docs/examples/small_rail.topo", "--route", "dgx-01 mlx5_0",
                 "dgx-08 mlx5_3", "--json"]) == 0
    hops = json.loads(capsys.readouterr().out)["hops"]
    assert [h["port"] for h in hops] == [1, 33, 7, 8]
    assert main(["fabric", "fattree", "--route", "1", "2"]) == 2
    assert "SOURCE must be an ibnetdiscover file" in capsys.readouterr().err


# ---------------------------------------------------------------- simulating the fabric
def test_an_ibnetdiscover_file_is_a_fabric_to_simulate():
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import build_fabric, is_fabric_file
    from sim.scenarios.common import collective_params

    path = "docs/examples/small_rail.topo"
    assert is_fabric_file(path) and not is_fabric_file("docs/examples/nosuch.topo")
    rf = build_fabric(path, resolve_params(collective_params(), {}))
    assert (len(rf.ranks), rf.gpus_per_node, rf.nodes) == (32, 4, 8)
    fab = rf.fabric
    topo = read_ibnetdiscover(path)
    # switches from 0 in OpenSM's order (8), then every CA in GUID order: the 8 SHARP
    # aggregation nodes (idle) and the 32 NICs
    assert len(fab.nodes) == 48
    rates = Counter(p.rate_bps for n in fab.nodes.values() for p in n.ports.values())
    # the HDR cable at 200 Gb/s at both ends, every other port at 400
    assert rates[200_000_000_000] == 2
    assert rf.settings["link_gbps"] == 400.0
    # rank order: node by node, NICs in rail order; dgx-05's swapped NICs keep their rails
    cas = sorted(g for g, n in topo.nodes.items() if n.kind == "ca")
    host_id = {g: 8 + i for i, g in enumerate(cas)}
    assert list(rf.ranks[:4]) == [host_id[0xE09D730300BB0000 + r] for r in range(4)]
    assert not set(rf.ranks) & {host_id[g] for g in cas if "Aggregation" in
                                topo.nodes[g].desc}


def test_the_fabric_routes_by_opensms_tables():
    from sim.fabric.paths import path_links
    from sim.fabric.survey import graph_of_ibnetdiscover, node_nics
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import build_fabric
    from sim.scenarios.common import collective_params
    from sim.scenarios.description import _osm_key

    dgx, lft = str(real_file(DGX)), str(real_file(LFTS))
    rf = build_fabric(dgx, resolve_params(collective_params(), {}) | {
        "file_overrides": {"topology.lft": lft}})
    assert rf.gpus_per_node == 4 and len(rf.ranks) == 480
    topo, lfts = read_ibnetdiscover(dgx), read_lfts(lft)
    # switches from 0 in OpenSM's order, then every CA in GUID order; the ranks the NICs
    # of the nodes of 4
    switches = sorted((g for g, n in topo.nodes.items() if n.kind == "switch"),
                      key=_osm_key)
    cas = sorted(g for g, n in topo.nodes.items() if n.kind == "ca")
    host_of = {g: len(switches) + i for i, g in enumerate(cas)}
    nodes, g4 = node_nics(graph_of_ibnetdiscover(topo))
    built = sorted(n for nics in nodes.values() if len(nics) == g4 for n in nics)
    fab = rf.fabric
    assert sorted(rf.ranks) == sorted(host_of[g] for g in built)
    # every route is OpenSM's port for the host's LID; a LID its table leaves out (no path:
    # up/down through a spine that lacks a leaf's links) has none
    missing = 0
    for i, s_ in enumerate(switches):
        table = lfts.tables[s_]
        assert fab.nodes[i].routes == {h: table[topo.nodes[g].lid]
                                       for g, h in host_of.items() if topo.nodes[g].lid in table}
        missing += sum(1 for g in host_of if topo.nodes[g].lid not in table)
    assert 0 < missing < len(switches) * len(host_of) // 20
    by_lid = {topo.nodes[g].lid: h for g, h in host_of.items()}
    # the path ibtracert printed: out of the leaf's port 45, the spine's 15, the leaf's 1
    assert [p for _, p in path_links(fab, by_lid[647], by_lid[522], 0x100)] == [0, 45, 15, 1]


def test_a_collective_on_an_ibnetdiscover_fabric(tmp_path, capsys):
    assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--fabric",
                 "docs/examples/small_rail.topo", "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert "32 ranks (8 nodes x 4 GPUs), fabric docs/examples/small_rail.topo" in out
    assert "credits on VLs" in out  # an InfiniBand fabric
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["nranks"] == 32 and res["results"][0]["busbw_GB_per_s"] > 0


@pytest.mark.parametrize("topology,says", [
    ({"kind": "ibnetdiscover"}, "needs file"),
    ({"kind": "ibnetdiscover", "file": "nosuch.topo"}, "nosuch.topo"),
    ({"kind": "ibnetdiscover", "file": "small_rail.topo", "lft": "small_rail.topo"},
     "not a forwarding-table line"),
    ({"kind": "ibnetdiscover", "file": "small_rail.topo", "links": [[0, 1, 1, 0]]},
     "do(es) not apply"),
])
def test_a_fabric_files_ibnetdiscover_topology_refused_with_reason(topology, says):
    from sim.scenarios.base import ScenarioError
    from sim.scenarios.description import build

    with pytest.raises(ScenarioError, match=re.escape(says)):
        build({"topology": topology, "links": {"fabric": "ib"}}, "f.toml", "docs/examples",
              need_traffic=False)


def _least_hop_tables(topo: IbTopology) -> Lfts:
    """Tables that send every CA's LID along route()'s least-hop path."""
    lfts = Lfts("least.dump")
    for s, n in topo.nodes.items():
        if n.kind != "switch":
            continue
        lfts.switch_lid[s] = n.lid
        lfts.tables[s] = {n.lid: 0}
        for c, m in topo.nodes.items():
            if m.kind == "ca" and m.lid is not None:
                lfts.tables[s][m.lid] = route(topo, f"{s:#018x}", f"{c:#018x}")[0].port
    return lfts


def test_tables_against_least_hops():
    from sim.fabric.opensm import compare_routes, compare_text

    topo = read_ibnetdiscover("docs/examples/small_rail.topo")
    lfts = _least_hop_tables(topo)
    rep = compare_routes(topo, lfts)
    cas = [g for g, n in topo.nodes.items() if n.kind == "ca" and "Aggreg" not in n.desc]
    assert (rep["routes"], rep["no_route"], rep["longer_than_least_hops"]) == (8 * 32, 0, 0)
    assert rep["leaf_pairs"] == 4 * 3 and len(cas) == 32
    # one destination sent the long way: leaf r1 -> spine 1 -> leaf r3 -> spine 2 -> leaf r2
    # (hops are links, the last into the CA)
    name = {n.desc.split(";")[-1].split(":")[0]: g for g, n in topo.nodes.items()
            if n.kind == "switch"}
    dst = next(g for g, n in topo.nodes.items() if n.desc == "dgx-02 mlx5_1")
    lid = topo.nodes[dst].lid
    ports = {(ln.a, ln.b): ln.a_port for ln in topo.links} | {
        (ln.b, ln.a): ln.b_port for ln in topo.links}
    for a, b in (("ib-leaf-r1", "ib-spine-1"), ("ib-spine-1", "ib-leaf-r3"),
                 ("ib-leaf-r3", "ib-spine-2"), ("ib-spine-2", "ib-leaf-r2")):
        lfts.tables[name[a]][lid] = ports[(name[a], name[b])]
    rep = compare_routes(topo, lfts)
    assert rep["longer_than_least_hops"] >= 2  # leaf r1 and spine 1 now go the long way
    assert any(x.startswith("MF0;ib-leaf-r1:MQM9700/U1 to dgx-02 mlx5_1: 5 hops, least 3")
               for x in rep["longer_examples"])
    assert "longer than least hops" in compare_text(rep)


def test_opensms_up_down_tables_take_least_hop_paths():
    from sim.fabric.opensm import compare_routes

    topo, lfts = read_ibnetdiscover(real_file(DGX)), read_lfts(real_file(LFTS))
    rep = compare_routes(topo, lfts)
    assert rep["longer_than_least_hops"] == 0
    # the routes missing are exactly a spine's to the NICs of a leaf it has no cable to
    # (up/down does not go down, up and down again): counted here from the file alone
    peers: dict[int, set[int]] = {}
    for ln in topo.links:
        peers.setdefault(ln.a, set()).add(ln.b)
        peers.setdefault(ln.b, set()).add(ln.a)
    nics = [g for g, n in topo.nodes.items() if n.kind == "ca" and "Aggregation" not in n.desc]
    spines = [g for g, n in topo.nodes.items() if "SPINE" in n.desc]
    cut_off = sum(1 for c in nics for sp in spines if next(iter(peers[c])) not in peers[sp])
    assert (rep["routes"], rep["no_route"]) == (40 * len(nics) - cut_off, cut_off)
    assert cut_off == 170
    assert rep["leaf_pairs"] == 31 * 30
    assert rep["switches_used_per_leaf_pair"]["max"] == 9


def test_the_report_with_the_tables(capsys):
    assert main(["fabric", str(real_file(DGX)), "--lft", str(real_file(LFTS)), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["routes"]["tables"] == 40 and rep["switches"] == {"leaf": 31, "spine": 9}
    # OpenSM's tables are up/down's (its spines the roots): ours are every one of them; our
    # min-hop routes the (switch, CA) pairs up/down leaves without a route, and some others
    # through another port
    topo, lfts = read_ibnetdiscover(real_file(DGX)), read_lfts(real_file(LFTS))
    lids = [n.lid for n in topo.nodes.values() if n.kind == "ca"]
    routed = sum(1 for t in lfts.tables.values() for lid in lids if lid in t)
    unrouted = len(lfts.tables) * len(lids) - routed
    ours = rep["routes"]["ours"]
    assert ours["up/down"] == {"equal": routed, "different": 0, "only_ours": 0,
                               "only_theirs": 0}
    mh = ours["min-hop"]
    assert (mh["only_ours"], mh["only_theirs"]) == (unrouted, 0) and unrouted > 0
    assert mh["equal"] + mh["different"] == routed and mh["different"] > 0


# ---------------------------------------------------------------- a node: NCCL's topology XML
def test_nccl_topology_of_a_gcp_a3_node():
    from sim.fabric.nccl_xml import read_nccl_topo

    topo = read_nccl_topo(real_file("nccl/xla_mock_topo_gcp_a3_h100.xml"))
    assert [g.attrs["dev"] for g in topo.gpus] == [str(i) for i in range(8)]
    assert all(sum(g.nvlinks.values()) == 18 for g in topo.gpus)  # H100: 18 NVLinks
    assert all((g.pcie_gen, g.pcie_lanes) == (4, 16) for g in topo.gpus)
    # two GPUs under each PCIe switch with one 200G NIC: GPU i's is eth(i // 2 + 1), PIX
    for i, g in enumerate(topo.gpus):
        kind, near = topo.nearest_nics(g)
        assert (kind, [n.name for n in near]) == ("PIX", [f"eth{i // 2 + 1}"])
    assert {n.name: n.speed_gbps for n in topo.nics}["eth1"] == 200.0
    assert topo.numa_nodes == 2


def test_nccl_topology_of_a_dgx_a100():
    from sim.fabric.nccl_xml import read_nccl_topo

    topo = read_nccl_topo(real_file("nccl/xla_mock_topo_dgx_a100.xml"))
    g0 = topo.gpus[0]
    assert (g0.numa, sum(g0.nvlinks.values())) == (3, 12)  # A100: 12 NVLinks
    # GPU 0 and mlx5_0, mlx5_1 meet two PCIe switch levels up: PXB (as NCCL prints it)
    kind, near = topo.nearest_nics(g0)
    assert (kind, [n.name for n in near]) == ("PXB", ["mlx5_0", "mlx5_1"])
    assert all(n.attrs.get("gdr") == "1" for n in topo.nics)


def test_partial_topologies_by_pci_class():
    """Cloud images ship files NCCL completes at run time: GPUs (class 0x0302) and NICs
    (0x0207) by their PCI class only."""
    from sim.fabric.nccl_xml import read_nccl_topo

    v5 = read_nccl_topo(real_file("nccl/azure_ndv5-topo.xml"))
    assert len(v5.gpus) == len(v5.nics) == 8
    assert all((g.pcie_gen, g.pcie_lanes) == (5, 16) for g in v5.gpus)
    pairs = [(g.busid, [n.busid for n in v5.nearest_nics(g)[1]], v5.nearest_nics(g)[0])
             for g in v5.gpus]
    assert all(kind == "PIX" and len(ns) == 1 for _, ns, kind in pairs)
    assert len({ns[0] for _, ns, _ in pairs}) == 8  # a NIC per GPU
    v4 = read_nccl_topo(real_file("nccl/azure_ndv4-topo.xml"))
    assert all(len(v4.nearest_nics(g)[1]) == 2 for g in v4.gpus)  # two HCAs per GPU pair
    v2 = read_nccl_topo(real_file("nccl/azure_ndv2-topo.xml"))
    assert sorted({v2.nearest_nics(g)[0] for g in v2.gpus}) == ["PHB", "SYS"]


def test_the_command_on_nccl_files(capsys, tmp_path):
    assert main(["fabric", str(real_file("nccl/xla_mock_topo_gcp_a3_h100.xml"))]) == 0
    out = capsys.readouterr().out
    assert "8 GPUs, 8 NICs, 2 NUMA nodes" in out
    assert "GPU 0 (0000:04:00.0, NUMA 0, PCIe Gen4 x16, 18 NVLinks): nearest NIC eth1 (PIX)" \
        in out
    assert main(["fabric", str(real_file("nccl/xla_mock_topo_dgx_a100.xml")), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["gpus"][0]["nearest_nics"] == ["mlx5_0", "mlx5_1"]
    assert main(["fabric", str(real_file("nccl/azure_ncv4-graph.xml"))]) == 0
    assert "graph 0 (ring)" in capsys.readouterr().out  # tests/test_nccl_graph.py
    bad = tmp_path / "topo.xml"
    bad.write_text('<system version="1">\n  <cpu numaid="0">\n    <pci busid="0000:01:00.0" '
                   'class="0x030200" link_speed="3.0 GT/s PCIe" link_width="16"/>\n'
                   '  </cpu>\n</system>\n')
    assert main(["fabric", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.strip() == (f"lossless: {bad}: <pci busid='0000:01:00.0'>: link_speed "
                           f"'3.0 GT/s PCIe': not a PCIe rate (2.5 to 64.0 GT/s)")
    bad.write_text('<system version="1">\n  <cpu numaid="0">\n    <pci busid="0000:01:00.0" '
                   'class="0x030200" link_speed="16.0 GT/s PCIe" link_width="16">\n'
                   '      <gpu dev="0" sm="90"><nvlink target="x" count="18x"/></gpu>\n'
                   '    </pci>\n  </cpu>\n</system>\n')
    assert main(["fabric", str(bad)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"lossless: {bad}: <pci busid='0000:01:00.0'> <nvlink>: count='18x': not a number")
    bad.write_text('<system version="1">\n  <cpu numaid="0">\n')
    assert main(["fabric", str(bad)]) == 2
    assert f"{bad}:3: not XML" in capsys.readouterr().err


@pytest.mark.parametrize("gbps,label", [(400, "4xNDR"), (200, "4xHDR"), (100, "4xEDR"),
                                        (800, "4xXDR"), (25, "1xEDR")])
def test_a_built_fabric_as_ibnetdiscover_writes_it(gbps, label):
    """topology_of_fabric: links at the 4-lane speed of their rate where there is one, a
    switch's port p as IB port p + 1, LIDs node + 1; what it writes reads back."""
    from sim.fabric.fattree import fat_tree
    from sim.fabric.ibnetdiscover import osm_guid, topology_of_fabric

    fab = fat_tree(4, link_gbps=gbps).fabric
    topo = topology_of_fabric(fab, "k4")
    assert {ln.label for ln in topo.links} == {label}
    assert all(ln.rate_bps == gbps * 10**9 for ln in topo.links)
    back = parse_ibnetdiscover(format_ibnetdiscover(topo), "k4.topo")
    assert _shape(back) == _shape(topo) and len(back.links) == 48
    assert {n.lid for n in back.nodes.values()} == set(range(1, len(fab.nodes) + 1))
    assert back.nodes[osm_guid(0)].kind == "switch" and back.nodes[osm_guid(0)].nports == 4


def test_up_down_on_the_real_fabric_is_opensms():
    """[topology] routing = "updn" on the real DGX H100 fabric (roots found: the 9 spines,
    SHARP aggregation nodes not counted as hosts) gives every switch the table OpenSM's
    up/down engine made for it with those roots (under ibsim): 23,018 entries equal, and
    the same LIDs left without a route."""
    from sim.scenarios.description import build

    dgx = real_file(DGX)
    sc = build({"topology": {"kind": "ibnetdiscover", "file": str(dgx), "routing": "updn"},
                "links": {"fabric": "ib"}}, "f.toml", "/", need_traffic=False)
    fab, ib, lfts = sc.fabric, read_ibnetdiscover(dgx), read_lfts(real_file(LFTS))
    assert {ib.nodes[fab.node_guid[s]].desc.split(";")[1][:14] for s in fab.updn_roots} == {
        "A10-P1-IBSPINE", "B10-P1-IBSPINE"} and len(fab.updn_roots) == 9
    cas = sorted(g for g, n in ib.nodes.items() if n.kind == "ca")
    nsw, equal, missing = len(fab.node_guid), 0, 0
    for s_, guid in fab.node_guid.items():
        table = lfts.tables[guid]
        for j, c in enumerate(cas):
            mine, theirs = fab.nodes[s_].routes.get(nsw + j), table.get(ib.nodes[c].lid)
            assert mine == theirs
            equal += mine is not None
            missing += mine is None
    assert (equal, missing) == (23018, 262)


def test_routing_and_tables_contradict():
    from sim.scenarios.base import ScenarioError
    from sim.scenarios.description import build

    with pytest.raises(ScenarioError, match="contradicts lft"):
        build({"topology": {"kind": "ibnetdiscover", "file": "small_rail.topo",
                            "lft": "small_rail.topo", "routing": "updn"},
               "links": {"fabric": "ib"}}, "f.toml", "docs/examples", need_traffic=False)


def test_a_node_from_nccls_topology_is_the_preset_of_its_user_guide():
    """The DGX A100's NCCL topology gives the node the a100-cx6 preset states from NVIDIA's
    user guide: sm 80, 12 NVLinks, 8 GPUs, 8 NICs of 200 Gb/s, PCIe Gen4 x16 (24 GB/s as
    NCCL rates it), AMD CPUs, NVLink 2,400 Gb/s a direction."""
    import dataclasses

    from sim.workloads.tuner import PRESETS, node_hardware

    node = node_hardware(str(real_file("nccl/xla_mock_topo_dgx_a100.xml")))
    same = ("sm", "nvlink_links", "gpus_per_node", "nics_per_node", "nic_gbps", "pcie_GBps",
            "cpu", "nvlink_gbps", "pcie_gen")
    want = dataclasses.asdict(PRESETS["a100-cx6"])
    assert {k: getattr(node, k) for k in same} == {k: want[k] for k in same}
    a3 = node_hardware(str(real_file("nccl/xla_mock_topo_gcp_a3_h100.xml")))
    assert (a3.sm, a3.gpus_per_node, a3.nics_per_node, a3.nic_gbps) == (90, 8, 4, 200.0)
    # four NICs for eight GPUs: a NIC a GPU at half the rate (each GPU its share)
    assert a3.fabric_defaults()["link_gbps"] == 100.0
    with pytest.raises(ValueError, match="a partial file"):
        node_hardware(str(real_file("nccl/azure_ndv5-topo.xml")))


def test_the_collective_takes_the_node_from_ncclS_topology(monkeypatch, capsys):
    a100 = str(real_file("nccl/xla_mock_topo_dgx_a100.xml"))
    args = ["collective", "allreduce", "-b", "1M", "-e", "1M", "-p", "nodes=2"]
    assert main([*args, "-p", "hw=a100-cx6"]) == 0
    preset = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  ")]
    monkeypatch.setenv("NCCL_TOPO_FILE", a100)  # as the job's environment has it
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"NCCL host side {a100}" in out
    assert [ln for ln in out.splitlines() if ln.startswith("  ")] == preset
    monkeypatch.delenv("NCCL_TOPO_FILE")
    assert main([*args, "-p", f"hw={real_file('nccl/azure_ndv5-topo.xml')}"]) == 2
    err = capsys.readouterr().err
    assert "a partial file" in err and len(err.strip().splitlines()) == 1


@st.composite
def _named_topologies(draw):
    """_topologies with some CAs named as a DGX's NICs (hosts h0-h3, mlx5_0-3)."""
    topo = draw(_topologies())
    for g, n in list(topo.nodes.items()):
        if n.kind == "ca" and draw(st.booleans()):
            topo.nodes[g] = IbNode("ca", g, n.nports, f"h{draw(st.integers(0, 3))} "
                                   f"mlx5_{draw(st.integers(0, 3))}", n.lid, 0)
    return topo


@settings(max_examples=200, deadline=None)
@given(_named_topologies())
def test_the_report_of_any_fabric(topo):
    """Whatever the fabric (switches without links, CAs on CAs' ports, hosts named twice):
    a report, every link counted once, every NIC but SHARP nodes counted."""
    rep = survey(graph_of_ibnetdiscover(topo))
    assert sum(rep["links"].values()) == len(topo.links)
    assert rep["nics"] == sum(1 for n in topo.nodes.values() if n.kind == "ca")
    assert survey_text(rep).startswith("fabric <generated>")


def test_a_broken_gzip_is_named_not_a_traceback(tmp_path, capsys):
    import gzip

    whole = gzip.compress(_GOOD.encode())
    cut = tmp_path / "fabric.topo.gz"
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(IbnetdiscoverError, match=r"fabric.topo.gz:1: gzip that does not"):
        read_ibnetdiscover(cut)
    with pytest.raises(LftError, match=r"fabric.topo.gz:1: gzip that does not"):
        read_lfts(cut)
    ok = tmp_path / "ok.topo.gz"
    ok.write_bytes(whole)
    assert _shape(read_ibnetdiscover(ok)) == _shape(parse_ibnetdiscover(_GOOD))
    good = tmp_path / "good.topo"
    good.write_text(_GOOD)
    assert main(["fabric", str(good), "--lft", str(cut)]) == 2
    err = capsys.readouterr().err
    assert "gzip that does not decompress" in err and len(err.strip().splitlines()) == 1

"""NCCL collectives as the traffic of fabric files (``[[collective]]``) and in sweeps:
a ``[[collective]]`` entry runs through ``lossless replay`` with the figures of
``lossless collective`` (``sim.scenarios.collective.run_size``), several entries share hosts,
background ``[[flows]]`` slow it down, bad keys are one-line errors, ``-p collective.KEY``
sets every entry and a sweep over it writes one row per value with the flattened figures."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.scenarios import ScenarioError, loader
from sim.scenarios.description import COLLECTIVE
from sim.scenarios.description import build as build_description
from sim.study.results import run_scenario
from sim.study.sweep import flatten_summary, sweep
from tests.helpers import run_cli

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"

#: A rail fabric of 2 nodes x 2 GPUs (switches 0..2, hosts 3..6 = ranks 0..3), with the switch and
#: link settings of ``lossless collective --fabric rail`` (sim.scenarios.collective).
FABRIC = """\
[run]
duration_ms = {duration_ms}
[topology]
kind = "rail"
nodes = 2
gpus_per_node = 2
spines = 1
ecmp = true
[links]
link_gbps = 400.0
cable_m = 100
[switch]
buffer_kb = 32000.0
xoff_kb = 256.0
mtu_bytes = 4154
[hosts]
cc = "none"
[capture]
enabled = false
"""
RANKS = [3, 4, 5, 6]


def _file(tmp_path: Path, body: str, duration_ms: float = 0.2, name: str = "coll.toml") -> Path:
    f = tmp_path / name
    f.write_text(FABRIC.format(duration_ms=duration_ms) + body)
    return f


def _entry(**kw) -> str:
    lines = "".join(f"{k} = {json.dumps(v)}\n" for k, v in kw.items())
    return f"[[collective]]\n{lines}"


def _replay(f: Path, out: Path, *extra: str, rc: int = 0) -> dict:
    status, _, err = run_cli(["replay", str(f), "--out", str(out), "--no-plots", *extra])
    assert status == rc, err
    return json.loads((out / "summary.json").read_text())


def _run_size(collective: str, nbytes: int, iters: int, nvlink: bool = True,
              pxn: bool = True, **kw) -> dict:
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    # the fabric file's hosts have no PCIe model ([hosts] pcie_gen 0); its [[collective]]
    # entries run what they name (ring and simple by default) on the network alone
    p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 2, "spines": 1,
                                             "pcie_gen": 0, "nvlink": nvlink, "pxn": pxn,
                                             "nccl_host": False})
    kw.setdefault("algorithm", "ring")
    kw.setdefault("protocol", "simple")
    return run_size(collective, nbytes, "rail", p, iters=iters, inplace=False, **kw)


# --------------------------------------------------------------------------- one entry
@pytest.mark.parametrize(("collective", "size", "qps", "node"), [
    ("allreduce", "1M", 1, {}), ("allgather", "512K", 2, {}), ("alltoall", "256K", 1, {}),
    ("allreduce", "1M", 1, {"nvlink": False}), ("allreduce", "512K", 1, {"pxn": False}),
])
def test_replay_figures_equal_run_size(tmp_path, collective, size, qps, node) -> None:
    """Same fabric, same call: the figures of lossless collective (its NVLink inside the
    nodes of 2 GPUs and PXN between them, or every hop over the network)."""
    f = _file(tmp_path, _entry(collective=collective, size=size, qps=qps, iters=2, **node))
    s = _replay(f, tmp_path / "o")
    [c] = s["collectives"]
    from sim.workloads.nccl_tests import parse_size

    want = _run_size(collective, parse_size(size), 2, qps=qps, **node)
    assert c["complete"] and c["iterations_done"] == 2 and c["wrong"] == 0
    assert c["hosts"] == RANKS and c["ranks"] == 4
    assert (c["size_bytes"], c["count"]) == (want["size_bytes"], want["count"])
    assert c["busbw_GB_per_s"] == pytest.approx(want["busbw_GB_per_s"], rel=0.01)
    assert c["algbw_GB_per_s"] == pytest.approx(want["algbw_GB_per_s"], rel=0.01)
    assert c["time_us"] == pytest.approx(sum(c["iteration_times_ps"]) / 2e6, rel=1e-6)
    # the QPs are flows of the summary (flow id = QP number), every byte delivered
    qp_flows = [x for x in s["flows"] if c["qp_first"] <= x["id"] <= c["qp_last"]]
    assert qp_flows and all(x["in_flight_bytes"] == 0 for x in qp_flows)
    assert s["params"]["collective"][0]["qps"] == qps


def test_numeric_size_is_the_same_as_its_text(tmp_path) -> None:
    a = loader.build(str(_file(tmp_path, _entry(size=262144), name="a.toml")))
    b = loader.build(str(_file(tmp_path, _entry(size="256K"), name="b.toml")))
    ca, cb = a.info["collectives"][0], b.info["collectives"][0]
    assert ca.counts == cb.counts and ca.counts.size_bytes == 262144


def test_the_run_lasts_duration_ms_and_reports_unfinished_iterations(tmp_path) -> None:
    """duration_ms bounds the run: iterations not done by then are not reported done, and
    the command says so (one warning line naming the entry and how far it got, exit 1)."""
    f = _file(tmp_path, _entry(size="1M", iters=50), duration_ms=0.2)
    out = tmp_path / "o"
    rc, _, err = run_cli(["replay", str(f), "--out", str(out), "--no-plots"])
    s = json.loads((out / "summary.json").read_text())
    [c] = s["collectives"]
    assert s["duration_ps"] == 200_000_000
    assert not c["complete"] and 0 < c["iterations_done"] < 50
    assert c["transfers_received"] < c["transfers"]
    assert all(t > 0 for t in c["iteration_times_ps"])
    assert rc == 1, err
    warn = [line for line in err.splitlines() if "did not complete" in line]
    assert warn == [
        f"lossless: warning: [[collective]] #1 allreduce 1M on 4 ranks did not complete in "
        f"the 200 us run: {c['iterations_done']} of 50 iteration(s) done, "
        f"{c['transfers_received']} of {c['transfers']} transfers of iteration "
        f"{c['iterations_done'] + 1} received; lengthen the run (-p duration_ms=...) or look "
        f"for drops and pauses"], err
    assert "busbw" not in err  # nothing to report for an entry that did not finish


def test_summary_line_gives_each_complete_collective_time_and_busbw(tmp_path) -> None:
    f = _file(tmp_path, _entry(size="1M", iters=2) + _entry(size="256K", iters=1,
                                                             start_us=150.0))
    out = tmp_path / "o"
    rc, _, err = run_cli(["replay", str(f), "--out", str(out), "--no-plots"])
    assert rc == 0, err
    c1, c2 = json.loads((out / "summary.json").read_text())["collectives"]
    [line] = [x for x in err.splitlines() if "results in" in x]
    assert (f"[[collective]] #1 allreduce 1M on 4 ranks: {c1['time_us']:.2f} us (mean of 2 "
            f"iterations), busbw {c1['busbw_GB_per_s']:.2f} GB/s; [[collective]] #2 allreduce "
            f"256K on 4 ranks: {c2['time_us']:.2f} us, busbw {c2['busbw_GB_per_s']:.2f} GB/s; "
            f"results in") in line, line


def test_start_us_delays_the_first_iteration(tmp_path) -> None:
    s0 = _replay(_file(tmp_path, _entry(size="256K"), name="a.toml"), tmp_path / "a")
    s1 = _replay(_file(tmp_path, _entry(size="256K", start_us=30.0), name="b.toml"),
                 tmp_path / "b")
    c0, c1 = s0["collectives"][0], s1["collectives"][0]
    assert c1["start_ps"] == 30_000_000 and c1["complete"]
    assert c1["iteration_times_ps"] == c0["iteration_times_ps"]  # same fabric, same call
    f0 = {x["id"]: x for x in s0["flows"]}
    f1 = {x["id"]: x for x in s1["flows"]}
    assert all(f1[k]["delivered_bytes"] == f0[k]["delivered_bytes"] for k in f0)


# --------------------------------------------------------------------------- several entries
def test_two_entries_on_shared_hosts_both_complete(tmp_path) -> None:
    body = (_entry(collective="allreduce", size="512K", iters=2)
            + _entry(collective="allgather", size="256K", hosts=[4, 5, 6], qps=2))
    s = _replay(_file(tmp_path, body, duration_ms=0.3), tmp_path / "o")
    a, b = s["collectives"]
    assert a["complete"] and b["complete"] and a["wrong"] == b["wrong"] == 0
    assert b["hosts"] == [4, 5, 6] and b["ranks"] == 3
    assert a["qp_last"] < b["qp_first"]  # disjoint QP numbers
    alone = _replay(_file(tmp_path, _entry(collective="allreduce", size="512K", iters=2),
                          name="alone.toml"), tmp_path / "alone")
    assert a["time_ps"] > alone["collectives"][0]["time_ps"]  # they share links


def test_background_flow_slows_the_collective(tmp_path) -> None:
    entry = _entry(size="1M")
    alone = _replay(_file(tmp_path, entry, name="a.toml"), tmp_path / "a")
    # two CBR flows at the link rate into rank 2's NIC (from ranks 0 and 1), whose downlink
    # carries the ring's data from rank 1 too
    cbr = "[[flows]]\nsrc = 3\ndst = 5\n[[flows]]\nsrc = 4\ndst = 5\n"
    both = _replay(_file(tmp_path, cbr + entry, name="b.toml"), tmp_path / "b")
    ca, cb = alone["collectives"][0], both["collectives"][0]
    assert cb["complete"]
    assert cb["qp_first"] >= 0x100 and 0 in {x["id"] for x in both["flows"]}
    assert cb["time_ps"] > 1.1 * ca["time_ps"]
    assert cb["busbw_GB_per_s"] < ca["busbw_GB_per_s"]


def test_qp_numbers_stay_clear_of_the_flow_ids(tmp_path) -> None:
    # 12 all-to-all flows ([traffic]) would collide with nothing below 0x100; push them past
    flows = "".join(f"[[flows]]\nsrc = 4\ndst = 5\nrate_gbps = 1.0\nstart_us = {i}.0\n"
                    for i in range(300))
    sc = loader.build(str(_file(tmp_path, flows + _entry(size="256K"))))
    c = sc.info["collectives"][0]
    assert c.qp_first == 300 and set(range(300)) <= set(sc.fabric.flows)


# --------------------------------------------------------------------------- overrides, sweeps
def test_p_collective_key_sets_every_entry(tmp_path) -> None:
    body = _entry(size="256K") + _entry(collective="allgather", size="256K")
    f = _file(tmp_path, body)
    sc = loader.build(str(f), {"collective.qps": 4, "collective.size": "512K"})
    e = sc.info["collectives"]
    assert [x.spec["qps"] for x in e] == [4, 4]
    assert [x.spec["size"] for x in e] == ["512K", "512K"]
    assert e[0].qp_last < e[1].qp_first


def test_sweep_over_collective_qps_writes_one_row_per_value(tmp_path) -> None:
    f = _file(tmp_path, _entry(size="256K", iters=2), duration_ms=0.1)
    rows = sweep(str(f), {"collective.qps": [1, 2, 4]}, out_dir=tmp_path / "sw", workers=0,
                 progress=False)
    assert [r["params"]["collective.qps"] for r in rows] == [1, 2, 4]
    assert all(r["status"] == "ok" for r in rows), rows
    assert [r["figures"]["collectives.0.qps"] for r in rows] == [1, 2, 4]
    assert all(r["figures"]["collectives.0.complete"] is True for r in rows)
    with open(tmp_path / "sw" / "runs.csv", newline="") as fh:
        table = list(csv.DictReader(fh))
    assert [t["collective.qps"] for t in table] == ["1", "2", "4"]
    assert all(float(t["collectives.0.busbw_GB_per_s"]) > 0 for t in table)
    out = run_cli(["sweep-plot", str(tmp_path / "sw"), "--x", "collective.qps", "--y",
                   "collectives.0.busbw_GB_per_s"])
    assert out[0] == 0, out[2]


def test_flatten_leaves_summaries_without_collectives_alone() -> None:
    s = {"duration_ps": 5, "flows": [], "totals": {"drops": 0}}
    assert flatten_summary(s) == {"duration_ps": 5, "totals.drops": 0, "flows": 0,
                                  "flows_delivered_bytes": 0}


def test_a_file_without_collectives_has_no_collective_keys(tmp_path) -> None:
    f = _file(tmp_path, "[[flows]]\nsrc = 4\ndst = 6\nsize_kb = 10.0\n", duration_ms=0.02)
    s = _replay(f, tmp_path / "o")
    assert "collectives" not in s and "collective" not in s["params"]


# --------------------------------------------------------------------------- library
def test_build_from_a_dict_runs_the_same(tmp_path) -> None:
    import tomllib

    text = FABRIC.format(duration_ms=0.2) + _entry(size="512K", iters=2)
    doc = tomllib.loads(text)
    sc = build_description(doc, "from_dict")
    s = run_scenario(sc, out_dir=tmp_path / "lib", plots=False, progress=False)
    f = tmp_path / "from_file.toml"
    f.write_text(text)
    s2 = _replay(f, tmp_path / "cli")
    assert s["collectives"] == s2["collectives"]
    with pytest.raises(ValueError, match="built Scenario"):
        run_scenario(build_description(doc, "x"), params={"seed": 1}, out_dir=tmp_path / "y")


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(("body", "argv", "must"), [
    (_entry(colective="allreduce"), [], ["[[collective]] #1", "colective"]),
    (_entry(collective="allreduc"), [], ["[[collective]] #1", "'collective'"]),
    (_entry(size="16Q"), [], ["[[collective]] #1", "'size'"]),
    (_entry(size=0), [], ["[[collective]] #1", "'size'"]),
    (_entry(size="1"), [], ["[[collective]] #1", "'size'", "nothing to send"]),
    (_entry(size="256K") + _entry(hosts=[4, 99]), [], ["[[collective]] #2", "'hosts'", "99"]),
    (_entry(hosts=[4]), [], ["[[collective]] #1", "'hosts'", "at least 2"]),
    (_entry(hosts=[4, 4]), [], ["[[collective]] #1", "'hosts'"]),
    (_entry(qps=0), [], ["[[collective]] #1", "'qps'"]),
    (_entry(collective="alltoall", algo="tree"), [], ["[[collective]] #1", "'algo'"]),
    (_entry(algo="tree", gpus_per_node=3), [], ["[[collective]] #1", "'gpus_per_node'"]),
    (_entry(collective="broadcast", root=4), [], ["[[collective]] #1", "'root'"]),
    (_entry(packet_bytes=58), [], ["[[collective]] #1", "'packet_bytes'"]),
    (_entry(datatype="float33"), [], ["[[collective]] #1", "'datatype'"]),
    ("[collective]\nsize = \"1M\"\n", [], ["collective", "array of tables"]),
    (_entry(), ["-p", "collective.qps=0"], ["-p", "[[collective]]", "'qps'"]),
    (_entry(), ["-p", "collective.sise=1M"], ["-p", "[[collective]]", "sise"]),
    ("[[flows]]\nsrc = 4\ndst = 6\n", ["-p", "collective.qps=2"],
     ["-p collective.qps", "no [[collective]]"]),
])
def test_bad_collective_keys_are_one_line_errors(tmp_path, body, argv, must) -> None:
    f = _file(tmp_path, body)
    rc, _, err = run_cli(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots", *argv])
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("lossless: "), err
    assert "Traceback" not in err
    for text in must:
        assert text in lines[0], (text, lines[0])
    if not argv:
        assert str(f) in lines[0]
    assert not (tmp_path / "o").exists()


NUMERIC = [p.name for p in COLLECTIVE if type(p.default) in (int, float)]


@pytest.mark.parametrize("key", NUMERIC)
@settings(max_examples=5)
@given(v=st.one_of(st.sampled_from([math.inf, -math.inf, math.nan, 1e300, -1.0]),
                   st.integers(min_value=2**63), st.integers(max_value=-1)))
def test_numeric_collective_keys_refuse_hostile_values(tmp_path_factory, key, v) -> None:
    d = tmp_path_factory.mktemp("h")
    f = _file(d, _entry(size="256K"))
    with pytest.raises(ScenarioError, match=rf"^-p: \[\[collective\]\] parameter '{key}'"):
        loader.build(str(f), {f"collective.{key}": v})


# ------------------------------------------------------------ lossless collective --fabric FILE
def test_collective_on_a_fabric_file_is_the_generated_fabric(tmp_path):
    """--fabric FILE.toml: the file's hosts are the ranks, its traffic is left out, and the
    example file (rail 2 x 4 with lossless collective's settings) gives the figures of
    --fabric rail -p spines=2; -p TABLE.KEY overrides the file."""
    ex = str(EXAMPLES / "rail_allreduce.toml")
    docs = []
    for args in (["--fabric", ex], ["--fabric", "rail", "-p", "spines=2"],
                 ["--fabric", ex, "-p", "links.link_gbps=100"]):
        out = tmp_path / f"r{len(docs)}.json"
        rc, _, err = run_cli(["collective", "allreduce", "-b", "1M", "-e", "1M", *args,
                              "--json", str(out)])
        assert rc == 0, err
        docs.append(json.loads(out.read_text()))
    a, b, slow = (d["results"][0] for d in docs)
    assert a["busbw_GB_per_s"] == b["busbw_GB_per_s"] and a["transfers"] == b["transfers"]
    assert docs[0]["nranks"] == 8 and docs[0]["gpus_per_node"] == 4
    assert docs[2]["params"]["link_gbps"] == 100.0  # the file's value, in the document
    assert slow["busbw_GB_per_s"] < a["busbw_GB_per_s"]


def test_collective_fabric_file_errors_are_one_line(tmp_path):
    ex = str(EXAMPLES / "rail_allreduce.toml")
    ref = tmp_path / "ref.toml"
    ref.write_text('scenario = "incast"\n')
    bad = tmp_path / "bad.toml"
    bad.write_text("[topology]\nkind = 'star'\nhosts = 1\n")
    for args, want in (
        (["--fabric", ex, "-p", "link_gbps=100"], "-p link_gbps: with --fabric FILE.toml"),
        (["--fabric", str(tmp_path / "no.toml")], "No such file"),
        (["--fabric", str(ref)], "needs a fabric file"),
        (["--fabric", "nope"], "--fabric: expected one of"),
        (["--fabric", ex, "-p", "links.link_gbps=nan"], "link_gbps"),
        (["--fabric", str(bad)], "bad.toml"),
        (["--fabric", ex, "-p", "collective.qps=4"], "the file's traffic"),
    ):
        rc, _out, err = run_cli(["collective", "allreduce", "-b", "1M", "-e", "1M", *args])
        assert rc == 2 and want in err and len(err.strip().splitlines()) == 1, (args, err)


_LEAF_SPINE = """\
[run]
duration_ms = 0.05
[topology]
kind = "{kind}"
{topo}
[links]
link_gbps = 100.0
[switch]
mtu_bytes = 4154
[[collective]]
size = "64K"
[capture]
enabled = false
"""


@pytest.mark.parametrize(("kind", "topo"), [
    ("leaf_spine", "leaves = 2\nspines = 2\nhosts_per_leaf = 2"),
    ("rail", "nodes = 2\ngpus_per_node = 2\nspines = 1"),
    ("custom", "switch_ids = [0, 1]\nhost_ids = [10, 11, 20, 21]\n"
               "links = [[10, 0, 0, 0], [11, 0, 0, 1], [20, 0, 1, 0], [21, 0, 1, 1], "
               "[0, 2, 1, 2]]"),
])
def test_one_fabric_file_one_set_of_names(tmp_path, kind, topo):
    """The same fabric file names its nodes the same under lossless replay (summary.json
    labels, the plots' names) and lossless collective (its links): leaf-spine leaves leafN
    (they were sw<id> under replay), rail leaves per rail, a custom topology's sw<id>; hosts
    h<id> (they were rN, by rank, under collective)."""
    f = tmp_path / "f.toml"
    f.write_text(_LEAF_SPINE.format(kind=kind, topo=topo))
    s = _replay(f, tmp_path / "o")
    replay = {n["id"]: n["name"] for n in s["labels"]["nodes"]}
    out = tmp_path / "c.json"
    rc, _, err = run_cli(["collective", "allreduce", "-b", "64K", "-e", "64K", "--fabric",
                          str(f), "--json", str(out)])
    assert rc == 0, err
    links = json.loads(out.read_text())["results"][0]["links"]
    coll = {}
    for ln in links:
        coll[ln["node"]] = ln["name"].split(":p")[0]
        coll[ln["peer"]] = ln["peer_name"]
    assert coll == replay
    ports = {(p["node"], p["port"]): p["name"] for p in s["labels"]["ports"]}
    for ln in links:
        if ":p" in ln["name"]:  # a switch port: the same text in both
            assert ports[(ln["node"], ln["port"])] == f"{ln['name']} -> {ln['peer_name']}"
    want = {"leaf_spine": {0: "spine0", 1: "spine1", 2: "leaf0", 3: "leaf1", 4: "h4"},
            "rail": {0: "spine0", 1: "leaf0", 2: "leaf1", 3: "h3"},
            "custom": {0: "sw0", 1: "sw1", 10: "h10"}}[kind]
    assert {k: replay[k] for k in want} == want


def test_nvls_tree_in_a_fabric_file_equals_run_size(tmp_path) -> None:
    """``algo = "nvls_tree"`` in a ``[[collective]]`` runs NVLink SHARP inside the nodes and
    the tree between them, with the figures of lossless collective's."""
    f = _file(tmp_path, _entry(collective="allreduce", size="1M", iters=2, algo="nvls_tree"))
    s = _replay(f, tmp_path / "o")
    [c] = s["collectives"]
    want = _run_size("allreduce", 1 << 20, 2, algorithm="nvls_tree")
    assert c["complete"] and c["wrong"] == 0 and want["wrong"] == 0
    assert want["algorithm"] == "nvls_tree"
    assert c["busbw_GB_per_s"] == pytest.approx(want["busbw_GB_per_s"], rel=0.01)


def test_nvls_one_node_is_bound_by_each_gpus_nvlink() -> None:
    """One node of 8 GPUs, no host side: an NVLS AllReduce moves (n + 1) / n of the buffer
    through each GPU's NVLink each way (nvlink_bytes: every transfer once), so it takes at
    least that at the NVLink rate, and the pipeline of 2 channels keeps it within 15 % of
    it; the ring moves 2 (n - 1) / n and is slower."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"nodes": 1, "gpus_per_node": 8,
                                             "nccl_host": False})
    size, n = 64 << 20, 8
    row = run_size("allreduce", size, "rail", p, algorithm="nvls", protocol="simple",
                   inplace=False)
    bound_us = (n + 1) / n * size * 8 / (p["nvlink_gbps"] * 1e9) * 1e6
    assert row["wrong"] == 0 and row["nvlink_bytes"] == (n + 1) * size
    assert bound_us <= row["time_us"] <= 1.15 * bound_us
    ring = run_size("allreduce", size, "rail", p, algorithm="ring", protocol="simple",
                    inplace=False)
    assert ring["time_us"] > 1.3 * row["time_us"]


@pytest.mark.parametrize("entry", [
    {"collective": "allreduce", "size": "4M"},
    {"collective": "allreduce", "size": "64K", "proto": "ll128"},
    {"collective": "allgather", "size": "1M"},
])
def test_an_entry_with_nccls_tuner_and_host_side_equals_lossless_collective(tmp_path, entry):
    """``algo = "auto"``, ``proto = "auto"`` and ``nccl_host = true`` (lossless
    collective's defaults) make an entry what ``lossless collective --fabric FILE`` runs:
    the same pick per size, channels and time (both plan through
    sim.scenarios.collective.plan_size)."""
    e = {"algo": "auto", "proto": "auto", "nccl_host": True, "iters": 1, **entry}
    f = _file(tmp_path, _entry(**e), duration_ms=2)
    [c] = _replay(f, tmp_path / "o")["collectives"]
    out = tmp_path / "r.json"
    size = entry["size"]
    args = ["collective", entry["collective"], "--fabric", str(f), "-b", size, "-e", size,
            "--json", str(out), "--quiet"]
    if "proto" in entry:
        args += ["--proto", entry["proto"]]
    status, _, err = run_cli(args)
    assert status == 0, err
    [row] = json.loads(out.read_text())["results"]
    assert c["complete"] and c["wrong"] == 0 and c["nccl_host"]
    assert (c["algo"], c["proto"], c["nchannels"]) == (row["algorithm"], row["protocol"],
                                                       row["nchannels"])
    if entry["collective"] == "allreduce":
        assert c["tuner"] == row["tuner"]
    assert c["time_us"] == pytest.approx(row["time_us"], rel=1e-9)


def test_an_entry_is_the_network_alone_by_default(tmp_path):
    """Without nccl_host an entry runs the network alone (as before the key existed): no
    NCCL latencies, so it is faster than the same entry with them; summary.json's params
    name the new keys only when given."""
    times = {}
    for host in (False, True):
        extra = {"nccl_host": True} if host else {}
        f = _file(tmp_path, _entry(collective="allreduce", size="256K", **extra),
                  name=f"c{int(host)}.toml")
        s = _replay(f, tmp_path / f"o{int(host)}")
        [c] = s["collectives"]
        times[host] = c["time_us"]
        assert ("nccl_host" in s["params"]["collective"][0]) == host
        assert "hw" not in s["params"]["collective"][0]
    assert times[True] > times[False] + 8  # at least NCCL's launch latency


def test_an_entry_runs_collnet_only_on_sharp(tmp_path):
    f = _file(tmp_path, _entry(collective="allreduce", size="1M", algo="collnet_chain"))
    status, _, err = run_cli(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"])
    assert status == 2 and err.count("\n") == 1
    assert "'algo': CollNet runs on SHARP switches: give the fabric [topology] sharp = true" \
        in err


def test_an_entry_at_flow_fidelity_equals_lossless_collective_at_flow(tmp_path):
    """``fidelity = "flow"`` runs the entry's QPs as fluid flows: the time of
    ``lossless collective --fabric FILE --fidelity flow`` to the picosecond, within 1 % of
    the packets' here (nothing queues), summary.json and the line say so; the file's other
    traffic, a packet entry beside it and a bad value are refused in one line."""
    e = {"collective": "allreduce", "size": "4M", "iters": 1}
    f = _file(tmp_path, _entry(fidelity="flow", **e), duration_ms=2)
    status, out_text, err = run_cli(["replay", str(f), "--out", str(tmp_path / "o"),
                                     "--no-plots"])
    assert status == 0, err
    assert "the collectives at flow fidelity" in out_text + err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    [c] = s["collectives"]
    assert c["fidelity"] == "flow" and c["complete"] and c["wrong"] == 0
    assert s["params"]["collective"][0]["fidelity"] == "flow"
    out = tmp_path / "r.json"
    status, _, err = run_cli(["collective", "allreduce", "--fabric", str(f), "-b", "4M", "-e",
                              "4M", "--algo", "ring", "--proto", "simple", "-p",
                              "nccl_host=false", "--fidelity", "flow", "--json", str(out),
                              "--quiet"])
    assert status == 0, err
    [row] = json.loads(out.read_text())["results"]
    assert c["time_ps"] == row["time_ps"]
    p = _file(tmp_path, _entry(**e), duration_ms=2, name="p.toml")
    [pk] = _replay(p, tmp_path / "p")["collectives"]
    assert "fidelity" not in pk and "fidelity" not in _replay(
        p, tmp_path / "p2")["params"]["collective"][0]
    assert c["time_ps"] == pytest.approx(pk["time_ps"], rel=0.01)
    for body, said in (
            (_entry(fidelity="flow", **e) + _entry(**e), "every entry at one fidelity"),
            (_entry(fidelity="flow", **e) + "[[flows]]\nsrc = 3\ndst = 6\n",
             "[traffic] or [[flows]] need packets"),
            (_entry(fidelity="flow", **e) + '[[faults]]\nkind = "link_down"\nnode = 0\n'
             'port = 0\nat_us = 10\n', "[[faults]] are not followed"),
            (_entry(fidelity="fluid", **e), "fidelity")):
        bad = _file(tmp_path, body, duration_ms=2, name="bad.toml")
        status, _, err = run_cli(["replay", str(bad), "--out", str(tmp_path / "b"),
                                  "--no-plots"])
        assert status == 2 and err.count("\n") == 1 and said in err, err

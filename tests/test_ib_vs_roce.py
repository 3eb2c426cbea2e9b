"""``fabric = "roce" | "ib"`` as a whole-fabric choice and the ``ib_vs_roce`` study."""

from __future__ import annotations

import csv

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.scenarios import get
from sim.scenarios.base import ScenarioError
from tests.helpers import run_cli


def _run(name: str, **params):
    sc = get(name).builder(params)
    sc.fabric.run(sc.duration_ps)
    return sc, sc.fabric.summary()


def _stall_ps(s) -> int:
    return sum(p.get("credit_stall_ps", 0) for p in s["ports"])


def test_incast_ib_runs_on_credits_not_pfc():
    sc, s = _run("incast", fabric="ib", senders=4, duration_ms=0.05)
    assert s["totals"]["drops"] == 0
    assert s["totals"].get("pauses_sent", 0) == 0
    assert not any(p.get("pause_sent") for p in s["ports"])
    assert _stall_ps(s) > 0
    # every link under IB credits, every switch port arbitrating VLs
    sw = sc.fabric.nodes[0]
    assert all(port.scheduler == "vlarb" for port in sw.ports.values())
    delivered = sum(f["bytes_delivered"] for f in s["flows"])
    assert delivered > 0


def test_incast_roce_still_uses_pfc():
    _sc, s = _run("incast", fabric="roce", senders=4, duration_ms=0.05)
    assert s["totals"]["drops"] == 0
    assert s["totals"]["pauses_sent"] > 0
    assert _stall_ps(s) == 0


@pytest.mark.parametrize("name", ["leaf_spine", "ring"])
def test_other_builtins_take_fabric_ib(name):
    _sc, s = _run(name, fabric="ib", duration_ms=0.02)
    assert s["totals"]["drops"] == 0 and s["totals"].get("pauses_sent", 0) == 0
    assert sum(f["bytes_delivered"] for f in s["flows"]) > 0


def test_deadlock_ring_becomes_a_credit_deadlock():
    from sim.health.deadlock import pfc_failure_summary

    sc, s = _run("pfc_deadlock_ring", fabric="ib", rate_frac=0.8, duration_ms=0.3,
                 stop_ms=0.1, deadlock_confirm_us=50)
    d = pfc_failure_summary(sc)["deadlock"]
    assert d["detected"] and len(d["cycle"]) == 4
    assert s["totals"]["drops"] == 0 and s["totals"]["pauses_sent"] == 0


@pytest.mark.parametrize("args, key, why", [
    (["pfc_storm"], "fabric", "needs PFC"),
    (["pfc_unfairness"], "fabric", "only roce here"),
    (["pfc_deadlock_loop"], "fabric", "only roce here"),
    (["sue_packing"], "fabric", "scale-up Ethernet"),
    (["late_joiner"], "cc", "RoCE congestion control"),  # its default cc is dcqcn
    (["incast", "-p", "buffer_kb=50"], "buffer_kb", "less than one largest packet"),
    (["pfc_deadlock_ring", "-p", "watchdog=true"], "watchdog", "credit waits"),
])
def test_fabric_ib_refused_where_it_makes_no_sense(tmp_path, args, key, why):
    rc, _out, err = run_cli(["replay", *args, "-p", "fabric=ib", "--out", str(tmp_path / "o"),
                            "--no-plots", "--no-capture"])
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and f"'{key}'" in err and why in err, err
    assert "Traceback" not in err


def test_fabric_value_is_checked():
    with pytest.raises(ScenarioError, match=r"fabric.*must be one of"):
        get("incast").builder({"fabric": "omnipath"})


def test_sweep_over_fabric_writes_two_rows(tmp_path):
    out = tmp_path / "sw"
    rc, _o, err = run_cli(["sweep", "incast", "-p", "fabric=ib,roce", "-p", "senders=4",
                           "-p", "duration_ms=0.03", "--workers", "0", "--no-progress",
                           "--out", str(out)])
    assert rc == 0, err
    rows = list(csv.DictReader(open(out / "runs.csv")))
    assert sorted(r["fabric"] for r in rows) == ["ib", "roce"]
    by = {r["fabric"]: r for r in rows}
    assert int(by["ib"]["totals.pauses"]) == 0 < int(by["roce"]["totals.pauses"])


def test_collective_fabric_ib_runs_on_credits():
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    rows = {}
    for fabric in ("roce", "ib"):
        p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 2,
                                                 "nvlink": False, "fabric": fabric,
                                                 "vl_buffer_kb": 8.32 if fabric == "ib" else 0})
        rows[fabric] = run_size("alltoall", 256 * 1024, "rail", p, inplace=False)
    ib, roce = rows["ib"], rows["roce"]
    assert ib["error"] is None and ib["wrong"] == 0
    assert ib["counters"]["pfc_pauses"] == 0 and ib["counters"]["drops"] == 0
    assert ib["counters"]["credit_stall_ps"] > 0
    assert "credit_stall_ps" not in roce["counters"]  # RoCE results keep their keys


def test_study_rows_come_from_the_two_runs():
    from sim.study import ib_vs_roce

    doc = ib_vs_roce.run({"cases": "incast,victim", "duration_ms": 0.05, "flow_kb": 20})
    rows = {(r["case"], r["fabric"]): r for r in doc["rows"]}
    assert sorted(rows) == [("incast", "ib"), ("incast", "roce"), ("victim", "ib"),
                            ("victim", "roce")]
    # the roce incast row is the incast built-in's own run
    _sc, s = _run("incast", senders=8, duration_ms=0.05)
    assert rows["incast", "roce"]["pfc_pauses"] == s["totals"]["pauses_sent"] > 0
    assert rows["incast", "roce"]["max_queue_bytes"] == max(
        p["max_queue_bytes"] for p in s["ports"])
    _sc, s = _run("incast", senders=8, duration_ms=0.05, fabric="ib")
    assert rows["incast", "ib"]["credit_stall_us"] == _stall_ps(s) / 1e6 > 0
    assert rows["incast", "ib"]["pfc_pauses"] == 0
    for fabric in ("roce", "ib"):
        v = rows["victim", fabric]
        assert v["drops"] == 0 and v["fct_p50_us"] <= v["fct_p99_us"]
        assert 0 < v["victim_gbps"] < 100  # the victim is slowed by the incast's congestion
    table = ib_vs_roce.format_table(doc["rows"]).splitlines()
    assert len(table) == 5 and "credit stall us" in table[0] and "PFC pauses" in table[0]


def test_cli_ib_vs_roce(tmp_path):
    out = tmp_path / "st"
    rc, so, err = run_cli(["ib-vs-roce", "-p", "cases=incast", "-p", "duration_ms=0.02",
                           "-p", "senders=2", "--out", str(out)])
    assert rc == 0, err
    lines = so.splitlines()
    assert len(lines) == 3 and lines[1].split()[:2] == ["incast", "roce"]
    assert lines[2].split()[:2] == ["incast", "ib"]
    assert (out / "ib_vs_roce.png").stat().st_size > 0 and (out / "results.json").exists()
    rc, _so, err = run_cli(["ib-vs-roce", "-p", "cases=bogus"])
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "'cases'" in err


def test_fabric_ib_takes_ib_cc_and_ib_routing():
    sc, s = _run("incast", fabric="ib", cc="ibcc", senders=4, duration_ms=0.05)
    assert s["totals"]["drops"] == 0 and s["totals"]["pauses_sent"] == 0
    assert s["totals"]["ce_marked"] > 0  # the switch's FECN marking of IB CC
    sw = sc.fabric.nodes[0]
    assert sw.ecn is not None and sw.ecn.mode == "ib"
    _sc, s = _run("incast", fabric="ib", senders=4, duration_ms=0.02)
    assert s["totals"]["ce_marked"] == 0  # cc none: no marking
    for routing in ("static", "adaptive"):
        sc = get("leaf_spine").builder({"fabric": "ib", "ib_routing": routing,
                                        "duration_ms": 0.01})
        leaves = [n for n in sc.fabric.nodes.values() if hasattr(n, "routing")]
        assert {sw.routing for sw in leaves} == {routing}
    sc = get("leaf_spine").builder({"fabric": "roce", "ib_routing": "adaptive"})
    assert "adaptive" not in {getattr(n, "routing", None) for n in sc.fabric.nodes.values()}


def test_study_native_cc_is_each_fabrics_own():
    from sim.study import ib_vs_roce

    doc = ib_vs_roce.run({"cases": "incast", "duration_ms": 0.05, "cc": "native",
                          "senders": 4})
    rows = {r["fabric"]: r for r in doc["rows"]}
    _sc, s = _run("incast", senders=4, duration_ms=0.05, cc="dcqcn")
    assert rows["roce"]["pfc_pauses"] == s["totals"]["pauses_sent"]
    _sc, s = _run("incast", senders=4, duration_ms=0.05, fabric="ib", cc="ibcc")
    assert rows["ib"]["credit_stall_us"] == _stall_ps(s) / 1e6
    # goodput is payload: 1050-byte IB packets (the IB default) carry 1024 bytes each
    assert s["flows"][0]["bytes_delivered"] % 1050 == 0
    assert rows["ib"]["goodput_gbps"] == pytest.approx(
        sum(f["bytes_delivered"] for f in s["flows"]) * 1024 / 1050 * 8 / (0.05 * 1e6))


def _file(fabric: str, **extra):
    doc = {"run": {"duration_ms": 0.03}, "topology": {"kind": "star", "hosts": 5},
           "links": {"fabric": fabric}, "switch": {"buffer_kb": 4000},
           "traffic": {"pattern": "incast", "packet_bytes": 1024}}
    for table, kv in extra.items():
        doc.setdefault(table, {}).update(kv)
    return doc


def test_fabric_file_links_fabric_ib():
    from sim.scenarios.description import build

    sc = build(_file("ib"), "f.toml")
    sc.fabric.run(sc.duration_ps)
    s = sc.fabric.summary()
    assert s["totals"]["pauses_sent"] == 0 and s["totals"]["drops"] == 0
    assert _stall_ps(s) > 0 and s["totals"]["ce_marked"] == 0
    assert {p.scheduler for p in sc.fabric.nodes[0].ports.values()} == {"vlarb"}
    sc = build(_file("roce"), "f.toml")
    sc.fabric.run(sc.duration_ps)
    s = sc.fabric.summary()
    assert s["totals"]["pauses_sent"] > 0 and _stall_ps(s) == 0
    sc = build(_file("ib", hosts={"cc": "ibcc"}), "f.toml")
    assert sc.fabric.nodes[0].ecn.mode == "ib"


@pytest.mark.parametrize("extra, pattern", [
    ({"links": {"flow_control": "pfc"}}, r"\[links\] flow_control: 'pfc' contradicts"),
    ({"hosts": {"cc": "dcqcn"}}, r"\[hosts\] cc: 'dcqcn' is RoCE"),
    ({"links": {"fabric": "opa"}}, r"\[links\] parameter 'fabric': must be one of"),
])
def test_fabric_file_contradictions_are_one_line(extra, pattern):
    from sim.scenarios.description import build

    with pytest.raises(ScenarioError, match=f"f.toml: .*{pattern}") as e:
        build(_file("ib", **extra), "f.toml")
    assert "\n" not in str(e.value)


@given(buffer_kb=st.floats(10, 50_000), ports=st.integers(2, 64),
       vl_kb=st.sampled_from([0.0, 1.1, 4.16, 32.768, 500.0]),
       packet=st.integers(64, 9216))
def test_ib_setup_fits_the_buffer_or_says_which_key(buffer_kb, ports, vl_kb, packet):
    """fabric_setup("ib") either gives VL buffers that hold one largest packet and, with the
    reserves, fit the switch buffer on every port and VL, or refuses naming the key."""
    from sim.flowctl.ib import ib_blocks
    from sim.scenarios.common import FABRIC_PARAMS, RESERVED_BYTES, fabric_setup

    p = {k: q.default for k, q in FABRIC_PARAMS.items()}
    p.update(fabric="ib", buffer_kb=buffer_kb, vl_buffer_kb=vl_kb, packet_bytes=packet)
    try:
        fs = fabric_setup(p, ports, 100 * 10**9)
    except ScenarioError as e:
        assert ("'vl_buffer_kb'" if vl_kb else "'buffer_kb'") in str(e) or \
            "'buffer_kb'" in str(e)
        return
    ib = fs.link_kw["ib"]
    assert ib.buffer_blocks >= ib_blocks(packet)
    assert ports * 8 * (RESERVED_BYTES + ib.buffer_blocks * 64) <= round(buffer_kb * 1000)
    assert fs.mmu.lossless_pgs == frozenset() and fs.switch_kw["scheduler"] == "vlarb"

"""``fabric = "roce" | "ib"`` as a whole-fabric choice and the ``ib_vs_roce`` study (issue 20)."""

from __future__ import annotations

import csv

import pytest

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
    with pytest.raises(ScenarioError, match="fabric.*must be one of"):
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

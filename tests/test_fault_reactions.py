"""Fault reactions and their command line: ``-p fault=`` on built-in scenarios,
fabric files and ``lossless collective``; straggler and slow-PCIe faults; NCCL's behaviour on
a QP error and port failover; the PFC watchdog and the deadlock detector through faults."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.scenarios import ScenarioError
from sim.scenarios.common import parse_fault
from sim.scenarios.loader import build
from tests.helpers import LEAF_SPINE_FLOWS_TOML

US = 10**6
FAST_WD = {"watchdog": True, "wd_poll_ms": 0.05, "wd_detect_polls": 2, "wd_restore_ms": 0.2}
#: a 2-node x 2-GPU rail fabric: ranks 0..3 on hosts 3..6, rank 1's NIC is host 4
#: Ring Simple on the network alone (no NCCL host side): the fault times below fall on the
#: first sends
NET = ["--algo", "ring", "--proto", "simple", "-p", "nccl_host=false"]
RAIL = ["-p", "nodes=2", "-p", "gpus_per_node=2", *NET]
#: RC with a short timer: 4.096 us x 2^1 = 8.192 us, one retry
RC = ["-p", "reliable=true", "-p", "ack_timeout=1", "-p", "retry_cnt=1"]


# ---------------------------------------------------------------- 1. the -p syntax
def test_parse_fault_compact_syntax() -> None:
    assert parse_fault("link_down:node=2,port=3,at_us=200,until_us=600.5") == {
        "kind": "link_down", "node": 2, "port": 3, "at_us": 200, "until_us": 600.5}
    assert parse_fault("straggler: rank=1 , delay_us=5") == {"kind": "straggler", "rank": 1,
                                                             "delay_us": 5}
    for bad, why in (("link_down", "expected KIND:KEY=VALUE"), ("node=2", "expected KIND"),
                     ("loss:loss_rate", "expected KEY=VALUE"),
                     ("loss:node=1,node=2", "node given twice")):
        with pytest.raises(ValueError, match=why):
            parse_fault(bad)


@given(kind=st.sampled_from(["link_down", "loss", "degrade"]), node=st.integers(0, 99),
       port=st.integers(0, 9), at=st.integers(0, 10**6))
def test_parse_fault_round_trips_any_values(kind, node, port, at) -> None:
    text = f"{kind}:node={node},port={port},at_us={at}"
    assert parse_fault(text) == {"kind": kind, "node": node, "port": port, "at_us": at}


def _events(sc):
    return [(e["t_ps"], e["what"]) for e in sc.fabric.fault_log.events]


_SPINE_DOWN = "link_down:node=2,port=3,at_us=100,until_us=200"


def test_p_fault_on_a_builtin_exact_timeline() -> None:
    """leaf_spine with a spine link down 100..200 us and a 20 + 5 us reroute."""
    sc = build("leaf_spine", {"duration_ms": 0.25, "fault": _SPINE_DOWN, "detect_us": 20,
                              "converge_us": 5.0})
    sc.fabric.run(sc.duration_ps)
    assert _events(sc) == [(100 * US, "link_down"), (125 * US, "reroute"),
                           (200 * US, "link_up"), (225 * US, "reroute")]
    assert sc.params["faults"][0]["kind"] == "link_down" and "faults" in sc.summaries
    assert sc.fabric.fault_log.drops["link_down"] > 0
    assert "fault_free" in sc.info  # the baseline of the fault report


def test_p_fault_repeatable_and_keyed_form_is_the_same_fault() -> None:
    a = build("leaf_spine", {"duration_ms": 0.25, "detect_us": 20, "converge_us": 5,
                             "fault": ["loss:node=3,port=3,loss_rate=0.5", _SPINE_DOWN]})
    # the keyed fault comes after the listed ones (the index seeds a fault's random draws)
    b = build("leaf_spine", {"duration_ms": 0.25, "detect_us": 20, "converge_us": 5,
                             "fault": ["loss:node=3,port=3,loss_rate=0.5"],
                             "fault.kind": "link_down", "fault.node": 2, "fault.port": 3,
                             "fault.at_us": 100, "fault.until_us": 200})
    for sc in (a, b):
        sc.fabric.run(sc.duration_ps)
    assert sorted(_events(a)) == sorted(_events(b))
    assert a.fabric.fault_log.drops == b.fabric.fault_log.drops


def test_no_fault_keys_no_fault_outputs() -> None:
    sc = build("leaf_spine", {"duration_ms": 0.05})
    assert "faults" not in sc.params and "faults" not in sc.summaries
    assert not hasattr(sc.fabric, "fault_log")


_FILE = "[run]\nduration_ms = 0.25\n" + LEAF_SPINE_FLOWS_TOML


def test_p_fault_on_a_fabric_file_equals_its_faults_entry(tmp_path) -> None:
    plain = tmp_path / "a.toml"
    plain.write_text(_FILE)
    entry = tmp_path / "b.toml"
    entry.write_text(_FILE + '[[faults]]\nkind = "link_down"\nnode = 2\nport = 3\n'
                     'at_us = 100.0\nuntil_us = 200.0\ndetect_us = 20.0\nconverge_us = 5.0\n')
    a = build(str(plain), {"fault": _SPINE_DOWN, "detect_us": 20, "converge_us": 5})
    b = build(str(entry))
    for sc in (a, b):
        sc.fabric.run(sc.duration_ps)
    assert _events(a) == _events(b) == [(100 * US, "link_down"), (125 * US, "reroute"),
                                        (200 * US, "link_up"), (225 * US, "reroute")]
    same = [{k: v for k, v in e.items() if k not in ("detect_us", "converge_us")}
            for e in a.params["faults"]]
    assert same == [{k: v for k, v in e.items() if k not in ("detect_us", "converge_us")}
                    for e in b.params["faults"]]
    # -p detect_us wins over the file's
    c = build(str(entry), {"detect_us": 30})
    c.fabric.run(c.duration_ps)
    assert _events(c)[1] == (135 * US, "reroute")


@pytest.mark.parametrize("params,msg", [
    ({"fault": "link_down:node=2,port=9"}, "-p fault #1 port: node 2 port 9: no such port"),
    ({"fault": "wobble:node=2"}, "-p fault #1 parameter 'kind': must be one of"),
    ({"fault": "link_down"}, "-p fault #1: expected KIND:KEY=VALUE"),
    ({"fault": "link_down:node=2,colour=3"}, "-p fault #1 unknown parameter(s) ['colour']"),
    ({"fault.kind": "flap", "fault.node": 2},
     "-p fault.KEY mtbf_us: kind 'flap' needs a positive mtbf_us"),
    ({"fault": "link_down:node=2,at_us=5,until_us=4"},
     "-p fault #1 until_us: must be after at_us"),
    ({"fault": "straggler:rank=1,delay_us=3"}, "-p fault #1 kind: a straggler is a rank of a "
     "collective; there is none here"),
    ({"fault": "slow_pcie:node=4,rate_gbps=8"}, "-p fault #1 node: node 4: the host has no "
     "PCIe model"),
    ({"fault": "loss:node=2,port=3,loss_rate=0.1,ber=1e-9"},
     "-p fault #1 ber: kind 'loss' takes loss_rate or ber, not both"),
    ({"fault": "degrade:node=2,port=3,rate_gbps=1e-12"},
     "-p fault #1 degrade: 1e-12 Gb/s is not a whole number of b/s"),
    ({"detect_us": "soon"}, "-p: parameter 'detect_us': expected float"),
    # an entry names its kind and only the keys of that kind; no empty item; -1 or >= 0
    ({"fault.node": 0}, "-p fault.KEY kind: missing: one of link_down, flap"),
    ({"fault": "link_down:node=2,port=3,mtbf_us=5"},
     "-p fault #1 mtbf_us: does not apply to kind 'link_down' (its keys: node, port, at_us"),
    ({"fault": "switch_down:node=0,port=1"},
     "-p fault #1 port: does not apply to kind 'switch_down'"),
    ({"fault": "nic_down:node=4,port=0"}, "-p fault #1 port: does not apply to kind "
     "'nic_down'"),
    ({"fault": "loss:node=2,port=3,loss_rate=0.1,delay_us=3"},
     "-p fault #1 delay_us: does not apply to kind 'loss'"),
    ({"fault": "link_down:node=2,,port=3"}, "-p fault #1: KEY=VALUE #2 after link_down: is "
     "empty"),
    ({"fault": "link_down:node=2,port=3,"}, "-p fault #1: KEY=VALUE #3 after link_down: is "
     "empty"),
    ({"detect_us": -5}, "-p: parameter 'detect_us': must be -1 (the default) or >= 0"),
    ({"fault": "link_down:node=2,port=3,converge_us=-5"},
     "-p fault #1 parameter 'converge_us': must be -1 (the default) or >= 0"),
])
def test_p_fault_errors_name_the_key(params, msg) -> None:
    with pytest.raises(ScenarioError) as e:
        build("leaf_spine", {"duration_ms": 0.05, **params})
    assert msg in str(e.value), str(e.value)


def test_fabric_file_fault_without_kind_is_refused(tmp_path) -> None:
    f = tmp_path / "f.toml"
    f.write_text(_FILE + "[[faults]]\nnode = 2\nport = 3\nat_us = 100.0\n")
    with pytest.raises(ScenarioError, match=r"f.toml: \[\[faults\]\] #1 kind: missing: one "
                                            r"of link_down"):
        build(str(f))


_HOST = st.one_of(st.fixed_dictionaries({"node": st.integers(0, 9)}),
                  st.fixed_dictionaries({"rank": st.integers(0, 9)}))
_LINK = st.fixed_dictionaries({"node": st.integers(0, 9), "port": st.integers(0, 9)})
_TIMES = st.fixed_dictionaries({}, optional={
    "at_us": st.integers(0, 50), "until_us": st.integers(51, 99),
    "detect_us": st.sampled_from([-1, 0, 7.5]), "converge_us": st.sampled_from([-1, 3])})
_POS = st.floats(0.5, 100)
#: a valid raw entry of every kind (its keys only, alternatives one at a time)
_ENTRY = st.one_of(
    st.tuples(st.just("link_down"), _LINK),
    st.tuples(st.just("flap"), _LINK, st.fixed_dictionaries({"mtbf_us": _POS,
                                                             "mttr_us": _POS})),
    st.tuples(st.just("loss"), _LINK, st.one_of(
        st.fixed_dictionaries({"loss_rate": st.floats(0, 1)}),
        st.fixed_dictionaries({"ber": st.floats(0, 1)}))),
    st.tuples(st.just("degrade"), _LINK, st.fixed_dictionaries({"rate_gbps": st.just(50)})),
    st.tuples(st.just("nic_down"), _HOST),
    st.tuples(st.just("switch_down"), st.fixed_dictionaries({"node": st.integers(0, 9)})),
    st.tuples(st.just("slow_pcie"), _HOST, st.one_of(
        st.fixed_dictionaries({"rate_gbps": st.just(8)}),
        st.fixed_dictionaries({"pcie_gen": st.integers(1, 6)},
                              optional={"pcie_lanes": st.sampled_from([1, 4, 16])}))),
    st.tuples(st.just("straggler"), _HOST, st.fixed_dictionaries({"delay_us": _POS})),
).flatmap(lambda t: _TIMES.map(lambda times: {"kind": t[0], **{k: v for d in t[1:]
                                                                   for k, v in d.items()},
                                              **times}))


@settings(max_examples=200)
@given(entries=st.lists(_ENTRY, min_size=1, max_size=4))
def test_resolved_fault_entries_resolve_to_the_same_plan(entries) -> None:
    """What params.faults lists (the resolved entries: the keys of each kind, defaults filled
    in) is itself a valid list of raw entries and resolves to the same faults: lossless
    collective resolves them again for every size."""
    from sim.scenarios.common import FAULT_KIND_KEYS, resolve_faults
    a = resolve_faults([(f"#{i}", e) for i, e in enumerate(entries)])
    b = resolve_faults([(f"#{i}", e) for i, e in enumerate(a.entries)])
    assert b.entries == a.entries
    assert [f for _, f, _ in b.faults] == [f for _, f, _ in a.faults]
    assert [s for _, s in b.stragglers] == [s for _, s in a.stragglers]
    assert b.reroute == a.reroute
    for raw, got in zip(entries, a.entries, strict=True):
        assert set(raw) <= set(got) <= {"kind", "at_us", "until_us", "detect_us",
                                        "converge_us", *FAULT_KIND_KEYS[raw["kind"]]}


@pytest.mark.parametrize("fault", [
    ["-p", "fault=loss:node=2,port=0,loss_rate=1e-3"],
    ["-p", "fault=loss:node=2,port=0,ber=1e-6"],
    ["-p", "fault.kind=loss", "-p", "fault.node=2", "-p", "fault.ber=1e-6"],
    ["-p", "fault=slow_pcie:rank=0,pcie_gen=3,pcie_lanes=4", "-p", "pcie_gen=5"],
])
def test_lossless_collective_runs_every_spelling_of_a_fault(tmp_path, fault) -> None:
    """Each size resolves the run's faults again (its fresh fabric): the resolved entries
    must be accepted as they were given."""
    from sim.cli import main
    path = tmp_path / "r.json"
    rc = main(["collective", "allreduce", "-b", "256K", "-e", "512K", *RAIL, *fault,
               "-p", "reliable=true", "-p", "ack_timeout=4", "--no-baseline", "--json",
               str(path), "--quiet"])
    doc = json.loads(path.read_text())
    assert rc == 0 and [r["error"] for r in doc["results"]] == [None, None]
    assert doc["params"]["faults"][0]["kind"] in ("loss", "slow_pcie")


def test_p_fault_cli_one_line_exit_2(tmp_path, capsys) -> None:
    from sim.cli import main
    assert main(["replay", "leaf_spine", "-p", "fault=link_down:node=2,port=9", "--out",
                 str(tmp_path / "o"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err == "lossless: -p fault #1 port: node 2 port 9: no such port\n"
    assert not (tmp_path / "o").exists()


def test_p_fault_cli_repeated_and_summary(tmp_path) -> None:
    from sim.cli import main
    out = tmp_path / "o"
    rc = main(["replay", "leaf_spine", "-p", "duration_ms=0.25", "-p", f"fault={_SPINE_DOWN}",
               "-p", "fault=degrade:node=3,port=4,rate_gbps=50,at_us=10", "-p", "detect_us=20",
               "-p", "converge_us=5", "--out", str(out), "--no-plots", "--no-capture",
               "--no-baseline"])
    s = json.loads((out / "summary.json").read_text())
    assert [f["kind"] for f in s["params"]["faults"]] == ["link_down", "degrade"]
    assert s["totals"]["dropped_packets_by_reason"]["link_down"] > 0
    # PFC frames lost on the dead link belong to no flow: every flow still balances
    assert rc == 0 and not s.get("problems"), s.get("problems")


def test_sweep_sweeps_a_fault_key(tmp_path) -> None:
    from sim.study.sweep import sweep
    rows = sweep("leaf_spine", {"duration_ms": [0.04], "fault.kind": ["link_down"],
                                "fault.node": [2], "fault.port": [3],
                                "fault.at_us": [10, 20], "detect_us": [10],
                                "converge_us": [0]},
                 out_dir=str(tmp_path / "s"), workers=0, progress=False)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    assert sorted(r["params"]["fault.at_us"] for r in rows) == [10, 20]
    drops = {r["params"]["fault.at_us"]: r["figures"]["totals.dropped_packets_by_reason.link_down"]
             for r in rows}
    assert drops[10] > drops[20] > 0  # down earlier in the same run: more lost


# ------------------------------------------------------ 2. straggler and slow PCIe
def _rc_run(extra, tmp_path, name="r.json"):
    from sim.cli import main
    path = tmp_path / name
    rc = main(["collective", "allreduce", "-b", "1M", "-e", "1M", *RAIL, *extra,
               "--json", str(path)])
    return rc, json.loads(path.read_text())


def test_straggler_window_only_delays_transfers_ready_inside_it() -> None:
    from sim.fabric.rail import collective_star
    from sim.workloads.collective import run_schedule
    from sim.workloads.nccl import schedule
    sch = schedule("allreduce", 4, 2**18, "float", nchannels=1)

    def go(delay):
        f = collective_star(4, link_gbps=100, prop_ps=500_000)
        return run_schedule(sch, f.fabric, f.ranks, delay_ps=delay)

    base = go(None)
    # a window [0, 1 ps): only rank 1's first transfers (ready at 0) start 10 us late
    late = go({1: (10 * US, 0, 1)})
    first = {t.id for t in sch.transfers if not t.depends_on}
    for t in sch.transfers:
        if t.src == 1 and t.id in first:
            assert late.start_ps[t.id] == 10 * US
        elif t.id in first:
            assert late.start_ps[t.id] == 0
    # a window that opens after the run: nothing changes
    never = go({1: (10 * US, 10**12, None)})
    assert never.start_ps == base.start_ps and never.finish_ps == base.finish_ps


def test_straggler_from_p_fault_on_lossless_collective(tmp_path) -> None:
    _, base = _rc_run(["--timeline-rank", "1"], tmp_path, "a.json")
    _, late = _rc_run(["--timeline-rank", "1", "-p", "fault=straggler:rank=1,delay_us=10"],
                      tmp_path, "b.json")
    sends = [x["start_ps"] for x in late["results"][0]["timeline"] if x["dir"] == "send"]
    base_sends = [x["start_ps"] for x in base["results"][0]["timeline"] if x["dir"] == "send"]
    assert late["params"]["faults"][0]["kind"] == "straggler"
    assert min(base_sends) == 0 and min(sends) == 10 * US  # rank 1's first send: 10 us late
    assert late["results"][0]["time_us"] >= base["results"][0]["time_us"] + 10


def test_straggler_in_a_fabric_file_collective(tmp_path) -> None:
    f = tmp_path / "c.toml"
    f.write_text('[run]\nduration_ms = 0.2\n[topology]\nkind = "star"\nhosts = 4\n'
                 '[[collective]]\nsize = "256K"\nchannels = 1\n'
                 '[[faults]]\nkind = "straggler"\nnode = 2\ndelay_us = 7.0\n')
    g = tmp_path / "d.toml"
    g.write_text(f.read_text().split("[[faults]]")[0])
    late, base = build(str(f)), build(str(g))
    for sc in (late, base):
        sc.fabric.run(sc.duration_ps)
    [cl], [cb] = late.info["collectives"], base.info["collectives"]
    r = cl.hosts.index(2)
    assert cl.delay_ps == {r: (7 * US, 0, None)}
    starts = cl.job.run.start_ps
    first = [t for t in cl.sch.transfers if not t.depends_on]
    assert all(starts[t.id] == (7 * US if t.src == r else 0) for t in first)
    assert cl.summary()["time_ps"] >= cb.summary()["time_ps"] + 7 * US
    bad = tmp_path / "e.toml"
    bad.write_text(f.read_text().replace("node = 2", "node = 9"))
    with pytest.raises(ScenarioError, match=r"\[\[faults\]\] #1 node: 9 is not a host of a "
                                            r"collective"):
        build(str(bad))


def test_slow_pcie_sets_the_host_rates_at_and_until() -> None:
    from sim.fabric.faults import Fault, schedule_faults
    from sim.fabric.rail import collective_star
    from sim.nic.pcie import PcieLink
    f = collective_star(2, link_gbps=100, prop_ps=500_000,
                        host_kw={"pcie_write_bps": 400 * 10**9, "pcie_read_bps": 400 * 10**9})
    h = f.fabric.nodes[f.ranks[1]]
    log = schedule_faults(f.fabric, [Fault("slow_pcie", h.node_id, at_ps=5 * US,
                                           until_ps=9 * US, pcie_gen=3, pcie_lanes=4)])
    g3 = PcieLink(3, 4)
    f.fabric.run(5 * US - 1)
    assert h.pcie_write_bps == 400 * 10**9
    f.fabric.run(5 * US)
    assert (h.pcie_write_bps, h.pcie_read_bps) == (g3.write_bps(), g3.read_bps())
    f.fabric.run(9 * US)
    assert (h.pcie_write_bps, h.pcie_read_bps) == (400 * 10**9, 400 * 10**9)
    assert [(e["t_ps"], e["what"]) for e in log.events] == [(5 * US, "pcie"), (9 * US, "pcie")]
    with pytest.raises(ValueError, match="exactly one of rate_gbps and pcie_gen"):
        Fault("slow_pcie", 1)


def test_slow_pcie_p_fault_slows_the_collective(tmp_path) -> None:
    _, base = _rc_run([], tmp_path, "a.json")
    _, slow = _rc_run(["-p", "fault=slow_pcie:rank=2,rate_gbps=50"], tmp_path, "b.json")
    assert slow["results"][0]["error"] is None
    # 50 Gb/s instead of Gen5 x16 (~400 Gb/s) on one rank of the ring: much slower
    assert slow["results"][0]["time_us"] > 2 * base["results"][0]["time_us"]


# ----------------------------------------------------------- 3. QP error, failover
def _nic_down_run(tmp_path, *extra):
    return _rc_run([*RC, "-p", "fault=nic_down:rank=1,at_us=5", *extra], tmp_path)


def test_qp_error_fails_the_collective_at_the_qp_error(tmp_path, capsys) -> None:
    """Rank 1's NIC down at 5 us: a QP through it gets no ACK; with an 8.192 us timeout and
    one retry it errs 2 x 8.192 us after its oldest unacked frame was last sent (in 0..5 us
    + one frame), and the collective stops then: exit 1, one line, results.json 'failed'."""
    rc, doc = _nic_down_run(tmp_path)
    r = doc["results"][0]
    assert rc == 1
    f = r["failed"]
    t_out = 2 * 4096 * 2 * 1000  # ps
    assert t_out <= f["t_ps"] <= 5 * US + t_out + 20_000
    assert {f["host"], f["peer"]} & {4}  # a QP of rank 1's NIC (host 4)
    assert f["iteration"] == 1 and r["error"].startswith("iteration 1: collective failed at")
    assert r["counters"]["qp_errors"] >= 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"QP {f['qp']}" in err and "failed at" in err


def test_qp_error_job_posts_nothing_after_failing() -> None:
    from sim.fabric.faults import Fault, schedule_faults
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import build_fabric, collective_params
    from sim.workloads.collective import QpFailure, run_schedule
    from sim.workloads.nccl import schedule
    p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 2,
                                             "reliable": True, "ack_timeout": 1,
                                             "retry_cnt": 0})
    rf = build_fabric("rail", p)
    schedule_faults(rf.fabric, [Fault("nic_down", rf.ranks[1], at_ps=5 * US)])
    sch = schedule("allreduce", 4, 2**18, "float", nchannels=2, gpus_per_node=2)
    with pytest.raises(QpFailure) as e:
        run_schedule(sch, rf.fabric, rf.ranks, gpus_per_node=2)
    f = e.value.failed
    host = rf.fabric.nodes[f["host"]]
    assert host.qp_error_ps[f["qp"]] == f["t_ps"]  # the moment the QP erred
    assert 8_192_000 <= f["t_ps"] <= 5 * US + 8_192_000 + 20_000  # one timeout, no retry


_GAP_PS = 88_480  # one 1082-byte frame at 100 Gb/s (with preamble, FCS and gap)


@pytest.mark.parametrize("opts,want_ps", [
    ({"ack_timeout": 1, "retry_cnt": 1}, 2 * (8_192_000 + _GAP_PS)),  # 4.096 us x 2^1
    ({}, 8 * (4_096_000 * 2**20 + _GAP_PS)),  # NCCL's defaults: 8 x 4.295 s = 34.36 s
])
def test_qp_error_exact_time_on_a_dead_receiver(opts, want_ps) -> None:
    """Rank 1's NIC is down from 0: rank 0's first message is two frames, sent at 0 and one
    frame time later; the second, its last, asks for an ACK and is never ACKed.  Each timeout
    (4.096 us x 2^ack_timeout after that frame was last sent) resends both (go-back-N), and
    the one after retry_cnt retries puts the QP in error: at (retry_cnt + 1) x (timeout + one
    frame time) exactly, when the collective fails."""
    from sim.fabric.faults import Fault, schedule_faults
    from sim.fabric.rail import collective_star
    from sim.workloads.collective import QpFailure, run_schedule
    from sim.workloads.nccl import schedule
    f = collective_star(2, link_gbps=100, prop_ps=500_000)
    schedule_faults(f.fabric, [Fault("nic_down", f.ranks[1])])
    sch = schedule("allreduce", 2, 1024, "float", nchannels=1)
    with pytest.raises(QpFailure) as e:
        run_schedule(sch, f.fabric, f.ranks, reliable=opts or True, limit_ps=want_ps + 1,
                     slice_ps=10**12)
    assert e.value.failed["t_ps"] == want_ps
    assert (e.value.failed["src_rank"], e.value.failed["dst_rank"]) == (0, 1)
    assert f"failed at {want_ps / 1e6:.3f} us" in str(e.value)


def test_failover_moves_the_qp_and_resends_only_what_did_not_arrive(tmp_path) -> None:
    rc, doc = _nic_down_run(tmp_path, "-p", "failover=true", "-n", "2")
    r = doc["results"][0]
    assert rc == 0 and r["error"] is None and r["wrong"] == 0
    # the second iteration runs on the moved QPs
    assert r["failovers"] and len(r["iteration_times_ps"]) == 2
    assert {m["iteration"] for m in r["failovers"]} == {1}
    for m in r["failovers"]:
        assert m["qp"] != m["to_qp"] and m["from_host"] != 4 and m["to_host"] != 4
        assert 0 < m["resent_bytes"]


def test_failover_resent_bytes_are_posted_minus_arrived() -> None:
    from sim.fabric.faults import Fault, schedule_faults
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import build_fabric, collective_params
    from sim.workloads.collective import CollectiveJob
    from sim.workloads.nccl import schedule
    p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 2,
                                             "reliable": True, "ack_timeout": 1,
                                             "retry_cnt": 0})
    rf = build_fabric("rail", p)
    fab = rf.fabric
    schedule_faults(fab, [Fault("nic_down", rf.ranks[1], at_ps=5 * US)])
    sch = schedule("allreduce", 4, 2**18, "float", nchannels=2, gpus_per_node=2)
    job = CollectiveJob(sch, fab, rf.ranks, gpus_per_node=2, failover=True)
    seen = {}
    orig = job._failover

    def spy(key, fid, now):  # what the old QP had posted and delivered at that moment
        dst = fab.flows[fid].dst
        seen[fid] = (job.run.posted_bytes[fid], fab.nodes[dst].rx_bytes.get(fid, 0))
        return orig(key, fid, now)

    job._failover = spy
    job.start()
    fab.run(2 * 10**9)
    assert job.done and job.failed is None and job.run.failovers
    for m in job.run.failovers:
        posted, got = seen[m["qp"]]
        assert m["resent_bytes"] == posted - got > 0


def test_failover_impossible_with_one_gpu_per_node(tmp_path) -> None:
    from sim.cli import main
    path = tmp_path / "r.json"
    rc = main(["collective", "allreduce", "-b", "256K", "-e", "256K", "--fabric", "star",
               "-p", "nodes=4", "-p", "gpus_per_node=1", *RC, "-p", "failover=true",
               "-p", "fault=nic_down:rank=1,at_us=2", "--json", str(path)])
    r = json.loads(path.read_text())["results"][0]
    assert rc == 1 and "no other rail" in r["failed"]["why"]


def test_fabric_file_collective_reports_failed(tmp_path) -> None:
    from sim.workloads.collective import failure_text
    f = tmp_path / "c.toml"
    f.write_text('[run]\nduration_ms = 0.2\n[topology]\nkind = "star"\nhosts = 4\n'
                 '[hosts]\nreliable = true\nack_timeout = 1\nretry_cnt = 1\n'
                 '[[collective]]\nsize = "256K"\nchannels = 1\niters = 3\n'
                 '[[faults]]\nkind = "nic_down"\nnode = 2\nat_us = 3.0\n')
    sc = build(str(f))
    sc.fabric.run(sc.duration_ps)
    [c] = sc.info["collectives"]
    s = c.summary()
    assert s["failed"]["t_ps"] == sc.fabric.nodes[s["failed"]["host"]].qp_error_ps[
        s["failed"]["qp"]]
    assert s["complete"] is False and s["iterations_done"] == 0
    assert s["error"] == f"iteration 1: {failure_text(s['failed'])}"


# ------------------------------------------- 4. watchdog and deadlock detector hold
def test_pfc_watchdog_fires_as_without_faults() -> None:
    from sim.events import WatchdogTriggered
    from sim.trace import ListTracer

    def trig(params):
        tr = ListTracer()
        sc = build("pfc_storm", {"duration_ms": 0.4, "stall_ms": 0.05, **FAST_WD,
                                 "wd_restore_ms": 5.0, **params})
        sc.tracer_slot.target = tr
        sc.fabric.run(sc.duration_ps)
        return [(e.t_ps, e.node, e.port, e.action) for e in tr.of_type(WatchdogTriggered)], sc

    clean, _ = trig({})
    faulted, sc = trig({"fault": ["link_down:node=2,port=3,at_us=20,until_us=300",
                                  "loss:node=3,port=4,loss_rate=0.001"],
                        "detect_us": 10, "converge_us": 5})
    assert clean == faulted == [(200 * US, 3, 0, "drop")]
    assert sc.fabric.fault_log.drops["link_down"] > 0


def test_deadlock_detector_finds_the_ring_deadlock_through_a_flapping_host_link() -> None:
    def run(params):
        sc = build("pfc_deadlock_ring", {"rate_frac": 0.6, "duration_ms": 1.0,
                                         "stop_ms": 0.3, "deadlock_confirm_us": 50.0,
                                         **FAST_WD, **params})
        sc.fabric.run(sc.duration_ps)
        return sc

    clean = run({})
    sc = run({"fault": "flap:node=4,port=0,mtbf_us=40,mttr_us=10,until_us=250",
              "detect_us": 10, "converge_us": 5})
    want = tuple((s, 1, 3) for s in range(4))
    dls = sc.info["deadlock_detector"].deadlocks
    assert dls and dls[0].cycle == want == clean.info["deadlock_detector"].deadlocks[0].cycle
    # found and broken by the watchdog within detection + one poll + restore, as without
    # faults (tests/test_sim_pfc_failures.py); the flap only moves the onset
    assert all(d.cleared_ps - d.onset_ps <= 100 * US + 50 * US + 200 * US for d in dls)
    assert len(dls) == len(clean.info["deadlock_detector"].deadlocks)
    assert sc.fabric.fault_log.drops["link_down"] > 0
    assert sum(w.triggers for w in sc.info["watchdogs"]) >= 4


_RAIL_FILE = """[run]
duration_ms = 0.3
[topology]
kind = "rail"
nodes = 2
gpus_per_node = 2
spines = 1
[hosts]
reliable = true
ack_timeout = 1
retry_cnt = 1
[[collective]]
size = "1M"
iters = 2
failover = true
[[faults]]
kind = "nic_down"
rank = 1
at_us = 5.0
"""


def test_fabric_file_collective_failover_key(tmp_path) -> None:
    f = tmp_path / "r.toml"
    f.write_text(_RAIL_FILE)
    sc = build(str(f))
    sc.fabric.run(sc.duration_ps)
    s = sc.info["collectives"][0].summary()
    assert s["complete"] and s["iterations_done"] == 2 and s["error"] is None
    assert len(s["failovers"]) == 2 and "failed" not in s
    assert sc.params["collective"][0]["failover"] is True
    off = tmp_path / "o.toml"
    off.write_text(_RAIL_FILE.replace("failover = true\n", ""))
    sc = build(str(off))
    sc.fabric.run(sc.duration_ps)
    s = sc.info["collectives"][0].summary()
    assert "failovers" not in s and s["failed"]["t_ps"] > 5 * US
    assert "failover" not in sc.params["collective"][0]  # off: params as before


def test_lossless_collective_p_fault_with_a_fabric_file(tmp_path) -> None:
    from sim.cli import main
    f = tmp_path / "r.toml"
    f.write_text(_RAIL_FILE.split("[[collective]]")[0])
    path = tmp_path / "r.json"
    rc = main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--fabric", str(f), *NET,
               "-p", "fault=nic_down:rank=1,at_us=5", "-p", "failover=true",
               "--json", str(path)])
    r = json.loads(path.read_text())["results"][0]
    assert rc == 0 and r["error"] is None and len(r["failovers"]) == 2


def test_slow_pcie_on_flows_in_a_fabric_file(tmp_path) -> None:
    """A 100 Gb/s flow into a Gen5 x16 host whose PCIe runs at 20 Gb/s from 100 to 200 us:
    the NIC writes one 1024-byte payload (a 1082-byte frame less 58 header bytes) every
    1024 x 8 / 20 Gb/s = 409.6 ns, so 50 us / 409.6 ns = 122.07 frames per 50 us (PFC holds
    the sender back); after 200 us the flow is back near line rate."""
    f = tmp_path / "p.toml"
    f.write_text('[run]\nduration_ms = 0.3\n[topology]\nkind = "star"\nhosts = 2\n'
                 '[hosts]\npcie_gen = 5\n[[flows]]\nsrc = 1\ndst = 2\n'
                 '[[faults]]\nkind = "slow_pcie"\nnode = 2\nrate_gbps = 20.0\n'
                 'at_us = 100.0\nuntil_us = 200.0\n')
    sc = build(str(f))
    fab, h = sc.fabric, sc.fabric.nodes[2]
    got = []
    for t_us in (150, 200, 250, 300):
        fab.run(t_us * US)
        got.append(sum(h.rx_bytes.values()))
    assert abs((got[1] - got[0]) / 1082 - 50 * US / 409_600) <= 1
    assert (got[3] - got[2]) * 8 / (50 * US) * 1e3 > 90  # Gb/s
    assert [e["what"] for e in fab.fault_log.events] == ["pcie", "pcie"]


@settings(max_examples=8, deadline=None)
@given(rank=st.integers(0, 3), at_us=st.integers(0, 12), retry=st.integers(0, 1))
def test_failover_property_any_nic_any_time(rank, at_us, retry) -> None:
    """Any rank's NIC down at any time of a 2 x 2 rail AllReduce with failover: it completes
    with the right result, every moved QP re-sends exactly what had not arrived, and no QP
    moves onto the dead NIC."""
    from sim.fabric.faults import Fault, schedule_faults
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import build_fabric, collective_params
    from sim.workloads.collective import CollectiveJob
    from sim.workloads.nccl import schedule, verify
    p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 2,
                                             "reliable": True, "ack_timeout": 1,
                                             "retry_cnt": retry})
    rf = build_fabric("rail", p)
    fab = rf.fabric
    dead = rf.ranks[rank]
    schedule_faults(fab, [Fault("nic_down", dead, at_ps=at_us * US)])
    sch = schedule("allreduce", 4, 2**17, "float", nchannels=2, gpus_per_node=2)
    job = CollectiveJob(sch, fab, rf.ranks, gpus_per_node=2, failover=True)
    seen = {}
    orig = job._failover

    def spy(key, fid, now):
        seen[fid] = (job.run.posted_bytes[fid], fab.nodes[fab.flows[fid].dst].rx_bytes.get(
            fid, 0))
        return orig(key, fid, now)

    job._failover = spy
    job.start()
    fab.run(10**9)
    assert job.done and job.failed is None
    verify(sch, sorted(range(len(sch.transfers)), key=lambda i: (job.run.start_ps[i], i)))
    for m in job.run.failovers:
        posted, got = seen[m["qp"]]
        assert m["resent_bytes"] == posted - got
        assert dead not in (m["from_host"], m["to_host"])


def test_control_frames_lost_at_a_dead_nic_belong_to_no_flow(tmp_path) -> None:
    """RC ACKs queued at a NIC when it goes down never left it: their Dropped events have
    flow -1, so every data flow (the failed QPs too) balances and replay exits 0."""
    from sim.cli import main
    f = tmp_path / "r.toml"
    f.write_text(_RAIL_FILE)
    out = tmp_path / "o"
    assert main(["replay", str(f), "--out", str(out), "--no-plots", "--no-capture",
                 "--no-baseline"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert not s.get("problems") and s["totals"]["dropped_packets_by_reason"]["link_down"]


def test_replay_of_a_failed_collective_exits_1_with_one_line(tmp_path, capsys) -> None:
    from sim.cli import main
    f = tmp_path / "r.toml"
    f.write_text(_RAIL_FILE.replace("failover = true\n", ""))
    out = tmp_path / "o"
    assert main(["replay", str(f), "--out", str(out), "--no-plots", "--no-capture",
                 "--no-baseline"]) == 1
    last = capsys.readouterr().err.splitlines()[-1]
    s = json.loads((out / "summary.json").read_text())
    c = s["collectives"][0]
    assert last == f"lossless: [[collective]] #1: {c['error']}"
    assert c["error"].startswith("iteration 1: failed at ") and c["failed"]["qp"] == 257


def test_a_fabric_files_straggler_applies_to_lossless_collective(tmp_path) -> None:
    from sim.cli import main
    f = tmp_path / "s.toml"
    f.write_text('[topology]\nkind = "star"\nhosts = 4\n[[faults]]\nkind = "straggler"\n'
                 'node = 2\ndelay_us = 7.0\n')  # host 2 is rank 1
    path = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-b", "256K", "-e", "256K", "--fabric", str(f),
                 *NET, "--timeline-rank", "1", "--json", str(path)]) == 0
    tl = json.loads(path.read_text())["results"][0]["timeline"]
    assert min(x["start_ps"] for x in tl if x["dir"] == "send") == 7 * US
    # with NCCL's host side the delay adds to its launch and step latencies
    assert main(["collective", "allreduce", "-b", "256K", "-e", "256K", "--fabric", str(f),
                 "--timeline-rank", "1", "--json", str(path)]) == 0
    tl = json.loads(path.read_text())["results"][0]["timeline"]
    assert min(x["start_ps"] for x in tl if x["dir"] == "send") > 7 * US
    f.write_text(f.read_text().replace("node = 2", "node = 99"))
    assert main(["collective", "allreduce", "-b", "256K", "-e", "256K", "--fabric",
                 str(f)]) == 2

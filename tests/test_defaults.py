"""Defaults that follow the set-up: the switch buffer derived from the ports and their rate."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.scenarios.base import ScenarioError
from sim.scenarios.common import (
    BUFFER_BYTES_PER_GBPS,
    FABRIC_PARAMS,
    default_buffer_bytes,
    mmu_config,
)
from sim.scenarios.description import build as build_file
from sim.units import gbps

_LEAF_SPINE_400G = {
    "run": {"duration_ms": 0.002},
    "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 8, "hosts_per_leaf": 8},
    "links": {"link_gbps": 400.0},
    "traffic": {"pattern": "shift"},
}


def _knobs(**kw):
    p = {k: q.default for k, q in FABRIC_PARAMS.items()}
    p.update(kw)
    return p


@given(ports=st.integers(1, 256), rate_gbps=st.sampled_from([10, 25, 40, 100, 200, 400, 800]),
       cable_m=st.integers(0, 5000), packet=st.integers(64, 9216), pfc=st.booleans(),
       xoff_kb=st.floats(0.1, 5000))
def test_the_default_buffer_follows_capacity_and_always_fits(ports, rate_gbps, cable_m,
                                                             packet, pfc, xoff_kb):
    rate = gbps(rate_gbps)
    p = _knobs(link_gbps=float(rate_gbps), cable_m=cable_m, packet_bytes=packet, pfc=pfc,
               xoff_kb=xoff_kb)
    assert p["buffer_kb"] == 0.0  # the default: derived
    cfg, hr = mmu_config(p, ports, rate)  # never refused
    by_capacity = ports * rate_gbps * BUFFER_BYTES_PER_GBPS
    need = ports * (8 * cfg.reserved_bytes + len(cfg.lossless_pgs) * hr) + cfg.xoff_bytes
    # at least a static XOFF threshold on every port: the pool never fills before them
    floor = ports * (8 * cfg.reserved_bytes + len(cfg.lossless_pgs) * hr + cfg.xoff_bytes)
    assert cfg.buffer_bytes == -(-max(by_capacity, floor) // 1000) * 1000 >= need
    assert cfg.buffer_bytes == default_buffer_bytes(ports, rate, floor)
    # a buffer given is kept exactly, or refused naming the key
    given_kb = cfg.buffer_bytes / 1000 + 1
    assert mmu_config({**p, "buffer_kb": given_kb}, ports, rate)[0].buffer_bytes == \
        round(given_kb * 1000)
    if need > 1000:
        with pytest.raises(ScenarioError, match="'buffer_kb'"):
            mmu_config({**p, "buffer_kb": (need - 1000) / 1000}, ports, rate)


def test_a_400g_leaf_spine_file_without_buffer_kb_runs():
    sc = build_file(_LEAF_SPINE_400G, "ls400.toml")
    mmu = sc.fabric.nodes[0].mmu.config
    assert mmu.ports == 16
    assert mmu.buffer_bytes == 16 * 400 * BUFFER_BYTES_PER_GBPS  # 32 MB
    assert sc.params["switch"]["buffer_kb"] == 0.0
    # a file that gives buffer_kb keeps it, and a small one is refused in one line
    doc = {**_LEAF_SPINE_400G, "switch": {"buffer_kb": 2000.0}}
    assert build_file(doc, "f.toml").fabric.nodes[0].mmu.config.buffer_bytes == 2_000_000
    with pytest.raises(ScenarioError, match=r"buffer_kb.*16 ports.*need 1210.24 KB"):
        build_file({**_LEAF_SPINE_400G, "switch": {"buffer_kb": 1000.0}}, "f.toml")


@pytest.mark.parametrize("links", [{"flow_control": "credit"}, {"flow_control": "ib"},
                                   {"fabric": "ib"}])
def test_credit_fabric_files_without_buffer_kb_hold_their_credit_limits(links):
    doc = {**_LEAF_SPINE_400G, "links": {"link_gbps": 400.0, **links}}
    sc = build_file(doc, "f.toml")
    assert sc.fabric.nodes[0].mmu.config.buffer_bytes >= 16 * 400 * BUFFER_BYTES_PER_GBPS


@pytest.mark.parametrize("name, params", [
    ("incast", {"senders": 32}),
    ("incast", {"senders": 16, "link_gbps": 400.0}),
    ("incast", {"cable_m": 1000}),
    ("incast", {"senders": 64, "fabric": "ib"}),
    ("leaf_spine", {"hosts_per_leaf": 30, "spines": 8, "link_gbps": 800.0}),
    ("sue_packing", {"xpus": 128}),
    ("sue_packing", {"xpus": 128, "flow_control": "cbfc"}),
])
def test_builtins_with_many_or_fast_ports_build_on_the_default_buffer(name, params):
    from sim.scenarios import get

    sc = get(name).builder(params)
    assert sc.params["buffer_kb"] == 0.0


# --------------------------------------------------------------------------- ECN before PFC
@given(xoff_kb=st.floats(0.1, 5000), kmin_kb=st.floats(0, 50), mode=st.sampled_from(
    ["static", "dynamic"]), kmax=st.one_of(st.just(-1.0), st.floats(50, 1000)))
def test_the_default_kmax_is_at_most_the_static_xoff(xoff_kb, kmin_kb, mode, kmax):
    from sim.scenarios.common import DCQCN_KMAX_KB, ecn_config

    p = _knobs(xoff_kb=xoff_kb, kmin_kb=kmin_kb, kmax_kb=kmax, xoff_mode=mode)
    ecn = ecn_config(p)
    if kmax >= 0:  # given: kept
        assert ecn.kmax_bytes == round(kmax * 1000)
        return
    want = DCQCN_KMAX_KB if mode == "dynamic" else min(DCQCN_KMAX_KB, xoff_kb)
    assert ecn.kmax_bytes == round(max(kmin_kb, want) * 1000)
    assert ecn.kmin_bytes <= ecn.kmax_bytes
    if mode == "static" and xoff_kb >= kmin_kb:  # every frame marked before XOFF
        assert ecn.probability(round(xoff_kb * 1000) + 1) == 1.0


def test_bad_kmax_is_named():
    from sim.scenarios import get

    with pytest.raises(ScenarioError, match="kmax_kb"):
        get("incast").builder({"kmax_kb": -2.0})
    with pytest.raises(ScenarioError, match="kmin_kb"):
        get("incast").builder({"kmin_kb": 30.0, "kmax_kb": 20.0})


def _incast(tmp_path, **params):
    import json

    from sim.study.results import run_scenario

    out = tmp_path / "_".join(f"{k}{v}" for k, v in params.items())
    s = run_scenario("incast", {"duration_ms": 0.4, **params}, out_dir=str(out), plots=False,
                     write_captures=False)
    events = [json.loads(line) for line in open(out / "events.jsonl")]
    pauses = [e["t_ps"] for e in events if e["event"] == "PauseSent"]
    cuts = sum(1 for e in events if e["event"] == "RateChanged"
               and e["rate_bps"] < 100_000_000_000)
    return s, pauses, cuts


def test_incast_with_dcqcn_on_the_defaults_lets_dcqcn_hold_the_queue(tmp_path):
    """`lossless replay incast -p cc=dcqcn`: CNPs and rate cuts, PFC only in the first
    microseconds, far fewer PAUSE frames than the same incast without DCQCN."""
    _, plain_pauses, _ = _incast(tmp_path)
    s, pauses, cuts = _incast(tmp_path, cc="dcqcn")
    assert s["totals"]["cnps"] > 0 and cuts > 0
    assert len(pauses) < len(plain_pauses) / 2
    assert max(pauses) < 200 * 10**6  # none in the second half of the run
    assert max(plain_pauses) > 390 * 10**6  # without DCQCN PFC acts to the end
    assert s["totals"]["drops"] == 0


# --------------------------------------------------------------------------- late mechanisms
def _late(name, **params):
    from sim.scenarios.loader import build
    from sim.scenarios.timing import late_mechanisms

    return late_mechanisms(build(name, params))


def test_watchdog_on_the_defaults_acts_within_the_run(tmp_path):
    """`lossless replay pfc_storm -p watchdog=true`: the watchdog triggers and restores, with
    no warning; a real switch's timing (wd_preset) cannot act in 2 ms and says so."""
    from sim.study.results import run_scenario

    warned = []
    s = run_scenario("pfc_storm", {"watchdog": True}, out_dir=str(tmp_path / "wd"),
                     plots=False, write_captures=False, warn=warned.append)
    assert s["watchdog"]["triggers"] > 0 and s["watchdog"]["restores"] > 0
    assert warned == [] and "warnings" not in s
    [line] = _late("pfc_storm", watchdog=True, wd_preset="sonic")
    assert "wd_preset 'sonic'" in line and "400 ms" in line and "2 ms (duration_ms)" in line
    [line] = _late("pfc_storm", watchdog=True, wd_preset="juniper")
    assert "300 ms" in line  # poll 100 ms: the first after the stall, then 2 more


def test_nic_watchdog_on_the_defaults_acts_within_the_run(tmp_path):
    from sim.study.results import run_scenario

    s = run_scenario("pfc_storm", {"nic_watchdog": True, "duration_ms": 0.5},
                     out_dir=str(tmp_path / "nic"), plots=False, write_captures=False,
                     warn=lambda m: pytest.fail(m))
    # the NIC stopped pausing: the stalled frames are dropped, the fabric drains
    assert s["totals"]["dropped_packets_by_reason"].get("rx_stalled", 0) > 1
    [line] = _late("pfc_storm", nic_watchdog=True, nic_timeout_ms=8000.0)
    assert line.startswith("warning: pfc_storm: nic_timeout_ms (8 s)") and "2 ms" in line


@pytest.mark.parametrize("params, needle", [
    ({"stall_ms": 3.0}, "stall_ms: the NIC's receive side stalls at 3 ms"),
    ({"watchdog": True, "wd_restore_ms": 5.0}, "wd_restore_ms: "),
    ({"watchdog": True, "duration_ms": 0.2}, "wd_poll_ms, wd_detect_polls: the PFC watchdog "
     "can act at 400 us"),
    ({"fault": "loss:node=2,port=3,at_us=5000,loss_rate=0.1"},
     "fault #1 (loss) at_us: it starts at 5 ms"),
    ({"fault": "link_down:node=2,port=3,at_us=100"},
     "detect_us + converge_us (60 ms): the switches reroute around fault #1 (link_down) at "
     "60.1 ms"),
])
def test_each_late_mechanism_is_one_line_naming_its_parameter(params, needle):
    from sim.scenarios.timing import show_time

    lines = _late("pfc_storm", **params)
    assert len(lines) == 1 and needle in lines[0], lines
    end = show_time(round(params.get("duration_ms", 2.0) * 10**9))
    assert lines[0].endswith(f"the run ends at {end} (duration_ms)")


def test_deadlock_detector_and_dcqcn_timers():
    [line] = _late("pfc_deadlock_ring", duration_ms=0.5)
    assert "deadlock_confirm_us (0: 2 x the longest pause, 671.1 us)" in line
    assert _late("pfc_deadlock_ring", duration_ms=0.5, pfc=False) == []  # nothing pauses
    assert _late("pfc_unfairness", duration_ms=0.3) == []  # not a deadlock study
    assert _late("incast", cc="dcqcn", preset="nvidia", duration_ms=0.2) == []
    [line] = _late("incast", cc="dcqcn", preset="nvidia", duration_ms=0.1)
    assert "rate_increase_period_ps (300 us; byte_counter_bytes 2097088: 167.8 us" in line


def test_file_flows_collectives_and_faults_after_the_end(tmp_path):
    f = tmp_path / "late.toml"
    f.write_text('[run]\nduration_ms = 0.1\n[topology]\nkind = "star"\nhosts = 4\n'
                 '[[flows]]\nsrc = 1\ndst = 2\nstart_us = 150.0\n'
                 '[[collective]]\nstart_us = 200.0\n'
                 '[[faults]]\nkind = "nic_down"\nnode = 3\nat_us = 120.0\n')
    lines = _late(str(f))
    assert [x.split(": ", 2)[2].split(";")[0] for x in lines] == [
        "fault #1 (nic_down) at_us: it starts at 120 us",
        "flow 0 (1 -> 2) start_us: it starts at 150 us",
        "[[collective]] #1 start_us: it starts at 200 us"]
    assert all(x.endswith("the run ends at 100 us ([run] duration_ms)") for x in lines)


def test_replay_prints_the_warning_and_writes_it_to_summary_json(tmp_path, capsys):
    import json

    from sim.cli import main

    out = tmp_path / "o"
    assert main(["replay", "pfc_storm", "-p", "duration_ms=0.2", "-p", "watchdog=true",
                 "--no-plots", "--no-capture", "--out", str(out)]) == 0
    err = capsys.readouterr().err.splitlines()
    warn = [x for x in err if x.startswith("lossless: warning")]
    assert len(warn) == 1 and warn[0].startswith("lossless: warning: pfc_storm: wd_poll_ms")
    s = json.loads((out / "summary.json").read_text())
    assert s["warnings"] == [warn[0].removeprefix("lossless: ")]


@settings(max_examples=6, deadline=None)
@given(poll_us=st.integers(20, 150), polls=st.integers(1, 3), stall_us=st.integers(0, 150))
def test_the_watchdog_never_acts_before_its_earliest_time(poll_us, polls, stall_us):
    """The time the warning is based on is a true bound: no trigger comes earlier."""
    from sim.scenarios.loader import build

    sc = build("pfc_storm", {"watchdog": True, "wd_poll_ms": poll_us / 1000,
                             "wd_detect_polls": polls, "stall_ms": stall_us / 1000,
                             "duration_ms": 0.45})
    cfg = sc.info["watchdogs"][0].config
    sc.fabric.run(sc.duration_ps)
    first = min((h[0] for wd in sc.info["watchdogs"] for h in wd.history), default=None)
    assert first is None or first >= cfg.earliest_trigger_ps(stall_us * 10**6)


# --------------------------------------------------------------------------- collective star
@pytest.mark.parametrize("nodes, gpn", [(1, 8), (2, 4), (4, 2), (8, 1)])
def test_star_honours_nodes_and_gpus_per_node(nodes, gpn, tmp_path):
    """`--fabric star -p nodes=1 -p gpus_per_node=8` is one node of 8 GPUs (NVLink, nothing
    on the switch), not 8 nodes of one GPU."""
    import json

    from sim.cli import main

    js = tmp_path / "r.json"
    assert main(["collective", "allreduce", "--fabric", "star", "-p", f"nodes={nodes}", "-p",
                 f"gpus_per_node={gpn}", "-p", "link_gbps=100", "-b", "256K", "-e", "256K",
                 "--channels", "2", "--json", str(js), "--quiet"]) == 0
    doc = json.loads(js.read_text())
    assert (doc["nranks"], doc["nodes"], doc["gpus_per_node"]) == (8, nodes, gpn)
    row = doc["results"][0]
    assert row["wrong"] == 0
    assert (row["nvlink_bytes"] > 0) == (gpn > 1)
    if nodes == 1:  # every hop over NVLink: no frame crosses the switch
        assert row["counters"]["max_queue_bytes"] == 0


def test_star_refuses_spines_and_uneven_nodes(capsys):
    from sim.cli import main
    from sim.fabric.rail import collective_star

    assert main(["collective", "allreduce", "--fabric", "star", "-p", "spines=2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "-p spines" in err and "--fabric star" in err
    with pytest.raises(ValueError, match="gpus_per_node 3 does not divide the 8 ranks"):
        collective_star(8, gpus_per_node=3)


# ------------------------------------------------------------- collective --fabric FILE.toml
_LS_FILE = ('[topology]\nkind = "leaf_spine"\nleaves = 2\nspines = 1\nhosts_per_leaf = 4\n'
            '[links]\nlink_gbps = 100.0\n[switch]\nmtu_bytes = 4154\n')


def _coll_file(tmp_path, text, *params):
    import json

    from sim.cli import main

    f = tmp_path / "fab.toml"
    f.write_text(text)
    js = tmp_path / "r.json"
    rc = main(["collective", "allreduce", "--fabric", str(f), "-b", "256K", "-e", "256K",
               "--channels", "2", "--json", str(js), "--quiet",
               *[x for kv in params for x in ("-p", kv)]])
    return rc, (json.loads(js.read_text()) if rc == 0 else None)


def test_collective_on_a_leaf_spine_file_takes_gpus_per_node(tmp_path, capsys):
    rc, plain = _coll_file(tmp_path, _LS_FILE)
    assert rc == 0 and (plain["nodes"], plain["gpus_per_node"]) == (8, 1)
    assert plain["results"][0]["nvlink_bytes"] == 0
    rc, doc = _coll_file(tmp_path, _LS_FILE, "gpus_per_node=4")
    assert rc == 0 and (doc["nranks"], doc["nodes"], doc["gpus_per_node"]) == (8, 2, 4)
    row = doc["results"][0]
    assert row["wrong"] == 0 and row["nvlink_bytes"] > 0
    capsys.readouterr()
    for bad, why in (("gpus_per_node=3", "3 does not divide the 8 hosts"),
                     ("gpus_per_node=0", "gpus_per_node")):
        rc, _ = _coll_file(tmp_path, _LS_FILE, bad)
        err = capsys.readouterr().err
        assert rc == 2 and err.count("\n") == 1 and why in err, err


def test_collective_on_a_rail_file_keeps_its_own_nodes(tmp_path, capsys):
    rail = ('[topology]\nkind = "rail"\nnodes = 2\ngpus_per_node = 4\nspines = 1\n'
            '[links]\nlink_gbps = 100.0\n[switch]\nmtu_bytes = 4154\n')
    rc, doc = _coll_file(tmp_path, rail, "gpus_per_node=4")
    assert rc == 0 and doc["gpus_per_node"] == 4
    capsys.readouterr()
    rc, _ = _coll_file(tmp_path, rail, "gpus_per_node=2")
    err = capsys.readouterr().err
    assert rc == 2 and "rail topology has nodes of 4 GPUs" in err and err.count("\n") == 1

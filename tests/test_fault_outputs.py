"""Fault outputs: summary.json ``faults`` (sim.study.fault_report) and
faults_timeline.png (sim.study.fault_plot), with scripted timelines and exact expectations."""

import json
import os

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from sim.study.fault_report import (
    RECOVERY_TOLERANCE,
    compare_completion,
    conservation_problems,
    fault_intervals,
    recovery,
)

US = 10**6

_HEAD = """[run]
duration_ms = {dur}
seed = 1
[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
ecmp = true
"""
_FLOWS = """[[flows]]
src = 4
dst = 6
rate_gbps = {rate}
size_kb = {size}
[[flows]]
src = 5
dst = 7
rate_gbps = {rate}
size_kb = {size}
"""
#: leaf 2's link to spine 1 (both flows hash to it) down at 100 us, up at 200 us; reroute
#: after 10 + 10 us.
_DOWN = """[[faults]]
kind = "link_down"
node = 2
port = 3
at_us = 100.0
until_us = 200.0
detect_us = 10.0
converge_us = 10.0
"""
_LOSS = """[hosts]
reliable = true
ack_timeout = 2
[[faults]]
kind = "loss"
node = 2
port = 3
at_us = 20.0
loss_rate = 0.01
"""


def _file(tmp_path, *, dur=0.3, rate=50.0, size=0.0, faults=_DOWN, name="f.toml"):
    f = tmp_path / name
    f.write_text(_HEAD.format(dur=dur) + _FLOWS.format(rate=rate, size=size) + faults)
    return f


def _run(path, out, **kw):
    from sim.study.results import run_scenario

    kw.setdefault("plots", False)
    return run_scenario(str(path), out_dir=str(out), write_captures=False, progress=False,
                        **kw)


# ------------------------------------------------------------------------------ intervals
def test_link_down_gives_an_interval_from_its_start_with_the_reroute() -> None:
    ev = [{"t_ps": 100 * US, "what": "link_down", "node": 2, "port": 3},
          {"t_ps": 120 * US, "what": "reroute", "switches": [1, 2, 3]},
          {"t_ps": 200 * US, "what": "link_up", "node": 2, "port": 3},
          {"t_ps": 220 * US, "what": "reroute", "switches": [1, 2, 3]},
          {"t_ps": 250 * US, "what": "rate", "node": 1, "port": 0, "rate_bps": 50 * 10**9},
          {"t_ps": 260 * US, "what": "loss_start", "node": 1, "port": 1},
          {"t_ps": 270 * US, "what": "rate", "node": 1, "port": 0, "rate_bps": 10**11}]
    assert fault_intervals(ev, 300 * US) == [
        {"kind": "link_down", "node": 2, "port": 3, "start_ps": 100 * US, "end_ps": 200 * US,
         "time_to_reroute_ps": 20 * US},
        {"kind": "degrade", "node": 1, "port": 0, "rate_bps": 50 * 10**9,
         "start_ps": 250 * US, "end_ps": 270 * US, "time_to_reroute_ps": None},
        {"kind": "loss", "node": 1, "port": 1, "start_ps": 260 * US, "end_ps": None,
         "time_to_reroute_ps": None}]


def test_fabric_file_link_down_report(tmp_path) -> None:
    s = _run(_file(tmp_path), tmp_path / "o")
    f = s["faults"]
    assert [(e["t_ps"], e["what"]) for e in f["events"]] == [
        (100 * US, "link_down"), (120 * US, "reroute"), (200 * US, "link_up"),
        (220 * US, "reroute")]
    (iv,) = f["intervals"]
    assert (iv["kind"], iv["node"], iv["port"], iv["start_ps"], iv["end_ps"],
            iv["time_to_reroute_ps"]) == ("link_down", 2, 3, 100 * US, 200 * US, 20 * US)
    # flow 0 hashes to spine 1: it loses everything until the reroute, then shares spine 0
    # with flow 1 at its full 50G (flow 1 is not affected): back within a bin or two (1.5 us)
    # of the reroute, before the link is: 0 from the fault's end
    assert iv["affected_flows"] == [0] and iv["recovered"]
    assert 120 * US <= iv["recovered_at_ps"] <= 120 * US + 2 * f["bin_ps"]
    assert iv["recover_from_ps"] == 200 * US and iv["time_to_recover_ps"] == 0
    drops = s["totals"]["dropped_packets_by_reason"]
    assert f["drops"]["packets_by_reason"] == {"link_down": drops["link_down"]}
    # RC (on by default): the receiver drops the frames that arrive after the gap, until
    # the NAK's resends come
    assert set(drops) <= {"link_down", "out_of_sequence"}
    assert f["conservation"]["balanced"] and "problems" not in s
    links = {(x["node"], x["port"]): x["role"] for x in f["links"]}
    assert links == {(2, 3): "faulted", (1, 0): "faulted", (2, 2): "ecmp sibling"}
    with np.load(tmp_path / "o" / "timeseries.npz") as z:
        lost = z["fault_lost_frames"]
        assert lost.sum() == drops["link_down"]
        assert z["fault_link_n2_p3_tx_bytes"].sum() == next(
            p["tx_bytes"] for p in s["ports"] if (p["node"], p["port"]) == (2, 3))
        bins = np.flatnonzero(lost)  # frames are lost only from the fault to the reroute
        assert bins[0] * f["bin_ps"] <= 100 * US < (bins[0] + 1) * f["bin_ps"]
        assert bins[-1] * f["bin_ps"] <= 120 * US


# ------------------------------------------------------------------------------ recovery
@given(pre=st.integers(1, 20), start_bin=st.integers(1, 30), dip=st.integers(1, 40),
       level=st.floats(0.0, 0.85), rate=st.integers(1000, 10**6),
       offset=st.integers(0, 999))
def test_recovery_time_is_the_first_bin_back(pre, start_bin, dip, level, rate,
                                             offset) -> None:
    bin_ps = 1000
    nb = start_bin + dip + 10
    g = np.full((nb, 2), rate, dtype=np.int64)
    g[start_bin:start_bin + dip, 0] = int(rate * level)
    start = start_bin * bin_ps + offset
    r = recovery(g, bin_ps, start, [None, None], [7, 8], pre_bins=pre)
    assert r["affected_flows"] == [7] and r["recovered"]
    assert r["time_to_recover_ps"] == (start_bin + dip) * bin_ps - start
    assert r["recovered_at_ps"] == (start_bin + dip) * bin_ps
    # counted from the fault's end instead: never negative
    end = start + offset * dip
    r = recovery(g, bin_ps, start, [None, None], [7, 8], pre_bins=pre, from_ps=end)
    assert r["recovered_at_ps"] == (start_bin + dip) * bin_ps
    assert r["time_to_recover_ps"] == max(0, (start_bin + dip) * bin_ps - end)


@given(stall_from=st.integers(0, 50), stall_len=st.integers(0, 50), fault_end=st.integers(0, 120),
       slow=st.sampled_from([0.0, 0.05, 0.5]))
def test_collective_recovers_when_its_lag_stops_growing(stall_from, stall_len, fault_end,
                                                        slow) -> None:
    """A run that falls behind the fault-free one by 1 ps per ps over [stall_from, stall_end)
    and by ``slow`` per ps in a second iteration: back at the first edge at or after the
    fault's end and the stall's end, unless the second iteration runs at less than 90 % of
    the fault-free pace."""
    from sim.study.fault_report import progress_recovery
    bin_ps = 10
    t = np.arange(0, 201) * bin_ps
    stall_end = stall_from + stall_len
    first = (0, 1000 + stall_len * bin_ps)  # iteration 1 (with the stall), then iteration 2
    second = (1500, 2000)
    act = np.clip(t, *first) - first[0] + np.clip(t, *second) - second[0]
    lag = np.clip(t - stall_from * bin_ps, 0, stall_len * bin_ps) + slow * (
        np.clip(t, *second) - second[0])
    base = [(0, 1000), (1100, 1100 + round((second[1] - second[0]) / (1 + slow)))]
    r = progress_recovery(t, act, lag, fault_end * bin_ps, [first, second], base,
                          min_active_ps=bin_ps)
    back = max(fault_end, stall_end if stall_len else 0) * bin_ps
    if slow > RECOVERY_TOLERANCE or back >= second[1]:  # slow to the end, or after the work
        assert r == {"time_to_recover_ps": None, "recovered_at_ps": None, "recovered": False}
        return
    assert r["recovered"] and r["recovered_at_ps"] == back
    assert r["time_to_recover_ps"] == back - fault_end * bin_ps


def test_recovery_unaffected_never_back_and_completed_flows() -> None:
    g = np.full((20, 1), 100, dtype=np.int64)
    assert recovery(g, 10, 55, [None], [1])["time_to_recover_ps"] == 0
    g[5:, 0] = 0
    r = recovery(g, 10, 55, [None], [1])
    assert r == {"affected_flows": [1], "pre_fault_bps": 80 * 10**12,
                 "time_to_recover_ps": None, "recovered_at_ps": None, "recovered": False}
    # a flow that completed at 80 ps no longer counts: recovered when it is done
    r = recovery(g, 10, 55, [80], [1])
    assert r["recovered"] and r["time_to_recover_ps"] == 80 - 55
    # within the tolerance is not a dip
    g[5:, 0] = round(100 * (1 - RECOVERY_TOLERANCE))
    assert recovery(g, 10, 55, [None], [1])["affected_flows"] == []
    assert "why" in recovery(g, 10, 5, [None], [1])  # no bin before the fault


# ------------------------------------------------------------------ completion vs baseline
def test_baseline_completion_not_after_faulted(tmp_path) -> None:
    # 1.5 MB per flow at 50G, RC with a 16 us ACK timeout: the flows complete, one later
    rc = "[hosts]\nreliable = true\nack_timeout = 2\n"
    s = _run(_file(tmp_path, size=1500.0, faults=rc + _DOWN), tmp_path / "o")
    c = s["faults"]["completion"]
    assert c["baseline"] == "run"
    w = c["workload"]
    assert w["complete"] and w["baseline_complete"]
    assert w["baseline_ps"] <= w["faulted_ps"] and w["extra_ps"] == w["faulted_ps"] - \
        w["baseline_ps"] > 0 and w["ratio"] > 1
    for f in c["flows"]:
        assert f["baseline_ps"] <= f["faulted_ps"]
    # the baseline is the same file without its faults: its completion is the fault-free one
    clean = _run(_file(tmp_path, size=1500.0, faults=rc, name="clean.toml"), tmp_path / "c")
    assert "faults" not in clean
    assert max(f["fct_ps"] for f in clean["flows"]) == w["baseline_ps"]
    nob = _run(_file(tmp_path, size=1500.0, faults=rc + _DOWN), tmp_path / "n",
               baseline=False)
    assert nob["faults"]["completion"]["baseline"] == "not run"
    assert nob["faults"]["completion"]["workload"]["baseline_ps"] is None
    assert nob["faults"]["completion"]["workload"]["faulted_ps"] == w["faulted_ps"]


def test_collective_completion_against_fault_free(tmp_path) -> None:
    coll = """[[collective]]
collective = "allreduce"
size = "256K"
"""
    f = tmp_path / "c.toml"
    f.write_text(_HEAD.format(dur=0.5) + coll + _DOWN)
    s = _run(f, tmp_path / "o")
    (c,) = s["faults"]["completion"]["collectives"]
    assert c["entry"] == 1 and c["baseline_complete"]
    assert c["faulted_ps"] is None or c["baseline_ps"] <= c["faulted_ps"]


def test_compare_completion_without_baseline() -> None:
    fig = {"flows": {1: {"last_delivery_ps": 5, "delivered_bytes": 9, "complete": True}},
           "last_delivery_ps": 5}
    out = compare_completion(fig, {"flows": {1: {"last_delivery_ps": 4, "delivered_bytes": 9,
                                                 "complete": True}}, "last_delivery_ps": 4})
    assert out["workload"] == {"faulted_ps": 5, "baseline_ps": 4, "extra_ps": 1, "ratio": 1.25,
                               "complete": True, "baseline_complete": True}
    assert compare_completion(fig, None)["workload"]["ratio"] is None


# ------------------------------------------------------------- retransmission, conservation
def test_retransmitted_bytes_equal_the_rc_counters_and_flows_balance(tmp_path) -> None:
    s = _run(_file(tmp_path, dur=0.2, faults=_LOSS), tmp_path / "o")
    r = s["faults"]["retransmitted"]
    rc = {f["id"]: f["rc"] for f in s["flows"]}
    assert r["bytes"] == sum(x["retransmitted_bytes"] for x in rc.values()) > 0
    assert r["packets"] == sum(x["retransmitted_frames"] for x in rc.values())
    assert {x["id"]: x["retransmitted_bytes"] for x in r["flows"]} == {
        k: v["retransmitted_bytes"] for k, v in rc.items()}
    with np.load(tmp_path / "o" / "timeseries.npz") as z:
        assert z["fault_retx_bytes"].sum() == r["bytes"]
        assert z["fault_timeouts"].sum() == r["timeouts"]
        assert z["fault_lost_frames"].sum() == s["totals"]["dropped_packets_by_reason"][
            "corrupt"]
    cons = s["faults"]["conservation"]
    assert cons["balanced"] and "problems" not in s
    for c in cons["flows"]:
        assert c["unaccounted_packets"] == c["unaccounted_bytes"] == 0
        assert c["retransmitted_bytes"] == rc[c["id"]]["retransmitted_bytes"]


def test_a_broken_counter_is_reported_loudly(tmp_path, capsys) -> None:
    from sim.cli import main
    from sim.scenarios.loader import build
    from sim.study.results import run_scenario

    # unreliable hosts: the conservation check reads sent_packets (RC's: its sender's count)
    path = _file(tmp_path, dur=0.05, faults="[hosts]\nreliable = false\n")
    sc = build(str(path))
    sc.fabric.nodes[4].sent_packets[0] += 1  # a frame counted as sent that never was
    seen = []
    s = run_scenario(sc, out_dir=str(tmp_path / "o"), plots=False, write_captures=False,
                     progress=False, warn=seen.append)
    assert len(s["problems"]) == 1 and seen == s["problems"]
    assert s["problems"][0].startswith("flow 0: conservation: sent ")
    assert "(1 packets / 0 bytes unaccounted)" in s["problems"][0]
    on_disk = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert on_disk["problems"] == s["problems"]
    flows = [dict(f) for f in s["flows"]]
    flows[1]["delivered_bytes"] -= 3
    assert [p.split(":")[0] for p in conservation_problems(flows)] == ["flow 0", "flow 1"]
    # the command line: one stderr line for it, exit 1, results written
    # (a sender that counts one packet more than it sent: Host is an extension type in the
    # compiled core, so the fabric's add_flow, which hands the flow to it, does the counting)
    from sim.fabric.core import Fabric

    orig = Fabric.add_flow

    def add_flow(self, flow, *a, **kw):
        out = orig(self, flow, *a, **kw)
        self.nodes[flow.src].sent_packets[flow.id] += 1
        return out

    capsys.readouterr()
    try:
        Fabric.add_flow = add_flow
        code = main(["replay", str(path), "--out", str(tmp_path / "cli"), "--no-plots",
                     "--no-capture"])
    finally:
        Fabric.add_flow = orig
    err = capsys.readouterr().err.splitlines()
    assert code == 1
    bad = [x.split(": sent")[0] for x in err if "conservation" in x]
    assert bad == ["lossless: flow 0: conservation", "lossless: flow 1: conservation"]


# ----------------------------------------------------------------------------- the plot
def test_plot_written_atomically_and_only_with_faults(tmp_path, monkeypatch) -> None:
    import wire.atomic

    written = []
    real = wire.atomic.atomic_file

    def spy(path, *a, **kw):
        written.append(os.path.basename(path))
        return real(path, *a, **kw)

    monkeypatch.setattr(wire.atomic, "atomic_file", spy)
    _run(_file(tmp_path), tmp_path / "o", plots=True, baseline=False)
    assert "faults_timeline.png" in written
    assert (tmp_path / "o" / "faults_timeline.png").stat().st_size > 10_000
    assert not [n for n in os.listdir(tmp_path / "o") if "partial" in n]
    written.clear()
    _run(_file(tmp_path, faults="", name="clean.toml"), tmp_path / "c", plots=True)
    assert written and "faults_timeline.png" not in written
    assert not (tmp_path / "c" / "faults_timeline.png").exists()


def test_plot_reads_as_a_network_engineer_would(tmp_path) -> None:
    import matplotlib.pyplot as plt

    from sim.study.plot import figures, texts

    _run(_file(tmp_path, faults=_DOWN + "[hosts]\nreliable = false\n"), tmp_path / "o")
    figs = figures(tmp_path / "o")
    try:
        t = texts(figs["faults_timeline.png"])
    finally:
        for fig in figs.values():
            plt.close(fig)
    for want in ("link down", "reroute", "throughput (Gb/s)", "time (µs)",
                 "goodput, all flows", "frames lost to the faults",
                 "RC reliability off: lost frames are not resent",
                 "shaded: from each fault to the recovery of its flows' goodput"):
        assert want in t, (want, t)
    assert any("ECMP sibling" in x for x in t) and any("<->" in x for x in t)


def test_cli_no_baseline(tmp_path) -> None:
    from sim.cli import main

    f = _file(tmp_path, dur=0.15)
    for flag, want in (([], "run"), (["--no-baseline"], "not run")):
        out = tmp_path / f"o{len(flag)}"
        assert main(["replay", str(f), "--out", str(out), "--no-plots", "--no-capture",
                     *flag]) == 0
        s = json.loads((out / "summary.json").read_text())
        assert s["faults"]["completion"]["baseline"] == want


def test_recovery_dips_after_the_fault_belong_to_a_later_one() -> None:
    g = np.full((40, 1), 100, dtype=np.int64)
    g[30:32, 0] = 0  # a later fault's dip: not this one's (it ended at 120 ps)
    r = recovery(g, 10, 105, [None], [1], until_ps=120)
    assert r["affected_flows"] == [] and r["time_to_recover_ps"] == 0
    assert recovery(g, 10, 105, [None], [1])["time_to_recover_ps"] == 320 - 105

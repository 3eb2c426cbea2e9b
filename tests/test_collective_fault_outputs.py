"""Fault outputs of ``lossless collective`` (docs/reference/collective-results.md, "The faults
block"): per size the ``faults`` block of results.json (the time against the same size
without the faults, the stall, bytes retransmitted, drops by reason, time to recover, per-QP
conservation, QP error and failover), the footer of the table, and ``faults_timeline.png``
in ``--out`` only with faults."""

from __future__ import annotations

import json
import os
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main

US = 10**6
#: Ring Simple on the network alone (no NCCL host side): the fault windows below fall on
#: the first sends, and the figures are the network's
NET = ["--algo", "ring", "--proto", "simple", "-p", "nccl_host=false"]
#: a 2-node x 2-GPU rail fabric: ranks 0..3 on hosts 3..6; node 4 port 0 is r1 <-> leaf1
RAIL = ["-p", "nodes=2", "-p", "gpus_per_node=2", *NET]
#: RC with a short timer: 4.096 us x 2^1 = 8.192 us, three retries
RC = ["-p", "reliable=true", "-p", "ack_timeout=1", "-p", "retry_cnt=3"]
#: rank 1's link down from 5 to 8 us
DOWN = ["-p", "fault=link_down:node=4,port=0,at_us=5,until_us=8"]
#: the out-of-place time of AllReduce 1 MiB on RAIL without faults
FAULT_FREE_PS = 18_656_740
#: payload bytes of one frame (4154-byte frames, 58 bytes of RoCEv2 headers)
PAYLOAD_BYTES = 4096


def _run(tmp_path, *extra, name="r.json", size="1M", rail=True):
    path = tmp_path / name
    rc = main(["collective", "allreduce", "-b", size, "-e", size, *(RAIL if rail else NET),
               *extra,
               "--json", str(path)])
    return rc, json.loads(path.read_text())


def test_no_fault_no_faults_block(tmp_path) -> None:
    rc, doc = _run(tmp_path, *RC)
    r = doc["results"][0]
    assert rc == 0 and "faults" not in r and r["time_ps"] == FAULT_FREE_PS


def test_link_down_stall_against_the_fault_free_run(tmp_path, capsys) -> None:
    rc, doc = _run(tmp_path, *RC, *DOWN)
    out = capsys.readouterr().out
    r = doc["results"][0]
    f = r["faults"]
    assert rc == 0 and f["baseline"] == "run" and f["complete"]
    t = f["time"]
    # the fault-free run is the run without -p fault: same seed, same time
    assert t["baseline_ps"] == FAULT_FREE_PS
    assert t["faulted_ps"] == r["time_ps"] == 24_494_212
    assert t["stall_ps"] == t["faulted_ps"] - t["baseline_ps"] == 5_837_472 > 0
    # with faults no in-place iterations (they would run after the fault): N/A
    assert r["inplace"] is None and f["inplace_time"] is None
    assert f["total_time"]["stall_ps"] == t["stall_ps"]
    assert [(e["t_ps"], e["what"]) for e in f["events"]] == [(5 * US, "link_down"),
                                                             (8 * US, "link_up")]
    # every frame lost is a drop by reason link_down; the data frames are all resent
    assert f["drops"]["packets_by_reason"] == {"link_down": 88}
    assert r["counters"]["drops"] == 88  # the counters table counts them too
    cons = f["conservation"]
    assert cons["balanced"] and not cons["unbalanced_flows"] and f["problems"] == []
    assert cons["dropped_packets"] == f["retransmitted"]["packets"] == 95
    assert cons["dropped_bytes"] == f["retransmitted"]["bytes"] == 394_630
    assert cons["sent_packets"] == cons["delivered_packets"] + cons["dropped_packets"]
    assert cons["in_flight_packets"] == 0
    # one iteration: 3 MiB across the nodes (2 ring edges x 1.5 MiB), whole frames
    assert cons["delivered_packets"] == 3 * 2**20 // PAYLOAD_BYTES
    assert {q["id"] for q in cons["flows"]} == {257, 260}  # the two QPs through rank 1's link
    [iv] = f["intervals"]
    assert (iv["kind"], iv["node"], iv["port"], iv["start_ps"], iv["end_ps"]) == \
        ("link_down", 4, 0, 5 * US, 8 * US)
    # from the link's return (8 us) the run falls behind until the resends after the NAKs
    # (11.5 us) and again at the end, when the two QPs' resent data arrive last: it is never
    # seen back at the fault-free pace in this one iteration
    assert iv["recover_from_ps"] == 8 * US and not iv["recovered"]
    assert iv["time_to_recover_ps"] is None and iv["recovered_at_ps"] is None
    assert f["failed"] is None and f["failovers"] == {"count": 0, "resent_bytes": 0}
    # the footer: time, fault-free, stall (us), bytes resent, recovery, balance, drops
    line = next(x for x in out.splitlines() if x.startswith("#    1048576") and "link_down" in x)
    assert line.split()[1:8] == ["1048576", "24.494", "18.657", "5.837", "394630", "-", "ok"]
    # the in-place half of the table: N/A, and why in the footer
    row = next(x for x in out.splitlines() if x.startswith("     1048576"))
    assert row.split()[-4:] == ["N/A"] * 4
    assert "# in-place: N/A: with faults only the out-of-place iterations run" in out


def test_incomplete_collective_says_when_in_us_what_was_lost_and_the_remedy(tmp_path,
                                                                             capsys) -> None:
    """Without RC the frames the link loses are never resent: the size is incomplete at the
    run's bound (in us or ms), with the drops the faults caused and the remedy; with RC on
    and too short a bound, the QPs whose ACK timer would have recovered the loss after it.
    With NCCL's ACK timeout, a smaller one is suggested too."""
    rc, doc = _run(tmp_path, *DOWN, "-p", "reliable=false", "-p", "limit_ms=0.5",
                   "--no-baseline", name="a.json")
    r = doc["results"][0]
    assert rc == 1 and r["counters"]["drops"] == 86
    assert r["error"] == ("iteration 1: collective incomplete after 500 us: 88 of 96 "
                          "transfers received (pauses 0, drops 86); lost frames are not resent "
                          "with reliable off (-p reliable=true, or [hosts] reliable = true in "
                          "a fabric file)")
    assert sum(r["faults"]["drops"]["packets_by_reason"].values()) == 86
    out = capsys.readouterr().out
    assert f"#    1048576  {r['error']}" in out
    counters = next(x for x in out.splitlines() if x.startswith("#    1048576         2"))
    assert counters.split()[7] == "86"  # the drops column
    rc, doc = _run(tmp_path, *RC, *DOWN, "-p", "limit_ms=0.01", "--no-baseline",
                   name="b.json")
    err = doc["results"][0]["error"]
    m = re.fullmatch(
        r"iteration 1: collective incomplete after 10 us: 32 of 96 transfers received "
        r"\(pauses 0, drops 88\); 4 QPs wait for the local ACK timeout \(ack_timeout 1: "
        r"4\.096 us x 2\^1; the first expires ([\d.]+) us after the start\): a larger -p "
        r"limit_ms waits for it", err)
    # a timer armed by a send before the 10 us bound: 8.192 us after it, past the bound; no
    # "smaller ack_timeout" (1 is the least)
    assert rc == 1 and m and 10 < float(m.group(1)) < 10 + 8.192


def test_recover_is_from_the_faults_end_to_the_fault_free_pace(tmp_path, capsys) -> None:
    """README's example at 1 MiB: rank 0's NIC down 20-30 us near the end of a 22.6 us
    AllReduce with a 65.5 us ACK timeout.  The other channels finish, the two QPs of that
    NIC wait for the timeout (resend at about 20 + 65.5 us), so the run is behind the
    fault-free one until that channel is done (88.44 us).  With one iteration it is never
    seen back at the fault-free pace ('-'); with two, it is from the end of the first one:
    recover = that time less the fault's end, not the first bin in which some goodput came
    back (0.48 us before)."""
    fault = ["-p", "reliable=true", "-p", "ack_timeout=4", "-p",
             "fault=nic_down:rank=0,at_us=20,until_us=30"]
    rc, doc = _run(tmp_path, *fault, rail=False)
    f = doc["results"][0]["faults"]
    [iv] = f["intervals"]
    assert rc == 0 and f["time"]["stall_ps"] == 65_902_466
    assert iv["recover_from_ps"] == 30 * US and not iv["recovered"]
    assert iv["time_to_recover_ps"] is None and iv["recovered_at_ps"] is None
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.startswith("#    1048576") and "link_down" in x)
    assert line.split()[6] == "-"
    rc, doc = _run(tmp_path, *fault, "-n", "2", rail=False, name="two.json")
    # (the second iteration is the fault-free one's: the same time)
    f = doc["results"][0]["faults"]
    [iv] = f["intervals"]
    end1 = doc["results"][0]["iteration_times_ps"][0]  # the first iteration starts at 0
    assert rc == 0 and end1 == 88_443_860 and iv["recovered"]
    assert 20 * US + 4096 * 2**4 * 1000 < iv["recovered_at_ps"] <= end1 + f["bin_ps"]
    assert iv["recovered_at_ps"] >= end1 - 3 * f["bin_ps"]
    assert iv["time_to_recover_ps"] == iv["recovered_at_ps"] - 30 * US
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.startswith("#    1048576") and "link_down" in x)
    assert line.split()[6] == f"{iv['time_to_recover_ps'] / 1e6:.3f}"


def test_baseline_is_fault_free_and_no_baseline_skips_it(tmp_path) -> None:
    import sim.cli.collective as cli
    import sim.scenarios.collective as sc

    calls = []
    real = sc.run_size

    def spy(*a, **kw):
        calls.append(kw.get("faults", True))
        return real(*a, **kw)

    cli_run = cli.run_size
    cli.run_size = spy
    try:
        _, doc = _run(tmp_path, *RC, *DOWN, name="a.json")
        assert calls == [False, True]  # the fault-free run first, then the faulted one
        calls.clear()
        rc, nob = _run(tmp_path, *RC, *DOWN, "--no-baseline", name="b.json")
        assert calls == [True]
    finally:
        cli.run_size = cli_run
    f = nob["results"][0]["faults"]
    assert rc == 0 and f["baseline"] == "not run"
    assert f["time"]["baseline_ps"] is None and f["time"]["stall_ps"] is None
    # the same faulted run either way
    assert f["time"]["faulted_ps"] == doc["results"][0]["faults"]["time"]["faulted_ps"]
    # the same intervals; their recovery is against the fault-free run: none without it
    [iv] = f["intervals"]
    assert iv == {**doc["results"][0]["faults"]["intervals"][0], "time_to_recover_ps": None,
                  "recovered_at_ps": None, "recovered": False,
                  "why": "no fault-free run (--no-baseline)"}


def test_qp_error_and_failover_figures(tmp_path, capsys) -> None:
    nic = ["-p", "reliable=true", "-p", "ack_timeout=1", "-p", "retry_cnt=1",
           "-p", "fault=nic_down:rank=1,at_us=5"]
    rc, doc = _run(tmp_path, *nic, name="a.json")
    f = doc["results"][0]["faults"]
    assert rc == 1 and not f["complete"] and f["failed"]["qp"] == 257
    assert f["time"]["faulted_ps"] is None and f["time"]["stall_ps"] is None
    assert f["end_ps"] == f["failed"]["t_ps"]
    assert f["retransmitted"]["qp_errors"] >= 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "QP 257" in err  # the failure line, no conservation one
    rc, doc = _run(tmp_path, *nic, "-p", "failover=true", name="b.json")
    f = doc["results"][0]["faults"]
    # docs/explanation/faults.md: 2 QPs moved, 182,776 + 211,854 bytes re-sent
    assert rc == 0 and f["complete"] and f["failovers"] == {"count": 2,
                                                             "resent_bytes": 394_630}
    assert f["conservation"]["balanced"]
    assert f["time"]["stall_ps"] == f["time"]["faulted_ps"] - FAULT_FREE_PS > 0


def test_straggler_only_is_reported(tmp_path) -> None:
    rc, doc = _run(tmp_path, "-p", "fault=straggler:rank=1,delay_us=10")
    f = doc["results"][0]["faults"]
    assert rc == 0 and f["events"] == [] and f["drops"]["packets_by_reason"] == {}
    [iv] = f["intervals"]
    assert (iv["kind"], iv["rank"], iv["node"], iv["delay_ps"], iv["start_ps"]) == \
        ("straggler", 1, 4, 10 * US, 0)
    _, plain = _run(tmp_path, name="plain.json")  # RC by default: the same fault-free time
    assert f["time"]["baseline_ps"] == plain["results"][0]["time_ps"] == FAULT_FREE_PS
    assert f["time"]["stall_ps"] >= 10 * US  # its first sends start 10 us late


def test_unbalanced_qp_is_one_line_and_exit_1(tmp_path, capsys, monkeypatch) -> None:
    """A drop the counters miss (here: the drop counter made blind) leaves a QP whose sent
    != delivered + dropped + in flight: one stderr line, exit 1, the results written."""
    from sim.study.fault_report import DropCounter

    monkeypatch.setattr(DropCounter, "emit", lambda self, e: None)
    rc, doc = _run(tmp_path, *RC, *DOWN)
    f = doc["results"][0]["faults"]
    assert rc == 1 and not f["conservation"]["balanced"]
    assert f["conservation"]["unbalanced_flows"] == [257, 260]
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    assert err[0].startswith("lossless: size 1048576: flow 257: conservation: sent ")
    assert err[0].endswith("(and 1 more QPs)")


def test_faults_timeline_png_only_with_faults_and_atomic(tmp_path, monkeypatch) -> None:
    base = ["collective", "allreduce", "-b", "1M", "-e", "1M", *RAIL, *RC]
    assert main([*base, "--out", str(tmp_path / "plain")]) == 0
    assert "faults_timeline.png" not in os.listdir(tmp_path / "plain")
    assert main([*base, *DOWN, "--out", str(tmp_path / "f")]) == 0
    png = tmp_path / "f" / "faults_timeline.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # written whole or not at all: a failing figure leaves no folder and no temp file
    import sim.study.fault_plot as fp

    def boom(*a, **kw):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fp, "collective_fault_figure", boom)
    before = set(os.listdir(tmp_path))
    assert main([*base, *DOWN, "--out", str(tmp_path / "g")]) == 2
    assert set(os.listdir(tmp_path)) == before


def test_faults_timeline_texts(tmp_path) -> None:
    """The figure names the link, the stall and the fault-free run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    import sim.study.fault_plot as fp
    from sim.study.plot import texts

    seen = {}
    real = fp.collective_fault_figure

    def keep(*a, **kw):
        fig = real(*a, **kw)
        seen["texts"] = texts(fig)
        return fig

    fp.collective_fault_figure = keep
    try:
        assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "-n", "2", *RAIL, *RC,
                     *DOWN, "--out", str(tmp_path / "f")]) == 0
    finally:
        fp.collective_fault_figure = real
        plt.close("all")
    t = seen["texts"]
    assert "h4 <-> leaf1" in t and "fault-free run, same iteration" in t and "link down" in t
    # the mean of the two iterations in the title, the first one's stall on its arrow
    assert any("stall +2.919 µs (x1.16)" in x for x in t) and "+5.837 µs" in t
    assert "frames lost to the faults (88)" in t and "frames retransmitted (RC, 95)" in t
    assert "shaded: from each fault to the recovery of the goodput" in t


# ------------------------------------------------------------------ the probe's bins
class _Node:
    def __init__(self, eng, per_ps):
        self.eng, self.per_ps, self.ports = eng, per_ps, {}

    @property
    def rx_bytes(self):
        return {1: self.eng.now_ps // self.per_ps}


class _Flow:
    dst = 0


class _Fab:
    def __init__(self, per_ps):
        from sim.engine import Engine

        self.engine = Engine()
        self.nodes = {0: _Node(self.engine, per_ps)}
        self.flows = {1: _Flow()}


@given(end_ps=st.integers(1, 10**8), first=st.integers(1, 5000), nbins=st.integers(2, 12),
       per=st.integers(1, 997))
def test_probe_bins_double_and_keep_exact_samples(end_ps, first, nbins, per) -> None:
    """Whatever the run's length: nbins..2 nbins whole bins of first x 2^k, each row the
    counter at its bin's end, the last one at the end of the run."""
    from sim.study.fault_report import CollectiveProbe

    fab = _Fab(per)
    p = CollectiveProbe(fab, nbins=nbins, first_bin_ps=first)
    fab.engine.run(until_ps=end_ps)
    p.finish()
    b = p.bin_ps
    assert b % first == 0 and (b // first) & (b // first - 1) == 0  # first x 2^k
    assert p.full == end_ps // b and (b == first or nbins <= p.full < 2 * nbins)
    edges = p.edges_ps()
    assert int(edges[-1]) == end_ps and len(edges) == p.row + 1
    t, got = p.delivered()
    assert got == [x // per for x in t]



_FILE = """[run]
duration_ms = 0.3
[topology]
kind = "rail"
nodes = 2
gpus_per_node = 2
spines = 1
[hosts]
reliable = true
ack_timeout = 1
retry_cnt = 3
[[faults]]
kind = "link_down"
node = 4
port = 0
at_us = 5.0
until_us = 8.0
[[faults]]
kind = "straggler"
rank = 2
delay_us = 3.0
at_us = 30.0
"""


def test_fabric_file_faults_and_stragglers_are_reported(tmp_path) -> None:
    """--fabric FILE.toml with [[faults]]: the fault-free run leaves them all out (the same
    time as the file without them), the link fault and the file's straggler are intervals."""
    f = tmp_path / "f.toml"
    f.write_text(_FILE)
    g = tmp_path / "g.toml"
    g.write_text(_FILE.split("[[faults]]")[0])
    rc, doc = _run(tmp_path, "--fabric", str(f), name="a.json", rail=False)
    _, clean = _run(tmp_path, "--fabric", str(g), name="b.json", rail=False)
    r, c = doc["results"][0], clean["results"][0]
    assert "faults" not in c
    t = r["faults"]["time"]
    assert rc == 0 and t["baseline_ps"] == c["time_ps"] and t["stall_ps"] > 0
    assert r["faults"]["inplace_time"] is None and r["inplace"] is None
    assert [(iv["kind"], iv["start_ps"]) for iv in r["faults"]["intervals"]] == [
        ("link_down", 5 * US), ("straggler", 30 * US)]
    assert r["faults"]["conservation"]["balanced"]


@settings(max_examples=5)
@given(at_ns=st.integers(0, 12_000), down_ns=st.integers(100, 4_000))
def test_any_link_down_window_balances_and_stalls_only_after_it(tmp_path_factory, at_ns,
                                                                down_ns) -> None:
    """Rank 1's link down at any time of the first iteration, for any length: every QP
    balances (sent = delivered + dropped + in flight), the data frames lost are all resent
    (RC), the fault-free time is the one without faults, and the stall is never negative."""
    tmp = tmp_path_factory.mktemp("w")
    fault = (f"fault=link_down:node=4,port=0,at_us={at_ns / 1000},"
             f"until_us={(at_ns + down_ns) / 1000}")
    rc, doc = _run(tmp, *RC, "-p", fault)
    f = doc["results"][0]["faults"]
    cons = f["conservation"]
    assert rc == 0 and cons["balanced"] and f["problems"] == []
    assert cons["dropped_packets"] <= f["retransmitted"]["packets"]
    assert cons["delivered_packets"] == 3 * 2**20 // PAYLOAD_BYTES
    assert f["time"]["baseline_ps"] == FAULT_FREE_PS and f["time"]["stall_ps"] >= 0


def test_csv_fault_columns_only_with_faults(tmp_path) -> None:
    import csv

    def table(*extra):
        path = tmp_path / "t.csv"
        assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", *RAIL, *RC, *extra,
                     "--csv", str(path)]) == 0
        return list(csv.DictReader(path.open()))

    [plain] = table()
    assert "stall_us" not in plain
    [row] = table(*DOWN)
    assert {k: row[k] for k in ("fault_free_time_us", "stall_us", "retransmitted_bytes",
                                "fault_drops", "time_to_recover_us", "unbalanced_qps")} == {
        "fault_free_time_us": "18.65674", "stall_us": "5.837472",
        "retransmitted_bytes": "394630", "fault_drops": "88", "time_to_recover_us": "",
        "unbalanced_qps": "0"}
    with open(tmp_path / "t.csv", newline="") as f:  # every column once (was: two
        names = next(csv.reader(f))                   # retransmitted_bytes)
    assert len(names) == len(set(names))
    assert row["time_us"] == "24.494212"


def test_a_fault_after_the_end_is_said_to_have_changed_nothing(tmp_path, capsys) -> None:
    """A fault set to start after the size ended cannot act: its row says so, naming the
    start, instead of a silent 0 stall."""
    rc, doc = _run(tmp_path, "-p", "fault=link_down:node=4,port=0,at_us=500", "--no-baseline")
    assert rc == 0 and doc["results"][0]["faults"]["events"] == []
    line = next(x for x in capsys.readouterr().out.splitlines()
                if x.startswith("#    1048576") and "no drop" in x)
    assert line.endswith("no fault acted before the size ended (the first starts at 500 us)")
    rc, doc = _run(tmp_path, *DOWN, "--no-baseline", name="b.json")
    assert "no fault acted" not in capsys.readouterr().out


def test_a_loss_waiting_for_nccls_ack_timeout_is_named_with_both_remedies(tmp_path) -> None:
    """The AllReduce of docs/explanation/faults.md at loss 1e-3 with go-back-N and NCCL's ACK
    timeout (20: 4.3 s): a loss nothing follows waits for the timer, past the default 100 ms
    bound; the error names the waiting QP, when its timer expires and both remedies."""
    rc, doc = _run(tmp_path, "-p", "fault=loss:node=2,port=0,loss_rate=1e-3", "--no-baseline",
                   size="64M", rail=False)
    err = doc["results"][0]["error"]
    assert rc == 1 and err.startswith("iteration 1: collective incomplete after 100 ms: ")
    m = re.search(r"; 1 QP waits for the local ACK timeout \(ack_timeout 20: 4\.096 us x "
                  r"2\^20; the first expires ([\d.]+) ms after the start\): a larger -p "
                  r"limit_ms waits for it, a smaller -p ack_timeout recovers sooner$", err)
    # 4.096 us x 2^20 = 4294.967 ms after a send inside the 100 ms the run lasted
    assert m and 4294.967 < float(m.group(1)) < 4294.967 + 100

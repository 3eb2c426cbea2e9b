"""What ``lossless collective`` gives its user (docs/reference/collective-results.md): ``--out DIR``
(results.json, results.csv, table.txt, PNGs; written whole or not at all), ``--csv``, the
plots of :mod:`sim.study.collective_plots` (checked through their texts), the per-link and
per-rank data of :mod:`sim.workloads.collective_stats`, the progress line and
``--timeline-rank``.  Tiny fabrics only: one 4-port star at 100 Gb/s, 256K and 512K."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.fabric.rail import collective_star
from sim.workloads.collective import run_schedule
from sim.workloads.collective_stats import link_usage, port_counters, rank_timeline
from sim.workloads.nccl import schedule
from tests.helpers import posted_pair, run_cli

pytest.importorskip("matplotlib")

#: Ring Simple on one channel, the network alone (no NCCL host side): a known traffic
TINY = ["collective", "allreduce", "--fabric", "star", "-p", "nodes=4", "-p",
        "gpus_per_node=1", "-p", "link_gbps=100", "-b", "256K", "-e", "512K", "--channels", "1",
        "--algo", "ring", "--proto", "simple", "-p", "nccl_host=false"]


def _one_line_error(rc: int, out: str, err: str) -> str:
    assert rc == 2, (rc, err)
    assert err.startswith("lossless: ") and err.count("\n") == 1, err
    assert "Traceback" not in err
    return err


@pytest.fixture(scope="module")
def outdir(tmp_path_factory):
    """One tiny run with --out, --json and --csv: (folder, json file, csv file, stdout)."""
    base = tmp_path_factory.mktemp("coll")
    out, js, cs = base / "o", base / "r.json", base / "r.csv"
    rc, stdout, err = run_cli([*TINY, "--out", str(out), "--json", str(js), "--csv", str(cs)])
    assert rc == 0, err
    return out, js, cs, stdout


# ------------------------------------------------------------------ --out, --csv, --json
def test_out_folder_holds_the_results_the_table_and_the_plots(outdir):
    out, js, cs, stdout = outdir
    names = set(os.listdir(out))
    assert names == {".lossless-output", "results.json", "results.csv", "table.txt",
                     "counters.json",
                     "busbw_vs_size.png", "link_utilisation.png", "step_timeline.png"}
    for png in ("busbw_vs_size.png", "link_utilisation.png", "step_timeline.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "table.txt").read_text() == stdout  # the printed table, as printed
    assert (out / "results.json").read_text() == js.read_text()  # the same document
    assert (out / "results.csv").read_text() == cs.read_text()  # --csv alone: the same


def test_csv_columns_equal_the_json_rows(outdir):
    out = outdir[0]
    doc = json.loads((out / "results.json").read_text())
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(doc["results"]) == 2
    assert list(rows[0])[:5] == ["size_bytes", "count", "type", "redop", "root"]
    for c, r in zip(rows, doc["results"], strict=True):
        assert int(c["size_bytes"]) == r["size_bytes"] and int(c["count"]) == r["count"]
        assert (c["type"], c["redop"], int(c["root"])) == ("float", "sum", -1)
        assert float(c["time_us"]) == r["time_us"]
        assert float(c["algbw_GB_per_s"]) == r["algbw_GB_per_s"]
        assert float(c["busbw_GB_per_s"]) == r["busbw_GB_per_s"]
        assert int(c["wrong"]) == r["wrong"] == 0
        ip = r["inplace"]
        assert float(c["inplace_time_us"]) == ip["time_us"]
        assert float(c["inplace_busbw_GB_per_s"]) == ip["busbw_GB_per_s"]
        assert int(c["channels"]) == r["nchannels"] and int(c["transfers"]) == r["transfers"]
        for k, v in r["counters"].items():
            assert int(c[k]) == v
        assert c["error"] == ""
        b = r["busiest_link"]  # the busiest link of each size, its name and utilisation
        assert (c["busiest_link"], float(c["busiest_link_utilisation"])) == (
            b["name"], b["utilisation"])
        assert b["utilisation"] == max(x["utilisation"] for x in doc["results"][1]["links"]
                                       ) or r is doc["results"][0]
    # links and timeline: the largest size only (results.json stays small)
    assert "links" not in doc["results"][0] and doc["results"][1]["links"]
    assert doc["results"][1]["timeline"] and doc["timeline_rank"] == 0


def test_out_refuses_a_users_folder_and_replaces_its_own(tmp_path):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep me")
    rc, out, err = run_cli([*TINY, "--out", str(user)])
    assert "--force" in _one_line_error(rc, out, err)
    assert out == ""  # refused before running
    assert os.listdir(user) == ["notes.txt"] and (user / "notes.txt").read_text() == "keep me"
    # our own earlier output is replaced whole
    ours = tmp_path / "ours"
    assert run_cli([*TINY, "--out", str(ours), "--no-plots"])[0] == 0
    assert run_cli([*TINY[:-4], "-b", "256K", "-e", "256K", "--channels", "1", "--out",
                    str(ours), "--no-plots"])[0] == 0
    doc = json.loads((ours / "results.json").read_text())
    assert [r["size_bytes"] for r in doc["results"]] == [262144]
    assert not (ours / "busbw_vs_size.png").exists()
    assert sorted(os.listdir(tmp_path)) == ["mine", "ours"]  # no temporary folder left
    # --force replaces the user's folder
    assert run_cli([*TINY, "--out", str(user), "--force", "--no-plots"])[0] == 0
    assert not (user / "notes.txt").exists() and (user / "results.csv").exists()


def test_ctrl_c_leaves_nothing_half_written(tmp_path, monkeypatch):
    import sim.cli.collective as cli

    out = tmp_path / "o"
    assert run_cli([*TINY, "--out", str(out), "--no-plots"])[0] == 0
    before = {n: (out / n).read_bytes() for n in os.listdir(out)}
    real = cli.run_size
    calls = []

    def interrupted(*a, **kw):
        calls.append(a[1])
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **kw)

    monkeypatch.setattr(cli, "run_size", interrupted)
    rc, _, err = run_cli([*TINY, "--out", str(out), "--csv", str(tmp_path / "x.csv")])
    assert rc == 130 and "interrupted: nothing written" in err
    assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before
    assert sorted(os.listdir(tmp_path)) == ["o"]


def test_bad_output_paths_are_one_line_errors(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    _one_line_error(*run_cli([*TINY, "--out", str(f)]))
    _one_line_error(*run_cli([*TINY, "--csv", str(tmp_path / "no" / "r.csv")]))
    _one_line_error(*run_cli([*TINY, "--csv", str(tmp_path)]))


@pytest.mark.parametrize("rank, why", [("4", "not one of the 4 ranks"), ("-1", ""),
                                       ("x", "")])
def test_bad_timeline_rank_is_a_one_line_error(rank, why, tmp_path):
    rc, out, err = run_cli([*TINY, "--timeline-rank", rank, "--out", str(tmp_path / "o")])
    assert why in _one_line_error(rc, out, err) and "timeline-rank" in err
    assert not (tmp_path / "o").exists()


def test_timeline_rank_picks_the_rank(tmp_path):
    out = tmp_path / "o"
    assert run_cli([*TINY, "--out", str(out), "--timeline-rank", "2", "--no-plots"])[0] == 0
    doc = json.loads((out / "results.json").read_text())
    tl = doc["results"][-1]["timeline"]
    assert doc["timeline_rank"] == 2
    assert {e["peer"] for e in tl if e["dir"] == "send"} == {3}
    assert {e["peer"] for e in tl if e["dir"] == "recv"} == {1}


# ------------------------------------------------------------------ plots
def _texts(fig) -> list[str]:
    import matplotlib.pyplot as plt

    from sim.study.plot import texts

    fig.canvas.draw()  # tick labels are made when drawn
    t = texts(fig)
    plt.close(fig)
    return t


def test_plots_carry_sizes_bound_tiers_and_rows(outdir):
    from sim.study.collective_plots import figures, load

    figs = figures(load(outdir[0]))
    t = {name: _texts(fig) for name, fig in figs.items()}
    bus = t["busbw_vs_size.png"]
    assert {"256K", "512K", "out-of-place", "in-place"} <= set(bus)
    # the bound: 100 Gb/s = 12.5 GB/s x 4096 of the 4154 + 4 + 8 + 12 bytes on the wire
    assert (f"bound {12.5 * 4096 / 4178:.2f} GB/s: 100 Gb/s NIC x 4096/4178 on the wire "
            f"(58 B RoCE headers + 24 B FCS, preamble, IFG)") in bus
    assert any(s.startswith("busbw (GB/s") for s in bus)
    links = " ".join(t["link_utilisation.png"])
    assert "host->switch: 4 links" in links and "switch->host: 4 links" in links
    assert "busiest link" in links and "% of line rate" in links
    assert "tx bytes / (rate x time)" in links
    assert "h1->switch" in t["link_utilisation.png"]
    tl = t["step_timeline.png"]
    assert {"ch0 send to rank 1", "ch0 recv from rank 3", "copy"} <= set(tl)
    assert "time since the iteration's first send (µs)" in tl


def test_plot_overlays_folders_named_by_what_differs(tmp_path):
    from sim.study.collective_plots import load, overlay_figure

    a, b = tmp_path / "a", tmp_path / "b"
    assert run_cli([*TINY, "--out", str(a), "--no-plots"])[0] == 0
    assert run_cli([*TINY, "--out", str(b), "--no-plots", "--qps", "2", "-p", "pfc=false"]
                   )[0] == 0
    legend = _texts(overlay_figure([load(a), load(b)]))
    assert "qps 1, pfc false" not in legend
    assert {"qps 1, pfc true", "qps 2, pfc false"} <= set(legend)
    assert not any("fabric" in s for s in legend if s.startswith("qps"))
    rc, out, err = run_cli(["plot", str(a), str(b), "-o", str(tmp_path / "cmp.png")])
    assert rc == 0, err
    assert out.strip() == str(tmp_path / "cmp.png")
    assert (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"
    rc, out, err = run_cli(["plot", str(a)])  # one folder: its three PNGs
    assert rc == 0 and (a / "step_timeline.png").exists(), err
    (b / "results.json").write_text("{")
    assert "results.json: not valid JSON" in _one_line_error(*run_cli(["plot", str(a),
                                                                        str(b)]))


def test_bound_names_pcie_when_it_is_lower_and_the_protocol():
    from sim.nic.pcie import PcieLink
    from sim.study.collective_plots import busbw_bound

    doc = {"protocol": "simple", "params": {"link_gbps": 800.0, "packet_bytes": 4154,
                                            "pcie_gen": 5, "pcie_lanes": 16,
                                            "pcie_mps_bytes": 256}}
    value, text = busbw_bound(doc)
    assert value == PcieLink(5, 16, 256).write_bps() / 8e9  # 55.48 GB/s < 98.6 for the NIC
    assert round(value, 2) == 55.48 and "PCIe Gen5 x16 write budget (MPS 256)" in text
    doc["params"]["pcie_gen"] = 0
    assert busbw_bound(doc)[0] == pytest.approx(100 * 4096 / 4178)
    doc["protocol"] = "ll"  # 8 data bytes in each 16-byte line
    value, text = busbw_bound(doc)
    assert value == pytest.approx(50 * 4096 / 4178) and "1/2 (ll flags)" in text


# ------------------------------------------------------------------ collective_stats
def test_link_usage_on_a_star_counts_the_posted_frames():
    f, fab, a, _b, _flow = posted_pair(100, prop_ps=500_000)
    a.post(7, 10 * 1082)
    fab.run(10**7)
    links = {(x["name"], x["peer_name"]): x for x in link_usage(fab, 0, 10**7, ranks=f.ranks)}
    assert set(links) == {("h1", "switch"), ("h2", "switch"), ("switch:p1", "h1"),
                          ("switch:p2", "h2")}
    up, down = links[("h1", "switch")], links[("switch:p2", "h2")]
    assert (up["tier"], down["tier"]) == ("host->switch", "switch->host")
    assert up["tx_bytes"] == down["tx_bytes"] == 10820 and up["tx_packets"] == 10
    assert up["utilisation"] == 10820 * 8 / (100e9 * 10**7 / 10**12)  # bytes / (rate x time)
    # back: one RC ACK (62 bytes), for the message's last frame, which asked for it
    assert links[("h2", "switch")]["tx_bytes"] == links[("switch:p1", "h1")]["tx_bytes"] == 62
    # since a snapshot: only what was sent after it
    snap = port_counters(fab)
    a.post(7, 500)
    fab.run(2 * 10**7)
    again = {x["name"]: x for x in link_usage(fab, 10**7, 2 * 10**7, since=snap)}
    assert again[f"h{a.node_id}"]["tx_bytes"] == 500  # without ranks: the same names
    with pytest.raises(ValueError):
        link_usage(fab, 5, 5)


@given(n=st.integers(2, 6), rank=st.integers(0, 5), channels=st.integers(1, 2))
def test_rank_timeline_is_every_transfer_of_the_rank(n, rank, channels):
    rank %= n
    sch = schedule("allreduce", n, n * 4096, "float", nchannels=channels)
    f = collective_star(n, link_gbps=100)
    run = run_schedule(sch, f.fabric, f.ranks)
    tl = rank_timeline(run, rank)
    assert sorted(e["id"] for e in tl) == sorted(
        t.id for t in sch.transfers if rank in (t.src, t.dst))
    assert all(0 <= e["start_ps"] < e["finish_ps"] <= run.time_ps for e in tl)
    assert json.loads(json.dumps(tl)) == tl
    with pytest.raises(ValueError):
        rank_timeline(run, n)


def test_run_size_details_links_sum_to_the_posted_bytes_of_the_last_iteration():
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"nodes": 4, "gpus_per_node": 1,
                                             "link_gbps": 100, "reliable": False,
                                             "nccl_host": False})
    calls = []  # (unreliable NICs: no ACKs, every byte a NIC sends is data)
    row = run_size("allreduce", 256 << 10, "star", p, algorithm="ring", protocol="simple",
                   channels=1, iters=2, details=True,
                   progress=lambda d, t: calls.append((d, t)))
    assert row["counters"]["pfc_pauses"] == 0  # so every byte a NIC sent is data
    up = sum(x["tx_bytes"] for x in row["links"] if x["tier"] == "host->switch")
    # one iteration: each of 4 ranks sends 2(n-1)/n of 256 KiB in frames of 4096 + 58 B
    assert up == 4 * 6 * (64 << 10) // 4096 * 4154
    assert json.loads(json.dumps(row)) == row
    total = 48 * 4  # 48 transfers x (2 out-of-place + 2 in-place iterations)
    assert calls[-1] == (total, total) and all(t == total for _, t in calls)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    plain = run_size("allreduce", 256 << 10, "star", p, channels=1)
    assert "links" not in plain and "timeline" not in plain


def test_run_size_runs_under_its_gc_thresholds_and_restores_them():
    """run_size raises the collector's thresholds while it runs (GC_THRESHOLDS: a schedule's
    millions of objects), puts the caller's back after, also when it fails."""
    import gc

    from sim.engine import GC_THRESHOLDS
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"nodes": 4, "gpus_per_node": 1,
                                             "link_gbps": 100})
    seen = []
    old = gc.get_threshold()
    gc.set_threshold(700, 10, 9)
    try:
        run_size("allreduce", 64 << 10, "star", p, channels=1,
                 progress=lambda d, t: seen.append(gc.get_threshold()))
        assert seen and set(seen) == {GC_THRESHOLDS}
        assert gc.get_threshold() == (700, 10, 9)
        with pytest.raises(ValueError, match="fabric 'no-such-fabric': one of rail"):
            run_size("allreduce", 64 << 10, "no-such-fabric", p)
        assert gc.get_threshold() == (700, 10, 9)
    finally:
        gc.set_threshold(*old)


# ------------------------------------------------------------------ progress
class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _run_with_stderr(stream, args):
    from sim.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(stream):
        rc = main(args)
    return rc, out.getvalue(), stream.getvalue()


def test_progress_only_on_a_terminal_or_when_asked_never_on_stdout():
    rc, out, err = run_cli(TINY)  # stderr is not a terminal
    assert rc == 0 and err == "" and "size 1/2" not in out
    rc, out, err = run_cli([*TINY, "--progress"])
    assert rc == 0 and "lossless collective: size 2/2 (512 KiB): 96/96 transfers" in err
    assert "size 1/2" not in out and "%)" not in out
    rc, out, err = _run_with_stderr(_Tty(), TINY)
    assert rc == 0 and "\rlossless collective: size 1/2 (256 KiB)" in err
    assert err.endswith("\r")  # the line is erased before the table goes on
    rc, out, err = _run_with_stderr(_Tty(), [*TINY, "--quiet"])
    assert rc == 0 and err == ""


def test_progress_line_is_throttled_but_shows_the_end():
    from sim.cli.collective import Progress

    now = [0.0]
    s = io.StringIO()
    p = Progress(3, s, interval_s=1.0, clock=lambda: now[0])
    cb = p.size(1, 1 << 20)
    for d in range(10):
        cb(d, 10)
    now[0] = 100.0
    cb(10, 10)
    lines = s.getvalue().splitlines()
    assert lines == ["lossless collective: size 2/3 (1 MiB): 0/10 transfers (0%)",
                     "lossless collective: size 2/3 (1 MiB): 10/10 transfers (100%)"]


def test_bound_with_nvlink_counts_the_rails_a_ring_crosses_nodes_on():
    from sim.study.collective_plots import busbw_bound

    nic = 50 * 4096 / 4178  # 400 Gb/s, 4154-byte packets + FCS, preamble, IFG
    doc = {"collective": "allreduce", "algorithm": "ring", "protocol": "simple",
           "channels": 2, "nodes": 2, "gpus_per_node": 8,
           "params": {"link_gbps": 400.0, "packet_bytes": 4154, "nvlink": True,
                      "nvlink_gbps": 3600.0}}
    # channel c crosses the nodes on rail c mod 8: 2 channels load 2 NICs, 16 load 8 twice
    assert busbw_bound(doc, {"nchannels": 2})[0] == pytest.approx(2 * nic)
    assert busbw_bound(doc, {"nchannels": 1})[0] == pytest.approx(nic)
    assert busbw_bound(doc, {"nchannels": 16})[0] == pytest.approx(8 * nic)
    assert busbw_bound(doc, {"nchannels": 12})[0] == pytest.approx(6 * nic)  # ceil(12/8) = 2
    assert "2 channel(s) on 2 rail(s)" in busbw_bound(doc)[1]
    doc["nodes"] = 1  # no network hop: NVLink's 450 GB/s
    assert busbw_bound(doc)[0] == 450.0 and "NVLink" in busbw_bound(doc)[1]
    # NVLS on one node: the switch reduces, so 2 (g - 1) / (g + 1) x NVLink (700 GB/s)
    assert busbw_bound(doc, {"algorithm": "nvls"})[0] == pytest.approx(2 * 7 / 9 * 450)
    # a tree or NVLS tree AllReduce on 2 nodes: 2 (m - 1) / m = 1 buffer out of each node
    # over its 8 NICs: busbw 2 (n - 1) / n x 8 NICs = 15 NICs; a label that fits the figure
    doc["nodes"] = 2
    for algo in ("tree", "nvls_tree"):
        bound, text = busbw_bound(doc, {"algorithm": algo})
        assert bound == pytest.approx(15 * nic) and len(text) < 100
    doc["nodes"], doc["params"]["nvlink"] = 2, False  # every hop over a NIC
    assert busbw_bound(doc, {"nchannels": 2})[0] == pytest.approx(nic)


@pytest.mark.parametrize("extra", [[], ["-p", "nvlink=false"], ["--channels", "4"]])
def test_measured_busbw_stays_below_the_drawn_bound(extra, tmp_path):
    from sim.study.collective_plots import busbw_bound, load

    out = tmp_path / "o"
    rc, _, err = run_cli(["collective", "allreduce", "-b", "4M", "-e", "4M", "-p",
                          "link_gbps=100", "--out", str(out), "--no-plots", *extra])
    assert rc == 0, err
    doc = load(out)
    for r in doc["results"]:
        assert r["busbw_GB_per_s"] <= busbw_bound(doc, r)[0]


def test_a_failed_largest_size_leaves_its_links_to_the_largest_completed(tmp_path,
                                                                          monkeypatch):
    import sim.cli.collective as cli

    real = cli.run_size

    def fail_512k(*a, **kw):
        row = real(*a, **kw)
        if a[1] == 512 << 10:
            row.update(error="iteration 1: made to fail", links=None, timeline=None,
                       busiest_link=None)
        return row

    monkeypatch.setattr(cli, "run_size", fail_512k)
    rc, out, err = run_cli([*TINY, "--out", str(tmp_path / "o"), "--no-plots"])
    assert rc == 1, err
    doc = json.loads((tmp_path / "o" / "results.json").read_text())
    small, large = doc["results"]
    assert small["links"] and small["timeline"] and small["busiest_link"]
    assert "links" not in large and large["busiest_link"] is None
    # the counters table names each size's busiest link, "-" for the failed one
    last = [ln for ln in out.splitlines() if ln.startswith("#     ")][-2:]
    assert last[0].endswith(f"{small['busiest_link']['name']} "
                            f"{100 * small['busiest_link']['utilisation']:.1f}%")
    assert last[1].endswith("  -")


def test_transfer_time_percentiles_by_hand():
    """transfer_time_us: nearest-rank p50/p99 and max of finish - start, µs; unfinished
    transfers are left out; none at all gives None."""
    from types import SimpleNamespace

    from sim.scenarios.collective import transfer_time_us

    run = SimpleNamespace(start_ps=[0] * 100 + [5, None],
                          finish_ps=[(i + 1) * 10**6 for i in range(100)] + [None, None])
    assert transfer_time_us(run) == {"p50": 50.0, "p99": 99.0, "max": 100.0}
    assert transfer_time_us(SimpleNamespace(start_ps=[None], finish_ps=[None])) is None
    one = SimpleNamespace(start_ps=[2_000_000], finish_ps=[5_000_000])
    assert transfer_time_us(one) == {"p50": 3.0, "p99": 3.0, "max": 3.0}


def test_a_size_of_no_element_is_a_row_of_zeros_as_in_nccl_tests(tmp_path):
    """``-b 1``: 1 byte is no float; nccl-tests rounds the size down to whole elements and
    prints a row of size 0; that size sends nothing (it failed reading the links of a run
    with no transfer: 'min() arg is an empty sequence', exit 2)."""
    js = tmp_path / "r.json"
    rc, out, err = run_cli(["collective", "allreduce", "-b", "1", "-e", "4", "-f", "4",
                            "--json", str(js), "--quiet"])
    assert rc == 0, err
    rows = [line.split() for line in out.splitlines() if line and not line.startswith("#")]
    assert [r[:2] for r in rows] == [["0", "0"], ["4", "1"]]
    doc = json.loads(js.read_text())
    assert doc["results"][0]["transfers"] == 0 and doc["results"][0]["error"] is None


def test_options_the_schedule_refuses_are_refused_before_the_table():
    """--algo tree of an AllGather: one line and exit 2 before any table line (the header
    was printed, then the error); AllToAll's header names its point-to-point sends."""
    rc, out, err = run_cli(["collective", "allgather", "--algo", "tree", "-b", "1M", "-e",
                            "1M"])
    assert rc == 2 and out == "" and "tree algorithm is modelled for allreduce only" in err
    rc, out, _ = run_cli(["collective", "alltoall", "-b", "64K", "-e", "64K", "--quiet"])
    assert rc == 0 and "; algo p2p, proto simple," in out.splitlines()[0]


def test_one_node_names_no_busiest_link(tmp_path):
    """Everything over NVLink (one node): no link carried a byte, so no busiest link (it
    printed an idle NIC at 0.0 %)."""
    out = tmp_path / "r.json"
    rc, so, err = run_cli(["collective", "allreduce", "-b", "1M", "-e", "1M", "-p", "nodes=1",
                           "-p", "gpus_per_node=4", "--json", str(out)])
    assert rc == 0, err
    assert so.count("none (NVLink only)") == 1
    assert json.loads(out.read_text())["results"][0]["busiest_link"] is None
    # the link figure says so too (it named an idle NIC at 0.0 %)
    import matplotlib.pyplot as plt

    from sim.study.collective_plots import figures

    d = tmp_path / "o"
    rc, _, err = run_cli(["collective", "allreduce", "-b", "1M", "-e", "1M", "-p", "nodes=1",
                          "-p", "gpus_per_node=4", "--out", str(d), "--no-plots"])
    assert rc == 0, err
    figs = figures(json.loads((d / "results.json").read_text()))
    try:
        title = figs["link_utilisation.png"]._suptitle.get_text()
    finally:
        for f in figs.values():
            plt.close(f)
    assert "no link carried a byte (everything over NVLink)" in title and "0.0%" not in title


def test_progress_line_estimates_the_time_left():
    """After a few seconds of a size the line says how long the rest should take at the
    rate so far: 25 of 100 transfers in 10 s, about 30 s left; 1 of 100 in 100 s, 2 h 45
    min; not before 3 s, nor at the end."""
    from sim.cli.collective import Progress

    now = [0.0]
    s = io.StringIO()
    p = Progress(1, s, interval_s=0.0, clock=lambda: now[0])
    cb = p.size(0, 1 << 20)
    now[0] = 1.0
    cb(5, 100)
    now[0] = 10.0
    cb(25, 100)
    cb2 = p.size(0, 1 << 20)
    now[0] = 110.0
    cb2(1, 100)
    cb2(100, 100)
    lines = s.getvalue().splitlines()
    assert lines[0].endswith("5/100 transfers (5%)")
    assert lines[1].endswith("25/100 transfers (25%), about 30 s left")
    assert lines[2].endswith("1/100 transfers (1%), about 2 h 45 min left")
    assert lines[3].endswith("100/100 transfers (100%)")


def test_a_tier_of_many_links_is_drawn_as_its_sorted_curve():
    """More links in a tier than MAX_BARS: the sorted utilisations as a filled step curve
    whose top is the busiest link's (bars thinner than a pixel would hide it)."""
    import matplotlib.pyplot as plt

    from sim.study.collective_plots import MAX_BARS, figures

    n = MAX_BARS + 100
    links = [{"tier": "host->leaf", "name": f"h{i}", "peer_name": "leaf0", "tx_bytes": 1 + i,
              "utilisation": (0.9 if i == 7 else 0.1), "rate_bps": 400e9} for i in range(n)]
    doc = {"collective": "allreduce", "nranks": n, "fabric": "rail", "params": {},
           "results": [{"size_bytes": 1 << 20, "time_ps": 10**9, "links": links,
                        "busbw_GB_per_s": 1.0, "algbw_GB_per_s": 1.0, "time_us": 1000.0}]}
    fig = figures(doc)["link_utilisation.png"]
    ax = fig.axes[0]
    assert not ax.patches  # no bar a link
    tops = [max(line.get_ydata()) for line in ax.get_lines() if len(line.get_ydata()) > 2]
    assert tops and max(tops) == pytest.approx(90.0)
    plt.close("all")

"""Plots a network engineer reads at a glance: every built-in's figures carry names
the scenario defines (no internal ids), thresholds, units, totals, roles, a zoom where PFC
changes cluster, "no PFC activity" instead of an empty frame, and queue lines to the end of
the run.  Figures are checked through :func:`sim.study.plot.figures` / :func:`sim.study.plot.texts`
(before saving), files through :func:`sim.study.plot.plot_dir`."""

from __future__ import annotations

import functools
import json
import re

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.study.results import run_scenario

pytest.importorskip("matplotlib")

#: Every built-in, with parameters that keep the runs short.
BUILTINS = {
    "incast": {"duration_ms": 0.05},
    "leaf_spine": {"duration_ms": 0.05},
    "ring": {"duration_ms": 0.05},
    "late_joiner": {"duration_ms": 0.3, "join_ms": 0.1},
    "pfc_storm": {"duration_ms": 0.3, "stall_ms": 0.05},
    "pfc_deadlock_ring": {"duration_ms": 0.05, "stop_ms": 0.04},
    "pfc_deadlock_loop": {"duration_ms": 0.05, "stop_ms": 0.04},
    "pfc_unfairness": {"duration_ms": 0.05},
    "sue_packing": {"duration_us": 5.0},
}
#: What internal ids looked like: npz keys (tx_n0_p8_prio3, n3 p0 prio3), "queue 3",
#: "flow 5", "node 0 port 9".
INTERNAL = re.compile(r"\b[nN]\d+[ _]p\d+|prio\d|\b(tx|rx)_|\bqueue \d|\bflow \d|\bnode \d")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """name -> results folder (plots not written; the tests make the figures)."""
    done = {}

    def get(name: str, **extra) -> str:
        key = (name, tuple(sorted(extra.items())))
        if key not in done:
            out = tmp_path_factory.mktemp("plots") / name
            run_scenario(name, params={**BUILTINS[name], **extra}, out_dir=str(out),
                         plots=False, progress=False)
            done[key] = str(out)
        return done[key]
    return get


def _figs(out: str) -> dict:
    import matplotlib.pyplot as plt

    from sim.study.plot import figures

    figs = figures(out)
    for fig in figs.values():
        fig.canvas.draw()  # tick labels are made when drawn
    plt.close("all")
    return figs


@functools.cache
def _texts(out: str) -> dict[str, list[str]]:
    """file name -> the figure's texts (cached: each results folder is plotted once)."""
    from sim.study.plot import texts

    return {name: texts(fig) for name, fig in _figs(out).items()}


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_every_builtin_plots_without_internal_ids(runs, name):
    out = runs(name)
    allt = _texts(out)
    assert {"queue_depth.png", "throughput.png", "pfc.png"} <= set(allt)
    for fname, texts in allt.items():
        bad = [t for t in texts if INTERNAL.search(t)]
        assert not bad, f"{name} {fname}: internal ids in {bad}"
        assert any(name in t for t in texts), f"{fname}: title does not name the scenario"
        assert any("time (µs)" == t for t in texts), f"{fname}: time axis without unit"
    assert "egress queue depth (KB)" in allt["queue_depth.png"]


@pytest.mark.parametrize("name", sorted(BUILTINS))
def test_plot_dir_writes_the_documented_files(runs, name):
    from sim.study.plot import plot_dir

    out = runs(name)
    written = {p.rsplit("/", 1)[-1] for p in plot_dir(out)}
    assert {"queue_depth.png", "throughput.png", "pfc.png"} <= written
    if name == "late_joiner":
        assert "rates.png" in written
    for f in written:
        with open(f"{out}/{f}", "rb") as fp:
            assert fp.read(8) == b"\x89PNG\r\n\x1a\n"


def test_names_come_from_the_scenario(runs):
    """Switch/port/host names as the scenario defines them."""
    t = _texts(runs("incast"))
    assert any("switch:p9 -> receiver" in x for x in t["queue_depth.png"])
    assert "h1 -> receiver" in t["throughput.png"]
    assert any(x.startswith("h1:p0 -> switch") for x in t["pfc.png"])
    t = _texts(runs("leaf_spine"))
    assert any("leaf0:p4 -> spine0" in x for x in t["queue_depth.png"])
    t = _texts(runs("pfc_unfairness"))
    assert any("B:p2 -> R" in x for x in t["queue_depth.png"])


def test_thresholds_drawn_with_labels(runs):
    from sim.study.plot import figures

    t = _texts(runs("incast"))["queue_depth.png"]
    for want in ("Kmin 5 KB", "Kmax 20 KB", "XOFF 22 KB", "XON 20 KB"):
        assert any(want in x for x in t), want
    figs = figures(runs("incast"))
    ys = {round(float(line.get_ydata()[0]), 6) for ax in figs["queue_depth.png"].axes
          for line in ax.lines if len(set(line.get_ydata())) == 1}
    assert {5.0, 22.0, 20.0} <= ys  # Kmax and XON both at 20 KB
    # no ECN and no PFC: no threshold is drawn
    t = _texts(runs("incast", pfc=False, pmax=0.0))["queue_depth.png"]
    assert not [x for x in t if re.search(r"Kmin|Kmax|XOFF|XON", x)]


def test_no_pfc_activity_is_said(runs):
    out = runs("incast", pfc=False)
    with open(f"{out}/summary.json") as f:
        assert json.load(f)["totals"]["pauses"] == 0
    t = _texts(out)
    assert any("no PFC activity" in x for x in t["pfc.png"])
    assert "pfc_timeline.png" not in t


def test_queue_line_reaches_the_end_of_the_run(runs):
    from sim.study.plot import figures

    out = runs("incast")
    ax = figures(out)["queue_depth.png"].axes[0]
    line = next(ln for ln in ax.lines if ln.get_label().endswith(" 3"))  # priority 3
    assert line.get_xdata()[-1] == pytest.approx(50.0)  # 0.05 ms in µs
    assert line.get_ydata()[-1] > 0  # the incast queue is still full at the end


def test_storm_staircase_gets_a_zoom(runs):
    from sim.study.plot import figures

    out = runs("pfc_storm")
    z = np.load(f"{out}/timeseries.npz")
    firsts = [int(z[k][np.nonzero(z[k.replace("_t_ps", "_state")])[0][0]])
              for k in z.files if k.startswith("pfc_rx_") and k.endswith("_t_ps")
              and z[k.replace("_t_ps", "_state")].any()]
    assert len(firsts) >= 3
    fig = figures(out)["pfc_timeline.png"]
    assert len(fig.axes) == 2
    lo, hi = fig.axes[1].get_xlim()
    assert hi - lo < 0.2 * 300  # µs, a fifth of the run at most
    assert lo <= min(firsts) / 1e6 and max(firsts) / 1e6 <= hi
    assert any(x.startswith("first pauses") for x in _texts(out)["pfc_timeline.png"])


def test_roles_in_legends(runs):
    t = _texts(runs("pfc_storm"))
    assert any(x.startswith("culprit (to stalled NIC): ") for x in t["throughput.png"])
    assert any(x.startswith("victim: ") for x in t["throughput.png"])
    assert any(x.startswith("bystander: ") for x in t["throughput.png"])
    t = _texts(runs("pfc_unfairness"))
    assert any(x.startswith("lone sender L: L -> R") for x in t["throughput.png"])
    assert any(x.startswith("victim: ") for x in t["throughput.png"])
    t = _texts(runs("late_joiner"))
    assert any(x.startswith("late joiner: ") for x in t["rates.png"])
    assert any("joins" in x for x in t["rates.png"])


def test_total_throughput_and_capacity(runs):
    from sim.study.plot import figures

    t = _texts(runs("incast"))["throughput.png"]
    assert any(x.startswith("total, all 8 flows") for x in t)
    assert "receiver link capacity 100 Gb/s" in t
    assert any("(Gb/s)" in x for x in t)
    ax = figures(runs("incast"))["throughput.png"].axes[0]
    total = next(ln for ln in ax.lines if ln.get_label().startswith("total"))
    assert total.get_linewidth() > 2 and 80 < float(np.median(total.get_ydata())) <= 100


@given(st.lists(st.floats(0, 1e3), min_size=1, max_size=60), st.integers(1, 25),
       st.integers(0, 59), st.floats(0, 1e3))
def test_moving_average_trails(v, w, j, bump):
    """Each point is the mean of its bin and the w-1 before it (fewer at the start): no bin
    shows before it happens."""
    from sim.study.plot import _moving_average

    v = np.array(v)
    m = _moving_average(v, w)
    for i in range(len(v)):
        assert m[i] == pytest.approx(v[max(0, i - w + 1):i + 1].mean(), rel=1e-9, abs=1e-9)
    j %= len(v)
    later = v.copy()
    later[j] += bump
    assert np.array_equal(_moving_average(later, w)[:j], m[:j])


def test_late_joiner_does_not_rise_before_it_joins(runs):
    """The late joiner's smoothed line is 0 until it joins (0.1 ms of 0.3), and the total
    does not step up before then either."""
    from sim.study.plot import figures

    fig = figures(runs("late_joiner"))["throughput.png"]
    top, per_flow = fig.axes[0], fig.axes[1]
    late = next(ln for ln in per_flow.lines if ln.get_label().startswith("late joiner"))
    x, y = np.asarray(late.get_xdata()), np.asarray(late.get_ydata())
    assert x.min() < 100 < x.max()
    assert not y[x <= 100].any() and y[x > 110].any()
    total = next(ln for ln in top.lines if ln.get_label().startswith("total"))
    tx, ty = np.asarray(total.get_xdata()), np.asarray(total.get_ydata())
    assert ty[tx <= 100].max() <= 41  # one 40 Gb/s flow until the join


def test_many_flows_are_drawn_as_bands(runs):
    t = _texts(runs("incast", senders=20))["throughput.png"]
    assert any(x.startswith("all flows: mean of 20 flows") for x in t)


def test_results_without_labels_still_plot(runs, tmp_path):
    """A results folder written before summary.json had labels (fallback names)."""
    import shutil

    src = runs("incast")
    for f in ("summary.json", "timeseries.npz"):
        shutil.copy(f"{src}/{f}", tmp_path / f)
    s = json.loads((tmp_path / "summary.json").read_text())
    del s["labels"]
    (tmp_path / "summary.json").write_text(json.dumps(s))
    t = _texts(str(tmp_path))
    assert any("node 0:p9" in x for x in t["queue_depth.png"])


def test_labels_of_a_built_scenario():
    from sim.scenarios.loader import build
    from sim.study.labels import labels

    lab = labels(build("pfc_storm", {}, None))
    names = {n["id"]: n["name"] for n in lab["nodes"]}
    assert names[0] == "spine0" and names[2] == "leaf0" and names[4] == "h4"
    roles = {f["id"]: f["role"] for f in lab["flows"]}
    assert roles[0] == "culprit (to stalled NIC)"
    assert lab["markers"] and lab["markers"][0]["label"] == "h7 NIC stalls"
    sw = {s["node"]: s for s in lab["switches"]}[2]
    assert sw["xoff_bytes"] == 22000 and sw["xon_bytes"] == 20000 and sw["kmin_bytes"] is None


# ----------------------------------------------------------------------------- cluster_window


@given(st.lists(st.integers(0, 10**9), min_size=1, max_size=50), st.integers(1, 10**9))
def test_cluster_window_holds_the_cluster(times, duration):
    from sim.study.plot import cluster_window

    times = [t % (duration + 1) for t in times]
    win = cluster_window(times, duration)
    if win is not None:
        lo, hi = win
        assert 0 <= lo < hi <= duration and hi - lo < duration / 2 + 1
        inside = sum(lo <= t <= hi for t in times)
        assert inside >= 0.6 * len(times)


@given(st.integers(10**6, 10**10), st.floats(0.0, 0.9), st.integers(2, 30))
def test_cluster_window_finds_a_burst(duration, where, n):
    from sim.study.plot import cluster_window

    start = int(duration * where)
    burst = [start + i * max(duration // 1000, 1) for i in range(n)]
    lo, hi = cluster_window(burst, duration)
    assert lo <= burst[0] and burst[-1] <= hi
    spread = np.linspace(0, duration, n * 10).astype(np.int64)
    assert cluster_window(spread, duration) is None


# ----------------------------------------------------------------------------- several runs


def test_runs_are_labelled_by_what_differs():
    from sim.study.plot import run_labels

    a = {"scenario": "incast", "seed": 0, "params": {"senders": 8, "pfc": True, "seed": 0}}
    b = {"scenario": "incast", "seed": 0, "params": {"senders": 8, "pfc": False, "seed": 0}}
    assert run_labels([a, b], ["A", "B"]) == ["pfc true", "pfc false"]
    assert run_labels([a, a], ["A", "B"]) == ["A", "B"]  # nothing differs: the folders
    f1 = {"scenario": "f", "seed": 1, "params": {"switch": {"pfc": True, "xoff_kb": 20.0},
                                                 "collective": [{"qps": 1}]}}
    f2 = {"scenario": "f", "seed": 2, "params": {"switch": {"pfc": True, "xoff_kb": 30.0},
                                                 "collective": [{"qps": 4}]}}
    assert run_labels([f1, f2], ["A", "B"]) == ["switch.xoff_kb 20, collective.qps 1, seed 1",
                                                "switch.xoff_kb 30, collective.qps 4, seed 2"]


def test_plot_several_replay_folders_compares_them(runs, tmp_path, monkeypatch):
    """lossless plot A B of two replay folders: one compare.png (it was a usage error naming
    a missing results.json), curves named by the parameter that differs."""
    from sim.cli import main
    from sim.study.plot import compare_figure, texts

    a, b = runs("incast"), runs("incast", pfc=False)
    t = texts(compare_figure([a, b]))
    assert "pfc true" in t and "pfc false" in t
    assert not any(x in t for x in (a.split("/")[-1], b.split("/")[-1]))
    monkeypatch.chdir(tmp_path)
    assert main(["plot", a, b]) == 0
    assert (tmp_path / "compare.png").stat().st_size > 10_000
    assert main(["plot", a, b, "-o", str(tmp_path / "x.png")]) == 0
    assert (tmp_path / "x.png").is_file()
    assert main(["plot", a, "-o", str(tmp_path / "y.png")]) == 2  # -o: several folders

"""Bounded memory through the CLI: series spilled to a temporary file give the same
timeseries.npz, the heap does not grow with the run's length, the temporary file never
outlives the run, long series are decimated for drawing only."""

from __future__ import annotations

import os
import tracemalloc
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import sim.study.results as results
import sim.study.samples as samples
import sim.study.series as series
from sim.events import PauseExpired, PauseReceived, PauseSent, RateChanged
from sim.study.results import Recorder, run_scenario, step_mean
from sim.study.series import SeriesStore, write_npz

# one sample: (kind, key, t step, value); kinds: queue, ingress, a repeat of the key's last
# ingress sample (left out), pfc state, rate
_sample = st.tuples(st.sampled_from(["q", "i", "irep", "ptx", "prx", "rate"]),
                    st.integers(0, 2), st.integers(0, 50), st.integers(0, 10**7))


def _feed(rec: Recorder, stream: list[tuple[str, int, int, int]]) -> dict[str, list]:
    """Feed ``stream`` to ``rec``; return the arrays the old list-based Recorder wrote."""
    ref: dict[str, list] = {}
    last_ingress: dict[int, tuple[int, int]] = {}
    t = 0
    for kind, k, dt, v in stream:
        t += dt
        if kind == "q":
            rec.on_enqueued(t, 1, k, 3, 0, 0, 0, v)
            ref.setdefault(f"queue_n1_p{k}_q3_t_ps", []).append(t)
            ref.setdefault(f"queue_n1_p{k}_q3_bytes", []).append(v)
        elif kind == "irep":
            if k in last_ingress:  # the same time and value again: kept out
                last_t, last_v = last_ingress[k]
                rec.ingress_sample(last_t, 1, k, 3, last_v)
        elif kind == "i":
            if last_ingress.get(k) == (t, v):
                rec.ingress_sample(t, 1, k, 3, v)  # a repeat: kept out
                continue
            last_ingress[k] = (t, v)
            rec.ingress_sample(t, 1, k, 3, v)
            ref.setdefault(f"ingress_n1_p{k}_pg3_t_ps", []).append(t)
            ref.setdefault(f"ingress_n1_p{k}_pg3_bytes", []).append(v)
        elif kind in ("ptx", "prx"):
            on = v % 2
            if kind == "ptx":
                rec.emit(PauseSent(t, 1, k, 3, 65535 * on))
            elif on:
                rec.emit(PauseReceived(t, 1, k, 3, 65535))
            else:
                rec.emit(PauseExpired(t, 1, k, 3))
            name = f"pfc_{kind[1:]}_n1_p{k}_prio3"
            ref.setdefault(f"{name}_t_ps", []).append(t)
            ref.setdefault(f"{name}_state", []).append(on)
        else:
            rec.emit(RateChanged(t, 0, k, v, v // 2 + 1, v / 1e7))
            for suffix, x in (("t_ps", t), ("bps", v), ("target_bps", v // 2 + 1),
                              ("alpha", v / 1e7)):
                ref.setdefault(f"rate_f{k}_{suffix}", []).append(x)
    return ref


def _npz(rec: Recorder, path: str) -> dict[str, np.ndarray]:
    write_npz(path, rec.arrays())
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


@given(st.lists(_sample, max_size=300), st.integers(2, 9), st.sampled_from([1, 2, 3, 32]))
# an ingress repeat checked against a row moved into the series already (and spilled)
@example(stream=[("i", 0, 5, 1), ("i", 0, 5, 2), ("i", 0, 5, 3), ("irep", 0, 0, 0)],
         min_rows=2, buffer_rows=1)
def test_spilled_recorder_writes_the_same_arrays(tmp_path_factory, stream, min_rows,
                                                 buffer_rows):
    """Spilled or not, and whatever the samples' buffer (moves into the columns, spills and
    the ingress repeats checked against a row moved already all meet at small sizes), the
    arrays are those of the old list-based Recorder."""
    saved, samples.SAMPLE_BUFFER_ROWS = samples.SAMPLE_BUFFER_ROWS, buffer_rows
    try:
        _check_spilled(tmp_path_factory, stream, min_rows)
    finally:
        samples.SAMPLE_BUFFER_ROWS = saved


def _check_spilled(tmp_path_factory, stream, min_rows):
    d = str(tmp_path_factory.mktemp("spill"))
    mem = Recorder()
    with SeriesStore(d, budget_bytes=1, min_rows=min_rows) as store:
        spilled = Recorder(store=store)
        ref = _feed(mem, stream)
        assert _feed(spilled, stream) == ref
        a, b = _npz(mem, os.path.join(d, "mem.npz")), _npz(spilled, os.path.join(d, "sp.npz"))
        # what np.savez_compressed wrote from the old lists (int8 states, float alphas)
        old = {k: np.array(v, dtype=np.int8 if k.endswith("_state") else
                           np.float64 if k.endswith("_alpha") else np.int64)
               for k, v in ref.items()}
        assert sorted(a) == sorted(b) == sorted(old)
        for k in old:
            assert a[k].dtype == b[k].dtype == old[k].dtype, k
            assert a[k].tobytes() == b[k].tobytes() == old[k].tobytes(), k
        if any(len(v) > min_rows for v in ref.values()):
            assert store.spilled_bytes > 0
        dur = max((t for k, v in ref.items() if k.endswith("_t_ps") for t in v), default=0) + 7
        means = spilled.mean_queue_bytes(dur)
        assert means == mem.mean_queue_bytes(dur)
        for (n, p), m in means.items():
            key = f"queue_n{n}_p{p}_q3"
            exact = Fraction(int(series.step_integral([(old[f"{key}_t_ps"],
                                                        old[f"{key}_bytes"])], 0, dur)), dur)
            assert m == float(exact)
            assert m == pytest.approx(step_mean(old[f"{key}_t_ps"], old[f"{key}_bytes"], 0,
                                                dur), rel=1e-12, abs=1e-9)
    assert sorted(os.listdir(d)) == ["mem.npz", "sp.npz"]  # the spill file had no name


def test_step_integral_exact_on_huge_values():
    t = np.array([0, 10**12, 3 * 10**12], dtype=np.int64)
    v = np.array([2**40, 2**41, 5], dtype=np.int64)
    got = series.step_integral([(t[:2], v[:2]), (t[2:], v[2:])], 0, 4 * 10**12)
    assert got == 2**40 * 10**12 + 2**41 * 2 * 10**12 + 5 * 10**12


def _peak_run(tmp_path, ms: float, **params) -> tuple[int, Recorder]:
    got = {}
    orig = results.flow_conservation

    def spy(fab, rec):
        got["rec"] = rec
        return orig(fab, rec)

    results.flow_conservation = spy
    try:
        tracemalloc.start()
        tracemalloc.reset_peak()
        run_scenario("incast", params={"duration_ms": ms, **params},
                     out_dir=str(tmp_path / f"o{ms}"), plots=False, progress=False,
                     write_captures=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        results.flow_conservation = orig
    return peak, got["rec"]


def test_heap_does_not_grow_with_the_duration(tmp_path, monkeypatch):
    """Doubling an incast's length (0.4 -> 0.8 ms) adds ~11k packet-hops and over 15k queue
    samples, which the list-based Recorder kept at about 80 bytes each (two int objects and
    two list slots, plus the ingress series; kept in memory as int64 columns it is still about
    0.8 MB); spilled, the peak heap grows by under 0.2 MB (measured: 8 KB)."""
    monkeypatch.setattr(series, "SPILL_BUDGET_BYTES", 64 * 1024)
    monkeypatch.setattr(series, "MIN_ROWS", 64)
    _peak_run(tmp_path, 0.05)  # imports and caches of a first run are not the run's
    peak1, rec1 = _peak_run(tmp_path, 0.4)
    peak2, rec2 = _peak_run(tmp_path, 0.8)
    assert rec2.store.spilled_bytes > 2 * 64 * 1024  # the long run did spill
    samples = sum(s.rows for s in rec2.queues.values()) - sum(
        s.rows for s in rec1.queues.values())
    assert samples > 15_000
    assert peak2 - peak1 < 200_000, (peak1, peak2)


def test_control_ids_bounded_and_results_unchanged(tmp_path, monkeypatch):
    """Per-packet ACKs: the ids of control frames no longer in flight are forgotten, which
    changes nothing in summary.json (also on a lossy fabric where frames are dropped)."""
    fabric = os.path.join(os.path.dirname(__file__), "..", "docs", "examples",
                          "two_switches.toml")
    params = {"duration_ms": 0.3, "hosts.ack_every": 1, "switch.pfc": False,
              "hosts.reliable": False}  # an ACK for every frame delivered, none resent
    runs = {}
    for prune in (10**12, 64):
        monkeypatch.setattr(samples, "CONTROL_IDS_PRUNE", prune)
        got = {}
        orig = results.flow_conservation

        def spy(fab, rec, got=got, orig=orig):
            got["n"] = len(rec.control.ids)
            return orig(fab, rec)

        monkeypatch.setattr(results, "flow_conservation", spy)
        s = run_scenario(fabric, params=params, out_dir=str(tmp_path / f"p{prune}"),
                         plots=False, progress=False, write_captures=False)
        runs[prune] = (s, got["n"])
    (s_all, n_all), (s_pruned, n_pruned) = runs[10**12], runs[64]
    assert n_all > 1000 and n_pruned <= 2 * 64 + 64
    assert s_all["totals"]["drops"] > 100  # frames were dropped (lossy, no PFC)
    for x in (s_all, s_pruned):
        x.pop("params", None)
    assert s_pruned == s_all


class _Boom(RuntimeError):
    pass


@pytest.mark.parametrize("fail", [None, "run", "after"])
def test_spill_file_gone_after_success_and_error(tmp_path, monkeypatch, fail):
    monkeypatch.setattr(series, "SPILL_BUDGET_BYTES", 4096)
    monkeypatch.setattr(series, "MIN_ROWS", 16)
    files = []
    real = series.tempfile.TemporaryFile

    def tracked(*a, **kw):
        f = real(*a, **kw)
        files.append((f, kw.get("dir")))
        return f

    monkeypatch.setattr(series.tempfile, "TemporaryFile", tracked)
    if fail == "after":
        def boom(*a, **kw):
            raise _Boom("after the run")

        monkeypatch.setattr(results, "flow_conservation", boom)
    elif fail == "run":
        real_spill = SeriesStore.spill
        calls = []

        def spill_then_boom(self, s):
            real_spill(self, s)
            calls.append(1)
            if len(calls) == 5:
                raise _Boom("during the run")

        monkeypatch.setattr(SeriesStore, "spill", spill_then_boom)
    out = tmp_path / "out"
    if fail is None:
        run_scenario("incast", params={"duration_ms": 0.2}, out_dir=str(out), plots=False,
                     progress=False)
        assert sorted(os.listdir(out)) == [".lossless-output", "bottleneck.pcap",
                                            "events.jsonl", "summary.json", "timeseries.npz"]
    else:
        with pytest.raises(_Boom):
            run_scenario("incast", params={"duration_ms": 0.2}, out_dir=str(out),
                         plots=False, progress=False)
        assert not out.exists()
    assert files, "the run spilled"
    for f, where in files:
        assert f.closed
        assert os.path.dirname(where) == str(tmp_path)  # the output's temporary folder
    assert os.listdir(tmp_path) == (["out"] if fail is None else [])


def _figure_texts(out: str) -> dict[str, list[str]]:
    import matplotlib.pyplot as plt

    from sim.study.plot import figures, texts

    figs = figures(out)
    try:
        return {k: texts(f) for k, f in figs.items()}
    finally:
        for f in figs.values():
            plt.close(f)


def test_plots_decimate_long_series_keeping_every_figure(tmp_path, monkeypatch):
    """Drawn from decimated series (min, max, first and last per column) the plots say the
    same as from the whole ones: maxima, paused fractions, first pauses, zoom windows."""
    import sim.study.plot as plot

    out = str(tmp_path / "r")
    run_scenario("incast", params={"duration_ms": 1.0, "cc": "dcqcn"}, out_dir=out,
                 plots=False, progress=False, write_captures=False)
    exact = _figure_texts(out)
    monkeypatch.setattr(plot, "DECIMATE_ROWS", 50)
    monkeypatch.setattr(plot, "DECIMATE_COLUMNS", 64)
    seen = []
    real = plot._column_extremes

    def spy(t, v, col_ps):
        idx = real(t, v, col_ps)
        seen.append((len(t), len(idx)))
        return idx

    monkeypatch.setattr(plot, "_column_extremes", spy)
    loaded = []
    real_get = np.lib.npyio.NpzFile.__getitem__

    def get(self, key):
        a = real_get(self, key)
        loaded.append((key, a.size))
        return a

    monkeypatch.setattr(np.lib.npyio.NpzFile, "__getitem__", get)
    assert _figure_texts(out) == exact
    long_ones = [(k, n) for k, n in loaded if n > 50 and k.split("_")[0] in
                 ("queue", "ingress", "pfc", "rate")]
    assert loaded and long_ones == []  # read only in chunks, never whole
    assert seen and sum(n for n, _ in seen) > 5 * sum(k for _, k in seen)


@given(st.lists(st.tuples(st.integers(0, 40), st.integers(-5, 5)), min_size=1, max_size=200),
       st.integers(1, 30))
def test_column_extremes_keep_peaks_and_steps(steps, col_ps):
    from sim.study.plot import _column_extremes

    t = np.cumsum([d for d, _ in steps]).astype(np.int64)
    v = np.array([x for _, x in steps], dtype=np.int64)
    idx = _column_extremes(t, v, col_ps)
    assert list(idx) == sorted(set(idx.tolist()))
    for c in set((t // col_ps).tolist()):
        inside = np.flatnonzero(t // col_ps == c)
        kept = [i for i in idx if t[i] // col_ps == c]
        assert v[kept].max() == v[inside].max() and v[kept].min() == v[inside].min()
        assert kept[0] == inside[0] and kept[-1] == inside[-1]  # enters and leaves right


def test_store_without_folder_never_spills():
    store = SeriesStore()
    s = store.new("qq")
    for i in range(5000):
        s[0].append(i)
        s[1].append(i)
        if len(s[0]) >= store.cap_rows:
            store.spill(s)
    assert s.rows == 5000 and not s.segs and store.spilled_bytes == 0


def test_mem_bench_reports_one_run():
    from bench import mem_bench

    r = mem_bench.run_case("incast", {"duration_ms": 0.05}, mem_bench._ROOT)
    assert r["hops"] > 1000 and r["peak_bytes"] > 10**6 and r["cpu_s"] > 0

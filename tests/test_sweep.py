"""``lossless sweep``: grid expansion, serial/local-Dask/remote-scheduler runs with identical
results, resuming, failures recorded, the table and the plot (docs/reference/sweep.md)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import stat
import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
from sim.cli import sweep as sweep_cli
from sim.study import sweep as sweep_mod
from sim.study.sweep import (
    MAX_RUNS,
    count_runs,
    expand,
    iter_specs,
    load_rows,
    local_workers,
    mean_ci,
    parse_values,
    sweep,
)

GRID = {"senders": [2, 3], "pfc": [True, False], "duration_ms": [0.05]}


def _figures(rows):
    return {r["run_id"]: (r["params"], r["seed"], r["status"], r["figures"]) for r in rows}


def test_parse_values() -> None:
    assert parse_values("1,2,3") == [1, 2, 3]
    assert parse_values("true,false") == [True, False]
    assert parse_values("0.1:0.5:0.1") == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert parse_values("2:10:4") == [2, 6, 10]
    assert parse_values("none,dcqcn") == ["none", "dcqcn"]
    for bad in ("1:0:1", "0:1:0", "a:b:c"):
        with pytest.raises(ValueError, match="range"):
            parse_values(bad)


def test_expand_is_the_cartesian_product_times_seeds() -> None:
    specs = expand("incast", GRID, seeds=3)
    assert len(specs) == 2 * 2 * 1 * 3
    assert len({s["run_id"] for s in specs}) == len(specs)
    assert [s["seed"] for s in specs[:3]] == [0, 1, 2]
    assert expand("incast", GRID)[0]["seed"] is None


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "serial"
    rows = sweep("incast", GRID, out_dir=out, seeds=2, workers=0, progress=False)
    return out, rows


def test_serial_sweep_table(serial) -> None:
    out, rows = serial
    assert len(rows) == 8 and all(r["status"] == "ok" for r in rows)
    with open(out / "runs.csv", newline="") as f:
        table = list(csv.DictReader(f))
    assert len(table) == 8
    assert {"senders", "pfc", "seed", "totals.drops", "bottleneck.utilisation",
            "jain_index"} <= set(table[0])
    lossy = [r for r in rows if not r["params"]["pfc"]]
    assert all(r["figures"]["totals.drops"] > 0 for r in lossy)
    assert all(r["figures"]["totals.drops"] == 0 for r in rows if r["params"]["pfc"])
    assert json.loads((out / "sweep.json").read_text())["runs"] == 8


def test_local_dask_cluster_gives_identical_results(serial, tmp_path, monkeypatch) -> None:
    """Also with a window smaller than the sweep: runs are submitted as others finish, at
    most twice the workers' threads at a time here."""
    from dask.distributed import Client

    _, rows = serial
    workers = min(2, local_workers())
    monkeypatch.setattr(sweep_mod, "_IN_FLIGHT", 1)
    submitted, finished, most = [0], [0], [0]
    real_submit = Client.submit

    def submit(self, *a, **kw):
        submitted[0] += 1
        most[0] = max(most[0], submitted[0] - finished[0])
        return real_submit(self, *a, **kw)

    def done(_row) -> None:
        finished[0] += 1

    monkeypatch.setattr(Client, "submit", submit)
    got = sweep("incast", GRID, out_dir=tmp_path / "dask", seeds=2, workers=workers,
                progress=False, on_row=done)
    assert _figures(got) == _figures(rows)
    assert submitted[0] == 8 and most[0] == 2 * workers


def test_resume_runs_only_what_is_missing_and_failures_are_recorded(serial, tmp_path) -> None:
    src, rows = serial
    out = tmp_path / "resume"
    out.mkdir()
    lines = (src / "results.jsonl").read_text().splitlines()
    # an interrupted sweep: 5 runs finished, the 6th torn mid-write
    (out / "results.jsonl").write_text("\n".join(lines[:5]) + "\n" + lines[5][:40])
    ran = []
    got = sweep("incast", GRID, out_dir=out, seeds=2, workers=0, progress=False,
                on_row=ran.append)
    assert len(ran) == 3 and _figures(got) == _figures(rows)
    # a run that fails at run time (a capture that is not one; a missing one is refused at
    # load time) is recorded; the others go on
    (tmp_path / "missing.pcap").write_bytes(b"not a capture at all")
    f = tmp_path / "s.toml"
    f.write_text('[run]\nduration_ms = 0.02\n[topology]\nkind = "star"\nhosts = 3\n'
                 '[traffic]\npattern = "incast"\n[[pcap]]\nfile = "missing.pcap"\n')
    bad = sweep(str(f), {"links.link_gbps": [100.0, 200.0]}, out_dir=tmp_path / "bad",
                workers=0, progress=False)
    assert [r["status"] for r in bad] == ["error", "error"]
    assert "missing.pcap" in bad[0]["error"]
    rerun = []
    sweep(str(f), {"links.link_gbps": [100.0, 200.0]}, out_dir=tmp_path / "bad",
          workers=0, progress=False, on_row=rerun.append)
    assert rerun == []  # failures stay recorded unless retried
    sweep(str(f), {"links.link_gbps": [100.0, 200.0]}, out_dir=tmp_path / "bad",
          workers=0, progress=False, on_row=rerun.append, retry_failed=True)
    assert len(rerun) == 2


def test_bad_worker_and_seed_counts_are_refused(tmp_path) -> None:
    # --workers -1 used to hang in dask's LocalCluster; --seeds 0 said "the sweep is empty"
    with pytest.raises(ValueError, match="workers -1: must be >= 0"):
        sweep("incast", GRID, out_dir=tmp_path / "w", workers=-1, progress=False)
    with pytest.raises(ValueError, match="seeds must be >= 1"):
        sweep("incast", GRID, out_dir=tmp_path / "s", seeds=0, workers=0, progress=False)


def test_more_local_workers_than_cpus_are_refused_before_a_cluster_starts(
        tmp_path, monkeypatch, capsys) -> None:
    """--workers 1000000 used to start a LocalCluster of a million processes (a hang)."""
    import dask.distributed

    def no_cluster(*a, **kw):
        raise AssertionError("a LocalCluster was started")

    monkeypatch.setattr(dask.distributed, "LocalCluster", no_cluster)
    most = local_workers()
    with pytest.raises(ValueError, match=rf"workers {most + 1}: at most {most} local worker"):
        sweep("incast", GRID, out_dir=tmp_path / "w", workers=most + 1, progress=False)
    assert not (tmp_path / "w").exists()
    assert main(["sweep", "incast", "-p", "senders=2", "--workers", "1000000",
                 "--out", str(tmp_path / "c"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"lossless: --workers 1000000: at most {most} local worker")
    assert "--scheduler" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "c").exists()


def test_a_grid_beyond_the_bound_is_refused_before_it_is_expanded(tmp_path, monkeypatch,
                                                                  capsys) -> None:
    """The product of the values (times seeds) is bounded, not only each range: nothing is
    built, expanded or written, at once, for any size of grid."""
    import sim.scenarios.loader as loader

    def no_build(*a, **kw):
        raise AssertionError("a scenario was built")

    monkeypatch.setattr(loader, "build", no_build)
    just = {"senders": list(range(400)), "xoff_kb": list(range(MAX_RUNS // 400 + 1))}
    with pytest.raises(ValueError, match=rf"the sweep is {400 * (MAX_RUNS // 400 + 1)} runs "
                                         rf"\(400 senders x 251 xoff_kb\), more than {MAX_RUNS}"):
        sweep("incast", just, out_dir=tmp_path / "a", workers=0, progress=False)
    t0 = time.perf_counter()
    huge = {k: range(1000) for k in ("senders", "xoff_kb", "kmin_kb", "kmax_kb")}
    with pytest.raises(ValueError, match=r"is 1000000000000 runs \(1000 senders x 1000 "):
        sweep("incast", huge, out_dir=tmp_path / "b", workers=0, progress=False)
    with pytest.raises(ValueError, match=r"is 1000000000 runs \(1000000000 seeds\)"):
        sweep("incast", {}, seeds=10**9, out_dir=tmp_path / "c", workers=0, progress=False)
    with pytest.raises(ValueError, match=r"is 2000000000 runs \(1000 senders x 2000000 "):
        expand("incast", {"senders": range(1000)}, seeds=2 * 10**6)
    assert time.perf_counter() - t0 < 2
    assert not any((tmp_path / d).exists() for d in "abc")
    # the command line: --seeds 1000000000 was a MemoryError traceback
    assert main(["sweep", "incast", "--seeds", "1000000000", "--workers", "0",
                 "--out", str(tmp_path / "d"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err == (f"lossless: the sweep is 1000000000 runs (1000000000 seeds), more than "
                   f"{MAX_RUNS}: split it into several sweeps (a subset of the values, or "
                   f"--seed-base and fewer --seeds)\n")
    assert not (tmp_path / "d").exists()


@given(sizes=st.lists(st.integers(0, 6), max_size=4), seeds=st.none() | st.integers(1, 5),
       bound=st.integers(1, 200))
def test_the_bound_is_the_product_of_values_and_seeds(sizes, seeds, bound) -> None:
    grid = {f"k{i}": list(range(n)) for i, n in enumerate(sizes)}
    n = count_runs(grid, seeds)
    lazy = list(iter_specs("incast", grid, seeds))
    assert n == len(lazy)
    old = sweep_mod.MAX_RUNS
    sweep_mod.MAX_RUNS = bound
    try:
        if n > bound:
            with pytest.raises(ValueError, match=rf"is {n} runs .* more than {bound}"):
                expand("incast", grid, seeds)
        else:
            assert expand("incast", grid, seeds) == lazy
    finally:
        sweep_mod.MAX_RUNS = old


def test_the_last_seed_is_checked_before_anything_runs(tmp_path) -> None:
    from sim.scenarios import ScenarioError

    with pytest.raises(ScenarioError, match="seed"):
        sweep("incast", {"duration_ms": [0.01]}, seeds=2, seed_base=2**63 - 1,
              out_dir=tmp_path / "s", workers=0, progress=False)
    assert not (tmp_path / "s").exists()


def test_bad_parameters_stop_the_sweep_before_anything_runs(tmp_path) -> None:
    from sim.scenarios import ScenarioError

    with pytest.raises(ScenarioError, match="sendrs"):
        sweep("incast", {"sendrs": [1]}, out_dir=tmp_path / "x", workers=0, progress=False)
    assert load_rows(tmp_path / "x") == []


def test_external_scheduler_with_two_workers(serial, tmp_path) -> None:
    """A real `dask scheduler` and two `dask worker` processes on loopback."""
    dask = shutil.which("dask")
    if dask is None:
        pytest.skip("the dask command is not installed")
    _, rows = serial
    sched_file = tmp_path / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--no-dashboard", "--scheduler-file", str(sched_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)]
    try:
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.2)
        assert sched_file.exists(), "the dask scheduler did not start"
        time.sleep(0.5)
        address = json.loads(sched_file.read_text())["address"]
        for _ in range(2):
            procs.append(subprocess.Popen(
                [dask, "worker", address, "--nworkers", "1", "--nthreads", "1",
                 "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env=env))
        from dask.distributed import Client

        with Client(address, timeout=60) as c:
            c.wait_for_workers(2, timeout=60)
        out = tmp_path / "remote"
        assert main(["sweep", "incast", "-p", "senders=2,3", "-p", "pfc=true,false",
                     "-p", "duration_ms=0.05", "--seeds", "2", "--scheduler", address,
                     "--out", str(out), "--no-progress"]) == 0
        assert _figures(load_rows(out)) == _figures(rows)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_sweep_plot_and_cli_errors(serial, capsys) -> None:
    out, _ = serial
    assert main(["sweep-plot", str(out), "--x", "senders", "--y", "bottleneck.utilisation",
                 "--by", "pfc"]) == 0
    png = capsys.readouterr().out.strip()
    assert png.endswith(".png") and os.path.getsize(png) > 5000
    assert main(["sweep-plot", str(out), "--x", "senders", "--y", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err
    # pfc varies too: it must be fixed or drawn, never averaged into the seed band
    assert main(["sweep-plot", str(out), "--x", "senders", "--y", "totals.drops"]) == 2
    assert "'pfc' also varies" in capsys.readouterr().err
    assert main(["sweep-plot", str(out), "--x", "senders", "--y", "totals.drops",
                 "--where", "pfc=false"]) == 0
    assert capsys.readouterr().out.strip().endswith("_pfc=false.png")  # as the user wrote it
    full = out.parent / "full"
    try:  # the device of /dev/full, in a folder of the test's own (root only)
        os.mknod(full, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
    except PermissionError:
        pass
    else:  # -o names a device: written through (here: full), never replaced by a file
        assert main(["sweep-plot", str(out), "--x", "senders", "--y", "totals.drops",
                     "--where", "pfc=false", "-o", str(full)]) == 2
        assert capsys.readouterr().err == (f"lossless: {full}: cannot write: No space left "
                                           f"on device\n")
        assert stat.S_ISCHR(os.lstat(full).st_mode)
    with pytest.raises(SystemExit) as e:
        main(["sweep", "incast", "-p", "senders"])
    assert e.value.code == 2
    assert main(["sweep", "nosuchscenario", "-p", "a=1"]) == 2
    assert "nosuchscenario" in capsys.readouterr().err


def test_mean_ci() -> None:
    m, h = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and abs(h - 4.303 * (1.0 / 3) ** 0.5) < 1e-9
    assert mean_ci([5.0]) == (5.0, 0.0)


def test_sweep_plot_says_which_runs_have_no_finite_value(tmp_path, monkeypatch, capsys) -> None:
    """NaN, null, infinite and absent figures are left out of the means, counted on stderr
    and in the plot, and a point with none left is marked on the axis (NaN used to make
    the mean NaN, a gap drawn without a word; null was skipped silently)."""
    import math

    from matplotlib.figure import Figure
    from matplotlib.text import Text

    values = {2: [0.5, 0.6, 0.7], 4: [0.8, math.nan, None], 8: [math.nan, math.inf, "absent"]}
    with open(tmp_path / "results.jsonl", "w") as f:
        for s, vs in values.items():
            for seed, v in enumerate(vs):
                fig = {} if v == "absent" else {"u": v}
                f.write(json.dumps({"run_id": f"{s}-{seed}", "scenario": "incast",
                                    "params": {"senders": s}, "seed": seed, "status": "ok",
                                    "figures": fig}) + "\n")
    seen = {}

    def savefig(self, *a, **kw):
        seen["texts"] = [t.get_text() for t in self.findobj(Text)]
        seen["lines"] = [(list(ln.get_xdata()), list(ln.get_ydata()))
                         for ln in self.axes[0].lines]

    monkeypatch.setattr(Figure, "savefig", savefig)
    assert main(["sweep-plot", str(tmp_path), "--x", "senders", "--y", "u",
                 "-o", str(tmp_path / "p.png")]) == 0
    note = ("5 of 9 runs have no finite u, left out of the means: 2 NaN (undefined for the "
            "run, e.g. 0/0), 1 null (not defined for the run, e.g. no traffic), 1 absent (the "
            "run does not report it), 1 infinite; at senders = 4, 8")
    assert capsys.readouterr().err == f"lossless: warning: {tmp_path}: {note}\n"
    assert note in " ".join(" ".join(seen["texts"]).split())  # the plot's note, wrapped
    (xs, means), (marked, _) = seen["lines"]
    assert xs == [2, 4] and means == pytest.approx([0.6, 0.8]) and marked == [8]
    # no finite value at all: an error, not an empty plot
    with open(tmp_path / "results.jsonl", "a") as f:
        f.write(json.dumps({"run_id": "x", "scenario": "incast", "params": {"senders": 2},
                            "seed": 9, "status": "ok", "figures": {"v": math.nan}}) + "\n")
    assert main(["sweep-plot", str(tmp_path), "--x", "senders", "--y", "v"]) == 2
    assert capsys.readouterr().err.endswith(
        "--y 'v': no finished run has a finite value (1 NaN (undefined for the run, e.g. "
        "0/0), 9 absent (the run does not report it))\n")


def test_collective_argv_maps_options_and_the_seed() -> None:
    """A collective sweep's run is a lossless collective command line: its options by
    name, the fabric's keys as -p, the run's seed as -p seed unless given."""
    argv = sweep_cli.collective_argv({"size": "16M", "topology": "fattree", "k": 4,
                                      "qps": 4, "pfc": False, "fabric": "ib"}, 3, "r.json")
    assert argv == ["collective", "allreduce", "-b", "16M", "-e", "16M", "--fabric",
                    "fattree", "--qps", "4", "-p", "k=4", "-p", "pfc=false", "-p",
                    "fabric=ib", "-p", "seed=3", "--no-plots", "--json", "r.json"]
    assert "seed=7" in sweep_cli.collective_argv({"size": 1, "seed": 7}, 3)[-2]


def test_a_collective_sweep_runs_what_lossless_collective_runs(tmp_path, capsys) -> None:
    """Each run of ``lossless sweep collective`` gives the figures ``lossless collective``
    prints for the same size, fabric and seed; bad keys and a missing size are refused
    before anything runs, in one line, exit 2."""
    out = tmp_path / "sw"
    assert main(["sweep", "collective", "-p", "size=1M,4M", "-p", "nodes=2", "-p",
                 "gpus_per_node=4", "-p", "fidelity=flow", "-p", "algo=tree", "--seeds",
                 "2", "--workers", "0", "--no-progress", "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "runs.csv", encoding="utf-8")))
    assert [(r["size"], r["seed"], r["status"]) for r in rows] == [
        ("1M", "0", "ok"), ("1M", "1", "ok"), ("4M", "0", "ok"), ("4M", "1", "ok")]
    assert all(r["algorithm"] == "tree" and r["nranks"] == "8" for r in rows)
    capsys.readouterr()
    one = tmp_path / "one.json"
    assert main(["collective", "allreduce", "-b", "4M", "-e", "4M", "-p", "nodes=2", "-p",
                 "gpus_per_node=4", "--fidelity", "flow", "--algo", "tree", "-p", "seed=1",
                 "--no-plots", "--json", str(one)]) == 0
    ref = json.loads(one.read_text())["results"][0]
    assert float(rows[3]["busbw_GB_per_s"]) == ref["busbw_GB_per_s"]
    assert float(rows[3]["time_us"]) == ref["time_us"]
    capsys.readouterr()
    for bad, says in ((["-p", "size=1M", "-p", "nodez=2"], "unknown parameter"),
                      (["-p", "size=1M", "-p", "algo=foo"], "--algo"),
                      (["-p", "nodes=2"], "-p size=SIZE")):
        assert main(["sweep", "collective", *bad, "--workers", "0",
                     "--out", str(tmp_path / "bad")]) == 2
        err = capsys.readouterr().err
        assert says in err and "Traceback" not in err and len(err.splitlines()) == 1
        assert not (tmp_path / "bad").exists()


def test_a_collective_run_never_reads_an_earlier_tries_results(tmp_path) -> None:
    """--keep-runs --retry-failed reuses a run's folder: a results.json left there by an
    earlier try must not pass for this run's when this one writes none."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(
        {"nranks": 8, "results": [{"busbw_GB_per_s": 1.0}]}), encoding="utf-8")
    with pytest.raises(RuntimeError, match=r"topology|--fabric"):
        sweep_cli.run_collective({"size": "1M", "topology": "nosuchkind"}, 0, str(folder))
    assert not (folder / "results.json").exists()

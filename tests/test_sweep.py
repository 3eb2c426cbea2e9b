"""``lossless sweep``: grid expansion, serial/local-Dask/remote-scheduler runs with identical
results, resuming, failures recorded, the table and the plot (docs/sweeps.md)."""

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

from sim.cli import main
from sim.study.sweep import expand, load_rows, mean_ci, parse_values, sweep

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


def test_local_dask_cluster_gives_identical_results(serial, tmp_path) -> None:
    _, rows = serial
    got = sweep("incast", GRID, out_dir=tmp_path / "dask", seeds=2, workers=2,
                progress=False)
    assert _figures(got) == _figures(rows)


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
    with pytest.raises(ValueError, match="workers must be >= 0"):
        sweep("incast", GRID, out_dir=tmp_path / "w", workers=-1, progress=False)
    with pytest.raises(ValueError, match="seeds must be >= 1"):
        sweep("incast", GRID, out_dir=tmp_path / "s", seeds=0, workers=0, progress=False)


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
    assert "pfc=False" in capsys.readouterr().out
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

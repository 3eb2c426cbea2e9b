"""``lossless sweep`` never mixes or loses results: a torn last line of
results.jsonl is cut (or terminated) before appending, lines that are not rows are skipped
with a warning, the folder is locked against a second sweep, a folder of another scenario's
sweep or a user's files is refused unless --force, sweep.json/runs.csv appear whole, and
sweep-plot reads a folder with corrupt rows (docs/reference/sweep.md)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.study import sweep as sweep_mod
from sim.study.sweep import load_rows, sweep
from tests.helpers import run_cli

GRID = {"senders": [2, 3], "duration_ms": [0.02]}
ARGV = ["-p", "senders=2,3", "-p", "duration_ms=0.02", "--workers", "0", "--no-progress"]


@pytest.fixture(scope="module")
def done(tmp_path_factory) -> Path:
    """A finished two-run sweep of incast."""
    out = tmp_path_factory.mktemp("sw") / "done"
    rows = sweep("incast", GRID, out_dir=out, workers=0, progress=False)
    assert [r["status"] for r in rows] == ["ok", "ok"]
    return out


def _copy(done: Path, dest: Path) -> Path:
    shutil.copytree(done, dest)
    return dest


def _cli(argv: list[str]) -> tuple[int, str]:
    rc, _, err = run_cli(argv)
    return rc, err


def _lines(out: Path) -> list[str]:
    return (out / "results.jsonl").read_text().splitlines()


# --------------------------------------------------------------------------- torn lines
def _resume(out: Path) -> tuple[list[str], list[str]]:
    """``lossless sweep`` again into ``out``: (its warnings, the run_ids of results.jsonl)."""
    rc, err = _cli(["sweep", "incast", *ARGV, "--out", str(out)])
    assert rc == 0, err
    warned = [x for x in err.splitlines() if x.startswith("lossless: warning: ")]
    return warned, [r["run_id"] for r in map(_row, _lines(out)) if r]


def _row(line: str) -> dict | None:
    try:
        r = json.loads(line)
    except ValueError:
        return None
    return r if isinstance(r, dict) and "figures" in r and isinstance(r.get("run_id"),
                                                                      str) else None


def test_torn_last_line_is_cut_and_the_run_is_not_lost(done, tmp_path) -> None:
    out = _copy(done, tmp_path / "o")
    first, second = _lines(done)
    (out / "results.jsonl").write_text(first + "\n" + second[:50])  # killed mid-write
    warned, ids = _resume(out)
    assert len(warned) == 1 and f"{out / 'results.jsonl'}:2: torn last line" in warned[0]
    # every line is a row: the re-run was not glued onto the torn one
    assert [json.loads(x)["run_id"] for x in _lines(out)] == ids == [
        json.loads(x)["run_id"] for x in (first, second)]
    warned, again = _resume(out)
    assert warned == [] and again == ids  # nothing lost, nothing run twice


def test_whole_last_row_without_newline_is_kept(done, tmp_path) -> None:
    out = _copy(done, tmp_path / "o")
    (out / "results.jsonl").write_text("\n".join(_lines(done)))  # no final newline
    warned, ids = _resume(out)
    assert len(ids) == 2  # not re-run
    assert len(warned) == 1 and ":2: last line had no newline" in warned[0]
    assert (out / "results.jsonl").read_text().endswith("}\n")


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                    | st.text(max_size=5),
                    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c,
                                                                        max_size=3),
                    max_leaves=6)
NOT_ROWS = JSON.filter(lambda v: not (isinstance(v, dict) and isinstance(v.get("run_id"), str)
                                      and isinstance(v.get("params"), dict)
                                      and isinstance(v.get("status"), str)
                                      and isinstance(v.get("figures", {}), dict)))


@settings(max_examples=25)
@given(junk=st.lists(st.one_of(NOT_ROWS.map(json.dumps), st.sampled_from(
    ["[]", "{}", "3", "null", '"x"', '{"run_id": 5}', '{"run_id": "a", "params": []}',
     "{not json", "\xff\xfe"])), min_size=1, max_size=4), at=st.integers(0, 2))
def test_lines_that_are_not_rows_are_skipped_with_a_warning(done, junk, at) -> None:
    with tempfile.TemporaryDirectory() as d:
        out = _copy(done, Path(d) / "o")
        good = _lines(done)
        lines = good[:at] + junk + good[at:]
        (out / "results.jsonl").write_text("\n".join(lines) + "\n")
        warned, _ids = _resume(out)  # nothing crashed
        assert _lines(out) == lines  # nothing re-run
        bad_lines = [i + 1 for i in range(at, at + len(junk))]
        assert [w.split(": ")[2] for w in warned] == [
            f"{out / 'results.jsonl'}:{n}" for n in bad_lines]


# --------------------------------------------------------------------------- one sweep per dir
def test_a_second_sweep_into_a_locked_folder_is_refused(done, tmp_path) -> None:
    out = _copy(done, tmp_path / "o")
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from sim.study.sweep import _Lock;"
         " l = _Lock(sys.argv[1]);"
         " print('locked', flush=True); sys.stdin.read()", str(out)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        rc, err = _cli(["sweep", "incast", *ARGV, "--out", str(out)])
        assert rc == 2 and err.strip() == (f"lossless: {out}: in use by another sweep "
                                           f"(pid {holder.pid})")
    finally:
        holder.stdin.close()
        holder.wait(timeout=30)
    rc, err = _cli(["sweep", "incast", *ARGV, "--out", str(out)])  # free again
    assert rc == 0, err


def test_another_scenarios_sweep_is_refused_unless_force(done, tmp_path) -> None:
    out = _copy(done, tmp_path / "o")
    before = (out / "results.jsonl").read_bytes()
    other = ["sweep", "late_joiner", "-p", "duration_ms=0.02", "-p", "join_ms=0.01",
             "--workers", "0", "--no-progress", "--out", str(out)]
    rc, err = _cli(other)
    assert rc == 2 and len(err.splitlines()) == 1
    assert f"{out}: holds a sweep of scenario 'incast' (sweep.json)" in err
    assert (out / "results.jsonl").read_bytes() == before
    rc, err = _cli([*other, "--force"])
    assert rc == 0, err
    assert {r["scenario"] for r in load_rows(out)} == {"late_joiner"}
    assert json.loads((out / "sweep.json").read_text())["scenario"] == "late_joiner"


def test_a_users_folder_is_refused_unless_force(tmp_path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n")
    argv = ["sweep", "incast", "-p", "senders=2", "-p", "duration_ms=0.02", "--workers", "0",
            "--no-progress", "--out", str(out)]
    rc, err = _cli(argv)
    assert rc == 2 and "not empty and holds no sweep" in err and "--force" in err
    assert sorted(os.listdir(out)) == ["notes.txt"]
    rc, err = _cli([*argv, "--force"])
    assert rc == 0, err
    assert (out / "notes.txt").read_text() == "my notes\n" and len(load_rows(out)) == 1
    # a file is never a sweep folder
    rc, err = _cli([*argv[:-1], str(out / "notes.txt")])
    assert rc == 2 and "not a folder" in err


def test_tables_appear_whole(done, tmp_path, monkeypatch) -> None:
    out = _copy(done, tmp_path / "o")
    table, meta = (out / "runs.csv").read_bytes(), (out / "sweep.json").read_bytes()

    class Dies:
        def __init__(self, f) -> None:
            self.n = 0

        def writerow(self, row) -> None:
            self.n += 1
            if self.n > 1:
                raise KeyboardInterrupt

    monkeypatch.setattr(sweep_mod.csv, "writer", Dies)
    with pytest.raises(KeyboardInterrupt):
        sweep("incast", GRID, out_dir=out, workers=0, progress=False)
    assert (out / "runs.csv").read_bytes() == table  # the earlier table, not a torn one
    assert (out / "sweep.json").read_bytes() == meta
    assert not [n for n in os.listdir(out) if ".partial" in n]


# --------------------------------------------------------------------------- sweep-plot
def test_sweep_plot_warns_about_corrupt_rows(done, tmp_path) -> None:
    out = _copy(done, tmp_path / "o")
    with open(out / "results.jsonl", "a") as f:
        f.write('[]\n{"run_id": "x", "status": "ok"}\n3\n{"run_id": "y", "params": {}, '
                '"status": "ok", "figures": 7}\n{"torn')
    png = tmp_path / "p.png"
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main(["sweep-plot", str(out), "--x", "senders", "--y", "bottleneck.utilisation",
                   "-o", str(png)])
    lines = err.getvalue().splitlines()
    assert rc == 0 and png.stat().st_size > 5000
    assert [re.search(r"results\.jsonl:(\d+): ", x)[1] for x in lines] == ["3", "4", "5",
                                                                          "6", "7"]
    assert all(x.startswith("lossless: warning: ") for x in lines)


# --------------------------------------------------------------------------- hostile grids
@settings(max_examples=30)
@given(parts=st.lists(st.sampled_from(["0", "0.01", "0.02", "inf", "-inf", "nan", "Infinity",
                                       "1e-300", "1e300"]), min_size=3, max_size=3),
       key=st.sampled_from(["duration_ms", "xoff_kb", "link_gbps", "kmin_kb"]))
def test_hostile_sweep_grids_are_one_line_errors(parts, key) -> None:
    text = ":".join(parts)
    fixed = [] if key == "duration_ms" else ["-p", "duration_ms=0.01"]
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "o"
        rc, err = _cli(["sweep", "incast", "-p", f"{key}={text}", *fixed, "--workers", "0",
                        "--no-progress", "--out", str(out)])
        assert "Traceback" not in err
        if rc == 0:  # a finite, small range of good values ran
            assert not any(x in text for x in ("inf", "nan", "Inf"))
            return
        assert rc in (1, 2), err
        if rc == 2:
            assert len(err.splitlines()) == 1 and err.startswith("lossless: ")
            assert not out.exists()  # refused before anything was written


def test_an_unreadable_sweep_json_is_refused_unless_force(tmp_path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    (out / "sweep.json").write_text("[1")
    argv = ["sweep", "incast", "-p", "senders=2", "-p", "duration_ms=0.02", "--workers", "0",
            "--no-progress", "--out", str(out)]
    rc, err = _cli(argv)
    assert rc == 2 and err.startswith(f"lossless: {out / 'sweep.json'}: not a sweep")
    rc, err = _cli([*argv, "--force"])
    assert rc == 0, err
    assert json.loads((out / "sweep.json").read_text())["scenario"] == "incast"

"""Parameter sweeps and many-seed runs (``lossless sweep``; docs/reference/sweep.md).

A sweep is the cartesian product of parameter values (and seeds) of one scenario; every
combination is an independent run of :func:`sim.study.results.run_scenario`.  Runs go to a Dask
cluster (``dask.distributed``): a local one sized to the machine by default, or an existing
scheduler (``scheduler=ADDRESS``); ``workers=0`` runs them one after another in this process
(no Dask needed).  We do not schedule anything ourselves.

Results, in the output directory:

* ``results.jsonl``: one JSON object per finished run, appended as runs finish (so an
  interrupted sweep loses nothing finished): ``run_id``, ``scenario``, ``seed``, ``params``
  (the swept values), ``status`` ("ok" or "error"), ``error``, ``wall_s`` and ``figures``
  (every scalar of summary.json, flattened with dots: ``totals.drops``,
  ``bottleneck.utilisation``, ``jain_index`` ..., plus per-flow aggregates);
* ``runs.csv``: the same as a table, one row per run in sweep order (rewritten at the end);
* ``runs/<run_id>/``: each run's full output folder, with ``keep_runs=True``.

Resuming: a run whose ``run_id`` (a hash of scenario, parameters and seed) is already in
``results.jsonl`` is not run again; failed runs are re-run only with ``retry_failed=True``.
A run that fails is recorded with its error and does not stop the sweep.

Safety (docs/reference/sweep.md, "One sweep per folder"): the folder is locked for the sweep
(``fcntl.flock`` on ``.sweep.lock``; a second sweep is refused naming the first one's pid); a
folder holding another scenario's sweep, or a non-empty folder that is no sweep, is refused
unless ``force=True``; before appending, a torn last line of ``results.jsonl`` is cut (or
terminated, if it is a whole row) with a warning naming ``file:line``; lines that are not
rows are skipped with a warning; ``sweep.json`` and ``runs.csv`` are written with
:func:`wire.atomic.atomic_file`.
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from textwrap import fill
from typing import Any

from wire.atomic import OutputError, atomic_file, check_output_dir

__all__ = ["MAX_RUNS", "RunSpec", "count_runs", "expand", "iter_specs", "local_workers",
           "parse_values", "run_one", "sweep", "load_rows", "repair_tail", "flatten_summary",
           "plot_sweep"]

RESULTS = "results.jsonl"
TABLE = "runs.csv"
META = "sweep.json"
LOCK = ".sweep.lock"
#: The files and folder a sweep writes (what ``force=True`` removes of an earlier sweep).
_OURS = (RESULTS, TABLE, META, "runs")
#: Most runs in one sweep (values of every parameter multiplied, times seeds).  While a sweep
#: runs it holds every finished row in memory (about 4.3 KB each for incast's 28 figures,
#: measured with tracemalloc: 0.4 GB at this bound) and before anything runs it builds every
#: distinct parameter combination once (about 2 ms each for incast); a larger study is
#: several sweeps (a subset of the values, or ``seed_base`` and fewer seeds).
MAX_RUNS = 100_000
#: Most runs submitted to Dask at a time, at least; twice the workers' threads when more.
_IN_FLIGHT = 1000


def _warn_stderr(msg: str) -> None:
    print(f"lossless: warning: {msg}", file=sys.stderr)


class RunSpec(dict):
    """One run: ``scenario``, ``params`` (dict), ``seed`` (int or None), ``run_id``."""


def parse_values(text: str) -> list[Any]:
    """``"a,b,c"`` (TOML-style values) or ``"lo:hi:step"`` (inclusive, exact decimal steps)."""
    from sim.scenarios import parse_text

    text = text.strip()
    if text.count(":") == 2 and "," not in text:
        try:
            lo, hi, step = (Decimal(x) for x in text.split(":"))
        except InvalidOperation:
            raise ValueError(f"range {text!r}: expected numbers lo:hi:step") from None
        if not all(x.is_finite() for x in (lo, hi, step)):
            raise ValueError(f"range {text!r}: lo, hi and step must be finite numbers")
        if step <= 0 or hi < lo:
            raise ValueError(f"range {text!r}: need step > 0 and hi >= lo")
        if (hi - lo) / step >= 100_000:
            raise ValueError(f"range {text!r} has more than 100000 values")
        n = int((hi - lo) / step) + 1
        ints = all(x == x.to_integral_value() for x in (lo, step))
        return [int(lo + i * step) if ints else float(lo + i * step) for i in range(n)]
    return [parse_text(v.strip()) for v in text.split(",") if v.strip()]


def _run_id(scenario: str, params: Mapping[str, Any], seed: int | None) -> str:
    key = json.dumps([scenario, sorted(params.items()), seed], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def count_runs(grid: Mapping[str, Sequence[Any]], seeds: int | None = None) -> int:
    """How many runs ``grid`` times ``seeds`` is (computed, not expanded)."""
    n = 1
    for values in grid.values():
        n *= len(values)
    return n * (seeds or 1)


def check_size(grid: Mapping[str, Sequence[Any]], seeds: int | None = None) -> int:
    """The number of runs; ValueError naming it, its factors and :data:`MAX_RUNS` when it
    is more."""
    n = count_runs(grid, seeds)
    if n > MAX_RUNS:
        factors = [f"{len(v)} {k}" for k, v in grid.items()]
        if seeds:
            factors.append(f"{seeds} seeds")
        raise ValueError(f"the sweep is {n} runs ({' x '.join(factors)}), more than "
                         f"{MAX_RUNS}: split it into several sweeps (a subset of the values, "
                         f"or --seed-base and fewer --seeds)")
    return n


def iter_specs(scenario: str, grid: Mapping[str, Sequence[Any]], seeds: int | None = None,
               seed_base: int = 0) -> Iterator[RunSpec]:
    """Every combination of ``grid`` values (in the order given), times ``seeds`` seeds
    (``seed_base .. seed_base + seeds - 1``; None: the scenario's own seed), one at a time
    (nothing is expanded ahead)."""
    keys = list(grid)
    seed_range: Sequence[int | None] = [None] if not seeds else range(seed_base,
                                                                      seed_base + seeds)
    for combo in itertools.product(*(grid[k] for k in keys)):
        params = dict(zip(keys, combo, strict=True))
        for seed in seed_range:
            yield RunSpec(scenario=scenario, params=params, seed=seed,
                          run_id=_run_id(scenario, params, seed))


def expand(scenario: str, grid: Mapping[str, Sequence[Any]], seeds: int | None = None,
           seed_base: int = 0) -> list[RunSpec]:
    """:func:`iter_specs` as a list; ValueError when it would be more than
    :data:`MAX_RUNS` runs."""
    check_size(grid, seeds)
    return list(iter_specs(scenario, grid, seeds, seed_base))


def local_workers() -> int:
    """The most local worker processes: the CPUs this process may use
    (``os.sched_getaffinity`` where the OS has it, else ``os.cpu_count()``).  A run is
    single-threaded CPU work, so more processes would only share these CPUs (and each
    costs a Python process's memory); more workers is a Dask cluster (``scheduler``)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on every OS
        return os.cpu_count() or 1


def workers_problem(workers: int | None) -> str | None:
    """Why ``workers`` local processes are refused, or None."""
    if workers is None:
        return None
    if workers < 0:
        return "must be >= 0 (0: in this process)"
    most = local_workers()
    if workers > most:
        return (f"at most {most} local worker processes here (the CPUs this process may use: "
                f"a run is single-threaded, more processes would only share them)")
    return None


def flatten_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Every scalar of a summary.json (nested keys joined with dots; lists left out), plus
    per-flow aggregates: flows, flows_delivered_bytes, flow throughput min/mean/max (bps)
    and the largest finite FCT, and the scalars of each ``collectives`` item (a fabric
    file's ``[[collective]]`` entries) as ``collectives.N.KEY``:
    ``collectives.0.busbw_GB_per_s``."""
    out: dict[str, Any] = {}
    for k, v in summary.items():
        if k in ("params", "ports", "flows", "captures", "scenario", "seed"):
            continue
        if isinstance(v, Mapping):
            for k2, v2 in _flat(v, f"{k}."):
                out[k2] = v2
        elif isinstance(v, bool | int | float | str) or v is None:
            out[k] = v
    flows = summary.get("flows") or []
    tput = [f.get("throughput_bps", 0) for f in flows]
    fcts = [f["fct_ps"] for f in flows if f.get("fct_ps") is not None]
    out["flows"] = len(flows)
    out["flows_delivered_bytes"] = sum(f.get("bytes_delivered", 0) for f in flows)
    if tput:
        out["flow_throughput_min_bps"] = min(tput)
        out["flow_throughput_mean_bps"] = sum(tput) / len(tput)
        out["flow_throughput_max_bps"] = max(tput)
    if fcts:
        out["fct_max_ps"] = max(fcts)
    # [[collective]] entries of a fabric file: collectives.N.KEY (N from 0, as in the list)
    for i, c in enumerate(summary.get("collectives") or []):
        if isinstance(c, Mapping):
            for k2, v2 in _flat(c, f"collectives.{i}."):
                out[k2] = v2
    return out


def _flat(d: Mapping[str, Any], prefix: str) -> Iterable[tuple[str, Any]]:
    for k, v in d.items():
        if isinstance(v, Mapping):
            yield from _flat(v, f"{prefix}{k}.")
        elif isinstance(v, bool | int | float | str) or v is None:
            yield f"{prefix}{k}", v


def run_one(spec: Mapping[str, Any], keep_dir: str | None = None,
            run: Callable[[Mapping[str, Any], int | None, str], dict[str, Any]] | None = None
            ) -> dict[str, Any]:
    """Run one sweep point (in a worker); never raises: a failure becomes status "error".
    ``run(params, seed, out_dir)`` runs it instead of :func:`sim.study.results.run_scenario`
    and returns its summary (a function a worker can import, e.g.
    :func:`sim.cli.sweep.run_collective`)."""
    from sim.study.results import run_scenario

    t0 = time.perf_counter()
    out = keep_dir or tempfile.mkdtemp(prefix="lossless-sweep-")
    row: dict[str, Any] = {"run_id": spec["run_id"], "scenario": spec["scenario"],
                           "seed": spec["seed"], "params": dict(spec["params"])}
    try:
        if run is not None:
            summary = run(spec["params"], spec["seed"], out)
        else:
            summary = run_scenario(spec["scenario"], params=dict(spec["params"]),
                                   seed=spec["seed"], out_dir=out, plots=False,
                                   progress=False)
        row.update(status="ok", error="", figures=flatten_summary(summary))
        if row["seed"] is None:
            row["seed"] = summary.get("seed")
    except Exception as e:  # recorded, the sweep goes on
        row.update(status="error", error=f"{type(e).__name__}: {e}", figures={})
    finally:
        if keep_dir is None:
            shutil.rmtree(out, ignore_errors=True)
    row["wall_s"] = round(time.perf_counter() - t0, 3)
    return row


def _row_problem(row: Any) -> str | None:
    """Why a parsed results.jsonl line is not a result row, or None."""
    if not isinstance(row, dict):
        return f"not a result row (a JSON {type(row).__name__})"
    if not isinstance(row.get("run_id"), str) or not row["run_id"]:
        return "not a result row (no run_id)"
    if not isinstance(row.get("params"), dict):
        return "not a result row ('params' is not an object)"
    if not isinstance(row.get("status"), str):
        return "not a result row ('status' is not a string)"
    if not isinstance(row.get("figures", {}), dict):
        return "not a result row ('figures' is not an object)"
    return None


def _parse_line(raw: bytes) -> tuple[dict[str, Any] | None, str | None]:
    """(row, None) or (None, why) for one line of results.jsonl."""
    try:
        row = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return None, "not UTF-8, skipped"
    except json.JSONDecodeError as e:
        return None, f"not JSON ({e.msg}), skipped"
    why = _row_problem(row)
    return (None, f"{why}, skipped") if why else (row, None)


def load_rows(out_dir: str | os.PathLike[str],
              warn: Callable[[str], None] | None = _warn_stderr) -> list[dict[str, Any]]:
    """The rows of ``results.jsonl`` (the last row per run_id wins).  A line that is not a
    row (torn by an interrupted write, not JSON, or JSON of another shape: ``[]``, ``3``, an
    object without ``run_id``) is skipped with ``warn("FILE:LINE: why")``."""
    path = os.path.join(os.fspath(out_dir), RESULTS)
    rows: dict[str, dict[str, Any]] = {}
    if not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            row, why = _parse_line(raw)
            if row is None:
                if warn is not None:
                    warn(f"{path}:{n}: {why}")
                continue
            rows[row["run_id"]] = row
    return list(rows.values())


def repair_tail(out_dir: str | os.PathLike[str],
                warn: Callable[[str], None] | None = _warn_stderr) -> None:
    """Make ``results.jsonl`` safe to append to: a last line without its newline (a write
    cut short) is terminated if it is a whole row, else cut off; either with a warning
    naming ``FILE:LINE``.  (Appending to a torn line would glue the next row onto it, and
    that finished run would be lost and re-run.)"""
    path = os.path.join(os.fspath(out_dir), RESULTS)
    try:
        f = open(path, "r+b")
    except FileNotFoundError:
        return
    with f:
        size = f.seek(0, os.SEEK_END)
        if size == 0:
            return
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        # find the start of the last line
        pos, chunk = size, 1 << 16
        start = 0
        while pos > 0:
            lo = max(0, pos - chunk)
            f.seek(lo)
            buf = f.read(pos - lo)
            i = buf.rfind(b"\n")
            if i >= 0:
                start = lo + i + 1
                break
            pos = lo
        f.seek(0)
        line_no = f.read(start).count(b"\n") + 1
        f.seek(start)
        tail = f.read()
        row, _why = _parse_line(tail)
        if row is not None:
            f.seek(size)
            f.write(b"\n")
            msg = "last line had no newline (an interrupted write); terminated, row kept"
        else:
            f.truncate(start)
            msg = (f"torn last line (an interrupted write, {len(tail)} bytes) cut; its run "
                   f"will be run again")
        f.flush()
        os.fsync(f.fileno())
    if warn is not None:
        warn(f"{path}:{line_no}: {msg}")


def _scenario_key(scenario: str) -> str:
    """How two sweeps' scenarios compare: a file by its absolute path, a built-in by name."""
    from sim.scenarios.loader import is_file_ref

    return os.path.abspath(scenario) if is_file_ref(scenario) else scenario


def _folder_scenario(out: str) -> str | None:
    """The scenario of the sweep in ``out`` (sweep.json, else results.jsonl rows); None when
    ``out`` holds no sweep.  An unreadable sweep.json is an OutputError."""
    meta = os.path.join(out, META)
    if os.path.exists(meta):
        try:
            with open(meta, encoding="utf-8") as f:
                doc = json.load(f)
            return str(doc["scenario"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise OutputError(f"{meta}: not a sweep description ({e}); use another --out or "
                              f"--force") from None
    for row in load_rows(out, warn=None):
        return str(row.get("scenario"))
    return None


def _check_folder(out: str, scenario: str, force: bool) -> None:
    """Refuse (OutputError) a folder holding another scenario's sweep, or a non-empty folder
    that is not a sweep, unless ``force`` (wire.atomic.check_output_dir's rule for the
    rest: not a file, writable)."""
    check_output_dir(out, force=True)
    if not os.path.isdir(out):
        return
    try:
        other = _folder_scenario(out)
    except OutputError:
        if force:
            return
        raise
    if force:
        return
    if other is None:
        if [n for n in os.listdir(out) if n != LOCK]:
            raise OutputError(f"{out}: folder is not empty and holds no sweep; choose another "
                              f"--out or pass --force to sweep into it")
    elif _scenario_key(other) != _scenario_key(scenario):
        raise OutputError(f"{out}: holds a sweep of scenario {other!r} ({META}), not "
                          f"{scenario!r}; choose another --out or pass --force to start "
                          f"afresh there")


class _Lock:
    """``fcntl.flock`` on DIR/.sweep.lock for the life of a sweep (released by the kernel if
    the process dies); the file holds the owner's pid for the message of a second sweep."""

    def __init__(self, out: str) -> None:
        import fcntl

        self.path = os.path.join(out, LOCK)
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            pid = os.read(self.fd, 32).decode("ascii", "replace").strip() or "?"
            os.close(self.fd)
            raise OutputError(f"{out}: in use by another sweep (pid {pid})") from None
        os.ftruncate(self.fd, 0)
        os.write(self.fd, f"{os.getpid()}\n".encode())

    def release(self) -> None:
        os.close(self.fd)  # closing drops the flock


def _start_afresh(out: str) -> None:
    """``force``: remove an earlier sweep's files (other files are left)."""
    for name in _OURS:
        p = os.path.join(out, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p)
        elif os.path.lexists(p):
            os.unlink(p)


def sweep(scenario: str, grid: Mapping[str, Sequence[Any]], *, out_dir: str | os.PathLike[str],
          seeds: int | None = None, seed_base: int = 0, workers: int | None = None,
          scheduler: str | None = None, keep_runs: bool = False, retry_failed: bool = False,
          progress: bool | None = None,
          on_row: Callable[[dict[str, Any]], None] | None = None, force: bool = False,
          warn: Callable[[str], None] | None = _warn_stderr,
          run: Callable[[Mapping[str, Any], int | None, str], dict[str, Any]] | None = None,
          check: Callable[[dict[str, Any], int | None], None] | None = None
          ) -> list[dict[str, Any]]:
    """Run the sweep; returns the rows in sweep order (finished earlier ones included).

    Each run is :func:`sim.study.results.run_scenario` of ``scenario``, or ``run(params,
    seed, out_dir)`` returning its summary (:func:`run_one`; ``scenario`` then only names
    the sweep), whose parameters ``check(params, seed)`` refuses (ValueError) before
    anything runs (default: building the scenario); ``lossless sweep collective`` passes
    :func:`sim.cli.sweep.run_collective` and :func:`sim.cli.sweep.check_collective`.

    ``workers=None``: a local Dask cluster with one single-threaded worker process per CPU
    this process may use (:func:`local_workers`); ``workers=N``: N such workers, at most that
    many; ``workers=0``: in this process, no Dask; ``scheduler``: an existing Dask
    scheduler's address (``tcp://host:8786``) instead of a local cluster.  A grid of more
    than :data:`MAX_RUNS` runs is refused (ValueError) before anything is expanded or built.

    ``out_dir`` is locked for the sweep; a folder in use by another sweep, holding another
    scenario's sweep or non-empty without a sweep is refused (:class:`wire.atomic.OutputError`),
    the latter two unless ``force`` (which removes an earlier sweep's results and starts
    afresh).  Problems with ``results.jsonl`` lines are reported with ``warn``.
    """
    why = workers_problem(workers) if scheduler is None else None
    if why:
        raise ValueError(f"workers {workers}: {why}; for more, a Dask cluster: "
                         f"scheduler=ADDRESS")
    if check is None:
        from sim.scenarios.loader import build

        def check(params: dict[str, Any], seed: int | None) -> None:
            build(scenario, params, seed)
    if seeds is not None and seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    out = os.fspath(out_dir)
    runs = check_size(grid, seeds)  # before anything is expanded
    if not runs:
        raise ValueError("the sweep is empty")
    # validate every parameter combination before starting anything (names the bad key)
    keys = list(grid)
    first_seed = seed_base if seeds else None
    seen: set[str] = set()
    for combo in itertools.product(*(grid[k] for k in keys)):
        params = dict(zip(keys, combo, strict=True))
        key = json.dumps(params, sort_keys=True, default=str)
        if key not in seen:
            if not seen and seeds and seeds > 1:  # the last seed too (a seed's range)
                check(dict(params), seed_base + seeds - 1)
            seen.add(key)
            check(params, first_seed)
    del seen
    _check_folder(out, scenario, force)  # before creating anything in a user's folder
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{out}: cannot create: {e.strerror or e}") from None
    lock = _Lock(out)
    try:
        _check_folder(out, scenario, force)  # again, now that no other sweep can write
        if force:
            try:
                other = _folder_scenario(out)
            except OutputError:  # an unreadable sweep.json: not a sweep we can resume
                other = ""
            if other is not None and _scenario_key(other) != _scenario_key(scenario):
                _start_afresh(out)  # another scenario's results must not be mixed in
        return _sweep_locked(scenario, grid, runs, out, seeds, seed_base, workers, scheduler,
                             run, keep_runs, retry_failed, progress, on_row, warn)
    finally:
        lock.release()


def _sweep_locked(scenario, grid, runs, out, seeds, seed_base, workers, scheduler, run,
                  keep_runs, retry_failed, progress, on_row, warn) -> list[dict[str, Any]]:
    repair_tail(out, warn)
    done = {r["run_id"]: r for r in load_rows(out, warn)
            if r.get("status") == "ok" or not retry_failed}

    def specs() -> Iterator[RunSpec]:  # the grid again, one spec at a time
        return iter_specs(scenario, grid, seeds, seed_base)

    def todo() -> Iterator[RunSpec]:
        return (s for s in specs() if s["run_id"] not in done)

    with atomic_file(os.path.join(out, META), "w", encoding="utf-8") as f:
        json.dump({"scenario": scenario, "grid": {k: list(v) for k, v in grid.items()},
                   "seeds": seeds, "seed_base": seed_base, "runs": runs}, f, indent=2)
        f.write("\n")
    left = sum(1 for _ in todo())
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=runs, initial=runs - left, unit="run", desc=scenario,
                   file=sys.stderr)
    results_path = os.path.join(out, RESULTS)
    keep = (lambda s: os.path.join(out, "runs", s["run_id"])) if keep_runs else (lambda s: None)

    def record(row: dict[str, Any]) -> None:
        with open(results_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True, default=str) + "\n")  # one write per row
        done[row["run_id"]] = row
        if bar is not None:
            bar.update(1)
        if on_row is not None:
            on_row(row)

    try:
        if left and workers == 0 and scheduler is None:
            for s in todo():
                record(run_one(s, keep(s), run))
        elif left:
            _run_dask(todo(), keep, record, workers, scheduler, run)
    finally:
        if bar is not None:
            bar.close()
        rows = [done[s["run_id"]] for s in specs() if s["run_id"] in done]
        with atomic_file(os.path.join(out, TABLE), "w", newline="", encoding="utf-8") as f:
            _write_table(rows, f, list(grid))
    return rows


def _run_dask(todo: Iterator[RunSpec], keep, record, workers: int | None,
              scheduler: str | None, run: Any = None) -> None:
    """Run ``todo`` on Dask, at most max(_IN_FLIGHT, twice the workers' threads) submitted
    at a time (a new one as each finishes), recording each row as it comes."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise RuntimeError("lossless sweep needs dask.distributed (pip install "
                           "'dask[distributed]'), or use --workers 0") from None
    cluster = None
    if scheduler is not None:
        client = Client(scheduler)
    else:
        n = workers or local_workers()
        # the workers' own log lines (a heartbeat that races the shutdown prints a
        # traceback on stderr after a sweep that went well) are not the user's business: a
        # run that fails comes back as its row's error
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None, silence_logs=logging.CRITICAL)
        client = Client(cluster)
    try:
        pending: dict[str, RunSpec] = {}  # future key -> its spec
        running = as_completed()

        def submit(s: RunSpec) -> None:
            fut = client.submit(run_one, dict(s), keep(s), run, pure=False,
                                key=f"run-{s['run_id']}")
            pending[fut.key] = s
            running.add(fut)

        threads = sum(client.nthreads().values())
        for s in itertools.islice(todo, max(_IN_FLIGHT, 2 * threads)):
            submit(s)
        for fut in running:
            spec = pending.pop(fut.key)
            try:
                row = fut.result()
            except Exception as e:  # a worker died: record, go on
                row = {"run_id": spec["run_id"], "scenario": spec["scenario"],
                       "seed": spec["seed"], "params": dict(spec["params"]),
                       "status": "error", "error": f"{type(e).__name__}: {e}",
                       "figures": {}, "wall_s": 0.0}
            record(row)
            nxt = next(todo, None)
            if nxt is not None:
                submit(nxt)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def write_table(rows: Sequence[Mapping[str, Any]], path: str, param_keys: Sequence[str]
                ) -> None:
    """``runs.csv``: run_id, scenario, the swept parameters, seed, status, error, wall_s and
    every figure (union of the rows' figure names, sorted)."""
    with atomic_file(path, "w", newline="", encoding="utf-8") as f:
        _write_table(rows, f, param_keys)


def _write_table(rows: Sequence[Mapping[str, Any]], f, param_keys: Sequence[str]) -> None:
    figures = sorted({k for r in rows for k in r.get("figures", {})})
    cols = ["run_id", "scenario", *param_keys, "seed", "status", "error", "wall_s", *figures]
    w = csv.writer(f)
    w.writerow(cols)
    for r in rows:
        p, fig = r.get("params", {}), r.get("figures", {})
        w.writerow([r.get("run_id"), r.get("scenario"), *(p.get(k) for k in param_keys),
                    r.get("seed"), r.get("status"), r.get("error"), r.get("wall_s"),
                    *(fig.get(k) for k in figures)])


#: two-sided 95 % Student t quantiles for n - 1 degrees of freedom (n = 2..30), then 1.96.
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
        2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
        2.060, 2.056, 2.052, 2.048, 2.045)


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95 % confidence interval of the mean over seeds)."""
    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, 0.0
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    t = _T95[n - 2] if n - 2 < len(_T95) else 1.96
    return mean, t * (var / n) ** 0.5


_ABSENT = object()
#: What a figure that is no finite number means, by kind (sweep-plot's note).
_NO_VALUE = {
    "NaN": "NaN (undefined for the run, e.g. 0/0)",
    "null": "null (not defined for the run, e.g. no traffic)",
    "absent": "absent (the run does not report it)",
    "infinite": "infinite",
    "not a number": "not a number",
}


def _no_value(v: Any) -> str | None:
    """Why figure value ``v`` cannot be averaged (a key of :data:`_NO_VALUE`), or None."""
    if v is _ABSENT:
        return "absent"
    if v is None:
        return "null"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return "not a number"
    if math.isnan(v):
        return "NaN"
    return "infinite" if math.isinf(v) else None


def _tally(left_out: Sequence[tuple[Any, Any, str]]) -> str:
    """``"2 NaN (undefined ...), 1 null (...)"``: the runs left out by kind."""
    counts: dict[str, int] = {}
    for _g, _x, why in left_out:
        counts[why] = counts.get(why, 0) + 1
    return ", ".join(f"{counts[k]} {text}" for k, text in _NO_VALUE.items() if k in counts)


def _order(v: Any) -> tuple:
    """Sort key: numbers by value, then everything else by text."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return (0, v, "")
    return (1, 0, str(v))



def _text(v: object) -> str:
    """A value as a user writes it on the command line (``true``, not Python's ``True``)."""
    return str(v).lower() if isinstance(v, bool) else str(v)

def plot_sweep(out_dir: str | os.PathLike[str], x: str, y: str, by: str | None = None,
               path: str | None = None, where: Mapping[str, Any] | None = None,
               warn: Callable[[str], None] | None = _warn_stderr) -> str:
    """A PNG of figure ``y`` against swept parameter ``x`` (one line per value of ``by``),
    mean over seeds with a 95 % confidence band; returns the file written.

    Every other parameter that varies in the sweep must be fixed with ``where`` (name ->
    value), so that the band is over seeds only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in load_rows(out_dir, warn) if r.get("status") == "ok"]
    if not rows:
        raise ValueError(f"no finished runs in {os.path.join(os.fspath(out_dir), RESULTS)}")
    known_p = sorted({k for r in rows for k in r["params"]})
    known_f = sorted({k for r in rows for k in r.get("figures", {})})
    for name, val, known in (("--x", x, known_p), ("--by", by, known_p),
                             ("--y", y, known_f)):
        if val is not None and val not in known:
            raise ValueError(f"{name} {val!r}: not in this sweep; known: {known}")
    for k, v in (where or {}).items():
        if k not in known_p:
            raise ValueError(f"--where {k}: not a swept parameter; known: {known_p}")
        rows = [r for r in rows if r["params"].get(k) == v]
        if not rows:
            raise ValueError(f"--where {k}={v!r}: no finished run has that value")
    for k in known_p:
        if k in (x, by) or k in (where or {}):
            continue
        values = sorted({json.dumps(r["params"].get(k)) for r in rows})
        if len(values) > 1:
            raise ValueError(f"parameter {k!r} also varies ({', '.join(values)}): fix it with "
                             f"--where {k}=VALUE or draw it with --by {k}")
    xs_all = {_order(r["params"].get(x))[0] for r in rows}
    if len(xs_all) > 1:
        raise ValueError(f"--x {x!r}: mixes numbers and other values "
                         f"({sorted({repr(r['params'].get(x)) for r in rows})})")
    groups: dict[Any, dict[Any, list[float]]] = {}
    left_out: list[tuple[Any, Any, str]] = []  # (group, x, why) of runs without a finite y
    for r in rows:
        v = r.get("figures", {}).get(y, _ABSENT)
        g = r["params"].get(by) if by else None
        why = _no_value(v)
        if why:
            left_out.append((g, r["params"].get(x), why))
            continue
        groups.setdefault(g, {}).setdefault(r["params"].get(x), []).append(float(v))
    if not groups:
        raise ValueError(f"--y {y!r}: no finished run has a finite value "
                         f"({_tally(left_out)})")
    note = None
    if left_out:
        at = sorted({xv for _g, xv, _w in left_out}, key=_order)
        shown = ", ".join(str(v) for v in at[:8]) + (", ..." if len(at) > 8 else "")
        note = (f"{len(left_out)} of {len(rows)} runs have no finite {y}, left out of the "
                f"means: {_tally(left_out)}; at {x} = {shown}")
        if warn is not None:
            warn(f"{os.fspath(out_dir)}: {note}")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors: dict[Any, str] = {}
    for g in sorted(groups, key=_order):
        pts = sorted(groups[g].items(), key=lambda kv: _order(kv[0]))
        xs = [p[0] for p in pts]
        stats = [mean_ci(p[1]) for p in pts]
        m = [s[0] for s in stats]
        h = [s[1] for s in stats]
        line = ax.plot(xs, m, marker="o", label=f"{by} = {g}" if by else y)
        colors[g] = line[0].get_color()
        ax.fill_between(xs, [a - b for a, b in zip(m, h, strict=True)],
                        [a + b for a, b in zip(m, h, strict=True)], alpha=0.2,
                        color=colors[g])
    # points with no finite value at all: an x on the axis (in the line's colour)
    empty: dict[Any, set[Any]] = {}
    for g, xv, _why in left_out:
        if xv not in groups.get(g, {}):
            empty.setdefault(g, set()).add(xv)
    for i, g in enumerate(sorted(empty, key=_order)):
        xs = sorted(empty[g], key=_order)
        ax.plot(xs, [0.0] * len(xs), transform=ax.get_xaxis_transform(), marker="x",
                markersize=9, linestyle="none", clip_on=False, color=colors.get(g, "0.4"),
                label="no finite value" if i == 0 else None)
    fixed = ", ".join(f"{k}={_text(v)}" for k, v in (where or {}).items())
    ax.set(xlabel=x, ylabel=y, title=f"{y} vs {x} (mean over seeds, 95 % CI)"
           + (f"\n{fixed}" if fixed else ""))
    ax.legend(fontsize="small")
    if note:
        fig.text(0.01, 0.01, fill(note, 120), fontsize="x-small", color="0.3", va="bottom")
        fig.tight_layout(rect=(0, 0.06, 1, 1))
    else:
        fig.tight_layout()
    stem = f"{y}_vs_{x}" + (f"_by_{by}" if by else "") + "".join(
        f"_{k}={_text(v)}" for k, v in (where or {}).items())
    path = path or os.path.join(os.fspath(out_dir), stem.replace("/", "_") + ".png")
    try:
        with atomic_file(path, "wb") as f:
            fig.savefig(f, format="png", dpi=100)
    finally:
        plt.close(fig)
    return path

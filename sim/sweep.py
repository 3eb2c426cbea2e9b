"""Parameter sweeps and many-seed runs (``lossless sweep``; docs/sweeps.md).

A sweep is the cartesian product of parameter values (and seeds) of one scenario; every
combination is an independent run of :func:`sim.results.run_scenario`.  Runs go to a Dask
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
"""

from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any

__all__ = ["RunSpec", "expand", "parse_values", "run_one", "sweep", "load_rows",
           "flatten_summary", "plot_sweep"]

RESULTS = "results.jsonl"
TABLE = "runs.csv"


class RunSpec(dict):
    """One run: ``scenario``, ``params`` (dict), ``seed`` (int or None), ``run_id``."""


def parse_values(text: str) -> list[Any]:
    """``"a,b,c"`` (TOML-style values) or ``"lo:hi:step"`` (inclusive, exact decimal steps)."""
    from .scenarios import _parse_text

    text = text.strip()
    if text.count(":") == 2 and "," not in text:
        try:
            lo, hi, step = (Decimal(x) for x in text.split(":"))
        except InvalidOperation:
            raise ValueError(f"range {text!r}: expected numbers lo:hi:step") from None
        if step <= 0 or hi < lo:
            raise ValueError(f"range {text!r}: need step > 0 and hi >= lo")
        n = int((hi - lo) / step) + 1
        if n > 100_000:
            raise ValueError(f"range {text!r} has {n} values")
        ints = all(x == x.to_integral_value() for x in (lo, step))
        return [int(lo + i * step) if ints else float(lo + i * step) for i in range(n)]
    return [_parse_text(v.strip()) for v in text.split(",") if v.strip()]


def _run_id(scenario: str, params: Mapping[str, Any], seed: int | None) -> str:
    key = json.dumps([scenario, sorted(params.items()), seed], sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def expand(scenario: str, grid: Mapping[str, Sequence[Any]], seeds: int | None = None,
           seed_base: int = 0) -> list[RunSpec]:
    """Every combination of ``grid`` values (in the order given), times ``seeds`` seeds
    (``seed_base .. seed_base + seeds - 1``; None: the scenario's own seed)."""
    keys = list(grid)
    seed_list: list[int | None] = [None] if not seeds else list(range(seed_base,
                                                                       seed_base + seeds))
    specs = []
    for combo in itertools.product(*(grid[k] for k in keys)):
        params = dict(zip(keys, combo, strict=True))
        for seed in seed_list:
            specs.append(RunSpec(scenario=scenario, params=params, seed=seed,
                                 run_id=_run_id(scenario, params, seed)))
    return specs


def flatten_summary(summary: Mapping[str, Any]) -> dict[str, Any]:
    """Every scalar of a summary.json (nested keys joined with dots; lists left out), plus
    per-flow aggregates: flows, flows_delivered_bytes, flow throughput min/mean/max (bps)
    and the largest finite FCT."""
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
    return out


def _flat(d: Mapping[str, Any], prefix: str) -> Iterable[tuple[str, Any]]:
    for k, v in d.items():
        if isinstance(v, Mapping):
            yield from _flat(v, f"{prefix}{k}.")
        elif isinstance(v, bool | int | float | str) or v is None:
            yield f"{prefix}{k}", v


def run_one(spec: Mapping[str, Any], keep_dir: str | None = None) -> dict[str, Any]:
    """Run one sweep point (in a worker); never raises: a failure becomes status "error"."""
    from .results import run_scenario

    t0 = time.perf_counter()
    out = keep_dir or tempfile.mkdtemp(prefix="lossless-sweep-")
    row: dict[str, Any] = {"run_id": spec["run_id"], "scenario": spec["scenario"],
                           "seed": spec["seed"], "params": dict(spec["params"])}
    try:
        summary = run_scenario(spec["scenario"], params=dict(spec["params"]),
                               seed=spec["seed"], out_dir=out, plots=False, progress=False)
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


def load_rows(out_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of ``results.jsonl`` (the last row per run_id wins); a torn last line (an
    interrupted write) is ignored."""
    path = os.path.join(os.fspath(out_dir), RESULTS)
    rows: dict[str, dict[str, Any]] = {}
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            rows[row["run_id"]] = row
    return list(rows.values())


def sweep(scenario: str, grid: Mapping[str, Sequence[Any]], *, out_dir: str | os.PathLike[str],
          seeds: int | None = None, seed_base: int = 0, workers: int | None = None,
          scheduler: str | None = None, keep_runs: bool = False, retry_failed: bool = False,
          progress: bool | None = None,
          on_row: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run the sweep; returns the rows in sweep order (finished earlier ones included).

    ``workers=None``: a local Dask cluster with one single-threaded worker process per CPU;
    ``workers=N``: N such workers; ``workers=0``: in this process, no Dask; ``scheduler``: an
    existing Dask scheduler's address (``tcp://host:8786``) instead of a local cluster.
    """
    from .scenarios.loader import build

    if workers is not None and workers < 0:
        raise ValueError(f"workers must be >= 0 (0: in this process), got {workers}")
    if seeds is not None and seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    out = os.fspath(out_dir)
    os.makedirs(out, exist_ok=True)
    specs = expand(scenario, grid, seeds, seed_base)
    if not specs:
        raise ValueError("the sweep is empty")
    # validate every parameter combination before starting anything (names the bad key)
    seen: set[str] = set()
    for s in specs:
        key = json.dumps(s["params"], sort_keys=True, default=str)
        if key not in seen:
            seen.add(key)
            build(scenario, dict(s["params"]), s["seed"])
    done = {r["run_id"]: r for r in load_rows(out)
            if r.get("status") == "ok" or not retry_failed}
    todo = [s for s in specs if s["run_id"] not in done]
    with open(os.path.join(out, "sweep.json"), "w", encoding="utf-8") as f:
        json.dump({"scenario": scenario, "grid": {k: list(v) for k, v in grid.items()},
                   "seeds": seeds, "seed_base": seed_base, "runs": len(specs)}, f, indent=2)
        f.write("\n")
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=len(specs), initial=len(specs) - len(todo), unit="run",
                   desc=scenario, file=sys.stderr)
    results_path = os.path.join(out, RESULTS)
    keep = (lambda s: os.path.join(out, "runs", s["run_id"])) if keep_runs else (lambda s: None)

    def record(row: dict[str, Any]) -> None:
        with open(results_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, sort_keys=True, default=str) + "\n")
        done[row["run_id"]] = row
        if bar is not None:
            bar.update(1)
        if on_row is not None:
            on_row(row)

    try:
        if todo and workers == 0 and scheduler is None:
            for s in todo:
                record(run_one(s, keep(s)))
        elif todo:
            _run_dask(todo, keep, record, workers, scheduler)
    finally:
        if bar is not None:
            bar.close()
        rows = [done[s["run_id"]] for s in specs if s["run_id"] in done]
        write_table(rows, os.path.join(out, TABLE), list(grid))
    return rows


def _run_dask(todo: list[RunSpec], keep, record, workers: int | None,
              scheduler: str | None) -> None:
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise RuntimeError("lossless sweep needs dask.distributed (pip install "
                           "'dask[distributed]'), or use --workers 0") from None
    cluster = None
    if scheduler is not None:
        client = Client(scheduler)
    else:
        n = workers or os.cpu_count() or 1
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
    try:
        futures = [client.submit(run_one, dict(s), keep(s), pure=False, key=f"run-{s['run_id']}")
                   for s in todo]
        for fut in as_completed(futures):
            try:
                row = fut.result()
            except Exception as e:  # a worker died: record, go on
                spec = next(s for s in todo if f"run-{s['run_id']}" == fut.key)
                row = {"run_id": spec["run_id"], "scenario": spec["scenario"],
                       "seed": spec["seed"], "params": dict(spec["params"]),
                       "status": "error", "error": f"{type(e).__name__}: {e}",
                       "figures": {}, "wall_s": 0.0}
            record(row)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def write_table(rows: Sequence[Mapping[str, Any]], path: str, param_keys: Sequence[str]
                ) -> None:
    """``runs.csv``: run_id, scenario, the swept parameters, seed, status, error, wall_s and
    every figure (union of the rows' figure names, sorted)."""
    figures = sorted({k for r in rows for k in r.get("figures", {})})
    cols = ["run_id", "scenario", *param_keys, "seed", "status", "error", "wall_s", *figures]
    with open(path, "w", newline="", encoding="utf-8") as f:
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


def _order(v: Any) -> tuple:
    """Sort key: numbers by value, then everything else by text."""
    if isinstance(v, int | float) and not isinstance(v, bool):
        return (0, v, "")
    return (1, 0, str(v))


def plot_sweep(out_dir: str | os.PathLike[str], x: str, y: str, by: str | None = None,
               path: str | None = None, where: Mapping[str, Any] | None = None) -> str:
    """A PNG of figure ``y`` against swept parameter ``x`` (one line per value of ``by``),
    mean over seeds with a 95 % confidence band; returns the file written.

    Every other parameter that varies in the sweep must be fixed with ``where`` (name ->
    value), so that the band is over seeds only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in load_rows(out_dir) if r.get("status") == "ok"]
    if not rows:
        raise ValueError(f"no finished runs in {os.path.join(os.fspath(out_dir), RESULTS)}")
    known_p = sorted({k for r in rows for k in r["params"]})
    known_f = sorted({k for r in rows for k in r["figures"]})
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
    groups: dict[Any, dict[Any, list[float]]] = {}
    for r in rows:
        v = r["figures"].get(y)
        if not isinstance(v, int | float) or isinstance(v, bool):
            continue
        g = r["params"].get(by) if by else None
        groups.setdefault(g, {}).setdefault(r["params"].get(x), []).append(float(v))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for g in sorted(groups, key=_order):
        pts = sorted(groups[g].items(), key=lambda kv: _order(kv[0]))
        xs = [p[0] for p in pts]
        stats = [mean_ci(p[1]) for p in pts]
        m = [s[0] for s in stats]
        h = [s[1] for s in stats]
        line = ax.plot(xs, m, marker="o", label=f"{by} = {g}" if by else y)
        ax.fill_between(xs, [a - b for a, b in zip(m, h, strict=True)],
                        [a + b for a, b in zip(m, h, strict=True)], alpha=0.2,
                        color=line[0].get_color())
    fixed = ", ".join(f"{k}={v}" for k, v in (where or {}).items())
    ax.set(xlabel=x, ylabel=y, title=f"{y} vs {x} (mean over seeds, 95 % CI)"
           + (f"\n{fixed}" if fixed else ""))
    ax.legend(fontsize="small")
    fig.tight_layout()
    stem = f"{y}_vs_{x}" + (f"_by_{by}" if by else "") + "".join(
        f"_{k}={v}" for k, v in (where or {}).items())
    path = path or os.path.join(os.fspath(out_dir), stem.replace("/", "_") + ".png")
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

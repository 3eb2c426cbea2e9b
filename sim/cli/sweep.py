"""``lossless sweep`` and ``lossless sweep-plot`` (docs/reference/sweep.md,
docs/reference/sweep-plot.md)."""

from __future__ import annotations

import argparse
import os
import time

from sim.cli.argtypes import err as _err
from sim.cli.argtypes import integer

__all__ = ["add_parsers"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


def _grid_item(text: str) -> tuple[str, str]:
    key, sep, values = text.partition("=")
    if not sep or not key.strip() or not values.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=V1,V2,... or KEY=LO:HI:STEP, got "
                                         f"{text!r}")
    return key.strip(), values.strip()


def cmd_sweep(args: argparse.Namespace) -> int:
    from sim.scenarios import ScenarioError
    from sim.scenarios.loader import scenario_name
    from sim.study.sweep import parse_values, sweep, workers_problem

    why = workers_problem(args.workers)
    if why:
        _err(f"--workers {args.workers}: {why}; for more, a Dask cluster: --scheduler "
             f"ADDRESS")
        return EXIT_USAGE
    try:
        name = scenario_name(args.scenario)
        grid = {}
        for key, text in args.param or ():
            if key in grid:
                raise ValueError(f"-p {key}: given twice")
            try:
                grid[key] = parse_values(text)
            except ValueError as e:
                raise ValueError(f"-p {key}: {e}") from None
    except (ScenarioError, ValueError) as e:
        _err(str(e))
        return EXIT_USAGE
    out = args.out or os.path.join("out", f"sweep_{name}")
    start = time.perf_counter()
    try:
        rows = sweep(args.scenario, grid, out_dir=out, seeds=args.seeds,
                     seed_base=args.seed_base, workers=args.workers, scheduler=args.scheduler,
                     keep_runs=args.keep_runs, retry_failed=args.retry_failed,
                     progress=None if not args.no_progress else False, force=args.force)
    except (ScenarioError, ValueError, RuntimeError, OSError) as e:
        _err(str(e))
        return EXIT_USAGE
    failed = [r for r in rows if r["status"] != "ok"]
    _err(f"sweep {name}: {len(rows)} run(s) ({len(failed)} failed) in "
         f"{time.perf_counter() - start:.1f} s; table {os.path.join(out, 'runs.csv')}")
    for r in failed[:5]:
        _err(f"  run {r['run_id']} {r['params']} seed {r['seed']}: {r['error']}")
    return EXIT_FAIL if failed else EXIT_OK


def cmd_sweep_plot(args: argparse.Namespace) -> int:
    from sim.scenarios import ScenarioError, parse_text
    from sim.study.sweep import plot_sweep
    from wire.atomic import OutputError

    where = {}
    for k, v in args.where or ():
        if k in where:
            _err(f"--where {k}: given twice")
            return EXIT_USAGE
        try:
            where[k] = parse_text(v)
        except ScenarioError as e:
            _err(f"--where {k}: {e}")
            return EXIT_USAGE
    try:
        print(plot_sweep(args.dir, args.x, args.y, args.by, args.output, where))
    except OutputError as e:  # the figure's file: the message names it
        _err(str(e))
        return EXIT_USAGE
    except (OSError, ValueError) as e:
        _err(f"{args.dir}: {e}")
        return EXIT_USAGE
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "sweep", help="run a scenario over parameter values and seeds (Dask)",
        description="Run the cartesian product of parameter values (and seeds) of a "
                    "scenario, each as an independent task on a local Dask cluster or an "
                    "existing scheduler; results go to DIR/results.jsonl and DIR/runs.csv; "
                    "an interrupted sweep resumes where it stopped (docs/reference/sweep.md).")
    s.add_argument("scenario", metavar="SCENARIO", help="built-in name or TOML file")
    s.add_argument("-p", "--param", type=_grid_item, action="append", metavar="KEY=VALUES",
                   help="swept parameter: KEY=V1,V2,... or KEY=LO:HI:STEP (inclusive); a "
                        "single value fixes the parameter (repeatable)")
    s.add_argument("--seeds", type=integer(1), metavar="N",
                   help="run every point with seeds SEED_BASE..SEED_BASE+N-1")
    s.add_argument("--seed-base", type=integer(0, 2**63 - 1), default=0, metavar="N")
    s.add_argument("--out", metavar="DIR", help="output directory (default out/sweep_<name>)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--workers", type=integer(0), metavar="N",
                   help="local Dask worker processes, at most one per CPU this process may "
                        "use (the default; 0: run in this process without Dask)")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786")
    s.add_argument("--keep-runs", action="store_true",
                   help="keep every run's output folder in DIR/runs/<run_id>")
    s.add_argument("--retry-failed", action="store_true",
                   help="re-run the runs recorded as failed")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    s.add_argument("--force", action="store_true",
                   help="sweep into DIR even if it holds another scenario's sweep (its "
                        "results are removed) or other files")
    s.set_defaults(func=cmd_sweep)

    p = sub.add_parser("sweep-plot", help="plot a sweep's figure against a parameter",
                       description="A PNG of a figure (a column of runs.csv, e.g. "
                                   "bottleneck.utilisation) against one swept parameter, "
                                   "optionally one line per value of a second, mean over "
                                   "seeds with a 95 % confidence band.")
    p.add_argument("dir", metavar="DIR")
    p.add_argument("--x", required=True, metavar="PARAM")
    p.add_argument("--y", required=True, metavar="FIGURE")
    p.add_argument("--by", metavar="PARAM", help="one line per value of this parameter")
    p.add_argument("--where", type=_grid_item, action="append", metavar="PARAM=VALUE",
                   help="only runs with this value (repeatable); every other parameter that "
                        "varies must be fixed this way or drawn with --by")
    p.add_argument("-o", "--output", metavar="FILE.png")
    p.set_defaults(func=cmd_sweep_plot)

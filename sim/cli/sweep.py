"""``lossless sweep`` and ``lossless sweep-plot`` (docs/reference/sweep.md,
docs/reference/sweep-plot.md)."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Mapping
from typing import Any

from sim.cli.argtypes import err as _err
from sim.cli.argtypes import integer

__all__ = ["COLLECTIVE", "COLLECTIVE_OPTIONS", "add_parsers", "check_collective",
           "collective_argv", "run_collective"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2


#: The sweep target whose runs are ``lossless collective`` calls of one size each
#: (:func:`collective_argv`), not a scenario: ``lossless sweep collective -p size=16M
#: -p topology=fattree -p k=32 ...``.
COLLECTIVE = "collective"
#: Keys of a collective sweep that are ``lossless collective``'s options (with ``collective``
#: and ``size``; ``topology`` is ``--fabric KIND|FILE``, ``-p fabric=`` being the transport,
#: roce or ib); every other key is one of its ``-p KEY=VALUE``.
COLLECTIVE_OPTIONS = {"topology": "--fabric", "algo": "--algo", "proto": "--proto",
                      "channels": "--channels", "qps": "--qps", "fidelity": "--fidelity",
                      "engine": "--engine", "datatype": "-d", "iters": "-n",
                      "warmup_iters": "-w", "root": "-r"}
#: Keys of a collective sweep that are ``lossless collective``'s switches: true gives the
#: switch, false leaves it out.
COLLECTIVE_SWITCHES = {"pool_nvlink": "--pool-nvlink"}


def _arg_text(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def collective_argv(params: Mapping[str, Any], seed: int | None,
                    json_path: str | None = None) -> list[str]:
    """The ``lossless collective`` command line of one run of a collective sweep:
    ``collective`` (default allreduce) of ``size`` bytes (required: one size, ``16M`` or a
    number), the keys of :data:`COLLECTIVE_OPTIONS` as those options, those of
    :data:`COLLECTIVE_SWITCHES` (true or false) as those switches, every other key as
    ``-p KEY=VALUE``; the run's seed is ``-p seed=SEED`` (the fabric's: ECMP hashing and
    fault draws) unless ``seed`` is a key."""
    p = dict(params)
    coll = _arg_text(p.pop("collective", "allreduce"))
    if "size" not in p:
        raise ValueError("a collective sweep needs -p size=SIZE (one size a run, e.g. 16M)")
    size = _arg_text(p.pop("size"))
    argv = ["collective", coll, "-b", size, "-e", size]
    for key, flag in COLLECTIVE_OPTIONS.items():
        if key in p:
            argv += [flag, _arg_text(p.pop(key))]
    for key, flag in COLLECTIVE_SWITCHES.items():
        if key in p:
            v = p.pop(key)
            if not isinstance(v, bool):
                raise ValueError(f"-p {key}={v}: true or false")
            argv += [flag] if v else []
    if seed is not None:
        p.setdefault("seed", seed)
    for key, v in p.items():
        argv += ["-p", f"{key}={_arg_text(v)}"]
    argv.append("--no-plots")
    if json_path is not None:
        argv += ["--json", json_path]
    return argv


def _collective_args(argv: list[str]) -> argparse.Namespace:
    """``lossless collective``'s parser's reading of ``argv`` (SystemExit 2 and one line on
    stderr when it refuses it)."""
    from sim.cli import collective as collective_cmd
    from sim.cli.argtypes import Parser

    p = Parser(prog="lossless")
    collective_cmd.add_parsers(p.add_subparsers(dest="command", metavar="COMMAND"))
    return p.parse_args(argv)


def check_collective(params: Mapping[str, Any], seed: int | None) -> None:
    """ValueError naming what ``lossless collective`` would refuse in a run's command line
    before it builds anything: an option's value, a ``-p`` key or value, options that do
    not go together (:func:`sim.cli.collective.engine_option_problem`)."""
    import contextlib
    import io

    from sim.cli.collective import check_fabric_keys, collective_params, is_fabric_file
    from sim.scenarios import ScenarioError
    from sim.scenarios.base import resolve_params
    from sim.scenarios.common import split_fault_params

    argv = collective_argv(params, seed)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = _collective_args(argv)
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        last = lines[-1] if lines else f"lossless {' '.join(argv)}: refused"
        raise ValueError(last.removeprefix("lossless: ")) from None
    from sim.cli.collective import engine_option_problem

    why = engine_option_problem(args)
    if why is not None:
        raise ValueError(why)
    given = {k: v for k, v in args.param or () if not k.startswith("NCCL_") and k != "fault"}
    try:
        _, given = split_fault_params(given)
        if not is_fabric_file(args.fabric):
            check_fabric_keys(args.fabric, given)
            resolve_params(collective_params(), given)
    except (ScenarioError, ValueError) as e:
        raise ValueError(f"-p: {e}") from None


def run_collective(params: Mapping[str, Any], seed: int | None, out_dir: str
                   ) -> dict[str, Any]:
    """One run of a collective sweep: ``lossless collective`` (:func:`collective_argv`) in
    this process, its results.json in ``out_dir``; returns its size's row with the call's
    ranks, nodes and GPUs a node (RuntimeError with its last message when it ran nothing)."""
    import contextlib
    import io

    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "results.json")
    if os.path.exists(path):  # an earlier try's (--keep-runs --retry-failed): not this run's
        os.remove(path)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            args = _collective_args(collective_argv(params, seed, path))
            rc = args.func(args)
        except SystemExit as e:  # refused by the parser (check_collective checks first)
            rc = e.code if isinstance(e.code, int) else 2
    if rc == 2 or not os.path.exists(path):
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        raise RuntimeError(lines[-1] if lines else f"lossless collective: exit status {rc}")
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    return {**{k: doc[k] for k in ("nranks", "nodes", "gpus_per_node") if k in doc},
            **doc["results"][0], "exit_status": rc}


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
        name = args.scenario if args.scenario == COLLECTIVE else scenario_name(args.scenario)
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
        coll = args.scenario == COLLECTIVE  # runs of lossless collective, not a scenario
        rows = sweep(args.scenario, grid, out_dir=out, seeds=args.seeds,
                     seed_base=args.seed_base, workers=args.workers, scheduler=args.scheduler,
                     keep_runs=args.keep_runs, retry_failed=args.retry_failed,
                     progress=None if not args.no_progress else False, force=args.force,
                     run=run_collective if coll else None,
                     check=check_collective if coll else None)
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
    s.add_argument("scenario", metavar="SCENARIO",
                   help="built-in name or TOML file; or 'collective': each run a lossless "
                        "collective call of one size (-p size=16M, -p topology=KIND|FILE, "
                        "-p algo=, proto=, channels=, qps=, fidelity=, engine=, the "
                        "fabric's -p keys; the run's seed is -p seed=)")
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

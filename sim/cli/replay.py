"""``lossless replay``, ``lossless plot`` and ``lossless scenarios`` (docs/reference/replay.md,
docs/reference/plot.md, docs/reference/scenarios.md)."""

from __future__ import annotations

import argparse
import re
import time

from sim.cli.argtypes import err as _err
from sim.cli.argtypes import finite_float, integer
from sim.cli.argtypes import key_value as _kv

__all__ = ["add_parsers"]

EXIT_OK, EXIT_USAGE = 0, 2


def _node_port(text: str) -> tuple[int, int]:
    from sim.study.results import parse_port

    try:
        return parse_port(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


EXIT_SKIPPED = 1
#: Exit status when the run finished but something did not complete or balance: summary.json
#: ``problems`` (sim.study.fault_report.conservation_problems), a ``[[collective]]`` entry
#: that failed or was still running at the end of the run.
EXIT_PROBLEMS = 1
#: Exit status after Ctrl-C (128 + SIGINT, the shell's convention).
EXIT_INTERRUPTED = 130


def _owner(text: str) -> tuple[str, int]:
    from sim.workloads.replay import parse_owner

    try:
        return parse_owner(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_replay(args: argparse.Namespace) -> int:
    if args.time_scale <= 0:
        _err("--time-scale must be > 0")
        return EXIT_USAGE
    import os

    from sim.scenarios import ScenarioError
    from sim.scenarios.loader import scenario_name
    from sim.study.results import collective_problem, run_scenario
    from sim.workloads.replay import scale_fraction
    from wire.atomic import check_output_dir

    try:
        name = scenario_name(args.scenario)
    except ScenarioError as e:
        _err(str(e))
        return EXIT_USAGE
    out = args.out or f"out/{name}"
    existed = os.path.isdir(out)
    limit = None if args.capture_limit_mb is None else round(args.capture_limit_mb * 10**6)
    knobs = {k: v for k, v in (("capture_limit_bytes", limit), ("snaplen_bytes", args.snaplen),
                               ("write_captures", False if args.no_capture else None))
             if v is not None}
    start = time.perf_counter()
    try:
        check_output_dir(out, force=args.force)  # refuse before running
        from sim.scenarios.common import collect_params  # -p fault= is repeatable

        s = run_scenario(args.scenario, params=collect_params(args.param), seed=args.seed,
                         out_dir=out, plots=not args.no_plots, captures=args.capture or (),
                         pcaps=[(f, scale_fraction(args.time_scale)) for f in args.pcap or ()],
                         owners=dict(args.map or ()), force=args.force, warn=_err,
                         baseline=not args.no_baseline, **knobs)
    except ValueError as e:
        _err(str(e))
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err(f"interrupted: {out} left as it was" if existed else
             f"interrupted: nothing written ({out} not created)")
        return EXIT_INTERRUPTED
    wall = time.perf_counter() - start
    for line in summary_lines(s, wall, out):
        _err(line)
    rp = s.get("replay")
    colls = s.get("collectives") or ()
    failed = [c for c in colls if c.get("failed")]
    # a QP error stopped a [[collective]] entry, as NCCL's (docs/explanation/faults.md, "A
    # collective's QP error and failover")
    for c in failed:
        _err(f"[[collective]] #{c['entry']}: {c['error']}")
    unfinished = [line for c in colls if (line := collective_problem(c, s["duration_ps"]))]
    for line in unfinished:  # still running when the run ended
        _err(f"warning: {line}")
    if s.get("problems") or failed or unfinished:  # a flow that does not balance
        return EXIT_PROBLEMS  # (run_scenario warned, one line each) or a collective
    return EXIT_SKIPPED if rp is not None and rp.get("skipped") else EXIT_OK


def summary_lines(s: dict, wall_s: float, out: str) -> list[str]:
    """The replay's one-line summary (and, after a --pcap replay, one line about it): what
    ran, drops by reason, a deadlock, the watchdog, a capture cut at its limit."""
    from sim.study.congestion import deepest_queue
    from sim.study.results import collective_result, replay_problem

    t = s["totals"]
    name = s["scenario"]
    drops = f"drops {t['drops']}"
    if t["drops"]:
        by = t.get("dropped_packets_by_reason", {})
        drops += f" ({', '.join(f'{k} {v}' for k, v in by.items())})"
    parts = [f"{name}: {s['duration_ps'] / 1e6:g} us simulated in {wall_s:.2f} s",
             f"bottleneck utilisation {s['bottleneck']['utilisation']:.4f}"]
    deep = deepest_queue(s)
    if deep is not None:
        peak = next((p["max_queue_bytes"] for p in s.get("ports", ())
                     if (p["node"], p["port"]) == deep), 0)
        port = next((p["name"] for p in (s.get("labels") or {}).get("ports", ())
                     if (p["node"], p["port"]) == deep), f"{deep[0]}:{deep[1]}")
        parts.append(f"deepest queue {peak / 1000:.4g} KB at {port}")
    parts += [drops, f"pauses {t['pauses']}", f"CE marks {t['ce_marked']}"]
    if any(c.get("fidelity") == "flow" for c in s.get("collectives") or ()):
        parts.append("the collectives at flow fidelity: fluid flows, no packets to queue, "
                     "pause or mark")
    names = {n["id"]: n["name"] for n in (s.get("labels") or {}).get("nodes", ())}
    if "credit_stall_ps" in t:  # InfiniBand links: the credit wait, summed over their ports
        parts.insert(len(parts) - 2, f"credit stall {t['credit_stall_ps'] / 1e6:.3f} us "
                                     f"({t['credit_stalls']} stalls)")
    dl = s.get("deadlock")
    if isinstance(dl, dict) and dl.get("detected"):
        cycle = " -> ".join(f"{names.get(c[0], c[0])}:p{c[1]}" for c in dl.get("cycle") or ())
        parts.append(f"DEADLOCK at {dl['t_ps'] / 1e6:g} us (cycle of egress ports {cycle})")
    wd = s.get("watchdog")
    if isinstance(wd, dict) and wd.get("triggers"):
        parts.append(f"PFC watchdog fired {wd['triggers']} time(s), dropped "
                     f"{wd.get('dropped_packets', 0)} frame(s)")
    cap = s.get("capture", {})
    if cap.get("cut_at_ps") is not None:
        parts.append(f"captures CUT at {cap['cut_at_ps'] / 1e6:g} us (limit "
                     f"{cap['limit_bytes'] / 1e6:g} MB, --capture-limit-mb)")
    parts += [r for c in s.get("collectives") or () if (r := collective_result(c))]
    lines = ["; ".join(parts) + f"; results in {out}"]
    rp = s.get("replay")
    if rp is not None:
        line = (f"replayed {rp['injected']} frame(s) from {', '.join(rp['files'])}; "
                f"delivered {rp['delivered_bytes']} bytes")
        problem = replay_problem(rp)
        lines.append(line + (f"; {problem}" if problem else ""))
    return lines


def cmd_plot(args: argparse.Namespace) -> int:
    import os

    from sim.study.collective_plots import is_collective_results
    from sim.study.plot import plot_dir

    if any(is_collective_results(d) for d in args.dir):
        from sim.cli.collective import cmd_plot_collective  # lossless collective folders

        return cmd_plot_collective(args)
    if len(args.dir) > 1:
        return _plot_compare(args.dir, args.output or "compare.png")
    if args.output:
        _err(f"-o {args.output}: applies to several results folders (one folder's plots are "
             f"written into it)")
        return EXIT_USAGE
    d = args.dir[0]
    try:
        _check_results(d)
        for path in plot_dir(d):
            print(path)
    except _BadResults as e:
        _err(str(e))
        return EXIT_USAGE
    except KeyError as e:
        key = str(e.args[0]).split()[0] if e.args else "?"
        if re.match(_ARRAY_NAME, key):  # numpy's NpzFile says "K is not a file in the archive"
            _err(f"{os.path.join(d, 'timeseries.npz')}: {key}: missing array")
        else:
            _err(f"{os.path.join(d, 'summary.json')}: {key}: missing key")
        return EXIT_USAGE
    except (OSError, ValueError, TypeError, IndexError) as e:
        _err(f"{d}: cannot plot: {e}")
        return EXIT_USAGE
    return EXIT_OK


def _plot_compare(dirs: list[str], out: str) -> int:
    """``lossless plot A B ...`` of replay results folders: one figure comparing them."""
    import os

    from sim.study.plot import write_compare

    for d in dirs:
        try:
            _check_results(d)
        except _BadResults as e:
            _err(str(e))
            return EXIT_USAGE
    try:
        print(write_compare(dirs, out))
    except KeyError as e:
        _err(f"{' '.join(dirs)}: cannot compare: missing {e}")
        return EXIT_USAGE
    except (OSError, ValueError, TypeError, IndexError) as e:
        _err(f"{os.path.abspath(out) if isinstance(e, OSError) else ' '.join(dirs)}: "
             f"cannot compare: {e}")
        return EXIT_USAGE
    return EXIT_OK


class _BadResults(Exception):
    pass


#: Arrays every timeseries.npz has (sim.study.results), and the names of the per-item ones.
_REQUIRED_ARRAYS = ("duration_ps", "bottleneck", "bin_ps", "bin_t_ps")
_ARRAY_NAME = r"(queue|flow|pfc|ingress|rate|deadlock|watchdog)_|bin_"


def _check_results(d: str) -> None:
    """Raise _BadResults (message ``FILE: why``) unless ``d`` holds a readable summary.json
    (a JSON object) and timeseries.npz (a numpy archive whose every array reads back)."""
    import json
    import os
    import zipfile

    import numpy as np

    if not os.path.isdir(d):
        raise _BadResults(f"{d}: no such results folder")
    path = os.path.join(d, "summary.json")
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except FileNotFoundError:
        raise _BadResults(f"{path}: missing (not a lossless replay results folder?)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _BadResults(f"{path}: not valid JSON: {e}") from None
    if not isinstance(summary, dict):
        raise _BadResults(f"{path}: expected a JSON object, got {type(summary).__name__}")
    path = os.path.join(d, "timeseries.npz")
    if os.path.isfile(path) and not zipfile.is_zipfile(path):
        raise _BadResults(f"{path}: not a numpy .npz archive (not a zip file)")
    try:
        with np.load(path, allow_pickle=False) as ts:
            for k in ts.files:
                ts[k]
            missing = [k for k in _REQUIRED_ARRAYS if k not in ts.files]
    except FileNotFoundError:
        raise _BadResults(f"{path}: missing") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise _BadResults(f"{path}: not a readable numpy archive: {e}") from None
    if missing:
        raise _BadResults(f"{path}: {', '.join(missing)}: missing array")


def cmd_scenarios(args: argparse.Namespace) -> int:
    from sim.scenarios import get, names

    for n in names():
        info = get(n)
        print(f"{n}: {info.doc}")
        for p in info.params_doc:
            d = p.default
            shown = str(d).lower() if isinstance(d, bool) else repr(d)
            print(f"  {p.name:<14} {type(d).__name__:<6} {shown:<8} {p.doc}")
    _print_cc()
    return EXIT_OK


def _print_cc() -> None:
    """The congestion-control algorithms, and DCQCN's options with each preset's value (what
    cc=, preset= and cc_opts=NAME=VALUE take; docs/explanation/dcqcn.md, "Options")."""
    from sim import cc
    from sim.cc import dcqcn

    print(f"\ncongestion control (cc=): none (fixed rate), {', '.join(cc.names())}")
    names = list(dcqcn.presets())
    print(f"dcqcn options (cc_opts=NAME=VALUE,...), values per preset ({', '.join(names)}; "
          f"rates scaled with the line rate marked @25G):")
    for info in dcqcn.parameters():
        vals = []
        for n in names:
            v = info.defaults.get(n)
            if isinstance(v, dcqcn.ScaledRate):
                v = f"{v.bps}@25G"
            vals.append(str(v))
        print(f"  {info.name:<30} {' / '.join(vals)}")
    from sim.cc import ibcc

    print("\n".join(ibcc.options_text()))


def add_parsers(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("replay", help="run a scenario and write its results",
                       description="Run a built-in scenario or a TOML scenario file; write "
                                   "summary.json, timeseries.npz, events.jsonl, "
                                   "bottleneck.pcap and PNG plots "
                                   "(docs/reference/results-folder.md); with faults "
                                   "([[faults]] or -p fault=KIND:KEY=V,...) also "
                                   "faults_timeline.png and a faults report in summary.json, "
                                   "against a fault-free run (docs/howto/inject-faults.md).")
    r.add_argument("scenario", metavar="SCENARIO", help="built-in name or TOML file")
    r.add_argument("-p", "--param", type=_kv, action="append", metavar="KEY=VALUE",
                   help="override a parameter (repeatable); see 'lossless scenarios'; "
                        "a fault: -p fault=link_down:node=2,port=4,at_us=50,until_us=120")
    r.add_argument("--seed", type=integer(0, 2**63 - 1),
                   help="RNG seed (overrides the seed parameter)")
    r.add_argument("--out", metavar="DIR",
                   help="output folder (default out/<scenario>), written whole or not at all; "
                        "must be new, empty or an earlier output of lossless")
    r.add_argument("--force", action="store_true",
                   help="replace --out even if it is a non-empty folder lossless did not write")
    r.add_argument("--capture", type=_node_port, action="append", metavar="NODE:PORT",
                   help="also capture frames leaving NODE:PORT to capture_NODE_PORT.pcap "
                        "(repeatable)")
    r.add_argument("--capture-limit-mb", type=finite_float(0, lo_open=True), metavar="N",
                   help="stop all captures when the pcap files reach N MB together "
                        "(default 1024; the summary says where they were cut)")
    r.add_argument("--snaplen", type=integer(1, 2**32 - 1), metavar="BYTES",
                   help="capture only the first BYTES of each frame (records keep orig_len)")
    r.add_argument("--no-capture", action="store_true", help="write no pcap files")
    r.add_argument("--pcap", action="append", metavar="FILE",
                   help="also inject the frames of a pcap/pcapng at the hosts owning their "
                        "source addresses (those of --map; without it the simulator's own, "
                        "docs/reference/results-folder.md 'Names of nodes and ports'), at "
                        "their timestamps relative to the first (repeatable)")
    r.add_argument("--map", type=_owner, action="append", metavar="ADDRESS=NODE",
                   help="--pcap frames from/to ADDRESS (IPv4, IPv6 or MAC; an InfiniBand "
                        "LID, e.g. 52 or 0x34, or GID) belong to host NODE; only the addresses "
                        "mapped are owned (repeatable)")
    r.add_argument("--time-scale", type=finite_float(1e-6, 1e6), default=1.0, metavar="X",
                   help="multiply the --pcap frames' time offsets by X (0.5: twice as fast)")
    r.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    r.add_argument("--no-baseline", action="store_true",
                   help="with faults: do not run the scenario once more without them "
                        "(summary.json faults.completion then has no fault-free figures)")
    r.set_defaults(func=cmd_replay)

    p = sub.add_parser("plot", help="PNG plots of a replay or collective results directory")
    p.add_argument("dir", metavar="DIR", nargs="+",
                   help="results folder; several replay folders: one compare.png of their "
                        "throughput and bottleneck queue; several lossless collective "
                        "folders: their busbw curves overlaid in one plot (each run named "
                        "by the settings that differ)")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="several folders: write the figure here (default compare.png, or "
                        "busbw_vs_size.png for collective folders, in the current folder)")
    p.set_defaults(func=cmd_plot)

    s = sub.add_parser("scenarios", help="list the built-in scenarios and their parameters, "
                                         "and the congestion-control options")
    s.set_defaults(func=cmd_scenarios)

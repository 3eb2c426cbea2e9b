"""``lossless replay``, ``lossless plot`` and ``lossless scenarios`` (docs/scenarios.md)."""

from __future__ import annotations

import argparse
import sys
import time

from .argtypes import finite_float, integer

__all__ = ["add_parsers"]

EXIT_OK, EXIT_USAGE = 0, 2


def _err(msg: str) -> None:
    print(f"lossless: {msg}", file=sys.stderr)


def _kv(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected key=value, got {text!r}")
    return key.strip(), value.strip()


def _node_port(text: str) -> tuple[int, int]:
    from .results import parse_port

    try:
        return parse_port(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_replay(args: argparse.Namespace) -> int:
    if args.time_scale <= 0:
        _err("--time-scale must be > 0")
        return EXIT_USAGE
    from .replay import scale_fraction
    from .results import run_scenario
    from .scenarios import ScenarioError
    from .scenarios.loader import scenario_name

    try:
        name = scenario_name(args.scenario)
    except ScenarioError as e:
        _err(str(e))
        return EXIT_USAGE
    out = args.out or f"out/{name}"
    start = time.perf_counter()
    try:
        s = run_scenario(args.scenario, params=dict(args.param or ()), seed=args.seed,
                         out_dir=out, plots=not args.no_plots, captures=args.capture or (),
                         pcaps=[(f, scale_fraction(args.time_scale)) for f in args.pcap or ()])
    except ValueError as e:
        _err(str(e))
        return EXIT_USAGE
    wall = time.perf_counter() - start
    t = s["totals"]
    _err(f"{name}: {s['duration_ps'] / 1e6:g} us simulated in {wall:.2f} s; "
         f"bottleneck utilisation {s['bottleneck']['utilisation']:.4f}; drops {t['drops']}; "
         f"pauses {t['pauses']}; CE marks {t['ce_marked']}; results in {out}")
    if "replay" in s:
        rp = s["replay"]
        _err(f"replayed {rp['injected']} frame(s) from {', '.join(rp['files'])}; skipped "
             f"{rp['skipped']}; delivered {rp['delivered_bytes']} bytes")
    return EXIT_OK


def cmd_plot(args: argparse.Namespace) -> int:
    from .plot import plot_dir

    try:
        for path in plot_dir(args.dir):
            print(path)
    except (OSError, KeyError, ValueError) as e:
        _err(f"{args.dir}: cannot plot: {e}")
        return EXIT_USAGE
    return EXIT_OK


def cmd_scenarios(args: argparse.Namespace) -> int:
    from .scenarios import get, names

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
    cc=, preset= and cc_opts=NAME=VALUE take; docs/dcqcn.md)."""
    from . import cc
    from .cc import dcqcn

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


def add_parsers(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser("replay", help="run a scenario and write its results",
                       description="Run a built-in scenario or a TOML scenario file; write "
                                   "summary.json, timeseries.npz, events.jsonl, "
                                   "bottleneck.pcap and PNG plots (docs/scenarios.md).")
    r.add_argument("scenario", metavar="SCENARIO", help="built-in name or TOML file")
    r.add_argument("-p", "--param", type=_kv, action="append", metavar="KEY=VALUE",
                   help="override a parameter (repeatable); see 'lossless scenarios'")
    r.add_argument("--seed", type=integer(0, 2**63 - 1),
                   help="RNG seed (overrides the seed parameter)")
    r.add_argument("--out", metavar="DIR", help="output directory (default out/<scenario>)")
    r.add_argument("--capture", type=_node_port, action="append", metavar="NODE:PORT",
                   help="also capture frames leaving NODE:PORT to capture_NODE_PORT.pcap "
                        "(repeatable)")
    r.add_argument("--pcap", action="append", metavar="FILE",
                   help="also inject the frames of a pcap/pcapng at the hosts owning their "
                        "source addresses (10.0.N.N / 02:00:..: node N), at their timestamps "
                        "relative to the first (repeatable)")
    r.add_argument("--time-scale", type=finite_float(1e-6, 1e6), default=1.0, metavar="X",
                   help="multiply the --pcap frames' time offsets by X (0.5: twice as fast)")
    r.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    r.set_defaults(func=cmd_replay)

    p = sub.add_parser("plot", help="PNG plots of a replay results directory")
    p.add_argument("dir", metavar="DIR")
    p.set_defaults(func=cmd_plot)

    s = sub.add_parser("scenarios", help="list the built-in scenarios and their parameters, "
                                         "and the congestion-control options")
    s.set_defaults(func=cmd_scenarios)

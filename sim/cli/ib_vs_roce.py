"""``lossless ib-vs-roce``: the side-by-side study of :mod:`sim.study.ib_vs_roce`:
the same cases on ``fabric = "roce"`` and ``"ib"``, one table on stdout, and with ``--out DIR``
(written whole or not at all by :func:`wire.atomic.atomic_dir`) ``results.json`` and
``ib_vs_roce.png``."""

from __future__ import annotations

import argparse
import json
import os

from sim.cli.argtypes import err as _err
from sim.cli.argtypes import key_value as _kv

__all__ = ["add_parsers"]

#: Resolution of ib_vs_roce.png (13 x 7 inches: 1040 x 560 pixels, ~65 KB).
DPI = 80


def cmd_ib_vs_roce(args: argparse.Namespace) -> int:
    from sim.scenarios import ScenarioError, parse_text
    from sim.scenarios.common import collect_params
    from sim.study import ib_vs_roce
    from wire.atomic import OutputError, atomic_dir, check_output_dir

    try:
        params = {}
        for k, v in collect_params(args.param).items():  # a key given twice is refused
            try:
                params[k] = parse_text(v) if isinstance(v, str) else v
            except ScenarioError as e:
                raise ScenarioError(f"-p {k}: {e}") from None
        if args.out:
            check_output_dir(args.out, force=args.force)
        doc = ib_vs_roce.run(params)
    except (ScenarioError, OutputError) as e:
        _err(str(e))
        return 2
    print(ib_vs_roce.format_table(doc["rows"]))
    if args.out:
        try:
            with atomic_dir(args.out, force=args.force) as tmp:
                with open(os.path.join(tmp, "results.json"), "w", encoding="utf-8") as f:
                    json.dump(doc, f, indent=1)
                    f.write("\n")
                if not args.no_plots:
                    fig = ib_vs_roce.figure(doc["rows"])
                    fig.savefig(os.path.join(tmp, "ib_vs_roce.png"), dpi=DPI)
        except OutputError as e:
            _err(str(e))
            return 2
        _err(f"ib-vs-roce: results in {args.out}")
    return 0


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from sim.study.ib_vs_roce import PARAMS

    keys = ", ".join(f"{p.name} ({p.default})" for p in PARAMS)
    s = sub.add_parser(
        "ib-vs-roce", aliases=["ib_vs_roce"],
        help="the same incast, victim-flow and collective cases on RoCE and on InfiniBand, "
             "one table (docs/reference/ib-vs-roce.md)",
        description="Run an incast, a victim flow beside an incast, and ring AllReduce and "
                    "AllToAll on a rail fabric, each with fabric=roce and fabric=ib; print "
                    "one table (docs/reference/ib-vs-roce.md).")
    s.add_argument("-p", "--param", type=_kv, action="append", metavar="KEY=VALUE",
                   help=f"a study parameter (repeatable): {keys}")
    s.add_argument("--out", metavar="DIR", help="also write DIR/results.json and "
                   "DIR/ib_vs_roce.png (a new, empty or earlier output folder)")
    s.add_argument("--force", action="store_true", help="replace --out even if lossless "
                   "did not write it")
    s.add_argument("--no-plots", action="store_true", help="no PNG in --out")
    s.set_defaults(func=cmd_ib_vs_roce)

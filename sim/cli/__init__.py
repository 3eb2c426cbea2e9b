"""The ``lossless`` command line (also ``python -m sim``): one module per command family,
:mod:`sim.cli.wire` (decode, craft, stats, overhead), :mod:`sim.cli.wireshark`,
:mod:`sim.cli.replay` (replay, plot, scenarios), :mod:`sim.cli.sweep` and
:mod:`sim.cli.collective`.

May import every other package of sim and wire (nothing imports sim.cli but ``sim/__main__``).

Exit codes (documented in docs/reference/cli.md):
  0  every record read and decoded cleanly
  1  some records have problems (listed in ``problems``), or some craft input lines were bad
  2  an input file could not be read (bad magic, truncated file...) or a usage error; the
     records read before the failure are still printed
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

# numpy's OpenBLAS starts a thread per core when numpy is imported (0.1 s of CPU per command
# on a 2-core machine, bench/results/2026-11-decoding.md) for linear algebra no command does: one
# thread, unless the user's environment says how many.
if not any(v in os.environ for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"

from sim.cli import wire as wire_cmd
from sim.cli import wireshark as wireshark_cmd
from sim.cli.argtypes import Parser
from sim.cli.wire import EXIT_OK, scaleup_config

__all__ = ["build_parser", "main"]

#: The commands of sim.cli.wire and sim.cli.wireshark: for one of them ``main`` builds only
#: their parsers, without importing the simulator's commands (0.13-0.16 s of start-up, which
#: counts when ``lossless decode`` is compared with tshark); tests/test_cli.py checks the list.
WIRE_COMMANDS = frozenset({"decode", "craft", "stats", "overhead", "wireshark-plugin"})
#: The commands of sim.cli.replay: for one of them ``main`` builds the wire commands' and
#: their parsers only, without importing the collective, sweep and ib-vs-roce commands (0.08
#: to 0.1 s of start-up of every ``lossless replay``); tests/test_cli.py checks the list.
REPLAY_COMMANDS = frozenset({"replay", "plot", "scenarios"})


# ------------------------------------------------------------------------ main
def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``lossless`` parser; with ``command`` in :data:`WIRE_COMMANDS`, one that has
    only the wire commands (the same parser for them), with one in :data:`REPLAY_COMMANDS`,
    one that has only those and the wire commands."""
    p = Parser(
        prog="lossless",
        description="Read, write and reason about RoCEv2, InfiniBand, PFC, ECN and scale-up "
                    "Ethernet traffic, and simulate AI-cluster fabrics and their collectives "
                    "(docs/README.md).",
        epilog="Exit codes: 0 clean, 1 records with problems, 2 unreadable input or usage "
               "error. See docs/reference/cli.md.",
    )
    p.add_argument("--version", action=_VersionAction, nargs=0,
                   help="print the version and which simulator core runs, then exit")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    wire_cmd.add_parsers(sub)
    wireshark_cmd.add_parser(sub)
    if command in WIRE_COMMANDS:
        return p
    from sim.cli import replay as replay_cmd

    replay_cmd.add_parsers(sub)
    if command in REPLAY_COMMANDS:
        return p
    from sim.cli import collective as collective_cmd
    from sim.cli import counters as counters_cmd
    from sim.cli import fabric as fabric_cmd
    from sim.cli import ib_vs_roce as ib_vs_roce_cmd
    from sim.cli import perftest as perftest_cmd
    from sim.cli import sweep as sweep_cmd

    sweep_cmd.add_parsers(sub)
    collective_cmd.add_parsers(sub)
    fabric_cmd.add_parsers(sub)
    counters_cmd.add_parsers(sub)
    perftest_cmd.add_parsers(sub)
    ib_vs_roce_cmd.add_parsers(sub)
    return p


class _VersionAction(argparse.Action):
    """``--version``: the package version and the simulator core (compiled or interpreted,
    sim._core.core()), worked out only when asked (it imports the core)."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        from sim import core

        print(f"lossless {_version()} (core: {core()})")
        parser.exit()


def _version() -> str:
    """The installed package's version (its metadata), or wire.__version__ from a checkout."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("lossless")
    except PackageNotFoundError:
        from wire import __version__

        return __version__


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        argv = sys.argv[1:]
    parser = build_parser(argv[0] if argv else None)
    args = parser.parse_args(argv)
    if getattr(args, "output", None) == "-":
        args.output = sys.stdout.buffer
    try:
        args.scaleup = scaleup_config(args)
    except ValueError as e:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        sub.choices[args.command].error(str(e))  # one line, exit 2 (sim.cli.argtypes.Parser)
    try:
        return args.func(args)
    except BrokenPipeError:
        # Output closed early (e.g. piped into head): not an error of ours.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

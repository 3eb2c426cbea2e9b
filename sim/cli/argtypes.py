"""argparse types shared by every ``lossless`` command, and the parser that reports in one line.

Every integer and float option of the CLI takes its ``type=`` from here, so that no option
accepts ``nan``, ``inf``, ``1e400`` (which ``float()`` reads as ``inf``) or a value outside
the range the command can use, and every refusal is one line naming the option::

    lossless: --link-gbps: expected a finite number, got 'nan'

Each type is a callable ``str -> value`` carrying its limits (``kind``, ``lo``, ``hi``) so the
tests can walk the parser and try the limits of every option (tests/test_cli_options.py).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import NoReturn

__all__ = [
    "ETHERTYPE", "UDP_PORT", "ArgType", "Parser", "csv_ints", "err", "finite_float", "integer",
    "key_value",
]


def err(msg: str) -> None:
    """A one-line message of a command on stderr: ``lossless: msg``."""
    print(f"lossless: {msg}", file=sys.stderr)


def key_value(text: str) -> tuple[str, str]:
    """A ``-p KEY=VALUE`` argument: (key, value), both stripped; argparse's one-line error
    for a missing ``=`` or key.  The value is a :class:`sim.scenarios.base.ParamText`:
    text that a parameter reads by its type (``-p node=1`` is the number 1), where a
    file's ``node = "1"`` is a string."""
    from sim.scenarios.base import ParamText

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), ParamText(value.strip())


class ArgType:
    """A typed option value: ``kind`` ("float", "int" or "csv_int"), limits ``lo``/``hi``
    (``None``: unbounded) and whether they are exclusive (``lo_open``/``hi_open``)."""

    def __init__(self, kind: str, parse: Callable[[str], object], lo: float | None,
                 hi: float | None, *, lo_open: bool = False, hi_open: bool = False,
                 name: str = "") -> None:
        self.kind = kind
        self._parse = parse
        self.lo, self.hi = lo, hi
        self.lo_open, self.hi_open = lo_open, hi_open
        self.__name__ = name or kind  # argparse names the type in some messages

    def check(self, value: float, text: str) -> None:
        """Raise ArgumentTypeError if ``value`` (read from ``text``) is out of range (the
        bound in hex too when the value was written in hex)."""
        lo, hi = self.lo, self.hi
        hexed = text.strip().lower().startswith(("0x", "-0x"))
        if lo is not None and (value <= lo if self.lo_open else value < lo):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if self.lo_open else '>='} {_show(lo, hexed)}, got {text!r}")
        if hi is not None and (value >= hi if self.hi_open else value > hi):
            raise argparse.ArgumentTypeError(
                f"must be {'<' if self.hi_open else '<='} {_show(hi, hexed)}, got {text!r}")

    def __call__(self, text: str) -> object:
        return self._parse(text)

    def __repr__(self) -> str:
        return f"<{self.__name__} {self.kind} [{self.lo}, {self.hi}]>"


def _show(x: float, hexed: bool = False) -> str:
    if hexed and isinstance(x, int):
        return f"0x{x:04x} ({x})"
    if isinstance(x, int) and x >= 4096 and (x & (x + 1)) == 0:
        return f"{x} (2**{x.bit_length()}-1)"
    return f"{x:g}" if isinstance(x, float) else str(x)


def finite_float(lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
                 hi_open: bool = False, name: str = "") -> ArgType:
    """A finite float (no nan/inf, no overflow to inf) in [lo, hi] (open ends if asked)."""

    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(x):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        t.check(x, text)
        return x

    t = ArgType("float", parse, lo, hi, lo_open=lo_open, hi_open=hi_open, name=name)
    return t


def integer(lo: int | None = None, hi: int | None = None, *, hex_ok: bool = False,
            name: str = "") -> ArgType:
    """An integer in [lo, hi]; with ``hex_ok`` also ``0x``/``0o``/``0b`` forms (EtherTypes and
    ports are usually written in hex)."""

    def parse(text: str) -> int:
        try:
            x = int(text, 0) if hex_ok else int(text)
        except ValueError:
            what = "an integer (decimal or 0x hex)" if hex_ok else "an integer"
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        t.check(x, text)
        return x

    t = ArgType("int", parse, lo, hi, name=name)
    return t


def csv_ints(lo: int | None = None, hi: int | None = None, *, max_items: int = 64,
             name: str = "") -> ArgType:
    """Comma-separated integers, each in [lo, hi], at most ``max_items`` of them (the work
    of a command such as ``overhead`` grows with the product of two such lists)."""
    one = integer(lo, hi)

    def parse(text: str) -> list[int]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        if not items:
            raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}")
        if len(items) > max_items:
            raise argparse.ArgumentTypeError(f"at most {max_items} values, got {len(items)}")
        try:
            return [one(x) for x in items]
        except argparse.ArgumentTypeError as e:
            if len(items) == 1:
                raise
            raise argparse.ArgumentTypeError(f"{e} (in {text!r})") from None

    return ArgType("csv_int", parse, lo, hi, name=name)


#: A UDP port number, 1..65535 (RFC 768: 16-bit field; port 0 is reserved, RFC 6335 6).
UDP_PORT = integer(1, 0xFFFF, hex_ok=True, name="udp_port")
#: An EtherType: 0x0600..0xFFFF (IEEE 802.3 clause 3.2.6: values of the Length/Type field
#: at or above 0x0600 are types, up to 1500 are lengths).  Which EtherTypes a scale-up
#: placeholder may take is decided by wire.scaleup.ScaleUpConfig.
ETHERTYPE = integer(0x0600, 0xFFFF, hex_ok=True, name="ethertype")


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are ONE line on stderr and exit status 2::

        lossless: --link-gbps: expected a finite number, got 'nan' (lossless stats --help)

    (argparse prints the whole usage and ``PROG: error: argument X: why``).  Sub-command
    parsers made with ``add_subparsers().add_parser`` are of the same class."""

    def error(self, message: str) -> NoReturn:
        if message.startswith("argument "):
            message = message[len("argument "):]
            opt, sep, why = message.partition(": ")
            if sep:
                # "-o/--output" -> the long name the user most likely typed
                message = f"{opt.split('/')[-1]}: {why}"
        print(f"lossless: {message} ({self.prog} --help)", file=sys.stderr)
        sys.exit(2)

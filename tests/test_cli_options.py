"""Option validation of every ``lossless`` command: no int or float option takes
nan/inf/out-of-range values, usage errors are one line with exit status 2, ``stats`` exits 1
on records with problems as decode does, ``overhead`` refuses frames no stack carries, the
scale-up placeholders refuse well-known EtherTypes, and ``--version``."""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import build_parser
from sim.cli.argtypes import ArgType
from tests.helpers import run_cli
from wire.overhead import efficiency, table
from wire.scaleup import DEFAULT_SCALEUP, WELL_KNOWN_ETHERTYPES, ScaleUpConfig

REPO = Path(__file__).resolve().parent.parent
PCAPS = sorted((REPO / "pcaps").glob("*.pcap"))
PARSER = build_parser()
ETHERTYPE_FIELDS = ("esun_ethertype", "sunh_ethertype", "afh_gen1_ethertype", "sue_ethertype")


def _commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in PARSER._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _base_argv(name: str, sp: argparse.ArgumentParser) -> list[str]:
    """The sub-command with dummy values for its positionals and required options."""
    argv = [name]
    for a in sp._actions:
        if not a.option_strings and a.nargs != "?":
            argv.append(sorted(a.choices)[0] if a.choices else "x")
        elif a.option_strings and a.required:
            argv += [a.option_strings[-1], "x"]
    return argv


def _typed_options(kinds: tuple) -> list[tuple[str, argparse.Action]]:
    out = []
    for name, sp in _commands().items():
        for a in sp._actions:
            if not a.option_strings:
                continue
            kind = getattr(a.type, "kind", None) or {float: "float", int: "int"}.get(a.type)
            if kind in kinds:
                out.append((name, a))
    return out


FLOAT_OPTS = _typed_options(("float",))
INT_OPTS = _typed_options(("int", "csv_int"))
ALL_NUMERIC = FLOAT_OPTS + INT_OPTS


def _ids(opts):
    return [f"{n} {a.option_strings[-1]}" for n, a in opts]


def parse_error(argv: list[str], capsys) -> str:
    """Parse ``argv``; it must be refused with exit 2 and exactly one line on stderr."""
    with pytest.raises(SystemExit) as e:
        PARSER.parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2, err
    assert len(err.splitlines()) == 1, err
    assert err.startswith("lossless: ") and "Traceback" not in err
    return err


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of an in-process ``lossless`` call (tests.helpers)."""
    return run_cli(argv)


# ---------------------------------------------------------------- every option typed
def test_the_walk_finds_the_options() -> None:
    names = {(n, a.option_strings[-1]) for n, a in ALL_NUMERIC}
    assert {("stats", "--link-gbps"), ("craft", "--rate-gbps"), ("replay", "--time-scale"),
            ("craft", "--count"), ("craft", "--gap-ns"), ("craft", "--start-ns"),
            ("replay", "--seed"), ("stats", "--roce-port"), ("overhead", "--txn-bytes"),
            ("sweep", "--workers")} <= names


@pytest.mark.parametrize(("cmd", "action"), ALL_NUMERIC, ids=_ids(ALL_NUMERIC))
def test_every_numeric_option_uses_sim_argtypes(cmd: str, action: argparse.Action) -> None:
    assert isinstance(action.type, ArgType), (
        f"lossless {cmd} {action.option_strings[-1]}: type={action.type!r}; use sim.cli.argtypes")


def _custom_typed() -> list[tuple[str, argparse.Action]]:
    return [(n, a) for n, sp in _commands().items() for a in sp._actions
            if a.option_strings and callable(a.type) and not isinstance(a.type, ArgType)
            and a.type not in (str, int, float)]


@pytest.mark.parametrize(("cmd", "action"), _custom_typed(), ids=_ids(_custom_typed()))
def test_no_other_option_type_returns_a_non_finite_number(cmd, action) -> None:
    """Options with a type of their own (KEY=VALUE, NODE:PORT...) must not let nan/inf
    through either (a number-like option should use sim.cli.argtypes)."""
    def nonfinite(v: object) -> bool:
        if isinstance(v, float):
            return not math.isfinite(v)
        if isinstance(v, (tuple, list)):
            return any(nonfinite(x) for x in v)
        return False

    try:
        one = action.type("1")
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        one = None
    assert not isinstance(one, (int, float)), (
        f"lossless {cmd} {action.option_strings[-1]} takes a number: use sim.cli.argtypes")
    for bad in ("nan", "inf", "-inf", "1e400"):
        try:
            v = action.type(bad)
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            continue
        assert not nonfinite(v), f"lossless {cmd} {action.option_strings[-1]} {bad} -> {v!r}"


@pytest.mark.parametrize(("cmd", "action"), FLOAT_OPTS, ids=_ids(FLOAT_OPTS))
@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", "1e400", "-1e400", "NaN", "x"])
def test_no_float_option_takes_nan_or_inf(cmd, action, bad, capsys) -> None:
    opt = action.option_strings[-1]
    err = parse_error([*_base_argv(cmd, _commands()[cmd]), f"{opt}={bad}"], capsys)
    assert opt in err and repr(bad) in err


@pytest.mark.parametrize(("cmd", "action"), INT_OPTS, ids=_ids(INT_OPTS))
def test_int_options_refuse_their_limits_plus_one(cmd, action, capsys) -> None:
    t = action.type
    opt = action.option_strings[-1]
    base = _base_argv(cmd, _commands()[cmd])
    assert t.lo is not None, f"{opt}: every integer option has a lower bound"
    bad = [str(t.lo - 1), "1.5", "nan", ""]
    if t.hi is not None:
        bad.append(str(t.hi + 1))
    for text in bad:
        err = parse_error([*base, f"{opt}={text}"], capsys)
        assert opt in err
    ok = PARSER.parse_args([*base, f"{opt}={t.lo}"])
    got = getattr(ok, action.dest)
    assert got == t.lo or got == [t.lo] or t.lo in (got or [])


@given(x=st.floats(allow_nan=True, allow_infinity=True))
def test_float_options_accept_exactly_finite_values_in_range(x: float) -> None:
    for _cmd, action in FLOAT_OPTS:
        t = action.type
        text = repr(x)
        ok = math.isfinite(x)
        if ok and t.lo is not None:
            ok = x > t.lo if t.lo_open else x >= t.lo
        if ok and t.hi is not None:
            ok = x < t.hi if t.hi_open else x <= t.hi
        if ok:
            assert t(text) == x
        else:
            with pytest.raises(argparse.ArgumentTypeError):
                t(text)


@pytest.mark.parametrize("value", ["nan", "inf", "1e400", "0", "-1", "-0", "1e-30"])
def test_stats_link_gbps(value: str, capsys) -> None:
    rc, out, err = run(["stats", str(PCAPS[0]), f"--link-gbps={value}"], capsys)
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and "--link-gbps" in err, err


def test_usage_errors_are_one_line(capsys) -> None:
    for argv in (["stats"], ["nosuch"], ["decode", "x", "--bogus"], ["craft", "--count", "2"],
                 ["overhead", "--stack"], []):
        rc, _out, err = run(argv, capsys)
        assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("lossless: "), err


# ------------------------------------------------------------ stats exit codes
@pytest.mark.parametrize("pcap", PCAPS, ids=[p.name for p in PCAPS])
def test_stats_and_decode_exit_codes_agree(pcap: Path, capsys) -> None:
    rc_decode, _, _ = run(["decode", str(pcap), "-f", "jsonl"], capsys)
    rc_stats, out, _ = run(["stats", str(pcap), "--json"], capsys)
    assert rc_stats == rc_decode
    import json

    assert rc_stats == (1 if json.loads(out)["records_with_problems"] else 0)


def test_stats_exit_codes_documented_cases(capsys) -> None:
    assert run(["stats", str(REPO / "pcaps" / "broken.pcap")], capsys)[0] == 1
    assert run(["stats", str(REPO / "pcaps" / "roce_rc.pcap")], capsys)[0] == 0
    rc, _, err = run(["stats", str(REPO / "pcaps" / "roce_rc.pcap"), "/nonexistent.pcap"],
                     capsys)
    assert rc == 2 and "/nonexistent.pcap" in err


# ------------------------------------------------------------ overhead sizes
@pytest.mark.parametrize("argv", [["--txn-bytes", "1000000000"], ["--per-frame", "100000"],
                                  ["--txn-bytes", "5000"], ["--txn-bytes", "0"],
                                  ["--per-frame", "-1"],
                                  ["--txn-bytes", "4096", "--per-frame", "2"],
                                  ["--txn-bytes", ",".join(map(str, range(1, 200)))]])
def test_overhead_impossible_sizes_refused_in_one_line(argv, capsys) -> None:
    t0 = time.perf_counter()
    rc, out, err = run(["overhead", *argv], capsys)
    assert time.perf_counter() - t0 < 5
    assert rc == 2 and out == "", out
    assert len(err.splitlines()) == 1 and ("--txn-bytes" in err or "--per-frame" in err), err


def test_overhead_na_cells_give_their_reason(capsys) -> None:
    rc, out, _ = run(["overhead", "--txn-bytes", "256,1024", "--per-frame", "1,4"], capsys)
    assert rc == 0
    assert ("n/a 1024x4: 4128 B of transactions exceed the 4096-byte PDU limit (sue_ipv4_udp, "
            "afh_gen1, afh_gen2, esun, sunh)") in out
    assert "n/a 256x4: 1056 B of transactions exceed the 1024-byte PDU limit (sue_lite)" in out
    assert "roce_v2)" not in out


def test_roce_payload_is_bounded_by_the_largest_ib_mtu() -> None:
    e = efficiency("roce_v2", 4096, 2)
    assert e.goodput_pct is None and "4096" in e.reason
    assert efficiency("roce_v2", 4096, 1).goodput_pct is not None
    t0 = time.perf_counter()
    assert efficiency("roce_v2", 10**9, 16).goodput_pct is None  # no 16 GB frame built
    assert all(r.goodput_pct is None for r in table([10**9], [10**5]))
    assert time.perf_counter() - t0 < 1


# ------------------------------------------------------------ ports
@pytest.mark.parametrize("cmd", ["decode", "stats", "craft"])
@pytest.mark.parametrize("port", ["70000", "0", "-1", "65536", "0x10000", "abc"])
def test_roce_port_range(cmd: str, port: str, capsys) -> None:
    err = parse_error([*_base_argv(cmd, _commands()[cmd]), "--roce-port", port], capsys)
    assert "--roce-port" in err


def test_roce_port_in_range_accepted() -> None:
    a = PARSER.parse_args(["decode", "x", "--roce-port", "0x12b7", "--roce-port", "65535"])
    assert a.roce_port == [4791, 65535]


@pytest.mark.parametrize("port", ["70000", "0", "-1"])
def test_sue_udp_port_range(port: str, capsys) -> None:
    assert "--sue-udp-port" in parse_error(["decode", "x", "--sue-udp-port", port], capsys)


# ------------------------------------------------------------ EtherType placeholders
@pytest.mark.parametrize("ethertype", [0x0800, 0x0806, 0x86DD, 0x8100, 0x88A8, 0x8808,
                                       0x88CC, 0x8847, 0x8848, 0x8915, 0x8906, 0x88F7])
def test_well_known_ethertypes_refused_by_the_library(ethertype: int) -> None:
    assert ethertype in WELL_KNOWN_ETHERTYPES
    for name in ETHERTYPE_FIELDS:
        with pytest.raises(ValueError, match=name):
            ScaleUpConfig(**{name: ethertype})
        with pytest.raises(ValueError, match=f"0x{ethertype:04x}"):
            DEFAULT_SCALEUP.with_(**{name: ethertype})


@given(name=st.sampled_from(ETHERTYPE_FIELDS), value=st.integers(-(2**20), 2**20))
def test_placeholder_ethertype_rule(name: str, value: int) -> None:
    others = {getattr(DEFAULT_SCALEUP, n) for n in ETHERTYPE_FIELDS if n != name}
    ok = 0x0600 <= value <= 0xFFFE and value not in WELL_KNOWN_ETHERTYPES and value not in others
    if ok:
        assert getattr(DEFAULT_SCALEUP.with_(**{name: value}), name) == value
    else:
        with pytest.raises(ValueError, match=name):
            DEFAULT_SCALEUP.with_(**{name: value})


@pytest.mark.parametrize(("opt", "value"), [
    ("--esun-ethertype", "0x0800"), ("--esun-ethertype", "0x8100"),
    ("--sunh-ethertype", "0x86dd"), ("--afh-gen1-ethertype", "0x88cc"),
    ("--sue-ethertype", "0x8808"), ("--esun-ethertype", "0x05dc"), ("--esun-ethertype", "1500"),
    ("--esun-ethertype", "0x88b6"),  # the SUNH placeholder's default
    ("--sue-udp-port", "4791"),  # RoCEv2's port
])
@pytest.mark.parametrize("cmd", ["decode", "stats", "overhead"])
def test_cli_refuses_bad_placeholders(cmd: str, opt: str, value: str, capsys) -> None:
    argv = [*_base_argv(cmd, _commands()[cmd]), opt, value]
    rc, out, err = run(argv, capsys)
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1 and opt in err, err


# ------------------------------------------------------------ --version
def test_version(capsys) -> None:
    rc, out, err = run(["--version"], capsys)
    assert rc == 0 and err == ""
    # and which simulator core runs (tests/test_compiled_core.py)
    from sim import core

    assert out == f"lossless {importlib.metadata.version('lossless')} (core: {core()})\n"


def test_version_console_script() -> None:
    proc = subprocess.run([sys.executable, "-m", "sim", "--version"], capture_output=True,
                          text=True, check=False, cwd=REPO)
    assert proc.returncode == 0 and proc.stdout.startswith("lossless ")


@pytest.mark.parametrize(("argv", "want"), [
    (["--sunh-ethertype", "0x88b5"],
     "--esun-ethertype's default and --sunh-ethertype are both 0x88b5"),
    (["--esun-ethertype", "0x05dc"], "--esun-ethertype: must be >= 0x0600 (1536), got '0x05dc'"),
    (["--esun-ethertype", "1500"], "--esun-ethertype: must be >= 1536, got '1500'"),
    (["--sue-udp-port", "0x11170"], "--sue-udp-port: must be <= 0xffff (65535), got '0x11170'"),
])
def test_scaleup_option_errors_speak_in_the_options_terms(argv, want) -> None:
    """A clash with another placeholder's default names that option (not the library's field
    name esun_ethertype), and a bound is shown in hex when the value was written in hex."""
    rc, _out, err = run_cli(["decode", "pcaps/cnp.pcap", *argv])
    assert rc == 2 and want in err and "esun_ethertype" not in err

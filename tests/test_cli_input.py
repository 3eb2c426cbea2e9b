"""Hostile or sloppy input to the commands that read TOML files and ``-p`` values: one line
naming the file (or the option) and exit status 2, never a traceback
(docs/reference/fabric-file.md, "Errors"; docs/reference/cli.md)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.scenarios import ScenarioError, loader
from sim.scenarios.base import MAX_DEPTH, ParamText, nesting_problem, parse_text
from sim.scenarios.description import SECTIONS
from sim.scenarios.loader import read_toml
from tests.helpers import run_cli

EXAMPLES = Path(__file__).resolve().parent.parent / "docs" / "examples"
DEEP = 5000

#: Files nested too deeply, in the shapes TOML allows: arrays, inline tables, both under a
#: table's key, and a table header of many dotted keys.
DEEP_FILES = {
    "arrays": f"x = {'[' * DEEP}{']' * DEEP}\n",
    "inline_tables": f"x = {'{a = ' * DEEP}1{'}' * DEEP}\n",
    "under_a_table": ("[topology]\nkind = \"star\"\n[traffic]\npattern = \"incast\"\n"
                      f"[switch]\nlossless_tcs = [{'{a = ' * 40}1{'}' * 40}]\n"),
    "reference": f"scenario = \"incast\"\n[params]\nsenders = {'[' * 40}{']' * 40}\n",
    "dotted_header": f"[{'a.' * DEEP}z]\nq = 1\n",
}

#: Every command that reads a TOML file, with the file's place in its arguments.
TOML_COMMANDS = {
    "replay": lambda f, out: ["replay", f, "--out", out, "--no-plots"],
    "sweep": lambda f, out: ["sweep", f, "--workers", "0", "--no-progress", "--out", out],
    "collective": lambda f, out: ["collective", "allreduce", "--fabric", f, "-b", "1M",
                                  "-e", "1M", "--quiet", "--out", out],
}


def _one_line(rc: int, err: str) -> str:
    assert rc == 2, err
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    assert err.startswith("lossless: ")
    return err


@pytest.mark.parametrize("shape", sorted(DEEP_FILES))
@pytest.mark.parametrize("command", sorted(TOML_COMMANDS))
def test_a_deeply_nested_file_is_one_line_naming_it(tmp_path, command, shape) -> None:
    f = tmp_path / f"{shape}.toml"
    f.write_text(DEEP_FILES[shape])
    out = tmp_path / "out"
    rc, _, err = run_cli(TOML_COMMANDS[command](str(f), str(out)))
    _one_line(rc, err)
    assert err.startswith(f"lossless: {f}: ") and f"nested more than {MAX_DEPTH} deep" in err
    assert not out.exists()


def _nested(kind: str, n: int) -> str:
    return "[" * n + "]" * n if kind == "array" else "{a = " * n + "1" + "}" * n


@given(n=st.integers(1, 3 * MAX_DEPTH), kind=st.sampled_from(["array", "table"]))
def test_the_depth_limit_is_exact_for_files_and_values(tmp_path_factory, n, kind) -> None:
    """A key's value may nest MAX_DEPTH arrays or inline tables, in a file and in a -p value."""
    f = tmp_path_factory.mktemp("d") / "f.toml"
    f.write_text(f"x = {_nested(kind, n)}\n")
    if n <= MAX_DEPTH:
        read_toml(f)
        parse_text(_nested(kind, n))
    else:
        why = rf"^{re.escape(str(f))}: key 'x(\.a)*(\.…)?': arrays or tables nested more than "
        with pytest.raises(ScenarioError, match=rf"{why}{MAX_DEPTH} deep$"):
            read_toml(f)
        with pytest.raises(ScenarioError, match=f"nested more than {MAX_DEPTH} deep$"):
            parse_text(_nested(kind, n))


def _depth(v) -> int:
    """Containers on the deepest path (a reference, recursive)."""
    if isinstance(v, dict):
        return 1 + max((_depth(x) for x in v.values()), default=0)
    if isinstance(v, list):
        return 1 + max((_depth(x) for x in v), default=0)
    return 0


values = st.recursive(st.integers() | st.text(max_size=3),
                      lambda inner: st.lists(inner, max_size=3)
                      | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                      max_leaves=40)


@given(v=values, limit=st.integers(0, 8))
def test_nesting_problem_agrees_with_a_recursive_count(v, limit) -> None:
    assert (nesting_problem(v, limit) is None) == (_depth(v) <= limit + 1)


DEEP_VALUE = "[" * DEEP + "]" * DEEP


@pytest.mark.parametrize("argv, starts", [
    (["replay", "incast", "-p", f"senders={DEEP_VALUE}"], "lossless: -p: parameter 'senders'"),
    (["sweep", "incast", "-p", f"senders={DEEP_VALUE}", "--workers", "0"],
     "lossless: -p senders: "),
    (["ib-vs-roce", "-p", f"senders={DEEP_VALUE}"], "lossless: -p senders: "),
    (["collective", "allreduce", "-p", f"nodes={DEEP_VALUE}"], "lossless: parameter 'nodes'"),
    (["sweep-plot", ".", "--x", "a", "--y", "b", "--where", f"a={DEEP_VALUE}"],
     "lossless: --where a: "),
    (["replay", str(EXAMPLES / "two_switches.toml"), "-p", f"links.link_gbps={DEEP_VALUE}"],
     "lossless: -p: [links] parameter 'link_gbps'"),
])
def test_a_deeply_nested_value_is_one_line_naming_its_key(argv, starts) -> None:
    err = _one_line(*run_cli(argv)[::2])
    assert err.startswith(starts) and f"nested more than {MAX_DEPTH} deep" in err
    assert len(err) < 300  # the value is shown cut, not whole


# ------------------------------------------------------------------------ collective -i
def test_collective_step_bytes_must_advance() -> None:
    """nccl-tests' -i 0 (without -f) adds 0 to the size for ever (src/common.cu); here it
    ran sizes 1M apart as if -i had not been given."""
    err = _one_line(*run_cli(["collective", "allreduce", "-i", "0"])[::2])
    assert err == "lossless: --stepbytes: must be >= 1, got '0' (lossless collective --help)\n"


def test_collective_step_bytes_give_a_bounded_number_of_sizes() -> None:
    from sim.cli.collective import MAX_SIZES

    err = _one_line(*run_cli(["collective", "allreduce", "-b", "1", "-e", "16G", "-i",
                              "1"])[::2])
    assert err == (f"lossless: -i 1: -b 1 to -e {16 << 30} is {16 << 30} sizes, more than "
                   f"{MAX_SIZES} (each is a run)\n")
    # MAX_SIZES sizes pass that check (and stop at the next one, before any run)
    err = _one_line(*run_cli(["collective", "allreduce", "-b", "1", "-e", str(MAX_SIZES),
                              "-i", "1", "-p", "nodes=1", "-p", "gpus_per_node=1"])[::2])
    assert "a collective needs at least 2 GPUs" in err


# ------------------------------------------------------------ a file's value has its type
def _literal(v) -> str:
    """``v`` as a TOML literal."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    return repr(v)


_TYPED = [(t, p) for t, ps in SECTIONS.items() for p in ps if type(p.default) is not str]


@pytest.mark.parametrize(("table", "param"), _TYPED, ids=[f"{t}.{p.name}" for t, p in _TYPED])
def test_a_quoted_value_in_a_fabric_file_is_a_string_and_refused(tmp_path, table, param):
    """``link_gbps = "100"`` in a file is the string "100", refused naming the file, the table
    and the key; ``-p links.link_gbps=100`` is text, read by the key's type."""
    from sim.scenarios.description import apply_overrides
    from tests.test_hostile_params import FABRIC, _fabric_with, _render

    text = _literal(param.default)
    f = tmp_path / "fab.toml"
    f.write_text(_fabric_with(table, param.name, json.dumps(text)))
    label = {"flows": "[[flows]] #2", "pcap": "[[pcap]] #1"}.get(table, f"[{table}]")
    with pytest.raises(ScenarioError) as e:
        loader.build(str(f))
    assert str(e.value) == (f"{f}: {label} parameter '{param.name}': expected "
                            f"{type(param.default).__name__}, got the string {text!r} (write "
                            f"it without quotes)")
    if table not in ("flows", "pcap"):  # -p sets plain tables
        doc = tomllib.loads(_render(FABRIC))
        apply_overrides(doc, {f"{table}.{param.name}": ParamText(text)}, "f.toml")
        got = doc[table][param.name]
        assert got == param.default and type(got) is type(param.default)


def test_quoted_values_of_faults_collectives_and_reference_files_are_refused(tmp_path) -> None:
    base = ('[run]\nduration_ms = 0.01\n[topology]\nkind = "star"\nhosts = 3\n'
            '[traffic]\npattern = "incast"\n')
    cases = {
        '[[faults]]\nkind = "link_down"\nnode = "1"\nport = 0\nat_us = 5\n':
            "[[faults]] #1 parameter 'node': expected int, got the string '1'",
        '[[collective]]\nqps = "2"\n':
            "[[collective]] #1 parameter 'qps': expected int, got the string '2'",
    }
    for i, (tail, want) in enumerate(cases.items()):
        f = tmp_path / f"f{i}.toml"
        f.write_text(base + tail)
        err = _one_line(*run_cli(["replay", str(f), "--out", str(tmp_path / "o")])[::2])
        assert err.startswith(f"lossless: {f}: {want} (write it without quotes)"), err
    f = tmp_path / "ref.toml"
    f.write_text('scenario = "incast"\n[params]\nsenders = "4"\n')
    err = _one_line(*run_cli(["replay", str(f), "--out", str(tmp_path / "o")])[::2])
    assert err == (f"lossless: {f}: [params] parameter 'senders': expected int, got the string "
                   f"'4' (write it without quotes)\n")


def test_command_line_text_is_read_by_the_key_type(tmp_path) -> None:
    """-p values are text: numbers, booleans and faults' keys are read, as before; a fabric
    file's -p boolean is stored as one (-p topology.ecmp=false was the string "false",
    true in the file's checks, so 'contradicts routing')."""
    f = tmp_path / "ls.toml"
    f.write_text('[run]\nduration_ms = 0.005\n[topology]\nkind = "leaf_spine"\n'
                 '[traffic]\npattern = "shift"\n')
    sc = loader.build(str(f), {"topology.routing": ParamText("static"),
                               "topology.ecmp": ParamText("false")})
    assert sc.params["topology"]["ecmp"] is False
    rc, _, err = run_cli(["replay", "incast", "-p", "senders=3", "-p", "duration_ms=0.005",
                          "-p", "fault=link_down:node=1,port=0,at_us=2", "-p", "pfc=false",
                          "--out", str(tmp_path / "o"), "--no-plots"])
    assert rc == 0, err
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert summary["params"]["senders"] == 3 and summary["params"]["pfc"] is False


# ------------------------------------------------------------------- -p given twice
@pytest.mark.parametrize("argv", [
    ["replay", "incast"], ["sweep", "incast", "--workers", "0"], ["ib-vs-roce"],
    ["collective", "allreduce"],
], ids=lambda a: a[0])
def test_every_command_refuses_a_parameter_given_twice(tmp_path, argv) -> None:
    """(ib-vs-roce and replay took the last value.)  The unknown key after it would stop
    the command too: the duplicate must be found first."""
    key = "nodes" if argv[0] == "collective" else "senders"
    rc, _, err = run_cli([*argv, "-p", f"{key}=2", "-p", f"{key}=3", "-p", "nosuch=1",
                          "--out", str(tmp_path / "o")])
    assert _one_line(rc, err) == f"lossless: -p {key}: given twice\n"


def test_sweep_plot_refuses_a_where_given_twice(tmp_path) -> None:
    rc, _, err = run_cli(["sweep-plot", str(tmp_path), "--x", "a", "--y", "b", "--where",
                          "a=1", "--where", "a=2"])
    assert _one_line(rc, err) == "lossless: --where a: given twice\n"


def test_fault_is_the_one_repeatable_parameter() -> None:
    from sim.scenarios.common import collect_params

    got = collect_params([("fault", "a"), ("senders", "2"), ("fault", "b")])
    assert got == {"fault": ["a", "b"], "senders": "2"}
    with pytest.raises(ScenarioError, match=r"^-p senders: given twice$"):
        collect_params([("senders", "2"), ("fault", "a"), ("senders", "2")])


# ------------------------------------------------------------------------ sweep values
@pytest.mark.parametrize(("text", "why"), [
    ("16:2:2", "range '16:2:2': need step > 0 and hi >= lo"),
    ("0:1000000:1", "range '0:1000000:1' has more than 100000 values"),
    ("a:b:c", "range 'a:b:c': expected numbers lo:hi:step"),
])
def test_a_bad_sweep_range_names_its_key(tmp_path, text, why) -> None:
    rc, _, err = run_cli(["sweep", "incast", "-p", "duration_ms=0.01", "-p", f"senders={text}",
                          "--workers", "0", "--out", str(tmp_path / "o")])
    assert _one_line(rc, err) == f"lossless: -p senders: {why}\n"


# ------------------------------------------------------------------------ --help texts
def _subparsers():
    import argparse

    from sim.cli import build_parser

    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return [("lossless", p), *sub.choices.items()]


@pytest.mark.parametrize(("name", "parser"), _subparsers(), ids=lambda x: getattr(x, "prog", x))
def test_help_texts_show_no_argparse_escapes(name, parser) -> None:
    """argparse %-formats option helps but not a description (without %(prog)): a '%%'
    there was printed as such ('95 %% confidence band' in sweep-plot --help)."""
    text = parser.format_help()
    assert "%%" not in text and "%(" not in text, name

"""Hostile scenario parameters and files: every numeric parameter of every built-in
and every numeric key of a fabric file, given ``inf``/``nan``/``-inf``/huge values with ``-p``
or in a TOML file, is one ``lossless: ...`` line naming where it came from and the key, exit
2; reference files with an unknown scenario or key name the file; a missing ``[[pcap]]`` file
and a flow without a route are refused at load time."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim import scenarios
from sim.scenarios import ScenarioError, loader
from sim.scenarios.description import SECTIONS
from sim.units import gbps, ms_to_ps, ns_to_ps, us_to_ps
from tests.helpers import run_cli

PCAP = str(Path(__file__).resolve().parent.parent / "pcaps" / "pfc_pause.pcap")

#: Values no float parameter may take: not finite, or far beyond int64 in any unit.
HOSTILE_FLOATS = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 1e300, -1e300]),
    st.floats(min_value=1e30, allow_infinity=False),
    st.floats(max_value=-1e30, allow_infinity=False),
)
#: Integers beyond int64 (TOML cannot hold them, -p can).
HOSTILE_INTS = st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1))


def _toml(v: float | int) -> str:
    """A TOML literal for ``v`` (``inf``, ``-inf``, ``nan``, ``1e+300``)."""
    if isinstance(v, float) and math.isnan(v):
        return "nan"
    return repr(v)


def _cli(argv: list[str]) -> tuple[int, str]:
    rc, _, err = run_cli(argv)
    return rc, err


def _refused(argv: list[str], *must_name: str) -> str:
    rc, err = _cli(argv)
    lines = err.splitlines()
    assert rc == 2, (argv, err)
    assert len(lines) == 1 and lines[0].startswith("lossless: "), err
    assert "Traceback" not in err
    for text in must_name:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def _numeric(params) -> list:
    return [p for p in params if type(p.default) in (int, float)]


BUILTIN_PARAMS = [(n, p.name, type(p.default)) for n in scenarios.names()
                  for p in _numeric(scenarios.get(n).params_doc)]
FABRIC_KEYS = [(t, p.name, type(p.default)) for t, ps in SECTIONS.items()
               for p in _numeric(ps)]

# a fabric file with one entry in each array, so every table's keys can be set: (table
# header, its keys as TOML text)
FABRIC = [
    ("[run]", {"duration_ms": "0.01"}),
    ("[topology]", {"kind": '"star"', "hosts": "3"}),
    ("[traffic]", {"pattern": '"incast"'}),
    ("[[flows]]", {"src": "1", "dst": "2"}),
    ("[[flows]]", {"src": "2", "dst": "3"}),
    ("[[pcap]]", {"file": repr(PCAP)}),
]


def _render(tables) -> str:
    return "".join(f"{h}\n" + "".join(f"{k} = {v}\n" for k, v in body.items())
                   for h, body in tables)


def _fabric_with(table: str, key: str, literal: str) -> str:
    """FABRIC with ``key = literal`` in ``table`` (in [[flows]] #2 / [[pcap]] #1)."""
    tables = [(h, dict(b)) for h, b in FABRIC]
    want = {"flows": 4, "pcap": 5}.get(table)
    for i, (h, body) in enumerate(tables):
        if i == want or (want is None and h == f"[{table}]"):
            body[key] = literal
            return _render(tables)
    return _render([*tables, (f"[{table}]", {key: literal})])


def _value(kind: type, data) -> float | int:
    if kind is int:
        return data.draw(HOSTILE_INTS)
    # a float parameter given a huge integer (10**400 overflows float())
    return data.draw(st.one_of(HOSTILE_FLOATS, st.integers(min_value=10**30, max_value=10**400)))


# --------------------------------------------------------------------------- built-ins
@pytest.mark.parametrize(("scenario", "key", "kind"), BUILTIN_PARAMS)
@settings(max_examples=4)
@given(data=st.data(), form=st.sampled_from(["-p", "toml"]))
def test_builtin_numeric_params_refuse_hostile_values(scenario, key, kind, data, form) -> None:
    v = _value(kind, data)
    with tempfile.TemporaryDirectory() as d:
        out = str(Path(d) / "o")
        if form == "-p":
            _refused(["replay", scenario, "-p", f"{key}={_toml(v)}", "--out", out,
                      "--no-plots"], "-p", f"'{key}'")
        else:
            f = Path(d) / "ref.toml"
            f.write_text(f'scenario = "{scenario}"\n[params]\n{key} = {_toml(v)}\n')
            _refused(["replay", str(f), "--out", out, "--no-plots"], str(f), "[params]",
                     f"'{key}'")


CC_OPTS = ["g", "alpha_init", "alpha_period_ps", "rate_increase_period_ps",
           "byte_counter_bytes", "rate_ai_bps", "min_rate_bps", "max_cut_fraction"]


@pytest.mark.parametrize("opt", CC_OPTS)
@settings(max_examples=4)
@given(v=HOSTILE_FLOATS)
def test_cc_opts_refuse_hostile_values(opt, v) -> None:
    with tempfile.TemporaryDirectory() as d:
        _refused(["replay", "incast", "-p", "cc=dcqcn", "-p", f"cc_opts={opt}={_toml(v)}",
                  "--out", str(Path(d) / "o"), "--no-plots"], "-p", "'cc_opts'", opt)


# --------------------------------------------------------------------------- fabric files
@pytest.mark.parametrize(("table", "key", "kind"), FABRIC_KEYS)
@settings(max_examples=4)
@given(data=st.data(), form=st.sampled_from(["-p", "toml"]))
def test_fabric_numeric_keys_refuse_hostile_values(table, key, kind, data, form) -> None:
    v = _value(kind, data)
    if kind is int and form == "toml" and not -(2**63) <= v < 2**63:
        form = "-p"  # TOML integers are 64-bit
    if table in ("flows", "pcap"):
        form = "toml"  # -p sets plain tables only
        if kind is int:
            v = data.draw(HOSTILE_FLOATS)  # an int key given a float: refused by type
    label = {"flows": "[[flows]] #2", "pcap": "[[pcap]] #1"}.get(table, f"[{table}]")
    with tempfile.TemporaryDirectory() as d:
        f = Path(d) / "fab.toml"
        out = str(Path(d) / "o")
        if form == "-p":
            f.write_text(_render(FABRIC))
            _refused(["replay", str(f), "-p", f"{table}.{key}={_toml(v)}", "--out", out,
                      "--no-plots"], "-p", label, f"'{key}'")
        else:
            f.write_text(_fabric_with(table, key, _toml(v)))
            _refused(["replay", str(f), "--out", out, "--no-plots"], str(f), label,
                     f"'{key}'")


def test_the_base_fabric_file_is_good(tmp_path) -> None:
    """The hostile-value tests above change one key of a file that builds."""
    f = tmp_path / "fab.toml"
    f.write_text(_render(FABRIC))
    sc = loader.build(str(f))
    assert len(sc.fabric.flows) == 4 and sc.pcaps


# --------------------------------------------------------------------------- the rule itself
@given(st.sampled_from([ns_to_ps, us_to_ps, ms_to_ps, gbps]), HOSTILE_FLOATS)
def test_unit_conversions_refuse_non_finite_and_too_large(conv, v) -> None:
    with pytest.raises(ValueError):
        conv(v)


def test_unit_conversions_at_the_int64_limit() -> None:
    from sim.units import MAX_PS, kb_to_bytes, quantity_problem

    assert ms_to_ps(9_000_000_000) == 9 * 10**18  # 104 days: fits
    assert us_to_ps(MAX_PS // 10**6) <= MAX_PS
    with pytest.raises(ValueError, match="int64 ps"):
        ms_to_ps(10_000_000_000)  # 115 days
    with pytest.raises(ValueError, match="int64 bytes"):
        kb_to_bytes(10**16)
    with pytest.raises(ValueError, match="8000 Gb/s"):
        gbps(10_000)
    assert quantity_problem("duration_ms", 9e9) is None
    assert "int64 ps" in quantity_problem("duration_ms", 1e10)
    assert "int64 ps" in quantity_problem("cable_m", 2 * 10**15)
    assert quantity_problem("seed", 2**63) == "must fit in a 64-bit integer"
    assert quantity_problem("load", math.nan) == "must be a finite number"


# --------------------------------------------------------------------------- reference files
def test_reference_file_with_unknown_scenario_or_key_names_the_file(tmp_path) -> None:
    f = tmp_path / "ref.toml"
    f.write_text('scenario = "incst"\n')
    line = _refused(["replay", str(f), "--out", str(tmp_path / "o")], str(f), "'scenario'",
                    "incst")
    assert "incast" in line  # the known names are listed
    f.write_text('scenario = "incast"\n[params]\nsendrs = 3\n')
    _refused(["replay", str(f), "--out", str(tmp_path / "o")], str(f), "[params]", "sendrs")
    # a check across keys, made by the builder, names the file too
    f.write_text('scenario = "incast"\n[params]\nkmin_kb = 50.0\nkmax_kb = 10.0\n')
    _refused(["replay", str(f), "--out", str(tmp_path / "o")], str(f), "'kmin_kb'")
    # an unknown -p key says -p
    _refused(["replay", str(f), "-p", "sendrs=3", "--out", str(tmp_path / "o")], "-p",
             "sendrs")


# --------------------------------------------------------------------------- [[pcap]] files
def test_missing_pcap_file_names_the_toml_file_entry_and_path(tmp_path) -> None:
    f = tmp_path / "fab.toml"
    f.write_text(_render(FABRIC) + '[[pcap]]\nfile = "nothere.pcap"\n')
    with pytest.raises(ScenarioError) as e:
        loader.build(str(f))  # at load time, before anything runs
    msg = str(e.value)
    assert str(f) in msg and "[[pcap]] #2" in msg and "'file'" in msg
    assert str(tmp_path / "nothere.pcap") in msg and "No such file" in msg
    _refused(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"], str(f),
             "[[pcap]] #2", "nothere.pcap")


# --------------------------------------------------------------------------- routes
ISLANDS = """\
[run]
duration_ms = 0.01
[topology]
kind = "custom"
switch_ids = [0, 1, 2]
host_ids = [10, 11, 20]
links = [[10, 0, 0, 0], [11, 0, 0, 1], [0, 2, 2, 0], [20, 0, 1, 0]]
[[flows]]
src = 10
dst = 11
[[flows]]
src = 11
dst = 20
"""


def test_flow_without_route_is_refused_naming_the_flow_and_where_it_ends(tmp_path) -> None:
    f = tmp_path / "isl.toml"
    f.write_text(ISLANDS)
    line = _refused(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"], str(f),
                    "[[flows]] #2", "11 -> 20", "no route", "switch 0")
    assert "#1" not in line
    # a pattern flow is named by its pattern
    f.write_text(ISLANDS.split("[[flows]]")[0] + '[traffic]\npattern = "all_to_all"\n')
    _refused(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"], str(f),
             "[traffic] pattern 'all_to_all'", "no route")
    # joined, the same file builds
    f.write_text(ISLANDS.replace("[20, 0, 1, 0]]", "[20, 0, 1, 0], [2, 1, 1, 1]]"))
    assert len(loader.build(str(f)).fabric.flows) == 2


def test_route_problem_follows_every_ecmp_member_and_finds_loops() -> None:
    from sim.fabric import Fabric
    from sim.fabric.topology import route_problem
    from sim.net.mmu import Mmu, MmuConfig

    rate = gbps(100)
    fab = Fabric()
    cfg = MmuConfig(buffer_bytes=10**6, ports=4, xoff_bytes=20_000)
    fab.add_switch(0, Mmu(cfg), routes={21: (1, 2)})
    fab.add_switch(1, Mmu(cfg), routes={21: 1})
    fab.add_switch(2, Mmu(cfg), routes={21: 1})  # to switch 3
    fab.add_switch(3, Mmu(cfg), routes={21: 0})  # back to 2: a loop
    fab.add_host(20, rate)
    fab.add_host(21, rate)
    fab.connect(20, 0, 0, 0, rate, 0)
    fab.connect(0, 1, 1, 0, rate, 0)
    fab.connect(0, 2, 2, 0, rate, 0)
    fab.connect(1, 1, 21, 0, rate, 0)
    fab.connect(2, 1, 3, 0, rate, 0)
    assert route_problem(fab, 20, 21) == "loops at switch 2"
    fab.nodes[3].routes[21] = 2  # a port switch 3 has not got
    assert route_problem(fab, 20, 21) == "switch 3 port 2 is not connected"

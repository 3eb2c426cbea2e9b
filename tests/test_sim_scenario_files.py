"""Built-in ``leaf_spine`` and ``ring`` scenarios and fabric files (TOML describing the whole
set-up): docs/reference/builtin-scenarios.md, docs/reference/fabric-file.md."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sim import scenarios
from sim.cli import main
from sim.scenarios import ScenarioError, loader
from sim.study.results import run_scenario

PCAPS = Path(__file__).resolve().parent.parent / "pcaps"


def _run(tmp_path, name, params=None, **kw):
    return run_scenario(name, params=params, out_dir=str(tmp_path / "o"), plots=False, **kw)


def _write(tmp_path, text: str, name: str = "f.toml") -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


# ------------------------------------------------------------------ built-in leaf_spine, ring
def test_builtins_are_listed() -> None:
    assert {"incast", "leaf_spine", "ring"} <= set(scenarios.names())


def test_leaf_spine_shift_delivers_and_ecmp_uses_every_spine(tmp_path) -> None:
    s = _run(tmp_path, "leaf_spine", {"duration_ms": 0.1, "hosts_per_leaf": 4})
    assert len(s["flows"]) == 8 and all(f["bytes_delivered"] > 0 for f in s["flows"])
    assert s["totals"]["drops"] == 0
    spine_tx = {p["node"]: p["tx_bytes"] for p in s["ports"] if p["node"] in (0, 1)}
    assert len(spine_tx) == 2 and min(spine_tx.values()) > 0
    # without ECMP a leaf sends all traffic for one destination to one spine; with "shift"
    # and 4 hosts per leaf both spines are still used (dst % spines), but per-port counts
    # differ from the ECMP run:
    s2 = _run(tmp_path, "leaf_spine", {"duration_ms": 0.1, "hosts_per_leaf": 4,
                                       "ecmp": False})
    assert [p["tx_bytes"] for p in s2["ports"]] != [p["tx_bytes"] for p in s["ports"]]


def test_leaf_spine_incast_pattern_congests_and_pauses(tmp_path) -> None:
    s = _run(tmp_path, "leaf_spine", {"duration_ms": 0.2, "pattern": "incast"})
    assert len(s["flows"]) == 7 and s["totals"]["pauses"] > 0 and s["totals"]["drops"] == 0


def test_ring_runs_and_checks_hops(tmp_path) -> None:
    s = _run(tmp_path, "ring", {"duration_ms": 0.1, "rate_frac": 0.3})
    assert len(s["flows"]) == 4 and all(f["bytes_delivered"] > 0 for f in s["flows"])
    assert s["bottleneck"]["node"] == 0 and s["bottleneck"]["port"] == 1
    with pytest.raises(ScenarioError, match="'hops'"):
        scenarios.get("ring").builder({"hops": 4})
    with pytest.raises(ScenarioError, match="'rate_frac'"):
        scenarios.get("ring").builder({"rate_frac": 0})


def test_ring_stop_ms_stops_the_sources(tmp_path) -> None:
    a = _run(tmp_path, "ring", {"duration_ms": 0.2, "rate_frac": 0.2, "stop_ms": 0.05})
    b = _run(tmp_path, "ring", {"duration_ms": 0.2, "rate_frac": 0.2})
    for fa, fb in zip(a["flows"], b["flows"], strict=True):
        assert 0 < fa["bytes_delivered"] < fb["bytes_delivered"] / 2


# ------------------------------------------------------------------------------ fabric files
STAR = """
description = "the incast built-in, written out"
[run]
duration_ms = 0.1
seed = 3
[topology]
kind = "star"
hosts = 5
[links]
link_gbps = 100.0
cable_m = 10
[switch]
pfc = true
buffer_kb = 1000.0
xoff_kb = 20.0
[ecn]
kmin_kb = 1.0
kmax_kb = 10.0
pmax = 1.0
[traffic]
pattern = "incast"
"""


def test_star_file_builds_the_same_fabric_as_the_incast_builtin(tmp_path) -> None:
    f = _write(tmp_path, STAR)
    a = run_scenario(f, out_dir=str(tmp_path / "a"), plots=False)
    b = run_scenario("incast", {"senders": 4, "duration_ms": 0.1, "kmin_kb": 1.0,
                                 "kmax_kb": 10.0, "pmax": 1.0},
                      seed=3, out_dir=str(tmp_path / "b"), plots=False)
    # file: host 1 is the receiver (pattern "incast" sends to the first host); the built-in
    # sends to node 5.  Same counts, mirrored node ids: compare the totals and the
    # bottleneck.
    assert a["scenario"] == "f" and a["params"]["file"] == f
    assert a["totals"] == b["totals"]
    assert a["bottleneck"]["utilisation"] == b["bottleneck"]["utilisation"]
    assert sorted(x["bytes_delivered"] for x in a["flows"]) == \
        sorted(x["bytes_delivered"] for x in b["flows"])


CUSTOM = """
[run]
duration_ms = 0.05
[topology]
kind = "custom"
switch_ids = [0, 1]
host_ids = [10, 11, 20, 21]
ecmp = true
links = [[10, 0, 0, 0], [11, 0, 0, 1], [20, 0, 1, 0], [21, 0, 1, 1],
         [0, 2, 1, 2], [0, 3, 1, 3]]
[[flows]]
src = 10
dst = 20
rate_gbps = 40.0
[[flows]]
src = 11
dst = 21
size_kb = 50.0
[[flows]]
src = 20
dst = 11
start_us = 10.0
stop_us = 30.0
on_us = 5.0
off_us = 5.0
message_kb = 2.5
[hosts]
ack_every = 4
cnp_mode = "window"
[capture]
bottleneck = "1:0"
ports = ["0:2", "0:3"]
"""


def test_custom_topology_routes_by_bfs_with_ecmp(tmp_path) -> None:
    f = _write(tmp_path, CUSTOM)
    sc = loader.build(f)
    sw0 = sc.fabric.nodes[0]
    assert sw0.routes[10] == 0 and sw0.routes[11] == 1
    assert tuple(sw0.routes[20]) == (2, 3)  # two equal-cost links to switch 1
    s = run_scenario(f, out_dir=str(tmp_path / "o"), plots=False)
    got = {x["id"]: x for x in s["flows"]}
    assert all(got[i]["bytes_delivered"] > 0 for i in range(3))
    assert got[1]["bytes_delivered"] == 50_000 and got[1]["fct_ps"] is not None
    assert set(s["captures"]) == {"1:0", "0:2", "0:3"}
    h20 = sc.fabric.nodes[20]
    assert h20._flows[2].on_ps == 5_000_000 and h20._flows[2].message_bytes == 2500
    assert s["flows"][2]["bytes_delivered"] < got[0]["bytes_delivered"]
    sc2 = loader.build(f, {"topology.ecmp": False})
    assert sc2.fabric.nodes[0].routes[20] == 2


def test_fabric_file_overrides_and_seed(tmp_path) -> None:
    f = _write(tmp_path, STAR)
    sc = loader.build(f, {"switch.xoff_kb": 30, "duration_ms": 0.2}, seed=9)
    assert sc.seed == 9 and sc.duration_ps == 200_000_000
    assert sc.params["switch"]["xoff_kb"] == 30.0
    with pytest.raises(ScenarioError, match="nosuch"):
        loader.build(f, {"nosuch.key": 1})
    with pytest.raises(ScenarioError, match=r"\[switch\].*'xof'"):
        loader.build(f, {"switch.xof": 1})


def _tables(text: str) -> dict[str, str]:
    """STAR split into its tables (header -> body)."""
    out: dict[str, str] = {}
    head = ""
    for line in text.strip().splitlines():
        if line.startswith("["):
            head = line
            out[head] = ""
        else:
            out[head] = out.get(head, "") + line + "\n"
    return out


@pytest.mark.parametrize(("table", "body", "match"), [
    ("[bogus]", "x = 1", r"bogus"),
    ("[hosts]", 'cc = "warp"', r"\[hosts\].*'cc'"),
    ("[hosts]", 'cc = "dcqcn"\npreset = "nope"', r"\[hosts\].*'preset'"),
    ("[topology]", 'kind = "ring"\nleaves = 3', r"leaves.*ring"),
    ("[switch]", "buffer_kb = 5.0", r"\[switch\].*buffer_kb"),
    ("[switch]", "weights = [1, 2]", r"\[switch\].*'weights'"),
    ("[ecn]", "kmin_kb = 50.0\nkmax_kb = 10.0", r"\[ecn\].*kmin_kb"),
    ("[[flows]]", "src = 1\ndst = 99", r"flows\]\] #1 'dst'.*99"),
    ("[[flows]]", "src = 1\ndst = 1", r"#1 'dst'"),
    ("[[flows]]", "src = 1\ndst = 2\nspeed = 3", r"#1.*speed"),
    ("[[pcap]]", "time_scale = 2.0", r"\[\[pcap\]\] #1 'file'"),
    ("[capture]", 'bottleneck = "7:7"', r"7:7"),
    ("[capture]", 'bottleneck = "x"', r"'bottleneck'"),
])
def test_fabric_file_errors_name_the_table_and_key(tmp_path, table, body, match) -> None:
    tables = _tables(STAR)
    tables[table] = body + "\n"  # replaces the table if STAR has it
    text = "".join(f"{h}\n{b}" if h else b for h, b in tables.items())
    f = _write(tmp_path, text)
    with pytest.raises(ScenarioError, match=match) as e:
        loader.build(f)
    assert "f.toml" in str(e.value)


def test_custom_topology_errors(tmp_path) -> None:
    bad_port = CUSTOM.replace("[0, 3, 1, 3]]", "[0, 2, 1, 3]]")
    with pytest.raises(ScenarioError, match="0:2 is used twice"):
        loader.build(_write(tmp_path, bad_port))
    host_port = CUSTOM.replace("[10, 0, 0, 0]", "[10, 1, 0, 0]")
    with pytest.raises(ScenarioError, match="host 10 has one port"):
        loader.build(_write(tmp_path, host_port))
    stranger = CUSTOM.replace("[21, 0, 1, 1]", "[22, 0, 1, 1]")
    with pytest.raises(ScenarioError, match="node 22"):
        loader.build(_write(tmp_path, stranger))


def test_no_traffic_is_an_error(tmp_path) -> None:
    f = _write(tmp_path, STAR.replace('pattern = "incast"', 'pattern = ""'))
    with pytest.raises(ScenarioError, match="no traffic"):
        loader.build(f)


def test_fabric_file_replays_a_pcap_relative_to_itself(tmp_path) -> None:
    shutil.copy(PCAPS / "roce_rc.pcap", tmp_path / "in.pcap")
    text = STAR.replace('[traffic]\npattern = "incast"\n',
                        '[[pcap]]\nfile = "in.pcap"\ntime_scale = 0.5\n')
    f = _write(tmp_path, text)
    s = run_scenario(f, out_dir=str(tmp_path / "o"), plots=False)
    assert s["replay"]["files"] == ["in.pcap"]
    assert s["replay"]["injected"] + s["replay"]["skipped"] > 0


def test_cli_replay_with_a_fabric_file(tmp_path, capsys) -> None:
    f = _write(tmp_path, STAR, "mystar.toml")
    out = tmp_path / "cli"
    assert main(["replay", f, "-p", "switch.xoff_kb=25", "--out", str(out),
                 "--no-plots"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["scenario"] == "mystar" and s["params"]["switch"]["xoff_kb"] == 25.0
    assert main(["replay", f, "-p", "switch.xoff_kb=-1", "--out", str(out)]) == 2
    assert "xoff_kb" in capsys.readouterr().err


def test_docs_list_every_builtin_parameter_with_its_default() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "builtin-scenarios.md"
           ).read_text(encoding="utf-8")
    for name in scenarios.names():
        assert f"## `{name}`" in doc
        for p in scenarios.get(name).params_doc:
            d = json.dumps(p.default) if isinstance(p.default, str | bool) else repr(p.default)
            assert f"| `{p.name}` | {p.type.__name__} | {d} |" in doc, (name, p.name)


def test_docs_example_fabric_file_runs(tmp_path) -> None:
    ex = Path(__file__).resolve().parent.parent / "docs" / "examples" / "two_switches.toml"
    s = run_scenario(str(ex), {"duration_ms": 0.05}, out_dir=str(tmp_path / "o"),
                      plots=False)
    assert s["scenario"] == "two_switches" and s["flows"][0]["bytes_delivered"] > 0


def test_cli_time_scale_stretches_the_replayed_capture(tmp_path) -> None:
    import wire

    recs = []
    for i in range(2):
        f = wire.build({"ipv4": {"src": "10.0.0.1", "dst": "10.0.0.5", "ecn": 2}, "udp": {},
                        "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": 70},
                        "payload": {"length": 500}})
        recs.append(wire.Record(ts_ns=i * 1000, data=f, orig_len=len(f)))
    pcap = tmp_path / "in.pcap"
    wire.write(pcap, recs)
    got = {}
    for scale in ("1", "200"):  # 1 us apart, or 200 us: after the 100 us run
        out = tmp_path / scale
        assert main(["replay", "incast", "-p", "senders=4", "-p", "duration_ms=0.1",
                     "--pcap", str(pcap), "--time-scale", scale, "--out", str(out),
                     "--no-plots"]) == 0
        got[scale] = json.loads((out / "summary.json").read_text())["replay"]
    assert got["1"]["delivered_bytes"] == 2 * len(recs[0].data)
    assert got["200"]["delivered_bytes"] == len(recs[0].data)
    with pytest.raises(SystemExit) as e:  # a usage error: one line, exit 2
        main(["replay", "incast", "--pcap", str(pcap), "--time-scale", "0"])
    assert e.value.code == 2


def test_ingress_occupancy_series(tmp_path) -> None:
    import numpy as np

    from sim.scenarios.common import RESERVED_BYTES

    out = tmp_path / "occ"
    s = run_scenario("incast", {"senders": 4, "duration_ms": 0.2}, out_dir=str(out),
                      plots=False)
    ts = np.load(out / "timeseries.npz")
    sc = loader.build("incast", {"senders": 4})
    hr = sc.info["headroom_bytes"]
    limit = RESERVED_BYTES + 20_000 + hr  # reserve + XOFF (20 KB) + headroom
    for port in range(1, 5):
        t = ts[f"ingress_n0_p{port}_pg3_t_ps"]
        b = ts[f"ingress_n0_p{port}_pg3_bytes"]
        assert len(t) > 10 and (np.diff(t) >= 0).all()
        assert b.min() >= 0 and 20_000 < b.max() <= limit  # PFC holds it near XOFF
    assert s["totals"]["drops"] == 0 and s["totals"]["pauses"] > 0


def test_utilisation_counts_only_the_part_of_the_last_frame_already_sent(tmp_path) -> None:
    """A run that ends while a 4 KB frame is on the wire: busy time stops at the end of the
    run (it used to count the whole frame, giving utilisation 1.0116 here)."""
    s = run_scenario("sue_packing", {"pattern": "incast", "load": 2.0},
                      out_dir=str(tmp_path / "o"), plots=False)
    assert 0.99 < s["bottleneck"]["utilisation"] <= 1.0
    assert all(p["busy_ps"] <= s["duration_ps"] for p in s["ports"])


@pytest.mark.parametrize("case", range(30))
def test_step_mean_matches_an_exact_sum(case) -> None:
    """sim.study.results.step_mean (summary's mean_queue_bytes, queue_mean_bytes) against the
    area computed sample by sample with exact fractions, on random step functions."""
    import random
    from fractions import Fraction

    from sim.study.results import step_mean

    rng = random.Random(case)
    t = sorted(rng.randrange(0, 10_000) for _ in range(rng.randrange(0, 20)))
    v = [rng.randrange(0, 5_000) for _ in t]
    t0 = rng.randrange(0, 5_000)
    t1 = t0 + rng.randrange(1, 8_000)
    area = Fraction(0)
    for x in range(t0, t1):  # value in force over [x, x + 1)
        k = max((i for i, ti in enumerate(t) if ti <= x), default=None)
        area += v[k] if k is not None else 0
    assert step_mean(t, v, t0, t1) == pytest.approx(float(area / (t1 - t0)), rel=1e-12)


def test_a_scenario_file_that_is_not_utf8_is_a_clear_error(tmp_path, capsys) -> None:
    f = tmp_path / "latin1.toml"
    f.write_bytes(b'description = "caf\xe9"\n')
    with pytest.raises(ScenarioError, match=r"latin1\.toml: not valid TOML: byte 18"):
        loader.build(str(f))
    assert main(["replay", str(f), "--out", str(tmp_path / "o")]) == 2
    assert "not UTF-8" in capsys.readouterr().err


def test_capture_table_sets_the_runs_capture_knobs(tmp_path) -> None:
    """[capture] limit_mb / snaplen / enabled are the file's defaults; the options win."""
    base = STAR
    f = _write(tmp_path, base + "\n[capture]\nsnaplen = 64\nlimit_mb = 0.05\n", "cap.toml")
    out = tmp_path / "a"
    assert main(["replay", f, "--out", str(out), "--no-plots"]) in (0, 1)
    s = json.loads((out / "summary.json").read_text())
    assert s["capture"]["snaplen_bytes"] == 64 and s["capture"]["limit_bytes"] == 50_000
    import wire

    recs = list(wire.read(out / "bottleneck.pcap"))
    assert recs and all(len(r.data) <= 64 < r.orig_len for r in recs if r.orig_len > 64)
    # the command line wins over the file
    out2 = tmp_path / "b"
    assert main(["replay", f, "--out", str(out2), "--no-plots", "--snaplen", "128"]) in (0, 1)
    assert json.loads((out2 / "summary.json").read_text())["capture"]["snaplen_bytes"] == 128
    g = _write(tmp_path, base + "\n[capture]\nenabled = false\n", "nocap.toml")
    out3 = tmp_path / "c"
    assert main(["replay", g, "--out", str(out3), "--no-plots"]) == 0
    assert not list(out3.glob("*.pcap"))
    bad = _write(tmp_path, base + "\n[capture]\nlimit_mb = inf\n", "bad.toml")
    assert main(["replay", bad, "--out", str(tmp_path / "d"), "--no-plots"]) == 2

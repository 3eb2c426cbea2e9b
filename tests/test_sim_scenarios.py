"""Scenarios: registry, TOML files, ``lossless replay`` outputs, plots, determinism."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from sim import scenarios
from sim.cli import main
from sim.scenarios import ScenarioError, loader
from sim.study.results import run_scenario
from wire.pcapio import CaptureReader
from wire.stack import dissect

SMALL = ["-p", "senders=4", "-p", "duration_ms=0.2"]


def _replay(tmp_path, name: str, *extra: str) -> tuple[dict, object]:
    out = tmp_path / name
    assert main(["replay", "incast", *SMALL, "--out", str(out), "--no-plots", *extra]) == 0
    return json.loads((out / "summary.json").read_text()), out


@pytest.fixture(scope="module")
def pfc_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pfc")
    out = tmp / "a"
    assert main(["replay", "incast", *SMALL, "--out", str(out), "--no-plots",
                 "--capture", "0:1", "-p", "kmin_kb=1", "-p", "kmax_kb=10",
                 "-p", "pmax=1.0"]) == 0
    return tmp, out


def test_registry_lists_incast_and_rejects_unknown_names() -> None:
    assert "incast" in scenarios.names()
    info = scenarios.get("incast")
    assert {p.name for p in info.params_doc} >= {
        "senders", "link_gbps", "pfc", "xoff_kb", "buffer_kb", "duration_ms", "cc", "seed",
        "kmin_kb", "kmax_kb", "pmax", "cable_m", "packet_bytes"}
    with pytest.raises(ScenarioError, match="nosuch"):
        scenarios.get("nosuch")
    with pytest.raises(ValueError, match="already"):
        scenarios.register("incast", info.builder, info.params_doc)


@pytest.mark.parametrize(("params", "key"), [
    ({"bogus": 1}, "bogus"), ({"senders": 0}, "senders"), ({"pmax": 2}, "pmax"),
    ({"cc": "foo"}, "cc"), ({"cc": "dcqcn", "preset": "nope"}, "preset"),
    ({"cc": "dcqcn", "cc_opts": "warp=9"}, "cc_opts"), ({"preset": "paper"}, "preset"),
    ({"senders": "x"}, "senders"),
    ({"pfc": 3}, "pfc"), ({"kmin_kb": 50, "kmax_kb": 10}, "kmin_kb"),
    ({"buffer_kb": 10}, "buffer_kb"), ({"duration_ms": 0}, "duration_ms"),
])
def test_bad_params_are_rejected_naming_the_key(params, key) -> None:
    with pytest.raises(ScenarioError, match=f"'{key}'|\\['{key}'\\]"):
        scenarios.get("incast").builder(params)


def test_command_line_text_is_parsed_like_toml_and_a_string_stays_a_string() -> None:
    from sim.scenarios.base import ParamText

    text = {"senders": ParamText("3"), "pfc": ParamText("false"), "pmax": ParamText("0.5")}
    sc = scenarios.get("incast").builder(text)
    assert sc.params["senders"] == 3 and sc.params["pfc"] is False and sc.params["pmax"] == 0.5
    # a str from a file (or Python) has its type: "3" is not a number
    for key, value, t in (("senders", "3", "int"), ("pfc", "false", "bool"),
                          ("pmax", "0.5", "float")):
        with pytest.raises(ScenarioError, match=rf"^parameter '{key}': expected {t}, got the "
                                                rf"string '{value}' \(write it without "
                                                rf"quotes\)$"):
            scenarios.get("incast").builder({key: value})
    with pytest.raises(ScenarioError, match=r"expected int, got the string 'x'$"):
        scenarios.get("incast").builder({"senders": "x"})


def test_toml_file(tmp_path) -> None:
    f = tmp_path / "s.toml"
    f.write_text('scenario = "incast"\n[params]\nsenders = 3\npfc = false\n')
    name, params = loader.resolve(str(f), {"senders": 2})
    assert name == "incast" and params == {"senders": 2, "pfc": False}
    bad = tmp_path / "bad.toml"
    bad.write_text('scenario = "incast"\nextra = 1\n')
    with pytest.raises(ScenarioError, match="extra"):
        loader.load(bad)
    bad.write_text('scenario = "incast"\n[params]\nsendrs = 3\n')
    with pytest.raises(ScenarioError, match="sendrs"):
        run_scenario(str(bad), out_dir=str(tmp_path / "o"), plots=False)
    bad.write_text('scenario = "nope"\n')
    with pytest.raises(ScenarioError, match="nope"):
        loader.load(bad)


def test_replay_writes_all_files_and_pfc_is_lossless(pfc_run) -> None:
    _, out = pfc_run
    for name in ("summary.json", "timeseries.npz", "events.jsonl", "bottleneck.pcap",
                 "capture_0_1.pcap"):
        assert (out / name).is_file(), name
    s = json.loads((out / "summary.json").read_text())
    assert s["scenario"] == "incast" and s["params"]["senders"] == 4
    assert s["duration_ps"] == 200_000_000
    assert s["totals"]["drops"] == 0 and s["totals"]["pauses"] > 0
    # CE marks reach the receiver, which answers with CNPs (at most one per 50 us per flow)
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    cnp_events = [e for e in events if e["event"] == "CNPSent"]
    assert s["totals"]["cnps"] == len(cnp_events) > 0
    for flow in {e["flow"] for e in cnp_events}:
        ts = [e["t_ps"] for e in cnp_events if e["flow"] == flow]
        assert all(b - a >= 50_000_000 for a, b in itertools.pairwise(ts))
    assert len(s["flows"]) == 4
    assert set(s["flows"][0]) >= {"id", "src", "dst", "bytes_delivered", "throughput_bps",
                                  "fct_ps"}
    assert set(s["ports"][0]) >= {"node", "port", "tx_bytes", "drops", "ce_marked",
                                  "pause_sent", "pause_received", "paused_ps",
                                  "max_queue_bytes", "mean_queue_bytes"}
    bott = next(p for p in s["ports"] if (p["node"], p["port"]) == (0, 5))
    assert 0 < bott["mean_queue_bytes"] <= bott["max_queue_bytes"]
    assert s["bottleneck"]["utilisation"] > 0.99
    assert sum(p["ce_marked"] for p in s["ports"]) == s["totals"]["ce_marked"] > 0
    ts = np.load(out / "timeseries.npz")
    assert len(ts["queue_n0_p5_q3_t_ps"]) == len(ts["queue_n0_p5_q3_bytes"]) > 0
    delivered = sum(int(ts[f"flow_{i}_rx_bytes"].sum()) for i in range(4))
    assert 0 < delivered <= sum(f["bytes_delivered"] for f in s["flows"])
    assert set(ts["pfc_tx_n0_p1_prio3_state"]) == {0, 1}
    assert "pfc_rx_n1_p0_prio3_t_ps" in ts.files
    kinds = {json.loads(line)["event"] for line in (out / "events.jsonl").open()}
    assert {"PauseSent", "PauseReceived", "CEMarked"} <= kinds
    assert not kinds & {"Enqueued", "Dequeued"}


def test_pcaps_decode_and_show_pfc_and_ce(pfc_run, capsys) -> None:
    _, out = pfc_run
    capsys.readouterr()
    assert main(["decode", str(out / "bottleneck.pcap"), str(out / "capture_0_1.pcap")]) == 0
    capsys.readouterr()
    ce = data = 0
    with CaptureReader(str(out / "bottleneck.pcap")) as r:
        for rec in r:
            d = dissect(rec.data, rec.orig_len)
            assert not d.problems and len(rec.data) == 1082
            data += 1
            ce += d.layers["ipv4"]["ecn"] == 3
    assert data > 0 and ce > 0
    with CaptureReader(str(out / "capture_0_1.pcap")) as r:
        assert any("pfc" in dissect(rec.data, rec.orig_len).layers for rec in r)


def test_same_seed_gives_identical_outputs(pfc_run, tmp_path) -> None:
    _, first = pfc_run
    out = tmp_path / "b"
    assert main(["replay", "incast", *SMALL, "--out", str(out), "--no-plots",
                 "--capture", "0:1", "-p", "kmin_kb=1", "-p", "kmax_kb=10",
                 "-p", "pmax=1.0"]) == 0
    for name in ("summary.json", "events.jsonl", "bottleneck.pcap"):
        assert (out / name).read_bytes() == (first / name).read_bytes(), name


def test_without_pfc_the_incast_drops(tmp_path) -> None:
    s, out = _replay(tmp_path, "lossy", "-p", "pfc=false", "--seed", "3")
    assert s["seed"] == 3 and s["params"]["seed"] == 3
    assert s["totals"]["drops"] > 0 and s["totals"]["pauses"] == 0
    assert sum(p["drops"] for p in s["ports"]) == s["totals"]["drops"]
    assert '"Dropped"' in (out / "events.jsonl").read_text()


def test_plot_writes_pngs(pfc_run, capsys) -> None:
    _, out = pfc_run
    assert main(["plot", str(out)]) == 0
    for name in ("queue_depth.png", "throughput.png", "pfc.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_scenarios_command_and_usage_errors(capsys, tmp_path) -> None:
    assert main(["scenarios"]) == 0
    text = capsys.readouterr().out
    assert "incast" in text and "senders" in text and "pmax" in text
    assert main(["replay", "incast", "-p", "pmax=2", "--out", str(tmp_path / "x")]) == 2
    assert "pmax" in capsys.readouterr().err
    assert main(["replay", "nosuch", "--out", str(tmp_path / "y")]) == 2
    assert "nosuch" in capsys.readouterr().err


def test_replay_injects_a_pcap_at_the_owning_hosts(tmp_path) -> None:
    """--pcap: frames from 10.0.0.N enter at host N at their relative timestamps and reach
    their destination host; frames of addresses no host owns are skipped and counted."""
    import wire
    from sim.cli import main

    recs = []
    for i, src in enumerate(("10.0.0.1", "10.0.0.2", "192.168.1.1")):
        f = wire.build({"vlan": [{"pcp": 3, "vid": 1}],
                        "ipv4": {"src": src, "dst": "10.0.0.5", "ecn": 2}, "udp": {},
                        "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": 70 + i},
                        "payload": {"length": 1000}})
        recs.append(wire.Record(ts_ns=1_700_000_000_000_000_000 + i * 1000, data=f,
                                orig_len=len(f)))
    pcap = tmp_path / "in.pcap"
    wire.write(pcap, recs)
    out = tmp_path / "o"
    rc = main(["replay", "incast", "-p", "senders=4", "-p", "duration_ms=0.1", "--pcap",
               str(pcap), "--out", str(out), "--no-plots"])
    assert rc == 1  # results written, but a frame was skipped (docs/reference/replay.md)
    rp = json.loads((out / "summary.json").read_text())["replay"]
    assert rp["injected"] == 2 and rp["skipped"] == 1
    assert rp["delivered_bytes"] == 2 * len(recs[0].data)
    bad = tmp_path / "bad.pcap"
    bad.write_bytes(b"junk")
    assert main(["replay", "incast", "--pcap", str(bad), "--out", str(out), "--no-plots"]) == 2

"""Replayed captures as first-class flows (``lossless replay SCENARIO --pcap FILE``): a capture
replays alone through a built-in fabric (``-p load=0``, ``-p background=false``); its flows
have summary.json figures that balance, names, throughput series and lines; the bottleneck
(bottleneck.pcap, queue_depth.png) is the port the replayed traffic congests; the simulated
NICs carry replayed frames as they are; the deepest queue is named."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire
from sim import scenarios
from sim.addresses import node_ip, node_mac
from sim.cli import main
from sim.packet import REPLAY_FLOW_BASE
from sim.scenarios.loader import build
from sim.study.results import run_scenario
from wire.pcapio import CaptureWriter

#: 1082-byte frames back to back at 100 Gb/s (86.56 ns), ns.
GAP_NS = 87


def _capture(path: Path, pairs: list[tuple[int, int]], us: float, opcode: str =
             "RC_RDMA_WRITE_MIDDLE", payload: int = 1024, qp: int | None = None) -> int:
    """Frames from each (src, dst) host pair at line rate for ``us``: a capture in the
    simulator's own addresses (destination QP ``qp``, default the source's id); returns how
    many."""
    recs = []
    for s, d in pairs:
        for i in range(int(us * 1000 / GAP_NS)):
            f = wire.build({"eth": {"src": node_mac(s), "dst": node_mac(d)},
                            "ipv4": {"src": node_ip(s), "dst": node_ip(d), "ecn": 2,
                                     "dscp": 26},
                            "udp": {}, "bth": {"opcode": opcode, "dest_qp": s if qp is None else qp,
                                    "psn": i},
                            "payload": {"length": payload}})
            recs.append((10**9 + i * GAP_NS + s, f))
    recs.sort()
    w = CaptureWriter(str(path))
    for t, f in recs:
        w.write(f, ts_ns=t)
    w.close()
    return len(recs)


#: leaf_spine's defaults: spines 0-1, leaves 2-3, hosts 4-7 on leaf0 and 8-11 on leaf1.
INCAST = [(4, 9), (5, 9), (6, 9), (8, 9)]


@pytest.fixture(scope="module")
def alone(tmp_path_factory):
    """An incast to h9 replayed alone through leaf_spine (its own flows off by load=0)."""
    d = tmp_path_factory.mktemp("alone")
    n = _capture(d / "incast.pcap", INCAST, 10)
    out = d / "o"
    code = main(["replay", "leaf_spine", "-p", "load=0", "-p", "duration_ms=0.03",
                 "--pcap", str(d / "incast.pcap"), "--out", str(out), "--no-plots"])
    return code, n, out, json.loads((out / "summary.json").read_text())


def test_load_zero_and_background_false_leave_no_own_flow():
    """Every built-in with flows of its own takes background=false; load=0 (leaf_spine,
    pfc_storm: it was refused, 'must be in (0, 1]') leaves none either."""
    for name in scenarios.names():
        if name == "sue_packing":  # XPUs, no host to replay into
            continue
        assert build(name, {}, None).fabric.flows, name
        assert not build(name, {"background": False}, None).fabric.flows, name
    for name in ("leaf_spine", "pfc_storm"):
        assert not build(name, {"load": 0}, None).fabric.flows


def test_replayed_alone_flows_are_reported_as_flows(alone):
    code, n, _out, s = alone
    assert code == 0
    ids = [f["id"] for f in s["flows"]]
    assert ids == [REPLAY_FLOW_BASE + i for i in range(4)]  # only the capture's
    for f in s["flows"]:
        assert f["sent_packets"] == f["delivered_packets"] + f["dropped_packets"] \
            + f["in_flight_packets"]
        assert f["delivered_bytes"] == f["bytes_delivered"] > 0 and f["throughput_bps"] > 0
    assert sum(f["sent_packets"] for f in s["flows"]) == s["replay"]["injected"] == n
    assert sum(f["delivered_bytes"] for f in s["flows"]) == s["replay"]["delivered_bytes"]
    assert "problems" not in s
    lab = {f["id"]: f for f in s["labels"]["flows"]}
    assert [(lab[i]["name"], lab[i]["role"]) for i in ids] == [
        ("h4 -> h9", "replayed"), ("h5 -> h9", "replayed"), ("h6 -> h9", "replayed"),
        ("h8 -> h9", "replayed")]
    assert all(90e9 < lab[i]["rate_bps"] < 110e9 for i in ids)  # the capture's line rate


def test_replayed_flows_have_throughput_series_and_lines(alone):
    from sim.study.plot import figures, texts

    _code, _n, out, s = alone
    with np.load(out / "timeseries.npz") as ts:
        for f in s["flows"]:
            assert int(ts[f"flow_{f['id']}_rx_bytes"].sum()) == f["delivered_bytes"]
    t = texts(figures(out)["throughput.png"])
    assert {"replayed: h4 -> h9", "replayed: h8 -> h9"} <= set(t)
    assert any(x.startswith("total, all 4 flows") for x in t)


def test_bottleneck_is_where_the_replay_congests(alone):
    """The scenario's own bottleneck (leaf0's uplink) carries none of the capture: the
    bottleneck (summary, bottleneck.pcap, queue_depth.png) is leaf1's port to h9."""
    from sim.study.plot import figures, texts

    _code, n, out, s = alone
    assert (s["bottleneck"]["node"], s["bottleneck"]["port"]) == (3, 1)
    assert s["replay"]["bottleneck"]["scenario_bottleneck"] == [2, 4]
    assert s["replay"]["bottleneck"]["offered_backlog_bytes"] > 100_000
    assert s["bottleneck"]["utilisation"] > 0.9
    frames = list(wire.read(str(out / "bottleneck.pcap")))
    assert len(frames) > n / 2
    assert {wire.dissect(r.data)["ipv4"]["dst"] for r in frames} == {node_ip(9)}
    t = texts(figures(out)["queue_depth.png"])
    assert "egress queue of the bottleneck port leaf1:p1 -> h9" in t


def test_summary_line_names_the_deepest_queue(alone, capsys):
    _code, _n, out, s = alone
    code = main(["replay", "leaf_spine", "-p", "load=0", "-p", "duration_ms=0.03",
                 "--pcap", str(out.parent / "incast.pcap"), "--out", str(out), "--no-plots"])
    err = capsys.readouterr().err
    peak = next(p["max_queue_bytes"] for p in s["ports"] if (p["node"], p["port"]) == (3, 1))
    assert code == 0 and f"deepest queue {peak / 1000:.4g} KB at leaf1:p1 -> h9;" in err, err


def test_replayed_control_frames_are_carried_not_obeyed(tmp_path):
    """A replayed CNP addressed to a host's own QP is the capture's frame: delivered as a
    replayed flow's, not taken by the NIC (its DCQCN would have cut flow 0's rate)."""
    cap = tmp_path / "cnp.pcap"
    n = _capture(cap, [(2, 1)], 2, opcode="CNP", payload=0, qp=0)  # receiver -> h1, QP 0
    s = run_scenario("incast", {"senders": 1, "duration_ms": 0.01, "cc": "dcqcn"},
                     out_dir=tmp_path / "o", plots=False, progress=False, pcaps=[str(cap)])
    [rf] = [f for f in s["flows"] if f["id"] >= REPLAY_FLOW_BASE]
    assert rf["delivered_packets"] == rf["sent_packets"] == n
    assert s["totals"]["cnps"] == 0
    with np.load(tmp_path / "o" / "timeseries.npz") as ts:
        assert len(ts["rate_f0_bps"]) == 1  # the start value only: no CNP reached flow 0


def test_two_captures_get_their_own_flow_ids(tmp_path):
    a, b = tmp_path / "a.pcap", tmp_path / "b.pcap"
    _capture(a, [(4, 9)], 1)
    _capture(b, [(5, 10)], 1)
    s = run_scenario("leaf_spine", {"background": False, "duration_ms": 0.01},
                     out_dir=tmp_path / "o", plots=False, progress=False,
                     pcaps=[str(a), str(b)])
    assert [(f["id"], f["src"], f["dst"]) for f in s["flows"]] == [
        (REPLAY_FLOW_BASE, 4, 9), (REPLAY_FLOW_BASE + 1, 5, 10)]


def test_fabric_file_without_traffic_takes_a_pcap(tmp_path):
    """A fabric file with no traffic of its own is refused ('no traffic'), unless a
    capture is replayed into it; [traffic] load = 0 adds no pattern flow."""
    f = tmp_path / "f.toml"
    f.write_text('[run]\nduration_ms = 0.01\n[topology]\nkind = "star"\nhosts = 3\n'
                 '[traffic]\npattern = "incast"\nload = 0.0\n')
    cap = tmp_path / "c.pcap"
    _capture(cap, [(1, 3), (2, 3)], 1)
    assert main(["replay", str(f), "--out", str(tmp_path / "x"), "--no-plots"]) == 2
    s = run_scenario(str(f), out_dir=tmp_path / "o", plots=False, progress=False,
                     pcaps=[str(cap)])
    assert [x["id"] for x in s["flows"]] == [REPLAY_FLOW_BASE, REPLAY_FLOW_BASE + 1]


# ------------------------------------------------------------------ the fluid prediction


def _lindley(rate_bps: int, arrivals: list[tuple[int, int]], end_ps: int) -> float:
    """The largest backlog by stepping through the arrivals (Lindley's recursion)."""
    q = peak = 0.0
    t0 = 0
    for t, b in sorted(arrivals):
        if t > end_ps:
            break
        q = max(q - rate_bps / 8e12 * (t - t0), 0.0) + b
        peak, t0 = max(peak, q), t
    return peak


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(64, 9000)), max_size=40),
       st.sampled_from([10**9, 25 * 10**9, 100 * 10**9]))
def test_fluid_backlog_is_lindleys(arrivals, rate):
    from sim.study.congestion import fluid_backlog_bytes

    got = fluid_backlog_bytes(rate, arrivals, [], 10**6)
    assert got == pytest.approx(_lindley(rate, arrivals, 10**6), rel=1e-9, abs=1e-6)


@given(st.floats(0.1, 3.0), st.integers(0, 10**6), st.integers(1, 10**6))
def test_fluid_backlog_of_a_constant_rate(load, start, length):
    """A constant offered rate of ``load`` x the port's: the backlog grows by the excess over
    its time, and is 0 when it fits."""
    from sim.study.congestion import fluid_backlog_bytes

    rate = 100 * 10**9
    r = load * rate / 8e12
    got = fluid_backlog_bytes(rate, [], [(start, start + length, r)], 3 * 10**6)
    want = max(load - 1, 0) * rate / 8e12 * length
    assert got == pytest.approx(want, rel=1e-9, abs=1e-6)


def test_deepest_queue_prefers_the_bottleneck_on_ties():
    from sim.study.congestion import deepest_queue

    ports = [{"node": 0, "port": 1, "max_queue_bytes": 5, "paused_ps": 0},
             {"node": 0, "port": 2, "max_queue_bytes": 9, "paused_ps": 0},
             {"node": 5, "port": 0, "max_queue_bytes": 99, "paused_ps": 0}]
    nodes = [{"id": 0, "kind": "switch"}, {"id": 5, "kind": "host"}]
    s = {"bottleneck": {"node": 0, "port": 1}, "ports": ports, "labels": {"nodes": nodes}}
    assert deepest_queue(s) == (0, 2)  # a host's NIC queue is not the fabric's
    ports[1]["max_queue_bytes"] = 5
    assert deepest_queue(s) == (0, 1)

"""Credit-based flow control (CBFC) at message level for the SUE/ESUN model
(sim/flowctl/credit.py, sim/scaleup/: CbfcConfig, CreditPort, CreditXpuPort; the
``sue_packing`` parameters ``flow_control``, ``cbfc_*``): credits bound the throughput of a
link, keep the switch lossless without PFC, return to zero when the run drains, and change
nothing when the credit limit is large."""

from __future__ import annotations

import pytest

from sim.engine import Engine
from sim.flowctl.credit import CbfcConfig, CreditFlowControl, cbfc_credits, cbfc_free
from sim.net.port import CreditPort
from sim.packet import SimPacket
from sim.scaleup.framing import DATA_TC, SuePacket
from sim.scaleup.summary import sue_summary
from sim.scenarios import ScenarioError, get
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps


def run(params: dict, drain_ps: int = 0):
    sc = get("sue_packing").builder(params)
    sc.fabric.run(sc.duration_ps + drain_ps)
    return sc, sue_summary(sc)


def credit_ports(sc) -> list:
    nodes = sc.fabric.nodes
    ports = [nodes[i].port for i in sc.info["xpus"]] + list(nodes[0].ports.values())
    assert all(isinstance(p, CreditFlowControl) for p in ports)
    return ports


# ------------------------------------------------------------------ arithmetic
def test_pkt_credits_is_the_sai_formula() -> None:
    # ceil((pkt_len + PktOvhd) / CreditSize), pkt_len = frame + 4 FCS
    assert cbfc_credits(124, 128) == 1
    assert cbfc_credits(125, 128) == 2
    assert cbfc_credits(4126, 128) == 33
    assert cbfc_credits(4126, 128, overhead_bytes=-16) == 33
    assert cbfc_credits(60, 128, overhead_bytes=-16) == 1
    assert cbfc_credits(1, 1) == 5
    for bad in ({"limit_credits": 0}, {"limit_credits": 1, "credit_bytes": 0},
                {"limit_credits": 1, "min_spacing_bytes": 799},
                {"limit_credits": 1, "overhead_bytes": 128}, {"limit_credits": 1, "vcs": (8,)}):
        with pytest.raises(ValueError):
            CbfcConfig(**bad)


class _Sink:
    node_id = 9

    def __init__(self) -> None:
        self.got: list[tuple[int, SimPacket]] = []

    def receive(self, port: int, pkt: SimPacket) -> None:
        self.got.append((port, pkt))


def test_credit_port_blocks_a_class_without_credits_and_lets_others_pass() -> None:
    eng = Engine()
    cfg = CbfcConfig(limit_credits=10, vcs=(DATA_TC,), min_spacing_bytes=800)
    port = CreditPort(eng, 0, 1, gbps(100), cbfc=cfg)
    sink = _Sink()
    port.connect(sink, 0, 1000)

    def pkt(i: int, tc: int) -> SuePacket:
        return SuePacket(i, 0, 1000, tc=tc)  # 8 credits each

    port.enqueue(pkt(1, DATA_TC))
    port.enqueue(pkt(2, DATA_TC))  # does not fit: 8 + 8 > 10
    port.enqueue(pkt(3, 0))  # uncredited class passes the blocked one
    eng.run(10**7)
    assert [p.id for _, p in sink.got] == [1, 3]
    assert port.credits_used[DATA_TC] == 8 and port.cbfc_stalls == 1
    cbfc_free(sink.got[0][1])  # the receiver frees frame 1: CF_Update, prop later
    eng.run(2 * 10**7)
    assert [p.id for _, p in sink.got] == [1, 3, 2]
    assert port.cf_updates == 1 and port.credits_used[DATA_TC] == 8
    cbfc_free(sink.got[2][1])
    eng.run(3 * 10**7)
    assert port.credits_used == [0] * 8


# ------------------------------------------------------------------- scenario
def test_small_credit_limit_bounds_throughput_by_limit_over_round_trip() -> None:
    cable = 100  # 500 ns each way
    for buf_kb in (8.5, 12.8):
        sc, s = run({"xpus": 2, "pattern": "pairs", "load": 2.0, "flow_control": "cbfc",
                     "cbfc_buffer_kb": buf_kb, "cbfc_min_spacing_bytes": 800,
                     "cable_m": cable, "duration_us": 40.0})
        cl = sc.info["cbfc_limit_credits"]
        assert cl == int(buf_kb * 1000) // 128
        # a frame's credits are held from its first bit until the CF_Update is back:
        # serialisation + 2 x propagation (the switch forwards at once, the XPU frees on
        # receipt, spacing 800 B = 64 ns never waits here)
        loop_ps = 2 * prop_delay_ps(cable) + frame_ser_time_ps(sc.info["max_frame_bytes"],
                                                               gbps(100))
        bound_bps = cl * 128 * 8 * 10**12 / loop_ps
        assert bound_bps < 0.9 * gbps(100)  # the limit, not the line, is the bottleneck
        for i in sc.info["xpus"]:
            tx_bps = sc.fabric.nodes[i].port.tx_bytes * 8 * 10**12 / sc.duration_ps
            assert 0.9 * bound_bps <= tx_bps <= bound_bps, (buf_kb, i, tx_bps, bound_bps)
        assert s["cbfc_stalls"] > 0 and s["cf_updates"] > 0
        assert max(max(p.max_credits_used) for p in credit_ports(sc)) <= cl


def test_incast_overload_is_lossless_without_pfc() -> None:
    for buf_kb in (8.5, 32.0):
        sc, s = run({"xpus": 8, "pattern": "incast", "load": 2.0, "flow_control": "cbfc",
                     "cbfc_buffer_kb": buf_kb, "duration_us": 20.0})
        sw = sc.fabric.nodes[0]
        assert sw.drops == 0 and not sw.mmu.drops_by_reason
        assert sum(sw.pause_sent.values()) == 0 and s["pfc_frames"] == 0
        assert s["switch_drops"] == 0 and s["retransmissions"] == 0
        assert all(sc.fabric.nodes[i].port.pause_received == 0 for i in sc.info["xpus"])
        assert s["cbfc_stalls"] > 0
        if buf_kb == 32.0:  # the default limit keeps the bottleneck (switch -> XPU 1) busy
            assert s["steady_efficiency_pct"] > 90
        cl = sc.info["cbfc_limit_credits"]
        assert max(max(p.max_credits_used) for p in credit_ports(sc)) <= cl
    # the same overload with PFC needs pause frames
    sc, _ = run({"xpus": 8, "pattern": "incast", "load": 2.0, "duration_us": 20.0})
    assert sum(sc.fabric.nodes[0].pause_sent.values()) > 0


def test_large_limit_matches_pfc_goodput() -> None:
    base = {"load": 1.0, "duration_us": 20.0}
    _, pfc = run(base)
    _, cb = run({**base, "flow_control": "cbfc", "cbfc_buffer_kb": 200.0})
    assert "cbfc_stalls" not in pfc
    assert abs(cb["goodput_bps"] - pfc["goodput_bps"]) <= 0.01 * pfc["goodput_bps"]
    assert abs(cb["steady_goodput_bps"] - pfc["steady_goodput_bps"]) \
        <= 0.01 * pfc["steady_goodput_bps"]


def test_deterministic() -> None:
    p = {"pattern": "incast", "load": 1.5, "flow_control": "cbfc", "cbfc_buffer_kb": 10.0,
         "duration_us": 10.0, "vcs": 2, "read_frac": 0.3}
    assert run(p)[1] == run(p)[1]


def test_credits_return_to_zero_after_drain() -> None:
    sc, s = run({"load": 1.0, "flow_control": "cbfc", "cbfc_buffer_kb": 10.0,
                 "duration_us": 10.0, "read_frac": 0.2, "vcs": 2}, drain_ps=200_000_000)
    assert s["txns_delivered"] == s["txns_offered"] and s["queued_txns"] == 0
    for p in credit_ports(sc):
        assert p.credits_used == [0] * 8 and p.unreported == [0] * 8
    assert s["cbfc_stalls"] > 0


def test_lost_frames_leak_credits_until_cc_update() -> None:
    sc, s = run({"load": 0.5, "flow_control": "cbfc", "loss_rate": 0.01, "xpus": 4,
                 "duration_us": 10.0}, drain_ps=300_000_000)
    assert s["link_errors"] > 0 and s["cc_updates"] > 0
    assert s["txns_delivered"] == s["txns_offered"]
    for p in credit_ports(sc):
        assert p.credits_used == [0] * 8 and p.leaked == [0] * 8


@pytest.mark.parametrize("key, value", [
    ("flow_control", "credits"),
    ("cbfc_credit_bytes", 0),
    ("cbfc_buffer_kb", 0.0),
    ("cbfc_buffer_kb", 4.0),  # less than one 4 KB frame
    ("cbfc_min_spacing_bytes", 799),
])
def test_bad_cbfc_parameters_name_the_key(key, value) -> None:
    with pytest.raises(ScenarioError, match=key):
        get("sue_packing").builder({"flow_control": "cbfc", key: value})


def test_buffer_too_small_for_credit_limits_names_buffer_kb() -> None:
    with pytest.raises(ScenarioError, match="'buffer_kb'"):
        get("sue_packing").builder({"flow_control": "cbfc", "cbfc_buffer_kb": 300.0,
                                    "buffer_kb": 4000.0})
    # the same buffer is fine with PFC (credits are not sized)
    get("sue_packing").builder({"cbfc_buffer_kb": 300.0, "buffer_kb": 4000.0})
    # the default buffer (0: derived) holds the credit limits of every port
    get("sue_packing").builder({"flow_control": "cbfc", "cbfc_buffer_kb": 300.0})

"""SUE-T packing over ESUN: the sans-IO packer (sim/packing.py), the XPU endpoints, go-back-N
and the scale-up switch (sim/scaleup/), the ``sue_packing`` scenario and its studies."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wire
from sim.cli import main
from sim.scaleup.framing import HEADERS, SueFramer, forward_hop
from sim.scaleup.packing import Packer, PduBuilder, Txn, register_selector
from sim.scaleup.summary import expected_goodput_pct, percentile, sue_summary
from sim.scaleup.switch import EsunSwitch
from sim.scenarios import get
from sim.study.sue import plot_study, study
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps
from tests.tshark import require_tshark

ROOT = Path(__file__).resolve().parent.parent


def run(params: dict, drain_ps: int = 0, record: bool = False):
    sc = get("sue_packing").builder(params)
    xs = [sc.fabric.nodes[i] for i in sc.info["xpus"]]
    for x in xs:
        x.record = record
    sc.fabric.run(sc.duration_ps + drain_ps)
    return sc, xs, sue_summary(sc)


# ===================================================================== the packer
_txn_sizes = st.integers(0, 256)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    events=st.lists(st.tuples(st.integers(0, 3000), st.integers(1, 3), st.integers(0, 1),
                              _txn_sizes, st.booleans()), min_size=1, max_size=80),
    max_pdu=st.sampled_from([264, 600, 1024, 4096]),
    hdr=st.sampled_from([8, 16]),
    hold_ps=st.sampled_from([0, 500, 5000]),
    selector=st.sampled_from(["oldest", "rr"]),
)
def test_packer_never_exceeds_the_pdu_never_splits_never_reorders(events, max_pdu, hdr,
                                                                  hold_ps, selector) -> None:
    if max_pdu < hdr + 256:
        max_pdu = hdr + 256
    pk = Packer(max_pdu, hdr, hold_ps, selector)
    now = 0
    pushed: dict[tuple[int, int], list[Txn]] = {}
    out: dict[tuple[int, int], list[Txn]] = {}
    pdus = []
    tag = 0
    for gap, dst, vc, size, poll in events:
        now += gap
        t = Txn(dst, vc, size, now, tag=tag)
        tag += 1
        pk.push(t)
        pushed.setdefault(t.key, []).append(t)
        if poll:  # the link is free now: pack what is eligible
            timer = pk.next_timer_ps()
            if timer is not None:
                assert timer >= min(q[0].t_ps for q in pk.queues.values() if q) + hold_ps
            while (p := pk.pack(now)) is not None:
                pdus.append(p)
                # as many whole head transactions as fit: the next one would not
                q = pk.queues[p.info.dst, p.info.vc]
                if q:
                    assert p.info.pdu_bytes + hdr + q[0].data_bytes > max_pdu
    rest, infos = pk.flush(now + hold_ps)
    pdus += rest
    assert [p.info for p in rest] == infos
    assert len(pk) == 0
    for p in pdus:
        assert p.info.pdu_bytes <= max_pdu
        assert p.info.pdu_bytes == sum(hdr + t.data_bytes for t in p.txns)
        assert p.info.txns == len(p.txns) >= 1
        assert all((t.dst, t.vc) == (p.info.dst, p.info.vc) for t in p.txns)
        out.setdefault((p.info.dst, p.info.vc), []).extend(p.txns)
    # every transaction exactly once, whole, in arrival order within its {dst, VC}
    assert {k: [t.tag for t in v] for k, v in out.items()} == \
        {k: [t.tag for t in v] for k, v in pushed.items()}


def test_builder_budget_full_signal_and_flush() -> None:
    b = PduBuilder(max_pdu_bytes=600, txn_hdr_bytes=8)
    b.start(2, 0, now_ps=10)
    assert b.remaining_bytes == 600 and not b.full
    assert b.add(Txn(2, 0, 256, 0)) and b.remaining_bytes == 336
    assert b.add(Txn(2, 0, 256, 1)) and b.remaining_bytes == 72 and not b.full
    assert not b.add(Txn(2, 0, 100, 2)) and b.full
    with pytest.raises(ValueError):
        b.add(Txn(3, 0, 1, 3))
    pdus, infos = b.flush()
    assert len(pdus) == 1 and infos[0].txns == 2 and infos[0].pdu_bytes == 528
    assert infos[0].data_bytes == 512 and infos[0].t_ps == 10 and infos[0].oldest_ps == 0
    assert b.flush() == ([], [])
    with pytest.raises(ValueError):
        PduBuilder(max_pdu_bytes=200)
    with pytest.raises(ValueError):
        Txn(1, 0, 257, 0)


def test_hold_time_and_selectors_with_scripted_times() -> None:
    pk = Packer(4096, 8, hold_ps=1000)
    pk.push(Txn(1, 0, 64, 0))
    pk.push(Txn(2, 0, 64, 100))
    assert pk.pack(500) is None and pk.next_timer_ps() == 1000
    p = pk.pack(1000)
    assert p is not None and p.info.dst == 1  # oldest head first
    assert pk.pack(1099) is None and pk.next_timer_ps() == 1100
    assert pk.pack(1100).info.dst == 2
    # a full PDU's worth is eligible before the hold runs out
    for i in range(16):
        pk.push(Txn(3, 1, 256, 2000 + i))
    p = pk.pack(2001)
    assert p is not None and p.info.txns == 15 and pk.pending((3, 1)) == 1
    # round robin over queues in first-seen order, and a custom selector
    rr = Packer(4096, 8, selector="rr")
    for d in (1, 2, 3, 1, 2, 3):
        rr.push(Txn(d, 0, 256, 0))
    assert [rr.pack(0).info.dst for _ in range(3)] == [1, 2, 3]
    register_selector("highest_dst", lambda pk, keys: max(keys))
    hi = Packer(selector="highest_dst")
    hi.extend([Txn(1, 0, 8, 0), Txn(5, 0, 8, 1)])
    assert hi.pack(0).info.dst == 5
    with pytest.raises(ValueError):
        Packer(selector="nope")


# ============================================================== frames and the switch
def _frame(header: str, ttl: int, txns=()) -> bytearray:
    f = SueFramer(header, ttl=ttl)
    return bytearray(f.frame(1, 2, 1, 3, 2, 7, 5, txns))


@pytest.mark.parametrize("header", HEADERS)
def test_frames_decode_to_the_same_transactions_and_hops_decrement(header) -> None:
    txns = [Txn(2, 1, n, 0, opcode=op, tag=100 + i, src=1)
            for i, (n, op) in enumerate([(256, 1), (0, 2), (17, 4), (64, 3)])]
    fr = _frame(header, 15, txns)
    d = wire.dissect(bytes(fr))
    assert not d.problems, d.problems
    assert d["sue_rh"]["npsn"] == 7 and d["sue_rh"]["apsn"] == 5 and d["sue_rh"]["vc"] == 1
    assert d["rcrc"]["valid"]
    got = [(t["opcode"], t["tag"], t["length"], bytes.fromhex(t["data"]))
           for t in d["sue_txn"]]
    want = [(t.opcode, t.tag, t.data_bytes, (t.tag.to_bytes(4, "big") * 64)[:t.data_bytes])
            for t in txns]
    assert got == want
    assert SueFramer(header).rh(fr)["npsn"] == 7
    # one switch hop: TTL / hop limit - 1, still a valid frame (IPv4 checksum fixed)
    assert forward_hop(fr)
    d2 = wire.dissect(bytes(fr))
    assert not d2.problems
    hop = {"esun": ("esun", "ttl"), "afh_gen1": ("afh", "ttl"), "afh_gen2": ("afh", "hop_limit"),
           "sunh": ("sunh", "hop_limit"), "eth_ipv4_udp": ("ipv4", "ttl")}[header]
    assert d2[hop[0]][hop[1]] == 14
    if header == "eth_ipv4_udp":
        assert d2["ipv4"]["checksum_ok"]
    # arriving with TTL 1 (or 0): dropped
    assert not forward_hop(_frame(header, 1, txns))


def test_switch_drops_ttl_expired_and_marks_ecn_in_the_header() -> None:
    sc, _, s = run({"xpus": 2, "ttl": 1, "duration_us": 2.0, "load": 0.3})
    assert s["ttl_drops"] > 0 and s["txns_delivered"] == 0
    sw = sc.fabric.nodes[0]
    assert isinstance(sw, EsunSwitch) and sw.drops == s["ttl_drops"]
    _, xs, s = run({"xpus": 4, "pattern": "incast", "load": 0.9, "duration_us": 5.0,
                    "kmin_kb": 0.0, "kmax_kb": 1.0, "pmax": 1.0})
    assert s["ce_received"] > 0 and xs[0].ce_received == s["ce_received"]  # all to XPU 1
    # afh_gen2 has no ECN field: never marked
    _, _, s = run({"xpus": 4, "pattern": "incast", "load": 0.9, "duration_us": 5.0,
                   "kmin_kb": 0.0, "kmax_kb": 1.0, "pmax": 1.0, "header": "afh_gen2"})
    assert s["ce_received"] == 0 and s["txns_delivered"] > 0


# ================================================================== behaviour
def test_light_load_sends_single_transactions_at_the_latency_floor() -> None:
    _sc, _xs, s = run({"xpus": 2, "pattern": "pairs", "arrivals": "cbr", "load": 0.01,
                     "txn_bytes": 256, "duration_us": 20.0})
    frame = 18 + 8 + 8 + 256 + 4  # Eth + EH, RH, descriptor + data, R-CRC
    floor = 2 * frame_ser_time_ps(frame, gbps(100)) + 2 * prop_delay_ps(10)
    assert s["mean_txns_per_frame"] == 1.0 and s["txns_delivered"] > 10
    assert s["latency_p50_ps"] == s["latency_p99_ps"] == floor


@pytest.mark.parametrize("header", HEADERS)
@pytest.mark.parametrize("txn_bytes", [64, 256])
def test_saturation_fills_frames_and_goodput_matches_the_byte_arithmetic(header,
                                                                         txn_bytes) -> None:
    _sc, xs, s = run({"xpus": 2, "pattern": "pairs", "load": 2.0, "txn_bytes": txn_bytes,
                     "header": header, "duration_us": 10.0})
    k = 4096 // (txn_bytes + 8)
    # after the start-up every PDU is full
    assert all(x.pdu_deliveries[-1][1] == k * txn_bytes for x in xs)
    want = expected_goodput_pct(header, txn_bytes)
    assert want == wire.overhead.efficiency(
        {"eth_ipv4_udp": "sue_ipv4_udp"}.get(header, header), txn_bytes, k).goodput_pct
    assert s["saturation_goodput_pct"] == pytest.approx(want, abs=1e-4)
    assert s["steady_efficiency_pct"] == pytest.approx(want, abs=0.01)
    assert s["retransmissions"] == 0


def test_hold_time_trades_latency_for_efficiency() -> None:
    base = {"xpus": 4, "pattern": "shift", "load": 0.3, "txn_bytes": 64, "duration_us": 10.0}
    _, _, s0 = run(base)
    _, _, s1 = run({**base, "hold_ns": 300.0})
    assert s1["mean_txns_per_frame"] > 2 * s0["mean_txns_per_frame"]
    assert s1["frames"] < s0["frames"]
    assert s1["latency_p50_ps"] > s0["latency_p50_ps"] + 100_000
    # waiting is bounded by the hold plus serialising a (larger) frame on both hops
    assert s1["latency_p99_ps"] < (300_000 + 2 * frame_ser_time_ps(4154, gbps(100))
                                   + s0["latency_p99_ps"])
    # and the goodput is the same (the offered load is carried either way)
    assert s1["txns_delivered"] == pytest.approx(s0["txns_delivered"], rel=0.05)


def test_go_back_n_delivers_everything_exactly_once_in_order_with_losses() -> None:
    _sc, xs, s = run({"xpus": 4, "vcs": 2, "loss_rate": 0.03, "load": 0.4, "duration_us": 8.0,
                     "seed": 3, "rto_ns": 5000.0, "read_frac": 0.2},
                    drain_ps=200_000_000, record=True)
    assert s["retransmissions"] > 0 and s["nacks"] > 0 and s["link_errors"] > 0
    offered = s["txns_offered"]
    assert s["txns_delivered"] == offered and s["queued_txns"] == 0
    seen = set()
    last: dict[tuple[int, int, int], int] = {}
    for x in xs:
        for _t, src, vc, tag, _op in x.deliveries:
            assert (src, tag) not in seen  # exactly once
            seen.add((src, tag))
            k = (x.node_id, src, vc)
            assert tag > last.get(k, -1)  # in order within {src, dst, VC}
            last[k] = tag
    assert len(seen) == offered
    assert s["read_latency_p50_ps"] is not None


def test_incast_is_lossless_with_pfc_and_everything_arrives_after_draining() -> None:
    sc, xs, s = run({"pattern": "incast", "xpus": 8, "load": 1.0, "vcs": 2,
                     "duration_us": 10.0}, drain_ps=300_000_000, record=True)
    sw = sc.fabric.nodes[0]
    assert sum(sw.pause_sent.values()) > 0 and sw.drops == 0
    assert sum(x.port.paused_ps() for x in xs[1:]) > 0  # the senders were paused
    assert s["txns_delivered"] == s["txns_offered"] and s["retransmissions"] == 0
    tags: dict[tuple[int, int], list[int]] = {}
    for _t, src, vc, tag, _op in xs[0].deliveries:
        tags.setdefault((src, vc), []).append(tag)
    assert all(v == sorted(v) for v in tags.values())


def test_same_seed_same_run_other_seed_differs() -> None:
    p = {"xpus": 4, "loss_rate": 0.01, "duration_us": 4.0, "vcs": 2}
    a = run(p)[2]
    b = run(p)[2]
    c = run({**p, "seed": 1})[2]
    assert a == b and a != c


def test_percentile_and_bad_params() -> None:
    assert percentile([], 50) is None
    assert percentile([5, 1, 3], 50) == 3 and percentile(list(range(100)), 99) == 98
    from sim.scenarios import ScenarioError

    for bad in ({"header": "x"}, {"vcs": 5}, {"txn_bytes": 0}, {"max_pdu_bytes": 100},
                {"loss_rate": 1.0}, {"pattern": "pairs", "xpus": 3}, {"load": 0}):
        with pytest.raises(ScenarioError, match=next(iter(bad)) if "pairs" not in str(bad)
                           else "xpus"):
            get("sue_packing").builder(bad)


# ============================================================= CLI, pcap, studies
def test_cli_replay_writes_summary_and_a_pcap_of_real_frames(tmp_path) -> None:
    out = tmp_path / "o"
    assert main(["replay", "sue_packing", "-p", "duration_us=3", "-p", "xpus=4",
                 "-p", "load=0.8", "-p", "vcs=2", "--out", str(out), "--no-plots"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenario"] == "sue_packing" and summary["bottleneck"]["tx_bytes"] > 0
    recs = list(wire.read(out / "bottleneck.pcap"))
    assert recs
    kinds = set()
    for r in recs:
        d = wire.dissect(r.data)
        assert not d.problems
        if "sue_rh" in d:
            kinds.add(d["sue_rh"]["op"])
            assert d["esun"]["ttl"] == 14 and d["rcrc"]["valid"]
    assert 2 in kinds  # DATA


def test_tshark_with_the_lua_plugin_decodes_the_frames(tmp_path) -> None:
    tshark = require_tshark()
    frames = []
    for h in HEADERS:
        sc = get("sue_packing").builder({"xpus": 2, "header": h, "duration_us": 1.0,
                                          "load": 1.0, "vcs": 2})
        got = []
        sc.fabric.nodes[1].port.taps.append(lambda t, p, got=got: got.append(bytes(p.frame)))
        sc.fabric.run(sc.duration_ps + 5_000_000)
        frames += got[:6]
    pcap = tmp_path / "sue.pcap"
    wire.write(pcap, [wire.Record(i * 1000, f, len(f)) for i, f in enumerate(frames)])
    lua = ROOT / "wire" / "wireshark" / "lossless_scaleup.lua"
    proc = subprocess.run([tshark, "-n", "-X", f"lua_script:{lua}", "-r", str(pcap), "-T",
                           "json", "--no-duplicate-keys"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0 and "Lua: Error" not in proc.stderr, proc.stderr[-500:]
    assert "_ws.lua.error" not in proc.stdout
    pkts = [p["_source"]["layers"] for p in json.loads(proc.stdout)]
    assert len(pkts) == len(frames)
    for f, layers in zip(frames, pkts, strict=True):
        ours = wire.dissect(f)
        assert "sue_rh" in layers
        assert layers["sue_rh"]["sue_rh.npsn"] == str(ours["sue_rh"]["npsn"])
        txns = layers.get("sue_txn", [])
        txns = txns if isinstance(txns, list) else [txns]
        assert [t["sue_txn.tag"] for t in txns] == \
            [str(t["tag"]) for t in ours.get("sue_txn", [])]


def test_study_rows_and_plot(tmp_path) -> None:
    rows = study(txn_bytes=(64, 256), loads=(0.2, 2.0), headers=("esun", "eth_ipv4_udp"),
                 base={"xpus": 2, "pattern": "pairs", "duration_us": 4.0})
    assert len(rows) == 8
    for r in rows:
        assert r["latency_p50_ps"] <= r["latency_p99_ps"]
        assert r["goodput_bps"] > 0
    sat = {(r["header"], r["txn_bytes"]): r for r in rows if r["load"] == 2.0}
    assert sat[("esun", 256)]["steady_efficiency_pct"] == pytest.approx(
        sat[("esun", 256)]["saturation_goodput_pct"], abs=0.05)
    assert sat[("esun", 64)]["steady_efficiency_pct"] > \
        sat[("eth_ipv4_udp", 64)]["steady_efficiency_pct"]
    png = plot_study(rows, str(tmp_path / "study.png"))
    assert Path(png).stat().st_size > 1000

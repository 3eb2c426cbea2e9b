"""pcap replay through a fabric: every frame arrives unchanged at its timestamp plus the path
latency; snaplen-cut frames are simulated at their original length."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

import pytest

import wire
from sim.fabric import star
from sim.net.mmu import MmuConfig
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps, ser_time_ps
from sim.workloads.replay import ETHERNET_ON_IB, IB_ON_ROCE, inject_records, parse_owner
from wire.ib import LRH
from wire.ib_stack import build_erf, build_ib

RATE = gbps(400)
PROP = prop_delay_ps(3)


def _fabric():
    cfg = MmuConfig(buffer_bytes=4_000_000, ports=4, reserved_bytes=10_000,
                    lossless_pgs=frozenset({3}), headroom_bytes=100_000,
                    xoff_mode="static", xoff_bytes=1_000_000)
    fab, recv, senders = star(1, RATE, PROP, cfg)
    return fab, senders[0], recv


def _records(n: int = 20, gap_ns: int = 1000, snap: int | None = None):
    out = []
    for i in range(n):
        f = wire.build({"vlan": [{"pcp": 3, "vid": 1}],
                        "ipv4": {"src": "10.0.0.1", "dst": "10.0.0.2", "ecn": 2},
                        "udp": {}, "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": 5, "psn": i},
                        "payload": {"length": 256 + 4 * i}})
        data = f if snap is None else f[:snap]
        out.append(wire.Record(ts_ns=1_700_000_000_000_000_000 + i * gap_ns, data=data,
                               orig_len=len(f)))
    return out


def test_idle_fabric_delivers_every_frame_unchanged_at_ts_plus_latency() -> None:
    fab, a, b = _fabric()
    fab.nodes[b].delivered = []
    recs = _records()
    st = inject_records(fab, recs, {"10.0.0.1": a, "10.0.0.2": b})
    assert st.injected == len(recs) and st.skipped == 0
    fab.engine.run()
    got = fab.nodes[b].delivered
    assert len(got) == len(recs)
    t0 = recs[0].ts_ns
    for (t_ps, pkt), rec in zip(got, recs, strict=True):
        assert bytes(pkt.frame) == rec.data  # unchanged: no congestion, no CE mark
        ser = frame_ser_time_ps(len(rec.data), RATE)
        latency = 2 * (ser + PROP)  # host port then switch port, store and forward
        assert t_ps == (rec.ts_ns - t0) * 1000 + latency
        assert pkt.tc == 3 and pkt.nbytes == len(rec.data)
    assert not wire.dissect(bytes(got[-1][1].frame)).problems


def test_snaplen_cut_frames_use_their_original_length() -> None:
    fab, a, b = _fabric()
    fab.nodes[b].delivered = []
    recs = _records(n=3, snap=64)
    inject_records(fab, recs, {"10.0.0.1": a, "10.0.0.2": b})
    fab.engine.run()
    got = fab.nodes[b].delivered
    assert [p.nbytes for _t, p in got] == [r.orig_len for r in recs]
    assert all(p.frame is None for _t, p in got)


def test_time_scale_and_unowned_addresses() -> None:
    fab, a, b = _fabric()
    fab.nodes[b].delivered = []
    recs = _records(n=4, gap_ns=10_000)
    stray = wire.build({"ipv4": {"src": "10.9.9.9", "dst": "10.0.0.2"}, "udp": {}, "bth": {}})
    recs.append(wire.Record(ts_ns=recs[-1].ts_ns + 1, data=stray, orig_len=len(stray)))
    st = inject_records(fab, recs, {"10.0.0.1": a, "10.0.0.2": b}, time_scale=Fraction(1, 10))
    assert st.injected == 4 and st.skipped == 1
    fab.engine.run()
    t0 = recs[0].ts_ns
    for (t_ps, pkt), rec in zip(fab.nodes[b].delivered, recs, strict=False):
        latency = 2 * (frame_ser_time_ps(pkt.nbytes, RATE) + PROP)
        assert t_ps == (rec.ts_ns - t0) * 100 + latency  # 10 us gaps become 1 us
    with pytest.raises(ValueError):
        inject_records(fab, recs, {}, time_scale=0)


# ------------------------------------------------------------ native InfiniBand captures
def _ib_fabric():
    cfg = MmuConfig(buffer_bytes=4_000_000, ports=4, reserved_bytes=10_000,
                    lossless_pgs=frozenset(), headroom_bytes=0, xoff_mode="static",
                    xoff_bytes=1_000_000)
    fab, recv, senders = star(2, RATE, PROP, cfg, link_kw={"flow_control": "ib"})
    for h in (*senders, recv):
        fab.nodes[h].delivered = []
    return fab, senders, recv


def _ib(slid, dlid, qp=5, sl=2, fecn=0, n=64, **extra):
    return build_ib({"lrh": {"slid": slid, "dlid": dlid, "sl": sl, "vl": sl},
                     "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": qp, "fecn": fecn},
                     "payload": {"length": n}, **extra})


def test_native_ib_packets_replay_keyed_by_lids_and_qp_sized_by_pkt_len() -> None:
    fab, (a, _b), r = _ib_fabric()
    frames = [_ib(52, 18), _ib(52, 18, qp=6), _ib(53, 18), _ib(52, 18, fecn=1, n=100, sl=4),
              _ib(52, 18)[:20]]  # the last cut by a snaplen: still its LRH's size
    recs = [wire.Record(1_000 + 100 * i, f, len(_ib(52, 18)) if i == 4 else len(f), 247)
            for i, f in enumerate(frames)]
    owners = {"lid 52": a, "lid 53": a, "lid 18": r}
    st = inject_records(fab, recs, owners)
    assert st.injected == 5 and st.skipped == 0
    # one flow per (SLID, DLID, destination QP): two LIDs of one host are two flows
    assert list(st.flows) == [("ib", 52, 18, 5), ("ib", 52, 18, 6), ("ib", 53, 18, 5)]
    fab.engine.run()
    got = [p for _t, p in fab.nodes[r].delivered]
    sizes = [4 * LRH.unpack(f)["pkt_len"] + 2 for f in frames[:4]] + [len(_ib(52, 18))]
    assert [p.nbytes for p in got] == sizes  # LRH..ICRC words + the VCRC
    assert [p.tc for p in got] == [2, 2, 2, 4, 2] and [p.ecn for p in got] == [2, 2, 2, 3, 2]
    assert all(p.frame is None for p in got)  # travel without their bytes
    assert [p.flow for p in got] == [st.flows[k] for k in (("ib", 52, 18, 5),
                                                           ("ib", 52, 18, 6),
                                                           ("ib", 53, 18, 5),
                                                           ("ib", 52, 18, 5),
                                                           ("ib", 52, 18, 5))]
    t_first = fab.nodes[r].delivered[0][0]
    # two hops of IB links: the packet's own bytes on the wire, no Ethernet framing
    assert t_first == 2 * (ser_time_ps(sizes[0], RATE) + PROP)


def test_a_packet_with_a_grh_is_owned_by_its_gid_else_its_lid() -> None:
    fab, (a, b), r = _ib_fabric()
    g = _ib(8, 7, grh={"sgid": "fe80::a", "dgid": "fe80::b"})
    recs = [wire.Record(0, g, len(g), 247), wire.Record(10, g, len(g), 247)]
    st = inject_records(fab, recs[:1], {"fe80::a": b, "fe80::b": r, "lid 8": a})
    assert st.injected == 1
    fab.engine.run()
    assert fab.nodes[r].delivered[0][1].src == b  # the GID's owner, not the LID's
    fab, (a, b), r = _ib_fabric()
    st = inject_records(fab, recs, {"lid 8": a})
    assert st.skipped == 2 and st.skipped_samples == ["lid 8 -> lid 7"]


def test_erf_records_replay_at_their_erf_time_and_link_packets_are_skipped() -> None:
    fab, (a, _b), r = _ib_fabric()
    base = {"lrh": {"slid": 52, "dlid": 18}, "bth": {"dest_qp": 3}, "payload": {"length": 8}}
    erf = [build_erf({"erf": {"ts_ns": 5_000_000_123}, **base}),
           build_erf({"ib_fc": {"fccl": 3}}),
           build_erf({"erf": {"ts_ns": 5_000_002_500}, **base})]
    # the pcap's own times (µs) are coarser than the ERF's: the ERF time is the one used
    recs = [wire.Record(5_000_000_000 + 1000 * i, e, len(e), 197) for i, e in enumerate(erf)]
    st = inject_records(fab, recs, {"lid 52": a, "lid 18": r})
    assert st.injected == 2 and st.skipped_reasons == {
        "InfiniBand link flow-control packet (the fabric's links make their own)": 1}
    fab.engine.run()
    (t1, p1), (t2, _p2) = fab.nodes[r].delivered
    assert t2 - t1 == 2_377 * 1000  # 5_000_002_500 - 5_000_000_123 ns
    assert p1.nbytes == 4 * LRH.unpack(erf[0][16:])["pkt_len"] + 2


def test_a_capture_replays_on_the_fabric_of_its_link_layer() -> None:
    ib = _ib(52, 18)
    eth = _records(n=1)[0]
    ib_rec = wire.Record(eth.ts_ns, ib, len(ib), 247)
    fab, a, b = _fabric()  # RoCE
    st = inject_records(fab, [ib_rec, eth],
                        {"lid 52": a, "lid 18": b, "10.0.0.1": a, "10.0.0.2": b})
    assert st.injected == 1 and st.skipped_reasons == {IB_ON_ROCE: 1}
    fab, (a, _b), r = _ib_fabric()
    st = inject_records(fab, [ib_rec, eth],
                        {"lid 52": a, "lid 18": r, "10.0.0.1": a, "10.0.0.2": r})
    assert st.injected == 1 and st.skipped_reasons == {ETHERNET_ON_IB: 1}
    fab, a, b = _fabric()  # another linktype is not read as Ethernet
    raw = wire.Record(0, eth.data, eth.orig_len, 101)
    st = inject_records(fab, [raw], {"10.0.0.1": a, "10.0.0.2": b})
    assert st.skipped_reasons == {
        "linktype 101 is not replayed (Ethernet 1, InfiniBand 247, ERF 197)": 1}


@pytest.mark.parametrize(("text", "want"), [
    ("52=4", ("lid 52", 4)), ("0x34=4", ("lid 52", 4)), ("lid:52=4", ("lid 52", 4)),
    ("LID 65535=4", ("lid 65535", 4)), ("fe80::2:C903:0:1=4", ("fe80::2:c903:0:1", 4)),
    ("10.0.0.1=2", ("10.0.0.1", 2)), ("7C-FE-90-64-3B-32=3", ("7c:fe:90:64:3b:32", 3))])
def test_map_takes_lids_and_gids(text, want) -> None:
    assert parse_owner(text) == want


@pytest.mark.parametrize("text", ["0=4", "65536=4", "lid=4", "1.2.3=4"])
def test_map_refuses_what_is_no_address(text) -> None:
    with pytest.raises(ValueError):
        parse_owner(text)


def test_cli_replays_a_native_ib_capture(tmp_path) -> None:
    from tests.helpers import run_cli

    pcap = str(Path(__file__).resolve().parent.parent / "pcaps" / "ib" / "ib_native.pcap")
    base = ["replay", "leaf_spine", "-p", "duration_ms=0.02", "--no-plots", "--pcap", pcap,
            "--map", "52=4", "--map", "0x12=9"]
    rc, _out, err = run_cli([*base, "-p", "fabric=ib", "--out", str(tmp_path / "ib")])
    assert rc == 1, err  # a few packets of other LIDs are skipped (and named)
    rp = json.loads((tmp_path / "ib" / "summary.json").read_text())["replay"]
    # with --map only the addresses mapped are owned: the capture's other LIDs (7, 8...) are
    # skipped, not taken for the simulator's hosts of those LIDs (node_lid: LID n + 1)
    assert rp["injected"] == 7 and rp["delivered_bytes"] > 0
    assert "lid 8 -> lid 7" in rp["skipped_samples"]
    rc, _out, err = run_cli([*base, "--out", str(tmp_path / "roce")])  # fabric=roce
    assert rc == 2 and err == (f"lossless: {pcap}: --pcap: 13 of 13 frame(s) skipped "
                               f"({IB_ON_ROCE}: 13)\n")
    assert not (tmp_path / "roce").exists()

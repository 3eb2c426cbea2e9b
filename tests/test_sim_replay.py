"""pcap replay through a fabric: every frame arrives unchanged at its timestamp plus the path
latency; snaplen-cut frames are simulated at their original length."""

from __future__ import annotations

from fractions import Fraction

import pytest

import wire
from sim.fabric import star
from sim.net.mmu import MmuConfig
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps
from sim.workloads.replay import inject_records

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

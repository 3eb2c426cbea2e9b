"""The three fault studies of docs/explanation/faults.md ("Studies"), small and quick: each
checks the direction of its result (docs/examples/fault_studies.py runs the full sizes)."""

from __future__ import annotations

import importlib.util
import os
import struct
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.nic.rc import ack_timeout_ps

_PATH = os.path.join(os.path.dirname(__file__), "..", "docs", "examples", "fault_studies.py")
_spec = importlib.util.spec_from_file_location("fault_studies", _PATH)
fs = importlib.util.module_from_spec(_spec)
sys.modules["fault_studies"] = fs  # dataclasses look their module up there
_spec.loader.exec_module(fs)

MIB = 1 << 20
US = 10**6
#: a small rail fabric: 2 nodes x 2 GPUs (2 rails, 1 spine), 400G, PFC
SMALL = {"nodes": 2, "gpus_per_node": 2}


def test_flap_stall_follows_the_ack_timeout():
    """Study 1: a NIC link down for 30 µs during the ring: the lost frames wait for the
    local ACK timeout, so the stall grows with it (at least one timeout minus the time the
    lost frame had already waited), and a flap longer than (retry_cnt + 1) timeouts ends in
    a QP error."""
    res = fs.flap(4 * MIB, flaps_ps=(30 * US,), timeouts=(4, 8), at_ps=20 * US, given=SMALL)
    base = res["base"]
    assert base.time_ps and base.time_ps > 50 * US  # the flap at 20-50 µs is inside the op
    short, long_ = res["rows"]
    assert short["stall_ps"] is not None and long_["stall_ps"] is not None
    assert short["outcome"].rc["timeouts"] >= 1
    assert long_["stall_ps"] > short["stall_ps"]
    # t=8 (1.05 ms) is far longer than the flap: one timeout, the stall about one timeout
    assert ack_timeout_ps(8) - 50 * US <= long_["stall_ps"] <= ack_timeout_ps(8) + 100 * US
    assert long_["outcome"].qp_error_ps is None
    assert "failover" not in short  # no QP error, nothing to fail over


def test_flap_longer_than_the_retries_fails_and_failover_finishes():
    """Study 1: a flap longer than (retry_cnt + 1) timeouts puts the QPs in error while the
    link is still down (the operation fails, as NCCL's does); with failover the failed QPs'
    messages move to the next rail and the operation completes soon after the error."""
    res = fs.flap(4 * MIB, flaps_ps=(1000 * US,), timeouts=(4,), retry_cnt=1, at_ps=20 * US,
                  given=SMALL)
    (row,) = res["rows"]
    assert row["outcome"].time_ps is None and row["stall_ps"] is None
    err = row["outcome"].qp_error_ps
    # 2 expiries (retry_cnt + 1) after the last frame that asked for an ACK, the last of the
    # message being sent when the link went down (sent on into it), and after its resend
    # (go-back-N resends the message): within two message times (4 MiB on 2 x 2 ranks) more
    assert err is not None
    assert 20 * US + ack_timeout_ps(4) < err <= 20 * US + 2 * ack_timeout_ps(4) + 30 * US
    moved = row["failover"]["outcome"]
    assert moved.time_ps is not None and moved.failovers >= 1 and moved.resent_bytes > 0
    assert err - 20 * US < row["failover"]["stall_ps"] < 1000 * US  # before the link is back


def test_loss_selective_repeat_resends_less_than_go_back_n():
    """Study 2: on a link losing 1e-2 of its frames, go-back-N resends every frame after a
    lost one (about a round trip of them), selective repeat only the lost ones: SR resends
    fewer bytes and its goodput is at least GBN's; both deliver everything."""
    n = 3000
    gbn = fs.single_flow(n, loss_rate=1e-2, retransmit="gbn", ack_timeout=4, given=SMALL)
    sr = fs.single_flow(n, loss_rate=1e-2, retransmit="sr", ack_timeout=4, given=SMALL)
    assert gbn.time_ps and sr.time_ps
    lost_gbn = gbn.drops["corrupt"]
    assert lost_gbn > 10
    assert gbn.rc["retransmitted_frames"] > 5 * sr.rc["retransmitted_frames"] > 0
    # SR resends about the lost data frames (lost ACKs/NAKs and lost resends aside)
    assert sr.rc["retransmitted_frames"] <= sr.drops["corrupt"] + sr.rc["timeouts"]
    payload = n * 4096
    assert fs.goodput_gbps(sr, payload) >= fs.goodput_gbps(gbn, payload)


@settings(max_examples=3)
@given(st.integers(0, 2**16))
def test_loss_any_seed_sr_no_worse(seed):
    """Whatever frames the seed loses (1e-3, 3000 frames), SR resends no more than GBN and
    both complete."""
    n = 3000
    out = {m: fs.single_flow(n, loss_rate=1e-3, retransmit=m, ack_timeout=4, seed=seed,
                             given=SMALL) for m in ("gbn", "sr")}
    assert all(o.time_ps for o in out.values())
    assert out["sr"].rc["retransmitted_bytes"] <= out["gbn"].rc["retransmitted_bytes"]


def test_no_loss_no_resend():
    a = fs.single_flow(500, retransmit="gbn", given=SMALL)
    b = fs.single_flow(500, retransmit="sr", given=SMALL)
    assert a.time_ps == b.time_ps and a.rc["retransmitted_frames"] == 0 == \
        b.rc["retransmitted_frames"] and not a.drops


def test_slow_link_paces_the_whole_ring():
    """Study 3: one NIC link at 200G slows every channel's share of the operation to the
    pace of that ring: busbw falls to about the min-link bound (half), far below the
    capacity-average bound, and degrading every link costs no more than one."""
    res = fs.slow(8 * MIB, rates_gbps=(200.0,), sets=((0,), (0, 1, 2, 3)), delays_us=(),
                  given=SMALL)
    b0 = res["base"].busbw_GB_per_s
    one, every = (r["outcome"].busbw_GB_per_s for r in res["degraded"])
    bound = fs.ring_bound_GB_per_s(200, res["packet_bytes"], res["channels"])
    assert 0.8 * bound <= one <= bound
    assert one < 0.6 * b0
    assert abs(one - every) <= 0.05 * one
    avg = fs.ring_bound_GB_per_s((3 * 400 + 200) / 4, res["packet_bytes"], res["channels"])
    assert one < 0.6 * avg


def test_straggler_small_delay_hides_large_delay_dominates():
    """Study 3: a rank late by d on every send: a small d costs about d once (the ring's
    pipeline absorbs it), a large one costs a multiple of d (every pass of the critical
    path through the late rank pays it)."""
    res = fs.slow(8 * MIB, rates_gbps=(), sets=((0,),), delays_us=(1, 200), given=SMALL)
    t0 = res["base"].time_ps
    small, large = (r["outcome"].time_ps - t0 for r in res["late"])
    assert 0 < small <= 3 * US
    assert large >= 2 * 200 * US
    assert res["late"][1]["outcome"].busbw_GB_per_s < res["late"][0]["outcome"].busbw_GB_per_s


def test_figures_written_whole(tmp_path):
    """Each study's figure is a PNG written by temp + rename (no partial file left)."""
    flap = fs.flap(2 * MIB, flaps_ps=(10 * US,), timeouts=(4,), at_ps=10 * US, given=SMALL)
    slow = fs.slow(2 * MIB, rates_gbps=(200.0,), sets=((0,),), delays_us=(5,), given=SMALL)
    loss = fs.loss(rates=(1e-3,), nframes=300, allreduce_rates=(), allreduce_bytes=MIB,
                   given=SMALL)
    for name, plot, res in (("flap", fs.plot_flap, flap), ("slow", fs.plot_slow, slow),
                            ("loss", fs.plot_loss, loss)):
        path = tmp_path / f"{name}.png"
        plot(res, str(path))
        head = path.read_bytes()[:24]
        assert head[:8] == b"\x89PNG\r\n\x1a\n"
        w, h = struct.unpack(">II", head[16:24])
        assert w > 500 and h > 300
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flap.png", "loss.png", "slow.png"]


@pytest.mark.parametrize("bad", [{"nodes": 0}])
def test_bad_shape_refused(bad):
    with pytest.raises(ValueError):
        fs.rail(bad)

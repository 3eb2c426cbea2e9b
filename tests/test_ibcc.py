"""IBA annex A10 congestion control: the CA reaction point (sim/cc/ibcc.py), the switch's FECN
marking (EcnConfig(mode="ib")), a BECN for every FECN at the destination, and the wiring
(cc = "ibcc", cc_opts).  docs/explanation/infiniband.md "Congestion control (IBA annex A10)"."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim import cc
from sim.cc.ibcc import CCT_PRESETS, CCTI_TIMER_UNIT_PS, IbCc
from sim.engine import Engine
from sim.net.mmu import Mmu, MmuConfig
from sim.net.switch import EcnConfig, Switch, ib_threshold_bytes
from sim.packet import SimPacket
from sim.scenarios import ScenarioError
from sim.scenarios.common import ecn_config, host_kw
from sim.study.results import run_scenario

G = 10**9
T = CCTI_TIMER_UNIT_PS


def test_registered_and_listed(capsys):
    from sim.cli import main

    assert "ibcc" in cc.names()
    assert isinstance(cc.create("ibcc", line_rate_bps=100 * G), IbCc)
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    assert "none (fixed rate), dcqcn, fixed, ibcc" in out
    assert "ibcc options" in out and "ccti_timer" in out and "marking_rate" in out


def test_becns_raise_ccti_up_to_the_limit_and_the_timer_lowers_it_on_its_grid():
    c = IbCc(line_rate_bps=100 * G, ccti_increase=3, ccti_timer=4, ccti_limit=7, ccti_min=1)
    assert c.ccti == 1 and c.next_timer_ps() is None  # at ccti_min: nothing to lower
    c.on_cnp(1 * T)
    assert c.ccti == 4 and c.next_timer_ps() == 4 * T  # the grid from 0, not 1 T + 4 T
    c.on_cnp(2 * T)
    assert c.ccti == 7
    c.on_cnp(3 * T)
    assert c.ccti == 7  # capped at ccti_limit
    c.on_timer(4 * T)
    assert c.ccti == 6 and c.next_timer_ps() == 8 * T
    c.on_cnp(30 * T)  # the expiries at 8, 12, ..., 28 T run first: 6 -> 1 (min) after 5
    assert c.timer_decrements == 6 and c.ccti == 4 and c.next_timer_ps() == 32 * T
    for k in range(8, 12):
        c.on_timer(k * 4 * T)
    assert c.ccti == 1 and c.next_timer_ps() is None  # never below ccti_min
    assert c.becns == 4


def test_ipd_from_the_table_is_the_rate():
    c = IbCc(line_rate_bps=100 * G, cc_cct=[[0, 0], [0, 1], [1, 3], [3, 8]], ccti_timer=0)
    # IPD = multiplier / 2**shift packet times: rate = line * 2**s // (2**s + m)
    assert [c.ipd(i) for i in range(4)] == [0.0, 1.0, 1.5, 1.0]
    want = [100 * G, 50 * G, 100 * G * 2 // 5, 50 * G]
    got = []
    for _ in range(4):
        got.append(c.rate_bps)
        c.on_cnp(0)
    assert got == want and c.rate_bps == 50 * G and c.next_timer_ps() is None  # timer 0: off


def test_default_table_is_llnl_mellanox_shape():
    t = CCT_PRESETS["mellanox"]
    assert len(t) == 128 and t[0] == (0, 0) and t[127] == (0, 57)
    assert all(s == 0 for s, _ in t) and all(a[1] <= b[1] for a, b in itertools.pairwise(t))
    c = IbCc(line_rate_bps=100 * G)
    assert c.ccti_limit == 127 and c.ccti_timer == 2 and c.ccti_increase == 1


@pytest.mark.parametrize("kw, msg", [
    ({"ccti_increase": -1}, "ccti_increase"), ({"ccti_timer": 1.5}, "ccti_timer"),
    ({"ccti_limit": 128}, "ccti_limit"), ({"cc_cct": [[4, 0]]}, "shift"),
    ({"cc_cct": []}, "cc_cct"), ({"nope": 1}, "unknown ibcc"), ({"ccti_min": 200}, "ccti_min"),
])
def test_bad_parameters(kw, msg):
    with pytest.raises(ValueError, match=msg):
        IbCc(line_rate_bps=100 * G, **kw)


@given(st.lists(st.sampled_from(["becn", "tick"]), max_size=60),
       st.integers(1, 4), st.integers(0, 5))
def test_ccti_matches_an_always_running_timer_model(ops, inc, cmin):
    c = IbCc(line_rate_bps=100 * G, ccti_increase=inc, ccti_min=cmin, ccti_timer=1,
             preset="linear")
    model, now = cmin, 0
    for op in ops:
        now += T
        model = max(model - 1, cmin)  # the timer's expiry at this grid point
        if op == "becn":
            c.on_cnp(now + T // 2)  # between grid points; runs the expiry due first
            model = min(model + inc, 127)
        elif c.next_timer_ps() is not None and c.next_timer_ps() <= now:
            c.on_timer(now)
        assert c.ccti == model
        assert c.rate_bps == 100 * G // (1 + c.ccti)


# ----------------------------------------------------------------------------- the switch
def _switch(ecn: EcnConfig) -> Switch:
    cfg = MmuConfig(buffer_bytes=4_000_000, ports=4, reserved_bytes=2000, headroom_bytes=0,
                    lossless_pgs=frozenset(), xoff_mode="static", xoff_bytes=20_000,
                    xon_delta_bytes=2000)
    return Switch(Engine(), 0, Mmu(cfg), routes={}, ecn=ecn)


def _pkts(n: int, nbytes: int = 1082, tc: int = 3):
    return [SimPacket.trusted(i, 0, nbytes, 0, tc, 2, 1, 2) for i in range(n)]


def test_threshold_scale():
    assert ib_threshold_bytes(0) is None
    assert ib_threshold_bytes(15) == 4096 and ib_threshold_bytes(1) == 60 * 1024
    with pytest.raises(ValueError):
        ib_threshold_bytes(16)


def test_marks_above_the_threshold_and_none_below():
    sw = _switch(EcnConfig(mode="ib", threshold_bytes=8192))
    below, above = _pkts(20), _pkts(20)
    for p in below:
        sw._maybe_mark(1, p, 8191)
    for p in above:
        sw._maybe_mark(1, p, 8192)
    assert not any(p.ecn == 3 for p in below)
    assert all(p.ecn == 3 for p in above) and sw.ce_marked == 20


@given(st.integers(0, 9), st.integers(1, 60))
def test_marking_rate_skips_that_many_candidates_per_port_and_class(rate, n):
    sw = _switch(EcnConfig(mode="ib", threshold_bytes=0, marking_rate=rate))
    a, b = _pkts(n, tc=3), _pkts(n, tc=4)
    for p, q in zip(a, b, strict=True):
        sw._maybe_mark(1, p, 10_000)
        sw._maybe_mark(1, q, 10_000)  # another class: its own count
    want = [i % (rate + 1) == 0 for i in range(n)]
    assert [p.ecn == 3 for p in a] == want == [q.ecn == 3 for q in b]


def test_packet_size_and_not_ect():
    sw = _switch(EcnConfig(mode="ib", threshold_bytes=0, packet_size_bytes=256))
    small, big = _pkts(1, nbytes=255)[0], _pkts(1, nbytes=256)[0]
    plain = SimPacket.trusted(9, 0, 1082, 0, 3, 0, 1, 2)
    for p in (small, big, plain):
        sw._maybe_mark(1, p, 10_000)
    assert (small.ecn, big.ecn, plain.ecn) == (2, 3, 0)


# ----------------------------------------------------------------------------- wiring
def _p(**kw):
    return {"cc": "ibcc", "cc_opts": "", "preset": "", "kmin_kb": 5.0, "kmax_kb": 200.0,
            "pmax": 0.01, **kw}


def test_cc_opts_split_between_switch_and_hosts():
    e = ecn_config(_p(cc_opts="threshold=12, marking_rate=3, packet_size=2, ccti_timer=7"))
    assert (e.mode, e.threshold_bytes, e.marking_rate, e.packet_size_bytes) == \
        ("ib", 4 * 4096, 3, 128)
    kw = host_kw(_p(cc_opts="threshold=12, ccti_timer=7"), 100 * G)
    assert kw["cc_params"] == {"ccti_timer": 7} and kw["cnp_interval_ps"] == 0
    assert ecn_config(_p(cc_opts="threshold=0")) is None
    assert ecn_config(_p(cc="dcqcn")).mode == "red"  # RoCE unchanged
    with pytest.raises(ScenarioError, match=r"cc_opts.*threshold"):
        ecn_config(_p(cc_opts="threshold=16"))
    with pytest.raises(ScenarioError, match=r"cc_opts.*ccti_limit"):
        host_kw(_p(cc_opts="ccti_limit=999"), 100 * G)


def test_bad_cc_opts_is_one_line_exit_2(capsys):
    from sim.cli import main

    assert main(["replay", "incast", "-p", "cc=ibcc", "-p", "cc_opts=threshold=99",
                 "--no-capture", "--no-plots", "--out", "/nonexistent/x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("lossless: ") and "threshold" in err[0]


def test_a_becn_for_every_fecn(tmp_path):
    s = run_scenario("incast", {"cc": "ibcc", "senders": 4, "duration_ms": 0.1},
                     out_dir=str(tmp_path / "o"), plots=False, write_captures=False)
    ce = sum(f["ce_received"] for f in s["flows"])
    assert ce > 0 and s["totals"]["cnps"] == ce == s["totals"]["ce_marked"]


@pytest.fixture(scope="module")
def incast(tmp_path_factory):
    out = tmp_path_factory.mktemp("ibcc") / "incast"
    s = run_scenario("incast", {"cc": "ibcc", "duration_ms": 0.6}, out_dir=str(out),
                     plots=False, write_captures=False)
    return s, np.load(out / "timeseries.npz")


def test_incast_converges_to_a_fair_share_over_the_last_half(incast):
    s, ts = incast
    half = ts["bin_t_ps"] >= int(ts["duration_ps"]) // 2
    x = np.array([ts[f"flow_{i}_rx_bytes"][half].sum() for i in range(8)], dtype=float)
    assert x.sum() ** 2 / (8 * (x ** 2).sum()) > 0.9
    assert x.sum() * 8 / (int(ts["duration_ps"]) / 2 / 1e12) > 0.9 * 100 * G  # goodput
    assert s["totals"]["drops"] == 0


def test_incast_keeps_the_queue_below_the_pfc_threshold_most_of_the_time(incast):
    _, ts = incast
    end = int(ts["duration_ps"])
    xoff = 20_000  # the built-in's xoff_kb per ingress (port, PG)
    below = total = 0
    for i in range(1, 9):
        t, b = ts[f"ingress_n0_p{i}_pg3_t_ps"], ts[f"ingress_n0_p{i}_pg3_bytes"]
        w = np.diff(np.append(t, end))
        keep = t >= end // 2
        below += w[keep & (b < xoff)].sum()
        total += w[keep].sum()
    assert below / total > 0.95
    pauses = sum(int((ts[k] >= end // 2).sum()) for k in ts.files
                 if k.startswith("pfc_tx") and k.endswith("_t_ps"))
    assert pauses == 0


def test_fabric_file_hosts_cc_ibcc(tmp_path):
    src = open("docs/examples/two_switches.toml").read()
    src = src.replace('cc = "none"', 'cc = "ibcc"\ncc_opts = "threshold=14, ccti_timer=3"')
    src = src.replace("dst = 21", "dst = 20")  # both flows into host 20: congestion
    f = tmp_path / "ib.toml"
    f.write_text(src)
    s = run_scenario(str(f), out_dir=str(tmp_path / "o"), plots=False, write_captures=False)
    ce = sum(fl["ce_received"] for fl in s["flows"])
    # [hosts] cnp_interval_us (default 50) does not apply: a BECN for every FECN
    assert ce > 10 and s["totals"]["cnps"] == ce

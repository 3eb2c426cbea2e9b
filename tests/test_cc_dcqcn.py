"""DCQCN reaction point (sim/cc/dcqcn.py), driven directly with scripted timestamps (no engine).

Conventions used in the derivations below: L = line rate = 100 Gb/s = 10**11 bps; times in ps
(1 us = 10**6 ps); a cut is ``Rc = floor(Rc * (1 - alpha/2))`` (then the min-rate floor); a
recovery step is ``Rc = ceil((Rt + Rc) / 2)``.  Counters T (timer) and BC (bytes) include the
event being processed.  Alpha values that are short products of dyadic fractions are exact
floats and are given as fractions; after several CNP/decay mixtures the expected alpha follows
the same float recurrence the algorithm states (``alpha = (1-g)*alpha [+ g]``).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import sim.cc as cc
from sim.cc import dcqcn as dc

L = 100_000_000_000
US = 1_000_000


def state(x) -> tuple[int, int, float]:
    return (x.rate_bps, x.target_rate_bps, x.alpha)


def make(preset=None, **kw):
    return cc.create("dcqcn", line_rate_bps=L, preset=preset, **kw)


def run_until(x, t_ps: int) -> None:
    """Fire every timer due at or before ``t_ps``, one ``on_timer`` call per due time."""
    while (due := x.next_timer_ps()) is not None and due <= t_ps:
        x.on_timer(due)


# --------------------------------------------------------------------------------- API
def test_registered_and_listed():
    assert "dcqcn" in cc.names()
    assert isinstance(make(), cc.Dcqcn)


def test_unknown_algorithm_lists_known():
    with pytest.raises(ValueError, match=r"dcqcn.*fixed"):
        cc.create("dcqcnn", line_rate_bps=L)


def test_unknown_preset_lists_presets():
    with pytest.raises(ValueError, match="hpcc, nvidia, paper"):
        make("mellanox")


def test_unknown_override_lists_valid_names():
    with pytest.raises(ValueError) as e:
        make(K_us=55)
    msg = str(e.value)
    assert "K_us" in msg
    for name in dc.parameter_names():
        assert name in msg


@pytest.mark.parametrize("kw, name", [
    ({"g": 0}, "g"), ({"g": 1.5}, "g"), ({"g": -0.1}, "g"),
    ({"alpha_init": 1.01}, "alpha_init"), ({"alpha_init": -0.5}, "alpha_init"),
    ({"min_rate_bps": L + 1}, "min_rate_bps"), ({"min_rate_bps": 0}, "min_rate_bps"),
    ({"rate_ai_bps": -1}, "rate_ai_bps"), ({"rate_hai_bps": -5}, "rate_hai_bps"),
    ({"byte_counter_bytes": -1}, "byte_counter_bytes"),
    ({"fast_recovery_stages": -1}, "fast_recovery_stages"),
    ({"alpha_period_ps": 0}, "alpha_period_ps"),
    ({"rate_increase_period_ps": -55}, "rate_increase_period_ps"),
    ({"rate_reduce_monitor_period_ps": 0}, "rate_reduce_monitor_period_ps"),
    ({"rate_increase_period_ps": 1.5}, "rate_increase_period_ps"),
    ({"max_cut_fraction": 0}, "max_cut_fraction"), ({"max_cut_fraction": 2}, "max_cut_fraction"),
    ({"rate_on_first_cnp_fraction": 0}, "rate_on_first_cnp_fraction"),
    ({"variant": "mlx"}, "variant"), ({"increase_stage_rule": "x"}, "increase_stage_rule"),
    ({"hyper_increase_multiplier": "x"}, "hyper_increase_multiplier"),
    ({"alpha_update_order": "x"}, "alpha_update_order"),
    ({"clamp_target_rate": "yes"}, "clamp_target_rate"),
    ({"hyper_halves_period": 1}, "hyper_halves_period"),
    # the compiled core keeps integer parameters as int64: both cores refuse what would not fit
    ({"byte_counter_bytes": 2**63}, "byte_counter_bytes"),
    ({"rate_ai_bps": float(2**64)}, "rate_ai_bps"),
])
def test_impossible_values_name_the_parameter(kw, name):
    with pytest.raises(ValueError, match=name):
        make(**kw)


def test_line_rate_must_be_positive():
    with pytest.raises(ValueError, match="line_rate_bps"):
        cc.create("dcqcn", line_rate_bps=0)
    with pytest.raises(ValueError, match=r"line_rate_bps.*2\*\*63"):
        cc.create("dcqcn", line_rate_bps=2**63)


def test_a_rate_control_without_a_rate_says_so():
    """RateControl is not an abc.ABC (the compiled core makes it an extension type): a
    subclass that forgets rate_bps fails when the rate is read, naming itself."""
    class Forgot(cc.RateControl):
        pass

    with pytest.raises(NotImplementedError, match="Forgot must define rate_bps"):
        Forgot().rate_bps  # noqa: B018
    assert Forgot().reacts_to_tx and Forgot().next_timer_ps() is None


def test_hpcc_min_rate_above_a_slow_line_is_rejected():
    # HPCC run.py MIN_RATE is 1000 Mb/s, not scaled: a 100 Mb/s line cannot use it.
    with pytest.raises(ValueError, match="min_rate_bps"):
        cc.create("dcqcn", line_rate_bps=100_000_000, preset="hpcc")


def test_parameter_listing_and_presets():
    infos = dc.parameters()
    assert [i.name for i in infos] == dc.parameter_names()
    assert set(dc.presets()) == {"paper", "nvidia", "hpcc"}
    for p in dc.presets().values():
        assert set(p) == set(dc.parameter_names())
    for i in infos:
        assert i.doc and i.unit
        assert set(i.defaults) == {"paper", "nvidia", "hpcc"}
        assert i.default == dc.PRESETS["paper"][i.name]
    # HPCC rates scale with bw/25: 5 and 50 Mb/s at 25 Gb/s, 20 and 200 Mb/s at 100 Gb/s.
    assert dc.preset_params("hpcc", 25_000_000_000)["rate_ai_bps"] == 5_000_000
    assert dc.preset_params("hpcc", 25_000_000_000)["rate_hai_bps"] == 50_000_000
    h = make("hpcc")
    assert (h.rate_ai_bps, h.rate_hai_bps) == (20_000_000, 200_000_000)
    assert str(dc.PRESETS["hpcc"]["rate_ai_bps"]) == "5 Mb/s x line/25 Gb/s"
    assert make().preset == "paper"


def test_no_cnp_costs_nothing():
    for preset in ("paper", "nvidia", "hpcc"):
        x = make(preset)
        assert x.next_timer_ps() is None
        assert x.reacts_to_tx is False
        x.on_tx(10**9, 5)
        x.on_timer(10)
        assert (x.rate_bps, x.target_rate_bps) == (L, L)
        assert x.next_timer_ps() is None


# --------------------------------------------------------------------------------- paper
def test_paper_preset_exact_sequence():
    # paper: g=1/256, alpha0=1, K=T=55us, B=10^7 bytes, F=5, R_AI=40 Mb/s, R_HAI=200 Mb/s,
    # rule "paper" (FR while max(T,BC)<5, AI while min<5), HAI i = min(T,BC) - 5.
    x = make("paper")
    B = 10_000_000
    # CNP@0: Rt = Rc = L (clamp), Rc = L*(1-1/2) = 50e9, alpha = (255/256)*1 + 1/256 = 1.
    x.on_cnp(0)
    assert state(x) == (50_000_000_000, L, 1.0)
    assert x.next_timer_ps() == 55 * US and x.reacts_to_tx
    # CNP@1us: Rt = 50e9, Rc = 25e9, alpha stays 1; timers restart at 1+55 = 56us.
    x.on_cnp(1 * US)
    assert state(x) == (25_000_000_000, 50_000_000_000, 1.0)
    assert x.next_timer_ps() == 56 * US
    # 56us: alpha timer first: alpha = 255/256; then T=1 (FR): Rc = (50e9 + 25e9)/2 = 37.5e9.
    x.on_timer(56 * US)
    assert state(x) == (37_500_000_000, 50_000_000_000, 255 / 256)
    assert x.next_timer_ps() == 111 * US
    # Byte events BC=1..4 at 57us (max(T,BC) < 5: FR): Rc -> 43.75e9, 46.875e9, 48.4375e9,
    # 49.21875e9.
    for rc in (43_750_000_000, 46_875_000_000, 48_437_500_000, 49_218_750_000):
        x.on_tx(B, 57 * US)
        assert state(x) == (rc, 50_000_000_000, 255 / 256)
    # Partial bytes count up: 9_999_999 + 1 = B -> one event, not before.
    x.on_tx(B - 1, 57 * US)
    assert x.rate_bps == 49_218_750_000
    # BC=5, T=1: max=5 >= 5, min=1 < 5 -> AI: Rt = 50.04e9,
    # Rc = ceil((50_040_000_000 + 49_218_750_000)/2) = 49_629_375_000.
    x.on_tx(1, 57 * US)
    assert state(x) == (49_629_375_000, 50_040_000_000, 255 / 256)
    assert x.byte_count == 5 and x.timer_count == 1
    # 111us: alpha = (255/256)^2; T=2 (min=2 < 5, AI): Rt = 50.08e9,
    # Rc = ceil((50_080_000_000 + 49_629_375_000)/2) = 49_854_687_500.
    x.on_timer(111 * US)
    assert state(x) == (49_854_687_500, 50_080_000_000, (255 / 256) ** 2)
    # 166us: T=3 AI: Rt = 50.12e9, Rc = ceil((50.12e9 + 49_854_687_500)/2) = 49_987_343_750.
    x.on_timer(166 * US)
    assert state(x) == (49_987_343_750, 50_120_000_000, 255**3 / 256**3)
    # 221us: T=4 AI: Rt = 50.16e9, Rc = ceil(100_147_343_750/2) = 50_073_671_875.
    x.on_timer(221 * US)
    assert state(x) == (50_073_671_875, 50_160_000_000, 255**4 / 256**4)
    # 276us: T=5, BC=5: min=5 -> HAI with i = 5-5 = 0: Rt unchanged,
    # Rc = ceil((50_160_000_000 + 50_073_671_875)/2) = ceil(50_116_835_937.5) = 50_116_835_938.
    x.on_timer(276 * US)
    assert state(x) == (50_116_835_938, 50_160_000_000, 255**5 / 256**5)
    # 331us: T=6: i = min(6,5) - 5 = 0 again (the byte counter holds the minimum).
    # Rc = ceil((50_160_000_000 + 50_116_835_938)/2) = 50_138_417_969.
    x.on_timer(331 * US)
    assert state(x) == (50_138_417_969, 50_160_000_000, 255**6 / 256**6)
    # BC=6: min(6,6) = 6 -> i = 1: Rt = 50.36e9, Rc = ceil((50.36e9 + 50_138_417_969)/2)
    # = ceil(50_249_208_984.5) = 50_249_208_985.
    x.on_tx(B, 331 * US)
    assert state(x) == (50_249_208_985, 50_360_000_000, 255**6 / 256**6)
    # 386us: T=7: min(7,6) = 6 -> i = 1: Rt = 50.56e9,
    # Rc = ceil((50.56e9 + 50_249_208_985)/2) = ceil(50_404_604_492.5) = 50_404_604_493.
    x.on_timer(386 * US)
    assert state(x) == (50_404_604_493, 50_560_000_000, 255**7 / 256**7)
    assert x.next_timer_ps() == 441 * US


def test_paper_alpha_decays_without_cnps_and_increase_stops_at_line_rate():
    x = make("paper", byte_counter_bytes=0)
    x.on_cnp(0)
    a = 1.0
    k = 0
    while x.next_timer_ps() is not None and k < 200:
        t = x.next_timer_ps()
        x.on_timer(t)
        k += 1
        if t % (55 * US) == 0:
            a *= 255 / 256  # one decay per K = 55us with no CNP
        assert x.alpha == a
    # Rc reached Rt = L (FR steps halve the gap; ceil makes it exact), the increase timer and
    # the byte counter stopped; only the alpha timer is left, one tick every 55us.
    assert (x.rate_bps, x.target_rate_bps) == (L, L)
    assert x.reacts_to_tx is False
    t = x.next_timer_ps()
    assert t % (55 * US) == 0
    x.on_timer(t)
    assert x.next_timer_ps() == t + 55 * US


def test_paper_alpha_update_order_option():
    # NS3RDMA initial alpha 0.5.  cut_then_update: Rc = L*(1 - 0.25) = 75e9, then
    # alpha = 0.5*255/256 + 1/256 = 128.5/256 = 0.501953125.
    x = make("paper", alpha_init=0.5)
    x.on_cnp(0)
    assert state(x) == (75_000_000_000, L, 0.501953125)
    # update_then_cut (NS3RDMA rpr_cnm_received): alpha = 0.501953125 first, then
    # Rc = L*(1 - 0.2509765625) = 74_902_343_750.
    y = make("paper", alpha_init=0.5, alpha_update_order="update_then_cut")
    y.on_cnp(0)
    assert state(y) == (74_902_343_750, L, 0.501953125)


def test_max_cut_option():
    # alpha = 1 would cut by 1/2; max_cut_fraction 0.25 limits Rc to 0.75 L.
    x = make("paper", max_cut_fraction=0.25)
    x.on_cnp(0)
    assert state(x) == (75_000_000_000, L, 1.0)


def test_min_rate_floor():
    x = make("paper", min_rate_bps=30_000_000_000)
    x.on_cnp(0)
    assert x.rate_bps == 50_000_000_000
    x.on_cnp(1)  # 25e9 < 30e9 -> floor
    assert (x.rate_bps, x.target_rate_bps) == (30_000_000_000, 50_000_000_000)
    x.on_cnp(2)  # Rt = Rc = 30e9, cut floored again
    assert (x.rate_bps, x.target_rate_bps) == (30_000_000_000, 30_000_000_000)


def test_paper_clamp_option():
    # clamp_target_rate=False: no timer increase since the last cut -> Rt stays L.
    x = make("paper", clamp_target_rate=False)
    x.on_cnp(0)
    x.on_cnp(1)
    assert (x.rate_bps, x.target_rate_bps) == (25_000_000_000, L)
    # 55us+1ps: alpha = 255/256, then T=1 (FR): Rc = (L + 25e9)/2 = 62.5e9.  The next cut
    # clamps Rt = 62.5e9 and cuts with the old alpha: Rc = floor(62.5e9 * (1 - 255/512))
    # = floor(62.5e9 * 257/512) = floor(31_372_070_312.5) = 31_372_070_312.
    x.on_timer(x.next_timer_ps())
    assert (x.rate_bps, x.alpha) == (62_500_000_000, 255 / 256)
    x.on_cnp(56 * US)
    assert (x.rate_bps, x.target_rate_bps) == (31_372_070_312, 62_500_000_000)
    # clamp_target_rate=True (paper): every cut clamps.
    y = make("paper")
    y.on_cnp(0)
    y.on_cnp(1)
    assert (y.rate_bps, y.target_rate_bps) == (25_000_000_000, 50_000_000_000)


def _timer_only_deltas(rule, mult="constant", n=7, F=3):
    """Rt increments of n timer-only increase events after two cuts (Rt = 50e9, far below L),
    with R_AI = 1 Mb/s and R_HAI = 100 Mb/s so the phase shows in the step."""
    x = make("paper", byte_counter_bytes=0, fast_recovery_stages=F, increase_stage_rule=rule,
             hyper_increase_multiplier=mult, rate_ai_bps=1_000_000, rate_hai_bps=100_000_000)
    x.on_cnp(0)
    x.on_cnp(1)
    out = []
    for _ in range(n):
        rt = x.target_rate_bps
        t = x.next_timer_ps()
        x.on_timer(t)
        if x.timer_count:
            out.append(x.target_rate_bps - rt)
    return out


A, H = 1_000_000, 100_000_000


@pytest.mark.parametrize("rule, expected", [
    # timer only, F = 3; counters include the current event (T = 1, 2, ...):
    ("paper", [0, 0, H, H, H, H, H]),    # FR T<3; min=max=T so AI is skipped, HAI from T=3
    ("ns3rdma", [0, 0, H, H, H, H, H]),  # same boundaries as paper
    ("dcb", [0, 0, 0, H, H, H, H]),      # FR T<=3, HAI from T=4
    ("isekai", [0, 0, A, H, H, H, H]),   # FR T<3, AI at T=3 (max>=F), HAI when min>F
    ("hpcc", [0, 0, 0, A, H, H, H]),     # F FR steps, one AI step, then HAI
])
def test_stage_rules_reach_hyper_increase(rule, expected):
    assert _timer_only_deltas(rule) == expected


@pytest.mark.parametrize("mult, expected", [
    ("paper", [0, 0, 0, H, 2 * H, 3 * H, 4 * H]),   # i = T - 3
    ("ns3rdma", [0, 0, H, 2 * H, 3 * H, 4 * H, 5 * H]),  # i = T - 3 + 1
    ("constant", [0, 0, H, H, H, H, H]),
])
def test_hyper_multiplier(mult, expected):
    assert _timer_only_deltas("paper", mult) == expected


def test_hyper_halves_period_option():
    # timer only, F = 2, rule paper: T=1 FR, T=2 HAI (entered from FR: next period still 55us),
    # T>=3 handled while already in HAI -> NS3RDMA sets the next period to T/2 = 27.5us.
    # Two CNPs at 0 -> the timer fires at 55, 110, 165, 192.5, 220us.
    x = make("paper", byte_counter_bytes=0, fast_recovery_stages=2, hyper_halves_period=True)
    x.on_cnp(0)
    x.on_cnp(0)
    times = []
    while x.timer_count < 5:
        t = x.next_timer_ps()
        before = x.timer_count
        x.on_timer(t)
        if x.timer_count > before:
            times.append(t)
    assert times == [55 * US, 110 * US, 165 * US, 192_500_000, 220 * US]
    assert x.next_timer_ps() == 247_500_000
    # without the option: plain 55us period
    y = make("paper", byte_counter_bytes=0, fast_recovery_stages=2)
    y.on_cnp(0)
    y.on_cnp(0)
    for _ in range(3):
        y.on_timer(y.next_timer_ps())
    assert y.timer_count == 3 and y.next_timer_ps() == 220 * US


@pytest.mark.parametrize("halve", [False, True])
def test_hyper_halves_byte_threshold(halve):
    # F=0, rule paper: every event is hyper (max >= 0 and min >= 0).  BC=1 is handled from the
    # FR state left by the cut (threshold stays 1000), BC=2 from HAI -> next threshold 500.
    x = make("paper", fast_recovery_stages=0, byte_counter_bytes=1000,
             hyper_halves_period=halve)
    x.on_cnp(0)
    x.on_tx(1000, 1)
    assert x.byte_count == 1
    x.on_tx(999, 2)
    assert x.byte_count == 1
    x.on_tx(1, 3)
    assert x.byte_count == 2
    x.on_tx(500, 4)
    assert x.byte_count == (3 if halve else 2)


def test_target_div8_rule():
    # clamp off + four cuts with alpha = 1: Rc = L/16 = 6.25e9, Rt = L (no timer increase).
    x = make("paper", clamp_target_rate=False, target_div8_rule=True, byte_counter_bytes=0)
    for t in range(4):
        x.on_cnp(t)
    assert (x.rate_bps, x.target_rate_bps) == (6_250_000_000, L)
    # T=1 and Rt > 10 Rc: Rt = L // 8 = 12.5e9 instead of the increase;
    # Rc = ceil((12.5e9 + 6.25e9)/2) = 9.375e9.
    x.on_timer(x.next_timer_ps())
    assert (x.rate_bps, x.target_rate_bps) == (9_375_000_000, 12_500_000_000)
    # T=2: rule no longer applies (FR): Rc = ceil((12.5e9 + 9.375e9)/2) = 10_937_500_000.
    x.on_timer(x.next_timer_ps())
    assert (x.rate_bps, x.target_rate_bps) == (10_937_500_000, 12_500_000_000)
    y = make("paper", clamp_target_rate=False, byte_counter_bytes=0)
    for t in range(4):
        y.on_cnp(t)
    y.on_timer(y.next_timer_ps())  # FR: Rc = ceil((L + 6.25e9)/2)
    assert (y.rate_bps, y.target_rate_bps) == (53_125_000_000, L)


# --------------------------------------------------------------------------------- vendor
def _decay(a: float, g: float, n: int) -> float:
    for _ in range(n):
        a = (1.0 - g) * a
    return a


def test_hpcc_preset_exact_sequence():
    # hpcc @ 100G: g=1/256, alpha 1 on first CNP, alpha tick 1us, decrease tick 4us, T=300us,
    # no byte counter, F=1, rule hpcc (stage<F FR, ==F AI, >F HAI), R_AI = 5*100/25 = 20 Mb/s,
    # R_HAI = 200 Mb/s, min 1 Gb/s, no clamp without a timer increase.
    g = 1 / 256
    x = make("hpcc")
    x.on_cnp(0)  # first CNP: alpha = 1, Rt = Rc = 1.0*Rc = L, no cut yet
    assert state(x) == (L, L, 1.0)
    assert x.next_timer_ps() == 1 * US
    assert x.reacts_to_tx is False  # no byte counter in HPCC
    for k in (1, 2, 3):  # the first CNP does not count toward alpha: pure decay
        x.on_timer(k * US)
        assert state(x) == (L, L, 255**k / 256**k)
    # 4us: alpha tick (alpha = (255/256)^4 = 4228250625/2^32) then the decrease tick: a CNP
    # arrived -> cut; T=0 so no clamp, Rt stays L;
    # Rc = floor(1e11 * (1 - 4228250625/2^33)) = floor(50_776_684_272.57) = 50_776_684_272.
    x.on_timer(4 * US)
    assert state(x) == (50_776_684_272, L, 255**4 / 256**4)
    assert x.cuts == 1
    # Alpha ticks every 1us until the increase timer at 4 + 300 = 304us; rates unchanged.
    a = 255**4 / 256**4
    for k in range(5, 304):
        assert x.next_timer_ps() == k * US
        x.on_timer(k * US)
        a = _decay(a, g, 1)
        assert state(x) == (50_776_684_272, L, a)
    # 304us: alpha tick, then T=1 (stage 0 < F=1: FR): Rc = ceil((L + 50_776_684_272)/2)
    # = 75_388_342_136.
    x.on_timer(304 * US)
    a = _decay(a, g, 1)
    assert state(x) == (75_388_342_136, L, a)
    # A CNP at 305.5us: flagged; the decrease tick stays on the 4us grid -> 308us.
    run_until(x, 305 * US)
    a = _decay(a, g, 1)
    x.on_cnp(305 * US + 500_000)
    assert x.cuts == 1
    # 306us: alpha = (1-g)*alpha + g (CNP seen); 307, 308: decay.
    run_until(x, 306 * US)
    a = (1.0 - g) * a + g
    assert x.alpha == a
    run_until(x, 307 * US)
    x.on_timer(308 * US)
    a = _decay(a, g, 2)
    # 308us cut: T=1 > 0 -> clamp Rt = Rc = 75_388_342_136; Rc = floor(Rc * (1 - alpha/2)).
    rt = 75_388_342_136
    rc = int(rt * (1.0 - a / 2.0))
    assert state(x) == (rc, rt, a) and x.cuts == 2
    # Increase timer restarted by the cut: 608us T=1 FR, 908us T=2 AI (+20 Mb/s),
    # 1208us T=3 HAI (+200 Mb/s), 1508us T=4 HAI (+200 Mb/s again: constant step).
    for t_us, step in ((608, 0), (908, 20_000_000), (1208, 200_000_000),
                       (1508, 200_000_000)):
        run_until(x, t_us * US)
        rt = rt + step
        rc = (rt + rc + 1) // 2
        assert (x.rate_bps, x.target_rate_bps) == (rc, rt), t_us


def test_nvidia_preset_exact_sequence():
    # nvidia: g=5/1024, alpha 1023/1024, alpha tick 1us, decrease tick 4us, T=300us,
    # B = 32767*64 = 2_097_088 bytes, F=1, rule isekai (FR while max<1, AI while min<2),
    # R_AI = 5 Mb/s, R_HAI = 50 Mb/s (constant), min 1 Mb/s, clamp only after a timer increase.
    g = 5 / 1024
    B = 2_097_088
    x = make("nvidia")
    x.on_cnp(0)
    assert state(x) == (L, L, 1023 / 1024)
    a = 1023 / 1024
    for k in (1, 2, 3):
        x.on_timer(k * US)
        a = a * 1019 / 1024  # exact: dyadic with < 53 significant bits
        assert state(x) == (L, L, a)
    # 4us: alpha = (1023/1024)(1019/1024)^4 = 1102992018346383/2^50, then the cut (no clamp):
    # Rc = floor(1e11 * (1 - alpha/2)) = floor(51_017_314_610.4...) = 51_017_314_610.
    x.on_timer(4 * US)
    a = a * 1019 / 1024
    assert a == 1102992018346383 / 2**50
    assert state(x) == (51_017_314_610, L, a)
    assert x.reacts_to_tx
    # Byte events at 4us: BC=1: max(T=0,BC=1) = 1 >= F -> min = 0 < 2 -> AI, Rt = min(L+5M, L)
    # = L; Rc = ceil((L + 51_017_314_610)/2) = 75_508_657_305.  BC=2: AI,
    # Rc = ceil((L + 75_508_657_305)/2) = 87_754_328_653.
    x.on_tx(B, 4 * US)
    assert state(x) == (75_508_657_305, L, a)
    x.on_tx(B // 2, 4 * US)
    x.on_tx(B - B // 2, 4 * US)
    assert state(x) == (87_754_328_653, L, a) and x.byte_count == 2
    # CNP at 4.5us; the next alpha tick (5us) adds g; the cut waits for the 8us tick.
    x.on_cnp(4 * US + 500_000)
    assert x.next_timer_ps() == 5 * US
    x.on_timer(5 * US)
    a = (1.0 - g) * a + g
    assert x.alpha == a
    run_until(x, 8 * US)
    a = _decay(a, g, 3)
    # Only byte-counter increases since the last cut: no clamp (clamp_tgt_rate_after_time_inc).
    rc = int(87_754_328_653 * (1.0 - a / 2.0))
    assert state(x) == (rc, L, a) and x.cuts == 2
    # 9..307us: alpha ticks only (decay), rate unchanged.
    for k in range(9, 308):
        x.on_timer(k * US)
        a = _decay(a, g, 1)
        assert state(x) == (rc, L, a)
    # 308us: alpha tick, then T=1: max=1 -> AI (min=BC=0): Rt = L (clamped),
    # Rc = ceil((L + rc)/2).
    x.on_timer(308 * US)
    a = _decay(a, g, 1)
    assert x.alpha == a
    rc = (L + rc + 1) // 2
    assert (x.rate_bps, x.target_rate_bps) == (rc, L)
    # A CNP now (T=1 > 0) clamps at the 312us tick: Rt = rc, Rc = floor(rc*(1 - alpha/2)).
    x.on_cnp(309 * US)
    run_until(x, 312 * US)
    rt = rc
    rc = int(rt * (1.0 - x.alpha / 2.0))
    assert (x.rate_bps, x.target_rate_bps) == (rc, rt)
    # Then: BC=1 AI, BC=2 AI, T=1 (612us) AI since min(1,2)=1 < 2, T=2 (912us): min=2 -> HAI.
    for ev, step in (("b", 5_000_000), ("b", 5_000_000), (612, 5_000_000), (912, 50_000_000)):
        if ev == "b":
            x.on_tx(B, 312 * US)
        else:
            run_until(x, ev * US)
        rt += step
        rc = (rt + rc + 1) // 2
        assert (x.rate_bps, x.target_rate_bps) == (rc, rt), ev


def test_vendor_first_cnp_handling():
    # rate_on_first_cnp_fraction 0.5: the first CNP sets Rt = Rc = L/2 at once, alpha = 1,
    # and cuts only at the first decrease tick (4us) with the decayed alpha.
    x = make("hpcc", rate_on_first_cnp_fraction=0.5)
    x.on_cnp(0)
    assert state(x) == (50_000_000_000, 50_000_000_000, 1.0)
    assert x.cuts == 0
    # a second CNP before the first tick: flagged for alpha (the first one is not)
    x.on_cnp(500_000)
    x.on_timer(1 * US)
    assert x.alpha == 1.0  # (255/256)*1 + 1/256
    run_until(x, 4 * US)
    a = 255**3 / 256**3
    assert x.cuts == 1
    # Rc = floor(50e9 * (1 - a/2)); Rt stays (no timer increase yet)
    assert state(x) == (int(50_000_000_000 * (1 - a / 2)), 50_000_000_000, a)


def test_vendor_decrease_moderation():
    x = make("hpcc")
    x.on_cnp(0)
    run_until(x, 4 * US)
    assert x.cuts == 1
    # Several CNPs inside one period (4, 8] -> one cut at 8us.
    for t in (4 * US + 1, 5 * US, 6 * US + 7, 7 * US):
        x.on_cnp(t)
    run_until(x, 7 * US + 999_999)
    assert x.cuts == 1
    # A CNP at exactly 8us: the 8us tick runs first (timers at t before a CNP at t) and cuts
    # for the earlier CNPs; this CNP waits for the 12us tick.
    x.on_cnp(8 * US)
    assert x.cuts == 2
    assert x.next_timer_ps() == 9 * US
    run_until(x, 11 * US)
    assert x.cuts == 2
    run_until(x, 12 * US)
    assert x.cuts == 3
    # No CNP in (12, 16]: no cut, and no decrease tick pending.
    run_until(x, 20 * US)
    assert x.cuts == 3
    assert x.next_timer_ps() != 16 * US


def test_vendor_clamp_option():
    # clamp_target_rate=True: every cut sets Rt = Rc even without a timer increase.
    x = make("hpcc", clamp_target_rate=True)
    x.on_cnp(0)
    run_until(x, 4 * US)
    assert x.target_rate_bps == L  # Rt = Rc = L before the cut
    x.on_cnp(5 * US)
    run_until(x, 8 * US)
    y = make("hpcc")
    y.on_cnp(0)
    run_until(y, 4 * US)
    y.on_cnp(5 * US)
    run_until(y, 8 * US)
    assert x.rate_bps == y.rate_bps
    assert y.target_rate_bps == L  # no timer increase since the last cut: no clamp
    assert x.target_rate_bps == 50_776_684_272  # clamped to Rc after the 4us cut


def test_vendor_alpha_decay_without_cnps():
    x = make("nvidia")
    x.on_cnp(0)
    a = 1023 / 1024
    for k in range(1, 50):
        x.on_timer(k * US)
        a = (1.0 - 5 / 1024) * a
        assert x.alpha == a


def test_timers_before_a_cnp_at_the_same_time_run_first():
    # engine order must not matter: a CNP delivered before the due alpha tick of the same ps
    x = make("hpcc")
    y = make("hpcc")
    for z in (x, y):
        z.on_cnp(0)
    x.on_timer(1 * US)
    x.on_cnp(1 * US)
    y.on_cnp(1 * US)
    y.on_timer(1 * US)
    assert state(x) == state(y) and x.next_timer_ps() == y.next_timer_ps()


# --------------------------------------------------------------------------------- property
_OVERRIDES = st.fixed_dictionaries({}, optional={
    "variant": st.sampled_from(dc.VARIANTS),
    "g": st.floats(min_value=1e-4, max_value=1.0),
    "alpha_init": st.floats(min_value=0.0, max_value=1.0),
    "alpha_period_ps": st.integers(1, 100 * US),
    "rate_reduce_monitor_period_ps": st.integers(1, 100 * US),
    "rate_increase_period_ps": st.integers(1, 500 * US),
    "byte_counter_bytes": st.integers(0, 10**7),
    "fast_recovery_stages": st.integers(0, 6),
    "increase_stage_rule": st.sampled_from(tuple(dc.STAGE_RULES)),
    "hyper_increase_multiplier": st.sampled_from(dc.HYPER_MULTIPLIERS),
    "alpha_update_order": st.sampled_from(dc.ALPHA_ORDERS),
    "clamp_target_rate": st.booleans(),
    "max_cut_fraction": st.floats(min_value=0.01, max_value=1.0),
    "rate_on_first_cnp_fraction": st.floats(min_value=0.01, max_value=1.0),
    "rate_ai_bps": st.integers(0, 10**10),
    "rate_hai_bps": st.integers(0, 10**11),
    "min_rate_bps": st.integers(1, 10**10),
    "hyper_halves_period": st.booleans(),
    "target_div8_rule": st.booleans(),
})

_EVENTS = st.lists(st.one_of(
    st.tuples(st.just("cnp"), st.integers(0, 20 * US)),
    st.tuples(st.just("tx"), st.integers(1, 5_000_000)),
    st.tuples(st.just("timer"), st.just(0)),
), max_size=80)


@given(preset=st.sampled_from(["paper", "nvidia", "hpcc"]), kw=_OVERRIDES, events=_EVENTS,
       line=st.sampled_from([10**10, 25 * 10**9, 10**11, 4 * 10**11]))
def test_invariants_under_random_events(preset, kw, events, line):
    kw = dict(kw)
    if "min_rate_bps" not in kw and preset == "hpcc":
        kw["min_rate_bps"] = 10**9
    kw["min_rate_bps"] = min(kw.get("min_rate_bps", 10**6), line)
    x = cc.create("dcqcn", line_rate_bps=line, preset=preset, **kw)
    now = 0
    for kind, arg in events:
        if kind == "cnp":
            now += arg
            x.on_cnp(now)
        elif kind == "tx":
            now += 1
            x.on_tx(arg, now)
        else:
            due = x.next_timer_ps()
            if due is None:
                continue
            now = due
            x.on_timer(now)
        assert x.min_rate_bps <= x.rate_bps <= line
        assert x.rate_bps <= x.target_rate_bps <= line
        assert isinstance(x.rate_bps, int) and isinstance(x.target_rate_bps, int)
        assert 0.0 <= x.alpha <= 1.0
        due = x.next_timer_ps()
        assert due is None or due > now

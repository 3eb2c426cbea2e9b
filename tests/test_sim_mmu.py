"""Tests for sim.net.mmu: stateful conservation/PFC invariants, thresholds, headroom formula."""

from fractions import Fraction

import pytest
from hypothesis import Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from sim.net.mmu import PFC_TRANSITIONS, XOFF, XON, Mmu, MmuConfig, headroom_bytes

GBPS = 10**9

# The link of the stateful model: 100 Gb/s, 10 m, 1024-byte MTU, 500 ns upstream response.
# H = 3 * (1024 + 20) + 84 + (2 * 10 m * 5000 ps/m + 500_000 ps) * 100e9 / 8e12
#   = 3132 + 84 + 600_000 / 80 = 3216 + 7500 = 10716 bytes.
LINK_BPS = 100 * GBPS
CABLE_M = 10
MTU_BYTES = 1024
RESPONSE_PS = 500_000
LINK_HEADROOM_BYTES = headroom_bytes(LINK_BPS, CABLE_M, MTU_BYTES, RESPONSE_PS)

PORTS = 3
PGS = 4
LOSSLESS = frozenset({1, 3})
RESERVED_BYTES = 1024
SHARED_POOL_BYTES = 40_000


def _config(headroom: int, mode: str, xon_delta: int, param: int) -> MmuConfig:
    buffer = (
        SHARED_POOL_BYTES
        + PORTS * PGS * RESERVED_BYTES
        + PORTS * len(LOSSLESS) * headroom
    )
    if mode == "static":
        return MmuConfig(
            buffer_bytes=buffer, ports=PORTS, pgs=PGS, reserved_bytes=RESERVED_BYTES,
            headroom_bytes=headroom, lossless_pgs=LOSSLESS, xoff_mode="static",
            xoff_bytes=param, xon_delta_bytes=xon_delta,
        )
    return MmuConfig(
        buffer_bytes=buffer, ports=PORTS, pgs=PGS, reserved_bytes=RESERVED_BYTES,
        headroom_bytes=headroom, lossless_pgs=LOSSLESS, xoff_mode="dynamic",
        alpha=Fraction(1, param), xon_delta_bytes=xon_delta,
    )


def _expected_threshold(mmu: Mmu) -> int:
    c = mmu.config
    if c.xoff_mode == "static":
        assert c.xoff_bytes is not None
        return c.xoff_bytes
    free = c.shared_pool_bytes - mmu.shared_used_bytes
    return free * c.alpha.numerator // c.alpha.denominator


class MmuMachine(RuleBasedStateMachine):
    """Random arrivals/departures; the upstream obeys PFC with the physical in-flight bound.

    Upstream model: once XOFF is reported for (port, pg), the sender can still deliver at most
    ``LINK_HEADROOM_BYTES`` (what the formula says is in flight, the XOFF-triggering frame
    included) and then stops until XON. With the MMU's headroom sized by the formula, a lossless
    PG must never drop; ``mmu_headroom_bytes`` is overridden below to show the check can fail.
    """

    mmu_headroom_bytes = LINK_HEADROOM_BYTES

    def __init__(self) -> None:
        super().__init__()
        self.mmu: Mmu | None = None
        self.resident: list[tuple[int, int, int, str]] = []
        self.offered = 0
        self.dropped = 0
        self.released = 0
        self.paused: dict[tuple[int, int], bool] = {}
        self.sent_since_xoff: dict[tuple[int, int], int] = {}
        # per lossless PG: its occupancy crossed XOFF and has not yet fallen to XON since
        self.crossed: dict[tuple[int, int], bool] = {}

    @initialize(
        mode=st.sampled_from(["static", "dynamic"]),
        xon_delta=st.sampled_from([0, 1000, 3000]),
        static_xoff=st.sampled_from([0, 3000, 8000, 20_000]),
        alpha_den=st.sampled_from([1, 2, 8]),
    )
    def setup(self, mode: str, xon_delta: int, static_xoff: int, alpha_den: int) -> None:
        param = static_xoff if mode == "static" else alpha_den
        self.mmu = Mmu(_config(self.mmu_headroom_bytes, mode, xon_delta, param))

    def _apply(self, changes, cause: tuple[int, int] | None, nbytes: int) -> None:
        mmu = self.mmu
        assert mmu is not None
        threshold = _expected_threshold(mmu)
        assert list(changes) == sorted(changes), "changes not in (port, PG) order"
        for port, pg, action in changes:
            assert pg in LOSSLESS, "a lossy PG sent PFC"
            key = (port, pg)
            if action == XOFF:
                assert not self.paused.get(key, False), "XOFF while already XOFF"
                self.paused[key] = True
                self.sent_since_xoff[key] = nbytes if key == cause else 0
            else:
                assert action == XON
                assert self.paused.get(key, False), "XON while not paused"
                # XON only once below XOFF - delta (or empty) and the headroom is empty.
                assert mmu.headroom_used_bytes(port, pg) == 0
                shared = mmu.shared_pg_bytes(port, pg)
                assert shared == 0 or shared + mmu.config.xon_delta_bytes <= threshold
                self.paused[key] = False
        self._paused_exactly_by_occupancy(threshold)

    def _paused_exactly_by_occupancy(self, threshold: int) -> None:
        """After every single admission or departure: a lossless PG is paused exactly when its
        occupancy crossed XOFF (headroom in use or shared > threshold) and has not yet fallen
        to XON (headroom empty and shared == 0 or shared + delta <= threshold)."""
        mmu = self.mmu
        assert mmu is not None
        delta = mmu.config.xon_delta_bytes
        for p in range(PORTS):
            for g in LOSSLESS:
                hdrm = mmu.headroom_used_bytes(p, g)
                shared = mmu.shared_pg_bytes(p, g)
                if hdrm > 0 or shared > threshold:
                    self.crossed[(p, g)] = True
                elif shared == 0 or shared + delta <= threshold:
                    self.crossed[(p, g)] = False
                assert mmu.paused(p, g) == self.crossed.get((p, g), False), (p, g)

    @rule(
        port=st.integers(0, PORTS - 1),
        pg=st.integers(0, PGS - 1),
        nbytes=st.integers(64, MTU_BYTES),
        count=st.integers(1, 12),
    )
    def arrive(self, port: int, pg: int, nbytes: int, count: int) -> None:
        mmu = self.mmu
        assert mmu is not None
        key = (port, pg)
        for _ in range(count):
            if self.paused.get(key, False):
                if self.sent_since_xoff[key] + nbytes > LINK_HEADROOM_BYTES:
                    return  # the upstream has stopped
                self.sent_since_xoff[key] += nbytes
            self.offered += nbytes
            result = mmu.admit(port, pg, nbytes)
            if result.admitted:
                assert result.where is not None and result.reason is None
                self.resident.append((port, pg, nbytes, result.where))
            else:
                assert result.where is None and result.reason is not None
                assert result.pause_changes == ()
                self.dropped += nbytes
                assert pg not in LOSSLESS, f"lossless drop: {result.reason}"
                assert result.reason in ("shared_full", "lossy_over_threshold")
            self._apply(result.pause_changes, key, nbytes)

    @precondition(lambda self: self.resident)
    @rule(index=st.integers(0, 10**6), count=st.integers(1, 12))
    def depart(self, index: int, count: int) -> None:
        mmu = self.mmu
        assert mmu is not None
        for _ in range(count):
            if not self.resident:
                return
            port, pg, nbytes, where = self.resident.pop(index % len(self.resident))
            self.released += nbytes
            before = (mmu.headroom_used_bytes(port, pg), mmu.shared_pg_bytes(port, pg),
                      mmu.reserved_used_bytes(port, pg))
            changes = mmu.release(port, pg, nbytes, where)
            # a departure drains the PG headroom first, then shared, then reserved (HPCC)
            rest, expect = nbytes, []
            for held in before:
                take = min(held, rest)
                expect.append(held - take)
                rest -= take
            assert rest == 0
            assert (mmu.headroom_used_bytes(port, pg), mmu.shared_pg_bytes(port, pg),
                    mmu.reserved_used_bytes(port, pg)) == tuple(expect)
            self._apply(changes, None, 0)

    @invariant()
    def conservation(self) -> None:
        mmu = self.mmu
        if mmu is None:
            return
        resident = sum(n for _, _, n, _ in self.resident)
        assert mmu.offered_bytes == self.offered == mmu.admitted_bytes + mmu.dropped_bytes
        assert mmu.admitted_bytes == mmu.released_bytes + mmu.resident_bytes
        assert mmu.released_bytes == self.released and mmu.resident_bytes == resident
        assert mmu.dropped_bytes == self.dropped == sum(mmu.drops_by_reason.values())
        total = sum(mmu.ingress_bytes(p, g) for p in range(PORTS) for g in range(PGS))
        assert total == resident
        # the PGs the MMU watches are the lossless ones paused or holding shared or headroom
        # bytes (what lets a dynamic threshold's change skip the others: Mmu._update)
        watched = {(p, g) for p in range(PORTS) for g in LOSSLESS if mmu.paused(p, g)
                   or mmu.shared_pg_bytes(p, g) or mmu.headroom_used_bytes(p, g)}
        assert set(mmu._watch) == watched

    @invariant()
    def occupancy_bounds(self) -> None:
        mmu = self.mmu
        if mmu is None:
            return
        c = mmu.config
        assert 0 <= mmu.shared_used_bytes <= c.shared_pool_bytes <= c.buffer_bytes
        shared = 0
        for p in range(PORTS):
            for g in range(PGS):
                assert 0 <= mmu.reserved_used_bytes(p, g) <= c.reserved_bytes
                assert 0 <= mmu.headroom_used_bytes(p, g) <= c.headroom_bytes
                assert mmu.shared_pg_bytes(p, g) >= 0
                if g not in LOSSLESS:
                    assert mmu.headroom_used_bytes(p, g) == 0
                shared += mmu.shared_pg_bytes(p, g)
        assert shared == mmu.shared_used_bytes

    @invariant()
    def pfc_state_matches_counters(self) -> None:
        mmu = self.mmu
        if mmu is None:
            return
        threshold = _expected_threshold(mmu)
        delta = mmu.config.xon_delta_bytes
        for p in range(PORTS):
            for g in range(PGS):
                paused = mmu.paused(p, g)
                assert paused == self.paused.get((p, g), False), "unreported PFC transition"
                if g not in LOSSLESS:
                    assert not paused
                    continue
                hdrm = mmu.headroom_used_bytes(p, g)
                shared = mmu.shared_pg_bytes(p, g)
                if hdrm > 0 or shared > threshold:
                    assert paused, "above the XOFF threshold but not paused"
                if paused:
                    assert hdrm > 0 or (shared > 0 and shared + delta > threshold), (
                        "should have resumed"
                    )


MmuMachine.TestCase.settings = settings(max_examples=80, stateful_step_count=40, deadline=None)
TestMmuStateful = MmuMachine.TestCase


class UndersizedHeadroomMachine(MmuMachine):
    """Same upstream, but the MMU reserves only a quarter of the needed headroom."""

    mmu_headroom_bytes = LINK_HEADROOM_BYTES // 4


def test_undersized_headroom_drops_lossless() -> None:
    """The stateful check is not vacuous: too little headroom makes a lossless PG drop."""
    with pytest.raises(AssertionError, match="lossless drop: headroom_full"):
        run_state_machine_as_test(
            UndersizedHeadroomMachine,
            settings=settings(
                max_examples=300, stateful_step_count=40, deadline=None,
                phases=[Phase.generate], database=None, print_blob=False,
            ),
        )


def test_zero_headroom_drops_at_threshold() -> None:
    mmu = Mmu(MmuConfig(buffer_bytes=10_000, ports=1, pgs=8, lossless_pgs={3},
                        xoff_mode="static", xoff_bytes=2000))
    assert mmu.admit(0, 3, 1000).where == "shared"
    assert mmu.admit(0, 3, 1000).where == "shared"
    r = mmu.admit(0, 3, 1000)
    assert not r.admitted and r.reason == "headroom_full"
    assert mmu.drops_by_reason == {"headroom_full": 1000}


# -- headroom formula -------------------------------------------------------------------------


def test_headroom_worked_100g_100m_jumbo_1us() -> None:
    """100 Gb/s, 100 m, 9216-byte MTU, 1 us response, by hand:

    - three frames on the wire: 3 * (9216 + 20) = 27708 bytes (the frame crossing XOFF, the local
      frame delaying the PAUSE, the upstream frame that completes);
    - the PAUSE: 64 + 20 = 84 bytes;
    - propagation both ways: 2 * 100 m * 5 ns/m = 1 us; at 100 Gb/s one byte is 80 ps, so
      1_000_000 / 80 = 12500 bytes;
    - response 1 us: another 12500 bytes.
    Total 27708 + 84 + 12500 + 12500 = 52792 bytes.
    """
    assert headroom_bytes(100 * GBPS, 100, 9216, 1_000_000) == 52_792


def test_headroom_worked_8021qbb_response_bound() -> None:
    """Response = 201728 bit times at 100G (IEEE 802.1Qbb bound, as besthub.dev "How to Compute
    Headroom ... Part 2" gives it) = 2_017_280 ps.

    Time terms (1_000_000 + 2_017_280) ps / 80 ps per byte = 37716 bytes; with 27708 + 84 bytes
    of frames the total is 65508 bytes.
    """
    assert headroom_bytes(100 * GBPS, 100, 9216, 2_017_280) == 65_508


def test_headroom_rounds_up_and_scales() -> None:
    # 1 ps at 100G is 1/80 byte: rounds up to one byte.
    base = headroom_bytes(100 * GBPS, 0, 1500, 0)
    assert base == 3 * 1520 + 84
    assert headroom_bytes(100 * GBPS, 0, 1500, 1) == base + 1
    # 400G: 20 ps per byte, so 1 us of response is 50000 bytes.
    assert headroom_bytes(400 * GBPS, 0, 1500, 1_000_000) == base + 50_000
    assert headroom_bytes(100 * GBPS, 0, 1500, 0, interface_delay_ps=800) == base + 10
    assert LINK_HEADROOM_BYTES == 10_716  # the stateful model's link, derived at the top
    with pytest.raises(TypeError):
        headroom_bytes(100e9, 100, 9216, 1_000_000)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        headroom_bytes(0, 100, 9216, 1_000_000)


# -- thresholds -------------------------------------------------------------------------------


def _fill_until_paused(mmu: Mmu, keys: list[tuple[int, int]], nbytes: int) -> None:
    i = 0
    while not any(mmu.paused(*k) for k in keys):
        assert mmu.admit(*keys[i % len(keys)], nbytes).admitted
        i += 1


def test_dynamic_threshold_worked_example() -> None:
    """Pool F = 90000 B, alpha = 1/8; a PG pauses when shared > floor(alpha * (F - used)).

    One congested PG settles at s = alpha * (F - s), s = alpha * F / (1 + alpha) = F / 9 = 10000:
    at s = 10000 the threshold is floor(80000 / 8) = 10000 (not above); the next 1000-byte packet
    would make 11000 > 10000, so it goes to headroom and XOFF is sent.
    Two congested PGs: s = alpha * (F - 2 s) -> s = F / 10 = 9000 each (the
    alpha * F / (1 + k * alpha) of sim/net/mmu.py).
    """
    cfg = MmuConfig(buffer_bytes=90_000 + 2 * 2 * 20_000, ports=2, pgs=2, lossless_pgs={0, 1},
                    headroom_bytes=20_000, xoff_mode="dynamic", alpha=Fraction(1, 8))
    assert cfg.shared_pool_bytes == 90_000
    one = Mmu(cfg)
    assert one.threshold_bytes() == 11_250
    _fill_until_paused(one, [(0, 0)], 1000)
    assert one.shared_pg_bytes(0, 0) == 10_000 and one.headroom_used_bytes(0, 0) == 1000
    assert one.threshold_bytes() == 10_000

    two = Mmu(cfg)
    _fill_until_paused(two, [(0, 0), (1, 1)], 1000)
    assert two.shared_pg_bytes(0, 0) == two.shared_pg_bytes(1, 1) == 9000


def test_static_threshold_same_example() -> None:
    """Static XOFF = 10000 B: every PG pauses at 10000 B of shared use, however many compete."""
    cfg = MmuConfig(buffer_bytes=90_000 + 2 * 2 * 20_000, ports=2, pgs=2, lossless_pgs={0, 1},
                    headroom_bytes=20_000, xoff_mode="static", xoff_bytes=10_000)
    for keys in ([(0, 0)], [(0, 0), (1, 1)]):
        mmu = Mmu(cfg)
        _fill_until_paused(mmu, keys, 1000)
        assert all(mmu.shared_pg_bytes(*k) == 10_000 for k in keys)
        assert mmu.threshold_bytes() == 10_000


def test_dynamic_threshold_pauses_bystander() -> None:
    """Another PG's arrivals shrink the dynamic threshold and pause a PG that did nothing."""
    cfg = MmuConfig(buffer_bytes=16_000, ports=2, pgs=2, lossless_pgs={0},
                    xoff_mode="dynamic", alpha=Fraction(1), headroom_bytes=3000)
    mmu = Mmu(cfg)  # pool 10000
    assert mmu.admit(0, 0, 4000).where == "shared"  # threshold 10000 -> 6000
    r = mmu.admit(1, 1, 2500)  # lossy; pool free 3500 -> threshold 3500 < 4000
    assert r.where == "shared"
    assert r.pause_changes == ((0, 0, XOFF),)
    assert mmu.release(1, 1, 2500, "shared") == ((0, 0, XON),)


def test_lossy_drops_at_threshold_never_pauses() -> None:
    cfg = MmuConfig(buffer_bytes=1000 * 8 + 7000 + 2000, ports=1, pgs=8, reserved_bytes=1000,
                    lossless_pgs={3}, headroom_bytes=2000, xoff_mode="static", xoff_bytes=5000)
    mmu = Mmu(cfg)
    wheres = [mmu.admit(0, 0, 1000) for _ in range(7)]
    assert [w.where for w in wheres] == ["reserved"] + ["shared"] * 5 + [None]
    assert wheres[-1].reason == "lossy_over_threshold"
    assert all(w.pause_changes == () for w in wheres) and not mmu.paused(0, 0)
    # another lossy PG: 2000 B left in the pool, the threshold allows 5000 -> the pool is full
    got = [mmu.admit(0, 1, 1000) for _ in range(4)]
    assert [g.where for g in got] == ["reserved", "shared", "shared", None]
    assert got[-1].reason == "shared_full" and not mmu.paused(0, 1)
    assert mmu.drops_by_reason == {"lossy_over_threshold": 1000, "shared_full": 1000}
    assert mmu.dropped_bytes == 2000 and mmu.offered_bytes == 11_000
    # a lossless PG goes to headroom (and pauses) when the pool is full
    assert mmu.admit(0, 3, 1000).where == "reserved"
    r = mmu.admit(0, 3, 1000)
    assert r.where == "headroom" and r.pause_changes == ((0, 3, XOFF),)


def test_hysteresis_static() -> None:
    cfg = MmuConfig(buffer_bytes=20_000, ports=1, pgs=1, lossless_pgs={0}, headroom_bytes=4000,
                    xoff_mode="static", xoff_bytes=5000, xon_delta_bytes=2000)
    mmu = Mmu(cfg)
    changes = [mmu.admit(0, 0, 1000).pause_changes for _ in range(6)]
    assert changes == [()] * 5 + [((0, 0, XOFF),)]
    assert mmu.admit(0, 0, 1000).where == "headroom"  # paused: arrivals go to headroom
    assert mmu.release(0, 0, 1000, "headroom") == ()
    assert mmu.release(0, 0, 1000, "headroom") == ()  # headroom empty, 5000 + 2000 > 5000
    assert mmu.condition(0, 0) == "hysteresis"
    assert mmu.release(0, 0, 1000, "shared") == ()  # 4000 + 2000 > 5000
    assert mmu.release(0, 0, 1000, "shared") == ((0, 0, XON),)  # 3000 + 2000 <= 5000
    assert mmu.admit(0, 0, 1000).pause_changes == ()  # 4000: in the band, stays XON
    assert mmu.condition(0, 0) == "hysteresis" and not mmu.paused(0, 0)


def test_empty_pg_resumes_even_if_threshold_below_delta() -> None:
    """HPCC's ``shared_used == 0`` clause: XOFF = 1000 < delta = 3000 must not pause forever."""
    cfg = MmuConfig(buffer_bytes=10_000, ports=1, pgs=1, lossless_pgs={0}, headroom_bytes=4000,
                    xoff_mode="static", xoff_bytes=1000, xon_delta_bytes=3000)
    mmu = Mmu(cfg)
    assert mmu.admit(0, 0, 1000).where == "shared"
    assert mmu.admit(0, 0, 1000).pause_changes == ((0, 0, XOFF),)
    assert mmu.release(0, 0, 1000, "headroom") == ()  # 1000 shared + 3000 > 1000
    assert mmu.release(0, 0, 1000, "shared") == ((0, 0, XON),)


def test_transition_table_is_total() -> None:
    for state in (XON, XOFF):
        for cond in ("above", "hysteresis", "below_xon"):
            assert (state, cond) in PFC_TRANSITIONS
    assert PFC_TRANSITIONS[(XON, "above")] == (XOFF, XOFF)
    assert PFC_TRANSITIONS[(XOFF, "below_xon")] == (XON, XON)


# -- egress and validation --------------------------------------------------------------------


def test_egress_accounting() -> None:
    mmu = Mmu(MmuConfig(buffer_bytes=1000, ports=2, pgs=8, xoff_mode="static", xoff_bytes=0))
    assert mmu.egress_enqueue(1, 3, 1500) == 1500
    assert mmu.egress_enqueue(1, 3, 500) == 2000
    assert mmu.egress_bytes(1, 3) == 2000 and mmu.egress_bytes(0, 3) == 0
    assert mmu.egress_dequeue(1, 3, 1500) == 500
    with pytest.raises(ValueError, match=r"egress \(1, 3\) holds 500 B, cannot dequeue 501"):
        mmu.egress_dequeue(1, 3, 501)
    with pytest.raises(ValueError):
        mmu.egress_bytes(2, 0)
    from sim.units import MAX_BYTES

    with pytest.raises(ValueError, match=r"egress \(1, 3\) would hold more than"):
        mmu.egress_enqueue(1, 3, MAX_BYTES)


def test_release_and_admit_errors() -> None:
    mmu = Mmu(MmuConfig(buffer_bytes=1000, ports=1, pgs=8, xoff_mode="static", xoff_bytes=500))
    with pytest.raises(ValueError):
        mmu.release(0, 0, 1, "shared")
    with pytest.raises(ValueError):
        mmu.release(0, 0, 0, "nowhere")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        mmu.admit(1, 0, 100)
    with pytest.raises(ValueError):
        mmu.admit(0, 0, -1)


@pytest.mark.parametrize(
    "kwargs, exc",
    [
        ({"buffer_bytes": 100, "ports": 1, "xoff_bytes": 0, "xoff_mode": "magic"}, ValueError),
        ({"buffer_bytes": 100, "ports": 1}, ValueError),  # static without xoff_bytes
        ({"buffer_bytes": 100, "ports": 0, "xoff_bytes": 0}, ValueError),
        ({"buffer_bytes": 100, "ports": 1, "pgs": 9, "xoff_bytes": 0}, ValueError),
        ({"buffer_bytes": 100, "ports": 1, "lossless_pgs": {8}, "xoff_bytes": 0}, ValueError),
        ({"buffer_bytes": 100.0, "ports": 1, "xoff_bytes": 0}, TypeError),
        ({"buffer_bytes": 100, "ports": 1, "xoff_mode": "dynamic", "alpha": 0.5}, TypeError),
        ({"buffer_bytes": 100, "ports": 1, "xoff_mode": "dynamic", "alpha": 0}, ValueError),
        ({"buffer_bytes": 100, "ports": 1, "reserved_bytes": 20, "xoff_bytes": 0}, ValueError),
    ],
)
def test_config_validation(kwargs, exc) -> None:
    with pytest.raises(exc):
        MmuConfig(**kwargs)

"""The benchmarks' workloads: the Poisson arrivals every one-port model is fed, each
model's checked counts, and the fabric-scale bench's quick run.  No timing is asserted."""

from __future__ import annotations

import importlib.util
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import scale_bench, sim_bench
from bench.sim_bench import (
    POISSON_MODELS,
    SER_PS,
    _merged,
    check_poisson,
    heapq_poisson,
    ours_poisson,
    poisson_arrivals,
)


def _model_params():
    for name, fn, module in POISSON_MODELS:
        marks = []
        if module is not None and importlib.util.find_spec(module) is None:
            marks = [pytest.mark.skip(reason=f"{module} not installed (pip install ns-py simpy)")]
        yield pytest.param(fn, id=name, marks=marks)


def test_poisson_arrivals_are_seeded_sorted_and_at_the_load() -> None:
    a = poisson_arrivals(20_000)
    assert a == poisson_arrivals(20_000)  # same seed, same times
    assert a != poisson_arrivals(20_000, seed=sim_bench.POISSON_SEED + 1)
    assert len(a) == 16 and sum(map(len, a)) == 20_000
    merged = [t for t, _ in _merged(a)]
    assert all(b > a_ for a_, b in itertools.pairwise(merged))  # no ties, all ints
    assert all(isinstance(t, int) for t in merged)
    mean_gap = merged[-1] / len(merged)
    assert abs(mean_gap / (SER_PS / 0.9) - 1) < 0.03  # load 0.9 of the port (n = 20k: ~0.7 %)
    assert min(map(len, a)) > 20_000 / 16 * 0.85  # every flow gets about its share


@pytest.mark.parametrize("model", _model_params())
def test_every_model_is_fed_the_same_arrivals_and_delivers_them(model) -> None:
    arrivals = poisson_arrivals(3_000)
    seen: list = []
    per_flow, hops = model(arrivals, record=seen)
    check_poisson(model.__name__, arrivals, per_flow, hops)
    # ours and the heapq floor in integer ps; the peers in float seconds on the same times
    got = [(t if isinstance(t, int) else round(t * 1e12), f) for t, f in seen]
    assert got == _merged(arrivals)


def test_check_poisson_refuses_a_lost_frame() -> None:
    arrivals = poisson_arrivals(500)
    per_flow, hops = ours_poisson(arrivals)
    check_poisson("ours", arrivals, per_flow, hops)
    per_flow[3] -= 1
    with pytest.raises(AssertionError, match="per flow"):
        check_poisson("ours", arrivals, per_flow, hops - 1)


@given(n=st.integers(1, 400), flows=st.integers(1, 16), load=st.floats(0.2, 1.5),
       seed=st.integers(0, 2**32))
def test_ours_matches_the_heapq_floor_on_any_arrivals(n, flows, load, seed) -> None:
    arrivals = poisson_arrivals(n, flows=flows, load=load, seed=seed)
    a, b = ours_poisson(arrivals), heapq_poisson(arrivals)
    check_poisson("ours", arrivals, *a)
    assert a == b


def test_run_poisson_prints_the_table(capsys) -> None:
    rows = sim_bench.run_poisson(2_000, 1, only={"ours", "heapq"})
    sim_bench.print_fifo(rows, 2_000, 1, sim_bench.poisson_title(2_000))
    out = capsys.readouterr().out
    assert "Single FIFO, Poisson" in out and "vs heapq" in out
    assert set(rows) == {"ours source->port->sink", "heapq floor"}


def test_scale_bench_quick_runs(capsys) -> None:
    assert scale_bench.main(["--quick"]) == 0
    out = capsys.readouterr().out
    assert "| leaf-spine | 8 |" in out and "| leaf-spine | 64 |" in out
    assert "pending events" in out  # the heap size column (it drives the per-hop cost)


# ------------------------------------------------------------- per-hop cost: cancelled timers


def _refresh_storm(eng, ports: int = 64, refreshes: int = 200) -> list[tuple[int, int]]:
    """The PFC pattern: every port's pause expiry (far ahead) is cancelled and re-armed by
    each refresh.  Returns the (time, port) of every expiry that fired."""
    from sim.engine import Engine

    assert isinstance(eng, Engine)
    fired: list[tuple[int, int]] = []
    expiry = [None] * ports

    def expire(p: int) -> None:
        fired.append((eng.now_ps, p))

    def refresh(p: int, left: int) -> None:
        if expiry[p] is not None:
            expiry[p].cancel()
        expiry[p] = eng.schedule_in(335_000_000, expire, p)
        if left:
            eng.call_in(1_000 + 7 * p, refresh, p, left - 1)

    for p in range(ports):
        eng.call_at(p, refresh, p, refreshes)
    return fired


def test_cancelled_timers_do_not_pile_up_in_the_heap() -> None:
    from sim.engine import Engine

    eng = Engine()
    fired = _refresh_storm(eng)
    most = 0
    while eng.run(until_ps=eng.now_ps + 50_000) or len(eng.pending_args()):
        most = max(most, len(eng))
        if not fired and not len(eng.pending_args()):
            break
    assert sorted(p for _, p in fired) == list(range(64))
    # 64 x 201 = 12,864 timers scheduled, 12,800 cancelled 335 us before their time: without
    # compaction the heap holds them all (the 2,048-host leaf-spine's problem)
    assert most <= 2100, most


@given(seed=st.integers(0, 2**32), ops=st.integers(200, 1_500))
def test_compaction_keeps_the_event_order(seed, ops) -> None:
    """The same random program (timers scheduled, cancelled from callbacks, fire-and-forget
    calls, equal times and priorities) fires the same callbacks in the same order with the
    heap compacted as with compaction switched off."""
    import random

    from sim.engine import Engine

    def program(compact: bool) -> tuple[list, int]:
        rng = random.Random(seed)
        eng = Engine()
        if not compact:
            eng._compact_at = 1 << 62
        log: list = []
        timers: list = []
        left = [ops]
        most = [0]

        def fire(tag: int) -> None:
            log.append((eng.now_ps, tag))
            most[0] = max(most[0], len(eng))
            for _ in range(2):
                if left[0] <= 0:
                    return
                left[0] -= 1
                r = rng.random()
                near = rng.random() < 0.3  # else far ahead, like a pause expiry
                at = eng.now_ps + rng.randrange(0, 2_000) if near else \
                    eng.now_ps + rng.randrange(10**6, 10**6 + 5_000)
                prio = rng.choice((-1, 0, 0, 1))
                if r < 0.45:
                    timers.append(eng.schedule(at, fire, left[0], priority=prio))
                elif r < 0.9 and timers:  # mostly a recent one: likely still pending
                    timers.pop(rng.randrange(max(0, len(timers) - 20), len(timers))).cancel()
                else:
                    eng.call_at(at, fire, left[0], priority=prio)

        for i in range(100):
            timers.append(eng.schedule(rng.randrange(0, 500), fire, -i))
        eng.run()
        return log, most[0]

    import sim.engine

    least = sim.engine._COMPACT_MIN
    sim.engine._COMPACT_MIN = 16  # compact small heaps too: many compactions per example
    try:
        a, most_a = program(True)
        b, most_b = program(False)
    finally:
        sim.engine._COMPACT_MIN = least
    assert most_a <= most_b  # never a larger heap
    assert a == b

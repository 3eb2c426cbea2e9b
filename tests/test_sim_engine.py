"""Simulator core: engine ordering and determinism, units, packets, events and tracers."""

import io
import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import wire
from sim.engine import Engine, Timer
from sim.events import (
    EVENT_TYPES,
    CEMarked,
    CNPSent,
    DeadlockFound,
    Dequeued,
    Dropped,
    Enqueued,
    PauseExpired,
    PauseReceived,
    PauseSent,
    RateChanged,
    TxnPacked,
    event_from_dict,
)
from sim.packet import SimPacket
from sim.trace import JsonlTracer, ListTracer, NullTracer, TeeTracer, Tracer
from sim.units import (
    PS_PER_S,
    frame_ser_time_ps,
    gbps,
    prop_delay_ps,
    quantum_ps,
    ser_time_ps,
    wire_bytes,
)

# ---------------------------------------------------------------------------------------------
# engine


def _random_run(seed: int) -> tuple[list, list]:
    """A run whose schedule depends on the engine RNG; returns (order of events, draws)."""
    eng = Engine(seed)
    order: list = []
    draws: list = []

    def fire(name: int) -> None:
        order.append((eng.now_ps, name))
        draw = eng.rng.randrange(1000)
        draws.append(draw)
        if len(order) < 200:
            eng.schedule_in(draw % 7 * 10, fire, draw, priority=draw % 3)

    for i in range(5):
        eng.schedule(0, fire, i)
    eng.run()
    return order, draws


def test_same_seed_same_run() -> None:
    assert _random_run(7) == _random_run(7)
    assert _random_run(7) != _random_run(8)


def test_ties_by_priority_then_insertion() -> None:
    eng = Engine()
    seen: list[str] = []
    eng.schedule(100, seen.append, "late")
    eng.schedule(50, seen.append, "b0", priority=1)
    eng.schedule(50, seen.append, "a0", priority=0)
    eng.schedule(50, seen.append, "b1", priority=1)
    eng.schedule(50, seen.append, "a1", priority=0)
    eng.schedule(50, seen.append, "first", priority=-1)
    assert eng.run() == 6
    assert seen == ["first", "a0", "a1", "b0", "b1", "late"]
    assert eng.now_ps == 100
    assert eng.events_processed == 6


def test_same_time_scheduled_during_run_goes_after_pending() -> None:
    eng = Engine()
    seen: list[str] = []

    def first() -> None:
        seen.append("first")
        eng.schedule_in(0, seen.append, "child")

    eng.schedule(10, first)
    eng.schedule(10, seen.append, "sibling")
    eng.run()
    assert seen == ["first", "sibling", "child"]


def test_cancel() -> None:
    eng = Engine()
    seen: list[int] = []
    t1 = eng.schedule(10, seen.append, 1)
    eng.schedule(20, seen.append, 2)
    t3 = eng.schedule(30, seen.append, 3)
    assert isinstance(t1, Timer) and not t1.cancelled
    t1.cancel()
    t1.cancel()  # idempotent
    assert t1.cancelled
    assert eng.peek_ps() == 20
    eng.schedule(25, t3.cancel)  # cancel from inside the run
    assert eng.run() == 2
    assert seen == [2]
    assert eng.peek_ps() is None
    assert eng.now_ps == 25


def test_run_until() -> None:
    eng = Engine()
    seen: list[int] = []
    for t in (10, 20, 30):
        eng.schedule(t, seen.append, t)
    assert eng.run(until_ps=20) == 2  # the event exactly at until_ps runs
    assert seen == [10, 20]
    assert eng.now_ps == 20
    assert eng.run(until_ps=25) == 0
    assert eng.now_ps == 25  # clock advances to until_ps even with nothing to do
    assert eng.peek_ps() == 30
    assert eng.run(until_ps=1000) == 1
    assert eng.now_ps == 1000
    with pytest.raises(ValueError):
        eng.run(until_ps=999)


def test_run_max_events() -> None:
    eng = Engine()
    for t in range(10):
        eng.schedule(t * 10, lambda: None)
    assert eng.run(until_ps=1000, max_events=3) == 3
    assert eng.now_ps == 20  # stopped by max_events: the clock stays at the last event
    assert eng.run(max_events=0) == 0
    assert eng.run() == 7
    assert eng.events_processed == 10
    assert eng.now_ps == 90


def test_float_time_rejected() -> None:
    eng = Engine()
    with pytest.raises(TypeError):
        eng.schedule(1.0, print)
    with pytest.raises(TypeError):
        eng.schedule_in(0.5, print)
    with pytest.raises(TypeError):
        eng.run(until_ps=1e3)
    with pytest.raises(TypeError):
        eng.schedule(True, print)
    eng.schedule(np.int64(5), print)  # integer types other than int are fine
    assert eng.peek_ps() == 5


def test_past_rejected() -> None:
    eng = Engine()
    eng.schedule(100, lambda: None)
    eng.run()
    with pytest.raises(ValueError):
        eng.schedule(99, print)
    with pytest.raises(ValueError):
        eng.schedule_in(-1, print)
    eng.schedule(100, print)  # now is allowed


def test_run_not_reentrant() -> None:
    eng = Engine()
    errors: list[Exception] = []

    def nested() -> None:
        try:
            eng.run()
        except RuntimeError as exc:
            errors.append(exc)

    eng.schedule(1, nested)
    eng.run()
    assert len(errors) == 1


# ---------------------------------------------------------------------------------------------
# units


@pytest.mark.parametrize(("g", "ps"), [(100, 80), (200, 40), (400, 20), (800, 10)])
def test_byte_time_exact(g: int, ps: int) -> None:
    assert ser_time_ps(1, int(g * 1e9)) == ps
    assert ser_time_ps(1, gbps(g)) == ps
    assert ser_time_ps(1500, gbps(g)) == 1500 * ps


def test_wire_bytes() -> None:
    assert wire_bytes(1500) == 1524
    assert wire_bytes(60) == 84
    assert wire_bytes(0) == 84  # padded to the 64-byte minimum
    assert wire_bytes(61) == 85
    assert frame_ser_time_ps(1500, gbps(100)) == 121920
    assert frame_ser_time_ps(60, gbps(400)) == 84 * 20


def test_quantum_and_prop_delay() -> None:
    assert quantum_ps(gbps(100)) == 5120
    assert quantum_ps(gbps(400)) == 1280
    assert quantum_ps(gbps(800)) == 640
    assert prop_delay_ps(3) == 15000
    assert prop_delay_ps(30, ps_per_m=4600) == 138000
    assert prop_delay_ps(0.5) == 2500
    assert gbps(2.5) == 2_500_000_000
    assert PS_PER_S == 10**12


@pytest.mark.parametrize("bad", [0, -1])
def test_bad_rate(bad: int) -> None:
    with pytest.raises(ValueError):
        ser_time_ps(1, bad)
    with pytest.raises(ValueError):
        frame_ser_time_ps(1, bad)
    with pytest.raises(ValueError):
        quantum_ps(bad)
    with pytest.raises(ValueError):
        gbps(bad)


@given(st.integers(0, 10**6), st.integers(1, 2 * 10**12))
def test_ser_time_rounds_up(nbytes: int, rate_bps: int) -> None:
    t = ser_time_ps(nbytes, rate_bps)
    exact = nbytes * 8 * PS_PER_S
    assert t * rate_bps >= exact
    assert t == 0 or (t - 1) * rate_bps < exact


# ---------------------------------------------------------------------------------------------
# packet


def test_packet_mark_ce_rewrites_frame() -> None:
    frame = wire.build({"eth": {}, "ipv4": {"ecn": 2}, "udp": {}, "bth": {}})
    pkt = SimPacket(1, 0, len(frame), flow=3, tc=3, ecn=2, frame=frame)
    assert isinstance(pkt.frame, bytearray)
    assert pkt.ecn_capable
    assert pkt.mark_ce()
    assert pkt.ecn == 3
    assert wire.get_ecn(pkt.frame) == 3
    assert wire.dissect(bytes(pkt.frame)).to_dict()["ipv4"]["checksum_ok"]


def test_packet_not_ect_never_marked() -> None:
    pkt = SimPacket(2, 0, 100)
    assert not pkt.ecn_capable
    assert not pkt.mark_ce()
    assert pkt.ecn == 0
    with pytest.raises(AttributeError):
        pkt.queue_entry_ps = 5  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        SimPacket(3, 0, 100, tc=8)


# ---------------------------------------------------------------------------------------------
# events and tracers

SAMPLES = [
    Enqueued(1, 2, 3, 4, 5, 6, 1500, 3000),
    Dequeued(2, 2, 3, 4, 5, 6, 1500, 1500),
    Dropped(3, 2, 3, 4, 5, 6, 1500, "buffer_full"),
    CEMarked(4, 2, 3, 4, 5, 6),
    PauseSent(5, 2, 3, 3, 0xFFFF),
    PauseReceived(6, 1, 0, 3, 0xFFFF),
    PauseExpired(7, 1, 0, 3),
    CNPSent(8, 9, 6),
    RateChanged(9, 0, 6, 50_000_000_000, 100_000_000_000, 0.5),
    TxnPacked(10, 1, 2, 0, 4, 1024),
    DeadlockFound(11, ((1, 0, 3), (2, 1, 3)), (6, 7)),
]


def test_samples_cover_every_event_type() -> None:
    assert [type(e) for e in SAMPLES] == list(EVENT_TYPES)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: type(e).__name__)
def test_event_to_dict_json_round_trip(event) -> None:
    d = event.to_dict()
    assert d["event"] == type(event).__name__
    assert list(d)[1] == "t_ps"
    assert json.loads(json.dumps(d)) == d
    assert event_from_dict(json.loads(json.dumps(d))) == event
    with pytest.raises(AttributeError):
        event.t_ps = 0


def test_jsonl_tracer(tmp_path) -> None:
    path = tmp_path / "trace.jsonl"
    with JsonlTracer(path) as tracer:
        for e in SAMPLES:
            tracer.emit(e)
    lines = path.read_text().splitlines()
    assert [json.loads(line) for line in lines] == [e.to_dict() for e in SAMPLES]
    buf = io.StringIO()
    with JsonlTracer(buf) as tracer:
        tracer.emit(SAMPLES[0])
    assert not buf.closed
    assert json.loads(buf.getvalue()) == SAMPLES[0].to_dict()


def test_list_tracer_to_arrays_and_tee() -> None:
    lst = ListTracer()
    tracer = TeeTracer(NullTracer(), lst)
    for t in range(5):
        tracer.emit(Enqueued(t * 80, 1, 2, 3, t, 9, 1000 + t, 1000 * (t + 1)))
        tracer.emit(RateChanged(t * 80, 0, 9, 10**11, 10**11, t / 4))
    assert all(isinstance(t, Tracer) for t in (lst, tracer, NullTracer()))
    assert len(lst.of_type(Enqueued)) == 5
    arrays = lst.to_arrays(Enqueued)
    assert set(arrays) == {
        "t_ps", "node", "port", "queue", "packet_id", "flow", "nbytes", "queue_bytes",
    }
    assert arrays["t_ps"].dtype == np.int64
    assert arrays["t_ps"].tolist() == [0, 80, 160, 240, 320]
    assert arrays["queue_bytes"].tolist() == [1000, 2000, 3000, 4000, 5000]
    rates = lst.to_arrays(RateChanged)
    assert rates["alpha"].dtype == np.float64
    assert rates["alpha"].tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    dropped = lst.to_arrays(Dropped)
    assert "reason" not in dropped and dropped["t_ps"].size == 0
    assert set(lst.to_arrays(DeadlockFound)) == {"t_ps"}

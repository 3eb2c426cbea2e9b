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
    DeadlockCleared,
    DeadlockFound,
    Dequeued,
    Dropped,
    Enqueued,
    PauseExpired,
    PauseReceived,
    PauseSent,
    QpError,
    RateChanged,
    TxnPacked,
    WatchdogRestored,
    WatchdogTriggered,
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


def test_call_at_in_interleave_with_timers_by_priority_then_insertion() -> None:
    """call_at/call_in (no handle) share the (time, priority, insertion) order with timers."""
    eng = Engine()
    seen: list[str] = []
    assert eng.call_at(50, seen.append, "c0") is None
    eng.schedule(50, seen.append, "t0")
    eng.call_at(50, seen.append, "c1", priority=-1)
    eng.schedule(50, seen.append, "t1", priority=-1)
    eng.call_in(50, seen.append, "c2")
    eng.call_at(10, seen.append, "early")
    eng.schedule(100, seen.append, "late")
    eng.call_in(100, seen.append, "late2", priority=1)

    def child() -> None:
        seen.append("parent")
        eng.call_in(0, seen.append, "child")  # same time: after everything already pending

    eng.call_at(50, child)
    eng.schedule(50, seen.append, "t2")
    assert eng.run() == 11
    assert seen == ["early", "c1", "t1", "c0", "t0", "c2", "parent", "t2", "child", "late",
                    "late2"]
    assert eng.events_processed == 11
    assert eng.now_ps == 100


def test_call_at_in_checks_like_schedule() -> None:
    eng = Engine()
    with pytest.raises(TypeError):
        eng.call_at(1.0, print)
    with pytest.raises(TypeError):
        eng.call_in(0.5, print)
    with pytest.raises(TypeError):
        eng.call_at(True, print)
    eng.call_at(np.int64(5), lambda: None)
    eng.call_in(np.int64(5), lambda: None, priority=np.int64(2))
    assert eng.peek_ps() == 5
    eng.run()
    with pytest.raises(ValueError):
        eng.call_at(4, print)
    with pytest.raises(ValueError):
        eng.call_in(-1, print)


def test_call_events_with_until_max_events_and_cancelled_timers() -> None:
    eng = Engine()
    seen: list[int] = []
    for t in range(10):
        eng.call_at(t * 10, seen.append, t)
    dead = eng.schedule(35, seen.append, -1)
    dead.cancel()
    eng.schedule(0, eng.call_in, 5, seen.append, 100)  # a call_in from inside the run
    # 0, the timer running call_in, 100 (at 5), 10, 20, 30, 40; the cancelled timer not counted
    assert eng.run(until_ps=40) == 7
    assert seen == [0, 100, 1, 2, 3, 4]
    assert eng.now_ps == 40
    assert eng.run(max_events=2) == 2
    assert eng.now_ps == 60
    assert eng.peek_ps() == 70
    assert eng.run(until_ps=75) == 1
    assert eng.peek_ps() == 80 and len(eng) == 2
    assert eng.run() == 2
    assert seen == [0, 100, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert eng.events_processed == 12


def test_times_past_max_ps_are_refused_and_until_past_it_runs_everything() -> None:
    """Times are int64 ps (sim.units.MAX_PS, about 106 days), in both cores: a later time is
    a ValueError naming the limit; an ``until_ps`` past it stops nothing and leaves the clock at
    MAX_PS."""
    from sim.units import MAX_PS

    eng = Engine()
    seen: list[int] = []
    for call in (lambda: eng.call_at(MAX_PS + 1, seen.append, 1),
                 lambda: eng.schedule(1 << 64, seen.append, 0),
                 lambda: eng.call_in(MAX_PS + 1, seen.append, 2),
                 lambda: eng.schedule_in(1 << 70, seen.append, 3),
                 lambda: eng._push(MAX_PS + 1, seen.append, (4,))):
        with pytest.raises(ValueError, match="latest simulator time"):
            call()
    with pytest.raises(ValueError, match="priority must fit"):
        eng.call_at(5, seen.append, 5, priority=1 << 63)
    eng.call_at(MAX_PS, seen.append, 6)
    eng.schedule(7, seen.append, 7)
    assert len(eng) == 2
    assert eng.run(until_ps=1 << 70) == 2
    assert seen == [7, 6] and eng.now_ps == MAX_PS  # the clock stops at its last tick


def _incast_trace(cut_through: bool) -> tuple[list, dict, int]:
    """A PFC + ECN incast with mixed classes, sizes, on/off traffic and ACKs; every port's
    cut-through enqueue (``Port._rr_fast``) on or off."""
    from sim.fabric import star
    from sim.net.mmu import MmuConfig
    from sim.net.switch import EcnConfig
    from sim.nic.host import Flow

    rate = gbps(100)
    cfg = MmuConfig(buffer_bytes=400_000, ports=6, reserved_bytes=2000, headroom_bytes=40_000,
                    lossless_pgs=frozenset({3}), xoff_mode="static", xoff_bytes=20_000,
                    xon_delta_bytes=2000)
    tracer = ListTracer()
    fab, recv, hosts = star(4, rate, 50_000, cfg, seed=3, tracer=tracer,
                            ecn=EcnConfig(kmin_bytes=5_000, kmax_bytes=100_000, pmax=0.2),
                            host_kw={"ack_every": 4})
    for node in fab.nodes.values():
        for port in node.ports.values():
            port._rr_fast = cut_through and port.scheduler == "rr"
    for i, h in enumerate(hosts):
        fab.add_flow(Flow(i, h, recv, rate, tc=3 if i % 2 else 1,
                          packet_bytes=(1082, 300, 700, 1500)[i], start_ps=i * 7_000,
                          on_ps=30_000_000 if i == 2 else None,
                          off_ps=20_000_000 if i == 2 else None))
    events = fab.run(300_000_000)
    return [e.to_dict() for e in tracer.events], fab.summary(), events


def test_port_cut_through_enqueue_changes_nothing() -> None:
    """The idle-port fast path of Port.enqueue gives the same trace, summary and event count
    as queueing the frame and picking it."""
    fast = _incast_trace(True)
    slow = _incast_trace(False)
    assert fast == slow
    kinds = {e["event"] for e in fast[0]}
    assert {"PauseSent", "PauseReceived", "CEMarked", "Enqueued", "Dequeued"} <= kinds


@pytest.mark.parametrize("how", ["set_rate", "attribute"])
def test_port_rate_change_reaches_cached_times(how) -> None:
    """A port keeps serialisation and pause times per size and quanta; after its rate changes
    (``set_rate``, or ``rate_bps`` set directly) frames and pauses take the new rate's."""
    from sim.net.port import Port
    from sim.units import frame_ser_time_ps
    from wire.pfc import quanta_to_ps

    class Sink:
        node_id = 1

        def __init__(self) -> None:
            self.at: list[int] = []

        def receive(self, port: int, pkt: SimPacket) -> None:
            self.at.append(eng.now_ps)

    eng = Engine()
    port = Port(eng, 0, 0, 100 * 10**9)
    sink = Sink()
    port.connect(sink, 0, 0)
    port.enqueue(SimPacket(1, 0, 1082))
    eng.run()
    port.pause(3, 100)
    assert port._paused_until_ps[3] == eng.now_ps + quanta_to_ps(100, 100 * 10**9)
    eng.run()
    if how == "set_rate":
        port.set_rate(25 * 10**9)
    else:
        port.rate_bps = 25 * 10**9
    start = eng.now_ps
    port.enqueue(SimPacket(2, start, 1082))
    eng.run()
    assert sink.at == [frame_ser_time_ps(1082, 100 * 10**9),
                       start + frame_ser_time_ps(1082, 25 * 10**9)]
    assert port.ser_time_ps(1082) == frame_ser_time_ps(1082, 25 * 10**9)
    port.pause(3, 100)
    assert port._paused_until_ps[3] == eng.now_ps + quanta_to_ps(100, 25 * 10**9)


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


@pytest.mark.parametrize("caller", [(700, 10, 10), (700, 10, 9), (200_000, 5, 300), (0, 10, 10),
                                    (100_000, 50, 100)])
def test_run_raises_gc_thresholds_and_gives_the_callers_back(caller) -> None:
    """While Engine.run runs, the collector's thresholds are at least GC_THRESHOLDS, each one
    (a caller's higher value is kept, a threshold of 0, automatic collection off, is left
    alone); the caller's come back afterwards, also when a callback raises."""
    import gc

    from sim.engine import GC_THRESHOLDS

    expect = caller if caller[0] == 0 else tuple(map(max, caller, GC_THRESHOLDS))
    old = gc.get_threshold()
    seen: list[tuple[int, ...]] = []
    gc.set_threshold(*caller)
    try:
        eng = Engine()
        eng.call_at(5, lambda: seen.append(gc.get_threshold()))
        eng.run(until_ps=10)
        assert seen == [expect] and gc.get_threshold() == caller

        def fail() -> None:
            seen.append(gc.get_threshold())
            raise KeyError("boom")

        eng.call_at(20, fail)
        with pytest.raises(KeyError):
            eng.run(max_events=5)
        assert seen == [expect, expect] and gc.get_threshold() == caller
    finally:
        gc.set_threshold(*old)


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


def test_packet_trusted_matches_validated_constructor() -> None:
    kw = dict(flow=7, tc=3, ecn=2, src=1, dst=9)
    a = SimPacket(5, 100, 1082, **kw)
    b = SimPacket.trusted(5, 100, 1082, 7, 3, 2, 1, 9)
    assert type(b) is SimPacket
    assert repr(a) == repr(b)
    assert all(getattr(a, k) == getattr(b, k) for k in SimPacket.__slots__)
    frame = bytearray(b"\x00" * 60)
    c = SimPacket.trusted(6, 0, 60, 0, 7, 0, 1, 2, frame, 2)
    assert c.frame is frame and c.hops == 2  # stored as given, not copied
    with pytest.raises(ValueError):
        SimPacket(1, 0, 60, tc=8)  # the public constructor still validates


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
    DeadlockFound(11, ((1, 0, 3), (2, 1, 3)), (6, 7), 5),
    DeadlockCleared(12, ((1, 0, 3), (2, 1, 3))),
    WatchdogTriggered(13, 1, 0, 3, "drop"),
    WatchdogRestored(14, 1, 0, 3, 42),
    QpError(15, 0, 6, 7, 3),
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


def _event_like(data, sample):
    """``sample``'s event type with every int, float and str field drawn anew (big and
    negative ints, bools, NaN and infinities, quotes and non-ASCII text)."""
    import dataclasses

    values = {}
    for f in dataclasses.fields(sample):
        v = getattr(sample, f.name)
        if isinstance(v, bool) or isinstance(v, int):
            v = data.draw(st.one_of(st.integers(-(2**70), 2**70), st.booleans()))
        elif isinstance(v, float):
            v = data.draw(st.floats(allow_nan=True, allow_infinity=True))
        elif isinstance(v, str):
            v = data.draw(st.text())
        values[f.name] = v
    return type(sample)(**values)


@given(data=st.data())
def test_jsonl_tracer_lines_are_the_json_of_to_dict(data) -> None:
    """The tracer writes a line field by field (no dict built); it is exactly the JSON
    encoder's text of ``to_dict()``, whatever the values."""
    events = [_event_like(data, e) for e in SAMPLES]
    buf = io.StringIO()
    tracer = JsonlTracer(buf)
    for e in events:
        tracer.emit(e)
    enc = json.JSONEncoder(separators=(",", ":")).encode
    assert buf.getvalue() == "".join(enc(e.to_dict()) + "\n" for e in events)


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
    assert set(lst.to_arrays(DeadlockFound)) == {"t_ps", "onset_ps"}


def test_pending_args_lists_live_events_only() -> None:
    eng = Engine()
    eng.call_in(5, lambda *a: None, "a", 1)
    t = eng.schedule_in(7, lambda *a: None, "b")
    eng.schedule_in(9, lambda *a: None, "c")
    t.cancel()
    assert sorted(eng.pending_args()) == [("a", 1), ("c",)]
    eng.run()
    assert eng.pending_args() == []

"""No event object is built when nothing reads it (sim.trace.Interest).

- a tracer that wants nothing (``wants`` empty, NullTracer) gets no emit call at all;
- the runner's Recorder gets queue depths as samples, so no Enqueued / Dequeued is built,
  and its outputs (events.jsonl, timeseries.npz) are those of the object path;
- a tracer declaring nothing still sees every event, as before.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.events import Dequeued, Enqueued, Event, PauseSent, RateChanged
from sim.scenarios.loader import build
from sim.study import results
from sim.study.results import Recorder, run_scenario
from sim.trace import NOTHING, Interest, ListTracer, NullTracer, TeeTracer, interest

#: A short incast with PFC, ECN and DCQCN: queues, pauses, CE marks, CNPs and rate changes.
_PARAMS = {"duration_ms": 0.05, "cc": "dcqcn", "xoff_kb": 5.0}


class _Counting:
    """Counts emit calls; ``wants`` as given (None: not declared)."""

    def __init__(self, wants=None) -> None:
        if wants is not None:
            self.wants = wants
        self.calls = 0
        self.types: set[type] = set()

    def emit(self, event: Event) -> None:
        self.calls += 1
        self.types.add(type(event))


def _run_library(tracer, params=_PARAMS) -> None:
    sc = build("incast", params, None)
    sc.tracer_slot.target = tracer
    sc.fabric.run(sc.duration_ps)


@pytest.fixture
def constructions(monkeypatch):
    """Counts of Enqueued / Dequeued objects built (wherever the class is named from)."""
    counts = {Enqueued: 0, Dequeued: 0}
    for cls in counts:
        orig = cls.__init__

        def counted(self, *a, _orig=orig, _cls=cls, **k):
            counts[_cls] += 1
            _orig(self, *a, **k)

        monkeypatch.setattr(cls, "__init__", counted)
    return counts


def test_tracer_that_wants_nothing_gets_no_emit_call(constructions):
    quiet = _Counting(wants=NOTHING)
    _run_library(quiet)
    assert quiet.calls == 0
    assert constructions == {Enqueued: 0, Dequeued: 0}
    loud = _Counting()  # declares nothing: reads everything, as before
    _run_library(loud)
    assert {Enqueued, Dequeued, PauseSent, RateChanged} <= loud.types
    assert constructions[Enqueued] > 0 and constructions[Dequeued] > 0


def test_empty_slot_builds_no_queue_events(constructions):
    _run_library(None)
    assert constructions == {Enqueued: 0, Dequeued: 0}


def test_null_tracer_reads_nothing():
    i = interest(NullTracer())
    assert i.types == NOTHING and i.enqueued is None and i.dequeued is None


def test_recorder_path_builds_no_queue_events(tmp_path, constructions):
    out = tmp_path / "o"
    run_scenario("incast", _PARAMS, out_dir=out, plots=False, progress=False)
    assert constructions == {Enqueued: 0, Dequeued: 0}
    with np.load(out / "timeseries.npz") as z:
        series = [k for k in z.files if k.startswith("queue_") and k.endswith("_bytes")]
        assert series and sum(len(z[k]) for k in series) > 100  # the depths are all kept


def _outputs(out: os.PathLike) -> tuple[bytes, dict[str, np.ndarray]]:
    with open(os.path.join(out, "events.jsonl"), "rb") as f:
        log = f.read()
    with np.load(os.path.join(out, "timeseries.npz")) as z:
        arrays = {k: z[k] for k in z.files}
    return log, arrays


@given(cc=st.sampled_from(["none", "dcqcn"]), pfc=st.booleans(),
       seed=st.integers(0, 3))
def test_recorder_outputs_equal_the_object_path(tmp_path_factory, cc, pfc, seed):
    """Samples (on_enqueued / on_dequeued, only the read types built) and the old path
    (every event built and passed to Recorder.emit) write the same events.jsonl, in the same
    order, and the same time series."""
    params = {**_PARAMS, "cc": cc, "pfc": pfc, "seed": seed, "duration_ms": 0.02}
    fast = tmp_path_factory.mktemp("fast")
    run_scenario("incast", params, out_dir=fast, plots=False, progress=False, force=True,
                 write_captures=False)
    slow = tmp_path_factory.mktemp("slow")
    mp = pytest.MonkeyPatch()
    try:  # the object path: the Recorder declares nothing and takes no samples
        mp.setattr(results.Recorder, "wants", None)
        real = results.Recorder.on_enqueued
        # (the sampling methods are the compiled base class's: shadowed, not deleted)
        mp.setattr(results.Recorder, "on_dequeued", None)
        mp.setattr(results.Recorder, "on_enqueued", None)
        mp.setattr(results.Recorder, "_sample", real, raising=False)
        orig_emit = results.Recorder.emit

        def emit(self, e):
            if type(e) is Enqueued or type(e) is Dequeued:
                self._sample(e.t_ps, e.node, e.port, e.queue, e.packet_id, e.flow, e.nbytes,
                             e.queue_bytes)
                return
            orig_emit(self, e)

        mp.setattr(results.Recorder, "emit", emit)
        run_scenario("incast", params, out_dir=slow, plots=False, progress=False, force=True,
                     write_captures=False)
    finally:
        mp.undo()
    log_f, arr_f = _outputs(fast)
    log_s, arr_s = _outputs(slow)
    assert log_f == log_s
    assert arr_f.keys() == arr_s.keys()
    for k in arr_f:
        np.testing.assert_array_equal(arr_f[k], arr_s[k], err_msg=k)


def test_slot_interest_follows_its_target():
    sc = build("incast", {"duration_ms": 0.01}, None)
    live = interest(sc.tracer_slot)
    assert live is sc.tracer_slot.interest and live.enqueued is None
    rec = Recorder()
    sc.tracer_slot.target = rec
    assert live.enqueued == rec.on_enqueued and Enqueued not in live.types
    assert RateChanged in live.types
    lt = ListTracer()
    sc.tracer_slot.target = lt
    assert Enqueued in live.types and live.enqueued is not None
    sc.tracer_slot.target = None
    assert live.types == NOTHING and live.dequeued is None


def test_tee_of_a_recorder_gets_queue_objects():
    """A Recorder inside a TeeTracer takes no samples directly: the tee builds the queue
    events and the Recorder reads them through emit, as before."""
    rec = Recorder()
    _run_library(TeeTracer(rec, _Counting(wants=NOTHING)))
    rec.flush_samples()  # the latest samples of each series wait in a buffer until then
    assert rec.queues and sum(len(t) for t, _ in rec.queues.values()) > 100
    assert Enqueued in Interest(TeeTracer(rec)).types


def test_ports_pass_a_recorders_samples_directly_unless_its_hook_is_wrapped():
    """A Recorder's queue samples go from the ports into its buffers (Interest.sampler);
    one whose on_enqueued / on_dequeued an instance replaces gets them through those, and
    both record the same series."""
    direct = Recorder()
    assert Interest(direct).sampler is direct
    wrapped = Recorder()
    seen = [0]

    def counted(*fields, _orig=wrapped.on_enqueued):
        seen[0] += 1
        _orig(*fields)

    wrapped.on_enqueued = counted
    assert Interest(wrapped).sampler is None
    assert Interest(ListTracer()).sampler is None and Interest(None).sampler is None
    _run_library(direct)
    _run_library(wrapped)
    direct.flush_samples()
    wrapped.flush_samples()
    assert seen[0] > 100  # the wrapper saw the enqueue samples
    assert direct.queues.keys() == wrapped.queues.keys()
    for key, (t, v) in direct.queues.items():
        t2, v2 = wrapped.queues[key]
        assert list(t) == list(t2) and list(v) == list(v2), key


class _Listening(Recorder):
    """A Recorder subclass with its own emit: it must be given every event as an object."""

    def __init__(self) -> None:
        super().__init__(ListTracer())
        self.seen: list[Event] = []

    def emit(self, e):
        self.seen.append(e)
        super().emit(e)


def test_ce_marks_and_rate_changes_reach_a_recorder_as_fields_else_as_objects():
    """A Recorder takes CE marks and rate changes as fields (Interest.hooks: no event built);
    a subclass with its own emit gets the objects; both count, keep and log the same."""
    from sim.events import CEMarked

    direct = Recorder(ListTracer())
    assert Interest(direct).hooks is direct
    listening = _Listening()
    assert Interest(listening).hooks is None
    assert Interest(ListTracer()).hooks is None and Interest(None).hooks is None
    params = {**_PARAMS, "duration_ms": 0.2}
    _run_library(direct, params)
    _run_library(listening, params)
    seen = {type(e) for e in listening.seen}
    assert CEMarked in seen and RateChanged in seen  # the objects path was taken
    assert sum(direct.ce.values()) > 10 and direct.ce == listening.ce
    assert [e.to_dict() for e in direct.log.events] == [
        e.to_dict() for e in listening.log.events]
    direct.flush_samples()
    listening.flush_samples()
    assert direct.rates.keys() == listening.rates.keys()
    for fid, cols in direct.rates.items():
        assert [list(c) for c in cols] == [list(c) for c in listening.rates[fid]], fid


def test_switches_fill_a_recorders_ingress_buffers_unless_the_tap_is_wrapped():
    """A switch whose ingress_tap is a Recorder's own ingress_sample adds to its buffers in
    C (sim.trace.ingress_sampler); a wrapped tap is called as given; the same series."""
    from sim.trace import ingress_sampler

    direct = Recorder()
    assert ingress_sampler(direct.ingress_sample) is direct
    wrapped = Recorder()
    calls = [0]

    def tap(*fields, _orig=wrapped.ingress_sample):
        calls[0] += 1
        _orig(*fields)

    assert ingress_sampler(tap) is None and ingress_sampler(print) is None
    for rec, t, want in ((direct, direct.ingress_sample, direct), (wrapped, tap, None)):
        sc = build("incast", _PARAMS, None)
        for node in sc.fabric.nodes.values():
            if hasattr(node, "ingress_tap"):
                node.ingress_tap = t
                assert node._isampler is want
        sc.tracer_slot.target = rec
        sc.fabric.run(sc.duration_ps)
        rec.flush_samples()
    assert calls[0] > 100
    assert direct.ingress.keys() == wrapped.ingress.keys() and direct.ingress
    for key, (t, v) in direct.ingress.items():
        t2, v2 = wrapped.ingress[key]
        assert list(t) == list(t2) and list(v) == list(v2), key

"""Where events go: the :class:`Tracer` protocol and its implementations.

- :class:`NullTracer` (the default) reads nothing, so components build no event for it.
- :class:`ListTracer` keeps events in memory; ``to_arrays(cls)`` turns one event type into
  numpy columns (one array per numeric field) for analysis and plots.
- :class:`JsonlTracer` writes one JSON object per line (``Event.to_dict()``).
- :class:`TeeTracer` forwards to several tracers.

What a tracer reads (no event object is built when nothing reads it).  A tracer may
declare ``wants``, the event types it reads (a frozenset; missing or None: every type), and
may offer ``on_enqueued`` / ``on_dequeued`` (called with an :class:`sim.events.Enqueued` /
:class:`sim.events.Dequeued` event's fields, in order) to take queue samples without the
objects.  Components do not look at the tracer per event: they hold its :class:`Interest`
(:func:`interest`), one flag per event type, and build an event only when its flag says some
tracer reads it.  The runner's :class:`sim.scenarios.base.TracerSlot` owns one live
:class:`Interest` that it recomputes whenever its target changes.
"""

from __future__ import annotations

import json
import os
from array import array
from collections.abc import Callable
from dataclasses import fields
from typing import IO, Any, Protocol, TypeVar, runtime_checkable

from sim.events import CEMarked, Dequeued, Enqueued, Event, RateChanged, _plain

__all__ = ["Tracer", "NullTracer", "ListTracer", "JsonlTracer", "TeeTracer", "Interest",
           "QueueSampler", "SampleBuffer", "interest", "ingress_sampler", "wanted_types",
           "NOTHING"]

E = TypeVar("E", bound=Event)

_NUMERIC_DTYPES = {"int": "int64", "float": "float64", int: "int64", float: "float64"}


@runtime_checkable
class Tracer(Protocol):
    """Anything with ``emit(event)``."""

    def emit(self, event: Event) -> None: ...


#: ``wants`` of a tracer that reads no event.
NOTHING: frozenset[type[Event]] = frozenset()


def _all_event_types() -> frozenset[type[Event]]:
    out: set[type[Event]] = set()
    todo = [Event]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return frozenset(out)


def wanted_types(tracer: Any) -> frozenset[type[Event]]:
    """The event types ``tracer`` reads: its ``wants`` (every event type when it declares
    none, so a plain object with ``emit`` sees everything, as before); none for ``None``."""
    if tracer is None:
        return NOTHING
    w = getattr(tracer, "wants", None)
    return _all_event_types() if w is None else frozenset(w)


def _emitter(emit: Callable[[Event], None], cls: type[Event]) -> Callable[..., None]:
    def build_and_emit(*fields_: Any) -> None:
        emit(cls(*fields_))

    return build_and_emit


class QueueSampler:
    """Base of a tracer that takes queue samples as numbers (the runner's
    :class:`sim.study.samples.SampleSink`): ``on_enqueued`` / ``on_dequeued`` take an
    :class:`sim.events.Enqueued` / :class:`sim.events.Dequeued` event's fields and add the
    sample to the queue's :class:`SampleBuffer` (``_queue_buffer``, which a subclass defines
    with ``_ingress_buffer`` and ``_full``).  A port whose tracer is one (and does not replace
    those two) keeps the buffer of each of its queues and adds to it itself
    (:attr:`Interest.sampler`): C calls in the compiled core."""

    def on_enqueued(self, t_ps: int, node: int, port: int, queue: int, packet_id: int,
                    flow: int, nbytes: int, queue_bytes: int) -> None:
        """A queue sample: the fields of :class:`sim.events.Enqueued`, in order."""
        self._queue_sample(t_ps, node, port, queue, queue_bytes)

    def on_dequeued(self, t_ps: int, node: int, port: int, queue: int, packet_id: int,
                    flow: int, nbytes: int, queue_bytes: int) -> None:
        """A queue sample: the fields of :class:`sim.events.Dequeued`, in order (the same
        series as :meth:`on_enqueued`)."""
        self._queue_sample(t_ps, node, port, queue, queue_bytes)

    def _queue_sample(self, t_ps: int, node: int, port: int, queue: int,
                      queue_bytes: int) -> None:
        self._queue_buffer(node, port, queue).add(t_ps, queue_bytes)

    def _queue_buffer(self, node: int, port: int, queue: int) -> SampleBuffer:
        """The :class:`SampleBuffer` of queue (node, port, queue)'s depth series (a port keeps
        it and adds its samples to it: C calls in the compiled core)."""
        raise NotImplementedError(f"{type(self).__name__} takes no queue sample")

    def _ingress_buffer(self, node: int, port: int, pg: int) -> SampleBuffer:
        """The :class:`SampleBuffer` of ingress (node, port, PG)'s series (a switch keeps it
        and adds its samples to it, a repeat of the last row left out)."""
        raise NotImplementedError(f"{type(self).__name__} takes no ingress sample")

    def _full(self, b: SampleBuffer) -> None:
        """Take the rows of ``b``, full (and set its ``n`` to 0)."""
        raise NotImplementedError(f"{type(self).__name__} keeps no sample buffer")

    def ingress_sample(self, t_ps: int, node: int, port: int, pg: int, nbytes: int) -> None:
        """A switch's ``ingress_tap``: one sample of an ingress (port, PG) counter, added to
        its :class:`SampleBuffer` (``_ingress_buffer``) unless it repeats the last one.  A
        switch whose tap is this method (not replaced) keeps the buffers and adds to them
        itself (:func:`ingress_sampler`)."""
        self._ingress_sample(t_ps, node, port, pg, nbytes)

    def _ingress_sample(self, t_ps: int, node: int, port: int, pg: int, nbytes: int) -> None:
        self._ingress_buffer(node, port, pg).add_changed(t_ps, nbytes)

    #: True in a class whose ``emit`` reads a :class:`sim.events.CEMarked` or
    #: :class:`sim.events.RateChanged` as its ``_ce_marked`` / ``_rate_changed`` take the same
    #: fields: components then call those (C calls in the compiled core) instead of building
    #: the event (:attr:`Interest.hooks`; a subclass that defines its own ``emit`` is given
    #: the events).
    EMIT_HOOKS = False

    def _ce_marked(self, t_ps: int, node: int, port: int, queue: int, packet_id: int,
                   flow: int) -> None:
        """A :class:`sim.events.CEMarked`'s fields, in order."""
        self.emit(CEMarked(t_ps, node, port, queue, packet_id, flow))

    def _rate_changed(self, t_ps: int, node: int, flow: int, rate_bps: int,
                      target_rate_bps: int, alpha: float) -> None:
        """A :class:`sim.events.RateChanged`'s fields, in order."""
        self.emit(RateChanged(t_ps, node, flow, rate_bps, target_rate_bps, alpha))


class SampleBuffer:
    """The latest rows (time, value) of one series of a :class:`QueueSampler` (its
    ``owner``) not handed to it yet: ``n`` of ``cap`` rows in ``t_ps`` / ``v`` (the int64
    arrays ``t_ps_arr`` / ``v_arr`` written in place: C stores in the compiled core).  When it
    is full the owner's ``_full`` takes them.  ``last_t_ps`` / ``last_v``: the last row
    added, when ``has_last``."""

    def __init__(self, owner: QueueSampler, series: Any, cap: int) -> None:
        self.owner = owner
        self.series = series
        self.cap = cap
        self.t_ps_arr = array("q", bytes(8 * cap))
        self.v_arr = array("q", bytes(8 * cap))
        self.t_ps = self.t_ps_arr
        self.v = self.v_arr
        self.n = 0
        self.has_last = False
        self.last_t_ps = 0
        self.last_v = 0

    def add(self, t_ps: int, value: int) -> None:
        """One row."""
        n = self.n
        self.t_ps[n] = t_ps
        self.v[n] = value
        self.last_t_ps = t_ps
        self.last_v = value
        self.has_last = True
        self.n = n = n + 1
        if n >= self.cap:
            self.owner._full(self)

    def add_changed(self, t_ps: int, value: int) -> None:
        """One row, unless it repeats the last one (same time and value)."""
        if self.has_last and self.last_v == value and self.last_t_ps == t_ps:
            return
        self.add(t_ps, value)


def ingress_sampler(tap: Any) -> QueueSampler | None:
    """The :class:`QueueSampler` whose own ``ingress_sample`` ``tap`` is (a switch then adds
    its samples to that sampler's buffers itself: C calls in the compiled core), else None."""
    owner = getattr(tap, "__self__", None)
    if (isinstance(owner, QueueSampler) and getattr(tap, "__name__", None) == "ingress_sample"
            and type(owner).ingress_sample is QueueSampler.ingress_sample
            and "ingress_sample" not in getattr(owner, "__dict__", {})):
        return owner
    return None


class Interest:
    """Per event type, whether the tracer(s) behind a component read it.

    ``types``: the event types to build and emit (``cls in interest.types``).  ``enqueued``
    and ``dequeued``: None when nobody reads queue samples, else a callable taking the fields
    of :class:`sim.events.Enqueued` / :class:`sim.events.Dequeued` in order (the tracer's
    ``on_enqueued`` / ``on_dequeued`` when it takes samples without objects, else one that
    builds the event and emits it) -- the hot path of every port.  ``sampler``: the tracer
    when both are a :class:`QueueSampler`'s own (the port then adds the sample to the
    sampler's buffer of the queue itself, the same sample), else None.  ``hooks``: the
    tracer when it is a :class:`QueueSampler` whose ``emit`` is that of a class with
    ``EMIT_HOOKS`` (switches and hosts then pass a CE mark or a rate change to its
    ``_ce_marked`` / ``_rate_changed`` without building the event), else None.
    """

    __slots__ = ("dequeued", "enqueued", "hooks", "sampler", "types")

    def __init__(self, tracer: Any = None) -> None:
        self.types: frozenset[type[Event]] = NOTHING
        self.enqueued: Callable[..., None] | None = None
        self.dequeued: Callable[..., None] | None = None
        self.sampler: QueueSampler | None = None
        self.hooks: QueueSampler | None = None
        self.update(tracer)

    def update(self, tracer: Any) -> None:
        """Recompute every flag for ``tracer`` (None: nothing is read)."""
        types = wanted_types(tracer)
        self.types = types
        self.enqueued = self._queue_hook(tracer, types, Enqueued, "on_enqueued")
        self.dequeued = self._queue_hook(tracer, types, Dequeued, "on_dequeued")
        kind = type(tracer)
        own = getattr(tracer, "__dict__", {})  # an instance's own on_enqueued is its hook
        self.sampler = tracer if (
            isinstance(tracer, QueueSampler) and Enqueued not in types
            and Dequeued not in types and kind.on_enqueued is QueueSampler.on_enqueued
            and kind.on_dequeued is QueueSampler.on_dequeued
            and "on_enqueued" not in own and "on_dequeued" not in own) else None
        self.hooks = tracer if isinstance(tracer, QueueSampler) and _emit_hooked(tracer) else None

    @staticmethod
    def _queue_hook(tracer: Any, types: frozenset, cls: type[Event], name: str
                    ) -> Callable[..., None] | None:
        if cls in types:
            return _emitter(tracer.emit, cls)
        return getattr(tracer, name, None) if tracer is not None else None


def _emit_hooked(tracer: QueueSampler) -> bool:
    """Whether ``tracer``'s ``emit`` is that of a class declaring ``EMIT_HOOKS``."""
    if "emit" in getattr(tracer, "__dict__", {}):
        return False
    for kind in type(tracer).__mro__:
        if "emit" in vars(kind):
            return bool(vars(kind).get("EMIT_HOOKS", False))
    return False


def interest(tracer: Any) -> Interest:
    """The :class:`Interest` a component built with ``tracer`` checks: the tracer's own live
    one when it has one (:class:`sim.scenarios.base.TracerSlot`), else one computed now."""
    live = getattr(tracer, "interest", None)
    return live if isinstance(live, Interest) else Interest(tracer)


class NullTracer:
    """Discards every event (and reads none, so none is built)."""

    __slots__ = ()
    wants = NOTHING

    def emit(self, event: Event) -> None:
        pass


class ListTracer:
    """Keeps every event, in emission order, in ``events``."""

    __slots__ = ("events",)

    def __init__(self) -> None:
        self.events: list[Event] = []

    def emit(self, event: Event) -> None:
        self.events.append(event)

    def __len__(self) -> int:
        return len(self.events)

    def of_type(self, cls: type[E]) -> list[E]:
        """The events of type ``cls``, in order."""
        return [e for e in self.events if isinstance(e, cls)]

    def to_arrays(self, cls: type[Event]) -> dict[str, Any]:
        """One numpy array per numeric (int / float) field of ``cls``, over its events.

        Integer fields (all times, sizes and ids) become int64, float fields float64;
        other fields (strings, tuples) are left out.
        """
        import numpy as np

        selected = self.of_type(cls)
        out: dict[str, Any] = {}
        for f in fields(cls):
            dtype = _NUMERIC_DTYPES.get(f.type)
            if dtype is None:
                continue
            name = f.name
            out[name] = np.fromiter(
                (getattr(e, name) for e in selected), dtype=dtype, count=len(selected)
            )
        return out


class JsonlTracer:
    """Writes each event as one JSON line; a path is opened (and closed) by the tracer.

    Use as a context manager, or call :meth:`close`.  A file object passed in is written to
    but not closed.
    """

    def __init__(self, path_or_file: str | os.PathLike[str] | IO[str]) -> None:
        if isinstance(path_or_file, str | os.PathLike):
            self._file: IO[str] = open(path_or_file, "w", encoding="utf-8")
            self._owned = True
        else:
            self._file = path_or_file
            self._owned = False
        self._dumps = json.JSONEncoder(separators=(",", ":")).encode
        #: Per event class: :meth:`_plan`'s, or None for a class with its own ``to_dict``
        #: (written through it).
        self._plans: dict[type, tuple | None] = {}

    def emit(self, event: Event) -> None:
        """One line: the JSON of ``event.to_dict()`` without spaces.  For an
        :class:`~sim.events.Event` that keeps the shared ``to_dict``, the line is put together
        field by field, an int as its digits and anything else through the encoder: the same
        characters as encoding the dict, without building it."""
        cls = type(event)
        plan = self._plans.get(cls, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._plans[cls] = self._plan(cls)
        if plan is None:
            self._file.write(self._dumps(event.to_dict()) + "\n")
            return
        self._line(plan, tuple([getattr(event, name) for name in plan[3]]))

    def emit_fields(self, cls: type[Event], values: tuple) -> None:
        """The line :meth:`emit` writes for ``cls(*values)``, without building the event."""
        plan = self._plans.get(cls, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = self._plans[cls] = self._plan(cls)
        if plan is None:
            self.emit(cls(*values))
            return
        self._line(plan, values)

    def _line(self, plan: tuple, values: tuple) -> None:
        for v in values:
            if type(v) is not int:
                break
        else:  # every field an int (most events): the line's format, one call
            self._file.write(plan[0] % values)
            return
        _fmt, start, keys, _names = plan
        parts = [start]
        for key, v in zip(keys, values, strict=True):
            parts.append(key)
            parts.append(str(v) if type(v) is int else self._dumps(_plain(v)))
        parts.append("}\n")
        self._file.write("".join(parts))

    def _plan(self, cls: type) -> tuple | None:
        """(the line's %-format when every field is an int, its start, the keys
        (``,"field":``), the field names), or None for a class with its own ``to_dict``."""
        if not issubclass(cls, Event) or cls.to_dict is not Event.to_dict:
            return None
        dumps = self._dumps
        start = '{"event":' + dumps(cls.__name__)
        keys = tuple("," + dumps(name) + ":" for name in cls.__slots__)
        fmt = start.replace("%", "%%") + "".join(k.replace("%", "%%") + "%d" for k in keys)
        return fmt + "}\n", start, keys, cls.__slots__

    def close(self) -> None:
        """Flush, and close the file if this tracer opened it."""
        if self._owned:
            if not self._file.closed:
                self._file.close()
        else:
            self._file.flush()

    def __enter__(self) -> JsonlTracer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Not in :attr:`JsonlTracer._plans` yet.
_UNPLANNED = object()


class TeeTracer:
    """Forwards each event to every tracer given, in order."""

    __slots__ = ("tracers",)

    def __init__(self, *tracers: Tracer) -> None:
        self.tracers = tracers

    @property
    def wants(self) -> frozenset[type[Event]]:
        """Every event type one of the tracers reads (the queue events too when one takes
        queue samples, which it then gets as objects through ``emit``)."""
        out: set[type[Event]] = set()
        for t in self.tracers:
            out |= wanted_types(t)
            if getattr(t, "on_enqueued", None) is not None:
                out.add(Enqueued)
            if getattr(t, "on_dequeued", None) is not None:
                out.add(Dequeued)
        return frozenset(out)

    def emit(self, event: Event) -> None:
        for tracer in self.tracers:
            tracer.emit(event)


# Compiled (trace.pxd), a cpdef method's Python signature has lost its return annotation: put
# back the one written above (interpreted, it is there already and this does nothing).
for _name in ("add", "add_changed"):
    vars(SampleBuffer)[_name].__annotations__.setdefault("return", "None")
vars(JsonlTracer)["emit_fields"].__annotations__.setdefault("return", "None")
del _name

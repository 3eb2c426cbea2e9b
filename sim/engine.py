"""The simulator's one event heap (and its one seeded RNG).

Contract (see ``docs/explanation/simulator.md``, "The engine contract"): components hold state
and answer "what happens at ``now_ps``" and "when is your next timer"; only the :class:`Engine`
owns the heap.  Time is an integer number of picoseconds; a float time is a ``TypeError``.
Events at the same time run in order of ``priority`` (lower first) and then of insertion, so a
run is fully deterministic: the heap holds ``(at_ps, priority, seq, fn, args)`` tuples, the
scheme of simpy's ``core.py`` (time, priority, counter, event).  ``seq`` is unique, so the order
never depends on ``fn`` or ``args``.

Two kinds of entries share the heap and the one ``seq`` counter (so they interleave exactly by
insertion order):

* :meth:`Engine.schedule` / :meth:`Engine.schedule_in` return a :class:`Timer` handle; the entry
  is ``(at_ps, priority, seq, timer, None)``.  Cancelling is lazy: the entry stays in the heap
  and is skipped when it reaches the top.  Cancelled entries can outnumber the live ones (a PFC
  pause expiry is cancelled by every refresh or XON yet would stay until its time, 335 us
  ahead at 100 Gb/s: 95 % of the heap after 200 us of a 512-host leaf-spine), so the heap is
  compacted when it has doubled since the last look and half of it is cancelled
  (:meth:`Engine._compact`): the live entries keep their unique keys, so the order of events
  is unchanged, and the check costs one comparison per :meth:`Engine.schedule`.
* :meth:`Engine.call_at` / :meth:`Engine.call_in` are the fire-and-forget fast path for events
  nobody will cancel (end of a transmission, a frame's arrival): the entry is
  ``(at_ps, priority, seq, callback, args)`` and no handle object is made.  The run loop tells
  the two apart by ``args is None``.

Speed (measured on the development machine, Python 3.11)::

    python -c "from sim.engine import _bench; _bench()"

schedules and runs 1e6 chained events (each callback schedules the next, 64 other timers
pending) and prints the events per second with ``schedule_in`` and with ``call_in`` (figures
recorded when ``call_in`` was added: ``bench/results/2026-11-simulator-core.md``, "Simulator
benchmark").
"""

from __future__ import annotations

import gc
import operator
import random
from collections.abc import Callable
from typing import Any

from sim.units import MAX_PS

__all__ = ["GC_THRESHOLDS", "Engine", "Timer", "raise_gc_thresholds"]

#: The cyclic garbage collector's thresholds while :meth:`Engine.run` runs, at least (Python's
#: default is 700, 10, 10).  A fabric is hundreds of thousands of long-lived objects (ports,
#: queues, routes, flows: 320,000 GC-tracked at 2,048 hosts) and a run allocates millions of
#: short-lived ones (frames, heap entries); with the default thresholds the collector walked
#: the fabric again and again: 738 young, 67 middle and 6 full collections in 20 µs of the
#: 2,048-host leaf-spine (``python -m bench scale``), 15.2 µs per packet-hop against 12.8 µs
#: with these (bench/results/2026-12-fabric-scale.md, "Garbage collection during a run").  A
#: collective's schedule is millions of transfers built before the run and is built under the
#: same thresholds (``sim.scenarios.collective.run_size``).  Results are the same: the collector
#: only frees objects nothing can reach.
GC_THRESHOLDS = (100_000, 50, 100)


def raise_gc_thresholds() -> tuple[int, int, int] | None:
    """Raise the collector's thresholds to at least :data:`GC_THRESHOLDS`; return the previous
    ones, for ``gc.set_threshold(*old)`` when the work is done, or None when nothing changed
    (already as high, or automatic collection switched off with a threshold of 0)."""
    old = gc.get_threshold()
    if old[0] == 0:
        return None
    new = (max(old[0], GC_THRESHOLDS[0]), max(old[1], GC_THRESHOLDS[1]),
           max(old[2], GC_THRESHOLDS[2]))
    if new == old:
        return None
    gc.set_threshold(*new)
    return old


def _as_time(value: Any, name: str) -> int:
    """Integer picoseconds from ``value``; floats (and bools) are rejected with TypeError."""
    if isinstance(value, bool | float):
        raise TypeError(f"{name} must be an integer number of picoseconds, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(
            f"{name} must be an integer number of picoseconds, got {value!r}"
        ) from None


class Timer:
    """Handle of one scheduled callback; :meth:`cancel` stops it from running.

    It is also the heap's entry: ``(at_ps, priority, seq)`` is its place in the order (module
    docstring).  The engine makes one for every event; only :meth:`Engine.schedule` and
    :meth:`Engine.schedule_in` hand it out."""

    __slots__ = ("args", "at_ps", "callback", "owned", "priority", "seq")

    def __init__(self, at_ps: int, callback: Callable[..., Any] | None, args: tuple) -> None:
        self.at_ps = at_ps
        self.callback = callback
        self.args = args
        self.priority = 0
        self.seq = 0
        self.owned = False  # True: made by the engine for itself, reused once it ran

    @property
    def cancelled(self) -> bool:
        """True once cancelled (or after it ran: a timer fires at most once)."""
        return self.callback is None

    def cancel(self) -> None:
        """Do not run this callback.  Idempotent; harmless after the timer has fired."""
        self.callback = None
        self.args = ()

    def __repr__(self) -> str:
        state = "cancelled/done" if self.callback is None else "pending"
        return f"Timer(at_ps={self.at_ps}, {state})"


def _entry(at_ps: int, priority: int, seq: int, callback: Any, args: tuple) -> Timer:
    """A heap entry (a :class:`Timer`) without its constructor's Python call."""
    ev = Timer.__new__(Timer)
    ev.owned = False
    return _filled(ev, at_ps, priority, seq, callback, args)


def _filled(ev: Timer, at_ps: int, priority: int, seq: int, callback: Any, args: tuple
            ) -> Timer:
    """``ev`` (new, or spent and reused: Engine._owned) as the entry of these."""
    ev.at_ps = at_ps
    ev.priority = priority
    ev.seq = seq
    ev.callback = callback
    ev.args = args
    return ev


def _before(a: Timer, b: Timer) -> bool:
    """True when ``a`` runs before ``b``: earlier time, then lower priority, then the one
    scheduled first (``seq`` is unique, so two entries are never tied)."""
    if a.at_ps != b.at_ps:
        return a.at_ps < b.at_ps
    if a.priority != b.priority:
        return a.priority < b.priority
    return a.seq < b.seq


# The heap: a binary min-heap of Timers in a list, ordered by _before (heap[0] runs next;
# each entry runs no later than its two children at 2i+1 and 2i+2).  Written out here instead
# of heapq so that the compiled core compares two entries' C fields (engine.pxd) instead of
# Python tuples; the keys are unique, so any correct heap pops the same sequence.


def _heap_push(heap: list, ev: Timer) -> None:
    """Add ``ev``: append it as a leaf and move it up past every later parent."""
    heap.append(ev)
    _sift_up(heap, ev, len(heap) - 1)


def _sift_up(heap: list, ev: Timer, i: int) -> None:
    """Put ``ev`` at position ``i`` or above it: move it up past every later parent.  (Times
    are compared here and :func:`_before` called only on a tie: most entries differ in time,
    and a call per level was a third of the interpreted core's time.)"""
    at = ev.at_ps
    while i > 0:
        up = (i - 1) >> 1
        parent = heap[up]
        pat = parent.at_ps
        if pat < at or (pat == at and not _before(ev, parent)):
            break
        heap[i] = parent
        i = up
    heap[i] = ev


def _sift_down(heap: list, i: int) -> None:
    """Restore the order below position ``i`` (its subtrees are heaps): move the entry there
    down past every earlier child."""
    n = len(heap)
    ev = heap[i]
    child = 2 * i + 1
    while child < n:
        right = child + 1
        if right < n and _before(heap[right], heap[child]):
            child = right
        low = heap[child]
        if not _before(low, ev):
            break
        heap[i] = low
        i = child
        child = 2 * i + 1
    heap[i] = ev


def _heap_pop(heap: list) -> Timer:
    """Remove and return the first entry (``heap`` must not be empty).  The hole the first
    entry leaves goes down the path of earlier children to a leaf, where the last entry is put
    and moved up (the scheme of CPython's heapq: one comparison per level on the way down,
    and the last entry, which belongs near the leaves, rarely moves far up)."""
    last = heap.pop()
    n = len(heap)
    if not n:
        return last
    top = heap[0]
    i = 0
    child = 1
    while child < n:
        low = heap[child]
        right = child + 1
        if right < n:
            other = heap[right]
            rat, lat = other.at_ps, low.at_ps
            if rat < lat or (rat == lat and _before(other, low)):  # (_sift_up says why)
                child = right
                low = other
        heap[i] = low
        i = child
        child = 2 * i + 1
    _sift_up(heap, last, i)
    return top


def _heapify(heap: list) -> None:
    """Order ``heap`` in place."""
    for i in range(len(heap) // 2 - 1, -1, -1):
        _sift_down(heap, i)


def _check_at(at_ps: int, now_ps: int, priority: int) -> None:
    """The checks every scheduled time and priority passes (ints already)."""
    if at_ps < now_ps:
        raise ValueError(f"cannot schedule at {at_ps} ps, before now ({now_ps} ps)")
    if at_ps > MAX_PS:
        raise ValueError(f"cannot schedule at {at_ps} ps: after the latest simulator time, "
                         f"{MAX_PS} ps (int64, about 106 days)")
    if not -MAX_PS <= priority <= MAX_PS:
        raise ValueError(f"priority must fit in a 64-bit integer, got {priority}")


class Engine:
    """Event heap, clock (``now_ps``) and the run's seeded RNG (``rng``)."""

    __slots__ = ("_compact_at", "_cur_priority", "_cur_seq", "_heap", "_nspare", "_running",
                 "_seq", "_spare", "events_processed", "now_ps", "rng", "seed")

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.now_ps: int = 0
        self.rng = random.Random(seed)
        self.events_processed = 0
        self._heap: list[Timer] = []
        #: Entries that ran and that nobody holds (``owned``), for reuse (:meth:`_owned`):
        #: the first ``_nspare`` of the list (the list is never shortened: no reallocation
        #: as it empties and fills once per event; the rest are stale references).
        self._spare: list[Timer] = []
        self._nspare = 0
        self._seq = 0
        self._running = False
        self._compact_at = _COMPACT_MIN  # heap length at which to look for cancelled entries
        #: The running event's priority and seq (with ``now_ps`` its place in the order:
        #: :meth:`_done_before`); outside :meth:`run` the largest, as if every event up to
        #: ``now_ps`` had run.
        self._cur_priority = _LAST_PS
        self._cur_seq = _LAST_PS

    def schedule(
        self, at_ps: int, callback: Callable[..., Any], *args: Any, priority: int = 0
    ) -> Timer:
        """Run ``callback(*args)`` at ``at_ps`` (>= ``now_ps``); lower ``priority`` runs first."""
        if at_ps.__class__ is not int:
            at_ps = _as_time(at_ps, "at_ps")
        if priority.__class__ is not int:
            priority = operator.index(priority)
        _check_at(at_ps, self.now_ps, priority)
        self._seq += 1
        timer = _entry(at_ps, priority, self._seq, callback, args)
        heap = self._heap
        _heap_push(heap, timer)
        if len(heap) > self._compact_at:
            self._compact()
        return timer

    def schedule_in(
        self, delay_ps: int, callback: Callable[..., Any], *args: Any, priority: int = 0
    ) -> Timer:
        """Run ``callback(*args)`` ``delay_ps`` (>= 0) after ``now_ps``."""
        if delay_ps.__class__ is not int:
            delay_ps = _as_time(delay_ps, "delay_ps")
        if delay_ps < 0:
            raise ValueError(f"delay_ps must be >= 0, got {delay_ps}")
        return self.schedule(self.now_ps + delay_ps, callback, *args, priority=priority)

    def call_at(
        self, at_ps: int, callback: Callable[..., Any], *args: Any, priority: int = 0
    ) -> None:
        """Like :meth:`schedule` but returns no handle (the event cannot be cancelled).

        The fast path for fire-and-forget events.  Ordering is the same as :meth:`schedule`
        (time, then ``priority``, then insertion, counted together with the scheduled
        timers)."""
        if at_ps.__class__ is not int:
            at_ps = _as_time(at_ps, "at_ps")
        if priority.__class__ is not int:
            priority = operator.index(priority)
        _check_at(at_ps, self.now_ps, priority)
        self._seq += 1
        _heap_push(self._heap, self._owned(at_ps, priority, self._seq, callback, args))

    def call_in(
        self, delay_ps: int, callback: Callable[..., Any], *args: Any, priority: int = 0
    ) -> None:
        """Like :meth:`schedule_in` but returns no handle: see :meth:`call_at`."""
        if delay_ps.__class__ is not int:
            delay_ps = _as_time(delay_ps, "delay_ps")
        if delay_ps < 0:
            raise ValueError(f"delay_ps must be >= 0, got {delay_ps}")
        if priority.__class__ is not int:
            priority = operator.index(priority)
        at_ps = self.now_ps + delay_ps
        _check_at(at_ps, self.now_ps, priority)
        self._seq += 1
        _heap_push(self._heap, self._owned(at_ps, priority, self._seq, callback, args))

    def _push(self, delay_ps: int, callback: Callable[..., Any], args: tuple) -> None:
        """``call_in(delay_ps, callback, *args)`` with the arguments as one tuple: the same heap
        entry and ``seq``; a delay that is not an int goes through :meth:`call_in` (the same
        conversion or error).  The compiled core's own per-frame events use :meth:`_after`."""
        if type(delay_ps) is not int or not 0 <= delay_ps <= MAX_PS:
            self.call_in(delay_ps, callback, *args)
            return
        self._after(delay_ps, callback, args)

    def _after(self, delay_ps: int, callback: Callable[..., Any], args: tuple) -> None:
        """:meth:`_push` of a delay that is an int (a C int64 in the compiled core, where
        this is a C call from Port and Host): the same entry and ``seq`` as :meth:`call_in`;
        a negative delay or a time past :data:`~sim.units.MAX_PS` goes through
        :meth:`call_in` (its error)."""
        if delay_ps < 0 or delay_ps > _LAST_PS - self.now_ps:
            self.call_in(delay_ps, callback, *args)
            return
        self._seq += 1
        _heap_push(self._heap, self._owned(self.now_ps + delay_ps, 0, self._seq, callback,
                                          args))

    def _at(self, at_ps: int, priority: int, callback: Callable[..., Any], args: tuple) -> None:
        """``call_at(at_ps, callback, *args, priority=priority)`` with the arguments as one
        tuple, for an event of the compiled core that needs a priority (a C call there: the
        InfiniBand link's flow-control packets): the same entry and ``seq``; a time before
        now or past :data:`~sim.units.MAX_PS` goes through :meth:`call_at` (its error)."""
        if at_ps < self.now_ps or at_ps > _LAST_PS:
            self.call_at(at_ps, callback, *args, priority=priority)
            return
        self._seq += 1
        _heap_push(self._heap, self._owned(at_ps, priority, self._seq, callback, args))

    def _take_seq(self) -> int:
        """A ``seq`` for an event that may be scheduled later by :meth:`_push_key` (or never:
        it then runs, in effect, when something asks :meth:`_done_before`).  Every later
        event gets a later one, as if this one had been scheduled now."""
        self._seq += 1
        return self._seq

    def _push_key(self, at_ps: int, priority: int, seq: int, callback: Callable[..., Any],
                  args: tuple) -> None:
        """Schedule ``callback(*args)`` with the key ``(at_ps, priority, seq)`` of a
        :meth:`_take_seq` (``at_ps`` not before now): it runs exactly where an event
        scheduled when the ``seq`` was taken would."""
        if at_ps < self.now_ps or at_ps > _LAST_PS:
            raise ValueError(f"cannot schedule at {at_ps} ps (now {self.now_ps} ps)")
        _heap_push(self._heap, self._owned(at_ps, priority, seq, callback, args))

    def _done_before(self, at_ps: int, priority: int, seq: int) -> bool:
        """An event of key ``(at_ps, priority, seq)`` would have run before the event running
        now (outside :meth:`run`: at or before ``now_ps``)."""
        now = self.now_ps
        if at_ps != now:
            return at_ps < now
        cur = self._cur_priority
        return priority < cur or (priority == cur and seq < self._cur_seq)

    def _owned(self, at_ps: int, priority: int, seq: int, callback: Any, args: tuple) -> Timer:
        """A heap entry nobody else will hold (:meth:`call_at`, :meth:`call_in`,
        :meth:`_after`): one that ran before if there is one (:meth:`run` keeps up to
        :data:`_SPARE_MAX` of them), else a new one.  Such an entry is ``owned``."""
        n = self._nspare
        if n:
            n -= 1
            self._nspare = n
            return _filled(self._spare[n], at_ps, priority, seq, callback, args)
        ev = _entry(at_ps, priority, seq, callback, args)
        ev.owned = True
        return ev

    def _compact(self) -> None:
        """Drop the cancelled timers from the heap if they are at least half of it; look again
        when the heap has doubled (so the scans cost O(1) per scheduled timer).  In place:
        :meth:`run` holds the list.  The live entries keep their ``(at_ps, priority, seq)``
        keys, which are unique, so the heap pops them in exactly the same order."""
        heap = self._heap
        live = [e for e in heap if e.callback is not None]
        if 2 * len(live) <= len(heap):
            heap[:] = live
            _heapify(heap)
        self._compact_at = max(_COMPACT_MIN, 2 * len(heap))

    def peek_ps(self) -> int | None:
        """Time of the next live event, or None when nothing is pending."""
        heap = self._heap
        while heap and heap[0].callback is None:
            _heap_pop(heap)
        return heap[0].at_ps if heap else None

    def pending_args(self) -> list[tuple]:
        """The argument tuples of every live pending event (cancelled timers left out), in no
        particular order: what is still in flight, for inspection at the end of a run (e.g.
        frames being serialised or on a wire, ``sim.study.results.flow_conservation``)."""
        return [e.args for e in self._heap if e.callback is not None]

    def __len__(self) -> int:
        """Heap entries, cancelled ones not yet skipped included."""
        return len(self._heap)

    def run(self, until_ps: int | None = None, max_events: int | None = None) -> int:
        """Process events in order; return how many ran.

        Stops when the heap is empty, when the next event is after ``until_ps`` (events exactly
        at ``until_ps`` do run) or after ``max_events``.  Unless stopped by ``max_events``,
        ``now_ps`` then becomes ``until_ps`` when one was given (:data:`~sim.units.MAX_PS` if
        ``until_ps`` is later: the clock is an int64).  While it runs, the garbage
        collector's thresholds are at least :data:`GC_THRESHOLDS` (the caller's come back when
        it returns).
        """
        if self._running:
            raise RuntimeError("Engine.run() is not re-entrant")
        if until_ps is not None:
            until_ps = _as_time(until_ps, "until_ps")
            if until_ps < self.now_ps:
                raise ValueError(f"until_ps {until_ps} is before now ({self.now_ps} ps)")
        limit = -1 if max_events is None else max_events
        if limit == 0:
            return 0
        heap = self._heap
        spare = self._spare
        # No entry is later than MAX_PS, so a later until_ps (or none) stops nothing.
        stop_ps = MAX_PS if until_ps is None else min(until_ps, MAX_PS)
        count = 0
        hit_limit = False
        old_gc = raise_gc_thresholds()
        self._running = True
        try:
            while heap:
                ev = _heap_pop(heap)
                if ev.at_ps > stop_ps:
                    _heap_push(heap, ev)  # its unique key puts it back in its place
                    break
                fn = ev.callback
                if fn is None:
                    continue  # cancelled
                args = ev.args
                ev.callback = None  # fired: a handle now reads as cancelled
                self.now_ps = ev.at_ps
                self._cur_priority = ev.priority
                self._cur_seq = ev.seq
                if ev.owned and self._nspare < _SPARE_MAX:
                    ev.args = ()  # (lets go of the frame it carried)
                    n = self._nspare
                    if n < len(spare):
                        spare[n] = ev
                    else:
                        spare.append(ev)
                    self._nspare = n + 1
                fn(*args)
                count += 1
                if count == limit:
                    hit_limit = True
                    break
        finally:
            self._running = False
            self._cur_priority = self._cur_seq = _LAST_PS
            self.events_processed += count
            if old_gc is not None:
                gc.set_threshold(*old_gc)
        if until_ps is not None and not hit_limit:
            self.now_ps = stop_ps  # until_ps, or MAX_PS if it is later: the clock's last tick
        return count


#: The latest time, as a C int64 in the compiled core (sim.units.MAX_PS).
_LAST_PS = MAX_PS

#: At most this many spent entries are kept for reuse (Engine._owned): the most a run keeps
#: pending is far above it, but reuse needs only the few that each event frees and takes.
_SPARE_MAX = 4096

#: Below this many heap entries the engine never looks for cancelled ones.  Every PFC pause
#: cancels the previous one's expiry timer (334 us ahead at 100 Gb/s): with 1024 here, a
#: 3 ms DCQCN incast's heap held 166 entries (median of samples every 10 us), 141 of them
#: cancelled, so every pop sifted through 7 levels instead of 4; with 64, 45 entries, 18
#: cancelled (bench/results/2026-11-simulator-core.md, "The compiled core's calls and heap").
#: A scan costs O(1) per scheduled timer either way.
_COMPACT_MIN = 64

def _bench(n: int = 1_000_000, fast: bool = False) -> float:
    """Schedule-and-run ``n`` chained no-op events with ``schedule_in`` (``fast``: with
    ``call_in``); print and return events per second."""
    import time

    engine = Engine()
    remaining = [n]
    later = engine.call_in if fast else engine.schedule_in

    def tick() -> None:
        remaining[0] -= 1
        if remaining[0]:
            later(80, tick)

    for _ in range(64):  # a realistic heap: a few dozen concurrent timers
        engine.schedule(10**15, _noop)
    engine.schedule(0, tick)
    start = time.perf_counter()
    engine.run(until_ps=10**14)
    elapsed = time.perf_counter() - start
    rate = n / elapsed
    how = "call_in" if fast else "schedule_in"
    print(f"{n} events ({how}) in {elapsed:.3f} s: {rate:,.0f} events/s")
    return rate


def _noop() -> None:
    pass


# Compiled (engine.pxd), a cpdef method's Python signature has lost its return annotation: put
# back the one written above (interpreted, it is there already and this does nothing).
vars(Engine)["run"].__annotations__.setdefault("return", "int")

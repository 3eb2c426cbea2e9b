"""The per-sample half of :class:`sim.study.results.Recorder` (issue 19): a queue depth arrives
at every enqueue and dequeue of every port and an ingress counter at every admission and
release, one to three samples per packet-hop, so these methods are compiled with the
simulator's core (``sim/study/samples.pxd``; the same ``.py`` runs interpreted without a
compiler).  Each series is a :class:`sim.study.series.Series` of the sink's ``store``, which
spills them to a temporary file past its budget (bounded memory).

May import the kernel and ``sim.study.series`` only.
"""

from __future__ import annotations

from sim.study.series import Series, SeriesStore

__all__ = ["SampleSink"]


class SampleSink:
    """Queue depths (``queues``: (node, port, queue) -> t_ps, queue bytes after every change)
    and ingress counters (``ingress``: (node, port, PG) -> t_ps, bytes held after every
    change), as series of ``store``; ``_cap`` is the rows a series may hold before it spills,
    worked out again whenever a series is made (:meth:`_new`: the budget is shared)."""

    def __init__(self, store: SeriesStore) -> None:
        self.store = store
        self._cap = store.cap_rows
        self.queues: dict[tuple[int, int, int], Series] = {}
        self.ingress: dict[tuple[int, int, int], Series] = {}

    def _new(self, typecodes: str) -> Series:
        s = self.store.new(typecodes)
        self._cap = self.store.cap_rows  # the budget is shared by one series more
        return s

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
        key = (node, port, queue)
        s = self.queues.get(key)
        if s is None:
            s = self.queues[key] = self._new("qq")
        t = s[0]
        t.append(t_ps)
        s[1].append(queue_bytes)
        if len(t) >= self._cap:
            self.store.spill(s)

    def ingress_sample(self, t_ps: int, node: int, port: int, pg: int, nbytes: int) -> None:
        """``Switch.ingress_tap``: one sample of an ingress (port, PG) counter."""
        key = (node, port, pg)
        s = self.ingress.get(key)
        if s is None:
            s = self.ingress[key] = self._new("qq")
        elif s[1][-1] == nbytes and s[0][-1] == t_ps:  # a spill keeps the last row
            return
        s[0].append(t_ps)
        s[1].append(nbytes)
        if len(s[0]) >= self._cap:
            self.store.spill(s)

"""Where events go: the :class:`Tracer` protocol and its implementations.

- :class:`NullTracer` (the default) drops everything and costs one method call.
- :class:`ListTracer` keeps events in memory; ``to_arrays(cls)`` turns one event type into
  numpy columns (one array per numeric field) for analysis and plots.
- :class:`JsonlTracer` writes one JSON object per line (``Event.to_dict()``).
- :class:`TeeTracer` forwards to several tracers.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields
from typing import IO, Any, Protocol, TypeVar, runtime_checkable

from sim.events import Event

__all__ = ["Tracer", "NullTracer", "ListTracer", "JsonlTracer", "TeeTracer"]

E = TypeVar("E", bound=Event)

_NUMERIC_DTYPES = {"int": "int64", "float": "float64", int: "int64", float: "float64"}


@runtime_checkable
class Tracer(Protocol):
    """Anything with ``emit(event)``."""

    def emit(self, event: Event) -> None: ...


class NullTracer:
    """Discards every event."""

    __slots__ = ()

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

    def emit(self, event: Event) -> None:
        self._file.write(self._dumps(event.to_dict()))
        self._file.write("\n")

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


class TeeTracer:
    """Forwards each event to every tracer given, in order."""

    __slots__ = ("tracers",)

    def __init__(self, *tracers: Tracer) -> None:
        self.tracers = tracers

    def emit(self, event: Event) -> None:
        for tracer in self.tracers:
            tracer.emit(event)

"""Typed, past-tense records of what happened in a simulation.

Every event is a frozen, slotted dataclass whose first field is ``t_ps`` (integer picoseconds).
Components emit them to a :class:`sim.trace.Tracer`; every PFC transition, CNP and rate change
is an event, never a sampled poll.  ``to_dict()`` gives ``{"event": ClassName, field: value...}``
with plain JSON types (tuples become lists), and :func:`event_from_dict` reverses it.

Identifiers: ``node`` and ``dst`` are node ids, ``port`` a port index on that node, ``queue``
the egress/ingress queue (traffic class) index, ``priority`` the PFC priority (0..7), ``flow``
the flow id of :class:`sim.packet.SimPacket`.
"""

from dataclasses import dataclass, fields
from typing import Any

__all__ = [
    "Event", "Enqueued", "Dequeued", "Dropped", "CEMarked", "PauseSent", "PauseReceived",
    "PauseExpired", "CNPSent", "RateChanged", "TxnPacked", "DeadlockFound", "EVENT_TYPES",
    "event_from_dict", "WatchdogTriggered", "WatchdogRestored", "DeadlockCleared",
    "QpError",
]


def _plain(value: Any) -> Any:
    """A JSON-ready copy: tuples/lists to lists, int subclasses (IntEnum, numpy) to int."""
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if hasattr(value, "item"):  # numpy scalar
        return value.item()
    return value


def _tupled(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tupled(v) for v in value)
    return value


class Event:
    """Base of all events (for isinstance checks and the shared ``to_dict``)."""

    __slots__ = ()

    def to_dict(self) -> dict[str, Any]:
        """``{"event": ClassName, <fields in order>}`` with plain JSON types."""
        out: dict[str, Any] = {"event": type(self).__name__}
        for name in self.__slots__:
            v = getattr(self, name)
            # most fields are plain ints or strings already (not bool, IntEnum or numpy)
            out[name] = v if type(v) is int or type(v) is str else _plain(v)
        return out


@dataclass(frozen=True, slots=True)
class Enqueued(Event):
    """A packet joined a queue; ``queue_bytes`` is the queue depth after it joined."""

    t_ps: int
    node: int
    port: int
    queue: int
    packet_id: int
    flow: int
    nbytes: int
    queue_bytes: int


@dataclass(frozen=True, slots=True)
class Dequeued(Event):
    """A packet left a queue (started transmission); ``queue_bytes`` is the depth after."""

    t_ps: int
    node: int
    port: int
    queue: int
    packet_id: int
    flow: int
    nbytes: int
    queue_bytes: int


@dataclass(frozen=True, slots=True)
class Dropped(Event):
    """A packet was discarded; ``reason`` is a short word such as ``"buffer_full"``."""

    t_ps: int
    node: int
    port: int
    queue: int
    packet_id: int
    flow: int
    nbytes: int
    reason: str


@dataclass(frozen=True, slots=True)
class CEMarked(Event):
    """A switch set ECN CE on an ECN-capable packet."""

    t_ps: int
    node: int
    port: int
    queue: int
    packet_id: int
    flow: int


@dataclass(frozen=True, slots=True)
class PauseSent(Event):
    """A PFC frame left ``port`` for ``priority`` (``quanta`` 0 means resume / XON)."""

    t_ps: int
    node: int
    port: int
    priority: int
    quanta: int


@dataclass(frozen=True, slots=True)
class PauseReceived(Event):
    """A PFC frame arrived on ``port`` for ``priority`` (``quanta`` 0 means resume)."""

    t_ps: int
    node: int
    port: int
    priority: int
    quanta: int


@dataclass(frozen=True, slots=True)
class PauseExpired(Event):
    """A pause on (``port``, ``priority``) ran out without a refresh or resume."""

    t_ps: int
    node: int
    port: int
    priority: int


@dataclass(frozen=True, slots=True)
class CNPSent(Event):
    """A receiver NIC (DCQCN NP) sent a congestion notification for ``flow``."""

    t_ps: int
    node: int
    flow: int


@dataclass(frozen=True, slots=True)
class RateChanged(Event):
    """A sender's rate control (DCQCN RP) changed ``flow``'s current/target rate."""

    t_ps: int
    node: int
    flow: int
    rate_bps: int
    target_rate_bps: int
    alpha: float


@dataclass(frozen=True, slots=True)
class TxnPacked(Event):
    """The SUE-T packer emitted one PDU of ``txns`` transactions, ``nbytes`` long, to ``dst``."""

    t_ps: int
    node: int
    dst: int
    vc: int
    txns: int
    nbytes: int


@dataclass(frozen=True, slots=True)
class DeadlockFound(Event):
    """A deadlock was confirmed at ``t_ps``: a cycle of paused ``(node, port, priority)`` egress
    queues that has not moved since ``onset_ps`` (sim.health.deadlock); ``flows`` have frames queued
    in it."""

    t_ps: int
    cycle: tuple[tuple[int, int, int], ...]
    flows: tuple[int, ...]
    onset_ps: int


@dataclass(frozen=True, slots=True)
class WatchdogTriggered(Event):
    """A PFC watchdog found (``port``, ``priority``) of ``node`` stuck (paused with a queue
    that does not drain, or for a NIC: receive side stalled while pausing) and started
    mitigating: ``action`` is ``"drop"`` or ``"forward"`` (switch, sim.health.watchdog) or
    ``"stop_pause"`` (NIC pause-storm prevention, sim.nic.host)."""

    t_ps: int
    node: int
    port: int
    priority: int
    action: str


@dataclass(frozen=True, slots=True)
class WatchdogRestored(Event):
    """A switch PFC watchdog ended its mitigation of (``port``, ``priority``) after its
    restore time; ``dropped_packets`` were discarded while it lasted."""

    t_ps: int
    node: int
    port: int
    priority: int
    dropped_packets: int


@dataclass(frozen=True, slots=True)
class DeadlockCleared(Event):
    """A deadlock reported by :class:`sim.health.deadlock.DeadlockDetector` is over: some member of
    ``cycle`` transmitted or is no longer paused (e.g. a watchdog broke it)."""

    t_ps: int
    cycle: tuple[tuple[int, int, int], ...]


@dataclass(frozen=True, slots=True)
class QpError(Event):
    """The RC QP of ``flow`` at its sender ``node`` went to the error state: the local ACK
    timeout expired with ``retries`` retries used up (:mod:`sim.nic.rc`); the flow stops with
    ``unacked`` frames not acknowledged."""

    t_ps: int
    node: int
    flow: int
    retries: int
    unacked: int


#: Every event type, in documentation order.
EVENT_TYPES: tuple[type[Event], ...] = (
    Enqueued, Dequeued, Dropped, CEMarked, PauseSent, PauseReceived, PauseExpired, CNPSent,
    RateChanged, TxnPacked, DeadlockFound, DeadlockCleared, WatchdogTriggered,
    WatchdogRestored, QpError,
)

_BY_NAME = {cls.__name__: cls for cls in EVENT_TYPES}


def event_from_dict(data: dict[str, Any]) -> Event:
    """Rebuild an event from its ``to_dict()`` form (lists become tuples again)."""
    try:
        cls = _BY_NAME[data["event"]]
    except KeyError:
        raise ValueError(f"unknown event {data.get('event')!r}") from None
    return cls(**{f.name: _tupled(data[f.name]) for f in fields(cls)})

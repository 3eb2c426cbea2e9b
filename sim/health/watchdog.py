"""Switch PFC watchdog: detect an egress queue that cannot drain while paused, mitigate, restore.

Per monitored (egress port, priority) of one :class:`sim.net.switch.Switch`, polled every
``poll_ps`` (a timer of the engine, started by :meth:`PfcWatchdog.start`):

* **detect**: at a poll the queue is *stuck* when the port is paused for that priority
  (``Port.paused``), the queue is non-empty, and its head frame is the same frame as at the
  previous poll (so nothing of that priority was transmitted in between).  ``detect_polls``
  consecutive stuck intervals trigger the watchdog: detection time = ``detect_polls x
  poll_ps`` (up to one more poll after the queue got stuck, as on real switches).
* **mitigate** for ``restore_ps`` (a ``WatchdogTriggered`` event):

  - ``action="drop"`` (SONiC's default action): the queue is flushed (each frame a ``Dropped``
    event with reason ``"pfc_watchdog"``, its MMU bytes released, which may send XON
    upstream) and every later frame routed to that queue is dropped the same way;
  - ``action="forward"``: received PAUSE frames for that priority on that port are ignored and
    the current pause is lifted, so the queue drains towards its peer (which may drop them).

* **restore** after ``restore_ps`` (a ``WatchdogRestored`` event): back to normal lossless
  operation and detection starts again (if the cause persists it triggers again).

:class:`WatchdogConfig`'s defaults are Juniper's PFC watchdog (Junos documentation, "PFC
watchdog": poll interval 100 ms, detection = 2 polls = 200 ms, recovery 200 ms) with SONiC's
default action ``drop`` (SONiC wiki "PFC Watchdog Design": detect / mitigate (drop) /
restore).  :data:`PRESETS` holds real switches' timings by name: ``"juniper"`` (those
defaults) and ``"sonic"`` (sonic-utilities ``pfcwd/main.py``: ``DEFAULT_POLL_INTERVAL`` 200 ms,
``DEFAULT_DETECTION_TIME`` 200 ms = 1 poll, ``DEFAULT_RESTORATION_TIME`` 200 ms); Huawei's PFC
deadlock detection default is 100 ms (``poll_ps=50 ms, detect_polls=2`` reproduces it).  The
built-in scenarios, whose runs last milliseconds, scale Juniper's timing by 1/1000 through the
same parameters (sim.scenarios.pfc_deadlock_ring ``WATCHDOG_PARAMS``).  A stuck queue is seen
at a poll and triggers ``detect_polls`` polls later, so a watchdog started at 0 acts at
``(detect_polls + 1) x poll_ps`` at the earliest (:meth:`WatchdogConfig.earliest_trigger_ps`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sim.events import WatchdogRestored, WatchdogTriggered

if TYPE_CHECKING:  # pragma: no cover
    from sim.net.switch import Switch

__all__ = ["ACTIONS", "PRESETS", "PfcWatchdog", "WatchdogConfig", "MS_PS"]

ACTIONS = ("drop", "forward")
MS_PS = 10**9


@dataclass(frozen=True)
class WatchdogConfig:
    """Watchdog timing and action (defaults: Juniper timing, SONiC action; module doc).

    ``ports``: the egress ports watched (None: every port of the switch; the ``pfc_storm`` scenario
    watches only host-facing ports, the server-facing queues of Guo et al., SIGCOMM 2016,
    Sec. 4.3)."""

    poll_ps: int = 100 * MS_PS
    detect_polls: int = 2
    restore_ps: int = 200 * MS_PS
    action: str = "drop"
    priorities: frozenset[int] = field(default_factory=lambda: frozenset({3}))
    ports: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if self.poll_ps <= 0 or self.restore_ps <= 0:
            raise ValueError("poll_ps and restore_ps must be > 0")
        if self.detect_polls < 1:
            raise ValueError("detect_polls must be >= 1")
        if self.action not in ACTIONS:
            raise ValueError(f"action must be one of {ACTIONS}, got {self.action!r}")
        object.__setattr__(self, "priorities", frozenset(self.priorities))

    @property
    def detect_ps(self) -> int:
        return self.poll_ps * self.detect_polls

    def earliest_trigger_ps(self, stuck_from_ps: int = 0) -> int:
        """The first time the watchdog can act on a queue stuck from ``stuck_from_ps``: the
        first poll after it records the head frame, ``detect_polls`` more polls confirm it."""
        return (stuck_from_ps // self.poll_ps + 1 + self.detect_polls) * self.poll_ps


#: Real switches' PFC watchdog timings (module docstring); action and ports as configured.
PRESETS: dict[str, WatchdogConfig] = {
    "juniper": WatchdogConfig(poll_ps=100 * MS_PS, detect_polls=2, restore_ps=200 * MS_PS),
    "sonic": WatchdogConfig(poll_ps=200 * MS_PS, detect_polls=1, restore_ps=200 * MS_PS),
}


class PfcWatchdog:
    """The watchdog of one switch; :meth:`start` schedules its polls."""

    def __init__(self, switch: Switch, config: WatchdogConfig | None = None) -> None:
        self.switch = switch
        self.config = config if config is not None else WatchdogConfig()
        self.engine = switch.engine
        self._count: dict[tuple[int, int], int] = {}
        self._head: dict[tuple[int, int], int | None] = {}
        self._mitigating: dict[tuple[int, int], int] = {}  # key -> drops so far
        #: Counters: triggers, restores, dropped_packets, dropped_bytes.
        self.triggers = 0
        self.restores = 0
        self.dropped_packets = 0
        self.dropped_bytes = 0
        #: (t_ps, port, priority, "triggered" | "restored") in order.
        self.history: list[tuple[int, int, int, str]] = []
        self._started = False

    def start(self) -> PfcWatchdog:
        if not self._started:
            self._started = True
            self.engine.schedule_in(self.config.poll_ps, self._poll, priority=1)
        return self

    def watched(self) -> list[tuple[int, int]]:
        ports = self.config.ports if self.config.ports is not None else sorted(self.switch.ports)
        return [(p, c) for p in ports if p in self.switch.ports
                for c in sorted(self.config.priorities)]

    def mitigating(self, port: int, prio: int) -> bool:
        return (port, prio) in self._mitigating

    def _poll(self) -> None:
        sw = self.switch
        for key in self.watched():
            if key in self._mitigating:
                continue
            port = sw.ports[key[0]]
            q = port.queues[key[1]]
            if q and port.paused(key[1]):
                head = q[0].id
                if self._head.get(key) == head:
                    n = self._count[key] = self._count.get(key, 0) + 1
                    if n >= self.config.detect_polls:
                        self._trigger(key)
                    continue
                self._head[key] = head
            else:
                self._head[key] = None
            self._count[key] = 0
        self.engine.schedule_in(self.config.poll_ps, self._poll, priority=1)

    def _trigger(self, key: tuple[int, int]) -> None:
        sw = self.switch
        now = self.engine.now_ps
        port, prio = key
        self.triggers += 1
        self._mitigating[key] = 0
        self._count[key] = 0
        self._head[key] = None
        self.history.append((now, port, prio, "triggered"))
        sw.tracer.emit(WatchdogTriggered(now, sw.node_id, port, prio, self.config.action))
        if self.config.action == "drop":
            sw._wd_drop.add(key)
            sw._wd_flush(port, prio)
        else:
            sw._wd_ignore.add(key)
            sw.ports[port].pause(prio, 0)
        self.engine.schedule_in(self.config.restore_ps, self._restore, key, priority=1)

    def note_drop(self, port: int, prio: int, nbytes: int) -> None:
        """Called by the switch for every frame the drop action discards."""
        key = (port, prio)
        self._mitigating[key] = self._mitigating.get(key, 0) + 1
        self.dropped_packets += 1
        self.dropped_bytes += nbytes

    def _restore(self, key: tuple[int, int]) -> None:
        sw = self.switch
        now = self.engine.now_ps
        dropped = self._mitigating.pop(key, 0)
        sw._wd_drop.discard(key)
        sw._wd_ignore.discard(key)
        self.restores += 1
        self.history.append((now, key[0], key[1], "restored"))
        sw.tracer.emit(WatchdogRestored(now, sw.node_id, key[0], key[1], dropped))

    def counters(self) -> dict[str, int]:
        return {"triggers": self.triggers, "restores": self.restores,
                "dropped_packets": self.dropped_packets, "dropped_bytes": self.dropped_bytes}


def attach_watchdogs(switches: Iterable[Switch], config: WatchdogConfig,
                     ports: dict[int, tuple[int, ...]] | None = None) -> list[PfcWatchdog]:
    """Start a watchdog on each switch (``ports[node]`` overrides ``config.ports``)."""
    from dataclasses import replace

    out = []
    for sw in switches:
        cfg = config if ports is None or sw.node_id not in ports else \
            replace(config, ports=ports[sw.node_id])
        wd = PfcWatchdog(sw, cfg)
        sw.watchdog = wd
        out.append(wd.start())
    return out

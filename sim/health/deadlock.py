"""Deadlock detection: cycles of paused or credit-starved queues that stay so (a wait-for
graph).

A :class:`DeadlockDetector` is attached to a :class:`sim.fabric.Fabric` and polled by an
engine timer every ``poll_ps`` (default 10 us).  At each poll it builds the **wait-for
graph** of the switches' egress queues:

* a vertex is a *blocked* egress queue ``(node, port, priority)`` of a switch: the queue
  holds at least one frame and the port is paused for that priority (``Port.paused``) or its
  head frame lacks link-level credits (the port's gate says so without side effects:
  ``waiting(tc, nbytes)`` of :class:`sim.flowctl.ib.IbLink`, the same arithmetic for CBFC's
  :class:`sim.flowctl.credit.CreditFlowControl`);
* an edge ``(n, p, c) -> (m, o, c)`` means "``(n, p, c)`` waits for ``(m, o, c)``": ``p``'s
  peer is switch ``m`` (arriving on its port ``q``), what holds ``(n, p, c)`` is ``m``'s
  ingress buffer for ``(q, c)`` (PFC: the ingress counter ``(q, PG c)`` is XOFF,
  ``Mmu.paused``; credits: ``(n, p, c)`` is credit-blocked, and its credits are exactly the
  room of that buffer), and at least one frame that entered ``m`` through ``(q, c)`` is
  queued at ``m``'s egress ``(o, c)``, which is itself blocked.  Bytes of ``(q, c)`` sitting
  in an egress queue that is *not* blocked drain, so they make no edge; a queue paused or
  starved by a host (a broken NIC) has no outgoing edge (no cycle).

A cycle of this graph is a cyclic buffer dependency whose every hop is currently blocked
(paused, or waiting for credits that only the next hop's draining would return).  It
is reported as a **deadlock** only once every member has stayed blocked *with the same head
frame* (no frame of that priority transmitted) at every poll for ``confirm_ps`` (default
``2 x`` the longest pause, 65535 quanta, at the slowest switch link: 671 us at 100 Gb/s), so
ordinary heavy congestion, whose queues keep moving, never counts.  A member's *stuck-since*
time is the first poll at which it was blocked with its current head; the deadlock's **onset**
is the latest stuck-since of its members (resolution: one poll).

Cycles are found per strongly connected component (Tarjan): the reported cycle is the
shortest one through the component's smallest member, in canonical rotation (starting at its
smallest ``(node, port, priority)``), so tests can compare it exactly.  Each deadlock is
reported once, as a ``DeadlockFound`` event (``t_ps`` = onset, emitted when confirmed) with
the flows of the frames queued in its members; when a member transmits or is no longer
paused (a watchdog broke it) a ``DeadlockCleared`` event follows.

The detector is sans-IO apart from its poll timer: :meth:`DeadlockDetector.check` evaluates
the state now and can be called directly.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from sim.events import DeadlockCleared, DeadlockFound
from sim.flowctl.credit import CreditFlowControl
from sim.net.switch import Switch
from wire.pfc import quanta_to_ps

__all__ = ["DeadlockDetector", "Deadlock", "wait_for_graph", "find_cycles", "POLL_PS",
           "credit_waiting", "pfc_failure_summary", "pfc_failure_arrays"]

Queue = tuple[int, int, int]
#: Default poll interval (10 us).
POLL_PS = 10_000_000
_MAX_QUANTA = 0xFFFF


class Deadlock:
    """One reported deadlock."""

    __slots__ = ("cleared_ps", "cycle", "detected_ps", "flows", "onset_ps")

    def __init__(self, cycle: tuple[Queue, ...], onset_ps: int, detected_ps: int,
                 flows: tuple[int, ...]) -> None:
        self.cycle = cycle
        self.onset_ps = onset_ps
        self.detected_ps = detected_ps
        self.flows = flows
        self.cleared_ps: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"t_ps": self.onset_ps, "detected_ps": self.detected_ps,
                "cleared_ps": self.cleared_ps, "cycle": [list(m) for m in self.cycle],
                "flows": list(self.flows)}


def credit_waiting(port: Any, tc: int) -> bool:
    """True when ``port``'s head frame of class ``tc`` lacks link-level credits now (IB or
    CBFC gate; False without one).  No side effect (stall counters are not touched)."""
    gate = getattr(port, "_gate", None)
    q = port.queues[tc]
    if gate is None or not q or tc not in gate.classes:
        return False
    waiting = getattr(gate, "waiting", None)
    if waiting is not None:
        return bool(waiting(tc, q[0].nbytes))
    if isinstance(gate, CreditFlowControl):
        return (gate.credits_used[tc] + gate.cbfc.credits(q[0].nbytes)
                > gate.credit_limit[tc])
    return False


def _blocked(fabric: Any, priorities: frozenset[int] | None) -> dict[Queue, Any]:
    """Blocked switch egress queues -> their Port."""
    out: dict[Queue, Any] = {}
    for nid, node in fabric.nodes.items():
        if not isinstance(node, Switch):
            continue
        for idx, port in node.ports.items():
            for c in range(len(port.queues)):
                if port.queues[c] and (priorities is None or c in priorities) \
                        and (port.paused(c) or credit_waiting(port, c)):
                    out[(nid, idx, c)] = port
    return out


def wait_for_graph(fabric: Any, priorities: frozenset[int] | None = None
                   ) -> dict[Queue, list[Queue]]:
    """The wait-for graph now (module docstring): blocked queue -> the queues it waits for."""
    blocked = _blocked(fabric, priorities)
    graph: dict[Queue, list[Queue]] = {}
    for (n, p, c), port in blocked.items():
        peer = port.peer
        succ: list[Queue] = []
        if isinstance(peer, Switch):
            m, q = peer.node_id, port.peer_port
            if peer.mmu.paused(q, c) or credit_waiting(port, c):
                ingress = peer._ingress
                for o, op in sorted(peer.ports.items()):
                    if (m, o, c) not in blocked:
                        continue
                    for pkt in op.queues[c]:
                        ing = ingress.get(pkt.id)
                        if ing is not None and ing[0] == q:
                            succ.append((m, o, c))
                            break
        graph[(n, p, c)] = succ
    return graph


def _sccs(graph: dict[Queue, list[Queue]]) -> list[list[Queue]]:
    """Tarjan's strongly connected components (iterative), deterministic order."""
    index: dict[Queue, int] = {}
    low: dict[Queue, int] = {}
    on: set[Queue] = set()
    stack: list[Queue] = []
    out: list[list[Queue]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            v, i = work.pop()
            if i == 0:
                index[v] = low[v] = counter
                counter += 1
                stack.append(v)
                on.add(v)
            succ = graph.get(v, [])
            if i < len(succ):
                work.append((v, i + 1))
                w = succ[i]
                if w not in index:
                    work.append((w, 0))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
            if work:
                u = work[-1][0]
                low[u] = min(low[u], low[v])
    return out


def find_cycles(graph: dict[Queue, list[Queue]]) -> list[tuple[Queue, ...]]:
    """One cycle per cyclic strongly connected component: the shortest cycle through its
    smallest member, starting there (canonical rotation).  Sorted."""
    cycles = []
    for comp in _sccs(graph):
        start = comp[0]
        if len(comp) == 1 and start not in graph.get(start, []):
            continue
        members = set(comp)
        prev: dict[Queue, Queue] = {}
        todo = deque([start])
        seen = {start}
        found = None
        while todo and found is None:
            v = todo.popleft()
            for w in graph.get(v, []):
                if w not in members:
                    continue
                if w == start:
                    found = v
                    break
                if w not in seen:
                    seen.add(w)
                    prev[w] = v
                    todo.append(w)
        assert found is not None
        path = [found]
        while path[-1] != start:
            path.append(prev[path[-1]])
        cycles.append(tuple(reversed(path)))
    return sorted(cycles)


class DeadlockDetector:
    """Polls ``fabric`` for deadlocks (module docstring).  ``priorities``: the PFC priorities
    examined (None: all).  Results: :attr:`deadlocks`, :meth:`summary`."""

    def __init__(self, fabric: Any, *, poll_ps: int = POLL_PS, confirm_ps: int | None = None,
                 priorities: frozenset[int] | set[int] | None = None) -> None:
        if poll_ps <= 0:
            raise ValueError("poll_ps must be > 0")
        self.fabric = fabric
        self.engine = fabric.engine
        self.poll_ps = poll_ps
        if confirm_ps is None:
            rates = [p.rate_bps for n in fabric.nodes.values() if isinstance(n, Switch)
                     for p in n.ports.values()]
            slowest = min(rates) if rates else 100 * 10**9
            confirm_ps = 2 * quanta_to_ps(_MAX_QUANTA, slowest)
        if confirm_ps < 0:
            raise ValueError("confirm_ps must be >= 0")
        self.confirm_ps = confirm_ps
        self.priorities = None if priorities is None else frozenset(priorities)
        #: Every deadlock reported, in order.
        self.deadlocks: list[Deadlock] = []
        self._active: dict[tuple[Queue, ...], Deadlock] = {}
        self._since: dict[Queue, tuple[int, int]] = {}  # queue -> (head id, stuck since)
        self._started = False

    def start(self) -> DeadlockDetector:
        """Schedule the polls (first one at the current time + ``poll_ps``)."""
        if not self._started:
            self._started = True
            self.engine.schedule_in(self.poll_ps, self._poll, priority=2)
        return self

    def _poll(self) -> None:
        self.check()
        self.engine.schedule_in(self.poll_ps, self._poll, priority=2)

    def check(self) -> list[Deadlock]:
        """Evaluate now; returns the deadlocks newly confirmed by this call."""
        now = self.engine.now_ps
        graph = wait_for_graph(self.fabric, self.priorities)
        since: dict[Queue, tuple[int, int]] = {}
        for key in graph:
            n, p, c = key
            head = self.fabric.nodes[n].ports[p].queues[c][0].id
            old = self._since.get(key)
            since[key] = old if old is not None and old[0] == head else (head, now)
        self._since = since
        for cyc, dl in list(self._active.items()):
            if any(m not in since or since[m][1] > dl.onset_ps for m in cyc):
                dl.cleared_ps = now
                del self._active[cyc]
                self.fabric.tracer.emit(DeadlockCleared(now, cyc))
        new = []
        for cyc in find_cycles(graph):
            if cyc in self._active:
                continue
            onset = max(since[m][1] for m in cyc)
            if now - onset < self.confirm_ps:
                continue
            flows = sorted({pkt.flow for n, p, c in cyc
                            for pkt in self.fabric.nodes[n].ports[p].queues[c]})
            dl = Deadlock(cyc, onset, now, tuple(flows))
            self.deadlocks.append(dl)
            self._active[cyc] = dl
            new.append(dl)
            self.fabric.tracer.emit(DeadlockFound(now, cyc, tuple(flows), onset))
        return new

    def summary(self) -> dict[str, Any]:
        """``summary.json``'s ``deadlock``: detected, t_ps (onset), cycle, flows, detected_ps,
        cleared_ps of the first deadlock, plus every deadlock and the detector settings."""
        first = self.deadlocks[0].to_dict() if self.deadlocks else {
            "t_ps": None, "detected_ps": None, "cleared_ps": None, "cycle": [], "flows": []}
        return {"detected": bool(self.deadlocks), **first,
                "all": [d.to_dict() for d in self.deadlocks],
                "poll_ps": self.poll_ps, "confirm_ps": self.confirm_ps}


def pfc_failure_summary(sc: Any) -> dict[str, Any]:
    """``summary.json`` additions of a scenario that carries a deadlock detector, watchdogs or
    a stalled NIC (``sc.info``): ``deadlock`` (:meth:`DeadlockDetector.summary`),
    ``watchdog`` (counters summed over the switches, per switch, and every transition as
    ``[t_ps, node, port, priority, "triggered" | "restored"]``), ``stalled_nics`` and
    ``flow_roles`` (flow id -> role, e.g. ``victim``)."""
    out: dict[str, Any] = {}
    det = sc.info.get("deadlock_detector")
    if det is not None:
        out["deadlock"] = det.summary()
    wds = sc.info.get("watchdogs")
    if wds is not None:
        keys = ("triggers", "restores", "dropped_packets", "dropped_bytes")
        per = [{"node": w.switch.node_id, **w.counters()} for w in wds]
        out["watchdog"] = {
            "enabled": bool(wds), **{k: sum(w[k] for w in per) for k in keys},
            "per_switch": [w for w in per if w["triggers"]],
            "history": sorted([t, w.switch.node_id, port, prio, kind]
                              for w in wds for t, port, prio, kind in w.history),
        }
    nics = []
    for nid, node in sorted(sc.fabric.nodes.items()):
        if getattr(node, "_stall_prios", ()):
            nics.append({"node": nid, "rx_stalled": node.rx_stalled,
                         "pause_sent": node.pause_sent_count,
                         "rx_stall_dropped_packets": node.rx_stall_dropped_packets,
                         "rx_stall_dropped_bytes": node.rx_stall_dropped_bytes,
                         "pause_storm_timeout_ps": node.pause_storm_timeout_ps,
                         "storm_stopped_ps": node.storm_stopped_ps})
    if nics:
        out["stalled_nics"] = nics
    roles = sc.info.get("roles")
    if roles:
        out["flow_roles"] = {str(k): v for k, v in sorted(roles.items())}
    return out


def pfc_failure_arrays(sc: Any) -> dict[str, Any]:
    """``timeseries.npz`` additions: ``deadlock_t_ps`` (onsets), ``deadlock_cleared_ps``
    (-1: never) and ``watchdog_t_ps`` (trigger times), int64; empty dict without a detector."""
    import numpy as np

    det = sc.info.get("deadlock_detector")
    if det is None:
        return {}
    wds = sc.info.get("watchdogs") or []
    return {
        "deadlock_t_ps": np.array([d.onset_ps for d in det.deadlocks], dtype=np.int64),
        "deadlock_cleared_ps": np.array([-1 if d.cleared_ps is None else d.cleared_ps
                                         for d in det.deadlocks], dtype=np.int64),
        "watchdog_t_ps": np.array(sorted(t for w in wds for t, _p, _c, kind in w.history
                                         if kind == "triggered"), dtype=np.int64),
    }

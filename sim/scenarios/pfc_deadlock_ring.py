"""The ``pfc_deadlock_ring`` scenario: a PFC deadlock from a cyclic buffer dependency (CBD).

``switches`` switches in a ring (:func:`sim.fabric.topology.ring`, one host each, clockwise
routing), host ``s`` sending to the host ``hops`` switches further clockwise at ``rate_frac`` of
line rate, so every ring link carries ``hops`` flows.  Toy model ([A] ours, on the ring of Hu et
al., HotNets 2016; docs/reference/builtin-scenarios.md, docs/explanation/pfc.md): deadlock iff
``hops * rate_frac > 1``.  Nothing is scripted: the queues grow only if the load exceeds the ring
links' capacity.  The sources stop at ``stop_ms``; a deadlock, once formed, persists after that
(the :class:`sim.health.deadlock.DeadlockDetector` reports it) unless the switch PFC watchdog
(``watchdog = true``, :mod:`sim.health.watchdog`) breaks it.

This module also holds the watchdog / detector parameters and helpers the other PFC failure
scenarios share (:data:`WATCHDOG_PARAMS`, :data:`DETECTOR_PARAMS`, :func:`attach_tools`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from sim.health.deadlock import DeadlockDetector, pfc_failure_summary
from sim.health.watchdog import ACTIONS, PRESETS, WatchdogConfig, attach_watchdogs
from sim.net.switch import Switch
from sim.scenarios import ring as ring_scenario
from sim.scenarios.base import Param, Scenario, ScenarioError, resolve_params
from sim.scenarios.common import (
    DCQCN_KMAX_KB,
    TC,
    in_range,
    nonneg,
    param_set,
    pos,
    rc_params,
    share,
    with_default,
)
from sim.units import ms_to_ps, us_to_ps

__all__ = ["DETECTOR_PARAMS", "DOC", "PARAMS", "WATCHDOG_PARAMS", "attach_tools", "build",
           "watchdog_config"]

DOC = "PFC deadlock in a ring (CBD): deadlocks iff hops*rate_frac > 1; detector, watchdog"


def _action(v: str) -> str | None:
    return None if v in ACTIONS else f"must be one of {list(ACTIONS)}"


def _preset(v: str) -> str | None:
    return None if v in ("", *PRESETS) else f"must be '' or one of {sorted(PRESETS)}"


#: Switch PFC watchdog knobs.  The runs last milliseconds, so the timing defaults are
#: Juniper's (poll 100 ms, 2 polls, recovery 200 ms) scaled by 1/1000: a watchdog switched on
#: acts within the run; ``wd_preset`` gives a real switch's timing (sim.health.watchdog).
WATCHDOG_PARAMS: tuple[Param, ...] = (
    Param("watchdog", False, "switch PFC watchdog on every watched (port, priority 3)", None),
    Param("wd_poll_ms", 0.1, "watchdog poll interval, ms (Juniper's 100 ms / 1000)", pos),
    Param("wd_detect_polls", 2, "stuck polls before it acts (Juniper: 2)", in_range(1, 1000)),
    Param("wd_restore_ms", 0.2, "mitigation time before lossless operation resumes, ms "
          "(Juniper's 200 ms / 1000)", pos),
    Param("wd_action", "drop", "'drop' (flush and drop, SONiC default) or 'forward' (ignore "
          "PAUSE)", _action),
    Param("wd_preset", "", "'' (the wd_* values) | juniper (poll 100 ms x 2, recovery 200 "
          "ms) | sonic (poll 200 ms x 1, restoration 200 ms): replaces wd_poll_ms, "
          "wd_detect_polls and wd_restore_ms", _preset),
)
#: Deadlock detector knobs (sim.health.deadlock).
DETECTOR_PARAMS: tuple[Param, ...] = (
    Param("deadlock_poll_us", 10.0, "deadlock detector poll interval, us", pos),
    Param("deadlock_confirm_us", 0.0, "a cycle must stay stuck this long to count, us (0: "
          "2 x the 65535-quanta pause time at the link rate)", nonneg),
)


def watchdog_config(p: Mapping[str, Any]) -> WatchdogConfig:
    """The :class:`WatchdogConfig` of the ``WATCHDOG_PARAMS`` in ``p`` (``wd_preset``, when
    set, gives the timing)."""
    if p.get("wd_preset"):
        return dataclasses.replace(PRESETS[p["wd_preset"]], action=p["wd_action"],
                                   priorities=frozenset({TC}))
    return WatchdogConfig(poll_ps=max(ms_to_ps(p["wd_poll_ms"]), 1),
                          detect_polls=p["wd_detect_polls"],
                          restore_ps=max(ms_to_ps(p["wd_restore_ms"]), 1),
                          action=p["wd_action"], priorities=frozenset({TC}))


def attach_tools(sc: Scenario, p: Mapping[str, Any],
                 wd_ports: dict[int, tuple[int, ...]] | None = None, *,
                 deadlock_study: bool = False) -> Scenario:
    """Start the deadlock detector (always) and, with ``p['watchdog']``, a PFC watchdog on
    every switch (ports ``wd_ports[node]``, default all); both go into ``sc.info``
    (``deadlock_detector``, ``watchdogs``), and ``sc.summaries`` gets the summary.json keys
    of :func:`sim.health.deadlock.pfc_failure_summary`.  ``deadlock_study`` (or a
    ``deadlock_confirm_us`` given): a detector that cannot confirm a deadlock before the run
    ends is worth a warning (``sc.info["deadlock_study"]``, :mod:`sim.scenarios.timing`)."""
    fab = sc.fabric
    confirm = us_to_ps(p["deadlock_confirm_us"]) or None
    det = DeadlockDetector(fab, poll_ps=max(us_to_ps(p["deadlock_poll_us"]), 1),
                           confirm_ps=confirm, priorities={TC}).start()
    sc.info["deadlock_detector"] = det
    sc.info["deadlock_study"] = deadlock_study or confirm is not None
    wds = []
    if p["watchdog"]:
        cfg = watchdog_config(p)
        switches = [n for _, n in sorted(fab.nodes.items()) if isinstance(n, Switch)]
        wds = attach_watchdogs(switches, cfg, wd_ports)
    sc.info["watchdogs"] = wds
    keys = ["deadlock", "watchdog"]
    if any(getattr(n, "_stall_prios", ()) for n in fab.nodes.values()):
        keys.append("stalled_nics")
    if sc.info.get("roles"):
        keys.append("flow_roles")
    for key in keys:  # summary.json keys, filled by sim.study.results after the run
        sc.summaries[key] = lambda s, k=key: pfc_failure_summary(s)[k]
    return sc


_RING_KEYS = ("switches", "hops", "rate_frac", "stop_ms", "link_gbps", "pfc", "xoff_kb",
              "buffer_kb", "duration_ms", "seed", "background", "cable_m", "packet_bytes",
              "fabric", "vl_buffer_kb", "reliable", "retransmit", "ack_timeout", "retry_cnt",
              "ooo", "ooo_timeout_us")

PARAMS: tuple[Param, ...] = (
    Param("switches", 4, "switches in the ring (one host each)", in_range(2, 64)),
    Param("hops", 2, "ring links each flow crosses (clockwise), < switches",
          in_range(1, 63)),
    Param("rate_frac", 0.6, "rate of every flow as a fraction of line rate", share),
    Param("stop_ms", 1.0, "the sources stop at this time, ms (0: never)", nonneg),
    *param_set("link_gbps", "pfc", "xoff_kb", "buffer_kb", "duration_ms", "seed", "background",
               "cable_m",
               "packet_bytes", "fabric", "vl_buffer_kb",
               duration_ms=with_default("duration_ms", 2.0)),
    *WATCHDOG_PARAMS,
    *DETECTOR_PARAMS,
    *rc_params(),
)


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    if p["fabric"] == "ib" and p["watchdog"]:
        raise ScenarioError("parameter 'watchdog': the PFC watchdog watches pauses; "
                            "fabric=ib has none (its deadlock is of credit waits)")
    # no congestion control here, so no need for ECN ahead of PFC: the ring's marks stay at
    # DCQCN's Kmax (CNPs would only add control frames to the deadlock study)
    sc = ring_scenario.build({**{k: p[k] for k in _RING_KEYS}, "kmax_kb": DCQCN_KMAX_KB})
    sc.name = "pfc_deadlock_ring"
    sc.params = p
    sc.info["threshold_rate_frac"] = 1.0 / p["hops"]
    return attach_tools(sc, p, deadlock_study=True)

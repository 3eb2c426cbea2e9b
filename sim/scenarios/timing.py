"""Timer-driven mechanisms that cannot act before a run ends (docs/reference/replay.md,
"Warnings").

:func:`late_mechanisms` reads a built :class:`sim.scenarios.base.Scenario` and returns one
line per mechanism configured to act after ``duration_ps`` (an event at the end itself still
runs), naming the parameter, the time it needs and the run's duration: the switch PFC watchdog
(its first trigger, then its restoration), the deadlock detector of the deadlock studies (its
confirmation time), the stalled NIC of ``pfc_storm`` and its pause-storm prevention, faults
and the reroute after a link fault, flows and ``[[collective]]`` entries that start after the
end, and DCQCN's rate increase (timer and byte counter) after a cut.
:func:`sim.study.results.run_scenario` prints them before the run and writes them to
summary.json ``warnings``.  Nothing here changes the run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["late_mechanisms", "show_time"]

#: Fault kinds after which the switches reroute (sim.fabric.faults: a link's state changes).
_REROUTED = ("link_down", "flap", "nic_down", "switch_down")


def show_time(ps: int | float) -> str:
    """A time for people: s from 1 s up, ms from 1 ms, else us (``"300 ms"``, ``"671.1 us"``)."""
    if ps >= 10**12:
        return f"{ps / 10**12:.4g} s"
    if ps >= 10**9:
        return f"{ps / 10**9:.4g} ms"
    return f"{ps / 10**6:.4g} us"


def _duration_name(sc: Any) -> str:
    p = sc.params
    if "duration_us" in p:
        return "duration_us"
    return "[run] duration_ms" if "file" in p else "duration_ms"


def late_mechanisms(sc: Any) -> list[str]:
    """One ``"warning: ..."`` line per timer-driven mechanism of ``sc`` that cannot act
    before its run ends (module docstring); [] when every one can."""
    dur = sc.duration_ps
    end = f"the run ends at {show_time(dur)} ({_duration_name(sc)})"
    out: list[str] = []
    for check in (_watchdog, _detector, _stall, _faults, _flows, _collectives, _dcqcn):
        out += [f"warning: {sc.name}: {line}; {end}" for line in check(sc, dur)]
    return out


def _watchdog(sc: Any, dur: int) -> list[str]:
    wds = sc.info.get("watchdogs") or ()
    if not wds:
        return []
    cfg = wds[0].config
    preset = sc.params.get("wd_preset") or ""
    names = f"wd_preset {preset!r}" if preset else "wd_poll_ms, wd_detect_polls"
    stuck = sc.info.get("stall_ps") or 0
    first = cfg.earliest_trigger_ps(stuck)
    polls = first // cfg.poll_ps
    if first > dur:
        after = f", the stall at {show_time(stuck)}" if stuck else ""
        return [f"{names}: the PFC watchdog can act at {show_time(first)} at the earliest "
                f"(poll {polls} of {show_time(cfg.poll_ps)}: the first to see a queue stuck, "
                f"then {cfg.detect_polls} more{after})"]
    if first + cfg.restore_ps > dur:
        what = f"wd_preset {preset!r}" if preset else "wd_restore_ms"
        return [f"{what}: a queue the PFC watchdog mitigates at {show_time(first)} or later "
                f"is restored {show_time(cfg.restore_ps)} after, at "
                f"{show_time(first + cfg.restore_ps)} at the earliest"]
    return []


def _detector(sc: Any, dur: int) -> list[str]:
    det = sc.info.get("deadlock_detector")
    if det is None or not sc.info.get("deadlock_study"):
        return []
    if sc.params.get("pfc") is False and sc.params.get("fabric", "roce") == "roce":
        return []  # nothing pauses: no deadlock to report
    poll, confirm = det.poll_ps, det.confirm_ps
    first = poll + -(-confirm // poll) * poll  # stuck at the first poll, confirmed later
    if first <= dur:
        return []
    given = sc.params.get("deadlock_confirm_us", 0)
    what = ("deadlock_confirm_us" if given else
            f"deadlock_confirm_us (0: 2 x the longest pause, {show_time(confirm)})")
    return [f"{what} + deadlock_poll_us: the deadlock detector can report a deadlock at "
            f"{show_time(first)} at the earliest"]


def _stall(sc: Any, dur: int) -> list[str]:
    start = sc.info.get("stall_ps")
    if start is None:
        return []
    if start > dur:
        return [f"stall_ms: the NIC's receive side stalls at {show_time(start)}"]
    host = sc.fabric.nodes.get(sc.info.get("broken_host"))
    timeout = getattr(host, "pause_storm_timeout_ps", None)
    stop = sc.info.get("stall_end_ps")
    if timeout is None or (start + timeout <= dur and (stop is None or start + timeout < stop)):
        return []
    why = (f", after the stall ends at {show_time(stop)} (stall_end_ms)"
           if stop is not None and start + timeout >= stop else "")
    return [f"nic_timeout_ms ({show_time(timeout)}): the NIC stops pausing at "
            f"{show_time(start + timeout)} at the earliest{why}"]


def _faults(sc: Any, dur: int) -> list[str]:
    entries = sc.params.get("faults") or ()
    eng = getattr(sc.fabric, "_fault_engine", None)
    out = []
    for i, f in enumerate(entries):
        if not isinstance(f, Mapping):
            continue
        at = round(f.get("at_us", 0) * 10**6)
        label = f"fault #{i + 1} ({f.get('kind')}) at_us"
        if at > dur:
            out.append(f"{label}: it starts at {show_time(at)}")
            continue
        if eng is not None and eng.reroute.enabled and f.get("kind") in _REROUTED:
            when = at + eng.reroute.delay_ps
            if when > dur:
                out.append(f"detect_us + converge_us ({show_time(eng.reroute.delay_ps)}): "
                           f"the switches reroute around {label.rsplit(' ', 1)[0]} at "
                           f"{show_time(when)} at the earliest")
    return out


def _flows(sc: Any, dur: int) -> list[str]:
    return [f"flow {fid} ({f.src} -> {f.dst}) start_us: it starts at {show_time(f.start_ps)}"
            for fid, f in sorted(sc.fabric.flows.items())
            if f.start_ps > dur and fid < _first_collective_qp(sc)]


def _first_collective_qp(sc: Any) -> int:
    colls = sc.info.get("collectives") or ()
    return min((c.qp_first for c in colls), default=1 << 62)


def _collectives(sc: Any, dur: int) -> list[str]:
    return [f"[[collective]] #{c.index + 1} start_us: it starts at {show_time(c.start_ps)}"
            for c in sc.info.get("collectives") or () if c.start_ps > dur]


def _dcqcn(sc: Any, dur: int) -> list[str]:
    """DCQCN raises a cut rate on its increase timer or byte counter; when neither can fire
    within the run, a cut is never undone."""
    from sim.cc.dcqcn import preset_params

    seen = set()
    for node in sc.fabric.nodes.values():
        if getattr(node, "cc_name", None) != "dcqcn":
            continue
        params = dict(getattr(node, "cc_params", {}) or {})
        line = node.port.rate_bps
        key = (tuple(sorted(params.items())), line)
        if key in seen:
            continue
        seen.add(key)
        values = preset_params(params.pop("preset", None), line)
        values.update(params)
        period = values["rate_increase_period_ps"]
        nbytes = values["byte_counter_bytes"]
        by_bytes = -(-nbytes * 8 * 10**12 // line) if nbytes else None
        first = min(period, by_bytes) if by_bytes else period
        if first <= dur:
            continue
        counter = (f"; byte_counter_bytes {nbytes}: {show_time(by_bytes)} at line rate"
                   if by_bytes else "")
        return [f"cc dcqcn rate_increase_period_ps ({show_time(period)}{counter}): a rate "
                f"cut by a CNP rises again {show_time(first)} after it at the earliest"]
    return []

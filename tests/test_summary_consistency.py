"""summary.json is consistent with itself: every drop is counted (switch buffer,
TTL, no route, PFC watchdog, stalled receiver, ...), by reason in packets and bytes, and per flow
sent = delivered + dropped + in flight holds exactly, each counted on its own; the one-line
replay summary says when a deadlock was found, a watchdog fired and why frames were dropped.
Every built-in scenario runs (short), plus variants so that every drop reason occurs."""

from __future__ import annotations

import json
import os

import pytest

import wire
from sim import scenarios
from sim.cli.replay import summary_lines
from sim.study.results import run_scenario

FAST_WD = {"watchdog": True, "wd_poll_ms": 0.01, "wd_detect_polls": 2, "wd_restore_ms": 0.05}
CASES = {
    "incast": ("incast", {"senders": 4, "duration_ms": 0.1}),
    "incast_lossy": ("incast", {"senders": 8, "pfc": False, "buffer_kb": 200,
                                "duration_ms": 0.1}),
    "incast_lossy_dcqcn": ("incast", {"senders": 8, "pfc": False, "buffer_kb": 200,
                                      "cc": "dcqcn", "pmax": 0.5, "duration_ms": 0.1}),
    "late_joiner": ("late_joiner", {"join_ms": 0.03, "duration_ms": 0.08}),
    "leaf_spine": ("leaf_spine", {"pattern": "all_to_all", "duration_ms": 0.05}),
    "leaf_spine_lossy": ("leaf_spine", {"pattern": "incast", "pfc": False, "buffer_kb": 250,
                                        "duration_ms": 0.05}),
    "loop_deadlock": ("pfc_deadlock_loop", {"rate_frac": 0.3, "deadlock_confirm_us": 20,
                                            "duration_ms": 0.3}),
    "loop_lossy": ("pfc_deadlock_loop", {"ttl": 4, "rate_frac": 0.6, "pfc": False,
                                         "duration_ms": 0.1}),
    "ring_deadlock_watchdog": ("pfc_deadlock_ring", {"deadlock_confirm_us": 20,
                                                     "duration_ms": 0.3, **FAST_WD}),
    "storm": ("pfc_storm", {"stall_ms": 0.03, "duration_ms": 0.15}),
    "storm_watchdog": ("pfc_storm", {"stall_ms": 0.03, "duration_ms": 0.2, **FAST_WD}),
    "unfairness": ("pfc_unfairness", {"duration_ms": 0.1}),
    "ring": ("ring", {"duration_ms": 0.1}),
    "sue_packing": ("sue_packing", {"duration_us": 10}),
}
NO_ROUTE_TOML = """
[run]
duration_ms = 0.02
[topology]
kind = "custom"
switch_ids = [0, 1]
host_ids = [10, 20, 21]
links = [[10, 0, 0, 0], [20, 0, 1, 0], [21, 0, 1, 1]]
[[flows]]
src = 21
dst = 20
"""
CONSERVED = [f"{k}_{u}" for k in ("sent", "delivered", "dropped", "in_flight")
             for u in ("packets", "bytes")]


def _no_route(tmp) -> dict:
    """Switch 0 and switch 1 are not connected; frames replayed from host 10 to host 20 have no
    route at switch 0."""
    toml = tmp / "no_route.toml"
    toml.write_text(NO_ROUTE_TOML)
    pcap = tmp / "to20.pcap"
    with wire.CaptureWriter(pcap) as w:
        for i in range(5):
            w.write(wire.build({"ipv4": {"src": "10.0.0.10", "dst": "10.0.0.20"}, "udp": {},
                                "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": 5, "psn": i},
                                "payload": {"length": 100}}), ts_ns=1000 * i)
    return run_scenario(str(toml), out_dir=tmp / "out", plots=False, progress=False,
                        pcaps=[str(pcap)])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, tuple[dict, str]]:
    out = {}
    for key, (name, params) in CASES.items():
        d = tmp_path_factory.mktemp(key)
        out[key] = (run_scenario(name, params, out_dir=str(d / "o"), plots=False,
                                  progress=False), str(d / "o"))
    d = tmp_path_factory.mktemp("no_route")
    out["no_route"] = (_no_route(d), str(d / "out"))
    return out


def test_every_builtin_scenario_is_covered() -> None:
    assert {name for name, _ in CASES.values()} == set(scenarios.names())


@pytest.mark.parametrize("key", [*CASES, "no_route"])
def test_conservation_and_drop_totals(runs, key) -> None:
    s, out = runs[key]
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        assert json.load(f) == s  # the file is the returned summary
    t = s["totals"]
    for f in s["flows"]:
        for u in ("packets", "bytes"):
            assert f[f"sent_{u}"] == (f[f"delivered_{u}"] + f[f"dropped_{u}"]
                                      + f[f"in_flight_{u}"]), (key, f)
        assert f["delivered_bytes"] == f["bytes_delivered"]
    for k in CONSERVED:
        assert t[k] == sum(f[k] for f in s["flows"]), k
    # every drop, by reason, in packets and bytes; per port; and as logged in events.jsonl
    assert t["dropped_packets_by_reason"].keys() == t["dropped_bytes_by_reason"].keys()
    assert t["drops"] == sum(t["dropped_packets_by_reason"].values())
    assert t["drops"] == sum(p["drops"] for p in s["ports"])
    logged: dict[str, list[int]] = {}
    with open(os.path.join(out, "events.jsonl"), encoding="utf-8") as f:
        for line in f:
            e = json.loads(line)
            if e["event"] == "Dropped":
                c = logged.setdefault(e["reason"], [0, 0])
                c[0] += 1
                c[1] += e["nbytes"]
    assert logged == {r: [n, t["dropped_bytes_by_reason"][r]]
                      for r, n in t["dropped_packets_by_reason"].items()}
    # flows' data drops are a part of all drops (the rest: control and replayed frames)
    assert t["dropped_packets"] <= t["drops"]
    assert t["dropped_bytes"] <= sum(t["dropped_bytes_by_reason"].values())
    # the scenario-specific counters agree with the totals
    stalled = sum(n["rx_stall_dropped_packets"] for n in s.get("stalled_nics", []))
    assert stalled == t["dropped_packets_by_reason"].get("rx_stalled", 0)
    if "watchdog" in s:
        assert s["watchdog"]["dropped_packets"] == \
            t["dropped_packets_by_reason"].get("pfc_watchdog", 0)


def test_every_drop_reason_occurs(runs) -> None:
    seen = set()
    for s, _ in runs.values():
        seen |= set(s["totals"]["dropped_packets_by_reason"])
    assert {"ttl_expired", "no_route", "pfc_watchdog", "rx_stalled"} <= seen
    assert seen - {"ttl_expired", "no_route", "pfc_watchdog", "rx_stalled"}  # buffer drops
    # some flow ends with frames in flight and some with drops: the identity is not trivial
    flows = [f for s, _ in runs.values() for f in s["flows"]]
    assert any(f["in_flight_packets"] for f in flows)
    assert any(f["dropped_packets"] and f["delivered_packets"] for f in flows)


@pytest.mark.parametrize("key", [*CASES, "no_route"])
def test_one_line_summary_says_deadlock_watchdog_and_drop_reasons(runs, key) -> None:
    s, out = runs[key]
    line = summary_lines(s, 1.0, out)[0]
    t = s["totals"]
    assert f"drops {t['drops']}" in line
    for reason, n in t["dropped_packets_by_reason"].items():
        assert f"{reason} {n}" in line
    assert ("DEADLOCK" in line) == bool(s.get("deadlock", {}).get("detected"))
    fired = s.get("watchdog", {}).get("triggers", 0)
    assert (f"watchdog fired {fired} time(s)" in line) == bool(fired)


def test_deadlock_and_watchdog_cases_really_happen(runs) -> None:
    assert runs["loop_deadlock"][0]["deadlock"]["detected"]
    assert runs["ring_deadlock_watchdog"][0]["watchdog"]["triggers"]


def test_fabric_summary_counts_stalled_receiver_drops() -> None:
    """sim.fabric.Fabric.summary() (the library's figures) counts a stalled NIC's drops too."""
    from sim.events import Dropped
    from sim.scenarios.loader import build

    sc = build("pfc_storm", {"stall_ms": 0.03, "duration_ms": 0.15})
    seen: list = []

    class Log:
        def emit(self, e):
            if type(e) is Dropped:
                seen.append(e)

    sc.tracer_slot.target = Log()
    sc.fabric.run(sc.duration_ps)
    t = sc.fabric.summary()["totals"]
    assert any(e.reason == "rx_stalled" for e in seen)
    assert t["drops"] == len(seen)
    assert t["dropped_bytes_by_reason"]["rx_stalled"] == \
        sum(e.nbytes for e in seen if e.reason == "rx_stalled")

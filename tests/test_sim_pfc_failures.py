"""PFC failure scenarios: deadlock detection, switch/NIC watchdogs, pause storm, unfairness and
victim flows.  docs/explanation/pfc.md.

Runs are short (0.6-1.5 ms simulated at 100 Gb/s); watchdog times are scaled down from the
vendor defaults (100 ms polls, 200 ms) to tens of microseconds through the same parameters.
"""

from __future__ import annotations

import json

import pytest

from sim.events import (
    DeadlockCleared,
    Dropped,
    WatchdogRestored,
    WatchdogTriggered,
    event_from_dict,
)
from sim.fabric import star
from sim.health.deadlock import DeadlockDetector, find_cycles
from sim.net.switch import Switch
from sim.nic.host import Flow
from sim.scenarios import pfc_deadlock_loop, pfc_deadlock_ring, pfc_storm, pfc_unfairness
from sim.scenarios.common import mmu_config
from sim.study.results import run_scenario
from sim.trace import ListTracer
from sim.units import gbps

RING_CYCLE = ((0, 1, 3), (1, 1, 3), (2, 1, 3), (3, 1, 3))
# Scaled-down watchdog: 50 us polls, 2 polls to detect, 200 us restore.
FAST_WD = {"watchdog": True, "wd_poll_ms": 0.05, "wd_detect_polls": 2, "wd_restore_ms": 0.2}


def _run(mod, params, until_ms=None):
    sc = mod.build(params)
    sc.fabric.run(sc.duration_ps if until_ms is None else round(until_ms * 10**9))
    return sc


def _rx(sc):
    fab = sc.fabric
    return {fid: fab.nodes[f.dst].rx_bytes.get(fid, 0) for fid, f in fab.flows.items()}


def _gbps(b0, b1, span_ms):
    return {f: (b1[f] - b0[f]) * 8 / (span_ms * 1e-3) / 1e9 for f in b0}


# ---------------------------------------------------------------------- detector units

def test_find_cycles_canonical_rotation_and_no_cycle_in_a_chain() -> None:
    g = {(3, 1, 3): [(1, 1, 3)], (1, 1, 3): [(2, 1, 3)], (2, 1, 3): [(3, 1, 3)],
         (5, 0, 3): [(3, 1, 3)], (6, 0, 3): [(7, 0, 3)], (7, 0, 3): []}
    assert find_cycles(g) == [((1, 1, 3), (2, 1, 3), (3, 1, 3))]
    assert find_cycles({(0, 0, 3): [(0, 0, 3)]}) == [((0, 0, 3),)]
    assert find_cycles({(0, 0, 3): [(1, 0, 3)], (1, 0, 3): []}) == []


def test_new_events_round_trip() -> None:
    for e in (WatchdogTriggered(1, 2, 0, 3, "drop"), WatchdogRestored(2, 2, 0, 3, 17),
              DeadlockCleared(3, ((0, 1, 3), (1, 1, 3)))):
        assert event_from_dict(json.loads(json.dumps(e.to_dict()))) == e


# ---------------------------------------------------------------------- ring deadlock

@pytest.mark.parametrize("hops,below,above", [(2, 0.45, 0.55), (3, 0.3, 0.37)])
def test_ring_deadlocks_above_the_threshold_load_only(hops, below, above) -> None:
    common = {"hops": hops, "duration_ms": 0.8, "stop_ms": 0.4, "deadlock_confirm_us": 100.0}
    lo = _run(pfc_deadlock_ring, {**common, "rate_frac": below})
    hi = _run(pfc_deadlock_ring, {**common, "rate_frac": above})
    assert not lo.info["deadlock_detector"].deadlocks
    assert sum(sum(s.pause_sent.values()) for s in lo.fabric.nodes.values()
               if isinstance(s, Switch)) == 0  # toy model: no pause at all below C
    dl = hi.info["deadlock_detector"].deadlocks
    assert len(dl) == 1
    assert dl[0].cycle == RING_CYCLE
    assert dl[0].flows == (0, 1, 2, 3)
    assert dl[0].onset_ps < dl[0].detected_ps and dl[0].cleared_ps is None


def test_ring_deadlock_persists_after_the_sources_stop() -> None:
    sc = _run(pfc_deadlock_ring, {"rate_frac": 0.6, "duration_ms": 1.5, "stop_ms": 0.3,
                                  "deadlock_confirm_us": 100.0}, until_ms=0.5)
    b0 = _rx(sc)
    sc.fabric.run(sc.duration_ps)
    assert _rx(sc) == b0  # nothing at all delivered after the stop: frozen
    det = sc.info["deadlock_detector"]
    assert det.summary()["detected"] and det.summary()["cleared_ps"] is None
    for s in range(4):
        port = sc.fabric.nodes[s].ports[1]
        assert port.paused(3) and port.queue_bytes[3] > 0


def test_ordinary_congestion_with_pauses_drains_when_sources_stop_and_is_no_deadlock() -> None:
    p = {"pfc": True, "xoff_kb": 20.0, "buffer_kb": 1000.0, "cable_m": 10,
         "packet_bytes": 1082}
    rate = gbps(100)
    cfg, _ = mmu_config(p, 10, rate)
    fab, recv, senders = star(8, rate, 50_000, cfg)
    for i, h in enumerate(senders):
        fab.add_flow(Flow(i, h, recv, rate, tc=3, stop_ps=300_000_000))
    det = DeadlockDetector(fab, confirm_ps=50_000_000).start()
    fab.run(250_000_000)
    sw = fab.nodes[0]
    assert sum(sw.pause_sent.values()) > 10 and sw.ports[recv].queue_bytes[3] > 0
    fab.run(1_000_000_000)
    assert not det.deadlocks
    assert all(p.queue_bytes[3] == 0 and not p.paused(3) for p in sw.ports.values())


def test_watchdog_breaks_the_ring_deadlock_within_detection_plus_restore() -> None:
    sc = _run(pfc_deadlock_ring, {"rate_frac": 0.6, "duration_ms": 1.2, "stop_ms": 0.3,
                                  "deadlock_confirm_us": 50.0, **FAST_WD})
    det = sc.info["deadlock_detector"]
    assert det.deadlocks and det.deadlocks[0].cycle == RING_CYCLE
    poll, detect, restore = 50_000_000, 100_000_000, 200_000_000
    for dl in det.deadlocks:
        assert dl.cleared_ps is not None
        assert dl.cleared_ps - dl.onset_ps <= detect + poll + restore
    wds = sc.info["watchdogs"]
    assert sum(w.triggers for w in wds) >= 4 and sum(w.dropped_packets for w in wds) > 0
    # sources stopped, deadlock broken: the ring is empty and nothing is paused at the end
    for s in range(4):
        port = sc.fabric.nodes[s].ports[1]
        assert port.queue_bytes[3] == 0 and not port.paused(3)


def test_forward_watchdog_also_breaks_the_deadlock() -> None:
    sc = _run(pfc_deadlock_ring, {"rate_frac": 0.6, "duration_ms": 1.0, "stop_ms": 0.3,
                                  "deadlock_confirm_us": 50.0, **FAST_WD,
                                  "wd_action": "forward"})
    det = sc.info["deadlock_detector"]
    assert det.deadlocks and all(d.cleared_ps is not None for d in det.deadlocks)
    assert all(sc.fabric.nodes[s].ports[1].queue_bytes[3] == 0 for s in range(4))


# ---------------------------------------------------------------------- routing loop

def test_loop_deadlocks_above_its_measured_threshold() -> None:
    """ttl 16: the loop carries 8 x rate_frac.  0.14 (1.12 C) overloads it but keeps moving
    (XON on the PG's occupancy resumes each neighbour; measured threshold 0.152-0.154,
    docs/explanation/pfc.md); 0.16 (1.28 C, the default) deadlocks."""
    common = {"ttl": 16, "duration_ms": 0.8, "stop_ms": 0.4, "deadlock_confirm_us": 100.0}
    tracer = ListTracer()
    lo = pfc_deadlock_loop.build({**common, "rate_frac": 0.14})
    lo.tracer_slot.target = tracer
    lo.fabric.run(lo.duration_ps)
    hi = _run(pfc_deadlock_loop, {**common, "rate_frac": 0.16})
    assert not lo.info["deadlock_detector"].deadlocks
    ttl = [e for e in tracer.of_type(Dropped) if e.reason == "ttl_expired"]
    assert ttl and all(e.node == 0 for e in ttl)  # 16th switch crossing arrives at A
    dl = hi.info["deadlock_detector"].deadlocks
    assert [d.cycle for d in dl] == [((0, 1, 3), (1, 1, 3))] and dl[0].flows == (0,)
    assert dl[0].cleared_ps is None


def test_loop_threshold_moves_with_ttl() -> None:
    common = {"ttl": 8, "duration_ms": 0.6, "stop_ms": 0.3, "deadlock_confirm_us": 100.0}
    assert not _run(pfc_deadlock_loop, {**common, "rate_frac": 0.26}
                    ).info["deadlock_detector"].deadlocks
    assert _run(pfc_deadlock_loop, {**common, "rate_frac": 0.35}
                ).info["deadlock_detector"].deadlocks


# ---------------------------------------------------------------------- pause storm

def _storm(params, t0=0.5, t1=1.0):
    sc = pfc_storm.build({"duration_ms": t1, "stall_ms": 0.05, **params})
    sc.fabric.run(round(t0 * 10**9))
    b0 = _rx(sc)
    sc.fabric.run(sc.duration_ps)
    return sc, _gbps(b0, _rx(sc), t1 - t0)


def test_storm_spreads_to_victims_hop_by_hop() -> None:
    sc, rate = _storm({})
    roles = sc.info["roles"]
    assert roles == {0: "to_broken", 1: "bystander", 2: "victim", 3: "bystander",
                     4: "bystander", 5: "bystander"}
    assert rate[0] == 0 and rate[2] < 1.0  # victim stopped although its receiver is fine
    assert all(rate[f] > 35 for f, r in roles.items() if r == "bystander")
    fab = sc.fabric
    # the pause spread: last leaf -> broken NIC, spine 1 -> last leaf, leaf 0 uplink to
    # spine 1, the hosts of flows 0 and 2
    for node, port in ((3, 0), (1, 1), (2, 4), (4, 0), (6, 0)):
        assert fab.nodes[node].ports[port].paused_ps(3) > 400_000_000, (node, port)
    assert fab.nodes[5].ports[0].paused_ps(3) == 0  # bystander's NIC never paused
    assert not sc.info["deadlock_detector"].deadlocks  # a storm is no cycle


def test_storm_switch_watchdog_frees_victims_and_drops_only_traffic_to_the_broken_nic() -> None:
    tracer = ListTracer()
    sc = pfc_storm.build({"duration_ms": 1.0, "stall_ms": 0.05, **FAST_WD,
                          "wd_restore_ms": 5.0})
    sc.tracer_slot.target = tracer
    sc.fabric.run(round(0.5 * 10**9))
    b0 = _rx(sc)
    sc.fabric.run(sc.duration_ps)
    rate = _gbps(b0, _rx(sc), 0.5)
    assert rate[2] > 35  # the victim recovered (load 0.4 of 100G, goodput ~39)
    drops = tracer.of_type(Dropped)
    # only traffic to the broken NIC: flow 0's data and the RC ACKs of flow 3, which the
    # broken NIC sends
    assert drops and 0 in {e.flow for e in drops} <= {0, 3}
    assert {e.reason for e in drops if e.node != 7} == {"pfc_watchdog"}
    assert {e.reason for e in drops if e.node == 7} <= {"rx_stalled"}  # in flight at stall
    trig = tracer.of_type(WatchdogTriggered)
    assert [(e.node, e.port, e.action) for e in trig] == [(3, 0, "drop")]
    stall = 50_000_000
    assert trig[0].t_ps - stall <= 3 * 50_000_000  # detect (2 polls) + one poll of phase


def test_storm_nic_watchdog_stops_the_pauses() -> None:
    tracer = ListTracer()
    sc = pfc_storm.build({"duration_ms": 1.0, "stall_ms": 0.05, "nic_watchdog": True,
                          "nic_timeout_ms": 0.1})
    sc.tracer_slot.target = tracer
    sc.fabric.run(round(0.6 * 10**9))
    b0 = _rx(sc)
    sc.fabric.run(sc.duration_ps)
    rate = _gbps(b0, _rx(sc), 0.4)
    assert rate[2] > 35
    [t] = tracer.of_type(WatchdogTriggered)
    assert (t.node, t.action, t.t_ps) == (7, "stop_pause", 150_000_000)
    broken = sc.fabric.nodes[7]
    assert broken.rx_stall_dropped_packets > 0 and broken.rx_bytes.get(0, 0) < 1_000_000


# ---------------------------------------------------------------------- unfairness

def test_pfc_shares_per_ingress_port_not_per_flow() -> None:
    sc = _run(pfc_unfairness, {"victim": False, "duration_ms": 0.8}, until_ms=0.2)
    b0 = _rx(sc)
    sc.fabric.run(sc.duration_ps)
    rate = _gbps(b0, _rx(sc), 0.6)
    goodput = 100 * 1082 / (1082 + 24)  # frames without FCS/preamble/IFG
    assert rate[3] == pytest.approx(goodput / 2, rel=0.1)  # the lone flow: C/2
    for f in (0, 1, 2):
        assert rate[f] == pytest.approx(goodput / 6, rel=0.15)  # each of the three: C/6


def test_victim_with_an_idle_path_is_paused_with_the_congested_port() -> None:
    sc = _run(pfc_unfairness, {"victim": True, "victim_frac": 0.5, "duration_ms": 0.8},
              until_ms=0.2)
    b0 = _rx(sc)
    sc.fabric.run(sc.duration_ps)
    rate = _gbps(b0, _rx(sc), 0.6)
    assert sc.info["roles"][4] == "victim"
    assert rate[4] < 0.5 * 48.9  # far below its 50 Gb/s demand, its own link B->V idle
    vport = sc.fabric.nodes[0].ports[3]
    assert vport.busy_ps < 0.3 * sc.duration_ps and vport.paused_ps(3) == 0
    assert sc.fabric.nodes[1].ports[4].paused_ps(3) > 0.3 * sc.duration_ps  # A's uplink


# ---------------------------------------------------------------------- CLI / results

@pytest.mark.parametrize("name,params", [
    ("pfc_deadlock_ring", {"duration_ms": 0.6, "stop_ms": 0.3, "deadlock_confirm_us": 100.0}),
    ("pfc_deadlock_loop", {"duration_ms": 0.6, "stop_ms": 0.3, "deadlock_confirm_us": 100.0}),
])
def test_results_have_the_deadlock_and_runs_are_deterministic(name, params, tmp_path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / f"r{i}"
        s = run_scenario(name, params, seed=3, out_dir=str(out), plots=i == 0,
                          progress=False)
        outs.append(out)
        dl = s["deadlock"]
        assert dl["detected"] and dl["t_ps"] > 0 and dl["cycle"][0] == [0, 1, 3]
    for f in ("summary.json", "events.jsonl"):
        assert (outs[0] / f).read_bytes() == (outs[1] / f).read_bytes(), f
    ev = [json.loads(line) for line in (outs[0] / "events.jsonl").read_text().splitlines()]
    found = [e for e in ev if e["event"] == "DeadlockFound"]
    assert len(found) == 1 and found[0]["cycle"] == dl["cycle"]
    assert (outs[0] / "pfc_timeline.png").exists()


def test_storm_results_have_watchdog_counters(tmp_path) -> None:
    s = run_scenario("pfc_storm", {"duration_ms": 0.4, "stall_ms": 0.05, **FAST_WD},
                      out_dir=str(tmp_path / "o"), plots=False, progress=False)
    assert s["deadlock"]["detected"] is False
    wd = s["watchdog"]
    assert wd["triggers"] == 1 and wd["dropped_packets"] > 0
    ev = (tmp_path / "o" / "events.jsonl").read_text()
    assert '"WatchdogTriggered"' in ev


def test_watchdog_drop_releases_the_buffer_and_traffic_resumes_after_the_stall() -> None:
    from sim.health.watchdog import WatchdogConfig, attach_watchdogs

    p = {"pfc": True, "xoff_kb": 20.0, "buffer_kb": 1000.0, "cable_m": 10,
         "packet_bytes": 1082}
    rate = gbps(100)
    cfg, _ = mmu_config(p, 4, rate)
    tracer = ListTracer()
    fab, recv, (snd,) = star(1, rate, 50_000, cfg, tracer=tracer)
    fab.add_flow(Flow(0, snd, recv, rate // 2, tc=3))
    fab.nodes[recv].stall_rx(10_000_000, 200_000_000)
    [wd] = attach_watchdogs([fab.nodes[0]], WatchdogConfig(
        poll_ps=20_000_000, detect_polls=2, restore_ps=100_000_000))
    fab.run(150_000_000)
    sw = fab.nodes[0]
    assert wd.mitigating(recv, 3) and wd.dropped_packets > 0
    port = sw.ports[recv]
    assert port.queue_bytes[3] == 0 and not port.queues[3]
    assert sw.mmu.egress_bytes(recv, 3) == 0 and sw.mmu.resident_bytes <= 2 * 1082
    fab.run(250_000_000)  # restored at ~150-170 us, stall over at 200 us
    b0 = fab.nodes[recv].rx_bytes[0]
    fab.run(400_000_000)
    got = fab.nodes[recv].rx_bytes[0] - b0
    assert got * 8 / 150e-6 / 1e9 > 45  # the flow runs again at its 50 Gb/s
    assert sw.mmu.drops_by_reason == {}  # lossless otherwise: no MMU drop
    kinds = [type(e).__name__ for e in tracer.events
             if isinstance(e, WatchdogTriggered | WatchdogRestored)]
    assert kinds == ["WatchdogTriggered", "WatchdogRestored"]

"""Faults over time (sim.fabric.faults): scripted timelines with exact expectations.

The hosts of the hand-built fabrics are unreliable (``reliable=False``: no resends, no ACKs),
so every frame a fault destroys is counted once; RC's recovery is tests/test_rc.py's."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.events import Dequeued, Dropped
from sim.fabric.faults import Fault, Reroute, schedule_faults
from sim.fabric.topology import leaf_spine
from sim.net.mmu import MmuConfig, headroom_bytes
from sim.nic.host import Flow
from sim.trace import ListTracer
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps
from tests.helpers import LEAF_SPINE_FLOWS_TOML

RATE = gbps(100)
PROP = prop_delay_ps(10)
US = 10**6
T_DOWN, T_UP = 200 * US, 600 * US
RR = Reroute(50 * US, 10 * US)  # 60 us to reroute (short, for the tests)
UNRELIABLE = {"reliable": False}


def _cfg() -> MmuConfig:
    return MmuConfig(buffer_bytes=2_000_000, ports=8, reserved_bytes=2000,
                     headroom_bytes=headroom_bytes(RATE, 10, 1082, 1_000_000),
                     lossless_pgs=frozenset({3}), xoff_mode="static", xoff_bytes=20_000,
                     xon_delta_bytes=2000)


def _run(faults, *, until_ps=1000 * US, flows=((1, 4, 6), (2, 5, 7)), rate=None,
         reroute=RR, routing=None, checkpoints=(), seed=0):
    """2 leaves (2, 3), 2 spines (0, 1), 2 hosts per leaf; both flows hash to spine 1
    (leaf 2 port 3).  Returns (fabric, log, tracer, {checkpoint: port tx_bytes})."""
    tr = ListTracer()
    t = leaf_spine(2, 2, 2, RATE, PROP, _cfg(), ecmp=True, tracer=tr, seed=seed,
                   host_kw=UNRELIABLE)
    fab = t.fabric
    if routing is not None:
        from sim.fabric.lft import apply_routing
        apply_routing(fab, routing)
    for fid, s, d in flows:
        fab.add_flow(Flow(fid, s, d, rate or gbps(50), stop_ps=until_ps))
    log = schedule_faults(fab, faults, reroute=reroute)
    snaps = {}
    for c in checkpoints:
        fab.run(c)
        snaps[c] = {(p["node"], p["port"]): p["tx_bytes"] for p in fab.summary()["ports"]}
    fab.run(until_ps)
    return fab, log, tr, snaps


def _drops(tr, reason=None):
    return [e for e in tr.events if isinstance(e, Dropped) and reason in (None, e.reason)]


def test_link_down_drops_exactly_what_crosses_it_until_reroute() -> None:
    fab, log, tr, _snaps = _run([Fault("link_down", 2, 3, at_ps=T_DOWN, until_ps=T_UP)],
                               checkpoints=(T_DOWN, T_DOWN + RR.delay_ps))
    ser = frame_ser_time_ps(1082, RATE)
    # By hand: a host frame sent at s reaches leaf 2 at s + ser + prop and goes straight onto
    # leaf 2 port 3 (idle, cut-through); it is lost if that port is down when it arrives
    # ([t, t + 60 us)) or if it is still on the wire of the link at t (first bit at or
    # after t - ser - prop at the spine end).
    arrive = [e.t_ps + ser + PROP for e in tr.events
              if isinstance(e, Dequeued) and e.node in (4, 5)]
    want = sum(T_DOWN - ser - PROP <= a < T_DOWN + RR.delay_ps for a in arrive)
    got = _drops(tr)
    assert len(got) == want == log.drops["link_down"]
    assert all(T_DOWN <= e.t_ps < T_DOWN + RR.delay_ps for e in got)
    assert {e.reason for e in got} == {"link_down"}
    # summary: drops by reason, the fault timeline
    summ = fab.summary()
    assert summ["totals"]["drops"] == want
    assert summ["totals"]["dropped_bytes_by_reason"]["link_down"] == want * 1082
    assert [(e["t_ps"], e["what"]) for e in summ["faults"]["events"]] == [
        (T_DOWN, "link_down"), (T_DOWN + RR.delay_ps, "reroute"), (T_UP, "link_up"),
        (T_UP + RR.delay_ps, "reroute")]


def test_after_reroute_no_drops_all_on_the_other_spine_and_link_up_restores() -> None:
    t1, t2 = T_DOWN + RR.delay_ps, T_UP + RR.delay_ps
    fab, _log, tr, snaps = _run([Fault("link_down", 2, 3, at_ps=T_DOWN, until_ps=T_UP)],
                               checkpoints=(t1, T_UP, t2))
    assert not [e for e in _drops(tr) if e.t_ps >= t1]
    # from reroute to link up, nothing on leaf 2's uplink to spine 1, all on spine 0
    assert snaps[T_UP][(2, 3)] == snaps[t1][(2, 3)]
    assert snaps[T_UP][(2, 2)] - snaps[t1][(2, 2)] > 0
    # between link up and the reroute after it the group stays shrunk; then both hash back
    assert snaps[t2][(2, 3)] == snaps[T_UP][(2, 3)]
    final = {(p["node"], p["port"]): p["tx_bytes"] for p in fab.summary()["ports"]}
    assert final[(2, 3)] > snaps[t2][(2, 3)]
    # the flows' hash member again (spine 1); at most the frame on the wire at t2 after it
    assert final[(2, 2)] - snaps[t2][(2, 2)] <= 1082


def test_without_reroute_everything_after_down_is_lost() -> None:
    fab, log, _tr, _ = _run([Fault("link_down", 2, 3, at_ps=T_DOWN)],
                           reroute=Reroute(enabled=False))
    delivered = sum(f["bytes_delivered"] for f in fab.summary()["flows"])
    assert log.drops["link_down"] > 0 and delivered < 2 * gbps(50) * 300 * US // 8 // 10**12


@pytest.mark.parametrize("rate,want", [(1.0, "all"), (0.0, 0), (0.5, "half")])
def test_loss_rate(rate, want) -> None:
    fab, log, tr, _ = _run([Fault("loss", 2, 3, at_ps=0, loss_rate=rate)],
                           until_ps=400 * US)
    crossed = sum(1 for e in tr.events if isinstance(e, Dequeued) and e.node in (4, 5))
    got = log.drops.get("corrupt", 0)
    delivered = sum(f["bytes_delivered"] for f in fab.summary()["flows"]) // 1082
    if want == "all":
        assert delivered == 0 and got > 0
    elif want == 0:
        assert got == 0
    assert got + delivered <= crossed
    if want == "half":
        # binomial: n draws at p = 0.5, within 4 standard deviations of n / 2
        n = got + delivered
        assert abs(got - n / 2) < 4 * (n * 0.25) ** 0.5
        # seeded: the same seed draws the same losses, another seed others
        again = _run([Fault("loss", 2, 3, at_ps=0, loss_rate=rate)], until_ps=400 * US)[1]
        other = _run([Fault("loss", 2, 3, at_ps=0, loss_rate=rate)], until_ps=400 * US,
                     seed=1)[1]
        assert again.drops["corrupt"] == got != other.drops.get("corrupt", 0)


def test_ber_is_per_frame_probability() -> None:
    from sim.fabric.faults import loss_probability
    assert loss_probability(1082, 0.0) == 0.0
    assert loss_probability(1082, 1.0) == 1.0
    p = loss_probability(1082, 1e-6)
    assert abs(p - (1 - (1 - 1e-6) ** (8 * (1082 + 4 + 8 + 12)))) < 1e-12


def test_degraded_link_halves_the_rate_at_t() -> None:
    flows = ((1, 4, 6),)
    fab, _log, _tr, snaps = _run([Fault("degrade", 4, 0, at_ps=T_DOWN, rate_gbps=50)],
                               flows=flows, rate=RATE, until_ps=400 * US,
                               checkpoints=(100 * US, T_DOWN, 300 * US))
    before = snaps[T_DOWN][(4, 0)] - snaps[100 * US][(4, 0)]
    after = snaps[300 * US][(4, 0)] - snaps[T_DOWN][(4, 0)]
    assert abs(after * 2 - before) <= 2 * 1082
    assert fab.nodes[4].port.rate_bps == fab.nodes[2].ports[0].rate_bps == gbps(50)


def test_degrade_under_a_frame_in_flight_drops_nothing() -> None:
    """A link never down loses no frame: a frame that left at the old rate and arrives after
    the degrade (its serialisation time at the new rate reaching back before 0) is not
    counted as on the wire when the link went down."""
    ser = frame_ser_time_ps(1082, RATE)
    # the first frames are on leaf 2 -> spine 1 from ser + PROP (after the host's link)
    fab, log, tr, _snaps = _run([Fault("degrade", 2, 3, at_ps=ser + PROP + 1, rate_gbps=12.5)],
                                until_ps=20 * US)
    assert not _drops(tr) and log.drops == {}
    assert fab.nodes[2].ports[3].rate_bps == gbps(12.5)


def test_switch_down_reroutes_over_the_other_spine() -> None:
    t1 = T_DOWN + RR.delay_ps
    fab, log, tr, snaps = _run([Fault("switch_down", 1, at_ps=T_DOWN)],
                               checkpoints=(t1,))
    assert log.drops["link_down"] > 0
    assert not [e for e in _drops(tr) if e.t_ps >= t1]
    final = {(p["node"], p["port"]): p["tx_bytes"] for p in fab.summary()["ports"]}
    assert final[(2, 3)] - snaps[t1][(2, 3)] == 0 and final[(2, 2)] > snaps[t1][(2, 2)]


def test_nic_down_is_unreachable_no_route() -> None:
    _fab, log, tr, _ = _run([Fault("nic_down", 6, at_ps=T_DOWN)], until_ps=400 * US)
    # after the reroute the destination's leaf has no route: switches drop "no_route"
    assert _drops(tr, "no_route") and log.drops["link_down"] > 0


def test_static_routing_recomputed_without_the_dead_link() -> None:
    t1 = T_DOWN + RR.delay_ps
    fab, _log, tr, _snaps = _run([Fault("link_down", 2, 3, at_ps=T_DOWN)],
                               routing="static", checkpoints=(t1,))
    assert fab.nodes[2].routing == "static"
    assert not [e for e in _drops(tr) if e.t_ps >= t1]
    assert all(3 != out for out in fab.nodes[2].routes.values())


def test_up_down_routing_recomputed_by_up_down_without_the_dead_link() -> None:
    from sim.fabric.lft import updn_lft

    t1 = T_DOWN + RR.delay_ps
    fab, _log, tr, _snaps = _run([Fault("link_down", 2, 3, at_ps=T_DOWN)],
                                 routing="updn", checkpoints=(t1,))
    assert fab.ib_routing == "updn" and fab.updn_roots == {0, 1}
    assert not [e for e in _drops(tr) if e.t_ps >= t1]
    # the spines are the roots; after the reroute every switch has up/down's tables over
    # the links that are up (leaf 2's port 3 to spine 1 and its reverse gone)
    dead = {(2, 3), (1, fab.nodes[2].ports[3].peer_port)}
    want = updn_lft(fab, {0, 1}, down=dead)
    assert all(fab.nodes[s].routes == want[s] for s in want)
    assert all(3 != out for out in fab.nodes[2].routes.values())


def test_flap_deterministic_per_seed() -> None:
    f = [Fault("flap", 2, 3, at_ps=0, until_ps=800 * US, mtbf_ps=200 * US, mttr_ps=30 * US)]
    a = _run(f, seed=1)[1].summary()
    b = _run(f, seed=1)[1].summary()
    c = _run(f, seed=2)[1].summary()
    assert a == b and a["events"] != c["events"]
    downs = [e for e in a["events"] if e["what"] == "link_down"]
    assert downs and len(downs) == len([e for e in a["events"] if e["what"] == "link_up"])


def _eager_flap(seed, index, at_ps, until_ps, mtbf_ps, mttr_ps, horizon_ps):
    """The flap's (t_ps, what) drawn all at once, as the fault rng gives them: up
    Exp(mtbf), down Exp(mttr), ..., to ``until_ps`` or ``horizon_ps``."""
    import random
    rng = random.Random(f"flap:{seed}:{index}")
    out, t = [], at_ps
    while True:
        t += max(1, round(rng.expovariate(1.0 / mtbf_ps)))
        if (until_ps is not None and t >= until_ps) or t > horizon_ps:
            return out
        back = t + max(1, round(rng.expovariate(1.0 / mttr_ps)))
        out.append((t, "link_down"))
        if until_ps is not None and back >= until_ps:
            return [*out, (until_ps, "link_up")]
        out.append((back, "link_up"))
        t = back


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32), at=st.integers(0, 50), mtbf=st.integers(1, 80),
       mttr=st.integers(1, 40), until=st.one_of(st.none(), st.integers(51, 400)))
def test_flap_draws_lazily_the_same_times_and_keeps_one_event_pending(seed, at, mtbf, mttr,
                                                                      until) -> None:
    """A flap draws its next time when the event before it happens: the same times as drawn
    all at once, and at most one of its events is pending, however long it lasts."""
    t = leaf_spine(2, 2, 2, RATE, PROP, _cfg(), ecmp=True, seed=seed)
    fab = t.fabric
    before = len(fab.engine)
    f = Fault("flap", 2, 3, at_ps=at * US, until_ps=None if until is None else until * US,
              mtbf_ps=mtbf * US, mttr_ps=mttr * US)
    log = schedule_faults(fab, [f], reroute=Reroute(enabled=False))
    assert len(fab.engine) <= before + 1
    end = 500 * US
    for stop in range(50 * US, end + 1, 50 * US):
        fab.run(stop)
        assert len(fab.engine) <= before + 1
    got = [(e["t_ps"], e["what"]) for e in log.events]
    assert got == [e for e in _eager_flap(seed, 0, at * US, f.until_ps, mtbf * US, mttr * US,
                                          end) if e[0] <= end]


def test_overlapping_faults_keep_the_link_down_until_the_last_ends() -> None:
    """Two link_down faults on one link, 200-400 and 300-600 us, and a flap on it: the log
    has one interval, up only when no fault holds the link down, and frames are lost until
    then (no reroute: the flows keep hashing to the dead port)."""
    from sim.study.fault_report import fault_intervals
    _fab, log, tr, _ = _run([Fault("link_down", 2, 3, at_ps=T_DOWN, until_ps=400 * US),
                            Fault("link_down", 2, 3, at_ps=300 * US, until_ps=T_UP),
                            Fault("flap", 2, 3, at_ps=250 * US, until_ps=550 * US,
                                  mtbf_ps=10 * US, mttr_ps=10 * US)],
                           until_ps=700 * US, reroute=Reroute(enabled=False))
    assert [(e["t_ps"], e["what"]) for e in log.events] == [(T_DOWN, "link_down"),
                                                             (T_UP, "link_up")]
    [iv] = fault_intervals(log.events, 700 * US)
    assert (iv["kind"], iv["start_ps"], iv["end_ps"]) == ("link_down", T_DOWN, T_UP)
    lost = [e.t_ps for e in _drops(tr, "link_down")]
    assert any(400 * US < t < T_UP for t in lost) and not any(t > T_UP + US for t in lost)
    # another kind on the same link: each fault its own interval, the link down in their union
    _fab, log, tr, _ = _run([Fault("nic_down", 4, at_ps=T_DOWN, until_ps=400 * US),
                            Fault("link_down", 4, 0, at_ps=300 * US, until_ps=T_UP)],
                           until_ps=700 * US, reroute=Reroute(enabled=False))
    assert [(e["t_ps"], e["what"]) for e in log.events] == [
        (T_DOWN, "nic_down"), (300 * US, "link_down"), (400 * US, "nic_up"), (T_UP, "link_up")]
    lost = [e.t_ps for e in _drops(tr, "link_down")]
    assert any(400 * US < t < T_UP for t in lost) and not any(t > T_UP + US for t in lost)


def test_overlapping_loss_faults_each_keep_losing_until_their_end() -> None:
    """Two loss faults on one link, 100-300 and 200-400 us, every frame lost: frames are lost
    until 400 us (the first one's end left the second active), one interval in the log."""
    _fab, log, tr, _ = _run([Fault("loss", 2, 3, at_ps=100 * US, until_ps=300 * US,
                                   loss_rate=1.0),
                             Fault("loss", 2, 3, at_ps=T_DOWN, until_ps=400 * US,
                                   loss_rate=1.0)],
                            until_ps=500 * US, reroute=Reroute(enabled=False))
    assert [(e["t_ps"], e["what"]) for e in log.events] == [(100 * US, "loss_start"),
                                                             (400 * US, "loss_end")]
    lost = [e.t_ps for e in _drops(tr, "corrupt")]
    assert any(350 * US < t < 400 * US for t in lost)
    assert not any(t > 400 * US + US for t in lost) and min(lost) >= 100 * US


def test_no_faults_no_summary_key() -> None:
    fab, _log, _tr, _ = _run([], until_ps=50 * US)
    assert "faults" in fab.summary()  # scheduled (even empty): the timeline is there
    t = leaf_spine(2, 2, 2, RATE, PROP, _cfg(), ecmp=True)
    assert "faults" not in t.fabric.summary()


def test_bad_fault_targets() -> None:
    t = leaf_spine(2, 2, 2, RATE, PROP, _cfg(), ecmp=True)
    with pytest.raises(ValueError, match="port 9"):
        schedule_faults(t.fabric, [Fault("link_down", 2, 9)])
    with pytest.raises(ValueError, match="not a switch"):
        schedule_faults(t.fabric, [Fault("switch_down", 4)])
    with pytest.raises(ValueError, match="kind"):
        Fault("melt", 2)
    with pytest.raises(ValueError, match="until"):
        Fault("link_down", 2, 3, at_ps=5, until_ps=5)


_FILE = """description = "leaf_spine, a spine link down at 200 us and up at 600 us"
[run]
duration_ms = 0.7
seed = 1
""" + LEAF_SPINE_FLOWS_TOML + """[[faults]]
kind = "link_down"
node = 2
port = 3
at_us = 200.0
until_us = 600.0
detect_us = 50.0
converge_us = 10.0
"""


def test_fabric_file_faults_timeline_and_drops(tmp_path) -> None:
    import json

    from sim.cli import main
    f = tmp_path / "f.toml"
    f.write_text(_FILE)
    out = tmp_path / "o"
    assert main(["replay", str(f), "--out", str(out), "--no-plots", "--no-capture"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert [(e["t_ps"], e["what"]) for e in s["faults"]["events"]] == [
        (T_DOWN, "link_down"), (T_DOWN + RR.delay_ps, "reroute"), (T_UP, "link_up"),
        (T_UP + RR.delay_ps, "reroute")]
    # the faults drop only link_down; RC's receivers drop what arrives out of sequence
    assert set(s["faults"]["drops"]["packets_by_reason"]) == {"link_down"}
    assert set(s["totals"]["dropped_packets_by_reason"]) <= {
        "link_down", "out_of_sequence", "duplicate"}


@pytest.mark.parametrize("line,msg", [
    ("port = 9", "[[faults]] #1 port: node 2 port 9: no such port"),
    ('kind = "flap"', "[[faults]] #1 mtbf_us: kind 'flap' needs a positive mtbf_us"),
    ("wobble = 1", "[[faults]] #1 unknown parameter(s) ['wobble']"),
    ("until_us = 100.0", "[[faults]] #1 until_us: must be after at_us"),
])
def test_fabric_file_fault_errors_one_line_exit_2(tmp_path, capsys, line, msg) -> None:
    from sim.cli import main
    key = line.split(" = ")[0]
    head, entry = _FILE.split("[[faults]]\n")
    entry = "\n".join(x for x in entry.splitlines() if not x.startswith(f"{key} = "))
    f = tmp_path / "f.toml"
    f.write_text(f"{head}[[faults]]\n{line}\n{entry}\n")
    assert main(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and msg in err, err


def test_straggler_rank_starts_every_transfer_late() -> None:
    from sim.fabric.rail import collective_star
    from sim.workloads.collective import run_schedule
    from sim.workloads.nccl import schedule
    sch = schedule("allreduce", 4, 2**18, "float", nchannels=1)

    def go(delay):
        f = collective_star(4, link_gbps=100, prop_ps=500_000)
        return run_schedule(sch, f.fabric, f.ranks, delay_ps=delay)

    base, late = go(None), go({1: 10 * US})
    first = [t for t in sch.transfers if not t.depends_on]
    for t in first:  # no dependency: posted at 0, the straggler's 10 us late
        assert late.start_ps[t.id] == (10 * US if t.src == 1 else 0) == base.start_ps[t.id] + (
            10 * US if t.src == 1 else 0)
    assert all(late.start_ps[t.id] >= 10 * US for t in sch.transfers if t.src == 1)
    assert late.time_ps >= base.time_ps + 10 * US
    with pytest.raises(ValueError, match="delay_ps"):
        go({7: 1})


@settings(max_examples=15)
@given(at=st.integers(1, 300), dur=st.integers(1, 200), port=st.sampled_from([2, 3]))
def test_every_frame_delivered_or_dropped_in_the_window(at, dur, port) -> None:
    """Any down interval on either uplink: frames are conserved (sent = delivered + dropped,
    after the flows stop and the fabric drains) and every drop is inside
    [down, reroute) for the down and the link-up reroute does not lose frames."""
    t0, t1 = at * US, (at + dur) * US
    tr = ListTracer()
    t = leaf_spine(2, 2, 2, RATE, PROP, _cfg(), ecmp=True, tracer=tr, host_kw=UNRELIABLE)
    fab = t.fabric
    for fid, s, d in ((1, 4, 6), (2, 5, 7)):
        fab.add_flow(Flow(fid, s, d, gbps(50), stop_ps=600 * US))
    log = schedule_faults(fab, [Fault("link_down", 2, port, at_ps=t0, until_ps=t1)],
                          reroute=RR)
    fab.run(700 * US)
    sent = sum(fab.nodes[h].sent_packets[f] for f, h in ((1, 4), (2, 5)))
    got = sum(fab.nodes[d].rx_packets.get(f, 0) for f, d in ((1, 6), (2, 7)))
    drops = _drops(tr)
    assert sent == got + len(drops)
    assert all(t0 <= e.t_ps < t0 + RR.delay_ps and e.reason == "link_down" for e in drops)
    assert len(drops) == log.drops.get("link_down", 0)


def test_deadlock_detector_and_watchdog_keep_working_through_faults() -> None:
    """The PFC ring deadlock of tests/test_sim_pfc_failures.py with frame loss and a degraded
    link on the hosts' links: still found (the same cycle) and broken by the watchdog."""
    from sim.scenarios import pfc_deadlock_ring
    sc = pfc_deadlock_ring.build({"rate_frac": 0.6, "duration_ms": 1.2, "stop_ms": 0.3,
                                  "deadlock_confirm_us": 50.0, "watchdog": True,
                                  "wd_poll_ms": 0.05, "wd_detect_polls": 2,
                                  "wd_restore_ms": 0.2})
    log = schedule_faults(sc.fabric, [Fault("loss", 4, 0, loss_rate=0.01),
                                      Fault("degrade", 5, 0, at_ps=100 * US, rate_gbps=50)])
    sc.fabric.run(sc.duration_ps)
    det = sc.info["deadlock_detector"]
    assert det.deadlocks and det.deadlocks[0].cycle == tuple((s, 1, 3) for s in range(4))
    assert all(d.cleared_ps is not None for d in det.deadlocks)
    assert sum(w.triggers for w in sc.info["watchdogs"]) >= 4
    assert log.drops["corrupt"] > 0


def test_overlapping_degrades_the_slowest_holds_until_the_last_ends() -> None:
    """50G from 100 to 300 us and 25G from 200 to 400 us on one link: 25G until 400 us (the
    first one's end must not restore the full rate while the second still holds)."""
    faults = [Fault("degrade", 4, 0, at_ps=100 * US, until_ps=300 * US, rate_gbps=50),
              Fault("degrade", 4, 0, at_ps=200 * US, until_ps=400 * US, rate_gbps=25)]
    _fab, log, _tr, _ = _run(faults, flows=((1, 4, 6),), until_ps=500 * US)
    assert [(e["t_ps"], e["rate_bps"]) for e in log.events if e["what"] == "rate"] == [
        (100 * US, gbps(50)), (200 * US, gbps(25)), (400 * US, RATE)]


@settings(max_examples=40, deadline=None)
@given(spans=st.lists(st.tuples(st.integers(1, 30), st.integers(1, 30), st.sampled_from(
    [10, 25, 50])), min_size=1, max_size=4))
def test_overlapping_degrades_rate_is_the_slowest_active(spans) -> None:
    """Whatever the overlaps, the link's rate at every moment is the slowest of the degrades
    holding it, and the original rate when none does."""
    faults = [Fault("degrade", 4, 0, at_ps=a * 10 * US, until_ps=(a + d) * 10 * US,
                    rate_gbps=r) for a, d, r in spans]
    tr = ListTracer()
    t = leaf_spine(2, 2, 2, RATE, PROP, _cfg(), ecmp=True, tracer=tr)
    schedule_faults(t.fabric, faults, reroute=RR)
    port = t.fabric.nodes[4].port
    for step in range(0, 70):
        now = step * 10 * US + 5 * US  # between the fault times
        t.fabric.run(now)
        held = [gbps(f.rate_gbps) for f in faults if f.at_ps <= now < f.until_ps]
        assert port.rate_bps == (min(held) if held else RATE), (now, spans)


def test_overlapping_slow_pcie_restores_only_after_the_last() -> None:
    from sim.fabric.rail import collective_star
    from sim.nic.pcie import PcieLink
    f = collective_star(2, link_gbps=100, prop_ps=500_000,
                        host_kw={"pcie_write_bps": 400 * 10**9, "pcie_read_bps": 400 * 10**9})
    h = f.fabric.nodes[f.ranks[1]]
    schedule_faults(f.fabric, [
        Fault("slow_pcie", h.node_id, at_ps=5 * US, until_ps=9 * US, pcie_gen=4, pcie_lanes=8),
        Fault("slow_pcie", h.node_id, at_ps=7 * US, until_ps=12 * US, pcie_gen=3,
              pcie_lanes=4)])
    g4, g3 = PcieLink(4, 8), PcieLink(3, 4)
    for t_us, want in ((6, g4), (8, g3), (10, g3)):
        f.fabric.run(t_us * US)
        assert (h.pcie_write_bps, h.pcie_read_bps) == (want.write_bps(), want.read_bps())
    f.fabric.run(13 * US)
    assert (h.pcie_write_bps, h.pcie_read_bps) == (400 * 10**9, 400 * 10**9)

"""Ports, PFC reaction, switch admission and ECN marking, wired into fabrics: exact pause timing, an
8:1 incast that PFC keeps lossless, and what breaks without it."""

from __future__ import annotations

import itertools

import pytest

from sim.engine import Engine
from sim.events import CEMarked, Dequeued, Dropped, PauseSent
from sim.fabric import star
from sim.net.mmu import MmuConfig, headroom_bytes
from sim.net.port import Port
from sim.net.switch import EcnConfig, pfc_packet
from sim.nic.host import Flow
from sim.packet import SimPacket
from sim.trace import ListTracer
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps
from wire.pfc import quanta_to_ps

RATE = gbps(100)


class Sink:
    node_id = 99

    def __init__(self) -> None:
        self.got: list[tuple[int, SimPacket]] = []

    def receive(self, port: int, pkt: SimPacket) -> None:
        self.got.append((port, pkt))


def _port() -> tuple[Engine, Port, ListTracer]:
    eng, tr = Engine(), ListTracer()
    p = Port(eng, 1, 0, RATE, tracer=tr)
    p.connect(Sink(), 0, 0)
    return eng, p, tr


def _starts(tr: ListTracer, tc: int) -> list[int]:
    return [e.t_ps for e in tr.of_type(Dequeued) if e.queue == tc]


def test_pause_holds_new_frames_for_exactly_quanta_x_512_bit_times() -> None:
    eng, p, tr = _port()
    for i in range(4):
        p.enqueue(SimPacket(i, 0, 1082, tc=3))
    ser = frame_ser_time_ps(1082, RATE)
    eng.schedule(100, p.pause, 3, 1000)          # during the first frame
    eng.run()
    starts = _starts(tr, 3)
    resume = 100 + quanta_to_ps(1000, RATE)      # 100 + 1000 x 5120 ps
    assert resume == 100 + 5_120_000
    assert starts == [0, resume, resume + ser, resume + 2 * ser]  # the frame in flight completed


def test_refresh_extends_and_quanta_zero_resumes() -> None:
    eng, p, tr = _port()
    for i in range(3):
        p.enqueue(SimPacket(i, 0, 1082, tc=3))
    eng.schedule(10, p.pause, 3, 1000)
    eng.schedule(2_000_000, p.pause, 3, 1000)    # refresh before expiry: extends
    eng.run(until_ps=3_000_000)
    assert _starts(tr, 3) == [0]
    eng.schedule(4_000_000, p.pause, 3, 0)       # XON: resume at once
    eng.run()
    assert _starts(tr, 3)[1] == 4_000_000
    assert p.paused_ps(3) == 4_000_000 - 10


def test_other_priorities_keep_flowing() -> None:
    eng, p, tr = _port()
    for i in range(3):
        p.enqueue(SimPacket(i, 0, 1082, tc=3))
        p.enqueue(SimPacket(10 + i, 0, 1082, tc=1))
    eng.schedule(1, p.pause, 3, 0xFFFF)
    eng.run(until_ps=10_000_000)
    assert len(_starts(tr, 1)) == 3
    assert len(_starts(tr, 3)) == 1  # only the one that started before the pause


def test_pfc_frames_are_real_and_bypass_pause() -> None:
    eng, p, _tr = _port()
    p.enqueue(SimPacket(1, 0, 1082, tc=7))
    eng.schedule(1, p.pause, 7, 0xFFFF)
    eng.schedule(2, p.send_control, pfc_packet(2, 2, 1, 0, 3, 0xFFFF))
    eng.run(until_ps=1_000_000)
    sink = p.peer
    assert [pkt.id for _port_i, pkt in sink.got] == [1, 2]  # control went despite tc 7 pause
    import wire

    d = wire.dissect(bytes(sink.got[1][1].frame))
    assert d["pfc"]["class_enable"] == 8 and d["pfc"]["quanta"][3] == 0xFFFF and not d.problems


def _incast(senders: int = 8, *, lossless: bool = True, headroom: int | None = None,
            ecn: EcnConfig | None = None, seed: int = 0, duration_ps: int = 1_000_000_000,
            tracer=None):
    hr = headroom_bytes(RATE, 10, 1082, 1_000_000) if headroom is None else headroom
    cfg = MmuConfig(buffer_bytes=1_000_000, ports=senders + 2, reserved_bytes=2000,
                    headroom_bytes=hr if lossless else 0,
                    lossless_pgs=frozenset({3}) if lossless else frozenset(),
                    xoff_mode="static", xoff_bytes=20_000, xon_delta_bytes=2000)
    fab, recv, hosts = star(senders, RATE, prop_delay_ps(10), cfg, seed=seed, ecn=ecn,
                            tracer=tracer)
    for i, h in enumerate(hosts):
        fab.add_flow(Flow(i, h, recv, RATE))
    fab.run(duration_ps)
    return fab.summary(), recv


def test_8_to_1_incast_with_pfc_is_lossless_and_keeps_the_bottleneck_busy() -> None:
    s, recv = _incast()
    assert s["totals"]["drops"] == 0
    assert s["totals"]["pauses_sent"] > 0
    bott = next(p for p in s["ports"] if p["node"] == 0 and p["port"] == recv)
    assert bott["busy_ps"] >= 0.999 * s["duration_ps"]
    got = [f["bytes_delivered"] for f in s["flows"]]
    assert max(got) < 1.15 * min(got)  # PFC shares the bottleneck per ingress port
    senders_paused = [p for p in s["ports"] if p["node"] != 0 and p["paused_ps"] > 0]
    assert len(senders_paused) == 8


def test_without_pfc_the_incast_drops() -> None:
    s, _ = _incast(lossless=False)
    assert s["totals"]["drops"] > 0
    assert s["totals"]["pauses_sent"] == 0
    assert set(s["totals"]["dropped_bytes_by_reason"]) <= {"lossy_over_threshold", "shared_full"}


def test_pfc_without_headroom_drops() -> None:
    """The headroom formula is what keeps PFC lossless: with none, frames still in flight
    after XOFF are dropped."""
    s, _ = _incast(headroom=0)
    assert s["totals"]["dropped_bytes_by_reason"].get("headroom_full", 0) > 0


def test_ecn_marks_and_determinism() -> None:
    ecn = EcnConfig(kmin_bytes=5_000, kmax_bytes=200_000, pmax=0.01)
    t1, t2, t3 = ListTracer(), ListTracer(), ListTracer()
    s1, _ = _incast(ecn=ecn, seed=7, tracer=t1, duration_ps=200_000_000)
    s2, _ = _incast(ecn=ecn, seed=7, tracer=t2, duration_ps=200_000_000)
    _incast(ecn=ecn, seed=8, tracer=t3, duration_ps=200_000_000)
    assert s1 == s2 and t1.events == t2.events
    assert s1["totals"]["ce_marked"] > 0
    assert sum(f["ce_received"] for f in s1["flows"]) == s1["totals"]["ce_marked"]
    marks1 = [e.packet_id for e in t1.of_type(CEMarked)]
    marks3 = [e.packet_id for e in t3.of_type(CEMarked)]
    assert marks1 != marks3  # the seed drives the marking draws
    assert all(e.quanta in (0, 0xFFFF) for e in t1.of_type(PauseSent))
    assert not t1.of_type(Dropped)


def test_ecn_probability_curve() -> None:
    ecn = EcnConfig(kmin_bytes=100, kmax_bytes=300, pmax=0.2)
    assert [ecn.probability(b) for b in (0, 100, 200, 300, 301)] == [0, 0, 0.1, 0.2, 1.0]
    with pytest.raises(ValueError):
        EcnConfig(kmin_bytes=10, kmax_bytes=5, pmax=0.1)


class _Halve:
    """A test algorithm: halves the rate on every CNP, with a timer that restores it."""

    def __init__(self, *, line_rate_bps: int, preset=None) -> None:
        self.line, self.rate, self.due = line_rate_bps, line_rate_bps, None
        self.cnp_times: list[int] = []

    rate_bps = property(lambda self: self.rate)
    target_rate_bps = property(lambda self: self.line)
    alpha = property(lambda self: 0.5)

    def on_tx(self, nbytes: int, now_ps: int) -> None:
        pass

    def on_cnp(self, now_ps: int) -> None:
        self.cnp_times.append(now_ps)
        self.rate = max(self.rate // 2, 10**9)
        self.due = now_ps + 100_000_000

    def on_timer(self, now_ps: int) -> None:
        self.rate, self.due = self.line, None

    def next_timer_ps(self):
        return self.due


def test_cnps_reach_the_sender_rate_control() -> None:
    """NP: CE marks become real CNP frames, at most one per 50 us per flow; RP: the plug-in
    sees them, its rate changes are traced and pace the flow, and its timer fires."""
    import sim.cc as cc
    from sim.events import CNPSent, RateChanged

    if "test_halve" not in cc.names():
        cc.register("test_halve", _Halve)
    tr = ListTracer()
    ecn = EcnConfig(kmin_bytes=1_000, kmax_bytes=50_000, pmax=0.2)
    hr = headroom_bytes(RATE, 10, 1082, 1_000_000)
    cfg = MmuConfig(buffer_bytes=1_000_000, ports=4, reserved_bytes=2000, headroom_bytes=hr,
                    lossless_pgs=frozenset({3}), xoff_mode="static", xoff_bytes=20_000,
                    xon_delta_bytes=2000)
    fab, recv, hosts = star(2, RATE, prop_delay_ps(10), cfg, ecn=ecn, tracer=tr)
    for h in hosts:
        fab.nodes[h].cc_name = "test_halve"
    for i, h in enumerate(hosts):
        fab.add_flow(Flow(i, h, recv, RATE))
    fab.run(500_000_000)
    cnps = tr.of_type(CNPSent)
    assert cnps, "no CNP sent"
    for flow in (0, 1):
        ts = [e.t_ps for e in cnps if e.flow == flow]
        assert all(b - a >= 50_000_000 for a, b in itertools.pairwise(ts))
    got = sum(len(fab.nodes[h].cc[i].cnp_times) for i, h in enumerate(hosts))
    assert got == fab.nodes[recv].cnp_sent == len(cnps)
    changes = tr.of_type(RateChanged)
    assert any(e.rate_bps < RATE for e in changes) and any(e.rate_bps == RATE for e in changes)

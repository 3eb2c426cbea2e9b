"""The InfiniBand link layer in the simulator: per-VL credits (IBA 7.9), VL arbitration
(IBA 7.6.9), credit deadlocks, fabric files.  docs/explanation/infiniband.md, sections
"Credits (IBA 7.9)" and "VL arbitration (IBA 7.6.9)"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.cli import main
from sim.engine import Engine
from sim.fabric.core import star
from sim.fabric.topology import ring
from sim.flowctl.credit import cbfc_free, cbfc_lose
from sim.flowctl.ib import (
    IbConfig,
    attach_ib,
    fccl_value,
    ib_blocks,
    may_send,
)
from sim.health.deadlock import DeadlockDetector
from sim.net.mmu import MmuConfig
from sim.net.port import Port, check_scheduler, vlarb_weights
from sim.nic.host import Flow
from sim.packet import SimPacket
from sim.units import gbps, ser_time_ps

RATE = gbps(100)


# --------------------------------------------------------------- arithmetic
def test_credit_arithmetic_by_hand() -> None:
    assert [ib_blocks(n) for n in (0, 1, 64, 65, 1024, 1082, 4096)] == [1, 1, 1, 2, 16, 17, 64]
    # room 2048 (the most the limit is ever ahead): a 2048-block packet fits, 2049 does not
    assert may_send(0, 2048, 2048) and not may_send(0, 2048, 2049)
    assert may_send(100, 164, 64) and not may_send(100, 164, 65)
    # wrap at 4096: FCTBS 4090, limit 10 blocks ahead = (4090 + 10) mod 4096 = 4
    assert may_send(4090, 4, 10) and not may_send(4090, 4, 11)
    assert may_send(4095, 0, 1) and not may_send(4095, 0, 2)
    # the limit is the sent count itself: nothing fits
    assert not may_send(7, 7, 1)
    # FCCL = (ABR + min(free, 2048)) mod 4096
    assert fccl_value(4000, 200) == 104
    assert fccl_value(100, 5000) == 2148
    assert fccl_value(4095, 2048) == 2047


@given(st.integers(0, 4095), st.integers(0, 2048), st.integers(1, 2048))
def test_modular_rule_is_the_unbounded_rule(fctbs: int, room: int, blocks: int) -> None:
    """With the limit at most 2048 ahead, the 12-bit rule is exactly "blocks <= room", at
    every position of the wrap."""
    assert may_send(fctbs, (fctbs + room) % 4096, blocks) == (blocks <= room)


@given(st.lists(st.tuples(st.integers(1, 200), st.booleans()), min_size=1, max_size=300),
       st.integers(1, 2048))
def test_counters_through_many_wraps(ops, buffer_blocks: int) -> None:
    """Send/free sequences: the 12-bit FCTBS/ABR/FCCL give the same answers as unbounded
    integers (sent, freed) for thousands of blocks, through many wraps."""
    fctbs = abr = 0
    sent = freed = 0
    occupied = 0
    for blocks, free_one in ops * 20:
        fccl = fccl_value(abr, buffer_blocks - occupied)
        fits = blocks <= buffer_blocks - occupied
        assert may_send(fctbs, fccl, blocks) == fits
        if fits:
            fctbs = (fctbs + blocks) % 4096
            abr = (abr + blocks) % 4096
            sent += blocks
            occupied += blocks
        if free_one and occupied:
            occupied -= min(occupied, blocks)
            freed = sent - occupied
    assert fctbs == sent % 4096 and sent - freed == occupied


# ------------------------------------------------------------- one link
class _Sink:
    """A receiver that keeps what it gets (frees nothing by itself)."""

    def __init__(self, node_id: int = 9) -> None:
        self.node_id = node_id
        self.got: list[tuple[int, SimPacket]] = []
        self.engine: Engine | None = None

    def receive(self, port: int, pkt: SimPacket) -> None:
        assert self.engine is not None
        self.got.append((self.engine.now_ps, pkt))


def _link(buffer_bytes: int, prop_ps: int = 100_000, **port_kw):
    eng = Engine(0)
    p = Port(eng, 1, 0, RATE, **port_kw)
    back = Port(eng, 9, 0, RATE)
    sink = _Sink()
    sink.engine = eng
    p.connect(sink, 0, prop_ps)
    a, _b = attach_ib(p, back, IbConfig(vl_buffer_bytes=buffer_bytes))
    starts: list[tuple[int, int]] = []
    p.taps.append(lambda t, pkt: starts.append((t, pkt.id)))
    return eng, p, sink, a, starts


def test_blocked_exactly_when_the_buffer_is_full_and_resumed_by_the_fc_packet() -> None:
    # 4096-byte VL buffer = 64 blocks; 1024-byte packets = 16 blocks: 4 fit, the 5th waits
    eng, p, sink, link, starts = _link(4096)
    pkts = [SimPacket(i, 0, 1024, tc=3) for i in range(6)]
    for pk in pkts:
        p.enqueue(pk)
    eng.run(10**7)
    assert [i for _, i in starts] == [0, 1, 2, 3]
    assert link.fctbs[3] == 64 and link.cr[3] == 64 and link.occupied_blocks[3] == 64
    assert link.waiting(3, 1024) and link.waiting(3, 64)  # no room left at all
    assert link.max_occupied_blocks[3] == 64
    # the receiver frees one packet at T: its FC packet (FCCL 80) reaches the sender at
    # T + prop, when packet 4 starts, exactly
    t_free = 20_000_000
    eng.schedule(t_free, cbfc_free, sink.got[0][1])
    eng.run(40_000_000)
    assert starts[4] == (t_free + 100_000, 4)
    # one flow-control packet per change of FCCL: arrivals do not change it below the 2048
    # cap (ABR + b, free - b), so the only one is the free's
    assert len(starts) == 5 and link.cr[3] == 80 and link.fc_packets == 1


def test_credit_stall_time_is_the_wait_for_the_fc_packet() -> None:
    eng, p, sink, link, starts = _link(2048, prop_ps=50_000)
    for i in range(3):
        p.enqueue(SimPacket(i, 0, 1024, tc=3))
    eng.run(10**6)
    # packet 2 found blocked when packet 1 ends: 1024 bytes on an IB link, no Ethernet framing
    t_block = starts[1][0] + ser_time_ps(1024, RATE)
    eng.schedule(5 * 10**6, cbfc_free, sink.got[0][1])
    eng.run(10**7)
    assert starts[2][0] == 5 * 10**6 + 50_000
    assert link.stall_ps(3) == starts[2][0] - t_block and link.stalls == 1


def test_a_lost_packet_is_repaired_by_the_periodic_fc_packet() -> None:
    """IBA 7.9.4: FCTBS in the sender's periodic flow-control packet resets the receiver's
    ABR, so the blocks of a packet lost on the link come back at the next period."""
    eng, p, sink, link, starts = _link(2048, prop_ps=50_000)
    for i in range(3):
        p.enqueue(SimPacket(i, 0, 1024, tc=3))
    eng.run(10**6)
    lost = sink.got[0][1]
    cbfc_lose(lost)  # never reached the buffer
    cbfc_free(sink.got[1][1])
    eng.run(10**7)
    assert len(starts) == 3  # the freed packet's credits let packet 2 go
    p.enqueue(SimPacket(3, 0, 1024, tc=3))
    eng.run(15 * 10**6)
    assert len(starts) == 3 and link.waiting(3, 1024)  # 16 blocks leaked
    period = IbConfig().period_ps(RATE)
    assert period == 20_971_520  # 65,536 x 4 lanes x 8 bits at 100 Gb/s
    eng.run(30 * 10**6)
    # resync at the period, FCTBS reaches the receiver prop later, its FCCL prop after that
    # (the third packet is still in the buffer: FCCL = FCTBS + 32 - 16)
    assert starts[3][0] == period + 2 * 50_000
    assert link.resyncs == 1 and link.lost_blocks == 16


def _events(flow_control: str, frames: int, nbytes: int, **ib) -> tuple[int, int]:
    """(events the engine ran, flow-control packets sent) for ``frames`` packets of one flow
    across a switch (two links), on IB links (``IbConfig(**ib)``) or PFC ones."""
    cfg = MmuConfig(buffer_bytes=10**7, ports=3, xoff_bytes=10**7, lossless_pgs=frozenset())
    fab, recv, (src,) = star(1, RATE, 100_000, cfg, link_kw={"flow_control": flow_control,
                                                              "ib": IbConfig(**ib)})
    fab.add_flow(Flow(0, src, recv, RATE, tc=3, packet_bytes=nbytes,
                      size_bytes=frames * nbytes))
    fab.run(10**9)
    assert fab.summary()["flows"][0]["bytes_delivered"] == frames * nbytes
    fc = sum(p.ib.fc_packets for n in fab.nodes.values() for p in n.ports.values()
             if getattr(p, "ib", None) is not None)
    return fab.engine.events_processed, fc


@pytest.mark.parametrize("nbytes", [1024, 4122])
def test_a_data_packet_costs_no_extra_event_on_an_ib_link(nbytes: int) -> None:
    """An IB link adds no engine event per data packet: the receiver's buffer counts a
    packet in the event that delivers it, and a flow-control packet gets an event only to
    wake a port waiting for credits (one flow that never waits: none; ``fc_events``: one
    per flow-control packet)."""
    frames = 200
    ib, fc = _events("ib", frames, nbytes)
    pfc, _ = _events("pfc", frames, nbytes)
    assert fc > 0 and ib == pfc
    every, fc2 = _events("ib", frames, nbytes, fc_events=True)
    assert fc2 == fc and every == pfc + fc


def _ib_star_run(senders: int, pkt: int, vl_blocks: int, prop: int, cc: str, every: bool,
                 vls: int = 1):
    from sim.scenarios.common import fabric_setup

    rate = gbps(100)
    p = {"fabric": "ib", "cc": cc, "xoff_kb": 20.0, "buffer_kb": 4000.0, "kmin_kb": 5.0,
         "kmax_kb": 200.0, "pmax": 0.01, "cable_m": 10, "packet_bytes": pkt, "pfc": True,
         "vl_buffer_kb": vl_blocks * 64 / 1000}
    fs = fabric_setup(p, senders + 2, rate)
    ib = IbConfig(vl_buffer_bytes=fs.link_kw["ib"].vl_buffer_bytes, fc_events=every)
    fab, recv, hosts = star(senders, rate, prop, fs.mmu, ecn=fs.ecn, host_kw=fs.host_kw,
                            switch_kw=fs.switch_kw, link_kw={**fs.link_kw, "ib": ib})
    for i, h in enumerate(hosts):  # each sender: a flow on each of traffic classes (VLs) 3, 1, 5
        for k, tc in enumerate((3, 1, 5)[:vls]):
            fab.add_flow(Flow(i * 3 + k, h, recv, rate // vls, tc=tc, packet_bytes=pkt))
    starts: list[tuple[int, int, int, int]] = []
    for n in fab.nodes.values():
        for port in n.ports.values():
            port.taps.append(lambda t, pk, k=(n.node_id, port.index): starts.append(
                (t, *k, pk.id)))
    fab.run(40 * 10**6)
    return fab.summary(), starts, fab.engine.events_processed


@settings(max_examples=20, deadline=None)
@given(senders=st.integers(1, 5), pkt=st.integers(64, 4122), extra=st.integers(0, 100),
       prop=st.integers(0, 600_000), cc=st.sampled_from(["none", "ibcc"]),
       vls=st.integers(1, 3))
@example(senders=4, pkt=1050, extra=0, prop=100_000, cc="none", vls=2)
def test_flow_control_packets_taken_in_on_reading_change_nothing(senders, pkt, extra, prop,
                                                                 cc, vls) -> None:
    """Flow-control packets without an event of their own (taken in when the sender reads
    its credits) give exactly what an event per packet gives: every packet leaves every
    port at the same picosecond, every counter (credit stalls included) is the same.  With
    several VLs a port sends one while another waits for credits."""
    vl_blocks = ib_blocks(pkt) + extra
    lazy = _ib_star_run(senders, pkt, vl_blocks, prop, cc, every=False, vls=vls)
    eager = _ib_star_run(senders, pkt, vl_blocks, prop, cc, every=True, vls=vls)
    assert lazy[0] == eager[0] and lazy[1] == eager[1]
    assert lazy[2] <= eager[2]


@settings(max_examples=15, deadline=None)
@given(senders=st.integers(2, 4), gbit=st.sampled_from([25, 100]),
       pkt=st.integers(256, 4096), extra_blocks=st.integers(0, 256), prop=st.integers(0, 10**6))
def test_never_more_in_a_vl_buffer_than_its_size(senders, gbit, pkt, extra_blocks,
                                                 prop) -> None:
    rate = gbps(gbit)
    buffer_bytes = (ib_blocks(pkt) + extra_blocks) * 64
    cfg = MmuConfig(buffer_bytes=10**8, ports=senders + 2, xoff_bytes=10**8,
                    lossless_pgs=frozenset())
    fab, recv, hosts = star(senders, rate, prop, cfg,
                            link_kw={"flow_control": "ib",
                                     "ib": IbConfig(vl_buffer_bytes=buffer_bytes)})
    for i, s in enumerate(hosts):
        fab.add_flow(Flow(i, s, recv, rate, tc=3, packet_bytes=pkt))
    fab.run(30 * 10**6)
    links = [p.ib for n in fab.nodes.values() for p in n.ports.values()]
    assert all(max(lk.max_occupied_blocks) * 64 <= buffer_bytes for lk in links)
    ingress = [fab.nodes[h].port.ib for h in hosts]
    # the credits were what held the senders back (half or less of the bottleneck each)
    assert all(lk.stall_ps(3) > 0 and lk.max_occupied_blocks[3] > 0 for lk in ingress)
    s = fab.summary()
    assert s["totals"]["drops"] == 0 and s["totals"]["pauses_sent"] == 0
    assert all(f["bytes_delivered"] > 0 for f in s["flows"])


# --------------------------------------------------------- VL arbitration
def _w(high, low, limit):
    """vlarb weights with the VLs the tables leave out appended to the low table at weight 1
    (every class's VL must be served; these queues stay empty, so their entries are skipped)."""
    named = {vl for vl, _ in (*high, *low)}
    return vlarb_weights(high, (*low, *((v, 1) for v in range(8) if v not in named)), limit)


def _vlarb_port(weights, *, n: int = 40, sizes=None):
    eng = Engine(0)
    p = Port(eng, 1, 0, RATE, strict_tcs=(), scheduler="vlarb", weights=weights)
    sink = _Sink()
    sink.engine = eng
    p.connect(sink, 0, 0)
    order: list[int] = []
    p.taps.append(lambda t, pkt: order.append(pkt.tc))
    p.busy = True  # hold the port while the queues fill, then start it
    for i in range(n):
        for tc in (1, 2):
            p.enqueue(SimPacket(i, 0, (sizes or {}).get(tc, 1024), tc=tc))
    p.busy = False
    p._start()
    eng.run(10**9)
    return order


def test_vlarb_weights_give_their_shares() -> None:
    low = ((1, 32), (2, 16))  # 2048 and 1024 bytes per turn: 2 and 1 packets of 1024 B
    order = _vlarb_port(_w((), low, 0))
    assert order[:9] == [1, 1, 2, 1, 1, 2, 1, 1, 2]
    # the packet that crosses zero completes: weight 20 blocks (1280 B) still sends 2
    order = _vlarb_port(_w((), ((1, 20), (2, 16)), 0))
    assert order[:6] == [1, 1, 2, 1, 1, 2]
    # 64-byte units of the real length: 512-byte packets on VL 2 take 8 blocks, so 16 is 2
    order = _vlarb_port(_w((), ((1, 16), (2, 16)), 0), sizes={2: 512})
    assert order[:6] == [1, 2, 2, 1, 2, 2]


def test_vlarb_limit_of_high_priority() -> None:
    hi, lo = ((1, 255),), ((2, 255),)
    # limit 1 = 4096 bytes of high-priority packets, then one low-priority packet
    assert _vlarb_port(_w(hi, lo, 1))[:10] == [1, 1, 1, 1, 2] * 2
    # 0: one high-priority packet at a time
    assert _vlarb_port(_w(hi, lo, 0))[:6] == [1, 2] * 3
    # 255: unbounded, the low table waits until the high one is empty
    assert _vlarb_port(_w(hi, lo, 255), n=5) == [1] * 5 + [2] * 5
    # the low table has nothing: the high table goes on (work conserving)
    eng = Engine(0)
    p = Port(eng, 1, 0, RATE, strict_tcs=(), scheduler="vlarb",
             weights=_w(hi, ((2, 4), (3, 4), (4, 4), (5, 4), (6, 4), (7, 4),
                                        (0, 4)), 0))
    sink = _Sink()
    sink.engine = eng
    p.connect(sink, 0, 0)
    for i in range(5):
        p.enqueue(SimPacket(i, 0, 1024, tc=1))
    eng.run(10**9)
    assert len(sink.got) == 5


def test_vlarb_skips_a_credit_blocked_vl() -> None:
    eng = Engine(0)
    p = Port(eng, 1, 0, RATE, strict_tcs=(), scheduler="vlarb",
             weights=_w((), ((1, 64), (2, 64), (0, 1), (3, 1), (4, 1), (5, 1),
                                        (6, 1), (7, 1)), 0))
    back = Port(eng, 9, 0, RATE)
    sink = _Sink()
    sink.engine = eng
    p.connect(sink, 0, 0)
    link, _ = attach_ib(p, back, IbConfig(vl_buffer_bytes=2048))  # 2 packets per VL
    for i in range(4):
        p.enqueue(SimPacket(i, 0, 1024, tc=1))
    for i in range(4):
        p.enqueue(SimPacket(10 + i, 0, 1024, tc=2))
    eng.run(10**9)
    assert sorted(pk.tc for _, pk in sink.got) == [1, 1, 2, 2]  # each VL until its credits
    assert link.waiting(1, 1024) and link.waiting(2, 1024)


def test_vlarb_arguments_checked() -> None:
    with pytest.raises(ValueError, match="entry"):
        vlarb_weights(((15, 4),))
    with pytest.raises(ValueError, match="limit"):
        vlarb_weights((), (), 256)
    with pytest.raises(ValueError, match="VL 3"):
        check_scheduler("vlarb", vlarb_weights(((0, 4),), ((1, 4), (2, 4)), 0), 1500)
    p = Port(Engine(0), 1, 0, RATE, scheduler="vlarb")  # OpenSM's defaults: VLs 0..7
    p.set_vl_map((0, 1, 2, 3, 4, 5, 6, 7))
    with pytest.raises(ValueError, match="VL 9 \\(traffic class 2\\)"):
        p.set_vl_map((0, 1, 9, 3, 4, 5, 6, 7))


# ------------------------------------------------------------ deadlock
def _ib_ring(rate_frac: float):
    cfg = MmuConfig(buffer_bytes=4 * 10**6, ports=3, xoff_bytes=10**6, lossless_pgs=frozenset())
    t = ring(4, RATE, 10_000, cfg,
             link_kw={"flow_control": "ib", "ib": IbConfig(vl_buffer_bytes=8192)})
    fab = t.fabric
    for s in range(4):
        fab.add_flow(Flow(s, t.hosts[s][0], t.hosts[(s + 2) % 4][0], int(RATE * rate_frac),
                          tc=3, packet_bytes=1024, stop_ps=50 * 10**6))
    det = DeadlockDetector(fab, poll_ps=2 * 10**6, confirm_ps=20 * 10**6,
                           priorities={3}).start()
    fab.run(120 * 10**6)
    return fab, det


def test_a_ring_of_credit_waits_is_a_deadlock() -> None:
    """The credit analogue of pfc_deadlock_ring: 4 switches, each host sending 2 hops
    clockwise at 0.8 of line rate (2 x 0.8 > 1): every switch's ring-ingress VL buffer fills
    with frames for the next ring link, whose credits only that buffer's draining returns."""
    fab, det = _ib_ring(0.8)
    s = det.summary()
    assert s["detected"] and s["cycle"] == [[0, 1, 3], [1, 1, 3], [2, 1, 3], [3, 1, 3]]
    assert s["flows"] == [0, 1, 2, 3]
    assert fab.summary()["totals"]["drops"] == 0  # lossless, and stuck
    ports = [fab.nodes[n].ports[1] for n in range(4)]
    assert all(p.ib.waiting(3, 1024) and not p.paused(3) for p in ports)


def test_no_deadlock_below_the_ring_capacity() -> None:
    fab, det = _ib_ring(0.4)
    assert not det.summary()["detected"]
    assert all(f["bytes_delivered"] > 0 for f in fab.summary()["flows"])


# ---------------------------------------------------------- fabric files
_FILE = """
[run]
duration_ms = 0.05
[topology]
kind = "star"
hosts = 5
[links]
flow_control = "ib"
vl_buffer_kb = 16.384
[switch]
buffer_kb = 4000
scheduler = "vlarb"
vlarb_high_limit = 2
[traffic]
pattern = "incast"
"""


def test_fabric_file_ib_and_vlarb(tmp_path, capsys) -> None:
    f = tmp_path / "ibstar.toml"
    f.write_text(_FILE)
    out = tmp_path / "o"
    assert main(["replay", str(f), "--out", str(out), "--no-plots"]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["params"]["links"]["flow_control"] == "ib"
    assert s["totals"]["drops"] == 0 and s["totals"]["pauses"] == 0
    assert all(fl["bytes_delivered"] > 0 for fl in s["flows"])
    for kv, field in (("links.vl_buffer_kb=0.5", "vl_buffer_kb"),
                      ("links.sl2vl=[1,2]", "sl2vl"),
                      ("switch.vlarb_low=[[1,300]]", "vlarb_low"),
                      ("switch.vlarb_high_limit=256", "vlarb_high_limit"),
                      ("switch.vlarb_low=[[1,4]]", "vlarb_high/vlarb_low"),
                      ("switch.buffer_kb=100", "buffer_kb")):
        capsys.readouterr()
        assert main(["replay", str(f), "-p", kv, "--out", str(tmp_path / "x")]) == 2, kv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("lossless: ") and field in err, err
        assert "Traceback" not in err


def test_docs_name_the_simulator_section() -> None:
    doc = (Path(__file__).resolve().parent.parent / "docs" / "explanation" / "infiniband.md"
           ).read_text(encoding="utf-8")
    assert "## Credits (IBA 7.9)" in doc and "## VL arbitration (IBA 7.6.9)" in doc

"""The host NIC: traffic shapes (on/off, messages), the send path under a full or paused port
(wake on dequeue, no polling, pacing), RoCEv2 ACKs and the two CNP (NP) variants."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire
from sim.addresses import flow_qp
from sim.engine import Engine
from sim.events import CNPSent
from sim.fabric import star
from sim.net.mmu import MmuConfig, headroom_bytes
from sim.nic.host import ACK_OPCODE, Flow, Host, roce_aeth_kind, roce_bth
from sim.packet import SimPacket
from sim.trace import ListTracer
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps
from wire.roce import CNP_OPCODE
from wire.strategies import frames

RATE = gbps(100)
PROP = prop_delay_ps(10)
GAP = frame_ser_time_ps(1082, RATE)  # 88,480 ps
US = 1_000_000
N = 50 * US  # CNP interval


class Sink:
    node_id = 99

    def __init__(self) -> None:
        self.got: list[tuple[int, SimPacket]] = []
        self.engine: Engine | None = None

    def receive(self, port: int, pkt: SimPacket) -> None:
        self.got.append((self.engine.now_ps if self.engine else -1, pkt))


def _host(**kw) -> tuple[Engine, Host, Sink]:
    """A host whose port feeds a sink (no switch): the bare NIC send path (unreliable unless
    asked: the sink sends no ACKs)."""
    eng = Engine()
    h = Host(eng, 1, RATE, **{"reliable": False, **kw})
    sink = Sink()
    sink.engine = eng
    h.port.connect(sink, 0, 0)
    return eng, h, sink


def _star(senders: int = 1, tracer=None, **host_kw):
    hr = headroom_bytes(RATE, 10, 1082, 1_000_000)
    cfg = MmuConfig(buffer_bytes=1_000_000, ports=senders + 2, reserved_bytes=2000,
                    headroom_bytes=hr, lossless_pgs=frozenset({3}), xoff_mode="static",
                    xoff_bytes=20_000, xon_delta_bytes=2000)
    fab, recv, hosts = star(senders, RATE, PROP, cfg, tracer=tracer, host_kw=host_kw)
    return fab, recv, hosts


# ------------------------------------------------------------------ traffic shapes
def test_on_off_sends_half_the_bytes_of_cbr_and_nothing_while_off() -> None:
    period, on = 20 * US, 10 * US
    got = {}
    for shape in ("cbr", "onoff"):
        fab, recv, (src,) = _star()
        kw = {"on_ps": on, "off_ps": on} if shape == "onoff" else {}
        fab.add_flow(Flow(0, src, recv, RATE, **kw))
        fab.nodes[recv].delivered = []
        fab.run(1000 * US - 1)  # 50 whole periods
        got[shape] = (fab.nodes[src].sent_packets[0], fab.nodes[recv].delivered)
    per_on = math.ceil(on / GAP)  # 114 frames start in each 10 us on period
    assert got["onoff"][0] == 50 * per_on
    assert got["cbr"][0] == math.ceil(1000 * US / GAP)
    ratio = sum(p.nbytes for _, p in got["onoff"][1]) / sum(p.nbytes for _, p in got["cbr"][1])
    assert 0.48 < ratio < 0.52
    rx = got["onoff"][1]
    latency = rx[0][0]  # first frame sent at 0; an idle path has a constant latency
    assert latency == 2 * (GAP + PROP)
    for t, _pkt in rx:  # every frame was sent inside an on period
        assert (t - latency) % period < on
    gaps = [b - a for (a, _), (b, _) in itertools.pairwise(rx)]
    long = [g for g in gaps if g != GAP]
    assert len(long) == 49  # one silence per off period
    assert all(on < g <= on + GAP for g in long)  # off_ps (plus the rest of the last gap)


def test_on_off_pacing_continues_across_a_short_off_period() -> None:
    """off_ps shorter than the packet gap: the next frame still waits for the gap."""
    eng, h, sink = _host()
    h.add_flow(Flow(0, 1, 2, RATE // 4, on_ps=GAP, off_ps=1000))
    eng.run(until_ps=100 * US)
    starts = [p.t_ps for _, p in sink.got]
    assert min(b - a for a, b in itertools.pairwise(starts)) >= 4 * GAP - 4


def test_exponential_on_off_is_seeded_and_has_the_right_duty_cycle() -> None:
    def run(seed: int) -> list[int]:
        eng = Engine(seed)
        h = Host(eng, 1, RATE)
        sink = Sink()
        h.port.connect(sink, 0, 0)
        h.add_flow(Flow(0, 1, 2, RATE, on_ps=5 * US, off_ps=5 * US, onoff="exponential"))
        eng.run(until_ps=5000 * US)
        return [p.t_ps for _, p in sink.got]

    a, b, c = run(1), run(1), run(2)
    assert a == b and a != c
    cbr = 5000 * US // GAP
    for starts in (a, c):
        assert 0.40 < len(starts) / cbr < 0.60
        silences = [y - x for x, y in itertools.pairwise(starts) if y - x > GAP]
        assert len(silences) > 300  # ~500 off periods of random length
        assert len(set(silences)) > 0.9 * len(silences)


def test_message_sizes_cut_frames_at_message_boundaries() -> None:
    fab, recv, (src,) = _star()
    size = 4 * 2500 + 1500  # four whole messages and one cut by size_bytes
    fab.add_flow(Flow(0, src, recv, RATE, message_bytes=2500, size_bytes=size))
    fab.nodes[recv].delivered = []
    fab.run(200 * US)
    sizes = [p.nbytes for _, p in fab.nodes[recv].delivered]
    assert sizes == [1082, 1082, 336] * 4 + [1082, 418]
    r = fab.nodes[recv]
    assert r.rx_bytes[0] == size and r.rx_messages[0] == 5
    done = r.rx_message_done_ps[0]
    t = [t for t, _ in r.delivered]
    assert done == [t[2], t[5], t[8], t[11], t[13]]
    assert r.fct_ps[0] == t[13]


def test_short_frames_are_paced_by_their_own_size() -> None:
    eng, h, sink = _host()
    rate = RATE // 2
    h.add_flow(Flow(0, 1, 2, rate, message_bytes=2500, size_bytes=7500))
    eng.run()
    got = [p for _, p in sink.got]
    assert [p.nbytes for p in got] == [1082, 1082, 336] * 3
    for a, b in itertools.pairwise(got):
        assert b.t_ps - a.t_ps == frame_ser_time_ps(a.nbytes, rate)


@pytest.mark.parametrize("kw, field", [
    ({"rate_bps": 0}, "rate_bps"), ({"packet_bytes": 0}, "packet_bytes"),
    ({"size_bytes": 0}, "size_bytes"), ({"message_bytes": -1}, "message_bytes"),
    ({"on_ps": 0, "off_ps": 5}, "on_ps"), ({"on_ps": 5, "off_ps": 0}, "off_ps"),
    ({"on_ps": 5}, "on_ps and off_ps"), ({"off_ps": 5}, "on_ps and off_ps"),
    ({"on_ps": 5, "off_ps": 5, "onoff": "poisson"}, "onoff"),
    ({"onoff": "exponential"}, "onoff"), ({"start_ps": -1}, "start_ps"),
])
def test_flow_validation_names_the_field(kw, field) -> None:
    args = {"id": 3, "src": 1, "dst": 2, "rate_bps": RATE, **kw}
    with pytest.raises(ValueError, match=f"^flow 3: {field}"):
        Flow(**args)


@pytest.mark.parametrize("kw, field", [
    ({"cnp_mode": "lazy"}, "cnp_mode"), ({"ack_every": -1}, "ack_every"),
    ({"cnp_mode": "window", "cnp_interval_ps": 0}, "cnp_interval_ps"),
    ({"ack_tc": 8}, "ack_tc"), ({"queue_limit_bytes": 0}, "queue_limit_bytes"),
])
def test_host_validation_names_the_argument(kw, field) -> None:
    with pytest.raises(ValueError, match=field):
        Host(Engine(), 1, RATE, **kw)


# ------------------------------------------------------------- send path and PFC
def test_a_paused_port_blocks_the_sender_without_polling_and_resume_is_paced() -> None:
    eng, h, sink = _host()
    rate = RATE // 2
    gap = frame_ser_time_ps(1082, rate)
    h.add_flow(Flow(0, 1, 2, rate))
    eng.schedule(10 * US, h.port.pause, 3, 0xFFFF)        # 335 us pause
    eng.schedule(300 * US, h.port.pause, 3, 0)            # XON at 300 us
    eng.run(until_ps=20 * US)                             # the queue is full by now
    assert h.port.queue_bytes[3] >= h.queue_limit_bytes
    before = eng.events_processed
    eng.run(until_ps=299 * US)
    assert eng.events_processed - before <= 2  # polling would be ~280 us / 177 ns = 1600
    eng.run(until_ps=400 * US)
    starts = [p.t_ps for _, p in sink.got]
    assert min(b - a for a, b in itertools.pairwise(starts)) >= gap  # never above the rate
    resumed = [t for t in starts if t >= 300 * US]
    assert resumed[0] == 300 * US  # woken by the first dequeue after XON
    sent = h.sent_packets[0]
    assert sent == len(sink.got) + len(h.port.queues[3]) + h.port.busy
    # after the backlog drains the flow runs at exactly its rate again
    tail = resumed[-20:]
    assert all(b - a == gap for a, b in itertools.pairwise(tail))


def test_a_blocked_flow_sends_as_soon_as_the_queue_drains_not_one_gap_later() -> None:
    """Two flows at line rate share a port at line rate: the queue stays full, and every send
    happens exactly when a dequeue frees room (old code: at its next poll)."""
    eng, h, sink = _host()
    h.add_flow(Flow(0, 1, 2, RATE))
    h.add_flow(Flow(1, 1, 2, RATE, start_ps=GAP // 3))
    eng.run(until_ps=50 * US)
    tx = [t for t, _ in sink.got]
    # the port never idles: back-to-back frames at the sink
    assert all(b - a == GAP for a, b in itertools.pairwise(tx))
    assert abs(h.sent_packets[0] - h.sent_packets[1]) <= 1  # woken in flow-id order, fairly


# ---------------------------------------------------------------------------- ACKs
def test_acks_every_k_packets_are_real_rc_acks_counted_by_the_sender() -> None:
    fab, recv, (src,) = _star()
    size = 10 * 1082 + 500  # 11 frames
    r, s = fab.nodes[recv], fab.nodes[src]
    r.ack_every = 4
    frames: list[SimPacket] = []
    r.port.taps.append(lambda t, p: frames.append(p))
    fab.add_flow(Flow(7, src, recv, RATE, size_bytes=size))
    fab.run(100 * US)
    assert r.ack_sent == s.ack_received == math.ceil(11 / 4)
    psns = []
    for p in frames:
        d = wire.dissect(bytes(p.frame))
        assert not d.problems
        assert d["bth"]["opcode_name"] == "RC_ACKNOWLEDGE" and d["bth"]["dest_qp"] == flow_qp(7)
        assert d["aeth"]["kind"] == "ACK"
        assert d["ipv4"]["dscp"] >> 3 == 3 and p.tc == 3  # ack_tc default: the flow's class
        psns.append(d["bth"]["psn"])
    assert psns == [3, 7, 10]
    assert s.acked_bytes[7] == size
    assert r.rx_bytes[7] == size and r.rx_packets[7] == 11
    assert s.rx_bytes == {} and s.rx_packets == {}  # the ACKs are not data at the sender


def test_acked_bytes_follow_the_psn_with_messages_and_ack_tc() -> None:
    fab, recv, (src,) = _star(reliable=False)  # ack_every's ACKs of an unreliable flow
    r, s = fab.nodes[recv], fab.nodes[src]
    r.ack_every, r.ack_tc = 2, 5
    seen: list[int] = []
    orig = s._on_ack

    def spy(qp: int, psn: int) -> None:
        orig(qp, psn)
        seen.append(s.acked_bytes[qp])

    s._on_ack = spy
    frames: list[SimPacket] = []
    r.port.taps.append(lambda t, p: frames.append(p))
    fab.add_flow(Flow(1, src, recv, RATE, message_bytes=2500, size_bytes=7000))
    fab.run(100 * US)
    # frames: 1082 1082 336 | 1082 1082 336 | 1082 918 -> ACK after frames 2, 4, 6, 8
    assert seen == [2164, 2500 + 1082, 5000, 7000]
    assert [wire.dissect(bytes(p.frame))["aeth"]["msn"] for p in frames] == [0, 1, 2, 3]
    assert {p.tc for p in frames} == {5}


def test_no_acks_without_reliable() -> None:
    fab, recv, (src,) = _star(reliable=False)
    fab.add_flow(Flow(0, src, recv, RATE, size_bytes=20_000))
    fab.run(100 * US)
    assert fab.nodes[recv].ack_sent == 0 and fab.nodes[src].acked_bytes[0] == 0


def test_reliable_by_default_one_ack_for_a_short_flow() -> None:
    """19 frames: only the last asks for an ACK (coalesced ACKs, sim.nic.rc); no timer is
    left once everything is acknowledged."""
    fab, recv, (src,) = _star()
    fab.add_flow(Flow(0, src, recv, RATE, size_bytes=20_000))
    fab.run(100 * US)
    assert fab.nodes[recv].ack_sent == 1 and fab.nodes[src].acked_bytes[0] == 20_000
    assert fab.nodes[src].rc_stats(0)["retransmitted_frames"] == 0
    assert fab.engine.peek_ps() is None


def test_roce_bth_is_the_one_parser_for_cnp_ack_and_data() -> None:
    base = {"eth": {}, "ipv4": {}, "udp": {}}
    cnp = wire.build({**base, "bth": {"opcode": "CNP", "dest_qp": 9}})
    ack = wire.build({**base, "bth": {"opcode": "RC_ACKNOWLEDGE", "dest_qp": 9, "psn": 77},
                      "aeth": {"kind": "ACK", "value": 31, "msn": 0}})
    data = wire.build({**base, "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": 9, "psn": 5},
                       "payload": {"length": 64}})
    v6 = wire.build({"eth": {}, "ipv6": {}, "udp": {},
                     "bth": {"opcode": "RC_ACKNOWLEDGE", "dest_qp": 3, "psn": 1},
                     "aeth": {"kind": "ACK", "value": 31, "msn": 0}})
    other = wire.build({"eth": {}, "ipv4": {}, "udp": {"dport": 4000},
                        "payload": {"length": 40}})
    assert roce_bth(cnp) == (CNP_OPCODE, 9, 0)
    assert roce_bth(ack) == (ACK_OPCODE, 9, 77)
    assert roce_bth(data) == (0x04, 9, 5)
    assert roce_bth(v6) == (ACK_OPCODE, 3, 1)
    assert roce_bth(other) is None


# ------------------------------------------------------------------------ NP (CNPs)
def _all_ce(mode: str, duration_ps: int = 2000 * US, size: int | None = None):
    tr = ListTracer()
    fab, recv, (src,) = _star(tracer=tr)
    r = fab.nodes[recv]
    r.cnp_mode = mode
    fab.add_flow(Flow(0, src, recv, RATE, ecn=3, size_bytes=size))  # every frame arrives CE
    fab.run(duration_ps)
    return fab, r, [e.t_ps for e in tr.of_type(CNPSent) if e.flow == 0]


def test_immediate_np_sends_on_the_first_ce_then_at_most_one_per_interval() -> None:
    fab, r, cnps = _all_ce("immediate")
    t0 = r.rx_first_ps[0]
    assert cnps[0] == t0
    diffs = [b - a for a, b in itertools.pairwise(cnps)]
    assert all(N <= d < N + GAP for d in diffs)  # the first CE at or after last + N
    assert abs(len(cnps) - 2000 * US // N) <= 1
    assert fab.nodes[1].cnp_received == len(cnps) == r.cnp_sent


def test_window_np_sends_at_the_end_of_each_window_with_a_ce() -> None:
    fab, r, cnps = _all_ce("window")
    t0 = r.rx_first_ps[0]
    assert cnps[0] == t0 + N  # not immediately
    assert all(b - a == N for a, b in itertools.pairwise(cnps))
    assert abs(len(cnps) - 2000 * US // N) <= 1
    assert fab.nodes[1].cnp_received == len(cnps) == r.cnp_sent


def test_window_np_timer_stops_when_the_ces_stop() -> None:
    size = 1082 * 1300  # ~115 us of CE-marked data
    fab, r, cnps = _all_ce("window", duration_ps=1000 * US, size=size)
    t0, t_last = r.rx_first_ps[0], r.rx_last_ps[0]
    assert t_last - t0 > 2 * N
    # windows [t0, t0+N), [t0+N, t0+2N), [t0+2N, t0+3N) all saw CEs; the fourth did not
    assert cnps == [t0 + N, t0 + 2 * N, t0 + 3 * N]
    assert not r._cnp_window and fab.engine.peek_ps() is None  # no timer left for idle flows


def test_immediate_np_after_an_idle_gap_sends_at_once() -> None:
    """On/off data, all CE: every on period after an off period longer than N starts with a
    CNP on its first frame (immediate), and one window later (window)."""
    for mode in ("immediate", "window"):
        tr = ListTracer()
        fab, recv, (src,) = _star(tracer=tr)
        fab.nodes[recv].cnp_mode = mode
        fab.nodes[recv].delivered = []
        fab.add_flow(Flow(0, src, recv, RATE, ecn=3, on_ps=10 * US, off_ps=100 * US))
        fab.run(500 * US)
        cnps = [e.t_ps for e in tr.of_type(CNPSent)]
        firsts = [t for (t, _), prev in zip(fab.nodes[recv].delivered[1:],
                                              fab.nodes[recv].delivered, strict=False)
                  if t - prev[0] > N]
        firsts.insert(0, fab.nodes[recv].delivered[0][0])
        want = firsts if mode == "immediate" else [t + N for t in firsts]
        assert cnps == [t for t in want if t <= 500 * US], mode


def test_ack_frames_are_byte_identical_to_wire_build() -> None:
    """The NIC patches PSN and MSN into a template ACK: same bytes as building each one."""
    fab, recv, (src,) = _star()
    r = fab.nodes[recv]
    r.ack_every = 3
    frames: list[SimPacket] = []
    r.port.taps.append(lambda t, p: frames.append(p))
    fab.add_flow(Flow(0x1234, src, recv, RATE, message_bytes=3000, size_bytes=40_000))
    fab.run(100 * US)
    assert len(frames) == math.ceil(fab.nodes[src].sent_packets[0x1234] / 3) > 5
    for p in frames:
        d = wire.dissect(bytes(p.frame))
        want = wire.build({"eth": {"src": d["eth"]["src"], "dst": d["eth"]["dst"]},
                           "ipv4": {"src": d["ipv4"]["src"], "dst": d["ipv4"]["dst"],
                                    "dscp": 24},
                           "udp": {}, "bth": {"opcode": "RC_ACKNOWLEDGE",
                                              "dest_qp": flow_qp(0x1234),
                                              "psn": d["bth"]["psn"]},
                           "aeth": {"kind": "ACK", "value": 31, "msn": d["aeth"]["msn"]}})
        assert bytes(p.frame) == bytes(want) and d["icrc"]["valid"]
    assert len({wire.dissect(bytes(p.frame))["aeth"]["msn"] for p in frames}) > 5


def test_every_data_frame_is_marked_with_its_place_in_its_message() -> None:
    """SimPacket.place: first and/or last of its message, a first frame with the message's
    frame bytes; posted messages, message_bytes and 64-frame stream messages, the flow's
    size ending the last (a resend's: tests/test_rc.py)."""
    from sim.packet import place_of
    from tests.helpers import posted_pair

    def places(frames):
        return [p.place for p in frames]

    _rail, fab, a, _b, _flow = posted_pair(100, fid=1)
    sent: list[SimPacket] = []
    a.port.taps.append(lambda t, p: sent.append(p))
    for n in (3000, 1082, 500):
        a.post(1, n)
    fab.run(10**9)
    assert places(sent) == [place_of(True, False, 3000), 0, place_of(False, True),
                            place_of(True, True, 1082), place_of(True, True, 500)]

    fab, recv, (src,) = _star()
    sent = []
    fab.nodes[src].port.taps.append(lambda t, p: sent.append(p) if p.frame is None else 0)
    fab.add_flow(Flow(0, src, recv, RATE, message_bytes=2200, size_bytes=5000))
    fab.add_flow(Flow(1, src, recv, RATE, packet_bytes=100, size_bytes=100 * 70))
    fab.run(10**9)
    m = [p for p in sent if p.flow == 0]  # 1082 + 1082 + 36 (twice) | 600
    assert places(m) == [place_of(True, False, 2200), 0, place_of(False, True)] * 2 + [
        place_of(True, True, 600)]
    s = [p for p in sent if p.flow == 1]  # 64 frames, then the 6 the size leaves
    assert places(s) == [place_of(True, False, 6400), *[0] * 62, place_of(False, True),
                         place_of(True, False, 600), *[0] * 4, place_of(False, True)]


def _general_bth(frame: bytes):
    """roce_bth and roce_aeth_kind as the general path reads them (no fast path)."""
    from sim.nic import host as h

    loc = h._bth_offset(frame)
    if loc is None:
        return None, None
    bth = h.BTH.unpack_raw(frame, loc)
    kind = None
    if len(frame) >= loc + h.BTH.size_bytes + h.AETH.size_bytes:
        syndrome = h.AETH.unpack_raw(frame, loc + h.BTH.size_bytes)["syndrome"]
        kind = int(h.AethKind[h.aeth_decode(syndrome)["kind"]])
    return (bth["opcode"], bth["dest_qp"], bth["psn"]), kind


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_nics_fast_parsers_read_what_the_general_path_reads(data) -> None:
    """roce_bth / roce_aeth_kind's one-struct reading of untagged IPv4 frames gives what the
    general path gives, on frames of every kind (tagged, IPv6, PFC, an ACK's AETH) with a
    byte of their first 60 changed (EtherType, IHL, protocol, port, opcode...), or cut."""
    frame = bytearray(data.draw(st.one_of(frames(), st.sampled_from(_ACK_FRAMES))))
    how = data.draw(st.sampled_from(["as is", "byte", "cut"]))
    if how == "byte":
        at = data.draw(st.integers(0, min(len(frame), 60) - 1))
        frame[at] = data.draw(st.integers(0, 255))
    elif how == "cut":
        frame = frame[:data.draw(st.integers(0, len(frame)))]
    f = bytes(frame)
    bth, kind = _general_bth(f)
    assert roce_bth(f) == bth
    assert roce_aeth_kind(f) == kind


_ACK_FRAMES = [wire.build({"eth": {}, "ipv4": {}, "udp": {},
                           "bth": {"opcode": "RC_ACKNOWLEDGE", "dest_qp": 5, "psn": 9},
                           "aeth": {"kind": k, "value": v, "msn": 3}})
               for k, v in (("ACK", 31), ("NAK", 0), ("RNR_NAK", 4))]


@settings(max_examples=300, deadline=None)
@given(st.one_of(frames(kinds=["roce", "pfc", "pause"]), st.binary(max_size=40)),
       st.booleans())
def test_is_mac_control_reads_what_payload_start_reads(frame: bytes, tagged: bool) -> None:
    # its inline first step (an untagged frame) and the VLAN-tag walk agree with
    # wire.ethernet.payload_start on frames of every kind, tagged or not, and on any bytes
    from sim.flowctl.pfc import is_mac_control
    from wire.ethernet import VLAN_TAG, EtherType, payload_start

    if tagged and len(frame) >= 12:  # a C-tag after the addresses (a TPID from the tables)
        frame = frame[:12] + VLAN_TAG.pack(tpid=int(EtherType.VLAN), pcp=3, vid=7) + frame[12:]
    loc = payload_start(frame)
    assert is_mac_control(frame) == (loc is not None and loc[1] == EtherType.MAC_CONTROL)

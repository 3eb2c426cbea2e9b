"""RC transport reliability: sim.nic.rc alone, and in the NIC (sim.nic.host)."""

from __future__ import annotations

import heapq
import itertools

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from sim.engine import Engine
from sim.events import QpError
from sim.nic.host import Flow, Host, rc_conservation, roce_aeth_kind, roce_bth
from sim.nic.rc import PSN_MOD, RcReceiver, RcSender, ack_timeout_ps, unwrap_psn
from sim.trace import ListTracer
from sim.units import frame_ser_time_ps
from wire.ib_ext import AethKind

RATE = 100_000_000_000
PROP_PS = 1_000_000
FRAME = 1082


class Lossy:
    """A wire from host A to host B that drops the data frames ``drop(pkt)`` picks and
    records every data frame that enters it as (psn, t_ps sent)."""

    def __init__(self, dst: Host, drop) -> None:
        self.dst, self.drop = dst, drop
        self.seen: list[tuple[int, int]] = []
        self.dropped = 0

    def receive(self, port: int, pkt) -> None:
        if pkt.psn is not None:
            self.seen.append((pkt.psn, pkt.t_ps))
            if self.drop(pkt):
                self.dropped += 1
                return
        self.dst.receive(port, pkt)


class Backwire:
    """B -> A, recording the ACK/NAK frames: (kind, psn)."""

    def __init__(self, dst: Host) -> None:
        self.dst = dst
        self.acks: list[tuple[int, int]] = []

    def receive(self, port: int, pkt) -> None:
        if pkt.frame is not None:
            bth = roce_bth(pkt.frame)
            if bth is not None:
                self.acks.append((roce_aeth_kind(pkt.frame), bth[2]))
        self.dst.receive(port, pkt)


def pair(drop, n=10, until_ps=10**13, tracer=None, **kw):
    e = Engine()
    kw = {"reliable": True, "ack_timeout": 4, **kw}
    a = Host(e, 0, RATE, tracer=tracer, **kw)
    b = Host(e, 1, RATE, **kw)
    fwd, back = Lossy(b, drop), Backwire(a)
    a.port.connect(fwd, 0, PROP_PS)
    b.port.connect(back, 0, PROP_PS)
    f = Flow(0, 0, 1, RATE, size_bytes=FRAME * n)
    a.add_flow(f)
    b.expect(f)
    e.run(until_ps)
    return a, b, fwd, back


def drop_once(*psns):
    left = set(psns)

    def drop(pkt):
        if pkt.psn in left:
            left.discard(pkt.psn)
            return True
        return False
    return drop


def test_timeout_formula():
    assert ack_timeout_ps(4) == 65_536_000  # 4.096 us x 16
    assert ack_timeout_ps(20) == 4_294_967_296_000  # NCCL_IB_TIMEOUT 20: ~4.3 s
    with pytest.raises(ValueError):
        ack_timeout_ps(0)


def test_gbn_one_drop_one_nak_resend_from_it():
    a, b, fwd, back = pair(drop_once(3), n=10, retransmit="gbn")
    # all 10 frames leave within 0.9 us, before the NAK can come back (RTT > 2 us):
    # the NAK says 3, GBN resends 3..9 = 7 frames, once each
    assert [p for p, _ in fwd.seen] == list(range(10)) + list(range(3, 10))
    naks = [k for k in back.acks if k[0] == AethKind.NAK]
    assert naks == [(AethKind.NAK, 3)]
    s = a.rc_stats(0)
    assert s["retransmitted_frames"] == 7 and s["retransmitted_bytes"] == 7 * FRAME
    assert s["naks_received"] == 1 and s["timeouts"] == 0 and s["unacked_frames"] == 0
    r = b.rc_stats(0)
    assert r["naks_sent"] == 1 and r["dropped_out_of_sequence"] == 6
    assert b.rx_bytes[0] == 10 * FRAME and b.rx_packets[0] == 10
    c = rc_conservation(a, b, 0, fwd.dropped)
    assert c == {"sent": 17, "delivered": 10, "dropped": 7, "held": 0, "in_flight": 0}


@pytest.mark.parametrize("mode", ["gbn", "sr"])
def test_a_resend_carries_the_place_and_ack_request_of_its_frame(mode):
    """What a capture shows of a resent frame (SimPacket.place: its opcode; ackreq: its
    AckReq bit) is what the frame had when it was new."""
    from sim.packet import place_of

    frames: dict[int, list] = {}

    class Keep(Lossy):
        def receive(self, port, pkt):
            if pkt.psn is not None:
                frames.setdefault(pkt.psn, []).append((pkt.place, pkt.ackreq))
            super().receive(port, pkt)

    e = Engine()
    a = Host(e, 0, RATE, reliable=True, ack_timeout=4, retransmit=mode)
    b = Host(e, 1, RATE, reliable=True, ack_timeout=4, retransmit=mode)
    a.port.connect(Keep(b, drop_once(3, 9)), 0, PROP_PS)
    b.port.connect(Backwire(a), 0, PROP_PS)
    f = Flow(0, 0, 1, RATE, size_bytes=FRAME * 10)  # one message of 10 frames (a stream)
    a.add_flow(f)
    b.expect(f)
    e.run(10**13)
    assert sorted(frames) == list(range(10)) and len(frames[3]) >= 2 and len(frames[9]) >= 2
    assert all(len(set(v)) == 1 for v in frames.values())
    assert [v[0] for v in (frames[0], frames[3], frames[9])] == [
        (place_of(True, False, 10 * FRAME), False), (0, False), (place_of(False, True), True)]


def test_sr_one_drop_resends_one():
    a, b, fwd, back = pair(drop_once(3), n=10, retransmit="sr")
    assert [p for p, _ in fwd.seen] == [*range(10), 3]
    assert [k for k in back.acks if k[0] == AethKind.NAK] == [(AethKind.NAK, 3)]
    assert a.rc_stats(0)["retransmitted_frames"] == 1
    assert b.rx_packets[0] == 10 and b.rc_stats(0)["out_of_sequence"] == 0
    assert rc_conservation(a, b, 0, fwd.dropped)["in_flight"] == 0


@pytest.mark.parametrize("mode", ["gbn", "sr"])
def test_dropped_last_frame_recovered_by_timeout(mode):
    # every frame ACKed (ack_every=1): the timer restarts with every frame sent, it expires a
    # timeout after the last one
    a, b, fwd, _ = pair(drop_once(9), n=10, retransmit=mode, ack_every=1)
    t_last = fwd.seen[9][1]
    assert fwd.seen[10] == (9, t_last + ack_timeout_ps(4))
    assert len(fwd.seen) == 11
    assert a.rc_stats(0)["timeouts"] == 1 and a.rc_stats(0)["naks_received"] == 0
    assert b.rx_packets[0] == 10 and a.acked_bytes[0] == 10 * FRAME


def test_retry_cnt_exhausted_qp_error():
    tr = ListTracer()
    a, b, fwd, _ = pair(lambda p: p.psn == 9, n=10, retry_cnt=3, tracer=tr, ack_every=1)
    t_last = fwd.seen[9][1]
    t = ack_timeout_ps(4)
    # 3 resends, each at the previous deadline; the 4th expiry is the error
    assert [x for x in fwd.seen[10:]] == [(9, t_last + k * t) for k in (1, 2, 3)]
    assert a.qp_error_ps[0] == t_last + 4 * t
    ev = [x for x in tr.events if isinstance(x, QpError)]
    assert ev == [QpError(t_last + 4 * t, 0, 0, 3, 1)]
    assert a.rc_stats(0)["qp_error"] == 1 and b.rx_packets[0] == 9


def test_reliable_off_no_psn():
    e = Engine()
    a, b = Host(e, 0, RATE, reliable=False), Host(e, 1, RATE, reliable=False)
    fwd = Lossy(b, lambda p: False)
    a.port.connect(fwd, 0, PROP_PS)
    b.port.connect(a, 0, PROP_PS)
    f = Flow(0, 0, 1, RATE, size_bytes=FRAME * 4)
    a.add_flow(f)
    e.run(10**9)
    assert fwd.seen == [] and a.rc_stats(0) == {} and b.rx_packets[0] == 4


def test_reliable_is_the_default():
    assert Host(Engine(), 0, RATE).reliable is True


def test_acks_coalesced_on_ack_requests():
    """Every 256th frame (the mlx5 driver's rule) and the last of the flow ask for an ACK;
    the receiver ACKs exactly those, cumulatively; nothing is resent in a loss-free run."""
    a, b, _fwd, back = pair(lambda p: False, n=600)
    assert back.acks == [(AethKind.ACK, 255), (AethKind.ACK, 511), (AethKind.ACK, 599)]
    assert a.rc_stats(0)["unacked_frames"] == 0 and a.acked_bytes[0] == 600 * FRAME
    assert a.rc_stats(0)["retransmitted_frames"] == 0 and b.rx_packets[0] == 600


def test_ack_request_at_each_message_end_and_before_stop():
    """Messages of 3 frames: each message's last frame asks for an ACK; a flow that stops
    (stop_ps) asks on its last frame before the stop, so nothing stays unacknowledged."""
    e = Engine()
    a = Host(e, 0, RATE, reliable=True, ack_timeout=4)
    b = Host(e, 1, RATE, reliable=True, ack_timeout=4)
    back = Backwire(a)
    a.port.connect(b, 0, PROP_PS)
    b.port.connect(back, 0, PROP_PS)
    frame_ps = frame_ser_time_ps(FRAME, RATE)  # the pacing gap
    f = Flow(0, 0, 1, RATE, message_bytes=3 * FRAME, stop_ps=6 * frame_ps + 1)
    a.add_flow(f)
    b.expect(f)
    e.run(10**9)
    sent = a.sent_packets[0]
    assert sent == 7  # frames 0..6, the 7th is the last before the stop
    assert back.acks == [(AethKind.ACK, 2), (AethKind.ACK, 5), (AethKind.ACK, 6)]
    assert a.rc_stats(0)["unacked_frames"] == 0 and a.rc_stats(0)["timeouts"] == 0


@pytest.mark.parametrize("onoff", ["fixed", "exponential"])
def test_ack_request_before_each_off_period(onoff):
    """An on/off flow asks for an ACK on the last frame of every on period: nothing waits
    unacknowledged through an off period."""
    frame_ps = frame_ser_time_ps(FRAME, RATE)
    e = Engine()
    a = Host(e, 0, RATE, reliable=True, ack_timeout=4)
    b = Host(e, 1, RATE, reliable=True, ack_timeout=4)
    fwd, back = Lossy(b, lambda p: False), Backwire(a)
    a.port.connect(fwd, 0, PROP_PS)
    b.port.connect(back, 0, PROP_PS)
    f = Flow(0, 0, 1, RATE, on_ps=3 * frame_ps, off_ps=20 * frame_ps, onoff=onoff,
             size_bytes=40 * FRAME)
    a.add_flow(f)
    b.expect(f)
    e.run(10**10)
    assert b.rx_packets[0] == 40 and a.rc_stats(0)["timeouts"] == 0
    # the last frame of each burst (the next one leaves more than a frame time later)
    ends = [p for (p, t), (_, t2) in itertools.pairwise(fwd.seen) if t2 - t > frame_ps]
    assert len(ends) >= 3
    assert [psn for _, psn in back.acks] == [*ends, 39]
    if onoff == "fixed":
        assert ends == list(range(2, 39, 3))


def test_unwrap():
    assert unwrap_psn(0, PSN_MOD - 1) == PSN_MOD
    assert unwrap_psn(PSN_MOD - 1, PSN_MOD) == PSN_MOD - 1


@given(mode=st.sampled_from(["gbn", "sr"]),
       first=st.sampled_from([0, PSN_MOD - 5, PSN_MOD - 1]),
       n=st.integers(1, 30),
       losses=st.lists(st.booleans(), max_size=120),
       back_losses=st.lists(st.booleans(), max_size=60))
def test_any_loss_pattern_in_order_exactly_once(mode, first, n, losses, back_losses):
    """A lossy channel both ways (PSNs across the 2^24 wrap): every frame delivered once, in
    order, unless the QP went to error (then a prefix); sent = delivered + dropped."""
    tx = RcSender(mode, timeout_ps=100, retry_cnt=7, first_psn=first)
    rx = RcReceiver(mode, first_psn=first)
    fwd, bwd = iter(losses), iter(back_losses)
    delivered: list[int] = []
    dropped = 0
    new = 0
    now = 0
    for _ in range(10_000):
        if tx.error or (new == n and not tx.outstanding):
            break
        burst = []
        while len(burst) < 4:  # a window of 4 frames per round trip
            res = tx.pop_resend(now)
            if res is None and new < n:
                psn = tx.send_new(1, now, new == n - 1)  # the last frame asks for an ACK
                res = (psn, 1)
                new += 1
            if res is None:
                break
            burst.append(res[0])
        replies = []
        for psn in burst:
            if next(fwd, False):
                dropped += 1
                continue
            verdict, out, reply = rx.on_frame(psn % PSN_MOD, psn - first)
            if verdict in ("out_of_sequence", "duplicate"):
                dropped += 1
            delivered.extend(out)
            if verdict == "deliver":
                reply = reply or ("ack", (rx.expected - 1) % PSN_MOD)
            if reply is not None:
                replies.append(reply)
        now += 10
        for kind, wpsn in replies:
            if next(bwd, False):
                continue
            (tx.on_nak if kind == "nak" else tx.on_ack)(wpsn, now)
        if not tx.has_resend() and tx.deadline_ps is not None:  # (None: none asked yet)
            now = max(now, tx.deadline_ps)
            tx.on_timeout(now)
    assert delivered == list(range(len(delivered)))
    if not tx.error:
        assert delivered == list(range(n)) and tx.acked_bytes == n
    assert tx.sent_frames == len(delivered) + dropped + len(rx._held)



_OPS = st.tuples(
    # new: a new frame of k % 3 + 1 bytes, the last of its message when k is even (it asks
    # for an ACK; every 4th new frame asks too); resend: the NIC sends a resend now, if any
    # (late: its queue was full); frame / lose: the k-th data frame in flight arrives / is
    # lost; reply / lose_reply: the same for the ACKs and NAKs; tick: (k + 1) x 20 ps pass
    # (the timer, 100 ps, may expire, also while a resend waits)
    st.sampled_from(["new", "new", "frame", "frame", "reply", "reply", "resend", "lose",
                     "lose_reply", "tick"]),
    st.integers(0, 7))


@given(mode=st.sampled_from(["gbn", "sr", "ooo"]),
       first=st.sampled_from([0, 7, PSN_MOD - 3]),
       ack_every=st.integers(0, 3),
       ops=st.lists(_OPS, max_size=150))
# SR: a NAK asks for a resend, then the frame it names arrives late (reordered) and is
# acknowledged before the resend goes
@example(mode="sr", first=0, ack_every=1, ops=[
    ("new", 0), ("new", 0), ("frame", 1), ("reply", 0), ("frame", 0), ("reply", 0)])
# SR: a NAK and then a timeout ask for the same resend (the NIC's queue is full); one goes,
# is acknowledged, and the second request must not remain
@example(mode="sr", first=PSN_MOD - 3, ack_every=1, ops=[
    ("new", 0), ("new", 0), ("lose", 0), ("frame", 0), ("reply", 0), ("tick", 7),
    ("resend", 0), ("frame", 0), ("reply", 0), ("resend", 0)])
def test_rc_state_machines_any_interleaving(mode, first, ack_every, ops):
    """RcSender and RcReceiver driven through any interleaving of new frames, resends the NIC
    sends late (its queue full), losses and reordering both ways, and timer expiries
    (also while a resend waits); then a clean network until the QP is idle:

    * the application gets frames in PSN order, each exactly once (also across the 2^24 wrap);
    * has_resend() is exactly "pop_resend gives a frame", which is an outstanding PSN;
    * the QP goes to error only after retry_cnt + 1 expiries without progress, and
      otherwise every frame is delivered and acknowledged in the end;
    * every transmission is delivered, dropped by the receiver, held (SR, OOO), lost or in
      flight.

    ``"ooo"``: an out-of-order receiver (its gap timer, 60 ps, may expire on a tick) and a
    selective sender.
    """
    timeout = 100
    tx = RcSender("sr" if mode == "ooo" else mode, timeout_ps=timeout, retry_cnt=3,
                  first_psn=first, ack_req_every=4)
    rx = RcReceiver(mode, first_psn=first, timeout_ps=60)
    fwd: list[int] = []  # data frames in flight (unwrapped PSNs)
    bwd: list[tuple[str, int]] = []  # replies in flight (kind, wire PSN)
    sizes: list[int] = []
    asks: list[bool] = []  # whether each new frame asked for an ACK
    delivered: list[int] = []
    lost = 0
    now = 0
    no_progress = 0  # expiries since the last ACK that freed a frame

    def check() -> None:
        assert delivered == list(range(len(delivered)))
        assert tx.has_resend() == (tx.peek_resend_bytes() > 0)
        asked = any(tx.asks_ack(p) for p in range(tx.base, tx.next_psn))
        assert (tx.deadline_ps is None) == (not asked or tx.error)
        held = len(rx.held())
        assert tx.sent_frames == (len(delivered) + rx.duplicates + rx.out_of_sequence + held
                                  + lost + len(fwd))

    def arrive(k: int) -> None:
        psn = fwd.pop(k)
        verdict, out, reply = rx.on_frame(psn % PSN_MOD, psn - first, now)
        assert all(0 <= i < tx.next_psn - first for i in out)
        assert mode != "ooo" or (verdict != "out_of_sequence"  # OOO: kept, never NAKed here
                                 and (reply is None or reply[0] == "ack"))
        delivered.extend(out)
        # the host's receiver: an ACK when a frame delivered asked for one (or ack_every)
        n0 = len(delivered) - len(out)
        if reply is None and any(asks[i] or (ack_every and (n0 + j + 1) % ack_every == 0)
                                 for j, i in enumerate(out)):
            reply = ("ack", (rx.expected - 1) % PSN_MOD)
        if reply is not None:
            bwd.append(reply)

    def answer(k: int) -> None:
        nonlocal no_progress
        kind, wpsn = bwd.pop(k)
        base = tx.base
        if kind == "nak":
            tx.on_nak(wpsn, now)
        else:
            tx.on_ack(wpsn, now)
        if tx.base > base:
            no_progress = 0

    def resend() -> None:
        has = tx.has_resend()
        res = tx.pop_resend(now)
        assert (res is not None) == has
        if res is not None:
            psn, nbytes = res
            assert tx.base <= psn < tx.next_psn and nbytes == sizes[psn - first]
            fwd.append(psn)

    def new(nbytes: int, last: bool) -> None:
        sizes.append(nbytes)
        psn = tx.send_new(nbytes, now, last)
        asks.append(tx.asks_ack(psn))
        fwd.append(psn)

    def expire() -> None:
        nonlocal no_progress
        if rx.deadline_ps is not None and now >= rx.deadline_ps:
            reply = rx.on_timeout(now)
            assert reply == ("nak", rx.expected % PSN_MOD)
            bwd.append(reply)
        if tx.deadline_ps is not None and now >= tx.deadline_ps:
            ok = tx.on_timeout(now)
            no_progress += 1
            assert ok == (no_progress <= tx.retry_cnt)

    for op, k in ops:
        if tx.error:
            break
        if op == "new":
            new(k % 3 + 1, k % 2 == 0)
        elif op == "resend":
            resend()
        elif op == "frame" and fwd:
            arrive(k % len(fwd))
        elif op == "lose" and fwd:
            fwd.pop(k % len(fwd))
            lost += 1
        elif op == "reply" and bwd:
            answer(k % len(bwd))
        elif op == "lose_reply" and bwd:
            bwd.pop(k % len(bwd))
        elif op == "tick":
            now += (k + 1) * 20
            expire()
        check()
    # a clean network from here: everything sent arrives, in order
    for _ in range(10 * len(sizes) + 20):
        if tx.error or not tx.outstanding:
            break
        while tx.has_resend():
            resend()
        while fwd:
            arrive(0)
        while bwd:
            answer(0)
        if tx.outstanding and not tx.has_resend():
            due = [d for d in (tx.deadline_ps, rx.deadline_ps) if d is not None]
            if not due:  # its message goes on: the last frame asks for an ACK
                new(1, True)
                continue
            now = max(now, min(due))
            expire()
        check()
    if tx.error:
        assert no_progress == tx.retry_cnt + 1 and not tx.has_resend()
    else:
        assert delivered == list(range(len(sizes)))
        assert tx.outstanding == 0 and not tx.has_resend() and tx.acked_bytes == sum(sizes)


# ---------------------------------------------------------------- in the fabric
def _two_switches(**hosts):
    import tomllib

    from sim.scenarios.description import build

    with open("docs/examples/two_switches.toml", "rb") as fh:
        doc = tomllib.load(fh)
    doc["hosts"].update(hosts)
    doc["switch"]["pfc"] = False
    return build(doc, "f.toml")


def test_fabric_file_hosts_reliable_and_summary():
    sc = _two_switches(reliable=True, retransmit="sr", ack_timeout=5, retry_cnt=3)
    h = sc.fabric.nodes[10]
    assert (h.reliable, h.retransmit, h.rc_timeout_ps, h.retry_cnt) == (
        True, "sr", ack_timeout_ps(5), 3)
    sc.fabric.run(sc.duration_ps)
    flows = sc.fabric.summary()["flows"]
    assert all("rc" in f for f in flows)
    for f in flows:  # lossy (pfc off) and congested: frames are resent, none unaccounted
        rc = f["rc"]
        assert rc["retransmitted_frames"] > 0 and rc["network_or_in_flight_frames"] >= 0
        assert f["bytes_delivered"] <= rc["sent_bytes"] - rc["retransmitted_bytes"]
    assert _two_switches().fabric.nodes[10].reliable is True  # the default
    off = _two_switches(reliable=False)
    assert off.fabric.nodes[10].reliable is False and off.params["hosts"]["reliable"] is False
    off.fabric.run(10**8)
    assert all("rc" not in f for f in off.fabric.summary()["flows"])


def test_fabric_file_bad_retransmit_one_line():
    from sim.scenarios.base import ScenarioError

    with pytest.raises(ScenarioError, match=r"f.toml: \[hosts\] .*retransmit.*gbn, sr") as e:
        _two_switches(reliable=True, retransmit="xyz")
    assert "\n" not in str(e.value)


def test_lossy_collective_completes_with_reliable():
    """alltoall over a rail fabric without PFC: frames are dropped at the switches; without
    RC the collective never completes, with it every byte arrives (resent)."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import run_size
    from sim.scenarios.common import collective_params

    base = {"nodes": 2, "gpus_per_node": 4, "spines": 1, "pxn": False, "pfc": False,
            "buffer_kb": 400.0, "limit_ms": 5.0}
    lossy = run_size("alltoall", 4 << 20, "rail", resolve_params(collective_params(), base),
                     channels=4, inplace=False)
    assert lossy["error"] is not None and "incomplete" in lossy["error"]
    p = resolve_params(collective_params(), {**base, "reliable": True, "ack_timeout": 4})
    row = run_size("alltoall", 4 << 20, "rail", p, channels=4, inplace=False)
    assert row["error"] is None and row["wrong"] == 0
    c = row["counters"]
    assert c["drops"] > 0 and c["retransmitted_bytes"] > 0 and c["qp_errors"] == 0


@pytest.mark.parametrize("mode", ["gbn", "sr"])
def test_replay_summary_conservation_with_resends(mode, tmp_path):
    """summary.json's independent per-flow check (Dropped events, queues and wires walked)
    holds with RC: sent counts every transmission, SR's held frames are still on their way."""
    from sim.study.results import run_scenario

    sc = _two_switches(reliable=True, retransmit=mode, ack_timeout=4)
    s = run_scenario(sc, out_dir=str(tmp_path / "o"), plots=False, write_captures=False)
    for f in s["flows"]:
        assert f["rc"]["retransmitted_frames"] > 0
        assert f["sent_packets"] == (f["delivered_packets"] + f["dropped_packets"]
                                     + f["in_flight_packets"])
        assert f["sent_bytes"] == (f["delivered_bytes"] + f["dropped_bytes"]
                                   + f["in_flight_bytes"])


def test_run_schedule_reliable_on_an_existing_fabric():
    """run_schedule(reliable={...}) turns RC on in the job's hosts of a fabric built without
    it: the lossy alltoall completes."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import build_fabric
    from sim.scenarios.common import collective_params
    from sim.workloads.collective import run_schedule
    from sim.workloads.nccl import schedule

    p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 4, "spines": 1,
                                             "pxn": False, "pfc": False, "buffer_kb": 400.0,
                                             "reliable": False})
    rf = build_fabric("rail", p)
    assert not any(getattr(n, "reliable", False) for n in rf.fabric.nodes.values())
    sch = schedule("alltoall", 8, (4 << 20) // 4 // 8, "float", nchannels=4,
                   gpus_per_node=4)
    run = run_schedule(sch, rf.fabric, rf.ranks, mtu_bytes=4096, limit_ps=5 * 10**9,
                       gpus_per_node=4, nvlink=True, pxn=False,
                       reliable={"retransmit": "gbn", "ack_timeout": 4})
    assert run.counters["drops"] > 0
    assert all(rf.fabric.nodes[h].reliable for h in rf.ranks)
    with pytest.raises(ValueError, match="retransmit"):
        run_schedule(sch, rf.fabric, rf.ranks, reliable={"retransmit": "x"})


def test_receive_buffer_drops_counted_and_recovered():
    """A NIC whose receive buffer overflows (slow PCIe, no PFC) drops reliable frames: they
    are counted by reason in rc_stats and resent; at the end nothing is unaccounted."""
    a, b, _, _ = pair(lambda p: False, n=40, ack_timeout=4, pcie_write_bps=20 * 10**9,
                        rx_buffer_bytes=8 * FRAME, rx_pause_tcs=())
    r = b.rc_stats(0)
    assert r["dropped_rx_buffer_full"] == b.rx_buffer_dropped_packets > 0
    assert b.rx_packets[0] == 40 and b.rx_bytes[0] == 40 * FRAME
    c = rc_conservation(a, b, 0)
    assert c["in_flight"] == 0 and c["sent"] == 40 + a.rc_stats(0)["retransmitted_frames"]


# A fabric file: selective repeat with 1 % loss on both inter-switch links, four flows of 4 KB
# messages (each message's last frame asks for an ACK), two from each sender, three into one
# host: PFC pauses the senders, so their flows wait on a full port queue while their ACK
# timers (8.192 us) expire.  A resend asked for by a NAK and again by a
# timeout, then acknowledged before it went, once left the sender saying it had a resend and
# giving none (an AssertionError in Host._send).
_SR_LOSS_TOML = """
[run]
duration_ms = 0.1
seed = 1
[topology]
kind = "custom"
switch_ids = [0, 1]
host_ids = [10, 11, 20, 21]
ecmp = true
links = [[10, 0, 0, 0], [11, 0, 0, 1], [20, 0, 1, 0], [21, 0, 1, 1],
         [0, 2, 1, 2], [0, 3, 1, 3]]
[links]
link_gbps = 100.0
cable_m = 10
[switch]
pfc = true
buffer_kb = 2000.0
xoff_kb = 20.0
[hosts]
cc = "none"
reliable = true
retransmit = "%s"
ack_timeout = 1
[[flows]]
src = 10
dst = 20
message_kb = 4.0
[[flows]]
src = 10
dst = 21
message_kb = 4.0
[[flows]]
src = 11
dst = 20
message_kb = 4.0
[[flows]]
src = 11
dst = 20
message_kb = 4.0
[[faults]]
kind = "loss"
node = 0
port = 2
loss_rate = 0.01
[[faults]]
kind = "loss"
node = 0
port = 3
loss_rate = 0.01
"""


@pytest.mark.parametrize("mode", ["sr", "gbn"])
def test_fabric_file_loss_flows_waiting_on_a_full_queue(mode, tmp_path):
    from sim.study.results import run_scenario

    path = tmp_path / "sr_loss.toml"
    path.write_text(_SR_LOSS_TOML % mode)
    s = run_scenario(str(path), out_dir=str(tmp_path / "o"), plots=False,
                     write_captures=False, baseline=False)
    rc = [f["rc"] for f in s["flows"]]
    assert sum(r["naks_received"] for r in rc) > 0 and all(r["qp_error"] == 0 for r in rc)
    if mode == "sr":  # the case that failed: resends asked for by a NAK and a timeout
        assert sum(r["timeouts"] for r in rc) > 0
    for f in s["flows"]:
        assert f["sent_packets"] == (f["delivered_packets"] + f["dropped_packets"]
                                     + f["in_flight_packets"])


def test_posted_flow_resend_after_post_runs_one_send_chain():
    """A posted reliable flow that went idle and was posted to again is running: a NAK
    during its new message must not start a second chain of _send events for it."""
    e = Engine()
    a = Host(e, 0, RATE, reliable=True, ack_timeout=4)
    b = Host(e, 1, RATE, reliable=True, ack_timeout=4)
    fwd, back = Lossy(b, drop_once(25)), Backwire(a)
    a.port.connect(fwd, 0, PROP_PS)
    b.port.connect(back, 0, PROP_PS)
    f = Flow(0, 0, 1, RATE)
    a.add_posted_flow(f)
    b.expect(f)
    a.post(0, 20 * FRAME)
    e.run(20_000_000)  # all 20 sent and acknowledged: idle
    a.post(0, 100 * FRAME)  # frame 25 is lost: a NAK comes back while it sends
    tx = a._tx[0]
    chains = 0
    while (t := e.peek_ps()) is not None:
        e.run(t + 1)
        pending = sum(1 for args in e.pending_args() if args and args[0] is tx)
        chains = max(chains, pending + sum(1 for w in a._blocked[f.tc] if w is tx))
    assert a.rc_stats(0)["naks_received"] == 1 and b.rx_packets[0] == 120
    assert chains == 1


_LINK_DOWN_TOML = """
[run]
duration_ms = 0.5
[topology]
kind = "custom"
switch_ids = [0, 1]
host_ids = [10, 11, 20, 21]
links = [[10, 0, 0, 0], [11, 0, 0, 1], [20, 0, 1, 0], [21, 0, 1, 1], [0, 2, 1, 2]]
[links]
link_gbps = 100.0
[hosts]
reliable = %s
[[flows]]
src = 10
dst = 20
size_kb = 1000.0
[[flows]]
src = 11
dst = 21
size_kb = 1000.0
[[faults]]
kind = "link_down"
node = 0
port = 2
at_us = 20.0
until_us = 70.0
"""


@pytest.mark.parametrize("reliable", [None, "false"])
def test_link_down_50us_two_flows_complete_by_default(reliable, tmp_path):
    """The switches' only link down for 50 us under two 1 MB flows: by default (RC) the
    frames sent after it come back reveal the gap, a NAK each, go-back-N resends, both flows
    complete long before the 4.3 s timer; unreliable NICs lose the frames for good."""
    from sim.study.results import run_scenario

    text = _LINK_DOWN_TOML % (reliable or "true")
    if reliable is None:  # the default
        text = text.replace("[hosts]\nreliable = true\n", "")
    path = tmp_path / "down.toml"
    path.write_text(text)
    s = run_scenario(str(path), out_dir=str(tmp_path / "o"), plots=False,
                     write_captures=False, baseline=False)
    lost = s["totals"]["dropped_packets_by_reason"]["link_down"]
    assert lost > 0
    if reliable is None:
        rc = [f["rc"] for f in s["flows"]]
        assert all(f["fct_ps"] is not None for f in s["flows"])
        assert all(r["naks_received"] >= 1 and r["timeouts"] == 0 for r in rc)
        assert sum(r["retransmitted_frames"] for r in rc) >= lost
    else:
        assert all(f["fct_ps"] is None and "rc" not in f for f in s["flows"])


# ------------------------------------------------------ out-of-order placement ("ooo")
def test_ooo_one_drop_nak_after_the_gap_timer_resends_one():
    """A receiver that places out-of-order frames: frame 3 lost, 4..9 are kept without a NAK;
    the NAK (for 3) goes when the gap has been open ooo_timeout_ps since frame 4 arrived; the
    sender resends 3 only; every frame delivered once, in order."""
    a, b, fwd, back = pair(drop_once(3), n=10, ooo=True, ooo_timeout_ps=5_000_000)
    assert [p for p, _ in fwd.seen] == [*range(10), 3]
    naks = [k for k in back.acks if k[0] == AethKind.NAK]
    assert naks == [(AethKind.NAK, 3)]
    t4 = fwd.seen[4][1] + frame_ser_time_ps(FRAME, RATE) + PROP_PS  # frame 4 received
    t_resend = fwd.seen[10][1]
    # the NAK leaves at t4 + 5 us and takes its serialisation and the link back
    assert t4 + 5_000_000 + PROP_PS < t_resend < t4 + 5_000_000 + 2 * PROP_PS
    s, r = a.rc_stats(0), b.rc_stats(0)
    assert s["retransmitted_frames"] == 1 and s["timeouts"] == 0 and s["unacked_frames"] == 0
    assert r["naks_sent"] == 1 and r["out_of_sequence"] == 0 and r["duplicates"] == 0
    assert r["placed_out_of_order"] == 6
    assert b.rx_packets[0] == 10 and b.rx_bytes[0] == 10 * FRAME
    assert rc_conservation(a, b, 0, fwd.dropped)["in_flight"] == 0


def test_ooo_off_and_auto_keep_the_nak_on_a_gap():
    """ooo=False and "auto" (None) on a fabric that does not route adaptively: the receiver
    NAKs at once (go-back-N), as before; set_adaptive_routing turns "auto" on."""
    for ooo in (False, None):
        _a, b, _fwd, back = pair(drop_once(3), n=10, ooo=ooo)
        assert [k for k in back.acks if k[0] == AethKind.NAK] == [(AethKind.NAK, 3)]
        assert b.rc_stats(0)["out_of_sequence"] == 6 and "placed_out_of_order" not in \
            b.rc_stats(0)
    h = Host(Engine(), 0, RATE)
    assert h.ooo is None and not h.ooo_on
    h.set_adaptive_routing(True)
    assert h.ooo_on and h._tx_mode() == "sr"
    assert not Host(Engine(), 0, RATE, ooo=False, retransmit="gbn")._tx_mode() == "sr"
    with pytest.raises(ValueError, match="ooo"):
        Host(Engine(), 0, RATE, ooo="yes")
    with pytest.raises(ValueError, match="timeout_ps"):
        Host(Engine(), 0, RATE, ooo_timeout_ps=0)


@given(first=st.sampled_from([0, PSN_MOD - 3]),
       n=st.integers(1, 40),
       jitter=st.lists(st.integers(0, 9), min_size=1, max_size=120),
       losses=st.lists(st.booleans(), max_size=120),
       window=st.integers(10, 40))
@example(first=0, n=3, jitter=[9, 0, 0], losses=[], window=10)  # reordered, nothing lost
@example(first=0, n=4, jitter=[0], losses=[True, False, False, False, True], window=10)
def test_ooo_pair_reordering_and_loss(first, n, jitter, losses, window):
    """An out-of-order receiver and a selective sender over a network that delays each
    transmission by a random extra 0..9 time units (so it reorders them) and loses those
    ``losses`` picks; replies come back after a fixed delay.  Then:

    * every PSN is delivered exactly once, in order, and the message completes (all ACKed);
    * without a loss there is no NAK, no resend, no duplicate: reordering shorter than the
      receiver's window is not taken for a loss;
    * a loss is always recovered; by the receiver's NAK alone (no ACK timeout) unless a
      transmission of the last PSN, which nothing follows, was lost;
    * every transmission is delivered, a duplicate or lost.
    """
    ack_timeout = 10_000  # far above a round trip: only a loss nothing follows needs it
    tx = RcSender("sr", timeout_ps=ack_timeout, retry_cnt=7, first_psn=first)
    rx = RcReceiver("ooo", first_psn=first, timeout_ps=window)
    delays, drops = itertools.cycle(jitter), iter(losses)
    events: list[tuple[int, int, str, object]] = []  # (time, seq, kind, data)
    seq = itertools.count()
    delivered: list[int] = []
    lost = 0
    lost_last = False
    flying = 0  # transmissions on their way
    new = 0
    now = 0

    def push(t, kind, data=None):
        heapq.heappush(events, (t, next(seq), kind, data))

    def reply_back(reply):
        push(now + 5, "reply", reply)

    def arm_rx():
        if rx.deadline_ps is not None:
            push(rx.deadline_ps, "rx_timer")

    def arm_tx():
        if tx.deadline_ps is not None:
            push(tx.deadline_ps, "tx_timer")

    push(0, "send")
    for _ in range(20_000):
        if not events or (new == n and not tx.outstanding and not flying):
            break
        now, _, kind, data = heapq.heappop(events)
        if kind == "send":  # one transmission per time unit: a resend first, else new data
            res = tx.pop_resend(now)
            if res is None and new < n:
                res = (tx.send_new(1, now, new == n - 1), 1)
                new += 1
            if res is not None:
                psn = res[0]
                if next(drops, False):
                    lost += 1
                    lost_last = lost_last or psn - first == n - 1
                else:
                    flying += 1
                    push(now + 3 + next(delays), "arrive", psn)
                arm_tx()
            if new < n or tx.has_resend():
                push(now + 1, "send")
        elif kind == "arrive":
            flying -= 1
            psn = data
            verdict, out, reply = rx.on_frame(psn % PSN_MOD, psn - first, now)
            assert verdict != "out_of_sequence"
            delivered.extend(out)
            if reply is None and any(i == n - 1 for i in out):  # the last frame asked
                reply = ("ack", (rx.expected - 1) % PSN_MOD)
            if reply is not None:
                reply_back(reply)
            arm_rx()
        elif kind == "rx_timer":
            reply = rx.on_timeout(now)
            if reply is not None:
                reply_back(reply)
            arm_rx()
        elif kind == "reply":
            k, wpsn = data
            (tx.on_nak if k == "nak" else tx.on_ack)(wpsn, now)
            if tx.has_resend():
                push(now, "send")
        elif kind == "tx_timer" and tx.deadline_ps is not None and now >= tx.deadline_ps:
            tx.on_timeout(now)
            arm_tx()
            push(now, "send")
    assert delivered == list(range(n))  # each PSN once, in order: the message completes
    assert tx.outstanding == 0 and not tx.error and tx.acked_bytes == n
    assert rx.out_of_sequence == 0 and not rx.held()
    assert tx.sent_frames == n + tx.retransmitted_frames == len(delivered) + rx.duplicates + lost
    if not lost:
        assert rx.naks_sent == 0 and tx.retransmitted_frames == 0 and rx.duplicates == 0
    if not lost_last:
        assert tx.timeouts == 0

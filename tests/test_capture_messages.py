"""What the simulator's captures show of its data packets: ordinary QP numbers (never the
management QPs 0 and 1) and the RDMA WRITE opcodes of real messages, FIRST (MIDDLE ...)
LAST or ONLY, cut where the sender cuts its messages (the NIC marks each packet's place,
``SimPacket.place``); a reliable flow's frames carry their RC PSN and AckReq bit, a resent
frame its PSN and place again; the NIC's CNPs and ACKs go to the flow's QP too.  tshark
decodes them without an expert note (docs/reference/results-folder.md,
"The pcaps")."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import wire
from sim.addresses import flow_qp
from sim.fabric import star
from sim.net.mmu import MmuConfig
from sim.nic.host import Flow
from sim.study.results import Capture
from sim.units import gbps, prop_delay_ps
from tests.helpers import posted_pair, run_cli
from wire.linkstack import ROCE

HDR = ROCE.header_bytes  # Ethernet, IPv4, UDP, BTH, ICRC of a synthesised frame
RETH = 16
FIRST, MIDDLE, LAST, ONLY = (f"RC_RDMA_WRITE_{x}" for x in ("FIRST", "MIDDLE", "LAST", "ONLY"))


def _messages(frames: list[wire.Decoded]) -> dict[int, list[list[wire.Decoded]]]:
    """Per destination QP, its frames grouped into messages; asserts that every message is
    FIRST (MIDDLE ...) LAST or ONLY, in PSN order, and that FIRST and ONLY carry a RETH whose
    DMA length is the message's payload (for the messages seen whole)."""
    out: dict[int, list[list[wire.Decoded]]] = defaultdict(list)
    open_: dict[int, list[wire.Decoded]] = {}
    for d in frames:
        assert not d.problems, d.problems
        bth = d["bth"]
        qp, op = bth["dest_qp"], bth["opcode_name"]
        assert qp >= 2
        cur = open_.get(qp)
        if op in (FIRST, ONLY):
            assert cur is None, f"QP {qp:#x}: {op} inside a message"
            assert "reth" in d
            cur = [d]
        else:
            assert op in (MIDDLE, LAST) and cur is not None, f"QP {qp:#x}: {op} first"
            assert "reth" not in d
            cur.append(d)
        if op in (LAST, ONLY):
            out[qp].append(cur)
            payload = sum(x["payload"]["length"] if "payload" in x else 0 for x in cur)
            assert cur[0]["reth"]["dma_length"] == payload
            open_.pop(qp, None)
        else:
            open_[qp] = cur
    for qp, cur in open_.items():  # the capture ended inside a message
        out[qp].append(cur)
    return out


def _pair(tmp_path, flow_kw: dict, stop_ps: int | None = None, reliable: bool = True):
    """A sender and a receiver through one switch; flow 0 (QP 0x100) with ``flow_kw``,
    captured where it leaves the switch.  Returns (decoded frames, receiver, flow, the
    packets the capture saw)."""
    cfg = MmuConfig(buffer_bytes=4_000_000, ports=3, reserved_bytes=10_000,
                    lossless_pgs=frozenset({3}), headroom_bytes=100_000, xoff_mode="static",
                    xoff_bytes=1_000_000)
    fab, recv, (snd,) = star(1, gbps(100), prop_delay_ps(2), cfg,
                             host_kw={"reliable": reliable})
    flow = Flow(0, snd, recv, gbps(100), stop_ps=stop_ps, **flow_kw)
    fab.add_flow(flow)
    cap = Capture(str(tmp_path / "c.pcap"))
    seen = []
    port = fab.nodes[0].ports[recv]
    port.taps.append(cap)
    port.taps.append(lambda t, p: seen.append(p) if p.frame is None else None)
    fab.run(stop_ps or 10**9)
    cap.close()
    frames = [wire.dissect(r.data) for r in wire.read(tmp_path / "c.pcap")]
    return frames, fab.nodes[recv], flow, seen


def _frames_of(flow: Flow) -> list[int]:
    """The sizes of the frames the NIC cuts ``flow`` into (Flow.frame_bytes)."""
    out, sent = [], 0
    while (n := flow.frame_bytes(sent)) and len(out) < 10_000:
        out.append(n)
        sent += n
    return out


@settings(max_examples=25, deadline=None)
@given(packet=st.sampled_from([200, 1082, 4154]), msg_frames=st.integers(1, 5),
       tail=st.sampled_from([0, 1, 77]), msgs=st.integers(1, 4), cut=st.integers(0, 2000))
def test_message_flows_show_one_write_message_per_message(tmp_path_factory, packet,
                                                          msg_frames, tail, msgs, cut):
    m = max((msg_frames - 1) * packet + tail if tail else msg_frames * packet, 1)
    size = max(msgs * m - cut, 1)
    frames, rx, flow, seen = _pair(tmp_path_factory.mktemp("m"), {
        "packet_bytes": packet, "message_bytes": m, "size_bytes": size})
    got = _messages(frames)
    assert list(got) == [flow_qp(0)] == [0x100]
    # the RC PSN and AckReq of each packet: PSNs from 0, AckReq on each message's last frame
    assert [d["bth"]["psn"] for d in frames] == [p.psn for p in seen] == list(range(len(seen)))
    assert [d["bth"]["ack_req"] for d in frames] == [int(p.ackreq) for p in seen]
    assert all(d["bth"]["ack_req"] for d in frames if d["bth"]["opcode_name"] in (LAST, ONLY))
    seen = got[0x100]
    assert len(seen) == rx.rx_messages[0]  # the NIC's count of messages received
    want, acc = [], 0  # frames per message: the NIC's frames, cut at every m bytes
    for n in _frames_of(flow):
        acc += n
        if not want or want[-1][1]:
            want.append([0, False])
        want[-1][0] += 1
        want[-1][1] = acc % m == 0 or acc == size
    assert [len(g) for g in seen] == [k for k, _end in want]


@settings(max_examples=10, deadline=None)
@given(packet=st.sampled_from([200, 1082]), size=st.one_of(st.none(), st.integers(1, 200_000)))
def test_streams_are_cut_into_64_frame_messages(tmp_path_factory, packet, size):
    frames, _rx, flow, _seen = _pair(tmp_path_factory.mktemp("s"), {
        "packet_bytes": packet, "size_bytes": size}, stop_ps=None if size else 3 * 10**7)
    seen = _messages(frames)[0x100]
    assert all(len(g) == 64 for g in seen[:-1]) and 1 <= len(seen[-1]) <= 64
    if size is not None:
        assert sum(map(len, seen)) == len(_frames_of(flow))
        assert seen[-1][-1]["bth"]["opcode_name"] in (LAST, ONLY)


@settings(max_examples=15, deadline=None)
@given(sizes=st.lists(st.one_of(st.integers(1, 9000), st.integers(1, 6).map(lambda k: k * 1082)),
                      min_size=1, max_size=8))
def test_posted_messages_are_the_messages_posted(tmp_path_factory, sizes):
    """A posted flow (a collective's QP) cuts its frames at the end of each message posted,
    a whole number of frames included (its last frame is then full)."""
    d = tmp_path_factory.mktemp("p")
    _star, fab, a, _b, _flow = posted_pair(100, fid=1)
    cap = Capture(str(d / "c.pcap"))
    a.port.taps.append(cap)
    for n in sizes:
        a.post(1, n)
    fab.run(10**9)
    cap.close()
    seen = _messages([wire.dissect(r.data) for r in wire.read(d / "c.pcap")])[flow_qp(1)]
    assert [len(g) for g in seen] == [-(-n // 1082) for n in sizes]


def _tshark_notes(pcap: Path) -> list[str]:
    from tests.tshark import require_tshark

    out = subprocess.run([require_tshark(), "-n", "-r", str(pcap), "-T", "fields", "-e",
                          "_ws.expert.message", "-e", "_ws.malformed", "-e", "_ws.col.Info"],
                         capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.split("\t")[:2] != ["", ""]
            or "MAD" in line or "Unknown Attribute" in line]


def test_replayed_captures_are_clean_writes_for_tshark(tmp_path):
    out = tmp_path / "inc"
    rc, _o, err = run_cli(["replay", "incast", "-p", "duration_ms=0.3", "-p", "cc=dcqcn",
                           "--capture", "0:1", "--no-plots", "--out", str(out)])
    assert rc == 0, err
    for name in ("bottleneck.pcap", "capture_0_1.pcap"):
        frames = [wire.dissect(r.data) for r in wire.read(out / name)]
        data = [d for d in frames if d.get("bth") and d["bth"]["opcode_name"].startswith(
            "RC_RDMA_WRITE")]
        if name == "bottleneck.pcap":
            got = _messages(data)
            assert sorted(got) == [flow_qp(f) for f in range(8)]
            ops = {d["bth"]["opcode_name"] for d in data}
            assert ops == {FIRST, MIDDLE, LAST}
            # in their class's DSCP (class 3: 24), so a replay puts them back in class 3
            assert {d["ipv4"]["dscp"] for d in data} == {24}
        else:  # back to sender 1: its flow's CNPs and RC ACKs, to its flow's QP
            control = {}
            for d in frames:
                if d.get("bth"):
                    control.setdefault(d["bth"]["opcode_name"], set()).add(d["bth"]["dest_qp"])
            assert set(control) == {"CNP", "RC_ACKNOWLEDGE"}
            assert control["CNP"] == control["RC_ACKNOWLEDGE"] == {flow_qp(0)}
        assert _tshark_notes(out / name) == []
    # replayed alone through a lossless fabric, the capture's frames stay lossless: PFC
    # pauses, no drop (in DSCP 0 they were class 0: 'drops 129 (lossy_over_threshold)')
    rc, _o, err = run_cli(["replay", "incast", "-p", "background=false", "-p",
                           "duration_ms=0.3", "--pcap", str(out / "bottleneck.pcap"),
                           "--time-scale", "0.5", "--no-plots", "--no-capture", "--out",
                           str(tmp_path / "again")])
    s = json.loads((tmp_path / "again" / "summary.json").read_text())
    assert rc == 0, err
    assert s["totals"]["drops"] == 0 and s["totals"]["pauses"] > 0


def test_unreliable_flows_number_their_frames_in_the_capture(tmp_path):
    """Without RC (no PSN on the packets) the capture numbers a flow's frames itself, from
    0, and no frame asks for an ACK."""
    frames, _rx, _flow, seen = _pair(tmp_path, {"message_bytes": 5000, "size_bytes": 30_000},
                                     reliable=False)
    assert all(p.psn is None for p in seen) and len(seen) == len(frames) > 20
    assert [d["bth"]["psn"] for d in frames] == list(range(len(frames)))
    assert not any(d["bth"]["ack_req"] for d in frames)
    assert len(_messages(frames)[flow_qp(0)]) == 6


#: One flow of 4 KB messages (four 1082-byte frames each) through a switch port that loses 3 %
#: of its frames: the receiver NAKs, the sender resends.  Captured where the frames leave
#: the sender (resends included) and after the loss.
LOSSY = """[run]
duration_ms = 0.05
seed = 3
[topology]
kind = "custom"
switch_ids = [0]
host_ids = [10, 20]
links = [[10, 0, 0, 0], [20, 0, 0, 1]]
[links]
link_gbps = 100.0
[switch]
buffer_kb = 2000.0
[hosts]
cc = "none"
retransmit = "%s"
ack_timeout = 1
[capture]
ports = ["10:0"]
[[flows]]
src = 10
dst = 20
message_kb = 4.0
[[faults]]
kind = "loss"
node = 0
port = 1
loss_rate = 0.03
"""


def _tshark_psns(pcap: Path, psn: int) -> list[str]:
    from tests.tshark import require_tshark

    out = subprocess.run([require_tshark(), "-n", "-r", str(pcap), "-Y",
                          f"infiniband.bth.psn == {psn}", "-T", "fields", "-e",
                          "frame.number"], capture_output=True, text=True, check=True).stdout
    return out.split()


@pytest.mark.parametrize("mode", ["gbn", "sr"])
def test_resent_frames_show_their_psn_and_place_again(tmp_path, mode):
    """A resent frame is the frame it resends: its RC PSN (so a PSN is found twice), its
    opcode (its place in its message), its RETH and AckReq bit; the frames of each PSN, in
    PSN order, make whole WRITE messages; tshark has no note on any of it."""
    f = tmp_path / "lossy.toml"
    f.write_text(LOSSY % mode)
    rc, _o, err = run_cli(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"])
    assert rc == 0, err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    resent = s["flows"][0]["rc"]["retransmitted_frames"]
    assert resent > 0
    pcap = tmp_path / "o" / "capture_10_0.pcap"
    frames = [wire.dissect(r.data) for r in wire.read(pcap)]
    by_psn: dict[int, list[wire.Decoded]] = defaultdict(list)
    for d in frames:
        by_psn[d["bth"]["psn"]].append(d)
    again = {psn: ds for psn, ds in by_psn.items() if len(ds) > 1}
    assert sum(len(ds) - 1 for ds in by_psn.values()) == resent == len(frames) - len(by_psn)
    for ds in again.values():
        assert all(wire.build(d.to_dict()) == wire.build(ds[0].to_dict()) for d in ds)
    if mode == "gbn":  # go-back-N resends runs of frames, from inside messages
        assert {d["bth"]["opcode_name"] for ds in again.values() for d in ds} >= {MIDDLE, LAST}
    firsts = [by_psn[psn][0] for psn in sorted(by_psn)]
    assert list(sorted(by_psn)) == list(range(len(by_psn)))
    msgs = _messages(firsts)[flow_qp(0)]
    assert all(len(g) == 4 for g in msgs[:-1])
    assert all(g[-1]["bth"]["ack_req"] == 1 for g in msgs if len(g) == 4)
    psn = min(again)
    assert len(_tshark_psns(pcap, psn)) == len(again[psn]) >= 2
    assert _tshark_notes(pcap) == []


COLLECTIVE = """\
[run]
duration_ms = 0.3
[topology]
kind = "rail"
nodes = 2
gpus_per_node = 2
spines = 1
[links]
link_gbps = 400.0
[switch]
buffer_kb = 32000.0
xoff_kb = 256.0
mtu_bytes = 4154
[hosts]
cc = "none"
[capture]
ports = ["3:0", "4:0", "5:0", "6:0"]
[[collective]]
collective = "allreduce"
size = "256K"
nvlink = false
iters = 2
"""


def test_collective_captures_show_the_posted_messages(tmp_path):
    """A collective's QPs post messages of whole frames: each is one WRITE message in the
    captures of the hosts' ports (a full last frame ends it), and tshark is content."""
    f = tmp_path / "coll.toml"
    f.write_text(COLLECTIVE)
    rc, _o, err = run_cli(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"])
    assert rc == 0, err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    (c,) = s["collectives"]
    assert c["complete"] and c["iterations_done"] == 2
    messages = 0
    full_last = 0
    for node in (3, 4, 5, 6):
        pcap = tmp_path / "o" / f"capture_{node}_0.pcap"
        data = [d for d in (wire.dissect(r.data) for r in wire.read(pcap))
                if d.get("bth") and d["bth"]["opcode_name"].startswith("RC_RDMA_WRITE")]
        got = _messages(data)
        assert all(qp == flow_qp(qp - 0x100) and qp >= 0x100 for qp in got)
        for groups in got.values():
            messages += len(groups)
            full_last += sum(len(g) > 1 and len(wire.build(g[-1].to_dict())) ==
                             len(wire.build(g[0].to_dict())) for g in groups)
        assert _tshark_notes(pcap) == []
    assert messages == c["transfers"] * 2  # one message per transfer (1 QP), 2 iterations
    assert full_last > 0  # messages of whole frames end where posted, not at a short frame


def _deep_bytes(obj, seen=None) -> int:
    """Bytes of ``obj`` and everything it holds (containers, instance fields, numpy arrays),
    each object once."""
    import sys

    import numpy as np

    seen = set() if seen is None else seen
    if id(obj) in seen or obj is None or isinstance(obj, type):
        return 0
    seen.add(id(obj))
    if isinstance(obj, np.ndarray):
        return obj.nbytes
    n = sys.getsizeof(obj)
    if isinstance(obj, dict):
        return n + sum(_deep_bytes(k, seen) + _deep_bytes(v, seen) for k, v in obj.items())
    if isinstance(obj, list | tuple | set | frozenset) or type(obj).__name__ == "deque":
        return n + sum(_deep_bytes(x, seen) for x in obj)
    if isinstance(obj, str | bytes | bytearray | int | float | bool):
        return n
    fields = []  # instance fields: in __dict__, slots, or a compiled class's public fields
    for a in dir(obj):
        v = getattr(obj, a, None) if not a.startswith("__") else None
        if v is not None and not callable(v):
            fields.append(v)
    return n + sum(_deep_bytes(v, seen) for v in fields)


def _capture_state(iters: int, tmp_path) -> list[tuple[int, int]]:
    """Per capture of the collective run with ``iters`` iterations, once closed: (bytes it
    keeps besides its templates, writer, budget and path; its number of templates)."""
    from sim.study import results

    held: list[tuple[int, int]] = []

    class Probe(results.Capture):
        def close(self) -> None:
            super().close()
            skip = {id(x) for x in (self.writer, self.budget, self.path, self._tpl,
                                    self._templates, self._tpl_bytes)}
            held.append((_deep_bytes(self, skip), len(self._tpl)))

    f = tmp_path / f"coll{iters}.toml"
    f.write_text(COLLECTIVE.replace("iters = 2", f"iters = {iters}")
                 .replace("duration_ms = 0.3", f"duration_ms = {0.1 * iters + 0.1}"))
    saved, results.Capture = results.Capture, Probe
    try:
        s = results.run_scenario(str(f), out_dir=str(tmp_path / f"o{iters}"), plots=False,
                                 warn=lambda _msg: None)  # (the captures' size estimate)
    finally:
        results.Capture = saved
    assert s["collectives"][0]["iterations_done"] == iters
    return held


def test_capture_memory_does_not_grow_with_the_messages_posted(tmp_path):
    """A collective posts a message per transfer and iteration; a capture keeps one small
    record per flow it saw and one template per distinct frame (flow, size, ECN, opcode,
    AckReq, message size), nothing per message: six times the messages, the same bytes
    (the posted sizes of every flow, seen or not, used to pile up, about 82 bytes each)."""
    short, long = _capture_state(2, tmp_path), _capture_state(12, tmp_path)
    assert [b for b, _ in short] == [b for b, _ in long]
    assert all(n <= 2 * 3 * 2 * 2 for _, n in long)  # 2 flows x 3 opcodes x ECN x AckReq

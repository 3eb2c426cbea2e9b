"""What the simulator's captures show of its data packets: ordinary QP numbers (never the
management QPs 0 and 1) and the RDMA WRITE opcodes of real messages, FIRST (MIDDLE ...)
LAST or ONLY, cut where the sender cuts its messages (sim.study.samples.FrameLog); tshark
decodes them without an expert note (docs/reference/results-folder.md, "The pcaps")."""

from __future__ import annotations

import json
import subprocess
from collections import defaultdict
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

import wire
from sim.fabric import star
from sim.net.mmu import MmuConfig
from sim.nic.host import Flow
from sim.study import results
from sim.study.results import Capture, capture_qp
from sim.units import gbps, prop_delay_ps
from tests.helpers import posted_pair, run_cli

HDR = results._HDR_BYTES  # Ethernet, IPv4, UDP, BTH, ICRC of a synthesised frame
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


def _pair(tmp_path, flow_kw: dict, stop_ps: int | None = None):
    """A sender and a receiver through one switch; flow 0 (QP 0x100) with ``flow_kw``,
    captured where it leaves the switch.  Returns (decoded frames, receiver, flow)."""
    cfg = MmuConfig(buffer_bytes=4_000_000, ports=3, reserved_bytes=10_000,
                    lossless_pgs=frozenset({3}), headroom_bytes=100_000, xoff_mode="static",
                    xoff_bytes=1_000_000)
    fab, recv, (snd,) = star(1, gbps(100), prop_delay_ps(2), cfg)
    flow = Flow(0, snd, recv, gbps(100), stop_ps=stop_ps, **flow_kw)
    fab.add_flow(flow)
    cap = Capture(str(tmp_path / "c.pcap"), flows=fab.flows)
    fab.nodes[0].ports[recv].taps.append(cap)
    fab.run(stop_ps or 10**9)
    cap.close()
    return [wire.dissect(r.data) for r in wire.read(tmp_path / "c.pcap")], fab.nodes[recv], flow


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
    frames, rx, flow = _pair(tmp_path_factory.mktemp("m"), {
        "packet_bytes": packet, "message_bytes": m, "size_bytes": size})
    got = _messages(frames)
    assert list(got) == [capture_qp(0)] == [0x100]
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
    frames, _rx, flow = _pair(tmp_path_factory.mktemp("s"), {
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
    cap = Capture(str(d / "c.pcap"), flows=fab.flows)
    a.port.taps.append(cap)
    a.post = results._Posts(a.post, [cap])  # as run_scenario wires every host
    for n in sizes:
        a.post(1, n)
    fab.run(10**9)
    cap.close()
    seen = _messages([wire.dissect(r.data) for r in wire.read(d / "c.pcap")])[capture_qp(1)]
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
            assert sorted(got) == [capture_qp(f) for f in range(8)]
            ops = {d["bth"]["opcode_name"] for d in data}
            assert ops == {FIRST, MIDDLE, LAST}
        assert _tshark_notes(out / name) == []


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
        assert all(qp == capture_qp(qp - 0x100) and qp >= 0x100 for qp in got)
        for groups in got.values():
            messages += len(groups)
            full_last += sum(len(g) > 1 and len(wire.build(g[-1].to_dict())) ==
                             len(wire.build(g[0].to_dict())) for g in groups)
        assert _tshark_notes(pcap) == []
    assert messages == c["transfers"] * 2  # one message per transfer (1 QP), 2 iterations
    assert full_last > 0  # messages of whole frames end where posted, not at a short frame

"""Captures on an InfiniBand fabric are native IB packets (linktype 247): the synthesised data
packets (LRH with the nodes' LIDs, BTH with FECN for the simulator's CE mark and the RC PSN,
RETH, ICRC, VCRC) and the NIC's own control packets (IBA's CNP, opcode 0x80 with BECN; RC
ACKs and NAKs), all to the flow's QP; tshark decodes them without a note, and ``lossless
replay --pcap`` of such a capture finds its hosts by LID without ``--map``."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import wire
from sim.addresses import flow_qp, node_lid, node_of_lid
from tests.helpers import run_cli
from wire.ib import LINKTYPE_INFINIBAND
from wire.ib_stack import dissect_ib

#: Two senders (h10, h11) of 4 KB messages into h20 over IB links, IB CC (FECN, CNPs), RC
#: go-back-N, 2 % of the frames to h20 lost (NAKs, resends).  Captured: what h10 sends, what
#: reaches h20, and what goes back to h10 (its CNPs and ACKs).
IB_FILE = """\
[run]
duration_ms = 0.05
seed = 3
[topology]
kind = "custom"
switch_ids = [0]
host_ids = [10, 11, 20]
links = [[10, 0, 0, 0], [11, 0, 0, 1], [20, 0, 0, 2]]
[links]
link_gbps = 100.0
fabric = "ib"
[switch]
buffer_kb = 2000.0
[hosts]
cc = "ibcc"
retransmit = "gbn"
ack_timeout = 1
"""
FLOWS = """\
[capture]
ports = ["10:0", "0:2", "0:0"]
[[flows]]
src = 10
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
loss_rate = 0.02
"""


def _tshark_notes(pcap, tmp_path) -> list[str]:
    """tshark's expert and malformed notes on an IB capture (given to tshark as DLT_USER0
    with the infiniband dissector: tshark 4.0 cannot open linktype 247, tests/tshark.py)."""
    from tests.tshark import IB_USER_DLT, IB_USER_DLT_UAT, require_tshark

    data = bytearray(pcap.read_bytes())
    assert int.from_bytes(data[20:24], "little") == LINKTYPE_INFINIBAND
    data[20:24] = IB_USER_DLT.to_bytes(4, "little")
    user = tmp_path / f"user-{pcap.name}"
    user.write_bytes(bytes(data))
    out = subprocess.run([require_tshark(), "-n", "-o", IB_USER_DLT_UAT, "-r", str(user),
                          "-T", "fields", "-e", "_ws.expert.message", "-e", "_ws.malformed",
                          "-e", "frame.protocols"], capture_output=True, text=True,
                         check=True).stdout
    lines = out.splitlines()
    assert lines and all("infiniband" in line.split("\t")[2] for line in lines)
    return [line for line in lines if line.split("\t")[:2] != ["", ""]]


def _packets(pcap) -> list[wire.Decoded]:
    recs = list(wire.read(pcap))
    assert {r.linktype for r in recs} == {LINKTYPE_INFINIBAND}
    out = [dissect_ib(r.data, r.orig_len) for r in recs]
    for d in out:
        assert not d.problems, d.problems
        assert d["icrc"]["valid"] and d["vcrc"]["valid"]
        assert d["lrh"]["lnh"] == 2  # local: LRH, BTH
    return out


def test_ib_fabric_captures_are_native_ib_packets(tmp_path):
    f = tmp_path / "ib.toml"
    f.write_text(IB_FILE + FLOWS)
    out = tmp_path / "o"
    rc, _o, err = run_cli(["replay", str(f), "--out", str(out), "--no-plots"])
    assert rc == 0, err
    s = json.loads((out / "summary.json").read_text())
    assert s["flows"][0]["rc"]["retransmitted_frames"] > 0

    sent = _packets(out / "capture_10_0.pcap")  # h10's data, resends included
    assert {(d["lrh"]["slid"], d["lrh"]["dlid"], d["bth"]["dest_qp"]) for d in sent} == {
        (node_lid(10), node_lid(20), flow_qp(0))} == {(11, 21, 0x100)}
    ops = Counter(d["bth"]["opcode_name"] for d in sent)
    assert set(ops) <= {f"RC_RDMA_WRITE_{x}" for x in ("FIRST", "MIDDLE", "LAST", "ONLY")}
    assert all(d["lrh"]["sl"] == d["lrh"]["vl"] == 3 for d in sent)
    assert all(("reth" in d) == d["bth"]["opcode_name"].endswith(("FIRST", "ONLY"))
               for d in sent)
    psns = Counter(d["bth"]["psn"] for d in sent)
    assert sum(n - 1 for n in psns.values()) == s["flows"][0]["rc"]["retransmitted_frames"]

    into = _packets(out / "bottleneck.pcap")  # both flows after the congested port: FECN
    assert {d["bth"]["dest_qp"] for d in into} == {flow_qp(0), flow_qp(1)}
    assert any(d["bth"]["fecn"] for d in into) and not any(d["bth"]["becn"] for d in into)

    back = _packets(out / "capture_0_0.pcap")  # to h10: its CNPs and ACKs/NAKs, its QP
    kinds = Counter((d["bth"]["opcode"], d.get("aeth", {}).get("kind")) for d in back)
    assert set(kinds) == {(0x80, None), (0x11, "ACK"), (0x11, "NAK")}
    assert {(d["lrh"]["slid"], d["lrh"]["dlid"], d["bth"]["dest_qp"]) for d in back} == {
        (node_lid(20), node_lid(10), flow_qp(0))}
    for d in back:
        if d["bth"]["opcode"] == 0x80:  # IBA's CNP: BTH only, BECN, on the CNP class (6)
            assert d["bth"]["becn"] == 1 and d["lrh"]["sl"] == 6 and "payload" not in d
            assert len(wire.build_ib(d.to_dict())) == 26
    for name in ("capture_10_0.pcap", "bottleneck.pcap", "capture_0_0.pcap"):
        assert _tshark_notes(out / name, tmp_path) == []
    # our decoder names IBA's CNP and lossless stats counts it as one (it was UNKNOWN_0x80)
    ncnp = kinds[(0x80, None)]
    assert ncnp and all(d["bth"]["opcode_name"] == "IB_CNP" for d in back
                        if d["bth"]["opcode"] == 0x80)
    rc, stdout, _err = run_cli(["stats", str(out / "capture_0_0.pcap"), "--json"])
    assert sum(c["count"] for c in json.loads(stdout)["cnps"]) == ncnp


def test_replay_of_an_ib_capture_finds_the_hosts_by_lid(tmp_path):
    """A capture the simulator wrote on an IB fabric replays on one without --map: LID N+1
    is node N (sim.addresses.node_lid)."""
    f = tmp_path / "ib.toml"
    f.write_text(IB_FILE + FLOWS.replace('ports = ["10:0", "0:2", "0:0"]', 'ports = ["10:0"]')
                 .split("[[faults]]")[0])
    rc, _o, err = run_cli(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"])
    assert rc == 0, err
    (tmp_path / "empty.toml").write_text(IB_FILE)
    rc, _o, err = run_cli(["replay", str(tmp_path / "empty.toml"), "--pcap",
                           str(tmp_path / "o" / "capture_10_0.pcap"), "--out",
                           str(tmp_path / "r"), "--no-plots"])
    assert rc == 0, err
    s = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert s["replay"]["skipped"] == 0 and s["replay"]["injected"] > 100
    assert [(f["src"], f["dst"]) for f in s["flows"]] == [(10, 20)]
    assert s["flows"][0]["bytes_delivered"] > 0


def test_lids_are_node_ids_plus_one():
    assert [node_lid(n) for n in (0, 1, 258, 0xBFFE)] == [1, 2, 259, 0xBFFF]
    assert [node_of_lid(x) for x in (0, 1, 259, 0xBFFF, 0xC000, 0xFFFF)] == [
        None, 0, 258, 0xBFFE, None, None]
    for bad in (0xBFFF, 0xFFFF):
        try:
            node_lid(bad)
        except ValueError as e:
            assert f"node {bad}" in str(e)
        else:
            raise AssertionError(f"node {bad} got a LID")

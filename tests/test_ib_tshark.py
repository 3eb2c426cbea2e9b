"""tshark as the referee for native InfiniBand: crafted and Hypothesis-generated
packets written as captures, tshark's decode compared field for field with ours.

Linktype 247 records go to tshark as DLT_USER0 with the infiniband dissector (TIB1: tshark
4.0.17 cannot open linktype 247); ERF records (197) as they are.  Every field tshark shows
is compared; what it does not show is excused only by an entry of
``tests.tshark.IB_DEPARTURES`` (docs/explanation/wireshark.md, "Native InfiniBand and ERF",
lists them)."""

from __future__ import annotations

from collections import Counter

from hypothesis import Phase, given, settings
from hypothesis import strategies as st

import wire
from tests import tshark as T
from wire import strategies as ws
from wire.ib_stack import build_erf, build_ib, dissect_erf, dissect_ib

#: RC, UC and UD opcodes: tshark's departures for RD and XRC headers (T5, T12) are those of
#: RoCEv2 (docs/explanation/wireshark.md) and are not repeated here.
REFEREE_OPCODES = [o for o in ws.OPCODES if o >> 5 in (0, 1, 3)]

CRAFTED = {
    "local send": {"lrh": {"vl": 3, "sl": 5, "dlid": 0x12, "slid": 0x34},
                   "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": 0x1234, "psn": 9,
                           "becn": 1}, "payload": {"data": "68656c6c6f"}},
    "global write": {"lrh": {"dlid": 7, "slid": 8},
                     "grh": {"tclass": 0x2A, "flow_label": 0xABCDE, "hop_lmt": 5,
                             "sgid": "fe80::1", "dgid": "fe80::2:3"},
                     "bth": {"opcode": "RC_RDMA_WRITE_FIRST", "psn": 100},
                     "reth": {"va": 0x1000, "rkey": 0x77, "dma_length": 4096},
                     "payload": {"data": "ab" * 64}},
    "ack": {"bth": {"opcode": "RC_ACKNOWLEDGE", "dest_qp": 3}, "aeth": {"msn": 12}},
    "SubnGet(NodeInfo) on QP0": {
        "lrh": {"vl": 15, "dlid": 1, "slid": 0xFFFF},
        "bth": {"opcode": "UD_SEND_ONLY", "dest_qp": 0}, "deth": {"qkey": 0, "src_qp": 0},
        "mad": {"mgmt_class": 0x01, "method": 0x01, "transaction_id": 0x1122334455667788,
                "attribute_id": 0x0011}, "payload": {"length": 232}},
    "SA PathRecord on QP1": {
        "grh": {"sgid": "fe80::a", "dgid": "fe80::b"},
        "bth": {"opcode": "UD_SEND_ONLY", "dest_qp": 1},
        "deth": {"qkey": 0x80010000, "src_qp": 1},
        "mad": {"mgmt_class": 0x03, "class_version": 2, "method": 0x12,
                "transaction_id": 5, "attribute_id": 0x0035}, "payload": {"length": 232}},
    "raw": {"rwh": {"ethertype": 0x88B5}, "payload": {"data": "00112233"}},
    "ipv6": {"ipv6": {"next_header": 59, "src": "fd00::1", "dst": "fd00::2"},
             "payload": {"data": "00" * 8}},
}


def _run(tmp_path, name, frames, linktype):
    pcap = tmp_path / name
    wire.write(str(pcap), [wire.Record(i * 1000, f, len(f), linktype)
                           for i, f in enumerate(frames)], linktype=linktype)
    return [T.normalise_native_ib(x) for x in T.ib_tshark_layers(pcap)]


def test_crafted_packets_agree_with_tshark(tmp_path):
    frames = [build_ib(d) for d in CRAFTED.values()]
    theirs = _run(tmp_path, "crafted.pcap", frames, T.IB_USER_DLT)
    assert len(theirs) == len(frames)
    counts: Counter = Counter()
    bad = []
    for label, f, t in zip(CRAFTED, frames, theirs, strict=True):
        assert "lrh" in t, label  # tshark dissected it as InfiniBand
        bad += T.compare_native_ib(dissect_ib(f), t, f"{label}: ", counts)
    assert bad == []
    # the MAD headers and GRH were compared, not excused
    assert sum("mad" in t for t in theirs) == 2 and sum("grh" in t for t in theirs) == 2
    assert set(counts) <= set(T.IB_DEPARTURES) | {"T1", "T2"}


#: No shrinking: every example runs tshark (a failure prints the frames as they are).
NO_SHRINK = (Phase.explicit, Phase.reuse, Phase.generate)


@settings(max_examples=4, phases=NO_SHRINK)
@given(st.lists(ws.ib_frames(opcodes=REFEREE_OPCODES), min_size=30, max_size=60))
def test_generated_packets_agree_with_tshark(tmp_path_factory, frames):
    theirs = _run(tmp_path_factory.mktemp("ib"), "gen.pcap", frames, T.IB_USER_DLT)
    assert len(theirs) == len(frames)
    bad = []
    for i, (f, t) in enumerate(zip(frames, theirs, strict=True)):
        assert "lrh" in t
        bad += T.compare_native_ib(dissect_ib(f), t, f"#{i}: ")
    assert bad == []


def test_erf_records_agree_with_tshark(tmp_path):
    recs = [build_erf({"erf": {"lctr": 2}, **d}) for d in CRAFTED.values()]
    # TIB2: tshark needs 2 bytes after a link packet's LPCRC (wlen 8) to decode it
    fc = {"op": 0, "fctbs": 100, "vl": 4, "fccl": 0xFED}
    recs.append(build_erf({"ib_fc": fc, "trailer": "0000"}))
    recs.append(build_erf({"ib_fc": {**fc, "op": 1}, "trailer": "0000"}))
    theirs = _run(tmp_path, "erf.pcap", recs, 197)
    assert len(theirs) == len(recs)
    bad = []
    for i, (r, t) in enumerate(zip(recs, theirs, strict=True)):
        ours = dissect_erf(r)
        lost = ["erf.lctr: 2 record(s) lost before this one (loss counter)"]
        assert ours.problems == (lost if i < len(CRAFTED) else [])
        assert t["erf"]["rlen"] == len(r)
        bad += T.compare_native_ib(ours, t, f"#{i}: ")
    assert bad == []
    assert [t["ib_fc"]["fccl"] for t in theirs[-2:]] == [0xFED, 0xFED]


@settings(max_examples=3, phases=NO_SHRINK)
@given(st.lists(ws.ib_fc_dicts(), min_size=20, max_size=40))
def test_generated_link_packets_agree_or_are_malformed(tmp_path_factory, dicts):
    recs = [build_erf({**d, "trailer": "0000"}) for d in dicts]
    theirs = _run(tmp_path_factory.mktemp("fc"), "fc.pcap", recs, 197)
    counts: Counter = Counter()
    bad = []
    for i, (r, t) in enumerate(zip(recs, theirs, strict=True)):
        bad += T.compare_native_ib(dissect_erf(r), t, f"#{i}: ", counts)
    assert bad == []
    assert set(counts) <= {"TIB2"}


def test_tshark_still_marks_a_6_byte_link_packet_malformed(tmp_path):
    """TIB2 is still true of this tshark (if it is fixed, drop the 2-byte trailer above)."""
    r = build_erf({"ib_fc": {"op": 0, "fctbs": 1, "vl": 0, "fccl": 2}})
    (t,) = _run(tmp_path, "fc6.pcap", [r], 197)
    assert t["_tshark"]["malformed"] and "ib_fc" not in t
    assert dissect_erf(r).problems == []


def test_reference_ib_captures_agree_with_tshark(tmp_path):
    from tests.test_ib_wire import IB_PCAPS

    counts: Counter = Counter()
    bad = []
    compared = 0
    for pcap in IB_PCAPS:
        recs = list(wire.read(pcap))
        if recs[0].linktype == 247:  # TIB1
            frames = _run(tmp_path, pcap.name, [r.data for r in recs], T.IB_USER_DLT)
        else:
            frames = [T.normalise_native_ib(x) for x in T.ib_tshark_layers(pcap)]
        assert len(frames) == len(recs)
        for i, (r, t) in enumerate(zip(recs, frames, strict=True)):
            ours = wire.dissect_record(r) if r.linktype == 197 else dissect_ib(r.data,
                                                                              r.orig_len)
            bad += T.compare_native_ib(ours, t, f"{pcap.name}#{i}: ", counts)
            compared += sum(len(v) for k, v in t.items() if not k.startswith("_"))
    assert bad == []
    assert compared >= 300, compared
    assert set(counts) <= set(T.IB_DEPARTURES) | {"T1", "T2"}


def test_erf_error_flags_and_losses_are_problems_where_tshark_has_experts(tmp_path):
    """tshark's ERF experts (truncated, RX error, DS error: errors; a loss counter above 0:
    a warning) are our ERF problems, record for record; the ERF time is tshark's."""
    cases = [(f, lctr) for f in (0x00, 0x04, 0x05, 0x0C, 0x14, 0x24, 0x3C, 0xC4)
             for lctr in (0, 1)]
    recs = [build_erf({"erf": {"flags": f, "lctr": lctr, "ts_ns": 1700000000_123456789 + i},
                       "lrh": {}, "bth": {}, "payload": {"data": "aa"}})
            for i, (f, lctr) in enumerate(cases)]
    theirs = _run(tmp_path, "flags.pcap", recs, 197)
    bad = []
    for (f, lctr), r, t in zip(cases, recs, theirs, strict=True):
        ours = dissect_erf(r)
        bad += T.compare_native_ib(ours, t, f"flags 0x{f:02x} lctr {lctr}: ")
        mine = sorted(p.split(":")[0] for p in ours.problems)
        experts = t["_tshark"]["erf_experts"]
        expect = ["erf.flags"] * bin(f & 0x38).count("1") + (["erf.lctr"] if lctr else [])
        assert mine == expect, (f, lctr, ours.problems)
        assert len(experts) == len(expect), (f, lctr, experts)  # one expert per problem
    assert bad == []
    assert theirs[0]["erf"]["ts_ns"] == 1700000000_123456789  # compared for every record


def test_real_erf_capture_agrees_with_tshark():
    """A real ERF capture (srinivaskoritala/rdma-softroce-demo, 43 records of native IB
    with the varying-length flag and rlen counting padding the pcap did not keep): every
    field tshark shows, the ERF time (tshark's frame time) included, and no problem where
    tshark has no expert."""
    from tests.helpers import real_file

    pcap = real_file("captures/softroce_demo_infiniband.pcap")
    recs = list(wire.read(pcap))
    theirs = [T.normalise_native_ib(x) for x in T.ib_tshark_layers(pcap)]
    assert len(recs) == len(theirs) == 43
    counts: Counter = Counter()
    bad = []
    for i, (r, t) in enumerate(zip(recs, theirs, strict=True)):
        ours = wire.dissect_record(r)
        assert ours.problems == [] and t["_tshark"]["erf_experts"] == [], i
        assert ours["erf"]["ts_ns"] == t["erf"]["ts_ns"]
        bad += T.compare_native_ib(ours, t, f"#{i}: ", counts)
    assert bad == []
    assert set(counts) <= set(T.IB_DEPARTURES) | {"T1", "T2"}
    assert theirs[0]["erf"]["ts_ns"] == 1210794479_499693535

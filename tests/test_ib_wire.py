"""Native InfiniBand (the wire part): LRH/GRH/raw/IPv6 packets, MADs, ICRC/VCRC,
flow-control packets, linktype 247 and ERF 197 records, ``decode -f jsonl | craft``."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wire
from tests.helpers import run_cli
from wire import strategies as ws
from wire.ib import GRH, LRH, crc16, icrc_native, mask_fields, vcrc
from wire.ib_stack import (
    build_erf,
    build_ib,
    dissect_erf,
    dissect_ib,
    dissect_record,
)
from wire.records import record_from_dict, record_to_dict


def _bitwise_crc16(data: bytes) -> int:
    """The IBA CRC-16 straight from its definition (IBA 7.8.2: polynomial 0x100B,
    x^16 + x^12 + x^3 + x + 1, seed and final inversion 0xFFFF, each byte least
    significant bit first), one bit at a time: an independent check of the table."""
    reg = 0xFFFF
    for byte in data:
        for i in range(8):
            bit = (byte >> i) & 1
            top = (reg >> 15) & 1
            reg = (reg << 1) & 0xFFFF
            if top ^ bit:
                reg ^= 0x100B
    # the register holds the remainder with the bit order reversed
    out = int(f"{reg:016b}"[::-1], 2)
    return out ^ 0xFFFF


@given(st.binary(max_size=80))
def test_crc16_is_the_0x100b_polynomial(data):
    assert crc16(data) == _bitwise_crc16(data)


def test_icrc_masks_exactly_the_variant_fields():
    base = {"lrh": {"dlid": 7, "slid": 9, "sl": 3, "vl": 2}, "bth": {"opcode": "RC_SEND_ONLY",
            "dest_qp": 0x12, "psn": 5}, "payload": {"data": "00112233"}}
    f = build_ib(base)
    icrc = dissect_ib(f)["icrc"]["value"]
    # local packet: VL and BTH byte 4 (FECN/BECN/resv6) are masked ...
    for lrh, bth in (({"vl": 15}, {}), ({}, {"fecn": 1, "becn": 1, "resv6": 0x3F})):
        g = build_ib({**base, "lrh": {**base["lrh"], **lrh}, "bth": {**base["bth"], **bth}})
        assert dissect_ib(g)["icrc"]["value"] == icrc
    # ... the SL, LIDs and PSN are not
    for lrh, bth in (({"sl": 4}, {}), ({"dlid": 8}, {}), ({}, {"psn": 6})):
        g = build_ib({**base, "lrh": {**base["lrh"], **lrh}, "bth": {**base["bth"], **bth}})
        assert dissect_ib(g)["icrc"]["value"] != icrc
    # global packet: the whole LRH, GRH TClass/FlowLabel/HopLmt are masked, GIDs are not
    gb = {**base, "grh": {"sgid": "fe80::1", "dgid": "fe80::2"}}
    gi = dissect_ib(build_ib(gb))["icrc"]["value"]
    for lrh, grh in (({"dlid": 99, "slid": 1, "sl": 9}, {}),
                     ({}, {"tclass": 7, "flow_label": 5, "hop_lmt": 1})):
        g = build_ib({**gb, "lrh": {**gb["lrh"], **lrh}, "grh": {**gb["grh"], **grh}})
        assert dissect_ib(g)["icrc"]["value"] == gi
    g = build_ib({**gb, "grh": {**gb["grh"], "dgid": "fe80::3"}})
    assert dissect_ib(g)["icrc"]["value"] != gi


def test_global_icrc_is_the_rocev2_pseudo_lrh_computation():
    """A global packet's ICRC is CRC-32 over 8 bytes of ones + masked GRH + BTH..., the
    same pseudo-LRH RoCE uses (IBA Annex A17.8)."""
    f = build_ib({"grh": {"tclass": 1}, "bth": {"opcode": "UD_SEND_ONLY", "dest_qp": 5},
                  "deth": {"qkey": 1, "src_qp": 2}, "payload": {"data": "aa" * 8}})
    icrc_at = len(f) - 6
    grh = bytearray(f[8:48])
    mask_fields(grh, GRH, 0, ("tclass", "flow_label", "hop_lmt"))
    bth = bytearray(f[48:icrc_at])
    bth[4] = 0xFF
    assert zlib.crc32(b"\xff" * 8 + bytes(grh) + bytes(bth)) == \
        int.from_bytes(f[icrc_at:icrc_at + 4], "little") == icrc_native(f[:icrc_at], 48)


def test_pkt_len_and_vcrc_positions():
    f = build_ib({"bth": {"opcode": "RC_SEND_ONLY"}, "payload": {"data": "01"}})
    lrh = LRH.unpack(f)
    assert lrh["pkt_len"] * 4 == len(f) - 2  # LRH..ICRC, the VCRC excluded (IBA 7.7.7)
    assert int.from_bytes(f[-2:], "little") == vcrc(f[:-2])


@pytest.mark.parametrize("kind", ws.IB_KINDS)
@given(data=st.data())
def test_generated_packets_decode_clean_and_round_trip(kind, data):
    d = data.draw(ws.ib_frame_dicts((kind,)))
    f = build_ib(d)
    dec = dissect_ib(f)
    assert dec.problems == []
    assert dec["vcrc"]["valid"] is True
    if kind in ("local", "global", "mad"):
        assert dec["icrc"]["valid"] is True
    if kind == "mad":
        assert dict(dec["mad"]) == d["mad"]
    for name in ("lrh", "grh", "rwh", "ipv6"):
        if name in d:
            spec = wire.SPECS[name]
            shown = spec.shown({k: int(v) for k, v in d[name].items()}
                               | {k: dec[name][k] for k in spec.field_names
                                  if k not in d[name] and not isinstance(dec[name][k], str)})
            for k in d[name]:
                assert dec[name][k] == shown[k]
    assert build_ib(dec.to_dict()) == f


@given(st.binary(max_size=120))
def test_any_bytes_round_trip(data):
    assert build_ib(dissect_ib(data).to_dict()) == data
    assert build_erf(dissect_erf(data).to_dict()) == data


@given(data=st.data())
def test_mutated_and_truncated_packets_round_trip(data):
    f = bytearray(data.draw(ws.ib_frames()))
    for _ in range(data.draw(st.integers(0, 3))):
        i = data.draw(st.integers(0, len(f) - 1))
        f[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(f)))
    for frame, orig in ((bytes(f), None), (bytes(f[:cut]), None), (bytes(f[:cut]), len(f))):
        dec = dissect_ib(frame, orig)
        built = build_ib(dec.to_dict())
        assert (built[:len(frame)] if orig else built) == frame
        rec = wire.Record(0, frame, orig or len(frame), 247)
        back = record_from_dict(record_to_dict(0, rec))
        assert (back.data, back.orig_len) == (rec.data, rec.orig_len)


def test_problems_name_the_field():
    f = bytearray(build_ib({"grh": {}, "bth": {"opcode": "RC_SEND_ONLY"},
                            "payload": {"data": "0102"}}))
    bad_vcrc = bytes(f[:-1]) + bytes([f[-1] ^ 1])
    assert any(p.startswith("vcrc: ") for p in dissect_ib(bad_vcrc).problems)
    bad_icrc = bytearray(f)
    bad_icrc[-3] ^= 1
    assert any(p.startswith("icrc: ") for p in dissect_ib(bytes(bad_icrc)).problems)
    short = dissect_ib(bytes(f[:-4]))  # uncut record shorter than pkt_len says
    assert any(p.startswith("lrh.pkt_len: ") for p in short.problems)
    assert short["icrc"]["valid"] is None if "icrc" in short else True
    g = bytearray(f)
    g[12:14] = (0x99).to_bytes(2, "big")  # grh.pay_len
    assert any(p.startswith("grh.pay_len: ") for p in dissect_ib(bytes(g)).problems)
    # cut by the snaplen: not captured, not a problem
    snapped = dissect_ib(bytes(f[:40]), len(f))
    assert snapped.problems == []
    assert snapped["vcrc"]["valid"] is None


def test_record_without_vcrc_is_not_a_problem():
    f = build_ib({"bth": {}, "payload": {"data": "0a0b0c0d"}, "vcrc": {"absent": True}})
    assert LRH.unpack(f)["pkt_len"] * 4 == len(f)
    d = dissect_ib(f)
    assert d.problems == [] and d["vcrc"] == {"absent": True}
    assert build_ib(d.to_dict()) == f


@given(data=st.data())
def test_erf_records_round_trip(data):
    d = data.draw(st.one_of(ws.ib_fc_dicts(), ws.ib_frame_dicts().map(
        lambda x: {"erf": {"lctr": 3}, **x})))
    rec = build_erf(d)
    dec = dissect_erf(rec)
    assert dec.problems == ([] if "ib_fc" in d else
                            ["erf.lctr: 3 record(s) lost before this one (loss counter)"])
    if "ib_fc" in d:
        assert dec["ib_fc"]["valid"] is True and dec["erf"]["type"] == 25
    else:
        assert dec["erf"]["type"] == 21 and dec["vcrc"]["valid"] is True
    assert dec["erf"]["rlen"] == len(rec)
    assert build_erf(dec.to_dict()) == rec
    # a card-truncated record (rlen < header + wlen) keeps its cut
    cut = data.draw(st.integers(16, len(rec)))
    t = bytearray(rec[:cut])
    t[10:12] = cut.to_bytes(2, "big")
    assert build_erf(dissect_erf(bytes(t)).to_dict()) == bytes(t)


def test_dissect_record_by_linktype():
    f = build_ib({"bth": {"opcode": "RC_SEND_ONLY"}, "payload": {"data": "ff"}})
    d = dissect_record(wire.Record(0, f, len(f), 247))
    assert "lrh" in d and d.problems == []
    e = build_erf({"lrh": {}, "bth": {}, "payload": {"data": "ff"}})
    assert "lrh" in dissect_record(wire.Record(0, e, len(e), 197))
    other = dissect_record(wire.Record(0, b"\x01\x02", 2, 105))
    assert other.problems == ["linktype 105 is not decoded (only Ethernet 1, InfiniBand 247 "
                              "and ERF 197)"]


def test_jsonl_layers_of_a_linktype_247_record():
    """A linktype 247 record is decoded into layers (it once was raw bytes, 'not decoded')."""
    f = build_ib({"lrh": {"dlid": 4, "slid": 5}, "bth": {"opcode": "UD_SEND_ONLY",
                  "dest_qp": 1}, "deth": {"qkey": 0x80010000, "src_qp": 1},
                  "mad": {"mgmt_class": 0x81, "method": 0x81, "transaction_id": 77},
                  "payload": {"length": 232}})
    obj = record_to_dict(0, wire.Record(0, f, len(f), 247))
    assert obj["linktype"] == 247 and "problems" not in obj
    assert [k for k in obj if k not in ("index", "ts_ns", "caplen", "len", "linktype")] == [
        "lrh", "bth", "deth", "mad", "payload", "icrc", "vcrc"]
    assert obj["mad"]["transaction_id"] == 77 and obj["lrh"]["dlid"] == 4


def _pcap(tmp_path, name, frames, linktype):
    p = tmp_path / name
    wire.write(str(p), [wire.Record(i * 1000, f, len(f), linktype)
                        for i, f in enumerate(frames)], linktype=linktype)
    return p


def test_decode_jsonl_craft_is_byte_for_byte(tmp_path):
    ib = [build_ib({"bth": {"opcode": "RC_RDMA_WRITE_ONLY"}, "reth": {"dma_length": 8},
                    "payload": {"data": "00" * 8}}),
          build_ib({"grh": {}, "bth": {"opcode": "RC_ACKNOWLEDGE"}, "aeth": {"msn": 3}}),
          build_ib({"rwh": {"ethertype": 0x0800}, "payload": {"data": "45000000"}})]
    erf = [build_erf({"lrh": {}, "bth": {}, "payload": {"data": "aa"}}),
           build_erf({"ib_fc": {"op": 1, "fctbs": 4095, "vl": 3, "fccl": 17}})]
    for name, frames, lt in (("ib.pcap", ib, 247), ("erf.pcap", erf, 197)):
        src = _pcap(tmp_path, name, frames, lt)
        rc, out, err = run_cli(["decode", "-f", "jsonl", str(src)])
        assert rc == 0, err
        lines = [json.loads(x) for x in out.splitlines()]
        assert all("problems" not in x for x in lines)
        dst = tmp_path / ("re-" + name)
        rc, _out, err = run_cli(["craft", "-o", str(dst)], stdin=out.encode())
        assert rc == 0, err
        assert dst.read_bytes() == src.read_bytes()


def test_stats_count_ib_flows_and_agree_with_decode(tmp_path):
    """stats counts native IB flows (it once counted these records as 'another link type' and
    exited 1)."""
    frames = [build_ib({"lrh": {"dlid": 5, "slid": 2}, "bth": {"dest_qp": 9},
                        "payload": {"data": "00" * 8}}) for _ in range(3)]
    frames.append(build_ib({"grh": {"sgid": "fe80::1", "dgid": "fe80::2"},
                            "bth": {"dest_qp": 1, "opcode": "UD_SEND_ONLY"}, "deth": {},
                            "mad": {}, "payload": {"length": 232}}))
    src = _pcap(tmp_path, "ib.pcap", frames, 247)
    rc, out, err = run_cli(["stats", "--json", str(src)])
    assert rc == 0, err
    s = json.loads(out)
    assert s["records_other_linktype"] == 0 and s["records_with_problems"] == 0
    assert {(f["src"], f["dst"], f["dest_qp"], f["packets"]) for f in s["flows"]} == {
        ("lid 2", "lid 5", 9, 3), ("fe80::1", "fe80::2", 1, 1)}
    assert s["infiniband"] == {"mads": 1, "packets": 4, "vl0_packets": 4}
    erf = _pcap(tmp_path, "erf.pcap", [build_erf({"ib_fc": {"fccl": 3}})], 197)
    rc, out, _ = run_cli(["stats", "--json", str(erf)])
    assert rc == 0 and json.loads(out)["infiniband"] == {"flow_control_packets": 1}


def test_summary_line_of_ib_records():
    from wire.stats import summary_line

    f = build_ib({"lrh": {"dlid": 5, "slid": 2, "vl": 15}, "bth": {"opcode": "UD_SEND_ONLY",
                  "dest_qp": 0}, "deth": {}, "mad": {"attribute_id": 0x11},
                  "payload": {"length": 232}})
    line = summary_line(0, 0, dissect_ib(f), len(f))
    assert "lid 2 > lid 5" in line and " IB " in line and "VL15" in line
    assert "MAD class=0x01 method=0x01 attr=0x0011" in line
    e = build_erf({"ib_fc": {"op": 1, "vl": 2, "fctbs": 7, "fccl": 9}})
    assert "IB-link  FC-init VL2 FCTBS=7 FCCL=9" in summary_line(1, 0, dissect_erf(e), len(e))
    other = dissect_record(wire.Record(0, b"\x01", 1, 105))
    assert "linktype 105" in summary_line(2, 0, other, 1)


IB_PCAPS = sorted((Path(__file__).resolve().parent.parent / "pcaps" / "ib").glob("*.pcap"))


def test_reference_ib_captures_are_shipped():
    assert {p.name for p in IB_PCAPS} == {"ib_native.pcap", "ib_erf.pcap"}


@pytest.mark.parametrize("pcap", IB_PCAPS, ids=lambda p: p.name)
def test_reference_ib_captures(pcap, tmp_path):
    """Each is what craft makes of its jsonl; decode | craft gives the same bytes; only the
    records meant to be broken have problems."""
    dst = tmp_path / pcap.name
    rc, _out, err = run_cli(["craft", str(pcap.with_suffix(".jsonl")), "-o", str(dst), "-q"])
    assert rc == 0, err
    assert dst.read_bytes() == pcap.read_bytes()
    rc, out, _ = run_cli(["decode", "-f", "jsonl", str(pcap)])
    assert rc == 1
    objs = [json.loads(x) for x in out.splitlines()]
    bad = {o["index"]: o["problems"] for o in objs if "problems" in o}
    want = ({9: ["vcrc:"], 10: ["icrc:"]} if pcap.name == "ib_native.pcap"
            else {6: ["ib_fc.lpcrc:"]})
    assert {i: [p.split(" ")[0] for p in ps] for i, ps in bad.items()} == want
    again = tmp_path / "again.pcap"
    assert run_cli(["craft", "-o", str(again)], stdin=out.encode())[0] == 0
    assert again.read_bytes() == pcap.read_bytes()


def test_ib_specs_have_every_derived_form():
    """The IB tables are in SPECS, so tests/test_derived_forms.py runs on them too."""
    from wire.construct_defs import STRUCTS
    from wire.ib import IB_SPECS
    from wire.scapy_layers import LAYERS

    for name, spec in IB_SPECS.items():
        assert wire.SPECS[name] is spec and name in STRUCTS and name in LAYERS
        assert f"## {name}: " in (Path(__file__).resolve().parent.parent / "docs" /
                                  "reference" / "headers.md").read_text(encoding="utf-8")


BAD_LINES = {
    '{"linktype":247,"lrh":{"vl":99}}': "lrh.vl: 99 does not fit in 4 bits",
    '{"linktype":247,"lrh":5}': 'lrh: expected an object of lrh fields like {"vl": 0, "sl": 0, '
    '"dlid": 18, "slid": 52}, got the number 5',
    '{"linktype":247,"mad":{}}': "mad: mad needs a bth layer before it",
    '{"linktype":247,"lrh":{},"rwh":{},"payload":{"data":"01"}}': "lrh.pkt_len: the packet is "
    "13 bytes, not a whole number of 4-byte words",
    '{"linktype":247,"lrh":{"lnh":0},"grh":{}}': "lrh.lnh: LNH RAW does not carry a grh",
    '{"linktype":197,"erf":{"ext_headers":"00"},"ib_fc":{}}': "erf.ext_headers: 1 bytes",
    '{"linktype":197,"ib_fc":{},"lrh":{}}': "ib_fc: an ERF record carries ib_fc or a data",
    '{"linktype":247,"eth":{}}': "unknown key(s) ['eth']",
}


@pytest.mark.parametrize("line", BAD_LINES)
def test_bad_ib_craft_lines_are_one_line_errors(line, tmp_path):
    good = '{"linktype":247,"lrh":{},"bth":{}}'
    rc, _out, err = run_cli(["craft", "-o", str(tmp_path / "o.pcap")],
                            stdin=(line + "\n" + good + "\n").encode())
    assert rc == 1
    first, *rest = err.splitlines()  # the bad line, then craft's summary
    assert first.startswith("lossless: -:1: ") and rest == [rest[0]] and "skipped 1" in rest[0]
    assert BAD_LINES[line] in err and "Traceback" not in err
    assert len(list(wire.read(tmp_path / "o.pcap"))) == 1  # the good line is kept


def test_crafted_erf_records_carry_the_record_time(tmp_path):
    """Wireshark shows the ERF header's time: craft fills it from ts_ns unless given."""
    from wire.ib_stack import erf_ts

    line = '{"ts_ns":1700000000123456789,"linktype":197,"lrh":{},"bth":{}}'
    rc, _o, err = run_cli(["craft", "-o", str(tmp_path / "e.pcap")], stdin=line.encode())
    assert rc == 0, err
    (rec,) = wire.read(tmp_path / "e.pcap")
    assert dissect_erf(rec.data)["erf"]["ts"] == erf_ts(1700000000123456789)
    raw = int.from_bytes(bytes.fromhex(erf_ts(1700000000123456789)), "little")
    assert (raw >> 32, ((raw & 0xFFFFFFFF) * 10**9) >> 32) == (1700000000, 123456789)


# ------------------------------------------------------------------------ ERF header
def _wireshark_erf_time(ts: int) -> tuple[int, int]:
    """(seconds, ns) of an ERF timestamp as Wireshark computes them in C
    (wiretap/pcap-common.c, pcap_read_erf_pseudoheader), step by step."""
    secs = ts >> 32
    t = (ts & 0xFFFFFFFF) * 1000 * 1000 * 1000
    t += (t & 0x80000000) << 1  # rounding
    nsecs = (t >> 32) & 0xFFFFFFFF
    if nsecs >= 1000000000:
        nsecs -= 1000000000
        secs += 1
    return secs, nsecs


@given(st.integers(0, (1 << 64) - 1))
def test_erf_time_is_wiresharks(ts):
    from wire.ib_stack import erf_time_ns

    assert divmod(erf_time_ns(ts), 10**9) == _wireshark_erf_time(ts)


@given(st.integers(0, (1 << 32) * 10**9 - 1))
def test_erf_ts_reads_back_as_the_same_ns(ts_ns):
    from wire.ib_stack import erf_time_ns, erf_ts

    rec = build_erf({"erf": {"ts": erf_ts(ts_ns)}, "lrh": {}, "bth": {}})
    assert dissect_erf(rec)["erf"]["ts_ns"] == ts_ns
    assert erf_time_ns(int.from_bytes(bytes.fromhex(erf_ts(ts_ns)), "little")) == ts_ns
    assert build_erf({"erf": {"ts_ns": ts_ns}, "lrh": {}, "bth": {}}) == rec


def test_erf_ts_ns_on_build():
    base = {"lrh": {}, "bth": {}}
    rec = build_erf({"erf": {"ts_ns": 1210794479499693535}, **base})
    assert dissect_erf(rec)["erf"]["ts_ns"] == 1210794479499693535
    # the decoded pair builds back; ts_ns as a decimal string (--int-strings) too
    assert build_erf({"erf": {"ts": "60eaeb7fef412b48", "ts_ns": "1210794479499693535"},
                      **base})[:8] == bytes.fromhex("60eaeb7fef412b48")
    with pytest.raises(wire.errors.BadValue, match=r"^erf\.ts_ns: 1210794479499693536 "
                       r"disagrees with erf\.ts \(that is 1210794479499693535 ns\)"):
        build_erf({"erf": {"ts": "60eaeb7fef412b48", "ts_ns": 1210794479499693536}, **base})
    # recompute takes ts_ns (the edited one) over ts
    r = build_erf({"erf": {"ts": "60eaeb7fef412b48", "ts_ns": 5}, **base}, recompute=True)
    assert dissect_erf(r)["erf"]["ts_ns"] == 5
    with pytest.raises(wire.errors.BadValue, match="past what an ERF timestamp holds"):
        build_erf({"erf": {"ts_ns": (1 << 32) * 10**9}, **base})


@given(data=st.data())
def test_erf_padding_a_capture_did_not_keep_is_not_a_problem(data):
    """rlen counts the record's padding (8-byte records with the varying-length flag); a
    capture that kept fewer of those bytes (the packet whole) is not at fault, a record
    whose packet is cut short (no snaplen to explain it) is."""
    d = data.draw(ws.ib_frame_dicts())
    packet = build_erf(d)[16:]
    pad = -(16 + len(packet)) % 8 or 8
    rlen = 16 + len(packet) + pad
    kept = data.draw(st.integers(0, pad - 1))
    rec = build_erf({**d, "erf": {"rlen": rlen, "pad": "00" * kept}})
    assert len(rec) == 16 + len(packet) + kept and rec[10:12] == rlen.to_bytes(2, "big")
    dec = dissect_erf(rec)
    assert dec.problems == [] and dec["erf"]["rlen"] == rlen
    assert build_erf(dec.to_dict()) == rec
    short = data.draw(st.integers(17, 16 + len(packet) - 1))
    cut = dissect_erf(rec[:short])
    assert cut.problems[0] == (f"erf.rlen: {rlen} but the record has {short} bytes, and the "
                               f"packet (wlen {len(packet)}) ends at byte {16 + len(packet)}")


ERF_FLAG_PROBLEMS = {
    0x04: [],  # varying length
    0x07: [],  # interface 3
    0xC4: [],  # reserved bits
    0x0C: ["erf.flags: 0x0c: truncated (bit 3): the card ran out of buffer space"],
    0x14: ["erf.flags: 0x14: RX error (bit 4): the link reported a receive error"],
    0x24: ["erf.flags: 0x24: DS error (bit 5): an internal error of the card"],
}


@pytest.mark.parametrize("flags", ERF_FLAG_PROBLEMS)
def test_erf_error_flags_are_problems(flags):
    rec = build_erf({"erf": {"flags": flags}, "lrh": {}, "bth": {}})
    assert dissect_erf(rec).problems == ERF_FLAG_PROBLEMS[flags]
    assert build_erf(dissect_erf(rec).to_dict()) == rec


def test_real_erf_capture_is_clean_and_shows_the_erf_time():
    """A real ERF capture of native InfiniBand (linktype 197, the varying-length flag set,
    rlen counting padding the pcap did not keep): no problem, exit 0, the ERF time shown."""
    from tests.helpers import real_file

    pcap = real_file("captures/softroce_demo_infiniband.pcap")
    recs = list(wire.read(pcap))
    assert len(recs) == 43 and {r.linktype for r in recs} == {197}
    decs = [dissect_record(r) for r in recs]
    assert [d.problems for d in decs] == [[]] * 43
    assert sum(d["erf"]["rlen"] > len(r.data) for d, r in zip(decs, recs, strict=True)) > 0
    assert decs[0]["erf"]["ts_ns"] == 1210794479499693535
    rc, out, err = run_cli(["decode", str(pcap)])
    assert rc == 0 and err == ""
    assert out.split()[:2] == ["0", "1210794479.499693535"]
    rc, out, _ = run_cli(["decode", "-f", "jsonl", str(pcap)])
    assert rc == 0 and json.loads(out.splitlines()[1])["erf"]["ts_ns"] == 1210794479499693535

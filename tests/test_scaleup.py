"""Scale-up headers: ESUN EH, SUNH (draft-00), AFH Gen1 / Gen2 (12 and 6 bytes), the SUE RH,
packed transactions and R-CRC (``wire.esun``, ``wire.sunh``, ``wire.sue``, ``wire.scaleup``
and their dispatch in ``wire.stack``).

* Vectors both ways for every header, the bit positions written out by hand from the public
  sources (the EH figure of OCP ESUN 1.0 5.2 in the OCP Academy ESUN course, read MSB first
  [A]; the RH word layout of Broadcom SUE 6.3.3 in XDP2 ``src/include/sue/sue.h``; the SUNH
  word layout of draft-herbert-sunh-00 in XDP2 ``sunh.h``; the AFH figures of XDP2's SUPERp;
  the [A] descriptor of wire/sue.py; docs/explanation/scaleup.md), not from the field tables;
  ESUN byte 0 and byte 3 fields at their minimum and maximum one at a time.
* Whole frames: a hand-assembled ESUN + SUE frame (R-CRC computed with zlib here), and every
  stack round-tripping through dissect/build on Hypothesis frames
  (:func:`wire.strategies.scaleup_frame_dicts`), with the default and a non-default config.
* Cuts at every byte, with (snaplen: no problem) and without ``orig_len`` (a problem, never a
  traceback): ``build(dissect(cut).to_dict())[:k] == cut``.
* Broken PDUs: lying descriptor length, missing ``last`` bit, opcode-0 descriptor, PDU over
  4096 B, transaction over 256 B, R-CRC mismatch, bytes after the PDU inside UDP; SUE-Lite
  and its 1024-byte limit.
* Configuration: another EtherType/port dissects, the default then does not; validation.
* ESUN helpers: TTL step, CoS -> TC, flow-hash input.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import wire
from tests.helpers import check_header, unhex
from wire import strategies as ws
from wire.errors import BadValue
from wire.esun import (
    ESUN,
    ESUN_DEFAULT_TTL,
    esun_cos_to_tc,
    esun_flow_hash_input,
    esun_forward_ttl,
    esun_offset,
)
from wire.scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from wire.stack import SPECS
from wire.sue import (
    AFH_FORMS,
    AFH_GEN1,
    AFH_GEN2_6,
    AFH_GEN2_12,
    RCRC,
    SUE_RH,
    SUE_TXN8,
    SUE_TXN16,
    SueOp,
    TxnOpcode,
    rcrc,
)
from wire.sunh import SUNH

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = [json.loads(line) for line in (ROOT / "pcaps" / "scaleup.jsonl").open()]
LITE = ScaleUpConfig(afh_gen2_form="6")
#: A config that changes everything that can change.
OTHER = ScaleUpConfig(esun_ethertype=0x88B7, sunh_ethertype=0x9A10, afh_gen1_ethertype=0x9A11,
                      sue_ethertype=0x9A12, sue_udp_port=4000, sunh_sue_protocol=254,
                      esun_transport="sue_lite", afh_gen2_form="6", txn_hdr_bytes=16,
                      cos_to_tc=(7, 6, 5, 4, 3, 2, 1, 0))
SUE_HEX = {"esun": "88b5", "sunh": "88b6", "afh_gen1": "9a00", "sue": "9a01"}
A = {"src": "02:00:00:00:00:01", "dst": "02:00:00:00:00:02"}
ETH_A = "020000000002" "020000000001"

roundtrips = settings(max_examples=max(20, settings().max_examples // 2),
                      suppress_health_check=[HealthCheck.too_slow,
                                             HealthCheck.data_too_large])


# ====================================================================== ESUN vectors
# OCP ESUN 1.0 5.2 EH figure (OCP Academy course), MSB first [A]: byte 0 = Rev(7:6) F(5) CoS(4:2)
# ECN(1:0); bytes 1-2 Flow Label; byte 3 = TTL(7:4) UD(3:2) RSVD(1:0).  Each row: one field at its
# max (ttl at 0 where max is the default), the others at their defaults (ttl 15).
ESUN_ONE_FIELD = [
    ("rev", 3, "c00000f0"),
    ("f", 1, "200000f0"),
    ("cos", 7, "1c0000f0"),
    ("ecn", 3, "030000f0"),
    ("flow_label", 0xFFFF, "00fffff0"),
    ("flow_label", 0x1234, "001234f0"),
    ("ttl", 0, "00000000"),
    ("ttl", 1, "00000010"),
    ("ud", 3, "000000fc"),
    ("rsvd", 3, "000000f3"),
]


@pytest.mark.parametrize(("name", "value", "hexstr"), ESUN_ONE_FIELD,
                         ids=[f"{n}={v}" for n, v, _h in ESUN_ONE_FIELD])
def test_esun_field_bit_positions(name, value, hexstr):
    check_header(ESUN, hexstr, {name: value})


def test_esun_all_min_and_all_max():
    check_header(ESUN, "00000000", {f.name: 0 for f in ESUN.fields})
    check_header(ESUN, "ffffffff", {f.name: f.max_value for f in ESUN.fields})
    # cos 5 (101), ecn CE, F=1: byte 0 = 0 0 1 101 11 = 0x37; TTL 9 UD 2: byte 3 = 1001 10 00
    check_header(ESUN, "37abcd98", {"f": 1, "cos": 5, "ecn": 3, "flow_label": 0xABCD,
                                    "ttl": 9, "ud": 2})


def test_esun_defaults_are_tx_defaults():
    # Tx: Rev 0 (ESUN 1.0), RSVD 0, TTL = 15 [A] (docs/explanation/scaleup.md;
    # docs/explanation/sue.md row 17)
    assert ESUN.pack({}) == unhex("000000f0")
    assert ESUN_DEFAULT_TTL == 15
    assert ESUN.size_bytes == 4


# ====================================================================== SUE RH
def test_sue_rh_word_layout():
    # word0: ver 31:30, op 29:28, rsvd 27:26, XPUID 25:16, NPSN 15:0
    # word1: VC 31:30, rsvd 29:26, partition 25:16, APSN 15:0
    check_header(SUE_RH, "63ff1234 c155beef", {
        "ver": 1, "op": SueOp.DATA, "xpuid": 0x3FF, "npsn": 0x1234, "vc": 3,
        "partition": 0x155, "apsn": 0xBEEF})
    check_header(SUE_RH, "00000000 00000000", {"op": SueOp.ACK})
    check_header(SUE_RH, "10000000 00000000", {"op": SueOp.NACK})
    check_header(SUE_RH, "20000000 00000000", {})  # default op DATA [A]
    check_header(SUE_RH, "0c000000 3c000000", {"op": 0, "rsvd0": 3, "rsvd1": 15})
    check_header(SUE_RH, "ffffffff ffffffff", {f.name: f.max_value for f in SUE_RH.fields})


def test_transaction_descriptors():
    # opcode 8 | last 1 flags 7 | length 16 | tag 32 (| address 64)
    check_header(SUE_TXN8, "01800100 deadbeef", {"opcode": TxnOpcode.WRITE, "last": 1,
                                                  "length": 256, "tag": 0xDEADBEEF})
    check_header(SUE_TXN8, "057f0000 00000000", {"opcode": TxnOpcode.BARRIER, "flags": 127})
    check_header(SUE_TXN16, "02000008 00000001 0011223344556677",
                 {"opcode": TxnOpcode.READ_REQ, "length": 8, "tag": 1,
                  "address": 0x0011223344556677})
    check_header(RCRC, "cbf43926", {"value": 0xCBF43926})  # most significant byte first [A]


def test_rcrc_is_crc32_of_rh_and_transactions():
    assert rcrc(b"123456789") == 0xCBF43926  # the CRC-32 check value
    assert rcrc(b"") == 0


# ====================================================================== SUNH / AFH
def test_sunh_word_layout():
    # word0: TC 31:24 (DSCP 6 + ECN 2), Next Header 23:16, Hop Limit 15:12, Flow Label 11:0
    # word1: source 31:16, destination 15:0
    check_header(SUNH, "b9fd9123 0102a0b0", {"dscp": 46, "ecn": 1, "next_header": 253,
                                              "hop_limit": 9, "flow_label": 0x123,
                                              "src": 0x0102, "dst": 0xA0B0})
    check_header(SUNH, "0311f000 00000000", {"ecn": 3, "next_header": 17})
    check_header(SUNH, "00fd0fff 00000000", {"hop_limit": 0, "flow_label": 0xFFF})


def test_afh_gen1_shim():
    # AR F C CNM TTL(4) | DSCP(6) ECN(2) | EtherType of the transport
    check_header(AFH_GEN1, "a56a9a01", {"ar": 1, "c": 1, "ttl": 5, "dscp": 26, "ecn": 2})
    check_header(AFH_GEN1, "5f039a01", {"f": 1, "cnm": 1, "ttl": 15, "ecn": 3})
    check_header(AFH_GEN1, "00fc1234", {"ttl": 0, "dscp": 63, "type": 0x1234})


def test_afh_gen2_12():
    # V W R R Z Y X M | HopLimit 4 | entropy 4 | DstXPU 32 | TC 8 | entropy 8 | SrcXPU 32 | type
    check_header(AFH_GEN2_12, "86f3 00000002 05a5 00000001 9a01", {
        "v": 1, "hop_limit": 15, "entropy0": 3, "dst_xpu": 2, "tc": 5, "entropy1": 0xA5,
        "src_xpu": 1})
    check_header(AFH_GEN2_12, "7900 ffffffff 0000 fffffffe 9a01", {
        "w": 1, "r": 3, "z": 1, "y": 0, "x": 0, "m": 1, "hop_limit": 0,
        "dst_xpu": 0xFFFFFFFF, "src_xpu": 0xFFFFFFFE})


def test_afh_gen2_6():
    # [A] flags | HopLimit 4 VC 2 rsvd 2 | DstXPU 16 | SrcXPU 16 | SA 6 | type
    check_header(AFH_GEN2_6, "06f8 0010 0020 020000000009 9a01", {
        "hop_limit": 15, "vc": 2, "dst_xpu": 0x10, "src_xpu": 0x20,
        "sa": "02:00:00:00:00:09"})
    check_header(AFH_GEN2_6, "0007 ffff 0000 000000000000 9a01", {
        "y": 0, "x": 0, "hop_limit": 0, "vc": 1, "rsvd": 3, "dst_xpu": 0xFFFF})


# ====================================================================== whole frames
def _pdu(rh: str, *txns: str) -> str:
    body = unhex(rh + "".join(txns))
    return (body + zlib.crc32(body).to_bytes(4, "big")).hex()


FRAME_VECTORS = {
    # ESUN F=1 CoS 3 ECT(0) FL 0x1234 TTL 15; RH DATA XPU 5 NPSN 100 APSN 40; one WRITE of 4
    "esun": (
        {"eth": A, "esun": {"f": 1, "cos": 3, "ecn": 2, "flow_label": 0x1234},
         "sue_rh": {"xpuid": 5, "npsn": 100, "apsn": 40},
         "sue_txn": [{"opcode": "WRITE", "tag": 7, "data": "deadbeef"}]},
        ETH_A + "88b5" + "2e1234f0" + _pdu("20050064 00000028", "01800004 00000007 deadbeef"),
        DEFAULT_SCALEUP),
    "vlan_esun_ack": (
        {"eth": A, "vlan": [{"pcp": 5, "vid": 100}], "esun": {"ttl": 1},
         "sue_rh": {"op": "ACK", "xpuid": 1, "apsn": 9}},
        ETH_A + "8100a064" + "88b5" + "00000010" + _pdu("00010000 00000009"),
        DEFAULT_SCALEUP),
    "sunh_sue": (
        {"eth": A, "sunh": {"dscp": 26, "ecn": 3, "hop_limit": 14, "src": 1, "dst": 2},
         "sue_rh": {"op": "NACK", "vc": 1, "apsn": 77}},
        ETH_A + "88b6" + "6bfde000 00010002" + _pdu("10000000 4000004d"), DEFAULT_SCALEUP),
    "sunh_udp": (
        {"eth": A, "sunh": {"next_header": 17, "src": 1, "dst": 2},
         "udp": {"sport": 1000, "dport": 2000}, "payload": {"data": "0102"}},
        ETH_A + "88b6" + "0011f000 00010002" + "03e807d0 000a0000 0102", DEFAULT_SCALEUP),
    "afh_gen1": (
        {"eth": A, "afh": {"form": "gen1", "ar": 1, "ttl": 15, "dscp": 26, "ecn": 2},
         "sue_rh": {"xpuid": 3}, "sue_txn": [{"opcode": "READ_REQ", "tag": 1}]},
        ETH_A + "9a00" + "8f6a9a01" + _pdu("20030000 00000000", "02800000 00000001"),
        DEFAULT_SCALEUP),
    "afh_gen2_12": (
        {"afh": {"form": "gen2_12", "hop_limit": 15, "dst_xpu": 2, "tc": 5, "src_xpu": 1},
         "sue_rh": {"op": "ACK"}},
        "06f0 00000002 0500 00000001" + "9a01" + _pdu("00000000 00000000"), DEFAULT_SCALEUP),
    "afh_gen2_6_lite": (
        {"afh": {"form": "gen2_6", "dst_xpu": 2, "src_xpu": 1, "vc": 1},
         "sue_txn": [{"opcode": "MESSAGE", "data": "aabb"}, {"opcode": "BARRIER"}]},
        "06f4 0002 0001 000000000000" + "9a01" + "04000002 00000000 aabb"
        + "05800000 00000000", LITE),
    "sue_ipv4": (
        {"eth": A, "ipv4": {"id": 1, "ttl": 64}, "udp": {"sport": 0x1111, "checksum": 0},
         "sue_rh": {"op": "ACK", "apsn": 1}},
        ETH_A + "0800" + "45000028 00010000 4011" + "66c2" + "0a000001 0a000002"
        + "1111cafe 00140000" + _pdu("00000000 00000001"), DEFAULT_SCALEUP),
}


@pytest.mark.parametrize("name", sorted(FRAME_VECTORS))
def test_frame_vectors_both_ways(name):
    d, hexstr, sc = FRAME_VECTORS[name]
    want = unhex(hexstr)
    want += bytes(max(60 - len(want), 0))
    frame = wire.build(d, scaleup=sc)
    assert frame.hex() == want.hex()
    dec = wire.dissect(frame, scaleup=sc)
    assert not dec.problems
    got = dec.to_dict()
    for layer, fields in d.items():
        if layer == "vlan":
            for t, g in zip(fields, got["vlan"], strict=True):
                assert {k: g[k] for k in t} == t
        elif layer == "sue_txn":
            assert len(got["sue_txn"]) == len(fields)
            for i, (t, g) in enumerate(zip(fields, got["sue_txn"], strict=True)):
                assert g["data"] == t.get("data", "")
                assert g["opcode"] == int(TxnOpcode[t["opcode"]])
                assert g["last"] == int(i == len(fields) - 1)
        else:
            spec_fields = {k: v for k, v in fields.items() if k not in ("op", "form")}
            assert {k: got[layer][k] for k in spec_fields} == spec_fields
            if "op" in fields:
                assert got[layer]["op"] == SueOp[fields["op"]]
    if "sue_rh" in d:
        assert got["rcrc"]["valid"] is True
    assert wire.build(got, scaleup=sc) == frame


def test_afh_gen2_frame_has_no_eth_layer():
    d, _h, sc = FRAME_VECTORS["afh_gen2_12"]
    dec = wire.dissect(wire.build(d, scaleup=sc), scaleup=sc)
    assert dec.names[0] == "afh" and "eth" not in dec
    assert dec["afh"]["form"] == "gen2_12"
    with pytest.raises(BadValue):
        wire.build({"eth": {}, "afh": {"form": "gen2_12"}, "sue_rh": {}})


def test_overheads_match_the_reference_numbers():
    """In-frame overhead without FCS, counted by hand from the layouts
    (docs/reference/headers.md): ESUN+RH 30, SUNH+RH 34, AFH Gen1 30, AFH Gen2 26, SUE over
    IPv4/UDP 54 (R-CRC included)."""
    sizes = {
        "esun": {"eth": {}, "esun": {}, "sue_rh": {"op": "ACK"}},
        "sunh": {"eth": {}, "sunh": {}, "sue_rh": {"op": "ACK"}},
        "afh_gen1": {"eth": {}, "afh": {"form": "gen1"}, "sue_rh": {"op": "ACK"}},
        "afh_gen2": {"afh": {"form": "gen2_12"}, "sue_rh": {"op": "ACK"}},
        "ipv4": {"eth": {}, "ipv4": {}, "udp": {}, "sue_rh": {"op": "ACK"}},
    }
    got = {k: len(wire.build(dict(d, trailer=""))) for k, d in sizes.items()}
    assert got == {"esun": 30, "sunh": 34, "afh_gen1": 30, "afh_gen2": 26, "ipv4": 54}


# ====================================================================== round trips
def _check_roundtrip(d: dict, sc: ScaleUpConfig) -> None:
    frame = wire.build(d, scaleup=sc)
    dec = wire.dissect(frame, scaleup=sc)
    assert not dec.problems, (d, dec.problems)
    assert not dec.raw or "raw" in d
    out = dec.to_dict()
    assert wire.build(out, scaleup=sc) == frame
    assert wire.build(json.loads(json.dumps(out)), scaleup=sc) == frame
    if "sue_rh" in d:
        assert out["rcrc"]["valid"] is True
    txns = d.get("sue_txn", [])
    assert [t["data"] for t in out.get("sue_txn", [])] == [t["data"] for t in txns]
    pdu = sum(sc.txn_hdr_bytes + len(t["data"]) // 2 for t in txns)
    assert pdu <= (sc.max_pdu_bytes if "sue_rh" in d else sc.max_pdu_lite_bytes)
    for layer in ("esun", "sunh", "afh", "sue_rh"):
        if layer in d:
            spec = AFH_FORMS[d[layer]["form"]] if layer == "afh" else SPECS[layer]
            given_ = {k: v for k, v in d[layer].items() if k != "form"}
            assert spec.unpack_raw(spec.pack({k: out[layer][k] for k in given_})) == \
                spec.unpack_raw(spec.pack(given_))


@roundtrips
@given(d=ws.scaleup_frame_dicts())
def test_every_stack_round_trips(d):
    _check_roundtrip(d, DEFAULT_SCALEUP)


@roundtrips
@given(d=ws.scaleup_frame_dicts(scaleup=OTHER))
def test_every_stack_round_trips_under_another_config(d):
    _check_roundtrip(d, OTHER)


@pytest.mark.parametrize("stack", ws.SCALEUP_STACKS)
@settings(max_examples=5)
@given(data=st.data())
def test_each_stack_is_drawn(stack, data):
    d = data.draw(ws.scaleup_frame_dicts([stack]))
    key = {"esun": "esun", "sunh_sue": "sunh", "sunh_udp": "udp", "afh_gen1": "afh",
           "afh_gen2": "afh", "sue_ipv4": "ipv4", "sue_ipv6": "ipv6"}[stack]
    assert key in d
    _check_roundtrip(d, DEFAULT_SCALEUP)


def test_strategy_rejects_unknown_stacks():
    with pytest.raises(ValueError):
        ws.scaleup_frame_dicts(["nope"])
    with pytest.raises(ValueError):
        ws.scaleup_frame_dicts([])


# ====================================================================== cuts
def _check_cuts(frame: bytes, sc: ScaleUpConfig = DEFAULT_SCALEUP) -> None:
    whole = set(wire.dissect(frame, scaleup=sc).problems)
    for k in range(len(frame) + 1):
        cut = frame[:k]
        snapped = wire.dissect(cut, len(frame), scaleup=sc)
        assert set(snapped.problems) <= whole, (k, snapped.problems)
        assert wire.build(snapped.to_dict(), scaleup=sc)[:k] == cut, k
        lying = wire.dissect(cut, scaleup=sc)
        assert wire.build(lying.to_dict(), scaleup=sc)[:k] == cut, k


@pytest.mark.parametrize("index", range(len(REFERENCE)))
def test_reference_frames_cut_at_every_byte(index):
    _check_cuts(wire.build(REFERENCE[index]))


def test_lying_cut_inside_the_pdu_is_a_problem():
    frame = wire.build(REFERENCE[0])
    for k in range(14, 14 + 4 + 8 + 8 + 64 + 4):
        dec = wire.dissect(frame[:k])
        assert dec.problems, k


@settings(max_examples=10, suppress_health_check=[HealthCheck.too_slow,
                                                  HealthCheck.data_too_large])
@given(d=ws.scaleup_frame_dicts(scaleup=LITE))
def test_hypothesis_frames_cut_at_every_byte(d):
    _check_cuts(wire.build(d, scaleup=LITE), LITE)


@settings(max_examples=30)
@given(body=st.binary(max_size=80), et=st.sampled_from(sorted(SUE_HEX.values())),
       orig_extra=st.integers(0, 3))
def test_random_bytes_after_scaleup_ethertypes_never_raise(body, et, orig_extra):
    frame = unhex(ETH_A + et) + body
    for sc in (DEFAULT_SCALEUP, LITE, OTHER):
        dec = wire.dissect(frame, len(frame) + orig_extra, scaleup=sc)
        assert wire.build(dec.to_dict(), scaleup=sc)[:len(frame)] == frame


MUTATED = [wire.build(d) for d in REFERENCE]


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(MUTATED))),
       st.lists(st.tuples(st.integers(0, 300), st.integers(0, 255)), max_size=6),
       st.none() | st.integers(0, 300), st.binary(max_size=8), st.booleans(),
       st.sampled_from((DEFAULT_SCALEUP, LITE)))
def test_mutated_scaleup_frames_round_trip(index, flips, cut, tail, snapped, sc):
    f = bytearray(MUTATED[index])
    for i, b in flips:
        f[i % len(f)] = b
    f = bytes(f[:cut]) + tail if cut is not None else bytes(f) + tail
    orig = len(f) + 10 if snapped else None
    rebuilt = wire.build(wire.dissect(f, orig, scaleup=sc).to_dict(), scaleup=sc)
    assert rebuilt[:len(f)] == f if snapped else rebuilt == f


# ====================================================================== broken PDUs
def _decode(d: dict, sc: ScaleUpConfig = DEFAULT_SCALEUP) -> tuple[bytes, wire.Decoded]:
    frame = wire.build(d, scaleup=sc)
    dec = wire.dissect(frame, scaleup=sc)
    assert wire.build(dec.to_dict(), scaleup=sc) == frame  # broken frames round-trip too
    return frame, dec


ESUN_DATA = {"eth": A, "esun": {}, "sue_rh": {}}


def test_lying_descriptor_length():
    frame = bytearray(wire.build(dict(ESUN_DATA, sue_txn=[{"data": "aa" * 4}])))
    at = 14 + 4 + 8 + 2  # the length field of the first descriptor
    frame[at:at + 2] = (200).to_bytes(2, "big")
    dec = wire.dissect(bytes(frame))
    assert dec.problems == ["sue_txn[0].length: 200 but only 26 bytes follow the descriptor"]
    assert dec.cut and dec.raw == bytes(frame[26:])
    assert "rcrc" not in dec
    assert wire.build(dec.to_dict()) == bytes(frame)
    # the same length explained by the snaplen: not a problem
    dec = wire.dissect(bytes(frame), 26 + 8 + 200 + 4)
    assert not dec.problems and dec.cut


def test_missing_last_bit():
    _f, dec = _decode(dict(ESUN_DATA, sue_txn=[{"data": "aa" * 4, "last": 0}]))
    assert dec.problems and dec.problems[0].startswith("sue_txn[1]")
    assert len(dec["sue_txn"]) == 1 and dec["sue_txn"][0]["last"] == 0
    assert "rcrc" not in dec


def test_opcode_zero_descriptor():
    _f, dec = _decode(dict(ESUN_DATA, sue_txn=[{"data": "aa", "last": 0},
                                               {"opcode": 0, "data": "bb"}]))
    assert dec.problems == ["sue_txn[1].opcode: 0 is not a transaction (no descriptor with "
                            "last=1 before byte 35)"]
    assert dec.cut and dec.raw.startswith(unhex("00800001"))


def test_pdu_over_4096_bytes():
    ok = [{"data": "aa" * 256}] * 15 + [{"data": "bb" * 128}]  # 15 x 264 + 136 = 4096
    _f, dec = _decode(dict(ESUN_DATA, sue_txn=ok))
    assert not dec.problems
    _f, dec = _decode(dict(ESUN_DATA, sue_txn=[*ok, {"data": "cc"}]))
    assert dec.problems == ["sue: 4105 bytes of transactions exceed the 4096-byte SUE PDU "
                            "limit"]
    assert dec["rcrc"]["valid"] is True  # the bytes themselves are fine


def test_transaction_over_256_bytes():
    _f, dec = _decode(dict(ESUN_DATA, sue_txn=[{"data": "aa" * 256}]))
    assert not dec.problems
    _f, dec = _decode(dict(ESUN_DATA, sue_txn=[{"data": "aa" * 257}]))
    assert dec.problems == ["sue_txn[0].length: 257 exceeds the 256-byte SUE limit"]


def test_rcrc_mismatch():
    frame, good = _decode(dict(ESUN_DATA, sue_txn=[{"data": "aa" * 4}]))
    assert good["rcrc"]["valid"] is True
    _f, dec = _decode(dict(ESUN_DATA, sue_txn=[{"data": "aa" * 4}], rcrc={"value": 1}))
    assert dec["rcrc"] == {"value": 1, "valid": False}
    assert dec.problems == [f"rcrc: 0x00000001 on the wire, 0x{good['rcrc']['value']:08x} "
                            f"computed"]
    # a flipped data bit is caught
    bad = bytearray(frame)
    bad[14 + 4 + 8 + 8] ^= 0x01
    assert wire.dissect(bytes(bad))["rcrc"]["valid"] is False
    # recompute fixes it
    fixed = wire.build(wire.dissect(bytes(bad)).to_dict(), recompute=True)
    assert wire.dissect(fixed)["rcrc"]["valid"] is True


def test_ack_carries_no_transactions():
    _f, dec = _decode({"eth": A, "esun": {}, "sue_rh": {"op": "NACK"}})
    assert "sue_txn" not in dec and dec["rcrc"]["valid"] is True and not dec.problems


def _ack_pdu(extra: bytes = b"") -> str:
    rh = SUE_RH.pack({"op": "ACK", "apsn": 3})
    return (rh + rcrc(rh).to_bytes(4, "big") + extra).hex()


# Bytes after a whole PDU inside the UDP datagram: shown as raw, the R-CRC is kept on build.
def test_bytes_after_the_pdu_inside_udp():
    frame = wire.build({"eth": A, "ipv4": {}, "udp": {"dport": 0xCAFE},
                        "payload": {"data": _ack_pdu(b"\x01\x02")}})
    dec = wire.dissect(frame)
    assert dec.problems == ["sue: 2 bytes after the end of the PDU inside the UDP datagram"]
    assert dec["rcrc"]["valid"] is True and dec.raw == b"\x01\x02"
    assert wire.build(dec.to_dict()) == frame


# A PDU cut short inside a whole datagram: raw stops at the datagram end (padding is trailer).
def test_pdu_cut_short_inside_udp():
    frame = wire.build({"eth": A, "ipv4": {}, "udp": {"dport": 0xCAFE},
                        "payload": {"data": _ack_pdu()[:20]}})
    dec = wire.dissect(frame)
    assert dec.problems and dec.problems[0].startswith("rcrc")
    assert wire.build(dec.to_dict()) == frame


def test_sue_over_udp_length_bookkeeping():
    _f, dec = _decode({"eth": A, "ipv6": {}, "udp": {}, "sue_rh": {"op": "ACK"}})
    assert dec["udp"]["length"] == 8 + 8 + 4 and dec["udp"]["dport"] == 0xCAFE
    assert not dec.problems and not dec.trailer


def test_sue_lite():
    d = {"afh": {"form": "gen2_6", "dst_xpu": 7}, "sue_txn": [{"data": "ab" * 100}] * 3}
    frame, dec = _decode(d, LITE)
    assert not dec.problems and "sue_rh" not in dec and "rcrc" not in dec
    assert [t["last"] for t in dec["sue_txn"]] == [0, 0, 1]
    # the default config reads the same bytes as the 12-byte form with an RH: not SUE-Lite
    assert wire.dissect(frame)["afh"]["form"] == "gen2_12"
    # SUE-Lite PDUs are limited to 1024 bytes
    _f, dec = _decode(dict(d, sue_txn=[{"data": "ab" * 256}] * 4), LITE)
    assert dec.problems == ["sue: 1056 bytes of transactions exceed the 1024-byte SUE-Lite "
                            "PDU limit"]


def test_esun_transport_setting():
    d = {"eth": A, "esun": {}, "sue_txn": [{"data": "01"}]}
    sc = DEFAULT_SCALEUP.with_(esun_transport="sue_lite")
    _f, dec = _decode(d, sc)
    assert "sue_rh" not in dec and dec["sue_txn"][0]["data"] == "01" and not dec.problems
    sc = DEFAULT_SCALEUP.with_(esun_transport="raw")
    _f, dec = _decode({"eth": A, "esun": {}, "raw": "0102"}, sc)
    assert dec.raw.startswith(unhex("0102")) and "sue_rh" not in dec


def test_txn_hdr_bytes_16():
    sc = DEFAULT_SCALEUP.with_(txn_hdr_bytes=16)
    frame, dec = _decode(dict(ESUN_DATA, sue_txn=[{"address": 0x1000, "data": "ee"}],
                              trailer=""), sc)
    assert dec["sue_txn"][0]["address"] == 0x1000 and not dec.problems
    assert len(frame) == 14 + 4 + 8 + 16 + 1 + 4


# ====================================================================== configuration
def test_other_ethertype_dissects_and_default_does_not():
    sc = DEFAULT_SCALEUP.with_(esun_ethertype=0x88B7)
    d = dict(ESUN_DATA, sue_txn=[{"data": "aa"}])
    frame = wire.build(d, scaleup=sc)
    assert frame[12:14] == unhex("88b7")
    assert "sue_rh" in wire.dissect(frame, scaleup=sc)
    dec = wire.dissect(frame)
    assert "esun" not in dec and dec.raw and not dec.problems
    assert "esun" not in wire.dissect(wire.build(d), scaleup=sc)


@pytest.mark.parametrize("stack", ["sunh_sue", "afh_gen1", "sue_ipv4", "sue_ipv6", "afh_gen2"])
@settings(max_examples=5)
@given(data=st.data())
def test_other_config_for_every_stack(stack, data):
    d = data.draw(ws.scaleup_frame_dicts([stack], scaleup=OTHER))
    frame = wire.build(d, scaleup=OTHER)
    mine = wire.dissect(frame, scaleup=OTHER)
    assert not mine.problems
    default = wire.dissect(frame)
    assert not {"sue_rh", "sue_txn"} & set(default.names)


def test_udp_port_setting():
    sc = DEFAULT_SCALEUP.with_(sue_udp_port=4000)
    frame = wire.build({"ipv4": {}, "udp": {}, "sue_rh": {"op": "ACK"}}, scaleup=sc)
    assert "sue_rh" in wire.dissect(frame, scaleup=sc)
    assert "payload" in wire.dissect(frame) and "sue_rh" not in wire.dissect(frame)


@pytest.mark.parametrize(("changes", "word"), [
    ({"esun_ethertype": 0x05FF}, "esun_ethertype"),
    ({"sunh_ethertype": 0x10000}, "sunh_ethertype"),
    ({"sue_ethertype": 0x88B5}, "differ"),
    ({"afh_gen1_ethertype": 0x88B6}, "differ"),
    ({"sue_udp_port": 0}, "sue_udp_port"),
    ({"sue_udp_port": 65536}, "sue_udp_port"),
    ({"sunh_sue_protocol": 256}, "sunh_sue_protocol"),
    ({"sunh_sue_protocol": -1}, "sunh_sue_protocol"),
    ({"esun_transport": "udp"}, "esun_transport"),
    ({"afh_gen2_6_transport": "rh"}, "afh_gen2_6_transport"),
    ({"afh_gen2_12_transport": ""}, "afh_gen2_12_transport"),
    ({"afh_gen2_form": "8"}, "afh_gen2_form"),
    ({"afh_gen2_form": 12}, "afh_gen2_form"),
    ({"txn_hdr_bytes": 12}, "txn_hdr_bytes"),
    ({"cos_to_tc": (0, 1, 2)}, "cos_to_tc"),
    ({"cos_to_tc": (0, 1, 2, 3, 4, 5, 6, 8)}, "cos_to_tc"),
])
def test_config_validation(changes, word):
    with pytest.raises(ValueError, match=word):
        ScaleUpConfig(**changes)
    with pytest.raises(ValueError, match=word):
        DEFAULT_SCALEUP.with_(**changes)


def test_config_is_frozen_and_with_copies():
    sc = DEFAULT_SCALEUP.with_(esun_ethertype=0x88B7)
    assert sc.esun_ethertype == 0x88B7 and DEFAULT_SCALEUP.esun_ethertype == 0x88B5
    with pytest.raises(AttributeError):
        sc.esun_ethertype = 1  # type: ignore[misc]
    assert ScaleUpConfig() == DEFAULT_SCALEUP


# ====================================================================== ESUN helpers
def _esun_frame(sc: ScaleUpConfig = DEFAULT_SCALEUP, vlan: bool = False, **esun) -> bytearray:
    d = {"eth": A, "esun": esun, "sue_rh": {"op": "ACK"}}
    if vlan:
        d["vlan"] = [{"vid": 5}, {"vid": 6}]
    return bytearray(wire.build(d, scaleup=sc))


@pytest.mark.parametrize("ttl", [0, 1])
@pytest.mark.parametrize("vlan", [False, True])
def test_forward_ttl_drops_at_arrival_0_and_1(ttl, vlan):
    frame = _esun_frame(ttl=ttl, vlan=vlan, ud=3, rsvd=3)
    before = bytes(frame)
    assert esun_forward_ttl(frame) is False
    assert bytes(frame) == before  # a dropped frame is not rewritten


@pytest.mark.parametrize("ttl", [2, 3, 9, 15])
@pytest.mark.parametrize("vlan", [False, True])
def test_forward_ttl_decrements_in_place(ttl, vlan):
    frame = _esun_frame(ttl=ttl, vlan=vlan, ud=2, rsvd=1, cos=5, ecn=3)
    before = bytes(frame)
    assert esun_forward_ttl(frame) is True
    off = esun_offset(frame)
    assert off == 14 + (8 if vlan else 0)
    # byte 3 of the EH: TTL(7:4) UD(3:2) RSVD(1:0)
    assert frame[off + 3] == ((ttl - 1) << 4) | (2 << 2) | 1
    diff = [i for i in range(len(frame)) if frame[i] != before[i]]
    assert diff == [off + 3]
    dec = wire.dissect(bytes(frame))
    assert dec["esun"]["ttl"] == ttl - 1 and dec["esun"]["ud"] == 2


def test_forward_ttl_hop_by_hop_then_drop():
    frame = _esun_frame(ttl=4)
    hops = 0
    while esun_forward_ttl(frame):
        hops += 1
    assert hops == 3 and wire.dissect(bytes(frame))["esun"]["ttl"] == 1


def test_forward_ttl_ignores_other_frames_and_follows_the_config():
    roce = bytearray(wire.build({"ipv4": {}, "udp": {}, "bth": {}}))
    before = bytes(roce)
    assert esun_forward_ttl(roce) is True and bytes(roce) == before
    sc = DEFAULT_SCALEUP.with_(esun_ethertype=0x88B7)
    frame = _esun_frame(sc, ttl=1)
    assert esun_forward_ttl(frame) is True  # not ESUN under the default config
    assert esun_forward_ttl(frame, sc) is False
    assert esun_offset(bytearray(20)) is None
    assert esun_forward_ttl(bytearray(unhex(ETH_A + "88b5" + "00"))) is True  # cut EH


def test_cos_to_tc():
    assert [esun_cos_to_tc(c) for c in range(8)] == list(range(8))
    sc = DEFAULT_SCALEUP.with_(cos_to_tc=(0, 0, 1, 1, 2, 2, 3, 7))
    assert [esun_cos_to_tc(c, sc) for c in range(8)] == [0, 0, 1, 1, 2, 2, 3, 7]
    assert [esun_cos_to_tc(c, OTHER) for c in range(8)] == [7, 6, 5, 4, 3, 2, 1, 0]


def test_cos_overrides_pcp():
    frame = _esun_frame(vlan=True, cos=6)
    dec = wire.dissect(bytes(frame))
    assert dec["vlan"][0]["pcp"] == 0
    assert esun_cos_to_tc(dec["esun"]["cos"]) == 6


def test_flow_hash_input():
    da_sa = unhex(ETH_A)
    with_label = _esun_frame(f=1, flow_label=0xBEEF)
    assert esun_flow_hash_input(with_label) == da_sa + unhex("beef")
    without = _esun_frame(f=0, flow_label=0xBEEF)
    assert esun_flow_hash_input(without) == da_sa
    tagged = _esun_frame(vlan=True, f=1, flow_label=0x0102)
    assert esun_flow_hash_input(tagged) == da_sa + unhex("0102")
    roce = wire.build({"eth": A, "ipv4": {}, "udp": {}, "bth": {}})
    assert esun_flow_hash_input(roce) == da_sa
    # F=1 frames of different labels hash differently; F=0 ones do not
    assert esun_flow_hash_input(_esun_frame(f=1, flow_label=1)) != esun_flow_hash_input(
        _esun_frame(f=1, flow_label=2))
    assert esun_flow_hash_input(_esun_frame(f=0, flow_label=1)) == esun_flow_hash_input(
        _esun_frame(f=0, flow_label=2))


def test_ce_marking_round_trips():
    for layer, kw in (("esun", {}), ("sunh", {}), ("afh", {"form": "gen1"})):
        d = {"eth": A, layer: dict(kw, ecn=3), "sue_rh": {"op": "ACK"}}
        assert wire.dissect(wire.build(d))[layer]["ecn"] == 3

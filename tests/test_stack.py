"""dissect()/build() over one table of frames: every opcode of ``wire.bth.EXT_HEADERS`` plus
non-RoCE frames, fed whole, cut at every byte (snaplen cuts and lying frames), with trailing
garbage, with lying length fields, and fuzzed.  The rules tested are those stated in the
``wire.stack`` module docstring."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.helpers import ROCE_FRAMES, assert_fields, frame_dict, geometry, merge
from wire.bth import EXT_HEADERS
from wire.errors import BadValue
from wire.ib_ext import EXT_SPECS
from wire.ipv4 import ipv4_checksum
from wire.stack import LAYER_ORDER, Decoded, build, dissect

ROCE_IDS = [i for i, _f in ROCE_FRAMES]

# (id, build dict, cut-problem end): a lying frame cut below the last byte count must have a
# problem (the datagram or the MAC Control header is incomplete); cuts at or above it only
# lose Ethernet padding or undissected bytes.
OTHER_CASES = [
    ("udp4-plain", {"ipv4": {}, "udp": {"dport": 9000},
                    "payload": {"data": "00112233445566778899aabbccddeeff00112233"}}, 62),
    ("udp6-plain-sport-4791", {"ipv6": {}, "udp": {"dport": 53, "sport": 4791},
                               "payload": {"data": "abcd" * 5}}, 82),
    ("roce-ipv4-options", {"ipv4": {"options": "01010100"}, "udp": {},
                           "bth": {"opcode": "RC_SEND_ONLY"}, "payload": {"data": "01" * 9}},
     74),
    ("ipv4-tcp", {"ipv4": {"protocol": 6}, "raw": "00" * 30}, 64),
    ("ipv4-fragment", {"ipv4": {"flags": 1}, "raw": "c00012b7" + "00" * 30}, 68),
    ("roce-zero-length-padded", {"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"}}, 58),
    ("roce-zero-length-unpadded", {"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
                                   "trailer": ""}, 58),
    ("pfc", {"pfc": {"quanta": [0, 5, 0, 0, 0, 0, 0, 7]}}, 34),
    ("pause", {"pause": {"quanta": 0xFFFF}}, 18),
    ("mac-control-unknown-opcode", {"mac_control": {"opcode": 2}, "raw": "11" * 44}, 16),
    ("arp", {"eth": {"type": 0x0806, "dst": "ff:ff:ff:ff:ff:ff"},
             "raw": "0001080006040001" + "22" * 20}, 14),
]
OTHER_FRAMES = [(i, build(d)) for i, d, _e in OTHER_CASES]
CUT_END = {i: e for i, _d, e in OTHER_CASES}
CUT_END.update({i: geometry(f).end for i, f in ROCE_FRAMES})
ALL_FRAMES = ROCE_FRAMES + OTHER_FRAMES
ALL_IDS = [i for i, _f in ALL_FRAMES]


def roundtrip(frame: bytes, orig_len: int | None = None) -> Decoded:
    d = dissect(frame, orig_len)
    rebuilt = build(d.to_dict())
    if orig_len is None:
        assert rebuilt == frame, (frame.hex(), rebuilt.hex())
    else:
        assert rebuilt[:len(frame)] == frame, (frame.hex(), rebuilt.hex())
    return d


# ------------------------------------------------------------------- (a) whole frames
@pytest.mark.parametrize(("fid", "frame"), ROCE_FRAMES, ids=ROCE_IDS)
def test_roce_frame_whole(fid, frame):
    op = int(fid.split("-")[0], 16)
    d = roundtrip(frame)
    assert d.problems == []
    assert d["icrc"]["valid"] is True and isinstance(d["icrc"]["value"], int)
    name, hdrs = EXT_HEADERS[op]
    assert d["bth"]["opcode"] == op and d["bth"]["opcode_name"] == name
    # Layers appear in wire order, exactly the ones the opcode carries.
    ip = "ipv4" if "ipv4" in d else "ipv6"
    want = ["eth", *(["vlan"] if "vlan" in d else []), ip, "udp", "bth", *hdrs,
            *(["payload"] if "payload" in d else []), "icrc"]
    assert d.names == want
    assert [n for n in LAYER_ORDER if n in d.names] == d.names
    # The values given to build() come back.
    given_ = frame_dict(op)
    for h in hdrs:
        assert_fields(d.to_dict(), {h: given_[h]})
    assert_fields(d.to_dict(), {"bth": given_["bth"], "udp": given_["udp"]})
    if given_.get("payload", {}).get("data"):
        data = given_["payload"]["data"]
        assert d["payload"]["data"] == data and d["payload"]["length"] == len(data) // 2
        assert d["bth"]["pad_count"] == -(len(data) // 2) % 4
    else:
        assert "payload" not in d and d["bth"]["pad_count"] == 0
    assert len(frame) >= 60


@pytest.mark.parametrize(("fid", "frame"), OTHER_FRAMES, ids=[i for i, _ in OTHER_FRAMES])
def test_other_frame_whole(fid, frame):
    d = roundtrip(frame)
    assert d.problems == []
    if "bth" in d:
        assert d["icrc"]["valid"] is True
    if fid.startswith("udp6-plain"):
        assert "bth" not in d and d["payload"]["data"] == "abcd" * 5


def test_decoded_access():
    d = dissect(ROCE_FRAMES[0][1])
    assert d.bth is d["bth"] and d.get("nope") is None and "bth" in d and "pfc" not in d
    with pytest.raises(AttributeError):
        _ = d.nope
    assert d.caplen == d.orig_len == len(ROCE_FRAMES[0][1])


# ------------------------------------------------------------------- (b) snaplen cuts
@pytest.mark.parametrize(("fid", "frame"), ALL_FRAMES, ids=ALL_IDS)
def test_snaplen_cut_at_every_byte(fid, frame):
    n = len(frame)
    g = geometry(frame) if "bth" in dissect(frame) else None
    for k in range(1, n):
        d = roundtrip(frame[:k], orig_len=n)
        assert d.problems == [], (k, d.problems)
        assert d.caplen == k and d.orig_len == n
        if g is None:
            continue
        if k < g.headers_end:
            assert "icrc" not in d, k
        elif k < g.end:
            ic = d["icrc"]
            assert ic["valid"] is None and ic["value"] is None, k
            assert "not captured" in ic["reason"], k
        else:
            assert d["icrc"]["valid"] is True, k


def test_snaplen_cut_at_zero_bytes():
    d = dissect(b"", orig_len=60)
    assert build(d.to_dict()) == b""


def test_snaplen_cut_inside_icrc_keeps_captured_bytes():
    frame = bytearray(build({"ipv4": {}, "udp": {}, "bth": {}, "payload": {"data": "01" * 30}}))
    frame[-3] ^= 0xFF  # a corrupt ICRC: the rebuilt one would differ
    cut = bytes(frame[:-2])
    roundtrip(cut, orig_len=len(frame))


def test_snaplen_cut_after_short_udp_datagram_keeps_bytes():
    frame = build({"ipv4": {}, "udp": {"dport": 9000, "length": 10},
                   "payload": {"data": "11" * 20}})
    roundtrip(frame[:60], orig_len=len(frame))


# ------------------------------------------------------------------- (c) lying cuts
@pytest.mark.parametrize(("fid", "frame"), ALL_FRAMES, ids=ALL_IDS)
def test_lying_cut_at_every_byte(fid, frame):
    end = CUT_END[fid]
    for k in range(len(frame)):
        d = roundtrip(frame[:k])
        if k < end:
            assert d.problems, k
        else:
            assert d.problems == [], (k, d.problems)
        if "icrc" in d and k < end:
            assert d["icrc"]["valid"] is not True, k


@pytest.mark.parametrize("k", [14, 15, 16, 17])
def test_lying_cut_inside_vlan_tag_is_a_problem(k):
    frame = build({"vlan": [{"vid": 100, "pcp": 3}], "ipv4": {}, "udp": {},
                   "bth": {}, "payload": {"data": "00" * 8}})
    d = roundtrip(frame[:k])
    assert any(p.startswith("vlan") for p in d.problems), d.problems


def test_lying_cut_problem_names_the_layer():
    frame = dict(ROCE_FRAMES)[next(i for i in ROCE_IDS if "RC_RDMA_WRITE_ONLY" in i)]
    g = geometry(frame)
    d = dissect(frame[:g.udp + 8 + 12 + 5])  # 5 bytes into the RETH
    assert any(p.startswith("ipv4.total_length") or p.startswith("ipv6.payload_length")
               for p in d.problems), d.problems
    assert d.cut and d.raw == frame[g.udp + 20:g.udp + 25]
    assert "reth" not in d


def test_empty_record():
    d = dissect(b"")
    assert d.problems and "empty" in d.problems[0]
    assert build(d.to_dict()) == b""


# ------------------------------------------------------------------- (d) trailing garbage
@pytest.mark.parametrize("garbage", [b"\0" * 6, bytes(range(1, 30))])
@pytest.mark.parametrize(("fid", "frame"), ROCE_FRAMES, ids=ROCE_IDS)
def test_trailing_garbage(fid, frame, garbage):
    base = dissect(frame)
    d = roundtrip(frame + garbage)
    assert d.problems == []
    assert d.trailer == (base.trailer or b"") + garbage
    assert d["icrc"] == base["icrc"] and d["icrc"]["valid"] is True
    assert d.to_dict().get("payload") == base.to_dict().get("payload")


def test_short_frame_padding_not_in_icrc():
    """A zero-length SEND ONLY is 58 bytes; the NIC pads it to 60 (Scapy bug S1)."""
    padded = build({"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"}})
    assert len(padded) == 60
    d = roundtrip(padded)
    assert d.trailer == b"\0\0" and d["icrc"]["valid"] is True and "payload" not in d
    d = roundtrip(padded[:58])
    assert d.trailer == b"" and d["icrc"]["valid"] is True
    d = roundtrip(padded[:58] + b"\xaa\x55")
    assert d.trailer == b"\xaa\x55" and d["icrc"]["valid"] is True


# ------------------------------------------------------------------- (e) lying lengths
BASE4 = {"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
         "payload": {"data": "0102030405"}}  # 14 + 20 + 8 + 12 + 8 + 4 = 66 bytes
BASE6 = {"ipv6": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
         "payload": {"data": "0102030405"}}  # 86 bytes
LYING = [  # (case, frame dict, problem prefix, expected icrc.valid)
    ("ipv4.total_length too big", merge(BASE4, {"ipv4": {"total_length": 200}}),
     "ipv4.total_length", None),
    ("ipv4.total_length too small", merge(BASE4, {"ipv4": {"total_length": 50}}),
     "udp.length", None),
    ("ipv4.total_length < ihl", merge(BASE4, {"ipv4": {"total_length": 19}}),
     "ipv4.total_length", "any"),
    ("ipv4.ihl < 5", merge(BASE4, {"ipv4": {"ihl": 4}}), "ipv4.ihl", "absent"),
    ("ipv6.payload_length too big", merge(BASE6, {"ipv6": {"payload_length": 200}}),
     "ipv6.payload_length", None),
    ("ipv6.payload_length too small", merge(BASE6, {"ipv6": {"payload_length": 20}}),
     "udp.length", "absent"),
    ("ipv6.payload_length < 8", merge(BASE6, {"ipv6": {"payload_length": 3}}), "udp",
     "absent"),
    ("udp.length too big", merge(BASE4, {"udp": {"length": 200}}), "udp.length", None),
    ("udp.length too small", merge(BASE4, {"udp": {"length": 30}}), "udp.length", None),
    ("udp.length < 8", merge(BASE4, {"udp": {"length": 7}}), "udp.length", "absent"),
    ("udp.length 0", merge(BASE4, {"udp": {"length": 0}}), "udp.length", "absent"),
    ("pad_count > payload", merge(BASE4, {"bth": {"pad_count": 3},
                                          "payload": {"data": "", "pad": "00"}}),
     "bth.pad_count", True),
    ("pad_count, no payload", merge(BASE4, {"bth": {"pad_count": 2},
                                            "payload": {"data": "", "pad": ""}}),
     "bth.pad_count", True),
    ("BTH shorter than 12", {"ipv4": {}, "udp": {}, "raw": "0400ffff0000"}, "bth", "absent"),
    ("BTH only, no ICRC", {"ipv4": {}, "udp": {}, "raw": "0400ffff000000010000000a"}, "icrc",
     "absent"),
    ("BTH + 3 bytes, no ICRC", {"ipv4": {}, "udp": {},
                                "raw": "0400ffff000000010000000a010203"}, "icrc", "absent"),
    ("extended header cut by the UDP length",
     {"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_RDMA_WRITE_ONLY"},
      "raw": "0000000000001000" + "00000000"}, "reth", "absent"),
]


@pytest.mark.parametrize(("case", "d", "field", "icrc_valid"), LYING,
                         ids=[c[0] for c in LYING])
def test_lying_length_fields(case, d, field, icrc_valid):
    """Each lie gives a problem that starts with the field at fault; the ICRC is checked
    only where the datagram's extent is known (None: extent unknown; "absent": no BTH+ICRC
    could be decoded)."""
    frame = build(d)
    dec = roundtrip(frame)
    hits = [p for p in dec.problems if p.startswith(field)]
    assert hits, dec.problems
    assert all(len(p) < 200 and "Traceback" not in p for p in dec.problems)
    if icrc_valid == "absent":
        assert "icrc" not in dec
    elif icrc_valid != "any":
        assert dec["icrc"]["valid"] is icrc_valid
        if icrc_valid is None:
            assert "extent of the datagram unknown" in dec["icrc"]["reason"]
    # Snaplen cuts of the same lying frame do not raise and keep what was captured.
    for k in range(1, len(frame)):
        cut = dissect(frame[:k], orig_len=len(frame))
        assert build(cut.to_dict())[:k] == frame[:k], k


def test_pad_count_too_big_keeps_bytes_and_valid_icrc():
    frame = build(merge(BASE4, {"bth": {"pad_count": 3}, "payload": {"data": "", "pad": "ab"}}))
    d = roundtrip(frame)
    assert d["payload"]["length"] == 0 and d["payload"]["pad"] == "ab"
    assert d["icrc"]["valid"] is True  # the ICRC covers the bytes as sent


def test_udp_length_too_big_icrc_unknown():
    d = dissect(build(merge(BASE4, {"udp": {"length": 200}})))
    assert d["icrc"]["valid"] is None and "length" in d["icrc"]["reason"]


# ------------------------------------------------------------------- (f) RoCE by dport only
def test_roce_by_destination_port_only():
    body = "0400ffff000000010000000a" + "00" * 8
    swapped = build({"ipv4": {}, "udp": {"sport": 4791, "dport": 1234}, "payload":
                     {"data": body}})
    d = roundtrip(swapped)
    assert "bth" not in d and d["payload"]["data"] == body and d.problems == []
    d = dissect(swapped, roce_ports=[4791, 1234])
    assert "bth" in d and d["bth"]["opcode_name"] == "RC_SEND_ONLY"
    d = dissect(swapped, roce_ports=frozenset({1234}))
    assert "bth" in d


def test_extra_roce_port_build_and_dissect():
    d = {"ipv4": {}, "udp": {"dport": 1234}, "bth": {"psn": 9}, "payload": {"data": "aa"}}
    frame = build(d, roce_ports={4791, 1234})
    dec = dissect(frame, roce_ports={1234})
    assert dec["bth"]["psn"] == 9 and dec["icrc"]["valid"] is True and dec.problems == []
    assert "bth" not in dissect(frame)  # default ports: 4791 only
    assert build(dec.to_dict(), roce_ports={1234}) == frame


# ------------------------------------------------------------------- (g) fuzzing
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200), st.none() | st.integers(0, 300))
def test_random_bytes_never_raise(frame, extra):
    orig = None if extra is None else len(frame) + extra
    d = dissect(frame, orig)
    rebuilt = build(d.to_dict())
    if orig is None:
        assert rebuilt == frame
    else:
        assert rebuilt[:len(frame)] == frame, frame.hex()


ETHERTYPES = [b"\x08\x00", b"\x86\xdd", b"\x88\x08", b"\x81\x00", b"\x88\xa8"]


@given(st.sampled_from(ETHERTYPES), st.binary(max_size=186))
def test_random_payload_after_known_ethertype(etype, body):
    frame = bytes(12) + etype + body
    assert build(dissect(frame).to_dict()) == frame


mutations = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 255)), max_size=6)


@given(st.sampled_from(ALL_FRAMES), mutations, st.none() | st.integers(0, 200),
       st.binary(max_size=8), st.booleans())
def test_mutated_frames_never_raise(case, flips, cut, tail, snapped):
    _fid, frame = case
    f = bytearray(frame)
    for i, b in flips:
        f[i % len(f)] = b
    f = bytes(f[:cut]) + tail if cut is not None else bytes(f) + tail
    orig = len(f) + 10 if snapped else None
    d = dissect(f, orig)
    rebuilt = build(d.to_dict())
    if orig is None:
        assert rebuilt == f
    else:
        assert rebuilt[:len(f)] == f, f.hex()


# ------------------------------------------------------------------- (h) build errors
BUILD_ERRORS = [
    ("unknown layer key", {"ipv4": {}, "foo": {}}, None, None, "foo"),
    ("unknown field", {"ipv4": {"bogus": 1}}, "ipv4", None, "bogus"),
    ("unknown bth field", {"ipv4": {}, "udp": {}, "bth": {"bogus": 1}}, "bth", None, "bogus"),
    ("unknown vlan field", {"vlan": [{"x": 1}], "ipv4": {}}, "vlan", None, "x"),
    ("ttl out of range", {"ipv4": {"ttl": 256}}, "ipv4", "ttl", None),
    ("psn out of range", {"ipv4": {}, "udp": {}, "bth": {"psn": 1 << 24}}, "bth", "psn", None),
    ("va out of range", {"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_RDMA_WRITE_ONLY"},
                         "reth": {"va": 1 << 64}}, "reth", "va", None),
    ("vid out of range", {"vlan": [{"vid": 4096}], "ipv4": {}}, "vlan", "vid", None),
    ("pfc quanta count", {"pfc": {"quanta": [1, 2]}}, "pfc", "quanta", None),
    ("icrc negative", {"ipv4": {}, "udp": {}, "bth": {}, "icrc": {"value": -1}}, "icrc",
     "value", None),
    ("bad mac", {"eth": {"dst": "zz"}, "ipv4": {}}, "eth", "dst", None),
    ("bad opcode name", {"ipv4": {}, "udp": {}, "bth": {"opcode": "NOPE"}}, "bth", "opcode",
     None),
    ("payload length < data", {"ipv4": {}, "udp": {}, "bth": {},
                               "payload": {"data": "0102", "length": 1}}, "payload", "length",
     None),
    ("payload bad hex", {"ipv4": {}, "udp": {}, "bth": {}, "payload": {"data": "xyz"}},
     "payload", "data", None),
    ("options not a multiple of 4", {"ipv4": {"options": "010101"}}, "ipv4", "options", None),
    ("header the opcode does not carry", {"ipv4": {}, "udp": {},
                                          "bth": {"opcode": "RC_SEND_ONLY"}, "reth": {}},
     "bth", "opcode", "reth"),
    ("UD SEND ONLY with a RETH", {"ipv4": {}, "udp": {}, "bth": {"opcode": "UD_SEND_ONLY"},
                                  "deth": {}, "reth": {}}, "bth", "opcode", "reth"),
    ("layer not an object", {"ipv4": 5}, "ipv4", None, None),
    ("vlan not a list", {"vlan": {"vid": 1}, "ipv4": {}}, "vlan", None, None),
]


@pytest.mark.parametrize(("case", "d", "layer", "field", "word"), BUILD_ERRORS,
                         ids=[c[0] for c in BUILD_ERRORS])
def test_build_errors(case, d, layer, field, word):
    with pytest.raises(BadValue) as e:
        build(d)
    msg = str(e.value)
    if layer is not None:
        assert e.value.layer == layer and layer in msg
    if field is not None:
        assert e.value.field == field and field in msg
    if word is not None:
        assert word in msg


def test_build_rejects_non_mapping():
    with pytest.raises(BadValue):
        build([1, 2])  # type: ignore[arg-type]


#: A wrongly shaped part of a frame: the message shows the form expected and what was given.
SHAPE_ERRORS = [
    ({"vlan": {"pcp": 3, "vid": 100}},
     'vlan: expected a list of tags like [{"pcp": 3, "vid": 100}] (outer tag first), got a '
     'dict'),
    ({"vlan": [{"vid": 1}, 5]}, 'vlan[1]: expected a tag like {"pcp": 3, "vid": 100}, got the '
     'number 5'),
    ({"eth": []}, 'eth: expected an object of eth fields like {"src": "02:00:00:00:00:01", '
     '"dst": "02:00:00:00:00:02"}, got an empty list'),
    ([{"eth": {}}], 'expected an object of layers like {"eth": {}, "ipv4": {}, "udp": {}, '
     '"bth": {}, "payload": {"length": 64}}, got a list of 1 item'),
    ({"ipv4": {}, "udp": {}, "bth": {}, "payload": {"data": 5}},
     'payload.data: expected hex bytes like "0a1b2c", got the number 5'),
    ({"ipv4": {}, "udp": {}, "bth": {}, "payload": {"length": "64"}},
     "payload.length: expected a number of bytes like 64, got the string '64'"),
    ({"pfc": {"quanta": [1, 2]}}, "pfc.quanta: expected a list of 8 integers like [0, 0, 0, "
     "100, 0, 0, 0, 0] (or one integer for all 8), got a list of 2 items"),
    ({"esun": {}, "sue_txn": {"tag": 1}}, 'sue_txn: expected a list of transactions like '
     '[{"opcode": "WRITE", "tag": 1, "data": "00112233"}], got a dict'),
    ({"esun": {}, "sue_txn": [7]}, 'sue_txn[0]: expected a transaction like {"opcode": '
     '"WRITE", "tag": 1, "data": "00112233"}, got the number 7'),
    ({"raw": 5}, 'raw: expected hex bytes like "0a1b2c", got the number 5'),
    ({"ipv4": {"ttl": "x"}}, "ipv4.ttl: cannot use 'x': expected a number like 64 or 0x40"),
    ({"ipv4": {"ttl": [64]}}, "ipv4.ttl: cannot use [64]: expected an integer or a string, "
     "got a list of 1 item"),
    ({"ipv4": {}, "udp": {}, "bth": {"opcode": "SEND_ONLY"}},
     "bth.opcode: cannot use 'SEND_ONLY': expected a number or a name like 'RC_SEND_FIRST' "
     "(one of 84: RC_SEND_FIRST, RC_SEND_MIDDLE, RC_SEND_LAST, RC_SEND_LAST_WITH_IMMEDIATE...)"),
]


@pytest.mark.parametrize(("d", "msg"), SHAPE_ERRORS, ids=[m.split(":")[0] for _d, m in
                                                          SHAPE_ERRORS])
def test_shape_errors_show_the_expected_form(d, msg):
    with pytest.raises(BadValue) as e:
        build(d)
    assert str(e.value) == msg


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 70000) | st.text(max_size=4)
                     | st.floats(allow_nan=False, allow_infinity=False),
                     lambda v: st.lists(v, max_size=3) | st.dictionaries(
                         st.sampled_from(["vid", "pcp", "data", "length", "quanta", "tag",
                                          "opcode", "src", "x"]), v, max_size=2),
                     max_leaves=6)


@given(st.dictionaries(st.sampled_from([*LAYER_ORDER, "raw", "trailer"]), _JSON, max_size=3))
@example({"vlan": [5]})
@example({"esun": {}, "sue_txn": [[]]})
def test_any_json_builds_or_is_one_bad_value(d):
    """Whatever JSON values the layers hold, build makes a frame or raises BadValue (one
    line naming the part at fault), never TypeError or another exception."""
    try:
        build(d)
    except BadValue as e:
        assert "\n" not in str(e)


SILENT_DROPS = [
    ("bth on a non-RoCE port", {"ipv4": {}, "udp": {"dport": 1234}, "bth": {}}),
    ("ipv4 and ipv6", {"ipv4": {}, "ipv6": {}, "udp": {}}),
    ("ipv4 and pfc", {"ipv4": {}, "pfc": {}}),
    ("pfc and pause", {"pfc": {}, "pause": {}}),
    ("udp under a non-UDP protocol", {"ipv4": {"protocol": 6}, "udp": {}}),
]


@pytest.mark.parametrize(("case", "d"), SILENT_DROPS, ids=[c[0] for c in SILENT_DROPS])
def test_build_rejects_layers_it_cannot_place(case, d):
    with pytest.raises(BadValue):
        build(d)


# ------------------------------------------------------------------- (i) recompute
RECOMPUTE_BASES = [
    {"ipv4": {"options": "01010100"}, "udp": {}, "bth": {"opcode": "RC_RDMA_WRITE_ONLY"},
     "reth": {"va": 5}, "payload": {"data": "0102030405"}},
    {"vlan": [{"vid": 7}], "ipv6": {}, "udp": {"checksum": "auto"},
     "bth": {"opcode": "UD_SEND_ONLY"}, "deth": {}, "payload": {"data": "0102030405"}},
    {"ipv4": {}, "udp": {"dport": 9999}, "payload": {"data": "0102030405"}},
]


@pytest.mark.parametrize("base", RECOMPUTE_BASES, ids=["rc-write-v4-opts", "ud-v6", "udp"])
@pytest.mark.parametrize("new_len", [0, 1, 37, 300])
def test_recompute_fixes_stale_fields(base, new_len):
    old = dissect(build(base))
    assert old.problems == []
    d = old.to_dict()
    d["payload"] = {"data": "ee" * new_len, "length": new_len}
    if "ipv4" in d:
        d["ipv4"]["ttl"] = 3
    stale = dissect(build(d))
    assert stale.problems  # lengths/checksums/ICRC copied from the old frame are wrong
    fixed = build(d, recompute=True)
    f = dissect(fixed)
    assert f.problems == []
    if "bth" in f:
        assert f["icrc"]["valid"] is True
        assert f["bth"]["pad_count"] == -new_len % 4
    if new_len:
        assert f["payload"]["data"] == "ee" * new_len
    if "ipv4" in f:
        hlen = f["ipv4"]["ihl"] * 4
        assert f["ipv4"]["ttl"] == 3
        assert f["ipv4"]["total_length"] == hlen + f["udp"]["length"]
        assert ipv4_checksum(fixed[14:14 + hlen]) == f["ipv4"]["checksum"]
    else:
        assert f["ipv6"]["payload_length"] == f["udp"]["length"]
    if "bth" in f:
        ext = sum(EXT_SPECS[h].size_bytes for h in EXT_HEADERS[f["bth"]["opcode"]][1])
        assert f["udp"]["length"] == 8 + 12 + ext + new_len + -new_len % 4 + 4
    else:
        assert f["udp"]["length"] == 8 + new_len
    # An RoCE UDP checksum stays 0 (as NICs send it); a non-zero one is recomputed.
    assert (f["udp"]["checksum"] == 0) == (old["udp"]["checksum"] == 0)

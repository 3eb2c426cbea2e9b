"""ECN marking (RFC 3168) on RoCEv2 frames and PFC/PAUSE (IEEE 802.1Qbb, 802.3 Annex 31B):
codepoints, in-place CE marking that keeps the IPv4 checksum and the ICRC valid, pause quanta
to time by formula, and the MAC Control decoder's checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import ROCE_FRAMES, unhex
from wire.ecn import Ecn, ecn_capable, get_ecn, ip_offset, mark_ce, set_ecn
from wire.ipv4 import ipv4_checksum
from wire.pfc import (
    MacControlOpcode,
    ps_to_quanta,
    quanta_to_ns,
    quanta_to_ps,
)
from wire.stack import build, dissect

ROCE_IDS = [i for i, _f in ROCE_FRAMES]
G = 10**9


def ip_version_and_offset(frame: bytes) -> tuple[int, int]:
    d = dissect(frame)
    return (4 if "ipv4" in d else 6), 14 + 4 * len(d.get("vlan", []))


# =============================================================================== ECN
def test_codepoints():
    assert [int(e) for e in (Ecn.NOT_ECT, Ecn.ECT1, Ecn.ECT0, Ecn.CE)] == [0, 1, 2, 3]
    assert not ecn_capable(Ecn.NOT_ECT)
    assert all(ecn_capable(e) for e in (Ecn.ECT0, Ecn.ECT1, Ecn.CE))


@pytest.mark.parametrize("start", [Ecn.ECT0, Ecn.ECT1, Ecn.CE])
@pytest.mark.parametrize(("fid", "frame"), ROCE_FRAMES, ids=ROCE_IDS)
def test_mark_ce_keeps_checksum_and_icrc(fid, frame, start):
    version, ip = ip_version_and_offset(frame)
    f = bytearray(frame)
    assert set_ecn(f, start) is True
    before = bytes(f)
    assert mark_ce(f) is True
    assert get_ecn(f) == Ecn.CE
    d = dissect(bytes(f))
    assert d.problems == []
    assert d["icrc"]["valid"] is True  # TOS / traffic class are masked in the ICRC
    layer = d["ipv4" if version == 4 else "ipv6"]
    assert layer["ecn"] == 3 and layer["dscp"] == 26
    changed = {i for i in range(len(f)) if f[i] != before[i]}
    allowed = {ip + 1, ip + 10, ip + 11} if version == 4 else {ip + 1}
    assert changed <= allowed
    if version == 4:
        assert ipv4_checksum(f[ip:ip + 20]) == int.from_bytes(f[ip + 10:ip + 12], "big")
        assert d["ipv4"]["checksum_ok"] is True
    if start == Ecn.CE:
        assert not changed  # already CE: nothing to do


@pytest.mark.parametrize(("fid", "frame"), ROCE_FRAMES, ids=ROCE_IDS)
def test_not_ect_is_never_marked(fid, frame):
    f = bytearray(frame)
    set_ecn(f, Ecn.NOT_ECT)
    before = bytes(f)
    assert get_ecn(f) == Ecn.NOT_ECT
    assert mark_ce(f) is False
    assert bytes(f) == before
    d = dissect(before)
    assert d.problems == [] and d["icrc"]["valid"] is True


@pytest.mark.parametrize("tpids", [[], [0x8100], [0x88A8, 0x8100], [0x9100, 0x8100, 0x8100]])
@pytest.mark.parametrize("ip", ["ipv4", "ipv6"])
def test_mark_through_vlan_tags(tpids, ip):
    frame = build({"vlan": [{"tpid": t, "vid": 5 + i} for i, t in enumerate(tpids)],
                   ip: {"dscp": 46, "ecn": 1}, "udp": {}, "bth": {}, "payload": {"data": "aa"}})
    assert ip_offset(frame) == (14 + 4 * len(tpids), 4 if ip == "ipv4" else 6)
    f = bytearray(frame)
    assert get_ecn(f) == Ecn.ECT1
    assert mark_ce(f)
    d = dissect(bytes(f))
    assert d[ip]["ecn"] == 3 and d[ip]["dscp"] == 46
    assert d.problems == [] and d["icrc"]["valid"] is True
    assert [t["vid"] for t in d.get("vlan", [])] == [5 + i for i in range(len(tpids))]


def test_ipv6_traffic_class_bits():
    """ECN is bits 1..0 of the traffic class: byte 1, bits 5..4, of the IPv6 header."""
    f = bytearray(build({"ipv6": {"dscp": 0x3F, "ecn": 0, "flow_label": 0xFFFFF}, "udp": {},
                         "bth": {}}))
    for ecn in (1, 2, 3, 0):
        set_ecn(f, ecn)
        assert f[15] == 0xC0 | ecn << 4 | 0x0F  # TC low nibble (DSCP 2 bits, ECN) | flow
        d = dissect(bytes(f))
        assert (d["ipv6"]["ecn"], d["ipv6"]["dscp"], d["ipv6"]["flow_label"]) == (ecn, 0x3F,
                                                                                   0xFFFFF)
        assert d["icrc"]["valid"] is True


@pytest.mark.parametrize("name", ["pfc", "pause", "arp", "ipv4-cut", "ipv6-cut", "empty"])
def test_non_ip_frames_untouched(name):
    frames = {
        "pfc": build({"pfc": {"quanta": [1] * 8}}),
        "pause": build({"pause": {"quanta": 3}}),
        "arp": build({"eth": {"type": 0x0806}, "raw": "0001080006040001"}),
        "ipv4-cut": build({"ipv4": {"ecn": 2}, "udp": {}, "bth": {}})[:14 + 19],
        "ipv6-cut": build({"ipv6": {"ecn": 2}, "udp": {}, "bth": {}})[:14 + 39],
        "empty": b"",
    }
    f = bytearray(frames[name])
    assert get_ecn(f) is None
    assert ip_offset(f) is None
    assert set_ecn(f, Ecn.CE) is False
    assert mark_ce(f) is False
    assert bytes(f) == frames[name]


ipv4_headers = st.builds(
    lambda tos, rest, opts: bytes([0x45 + len(opts) // 4, tos]) + rest + opts,
    st.integers(0, 255), st.binary(min_size=18, max_size=18),
    st.sampled_from([b"", b"\x01\x01\x01\x00", b"\x94\x04\x00\x00" * 2]))


@given(ipv4_headers, st.integers(0, 3))
def test_set_ecn_ipv4_checksum_property(header, ecn):
    """RFC 1624 incremental update == full recomputation, for any header and codepoint."""
    h = bytearray(header)
    h[10:12] = ipv4_checksum(h).to_bytes(2, "big")
    f = bytearray(unhex("020000000002 020000000001 0800")) + h
    assert set_ecn(f, ecn)
    out = f[14:]
    assert out[1] == (header[1] & 0xFC) | ecn
    assert ipv4_checksum(out) == int.from_bytes(out[10:12], "big")
    assert out[:1] + out[2:10] + out[12:] == h[:1] + h[2:10] + h[12:]


@given(ipv4_headers, st.integers(0, 3), st.integers(1, 0xFFFF))
def test_set_ecn_keeps_a_wrong_checksum_wrong(header, ecn, error):
    h = bytearray(header)
    good = ipv4_checksum(h)
    bad = good ^ error
    if {good, bad} == {0x0000, 0xFFFF}:
        return  # +0 and -0: the same one's-complement value
    h[10:12] = bad.to_bytes(2, "big")
    f = bytearray(14) + h
    f[12:14] = b"\x08\x00"
    set_ecn(f, ecn)
    assert ipv4_checksum(f[14:]) != int.from_bytes(f[24:26], "big")


@given(st.binary(max_size=80), st.integers(0, 3))
def test_ecn_functions_never_raise(frame, ecn):
    f = bytearray(frame)
    get_ecn(f)
    set_ecn(f, ecn)
    mark_ce(f)
    assert len(f) == len(frame)


# =============================================================================== PFC
@pytest.mark.parametrize(("rate_gbps", "ps_per_quantum"), [
    (1, 512_000),      # 512 ns (Scapy's pause-time table says half of that)
    (10, 51_200),
    (25, 20_480),
    (40, 12_800),
    (50, 10_240),
    (100, 5_120),
    (200, 2_560),
    (400, 1_280),
    (800, 640),
    (1600, 320),
])
def test_quanta_to_ps_exact(rate_gbps, ps_per_quantum):
    rate = rate_gbps * G
    assert quanta_to_ps(1, rate) == ps_per_quantum
    assert quanta_to_ps(0, rate) == 0
    assert quanta_to_ps(0xFFFF, rate) == 0xFFFF * ps_per_quantum
    assert quanta_to_ns(1000, rate) == 1000 * ps_per_quantum // 1000
    assert ps_to_quanta(ps_per_quantum, rate) == 1
    assert ps_to_quanta(ps_per_quantum + 1, rate) == 2
    assert ps_to_quanta(0xFFFF * ps_per_quantum, rate) == 0xFFFF


def test_one_gigabit_quantum_is_512_ns():
    assert quanta_to_ns(1, 1 * G) == 512
    assert quanta_to_ns(0xFFFF, 1 * G) == 0xFFFF * 512  # 33.55 ms


def test_rounding_up_never_ends_early():
    assert quanta_to_ps(1, 3) == -(-512 * 10**12 // 3)
    assert quanta_to_ns(1, 100 * G) == 6  # 5.12 ns rounded up
    assert quanta_to_ns(0xFFFF, 100 * G) == 335_540  # 335539.2 ns


def test_ps_to_quanta_caps_at_16_bits():
    assert ps_to_quanta(10**15, 100 * G) == 0xFFFF
    assert ps_to_quanta(0, 100 * G) == 0


rates = st.one_of(st.sampled_from([1, 10, 25, 40, 50, 100, 200, 400, 800]).map(lambda g: g * G),
                  st.integers(1, 2 * 10**12))


@given(rates, st.data())
def test_ps_to_quanta_inverse(rate, data):
    x = data.draw(st.integers(0, quanta_to_ps(0xFFFF, rate)))
    q = ps_to_quanta(x, rate)
    assert 0 <= q <= 0xFFFF
    assert quanta_to_ps(q, rate) >= x
    # The smallest such count, in exact arithmetic: q - 1 quanta last less than x ps.
    assert q == 0 or (q - 1) * 512 * 10**12 < x * rate


@given(st.sampled_from([1, 10, 25, 40, 50, 100, 200, 400, 800, 1600]), st.integers(0, 0xFFFF))
def test_quanta_round_trip_at_standard_rates(gbps, q):
    """Exact at standard rates; elsewhere quanta_to_ps rounds up, so q + 1 may come back."""
    assert ps_to_quanta(quanta_to_ps(q, gbps * G), gbps * G) == q


@pytest.mark.parametrize("fn", [quanta_to_ps, ps_to_quanta])
@pytest.mark.parametrize("rate", [0, -100 * G])
def test_bad_rate(fn, rate):
    with pytest.raises(ValueError):
        fn(1, rate)


@pytest.mark.parametrize("rate", [0, -100 * G])
def test_quanta_to_ns_bad_rate(rate):
    with pytest.raises(ValueError):
        quanta_to_ns(1, rate)


# ------------------------------------------------------------------ PFC / PAUSE frames
@pytest.mark.parametrize("prio", range(8))
def test_class_enable_bit_n_is_priority_n(prio):
    quanta = [0] * 8
    quanta[prio] = 0x1234
    f = build({"pfc": {"class_enable": 1 << prio, "quanta": quanta}})
    assert f[12:16] == unhex("8808 0101")
    assert f[16:18] == (1 << prio).to_bytes(2, "big")
    assert f[18 + 2 * prio:20 + 2 * prio] == unhex("1234")
    assert len(f) == 60 and f[34:] == bytes(26)
    d = dissect(f)
    assert d.problems == [] and d["pfc"]["class_enable"] == 1 << prio
    assert d["pfc"]["quanta"] == quanta


def test_times_of_disabled_classes_are_kept():
    q = [0xFFFF, 1, 2, 3, 4, 5, 6, 7]
    f = build({"pfc": {"class_enable": 0x01, "quanta": q}})
    d = dissect(f)
    assert d["pfc"]["quanta"] == q and d["pfc"]["class_enable"] == 1 and d.problems == []
    assert build(d.to_dict()) == f


def test_xon_is_zero_quanta_on_an_enabled_class():
    f = build({"pfc": {"class_enable": 0x08, "quanta": [0] * 8}})
    d = dissect(f)
    assert d["pfc"]["class_enable"] == 0x08 and d["pfc"]["quanta"][3] == 0
    assert d.problems == []


def test_class_enable_derived_from_quanta():
    d = dissect(build({"pfc": {"quanta": [0, 5, 0, 0, 0, 0, 0, 7]}}))
    assert d["pfc"]["class_enable"] == 0b1000_0010


@pytest.mark.parametrize("high", [0x01, 0x80, 0xFF])
def test_reserved_high_byte_is_a_problem(high):
    f = build({"pfc": {"class_enable": high << 8 | 0x01, "quanta": [9] * 8}})
    d = dissect(f)
    assert [p for p in d.problems if p.startswith("pfc.class_enable")], d.problems
    assert f"0x{high:02x}" in d.problems[0]
    assert build(d.to_dict()) == f


@pytest.mark.parametrize("kind", ["pfc", "pause"])
@pytest.mark.parametrize("dst", ["01:80:c2:00:00:02", "ff:ff:ff:ff:ff:ff", "02:00:00:00:00:01"])
def test_wrong_destination_mac_is_a_problem(kind, dst):
    f = build({"eth": {"dst": dst}, kind: {"quanta": 1}})
    d = dissect(f)
    assert [p for p in d.problems if p.startswith("eth.dst")], d.problems
    assert dst in d.problems[0]
    assert d[kind]["quanta"] in (1, [1] * 8)
    assert build(d.to_dict()) == f


@pytest.mark.parametrize("opcode", [0x0000, 0x0002, 0x0003, 0x0100, 0x0102, 0xFFFF])
def test_unknown_mac_control_opcode_kept_raw(opcode):
    body = bytes(range(44))
    f = unhex("0180c2000001 0002c9aabbcc 8808") + opcode.to_bytes(2, "big") + body
    d = dissect(f)
    assert d["mac_control"]["opcode"] == opcode
    assert "pfc" not in d and "pause" not in d
    assert d.raw == body and d.problems == []
    assert build(d.to_dict()) == f
    assert opcode not in {int(m) for m in MacControlOpcode}


def test_pause_frame():
    f = build({"pause": {"quanta": 0x1234}})
    assert f == unhex("0180c2000001 020000000001 8808 0001 1234") + bytes(42)
    d = dissect(f)
    assert d["mac_control"]["opcode"] == MacControlOpcode.PAUSE
    assert d["pause"]["quanta"] == 0x1234 and d.trailer == bytes(42) and d.problems == []


@pytest.mark.parametrize("kind", ["pfc", "pause"])
def test_truncated_mac_control(kind):
    f = build({kind: {"quanta": 7}})
    hdr_end = 34 if kind == "pfc" else 18
    for k in range(14, hdr_end):
        d = dissect(f[:k])
        assert d.problems, k
        assert build(d.to_dict()) == f[:k]
        d = dissect(f[:k], orig_len=len(f))
        assert d.problems == [], k
        assert build(d.to_dict())[:k] == f[:k]


def test_nonzero_mac_control_padding_round_trips():
    f = build({"pfc": {"class_enable": 1, "quanta": [1, 0, 0, 0, 0, 0, 0, 0]},
               "trailer": "ab" * 26})
    d = dissect(f)
    assert d.trailer == b"\xab" * 26
    assert build(d.to_dict()) == f

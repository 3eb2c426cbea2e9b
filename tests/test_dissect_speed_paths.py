"""The cheaper ``wire.dissect`` (fast path, lazy checks) gives what it gave, on every path.

* The fast path (untagged Ethernet + IPv4 + UDP + BTH, one ``struct.unpack_from``) and the
  general path agree on every committed pcap record (whole and cut at every byte, with and
  without a snaplen), every :mod:`wire.strategies` strategy and mutated frames: problems,
  layer names, every layer in any order of access, raw/trailer/cut and ``to_dict()``.
* The checksums and the ICRC are checked when ``problems`` (or the layer showing the result)
  is first read, once; a bad ICRC or IPv4 checksum is still reported.
* The helpers made faster (``spec.stack_getter``, ``ipv4_checksum``, ``icrc_state``) equal
  their definitions.
* ``lossless decode`` prints what it printed before (``tests/data/decode_before``: recorded
  with the commit before this change, d96bae0, on pcaps/ and pcaps/ib/).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from pathlib import Path

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import wire.stack as stack
from wire import build, dissect, read
from wire.bth import BTH
from wire.checksum import internet_checksum
from wire.ethernet import ETHERNET, VLAN_TAG, EtherType
from wire.ipv4 import IPV4, ipv4_checksum, ipv4_checksum_ok
from wire.ipv6 import IPV6
from wire.roce import icrc, icrc_ipv4_ok, icrc_state
from wire.spec import stack_getter
from wire.strategies import frames, scaleup_frames
from wire.udp import UDP

ROOT = Path(__file__).resolve().parent.parent
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap")) + sorted((ROOT / "pcaps" / "ib").glob("*.pcap"))
BEFORE = Path(__file__).resolve().parent / "data" / "decode_before"


def _general(frame: bytes, orig_len: int | None = None, **kw) -> stack.Decoded:
    ports = frozenset(kw.get("roce_ports", stack.ROCE_PORTS))
    return stack._dissect(bytes(frame), len(frame) if orig_len is None else orig_len, ports,
                          kw.get("scaleup", stack.DEFAULT_SCALEUP))


def _same(a: stack.Decoded, b: stack.Decoded, access: int, problems_first: bool) -> None:
    if problems_first:
        assert a.problems == b.problems
    assert a.names == b.names
    names = b.names
    if names:  # one layer first: the result must not depend on the order of access
        first = names[access % len(names)]
        assert a[first] == b[first]
    for name in names:
        x, y = a[name], b[name]
        assert type(x) is type(y) and x == y, name
        if not isinstance(x, list):
            assert x.name == y.name and list(x) == list(y), name
    assert a.problems == b.problems
    assert (a.raw, a.trailer, a.cut, a.caplen, a.orig_len) == (
        b.raw, b.trailer, b.cut, b.caplen, b.orig_len)
    assert json.dumps(a.to_dict()) == json.dumps(b.to_dict())


def _check(frame: bytes, orig_len: int | None = None, access: int = 0, **kw) -> bool:
    """dissect() (fast path when it applies) == the general path; True if the fast path
    decoded it."""
    frame = bytes(frame)
    d = dissect(frame, orig_len, **kw)
    fast = stack._roce4_untouched(d) is not None
    _same(d, _general(frame, orig_len, **kw), access, access % 2 == 0)
    return fast


@pytest.mark.parametrize("path", PCAPS, ids=lambda p: p.name)
def test_fast_and_general_paths_agree_on_pcaps(path: Path) -> None:
    for i, rec in enumerate(read(path)):
        if rec.linktype != 1:
            continue
        data = bytes(rec.data)
        _check(data, rec.orig_len, i)
        for cut in range(len(data)):
            _check(data[:cut], None, cut)
            _check(data[:cut], len(data), cut)


def test_the_fast_path_is_taken() -> None:
    # else the comparisons above prove nothing about it
    taken = [_check(bytes(r.data), r.orig_len) for p in PCAPS for r in read(p)
             if r.linktype == 1]
    assert sum(taken) >= 10
    roce = build({"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_RDMA_WRITE_FIRST"},
                  "reth": {"va": 7}, "payload": {"length": 100}})
    assert _check(roce)
    d = dissect(roce)
    assert all(type(v) is stack._Lazy for v in d._layers.values())
    assert d.names == ["eth", "ipv4", "udp", "bth", "reth", "payload", "icrc"]


@given(frames(), st.data())
def test_strategy_frames(frame: bytes, data) -> None:
    _check(frame, access=data.draw(st.integers(0, 30)))
    n = data.draw(st.integers(0, len(frame)))
    _check(frame[:n], data.draw(st.sampled_from([None, len(frame)])),
           access=data.draw(st.integers(0, 30)))


@given(frames(kinds=["roce"]), st.integers(0, 0xFFFF), st.integers(0, 30))
def test_roce_frames_other_ports(frame: bytes, port: int, access: int) -> None:
    _check(frame, access=access)
    _check(frame, access=access, roce_ports={4791, port})
    _check(frame, access=access, roce_ports=frozenset({port}))


@given(scaleup_frames(), st.integers(0, 30))
def test_scaleup_frames(frame: bytes, access: int) -> None:
    _check(frame, access=access)


@st.composite
def _mutated_roce(draw) -> bytes:
    """RoCEv2 frames with one field of the fast path's stack set to anything (lengths,
    version, IHL, flags, protocol, port, opcode, PadCnt, checksums, EtherType)."""
    data = bytearray(draw(frames(kinds=["roce"])))
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(12, min(len(data), 58) - 1))
        kind = draw(st.sampled_from(["byte", "u16", "flip"]))
        if kind == "byte":
            data[at] = draw(st.integers(0, 255))
        elif kind == "u16":
            data[at:at + 2] = draw(st.integers(0, 0xFFFF)).to_bytes(2, "big")
        else:
            data[at] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


@given(_mutated_roce(), st.sampled_from([None, 0, 1, 64]), st.integers(0, 30))
def test_mutated_roce_frames(frame: bytes, extra: int | None, access: int) -> None:
    _check(frame, None if extra is None else len(frame) + extra, access)


# ------------------------------------------------------------------ deferred checks
def _roce(**bth) -> bytes:
    return build({"ipv4": {"ecn": 2}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY", **bth},
                  "payload": {"length": 256}})


def _counting(monkeypatch) -> dict[str, int]:
    calls = {"icrc": 0, "ipv4": 0}

    def icrc_state_counted(*a):
        calls["icrc"] += 1
        return icrc_state(*a)

    def icrc_ok_counted(*a):  # the fast path's test of a frame whose checks all pass
        calls["icrc"] += 1
        return icrc_ipv4_ok(*a)

    def ipv4_counted(*a):
        calls["ipv4"] += 1
        return ipv4_checksum(*a)

    monkeypatch.setattr(stack, "icrc_state", icrc_state_counted)
    monkeypatch.setattr(stack, "icrc_ipv4_ok", icrc_ok_counted)
    monkeypatch.setattr(stack, "ipv4_checksum", ipv4_counted)
    return calls


_CSUM_AT = IPV4.byte_field("checksum")[0]


@st.composite
def _ip_headers(draw) -> bytes:
    """Headers of every length around an IPv4 header's, mostly with a right checksum, some
    zero but for it, some with 0xFFFF or 0 in it (where a sum alone cannot tell)."""
    n = draw(st.sampled_from([_CSUM_AT + 2, 20, 20, 21, 24, 60]))
    h = bytearray(draw(st.binary(min_size=n, max_size=n)) if draw(st.booleans()) else bytes(n))
    kind = draw(st.sampled_from(["right", "right", "any", "ffff", "zero"]))
    if kind == "right":
        h[_CSUM_AT:_CSUM_AT + 2] = ipv4_checksum(h).to_bytes(2, "big")
    elif kind in ("ffff", "zero"):
        h[_CSUM_AT:_CSUM_AT + 2] = b"\xff\xff" if kind == "ffff" else b"\0\0"
    return bytes(h)


@given(_ip_headers())
def test_ipv4_checksum_ok_is_the_computed_test(header: bytes) -> None:
    # the cheap test (a right header sums to 0 modulo 0xFFFF) says what computing says
    field = int.from_bytes(header[_CSUM_AT:_CSUM_AT + 2], "big")
    assert ipv4_checksum_ok(header, field) is (ipv4_checksum(header) == field)


def _right_checksum_zero() -> bytes:
    """A fast-path frame whose right IPv4 header checksum is 0x0000 (an id chosen for it)."""
    for ident in range(1 << 16):
        f = _roce(psn=3)
        ip = f[ETHERNET.size_bytes:ETHERNET.size_bytes + IPV4.size_bytes]
        at, _, _ = IPV4.byte_field("id")
        h = bytearray(ip)
        h[at:at + 2] = ident.to_bytes(2, "big")
        if ipv4_checksum(h) == 0:
            return build({"ipv4": {"ecn": 2, "id": ident}, "udp": {},
                          "bth": {"opcode": "RC_SEND_ONLY", "psn": 3},
                          "payload": {"length": 256}})
    raise AssertionError("no id gives a zero checksum")


@pytest.mark.parametrize("field", [0x0000, 0xFFFF])
def test_a_checksum_of_0xffff_in_place_of_0_is_reported(field: int) -> None:
    # 0x0000 and 0xFFFF both make the header sum to 0 modulo 0xFFFF; only 0x0000 is right
    # here, and the fast path's one test of a clean frame must not take 0xFFFF for it
    frame = bytearray(_right_checksum_zero())
    at = ETHERNET.size_bytes + _CSUM_AT
    frame[at:at + 2] = field.to_bytes(2, "big")
    d = dissect(bytes(frame))
    assert stack._roce4_untouched(d) is not None  # the fast path took it
    assert d.problems == _general(bytes(frame)).problems
    assert bool(d.problems) is (field == 0xFFFF)
    assert d["ipv4"]["checksum_ok"] is (field == 0)


_ROCE4_IP = stack_getter((ETHERNET, ("type",)), (IPV4, ("ihl", "total_length")))


@given(st.data())
def test_icrc_ipv4_ok_is_the_computed_test(data) -> None:
    frame = bytearray(data.draw(frames(kinds=["roce"])))
    etype, ihl, total = _ROCE4_IP(frame)
    ip, udp = ETHERNET.size_bytes, ETHERNET.size_bytes + IPV4.size_bytes
    end = ip + total
    assume(etype == EtherType.IPV4 and ihl * 4 == IPV4.size_bytes)  # IPv4 without options only
    assume(end <= len(frame) and end - udp >= UDP.size_bytes + BTH.size_bytes + 4)
    if data.draw(st.booleans()):  # any byte of the datagram, the ICRC's included, changed
        at = data.draw(st.integers(ip, end - 1))
        frame[at] ^= 1 << data.draw(st.integers(0, 7))
    f = bytes(frame)
    right = icrc(f[ip:udp], f[udp:end - 4]) == int.from_bytes(f[end - 4:end], "little")
    assert icrc_ipv4_ok(f, ip, end) is right


@pytest.mark.parametrize("path", ["fast", "general"])
def test_checks_wait_until_problems_are_read(monkeypatch, path: str) -> None:
    frame = _roce(psn=5)
    calls = _counting(monkeypatch)
    d = dissect(frame) if path == "fast" else _general(frame)
    assert d["bth"].psn == 5 and d["payload"]["length"] == 256 and d["udp"].dport == 4791
    assert calls == {"icrc": 0, "ipv4": 0}   # nothing read needed them
    assert d.problems == []
    # the fast path's test of a clean frame sums the IPv4 header inline (not ipv4_checksum)
    ran = {"icrc": 1, "ipv4": 0 if path == "fast" else 1}
    assert calls == ran
    assert d["icrc"]["valid"] is True and d["ipv4"]["checksum_ok"] is True
    d.to_dict()
    assert calls == ran   # each ran once


@pytest.mark.parametrize("path", ["fast", "general"])
def test_bad_icrc_and_ipv4_checksum_reported(monkeypatch, path: str) -> None:
    good = bytearray(_roce(psn=9))
    good[-1] ^= 0x40                                   # the ICRC's last byte
    csum, _, _ = IPV4.byte_field("checksum")
    good[14 + csum] ^= 0x01                            # the IPv4 header checksum
    frame = bytes(good)
    for layer_first in (False, True):
        calls = _counting(monkeypatch)
        d = dissect(frame) if path == "fast" else _general(frame)
        if layer_first:  # the layer showing a check's result runs it; problems reuses it
            assert d["icrc"]["valid"] is False and d["ipv4"]["checksum_ok"] is False
            assert calls == {"icrc": 1, "ipv4": 1}
        assert [p.split(":")[0] for p in d.problems] == ["ipv4.checksum", "icrc"]
        assert "on the wire" in d.problems[1] and d.to_dict()["icrc"]["valid"] is False
        assert calls == {"icrc": 1, "ipv4": 1}
        assert d.problems == _general(frame).problems
        assert build(d.to_dict()) == frame


def test_problems_list_is_live_and_settable() -> None:
    d = dissect(_roce())
    d.problems.append("mine")
    assert d.problems == ["mine"] and d.to_dict()["problems"] == ["mine"]
    d.problems = ["other"]
    assert d.problems == ["other"]


# ------------------------------------------------------------ the faster helpers
_SPECS = (ETHERNET, VLAN_TAG, IPV4, IPV6, UDP, BTH)


@given(st.lists(st.sampled_from(_SPECS), min_size=1, max_size=4), st.data())
def test_stack_getter_matches_each_spec(specs, data) -> None:
    parts, want = [], []
    for spec in specs:
        scalars = [f.name for f in spec.fields if f.count == 1]
        names = data.draw(st.lists(st.sampled_from(scalars), unique=True, max_size=6))
        parts.append((spec, tuple(names)))
        want.append(names)
    total = sum(s.size_bytes for s in specs)
    off = data.draw(st.integers(0, 5))
    buf = data.draw(st.binary(min_size=off + total, max_size=off + total + 8))
    got = stack_getter(*parts)(buf, off)
    expect, at = [], off
    for spec, names in zip(specs, want, strict=True):
        raw = spec.unpack_raw(buf, at)
        expect += [raw[n] for n in names]
        at += spec.size_bytes
    assert got == tuple(expect)


def _ipv4_checksum_by_definition(header: bytes) -> int:
    h = bytearray(header)
    h[10:12] = b"\0\0"
    return internet_checksum(h)


@given(st.one_of(st.binary(max_size=64), st.binary(min_size=20, max_size=20),
                 st.integers(0, 64).map(lambda n: b"\xff" * n)))
def test_ipv4_checksum_is_the_definition(header: bytes) -> None:
    assert ipv4_checksum(header) == _ipv4_checksum_by_definition(header)
    assert ipv4_checksum(bytearray(header)) == ipv4_checksum(header)


def _icrc_by_definition(ip: bytes, udp: bytes) -> int:
    # IBA Annex A17.8, literally: pseudo-LRH of ones, then the masked headers and the rest
    ip, udp = bytearray(ip), bytearray(udp)
    if ip[0] >> 4 == 4:
        ip[1] = ip[8] = ip[10] = ip[11] = 0xFF
    else:
        ip[0] |= 0x0F
        ip[1] = ip[2] = ip[3] = ip[7] = 0xFF
    udp[6] = udp[7] = udp[12] = 0xFF
    return zlib.crc32(b"\xff" * 8 + ip + udp)


@given(st.sampled_from([4, 6]), st.integers(0, 10), st.binary(min_size=13, max_size=80),
       st.binary(min_size=40, max_size=60))
def test_icrc_is_the_definition(version: int, words: int, udp: bytes, raw_ip: bytes) -> None:
    if version == 4:
        ip = bytes([0x40 | (5 + words) & 0xF]) + raw_ip[1:20] + raw_ip[:4 * words][:40]
    else:
        ip = bytes([0x60 | raw_ip[0] & 0xF]) + raw_ip[1:40]
    assert icrc(ip, udp) == _icrc_by_definition(ip, udp)
    assert zlib.crc32(udp[13:], icrc_state(memoryview(ip), udp[:13])) == icrc(ip, udp)


# --------------------------------------------------------- lossless decode's output
def _summaries_agree(frame: bytes, orig_len: int | None = None, ts_ns: int = 1) -> None:
    from wire.stats import summary_line

    n = len(frame) if orig_len is None else orig_len
    want = summary_line(3, ts_ns, _general(frame, orig_len), n)
    assert summary_line(3, ts_ns, dissect(frame, orig_len), n) == want
    d = dissect(frame, orig_len)  # a layer read first: the general summary of it
    if d.names:
        d[d.names[-1]]
    assert summary_line(3, ts_ns, d, n) == want


@given(st.one_of(frames(), frames(kinds=["roce"]), _mutated_roce()), st.integers(0, 2**63))
def test_summary_of_fast_path_frames(frame: bytes, ts_ns: int) -> None:
    _summaries_agree(frame, ts_ns=ts_ns)


def test_summary_of_pcap_records_and_edited_frames() -> None:
    for p in PCAPS:
        for r in read(p):
            if r.linktype == 1:
                _summaries_agree(bytes(r.data), r.orig_len, r.ts_ns)
    from wire.stats import summary_line

    frame = _roce(psn=3)
    d = dissect(frame)
    d.layers["pfc"] = stack.Layer("pfc", {"class_enable": 1, "quanta": [5] + [0] * 7})
    assert summary_line(0, 0, d, len(frame)).split()[6] == "PFC"  # the added layer is shown
    d = dissect(frame)
    del d.layers["icrc"]
    assert "payload=256" in summary_line(0, 0, d, len(frame))


@pytest.mark.parametrize("path", PCAPS, ids=lambda p: p.name)
def test_decode_output_unchanged(path: Path, capsys) -> None:
    from sim.cli import main

    rcs = {"broken": 1, "pfc_pause": 1, "scaleup": 1, "ib_erf": 1, "ib_native": 1}
    for flag, suffix in (([], ".txt"), (["-v"], ".v.txt")):
        rc = main(["decode", *flag, str(path)])
        out, _ = capsys.readouterr()
        assert rc == rcs.get(path.stem, 0)
        assert out == (BEFORE / f"{path.stem}{suffix}").read_text()
    rc = main(["decode", "-f", "jsonl", str(path)])
    out, _ = capsys.readouterr()
    assert hashlib.sha256(out.encode()).hexdigest() == (
        BEFORE / f"{path.stem}.jsonl.sha256").read_text().strip()


def test_records_made_by_the_reader_are_records() -> None:
    import dataclasses

    from wire.pcapio import Record, _make_record

    r = _make_record(5, b"ab", 7, 1, 0)
    assert r == Record(5, b"ab", 7, 1, 0) and type(r) is Record and r.options == b""
    assert _make_record(5, b"ab", 7, 1, 2, b"o") == Record(5, b"ab", 7, 1, 2, b"o")
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.ts_ns = 1  # type: ignore[misc]
    recs = list(read(PCAPS[0]))
    assert all(type(x) is Record for x in recs)


def test_decode_batches_stdout_but_keeps_order_with_stderr(tmp_path, capfd) -> None:
    # a capture cut inside a record: the records before it are printed before the error
    import subprocess
    import sys

    src = (ROOT / "pcaps" / "roce_rc.pcap").read_bytes()
    bad = tmp_path / "cut.pcap"
    bad.write_bytes(src[:-5])
    p = subprocess.run([sys.executable, "-m", "sim", "decode", str(bad)], cwd=ROOT,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = p.stdout.splitlines()
    assert p.returncode == 2 and lines[-1].startswith("lossless: ") and len(lines) > 2
    assert all(not x.startswith("lossless: ") for x in lines[:-1])

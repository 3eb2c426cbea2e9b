"""Tests for :mod:`wire.pcapio`, the pcap/pcapng reader and writer.

Byte vectors are built here with ``struct.pack``, independently of the
writer.  External referees: tshark (``require_tshark()``), scapy and dpkt.
"""

from __future__ import annotations

import io
import itertools
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import tracemalloc
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire.errors import BadMagic, CaptureError, TruncatedFile
from wire.pcapio import CaptureReader, CaptureWriter, Record, read, write

NS = 1_000_000_000
PCAP_MAX_TS_NS = (1 << 32) * NS - 1  # last instant classic pcap (32-bit seconds) can hold
MAGIC_US = 0xA1B2C3D4
MAGIC_NS = 0xA1B23C4D


# --- independent byte builders ------------------------------------------------------------
def pcap_bytes(e: str, magic: int, records, *, snaplen: int = 65535, linktype: int = 1,
               major: int = 2, minor: int = 4) -> bytes:
    """Classic pcap; ``records`` are (seconds, fraction, data, orig_len)."""
    out = [struct.pack(e + "IHHiIII", magic, major, minor, 0, 0, snaplen, linktype)]
    for sec, frac, data, orig in records:
        out.append(struct.pack(e + "IIII", sec, frac, len(data), orig) + data)
    return b"".join(out)


def pad4(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) & 3)


def block(e: str, block_type: int, body: bytes) -> bytes:
    body = pad4(body)
    total = 12 + len(body)
    return struct.pack(e + "II", block_type, total) + body + struct.pack(e + "I", total)


def opt(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + pad4(value)


def opts(e: str, *items: bytes) -> bytes:
    return b"".join(items) + struct.pack(e + "HH", 0, 0)


def shb(e: str, major: int = 1, minor: int = 0, options: bytes = b"") -> bytes:
    return block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, major, minor, -1) + options)


def idb(e: str, linktype: int, snaplen: int = 0, options: bytes = b"") -> bytes:
    return block(e, 1, struct.pack(e + "HHI", linktype, 0, snaplen) + options)


def epb(e: str, iface: int, ts: int, data: bytes, orig: int | None = None,
        options: bytes = b"") -> bytes:
    orig = len(data) if orig is None else orig
    fixed = struct.pack(e + "IIIII", iface, ts >> 32, ts & 0xFFFFFFFF, len(data), orig)
    return block(e, 6, fixed + pad4(data) + options)


def spb(e: str, orig: int, data: bytes) -> bytes:
    return block(e, 3, struct.pack(e + "I", orig) + pad4(data))


def packet_block(e: str, iface: int, ts: int, data: bytes, orig: int | None = None) -> bytes:
    orig = len(data) if orig is None else orig
    fixed = struct.pack(e + "HHIIII", iface, 0, ts >> 32, ts & 0xFFFFFFFF, len(data), orig)
    return block(e, 2, fixed + pad4(data))


def read_all(source, **kw) -> list[Record]:
    return list(read(source, **kw))


def read_until_error(blob: bytes, **kw) -> tuple[list[Record], CaptureError | None]:
    """Records yielded before the first error, and that error (None if clean)."""
    got: list[Record] = []
    try:
        with CaptureReader(io.BytesIO(blob), **kw) as reader:
            for rec in reader:
                got.append(rec)
    except CaptureError as exc:
        return got, exc
    return got, None


def roundtrip(records, **kw) -> list[Record]:
    buf = io.BytesIO()
    assert write(buf, records, **kw) == len(records)
    buf.seek(0)
    return read_all(buf)


# --- strategies ---------------------------------------------------------------------------
def records_strategy(max_ts: int, linktypes=None, interfaces=None, ts_step: int = 1):
    linktypes = st.just(1) if linktypes is None else linktypes
    interfaces = st.just(0) if interfaces is None else interfaces
    rec = st.builds(
        lambda ts, data, extra, lt, iface: Record(ts * ts_step, data, len(data) + extra, lt,
                                                  iface),
        st.integers(0, max_ts // ts_step),
        st.binary(max_size=300),
        st.one_of(st.just(0), st.integers(0, 70000)),
        linktypes,
        interfaces,
    )
    return st.lists(rec, max_size=20)


def key(rec: Record) -> tuple[int, bytes, int, int]:
    return rec.ts_ns, rec.data, rec.orig_len, rec.linktype


# --- round trips --------------------------------------------------------------------------
@given(records_strategy(PCAP_MAX_TS_NS), st.sampled_from([1, 101, 228, 0xFFFF]))
def test_roundtrip_pcap_ns(records, linktype):
    records = [Record(r.ts_ns, r.data, r.orig_len, linktype) for r in records]
    assert roundtrip(records, linktype=linktype) == records


@given(records_strategy(PCAP_MAX_TS_NS, ts_step=1000))
def test_roundtrip_pcap_us_exact_for_whole_microseconds(records):
    assert roundtrip(records, nanosecond=False) == records


@given(st.lists(st.integers(0, PCAP_MAX_TS_NS), max_size=10))
def test_pcap_us_floors_nanoseconds(stamps):
    records = [Record(ts, b"x", 1) for ts in stamps]
    back = roundtrip(records, nanosecond=False)
    assert [r.ts_ns for r in back] == [ts // 1000 * 1000 for ts in stamps]


@given(records_strategy(2**63, linktypes=st.sampled_from([1, 101, 147]),
                        interfaces=st.integers(0, 3)))
def test_roundtrip_pcapng(records):
    back = roundtrip(records, format="pcapng")
    assert [key(r) for r in back] == [key(r) for r in records]
    # Output interface ids: order of first appearance of (interface, linktype).
    ids: dict[tuple[int, int], int] = {}
    for rec in records:
        ids.setdefault((rec.interface, rec.linktype), len(ids))
    assert [r.interface for r in back] == [ids[(r.interface, r.linktype)] for r in records]


@given(records_strategy(2**63), st.sampled_from([1, 101]))
def test_roundtrip_pcapng_exact_records_single_interface(records, linktype):
    records = [Record(r.ts_ns, r.data, r.orig_len, linktype) for r in records]
    assert roundtrip(records, format="pcapng") == records


@settings(max_examples=15, suppress_health_check=[HealthCheck.too_slow])
@given(records_strategy(PCAP_MAX_TS_NS), st.sampled_from(["pcap", "pcapng"]))
def test_roundtrip_through_files(records, fmt):
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "capture.bin")
        assert write(path, records, format=fmt) == len(records)
        assert read_all(path) == records
        with CaptureReader(path) as reader:
            assert reader.format == fmt
            assert reader.path == path


@given(records_strategy(2**63))
def test_roundtrip_pcapng_microseconds(records):
    back = roundtrip(records, format="pcapng", nanosecond=False)
    assert [r.ts_ns for r in back] == [r.ts_ns // 1000 * 1000 for r in records]


def test_writer_snaplen_truncates_and_keeps_orig_len():
    for fmt in ("pcap", "pcapng"):
        buf = io.BytesIO()
        with CaptureWriter(buf, format=fmt, snaplen=10) as w:
            w.write(b"0123456789abcdef", ts_ns=5)
            w.write(Record(6, b"012", 3))
        buf.seek(0)
        with CaptureReader(buf) as r:
            assert r.snaplen == 10
            assert list(r) == [Record(5, b"0123456789", 16), Record(6, b"012", 3)]


def test_writer_raw_bytes_and_counts():
    buf = io.BytesIO()
    w = CaptureWriter(buf, linktype=101)
    w.write(b"\x45" + bytes(19), ts_ns=123, orig_len=40)
    w.write(bytearray(b"ab"), 124)
    assert w.records_written == 2
    w.close()
    w.close()  # idempotent
    assert not buf.closed  # a caller's file object is not closed
    buf.seek(0)
    assert read_all(buf) == [Record(123, b"\x45" + bytes(19), 40, 101),
                             Record(124, b"ab", 2, 101)]


def test_writer_rejects_bad_input():
    w = CaptureWriter(io.BytesIO())
    with pytest.raises(ValueError, match="negative"):
        w.write(Record(-1, b"", 0))
    with pytest.raises(ValueError, match="linktype"):
        w.write(Record(0, b"", 0, linktype=105))
    with pytest.raises(ValueError, match="32-bit"):
        w.write(Record(PCAP_MAX_TS_NS + 1, b"", 0))
    with pytest.raises(TypeError):
        w.write(Record(1.5, b"", 0))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        w.write(b"abc")  # raw bytes need ts_ns
    with pytest.raises(TypeError):
        w.write(Record(0, b"", 0), ts_ns=5)
    with pytest.raises(ValueError):
        w.write(Record(0, b"", -1))
    assert w.records_written == 0
    w.write(Record(PCAP_MAX_TS_NS, b"", 0))
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.write(Record(0, b"", 0))
    with pytest.raises(ValueError):
        CaptureWriter(io.BytesIO(), format="pcapng2")
    with pytest.raises(ValueError):
        CaptureWriter(io.BytesIO(), linktype=70000)
    ng = CaptureWriter(io.BytesIO(), format="pcapng")
    with pytest.raises(ValueError, match="negative"):
        ng.write(Record(-5, b"", 0))
    with pytest.raises(ValueError, match="64-bit"):
        ng.write(Record(1 << 64, b"", 0))


def test_writer_pcap_header_bytes():
    buf = io.BytesIO()
    CaptureWriter(buf, snaplen=1234, linktype=228).close()
    assert buf.getvalue() == struct.pack("<IHHiIII", MAGIC_NS, 2, 4, 0, 0, 1234, 228)
    buf = io.BytesIO()
    CaptureWriter(buf, nanosecond=False).close()
    assert struct.unpack_from("<I", buf.getvalue())[0] == MAGIC_US


def test_writer_pcapng_layout():
    buf = io.BytesIO()
    with CaptureWriter(buf, format="pcapng") as w:
        w.write(Record(NS + 5, b"abcde", 9))
    blob = buf.getvalue()
    assert blob[:28] == shb("<")
    tsresol = opts("<", opt("<", 9, b"\x09"))
    assert blob[28:60] == idb("<", 1, 262144, tsresol)
    assert blob[60:] == epb("<", 0, NS + 5, b"abcde", 9)


def test_empty_pcapng_still_declares_linktype():
    buf = io.BytesIO()
    CaptureWriter(buf, format="pcapng", linktype=101).close()
    buf.seek(0)
    with CaptureReader(buf) as r:
        assert r.linktype == 101
        assert list(r) == []


def test_write_infers_linktype_from_first_record():
    recs = [Record(1, b"\x45", 1, 101), Record(2, b"\x45", 1, 101)]
    assert roundtrip(recs) == recs
    assert roundtrip([]) == []


# --- hand-built vectors -------------------------------------------------------------------
def test_big_endian_microsecond_pcap():
    blob = pcap_bytes(">", MAGIC_US, [(1_700_000_000, 999_999, b"\x01\x02\x03", 60),
                                      (0, 0, b"", 0)], snaplen=96, linktype=101)
    with CaptureReader(io.BytesIO(blob)) as r:
        assert (r.format, r.byte_order, r.version, r.linktype, r.snaplen) == \
            ("pcap", "big", (2, 4), 101, 96)
        assert r.ts_resolution_ns == 1000
        assert r.ts_units_per_second == 1_000_000
        assert list(r) == [Record(1_700_000_000_999_999_000, b"\x01\x02\x03", 60, 101),
                           Record(0, b"", 0, 101)]
        assert r.records_read == 2
        assert r.warnings == []


def test_little_endian_nanosecond_pcap():
    blob = pcap_bytes("<", MAGIC_NS, [(0xFFFFFFFF, 999_999_999, b"abc", 3),
                                      (5, 1, bytes(range(256)), 1514)])
    with CaptureReader(io.BytesIO(blob)) as r:
        assert (r.format, r.byte_order, r.ts_resolution_ns) == ("pcap", "little", 1)
        assert list(r) == [Record(PCAP_MAX_TS_NS, b"abc", 3),
                           Record(5 * NS + 1, bytes(range(256)), 1514)]


def test_big_endian_nanosecond_and_little_endian_microsecond_pcap():
    for e, magic, scale in ((">", MAGIC_NS, 1), ("<", MAGIC_US, 1000)):
        blob = pcap_bytes(e, magic, [(7, 42, b"x", 1)])
        assert read_all(io.BytesIO(blob)) == [Record(7 * NS + 42 * scale, b"x", 1)]


def test_pcap_linktype_upper_bits_ignored():
    blob = pcap_bytes("<", MAGIC_NS, [(1, 2, b"x", 1)], linktype=0x1400_0001)
    assert read_all(io.BytesIO(blob)) == [Record(NS + 2, b"x", 1, 1)]


def test_pcapng_big_endian_two_sections_three_interfaces():
    be = ">"
    base2 = opts(be, opt(be, 9, bytes([0x80 | 20])), opt(be, 14, struct.pack(">q", 1_600_000_000)))
    section1 = b"".join([
        shb(be, options=opts(be, opt(be, 1, b"a comment"))),
        idb(be, 1, 65535, opts(be, opt(be, 2, b"eth0"), opt(be, 9, b"\x06"))),
        idb(be, 101, 0, opts(be, opt(be, 9, b"\x09"))),
        idb(be, 228, 128, base2),
        epb(be, 0, 1_700_000_000_123_456, b"usec"),           # µs units
        epb(be, 1, 1_700_000_000_123_456_789, b"nsec", 100),  # ns units
        epb(be, 2, 3, b"base2"),                              # 2**-20 s units
        epb(be, 2, (5 << 20) + 1, b"b2", options=opts(be, opt(be, 2, b"\x00\x00\x00\x01"))),
    ])
    le = "<"
    section2 = b"".join([
        shb(le),
        idb(le, 105, 0, opts(le, opt(le, 9, bytes([12])))),  # picoseconds
        idb(le, 1),                                          # default µs
        epb(le, 0, 1_234_567_891_234, b"ps"),
        epb(le, 1, 42, b"default"),
    ])
    with CaptureReader(io.BytesIO(section1 + section2)) as r:
        assert (r.format, r.byte_order, r.version) == ("pcapng", "big", (1, 0))
        assert (r.linktype, r.snaplen, r.ts_units_per_second) == (1, 65535, 1_000_000)
        got = list(r)
    base2_offset = 1_600_000_000 * NS
    assert got == [
        Record(1_700_000_000_123_456_000, b"usec", 4, 1, 0),
        Record(1_700_000_000_123_456_789, b"nsec", 100, 101, 1),
        Record(base2_offset + 3 * NS // 2**20, b"base2", 5, 228, 2),  # floor(2861.02...)
        Record(base2_offset + 5 * NS + NS // 2**20, b"b2", 2, 228, 2),
        Record(1_234_567_891, b"ps", 2, 105, 0),  # floor of 1234.567891234 ms
        Record(42_000, b"default", 7, 1, 1),
    ]
    assert got[2].ts_ns == base2_offset + 2861


def test_pcapng_simple_packet_blocks_and_skipped_blocks():
    e = "<"
    blob = b"".join([
        shb(e),
        block(e, 4, struct.pack("<HH", 0, 0)),             # Name Resolution Block
        idb(e, 1, 64, opts(e, opt(e, 9, b"\x09"))),
        spb(e, 100, bytes(range(64))),                     # cut to snaplen 64
        block(e, 0x00000BAD, b"\x00\x00\x7e\xd9custom"),   # Custom Block
        spb(e, 5, b"hello"),                               # padded to 8 bytes in the block
        block(e, 5, struct.pack("<IIIHH", 0, 0, 0, 0, 0)),  # Interface Statistics Block
        block(e, 0x0000000A, b"TLSK" + bytes(4)),          # Decryption Secrets Block
        block(e, 0x80001234, b"local use"),                # reserved-for-local-use type
        spb(e, 0, b""),
        epb(e, 0, 77, b"epb"),
    ])
    with CaptureReader(io.BytesIO(blob)) as r:
        got = list(r)
        assert r.warnings and "no timestamp" in r.warnings[0][1]
    assert got == [Record(0, bytes(range(64)), 100), Record(0, b"hello", 5),
                   Record(0, b"", 0), Record(77, b"epb", 3)]


def test_pcapng_spb_with_unlimited_snaplen():
    e = ">"
    blob = shb(e) + idb(e, 1, 0) + spb(e, 3, b"abc")
    assert read_all(io.BytesIO(blob)) == [Record(0, b"abc", 3)]


def test_pcapng_obsolete_packet_block():
    e = "<"
    blob = shb(e) + idb(e, 1, 0, opts(e, opt(e, 9, b"\x09"))) + packet_block(e, 0, 99, b"old")
    assert read_all(io.BytesIO(blob)) == [Record(99, b"old", 3)]


def test_pcapng_interface_ids_restart_per_section():
    e = "<"
    blob = (shb(e) + idb(e, 1) + idb(e, 101) + epb(e, 1, 1, b"a")
            + shb(e) + idb(e, 105) + epb(e, 0, 2, b"b"))
    assert read_all(io.BytesIO(blob)) == [Record(1000, b"a", 1, 101, 1),
                                          Record(2000, b"b", 1, 105, 0)]
    bad = shb(e) + idb(e, 1) + idb(e, 101) + shb(e) + idb(e, 105) + epb(e, 1, 0, b"x")
    got, exc = read_until_error(bad)
    assert got == []
    assert exc is not None and exc.field == "interface_id"


def test_zero_length_records():
    blob = pcap_bytes("<", MAGIC_NS, [(1, 0, b"", 0), (2, 0, b"", 64)])
    assert read_all(io.BytesIO(blob)) == [Record(NS, b"", 0), Record(2 * NS, b"", 64)]
    e = "<"
    blob = shb(e) + idb(e, 1) + epb(e, 0, 1, b"")
    assert read_all(io.BytesIO(blob)) == [Record(1000, b"", 0)]


def test_format_comes_from_magic_not_file_name(tmp_path):
    path = tmp_path / "looks_like.pcap"
    write(path, [Record(1, b"a", 1)], format="pcapng")
    with CaptureReader(path) as r:
        assert r.format == "pcapng"
        assert list(r) == [Record(1, b"a", 1)]
    path = tmp_path / "looks_like.pcapng"
    write(path, [Record(1, b"a", 1)])
    with CaptureReader(path) as r:
        assert r.format == "pcap"


def test_pcapng_without_interfaces():
    with CaptureReader(io.BytesIO(shb("<"))) as r:
        assert r.linktype is None
        assert r.ts_resolution_ns is None
        assert list(r) == []


# --- truncation at every byte offset -------------------------------------------------------
def check_every_cut(blob: bytes, header_len: int, record_ends: list[int],
                    other_boundaries: list[int], expected: list[Record]) -> None:
    boundaries = {header_len, *record_ends, *other_boundaries}
    for cut in range(len(blob) + 1):
        piece = blob[:cut]
        if cut < header_len:
            with pytest.raises(CaptureError) as info:
                CaptureReader(io.BytesIO(piece))
            assert info.value.record is None
            if cut == 0:
                assert isinstance(info.value, BadMagic)
            else:
                assert isinstance(info.value, TruncatedFile)
            continue
        got, exc = read_until_error(piece)
        complete = sum(1 for end in record_ends if end <= cut)
        assert got == expected[:complete], cut
        if cut in boundaries:
            assert exc is None, (cut, exc)
        else:
            assert isinstance(exc, TruncatedFile), (cut, exc)
            assert exc.record == complete


def test_truncation_at_every_offset_pcap():
    records = [(1, 500, b"first!", 6), (2, 0, b"", 10), (3, 999, bytes(range(37)), 37)]
    blob = pcap_bytes("<", MAGIC_US, records)
    ends = list(itertools.accumulate([24] + [16 + len(r[2]) for r in records]))[1:]
    expected = [Record(s * NS + f * 1000, d, o) for s, f, d, o in records]
    check_every_cut(blob, 24, ends, [], expected)


def test_truncation_at_every_offset_pcapng():
    e = "<"
    parts = [
        (shb(e, options=opts(e, opt(e, 4, b"lossless"))), None),
        (idb(e, 1, 0, opts(e, opt(e, 9, b"\x09"))), None),
        (epb(e, 0, 5, b"abcde", options=opts(e, opt(e, 1, b"hi"))), Record(5, b"abcde", 5)),
        (block(e, 4, b"\x00" * 8), None),
        (spb(e, 3, b"xyz"), Record(0, b"xyz", 3)),
        (idb(e, 101), None),
        (packet_block(e, 1, 7, b"pb!"), Record(7000, b"pb!", 3, 101, 1)),
        (shb(">"), None),
        (idb(">", 1), None),
        (epb(">", 0, 9, b""), Record(9000, b"", 0)),
    ]
    blob = b"".join(p for p, _ in parts)
    ends = list(itertools.accumulate(len(p) for p, _ in parts))
    record_ends = [end for end, (_, rec) in zip(ends, parts, strict=True) if rec is not None]
    expected = [rec for _, rec in parts if rec is not None]
    check_every_cut(blob, ends[0], record_ends, ends, expected)


def test_truncation_messages():
    blob = pcap_bytes("<", MAGIC_NS, [(1, 0, b"a" * 100, 100)])
    got, exc = read_until_error(blob[:-40])
    assert got == []
    assert isinstance(exc, TruncatedFile)
    assert (exc.record, exc.offset, exc.field) == (0, 24, "data")
    assert "incl_len is 100" in str(exc) and "only 60 bytes" in str(exc)
    got, exc = read_until_error(blob[:30])
    assert isinstance(exc, TruncatedFile) and exc.field == "record_header"
    with pytest.raises(TruncatedFile) as info:
        CaptureReader(io.BytesIO(blob[:18]))
    assert info.value.field == "snaplen"
    with pytest.raises(TruncatedFile):
        CaptureReader(io.BytesIO(blob[:2]))


# --- corrupt input --------------------------------------------------------------------------
def test_absurd_incl_len_is_not_allocated():
    blob = (pcap_bytes("<", MAGIC_NS, [(1, 0, b"good", 4)])
            + struct.pack("<IIII", 2, 0, 0x7FFFFFFF, 0x7FFFFFFF) + b"\0" * 64)
    tracemalloc.start()
    try:
        got, exc = read_until_error(blob)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 1024 * 1024
    assert got == [Record(NS, b"good", 4)]
    assert isinstance(exc, CaptureError)
    assert (exc.record, exc.offset, exc.field) == (1, 24 + 16 + 4, "incl_len")
    assert "2147483647" in str(exc)


def test_absurd_captured_len_pcapng_is_not_allocated():
    e = "<"
    huge = struct.pack("<IIIIIII", 6, 0x80000020, 0, 0, 1, 0x7FFFFFFF, 0x7FFFFFFF)
    blob = shb(e) + idb(e, 1, 0) + epb(e, 0, 1, b"ok") + huge + b"\0" * 64
    tracemalloc.start()
    try:
        got, exc = read_until_error(blob)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 10 * 1024 * 1024
    assert got == [Record(1000, b"ok", 2)]
    assert exc is not None and (exc.record, exc.field) == (1, "captured_len")


def test_record_limits():
    big = b"z" * 300_000
    # above 262144 is fine when the file's snaplen allows it...
    blob = pcap_bytes("<", MAGIC_NS, [(1, 0, big, len(big))], snaplen=1 << 20)
    assert read_all(io.BytesIO(blob)) == [Record(NS, big, len(big))]
    # ...but not beyond max_record_bytes,
    got, exc = read_until_error(blob, max_record_bytes=100_000)
    assert got == [] and exc is not None and exc.field == "incl_len"
    # nor beyond 262144 when snaplen is smaller.
    blob = pcap_bytes("<", MAGIC_NS, [(1, 0, big, len(big))], snaplen=65535)
    got, exc = read_until_error(blob)
    assert exc is not None and exc.field == "incl_len"


def test_incl_len_above_orig_len_is_tolerated_with_warning():
    blob = pcap_bytes("<", MAGIC_NS, [(1, 0, b"ok", 2), (2, 0, b"longer", 3)])
    with CaptureReader(io.BytesIO(blob)) as r:
        assert list(r) == [Record(NS, b"ok", 2), Record(2 * NS, b"longer", 3)]
        assert len(r.warnings) == 1
        index, message = r.warnings[0]
        assert index == 1 and "orig_len" in message


def test_bad_magic_names_path(tmp_path):
    path = tmp_path / "notes.pcap"
    path.write_bytes(b"hello, world, this is text\n")
    with pytest.raises(BadMagic) as info:
        CaptureReader(path)
    assert str(path) in str(info.value)
    assert info.value.path == str(path) and info.value.field == "magic"
    with pytest.raises(BadMagic, match="gzip"):
        CaptureReader(io.BytesIO(b"\x1f\x8b\x08\x00" + bytes(40)))
    with pytest.raises(BadMagic):  # also through the generator
        read_all(path)


def test_empty_file_is_an_error_naming_path(tmp_path):
    path = tmp_path / "empty.pcap"
    path.write_bytes(b"")
    with pytest.raises(BadMagic, match="empty file") as info:
        CaptureReader(path)
    assert info.value.path == str(path)
    assert str(path) in str(info.value)
    with pytest.raises(BadMagic, match="empty file"):
        CaptureReader(io.BytesIO())


def test_unknown_versions():
    blob = pcap_bytes("<", MAGIC_NS, [], major=3)
    with pytest.raises(CaptureError) as info:
        CaptureReader(io.BytesIO(blob))
    assert info.value.field == "version_major"
    with pytest.raises(CaptureError) as info:
        CaptureReader(io.BytesIO(shb("<", major=2)))
    assert info.value.field == "major_version"
    # a later section with an unknown version: the earlier records survive
    e = "<"
    blob = shb(e) + idb(e, 1) + epb(e, 0, 1, b"a") + shb(e, major=2) + idb(e, 1)
    got, exc = read_until_error(blob)
    assert got == [Record(1000, b"a", 1)]
    assert exc is not None and (exc.record, exc.field) == (1, "major_version")


def test_pcapng_bad_byte_order_magic():
    blob = bytearray(shb("<"))
    blob[8:12] = b"\xde\xad\xbe\xef"
    with pytest.raises(BadMagic) as info:
        CaptureReader(io.BytesIO(bytes(blob)))
    assert info.value.field == "byte_order_magic"


def pcapng_prefix() -> bytes:
    return shb("<") + idb("<", 1) + epb("<", 0, 1, b"good")


@pytest.mark.parametrize(("tail", "field"), [
    (struct.pack("<II", 0x0BAD, 14) + b"\0" * 10, "block_total_length"),   # not a multiple of 4
    (struct.pack("<II", 0x0BAD, 8) + b"\0" * 8, "block_total_length"),     # below 12
    (struct.pack("<II", 6, 28) + b"\0" * 24, "block_total_length"),        # EPB below 32
    (struct.pack("<III", 0x0BAD, 12, 16), "trailing_block_total_length"),  # mismatched copy
    (epb("<", 0, 2, b"abcd")[:-4] + struct.pack("<I", 99), "trailing_block_total_length"),
    (epb("<", 7, 2, b"abcd"), "interface_id"),                              # undeclared
    (block("<", 6, struct.pack("<IIIII", 0, 0, 0, 100, 100) + b"\0" * 8), "captured_len"),
    (block("<", 1, struct.pack("<HHI", 1, 0, 0) + opt("<", 9, b"\x06\x06")), "if_tsresol"),
    (block("<", 1, struct.pack("<HHI", 1, 0, 0) + opt("<", 14, b"\x01")), "if_tsoffset"),
    (block("<", 1, struct.pack("<HHI", 1, 0, 0) + struct.pack("<HH", 2, 40)), "options"),
])
def test_pcapng_corrupt_blocks(tail, field):
    got, exc = read_until_error(pcapng_prefix() + tail + epb("<", 0, 3, b"never"))
    assert got == [Record(1000, b"good", 4)]
    assert isinstance(exc, CaptureError)
    assert exc.field == field
    assert exc.record == 1
    assert exc.offset == len(pcapng_prefix())
    assert "<stream>" in str(exc)


def test_pcapng_large_options_are_streamed():
    e = "<"
    big_comment = opts(e, opt(e, 1, b"c" * 40_000), opt(e, 1, b"d" * 40_000))
    blob = shb(e) + idb(e, 1) + epb(e, 0, 1, b"data", options=big_comment) + epb(e, 0, 2, b"x")
    assert read_all(io.BytesIO(blob)) == [Record(1000, b"data", 4), Record(2000, b"x", 1)]
    cut = len(shb(e) + idb(e, 1)) + 28 + 4 + 30_000
    got, exc = read_until_error(blob[:cut])
    assert got == [] and isinstance(exc, TruncatedFile) and exc.field == "options"


def test_pcapng_absurd_interface_description_block():
    blob = pcapng_prefix() + struct.pack("<II", 1, 0x0200_0000) + bytes(64)
    got, exc = read_until_error(blob)
    assert len(got) == 1
    assert exc is not None and exc.field == "block_total_length" and "absurd" in str(exc)


def test_text_stream_is_refused():
    with pytest.raises(TypeError, match="binary"):
        CaptureReader(io.StringIO("\xd4\xc3\xb2\xa1 and more text"))


def test_pcapng_error_before_first_interface_is_raised_on_iteration():
    blob = shb("<") + struct.pack("<II", 0x0BAD, 13)
    reader = CaptureReader(io.BytesIO(blob))  # the file header itself is fine
    with pytest.raises(CaptureError) as info:
        list(reader)
    assert (info.value.record, info.value.field) == (0, "block_total_length")
    spb_first = shb("<") + spb("<", 1, b"a")
    got, exc = read_until_error(spb_first)
    assert got == [] and exc is not None and exc.field == "interface_id"


MUTATION_BASES = [
    pcap_bytes("<", MAGIC_US, [(1, 2, b"abc", 3), (4, 5, b"defgh", 9), (6, 7, b"", 0)]),
    pcap_bytes(">", MAGIC_NS, [(1, 2, b"abc", 3), (4, 5, b"defgh", 9)]),
    b"".join([
        shb("<"), idb("<", 1, 64, opts("<", opt("<", 9, b"\x89"), opt("<", 14, bytes(8)))),
        epb("<", 0, 5, b"abcde"), spb("<", 3, b"xyz"), block("<", 4, bytes(8)),
        packet_block("<", 0, 1, b"pb"), shb(">"), idb(">", 105), epb(">", 0, 9, b"12"),
    ]),
]


@settings(max_examples=300)
@given(st.sampled_from(MUTATION_BASES),
       st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=6),
       st.integers(0, 10_000))
def test_mutated_files_only_raise_capture_error(base, mutations, cut):
    blob = bytearray(base)
    for pos, value in mutations:
        blob[pos % len(blob)] = value
    blob = bytes(blob[: cut % (len(blob) + 1)] if cut % 3 == 0 else blob)
    got: list[Record] = []
    try:
        with CaptureReader(io.BytesIO(blob), max_record_bytes=1 << 16) as reader:
            got.extend(reader)
    except CaptureError:
        pass
    assert all(isinstance(r.data, bytes) and isinstance(r.ts_ns, int) for r in got)


@given(st.sampled_from([b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a", b""]),
       st.binary(max_size=200))
def test_random_bytes_only_raise_capture_error(magic, rest):
    try:
        read_all(io.BytesIO(magic + rest), max_record_bytes=1 << 16)
    except CaptureError:
        pass


# --- streams --------------------------------------------------------------------------------
class Trickle(io.RawIOBase):
    """A non-seekable stream that returns at most 3 bytes per read()."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._pos = 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        n = len(self._data) if n < 0 else min(n, 3)
        chunk = self._data[self._pos:self._pos + n]
        self._pos += len(chunk)
        return chunk


def sample_records() -> list[Record]:
    return [Record(i * 1_000_000_007, bytes([i]) * (i * 13 % 200), i * 13 % 200 + i, 1)
            for i in range(50)]


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_short_reads(fmt):
    records = sample_records()
    buf = io.BytesIO()
    write(buf, records, format=fmt)
    assert read_all(Trickle(buf.getvalue())) == records
    got, exc = [], None
    try:
        got.extend(read(Trickle(buf.getvalue()[:-3])))
    except TruncatedFile as err:
        exc = err
    assert got == records[:-1] and exc is not None


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("buffering", [0, -1])
def test_read_from_os_pipe(fmt, buffering):
    records = sample_records()
    buf = io.BytesIO()
    write(buf, records, format=fmt)
    blob = buf.getvalue()
    rfd, wfd = os.pipe()

    def feed() -> None:
        with os.fdopen(wfd, "wb", buffering=0) as out:
            for i in range(0, len(blob), 97):  # odd chunks: reads come back short
                out.write(blob[i:i + 97])

    thread = threading.Thread(target=feed)
    thread.start()
    try:
        with os.fdopen(rfd, "rb", buffering=buffering) as stream:
            with CaptureReader(stream) as reader:
                assert reader.format == fmt
                assert reader.path == "<stream>"
                assert list(reader) == records
            assert not stream.closed  # the reader leaves a caller's stream open
    finally:
        thread.join()


def test_read_from_subprocess_stdout(tmp_path):
    records = sample_records()
    path = tmp_path / "in.pcapng"
    write(path, records, format="pcapng")
    code = "import sys, shutil; shutil.copyfileobj(open(sys.argv[1], 'rb'), sys.stdout.buffer)"
    with subprocess.Popen([sys.executable, "-c", code, str(path)],
                          stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        assert read_all(proc.stdout) == records
    assert proc.returncode == 0


def test_streaming_does_not_read_ahead():
    """An endless stream still yields its first records (nothing reads to EOF)."""

    class Endless(io.RawIOBase):
        def __init__(self) -> None:
            header = struct.pack("<IHHiIII", MAGIC_NS, 2, 4, 0, 0, 65535, 1)
            self._pending = bytearray(header)
            self._count = 0

        def readable(self) -> bool:
            return True

        def readinto(self, buffer) -> int:
            while len(self._pending) < len(buffer):
                self._pending += struct.pack("<IIII", self._count, 0, 4, 4) + b"data"
                self._count += 1
            n = len(buffer)
            buffer[:n] = self._pending[:n]
            del self._pending[:n]
            return n

    stream = io.BufferedReader(Endless())
    first = list(itertools.islice(read(stream), 5))
    assert first == [Record(i * NS, b"data", 4) for i in range(5)]


def test_reader_lifecycle(tmp_path):
    path = tmp_path / "c.pcap"
    write(path, [Record(1, b"a", 1), Record(2, b"b", 1)])
    reader = CaptureReader(path)
    assert next(reader) == Record(1, b"a", 1)
    assert reader.records_read == 1
    assert list(reader) == [Record(2, b"b", 1)]  # one shared stream position
    reader.close()
    reader.close()
    assert reader._fp.closed
    with pytest.raises(ValueError):
        iter(reader)
    with pytest.raises(TypeError):
        CaptureReader(b"\xd4\xc3\xb2\xa1")  # raw bytes are refused
    with pytest.raises(ValueError):
        CaptureReader(path, max_record_bytes=0)
    assert "c.pcap" in repr(CaptureReader(path))


# --- independent referees --------------------------------------------------------------------
def require_tshark() -> str:
    """Path of tshark; skip without it, unless LOSSLESS_REQUIRE_TSHARK=1 (then fail)."""
    path = shutil.which("tshark")
    if path is None:
        if os.environ.get("LOSSLESS_REQUIRE_TSHARK") == "1":
            pytest.fail("tshark is required (LOSSLESS_REQUIRE_TSHARK=1) but was not found")
        pytest.skip("tshark not installed")
    return path


def tshark_fields(path) -> list[str]:
    tshark = require_tshark()
    done = subprocess.run(
        [tshark, "-n", "-r", str(path), "-T", "fields", "-e", "frame.time_epoch",
         "-e", "frame.len", "-e", "frame.cap_len"],
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def epoch_string(ts_ns: int) -> str:
    return f"{ts_ns // NS}.{ts_ns % NS:09d}"


def referee_records() -> list[Record]:
    stamps = [0, 1, 999, 999_999_999, NS, 1_700_000_000_123_456_789, PCAP_MAX_TS_NS,
              1_234_567_890_000_000_001, 86_400 * NS + 500]
    return [Record(ts, bytes([i % 256]) * (i * 37 % 300), i * 37 % 300 + (i % 3) * 1000,
                   1 if i % 2 else 101, i % 2)
            for i, ts in enumerate(stamps)]


@pytest.mark.parametrize(("fmt", "nanosecond"),
                         [("pcap", True), ("pcap", False), ("pcapng", True), ("pcapng", False)])
def test_tshark_reads_our_files(tmp_path, fmt, nanosecond):
    records = referee_records()
    if fmt == "pcap":
        records = [Record(r.ts_ns, r.data, r.orig_len) for r in records]
    path = tmp_path / f"ours.{fmt}"
    write(path, records, format=fmt, nanosecond=nanosecond, snaplen=200)
    unit = 1 if nanosecond else 1000
    expected = [f"{epoch_string(r.ts_ns // unit * unit)}\t{r.orig_len}\t{min(len(r.data), 200)}"
                for r in records]
    assert tshark_fields(path) == expected


def test_scapy_files():
    scapy_utils = pytest.importorskip("scapy.utils")
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    stamps = ["1700000000.123456", "0.000001", "4294967295.999999", "86400.5"]
    packets = []
    for i, stamp in enumerate(stamps):
        pkt = Ether() / IP(dst="10.0.0.1") / UDP(dport=4791) / Raw(bytes([i]) * (i * 40))
        pkt.time = scapy_utils.EDecimal(stamp)
        packets.append(pkt)
    expected = [Record(int(Decimal(s) * NS), bytes(p), len(bytes(p))) for s, p in
                zip(stamps, packets, strict=True)]
    with tempfile.TemporaryDirectory() as tmp:
        for name, kwargs in (("us.pcap", {}), ("ns.pcap", {"nano": True})):
            path = os.path.join(tmp, name)
            scapy_utils.wrpcap(path, packets, **kwargs)
            assert read_all(path) == expected
        path = os.path.join(tmp, "s.pcapng")
        writer = scapy_utils.PcapNgWriter(path)
        for pkt in packets:
            writer.write(pkt)
        writer.close()
        with CaptureReader(path) as reader:
            assert reader.format == "pcapng"
            assert list(reader) == expected
        # and scapy reads what we write
        ours = os.path.join(tmp, "ours.pcapng")
        write(ours, expected, format="pcapng")
        assert [bytes(p) for p in scapy_utils.rdpcap(ours)] == [r.data for r in expected]


def test_dpkt_files():
    dpkt = pytest.importorskip("dpkt")
    stamps = [1_700_000_000.25, 0.5, 2.125, 4_294_967_295.75]
    payloads = [bytes([i]) * (i * 50) for i in range(len(stamps))]
    expected = [Record(int(Decimal(ts) * NS), data, len(data)) for ts, data in
                zip(stamps, payloads, strict=True)]
    for make in (lambda f: dpkt.pcap.Writer(f, snaplen=65535),
                 lambda f: dpkt.pcap.Writer(f, snaplen=65535, nano=True),
                 lambda f: dpkt.pcapng.Writer(f, snaplen=65535)):
        buf = io.BytesIO()
        writer = make(buf)
        for ts, data in zip(stamps, payloads, strict=True):
            writer.writepkt(data, ts=ts)
        buf.seek(0)
        assert read_all(buf) == expected
    # and dpkt reads what we write
    buf = io.BytesIO()
    write(buf, expected, nanosecond=False)
    buf.seek(0)
    assert [(round(ts * 4), data) for ts, data in dpkt.pcap.Reader(buf)] == \
        [(r.ts_ns * 4 // NS, r.data) for r in expected]

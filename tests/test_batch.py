"""Tests for :mod:`wire.batch`: every column equals what :func:`wire.dissect` shows, on the
reference captures and on Hypothesis-generated files (valid frames, frames cut by a snaplen,
cut without one, with flipped bytes, random bytes, other link types), through both readers
(classic pcap fast path, pcapng/stream path) and across chunk boundaries."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire import batch, build, dissect
from wire import strategies as ws
from wire.errors import CaptureError, TruncatedFile
from wire.pcapio import Record, read, write
from wire.spec import parse_value
from wire.stats import STATS_FIELDS, CaptureStats, _clean_mac_control, _clean_roce
from wire.udp import UDP

_ROCE = build({"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
               "payload": {"length": 64}})
PCAPS = sorted((Path(__file__).resolve().parent.parent / "pcaps").glob("*.pcap"))


def _expected_raw(f, v):
    if v is None:
        return -1
    return parse_value(f, v)


def check_against_dissect(cols: batch.Columns, records: list[Record], **kw) -> None:
    """Every column of every row equals dissect's view of that record."""
    assert cols.rows == len(records)
    for name, arr in cols.items():
        assert len(arr) == cols.rows, name
    for i, rec in enumerate(records):
        assert cols["ts_ns"][i] == rec.ts_ns
        assert cols["caplen"][i] == len(rec.data)
        assert cols["orig_len"][i] == rec.orig_len
        assert cols["linktype"][i] == rec.linktype
        assert cols["interface"][i] == rec.interface
        if rec.linktype == 1:
            d = dissect(rec.data, rec.orig_len, **kw)
            layers = d.layers
        else:
            layers = {}
        where = f"record {i} ({rec.data.hex()}, orig_len {rec.orig_len})"
        for layer in batch.LAYERS:
            assert bool(cols[f"has.{layer}"][i]) == (layer in layers), f"{where}: has.{layer}"
        bth = layers.get("bth")
        assert bool(cols["cnp"][i]) == (bth is not None and bth["opcode"] == 0x81), where
        assert cols["vlan.count"][i] == len(layers.get("vlan", [])), where
        for prefix, spec in batch.BATCH_SPECS.items():
            got = layers.get(prefix)
            if prefix == "vlan" and got is not None:
                got = got[0]
            for f in spec.fields:
                key = f"{prefix}.{f.name}"
                if key not in cols:
                    continue
                v = cols[key][i]
                if got is None:
                    if f.bits > 64:
                        assert not v.any(), f"{where}: {key}"
                    else:
                        assert np.all(v == -1), f"{where}: {key} = {v}"
                    continue
                if f.bits > 64:
                    assert int.from_bytes(v.tobytes(), "big") == _expected_raw(f, got[f.name]), \
                        f"{where}: {key}"
                elif f.count > 1:
                    assert [int(x) for x in v] == [_expected_raw(f, x) for x in got[f.name]], \
                        f"{where}: {key}"
                else:
                    assert int(v) == _expected_raw(f, got[f.name]), f"{where}: {key} = {v}"
        # offsets: the UDP header is where the column says; the ICRC ends the datagram
        uo = int(cols["offset.udp"][i])
        if "udp" in layers:
            assert UDP.unpack(rec.data, uo) == {k: layers["udp"][k] for k in UDP.field_names}
        else:
            assert uo == -1
        l3 = int(cols["offset.l3"][i])
        for ip in ("ipv4", "ipv6"):
            if ip in layers:
                spec = batch.BATCH_SPECS[ip]
                assert spec.unpack(rec.data, l3)["src"] == layers[ip]["src"], where
        pay = layers.get("payload")
        if pay is not None and "bth" not in layers and "udp" in layers:
            assert int(cols["offset.udp_end"][i]) == uo + 8 + pay["length"], where
        ic = layers.get("icrc")
        if ic is not None and ic["value"] is not None:
            end = int(cols["offset.udp_end"][i])
            assert int.from_bytes(rec.data[end - 4:end], "little") == ic["value"], where


# ----------------------------------------------------------------- reference captures
@pytest.mark.parametrize("path", PCAPS, ids=lambda p: p.name)
def test_reference_pcaps_match_dissect(path: Path) -> None:
    records = list(read(path))
    check_against_dissect(batch.read_all(path), records)
    # the stream path (CaptureReader) and tiny chunks give the same columns
    with open(path, "rb") as fp:
        chunks = list(batch.read_columns(fp, chunk_frames=3))
    assert all(c.rows <= 3 for c in chunks)
    _same(_concat(chunks), batch.read_all(path))


def test_reference_pcaps_exist() -> None:
    assert len(PCAPS) >= 5


def _concat(chunks: list[batch.Columns]) -> batch.Columns:
    out = batch.Columns(sum(c.rows for c in chunks))
    for k in chunks[0]:
        out[k] = np.concatenate([c[k] for c in chunks])
    return out


def _same(a: batch.Columns, b: batch.Columns) -> None:
    assert a.rows == b.rows and set(a) == set(b)
    for k in a:
        assert a[k].dtype == b[k].dtype, k
        assert np.array_equal(a[k], b[k]), k


# ----------------------------------------------------------------- Hypothesis files
@st.composite
def _record(draw) -> Record:
    kind = draw(st.sampled_from(["valid", "valid", "scaleup", "snapped", "cut", "flip",
                                 "random", "linktype", "bad_icrc"]))
    if kind == "scaleup":
        frame = draw(ws.scaleup_frames())
    elif kind == "random":
        frame = draw(st.binary(max_size=120))
    else:
        frame = draw(ws.frames())
    orig = len(frame)
    if kind == "snapped":
        frame = frame[:draw(st.integers(0, len(frame)))]
    elif kind == "cut":
        frame = frame[:draw(st.integers(0, len(frame)))]
        orig = len(frame)
    elif kind == "bad_icrc":  # a RoCEv2 frame whose payload was changed after the ICRC
        frame = draw(ws.frames(kinds=("roce",)))
        orig = len(frame)
        b = bytearray(frame)
        b[-5] ^= 0x40
        frame = bytes(b)
    elif kind == "flip":
        b = bytearray(frame)
        for _ in range(draw(st.integers(1, 4))):
            b[draw(st.integers(0, len(b) - 1))] ^= draw(st.integers(1, 255))
        frame = bytes(b)
    ts = draw(st.integers(0, 2**32 - 1)) * 1_000_000_000 + draw(st.integers(0, 999_999)) * 1000
    return Record(ts, frame, orig, 228 if kind == "linktype" else 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(st.lists(_record(), min_size=1, max_size=30), st.sampled_from(["pcap", "pcapng"]),
       st.integers(1, 7), st.sampled_from([64, 1 << 20]))
def test_hypothesis_files_match_dissect(tmp_path_factory, recs, fmt, chunk, chunk_bytes):
    if fmt == "pcap":  # classic pcap has one linktype per file
        recs = [Record(r.ts_ns, r.data, r.orig_len, 1) for r in recs]
    path = tmp_path_factory.mktemp("h") / f"f.{fmt}"
    write(path, recs, format=fmt)
    records = list(read(path))
    chunks = list(batch.read_columns(path, chunk_frames=chunk, chunk_bytes=chunk_bytes))
    assert all(0 < c.rows <= chunk for c in chunks)
    check_against_dissect(_concat(chunks), records)


def test_runs_of_equal_and_varying_sizes(tmp_path: Path) -> None:
    """The numpy record walk: long runs of one size, then sizes changing every record, with
    chunk and buffer boundaries falling anywhere."""
    a = build({"vlan": [{"vid": 5}], "ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
               "payload": {"length": 100}})
    b = build({"pfc": {"quanta": [1, 2, 3, 4, 5, 6, 7, 8]}})
    frames = [a] * 100 + [a, b] * 50 + [b] * 40 + [a[:i] for i in range(0, 80)] + [a] * 33
    recs = [Record(i * 1000, f, len(a) if i % 7 == 0 else len(f)) for i, f in enumerate(frames)]
    p = tmp_path / "r.pcap"
    write(p, recs)
    want = batch.frames_to_columns(recs)
    for cf, cb in ((65536, 1 << 20), (17, 1 << 20), (1000, 200), (5, 3000)):
        got = _concat(list(batch.read_columns(p, chunk_frames=cf, chunk_bytes=cb)))
        _same(got, want)
    check_against_dissect(want, recs)


_BASES = [
    build({"ipv4": {}, "udp": {}, "bth": {"opcode": "CNP", "dest_qp": 9}}),
    build({"vlan": [{"vid": 7, "pcp": 3}, {"vid": 9}], "ipv6": {}, "udp": {},
           "bth": {"opcode": "UD_SEND_ONLY"}, "deth": {}, "payload": {"length": 5}}),
    build({"ipv4": {"options": "01010101"}, "udp": {}, "bth": {"opcode": "RC_ACKNOWLEDGE"},
           "aeth": {}}),
    build({"ipv4": {}, "udp": {"dport": 1234}, "payload": {"length": 3}}),
    build({"vlan": [{"vid": 1}], "pfc": {"quanta": [1, 0, 3, 0, 5, 0, 7, 0]}}),
    build({"pause": {"quanta": 77}}),
    build({"sunh": {}, "udp": {"dport": 4791}, "payload": {"length": 30}}),
    build({"vlan": [{"vid": 3}], "eth": {"type": 0x9A01}, "raw": "11" * 40}),
    build({"afh": {"form": "gen2_12"}, "sue_rh": {},
           "sue_txn": [{"opcode": "WRITE", "data": "ab" * 8}]}),
]


def _cuts_and_lies() -> list[Record]:
    out = []
    for f in _BASES:
        for k in range(len(f) + 1):
            out.append(Record(0, f[:k], len(f)))  # cut by a snaplen
            out.append(Record(0, f[:k], k))  # cut, no snaplen to explain it
        d = dissect(f)
        lies = [(layer, key, min(max(d[layer][key] + delta, 0), 0xFFFF))
                for layer, key in (("ipv4", "total_length"), ("ipv6", "payload_length"),
                                   ("udp", "length"))
                if layer in d
                for delta in (-40, -13, -12, -5, -4, -1, 1, 3, 4, 12, 16, 100, 70000)]
        if "ipv4" in d:
            lies += [("ipv4", "ihl", v) for v in range(16)]
            lies += [("ipv4", "flags", v) for v in range(8)]
            lies += [("ipv4", "frag_offset", v) for v in (1, 8191)]
        for layer, key, value in lies:
            dd = d.to_dict()
            dd[layer][key] = value
            dd[layer].pop("options", None) if key == "ihl" else None
            g = build(dd)
            for k in (len(g), len(g) - 3, len(g) - 8):
                out.append(Record(0, g[:k], k))
                out.append(Record(0, g[:k], len(g) + 50))
    return out


def test_every_cut_and_length_lie_matches_dissect(tmp_path: Path) -> None:
    """Frames cut at every byte (with and without a snaplen to explain it), and length
    fields that lie by a little or a lot: where dissect's rules differ, so must we."""
    recs = _cuts_and_lies()
    check_against_dissect(batch.frames_to_columns(recs), recs)
    p = tmp_path / "cuts.pcap"
    write(p, recs)
    _same(batch.read_all(p), batch.frames_to_columns(recs))
    # more RoCEv2 ports: the SUE port still wins (dissect checks it first)
    sue = build({"ipv4": {}, "udp": {"dport": 0xCAFE}, "sue_rh": {},
                 "sue_txn": [{"opcode": "WRITE", "data": "ab" * 8}]})
    recs2 = [*recs[:50], Record(0, sue, len(sue))]
    ports = {4791, 0xCAFE, 1234}
    check_against_dissect(batch.frames_to_columns(recs2, roce_ports=ports), recs2,
                          roce_ports=ports)


# ----------------------------------------------------------------------- errors
def test_truncated_file_yields_good_records_then_raises(tmp_path: Path) -> None:
    f = _ROCE
    p = tmp_path / "t.pcap"
    write(p, [Record(i, f, len(f)) for i in range(50)])
    raw = p.read_bytes()
    (tmp_path / "cut.pcap").write_bytes(raw[:-5])
    rows = 0
    with pytest.raises(TruncatedFile) as e:
        for c in batch.read_columns(tmp_path / "cut.pcap", chunk_frames=16):
            rows += c.rows
    assert rows == 49
    assert e.value.record == 49 and e.value.field == "data"
    with pytest.raises(TruncatedFile) as e2:
        list(read(tmp_path / "cut.pcap"))
    assert str(e.value) == str(e2.value)


def test_absurd_length_raises_like_the_reader(tmp_path: Path) -> None:
    f = _ROCE
    p = tmp_path / "a.pcap"
    write(p, [Record(i, f, len(f)) for i in range(40)])
    raw = bytearray(p.read_bytes())
    at = 24 + 30 * (16 + len(f)) + 8
    raw[at:at + 4] = struct.pack("<I", 1 << 30)
    p.write_bytes(bytes(raw))
    rows = 0
    with pytest.raises(CaptureError) as e:
        for c in batch.read_columns(p):
            rows += c.rows
    assert rows == 30 and e.value.record == 30 and e.value.field == "incl_len"


def test_bad_magic_and_empty(tmp_path: Path) -> None:
    p = tmp_path / "x.pcap"
    p.write_bytes(b"")
    with pytest.raises(CaptureError):
        list(batch.read_columns(p))
    p.write_bytes(b"hello world, not a capture")
    with pytest.raises(CaptureError):
        list(batch.read_columns(p))
    p.write_bytes(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
    assert batch.read_all(p).rows == 0


def test_nanosecond_big_endian_and_streams(tmp_path: Path) -> None:
    f = _ROCE
    recs = [Record(1_700_000_000_123_456_789 + i, f, len(f)) for i in range(20)]
    p = tmp_path / "ns.pcap"
    write(p, recs, nanosecond=True)
    cols = batch.read_all(p)
    assert cols["ts_ns"].tolist() == [r.ts_ns for r in recs]
    # big-endian classic pcap written by hand
    body = b"".join(struct.pack(">IIII", r.ts_ns // 10**9, r.ts_ns % 10**9, len(f), len(f)) + f
                    for r in recs)
    be = tmp_path / "be.pcap"
    be.write_bytes(struct.pack(">IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 65535, 1) + body)
    _same(batch.read_all(be), cols)
    _same(batch.read_all(io.BytesIO(be.read_bytes())), cols)


def test_fields_selects_columns(tmp_path: Path) -> None:
    p = PCAPS[0]
    full = batch.read_all(p)
    few = batch.read_all(p, fields=["bth.psn", "ipv4.ecn"])
    assert "bth.psn" in few and "ipv4.ecn" in few and "bth.opcode" not in few
    assert set(few) == set(batch.column_names(["bth.psn", "ipv4.ecn"]))
    assert set(full) == set(batch.column_names())
    for k in few:
        assert np.array_equal(few[k], full[k]), k


def test_stopping_early_leaves_no_thread_or_mapping(tmp_path: Path) -> None:
    """Breaking out of read_columns (or an error in the consumer) stops the worker thread."""
    import gc
    import threading

    p = tmp_path / "e.pcap"
    write(p, [Record(i, _ROCE, len(_ROCE)) for i in range(3000)])
    before = threading.active_count()
    gen = batch.read_columns(p, chunk_frames=100)
    first = next(gen)
    assert first.rows == 100 and len(first.frame(0)) == len(_ROCE)
    gen.close()
    with pytest.raises(ValueError):
        first.frame(0)  # the chunk's bytes are gone once it is no longer current
    with pytest.raises(ZeroDivisionError):
        for _c in batch.read_columns(p, chunk_frames=100):
            1 / 0  # noqa: B018
    gc.collect()
    assert threading.active_count() == before
    assert sum(c.rows for c in batch.read_columns(p, chunk_frames=100)) == 3000


def test_memory_stays_bounded(tmp_path: Path) -> None:
    """Peak heap (Python objects and numpy arrays, traced by tracemalloc) of a fresh process
    decoding a 275 MB file (250k 1082-byte RoCEv2 frames) stays far below the file size:
    windows are mapped and unmapped chunk by chunk.  (Peak RSS also counts the mapped file
    pages the kernel keeps resident, which depends on the machine's load; the benchmark,
    bench/wire_bench.py, reports it: 79 MB.)"""
    f = build({"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
               "payload": {"length": 1024}})
    hdr = struct.pack("<IIII", 1, 0, len(f), len(f))
    p = tmp_path / "big.pcap"
    with open(p, "wb") as fp:
        fp.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for _ in range(10):
            fp.write((hdr + f) * 25_000)
    code = ("import sys, tracemalloc; from wire.batch import read_columns\n"
            "tracemalloc.start()\n"
            "n = sum(c.rows for c in read_columns(sys.argv[1]))\n"
            "print(n, tracemalloc.get_traced_memory()[1] // 1024)")
    out = subprocess.run([sys.executable, "-c", code, str(p)], capture_output=True, text=True,
                         check=True, cwd=Path(__file__).resolve().parent.parent).stdout.split()
    rows, peak_kb = int(out[0]), int(out[1])
    size_mb = p.stat().st_size / 2**20
    assert rows == 250_000
    assert peak_kb / 1024 < min(100, size_mb / 4), (peak_kb, size_mb)


# ------------------------------------------------------------------ lossless stats
def _stats_both(path, records, **kw) -> tuple[CaptureStats, CaptureStats]:
    one = CaptureStats(link_bps=25 * 10**9)
    for r in records:
        if r.linktype == 1:
            one.add(r.ts_ns, r.orig_len, dissect(r.data, r.orig_len))
    cols = CaptureStats(link_bps=25 * 10**9)
    for c in batch.read_columns(path, fields=STATS_FIELDS, **kw):
        cols.add_columns(c)
    return one, cols


@pytest.mark.parametrize("path", PCAPS, ids=lambda p: p.name)
def test_stats_from_columns_equal_stats_per_record(path: Path) -> None:
    for chunk in (2, 65536):
        one, cols = _stats_both(path, list(read(path)), chunk_frames=chunk)
        assert cols.to_dict() == one.to_dict()
        assert list(cols.flows) == list(one.flows) and list(cols.opcodes) == list(one.opcodes)
        assert cols.format_text() == one.format_text()


def test_stats_column_path_is_taken() -> None:
    """The reference RoCEv2 and PFC captures are (mostly) counted from columns, not dissect."""
    for name, layer in (("roce_rc.pcap", "bth"), ("pfc_pause.pcap", "mac_control")):
        for c in batch.read_columns(PCAPS[0].parent / name):  # one chunk: frames readable
            eth = c["linktype"] == 1
            fast = _clean_roce(c, eth)[0] | _clean_mac_control(c, eth)
            assert fast.sum() >= 0.6 * c.present(layer).sum() > 0, name


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.data_too_large])
@given(st.lists(_record(), min_size=1, max_size=30), st.integers(1, 9))
def test_hypothesis_stats_equal(tmp_path_factory, recs, chunk):
    recs = [Record(r.ts_ns, r.data, r.orig_len, 1) for r in recs]
    path = tmp_path_factory.mktemp("s") / "s.pcap"
    write(path, recs)
    one, cols = _stats_both(path, list(read(path)), chunk_frames=chunk)
    assert cols.to_dict() == one.to_dict()
    assert list(cols.flows) == list(one.flows) and list(cols.opcodes) == list(one.opcodes)

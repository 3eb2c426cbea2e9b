"""Hostile and mutated capture files, hostile craft input.

Random and mutated pcap/pcapng files (bit flips, truncations, lying lengths, huge block
lengths, zero-length blocks, wrong magic, huge snaplen) go through ``wire.read``,
``wire.batch.read_columns``, ``lossless decode`` and ``lossless stats``; random JSON lines,
deep JSON and binary data through ``lossless craft``.  Never a traceback: the library raises
only :class:`~wire.errors.CaptureError`, the CLI exits 0, 1 or 2 and writes one
``lossless: ...`` line per problem.  Also: a pcapng timestamp beyond int64 ns (an 80-byte
file), and a capture truncated while ``lossless stats`` reads it (was SIGBUS).

Bounded in time: small files, in-process CLI calls; the ``ci`` profile runs in well under
30 s.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.helpers import run_cli
from wire import CaptureWriter, Record
from wire.batch import read_columns
from wire.errors import CaptureError
from wire.pcapio import read

REPO = Path(__file__).resolve().parent.parent
SEEDS = [p.read_bytes() for p in sorted((REPO / "pcaps").glob("*.pcap"))[:4]]


def _pcapng_seed() -> bytes:
    buf = io.BytesIO()
    with CaptureWriter(buf, format="pcapng") as w:
        for i, data in enumerate((SEEDS[1][40:140], SEEDS[2][40:100], b"")):
            w.write(Record(1_700_000_000_000_000_000 + i, data, len(data), 1 + 100 * (i == 1),
                           i % 2))
    return buf.getvalue()


SEEDS.append(_pcapng_seed())


def cli(args: list[str], stdin: bytes | None = None) -> tuple[int, str]:
    """(exit status, stderr) of an in-process CLI call; its stdout is thrown away."""
    rc, _, err = run_cli(args, stdin)
    return rc, err


def assert_clean_cli(rc: int, err: str) -> None:
    assert rc in (0, 1, 2), (rc, err)
    assert "Traceback" not in err
    for line in err.splitlines():
        assert line.startswith("lossless: "), err


def check_file(data: bytes) -> None:
    """Every reader and command on one file: only CaptureError, exit 0/1/2, clean stderr."""
    with contextlib.suppress(CaptureError):
        for _ in read(io.BytesIO(data)):
            pass
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "f.cap"
        p.write_bytes(data)
        with contextlib.suppress(CaptureError):
            for cols in read_columns(str(p), chunk_bytes=256):
                assert cols.rows >= 0
        for args in (["decode", str(p)], ["decode", str(p), "-f", "jsonl"],
                     ["stats", str(p)], ["stats", str(p), "--json"]):
            assert_clean_cli(*cli(args))


# ------------------------------------------------------------ mutated files
@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "u32", "zero_block", "magic", "snaplen",
                                     "insert"]))
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:]
        elif kind == "u32":  # a lying length (or any other field): small, huge, or near
            v = draw(st.one_of(st.integers(0, 64), st.integers(2**31 - 8, 2**32 - 1),
                               st.integers(0, 2**32 - 1)))
            data[at:at + 4] = struct.pack(draw(st.sampled_from("<>")) + "I", v)
        elif kind == "zero_block":  # a block / record whose lengths are all zero
            data[at:at] = bytes(draw(st.sampled_from([8, 12, 16, 28])))
        elif kind == "magic":
            data[0:4] = draw(st.binary(min_size=4, max_size=4))
        elif kind == "snaplen":
            data[16:20] = struct.pack("<I", draw(st.sampled_from([0, 2**31, 2**32 - 1])))
        else:
            data[at:at] = draw(st.binary(max_size=40))
    return bytes(data)


@given(mutated())
@settings(max_examples=150)
def test_mutated_captures(data: bytes) -> None:
    check_file(data)


@given(st.binary(max_size=200))
@settings(max_examples=50)
def test_random_bytes(data: bytes) -> None:
    check_file(data)


@given(st.sampled_from([b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a"]),
       st.binary(max_size=120))
@settings(max_examples=50)
def test_right_magic_random_rest(magic: bytes, rest: bytes) -> None:
    check_file(magic + rest)


@pytest.mark.parametrize("block_len", [0, 4, 12, 0xFFFFFFFC, 0x7FFFFFFC])
def test_huge_and_zero_block_lengths(block_len: int) -> None:
    shb = SEEDS[-1][:28]
    check_file(shb + struct.pack("<II", 1, block_len) + bytes(64))
    check_file(shb + struct.pack("<II", 6, block_len) + bytes(64))


# ----------------------------------------- a timestamp beyond int64 ns
def _huge_ts_pcapng() -> bytes:
    """80 bytes: SHB (28), IDB with the default microsecond resolution (20), one EPB (32)
    whose timestamp is 2**64 - 1 us, i.e. 1.8e22 ns: beyond the int64 ns columns."""
    shb = struct.pack("<IIIHHqI", 0x0A0D0D0A, 28, 0x1A2B3C4D, 1, 0, -1, 28)
    idb = struct.pack("<IIHHII", 1, 20, 1, 0, 0, 20)
    epb = struct.pack("<IIIIIIII", 6, 32, 0, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0, 32)
    return shb + idb + epb


def test_timestamp_beyond_int64_ns(tmp_path: Path) -> None:
    data = _huge_ts_pcapng()
    assert len(data) == 80
    p = tmp_path / "ts.pcapng"
    p.write_bytes(data)
    with pytest.raises(CaptureError, match="timestamp"):
        list(read_columns(str(p)))
    rc, err = cli(["stats", str(p)])
    assert rc == 2
    assert err == (f"lossless: {p}: record 0: field timestamp: timestamp "
                   "18446744073709551615000 ns does not fit the int64 ts_ns column (beyond "
                   "year 2262); file corrupt?\n")
    rc, err = cli(["decode", str(p)])
    assert_clean_cli(rc, err)
    rc, err = cli(["decode", str(p), "-f", "jsonl"])
    assert_clean_cli(rc, err)


# ------------------------------ a capture truncated while stats reads it
_TRUNCATE_AFTER_FIRST_CHUNK = r"""
import os, sys
import wire.batch as b
path, cut = sys.argv[1], int(sys.argv[2])
real = b.decode_frames
calls = []
def decode_then_truncate(*a, **kw):
    out = real(*a, **kw)
    if not calls:
        os.truncate(path, cut)  # the capture shrinks under the reader
    calls.append(1)
    return out
b.decode_frames = decode_then_truncate
b.DEFAULT_CHUNK_BYTES = 1 << 16  # windows of 256 KiB (the largest record + 16)
from sim.cli import main
sys.exit(main(["stats", path, "--json"]))
"""


@pytest.mark.parametrize("where", ["mid_record", "record_boundary"])
def test_capture_truncated_while_stats_reads_it(tmp_path: Path, where: str) -> None:
    p = tmp_path / "big.pcap"
    frame = SEEDS[0][40:40 + 100]
    n = 20000  # 116 bytes a record: 9 windows of 256 KiB; the reader is at most 1 ahead
    with CaptureWriter(p) as w:
        w.write_frames([frame] * n, range(0, n * 1000, 1000))
    keep = 10000
    cut = 24 + keep * (16 + len(frame)) + (50 if where == "mid_record" else 0)
    r = subprocess.run([sys.executable, "-c", _TRUNCATE_AFTER_FIRST_CHUNK, str(p), str(cut)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, (r.returncode, r.stderr)  # not -7 (SIGBUS)
    assert "Traceback" not in r.stderr and len(r.stderr.splitlines()) == 1
    assert r.stderr.startswith(f"lossless: {p}: record {keep}: ")
    if where == "mid_record":
        assert "cut by end of file" in r.stderr
    else:
        assert "shrank" in r.stderr
    assert json.loads(r.stdout)["records"] == keep


def test_read_columns_on_a_shrinking_file(tmp_path: Path) -> None:
    """The library form: the rows before the cut, then TruncatedFile."""
    p = tmp_path / "s.pcap"
    frame = SEEDS[0][40:140]
    with CaptureWriter(p) as w:
        w.write_frames([frame] * 20000, range(20000))
    rows = 0
    with pytest.raises(CaptureError, match="shrank"):
        for k, cols in enumerate(read_columns(str(p), chunk_frames=1000,
                                              chunk_bytes=1 << 16)):
            rows += cols.rows
            if k == 0:
                os.truncate(p, 24 + 12000 * 116)
    assert rows == 12000


# ------------------------------------------------------- hostile craft input
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                              max_size=4), max_leaves=12)
LAYERS = ["eth", "vlan", "ipv4", "ipv6", "udp", "bth", "reth", "aeth", "payload", "pfc",
          "pause", "raw", "ts_ns", "linktype", "interface", "caplen", "len", "epb_options",
          "pcap", "pcapng_shb", "pcapng_idb", "pcapng_block"]
records = st.dictionaries(st.sampled_from(LAYERS), json_values, max_size=4)


@given(st.lists(st.one_of(records.map(lambda d: json.dumps(d).encode()),
                          st.binary(max_size=30),
                          st.integers(1, 5000).map(lambda n: b"[" * n),
                          st.just(b"\xff\xfe\x00")), max_size=6),
       st.sampled_from([[], ["--pcapng"], ["--pcap"], ["--recompute"]]))
@settings(max_examples=100)
def test_craft_hostile_lines(lines: list[bytes], opts: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.jsonl"
        src.write_bytes(b"\n".join(x.replace(b"\n", b" ") for x in lines) + b"\n")
        out = Path(tmp) / "o.cap"
        rc, err = cli(["craft", str(src), "-o", str(out), *opts])
        assert_clean_cli(rc, err)
        if out.exists():  # whatever was written reads back
            check_file(out.read_bytes())


def test_craft_deep_and_binary_input(tmp_path: Path) -> None:
    src = tmp_path / "deep.jsonl"
    src.write_bytes(b"[" * 100_000 + b"\n" + b'{"x":' * 100_000 + b"\n" + bytes(range(256))
                    + b"\n")
    rc, err = cli(["craft", str(src), "-o", str(tmp_path / "o.pcap")])
    assert rc == 2 and len(err.splitlines()) == 5  # 4 bad lines (one \n in the binary)
    assert_clean_cli(rc, err)
    rc, err = cli(["craft", "-o", str(tmp_path / "o.pcap")], stdin=SEEDS[0])
    assert rc == 2 and err == ("lossless: -: not JSON Lines (binary data on line 1); "
                               f"{tmp_path / 'o.pcap'} left as it was\n")

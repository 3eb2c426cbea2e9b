"""``lossless decode`` through the numpy batch reader prints what record by record prints.

The table of a classic pcap is made by ``sim.cli.wire._decode_columns``: the lines of clean
RoCEv2 frames from columns (``wire.stats.summary_columns``), every other record by
``dissect`` + ``summary_line`` at its place.  Both paths must give the same stdout, stderr
and exit status on every committed capture, on drawn and mutated frames of every kind
(chunks of 1 to 7 records, so that clean and other rows meet at chunk edges), on captures
cut at any byte and on records whose lengths lie.
"""

from __future__ import annotations

import contextlib
import io
import os
import struct
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sim.cli.wire as cli_wire
import wire.batch
from sim.cli import main
from wire import build
from wire.pcapio import CaptureWriter, Record
from wire.stats import summary_columns
from wire.strategies import frames, scaleup_frames

ROOT = Path(__file__).resolve().parent.parent
PCAPS = sorted((ROOT / "pcaps").glob("*.pcap")) + sorted((ROOT / "pcaps" / "ib").glob("*.pcap"))


def _run(argv: list[str], columns: bool, chunk: int | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = cli_wire._DECODE_COLUMNS, wire.batch.DEFAULT_CHUNK_FRAMES
    cli_wire._DECODE_COLUMNS = columns
    if chunk is not None:
        wire.batch.DEFAULT_CHUNK_FRAMES = chunk
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    finally:
        cli_wire._DECODE_COLUMNS, wire.batch.DEFAULT_CHUNK_FRAMES = old
    return rc, out.getvalue(), err.getvalue()


def _same(argv: list[str], chunk: int | None = None) -> tuple[int, str, str]:
    a = _run(argv, True, chunk)
    b = _run(argv, False)
    assert a == b
    return a


@pytest.mark.parametrize("path", PCAPS, ids=lambda p: p.name)
@pytest.mark.parametrize("flags", [[], ["-v"]])
def test_committed_captures(path: Path, flags: list[str]) -> None:
    for chunk in (None, 1, 3):
        _same(["decode", *flags, str(path)], chunk)


def test_the_columns_make_the_lines_of_clean_frames() -> None:
    """On a capture of clean RoCEv2 frames the columns make every line (else the batch path
    would prove nothing)."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "clean.pcap")
        with CaptureWriter(p) as w:
            for i in range(20):
                f = build({"ipv4": {"ecn": i % 4}, "udp": {},
                           "bth": {"opcode": "RC_SEND_ONLY", "psn": i, "becn": i % 2},
                           "payload": {"length": 64 + i}})
                w.write(Record(i * 1000, f, len(f)))
        chunks = wire.batch.read_columns(p, fields=cli_wire.SUMMARY_FIELDS)
        cols = next(chunks)  # the frames' bytes are there while ``chunks`` is alive
        rows, lines = summary_columns(cols, 0)
        assert rows.tolist() == list(range(20)) and len(lines) == 20
        assert "PSN=19" in lines[19] and "BECN" in lines[19] and "payload=83" in lines[19]
        rc, out, _ = _same(["decode", p])
        assert rc == 0 and out.splitlines() == lines


@pytest.mark.parametrize("src,dst", [("128.0.0.0", "0.0.0.1"), ("255.255.255.255", "10.0.0.1"),
                                     ("192.168.1.2", "224.0.0.1"), ("127.255.255.255",
                                                                    "128.0.0.1")])
def test_the_columns_print_any_address(src: str, dst: str) -> None:
    """Addresses from 128.0.0.0 up (the high bit of a 32-bit word set) in the "src > dst"
    column: Hypothesis found 128.0.0.0 printed as -128.0.0.0 by the column path."""
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "addr.pcap")
        f = build({"ipv4": {"src": src, "dst": dst}, "udp": {},
                   "bth": {"opcode": "RC_SEND_ONLY"}, "payload": {"length": 64}})
        with CaptureWriter(p) as w:
            w.write(Record(0, f, len(f)))
        chunks = wire.batch.read_columns(p, fields=cli_wire.SUMMARY_FIELDS)
        rows, lines = summary_columns(next(chunks), 0)  # bytes there while chunks lives
        assert rows.tolist() == [0] and f"{src} > {dst} " in lines[0]
        assert _same(["decode", p])[1].splitlines() == lines


@st.composite
def _mutated(draw) -> bytes:
    """A RoCEv2 frame with up to three bytes, 16-bit words or bits set anywhere (headers,
    payload, ICRC)."""
    data = bytearray(draw(frames(kinds=["roce"])))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(data) - 1))
        kind = draw(st.sampled_from(["byte", "u16", "flip"]))
        if kind == "byte":
            data[at] = draw(st.integers(0, 255))
        elif kind == "u16" and at + 2 <= len(data):
            data[at:at + 2] = draw(st.integers(0, 0xFFFF)).to_bytes(2, "big")
        else:
            data[at] ^= 1 << draw(st.integers(0, 7))
    return bytes(data)


_RECORD = st.tuples(
    st.one_of(frames(kinds=["roce"]), _mutated(), frames(), scaleup_frames()),
    st.sampled_from([0, 0, 0, 1, 64]),          # orig_len beyond caplen
    st.sampled_from([None, None, None, 30, 60]))  # caplen cut to this


@settings(max_examples=60, deadline=None)
@given(st.lists(_RECORD, min_size=1, max_size=12), st.integers(1, 7), st.booleans(),
       st.sampled_from([[], ["--roce-port", "5000"]]), st.sampled_from([1, 1, 1, 247]))
def test_drawn_captures(records, chunk: int, verbose: bool, ports: list[str], lt: int
                        ) -> None:
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "drawn.pcap")
        with CaptureWriter(p, linktype=lt) as w:
            for i, (frame, extra, cut) in enumerate(records):
                data = frame if cut is None else frame[:cut]
                w.write(Record(i * 1_000_003, data, len(frame) + extra, lt))
        _same(["decode", *(["-v"] if verbose else []), *ports, p], chunk)


def test_cut_and_lying_captures(tmp_path: Path) -> None:
    src = (ROOT / "pcaps" / "roce_rc.pcap").read_bytes()
    path = tmp_path / "bad.pcap"
    for cut in range(0, len(src), 37):
        path.write_bytes(src[:cut])
        _same(["decode", str(path)], 2)
    # the second record's caplen lies: larger than the file, then larger than the snaplen
    first_len = struct.unpack_from("<I", src, 24 + 8)[0]
    at = 24 + 16 + first_len + 8
    for lie in (len(src), 1 << 30, 0):
        bad = bytearray(src)
        struct.pack_into("<I", bad, at, lie)
        path.write_bytes(bytes(bad))
        rc, _out, err = _same(["decode", str(path)], 2)
        assert rc in (0, 1, 2)
        if lie:
            assert rc == 2 and err.count("\n") == 1 and "bad.pcap" in err


@pytest.mark.parametrize(("command", "capture"), [("decode", "roce_rc.pcap"),
                                                   ("stats", "cnp.pcap")])
def test_a_pipe_is_read_once(tmp_path: Path, command: str, capture: str) -> None:
    """A capture given as a pipe (``lossless decode <(...)``) is not probed for its magic,
    by decode's batch path nor by ``wire.batch.read_columns`` (stats): the one reader gets
    every byte, and the output is the file's."""
    import subprocess
    import sys

    src = ROOT / "pcaps" / capture
    want = subprocess.run([sys.executable, "-m", "sim", command, str(src)], cwd=ROOT,
                          capture_output=True, text=True)
    fifo = tmp_path / "cap.fifo"
    os.mkfifo(fifo)
    p = subprocess.Popen([sys.executable, "-m", "sim", command, str(fifo)], cwd=ROOT,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with open(fifo, "wb") as w:
        w.write(src.read_bytes())
    out, err = p.communicate(timeout=60)
    assert (p.returncode, out, err) == (want.returncode, want.stdout, want.stderr)
    assert out.count("\n") > 5

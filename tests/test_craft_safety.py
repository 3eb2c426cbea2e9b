"""``lossless craft`` never destroys or mixes a user's data.

* the output appears whole or not at all (``wire.atomic.atomic_file``): an all-bad input, a
  binary input file, a bad option, a SIGKILL mid-write or an error half-way leave an
  existing OUT exactly as it was, and a killed craft leaves no valid-looking file under OUT;
* ``decode keep.pcap | craft -o keep.pcap`` (the in-place edit the README's jq recipe
  invites) rewrites keep.pcap whole;
* a bad line is one ``FILE:LINE: field: why`` message, that line skipped and every other
  kept (exit 1): timestamps a format cannot hold, a linktype a classic pcap cannot hold,
  100,000-deep JSON, invalid UTF-8, negative timestamps;
* ``-o -`` still streams.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sim.cli import main
from wire import CaptureReader

REPO = Path(__file__).resolve().parent.parent
ROCE_RC = REPO / "pcaps" / "roce_rc.pcap"
LOSSLESS = [sys.executable, "-m", "sim"]


def run(args: list[str], capsys) -> tuple[int, str, str]:
    try:
        rc = main(args)
    except SystemExit as e:  # a usage error (argparse)
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


def digest(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


@pytest.fixture
def keep(tmp_path: Path) -> Path:
    """An existing capture the user cares about."""
    p = tmp_path / "keep.pcap"
    p.write_bytes(ROCE_RC.read_bytes())
    return p


def no_partials(folder: Path) -> bool:
    return not [p for p in folder.iterdir() if ".partial-" in p.name]


# --------------------------------------------------------------------- atomic
def test_all_bad_input_leaves_out_untouched(keep: Path, tmp_path: Path, capsys) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text('nope\n{"bogus": {}}\n{"ipv4": {"ecn": 7}}\n')
    before = digest(keep)
    rc, _, err = run(["craft", str(src), "-o", str(keep)], capsys)
    assert rc == 2
    assert digest(keep) == before
    lines = err.splitlines()
    assert len(lines) == 4 and "Traceback" not in err
    assert lines[-1] == (f"lossless: {keep}: nothing written: all 3 input line(s) were bad; "
                         f"{keep} left as it was")
    assert no_partials(tmp_path)


def test_all_bad_input_creates_no_file(tmp_path: Path, capsys) -> None:
    src = tmp_path / "bad.jsonl"
    src.write_text("nope\n")
    dst = tmp_path / "new.pcap"
    assert run(["craft", str(src), "-o", str(dst)], capsys)[0] == 2
    assert not dst.exists() and no_partials(tmp_path)


def test_empty_input_writes_an_empty_capture(tmp_path: Path, capsys) -> None:
    """No line at all is not an error: an empty capture (header only) is written."""
    src = tmp_path / "empty.jsonl"
    src.write_text("\n\n")
    dst = tmp_path / "e.pcap"
    assert run(["craft", str(src), "-o", str(dst), "-q"], capsys)[0] == 0
    assert list(CaptureReader(str(dst))) == [] and dst.stat().st_size == 24


def test_binary_input_file_is_one_message_and_out_untouched(keep: Path, capsys) -> None:
    before = digest(keep)
    rc, _, err = run(["craft", str(ROCE_RC), "-o", str(keep)], capsys)
    assert rc == 2 and digest(keep) == before
    assert err == (f"lossless: {ROCE_RC}: not JSON Lines (binary data on line 1); {keep} left "
                   "as it was\n")


@pytest.mark.parametrize("opts", [["--gap-ns", "-5"], ["--count", "-1"],
                                  ["--rate-gbps", "nan"], ["--start-ns", "-1"]])
def test_bad_flow_option_leaves_out_untouched(keep: Path, opts: list[str], capsys) -> None:
    before = digest(keep)
    rc, _, err = run(["craft", "--flow", '{"ipv4": {}, "udp": {}, "bth": {}}', "--count", "3",
                      *opts, "-o", str(keep)], capsys)
    assert rc == 2 and digest(keep) == before
    assert len(err.splitlines()) == 1 and "Traceback" not in err


def test_flow_failing_half_way_leaves_out_untouched(keep: Path, capsys) -> None:
    """Frames past 2106 cannot go in a classic pcap: found after some were written."""
    before = digest(keep)
    start = (2**32 - 1) * 10**9  # the last classic-pcap second; +2 s is past it
    rc, _, err = run(["craft", "--flow", '{"ipv4": {}, "udp": {}, "bth": {}}', "--count",
                      "10", "--gap-ns", "500000000", "--start-ns", str(start), "-o", str(keep)],
                     capsys)
    assert rc == 2 and digest(keep) == before
    assert "32-bit" in err and "nothing written" in err and len(err.splitlines()) == 1
    assert no_partials(keep.parent)


def test_flow_writes_through_a_temporary_file(tmp_path: Path, capsys) -> None:
    dst = tmp_path / "f.pcap"
    rc, _, _ = run(["craft", "--flow", '{"ipv4": {}, "udp": {}, "bth": {}}', "--count", "5",
                    "--gap-ns", "100", "-o", str(dst), "-q"], capsys)
    assert rc == 0 and len(list(CaptureReader(str(dst)))) == 5 and no_partials(tmp_path)


def test_in_place_edit_through_a_pipe(keep: Path) -> None:
    """``lossless decode keep.pcap -f jsonl | lossless craft -o keep.pcap``: keep.pcap is
    rewritten whole (it was cut to 24 bytes or a fraction of its records)."""
    before = keep.read_bytes()
    cmd = (f"{sys.executable} -m sim decode {keep} -f jsonl | "
           f"{sys.executable} -m sim craft -o {keep} -q")
    r = subprocess.run(["sh", "-c", cmd], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert keep.read_bytes() == before and no_partials(keep.parent)


class _DecodeOnFirstRead(io.RawIOBase):
    """A stdin that decodes ``path`` only when craft first reads it: the in-place edit with
    craft already started (what a shell pipeline does when craft wins the race)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: bytes | None = None
        self.pos = 0

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        if self.data is None:
            self.data = subprocess.run([*LOSSLESS, "decode", str(self.path), "-f", "jsonl"],
                                       capture_output=True, timeout=60).stdout
        n = min(len(b), len(self.data) - self.pos)
        b[:n] = self.data[self.pos:self.pos + n]
        self.pos += n
        return n


def test_in_place_edit_when_craft_starts_first(keep: Path, monkeypatch, capsys) -> None:
    before = keep.read_bytes()
    stdin = io.TextIOWrapper(io.BufferedReader(_DecodeOnFirstRead(keep)), encoding="utf-8")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert run(["craft", "-o", str(keep), "-q"], capsys)[0] == 0
    assert keep.read_bytes() == before


def test_sigkill_mid_write_leaves_no_partial_capture(keep: Path, tmp_path: Path) -> None:
    """A craft killed while writing leaves OUT as it was (here: a user's earlier capture) and
    a NEW out name absent: only a hidden ``.NAME.partial-PID`` may remain."""
    line = json.dumps({"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
                       "payload": {"length": 1000}}) + "\n"
    for dst in (keep, tmp_path / "new.pcap"):
        before = dst.read_bytes() if dst.exists() else None
        p = subprocess.Popen([*LOSSLESS, "craft", "-o", str(dst), "-q"], stdin=subprocess.PIPE,
                             stderr=subprocess.DEVNULL)
        assert p.stdin is not None
        deadline = time.monotonic() + 60
        partial: list[Path] = []
        # feed records until the temporary file holds more than the header
        while time.monotonic() < deadline:
            p.stdin.write(line.encode() * 200)
            p.stdin.flush()
            partial = [q for q in tmp_path.iterdir() if ".partial-" in q.name]
            if partial and partial[0].stat().st_size > 24:
                break
            time.sleep(0.01)
        assert partial and partial[0].stat().st_size > 24, "craft wrote nothing in 60 s"
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)
        with pytest.raises(BrokenPipeError):
            p.stdin.write(line.encode() * 20000)
            p.stdin.flush()
        if before is None:
            assert not dst.exists()
        else:
            assert dst.read_bytes() == before
        assert partial[0].name.startswith(f".{dst.name}.partial-")
        for q in partial:
            q.unlink()
        with contextlib.suppress(BrokenPipeError):
            p.stdin.close()


def test_stdout_output_streams(tmp_path: Path) -> None:
    """``-o -`` writes the capture to stdout as it goes (no temporary file)."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"ipv4": {}, "udp": {}, "bth": {}}\n' * 3)
    r = subprocess.run([*LOSSLESS, "craft", str(src), "-o", "-"], capture_output=True,
                       timeout=60)
    assert r.returncode == 0 and r.stderr == b"lossless: wrote 3 record(s) to stdout\n"
    out = tmp_path / "o.pcap"
    out.write_bytes(r.stdout)
    assert len(list(CaptureReader(str(out)))) == 3 and os.listdir(tmp_path) == sorted(
        os.listdir(tmp_path))


# ------------------------------------------------------------ per-line errors
GOOD = '{"ts_ns": 1000, "ipv4": {}, "udp": {}, "bth": {}}'


def test_each_bad_line_is_one_message_and_the_rest_is_kept(tmp_path: Path, capsys) -> None:
    src = tmp_path / "in.jsonl"
    lines = [
        GOOD,
        json.dumps({"ts_ns": 2**32 * 10**9, "ipv4": {}}),          # 2: past 2106 in a pcap
        json.dumps({"ts_ns": 5000, "linktype": 101, "raw": "45"}),  # 3: a second linktype
        "[" * 100_000,                                              # 4: 100,000-deep JSON
        '{"ts_ns": -10}',                                           # 5: before 1970
        json.dumps({"ts_ns": 2**70}),                               # 6: far past 2106
        GOOD,                                                       # 7
        '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}",             # 8: deep, valid JSON
        '{"ts_ns": 1e999}',                                         # 9: not a number we keep
    ]
    data = ("\n".join(lines) + "\n").encode() + b'{"payload": {"data": "\xff\xfe"}}\n' \
        + (GOOD + "\n").encode()                                    # 10: not UTF-8; 11 good
    src.write_bytes(data)
    dst = tmp_path / "o.pcap"
    rc, _, err = run(["craft", str(src), "-o", str(dst)], capsys)
    assert rc == 1 and "Traceback" not in err
    msgs = err.splitlines()
    assert msgs[:-1] == [
        f"lossless: {src}:2: ts_ns: timestamp 4294967296000000000 ns is past 2106: classic "
        "pcap seconds are 32-bit",
        f"lossless: {src}:3: linktype: record linktype 101 differs from the file's linktype 1: "
        "a classic pcap file holds one linktype (pcapng holds several)",
        f"lossless: {src}:4: not JSON: nested too deeply",
        f"lossless: {src}:5: ts_ns: expected a non-negative integer, got -10",
        f"lossless: {src}:6: ts_ns: timestamp {2**70} ns is past 2106: classic pcap seconds "
        "are 32-bit",
        f"lossless: {src}:8: not JSON: nested too deeply",
        f"lossless: {src}:9: ts_ns: expected a non-negative integer, got inf",
        f"lossless: {src}:10: not UTF-8: byte 0xff at column 23",
    ]
    assert msgs[-1] == f"lossless: wrote 3 record(s) to {dst}; skipped 8 bad line(s)"
    assert len(list(CaptureReader(str(dst)))) == 3


def test_pcapng_limits_are_per_line_too(tmp_path: Path, capsys) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([GOOD, json.dumps({"ts_ns": 2**64, "ipv4": {}}),
                              json.dumps({"ts_ns": 1, "linktype": 70000, "raw": ""}),
                              json.dumps({"ts_ns": 2, "linktype": 101, "raw": "45"})]) + "\n")
    dst = tmp_path / "o.pcapng"
    rc, _, err = run(["craft", str(src), "--pcapng", "-o", str(dst)], capsys)
    assert rc == 1
    assert err.splitlines()[:2] == [
        f"lossless: {src}:2: ts_ns: timestamp {2**64} ns does not fit a 64-bit pcapng "
        "timestamp",
        f"lossless: {src}:3: linktype: 70000 is out of range 0..65535"]
    assert [r.linktype for r in CaptureReader(str(dst))] == [1, 101]


def test_a_line_that_is_not_an_object(tmp_path: Path, capsys) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('[1, 2]\n"x"\n' + GOOD + "\n")
    rc, _, err = run(["craft", str(src), "-o", str(tmp_path / "o.pcap"), "-q"], capsys)
    assert rc == 1
    assert err.splitlines() == [
        f"lossless: {src}:1: a line must be a JSON object, got list",
        f"lossless: {src}:2: a line must be a JSON object, got str"]

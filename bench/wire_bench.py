"""Decoding speed of large captures: ``python -m bench.wire_bench [--quick]``.

Builds a capture of 1082-byte RoCEv2 frames (Ethernet + IPv4 + UDP + BTH + 1024 bytes +
ICRC; 200,000 frames, 20,000 with ``--quick``; two QPs, PSNs counting up, every 10th frame
CE-marked) with :class:`wire.template.RoceTemplate`, then times, interleaved over several
runs:

* ``wire.batch``: :func:`wire.batch.read_columns`, every column;
* ``wire.batch 3 fields``: the same with ``fields=`` bth.opcode / dest_qp / psn;
* dpkt's pcap reader + ``struct`` at fixed offsets (opcode, QP, PSN);
* dpkt's reader + full parse (``dpkt.ethernet.Ethernet``), opcode/QP/PSN from the UDP payload;
* Scapy's ``PcapReader`` on the first 20,000 frames, extrapolated (labelled so);
* ``tshark -T fields`` with ``infiniband.bth.opcode``, ``.destqp`` and ``.psn`` (the same
  three fields; Wireshark's names for them) end to end, if installed;
* ``lossless stats`` end to end (a subprocess: interpreter start and imports included);
* ``lossless decode`` (one summary line per frame, every check done) against ``tshark -r``
  (its default one-line-per-packet summary), both end to end, output to /dev/null.

Prints the median and spread (min..max) of each, frames per second, peak RSS (in-process:
growth of this process's max RSS is not measurable after the first run, so the in-process
figure is the process maximum; subprocesses: ``resource.getrusage(RUSAGE_CHILDREN)`` measured
in a fresh child per tool) and the ratios against the development's targets
(bench/results/2026-11-decoding.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

FRAME_PAYLOAD = 1024
#: Frames in the full run and in ``--quick``.
FULL_FRAMES, QUICK_FRAMES = 200_000, 20_000
SCAPY_FRAMES = 20_000


def build_capture(path: str, frames: int) -> int:
    """Write ``frames`` 1082-byte RoCEv2 frames (two QPs) to a classic pcap; the frame size."""
    from wire.pcapio import CaptureWriter, Record
    from wire.template import RoceTemplate

    layers = {"eth": {}, "ipv4": {"ecn": 2}, "udp": {},
              "bth": {"opcode": "RC_RDMA_WRITE_MIDDLE", "dest_qp": 0x11},
              "payload": {"data": "00" * FRAME_PAYLOAD}}
    t = RoceTemplate(layers, patch=("bth.psn", "bth.dest_qp", "ipv4.ecn"))
    size = t.size_bytes
    with CaptureWriter(path) as w:
        for i in range(frames):
            f = t.make(**{"bth.psn": i & 0xFFFFFF, "bth.dest_qp": 0x11 + (i & 1),
                          "ipv4.ecn": 3 if i % 10 == 0 else 2})
            w.write(Record(1_700_000_000_000_000_000 + i * 100, bytes(f), size))
    return size


# ------------------------------------------------------------------------ the contenders
def run_batch(path: str, fields=None) -> int:
    from wire.batch import read_columns

    n = 0
    for cols in read_columns(path, fields=fields):
        n += cols.rows
    return n


def run_batch3(path: str) -> int:
    return run_batch(path, ("bth.opcode", "bth.dest_qp", "bth.psn"))


def run_dpkt_struct(path: str) -> int:
    import dpkt

    # BTH at byte 42 (Ethernet 14 + IPv4 20 + UDP 8): opcode, then QP and PSN as 32-bit
    # words masked to 24 bits.  Hand-written offsets: this is the baseline, not our code.
    unpack = struct.Struct(">B3xII").unpack_from
    n = 0
    with open(path, "rb") as fp:
        for _ts, buf in dpkt.pcap.Reader(fp):
            _op, qp, psn = unpack(buf, 42)
            _qp, _psn = qp & 0xFFFFFF, psn & 0xFFFFFF
            n += 1
    return n


def run_dpkt_full(path: str) -> int:
    import dpkt

    n = 0
    with open(path, "rb") as fp:
        for _ts, buf in dpkt.pcap.Reader(fp):
            eth = dpkt.ethernet.Ethernet(buf)
            udp = eth.data.data
            b = bytes(udp.data)
            _op, _qp, _psn = b[0], int.from_bytes(b[5:8], "big"), int.from_bytes(b[9:12], "big")
            n += 1
    return n


def run_scapy(path: str) -> int:
    import logging

    logging.getLogger("scapy").setLevel(logging.ERROR)
    from scapy.layers.inet import UDP  # registers IPv4/UDP dissection
    from scapy.layers.l2 import Ether  # noqa: F401 (registers linktype 1)
    from scapy.utils import PcapReader

    n = 0
    with PcapReader(path) as r:
        for pkt in r:
            raw = bytes(pkt[UDP].payload)
            _op = raw[0]
            n += 1
            if n >= SCAPY_FRAMES:
                break
    return n


# ------------------------------------------------------------------------ measurement
def _child_rss_kb(cmd: list[str]) -> tuple[float, int, int]:
    """Run ``cmd`` in a fresh child that reports its own wall time and children's max RSS."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
            "p = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL); "
            "dt = time.perf_counter() - t; "
            "print(dt, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, p.returncode)")
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), int(out[1]), int(out[2])


def _time(fn: Callable[[], int]) -> tuple[float, int]:
    t = time.perf_counter()
    n = fn()
    return time.perf_counter() - t, n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.wire_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"{QUICK_FRAMES} frames, 3 runs")
    ap.add_argument("--frames", type=int, help="number of frames (overrides --quick)")
    ap.add_argument("--runs", type=int, help="runs per contender (default 5, 3 with --quick)")
    ap.add_argument("--keep", metavar="PATH", help="write the capture here and keep it")
    args = ap.parse_args(argv)
    frames = args.frames or (QUICK_FRAMES if args.quick else FULL_FRAMES)
    runs = args.runs or (3 if args.quick else 5)
    tmpdir = tempfile.mkdtemp(prefix="wire_bench_")
    path = args.keep or os.path.join(tmpdir, "roce.pcap")
    try:
        t0 = time.perf_counter()
        size = build_capture(path, frames)
        print(f"capture: {frames} frames of {size} bytes, {os.path.getsize(path) / 1e6:.1f} MB "
              f"(built in {time.perf_counter() - t0:.2f} s): {path}")
        tshark = shutil.which("tshark")
        inproc: dict[str, Callable[[], int]] = {
            "wire.batch (all columns)": lambda: run_batch(path),
            "wire.batch (3 fields)": lambda: run_batch3(path),
            "dpkt reader + struct": lambda: run_dpkt_struct(path),
            "dpkt full parse": lambda: run_dpkt_full(path),
            f"scapy PcapReader ({min(SCAPY_FRAMES, frames)} frames, extrapolated)":
                lambda: run_scapy(path),
        }
        lossless = [sys.executable, "-m", "sim", "stats", path]
        sub: dict[str, list[str]] = {"lossless stats (end to end)": lossless}
        if tshark:
            sub["tshark -T fields opcode,QP,PSN (end to end)"] = [
                tshark, "-r", path, "-T", "fields", "-e", "infiniband.bth.opcode",
                "-e", "infiniband.bth.destqp", "-e", "infiniband.bth.psn"]
        sub["lossless decode (summary lines, end to end)"] = [
            sys.executable, "-m", "sim", "decode", path]
        if tshark:
            sub["tshark -r (summary lines, end to end)"] = [tshark, "-r", path]
        times: dict[str, list[float]] = {k: [] for k in [*inproc, *sub]}
        rss: dict[str, int] = {}
        counted: dict[str, int] = {}
        env_cwd = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        for r in range(runs):
            for name, fn in inproc.items():
                if name.startswith("scapy") and r >= 1:
                    continue  # slow; one run is enough to see the order of magnitude
                dt, n = _time(fn)
                counted[name] = n
                times[name].append(dt * frames / n)
            for name, cmd in sub.items():
                old = os.getcwd()
                os.chdir(env_cwd)
                try:
                    dt, kb, rc = _child_rss_kb(cmd)
                finally:
                    os.chdir(old)
                if rc != 0:
                    print(f"  {name}: exit status {rc}")
                times[name].append(dt)
                rss[name] = max(rss.get(name, 0), kb)
        self_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(f"\n{runs} runs each, interleaved (scapy: 1 run); seconds for all {frames} frames")
        print(f"{'contender':<58} {'median':>8} {'min..max':>17} {'frames/s':>11} {'RSS MB':>7}")
        med = {}
        for name, ts in times.items():
            if not ts:
                continue
            m = statistics.median(ts)
            med[name] = m
            mem = f"{rss[name] / 1024:.0f}" if name in rss else "-"
            print(f"{name:<58} {m:>8.3f} {min(ts):>8.3f}..{max(ts):<8.3f} {frames / m:>11,.0f} "
                  f"{mem:>7}")
        print(f"(in-process contenders share this process: max RSS {self_rss / 1024:.0f} MB)")
        batch_rss = _child_rss_kb([sys.executable, "-c",
                                   "import sys; sys.path.insert(0, '.'); "
                                   "from bench.wire_bench import run_batch; "
                                   f"run_batch({path!r})"])
        print(f"wire.batch alone in a fresh process: peak RSS {batch_rss[1] / 1024:.0f} MB")
        b = med["wire.batch (all columns)"]
        print("\nratios (the decoding targets: bench/results/2026-11-decoding.md)")
        print(f"  wire.batch frames/s: {frames / b:,.0f} (target >= 2,000,000)")
        print(f"  wire.batch vs dpkt reader + struct: {med['dpkt reader + struct'] / b:.1f}x "
              f"(target >= 8x)")
        print(f"  wire.batch vs dpkt full parse: {med['dpkt full parse'] / b:.1f}x")
        sc = next(k for k in med if k.startswith("scapy"))
        print(f"  wire.batch vs scapy (extrapolated): {med[sc] / b:.0f}x")
        ls = med["lossless stats (end to end)"]
        tk = next((k for k in med if k.startswith("tshark -T fields")), None)
        if tk:
            print(f"  lossless stats vs tshark, end to end: {med[tk] / ls:.1f}x (target >= 5x)")
        else:
            print("  tshark not installed: no end-to-end comparison")
        dec = med["lossless decode (summary lines, end to end)"]
        ts = med.get("tshark -r (summary lines, end to end)")
        if ts:
            print(f"  lossless decode vs tshark -r, end to end: {ts / dec:.2f}x "
                  f"(target >= 1x)")
        if frames < FULL_FRAMES:
            print(f"  (--quick: {frames} frames; the targets are set on {FULL_FRAMES}; fixed "
                  "costs such as interpreter start weigh more here)")
    finally:
        if not args.keep:
            shutil.rmtree(tmpdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Crafting and per-frame decoding speed: ``python -m bench.craft_bench [--quick]``.

Crafting (RoCEv2 RC_RDMA_WRITE_MIDDLE, 1024-byte payload = 1082-byte frames, PSN counting up,
valid IPv4 checksum and ICRC), written to a pcap file:

* ``wire bulk``: :class:`wire.template.RoceTemplate` ``stamp`` +
  :meth:`wire.pcapio.CaptureWriter.write_frames` (the library's bulk API);
* ``lossless craft --flow`` end to end (a subprocess: process start included);
* ``wire.build`` per frame (the general builder, for reference);
* Scapy: ``Ether()/IP()/UDP(dport=4791)/BTH(psn=i)/Raw(...)`` (``scapy.contrib.roce``
  computes the ICRC) and ``wrpcap``, on a subset, extrapolated (labelled so).

Decoding one frame into Python objects: ``wire.dissect`` then ``bth.psn`` (lazy: the
boundaries and length checks at once, only the layer read decoded, the IPv4 checksum and
the ICRC not checked because ``problems`` is not read), the same with ``problems`` read
(every check run), and ``wire.dissect`` + ``to_dict()`` (every field of every layer
formatted) against dpkt's full parse (``dpkt.ethernet.Ethernet``: Ethernet, IPv4, UDP;
dpkt has no BTH and checks no checksum).  ``--decode-only`` runs just this table.

Every contender runs ``--runs`` times, interleaved; the table shows medians, the spread
(min-max) and our ratio to each peer.  A peer that is not installed is reported as skipped.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

from bench.sim_bench import _available

LAYERS = {"ipv4": {"src": "10.0.0.1", "dst": "10.0.0.2", "ecn": 2}, "udp": {},
          "bth": {"opcode": "RC_RDMA_WRITE_MIDDLE", "dest_qp": 7, "psn": 0},
          "payload": {"length": 1024}}
FULL, QUICK = 100_000, 10_000
SCAPY_FRAMES = 1_000
DECODE_FRAMES = 20_000


def ours_bulk(path: str, n: int) -> int:
    from wire.pcapio import CaptureWriter
    from wire.template import RoceTemplate

    t = RoceTemplate(LAYERS)
    with CaptureWriter(path) as w:
        return w.write_frames(t.stamp(n), range(0, n * 88, 88))


def ours_build(path: str, n: int) -> int:
    from wire import build
    from wire.pcapio import CaptureWriter

    layers = {k: dict(v) for k, v in LAYERS.items()}
    with CaptureWriter(path) as w:
        for i in range(n):
            layers["bth"]["psn"] = i & 0xFFFFFF
            w.write(build(layers), ts_ns=i * 88)
    return n


def ours_cli(path: str, n: int) -> int:
    import json

    subprocess.run([sys.executable, "-m", "sim", "craft", "--flow", json.dumps(LAYERS),
                    "--count", str(n), "--gap-ns", "88", "-o", path, "-q"], check=True)
    return n


def scapy_craft(path: str, n: int) -> int:
    from scapy.contrib.roce import BTH
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw
    from scapy.utils import wrpcap

    pay = Raw(b"\0" * 1024)
    pkts = [Ether() / IP(src="10.0.0.1", dst="10.0.0.2") / UDP(sport=49152, dport=4791)
            / BTH(opcode=7, dqpn=7, psn=i) / pay for i in range(n)]
    wrpcap(path, pkts)
    return n


def decode_ours(frames: list[bytes]) -> int:
    from wire import dissect

    n = 0
    for f in frames:
        d = dissect(f)
        n += d.get("bth")["psn"] >= 0
    return n


def decode_ours_checked(frames: list[bytes]) -> int:
    from wire import dissect

    n = 0
    for f in frames:
        d = dissect(f)
        n += d.get("bth")["psn"] >= 0 and not d.problems
    return n


def decode_ours_all(frames: list[bytes]) -> int:
    from wire import dissect

    n = 0
    for f in frames:
        n += len(dissect(f).to_dict())
    return n


def decode_dpkt(frames: list[bytes]) -> int:
    import dpkt

    n = 0
    for f in frames:
        e = dpkt.ethernet.Ethernet(f)
        n += len(e.data.data.data) > 0  # the UDP payload (BTH...) as bytes
    return n


def _table(title: str, rows: dict[str, tuple[list[float], int]], ours: list[str],
           unit: str) -> None:
    print(f"\n{title}")
    print(f"{'contender':<44} {'median s':>9} {'spread s':>15} {unit + '/s':>14}")
    rate = {}
    for name, (times, count) in rows.items():
        med = statistics.median(times)
        rate[name] = count / med if med else float("inf")
        print(f"{name:<44} {med:>9.3f} {min(times):>7.3f}-{max(times):<7.3f} "
              f"{rate[name]:>14,.0f}")
    peers = [n for n in rows if n not in ours]
    for o in ours:
        if o in rate:
            ratios = ", ".join(f"{rate[o] / rate[p]:,.1f}x {p}" for p in peers)
            print(f"  {o}: {ratios}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.craft_bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help=f"{QUICK} frames, 2 runs")
    ap.add_argument("--frames", type=int, help="frames to craft per run")
    ap.add_argument("--runs", type=int, help="runs per contender (default 3, 2 with --quick)")
    ap.add_argument("--decode-only", action="store_true", help="only the decoding table")
    a = ap.parse_args(argv)
    n = a.frames or (QUICK if a.quick else FULL)
    runs = a.runs or (2 if a.quick else 3)
    tmp = tempfile.mkdtemp(prefix="craft_bench_")
    try:
        path = os.path.join(tmp, "out.pcap")
        contenders: dict[str, tuple[Callable[[str, int], int], int]] = {
            "wire bulk (RoceTemplate.stamp + write_frames)": (ours_bulk, n),
            "lossless craft --flow (end to end)": (ours_cli, n),
            "wire.build per frame": (ours_build, max(n // 10, 1)),
        }
        if _available("scapy"):
            contenders[f"scapy ({min(SCAPY_FRAMES, n)} frames, extrapolated)"] = (
                scapy_craft, min(SCAPY_FRAMES, n))
        else:
            print("scapy: not installed, skipped")
        if a.decode_only:
            contenders = {}
        times: dict[str, list[float]] = {k: [] for k in contenders}
        for _ in range(runs):
            for name, (fn, count) in contenders.items():
                t0 = time.perf_counter()
                fn(path, count)
                times[name].append(time.perf_counter() - t0)
        print(f"python -m bench.craft_bench {' '.join(argv or sys.argv[1:])}".rstrip())
        if contenders:
            _table(f"Crafting 1082-byte RoCEv2 frames with valid ICRC into a pcap; {n} frames "
                   f"(fewer where noted, rates per frame); median of {runs}",
                   {k: (v, contenders[k][1]) for k, v in times.items()},
                   ["wire bulk (RoceTemplate.stamp + write_frames)",
                    "lossless craft --flow (end to end)"], "frames")

        ours_bulk(path, DECODE_FRAMES)
        from wire import read

        frames = [r.data for r in read(path)]
        dec: dict[str, Callable[[list[bytes]], int]] = {
            "wire.dissect, bth.psn (checks not read)": decode_ours,
            "wire.dissect, bth.psn + problems (all checks)": decode_ours_checked,
            "wire.dissect + to_dict() (every field)": decode_ours_all}
        if _available("dpkt"):
            dec["dpkt full parse (Ethernet/IPv4/UDP)"] = decode_dpkt
        else:
            print("dpkt: not installed, skipped")
        dtimes: dict[str, list[float]] = {k: [] for k in dec}
        for _ in range(runs):
            for name, fn in dec.items():
                t0 = time.perf_counter()
                fn(frames)
                dtimes[name].append(time.perf_counter() - t0)
        _table(f"Decoding one frame into Python objects, {len(frames)} frames in memory; "
               f"median of {runs}", {k: (v, len(frames)) for k, v in dtimes.items()},
               list(dec)[:3], "frames")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

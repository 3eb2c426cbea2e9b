"""HPCC's DCQCN incast (``bench/hpcc_incast.toml``) as whole processes, interleaved:

* the simulation from the library (build the fabric file, run it; nothing recorded), with the
  file's dynamic PFC thresholds and with static ones at the dynamic threshold's level when one
  PG holds the pool (alpha x B / (1 + alpha): 3,556 KB of 32,000) -- what the dynamic
  threshold costs;
* ``lossless replay FILE --no-plots`` (every recorded output: the bottleneck's pcap, the time
  series, the events) and ``lossless replay FILE`` (the plots too) -- what recording costs
  over the simulation;
* optionally a peer command (``--peer "COMMAND"``: HPCC's ns-3 built by hand and run on the
  same incast, ``bench/hpcc_ns3/README.md``), timed the same way.

Each figure is the CPU time (user + system) of the child process and the processes it waits
for, median of ``--runs`` rounds; a round runs every contender once, in turn.

``python -m bench hpcc [--runs N] [--ms X] [--peer "COMMAND"]``
"""

from __future__ import annotations

import argparse
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
FILE = os.path.join(HERE, "hpcc_incast.toml")
#: Static XOFF at the dynamic threshold's level with one PG holding the pool:
#: alpha x B / (1 + alpha) with alpha 1/8 and B 32,000 KB.
STATIC_XOFF_KB = 32_000 / 9

_LIB = """
import sys
from sim.scenarios.loader import build
def value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
params = {k: value(v) for k, v in (a.split("=", 1) for a in sys.argv[2:])}
sc = build(sys.argv[1], params)
sc.fabric.run(sc.duration_ps)
print(sum(p.tx_packets for n in sc.fabric.nodes.values() for p in n.ports.values()))
"""


def _cpu(cmd: list[str]) -> tuple[float, str]:
    """CPU seconds (user + system) of ``cmd`` run to the end, and its standard output."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as e:
        raise SystemExit(f"python -m bench hpcc: cannot run {cmd[0]!r}: {e.strerror}") from None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr[-500:]}")
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime), done.stdout


def contenders(ms: float, out: str, peer: str | None) -> dict[str, list[str]]:
    py = sys.executable
    dur = [f"run.duration_ms={float(ms)!r}"]
    static = ["switch.xoff_mode=static", f"switch.xoff_kb={STATIC_XOFF_KB:.3f}"]
    cli = [py, "-m", "sim", "replay", FILE, "-p", f"duration_ms={ms:g}", "--force",
           "--out", out]
    c = {"library, dynamic thresholds": [py, "-c", _LIB, FILE, *dur],
         "library, static thresholds": [py, "-c", _LIB, FILE, *dur, *static],
         "lossless replay --no-plots": [*cli, "--no-plots"],
         "lossless replay (every output)": cli}
    if peer:
        c["peer: " + peer] = shlex.split(peer)
    return c


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench hpcc", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="rounds (median reported)")
    ap.add_argument("--ms", type=float, default=50.0, help="simulated time, ms")
    ap.add_argument("--peer", help="a peer's command line, timed in every round")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cs = contenders(a.ms, os.path.join(tmp, "out"), a.peer)
        times: dict[str, list[float]] = {k: [] for k in cs}
        hops = {}
        for _ in range(a.runs):
            for name, cmd in cs.items():
                t, out = _cpu(cmd)
                times[name].append(t)
                if name.startswith("library"):
                    hops[name] = int(out.split()[-1])
    med = {k: statistics.median(v) for k, v in times.items()}
    lib = med["library, dynamic thresholds"]
    n = hops["library, dynamic thresholds"]
    print(f"HPCC's DCQCN incast ({os.path.relpath(FILE)}), {a.ms:g} ms simulated; CPU s of the "
          f"whole process, median of {a.runs} interleaved rounds; {n:,} packet-hops")
    print(f"{'contender':<40}{'CPU s':>8}{'spread':>16}{'hops/CPU s':>12}")
    for k, v in times.items():
        print(f"{k:<40}{med[k]:>8.2f}{f'{min(v):.2f}-{max(v):.2f}':>16}{n / med[k]:>12,.0f}")
    print(f"  dynamic / static thresholds (library): {lib / med['library, static thresholds']:.2f}x"
          f" ({hops['library, static thresholds']:,} packet-hops with static)")
    for k in ("lossless replay --no-plots", "lossless replay (every output)"):
        print(f"  {k} / library: {med[k] / lib:.2f}x")
    if a.peer:
        print(f"  lossless replay --no-plots / peer: "
              f"{med['lossless replay --no-plots'] / med['peer: ' + a.peer]:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

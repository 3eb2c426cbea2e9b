"""Memory through the CLI: peak RSS of ``lossless replay`` against packet-hops.

Each case runs in a fresh subprocess what ``lossless replay SCENARIO -p KEY=VALUE ...`` runs
with its default outputs (summary.json, timeseries.npz, events.jsonl, bottleneck.pcap within
the default 1024 MB capture limit, the PNG plots) into a temporary folder, and reports the
packet-hops (frames that left an egress port, switch or NIC), the wall and CPU time
(``ru_utime + ru_stime``: the machine is shared, CPU time is the steadier), the peak resident
set size of the process (``resource.getrusage(RUSAGE_SELF).ru_maxrss``, build, run, outputs
and plots included) and the peak over hops.  Memory bounded in the duration shows as a peak
that stays about flat while the hops double; the development's target was a 10M-hop run under
500 MB (bench/results/2026-12-targets.md).

    python -m bench mem                      # incast 2, 4, 8 ms
    python -m bench mem --quick              # incast 1 and 2 ms
    python -m bench mem --big                # also leaf_spine at load 0.9 for 57 ms (~10M hops)
    python -m bench mem --tree /tmp/before   # the same against another checkout (PYTHONPATH)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: The child: build the scenario, run it through run_scenario (what ``lossless replay`` calls)
#: with the CLI's defaults, count the hops, print one JSON line.
_CHILD = r"""
import json, resource, sys, time
from sim.scenarios import loader
from sim.study.results import run_scenario
name, params, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
t0 = time.perf_counter()
sc = loader.build(name, params)
run_scenario(sc, out_dir=out, force=True, progress=False, warn=lambda _m: None)
wall = time.perf_counter() - t0
hops = sum(p.tx_packets for n in sc.fabric.nodes.values() for p in n.ports.values())
ru = resource.getrusage(resource.RUSAGE_SELF)
peak_kb = ru.ru_maxrss  # KiB on Linux
print(json.dumps({"hops": hops, "wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime,
                  "peak_bytes": peak_kb * 1024}))
"""

#: About 10M packet-hops: the 8-host leaf_spine at load 0.9 moves ~176k hops per simulated ms.
BIG = ("leaf_spine", {"load": 0.9, "duration_ms": 57.0})


def run_case(name: str, params: dict, tree: str) -> dict:
    """One case in a fresh interpreter whose ``sim`` comes from ``tree``."""
    env = dict(os.environ, PYTHONPATH=tree, MPLBACKEND="Agg")
    with tempfile.TemporaryDirectory(prefix="mem_bench-") as d:
        out = os.path.join(d, "out")
        r = subprocess.run([sys.executable, "-c", _CHILD, name, json.dumps(params), out],
                           env=env, capture_output=True, text=True, cwd=d, check=False)
    if r.returncode:
        raise SystemExit(f"mem_bench: {name} {params}: exit {r.returncode}\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench mem", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="incast 1 and 2 ms only")
    ap.add_argument("--ms", type=float, action="append",
                    help="incast duration, ms (repeatable; default 2, 4, 8)")
    ap.add_argument("--big", action="store_true",
                    help=f"also {BIG[0]} {BIG[1]} (about 10M packet-hops, a few minutes)")
    ap.add_argument("--only-big", action="store_true", help="only the ~10M-hop case")
    ap.add_argument("--tree", default=_ROOT, help="checkout to measure (default this one)")
    a = ap.parse_args(argv)
    cases = [] if a.only_big else [("incast", {"duration_ms": ms})
                                   for ms in (a.ms or ([1.0, 2.0] if a.quick else [2.0, 4.0, 8.0]))]
    if a.big or a.only_big:
        cases.append(BIG)
    print(f"lossless replay with default outputs, peak RSS per run ({a.tree})")
    print(f"{'case':<40}{'pkt-hops':>12}{'wall s':>9}{'cpu s':>8}{'peak MB':>10}"
          f"{'bytes/hop':>11}")
    for name, params in cases:
        r = run_case(name, params, a.tree)
        label = name + " " + " ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                      for k, v in params.items())
        print(f"{label:<40}{r['hops']:>12,}{r['wall_s']:>9.1f}{r['cpu_s']:>8.1f}"
              f"{r['peak_bytes'] / 1e6:>10.1f}"
              f"{r['peak_bytes'] / max(r['hops'], 1):>11.1f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Measure DCQCN (paper preset) against the fluid model's fixed point
(docs/explanation/dcqcn.md).

N long flows at line rate share one 40 Gb/s bottleneck (the ``incast`` scenario with
``cc=dcqcn``, a 12 MB buffer and a 1000 KB XOFF so that ECN, not PFC, holds the queue).  For
each N it prints the bottleneck utilisation, Jain's index of the flow throughputs and the
time-weighted mean queue over the second half of the run beside q* of the fluid model
(ECNDELAY, Zhu et al., CoNEXT 2016, Sec. 3; solved numerically with the DCQCN paper's
constants and tau* = 50 us, see docs/explanation/dcqcn.md, "Measured").

    python docs/examples/dcqcn_fixed_point.py [duration_ms] [N ...]
"""

from __future__ import annotations

import sys
import tempfile
import time

from sim.study.results import queue_mean_bytes
from sim.study.results import run_scenario as run

#: q* (KB) of the fluid model's fixed point (40 Gb/s, paper constants), solved numerically.
FLUID_Q_KB = {1: 11.2, 2: 20.2, 4: 41.8, 10: 122.6}


def main(argv: list[str]) -> None:
    ms = float(argv[0]) if argv else 100.0
    ns = [int(x) for x in argv[1:]] or [1, 2, 4, 10]
    print(f"DCQCN paper preset, 40 Gb/s, {ms:g} ms per run; queue = mean over the 2nd half")
    print(f"{'N':>3} {'util':>7} {'jain':>7} {'queue KB':>9} {'fluid q* KB':>12} "
          f"{'CNPs':>6} {'pauses':>6} {'wall s':>7}")
    for n in ns:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            s = run("incast", {"cc": "dcqcn", "preset": "paper", "link_gbps": 40,
                               "senders": n, "duration_ms": ms, "xoff_kb": 1000,
                               "buffer_kb": 12000}, out_dir=out, plots=False,
                    write_captures=False)
            wall = time.perf_counter() - t0
            q = queue_mean_bytes(out, from_frac=0.5) / 1000
        print(f"{n:>3} {s['bottleneck']['utilisation']:>7.4f} {s['jain_index'] or 0:>7.4f} "
              f"{q:>9.1f} {FLUID_Q_KB.get(n, float('nan')):>12.1f} {s['totals']['cnps']:>6} "
              f"{s['totals']['pauses']:>6} {wall:>7.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])

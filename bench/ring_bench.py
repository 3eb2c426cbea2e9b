"""The ring engine, the chunk engine (trees and NVLS trees) and the steady loops against
the job that drives every transfer, and AllReduce at 1,024 and 8,192 GPUs (the ring, and
NCCL's picks: the tree for middle sizes, the NVLS tree for large ones): figures, CPU time
and peak memory.

Part 1 runs each case of :data:`PAIRS` (``lossless collective``'s size,
:func:`sim.scenarios.collective.run_size`, flow fidelity) both ways, alternately (job,
fast, job, fast ... ``--runs`` pairs): the job (``engine="job"``, ``steady=False``: every
transfer and every loop) against the ring engine (``engine="ring"``), the chunk engine
(``engine="chunk"``) or the steady loops
(``steady=True``), and prints the simulated times, their ratio, the CPU time of each
(median) and the speed-up.  Part 2 runs each case of :data:`POOLED` on the chunk engine
without and with pooled NVLink (``pool_nvlink``) the same way.  Part 3 (without
``--quick``) runs :data:`TARGETS` through the command line in a child process each and
prints its CPU time and peak resident memory against the issue's targets (``--huge`` adds
65,536 GPUs, pooled: about 15 minutes).  CPU times by ``time.process_time`` / ``getrusage``, the
machine being shared: trust the ratios.

    python -m bench ring            # both parts, 3 pairs each
    python -m bench ring --quick    # part 1's small cases, 1 pair
    python -m bench ring --only tree --runs 1   # the cases whose name has "tree"
    python -m bench ring --only pooled          # pooled NVLink: part 2 and its targets
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time
from typing import Any

from sim.scenarios.base import resolve_params
from sim.scenarios.collective import collective_params, run_size

MIB = 1 << 20
GIB = 1 << 30
RING = {"algorithm": "ring"}
NVLS = {"algorithm": "nvls_tree"}
TREE = {"algorithm": "tree"}

#: (name, fabric, -p parameters, size, the fast way's run_size keywords, quick)
PAIRS: tuple[tuple[str, str, dict[str, Any], int, dict[str, Any], bool], ...] = (
    ("rail 4x8, 8 ch, ring 64M, host side", "rail", {"nodes": 4, "gpus_per_node": 8},
     64 * MIB, {**RING, "protocol": "simple", "channels": 8, "engine": "ring"}, True),
    ("rail 16x8, ring 256M, host side", "rail", {"nodes": 16, "gpus_per_node": 8},
     256 * MIB, {**RING, "engine": "ring"}, False),
    ("rail 16x8, ring 1G, host side", "rail", {"nodes": 16, "gpus_per_node": 8},
     GIB, {**RING, "engine": "ring"}, False),
    ("fat-tree k=8, 16x8, ring 256M, ECMP", "fattree", {"k": 8, "gpus_per_node": 8},
     256 * MIB, {**RING, "engine": "ring"}, False),
    ("fat-tree k=8, 16x8, ring 256M, 4 QPs", "fattree", {"k": 8, "gpus_per_node": 8},
     256 * MIB, {**RING, "engine": "ring", "qps": 4}, False),
    ("rail 2x2, 2 ch, ring 1G: steady loops", "rail", {"nodes": 2, "gpus_per_node": 2},
     GIB, {**RING, "protocol": "simple", "channels": 2, "engine": "job"}, True),
    ("rail 4x8, ring 16G: steady loops", "rail", {"nodes": 4, "gpus_per_node": 8,
                                                  "limit_ms": 1000},
     16 * GIB, {**RING, "engine": "job", "channels": 8}, False),
    ("rail 2x4, NVLS tree 64M, host side", "rail", {"nodes": 2, "gpus_per_node": 4},
     64 * MIB, {**NVLS, "engine": "chunk"}, True),
    ("rail 4x8, NVLS tree 64M, host side", "rail", {"nodes": 4, "gpus_per_node": 8},
     64 * MIB, {**NVLS, "engine": "chunk"}, True),
    ("rail 16x8, NVLS tree 256M, host side", "rail", {"nodes": 16, "gpus_per_node": 8},
     256 * MIB, {**NVLS, "engine": "chunk"}, False),
    ("fat-tree k=8, 16x8, NVLS tree 64M", "fattree", {"k": 8, "gpus_per_node": 8},
     64 * MIB, {**NVLS, "engine": "chunk"}, False),
    ("rail 2x4, 1 ch, tree 4M, host side", "rail", {"nodes": 2, "gpus_per_node": 4},
     4 * MIB, {**TREE, "protocol": "simple", "channels": 1, "engine": "chunk"}, True),
    ("rail 4x8, tree/LL128 16M, host side", "rail", {"nodes": 4, "gpus_per_node": 8},
     16 * MIB, {**TREE, "protocol": "ll128", "engine": "chunk"}, True),
    ("fat-tree k=8, 16x8, tree/LL128 16M", "fattree", {"k": 8, "gpus_per_node": 8},
     16 * MIB, {**TREE, "protocol": "ll128", "engine": "chunk"}, False),
    ("fat-tree k=8, 16x8, tree/LL128 64M", "fattree", {"k": 8, "gpus_per_node": 8},
     64 * MIB, {**TREE, "protocol": "ll128", "engine": "chunk"}, False),
)

#: (name, fabric, -p parameters, size): NVLS trees (NCCL's pick at these sizes) on the chunk
#: engine without and with pooled NVLink
POOLED: tuple[tuple[str, str, dict[str, Any], int], ...] = (
    ("pooled: rail 4x8, NVLS tree 64M", "rail", {"nodes": 4, "gpus_per_node": 8}, 64 * MIB),
    ("pooled: fat-tree k=4, 2x8, NVLS tree 1G", "fattree", {"k": 4, "gpus_per_node": 8},
     GIB),
    ("pooled: fat-tree k=8, 16x8, NVLS tree 256M", "fattree", {"k": 8, "gpus_per_node": 8},
     256 * MIB),
    ("pooled: fat-tree k=8, 16x8, NVLS tree 4G", "fattree", {"k": 8, "gpus_per_node": 8},
     4 * GIB),
    ("pooled: fat-tree k=16, 128x8, NVLS tree 1G", "fattree", {"k": 16, "gpus_per_node": 8},
     GIB),
    ("pooled: fat-tree k=16, 128x8, NVLS tree 4G", "fattree", {"k": 16, "gpus_per_node": 8},
     4 * GIB),
)

_POOL = ["--fidelity", "flow", "--pool-nvlink"]

#: (name, lossless collective arguments, the issue's target CPU s)
TARGETS: tuple[tuple[str, list[str], float], ...] = (
    ("1,024 GPUs, fat-tree k=16, ring 1G", ["allreduce", "-b", "1G", "-e", "1G", "--fabric",
                                           "fattree", "-p", "k=16", "-p", "gpus_per_node=8",
                                           "--algo", "ring", "--fidelity", "flow"], 60),
    ("1,024 GPUs, fat-tree k=16, ring 4G", ["allreduce", "-b", "4G", "-e", "4G", "--fabric",
                                           "fattree", "-p", "k=16", "-p", "gpus_per_node=8",
                                           "--algo", "ring", "--fidelity", "flow"], 60),
    ("8,192 GPUs, fat-tree k=32, ring 1G", ["allreduce", "-b", "1G", "-e", "1G", "--fabric",
                                           "fattree", "-p", "k=32", "-p", "gpus_per_node=8",
                                           "--algo", "ring", "--fidelity", "flow"], 120),
    ("1,024 GPUs, k=16, NVLS tree (NCCL's pick) 1G",
     ["allreduce", "-b", "1G", "-e", "1G", "--fabric", "fattree", "-p", "k=16", "-p",
      "gpus_per_node=8", "--fidelity", "flow"], 60),
    ("8,192 GPUs, k=32, NVLS tree (NCCL's pick) 1G",
     ["allreduce", "-b", "1G", "-e", "1G", "--fabric", "fattree", "-p", "k=32", "-p",
      "gpus_per_node=8", "--fidelity", "flow"], 120),
    ("8,192 GPUs, k=32, tree/LL128 (NCCL's pick) 16M",
     ["allreduce", "-b", "16M", "-e", "16M", "--fabric", "fattree", "-p", "k=32", "-p",
      "gpus_per_node=8", "--fidelity", "flow"], 120),
    ("pooled: 1,024 GPUs, k=16, NVLS tree 4G",
     ["allreduce", "-b", "4G", "-e", "4G", "--fabric", "fattree", "-p", "k=16", "-p",
      "gpus_per_node=8", *_POOL], 60),
    ("pooled: 8,192 GPUs, k=32, NVLS tree 1G",
     ["allreduce", "-b", "1G", "-e", "1G", "--fabric", "fattree", "-p", "k=32", "-p",
      "gpus_per_node=8", *_POOL], 120),
)
#: --huge: (name, arguments, target CPU s)
HUGE = (("pooled: 65,536 GPUs, k=64, NVLS tree 1G",
         ["allreduce", "-b", "1G", "-e", "1G", "--fabric", "fattree", "-p", "k=64", "-p",
          "gpus_per_node=8", *_POOL], 900),)


def _one(kind: str, p: dict[str, Any], size: int, kw: dict[str, Any]
         ) -> tuple[float, dict[str, Any]]:
    t0 = time.process_time()
    row = run_size("allreduce", size, kind, p, inplace=False, fidelity="flow", **kw)
    return time.process_time() - t0, row


#: Run in the child: the command, then its own peak resident memory (VmHWM, kB) on stderr.
#: Not getrusage's children figure: a child forked from this process counts this process's
#: pages until it execs (a first run read 7.6 GB after part 1 for a 0.42 GB command).
_CHILD = ("import sys\nfrom sim.cli import main\ntry:\n    rc = main(sys.argv[1:])\n"
          "finally:\n    hwm = [ln for ln in open('/proc/self/status') if ln.startswith("
          "'VmHWM')]\n    print(hwm[0].split()[1] if hwm else 0, file=sys.stderr)\n"
          "raise SystemExit(rc)\n")


def _child(args: list[str]) -> tuple[float, float, str]:
    """CPU seconds and peak resident GB of ``lossless collective ARGS`` in a child (its
    own VmHWM, Linux), and its busbw line."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = subprocess.run([sys.executable, "-c", _CHILD, "collective", *args],
                       capture_output=True, text=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    row = next(line for line in r.stdout.splitlines() if line and not line.startswith("#"))
    peak_kb = int(r.stderr.strip().splitlines()[-1])
    return cpu, peak_kb * 1024 / 1e9, " ".join(row.split()[5:8])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench ring", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="part 1's small cases, 1 pair")
    ap.add_argument("--runs", type=int, default=3, help="pairs per case (default 3)")
    ap.add_argument("--targets", action="store_true", help="part 2 only")
    ap.add_argument("--only", metavar="TEXT", help="the cases whose name has TEXT")
    ap.add_argument("--huge", action="store_true",
                    help="part 3 with 65,536 GPUs too (about 15 minutes, 8 GB)")
    args = ap.parse_args(argv)
    runs = 1 if args.quick else max(1, args.runs)
    print(f"{'case':40s} {'job us':>11s} {'fast us':>11s} {'fast/job':>9s} "
          f"{'job CPU s':>9s} {'fast CPU s':>10s} {'speed-up':>8s}  fast way")
    for name, kind, given, size, kw, quick in PAIRS:
        if args.targets or (args.quick and not quick) or (args.only and args.only not in name):
            continue
        p = resolve_params(collective_params(), given)
        job_kw = {**kw, "engine": "job", "steady": False}
        cpu: dict[str, list[float]] = {"job": [], "fast": []}
        rows: dict[str, dict[str, Any]] = {}
        for _ in range(runs):
            for way, k in (("job", job_kw), ("fast", kw)):  # interleaved
                t, rows[way] = _one(kind, p, size, k)
                cpu[way].append(t)
        job, fast = rows["job"], rows["fast"]
        if job["error"] or fast["error"]:
            print(f"{name:40s} failed: {job['error'] or fast['error']}")
            return 1
        how = ("ring engine" if fast.get("engine") == "ring" else
               "chunk engine" if fast.get("engine") == "chunk" else
               f"{fast['steady']['loops_run']} of {fast['steady']['loops']} loops"
               if fast.get("steady") else "job")
        cj, cf = statistics.median(cpu["job"]), statistics.median(cpu["fast"])
        print(f"{name:40s} {job['time_us']:11.2f} {fast['time_us']:11.2f} "
              f"{fast['time_ps'] / job['time_ps']:9.6f} {cj:9.2f} {cf:10.2f} "
              f"{cj / cf:7.1f}x  {how}", flush=True)
    if not args.targets:
        print(f"\n{'case':45s} {'engine us':>11s} {'pooled us':>11s} {'ratio':>8s} "
              f"{'CPU s':>7s} {'pooled':>7s} {'speed-up':>8s}")
    for name, kind, given, size in POOLED:
        if args.targets or (args.quick and size > 64 * MIB) or (
                args.only and args.only not in name):
            continue
        p = resolve_params(collective_params(), given)
        cpu = {False: [], True: []}
        rows = {}
        for _ in range(runs):
            for pool in (False, True):  # interleaved
                t, rows[pool] = _one(kind, p, size, {**NVLS, "engine": "chunk",
                                                     "pool_nvlink": pool})
                cpu[pool].append(t)
        base, pooled = rows[False], rows[True]
        if base["error"] or pooled["error"] or not pooled.get("nvlink_pooled"):
            print(f"{name:45s} failed: {base['error'] or pooled['error'] or 'not pooled'}")
            return 1
        cb, cp = statistics.median(cpu[False]), statistics.median(cpu[True])
        print(f"{name:45s} {base['time_us']:11.2f} {pooled['time_us']:11.2f} "
              f"{pooled['time_ps'] / base['time_ps']:8.5f} {cb:7.2f} {cp:7.2f} "
              f"{cb / cp:7.1f}x", flush=True)
    if args.quick:
        return 0
    print(f"\n{'target':40s} {'CPU s':>8s} {'goal s':>7s} {'peak GB':>8s}  time us, algbw, "
          f"busbw")
    for name, cli, goal_s in TARGETS + (HUGE if args.huge else ()):
        if args.only and args.only not in name:
            continue
        cpu_s, peak, figures = _child(cli)
        print(f"{name:40s} {cpu_s:8.1f} {goal_s:7.0f} {peak:8.2f}  {figures}", flush=True)
    return 0

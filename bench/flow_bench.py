"""Flow fidelity against packets: the same collective at both fidelities, interleaved.

Each case runs ``lossless collective``'s size (:func:`sim.scenarios.collective.run_size`, one
out-of-place iteration) with ``fidelity="packet"`` and ``fidelity="flow"``, alternately
(packet, flow, packet, flow ... ``--runs`` pairs), and prints the simulated times, their
ratio (flow over packet: the flow fidelity's error), the CPU time of each (median) and
their ratio (the speed-up), and whether the packets met PFC pauses or ECN marks (where the
fluid model, which has neither, may part from them).  CPU time by ``time.process_time``,
the machine being shared: trust the ratios.

    python -m bench flow            # the cases below, 3 pairs each
    python -m bench flow --quick    # the small cases, 1 pair
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from sim.scenarios.base import resolve_params
from sim.scenarios.collective import collective_params, run_size

MIB = 1 << 20

#: (name, fabric kind, -p parameters, collective, size bytes, run_size keywords, quick)
CASES: tuple[tuple[str, str, dict[str, Any], str, int, dict[str, Any], bool], ...] = (
    ("rail 2x4, ring 16M, network alone", "rail", {"nccl_host": False}, "allreduce",
     16 * MIB, {"algorithm": "ring", "protocol": "simple"}, True),
    ("rail 2x4 without NVLink, ring 16M", "rail", {"nccl_host": False, "nvlink": False},
     "allreduce", 16 * MIB, {"algorithm": "ring", "protocol": "simple"}, True),
    ("fat-tree k=4, 16 GPUs, ring 16M, 1 QP", "fattree",
     {"k": 4, "gpus_per_node": 1, "nvlink": False, "nccl_host": False}, "allreduce",
     16 * MIB, {"algorithm": "ring", "protocol": "simple"}, True),
    ("fat-tree k=4, 16 GPUs, ring 16M, 16 QPs", "fattree",
     {"k": 4, "gpus_per_node": 1, "nvlink": False, "nccl_host": False}, "allreduce",
     16 * MIB, {"algorithm": "ring", "protocol": "simple", "qps": 16}, False),
    ("rail 4x8, NCCL's pick and host side, 256M", "rail", {"nodes": 4, "gpus_per_node": 8},
     "allreduce", 256 * MIB, {}, False),
    ("rail 4x8 no PXN, AllToAll 16M (incast)", "rail",
     {"nodes": 4, "gpus_per_node": 8, "spines": 4, "pxn": False, "nccl_host": False},
     "alltoall", 16 * MIB, {}, False),
    ("rail 2x8, 800G behind PCIe Gen5, ring 64M", "rail",
     {"gpus_per_node": 8, "link_gbps": 800, "pcie_gen": 5, "nccl_host": False},
     "allreduce", 64 * MIB, {"algorithm": "ring", "protocol": "simple"}, False),
    ("SuperPOD 1 SU, ring 64M, network alone", "superpod", {"nccl_host": False},
     "allreduce", 64 * MIB, {"algorithm": "ring", "protocol": "simple"}, False),
    ("rail 2x4, a NIC at 100G, ring 16M", "rail",
     {"nccl_host": False, "faults": [{"kind": "degrade", "node": 6, "port": 0,
                                       "rate_gbps": 100}]},
     "allreduce", 16 * MIB, {"algorithm": "ring", "protocol": "simple"}, True),
    ("rail 2x4 no NVLink, spine link down, 16M", "rail",
     {"nccl_host": False, "nvlink": False, "reliable": True, "ack_timeout": 8,
      "detect_us": 5, "converge_us": 5, "limit_ms": 1000,
      "faults": [{"kind": "link_down", "node": 0, "port": 0, "at_us": 100}]},
     "allreduce", 16 * MIB, {"algorithm": "ring", "protocol": "simple"}, False),
)


def _one(kind: str, p: dict[str, Any], coll: str, size: int, kw: dict[str, Any],
         fidelity: str) -> tuple[float, dict[str, Any]]:
    t0 = time.process_time()
    row = run_size(coll, size, kind, p, inplace=False, fidelity=fidelity, **kw)
    return time.process_time() - t0, row


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench flow", description=__doc__.split(
        "\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="the small cases, 1 pair")
    ap.add_argument("--runs", type=int, default=3, help="pairs per case (default 3)")
    ap.add_argument("--only", metavar="TEXT", help="the cases whose name has TEXT")
    args = ap.parse_args(argv)
    runs = 1 if args.quick else max(1, args.runs)
    print(f"{'case':44s} {'packet us':>11s} {'flow us':>11s} {'flow/pkt':>8s} "
          f"{'pkt CPU s':>9s} {'flow CPU s':>10s} {'speed-up':>8s}  packets met")
    worst = 0.0
    for name, kind, given, coll, size, kw, quick in CASES:
        if (args.quick and not quick) or (args.only and args.only not in name):
            continue
        faults = given.get("faults")
        p = resolve_params(collective_params(), {k: v for k, v in given.items()
                                                  if k != "faults"})
        if faults:  # the fault entries of -p fault= (sim.scenarios.common.resolve_faults)
            p["faults"] = faults
        cpu: dict[str, list[float]] = {"packet": [], "flow": []}
        rows: dict[str, dict[str, Any]] = {}
        for _ in range(runs):
            for fidelity in ("packet", "flow"):  # interleaved
                t, rows[fidelity] = _one(kind, p, coll, size, kw, fidelity)
                cpu[fidelity].append(t)
        pk, fl = rows["packet"], rows["flow"]
        if pk["error"] or fl["error"]:
            print(f"{name:44s} failed: {pk['error'] or fl['error']}")
            return 1
        ratio = fl["time_ps"] / pk["time_ps"]
        worst = max(worst, abs(ratio - 1))
        c = pk["counters"]
        met = ", ".join(f"{k} {c[k]}" for k in ("pfc_pauses", "ce_marks", "drops") if c.get(k))
        cp, cf = statistics.median(cpu["packet"]), statistics.median(cpu["flow"])
        print(f"{name:44s} {pk['time_us']:11.2f} {fl['time_us']:11.2f} {ratio:8.3f} "
              f"{cp:9.2f} {cf:10.2f} {cp / cf:7.1f}x  {met or 'nothing'}", flush=True)
    print(f"largest difference in simulated time: {100 * worst:.1f} %")
    return 0

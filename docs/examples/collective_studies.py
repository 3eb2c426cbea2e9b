"""Studies 3 and 4 of docs/explanation/collectives.md: many configurations of ``lossless
collective``, each one :func:`sim.scenarios.collective.run_size` (what the command runs per
size), printed as the Markdown tables the page shows.

    python docs/examples/collective_studies.py ecmp      # study 3: fat-tree ECMP vs rails, QPs
    python docs/examples/collective_studies.py alltoall  # study 4: AllToAll, PFC / DCQCN / lossy

Every figure is simulated on this machine's run; nothing is copied from elsewhere.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from sim.scenarios.base import resolve_params
from sim.scenarios.collective import collective_params, run_size

MIB = 1 << 20


def _run(collective: str, nbytes: int, fabric: str, given: dict[str, Any], **kw: Any
         ) -> dict[str, Any]:
    # the network alone, Ring Simple (the studies are of the fabric: ECMP, PFC, DCQCN)
    params = resolve_params(collective_params(), {"nccl_host": False, **given})
    kw.setdefault("algorithm", "ring")
    kw.setdefault("protocol", "simple")
    t0 = time.perf_counter()
    row = run_size(collective, nbytes, fabric, params, inplace=False, **kw)
    row["wall_s"] = time.perf_counter() - t0
    return row


def _busbw(row: dict[str, Any]) -> str:
    if row["error"]:
        return "incomplete"
    bw = row["busbw_GB_per_s"]
    return f"{bw:.2f}" if bw >= 0.1 else f"{bw:.2g}"


def ecmp(seeds: range = range(4), qps_values: tuple[int, ...] = (1, 4, 16)) -> None:
    """Study 3: ring AllReduce of 64 MiB on 16 GPUs (4 nodes x 4, 4 channels: one per rail),
    400 Gb/s, PFC, no congestion control, on a k=4 fat-tree (a node per pod, ECMP per flow)
    and on a rail-optimised fabric with 4 spines, 1/4/16 QPs per connection, seeds 0-3."""
    fabrics = {
        "fat-tree k=4 (node = pod)": ("fattree", {"k": 4, "gpus_per_node": 4}),
        "rail 4 nodes x 4 GPUs, 4 spines": ("rail", {"nodes": 4, "gpus_per_node": 4,
                                                      "spines": 4}),
    }
    print("| fabric | QPs | busbw per seed (GB/s) | mean | PFC pauses (mean) | "
          "busiest link (seed 0) |")
    print("|---|---|---|---|---|---|")
    for name, (kind, shape) in fabrics.items():
        for q in qps_values:
            rows = [_run("allreduce", 64 * MIB, kind, {**shape, "seed": s}, channels=4,
                         qps=q, details=True) for s in seeds]
            bw = [r["busbw_GB_per_s"] for r in rows if not r["error"]]
            pauses = sum(r["counters"]["pfc_pauses"] for r in rows) / len(rows)
            b = rows[0].get("busiest_link") or {}
            busy = f"{b.get('name', '')} {b.get('utilisation', 0):.0%}" if b else ""
            print(f"| {name} | {q} | {', '.join(_busbw(r) for r in rows)} | "
                  f"{sum(bw) / max(len(bw), 1):.2f} | {pauses:.0f} | {busy} |", flush=True)


def alltoall() -> None:
    """Study 4: AllToAll of 16 MiB on 32 GPUs (rail-optimised, 4 nodes x 8, 4 spines, 8
    channels, 400 Gb/s) without PXN (every send leaves through its GPU's own NIC, so
    cross-rail traffic meets at the spines and the receivers' leaf ports: incast), with PFC
    only, with DCQCN (each preset), and without PFC (NCCL's ACK timeout, a short one, NICs
    that never resend); the same with PXN for contrast."""
    base = {"nodes": 4, "gpus_per_node": 8, "spines": 4, "pxn": False}
    configs = [
        ("PFC, no CC", {}),
        ("PFC + DCQCN (paper)", {"cc": "dcqcn", "preset": "paper"}),
        ("PFC + DCQCN (nvidia)", {"cc": "dcqcn", "preset": "nvidia"}),
        ("PFC + DCQCN (hpcc)", {"cc": "dcqcn", "preset": "hpcc"}),
        ("no PFC, no CC (go-back-N, NCCL's 4.3 s ACK timeout)", {"pfc": False,
                                                                 "limit_ms": 20000}),
        ("no PFC, no CC, ack_timeout=4 (65.5 µs)", {"pfc": False, "ack_timeout": 4}),
        ("no PFC + DCQCN (nvidia), ack_timeout=4", {"pfc": False, "cc": "dcqcn",
                                                   "preset": "nvidia", "ack_timeout": 4}),
        ("no PFC, no CC, reliable=false (NICs that never resend)", {"pfc": False,
                                                                     "reliable": False}),
        ("PXN, PFC, no CC", {"pxn": True}),
    ]
    print("| configuration | busbw (GB/s) | time (µs) | PFC pauses | CE marks | CNPs | drops "
          "| resent (MB) | timeouts | deepest queue (KB) | transfer p50 / p99 / max (µs) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, extra in configs:
        r = _run("alltoall", 16 * MIB, "rail", {**base, **extra}, channels=8)
        c = r["counters"]
        t = r.get("transfer_time_us")
        tt = f"{t['p50']:.1f} / {t['p99']:.1f} / {t['max']:.1f}" if t else "—"
        time_us = "—" if r["error"] else f"{r['time_us']:.1f}"
        print(f"| {name} | {_busbw(r)} | {time_us} | {c['pfc_pauses']} | {c['ce_marks']} | "
              f"{c['cnps']} | {c['drops']} | {c.get('retransmitted_bytes', 0) / 1e6:.1f} | "
              f"{c.get('timeouts', 0)} | {c['max_queue_bytes'] / 1000:.0f} | {tt} |",
              flush=True)


if __name__ == "__main__":
    studies = {"ecmp": ecmp, "alltoall": alltoall}
    if len(sys.argv) != 2 or sys.argv[1] not in studies:
        sys.exit(f"usage: python {sys.argv[0]} {'|'.join(studies)}")
    studies[sys.argv[1]]()

"""Collective speed: what a ``lossless collective`` run costs, by phase.

For each case: NCCL's schedule (:func:`sim.workloads.nccl.schedule`), the ownership check
(:func:`sim.workloads.nccl.verify`), and the run through the fabric
(:func:`sim.workloads.collective.run_schedule`, NVLink and PXN as ``run_size`` sets them), each
timed with ``time.perf_counter`` (median of ``--runs``); the run's packet-hops (frames that
left an egress port, switch and NIC) per second and transfers per second.

Peers: the open collective simulators (SimAI, ASTRA-sim, htsim) are C++ builds from their
repositories, not installable here, so none runs beside ours.  The ratio column compares the
run's packet-hops/s with the plain 2-hop flow of ``python -m bench sim`` (``ours
host->switch->host``, measured in the same process just before): what the collective runner
(posted flows, per-transfer bookkeeping, NVLink timers) costs per packet over the bare
simulator.

    python -m bench coll            # the cases below, median of 3
    python -m bench coll --quick    # the small cases, 1 run
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from sim.scenarios.base import resolve_params
from sim.scenarios.collective import build_fabric, collective_params
from sim.units import gbps

MIB = 1 << 20

#: (name, fabric kind, -p parameters, collective, size bytes, channels, quick)
CASES: tuple[tuple[str, str, dict[str, Any], str, int, int, bool], ...] = (
    ("star 8 ranks, AllReduce 16M", "star", {"nodes": 8, "gpus_per_node": 1}, "allreduce",
     16 * MIB, 2, True),
    ("rail 2x4, AllReduce 16M", "rail", {}, "allreduce", 16 * MIB, 4, True),
    ("rail 2x8, AllReduce 256M", "rail", {"gpus_per_node": 8}, "allreduce", 256 * MIB, 8,
     False),
    ("rail 4x8 no PXN, AllToAll 16M", "rail", {"nodes": 4, "gpus_per_node": 8, "spines": 4,
                                              "pxn": False}, "alltoall", 16 * MIB, 8, False),
    ("SuperPOD 1 SU, AllReduce 1M, 1 ch", "superpod", {}, "allreduce", MIB, 1, False),
)


def _hops(fabric: Any) -> int:
    return sum(p.tx_packets for n in fabric.nodes.values() for p in n.ports.values())


def _median(f: Callable[[], float], runs: int) -> float:
    return statistics.median(f() for _ in range(runs))


def _plain_hops_per_s(packets: int) -> float:
    """``ours host->switch->host`` of bench.sim_bench: packet-hops/s of one plain flow."""
    from bench.sim_bench import ours_switch

    t0 = time.perf_counter()
    ours_switch(packets)
    return 2 * packets / (time.perf_counter() - t0)


def run_case(kind: str, given: dict[str, Any], coll: str, nbytes: int, channels: int
             ) -> dict[str, float]:
    from sim.scenarios.common import collective_packet, header_stack
    from sim.workloads.collective import run_schedule
    from sim.workloads.nccl import schedule, verify
    from sim.workloads.nccl_tests import coll_counts

    p = collective_packet(resolve_params(collective_params(), dict(given)))
    mtu = p["packet_bytes"] - header_stack(p).header_bytes
    t0 = time.perf_counter()
    rf = build_fabric(kind, p)
    n = len(rf.ranks)
    counts = coll_counts(coll, nbytes, "float", n)
    sch = schedule(coll, n, counts.param_count, "float", nchannels=channels,
                   gpus_per_node=rf.gpus_per_node)
    t1 = time.perf_counter()
    verify(sch)
    t2 = time.perf_counter()
    run = run_schedule(sch, rf.fabric, rf.ranks, mtu_bytes=mtu,
                       gpus_per_node=rf.gpus_per_node, nvlink=p["nvlink"],
                       nvlink_bps=gbps(p["nvlink_gbps"]),
                       nvlink_latency_ps=round(p["nvlink_latency_ns"] * 1000), pxn=p["pxn"])
    t3 = time.perf_counter()
    hops = _hops(rf.fabric)
    return {"ranks": n, "transfers": len(sch.transfers), "schedule_s": t1 - t0,
            "verify_s": t2 - t1, "run_s": t3 - t2, "hops": hops,
            "sim_us": run.time_ps / 1e6}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench coll", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3, help="median of N runs (default 3)")
    ap.add_argument("--quick", action="store_true", help="the small cases, 1 run")
    args = ap.parse_args(argv)
    runs = 1 if args.quick else max(1, args.runs)
    plain = _median(lambda: _plain_hops_per_s(20_000 if args.quick else 200_000), runs)
    print(f"## Collectives: schedule, verify and run (median of {runs})")
    print(f"plain 2-hop flow (ours host->switch->host): {plain:,.0f} packet-hops/s\n")
    print("| case | ranks | transfers | schedule s | verify s | run s | packet-hops | "
          "packet-hops/s | transfers/s | vs plain flow |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, kind, given, coll, nbytes, ch, quick in CASES:
        if args.quick and not quick:
            continue
        rs = [run_case(kind, given, coll, nbytes, ch) for _ in range(runs)]
        med = {k: statistics.median(r[k] for r in rs) for k in rs[0]}
        hps = med["hops"] / med["run_s"]
        print(f"| {name} | {med['ranks']:.0f} | {med['transfers']:,.0f} | "
              f"{med['schedule_s']:.2f} | {med['verify_s']:.2f} | {med['run_s']:.2f} | "
              f"{med['hops']:,.0f} | {hps:,.0f} | {med['transfers'] / med['run_s']:,.0f} | "
              f"{hps / plain:.2f} |", flush=True)
    return 0

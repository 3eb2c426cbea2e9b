"""Fabric-scale speed (issue 19): the cost of one packet-hop as the fabric grows.

The built-in ``leaf_spine`` scenario (shift pattern at load 0.5: every host sends to the host
``hosts_per_leaf`` further on, so every flow crosses a spine and no queue builds; the same
events per hop at every size) on ``hosts / 32`` hosts per leaf (at least 4; the built-in allows
32 leaves) and half as many spines (at least 2), 32 MB of switch buffer,
built and run from the library (nothing traced) for ``--sim-us`` of simulated time; and a ring
AllReduce on the rail-optimised fabric of ``lossless collective`` (2 nodes x 8 GPUs, 8
channels).  For each: wall time of the run (``time.perf_counter``, median of ``--runs``; the
leaf-spine build is left out, the AllReduce includes its fabric and schedule), packet-hops
(frames that left an egress port, switch or NIC) and the cost per hop in µs.

The figure issue 19 targets is the ratio column: the cost per hop at N hosts over the cost at
the smallest size of the same run (flat = 1.0).

    python -m bench scale                    # 8, 128, 512 hosts and the AllReduce
    python -m bench scale --hosts 8 --hosts 2048 --sim-us 50
    python -m bench scale --quick            # 8 and 64 hosts, 1 run
    python -m bench scale --profile 512 --sim-us 20   # where a hop's time goes at 512 hosts
"""

from __future__ import annotations

import argparse
import statistics
import time


def _hops(fabric) -> int:
    return sum(p.tx_packets for n in fabric.nodes.values() for p in n.ports.values())


def leaf_spine_case(hosts: int, sim_us: float) -> tuple[float, int]:
    """(wall s of the run, packet-hops) of the leaf_spine scenario with ``hosts`` hosts (the
    build is not timed: it grows with the fabric, not with the hops)."""
    from sim.scenarios import loader

    per_leaf = max(4, -(-hosts // 32))     # the built-in allows 32 leaves of 64 hosts
    leaves = max(2, hosts // per_leaf)
    spines = max(2, min(32, per_leaf // 2))  # shift at load 0.5 fits the uplinks
    sc = loader.build("leaf_spine", {"leaves": leaves, "spines": spines,
                                     "hosts_per_leaf": per_leaf, "pattern": "shift",
                                     "load": 0.5, "duration_ms": sim_us / 1000,
                                     "buffer_kb": 32000})
    t0 = time.perf_counter()
    sc.fabric.run(sc.duration_ps)
    return time.perf_counter() - t0, _hops(sc.fabric)


def profile(hosts: int, sim_us: float, top: int = 14) -> None:
    """cProfile of one leaf-spine run: each function's calls and own time per packet-hop."""
    import cProfile
    import pstats

    from sim.scenarios import loader

    per_leaf = max(4, -(-hosts // 32))
    sc = loader.build("leaf_spine", {"leaves": max(2, hosts // per_leaf),
                                     "spines": max(2, min(32, per_leaf // 2)),
                                     "hosts_per_leaf": per_leaf, "pattern": "shift",
                                     "load": 0.5, "duration_ms": sim_us / 1000,
                                     "buffer_kb": 32000})
    pr = cProfile.Profile()
    pr.enable()
    sc.fabric.run(sc.duration_ps)
    pr.disable()
    hops = max(_hops(sc.fabric), 1)
    st = pstats.Stats(pr).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in st.values())
    print(f"## Profile, leaf-spine {hosts} hosts: {hops:,} packet-hops, "
          f"{total / hops * 1e6:.2f} µs per hop (profiled)")
    print("| function | file | calls per hop | own µs per hop |")
    print("|---|---|---|---|")
    for (f, _line, fn), v in sorted(st.items(), key=lambda kv: -kv[1][2])[:top]:
        print(f"| {fn} | {f.rsplit('/', 1)[-1]} | {v[1] / hops:.2f} | {v[2] / hops * 1e6:.2f} |")


def allreduce_case() -> tuple[float, int]:
    """(wall s, packet-hops) of a 64 MiB ring AllReduce on rail 2 x 8 (8 channels)."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"gpus_per_node": "8"})
    t0 = time.perf_counter()
    row = run_size("allreduce", 64 << 20, "rail", p, inplace=False, details=True)
    wall = time.perf_counter() - t0
    return wall, sum(x["tx_packets"] for x in row["links"])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, action="append",
                    help="leaf-spine host counts (repeatable; default 8, 128, 512)")
    ap.add_argument("--sim-us", type=float, default=100.0,
                    help="simulated time of each leaf-spine run, µs (default 100)")
    ap.add_argument("--runs", type=int, default=3, help="median of N runs (default 3)")
    ap.add_argument("--quick", action="store_true", help="8 and 64 hosts, 20 µs, 1 run")
    ap.add_argument("--profile", type=int, metavar="HOSTS",
                    help="instead: a cProfile of the leaf-spine run at HOSTS hosts, per hop")
    args = ap.parse_args(argv)
    if args.profile:
        profile(args.profile, args.sim_us)
        return 0
    sizes = args.hosts or ([8, 64] if args.quick else [8, 128, 512])
    runs = 1 if args.quick else max(1, args.runs)
    sim_us = 20.0 if args.quick else args.sim_us
    print(f"## Fabric scale: cost per packet-hop (median of {runs}; leaf-spine {sim_us:g} µs "
          "simulated, shift at load 0.5)")
    print("| fabric | hosts | packet-hops | wall s | µs per hop | vs smallest |")
    print("|---|---|---|---|---|---|")
    base = None
    for n in sizes:
        res = [leaf_spine_case(n, sim_us) for _ in range(runs)]
        wall = statistics.median(r[0] for r in res)
        hops = res[0][1]
        per = wall / max(hops, 1) * 1e6
        base = base or per
        print(f"| leaf-spine | {n} | {hops:,} | {wall:.2f} | {per:.2f} | {per / base:.2f} |",
              flush=True)
    if not args.quick:
        res = [allreduce_case() for _ in range(runs)]
        wall = statistics.median(r[0] for r in res)
        hops = res[0][1]
        per = wall / max(hops, 1) * 1e6
        print(f"| rail 2x8, ring AllReduce 64M | 16 | {hops:,} | {wall:.2f} | {per:.2f} | "
              f"{per / base:.2f} |", flush=True)
    return 0

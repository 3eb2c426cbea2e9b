"""Fabric-scale speed: the cost of one packet-hop as the fabric grows.

The built-in ``leaf_spine`` scenario (shift pattern at load 0.5: every host sends to the host
``hosts_per_leaf`` further on, so every flow crosses a spine; where ECMP hashes two flows onto
one uplink a queue builds and PFC pauses, about as often per hop at every size: 2.29 events per
hop at 8 and at 2,048 hosts) on ``hosts / 32`` hosts per leaf (at least 4; the built-in allows
32 leaves) and half as many spines (at least 2), 32 MB of switch buffer, built and run from the
library (nothing traced) for ``--warmup-us`` untimed, then ``--sim-us`` timed; and a ring
AllReduce on the rail-optimised fabric of ``lossless collective`` (2 nodes x 8 GPUs, 8
channels).  For each: CPU time of the run (``time.process_time``: on a shared machine the wall
time of the same run varies 2x with the other jobs, the CPU time far less; median of
``--runs``; the leaf-spine build is left out, the AllReduce includes its fabric and schedule),
packet-hops
(frames that left an egress port, switch or NIC, in the timed part) and the cost per hop in µs,
and the engine's pending events at the end (heap entries; in brackets the cancelled timers
still in it).

The figure to read is the ratio column: the cost per hop at N hosts over the cost at the
smallest size of the same run (flat = 1.0; the development's target, within 1.5 at 2,048 hosts,
and where it stood: bench/results/2026-12-targets.md).

    python -m bench scale                    # 8, 128, 512, 2048 hosts and the AllReduce
    python -m bench scale --hosts 8 --hosts 2048 --sim-us 50
    python -m bench scale --quick            # 8 and 64 hosts, 1 run
    python -m bench scale --profile 512 --sim-us 20   # where a hop's time goes at 512 hosts
    python -m bench scale --anatomy 8 --anatomy 2048  # pending heap, dicts, memory per size
    python -m bench scale --synthetic 32 --synthetic 10000  # a bare heapq loop of that size
"""

from __future__ import annotations

import argparse
import statistics
import time


def _hops(fabric) -> int:
    return sum(p.tx_packets for n in fabric.nodes.values() for p in n.ports.values())


def shape(hosts: int) -> dict[str, object]:
    """The ``leaf_spine`` parameters for ``hosts`` hosts (``hosts / 32`` per leaf, at least 4:
    the built-in allows 32 leaves; half as many spines, at least 2, so shift at load 0.5 fits
    the uplinks)."""
    per_leaf = max(4, -(-hosts // 32))
    return {"leaves": max(2, hosts // per_leaf), "spines": max(2, min(32, per_leaf // 2)),
            "hosts_per_leaf": per_leaf, "pattern": "shift", "load": 0.5, "buffer_kb": 32000}


def _built_hosts(hosts: int) -> int:
    """How many hosts :func:`shape` of ``hosts`` really builds (not ``hosts`` for a count
    that is not a multiple of its hosts per leaf, or below 8)."""
    sh = shape(hosts)
    return int(sh["leaves"]) * int(sh["hosts_per_leaf"])  # type: ignore[call-overload]


def _build(hosts: int, until_us: float):
    from sim.scenarios import loader

    return loader.build("leaf_spine", {**shape(hosts), "duration_ms": until_us / 1000})


def pending(engine) -> tuple[int, int]:
    """(heap entries, of which cancelled timers not yet skipped) of ``engine``."""
    total = len(engine)
    return total, total - len(engine.pending_args())


def leaf_spine_case(hosts: int, sim_us: float, warmup_us: float = 0.0, min_hops: int = 0
                    ) -> tuple[float, int, int, int, float]:
    """(CPU s, packet-hops, heap entries, cancelled entries, simulated µs timed) of the
    leaf_spine scenario with ``hosts`` hosts: ``warmup_us`` run untimed (the start-up: first
    frames of every flow, route resolution), so the hops counted are steady-state ones at every
    size, then ``sim_us`` timed, repeated until at least ``min_hops`` hops were timed (a small
    fabric makes few hops per µs: timing 3,000 hops measures noise).  The build is not timed
    either: it grows with the fabric, not with the hops."""
    steps = 1
    while True:
        sc = _build(hosts, warmup_us + steps * sim_us)
        warm_ps = round(warmup_us * 1e6)
        if warm_ps:
            sc.fabric.run(warm_ps)
        before = _hops(sc.fabric)
        t0 = time.process_time()
        sc.fabric.run(sc.duration_ps)
        cpu_s = time.process_time() - t0
        hops = _hops(sc.fabric) - before
        if hops >= min_hops or hops == 0:
            break
        steps = max(steps + 1, -(-min_hops * steps // hops))
    heap, dead = pending(sc.fabric.engine)
    return cpu_s, hops, heap, dead, steps * sim_us


def profile(hosts: int, sim_us: float, top: int = 14) -> None:
    """cProfile of one leaf-spine run: each function's calls and own time per packet-hop."""
    import cProfile
    import pstats

    sc = _build(hosts, sim_us)
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


def _callback_name(fn) -> str:
    return getattr(fn, "__qualname__", type(fn).__name__)


def heap_anatomy(engine) -> dict[str, int]:
    """Pending heap entries by callback name, and ``cancelled`` (lazily cancelled timers still
    in the heap)."""
    out: dict[str, int] = {}
    for entry in engine._heap:
        fn = entry.callback
        key = "cancelled" if fn is None else _callback_name(fn)
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def container_sizes(fabric) -> dict[str, tuple[int, int, int]]:
    """Per node kind and attribute: (nodes, total length, largest) of every dict, list, set
    and deque held by the nodes, their ports and MMUs: what grows with the fabric."""
    import collections

    kinds = (dict, list, set, collections.deque)
    acc: dict[str, list[int]] = {}

    def walk(prefix: str, obj) -> None:
        names = [n for c in type(obj).__mro__ for n in getattr(c, "__slots__", ())]
        names += list(getattr(obj, "__dict__", {}))
        for k in dict.fromkeys(names):
            v = getattr(obj, k, None)
            if isinstance(v, kinds):
                a = acc.setdefault(f"{prefix}.{k}", [0, 0, 0])
                a[0] += 1
                a[1] += len(v)
                a[2] = max(a[2], len(v))

    for node in fabric.nodes.values():
        kind = type(node).__name__
        walk(kind, node)
        for port in getattr(node, "ports", {}).values():
            walk(kind + ".port", port)
        if getattr(node, "mmu", None) is not None:
            walk(kind + ".mmu", node.mmu)
    return {k: (a[0], a[1], a[2]) for k, a in sorted(acc.items(), key=lambda kv: -kv[1][1])}


def synthetic_heap(size: int, ops: int = 200_000, seed: int = 1) -> float:
    """ns per pop + push of a bare ``heapq`` hold loop whose heap keeps ``size`` entries shaped
    like the engine's (``(at_ps, priority, seq, fn, args)`` tuples, fresh ints per entry): the
    cost of the heap alone at that size, with nothing else in the working set."""
    import heapq
    import random

    rng = random.Random(seed)
    span = 1_000_000
    heap = [(rng.randrange(span), 0, i, _noop, (object(),)) for i in range(size)]
    heapq.heapify(heap)
    steps = [rng.randrange(1, 2 * span) for _ in range(1024)]
    pop, push = heapq.heappop, heapq.heappush
    seq = size
    t0 = time.process_time()
    for i in range(ops):
        at, prio, _s, fn, args = pop(heap)
        seq += 1
        push(heap, (at + steps[i & 1023], prio, seq, fn, args))
    return (time.process_time() - t0) / ops * 1e9


def _noop() -> None:
    pass


class _Obj:
    __slots__ = ("a", "b", "c", "d")

    def __init__(self) -> None:
        self.a = self.b = self.c = self.d = 0


def synthetic_objects(count: int, ops: int = 400_000, seed: int = 1) -> float:
    """ns per read-modify-write of one attribute of a random one of ``count`` small objects
    (visited in a pre-drawn random order): what an access costs when the objects a simulation
    touches are ``count`` apart in memory, i.e. the working set alone."""
    import random

    rng = random.Random(seed)
    objs = [_Obj() for _ in range(count)]
    rng.shuffle(objs)  # allocation order is not visit order
    order = [objs[rng.randrange(count)] for _ in range(min(ops, 1 << 16))]
    n = len(order)
    t0 = time.process_time()
    for i in range(ops):
        o = order[i % n]
        o.a += 1
    return (time.process_time() - t0) / ops * 1e9


def anatomy(hosts: int, sim_us: float, top: int = 12) -> None:
    """What grows with the fabric: the pending heap by callback, cancelled entries, per-node
    container sizes, the Python heap's size (tracemalloc) and a synthetic heapq loop of the
    same heap size."""
    import tracemalloc

    tracemalloc.start()
    sc = _build(hosts, sim_us)
    built = tracemalloc.get_traced_memory()[0]
    sc.fabric.run(sc.duration_ps)
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    eng = sc.fabric.engine
    heap, dead = pending(eng)
    hops = _hops(sc.fabric)
    print(f"## Anatomy, leaf-spine {hosts} hosts after {sim_us:g} µs: {hops:,} packet-hops, "
          f"{eng.events_processed / max(hops, 1):.2f} events per hop")
    print(f"pending events {heap:,} ({heap / hosts:.1f} per host), cancelled {dead:,} "
          f"({dead / max(heap, 1):.0%}); Python heap {built / 1e6:.1f} MB built, "
          f"{after / 1e6:.1f} MB after the run (tracemalloc)")
    print("| pending entry | count |")
    print("|---|---|")
    for k, v in list(heap_anatomy(eng).items())[:top]:
        print(f"| {k} | {v:,} |")
    print("| node.attribute | nodes | total length | largest |")
    print("|---|---|---|---|")
    for k, (n, tot, big) in list(container_sizes(sc.fabric).items())[:top]:
        print(f"| {k} | {n:,} | {tot:,} | {big:,} |")
    print(f"synthetic heapq hold loop at {heap:,} entries: {synthetic_heap(max(heap, 1)):.0f} ns "
          f"per pop+push (at 32 entries: {synthetic_heap(32):.0f} ns)")


def allreduce_case() -> tuple[float, int]:
    """(CPU s, packet-hops) of a 64 MiB ring AllReduce on rail 2 x 8 (8 channels)."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"gpus_per_node": 8})
    t0 = time.process_time()
    row = run_size("allreduce", 64 << 20, "rail", p, inplace=False, details=True)
    cpu_s = time.process_time() - t0
    return cpu_s, sum(x["tx_packets"] for x in row["links"])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, action="append",
                    help="leaf-spine host counts (repeatable; default 8, 128, 512, 2048); each a "
                         "multiple of its hosts per leaf (max(4, ceil(N / 32))), at least 8")
    ap.add_argument("--sim-us", type=float, default=20.0,
                    help="simulated time timed in each leaf-spine run, µs (default 20)")
    ap.add_argument("--warmup-us", type=float, default=5.0,
                    help="simulated time run untimed before it, µs (default 5)")
    ap.add_argument("--min-hops", type=int, default=100_000,
                    help="time a longer window where --sim-us gives fewer hops (default 100000)")
    ap.add_argument("--runs", type=int, default=3, help="median of N runs (default 3)")
    ap.add_argument("--quick", action="store_true", help="8 and 64 hosts, 10 µs, 1 run")
    ap.add_argument("--profile", type=int, metavar="HOSTS",
                    help="instead: a cProfile of the leaf-spine run at HOSTS hosts, per hop")
    ap.add_argument("--anatomy", type=int, metavar="HOSTS", action="append",
                    help="instead: the pending heap by callback, cancelled entries, per-node "
                         "container sizes and memory at HOSTS hosts (repeatable)")
    ap.add_argument("--synthetic", type=int, metavar="ENTRIES", action="append",
                    help="instead: ns per pop+push of a bare heapq loop of ENTRIES entries, "
                         "and per access to one of ENTRIES x 100 objects")
    args = ap.parse_args(argv)
    for n in [*(args.hosts or ()), *(args.anatomy or ()), *([args.profile] if args.profile
                                                             else ())]:
        built = _built_hosts(n)
        if built != n:
            ap.error(f"{n} hosts: the leaf_spine shape of that size ({shape(n)['leaves']} "
                     f"leaves x {shape(n)['hosts_per_leaf']}) has {built} hosts; give a "
                     f"count it builds exactly (e.g. 8, 64, 128, 512, 2048)")
    if not args.sim_us > 0 or args.warmup_us < 0 or args.min_hops < 0:
        ap.error("--sim-us must be > 0, --warmup-us and --min-hops >= 0")
    if args.profile:
        profile(args.profile, args.sim_us)
        return 0
    if args.anatomy or args.synthetic:
        for n in args.anatomy or ():
            anatomy(n, args.sim_us)
        for n in args.synthetic or ():
            print(f"synthetic heapq hold loop, {n:,} entries: "
                  f"{min(synthetic_heap(n) for _ in range(3)):.0f} ns per pop+push; random "
                  f"access to one of {100 * n:,} objects: "
                  f"{min(synthetic_objects(100 * n) for _ in range(3)):.0f} ns (best of 3)",
                  flush=True)
        return 0
    sizes = args.hosts or ([8, 64] if args.quick else [8, 128, 512, 2048])
    runs = 1 if args.quick else max(1, args.runs)
    sim_us = 10.0 if args.quick else args.sim_us
    warm_us = 2.0 if args.quick else args.warmup_us
    min_hops = 5_000 if args.quick else args.min_hops
    print(f"## Fabric scale: cost per packet-hop (median of {runs}; leaf-spine {sim_us:g} µs "
          f"simulated, or more for {min_hops:,} hops, after {warm_us:g} µs untimed, shift at "
          "load 0.5)")
    print("| fabric | hosts | timed µs | packet-hops | CPU s | µs per hop | vs smallest | "
          "pending events (cancelled) |")
    print("|---|---|---|---|---|---|---|---|")
    base = None
    for n in sizes:
        res = [leaf_spine_case(n, sim_us, warm_us, min_hops) for _ in range(runs)]
        cpu_s = statistics.median(r[0] for r in res)
        hops, heap, dead, timed_us = res[0][1:]
        per_hop_us = cpu_s / max(hops, 1) * 1e6
        base = base or per_hop_us
        print(f"| leaf-spine | {n} | {timed_us:g} | {hops:,} | {cpu_s:.2f} | {per_hop_us:.2f} | "
              f"{per_hop_us / base:.2f} | {heap:,} ({dead:,}) |", flush=True)
    if not args.quick:
        res = [allreduce_case() for _ in range(runs)]
        cpu_s = statistics.median(r[0] for r in res)
        hops = res[0][1]
        per_hop_us = cpu_s / max(hops, 1) * 1e6
        print(f"| rail 2x8, ring AllReduce 64M | 16 | - | {hops:,} | {cpu_s:.2f} | "
              f"{per_hop_us:.2f} | {per_hop_us / base:.2f} | - |", flush=True)
    return 0

"""``lossless collective COLL``: an NCCL collective on a simulated fabric, reported as
nccl-tests reports it (docs/collectives.md, docs/cli.md).

For every size of ``-b/-e/-f`` (or ``-i``): a fresh fabric (``--fabric
rail|star|fattree|superpod`` with its ``-p`` parameters; the rank count is the fabric's),
the schedule of :func:`sim.workloads.nccl.schedule` for nccl-tests' count, ``-w`` warm-up
and ``-n`` timed iterations back to back through :func:`sim.workloads.collective.run_schedule`
(each iteration starts when the previous one is received; the QPs and their congestion
control persist), the mean time of the timed ones, algbw/busbw by nccl-tests' formulas and
``#wrong`` = 0 when the ranks end with what the collective promises in the order the
transfers actually started (:func:`sim.workloads.nccl.verify`).  Below the table, per size:
PFC pauses, CE marks, CNPs, drops and the deepest switch queue over all its iterations.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sim.cli.argtypes import ArgType, integer
from sim.workloads.nccl import Collective

if TYPE_CHECKING:
    from sim.fabric.fattree import FatTree, SuperPod
    from sim.fabric.rail import RailFabric
    from sim.scenarios.base import Param

__all__ = ["add_parsers", "FABRICS", "build_fabric", "collective_params"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
FABRICS = ("rail", "star", "fattree", "superpod")

#: ``-p`` keys that shape one kind of fabric: given with another ``--fabric`` they are a
#: mistake (a fat-tree's size is ``k``, a SuperPOD's ``sus``; neither has ``nodes``).
FABRIC_KEYS = {
    "rail": {"nodes", "gpus_per_node", "spines"},
    "star": {"nodes", "gpus_per_node", "spines"},
    "fattree": {"k", "oversubscription", "gpus_per_node"},
    "superpod": {"sus", "superpod_nodes"},
}
_SHAPE_KEYS = set().union(*FABRIC_KEYS.values())


def _err(msg: str) -> None:
    print(f"lossless: {msg}", file=sys.stderr)


def collective_params() -> tuple[Param, ...]:
    """The ``-p`` parameters: the fabric-wide ones of the scenarios (same names, checks and
    units, :data:`sim.scenarios.common.FABRIC_PARAMS`) with collective defaults, and the
    shape of the fabric."""
    from sim.fabric.fattree import k_problem, sus_problem
    from sim.scenarios.base import Param
    from sim.scenarios.common import FABRIC_PARAMS, cc_params, in_range, nonneg, pos, with_default

    return (
        Param("nodes", 2, "nodes (servers)", in_range(1, 1024)),
        Param("gpus_per_node", 4, "GPUs per node, one NIC each (rail: one leaf per GPU)",
              in_range(1, 64)),
        Param("spines", 0, "rail: spine switches (0: half the GPUs per node, at least 1)",
              in_range(0, 256)),
        Param("ecmp", True, "rail, fattree, superpod: hash flows over all uplinks (false: "
              "an uplink chosen by destination)", None),
        Param("k", 4, "fattree: switch radix k (even): k pods, (k/2)^2 cores",
              k_problem),
        Param("oversubscription", 1, "fattree: hosts per edge switch over its k/2 uplinks",
              in_range(1, 8)),
        Param("sus", 1, "superpod: DGX H100 scalable units (1, 2, 4 or 8)",
              sus_problem),
        Param("superpod_nodes", 0, "superpod: DGX nodes populated (0: all 32*sus - 1)",
              in_range(0, 255)),
        with_default("link_gbps", 400.0),
        with_default("pfc", True),
        with_default("xoff_kb", 256.0),
        with_default("buffer_kb", 32000.0),
        with_default("cc", "none"),
        with_default("seed", 0),
        FABRIC_PARAMS["kmin_kb"], FABRIC_PARAMS["kmax_kb"], FABRIC_PARAMS["pmax"],
        FABRIC_PARAMS["cable_m"],
        with_default("packet_bytes", 4154),
        Param("prop_ns", 500.0, "propagation delay of every link, ns (100 m of fibre)", nonneg),
        Param("limit_ms", 100.0, "give up on an iteration after this much simulated time, ms",
              pos),
        *cc_params(),
    )


def check_fabric_keys(kind: str, given: Mapping[str, Any]) -> None:
    """Refuse ``-p`` keys that shape another kind of fabric (``ValueError``)."""
    stray = sorted((set(given) & _SHAPE_KEYS) - FABRIC_KEYS[kind])
    if stray:
        raise ValueError(f"-p {stray[0]}: does not apply to --fabric {kind} (its shape: "
                         f"{', '.join(sorted(FABRIC_KEYS[kind]))})")


def build_fabric(kind: str, p: dict[str, Any]) -> RailFabric | FatTree | SuperPod:
    """The fabric of ``--fabric kind`` for resolved parameters ``p`` (a
    :class:`sim.fabric.rail.RailFabric`, :class:`sim.fabric.fattree.FatTree` or
    :class:`sim.fabric.fattree.SuperPod`; each has ``fabric``, ``ranks``, ``nodes`` and
    ``gpus_per_node``)."""
    from sim.fabric.fattree import fat_tree, superpod
    from sim.fabric.rail import collective_star, rail_optimized
    from sim.scenarios.common import ecn_config, host_kw, mmu_config
    from sim.units import gbps

    rate = gbps(p["link_gbps"])
    ecn = ecn_config(p)
    hkw = host_kw(p, rate)
    nranks = p["nodes"] * p["gpus_per_node"]
    prop_ps = round(p["prop_ns"] * 1000)
    if kind == "fattree":
        k, o = p["k"], p["oversubscription"]
        cfg, _ = mmu_config(p, max(k, (1 + o) * k // 2), rate)
        return fat_tree(k, o, link_gbps=p["link_gbps"], prop_ps=prop_ps, seed=p["seed"],
                        ecmp=p["ecmp"], gpus_per_node=p["gpus_per_node"], ecn=ecn,
                        mmu_config=cfg, host_kw=hkw)
    if kind == "superpod":
        from sim.fabric.fattree import SU_SLOTS, SUPERPOD_LEAF_UPLINKS

        cfg, _ = mmu_config(p, SU_SLOTS + SUPERPOD_LEAF_UPLINKS, rate)
        return superpod(p["sus"], nodes=p["superpod_nodes"] or None,
                        link_gbps=p["link_gbps"], prop_ps=prop_ps, seed=p["seed"],
                        ecmp=p["ecmp"], ecn=ecn, mmu_config=cfg, host_kw=hkw)
    if kind == "star":
        cfg, _ = mmu_config(p, nranks + 1, rate)
        return collective_star(nranks, link_gbps=p["link_gbps"], prop_ps=prop_ps,
                               seed=p["seed"], ecn=ecn, mmu_config=cfg, host_kw=hkw)
    g = p["gpus_per_node"]
    spines = p["spines"] or max(1, -(-g // 2))
    cfg, _ = mmu_config(p, max(p["nodes"] + spines, g), rate)
    return rail_optimized(p["nodes"], g, spines=spines, link_gbps=p["link_gbps"],
                          prop_ps=prop_ps, seed=p["seed"], ecmp=p["ecmp"], ecn=ecn,
                          mmu_config=cfg, host_kw=hkw)


def _kv(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def _parse_size(text: str) -> int:
    from fractions import Fraction

    from sim.workloads.nccl_tests import parse_size

    try:
        v = parse_size(text)
        unit = text.strip()[-1:].lower()
        num = text.strip()[:-1] if unit in "kmg" else text.strip()
        exact = Fraction(num) * {"k": 1024, "m": 1024**2, "g": 1024**3}.get(unit, 1)
    except (ValueError, ZeroDivisionError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if exact != v:
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {text!r}")
    _SIZE.check(v, text)
    return v


#: A ``-b/-e/-i`` size: nccl-tests' ``parsesize`` (K/M/G powers of 1024), whole bytes, at
#: most 16 GiB.
_SIZE = ArgType("int", _parse_size, 0, 1 << 34, name="size")


def _one_size(args, params, nbytes: int) -> dict[str, Any]:
    from sim.workloads.collective import ROCE_HEADER_BYTES, RunError, run_schedule
    from sim.workloads.nccl import ScheduleError, schedule, verify
    from sim.workloads.nccl_tests import algbw_busbw, coll_counts

    rf = build_fabric(args.fabric, params)
    nranks = len(rf.ranks)
    counts = coll_counts(args.collective, nbytes, args.datatype, nranks)
    sch = schedule(args.collective, nranks, counts.param_count, args.datatype,
                   nchannels=args.channels, algorithm=args.algo, protocol=args.proto,
                   root=args.root, gpus_per_node=rf.gpus_per_node,
                   qps_per_connection=args.qps)
    limit_ps = int(params["limit_ms"] * 10**9)
    mtu = params["packet_bytes"] - ROCE_HEADER_BYTES
    times, error, run = [], None, None
    for it in range(args.warmup_iters + args.iters):
        try:
            run = run_schedule(sch, rf.fabric, rf.ranks, mtu_bytes=mtu, limit_ps=limit_ps)
        except RunError as e:
            error = f"iteration {it + 1}: {e}"
            break
        if it >= args.warmup_iters:
            times.append(run.time_ps)
    wrong = None
    if error is None and run is not None:
        order = sorted(range(len(sch.transfers)), key=lambda i: (run.start_ps[i], i))
        try:
            verify(sch, order)
            wrong = 0
        except ScheduleError as e:
            error = f"wrong result: {e}"
    from sim.workloads.collective import fabric_counters

    row: dict[str, Any] = {
        "size_bytes": counts.size_bytes, "count": counts.param_count,
        "nchannels": sch.nchannels, "transfers": len(sch.transfers),
        "counters": fabric_counters(rf.fabric), "error": error, "wrong": wrong,
        "iteration_times_ps": times,
    }
    if error is None:
        t_ps = sum(times) // len(times)
        if t_ps > 0:
            alg, bus = algbw_busbw(args.collective, counts.param_count, args.datatype, nranks,
                                   t_ps / 1e12)
        else:
            alg = bus = 0.0
        row.update(time_ps=t_ps, time_us=t_ps / 1e6, algbw_gbps=alg, busbw_gbps=bus)
    return row


def cmd_collective(args: argparse.Namespace) -> int:
    from sim.scenarios import ScenarioError
    from sim.scenarios.base import resolve_params
    from sim.workloads.nccl_tests import REDOPS, format_row, header_lines, root_of, size_list

    if args.collective not in {str(x) for x in Collective}:
        _err(f"COLLECTIVE: expected one of {', '.join(str(x) for x in Collective)}, got "
             f"{args.collective!r}")
        return EXIT_USAGE
    given: dict[str, str] = {}
    for key, value in args.param or ():
        if key in given:
            _err(f"-p {key}: given twice")
            return EXIT_USAGE
        given[key] = value
    try:
        check_fabric_keys(args.fabric, given)
        params = resolve_params(collective_params(), given)
        factor = args.stepfactor or (1 if args.stepbytes is not None else 2)
        sizes = size_list(args.minbytes, args.maxbytes, factor, args.stepbytes or 1 << 20)
        if args.fabric in ("rail", "star") and params["nodes"] * params["gpus_per_node"] < 2:
            raise ValueError("nodes x gpus_per_node: a collective needs at least 2 GPUs")
        rf = build_fabric(args.fabric, params)  # a bad fabric is refused before any run
        nranks, shape = len(rf.ranks), (rf.nodes, rf.gpus_per_node)
    except (ScenarioError, ValueError) as e:
        _err(str(e))
        return EXIT_USAGE
    if args.root >= nranks:
        _err(f"-r: root {args.root} is not one of the {nranks} ranks")
        return EXIT_USAGE
    if args.json:
        folder = os.path.dirname(os.path.abspath(args.json))
        if os.path.isdir(args.json) or not os.path.isdir(folder):
            _err(f"{args.json}: --json: not a file in an existing folder")
            return EXIT_USAGE
    coll = Collective(args.collective)
    reduces = coll in (Collective.ALLREDUCE, Collective.REDUCESCATTER)
    redop = args.op if reduces else "none"
    if args.op not in REDOPS:
        _err(f"-o: expected one of {', '.join(REDOPS)}, got {args.op!r}")
        return EXIT_USAGE
    root = root_of(coll, args.root)
    print(f"# lossless collective {coll}: {nranks} ranks ({shape[0]} nodes x "
          f"{shape[1]} GPUs), fabric {args.fabric}, {params['link_gbps']:g} Gb/s,"
          f" pfc {str(params['pfc']).lower()}, cc {params['cc']}; algo {args.algo}, proto "
          f"{args.proto}, channels {args.channels}, qps {args.qps}; -w {args.warmup_iters} "
          f"-n {args.iters}")
    for line in header_lines():
        print(line)
    rows = []
    for nbytes in sizes:
        try:
            row = _one_size(args, params, nbytes)
        except (ScenarioError, ValueError) as e:
            _err(f"size {nbytes}: {e}")
            return EXIT_USAGE
        rows.append(row)
        if row["error"] is None:
            body = (row["time_us"], row["algbw_gbps"], row["busbw_gbps"], row["wrong"])
            print(format_row(row["size_bytes"], row["count"], args.datatype, redop, root,
                             body, None), flush=True)
        else:
            print(f"# {row['size_bytes']:10d}  {row['error']}", flush=True)
    ok = [r for r in rows if r["error"] is None]
    if ok:
        print(f"# Avg bus bandwidth    : {sum(r['busbw_gbps'] for r in ok) / len(ok):g}")
    print("#")
    print(f"# {'size':>10}  {'channels':>8}  {'transfers':>9}  {'pfc_pauses':>10}  "
          f"{'ce_marks':>9}  {'cnps':>7}  {'drops':>7}  {'max_queue':>10}")
    print(f"# {'(B)':>10}  {'':>8}  {'':>9}  {'':>10}  {'':>9}  {'':>7}  {'':>7}  "
          f"{'(B)':>10}")
    for r in rows:
        c = r["counters"]
        print(f"# {r['size_bytes']:10d}  {r['nchannels']:8d}  {r['transfers']:9d}  "
              f"{c['pfc_pauses']:10d}  {c['ce_marks']:9d}  {c['cnps']:7d}  {c['drops']:7d}  "
              f"{c['max_queue_bytes']:10d}")
    if args.json:
        from wire.atomic import OutputError, atomic_file

        doc = {"collective": str(coll), "nranks": nranks, "fabric": args.fabric,
               "params": params, "algorithm": args.algo, "protocol": args.proto,
               "channels": args.channels, "qps_per_connection": args.qps,
               "datatype": args.datatype, "op": redop, "root": root,
               "iters": args.iters, "warmup_iters": args.warmup_iters, "results": rows}
        try:
            with atomic_file(args.json, "w", encoding="utf-8") as fp:
                json.dump(doc, fp, indent=2)
                fp.write("\n")
        except (OSError, OutputError) as e:
            _err(f"{args.json}: {e}")
            return EXIT_USAGE
    return EXIT_OK if len(ok) == len(rows) else EXIT_FAIL


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from sim.workloads.nccl import DTYPE_BYTES, MAXCHANNELS, Algorithm, Protocol

    c = sub.add_parser(
        "collective", help="run an NCCL collective on a simulated fabric (nccl-tests table)",
        description="Run an NCCL collective (NCCL's channels, chunks, slices, in-flight "
                    "limit, protocol and QPs) through a simulated RoCE fabric for each size "
                    "and print the nccl-tests table, then PFC pauses, CE marks, CNPs, drops "
                    "and the deepest queue per size (docs/collectives.md).  Exit 1 when a "
                    "size does not complete (e.g. drops without PFC: nothing retransmits).")
    c.add_argument("collective", metavar="COLLECTIVE",
                   help=f"{', '.join(str(x) for x in Collective)}")
    c.add_argument("-b", "--minbytes", type=_SIZE, default=1 << 20, metavar="SIZE",
                   help="smallest size (nccl-tests' -b; K/M/G are powers of 1024; default 1M)")
    c.add_argument("-e", "--maxbytes", type=_SIZE, default=16 << 20, metavar="SIZE",
                   help="largest size (default 16M)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("-f", "--stepfactor", type=integer(2, 1024), metavar="N",
                   help="multiply the size by N (default 2)")
    g.add_argument("-i", "--stepbytes", type=_SIZE, metavar="SIZE",
                   help="add SIZE instead of multiplying")
    c.add_argument("-n", "--iters", type=integer(1, 1000), default=1, metavar="N",
                   help="timed iterations per size (default 1: the simulator is "
                        "deterministic)")
    c.add_argument("-w", "--warmup_iters", type=integer(0, 1000), default=0, metavar="N",
                   help="warm-up iterations before them (default 0)")
    c.add_argument("-d", "--datatype", choices=list(DTYPE_BYTES), default="float",
                   metavar="TYPE", help=f"datatype: {', '.join(DTYPE_BYTES)} (default float)")
    c.add_argument("-o", "--op", default="sum", metavar="OP",
                   help="reduction: sum, prod, max, min, avg (printed only; default sum)")
    c.add_argument("-r", "--root", type=integer(0, 1 << 16), default=0, metavar="RANK",
                   help="broadcast root (default 0)")
    c.add_argument("--fabric", choices=FABRICS, default="rail",
                   help="rail: rail-optimised leaves and spines; star: one non-blocking "
                        "switch; fattree: 3-tier k-ary fat-tree (-p k=, oversubscription=); "
                        "superpod: DGX H100 SuperPOD scalable units (-p sus=) (default rail)")
    c.add_argument("-p", "--param", type=_kv, action="append", metavar="KEY=VALUE",
                   help="fabric parameter (repeatable): nodes, gpus_per_node, spines, ecmp, "
                        "k, oversubscription, sus, superpod_nodes, "
                        "link_gbps, pfc, cc, preset, buffer_kb, xoff_kb, kmin_kb, kmax_kb, "
                        "pmax, packet_bytes, prop_ns, seed, limit_ms ... (docs/cli.md)")
    c.add_argument("--algo", choices=[str(a) for a in Algorithm], default="ring")
    c.add_argument("--proto", choices=[str(p) for p in Protocol], default="simple")
    c.add_argument("--channels", type=integer(1, MAXCHANNELS), default=2, metavar="N",
                   help="NCCL channels (NCCL_MIN/MAX_NCHANNELS; small sizes use fewer; "
                        "default 2)")
    c.add_argument("--qps", type=integer(1, 128), default=1, metavar="N",
                   help="QPs per connection (NCCL_IB_QPS_PER_CONNECTION; default 1)")
    c.add_argument("--json", metavar="FILE", help="write the results as JSON")
    c.set_defaults(func=cmd_collective)

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

from sim.cli.argtypes import ArgType, integer
from sim.scenarios.collective import (
    FABRICS,
    build_fabric,
    check_fabric_keys,
    collective_params,
    run_size,
)
from sim.workloads.nccl import Collective

__all__ = ["add_parsers", "FABRICS", "build_fabric", "collective_params"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
def _err(msg: str) -> None:
    print(f"lossless: {msg}", file=sys.stderr)


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
            row = run_size(args.collective, nbytes, args.fabric, params,
                           algorithm=args.algo, protocol=args.proto, channels=args.channels,
                           qps=args.qps, datatype=args.datatype, root=args.root,
                           iters=args.iters, warmup_iters=args.warmup_iters)
        except (ScenarioError, ValueError) as e:
            _err(f"size {nbytes}: {e}")
            return EXIT_USAGE
        rows.append(row)
        if row["error"] is None:
            body = (row["time_us"], row["algbw_gbps"], row["busbw_gbps"], row["wrong"])
            ip = row["inplace"]
            in_body = (ip["time_us"], ip["algbw_gbps"], ip["busbw_gbps"], row["wrong"]) \
                if ip else None
            print(format_row(row["size_bytes"], row["count"], args.datatype, redop, root,
                             body, in_body), flush=True)
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

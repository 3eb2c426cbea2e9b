"""``lossless perftest TEST``: linux-rdma/perftest's ``ib_write_bw``, ``ib_read_bw``,
``ib_send_bw``, ``ib_write_lat``, ``ib_read_lat`` and ``ib_send_lat`` between two hosts of
a simulated fabric (:mod:`sim.workloads.perftest`), printed as perftest prints them
(``perftest_parameters.c``: its banner, its result header and its row formats; MiB = 2^20
bytes, ``--report_gbits`` 10^9 bits)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from sim.cli.argtypes import err as _err
from sim.cli.argtypes import finite_float, integer
from sim.cli.argtypes import key_value as _kv
from sim.units import ms_to_ps, us_to_ps

__all__ = ["add_parsers", "cmd_perftest", "format_bw", "format_lat"]

EXIT_USAGE = 2
RESULT_LINE = "-" * 87
#: perftest's verbs as its banner names them
_VERB = {"write": "RDMA_Write", "read": "RDMA_Read", "send": "Send"}


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from sim.workloads.perftest import TESTS

    s = sub.add_parser(
        "perftest",
        help="perftest's ib_write_bw, ib_read_bw, ib_send_bw, ib_write_lat, ib_read_lat, "
             "ib_send_lat between two hosts of a simulated fabric (docs/reference/perftest.md)",
        description="Run one of perftest's tests between two hosts of a simulated fabric "
                    "(--fabric and -p as lossless collective takes them) and print its "
                    "report as perftest does: the bandwidth tests' BW peak, BW average and "
                    "MsgRate per size, the latency tests' t_min, t_max, t_typical, t_avg, "
                    "t_stdev and percentiles. The latency is the network's: the NICs' and "
                    "hosts' own is not modelled.")
    s.add_argument("test", choices=sorted(TESTS), metavar="TEST",
                   help=", ".join(sorted(TESTS)))
    s.add_argument("--fabric", default="star", metavar="FABRIC",
                   help="rail, star (default), fattree, superpod, nvl72, a fabric file "
                        "FILE.toml or ibnetdiscover's output")
    s.add_argument("-p", "--param", type=_kv, action="append", metavar="KEY=VALUE",
                   help="a fabric parameter, as lossless collective takes it (repeatable)")
    s.add_argument("--client", metavar="HOST",
                   help="the client: a rank number or a host's name (default: rank 0)")
    s.add_argument("--server", metavar="HOST",
                   help="the server: a rank number or a host's name (default: the last rank)")
    s.add_argument("-s", "--size", type=integer(1, 1 << 31), metavar="BYTES",
                   help="message size (default 65536 for bandwidth, 2 for latency)")
    s.add_argument("-a", "--all", action="store_true",
                   help="every size from 2 to 2^23 bytes in powers of two")
    s.add_argument("-n", "--iters", type=integer(5, 10**7), metavar="N",
                   help="iterations (default 5000 for ib_write_bw, else 1000)")
    s.add_argument("-q", "--qp", type=integer(1, 1024), default=1, metavar="N",
                   help="QPs of a bandwidth test (default 1)")
    s.add_argument("-t", "--tx-depth", type=integer(1, 1 << 16), default=128, metavar="N",
                   help="messages posted ahead per QP in a bandwidth test (default 128)")
    s.add_argument("-o", "--outs", type=integer(1, 256), default=16, metavar="N",
                   help="ib_read_bw: reads in flight per QP (default 16, mlx5's "
                        "max_qp_rd_atom)")
    s.add_argument("-m", "--mtu", type=integer(256, 4096), metavar="BYTES",
                   help="payload of a packet: 256, 512, 1024, 2048 or 4096 (default: the "
                        "fabric's packet_bytes less its headers, 4096)")
    s.add_argument("-D", "--duration", type=finite_float(0, 10, lo_open=True),
                   metavar="SECONDS",
                   help="a bandwidth test for this long (simulated seconds: 0.001 is a "
                        "millisecond) instead of -n; no peak, as perftest")
    s.add_argument("--report_gbits", "--report-gbits", action="store_true",
                   dest="report_gbits", help="bandwidth in Gb/sec (10^9 bits) instead of "
                                            "MiB/sec")
    s.add_argument("--msg-rate", type=finite_float(0, 1e4, lo_open=True), metavar="MPPS",
                   help="a bandwidth test's messages a QP starts at most, millions a "
                        "second: the NIC's message rate (default: none, the wire's)")
    s.add_argument("--incast", type=integer(0, 1 << 16), default=0, metavar="N",
                   help="background: N other hosts send to the server at line rate for "
                        "the whole test (default 0)")
    s.add_argument("--json", action="store_true", help="the results as JSON on stdout")
    s.set_defaults(func=cmd_perftest)


def _fabric(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import (
        FABRICS,
        build_fabric,
        check_fabric_keys,
        collective_params,
        is_fabric_file,
        split_file_params,
    )
    from sim.scenarios.common import collective_packet

    given: dict[str, Any] = {}
    for key, value in args.param or []:
        if key in given:
            raise ValueError(f"-p {key}: given twice")
        given[key] = value
    if is_fabric_file(args.fabric):
        over, given = split_file_params(given)
        params = resolve_params(collective_params(), given)
        params["file_overrides"] = over
    elif args.fabric in FABRICS:
        check_fabric_keys(args.fabric, given)
        params = collective_packet(resolve_params(collective_params(), given))
    else:
        raise ValueError(f"--fabric: expected one of {', '.join(FABRICS)}, a fabric file "
                         f"FILE.toml or ibnetdiscover's output, got {args.fabric!r}")
    return build_fabric(args.fabric, params, faults=False), params


def _background(fab: Any, ranks: list[int], client: int, server: int, n: int,
                packet_bytes: int) -> list[int]:
    """``n`` other hosts sending to ``server`` at line rate, from now on."""
    from sim.nic.host import Flow

    others = [h for h in ranks if h not in (client, server)]
    if n > len(others):
        raise ValueError(f"--incast {n}: the fabric has {len(others)} other hosts")
    out = []
    for i, h in enumerate(others[:n]):
        fid = (1 << 26) + i
        src, dst = fab.nodes[h], fab.nodes[server]
        f = Flow(fid, h, server, src.port.rate_bps, tc=3, packet_bytes=packet_bytes,
                 start_ps=fab.engine.now_ps)
        fab.flows[fid] = f
        src.add_flow(f)
        dst.expect(f)
        out.append(h)
    return out


def cmd_perftest(args: argparse.Namespace) -> int:
    from sim.scenarios.base import ScenarioError
    from sim.workloads.perftest import TESTS, all_sizes, pick_hosts, run_bw, run_lat

    op, kind = TESTS[args.test]
    if args.duration and (kind == "lat" or args.all):
        _err("-D: a bandwidth test of one size (perftest refuses it with -a; a latency "
             "test takes -n)")
        return EXIT_USAGE
    if args.mtu and args.mtu not in (256, 512, 1024, 2048, 4096):
        _err(f"-m {args.mtu}: an IB MTU: 256, 512, 1024, 2048 or 4096")
        return EXIT_USAGE
    sizes = all_sizes() if args.all else [args.size or (65536 if kind == "bw" else 2)]
    iters = args.iters or (5000 if args.test == "ib_write_bw" else 1000)
    rows: list[dict[str, Any]] = []
    try:
        head = None
        for size in sizes:  # a fresh fabric a size: each size from a quiet fabric
            rf, params = _fabric(args)
            fab = rf.fabric
            hdr = fab.stack.header_bytes
            mtu = args.mtu or (params.get("packet_bytes") or fab.stack.frame_bytes()) - hdr
            client, server = pick_hosts(list(rf.ranks), fab.node_names(), args.client,
                                        args.server)
            bg = _background(fab, list(rf.ranks), client, server, args.incast, mtu + hdr)
            if head is None:
                head = _head(args, fab, client, server, mtu, op, kind, bg, iters)
                if not args.json:
                    print(head)
            if kind == "bw":
                r = run_bw(fab, client, server, op, size, iters, qps=args.qp,
                           tx_depth=min(args.tx_depth, iters), outstanding_reads=args.outs,
                           mtu_bytes=mtu, header_bytes=hdr,
                           duration_ps=ms_to_ps(args.duration * 1000) if args.duration
                           else None,
                           msg_gap_ps=us_to_ps(1 / args.msg_rate) if args.msg_rate else 0)
                row = {"size_bytes": size, "iterations": r.iterations,
                       "bw_peak_bytes_per_s": 0.0 if args.duration else r.peak_bytes_per_s,
                       "bw_average_bytes_per_s": r.average_bytes_per_s,
                       "msg_rate_Mpps": r.msg_rate_per_s / 1e6}
                if not args.json:
                    print(format_bw(row, args.report_gbits))
            else:
                r = run_lat(fab, client, server, op, size, iters, mtu_bytes=mtu,
                            header_bytes=hdr)
                row = {"size_bytes": size, "iterations": iters, **r.stats_us()}
                if not args.json:
                    print(format_lat(row))
            rows.append(row)
            sys.stdout.flush()
    except (ScenarioError, ValueError, RuntimeError) as e:
        _err(str(e).splitlines()[0])
        return EXIT_USAGE
    if args.json:
        print(json.dumps({"test": args.test, "fabric": args.fabric, "results": rows},
                         indent=1))
    else:
        print(RESULT_LINE)
    return 0


def _head(args: argparse.Namespace, fab: Any, client: int, server: int, mtu: int, op: str,
          kind: str, bg: list[int], iters: int) -> str:
    """The context line, perftest's banner and its result header."""
    names = fab.node_names()
    ib = fab.flow_control == "ib"
    rate = fab.nodes[client].port.rate_bps / 1e9
    ctx = (f"# lossless perftest {args.test}: {names[client]} -> {names[server]}, fabric "
           f"{args.fabric}" + "".join(f" -p {k}={v}" for k, v in args.param or [])
           + f", {rate:g} Gb/s {'InfiniBand' if ib else 'RoCE'}"
           + (f", {len(bg)} hosts sending to {names[server]} at line rate" if bg else "")
           + "; the network's latency (no NIC or host latency)")
    test = f"{_VERB[op]} {'BW' if kind == 'bw' else 'Latency'} Test"
    from sim.workloads.perftest import PEAK_MAX_ITERS

    lines = [ctx]
    if kind == "bw" and (args.duration or iters > PEAK_MAX_ITERS):  # perftest's noPeak
        lines.append(" WARNING: BW peak won't be measured in this run.")
    lines += [RESULT_LINE, " " * 20 + test,
             f" Dual-port       : OFF\t\tDevice         : {names[client]}",
             f" Number of qps   : {args.qp if kind == 'bw' else 1}\t\tTransport type : IB",
             " Connection type : RC\t\tUsing SRQ      : OFF",
             f" TX depth        : {min(args.tx_depth, iters) if kind == 'bw' else 1}"]
    if kind == "bw":
        size = args.size or 65536
        lines.append(f" CQ Moderation   : {1 if size > 8192 and not args.all else 100}")
    lines += [f" Mtu             : {mtu}[B]",
              f" Link type       : {'IB' if ib else 'Ethernet'}",
              f" Outstand reads  : {args.outs}" if op == "read" else " Max inline data : 0[B]",
              " rdma_cm QPs\t : OFF", " Data ex. method : Ethernet", RESULT_LINE]
    if kind == "bw":
        unit = "Gb/sec" if args.report_gbits else "MiB/sec"
        lines.append(f" #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   "
                     f"MsgRate[Mpps]")
    else:
        lines.append(" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                     "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% "
                     "percentile[usec] ")
    return "\n".join(lines)


def _c(fmt: str, *values: Any) -> str:
    """A C printf format (the subset perftest's rows use) applied."""
    return fmt % values


def format_bw(row: dict[str, Any], gbits: bool = False) -> str:
    """A bandwidth row as perftest's REPORT_FMT prints it (REPORT_FMT_EXT in Gb/sec below
    0.1)."""
    factor = 125_000_000 if gbits else 1 << 20
    peak = row["bw_peak_bytes_per_s"] / factor
    avg = row["bw_average_bytes_per_s"] / factor
    if gbits and avg < 0.1:
        return _c(" %-7d    %d           %-7.6f            %-7.6f            %-7.6f",
                  row["size_bytes"], row["iterations"], peak, avg, row["msg_rate_Mpps"])
    return _c(" %-7d    %-10d       %-7.2f            %-7.2f\t\t     %-7.6f",
              row["size_bytes"], row["iterations"], peak, avg, row["msg_rate_Mpps"])


def format_lat(row: dict[str, Any]) -> str:
    """A latency row as perftest's REPORT_FMT_LAT prints it."""
    return _c(" %-7d %d          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t"
              "%-7.2f\t\t%-7.2f \t\t%-7.2f", row["size_bytes"], row["iterations"],
              row["t_min_us"], row["t_max_us"], row["t_typical_us"], row["t_avg_us"],
              row["t_stdev_us"], row["p99_us"], row["p999_us"])

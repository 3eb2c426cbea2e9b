"""``lossless fabric SOURCE``: what a fabric is made of and what is off its pattern
(:mod:`sim.fabric.survey`), for an ``ibnetdiscover`` file (:mod:`sim.fabric.ibnetdiscover`,
recognised by its content), a fabric file (``*.toml``) or a built-in fabric kind with its
``-p`` (those of ``lossless collective --fabric``)."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from sim.cli.argtypes import err as _err
from sim.cli.argtypes import finite_float, integer
from sim.cli.argtypes import key_value as _kv

__all__ = ["add_parsers", "cmd_fabric"]

EXIT_USAGE = 2


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "fabric",
        help="what a fabric is made of and what is off its pattern: an ibnetdiscover file, "
             "a fabric file or a built-in kind; a node from NCCL's topology XML "
             "(docs/reference/fabric.md)",
        description="Count a fabric's switches by tier, nodes and their NICs per rail, links "
                    "by width and speed, oversubscription per tier, and list what is off the "
                    "fabric's regular pattern: switches with missing or extra links, links "
                    "below the usual speed, nodes missing a NIC, NICs on another rail's "
                    "leaf. SOURCE: ibnetdiscover's output (its topology file or -p listing, "
                    "plain or gzipped), a fabric file FILE.toml, or a built-in kind (rail, "
                    "star, fattree, superpod, nvl72) with its -p keys; or NCCL's topology "
                    "XML of a node (NCCL_TOPO_DUMP_FILE): its GPUs, NICs, PCIe links and "
                    "each GPU's nearest NICs.")
    s.add_argument("source", metavar="SOURCE", nargs="?",
                   help="an ibnetdiscover file, FILE.toml, rail|star|fattree|superpod|nvl72, or "
                        "NCCL's topology XML (none with --sonic)")
    s.add_argument("-p", "--param", type=_kv, action="append", metavar="KEY=VALUE",
                   help="a built-in kind's parameter (repeatable), as lossless collective "
                        "takes it: -p k=8 -p gpus_per_node=8")
    s.add_argument("--json", action="store_true", help="the report as JSON on stdout")
    s.add_argument("--route", nargs=2, metavar=("SRC", "DST"),
                   help="instead of the report, the path from SRC to DST (LIDs, GUIDs or "
                        "node descriptions) as ibtracert prints it: by --lft's tables, "
                        "else by least hops (an ibnetdiscover SOURCE)")
    s.add_argument("--lft", metavar="FILE",
                   help="the switches' forwarding tables: OpenSM's opensm-lfts.dump (plain "
                        "or gzipped) or ibroute's output: --route follows them; without "
                        "--route the report adds them against least hops")
    s.add_argument("--sonic", action="append", metavar="CONFIG_DB",
                   help="instead of a fabric, a SONiC switch: its config_db.json (repeatable "
                        "for files holding its tables): the lossless port's buffer, PFC, ECN, "
                        "scheduler and PFC watchdog settings and the switch model they make "
                        "(docs/reference/fabric.md#a-sonic-switch)")
    s.add_argument("--pg-lookup", metavar="INI",
                   help="with --sonic: the platform's pg_profile_lookup.ini, for a "
                        "configuration without its lossless PG profiles")
    s.add_argument("--sonic-port", metavar="NAME",
                   help="with --sonic: the port whose settings are read (default: one of "
                        "the most common)")
    s.add_argument("--speed-gbps", type=finite_float(0, 1.6e6, lo_open=True), metavar="GBPS",
                   help="with --sonic: the port's speed when its PORT entry has none")
    s.add_argument("--switch-ports", type=integer(1, 4096), metavar="N",
                   help="with --sonic: the switch's ports, for the model's buffer (default: "
                        "the ports the configuration lists)")
    s.set_defaults(func=cmd_fabric)


def _graph(source: str, given: dict[str, Any]) -> Any:
    from sim.fabric.survey import graph_of_fabric, graph_of_ibnetdiscover
    from sim.scenarios.collective import FABRICS, build_fabric, is_fabric_file

    if source not in FABRICS and not source.endswith(".toml") and os.path.exists(source):
        from sim.fabric.ibnetdiscover import is_ibnetdiscover, read_ibnetdiscover

        if is_ibnetdiscover(source):  # the file as it is, not the fabric built from it
            if given:
                raise ValueError(f"-p {next(iter(given))}: an ibnetdiscover file takes no -p")
            return graph_of_ibnetdiscover(read_ibnetdiscover(source))
        raise ValueError(f"{source}: neither ibnetdiscover's output, NCCL's topology or "
                         f"graph XML nor a fabric file (*.toml)")
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import check_fabric_keys, split_file_params
    from sim.scenarios.common import collective_params

    if is_fabric_file(source):
        over, given = split_file_params(given)
        params = resolve_params(collective_params(), given)
        params["file_overrides"] = over
    elif source in FABRICS:
        check_fabric_keys(source, given)
        params = resolve_params(collective_params(), given)
    else:
        raise ValueError(f"{source}: no such file, and not a built-in fabric "
                         f"({', '.join(FABRICS)})")
    rf = build_fabric(source, params, faults=False)
    what = source if is_fabric_file(source) else " ".join(
        [source, *(f"-p {k}={v}" for k, v in given.items())])
    return graph_of_fabric(rf.fabric, list(rf.ranks), rf.gpus_per_node, what)


def cmd_fabric(args: argparse.Namespace) -> int:
    from sim.fabric.ibnetdiscover import IbnetdiscoverError
    from sim.fabric.nccl_xml import NcclTopoError
    from sim.fabric.survey import survey, survey_text

    given: dict[str, Any] = {}
    for key, value in args.param or []:
        if key in given:
            _err(f"-p {key}: given twice")
            return EXIT_USAGE
        given[key] = value
    if args.sonic:
        if args.source or given or args.route or args.lft:
            _err("--sonic reads a switch's configuration: no SOURCE, -p, --route or --lft")
            return EXIT_USAGE
        return _sonic(args)
    if not args.source:
        _err("SOURCE: a fabric to report (or --sonic CONFIG_DB)")
        return EXIT_USAGE
    try:
        if os.path.isfile(args.source) and not args.source.endswith(".toml"):
            from sim.fabric.nccl_xml import (
                graph_text,
                is_nccl_graph,
                is_nccl_topo,
                node_report,
                node_text,
                read_nccl_graph,
                read_nccl_topo,
            )

            if is_nccl_graph(args.source):  # NCCL's rings and trees of a node
                if given or args.route or args.lft:
                    raise ValueError("an NCCL graph file takes no -p, --route or --lft")
                graphs = read_nccl_graph(args.source)
                if args.json:
                    print(json.dumps([{"id": g.id, "pattern": g.pattern, "kind": g.kind,
                                       "gpus": g.gpus, "nets": g.nets, "attrs": g.attrs}
                                      for g in graphs], indent=1))
                else:
                    print(graph_text(graphs, args.source))
                return 0
            if is_nccl_topo(args.source):  # a node, as NCCL's topology file has it
                if given or args.route or args.lft:
                    raise ValueError("an NCCL topology file (a node) takes no -p, --route "
                                     "or --lft")
                rep = node_report(read_nccl_topo(args.source))
                print(json.dumps(rep, indent=1) if args.json else node_text(rep))
                return 0
        if args.route:
            return _route(args, given)
        g = _graph(args.source, given)
        routes = _compare(args) if args.lft else None
    except (IbnetdiscoverError, NcclTopoError, ValueError, OSError) as e:
        _err(str(e).splitlines()[0])
        return EXIT_USAGE
    rep = survey(g)
    if args.json:
        print(json.dumps(rep | ({"routes": routes} if routes else {}), indent=1))
    else:
        from sim.fabric.opensm import compare_text

        print(survey_text(rep) + ("\n" + compare_text(routes) if routes else ""))
    return 0


def _compare(args: argparse.Namespace) -> dict[str, Any]:
    """--lft without --route: the tables against least hops on an ibnetdiscover file."""
    from sim.fabric.ibnetdiscover import is_ibnetdiscover, read_ibnetdiscover
    from sim.fabric.opensm import compare_routes, read_lfts

    if not os.path.isfile(args.source) or not is_ibnetdiscover(args.source):
        raise ValueError("--lft: SOURCE must be an ibnetdiscover file")
    from sim.fabric.lft import min_hop_lft, top_switches, updn_lft
    from sim.fabric.opensm import tables_against
    from sim.scenarios.description import build

    topo, lfts = read_ibnetdiscover(args.source), read_lfts(args.lft)
    rep = compare_routes(topo, lfts)
    # our engines on the same fabric (every CA a host, as OpenSM routes them)
    fab = build({"topology": {"kind": "ibnetdiscover", "file": os.path.abspath(args.source)},
                 "links": {"fabric": "ib"}}, args.source, "/", need_traffic=False).fabric
    rep["ours"] = {
        "min-hop": tables_against(fab, topo, lfts, min_hop_lft(fab)),
        "up/down": tables_against(fab, topo, lfts, updn_lft(fab, top_switches(fab),
                                                            fab.node_guid)),
    }
    return rep


def _route(args: argparse.Namespace, given: dict[str, Any]) -> int:
    """--route (and --lft) on an ibnetdiscover file."""
    from sim.fabric.ibnetdiscover import is_ibnetdiscover, read_ibnetdiscover
    from sim.fabric.opensm import read_lfts, route, route_text

    if given or not os.path.isfile(args.source) or not is_ibnetdiscover(args.source):
        raise ValueError("--route: SOURCE must be an ibnetdiscover file")
    topo = read_ibnetdiscover(args.source)
    lfts = read_lfts(args.lft) if args.lft else None
    src, dst = args.route
    hops = route(topo, src, dst, lfts)
    if args.json:
        print(json.dumps({"from": src, "to": dst, "by": "lft" if lfts else "least hops",
                          "hops": [{"node": f"{h.node:#018x}", "port": h.port,
                                    "peer": f"{h.peer:#018x}", "peer_port": h.peer_port,
                                    "peer_desc": topo.nodes[h.peer].desc} for h in hops]},
                         indent=1))
    else:
        print(route_text(topo, hops, src, dst))
    return 0


def _sonic(args: argparse.Namespace) -> int:
    """--sonic: a SONiC switch's configuration and the switch model it makes."""
    from sim.fabric.sonic import SonicError, read_sonic, sonic_doc, sonic_text

    try:
        sw = read_sonic(args.sonic, pg_lookup=args.pg_lookup, port=args.sonic_port,
                        default_speed_mbps=round(args.speed_gbps * 1000)
                        if args.speed_gbps else None)
    except SonicError as e:
        _err(str(e))
        return EXIT_USAGE
    ports = args.switch_ports or sw.listed_ports
    if args.json:
        print(json.dumps(sonic_doc(sw, ports), indent=1))
    else:
        print(sonic_text(sw, ports), end="")
    return 0

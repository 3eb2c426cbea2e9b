"""``lossless counters OUT_DIR``: a run's port counters as the real tools print them
(:mod:`sim.fabric.counters`): ``perfquery -x`` for InfiniBand ports, mlx5's ``ethtool -S``
for Ethernet ones, ``rdma statistic show`` for the NICs' RDMA counters, or JSON.  OUT_DIR is
a ``lossless replay`` results folder (``summary.json``'s ``tool_counters``) or a ``lossless
collective --out`` folder (``counters.json``: its largest completed size)."""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import sys
from typing import Any

from sim.cli.argtypes import err as _err
from sim.cli.argtypes import integer

__all__ = ["add_parsers", "cmd_counters", "read_counters"]

EXIT_USAGE = 2
FORMATS = ("auto", "perfquery", "ethtool", "rdma", "json")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    s = sub.add_parser(
        "counters",
        help="a run's port counters as perfquery -x, ethtool -S or rdma statistic print "
             "them (docs/reference/counters.md)",
        description="Print the port counters of a lossless replay or lossless collective "
                    "results folder in the terms of the tools that read the real fabric: "
                    "perfquery -x for InfiniBand ports (switches and HCAs), mlx5's ethtool "
                    "-S for Ethernet ports (PFC pause frames and durations per priority), "
                    "rdma statistic show for the NICs' CNP and ECN counters.")
    s.add_argument("out_dir", metavar="OUT_DIR",
                   help="a results folder of lossless replay (summary.json) or lossless "
                        "collective --out (counters.json)")
    s.add_argument("--as", dest="form", choices=FORMATS, default="auto",
                   help="the tool's form: perfquery, ethtool, rdma (the NICs' hw_counters), "
                        "json (the records); auto (default): perfquery on an InfiniBand "
                        "fabric, else ethtool")
    s.add_argument("--node", action="append", metavar="NAME",
                   help="only this node's ports (a name as the run's outputs give it; "
                        "shell-style patterns: 'leaf*'); repeatable")
    s.add_argument("--port", type=integer(0, 0xFFFF), metavar="N",
                   help="only port N (the simulator's index, as summary.json's)")
    s.add_argument("--against", metavar="FILE",
                   help="your fabric's perfquery output (-x or not, as many ports as you "
                        "like): its ports matched to the simulated ones by LID and port; or "
                        "one NIC's ethtool -S, against the Ethernet port --node names: each "
                        "counter side by side with the ratio simulated/yours")
    s.set_defaults(func=cmd_counters)


def read_counters(out_dir: str) -> tuple[str, dict[str, Any]]:
    """(file read, its counters: ``ports`` and, from a collective, ``size_bytes``,
    ``covers``, ``fidelity``) of results folder ``out_dir``; ValueError naming the file."""
    for name, key in (("counters.json", "ports"), ("summary.json", "tool_counters")):
        path = os.path.join(out_dir, name)
        if not os.path.exists(path):
            continue
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: not a readable JSON file ({e})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get(key), list):
            raise ValueError(f"{path}: no {key!r} list (a results folder of an older "
                             f"lossless? run it again)")
        from sim.fabric.counters import record_problem

        for i, r in enumerate(doc[key]):
            why = record_problem(r)
            if why:
                raise ValueError(f"{path}: {key}[{i}]: not a port record ({why})")
        out = {k: v for k, v in doc.items() if k != key} if key == "ports" else {}
        out["ports"] = doc[key]
        return path, out
    if not os.path.isdir(out_dir):
        raise ValueError(f"{out_dir}: no such folder")
    raise ValueError(f"{out_dir}: neither summary.json (lossless replay) nor counters.json "
                     f"(lossless collective --out)")


def cmd_counters(args: argparse.Namespace) -> int:
    from sim.fabric.counters import format_ethtool, format_perfquery, format_rdma_statistic

    try:
        path, doc = read_counters(args.out_dir)
    except ValueError as e:
        _err(str(e))
        return EXIT_USAGE
    ports = doc["ports"]
    if args.node:
        ports = [r for r in ports if any(fnmatch.fnmatchcase(r["node"], n) for n in args.node)]
    if args.port is not None:
        ports = [r for r in ports if r["port"] == args.port]
    if not ports:
        _err(f"{path}: no port matches" + (f" --node {' '.join(args.node)}" if args.node
                                            else "") + (f" --port {args.port}"
                                                        if args.port is not None else ""))
        return EXIT_USAGE
    if args.against:
        return _against(args.against, path, doc, ports)
    form = args.form
    if form == "auto":
        form = "perfquery" if any(r["link"] == "ib" for r in ports) else "ethtool"
    if form == "json":
        json.dump({**{k: v for k, v in doc.items() if k != "ports"}, "ports": ports},
                  sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    text = {"perfquery": format_perfquery, "ethtool": format_ethtool,
            "rdma": format_rdma_statistic}[form](ports)
    if not text:
        what = {"perfquery": "InfiniBand ports", "ethtool": "Ethernet ports",
                "rdma": "NICs on Ethernet (RDMA hw_counters)"}[form]
        _err(f"{path}: no {what} among the ports asked for: --as "
             f"{'ethtool' if form == 'perfquery' else 'perfquery'}?")
        return EXIT_USAGE
    if "covers" in doc:  # a collective's: which size and what of it
        print(f"# size {doc['size_bytes']} B, {doc['covers']}"
              + (", flow fidelity: data counters only" if doc.get("fidelity") == "flow"
                 else ""))
    sys.stdout.write(text)
    return 0


#: the counters --against compares (those a run makes)
AGAINST = ("PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortXmitWait")


def _against(real_path: str, path: str, doc: dict[str, Any], ports: list[Any]) -> int:
    """Print the ports of perfquery output ``real_path`` beside the simulated ones with
    their LID and port number (or, ``ethtool -S`` output, beside the one Ethernet port
    asked for)."""
    from sim.fabric.counters import ToolOutputError, read_ethtool, read_perfquery

    try:
        with open(real_path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        first = next((ln.strip() for ln in text.splitlines()
                      if ln.strip() and not ln.startswith("#")), "")
        if first.endswith("statistics:"):  # ethtool -S: "NIC statistics:"
            return _against_ethtool(real_path, read_ethtool(text, real_path), path, doc,
                                    ports)
        real = read_perfquery(text, real_path)
    except OSError as e:
        _err(f"{real_path}: cannot read: {e.strerror or e}")
        return EXIT_USAGE
    except ToolOutputError as e:
        _err(str(e))
        return EXIT_USAGE
    sim = {(r["lid"], r["port_number"]): r for r in ports if r["link"] == "ib"}
    pairs = [(b, sim[(b["lid"], b["port_number"])]) for b in real
             if (b["lid"], b["port_number"]) in sim and b["counters"] != "PortRcvErrorDetails"]
    if not pairs:
        _err(f"{real_path}: none of its {len(real)} ports is a simulated InfiniBand port of "
             f"{path} (matched by LID and port number: a fabric read from your "
             f"ibnetdiscover file has your LIDs)")
        return EXIT_USAGE
    if "covers" in doc:
        print(f"# size {doc['size_bytes']} B, {doc['covers']}")
    print(f"# {real_path}: {len(pairs)} of its {len(real)} ports matched by LID and port")
    print(f"{'port':<34} {'counter':<14} {'yours':>16} {'simulated':>16} {'sim/yours':>10}")
    for b, r in pairs:
        label = f"{r['node']}:p{r['port']} (Lid {b['lid']} port {b['port_number']})"
        for k in AGAINST:
            if k not in b["perfquery"]:
                continue
            yours, simulated = b["perfquery"][k], r.get("perfquery", {}).get(k, 0)
            ratio = f"{simulated / yours:.4f}" if yours else "-"
            print(f"{label:<34} {k:<14} {yours:>16} {simulated:>16} {ratio:>10}")
            label = ""
    return 0


def _against_ethtool(real_path: str, real: dict[str, int], path: str, doc: dict[str, Any],
                     ports: list[Any]) -> int:
    """Your NIC's ``ethtool -S`` beside the one simulated Ethernet port ``--node`` (and
    ``--port``) names: every counter both have."""
    eth = [r for r in ports if r["link"] == "ethernet"]
    if len(eth) != 1:
        _err(f"{real_path}: ethtool -S is one NIC's: name one Ethernet port of {path} with "
             f"--node (and --port); {len(eth)} match")
        return EXIT_USAGE
    r = eth[0]
    sim = r.get("ethtool", {})
    both = [k for k in real if k in sim or k in _ETHTOOL_KNOWN
            or (k.startswith(("rx_prio", "tx_prio")) and k.endswith(("_pause",
                                                                      "_pause_duration")))]
    if not both:
        _err(f"{real_path}: none of its {len(real)} counters is one the simulation counts")
        return EXIT_USAGE
    if "covers" in doc:
        print(f"# size {doc['size_bytes']} B, {doc['covers']}")
    print(f"# {real_path}: {len(both)} of its {len(real)} counters, against "
          f"{r['node']}:p{r['port']}")
    print(f"{'counter':<34} {'yours':>16} {'simulated':>16} {'sim/yours':>10}")
    for k in both:
        yours, simulated = real[k], sim.get(k, 0)
        ratio = f"{simulated / yours:.4f}" if yours else "-"
        print(f"{k:<34} {yours:>16} {simulated:>16} {ratio:>10}")
    return 0


#: the ethtool counters a run counts (0 when not in a record: none happened)
_ETHTOOL_KNOWN = ("rx_packets_phy", "rx_bytes_phy", "tx_packets_phy", "tx_bytes_phy",
                  "rx_discards_phy", "tx_discards_phy", "rx_crc_errors_phy",
                  "link_down_events_phy", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy",
                  "tx_pause_storm_error_events")

"""Scenario files that describe a whole fabric: topology, links, switch buffer and thresholds,
ECN, hosts, flows, pcap inputs and captures (docs/reference/fabric-file.md; a worked example:
docs/howto/describe-your-fabric.md).

A fabric file is a TOML document without a ``scenario`` key.  Every table is checked against
its own :class:`sim.scenarios.Param` list, so an unknown key or an impossible value is a
:class:`ScenarioError` naming the table and the key (``[switch] xoff_kb: must be > 0``).  The
fabric-wide knobs and their conversion to simulator objects are the ones the built-in scenarios
use (:mod:`sim.scenarios.common`), so a file and a built-in with the same values build the same
fabric.

Topologies: ``star`` (:func:`sim.fabric.star`), ``leaf_spine`` and ``ring``
(:mod:`sim.fabric.topology`), ``rail`` (:func:`sim.fabric.rail.rail_optimized`), ``fat_tree``
and ``superpod`` (:mod:`sim.fabric.fattree`), or ``custom``: explicit switches, hosts and
links, with routes computed here by breadth-first search (shortest paths in switch hops; with
``ecmp`` every equal-cost next hop forms an ECMP group, else the lowest-numbered port is used).
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from sim.fabric import Fabric, star
from sim.fabric.fattree import (
    SU_SLOTS,
    SUPERPOD_LEAF_UPLINKS,
    fat_tree,
    k_problem,
    superpod,
    sus_problem,
)
from sim.fabric.lft import ROUTINGS, apply_routing
from sim.fabric.rail import rail_optimized
from sim.fabric.topology import leaf_spine, ring, route_problem
from sim.flowctl.base import FLOW_CONTROLS
from sim.flowctl.credit import CbfcConfig
from sim.flowctl.ib import BLOCK_BYTES, IbConfig
from sim.net.mmu import Mmu
from sim.net.port import QUANTUM_BYTES, VLARB_DEFAULT, check_scheduler, vlarb_cover, vlarb_weights
from sim.nic.host import Flow
from sim.scenarios.base import Param, Scenario, ScenarioError, TracerSlot, resolve_params
from sim.scenarios.common import (
    FABRIC_PARAMS,
    FAULT_PARAMS,
    KB,
    RESERVED_BYTES,
    TC,
    cc_params,
    check_stragglers,
    default_buffer_bytes,
    ecn_config,
    frac,
    host_kw,
    in_range,
    mmu_config,
    nonneg,
    pcie_params,
    pos,
    rc_params,
    straggler_delays,
)
from sim.units import gbps, kb_to_bytes, ms_to_ps, prop_delay_ps, us_to_ps
from sim.workloads.patterns import PATTERNS, pairs
from sim.workloads.replay import scale_fraction

__all__ = ["COLLECTIVE", "SECTIONS", "build", "is_description", "apply_overrides"]

_F = FABRIC_PARAMS


def _kind(v: str) -> str | None:
    kinds = ("star", "leaf_spine", "ring", "rail", "fat_tree", "superpod", "custom",
             "ibnetdiscover")
    return None if v in kinds else f"must be one of {list(kinds)}"


def _path_text(v: str) -> str | None:
    return None if isinstance(v, str) else "must be a file name (a string)"


def _ids(v: list) -> str | None:
    if not all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x < 1 << 16 for x in v):
        return "must be a list of node ids in 0..65535"
    return None if len(set(v)) == len(v) else "has duplicate node ids"


def _links(v: list) -> str | None:
    for i, link in enumerate(v):
        if not (isinstance(link, list) and len(link) == 4
                and all(isinstance(x, int) and not isinstance(x, bool) and x >= 0
                        for x in link)):
            return f"entry {i} must be [node, port, node, port] (non-negative ints)"
    return None


def _tcs(v: list) -> str | None:
    ok = all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 7 for x in v)
    return None if ok else "must be a list of traffic classes 0..7"


def _weights(v: list) -> str | None:
    ok = len(v) == 8 and all(isinstance(x, int) and not isinstance(x, bool) and x >= 1
                             for x in v)
    return None if ok else "must be 8 ints >= 1 (one DWRR weight per traffic class)"


def _watchdog_params() -> tuple[Param, ...]:
    """The switch PFC watchdog's keys (the built-in scenarios'), on the lossless classes."""
    from sim.scenarios.pfc_deadlock_ring import WATCHDOG_PARAMS

    return tuple(Param(p.name, p.default, p.doc.replace("priority 3", "lossless class"),
                       p.check) for p in WATCHDOG_PARAMS)


_WATCHDOG = _watchdog_params()
#: the watchdog's keys other than ``watchdog``: in the params echo only when it is on
_WD_KEYS = tuple(p.name for p in _WATCHDOG if p.name != "watchdog")


def _paths(v: list) -> str | None:
    ok = all(isinstance(x, str) and x for x in v)
    return None if ok else "must be a file name or a list of them"


def _sl2vl(v: list) -> str | None:
    ok = len(v) == 8 and all(isinstance(x, int) and not isinstance(x, bool) and 0 <= x <= 15
                             for x in v)
    return None if ok else "must be 8 VLs 0..15 (one per traffic class)"


def _vlarb_table(v: list) -> str | None:
    try:
        vlarb_weights(high=v)
    except (TypeError, ValueError) as e:
        return str(e).replace("vlarb high table ", "")
    return None


def _choice(*options: str):
    def check(v: str) -> str | None:
        return None if v in options else f"must be one of {list(options)}"
    return check


def _pattern(v: str) -> str | None:
    return None if v in ("", *PATTERNS) else f"must be '' or one of {list(PATTERNS)}"


def _alpha(v: str) -> str | None:
    try:
        a = Fraction(v)
    except (ValueError, ZeroDivisionError):
        return "must be a fraction such as '1/8' or '2'"
    return None if a > 0 else "must be > 0"


def _time_scale(v: float) -> str | None:
    # sim.workloads.replay.scale_fraction keeps 6 decimal digits (limit_denominator(10**6)):
    # below 1e-6 a scale would become 0; the upper bound keeps a capture's offsets within days,
    # not eons
    return None if 1e-6 <= v <= 1e6 else "must be in 1e-6..1e6"


def _port_ref(v: str) -> str | None:
    if v == "":
        return None
    a, sep, b = v.partition(":")
    return None if sep and a.isdigit() and b.isdigit() else "must be 'NODE:PORT'"


def _limit_mb(v: float) -> str | None:
    return None if 0 < v <= 10**9 else "must be in (0, 1e9] MB"


def _port_refs(v: list) -> str | None:
    for x in v:
        if not isinstance(x, str) or not x or _port_ref(x):
            return "must be a list of 'NODE:PORT' strings"
    return None


#: table name -> its parameters.  ``flows`` and ``pcap`` are arrays of tables.
SECTIONS: dict[str, tuple[Param, ...]] = {
    "run": (_F["duration_ms"], _F["seed"]),
    "topology": (
        Param("kind", "star", "star | leaf_spine | ring | rail | fat_tree | superpod | custom "
              "| ibnetdiscover", _kind),
        Param("hosts", 2, "star: number of hosts (host i on switch port i)", in_range(2, 1024)),
        Param("leaves", 2, "leaf_spine: leaf switches", in_range(1, 64)),
        Param("spines", 2, "leaf_spine, rail: spine switches", in_range(1, 64)),
        Param("hosts_per_leaf", 2, "leaf_spine: hosts per leaf", in_range(1, 256)),
        Param("ecmp", False, "leaf_spine/rail/fat_tree/superpod/custom: spread flows over "
              "equal-cost ports by flow hash", None),
        Param("nodes", 2, "rail: nodes (servers)", in_range(1, 1024)),
        Param("gpus_per_node", 4, "rail: GPUs per node, one NIC and one rail leaf each",
              in_range(1, 64)),
        Param("k", 4, "fat_tree: switch radix k (even): k pods of k/2 edge and k/2 "
              "aggregation switches, (k/2)^2 cores", k_problem),
        Param("oversubscription", 1, "fat_tree: hosts per edge switch = oversubscription x "
              "k/2 (its uplinks)", in_range(1, 8)),
        Param("sus", 1, "superpod: DGX H100 scalable units (1, 2, 4 or 8)", sus_problem),
        Param("superpod_nodes", 0, "superpod: DGX nodes populated (0: all 32*sus - 1)",
              in_range(0, 255)),
        Param("sharp", False, "rail, superpod, with [links] fabric = \"ib\": the leaves run "
              "SHARP (an aggregation node per rail leaf; superpod of 2 SUs or more: a root "
              "per rail on a spine), which [[collective]] entries with collnet = true and "
              "lossless collective with NCCL_COLLNET_ENABLE=1 use", None),
        Param("switches", 4, "ring: switches in the ring", in_range(2, 256)),
        Param("hosts_per_switch", 1, "ring: hosts per switch", in_range(1, 64)),
        Param("routing", "clockwise", "ring: clockwise | shortest; leaf_spine/rail/fat_tree/"
              "superpod/ibnetdiscover: ecmp | static (OpenSM min-hop LFT) | updn (OpenSM "
              "up/down LFT, the top tier its roots) | adaptive (per packet, least queued "
              "minimal port); unset: the builder's tables (see ecmp)",
              _choice("clockwise", "shortest", *ROUTINGS)),
        Param("switch_ids", [0], "custom: switch node ids", _ids),
        Param("host_ids", [1], "custom: host node ids", _ids),
        Param("links", [[0, 1, 1, 0]], "custom: links as [node, port, node, port]; a host's "
              "port is 0", _links),
        Param("file", "", "ibnetdiscover: its topology file or -p listing (relative to this "
              "file's folder): switches, NICs, links at their width and speed", _path_text),
        Param("lft", "", "ibnetdiscover: OpenSM's opensm-lfts.dump or ibroute's output: the "
              "switches route by these tables (unset: least hops, ECMP with ecmp = true)",
              _path_text),
    ),
    "links": (
        _F["link_gbps"], _F["cable_m"],
        Param("fabric", "roce", "the whole fabric's link layer: roce (flow_control and the "
              "rest as given) | ib (defaults flow_control = ib, [switch] scheduler = vlarb, "
              "no RED marking; cc dcqcn refused; sim.scenarios.common.fabric_setup)",
              _choice("roce", "ib")),
        Param("flow_control", "pfc", "link-level flow control of every link: pfc (the "
              "switch's PFC as [switch] sets it) | credit (credit-based, CBFC, on the lossless "
              "class 3 and class 6; sim.flowctl) | ib (InfiniBand per-VL credits)",
              _choice(*FLOW_CONTROLS)),
        Param("credit_bytes", 128, "credit: bytes per credit (SAI CreditSize)",
              in_range(1, 65536)),
        Param("credit_buffer_kb", 32.0, "credit: receiver buffer per class per link "
              "(the credit limit)", pos),
        Param("vl_buffer_kb", 32.768, "ib: receiver buffer per data VL per link (IBA 7.9 "
              "credits of 64-byte blocks; sim.flowctl.ib)", pos),
        Param("sl2vl", list(range(8)), "ib: VL of each traffic class (SL), 8 VLs 0..15, "
              "15 = management (not credited)", _sl2vl),
    ),
    "switch": (
        _F["pfc"], _F["buffer_kb"], _F["xoff_kb"],
        Param("xoff_mode", "static", "static | dynamic (threshold = alpha x free pool)",
              _choice("static", "dynamic")),
        Param("alpha", "1/8", "dynamic threshold factor, an exact fraction", _alpha),
        Param("xon_delta_kb", 2.0, "resume when shared use is this far below the threshold",
              nonneg),
        Param("reserved_kb", 2.0, "guaranteed bytes per (ingress port, PG)", nonneg),
        Param("headroom_kb", -1.0, "PFC headroom per lossless (port, PG); -1 = the formula "
              "(sim.net.mmu.headroom_bytes)", None),
        Param("response_us", 1.0, "PFC response time in the headroom formula", nonneg),
        Param("lossless_tcs", [TC], "lossless traffic classes (with pfc)", _tcs),
        Param("mtu_bytes", 1082, "largest frame, for the headroom formula", in_range(64, 9216)),
        Param("scheduler", "rr", "egress scheduling of non-strict classes: rr | dwrr | "
              "vlarb (IBA VL arbitration)", _choice("rr", "dwrr", "vlarb")),
        Param("weights", [1] * 8, "DWRR weights per traffic class", _weights),
        Param("vlarb_high", [list(e) for e in VLARB_DEFAULT[0]], "vlarb: high-priority table, "
              "[VL, weight in 64-byte units] entries (OpenSM qos_vlarb_high)", _vlarb_table),
        Param("vlarb_low", [list(e) for e in VLARB_DEFAULT[1]], "vlarb: low-priority table "
              "(OpenSM qos_vlarb_low)", _vlarb_table),
        Param("vlarb_high_limit", VLARB_DEFAULT[2], "vlarb: limit of high priority, 4 KiB "
              "units, 255 = unbounded (OpenSM qos_high_limit)", in_range(0, 255)),
        *_WATCHDOG,
        Param("sonic", [], "SONiC config_db.json, a list of one file (or of the files "
              "holding its tables): the buffer, PFC, ECN, scheduler and watchdog keys not "
              "given here (sim.fabric.sonic)", _paths),
        Param("sonic_pg_lookup", "", "with sonic: the platform's pg_profile_lookup.ini, for "
              "a configuration without its lossless PG profiles", None),
        Param("sonic_port", "", "with sonic: the port whose settings are taken (default: "
              "one of the most common)", None),
        Param("sonic_vendor", "", "with sonic: spectrum | tomahawk, the meaning of a PG's "
              "size (default: from the profile)", _choice("", "spectrum", "tomahawk")),
    ),
    "ecn": (_F["kmin_kb"], _F["kmax_kb"], _F["pmax"],
            Param("mark_at", "dequeue", "dequeue | enqueue", _choice("dequeue", "enqueue"))),
    "hosts": (
        _F["cc"], *cc_params(),
        Param("cnp_interval_us", 50.0, "NP: at most one CNP per flow per interval", nonneg),
        Param("cnp_tc", 6, "traffic class of CNPs", in_range(0, 7)),
        Param("cnp_mode", "immediate", "NP: immediate (CNP on the first CE, then at most "
              "one per interval) | window (one at the end of each interval with a CE)",
              _choice("immediate", "window")),
        Param("ack_every", 0, "receivers ACK every this many frames of a flow, also those "
              "that did not ask (0: only what the RC transport asks for; no ACKs with "
              "reliable = false)", nonneg),
        *pcie_params(),
        *rc_params(),
    ),
    "traffic": (
        Param("pattern", "", "'' (none) or shift | random | incast | all_to_all over all "
              "hosts", _pattern),
        Param("load", 1.0, "offered load per source, fraction of its link rate (0: no "
              "pattern flows)", frac),
        Param("tc", TC, "traffic class", in_range(0, 7)),
        Param("packet_bytes", 1082, "frame bytes without FCS", in_range(64, 9216)),
    ),
    "flows": (
        Param("src", 0, "source host node id", nonneg),
        Param("dst", 0, "destination host node id", nonneg),
        Param("rate_gbps", 0.0, "sending rate, Gb/s (0: the source's link rate)", nonneg),
        Param("tc", TC, "traffic class", in_range(0, 7)),
        Param("packet_bytes", 1082, "frame bytes without FCS", in_range(64, 9216)),
        Param("size_kb", 0.0, "bytes to send (0: unlimited)", nonneg),
        Param("start_us", 0.0, "start time", nonneg),
        Param("stop_us", 0.0, "stop time (0: never)", nonneg),
        Param("ecn", 2, "IP ECN codepoint of the data (2 = ECT(0))", in_range(0, 3)),
        Param("on_us", 0.0, "on/off traffic: sending period (0: always on)", nonneg),
        Param("off_us", 0.0, "on/off traffic: silent period", nonneg),
        Param("onoff", "fixed", "fixed | exponential (periods drawn with these means)",
              _choice("fixed", "exponential")),
        Param("message_kb", 0.0, "messages of this size back to back (0: no messages)",
              nonneg),
    ),
    "pcap": (
        Param("file", "", "capture to replay (relative to the scenario file)", None),
        Param("time_scale", 1.0, "multiply the capture's time offsets by this, 1e-6..1e6",
              _time_scale),
    ),
    "capture": (
        Param("bottleneck", "", "'NODE:PORT' captured as bottleneck.pcap (default: the "
              "switch port feeding the most-loaded receiver)", _port_ref),
        Param("ports", [], "more 'NODE:PORT' egress ports to capture", _port_refs),
        Param("limit_mb", 1024.0, "all pcap files of the run stop at this many MB "
              "(--capture-limit-mb wins)", _limit_mb),
        Param("snaplen", 0, "bytes kept of each captured frame, 0: whole frames (--snaplen "
              "wins)", in_range(0, 262144)),
        Param("enabled", True, "write pcap files at all (--no-capture wins)", None),
    ),
}
_ARRAYS = ("flows", "pcap")


def _size(v: str) -> str | None:
    from sim.workloads.nccl_tests import parse_size

    try:
        n = parse_size(v)
    except ValueError:
        return "must be a size such as 1048576, 64K, 16M or 1G (K, M, G: powers of 1024)"
    return None if 1 <= n <= _MAX_COLL_BYTES else f"must be 1 .. {_MAX_COLL_BYTES} bytes (64G)"


def _host_list(v: list) -> str | None:
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in v):
        return "must be a list of host node ids"
    return None if len(set(v)) == len(v) else "has a host twice (one rank per host)"


#: Largest ``[[collective]] size``: 64 GiB (nccl-tests runs up to a GPU's memory).
_MAX_COLL_BYTES = 64 << 30


def _collective_params() -> tuple[Param, ...]:
    from sim.scenarios.common import collective_params
    from sim.workloads.nccl import DTYPE_BYTES, MAXCHANNELS, Algorithm, Collective, Protocol

    # the node model of lossless collective, with its names, defaults and checks
    cli = {p.name: p for p in collective_params()}
    return (
        Param("collective", "allreduce", "allreduce | reducescatter | allgather | alltoall | "
              "sendrecv | broadcast", _choice(*(c.value for c in Collective))),
        Param("size", "1M", "nccl-tests' -b size: bytes or 64K / 16M / 1G (powers of 1024)",
              _size),
        Param("datatype", "float", "element type (nccl-tests -d)", _choice(*DTYPE_BYTES)),
        Param("algo", "ring", "NCCL algorithm: ring | tree | nvls | nvls_tree (all but ring: "
              "allreduce only; nvls: one node, nvls_tree: several, simple protocol) | auto "
              "(NCCL's tuner picks, as lossless collective's default) | collnet_direct | "
              "collnet_chain (with collnet = true on SHARP switches)",
              _choice(*(a.value for a in Algorithm), "auto")),
        Param("proto", "simple", "NCCL protocol: simple | ll | ll128 | auto (NCCL's tuner)",
              _choice(*(p.value for p in Protocol), "auto")),
        Param("channels", 0, "communicator channels (small calls use fewer; 0: as lossless "
              "collective, one per NIC of a node when there are several nodes of several "
              "GPUs, else 2)", in_range(0, MAXCHANNELS)),
        Param("qps", 1, "QPs per connection (NCCL_IB_QPS_PER_CONNECTION)", in_range(1, 128)),
        Param("iters", 1, "iterations back to back, on the same QPs", in_range(1, 100000)),
        Param("start_us", 0.0, "when the first iteration starts", nonneg),
        Param("hosts", [], "the ranks' hosts in rank order ([]: every host of the fabric in "
              "group order; rail, fat_tree, superpod: the fabric's ranks)", _host_list),
        Param("gpus_per_node", 0, "ranks per node: NVLink inside a node, PXN between "
              "nodes, the tree's nodes (0: with the default hosts the topology's, rail "
              "and superpod their GPUs per node; else 1, every rank its own node)",
              in_range(0, 1024)),
        cli["nvlink"], cli["nvlink_gbps"], cli["nvlink_latency_ns"], cli["pxn"],
        cli["hw"],
        Param("collnet", False, "NCCL_COLLNET_ENABLE=1: CollNet on the fabric's SHARP "
              "switches ([topology] sharp = true; the fabric's ranks); NCCL's tuner may then "
              "pick it (algo = \"auto\") or algo names it", None),
        Param("nccl_host", False, "NCCL's host side, as lossless collective's -p nccl_host "
              "(its default there: true): the launch and per-step latencies and the GPU "
              "channels' bandwidth of NCCL's cost model for the node hw; false: the network "
              "alone", None),
        Param("root", 0, "broadcast: the root rank", in_range(0, 65535)),
        Param("tc", TC, "traffic class of the data", in_range(0, 7)),
        Param("packet_bytes", 0, "largest frame without FCS (0: [switch] mtu_bytes); payload "
              "= packet_bytes - the fabric's header bytes (58 RoCEv2, 26 IB)",
              in_range(0, 9216)),
        cli["failover"],
        Param("fidelity", "packet", "packet: every frame through the switches; flow: each "
              "QP a fluid flow at its max-min fair rate on its path, as lossless "
              "collective --fidelity flow (no queues, PFC, ECN, congestion control or "
              "losses; only where the file has no other traffic, faults or captures, and "
              "every entry at flow)", _choice("packet", "flow")),
    )


#: ``[[collective]]`` entries: NCCL collectives run as traffic of the fabric.
#: Kept out of :data:`SECTIONS` (whose tables ``-p`` sets one by one): ``-p collective.KEY``
#: sets KEY in every entry.
COLLECTIVE: tuple[Param, ...] = _collective_params()
#: ``[[collective]]`` keys that summary.json's ``params`` names only when not their default
#: (added later: the files without them keep their summary.json as it was)
_COLLECTIVE_QUIET = {p.name: p.default for p in COLLECTIVE
                     if p.name in ("failover", "hw", "nccl_host", "collnet", "fidelity")}
#: ``[[faults]]`` entries: faults over time (sim.fabric.faults, docs/explanation/faults.md);
#: the same keys as ``-p fault=`` (:data:`sim.scenarios.common.FAULT_PARAMS`).
FAULTS: tuple[Param, ...] = FAULT_PARAMS
_SPECS: dict[str, tuple[Param, ...]] = {**SECTIONS, "collective": COLLECTIVE,
                                        "faults": FAULTS}
_TOP = {"description", *_SPECS}


def is_description(doc: Mapping[str, Any]) -> bool:
    return "scenario" not in doc


def apply_overrides(doc: dict[str, Any], params: Mapping[str, Any], where: str,
                    params_from: str = "-p") -> None:
    """``-p table.key=value`` (and ``-p seed=N`` / ``-p duration_ms=X`` for ``[run]``).

    Each value is checked here, so that a bad one is named as ``-p`` (``params_from``), not
    as the file's."""
    for key, value in params.items():
        table, dot, name = key.partition(".")
        if not dot:
            table, name = "run", key
        if table == "collective":
            _override_collectives(doc, name, value, key, where, params_from)
            continue
        if table not in SECTIONS or table in _ARRAYS:
            raise ScenarioError(f"{where}: {params_from} {key}: use TABLE.KEY with a table of "
                                f"{sorted(set(SECTIONS) - set(_ARRAYS))} (or collective.KEY: "
                                f"every [[collective]] entry)")
        try:  # the value as read (a -p text by the key's type), checked here
            value = resolve_params(SECTIONS[table], {name: value})[name]
        except ScenarioError as e:
            raise ScenarioError(f"{params_from}: [{table}] {e}") from None
        sec = doc.setdefault(table, {})
        if not isinstance(sec, dict):
            raise ScenarioError(f"{where}: [{table}] must be a table")
        sec[name] = value


def _override_collectives(doc: dict[str, Any], name: str, value: Any, key: str, where: str,
                          params_from: str) -> None:
    """``-p collective.KEY=VALUE``: KEY of every ``[[collective]]`` entry (checked here)."""
    entries = doc.get("collective")
    if not isinstance(entries, list) or not entries:
        raise ScenarioError(f"{where}: {params_from} {key}: the file has no [[collective]] "
                            f"entry to set it in")
    try:  # the value as read (a -p text by the key's type), checked here
        value = resolve_params(COLLECTIVE, _coll_raw({name: value}))[name]
    except ScenarioError as e:
        raise ScenarioError(f"{params_from}: [[collective]] {e}") from None
    doc["collective"] = [{**e, name: value} if isinstance(e, dict) else e for e in entries]


def _coll_raw(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A ``[[collective]]`` entry with a numeric ``size`` (bytes) as its text, so that
    ``size = 1048576`` and ``size = "1M"`` are the same key."""
    out = dict(raw)
    v = out.get("size")
    if isinstance(v, int | float) and not isinstance(v, bool):
        out["size"] = str(v)
    return out


def _section(doc: Mapping[str, Any], name: str, where: str, index: int | None = None
             ) -> dict[str, Any]:
    raw = doc.get(name, {}) if index is None else doc[name][index]
    label = f"[{name}]" if index is None else f"[[{name}]] #{index + 1}"
    if not isinstance(raw, dict):
        raise ScenarioError(f"{where}: {label} must be a table")
    if name == "collective":
        raw = _coll_raw(raw)
    try:
        return resolve_params(_SPECS[name], raw)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: {label} {e}") from None


def _array(doc: Mapping[str, Any], name: str, where: str) -> list[dict[str, Any]]:
    raw = doc.get(name, [])
    if not isinstance(raw, list):
        raise ScenarioError(f"{where}: {name} must be an array of tables ([[{name}]])")
    return [_section(doc, name, where, i) for i in range(len(raw))]


def build(doc: Mapping[str, Any], where: str, base_dir: str = ".", *,
          need_traffic: bool = True, fault_params: Mapping[str, Any] | None = None,
          replayed: bool = False) -> Scenario:
    """A :class:`Scenario` from a parsed fabric file (``where`` names it in errors).
    ``need_traffic=False`` accepts a file without traffic (``lossless collective --fabric
    FILE.toml`` brings its own).  ``info`` holds ``ranks`` (the hosts in rank order: a
    generated fabric's ranks, else every host in group order), ``gpus_per_node`` (the
    topology's, 1 for the hand-made kinds) and ``mtu_bytes``.  ``fault_params``: the
    ``-p`` fault keys (``fault``, ``fault.KEY``, ``detect_us``, ``converge_us``), faults
    besides the file's ``[[faults]]``.  ``replayed``: captures will be replayed into it
    (``lossless replay --pcap``), so a file without traffic of its own is accepted."""
    unknown = sorted(set(doc) - _TOP)
    if unknown:
        raise ScenarioError(f"{where}: unknown key(s) {unknown}; known: {sorted(_TOP)}")
    doc = _fabric_choice(doc, where)
    doc, sonic = _sonic(doc, where, base_dir)
    sec = {n: _section(doc, n, where) for n in SECTIONS if n not in _ARRAYS}
    flows, inputs = _array(doc, "flows", where), _array(doc, "pcap", where)
    run, topo, links, sw = sec["run"], sec["topology"], sec["links"], sec["switch"]
    rate = gbps(links["link_gbps"])
    prop = prop_delay_ps(links["cable_m"])
    lkw = _link_kw(links, sw["mtu_bytes"], where)
    knobs = {**sw, **sec["ecn"], **sec["hosts"], "cable_m": links["cable_m"],
             "packet_bytes": sw["mtu_bytes"]}
    try:
        ecn = ecn_config(knobs)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: [ecn] {e}") from None
    hkw = _host_kw(knobs, rate, where)
    knobs["_cbfc"] = lkw.get("cbfc") or lkw.get("ib")  # read by _mmu
    knobs["_sonic"] = sonic  # read by _mmu: the keys that depend on the switches' ports
    slot = TracerSlot()
    seed = run["seed"]
    kind = topo["kind"]
    _unused(doc.get("topology", {}), kind, where)
    _ib_routing(doc.get("topology", {}), kind, None, where)
    sharp = bool(topo["sharp"])
    if sharp and links["fabric"] != "ib":
        raise ScenarioError(f"{where}: [topology] sharp: SHARP is InfiniBand's: needs [links] "
                            f"fabric = \"ib\"")
    aggs: tuple[int, ...] = ()
    npl = 0
    sched = {"scheduler": sw["scheduler"], "weights": tuple(sw["weights"])}
    if sw["scheduler"] == "vlarb":
        sched["weights"] = _vlarb(sw, lkw, where)
    if kind == "star":
        n = topo["hosts"]
        cfg = _mmu(knobs, n + 1, rate, where)
        fab, last, first = star(n - 1, rate, prop, cfg, seed=seed, ecn=ecn, tracer=slot,
                                host_kw=hkw, switch_kw=sched, link_kw=lkw)
        groups = [[h] for h in [*first, last]]
    elif kind == "leaf_spine":
        L, S, H = topo["leaves"], topo["spines"], topo["hosts_per_leaf"]
        cfg = _mmu(knobs, max(H + S, L), rate, where)
        t = leaf_spine(L, S, H, rate, prop, cfg, seed=seed, ecn=ecn, tracer=slot,
                       ecmp=topo["ecmp"], host_kw=hkw, switch_kw=sched, link_kw=lkw)
        fab, groups = t.fabric, t.hosts
    elif kind == "ring":
        N, K = topo["switches"], topo["hosts_per_switch"]
        cfg = _mmu(knobs, K + 2, rate, where)
        t = ring(N, rate, prop, cfg, hosts_per_switch=K, routing=topo["routing"], seed=seed,
                 ecn=ecn, tracer=slot, host_kw=hkw, switch_kw=sched, link_kw=lkw)
        fab, groups = t.fabric, t.hosts
    elif kind == "rail":
        N, G = topo["nodes"], topo["gpus_per_node"]
        S = topo["spines"]
        cfg = _mmu(knobs, max(N + S + sharp, G), rate, where)
        t = _built(where, rail_optimized, N, G, spines=S, link_gbps=links["link_gbps"],
                   prop_ps=prop, seed=seed, ecmp=topo["ecmp"], ecn=ecn, mmu_config=cfg,
                   tracer=slot, host_kw=hkw, switch_kw=sched, link_kw=lkw, sharp=sharp)
        aggs = t.aggregators
        fab, groups = t.fabric, [list(t.ranks[n * G:(n + 1) * G]) for n in range(N)]
        ranks, gpn = list(t.ranks), G
    elif kind == "fat_tree":
        k, o = topo["k"], topo["oversubscription"]
        cfg = _mmu(knobs, max(k, (1 + o) * k // 2), rate, where)
        t = _built(where, fat_tree, k, o, link_gbps=links["link_gbps"], prop_ps=prop,
                   seed=seed, ecmp=topo["ecmp"], ecn=ecn, mmu_config=cfg, tracer=slot,
                   host_kw=hkw, switch_kw=sched, link_kw=lkw)
        fab, groups = t.fabric, [list(g) for g in t.hosts]
        ranks, gpn = list(t.ranks), t.gpus_per_node
    elif kind == "superpod":
        cfg = _mmu(knobs, SU_SLOTS + SUPERPOD_LEAF_UPLINKS + sharp, rate, where)
        t = _built(where, superpod, topo["sus"], nodes=topo["superpod_nodes"] or None,
                   link_gbps=links["link_gbps"], prop_ps=prop, seed=seed, ecmp=topo["ecmp"],
                   ecn=ecn, mmu_config=cfg, tracer=slot, host_kw=hkw, switch_kw=sched,
                   link_kw=lkw, sharp=sharp)
        aggs, npl = t.aggregators, t.nodes_per_leaf
        G = t.gpus_per_node
        fab, groups = t.fabric, [list(t.ranks[n * G:(n + 1) * G]) for n in range(t.nodes)]
        ranks, gpn = list(t.ranks), G
    elif kind == "ibnetdiscover":
        fab, groups, ranks, gpn = _ibnetdiscover(topo, knobs, prop, seed, ecn, slot, hkw,
                                                 sched, where, lkw, base_dir)
    else:
        fab, groups = _custom(topo, knobs, rate, prop, seed, ecn, slot, hkw, sched, where, lkw)
    if kind not in ("rail", "fat_tree", "superpod", "ibnetdiscover"):
        ranks, gpn = [h for g in groups for h in g], 1
    _ib_routing(doc.get("topology", {}), kind, fab, where)

    hosts = {h for g in groups for h in g}
    fid = 0
    labels: dict[int, str] = {}  # flow id -> where it was declared
    tr = sec["traffic"]
    if tr["pattern"] and tr["load"] > 0:
        pr = pairs(tr["pattern"], groups, seed)
        per_src: dict[int, int] = {}
        for s, _d in pr:
            per_src[s] = per_src.get(s, 0) + 1
        for s, d in pr:
            fab.add_flow(Flow(fid, s, d, max(int(rate * tr["load"]) // per_src[s], 1),
                              tc=tr["tc"], packet_bytes=tr["packet_bytes"]))
            labels[fid] = f"[traffic] pattern {tr['pattern']!r} flow {fid}"
            fid += 1
    for i, f in enumerate(flows):
        label = f"{where}: [[flows]] #{i + 1}"
        for end in ("src", "dst"):
            if f[end] not in hosts:
                raise ScenarioError(f"{label} {end!r}: {f[end]} is not a host; hosts: "
                                    f"{sorted(hosts)}")
        if f["src"] == f["dst"]:
            raise ScenarioError(f"{label} 'dst': same host as 'src'")
        try:
            fr = gbps(f["rate_gbps"]) if f["rate_gbps"] else rate
            fab.add_flow(Flow(fid, f["src"], f["dst"], fr, tc=f["tc"],
                              packet_bytes=f["packet_bytes"],
                              size_bytes=kb_to_bytes(f["size_kb"]) or None,
                              start_ps=us_to_ps(f["start_us"]),
                              stop_ps=us_to_ps(f["stop_us"]) or None, ecn=f["ecn"],
                              on_ps=us_to_ps(f["on_us"]) or None,
                              off_ps=us_to_ps(f["off_us"]) or None,
                              onoff=f["onoff"] if f["on_us"] else "fixed",
                              message_bytes=kb_to_bytes(f["message_kb"]) or None))
        except ValueError as e:
            raise ScenarioError(f"{label}: {e}") from None
        labels[fid] = f"[[flows]] #{i + 1}"
        fid += 1
    colls = _collectives(doc, fab, ranks, gpn, sw["mtu_bytes"], labels, where,
                         links["link_gbps"], aggs, npl)
    _check_routes(fab, labels, where)
    plan = _faults(doc, fab, where, fault_params, ranks)
    if need_traffic:  # else the collective is lossless collective's: sc.info["stragglers"]
        check_stragglers(plan, [c.hosts for c in colls])
    for c in colls:
        c.delay_ps = straggler_delays(plan, c.hosts)

    pcaps = []
    for i, p in enumerate(inputs):
        if not p["file"]:
            raise ScenarioError(f"{where}: [[pcap]] #{i + 1} 'file': required")
        path = p["file"] if os.path.isabs(p["file"]) else os.path.join(base_dir, p["file"])
        try:  # at load time, naming this file and entry (not a later --pcap message)
            with open(path, "rb"):
                pass
        except OSError as e:
            raise ScenarioError(f"{where}: [[pcap]] #{i + 1} 'file': {path}: "
                                f"{e.strerror or e}") from None
        pcaps.append((path, scale_fraction(p["time_scale"])))
    flow = [c for c in colls if c.spec["fidelity"] == "flow"]
    if flow:  # fluid flows see no packets, and packets no fluid flows: nothing else to meet
        first = f"{where}: [[collective]] #{flow[0].index + 1} 'fidelity'"
        if len(flow) < len(colls):
            raise ScenarioError(f"{first}: flow, and another entry runs packets: every "
                                f"entry at one fidelity")
        other = ("[traffic] or [[flows]]" if fab.flows else "[[pcap]]" if pcaps or replayed
                 else "")
        if other:
            raise ScenarioError(f"{first}: flow fidelity runs the collectives alone: the "
                                f"file's {other} need packets (fidelity = \"packet\")")
        if getattr(fab, "fault_log", None) is not None:  # the jobs' fluid flows were made
            raise ScenarioError(f"{first}: [[faults]] are not followed by a fabric file's "
                                f"flow-fidelity entries (lossless collective --fabric FILE "
                                f"--fidelity flow follows them; or fidelity = \"packet\")")
    if need_traffic and not fab.flows and not pcaps and not replayed and not flow:
        raise ScenarioError(f"{where}: no traffic: give [traffic] pattern, [[flows]], "
                            f"[[collective]] or [[pcap]]")
    cap = sec["capture"]
    bottleneck = _ref(cap["bottleneck"]) if cap["bottleneck"] else _default_bottleneck(fab)
    extra = [_ref(x) for x in cap["ports"]]
    for node, port in [bottleneck, *extra]:
        n = fab.nodes.get(node)
        if n is None or port not in n.ports:
            raise ScenarioError(f"{where}: [capture] {node}:{port}: no such node/port")
    dur = ms_to_ps(run["duration_ms"])
    params = {"file": where, **{k: v for k, v in sec.items()}, "flows": flows,
              "pcap": [{**p} for p in inputs]}
    # named only when on / of their kind: other files keep their summary.json as it was
    drop = ({"sharp"} if not sharp else set()) | (
        {"file", "lft"} if kind != "ibnetdiscover" else set())
    if drop:
        params["topology"] = {k: v for k, v in params["topology"].items() if k not in drop}
    if sonic is not None:  # the buffer and headroom [switch] sonic gave these switches
        params["switch"] = {**params["switch"], **sonic[2]}
    else:  # none: the file's summary.json params as they were
        params["switch"] = {k: v for k, v in params["switch"].items()
                            if not k.startswith("sonic")}
    if sw["watchdog"]:  # a PFC watchdog on every switch, on the lossless classes
        import dataclasses

        from sim.health.watchdog import attach_watchdogs
        from sim.scenarios.pfc_deadlock_ring import watchdog_config

        cfg = dataclasses.replace(watchdog_config(sw),
                                  priorities=frozenset(sw["lossless_tcs"]))
        from sim.net.switch import Switch as _Switch

        wds = attach_watchdogs([n for _, n in sorted(fab.nodes.items())
                                if isinstance(n, _Switch)], cfg)
    else:  # off: the file's summary.json params as they were
        wds = None
        params["switch"] = {k: v for k, v in params["switch"].items()
                            if k not in _WD_KEYS and k != "watchdog"}
    summaries: dict[str, Any] = {}
    if plan.entries:  # only then: a file without [[faults]] keeps its summary.json as it was
        params["faults"] = plan.entries
        summaries["faults"] = lambda _sc: (fab.fault_log.summary()["events"]
                                           if getattr(fab, "fault_log", None) else [])
    if colls:  # only then: a file without [[collective]] keeps its summary.json as it was
        # failover only when on: other files keep their summary.json params as they were
        params["collective"] = [{k: v for k, v in c.spec.items()
                                 if k not in _COLLECTIVE_QUIET or v != _COLLECTIVE_QUIET[k]}
                                for c in colls]
        summaries["collectives"] = lambda _sc: [c.summary() for c in colls]
    sc = Scenario(name=os.path.splitext(os.path.basename(where))[0], params=params,
                  seed=seed, duration_ps=dur, fabric=fab, bottleneck=bottleneck,
                  tracer_slot=slot, info={"rate_bps": rate}, pcaps=pcaps, captures=extra,
                  summaries=summaries, capture_limit_bytes=round(cap["limit_mb"] * 10**6),
                  snaplen_bytes=cap["snaplen"] or None, capture_enabled=cap["enabled"])
    if colls:
        sc.info["collectives"] = colls
    if wds is not None:  # summary.json's watchdog block (sim.health.deadlock)
        from sim.health.deadlock import pfc_failure_summary

        sc.info["watchdogs"] = wds
        sc.summaries["watchdog"] = lambda s: pfc_failure_summary(s)["watchdog"]
    sc.info.update(aggregators=aggs, nodes_per_leaf=npl)
    sc.info.update(ranks=tuple(ranks), gpus_per_node=gpn, mtu_bytes=sw["mtu_bytes"],
                   stragglers=tuple(plan.stragglers))
    if getattr(fab, "fault_log", None) is not None:  # the fault-free twin, same seed: the
        from copy import deepcopy  # baseline of sim.study.fault_report.run_baseline

        clean = deepcopy({k: v for k, v in doc.items() if k != "faults"})
        sc.info["fault_free"] = lambda: build(deepcopy(clean), where, base_dir,
                                              need_traffic=need_traffic, replayed=replayed)
    return sc


def _faults(doc: Mapping[str, Any], fab: Fabric, where: str,
            from_params: Mapping[str, Any] | None = None, ranks: Any = None) -> Any:
    """The ``[[faults]]`` entries and the ``-p`` fault keys (``from_params``:
    ``fault``, ``fault.KEY``, ``detect_us``, ``converge_us``) scheduled on ``fab``
    (sim.fabric.faults); their :class:`sim.scenarios.common.FaultPlan` (stragglers are the
    collectives'); one-line errors naming the entry and the key."""
    from sim.scenarios.common import apply_faults, fault_entries, resolve_faults

    raw = doc.get("faults", [])
    if not isinstance(raw, list):
        raise ScenarioError(f"{where}: faults must be an array of tables ([[faults]])")
    entries = [(f"{where}: [[faults]] #{i + 1}", e) for i, e in enumerate(raw)]
    entries += fault_entries(from_params or {}, "-p")
    plan = resolve_faults(entries, ib=fab.flow_control == "ib", reroute_params=from_params)
    apply_faults(plan, fab, ranks)
    return plan


class CollectiveEntry:
    """One ``[[collective]]`` entry of a built fabric file: NCCL's schedule of the call
    (:func:`sim.workloads.nccl.schedule`) on its hosts, run as a
    :class:`sim.workloads.collective.CollectiveJob` started at ``start_us`` (an engine event
    scheduled when the file is built); each later iteration is a new job on the same
    schedule, started by the previous one's ``on_done`` at its last delivery, so iterations
    run back to back on the same QPs (flows) with their congestion-control state, as
    nccl-tests' ``-n`` loop does.  :meth:`summary` is its item of summary.json
    ``collectives``."""

    def __init__(self, index: int, spec: dict[str, Any], sch: Any, counts: Any,
                 hosts: list[int], fab: Fabric, mtu_bytes: int, gpus_per_node: int = 1,
                 host: Any = None, tuned: Any = None, aggregators: tuple[int, ...] = ()
                 ) -> None:
        self.index, self.spec, self.sch, self.counts = index, spec, sch, counts
        self.hosts, self.fab, self.mtu_bytes = hosts, fab, mtu_bytes
        self.gpus_per_node = gpus_per_node
        #: NCCL's host side (sim.workloads.tuner.HostSide) or None; the tuner's choice;
        #: the fabric's SHARP aggregators (CollNet)
        self.host, self.tuned, self.aggregators = host, tuned, aggregators
        self.start_ps = us_to_ps(spec["start_us"])
        #: last delivery minus first start of every iteration done, ps
        self.times_ps: list[int] = []
        self.wrong = 0
        self.error: str | None = None
        #: stragglers of this entry (rank -> (delay_ps, at_ps, until_ps)), set by build
        self.delay_ps: dict[int, Any] = {}
        #: the QP error that stopped it (CollectiveJob.failed), and the QPs moved (failover)
        self.failed: dict[str, Any] | None = None
        self.failovers: list[dict[str, Any]] = []
        self.job = self._job()
        qpns = [q for c in sch.connections.values() for q in c.qpns]
        self.qp_first, self.qp_last = min(qpns), max(qpns)

    def _job(self) -> Any:
        from sim.workloads.collective import CollectiveJob

        sp = self.spec
        return CollectiveJob(self.sch, self.fab, self.hosts, tc=sp["tc"],
                             mtu_bytes=self.mtu_bytes, on_done=self._done,
                             gpus_per_node=self.gpus_per_node, nvlink=sp["nvlink"],
                             nvlink_bps=gbps(sp["nvlink_gbps"]),
                             nvlink_latency_ps=round(sp["nvlink_latency_ns"] * 1000),
                             pxn=sp["pxn"], delay_ps=getattr(self, "delay_ps", None),
                             failover=sp["failover"], on_fail=self._fail, host=self.host,
                             aggregators=self.aggregators, fidelity=sp["fidelity"])

    def start(self) -> None:
        if self.delay_ps and not self.job.delay_ps:
            self.job = self._job()  # the stragglers were set after the first job was made
        self.job.start()

    def _fail(self, job: Any) -> None:
        from sim.workloads.collective import failure_text

        self.failed = dict(job.failed)
        self.error = self.error or f"iteration {len(self.times_ps) + 1}: " \
            f"{failure_text(job.failed)}"

    def _done(self, job: Any) -> None:
        from sim.workloads.nccl import ScheduleError, verify

        run = job.run
        self.times_ps.append(run.time_ps)
        # the order the transfers started in, as sim.scenarios.collective.run_size checks it
        order = sorted(range(len(self.sch.transfers)), key=run.start_ps.__getitem__)
        try:
            verify(self.sch, order)
        except ScheduleError as e:
            self.wrong += 1
            if self.error is None:
                self.error = f"iteration {len(self.times_ps)}: wrong result: {e}"
        self.failovers += job.run.failovers
        if len(self.times_ps) < self.spec["iters"]:
            try:
                self.job = self._job()
            except ValueError as e:  # a QP not drained (cannot happen at the last delivery)
                self.error = self.error or f"iteration {len(self.times_ps) + 1}: {e}"
                return
            self.job.start()

    def summary(self) -> dict[str, Any]:
        """The entry's figures (nccl-tests' formulas over the mean iteration time)."""
        from sim.workloads.nccl_tests import algbw_busbw
        from sim.workloads.tuner import nccl_text

        sp, sch, n = self.spec, self.sch, len(self.hosts)
        times = self.times_ps
        t_ps = sum(times) // len(times) if times else None
        alg = bus = None
        if t_ps:
            alg, bus = algbw_busbw(sch.collective, self.counts.param_count, sch.dtype, n,
                                   t_ps / 1e12)
        return {
            "entry": self.index + 1, "collective": sch.collective.value,
            "algo": sch.algorithm.value, "proto": sch.protocol.value, "datatype": sch.dtype,
            "size_bytes": self.counts.size_bytes, "count": self.counts.param_count,
            "ranks": n, "hosts": list(self.hosts), "gpus_per_node": self.gpus_per_node,
            "nchannels": sch.nchannels,
            "qps": sch.qps_per_connection, "qp_first": self.qp_first,
            "qp_last": self.qp_last, "transfers": len(sch.transfers), "start_ps": self.start_ps,
            "iterations": sp["iters"], "iterations_done": len(times),
            "transfers_received": self.job.ndone, "iteration_times_ps": list(times),
            "time_ps": t_ps, "time_us": None if t_ps is None else t_ps / 1e6,
            "algbw_GB_per_s": alg, "busbw_GB_per_s": bus, "complete": len(times) == sp["iters"],
            "wrong": self.wrong, "error": self.error,
            **({"tuner": {"algorithm": self.tuned.algo, "protocol": self.tuned.proto,
                          "channels": sch.nchannels,
                          "model_time_us": round(self.tuned.time_us, 3),
                          "nccl": nccl_text(self.tuned.nccl_algo, self.tuned.nccl_proto)}}
               if self.tuned is not None else {}),
            **({"nccl_host": True} if self.host is not None else {}),
            **({"fidelity": "flow"} if sp["fidelity"] == "flow" else {}),
            **({"failed": self.failed} if self.failed else {}),
            **({"failovers": moved} if (moved := self.failovers + (
                [] if self.job.done else self.job.run.failovers)) else {}),
        }


def _collectives(doc: Mapping[str, Any], fab: Fabric, ranks: list[int], gpn: int,
                 mtu_bytes: int, labels: dict[int, str], where: str,
                 link_gbps: float = 400.0, aggregators: tuple[int, ...] = (),
                 nodes_per_leaf: int = 0) -> list[CollectiveEntry]:
    """The ``[[collective]]`` entries as jobs on ``fab`` (started by engine events at their
    ``start_us``); their QP numbers follow the flow ids already in the fabric, entry after
    entry, below the replayed captures' ids (:data:`sim.workloads.replay.REPLAY_FLOW_BASE`).
    Each entry's schedule, NCCL's pick (``algo``/``proto`` "auto") and host side
    (``nccl_host``) are those of ``lossless collective``
    (:func:`sim.scenarios.collective_plan.plan_size`), for a node ``hw`` with NICs of the file's
    ``link_gbps``; ``collnet`` (NCCL_COLLNET_ENABLE) runs CollNet on the fabric's SHARP
    ``aggregators`` (``[topology] sharp``)."""
    from sim.scenarios.collective_plan import plan_size
    from sim.scenarios.common import collective_packet
    from sim.workloads.nccl import Collective, ScheduleError
    from sim.workloads.nccl_tests import coll_counts, parse_size
    from sim.workloads.replay import REPLAY_FLOW_BASE
    from sim.workloads.tuner import TunerError

    specs = _array(doc, "collective", where)
    out: list[CollectiveEntry] = []
    qp_base = max(0x100, max(fab.flows, default=-1) + 1)
    known = set(ranks)
    for i, c in enumerate(specs):
        label = f"{where}: [[collective]] #{i + 1}"
        hosts = list(c["hosts"]) or list(ranks)
        for h in hosts:
            if h not in known:
                raise ScenarioError(f"{label} 'hosts': {h} is not a host; hosts: "
                                    f"{sorted(known)}")
        n = len(hosts)
        if n < 2:
            raise ScenarioError(f"{label} 'hosts': a collective needs at least 2 ranks, "
                                f"got {n}")
        g = c["gpus_per_node"] or (1 if c["hosts"] else gpn)
        if g > 1 and n % g:
            raise ScenarioError(f"{label} 'gpus_per_node': {n} ranks are not whole nodes of "
                                f"{g} GPUs")
        coll = Collective(c["collective"])
        if c["root"] >= n:
            raise ScenarioError(f"{label} 'root': {c['root']} is not a rank of 0..{n - 1}")
        if (c["algo"].startswith("collnet") or c["collnet"]) and not aggregators:
            key = "collnet" if c["collnet"] else "algo"
            raise ScenarioError(f"{label} '{key}': CollNet runs on SHARP switches: give the "
                                f"fabric [topology] sharp = true (rail or superpod, "
                                f"InfiniBand)")
        if c["algo"].startswith("collnet") and not c["collnet"]:
            raise ScenarioError(f"{label} 'algo': {c['algo']} is NCCL's CollNet: needs "
                                f"collnet = true (NCCL_COLLNET_ENABLE=1)")
        if c["algo"] == "tree" and coll is not Collective.ALLREDUCE:
            raise ScenarioError(f"{label} 'algo': tree is modelled for allreduce only, not "
                                f"{coll.value}")
        if c["algo"] == "tree" and n % g:
            raise ScenarioError(f"{label} 'gpus_per_node': tree: {n} ranks are not whole "
                                f"nodes of {g} GPUs")
        stack = fab.stack  # RoCEv2 or InfiniBand headers (wire.linkstack)
        try:
            pkt = collective_packet({"packet_bytes": c["packet_bytes"] or mtu_bytes},
                                    stack)["packet_bytes"]
        except ScenarioError as e:
            raise ScenarioError(f"{label} {str(e).removeprefix('parameter ')}") from None
        counts = coll_counts(coll, parse_size(c["size"]), c["datatype"], n)
        node = {"nccl_host": c["nccl_host"], "nvlink": c["nvlink"], "hw": c["hw"],
                "link_gbps": link_gbps, "sharp": bool(aggregators)}
        # the fabric's ranks in order, its nodes: the rails SHARP's trees are built on
        on_sharp = bool(c["collnet"]) and not c["hosts"] and g == gpn
        if c["collnet"] and not on_sharp:
            raise ScenarioError(f"{label} 'collnet': CollNet runs on the fabric's own ranks "
                                f"and nodes (leave hosts and gpus_per_node unset)")
        try:
            plan = plan_size(coll.value, counts, n // g if g > 1 else n, g, node,
                             algorithm=c["algo"], protocol=c["proto"],
                             channels=c["channels"] or None, qps=c["qps"],
                             datatype=c["datatype"], root=c["root"], qp_base=qp_base,
                             nccl={"collnet": True} if on_sharp else None,
                             aggregators=aggregators if on_sharp else (),
                             nodes_per_leaf=nodes_per_leaf)
        except (ScheduleError, TunerError) as e:
            raise ScenarioError(f"{label}: {e}") from None
        sch = plan.schedule
        if not sch.transfers:
            raise ScenarioError(f"{label} 'size': {c['size']} gives a count of "
                                f"{counts.param_count} {c['datatype']} for {n} ranks: "
                                f"nothing to send")
        nqps = len(sch.connections) * c["qps"]
        if qp_base + nqps > REPLAY_FLOW_BASE:
            raise ScenarioError(f"{label}: its {nqps} QPs would pass QP number "
                                f"{REPLAY_FLOW_BASE - 1} (the replayed captures' flow ids "
                                f"start at {REPLAY_FLOW_BASE})")
        try:
            e = CollectiveEntry(i, c, sch, counts, hosts, fab, pkt - stack.header_bytes, g,
                                plan.host, plan.tuned, aggregators if on_sharp else ())
        except ValueError as err:
            raise ScenarioError(f"{label}: {err}") from None
        for key, conn in sch.connections.items():
            for q, qpn in enumerate(conn.qpns):
                labels[qpn] = (f"[[collective]] #{i + 1} QP {qpn} (rank {key[0]} -> "
                               f"{key[1]}, channel {key[2]}, QP {q})")
        fab.engine.call_at(e.start_ps, e.start)
        out.append(e)
        qp_base += nqps
    return out


_KIND_KEYS = {
    "star": {"hosts"}, "leaf_spine": {"leaves", "spines", "hosts_per_leaf", "ecmp", "routing"},
    "ring": {"switches", "hosts_per_switch", "routing"},
    "custom": {"switch_ids", "host_ids", "links", "ecmp"},
    "ibnetdiscover": {"file", "lft", "ecmp", "routing"},
    "rail": {"nodes", "gpus_per_node", "spines", "ecmp", "routing", "sharp"},
    "fat_tree": {"k", "oversubscription", "ecmp", "routing"},
    "superpod": {"sus", "superpod_nodes", "ecmp", "routing", "sharp"},
}


def _ib_routing(raw: Mapping[str, Any], kind: str, fab: Fabric | None, where: str) -> None:
    """``[topology] routing`` of a generated fabric (sim.fabric.lft): ecmp, static, adaptive;
    ``fab`` None: only check it (before the fabric is built)."""
    r = raw.get("routing")
    if kind == "ring":
        if r in ROUTINGS:
            raise ScenarioError(f"{where}: [topology] routing: must be one of "
                                f"['clockwise', 'shortest'] for kind = 'ring', got {r!r}")
        return
    if r is None:
        return
    if r not in ROUTINGS:
        raise ScenarioError(f"{where}: [topology] routing: must be one of {list(ROUTINGS)} for "
                            f"kind = {kind!r}, got {r!r}")
    if r != "ecmp" and raw.get("ecmp"):
        raise ScenarioError(f"{where}: [topology] ecmp: true contradicts routing = {r!r}")
    if fab is not None:
        apply_routing(fab, r)


def _built(where: str, builder, *args: Any, **kw: Any):
    """Call a generated-topology builder; its refusal (ValueError) names the file."""
    try:
        return builder(*args, **kw)
    except ValueError as e:
        raise ScenarioError(f"{where}: [topology] {e}") from None


def _check_routes(fab: Fabric, labels: dict[int, str], where: str) -> None:
    """Every flow's frames reach its destination by the routing tables (a custom topology
    may leave a host unreachable: its frames would all be dropped ``no_route``)."""
    memo: dict[tuple[int, int], str | None] = {}
    for fid, f in sorted(fab.flows.items()):
        why = route_problem(fab, f.src, f.dst, memo)
        if why:
            raise ScenarioError(f"{where}: {labels.get(fid, f'flow {fid}')} ({f.src} -> "
                                f"{f.dst}): no route: {why}")


def _unused(raw: Mapping[str, Any], kind: str, where: str) -> None:
    """Keys of another topology kind are mistakes (e.g. ``leaves`` with kind = "ring")."""
    stray = sorted(set(raw) - _KIND_KEYS[kind] - {"kind"})
    if stray:
        raise ScenarioError(f"{where}: [topology] {stray} do(es) not apply to kind = "
                            f"{kind!r}; it takes {sorted(_KIND_KEYS[kind])}")


def _host_kw(knobs: dict[str, Any], rate: int, where: str) -> dict[str, Any]:
    try:
        kw = host_kw(knobs, rate)
    except ScenarioError as e:
        raise ScenarioError(f"{where}: [hosts] {e}") from None
    # cc = "ibcc" set 0 already (IBA A10: a BECN for every FECN)
    kw.setdefault("cnp_interval_ps", us_to_ps(knobs["cnp_interval_us"]))
    kw["cnp_tc"] = knobs["cnp_tc"]
    kw["cnp_mode"] = knobs["cnp_mode"]
    kw["ack_every"] = knobs["ack_every"]  # (host_kw has the RC transport's keys)
    return kw


def _mmu(knobs: dict[str, Any], ports: int, rate: int, where: str):
    sonic = knobs.get("_sonic")
    if sonic is not None:  # the buffer and headroom of switches of this many ports
        from sim.fabric.sonic import switch_keys

        sw, given, derived = sonic
        keys = switch_keys(sw, ports)[0]
        derived.update({k: v for k, v in keys.items()
                        if k in ("buffer_kb", "headroom_kb", "xoff_kb") and k not in given})
        knobs = {**knobs, **derived}
    cbfc = knobs.get("_cbfc")
    if cbfc is not None:
        # credits alone keep the switch lossless (as sue_packing's cbfc): PFC off, a class's
        # threshold at least its credit limit, and room for every link's credit limit
        limit_bytes = cbfc.limit_credits * cbfc.credit_bytes
        want = ports * (8 * RESERVED_BYTES + len(cbfc.vcs) * limit_bytes)
        if not knobs["buffer_kb"]:  # the derived default, holding the credit limits
            knobs = {**knobs, "buffer_kb": default_buffer_bytes(ports, rate, want) / KB}
        if kb_to_bytes(knobs["buffer_kb"]) < want:
            raise ScenarioError(f"{where}: [switch] buffer_kb: {knobs['buffer_kb']} KB cannot "
                                f"hold the credit limit ({limit_bytes} B) of {len(cbfc.vcs)} "
                                f"classes on {ports} ports plus the reserves: need "
                                f"{want / KB:g} KB")
        knobs = {**knobs, "pfc": False, "xoff_kb": max(knobs["xoff_kb"], limit_bytes / KB)}
    try:
        return mmu_config(knobs, ports, rate)[0]
    except ScenarioError as e:
        raise ScenarioError(f"{where}: [switch] {e}") from None


def _sonic(doc: Mapping[str, Any], where: str, base_dir: str
           ) -> tuple[Mapping[str, Any], tuple[Any, set[str], dict[str, Any]] | None]:
    """``[switch] sonic``: the switch's SONiC configuration read (sim.fabric.sonic) and
    its keys put in ``[switch]`` and ``[ecn]`` where the file does not give them; returns
    the document and (the configuration, the keys the file gave, the keys :func:`_mmu`
    derives from the switches' ports: the params echo shows them)."""
    raw = doc.get("switch")
    if not isinstance(raw, dict) or not raw.get("sonic"):
        return doc, None
    from sim.fabric.sonic import SonicError, read_sonic, switch_keys


    sw_sec = _section(doc, "switch", where)
    links = _section(doc, "links", where)
    if doc.get("links", {}).get("flow_control") in ("ib", "credit") or \
            doc.get("links", {}).get("fabric") == "ib":
        raise ScenarioError(f"{where}: [switch] sonic: a SONiC switch runs Ethernet with PFC; "
                            f"this fabric runs credits")

    def path(p: str) -> str:
        return p if os.path.isabs(p) else os.path.join(base_dir, p)

    try:
        sw = read_sonic([path(p) for p in sw_sec["sonic"]],
                        pg_lookup=path(sw_sec["sonic_pg_lookup"]) if sw_sec["sonic_pg_lookup"]
                        else None, port=sw_sec["sonic_port"] or None,
                        vendor=sw_sec["sonic_vendor"] or None,
                        default_speed_mbps=round(links["link_gbps"] * 1000))
    except SonicError as e:
        raise ScenarioError(f"{where}: [switch] sonic: {e}") from None
    given = {k for k in raw if not k.startswith("sonic")}
    keys, ecn, _ = switch_keys(sw, 1)  # the keys that do not depend on the ports
    keys = {k: v for k, v in keys.items() if k not in ("buffer_kb", "headroom_kb")}
    out = dict(doc)
    out["switch"] = {**{k: v for k, v in keys.items() if k not in given}, **raw}
    raw_ecn = doc.get("ecn", {}) if isinstance(doc.get("ecn", {}), dict) else {}
    out["ecn"] = {**{k: v for k, v in ecn.items() if k not in raw_ecn}, **raw_ecn}
    return out, (sw, given, {})


def _ref(text: str) -> tuple[int, int]:
    a, _, b = text.partition(":")
    return int(a), int(b)


def _default_bottleneck(fab: Fabric) -> tuple[int, int]:
    """The switch port feeding the receiver of the most flows (ties: lowest node id)."""
    from sim.nic.host import Host

    load: dict[int, int] = {}
    for f in fab.flows.values():
        load[f.dst] = load.get(f.dst, 0) + 1
    for dst in sorted(load, key=lambda d: (-load[d], d)):
        for nid, node in sorted(fab.nodes.items()):
            if isinstance(node, Host):
                continue
            for idx, p in sorted(node.ports.items()):
                if getattr(p.peer, "node_id", None) == dst:
                    return nid, idx
    for nid, node in sorted(fab.nodes.items()):
        if not isinstance(node, Host) and node.ports:
            return nid, min(node.ports)
    raise ScenarioError("the fabric has no switch port to capture")


def _fabric_choice(doc: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """``[links] fabric = "ib"``: the file with the IB defaults of the built-ins'
    ``fabric = "ib"`` (:func:`sim.scenarios.common.fabric_setup`) filled in where it does not
    say otherwise: ``[links] flow_control = "ib"`` (another value is a contradiction),
    ``[switch] scheduler = "vlarb"``, ``[ecn] pmax = 0`` (FECN marking comes with ``cc =
    "ibcc"``); ``[hosts] cc = "dcqcn"`` is refused.  ``"roce"``: the file as it is."""
    links = doc.get("links", {})
    if not isinstance(links, dict) or links.get("fabric", "roce") != "ib":
        return doc
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in doc.items()}
    fc = links.get("flow_control", "ib")
    if fc != "ib":
        raise ScenarioError(f"{where}: [links] flow_control: {fc!r} contradicts fabric = 'ib'")
    cc = (doc.get("hosts") or {}).get("cc") if isinstance(doc.get("hosts"), dict) else None
    if cc == "dcqcn":
        raise ScenarioError(f"{where}: [hosts] cc: 'dcqcn' is RoCE congestion control; with "
                            f"fabric = 'ib' use 'ibcc' (IBA annex A10) or 'none'")
    out["links"]["flow_control"] = "ib"
    for table, key, value in (("switch", "scheduler", "vlarb"), ("ecn", "pmax", 0.0)):
        sec = out.setdefault(table, {})
        if isinstance(sec, dict):
            sec.setdefault(key, value)
    return out


def _vlarb(sw: Mapping[str, Any], lkw: Mapping[str, Any], where: str) -> tuple:
    """The ``"vlarb"`` port weights from ``[switch]``, checked against the SL-to-VL map."""
    try:
        w = vlarb_weights(sw["vlarb_high"], sw["vlarb_low"], sw["vlarb_high_limit"])
        check_scheduler("vlarb", w, QUANTUM_BYTES)
        ib = lkw.get("ib")
        if ib is not None:
            vlarb_cover(w, ib.sl2vl)
    except ValueError as e:
        raise ScenarioError(f"{where}: [switch] vlarb_high/vlarb_low: {e}") from None
    return w


def _link_kw(links: Mapping[str, Any], mtu_bytes: int, where: str) -> dict[str, Any]:
    """``Fabric(flow_control=, cbfc=, ib=)`` from ``[links]``."""
    if links["flow_control"] == "ib":
        ib = IbConfig(vl_buffer_bytes=kb_to_bytes(links["vl_buffer_kb"]),
                      sl2vl=tuple(links["sl2vl"])) \
            if kb_to_bytes(links["vl_buffer_kb"]) >= BLOCK_BYTES else None
        if ib is None or ib.credits(mtu_bytes) > ib.buffer_blocks:
            raise ScenarioError(f"{where}: [links] vl_buffer_kb: {links['vl_buffer_kb']} KB "
                                f"is less than one largest packet ({mtu_bytes} B)")
        return {"flow_control": "ib", "ib": ib}
    if links["flow_control"] != "credit":
        return {"flow_control": links["flow_control"]}
    limit = kb_to_bytes(links["credit_buffer_kb"]) // links["credit_bytes"]
    cbfc = CbfcConfig(limit_credits=max(limit, 1), credit_bytes=links["credit_bytes"])
    if cbfc.credits(mtu_bytes) > cbfc.limit_credits:
        raise ScenarioError(f"{where}: [links] credit_buffer_kb: {links['credit_buffer_kb']} "
                            f"KB is less than one largest frame ({mtu_bytes} B)")
    return {"flow_control": "credit", "cbfc": cbfc}


def _custom(topo, knobs, rate, prop, seed, ecn, slot, hkw, sched, where, lkw):
    switches, hosts, links = topo["switch_ids"], topo["host_ids"], topo["links"]
    both = set(switches) & set(hosts)
    if both:
        raise ScenarioError(f"{where}: [topology] node id(s) {sorted(both)} are both switch "
                            f"and host")
    kinds = {**{s: "switch" for s in switches}, **{h: "host" for h in hosts}}
    used: set[tuple[int, int]] = set()
    adj: dict[int, list[tuple[int, int]]] = {n: [] for n in kinds}  # node -> [(port, peer)]
    for i, (a, ap, b, bp) in enumerate(links):
        label = f"{where}: [topology] links entry {i}"
        for n, p in ((a, ap), (b, bp)):
            if n not in kinds:
                raise ScenarioError(f"{label}: node {n} is not in switch_ids or host_ids")
            if kinds[n] == "host" and p != 0:
                raise ScenarioError(f"{label}: host {n} has one port, 0 (got {p})")
            if (n, p) in used:
                raise ScenarioError(f"{label}: port {n}:{p} is used twice")
            used.add((n, p))
        if a == b:
            raise ScenarioError(f"{label}: a link must join two different nodes")
        adj[a].append((ap, b))
        adj[b].append((bp, a))
    for h in hosts:
        if not adj[h]:
            raise ScenarioError(f"{where}: [topology] host {h} has no link")
    ports = 1 + max((p for s in switches for p, _ in adj[s]), default=0)
    cfg = _mmu(knobs, ports, rate, where)
    routes = _shortest_routes(switches, hosts, adj, topo["ecmp"])
    fab = Fabric(seed, slot, **lkw)
    for s in switches:
        fab.add_switch(s, Mmu(cfg), routes=routes[s], ecn=ecn, **sched)
    for h in hosts:
        fab.add_host(h, rate, **hkw)
    for a, ap, b, bp in links:
        fab.connect(a, ap, b, bp, rate, prop)
    groups: dict[int, list[int]] = {}
    for h in hosts:
        groups.setdefault(adj[h][0][1], []).append(h)
    return fab, [groups[k] for k in sorted(groups)]


def _osm_key(guid: int) -> int:
    """OpenSM's key of a node GUID in its tables (``cl_qmap`` of ``ib_net64_t``): the GUID
    in network byte order read as a little-endian integer."""
    return int.from_bytes(guid.to_bytes(8, "big"), "little")


def _ibnetdiscover(topo, knobs, prop, seed, ecn, slot, hkw, sched, where, lkw, base_dir):
    """``kind = "ibnetdiscover"``: the fabric an ibnetdiscover file describes
    (:mod:`sim.fabric.ibnetdiscover`), every link at its width and speed's rate; its
    every CA a host (the SHARP aggregation nodes, a fabric manager's, nodes short of a NIC
    included: they take routes as on the real fabric, and send nothing); the ranks the
    NICs of the compute nodes (:func:`sim.fabric.survey.node_nics`) that have as many as
    most, node by node in rail order.  Switches are numbered from 0 in OpenSM's order of
    them (:func:`_osm_key`), then the CAs in GUID order.  Routes: ``lft``'s tables by the
    hosts' LIDs, else least hops (``ecmp``: every least-hop port).  Returns the fabric, the
    hosts by leaf, the ranks and the GPUs a node."""
    from sim.fabric.ibnetdiscover import IbnetdiscoverError, read_ibnetdiscover
    from sim.fabric.opensm import LftError, read_lfts
    from sim.fabric.survey import graph_of_ibnetdiscover, node_nics

    if not topo["file"]:
        raise ScenarioError(f"{where}: [topology] kind = \"ibnetdiscover\" needs file = "
                            f"\"FILE\" (ibnetdiscover's output)")
    if topo["lft"] and topo["routing"] in ROUTINGS:  # (its default: "clockwise", a ring's)
        raise ScenarioError(f"{where}: [topology] routing = {topo['routing']!r} contradicts "
                            f"lft (the subnet manager's tables)")
    path = os.path.join(base_dir, topo["file"])
    try:
        ib = read_ibnetdiscover(path)
        lfts = read_lfts(os.path.join(base_dir, topo["lft"])) if topo["lft"] else None
    except (IbnetdiscoverError, LftError) as e:
        raise ScenarioError(str(e)) from None
    except OSError as e:
        raise ScenarioError(f"{where}: [topology] {e}") from None
    nodes, gpn = node_nics(graph_of_ibnetdiscover(ib))
    full = {h: nics for h, nics in nodes.items() if len(nics) == gpn}
    if len(full) * gpn < 2:
        raise ScenarioError(f"{path}: fewer than 2 NICs in nodes of {gpn} NICs: no "
                            f"collective to run")
    nic_set = {n for nics in full.values() for n in nics}
    # the switches that reach a built NIC (through switches)
    adj_g: dict[int, list[tuple[int, int, int, int]]] = {}
    for ln in ib.links:
        adj_g.setdefault(ln.a, []).append((ln.a_port, ln.b, ln.b_port, ln.rate_bps))
        adj_g.setdefault(ln.b, []).append((ln.b_port, ln.a, ln.a_port, ln.rate_bps))
    is_sw = {g for g, n in ib.nodes.items() if n.kind == "switch"}
    keep, todo = set(), [nb for n in nic_set for _, nb, _, _ in adj_g.get(n, ())]
    while todo:
        x = todo.pop()
        if x in keep or x not in is_sw:
            continue
        keep.add(x)
        todo.extend(nb for _, nb, _, _ in adj_g.get(x, ()))
    # switches in OpenSM's order of them (its switch table's key, the node GUID in network
    # byte order read as a host integer: byte-swapped on x86), so that OpenSM's routing
    # order breaks ties as it does (sim.fabric.lft.routing_order)
    sw_ids = {g: i for i, g in enumerate(sorted(keep, key=_osm_key))}
    cas = {g for g, n in ib.nodes.items() if n.kind == "ca"
           and any(nb in keep for _, nb, _, _ in adj_g.get(g, ()))}
    host_ids = {g: len(sw_ids) + i for i, g in enumerate(sorted(cas))}
    links = []
    for ln in ib.links:
        a = sw_ids.get(ln.a, host_ids.get(ln.a))
        b = sw_ids.get(ln.b, host_ids.get(ln.b))
        if a is None or b is None:
            continue
        if ln.rate_bps <= 0:
            raise ScenarioError(f"{path}:{ln.line}: a link of unknown width or speed "
                                f"({ln.label}) cannot be simulated")
        ap = 0 if ln.a in host_ids else ln.a_port
        bp = 0 if ln.b in host_ids else ln.b_port
        links.append((a, ap, b, bp, ln.rate_bps))
    adj: dict[int, list[tuple[int, int]]] = {i: [] for i in (*sw_ids.values(),
                                                              *host_ids.values())}
    for a, ap, b, bp, _ in links:
        adj[a].append((ap, b))
        adj[b].append((bp, a))
    switches, hosts = sorted(sw_ids.values()), sorted(host_ids.values())
    ports = 1 + max((p for x in switches for p, _ in adj[x]), default=0)
    host_rate_bps = {h: r for a, _, b, _, r in links for h in (a, b) if h in hosts}
    cfg = _mmu(knobs, ports, max(host_rate_bps.values()), where)
    if lfts is None:
        routes = _shortest_routes(switches, hosts, adj, topo["ecmp"])
    else:
        guid_of = {i: g for g, i in sw_ids.items()}
        routes = {}
        for x in switches:
            table = lfts.tables.get(guid_of[x])
            if table is None:
                raise ScenarioError(f"{lfts.path}: no table of switch {guid_of[x]:#018x} "
                                    f"({ib.nodes[guid_of[x]].desc})")
            routes[x] = {}
            for g, h in host_ids.items():
                lid = ib.nodes[g].lid
                port = table.get(lid) if lid is not None else None
                if port is not None and port > 0:
                    routes[x][h] = port
    fab = Fabric(seed, slot, **lkw)
    # for [topology] routing = "updn": the switches' GUIDs (OpenSM's ids) and the SHARP
    # aggregation nodes, which are not the hosts that make a switch a leaf
    fab.node_guid = {i: g for g, i in sw_ids.items()}  # type: ignore[attr-defined]
    fab.aside_hosts = {host_ids[g] for g in cas  # type: ignore[attr-defined]
                       if "Aggregation Node" in ib.nodes[g].desc}
    # every output names a node as the file describes it (a switch by its host name, a CA
    # by its description: 'dgx-01 mlx5_0'; a name given twice: with its GUID)
    from sim.fabric.survey import switch_name

    named = {i: switch_name(ib.nodes[g].desc, g) if g in sw_ids
             else (ib.nodes[g].desc.strip() or f"{g:#018x}")
             for g, i in (*sw_ids.items(), *host_ids.items())}
    seen: dict[str, int] = {}
    for name in named.values():
        seen[name] = seen.get(name, 0) + 1
    guid_of_id = {i: g for g, i in (*sw_ids.items(), *host_ids.items())}
    fab.names.update({i: n if seen[n] == 1 else f"{n} {guid_of_id[i]:#018x}"
                      for i, n in named.items()})
    # perfquery's names of the ports (sim.fabric.counters): the file's LIDs and port numbers
    fab.node_lid = {i: ib.nodes[g].lid  # type: ignore[attr-defined]
                    for g, i in (*sw_ids.items(), *host_ids.items())
                    if ib.nodes[g].lid is not None}
    fab.ib_port = {}  # type: ignore[attr-defined]
    for ln in ib.links:
        for g, port in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
            if g in sw_ids:
                fab.ib_port[(sw_ids[g], port)] = port  # type: ignore[attr-defined]
            elif g in host_ids:
                fab.ib_port[(host_ids[g], 0)] = port  # type: ignore[attr-defined]
    for x in switches:
        fab.add_switch(x, Mmu(cfg), routes=routes[x], ecn=ecn, **sched)
    for h in hosts:
        fab.add_host(h, host_rate_bps[h], **hkw)
    for a, ap, b, bp, r in links:
        fab.connect(a, ap, b, bp, r, prop)
    groups: dict[int, list[int]] = {}
    for h in hosts:
        groups.setdefault(adj[h][0][1], []).append(h)
    ranks = [host_ids[n] for h in sorted(full) for n in full[h]]
    return fab, [groups[k] for k in sorted(groups)], ranks, gpn


def _shortest_routes(switches, hosts, adj, ecmp: bool) -> dict[int, dict[int, Any]]:
    """Per switch: destination host -> egress port (or a tuple: an ECMP group), by BFS from
    each host over switches only (hosts do not forward)."""
    sw = set(switches)
    routes: dict[int, dict[int, Any]] = {s: {} for s in switches}
    for d in hosts:
        dist = {d: 0}
        q = deque([d])
        while q:
            n = q.popleft()
            if n != d and n not in sw:
                continue
            for _p, m in adj[n]:
                if m not in dist and m in sw:
                    dist[m] = dist[n] + 1
                    q.append(m)
        for s in switches:
            if s not in dist:
                continue  # unreachable: a flow to d is refused by _check_routes
            nxt = sorted(p for p, m in adj[s] if m in dist and dist[m] == dist[s] - 1)
            routes[s][d] = tuple(nxt) if ecmp and len(nxt) > 1 else nxt[0]
    return routes

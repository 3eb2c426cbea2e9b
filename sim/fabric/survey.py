"""What a fabric is made of and what is off its pattern: the report ``lossless fabric``
prints, from an ibnetdiscover file (:mod:`sim.fabric.ibnetdiscover`) or a built fabric.

The fabric is taken as switches, NIC ports (an ibnetdiscover CA, a built fabric's host)
and links with their rates.  From it:

* **nodes**: NICs grouped by host.  ibnetdiscover names a CA ``<host> mlx5_N`` or ``<host>
  HCA-N``; a node's NICs are ranked by N, the rank is the NIC's *rail* (``HCA-1, -2, -5,
  -6`` and ``mlx5_0, _1, _4, _5`` are rails 0-3 alike).  SHARP aggregation nodes (a CA on
  a switch, "Aggregation Node") are set aside.  A CA without a host name (a description
  such as ``MT4129 ConnectX7   Mellanox Technologies``) is placed, when one host fits, by
  its leaf port: the host whose other NICs sit on the same port of the other leaves of
  its scalable unit, and which lacks that rail.
* **tiers**: a switch with a NIC is a leaf (tier 1), a switch next to a leaf and not one
  is tier 2 (spine), and so on.  A leaf's rail is the rail of most of its NICs.
* **what is off**: links of another width or speed than most; per tier, switches with
  fewer (or more) links up or down than most of their tier, and per leaf the spines it
  has fewer links to than most leaves have; nodes with fewer NICs than most (*compute*
  nodes: those on the leaf ports most nodes use; hosts on other ports are listed as other
  hosts); NICs on a leaf of another rail than theirs; NICs without a host name.
* **oversubscription** per tier: the bandwidth down over the bandwidth up, per switch.
"""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Graph", "graph_of_fabric", "graph_of_ibnetdiscover", "survey", "survey_text",
           "switch_name"]

_NIC_NAME = re.compile(r"^(\S+)\s+(?:mlx5_(\d+)|HCA-(\d+))$")
_SHARP = "Aggregation Node"


@dataclass(slots=True)
class Graph:
    """Switches and NIC ports by id (their names), and links ``(a, a_port, b, b_port,
    rate_bps, label)``."""

    source: str
    switches: dict[int, str] = field(default_factory=dict)
    nics: dict[int, str] = field(default_factory=dict)
    links: list[tuple[int, int, int, int, int, str]] = field(default_factory=list)
    #: a NIC's host and index when the source says it (built fabrics: node, GPU index)
    nic_host: dict[int, tuple[str, int]] = field(default_factory=dict)


_MLNX_SWITCH = re.compile(r"^MF0;([^:]+):")


def switch_name(desc: str, guid: int) -> str:
    """A switch's name: NVIDIA/Mellanox switches describe themselves as ``MF0;<host
    name>:<model>/<unit>`` (the host name kept); others as they are; none: the GUID."""
    m = _MLNX_SWITCH.match(desc)
    return m.group(1) if m else (desc.strip() or f"{guid:#018x}")


def graph_of_ibnetdiscover(topo: Any) -> Graph:
    """The graph of an :class:`sim.fabric.ibnetdiscover.IbTopology` (routers as switches)."""
    g = Graph(topo.path)
    for n in topo.nodes.values():
        if n.kind == "ca":
            g.nics[n.guid] = n.desc
        else:
            g.switches[n.guid] = switch_name(n.desc, n.guid)
    for ln in topo.links:
        g.links.append((ln.a, ln.a_port, ln.b, ln.b_port, ln.rate_bps, ln.label))
    for guid, desc in g.nics.items():
        m = _NIC_NAME.match(desc.strip())
        if m is not None:
            g.nic_host[guid] = (m.group(1), int(m.group(2) or m.group(3)))
    return g


def graph_of_fabric(fabric: Any, hosts: list[int] | None = None, gpus_per_node: int = 1,
                    source: str = "") -> Graph:
    """The graph of a built :class:`sim.fabric.Fabric`: switches and hosts by node id;
    ``hosts`` (the ranks' hosts in rank order) and ``gpus_per_node`` name a host's node
    (``node N``) and its index there."""
    from sim.net.switch import Switch

    g = Graph(source)
    for nid, node in fabric.nodes.items():
        if isinstance(node, Switch):
            g.switches[nid] = getattr(node, "name", "") or f"switch {nid}"
        else:
            g.nics[nid] = f"host {nid}"
    for r, h in enumerate(hosts or []):
        g.nic_host[h] = (f"node {r // gpus_per_node}", r % gpus_per_node)
        g.nics[h] = f"node {r // gpus_per_node} nic {r % gpus_per_node}"
    from sim.fabric.faults import peer_node

    seen = set()
    for nid, node in fabric.nodes.items():
        for idx, port in node.ports.items():
            peer = peer_node(port)
            if peer is None or (nid, idx) in seen:
                continue
            pidx = port.peer_port
            seen.add((peer.node_id, pidx))
            rate_bps = int(port.rate_bps)
            g.links.append((nid, idx, peer.node_id, pidx, rate_bps, f"{rate_bps / 1e9:g}G"))
    return g


def _mode(values: list[Any]) -> Any:
    """The most common value; of values as common, the largest (a fabric's pattern is
    what it has when nothing is missing)."""
    if not values:
        return None
    counts = Counter(values)
    top = max(counts.values())
    return max(v for v, c in counts.items() if c == top)


def survey(g: Graph) -> dict[str, Any]:
    """The report (module docstring) as a dict (what ``--json`` prints)."""
    return _survey(g)[0]


def node_nics(g: Graph) -> tuple[dict[str, list[int]], int]:
    """The compute nodes (named, then unnamed ones by unit and port) with their NICs in
    rail order (unnamed NICs put in a named node by their place included), and the NICs
    most nodes have: what a simulation of the fabric takes as its nodes."""
    return _survey(g)[1:]


def _survey(g: Graph) -> tuple[dict[str, Any], dict[str, list[int]], int]:
    sw, nics = g.switches, g.nics
    sharp = {n for n, d in nics.items() if _SHARP in d}
    adj: dict[int, list[tuple[int, int, int, int, str]]] = defaultdict(list)
    for a, ap, b, bp, rate_bps, label in g.links:
        adj[a].append((ap, b, bp, rate_bps, label))
        adj[b].append((bp, a, ap, rate_bps, label))
    # tiers: leaves hold NICs (SHARP nodes aside), then by distance
    tier: dict[int, int] = {}
    frontier = sorted({s for n in nics if n not in sharp for _, s, *_ in adj[n] if s in sw})
    level = 1
    while frontier:
        for s in frontier:
            tier[s] = level
        frontier = sorted({p for s in frontier for _, p, *_ in adj[s]
                           if p in sw and p not in tier})
        level += 1
    nlevels = level - 1
    names = {1: "leaf", 2: "spine", 3: "core"}
    tier_name = {t: names.get(t, f"tier {t}") for t in range(1, nlevels + 1)}
    if nlevels == 1:
        tier_name[1] = "switch"
    # NICs: their leaf and port
    at: dict[int, tuple[int, int]] = {}  # nic -> (leaf, leaf port)
    for n in nics:
        for _, s, sp, *_ in adj[n]:
            if s in sw:
                at[n] = (s, sp)
    # nodes and rails: a NIC's rail is the rank of its index among the indices the full
    # nodes of its naming use (HCA-1, -2, -5, -6 and mlx5_0, _1, _4, _5: rails 0-3)
    host_nics: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for n, (h, idx) in g.nic_host.items():
        if n not in sharp:
            host_nics[h].append((idx, n))
    usual = _mode([len(v) for v in host_nics.values()]) or 0

    def scheme(n: int) -> str:
        return nics[n].split()[-1].rstrip("0123456789")

    idx_sets: dict[str, set[int]] = defaultdict(set)
    for lst in host_nics.values():
        if len(lst) == usual:
            for idx, n in lst:
                idx_sets[scheme(n)].add(idx)
    rail_map = {k: {i: r for r, i in enumerate(sorted(v))} for k, v in idx_sets.items()}
    rail_of: dict[int, int] = {}
    for lst in host_nics.values():
        for idx, n in lst:
            r = rail_map.get(scheme(n), {}).get(idx)
            if r is not None:
                rail_of[n] = r
    # compute nodes: on the leaf ports most full nodes use; other hosts set aside
    # (the leaf ports from the lowest to the highest a full node uses: hosts on none of
    # them, such as a fabric manager's on a leaf's last ports, are not compute nodes)
    full_ports = [at[n][1] for lst in host_nics.values() if len(lst) == usual
                  for _, n in lst if n in at]
    lo, hi = (min(full_ports), max(full_ports)) if full_ports else (0, -1)
    other_hosts = sorted(h for h, lst in host_nics.items()
                         if not any(n in at and lo <= at[n][1] <= hi for _, n in lst))
    leaf_rail: dict[int, int] = {}
    by_leaf: dict[int, list[int]] = defaultdict(list)
    for n, (s_, _) in at.items():
        by_leaf[s_].append(n)
    for s_, lst in by_leaf.items():
        rails = [rail_of[n] for n in lst if n in rail_of]
        if rails:
            leaf_rail[s_] = _mode(rails)
    # rail-optimised: nine NICs in ten on a leaf of their rail (else no rails)
    on_rail = sum(1 for n, r in rail_of.items() if n in at and leaf_rail.get(at[n][0]) == r)
    if usual < 2 or on_rail < 0.9 * max(1, len(rail_of)):
        leaf_rail.clear()
    # scalable units: leaves that share nodes (union-find over each node's leaves)
    parent: dict[int, int] = {s_: s_ for s_ in by_leaf}

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for h, lst in host_nics.items():
        if h in other_hosts:
            continue
        ls = sorted({at[n][0] for _, n in lst if n in at})
        for s_ in ls[1:]:
            parent[find(s_)] = find(ls[0])
    # NICs without a host name: into the named node on the same port of its unit's other
    # leaves when that node has no NIC on this leaf's rail; else, one unnamed node per
    # (unit, port)
    unnamed = sorted(n for n in nics if n not in sharp and n not in g.nic_host)
    at_port = {v: n for n, v in at.items()}
    unit_leaves: dict[int, list[int]] = defaultdict(list)
    for s_ in by_leaf:
        unit_leaves[find(s_)].append(s_)
    placed: dict[int, str] = {}
    anon: dict[tuple[int, int], list[int]] = defaultdict(list)
    for n in unnamed:
        if n not in at:
            continue
        s_, p = at[n]
        cands = {g.nic_host[m][0] for t in unit_leaves[find(s_)] if t != s_
                 for m in [at_port.get((t, p))] if m is not None and m in g.nic_host}
        h = cands.pop() if len(cands) == 1 else None
        if h is not None and leaf_rail.get(s_) not in {rail_of.get(m) for _, m in
                                                         host_nics[h]}:
            placed[n] = h
            host_nics[h].append((-1, n))
            if s_ in leaf_rail:
                rail_of[n] = leaf_rail[s_]
        else:
            anon[(find(s_), p)].append(n)
    def unit_name(u: int) -> str:
        return min(sw[t] for t in unit_leaves[u])

    anon_nodes = {f"unnamed {unit_name(u)}:{p}": lst
                  for (u, p), lst in sorted(anon.items(), key=lambda kv: (unit_name(
                      kv[0][0]), kv[0][1]))}
    # what is off: links
    labels = Counter(label for *_, label in g.links)
    usual_label = _mode([label for *_, label in g.links])
    odd_links = [_link_text(g, a, ap, b, bp, label) for a, ap, b, bp, _, label in g.links
                 if label != usual_label]
    # per switch: links up and down, per tier against the tier's usual
    up: dict[int, Counter] = defaultdict(Counter)
    down: dict[int, int] = Counter()
    up_bps: dict[int, int] = Counter()
    down_bps: dict[int, int] = Counter()
    for s in sw:
        for _, p, _, rate_bps, _ in adj[s]:
            if p in sharp:
                continue
            if p in sw and tier.get(p, 0) > tier.get(s, 0):
                up[s][p] += 1
                up_bps[s] += rate_bps
            elif p in nics or (p in sw and tier.get(p, 0) < tier.get(s, 0)):
                down[s] += 1
                down_bps[s] += rate_bps
    tiers_out = []
    off_switches = []
    for t in range(1, nlevels + 1):
        members = sorted(s for s in sw if tier.get(s) == t)
        ups = [sum(up[s].values()) for s in members]
        downs = [down[s] for s in members]
        usual_up, usual_down = _mode(ups), _mode(downs)
        # links to each switch of the tier above, as most switches of this tier have them
        per_peer = _mode([c for s in members for c in up[s].values()])
        above = sorted(s for s in sw if tier.get(s) == t + 1)
        over = [down_bps[s] / up_bps[s] for s in members if up_bps[s]]
        tiers_out.append({
            "tier": t, "role": tier_name[t], "switches": len(members),
            "links_up": usual_up or 0, "links_down": usual_down or 0,
            "oversubscription": (None if not over else
                                 {"min": round(min(over), 3),
                                  "median": round(statistics.median(over), 3),
                                  "max": round(max(over), 3)}),
        })
        for s in members:
            nu, nd = sum(up[s].values()), down[s]
            why = []
            if t < nlevels and nu != usual_up:
                short = [f"{sw[p]}: {up[s][p]} of {per_peer}" for p in above
                         if up[s][p] < per_peer]
                why.append(f"{nu} of {usual_up} uplinks" + (f" ({'; '.join(short)})"
                                                             if short else ""))
            if nd != usual_down:
                why.append(f"{nd} of {usual_down} downlinks")
            if why:
                off_switches.append({"switch": sw[s], "id": s, "tier": tier_name[t],
                                     "why": "; ".join(why)})
    unit_rails: dict[int, set[int]] = defaultdict(set)
    for s_, r in leaf_rail.items():
        unit_rails[find(s_)].add(r)
    off_switches.sort(key=lambda d: (d["tier"] != "leaf", d["tier"], d["switch"]))
    nodes_short = []
    short_units: dict[tuple[int, int], list[str]] = defaultdict(list)

    def note_short(h: str, lst: list[int], have: set[Any]) -> None:
        missing = [r for r in range(usual) if r not in have]
        units = {find(at[n][0]) for n in lst if n in at}
        if len(units) == 1 and len(missing) == 1 and len(lst) == usual - 1:
            u = units.pop()
            if missing[0] not in unit_rails[u]:  # the unit has no leaf of that rail
                short_units[(u, missing[0])].append(h)
                return
        nodes_short.append({"node": h, "nics": len(lst), "of": usual,
                            "missing_rails": missing,
                            "placed": sorted(f"{n:#x}" for n in lst if n in placed)})

    for h, lst in sorted(host_nics.items()):
        if len(lst) < usual and h not in other_hosts:
            note_short(h, [n for _, n in lst], {rail_of.get(n) for _, n in lst})
    for h, lst in anon_nodes.items():
        if len(lst) < usual:
            note_short(h, lst, {leaf_rail.get(at[n][0]) for n in lst})
    units_short = [{"unit": sorted(sw[t] for t in unit_leaves[u]), "rail": r,
                    "nodes": len(hs)} for (u, r), hs in sorted(
                        short_units.items(), key=lambda kv: unit_name(kv[0][0]))]
    wrong_rail = []
    for n, r in rail_of.items():
        if n in at and n in g.nic_host and g.nic_host[n][0] not in other_hosts:
            s_ = at[n][0]
            if leaf_rail.get(s_) is not None and leaf_rail[s_] != r:
                wrong_rail.append({"nic": g.nics[n], "rail": r, "leaf": sw[s_],
                                   "leaf_rail": leaf_rail[s_], "port": at[n][1]})
    wrong_rail.sort(key=lambda d: d["nic"])
    compute = [h for h in host_nics if h not in other_hosts] + list(anon_nodes)
    members = {h: [n for _, n in sorted(((rail_of.get(n, 1 << 20), n) for _, n in
                                          host_nics[h]))] for h in sorted(host_nics)
               if h not in other_hosts}
    members |= {h: sorted(lst, key=lambda n: (leaf_rail.get(at[n][0], 1 << 20), n))
                for h, lst in anon_nodes.items()}
    rails = Counter(leaf_rail.values())
    return {
        "source": g.source,
        "switches": {tier_name[t]: sum(1 for s in sw if tier.get(s) == t)
                     for t in range(1, nlevels + 1)}
                    | ({"unconnected": sum(1 for s in sw if s not in tier)}
                       if any(s not in tier for s in sw) else {}),
        "nics": len(nics) - len(sharp),
        "nodes": len(compute),
        "nics_per_node": usual,
        "rails": len(rails),
        "leaves_per_rail": dict(sorted(rails.items())),
        "links": dict(labels.most_common()),
        "tiers": tiers_out,
        "sharp_aggregation_nodes": len(sharp),
        "other_hosts": [{"host": h, "nics": len(host_nics[h]),
                         "at": sorted(f"{sw[at[n][0]]} port {at[n][1]}"
                                      for _, n in host_nics[h] if n in at)}
                        for h in other_hosts],
        "off": {
            "links": odd_links,
            "switches": off_switches,
            "units_without_a_rail": units_short,
            "nodes_missing_nics": nodes_short,
            "nics_on_another_rail": wrong_rail,
            "nics_without_host_name": {
                "count": len(unnamed),
                "placed": {f"{n:#x}": h for n, h in sorted(placed.items())},
                "unnamed_nodes": {h: len(lst) for h, lst in anon_nodes.items()},
            },
        },
    }, members, usual


def _link_text(g: Graph, a: int, ap: int, b: int, bp: int, label: str) -> str:
    def name(n: int) -> str:
        return g.switches.get(n) or g.nics.get(n) or f"{n:#x}"
    return f"{name(a)} port {ap} - {name(b)} port {bp}: {label}"


def survey_text(rep: dict[str, Any]) -> str:
    """The report as an engineer reads it."""
    out = [f"fabric {rep['source']}"]
    plural = {"leaf": "leaves", "switch": "switches"}
    sw = ", ".join(f"{v} {plural.get(k, k + 's') if v != 1 else k}"
                   for k, v in rep["switches"].items())
    out.append(f"  switches: {sw}")
    rails = (f"{rep['rails']} rails (" + ", ".join(
        f"rail {r}: {n} lea{'f' if n == 1 else 'ves'}"
        for r, n in rep["leaves_per_rail"].items()) + ")") if rep["rails"] else \
        "not rail-optimised"
    out.append(f"  nodes: {rep['nodes']}, most of {rep['nics_per_node']} NICs; "
               f"{rep['nics']} NICs; {rails}")
    out.append("  links: " + ", ".join(f"{n} {k}" for k, n in rep["links"].items()))
    for t in rep["tiers"]:
        o = t["oversubscription"]
        ratio = "" if o is None else (f"; down:up {o['median']:g}:1" if o["min"] == o["max"]
                                      else f"; down:up {o['min']:g}-{o['max']:g}:1 "
                                           f"(median {o['median']:g})")
        out.append(f"  {t['role']}: {t['switches']}, most with {t['links_down']} links down"
                   f" and {t['links_up']} up{ratio}")
    if rep["sharp_aggregation_nodes"]:
        out.append(f"  set aside: {rep['sharp_aggregation_nodes']} SHARP aggregation nodes")
    for h in rep["other_hosts"]:
        out.append(f"  set aside: host {h['host']} ({h['nics']} NICs, not on the nodes' "
                   f"ports: {', '.join(h['at'])})")
    off = rep["off"]
    out.append("what is off:")
    n0 = len(out)
    for s in off["switches"]:
        out.append(f"  {s['tier']} {s['switch']}: {s['why']}")
    for ln in off["links"]:
        out.append(f"  link {ln}")
    for us in off["units_without_a_rail"]:
        out.append(f"  no leaf of rail {us['rail']} beside {', '.join(us['unit'])}: their "
                   f"{us['nodes']} nodes have {rep['nics_per_node'] - 1} NICs, none on "
                   f"rail {us['rail']}")
    for nd in off["nodes_missing_nics"]:
        miss = ", ".join(str(r) for r in nd["missing_rails"])
        out.append(f"  node {nd['node']}: {nd['nics']} of {nd['of']} NICs"
                   + (f" (none on rail {miss})" if miss else ""))
    for w in off["nics_on_another_rail"]:
        out.append(f"  NIC {w['nic']} (rail {w['rail']}) on {w['leaf']} port {w['port']}, "
                   f"a leaf of rail {w['leaf_rail']}")
    u = off["nics_without_host_name"]
    if u["count"]:
        nn = len(u["unnamed_nodes"])
        out.append(f"  {u['count']} NIC{'s' if u['count'] != 1 else ''} without a host name: "
                   f"{len(u['placed'])} put in the node on the same port of the unit's "
                   f"other leaves, {nn} unnamed node{'s' if nn != 1 else ''} of the others "
                   f"('unnamed LEAF:PORT', LEAF the unit's first)")
        out.extend(f"    {k} -> node {v}" for k, v in u["placed"].items())
    if len(out) == n0:
        out.append("  nothing: every switch, link and node as most")
    return "\n".join(out)

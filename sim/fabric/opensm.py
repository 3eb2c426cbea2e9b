"""Routing as the subnet manager set it: OpenSM's forwarding-table dump and ``ibroute``'s
listing read into each switch's linear forwarding table (destination LID -> output port),
and a path through an ibnetdiscover fabric (:mod:`sim.fabric.ibnetdiscover`) by those
tables or by least hops, printed as ``ibtracert`` prints it.

``opensm-lfts.dump`` (linux-rdma/opensm ``opensm/osm_dump.c``, ``dump_ucast_lfts``; plain or
gzipped) is per switch::

    Unicast lids [0-695] of switch Lid 28 guid 0x2c5eab0300c25f00 ('MF0;B10-P1-IBSPINE-07:...'):
    0x0001 061 # Channel Adapter portguid 0x1070fd0300478cf9: 'B11-P1-CUFM-02 mlx5_0'
    695 lids dumped

(the header is one line, cut here); ``ibroute`` (rdma-core ``infiniband-diags/ibroute.c``)
writes the same table as ``0x0001 061 : (Channel Adapter portguid 0x...: 'desc')`` under a
header of the same form (the description not quoted) and two column-title lines, ending
``N valid lids dumped``.  A LID a table does not list has no route there.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Hop", "LftError", "Lfts", "compare_routes", "compare_text", "read_lfts", "route",
           "route_text", "tables_against"]

_HEAD = re.compile(r"Unicast lids \[(\S+?)-(\S+?)\] of switch Lid (\d+) guid 0x([0-9A-Fa-f]+) "
                   r"\((.*)\):\s*$")
_ENTRY = re.compile(r"0x([0-9A-Fa-f]+)\s+(\d+)\s*(?:[#:].*)?$")
_TAIL = re.compile(r"\d+ (?:valid )?lids dumped\s*$")


class LftError(ValueError):
    """A forwarding-table line that cannot be read, or a route that cannot be followed."""


@dataclass(slots=True)
class Lfts:
    """Per switch (GUID) its table, LID -> output port (0: the switch itself); its LID."""

    path: str
    tables: dict[int, dict[int, int]] = field(default_factory=dict)
    switch_lid: dict[int, int] = field(default_factory=dict)


def read_lfts(path: str | Path) -> Lfts:
    """OpenSM's ``opensm-lfts.dump`` or ``ibroute``'s output at ``path`` (plain or
    gzipped)."""
    from sim.fabric.ibnetdiscover import text_lines

    out = Lfts(str(path))
    cur: dict[int, int] | None = None
    for no, raw in enumerate(text_lines(path, LftError), 1):
        line = raw.strip()
        where = f"{path}:{no}"
        if not line or line.startswith(("Lid ", "Port ")) or _TAIL.match(line):
            continue
        m = _HEAD.match(line)
        if m is not None:
            guid = int(m.group(4), 16)
            if guid in out.tables:
                raise LftError(f"{where}: switch {guid:#018x}: a second table")
            cur = out.tables[guid] = {}
            out.switch_lid[guid] = int(m.group(3))
            continue
        m = _ENTRY.match(line)
        if m is None:
            raise LftError(f"{where}: not a forwarding-table line (0xLID PORT # ...) nor a "
                           f"switch's header (Unicast lids [...] of switch Lid ...)")
        if cur is None:
            raise LftError(f"{where}: an entry before any switch's header")
        lid = int(m.group(1), 16)
        if lid in cur:
            raise LftError(f"{where}: LID {lid}: listed twice for this switch")
        cur[lid] = int(m.group(2))
    if not out.tables:
        raise LftError(f"{path}:1: no switch's table (Unicast lids [...] of switch ...)")
    return out


@dataclass(frozen=True, slots=True)
class Hop:
    """Out of ``port`` of ``node`` into ``peer_port`` of ``peer`` (GUIDs)."""

    node: int
    port: int
    peer: int
    peer_port: int


def _find(topo: Any, text: str) -> int:
    """A node of ``topo`` by LID (decimal or 0x hex), GUID (0x and 16 hex digits) or
    description."""
    t = text.strip()
    if re.fullmatch(r"0x[0-9A-Fa-f]{16}", t) and int(t, 16) in topo.nodes:
        return int(t, 16)
    if re.fullmatch(r"\d+|0x[0-9A-Fa-f]{1,4}", t):
        lid = int(t, 0)
        hits = [g for g, n in topo.nodes.items() if n.lid == lid]
        if len(hits) == 1:
            return hits[0]
        raise LftError(f"{text}: no node with LID {lid}" if not hits else
                       f"{text}: LID {lid} is {len(hits)} nodes'")
    hits = [g for g, n in topo.nodes.items() if n.desc == t]
    if len(hits) == 1:
        return hits[0]
    raise LftError(f"{text!r}: no node has this LID, GUID or description" if not hits else
                   f"{text!r}: {len(hits)} nodes have this description (give a LID or GUID)")


def route(topo: Any, src: str, dst: str, lfts: Lfts | None = None) -> list[Hop]:
    """The path from ``src`` to ``dst`` (LIDs, GUIDs or descriptions): by the switches'
    tables ``lfts`` to ``dst``'s LID, or without them by least hops (at each switch the
    lowest-numbered port towards a switch one hop nearer, as OpenSM's min-hop engine
    breaks ties when no other route counts yet)."""
    a, b = _find(topo, src), _find(topo, dst)
    peer: dict[tuple[int, int], tuple[int, int]] = {}
    for ln in topo.links:
        peer[(ln.a, ln.a_port)] = (ln.b, ln.b_port)
        peer[(ln.b, ln.b_port)] = (ln.a, ln.a_port)
    nodes = topo.nodes
    if a == b:
        return []
    if nodes[a].kind == "switch":
        cur = a
        hops: list[Hop] = []
    else:
        out = sorted(p for (g, p) in peer if g == a)
        if not out:
            raise LftError(f"{src}: has no link")
        cur, pp = peer[(a, out[0])]
        hops = [Hop(a, out[0], cur, pp)]
    dlid = nodes[b].lid
    if lfts is not None and dlid is None:
        raise LftError(f"{dst}: its LID is not known (the ibnetdiscover file does not give it)")
    dist: dict[int, int] = {}
    if lfts is None:  # least hops to b over switches
        dist = {b: 0}
        q = deque([b])
        while q:
            n = q.popleft()
            if n != b and nodes[n].kind != "switch":
                continue
            for (g, _p), (h, _hp) in peer.items():
                if g == n and h not in dist and (nodes[h].kind == "switch" or h == b):
                    dist[h] = dist[n] + 1
                    q.append(h)
    while cur != b:
        if len(hops) > 64:
            raise LftError(f"{src} to {dst}: more than 64 hops (a loop in the tables)")
        if nodes[cur].kind != "switch":
            raise LftError(f"{src} to {dst}: the path reaches {nodes[cur].desc!r}, not a "
                           f"switch")
        if lfts is not None:
            table = lfts.tables.get(cur)
            if table is None:
                raise LftError(f"{lfts.path}: no table of switch {cur:#018x} "
                               f"({nodes[cur].desc})")
            port = table.get(dlid)
            if port is None:
                raise LftError(f"{lfts.path}: switch {cur:#018x} ({nodes[cur].desc}) has no "
                               f"route to LID {dlid}")
            if port == 0:
                raise LftError(f"{lfts.path}: switch {cur:#018x} routes LID {dlid} to "
                               f"itself (port 0)")
        else:
            if cur not in dist:
                raise LftError(f"{src} to {dst}: no path")
            ports = sorted(p for (g, p), (h, _) in peer.items()
                           if g == cur and dist.get(h, 1 << 30) == dist[cur] - 1)
            port = ports[0]
        nxt = peer.get((cur, port))
        if nxt is None:
            raise LftError(f"switch {cur:#018x} ({nodes[cur].desc}) port {port}: no link "
                           f"there (the tables and the fabric differ)")
        hops.append(Hop(cur, port, *nxt))
        cur = nxt[0]
    return hops


def route_text(topo: Any, hops: list[Hop], src: str, dst: str) -> str:
    """``hops`` as ``ibtracert`` prints a path: the source, a line per link, the
    destination."""
    nodes = topo.nodes
    a, b = _find(topo, src), _find(topo, dst)

    def kind(g: int) -> str:
        return {"switch": "switch", "ca": "ca", "router": "router"}[nodes[g].kind]

    def lid(g: int) -> str:
        v = nodes[g].lid
        return "?" if v is None else f"{v}-{v}"

    out = [f'From {kind(a)} {{{a:#018x}}} portnum {hops[0].port if hops else 0} lid '
           f'{lid(a)} "{nodes[a].desc}"']
    for h in hops:
        out.append(f'[{h.port}] -> {kind(h.peer)} port {{{h.peer:#018x}}}[{h.peer_port}] '
                   f'lid {lid(h.peer)} "{nodes[h.peer].desc}"')
    last = hops[-1].peer_port if hops else 0
    out.append(f'To {kind(b)} {{{b:#018x}}} portnum {last} lid {lid(b)} "{nodes[b].desc}"')
    return "\n".join(out)


def compare_routes(topo: Any, lfts: Lfts) -> dict[str, Any]:
    """OpenSM's tables against least hops on the fabric they route: per (switch,
    destination CA) the hops the tables take to it and the fewest there are (switches
    without a route counted apart), and per pair of leaves the switches the tables send
    one leaf's traffic to the other's CAs through against those on least-hop paths (path
    diversity)."""
    import statistics

    nodes = topo.nodes
    peer: dict[tuple[int, int], int] = {}
    adj: dict[int, set[int]] = {g: set() for g in nodes}
    for ln in topo.links:
        peer[(ln.a, ln.a_port)] = ln.b
        peer[(ln.b, ln.b_port)] = ln.a
        adj[ln.a].add(ln.b)
        adj[ln.b].add(ln.a)
    cas = sorted(g for g, n in nodes.items() if n.kind == "ca" and n.lid is not None
                 and "Aggregation Node" not in n.desc and adj[g])
    switches = sorted(g for g in lfts.tables if g in nodes)
    leaf_of = {c: next(iter(adj[c])) for c in cas}
    longer, no_route, entries = [], 0, 0
    via: dict[tuple[int, int], set[int]] = {}
    least_via: dict[tuple[int, int], set[int]] = {}
    for c in cas:
        lid = nodes[c].lid
        # least hops to c over switches
        dist = {c: 0}
        frontier = [c]
        while frontier:
            nxt = []
            for x in frontier:
                for y in adj[x]:
                    if y not in dist and nodes[y].kind == "switch":
                        dist[y] = dist[x] + 1
                        nxt.append(y)
            frontier = nxt
        for s in switches:
            if s not in dist:
                continue
            # the tables' hops from s to c
            hops, cur, seen = 0, s, set()
            while cur != c and cur not in seen:
                seen.add(cur)
                port = lfts.tables.get(cur, {}).get(lid)
                if port is None or port == 0 or (cur, port) not in peer:
                    hops = -1
                    break
                cur = peer[(cur, port)]
                hops += 1
            if hops < 0 or cur != c:
                no_route += 1
                continue
            entries += 1
            if hops > dist[s]:
                longer.append((s, c, hops, dist[s]))
        lc = leaf_of[c]
        for s in switches:
            if s == lc or s not in dist or not any(leaf_of.get(x) == s for x in adj[s]
                                                   if x in leaf_of):
                continue
            port = lfts.tables.get(s, {}).get(lid)
            if port is not None and (s, port) in peer:
                via.setdefault((s, lc), set()).add(peer[(s, port)])
            least_via.setdefault((s, lc), set()).update(
                y for y in adj[s] if nodes[y].kind == "switch" and dist.get(y) == dist[s] - 1)

    def stats(v: list[int]) -> dict[str, float]:
        return {"min": min(v), "median": statistics.median(v), "max": max(v)} if v else {}

    pairs = sorted(least_via)
    used = [len(via.get(p, ())) for p in pairs]
    avail = [len(least_via[p]) for p in pairs]
    return {
        "tables": len(lfts.tables),
        "routes": entries,
        "no_route": no_route,
        "longer_than_least_hops": len(longer),
        "longer_examples": [
            f"{nodes[s].desc} to {nodes[c].desc}: {h} hops, least {d}"
            for s, c, h, d in longer[:5]],
        "leaf_pairs": len(pairs),
        "switches_used_per_leaf_pair": stats(used),
        "least_hop_switches_per_leaf_pair": stats(avail),
        "leaf_pairs_using_fewer": sum(1 for u, a in zip(used, avail, strict=True) if u < a),
    }


def compare_text(rep: dict[str, Any]) -> str:
    """:func:`compare_routes`'s result as lines under the report."""
    u, a = rep["switches_used_per_leaf_pair"], rep["least_hop_switches_per_leaf_pair"]
    out = [f"routes by the tables ({rep['tables']} switches):",
           f"  {rep['routes']} switch-to-NIC routes, {rep['no_route']} without one; "
           f"{rep['longer_than_least_hops']} longer than least hops"]
    out.extend(f"    {x}" for x in rep["longer_examples"])
    if u:
        out.append(f"  per leaf pair, the switches a leaf sends the other's NICs' traffic "
                   f"through: {u['min']:g}-{u['max']:g} (median {u['median']:g}) of "
                   f"{a['min']:g}-{a['max']:g} on least-hop paths (median {a['median']:g}); "
                   f"{rep['leaf_pairs_using_fewer']} of {rep['leaf_pairs']} pairs use fewer")
    for name, c in rep.get("ours", {}).items():
        n = sum(c.values())
        roots = " (roots: the top tier)" if name == "up/down" else ""
        out.append(f"  lossless's {name} tables{roots}: {c['equal']} of {n} "
                   f"switch-to-CA entries equal, {c['different']} another port, "
                   f"{c['only_ours']} routed only by ours, {c['only_theirs']} only by theirs")
    return "\n".join(out)


def tables_against(fabric: Any, topo: Any, lfts: Lfts, ours: dict[int, dict[int, int]]
                   ) -> dict[str, int]:
    """Our tables ``ours`` (``{switch: {host: port}}`` on ``fabric``, built from ``topo`` with
    ``fabric.node_guid`` and its CAs numbered after the switches in GUID order) against
    ``lfts``, entry by entry: ``equal``, ``different``, ``only_ours``, ``only_theirs``."""
    cas = sorted(g for g, n in topo.nodes.items() if n.kind == "ca")
    nsw = len(fabric.node_guid)
    out = {"equal": 0, "different": 0, "only_ours": 0, "only_theirs": 0}
    for s, guid in fabric.node_guid.items():
        table = lfts.tables.get(guid, {})
        mine = ours.get(s, {})
        for j, c in enumerate(cas):
            a, b = mine.get(nsw + j), table.get(topo.nodes[c].lid)
            if a is None and b is None:
                continue
            key = ("equal" if a == b else "only_theirs" if a is None else
                   "only_ours" if b is None else "different")
            out[key] += 1
    return out

"""InfiniBand-style routing tables for a built fabric: OpenSM's min-hop linear forwarding
tables (destination based, one output port per destination) and the minimal-port groups that
adaptive routing chooses among.  docs/explanation/infiniband.md, section "Routing".

The tables are computed from the fabric's links (each port's ``peer``), so they work for any
topology builder (leaf_spine, fat_tree, rail, superpod, custom).  Hosts stand for the CA ports
and their node ids for LIDs; switches' own LIDs are not routed (no traffic goes to a switch).

``min_hop_lft`` follows OpenSM's min-hop engine (github.com/linux-rdma/opensm,
``opensm/osm_ucast_mgr.c`` and ``osm_switch_recommend_path`` in ``opensm/osm_switch.c``):

* a switch attached to the destination sends it down that port;
* otherwise, among the ports whose peer switch is one hop closer to the destination (the
  least-hop ports; OpenSM never takes a longer port, to stay loop free), the port routing the
  **fewest destinations so far** on this switch (the port's path count,
  ``osm_port_prof_path_count_get``); the scan goes in port order and only a strictly smaller
  count replaces the best, so ties go to the lowest port number;
* every destination routed through a port adds one to its path count
  (``osm_switch_count_path``); destinations are taken in OpenSM's order
  (:func:`routing_order`: the hosts of the switch with the most hosts first, each
  switch's in port order); by default OpenSM does not count switch LIDs
  (``port_profile_switch_nodes`` FALSE), matching routing only hosts here.

Simplified [A]: LMC = 0 (one LID per port, so no remote system/node spreading), no
``port_shifting``/``scatter_ports`` options, no port weights, all links healthy; the fat-tree
engine (``osm_ucast_ftree.c``) is not modelled: on our fat trees min-hop already gives every
switch port destinations differing by at most one within each least-hop group.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection

from sim.fabric.core import Fabric
from sim.net.switch import Switch

__all__ = ["minimal_ports", "min_hop_lft", "apply_lft", "apply_groups", "apply_adaptive",
           "apply_routing", "routing_order", "updn_ports", "ROUTINGS"]

#: ``[topology] routing`` of the generated fabrics: the builder's tables (ECMP groups), the
#: min-hop LFT, the up/down LFT (roots: the top tier), or adaptive routing over the minimal
#: ports.
ROUTINGS = ("ecmp", "static", "updn", "adaptive")


def _switches(fabric: Fabric) -> dict[int, Switch]:
    return {n: s for n, s in sorted(fabric.nodes.items()) if isinstance(s, Switch)}


def minimal_ports(fabric: Fabric, down: Collection[tuple[int, int]] = ()
                  ) -> dict[int, dict[int, tuple[int, ...]]]:
    """``{switch: {host: ports on a minimal path to it, ascending}}`` for every host a switch
    reaches (breadth-first over the switch graph from each destination).  ``down``: the
    (switch, port) egress ports of links that are down (sim.fabric.faults), left out."""
    sws = _switches(fabric)
    hosts = sorted(n for n in fabric.nodes if n not in sws)
    links: dict[int, list[tuple[int, int]]] = {}  # switch -> [(port, peer node id)]
    for sid, sw in sws.items():
        links[sid] = sorted((i, p.peer.node_id) for i, p in sw.ports.items()
                            if getattr(p, "peer", None) is not None and (sid, i) not in down)
    nbrs: dict[int, set[int]] = {s: {n for _, n in ls if n in sws} for s, ls in links.items()}
    out: dict[int, dict[int, tuple[int, ...]]] = {s: {} for s in sws}
    for d in hosts:
        dist: dict[int, int] = {}
        todo: deque[int] = deque()
        for s, ls in links.items():
            if any(n == d for _, n in ls):
                dist[s] = 1
                todo.append(s)
        while todo:
            s = todo.popleft()
            for n in nbrs[s]:
                if n not in dist:
                    dist[n] = dist[s] + 1
                    todo.append(n)
        for s, h in dist.items():
            want = d if h == 1 else None
            out[s][d] = tuple(i for i, n in links[s]
                              if n == want or (want is None and dist.get(n) == h - 1))
    return out


def routing_order(fabric: Fabric) -> dict[int, int]:
    """The order OpenSM routes destinations in (``ucast_mgr_build_lfts``,
    ``sort_ports_by_switch_load`` in ``opensm/osm_ucast_mgr.c``): host -> its place.  The
    switches with the most hosts first (ties in switch order, the GUID order of the
    fabric's switches: a stable sort), each one's hosts in its port order; hosts on no
    switch last."""
    sws = _switches(fabric)
    ends = {s: [p.peer.node_id for _, p in sorted(sw.ports.items())
                if getattr(p, "peer", None) is not None and p.peer.node_id not in sws]
            for s, sw in sws.items()}
    order: dict[int, int] = {}
    for s in sorted(sws, key=lambda x: -len(ends[x])):
        for h in ends[s]:
            order.setdefault(h, len(order))
    for n in sorted(fabric.nodes):
        if n not in sws:
            order.setdefault(n, len(order))
    return order


def top_switches(fabric: Fabric) -> set[int]:
    """The switches farthest from the hosts (a breadth-first search over the switches from
    the ones with hosts; a fabric's ``aside_hosts``, such as SHARP aggregation nodes on
    every switch, not counted): the spines of two tiers, the cores of three; up/down's
    roots."""
    sws = _switches(fabric)
    aside = getattr(fabric, "aside_hosts", set())  # SHARP aggregation nodes: not hosts here
    level = {s: 1 for s, sw in sws.items()
             if any(getattr(p, "peer", None) is not None and p.peer.node_id not in sws
                    and p.peer.node_id not in aside for p in sw.ports.values())}
    todo = deque(level)
    while todo:
        s = todo.popleft()
        for p in sws[s].ports.values():
            n = getattr(getattr(p, "peer", None), "node_id", None)
            if n in sws and n not in level:
                level[n] = level[s] + 1
                todo.append(n)
    top = max(level.values(), default=0)
    return {s for s, lv in level.items() if lv == top}


def updn_lft(fabric: Fabric, roots: Collection[int] | None = None,
             ids: dict[int, int] | None = None, down: Collection[tuple[int, int]] = ()
             ) -> dict[int, dict[int, int]]:
    """OpenSM's up/down LFTs: :func:`min_hop_lft`'s balancing over :func:`updn_ports`
    (``roots`` default: :func:`top_switches`)."""
    if roots is None:
        roots = top_switches(fabric)
    return min_hop_lft(fabric, by_dst_ports=updn_ports(fabric, roots, ids, down))


def updn_ports(fabric: Fabric, roots: Collection[int], ids: dict[int, int] | None = None,
               down: Collection[tuple[int, int]] = ()
               ) -> dict[int, dict[int, tuple[int, ...]]]:
    """OpenSM's up/down engine's least-hop ports (``opensm/osm_ucast_updn.c``):
    ``{switch: {host: ports, ascending}}`` over up*down* paths only.  The switches are
    ranked by their distance from ``roots`` (``updn_subn_rank``); a step from a switch to
    a neighbour is *up* towards a lower rank (equal ranks: towards the larger id,
    ``updn_get_dir``; two roots: up); from every switch a breadth-first search outwards
    (``updn_bfs_by_node``, in port order) never turns from down to up, and records per
    port the hops back to it; a host is reached through its switch.  ``ids``: a switch's
    id (OpenSM's: its node GUID; default its node id).  ``down``: (switch, port) egress
    ports of links that are down, left out (as for :func:`minimal_ports`)."""
    sws = _switches(fabric)
    ids = ids or {s: s for s in sws}
    nb: dict[int, list[tuple[int, int, int]]] = {}  # switch -> [(port, peer, peer port)]
    for sid, sw in sws.items():
        nb[sid] = sorted((i, p.peer.node_id, p.peer_port) for i, p in sw.ports.items()
                         if getattr(p, "peer", None) is not None and p.peer.node_id in sws
                         and (sid, i) not in down
                         and (p.peer.node_id, p.peer_port) not in down)
    never = 1 << 30
    rank = {x: (0 if x in roots else never) for x in sws}
    todo: deque[int] = deque(x for x in sws if x in roots)
    while todo:
        u = todo.popleft()
        for _, v, _ in nb[u]:
            if rank[v] > rank[u] + 1:
                rank[v] = rank[u] + 1
                todo.append(v)

    def up(cur: int, rem: int) -> bool:  # the step cur -> rem
        if rank[cur] == 0 and rank[rem] == 0:
            return True
        if rank[cur] != rank[rem]:
            return rank[cur] > rank[rem]
        return ids[cur] > ids[rem]

    # hops[x][d]: per port of switch x, the hops to switch d through it
    hops: dict[int, dict[int, dict[int, int]]] = {x: {} for x in sws}
    for d in sws:
        hops[d][d] = {-1: 0}  # -1: the switch itself (OpenSM's port 0)
        going_up = {d: True}
        queued = {d}
        q: deque[int] = deque([d])
        while q:
            u = q.popleft()
            queued.discard(u)
            least = min(hops[u][d].values())
            for _, v, vp in nb[u]:
                nxt_up = up(u, v)
                if not going_up[u] and nxt_up:  # down then up: not an up*down* path
                    continue
                via = hops[v].setdefault(d, {})
                if least + 1 < via.get(vp, never):
                    via[vp] = least + 1
                    if v not in queued:
                        going_up[v] = nxt_up
                        queued.add(v)
                        q.append(v)
    out: dict[int, dict[int, tuple[int, ...]]] = {x: {} for x in sws}
    host_at: dict[int, tuple[int, int]] = {}  # host -> (its switch, the port to it)
    for sid, sw in sws.items():
        for i, p in sorted(sw.ports.items()):
            peer = getattr(p, "peer", None)
            if peer is not None and peer.node_id not in sws and (sid, i) not in down:
                host_at.setdefault(peer.node_id, (sid, i))
    for h, (leaf, port) in host_at.items():
        for x in sws:
            if x == leaf:
                out[x][h] = (port,)
                continue
            via = hops[x].get(leaf)
            if not via:
                continue  # no up*down* path: OpenSM leaves the LID without a route
            least = min(via.values())
            out[x][h] = tuple(sorted(p for p, n in via.items() if n == least and p >= 0))
    return out


def min_hop_lft(fabric: Fabric, down: Collection[tuple[int, int]] = (),
                by_dst_ports: dict[int, dict[int, tuple[int, ...]]] | None = None
                ) -> dict[int, dict[int, int]]:
    """OpenSM min-hop LFTs (module docstring): ``{switch: {host: output port}}`` (``down``:
    as for :func:`minimal_ports`).  ``by_dst_ports``: the least-hop ports to balance over,
    if not :func:`minimal_ports`'s (:func:`updn_ports`: OpenSM's up/down engine, which
    builds its tables the same way over its own hop counts)."""
    lft: dict[int, dict[int, int]] = {}
    order = routing_order(fabric)
    for s, by_dst in (by_dst_ports or minimal_ports(fabric, down)).items():
        count: dict[int, int] = {}
        table = lft[s] = {}
        for d in sorted(by_dst, key=order.__getitem__):
            best = None
            for port in by_dst[d]:
                if best is None or count.get(port, 0) < count.get(best, 0):
                    best = port
            assert best is not None
            table[d] = best
            count[best] = count.get(best, 0) + 1
    return lft


def apply_lft(fabric: Fabric, lft: dict[int, dict[int, int]]) -> None:
    """Replace every switch's routes by its LFT (``routing="static"``)."""
    for s, sw in _switches(fabric).items():
        sw.set_routes(dict(lft.get(s, {})), "static")
        sw.check_routes()
    fabric.ib_routing = "static"  # type: ignore[attr-defined]  # results: ooo_packets


def apply_groups(fabric: Fabric, routing: str = "adaptive") -> None:
    """Give every switch the group of its minimal ports per destination (NVIDIA's "TREE" AR
    group: all ports with minimal hops) and ``routing`` ("adaptive": per packet by queue;
    "ecmp": per flow by hash)."""
    for s, by_dst in minimal_ports(fabric).items():
        sw = fabric.nodes[s]
        assert isinstance(sw, Switch)
        sw.set_routes({d: g if len(g) > 1 else g[0] for d, g in by_dst.items()}, routing)
        sw.check_routes()
    fabric.ib_routing = routing  # type: ignore[attr-defined]  # results: ooo_packets


def apply_adaptive(fabric: Fabric) -> None:
    """:func:`apply_groups` with ``routing="adaptive"``."""
    apply_groups(fabric, "adaptive")


def apply_routing(fabric: Fabric, routing: str) -> None:
    """``"ecmp"``: minimal-port groups hashed per flow; ``"static"``: :func:`min_hop_lft`;
    ``"updn"``: :func:`updn_lft`, the top tier its roots; ``"adaptive"``:
    :func:`apply_adaptive`."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {list(ROUTINGS)}, got {routing!r}")
    if routing == "static":
        apply_lft(fabric, min_hop_lft(fabric))
    elif routing == "updn":  # (ids: OpenSM's, the switches' GUIDs, where the fabric has them)
        roots = top_switches(fabric)
        fabric.updn_roots = roots  # type: ignore[attr-defined]  # the reroutes' roots
        apply_lft(fabric, updn_lft(fabric, roots, getattr(fabric, "node_guid", None)))
        fabric.ib_routing = "updn"  # type: ignore[attr-defined]
    else:
        apply_groups(fabric, routing)

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
           "apply_routing", "ROUTINGS"]

#: ``[topology] routing`` of the generated fabrics: the builder's tables (ECMP groups), the
#: min-hop LFT, or adaptive routing over the minimal ports.
ROUTINGS = ("ecmp", "static", "adaptive")


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


def min_hop_lft(fabric: Fabric, down: Collection[tuple[int, int]] = ()
                ) -> dict[int, dict[int, int]]:
    """OpenSM min-hop LFTs (module docstring): ``{switch: {host: output port}}`` (``down``:
    as for :func:`minimal_ports`)."""
    lft: dict[int, dict[int, int]] = {}
    order = routing_order(fabric)
    for s, by_dst in minimal_ports(fabric, down).items():
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
    ``"adaptive"``: :func:`apply_adaptive`."""
    if routing not in ROUTINGS:
        raise ValueError(f"routing must be one of {list(ROUTINGS)}, got {routing!r}")
    if routing == "static":
        apply_lft(fabric, min_hop_lft(fabric))
    else:
        apply_groups(fabric, routing)

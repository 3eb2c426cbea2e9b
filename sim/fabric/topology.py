"""Topology builders on top of :class:`sim.fabric.Fabric`: a two-tier leaf-spine and a ring.

Both use only the fabric's public methods (``add_host``, ``add_switch``, ``connect``) and give
every switch a static routing table ``{destination host id: egress port or ECMP group}``
(checked against the switch's ports once the links exist); flows are added by
the caller with ``Fabric.add_flow``.  Every link is full duplex at ``rate_bps`` with
propagation delay ``prop_ps``; every switch gets its own :class:`sim.net.mmu.Mmu` built from the
one ``mmu_config`` (whose ``ports`` must cover the switch's port indices, checked here).

Node numbering
--------------
``leaf_spine(leaves=L, spines=S, hosts_per_leaf=H)``:

* spines are nodes ``0 .. S-1``; leaves are nodes ``S .. S+L-1`` (leaf ``l`` is node ``S+l``);
* hosts are nodes ``S+L .. S+L+L*H-1``: host ``h`` (0-based) of leaf ``l`` is node
  ``S + L + l*H + h``; every host uses its port 0;
* leaf ports ``0 .. H-1`` go down to its hosts (port ``h`` to host ``h``), ports
  ``H .. H+S-1`` go up (port ``H+s`` to spine ``s``); spine port ``l`` goes down to leaf ``l``.
* Routes (static, shortest path, loop-free): a leaf sends a destination on its own leaf
  straight down.  By default (``ecmp=False``) any other destination goes up to spine
  ``dst % S`` (a deterministic hash of the *destination* node id: since host ids of one leaf
  are consecutive, a leaf's hosts are spread round-robin over the spines), so all flows to one
  destination share one spine.  With ``ecmp=True`` a leaf's route to a remote destination is
  the ECMP group of all its uplinks ``(H, .., H+S-1)``: :class:`sim.net.switch.Switch` picks the
  uplink per flow by a hash of ``(src, dst, flow)`` salted with the leaf's node id and the
  fabric seed, so the flows to one destination spread over the spines while each flow keeps
  one path (no reordering).  A spine sends ``dst`` down to ``dst``'s leaf.  So a packet
  crosses 1 switch (same leaf) or 3 (leaf, spine, leaf).

``ring(switches=N, hosts_per_switch=K)``:

* switches are nodes ``0 .. N-1``; host ``k`` of switch ``s`` is node ``N + s*K + k``;
* switch ports ``0 .. K-1`` go to its hosts, port ``K`` is the clockwise link (to switch
  ``(s+1) % N``, arriving there on its port ``K+1``), port ``K+1`` the counter-clockwise one;
* Routes: ``routing="clockwise"`` (default) sends every remote destination clockwise, the
  shortest path when only clockwise links may be used; this is what makes the cyclic buffer
  dependency of a PFC deadlock possible.  ``routing="shortest"`` takes the shorter direction
  (ties go clockwise).  A packet crosses at most ``N`` switches.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.fabric import Fabric
from sim.net.mmu import Mmu, MmuConfig
from sim.net.switch import EcnConfig, Switch
from sim.trace import Tracer

__all__ = ["leaf_spine", "ring", "LeafSpine", "Ring", "route_problem"]


class LeafSpine:
    """What :func:`leaf_spine` built: the fabric and the node ids by role."""

    def __init__(self, fabric: Fabric, spines: list[int], leaves: list[int],
                 hosts: list[list[int]]) -> None:
        self.fabric = fabric
        self.spines = spines
        self.leaves = leaves
        #: ``hosts[l]`` = the host ids under leaf ``l``.
        self.hosts = hosts

    @property
    def all_hosts(self) -> list[int]:
        return [h for group in self.hosts for h in group]


class Ring:
    """What :func:`ring` built: the fabric, the switch ids and the host ids per switch."""

    def __init__(self, fabric: Fabric, switches: list[int], hosts: list[list[int]]) -> None:
        self.fabric = fabric
        self.switches = switches
        #: ``hosts[s]`` = the host ids attached to switch ``s``.
        self.hosts = hosts

    @property
    def all_hosts(self) -> list[int]:
        return [h for group in self.hosts for h in group]


def _need_ports(mmu_config: MmuConfig, ports: int, what: str) -> None:
    if mmu_config.ports < ports:
        raise ValueError(f"{what} switches use {ports} ports; mmu_config.ports is "
                         f"{mmu_config.ports}")


def _positive(**values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")


def _check_routes(fab: Fabric) -> None:
    for node in fab.nodes.values():
        if isinstance(node, Switch):
            node.check_routes()


def leaf_spine(leaves: int, spines: int, hosts_per_leaf: int, rate_bps: int, prop_ps: int,
               mmu_config: MmuConfig, *, seed: int = 0, ecn: EcnConfig | None = None,
               tracer: Tracer | None = None, ecmp: bool = False,
               host_kw: Mapping[str, Any] | None = None,
               switch_kw: Mapping[str, Any] | None = None,
               link_kw: Mapping[str, Any] | None = None) -> LeafSpine:
    """A two-tier leaf-spine (every leaf linked to every spine); see the module docstring.
    ``ecmp=True``: leaves spread remote destinations over all uplinks per flow.  ``host_kw``
    and ``switch_kw`` are passed to every ``Fabric.add_host`` / ``Fabric.add_switch`` (e.g.
    ``{"scheduler": "dwrr", "weights": (...)}``)."""
    hkw, skw = dict(host_kw or {}), dict(switch_kw or {})
    _positive(leaves=leaves, spines=spines, hosts_per_leaf=hosts_per_leaf)
    _need_ports(mmu_config, hosts_per_leaf + spines, "leaf")
    _need_ports(mmu_config, leaves, "spine")
    S, L, H = spines, leaves, hosts_per_leaf
    fab = Fabric(seed, tracer, **dict(link_kw or {}))  # flow_control, cbfc
    spine_ids = list(range(S))
    leaf_ids = [S + li for li in range(L)]
    host_ids = [[S + L + li * H + h for h in range(H)] for li in range(L)]
    leaf_of = {h: li for li in range(L) for h in host_ids[li]}
    fab.names.update({s: f"spine{s}" for s in spine_ids})
    fab.names.update({n: f"leaf{li}" for li, n in enumerate(leaf_ids)})

    for s in spine_ids:
        fab.add_switch(s, Mmu(mmu_config), routes={d: leaf_of[d] for d in leaf_of}, ecn=ecn,
                       **skw)
    uplinks = tuple(H + s for s in range(S))
    for li, node in enumerate(leaf_ids):
        routes: dict[int, int | tuple[int, ...]] = {}
        for d, dl in leaf_of.items():
            if dl == li:
                routes[d] = d - host_ids[li][0]
            else:
                routes[d] = uplinks if ecmp else H + d % S
        fab.add_switch(node, Mmu(mmu_config), routes=routes, ecn=ecn, **skw)
    for li, node in enumerate(leaf_ids):
        for h, host in enumerate(host_ids[li]):
            fab.add_host(host, rate_bps, **hkw)
            fab.connect(node, h, host, 0, rate_bps, prop_ps)
        for s in spine_ids:
            fab.connect(node, H + s, s, li, rate_bps, prop_ps)
    _check_routes(fab)
    return LeafSpine(fab, spine_ids, leaf_ids, host_ids)


def ring(switches: int, rate_bps: int, prop_ps: int, mmu_config: MmuConfig, *,
         hosts_per_switch: int = 1, routing: str = "clockwise", seed: int = 0,
         ecn: EcnConfig | None = None, tracer: Tracer | None = None,
         host_kw: Mapping[str, Any] | None = None,
         switch_kw: Mapping[str, Any] | None = None,
         link_kw: Mapping[str, Any] | None = None) -> Ring:
    """``switches`` switches in a ring, ``hosts_per_switch`` hosts on each; see the module
    docstring for numbering and routing.  ``host_kw``/``switch_kw``: as for
    :func:`leaf_spine`."""
    hkw, skw = dict(host_kw or {}), dict(switch_kw or {})
    _positive(switches=switches, hosts_per_switch=hosts_per_switch)
    if switches < 2:
        raise ValueError("a ring needs at least 2 switches")
    if routing not in ("clockwise", "shortest"):
        raise ValueError('routing must be "clockwise" or "shortest"')
    N, K = switches, hosts_per_switch
    _need_ports(mmu_config, K + 2, "ring")
    fab = Fabric(seed, tracer, **dict(link_kw or {}))  # flow_control, cbfc
    sw_ids = list(range(N))
    host_ids = [[N + s * K + k for k in range(K)] for s in range(N)]
    cw, ccw = K, K + 1
    fab.names.update({s: f"sw{s}" for s in sw_ids})
    for s in sw_ids:
        routes = {}
        for t in range(N):
            for k, d in enumerate(host_ids[t]):
                if t == s:
                    routes[d] = k
                elif routing == "shortest" and (s - t) % N < (t - s) % N:
                    routes[d] = ccw
                else:
                    routes[d] = cw
        fab.add_switch(s, Mmu(mmu_config), routes=routes, ecn=ecn, **skw)
    for s in sw_ids:
        for k, host in enumerate(host_ids[s]):
            fab.add_host(host, rate_bps, **hkw)
            fab.connect(s, k, host, 0, rate_bps, prop_ps)
    for s in sw_ids:
        fab.connect(s, cw, (s + 1) % N, ccw, rate_bps, prop_ps)
    _check_routes(fab)
    return Ring(fab, sw_ids, host_ids)


def route_problem(fabric: Fabric, src: int, dst: int,
                  memo: dict[tuple[int, int], str | None] | None = None) -> str | None:
    """Why frames from host ``src`` would not reach host ``dst`` by the switches' routing
    tables (every member of an ECMP group is followed), or None when they all do.

    The reason says where the route ends: ``"switch 0 has no route to 30"``, ``"switch 1
    port 5 is not connected"``, ``"reaches host 11, which does not forward"``, ``"loops at
    switch 2"``.  ``memo`` (node, dst) -> reason may be shared between calls for one fabric,
    so checking every flow costs one walk per (switch, destination).
    """
    memo = {} if memo is None else memo
    host = fabric.nodes[src]
    peer = getattr(host.ports.get(0), "peer", None)
    if peer is None:
        return f"host {src} has no link"
    return _walk(peer, dst, memo, set())


def _walk(node, dst: int, memo: dict[tuple[int, int], str | None], path: set[int]
          ) -> str | None:
    nid = node.node_id
    if nid == dst:
        return None
    key = (nid, dst)
    if key in memo:
        return memo[key]
    if not isinstance(node, Switch):
        why: str | None = f"reaches host {nid}, which does not forward"
    elif nid in path:
        return f"loops at switch {nid}"
    else:
        out = node.routes.get(dst)
        why = None
        if out is None:
            why = f"switch {nid} has no route to {dst}"
        else:
            path.add(nid)
            for port in (out if isinstance(out, tuple | list) else (out,)):
                p = node.ports.get(port)
                peer = getattr(p, "peer", None)
                why = (f"switch {nid} port {port} is not connected" if peer is None
                       else _walk(peer, dst, memo, path))
                if why:
                    break
            path.discard(nid)
    memo[key] = why
    return why

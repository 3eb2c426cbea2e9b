"""Fat-tree and DGX H100 SuperPOD fabrics for collectives and fabric files.

``fat_tree(k, oversubscription=1, ...)``: the 3-tier k-ary fat-tree of Al-Fares, Loukissas
and Vahdat, "A Scalable, Commodity Data Center Network Architecture", SIGCOMM 2008, §3.3: ``k``
pods, each of ``k/2`` edge and ``k/2`` aggregation switches, ``(k/2)**2`` core switches, every
aggregation and core switch using its ``k`` ports.  An edge switch has ``k/2`` uplinks (one to
every aggregation switch of its pod) and ``oversubscription * k/2`` hosts, so its hosts can
offer ``oversubscription`` times what its uplinks carry (1: the paper's non-blocking tree of
``k**3/4`` hosts; an edge switch then needs ``(1 + oversubscription) * k/2`` ports).

Node numbering (``h = k/2``, ``H = oversubscription * h``):

* cores are nodes ``0 .. h*h-1``; aggregation switch ``a`` of pod ``p`` is ``h*h + p*h + a``;
  edge switch ``e`` of pod ``p`` is ``h*h + k*h + p*h + e``;
* host ``i`` (0-based) of edge ``e`` of pod ``p`` is ``h*h + 2*k*h + (p*h + e)*H + i``, so
  :attr:`FatTree.ranks` lists the hosts pod by pod, edge by edge;
* edge ports ``0 .. H-1`` go to its hosts, port ``H + a`` up to aggregation switch ``a``;
  aggregation ports ``0 .. h-1`` go down to edge ``e``, port ``h + j`` up to core ``a*h + j``;
  core port ``p`` goes down to pod ``p`` (the aggregation switch ``core // h`` there).

Routes (static, loop-free, shortest): up while the destination is outside the switch's
subtree, down otherwise.  Up is the ECMP group of all uplinks (hashed per flow by
:class:`sim.net.switch.Switch`, salted per switch), or with ``ecmp=False`` a deterministic
choice by destination (edge: uplink ``dst % h``; aggregation: uplink ``(dst // h) % h``, a
different digit, so the two tiers do not polarise).  Down is unique: a core's one port to the
destination's pod, an aggregation switch's one port to the destination's edge.

``superpod(sus=1, ...)``: the compute fabric of NVIDIA's "DGX SuperPOD Reference Architecture
(DGX H100)", section "Network Fabrics" (docs.nvidia.com/dgx-superpod/reference-architecture-
scalable-infrastructure-h100): a scalable unit (SU) is 32 node slots of DGX H100 (8 GPUs, 8
ConnectX-7 400 Gb/s NDR ports) on 8 rail leaves, 4 spines per SU; one slot of the whole
fabric holds the UFM appliance, so 1 SU is 31 nodes, 8 leaves, 4 spines (248 node cables,
256 leaf-spine cables) and 4 SU are 127 nodes, 32 leaves, 16 spines (1,016 node cables,
1,024 leaf-spine cables), the figures of the RA's table.  Rail-optimised: GPU ``g`` of every
node of SU ``u`` is on that SU's leaf ``g``.  What is assumed here (the RA gives cable counts,
not port maps): every leaf (QM9700, 64 ports) has 32 ports down and 32 up, split evenly over
all ``4*sus`` spines (``32 / (4*sus)`` parallel links per leaf-spine pair, so ``sus`` is 1, 2,
4 or 8; 8 SU is this rule extended to the 64-port spine limit, not an RA figure); the UFM's
4 cables are not modelled; the links are this simulator's Ethernet links with PFC (the RA's
fabric is InfiniBand, whose credits are ``sim.flowctl.credit``'s).

Node numbering: spines ``0 .. S-1``; leaf ``g`` of SU ``u`` is ``S + u*8 + g``; GPU ``g`` of
node ``n`` (0-based over the whole fabric, SU ``n // 32``) is ``S + 8*sus + n*8 + g``.  Leaf
ports ``0 .. 31`` go down (port ``n % 32`` to that node), ``32 + s*m + i`` up (link ``i`` of
the ``m`` to spine ``s``); spine port ``l*m + i`` goes to leaf ``l`` (``l`` counts leaves
over the whole fabric).  Routes: a leaf sends its own rail's destinations of its SU down, any
other up (ECMP over its 32 uplinks, or ``ecmp=False``: the ``m`` links to spine ``dst % S``,
link ``(dst // S) % m``); a spine sends down to the destination's leaf (ECMP over the ``m``
parallel links, or ``ecmp=False``: link ``dst % m``).

``superpod(..., sharp=True)``: the switches run SHARP (InfiniBand): an aggregation node per
rail leaf and, with several SUs, one per rail on spine ``rail mod S``, each a host on its
switch (:attr:`SuperPod.aggregators`, :func:`superpod`).

Every builder checks what it built (:func:`check_built`): each switch's ports are the
expected number, all connected, within the radix; the link count; every host pair routable
by following the tables (every ECMP member), with no loop (:func:`sim.fabric.topology.
route_problem`; above 1,024 hosts every host to two, and every pair of a sample).  A
failure is a ``ValueError`` saying which switch or which pair.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.fabric.core import Fabric
from sim.fabric.rail import add_aggregator, switch_mmu_config
from sim.fabric.topology import route_problem
from sim.net.mmu import Mmu, MmuConfig
from sim.net.routes import RouteRule
from sim.net.switch import EcnConfig, Switch
from sim.trace import Tracer

__all__ = ["FatTree", "SuperPod", "fat_tree", "superpod", "superpod_size", "check_built",
           "k_problem", "sus_problem", "SU_SLOTS", "SUPERPOD_SUS", "DGX_GPUS",
           "SUPERPOD_LEAF_UPLINKS", "MAX_K"]

#: DGX H100: 8 GPUs, one 400 Gb/s ConnectX-7 port each on the compute fabric (the RA).
DGX_GPUS = 8
#: Node slots per scalable unit (32; with the UFM in one slot of the fabric: 31 nodes at 1 SU).
SU_SLOTS = 32
#: Uplinks of a leaf (assumed: 32 of the QM9700's 64 ports; 256 leaf-spine cables per SU / 8).
SUPERPOD_LEAF_UPLINKS = 32
#: The SU counts this builder takes (32 uplinks split evenly over 4 spines per SU).
SUPERPOD_SUS = (1, 2, 4, 8)
#: The largest ``k`` the CLI and fabric files take (k=64: 65,536 hosts, 5,120 switches).
MAX_K = 64


def k_problem(v: Any) -> str | None:
    """Why ``v`` is not a fat-tree ``k`` the CLI and fabric files take (a Param check)."""
    if not isinstance(v, int) or isinstance(v, bool) or not 2 <= v <= MAX_K or v % 2:
        return f"must be an even int in 2..{MAX_K}"
    return None


def sus_problem(v: Any) -> str | None:
    """Why ``v`` is not a SuperPOD SU count (a Param check)."""
    if isinstance(v, bool) or v not in SUPERPOD_SUS:
        return f"must be one of {list(SUPERPOD_SUS)}"
    return None


@dataclass(frozen=True, slots=True)
class FatTree:
    """What :func:`fat_tree` built."""

    fabric: Fabric
    cores: tuple[int, ...]
    #: ``aggs[p]`` = aggregation switch ids of pod ``p``; ``edges[p]`` likewise
    aggs: tuple[tuple[int, ...], ...]
    edges: tuple[tuple[int, ...], ...]
    #: ``hosts[p * k/2 + e]`` = host ids under edge ``e`` of pod ``p``
    hosts: tuple[tuple[int, ...], ...]
    #: every host, the order of :attr:`hosts` (one rank per host)
    ranks: tuple[int, ...]
    k: int
    oversubscription: int
    gpus_per_node: int

    @property
    def nodes(self) -> int:
        return len(self.ranks) // self.gpus_per_node


@dataclass(frozen=True, slots=True)
class SuperPod:
    """What :func:`superpod` built."""

    fabric: Fabric
    spines: tuple[int, ...]
    #: ``leaves[u][g]`` = leaf of rail ``g`` in SU ``u``
    leaves: tuple[tuple[int, ...], ...]
    #: host id of every rank, node-major (rank = node * 8 + gpu)
    ranks: tuple[int, ...]
    nodes: int
    sus: int
    gpus_per_node: int = DGX_GPUS
    #: with ``sharp``: the SHARP aggregator host of each rail leaf, SU by SU (rail ``g`` of SU
    #: ``u`` at ``u * 8 + g``), then with more than one SU each rail's root aggregator on a
    #: spine (rail ``g`` at ``sus * 8 + g``)
    aggregators: tuple[int, ...] = ()
    #: nodes under one rail leaf (the first level of a SHARP tree): 32 slots
    nodes_per_leaf: int = SU_SLOTS


def _positive(**values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")


def _rate(link_gbps: float) -> int:
    if not isinstance(link_gbps, int | float) or not link_gbps > 0 or link_gbps == float("inf"):
        raise ValueError(f"link_gbps must be a finite number > 0, got {link_gbps!r}")
    return int(link_gbps * 1e9)


def check_built(fab: Fabric, hosts: tuple[int, ...], ports: Mapping[int, int], links: int,
                radix: int | None) -> None:
    """Check a generated fabric: every switch has exactly ``ports[switch]`` ports, all
    connected and at most ``radix`` (None: no bound); the fabric has ``links`` links; every
    host has its link; every ordered pair of ``hosts`` (above :data:`ROUTE_CHECK_ALL` hosts,
    a sample of pairs) is routable by the tables with no loop.  Raises ``ValueError`` naming
    what is wrong."""
    n_ports = 0
    for nid, node in sorted(fab.nodes.items()):
        if not isinstance(node, Switch):
            n_ports += 1
            if getattr(node.ports.get(0), "peer", None) is None:
                raise ValueError(f"host {nid} has no link")
            continue
        node.check_routes()
        have = len(node.ports)
        if have != ports.get(nid, -1):
            raise ValueError(f"switch {nid} has {have} ports, expected {ports.get(nid)}")
        if radix is not None and have > radix:
            raise ValueError(f"switch {nid} needs {have} ports, more than the radix {radix}")
        for idx, p in node.ports.items():
            if getattr(p, "peer", None) is None:
                raise ValueError(f"switch {nid} port {idx} is not connected")
        n_ports += have
    if n_ports != 2 * links:
        raise ValueError(f"{n_ports / 2:g} links built, expected {links}")
    memo: dict = {}
    for a, b in _route_checks(hosts):
        if a != b and (why := route_problem(fab, a, b, memo)):
            raise ValueError(f"host {a} cannot reach host {b}: {why}")


#: Up to this many hosts :func:`check_built` follows the routes of every host pair; above,
#: of every host to the first and the last host, and of every pair of
#: :data:`ROUTE_SAMPLE` hosts spread over the fabric (its rules are the same at every size).
ROUTE_CHECK_ALL = 1024
ROUTE_SAMPLE = 64


def _route_checks(hosts: tuple[int, ...]):
    """The (source, destination) pairs :func:`check_built` follows."""
    if len(hosts) <= ROUTE_CHECK_ALL:
        yield from ((a, b) for a in hosts for b in hosts)
        return
    ends = (hosts[0], hosts[-1])
    for x in hosts:
        for y in ends:
            yield x, y
    step = len(hosts) / ROUTE_SAMPLE
    sample = [hosts[int(i * step)] for i in range(ROUTE_SAMPLE)]
    yield from ((a, b) for a in sample for b in sample)


def fat_tree(k: int, oversubscription: int = 1, *, link_gbps: float = 400.0,
             prop_ps: int = 500_000, seed: int = 0, ecmp: bool = True,
             gpus_per_node: int = 1, ecn: EcnConfig | None = None,
             mmu_config: MmuConfig | None = None, radix: int | None = None,
             tracer: Tracer | None = None, host_kw: Mapping[str, Any] | None = None,
             switch_kw: Mapping[str, Any] | None = None,
             link_kw: Mapping[str, Any] | None = None) -> FatTree:
    """A 3-tier k-ary fat-tree (``k`` even, >= 2) with ``oversubscription * k/2`` hosts per
    edge switch, every link ``link_gbps`` with ``prop_ps`` of propagation; see the module
    docstring for numbering and routes.  ``gpus_per_node`` groups consecutive ranks into
    nodes (NCCL's tree; it must divide the host count).  ``radix`` bounds every switch's
    ports (None: no bound beyond the ``k`` of aggregation and core switches)."""
    _positive(k=k, oversubscription=oversubscription, gpus_per_node=gpus_per_node)
    if k % 2:
        raise ValueError(f"k must be even, got {k}")
    rate = _rate(link_gbps)
    h, o = k // 2, oversubscription
    H = o * h
    nhosts = k * h * H
    if nhosts % gpus_per_node:
        raise ValueError(f"gpus_per_node {gpus_per_node} does not divide the {nhosts} hosts")
    edge_ports = H + h
    cfg = mmu_config or switch_mmu_config(max(edge_ports, k), rate)
    if cfg.ports < max(edge_ports, k):
        raise ValueError(f"switches use up to {max(edge_ports, k)} ports; mmu_config.ports "
                         f"is {cfg.ports}")
    hkw, skw = dict(host_kw or {}), dict(switch_kw or {})
    fab = Fabric(seed, tracer, **dict(link_kw or {}))
    C = h * h
    cores = tuple(range(C))
    aggs = tuple(tuple(C + p * h + a for a in range(h)) for p in range(k))
    edges = tuple(tuple(C + k * h + p * h + e for e in range(h)) for p in range(k))
    base = C + 2 * k * h
    hosts = tuple(tuple(base + (p * h + e) * H + i for i in range(H))
                  for p in range(k) for e in range(h))
    ranks = tuple(x for grp in hosts for x in grp)

    up = tuple(range(h, 2 * h))
    for role, ids in (("core", cores), ("agg", [x for pod in aggs for x in pod]),
                      ("edge", [x for pod in edges for x in pod])):
        fab.names.update({x: f"{role}{i}" for i, x in enumerate(ids)})
    # the tables as rules of the destination (RouteRule): (5k/4) x k**3/4 entries otherwise
    dests = range(base, base + nhosts)
    for c in cores:
        fab.add_switch(c, Mmu(cfg), routes=RouteRule(dests, _Below(base, nhosts, h * H, None,
                       0, 1, 1), range(k)), ecn=ecn, **skw)
    for p in range(k):
        rule = _Below(base + p * h * H, h * H, H, up if ecmp else None, h, h, h)
        for node in aggs[p]:
            fab.add_switch(node, Mmu(cfg), routes=RouteRule(
                dests, rule, (*range(h), *((up,) if ecmp else up))), ecn=ecn, **skw)
    e_up = tuple(range(H, H + h))
    for p in range(k):
        for e, node in enumerate(edges[p]):
            rule = _Below(base + (p * h + e) * H, H, 1, e_up if ecmp else None, H, 1, h)
            fab.add_switch(node, Mmu(cfg), routes=RouteRule(
                dests, rule, (*range(H), *((e_up,) if ecmp else e_up))), ecn=ecn, **skw)
    for p in range(k):
        for e, node in enumerate(edges[p]):
            for i, x in enumerate(hosts[p * h + e]):
                fab.add_host(x, rate, **hkw)
                fab.connect(node, i, x, 0, rate, prop_ps)
            for a in range(h):
                fab.connect(node, H + a, aggs[p][a], e, rate, prop_ps)
        for a in range(h):
            for j in range(h):
                fab.connect(aggs[p][a], h + j, cores[a * h + j], p, rate, prop_ps)
    ports = {c: k for c in cores}
    ports.update({x: k for pod in aggs for x in pod})
    ports.update({x: edge_ports for pod in edges for x in pod})
    links = nhosts + k * h * h + k * h * h  # host-edge, edge-agg, agg-core
    check_built(fab, ranks, ports, links, radix)
    return FatTree(fab, cores, aggs, edges, hosts, ranks, k, o, gpus_per_node)


@dataclass(frozen=True, slots=True)
class _Below:
    """A fat-tree switch's route to host ``d``: down to port ``(d - lo) // unit`` when ``d``
    is one of the ``span`` hosts from ``lo`` (its subtree), else ``up`` (the ECMP group of
    its uplinks) or, without ECMP, uplink ``first_up + (d // div) % h``."""

    lo: int
    span: int
    unit: int
    up: tuple[int, ...] | None
    first_up: int
    div: int
    h: int

    def __call__(self, d: int) -> int | tuple[int, ...]:
        j = d - self.lo
        if 0 <= j < self.span:
            return j // self.unit
        if self.up is not None:
            return self.up
        return self.first_up + (d // self.div) % self.h


def superpod_size(sus: int) -> tuple[int, int, int]:
    """(nodes, leaves, spines) of ``sus`` scalable units: 32 slots per SU, one of the
    fabric's slots the UFM, 8 leaves and 4 spines per SU (the RA's table)."""
    return SU_SLOTS * sus - 1, DGX_GPUS * sus, 4 * sus


def superpod(sus: int = 1, *, nodes: int | None = None, link_gbps: float = 400.0,
             prop_ps: int = 500_000, seed: int = 0, ecmp: bool = True,
             ecn: EcnConfig | None = None, mmu_config: MmuConfig | None = None,
             radix: int | None = 64, tracer: Tracer | None = None,
             host_kw: Mapping[str, Any] | None = None,
             switch_kw: Mapping[str, Any] | None = None,
             link_kw: Mapping[str, Any] | None = None, sharp: bool = False) -> SuperPod:
    """The DGX H100 SuperPOD compute fabric of ``sus`` scalable units (1, 2, 4 or 8); see the
    module docstring for what is published and what is assumed.  ``nodes`` (default: all
    ``32*sus - 1``) populates only the first ``nodes`` slots (a smaller job on the same
    switches; the switches and cables stay those of the full fabric).

    ``sharp``: the switches run SHARP (InfiniBand Quantum-2).  Rail ``g``'s SHARP tree has
    SU ``u``'s leaf ``g`` as a first level for its nodes and, with several SUs, spine ``g mod
    S`` as its root [A: SHARP's aggregation manager builds the trees; one root spine per
    rail spreads them].  Each aggregation node is a host on its switch (leaves: port 64;
    spines: one port per root after the leaf ports) whose link carries what its members
    send at their line rate together [A: aggregation latency and rate not published]; it is
    the switch's own, so it is not counted against the radix."""
    if sus not in SUPERPOD_SUS:
        raise ValueError(f"sus must be one of {list(SUPERPOD_SUS)} (32 leaf uplinks split "
                         f"evenly over 4 spines per SU), got {sus!r}")
    full, L, S = superpod_size(sus)
    N = full if nodes is None else nodes
    _positive(nodes=N)
    if N > full:
        raise ValueError(f"nodes: {sus} SU hold {full} nodes, got {N}")
    rate = _rate(link_gbps)
    G, U, m = DGX_GPUS, SUPERPOD_LEAF_UPLINKS, SUPERPOD_LEAF_UPLINKS // S
    A = 1 if sharp else 0  # the port of a switch's SHARP aggregator (a spine has at most
    # one root: 8 rails over 4 x sus >= 8 spines when there are roots)
    cfg = mmu_config or switch_mmu_config(SU_SLOTS + U + A, rate)
    if cfg.ports < max(SU_SLOTS + U, L * m) + A:
        raise ValueError(f"switches use {max(SU_SLOTS + U, L * m) + A} ports; "
                         f"mmu_config.ports is {cfg.ports}")
    hkw, skw = dict(host_kw or {}), dict(switch_kw or {})
    fab = Fabric(seed, tracer, **dict(link_kw or {}))
    spines = tuple(range(S))
    leaves = tuple(tuple(S + u * G + g for g in range(G)) for u in range(sus))
    base = S + L
    host = [[base + n * G + g for g in range(G)] for n in range(N)]
    ranks = tuple(x for row in host for x in row)

    def leaf_index(d: int) -> int:  # leaf of host d, counted over the fabric
        n, g = divmod(d - base, G)
        return (n // SU_SLOTS) * G + g

    uplinks = tuple(range(SU_SLOTS, SU_SLOTS + U))
    fab.names.update({s: f"spine{s}" for s in spines})
    fab.names.update({x: f"leaf{i}" for i, x in enumerate(y for su in leaves for y in su)})
    for s in spines:
        routes = {d: (tuple(leaf_index(d) * m + i for i in range(m)) if ecmp
                      else leaf_index(d) * m + d % m) for d in ranks}
        fab.add_switch(s, Mmu(cfg), routes=routes, ecn=ecn, **skw)
    for u in range(sus):
        for g, leaf in enumerate(leaves[u]):
            routes = {}
            for d in ranks:
                n, g2 = divmod(d - base, G)
                if n // SU_SLOTS == u and g2 == g:
                    routes[d] = n % SU_SLOTS
                else:
                    routes[d] = uplinks if ecmp else SU_SLOTS + (d % S) * m + (d // S) % m
            fab.add_switch(leaf, Mmu(cfg), routes=routes, ecn=ecn, **skw)
    for n in range(N):
        u = n // SU_SLOTS
        for g in range(G):
            fab.add_host(host[n][g], rate, **hkw)
            fab.connect(leaves[u][g], n % SU_SLOTS, host[n][g], 0, rate, prop_ps)
    for li in range(L):
        leaf = leaves[li // G][li % G]
        for s in spines:
            for i in range(m):
                fab.connect(leaf, SU_SLOTS + s * m + i, s, li * m + i, rate, prop_ps)
    ports = {s: L * m for s in spines}
    for u in range(sus):
        on = sum(1 for n in range(N) if n // SU_SLOTS == u)
        ports.update({leaf: on + U for leaf in leaves[u]})
    aggs: tuple[int, ...] = ()
    own: dict[int, int] = {}  # switch -> its aggregators' ports (the switch's own)
    if sharp:
        aggs = _sharp_aggregators(fab, sus, N, leaves, spines, ranks, m, rate, hkw)
        for a in aggs:
            sw = fab.nodes[a].port.peer.node_id
            own[sw] = own.get(sw, 0) + 1
    check_built(fab, ranks + aggs, {x: n + own.get(x, 0) for x, n in ports.items()},
                N * G + L * U + len(aggs), None if sharp else radix)
    if sharp and radix is not None and max(ports.values()) > radix:  # without their own
        raise ValueError(f"a switch needs {max(ports.values())} ports, more than the radix "
                         f"{radix}")
    return SuperPod(fab, spines, leaves, ranks, N, sus, aggregators=aggs)


def _sharp_aggregators(fab: Fabric, sus: int, nodes: int, leaves: tuple[tuple[int, ...], ...],
                       spines: tuple[int, ...], ranks: tuple[int, ...], m: int, rate: int,
                       hkw: Mapping[str, Any]) -> tuple[int, ...]:
    """Add :func:`superpod`'s SHARP aggregation nodes and their routes; returns their host
    ids (leaf aggregators SU by SU, rail by rail, then one root per rail with several SUs)."""
    G, U, S = DGX_GPUS, SUPERPOD_LEAF_UPLINKS, len(spines)
    nxt = max(fab.nodes) + 1
    out: list[int] = []
    # leaf aggregators: on leaf (u, g), port 32 + U; nodes of the SU x rate
    for u in range(sus):
        on = sum(1 for n in range(nodes) if n // SU_SLOTS == u)
        for g in range(G):
            a = nxt + len(out)
            add_aggregator(fab, a, leaves[u][g], SU_SLOTS + U, max(1, on) * rate, hkw)
            fab.names[a] = f"sharp{u}.{g}" if sus > 1 else f"sharp{g}"
            out.append(a)
    roots: list[int] = []
    if sus > 1:
        for g in range(G):
            s = spines[g % S]
            a = nxt + len(out) + len(roots)
            idx = len(fab.nodes[s].ports)  # after the leaf ports (and earlier roots)
            add_aggregator(fab, a, s, idx, sus * rate, hkw)
            fab.names[a] = f"sharp{g}"
            roots.append(a)
    aggs = (*out, *roots)
    # routes: a leaf reaches its own aggregator down, a root only through its spine's links
    # (a spine reaches its roots down, any leaf aggregator through that leaf's links)
    where_leaf = {out[u * G + g]: leaves[u][g] for u in range(sus) for g in range(G)}
    for u in range(sus):
        for g in range(G):
            leaf = fab.nodes[leaves[u][g]]
            routes = dict(leaf.routes)
            for a, lf in where_leaf.items():
                routes[a] = SU_SLOTS + U if lf == leaves[u][g] else tuple(
                    range(SU_SLOTS, SU_SLOTS + U))
            for g2, a in enumerate(roots):
                s = g2 % S
                routes[a] = tuple(SU_SLOTS + s * m + i for i in range(m))
            leaf.set_routes(routes)
    flat = [y for su in leaves for y in su]  # leaf index over the fabric (spine ports)
    for si, s in enumerate(spines):
        sw = fab.nodes[s]
        routes = dict(sw.routes)
        for a, lf in where_leaf.items():
            li = flat.index(lf)
            routes[a] = tuple(li * m + i for i in range(m))
        for g2, a in enumerate(roots):  # another spine's root: down to rail g2's leaf of
            # SU 0, which sends it up to that spine
            routes[a] = fab.nodes[a].port.peer_port if g2 % S == si else tuple(
                g2 * m + i for i in range(m))
        sw.set_routes(routes)
    return aggs

"""Rail-optimised fabrics for collectives: GPU ``i`` of every node on leaf ``i``.

``rail_optimized(nodes, gpus_per_node=8, spines=..., link_gbps=...)`` builds the two-tier
compute fabric of NVIDIA's DGX SuperPOD reference architecture (DGX H100, "rail-optimized"
leaves): each GPU has its own NIC (one rank per host here), NIC ``i`` of every node is cabled
to leaf ``i`` ("rail ``i``"), and every leaf is linked to every spine.  Traffic between GPUs
of the same rail crosses one switch; traffic between rails goes leaf, spine, leaf.  NCCL's
rail rings and PXN (which first moves the data over NVLink to the GPU on the right rail) are
modelled where the collective runs (:mod:`sim.workloads.collective`, with
``gpus_per_node``); a :class:`RailFabric` only says which host is which GPU's NIC.

Node numbering:

* spines are nodes ``0 .. S-1``; leaf (rail) ``i`` is node ``S + i``;
* the NIC of GPU ``g`` of node ``n`` is node ``S + G + n*G + g`` (``G`` = ``gpus_per_node``),
  so :attr:`RailFabric.ranks` lists the hosts node-major (rank ``n*G + g``), the order NCCL
  gives ranks when every node runs its GPUs 0..G-1;
* leaf ports ``0 .. nodes-1`` go down (port ``n`` to node ``n``'s NIC), ports ``nodes ..
  nodes+S-1`` up (port ``nodes+s`` to spine ``s``); spine port ``i`` goes to leaf ``i``;
* with ``sharp``, leaf ``i``'s SHARP aggregation node is host ``S + G + nodes*G + i`` on
  leaf port ``nodes+S`` (:attr:`RailFabric.aggregators`).

SHARP (InfiniBand Quantum switches' in-network reduction, which NCCL uses through CollNet):
each rail's leaf holds every node's NIC of that rail, so the rail's SHARP tree is that one
switch (NVIDIA's NCCL-RDMA-SHARP plugin documentation requires leaves that each hold one
rail).  Its aggregation node is modelled as a host on the leaf whose link carries
``nodes`` x ``link_gbps`` [A: the leaf sums its member ports at their line rate, so the
aggregator never binds before they do; the aggregation latency and reduction rate of
Quantum-2 are not published].  A head's sum goes up its own NIC's link and the result
comes back down it, as SHARP's streaming aggregation moves them; the aggregator's
replies are unicasts to each member.

Routes (static, loop-free): a leaf sends a destination on its own rail down; any other goes
up to the ECMP group of all spines (hashed per flow, :class:`sim.net.switch.Switch`), or with
``ecmp=False`` to spine ``dst % S``.  A spine sends a destination down to its rail's leaf.
Every host pair is checked routable (:func:`sim.fabric.topology.route_problem`) and the
switches' port counts against ``radix`` before the fabric is returned.

The MMU of every switch is one :class:`sim.net.mmu.MmuConfig`: ``buffer_mb`` of shared
buffer, PG 3 lossless with the 802.1Qbb headroom of :func:`sim.net.mmu.headroom_bytes` for a
``cable_m`` link, XOFF at ``xoff_kb`` (static).  ECN, when given, is the switches' RED curve.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sim.fabric.core import Fabric
from sim.fabric.topology import route_problem
from sim.net.mmu import Mmu, MmuConfig, headroom_bytes
from sim.net.switch import EcnConfig, Switch
from sim.trace import Tracer
from sim.units import gbps

__all__ = ["RailFabric", "add_aggregator", "rail_optimized", "collective_star",
           "scale_up_racks", "switch_mmu_config"]

#: The PFC response time the headroom allows for, 1 µs: the scenarios' default
#: (``RESPONSE_PS`` of :mod:`sim.scenarios.common`, not imported: scenarios sit above fabric).
_RESPONSE_PS = 1_000_000


@dataclass(frozen=True, slots=True)
class RailFabric:
    """What :func:`rail_optimized` (or :func:`collective_star`) built."""

    fabric: Fabric
    spines: tuple[int, ...]
    leaves: tuple[int, ...]
    #: host id of every rank, node-major (rank = node * gpus_per_node + gpu)
    ranks: tuple[int, ...]
    nodes: int
    gpus_per_node: int
    #: host id of each rail's SHARP aggregator (``rail_optimized(sharp=True)``), by rail
    aggregators: tuple[int, ...] = ()


def add_aggregator(fab: Fabric, node_id: int, switch: int, port: int, rate_bps: int,
                   host_kw: Mapping[str, Any]) -> None:
    """A SHARP aggregation node as a host on ``switch``'s ``port`` at ``rate_bps``: the
    switch's own, so no cable (no propagation) and no PCIe model (``host_kw`` without its
    ``pcie_*`` and ``rx_*`` keys); its transport settings are the other hosts'."""
    fab.add_host(node_id, rate_bps, **{k: v for k, v in host_kw.items()
                                       if not k.startswith(("pcie_", "rx_"))})
    fab.connect(switch, port, node_id, 0, rate_bps, 0)


def switch_mmu_config(ports: int, link_bps: int, *, buffer_mb: float = 32.0,
                      xoff_kb: float = 256.0, cable_m: int = 10, mtu_bytes: int = 1082
                      ) -> MmuConfig:
    """The MMU of every collective-fabric switch: ``buffer_mb`` (MiB) shared, PG 3 lossless
    with the headroom of a ``cable_m`` link at ``link_bps``, static XOFF ``xoff_kb`` (KiB)."""
    hr = headroom_bytes(link_bps, cable_m, mtu_bytes, _RESPONSE_PS)
    return MmuConfig(buffer_bytes=int(buffer_mb * 2**20), ports=ports, headroom_bytes=hr,
                     xoff_mode="static", xoff_bytes=int(xoff_kb * 1024))


def _positive(**values: int) -> None:
    for name, v in values.items():
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")


def _validate(fab: Fabric, hosts: tuple[int, ...], radix: int | None) -> None:
    for node in fab.nodes.values():
        if isinstance(node, Switch):
            node.check_routes()
            if radix is not None and len(node.ports) > radix:
                raise ValueError(f"switch {node.node_id} needs {len(node.ports)} ports, more "
                                 f"than the radix {radix}")
    memo: dict = {}
    for a in hosts:
        for b in hosts:
            if a != b and (why := route_problem(fab, a, b, memo)):
                raise ValueError(f"host {a} cannot reach host {b}: {why}")


def rail_optimized(nodes: int, gpus_per_node: int = 8, *, spines: int | None = None,
                   link_gbps: float = 400.0, prop_ps: int = 500_000, seed: int = 0,
                   ecmp: bool = True, ecn: EcnConfig | None = None,
                   mmu_config: MmuConfig | None = None, radix: int | None = 64,
                   tracer: Tracer | None = None, host_kw: Mapping[str, Any] | None = None,
                   switch_kw: Mapping[str, Any] | None = None,
                   link_kw: Mapping[str, Any] | None = None,
                   sharp: bool = False) -> RailFabric:
    """A rail-optimised two-tier fabric: ``nodes`` nodes of ``gpus_per_node`` GPUs (one NIC
    each), leaf ``i`` for rail ``i``, ``spines`` spines (default: ``ceil(gpus_per_node / 2)``,
    at least 1), every link ``link_gbps`` with ``prop_ps`` of propagation (500 ns: 100 m of
    fibre at 5 ns/m).  ``radix`` bounds a switch's ports (None: no bound).  ``sharp``: a
    SHARP aggregation node on every leaf (module docstring).  See the module docstring for
    numbering and routes; ``host_kw``/``switch_kw``/``link_kw`` as for
    :func:`sim.fabric.topology.leaf_spine`."""
    S = spines if spines is not None else max(1, -(-gpus_per_node // 2))
    _positive(nodes=nodes, gpus_per_node=gpus_per_node, spines=S)
    if not link_gbps > 0 or link_gbps != link_gbps:
        raise ValueError(f"link_gbps must be > 0, got {link_gbps!r}")
    if nodes * gpus_per_node < 2:
        raise ValueError("a fabric for collectives needs at least 2 GPUs")
    rate = gbps(link_gbps)
    N, G = nodes, gpus_per_node
    A = 1 if sharp else 0  # the aggregator's leaf port
    cfg = mmu_config or switch_mmu_config(max(N + S + A, G), rate)
    if cfg.ports < max(N + S + A, G):
        raise ValueError(f"leaves use {N + S + A} ports and spines {G}; mmu_config.ports is "
                         f"{cfg.ports}")
    hkw, skw = dict(host_kw or {}), dict(switch_kw or {})
    fab = Fabric(seed, tracer, **dict(link_kw or {}))
    spine_ids = tuple(range(S))
    leaf_ids = tuple(S + g for g in range(G))
    host = [[S + G + n * G + g for g in range(G)] for n in range(N)]
    ranks = tuple(h for row in host for h in row)
    uplinks = tuple(N + s for s in range(S))
    # host -> (its rail, its leaf port): the NICs, then each leaf's SHARP aggregator
    where = {host[n][g]: (g, n) for n in range(N) for g in range(G)}
    aggs = tuple(S + G + N * G + g for g in range(G)) if sharp else ()
    where.update({a: (g, N + S) for g, a in enumerate(aggs)})
    fab.names.update({s: f"spine{s}" for s in spine_ids})
    fab.names.update({leaf: f"leaf{g}" for g, leaf in enumerate(leaf_ids)})
    fab.names.update({a: f"sharp{g}" for g, a in enumerate(aggs)})
    for s in spine_ids:
        fab.add_switch(s, Mmu(cfg), routes={d: g for d, (g, _) in where.items()},
                       ecn=ecn, **skw)
    for g, leaf in enumerate(leaf_ids):
        routes: dict = {}
        for d, (g2, port) in where.items():
            routes[d] = port if g2 == g else (uplinks if ecmp else N + d % S)
        fab.add_switch(leaf, Mmu(cfg), routes=routes, ecn=ecn, **skw)
    for g, leaf in enumerate(leaf_ids):
        for n in range(N):
            fab.add_host(host[n][g], rate, **hkw)
            fab.connect(leaf, n, host[n][g], 0, rate, prop_ps)
        for s in spine_ids:
            fab.connect(leaf, N + s, s, g, rate, prop_ps)
        if sharp:  # the leaf's aggregation node: its members' rate together [A]
            add_aggregator(fab, aggs[g], leaf, N + S, N * rate, hkw)
    _validate(fab, ranks + aggs, radix)
    return RailFabric(fab, spine_ids, leaf_ids, ranks, N, G, aggs)


def collective_star(nranks: int, *, gpus_per_node: int = 1, link_gbps: float = 400.0,
                    prop_ps: int = 500_000, seed: int = 0, ecn: EcnConfig | None = None,
                    mmu_config: MmuConfig | None = None, tracer: Tracer | None = None,
                    host_kw: Mapping[str, Any] | None = None,
                    switch_kw: Mapping[str, Any] | None = None,
                    link_kw: Mapping[str, Any] | None = None,
                    host_gbps: Mapping[int, float] | None = None) -> RailFabric:
    """A non-blocking star: one switch (node 0), rank ``r`` on host ``r + 1`` (its port
    ``r + 1``), every link ``link_gbps``; ``host_gbps`` {rank: Gb/s} gives some ranks a
    slower link (both directions), e.g. a degraded cable.  Ranks ``n*G .. n*G+G-1`` are node
    ``n``'s GPUs (``G`` = ``gpus_per_node``, which must divide ``nranks``): each GPU has its
    own NIC on the switch, and the collective runs NVLink inside a node and PXN between
    nodes as on a rail fabric (:mod:`sim.workloads.collective`); 1: every rank its own
    node."""
    _positive(nranks=nranks, gpus_per_node=gpus_per_node)
    if nranks < 2:
        raise ValueError("a fabric for collectives needs at least 2 GPUs")
    if nranks % gpus_per_node:
        raise ValueError(f"gpus_per_node {gpus_per_node} does not divide the {nranks} ranks")
    rate = gbps(link_gbps)
    cfg = mmu_config or switch_mmu_config(nranks + 1, rate)
    fab = Fabric(seed, tracer, **dict(link_kw or {}))
    ranks = tuple(range(1, nranks + 1))
    fab.add_switch(0, Mmu(cfg), routes={h: h for h in ranks}, ecn=ecn, **dict(switch_kw or {}))
    fab.names[0] = "switch"
    slow = dict(host_gbps or {})
    for r, h in enumerate(ranks):
        hr = gbps(slow.get(r, link_gbps))
        fab.add_host(h, hr, **dict(host_kw or {}))
        fab.connect(0, h, h, 0, hr, prop_ps)
    _validate(fab, ranks, None)
    return RailFabric(fab, (), (0,), ranks, nranks // gpus_per_node, gpus_per_node)


def scale_up_racks(nodes: int, gpus_per_node: int = 72, *, rails: int = 4,
                   radix: int = 64, link_gbps: float = 400.0, prop_ps: int = 500_000,
                   seed: int = 0, ecmp: bool = True, ecn: EcnConfig | None = None,
                   mmu_config: MmuConfig | None = None, tracer: Tracer | None = None,
                   host_kw: Mapping[str, Any] | None = None,
                   switch_kw: Mapping[str, Any] | None = None,
                   link_kw: Mapping[str, Any] | None = None) -> RailFabric:
    """NVL72-class racks on a rail-optimised scale-out network: ``nodes`` NVLink domains
    (racks) of ``gpus_per_node`` GPUs, one NIC each; GPU ``g`` is on rail ``g mod rails``
    (its place in a 4-GPU compute tray); each rail's NICs fill leaves of ``radix`` ports
    non-blocking (half down, half up), as evenly as they go; every leaf's ``radix / 2``
    uplinks are spread over the spines (uplink ``u`` to spine ``u mod S``, so a leaf may
    have several parallel links to one spine) and there are as few spines as hold them all
    (``S = ceil(leaves x radix / 2 / radix)``).

    Node numbering: spines ``0 .. S-1``, then the leaves rail by rail, then the NICs
    node-major (rank ``n * G + g``).  Leaf ports ``0 .. d-1`` go down (to its NICs in rank
    order), ``d ..`` up.  Routes: a leaf sends its own NICs' traffic down and everything else
    to the ECMP group of its uplinks (``ecmp=False``: the uplink ``dst mod uplinks``); a
    spine sends to the ECMP group of its links to the destination's leaf.  ``radix`` None is
    refused (the leaves' size needs it)."""
    _positive(nodes=nodes, gpus_per_node=gpus_per_node, rails=rails, radix=radix)
    if radix < 2 or radix % 2:
        raise ValueError(f"radix must be an even number >= 2, got {radix}")
    if rails > gpus_per_node:
        raise ValueError(f"rails ({rails}) must not exceed gpus_per_node ({gpus_per_node})")
    if not link_gbps > 0 or link_gbps != link_gbps:
        raise ValueError(f"link_gbps must be > 0, got {link_gbps!r}")
    N, G = nodes, gpus_per_node
    if N * G < 2:
        raise ValueError("a fabric for collectives needs at least 2 GPUs")
    rate = gbps(link_gbps)
    half = radix // 2
    # each rail's NICs (rank order), cut into leaves of at most `half`, as even as they go
    rail_ranks = [[n * G + g for n in range(N) for g in range(G) if g % rails == r]
                  for r in range(rails)]
    leaf_groups: list[tuple[int, list[int]]] = []  # (rail, ranks on the leaf)
    for r, rr in enumerate(rail_ranks):
        k = -(-len(rr) // half)
        size = -(-len(rr) // k)
        leaf_groups += [(r, rr[i:i + size]) for i in range(0, len(rr), size)]
    L = len(leaf_groups)
    S = max(1, -(-L * half // radix))
    cfg = mmu_config or switch_mmu_config(radix, rate)
    if cfg.ports < radix:
        raise ValueError(f"switches use {radix} ports; mmu_config.ports is {cfg.ports}")
    hkw, skw = dict(host_kw or {}), dict(switch_kw or {})
    fab = Fabric(seed, tracer, **dict(link_kw or {}))
    spine_ids = tuple(range(S))
    leaf_ids = tuple(S + i for i in range(L))
    ranks = tuple(S + L + r for r in range(N * G))
    leaf_of = {ranks[x]: i for i, (_, grp) in enumerate(leaf_groups) for x in grp}
    per_rail: dict[int, int] = {}
    for i, (r, _) in enumerate(leaf_groups):
        j = per_rail[r] = per_rail.get(r, -1) + 1
        fab.names[leaf_ids[i]] = f"leaf{r}" if j == 0 and len(
            [1 for x, _ in leaf_groups if x == r]) == 1 else f"leaf{r}.{j}"
    fab.names.update({s: f"spine{s}" for s in spine_ids})
    # spine s's ports to leaf i: the leaf's uplinks u with u % S == s, numbered leaf by leaf
    spine_ports: dict[tuple[int, int], list[int]] = {}
    nxt = [0] * S
    links = []  # (leaf index, leaf port, spine, spine port)
    for i, (_, grp) in enumerate(leaf_groups):
        d = len(grp)
        for u in range(half):
            s = u % S
            links.append((i, d + u, s, nxt[s]))
            spine_ports.setdefault((s, i), []).append(nxt[s])
            nxt[s] += 1
    if max(nxt) > radix:
        raise ValueError(f"a spine needs {max(nxt)} ports, more than the radix {radix}")
    for s in spine_ids:
        routes = {}
        for h, i in leaf_of.items():
            ports = spine_ports[(s, i)]
            routes[h] = ports[0] if len(ports) == 1 else tuple(ports)
        fab.add_switch(s, Mmu(cfg), routes=routes, ecn=ecn, **skw)
    for i, (_, grp) in enumerate(leaf_groups):
        d = len(grp)
        up = tuple(range(d, d + half))
        down = {ranks[x]: p for p, x in enumerate(grp)}
        routes = {h: down[h] if h in down else (up if ecmp else d + h % half)
                  for h in ranks}
        fab.add_switch(leaf_ids[i], Mmu(cfg), routes=routes, ecn=ecn, **skw)
    for i, (_, grp) in enumerate(leaf_groups):
        for p, x in enumerate(grp):
            fab.add_host(ranks[x], rate, **hkw)
            fab.connect(leaf_ids[i], p, ranks[x], 0, rate, prop_ps)
    for i, lp, s, sp in links:
        fab.connect(leaf_ids[i], lp, s, sp, rate, prop_ps)
    _validate(fab, ranks, radix)
    return RailFabric(fab, spine_ids, leaf_ids, ranks, N, G)

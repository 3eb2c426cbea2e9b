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
  nodes+S-1`` up (port ``nodes+s`` to spine ``s``); spine port ``i`` goes to leaf ``i``.

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

__all__ = ["RailFabric", "rail_optimized", "collective_star", "switch_mmu_config"]

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
                   link_kw: Mapping[str, Any] | None = None) -> RailFabric:
    """A rail-optimised two-tier fabric: ``nodes`` nodes of ``gpus_per_node`` GPUs (one NIC
    each), leaf ``i`` for rail ``i``, ``spines`` spines (default: ``ceil(gpus_per_node / 2)``,
    at least 1), every link ``link_gbps`` with ``prop_ps`` of propagation (500 ns: 100 m of
    fibre at 5 ns/m).  ``radix`` bounds a switch's ports (None: no bound).  See the module
    docstring for numbering and routes; ``host_kw``/``switch_kw``/``link_kw`` as for
    :func:`sim.fabric.topology.leaf_spine`."""
    S = spines if spines is not None else max(1, -(-gpus_per_node // 2))
    _positive(nodes=nodes, gpus_per_node=gpus_per_node, spines=S)
    if not link_gbps > 0 or link_gbps != link_gbps:
        raise ValueError(f"link_gbps must be > 0, got {link_gbps!r}")
    if nodes * gpus_per_node < 2:
        raise ValueError("a fabric for collectives needs at least 2 GPUs")
    rate = gbps(link_gbps)
    N, G = nodes, gpus_per_node
    cfg = mmu_config or switch_mmu_config(max(N + S, G), rate)
    if cfg.ports < max(N + S, G):
        raise ValueError(f"leaves use {N + S} ports and spines {G}; mmu_config.ports is "
                         f"{cfg.ports}")
    hkw, skw = dict(host_kw or {}), dict(switch_kw or {})
    fab = Fabric(seed, tracer, **dict(link_kw or {}))
    spine_ids = tuple(range(S))
    leaf_ids = tuple(S + g for g in range(G))
    host = [[S + G + n * G + g for g in range(G)] for n in range(N)]
    ranks = tuple(h for row in host for h in row)
    uplinks = tuple(N + s for s in range(S))
    fab.names.update({s: f"spine{s}" for s in spine_ids})
    fab.names.update({leaf: f"leaf{g}" for g, leaf in enumerate(leaf_ids)})
    for s in spine_ids:
        fab.add_switch(s, Mmu(cfg), routes={host[n][g]: g for n in range(N) for g in range(G)},
                       ecn=ecn, **skw)
    for g, leaf in enumerate(leaf_ids):
        routes: dict = {}
        for n in range(N):
            for g2 in range(G):
                d = host[n][g2]
                routes[d] = n if g2 == g else (uplinks if ecmp else N + d % S)
        fab.add_switch(leaf, Mmu(cfg), routes=routes, ecn=ecn, **skw)
    for g, leaf in enumerate(leaf_ids):
        for n in range(N):
            fab.add_host(host[n][g], rate, **hkw)
            fab.connect(leaf, n, host[n][g], 0, rate, prop_ps)
        for s in spine_ids:
            fab.connect(leaf, N + s, s, g, rate, prop_ps)
    _validate(fab, ranks, radix)
    return RailFabric(fab, spine_ids, leaf_ids, ranks, N, G)


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

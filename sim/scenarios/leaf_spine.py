"""The ``leaf_spine`` scenario: a two-tier Clos (:func:`sim.fabric.topology.leaf_spine`) carrying a
synthetic traffic pattern (:mod:`sim.workloads.patterns`), optionally with ECMP.

Node numbering is the topology builder's: spines ``0..S-1``, leaves ``S..S+L-1``, hosts after.
Each (src, dst) pair of the pattern is one flow at ``load`` x line rate divided by the number
of flows its source sends (so a source never offers more than ``load`` x its link), in traffic
class 3, for the whole run.  The captured **bottleneck** is leaf 0's first uplink (node ``S``,
port ``hosts_per_leaf``): with the default ``shift`` pattern every flow from leaf 0 crosses
one of its uplinks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.fabric.topology import leaf_spine
from sim.nic.host import Flow
from sim.scenarios.base import Param, Scenario, ScenarioError, TracerSlot, resolve_params
from sim.scenarios.common import (
    TC,
    add_own_flow,
    duration_ps,
    fabric_params,
    fabric_setup,
    frac,
    in_range,
)
from sim.units import gbps, prop_delay_ps
from sim.workloads.patterns import PATTERNS, pairs

__all__ = ["DOC", "PARAMS", "build"]

DOC = "two-tier leaf-spine with a traffic pattern (shift, random, incast, all_to_all), ECMP"



def _pattern(v: str) -> str | None:
    return None if v in PATTERNS else f"must be one of {list(PATTERNS)}"



PARAMS: tuple[Param, ...] = (
    Param("leaves", 2, "number of leaf switches", in_range(1, 32)),
    Param("spines", 2, "number of spine switches", in_range(1, 32)),
    Param("hosts_per_leaf", 4, "hosts under each leaf", in_range(1, 64)),
    Param("ecmp", True, "leaves spread flows over all spines by flow hash (else by "
          "destination)", None),
    Param("pattern", "shift", f"traffic pattern: {', '.join(PATTERNS)}", _pattern),
    Param("load", 1.0, "offered load per source as a fraction of its link rate (0: no "
          "flows, as background=false)", frac),
    *fabric_params(),
)


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    rate = gbps(p["link_gbps"])
    L, S, H = p["leaves"], p["spines"], p["hosts_per_leaf"]
    fs = fabric_setup(p, max(H + S, L), rate)
    cfg, hr, ecn = fs.mmu, fs.headroom_bytes, fs.ecn
    dur = duration_ps(p)
    slot = TracerSlot()
    topo = leaf_spine(L, S, H, rate, prop_delay_ps(p["cable_m"]), cfg, seed=p["seed"],
                      ecn=ecn, tracer=slot, ecmp=p["ecmp"], host_kw=fs.host_kw,
                      switch_kw=fs.switch_kw, link_kw=fs.link_kw)
    pr = pairs(p["pattern"], topo.hosts, p["seed"])
    if not pr:
        raise ScenarioError(f"parameter 'pattern': {p['pattern']!r} gives no flow on "
                            f"{L} leaf/leaves x {H} host(s)")
    per_src: dict[int, int] = {}
    for s, _d in pr:
        per_src[s] = per_src.get(s, 0) + 1
    fab = topo.fabric
    for i, (s, d) in enumerate(pr):
        flow_rate = max(int(rate * p["load"]) // per_src[s], 1)
        add_own_flow(fab, p, Flow(i, s, d, flow_rate, tc=TC, packet_bytes=p["packet_bytes"]))
    fs.apply(fab)
    return Scenario(name="leaf_spine", params=p, seed=p["seed"], duration_ps=dur, fabric=fab,
                    bottleneck=(topo.leaves[0], H), tracer_slot=slot,
                    info={"spines": topo.spines, "leaves": topo.leaves, "hosts": topo.hosts,
                          "headroom_bytes": hr, "rate_bps": rate, "pairs": pr})

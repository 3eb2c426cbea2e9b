"""The ``ring`` scenario: ``switches`` switches in a ring (:func:`sim.fabric.topology.ring`), one or
more hosts each, every host sending to the host ``hops`` switches further clockwise.

With the default clockwise routing each flow crosses ``hops`` ring links, so every ring link carries
``hops`` flows and the buffers of consecutive switches depend on each other in a cycle: the
precondition of a PFC deadlock (Hu et al., "Deadlocks in Datacenter Networks", HotNets 2016).
Whether a run deadlocks follows from the load (``rate_frac``) and the thresholds, not from a script.
Sources stop at ``stop_ms`` (0: never), so a user can watch whether congestion drains. The captured
**bottleneck** is switch 0's clockwise port (port ``hosts_per_switch``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.fabric.topology import ring
from sim.nic.host import Flow
from sim.scenarios.base import Param, Scenario, ScenarioError, TracerSlot, resolve_params
from sim.scenarios.common import (
    TC,
    add_own_flow,
    duration_ps,
    fabric_params,
    fabric_setup,
    in_range,
    nonneg,
    share,
)
from sim.units import gbps, ms_to_ps, prop_delay_ps

__all__ = ["DOC", "PARAMS", "build"]

DOC = "switches in a ring, flows crossing `hops` ring links (cyclic buffer dependency)"




def _routing(v: str) -> str | None:
    return None if v in ("clockwise", "shortest") else "must be 'clockwise' or 'shortest'"


PARAMS: tuple[Param, ...] = (
    Param("switches", 4, "switches in the ring", in_range(2, 64)),
    Param("hosts_per_switch", 1, "hosts on each switch", in_range(1, 16)),
    Param("hops", 2, "ring links each flow crosses (clockwise)", in_range(1, 63)),
    Param("rate_frac", 0.4, "sending rate of every flow as a fraction of line rate (hops x "
          "rate_frac > 1 overloads the ring links: see pfc_deadlock_ring)",
          share),
    Param("routing", "clockwise", "'clockwise' or 'shortest' (shorter direction)", _routing),
    Param("stop_ms", 0.0, "sources stop sending at this time, ms (0: never)", nonneg),
    *fabric_params(),
)


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    N, K, hops = p["switches"], p["hosts_per_switch"], p["hops"]
    if hops >= N:
        raise ScenarioError(f"parameter 'hops': must be < switches ({N}) (got {hops})")
    rate = gbps(p["link_gbps"])
    fs = fabric_setup(p, K + 2, rate)
    cfg, hr, ecn = fs.mmu, fs.headroom_bytes, fs.ecn
    dur = duration_ps(p)
    stop_ps = ms_to_ps(p["stop_ms"]) or None
    slot = TracerSlot()
    topo = ring(N, rate, prop_delay_ps(p["cable_m"]), cfg, hosts_per_switch=K,
                routing=p["routing"], seed=p["seed"], ecn=ecn, tracer=slot,
                host_kw=fs.host_kw, switch_kw=fs.switch_kw, link_kw=fs.link_kw)
    fab = topo.fabric
    flow_rate = max(int(rate * p["rate_frac"]), 1)
    fid = 0
    for s in range(N):
        for k, src in enumerate(topo.hosts[s]):
            dst = topo.hosts[(s + hops) % N][k]
            add_own_flow(fab, p, Flow(fid, src, dst, flow_rate, tc=TC,
                                      packet_bytes=p["packet_bytes"], stop_ps=stop_ps))
            fid += 1
    fs.apply(fab)
    return Scenario(name="ring", params=p, seed=p["seed"], duration_ps=dur, fabric=fab,
                    bottleneck=(topo.switches[0], K), tracer_slot=slot,
                    info={"switches": topo.switches, "hosts": topo.hosts,
                          "headroom_bytes": hr, "rate_bps": rate})

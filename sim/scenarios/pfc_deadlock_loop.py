"""The ``pfc_deadlock_loop`` scenario: a routing loop between two switches, TTL-limited.

Nodes: switch A = node 0, switch B = node 1 (link A port 1 <-> B port 1), source host S =
node 2 on A port 0, destination host D = node 3 on B port 0.  A routes D to B, but B's
(stale) route for D points back to A: a static routing loop A -> B -> A.  Every switch drops
a frame that has already crossed ``ttl`` switches (``Switch.max_hops``, reason
``"ttl_expired"``).  S sends one flow to D at ``rate_frac`` of line rate until ``stop_ms``.

A frame crosses A->B ``ceil(ttl/2)`` times (and B->A ``floor(ttl/2)`` times) before it expires, so
the loop links carry ``ceil(ttl/2) x rate_frac`` of their capacity.  Above 1 the loop cannot carry
what enters it; this is necessary for a deadlock but, with XON decided on the PG's occupancy
(sim/net/mmu.py), not sufficient: each switch resumes its neighbour as soon as its ingress from it
falls to the XON level, so the loop keeps moving (TTL drops at A drain it) up to about 1.2 C
(measured in 2 ms runs, docs/explanation/pfc.md: ttl 16: 0.152 no deadlock, 0.154 deadlock; ttl 8:
0.29 no, 0.295 yes; a run must be long enough for the detector's confirmation after a late onset).
Below 1 the frames simply expire.  The default ``rate_frac`` 0.16 (1.28 C at ttl 16) deadlocks.
Captured **bottleneck**: A's port to B (node 0, port 1).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.fabric import Fabric
from sim.net.mmu import Mmu
from sim.nic.host import Flow
from sim.scenarios.base import Param, Scenario, TracerSlot, resolve_params
from sim.scenarios.common import (
    TC,
    add_own_flow,
    duration_ps,
    in_range,
    mmu_config,
    nonneg,
    param_set,
    rc_kw,
    rc_params,
    roce_only,
    share,
    with_default,
)
from sim.scenarios.pfc_deadlock_ring import DETECTOR_PARAMS, WATCHDOG_PARAMS, attach_tools
from sim.units import gbps, ms_to_ps, prop_delay_ps

__all__ = ["DOC", "PARAMS", "build"]

DOC = "routing loop A->B->A with TTL: deadlocks above about rate_frac*ceil(ttl/2) = 1.2"

A, B, S, D = 0, 1, 2, 3

PARAMS: tuple[Param, ...] = (
    Param("ttl", 16, "hop budget: a frame is dropped after crossing this many switches",
          in_range(1, 255)),
    Param("rate_frac", 0.16, "rate of the looping flow as a fraction of line rate", share),
    Param("stop_ms", 1.0, "the source stops at this time, ms (0: never)", nonneg),
    *param_set("link_gbps", "pfc", "xoff_kb", "buffer_kb", "duration_ms", "seed", "background",
               "cable_m",
               "packet_bytes", "fabric",
               duration_ms=with_default("duration_ms", 2.0)),
    *WATCHDOG_PARAMS,
    *DETECTOR_PARAMS,
    *rc_params(),
)


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    roce_only(p, "a hand-built PFC routing-loop study")
    rate = gbps(p["link_gbps"])
    cfg, hr = mmu_config(p, 2, rate)
    prop = prop_delay_ps(p["cable_m"])
    slot = TracerSlot()
    fab = Fabric(p["seed"], slot)
    a = fab.add_switch(A, Mmu(cfg), routes={S: 0, D: 1})
    b = fab.add_switch(B, Mmu(cfg), routes={S: 1, D: 1})  # D's route loops back to A
    for sw in (a, b):
        sw.max_hops = p["ttl"]
    fab.add_host(S, rate, **rc_kw(p))
    fab.add_host(D, rate, **rc_kw(p))
    fab.connect(A, 0, S, 0, rate, prop)
    fab.connect(B, 0, D, 0, rate, prop)
    fab.connect(A, 1, B, 1, rate, prop)
    stop_ps = ms_to_ps(p["stop_ms"]) or None
    add_own_flow(fab, p, Flow(0, S, D, max(int(rate * p["rate_frac"]), 1), tc=TC,
                      packet_bytes=p["packet_bytes"], stop_ps=stop_ps))
    crossings = -(-p["ttl"] // 2)
    sc = Scenario(name="pfc_deadlock_loop", params=p, seed=p["seed"], duration_ps=duration_ps(p),
                  fabric=fab, bottleneck=(A, 1), tracer_slot=slot,
                  info={"headroom_bytes": hr, "rate_bps": rate, "crossings": crossings,
                        "threshold_rate_frac": 1.0 / crossings})
    return attach_tools(sc, p, deadlock_study=True)

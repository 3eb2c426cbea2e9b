"""The ``pfc_unfairness`` scenario: PFC shares per ingress port, not per flow, and pauses a
victim whose own path is not congested (DCQCN, Zhu et al., SIGCOMM 2015, Sec. 2).

Nodes: bottleneck switch B = node 0, aggregation switch A = node 1, receiver R = node 2 (B
port 2), lone sender L = node 3 (B port 1), victim receiver V = node 4 (B port 3), and the
hosts behind A = nodes 5.. (A ports 0..; A port ``group + 1`` is its uplink to B port 0).

* ``group`` hosts behind A (flows ``0 .. group-1``) and L (flow ``group``) all send to R at
  line rate (fixed rate, no congestion control): 2.4 (a) predicts ~C/2 for L and
  ~C/(2*group) for each flow behind A, because B pauses each *ingress port* in turn and its
  egress to R serves the two ports alike.
* With ``victim = true`` one more host behind A (flow ``group + 1``) sends to V at
  ``victim_frac`` of line rate.  Its path B->V is idle, but it shares A's uplink (and B's
  ingress counter for that port) with the congested flows, so B's pauses of A's uplink stop it
  too: it gets roughly A's uplink share divided among A's senders, far below its demand
  (2.4 (b)).

Captured **bottleneck**: B's port to R (node 0, port 2).
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
    param_set,
    rc_kw,
    rc_params,
    roce_only,
    share,
    with_default,
)
from sim.scenarios.pfc_deadlock_ring import DETECTOR_PARAMS, attach_tools
from sim.units import gbps, prop_delay_ps

__all__ = ["DOC", "PARAMS", "build"]

DOC = "PFC unfairness (per ingress port, not per flow) and a victim flow on an idle path"

B, A, R, L, V = 0, 1, 2, 3, 4

PARAMS: tuple[Param, ...] = (
    Param("group", 3, "senders to R behind aggregation switch A (one ingress port of B)",
          in_range(1, 32)),
    Param("victim", True, "one more host behind A sends to V (idle path)", None),
    Param("victim_frac", 0.5, "the victim flow's rate as a fraction of line rate", share),
    *param_set("link_gbps", "pfc", "xoff_kb", "buffer_kb", "duration_ms", "seed", "background",
               "cable_m",
               "packet_bytes", "fabric",
               duration_ms=with_default("duration_ms", 2.0)),
    *DETECTOR_PARAMS,
    *rc_params(),
)


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    roce_only(p, "a hand-built PFC fairness study (ib_vs_roce has the IB victim case)")
    rate = gbps(p["link_gbps"])
    n = p["group"] + (1 if p["victim"] else 0)
    up = n  # A's uplink port
    cfg, hr = mmu_config(p, max(n + 1, 4), rate)
    prop = prop_delay_ps(p["cable_m"])
    behind = [5 + i for i in range(n)]
    slot = TracerSlot()
    fab = Fabric(p["seed"], slot)
    fab.add_switch(B, Mmu(cfg), routes={R: 2, L: 1, V: 3, **{h: 0 for h in behind}})
    fab.add_switch(A, Mmu(cfg), routes={R: up, L: up, V: up, **{h: i for i, h in
                                                                enumerate(behind)}})
    for h in (R, L, V, *behind):
        fab.add_host(h, rate, **rc_kw(p))
    fab.connect(B, 2, R, 0, rate, prop)
    fab.connect(B, 1, L, 0, rate, prop)
    fab.connect(B, 3, V, 0, rate, prop)
    fab.connect(A, up, B, 0, rate, prop)
    for i, h in enumerate(behind):
        fab.connect(A, i, h, 0, rate, prop)
    pb = p["packet_bytes"]
    roles = {}
    for i in range(p["group"]):
        add_own_flow(fab, p, Flow(i, behind[i], R, rate, tc=TC, packet_bytes=pb))
        roles[i] = "group"
    add_own_flow(fab, p, Flow(p["group"], L, R, rate, tc=TC, packet_bytes=pb))
    roles[p["group"]] = "lone"
    if p["victim"]:
        fid = p["group"] + 1
        add_own_flow(fab, p, Flow(fid, behind[-1], V, max(int(rate * p["victim_frac"]), 1), tc=TC,
                          packet_bytes=pb))
        roles[fid] = "victim"
    sc = Scenario(name="pfc_unfairness", params=p, seed=p["seed"], duration_ps=duration_ps(p),
                  fabric=fab, bottleneck=(B, 2), tracer_slot=slot, captures=[(A, up)],
                  info={"roles": roles, "headroom_bytes": hr, "rate_bps": rate})
    return attach_tools(sc, {**p, "watchdog": False})

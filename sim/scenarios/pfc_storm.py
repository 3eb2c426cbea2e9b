"""The ``pfc_storm`` scenario: a NIC whose receive side stalls pauses the fabric (pause storm).

Two-tier leaf-spine (:func:`sim.fabric.topology.leaf_spine`, static routing: a remote destination
``d`` goes up to spine ``d % spines``).  Host ``i`` of leaf 0 sends one flow (flow id ``i``)
to host ``i`` of the last leaf, and host ``i`` of the last leaf one flow (id
``hosts_per_leaf + i``) back to host ``i`` of leaf 0, each at ``load`` of line rate.  The
**broken NIC** is host 0 of the last leaf (flow 0's destination): from ``stall_ms`` its receive
pipeline stops and it sends PFC PAUSE continuously (:meth:`sim.nic.host.Host.stall_rx`).

What happens (Guo et al., "RDMA over Commodity Ethernet at Scale", SIGCOMM 2016, Sec. 4.3): the last
leaf's port to the broken NIC stops; its queue fills with flow 0's frames; the leaf pauses the spine
port they come from; that spine's queue fills with flow 0's and with the other flows routed through
it (victims) and pauses leaf 0's uplink; leaf 0 pauses the hosts feeding that uplink; flows that
share any paused queue stop, although their own destinations are healthy ("victims").  Flows whose
paths avoid the spreading pauses keep running.

Mitigations: ``watchdog = true`` starts a switch PFC watchdog (:mod:`sim.health.watchdog`) on the
leaves' host-facing ports (``wd_scope = "edge"``, the server-facing queues of Guo et al. 2016,
Sec. 4.3; or ``"all"`` ports of all switches): it drops the stuck queue's frames, the pauses
upstream clear and the victims recover, while flow 0's frames are dropped.  ``nic_watchdog = true``
enables the NIC's pause-storm prevention (stops pausing after ``nic_timeout_ms``: 0.1 ms, mlx5's
"auto" 100 ms scaled by 1/1000 as the switch watchdog's timing; the mlx5 default is 8000 ms).
Captured **bottleneck**: the last leaf's port to the broken NIC.
``info["roles"]`` names each flow ``to_broken``, ``victim`` or ``bystander`` (bystander: its path
shares no queue with flow 0).
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
    frac,
    in_range,
    mmu_config,
    nonneg,
    param_set,
    pos,
    rc_kw,
    rc_params,
    roce_only,
    with_default,
)
from sim.scenarios.pfc_deadlock_ring import DETECTOR_PARAMS, WATCHDOG_PARAMS, attach_tools
from sim.units import gbps, ms_to_ps, prop_delay_ps

__all__ = ["DOC", "PARAMS", "build"]

DOC = "pause storm: a stalled NIC keeps pausing; pauses spread to victims; watchdogs"


def _scope(v: str) -> str | None:
    return None if v in ("edge", "all") else "must be 'edge' or 'all'"


PARAMS: tuple[Param, ...] = (
    Param("leaves", 2, "leaf switches", in_range(2, 16)),
    Param("spines", 2, "spine switches", in_range(1, 16)),
    Param("hosts_per_leaf", 3, "hosts under each leaf", in_range(1, 32)),
    Param("load", 0.4, "rate of every flow as a fraction of line rate (0: no flows, as "
          "background=false)", frac),
    Param("stall_ms", 0.1, "the broken NIC's receive side stalls at this time, ms", nonneg),
    Param("stall_end_ms", 0.0, "the stall ends at this time, ms (0: never)", nonneg),
    Param("nic_watchdog", False, "NIC pause-storm prevention on every host", None),
    Param("nic_timeout_ms", 0.1, "NIC stops pausing after its receive side was stalled "
          "this long, ms (mlx5's 'auto' 100 ms / 1000, as the switch watchdog's timing; "
          "mlx5 default 8000)", pos),
    Param("wd_scope", "edge", "ports the switch watchdog watches: 'edge' (leaf ports to "
          "hosts) or 'all'", _scope),
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
    roce_only(p, "a PFC pause storm needs PFC")
    rate = gbps(p["link_gbps"])
    L, S, H = p["leaves"], p["spines"], p["hosts_per_leaf"]
    cfg, hr = mmu_config(p, max(H + S, L), rate)
    stall_ps = ms_to_ps(p["stall_ms"])
    end_ps = ms_to_ps(p["stall_end_ms"]) or None
    if end_ps is not None and end_ps <= stall_ps:
        raise ScenarioError(f"parameter 'stall_end_ms': must be > stall_ms ({p['stall_ms']}) "
                            f"or 0 (got {p['stall_end_ms']})")
    hkw: dict[str, Any] = {"pause_storm_timeout_ps":
                           ms_to_ps(p["nic_timeout_ms"]) if p["nic_watchdog"] else None,
                           **rc_kw(p)}
    slot = TracerSlot()
    topo = leaf_spine(L, S, H, rate, prop_delay_ps(p["cable_m"]), cfg, seed=p["seed"],
                      tracer=slot, ecmp=False, host_kw=hkw)
    fab = topo.fabric
    first, last = topo.hosts[0], topo.hosts[-1]
    broken = last[0]
    flow_rate = max(int(rate * p["load"]), 1)
    pairs = [(first[i], last[i]) for i in range(H)] + [(last[i], first[i]) for i in range(H)]
    # Queues flow 0 crosses: leaf 0 uplink to spine broken % S, that spine's port down.
    bad_spine = broken % S
    roles = {}
    for fid, (src, dst) in enumerate(pairs):
        add_own_flow(fab, p, Flow(fid, src, dst, flow_rate, tc=TC,
                                  packet_bytes=p["packet_bytes"]))
        if dst == broken:
            roles[fid] = "to_broken"
        elif src in first and dst % S == bad_spine:
            roles[fid] = "victim"  # shares leaf 0's uplink and the spine's downlink
        else:
            roles[fid] = "bystander"
    fab.nodes[broken].stall_rx(stall_ps, end_ps, (TC,))
    sc = Scenario(name="pfc_storm", params=p, seed=p["seed"], duration_ps=duration_ps(p),
                  fabric=fab, bottleneck=(topo.leaves[-1], 0), tracer_slot=slot,
                  captures=[(topo.leaves[0], H + bad_spine)],
                  info={"spines": topo.spines, "leaves": topo.leaves, "hosts": topo.hosts,
                        "broken_host": broken, "roles": roles, "headroom_bytes": hr,
                        "rate_bps": rate, "stall_ps": stall_ps, "stall_end_ps": end_ps})
    wd_ports = None
    if p["wd_scope"] == "edge":
        wd_ports = {s: () for s in topo.spines}
        wd_ports.update({lf: tuple(range(H)) for lf in topo.leaves})
    return attach_tools(sc, p, wd_ports)

"""The ``late_joiner`` scenario: one flow runs alone through a bottleneck, a second starts later at
line rate; with DCQCN the two converge to a fair share (the fluid model of Zhu et al., "ECN or
Delay", CoNEXT 2016, integrated by us, docs/explanation/dcqcn.md "Measured": its asymmetric start,
both within 10 % of C/2 only after ~49 ms with the paper's constants, because alpha's time constant
K/g is 14 ms).

Topology: :func:`sim.fabric.star` with two senders (nodes 1 and 2, switch ports 1 and 2) and
the receiver node 3 on switch port 3, the bottleneck.  Flow 0 (node 1) starts at 0, flow 1
(node 2) at ``join_ms``.  Defaults follow the DCQCN paper's testbed: 40 Gb/s links,
Kmin 5 KB, Kmax 200 KB, Pmax 1 %, the ``paper`` preset; the buffer (12 MB, Trident II's) and
XOFF (1000 KB) are large so that ECN, not PFC, controls the queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.fabric import star
from sim.nic.host import Flow
from sim.scenarios.base import Param, Scenario, ScenarioError, TracerSlot, resolve_params
from sim.scenarios.common import (
    TC,
    add_own_flow,
    duration_ps,
    fabric_params,
    fabric_setup,
    nonneg,
    with_default,
)
from sim.units import gbps, ms_to_ps, prop_delay_ps

__all__ = ["DOC", "PARAMS", "build"]

DOC = "one flow alone, a second joins at join_ms; DCQCN (paper preset) converges to fairness"

PARAMS: tuple[Param, ...] = (
    Param("join_ms", 10.0, "start time of the second flow, ms", nonneg),
    *fabric_params(link_gbps=with_default("link_gbps", 40.0),
                   xoff_kb=with_default("xoff_kb", 1000.0),
                   buffer_kb=with_default("buffer_kb", 12000.0),
                   duration_ms=with_default("duration_ms", 60.0),
                   cc=with_default("cc", "dcqcn")),
)


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    rate = gbps(p["link_gbps"])
    fs = fabric_setup(p, 4, rate)
    cfg, hr, ecn = fs.mmu, fs.headroom_bytes, fs.ecn
    dur = duration_ps(p)
    join_ps = ms_to_ps(p["join_ms"])
    if join_ps >= dur:
        raise ScenarioError(f"parameter 'join_ms': must be < duration_ms ({p['duration_ms']}) "
                            f"(got {p['join_ms']})")
    slot = TracerSlot()
    fab, recv, hosts = star(2, rate, prop_delay_ps(p["cable_m"]), cfg, seed=p["seed"], ecn=ecn,
                            tracer=slot, host_kw=fs.host_kw, switch_kw=fs.switch_kw,
                            link_kw=fs.link_kw)
    add_own_flow(fab, p, Flow(0, hosts[0], recv, rate, tc=TC, packet_bytes=p["packet_bytes"]))
    add_own_flow(fab, p, Flow(1, hosts[1], recv, rate, tc=TC, packet_bytes=p["packet_bytes"],
                      start_ps=join_ps))
    fs.apply(fab)
    return Scenario(name="late_joiner", params=p, seed=p["seed"], duration_ps=dur, fabric=fab,
                    bottleneck=(0, recv), tracer_slot=slot,
                    info={"receiver": recv, "senders": hosts, "headroom_bytes": hr,
                          "rate_bps": rate, "join_ps": join_ps})

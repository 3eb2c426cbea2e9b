"""The ``incast`` scenario: N senders -> one receiver through one switch.

Topology from :func:`sim.fabric.star`: switch node 0, senders nodes 1..N (switch port i), the
receiver node N+1 on switch port N+1, which is the bottleneck.  Every sender runs one flow
(flow id i-1) at line rate in traffic class 3 for the whole run.  With ``pfc`` the class is
lossless (PG 3, headroom from :func:`sim.net.mmu.headroom_bytes`), without it lossy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sim.fabric import star
from sim.nic.host import Flow
from sim.scenarios.base import Param, Scenario, TracerSlot, resolve_params
from sim.scenarios.common import (
    TC,
    add_own_flow,
    duration_ps,
    fabric_params,
    fabric_setup,
    in_range,
)
from sim.units import gbps, prop_delay_ps

__all__ = ["DOC", "PARAMS", "build"]

DOC = "N senders -> one receiver through one switch (PFC, ECN marking, optional DCQCN)"


PARAMS: tuple[Param, ...] = (
    Param("senders", 8, "number of senders (the incast degree)", in_range(1, 254)),
    *fabric_params(),
)


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    rate = gbps(p["link_gbps"])
    n = p["senders"]
    fs = fabric_setup(p, n + 2, rate)
    cfg, hr = fs.mmu, fs.headroom_bytes
    dur = duration_ps(p)
    slot = TracerSlot()
    fab, recv, hosts = star(n, rate, prop_delay_ps(p["cable_m"]), cfg, seed=p["seed"],
                            ecn=fs.ecn, tracer=slot, host_kw=fs.host_kw,
                            switch_kw=fs.switch_kw, link_kw=fs.link_kw)
    for i, h in enumerate(hosts):
        add_own_flow(fab, p, Flow(i, h, recv, rate, tc=TC, packet_bytes=p["packet_bytes"]))
    fs.apply(fab)
    return Scenario(name="incast", params=p, seed=p["seed"], duration_ps=dur,
                    fabric=fab, bottleneck=(0, recv), tracer_slot=slot,
                    info={"receiver": recv, "senders": hosts, "headroom_bytes": hr,
                          "rate_bps": rate})

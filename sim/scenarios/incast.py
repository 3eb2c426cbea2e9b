"""The ``incast`` scenario: N senders -> one receiver through one switch.

Topology from :func:`sim.fabric.star`: switch node 0, senders nodes 1..N (switch port i), the
receiver node N+1 on switch port N+1, which is the bottleneck.  Every sender runs one flow
(flow id i-1) at line rate in traffic class 3 for the whole run.  With ``pfc`` the class is
lossless (PG 3, headroom from :func:`sim.mmu.headroom_bytes`), without it lossy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..fabric import star
from ..host import Flow
from ..mmu import MmuConfig, headroom_bytes
from ..switch import EcnConfig
from ..units import gbps, prop_delay_ps
from . import Param, Scenario, ScenarioError, TracerSlot, resolve_params

__all__ = ["DOC", "PARAMS", "build"]

DOC = "N senders -> one receiver through one switch (PFC, ECN marking, fixed-rate senders)"

KB = 1000  # the *_kb parameters are in units of 1000 bytes
TC = 3
RESPONSE_PS = 1_000_000  # PFC response time used for the headroom (1 us)
CC_LATER = ("dcqcn",)


def _pos(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def _nonneg(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


def _senders(v: int) -> str | None:
    return None if 1 <= v <= 254 else "must be in 1..254"


def _pmax(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be in [0, 1]"


def _packet(v: int) -> str | None:
    return None if 64 <= v <= 9216 else "must be in 64..9216 (frame bytes without FCS)"


def _cc(v: str) -> str | None:
    if v == "none":
        return None
    if v in CC_LATER:
        return f"{v!r} is not implemented yet; only 'none' is available"
    return "must be 'none' (fixed-rate senders)"


def _rate(v: float) -> str | None:
    if v <= 0:
        return "must be > 0"
    try:
        gbps(v)
    except ValueError as e:
        return str(e)
    return None


PARAMS: tuple[Param, ...] = (
    Param("senders", 8, "number of senders (the incast degree)", _senders),
    Param("link_gbps", 100.0, "rate of every link, Gb/s", _rate),
    Param("pfc", True, "PFC on traffic class 3 (lossless) or lossy", None),
    Param("xoff_kb", 20.0, "static XOFF threshold per (ingress port, PG) on shared use, KB",
          _pos),
    Param("buffer_kb", 1000.0, "switch shared buffer, KB (1 KB = 1000 bytes)", _pos),
    Param("duration_ms", 1.0, "simulated time, ms", _pos),
    Param("cc", "none", "congestion control: 'none' ('dcqcn' comes later)", _cc),
    Param("seed", 0, "RNG seed (ECN marking draws); --seed overrides", _nonneg),
    Param("kmin_kb", 5.0, "ECN: marking starts above this egress queue depth, KB", _nonneg),
    Param("kmax_kb", 200.0, "ECN: marking probability reaches pmax here, KB", _nonneg),
    Param("pmax", 0.01, "ECN: marking probability at kmax (0 disables marking)", _pmax),
    Param("cable_m", 10, "cable length of every link, m (propagation 5 ns/m)", _nonneg),
    Param("packet_bytes", 1082, "data frame size, bytes without FCS (1024 B payload RoCEv2)",
          _packet),
)


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    if p["kmin_kb"] > p["kmax_kb"]:
        raise ScenarioError(f"parameter 'kmin_kb': must be <= kmax_kb ({p['kmax_kb']}) "
                            f"(got {p['kmin_kb']})")
    rate = gbps(p["link_gbps"])
    n = p["senders"]
    pfc = p["pfc"]
    xoff = round(p["xoff_kb"] * KB)
    buf = round(p["buffer_kb"] * KB)
    hr = headroom_bytes(rate, p["cable_m"], p["packet_bytes"], RESPONSE_PS) if pfc else 0
    need = (n + 2) * (2000 + hr) + xoff
    if buf < need:
        raise ScenarioError(f"parameter 'buffer_kb': {p['buffer_kb']} KB is too small for "
                            f"{n} senders: reserve, headroom and one XOFF threshold need "
                            f"{need / KB:g} KB")
    try:
        cfg = MmuConfig(buffer_bytes=buf, ports=n + 2, reserved_bytes=2000,
                        headroom_bytes=hr, lossless_pgs=frozenset({TC}) if pfc else frozenset(),
                        xoff_mode="static", xoff_bytes=xoff, xon_delta_bytes=2000)
    except ValueError as e:
        raise ScenarioError(f"parameter 'buffer_kb'/'xoff_kb': {e}") from None
    ecn = None
    if p["pmax"] > 0:
        ecn = EcnConfig(kmin_bytes=round(p["kmin_kb"] * KB), kmax_bytes=round(p["kmax_kb"] * KB),
                        pmax=p["pmax"])
    duration_ps = round(p["duration_ms"] * 10**9)
    if duration_ps <= 0:
        raise ScenarioError("parameter 'duration_ms': must be at least 1 ps")
    slot = TracerSlot()
    fab, recv, hosts = star(n, rate, prop_delay_ps(p["cable_m"]), cfg, seed=p["seed"], ecn=ecn,
                            tracer=slot)
    for i, h in enumerate(hosts):
        fab.add_flow(Flow(i, h, recv, rate, tc=TC, packet_bytes=p["packet_bytes"]))
    return Scenario(name="incast", params=p, seed=p["seed"], duration_ps=duration_ps,
                    fabric=fab, bottleneck=(0, recv), tracer_slot=slot,
                    info={"receiver": recv, "senders": hosts, "headroom_bytes": hr,
                          "rate_bps": rate})

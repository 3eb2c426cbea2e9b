"""Parameters and builders shared by the built-in scenarios and scenario files.

Every built-in takes the same fabric-wide knobs (link rate, cable, PFC, buffer, thresholds, ECN,
congestion control, duration, seed); they are declared once here (:data:`FABRIC_PARAMS`) and
turned into simulator objects by one set of functions (:func:`mmu_config`, :func:`ecn_config`,
:func:`host_kw`, :func:`duration_ps`), so ``incast``, ``leaf_spine``, ``ring`` and a TOML
fabric description cannot drift apart.  1 KB = 1000 bytes in every ``*_kb`` parameter.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from sim.net.mmu import MmuConfig, headroom_bytes
from sim.net.switch import EcnConfig
from sim.scenarios.base import (
    PAYLOAD_BYTES,
    AutoBoolParam,
    Param,
    ScenarioError,
    stack_defaults,
)
from sim.units import BYTES_PER_KB, gbps, kb_to_bytes, ms_to_ps, quantity_problem, us_to_ps
from wire.linkstack import IB, ROCE, HeaderStack

__all__ = ["KB", "TC", "RESPONSE_PS", "RESERVED_BYTES", "XON_DELTA_BYTES", "FABRIC_PARAMS",
           "BUFFER_BYTES_PER_GBPS", "DCQCN_KMAX_KB", "default_buffer_bytes", "kmax_kb",
           "cc_params", "check_cc", "duration_ps", "ecn_config", "host_kw", "mmu_config",
           "param_set", "parse_cc_opts", "fabric_params", "FABRIC_NAMES", "with_default",
           "add_own_flow",
           "pos", "nonneg", "frac", "rate_check", "share", "in_range", "PCIE_NAMES",
           "pcie_params", "pcie_kw", "collective_params", "rc_params", "rc_kw", "FABRICS",
           "IB_NAMES", "FabricSetup", "header_stack", "collective_packet", "PAYLOAD_BYTES",
           "stack_defaults",
           "fabric_setup", "ib_vl_buffer_bytes", "roce_only", "FAULT_KINDS", "FAULT_KIND_KEYS",
           "FAULT_PARAMS",
           "REROUTE_PARAMS", "FaultPlan", "add_faults", "apply_faults", "check_stragglers",
           "collect_params", "fault_entries", "is_fault_key", "parse_fault", "resolve_faults",
           "split_fault_params", "straggler_delays"]

KB = BYTES_PER_KB
#: The lossless data class of the built-ins (RoCEv2 data on priority 3: the HPCC simulator's
#: lossless priority, ``simulation/mix/flow.txt`` puts every flow on pg 3,
#: github.com/alibaba-edu/High-Precision-Congestion-Control; also the priority that ConnectX
#: deployment guides make lossless, ``mlnx_qos --pfc 0,0,0,1,0,0,0,0``: secondary sources).
TC = 3
#: PFC response time assumed by the headroom formula ([A] 1 us: 802.1Qbb allows ~2 us at 100G,
#: 201728 bit times, as besthub.dev "How to Compute Headroom ... Part 2" gives it;
#: docs/explanation/switch-buffer.md, "Headroom").
RESPONSE_PS = 1_000_000
#: Guaranteed minimum per (ingress port, PG), every PG (assumption: about two 1 KB frames).
RESERVED_BYTES = 2000
#: XON hysteresis below the XOFF threshold (HPCC's resume offset is 3 KB; 2 KB here so a
#: 1082-byte frame stream resumes after two frames drain; assumption, overridable in files).
XON_DELTA_BYTES = 2000
#: Shared buffer per Gb/s of switch capacity (ports x port rate) when ``buffer_kb`` is 0, the
#: default [fitted]: a shallow-buffer data-centre switch ASIC's buffer grows with its
#: bandwidth, about 40 us of it.  Buffer / capacity of published parts: Broadcom Tomahawk 2
#: 42 MB / 6.4 Tb/s (6.6 KB per Gb/s), Tomahawk 3 64 MB / 12.8 Tb/s (5.0), Tomahawk 4
#: 113 MB / 25.6 Tb/s (4.4); NVIDIA Spectrum-2 42 MB / 6.4 Tb/s (6.6), Spectrum-3 64 MB /
#: 12.8 Tb/s (5.0), Spectrum-4 160 MB / 51.2 Tb/s (3.1): the median, 5.0 KB per Gb/s
#: (docs/reference/builtin-scenarios.md, "The switch buffer").
BUFFER_BYTES_PER_GBPS = 5000
#: DCQCN's ECN Kmax at the congestion point, KB (Zhu et al., SIGCOMM 2015: Kmin 5 KB, Kmax
#: 200 KB, Pmax 1 %): the default ``kmax_kb`` unless the static XOFF is lower (:func:`kmax_kb`).
DCQCN_KMAX_KB = 200.0


def pos(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def nonneg(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 0"


def frac(v: float) -> str | None:
    return None if 0.0 <= v <= 1.0 else "must be in [0, 1]"


def share(v: float) -> str | None:
    return None if 0.0 < v <= 1.0 else "must be in (0, 1]"


def in_range(lo: int, hi: int) -> Callable[[int], str | None]:
    """A check: an int in lo..hi."""
    def check(v: int) -> str | None:
        return None if lo <= v <= hi else f"must be in {lo}..{hi}"
    return check


def rate_check(v: float) -> str | None:
    if v <= 0:
        return "must be > 0"
    try:
        gbps(v)
    except ValueError as e:
        return str(e)
    return None


def _packet(v: int) -> str | None:
    return None if 64 <= v <= 9216 else "must be in 64..9216 (frame bytes without FCS)"


def _pcie_gen(v: int) -> str | None:
    from sim.nic.pcie import GT_PER_S

    return None if v == 0 or v in GT_PER_S else f"must be 0 (no PCIe model) or 1..{max(GT_PER_S)}"


def _pcie_lanes(v: int) -> str | None:
    from sim.nic.pcie import LANES

    return None if v in LANES else f"must be one of {', '.join(map(str, LANES))}"


def _pcie_mps(v: int) -> str | None:
    from sim.nic.pcie import SIZES

    return None if v in SIZES else f"must be one of {', '.join(map(str, SIZES))}"


#: The whole-fabric choices of the ``fabric`` parameter (docs/explanation/infiniband.md).
FABRICS = ("roce", "ib")


def _fabric(v: str) -> str | None:
    return None if v in FABRICS else f"must be one of {list(FABRICS)}"


def _ib_routing(v: str) -> str | None:
    return None if v in ("", "static", "updn", "adaptive") else \
        "must be '', 'static', 'updn' or 'adaptive'"


def _kmax(v: float) -> str | None:
    return None if v >= 0 or v == -1 else "must be >= 0, or -1 (the default: derived)"


def check_cc(v: str) -> str | None:
    """'none' (fixed-rate senders) or a registered :mod:`sim.cc` algorithm."""
    from sim import cc

    if v == "none" or v in cc.names():
        return None
    return f"must be 'none' or one of {cc.names()}"


#: name -> Param; a scenario picks the ones it takes with :func:`param_set`.
FABRIC_PARAMS: dict[str, Param] = {p.name: p for p in (
    Param("link_gbps", 100.0, "rate of every link, Gb/s", rate_check),
    Param("pfc", True, "PFC on traffic class 3 (lossless) or lossy", None),
    Param("xoff_kb", 20.0, "static XOFF threshold per (ingress port, PG) on shared use, KB", pos),
    Param("buffer_kb", 0.0, "switch shared buffer, KB (1 KB = 1000 bytes); 0: ports x port "
          "rate x 5 KB per Gb/s, at least what the reserves, headroom and XOFF need",
          nonneg),
    Param("duration_ms", 1.0, "simulated time, ms", pos),
    Param("cc", "none", "sender congestion control: 'none' (fixed rate) or a sim.cc name",
          check_cc),
    Param("seed", 0, "RNG seed (ECN marking draws); --seed overrides", nonneg),
    Param("background", True, "the scenario's own flows; false: none (a --pcap replayed "
          "alone through the scenario's fabric)", None),
    Param("kmin_kb", 5.0, "ECN: marking starts above this egress queue depth, KB", nonneg),
    Param("kmax_kb", -1.0, "ECN: marking probability reaches pmax here, every frame above, "
          "KB; -1: 200 (DCQCN's Kmax) or the static xoff_kb if lower, so that ECN marks "
          "every frame before PFC pauses", _kmax),
    Param("pmax", 0.01, "ECN: marking probability at kmax (0 disables marking)", frac),
    Param("cable_m", 10, "cable length of every link, m (propagation 5 ns/m)", nonneg),
    Param("packet_bytes", 1082, "data frame size, bytes without FCS (1024 B payload with "
          "RoCEv2 headers; with fabric=ib the default is 1050, 1024 B with IB headers)",
          _packet),
    # The GPU-NIC PCIe link (sim.nic.pcie, sim.nic.host "PCIe"): off (0) unless asked for.
    Param("pcie_gen", 0, "GPU-NIC PCIe generation 1..6: the NIC writes what it receives and "
          "reads what it sends over it (0: no PCIe model, line rate both ways)", _pcie_gen),
    Param("pcie_lanes", 16, "PCIe lanes of the NIC (with pcie_gen)", _pcie_lanes),
    Param("pcie_mps_bytes", 256, "PCIe Max Payload Size, bytes (with pcie_gen)", _pcie_mps),
    Param("nic_rx_buffer_kb", 2048.0, "NIC receive buffer, KB, drained over PCIe; PFC "
          "pauses at buffer - headroom (with pcie_gen)", pos),
    # The whole-fabric link layer (fabric_setup): RoCE as before, or InfiniBand.
    Param("fabric", "roce", "link layer of the whole fabric: roce (PFC + ECN + the hosts' cc) "
          "| ib (IBA per-VL credits + VL arbitration, no PFC; docs/explanation/infiniband.md)",
          _fabric),
    Param("vl_buffer_kb", 0.0, "fabric=ib: receive buffer per data VL per link, KB (0: the "
          "switch buffer split evenly over its ports' 8 data VLs after the reserves)", nonneg),
    Param("ib_routing", "", "fabric=ib: '' (the scenario's own tables) | static (OpenSM "
          "min-hop LFT) | updn (OpenSM up/down LFT, the top tier its roots) | adaptive (per "
          "packet, the least queued minimal port; sim.fabric.lft)", _ib_routing),
)}

#: The link-layer parameters of :func:`fabric_setup` (in :func:`fabric_params`).
IB_NAMES = ("fabric", "vl_buffer_kb", "ib_routing")

#: The PCIe parameters (not in :data:`FABRIC_NAMES`: the built-ins run without PCIe).
PCIE_NAMES = ("pcie_gen", "pcie_lanes", "pcie_mps_bytes", "nic_rx_buffer_kb")


#: The fabric-wide parameters every built-in takes, in listing order.
FABRIC_NAMES = ("link_gbps", "pfc", "xoff_kb", "buffer_kb", "duration_ms", "cc", "seed",
                "kmin_kb", "kmax_kb", "pmax", "cable_m", "packet_bytes", "background")


def pcie_params(gen: int = 0) -> tuple[Param, ...]:
    """The PCIe parameters (:data:`PCIE_NAMES`), ``pcie_gen`` defaulting to ``gen``."""
    return (with_default("pcie_gen", gen), *param_set(*PCIE_NAMES[1:]))


def fabric_params(**overrides: Param) -> tuple[Param, ...]:
    """Every fabric-wide parameter (:data:`FABRIC_NAMES`), the congestion-control knobs
    (:func:`cc_params`) and the RC transport's (:func:`rc_params`), with some replaced
    (``overrides[name]``, e.g. another default)."""
    return (*param_set(*FABRIC_NAMES, *IB_NAMES, **overrides), *cc_params(), *rc_params())


def with_default(name: str, value: Any) -> Param:
    """The shared parameter ``name`` with another default (same doc and check)."""
    import dataclasses

    return dataclasses.replace(FABRIC_PARAMS[name], default=value)


def param_set(*names: str, **overrides: Param) -> tuple[Param, ...]:
    """The shared :class:`Param` objects called ``names`` (in that order), with replacements
    for some (``overrides[name]``, e.g. a different default)."""
    return tuple(overrides.get(n, FABRIC_PARAMS[n]) for n in names)


def add_own_flow(fabric: Any, p: Mapping[str, Any], flow: Any) -> None:
    """Add one of a built-in scenario's own flows to ``fabric``, unless ``p["background"]`` is
    false or its ``load`` (if it has one) is 0: the fabric then carries only what is replayed
    into it (``--pcap``)."""
    if p.get("background", True) and p.get("load", 1) > 0:
        fabric.add_flow(flow)


def duration_ps(p: Mapping[str, Any]) -> int:
    d = ms_to_ps(p["duration_ms"])
    if d <= 0:
        raise ScenarioError("parameter 'duration_ms': must be at least 1 ps")
    return d


def kmax_kb(p: Mapping[str, Any]) -> float:
    """The ECN Kmax of ``p``, KB: ``kmax_kb``, or for -1 (the default) :data:`DCQCN_KMAX_KB`
    or the static XOFF threshold ``xoff_kb`` when that is lower, and at least ``kmin_kb``.

    ECN must act before PFC (DCQCN, Zhu et al., SIGCOMM 2015): an egress queue fed by one
    ingress reaches Kmax, where every frame is marked, no later than that ingress reaches
    XOFF.  The paper's 200 KB assumed a PFC threshold far above it (its switches' dynamic
    thresholds on a 12 MB buffer); under a static XOFF of 20 KB, PFC acts first and DCQCN
    sees almost no marks."""
    k = p.get("kmax_kb", -1.0)
    if k >= 0:
        return k
    k = DCQCN_KMAX_KB
    if p.get("xoff_mode", "static") == "static" and "xoff_kb" in p:
        k = min(k, p["xoff_kb"])
    return max(k, p["kmin_kb"])


def ecn_config(p: Mapping[str, Any]) -> EcnConfig | None:
    """RED/DCQCN-CP marking from kmin_kb/kmax_kb (:func:`kmax_kb`)/pmax (None when pmax is
    0); with ``cc = "ibcc"`` the IB switch marking (:func:`ib_ecn_config`) instead."""
    if p.get("cc") == "ibcc":
        return ib_ecn_config(p)
    kmax = kmax_kb(p)
    if p["kmin_kb"] > kmax:
        raise ScenarioError(f"parameter 'kmin_kb': must be <= kmax_kb ({kmax}) "
                            f"(got {p['kmin_kb']})")
    if p["pmax"] <= 0:
        return None
    return EcnConfig(kmin_bytes=kb_to_bytes(p["kmin_kb"]), kmax_bytes=kb_to_bytes(kmax),
                     pmax=p["pmax"], mark_at=p.get("mark_at", "dequeue"))


def ib_ecn_config(p: Mapping[str, Any]) -> EcnConfig | None:
    """IBA annex A10 switch marking (``EcnConfig(mode="ib")``) from the switch keys of
    ``cc_opts`` (:data:`sim.cc.ibcc.SWITCH_PARAMS`: ``threshold`` 0..15, ``marking_rate``,
    ``packet_size`` in 64-byte credits; defaults :data:`sim.cc.ibcc.SWITCH_DEFAULTS`).
    None when ``threshold`` is 0 (no marking)."""
    from sim.cc.ibcc import split_switch_params
    from sim.net.switch import IB_CREDIT_BYTES, ib_threshold_bytes

    try:
        _, sw = split_switch_params(parse_cc_opts(p.get("cc_opts", "")))
    except ValueError as e:
        raise ScenarioError(f"parameter 'cc_opts': {e}") from None
    at = ib_threshold_bytes(sw["threshold"])
    if at is None:
        return None
    return EcnConfig(mode="ib", threshold_bytes=at, marking_rate=sw["marking_rate"],
                     packet_size_bytes=sw["packet_size"] * IB_CREDIT_BYTES,
                     mark_at=p.get("mark_at", "dequeue"))


def default_buffer_bytes(ports: int, rate_bps: int, need_bytes: int = 0) -> int:
    """The switch buffer of ``buffer_kb = 0``: ``ports`` x ``rate_bps`` (the fastest port) x
    :data:`BUFFER_BYTES_PER_GBPS`, at least ``need_bytes`` (what the reserves, headroom and
    thresholds need), rounded up to whole KB."""
    b = max(-(-ports * rate_bps * BUFFER_BYTES_PER_GBPS // 10**9), need_bytes)
    return -(-b // KB) * KB


def mmu_config(p: Mapping[str, Any], ports: int, rate_bps: int) -> tuple[MmuConfig, int]:
    """(MmuConfig for switches with ``ports`` ports, headroom bytes per lossless PG).

    PFC on traffic class 3 with headroom from :func:`sim.net.mmu.headroom_bytes` (cable_m,
    packet_bytes, :data:`RESPONSE_PS`) when ``p['pfc']``, else every class lossy.  Scenario
    files may also give ``lossless_tcs``, ``xoff_mode``/``alpha``, ``xon_delta_kb``,
    ``reserved_kb``, ``headroom_kb`` (-1: the formula), ``response_us``.  ``buffer_kb`` 0
    is :func:`default_buffer_bytes`, at least the reserves, the headroom and a static XOFF
    threshold of every port; a buffer given too small for the reserves, the headroom and one
    XOFF threshold is a ScenarioError naming ``buffer_kb``.
    """
    from fractions import Fraction

    pfc = p["pfc"]
    xoff = kb_to_bytes(p["xoff_kb"])
    reserved = kb_to_bytes(p.get("reserved_kb", RESERVED_BYTES / KB))
    response_ps = us_to_ps(p.get("response_us", RESPONSE_PS / 10**6))
    lossless = frozenset(p.get("lossless_tcs", (TC,))) if pfc else frozenset()
    hr_kb = p.get("headroom_kb", -1.0)
    if not pfc:
        hr = 0
    elif hr_kb < 0:
        hr = headroom_bytes(rate_bps, p["cable_m"], p["packet_bytes"], response_ps)
    else:
        hr = kb_to_bytes(hr_kb)
    mode = p.get("xoff_mode", "static")
    per_port = 8 * reserved + len(lossless) * hr
    need = ports * per_port + (xoff if mode == "static" else 0)
    # the derived buffer also holds a static XOFF threshold on every port, so that the
    # thresholds, not a full pool, decide when to pause (or drop)
    buf = (kb_to_bytes(p["buffer_kb"]) if p["buffer_kb"] else default_buffer_bytes(
        ports, rate_bps, ports * (per_port + (xoff if mode == "static" else 0))))
    if buf < need:
        raise ScenarioError(f"parameter 'buffer_kb': {p['buffer_kb']} KB is too small for "
                            f"switches of {ports} ports: reserves, headroom and one XOFF "
                            f"threshold need {need / KB:g} KB")
    try:
        cfg = MmuConfig(buffer_bytes=buf, ports=ports, reserved_bytes=reserved,
                        headroom_bytes=hr, lossless_pgs=lossless, xoff_mode=mode,
                        xoff_bytes=xoff, alpha=Fraction(p.get("alpha", "1/8")),
                        xon_delta_bytes=kb_to_bytes(p.get("xon_delta_kb",
                                                          XON_DELTA_BYTES / KB)))
    except ValueError as e:
        raise ScenarioError(f"parameter 'buffer_kb'/'xoff_kb': {e}") from None
    return cfg, hr


def _opts(v: str) -> str | None:
    try:
        parse_cc_opts(v)
    except ValueError as e:
        return str(e)
    return None


def cc_params() -> tuple[Param, ...]:
    """The congestion-control knobs beside ``cc``: a preset and per-parameter overrides."""
    return (
        Param("preset", "", "congestion-control preset (dcqcn: paper, nvidia, hpcc; ibcc: "
              "mellanox, linear); '' = the algorithm's default", None),
        Param("cc_opts", "", "congestion-control overrides, 'NAME=VALUE,...' with the "
              "algorithm's parameter names (units in the names)", _opts),
    )


def parse_cc_opts(text: str) -> dict[str, Any]:
    """``"g=0.0625, rai_bps=5000000"`` -> {"g": 0.0625, "rai_bps": 5000000} (TOML values)."""
    from sim.scenarios.base import parse_text

    out: dict[str, Any] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected NAME=VALUE, got {item!r}")
        name, v = key.strip(), parse_text(value.strip())
        why = quantity_problem(name, v)  # the parameters' finiteness/range rule
        if why:
            raise ValueError(f"{name}: {why} (got {v!r})")
        out[name] = v
    return out


def host_kw(p: Mapping[str, Any], line_rate_bps: int | None = None) -> dict[str, Any]:
    """Keyword arguments of :class:`sim.nic.host.Host` for the scenario's congestion control.

    With ``line_rate_bps`` the algorithm is instantiated once here, so a bad preset or
    override is a ScenarioError naming ``preset``/``cc_opts`` before anything runs.
    """
    from sim import cc as cc_registry

    name = p["cc"]
    if name == "none":
        for key in ("preset", "cc_opts"):
            if p.get(key):
                raise ScenarioError(f"parameter {key!r}: needs a congestion control (cc is "
                                    f"'none')")
        return {**pcie_kw(p, line_rate_bps), **rc_kw(p)}
    params: dict[str, Any] = parse_cc_opts(p.get("cc_opts", ""))
    if name == "ibcc":  # the switch keys of cc_opts go to ecn_config, not to the hosts
        from sim.cc.ibcc import split_switch_params

        try:
            params = split_switch_params(params)[0]
        except ValueError as e:
            raise ScenarioError(f"parameter 'cc_opts': {e}") from None
    if p.get("preset"):
        params["preset"] = p["preset"]
    if line_rate_bps is not None:
        try:
            cc_registry.create(name, line_rate_bps=line_rate_bps, **params)
        except (TypeError, ValueError) as e:
            key = "preset" if "preset" in str(e) else "cc_opts"
            raise ScenarioError(f"parameter {key!r}: {e}") from None
    kw: dict[str, Any] = {"cc": name}
    if params:
        kw["cc_params"] = params
    if name == "ibcc":
        # IBA A10: a BECN for every FECN (docs/explanation/infiniband.md, "Congestion control")
        kw["cnp_interval_ps"] = 0
    kw.update(pcie_kw(p, line_rate_bps))
    kw.update(rc_kw(p))
    return kw


def pcie_kw(p: Mapping[str, Any], line_rate_bps: int | None = None) -> dict[str, Any]:
    """:class:`sim.nic.host.Host` keyword arguments of the PCIe model ({} when ``pcie_gen``
    is 0 or absent): write and read rates of :class:`sim.nic.pcie.PcieLink`, the receive
    buffer, the priorities the NIC pauses (``lossless_tcs`` or TC 3 with ``pfc``, none
    without) and the MTU of its thresholds (``packet_bytes``).  With ``line_rate_bps`` a
    buffer too small for the PFC headroom of the link (propagation ``prop_ns``, else
    ``cable_m``) is a ScenarioError naming ``nic_rx_buffer_kb``."""
    from sim.nic.host import rx_thresholds
    from sim.nic.pcie import PcieLink
    from sim.units import prop_delay_ps

    gen = p.get("pcie_gen", 0)
    if not gen:
        return {}
    try:
        link = PcieLink(gen, p.get("pcie_lanes", 16), p.get("pcie_mps_bytes", 256))
    except ValueError as e:
        raise ScenarioError(f"parameter 'pcie_gen'/'pcie_lanes'/'pcie_mps_bytes': {e}") \
            from None
    buf = kb_to_bytes(p.get("nic_rx_buffer_kb", FABRIC_PARAMS["nic_rx_buffer_kb"].default))
    tcs = tuple(p.get("lossless_tcs", (TC,))) if p.get("pfc", True) else ()
    mtu = _packet_bytes(p)
    if line_rate_bps is not None and tcs:
        prop_ps = (round(p["prop_ns"] * 1000) if "prop_ns" in p
                   else prop_delay_ps(p.get("cable_m", 0)))
        try:
            rx_thresholds(buf, line_rate_bps, prop_ps, mtu)
        except ValueError as e:
            raise ScenarioError(f"parameter 'nic_rx_buffer_kb': {p.get('nic_rx_buffer_kb')} "
                                f"KB: {e}") from None
    return {"pcie_write_bps": link.write_bps(), "pcie_read_bps": link.read_bps(),
            "rx_buffer_bytes": buf, "rx_pause_tcs": tcs, "rx_mtu_bytes": mtu,
            "pcie_header_bytes": header_stack(p).header_bytes}


def collective_params() -> tuple[Param, ...]:
    """The ``-p`` parameters of ``lossless collective`` (:mod:`sim.scenarios.collective`; here
    so that fabric files' ``[[collective]]`` entries use them without importing that module):
    the fabric-wide ones of the scenarios (same names, checks and
    units, :data:`sim.scenarios.common.FABRIC_PARAMS`) with collective defaults, and the
    shape of the fabric."""
    from sim.fabric.fattree import k_problem, sus_problem
    from sim.workloads.tuner import PRESETS

    return (
        Param("nodes", 2, "nodes (servers)", in_range(1, 1024)),
        Param("gpus_per_node", 4, "GPUs per node (an NVLink domain), one NIC each (rail: "
              "one leaf per GPU; nvl72: 72 with -p hw=gb200-nvl72, the default there)",
              in_range(1, 72)),
        Param("rails", 4, "nvl72: scale-out rails, GPU g on rail g mod rails (its place in "
              "a 4-GPU compute tray)", in_range(1, 72)),
        Param("radix", 64, "nvl72: ports per switch; leaves non-blocking, half down, half up "
              "(64: Quantum-2 at 400G; 144: Quantum-X800 at 800G)", in_range(4, 512)),
        Param("spines", 0, "rail: spine switches (0: half the GPUs per node, at least 1)",
              in_range(0, 256)),
        Param("ecmp", True, "rail, fattree, superpod: hash flows over all uplinks (false: "
              "an uplink chosen by destination)", None),
        Param("k", 4, "fattree: switch radix k (even): k pods, (k/2)^2 cores",
              k_problem),
        Param("oversubscription", 1, "fattree: hosts per edge switch over its k/2 uplinks",
              in_range(1, 8)),
        Param("sus", 1, "superpod: DGX H100 scalable units (1, 2, 4 or 8)",
              sus_problem),
        Param("superpod_nodes", 0, "superpod: DGX nodes populated (0: all 32*sus - 1)",
              in_range(0, 255)),
        Param("nvlink", True, "GPUs of one node talk over NVLink, not their NICs (false: "
              "every hop over the network, on the same rings)", None),
        Param("nvlink_gbps", 3600.0, "NVLink per GPU per direction, Gb/s (3600 = 450 GB/s, "
              "DGX H100 NVLink 4)", in_range(1, 8000)),
        Param("nvlink_latency_ns", 1000.0, "latency of one NVLink transfer, ns (an "
              "assumption)", nonneg),
        Param("pxn", True, "NCCL's PXN: a send to another node leaves through the NIC on "
              "the receiver's rail, over NVLink first (false: the sender's own NIC)", None),
        Param("sharp", False, "rail, InfiniBand (-p fabric=ib): every leaf runs SHARP (an "
              "aggregation node per rail), which NCCL uses for AllReduce across nodes "
              "(NVLS+SHARP) with NCCL_COLLNET_ENABLE=1; that variable on such a fabric sets "
              "it unless given", None),
        with_default("link_gbps", 400.0),
        with_default("pfc", True),
        with_default("xoff_kb", 256.0),
        with_default("buffer_kb", 32000.0),
        with_default("cc", "none"),
        with_default("seed", 0),
        FABRIC_PARAMS["kmin_kb"], FABRIC_PARAMS["kmax_kb"], FABRIC_PARAMS["pmax"],
        FABRIC_PARAMS["cable_m"],
        Param("packet_bytes", 0, "largest data packet, bytes without FCS (0: the largest "
              "IB MTU, 4096 B of payload, plus the fabric's headers: 4154 RoCEv2, 4122 IB)",
              lambda v: None if v == 0 else _packet(v)),
        *param_set(*IB_NAMES),
        Param("prop_ns", 500.0, "propagation delay of every link, ns (100 m of fibre)", nonneg),
        Param("limit_ms", 100.0, "give up on an iteration after this much simulated time, ms",
              pos),
        *cc_params(),
        # Gen5 x16 (the ConnectX-7 NICs of a DGX H100, docs/explanation/collectives.md "The
        # PCIe budget")
        *pcie_params(5),
        *rc_params(),
        Param("failover", False, "reliable: on a QP error move the QP's unfinished messages "
              "to another rail and re-send what did not arrive (false: the collective fails, "
              "as NCCL's does)", None),
        *REROUTE_PARAMS,
        Param("hw", "h100-cx7", "the node NCCL's tuner and host-side latencies model "
              f"(sim.workloads.tuner.PRESETS: {', '.join(PRESETS)}; or NCCL's topology "
              "XML of a node, NCCL_TOPO_DUMP_FILE's; --fabric nvl72: gb200-nvl72 unless "
              "given)", _hw_problem),
        Param("graph", "", "NCCL's graph file (NCCL_GRAPH_FILE): a ring's channels visit "
              "each node's GPUs in the order of its ring graph (sim.fabric.nccl_xml)",
              _graph_problem),
        Param("nccl_host", True, "NCCL's host side in the run (its cost model for the "
              "algorithm and protocol: the launch latency, each step's latency, NVLink "
              "inside a node or the network between nodes, and its bus bandwidth as what "
              "the GPUs' channels move; false: the network alone)", None),
    )


def _graph_problem(v: str) -> str | None:
    if not v:
        return None
    from sim.fabric.nccl_xml import NcclTopoError, read_nccl_graph

    try:
        read_nccl_graph(v)
    except NcclTopoError as e:
        return str(e)
    return None


def _hw_problem(v: Any) -> str | None:
    from sim.workloads.tuner import PRESETS, node_hardware

    if v in PRESETS:
        return None
    try:
        node_hardware(str(v))
    except ValueError as e:  # TunerError, NcclTopoError
        return (str(e) if os.path.isfile(str(v)) else
                f"expected one of {', '.join(PRESETS)}, or NCCL's topology XML of a node")
    return None


def _packet_bytes(p: Mapping[str, Any]) -> int:
    """``packet_bytes`` of ``p`` (absent: the scenarios' default; 0, a collective's: the
    fabric's largest packet, :func:`collective_packet`)."""
    return (p.get("packet_bytes", FABRIC_PARAMS["packet_bytes"].default)
            or header_stack(p).frame_bytes())


def header_stack(p: Mapping[str, Any]) -> HeaderStack:
    """The header stack of the data packets of ``p``'s fabric (:mod:`wire.linkstack`):
    InfiniBand's with ``fabric = "ib"``, else RoCEv2's."""
    return IB if p.get("fabric", "roce") == "ib" else ROCE


def collective_packet(p: Mapping[str, Any], stack: HeaderStack | None = None) -> dict[str, Any]:
    """``p`` with ``packet_bytes`` resolved for a collective: 0 becomes the largest IB MTU
    (4096 B of payload) plus the headers of ``stack`` (default: the fabric's,
    :func:`header_stack`): 4154 on RoCEv2, 4122 on InfiniBand.  A packet whose payload
    exceeds that MTU on InfiniBand is a ScenarioError naming ``packet_bytes``; so is one
    with no payload."""
    stack = stack if stack is not None else header_stack(p)
    pkt = p.get("packet_bytes") or stack.frame_bytes()
    if pkt <= stack.header_bytes:
        raise ScenarioError(f"parameter 'packet_bytes': {pkt} leaves no payload after the "
                            f"{stack.header_bytes} bytes of {stack.label}")
    if not stack.ethernet and pkt > stack.frame_bytes():
        raise ScenarioError(f"parameter 'packet_bytes': {pkt} B is {pkt - stack.header_bytes} "
                            f"B of payload, above InfiniBand's largest MTU "
                            f"({stack.max_payload_bytes} B: packets of at most "
                            f"{stack.frame_bytes()} B)")
    return {**p, "packet_bytes": pkt}


def rc_params() -> tuple[Param, ...]:
    """The RC transport reliability ``-p`` keys (:mod:`sim.nic.rc`, docs/explanation/faults.md
    "RC transport reliability"): on by default, as in every RoCE and InfiniBand RC NIC."""
    from sim.nic.rc import ACK_TIMEOUT, OOO_TIMEOUT_PS, RETRANSMIT_MODES, RETRY_CNT

    return (
        Param("reliable", True, "RC transport in the NICs: PSNs, ACKs, NAK, go-back-N "
              "retransmission, ACK timeout (false: an idealised NIC that never resends, so a "
              "lost frame is lost for good)", None),
        Param("retransmit", "gbn", "reliable: 'gbn' (go-back-N, what RC NICs do) or 'sr' "
              "(selective repeat)",
              lambda v: None if v in RETRANSMIT_MODES else
              f"must be one of {', '.join(RETRANSMIT_MODES)}"),
        Param("ack_timeout", ACK_TIMEOUT, "reliable: local ACK timeout exponent, 4.096 us x "
              "2^ack_timeout (20: NCCL_IB_TIMEOUT's default, ~4.3 s)", in_range(1, 31)),
        Param("retry_cnt", RETRY_CNT, "reliable: retries after a timeout before the QP "
              "error (NCCL_IB_RETRY_CNT's default 7)", in_range(0, 7)),
        AutoBoolParam("ooo", "auto", "reliable: the receivers place out-of-order frames "
                      "(no NAK until a gap stays open ooo_timeout_us; selective resends): "
                      "true | false | auto (on when the fabric routes adaptively, as "
                      "adaptive-routing NICs do)", None),
        Param("ooo_timeout_us", OOO_TIMEOUT_PS / 1e6, "ooo: a gap still open this long "
              "after the first frame past it arrived is NAKed", pos),
    )


def rc_kw(p: Mapping[str, Any]) -> dict[str, Any]:
    """:class:`sim.nic.host.Host` keywords of the ``rc_params`` in ``p`` ({} when ``p`` has
    no ``reliable``: the Host's default, reliable)."""
    if "reliable" not in p:
        return {}
    if not p["reliable"]:
        return {"reliable": False}
    kw = {"reliable": True, "retransmit": p.get("retransmit", "gbn"),
          **{k: p[k] for k in ("ack_timeout", "retry_cnt") if k in p}}
    if p.get("ooo", "auto") != "auto":
        kw["ooo"] = p["ooo"]
    if "ooo_timeout_us" in p:
        kw["ooo_timeout_ps"] = us_to_ps(p["ooo_timeout_us"])
    return kw


class FabricSetup(NamedTuple):
    """What :func:`fabric_setup` makes of the ``fabric`` choice: the switches' MMU and
    headroom per lossless PG, ECN marking, and the keyword arguments of the topology builders
    (``link_kw`` for :class:`sim.fabric.Fabric`, ``switch_kw`` for ``add_switch``, ``host_kw``
    for ``add_host``)."""

    mmu: MmuConfig
    headroom_bytes: int
    ecn: EcnConfig | None
    link_kw: dict[str, Any]
    switch_kw: dict[str, Any]
    host_kw: dict[str, Any]
    routing: str = ""

    def apply(self, fabric: Any) -> None:
        """What needs the built fabric: IB routing tables (``ib_routing``, by
        :func:`sim.fabric.lft.apply_routing`; '' keeps the builder's)."""
        if self.routing:
            from sim.fabric.lft import apply_routing

            apply_routing(fabric, self.routing)


#: Congestion controls that need RoCE's ECN marks and CNPs (refused with ``fabric = "ib"``,
#: whose own is ``ibcc``, IBA annex A10).
ROCE_CCS = ("dcqcn",)


def ib_vl_buffer_bytes(p: Mapping[str, Any], ports: int) -> int:
    """The VL buffer of ``fabric = "ib"``: ``vl_buffer_kb``, or with 0 the switch buffer
    (``buffer_kb``) less the reserves (:data:`RESERVED_BYTES` per port and class) split evenly
    over the 8 data VLs of each of ``ports`` ports, in whole 64-byte blocks [A]: the same switch
    memory as the RoCE fabric, statically partitioned as IB input buffers are."""
    from sim.flowctl.ib import BLOCK_BYTES
    from sim.packet import PRIORITIES

    if p.get("vl_buffer_kb", 0):
        return kb_to_bytes(p["vl_buffer_kb"])
    reserved = kb_to_bytes(p.get("reserved_kb", RESERVED_BYTES / KB))
    per_vl = (kb_to_bytes(p["buffer_kb"]) // ports - PRIORITIES * reserved) // PRIORITIES
    return max(per_vl // BLOCK_BYTES * BLOCK_BYTES, 0)


def fabric_setup(p: Mapping[str, Any], ports: int, rate_bps: int) -> FabricSetup:
    """The one place the whole-fabric choice ``p["fabric"]`` (default ``"roce"``) becomes the
    simulator's knobs, for switches of ``ports`` ports at ``rate_bps``.

    * ``"roce"``: as before (:func:`mmu_config`, :func:`ecn_config`, :func:`host_kw`),
      PFC per ``pfc``, round-robin scheduling.
    * ``"ib"``: every link under IBA per-VL credits (``flow_control="ib"``, VL buffer
      :func:`ib_vl_buffer_bytes`, identity SL-to-VL map), every switch port arbitrating VLs
      with OpenSM's default tables (``scheduler="vlarb"``, :data:`sim.net.port.VLARB_DEFAULT`),
      PFC off with each class's admission threshold at least its VL buffer (credits alone keep
      the switch lossless, as ``[links] flow_control = "ib"`` in fabric files), the hosts'
      ``cc`` as given (``ibcc``, IBA annex A10, with its FECN marking; ``none``: no marking;
      RoCE's ``dcqcn`` refused), and routing per ``ib_routing`` applied by
      :meth:`FabricSetup.apply` once the fabric is built ('' keeps the scenario's tables).
      A buffer that cannot hold every port's VL buffers and reserves is a ScenarioError
      naming ``buffer_kb``/``vl_buffer_kb``.
    """
    if "packet_bytes" in p and not p["packet_bytes"]:  # a collective's 0: the largest packet
        p = {**p, "packet_bytes": _packet_bytes(p)}
    if p.get("fabric", "roce") == "roce":
        cfg, hr = mmu_config(p, ports, rate_bps)
        return FabricSetup(cfg, hr, ecn_config(p), {}, {}, host_kw(p, rate_bps))
    from sim.flowctl.ib import BLOCK_BYTES, IbConfig, ib_blocks
    from sim.net.port import VLARB_DEFAULT
    from sim.packet import PRIORITIES

    if p["cc"] in ROCE_CCS:
        raise ScenarioError(f"parameter 'cc': {p['cc']} is RoCE congestion control (ECN marks "
                            f"and CNPs); with fabric=ib use cc=ibcc (IBA annex A10) or none")
    if not p["buffer_kb"]:  # the derived buffer, split into the VL buffers below
        p = {**p, "buffer_kb": default_buffer_bytes(ports, rate_bps) / KB}
    vl = ib_vl_buffer_bytes(p, ports)
    mtu = p.get("packet_bytes", FABRIC_PARAMS["packet_bytes"].default)
    if vl < ib_blocks(mtu) * BLOCK_BYTES:
        key = "vl_buffer_kb" if p.get("vl_buffer_kb", 0) else "buffer_kb"
        raise ScenarioError(f"parameter {key!r}: a VL buffer of {vl} B is less than one "
                            f"largest packet ({mtu} B)" + ("" if p.get("vl_buffer_kb", 0) else
                            f"; {p['buffer_kb']} KB shared by {ports} ports x 8 VLs"))
    ib = IbConfig(vl_buffer_bytes=vl)
    reserved = kb_to_bytes(p.get("reserved_kb", RESERVED_BYTES / KB))
    need = ports * PRIORITIES * (reserved + ib.buffer_blocks * ib.credit_bytes)
    if kb_to_bytes(p["buffer_kb"]) < need:
        raise ScenarioError(f"parameter 'buffer_kb': {p['buffer_kb']} KB cannot hold the VL "
                            f"buffers ({vl} B x {PRIORITIES} VLs) of {ports} ports plus the "
                            f"reserves: need {need / KB:g} KB")
    limit_kb = ib.buffer_blocks * ib.credit_bytes / KB
    cfg, _ = mmu_config({**p, "pfc": False, "xoff_kb": max(p["xoff_kb"], limit_kb)},
                        ports, rate_bps)
    ecn = ecn_config(p) if p["cc"] == "ibcc" else None  # FECN marking only for IB CC
    return FabricSetup(cfg, 0, ecn, {"flow_control": "ib", "ib": ib},
                       {"scheduler": "vlarb", "weights": VLARB_DEFAULT},
                       host_kw({**p, "pfc": False}, rate_bps), p.get("ib_routing", ""))


def roce_only(p: Mapping[str, Any], why: str) -> None:
    """Refuse ``fabric = "ib"`` in a scenario that is about RoCE alone (``why``: one clause)."""
    if p.get("fabric", "roce") != "roce":
        raise ScenarioError(f"parameter 'fabric': only roce here: {why}")


# ------------------------------------------------------------------------------ faults
#: Fault kinds of ``[[faults]]`` entries and ``-p fault=``: the fabric's
#: (:data:`sim.fabric.faults.KINDS`) and ``straggler`` (a rank of a collective that starts
#: each step late: :class:`sim.workloads.collective.CollectiveJob` ``delay_ps``).
FAULT_KINDS = ("link_down", "flap", "loss", "degrade", "nic_down", "switch_down", "slow_pcie",
               "straggler")


def _kind(v: str) -> str | None:
    return None if v in FAULT_KINDS else f"must be one of {', '.join(FAULT_KINDS)}"


def _fec(v: str) -> str | None:
    from sim.fabric.fec import FEC_NAMES

    return None if v in FEC_NAMES else f"must be one of {', '.join(FEC_NAMES)}"


def _reroute_time(v: float) -> str | None:
    return None if v == -1 or v >= 0 else "must be -1 (the default) or >= 0"


#: The keys of one fault (``[[faults]]`` entries, ``-p fault=KIND:KEY=VALUE,...`` and
#: ``-p fault.KEY=VALUE``): one list, so one parser serves the file and the command line.
FAULT_PARAMS: tuple[Param, ...] = (
    Param("kind", "link_down", "link_down, flap, loss, degrade, nic_down, switch_down, "
          "slow_pcie or straggler", _kind),
    Param("node", -1, "the node (a link: one end, with port; nic_down, slow_pcie, straggler: "
          "a host)", in_range(-1, 1 << 20)),
    Param("rank", -1, "nic_down, slow_pcie, straggler: a rank of the collective instead of "
          "node (-1: none)", in_range(-1, 1 << 20)),
    Param("port", 0, "the node's port (one end of the link)", in_range(0, 1 << 16)),
    Param("at_us", 0.0, "when the fault starts (us)", nonneg),
    Param("until_us", 0.0, "when it ends (us; 0: never)", nonneg),
    Param("mtbf_us", 0.0, "flap: mean time between failures (us)", nonneg),
    Param("mttr_us", 0.0, "flap: mean time to repair (us)", nonneg),
    Param("loss_rate", 0.0, "loss: probability a frame is lost", frac),
    Param("ber", 0.0, "loss: the link's raw (pre-FEC) bit error ratio, as mlxlink's Raw "
          "Physical BER (instead of loss_rate)", frac),
    Param("fec", "auto", "loss by ber: the link's FEC, auto (its rate's: RS(528,514) at 100G "
          "Ethernet, RS(544,514) from 200G and on IB HDR and up), none, rs528, rs544 or "
          "ll272", _fec),
    Param("plr", False, "loss by ber on InfiniBand: the link resends the codewords its FEC "
          "cannot correct (physical-layer retransmission): frames delayed, not lost", None),
    Param("rate_gbps", 0.0, "degrade: the link's rate while degraded; slow_pcie: the PCIe "
          "link's rate both ways (Gb/s)", nonneg),
    Param("pcie_gen", 0, "slow_pcie: the PCIe generation the link runs at (instead of "
          "rate_gbps)", in_range(0, 6)),
    Param("pcie_lanes", 16, "slow_pcie: its lanes (with pcie_gen)", _pcie_lanes),
    Param("delay_us", 0.0, "straggler: every transfer the rank sends starts this late (us)",
          nonneg),
    Param("detect_us", -1.0, "failure detection time of the switches (us; -1: the default, "
          "sim.fabric.faults.DETECT_PS); the largest over the entries applies to all",
          _reroute_time),
    Param("converge_us", -1.0, "routing convergence time after detection (us; -1: the "
          "default); the largest over the entries applies to all", _reroute_time),
)
#: The keys every kind takes.
_COMMON_KEYS = ("kind", "at_us", "until_us", "detect_us", "converge_us")
#: The other keys each kind takes (:func:`resolve_faults` refuses the rest).  Alternatives:
#: ``node`` or ``rank`` (a host), ``loss_rate`` or ``ber``, ``rate_gbps`` or ``pcie_gen``
#: (+ ``pcie_lanes``).
FAULT_KIND_KEYS: dict[str, tuple[str, ...]] = {
    "link_down": ("node", "port"),
    "flap": ("node", "port", "mtbf_us", "mttr_us"),
    "loss": ("node", "port", "loss_rate", "ber", "fec", "plr"),
    "degrade": ("node", "port", "rate_gbps"),
    "nic_down": ("node", "rank"),
    "switch_down": ("node",),
    "slow_pcie": ("node", "rank", "rate_gbps", "pcie_gen", "pcie_lanes"),
    "straggler": ("node", "rank", "delay_us"),
}
#: The reroute ``-p`` keys (plain, beside ``fault``): they win over the entries' own.
REROUTE_PARAMS: tuple[Param, ...] = FAULT_PARAMS[-2:]
#: ``-p`` keys that are faults, not a scenario's parameters: ``fault`` (repeatable),
#: ``fault.KEY`` (one more fault, key by key: what ``lossless sweep`` can sweep) and the
#: reroute keys.
FAULT_KEY = "fault"


def is_fault_key(key: str) -> bool:
    """``key`` is a fault ``-p`` key (:data:`FAULT_KEY`, ``fault.KEY``, ``detect_us``,
    ``converge_us``)."""
    return key == FAULT_KEY or key.startswith(FAULT_KEY + ".") or key in (
        "detect_us", "converge_us")


def collect_params(pairs: Any) -> dict[str, Any]:
    """``-p KEY=VALUE`` pairs as a dict: a repeated ``fault`` gathers its values in a list
    (in order); any other key given twice is a ScenarioError naming it (which one was
    meant is not ours to guess)."""
    out: dict[str, Any] = {}
    for key, value in pairs or ():
        if key == FAULT_KEY:
            out.setdefault(key, []).append(value)
        elif key in out:
            raise ScenarioError(f"-p {key}: given twice")
        else:
            out[key] = value
    return out


def split_fault_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the fault keys of ``params``, the others)."""
    faults = {k: v for k, v in params.items() if is_fault_key(k)}
    return faults, {k: v for k, v in params.items() if not is_fault_key(k)}


def parse_fault(text: str) -> dict[str, Any]:
    """``"link_down:node=2,port=3,at_us=200,until_us=600"`` -> the raw ``[[faults]]`` entry
    {"kind": "link_down", "node": 2, ...} (values TOML-style); ValueError for bad syntax."""
    from sim.scenarios.base import parse_text

    kind, colon, rest = str(text).strip().partition(":")
    if not colon or not kind.strip() or "=" in kind:
        raise ValueError(f"expected KIND:KEY=VALUE,... (e.g. link_down:node=2,port=3,"
                         f"at_us=200), got {text!r}; in lossless sweep, whose commas "
                         f"separate values, give one fault as fault.KEY=VALUE keys")
    out: dict[str, Any] = {"kind": kind.strip()}
    items = [t.strip() for t in rest.split(",")] if rest.strip() else []
    for n, item in enumerate(items):
        if not item:
            raise ValueError(f"KEY=VALUE #{n + 1} after {kind.strip()}: is empty (two "
                             f"commas in a row, or one at an end)")
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"expected KEY=VALUE after {kind.strip()}:, got {item!r}")
        if key.strip() in out:
            raise ValueError(f"{key.strip()} given twice")
        out[key.strip()] = parse_text(value.strip())
    return out


def fault_entries(params: Mapping[str, Any], label: str = "-p") -> list[tuple[str, dict]]:
    """The faults of ``-p`` keys (:func:`split_fault_params`): (label, raw entry) for each
    ``fault`` value (a string or a list of them) and one for the ``fault.KEY`` keys; a bad
    one is a ScenarioError naming it."""
    vals = params.get(FAULT_KEY, [])
    vals = [vals] if isinstance(vals, str) else list(vals)
    out = []
    for i, text in enumerate(vals):
        try:
            out.append((f"{label} fault #{i + 1}", parse_fault(text)))
        except ValueError as e:
            raise ScenarioError(f"{label} fault #{i + 1}: {e}") from None
    keyed = {k.partition(".")[2]: v for k, v in params.items() if k.startswith(FAULT_KEY + ".")}
    if keyed:
        out.append((f"{label} fault.KEY", keyed))
    return out


class FaultPlan(NamedTuple):
    """Resolved faults (:func:`resolve_faults`): the fabric's (:class:`sim.fabric.faults.Fault`
    with each entry's label), the stragglers (label, resolved entry), the reaction times
    (None: the fabric's default) and every resolved entry (summary.json ``params``)."""

    faults: list[tuple[str, Any, dict[str, Any]]]
    stragglers: list[tuple[str, dict[str, Any]]]
    reroute: Any
    entries: list[dict[str, Any]]

    def __bool__(self) -> bool:
        return bool(self.entries) or self.reroute is not None


def _fault_problem(f: Mapping[str, Any], raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """(key, why) of what a resolved entry lacks for its kind or has that does not apply to
    it (:data:`FAULT_KIND_KEYS`), or None."""
    kind = f["kind"]
    takes = FAULT_KIND_KEYS[kind]
    for key in raw:
        if key not in _COMMON_KEYS and key not in takes:
            return key, (f"does not apply to kind {kind!r} (its keys: "
                         f"{', '.join((*takes, *_COMMON_KEYS[1:]))})")
    need = {"flap": ("mtbf_us", "mttr_us"), "degrade": ("rate_gbps",),
            "straggler": ("delay_us",)}.get(kind, ())
    for key in need:
        if key not in raw or f[key] <= 0:
            return key, f"kind {kind!r} needs a positive {key}"
    if kind == "loss" and "loss_rate" not in raw and "ber" not in raw:
        return "loss_rate", "kind 'loss' needs loss_rate or ber"
    if kind == "loss" and "loss_rate" in raw and "ber" in raw:
        return "ber", "kind 'loss' takes loss_rate or ber, not both"
    for key in ("fec", "plr"):
        if kind == "loss" and key in raw and "ber" not in raw:
            return key, "goes with ber (a raw bit error ratio through the link's FEC)"
    if kind == "slow_pcie" and (f["rate_gbps"] > 0) == (f["pcie_gen"] > 0):
        return "rate_gbps", "kind 'slow_pcie' needs rate_gbps or pcie_gen (one of them)"
    if kind == "slow_pcie" and "pcie_lanes" in raw and f["pcie_gen"] <= 0:
        return "pcie_lanes", "goes with pcie_gen (the lanes of that generation), not rate_gbps"
    hosty = "rank" in takes
    if hosty and (f["rank"] >= 0) == (f["node"] >= 0):
        return "node", f"kind {kind!r} needs a host: node or rank (one of them)"
    if not hosty and f["node"] < 0:
        return "node", f"kind {kind!r} needs node (and port for a link)"
    if f["until_us"] and f["until_us"] <= f["at_us"]:
        return "until_us", f"must be after at_us ({f['at_us']})"
    return None


def _kind_entry(f: Mapping[str, Any], raw: Mapping[str, Any]) -> dict[str, Any]:
    """Resolved entry ``f`` (of ``raw``) with only the keys of its kind
    (:data:`FAULT_KIND_KEYS`), and of each alternative the one in use: what summary.json /
    results.json ``params.faults`` list, and itself a raw entry that resolves to the same
    fault (resolution is idempotent)."""
    kind = f["kind"]
    drop = set()
    if "rank" in FAULT_KIND_KEYS[kind]:
        drop.add("node" if f["rank"] >= 0 else "rank")
    if kind == "loss":
        drop |= {"loss_rate"} if "ber" in raw else {"ber", "fec", "plr"}
    if kind == "slow_pcie":
        drop |= {"pcie_gen", "pcie_lanes"} if f["rate_gbps"] > 0 else {"rate_gbps"}
    return {k: v for k, v in f.items() if (k in _COMMON_KEYS or k in FAULT_KIND_KEYS[kind])
            and k not in drop}


def resolve_faults(entries: list[tuple[str, Mapping[str, Any]]], *, ib: bool = False,
                   reroute_params: Mapping[str, Any] | None = None) -> FaultPlan:
    """Check raw fault entries ((label, entry) pairs, :data:`FAULT_PARAMS`) and make the
    :class:`sim.fabric.faults.Fault` objects; one-line ScenarioErrors ``LABEL KEY: why``:
    an entry must name its ``kind`` and give only the keys of that kind
    (:data:`FAULT_KIND_KEYS`).  The plan's ``entries`` keep those keys (defaults filled
    in): resolving them again gives the same plan.
    The reaction times: ``reroute_params`` (``detect_us``, ``converge_us``; -1 or absent:
    not given) win, else the largest over the entries, else the defaults (``ib``: the
    subnet manager's, :data:`sim.fabric.faults.IB_REROUTE_PS`)."""
    from sim.fabric.faults import IB_REROUTE_PS, Fault, Reroute
    from sim.scenarios.base import resolve_params

    rp = {k: v for k, v in (reroute_params or {}).items() if k in ("detect_us", "converge_us")}
    try:
        rp = resolve_params(REROUTE_PARAMS, rp)
    except ScenarioError as e:
        raise ScenarioError(f"-p: {e}") from None
    faults, stragglers, built = [], [], []
    for label, raw in entries:
        if not isinstance(raw, Mapping):
            raise ScenarioError(f"{label}: must be a table")
        try:
            f = resolve_params(FAULT_PARAMS, raw)
        except ScenarioError as e:
            raise ScenarioError(f"{label} {e}") from None
        if "kind" not in raw:
            raise ScenarioError(f"{label} kind: missing: one of {', '.join(FAULT_KINDS)}")
        why = _fault_problem(f, raw)
        if why:
            raise ScenarioError(f"{label} {why[0]}: {why[1]}")
        loss_by_ber = f["kind"] == "loss" and "ber" in raw
        built.append(_kind_entry(f, raw))
        kind = f["kind"]
        if kind == "straggler":
            stragglers.append((label, dict(f)))
            continue
        try:
            fault = Fault(kind, f["node"], f["port"], at_ps=us_to_ps(f["at_us"]),
                          until_ps=us_to_ps(f["until_us"]) or None,
                          mtbf_ps=us_to_ps(f["mtbf_us"]) or None,
                          mttr_ps=us_to_ps(f["mttr_us"]) or None,
                          loss_rate=f["loss_rate"] if kind == "loss" and not loss_by_ber
                          else None,
                          ber=f["ber"] if loss_by_ber else None,
                          fec=f["fec"] if loss_by_ber else "auto",
                          plr=bool(f["plr"]) if loss_by_ber else False,
                          rate_gbps=f["rate_gbps"] or None,
                          pcie_gen=f["pcie_gen"] or None if kind == "slow_pcie" else None,
                          pcie_lanes=f["pcie_lanes"] if kind == "slow_pcie" else None)
        except ValueError as e:
            raise ScenarioError(f"{label} {kind}: {e}") from None
        faults.append((label, fault, dict(f)))
    reroute = None
    d = rp["detect_us"] if rp["detect_us"] >= 0 else max(
        (e["detect_us"] for e in built), default=-1.0)
    c = rp["converge_us"] if rp["converge_us"] >= 0 else max(
        (e["converge_us"] for e in built), default=-1.0)
    if d >= 0 or c >= 0 or faults:
        dflt = Reroute(0, IB_REROUTE_PS) if ib else Reroute()
        reroute = Reroute(us_to_ps(d) if d >= 0 else dflt.detect_ps,
                          us_to_ps(c) if c >= 0 else dflt.converge_ps)
    return FaultPlan(faults, stragglers, reroute, built)


def apply_faults(plan: FaultPlan, fabric: Any, ranks: Any = None) -> None:
    """Schedule ``plan``'s fabric faults on ``fabric`` (a ``rank`` is ``ranks[rank]``, the
    host of that rank); a bad target is a ScenarioError ``LABEL node|port|rank: why``."""
    import dataclasses

    from sim.fabric.faults import schedule_faults

    if plan.reroute is not None and (plan.faults or getattr(fabric, "_fault_engine", None)):
        schedule_faults(fabric, [], reroute=plan.reroute)
    for label, fault, f in plan.faults:
        if f["rank"] >= 0:
            if ranks is None or f["rank"] >= len(ranks):
                n = 0 if ranks is None else len(ranks)
                raise ScenarioError(f"{label} rank: {f['rank']} is not a rank (0..{n - 1})"
                                    if n else f"{label} rank: no collective here: give node")
            fault = dataclasses.replace(fault, node=ranks[f["rank"]])
        try:
            schedule_faults(fabric, [fault])
        except ValueError as e:
            key = "port" if "port" in str(e) else ("rank" if f["rank"] >= 0 else "node")
            raise ScenarioError(f"{label} {key}: {e}") from None


def straggler_delays(plan: FaultPlan, hosts: Any) -> dict[int, tuple[int, int, int | None]]:
    """The stragglers of ``plan`` among the ranks of a collective on ``hosts`` (rank ->
    host): rank -> (delay_ps, at_ps, until_ps or None), the ``delay_ps`` of
    :class:`sim.workloads.collective.CollectiveJob` (a straggler named by ``node`` is the
    rank on that host; two on one rank add up)."""
    hosts = list(hosts)
    out: dict[int, tuple[int, int, int | None]] = {}
    for _label, f in plan.stragglers:
        r = f["rank"] if f["rank"] >= 0 else (hosts.index(f["node"]) if f["node"] in hosts
                                              else None)
        if r is None or r >= len(hosts):
            continue
        d, at, until = us_to_ps(f["delay_us"]), us_to_ps(f["at_us"]), us_to_ps(f["until_us"])
        old = out.get(r)
        out[r] = (d + (old[0] if old else 0), at, until or None)
    return out


def check_stragglers(plan: FaultPlan, ranks_of: list[Any], where: str = "") -> None:
    """Every straggler names a rank or host of one of the collectives (``ranks_of``: each
    collective's hosts in rank order); else a ScenarioError naming it."""
    for label, f in plan.stragglers:
        if not ranks_of:
            raise ScenarioError(f"{label} kind: a straggler is a rank of a collective; "
                                f"there is none here")
        if f["rank"] >= 0:
            if not any(f["rank"] < len(h) for h in ranks_of):
                raise ScenarioError(f"{label} rank: {f['rank']} is not a rank (0.."
                                    f"{max(len(h) for h in ranks_of) - 1})")
        elif not any(f["node"] in h for h in ranks_of):
            raise ScenarioError(f"{label} node: {f['node']} is not a host of a collective")


def add_faults(sc: Any, fault_params: Mapping[str, Any], label: str = "-p") -> None:
    """The ``-p`` fault keys (:func:`split_fault_params`) on a built scenario ``sc`` (a
    built-in's): scheduled on its fabric, listed in its summary.json ``params["faults"]``
    and timeline ``faults`` (only when there are faults: other runs keep their outputs)."""
    fab = sc.fabric
    plan = resolve_faults(fault_entries(fault_params, label),
                          ib=getattr(fab, "flow_control", "") == "ib",
                          reroute_params=fault_params)
    check_stragglers(plan, [])
    apply_faults(plan, fab)
    if plan.entries:
        sc.params["faults"] = [*sc.params.get("faults", []), *plan.entries]
        sc.summaries["faults"] = lambda _sc: fab.fault_log.summary()["events"]

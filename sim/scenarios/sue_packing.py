"""The ``sue_packing`` scenario: XPUs exchanging SUE-T transactions over one scale-up switch.

Topology: switch node 0 (:class:`sim.scaleup.switch.EsunSwitch`), XPUs at nodes 1..``xpus``
(XPU i on switch port i).  Every XPU generates transactions of ``txn_bytes`` data at ``load``
x line rate (counted in transaction data bytes: at 1.0 the offered data alone fills the link,
so the sources saturate) towards destinations chosen by ``pattern``, on a VC drawn uniformly
from ``vcs``; the packer, go-back-N and the switch are described in the :mod:`sim.scaleup`
modules and docs/explanation/sue.md.  ``flow_control="cbfc"`` replaces PFC on the DATA and ACK
classes by credit-based flow control on every link (:class:`sim.flowctl.credit.CbfcConfig`; the
MMU is sized so that credits alone keep it lossless).  The bottleneck captured is the switch
port towards XPU 1 (real frames).  SUE figures: :func:`sim.scaleup.summary.sue_summary`,
written to summary.json as ``"sue"`` (``Scenario.summaries``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any

from sim.fabric import Fabric
from sim.flowctl.credit import CbfcConfig, cbfc_credits
from sim.net.mmu import Mmu
from sim.scaleup.framing import ACK_TC, DATA_TC, HEADERS, SueConfig, max_frame_bytes
from sim.scaleup.packing import SELECTORS
from sim.scaleup.summary import sue_summary
from sim.scaleup.switch import EsunSwitch
from sim.scaleup.xpu import Xpu
from sim.scenarios.base import Param, Scenario, ScenarioError, TracerSlot, resolve_params
from sim.scenarios.common import (
    KB,
    RESERVED_BYTES,
    default_buffer_bytes,
    ecn_config,
    frac,
    in_range,
    mmu_config,
    nonneg,
    param_set,
    pos,
    roce_only,
    with_default,
)
from sim.units import gbps, kb_to_bytes, ns_to_ps, prop_delay_ps, us_to_ps

__all__ = ["DOC", "PARAMS", "PATTERNS", "build"]

DOC = ("SUE-T transaction packing over ESUN (or AFH/SUNH/IPv4-UDP): XPUs, packer, go-back-N, "
       "one switch")

PATTERNS = ("uniform", "pairs", "shift", "incast")
FLOW_CONTROLS = ("pfc", "cbfc")
ARRIVALS = ("poisson", "cbr")


def _one_of(options):
    def check(v: str) -> str | None:
        return None if v in options else f"must be one of {list(options)}"
    return check


def _load(v: float) -> str | None:
    return None if 0.0 < v <= 10.0 else "must be in (0, 10]"


def _hdr_bytes(v: int) -> str | None:
    return None if v in (8, 16) else "must be 8 or 16"


PARAMS: tuple[Param, ...] = (
    Param("xpus", 8, "number of XPUs on the switch, 2..256", in_range(2, 256)),
    Param("txn_bytes", 256, "data bytes per transaction, 1..256", in_range(1, 256)),
    Param("load", 0.5, "offered transaction data per XPU, fraction of line rate, (0, 10]; "
          "above the stack's efficiency the sources saturate", _load),
    Param("max_pdu_bytes", 4096, "PDU limit (descriptors + data), 264..4096; 1024 = SUE-Lite",
          in_range(264, 4096)),
    Param("hold_ns", 0.0, "packer hold time: a queue waits up to this for more transactions "
          "(0 = work conserving)", nonneg),
    Param("header", "esun", f"network header: one of {list(HEADERS)}", _one_of(HEADERS)),
    Param("vcs", 1, "virtual channels, 1..4", in_range(1, 4)),
    with_default("link_gbps", 100.0),
    Param("loss_rate", 0.0, "probability a frame is lost per link crossed, [0, 1)",
          lambda v: None if 0.0 <= v < 1.0 else "must be in [0, 1)"),
    Param("duration_us", 20.0, "simulated time, us", pos),
    Param("seed", 0, "RNG seed (arrivals, destinations, losses, ECN draws)", nonneg),
    Param("pattern", "uniform", f"destinations: one of {list(PATTERNS)}", _one_of(PATTERNS)),
    Param("arrivals", "poisson", f"arrival process: one of {list(ARRIVALS)}",
          _one_of(ARRIVALS)),
    Param("read_frac", 0.0, "fraction of transactions that are reads (request + response)",
          frac),
    Param("txn_hdr_bytes", 8, "per-transaction descriptor, 8 or 16 bytes", _hdr_bytes),
    Param("selector", "oldest", "packer queue selection: oldest or rr",
          _one_of(tuple(SELECTORS))),
    Param("window_pdus", 32, "go-back-N window per {destination, VC}, PDUs", in_range(1, 16384)),
    Param("rto_ns", 50000.0, "retransmission timeout, ns", pos),
    Param("ack_delay_ns", 1000.0, "standalone ACK after this if no reverse data carried it, ns",
          nonneg),
    Param("ack_every_pdus", 8, "standalone ACK at once when this many PDUs are unacknowledged",
          in_range(1, 16384)),
    Param("ttl", 15, "TTL / hop limit the XPUs set, 1..15", in_range(1, 15)),
    *param_set("pfc", "xoff_kb", "buffer_kb"),
    *param_set("cable_m", "kmin_kb", "kmax_kb", "pmax", "fabric"),
    Param("flow_control", "pfc", "link flow control of the DATA/ACK classes: pfc (as the "
          "'pfc' parameter says) or cbfc (credits per VC = traffic class; PFC off)",
          _one_of(FLOW_CONTROLS)),
    Param("cbfc_credit_bytes", 128, "CBFC credit size, bytes, 1..65536 (SAI default 128)",
          in_range(1, 65536)),
    Param("cbfc_buffer_kb", 32.0, "CBFC receiver buffer per VC per link, KB: the credit "
          "limit is floor(this / credit size)", pos),
    Param("cbfc_min_spacing_bytes", 6400, "CBFC CF_min_spacing, bytes of link time between "
          "a VC's CF_Updates, 800..262144 (SAI default 6400)", in_range(800, 262144)),
)


def _dests(pattern: str, src: int, n: int, r: random.Random) -> Callable[[], int] | None:
    """Destination chooser of XPU ``src`` (nodes 1..n); None: the XPU sends nothing."""
    if pattern == "uniform":
        others = [d for d in range(1, n + 1) if d != src]
        return lambda: others[r.randrange(len(others))]
    if pattern == "pairs":
        peer = src + 1 if src % 2 else src - 1
        return lambda: peer
    if pattern == "shift":
        nxt = src % n + 1
        return lambda: nxt
    if src == 1:  # incast: everyone else -> XPU 1
        return None
    return lambda: 1


def _cbfc(p: Mapping[str, Any], max_frame: int, ports: int, rate_bps: int,
          mp: dict[str, Any]) -> CbfcConfig | None:
    """The CBFC settings (None for PFC).  With CBFC the MMU is set up so that credits alone
    keep it lossless: no lossless PG (no PFC), the per-(port, PG) threshold equal to the
    credit limit in bytes, and a buffer that holds every credited VC's limit on every port
    (a frame of ``c`` credits stores fewer than ``c * credit_bytes`` bytes), else a
    ScenarioError naming ``buffer_kb``.  ``mp`` (the MMU parameters) is updated in place."""
    if p["flow_control"] != "cbfc":
        return None
    cb = p["cbfc_credit_bytes"]
    limit = kb_to_bytes(p["cbfc_buffer_kb"]) // cb
    need = cbfc_credits(max_frame, cb)
    if limit < need:
        raise ScenarioError(f"parameter 'cbfc_buffer_kb': {p['cbfc_buffer_kb']} KB is less "
                            f"than one largest frame ({need} credits of {cb} B)")
    cbfc = CbfcConfig(limit_credits=limit, credit_bytes=cb,
                      min_spacing_bytes=p["cbfc_min_spacing_bytes"])
    limit_bytes = limit * cb
    want = ports * (8 * RESERVED_BYTES + len(cbfc.vcs) * limit_bytes)
    buf = (kb_to_bytes(p["buffer_kb"]) if p["buffer_kb"] else
           default_buffer_bytes(ports, rate_bps, want))
    if buf < want:
        raise ScenarioError(f"parameter 'buffer_kb': {p['buffer_kb']} KB cannot hold the CBFC "
                            f"credit limit ({limit_bytes} B) of {len(cbfc.vcs)} VCs on "
                            f"{ports} ports plus the reserves: need {want / KB:g} KB")
    mp.update(pfc=False, lossless_tcs=(), xoff_kb=limit_bytes / 1000)
    if not p["buffer_kb"]:
        mp["buffer_kb"] = buf / KB
    return cbfc


def build(params: Mapping[str, Any] | None = None) -> Scenario:
    p = resolve_params(PARAMS, params)
    roce_only(p, "SUE is scale-up Ethernet (its credits are flow_control=cbfc)")
    n = p["xpus"]
    if p["pattern"] == "pairs" and n % 2:
        raise ScenarioError(f"parameter 'xpus': pattern 'pairs' needs an even number "
                            f"(got {n})")
    if p["max_pdu_bytes"] < p["txn_bytes"] + p["txn_hdr_bytes"]:
        raise ScenarioError("parameter 'max_pdu_bytes': smaller than one transaction")
    rate = gbps(p["link_gbps"])
    dur = us_to_ps(p["duration_us"])
    if dur <= 0:
        raise ScenarioError("parameter 'duration_us': must be at least 1 ps")
    cfg = SueConfig(header=p["header"], max_pdu_bytes=p["max_pdu_bytes"],
                    txn_hdr_bytes=p["txn_hdr_bytes"], hold_ps=ns_to_ps(p["hold_ns"]),
                    selector=p["selector"], window_pdus=p["window_pdus"],
                    rto_ps=max(1, ns_to_ps(p["rto_ns"])),
                    ack_delay_ps=ns_to_ps(p["ack_delay_ns"]),
                    ack_every_pdus=p["ack_every_pdus"], ttl=p["ttl"],
                    loss_rate=p["loss_rate"])
    max_frame = max_frame_bytes(p["header"], p["max_pdu_bytes"])
    mp = {"pfc": p["pfc"], "xoff_kb": p["xoff_kb"], "buffer_kb": p["buffer_kb"],
          "cable_m": p["cable_m"], "packet_bytes": max_frame,
          "lossless_tcs": (DATA_TC, ACK_TC)}
    cbfc = _cbfc(p, max_frame, n + 1, rate, mp)
    mcfg, hr = mmu_config(mp, n + 1, rate)
    slot = TracerSlot()
    fab = Fabric(p["seed"], slot)
    eng = fab.engine
    sw = EsunSwitch(eng, 0, Mmu(mcfg), routes={i: i for i in range(1, n + 1)},
                    ecn=ecn_config(p), tracer=slot, ids=fab.ids, loss_rate=p["loss_rate"],
                    scaleup=cfg.scaleup, cbfc=cbfc)
    fab.nodes[0] = sw
    prop = prop_delay_ps(p["cable_m"])
    xpus = []
    for i in range(1, n + 1):
        x = Xpu(eng, i, rate, cfg, ids=fab.ids, tracer=slot, cbfc=cbfc)
        fab.nodes[i] = x
        fab.connect(0, i, i, 0, rate, prop)
        xpus.append(x)
    # Traffic: one seeded stream per XPU (derived from the run seed), so adding an XPU or
    # changing the loss draws does not shift the others' arrivals.
    for x in xpus:
        r = random.Random(p["seed"] * 1_000_003 + x.node_id)
        dests = _dests(p["pattern"], x.node_id, n, r)
        if dests is not None:
            x.start_traffic(load=p["load"], txn_bytes=p["txn_bytes"], dests=dests,
                            vcs=p["vcs"], until_ps=dur, arrivals=p["arrivals"],
                            read_frac=p["read_frac"], rng=r)
    return Scenario(name="sue_packing", params=p, seed=p["seed"], duration_ps=dur,
                    fabric=fab, bottleneck=(0, 1), tracer_slot=slot,
                    info={"xpus": [x.node_id for x in xpus], "rate_bps": rate,
                          "headroom_bytes": hr, "max_frame_bytes": max_frame,
                          "cbfc_limit_credits": cbfc.limit_credits if cbfc else None},
                    summaries={"sue": sue_summary})

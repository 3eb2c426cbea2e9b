"""The SUE figures of a run (``summary.json`` section ``"sue"``) and the full-PDU
arithmetic they are compared with."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sim.flowctl.credit import CreditFlowControl
from sim.scaleup.framing import OVERHEAD_STACK
from sim.scaleup.switch import EsunSwitch
from sim.scaleup.xpu import Xpu
from wire.overhead import efficiency
from wire.scaleup import DEFAULT_SCALEUP

__all__ = ["sue_summary", "expected_goodput_pct", "percentile"]

def percentile(values: Sequence[int], q: float) -> int | None:
    """Nearest-rank percentile (``q`` in (0, 100]) of integers; None when empty."""
    if not values:
        return None
    s = sorted(values)
    return s[max(0, math.ceil(q / 100 * len(s)) - 1)]


def expected_goodput_pct(header: str, txn_bytes: int, max_pdu_bytes: int = 4096,
                         txn_hdr_bytes: int = 8) -> float:
    """Goodput of back-to-back full PDUs by the byte arithmetic of :mod:`wire.overhead`
    (``k = max_pdu_bytes // (txn_bytes + txn_hdr_bytes)`` transactions per frame)."""
    k = max_pdu_bytes // (txn_bytes + txn_hdr_bytes)
    e = efficiency(OVERHEAD_STACK[header], txn_bytes, k,
                   DEFAULT_SCALEUP.with_(txn_hdr_bytes=txn_hdr_bytes))
    assert e.goodput_pct is not None
    return e.goodput_pct


def _xpus(scenario: Any) -> list[Xpu]:
    nodes = scenario.fabric.nodes
    ids = scenario.info.get("xpus") or sorted(n for n, x in nodes.items() if isinstance(x, Xpu))
    return [nodes[i] for i in ids]


def sue_summary(scenario: Any) -> dict[str, Any]:
    """SUE figures of a run scenario (``sue_packing``), for summary.json's ``sue`` key.

    ``goodput_bps``: transaction data bits delivered in order by all XPUs / run time;
    ``goodput_per_xpu_bps`` the same per XPU; ``steady_goodput_bps``: per receiving XPU, over
    the PDUs it delivered in the second half of the run, the data after the first of them
    divided by the time from the first to the last, averaged over the receivers (no start-up
    transient; at saturation this is what wire.overhead's arithmetic predicts);
    latency: transaction queued at the source -> delivered in order at the destination
    (ps, nearest rank); ``frames`` DATA frames sent (retransmissions included).  With CBFC
    also ``cbfc_stalls`` (credit-blocking episodes over every credited port, XPUs' and
    switch's), ``cf_updates`` (CF_Update messages), ``cc_updates`` (CC_Update resyncs, only
    after link losses), ``pfc_frames`` (PFC frames the switch sent: 0) and ``switch_drops``."""
    xs = _xpus(scenario)
    fab = scenario.fabric
    dur = fab.engine.now_ps or scenario.duration_ps
    rate = scenario.info.get("rate_bps") or (xs[0].rate_bps if xs else 0)
    lat: list[int] = []
    rlat: list[int] = []
    steady = []
    for x in xs:
        lat.extend(x.latencies_ps)
        rlat.extend(x.read_latencies_ps)
        late = [d for d in x.pdu_deliveries if d[0] >= dur // 2]
        if len(late) >= 2 and late[-1][0] > late[0][0]:
            got = sum(b for _, b in late[1:])
            steady.append(got * 8 * 10**12 / (late[-1][0] - late[0][0]))
    delivered = sum(x.bytes_delivered for x in xs)
    new_pdus = sum(x.new_pdus for x in xs)
    goodput = delivered * 8 * 10**12 / dur if dur else 0.0
    switches = [n for n in fab.nodes.values() if isinstance(n, EsunSwitch)]
    steady_bps = sum(steady) / len(steady) if steady else 0.0
    out = {
        "xpus": len(xs),
        "link_bps": rate,
        "txns_offered": sum(x.txns_offered for x in xs),
        "txns_delivered": sum(x.txns_delivered for x in xs),
        "bytes_delivered": delivered,
        "goodput_bps": round(goodput),
        "goodput_per_xpu_bps": round(goodput / len(xs)) if xs else 0,
        "steady_goodput_bps": round(steady_bps),
        "steady_efficiency_pct": round(100 * steady_bps / rate, 3) if rate else 0.0,
        "latency_p50_ps": percentile(lat, 50),
        "latency_p99_ps": percentile(lat, 99),
        "latency_mean_ps": round(sum(lat) / len(lat)) if lat else None,
        "read_latency_p50_ps": percentile(rlat, 50),
        "read_latency_p99_ps": percentile(rlat, 99),
        "frames": sum(x.frames_sent for x in xs),
        "new_pdus": new_pdus,
        "mean_txns_per_frame": round(sum(x.txns_packed for x in xs) / new_pdus, 4)
        if new_pdus else 0.0,
        "retransmissions": sum(x.retransmissions for x in xs),
        "timeouts": sum(x.timeouts for x in xs),
        "nacks": sum(x.nacks_sent for x in xs),
        "standalone_acks": sum(x.acks_sent for x in xs),
        "duplicates": sum(x.duplicates for x in xs),
        "link_errors": sum(x.link_errors for x in xs) + sum(s.link_errors for s in switches),
        "ttl_drops": sum(s.ttl_drops for s in switches),
        "ce_received": sum(x.ce_received for x in xs),
        "queued_txns": sum(len(x.packer) for x in xs),
    }
    if any(s.cbfc is not None for s in switches):
        ports: list[Any] = [x.port for x in xs]
        for sw in switches:
            ports.extend(sw.ports.values())
        ports = [p for p in ports if isinstance(p, CreditFlowControl)]
        out["cbfc_stalls"] = sum(p.cbfc_stalls for p in ports)
        out["cf_updates"] = sum(p.cf_updates for p in ports)
        out["cc_updates"] = sum(p.cc_updates for p in ports)
        out["pfc_frames"] = sum(sum(sw.pause_sent.values()) for sw in switches)
        out["switch_drops"] = sum(sw.drops for sw in switches)
    hdr = scenario.params.get("header")
    if hdr in OVERHEAD_STACK:
        out["saturation_goodput_pct"] = round(expected_goodput_pct(
            hdr, scenario.params["txn_bytes"], scenario.params["max_pdu_bytes"],
            scenario.params["txn_hdr_bytes"]), 4)
    return out

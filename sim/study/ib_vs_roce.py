"""The ``ib_vs_roce`` study: the same topology and traffic run with ``fabric = "roce"`` and
``fabric = "ib"`` (:func:`sim.scenarios.common.fabric_setup`), one table and one figure
(``lossless ib-vs-roce``: docs/reference/ib-vs-roce.md; what it shows:
docs/explanation/infiniband.md, "The study: lossless ib-vs-roce").

A study, not a scenario: a scenario is one fabric and one run, this is eight runs.  Cases:

* ``incast``: the ``incast`` built-in itself (``senders``:1 through one switch, endless
  line-rate flows for ``duration_ms``), so its roce row is that scenario's own summary.
* ``victim``: congestion spreading.  Two leaves under one spine
  (:func:`sim.fabric.topology.leaf_spine`, 5 hosts per leaf): hosts 0..3 of leaf 0 and
  hosts 1..4 of leaf 1 each send ``flow_kb`` to host 0 of leaf 1 (an 8:1 incast), host 4
  of leaf 0 sends an endless line-rate victim flow to host 1 of leaf 1, whose own link is
  idle.  The run lasts while the incast does (checked every 5 us, at most ``duration_ms``).
  The victim shares only the leaf 0 -> spine -> leaf 1 path with four incast flows:
  whatever it loses is spread congestion (PFC pauses that path; credits of its VL run out
  when the next switch's input buffer fills with incast packets).  FCT p50/p99 are the
  incast flows'.
* ``allreduce`` / ``alltoall``: ``lossless collective`` (:func:`sim.scenarios.collective.
  run_size`) of ``coll_size`` bytes on a rail fabric of ``nodes`` x ``gpus_per_node`` (2 spines)
  without NVLink (every hop through the network) at ``coll_gbps``; goodput is busbw, FCT
  the transfers' p50/p99 start-to-receipt time.

Both fabrics carry the same payload per packet: 1024 bytes with RoCEv2's headers (1082-byte
frames) or InfiniBand's (1050-byte packets), 4096 in the collectives (4154 and 4122 bytes;
``wire.linkstack``).  Each row: ``goodput_gbps`` (payload delivered by the case's flows over
the run: frame bytes less each frame's headers; or busbw in Gb/s),
``fct_p50_us``/``fct_p99_us``, ``max_queue_bytes`` (deepest switch egress queue),
``pfc_pauses`` (PFC frames sent), ``credit_stall_us`` (head packets waiting for credits,
summed over all IB ports), ``ooo_packets`` (out-of-order arrivals, None while the simulator
does not count them), ``victim_gbps`` and ``drops``.  None where a figure does not apply.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim.scenarios.base import Param, resolve_params
from sim.scenarios.common import TC, in_range, pos

__all__ = ["CASES", "COLUMNS", "PARAMS", "figure", "format_table", "run"]

CASES = ("incast", "victim", "allreduce", "alltoall")
#: ``cc = "native"``: each fabric's own congestion control.
NATIVE_CC = {"roce": "dcqcn", "ib": "ibcc"}
#: Victim case: how often the run checks whether the incast is over (5 us).
STEP_PS = 5_000_000
FABRICS = ("roce", "ib")


def _size(v: str) -> str | None:
    from sim.workloads.nccl_tests import parse_size

    try:
        parse_size(v)
    except ValueError as e:
        return str(e)
    return None


PARAMS: tuple[Param, ...] = (
    Param("senders", 8, "incast and victim cases: incast degree (victim: 8 only)",
          in_range(2, 64)),
    Param("link_gbps", 100.0, "incast and victim cases: link rate, Gb/s", pos),
    Param("duration_ms", 0.5, "incast and victim cases: simulated time, ms", pos),
    Param("flow_kb", 256.0, "victim case: bytes each incast flow sends, KB", pos),
    Param("coll_size", "1M", "collective cases: nccl-tests size", _size),
    Param("nodes", 4, "collective cases: rail nodes", in_range(2, 64)),
    Param("gpus_per_node", 4, "collective cases: GPUs (NICs, rail leaves) per node",
          in_range(1, 8)),
    Param("coll_gbps", 400.0, "collective cases: link rate, Gb/s", pos),
    Param("cases", "incast,victim,allreduce,alltoall", "the cases to run, comma-separated",
          None),
    Param("cc", "none", "congestion control: none (both fabrics) | native (roce: dcqcn, "
          "ib: ibcc)", lambda v: None if v in ("none", "native") else
          "must be 'none' or 'native'"),
    Param("ib_routing", "", "ib rows: '' (the topology's tables) | static | adaptive",
          lambda v: None if v in ("", "static", "adaptive") else
          "must be '', 'static' or 'adaptive'"),
)

#: (key, header, unit or format) of the printed table, in order.
COLUMNS = (("case", "case", "s"), ("fabric", "fabric", "s"),
           ("goodput_gbps", "goodput Gb/s", ".2f"), ("fct_p50_us", "FCT p50 us", ".1f"),
           ("fct_p99_us", "FCT p99 us", ".1f"), ("max_queue_bytes", "max queue B", "d"),
           ("pfc_pauses", "PFC pauses", "d"), ("credit_stall_us", "credit stall us", ".1f"),
           ("ooo_packets", "OOO pkts", "d"), ("victim_gbps", "victim Gb/s", ".2f"),
           ("drops", "drops", "d"))


def _pct(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (None for no values)."""
    if not values:
        return None
    v = sorted(values)
    return v[max(0, -(-len(v) * int(q * 100) // 100) - 1)]


def _payload(delivered: int, packet_bytes: int, header_bytes: int) -> int:
    """The payload in ``delivered`` bytes of one flow's frames of at most ``packet_bytes``
    (every frame full but the last)."""
    return delivered - -(-delivered // packet_bytes) * header_bytes


def _fabric_row(s: Mapping[str, Any], duration_ps: int, flows: Sequence[int],
                victim: int | None, packet_bytes: int, header_bytes: int) -> dict[str, Any]:
    """The figures of one packet-level run from ``Fabric.summary()`` ``s`` (the flows' frames
    of ``packet_bytes`` carry ``header_bytes`` of headers each)."""
    by = {f["id"]: f for f in s["flows"]}
    delivered = sum(_payload(by[i]["bytes_delivered"], packet_bytes, header_bytes)
                    for i in flows)
    fcts = [by[i]["fct_ps"] / 1e6 for i in flows if by[i]["fct_ps"] is not None]
    sw_ports = [p for p in s["ports"] if "pause_sent" in p]
    ooo = [f.get("ooo_packets") for f in s["flows"]]
    # finite flows all done: over the last completion, else over the run
    span_ps = max(fcts) * 1e6 if fcts and len(fcts) == len(flows) else duration_ps
    return {
        "goodput_gbps": delivered * 8 / span_ps * 1000,
        "fct_p50_us": _pct(fcts, 0.5), "fct_p99_us": _pct(fcts, 0.99),
        "max_queue_bytes": max((p["max_queue_bytes"] for p in sw_ports), default=0),
        "pfc_pauses": s["totals"].get("pauses_sent", 0),
        "credit_stall_us": sum(p.get("credit_stall_ps", 0) for p in s["ports"]) / 1e6,
        "ooo_packets": None if any(o is None for o in ooo) else sum(ooo),
        "victim_gbps": None if victim is None else by[victim]["throughput_bps"] / 1e9,
        "drops": s["totals"]["drops"],
    }


def _fabric_kw(p: Mapping[str, Any], fabric: str) -> dict[str, Any]:
    """The fabric-wide parameters of one row: ``fabric``, ``cc`` and IB routing."""
    kw: dict[str, Any] = {"fabric": fabric,
                          "cc": NATIVE_CC[fabric] if p["cc"] == "native" else "none"}
    if fabric == "ib":
        kw["ib_routing"] = p["ib_routing"]
    return kw


def _incast(p: Mapping[str, Any], fabric: str) -> dict[str, Any]:
    from sim.scenarios import get

    sc = get("incast").builder({"senders": p["senders"], "link_gbps": p["link_gbps"],
                                "duration_ms": p["duration_ms"], **_fabric_kw(p, fabric)})
    sc.fabric.run(sc.duration_ps)
    s = sc.fabric.summary()
    return _fabric_row(s, sc.duration_ps, [f["id"] for f in s["flows"]], None,
                       sc.params["packet_bytes"], sc.fabric.stack.header_bytes)


def _victim(p: Mapping[str, Any], fabric: str) -> dict[str, Any]:
    from sim.fabric.topology import leaf_spine
    from sim.nic.host import Flow
    from sim.scenarios.base import ScenarioError
    from sim.scenarios.common import (
        FABRIC_PARAMS,
        PAYLOAD_BYTES,
        fabric_setup,
        header_stack,
    )
    from sim.units import gbps, kb_to_bytes, ms_to_ps, prop_delay_ps

    if p["senders"] != 8:
        raise ScenarioError("parameter 'senders': the victim case is an 8:1 incast (4 senders "
                            "on each leaf); run it with senders=8 or leave it out of cases")
    fp = {k: q.default for k, q in FABRIC_PARAMS.items()}
    fp.update(link_gbps=p["link_gbps"], **_fabric_kw(p, fabric))
    stack = header_stack(fp)
    fp["packet_bytes"] = stack.frame_bytes(PAYLOAD_BYTES)  # 1082 B RoCEv2, 1050 B IB
    rate = gbps(p["link_gbps"])
    H = 5
    fs = fabric_setup(fp, H + 1, rate)
    t = leaf_spine(2, 1, H, rate, prop_delay_ps(fp["cable_m"]), fs.mmu, ecn=fs.ecn,
                   host_kw=fs.host_kw, switch_kw=fs.switch_kw, link_kw=fs.link_kw)
    fs.apply(t.fabric)
    a, b = t.hosts
    recv, size = b[0], kb_to_bytes(p["flow_kb"])
    senders = [*a[:4], *b[1:5]]
    for i, h in enumerate(senders):
        t.fabric.add_flow(Flow(i, h, recv, rate, tc=TC, packet_bytes=fp["packet_bytes"],
                               size_bytes=size))
    victim = len(senders)
    t.fabric.add_flow(Flow(victim, a[4], b[1], rate, tc=TC, packet_bytes=fp["packet_bytes"]))
    # run while the incast lasts (at most duration_ms), in steps of STEP_PS: the victim's
    # throughput is over that time, not after the incast has gone
    dur, fab, rx = ms_to_ps(p["duration_ms"]), t.fabric, t.fabric.nodes[recv]
    now = 0
    while now < dur and len(rx.fct_ps) < len(senders):
        now = min(now + STEP_PS, dur)
        fab.run(now)
    return _fabric_row(fab.summary(), now, list(range(len(senders))), victim,
                       fp["packet_bytes"], stack.header_bytes)


def _collective(p: Mapping[str, Any], fabric: str, name: str) -> dict[str, Any]:
    from sim.scenarios.collective import collective_params, run_size
    from sim.workloads.nccl_tests import parse_size

    # Ring Simple on the network alone: the comparison is of the fabrics (headers, flow
    # control, routing), not of NCCL's host side
    cp = resolve_params(collective_params(), {
        "nodes": p["nodes"], "gpus_per_node": p["gpus_per_node"], "nvlink": False,
        "link_gbps": p["coll_gbps"], "nccl_host": False, **_fabric_kw(p, fabric)})
    row = run_size(name, parse_size(p["coll_size"]), "rail", cp, algorithm="ring",
                   protocol="simple", inplace=False)
    c = row["counters"]
    tt = row.get("transfer_time_us") or {}
    busbw = row.get("busbw_GB_per_s")
    return {
        "goodput_gbps": None if busbw is None else busbw * 8,
        "fct_p50_us": tt.get("p50"), "fct_p99_us": tt.get("p99"),
        "max_queue_bytes": c["max_queue_bytes"], "pfc_pauses": c["pfc_pauses"],
        "credit_stall_us": c.get("credit_stall_ps", 0) / 1e6,
        "ooo_packets": c.get("ooo_packets"), "victim_gbps": None, "drops": c["drops"],
        "error": row["error"],
    }


def run(params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Every case on both fabrics: ``{"params": ..., "rows": [...]}`` (rows in case order,
    roce then ib).  Bad parameters are a ScenarioError naming the key."""
    from sim.scenarios.base import ScenarioError

    p = resolve_params(PARAMS, params)
    cases = [c.strip() for c in p["cases"].split(",") if c.strip()]
    bad = [c for c in cases if c not in CASES]
    if bad or not cases:
        raise ScenarioError(f"parameter 'cases': unknown case(s) {bad}; known: {list(CASES)}")
    rows = []
    for case in cases:
        for fabric in FABRICS:
            if case == "incast":
                r = _incast(p, fabric)
            elif case == "victim":
                r = _victim(p, fabric)
            else:
                r = _collective(p, fabric, case)
            rows.append({"case": case, "fabric": fabric, **r})
    return {"params": p, "rows": rows}


def format_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The one table: a header line and one line per row, '-' where a figure does not
    apply."""
    def cell(v: Any, fmt: str) -> str:
        if v is None:
            return "-"
        return format(v, fmt) if fmt != "d" else f"{int(v):,}"

    table = [[h for _k, h, _f in COLUMNS]]
    table += [[cell(r.get(k), f) for k, _h, f in COLUMNS] for r in rows]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(line, widths, strict=True)))
                     for line in table)


#: The panels of the figure: (row key, title, scale); a bar is left out where the figure
#: does not apply (None), marked "n/a".
_PANELS = (("goodput_gbps", "goodput (incast, victim) / busbw, Gb/s", 1),
           ("fct_p99_us", "FCT p99 (victim: incast flows; collectives: transfers), us", 1),
           ("max_queue_bytes", "deepest switch egress queue, KB", 1e-3),
           ("pfc_pauses", "PFC pause frames sent", 1),
           ("credit_stall_us", "credit stall (all IB ports summed), us", 1),
           ("victim_gbps", "victim flow during the incast, Gb/s", 1))


def figure(rows: Sequence[Mapping[str, Any]]) -> Any:
    """One figure, a panel per figure of the table, each case's roce and ib bars side by
    side (Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = list(dict.fromkeys(r["case"] for r in rows))
    by = {(r["case"], r["fabric"]): r for r in rows}
    fig, axes = plt.subplots(2, 3, figsize=(13, 7))
    colours = {"roce": "tab:blue", "ib": "tab:orange"}
    for ax, (key, title, scale) in zip(axes.flat, _PANELS, strict=True):
        for j, fabric in enumerate(FABRICS):
            for i, c in enumerate(cases):
                v = by.get((c, fabric), {}).get(key)
                x = i + (j - 0.5) * 0.4
                if v is None:
                    ax.annotate("n/a", (x, 0.02), xycoords=("data", "axes fraction"),
                                ha="center", va="bottom", fontsize=7, color=colours[fabric])
                    continue
                v *= scale
                ax.bar(x, v, width=0.4, color=colours[fabric],
                       label=fabric if i == 0 else None)
                ax.annotate(f"{v:,.0f}" if v >= 100 else f"{v:.3g}", (x, v), ha="center",
                            va="bottom", fontsize=7)
        ax.set_xticks(range(len(cases)), cases, fontsize=9)
        ax.set_xlim(-0.6, len(cases) - 0.4)
        ax.set_title(title, fontsize=9)
        ax.margins(y=0.15)
    axes.flat[0].legend(fontsize=9, loc="upper left")
    fig.suptitle("the same topology and traffic on RoCE (PFC) and InfiniBand (per-VL credits)",
                 fontsize=11)
    fig.tight_layout()
    return fig

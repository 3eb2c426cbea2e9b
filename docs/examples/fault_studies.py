"""The three fault studies of docs/explanation/faults.md ("Studies"), each a table (Markdown,
printed) and a figure (PNG, written by temp + rename: :func:`wire.atomic.atomic_file`).

    python docs/examples/fault_studies.py flap      [--png docs/img/fault_study_flap.png]
    python docs/examples/fault_studies.py loss      [--png docs/img/fault_study_loss.png]
    python docs/examples/fault_studies.py slow      [--png docs/img/fault_study_slow.png]

1. ``flap``: one NIC-to-leaf link down for ``D`` during a ring AllReduce on the
   rail-optimised fabric, RC go-back-N in the NICs: stall (operation time minus the
   fault-free one) against the local ACK timeout 4.096 µs x 2^t (:mod:`sim.nic.rc`) for a
   short and a long flap.
2. ``loss``: a frame loss rate on one NIC link, a single RC flow through it: goodput and
   retransmitted bytes with go-back-N and selective repeat.
3. ``slow``: degraded links (400G at 300/200/100G) and stragglers (ranks whose every send
   starts ``d`` late): busbw of the ring against the number and degree of slow elements,
   with the bound a ring paced by its slowest element allows.

Every run is the library (:func:`sim.scenarios.collective.build_fabric`,
:func:`sim.workloads.nccl.schedule`, :class:`sim.workloads.collective.CollectiveJob`,
:func:`sim.fabric.faults.schedule_faults`); every figure is simulated by this script on
this machine, nothing is copied from elsewhere.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sim.fabric.faults import Fault, schedule_faults
from sim.nic.host import ROCE_HEADER_BYTES
from sim.nic.rc import ack_timeout_ps
from sim.scenarios.base import resolve_params
from sim.scenarios.collective import build_fabric, collective_params
from sim.scenarios.common import collective_packet
from sim.units import PS_PER_S

MIB = 1 << 20
US_PS = 10**6
MS_PS = 10**9
S_PS = PS_PER_S

#: The fabric of every study: rail-optimised, 2 nodes x 4 GPUs (one NIC each, 400 Gb/s),
#: 2 spines, PFC, no congestion control, NVLink inside the nodes and PXN (the defaults of
#: ``lossless collective --fabric rail``).
SHAPE = {"nodes": 2, "gpus_per_node": 4}


@dataclass
class Outcome:
    """One run: ``time_ps`` (first start to last delivery; None when it did not complete),
    ``qp_error_ps`` (first QP error, None if none), RC counters summed over the hosts
    (``rc``), the fault log's drops by reason, and the wall time."""

    time_ps: int | None
    qp_error_ps: int | None
    rc: dict[str, int] = field(default_factory=dict)
    drops: dict[str, int] = field(default_factory=dict)
    nbytes: int = 0
    busbw_GB_per_s: float = 0.0
    wall_s: float = 0.0
    #: QPs moved by failover and the bytes they re-sent (``CollectiveJob(failover=True)``)
    failovers: int = 0
    resent_bytes: int = 0


def rail(given: Mapping[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
    """A fresh rail fabric (:data:`SHAPE` plus ``given`` ``-p`` values) and its resolved
    parameters."""
    p = collective_packet(resolve_params(collective_params(), {**SHAPE, **(given or {})}))
    return build_fabric("rail", p), p


def nic_link(rf: Any, rank: int) -> tuple[int, int]:
    """(leaf node, leaf port) of the link from rank ``rank``'s NIC to its rail leaf
    (:mod:`sim.fabric.rail`: leaf ``g`` port ``n`` goes to node ``n``'s GPU ``g``)."""
    node, gpu = divmod(rank, rf.gpus_per_node)
    return rf.leaves[gpu], node


def rc_totals(fab: Any) -> dict[str, int]:
    """RC counters summed over every flow of every reliable host."""
    keys = ("sent_frames", "retransmitted_frames", "retransmitted_bytes", "timeouts",
            "naks_sent", "duplicates", "out_of_sequence")
    out = dict.fromkeys(keys, 0)
    for h in fab.nodes.values():
        if not getattr(h, "reliable", False):
            continue
        for fid in h.rc_flows():
            st = h.rc_stats(fid)
            for k in keys:
                out[k] += st.get(k, 0)
    return out


def first_qp_error(fab: Any) -> int | None:
    errs = [t for h in fab.nodes.values() for t in getattr(h, "qp_error_ps", {}).values()]
    return min(errs) if errs else None


def _drops(fab: Any) -> dict[str, int]:
    """Frames lost, by reason: the faults' (``link_down``, ``corrupt``) and the switches'
    (``switch``: no route after a reroute, or a full buffer)."""
    from sim.net.switch import Switch

    log = getattr(fab, "fault_log", None)
    out = dict(log.drops) if log is not None else {}
    sw = sum(n.drops for n in fab.nodes.values() if isinstance(n, Switch))
    if sw:
        out["switch"] = sw
    return out


def _drops_text(d: dict[str, int]) -> str:
    return ", ".join(f"{v} {k}" for k, v in sorted(d.items())) or "0"


def _drive(fab: Any, done: Any, limit_ps: int, stop_on_qp_error: bool = True) -> None:
    """Run the engine in slices until ``done()``, a QP error (``stop_on_qp_error``), or
    ``limit_ps``; the slice doubles up to 50 ms (a stall of seconds costs few slices; the
    times measured are the events', not the slices')."""
    eng = fab.engine
    step = 20 * US_PS
    while not done() and eng.now_ps < limit_ps and not (
            stop_on_qp_error and first_qp_error(fab) is not None):
        fab.run(min(eng.now_ps + step, limit_ps))
        step = min(step * 2, 50 * MS_PS)


def allreduce(nbytes: int, *, given: Mapping[str, Any] | None = None,
              faults: Callable[[Any], Sequence[Fault]] | None = None,
              delay_ps: Mapping[int, int] | None = None, failover: bool = False,
              limit_ps: int = 60 * S_PS, channels: int | None = None) -> Outcome:
    """One ring AllReduce of ``nbytes`` (nccl-tests' ``-b``) on a fresh :func:`rail` fabric
    with ``faults(rail_fabric)`` scheduled from time 0 (the start of the operation), stragglers
    ``delay_ps`` ({rank: ps}) and, with ``failover``, a failed QP's messages moved to the
    next rail (:class:`sim.workloads.collective.CollectiveJob`); stops at the last delivery,
    the first QP error (without ``failover``; NCCL's communicator is then in error), the
    job's failure or ``limit_ps``."""
    from sim.units import gbps, ns_to_ps
    from sim.workloads.collective import CollectiveJob
    from sim.workloads.nccl import default_channels, schedule
    from sim.workloads.nccl_tests import algbw_busbw, coll_counts

    t0 = time.perf_counter()
    rf, p = rail(given)
    fab = rf.fabric
    n = len(rf.ranks)
    counts = coll_counts("allreduce", nbytes, "float", n)
    sch = schedule("allreduce", n, counts.param_count, "float",
                   nchannels=channels or default_channels(rf.nodes, rf.gpus_per_node),
                   gpus_per_node=rf.gpus_per_node)
    if faults is not None:
        schedule_faults(fab, list(faults(rf)))
    job = CollectiveJob(sch, fab, rf.ranks, mtu_bytes=p["packet_bytes"] - ROCE_HEADER_BYTES,
                        gpus_per_node=rf.gpus_per_node, nvlink_bps=gbps(p["nvlink_gbps"]),
                        nvlink_latency_ps=ns_to_ps(p["nvlink_latency_ns"]),
                        pxn=p["pxn"], delay_ps=delay_ps,
                        **({"failover": True} if failover else {}))
    job.start()
    _drive(fab, lambda: job.done or getattr(job, "failed", None) is not None, limit_ps,
           stop_on_qp_error=not failover)
    out = Outcome(job.run.time_ps if job.done else None, first_qp_error(fab),
                  rc_totals(fab), _drops(fab), counts.size_bytes)
    moved = getattr(job.run, "failovers", [])
    out.failovers, out.resent_bytes = len(moved), sum(m["resent_bytes"] for m in moved)
    if out.time_ps:
        out.busbw_GB_per_s = algbw_busbw("allreduce", counts.param_count, "float", n,
                                         out.time_ps / 1e12)[1]
    out.wall_s = time.perf_counter() - t0
    return out


def _fmt_ps(t_ps: int | None) -> str:
    if t_ps is None:
        return "—"
    if t_ps >= S_PS:
        return f"{t_ps / S_PS:.3f} s"
    if t_ps >= MS_PS:
        return f"{t_ps / MS_PS:.3f} ms"
    return f"{t_ps / US_PS:.1f} µs"


# ------------------------------------------------------------------------------- study 1
FLAP_AT_PS = 200 * US_PS
FLAP_NBYTES = 64 * MIB
FLAPS_PS = (100 * US_PS, 10 * MS_PS, S_PS)
TIMEOUTS = (4, 6, 8, 10, 12, 14, 16, 18, 20)


def flap(nbytes: int = FLAP_NBYTES, flaps_ps: Sequence[int] = FLAPS_PS,
         timeouts: Sequence[int] = TIMEOUTS, retry_cnt: int = 7, at_ps: int = FLAP_AT_PS,
         given: Mapping[str, Any] | None = None, failover: bool = True) -> dict[str, Any]:
    """Study 1: rank 0's NIC link down from ``at_ps`` for each of ``flaps_ps`` during a ring
    AllReduce of ``nbytes`` (fabric :data:`SHAPE` and ``given``), RC go-back-N with each
    local ACK timeout exponent of ``timeouts`` and ``retry_cnt``; a run that ends in a QP
    error is run again with ``failover`` (row key ``failover``: its outcome and stall).
    Returns the fault-free run (RC on: its ACKs cost a little) and the rows."""
    rc = {"reliable": True, "retry_cnt": retry_cnt}
    base = allreduce(nbytes, given={**(given or {}), **rc})
    rows = []
    for d in flaps_ps:
        for t in timeouts:
            kw: dict[str, Any] = {
                "faults": lambda rf, d=d: [Fault("link_down", *nic_link(rf, 0), at_ps=at_ps,
                                                 until_ps=at_ps + d)],
                "given": {**(given or {}), **rc, "ack_timeout": t}}
            o = allreduce(nbytes, **kw)
            row = {"flap_ps": d, "ack_timeout": t, "timeout_ps": ack_timeout_ps(t),
                   "outcome": o,
                   "stall_ps": None if o.time_ps is None else o.time_ps - base.time_ps}
            if failover and o.qp_error_ps is not None:
                f = allreduce(nbytes, failover=True, **kw)
                row["failover"] = {"outcome": f, "stall_ps": None if f.time_ps is None
                                   else f.time_ps - base.time_ps}
            rows.append(row)
    return {"base": base, "rows": rows, "nbytes": nbytes, "retry_cnt": retry_cnt,
            "at_ps": at_ps}


def print_flap(res: dict[str, Any]) -> None:
    b = res["base"]
    print(f"fault-free: {_fmt_ps(b.time_ps)}, busbw {b.busbw_GB_per_s:.2f} GB/s")
    print("| flap | ack_timeout (timeout) | operation time | stall | timeouts | "
          "retransmitted (MB) | drops | QP error at | wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in res["rows"]:
        o = r["outcome"]
        print(f"| {_fmt_ps(r['flap_ps'])} | {r['ack_timeout']} ({_fmt_ps(r['timeout_ps'])}) | "
              f"{_fmt_ps(o.time_ps)} | {_fmt_ps(r['stall_ps'])} | {o.rc['timeouts']} | "
              f"{o.rc['retransmitted_bytes'] / 1e6:.2f} | {_drops_text(o.drops)} | "
              f"{_fmt_ps(o.qp_error_ps)} | {o.wall_s:.1f} |", flush=True)
    moved = [r for r in res["rows"] if "failover" in r]
    if moved:
        print("\nthe QP errors again with failover (the failed QP's messages to the next rail)")
        print("| flap | ack_timeout | QP error at | operation time | stall | QPs moved | "
              "re-sent (MB) | wall (s) |")
        print("|---|---|---|---|---|---|---|---|")
    for r in moved:
        f = r["failover"]["outcome"]
        print(f"| {_fmt_ps(r['flap_ps'])} | {r['ack_timeout']} | "
              f"{_fmt_ps(r['outcome'].qp_error_ps)} | {_fmt_ps(f.time_ps)} | "
              f"{_fmt_ps(r['failover']['stall_ps'])} | {f.failovers} | "
              f"{f.resent_bytes / 1e6:.2f} | {f.wall_s:.1f} |", flush=True)


# ------------------------------------------------------------------------------- study 2
LOSS_RATES = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2)
LOSS_FRAMES = 65_536


def single_flow(nframes: int, *, loss_rate: float = 0.0, retransmit: str = "gbn",
                ack_timeout: int = 20, seed: int = 0, limit_ps: int = 120 * S_PS,
                given: Mapping[str, Any] | None = None) -> Outcome:
    """One RC flow of ``nframes`` full frames (``packet_bytes`` each) from rank 0's NIC to
    the NIC of GPU 0 of node 1 (the same rail: NIC, leaf 0, NIC) at line rate,
    ``loss_rate`` on rank 0's NIC link (both directions: data, ACKs and NAKs).  ``time_ps``
    is the flow's completion time (first frame sent to last byte received)."""
    from sim.nic.host import Flow

    t0 = time.perf_counter()
    rf, p = rail({**(given or {}), "reliable": True, "retransmit": retransmit,
                  "ack_timeout": ack_timeout, "seed": seed})
    fab = rf.fabric
    src, dst = rf.ranks[0], rf.ranks[rf.gpus_per_node]
    size = nframes * p["packet_bytes"]
    fab.add_flow(Flow(1, src, dst, fab.nodes[src].port.rate_bps, packet_bytes=p["packet_bytes"],
                      size_bytes=size))
    if loss_rate:
        schedule_faults(fab, [Fault("loss", *nic_link(rf, 0), loss_rate=loss_rate)],
                        seed=seed)
    rx = fab.nodes[dst]
    _drive(fab, lambda: 1 in rx.fct_ps, limit_ps)
    out = Outcome(rx.fct_ps.get(1), first_qp_error(fab), rc_totals(fab), _drops(fab), size)
    out.wall_s = time.perf_counter() - t0
    return out


def goodput_gbps(o: Outcome, payload_bytes: int) -> float:
    return payload_bytes * 8 / (o.time_ps / 1e12) / 1e9 if o.time_ps else 0.0


def loss(rates: Sequence[float] = LOSS_RATES, nframes: int = LOSS_FRAMES,
         allreduce_rates: Sequence[float] = (1e-4, 1e-3), allreduce_bytes: int = 64 * MIB,
         seed: int = 0, given: Mapping[str, Any] | None = None,
         short_rates: Sequence[float] = (1e-4, 1e-3, 1e-2), short_timeout: int = 4
         ) -> dict[str, Any]:
    """Study 2: :func:`single_flow` of ``nframes`` frames without loss and at each rate, with
    go-back-N and selective repeat, NCCL's ACK timeout (20) and, at ``short_rates``, a short
    one (``short_timeout``); then the ring AllReduce of ``allreduce_bytes`` (RC on) without
    loss and with the same loss on rank 0's NIC link at ``allreduce_rates`` (fabric
    :data:`SHAPE` and ``given``)."""
    _, p = rail(given)
    payload = nframes * (p["packet_bytes"] - ROCE_HEADER_BYTES)
    base = single_flow(nframes, seed=seed, given=given)
    rows = [{"rate": r, "mode": m, "ack_timeout": t, "outcome": single_flow(
        nframes, loss_rate=r, retransmit=m, ack_timeout=t, seed=seed, given=given)}
        for t, rs in ((20, rates), (short_timeout, short_rates)) for r in rs
        for m in ("gbn", "sr")]
    ar_base = allreduce(allreduce_bytes, given={**(given or {}), "reliable": True,
                                                "seed": seed})
    ar = []
    for r in allreduce_rates:
        for m in ("gbn", "sr"):
            o = allreduce(allreduce_bytes,
                          faults=lambda rf, r=r: [Fault("loss", *nic_link(rf, 0), loss_rate=r)],
                          given={**(given or {}), "reliable": True, "retransmit": m,
                                 "seed": seed})
            ar.append({"rate": r, "mode": m, "outcome": o})
    return {"base": base, "rows": rows, "payload_bytes": payload, "nframes": nframes,
            "ar_base": ar_base, "ar": ar, "allreduce_bytes": allreduce_bytes}


def print_loss(res: dict[str, Any]) -> None:
    pay = res["payload_bytes"]
    b = res["base"]
    print(f"single flow, {res['nframes']} frames, no loss: {_fmt_ps(b.time_ps)}, goodput "
          f"{goodput_gbps(b, pay):.2f} Gb/s")
    print("| loss rate | ack_timeout | mode | frames lost (data, ACK, NAK) | goodput (Gb/s) | "
          "of loss-free | retransmitted frames (MB) | NAKs | timeouts | wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    g0 = goodput_gbps(b, pay)
    for r in res["rows"]:
        o = r["outcome"]
        g = goodput_gbps(o, pay)
        print(f"| {r['rate']:.0e} | {r['ack_timeout']} | {r['mode']} | "
              f"{sum(o.drops.values())} | {g:.2f} | "
              f"{g / g0:.2%} | {o.rc['retransmitted_frames']} "
              f"({o.rc['retransmitted_bytes'] / 1e6:.2f}) | {o.rc['naks_sent']} | "
              f"{o.rc['timeouts']} | {o.wall_s:.1f} |", flush=True)
    a0 = res["ar_base"]
    print(f"\nring AllReduce {res['allreduce_bytes'] // MIB} MiB, RC on, no loss: "
          f"{_fmt_ps(a0.time_ps)}, busbw {a0.busbw_GB_per_s:.2f} GB/s")
    print("| loss rate | mode | frames lost | time | busbw (GB/s) | retransmitted (MB) | "
          "NAKs | timeouts | wall (s) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in res["ar"]:
        o = r["outcome"]
        print(f"| {r['rate']:.0e} | {r['mode']} | {sum(o.drops.values())} | "
              f"{_fmt_ps(o.time_ps)} | {o.busbw_GB_per_s:.2f} | "
              f"{o.rc['retransmitted_bytes'] / 1e6:.2f} | {o.rc['naks_sent']} | "
              f"{o.rc['timeouts']} | {o.wall_s:.1f} |", flush=True)


# ------------------------------------------------------------------------------- study 3
SLOW_NBYTES = 64 * MIB
DEGRADED_GBPS = (300.0, 200.0, 100.0)
#: rank sets of the slow elements: 1, 2 (two rails of node 0), 4 (all of node 0), 8 (all)
SLOW_SETS = ((0,), (0, 1), (0, 1, 2, 3), tuple(range(8)))
DELAYS_US = (1, 2, 5, 10, 20, 50, 100, 200)


def slow(nbytes: int = SLOW_NBYTES, rates_gbps: Sequence[float] = DEGRADED_GBPS,
         sets: Sequence[Sequence[int]] = SLOW_SETS, delays_us: Sequence[float] = DELAYS_US,
         given: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Study 3: the ring AllReduce of ``nbytes`` (fabric :data:`SHAPE` and ``given``) with
    the NIC links of each rank set in ``sets`` degraded to each of ``rates_gbps`` (the whole
    run), then with each rank set late by each of ``delays_us`` on every send
    (``CollectiveJob(delay_ps=...)``)."""
    base = allreduce(nbytes, given=given)
    deg, late = [], []
    for s in sets:
        for g in rates_gbps:
            deg.append({"ranks": tuple(s), "gbps": g, "outcome": allreduce(
                nbytes, given=given, faults=lambda rf, s=s, g=g: [
                    Fault("degrade", *nic_link(rf, r), rate_gbps=g) for r in s])})
    for s in sets:
        for d in delays_us:
            late.append({"ranks": tuple(s), "delay_us": d, "outcome": allreduce(
                nbytes, given=given, delay_ps={r: round(d * US_PS) for r in s})})
    rf, p = rail(given)
    return {"base": base, "degraded": deg, "late": late, "nbytes": nbytes,
            "link_gbps": p["link_gbps"], "packet_bytes": p["packet_bytes"],
            "nranks": len(rf.ranks), "channels": rf.gpus_per_node,
            "slice_ps": slice_time_ps(nbytes, rf, p)}


def slice_time_ps(nbytes: int, rf: Any, p: Mapping[str, Any]) -> int:
    """Time one ring send (a slice: the largest transfer of the schedule, in RoCEv2 frames)
    takes on a NIC link at ``link_gbps``."""
    from sim.workloads.collective import frames_bytes
    from sim.workloads.nccl import default_channels, schedule
    from sim.workloads.nccl_tests import coll_counts

    n = len(rf.ranks)
    sch = schedule("allreduce", n, coll_counts("allreduce", nbytes, "float", n).param_count,
                   "float", nchannels=default_channels(rf.nodes, rf.gpus_per_node),
                   gpus_per_node=rf.gpus_per_node)
    big = max(t.nbytes for t in sch.transfers)
    wire = frames_bytes(big, p["packet_bytes"] - ROCE_HEADER_BYTES)
    return round(wire * 8 * 1e12 / (p["link_gbps"] * 1e9))


def ring_bound_GB_per_s(link_gbps: float, packet_bytes: int, channels: int) -> float:
    """busbw a ring AllReduce cannot pass when every channel's ring crosses one NIC link of
    ``link_gbps`` each way (one channel per NIC): ``channels`` x the link's payload rate
    (RoCEv2 headers, ``ROCE_HEADER_BYTES`` of ``packet_bytes``; docs/explanation/collectives.md
    study 1)."""
    return channels * link_gbps / 8 * (packet_bytes - ROCE_HEADER_BYTES) / packet_bytes


def print_slow(res: dict[str, Any]) -> None:
    b = res["base"]
    lk, pk, ch, n = res["link_gbps"], res["packet_bytes"], res["channels"], res["nranks"]
    print(f"fault-free: {_fmt_ps(b.time_ps)}, busbw {b.busbw_GB_per_s:.2f} GB/s "
          f"(bound {ring_bound_GB_per_s(lk, pk, ch):.1f})")
    print("| degraded NIC links | rate (Gb/s) | time | busbw (GB/s) | min-link bound | "
          "capacity-average bound | wall (s) |")
    print("|---|---|---|---|---|---|---|")
    for r in res["degraded"]:
        o, g, k = r["outcome"], r["gbps"], len(r["ranks"])
        avg = ((n - k) * lk + k * g) / n
        print(f"| {k} (ranks {', '.join(map(str, r['ranks']))}) | {g:.0f} | "
              f"{_fmt_ps(o.time_ps)} | {o.busbw_GB_per_s:.2f} | "
              f"{ring_bound_GB_per_s(g, pk, ch):.1f} | {ring_bound_GB_per_s(avg, pk, ch):.1f} | "
              f"{o.wall_s:.1f} |", flush=True)
    print("\n| late ranks | delay per send (µs) | time | stall | busbw (GB/s) | wall (s) |")
    print("|---|---|---|---|---|---|")
    for r in res["late"]:
        o = r["outcome"]
        print(f"| {len(r['ranks'])} | {r['delay_us']:g} | {_fmt_ps(o.time_ps)} | "
              f"{_fmt_ps(o.time_ps - b.time_ps)} | {o.busbw_GB_per_s:.2f} | {o.wall_s:.1f} |",
              flush=True)


# ------------------------------------------------------------------------------- figures
def _figure(nrows: int = 1, ncols: int = 1, **kw: Any) -> tuple[Any, Any]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(nrows, ncols, **kw)


def _save(fig: Any, path: str) -> None:
    from wire.atomic import atomic_file

    fig.tight_layout()
    with atomic_file(path, "wb") as f:  # temp + rename: an earlier figure stays whole
        fig.savefig(f, format="png", dpi=100)
    import matplotlib.pyplot as plt

    plt.close(fig)


def plot_flap(res: dict[str, Any], path: str) -> None:
    fig, ax = _figure(figsize=(9, 5.5))
    styles = (("tab:blue", "o", 11), ("tab:orange", "s", 7), ("tab:green", "^", 5))
    xs_all = sorted({r["timeout_ps"] for r in res["rows"]})
    for i, d in enumerate(sorted({r["flap_ps"] for r in res["rows"]})):
        rows = [r for r in res["rows"] if r["flap_ps"] == d]
        ok = [r for r in rows if r["stall_ps"] is not None]
        c, m, ms = styles[i % len(styles)]
        ax.plot([r["timeout_ps"] / S_PS for r in ok], [r["stall_ps"] / S_PS for r in ok],
                "-", marker=m, ms=ms, color=c, mfc="none" if i == 0 else c,
                label=f"link down {_fmt_ps(d)}: stall")
        bad = [r for r in rows if r["stall_ps"] is None]
        if bad:
            ax.plot([r["timeout_ps"] / S_PS for r in bad],
                    [(r["outcome"].qp_error_ps - res["at_ps"]) / S_PS for r in bad],
                    "x" if i % 2 else "+", color=c, ms=ms + 5, mew=2, ls="none",
                    label=f"link down {_fmt_ps(d)}: QP error (operation fails), "
                          f"time after the link went down")
        moved = [r for r in bad if "failover" in r and r["failover"]["stall_ps"] is not None]
        if moved:
            ax.plot([r["timeout_ps"] / S_PS for r in moved],
                    [r["failover"]["stall_ps"] / S_PS for r in moved], "--", marker="D",
                    ms=14 - 2 * i, color=c, mfc="none", lw=0.8,
                    label=f"link down {_fmt_ps(d)}: stall with failover to the next rail")
        ax.axhline(d / S_PS, color=c, lw=0.8, ls=":")
    ax.plot([x / S_PS for x in xs_all], [x / S_PS for x in xs_all], "k--", lw=0.8,
            label="one timeout")
    ax.plot([x / S_PS for x in xs_all], [(res["retry_cnt"] + 1) * x / S_PS for x in xs_all],
            "k-.", lw=0.8, label=f"{res['retry_cnt'] + 1} timeouts (retry_cnt + 1)")
    nccl = ack_timeout_ps(20) / S_PS
    ax.axvline(nccl, color="grey", lw=0.8)
    ax.text(nccl * 0.9, 3e-4, "NCCL default\nNCCL_IB_TIMEOUT 20", fontsize=8, ha="right",
            color="dimgrey")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([x / S_PS for x in xs_all])
    ax.set_xticklabels([f"t={t}\n{_fmt_ps(x).replace(' ', '')}" for t, x in zip(
        sorted({r["ack_timeout"] for r in res["rows"]}), xs_all, strict=True)], fontsize=8)
    ax.minorticks_off()
    ax.set_xlabel("local ACK timeout 4.096 µs x 2^t")
    ax.set_ylabel("stall: operation time - fault-free (s)")
    b = res["base"]
    ax.set_title(f"Rank 0's NIC link down at {_fmt_ps(res['at_ps'])} during a ring AllReduce "
                 f"of {res['nbytes'] // MIB} MiB (fault-free {_fmt_ps(b.time_ps)})\n"
                 f"rail 2 nodes x 4 GPUs, 400G, RC go-back-N, retry_cnt {res['retry_cnt']}; "
                 f"dotted: each flap's length", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    _save(fig, path)


def plot_loss(res: dict[str, Any], path: str) -> None:
    fig, (a1, a2) = _figure(1, 2, figsize=(11, 4.8))
    pay = res["payload_bytes"]
    g0 = goodput_gbps(res["base"], pay)
    timeouts = sorted({r["ack_timeout"] for r in res["rows"]}, reverse=True)
    for m, c, name in (("gbn", "tab:red", "go-back-N"), ("sr", "tab:blue", "selective repeat")):
        for t in timeouts:
            rows = [r for r in res["rows"] if r["mode"] == m and r["ack_timeout"] == t]
            ls = "-" if t == timeouts[0] else "--"
            lab = f"{name}, ack_timeout {t} ({_fmt_ps(ack_timeout_ps(t))})"
            xs = [r["rate"] for r in rows]
            a1.plot(xs, [max(goodput_gbps(r["outcome"], pay), 1e-3) for r in rows], ls,
                    marker="o" if t == timeouts[0] else "s", color=c, label=lab,
                    mfc=c if t == timeouts[0] else "white")
            a2.plot(xs, [max(r["outcome"].rc["retransmitted_bytes"], 1) for r in rows], ls,
                    marker="o" if t == timeouts[0] else "s", color=c, label=lab,
                    mfc=c if t == timeouts[0] else "white")
    a1.axhline(g0, color="k", lw=0.8, ls=":", label=f"no loss ({g0:.1f} Gb/s)")
    a1.set_yscale("log")
    a1.set_ylabel("goodput (payload Gb/s, log)")
    a1.set_title("goodput", fontsize=10)
    a2.set_ylabel("retransmitted bytes (1 = none)")
    a2.set_yscale("log")
    a2.set_title("bytes retransmitted", fontsize=10)
    for a in (a1, a2):
        a.set_xscale("log")
        a.set_xlabel("frame loss rate on the NIC link (both directions)")
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7, loc="lower left" if a is a1 else "upper left")
    fig.suptitle(f"One RC flow of {res['nframes']:,} frames ({pay / 2**20:.0f} MiB) at 400 "
                 f"Gb/s over a lossy NIC link (rail 2 x 4, NIC - leaf - NIC)", fontsize=10)
    _save(fig, path)


def plot_slow(res: dict[str, Any], path: str) -> None:
    fig, (a1, a2) = _figure(1, 2, figsize=(11, 4.5))
    lk, pk, ch, n = res["link_gbps"], res["packet_bytes"], res["channels"], res["nranks"]
    b0 = res["base"].busbw_GB_per_s
    rates = sorted({r["gbps"] for r in res["degraded"]} | {lk})
    sets = sorted({r["ranks"] for r in res["degraded"]}, key=len)
    sizes = (12, 9, 6, 3)
    for i, s in enumerate(sets):
        rows = sorted((r for r in res["degraded"] if r["ranks"] == s), key=lambda r: r["gbps"])
        a1.plot([r["gbps"] for r in rows] + [lk],
                [r["outcome"].busbw_GB_per_s for r in rows] + [b0], "o-",
                ms=sizes[i % 4], mfc="none" if i == 0 else None,
                label=f"{len(s)} slow NIC link{'s' if len(s) > 1 else ''}")
    a1.plot(rates, [ring_bound_GB_per_s(g, pk, ch) for g in rates], "k--", lw=0.8,
            label="min-link bound (every ring at the slowest link)")
    a1.plot(rates, [ring_bound_GB_per_s(((n - 1) * lk + g) / n, pk, ch) for g in rates], "k:",
            lw=0.8,
            label="1 slow link, if load followed capacity")
    a1.set_xlabel("rate of the degraded links (Gb/s)")
    a1.set_ylabel("busbw (GB/s)")
    a1.set_title("degraded NIC links (400G running slower)", fontsize=10)
    for s in sorted({r["ranks"] for r in res["late"]}, key=len):
        rows = [r for r in res["late"] if r["ranks"] == s]
        a2.plot([0] + [r["delay_us"] for r in rows],
                [b0] + [r["outcome"].busbw_GB_per_s for r in rows], "o-",
                label=f"{len(s)} late rank{'s' if len(s) > 1 else ''}")
    if res.get("slice_ps"):
        w = 3 * res["slice_ps"] / US_PS
        a2.axvline(w, color="grey", lw=0.8, ls=":")
        a2.text(w * 0.93, 20, f"3 slice times\n({w:.0f} µs)", fontsize=8, ha="right",
                color="dimgrey")
    a2.set_xscale("symlog", linthresh=1)
    a2.set_xlim(0, 1.3 * max([r["delay_us"] for r in res["late"]] or [1]))
    a2.set_xlabel("delay of every send of the late ranks (µs)")
    a2.set_ylabel("busbw (GB/s)")
    a2.set_title("stragglers", fontsize=10)
    for a in (a1, a2):
        a.set_ylim(bottom=0)
        a.grid(True, alpha=0.3)
        a.legend(fontsize=8)
    fig.suptitle(f"Ring AllReduce {res['nbytes'] // MIB} MiB, rail 2 nodes x 4 GPUs, 400G, "
                 f"4 channels; fault-free busbw {b0:.1f} GB/s", fontsize=10)
    _save(fig, path)


def _to_json(x: Any) -> Any:
    if isinstance(x, Outcome):
        return {"__outcome__": asdict(x)}
    if isinstance(x, dict):
        return {k: _to_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_to_json(v) for v in x]
    return x


def _from_json(x: Any) -> Any:
    if isinstance(x, dict):
        if "__outcome__" in x:
            return Outcome(**x["__outcome__"])
        return {k: _from_json(v) for k, v in x.items()}
    if isinstance(x, list):
        out = [_from_json(v) for v in x]
        return tuple(out) if out and all(isinstance(v, int) for v in out) else out
    return x


STUDIES = {"flap": (flap, print_flap, plot_flap), "loss": (loss, print_loss, plot_loss),
           "slow": (slow, print_slow, plot_slow)}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The fault studies of docs/explanation/faults.md.")
    ap.add_argument("study", choices=tuple(STUDIES))
    ap.add_argument("--png", help="figure to write (default docs/img/fault_study_STUDY.png)")
    ap.add_argument("--json", help="also write the results to this file (JSON)")
    ap.add_argument("--from-json", help="draw the table and figure from results written by "
                    "--json instead of running")
    a = ap.parse_args(argv)
    png = a.png or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "img",
                                f"fault_study_{a.study}.png")
    run, show, plot = STUDIES[a.study]
    t0 = time.perf_counter()
    if a.from_json:
        with open(a.from_json) as f:
            res = _from_json(json.load(f))
    else:
        res = run()
    if a.json:
        from wire.atomic import atomic_file

        with atomic_file(a.json, "w") as f:
            json.dump(_to_json(res), f)
    show(res)
    plot(res, png)
    print(f"{os.path.normpath(png)}; wall {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())

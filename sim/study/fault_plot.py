"""``faults_timeline.png``: what the faults of a run did, on one time axis
(docs/reference/results-folder.md, "PNG plots"; how to read it: docs/howto/inject-faults.md, "A
link down in a built-in scenario").  Drawn by :func:`sim.study.plot.figures` when summary.json's
``faults`` is the report of :mod:`sim.study.fault_report` (a run with faults), from it and the
``fault_*`` arrays of timeseries.npz.

Panels, top to bottom, sharing the time axis:

1. the faults: one row per faulted link or node, a bar per interval coloured by kind (link
   down, frame loss, degraded, NIC down, switch down, slow PCIe); reroutes are grey dashed
   lines through every panel;
2. throughput (Gb/s, per throughput bin) of the faulted links, both directions (solid), and of
   their ECMP siblings (dashed), with the delivered goodput of all flows (black);
3. retransmitted frames per bin (RC) and frames lost to the faults per bin; ACK timeouts per
   bin (triangles) and QP errors (red lines);
4. PFC: the pause state of the transmitters that were paused (the most paused first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["fault_figure", "has_faults", "KIND_COLORS", "MAX_PAUSE_ROWS", "collective_fault_figure",
           "write_collective_figure"]

#: Colour and legend text per fault kind.
KIND_COLORS = {"link_down": ("tab:red", "link down"), "loss": ("tab:orange", "frame loss"),
               "degrade": ("tab:purple", "degraded rate"), "nic_down": ("tab:brown",
                                                                       "NIC down"),
               "switch_down": ("black", "switch down"), "slow_pcie": ("tab:olive",
                                                                      "slow PCIe"),
               "straggler": ("tab:pink", "straggler")}
#: At most this many paused transmitters in the PFC panel.
MAX_PAUSE_ROWS = 8
#: A collective's series (200..400 bins) are drawn in at most this many bins (neighbours
#: summed), so a bin holds several frames of a link and the rates read as rates.
PLOT_BINS = 150



def _fault_strip(ax: Any, intervals: list, rows: list[str], target: Any, t: Any, end: int,
                 min_frac: float) -> None:
    """The top strip of a timeline: one bar per fault interval on its target's row (``target(
    iv)`` names the row, ``t`` converts ps to the axis unit), at least ``min_frac`` of the axis
    wide so an instant fault shows; one legend entry per kind."""
    seen: set[str] = set()
    for iv in intervals:
        y = len(rows) - 1 - rows.index(target(iv))
        color, text = KIND_COLORS.get(iv["kind"], ("tab:gray", iv["kind"]))
        t1 = iv["end_ps"] if iv["end_ps"] is not None else end
        ax.broken_barh([(t(iv["start_ps"]), max(t(t1 - iv["start_ps"]), t(end) * min_frac))],
                       (y + 0.15, 0.7), facecolors=color,
                       label=text if text not in seen else None)
        seen.add(text)
    ax.set_yticks([len(rows) - 1 - i + 0.5 for i in range(len(rows))], rows, fontsize="small")
    ax.set_ylim(0, max(len(rows), 1))


def _shade_recovery(ax: Any, intervals: list, t: Any, what: str, alpha: float) -> None:
    """Shade, on the throughput axis `ax`, each fault's span from its start to the recovery of
    `what` (recovered_at_ps; none when it did not recover), with one note above the axis."""
    spans = [(iv["start_ps"], iv["recovered_at_ps"]) for iv in intervals
             if iv.get("recovered_at_ps") is not None and iv["recovered_at_ps"] > iv["start_ps"]]
    for start_ps, back_ps in spans:
        ax.axvspan(t(start_ps), t(back_ps), color="tab:red", alpha=alpha, linewidth=0)
    if spans:
        ax.text(0.0, 1.01, f"shaded: from each fault to the recovery of {what}",
                transform=ax.transAxes, fontsize="x-small", color="0.3", va="bottom")


def has_faults(summary: Mapping[str, Any]) -> bool:
    """True for the summary of a run with faults (its ``faults`` is the report)."""
    return isinstance(summary.get("faults"), dict) and "intervals" in summary["faults"]


def _target(ctx: Any, iv: Mapping[str, Any]) -> str:
    n = iv["node"]
    if iv["kind"] in ("nic_down", "switch_down", "slow_pcie"):
        return ctx.node(n)
    p = iv.get("port", 0)
    return f"{ctx.node(n)}:p{p} <-> {ctx.peer(n, p)}"


def fault_figure(summary: Mapping[str, Any], ts: Mapping[str, Any], ctx: Any) -> Any:
    """The figure (not saved; module docstring); ``ctx`` is :mod:`sim.study.plot`'s context
    of the results (names, time unit)."""
    import matplotlib.pyplot as plt
    import numpy as np

    rep = summary["faults"]
    intervals = rep["intervals"]
    bin_ps = int(ts["bin_ps"])
    nb = len(ts["bin_t_ps"])
    mid = ctx.t(np.arange(nb) * bin_ps + bin_ps / 2)
    left = ctx.t(np.arange(nb) * bin_ps)
    end = ctx.dur_ps
    rows: list[str] = []
    for iv in intervals:
        name = _target(ctx, iv)
        if name not in rows:
            rows.append(name)
    pauses = _pause_rows(ctx)
    h_strip = 0.9 + 0.32 * max(len(rows), 1)
    h_pfc = 0.9 + 0.3 * max(len(pauses), 1)
    fig, axes = plt.subplots(4, 1, figsize=(11, h_strip + 3.2 + 2.4 + h_pfc), sharex=True,
                             gridspec_kw={"height_ratios": [h_strip, 3.2, 2.4, h_pfc]})
    ax_f, ax_l, ax_r, ax_p = axes
    title = f"{summary.get('scenario', '')}: faults and what they did"
    comp = rep.get("completion", {})
    w = comp.get("workload", {})
    if w.get("extra_ps") is not None and w.get("ratio") is not None:
        title += (f"\nlast delivery {ctx.span(w['faulted_ps'])} vs {ctx.span(w['baseline_ps'])}"
                  f" fault-free (x{w['ratio']:.3g})")
    got = sum(f.get("delivered_bytes") or 0 for f in comp.get("flows", ()))
    base = [f.get("baseline_delivered_bytes") for f in comp.get("flows", ())]
    if base and None not in base and sum(base):
        title += (f"; delivered {got / 1e6:.4g} MB vs {sum(base) / 1e6:.4g} MB fault-free "
                  f"({(got - sum(base)) / sum(base):+.1%})")
    for c in comp.get("collectives", ()):
        if c.get("ratio") is not None:
            title += (f"; collective #{c['entry']} {ctx.span(c['faulted_ps'])} vs "
                      f"{ctx.span(c['baseline_ps'])} (x{c['ratio']:.3g})")
    ax_f.set_title(title, fontsize="medium", loc="left")

    # 1. fault intervals
    _fault_strip(ax_f, intervals, rows, lambda iv: _target(ctx, iv), ctx.t, end, 0.002)
    reroutes = [e["t_ps"] for e in rep.get("events", ()) if e.get("what") == "reroute"]
    for ax in axes:
        for i, t in enumerate(reroutes):
            ax.axvline(ctx.t(t), color="0.45", linestyle="--", linewidth=1.0,
                       label="reroute" if ax is ax_f and i == 0 else None)
    ax_f.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small",
                frameon=False)

    # 2. link throughput
    to_gbps = 8 * 10**12 / bin_ps / 1e9
    for ln in rep.get("links", ()):
        key = f"fault_link_n{ln['node']}_p{ln['port']}_tx_bytes"
        if key not in ts:
            continue
        style = "-" if ln["role"] == "faulted" else "--"
        ax_l.plot(mid, ts[key] * to_gbps, style, linewidth=1.3, drawstyle="steps-mid",
                  label=f"{ctx.port(ln['node'], ln['port'])}"
                        + ("" if ln["role"] == "faulted" else " (ECMP sibling)"))
    if "fault_delivered_bytes" in ts:
        ax_l.plot(mid, ts["fault_delivered_bytes"] * to_gbps, color="black", linewidth=1.8,
                  drawstyle="steps-mid", label="goodput, all flows")
    ax_l.set_ylabel("throughput (Gb/s)")
    ax_l.set_ylim(bottom=0)
    ax_l.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small",
                frameon=False)
    _shade_recovery(ax_l, intervals, ctx.t, "its flows' goodput", alpha=0.07)

    # 3. retransmissions, losses, timeouts, QP errors
    width = ctx.t(bin_ps) * 0.9
    retx = ts.get("fault_retx_frames")
    lost = ts.get("fault_lost_frames")
    if retx is not None and retx.any():
        ax_r.bar(left, retx, width=width, align="edge", color="tab:blue",
                 label="frames retransmitted (RC)")
    if lost is not None and lost.any():
        ax_r.step(mid, lost, where="mid", color="tab:red", linewidth=1.3,
                  label="frames lost to the faults")
    tmo = ts.get("fault_timeouts")
    top = max([1, *(int(a.max()) for a in (retx, lost) if a is not None and len(a))])
    if tmo is not None and tmo.any():
        i = np.flatnonzero(tmo)
        ax_r.plot(mid[i], np.full(len(i), top * 1.08), "v", color="tab:green", markersize=6,
                  label=f"ACK timeouts ({int(tmo.sum())})")
    for k, t in enumerate(ts.get("fault_qp_error_t_ps", ())):
        ax_r.axvline(ctx.t(int(t)), color="red", linewidth=1.6,
                     label="QP error" if k == 0 else None)
    rc_on = bool(summary.get("faults", {}).get("retransmitted", {}).get("flows"))
    if not ax_r.get_legend_handles_labels()[0]:
        ax_r.text(0.5, 0.5, "no frame lost or retransmitted", transform=ax_r.transAxes,
                  ha="center", va="center", color="0.35")
    else:
        ax_r.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small",
                    frameon=False)
    if not rc_on:
        ax_r.text(0.0, 1.01, "RC reliability off: lost frames are not resent",
                  transform=ax_r.transAxes, fontsize="x-small", color="0.3", va="bottom")
    ax_r.set_ylabel(f"frames per bin\n({bin_ps / 1e6:.3g} µs)")
    ax_r.set_ylim(0, top * 1.2)

    # 4. PFC pause state
    if pauses:
        n = len(pauses)
        for i, (_label, t, s) in enumerate(pauses):
            y = n - 1 - i
            x, v = ctx.steps(t, s)
            ax_p.fill_between(x, y + 0.1, y + 0.1 + 0.8 * v, step="post", color="tab:cyan",
                              linewidth=0)
        ax_p.set_yticks([n - 1 - i + 0.5 for i in range(n)], [r[0] for r in pauses],
                        fontsize="x-small")
        ax_p.set_ylim(0, n)
        ax_p.set_ylabel("PFC: paused")
    else:
        ax_p.text(0.5, 0.5, "no PFC pause", transform=ax_p.transAxes, ha="center",
                  va="center", color="0.35")
        ax_p.set_yticks([])
    ax_p.set_xlabel(ctx.t_label)
    ax_p.set_xlim(0, ctx.t_end())
    fig.align_ylabels(axes)
    return fig


def _pause_rows(ctx: Any) -> list[tuple[str, Any, Any]]:
    """(label, t_ps, state) of the transmitters that were paused (``pfc_rx_*``), the
    :data:`MAX_PAUSE_ROWS` most paused, in order of the first pause."""
    import numpy as np

    rows = []
    for mid, t, s in ctx.series("pfc_rx_", "_state"):
        if not len(s) or not s.any():
            continue
        n, p, r = (int(x.lstrip("npriog")) for x in mid.split("_"))
        x = [*list(t), ctx.dur_ps]
        paused = sum(x[i + 1] - x[i] for i in range(len(s)) if s[i])
        rows.append((f"{ctx.port(n, p)} prio {r} ({paused / ctx.dur_ps:.0%})", t, s, paused,
                     int(t[np.nonzero(s)[0][0]])))
    rows = sorted(rows, key=lambda r: -r[3])[:MAX_PAUSE_ROWS]
    rows.sort(key=lambda r: r[4])
    return [(lab, t, s) for lab, t, s, _, _ in rows]


# ------------------------------------------------------------ lossless collective
class _Names:
    """Names and time axis of a collective's figure: hosts ``rN`` (rank N), switches
    ``leaf0:p2`` (:func:`sim.workloads.collective_stats.link_usage`'s names)."""

    def __init__(self, names: Mapping[str, Any], dur_ps: int) -> None:
        self.nodes = names.get("nodes", {})
        self.ports = names.get("ports", {})
        self.peers = names.get("peers", {})
        self.dur_ps = max(int(dur_ps), 1)
        self.t_unit_ps, self.t_unit = ((10**6, "µs") if self.dur_ps <= 5 * 10**9 else
                                       (10**9, "ms") if self.dur_ps <= 5 * 10**12 else
                                       (10**12, "s"))

    def node(self, n: Any) -> str:
        return self.nodes.get(n, f"node {n}")

    def port(self, n: int, p: int) -> str:
        return self.ports.get((n, p), f"{self.node(n)}:p{p}")

    def peer(self, n: int, p: int) -> str:
        return self.node(self.peers[(n, p)]) if (n, p) in self.peers else "?"

    def t(self, t_ps: Any) -> Any:
        return t_ps / self.t_unit_ps

    def span(self, t_ps: int) -> str:
        return f"{t_ps / self.t_unit_ps:.4g} {self.t_unit}"

    @property
    def t_label(self) -> str:
        return f"time from the start of the size's run ({self.t_unit})"


def _dur(ps: float) -> str:
    """A duration in the unit that reads best: µs below 1 ms, ms below 1 s, else s."""
    a = abs(ps)
    unit, div = (("µs", 1e6) if a < 1e9 else ("ms", 1e9) if a < 1e12 else ("s", 1e12))
    return f"{ps / div:.4g} {unit}"


def _collective_target(nm: _Names, iv: Mapping[str, Any]) -> str:
    if iv["kind"] == "straggler":
        who = f"r{iv['rank']}" if "rank" in iv else nm.node(iv["node"])
        return f"{who} (straggler +{iv['delay_ps'] / 1e6:g} µs)"
    if iv["kind"] in ("nic_down", "switch_down", "slow_pcie"):
        return nm.node(iv["node"])
    p = iv.get("port", 0)
    return f"{nm.port(iv['node'], p)} <-> {nm.peer(iv['node'], p)}"


def collective_fault_figure(doc: Mapping[str, Any], row: Mapping[str, Any],
                            ts: Mapping[str, Any], names: Mapping[str, Any]) -> Any:
    """``faults_timeline.png`` of one size of ``lossless collective``
    (docs/reference/collective-results.md, "The PNGs"): ``row`` is its results row (with
    ``faults``), ``ts`` :meth:`sim.study.fault_report.CollectiveObserver.series`.  Panels, one time
    axis from the start of the size's fabric: the faults (and stragglers), QP errors and failovers;
    the collective's progress (network bytes delivered) against the fault-free run, the iterations
    shaded; the faulted links' throughput and the goodput; frames retransmitted, lost, ACK timeouts;
    PFC pauses sent per bin."""
    import matplotlib.pyplot as plt
    import numpy as np

    rep = row["faults"]
    intervals = rep["intervals"]
    end = int(ts["duration_ps"])
    nm = _Names(names, end)
    edges = np.asarray(ts["bin_edges_ps"], dtype=np.int64)
    per = max(1, -(-(len(edges) - 1) // PLOT_BINS))  # bins of the series per drawn bin

    def rb(a: Any) -> Any:
        a = np.asarray(a)
        n = -(-len(a) // per) * per
        return np.pad(a, (0, n - len(a))).reshape(-1, per).sum(axis=1)

    edges = np.append(edges[:-1:per], edges[-1])
    width_ps = np.diff(edges)
    mid = nm.t((edges[:-1] + edges[1:]) / 2)
    rows: list[str] = []
    for iv in intervals:
        name = _collective_target(nm, iv)
        if name not in rows:
            rows.append(name)
    h_strip = 0.9 + 0.32 * max(len(rows), 1)
    fig, axes = plt.subplots(5, 1, figsize=(11, h_strip + 2.6 + 2.6 + 2.2 + 1.5),
                             sharex=True,
                             gridspec_kw={"height_ratios": [h_strip, 2.6, 2.6, 2.2, 1.5]})
    ax_f, ax_g, ax_l, ax_r, ax_p = axes
    t = rep["time"]
    title = (f"lossless collective {doc.get('collective', '')} {row['size_bytes']} B, "
             f"{doc.get('nranks', '?')} ranks, fabric {doc.get('fabric', '')}: faults and "
             f"what they did")
    if row.get("failed"):
        title += f"\nfailed: QP {row['failed']['qp']} in error at {nm.span(row['failed']['t_ps'])}"
    elif t.get("stall_ps") is not None:
        title += (f"\nout-of-place time {_dur(t['faulted_ps'])} vs "
                  f"{_dur(t['baseline_ps'])} fault-free: stall "
                  f"{'+' if t['stall_ps'] >= 0 else ''}{_dur(t['stall_ps'])} "
                  f"(x{t['ratio']:.3g})")
    elif t.get("faulted_ps") is not None:
        title += f"\nout-of-place time {_dur(t['faulted_ps'])} (no fault-free run)"
    ax_f.set_title(title, fontsize="medium", loc="left")

    # 1. faults, stragglers, QP errors, failovers
    _fault_strip(ax_f, intervals, rows, lambda iv: _collective_target(nm, iv), nm.t, end,
                 0.005)
    reroutes = [e["t_ps"] for e in rep.get("events", ()) if e.get("what") == "reroute"]
    qp_err = [int(x) for x in ts.get("fault_qp_error_t_ps", ())]
    moves = [m["t_ps"] for m in row.get("failovers") or ()]
    for ax in axes:
        for i, x in enumerate(reroutes):
            ax.axvline(nm.t(x), color="0.45", linestyle="--", linewidth=1.0,
                       label="reroute" if ax is ax_f and i == 0 else None)
        for i, x in enumerate(qp_err):
            ax.axvline(nm.t(x), color="red", linewidth=1.4,
                       label="QP error" if ax is ax_f and i == 0 else None)
        for i, x in enumerate(moves):
            ax.axvline(nm.t(x), color="tab:purple", linestyle=":", linewidth=1.6,
                       label="failover (QP moved)" if ax is ax_f and i == 0 else None)
    ax_f.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small",
                frameon=False)

    # 2. progress against the fault-free run, iterations shaded
    spans = np.asarray(ts.get("iteration_spans_ps", np.zeros((0, 2))), dtype=np.int64)
    its = doc.get("warmup_iters", 0) + doc.get("iters", 1)
    for k, (a, b) in enumerate(spans):
        ax_g.axvspan(nm.t(a), nm.t(b), color="0.9" if k % 2 == 0 else "0.82", linewidth=0)
        label = (f"warm-up {k + 1}" if k < doc.get("warmup_iters", 0) else
                 f"it {k + 1 - doc.get('warmup_iters', 0)}" if k < its else
                 f"in place {k + 1 - its}")
        ax_g.text(nm.t((a + b) / 2), 1.0, label, transform=ax_g.get_xaxis_transform(),
                  ha="center", va="bottom", fontsize="x-small", color="0.3")
    ax_g.plot(nm.t(np.asarray(ts["delivered_t_ps"])), np.asarray(ts["delivered_bytes"]) / 1e6,
              color="black", linewidth=1.8, label="with the faults")
    if "baseline_t_ps" in ts:
        # each fault-free iteration drawn from the start of the same iteration here (the
        # runs start their iterations at different times once one of them was slower)
        bt = np.asarray(ts["baseline_t_ps"])
        bd = np.asarray(ts["baseline_delivered_bytes"]) / 1e6
        bspans = np.asarray(ts.get("baseline_spans_ps", np.zeros((0, 2))), dtype=np.int64)
        for k, ((a, b), (ba, bb)) in enumerate(zip(spans, bspans, strict=False)):
            x = np.concatenate(([ba], bt[(bt > ba) & (bt < bb)], [bb]))
            ax_g.plot(nm.t(x - ba + a), np.interp(x, bt, bd), color="tab:green", linestyle="--",
                      linewidth=1.4, label="fault-free run, same iteration" if k == 0 else None)
            late = (b - a) - (bb - ba)
            if late > 0.01 * (bb - ba):  # the stall of this iteration
                y = float(np.interp(b, np.asarray(ts["delivered_t_ps"]),
                                    np.asarray(ts["delivered_bytes"]))) / 1e6
                ax_g.annotate("", xy=(nm.t(b), y), xytext=(nm.t(a + bb - ba), y),
                              arrowprops={"arrowstyle": "<->", "color": "tab:red"})
                ax_g.text(nm.t(b - late / 2), y, f"+{_dur(late)}", ha="center",
                          va="bottom", fontsize="small", color="tab:red")
    ax_g.set_ylabel("network bytes\ndelivered (MB)")
    top_mb = float(np.max(np.asarray(ts["delivered_bytes"]), initial=0)) / 1e6
    ax_g.set_ylim(0, max(top_mb, 1e-6) * 1.15)  # room for the stall labels
    ax_g.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small",
                frameon=False)

    # 3. link throughput and goodput
    to_gbps = 8 * 10**12 / np.maximum(width_ps, 1) / 1e9
    for ln in rep.get("links", ()):
        key = f"fault_link_n{ln['node']}_p{ln['port']}_tx_bytes"
        if key not in ts:
            continue
        style = "-" if ln["role"] == "faulted" else "--"
        ax_l.plot(mid, rb(ts[key]) * to_gbps, style, linewidth=1.3, drawstyle="steps-mid",
                  label=f"{nm.port(ln['node'], ln['port'])} -> {nm.peer(ln['node'], ln['port'])}"
                        + ("" if ln["role"] == "faulted" else " (ECMP sibling)"))
    ax_l.plot(mid, rb(ts["fault_delivered_bytes"]) * to_gbps, color="black", linewidth=1.8,
              drawstyle="steps-mid", label="goodput, all QPs")
    _shade_recovery(ax_l, intervals, nm.t, "the goodput", alpha=0.08)
    ax_l.set_ylabel("throughput (Gb/s)")
    ax_l.set_ylim(bottom=0)
    ax_l.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small",
                frameon=False)

    # 4. retransmissions, losses, timeouts
    left = nm.t(edges[:-1])
    widths = nm.t(width_ps) * 0.9
    retx, lost, tmo = (rb(ts[x]) for x in ("fault_retx_frames", "fault_lost_frames",
                                           "fault_timeouts"))
    if retx.any():
        ax_r.bar(left, retx, width=widths, align="edge", color="tab:blue",
                 label=f"frames retransmitted (RC, {int(retx.sum())})")
    if lost.any():
        ax_r.step(mid, lost, where="mid", color="tab:red", linewidth=1.3,
                  label=f"frames lost to the faults ({int(lost.sum())})")
    top = max(1, int(retx.max(initial=0)), int(lost.max(initial=0)))
    if tmo.any():
        i = np.flatnonzero(tmo)
        ax_r.plot(mid[i], np.full(len(i), top * 1.08), "v", color="tab:green", markersize=6,
                  label=f"ACK timeouts ({int(tmo.sum())})")
    if ax_r.get_legend_handles_labels()[0]:
        ax_r.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small",
                    frameon=False)
    else:
        ax_r.text(0.5, 0.5, "no frame lost or retransmitted", transform=ax_r.transAxes,
                  ha="center", va="center", color="0.35")
    if not doc.get("params", {}).get("reliable") and not rep["retransmitted"]["packets"]:
        ax_r.text(0.0, 1.01, "RC reliability off: lost frames are not resent",
                  transform=ax_r.transAxes, fontsize="x-small", color="0.3", va="bottom")
    ax_r.set_ylabel(f"frames per bin\n({_dur(per * int(ts['bin_ps']))})")
    ax_r.set_ylim(0, top * 1.2)

    # 5. PFC pauses sent per bin
    pauses = rb(ts["fault_pauses"])
    if pauses.any():
        ax_p.bar(left, pauses, width=widths, align="edge", color="tab:cyan",
                 label=f"PFC pauses sent ({int(pauses.sum())})")
        ax_p.legend(loc="upper left", bbox_to_anchor=(1.005, 1.0), fontsize="small",
                    frameon=False)
    else:
        ax_p.text(0.5, 0.5, "no PFC pause", transform=ax_p.transAxes, ha="center",
                  va="center", color="0.35")
        ax_p.set_yticks([])
    ax_p.set_ylabel("PFC")
    ax_p.set_xlabel(nm.t_label)
    ax_p.set_xlim(0, nm.t(edges[-1]))
    fig.align_ylabels(axes)
    return fig


def write_collective_figure(doc: Mapping[str, Any], series: Mapping[str, Any],
                            out_dir: str) -> list[str]:
    """Write ``faults_timeline.png`` of the size ``series["size_bytes"]`` of results
    document ``doc`` into ``out_dir`` (through :func:`wire.atomic.atomic_file`)."""
    from sim.study.collective_plots import write_figures

    row = next(r for r in doc["results"] if r["size_bytes"] == series["size_bytes"]
               and "faults" in r)
    fig = collective_fault_figure(doc, row, series["arrays"], series["names"])
    return write_figures({"faults_timeline.png": fig}, out_dir)

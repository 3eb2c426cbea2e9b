"""PNG plots of a results directory (``lossless plot DIR``); matplotlib is imported lazily
with the Agg backend.

Writes ``queue_depth.png`` (bottleneck port queues over time), ``throughput.png`` (per-flow
delivered throughput per bin), ``pfc.png`` (pause state per (node, port, priority) over
time: PFC sent and received/expired) and, when a rate control changed rates (DCQCN),
``rates.png`` (current and target rate and alpha per flow).  When some egress queue was paused,
``pfc_timeline.png``: one row per paused (node, port, priority), ordered by first pause, with
deadlock onsets and watchdog triggers marked (docs/pfc.md).
"""

from __future__ import annotations

import json
import os

__all__ = ["plot_dir"]


def plot_dir(out_dir: str | os.PathLike[str]) -> list[str]:
    """Write the PNGs into ``out_dir`` (which holds summary.json and timeseries.npz)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    out = os.fspath(out_dir)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    ts = np.load(os.path.join(out, "timeseries.npz"))
    dur_us = int(ts["duration_ps"]) / 1e6
    bn, bp = (int(x) for x in ts["bottleneck"])
    written = []

    fig, ax = plt.subplots(figsize=(8, 4))
    prefix = f"queue_n{bn}_p{bp}_q"
    for key in sorted(k for k in ts.files if k.startswith(prefix) and k.endswith("_t_ps")):
        q = key[len(prefix):-len("_t_ps")]
        t = ts[key] / 1e6
        b = ts[f"{prefix}{q}_bytes"] / 1000
        ax.step(t, b, where="post", label=f"queue {q}")
    ax.set(xlabel="time (us)", ylabel="queue depth (KB)", xlim=(0, dur_us),
           title=f"{summary['scenario']}: bottleneck node {bn} port {bp}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper right")
    written.append(_save(fig, out, "queue_depth.png"))

    fig, ax = plt.subplots(figsize=(8, 4))
    bin_ps = int(ts["bin_ps"])
    t = (ts["bin_t_ps"] + bin_ps / 2) / 1e6
    for key in sorted((k for k in ts.files if k.startswith("flow_")),
                      key=lambda k: int(k.split("_")[1])):
        gbps = ts[key] * 8 / (bin_ps / 1e12) / 1e9
        ax.plot(t, gbps, label=f"flow {key.split('_')[1]}", linewidth=1)
    ax.set(xlabel="time (us)", ylabel="throughput (Gb/s)", xlim=(0, dur_us),
           title=f"{summary['scenario']}: delivered throughput per flow")
    if 0 < len(ax.lines) <= 16:
        ax.legend(loc="upper right", fontsize="small", ncol=2)
    written.append(_save(fig, out, "throughput.png"))

    fig, ax = plt.subplots(figsize=(8, 4))
    keys = sorted(k for k in ts.files if k.startswith("pfc_") and k.endswith("_t_ps"))
    labels = []
    for row, key in enumerate(keys):
        stem = key[:-len("_t_ps")]
        t = np.concatenate(([0], ts[key] / 1e6, [dur_us]))
        s = ts[f"{stem}_state"]
        v = np.concatenate(([0], s, [s[-1] if len(s) else 0]))
        ax.step(t, row + 0.8 * v, where="post", linewidth=1)
        labels.append(stem[4:])
    ax.set_yticks(range(len(labels)), labels, fontsize="x-small")
    ax.set(xlabel="time (us)", xlim=(0, dur_us),
           title=f"{summary['scenario']}: PFC pause state (high = paused / XOFF sent)")
    written.append(_save(fig, out, "pfc.png"))

    rate_keys = sorted((k for k in ts.files if k.startswith("rate_f") and k.endswith("_t_ps")),
                       key=lambda k: int(k[len("rate_f"):-len("_t_ps")]))
    if rate_keys:
        fig, (ax, ax2) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
        for key in rate_keys:
            fid = key[len("rate_f"):-len("_t_ps")]
            t = np.append(ts[key], ts["duration_ps"]) / 1e6
            color = None
            for suffix, style, what in (("bps", "-", "rate"), ("target_bps", ":", "target")):
                v = ts[f"rate_f{fid}_{suffix}"] / 1e9
                line = ax.step(t, np.append(v, v[-1]), where="post", linestyle=style,
                               linewidth=1, color=color, label=f"flow {fid} {what}")
                color = line[0].get_color()
            a = ts[f"rate_f{fid}_alpha"]
            ax2.step(t, np.append(a, a[-1]), where="post", linewidth=1, color=color,
                     label=f"flow {fid}")
        ax.set(ylabel="rate (Gb/s)", title=f"{summary['scenario']}: sender rate control "
               f"(solid: current rate, dotted: target)")
        ax2.set(xlabel="time (us)", ylabel="alpha", xlim=(0, dur_us), ylim=(0, 1.05))
        if len(rate_keys) <= 8:
            ax.legend(loc="lower right", fontsize="x-small", ncol=2)
        written.append(_save(fig, out, "rates.png"))
    timeline = _pfc_timeline(ts, summary, out, dur_us)
    if timeline is not None:
        written.append(timeline)
    return written


def _pfc_timeline(ts, summary, out: str, dur_us: float) -> str | None:
    """``pfc_timeline.png``: one row per paused egress queue (node, port, priority), from the
    ``pfc_rx_*`` series, ordered by when it was first paused (so a spreading pause storm reads
    top-down), with deadlock onsets (red) and watchdog triggers (green) marked."""
    import matplotlib.pyplot as plt
    import numpy as np

    rows = []
    for key in ts.files:
        if not (key.startswith("pfc_rx_") and key.endswith("_t_ps")):
            continue
        stem = key[:-len("_t_ps")]
        t, s = ts[key], ts[f"{stem}_state"]
        on = np.nonzero(s)[0]
        if len(on):
            rows.append((int(t[on[0]]), stem[len("pfc_rx_"):], t / 1e6, s))
    if not rows:
        return None
    rows.sort(key=lambda r: (r[0], r[1]))
    fig, ax = plt.subplots(figsize=(8, 1.2 + 0.35 * len(rows)))
    for i, (_first, _label, t, s) in enumerate(rows):
        y = len(rows) - 1 - i
        tt = np.concatenate(([0], t, [dur_us]))
        ss = np.concatenate(([0], s, [s[-1]]))
        ax.fill_between(tt, y, y + 0.8 * ss, step="post", color="tab:blue", linewidth=0)
    ax.set_yticks([len(rows) - 1 - i + 0.4 for i in range(len(rows))],
                  [r[1].replace("_", " ") for r in rows], fontsize="x-small")
    marks = []
    if "deadlock_t_ps" in ts.files:
        for t in ts["deadlock_t_ps"]:
            marks.append(ax.axvline(t / 1e6, color="red", linestyle="--", label="deadlock onset"))
    if "watchdog_t_ps" in ts.files:
        for t in ts["watchdog_t_ps"]:
            marks.append(ax.axvline(t / 1e6, color="green", linestyle=":",
                                    label="watchdog triggered"))
    if marks:
        handles, labels = ax.get_legend_handles_labels()
        seen = dict(zip(labels, handles, strict=True))
        ax.legend(seen.values(), seen.keys(), loc="lower right", fontsize="small")
    ax.set(xlabel="time (us)", xlim=(0, dur_us), ylim=(-0.2, len(rows)),
           title=f"{summary['scenario']}: egress queues paused (first paused at top)")
    return _save(fig, out, "pfc_timeline.png")


def _save(fig, out: str, name: str) -> str:
    import matplotlib.pyplot as plt

    path = os.path.join(out, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path

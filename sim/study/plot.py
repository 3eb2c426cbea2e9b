"""PNG plots of a results directory (``lossless plot DIR``), meant to be read at a glance by a
network engineer (docs/reference/results-folder.md, "PNG plots").  matplotlib is imported lazily,
with the Agg backend.

Every series is named as the scenario names things (``leaf0:p3 -> h8``, ``priority 3``,
``victim: h4 -> h10``): the names come from the ``labels`` section of summary.json
(:mod:`sim.study.labels`); results written before it existed fall back to ``node N:pP``.  Times
are in
µs (ms for runs longer than 5 ms), sizes in KB (1000 bytes), rates in Gb/s.

- ``queue_depth.png``: the run's deepest switch egress queue (the bottleneck unless another
  port queued more: :func:`sim.study.congestion.deepest_queue`) per priority, drawn to the
  end of the run, with the ECN thresholds Kmin/Kmax; below it, when the switch runs PFC, the
  switch's ingress buffer per (ingress port, priority) with the XOFF and XON thresholds.
- ``throughput.png``: total delivered throughput with the receivers' link capacity (and per
  role totals), and below it per-flow detail (trailing moving average, drawn at the end of
  its window; min..max bands per role when there are many flows).
- ``pfc.png``: PAUSE sent and transmitters paused, one row per (port, priority), with a zoomed
  panel where the changes cluster (:func:`cluster_window`); "no PFC activity" when nothing
  paused.
- ``rates.png`` (when a rate control changed rates, DCQCN): current and target rate and alpha
  per flow.
- ``pfc_timeline.png`` (when some egress queue was paused): one row per paused egress queue
  ordered by first pause (the storm's staircase), deadlock onsets and watchdog triggers marked,
  with a zoomed panel on the first pauses.

:func:`figures` returns the figures without saving (tests read their texts with
:func:`texts`); :func:`plot_dir` saves them (each through :func:`wire.atomic.atomic_file`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["cluster_window", "compare_figure", "figures", "plot_dir", "run_labels", "texts",
           "write_compare"]

#: At most this many rows per PFC panel / lines per ingress panel (the busiest are kept).
MAX_ROWS = 24
#: Up to this many flows get a line each; more are drawn as bands per role.
MAX_FLOW_LINES = 12
#: Runs up to this long (ps) are plotted in µs, longer ones in ms.
_US_AXIS_MAX_PS = 5 * 10**9
#: A series of more samples than this is drawn decimated: it is read in chunks and
#: only the samples holding the minimum, the maximum and the last value of each of
#: DECIMATE_COLUMNS time columns over the run are kept, so every peak and every pause is still
#: drawn; figures computed from it (paused fractions, maxima, first pauses, the zoom windows'
#: change times) come from the exact series.
DECIMATE_ROWS = 8192
#: Time columns of a decimated series (more than the pixel columns of the widest plot; a
#: decimated series has at most 4 x DECIMATE_COLUMNS = DECIMATE_ROWS samples).
DECIMATE_COLUMNS = 2048


def plot_dir(out_dir: str | os.PathLike[str]) -> list[str]:
    """Write the PNGs into ``out_dir`` (which holds summary.json and timeseries.npz); returns
    their paths."""
    import matplotlib.pyplot as plt

    from wire.atomic import atomic_file

    out = os.fspath(out_dir)
    written = []
    for name, fig in figures(out).items():
        path = os.path.join(out, name)
        try:
            fig.tight_layout()
            with atomic_file(path, "wb") as f:
                fig.savefig(f, format="png", dpi=100)
        finally:
            plt.close(fig)
        written.append(path)
    return written


def figures(out_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """file name -> matplotlib Figure, not saved (the caller closes them)."""
    import matplotlib

    matplotlib.use("Agg")
    out = os.fspath(out_dir)
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        summary = json.load(f)
    ts = _Arrays(os.path.join(out, "timeseries.npz"))
    try:
        return _figures(summary, ts)
    finally:
        ts.close()


def _figures(summary: dict[str, Any], ts: _Arrays) -> dict[str, Any]:
    ctx = _Context(summary, ts)
    figs = {"queue_depth.png": _queue_figure(ctx), "throughput.png": _throughput_figure(ctx),
            "pfc.png": _pfc_figure(ctx)}
    rates = _rates_figure(ctx)
    if rates is not None:
        figs["rates.png"] = rates
    timeline = _timeline_figure(ctx)
    if timeline is not None:
        figs["pfc_timeline.png"] = timeline
    from sim.study.fault_plot import fault_figure, has_faults

    if has_faults(summary):  # a run with faults (sim.study.fault_report)
        figs["faults_timeline.png"] = fault_figure(summary, ts, ctx)
    return figs


def texts(fig: Any) -> list[str]:
    """Every visible text of a figure: titles, axis labels, tick labels, legend entries and
    annotations (what a reader sees; tests check these)."""
    out = [t.get_text() for t in fig.texts]
    for ax in fig.axes:
        out += [ax.get_title(loc) for loc in ("left", "center", "right")]
        out += [ax.get_xlabel(), ax.get_ylabel()]
        out += [t.get_text() for t in ax.get_xticklabels() + ax.get_yticklabels()]
        out += [t.get_text() for t in ax.texts]
        leg = ax.get_legend()
        if leg is not None:
            out += [t.get_text() for t in leg.get_texts()]
    return [t for t in out if t]


def cluster_window(times_ps: Any, duration_ps: int, *, width_frac: float = 0.1,
                   share: float = 0.6) -> tuple[int, int] | None:
    """The time window (ps) where events cluster, or None when they are spread over the run.

    The densest window ``width_frac`` of the run wide is found (sliding over the sorted
    times); if it holds at least ``share`` of the events, the result is the span of the
    events inside it, padded by a quarter of that span (at least 0.5 % of the run) and clipped
    to the run.  So a storm whose pauses all start within 20 us of a 2 ms run gets a window of
    about 30 us; pauses oscillating through the whole run get None."""
    import numpy as np

    t = np.sort(np.asarray(times_ps, dtype=np.int64))
    if len(t) == 0 or duration_ps <= 0:
        return None
    width = max(int(duration_ps * width_frac), 1)
    ends = np.searchsorted(t, t + width, side="right")
    counts = ends - np.arange(len(t))
    i = int(np.argmax(counts))
    if counts[i] < share * len(t):
        return None
    lo, hi = int(t[i]), int(t[ends[i] - 1])
    pad = max((hi - lo) // 4, duration_ps // 200, 1)
    lo, hi = max(lo - pad, 0), min(hi + pad, duration_ps)
    if hi - lo >= duration_ps // 2:
        return None
    return lo, hi


# ----------------------------------------------------------------------------- arrays


class _Arrays(Mapping):
    """The arrays of a ``timeseries.npz`` read one at a time when first asked for (the small
    ones are kept), never all together; :meth:`pair` gives a long series decimated for
    drawing, with its exact integral and change times beside it (``area``, ``changes``)."""

    def __init__(self, path: str) -> None:
        import numpy as np

        self.path = path
        self._z = np.load(path, allow_pickle=False)
        self._keys = list(self._z.files)
        self._names = frozenset(self._keys)
        self._small: dict[str, Any] = {}
        #: t_ps key -> exact integral (value x ps over [0, duration]) of an integer series.
        self.area: dict[str, int] = {}
        #: t_ps key -> times where a 0/1 state series changes value (the first 1 included).
        self.changes: dict[str, Any] = {}

    def __getitem__(self, key: str) -> Any:
        a = self._small.get(key)
        if a is None:
            a = self._small[key] = self._z[key]
        return a

    def __contains__(self, key: object) -> bool:  # from the names: no array is read
        return key in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def close(self) -> None:
        self._z.close()

    def pair(self, t_key: str, v_key: str, dur_ps: int) -> tuple[Any, Any]:
        """(t_ps, values) of a series: whole up to DECIMATE_ROWS samples, else decimated
        (min, max and last sample per time column), read in chunks; fills ``area`` and, for
        int8 state series, ``changes`` from the exact samples."""
        import numpy as np

        from sim.study.series import iter_npy_chunks, npy_header, step_integral

        for key in (t_key, v_key):
            if key not in self._names:  # as numpy's NpzFile says it (lossless plot names it)
                raise KeyError(f"{key} is not a file in the archive")
        if npy_header(self._z.zip, t_key)[0] <= (DECIMATE_ROWS,):
            t, v = self._z[t_key], self._z[v_key]
            if v.dtype.kind in "iu":
                self.area[t_key] = step_integral([(t, v)], 0, dur_ps)
                if v.dtype == np.int8:
                    self.changes[t_key] = _changes(t, v)
            return t, v
        col_ps = max(-(-dur_ps // DECIMATE_COLUMNS), 1)
        keep_t, keep_v, changes = [], [], []

        def chunks() -> Iterator[tuple[Any, Any]]:  # decimates as the integral reads on
            prev = 0
            for t, v in zip(iter_npy_chunks(self._z.zip, t_key),
                            iter_npy_chunks(self._z.zip, v_key), strict=True):
                idx = _column_extremes(t, v, col_ps)
                keep_t.append(t[idx])
                keep_v.append(v[idx])
                if v.dtype == np.int8 and len(v):
                    changes.append(t[v != np.concatenate(([prev], v[:-1]))])
                    prev = v[-1]
                yield t, v

        dtype = npy_header(self._z.zip, v_key)[2]
        if dtype.kind in "iu":
            self.area[t_key] = step_integral(chunks(), 0, dur_ps)
            if dtype == np.int8:
                self.changes[t_key] = np.concatenate(changes) if changes \
                    else np.zeros(0, dtype=np.int64)
        else:
            for _ in chunks():
                pass
        return np.concatenate(keep_t), np.concatenate(keep_v)


def _column_extremes(t: Any, v: Any, col_ps: int) -> Any:
    """Indices (sorted) of the first sample, the first minimum, the first maximum and the
    last sample of each time column ``col_ps`` wide (t in time order)."""
    import numpy as np

    if not len(t):
        return np.zeros(0, dtype=np.int64)
    col = t // col_ps
    starts = np.flatnonzero(np.concatenate(([True], col[1:] != col[:-1])))
    lengths = np.diff(np.append(starts, len(t)))
    idx = np.arange(len(t))
    big = len(t)
    keep = [starts, starts + lengths - 1]
    for reduce in (np.minimum, np.maximum):
        ext = np.repeat(reduce.reduceat(v, starts), lengths)
        keep.append(np.minimum.reduceat(np.where(v == ext, idx, big), starts))
    return np.unique(np.concatenate(keep))


# ----------------------------------------------------------------------------- context


class _Context:
    """The run's data and the names of its nodes, ports and flows (from summary.json's
    ``labels``; fallbacks for older results)."""

    def __init__(self, summary: dict[str, Any], ts: _Arrays) -> None:
        self.summary = summary
        self.ts = ts
        self.scenario = summary.get("scenario", "run")
        self.dur_ps = int(ts["duration_ps"])
        bn, bp = (int(x) for x in ts["bottleneck"])
        self.bottleneck = (bn, bp)
        lab = summary.get("labels") or {}
        self._nodes = {n["id"]: n["name"] for n in lab.get("nodes", [])}
        self._ports = {(p["node"], p["port"]): p for p in lab.get("ports", [])}
        self._flows = {f["id"]: f for f in lab.get("flows", [])}
        self._raw_flows = {f["id"]: f for f in summary.get("flows", [])}
        self.switches = {s["node"]: s for s in lab.get("switches", [])}
        self.markers = lab.get("markers", [])
        self.queue_port = self._deepest_queue()
        if self.dur_ps <= _US_AXIS_MAX_PS:
            self.t_unit_ps, self.t_unit = 10**6, "µs"
        else:
            self.t_unit_ps, self.t_unit = 10**9, "ms"

    def _deepest_queue(self) -> tuple[int, int]:
        """Where ``queue_depth.png`` looks: the run's deepest switch egress queue
        (:func:`sim.study.congestion.deepest_queue`), else the bottleneck."""
        from sim.study.congestion import deepest_queue

        summary = {**self.summary, "bottleneck": {"node": self.bottleneck[0],
                                                  "port": self.bottleneck[1]}}
        return deepest_queue(summary) or self.bottleneck

    # names
    def node(self, n: int) -> str:
        return self._nodes.get(n, f"node {n}")

    def port(self, n: int, p: int) -> str:
        e = self._ports.get((n, p))
        return e["name"] if e else f"{self.node(n)}:p{p}"

    def peer(self, n: int, p: int) -> str:
        e = self._ports.get((n, p))
        if e is None or e.get("peer") is None:
            return f"{self.node(n)}:p{p}"
        return self.node(e["peer"])

    def port_rate_bps(self, n: int, p: int) -> int | None:
        e = self._ports.get((n, p))
        return e.get("rate_bps") if e else None

    def flow(self, fid: int) -> str:
        """``"role: src -> dst"`` (or ``"src -> dst"`` without a role)."""
        f = self._flows.get(fid)
        if f is None:
            raw = self._raw_flows.get(fid)
            name = (f"{self.node(raw['src'])} -> {self.node(raw['dst'])}" if raw
                    else f"flow {fid}")
            return name
        return f"{f['role']}: {f['name']}" if f.get("role") else f["name"]

    def role(self, fid: int) -> str | None:
        f = self._flows.get(fid)
        return f.get("role") if f else None

    def flow_rate_bps(self, fid: int) -> int | None:
        f = self._flows.get(fid)
        return f.get("rate_bps") if f else None

    def flow_dst(self, fid: int) -> int | None:
        f = self._flows.get(fid) or self._raw_flows.get(fid)
        return f["dst"] if f else None

    def flow_src(self, fid: int) -> int | None:
        f = self._flows.get(fid) or self._raw_flows.get(fid)
        return f["src"] if f else None

    # time
    def t(self, t_ps: Any) -> Any:
        return t_ps / self.t_unit_ps

    @property
    def t_label(self) -> str:
        return f"time ({self.t_unit})"

    def t_end(self) -> float:
        return self.dur_ps / self.t_unit_ps

    def span(self, t_ps: int) -> str:
        return f"{t_ps / self.t_unit_ps:.4g} {self.t_unit}"

    def detail_window(self, t_ps: int) -> tuple[int, int]:
        """A window a twentieth of the run wide starting a little before ``t_ps``."""
        w = max(self.dur_ps // 20, 1)
        lo = max(t_ps - w // 5, 0)
        return lo, min(lo + w, self.dur_ps)

    def steps(self, t_ps: Any, values: Any) -> tuple[Any, Any]:
        """A step series from 0 (value 0 before the first sample) to the end of the run
        (the last value held)."""
        import numpy as np

        t_ps = np.asarray(t_ps, dtype=np.int64)
        v = np.asarray(values)
        x = np.concatenate(([0], t_ps, [max(self.dur_ps, int(t_ps[-1]) if len(t_ps) else 0)]))
        y = np.concatenate(([0], v, [v[-1] if len(v) else 0]))
        return self.t(x), y

    def series(self, prefix: str, suffix: str) -> list[tuple[str, Any, Any]]:
        """(middle of the key, t_ps, values) for keys ``prefix + middle + '_t_ps'``; long
        series decimated for drawing (:meth:`_Arrays.pair`)."""
        out = []
        for key in sorted(self.ts):
            if key.startswith(prefix) and key.endswith("_t_ps"):
                mid = key[len(prefix):-len("_t_ps")]
                vkey = f"{prefix}{mid}{suffix}"
                if vkey in self.ts:
                    out.append((mid, *self.pair(key, vkey)))
        return out

    def pair(self, t_key: str, v_key: str) -> tuple[Any, Any]:
        """One series (t_ps, values), decimated when long (:meth:`_Arrays.pair`)."""
        return self.ts.pair(t_key, v_key, self.dur_ps)

    def area(self, t_key: str) -> int:
        """Exact integral over the run (value x ps) of an integer series read by pair."""
        return self.ts.area[t_key]

    def changes(self, t_key: str) -> Any:
        """Exact times where a 0/1 state series read by pair changes value."""
        return self.ts.changes[t_key]

    def mark_events(self, ax: Any, *, legend: bool = True) -> None:
        """Scripted moments (a NIC stalls, a flow joins) as grey dotted lines; deadlock onsets
        (red dashed) and watchdog triggers (green dotted) when the run had them."""
        for m in self.markers:
            if 0 <= m["t_ps"] <= self.dur_ps:
                ax.axvline(self.t(m["t_ps"]), color="0.4", linestyle=":", linewidth=1.2,
                           label=m["label"] if legend else None)
        for key, color, style, label in (
                ("deadlock_t_ps", "red", "--", "deadlock onset"),
                ("watchdog_t_ps", "green", ":", "watchdog triggered")):
            for i, t in enumerate(self.ts.get(key, [])):
                ax.axvline(self.t(int(t)), color=color, linestyle=style, linewidth=1.5,
                           label=label if legend and i == 0 else None)


def _parse_npp(mid: str) -> tuple[int, int, int]:
    """``"n3_p4_prio3"`` / ``"n3_p4_q3"`` / ``"n3_p4_pg3"`` -> (3, 4, 3)."""
    n, p, last = mid.split("_")
    return int(n[1:]), int(p[1:]), int(last.lstrip("priogq"))


def _no_data(ax: Any, text: str) -> None:
    ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center",
            fontsize="large", color="0.35")
    ax.set_yticks([])


def _kb(nbytes: float) -> str:
    return f"{nbytes / 1000:g} KB"


def _gbps(bps: float) -> str:
    return f"{bps / 1e9:g} Gb/s"


# ----------------------------------------------------------------------------- queue depth


def _queue_figure(ctx: _Context) -> Any:
    """Egress queue of the bottleneck with Kmin/Kmax; the switch's ingress buffers with
    XOFF/XON below (when it runs PFC); a detail panel from the first XOFF crossing."""
    import matplotlib.pyplot as plt

    bn, bp = ctx.queue_port
    queues = [(q, t, b) for mid, t, b in ctx.series("queue_", "_bytes")
              for n, p, q in [_parse_npp(mid)] if (n, p) == (bn, bp) and len(b) and b.max() > 0]
    thr = ctx.switches.get(bn) or {}
    pfc = thr.get("xoff_bytes") is not None
    ingress, quiet = [], 0
    if pfc:
        lossless = set(thr.get("lossless_priorities", []))
        every = [(p, g, t, b) for mid, t, b in ctx.series("ingress_", "_bytes")
                 for n, p, g in [_parse_npp(mid)]
                 if n == bn and g in lossless and len(b) and b.max() > 0]
        every.sort(key=lambda r: -int(r[3].max()))
        # ports that came near XON; the rest are counted, not drawn
        ingress = [r for r in every if r[3].max() >= thr["xon_bytes"] / 2][:8] or every[:3]
        quiet = len(every) - len(ingress)
    crossing = None  # the switch's first PAUSE
    for _mid, t, st in ctx.series(f"pfc_tx_n{bn}_", "_state"):
        on = t[st > 0]
        if len(on) and (crossing is None or on[0] < crossing):
            crossing = int(on[0])
    win = ctx.detail_window(crossing) if crossing is not None else None
    rows = 2 if pfc else 1
    fig, axes = plt.subplots(rows, 2 if win else 1, squeeze=False, sharey="row",
                             figsize=(12 if win else 9, 3.6 * rows),
                             gridspec_kw={"width_ratios": [2, 1]} if win else {})
    for j, ax in enumerate(axes[0]):
        for q, t, b in queues:
            x, y = ctx.steps(t, b / 1000)
            ax.step(x, y, where="post", linewidth=1.2, label=f"priority {q}")
        if not queues:
            ax.text(0.5, 0.5, "queue stayed empty", transform=ax.transAxes, ha="center",
                    va="center", color="0.35")
        # y range: the queue and Kmin; a Kmax far above stays named, marked off scale
        qmax = max((float(b.max()) for _q, _t, b in queues), default=0.0) / 1000
        top = 1.25 * max(qmax, (thr.get("kmin_bytes") or 0) / 1000, 1e-3)
        if thr.get("kmin_bytes") is not None:
            ax.axhline(thr["kmin_bytes"] / 1000, color="tab:orange", linestyle="--",
                       linewidth=1, label=f"Kmin {_kb(thr['kmin_bytes'])} (ECN marking starts)")
            kmax = thr["kmax_bytes"] / 1000
            if kmax > 2 * top:
                off = ", off scale"
            else:
                off = ""
                top = max(top, 1.1 * kmax)
            ax.axhline(kmax, color="tab:red", linestyle="--", linewidth=1,
                       label=f"Kmax {_kb(thr['kmax_bytes'])} (marking at {thr['pmax']:.0%}{off})")
        ctx.mark_events(ax)
        ax.set_ylim(0, top)
        if j == 0:
            where = (f"the bottleneck port {ctx.port(bn, bp)}"
                     if (bn, bp) == ctx.bottleneck else
                     f"{ctx.port(bn, bp)}, the run's deepest\n(bottleneck.pcap: "
                     f"{ctx.port(*ctx.bottleneck)})")
            ax.set(ylabel="egress queue depth (KB)", xlim=(0, ctx.t_end()),
                   title=f"egress queue of {where}")
            if ax.get_legend_handles_labels()[0]:
                ax.legend(loc="best", fontsize="small")
        else:
            _zoom(ctx, ax, win, axes[0][0])
    if pfc:
        more = f"; {quiet} other port(s) stayed low" if quiet else ""
        for j, ax in enumerate(axes[1]):
            for p, g, t, b in sorted(ingress, key=lambda r: (r[0], r[1])):
                x, y = ctx.steps(t, b / 1000)
                ax.step(x, y, where="post", linewidth=1,
                        label=f"from {ctx.peer(bn, p)} (p{p}), priority {g}")
            res = thr["reserved_bytes"]
            ax.axhline(thr["xoff_bytes"] / 1000, color="tab:red", linestyle="--",
                       linewidth=1.2, label=f"XOFF {_kb(thr['xoff_bytes'])} = {_kb(res)} "
                                            f"reserved + {_kb(thr['xoff_bytes'] - res)} "
                                            f"shared (PAUSE)")
            ax.axhline(thr["xon_bytes"] / 1000, color="tab:green", linestyle="--",
                       linewidth=1.2, label=f"XON {_kb(thr['xon_bytes'])} (resume)")
            if not ingress:
                ax.text(0.5, 0.6, "no lossless traffic arrived", transform=ax.transAxes,
                        ha="center", color="0.35")
            ax.set_ylim(bottom=0, top=max(thr["xoff_bytes"] / 1000 * 1.3, ax.get_ylim()[1]))
            if j == 0:
                ax.set(ylabel="ingress bytes held (KB)", xlim=(0, ctx.t_end()),
                       title=f"PFC ingress buffer of {ctx.node(bn)} per port{more}")
                ax.legend(loc="lower right", fontsize="x-small", ncol=2, framealpha=0.9)
            else:
                _zoom(ctx, ax, win, axes[1][0])
    for ax in axes[-1]:
        ax.set_xlabel(ctx.t_label)
    fig.suptitle(f"{ctx.scenario}: queues at {ctx.node(bn)}", fontweight="bold")
    return fig


def _zoom(ctx: _Context, ax: Any, win: tuple[int, int], main: Any,
          what: str = "detail") -> None:
    """``ax`` shows ``win`` of the run; the window is shaded on ``main``."""
    ax.set(xlim=(ctx.t(win[0]), ctx.t(win[1])),
           title=f"{what}: {win[0] / ctx.t_unit_ps:.4g} .. {ctx.span(win[1])}")
    main.axvspan(ctx.t(win[0]), ctx.t(win[1]), color="0.88", zorder=0)


# ----------------------------------------------------------------------------- throughput


def _moving_average(v: Any, w: int) -> Any:
    """Trailing moving average over ``w`` bins: item i is the mean of bins i-w+1 .. i (of
    the bins there are, at the start of the run), so nothing a bin holds shows before it (a
    late joiner does not rise, a watchdog's victim does not recover, before the event).
    Item i is drawn at the end of bin i."""
    import numpy as np

    if w <= 1:
        return np.asarray(v, dtype=np.float64)
    c = np.concatenate(([0.0], np.cumsum(v, dtype=np.float64)))
    hi = np.arange(1, len(v) + 1)
    lo = np.maximum(hi - w, 0)
    return (c[hi] - c[lo]) / (hi - lo)


def _throughput_figure(ctx: _Context) -> Any:
    import matplotlib.pyplot as plt
    import numpy as np

    ts = ctx.ts
    bin_ps = int(ts["bin_ps"])
    flows = sorted((int(k.split("_")[1]), ts[k]) for k in ts
                   if k.startswith("flow_") and k.endswith("_rx_bytes"))
    if not flows:
        fig, ax = plt.subplots(figsize=(9, 3))
        ax.set(title=f"{ctx.scenario}: delivered throughput", xlim=(0, ctx.t_end()),
               xlabel=ctx.t_label)
        _no_data(ax, "no RoCE flows in this scenario"
                 + ("\n(SUE goodput and latency: summary.json \"sue\")"
                    if "sue" in ctx.summary else ""))
        return fig
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 7), sharex=True,
                                  gridspec_kw={"height_ratios": [1, 1.2]})
    ax2.set_xlabel(ctx.t_label)
    edges = ctx.t(np.append(ts["bin_t_ps"], ts["bin_t_ps"][-1] + bin_ps))
    x = edges[1:]  # a trailing average is drawn at the end of its last bin
    gbps = {fid: b * 8 * 1000 / bin_ps for fid, b in flows}  # bytes per bin -> Gb/s
    total = np.sum(list(gbps.values()), axis=0)
    mean = sum(int(b.sum()) for _, b in flows) * 8 / ctx.dur_ps * 1000  # Gb/s over the run
    w = max(1, round(len(x) / 20))  # moving-average width, bins
    ax.stairs(total, edges, color="0.6", linewidth=0.8, label="all flows, per bin")
    ax.plot(x, _moving_average(total, w), color="black", linewidth=2.2,
            label=(f"total, all {len(flows)} flows" if len(flows) > 1 else "total, 1 flow")
            + f" (mean {mean:.4g} Gb/s)")
    # Reference lines: the receivers' link capacity and the offered load, each drawn when it
    # is in the plot's range (the other one is named in the title).
    dsts = sorted({d for d in (ctx.flow_dst(f) for f, _ in flows) if d is not None})
    rates = [ctx.port_rate_bps(d, 0) for d in dsts]
    cap = sum(rates) if rates and None not in rates else None
    offered = [ctx.flow_rate_bps(f) for f, _ in flows]
    load = sum(offered) if None not in offered else None
    refs = []
    if cap is not None:
        refs.append((cap, "tab:red", f"receiver link capacity {_gbps(cap)}" if len(dsts) == 1
                     else f"capacity of the {len(dsts)} receiver links {_gbps(cap)}"))
    if load is not None:
        refs.append((load, "tab:purple", f"offered load {_gbps(load)}"))
    top = max(float(total.max()), min(r[0] for r in refs) / 1e9 if refs else 0.0)
    notes = []
    for value, color, what in refs:
        if value / 1e9 <= 1.5 * top:
            ax.axhline(value / 1e9, color=color, linestyle="--", linewidth=1.2, label=what)
        else:
            notes.append(what)
    roles: dict[str, list[int]] = {}
    for fid, _ in flows:
        roles.setdefault(ctx.role(fid) or "", []).append(fid)
    if len(roles) > 1:
        for role, fids in roles.items():
            if role:
                ax.plot(x, _moving_average(np.sum([gbps[f] for f in fids], axis=0), w),
                        linewidth=1.4,
                        label=f"{role} total ({len(fids)} flow{'s' if len(fids) > 1 else ''})")
    ctx.mark_events(ax)
    ax.set(ylabel="throughput (Gb/s)", xlim=(0, ctx.t_end()),
           title=f"{ctx.scenario}: delivered throughput (bins of {ctx.span(bin_ps)}, "
                 f"average over the {ctx.span(w * bin_ps)} before each point)"
                 + (f"\n{', '.join(notes)} (off scale)" if notes else ""))
    ax.set_ylim(0, 1.12 * max(top, *(r[0] / 1e9 for r in refs if r[2] not in notes), 1e-9))
    ax.legend(loc="best", fontsize="small")

    if len(flows) <= MAX_FLOW_LINES:
        for fid, _ in flows:
            ax2.plot(x, _moving_average(gbps[fid], w), linewidth=1, label=ctx.flow(fid))
        if len(flows) > 1:
            ax2.axhline(mean / len(flows), color="black", linestyle="--", linewidth=1,
                        label=f"equal share of the total {mean / len(flows):.4g} Gb/s")
        ax2.legend(loc="lower right", fontsize="x-small", ncol=2 if len(flows) > 4 else 1,
                   framealpha=0.9)
    else:
        for role, fids in roles.items():
            m = np.array([_moving_average(gbps[f], w) for f in fids])
            line = ax2.plot(x, m.mean(axis=0), linewidth=1.3,
                            label=f"{role or 'all flows'}: mean of {len(fids)} flows "
                                  f"(band: min..max)")
            ax2.fill_between(x, m.min(axis=0), m.max(axis=0), alpha=0.2,
                             color=line[0].get_color(), linewidth=0)
        ax2.legend(loc="upper right", fontsize="x-small")
    ctx.mark_events(ax2, legend=False)
    ax2.set(ylabel="throughput (Gb/s)",
            title=f"per flow, average over the {ctx.span(w * bin_ps)} before each point")
    ax2.set_ylim(0, 1.15 * max(ax2.get_ylim()[1], 1e-9))
    return fig


# ----------------------------------------------------------------------------- PFC


def _changes(t: Any, s: Any) -> Any:
    """Times where a 0/1 state series changes value (the first 1 included)."""
    import numpy as np

    prev = np.concatenate(([0], s[:-1]))
    return t[s != prev]


def _bars(ctx: _Context, ax: Any, rows: list[tuple[str, Any, Any]], color: str) -> None:
    """One filled row per (label, t_ps, state), top row first."""
    n = len(rows)
    for i, (_label, t, s) in enumerate(rows):
        y = n - 1 - i
        x, v = ctx.steps(t, s)
        ax.fill_between(x, y, y + 0.8 * v, step="post", color=color, linewidth=0)
    ax.set_yticks([n - 1 - i + 0.4 for i in range(n)], [r[0] for r in rows],
                  fontsize="x-small")
    ax.set_ylim(-0.2, max(n, 1))


def _pfc_rows(ctx: _Context, kind: str
              ) -> tuple[list[tuple[str, Any, Any]], int, set[int], list[Any]]:
    """Rows of the ``pfc_<kind>_*`` series that ever paused, the busiest MAX_ROWS kept:
    (label, t_ps, state); also how many rows there were, the priorities seen and the exact
    change times of each row kept."""
    import numpy as np

    rows, prios = [], set()
    for mid, t, s in ctx.series(f"pfc_{kind}_", "_state"):
        if not s.any():
            continue
        n, p, r = _parse_npp(mid)
        prios.add(r)
        key = f"pfc_{kind}_{mid}_t_ps"
        paused = ctx.area(key)  # exact, also when t and s are decimated for drawing
        label = (f"{ctx.node(n)} pauses {ctx.peer(n, p)} (p{p})" if kind == "tx"
                 else f"{ctx.port(n, p)} ({paused / ctx.dur_ps:.0%} paused)")
        rows.append((label, r, t, s, paused, int(t[np.nonzero(s)[0][0]]), ctx.changes(key)))
    total = len(rows)
    if total > MAX_ROWS:
        rows = sorted(rows, key=lambda r: -r[4])[:MAX_ROWS]
    rows.sort(key=lambda r: (r[5], r[0], r[1]))  # first paused at top
    multi = len(prios) > 1
    out = [(f"{lab}, priority {r}" if multi else lab, t, s) for lab, r, t, s, *_ in rows]
    return out, total, prios, [row[6] for row in rows]


def _prio_text(prios: set[int]) -> str:
    return (f"priority {next(iter(prios))}" if len(prios) == 1
            else "priorities " + ", ".join(str(p) for p in sorted(prios)))


def _pfc_figure(ctx: _Context) -> Any:
    import matplotlib.pyplot as plt
    import numpy as np

    tx, n_tx, p_tx, c_tx = _pfc_rows(ctx, "tx")
    rx, n_rx, p_rx, c_rx = _pfc_rows(ctx, "rx")
    if not tx and not rx:
        fig, ax = plt.subplots(figsize=(9, 3))
        ax.set(xlim=(0, ctx.t_end()), xlabel=ctx.t_label,
               title=f"{ctx.scenario}: PFC pause state")
        _no_data(ax, "no PFC activity: no PAUSE frame sent, no transmitter paused")
        return fig
    changes = np.concatenate(c_tx + c_rx)  # exact, not the decimated series drawn
    win = cluster_window(changes, ctx.dur_ps)
    panels = [(rows, total, prios, what) for rows, total, prios, what in (
        (tx, n_tx, p_tx, "PAUSE (XOFF) sent, first at top"),
        (rx, n_rx, p_rx, "transmitter paused (port -> peer), first at top")) if rows]
    heights = [max(len(r[0]), 1) + 1.5 for r in panels]
    fig, axes = plt.subplots(len(panels), 2 if win else 1, squeeze=False,
                             figsize=(12 if win else 9, 1.0 + 0.24 * sum(heights)),
                             gridspec_kw={"height_ratios": heights,
                                          **({"width_ratios": [2, 1]} if win else {})})
    for (rows, total, prios, what), row_axes in zip(panels, axes, strict=True):
        color = "tab:orange" if what.startswith("PAUSE") else "tab:blue"
        more = f", {len(rows)} of {total} most paused" if total > len(rows) else ""
        for j, ax in enumerate(row_axes):
            _bars(ctx, ax, rows, color)
            ctx.mark_events(ax, legend=j == len(row_axes) - 1)
            if j == 0:
                ax.set(xlim=(0, ctx.t_end()), title=f"{what}, {_prio_text(prios)}{more}")
            else:
                _zoom(ctx, ax, win, row_axes[0], "zoom")
                ax.set_yticks([])
    if axes[0][-1].get_legend_handles_labels()[0]:
        axes[0][-1].legend(loc="lower right", fontsize="x-small")
    for ax in axes[-1]:
        ax.set_xlabel(ctx.t_label)
    fig.suptitle(f"{ctx.scenario}: PFC pause state", fontweight="bold")
    return fig


def _timeline_figure(ctx: _Context) -> Any | None:
    """One row per paused egress queue (node, port, priority), from the ``pfc_rx_*`` series,
    ordered by when it was first paused (a spreading storm reads top-down), deadlock onsets
    (red) and watchdog triggers (green) marked, with a zoom on the first pauses."""
    import matplotlib.pyplot as plt
    import numpy as np

    rows, prios = [], set()
    for mid, t, s in ctx.series("pfc_rx_", "_state"):
        on = np.nonzero(s)[0]
        if len(on):
            n, p, r = _parse_npp(mid)
            prios.add(r)
            rows.append((int(t[on[0]]), ctx.port(n, p), r, t, s))
    if not rows:
        return None
    rows.sort(key=lambda r: (r[0], r[1]))
    multi = len(prios) > 1
    bars = [(f"{lab}, priority {r}" if multi else lab, t, s) for _, lab, r, t, s in rows]
    win = cluster_window([r[0] for r in rows], ctx.dur_ps, share=0.5)
    fig, axes = plt.subplots(1, 2 if win else 1, squeeze=False, sharey=True,
                             figsize=(12 if win else 9, 1.6 + 0.3 * len(rows)),
                             gridspec_kw={"width_ratios": [2, 1]} if win else {})
    axes = axes[0]
    for j, ax in enumerate(axes):
        _bars(ctx, ax, bars, "tab:blue")
        ctx.mark_events(ax)
        ax.set_xlabel(ctx.t_label)
        if j == 0:
            ax.set(xlim=(0, ctx.t_end()), title="whole run")
        else:
            _zoom(ctx, ax, win, axes[0], "first pauses")
    fig.suptitle(f"{ctx.scenario}: egress queues paused by PFC ({_prio_text(prios)}), "
                 f"first paused at top", fontweight="bold")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(loc="best", fontsize="small", framealpha=0.9)
    return fig


# ----------------------------------------------------------------------------- rates


def _rates_figure(ctx: _Context) -> Any | None:
    import matplotlib.pyplot as plt

    ts = ctx.ts
    fids = sorted(int(k[len("rate_f"):-len("_t_ps")]) for k in ts
                  if k.startswith("rate_f") and k.endswith("_t_ps"))
    if not fids:
        return None
    fig, (ax, ax2) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True,
                                  gridspec_kw={"height_ratios": [2, 1]})
    for fid in fids:
        t, bps = ctx.pair(f"rate_f{fid}_t_ps", f"rate_f{fid}_bps")
        x, y = ctx.steps(t, bps / 1e9)
        x, y = x[1:], y[1:]  # the first sample is the flow's start
        line = ax.step(x, y, where="post", linewidth=1.1, label=f"{ctx.flow(fid)} rate")
        color = line[0].get_color()
        tt, target = ctx.pair(f"rate_f{fid}_t_ps", f"rate_f{fid}_target_bps")
        xt, yt = ctx.steps(tt, target / 1e9)
        ax.step(xt[1:], yt[1:], where="post", linestyle=":", linewidth=1, color=color,
                label=f"{ctx.flow(fid)} target" if len(fids) <= 4 else None)
        xa, ya = ctx.steps(*ctx.pair(f"rate_f{fid}_t_ps", f"rate_f{fid}_alpha"))
        ax2.step(xa[1:], ya[1:], where="post", linewidth=1, color=color)
    srcs = {ctx.flow_src(f) for f in fids}
    line_rates = {ctx.port_rate_bps(s, 0) for s in srcs if s is not None}
    if len(line_rates) == 1 and None not in line_rates:
        r = line_rates.pop()
        ax.axhline(r / 1e9, color="tab:red", linestyle="--", linewidth=1,
                   label=f"line rate {_gbps(r)}")
    ctx.mark_events(ax)
    ctx.mark_events(ax2, legend=False)
    ax.set(ylabel="sending rate (Gb/s)", xlim=(0, ctx.t_end()),
           title=f"{ctx.scenario}: sender rate control, {len(fids)} flow(s) "
                 f"(solid: current rate, dotted: target)")
    ax.set_ylim(bottom=0)
    if len(fids) <= 8:
        ax.legend(loc="lower left", fontsize="x-small", ncol=2)
    ax2.set(xlabel=ctx.t_label, ylabel="alpha (DCQCN)", ylim=(0, 1.05),
            title="alpha: the sender's estimate of the congestion (fraction of CE marks)")
    return fig


# ----------------------------------------------------------------------------- several runs


#: A curve's label names at most this many differing parameters (the rest are counted).
MAX_LABEL_KEYS = 4


def _flat_params(summary: Mapping[str, Any]) -> dict[str, Any]:
    """A run's settings as ``{dotted key: value}``: its scenario, every parameter of
    summary.json ``params`` (a fabric file's tables as ``switch.pfc``; array entries as
    ``collective.qps``, or ``collective.1.qps`` when there are several), and its seed."""
    out: dict[str, Any] = {"scenario": summary.get("scenario")}

    def walk(prefix: str, v: Any) -> None:
        if isinstance(v, Mapping):
            for k, x in v.items():
                walk(f"{prefix}{k}.", x)
        elif isinstance(v, list) and v and all(isinstance(x, Mapping) for x in v):
            for i, x in enumerate(v):
                walk(prefix if len(v) == 1 else f"{prefix}{i + 1}.", x)
        else:
            out[prefix[:-1]] = v

    walk("", summary.get("params") or {})
    out.setdefault("seed", summary.get("seed"))
    return out


def _value_text(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:g}"
    if v is None or isinstance(v, int | str):
        return "-" if v is None else str(v)
    return json.dumps(v, separators=(",", ":"))


def run_labels(summaries: list[Mapping[str, Any]], names: list[str]) -> list[str]:
    """One label per run: the settings that differ between the runs (``pfc false``, ``cc
    dcqcn, kmin_kb 10``; :func:`_flat_params`), at most :data:`MAX_LABEL_KEYS` of them;
    ``names`` (e.g. the folder names) when every setting is the same."""
    flat = [_flat_params(s) for s in summaries]
    keys: list[str] = []
    for f in flat:
        keys += [k for k in f if k not in keys]
    diff = [k for k in keys
            if len({json.dumps(f.get(k), sort_keys=True, default=str) for f in flat}) > 1]
    if not diff:
        return list(names)
    out = []
    for f in flat:  # a setting another run has and this one does not is left out
        mine = [k for k in diff if k in f]
        more = f" (+{len(mine) - MAX_LABEL_KEYS} more)" if len(mine) > MAX_LABEL_KEYS else ""
        out.append(", ".join(f"{k} {_value_text(f[k])}" for k in mine[:MAX_LABEL_KEYS])
                   + more)
    return [f"{lab} ({name})" if lab and out.count(lab) > 1 else lab or name
            for lab, name in zip(out, names, strict=True)]


def compare_figure(dirs: list[str | os.PathLike[str]], names: list[str] | None = None
                   ) -> Any:
    """One figure comparing several results folders (``lossless plot A B ...``): total
    delivered throughput (the trailing average of ``throughput.png``) and the bottleneck's
    egress queue (every priority summed) against time, one curve per run, and a table of
    each run's key figures; each run is named by the settings that differ
    (:func:`run_labels`), else by ``names`` (default: the folder names)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folders = [os.fspath(d) for d in dirs]
    runs = []
    try:
        for d in folders:
            with open(os.path.join(d, "summary.json"), encoding="utf-8") as f:
                summary = json.load(f)
            ts = _Arrays(os.path.join(d, "timeseries.npz"))
            runs.append(_Context(summary, ts))
        labels = run_labels([c.summary for c in runs],
                            names or [os.path.basename(os.path.normpath(d)) for d in folders])
        return _compare(runs, labels)
    except BaseException:
        plt.close("all")
        raise
    finally:
        for c in runs:
            c.ts.close()


def write_compare(dirs: list[str | os.PathLike[str]], path: str | os.PathLike[str]) -> str:
    """Save :func:`compare_figure` of ``dirs`` as the PNG ``path`` (whole or not at all,
    :func:`wire.atomic.atomic_file`); returns the path."""
    import matplotlib.pyplot as plt

    from wire.atomic import atomic_file

    fig = compare_figure(dirs)
    try:
        fig.tight_layout()
        with atomic_file(os.fspath(path), "wb") as f:
            fig.savefig(f, format="png", dpi=100)
    finally:
        plt.close(fig)
    return os.fspath(path)


def _step_sum(series: list[tuple[Any, Any]]) -> tuple[Any, Any]:
    """The sum of step functions (t_ps, values), each 0 before its first sample."""
    import numpy as np

    if not series:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    t = np.unique(np.concatenate([s[0] for s in series]))
    total = np.zeros(len(t))
    for st, sv in series:
        i = np.searchsorted(st, t, side="right") - 1
        total += np.where(i >= 0, np.asarray(sv, dtype=np.float64)[np.maximum(i, 0)], 0.0)
    return t, total


def _compare(runs: list[_Context], labels: list[str]) -> Any:
    import matplotlib.pyplot as plt
    import numpy as np

    dur = max(c.dur_ps for c in runs)
    unit_ps, unit = (10**6, "µs") if dur <= _US_AXIS_MAX_PS else (10**9, "ms")
    n = len(runs)
    fig, (ax, axq, axt) = plt.subplots(
        3, 1, figsize=(10, 8 + 0.3 * n),
        gridspec_kw={"height_ratios": [3, 3, 0.6 + 0.35 * n]})
    ports = {c.port(*c.queue_port) for c in runs}
    rows = []
    styles = ("-", "--", ":", "-.")  # curves that coincide stay visible
    for i, (c, label) in enumerate(zip(runs, labels, strict=True)):
        style = styles[i % len(styles)]
        ts, bin_ps = c.ts, int(c.ts["bin_ps"])
        flows = [ts[k] for k in ts if k.startswith("flow_") and k.endswith("_rx_bytes")]
        line = None
        if flows:
            total = np.sum(flows, axis=0) * 8 * 1000 / bin_ps  # bytes per bin -> Gb/s
            w = max(1, round(len(total) / 20))
            x = (ts["bin_t_ps"] + bin_ps) / unit_ps
            line = ax.plot(x, _moving_average(total, w), linewidth=1.6, linestyle=style,
                           label=label)[0]
        bn, bp = c.queue_port
        t, q = _step_sum([c.pair(k, k[:-len("t_ps")] + "bytes") for k in sorted(ts)
                          if k.startswith(f"queue_n{bn}_p{bp}_q") and k.endswith("_t_ps")])
        t = np.concatenate(([0], t, [c.dur_ps]))
        q = np.concatenate(([0.0], q, [q[-1] if len(q) else 0.0])) / 1000
        axq.step(t / unit_ps, q, where="post", linewidth=1.3, linestyle=style,
                 color=line.get_color() if line is not None else None,
                 label=label if len(ports) == 1 else f"{label}: {c.port(bn, bp)}")
        s = c.summary
        tot = s.get("totals", {})
        delivered = sum(f.get("bytes_delivered", 0) for f in s.get("flows", []))
        peak = max((p.get("max_queue_bytes", 0) for p in s.get("ports", [])
                    if (p["node"], p["port"]) == (bn, bp)), default=0)
        rows.append([label, f"{delivered * 8 / c.dur_ps * 1000:.4g}" if c.dur_ps else "-",
                     f"{s.get('bottleneck', {}).get('utilisation', 0):.4f}",
                     f"{peak / 1000:g}", str(tot.get("drops", 0)), str(tot.get("pauses", 0)),
                     str(tot.get("ce_marked", 0))])
    name = runs[0].scenario if len({c.scenario for c in runs}) == 1 else "runs"
    ax.set(ylabel="throughput (Gb/s)", xlim=(0, dur / unit_ps), ylim=(0, None),
           title=f"{name}: total delivered throughput (average over the twentieth of each "
                 f"run before each point)")
    if ax.lines:
        ax.legend(loc="lower right", fontsize="small", framealpha=0.9)
    else:
        _no_data(ax, "no RoCE flows in these runs")
    what = (f"egress queue of {ports.pop()}, the deepest of every run" if len(ports) == 1
            else "each run's deepest egress queue (legend: where)")
    axq.set(ylabel="egress queue depth (KB)", xlabel=f"time ({unit})", xlim=(0, dur / unit_ps),
            title=f"{what}, all priorities")
    axq.set_ylim(bottom=0)
    axq.legend(loc="best", fontsize="small", framealpha=0.9)
    axt.axis("off")
    table = axt.table(cellText=rows, bbox=(0, 0, 1, 1), cellLoc="left",
                      colWidths=[0.42, 0.09, 0.14, 0.12, 0.07, 0.07, 0.09],
                      colLabels=["run", "mean Gb/s", "bottleneck utilisation",
                                 "deepest queue KB", "drops", "pauses", "CE marks"])
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    fig.suptitle(f"{name}: {n} runs compared", fontweight="bold")
    return fig

"""SUE parameter studies: :func:`study` (in-process runs of ``sue_packing``) and
:func:`plot_study` (its figure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sim.scaleup.summary import sue_summary

__all__ = ["STUDY_COLUMNS", "study", "plot_study"]

STUDY_COLUMNS = ("header", "txn_bytes", "load", "hold_ns", "link_bps", "goodput_bps",
                 "goodput_per_xpu_bps", "steady_efficiency_pct", "saturation_goodput_pct",
                 "latency_p50_ps", "latency_p99_ps", "mean_txns_per_frame", "retransmissions")


def study(txn_bytes: Iterable[int] = (64, 128, 256), loads: Iterable[float] = (0.1, 0.5, 1.0),
          headers: Iterable[str] = ("esun",), base: Mapping[str, Any] | None = None,
          hold_ns: Iterable[float] | None = None,
          progress: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``sue_packing`` over every (header, transaction size, load[, hold]) combination,
    in this process and without output files (``lossless sweep sue_packing`` is the same study
    with outputs, seeds and Dask); ``base`` holds the other parameters.  Returns one row per
    run: the varied parameters, goodput, efficiency, p50/p99 latency (ps), transactions per
    frame, retransmissions."""
    from sim.scenarios import get
    from sim.study.sweep import expand

    builder = get("sue_packing").builder
    holds = list(hold_ns) if hold_ns is not None else [
        (base or {}).get("hold_ns", 0.0)]
    grid = {"header": list(headers), "txn_bytes": list(txn_bytes), "load": list(loads),
            "hold_ns": holds}
    rows = []
    for spec in expand("sue_packing", grid):  # the grid order of ``lossless sweep``
        sc = builder({**(base or {}), **spec["params"]})
        sc.fabric.run(sc.duration_ps)  # no output files: figures only
        s = sue_summary(sc)
        row = dict(spec["params"])
        row.update({k: s.get(k) for k in STUDY_COLUMNS if k not in row})
        rows.append(row)
        if progress is not None:
            progress(row)
    return rows


def plot_study(rows: Sequence[Mapping[str, Any]], path: str, x: str = "load") -> str:
    """Two panels against ``x`` (``load``, ``txn_bytes`` or ``hold_ns``): goodput (% of
    line rate, with the saturation arithmetic dashed) and p50/p99 latency (ns); one line per
    combination of the other varied parameters.  matplotlib is imported here (Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    varied = [k for k in ("header", "txn_bytes", "load", "hold_ns")
              if k != x and len({r[k] for r in rows}) > 1]
    groups: dict[tuple, list[Mapping[str, Any]]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in varied), []).append(r)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    for key, rs in groups.items():
        rs = sorted(rs, key=lambda r: r[x])
        label = ", ".join(f"{k}={v}" for k, v in zip(varied, key, strict=True)) or "run"
        xs = [r[x] for r in rs]
        rate = [r["goodput_per_xpu_bps"] for r in rs]
        link = [r.get("link_bps") for r in rs]
        pct = [100 * g / lk if lk else None for g, lk in zip(rate, link, strict=True)]
        if all(p is None for p in pct):
            pct = [r["steady_efficiency_pct"] for r in rs]
        line = ax1.plot(xs, pct, marker="o", label=label)[0]
        ax1.plot(xs, [r["saturation_goodput_pct"] for r in rs], linestyle="--",
                 color=line.get_color(), linewidth=0.8)
        ax2.plot(xs, [(r["latency_p50_ps"] or 0) / 1000 for r in rs], marker="o",
                 color=line.get_color(), label=f"{label} p50")
        ax2.plot(xs, [(r["latency_p99_ps"] or 0) / 1000 for r in rs], marker="x",
                 linestyle=":", color=line.get_color(), label=f"{label} p99")
    ax1.set(xlabel=x, ylabel="goodput per XPU (% of line rate)",
            title="SUE goodput (dashed: full-PDU arithmetic)")
    ax2.set(xlabel=x, ylabel="transaction latency (ns)", yscale="log",
            title="SUE transaction latency")
    ax1.legend(fontsize="x-small")
    ax2.legend(fontsize="x-small")
    fig.tight_layout()
    from wire.atomic import atomic_file

    with atomic_file(path, "wb") as f:  # temp + rename: an earlier figure stays whole
        fig.savefig(f, format="png", dpi=100)
    plt.close(fig)
    return path

"""PNG plots of ``lossless collective`` results (docs/reference/collective-results.md, "The PNGs"),
styled as :mod:`sim.study.plot` (Agg backend, imported lazily; :func:`sim.study.plot.texts`
reads their texts in tests).

The input is the results document of ``lossless collective --json`` / ``--out DIR``
(``results.json``): the run's settings and one row per size (:func:`sim.scenarios.collective.
run_size`); the largest size's row has ``links`` and ``timeline``.

- ``busbw_vs_size.png``: busbw (GB/s) against size on a log2 axis labelled as nccl-tests
  sizes (``1M``, ``2M``...), out-of-place and in-place, with the bound a ring can reach
  (:func:`busbw_bound`) as a dashed line that says what it is.  Several documents
  (``lossless plot A B C``) overlay one curve each, named by what differs between them.
- ``link_utilisation.png``: every link's utilisation during the largest size (tx bytes /
  (rate x collective time)), one panel per tier (``host->leaf``, ``leaf->spine``,
  ``spine->leaf``, ``leaf->host``), each sorted, the busiest link of each tier and of the
  fabric named.
- ``step_timeline.png``: one rank's sends and receives of the largest size, a bar per
  transfer from post to last byte received, one row per (channel, direction, peer),
  orange for reducing transfers and blue for copies; x in µs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any

from sim.workloads.nccl import rank_label

if TYPE_CHECKING:
    from wire.linkstack import HeaderStack

__all__ = ["busbw_bound", "config_label", "header_stack_of", "nic_rate", "figures",
           "is_collective_results", "load",
           "overlay_figure", "plot_results", "size_label", "size_text", "write_figures"]

RESULTS = "results.json"
#: A tier of more links than this is drawn as its sorted curve, not a bar a link (thinner
#: than a pixel, the bars would be drawn below their height: the busiest would not show).
MAX_BARS = 400
#: Per panel, up to this many links get their name under their bar.
MAX_NAMED_BARS = 24
#: At most this many rows in the step timeline (the rest are counted in the title).
MAX_TIMELINE_ROWS = 40
#: Settings compared between documents to name the curves of an overlay, in this order:
#: (label, getter).
_SETTINGS = ("collective", "nranks", "fabric", "algorithm", "protocol", "channels",
             "qps_per_connection", "datatype", "iters", "warmup_iters")
_SHORT = {"qps_per_connection": "qps", "algorithm": "algo", "protocol": "proto",
          "warmup_iters": "-w", "iters": "-n", "nranks": "ranks"}


def is_collective_results(d: str | os.PathLike[str]) -> bool:
    """True when folder ``d`` holds a ``results.json`` written by ``lossless collective``."""
    path = os.path.join(os.fspath(d), RESULTS)
    if not os.path.isfile(path):
        return False
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return True  # ours by name; load() reports what is wrong with it
    return isinstance(doc, dict) and "collective" in doc and "results" in doc


def load(d: str | os.PathLike[str]) -> dict[str, Any]:
    """The results document of folder ``d`` (``ValueError`` ``FILE: why`` when unreadable)."""
    path = os.path.join(os.fspath(d), RESULTS)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except FileNotFoundError:
        raise ValueError(f"{path}: missing (not a lossless collective results folder?)"
                         ) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: expected a JSON object")
    for key in ("collective", "results", "params", "protocol"):
        if key not in doc:
            raise ValueError(f"{path}: {key}: missing key")
    if not isinstance(doc["results"], list):
        raise ValueError(f"{path}: results: expected a list")
    return doc


# ----------------------------------------------------------------------------- labels


def size_label(nbytes: int) -> str:
    """nccl-tests' sizes as people write them: ``512``, ``32K``, ``1M``, ``1.5G`` (powers
    of 1024)."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g}{unit}"
    return str(nbytes)


def size_text(nbytes: int) -> str:
    """A size for a title: ``512 B``, ``32 KiB``, ``16 MiB``, ``1 GiB``."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{nbytes} B"


def _setting(doc: Mapping[str, Any], key: str) -> Any:
    if key in _SETTINGS:
        return doc.get(key)
    return doc.get("params", {}).get(key)


def config_label(doc: Mapping[str, Any], keys: Sequence[str]) -> str:
    """``"qps 4, pfc false"``: the values of ``keys`` in ``doc`` (settings or ``-p``
    parameters)."""
    parts = []
    for k in keys:
        v = _setting(doc, k)
        v = str(v).lower() if isinstance(v, bool) else (f"{v:g}" if isinstance(v, float)
                                                        else v)
        parts.append(f"{_SHORT.get(k, k)} {v}")
    return ", ".join(parts)


def _differing(docs: Sequence[Mapping[str, Any]]) -> list[str]:
    keys = list(_SETTINGS)  # and the -p parameters every document has (older: fewer)
    for k in docs[0].get("params", {}):
        if all(k in d.get("params", {}) for d in docs):
            keys.append(k)
    return [k for k in keys if len({json.dumps(_setting(d, k), sort_keys=True)
                                    for d in docs}) > 1]


def _common_title(doc: Mapping[str, Any], differing: Sequence[str] = ()) -> str:
    """Collective, ranks, fabric and link rate of ``doc``; the link rate is left out when it
    is one of the ``differing`` keys (the legend names it per curve)."""
    p = doc.get("params", {})
    rate = None if "link_gbps" in differing else p.get("link_gbps")
    return (f"{doc['collective']}, {doc.get('nranks', '?')} ranks, fabric "
            f"{doc.get('fabric', '?')}" + (f", {rate:g} Gb/s links" if rate else ""))


# ----------------------------------------------------------------------------- the bound


#: Collectives whose ring sends the same bytes on every ring edge (busbw = edge bytes / time).
_RING_COLLECTIVES = ("allreduce", "reducescatter", "allgather", "broadcast")


def nic_rate(doc: Mapping[str, Any]) -> tuple[float, str] | None:
    """The data rate (GB/s) one NIC moves, and what sets it: its line rate times the payload
    share of the wire time of its packets (MTU / the bytes a packet occupies on its link:
    :meth:`wire.linkstack.HeaderStack.wire_bytes` of the fabric's stack,
    :func:`header_stack_of`, what the ports serialise; on RoCEv2 the 58 bytes of headers
    plus Ethernet's FCS 4, preamble/SFD 8 and IFG 12, 4096/4178 for a 4154-byte packet; on
    InfiniBand its 26 bytes of headers, 4096/4122) and of the protocol (LL carries 8 data
    bytes per 16, LL128 120 per 128: :func:`sim.workloads.nccl.wire_bytes`), or the PCIe
    write budget of its slot (:class:`sim.nic.pcie.PcieLink`, when ``pcie_gen`` > 0) if that
    is lower.  None without a link rate."""
    from sim.workloads.nccl import wire_bytes

    p = doc.get("params", {})
    stack = header_stack_of(doc)
    gbps, packet = p.get("link_gbps"), p.get("packet_bytes") or stack.frame_bytes()
    if not gbps or packet <= stack.header_bytes:
        return None
    mtu = packet - stack.header_bytes
    probe = 120 * 8 * 1024  # a whole number of LL and LL128 lines
    proto = doc.get("protocol", "simple")
    try:
        eff = Fraction(probe, wire_bytes(probe, proto))
    except (ValueError, KeyError):
        eff = Fraction(1)
    proto_txt = "" if eff == 1 else f" x {eff.numerator}/{eff.denominator} ({proto} flags)"
    on_wire = stack.wire_bytes(packet)  # the packet on its link: what the ports serialise
    nic = gbps / 8 * mtu / on_wire * float(eff)
    framing = on_wire - packet  # Ethernet: FCS, preamble/SFD, IFG (and a short frame's pad)
    why = (f"{stack.header_bytes} B {stack.label}"
           + (f" + {framing} B FCS, preamble, IFG" if framing else ""))
    text = f"{gbps:g} Gb/s NIC x {mtu}/{on_wire} on the wire ({why}){proto_txt}"
    gen = p.get("pcie_gen") or 0
    if gen:
        from sim.nic.pcie import PcieLink

        try:
            link = PcieLink(int(gen), int(p.get("pcie_lanes", 16)),
                            int(p.get("pcie_mps_bytes", 256)))
        except ValueError:
            return nic, text
        pcie = link.write_bps() / 8e9 * float(eff)
        if pcie < nic:
            return pcie, (f"PCIe Gen{gen} x{link.lanes} write budget (MPS {link.mps_bytes})"
                          f"{proto_txt}, below the NIC's {nic:.2f}")
    return nic, text


def header_stack_of(doc: Mapping[str, Any]) -> HeaderStack:
    """The header stack of a results document's packets: ``header_stack`` (written on an
    InfiniBand fabric), else the ``fabric`` parameter (``roce`` | ``ib``), else RoCEv2."""
    from wire.linkstack import header_stack

    name = doc.get("header_stack") or doc.get("params", {}).get("fabric") or "roce"
    try:
        return header_stack(name)
    except ValueError:
        return header_stack("roce")


def busbw_bound(doc: Mapping[str, Any], row: Mapping[str, Any] | None = None
                ) -> tuple[float, str] | None:
    """The busbw (GB/s) the run cannot exceed at the size of ``row`` (its channel count;
    None: the document's ``channels``), and a legend text saying what sets it.

    Every hop over the network (no NVLink, or one GPU per node): one NIC's data rate
    (:func:`nic_rate`).  With NVLink inside nodes and ``gpus_per_node`` GPUs per node, a
    ring collective's channel ``c`` crosses the nodes on rail ``c mod gpus_per_node``
    (:func:`sim.workloads.nccl.nccl_rings`), so the busiest NIC carries
    ``ceil(channels / gpus_per_node)`` of the channels' ring edges: the bound is
    ``channels / ceil(channels / gpus_per_node)`` NICs' rates, at most NVLink's per-GPU rate
    (every edge of a GPU goes over its NVLink, directly or as PXN's first hop).  On one node
    the bound is NVLink's, except NVLS's: the switch reduces and multicasts, so a GPU moves
    (g + 1) / g of the buffer each way, and busbw can reach 2 (g - 1) / (g + 1) x NVLink.
    Any other AllReduce across m nodes (tree, NVLS tree) sends at least 2 (m - 1) / m of the
    buffer out of each node (the bandwidth bound of an AllReduce that reduces in its
    endpoints), over the node's g NICs.  Other collectives with NVLink: one NIC's rate,
    stated as counting the network hops only.  The algorithm is the row's (what ran at that
    size: the tuner's pick), else the document's."""
    p = doc.get("params", {})
    nr = nic_rate(doc)
    g = doc.get("gpus_per_node") or 1
    nodes = doc.get("nodes")
    algo = (row or {}).get("algorithm") or doc.get("algorithm")
    nvl = p.get("nvlink_gbps", 0) / 8 if p.get("nvlink") and g > 1 else None
    if nvl and nodes == 1:
        if algo == "nvls":
            k = 2 * (g - 1) / (g + 1)
            return k * nvl, (f"bound {k * nvl:.0f} GB/s: NVLS, {k:.3g} x NVLink "
                             f"{p['nvlink_gbps']:g} Gb/s (one node)")
        return nvl, f"bound {nvl:.0f} GB/s: NVLink {p['nvlink_gbps']:g} Gb/s (one node)"
    if nr is None:
        return None
    nic, why = nr
    if not nvl:
        return nic, f"bound {nic:.2f} GB/s: {why}"
    if algo in ("tree", "nvls_tree") and doc.get("collective") == "allreduce" and nodes \
            and nodes > 1:
        n = nodes * g
        k = g * (n - 1) * nodes / (n * (nodes - 1))
        return k * nic, (f"bound {k * nic:.2f} GB/s: {g} NICs of a node, an AllReduce "
                         f"sends 2(m-1)/m of it out of each of m = {nodes} nodes")
    if algo == "ring" and doc.get("collective") in _RING_COLLECTIVES:
        c = int((row or {}).get("nchannels") or doc.get("channels") or 1)
        per_nic = -(-c // g)
        k = c / per_nic
        if k * nic > nvl:
            return nvl, (f"bound {nvl:.0f} GB/s: NVLink {p['nvlink_gbps']:g} Gb/s per GPU, "
                         f"below {k:g} NICs")
        return k * nic, (f"bound {k * nic:.2f} GB/s: {c} channel(s) on {min(c, g)} rail(s): "
                         f"{k:g} x {nic:.2f} GB/s per NIC ({why})")
    return nic, f"NIC bound {nic:.2f} GB/s (network hops only): {why}"


# ----------------------------------------------------------------------------- figures


def _ok_rows(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["results"] if r.get("error") is None and "busbw_GB_per_s" in r]


def _size_axis(ax: Any, sizes: Sequence[int]) -> None:
    """Log2 x axis with one tick per measured size, labelled 1M, 2M... (thinned to at most
    12 labels)."""
    from matplotlib.ticker import NullLocator

    ax.set_xscale("log", base=2)
    ticks = sorted(set(sizes))
    every = max(1, -(-len(ticks) // 12))
    ax.set_xticks(ticks, [size_label(s) if i % every == 0 else ""
                          for i, s in enumerate(ticks)])
    ax.xaxis.set_minor_locator(NullLocator())
    if len(ticks) == 1:
        ax.set_xlim(ticks[0] / 2, ticks[0] * 2)
    ax.set_xlabel("size (B, nccl-tests -b/-e; K, M, G = 1024, 1024², 1024³)")


def overlay_figure(docs: Sequence[Mapping[str, Any]], names: Sequence[str] | None = None
                   ) -> Any:
    """``busbw_vs_size.png`` of one or several results documents; with several, each curve
    is named by the settings that differ between them (``names``, e.g. folder names, when
    none differs)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.2 + 0.45 * len(docs)))
    diff = _differing(docs) if len(docs) > 1 else []
    sizes: list[int] = []
    bounds: dict[str, tuple[float, Any]] = {}
    top = 0.0
    inplace = False
    for i, doc in enumerate(docs):
        rows = _ok_rows(doc)
        if len(docs) == 1:
            label = "out-of-place"
        elif diff:
            label = config_label(doc, diff)
        else:
            label = names[i] if names else f"run {i + 1}"
        x = [r["size_bytes"] for r in rows]
        sizes += x
        y = [r["busbw_GB_per_s"] for r in rows]
        line = ax.plot(x, y, marker="o", linewidth=1.6, label=label)[0]
        color = line.get_color()
        ip = [(r["size_bytes"], r["inplace"]["busbw_GB_per_s"]) for r in rows if r.get("inplace")]
        if ip:
            ax.plot([a for a, _ in ip], [b for _, b in ip], linestyle=":", marker="x",
                    markersize=7, color=color, label="in-place" if len(docs) == 1 else None)
            inplace = True
        top = max([top, *y, *(b for _, b in ip)])
        per_size = [(r["size_bytes"], busbw_bound(doc, r)) for r in rows] or \
            [(None, busbw_bound(doc))]
        per_size = [(x0, b) for x0, b in per_size if b is not None]
        if per_size:
            key = json.dumps([b for _, b in per_size])
            bounds.setdefault(key, (per_size, color, len({r.get("algorithm") for r in rows})))
    for per_size, color, nalgos in bounds.values():
        c = "tab:red" if len(bounds) == 1 else color
        text = per_size[-1][1][1]  # the largest size's
        values = [b[0] for _, b in per_size]
        if len(set(values)) == 1:
            ax.axhline(values[0], linestyle="--", linewidth=1.2, color=c, label=text)
        elif nalgos <= 1:  # fewer channels at small sizes: a lower bound there
            ax.plot([x0 for x0, _ in per_size], values, linestyle="--", linewidth=1.2,
                    color=c, drawstyle="steps-mid",
                    label=f"{text} (fewer channels below {size_label(_first_top(per_size))})")
        else:  # the tuner ran other algorithms at other sizes: each size's own bound
            ax.plot([x0 for x0, _ in per_size], values, linestyle="--", linewidth=1.2,
                    color=c, drawstyle="steps-mid",
                    label=f"{text}\n(the largest size's; each size has its algorithm's)")
        top = max(top, *values)
    if inplace and len(docs) > 1:
        from matplotlib.lines import Line2D

        ax.add_artist(ax.legend(handles=[
            Line2D([], [], color="0.3", marker="o", label="solid, o: out-of-place"),
            Line2D([], [], color="0.3", linestyle=":", marker="x", label="dotted, x: in-place")],
            loc="upper left", fontsize="small", framealpha=0.9))
    failed = sum(len(d["results"]) - len(_ok_rows(d)) for d in docs)
    if not sizes:
        ax.text(0.5, 0.5, "no size completed", transform=ax.transAxes, ha="center",
                va="center", color="0.35")
    else:
        _size_axis(ax, sizes)
    ax.set_ylim(0, max(top, 1e-3) * 1.12)
    ax.set_ylabel("busbw (GB/s, nccl-tests' bus bandwidth)")
    ax.grid(True, alpha=0.3)
    title = _common_title(docs[0], diff) if not diff or not {"collective", "nranks",
                                                             "fabric"} & set(diff) \
        else docs[0]["collective"]
    if len(docs) == 1:
        d = docs[0]
        ch = d.get("channels") or "auto"
        title += (f"; {d.get('algorithm')}/{d.get('protocol')}, channels {ch},"
                  f" qps {d.get('qps_per_connection')}")
    if failed:
        title += f"\n{failed} size(s) failed, not drawn (results.json: error)"
    ax.set_title(title)
    # below the axes: never over a curve or the bound
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.13), fontsize="small",
              frameon=False)
    fig.suptitle("bus bandwidth against size", fontweight="bold")
    return fig


def _first_top(per_size: Sequence[tuple[int, tuple[float, str]]]) -> int:
    """The smallest size whose bound is the largest size's."""
    last = per_size[-1][1][0]
    return min(x0 for x0, b in per_size if b[0] == last)


def _largest_with(doc: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    rows = [r for r in doc["results"] if r.get(key)]
    return max(rows, key=lambda r: r["size_bytes"]) if rows else None


def _link_figure(doc: Mapping[str, Any]) -> Any:
    import matplotlib.pyplot as plt

    row = _largest_with(doc, "links")
    if row is None:
        fig, ax = plt.subplots(figsize=(9, 3))
        ax.set_title(f"{_common_title(doc)}: link utilisation")
        ax.text(0.5, 0.5, "no per-link data (no size completed)", transform=ax.transAxes,
                ha="center", va="center", color="0.35")
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    tiers: dict[str, list[dict[str, Any]]] = {}
    for link in row["links"]:  # already in tier order
        tiers.setdefault(link["tier"], []).append(link)
    widths = [max(len(v), 3) for v in tiers.values()]
    named = max(len(v) for v in tiers.values()) <= MAX_NAMED_BARS
    fig, axes = plt.subplots(1, len(tiers), squeeze=False, sharey=True,
                             figsize=(min(max(9.0, 0.32 * sum(widths) + 1.5), 18),
                                      5.2 if named else 4.2),
                             gridspec_kw={"width_ratios": widths})
    axes = axes[0]
    busiest = max(row["links"], key=lambda v: v["utilisation"])
    for ax, (tier, links) in zip(axes, tiers.items(), strict=True):
        links = sorted(links, key=lambda v: -v["utilisation"])
        u = [100 * v["utilisation"] for v in links]
        if len(links) <= MAX_BARS:
            colors = ["tab:red" if v is busiest else "tab:blue" for v in links]
            ax.bar(range(len(links)), u, color=colors, width=0.8)
        else:  # more links than pixels: bars thinner than a pixel would lose the busiest
            x = [*range(len(links)), len(links)]  # (the sorted curve, as a filled outline)
            ax.fill_between(x, [*u, u[-1]], step="post", color="tab:blue", linewidth=0)
            ax.plot(x, [*u, u[-1]], drawstyle="steps-post", color="tab:blue", linewidth=1.2)
            if any(v is busiest for v in links):
                ax.plot([0], [u[0]], marker="o", color="tab:red", markersize=4)
        ax.axhline(100, color="0.3", linestyle="--", linewidth=1)
        top = links[0]
        busy = (f"max {100 * top['utilisation']:.0f}% ({top['name']}), mean "
                f"{sum(u) / len(u):.0f}%" if top["tx_bytes"] else "idle")
        ax.set_title(f"{tier}: {len(links)} links\n{busy}", fontsize="medium")
        if named:
            ax.set_xticks(range(len(links)),
                          [f"{v['name']}->{v['peer_name']}" for v in links],
                          rotation=90, fontsize="x-small")
        else:
            ax.set_xticks([])
            ax.set_xlabel("links, busiest first")
        if not any(v["tx_bytes"] for v in links):
            ax.text(0.5, 0.5, "idle: no bytes sent", transform=ax.transAxes, ha="center",
                    va="center", color="0.35", fontsize="large")
        ax.set_xlim(-0.6, max(len(links), 3) - 0.4)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].set_ylabel("utilisation (% of line rate)")
    axes[0].set_ylim(0, 112)
    t_us = row["time_ps"] / 1e6
    most = (f"busiest link {busiest['name']} -> {busiest['peer_name']} ({busiest['tier']}): "
            f"{100 * busiest['utilisation']:.1f}% of {busiest['rate_bps'] / 1e9:g} Gb/s"
            if busiest["tx_bytes"] else "no link carried a byte (everything over NVLink)")
    fig.suptitle(f"{_common_title(doc)}: link utilisation = tx bytes / (rate x time) during "
                 f"{size_text(row['size_bytes'])} ({t_us:.4g} µs)\n{most}",
                 fontweight="bold")
    return fig


def _lanes(bars: Sequence[tuple[int, int]]) -> tuple[list[int], int]:
    """Lane of each (start, end) so that bars of one row never overlap (greedy, in start
    order), and the number of lanes."""
    ends: list[int] = []
    lane = []
    for s, e in bars:
        for i, end in enumerate(ends):
            if end <= s:
                ends[i] = e
                lane.append(i)
                break
        else:
            ends.append(e)
            lane.append(len(ends) - 1)
    return lane, max(len(ends), 1)


def _timeline_figure(doc: Mapping[str, Any]) -> Any:
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    row = _largest_with(doc, "timeline")
    rank = doc.get("timeline_rank", 0)
    if row is None:
        fig, ax = plt.subplots(figsize=(9, 3))
        ax.set_title(f"{_common_title(doc)}: step timeline of rank {rank}")
        ring = any(r.get("engine") == "ring" and not r.get("error")
                   for r in doc.get("results", []))
        why = ("the sizes ran on the ring engine, which keeps no transfers (--engine job)"
               if ring else "no size completed, or the rank sends nothing")
        ax.text(0.5, 0.5, f"no timeline ({why})",
                transform=ax.transAxes, ha="center", va="center", color="0.35")
        ax.set_xticks([])
        ax.set_yticks([])
        return fig
    events = [e for e in row["timeline"] if e["start_ps"] is not None
              and e["finish_ps"] is not None]
    groups: dict[tuple[int, int, int], list[dict[str, Any]]] = {}
    for e in events:
        groups.setdefault((e["channel"], 0 if e["dir"] == "recv" else 1, e["peer"]),
                          []).append(e)
    keys = sorted(groups)
    more = len(keys) - MAX_TIMELINE_ROWS
    keys = keys[:MAX_TIMELINE_ROWS]
    fig, ax = plt.subplots(figsize=(11, max(3.0, 1.5 + 0.42 * len(keys))))
    colors = {True: "tab:orange", False: "tab:blue"}
    for y, key in enumerate(reversed(keys)):
        evs = sorted(groups[key], key=lambda e: e["start_ps"])
        lane, n = _lanes([(e["start_ps"], e["finish_ps"]) for e in evs])
        h = 0.8 / n
        # one collection per (lane, kind): the bars of a lane never overlap, and one
        # broken_barh per transfer cost a re-scaling of the axes each (quadratic: 42.4 s CPU
        # for rank 0 of a 248-GPU 64 MiB AllReduce, 1.13 s this way;
        # bench/results/2026-12-collectives.md)
        bars: dict[tuple[int, bool], list[tuple[float, float]]] = {}
        for e, li in zip(evs, lane, strict=True):
            s, f = e["start_ps"] / 1e6, e["finish_ps"] / 1e6
            bars.setdefault((li, bool(e["reduce"])), []).append((s, max(f - s, 1e-6)))
        for (li, red), xr in bars.items():
            ax.broken_barh(xr, (y - 0.4 + li * h, h * 0.92), facecolors=colors[red],
                           edgecolor="white", linewidth=0.4)
    g = doc.get("gpus_per_node") or 1
    nvlink = bool(doc.get("params", {}).get("nvlink")) and g > 1

    nranks = doc.get("nranks") or 1 << 30

    def via(peer: int) -> str:
        if not nvlink:
            return ""
        if peer >= 3 * nranks:  # a SHARP aggregator (sim.workloads.nccl.rank_label)
            return " (network)"
        if peer >= nranks:  # an NVLS buffer: in the node's NVSwitch
            return " (NVLink)"
        return " (NVLink)" if peer // g == rank // g else " (network)"

    ax.set_yticks(range(len(keys)),
                  [f"ch{c} {'recv from' if d == 0 else 'send to'} "
                   f"{rank_label(p, nranks, g)}{via(p)}"
                   for c, d, p in reversed(keys)], fontsize="small")
    ax.set_ylim(-0.6, len(keys) - 0.4)
    end_us = max((e["finish_ps"] for e in events), default=0) / 1e6
    ax.set_xlim(0, end_us * 1.01 or 1)
    ax.set_xlabel("time since the iteration's first send (µs)")
    ax.grid(True, axis="x", alpha=0.3)
    kinds = {bool(e["reduce"]) for e in events}
    ax.legend(handles=[Patch(color=colors[k], label=label) for k, label in (
        (True, "reduce\n(receiver combines)"), (False, "copy")) if k in kinds],
              loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    extra = f"; {more} more rows not shown" if more > 0 else ""
    # one title of two lines: a suptitle is not counted by tight_layout and overlapped the
    # axes' title on tall figures (many rows)
    ax.set_title(f"{_common_title(doc)}: step timeline of rank {rank}, "
                 f"{size_text(row['size_bytes'])} ({row['time_ps'] / 1e6:.4g} µs)\n"
                 f"{len(events)} transfers (posted -> last byte received), "
                 f"stacked where they overlap{extra}", fontsize="medium")
    return fig


def figures(doc: Mapping[str, Any]) -> dict[str, Any]:
    """file name -> matplotlib Figure of one results document, not saved (the caller closes
    them)."""
    import matplotlib

    matplotlib.use("Agg")
    return {"busbw_vs_size.png": overlay_figure([doc]),
            "link_utilisation.png": _link_figure(doc),
            "step_timeline.png": _timeline_figure(doc)}


def write_figures(figs: Mapping[str, Any], out_dir: str | os.PathLike[str]) -> list[str]:
    """Save ``figs`` (name -> Figure) into ``out_dir`` (each through
    :func:`wire.atomic.atomic_file`) and close them; returns the paths."""
    import matplotlib.pyplot as plt

    from wire.atomic import atomic_file

    written = []
    try:
        for name, fig in figs.items():
            path = os.path.join(os.fspath(out_dir), name)
            fig.tight_layout()
            with atomic_file(path, "wb") as f:
                fig.savefig(f, format="png", dpi=100)
            written.append(path)
    finally:
        for fig in figs.values():
            plt.close(fig)
    return written


def plot_results(doc: Mapping[str, Any], out_dir: str | os.PathLike[str]) -> list[str]:
    """Write the three PNGs of ``doc`` into ``out_dir``; returns their paths."""
    return write_figures(figures(doc), out_dir)

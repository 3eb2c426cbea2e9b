"""Where a run's traffic will queue, worked out before the run (docs/howto/replay-a-capture.md,
"The bottleneck"): the bottleneck of a run with replayed captures, whose
``bottleneck.pcap`` must be tapped before the first frame moves.

Every flow is followed along the switches' forwarding tables from its source host to its
destination (an ECMP group's member as the switch hashes the flow,
:func:`sim.net.switch.ecmp_hash`); at each switch egress port on the way its traffic joins a
fluid queue served at the port's rate: a replayed frame arrives whole at its injection time, a
simulated flow offers its rate from its start to its stop (or until its ``size_bytes`` are
sent at that rate).  The queue's largest backlog is the port's figure.  Path delays,
feedback (PFC, congestion control) and adaptive routing are left out: this ranks the ports
by how far their offered traffic exceeds what they can send, it does not predict depths.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["deepest_queue", "flow_paths", "fluid_backlog_bytes", "offered_backlog",
           "predicted_bottleneck"]

#: A route longer than this many switches is a loop: the walk stops there.
MAX_HOPS = 64


def flow_paths(fab: Any, src: int, dst: int, flow: int) -> list[tuple[int, int]]:
    """The switch egress ports (node, port) a frame of ``flow`` from host ``src`` to host
    ``dst`` leaves through, in order (empty when the source has no link or a switch has no
    route)."""
    from sim.net.switch import Switch, ecmp_hash, ecmp_salt

    out: list[tuple[int, int]] = []
    peer = getattr(fab.nodes[src].port, "peer", None)
    for _ in range(MAX_HOPS):
        if not isinstance(peer, Switch):
            break
        r = peer.routes.get(dst)
        if r is None:
            break
        if not isinstance(r, int):
            group = tuple(r)
            r = group[ecmp_hash(src, dst, flow, ecmp_salt(peer.node_id, peer.ecmp_seed))
                      % len(group)]
        out.append((peer.node_id, r))
        port = peer.ports.get(r)
        peer = getattr(port, "peer", None)
    return out


def fluid_backlog_bytes(rate_bps: int, arrivals: Any, segments: list[tuple[int, int, float]],
                        end_ps: int) -> float:
    """The largest backlog (bytes) of a fluid queue served at ``rate_bps`` over [0,
    ``end_ps``]: ``arrivals`` (t_ps, bytes) arrive whole, each of ``segments`` (start_ps,
    stop_ps, bytes per ps) flows in at its rate between its times.  With V(t) the bytes
    offered by t less what the port could send by then, the backlog at t is V(t) less the
    lowest V before it (the backlog of a constant-rate server: J.-Y. Le Boudec, P. Thiran,
    Network Calculus, LNCS 2050, 2001, chapter 1); V is linear between the arrival and segment
    times and jumps at arrivals, so its extremes are at those times."""
    import numpy as np

    t_a = np.asarray([a[0] for a in arrivals], dtype=np.int64)
    b_a = np.asarray([a[1] for a in arrivals], dtype=np.float64)
    keep = (t_a >= 0) & (t_a <= end_ps)
    t_a, b_a = t_a[keep], b_a[keep]
    order = np.argsort(t_a, kind="stable")
    t_a, b_a = t_a[order], b_a[order]
    times = [t_a, np.array([0, end_ps], dtype=np.int64)]
    for s, e, _r in segments:
        times.append(np.clip(np.array([s, e], dtype=np.int64), 0, end_ps))
    t = np.unique(np.concatenate(times))
    cum = np.concatenate(([0.0], np.cumsum(b_a)))
    before = cum[np.searchsorted(t_a, t, side="left")]
    after = cum[np.searchsorted(t_a, t, side="right")]
    fluid = np.zeros(len(t))
    for s, e, r in segments:
        fluid += r * np.clip(t - s, 0, max(e - s, 0))
    served = rate_bps / 8e12 * t
    low = np.minimum.accumulate(before + fluid - served)
    return float(max((after + fluid - served - low).max(), 0.0))


def offered_backlog(fab: Any, duration_ps: int) -> dict[tuple[int, int], float]:
    """Per switch egress port that some flow crosses, the largest fluid backlog (bytes) of
    the traffic offered to it over the run (module docstring): the simulated flows of
    ``fab.flows`` and the replayed captures' of ``fab.replayed``."""
    arrivals: dict[tuple[int, int], list[tuple[int, int]]] = {}
    segments: dict[tuple[int, int], list[tuple[int, int, float]]] = {}
    for fid, f in fab.flows.items():
        stop = duration_ps if f.stop_ps is None else min(f.stop_ps, duration_ps)
        if f.size_bytes is not None:
            stop = min(stop, f.start_ps + f.size_bytes * 8 * 10**12 // f.rate_bps)
        rate = f.rate_bps / 8e12
        if f.on_ps is not None:  # on/off: its mean rate
            rate *= f.on_ps / (f.on_ps + f.off_ps)
        for key in flow_paths(fab, f.src, f.dst, fid):
            segments.setdefault(key, []).append((f.start_ps, stop, rate))
    for fid, f in getattr(fab, "replayed", {}).items():
        frames = list(zip(f.at_ps, f.frame_bytes, strict=True))
        for key in flow_paths(fab, f.src, f.dst, fid):
            arrivals.setdefault(key, []).extend(frames)
    out = {}
    for key in {*arrivals, *segments}:
        node, port = key
        rate = fab.nodes[node].ports[port].rate_bps
        out[key] = fluid_backlog_bytes(rate, arrivals.get(key, ()), segments.get(key, []),
                                       duration_ps)
    return out


def deepest_queue(summary: Mapping[str, Any]) -> tuple[int, int] | None:
    """After a run, from its summary.json: the switch egress port whose queue was deepest
    (``ports[].max_queue_bytes``; ties: the bottleneck, then the longest paused, then the
    lowest node and port), where the run's congestion is; the bottleneck when no switch port
    queued more than it; None without a bottleneck or ports."""
    b = summary.get("bottleneck") or {}
    own = (b["node"], b["port"]) if "node" in b and "port" in b else None
    kinds = {n["id"]: n.get("kind") for n in (summary.get("labels") or {}).get("nodes", [])}
    peak = {(p["node"], p["port"]): (p.get("max_queue_bytes", 0), p.get("paused_ps", 0))
            for p in summary.get("ports", []) if kinds.get(p["node"], "switch") == "switch"}
    best = min(peak, key=lambda k: (-peak[k][0], k != own, -peak[k][1], k), default=None)
    if best is None or (own is not None and peak[best][0] <= peak.get(own, (0, 0))[0]):
        return own
    return best


def predicted_bottleneck(fab: Any, duration_ps: int, default: tuple[int, int]
                         ) -> tuple[tuple[int, int], float]:
    """The switch egress port with the largest :func:`offered_backlog` (ties: ``default``,
    then the lowest node and port) and that backlog, bytes; ``default`` (0.0) when no flow
    crosses a switch."""
    backlog = offered_backlog(fab, duration_ps)
    if not backlog:
        return default, 0.0
    top = max(backlog.values())
    if backlog.get(default, -1.0) >= top:
        return default, top
    return min(k for k, v in backlog.items() if v >= top), top

"""What a collective did to the fabric and to one rank (outputs of ``lossless collective``):
per-link bytes and utilisation, and one rank's transfers in time.

* :func:`port_counters`: a snapshot of every egress port's cumulative counters
  (:attr:`sim.net.port.Port.tx_bytes`, ``busy_ps``, ``tx_packets``), to subtract what earlier
  iterations sent;
* :func:`link_usage`: every connected egress port of every node (each switch port and each
  host's NIC port) over a window: bytes sent, serialising time, and utilisation = bytes x 8 /
  (rate x window), with the port's tier (``host->leaf``, ``leaf->spine``, ``spine->leaf``,
  ``leaf->host``; ``edge``/``agg``/``core`` on a 3-tier fabric; ``switch`` on a single
  switch);
* :func:`rank_timeline`: the transfers a rank sent and received in a
  :class:`sim.workloads.collective.CollectiveRun`, start and finish relative to the run's
  first start.

The results are plain dicts and lists (JSON-serialisable); ``tx_bytes`` counts frames as the
simulator does (without FCS, preamble and inter-frame gap), ``busy_ps`` the wire time
including them on Ethernet (:meth:`sim.net.port.Port.wire_bytes`; an InfiniBand link's
packets have none), so ``busy_ps / window`` is slightly above ``utilisation`` on RoCE.  PFC
frames a port sent are counted in both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sim.fabric import Fabric
from sim.net.switch import Switch
from sim.nic.host import Host
from sim.workloads.collective import CollectiveRun
from sim.workloads.nccl import rank_label

__all__ = ["busiest_link", "port_counters", "link_usage", "rank_timeline", "switch_levels",
           "level_names", "tier_order"]

#: Counters of one port: (tx_bytes, busy_ps, tx_packets).
PortCounters = tuple[int, int, int]


def port_counters(fabric: Fabric) -> dict[tuple[int, int], PortCounters]:
    """(node id, port index) -> (tx_bytes, busy_ps, tx_packets) of every port now."""
    return {(nid, idx): (p.tx_bytes, p.busy_ps, p.tx_packets)
            for nid, node in fabric.nodes.items() for idx, p in node.ports.items()}


def _peer_id(port: Any) -> int | None:
    peer = port.peer
    return None if peer is None else peer.node_id


def switch_levels(fabric: Fabric) -> dict[int, int]:
    """node id -> level: 0 for a host, 1 for a switch with hosts (leaf, edge), 2 for the
    switches one hop above (spine, aggregation), 3 above them (core); a breadth-first search
    from the hosts over the links.  A switch no host reaches gets no level."""
    level = {nid: 0 for nid, n in fabric.nodes.items() if isinstance(n, Host)}
    frontier = list(level)
    while frontier:
        nxt = []
        for nid in frontier:
            for p in fabric.nodes[nid].ports.values():
                peer = _peer_id(p)
                if peer is not None and peer not in level:
                    level[peer] = level[nid] + 1
                    nxt.append(peer)
        frontier = nxt
    return level


def level_names(top: int) -> dict[int, str]:
    """Names of the levels 0..top: host, then switch (one tier), leaf/spine (two tiers),
    edge/agg/core (three, the fat-tree's names of Al-Fares et al.), else ``tierN``."""
    names = {1: ["switch"], 2: ["leaf", "spine"], 3: ["edge", "agg", "core"]}.get(
        top, [f"tier{i}" for i in range(1, top + 1)])
    return {0: "host", **{i + 1: n for i, n in enumerate(names)}}


def tier_order(tier_from: int, tier_to: int) -> tuple[int, int]:
    """Sort key of a tier: upward ones from the hosts first (host->leaf, leaf->spine), then
    downward ones from the top (spine->leaf, leaf->host), then links within a level."""
    if tier_to > tier_from:
        return (0, tier_from)
    if tier_to < tier_from:
        return (1, -tier_from)
    return (2, tier_from)


def link_usage(fabric: Fabric, t0_ps: int, t1_ps: int, *,
               since: Mapping[tuple[int, int], PortCounters] | None = None,
               ranks: Sequence[int] | None = None,
               now: Mapping[tuple[int, int], PortCounters] | None = None
               ) -> list[dict[str, Any]]:
    """Every connected egress port of ``fabric`` over ``[t0_ps, t1_ps)``: what it sent since
    the snapshot ``since`` (:func:`port_counters` taken at ``t0_ps``; None: since the start)
    and its utilisation ``tx_bytes x 8 / (rate_bps x (t1_ps - t0_ps))`` (1.0 = line rate).

    One dict per port, in tier order (:func:`tier_order`), then by node and port: ``node``,
    ``port``, ``peer`` (node ids), ``name`` (``leaf0:p2``; a host's NIC is the host's name,
    ``h<id>``), ``peer_name``, with the fabric's names (:meth:`sim.fabric.Fabric.node_names`,
    the names of every other output), ``tier`` (``host->leaf`` ...), ``rate_bps``,
    ``tx_bytes``, ``tx_packets``, ``busy_ps`` and ``utilisation``.  ``ranks`` (the hosts'
    rank order) does not change the names: a host is named as in every other output.
    ``now``: the counters at ``t1_ps`` in :func:`port_counters`' form (default the ports'
    own; flow fidelity's come from its fluid flows)."""
    if t1_ps <= t0_ps:
        raise ValueError(f"empty window: t0_ps {t0_ps} >= t1_ps {t1_ps}")
    level = switch_levels(fabric)
    top = max(level.values(), default=0)
    lname = level_names(top)
    name = fabric.node_names()
    window = t1_ps - t0_ps
    base = since or {}
    rows = []
    for nid, node in fabric.nodes.items():
        if not isinstance(node, (Host, Switch)):
            continue
        for idx, p in node.ports.items():
            peer = _peer_id(p)
            if peer is None:
                continue
            b0, busy0, k0 = base.get((nid, idx), (0, 0, 0))
            b1, busy1, k1 = (now[(nid, idx)] if now is not None
                             else (p.tx_bytes, p.busy_ps, p.tx_packets))
            lv, pl = level.get(nid, -1), level.get(peer, -1)
            nbytes = b1 - b0
            rows.append({
                "node": nid, "port": idx, "peer": peer,
                "name": f"{name[nid]}:p{idx}" if not isinstance(node, Host) else name[nid],
                "peer_name": name[peer],
                "tier": f"{lname.get(lv, '?')}->{lname.get(pl, '?')}",
                "rate_bps": p.rate_bps, "tx_bytes": nbytes, "tx_packets": k1 - k0,
                "busy_ps": busy1 - busy0,
                "utilisation": nbytes * 8 * 10**12 / (p.rate_bps * window),
                "_key": (tier_order(lv, pl), nid, idx),
            })
    rows.sort(key=lambda r: r["_key"])
    for r in rows:
        del r["_key"]
    return rows


def rank_timeline(run: CollectiveRun, rank: int) -> list[dict[str, Any]]:
    """The transfers rank ``rank`` sent (``dir`` ``"send"``, ``peer`` the receiver) and
    received (``"recv"``, ``peer`` the sender) in ``run``, by start time: ``id``,
    ``channel``, ``step``, ``loop``, ``reduce`` (the receiver combines the data with its
    own), ``nbytes``, ``start_ps`` and ``finish_ps`` (posted and fully received, relative to
    the run's first start; None if it never happened)."""
    sch = run.schedule
    if not 0 <= rank < sch.nranks:
        raise ValueError(f"rank {rank} is not one of the {sch.nranks} ranks")
    if not sch.transfers:
        return []
    t0 = run.first_start_ps
    out = []
    for t in sch.transfers:
        if rank not in (t.src, t.dst) or t.src == t.dst:
            continue
        s, f = run.start_ps[t.id], run.finish_ps[t.id]
        out.append({"id": t.id, "dir": "send" if t.src == rank else "recv",
                    "peer": t.dst if t.src == rank else t.src, "channel": t.channel,
                    "step": t.step, "loop": t.loop, "reduce": t.reduce, "nbytes": t.nbytes,
                    "start_ps": None if s is None else s - t0,
                    "finish_ps": None if f is None else f - t0})
    out.sort(key=lambda e: (e["start_ps"] is None, e["start_ps"] or 0, e["id"]))
    return out


def busiest_link(links: Sequence[Mapping[str, Any]] | None) -> dict[str, Any] | None:
    """The most utilised link of a size (``links`` of :func:`sim.scenarios.collective.run_size` with
    ``details``, i.e. :func:`link_usage`):
    ``name`` (``leaf0:p2->spine0``), ``tier``, ``utilisation``; None without links, or when
    no link carried a byte (everything over NVLink: one node)."""
    if not links:
        return None
    b = max(links, key=lambda v: v["utilisation"])
    if not b["tx_bytes"]:
        return None
    return {"name": f"{b['name']}->{b['peer_name']}", "tier": b["tier"],
            "utilisation": b["utilisation"]}


#: Most transfers a trace holds (two events each, about 250 bytes of JSON per event).
TRACE_MAX_TRANSFERS = 500_000


def chrome_trace(run: CollectiveRun, gpus_per_node: int = 1, nvlink: bool = True,
                 label: str = "") -> dict[str, Any]:
    """``run`` as Chrome trace events (the JSON Perfetto and chrome://tracing open): a
    process per rank (``rank 5 (node 0, GPU 5)``) and per NVLS buffer (``NVLS reduce of
    head 1 (node 0)``, in the NVSwitch), a track per channel, direction and path
    (``ch 3 send net``, ``ch 3 recv NVLink``), and per transfer a slice on its sender's send
    track from its post to its last byte received (``reduce -> 6`` or ``copy -> 6``), the
    same span on its receiver's recv track, and, where it was posted after its data were
    ready (NCCL's host side, its connection's order), a ``wait`` slice on the sender's send
    track before it.  Times in µs from the call's launch (or its first post), as the format
    wants; ``label`` names the trace.  ValueError beyond :data:`TRACE_MAX_TRANSFERS`."""
    sch = run.schedule
    if len(sch.transfers) > TRACE_MAX_TRANSFERS:
        raise ValueError(f"{len(sch.transfers)} transfers: a trace holds at most "
                         f"{TRACE_MAX_TRANSFERS} (a smaller size, or fewer ranks)")
    g = max(1, gpus_per_node)
    t0 = run.launch_ps if run.launch_ps is not None else (
        run.first_start_ps if sch.transfers else 0)
    events: list[dict[str, Any]] = []
    tids: dict[tuple[int, str], int] = {}

    def tid(rank: int, name: str) -> int:
        key = (rank, name)
        if key not in tids:
            tids[key] = n = len([k for k in tids if k[0] == rank]) + 1
            events.append({"ph": "M", "name": "thread_name", "pid": rank, "tid": n,
                           "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": rank, "tid": n,
                           "args": {"sort_index": n}})
        return tids[key]

    for r in sch.pseudo_ranks():
        name = f"rank {r} (node {r // g}, GPU {r % g})" if r < sch.nranks else \
            rank_label(r, sch.nranks, sch.gpus_per_node, sch.aggregators)
        events.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": name}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": r,
                       "args": {"sort_index": r}})
    ready = run.ready_ps or [None] * len(sch.transfers)
    for t in sch.transfers:
        s, f = run.start_ps[t.id], run.finish_ps[t.id]
        if s is None or f is None or t.src == t.dst:
            continue
        path = "NVLink" if nvlink and g > 1 and sch.node_of(t.src) == sch.node_of(t.dst) \
            else "net"
        what = "reduce" if t.reduce else "copy"
        args = {"id": t.id, "bytes": t.nbytes, "step": t.step, "loop": t.loop,
                "channel": t.channel}
        send = tid(t.src, f"ch {t.channel} send {path}")
        rd = ready[t.id]
        if rd is not None and rd < s:
            events.append({"ph": "X", "name": "wait", "cat": "wait", "pid": t.src,
                           "tid": send, "ts": (rd - t0) / 1e6, "dur": (s - rd) / 1e6,
                           "args": {"id": t.id}})
        events.append({"ph": "X", "name": f"{what} -> {t.dst}", "cat": path, "pid": t.src,
                       "tid": send, "ts": (s - t0) / 1e6, "dur": (f - s) / 1e6,
                       "args": args})
        events.append({"ph": "X", "name": f"{what} <- {t.src}", "cat": path, "pid": t.dst,
                       "tid": tid(t.dst, f"ch {t.channel} recv {path}"),
                       "ts": (s - t0) / 1e6, "dur": (f - s) / 1e6, "args": args})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"trace": label, "ranks": sch.nranks, "transfers": len(sch.transfers),
                          "time_us": run.time_ps / 1e6 if sch.transfers else 0.0}}

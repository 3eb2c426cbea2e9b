"""Per-flow conservation of a run (sent = delivered + dropped + in flight, each counted on
its own) and the packets still in a fabric: used by :mod:`sim.study.results` (every run) and
:mod:`sim.study.fault_report` (``lossless collective`` with faults), moved here from
sim/study/results.py so that both can import it without an import cycle."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sim.nic.host import Host

__all__ = ["flow_conservation", "live_packets"]


def flow_conservation(fab: Any, rec: Any) -> dict[int, dict[str, int]]:
    """Per flow of ``fab.flows`` and of ``fab.replayed`` (the replayed captures' flows), its
    data frames: sent (by the source NIC; a replayed frame when it is injected), delivered
    (at the destination), dropped (``Dropped`` events, wherever: switch buffer, TTL, no
    route, watchdog, stalled receiver, ...) and in flight at the end (in a port queue, being
    serialised or on a wire: found by walking the queues and the pending events).  Each is
    counted independently, so ``sent = delivered + dropped + in_flight`` is a real check."""
    replayed = getattr(fab, "replayed", None) or {}
    flight: dict[int, list[int]] = {}
    for pkt in live_packets(fab):
        if (pkt.frame is None and pkt.flow in fab.flows) or pkt.flow in replayed:
            c = flight.get(pkt.flow)
            if c is None:
                c = flight[pkt.flow] = [0, 0]
            c[0] += 1
            c[1] += pkt.nbytes
    out: dict[int, dict[str, int]] = {}
    for fid, f in fab.flows.items():
        src, dst = fab.nodes[f.src], fab.nodes[f.dst]
        d = rec.flow_drops.get(fid, (0, 0))
        fl = flight.get(fid, (0, 0))
        out[fid] = {
            "sent_packets": src.sent_packets.get(fid, 0), "sent_bytes": src.sent_bytes.get(fid, 0),
            "delivered_packets": dst.rx_packets.get(fid, 0),
            "delivered_bytes": dst.rx_bytes.get(fid, 0),
            "dropped_packets": d[0], "dropped_bytes": d[1],
            "in_flight_packets": fl[0], "in_flight_bytes": fl[1],
        }
        if getattr(src, "reliable", False):  # RC (sim.nic.rc): every transmission is sent,
            rc = src.rc_stats(fid)  # resends too; frames SR holds are still on their way
            held = dst.rc_held(fid)
            out[fid].update(sent_packets=rc["sent_frames"], sent_bytes=rc["sent_bytes"],
                            in_flight_packets=fl[0] + held[0], in_flight_bytes=fl[1] + held[1])
    for fid, f in replayed.items():
        dst = fab.nodes[f.dst]
        d = rec.flow_drops.get(fid, (0, 0))
        fl = flight.get(fid, (0, 0))
        out[fid] = {
            "sent_packets": f.sent_packets, "sent_bytes": f.sent_bytes,
            "delivered_packets": dst.rx_packets.get(fid, 0),
            "delivered_bytes": dst.rx_bytes.get(fid, 0),
            "dropped_packets": d[0], "dropped_bytes": d[1],
            "in_flight_packets": fl[0], "in_flight_bytes": fl[1],
        }
    return out


def live_packets(fab: Any) -> Iterator[Any]:
    """Every packet still in ``fab``: in a port queue, in a NIC's receive buffer, or an
    argument of a pending event (being serialised or on a wire)."""
    from sim.packet import SimPacket

    for node in fab.nodes.values():
        for port in node.ports.values():
            for q in port.queues:
                for pkt in q:
                    if isinstance(pkt, SimPacket):
                        yield pkt
        if isinstance(node, Host):  # in its receive buffer, not yet written over PCIe
            yield from node.rx_buffered()
    for args in fab.engine.pending_args():
        for a in args:
            if isinstance(a, SimPacket):
                yield a

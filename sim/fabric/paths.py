"""Where a flow's packets go, worked out without packets.

:func:`path_links` follows the forwarding tables of a built :class:`sim.fabric.Fabric` from a
sending host to a receiving host for one flow, as :class:`sim.net.switch.Switch` forwards
its packets: a destination's single port, or the member ``ecmp_hash(src, dst, flow,
ecmp_salt(switch, seed)) % len(group)`` of its ECMP group (``Switch._resolve``: one choice
per flow, the same for every packet).  The packet's ``(src, dst, flow)`` is (the sending
NIC's host id, the receiving NIC's host id, the flow id): for a collective's QP the flow id
is its QP number (:class:`sim.workloads.collective.CollectiveJob`).  A link that carries a
fault leads to the node behind it (:func:`sim.fabric.faults.peer_node`).

Adaptive routing (``routing = "adaptive"``) picks a member per packet by queue depth, so a
flow has no single path there: :func:`path_links` refuses it.  This is the first piece of a
flow-level fidelity (fluid flows on these paths), checked against what packets did: the
switches' ``ecmp_choices`` after a packet run.
"""

from __future__ import annotations

from typing import Any

from sim.fabric.faults import peer_node
from sim.net.switch import Switch, ecmp_hash, ecmp_salt

__all__ = ["PathError", "path_links"]


class PathError(ValueError):
    """No single path: no route, a loop, a link without a peer, adaptive routing."""


def path_links(fabric: Any, src: int, dst: int, flow: int) -> tuple[tuple[int, int], ...]:
    """The links a flow's packets leave through, in order: ``(node id, egress port)`` from
    host ``src``'s port 0, then each switch's, up to the link into host ``dst``."""
    nodes = fabric.nodes
    node = nodes.get(src)
    if node is None or dst not in nodes:
        raise PathError(f"flow {flow}: no host {src if node is None else dst}")
    links = [(src, 0)]
    hop = peer_node(node.ports.get(0))
    seen = {src}
    while hop is not None and hop.node_id != dst:
        if not isinstance(hop, Switch):
            raise PathError(f"flow {flow}: reached host {hop.node_id}, not {dst}")
        if hop.node_id in seen:
            raise PathError(f"flow {flow}: a loop through switch {hop.node_id}")
        seen.add(hop.node_id)
        if hop.routing == "adaptive":
            raise PathError(f"flow {flow}: switch {hop.node_id} routes adaptively (a port "
                            f"per packet), no single path")
        r = hop.routes.get(dst)
        if r is None:
            raise PathError(f"flow {flow}: switch {hop.node_id} has no route to {dst}")
        if isinstance(r, int):
            out = r
        else:
            group = tuple(r)
            out = group[ecmp_hash(src, dst, flow, ecmp_salt(hop.node_id, hop.ecmp_seed))
                        % len(group)]
        port = hop.ports.get(out)
        if port is None:
            raise PathError(f"flow {flow}: switch {hop.node_id} has no port {out}")
        links.append((hop.node_id, out))
        hop = peer_node(port)
    if hop is None:
        raise PathError(f"flow {flow}: a link without a peer on the way to {dst}")
    return tuple(links)

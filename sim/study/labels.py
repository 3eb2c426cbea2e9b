"""Names a user knows, computed from a built scenario: the ``labels`` section of summary.json
that the plots (:mod:`sim.study.plot`) use instead of internal ids
(docs/reference/results-folder.md, "Names of nodes and ports").

``labels(sc)`` returns JSON-able lists (lists, so ``sim.study.sweep.flatten_summary`` leaves them
out
of sweep rows):

- ``nodes``: ``{id, name, kind}``; names are the fabric's (:meth:`sim.fabric.Fabric.node_names`,
  the same under ``lossless collective``): ``spine0``, ``leaf1`` (leaf-spine and rail, built-in
  or fabric file), ``edge0``/``agg0``/``core0`` (fat-tree), ``sw2`` (ring), ``switch`` (star),
  ``sw<id>`` (a fabric file's custom topology, SUE), every host ``h<node id>`` (the id is also
  in its MAC/IP, sim/addresses.py); the scenario's own for the nodes it names: ``receiver``
  (star scenarios), the letters of ``pfc_unfairness`` (B, A, R, L, V) and
  ``pfc_deadlock_loop`` (A, B, S, D), ``xpu3``.
- ``ports``: ``{node, port, peer, peer_port, name, rate_bps}``, ``name`` like
  ``"leaf0:p3 -> h8"`` (egress port 3 of leaf0, towards h8).
- ``flows``: ``{id, src, dst, name, role, priority, rate_bps}`` (``rate_bps``: the rate it
  offers; a replayed flow's is its bytes over the time from its first frame to its last, null
  for one instant); ``name`` like ``"h1 -> receiver"``, ``role`` the scenario's role in words
  (``culprit (to stalled NIC)``, ``victim``, ``bystander``, ``late joiner``, ...),
  ``replayed`` for a flow of a replayed capture (``--pcap``), or null.
- ``switches``: per switch the thresholds that apply to its queues, in bytes: ECN ``kmin_bytes``
  / ``kmax_bytes`` / ``pmax`` (null without marking) on egress queues, and PFC on ingress
  (port, PG) occupancy (reserved + shared + headroom, as in the ``ingress_*`` series):
  ``xoff_bytes`` = reserved + static XOFF, ``xon_bytes`` = that minus the XON delta (null for
  dynamic thresholds or without PFC), ``lossless_priorities``.
- ``markers``: ``{t_ps, label}`` moments the scenario scripts (a NIC stalls, a flow joins).
"""

from __future__ import annotations

from typing import Any

__all__ = ["labels", "role_text"]

#: Scenario role keys (``Scenario.info["roles"]``) in words.
_ROLE_TEXT = {
    "to_broken": "culprit (to stalled NIC)",
    "victim": "victim",
    "bystander": "bystander",
    "group": "group (behind A)",
    "lone": "lone sender L",
}


def role_text(role: str | None) -> str | None:
    """A scenario's role key in words (unknown keys pass through)."""
    return None if role is None else _ROLE_TEXT.get(role, role)


def _node_names(sc: Any) -> dict[int, str]:
    """The fabric's names (:meth:`sim.fabric.Fabric.node_names`: ``leaf0``, ``spine1``,
    ``switch``, ``h4``, a fabric file's ``sw<id>``), with the scenario's own for the nodes it
    names: the star's ``receiver``, the letters of ``pfc_unfairness`` and
    ``pfc_deadlock_loop`` (their papers' figures), ``xpu<id>``."""
    info = sc.info
    names = sc.fabric.node_names()
    if "receiver" in info and "senders" in info:
        names[info["receiver"]] = "receiver"
    elif sc.name == "pfc_unfairness" and "roles" in info:
        from sim.scenarios.pfc_unfairness import A, B, L, R, V

        names.update({B: "B", A: "A", R: "R", L: "L", V: "V"})
    elif "crossings" in info:
        from sim.scenarios.pfc_deadlock_loop import A, B, D, S

        names.update({A: "A", B: "B", S: "S", D: "D"})
    elif "xpus" in info:
        names.update({n: f"xpu{n}" for n in info["xpus"]})
    return names


def _flow_role(sc: Any, fid: int) -> str | None:
    info = sc.info
    roles = info.get("roles")
    if roles and fid in roles:
        return role_text(roles[fid])
    if "join_ps" in info:
        return "late joiner" if fid == 1 else "first"
    return None


def _switch_thresholds(nid: int, sw: Any) -> dict[str, Any]:
    cfg = sw.mmu.config
    ecn = sw.ecn
    static = cfg.xoff_mode == "static" and cfg.lossless_pgs
    xoff = cfg.reserved_bytes + cfg.xoff_bytes if static else None
    return {
        "node": nid,
        "kmin_bytes": ecn.kmin_bytes if ecn is not None else None,
        "kmax_bytes": ecn.kmax_bytes if ecn is not None else None,
        "pmax": ecn.pmax if ecn is not None else None,
        "xoff_mode": cfg.xoff_mode,
        "xoff_bytes": xoff,
        "xon_bytes": max(xoff - cfg.xon_delta_bytes, 0) if xoff is not None else None,
        "reserved_bytes": cfg.reserved_bytes,
        "headroom_bytes": cfg.headroom_bytes,
        "lossless_priorities": sorted(cfg.lossless_pgs),
    }


def labels(sc: Any) -> dict[str, Any]:
    """The ``labels`` section of summary.json for a built scenario (module docstring)."""
    from sim.net.switch import Switch

    fab = sc.fabric
    names = _node_names(sc)
    nodes = [{"id": nid, "name": names[nid],
              "kind": "switch" if isinstance(node, Switch) else "host"}
             for nid, node in sorted(fab.nodes.items())]
    ports = []
    for nid, node in sorted(fab.nodes.items()):
        for idx, p in sorted(node.ports.items()):
            peer = getattr(p.peer, "node_id", None)
            ports.append({"node": nid, "port": idx, "peer": peer, "peer_port": p.peer_port,
                          "name": f"{names[nid]}:p{idx} -> "
                                  f"{names.get(peer, '?') if peer is not None else 'nothing'}",
                          "rate_bps": p.rate_bps})
    flows = [{"id": f.id, "src": f.src, "dst": f.dst,
              "name": f"{names[f.src]} -> {names[f.dst]}", "role": _flow_role(sc, f.id),
              "priority": f.tc, "rate_bps": f.rate_bps}
             for _, f in sorted(fab.flows.items())]
    flows += [{"id": f.id, "src": f.src, "dst": f.dst,
               "name": f"{names[f.src]} -> {names[f.dst]}", "role": "replayed",
               "priority": f.tc, "rate_bps": f.rate_bps}
              for _, f in sorted((getattr(fab, "replayed", None) or {}).items())]
    switches = [_switch_thresholds(nid, n) for nid, n in sorted(fab.nodes.items())
                if isinstance(n, Switch)]
    markers = []
    if "stall_ps" in sc.info and "broken_host" in sc.info:
        markers.append({"t_ps": sc.info["stall_ps"],
                        "label": f"{names[sc.info['broken_host']]} NIC stalls"})
    if "join_ps" in sc.info:
        late = [f for f in flows if f["role"] == "late joiner"]
        who = late[0]["name"] if late else "second flow"
        markers.append({"t_ps": sc.info["join_ps"], "label": f"{who} joins"})
    return {"nodes": nodes, "ports": ports, "flows": flows, "switches": switches,
            "markers": markers}

"""A run's port counters in the terms of the tools an engineer reads on the real fabric.

After a run, every connected port of the fabric as the tool that reads that port on a real
cluster names and counts it, so the simulation can be held next to the fabric:

* an InfiniBand port (switch or HCA): ``perfquery -x`` (rdma-core ``infiniband-diags/
  perfquery.c``, the PortCountersExtended attribute of IBA Vol. 1 16.1.4): ``PortXmitData``
  and ``PortRcvData`` in 4-octet words of the octets from the LRH through the ICRC (the VCRC,
  the delimiters and link packets excluded), ``PortXmitPkts``/``PortRcvPkts`` (and their
  unicast twins: the simulator sends no multicast), ``PortXmitWait`` (the time the port had a
  packet to send and no credits, in ticks of :data:`XMIT_WAIT_TICK_BYTES` bytes at the port's
  rate: NVIDIA Quantum switches count one every 8 bytes' time whatever the width, ibdiagnet
  User Manual, "Congestion Assessment on InfiniBand Links"), ``PortRcvSwitchRelayErrors``
  (packets a switch could not forward: no route, hop limit), ``PortRcvErrors`` (packets a
  faulty link corrupted, or an HCA's receive side dropped), ``PortXmitDiscards`` (packets
  dropped at egress: a link down, a PFC watchdog), ``LinkDownedCounter`` (times the link
  went down);
* an Ethernet NIC (RoCE): mlx5's ``ethtool -S`` (Linux ``Documentation/networking/
  device_drivers/ethernet/mellanox/mlx5/counters.rst``): ``tx_bytes_phy``/``rx_bytes_phy``
  (frames with their FCS: ``sim.units.FCS_BYTES`` a frame added to the simulator's bytes),
  ``tx_packets_phy``/``rx_packets_phy``, ``rx_discards_phy`` (frames dropped where they came
  in: a NIC's receive side, a switch's buffer admission), ``tx_discards_phy`` (frames
  dropped at egress: a link down, a PFC watchdog), ``rx_crc_errors_phy`` (frames a faulty
  link corrupted), ``link_down_events_phy``, ``tx_pause_ctrl_phy``/``rx_pause_ctrl_phy``
  (PFC frames) and per PFC priority ``rx_prioP_pause``, ``rx_prioP_pause_duration`` (µs
  paused), ``tx_prioP_pause``, ``tx_prioP_pause_duration`` (µs the NIC had its peer paused), and
  ``tx_pause_storm_error_events`` (the NIC's pause-storm watchdog fired); with the RDMA
  device's ``hw_counters`` (``rdma statistic show``): ``np_cnp_sent``, ``rp_cnp_handled``,
  ``np_ecn_marked_roce_packets``, ``out_of_sequence`` and, with reliable connections,
  ``packet_seq_err`` (sequence NAKs received), ``local_ack_timeout_err``,
  ``duplicate_request``;
* an Ethernet switch port: the same ``ethtool``-style names (a SONiC switch's
  ``show pfc counters`` and ``portstat`` read the same quantities).

What a port received is what its peer sent (a frame on the wire at the run's end counts as
received).  A pause's duration on the sending side is the time its peer was paused on that
priority.  Counters a run cannot make (symbol errors, link recovery, multicast, VL15) are not
kept: :func:`format_perfquery` prints them 0, as a clean port shows them.

:func:`port_counters` gives the records (JSON-serialisable: ``summary.json``'s
``tool_counters``, ``counters.json`` of ``lossless collective``); :func:`format_perfquery`,
:func:`format_ethtool` and :func:`format_rdma_statistic` print them as the tools do
(``lossless counters OUT_DIR --as perfquery|ethtool|rdma``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sim.fabric.core import Fabric
from sim.fabric.faults import peer_node
from sim.net.port import PRIORITIES
from sim.net.switch import Switch
from sim.nic.host import Host
from sim.units import FCS_BYTES, PS_PER_NS, PS_PER_S
from wire.ib import VCRC_BYTES

__all__ = ["PERFQUERY_X_FIELDS", "XMIT_WAIT_TICK_BYTES", "ToolOutputError",
           "format_ethtool", "format_perfquery", "format_rdma_statistic", "port_counters",
           "read_ethtool", "read_perfquery", "record_problem"]

# FCS_BYTES (sim.units): the simulator's Ethernet frame bytes leave it out, mlx5's
# *_bytes_phy count it.  VCRC_BYTES (wire.ib): in the simulator's IB packet bytes, not
# counted by PortXmitData, which stops at the ICRC.
_PS_PER_US = 1000 * PS_PER_NS
#: PortXmitWait's tick: the time to send this many bytes at the port's rate (NVIDIA
#: Quantum switches, ibdiagnet User Manual: "increments xmit_wait every 8 bytes -
#: regardless of the port width", PortSamplesControl.Tick 7)
XMIT_WAIT_TICK_BYTES = 8

#: ``perfquery -x``'s fields in its order (``dump_perfcounters_ext``), with a CapMask that
#: prints the three blocks (0x5300, CapMask2 0x2: a Quantum switch's)
PERFQUERY_X_FIELDS = (
    "PortXmitData", "PortRcvData", "PortXmitPkts", "PortRcvPkts", "PortUnicastXmitPkts",
    "PortUnicastRcvPkts", "PortMulticastXmitPkts", "PortMulticastRcvPkts", "CounterSelect2",
    "SymbolErrorCounter", "LinkErrorRecoveryCounter", "LinkDownedCounter", "PortRcvErrors",
    "PortRcvRemotePhysicalErrors", "PortRcvSwitchRelayErrors", "PortXmitDiscards",
    "PortXmitConstraintErrors", "PortRcvConstraintErrors", "LocalLinkIntegrityErrors",
    "ExcessiveBufferOverrunErrors", "VL15Dropped", "PortXmitWait", "QP1Dropped")
#: mlx5's RDMA ``hw_counters`` kept, in ``rdma statistic``'s order (the driver's)
HW_COUNTERS = ("out_of_sequence", "duplicate_request", "packet_seq_err",
               "local_ack_timeout_err", "rp_cnp_handled", "np_ecn_marked_roce_packets",
               "np_cnp_sent")


def _ib_address(fabric: Fabric, nid: int, idx: int) -> tuple[int, int]:
    """(LID, port number) of port ``idx`` of node ``nid`` as ``perfquery`` names it: an
    ibnetdiscover fabric's own (``node_lid``, ``ib_port``), else those
    :func:`sim.fabric.ibnetdiscover.topology_of_fabric` gives (LID node id + 1, a switch's
    port ``idx + 1``, a CA's port 1)."""
    lids = getattr(fabric, "node_lid", None)
    ports = getattr(fabric, "ib_port", None)
    lid = lids[nid] if lids and nid in lids else nid + 1
    if ports is not None and (nid, idx) in ports:
        return lid, ports[(nid, idx)]
    return lid, (idx + 1 if isinstance(fabric.nodes[nid], Switch) else 1)


def _pfc_prios(fabric: Fabric) -> list[int]:
    """The priorities whose PFC counters mlx5 lists: the switches' lossless PGs (3 by
    default)."""
    prios: set[int] = set()
    for node in fabric.nodes.values():
        if isinstance(node, Switch):
            prios |= set(node.mmu.config.lossless_pgs)
    return sorted(prios) or [3]


def port_counters(fabric: Fabric, *, flow_ports: Mapping[tuple[int, int],
                                                         tuple[int, int, int]] | None = None,
                  names: Mapping[int, str] | None = None) -> list[dict[str, Any]]:
    """Every connected port of ``fabric`` after a run, in node then port order: ``node``
    (``names``' name, default the fabric's), ``node_id``, ``port`` (the simulator's index),
    ``peer``, ``link`` (``"ib"`` or
    ``"ethernet"``), for IB ``lid`` and ``port_number`` (perfquery's) and ``perfquery``
    (:data:`PERFQUERY_X_FIELDS` that are not 0), for Ethernet ``ethtool`` (the names above,
    those not 0), ``pfc_priorities`` (those mlx5 lists: the switches' lossless PGs and any
    priority paused) and, on a NIC, ``hw_counters``.  ``flow_ports``: a flow-fidelity run's
    ``(node, port) -> (bytes, busy_ps, frames)`` (no pauses, credits or drops there)."""
    ib = getattr(fabric, "flow_control", None) == "ib"
    names = {**fabric.node_names(), **(names or {})}
    # with faults: frames lost on a link, links gone down (sim.fabric.faults)
    log = getattr(fabric, "fault_log", None) if flow_ports is None else None
    prios = _pfc_prios(fabric)
    out: list[dict[str, Any]] = []
    for nid, node in sorted(fabric.nodes.items()):
        if not isinstance(node, (Host, Switch)):
            continue
        for idx, p in sorted(node.ports.items()):
            other = peer_node(p)
            if other is None:
                continue
            pnode, pidx = other.node_id, p.peer_port
            peer = other.ports[pidx]
            if flow_ports is not None:
                tx_b, _, tx_n = flow_ports.get((nid, idx), (0, 0, 0))
                rx_b, _, rx_n = flow_ports.get((pnode, pidx), (0, 0, 0))
            else:
                tx_b, tx_n = p.tx_bytes, p.tx_packets
                rx_b, rx_n = peer.tx_bytes, peer.tx_packets
            rec: dict[str, Any] = {"node": names[nid], "node_id": nid, "port": idx,
                                   "peer": names[pnode],
                                   "link": "ib" if ib else "ethernet"}
            if ib:
                lid, number = _ib_address(fabric, nid, idx)
                rec["lid"], rec["port_number"] = lid, number
                c = {"PortXmitData": (tx_b - VCRC_BYTES * tx_n) // 4,
                     "PortRcvData": (rx_b - VCRC_BYTES * rx_n) // 4,
                     "PortXmitPkts": tx_n, "PortRcvPkts": rx_n,
                     "PortUnicastXmitPkts": tx_n, "PortUnicastRcvPkts": rx_n}
                link = getattr(p, "ib", None)
                if link is not None and flow_ports is None:
                    c["PortXmitWait"] = (link.stall_ps() * int(p.rate_bps)
                                         // (8 * XMIT_WAIT_TICK_BYTES * PS_PER_S))
                if flow_ports is None:
                    ingress, egress, corrupt, downs = _drops(node, nid, idx, log)
                    # a switch's ingress drops are frames it could not relay (no route, hop
                    # limit: credits leave none for its buffer), a NIC's receive errors
                    relay = ingress if isinstance(node, Switch) else 0
                    c.update(PortRcvSwitchRelayErrors=relay,
                             PortRcvErrors=corrupt + ingress - relay,
                             PortXmitDiscards=egress, LinkDownedCounter=downs)
                rec["perfquery"] = {k: v for k, v in c.items() if v}
            else:
                c = {"rx_bytes_phy": rx_b + FCS_BYTES * rx_n,
                     "tx_bytes_phy": tx_b + FCS_BYTES * tx_n,
                     "rx_packets_phy": rx_n, "tx_packets_phy": tx_n}
                if flow_ports is None:
                    pc = _pause_counters(p, peer, prios)
                    c.update(pc)
                    rec["pfc_priorities"] = sorted({int(k[7]) for k in pc
                                                    if k.startswith("rx_prio")})
                    ingress, egress, corrupt, downs = _drops(node, nid, idx, log)
                    c.update(rx_discards_phy=ingress, tx_discards_phy=egress,
                             rx_crc_errors_phy=corrupt, link_down_events_phy=downs)
                    if isinstance(node, Host):
                        c["tx_pause_storm_error_events"] = int(node.storm_stopped_ps
                                                               is not None)
                rec["ethtool"] = {k: v for k, v in c.items() if v}
                if isinstance(node, Host) and flow_ports is None:
                    rec["hw_counters"] = {k: v for k, v in _hw_counters(node).items() if v}
            out.append(rec)
    return out


def record_problem(r: Any) -> str | None:
    """Why ``r`` is not a port record of :func:`port_counters` (None: it is one): what the
    formatters read must be there, of its type."""
    if not isinstance(r, dict):
        return "not an object"
    for key, typ in (("node", str), ("port", int), ("peer", str)):
        if not isinstance(r.get(key), typ) or isinstance(r.get(key), bool):
            return f"{key}: missing or not {'a str' if typ is str else 'an int'}"
    if r.get("link") not in ("ib", "ethernet"):
        return "link: not 'ib' or 'ethernet'"
    if r["link"] == "ib":
        for key in ("lid", "port_number"):
            if not isinstance(r.get(key), int) or isinstance(r.get(key), bool):
                return f"{key}: missing or not an int"
    for key in ("perfquery", "ethtool", "hw_counters"):
        c = r.get(key, {})
        if not isinstance(c, dict):
            return f"{key}: not an object"
        for name, v in c.items():
            if not isinstance(v, int) or isinstance(v, bool):
                return f"{key}.{name}: {v!r} is not a whole number"
    prios = r.get("pfc_priorities", [])
    if not isinstance(prios, list) or not all(isinstance(q, int) and 0 <= q < PRIORITIES
                                              for q in prios):
        return "pfc_priorities: not a list of priorities 0..7"
    return None


def _drops(node: Any, nid: int, idx: int, log: Any) -> tuple[int, int, int, int]:
    """Port ``idx`` of ``node``'s lost frames, each tool naming them its way: (dropped where
    they came in: a switch's buffer admission, no route or hop limit, a NIC's receive
    side; dropped at egress: the PFC watchdog's, a link down's; corrupted by a faulty link
    on arrival; times its link went down).  ``log``: the faults' (None: no faults)."""
    if isinstance(node, Switch):
        ingress = node.drops_by_port.get(idx, 0)
        egress = node.tx_drops_by_port.get(idx, 0)
    else:
        ingress, egress = node.rx_stall_dropped_packets + node.rx_buffer_dropped_packets, 0
    if log is None:
        return ingress, egress, 0, 0
    return (ingress, egress + log.drops_at.get((nid, idx, "link_down"), 0),
            log.drops_at.get((nid, idx, "corrupt"), 0), log.link_downs.get((nid, idx), 0))


def _pause_counters(p: Any, peer: Any, prios: Sequence[int]) -> dict[str, int]:
    """mlx5's pause counters of port ``p``: what it received from ``peer`` (frames, µs
    paused) and what it sent to it (the frames ``peer`` received, the µs ``peer`` was
    paused)."""
    mine = p.pause_rx_prio or [0] * PRIORITIES
    theirs = peer.pause_rx_prio or [0] * PRIORITIES
    c = {"rx_pause_ctrl_phy": sum(mine), "tx_pause_ctrl_phy": sum(theirs)}
    for q in sorted({*prios, *(i for i in range(PRIORITIES) if mine[i] or theirs[i])}):
        c[f"rx_prio{q}_pause"] = mine[q]
        c[f"rx_prio{q}_pause_duration"] = p.paused_ps(q) // _PS_PER_US
        c[f"tx_prio{q}_pause"] = theirs[q]
        c[f"tx_prio{q}_pause_duration"] = peer.paused_ps(q) // _PS_PER_US
    return c


def _hw_counters(h: Host) -> dict[str, int]:
    """The RDMA device's congestion and transport counters of NIC ``h``."""
    c = {"np_cnp_sent": h.cnp_sent, "rp_cnp_handled": h.cnp_received,
         "np_ecn_marked_roce_packets": sum(h.rx_ce.values()),
         "out_of_sequence": sum(h.rx_ooo.values())}
    for fid in h.rc_flows():
        st = h.rc_stats(fid)
        c["out_of_sequence"] += st.get("out_of_sequence", 0)
        c["packet_seq_err"] = c.get("packet_seq_err", 0) + st.get("naks_received", 0)
        c["local_ack_timeout_err"] = c.get("local_ack_timeout_err", 0) + st.get("timeouts", 0)
        c["duplicate_request"] = c.get("duplicate_request", 0) + st.get("duplicates", 0)
    return c


# ---------------------------------------------------------------------- the tools' text
def _dots(name: str, value: object) -> str:
    """libibmad's ``_mad_dump_field``: the name, a colon, dots to column 34, the value."""
    return f"{name}:{'.' * (32 - len(name))}{value}"


def format_perfquery(records: Iterable[Mapping[str, Any]]) -> str:
    """The InfiniBand ports of ``records`` as ``perfquery -x`` prints each (a header line
    ``# Port extended counters: Lid L port P (CapMask: ...)``, then every field)."""
    out = []
    for r in records:
        if r.get("link") != "ib":
            continue
        c = r.get("perfquery", {})
        out.append(f"# {r['node']}:p{r['port']} -> {r['peer']}")
        out.append(f"# Port extended counters: Lid {r['lid']} port {r['port_number']} "
                   f"(CapMask: 0x5300 CapMask2: 0x0000002)")
        out.append(_dots("PortSelect", r["port_number"]))
        out.append(_dots("CounterSelect", "0x0000"))
        for f in PERFQUERY_X_FIELDS:
            out.append(_dots(f, "0x00000000" if f == "CounterSelect2" else c.get(f, 0)))
    return "\n".join(out) + ("\n" if out else "")


def format_ethtool(records: Iterable[Mapping[str, Any]]) -> str:
    """The Ethernet ports of ``records`` as ``ethtool -S`` prints an mlx5 port's (after a
    ``# node:port -> peer`` line naming it): ``NIC statistics:``, then ``     name: value``
    in the driver's order (the physical port's, then per priority, then the storm)."""
    out = []
    for r in records:
        if r.get("link") != "ethernet":
            continue
        c = r.get("ethtool", {})
        out.append(f"# {r['node']}:p{r['port']} -> {r['peer']}")
        out.append("NIC statistics:")
        for k in ("rx_packets_phy", "rx_bytes_phy", "tx_packets_phy", "tx_bytes_phy",
                  "rx_crc_errors_phy", "rx_discards_phy", "tx_discards_phy",
                  "link_down_events_phy", "rx_pause_ctrl_phy", "tx_pause_ctrl_phy"):
            out.append(f"     {k}: {c.get(k, 0)}")
        for q in r.get("pfc_priorities", ()):
            for k in (f"rx_prio{q}_pause", f"rx_prio{q}_pause_duration", f"tx_prio{q}_pause",
                      f"tx_prio{q}_pause_duration"):
                out.append(f"     {k}: {c.get(k, 0)}")
        if "hw_counters" in r:
            out.append(f"     tx_pause_storm_error_events: "
                       f"{c.get('tx_pause_storm_error_events', 0)}")
    return "\n".join(out) + ("\n" if out else "")


def format_rdma_statistic(records: Iterable[Mapping[str, Any]]) -> str:
    """The NICs' ``hw_counters`` as ``rdma statistic show`` prints them (iproute2 6.8 on:
    ``link DEV/1`` then a line a counter), the device named after the node."""
    out = []
    for r in records:
        if "hw_counters" not in r:
            continue
        c = r["hw_counters"]
        out.append(f"link {r['node']}/1 ")
        out.extend(f"    {k} {c.get(k, 0)} " for k in HW_COUNTERS)
    return "\n".join(out) + ("\n" if out else "")


class ToolOutputError(ValueError):
    """A tool's output (perfquery, ethtool -S) that cannot be read: names the file, line
    and field."""


#: a block's header: ``# Port extended counters: Lid 1719 port 1 (CapMask: ...)``, also
#: ``# Port counters:``, ``# PortRcvErrorDetails counters:`` ... (perfquery.c)
_PQ_HEAD = re.compile(r"^# (\w[\w ]*) counters: (.*)$")


def read_perfquery(text: str, name: str = "<text>") -> list[dict[str, Any]]:
    """The blocks of ``perfquery`` output (``-x`` or not, one port or many, as
    :func:`format_perfquery` writes it too): per block ``lid`` (None for ``local`` or a
    directed route), ``port_number``, ``counters`` (the header's set: ``Port extended``,
    ``Port``, ``PortRcvErrorDetails``...) and ``perfquery`` (field -> int; the select fields
    left out), in file order.  A line that is not libibmad's ``Name:....value`` or a value
    that is not a number raises :class:`ToolOutputError` naming ``name``, the line and the
    field; other ``#`` lines (ours name the node) and blank lines are skipped."""
    out: list[dict[str, Any]] = []
    for no, line in enumerate(text.splitlines(), 1):
        m = _PQ_HEAD.match(line)
        if m:
            words = m.group(2).split()
            lid = None
            if len(words) >= 2 and words[0] == "Lid":
                try:
                    lid = int(words[1])
                except ValueError:
                    raise ToolOutputError(f"{name}:{no}: Lid {words[1]!r} is not a number"
                                         ) from None
            try:
                port = int(words[words.index("port") + 1])
            except (ValueError, IndexError):
                raise ToolOutputError(f"{name}:{no}: no port number in the header") from None
            out.append({"lid": lid, "port_number": port, "counters": m.group(1),
                         "perfquery": {}})
            continue
        if not line.strip() or line.startswith("#"):
            continue
        field, sep, rest = line.partition(":")
        if not sep or not field.isalnum() or not out:
            raise ToolOutputError(f"{name}:{no}: not a perfquery line (Name:....value"
                                 f"{' after a # Port ... counters header' if sep else ''})")
        value = rest.lstrip(".")
        if field in ("PortSelect", "CounterSelect", "CounterSelect2"):
            continue
        try:
            out[-1]["perfquery"][field] = int(value)
        except ValueError:
            raise ToolOutputError(f"{name}:{no}: {field}: {value!r} is not a number") from None
    return out


def read_ethtool(text: str, name: str = "<text>") -> dict[str, int]:
    """``ethtool -S`` output (``NIC statistics:`` and ``     name: value`` lines, as
    :func:`format_ethtool` writes them too): counter -> value; ``#`` lines and the header
    skipped, a line of another form raises :class:`ToolOutputError` naming ``name`` and the
    line."""
    out: dict[str, int] = {}
    for no, line in enumerate(text.splitlines(), 1):
        t = line.strip()
        if not t or t.startswith("#") or t.endswith("statistics:"):
            continue
        key, sep, value = t.partition(":")
        try:
            if not sep or not key.replace("_", "").isalnum():
                raise ValueError
            out[key] = int(value)
        except ValueError:
            raise ToolOutputError(f"{name}:{no}: not an ethtool -S line (name: value)") from None
    if not out:
        raise ToolOutputError(f"{name}: no counter")
    return out

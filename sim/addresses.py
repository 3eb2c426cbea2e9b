"""Addresses the simulator writes into the real frames it makes (PFC, CNPs, ACKs, captured
data): one place, so a capture's addresses and QPs identify nodes and flows consistently.

This docstring is the one description of the scheme (docs/reference/results-folder.md,
"Names of nodes and ports", gives worked examples; the ``replay --pcap`` help points
there).  Node ids and port numbers are 16-bit; ``hi``/``lo`` are their high and low bytes:

* node ``n`` has IPv4 ``10.0.<n >> 8>.<n & 0xFF>`` (decimal): node 258 is ``10.0.1.2``;
* port ``p`` of node ``n`` has MAC ``02:00:<n hi>:<n lo>:<p hi>:<p lo>`` (hex; ``02`` =
  locally administered, unicast): node 258 port 0 is ``02:00:01:02:00:00``.  A host has one
  port, 0, so its MAC ends in ``00:00``;
* on an InfiniBand fabric node ``n`` has LID ``n + 1`` (decimal): node 0 is LID 1, node 258
  LID 259.  LID 0 is reserved and the unicast LIDs are 0x0001..0xBFFF (IBA vol. 1 chapter 4,
  addressing; 0xC000..0xFFFE are multicast, 0xFFFF permissive), so nodes from 0xBFFF on
  have no LID;
* flow ``f`` is queue pair ``0x100 + f`` (:func:`flow_qp`) at both ends: its data frames in
  captures go to that destination QP, and the CNPs and ACKs of the flow, which go back to
  the flow's sender, carry the same number (a real requester's QP number differs from its
  responder's; one number per flow keeps a capture's two directions easy to pair).  QPs 0
  and 1 are never used: they are the subnet and general services interfaces (IBA 3.9.2;
  Wireshark decodes their payload as a MAD).
"""

from __future__ import annotations

__all__ = ["QP_BASE", "flow_qp", "node_ip", "node_lid", "node_mac", "node_of_ip",
           "node_of_lid", "qp_flow"]

#: Flow ``f`` is QP ``QP_BASE + f`` (modulo the 24-bit QP space above the base).
QP_BASE = 0x100
_QP_SPACE = (1 << 24) - QP_BASE
#: The largest unicast LID (module docstring).
_MAX_UNICAST_LID = 0xBFFF


def node_mac(node_id: int, port: int = 0) -> str:
    return (f"02:00:{node_id >> 8 & 0xFF:02x}:{node_id & 0xFF:02x}:{port >> 8 & 0xFF:02x}:"
            f"{port & 0xFF:02x}")


def node_ip(node_id: int) -> str:
    return f"10.0.{node_id >> 8 & 0xFF}.{node_id & 0xFF}"


def node_of_ip(ip: str) -> int | None:
    """Inverse of :func:`node_ip` (None for other addresses)."""
    parts = ip.split(".")
    if len(parts) != 4 or parts[:2] != ["10", "0"]:
        return None
    try:
        hi, lo = int(parts[2]), int(parts[3])
    except ValueError:
        return None
    return hi << 8 | lo if 0 <= hi <= 255 and 0 <= lo <= 255 else None


def node_lid(node_id: int) -> int:
    """The LID of node ``node_id`` on an InfiniBand fabric: ``node_id + 1``; ValueError for a
    node without a unicast LID."""
    lid = node_id + 1
    if not 1 <= lid <= _MAX_UNICAST_LID:
        raise ValueError(f"node {node_id} has no unicast InfiniBand LID (nodes 0.."
                         f"{_MAX_UNICAST_LID - 1} have LIDs 1..{_MAX_UNICAST_LID})")
    return lid


def node_of_lid(lid: int) -> int | None:
    """Inverse of :func:`node_lid` (None for LID 0 and non-unicast LIDs)."""
    return lid - 1 if 1 <= lid <= _MAX_UNICAST_LID else None


def flow_qp(flow: int) -> int:
    """The queue pair number of flow ``flow`` (its frames' BTH DestQP, module docstring)."""
    return QP_BASE + flow % _QP_SPACE


def qp_flow(qp: int) -> int | None:
    """Inverse of :func:`flow_qp` for flows below ``2**24 - QP_BASE`` (every simulated flow):
    the flow of QP ``qp``, None for QPs below :data:`QP_BASE`."""
    return qp - QP_BASE if qp >= QP_BASE else None

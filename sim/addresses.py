"""Addresses the simulator writes into the real frames it makes (PFC, CNPs, captured data):
one place, so a capture's addresses identify nodes consistently.

This docstring is the one description of the scheme (docs/scenarios.md "Addresses" gives
worked examples; the ``replay --pcap`` help points there).  Node ids and port numbers are
16-bit; ``hi``/``lo`` are their high and low bytes:

* node ``n`` has IPv4 ``10.0.<n >> 8>.<n & 0xFF>`` (decimal): node 258 is ``10.0.1.2``;
* port ``p`` of node ``n`` has MAC ``02:00:<n hi>:<n lo>:<p hi>:<p lo>`` (hex; ``02`` =
  locally administered, unicast): node 258 port 0 is ``02:00:01:02:00:00``.  A host has one
  port, 0, so its MAC ends in ``00:00``.
"""

from __future__ import annotations

__all__ = ["node_mac", "node_ip", "node_of_ip"]


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

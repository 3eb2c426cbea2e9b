"""Addresses the simulator writes into the real frames it makes (PFC, CNPs, captured data):
one place, so a capture's addresses identify nodes consistently.

Node ``n`` port ``p`` has MAC ``02:00:NN:NN:PP:PP`` (locally administered) and node ``n`` has
IPv4 ``10.0.N.N`` (the node id in the low 16 bits).
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
        return int(parts[2]) << 8 | int(parts[3])
    except ValueError:
        return None

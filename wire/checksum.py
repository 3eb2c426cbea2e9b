"""Internet checksum (RFC 1071) for IPv4 headers and UDP (RFC 768, RFC 8200 8.1)."""

from __future__ import annotations

import sys

__all__ = ["internet_checksum", "ones_sum"]


def ones_sum(data: bytes | bytearray | memoryview) -> int:
    """16-bit one's-complement sum of ``data`` (odd length padded with a zero byte)."""
    if len(data) % 2:
        data = bytes(data) + b"\0"
    # Summing as one big integer's 16-bit words via int.from_bytes is fast in CPython.
    total = sum(memoryview(bytes(data)).cast("H"))  # native order; fixed below
    # cast("H") is native-endian; on a little-endian host byte-swap the folded result.
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    if sys.byteorder == "little":
        total = ((total & 0xFF) << 8) | (total >> 8)
    return total


def internet_checksum(data: bytes | bytearray | memoryview) -> int:
    """RFC 1071 checksum: one's complement of the one's-complement sum."""
    return ~ones_sum(data) & 0xFFFF

"""Internet checksum (RFC 1071) for IPv4 headers and UDP (RFC 768, RFC 8200 8.1)."""

from __future__ import annotations

__all__ = ["internet_checksum", "ones_sum"]


def ones_sum(data: bytes | bytearray | memoryview) -> int:
    """16-bit one's-complement sum of ``data`` (odd length padded with a zero byte).

    The data read as one big-endian integer is congruent to the sum of its 16-bit words
    modulo 0xFFFF (2**16 = 1 mod 0xFFFF), which is what folding the carries back in computes
    (RFC 1071 section 2(B)); a non-zero sum folds to 0xFFFF, not 0 (one's-complement -0)."""
    v = int.from_bytes(data, "big")
    if len(data) % 2:
        v <<= 8
    r = v % 0xFFFF
    return r if r or not v else 0xFFFF


def internet_checksum(data: bytes | bytearray | memoryview) -> int:
    """RFC 1071 checksum: one's complement of the one's-complement sum."""
    return ~ones_sum(data) & 0xFFFF

"""IPv4 header (RFC 791 section 3.1) with the TOS byte split as DSCP/ECN (RFC 2474 3,
RFC 3168 5); never the legacy TOS flags.  Options follow the fixed 20 bytes (IHL > 5)."""

from __future__ import annotations

from .checksum import internet_checksum
from .spec import Field, HeaderSpec

__all__ = ["IPV4", "IPPROTO_UDP", "ipv4_checksum", "ipv4_checksum_ok"]

#: IANA protocol number of UDP (RFC 768).
IPPROTO_UDP = 17

IPV4 = HeaderSpec(
    "ipv4",
    [
        Field("version", 4, "always 4", default=4),
        Field("ihl", 4, "header length in 32-bit words (5 without options); computed on build",
              default=5),
        Field("dscp", 6, "differentiated services codepoint (RFC 2474)"),
        Field("ecn", 2, "ECN codepoint (RFC 3168): 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE"),
        Field("total_length", 16, "header + payload bytes; computed on build"),
        Field("id", 16, "identification"),
        Field("flags", 3, "bit 2 reserved, bit 1 DF, bit 0 MF"),
        Field("frag_offset", 13, "fragment offset in 8-byte units"),
        Field("ttl", 8, "time to live", default=64),
        Field("protocol", 8, "payload protocol (17 = UDP)", default=IPPROTO_UDP),
        Field("checksum", 16, "header checksum (RFC 1071); computed on build, checked on parse"),
        Field("src", 32, "source address", fmt="ipv4"),
        Field("dst", 32, "destination address", fmt="ipv4"),
    ],
    title="IPv4",
    source="RFC 791 3.1; RFC 2474 3; RFC 3168 5",
    doc="20 bytes plus IHL*4-20 bytes of options (shown as `options`, hex).",
    derived=("checksum_ok", "options"),
)


#: Byte offset of the header checksum (from the field table).
_CSUM_AT = IPV4.byte_field("checksum")[0]


def ipv4_checksum(header: bytes | bytearray) -> int:
    """Checksum of an IPv4 header (options included) with its checksum field taken as 0.

    RFC 1071 over the header read as one big-endian integer with the checksum's 16 bits
    subtracted (no copy of the header; :func:`wire.checksum.ones_sum`'s method)."""
    n = len(header)
    if n < _CSUM_AT + 2:  # not a header: the field does not fit (zero-extended, as before)
        h = bytearray(header)
        h[_CSUM_AT:_CSUM_AT + 2] = b"\0\0"
        return internet_checksum(h)
    v = int.from_bytes(header, "big")
    shift = 8 * (n - _CSUM_AT - 2)
    v -= ((v >> shift) & 0xFFFF) << shift
    if n % 2:
        v <<= 8
    r = v % 0xFFFF
    return ~(r if r or not v else 0xFFFF) & 0xFFFF


def ipv4_checksum_ok(header: bytes | bytearray, checksum: int) -> bool:
    """``ipv4_checksum(header) == checksum``, where ``checksum`` is the header's own checksum
    field, cheaper: a right checksum makes the RFC 1071 sum of the whole header 0xFFFF, so the
    header read as one integer is 0 modulo 0xFFFF.  The converse holds but for a header that
    is zero apart from its checksum, or a checksum of 0xFFFF (where a sum of 0xFFFF also
    allows 0): those, and headers of odd length, are computed."""
    n = len(header)
    if n < _CSUM_AT + 2 or n % 2:
        return ipv4_checksum(header) == checksum
    v = int.from_bytes(header, "big")
    if v % 0xFFFF:
        return False
    if checksum != 0xFFFF and v != checksum << 8 * (n - _CSUM_AT - 2):
        return True
    return ipv4_checksum(header) == checksum

"""UDP header (RFC 768) and its checksum over the IPv4 (RFC 768) or IPv6 (RFC 8200 8.1)
pseudo-header."""

from __future__ import annotations

from .checksum import internet_checksum
from .spec import Field, HeaderSpec

__all__ = ["UDP", "ROCEV2_PORT", "udp_checksum"]

#: IANA-assigned UDP destination port of RoCEv2 (IBA Annex A17, RoCEv2).
ROCEV2_PORT = 4791

UDP = HeaderSpec(
    "udp",
    [
        Field("sport", 16, "source port (RoCEv2: flow entropy)", default=0xC000),
        Field("dport", 16, "destination port (4791 = RoCEv2)", default=ROCEV2_PORT),
        Field("length", 16, "header + payload bytes; computed on build"),
        Field("checksum", 16,
              "0 = none (what RoCEv2 NICs send); omitted on build: 0 for RoCEv2, computed "
              "otherwise; the string \"auto\" always computes it"),
    ],
    title="UDP",
    source="RFC 768",
    doc="8 bytes.",
)


def udp_checksum(ip_version: int, src: bytes, dst: bytes, udp_datagram: bytes | bytearray) -> int:
    """UDP checksum of ``udp_datagram`` (its checksum field taken as 0).

    ``src``/``dst`` are the packed IP addresses (4 or 16 bytes).  A computed 0 is sent as
    0xFFFF (RFC 768).
    """
    n = len(udp_datagram)
    d = bytearray(udp_datagram)
    d[6:8] = b"\0\0"
    if ip_version == 4:
        pseudo = src + dst + bytes((0, 17)) + n.to_bytes(2, "big")
    else:
        pseudo = src + dst + n.to_bytes(4, "big") + b"\0\0\0\x11"
    c = internet_checksum(pseudo + d)
    return c or 0xFFFF

"""RoCEv2 invariant CRC (ICRC) and CNP helpers.

ICRC (IBA Annex A17.8, "ICRC for RoCEv2"): CRC-32 with the IEEE 802.3 polynomial, reflected,
initial value and final XOR 0xFFFFFFFF (= ``zlib.crc32``) computed over

    8 bytes of 0xFF (the masked pseudo-LRH) + IP header + UDP header + BTH + ... + pad

with the fields that may change in flight set to all ones first:
IPv4 TOS (DSCP+ECN), TTL and header checksum; IPv6 traffic class, flow label and hop limit;
UDP checksum; BTH byte 4 (FECN, BECN, Resv6).  The CRC is sent least significant byte first.
The datagram ends at the UDP length, not at the end of the frame (Ethernet padding follows
short frames).  With IPv4 options we cover the whole IHL*4-byte header, as Scapy does
(Linux rxe assumes a 20-byte header; no NIC sends RoCEv2 with IP options).

Evidence: the ConnectX-4 Lx CNP in Scapy's test suite (``test/contrib/roce.uts``) carries
ICRC bytes ``82 fd 00 2a``, which :func:`icrc` reproduces (``tests/test_roce.py``).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

from .bth import BTH
from .ipv4 import IPV4
from .udp import UDP

__all__ = ["icrc", "icrc_bytes", "icrc_ipv4_ok", "icrc_state", "ICRC_BYTES", "ICRC_STRUCT",
           "CNP_OPCODE"]

ICRC_BYTES = 4
#: The ICRC's layout on the wire: a 32-bit value, least significant byte first
#: (:func:`icrc_bytes`; ``ICRC_STRUCT.pack_into`` writes it in place).
ICRC_STRUCT = struct.Struct("<I")
#: RoCEv2 CNP opcode (IBA Annex A17.9.3).
CNP_OPCODE = 0x81
_PSEUDO_LRH = b"\xff" * 8
# Precomputed CRC state after the 8 pseudo-LRH bytes.
_CRC_LRH = zlib.crc32(_PSEUDO_LRH)


def icrc(ip_header: bytes | bytearray | memoryview, udp_datagram: bytes | bytearray | memoryview,
         ) -> int:
    """ICRC of a RoCEv2 packet.

    ``ip_header`` is the whole IPv4 (IHL*4 bytes) or IPv6 (40 bytes) header, as on the wire;
    ``udp_datagram`` the UDP header, BTH and everything after it *up to but excluding* the
    ICRC.  The version is read from the header's first nibble, so one function serves both.
    """
    udp = udp_datagram if isinstance(udp_datagram, bytes | bytearray) else bytes(udp_datagram)
    return zlib.crc32(udp[_MASKED_END:], icrc_state(ip_header, udp[:_MASKED_END]))


#: The UDP datagram's masked bytes all lie before this offset (checksum 6-7, BTH byte 4).
_MASKED_END = 13


def _masked_bytes() -> tuple[int, int, int, int, int]:
    # the masked bytes' offsets, from the field tables: IPv4 TOS (DSCP+ECN), TTL, checksum;
    # the UDP checksum; the BTH byte of FECN/BECN/Resv6 (at 8 + its offset in the datagram)
    tos, ttl, csum = (IPV4.byte_field(f)[0] for f in ("ecn", "ttl", "checksum"))
    assert IPV4.byte_field("dscp")[0] == tos
    flags = UDP.size_bytes + BTH.byte_field("fecn")[0]
    assert BTH.byte_field("resv6")[0] == flags - UDP.size_bytes < _MASKED_END
    return tos, ttl, csum, UDP.byte_field("checksum")[0], flags


_IP4_TOS, _IP4_TTL, _IP4_CSUM, _UDP_CSUM, _BTH_FLAGS = _masked_bytes()
_IP4_MIN = _IP4_CSUM + 2


def icrc_state(ip_header: bytes | bytearray | memoryview,
               udp_head: bytes | bytearray | memoryview) -> int:
    """The ICRC's running CRC after the pseudo-LRH, the masked IP header and ``udp_head``
    (the first bytes of the UDP datagram, at least 13 so that every masked byte is in it):
    ``zlib.crc32(rest_of_datagram, icrc_state(ip, head))`` is the ICRC.  Crafting many frames
    that differ only after ``udp_head`` computes this once."""
    if len(udp_head) < _MASKED_END:
        raise ValueError(f"udp_head must hold at least {_MASKED_END} bytes")
    if ip_header and ip_header[0] >> 4 == 4 and len(ip_header) >= _IP4_MIN:
        # one buffer, one CRC call: the IPv4 header then the UDP head, masked in place
        buf = bytearray(ip_header)
        k = len(buf)
        buf += udp_head
        buf[_IP4_TOS] = buf[_IP4_TTL] = buf[_IP4_CSUM] = buf[_IP4_CSUM + 1] = 0xFF
        buf[k + _UDP_CSUM] = buf[k + _UDP_CSUM + 1] = buf[k + _BTH_FLAGS] = 0xFF
        return zlib.crc32(buf, _CRC_LRH)
    ip = bytearray(ip_header)
    if ip and ip[0] >> 4 == 4:  # shorter than its checksum field: IndexError, as before
        ip[_IP4_TOS] = ip[_IP4_TTL] = ip[_IP4_CSUM] = ip[_IP4_CSUM + 1] = 0xFF
    else:
        ip[0] |= 0x0F           # traffic class, high nibble
        ip[1] = ip[2] = ip[3] = 0xFF  # traffic class low nibble + flow label
        ip[7] = 0xFF            # hop limit
    crc = zlib.crc32(ip, _CRC_LRH)
    udp = bytearray(udp_head)
    udp[_UDP_CSUM] = udp[_UDP_CSUM + 1] = udp[_BTH_FLAGS] = 0xFF
    return zlib.crc32(udp, crc)


#: The masked bytes of a datagram behind an IPv4 header without options, from the header's
#: first byte: TOS, TTL, the header checksum, the UDP checksum, the BTH's FECN/BECN byte.
_V4_MASKED = (_IP4_TOS, _IP4_TTL, _IP4_CSUM, _IP4_CSUM + 1, IPV4.size_bytes + _UDP_CSUM,
              IPV4.size_bytes + _UDP_CSUM + 1, IPV4.size_bytes + _BTH_FLAGS)


#: zlib.crc32 of any message followed by its own CRC-32, least significant byte first.
_CRC32_RESIDUE = 0x2144DF1C


def icrc_ipv4_ok(frame: bytes, ip_off: int, end: int, *, _masked: tuple = _V4_MASKED,
                 _crc32: Callable[..., int] = zlib.crc32, _lrh: int = _CRC_LRH,
                 _residue: int = _CRC32_RESIDUE) -> bool:
    """True when the ICRC in the last 4 bytes before ``end`` is right, for a frame holding an
    IPv4 header without options at ``ip_off`` and the UDP datagram after it up to ``end``
    (its ICRC included; the caller has checked the IHL and that the datagram holds a UDP
    header and a BTH).  One copy masked in place and one CRC call over it, the ICRC's bytes
    included: a CRC-32 run over a message and then its own CRC (least significant byte
    first) ends at the same value whatever the message, :data:`_CRC32_RESIDUE`, and at no
    other for any other 4 bytes.  For dissectors' fast paths; :func:`icrc` computes it."""
    buf = bytearray(frame[ip_off:end])
    a, b, c, d, e, f, g = _masked
    buf[a] = buf[b] = buf[c] = buf[d] = buf[e] = buf[f] = buf[g] = 0xFF
    return _crc32(buf, _lrh) == _residue


def icrc_bytes(value: int) -> bytes:
    """The ICRC as it appears on the wire (least significant byte first: :data:`ICRC_STRUCT`)."""
    return ICRC_STRUCT.pack(value)

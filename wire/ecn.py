"""ECN codepoints (RFC 3168 section 5) and in-place CE marking.

The ECN field is the low 2 bits of the IPv4 TOS byte / IPv6 Traffic Class (RFC 3168 5,
RFC 2474 3 for the DSCP above it), and sits in the ESUN EH, the SUNH Traffic Class and the
AFH Gen1 shim with the same codepoints.  Where it is in each header is read from that header's
field table (the ``ecn`` field), never written here.  Marking CE changes only masked ICRC
fields (IBA Annex A17.8), so a RoCEv2 frame stays ICRC-valid; on IPv4 the header checksum is
updated.  Scale-up headers have no checksum (the Ethernet FCS, recomputed by the switch, is not
part of a captured frame).
"""

from __future__ import annotations

from enum import IntEnum

from .esun import ESUN
from .ethernet import EtherType, payload_start
from .ipv4 import IPV4
from .ipv6 import IPV6
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .spec import HeaderSpec
from .sue import AFH_GEN1
from .sunh import SUNH

__all__ = ["Ecn", "ecn_capable", "ip_offset", "ecn_offset", "get_ecn", "set_ecn", "mark_ce"]


class Ecn(IntEnum):
    """RFC 3168 section 5 codepoints."""

    NOT_ECT = 0
    ECT1 = 1
    ECT0 = 2
    CE = 3


def ecn_capable(ecn: int) -> bool:
    """True for ECT(0), ECT(1) and CE (a router may mark these, RFC 3168 5)."""
    return ecn != Ecn.NOT_ECT


_WHERE: dict[str, tuple[HeaderSpec, int, int]] = {
    spec.name: (spec, *spec.byte_field("ecn")[:2]) for spec in (IPV4, IPV6, ESUN, SUNH, AFH_GEN1)
}
_IPV4_CSUM = IPV4.byte_field("checksum")[0]


def _header(frame: bytes | bytearray, sc: ScaleUpConfig) -> tuple[int, str] | None:
    """(offset, header name) of the header that carries the frame's ECN field, or None."""
    loc = payload_start(frame)
    if loc is None:
        return None
    off, et = loc
    name = {EtherType.IPV4: "ipv4", EtherType.IPV6: "ipv6", sc.esun_ethertype: "esun",
            sc.sunh_ethertype: "sunh", sc.afh_gen1_ethertype: "afh_gen1"}.get(et)
    if name is None or len(frame) < off + _WHERE[name][0].size_bytes:
        return None
    return off, name


def ip_offset(frame: bytes | bytearray) -> tuple[int, int] | None:
    """(offset of the IP header, IP version) in an Ethernet frame, skipping VLAN tags.

    None when the frame carries no IPv4/IPv6 header.
    """
    loc = _header(frame, DEFAULT_SCALEUP)
    if loc is None or loc[1] not in ("ipv4", "ipv6"):
        return None
    return loc[0], 4 if loc[1] == "ipv4" else 6


def ecn_offset(frame: bytes | bytearray, scaleup: ScaleUpConfig = DEFAULT_SCALEUP
               ) -> tuple[int, str] | None:
    """(offset of the header holding ECN, its layer name: ipv4, ipv6, esun, sunh, afh_gen1)."""
    return _header(frame, scaleup)


def get_ecn(frame: bytes | bytearray, scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> int | None:
    """The ECN codepoint of an Ethernet frame (IP, ESUN EH, SUNH or AFH Gen1), or None."""
    loc = _header(frame, scaleup)
    if loc is None:
        return None
    _spec, byte, shift = _WHERE[loc[1]]
    return (frame[loc[0] + byte] >> shift) & 3


def set_ecn(frame: bytearray, ecn: int, scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> bool:
    """Set the ECN field of a frame in place.  Returns False (and changes nothing) when the
    frame has no header with an ECN field.

    IPv4: the header checksum is updated incrementally (RFC 1624 eqn. 3), so a correct
    checksum stays correct and a wrong one stays wrong by the same amount.
    """
    loc = _header(frame, scaleup)
    if loc is None:
        return False
    off, name = loc
    _spec, byte, shift = _WHERE[name]
    at = off + byte
    word_at = off + (byte & ~1)  # the 16-bit word holding the byte (IPv4 checksum update)
    old_word = (frame[word_at] << 8) | frame[word_at + 1]
    frame[at] = (frame[at] & ~(3 << shift) & 0xFF) | ((ecn & 3) << shift)
    if name == "ipv4":
        new_word = (frame[word_at] << 8) | frame[word_at + 1]
        ck = off + _IPV4_CSUM
        hc = (frame[ck] << 8) | frame[ck + 1]
        # RFC 1624: HC' = ~(~HC + ~m + m')
        s = (~hc & 0xFFFF) + (~old_word & 0xFFFF) + new_word
        s = (s & 0xFFFF) + (s >> 16)
        s = (s & 0xFFFF) + (s >> 16)
        hc2 = ~s & 0xFFFF
        frame[ck] = hc2 >> 8
        frame[ck + 1] = hc2 & 0xFF
    return True


def mark_ce(frame: bytearray, scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> bool:
    """Mark CE on an ECN-capable frame in place (what a congested switch does).

    Returns True if the frame was ECN-capable (it now carries CE), False if it was Not-ECT
    or had no ECN field (unchanged: RFC 3168 says a Not-ECT packet must not be marked; ESUN
    uses the IP codepoints, so the same rule is applied [A]).
    """
    cur = get_ecn(frame, scaleup)
    if cur is None or cur == Ecn.NOT_ECT:
        return False
    if cur != Ecn.CE:
        set_ecn(frame, Ecn.CE, scaleup)
    return True

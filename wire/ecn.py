"""ECN codepoints (RFC 3168 section 5) and in-place CE marking.

The ECN field is the low 2 bits of the IPv4 TOS byte / IPv6 Traffic Class (RFC 3168 5,
RFC 2474 3 for the DSCP above it).  Marking CE changes only masked ICRC fields (IBA Annex
A17.8), so a RoCEv2 frame stays ICRC-valid; on IPv4 the header checksum is updated.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ["Ecn", "ecn_capable", "ip_offset", "get_ecn", "set_ecn", "mark_ce"]


class Ecn(IntEnum):
    """RFC 3168 section 5 codepoints."""

    NOT_ECT = 0
    ECT1 = 1
    ECT0 = 2
    CE = 3


def ecn_capable(ecn: int) -> bool:
    """True for ECT(0), ECT(1) and CE (a router may mark these, RFC 3168 5)."""
    return ecn != Ecn.NOT_ECT


def ip_offset(frame: bytes | bytearray) -> tuple[int, int] | None:
    """(offset of the IP header, IP version) in an Ethernet frame, skipping VLAN tags.

    None when the frame carries no IPv4/IPv6 header.
    """
    from .ethernet import VLAN_TPIDS, EtherType

    off = 12
    while len(frame) >= off + 2:
        et = (frame[off] << 8) | frame[off + 1]
        if et in VLAN_TPIDS:
            off += 4
            continue
        if et == EtherType.IPV4 and len(frame) >= off + 22:
            return off + 2, 4
        if et == EtherType.IPV6 and len(frame) >= off + 42:
            return off + 2, 6
        return None
    return None


def get_ecn(frame: bytes | bytearray) -> int | None:
    """The ECN codepoint of an Ethernet frame's IP header, or None if it has none."""
    loc = ip_offset(frame)
    if loc is None:
        return None
    off, ver = loc
    return frame[off + 1] & 3 if ver == 4 else (frame[off + 1] >> 4) & 3


def set_ecn(frame: bytearray, ecn: int) -> bool:
    """Set the ECN field of an Ethernet frame's IP header in place.

    IPv4: the header checksum is updated incrementally (RFC 1624 eqn. 3), so a correct
    checksum stays correct and a wrong one stays wrong by the same amount.  Returns False
    (and changes nothing) when the frame has no IP header.
    """
    loc = ip_offset(frame)
    if loc is None:
        return False
    off, ver = loc
    if ver == 4:
        old_word = (frame[off] << 8) | frame[off + 1]
        frame[off + 1] = (frame[off + 1] & 0xFC) | (ecn & 3)
        new_word = (frame[off] << 8) | frame[off + 1]
        hc = (frame[off + 10] << 8) | frame[off + 11]
        # RFC 1624: HC' = ~(~HC + ~m + m')
        s = (~hc & 0xFFFF) + (~old_word & 0xFFFF) + new_word
        s = (s & 0xFFFF) + (s >> 16)
        s = (s & 0xFFFF) + (s >> 16)
        hc2 = ~s & 0xFFFF
        frame[off + 10] = hc2 >> 8
        frame[off + 11] = hc2 & 0xFF
    else:
        frame[off + 1] = (frame[off + 1] & 0xCF) | ((ecn & 3) << 4)
    return True


def mark_ce(frame: bytearray) -> bool:
    """Mark CE on an ECN-capable frame in place (what a congested switch does).

    Returns True if the frame was ECN-capable (it now carries CE), False if it was Not-ECT
    or not IP (unchanged: RFC 3168 says a Not-ECT packet must not be marked).
    """
    cur = get_ecn(frame)
    if cur is None or cur == Ecn.NOT_ECT:
        return False
    if cur != Ecn.CE:
        set_ecn(frame, Ecn.CE)
    return True

"""Ethernet II header and 802.1Q / 802.1ad VLAN tags.

Sources: IEEE 802.3-2022 clause 3.1.1 (MAC frame: destination, source, length/type);
IEEE 802.1Q-2022 clause 9.6 (tag: TPID, then TCI = PCP 3 bits, DEI 1 bit, VID 12 bits).

Our model of a tagged frame: the ``eth`` layer holds ``dst``, ``src`` and ``type``, where
``type`` is the EtherType *after* all tags (the protocol of the payload: 0x0800 for IPv4
even in a tagged frame).  Each tag is one ``vlan`` entry holding its own ``tpid``.  On the
wire the tags sit between ``src`` and ``type`` (802.1Q 9.3); the dissector and builder put
them there.  Wireshark instead shows ``eth.type`` = the first TPID and ``vlan.etype`` = the
inner type; the tshark tests map between the two.
"""

from __future__ import annotations

from enum import IntEnum

from .spec import Field, HeaderSpec

__all__ = ["ETHERNET", "VLAN_TAG", "EtherType", "VLAN_TPIDS", "MIN_FRAME_BYTES",
           "payload_start"]

#: Minimum Ethernet frame without FCS (IEEE 802.3 clause 4.4.2: 64 bytes with the 4-byte FCS).
MIN_FRAME_BYTES = 60


class EtherType(IntEnum):
    """EtherTypes this toolkit dissects (IEEE Registration Authority assignments)."""

    IPV4 = 0x0800
    ARP = 0x0806
    VLAN = 0x8100          # IEEE 802.1Q C-tag
    IPV6 = 0x86DD
    MAC_CONTROL = 0x8808   # IEEE 802.3 clause 31 (PAUSE, PFC)
    QINQ = 0x88A8          # IEEE 802.1ad S-tag
    QINQ_LEGACY = 0x9100   # pre-standard double tagging, still seen in the field


#: TPIDs that introduce a VLAN tag.
VLAN_TPIDS = frozenset({EtherType.VLAN, EtherType.QINQ, EtherType.QINQ_LEGACY})

ETHERNET = HeaderSpec(
    "eth",
    [
        Field("dst", 48, "destination MAC address", fmt="mac"),
        Field("src", 48, "source MAC address", fmt="mac"),
        Field("type", 16, "EtherType of the payload (after any VLAN tags)", enum=EtherType,
              default=EtherType.IPV4),
    ],
    title="Ethernet II",
    source="IEEE 802.3-2022 3.1.1",
    doc="14 bytes untagged. VLAN tags, when present, sit between src and type on the wire.",
)

VLAN_TAG = HeaderSpec(
    "vlan",
    [
        Field("tpid", 16, "tag protocol identifier: 0x8100 C-tag, 0x88a8 S-tag",
              enum=EtherType, default=EtherType.VLAN),
        Field("pcp", 3, "priority code point (the PFC priority)"),
        Field("dei", 1, "drop eligible indicator"),
        Field("vid", 12, "VLAN identifier"),
    ],
    title="802.1Q / 802.1ad VLAN tag",
    source="IEEE 802.1Q-2022 9.6",
    doc="4 bytes, repeated for QinQ (outer S-tag first).",
)


def payload_start(frame: bytes | bytearray) -> tuple[int, int] | None:
    """(offset of the payload, its EtherType) after the addresses and any VLAN tags; None when
    the frame ends before an EtherType.  For in-place rewriters (ECN, TTL) that need no full
    dissection."""
    off = 12
    while len(frame) >= off + 2:
        et = (frame[off] << 8) | frame[off + 1]
        if et not in VLAN_TPIDS:
            return off + 2, et
        off += 4
    return None

"""Native InfiniBand headers: LRH, GRH, raw header, link flow-control packet, MAD common
header; the native ICRC and the VCRC; the ERF record header that carries IB in captures.

Sources.  The primary source is the InfiniBand Architecture Specification, Volume 1
(IBTA, release 1.2.1 / 1.3 numbering; "IBA" below): chapter 7 (link layer: LRH 7.7, ICRC
7.8.1, VCRC 7.8.2, flow control 7.9), chapter 8 (network layer: GRH 8.3), chapter 13
(management datagrams: MAD format 13.4).  Where the layout was checked against a secondary
source it is named: Wireshark's ``epan/dissectors/packet-infiniband.c`` (field names and
masks of tshark 4.0.17: ``tshark -G fields``), Endace's ``dagcrc.c`` (the VCRC table: the
reflected polynomial 0xD008 = 0x100B, initial value and final XOR 0xFFFF) and T. Shanley,
*InfiniBand Network Architecture* (MindShare 2002), ch. 25 "Packet CRCs" (which fields the
ICRC masks in local and in global packets).

Values this module assumes where the sources we could read are silent are marked ``[A]`` in the
field tables and listed in ``docs/reference/headers.md`` and ``docs/explanation/infiniband.md``.

CRCs.  Both CRCs are computed bit-reflected (least significant bit of each byte first), as
the link sends them; the numbers shown are the CRC registers, and both are sent least
significant byte first (the ICRC as RoCEv2's, IBA Annex A17.8 and ``wire.roce``; the VCRC
likewise [A]).

* **ICRC** (IBA 7.8.1): CRC-32 (IEEE 802.3 polynomial, ``zlib.crc32``) from the first byte
  of the LRH to the last byte before the ICRC, with the variant fields replaced by ones:
  in a *local* packet (LNH = IBA local) the LRH's ``vl`` and the BTH's byte 4 (FECN, BECN,
  Resv6 = "Resv8a"); in a *global* packet (LNH = IBA global) the whole LRH (a router
  rebuilds it; Shanley fig. 25-16, and the 8 bytes of ones RoCE puts in its place, IBA
  Annex A17.8), the GRH's ``tclass``, ``flow_label`` and ``hop_lmt``, and the BTH's byte 4.
  The masked positions come from the field tables (:func:`mask_fields`).
* **VCRC** (IBA 7.8.2): CRC-16, polynomial x^16 + x^12 + x^3 + x + 1 (0x100B), initial
  value and final XOR 0xFFFF, over every byte from the LRH to the ICRC (to the end of the
  payload in raw packets, which have no ICRC).
* **LPCRC** (IBA 7.9.4): the same CRC-16 over the first 4 bytes of a flow-control packet.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from enum import IntEnum

from .bth import BTH
from .spec import Field, HeaderSpec

__all__ = [
    "LRH", "GRH", "RWH", "IB_FC", "MAD", "ERF", "IB_SPECS", "Lnh", "IbFcOp", "ErfType",
    "GRH_NXT_HDR_IBA", "MAD_QPS", "ICRC_BYTES", "VCRC_BYTES", "crc16", "vcrc",
    "vcrc_bytes", "icrc_native", "mask_fields", "LINKTYPE_INFINIBAND", "LINKTYPE_ERF",
]

#: tcpdump.org link-layer header types: LINKTYPE_INFINIBAND (frames start at the LRH) and
#: LINKTYPE_ERF (each record starts with an Endace ERF header).
LINKTYPE_INFINIBAND = 247
LINKTYPE_ERF = 197
ICRC_BYTES = 4
VCRC_BYTES = 2
#: GRH NxtHdr value of an IBA transport header (BTH) (IBA 8.3.5; Wireshark ``IBA_GLOBAL``
#: path tests 0x1B).
GRH_NXT_HDR_IBA = 0x1B
#: Queue pairs whose datagrams carry MADs: QP0 (SMI, subnet management) and QP1 (GSI,
#: general services) (IBA 13.4.1, 3.9).
MAD_QPS = frozenset({0, 1})


class Lnh(IntEnum):
    """LRH Link Next Header (IBA 7.7.4 table: bit 1 = IBA transport, bit 0 = GRH)."""

    RAW = 0         # raw packet: a raw header (RWH) with an EtherType follows
    IPV6 = 1        # IP non-IBA transport: an IPv6 header follows
    IBA_LOCAL = 2   # IBA transport, no GRH: the BTH follows
    IBA_GLOBAL = 3  # IBA transport with a GRH


class IbFcOp(IntEnum):
    """Link packet operand (IBA 7.9.4; Wireshark ``Operand_Description``)."""

    FLOW_CONTROL = 0
    FLOW_CONTROL_INIT = 1


class ErfType(IntEnum):
    """ERF record types used here (Endace ERF types reference; Wireshark
    ``wiretap/erf_record.h``: ``ERF_TYPE_INFINIBAND`` 21, ``ERF_TYPE_INFINIBAND_LINK`` 25)."""

    ETH = 2
    INFINIBAND = 21
    INFINIBAND_LINK = 25


LRH = HeaderSpec(
    "lrh",
    [
        Field("vl", 4, "virtual lane; 15 = VL15, subnet management (IBA 7.7.1); masked in "
              "the ICRC"),
        Field("lver", 4, "link version, 0 (IBA 7.7.2)"),
        Field("sl", 4, "service level (IBA 7.7.3)"),
        Field("resv2", 2, "reserved (IBA 7.7)", reserved=True),
        Field("lnh", 2, "link next header (IBA 7.7.4)", enum=Lnh, default=Lnh.IBA_LOCAL),
        Field("dlid", 16, "destination local identifier (IBA 7.7.5)"),
        Field("resv5", 5, "reserved (IBA 7.7)", reserved=True),
        Field("pkt_len", 11, "packet length in 4-byte words from the first byte of the LRH "
              "to the last of the ICRC, the VCRC excluded (IBA 7.7.7); computed on build"),
        Field("slid", 16, "source local identifier (IBA 7.7.8)"),
    ],
    title="InfiniBand Local Route Header (LRH)",
    source="IBA vol. 1 rel. 1.x, 7.7; layout checked with Wireshark packet-infiniband.c",
    doc="8 bytes, first in every InfiniBand data packet (linktype 247, ERF type 21).",
)

GRH = HeaderSpec(
    "grh",
    [
        Field("ip_ver", 4, "IP version, 6 (IBA 8.3.1)", default=6),
        Field("tclass", 8, "traffic class (IBA 8.3.2); masked in the ICRC"),
        Field("flow_label", 20, "flow label (IBA 8.3.3); masked in the ICRC"),
        Field("pay_len", 16, "bytes after the GRH up to and including the ICRC "
              "(IBA 8.3.4); computed on build"),
        Field("nxt_hdr", 8, "next header, 0x1B = IBA transport (IBA 8.3.5)",
              default=GRH_NXT_HDR_IBA),
        Field("hop_lmt", 8, "hop limit (IBA 8.3.6); masked in the ICRC", default=64),
        Field("sgid", 128, "source global identifier (IBA 8.3.7)", fmt="ipv6"),
        Field("dgid", 128, "destination global identifier (IBA 8.3.8)", fmt="ipv6"),
    ],
    title="InfiniBand Global Route Header (GRH)",
    source="IBA vol. 1 rel. 1.x, 8.3 (the IPv6 header's layout, RFC 8200 3)",
    doc="40 bytes after the LRH when LNH = IBA_GLOBAL (3).",
)

RWH = HeaderSpec(
    "rwh",
    [
        Field("resv16", 16, "reserved", reserved=True),
        Field("ethertype", 16, "EtherType of the raw payload"),
    ],
    title="InfiniBand Raw Header (RWH)",
    source="IBA vol. 1 rel. 1.x, 5.4 and 7.7.4 (raw datagrams); layout from Wireshark "
           "packet-infiniband.c parse_RWH (secondary) [A]",
    doc="4 bytes after the LRH when LNH = RAW (0); raw packets carry no ICRC, only a VCRC.",
)

IB_FC = HeaderSpec(
    "ib_fc",
    [
        Field("op", 4, "operand: 0 normal flow control, 1 flow-control init (IBA 7.9.4)",
              enum=IbFcOp),
        Field("fctbs", 12, "flow control total blocks sent, 64-byte blocks mod 4096 "
              "(IBA 7.9.4)"),
        Field("vl", 4, "virtual lane the credits are for (IBA 7.9.4)"),
        Field("fccl", 12, "flow control credit limit, mod 4096 (IBA 7.9.4)"),
        Field("lpcrc", 16, "link packet CRC: the VCRC's CRC-16 over the first 4 bytes "
              "(IBA 7.9.4); computed on build [A]"),
    ],
    title="InfiniBand link flow-control packet",
    source="IBA vol. 1 rel. 1.x, 7.9.4; layout checked with Wireshark "
           "dissect_infiniband_link",
    doc="6 bytes; a link packet, not a data packet: carried by ERF type 25 "
        "(INFINIBAND_LINK).",
    derived=("valid",),
)

MAD = HeaderSpec(
    "mad",
    [
        Field("base_version", 8, "MAD base version, 1 (IBA 13.4.2)", default=1),
        Field("mgmt_class", 8, "management class: 0x01 subnet management (LID routed), "
              "0x81 (directed route), 0x03 subnet administration, 0x04 performance, 0x07 "
              "communication management (IBA 13.4.2)", default=0x01),
        Field("class_version", 8, "class version (IBA 13.4.2)", default=1),
        Field("method", 8, "method; bit 7 (R) set in responses (IBA 13.4.2, 13.4.5)",
              default=0x01),
        Field("status", 16, "status (IBA 13.4.7)"),
        Field("class_specific", 16, "class specific (directed route SMPs: hop pointer and "
              "count) (IBA 13.4.2)"),
        Field("transaction_id", 64, "transaction id (IBA 13.4.6)"),
        Field("attribute_id", 16, "attribute id (IBA 13.4.2)"),
        Field("resv16", 16, "reserved (IBA 13.4.2)", reserved=True),
        Field("attribute_modifier", 32, "attribute modifier (IBA 13.4.2)"),
    ],
    title="InfiniBand MAD common header",
    source="IBA vol. 1 rel. 1.x, 13.4.2 (MAD format); names as Wireshark's "
           "infiniband.mad.*",
    doc="24 bytes at the start of the payload of a UD datagram to QP0 or QP1; the rest of "
        "the 256-byte MAD is payload.",
)

ERF = HeaderSpec(
    "erf",
    [
        Field("ts", 64, "timestamp: 64-bit little-endian 32.32 fixed-point seconds, shown as "
              "its wire bytes", fmt="hex"),
        Field("ext", 1, "an extension header follows; computed on build"),
        Field("type", 7, "record type: 2 Ethernet, 21 InfiniBand, 25 InfiniBand link; "
              "from the layers on build", enum=ErfType, default=ErfType.INFINIBAND),
        Field("flags", 8, "bits 0-1 interface, 2 varying length, 3 truncated, 4 RX error, "
              "5 DS error, 6-7 reserved; 3, 4 and 5 are problems", default=0x04),
        Field("rlen", 16, "record length in bytes: this header, the extension headers, the "
              "packet and its padding (to 8 bytes); computed on build"),
        Field("lctr", 16, "loss counter: records lost before this one (a problem when not "
              "0); a colour in the colour types"),
        Field("wlen", 16, "wire length of the packet in bytes; computed on build"),
    ],
    title="Endace ERF record header",
    source="Endace ERF types reference (public); Wireshark wiretap/erf_record.h and "
           "packet-erf.c",
    doc="16 bytes at the start of every record of a LINKTYPE_ERF (197) capture; 8-byte "
        "extension headers follow when `ext` is 1 (kept as `ext_headers` hex).  Decoded "
        "with `ts_ns`, the timestamp in ns since 1970.",
)

#: layer name -> spec, for :data:`wire.stack.SPECS` (every derived form).
IB_SPECS: dict[str, HeaderSpec] = {s.name: s for s in (ERF, LRH, GRH, RWH, IB_FC, MAD)}


# ========================================================================== CRCs
def _crc16_table(poly_reflected: int) -> tuple[int, ...]:
    out = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ poly_reflected if c & 1 else c >> 1
        out.append(c)
    return tuple(out)


#: 0x100B (x^16 + x^12 + x^3 + x + 1, IBA 7.8.2) bit-reversed, as Endace's dagcrc.c has it.
_VCRC_POLY_REFLECTED = 0xD008
_VCRC_TABLE = _crc16_table(_VCRC_POLY_REFLECTED)


def crc16(data: bytes | bytearray | memoryview, crc: int = 0) -> int:
    """The IBA CRC-16 (VCRC, LPCRC): reflected 0x100B, init and final XOR 0xFFFF.
    ``crc`` continues an earlier result (``crc16(b, crc16(a)) == crc16(a + b)``)."""
    c = crc ^ 0xFFFF
    table = _VCRC_TABLE
    for b in bytes(data):
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFF


def vcrc(packet: bytes | bytearray | memoryview) -> int:
    """VCRC of a packet: ``packet`` runs from the LRH to the ICRC (or the end of a raw
    packet's payload), the VCRC excluded."""
    return crc16(packet)


def vcrc_bytes(value: int) -> bytes:
    """The VCRC as sent: least significant byte first [A] (see the module doc)."""
    return value.to_bytes(VCRC_BYTES, "little")


def mask_fields(buf: bytearray, spec: HeaderSpec, offset: int,
                names: Iterable[str] | None = None) -> None:
    """Set every bit of the named fields (all of ``spec``'s when ``names`` is None) of the
    header at ``offset`` in ``buf`` to one, from the field table's layout (no hand-written
    bit positions)."""
    want = None if names is None else set(names)
    for f, _i, pos in spec.layout():
        if want is not None and f.name not in want:
            continue
        for bit in range(pos, pos + f.bits):
            buf[offset + bit // 8] |= 0x80 >> (bit % 8)


def icrc_native(packet: bytes | bytearray | memoryview, bth_offset: int) -> int:
    """ICRC of a native IB packet (IBA 7.8.1, see the module doc).

    ``packet`` runs from the LRH to the last byte before the ICRC; ``bth_offset`` is where
    its BTH starts (8 for a local packet, 48 for a global one).  The LRH's LNH says which
    fields are masked."""
    buf = bytearray(packet)
    lnh = LRH.unpack(buf)["lnh"]
    if lnh == Lnh.IBA_GLOBAL:
        mask_fields(buf, LRH, 0)
        mask_fields(buf, GRH, LRH.size_bytes, ("tclass", "flow_label", "hop_lmt"))
    else:
        mask_fields(buf, LRH, 0, ("vl",))
    mask_fields(buf, BTH, bth_offset, ("fecn", "becn", "resv6"))
    return zlib.crc32(buf)

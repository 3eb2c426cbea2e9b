"""SUE (Scale Up Ethernet) transport: reliability header (RH), packed transactions, R-CRC,
and the AI Forwarding Headers (AFH Gen1 shim, AFH Gen2 12- and 6-byte address forms).

What is public (the sources named below; docs/explanation/sue.md lists them) and what we
assume **[A]**:

* **RH** (8 bytes): Broadcom SUE section 6.3.3 as reproduced by XDP2 ``sue.h`` (preferred over
  SUE-Sim's order).  Op values are not defined publicly: XDP2 uses ACK 0, NACK 1; **[A]**
  DATA = 2.  PSN scope per {source, destination, VC} **[A]**.
* **Packed PDU**: one RH, then whole transactions for one {destination, VC}, then one R-CRC
  (SUE v1.0 via the MiracleFarms summary).  The in-PDU framing is not public (Herbert's
  SUPERp critique).  **[A]** each transaction is a descriptor (8 bytes, or 16 with a 64-bit
  address; ``ScaleUpConfig.txn_hdr_bytes``) followed by ``length`` data bytes, no padding; the
  descriptor's ``last`` bit marks the final transaction (so Ethernet padding after a short PDU
  is never mistaken for a transaction).  RH ops other than DATA carry no transactions **[A]**.
  Maximum PDU (descriptors + data) 4096 B, SUE-Lite 1024 B; data per transaction <= 256 B.
* **R-CRC** **[A]**: CRC-32 (IEEE 802.3 polynomial, ``zlib.crc32``) over the RH and the
  transactions, sent most significant byte first.
* **SUE-Lite**: no RH and no R-CRC; transactions directly after the 6-byte AFH Gen2 form.
* **AFH Gen1**: the 2-byte shim ``AR F C CNM TTL(4) DSCP(6) ECN(2)`` after its own EtherType,
  then a second EtherType for the transport (Herbert, SUPERp.pdf; SAI AFH fields agree).
* **AFH Gen2** (IEEE 802c SLAP addresses carry the forwarding fields): the 12-byte form
  ``V W R R Z Y X M | HopLimit 4 | entropy 4 | DstXPU 32 | TC 8 | entropy 8 | SrcXPU 32``
  replaces DA+SA (SUPERp.pdf figure).  **[A]** the 6-byte form (SUE-Lite) occupies the DA as
  ``V W R R Z Y X M | HopLimit 4 | VC 2 | rsvd 2 | DstXPU 16 | SrcXPU 16`` with the SA bytes
  user-defined; its layout is not public.  Both are followed by the EtherType.
"""

from __future__ import annotations

import zlib
from enum import IntEnum

from .spec import Field, HeaderSpec

__all__ = [
    "SUE_RH", "SUE_TXN8", "SUE_TXN16", "RCRC", "AFH_GEN1", "AFH_GEN2_12", "AFH_GEN2_6",
    "AFH_FORMS", "SueOp", "TxnOpcode", "txn_spec", "rcrc", "MAX_TXN_DATA_BYTES",
]

#: Data bytes per transaction (SUE v1.0, via the MiracleFarms summary).
MAX_TXN_DATA_BYTES = 256


class SueOp(IntEnum):
    """RH op (2 bits).  ACK/NACK as XDP2; DATA = 2 is our assumption [A]; 3 reserved."""

    ACK = 0
    NACK = 1
    DATA = 2
    RESERVED = 3


class TxnOpcode(IntEnum):
    """[A] transaction types (SUE: write, read, message, barrier; the command format itself is
    XPU-defined).  0 is never a transaction."""

    WRITE = 1
    READ_REQ = 2
    READ_RESP = 3
    MESSAGE = 4
    BARRIER = 5


SUE_RH = HeaderSpec(
    "sue_rh",
    [
        Field("ver", 2, "version"),
        Field("op", 2, "0 ACK, 1 NACK, 2 DATA [A], 3 reserved", enum=SueOp, default=SueOp.DATA),
        Field("rsvd0", 2, "reserved", reserved=True),
        Field("xpuid", 10, "peer XPU (up to 1024)"),
        Field("npsn", 16, "this PDU's sequence number"),
        Field("vc", 2, "virtual channel (up to 4)"),
        Field("rsvd1", 4, "reserved", reserved=True),
        Field("partition", 10, "partition"),
        Field("apsn", 16, "acknowledged PSN (cumulative, piggy-backed)"),
    ],
    title="SUE reliability header (RH)",
    source="Broadcom SUE 6.3.3 via XDP2 sue.h; op DATA=2 [A]",
    doc="8 bytes, then the packed transactions (op DATA) and the 4-byte R-CRC.",
)

_TXN_FIELDS = [
    Field("opcode", 8, "1 WRITE, 2 READ_REQ, 3 READ_RESP, 4 MESSAGE, 5 BARRIER [A]",
          enum=TxnOpcode, default=TxnOpcode.WRITE),
    Field("last", 1, "1 on the PDU's final transaction [A]; computed on build"),
    Field("flags", 7, "XPU-defined flags [A]"),
    Field("length", 16, "data bytes that follow the descriptor (<= 256); computed on build"),
    Field("tag", 32, "transaction tag [A]"),
]
SUE_TXN8 = HeaderSpec(
    "sue_txn8", _TXN_FIELDS,
    title="SUE transaction descriptor, 8 bytes [A]",
    source="[A] not public: a per-transaction descriptor of our own "
           "(docs/explanation/scaleup.md; txn_hdr_bytes = 8)",
    doc="Then `length` data bytes. Shown as an element of the `sue_txn` list, with `data` (hex).",
    derived=("data",),
)
SUE_TXN16 = HeaderSpec(
    "sue_txn16", [*_TXN_FIELDS, Field("address", 64, "target address (writes, reads)")],
    title="SUE transaction descriptor, 16 bytes [A]",
    source="[A] not public: a per-transaction descriptor of our own, with a 64-bit address "
           "(docs/explanation/scaleup.md; txn_hdr_bytes = 16)",
    doc="Then `length` data bytes. Shown as an element of the `sue_txn` list, with `data` (hex).",
    derived=("data",),
)
RCRC = HeaderSpec(
    "rcrc", [Field("value", 32, "CRC-32 of the RH and the transactions [A]")],
    title="SUE end-to-end R-CRC [A]", source="[A] CRC-32 (IEEE 802.3), most significant byte first",
    doc="4 bytes after the last transaction. Shown with `valid`.",
    derived=("valid", "reason"),
)

AFH_GEN1 = HeaderSpec(
    "afh_gen1",
    [
        Field("ar", 1, "adaptive routing allowed"),
        Field("f", 1, "flow label / entropy valid"),
        Field("c", 1, "CNM eligible"),
        Field("cnm", 1, "congestion notification message"),
        Field("ttl", 4, "time to live", default=15),
        Field("dscp", 6, "class of service (SAI: AFH CoS is 6 bits)"),
        Field("ecn", 2, "ECN codepoint (RFC 3168)"),
        Field("type", 16, "EtherType of the transport (SUE: placeholder 0x9A01 [A])",
              default=0x9A01),
    ],
    title="AFH Gen1 shim",
    source="Herbert SUPERp.pdf v0.4 (AFH Gen1 figure); SAI saiofh.h AFH fields",
    doc="2-byte shim + 2-byte EtherType after the AFH Gen1 EtherType (placeholder 0x9A00 [A]). "
        "Shown as `afh` with `form: \"gen1\"`.",
    derived=("form",),
)

_SLAP_FLAGS = [
    Field("v", 1, "V"),
    Field("w", 1, "W"),
    Field("r", 2, "reserved", reserved=True),
    Field("z", 1, "SLAP Z (IEEE 802c)"),
    Field("y", 1, "SLAP Y (IEEE 802c)", default=1),
    Field("x", 1, "local (U/L) bit: 1 for SLAP addresses", default=1),
    Field("m", 1, "multicast (I/G) bit"),
]
AFH_GEN2_12 = HeaderSpec(
    "afh_gen2_12",
    [
        *_SLAP_FLAGS,
        Field("hop_limit", 4, "hop limit", default=15),
        Field("entropy0", 4, "entropy"),
        Field("dst_xpu", 32, "destination XPU"),
        Field("tc", 8, "traffic class"),
        Field("entropy1", 8, "entropy"),
        Field("src_xpu", 32, "source XPU"),
        Field("type", 16, "EtherType of the transport (SUE: placeholder 0x9A01 [A])",
              default=0x9A01),
    ],
    title="AFH Gen2, 12-byte form (in place of DA and SA)",
    source="Herbert SUPERp.pdf v0.4 (AFH Gen2 figure); IEEE 802c-2017 SLAP",
    doc="Replaces the Ethernet DA/SA; then the EtherType. Shown as `afh` with "
        "`form: \"gen2_12\"` (no `eth` layer).",
    derived=("form",),
)
AFH_GEN2_6 = HeaderSpec(
    "afh_gen2_6",
    [
        *_SLAP_FLAGS,
        Field("hop_limit", 4, "hop limit", default=15),
        Field("vc", 2, "virtual channel [A]"),
        Field("rsvd", 2, "reserved [A]", reserved=True),
        Field("dst_xpu", 16, "destination XPU [A]"),
        Field("src_xpu", 16, "source XPU [A]"),
        Field("sa", 48, "the SA bytes: user defined", fmt="mac"),
        Field("type", 16, "EtherType of the transport (SUE-Lite: placeholder 0x9A01 [A])",
              default=0x9A01),
    ],
    title="AFH Gen2, 6-byte form (SUE-Lite) [A]",
    source="[A] layout not public; 6-byte size from SUE-Lite descriptions (NV-RES, MF)",
    doc="Occupies the DA; the SA bytes are user defined; then the EtherType. Shown as `afh` "
        "with `form: \"gen2_6\"` (no `eth` layer).",
    derived=("form",),
)

#: ``afh.form`` -> spec.
AFH_FORMS: dict[str, HeaderSpec] = {"gen1": AFH_GEN1, "gen2_12": AFH_GEN2_12,
                                    "gen2_6": AFH_GEN2_6}


def txn_spec(txn_hdr_bytes: int) -> HeaderSpec:
    """The transaction descriptor of the configured size (8 or 16 bytes)."""
    if txn_hdr_bytes == 8:
        return SUE_TXN8
    if txn_hdr_bytes == 16:
        return SUE_TXN16
    raise ValueError("txn_hdr_bytes must be 8 or 16")


def rcrc(pdu: bytes | bytearray | memoryview) -> int:
    """R-CRC of a PDU: CRC-32 over the RH and the transactions [A]."""
    return zlib.crc32(pdu)

"""InfiniBand extended transport headers (IBA vol. 1 section 9.3), AETH syndrome decoding
(IBA 9.3.5 table 44/45) and the RoCEv2 CNP body (IBA Annex A17.9.3)."""

from __future__ import annotations

from enum import IntEnum

from .spec import Field, HeaderSpec

__all__ = [
    "RDETH", "DETH", "XRCETH", "RETH", "ATOMIC_ETH", "AETH", "ATOMIC_ACK_ETH", "IMMDT",
    "IETH", "CNP", "EXT_SPECS", "AethKind", "NakCode", "aeth_decode", "aeth_syndrome",
]

RDETH = HeaderSpec(
    "rdeth",
    [Field("resv8", 8, "reserved", reserved=True), Field("ee_context", 24, "EE context")],
    title="Reliable Datagram Extended Transport Header", source="IBA 9.3.1", doc="4 bytes.",
)
DETH = HeaderSpec(
    "deth",
    [Field("qkey", 32, "queue key"), Field("resv8", 8, "reserved", reserved=True),
     Field("src_qp", 24, "source queue pair")],
    title="Datagram Extended Transport Header", source="IBA 9.3.2", doc="8 bytes.",
)
XRCETH = HeaderSpec(
    "xrceth",
    [Field("resv8", 8, "reserved", reserved=True),
     Field("xrc_srq", 24, "XRC shared receive queue")],
    title="XRC Extended Transport Header", source="IBA 1.2.1 XRC annex", doc="4 bytes.",
)
RETH = HeaderSpec(
    "reth",
    [Field("va", 64, "virtual address"), Field("rkey", 32, "remote key"),
     Field("dma_length", 32, "DMA length in bytes")],
    title="RDMA Extended Transport Header", source="IBA 9.3.3", doc="16 bytes.",
)
ATOMIC_ETH = HeaderSpec(
    "atomic_eth",
    [Field("va", 64, "virtual address"), Field("rkey", 32, "remote key"),
     Field("swap_add", 64, "swap (CmpSwap) or add (FetchAdd) data"),
     Field("compare", 64, "compare data (CmpSwap)")],
    title="Atomic Extended Transport Header", source="IBA 9.3.4", doc="28 bytes.",
)
AETH = HeaderSpec(
    "aeth",
    [Field("syndrome", 8, "bit 7 reserved, bits 6:5 kind, bits 4:0 credit count / RNR timer / "
                          "NAK code"),
     Field("msn", 24, "message sequence number")],
    title="ACK Extended Transport Header", source="IBA 9.3.5", doc="4 bytes.",
    derived=("kind", "value", "nak"),
)
ATOMIC_ACK_ETH = HeaderSpec(
    "atomic_ack_eth",
    [Field("orig_remote_data", 64, "original remote data")],
    title="Atomic Acknowledge Extended Transport Header", source="IBA 9.3.6", doc="8 bytes.",
)
IMMDT = HeaderSpec(
    "immdt", [Field("data", 32, "immediate data")],
    title="Immediate Data Extended Transport Header", source="IBA 9.3.7", doc="4 bytes.",
)
IETH = HeaderSpec(
    "ieth", [Field("rkey", 32, "remote key to invalidate")],
    title="Invalidate Extended Transport Header", source="IBA 9.3.8", doc="4 bytes.",
)
CNP = HeaderSpec(
    "cnp", [Field("reserved", 128, "16 reserved bytes (zero)", fmt="hex", reserved=True)],
    title="RoCEv2 Congestion Notification Packet body",
    source="IBA Annex A17.9.3 (opcode 0x81, BECN=1, PSN 0)",
    doc="16 bytes after a BTH with opcode 0x81. Shown as `cnp{}`; `reserved` appears only "
        "when non-zero.",
)

#: layer name -> spec, for the extended headers that :data:`wire.bth.EXT_HEADERS` names.
EXT_SPECS: dict[str, HeaderSpec] = {
    s.name: s for s in (RDETH, DETH, XRCETH, RETH, ATOMIC_ETH, AETH, ATOMIC_ACK_ETH, IMMDT,
                        IETH, CNP)
}


class AethKind(IntEnum):
    """AETH syndrome bits 6:5 (IBA 9.3.5 table 44)."""

    ACK = 0
    RNR_NAK = 1
    RESERVED = 2
    NAK = 3


class NakCode(IntEnum):
    """NAK codes in syndrome bits 4:0 when the kind is NAK (IBA 9.3.5 table 45)."""

    PSN_SEQUENCE_ERROR = 0
    INVALID_REQUEST = 1
    REMOTE_ACCESS_ERROR = 2
    REMOTE_OPERATIONAL_ERROR = 3
    INVALID_RD_REQUEST = 4


def aeth_decode(syndrome: int) -> dict[str, object]:
    """Syndrome -> {kind, value[, nak]}: value is the credit count (ACK; 31 = invalid credit
    count), the RNR timer code (RNR_NAK) or the NAK code (NAK)."""
    kind = AethKind((syndrome >> 5) & 3)
    value = syndrome & 0x1F
    out: dict[str, object] = {"kind": kind.name, "value": value}
    if kind is AethKind.NAK:
        out["nak"] = NakCode(value).name if value in NakCode._value2member_map_ else "RESERVED"
    return out


def aeth_syndrome(kind: AethKind | str, value: int) -> int:
    """Inverse of :func:`aeth_decode` (bit 7 zero)."""
    k = AethKind[kind] if isinstance(kind, str) else AethKind(kind)
    if not 0 <= value <= 31:
        raise ValueError("AETH value must fit in 5 bits")
    return (k << 5) | value

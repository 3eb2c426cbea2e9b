"""InfiniBand Base Transport Header (IBA vol. 1 section 9.2) and the opcode table.

The opcode's top 3 bits are the transport (RC 000, UC 001, RD 010, UD 011, CNP 100,
XRC 101; IBA 9.2.1 table 38), the low 5 bits the operation.  :data:`EXT_HEADERS` says which
extended transport headers follow the BTH for every defined opcode, in wire order (IBA 9.2
and table 38; RoCEv2 CNP from IBA Annex A17.9.3).
"""

from __future__ import annotations

from enum import IntEnum

from .spec import Field, HeaderSpec

__all__ = ["BTH", "Opcode", "Transport", "EXT_HEADERS", "opcode_name", "is_cnp"]


class Transport(IntEnum):
    RC = 0x00
    UC = 0x20
    RD = 0x40
    UD = 0x60
    CNP = 0x80
    XRC = 0xA0


# low 5 bits -> operation name; the per-transport validity and headers are in _TABLE below.
_OPS = {
    0x00: "SEND_FIRST", 0x01: "SEND_MIDDLE", 0x02: "SEND_LAST",
    0x03: "SEND_LAST_WITH_IMMEDIATE", 0x04: "SEND_ONLY", 0x05: "SEND_ONLY_WITH_IMMEDIATE",
    0x06: "RDMA_WRITE_FIRST", 0x07: "RDMA_WRITE_MIDDLE", 0x08: "RDMA_WRITE_LAST",
    0x09: "RDMA_WRITE_LAST_WITH_IMMEDIATE", 0x0A: "RDMA_WRITE_ONLY",
    0x0B: "RDMA_WRITE_ONLY_WITH_IMMEDIATE", 0x0C: "RDMA_READ_REQUEST",
    0x0D: "RDMA_READ_RESPONSE_FIRST", 0x0E: "RDMA_READ_RESPONSE_MIDDLE",
    0x0F: "RDMA_READ_RESPONSE_LAST", 0x10: "RDMA_READ_RESPONSE_ONLY", 0x11: "ACKNOWLEDGE",
    0x12: "ATOMIC_ACKNOWLEDGE", 0x13: "CMP_SWAP", 0x14: "FETCH_ADD", 0x15: "RESYNC",
    0x16: "SEND_LAST_WITH_INVALIDATE", 0x17: "SEND_ONLY_WITH_INVALIDATE",
}

# RC headers per operation (IBA table 38 / 9.2); UC, RD, UD, XRC derive from it below.
_RC = {
    0x00: (), 0x01: (), 0x02: (), 0x03: ("immdt",), 0x04: (), 0x05: ("immdt",),
    0x06: ("reth",), 0x07: (), 0x08: (), 0x09: ("immdt",), 0x0A: ("reth",),
    0x0B: ("reth", "immdt"), 0x0C: ("reth",), 0x0D: ("aeth",), 0x0E: (), 0x0F: ("aeth",),
    0x10: ("aeth",), 0x11: ("aeth",), 0x12: ("aeth", "atomic_ack_eth"),
    0x13: ("atomic_eth",), 0x14: ("atomic_eth",), 0x16: ("ieth",), 0x17: ("ieth",),
}
# UC supports sends and RDMA writes only (IBA table 38).
_UC_OPS = (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B)
# RD: every request carries RDETH + DETH, every response RDETH (+ AETH where RC has it).
_RD_RESPONSES = (0x0D, 0x0E, 0x0F, 0x10, 0x11, 0x12)
# UD: SEND ONLY (DETH) and SEND ONLY WITH IMMEDIATE (DETH ImmDt) only.
_UD = {0x04: ("deth",), 0x05: ("deth", "immdt")}


def _build_table() -> dict[int, tuple[str, tuple[str, ...]]]:
    t: dict[int, tuple[str, tuple[str, ...]]] = {}
    for low, hdrs in _RC.items():
        t[Transport.RC | low] = ("RC_" + _OPS[low], hdrs)
    for low in _UC_OPS:
        t[Transport.UC | low] = ("UC_" + _OPS[low], _RC[low])
    for low in [*_RC, 0x15]:
        if low in (0x16, 0x17):
            continue  # no SEND WITH INVALIDATE on RD
        if low in _RD_RESPONSES:
            hdrs = ("rdeth", *_RC[low])
        else:
            hdrs = ("rdeth", "deth", *_RC.get(low, ()))
        t[Transport.RD | low] = ("RD_" + _OPS[low], hdrs)
    for low, hdrs in _UD.items():
        t[Transport.UD | low] = ("UD_" + _OPS[low], hdrs)
    # InfiniBand's CNP (IBA Vol. 1 annex A10, congestion control): opcode 0x80, BECN set,
    # no extended header and no payload (LRH PktLen 6 words: LRH, BTH, ICRC).
    t[0x80] = ("IB_CNP", ())
    t[0x81] = ("CNP", ("cnp",))
    # XRC (IBA 1.2.1 annex for XRC): requests carry XRCETH after the BTH, responses do not.
    for low, hdrs in _RC.items():
        req = low not in _RD_RESPONSES
        t[Transport.XRC | low] = ("XRC_" + _OPS[low], (("xrceth",) if req else ()) + hdrs)
    return dict(sorted(t.items()))


#: opcode -> (name, extended headers in wire order).  Opcodes not listed are reserved or
#: vendor-specific: their bytes up to the ICRC are kept as payload.
EXT_HEADERS: dict[int, tuple[str, tuple[str, ...]]] = _build_table()

Opcode = IntEnum("Opcode", {name: op for op, (name, _h) in EXT_HEADERS.items()})
Opcode.__doc__ = ("Every opcode defined by IBA table 38 (RC, UC, RD, UD, XRC), InfiniBand's CNP "
                  "(annex A10) and the RoCEv2 CNP.")


def opcode_name(op: int) -> str:
    """The opcode's name, or ``UNKNOWN_0xNN`` for reserved / vendor opcodes."""
    e = EXT_HEADERS.get(op)
    return e[0] if e else f"UNKNOWN_0x{op:02x}"


def is_cnp(op: int) -> bool:
    """A RoCEv2 CNP's opcode (0x81, IBA annex A17.9.3); InfiniBand's is 0x80 (IB_CNP)."""
    return op == 0x81


BTH = HeaderSpec(
    "bth",
    [
        Field("opcode", 8, "transport (3 bits) and operation (5 bits)", enum=Opcode,
              default=Opcode.RC_SEND_ONLY),
        Field("se", 1, "solicited event"),
        Field("m", 1, "migration state"),
        Field("pad_count", 2, "pad bytes after the payload (to a 4-byte multiple); computed on "
              "build"),
        Field("tver", 4, "transport header version (0)"),
        Field("pkey", 16, "partition key", default=0xFFFF),
        Field("fecn", 1, "forward explicit congestion notification (RoCEv2: unused)"),
        Field("becn", 1, "backward ECN (set in a RoCEv2 CNP)"),
        Field("resv6", 6, "reserved", reserved=True),
        Field("dest_qp", 24, "destination queue pair"),
        Field("ack_req", 1, "acknowledge request"),
        Field("resv7", 7, "reserved", reserved=True),
        Field("psn", 24, "packet sequence number"),
    ],
    title="Base Transport Header (BTH)",
    source="IBA vol. 1 rel. 1.7, 9.2; RoCEv2 IBA Annex A17",
    doc="12 bytes, after the UDP header on port 4791.",
    derived=("opcode_name",),
)

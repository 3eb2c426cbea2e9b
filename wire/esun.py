"""OCP ESUN 1.0 extension header (EH): 4 bytes after the Ethernet header (optionally
802.1Q-tagged) under a pending EtherType (:class:`wire.scaleup.ScaleUpConfig`).

Source: OCP "ESUN Network Operator Requirements Base Specification" rev 1.0 section 5.2
("New ESUN Header Definition"), as reproduced by the OCP Academy ESUN course (figure
eh_definition, slides 7-9); field widths confirmed by SAI's OFH object (saiofh.h).  The public
figure gives the order and widths but no bit numbers: we read it MSB first in transmission
order, which makes the header byte-aligned — **[A]**.

Semantics (ESUN 1.0 via the course and the sonic-mgmt ESUN test plan): F=1 makes switches
hash DA, SA and the Flow Label; CoS takes precedence over the 802.1Q PCP; ECN uses the IP
codepoints; every switch decrements TTL and drops a frame that arrives with TTL <= 1 (the test
plan drops arriving TTL 0 and 1) — **[A]** for the exact rule; UD passes end to end untouched.
The EH has no next-header field: the transport after it is a per-domain setting.
"""

from __future__ import annotations

from .ethernet import payload_start
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .spec import Field, HeaderSpec

__all__ = ["ESUN", "ESUN_DEFAULT_TTL", "esun_offset", "esun_forward_ttl", "esun_cos_to_tc",
           "esun_flow_hash_input"]

#: [A] TTL an endpoint sets (the 4-bit maximum; our choice, no public default).
ESUN_DEFAULT_TTL = 15

ESUN = HeaderSpec(
    "esun",
    [
        Field("rev", 2, "header revision; 0 for ESUN 1.0"),
        Field("f", 1, "1: switches hash the Flow Label with DA and SA; 0: the label is ignored"),
        Field("cos", 3, "class of service; takes precedence over the 802.1Q PCP"),
        Field("ecn", 2, "ECN codepoint, as IP (RFC 3168): 0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE"),
        Field("flow_label", 16, "source-set entropy, constant per flow"),
        Field("ttl", 4, "decremented by every switch; dropped when it arrives <= 1 [A]",
              default=ESUN_DEFAULT_TTL),
        Field("ud", 2, "user defined, end to end; switches pass it through"),
        Field("rsvd", 2, "reserved", reserved=True),
    ],
    title="OCP ESUN extension header (EH)",
    source="OCP ESUN 1.0 5.2 (via OCP Academy ESUN course); SAI saiofh.h; bit order [A]",
    doc="4 bytes after the EtherType (placeholder 0x88B5 [A], configurable). No next-header "
        "field: the transport that follows is a per-domain setting (default: SUE RH).",
)


def esun_offset(frame: bytes | bytearray, scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> int | None:
    """Offset of the EH in an Ethernet frame (after any 802.1Q tags), or None."""
    loc = payload_start(frame)
    if loc is None or loc[1] != scaleup.esun_ethertype or len(frame) < loc[0] + ESUN.size_bytes:
        return None
    return loc[0]


def esun_forward_ttl(frame: bytearray, scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> bool:
    """A switch's TTL step, in place: False (drop, reason ``ttl_expired``) when the frame
    arrives with TTL <= 1, else TTL - 1 and True.  Frames without an EH pass (True)."""
    off = esun_offset(frame, scaleup)
    if off is None:
        return True
    byte, shift, mask = ESUN.byte_field("ttl")
    ttl = (frame[off + byte] >> shift) & mask
    if ttl <= 1:
        return False
    frame[off + byte] = (frame[off + byte] & ~(mask << shift) & 0xFF) | ((ttl - 1) << shift)
    return True


def esun_cos_to_tc(cos: int, scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> int:
    """Traffic class of an EH CoS (ignoring any 802.1Q PCP, which the EH overrides)."""
    return scaleup.cos_to_tc[cos & 7]


def esun_flow_hash_input(frame: bytes | bytearray,
                         scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> bytes:
    """Bytes a switch hashes for ECMP/LAG: DA and SA, plus the Flow Label when F=1."""
    off = esun_offset(frame, scaleup)
    key = bytes(frame[:12])
    if off is None:
        return key
    eh = ESUN.unpack(frame, off)
    if eh["f"]:
        key += eh["flow_label"].to_bytes(2, "big")
    return key

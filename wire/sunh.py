"""IETF draft-herbert-sunh-00 Scale-Up Network Header (SUNH): 8 bytes under its own
(unassigned) EtherType.

Source: draft-herbert-sunh-00 (4 Nov 2025) section 3, as reproduced by XDP2 (sunh.h,
SUNH.png) and SUPERp.pdf.  Traffic Class has IPv6 semantics, so it is split DSCP 6 / ECN 2
(XDP2's 5/3 C struct split contradicts the draft's text; we follow the text).  Hop Limit: a
node discards a packet whose hop limit is 0 on receipt or is decremented to 0; the destination
accepts 0.  No length and no checksum.  The -01 layout was not public when this was written:
this is the **draft-00 layout**.
"""

from __future__ import annotations

from .spec import Field, HeaderSpec

__all__ = ["SUNH"]

SUNH = HeaderSpec(
    "sunh",
    [
        Field("dscp", 6, "Traffic Class bits 7..2 (IPv6 semantics)"),
        Field("ecn", 2, "Traffic Class bits 1..0: ECN codepoint (RFC 3168)"),
        Field("next_header", 8, "IP protocol number of what follows (17 UDP; SUE: 253 [A])",
              default=253),
        Field("hop_limit", 4, "decremented per hop; discarded at 0 (destination accepts 0)",
              default=15),
        Field("flow_label", 12, "flow label (IPv6 semantics)"),
        Field("src", 16, "source address: host part within the SUNH subnet"),
        Field("dst", 16, "destination address: host part within the SUNH subnet"),
    ],
    title="Scale-Up Network Header (SUNH), draft-00 layout",
    source="draft-herbert-sunh-00 3 (via XDP2 sunh.h / SUPERp.pdf)",
    doc="8 bytes after the EtherType (placeholder 0x88B6 [A], configurable).",
)

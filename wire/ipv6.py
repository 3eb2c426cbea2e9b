"""IPv6 fixed header (RFC 8200 section 3), Traffic Class split as DSCP/ECN (RFC 2474 3,
RFC 3168 5).  Extension headers are not dissected: a next header other than UDP leaves the
rest of the packet as raw bytes."""

from __future__ import annotations

from .spec import Field, HeaderSpec

__all__ = ["IPV6"]

IPV6 = HeaderSpec(
    "ipv6",
    [
        Field("version", 4, "always 6", default=6),
        Field("dscp", 6, "differentiated services codepoint (Traffic Class bits 7..2)"),
        Field("ecn", 2, "ECN codepoint (Traffic Class bits 1..0)"),
        Field("flow_label", 20, "flow label"),
        Field("payload_length", 16, "bytes after this 40-byte header; computed on build"),
        Field("next_header", 8, "payload protocol (17 = UDP)", default=17),
        Field("hop_limit", 8, "hop limit", default=64),
        Field("src", 128, "source address", fmt="ipv6"),
        Field("dst", 128, "destination address", fmt="ipv6"),
    ],
    title="IPv6",
    source="RFC 8200 3; RFC 2474 3; RFC 3168 5",
    doc="40 bytes.",
)

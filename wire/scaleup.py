"""Per-domain settings of the scale-up Ethernet headers (ESUN, SUE, AFH, SUNH).

None of the EtherTypes, ports or protocol numbers below is assigned: ESUN's EtherType is
"pending assignment" at IEEE (OCP ESUN 1.0, per the OCP Academy ESUN course), and SUE, AFH
and SUNH publish none.  Every value here is a **labelled placeholder** (an assumption [A],
docs/explanation/scaleup.md) that a user must be able to change: pass a :class:`ScaleUpConfig` to
``wire.dissect`` / ``wire.build`` (``scaleup=``), or the matching ``lossless`` options.

ESUN's EH has no next-header field, so the transport after it is a per-domain setting
(``esun_transport``, default the SUE reliability header) — never guessed from the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

__all__ = ["ScaleUpConfig", "DEFAULT_SCALEUP", "TRANSPORTS", "WELL_KNOWN_ETHERTYPES"]

#: Transports that can follow a scale-up network header.
#: ``sue_rh``: SUE reliability header + packed transactions + R-CRC;
#: ``sue_lite``: packed transactions only (SUE-Lite has no RH and no R-CRC);
#: ``raw``: not dissected.
TRANSPORTS = ("sue_rh", "sue_lite", "raw")

#: EtherTypes a scale-up placeholder must not take: assigned protocols found on data-centre
#: links, which a decoder would then misread.  Values from the IEEE Registration Authority's
#: public EtherType registry (https://standards.ieee.org/products-programs/regauth/ethertype/)
#: and RFC 7042 appendix B, with the defining standard in each comment.  The IEEE 802 Local
#: Experimental EtherTypes 0x88B5 and 0x88B6 (IEEE Std 802 clause 9.2.2; RFC 7042 B.1) are
#: meant for exactly this kind of use and are allowed (they are the ESUN/SUNH defaults).
WELL_KNOWN_ETHERTYPES: dict[int, str] = {
    0x0800: "IPv4 (RFC 894)",
    0x0806: "ARP (RFC 826)",
    0x0842: "Wake-on-LAN",
    0x22F3: "TRILL (RFC 6325)",
    0x8035: "RARP (RFC 903)",
    0x8100: "C-VLAN tag, IEEE 802.1Q",
    0x86DD: "IPv6 (RFC 8200)",
    0x8808: "MAC Control: PAUSE/PFC, IEEE 802.3 clause 31 / 802.1Qbb",
    0x8809: "Slow Protocols: LACP, IEEE 802.3 clause 43",
    0x8847: "MPLS (RFC 3032)",
    0x8848: "MPLS upstream-assigned label (RFC 5332)",
    0x8863: "PPPoE discovery (RFC 2516)",
    0x8864: "PPPoE session (RFC 2516)",
    0x888E: "EAPOL, IEEE 802.1X",
    0x88A8: "S-VLAN tag, IEEE 802.1ad (802.1Q)",
    0x88CC: "LLDP, IEEE 802.1AB",
    0x88E5: "MACsec, IEEE 802.1AE",
    0x88E7: "PBB I-TAG, IEEE 802.1ah (802.1Q)",
    0x88F7: "PTP, IEEE 1588",
    0x8902: "CFM, IEEE 802.1ag (802.1Q)",
    0x8906: "FCoE (FC-BB-5)",
    0x8914: "FIP, FCoE initialization (FC-BB-5)",
    0x8915: "RoCE v1 (IBTA Annex A16)",
    0x892F: "HSR, IEC 62439-3",
    0xFFFF: "reserved (RFC 7042 B.1)",
}


@dataclass(frozen=True, slots=True)
class ScaleUpConfig:
    """Where the scale-up headers are found and what follows them.

    All values are placeholders [A] unless a spec fixes them (see each field's comment).
    """

    #: [A] ESUN EH EtherType: IEEE 802 Local Experimental EtherType 1 (0x88B5); the real one
    #: is pending at IEEE (OCP ESUN 1.0 section 5.2).
    esun_ethertype: int = 0x88B5
    #: [A] SUNH EtherType: Local Experimental EtherType 2 (0x88B6); draft-herbert-sunh-00 asks
    #: IANA/IEEE for one (XDP2 uses 0x885B as its own placeholder).
    sunh_ethertype: int = 0x88B6
    #: [A] AFH Gen1 shim EtherType: unknown publicly; 0x9A00 is unknown to Wireshark 4.0.
    afh_gen1_ethertype: int = 0x9A00
    #: [A] EtherType of the SUE transport after AFH Gen2 addresses and after the AFH Gen1
    #: shim: unknown publicly; 0x9A01 is unknown to Wireshark 4.0.
    sue_ethertype: int = 0x9A01
    #: [A] UDP destination port of SUE over IPv4/IPv6 + UDP: not public; 0xCAFE (51966) is in
    #: the dynamic range.
    sue_udp_port: int = 0xCAFE
    #: [A] IP protocol number of the SUE transport after SUNH: 253 (RFC 3692 experimentation).
    sunh_sue_protocol: int = 253
    #: [A] transport after the ESUN EH (no next-header field in ESUN 1.0).
    esun_transport: str = "sue_rh"
    #: [A] transport after the 6-byte AFH Gen2 form (SUE-Lite) and the 12-byte form.
    afh_gen2_6_transport: str = "sue_lite"
    afh_gen2_12_transport: str = "sue_rh"
    #: [A] which AFH Gen2 form frames under ``sue_ethertype`` use: "12" or "6" bytes.
    afh_gen2_form: str = "12"
    #: [A] per-transaction descriptor size inside a packed PDU: 8 (no address) or 16 (with a
    #: 64-bit address); not public (the in-PDU framing of OCP SUE v1.0 is not published).
    txn_hdr_bytes: int = 8
    #: SUE maximum PDU (packed transactions, descriptors included): 4096 B, 1024 B for
    #: SUE-Lite (OCP SUE v1.0, per the MiracleFarms summary).
    max_pdu_bytes: int = 4096
    max_pdu_lite_bytes: int = 1024
    #: [A] ESUN CoS -> traffic class map (identity by default; SAI OFH_COS_TO_TC models it).
    cos_to_tc: tuple[int, ...] = field(default=(0, 1, 2, 3, 4, 5, 6, 7))

    def __post_init__(self) -> None:
        """Refuse values a decoder could not tell apart: each EtherType placeholder must be
        a type (>= 0x0600: IEEE 802.3 clause 3.2.6 reads smaller values of the Length/Type
        field as a length), not a well-known EtherType (WELL_KNOWN_ETHERTYPES) and not
        another placeholder; the SUE UDP port must be a port (1..65535, RFC 768) and not
        RoCEv2's 4791 (IANA "roce")."""
        names = ("esun_ethertype", "sunh_ethertype", "afh_gen1_ethertype", "sue_ethertype")
        seen: dict[int, str] = {}
        for name in names:
            v = getattr(self, name)
            if not isinstance(v, int) or not 0x0600 <= v <= 0xFFFF:
                shown = f"0x{v:04x}" if isinstance(v, int) and v >= 0 else repr(v)
                raise ValueError(f"{name}: {shown} is not an EtherType (0x0600..0xffff; "
                                 f"smaller values are lengths, IEEE 802.3 clause 3.2.6)")
            if v in WELL_KNOWN_ETHERTYPES:
                raise ValueError(f"{name}: 0x{v:04x} is a well-known EtherType "
                                 f"({WELL_KNOWN_ETHERTYPES[v]}); choose another placeholder")
            if v in seen:
                raise ValueError(f"{seen[v]} and {name} are both 0x{v:04x}; the scale-up "
                                 f"EtherTypes must differ from each other")
            seen[v] = name
        if not isinstance(self.sue_udp_port, int) or not 0 < self.sue_udp_port <= 0xFFFF:
            raise ValueError(f"sue_udp_port: {self.sue_udp_port!r} is not a UDP port (1..65535)")
        if self.sue_udp_port == 4791:
            raise ValueError("sue_udp_port: 4791 is RoCEv2's UDP port (IANA); choose another")
        if not 0 <= self.sunh_sue_protocol <= 255:
            raise ValueError("sunh_sue_protocol must be 0..255")
        for name in ("esun_transport", "afh_gen2_6_transport", "afh_gen2_12_transport"):
            if getattr(self, name) not in TRANSPORTS:
                raise ValueError(f"{name} must be one of {TRANSPORTS}")
        if self.afh_gen2_form not in ("12", "6"):
            raise ValueError('afh_gen2_form must be "12" or "6"')
        if self.txn_hdr_bytes not in (8, 16):
            raise ValueError("txn_hdr_bytes must be 8 or 16")
        if len(self.cos_to_tc) != 8 or not all(0 <= t <= 7 for t in self.cos_to_tc):
            raise ValueError("cos_to_tc needs 8 traffic classes 0..7")

    def with_(self, **changes: object) -> ScaleUpConfig:
        """A copy with some settings changed (validated)."""
        return replace(self, **changes)


DEFAULT_SCALEUP = ScaleUpConfig()

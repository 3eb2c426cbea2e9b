"""The header stacks of a simulated fabric's data packets: what a packet of a RoCEv2 fabric or
of an InfiniBand fabric carries besides its payload, and what its link adds on the wire.

* ``roce``: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 = 58 bytes (IBA Annex A17,
  RoCEv2); its link adds FCS 4, padding to 64, preamble/SFD 8 and IFG 12 per frame (IEEE
  802.3 3.1.1, 4.4.2).
* ``ib``: LRH 8 (IBA 7.7) + BTH 12 (IBA 9.2) + ICRC 4 (IBA 7.8.1) + VCRC 2 (IBA 7.8.2) =
  26 bytes; its link adds nothing [A].

The header bytes are measured on packets the codecs build (:func:`wire.build`,
:func:`wire.build_ib`): an RC RDMA WRITE MIDDLE carrying 1024 bytes, less the 1024.  Every
data packet of a message is counted so (the RETH of a message's first packet, 16 bytes, IBA
9.3.1, is not added: the simulator's packets do not tell the first from the others).  An IB
link carries the packet's bytes and nothing else [A]: its 8b/10b or 64b/66b line code runs
below the data rate (a 4x EDR link signals 103.125 Gb/s for 100 Gb/s of data), and the
start and end delimiters and idles of IBA's physical layer (Vol. 2) are not counted.

The largest payload is the largest InfiniBand MTU, 4096 bytes (:data:`IB_MTUS`; RoCEv2
uses the IB MTU, Annex A17), so a full packet is 4154 bytes on RoCEv2 and 4122 on IB
(:meth:`HeaderStack.frame_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .ib_stack import build_ib
from .overhead import FCS_BYTES, L1_BYTES, MIN_FRAME_WITH_FCS_BYTES, ROCE_MAX_PAYLOAD_BYTES
from .stack import build

__all__ = ["HeaderStack", "IB", "IB_MTUS", "ROCE", "STACKS", "header_stack"]

#: The InfiniBand MTUs, bytes of payload per packet (IBA Vol. 1: the 4-bit MTU codes 1..5 of
#: PortInfo's MTUCap and NeighborMTU, 14.2.5.6; Linux ``enum ib_mtu``, IB_MTU_256 ..
#: IB_MTU_4096, include/rdma/ib_verbs.h).
IB_MTUS = (256, 512, 1024, 2048, 4096)

_PROBE = 1024  # payload of the packets measured (a multiple of 4: no pad bytes)


@dataclass(frozen=True, slots=True)
class HeaderStack:
    """One stack (module docstring): ``name`` (``"roce"`` or ``"ib"``), ``label`` (what a
    legend says: ``"RoCE headers"``), ``layers`` (the headers, in order), ``header_bytes``
    per data packet, ``ethernet`` (the link adds Ethernet's framing) and
    ``max_payload_bytes``."""

    name: str
    label: str
    layers: str
    header_bytes: int
    ethernet: bool
    max_payload_bytes: int = ROCE_MAX_PAYLOAD_BYTES

    def frame_bytes(self, payload_bytes: int | None = None) -> int:
        """A data packet's bytes (FCS not counted) carrying ``payload_bytes`` (None: the
        largest payload)."""
        return (self.max_payload_bytes if payload_bytes is None else payload_bytes) + \
            self.header_bytes

    def wire_bytes(self, frame_bytes: int) -> int:
        """What a packet of ``frame_bytes`` occupies on its link: on Ethernet
        ``max(frame + 4 FCS, 64) + 8 preamble/SFD + 12 IFG``, on IB the packet itself."""
        if frame_bytes < 0:
            raise ValueError(f"frame_bytes must be >= 0, got {frame_bytes!r}")
        if self.ethernet:
            return max(frame_bytes + FCS_BYTES, MIN_FRAME_WITH_FCS_BYTES) + L1_BYTES
        return frame_bytes


def _roce_header_bytes() -> int:
    return len(build({"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_RDMA_WRITE_MIDDLE"},
                      "payload": {"length": _PROBE}})) - _PROBE


def _ib_header_bytes() -> int:
    return len(build_ib({"lrh": {}, "bth": {"opcode": "RC_RDMA_WRITE_MIDDLE"},
                         "payload": {"length": _PROBE}})) - _PROBE


#: RoCEv2 over IPv4 on Ethernet.
ROCE = HeaderStack("roce", "RoCE headers", "Eth + IPv4 + UDP + BTH + ICRC",
                   _roce_header_bytes(), True)
#: Native InfiniBand, local (no GRH).
IB = HeaderStack("ib", "IB headers", "LRH + BTH + ICRC + VCRC", _ib_header_bytes(), False)
#: The stacks by name.
STACKS: dict[str, HeaderStack] = {s.name: s for s in (ROCE, IB)}


def header_stack(name: str) -> HeaderStack:
    """The stack called ``name`` (ValueError naming the known ones)."""
    try:
        return STACKS[name]
    except KeyError:
        raise ValueError(f"unknown header stack {name!r}; known: {', '.join(STACKS)}") \
            from None

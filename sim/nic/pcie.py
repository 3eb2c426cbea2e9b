"""The GPU-NIC PCIe link's effective bandwidth, from generation, lanes and payload sizes.

A NIC moves RDMA data over PCIe in transaction layer packets (TLPs): it *writes* what it
receives into GPU memory (posted Memory Write TLPs, at most Max Payload Size each) and
*reads* what it sends (Memory Read requests of at most Max Read Request Size, answered by
Completion-with-data TLPs of at most MPS).  What is left of the raw rate for data:

``raw = GT/s x lanes x encoding``, then per TLP ``payload / (payload + TLP overhead + DLLPs)``,
then the SKP ordered sets.

Sources (all public):

* Rates and line coding: 2.5 / 5 GT/s with 8b/10b (Gen1, Gen2), 8 / 16 / 32 GT/s with
  128b/130b (Gen3-5), 64 GT/s PAM4 in 256-byte FLITs (Gen6) (PCI Express Base
  Specification, PCI-SIG; Intel AN 855 "Protocol Overhead" for the 8b/10b 20 %,
  Intel AN 708 "Understanding PCI Express Throughput" for 128b/130b's 1.56 %).
* TLP overhead: start/end framing, a 2-byte sequence number, a 3- or 4-DW header (12 or 16
  bytes; 4 DW for the 64-bit addresses of GPU memory) and a 4-byte LCRC, "5-7 dwords" per
  TLP (Intel AN 708 / AN 855).  Gen1/2 frame a TLP with 1-byte STP and END symbols; Gen3+
  with a 4-byte STP token and no END (PCIe Base Spec 3.0, 4.2.2.3), so 24 and 26 bytes with a
  16-byte header.  Completions carry a 3-DW (12-byte) header.
* DLLPs: 8 bytes each with framing (6-byte DLLP + 2 bytes SDP/END), Acks and UpdateFCs
  travelling opposite to the TLPs they answer (Intel AN 855); PLX's PEX 8532 data book
  (8.4.1.4) bounds them by 0 (one-way traffic) and 2 per TLP (an Ack and an UpdateFC for
  each TLP of a fully loaded opposite direction).  A NIC in a collective sends and receives
  at once, so the default is one 8-byte DLLP per TLP.
* SKP ordered sets: Gen1/2 one of 4 symbols every 1180-1538 symbol times, Gen3-5 one
  16-byte block every 370-375 blocks (PCIe Base Spec 4.2.7); we take the shortest interval.
* Gen6 FLIT mode: a 256-byte FLIT holds 236 bytes of TLPs, 6 of DLLP payload, 8 of CRC and 6
  of FEC (PCIe Base Spec 6.0, 4.2.3), so DLLPs and per-TLP framing, sequence numbers and
  LCRC cost nothing extra; the TLP header (16 bytes assumed) still does.  Gen6 SKP is not
  modelled.

Worked example: Gen5 x16 is 32 GT/s x 16 x 128/130 = 63.02 GB/s raw; at MPS 256 a write TLP
costs 256 + 26 + 8 bytes, 88.3 %, and SKPs 0.27 %: 55.5 GB/s of data each way (57.1 GB/s
with no DLLPs), inside the 50-60 GB/s measured for Gen5 NICs.  A 400G NIC needs 50 GB/s
and fits; an 800G NIC (100 GB/s) does not.

Applied by :class:`sim.nic.host.Host` (``pcie_write_bps``: a receive buffer drained at
:meth:`PcieLink.write_bps` with PFC backpressure; ``pcie_read_bps``: a per-host send pacer at
:meth:`PcieLink.read_bps`), from the ``pcie_*`` parameters (:func:`sim.scenarios.common.pcie_kw`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

__all__ = ["PcieLink", "GT_PER_S", "ENCODING", "pcie_write_bps"]

#: Transfer rate per lane, in GT/s, per generation (PCI-SIG).
GT_PER_S = {1: Fraction(5, 2), 2: Fraction(5), 3: Fraction(8), 4: Fraction(16),
            5: Fraction(32), 6: Fraction(64)}
#: Fraction of line bits that carry link-layer bytes: 8b/10b, 128b/130b, FLIT (PAM4 64 GT/s
#: carries one bit per transfer; FEC and CRC are counted in the FLIT below).
ENCODING = {1: Fraction(8, 10), 2: Fraction(8, 10), 3: Fraction(128, 130),
            4: Fraction(128, 130), 5: Fraction(128, 130), 6: Fraction(1)}
#: Link widths the specification defines.
LANES = (1, 2, 4, 8, 12, 16, 32)
#: Payload and read-request sizes a device may be configured to (128 B .. 4 KiB).
SIZES = (128, 256, 512, 1024, 2048, 4096)

_SEQ_BYTES = 2
_LCRC_BYTES = 4
_DLLP_BYTES = 8
_FLIT_BYTES = 256
_FLIT_TLP_BYTES = 236


@dataclass(frozen=True, slots=True)
class PcieLink:
    """One PCIe link (per direction).  ``dllps_per_tlp``: 8-byte DLLPs interleaved per TLP
    (0 one-way, 1 default, 2 the fully loaded bidirectional bound)."""

    gen: int
    lanes: int
    mps_bytes: int = 256
    mrrs_bytes: int = 512
    dllps_per_tlp: Fraction | int = 1
    header_bytes: int = 16

    def __post_init__(self) -> None:
        if self.gen not in GT_PER_S:
            raise ValueError(f"gen must be 1..6, got {self.gen!r}")
        if self.lanes not in LANES:
            raise ValueError(f"lanes must be one of {LANES}, got {self.lanes!r}")
        for name in ("mps_bytes", "mrrs_bytes"):
            if getattr(self, name) not in SIZES:
                raise ValueError(f"{name} must be one of {SIZES}, got {getattr(self, name)!r}")
        if not 0 <= self.dllps_per_tlp <= 2:
            raise ValueError(f"dllps_per_tlp must be in 0..2, got {self.dllps_per_tlp!r}")
        if self.header_bytes not in (12, 16):
            raise ValueError(f"header_bytes must be 12 or 16, got {self.header_bytes!r}")

    # -- the pieces ---------------------------------------------------------------
    def raw_bytes_per_s(self) -> Fraction:
        """Link-layer bytes per second after line coding (Gen5 x16: 63.02e9)."""
        return GT_PER_S[self.gen] * 10**9 * self.lanes * ENCODING[self.gen] / 8

    def tlp_overhead_bytes(self, header_bytes: int) -> int:
        """Bytes a TLP costs beyond its payload: framing, sequence number, header, LCRC
        (Gen6: only the header; the rest lives in the FLIT)."""
        if self.gen == 6:
            return header_bytes
        framing = 2 if self.gen <= 2 else 4
        return framing + _SEQ_BYTES + header_bytes + _LCRC_BYTES

    def skp_fraction(self) -> Fraction:
        """Share of the link SKP ordered sets take (shortest interval of the spec)."""
        if self.gen <= 2:
            return Fraction(4, 1180 + 4)
        if self.gen <= 5:
            return Fraction(1, 370 + 1)
        return Fraction(0)

    def _efficiency(self, payload: int, header: int) -> Fraction:
        dllp = 0 if self.gen == 6 else Fraction(self.dllps_per_tlp) * _DLLP_BYTES
        eff = Fraction(payload) / (payload + self.tlp_overhead_bytes(header) + dllp)
        eff *= 1 - self.skp_fraction()
        if self.gen == 6:
            eff *= Fraction(_FLIT_TLP_BYTES, _FLIT_BYTES)
        return eff

    # -- what a NIC gets ------------------------------------------------------------
    def write_efficiency(self) -> Fraction:
        """Data share of the raw rate for MPS-sized posted writes (NIC -> GPU memory)."""
        return self._efficiency(self.mps_bytes, self.header_bytes)

    def write_bytes_per_s(self) -> Fraction:
        return self.raw_bytes_per_s() * self.write_efficiency()

    def write_bps(self) -> int:
        """Posted-write data rate in whole bits per second (rounded down)."""
        return int(self.write_bytes_per_s() * 8)

    def read_bps(self) -> int:
        """Data rate of the completions answering the NIC's reads (GPU memory -> NIC), each
        MPS bytes with a 3-DW header, in whole bits per second (rounded down).  Read latency
        and the number of outstanding requests, which can limit reads further, are not
        modelled."""
        return int(self.raw_bytes_per_s() * self._efficiency(self.mps_bytes, 12) * 8)

    def read_request_bytes(self, data_bytes: int) -> int:
        """Bytes of Memory Read request TLPs (header only) the NIC sends the other way to
        read ``data_bytes``: one per MRRS bytes."""
        n = -(-data_bytes // self.mrrs_bytes)
        return n * (self.tlp_overhead_bytes(self.header_bytes) if self.gen != 6
                    else self.header_bytes)


def pcie_write_bps(gen: int, lanes: int, mps_bytes: int = 256,
                   dllps_per_tlp: Fraction | int = 1) -> int:
    """Shorthand: ``PcieLink(gen, lanes, mps_bytes, dllps_per_tlp=...).write_bps()``."""
    return PcieLink(gen, lanes, mps_bytes, dllps_per_tlp=dllps_per_tlp).write_bps()

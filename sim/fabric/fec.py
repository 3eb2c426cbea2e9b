"""Forward error correction: a link's raw (pre-FEC) bit error ratio, as ``mlxlink`` reports
it ("Raw Physical BER") or ``ethtool`` counts it (``rx_err_lane_N_phy`` / ``rx_bits_phy``),
turned into the frames the link loses.

The codes are Reed-Solomon over 10-bit symbols: ``n`` symbols a codeword, ``k`` of them
data, up to ``t`` symbol errors corrected:

* ``rs528``: RS(528,514), t = 7, "KR4" (IEEE 802.3 Clause 91: 100GBASE-R over four 25G NRZ
  lanes);
* ``rs544``: RS(544,514), t = 15, "KP4" (IEEE 802.3 Clause 119 for 200G and 400G, Clauses
  91/134/161 for 50G/100G PAM4 lanes, 802.3df for 800G; InfiniBand HDR and NDR run it too:
  mlxlink's ``--fec RS`` on HDR/NDR is RS(544,514), mstflint's
  ``mlxlink_commander.cpp``);
* ``ll272``: the low-latency RS(272,257+1), t = 7 (Ethernet Technology Consortium; mlxlink
  ``--fec LL`` on NDR);
* ``none``: no FEC: any bit error fails the frame's CRC (IEEE 802.3 3.2.9).

With bit errors independent at ratio ``ber`` a symbol is wrong with probability
``ps = 1 - (1 - ber)**10`` and a codeword is uncorrectable with probability
``P(Binomial(n, ps) > t)`` (the codeword error ratio, CER: the model of IEEE 802.3's FEC
studies: Cideciyan's formula as Anslow quotes it on the 802.3 reflector, 2012); the PCS
invalidates the blocks of an uncorrectable codeword, so every frame with bits in it is
lost.  A frame of ``W`` bytes on the wire spans about ``W / 640`` codewords (each carries
20 transcoded 257-bit blocks, 5,120 data bits; 320 bytes for the low-latency code) plus
``X``, the codewords interleaved on the link (2 at 200G and 400G, 4 at 800G: the IEEE
802.3df logic ad hoc as SONiC's FEC FLR design quotes it), so it is lost with probability
``1 - (1 - CER)**(W / 640 + X)``.

Real links are worse than independent errors (a PAM4 receiver's DFE makes bursts); the
model is the floor that the raw BER alone gives, not a prediction of burst loss.

On InfiniBand NDR and XDR, NVIDIA's physical-layer retransmission (PLR: mlxlink's "RS-FEC
(544,514) + PLR") resends a codeword the receiver could not correct instead of losing it:
:func:`frame_loss` then gives the probability a frame waits for a resend
(:mod:`sim.fabric.faults` delays it, and those after it, by the link's round trip).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["CODES", "FEC_NAMES", "FecCode", "codeword_error_ratio", "default_fec",
           "frame_loss", "interleave"]

#: data bytes an RS(n,514) codeword carries: 20 257-bit transcoded blocks of 256 data bits
PAYLOAD_BYTES = 640
#: bits a symbol
SYMBOL_BITS = 10


@dataclass(frozen=True, slots=True)
class FecCode:
    """A Reed-Solomon code: ``n`` symbols a codeword, ``k`` data symbols, ``t`` symbol
    errors corrected, ``label`` as mlxlink prints it."""

    name: str
    n: int
    k: int
    t: int
    label: str

    @property
    def payload_bytes(self) -> int:
        """Data bytes a codeword carries: its whole 257-bit transcoded blocks of 256 data
        bits (640 for k = 514, 320 for the low-latency code's 258)."""
        return self.k * SYMBOL_BITS // 257 * 32


CODES: dict[str, FecCode | None] = {
    "none": None,
    "rs528": FecCode("rs528", 528, 514, 7, "RS-FEC (528,514)"),
    "rs544": FecCode("rs544", 544, 514, 15, "RS-FEC (544,514)"),
    "ll272": FecCode("ll272", 272, 258, 7, "LL_RS-FEC (272,257+1)"),
}
#: what a fault's ``fec`` key takes
FEC_NAMES = ("auto", *CODES)


def default_fec(rate_bps: int, ib: bool) -> str:
    """The FEC a link of ``rate_bps`` runs by default: Ethernet 100G is four 25G NRZ lanes
    with RS(528,514), 200G and up PAM4 lanes with RS(544,514), slower links none (25G's
    optional Clause 108 RS-FEC left out); InfiniBand HDR (200G 4x) and up RS(544,514), EDR
    and slower none."""
    if rate_bps >= 200 * 10**9:
        return "rs544"
    if rate_bps >= 100 * 10**9 and not ib:
        return "rs528"
    return "none"


def interleave(rate_bps: int) -> int:
    """Codewords interleaved on a link: 4 at 800G and up, 2 at 200G and 400G, else 1."""
    if rate_bps >= 800 * 10**9:
        return 4
    return 2 if rate_bps >= 200 * 10**9 else 1


def codeword_error_ratio(ber: float, code: FecCode) -> float:
    """The probability a codeword of ``code`` has more than ``t`` wrong symbols when bits
    are wrong independently at ratio ``ber``."""
    if ber <= 0.0:
        return 0.0
    if ber >= 1.0:
        return 1.0
    ps = -math.expm1(SYMBOL_BITS * math.log1p(-ber))
    if ps >= 1.0:
        return 1.0
    lq = math.log1p(-ps)
    lp = math.log(ps)
    n, t = code.n, code.t

    def term(i: int) -> float:
        return math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                        + i * lp + (n - i) * lq)

    lower = math.fsum(term(i) for i in range(t + 1))
    if lower < 0.5:  # most codewords lost: 1 - P(at most t), the few terms below
        return max(0.0, 1.0 - lower)
    total = 0.0  # a small tail: summed itself (1 - P(at most t) would lose its digits)
    for i in range(t + 1, n + 1):
        x = term(i)
        total += x
        if x < total * 1e-17:
            break  # past the mode: every further term smaller still
    return min(total, 1.0)


def frame_loss(ber: float, wire_bytes: int, fec: str, rate_bps: int, ib: bool = False
               ) -> float:
    """The probability a frame of ``wire_bytes`` (on the wire: preamble and gap included on
    Ethernet) is lost on a link of ``rate_bps`` whose raw BER is ``ber``, through FEC
    ``fec`` (a name of :data:`CODES`, or ``"auto"``: :func:`default_fec`)."""
    if fec == "auto":
        fec = default_fec(rate_bps, ib)
    code = CODES[fec]
    if code is None:  # every bit must be right
        return -math.expm1(8 * wire_bytes * math.log1p(-ber)) if ber < 1 else 1.0
    cer = codeword_error_ratio(ber, code)
    if cer >= 1.0:
        return 1.0
    spans = wire_bytes / code.payload_bytes + interleave(rate_bps)
    return -math.expm1(spans * math.log1p(-cer))

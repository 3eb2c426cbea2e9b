"""MAC Control frames (EtherType 0x8808): IEEE 802.1Qbb PFC and IEEE 802.3x PAUSE.

Sources: IEEE 802.3-2022 clause 31 and Annex 31B (MAC Control, PAUSE opcode 0x0001,
pause_time in quanta of 512 bit times); IEEE 802.1Qbb-2011 / 802.1Q-2022 clause 36 and
Annex 31D of 802.3 (PFC opcode 0x0101, priority-enable vector, time[0..7]).  Both are sent
to 01:80:c2:00:00:01 and padded with zeros to the 60-byte minimum frame (without FCS).

Quanta are converted to time by formula, never a table: one quantum is 512 bit times, so
``quanta * 512 / rate_bps`` seconds.  At 100, 400 and 800 Gb/s that is exactly 5120, 1280
and 640 ps per quantum.
"""

from __future__ import annotations

from enum import IntEnum

from .spec import Field, HeaderSpec

__all__ = [
    "MAC_CONTROL", "PFC", "PAUSE", "MacControlOpcode", "PAUSE_DST", "QUANTUM_BITS",
    "quanta_to_ps", "ps_to_quanta", "quanta_to_ns",
]

#: Reserved multicast address of MAC Control PAUSE/PFC (IEEE 802.3 31B.1).
PAUSE_DST = "01:80:c2:00:00:01"
#: One pause quantum is 512 bit times (IEEE 802.3 31B.2).
QUANTUM_BITS = 512
_PS_PER_S = 10**12


class MacControlOpcode(IntEnum):
    """IEEE 802.3 Annex 31A opcodes this toolkit decodes (others are kept raw)."""

    PAUSE = 0x0001
    PFC = 0x0101


MAC_CONTROL = HeaderSpec(
    "mac_control",
    [Field("opcode", 16, "0x0001 PAUSE, 0x0101 PFC (Annex 31A)", enum=MacControlOpcode,
           default=MacControlOpcode.PFC)],
    title="MAC Control", source="IEEE 802.3-2022 31.4, Annex 31A",
    doc="2 bytes after EtherType 0x8808.",
)

PFC = HeaderSpec(
    "pfc",
    [
        Field("class_enable", 16, "priority-enable vector: bit n enables time[n]; the high "
              "byte is reserved (zero)"),
        Field("quanta", 16, "pause time per priority 0..7 in quanta (0 = resume / XON)",
              count=8),
    ],
    title="Priority-based Flow Control (PFC)",
    source="IEEE 802.1Qbb-2011 / 802.3-2022 Annex 31D",
    doc="18 bytes after the opcode, then 26 reserved zero bytes (shown as the frame trailer).",
)

PAUSE = HeaderSpec(
    "pause",
    [Field("quanta", 16, "pause time in quanta (0 = resume)")],
    title="802.3x PAUSE", source="IEEE 802.3-2022 Annex 31B",
    doc="2 bytes after the opcode, then 42 reserved zero bytes (shown as the frame trailer).",
)


def quanta_to_ps(quanta: int, rate_bps: int) -> int:
    """Pause duration in picoseconds for ``quanta`` at a link of ``rate_bps``.

    Exact for every standard Ethernet rate; otherwise rounded up to the next picosecond
    (a pause never ends early).
    """
    if rate_bps <= 0:
        raise ValueError("rate_bps must be positive")
    return -(-quanta * QUANTUM_BITS * _PS_PER_S // rate_bps)


def quanta_to_ns(quanta: int, rate_bps: int) -> int:
    """Pause duration in nanoseconds, rounded up (for pcap-level accounting)."""
    if rate_bps <= 0:
        raise ValueError("rate_bps must be positive")
    return -(-quanta * QUANTUM_BITS * 10**9 // rate_bps)


def ps_to_quanta(duration_ps: int, rate_bps: int) -> int:
    """Smallest quanta count whose pause lasts at least ``duration_ps`` (capped at 0xFFFF)."""
    if rate_bps <= 0:
        raise ValueError("rate_bps must be positive")
    q = -(-duration_ps * rate_bps // (QUANTUM_BITS * _PS_PER_S))
    return min(q, 0xFFFF)

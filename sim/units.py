"""Integer-exact time and size helpers for the simulator.

Time is an integer number of picoseconds (``_ps``) everywhere in ``sim``; rates are integer bits
per second (``_bps``).  At the standard Ethernet rates one byte lasts exactly 80 / 40 / 20 / 10 ps
(100 / 200 / 400 / 800 Gb/s), so serialisation times are exact there.  For any other rate the
result is rounded *up* to the next picosecond: a frame never finishes early, so a queue model
built on these numbers never sends faster than line rate.

Sources:
- Ethernet framing overhead: IEEE 802.3-2022 clause 3.1.1 (frame format: 4-byte FCS, 64-byte
  minimum frame including FCS; 7-byte preamble + 1-byte SFD) and clause 4.4.2 (interPacketGap of
  96 bit times = 12 bytes).
- Propagation delay: ``shared/specs/esun_sue.md`` section 5.3 ("≈4.6-5 ns/m" derived from
  3 m twinax and 30 m SMF budgets); we default to 5 ns/m = 5000 ps/m.
- PFC quantum (512 bit times): IEEE 802.3-2022 Annex 31B; computed by :mod:`wire.pfc`.
"""

from __future__ import annotations

from wire.pfc import quanta_to_ps

__all__ = [
    "PS_PER_S", "PS_PER_NS", "FCS_BYTES", "MIN_FRAME_BYTES", "PREAMBLE_SFD_BYTES", "IFG_BYTES",
    "DEFAULT_PS_PER_M", "ser_time_ps", "wire_bytes", "frame_ser_time_ps", "prop_delay_ps",
    "gbps", "quantum_ps",
]

#: Picoseconds per second.
PS_PER_S = 10**12
#: Picoseconds per nanosecond.
PS_PER_NS = 1000
#: Frame check sequence (IEEE 802.3 3.1.1).
FCS_BYTES = 4
#: Minimum frame size including FCS (IEEE 802.3 3.1.1 / 4.4.2 minFrameSize = 512 bits).
MIN_FRAME_BYTES = 64
#: 7-byte preamble + 1-byte start frame delimiter (IEEE 802.3 3.1.1).
PREAMBLE_SFD_BYTES = 8
#: Inter-packet gap, 96 bit times (IEEE 802.3 4.4.2).
IFG_BYTES = 12
#: Propagation delay per metre of cable (≈5 ns/m, shared/specs/esun_sue.md 5.3).
DEFAULT_PS_PER_M = 5000


def _check_rate(rate_bps: int) -> None:
    if rate_bps <= 0:
        raise ValueError(f"rate_bps must be positive, got {rate_bps!r}")


def ser_time_ps(nbytes: int, rate_bps: int) -> int:
    """Time to serialise ``nbytes`` at ``rate_bps``: ``nbytes * 8 * 10**12 / rate_bps`` ps.

    Exact at the standard rates (1 byte = 80/40/20/10 ps at 100/200/400/800 Gb/s); otherwise
    rounded up to the next whole picosecond, so a frame never finishes early.
    """
    _check_rate(rate_bps)
    if nbytes < 0:
        raise ValueError(f"nbytes must be >= 0, got {nbytes!r}")
    return -(-nbytes * 8 * PS_PER_S // rate_bps)


def wire_bytes(frame_bytes: int) -> int:
    """Bytes a frame occupies on the wire, given its length WITHOUT FCS.

    ``max(frame_bytes + 4 FCS, 64) + 8 preamble/SFD + 12 IFG`` (IEEE 802.3 3.1.1, 4.4.2):
    a 60-byte frame costs 84 bytes, a 1500-byte frame 1524.
    """
    if frame_bytes < 0:
        raise ValueError(f"frame_bytes must be >= 0, got {frame_bytes!r}")
    return max(frame_bytes + FCS_BYTES, MIN_FRAME_BYTES) + PREAMBLE_SFD_BYTES + IFG_BYTES


def frame_ser_time_ps(frame_bytes: int, rate_bps: int) -> int:
    """Time a frame (length without FCS) holds the link, overhead included (rounded up)."""
    return ser_time_ps(wire_bytes(frame_bytes), rate_bps)


def prop_delay_ps(cable_m: int, ps_per_m: int = DEFAULT_PS_PER_M) -> int:
    """Propagation delay of ``cable_m`` metres at ``ps_per_m`` (default 5 ns/m), in ps.

    A fractional length is allowed; the result is rounded up to a whole picosecond.
    """
    if cable_m < 0 or ps_per_m <= 0:
        raise ValueError("cable_m must be >= 0 and ps_per_m > 0")
    delay = cable_m * ps_per_m
    if isinstance(delay, int):
        return delay
    whole = int(delay)
    return whole if whole == delay else whole + 1


def gbps(n: int | float) -> int:
    """``n`` Gb/s as integer bits per second (``gbps(100) == 100_000_000_000``).

    Fractional ``n`` is accepted only when the result is a whole number of b/s.
    """
    bps = n * 10**9
    if isinstance(bps, float):
        if not bps.is_integer():
            raise ValueError(f"{n!r} Gb/s is not a whole number of b/s")
        bps = int(bps)
    _check_rate(bps)
    return bps


def ns_to_ps(ns: int | float) -> int:
    """A user-facing time in ns (int or float) as integer ps, rounded to the nearest ps."""
    return round(ns * 1_000)


def us_to_ps(us: int | float) -> int:
    """A user-facing time in us as integer ps (rounded)."""
    return round(us * 1_000_000)


def ms_to_ps(ms: int | float) -> int:
    """A user-facing time in ms as integer ps (rounded)."""
    return round(ms * 1_000_000_000)


def quantum_ps(rate_bps: int) -> int:
    """One PFC pause quantum (512 bit times) in ps: ``wire.pfc.quanta_to_ps(1, rate_bps)``."""
    _check_rate(rate_bps)
    return quanta_to_ps(1, rate_bps)

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
- Propagation delay: ≈4.6-5 ns/m, derived by us from the one-way latency budgets of OCP SUE
  v1.0 Fig. 22 as given by the MiracleFarms summary (477.6 ns with 3 m twinax, 747.6 ns with
  30 m SMF, 450 ns of it bridge + PHY + switch); besthub.dev "How to Compute Headroom ...
  Part 2" uses ≈5 ns/m of fibre.  We default to 5 ns/m = 5000 ps/m.
- PFC quantum (512 bit times): IEEE 802.3-2022 Annex 31B; computed by :mod:`wire.pfc`.
"""

from __future__ import annotations

import math
from numbers import Real

from wire.pfc import quanta_to_ps

__all__ = [
    "PS_PER_S", "PS_PER_NS", "FCS_BYTES", "MIN_FRAME_BYTES", "PREAMBLE_SFD_BYTES", "IFG_BYTES",
    "DEFAULT_PS_PER_M", "ser_time_ps", "wire_bytes", "frame_ser_time_ps", "prop_delay_ps",
    "gbps", "quantum_ps", "ns_to_ps", "us_to_ps", "ms_to_ps", "kb_to_bytes", "MAX_PS",
    "MAX_BYTES", "MAX_RATE_BPS", "BYTES_PER_KB", "UNIT_SUFFIXES", "quantity_problem",
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
#: Propagation delay per metre of cable (≈5 ns/m; sources in the module docstring).
DEFAULT_PS_PER_M = 5000
#: 1 KB = 1000 bytes in every ``*_kb`` parameter (SI kilo, as link rates are SI).
BYTES_PER_KB = 1000
#: The latest simulator time: times are int64 picoseconds (numpy ``int64`` columns of
#: timeseries.npz, events.jsonl), 2**63 - 1 ps, about 106.75 days.
MAX_PS = 2**63 - 1
#: The largest byte count (buffer, flow size, threshold): int64, as in the numpy counters.
MAX_BYTES = 2**63 - 1
#: The fastest link: 8 Tb/s, one byte per picosecond.  Above it a byte lasts less than the
#: simulator's time resolution (1 ps), so serialisation times would all round up to 1 ps.
MAX_RATE_BPS = 8 * 10**12


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

    Fractional ``n`` is accepted only when the result is a whole number of b/s; a rate that
    is not finite or above :data:`MAX_RATE_BPS` (8 Tb/s) is a ValueError.
    """
    _finite(n, "Gb/s")
    bps = n * 10**9
    if isinstance(bps, float):
        if not bps.is_integer():
            raise ValueError(f"{n!r} Gb/s is not a whole number of b/s")
        bps = int(bps)
    _check_rate(bps)
    if bps > MAX_RATE_BPS:
        raise ValueError(f"{n!r} Gb/s is above {MAX_RATE_BPS // 10**9} Gb/s (one byte per ps, "
                         f"the simulator's time resolution)")
    return bps


#: A parameter name's unit suffix -> (factor to the simulator's integer unit, the largest
#: integer value, what the limit is).  One table for every ``*_ms``/``*_kb``/... parameter
#: (:func:`quantity_problem`); longer suffixes are tried first.
UNIT_SUFFIXES: dict[str, tuple[int, int, str]] = {
    "_ps": (1, MAX_PS, "int64 ps, about 106 days"),
    "_ns": (PS_PER_NS, MAX_PS, "int64 ps, about 106 days"),
    "_us": (10**6, MAX_PS, "int64 ps, about 106 days"),
    "_ms": (10**9, MAX_PS, "int64 ps, about 106 days"),
    "_s": (PS_PER_S, MAX_PS, "int64 ps, about 106 days"),
    "_m": (DEFAULT_PS_PER_M, MAX_PS, "int64 ps of propagation, about 106 days"),
    "_bytes": (1, MAX_BYTES, "int64 bytes"),
    "_kb": (BYTES_PER_KB, MAX_BYTES, "int64 bytes"),
    "_bps": (1, MAX_RATE_BPS, "8000 Gb/s, one byte per ps"),
    "_gbps": (10**9, MAX_RATE_BPS, "8000 Gb/s, one byte per ps"),
}
_SUFFIXES = sorted(UNIT_SUFFIXES, key=len, reverse=True)
_INT64 = 2**63 - 1


def _finite(x: object, unit: str) -> None:
    if isinstance(x, bool) or not isinstance(x, Real):
        raise ValueError(f"{x!r} {unit}: expected a number")
    if isinstance(x, float) and not math.isfinite(x):
        raise ValueError(f"{x!r} {unit} is not a finite number")


def _to_int(x: int | float, factor: int, unit: str, limit: int, what: str) -> int:
    """``x * factor`` rounded to an integer, refusing non-finite values and results beyond
    ``limit`` (ValueError naming the value and its unit)."""
    _finite(x, unit)
    try:
        v = round(x * factor)
    except OverflowError:  # a float product that overflowed to inf
        v = limit + 1
    if abs(v) > limit:
        raise ValueError(f"{x!r} {unit} does not fit the simulator's {what}")
    return v


def ns_to_ps(ns: int | float) -> int:
    """A user-facing time in ns (int or float) as integer ps, rounded to the nearest ps.

    Not finite, or beyond :data:`MAX_PS` (int64 ps): ValueError."""
    return _to_int(ns, PS_PER_NS, "ns", MAX_PS, "integer time (int64 ps, about 106 days)")


def us_to_ps(us: int | float) -> int:
    """A user-facing time in us as integer ps (rounded; not finite or beyond int64 ps:
    ValueError)."""
    return _to_int(us, 10**6, "us", MAX_PS, "integer time (int64 ps, about 106 days)")


def ms_to_ps(ms: int | float) -> int:
    """A user-facing time in ms as integer ps (rounded; not finite or beyond int64 ps:
    ValueError)."""
    return _to_int(ms, 10**9, "ms", MAX_PS, "integer time (int64 ps, about 106 days)")


def kb_to_bytes(kb: int | float) -> int:
    """A user-facing size in KB (1 KB = 1000 bytes) as integer bytes (rounded; not finite or
    beyond int64 bytes: ValueError)."""
    return _to_int(kb, BYTES_PER_KB, "KB", MAX_BYTES, "byte counts (int64 bytes)")


def quantity_problem(name: str, value: object) -> str | None:
    """Why ``value`` cannot be parameter ``name`` of the simulator, or None.

    The one finiteness and range rule of every numeric parameter: a float must be finite;
    a name ending in a unit of :data:`UNIT_SUFFIXES` (``duration_ms``, ``size_kb``,
    ``rate_gbps`` ...) must convert to an integer that fits (int64 ps, int64 bytes,
    :data:`MAX_RATE_BPS`); any other integer must fit in int64.
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    suffix = next((s for s in _SUFFIXES if name.endswith(s)), None)
    if suffix is None:
        return None if abs(value) <= _INT64 else "must fit in a 64-bit integer"
    factor, limit, what = UNIT_SUFFIXES[suffix]
    try:
        v = abs(value) * factor
    except OverflowError:
        v = math.inf
    if v > limit:
        return f"too large: does not fit the simulator's {what}"
    return None


def quantum_ps(rate_bps: int) -> int:
    """One PFC pause quantum (512 bit times) in ps: ``wire.pfc.quanta_to_ps(1, rate_bps)``."""
    _check_rate(rate_bps)
    return quanta_to_ps(1, rate_bps)

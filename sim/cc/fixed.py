"""``fixed``: send at a constant rate (line rate unless ``rate_bps`` is given); ignores CNPs.
The baseline for PFC-only experiments."""

from __future__ import annotations

from sim.cc.base import RateControl

__all__ = ["FixedRate"]


class FixedRate(RateControl):
    reacts_to_tx = False
    def __init__(self, *, line_rate_bps: int, preset: str | None = None,
                 rate_bps: int | None = None) -> None:
        if preset is not None:
            raise ValueError("the fixed algorithm has no presets")
        rate = line_rate_bps if rate_bps is None else rate_bps
        if line_rate_bps <= 0 or rate <= 0:
            raise ValueError("rates must be positive")
        self._rate_bps = rate
        self.cnps = 0

    @property
    def rate_bps(self) -> int:
        return self._rate_bps

    def on_cnp(self, now_ps: int) -> None:
        self.cnps += 1  # counted, not acted on

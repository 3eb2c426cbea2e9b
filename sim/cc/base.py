"""The interface a sender's rate control implements (`fixed`, DCQCN's RP in sim/cc/dcqcn.py)."""

from __future__ import annotations

__all__ = ["RateControl"]


class RateControl:
    """Per-flow (per-QP) rate controller.  Times are integer picoseconds passed in.  A
    subclass defines ``rate_bps`` and the hooks it needs.

    ``reacts_to_tx = False`` tells the NIC that :meth:`on_tx` does nothing and the rate cannot
    change on a transmission, so it may skip the call on its hot path.

    An extension type in the compiled core (``sim/cc/base.pxd``), so that
    :class:`sim.cc.dcqcn.Dcqcn` can be one: it is not an ``abc.ABC`` (an extension type cannot
    have that metaclass), and a subclass without ``rate_bps`` fails when the rate is first
    read, not when it is made.
    """

    reacts_to_tx = True

    @property
    def rate_bps(self) -> int:
        """Current sending rate."""
        raise NotImplementedError(f"{type(self).__name__} must define rate_bps")

    @property
    def target_rate_bps(self) -> int:
        return self.rate_bps

    @property
    def alpha(self) -> float:
        return 0.0

    def on_tx(self, nbytes: int, now_ps: int) -> None:
        """``nbytes`` were sent at ``now_ps``."""

    def on_cnp(self, now_ps: int) -> None:
        """A CNP for this flow arrived at ``now_ps``."""

    def on_timer(self, now_ps: int) -> None:
        """The timer returned by :meth:`next_timer_ps` is due."""

    def next_timer_ps(self) -> int | None:
        """When :meth:`on_timer` must next run (None: no timer pending)."""
        return None

    def log_data(self) -> dict[str, object]:
        """State for tracing (aioquic's ``get_log_data``)."""
        return {"rate_bps": self.rate_bps, "target_rate_bps": self.target_rate_bps,
                "alpha": self.alpha}

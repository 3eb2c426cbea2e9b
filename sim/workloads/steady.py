"""A ring call's time from a few of its loops, once they repeat (flow fidelity).

NCCL moves a large ring call in loops (``runRing``, :mod:`sim.workloads.nccl`): every loop
but the last moves the same chunks between the same ranks, and only the last one's chunks
shrink to what is left.  At flow fidelity a call has no state but its flows' rates, the
GPUs' channels and NVLink ports and the FIFO slots between consecutive loops, so once the
pipeline is full a loop may repeat the one before exactly, every transfer posted and
received one fixed *period* later: then ``k`` more full loops add ``k`` periods and change
nothing else.  :func:`steady_period_ps` finds that in a call built with a few of its loops
(:func:`sim.workloads.nccl.truncated_count`: its first loops and its last one), and the
whole call's time is that call's time plus the missing loops' periods: exact, not an
estimate, because the loops it adds are the very repetition found.

It applies to rings (:data:`STEADY_ALGORITHMS`).  A tree's and an NVLS tree's loops drift
against each other instead (their channels slip by whole steps through the FIFO slots:
measured on 4 nodes of 8 GPUs, NVLS tree AllReduce of 1 GiB, loops 34 to 63 of 128, every
transfer 0.6 to 218 µs after its twin of the loop before, never one period), and at packet
fidelity queues, PFC and congestion control carry state from loop to loop: those run
whole.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["STEADY_ALGORITHMS", "STEADY_LOOPS", "STEADY_TOLERANCE_PS", "Steady",
           "steady_period_ps"]

#: algorithms whose loops are looked at (module docstring)
STEADY_ALGORITHMS = ("ring",)
#: consecutive loops that must each repeat the one before, one period later
STEADY_LOOPS = 3
#: how far (ps) a transfer may be from its twin plus the period: rates are floats and times
#: whole picoseconds
STEADY_TOLERANCE_PS = 2


class Steady(NamedTuple):
    """A steady state found: the period (ps) of one full loop, how far any transfer was
    from its twin plus the period (ps), the loops simulated and the call's loops."""

    period_ps: int
    spread_ps: int
    loops_run: int
    loops: int

    @property
    def extra_ps(self) -> int:
        """The time the loops not simulated add."""
        return (self.loops - self.loops_run) * self.period_ps


def steady_period_ps(run: Any) -> tuple[int, int] | None:
    """(period, spread) in ps when, among the full loops of a complete
    :class:`sim.workloads.collective.CollectiveRun` before its last two (whose ends the
    short last loop may change), the last :data:`STEADY_LOOPS` each repeat the loop before
    (every transfer posted and received one period after its twin, within
    :data:`STEADY_TOLERANCE_PS`), else None."""
    import numpy as np

    sch = run.schedule
    loop = np.fromiter((t.loop for t in sch.transfers), np.int64, len(sch.transfers))
    if any(f is None for f in run.finish_ps):
        raise ValueError("steady_period_ps: the run is not complete")
    start = np.asarray(run.start_ps, dtype=np.int64)
    finish = np.asarray(run.finish_ps, dtype=np.int64)
    last = int(loop.max(initial=-1)) - 2  # loops 0 .. last are looked at
    if last < STEADY_LOOPS:
        return None
    shifts, spread = [], 0
    for k in range(last - STEADY_LOOPS + 1, last + 1):
        a, b = loop == k - 1, loop == k
        if a.sum() != b.sum():
            return None
        d = np.concatenate((start[b] - start[a], finish[b] - finish[a]))
        lo, hi = int(d.min()), int(d.max())
        if hi - lo > STEADY_TOLERANCE_PS:
            return None
        shifts.append(hi)
        spread = max(spread, hi - lo)
    period = max(shifts)
    if period <= 0 or period - min(shifts) > STEADY_TOLERANCE_PS:
        return None
    return period, max(spread, period - min(shifts))

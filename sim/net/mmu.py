"""Switch MMU: shared buffer, ingress (port, PG) accounting, PFC XOFF/XON, headroom, egress bytes.

Sans-IO: an :class:`Mmu` holds byte counters and answers "what happens now" for one arriving or
departing packet; it never schedules anything. All sizes are integer bytes.

Memory layout (``MmuConfig``)::

    buffer_bytes = ports * pgs * reserved_bytes            (guaranteed minimum per (port, PG))
                 + ports * len(lossless_pgs) * headroom_bytes   (PFC headroom per lossless PG)
                 + shared_pool_bytes                        (everything else, shared by all)

Admission of ``nbytes`` arriving on ingress ``(port, pg)``, first rule that applies wins:

1. the PG's reserved part has room for the whole packet            -> ``"reserved"``
2. lossless PG already paused (XOFF)                               -> ``"headroom"`` if it fits,
                                                                      else drop ``"headroom_full"``
3. ``shared_pg + nbytes <= threshold`` and the pool has room        -> ``"shared"``
4. lossless PG (would cross the threshold or the pool is full)     -> ``"headroom"`` (and XOFF),
                                                                      else drop ``"headroom_full"``
5. lossy PG, pool full                                  -> drop ``"shared_full"``
6. lossy PG, over its threshold                         -> drop ``"lossy_over_threshold"``

A packet is admitted whole into one region (``Admission.where``), but a departure is taken from
the PG's counters headroom first, then shared, then reserved (HPCC's ns-3 switch MMU,
``SwitchMmu::RemoveFromIngressAdmission``): the counters describe how full the PG is, not which
frame came when.  This is what lets a paused PG resume as soon as its occupancy has fallen to the
XON level, while the frames it admitted to headroom (the newest, so the last to leave a FIFO
egress queue) are still queued.

Threshold on the PG's *shared* usage (the reserved and headroom parts do not count):

- ``static``: ``threshold = xoff_bytes``.
- ``dynamic`` (Choudhury-Hahne dynamic threshold, as used by Broadcom-style MMUs and by HPCC
  ``simulation/src/point-to-point/model/switch-mmu.cc``,
  github.com/alibaba-edu/High-Precision-Congestion-Control): ``threshold = floor(alpha * free)``
  with ``free = shared_pool_bytes - shared_used_bytes``. ``alpha`` is an exact
  :class:`fractions.Fraction`. Original: A. K. Choudhury, E. L. Hahne, "Dynamic Queue Length
  Thresholds for Shared-Memory Packet Switches", IEEE/ACM ToN 6(2), 1998. With k equally congested
  PGs each settles at alpha*F/(1 + k*alpha).

PFC state of a lossless (port, PG) is a two-state machine. The condition is classified from the
counters after every change, then looked up in :data:`PFC_TRANSITIONS` (h11 ``_state.py`` style:
the table is the rule):

- ``"above"``: ``headroom_used > 0`` or ``shared_pg > threshold``;
- ``"below_xon"``: ``headroom_used == 0`` and (``shared_pg == 0`` or
  ``shared_pg + xon_delta_bytes <= threshold``);
- ``"hysteresis"``: neither (the band between XON and XOFF).

The XON rule (resume only once the headroom is empty and the shared usage is at least
``xon_delta_bytes`` below the threshold, or zero) is HPCC's ``SwitchMmu::CheckShouldResume`` rule,
whose offset (``resume_offset``) is 3 KB (HPCC ``switch-mmu.cc``); IEEE 802.1Qbb states the same
hysteresis as ``bytes <= xon`` (docs/explanation/switch-buffer.md). The ``shared_pg == 0`` clause
keeps an empty PG from staying paused when the threshold is below the delta. In dynamic mode the
threshold moves with the free pool, so every lossless PG that holds shared or headroom bytes or is
paused is re-evaluated whenever the pool changes; a PG can therefore be paused or resumed by another
PG's traffic, and those transitions are reported too. Lossy PGs never pause.

Egress accounting (``egress_enqueue``/``egress_dequeue``) is separate bookkeeping per (egress port,
queue) for ECN marking, as in HPCC (egress counters are used only for ECN, never for admission).
"""

from __future__ import annotations

import operator
from collections import Counter
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

__all__ = [
    "PFC_TRANSITIONS",
    "XOFF",
    "XON",
    "Admission",
    "Mmu",
    "MmuConfig",
    "headroom_bytes",
]

XON = "xon"
XOFF = "xoff"

#: (state, condition) -> (new state, action). The action is the PFC change reported to the
#: caller (who sends the PAUSE frame), or None.
PFC_TRANSITIONS: dict[tuple[str, str], tuple[str, str | None]] = {
    (XON, "above"): (XOFF, XOFF),
    (XON, "hysteresis"): (XON, None),
    (XON, "below_xon"): (XON, None),
    (XOFF, "above"): (XOFF, None),
    (XOFF, "hysteresis"): (XOFF, None),
    (XOFF, "below_xon"): (XON, XON),
}

def _condition(headroom_bytes: int, shared_bytes: int, threshold_bytes: int,
               xon_delta_bytes: int) -> str:
    """The condition of :data:`PFC_TRANSITIONS` of a PG holding ``headroom_bytes`` and
    ``shared_bytes`` under an XOFF threshold of ``threshold_bytes`` (module docstring)."""
    if headroom_bytes > 0 or shared_bytes > threshold_bytes:
        return "above"
    if shared_bytes == 0 or shared_bytes + xon_delta_bytes <= threshold_bytes:
        return "below_xon"
    return "hysteresis"


#: PFC_TRANSITIONS as state -> condition -> (new state, action): the hot path's lookup
#: without a tuple key per packet.
_NEXT: dict[str, dict[str, tuple[str, str | None]]] = {}
for (_state, _cond), _to in PFC_TRANSITIONS.items():
    _NEXT.setdefault(_state, {})[_cond] = _to
del _state, _cond, _to

Where = Literal["reserved", "shared", "headroom"]
_REGIONS = frozenset(("reserved", "shared", "headroom"))
#: The largest byte count (counters and sizes are C int64 in the compiled core;
#: sim.units.MAX_BYTES).
_MAX_BYTES = 2**63 - 1
PauseChange = tuple[int, int, str]

_PS_PER_S = 10**12
_BITS_PER_BYTE = 8


def headroom_bytes(
    link_bps: int,
    cable_m: int,
    mtu_bytes: int,
    response_ps: int,
    *,
    propagation_ps_per_m: int = 5_000,
    interface_delay_ps: int = 0,
    pause_frame_bytes: int = 64,
    wire_overhead_bytes: int = 20,
) -> int:
    """PFC headroom per lossless (ingress port, PG), in bytes, by exact integer arithmetic.

    Headroom must absorb everything the upstream can still deliver after this switch decides to
    pause (the IEEE 802.1Qbb headroom budget as given by Cisco and besthub.dev "How to Compute
    Headroom ... Part 2"; Mellanox DOC-2623 gives the same shape: MTU_S + MTU_R + response + cable).
    Bytes arrive at ``link_bps`` for the whole interval, so each delay becomes
    ``delay_ps * link_bps / 8e12`` bytes:

    1. the frame whose arrival crosses XOFF (this model stores it in headroom):
       ``mtu + 20`` wire bytes (preamble/SFD + IFG = 20 B);
    2. the frame the local egress port is already sending, which the PAUSE must wait for:
       ``mtu + 20``;
    3. the PAUSE frame's own serialisation: ``64 + 20 = 84`` bytes (672 bit times);
    4. propagation both ways (PAUSE to the upstream, the last data back):
       ``2 * cable_m * propagation_ps_per_m`` (5 ns/m fibre by default);
    5. the upstream's response time (``response_ps``; 802.1Qbb bounds it, e.g. 201728 bit times
       at 100G) plus optional PHY/interface delays (``interface_delay_ps``);
    6. the frame the upstream has started when it acts on the PAUSE completes: ``mtu + 20``.

    ``H = 3 * (mtu + 20) + 84 + ceil((2 * cable_m * prop + response + interface) * R / 8e12)``.

    Worked example: 100 Gb/s, 100 m, 9216-byte MTU, 1 us response: frames 3 * 9236 = 27708,
    PAUSE 84, time terms (1_000_000 + 1_000_000) ps * 100e9 / 8e12 = 25000; H = 52792 bytes.
    """
    for name, value in (
        ("link_bps", link_bps),
        ("cable_m", cable_m),
        ("mtu_bytes", mtu_bytes),
        ("response_ps", response_ps),
        ("propagation_ps_per_m", propagation_ps_per_m),
        ("interface_delay_ps", interface_delay_ps),
        ("pause_frame_bytes", pause_frame_bytes),
        ("wire_overhead_bytes", wire_overhead_bytes),
    ):
        _check_int(name, value)
    if link_bps <= 0 or mtu_bytes <= 0:
        raise ValueError("link_bps and mtu_bytes must be positive")
    frames_bytes = 3 * (mtu_bytes + wire_overhead_bytes)
    pause_bytes = pause_frame_bytes + wire_overhead_bytes
    delay_ps = 2 * cable_m * propagation_ps_per_m + response_ps + interface_delay_ps
    in_flight_bytes = -(-delay_ps * link_bps // (_BITS_PER_BYTE * _PS_PER_S))
    return frames_bytes + pause_bytes + in_flight_bytes


def _check_int(name: str, value: object) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    if value > _MAX_BYTES:
        raise ValueError(f"{name} must fit in a 64-bit integer, got {value}")


@dataclass(frozen=True, slots=True)
class MmuConfig:
    """Static MMU parameters. Sizes in bytes; ``alpha`` is a dimensionless exact fraction.

    ``reserved_bytes``: guaranteed minimum per (ingress port, PG), every PG.
    ``headroom_bytes``: PFC headroom per lossless (ingress port, PG); see :func:`headroom_bytes`.
    ``xoff_bytes``: static threshold on a PG's shared usage (``xoff_mode="static"``).
    ``alpha``: dynamic threshold factor, threshold = alpha x free pool (``xoff_mode="dynamic"``).
    ``xon_delta_bytes``: hysteresis; resume when the headroom is empty and the shared usage is
    zero or shared usage + delta <= threshold.
    """

    buffer_bytes: int
    ports: int
    pgs: int = 8
    reserved_bytes: int = 0
    headroom_bytes: int = 0
    lossless_pgs: frozenset[int] = frozenset({3})
    xoff_mode: Literal["static", "dynamic"] = "static"
    xoff_bytes: int | None = None
    alpha: Fraction = Fraction(1, 8)
    xon_delta_bytes: int = 0

    def __post_init__(self) -> None:
        for name in ("buffer_bytes", "ports", "pgs", "reserved_bytes", "headroom_bytes",
                     "xon_delta_bytes"):
            _check_int(name, getattr(self, name))
        if self.ports < 1:
            raise ValueError("ports must be >= 1")
        if not 1 <= self.pgs <= 8:
            raise ValueError("pgs must be in 1..8")
        object.__setattr__(self, "lossless_pgs", frozenset(self.lossless_pgs))
        for pg in self.lossless_pgs:
            if not isinstance(pg, int) or not 0 <= pg < self.pgs:
                raise ValueError(f"lossless PG {pg!r} not in 0..{self.pgs - 1}")
        if self.xoff_mode == "static":
            if self.xoff_bytes is None:
                raise ValueError("xoff_mode='static' needs xoff_bytes")
            _check_int("xoff_bytes", self.xoff_bytes)
        elif self.xoff_mode == "dynamic":
            if isinstance(self.alpha, bool) or not isinstance(self.alpha, int | Fraction):
                raise TypeError("alpha must be an int or a fractions.Fraction (exact)")
            if self.alpha <= 0:
                raise ValueError("alpha must be > 0")
            object.__setattr__(self, "alpha", Fraction(self.alpha))
        else:
            raise ValueError(f"xoff_mode must be 'static' or 'dynamic', got {self.xoff_mode!r}")
        if self.shared_pool_bytes < 0:
            raise ValueError(
                "buffer_bytes is smaller than the reserved parts plus the headroom "
                f"({self.buffer_bytes - self.shared_pool_bytes} bytes)"
            )

    @property
    def shared_pool_bytes(self) -> int:
        """The shared pool: the buffer minus every reserved part and every headroom."""
        return (
            self.buffer_bytes
            - self.ports * self.pgs * self.reserved_bytes
            - self.ports * len(self.lossless_pgs) * self.headroom_bytes
        )


@dataclass(frozen=True, slots=True)
class Admission:
    """Result of :meth:`Mmu.admit`; ``where`` is None and ``reason`` set when dropped."""

    admitted: bool
    where: Where | None
    reason: str | None
    pause_changes: tuple[PauseChange, ...] = ()


#: The admissions that change no PFC state (the common case), one shared instance per region.
_ADMITTED: dict[str, Admission] = {w: Admission(True, w, None, ())
                                   for w in ("reserved", "shared", "headroom")}


class _Pg:
    """One ingress (port, PG)'s bytes by region and its PFC state (``watched``: in the MMU's
    ``_watch``, see :meth:`Mmu._update`)."""

    __slots__ = ("headroom_bytes", "reserved_bytes", "shared_bytes", "state", "watched")

    def __init__(self, reserved_bytes: int = 0, shared_bytes: int = 0, headroom_bytes: int = 0,
                 state: str = XON) -> None:
        self.reserved_bytes = reserved_bytes
        self.shared_bytes = shared_bytes
        self.headroom_bytes = headroom_bytes
        self.state = state
        self.watched = False

    def __repr__(self) -> str:
        return (f"_Pg(reserved_bytes={self.reserved_bytes!r}, shared_bytes={self.shared_bytes!r}"
                f", headroom_bytes={self.headroom_bytes!r}, state={self.state!r})")


class _Egress:
    """The bytes queued at one egress (port, queue)."""

    __slots__ = ("held_bytes",)

    def __init__(self) -> None:
        self.held_bytes = 0


class Mmu:
    """The switch MMU state for one :class:`MmuConfig`.

    ``shared_used_bytes``: the shared pool in use; ``offered_bytes``, ``admitted_bytes``,
    ``dropped_bytes``, ``released_bytes``: totals since construction (``resident_bytes`` is
    admitted minus released)."""

    def __init__(self, config: MmuConfig, shared_used_bytes: int = 0, offered_bytes: int = 0,
                 admitted_bytes: int = 0, dropped_bytes: int = 0,
                 released_bytes: int = 0) -> None:
        self.config = config
        self.shared_used_bytes = shared_used_bytes
        self.offered_bytes = offered_bytes
        self.admitted_bytes = admitted_bytes
        self.dropped_bytes = dropped_bytes
        self.released_bytes = released_bytes
        #: The watched PGs (see :meth:`_update`), ``(port, pg) -> _Pg``.
        self._watch: dict[tuple[int, int], _Pg] = {}
        self._drops: Counter[str] = Counter()
        c = config
        self._pgs: dict[tuple[int, int], _Pg] = {(p, g): _Pg() for p in range(c.ports)
                                                 for g in range(c.pgs)}
        #: The same _Pg objects by ``port * pgs + pg`` (the hot path's lookup: no tuple key).
        self._pg_at: list[_Pg] = [self._pgs[(p, g)] for p in range(c.ports)
                                  for g in range(c.pgs)]
        #: Egress counters by ``port * pgs + queue`` (queues and PGs are both 0..pgs-1).
        self._egress_at: list[_Egress] = [_Egress() for _ in range(c.ports * c.pgs)]
        # Hot-path copies of the (frozen) configuration; ``config`` is not to be replaced
        # after construction.
        self._nports = c.ports
        self._npgs = c.pgs
        self._reserved = c.reserved_bytes
        self._headroom_max = c.headroom_bytes
        self._lossless = c.lossless_pgs
        self._lossless_mask = sum(1 << g for g in c.lossless_pgs)  # bit g: PG g is lossless
        self._pool = c.shared_pool_bytes
        self._static = c.xoff_mode == "static"
        self._xoff = c.xoff_bytes if self._static else 0  # read only when static
        self._alpha_num = c.alpha.numerator
        self._alpha_den = c.alpha.denominator
        self._xon_delta = c.xon_delta_bytes

    def __repr__(self) -> str:
        return (f"Mmu(config={self.config!r}, shared_used_bytes={self.shared_used_bytes!r}, "
                f"offered_bytes={self.offered_bytes!r}, admitted_bytes={self.admitted_bytes!r}, "
                f"dropped_bytes={self.dropped_bytes!r}, released_bytes={self.released_bytes!r})")

    # -- queries ---------------------------------------------------------------------------
    def threshold_bytes(self) -> int:
        """The current XOFF threshold on a PG's shared usage."""
        c = self.config
        if c.xoff_mode == "static":
            assert c.xoff_bytes is not None
            return c.xoff_bytes
        free = c.shared_pool_bytes - self.shared_used_bytes
        return c.alpha.numerator * free // c.alpha.denominator

    def ingress_bytes(self, port: int, pg: int) -> int:
        s = self._get(port, pg)
        return s.reserved_bytes + s.shared_bytes + s.headroom_bytes

    def _held(self, port: int, pg: int) -> int:
        """:meth:`ingress_bytes` of an ingress known to exist (the switch's, in C)."""
        s = self._pg_at[port * self._npgs + pg]
        return s.reserved_bytes + s.shared_bytes + s.headroom_bytes

    def reserved_used_bytes(self, port: int, pg: int) -> int:
        return self._get(port, pg).reserved_bytes

    def shared_pg_bytes(self, port: int, pg: int) -> int:
        return self._get(port, pg).shared_bytes

    def headroom_used_bytes(self, port: int, pg: int) -> int:
        return self._get(port, pg).headroom_bytes

    def paused(self, port: int, pg: int) -> bool:
        return self._get(port, pg).state == XOFF

    @property
    def resident_bytes(self) -> int:
        return self.admitted_bytes - self.released_bytes

    @property
    def drops_by_reason(self) -> dict[str, int]:
        """Dropped bytes per reason."""
        return dict(self._drops)

    # -- ingress -----------------------------------------------------------------------------
    def admit(self, in_port: int, pg: int, nbytes: int) -> Admission:
        """Decide on a packet of ``nbytes`` arriving on ``(in_port, pg)``; update counters."""
        if type(nbytes) is not int or nbytes < 0 or nbytes > _MAX_BYTES:
            _check_int("nbytes", nbytes)
        if type(in_port) is not int or type(pg) is not int:
            in_port, pg = _ints(in_port, pg, "ingress", "PG")
        try:
            return self._admit(in_port, pg, nbytes)
        except OverflowError:  # compiled: beyond a C int (interpreted: _admit's ValueError)
            raise ValueError(f"no ingress (port {in_port}, PG {pg})") from None

    def _admit(self, port: int, pg: int, n: int) -> Admission:
        """:meth:`admit` of a checked size (ints: C ints in the compiled core, where the switch
        calls this directly)."""
        if not (0 <= port < self._nports and 0 <= pg < self._npgs):
            raise ValueError(f"no ingress (port {port}, PG {pg})")
        s = self._pg_at[port * self._npgs + pg]
        self.offered_bytes += n
        lossless = (self._lossless_mask >> pg) & 1
        where: Where | None = None
        reason: str | None = None
        if s.reserved_bytes + n <= self._reserved:
            where = "reserved"
        elif lossless and s.state == XOFF:
            if s.headroom_bytes + n <= self._headroom_max:
                where = "headroom"
            else:
                reason = "headroom_full"
        else:
            pool_ok = self.shared_used_bytes + n <= self._pool
            if pool_ok and s.shared_bytes + n <= self._threshold():
                where = "shared"
            elif lossless:
                if s.headroom_bytes + n <= self._headroom_max:
                    where = "headroom"
                else:
                    reason = "headroom_full"
            elif not pool_ok:
                reason = "shared_full"
            else:
                reason = "lossy_over_threshold"
        if where is None:
            assert reason is not None
            self.dropped_bytes += n
            self._drops[reason] += n
            return Admission(False, None, reason, ())
        self.admitted_bytes += n
        if where == "reserved":
            s.reserved_bytes += n
            changes = self._update(port, pg, s, False)
        elif where == "shared":
            s.shared_bytes += n
            self.shared_used_bytes += n
            changes = self._update(port, pg, s, True)
        else:
            s.headroom_bytes += n
            changes = self._update(port, pg, s, False)
        if not changes:
            return _ADMITTED[where]  # immutable, so one shared instance per region
        return Admission(True, where, None, changes)

    def _threshold(self) -> int:
        """The XOFF threshold now (:meth:`threshold_bytes`; a dynamic one above
        :data:`_MAX_BYTES` is that: no PG holds more)."""
        if self._static:
            return self._xoff
        # threshold_bytes() from the hot-path copies (exact Python-int arithmetic)
        return min(self._alpha_num * (self._pool - self.shared_used_bytes) // self._alpha_den,
                   _MAX_BYTES)

    def release(self, in_port: int, pg: int, nbytes: int,
                where: Where | None = None) -> tuple[PauseChange, ...]:
        """A packet of ``nbytes`` admitted on ``(in_port, pg)`` left the switch.

        The bytes are taken from the PG's counters in the order of HPCC's ns-3 switch MMU
        (``SwitchMmu::RemoveFromIngressAdmission`` in ``simulation/src/point-to-point/model/
        switch-mmu.cc`` of github.com/alibaba-edu/High-Precision-Congestion-Control): headroom
        first, then shared, then reserved, whatever region the packet was admitted to.  The PG's
        occupancy, not the departing packet's history, decides XON: a paused PG resumes once its
        headroom is empty and its shared use has fallen to ``threshold - xon_delta_bytes``,
        although its newest (headroom) frames are still queued.  ``where`` (the packet's
        ``Admission.where``) is checked but not used for the accounting."""
        if type(nbytes) is not int or nbytes < 0 or nbytes > _MAX_BYTES:
            _check_int("nbytes", nbytes)
        if type(in_port) is not int or type(pg) is not int:
            in_port, pg = _ints(in_port, pg, "ingress", "PG")
        if where is not None and where not in _REGIONS:
            if 0 <= in_port < self._nports and 0 <= pg < self._npgs:
                raise ValueError(f"unknown region {where!r}")
        try:
            return self._release(in_port, pg, nbytes)
        except OverflowError:  # compiled: beyond a C int (interpreted: _release's ValueError)
            raise ValueError(f"no ingress (port {in_port}, PG {pg})") from None

    def _release(self, port: int, pg: int, n: int) -> tuple[PauseChange, ...]:
        """:meth:`release` of a checked size (C ints in the compiled core: the switch's call)."""
        if not (0 <= port < self._nports and 0 <= pg < self._npgs):
            raise ValueError(f"no ingress (port {port}, PG {pg})")
        s = self._pg_at[port * self._npgs + pg]
        hdrm = s.headroom_bytes
        shared = s.shared_bytes
        if n > hdrm + shared + s.reserved_bytes:
            raise ValueError(
                f"release of {n} B from ({port}, {pg}): it holds "
                f"{hdrm + shared + s.reserved_bytes} B"
            )
        self.released_bytes += n
        if n <= hdrm:
            s.headroom_bytes = hdrm - n
            return self._update(port, pg, s, False)
        rest = n - hdrm
        s.headroom_bytes = 0
        if rest <= shared:
            from_shared = rest
        else:
            from_shared = shared
            s.reserved_bytes -= rest - shared
        if not from_shared:
            return self._update(port, pg, s, False)
        s.shared_bytes = shared - from_shared
        self.shared_used_bytes -= from_shared
        return self._update(port, pg, s, True)

    # -- PFC state machine ---------------------------------------------------------------------
    def condition(self, port: int, pg: int) -> str:
        """Classify ``(port, pg)`` for :data:`PFC_TRANSITIONS`."""
        s = self._get(port, pg)
        return _condition(s.headroom_bytes, s.shared_bytes, self._threshold(), self._xon_delta)

    def _update(self, port: int, pg: int, s: _Pg, pool_changed: bool
                ) -> tuple[PauseChange, ...]:
        """The PFC transitions after ``(port, pg)`` (its :class:`_Pg` ``s``) changed.  The
        PGs that may pause or resume are in ``_watch`` (each flagged ``watched``): a lossless
        PG from its first change until it is XON and empty again.

        With a dynamic threshold every change of the shared pool moves every watched PG's
        threshold, so each is looked at again, in (port, PG) order (:meth:`condition`).  A PG
        other than ``s`` has not changed since it was last looked at, so it is XOFF or holds
        shared or headroom bytes; when no watched PG crosses its XOFF or XON line at the new
        threshold (one pass over them; at most ``s`` leaves the watch) nothing else changes
        and the ordered pass is skipped: the same result, at about the static threshold's
        cost."""
        dynamic_sweep = pool_changed and not self._static
        watch = self._watch
        if (self._lossless_mask >> pg) & 1:
            if not s.watched:
                s.watched = True
                watch[(port, pg)] = s
        elif not dynamic_sweep and not s.watched:
            return ()  # a lossy PG never pauses and moved no one else's threshold
        threshold = self._threshold()
        delta = self._xon_delta
        if not dynamic_sweep:  # only this PG can change (it is watched here)
            shared = s.shared_bytes
            new_state, action = _NEXT[s.state][_condition(s.headroom_bytes, shared, threshold,
                                                          delta)]
            s.state = new_state
            if new_state == XON and shared == 0 and s.headroom_bytes == 0:
                s.watched = False
                del watch[(port, pg)]
            return () if action is None else ((port, pg, action),)
        leaves = False
        for p in watch.values():
            shared = p.shared_bytes
            if p.state == XON:
                if p.headroom_bytes > 0 or shared > threshold:
                    break  # it pauses
                if shared == 0 and p.headroom_bytes == 0:
                    if p is not s:
                        break  # (cannot be: it left the watch when it became so)
                    leaves = True
            elif p.headroom_bytes == 0 and (shared == 0 or shared + delta <= threshold):
                break  # it resumes
        else:
            if leaves:
                s.watched = False
                del watch[(port, pg)]
            return ()
        changes: list[PauseChange] = []
        for key in sorted(watch):
            p = watch[key]
            shared = p.shared_bytes
            new_state, action = _NEXT[p.state][_condition(p.headroom_bytes, shared, threshold,
                                                          delta)]
            p.state = new_state
            if action is not None:
                changes.append((key[0], key[1], action))
            if new_state == XON and shared == 0 and p.headroom_bytes == 0:
                p.watched = False
                del watch[key]
        return tuple(changes)

    # -- egress (ECN) ---------------------------------------------------------------------------
    def egress_enqueue(self, port: int, queue: int, nbytes: int) -> int:
        """Count ``nbytes`` into egress ``(port, queue)``; returns the new queue bytes."""
        if type(nbytes) is not int or nbytes < 0 or nbytes > _MAX_BYTES:
            _check_int("nbytes", nbytes)
        return self._egress_add(self._egress_index(port, queue), nbytes)

    def _egress_add(self, i: int, n: int) -> int:
        """:meth:`egress_enqueue` at index ``i`` (:meth:`_egress_index`) of a checked size."""
        eg = self._egress_at[i]
        new = eg.held_bytes + n
        if new > _MAX_BYTES or new < 0:  # (a C int64 wraps negative)
            raise ValueError(f"egress ({i // self._npgs}, {i % self._npgs}) would hold more "
                             f"than {_MAX_BYTES} B")
        eg.held_bytes = new
        return new

    def egress_dequeue(self, port: int, queue: int, nbytes: int) -> int:
        """Remove ``nbytes`` from egress ``(port, queue)``; returns the new queue bytes."""
        if type(nbytes) is not int or nbytes < 0 or nbytes > _MAX_BYTES:
            _check_int("nbytes", nbytes)
        return self._egress_sub(self._egress_index(port, queue), nbytes)

    def _egress_sub(self, i: int, n: int) -> int:
        """:meth:`egress_dequeue` at index ``i`` (:meth:`_egress_index`) of a checked size."""
        eg = self._egress_at[i]
        held = eg.held_bytes
        if n > held:
            raise ValueError(f"egress ({i // self._npgs}, {i % self._npgs}) holds {held} B, "
                             f"cannot dequeue {n}")
        eg.held_bytes = held - n
        return held - n

    def egress_bytes(self, port: int, queue: int) -> int:
        return self._egress_at[self._egress_index(port, queue)].held_bytes

    # -- helpers -------------------------------------------------------------------------------
    def _get(self, port: int, pg: int) -> _Pg:
        try:
            return self._pgs[(port, pg)]
        except KeyError:
            raise ValueError(f"no ingress (port {port}, PG {pg})") from None

    def _egress_index(self, port: int, queue: int) -> int:
        """Where egress ``(port, queue)`` is counted; ValueError for no such queue."""
        if type(port) is not int or type(queue) is not int:
            port, queue = _ints(port, queue, "egress", "queue")
        try:
            return self._queue_at(port, queue)
        except OverflowError:  # compiled: beyond a C int (interpreted: _queue_at's ValueError)
            raise ValueError(f"no egress (port {port}, queue {queue})") from None

    def _queue_at(self, port: int, queue: int) -> int:
        """:meth:`_egress_index` of ints (C ints in the compiled core: the switch's call)."""
        if not (0 <= port < self._nports and 0 <= queue < self._npgs):
            raise ValueError(f"no egress (port {port}, queue {queue})")
        return port * self._npgs + queue


def _ints(port: object, index: object, what: str, name: str) -> tuple[int, int]:
    """``(port, index)`` as ints (bools and numpy integers are ints); else ValueError, as
    for a port or queue that does not exist."""
    try:
        return operator.index(port), operator.index(index)  # type: ignore[arg-type]
    except TypeError:
        raise ValueError(f"no {what} (port {port}, {name} {index})") from None

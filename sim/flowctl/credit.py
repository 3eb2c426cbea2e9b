"""Credit-based link-level flow control (CBFC): the sender's counters and the receiver's
answers (credit returns) of one link direction.

Credit-based flow control (CBFC, UEC 1.0 Sec. 5.2 via the SAI CBFC document,
github.com/opencomputeproject/SAI ``doc/CBFC/SAI-Credit_Based_Flow_Control.md``), at message
granularity ([A], docs/explanation/sue.md section CBFC), when the XPUs and the switch are given a
:class:`CbfcConfig`: every link direction is a :class:`CreditPort` (switch egress) or
:class:`CreditXpuPort` (XPU egress) that starts a frame of a credited class (VC = traffic class; the
model's VC space is the 8 TCs) only if ``CU + pkt_credits <= CL``; the receiver frees the credits
when the frame leaves its buffer (switch: when it starts leaving the egress queue; XPU: on receipt)
and returns them in a CF_Update (no bandwidth: CtlOS replace idle) ``prop_ps`` later, at most once
per ``min_spacing_bytes`` of link time per VC.  docs/explanation/sue.md, section "Credit-based
flow control".

May import the kernel only (a port is reached through the attributes it shares with
:class:`sim.net.port.Port`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sim.engine import Engine, Timer
from sim.packet import SimPacket

__all__ = ["CbfcConfig", "CreditFlowControl", "cbfc_credits", "cbfc_free", "cbfc_lose",
           "FCS_BYTES"]

#: Ethernet FCS bytes: CBFC's ``pkt_len`` counts the frame from DA to FCS.
FCS_BYTES = 4


def cbfc_credits(nbytes: int, credit_bytes: int, overhead_bytes: int = 0) -> int:
    """``pkt_credits = ceil((pkt_len + PktOvhd) / CreditSize)`` (SAI CBFC document), ``pkt_len``
    = ``nbytes`` (frame without FCS, the simulator's unit) + 4 FCS; at least 1."""
    return max(1, -(-(nbytes + FCS_BYTES + overhead_bytes) // credit_bytes))


@dataclass(frozen=True)
class CbfcConfig:
    """CBFC settings of every credited link direction.  Defaults are the SAI CBFC defaults (SAI
    ``doc/CBFC/SAI-Credit_Based_Flow_Control.md``) except ``limit_credits`` (the receiver buffer per
    VC per link, a scenario choice) and ``vcs``.

    ``limit_credits``: CL, per VC, in credits; ``credit_bytes``: CreditSize (SAI 128 B);
    ``min_spacing_bytes``: CF_min_spacing (SAI 6400 B, >= 800): a VC's CF_Update goes at most
    once per this many bytes of link time; ``overhead_bytes``: PktOvhd (SAI range -16..127;
    0 here); ``cc_update_ps``: the CC_Update timer (SAI 256 us), which only matters when
    frames are lost on a link (their credits leak until the next CC_Update resyncs them);
    ``vcs``: the traffic classes under credit control (the others are not credited)."""

    limit_credits: int
    credit_bytes: int = 128
    min_spacing_bytes: int = 6400
    overhead_bytes: int = 0
    cc_update_ps: int = 256_000_000
    vcs: tuple[int, ...] = (3, 6)  # sim.scaleup.framing DATA_TC, ACK_TC

    def __post_init__(self) -> None:
        if self.credit_bytes < 1:
            raise ValueError("credit_bytes must be >= 1")
        if self.limit_credits < 1:
            raise ValueError("limit_credits must be >= 1")
        if self.min_spacing_bytes < 800:
            raise ValueError("min_spacing_bytes must be >= 800 (SAI CF_min_spacing minimum)")
        if not -16 <= self.overhead_bytes <= 127:
            raise ValueError("overhead_bytes must be in -16..127 (SAI packet overhead)")
        if self.cc_update_ps < 1:
            raise ValueError("cc_update_ps must be >= 1")
        if not self.vcs or any(not 0 <= v < 8 for v in self.vcs):
            raise ValueError("vcs must be traffic classes 0..7")

    def credits(self, nbytes: int) -> int:
        return cbfc_credits(nbytes, self.credit_bytes, self.overhead_bytes)


class CreditFlowControl:
    """CBFC, a mixin for an egress :class:`sim.net.port.Port` (``class CreditPort(
    CreditFlowControl, Port)``): the link's gate and sender counters plus, for the same
    link, the receiver's freed-but-unreported counters (kept here: one object per link
    direction; the receiver reports through :meth:`freed` / :meth:`lost`).

    Sender: ``credits_used[vc]`` (CU: Credits Consumed - Credits Freed as last reported; the
    20-bit cyclic counters of the wire are not modelled, only their difference) and
    ``credit_limit[vc]`` (CL).  A credited class whose head frame does not fit is masked from
    the port's own scheduler exactly like a paused class (work conserving for the others);
    frames already started complete.  Credits are charged when a frame starts (dequeue)."""

    # The port's public attributes and methods used here (sim.net.port.Port).
    engine: Engine
    prop_ps: int
    rate_bps: int
    on_dequeue: Callable[[int, SimPacket], None] | None
    add_gate: Callable[[Any], None]
    wake: Callable[[int], None]

    def __init__(self, *args: Any, cbfc: CbfcConfig, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.cbfc = cbfc
        vcs = tuple(sorted(set(cbfc.vcs)))
        self._credited = vcs
        #: The classes this gate governs (:class:`sim.flowctl.base.Gate`).
        self.classes = vcs
        self.credit_limit = [cbfc.limit_credits if tc in vcs else 0 for tc in range(8)]
        self.credits_used = [0] * 8
        self.max_credits_used = [0] * 8
        #: Credit-blocking episodes (a class found blocked after it was not).
        self.cbfc_stalls = 0
        self._stalled = [False] * 8
        # receiver side of this link
        self.unreported = [0] * 8
        self._cf_last_ps: list[int | None] = [None] * 8
        self._cf_timer: list[Timer | None] = [None] * 8
        self.cf_updates = 0
        self.leaked = [0] * 8
        self.cc_updates = 0
        self._cc_timer: Timer | None = None
        self._spacing_ps = -(-cbfc.min_spacing_bytes * 8 * 10**12 // self.rate_bps)
        self._owner_dequeue = self.on_dequeue
        self.on_dequeue = self._cbfc_dequeue
        self.add_gate(self)

    # ------------------------------------------------------------------ sender
    def credit_blocked(self, tc: int, nbytes: int) -> bool:
        """True (and a stall counted if this starts one) when a frame of ``nbytes`` on class
        ``tc`` could not start now for lack of credits."""
        if tc not in self._credited:
            return False
        if self.credits_used[tc] + self.cbfc.credits(nbytes) > self.credit_limit[tc]:
            if not self._stalled[tc]:
                self._stalled[tc] = True
                self.cbfc_stalls += 1
            return True
        self._stalled[tc] = False
        return False

    def blocked(self, tc: int, nbytes: int) -> bool:
        """The gate (:class:`sim.flowctl.base.Gate`): :meth:`credit_blocked`."""
        return self.credit_blocked(tc, nbytes)

    def _cbfc_dequeue(self, index: int, pkt: SimPacket) -> None:
        if self._owner_dequeue is not None:
            self._owner_dequeue(index, pkt)  # the receiver side frees the previous link first
        tc = pkt.tc
        if tc in self._credited:  # MAC Control frames never reach on_dequeue
            n = self.cbfc.credits(pkt.nbytes)
            used = self.credits_used[tc] + n
            self.credits_used[tc] = used
            if used > self.max_credits_used[tc]:
                self.max_credits_used[tc] = used
            pkt.fc = (self, tc, n)

    def _cf_arrive(self, tc: int, n: int) -> None:
        """A CF_Update (or a CC_Update resync) reaches the sender: ``n`` credits back."""
        self.credits_used[tc] -= n
        self._credits_back(tc)

    def _credits_back(self, tc: int) -> None:
        self.wake(tc)

    # ---------------------------------------------------------------- receiver
    def freed(self, tc: int, n: int) -> None:
        """The receiver freed ``n`` credits of VC ``tc`` (the frame left its buffer).  They are
        reported in a CF_Update now if the VC's last one was at least ``min_spacing_bytes`` of
        link time ago, else when that spacing has passed (with whatever accrued meanwhile)."""
        self.unreported[tc] += n
        if self._cf_timer[tc] is not None:
            return
        now = self.engine.now_ps
        last = self._cf_last_ps[tc]
        if last is None or now - last >= self._spacing_ps:
            self._cf_send(tc)
        else:
            self._cf_timer[tc] = self.engine.schedule(last + self._spacing_ps, self._cf_send,
                                                      tc, priority=1)

    def _cf_send(self, tc: int) -> None:
        self._cf_timer[tc] = None
        n = self.unreported[tc]
        if not n:
            return
        self.unreported[tc] = 0
        self._cf_last_ps[tc] = self.engine.now_ps
        self.cf_updates += 1
        self.engine.schedule_in(self.prop_ps, self._cf_arrive, tc, n)

    def lost(self, tc: int, n: int) -> None:
        """A frame holding ``n`` credits of ``tc`` was lost on the link: the receiver never
        frees them; the sender's next CC_Update (every ``cc_update_ps`` on a grid from t = 0)
        lets the receiver see the gap and return them (one round trip later)."""
        self.leaked[tc] += n
        if self._cc_timer is None:
            period = self.cbfc.cc_update_ps
            at = (self.engine.now_ps // period + 1) * period
            self._cc_timer = self.engine.schedule(at, self._cc_update)

    def _cc_update(self) -> None:
        self._cc_timer = None
        self.cc_updates += 1
        for tc in range(8):
            n = self.leaked[tc]
            if n:
                self.leaked[tc] = 0
                self.engine.schedule_in(2 * self.prop_ps, self._cf_arrive, tc, n)




def cbfc_free(pkt: SimPacket) -> None:
    """The receiver of ``pkt`` frees its credits (no-op without CBFC)."""
    info = getattr(pkt, "fc", None)
    if info is not None:
        pkt.fc = None
        info[0].freed(info[1], info[2])


def cbfc_lose(pkt: SimPacket) -> None:
    """``pkt`` was lost on its link: its credits leak until a CC_Update (no-op without CBFC)."""
    info = getattr(pkt, "fc", None)
    if info is not None:
        pkt.fc = None
        info[0].lost(info[1], info[2])


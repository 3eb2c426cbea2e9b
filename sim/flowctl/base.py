"""The one link-level flow-control interface, shared by switch, NIC and XPU ports.

A link direction has a **sender** half, consulted by the egress port before it starts a
data frame, and a **receiver** half at the far end that answers it:

* **Gate** (sender): ``classes`` (the traffic classes it governs) and ``blocked(tc, nbytes)``
  (True: a frame of ``nbytes`` on ``tc`` may not start now).  A port holds one gate per link
  (:meth:`sim.net.port.Port.add_gate`); a blocked class is skipped by the port's scheduler
  like a paused one (work conserving for the others); a frame already started completes.
  MAC Control frames are never gated.
* **Wake**: when a blocked class may start again the implementation calls the port's
  :meth:`~sim.net.port.Port.wake` (and its owner's resume hook, e.g. the XPU's packer).
* **Receiver**: PFC answers from the buffer state of the ingress (port, priority group):
  XOFF/XON frames (:class:`sim.flowctl.pfc.PfcResponder`, fed by the MMU's transitions);
  the sender side of PFC is the port's pause timers (:meth:`sim.net.port.Port.pause`, the hot
  path, kept in the port).  Credits answer with credit returns when a frame leaves the
  receiver's buffer (:meth:`CreditReceiver.freed`, :meth:`CreditReceiver.lost`;
  :mod:`sim.flowctl.credit`).

Per-VL InfiniBand credits (InfiniBand Architecture Specification Vol. 1, 7.9, link
layer flow control: 64-byte blocks, FCCL/FCTBS flow-control packets, one buffer per VL) are
the same shape: :class:`sim.flowctl.ib.IbLink` is a gate over the VLs and the receiver of
its link (ABR, FCCL), attached to any port by composition (:func:`sim.flowctl.ib.attach_ib`).

Which one a link uses is chosen per link: :data:`FLOW_CONTROLS`, ``Fabric.connect(...,
flow_control=)`` and fabric files' ``[links] flow_control``.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["FLOW_CONTROLS", "CreditReceiver", "Gate", "check_flow_control"]

#: The link-level flow-control kinds a link may use: ``"pfc"`` (priority pause; also "no
#: flow control" when the switch's PFC is off), ``"credit"`` (credit-based, CBFC) and
#: ``"ib"`` (InfiniBand per-VL credits, :mod:`sim.flowctl.ib`).
FLOW_CONTROLS = ("pfc", "credit", "ib")


class Gate(Protocol):
    """Sender half: consulted by an egress port before it starts a data frame."""

    classes: tuple[int, ...]

    def blocked(self, tc: int, nbytes: int) -> bool:
        """True when a frame of ``nbytes`` on class ``tc`` may not start now."""
        ...

    # Optional: ``waiting(tc, nbytes)``, the same answer without side effects (stall
    # counters), read by the deadlock detector (sim.health.deadlock).


class CreditReceiver(Protocol):
    """Receiver half of a credited link: told when a frame's buffer is freed or lost."""

    def freed(self, tc: int, n: int) -> None: ...

    def lost(self, tc: int, n: int) -> None: ...


def check_flow_control(name: object) -> str:
    """``name`` if it is one of :data:`FLOW_CONTROLS`, else ValueError naming them."""
    if name not in FLOW_CONTROLS:
        raise ValueError(f"flow_control must be one of {list(FLOW_CONTROLS)}, got {name!r}")
    return name  # type: ignore[return-value]

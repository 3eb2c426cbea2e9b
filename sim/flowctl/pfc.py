"""PFC (IEEE 802.1Qbb priority-based flow control; IEEE 802.3 Annex 31B PAUSE): the frames,
their effect on the port they arrive on, and the receiver half that sends them.

* :func:`pfc_packet` builds a real 802.1Qbb frame (``wire.build``) pausing, or with quanta 0
  resuming, one priority.
* :func:`apply_pause`: a received PFC or PAUSE frame sets the pause timers of the egress port
  it arrived on (:meth:`sim.net.port.Port.pause`: the sender half of PFC, the port's gate).
* :class:`PfcResponder`: the receiver half on a switch, turning the MMU's XOFF/XON
  transitions of an ingress (port, priority group) into frames sent out of that port ahead of
  data, refreshed every half pause time while XOFF lasts.

May import the kernel and wire only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sim.addresses import node_mac
from sim.engine import Timer
from sim.events import PauseSent
from sim.packet import NOT_ECT, PRIORITIES, SimPacket
from wire import build
from wire.ethernet import ETHERNET, VLAN_TPIDS, EtherType, payload_start
from wire.pfc import quanta_to_ps

__all__ = ["PfcResponder", "apply_pause", "is_mac_control", "pfc_packet"]

#: The MMU's transition names (:data:`sim.net.mmu.XOFF` / ``XON``).
_XOFF = "xoff"


def pfc_packet(pkt_id: int, now_ps: int, node_id: int, port: int, prio: int,
               quanta: int) -> SimPacket:
    """A real 802.1Qbb frame pausing (or, with quanta 0, resuming) one priority (built once
    per (node, port, priority, quanta); each packet gets its own copy of the bytes)."""
    key = (node_id, port, prio, quanta)
    frame = _PFC_FRAMES.get(key)
    if frame is None:
        q = [0] * PRIORITIES
        q[prio] = quanta
        frame = _PFC_FRAMES[key] = bytes(build({"eth": {"src": node_mac(node_id, port)},
                                                "pfc": {"class_enable": 1 << prio,
                                                        "quanta": q}}))
    # SimPacket(pkt_id, now_ps, len(frame), tc=7, src=node_id, frame=frame) without the
    # constructor's checks (the values are good), and with its own copy of the bytes as the
    # constructor would make
    return SimPacket.trusted(pkt_id, now_ps, len(frame), 0, 7, NOT_ECT, node_id, 0,
                             bytearray(frame))


_PFC_FRAMES: dict[tuple[int, int, int, int], bytes] = {}


#: Where the first EtherType (or TPID) is, and the length that holds it whole.
_TYPE_AT = ETHERNET.byte_field("type")[0]
_UNTAGGED_MIN_BYTES = _TYPE_AT + 2
_MAC_CONTROL = int(EtherType.MAC_CONTROL)


def is_mac_control(frame: bytes | bytearray | None) -> bool:
    """True for a MAC Control (PFC/PAUSE) frame, VLAN-tagged or not."""
    if frame is None:
        return False
    if len(frame) >= _UNTAGGED_MIN_BYTES:  # payload_start's first step, inline: most frames
        et = (frame[_TYPE_AT] << 8) | frame[_TYPE_AT + 1]
        if et not in VLAN_TPIDS:
            return et == _MAC_CONTROL
    loc = payload_start(frame)
    return loc is not None and loc[1] == EtherType.MAC_CONTROL


def apply_pause(port: Any, pkt: SimPacket,
                ignore: set[tuple[int, int]] | frozenset[tuple[int, int]] = frozenset()
                ) -> None:
    """Apply a received PFC or 802.3x PAUSE frame to the egress port it arrived on (anything
    with ``index`` and ``pause(prio, quanta)``, e.g. :class:`sim.net.port.Port`), except to
    the (port index, priority) pairs in ``ignore`` (a watchdog's "forward" action)."""
    frame = bytes(pkt.frame or b"")
    actions = _PAUSE_ACTIONS.get(frame)
    if actions is None:
        actions = _pause_actions(frame)
        if len(_PAUSE_ACTIONS) >= _PAUSE_ACTIONS_MAX:
            _PAUSE_ACTIONS.clear()
        _PAUSE_ACTIONS[frame] = actions
    idx = port.index
    for prio, quanta in actions:
        if not ignore or (idx, prio) not in ignore:
            port.pause(prio, quanta)


def _pause_actions(frame: bytes) -> tuple[tuple[int, int], ...]:
    """The (priority, quanta) pairs a PFC or PAUSE frame sets, in priority order, as
    ``wire.dissect`` reads the frame: a PFC frame's enabled classes (the times of disabled
    ones are ignored), every priority for a PAUSE, none for anything else."""
    from wire import dissect

    d = dissect(frame)
    pfc = d.get("pfc")
    if pfc is not None:
        return tuple((prio, pfc["quanta"][prio]) for prio in range(PRIORITIES)
                     if pfc["class_enable"] >> prio & 1)
    pause = d.get("pause")
    if pause is not None:
        return tuple((prio, pause["quanta"]) for prio in range(PRIORITIES))
    return ()


#: frame bytes -> what :func:`apply_pause` does with it: the frames a run receives are few
#: distinct ones (one per sender, priority and quanta: ``pfc_packet``), each decoded once
#: (dissecting every PAUSE was a tenth of an incast's run time); emptied at
#: _PAUSE_ACTIONS_MAX entries, so memory stays bounded whatever the frames.
_PAUSE_ACTIONS: dict[bytes, tuple[tuple[int, int], ...]] = {}
_PAUSE_ACTIONS_MAX = 4096


class PfcResponder:
    """The receiver half of PFC on one node (a switch).

    ``node`` provides ``engine``, ``node_id``, ``ports`` (index -> port with
    ``send_control`` and ``rate_bps``), ``tracer``, ``ids`` (packet ids), ``pause_sent``
    (port -> frames sent), ``xoff_quanta`` and ``mmu.paused(port, pg)``.  :meth:`changes`
    takes the MMU's ``(port, pg, XOFF|XON)`` transitions: XOFF sends ``xoff_quanta`` and
    refreshes every half pause time while the PG stays paused (so the upstream never resumes
    early); XON cancels the refresh and sends quanta 0."""

    __slots__ = ("node", "refresh")

    def __init__(self, node: Any) -> None:
        self.node = node
        #: (port, pg) -> the pending refresh of its PAUSE.
        self.refresh: dict[tuple[int, int], Timer] = {}

    def changes(self, changes: Iterable[tuple[int, int, str]]) -> None:
        for port, pg, action in changes:
            key = (port, pg)
            old = self.refresh.pop(key, None)
            if old is not None:
                old.cancel()
            if action == _XOFF:
                self.send(port, pg, self.node.xoff_quanta)
            else:
                self.send(port, pg, 0)

    def send(self, port: int, pg: int, quanta: int) -> None:
        node = self.node
        engine = node.engine
        now = engine.now_ps
        out = node.ports[port]
        out.send_control(pfc_packet(node.ids(), now, node.node_id, port, pg, quanta))
        node.pause_sent[port] = node.pause_sent.get(port, 0) + 1
        if PauseSent in node._int.types:  # built only when read (sim.trace.Interest)
            node.tracer.emit(PauseSent(now, node.node_id, port, pg, quanta))
        if quanta:
            half = quanta_to_ps(quanta, out.rate_bps) // 2
            self.refresh[(port, pg)] = engine.schedule_in(half, self._refresh, port, pg)

    def _refresh(self, port: int, pg: int) -> None:
        self.refresh.pop((port, pg), None)
        if self.node.mmu.paused(port, pg):
            self.send(port, pg, self.node.xoff_quanta)

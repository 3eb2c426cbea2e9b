"""The ESUN switch: scale-up frames over the shared-buffer switch (TTL/hop limit, CoS, link
errors, credits freed when a frame leaves its buffer)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sim.events import Dropped
from sim.flowctl.credit import CbfcConfig, cbfc_free, cbfc_lose
from sim.flowctl.pfc import is_mac_control
from sim.net.port import Port
from sim.net.switch import Switch
from sim.packet import SimPacket
from sim.scaleup.framing import forward_hop
from wire.esun import ESUN
from wire.ethernet import payload_start
from wire.scaleup import DEFAULT_SCALEUP, ScaleUpConfig

__all__ = ["EsunSwitch"]

class EsunSwitch(Switch):
    """:class:`sim.net.switch.Switch` for scale-up frames: on arrival a frame may be lost
    (``loss_rate``, link error), then its TTL / hop limit is decremented in the real bytes
    (:func:`forward_hop`; drop ``ttl_expired`` at <= 1) and, for ESUN, its traffic class is
    taken from the EH CoS (``ScaleUpConfig.cos_to_tc``; the EH overrides any PCP).  MMU
    admission, forwarding on the destination, ECN marking in the header (``SimPacket.mark_ce``
    -> ``wire.mark_ce``) and PFC are the base class's."""

    def __init__(self, *args: Any, loss_rate: float = 0.0,
                 scaleup: ScaleUpConfig = DEFAULT_SCALEUP, cbfc: CbfcConfig | None = None,
                 **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.loss_rate = loss_rate
        self.scaleup = scaleup
        #: CBFC on every port (egress: :class:`CreditPort`; ingress: credits freed when the
        #: frame starts leaving its egress queue), or None (PFC / lossy, the base switch).
        self.cbfc = cbfc
        self.link_errors = 0
        self.ttl_drops = 0
        self._cos = ESUN.byte_field("cos")

    def add_port(self, index: int, rate_bps: int, *, scheduler: str | None = None,
                 weights: Sequence[int] | None = None,
                 quantum_bytes: int | None = None, cbfc: CbfcConfig | None = None) -> Port:
        return super().add_port(index, rate_bps, scheduler=scheduler, weights=weights,
                                quantum_bytes=quantum_bytes,
                                cbfc=self.cbfc if cbfc is None else cbfc)

    def receive(self, port: int, pkt: SimPacket) -> None:
        frame = pkt.frame
        if frame is not None and not is_mac_control(frame):
            if self.loss_rate and self.engine.rng.random() < self.loss_rate:
                cbfc_lose(pkt)
                self.link_errors += 1
                self._drop(port, pkt, "link_error")
                return
            if not isinstance(frame, bytearray):
                frame = pkt.frame = bytearray(frame)
            if not forward_hop(frame, self.scaleup):
                cbfc_free(pkt)
                self.ttl_drops += 1
                self._drop(port, pkt, "ttl_expired")
                return
            loc = payload_start(frame)
            if loc is not None and loc[1] == self.scaleup.esun_ethertype:
                byte, shift, mask = self._cos
                pkt.tc = self.scaleup.cos_to_tc[(frame[loc[0] + byte] >> shift) & mask]
        # the base switch frees the credits of a frame it drops (MMU, route, hop budget) and
        # of one leaving its buffer (sim.net.switch.Switch._on_dequeue)
        super().receive(port, pkt)

    def _drop(self, port: int, pkt: SimPacket, reason: str) -> None:
        self.drops += 1
        self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pkt.tc, pkt.id,
                                 pkt.flow, pkt.nbytes, reason))

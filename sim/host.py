"""A host NIC: paced senders per flow, PFC reaction on its port, a counting receiver.

Sender: each flow sends ``packet_bytes`` frames (headers included, no FCS) at ``rate_bps``
(measured on the wire: a frame every ``frame_ser_time_ps(packet_bytes, rate_bps)``), from
``start_ps`` until ``stop_ps`` or until ``size_bytes`` are sent.  A NIC does not drop: when its
port queue for the flow's class already holds ``queue_limit_bytes`` (because the port is
paused or slower), the sender waits and retries one packet time later.  Congestion control is
a plug point (issue 5): for now the rate is fixed.

Receiver: counts bytes per flow and records the completion time (FCT) of finite flows.
"""

from __future__ import annotations

from dataclasses import dataclass

from .engine import Engine
from .packet import SimPacket
from .port import Port
from .switch import _apply_pause, _Ids
from .trace import NullTracer, Tracer
from .units import frame_ser_time_ps

__all__ = ["Flow", "Host"]


@dataclass(frozen=True, slots=True)
class Flow:
    id: int
    src: int
    dst: int
    rate_bps: int
    tc: int = 3
    packet_bytes: int = 1082  # Eth 14 + IPv4 20 + UDP 8 + BTH 12 + 1024 + ICRC 4
    size_bytes: int | None = None
    start_ps: int = 0
    stop_ps: int | None = None
    ecn: int = 2  # ECT(0): RoCEv2 data is ECN-capable

    def __post_init__(self) -> None:
        if self.rate_bps <= 0 or self.packet_bytes <= 0:
            raise ValueError(f"flow {self.id}: rate_bps and packet_bytes must be positive")
        if self.size_bytes is not None and self.size_bytes <= 0:
            raise ValueError(f"flow {self.id}: size_bytes must be positive")


class Host:
    def __init__(self, engine: Engine, node_id: int, rate_bps: int, *, tracer: Tracer | None = None,
                 queue_limit_bytes: int = 4 * 1082, ids=None) -> None:
        self.engine = engine
        self.node_id = node_id
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        self.port = Port(engine, node_id, 0, rate_bps, tracer=self.tracer)
        self.ports = {0: self.port}
        self.queue_limit_bytes = queue_limit_bytes
        self._ids = ids if ids is not None else _Ids()
        self.sent_bytes: dict[int, int] = {}
        self.rx_bytes: dict[int, int] = {}
        self.rx_first_ps: dict[int, int] = {}
        self.rx_last_ps: dict[int, int] = {}
        self.rx_ce: dict[int, int] = {}
        self.fct_ps: dict[int, int] = {}
        self._flows: dict[int, Flow] = {}
        self._expected: dict[int, int] = {}
        self._gap_ps: dict[int, int] = {}
        #: When a list, every delivered data packet is appended as (t_ps, packet) (replay checks).
        self.delivered: list[tuple[int, SimPacket]] | None = None

    def inject(self, pkt: SimPacket) -> None:
        """Hand a ready packet (e.g. a replayed pcap frame) to the NIC's port now."""
        self.port.enqueue(pkt)

    # ---------------------------------------------------------------- sending
    def add_flow(self, flow: Flow) -> None:
        if flow.src != self.node_id:
            raise ValueError(f"flow {flow.id} starts at node {flow.src}, not {self.node_id}")
        self._flows[flow.id] = flow
        self.sent_bytes[flow.id] = 0
        self.engine.schedule(flow.start_ps, self._send, flow)

    def expect(self, flow: Flow) -> None:
        """Register a flow this host receives (for its FCT)."""
        if flow.size_bytes is not None:
            self._expected[flow.id] = flow.size_bytes
        self._flows.setdefault(flow.id, flow)

    def _send(self, flow: Flow) -> None:
        now = self.engine.now_ps
        if flow.stop_ps is not None and now >= flow.stop_ps:
            return
        sent = self.sent_bytes[flow.id]
        if flow.size_bytes is not None and sent >= flow.size_bytes:
            return
        gap = self._gap_ps.get(flow.id)
        if gap is None:
            gap = self._gap_ps[flow.id] = frame_ser_time_ps(flow.packet_bytes, flow.rate_bps)
        if self.port.queue_bytes[flow.tc] >= self.queue_limit_bytes:
            self.engine.schedule_in(gap, self._send, flow)
            return
        nbytes = flow.packet_bytes
        if flow.size_bytes is not None:
            nbytes = min(nbytes, flow.size_bytes - sent)
        pkt = SimPacket(self._ids(), now, nbytes, flow=flow.id, tc=flow.tc, ecn=flow.ecn,
                        src=self.node_id, dst=flow.dst)
        self.sent_bytes[flow.id] = sent + nbytes
        self.port.enqueue(pkt)
        self.engine.schedule_in(gap, self._send, flow)

    # -------------------------------------------------------------- receiving
    def receive(self, port: int, pkt: SimPacket) -> None:
        if pkt.frame is not None and len(pkt.frame) >= 14 and pkt.frame[12:14] == b"\x88\x08":
            _apply_pause(self.port, pkt)
            return
        now = self.engine.now_ps
        f = pkt.flow
        got = self.rx_bytes.get(f, 0) + pkt.nbytes
        self.rx_bytes[f] = got
        self.rx_first_ps.setdefault(f, now)
        self.rx_last_ps[f] = now
        if pkt.ecn == 3:
            self.rx_ce[f] = self.rx_ce.get(f, 0) + 1
        if self.delivered is not None:
            self.delivered.append((now, pkt))
        want = self._expected.get(f)
        if want is not None and got >= want and f not in self.fct_ps:
            self.fct_ps[f] = now - self._flows[f].start_ps

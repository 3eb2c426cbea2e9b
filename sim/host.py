"""A host NIC: paced senders per flow, PFC reaction on its port, a counting receiver.

Sender: each flow sends ``packet_bytes`` frames (headers included, no FCS) at ``rate_bps``
(measured on the wire: a frame every ``frame_ser_time_ps(packet_bytes, rate_bps)``), from
``start_ps`` until ``stop_ps`` or until ``size_bytes`` are sent.  A NIC does not drop: when its
port queue for the flow's class already holds ``queue_limit_bytes`` (because the port is
paused or slower), the sender waits and retries one packet time later.  Congestion control is
a plug point (issue 5): for now the rate is fixed.

Congestion control: each flow's rate comes from a :mod:`sim.cc` algorithm (``cc``, default
``fixed``), driven with ``on_tx`` per frame, ``on_cnp`` per CNP and ``on_timer`` at the time it
asks for; a rate change is a ``RateChanged`` event.

Receiver: counts bytes per flow and records the completion time (FCT) of finite flows.  As the
DCQCN notification point it turns CE marks into CNPs: a real RoCEv2 CNP frame (BTH opcode 0x81,
BECN, DestQP = the flow id) sent back to the sender on ``cnp_tc`` (6: NVIDIA's default
``cnp_802p_prio``), immediately on the first CE and then at most one per ``cnp_interval_ps``
per flow (50 µs: the DCQCN paper's N) — shared/specs/dcqcn_pfc.md 1.3.
"""

from __future__ import annotations

from dataclasses import dataclass

from wire import build
from wire.bth import BTH
from wire.ecn import ip_offset
from wire.ipv4 import IPV4
from wire.ipv6 import IPV6
from wire.roce import CNP_OPCODE
from wire.udp import ROCEV2_PORT, UDP

from . import cc as cc_registry
from .addresses import node_ip, node_mac
from .engine import Engine, Timer
from .events import CNPSent, RateChanged
from .packet import SimPacket
from .port import Port
from .switch import _apply_pause, _Ids, is_mac_control
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
                 queue_limit_bytes: int = 4 * 1082, ids=None, cc: str = "fixed",
                 cc_params: dict | None = None, cnp_interval_ps: int = 50_000_000,
                 cnp_tc: int = 6) -> None:
        if cnp_interval_ps < 0:
            raise ValueError("cnp_interval_ps must be >= 0")
        self.cc_name = cc
        self.cc_params = dict(cc_params or {})
        cc_registry.names()  # fail early on an unknown algorithm name
        if cc not in cc_registry.names():
            raise ValueError(f"unknown congestion control {cc!r}; known: "
                             f"{', '.join(cc_registry.names())}")
        self.cnp_interval_ps = cnp_interval_ps
        self.cnp_tc = cnp_tc
        self.cc: dict[int, cc_registry.RateControl] = {}
        self._cc_timer: dict[int, Timer] = {}
        self._last_cnp_ps: dict[int, int] = {}
        self.cnp_sent = 0
        self.cnp_received = 0
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
        self.cc[flow.id] = cc_registry.create(self.cc_name, line_rate_bps=flow.rate_bps,
                                              **self.cc_params)
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
        ctl = self.cc[flow.id]
        rate = ctl.rate_bps
        gap = self._gap_ps.get((flow.packet_bytes, rate))
        if gap is None:
            gap = self._gap_ps[(flow.packet_bytes, rate)] = frame_ser_time_ps(flow.packet_bytes,
                                                                               rate)
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
        if getattr(ctl, "reacts_to_tx", True):
            self._cc_call(flow.id, ctl.on_tx, nbytes)
        self.engine.schedule_in(gap, self._send, flow)

    def _cc_call(self, flow_id: int, method, *args) -> None:
        """Run a rate-control hook; trace a rate change; (re)arm its timer."""
        ctl = self.cc[flow_id]
        before = (ctl.rate_bps, ctl.target_rate_bps, ctl.alpha)
        now = self.engine.now_ps
        method(*args, now) if args else method(now)
        after = (ctl.rate_bps, ctl.target_rate_bps, ctl.alpha)
        if after != before:
            self.tracer.emit(RateChanged(now, self.node_id, flow_id, *after))
        due = ctl.next_timer_ps()
        old = self._cc_timer.get(flow_id)
        if due is None:
            if old is not None:
                old.cancel()
                del self._cc_timer[flow_id]
        elif old is None or old.cancelled or old.at_ps != due:
            if old is not None:
                old.cancel()
            self._cc_timer[flow_id] = self.engine.schedule(max(due, now), self._cc_timer_due,
                                                           flow_id)

    def _cc_timer_due(self, flow_id: int) -> None:
        self._cc_timer.pop(flow_id, None)
        self._cc_call(flow_id, self.cc[flow_id].on_timer)

    # -------------------------------------------------------------- receiving
    def receive(self, port: int, pkt: SimPacket) -> None:
        if pkt.frame is not None and is_mac_control(pkt.frame):
            _apply_pause(self.port, pkt)
            return
        now = self.engine.now_ps
        qp = _cnp_dest_qp(pkt.frame) if pkt.frame is not None else None
        if qp is not None:
            self.cnp_received += 1
            if qp in self.cc:
                self._cc_call(qp, self.cc[qp].on_cnp)
            return
        f = pkt.flow
        got = self.rx_bytes.get(f, 0) + pkt.nbytes
        self.rx_bytes[f] = got
        self.rx_first_ps.setdefault(f, now)
        self.rx_last_ps[f] = now
        if pkt.ecn == 3:
            self.rx_ce[f] = self.rx_ce.get(f, 0) + 1
            last = self._last_cnp_ps.get(f)
            if last is None or now - last >= self.cnp_interval_ps:
                self._last_cnp_ps[f] = now
                self._send_cnp(f, pkt.src)
        if self.delivered is not None:
            self.delivered.append((now, pkt))
        want = self._expected.get(f)
        if want is not None and got >= want and f not in self.fct_ps:
            self.fct_ps[f] = now - self._flows[f].start_ps

    def _send_cnp(self, flow_id: int, to_node: int) -> None:
        now = self.engine.now_ps
        frame = build({"eth": {"src": node_mac(self.node_id), "dst": node_mac(to_node)},
                       "ipv4": {"src": node_ip(self.node_id), "dst": node_ip(to_node),
                                "dscp": 48},
                       "udp": {}, "bth": {"opcode": "CNP", "dest_qp": flow_id & 0xFFFFFF}})
        cnp = SimPacket(self._ids(), now, len(frame), flow=flow_id, tc=self.cnp_tc,
                        src=self.node_id, dst=to_node, frame=frame)
        self.cnp_sent += 1
        self.tracer.emit(CNPSent(now, self.node_id, flow_id))
        self.port.enqueue(cnp)


def _cnp_dest_qp(frame: bytes | bytearray) -> int | None:
    """DestQP of a RoCEv2 CNP (UDP dport 4791, BTH opcode 0x81), else None.  Reads only the
    IP, UDP and BTH field tables (no full dissection) on the frames the simulator carries."""
    loc = ip_offset(frame)
    if loc is None:
        return None
    off, ver = loc
    udp = off + (IPV4.unpack_raw(frame, off)["ihl"] * 4 if ver == 4 else IPV6.size_bytes)
    if len(frame) < udp + UDP.size_bytes + BTH.size_bytes:
        return None
    if UDP.unpack_raw(frame, udp)["dport"] != ROCEV2_PORT:
        return None
    bth = BTH.unpack_raw(frame, udp + UDP.size_bytes)
    return bth["dest_qp"] if bth["opcode"] == CNP_OPCODE else None

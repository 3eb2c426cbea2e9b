"""The XPU endpoint: transaction packer, go-back-N reliability and its egress port.

Reliability: go-back-N and a fixed window are public (OCP "Scale Up Ethernet (SUE) v1.0.0" via
the MiracleFarms summary, miraclefarms.github.io/notes/2026/06/21/sue-scale-up-ethernet-fabric/);
the PSN scope, ACK timing, RTO and window size are **[A]** assumptions of ours
(docs/explanation/sue.md, table rows 11-14).

Link use (**[A]** our work-conserving reading of SUE's "opportunistic" packing;
docs/explanation/sue.md row 5): an XPU has at most one DATA frame in its port (queued or being
serialised); when it finishes, the packer cuts the next PDU at once (work conserving), unless
the data class is paused by PFC, in which case packing waits for the resume.  ACK/NACK frames
use their own lossless class (``ack_tc``) so they never wait behind paused data (deadlock
hygiene: requests and ACKs on distinct lossless classes, OCP SUE v1.0 via the MiracleFarms
summary; docs/explanation/sue.md row 19).
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from sim.engine import Engine, Timer
from sim.events import Dropped, TxnPacked
from sim.flowctl.credit import CbfcConfig, CreditFlowControl, cbfc_free, cbfc_lose
from sim.flowctl.pfc import apply_pause, is_mac_control
from sim.net.port import Port
from sim.nic.rc import unwrap_psn
from sim.packet import SimPacket
from sim.scaleup.framing import PSN_MOD, SueConfig, SueFramer, SuePacket, max_frame_bytes
from sim.scaleup.packing import Packer, Pdu, Txn
from sim.trace import NullTracer, Tracer, interest
from sim.units import frame_ser_time_ps
from wire.sue import SueOp, TxnOpcode

__all__ = ["XpuPort", "CreditXpuPort", "Xpu"]

class XpuPort(Port):
    """The XPU's egress port: a :class:`sim.net.port.Port` that also tells its owner when a
    priority resumes (pause expired or quanta 0), so the packer runs at that instant."""

    on_resume: Callable[[int], None] | None = None

    def pause(self, prio: int, quanta: int) -> None:
        super().pause(prio, quanta)
        if not quanta and self.on_resume is not None:
            self.engine.schedule_in(0, self.on_resume, prio, priority=1)

    def _expire(self, prio: int) -> None:
        super()._expire(prio)
        if self.on_resume is not None:
            self.engine.schedule_in(0, self.on_resume, prio, priority=1)



class CreditXpuPort(CreditFlowControl, XpuPort):
    """The XPU's egress port under CBFC: also tells its owner (``on_resume``) when credits
    of a class come back, so the packer runs at that instant."""

    def _credits_back(self, tc: int) -> None:
        super()._credits_back(tc)
        if self.on_resume is not None:
            self.engine.schedule_in(0, self.on_resume, tc, priority=1)



@dataclass
class _Tx:
    """Sender state of one {destination, VC} stream."""

    next_psn: int = 0
    base: int = 0
    unacked: deque[Pdu] = field(default_factory=deque)
    resend: int | None = None
    rto: Timer | None = None
    order: int = 0


@dataclass
class _Rx:
    """Receiver state of one {source, VC} stream."""

    expected: int = 0
    nack_sent: bool = False
    ack_timer: Timer | None = None
    unacked: int = 0


def _unwrap(wire_psn: int, ref: int) -> int:
    """The PSN nearest to ``ref`` whose low 16 bits are ``wire_psn`` (the RC rule,
    :func:`sim.nic.rc.unwrap_psn`)."""
    return unwrap_psn(wire_psn, ref, PSN_MOD)


class Xpu:
    """An XPU endpoint: traffic source, transaction packer, go-back-N sender and receiver.

    ``ids`` is the fabric's packet-id source; ``record`` keeps every delivery as
    ``(t_ps, src, vc, tag, opcode)`` in ``deliveries`` (tests)."""

    def __init__(self, engine: Engine, node_id: int, rate_bps: int, cfg: SueConfig, *,
                 ids: Callable[[], int], tracer: Tracer | None = None,
                 record: bool = False, cbfc: CbfcConfig | None = None) -> None:
        self.engine = engine
        self.node_id = node_id
        self.rate_bps = rate_bps
        self.cfg = cfg
        self.tracer: Tracer = tracer if tracer is not None else NullTracer()
        self._int = interest(self.tracer)
        self._ids = ids
        self.cbfc = cbfc
        self.port: XpuPort
        if cbfc is None:
            self.port = XpuPort(engine, node_id, 0, rate_bps, tracer=self.tracer,
                                on_dequeue=self._dequeued)
        else:
            self.port = CreditXpuPort(engine, node_id, 0, rate_bps, tracer=self.tracer,
                                      on_dequeue=self._dequeued, cbfc=cbfc)
        #: CBFC: packing waits until the data class has credits for a largest frame.
        self._max_frame = max_frame_bytes(cfg.header, cfg.max_pdu_bytes)
        self.port.on_resume = self._resumed
        self.ports = {0: self.port}
        self.framer = SueFramer(cfg.header, ttl=cfg.ttl, scaleup=cfg.scaleup,
                                partition=cfg.partition)
        self.packer = Packer(cfg.max_pdu_bytes, cfg.txn_hdr_bytes, cfg.hold_ps, cfg.selector)
        self.tx: dict[tuple[int, int], _Tx] = {}
        self.rx: dict[tuple[int, int], _Rx] = {}
        self.record = record
        self.deliveries: list[tuple[int, int, int, int, int]] = []
        self._data_in_port = False
        self._hold_timer: Timer | None = None
        self._tag = 0
        # counters
        self.txns_offered = 0
        self.txns_delivered = 0
        self.bytes_delivered = 0
        #: (t_ps, data bytes) of every PDU delivered in order.
        self.pdu_deliveries: list[tuple[int, int]] = []
        self.latencies_ps: list[int] = []
        self.read_latencies_ps: list[int] = []
        self.frames_sent = 0
        self.new_pdus = 0
        self.txns_packed = 0
        self.retransmissions = 0
        self.timeouts = 0
        self.nacks_sent = 0
        self.acks_sent = 0
        self.piggybacked_acks = 0
        self.duplicates = 0
        self.out_of_order = 0
        self.link_errors = 0
        self.ce_received = 0
        self.read_frac = 0.0
        #: Data bytes of a READ_RESP (start_traffic sets it to txn_bytes).
        self.read_bytes = 256
        self.read_resp_vc: Callable[[int], int] = lambda vc: vc

    # ---------------------------------------------------------------- traffic
    def submit(self, dst: int, vc: int, data_bytes: int,
               opcode: int = TxnOpcode.WRITE, origin_ps: int = -1,
               tag: int | None = None) -> Txn:
        """Queue a transaction now (the XPU's command interface)."""
        if tag is None:
            tag = self._tag
            self._tag += 1
        t = Txn(dst, vc, data_bytes, self.engine.now_ps, int(opcode), tag, self.node_id,
                origin_ps)
        self.txns_offered += 1
        self.packer.push(t)
        self._try_send()
        return t

    def start_traffic(self, *, load: float, txn_bytes: int, dests: Callable[[], int],
                      vcs: int, until_ps: int, arrivals: str = "poisson",
                      read_frac: float = 0.0, rng: random.Random | None = None) -> None:
        """Generate transactions of ``txn_bytes`` data at ``load`` x line rate (data bytes)
        until ``until_ps``; destinations from ``dests()``, VCs uniform over ``vcs``;
        ``read_frac`` of them are reads (READ_REQ with no data, answered by a READ_RESP of
        ``txn_bytes`` on the next VC)."""
        r = rng if rng is not None else self.engine.rng
        mean_ps = txn_bytes * 8 * 10**12 / (load * self.rate_bps)
        self.read_frac = read_frac
        self.read_bytes = txn_bytes
        self.read_resp_vc = lambda vc: (vc + 1) % vcs

        def gap() -> int:
            if arrivals == "cbr":
                return max(1, round(mean_ps))
            return max(1, round(r.expovariate(1.0 / mean_ps)))

        def arrive() -> None:
            vc = r.randrange(vcs) if vcs > 1 else 0
            dst = dests()
            if read_frac and r.random() < read_frac:
                self.submit(dst, vc, 0, TxnOpcode.READ_REQ)
            else:
                self.submit(dst, vc, txn_bytes, TxnOpcode.WRITE)
            nxt = self.engine.now_ps + gap()
            if nxt < until_ps:
                self.engine.schedule(nxt, arrive)

        first = gap() if arrivals == "poisson" else r.randrange(max(1, round(mean_ps)))
        if first < until_ps:
            self.engine.schedule(self.engine.now_ps + first, arrive)

    # ------------------------------------------------------------------ sending
    def _stream(self, key: tuple[int, int]) -> _Tx:
        st = self.tx.get(key)
        if st is None:
            st = self.tx[key] = _Tx(order=len(self.tx))
        return st

    def _window_open(self, key: tuple[int, int]) -> bool:
        st = self.tx.get(key)
        if st is None:
            return True
        return st.resend is None and st.next_psn - st.base < self.cfg.window_pdus

    def _try_send(self) -> None:
        if self._data_in_port or self.port.paused(self.cfg.data_tc):
            return
        if self.cbfc is not None and self.port.credit_blocked(  # type: ignore[attr-defined]
                self.cfg.data_tc, self._max_frame):
            return
        now = self.engine.now_ps
        # 1. go-back-N resends first (oldest stream first)
        resending = [(st.order, k) for k, st in self.tx.items() if st.resend is not None]
        if resending:
            key = min(resending)[1]
            st = self.tx[key]
            assert st.resend is not None
            psn = st.resend
            pdu = st.unacked[psn - st.base]
            st.resend = psn + 1 if psn + 1 < st.next_psn else None
            self.retransmissions += 1
            self._send_data(key, psn, pdu)
            return
        pdu = self.packer.pack(now, self._window_open)
        if pdu is None:
            self._arm_hold()
            return
        key = (pdu.dst, pdu.vc)
        st = self._stream(key)
        psn = st.next_psn
        st.next_psn += 1
        st.unacked.append(pdu)
        self.new_pdus += 1
        self.txns_packed += pdu.info.txns
        pkt = self._send_data(key, psn, pdu)
        if TxnPacked in self._int.types:  # built only when read (sim.trace.Interest)
            self.tracer.emit(TxnPacked(now, self.node_id, pdu.dst, pdu.vc, pdu.info.txns,
                                       pkt.nbytes))

    def _arm_hold(self) -> None:
        at = self.packer.next_timer_ps(self._window_open)
        if at is None:
            return
        at = max(at, self.engine.now_ps)
        t = self._hold_timer
        if t is not None and not t.cancelled:
            if t.at_ps <= at:
                return
            t.cancel()
        self._hold_timer = self.engine.schedule(at, self._hold_fired, priority=1)

    def _hold_fired(self) -> None:
        self._hold_timer = None
        self._try_send()

    def _send_data(self, key: tuple[int, int], psn: int, pdu: Pdu) -> SuePacket:
        dst, vc = key
        now = self.engine.now_ps
        rx = self.rx.get((dst, vc))
        apsn = rx.expected if rx is not None else 0
        if rx is not None and rx.unacked:
            if rx.ack_timer is not None:
                rx.ack_timer.cancel()
                rx.ack_timer = None
            rx.unacked = 0
            self.piggybacked_acks += 1
        tc = self.cfg.data_tc
        frame = self.framer.frame(self.node_id, dst, vc, tc, SueOp.DATA, psn, apsn, pdu.txns)
        pkt = SuePacket(self._ids(), now, len(frame), flow=self._flow(dst, vc), tc=tc,
                        ecn=self.framer.ecn, src=self.node_id, dst=dst, frame=frame,
                        pdu=pdu, psn=psn)
        st = self.tx[key]
        if st.rto is None:
            st.rto = self.engine.schedule_in(self.cfg.rto_ps, self._timeout, key)
        self.frames_sent += 1
        self._data_in_port = True
        self.port.enqueue(pkt)
        return pkt

    def _flow(self, dst: int, vc: int) -> int:
        return (self.node_id << 12 | dst << 2 | vc) & 0xFFFFF

    def _dequeued(self, index: int, pkt: SimPacket) -> None:
        if pkt.tc == self.cfg.data_tc:
            t = frame_ser_time_ps(pkt.nbytes, self.rate_bps)
            self.engine.schedule_in(t, self._link_free, priority=1)

    def _link_free(self) -> None:
        self._data_in_port = False
        self._try_send()

    def _resumed(self, prio: int) -> None:
        if prio == self.cfg.data_tc:
            self._try_send()

    def _send_ctl(self, dst: int, vc: int, op: SueOp, apsn: int) -> None:
        tc = self.cfg.ack_tc
        frame = self.framer.frame(self.node_id, dst, vc, tc, op, 0, apsn)
        pkt = SuePacket(self._ids(), self.engine.now_ps, len(frame), flow=self._flow(dst, vc),
                        tc=tc, ecn=self.framer.ecn, src=self.node_id, dst=dst, frame=frame)
        self.port.enqueue(pkt)

    # ------------------------------------------------------------- reliability
    def _timeout(self, key: tuple[int, int]) -> None:
        st = self.tx[key]
        st.rto = None
        if st.base < st.next_psn:
            self.timeouts += 1
            st.resend = st.base
            st.rto = self.engine.schedule_in(self.cfg.rto_ps, self._timeout, key)
            self._try_send()

    def _on_ack(self, key: tuple[int, int], apsn_wire: int, nack: bool) -> None:
        st = self.tx.get(key)
        if st is None:
            return
        n = (apsn_wire - st.base) % PSN_MOD
        if n > st.next_psn - st.base:
            return  # stale or foreign
        if n:
            for _ in range(n):
                st.unacked.popleft()
            st.base += n
            if st.resend is not None and st.resend < st.base:
                st.resend = st.base if st.base < st.next_psn else None
            if st.rto is not None:
                st.rto.cancel()
                st.rto = None
            if st.base < st.next_psn:
                st.rto = self.engine.schedule_in(self.cfg.rto_ps, self._timeout, key)
        if nack and st.base < st.next_psn:
            st.resend = st.base
        self._try_send()

    # ---------------------------------------------------------------- receive
    def receive(self, port: int, pkt: SimPacket) -> None:
        frame = pkt.frame
        if frame is not None and is_mac_control(frame):
            apply_pause(self.port, pkt)
            return
        cfg = self.cfg
        if cfg.loss_rate and self.engine.rng.random() < cfg.loss_rate:
            cbfc_lose(pkt)
            self.link_errors += 1
            self.tracer.emit(Dropped(self.engine.now_ps, self.node_id, port, pkt.tc, pkt.id,
                                     pkt.flow, pkt.nbytes, "link_error"))
            return
        cbfc_free(pkt)  # an XPU absorbs at line rate: the buffer is freed on receipt
        if frame is None:
            return
        if pkt.ecn == 3:
            self.ce_received += 1
        rh = self.framer.rh(frame)
        src = pkt.src
        vc = rh["vc"]
        op = rh["op"]
        self._on_ack((src, vc), rh["apsn"], op == SueOp.NACK)
        if op != SueOp.DATA or not isinstance(pkt, SuePacket) or pkt.pdu is None:
            return
        rx = self.rx.get((src, vc))
        if rx is None:
            rx = self.rx[(src, vc)] = _Rx()
        psn = _unwrap(rh["npsn"], rx.expected)
        now = self.engine.now_ps
        if psn == rx.expected:
            rx.expected += 1
            rx.nack_sent = False
            rx.unacked += 1
            self._deliver(pkt.pdu, now)
            if rx.unacked >= cfg.ack_every_pdus:
                if rx.ack_timer is not None:
                    rx.ack_timer.cancel()
                self._ack_due(src, vc)
            elif rx.ack_timer is None:
                rx.ack_timer = self.engine.schedule_in(cfg.ack_delay_ps, self._ack_due, src, vc)
        elif psn > rx.expected:
            self.out_of_order += 1
            if not rx.nack_sent:
                rx.nack_sent = True
                self.nacks_sent += 1
                self._send_ctl(src, vc, SueOp.NACK, rx.expected)
        else:
            self.duplicates += 1
            rx.unacked += 1
            if rx.ack_timer is None:
                rx.ack_timer = self.engine.schedule_in(cfg.ack_delay_ps, self._ack_due, src, vc)

    def _ack_due(self, src: int, vc: int) -> None:
        rx = self.rx[(src, vc)]
        rx.ack_timer = None
        rx.unacked = 0
        self.acks_sent += 1
        self._send_ctl(src, vc, SueOp.ACK, rx.expected)

    def _deliver(self, pdu: Pdu, now: int) -> None:
        nbytes = 0
        for t in pdu.txns:
            nbytes += t.data_bytes
            self.latencies_ps.append(now - t.t_ps)
            if t.opcode == TxnOpcode.READ_RESP:
                self.read_latencies_ps.append(now - t.origin_ps)
            if self.record:
                self.deliveries.append((now, t.src, t.vc, t.tag, t.opcode))
        self.txns_delivered += len(pdu.txns)
        self.bytes_delivered += nbytes
        self.pdu_deliveries.append((now, nbytes))
        for t in pdu.txns:
            if t.opcode == TxnOpcode.READ_REQ:
                self.submit(t.src, self.read_resp_vc(t.vc), self.read_bytes,
                            TxnOpcode.READ_RESP, origin_ps=t.origin_ps)


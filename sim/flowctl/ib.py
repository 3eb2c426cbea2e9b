"""InfiniBand link-level flow control: per-VL credits in 64-byte blocks (IBA Vol. 1, 7.9).

One :class:`IbLink` per link direction, attached to the sending egress port (any
:class:`sim.net.port.Port`: a switch's or a host's) by composition: it is the port's gate
(:class:`sim.flowctl.base.Gate`) and holds the receiver's counters of the same link
(:class:`sim.flowctl.base.CreditReceiver`: the receiver reports through :meth:`IbLink.freed`
and :meth:`IbLink.lost`, reached through the ticket ``pkt.fc``, as for CBFC).  The port
calls it for every packet it dequeues (:meth:`IbLink._take`: FCTBS) and delivers the packet
through it (:meth:`IbLink._land`: the receiver's ABR and buffer count the packet, then the
node receives it, in one event).  Compiled with the core (``ib.pxd``): every packet on an
IB link goes through it three or four times.

The rules (InfiniBand Architecture Specification Vol. 1, release 1.2.1, section 7.9 "Flow
control"; docs/explanation/infiniband.md, section "Credits (IBA 7.9)", says which are
assumptions [A]):

* **Blocks** (7.9.1): credits count 64-byte blocks; a packet of ``n`` bytes takes
  ``ceil(n / 64)`` blocks (:func:`ib_blocks`; ``n`` is the simulator's frame size, standing
  for the IB packet from LRH to VCRC [A]).
* **Sender** (7.9.4): per data VL, FCTBS, the total blocks sent since link initialisation,
  modulo 4096 (12 bits), and CR, the credit limit, the FCCL of the last flow-control packet
  received.  A packet of ``b`` blocks may *start* on VL ``v`` only if
  ``(CR - (FCTBS + b)) mod 4096 <= 2048`` (:func:`may_send`): the limit is at most 2048
  blocks ahead, so this modular difference is the signed room left.  A packet already
  started completes; a blocked VL is skipped by the port's scheduler.
* **Receiver** (7.9.3): ABR, the adjusted blocks received (modulo 4096): incremented by the
  blocks of every data packet received on the VL and set to the FCTBS of every flow-control
  packet received (which repairs a packet lost on the link); FCCL =
  ``(ABR + min(free blocks, 2048)) mod 4096`` (:func:`fccl_value`).
* **Flow-control packets** (7.9.4; 6 bytes: Op, FCTBS, VL, FCCL, LPCRC, ``wire.ib``): one per
  VL whenever the FCCL it would carry changes (a packet left the buffer, or the 2048 cap let
  ABR move it), and at least once every 65,536 symbol times.  A flow-control packet waits for
  the end of the packet on the wire (it is not inserted into one) and arrives ``prop_ps``
  later; it is not charged link time [A] (6 bytes per change: under 0.6 % of a link that
  carries 1 KB packets).  A periodic packet repeating the last values changes no state, so
  only the ones that would change something are simulated: after a loss, the sender's next
  one on the 65,536-symbol-time grid (from t = 0) carries FCTBS, the receiver sets ABR to it
  and the repaired FCCL goes back.
* **VLs**: the simulator's traffic classes are SLs, mapped to VLs by ``sl2vl``
  (IBA 7.6.6; default SL = traffic class = VL).  VL15 is the management VL: never credited.

Symbol time [A]: one 8-bit symbol per lane on a ``lanes``-wide link (default 4x): ``8 x
lanes`` bits at the link rate (320 ps at 100 Gb/s, so 65,536 symbol times = 20.97 us).

May import the kernel (and wire) only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sim.engine import Timer
from sim.packet import PRIORITIES, SimPacket
from wire.linkstack import IB

__all__ = ["BLOCK_BYTES", "FC_PACKET_BYTES", "FC_PERIOD_SYMBOLS", "IbConfig", "IbLink",
           "MAX_AHEAD_BLOCKS", "MGMT_VL", "SEQ_MOD", "attach_ib", "fccl_value", "ib_blocks",
           "may_send"]

#: Credit block (IBA 7.9.1).
BLOCK_BYTES = 64
#: FCTBS, ABR and FCCL are 12-bit counters (IBA 7.9.3, 7.9.4; the 12-bit fields of the
#: flow-control packet, ``wire.ib``).
SEQ_MOD = 4096
#: The credit limit is at most this many blocks ahead of what was sent (IBA 7.9.3).
MAX_AHEAD_BLOCKS = 2048
#: The management VL, never under flow control (IBA 7.9).
MGMT_VL = 15
#: A flow-control packet: Op 4, FCTBS 12, VL 4, FCCL 12, LPCRC 16 bits (IBA 7.9.4).
FC_PACKET_BYTES = 6
#: Flow-control packets per VL at least once every this many symbol times (IBA 7.9.4).
FC_PERIOD_SYMBOLS = 65536

# The same constants for the module's own arithmetic (C ints in the compiled core, ib.pxd).
_SEQ_MOD = SEQ_MOD
_MAX_AHEAD = MAX_AHEAD_BLOCKS
_BLOCK = BLOCK_BYTES
_MGMT_VL = MGMT_VL
#: ``IbLink._fc_first_at`` with no flow-control packet on its way (the latest time, int64).
_NO_FC_PS = 2**63 - 1


def ib_blocks(nbytes: int) -> int:
    """Blocks a packet of ``nbytes`` takes: ``ceil(nbytes / 64)``, at least 1 (IBA 7.9.1)."""
    return max(1, -(-nbytes // _BLOCK))


def may_send(fctbs: int, fccl: int, blocks: int) -> bool:
    """The sender's rule (IBA 7.9.4): a packet of ``blocks`` may start when
    ``(FCCL - (FCTBS + blocks)) mod 4096 <= 2048``."""
    return (fccl - (fctbs + blocks)) % _SEQ_MOD <= _MAX_AHEAD


def fccl_value(abr: int, free_blocks: int) -> int:
    """The receiver's credit limit (IBA 7.9.3): ``(ABR + min(free, 2048)) mod 4096``."""
    return (abr + min(free_blocks, _MAX_AHEAD)) % _SEQ_MOD


@dataclass(frozen=True)
class IbConfig:
    """IB link-level flow control of a link direction.

    ``vl_buffer_bytes``: the receiver's buffer per data VL (default 32 KiB [A]: a scenario
    choice; it must hold one largest packet); ``sl2vl``: VL of each traffic class (SL),
    8 values in 0..15, 15 = management (not credited); ``lanes``: link width, for the symbol
    time; ``fc_period_symbols``: the periodic rule (IBA 7.9.4: 65,536); ``fc_events``: an
    engine event for every flow-control packet (True) instead of only those that wake a port
    waiting for credits (:class:`IbLink`): the same results, more events (for checking)."""

    vl_buffer_bytes: int = 32 * 1024
    sl2vl: tuple[int, ...] = field(default=tuple(range(PRIORITIES)))
    lanes: int = 4
    fc_period_symbols: int = FC_PERIOD_SYMBOLS
    fc_events: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "sl2vl", tuple(self.sl2vl))
        if (not isinstance(self.vl_buffer_bytes, int) or isinstance(self.vl_buffer_bytes, bool)
                or self.vl_buffer_bytes < BLOCK_BYTES):
            raise ValueError(f"vl_buffer_bytes must be an int >= {BLOCK_BYTES} (one block), "
                             f"got {self.vl_buffer_bytes!r}")
        if len(self.sl2vl) != PRIORITIES or any(
                not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= MGMT_VL
                for v in self.sl2vl):
            raise ValueError(f"sl2vl must be {PRIORITIES} VLs in 0..15, got {self.sl2vl!r}")
        if self.lanes not in (1, 2, 4, 8, 12):
            raise ValueError(f"lanes must be 1, 2, 4, 8 or 12 (IBA link widths), got "
                             f"{self.lanes!r}")
        if (not isinstance(self.fc_period_symbols, int)
                or isinstance(self.fc_period_symbols, bool) or self.fc_period_symbols < 1):
            raise ValueError("fc_period_symbols must be a positive int")
        if not isinstance(self.fc_events, bool):
            raise ValueError(f"fc_events must be a bool, got {self.fc_events!r}")

    @property
    def buffer_blocks(self) -> int:
        """The VL buffer in whole blocks."""
        return self.vl_buffer_bytes // BLOCK_BYTES

    # The shape of sim.flowctl.credit.CbfcConfig that a switch's MMU sizing reads
    # (sim.scenarios.description): the per-class limit and the credited classes.
    @property
    def limit_credits(self) -> int:
        return self.buffer_blocks

    @property
    def credit_bytes(self) -> int:
        return BLOCK_BYTES

    @property
    def vcs(self) -> tuple[int, ...]:
        """The traffic classes under credits (those not mapped to VL15)."""
        return tuple(tc for tc in range(PRIORITIES) if self.sl2vl[tc] != MGMT_VL)

    def credits(self, nbytes: int) -> int:
        return ib_blocks(nbytes)

    def period_ps(self, rate_bps: int) -> int:
        """65,536 symbol times at ``rate_bps`` (module docstring), rounded up."""
        return -(-self.fc_period_symbols * 8 * self.lanes * 10**12 // rate_bps)


class IbLink:
    """Per-VL credits of one link direction: sender counters (FCTBS, CR) and the receiver's
    (ABR, buffer occupancy, FCCL last sent).  ``port``: the sending egress port (its
    ``engine``, ``rate_bps``, ``prop_ps``, ``queues``, ``add_gate``, ``wake``; it calls
    :meth:`_take` for every packet it dequeues and :meth:`_land` when one arrives);
    ``reverse``: the receiver's egress port on the same link, which carries the flow-control
    packets back (None: they leave at once)."""

    def __init__(self, port: Any, cfg: IbConfig, reverse: Any = None) -> None:
        self.port = port
        self.cfg = cfg
        self.reverse = reverse
        self.engine = port.engine
        self.vl_of = cfg.sl2vl
        #: The traffic classes this gate governs (:class:`sim.flowctl.base.Gate`).
        self.classes = cfg.vcs
        self._tcs_of: dict[int, tuple[int, ...]] = {}
        for tc in self.classes:
            v = self.vl_of[tc]
            self._tcs_of[v] = (*self._tcs_of.get(v, ()), tc)
        self.buffer_blocks = cfg.buffer_blocks
        init = fccl_value(0, self.buffer_blocks)  # link initialisation's FC packets
        n = MGMT_VL + 1
        # sender (CR: read it as ``cr``, which takes in the flow-control packets arrived)
        self.fctbs = [0] * n
        self._cr = [init] * n
        #: Flow-control packets on their way back, in arrival order: (arrival time, the
        #: engine seq of their arrival, VL, FCCL); the first ``_fc_n_evented`` have an
        #: engine event, the others are taken in when the sender next reads its credits
        #: (:meth:`_sync`), or get an event when the port waits for credits (:meth:`_idle`).
        self._fc_q: deque[tuple[int, int, int, int]] = deque()
        self._fc_first_at = _NO_FC_PS  # the arrival time of the first of them
        self._fc_n_evented = 0
        self._wake_mode = False
        self._every_fc = cfg.fc_events
        # receiver
        self.abr = [0] * n
        self.occupied_blocks = [0] * n
        self.max_occupied_blocks = [0] * n
        self.fccl_sent = [init] * n
        self.fc_packets = 0
        self.resyncs = 0
        self.lost_blocks = 0
        self._resync_timer: Timer | None = None
        self._period_ps = cfg.period_ps(port.rate_bps)
        # credit stalls (per traffic class)
        self.stalls = 0
        self._stall_since: list[int | None] = [None] * PRIORITIES
        self._stall_acc_ps = [0] * PRIORITIES
        # bound once (no method object per packet)
        self._fc_fire_cb = self._fc_fire
        self._land_cb = self._land
        port.add_gate(self)
        if hasattr(port, "set_vl_map"):
            port.set_vl_map(self.vl_of)
        if hasattr(port, "set_stack"):
            port.set_stack(IB)  # an IB link: its packets' bytes on the wire, no Ethernet framing
        port.ib = self

    # ------------------------------------------------------------------ sender
    @property
    def cr(self) -> list[int]:
        """CR per VL: the FCCL of the last flow-control packet arrived."""
        self._sync()
        return self._cr

    def waiting(self, tc: int, nbytes: int) -> bool:
        """True when a packet of ``nbytes`` on ``tc`` lacks credits now (no side effect)."""
        self._sync()
        return self._waiting(tc, nbytes)

    def _waiting(self, tc: int, nbytes: int) -> bool:
        """:meth:`waiting`; a C method in the compiled core (ib.pxd)."""
        v = self.vl_of[tc]
        if v == _MGMT_VL:
            return False
        return not may_send(self.fctbs[v], self._cr[v], ib_blocks(nbytes))

    def blocked(self, tc: int, nbytes: int) -> bool:
        """The gate: :meth:`waiting`, with the credit stall time of ``tc`` accounted."""
        return self._blocked(tc, nbytes)

    def _blocked(self, tc: int, nbytes: int) -> bool:
        """:meth:`blocked`; a C method in the compiled core (ib.pxd)."""
        self._sync()
        w = self._waiting(tc, nbytes)
        since = self._stall_since[tc]
        if w:
            if since is None:
                self._stall_since[tc] = self.engine.now_ps
                self.stalls += 1
        elif since is not None:
            self._stall_acc_ps[tc] += self.engine.now_ps - since
            self._stall_since[tc] = None
        return w

    def stall_ps(self, tc: int | None = None) -> int:
        """Time a head packet waited for credits so far (one class, or summed)."""
        self._sync()
        now = self.engine.now_ps
        total = 0
        for c in range(PRIORITIES) if tc is None else (tc,):
            total += self._stall_acc_ps[c]
            since = self._stall_since[c]
            if since is not None:
                total += now - since
        return total

    def _take(self, pkt: SimPacket) -> None:
        """The port dequeued ``pkt`` to send it (after its owner's ``on_dequeue``, which frees
        the previous link's credits first): FCTBS counts its blocks."""
        self._wake_mode = False  # busy: a flow-control packet's wake would find it so
        v = self.vl_of[pkt.tc]
        if v == _MGMT_VL:
            return
        b = ib_blocks(pkt.nbytes)
        self.fctbs[v] = (self.fctbs[v] + b) % _SEQ_MOD
        pkt.fc = (self, v, b)  # the port hands it to _land when its last bit arrives

    # A flow-control packet's arrival sets CR, ends a credit stall its FCCL resolves and
    # wakes the port.  The wake does something only when the port is idle with packets
    # queued (every one blocked); the rest changes only what the sender reads.  So a packet
    # gets an engine event (at the place in the order its arrival had when it was sent:
    # Engine._take_seq, _push_key) only when the port waits for credits (_idle), and is
    # otherwise taken in when the sender next reads its credits (_sync): the same results,
    # an event fewer per packet on a busy link.
    def _sync(self) -> None:
        """Take in the flow-control packets that arrived before the event running now."""
        eng = self.engine
        if self._fc_n_evented or self._fc_first_at > eng.now_ps:
            return  # none, the first has an event of its own (not run yet), or later
        q = self._fc_q
        while q:
            at, seq, v, fccl = q[0]
            if not eng._done_before(at, 1, seq):
                return
            q.popleft()
            self._fc_first_at = q[0][0] if q else _NO_FC_PS
            self._cr[v] = fccl
            queues = self.port.queues
            for tc in self._tcs_of.get(v, ()):
                since = self._stall_since[tc]
                if since is not None and queues[tc] and not self._waiting(
                        tc, queues[tc][0].nbytes):
                    self._stall_acc_ps[tc] += at - since  # the stall ended on arrival
                    self._stall_since[tc] = None

    def _idle(self) -> None:
        """The port is idle with packets queued and none may go: every flow-control packet
        on its way (and every one sent while it waits) gets its engine event, to wake it."""
        self._sync()
        self._wake_mode = True
        q = self._fc_q
        eng = self.engine
        for i in range(self._fc_n_evented, len(q)):
            at, seq, _v, _fccl = q[i]
            eng._push_key(at, 1, seq, self._fc_fire_cb, (seq,))
        self._fc_n_evented = len(q)

    def _fc_fire(self, seq: int) -> None:
        """The event of the first flow-control packet on its way: it arrives."""
        q = self._fc_q
        _at, s, v, fccl = q.popleft()
        assert s == seq, "flow-control packets arrive in order"
        self._fc_first_at = q[0][0] if q else _NO_FC_PS
        self._fc_n_evented -= 1
        self._fc_arrive(v, fccl)

    def _fc_arrive(self, v: int, fccl: int) -> None:
        """A flow-control packet from the receiver reaches the sender: CR = its FCCL."""
        self._cr[v] = fccl
        queues = self.port.queues
        tcs = self._tcs_of.get(v, ())
        for tc in tcs:
            if self._stall_since[tc] is not None and queues[tc]:
                self._blocked(tc, queues[tc][0].nbytes)  # closes the stall if it fits now
        for tc in tcs:
            self.port.wake(tc)

    # ---------------------------------------------------------------- receiver
    def _land(self, peer: Any, peer_port: int, pkt: SimPacket) -> None:
        """The last bit of ``pkt`` (sent by this link's port) reaches the far end: the
        receiver's VL buffer counts its blocks, then ``peer`` (the node) receives it."""
        fc = pkt.fc
        self._arrive(fc[1], fc[2])
        if peer is not None:
            peer.receive(peer_port, pkt)

    def _arrive(self, v: int, b: int) -> None:
        self.abr[v] = (self.abr[v] + b) % _SEQ_MOD
        occ = self.occupied_blocks[v] + b
        self.occupied_blocks[v] = occ
        if occ > self.max_occupied_blocks[v]:
            self.max_occupied_blocks[v] = occ
        self._update(v)

    def freed(self, v: int, b: int) -> None:
        """The receiver's buffer released a packet of ``b`` blocks of VL ``v``."""
        self.occupied_blocks[v] -= b
        self._update(v)

    def lost(self, v: int, b: int) -> None:
        """The packet of ``b`` blocks was lost on the link (its arrival is undone: it never
        reached the buffer, ABR did not count it); the sender's next periodic flow-control
        packet repairs ABR."""
        self.abr[v] = (self.abr[v] - b) % SEQ_MOD
        self.occupied_blocks[v] -= b
        self.lost_blocks += b
        if self._resync_timer is None:
            period = self._period_ps
            at = (self.engine.now_ps // period + 1) * period
            self._resync_timer = self.engine.schedule(at, self._resync)

    def _resync(self) -> None:
        """The sender's periodic flow-control packets (every VL) carry FCTBS to the receiver."""
        self._resync_timer = None
        self.resyncs += 1
        for v in sorted(self._tcs_of):
            self._send(self.port, self._abr_set, v, self.fctbs[v])

    def _abr_set(self, v: int, fctbs: int) -> None:
        self.abr[v] = fctbs
        self._update(v)

    def _update(self, v: int) -> None:
        """Send a flow-control packet if the FCCL changed."""
        fccl = fccl_value(self.abr[v], self.buffer_blocks - self.occupied_blocks[v])
        if fccl != self.fccl_sent[v]:
            self.fccl_sent[v] = fccl
            self.fc_packets += 1
            self._send_fc(v, fccl)

    def _send_fc(self, v: int, fccl: int) -> None:
        """A flow-control packet leaves the receiver's port after the packet on its wire and
        reaches the sender ``prop_ps`` later (after data arriving at the same instant:
        priority 1), where :meth:`_sync`, or its event (:meth:`_idle`), takes it in."""
        eng = self.engine
        now = eng.now_ps
        at = now
        port = self.reverse
        if port is not None and port.busy and port._tx_end_ps > now:
            at = port._tx_end_ps
        at += self.port.prop_ps
        seq = eng._take_seq()
        if not self._fc_q:
            self._fc_first_at = at
        self._fc_q.append((at, seq, v, fccl))
        if self._wake_mode or self._every_fc:
            self._fc_n_evented += 1
            eng._push_key(at, 1, seq, self._fc_fire_cb, (seq,))

    def _send(self, port: Any, fn: Any, v: int, value: int) -> None:
        """A flow-control packet leaves ``port`` after the packet on its wire and reaches
        the far end ``prop_ps`` later (after data arriving at the same instant: priority 1)."""
        now = self.engine.now_ps
        at = now
        if port is not None and port.busy and port._tx_end_ps > now:
            at = port._tx_end_ps
        self.engine._at(at + self.port.prop_ps, 1, fn, (v, value))

    # ------------------------------------------------------------------ results
    def counters(self) -> dict[str, int]:
        """``summary.json`` keys of the port (IB links only): its credit stall time and
        stall episodes, the flow-control packets its receiver sent, and the peak occupancy
        of the receiver's VL buffers (bytes of whole blocks)."""
        return {"credit_stall_ps": self.stall_ps(), "credit_stalls": self.stalls,
                "fc_packets": self.fc_packets,
                "rx_vl_buffer_max_bytes": max(self.max_occupied_blocks) * BLOCK_BYTES}


def attach_ib(a: Any, b: Any, cfg: IbConfig) -> tuple[IbLink, IbLink]:
    """Both directions of the link between egress ports ``a`` and ``b`` under IB credits."""
    return IbLink(a, cfg, reverse=b), IbLink(b, cfg, reverse=a)


# Compiled (ib.pxd), a cpdef function's Python signature has lost its return annotation: put
# back the one written above (interpreted, it is there already and this does nothing).
for _f, _ret in ((ib_blocks, "int"), (may_send, "bool"), (fccl_value, "int")):
    _f.__annotations__.setdefault("return", _ret)
del _f, _ret

"""RC transport reliability, sans I/O: the sender's PSN window and timer, the receiver's
expected PSN (docs/explanation/faults.md).  Plain classes driven by
:class:`sim.nic.host.Host` (and tested alone).

Rules (InfiniBand Architecture Specification vol. 1, release 1.4, ch. 9.7 "Reliable service";
RoCEv2 uses the same transport, IBA Annex A17):

* PSNs: every data frame of a flow (a QP) carries a 24-bit PSN, from 0, wrapping at 2^24
  (IBA 9.7.1); both ends keep unwrapped counters and put ``psn & 0xFFFFFF`` on the wire.  A
  wire PSN is read relative to the reference (expected PSN, oldest unacked PSN) in a window of
  half the space (IBA 9.7.5.1.1: the "valid" and "duplicate" PSN regions split the space).
* Receiver (responder): a frame with the expected PSN is delivered and the expected PSN
  advances; the ACK (coalesced, the host's ``ack_every``) acknowledges everything before it.
  A PSN ahead of the expected one is a sequence error: one NAK (AETH NAK code
  PSN_SEQUENCE_ERROR, with the expected PSN, IBA 9.7.5.2.1) per gap, until the gap is filled;
  the frame is dropped (``"gbn"``, go-back-N, what RoCE NICs do by default) or kept
  (``"sr"``, selective repeat) and delivered once the gap before it is filled.  A PSN behind
  the expected one is a duplicate: dropped, counted and answered with an ACK of the last
  frame delivered (IBA 9.7.5.1.2: duplicates are acknowledged again).
* Out-of-order receiver (``"ooo"``: the mode of NICs on an adaptively routed fabric, whose
  frames of one QP take different paths).  NVIDIA's "Out-of-Order (OOO) Data Placement"
  (ConnectX-5 and later, RC/XRC/DC: MLNX_OFED and DOCA documentation, "Out-of-Order (OOO)
  Data Placement") accepts a frame that arrives ahead of the expected PSN "instead of being
  dropped, in order to avoid retransmission" and places its data in memory as it arrives;
  rdma-core's ``MLX5DV_QP_CREATE_OOO_DP`` (``providers/mlx5/man/mlx5dv_create_qp.3.md``,
  rdma-core 55) states the same for a QP, with work completions still delivered in order.
  Here such a frame is kept (placed) with no NAK, and the frames are delivered (completed) in
  PSN order once the gap before them is filled; ACKs acknowledge that in-order prefix.  A
  lost frame is told from a late one by time: the gap's timer starts when the first frame
  past it arrives, and a gap still open ``timeout_ps`` later is NAKed (PSN sequence error
  with the expected PSN), as NVIDIA's patent on out-of-order packet processing describes
  (US 11,533,267 B2, Mellanox, 2022: a timer started by the out-of-order packet; at its expiry
  without the missing packet, a request to resend it).  [A] the timer restarts after a NAK
  (a lost resend is asked for again) and when a frame fills the gap while frames after the
  next gap are held (the next gap's timer starts then); the timeout is a constant
  (:data:`OOO_TIMEOUT_PS`, fitted: above the largest reordering measured on this model's
  adaptively routed fabrics, docs/explanation/faults.md).  The sender of such a QP resends
  selectively (``"sr"``: the NAKed frame only).
* Sender (requester): keeps every unacknowledged frame; an ACK frees the frames up to its
  PSN; a NAK frees those before its PSN and resends from it (``"gbn"``: that frame and every
  later one; ``"sr"``: that frame only).  The local ACK timeout (IBA 9.7.6.1.3, table 63:
  4.096 µs x 2^``ack_timeout``) waits for the ACK a frame asked for: it expires when the
  oldest unacknowledged frame that asked for an ACK (below) has waited that long since it
  was last sent (or since the last expiry, until its resend goes: a model of IBA's one timer
  per QP that neither a steady stream of new frames nor ACKs of later frames keep from
  expiring); then the sender resends from the oldest unacknowledged frame (``"gbn"``: all
  of them; ``"sr"``: that one) and counts a retry; ``retry_cnt`` retries without progress
  are allowed (IBA 9.7.6.1.3 "Retry Count"), the next expiry puts the QP in the error state
  (it stops).  Progress (an ACK that frees a frame) resets the count.  Only timeouts count
  as retries here (a model choice).
* ACK requests: a data frame asks the responder for an ACK (the BTH AckReq bit) when it ends
  its message (IBA: the requester needs an ACK to complete the message's work request) or
  is the ``ack_req_every``-th new frame since the last that asked; the responder ACKs those
  (and answers NAKs and duplicates), so ACKs are coalesced.  ``ack_req_every`` is 256: the
  Linux driver of ConnectX-4 and later NICs sets ``log_ack_req_freq`` = 8 in every QP's
  context (``drivers/infiniband/hw/mlx5/qp.c``, ``MLX5_IB_ACK_REQ_FREQ``; "the ACK required
  bit will be set in every 2^AckReqFreq packets at least", the Mellanox QP context); Linux
  soft-RoCE (rxe) asks every 66th.  A resend asks as the frame did when it was new.  Since
  the last frame of every message asks, every unacknowledged frame is followed by one that
  asked, so the timer covers it.

Defaults: NCCL sets ``ack_timeout`` from ``NCCL_IB_TIMEOUT`` (default 20, 4.096 µs x 2^20 ≈
4.3 s) and ``retry_cnt`` from ``NCCL_IB_RETRY_CNT`` (default 7): NCCL documentation,
"Environment Variables" (docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html).  With
them a loss that a NAK reports (a later frame of the QP arrives) is resent within a round
trip, and only a loss nothing follows (the last frames of a message, a lost NAK or resend)
waits for the 4.3 s timer.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque

__all__ = ["ACK_REQ_EVERY", "ACK_TIMEOUT", "OOO_TIMEOUT_PS", "PSN_BITS", "PSN_MOD",
           "RECEIVE_MODES", "RETRANSMIT_MODES", "RETRY_CNT", "RcReceiver", "RcSender",
           "ack_timeout_ps", "unwrap_psn"]

PSN_BITS = 24
PSN_MOD = 1 << PSN_BITS
RETRANSMIT_MODES = ("gbn", "sr")
#: The receiver's modes: the retransmission modes, and out-of-order placement (``"ooo"``).
RECEIVE_MODES = (*RETRANSMIT_MODES, "ooo")
#: NCCL_IB_TIMEOUT default (NCCL docs, "Environment Variables").
ACK_TIMEOUT = 20
#: NCCL_IB_RETRY_CNT default (NCCL docs, "Environment Variables").
RETRY_CNT = 7
#: A frame asks for an ACK at the latest as the 256th since the last that asked: the mlx5
#: driver's ``MLX5_IB_ACK_REQ_FREQ`` (log2 8; module docstring).
ACK_REQ_EVERY = 256
#: How long an out-of-order receiver waits for a missing frame before it NAKs it: 16 µs
#: [A, fitted: above the longest a gap stayed open, 4.8 µs with RoCE links and 6.1 µs with
#: IB links, in the all_to_all at full load of an adaptively routed leaf_spine 4x2 over 1 ms
#: (the case of docs/explanation/infiniband.md; python -m bench.ooo_gap); module docstring].
OOO_TIMEOUT_PS = 16_000_000


def ack_timeout_ps(ack_timeout: int) -> int:
    """Local ACK timeout in ps: 4.096 µs x 2^``ack_timeout`` (IBA 9.7.6.1.3; the 5-bit QP
    attribute, 1..31; 0 means "infinite" in the IBA and is refused here)."""
    if not 1 <= ack_timeout <= 31:
        raise ValueError(f"ack_timeout must be in 1..31, got {ack_timeout}")
    return 4_096_000 << ack_timeout


def unwrap_psn(wire_psn: int, ref: int, mod: int = PSN_MOD) -> int:
    """The unwrapped PSN nearest ``ref`` (within -mod/2..mod/2-1) whose wire value (modulo
    ``mod``: 2^24 for IBA, 2^16 for SUE's, :mod:`sim.scaleup.xpu`) is ``wire_psn``."""
    return _unwrap(wire_psn, ref, mod)


def _unwrap(wire_psn: int, ref: int, mod: int) -> int:
    """:func:`unwrap_psn` (a C function of C int64s in the compiled core)."""
    d = (wire_psn - ref) % mod
    return ref + d - mod if d >= mod >> 1 else ref + d


def _check_mode(mode: str) -> None:
    if mode not in RETRANSMIT_MODES:
        raise ValueError(f"retransmit must be one of {', '.join(RETRANSMIT_MODES)}, "
                         f"got {mode!r}")


class RcSender:
    """Requester side of one QP: PSNs, unacknowledged frames, resends and the ACK timer.

    ``send_new(nbytes, now, last)`` gives the PSN of a new frame (``last``: it ends its
    message); ``asks_ack(psn)`` whether that frame carries AckReq; ``pop_resend(now)`` the
    next frame to resend (``(psn, nbytes)`` or None); ``on_ack``/``on_nak`` take wire PSNs;
    ``deadline_ps`` is when the timer expires (None: no unacknowledged frame asked for an
    ACK) and
    ``on_timeout(now)`` is called then (False: the QP went to the error state)."""

    def __init__(self, mode: str = "gbn", timeout_ps: int = ack_timeout_ps(ACK_TIMEOUT),
                 retry_cnt: int = RETRY_CNT, first_psn: int = 0,
                 ack_req_every: int = ACK_REQ_EVERY) -> None:
        _check_mode(mode)
        if timeout_ps <= 0:
            raise ValueError("timeout_ps must be > 0")
        if not 0 <= retry_cnt <= 7:
            raise ValueError(f"retry_cnt must be in 0..7 (3 bits, IBA), got {retry_cnt}")
        if ack_req_every < 1:
            raise ValueError(f"ack_req_every must be >= 1, got {ack_req_every}")
        self.mode = mode
        self.timeout_ps = timeout_ps
        self.retry_cnt = retry_cnt
        self.ack_req_every = ack_req_every
        self._noack = 0  # new frames since the last that asked for an ACK
        self.base = first_psn  # oldest unacknowledged PSN (unwrapped)
        self.next_psn = first_psn
        self._sizes: deque[int] = deque()  # nbytes of PSNs base..next_psn-1
        self._asks: deque[bool] = deque()  # their AckReq bits
        self._places: deque = deque()  # their places in their messages (SimPacket.place)
        self._ask_psns: deque[int] = deque()  # the unacknowledged PSNs that asked, in order
        self._sent_at: deque[int] = deque()  # when each of them was last sent
        self._expired_ps = -1  # the last expiry
        self._gbn: list[int] | None = None  # [next PSN to resend, end) (go-back-N)
        #: PSNs to resend (selective repeat): sorted, unique, none below ``base`` (an ACK
        #: removes those it frees), so :meth:`has_resend` is exactly "pop_resend gives one".
        self._sr: list[int] = []
        self.retries = 0
        self.error = False
        self.acked_bytes = 0
        self.sent_frames = 0
        self.sent_bytes = 0
        self.retransmitted_frames = 0
        self.retransmitted_bytes = 0
        self.naks_received = 0
        self.timeouts = 0

    @property
    def outstanding(self) -> int:
        """Frames sent and not yet acknowledged."""
        return self.next_psn - self.base

    @property
    def deadline_ps(self) -> int | None:
        """When the ACK timer expires (None: no unacknowledged frame asked for an ACK, or
        the QP is in error)."""
        if not self._ask_psns or self.error:
            return None
        return max(self._sent_at[self._ask_psns[0] - self.base],
                   self._expired_ps) + self.timeout_ps

    def has_resend(self) -> bool:
        """True when :meth:`pop_resend` gives a frame now."""
        return bool(self._sr) or self._gbn is not None

    def peek_resend_bytes(self) -> int:
        """Size of the frame :meth:`pop_resend` would give next (0: none)."""
        if self._gbn is not None:
            return self._sizes[self._gbn[0] - self.base]
        if self._sr:
            return self._sizes[self._sr[0] - self.base]
        return 0

    def send_new(self, nbytes: int, now: int, last: bool = False, place: object = None) -> int:
        """A new frame of ``nbytes`` sent at ``now`` (``last``: the end of its message;
        ``place``: its :attr:`sim.packet.SimPacket.place`, which its resends carry again): its
        PSN (unwrapped)."""
        psn = self.next_psn
        self.next_psn += 1
        self._noack += 1
        ask = last or self._noack >= self.ack_req_every
        if ask:
            self._noack = 0
            self._ask_psns.append(psn)
        self._asks.append(ask)
        self._places.append(place)
        self._sizes.append(nbytes)
        self._sent_at.append(now)
        self.sent_frames += 1
        self.sent_bytes += nbytes
        return psn

    def asks_ack(self, psn: int) -> bool:
        """Whether outstanding frame ``psn`` (unwrapped) carries AckReq."""
        return self._asks[psn - self.base]

    def place_of(self, psn: int) -> object:
        """The place in its message (``send_new``'s ``place``) of outstanding frame ``psn``
        (unwrapped)."""
        return self._places[psn - self.base]

    def pop_resend(self, now: int) -> tuple[int, int] | None:
        psn = None
        if self._gbn is not None:
            psn, end = self._gbn
            self._gbn = [psn + 1, end] if psn + 1 < end else None
        elif self._sr:
            psn = self._sr.pop(0)
        if psn is None:
            return None
        nbytes = self._sizes[psn - self.base]
        self._sent_at[psn - self.base] = now
        self.sent_frames += 1
        self.sent_bytes += nbytes
        self.retransmitted_frames += 1
        self.retransmitted_bytes += nbytes
        return psn, nbytes

    def _ack_through(self, psn: int, now: int) -> int:
        """Free the frames up to ``psn`` (unwrapped); the number freed."""
        n = psn + 1 - self.base
        if n <= 0:
            return 0
        for _ in range(n):
            self.acked_bytes += self._sizes.popleft()
            self._sent_at.popleft()
            self._asks.popleft()
            self._places.popleft()
        self.base = psn + 1
        asked = self._ask_psns
        while asked and asked[0] <= psn:
            asked.popleft()
        self.retries = 0
        if self._gbn is not None and self._gbn[0] < self.base:
            self._gbn[0] = self.base
            if self._gbn[0] >= self._gbn[1]:
                self._gbn = None
        if self._sr and self._sr[0] < self.base:  # acknowledged before it was resent
            del self._sr[:bisect_left(self._sr, self.base)]
        return n

    def _sr_add(self, psn: int) -> None:
        """Ask for a resend of ``psn`` (selective repeat), once however often asked."""
        i = bisect_left(self._sr, psn)
        if i == len(self._sr) or self._sr[i] != psn:
            self._sr.insert(i, psn)

    def on_ack(self, wire_psn: int, now: int) -> int:
        """An ACK of every frame up to ``wire_psn``: the frames freed (0: stale/foreign)."""
        if self.error:
            return 0
        psn = _unwrap(wire_psn, self.base, PSN_MOD)
        return self._ack_through(psn, now) if psn < self.next_psn else 0

    def on_nak(self, wire_psn: int, now: int) -> bool:
        """A NAK (PSN sequence error) with the responder's expected PSN: frees the frames
        before it and resends from it; False if the PSN is not an outstanding one."""
        if self.error:
            return False
        psn = _unwrap(wire_psn, self.base, PSN_MOD)
        if not self.base <= psn < self.next_psn:
            return False
        self.naks_received += 1
        self._ack_through(psn - 1, now)
        if self.mode == "gbn":
            self._gbn = [psn, self.next_psn]
        else:
            self._sr_add(psn)
        return True

    def on_timeout(self, now: int) -> bool:
        """The timer expired (``now >= deadline_ps``): resend from the oldest unacked, or
        the QP error after ``retry_cnt`` retries (False)."""
        if not self.outstanding or self.error:
            return not self.error
        self.timeouts += 1
        if self.retries >= self.retry_cnt:
            self.error = True
            self._gbn = None
            self._sr.clear()
            return False
        self.retries += 1
        if self.mode == "gbn":
            self._gbn = [self.base, self.next_psn]
        else:
            self._sr_add(self.base)
        self._expired_ps = now
        return True


class RcReceiver:
    """Responder side of one QP: ``on_frame(wire_psn, item, now)`` -> ``(verdict, delivered,
    reply)``: verdict ``"deliver"``, ``"held"`` (SR or OOO, out of order, kept),
    ``"out_of_sequence"`` (GBN, dropped) or ``"duplicate"`` (dropped); ``delivered`` the items
    now in order (each once); ``reply`` None (the host coalesces its ACKs), ``("nak", wire
    PSN)`` or ``("ack", wire PSN)`` (a duplicate's ACK of the last frame delivered).

    Mode ``"ooo"`` (module docstring) never NAKs from ``on_frame``: ``deadline_ps`` is when
    the open gap's timer expires (None: no gap) and ``on_timeout(now)`` is called then (its
    NAK, or None when the gap closed meanwhile)."""

    def __init__(self, mode: str = "gbn", first_psn: int = 0,
                 timeout_ps: int = OOO_TIMEOUT_PS) -> None:
        if mode not in RECEIVE_MODES:
            raise ValueError(f"receiver mode must be one of {', '.join(RECEIVE_MODES)}, "
                             f"got {mode!r}")
        if timeout_ps <= 0:
            raise ValueError("timeout_ps must be > 0")
        self.mode = mode
        self.ooo = mode == "ooo"
        self.timeout_ps = timeout_ps
        self.expected = first_psn
        self._nak_sent = False
        self._held: dict[int, object] = {}
        #: OOO: when the gap before the held frames opened (None: no gap, nothing held).
        self._gap_ps: int | None = None
        self.naks_sent = 0
        self.duplicates = 0
        self.out_of_sequence = 0
        #: OOO: frames that arrived ahead of a gap and were placed (kept), not dropped.
        self.placed_out_of_order = 0

    def held(self) -> list:
        """The items kept out of order (SR, OOO), not yet delivered."""
        return list(self._held.values())

    @property
    def deadline_ps(self) -> int | None:
        """OOO: when the open gap's timer expires (None: no gap; always None in the other
        modes)."""
        return None if self._gap_ps is None else self._gap_ps + self.timeout_ps

    def on_timeout(self, now: int) -> tuple[str, int] | None:
        """OOO: the gap's timer expired (``now >= deadline_ps``): a NAK with the expected PSN
        (the first missing frame), and the timer starts again; None if no gap is due."""
        due = self.deadline_ps
        if due is None or now < due:
            return None
        self._gap_ps = now
        self.naks_sent += 1
        return "nak", self.expected % PSN_MOD

    def on_frame(self, wire_psn: int, item: object, now: int = 0
                 ) -> tuple[str, list, tuple[str, int] | None]:
        psn = _unwrap(wire_psn, self.expected, PSN_MOD)
        if psn < self.expected or psn in self._held:
            self.duplicates += 1
            return "duplicate", [], ("ack", (self.expected - 1) % PSN_MOD)
        if psn > self.expected:
            if self.ooo:  # placed; the gap's timer, not a NAK, tells a loss
                self._held[psn] = item
                self.placed_out_of_order += 1
                if self._gap_ps is None:
                    self._gap_ps = now
                return "held", [], None
            reply = None
            if not self._nak_sent:
                self._nak_sent = True
                self.naks_sent += 1
                reply = ("nak", self.expected % PSN_MOD)
            if self.mode == "sr":
                self._held[psn] = item
                return "held", [], reply
            self.out_of_sequence += 1
            return "out_of_sequence", [], reply
        out = [item]
        self.expected += 1
        self._nak_sent = False
        while self._held:
            nxt = self._held.pop(self.expected, None)
            if nxt is None:
                break
            out.append(nxt)
            self.expected += 1
        reply = None
        if self._held:  # another gap behind the one just filled
            if self.ooo:
                self._gap_ps = now
            else:
                self._nak_sent = True
                self.naks_sent += 1
                reply = ("nak", self.expected % PSN_MOD)
        elif self.ooo:
            self._gap_ps = None
        return "deliver", out, reply


# Compiled (rc.pxd), a cpdef method's Python signature has lost its return annotation: put back
# the ones written above (interpreted, they are there already and this does nothing).
for _cls, _returns in (
        (RcSender, {"has_resend": "bool", "peek_resend_bytes": "int", "send_new": "int",
                    "asks_ack": "bool", "place_of": "object",
                    "pop_resend": "tuple[int, int] | None", "on_ack": "int", "on_nak": "bool",
                    "on_timeout": "bool"}),
        (RcReceiver, {"on_timeout": "tuple[str, int] | None",
                      "on_frame": "tuple[str, list, tuple[str, int] | None]"})):
    for _name, _ret in _returns.items():
        vars(_cls)[_name].__annotations__.setdefault("return", _ret)
del _cls, _returns, _name, _ret

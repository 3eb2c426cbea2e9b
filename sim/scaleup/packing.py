"""SUE-T transaction packer: sans-IO, driven with scripted times (docs/explanation/sue.md).

What is public (OCP "Scale Up Ethernet (SUE) v1.0.0" via the MiracleFarms summary,
miraclefarms.github.io/notes/2026/06/21/sue-scale-up-ethernet-fabric/): SUE packs commands for the
same {destination XPU, VC} *opportunistically* into one PDU of at most 4096 bytes (1024 for
SUE-Lite); one RH and one R-CRC per PDU; no transaction is split; data per transaction <= 256 B.  No
packing timer, minimum fill or hold-off is described publicly.  What we assume **[A]** (each one a
named argument here):

* ``max_pdu_bytes``: the PDU limit counts the packed transactions, each its
  ``txn_hdr_bytes`` descriptor (8 or 16, ``wire.sue.txn_spec``) plus its data -- the byte
  accounting of :mod:`wire.overhead` and :func:`wire.stack.build`; the RH and R-CRC are
  outside the limit.
* ``hold_ps`` (default 0 = work conserving): a {destination, VC} queue becomes eligible when
  its head transaction has waited ``hold_ps`` or when it holds a full PDU's worth of bytes.
  With 0 every non-empty queue is eligible at once (SUE's "pack what is queued").
* ``selector``: which eligible queue a PDU is cut from -- ``"oldest"`` (the queue whose head
  arrived first, as SUE-Sim's scheduler; ties by first-seen queue order) or ``"rr"`` (round
  robin over queues in first-seen order).  More can be added with :func:`register_selector`.

Shape (aioquic's ``QuicPacketBuilder``): :class:`PduBuilder` has a byte budget
(``remaining_bytes``), a "full" signal (``full``: the next transaction does not fit) and
``flush()`` returning the PDUs and their metadata.  :class:`Packer` keeps the per-{dst, VC}
FIFOs and answers "what PDU goes now" (:meth:`Packer.pack`) and "when does a held queue
become eligible" (:meth:`Packer.next_timer_ps`); it never sees an engine or a clock.
Transactions of one {dst, VC} leave in arrival order, never split, never reordered.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Txn", "Pdu", "PduInfo", "PduBuilder", "Packer", "SELECTORS", "register_selector",
           "DEFAULT_MAX_PDU_BYTES", "LITE_MAX_PDU_BYTES", "DEFAULT_TXN_HDR_BYTES",
           "MAX_TXN_DATA_BYTES"]

#: SUE maximum PDU (OCP SUE v1.0 via the MiracleFarms summary; docs/explanation/sue.md row 3).
DEFAULT_MAX_PDU_BYTES = 4096
#: SUE-Lite maximum PDU (same source).
LITE_MAX_PDU_BYTES = 1024
#: [A] assumption: per-transaction descriptor, not public (docs/explanation/sue.md row 4;
#: wire.scaleup).
DEFAULT_TXN_HDR_BYTES = 8
#: Data bytes per transaction (SUE v1.0; wire.sue.MAX_TXN_DATA_BYTES).
MAX_TXN_DATA_BYTES = 256

Key = tuple[int, int]  # (destination XPU, VC)


@dataclass(slots=True)
class Txn:
    """One transaction as the XPU hands it to the transport.

    ``data_bytes`` (0..256) follow a descriptor; ``t_ps`` is when it was queued; ``origin_ps``
    when the operation it belongs to started (a read response keeps its request's time);
    ``opcode`` is a :class:`wire.sue.TxnOpcode` value; ``tag`` identifies it end to end."""

    dst: int
    vc: int
    data_bytes: int
    t_ps: int
    opcode: int = 1
    tag: int = 0
    src: int = 0
    origin_ps: int = -1

    def __post_init__(self) -> None:
        if not 0 <= self.data_bytes <= MAX_TXN_DATA_BYTES:
            raise ValueError(f"data_bytes must be 0..{MAX_TXN_DATA_BYTES}, "
                             f"got {self.data_bytes}")
        if self.origin_ps < 0:
            self.origin_ps = self.t_ps

    @property
    def key(self) -> Key:
        return (self.dst, self.vc)


@dataclass(frozen=True, slots=True)
class PduInfo:
    """Metadata of one PDU (as aioquic's ``QuicSentPacket``)."""

    dst: int
    vc: int
    txns: int
    pdu_bytes: int       # descriptors + data (the quantity max_pdu_bytes bounds)
    data_bytes: int      # transaction data only (goodput)
    t_ps: int            # when it was cut
    oldest_ps: int       # arrival of its oldest transaction


@dataclass(frozen=True, slots=True)
class Pdu:
    """Whole transactions for one {dst, VC}, in arrival order, and their metadata."""

    txns: tuple[Txn, ...]
    info: PduInfo

    @property
    def dst(self) -> int:
        return self.info.dst

    @property
    def vc(self) -> int:
        return self.info.vc


class PduBuilder:
    """Byte-budgeted builder of PDUs for one {dst, VC} at a time.

    ``start(dst, vc, now_ps)`` opens a PDU; ``add(txn)`` appends a whole transaction if it
    fits (False otherwise: the PDU is then ``full``); ``flush()`` closes the open PDU and
    returns every PDU built since the last flush with their metadata."""

    def __init__(self, max_pdu_bytes: int = DEFAULT_MAX_PDU_BYTES,
                 txn_hdr_bytes: int = DEFAULT_TXN_HDR_BYTES) -> None:
        if txn_hdr_bytes not in (8, 16):
            raise ValueError("txn_hdr_bytes must be 8 or 16")
        if max_pdu_bytes < txn_hdr_bytes + MAX_TXN_DATA_BYTES:
            raise ValueError(f"max_pdu_bytes must hold one largest transaction "
                             f"({txn_hdr_bytes + MAX_TXN_DATA_BYTES} B), got {max_pdu_bytes}")
        self.max_pdu_bytes = max_pdu_bytes
        self.txn_hdr_bytes = txn_hdr_bytes
        self._done: list[Pdu] = []
        self._key: Key | None = None
        self._txns: list[Txn] = []
        self._used = 0
        self._t_ps = 0
        self.full = False

    def packed_bytes(self, txn: Txn) -> int:
        """Bytes a transaction takes inside a PDU (descriptor + data)."""
        return self.txn_hdr_bytes + txn.data_bytes

    @property
    def remaining_bytes(self) -> int:
        """Budget left in the open PDU (0 when none is open)."""
        return self.max_pdu_bytes - self._used if self._key is not None else 0

    def start(self, dst: int, vc: int, now_ps: int) -> None:
        self._close()
        self._key = (dst, vc)
        self._txns = []
        self._used = 0
        self._t_ps = now_ps
        self.full = False

    def add(self, txn: Txn) -> bool:
        """Append ``txn`` if it fits in the open PDU; else set ``full`` and return False."""
        if self._key is None:
            raise RuntimeError("no PDU open: call start() first")
        if txn.key != self._key:
            raise ValueError(f"transaction for {txn.key} added to a PDU for {self._key}")
        n = self.packed_bytes(txn)
        if self._used + n > self.max_pdu_bytes:
            self.full = True
            return False
        self._txns.append(txn)
        self._used += n
        if self._used + self.txn_hdr_bytes > self.max_pdu_bytes:
            self.full = True
        return True

    def _close(self) -> None:
        if self._key is not None and self._txns:
            txns = tuple(self._txns)
            self._done.append(Pdu(txns, PduInfo(
                dst=self._key[0], vc=self._key[1], txns=len(txns), pdu_bytes=self._used,
                data_bytes=sum(t.data_bytes for t in txns), t_ps=self._t_ps,
                oldest_ps=min(t.t_ps for t in txns))))
        self._key = None
        self._txns = []
        self._used = 0

    def flush(self) -> tuple[list[Pdu], list[PduInfo]]:
        """Close the open PDU; return (PDUs, their metadata) built since the last flush."""
        self._close()
        done, self._done = self._done, []
        return done, [p.info for p in done]


Selector = Callable[["Packer", Sequence[Key]], Key]


def _oldest(packer: Packer, keys: Sequence[Key]) -> Key:
    return min(keys, key=lambda k: (packer.queues[k][0].t_ps, packer.order[k]))


def _round_robin(packer: Packer, keys: Sequence[Key]) -> Key:
    last = packer.rr_last
    ranked = sorted(keys, key=lambda k: packer.order[k])
    for k in ranked:
        if packer.order[k] > last:
            return k
    return ranked[0]


#: Queue selectors by name: ``selector(packer, eligible keys) -> key``.
SELECTORS: dict[str, Selector] = {"oldest": _oldest, "rr": _round_robin}


def register_selector(name: str, selector: Selector) -> None:
    """Add a queue-selection policy (pluggable, as the SUE-T note asks)."""
    if name in SELECTORS:
        raise ValueError(f"selector {name!r} exists already")
    SELECTORS[name] = selector


@dataclass
class _Stats:
    pdus: int = 0
    txns: int = 0
    pdu_bytes: int = 0
    data_bytes: int = 0
    full_pdus: int = 0
    by_txns: dict[int, int] = field(default_factory=dict)


class Packer:
    """Per-{destination, VC} FIFOs and the packing decision (sans-IO).

    ``push(txn)`` queues a transaction; ``pack(now_ps, can_send)`` cuts one PDU from the
    eligible queue the selector picks (``can_send(key)`` lets the caller veto queues, e.g.
    a closed reliability window or no credits) or returns None; ``next_timer_ps()`` is when a
    held queue becomes eligible (None: no hold pending)."""

    def __init__(self, max_pdu_bytes: int = DEFAULT_MAX_PDU_BYTES,
                 txn_hdr_bytes: int = DEFAULT_TXN_HDR_BYTES, hold_ps: int = 0,
                 selector: str | Selector = "oldest") -> None:
        if not isinstance(hold_ps, int) or isinstance(hold_ps, bool) or hold_ps < 0:
            raise ValueError(f"hold_ps must be an int >= 0, got {hold_ps!r}")
        self.builder = PduBuilder(max_pdu_bytes, txn_hdr_bytes)
        self.max_pdu_bytes = max_pdu_bytes
        self.txn_hdr_bytes = txn_hdr_bytes
        self.hold_ps = hold_ps
        if isinstance(selector, str):
            if selector not in SELECTORS:
                raise ValueError(f"selector must be one of {sorted(SELECTORS)}, "
                                 f"got {selector!r}")
            selector = SELECTORS[selector]
        self.selector: Selector = selector
        self.queues: dict[Key, deque[Txn]] = {}
        self.queued_bytes: dict[Key, int] = {}
        #: First-seen order of each queue (tie-break and round-robin order).
        self.order: dict[Key, int] = {}
        self.rr_last = -1
        self.stats = _Stats()

    # ----------------------------------------------------------------- queues
    def push(self, txn: Txn) -> None:
        k = txn.key
        q = self.queues.get(k)
        if q is None:
            q = self.queues[k] = deque()
            self.queued_bytes[k] = 0
            self.order[k] = len(self.order)
        q.append(txn)
        self.queued_bytes[k] += self.builder.packed_bytes(txn)

    def extend(self, txns: Iterable[Txn]) -> None:
        for t in txns:
            self.push(t)

    def __len__(self) -> int:
        """Transactions queued."""
        return sum(len(q) for q in self.queues.values())

    def pending(self, key: Key | None = None) -> int:
        if key is not None:
            q = self.queues.get(key)
            return len(q) if q else 0
        return len(self)

    # -------------------------------------------------------------- decisions
    def eligible(self, key: Key, now_ps: int) -> bool:
        """A non-empty queue whose head has waited ``hold_ps`` or which fills a PDU."""
        q = self.queues.get(key)
        if not q:
            return False
        if self.hold_ps == 0 or now_ps - q[0].t_ps >= self.hold_ps:
            return True
        return self.queued_bytes[key] >= self.max_pdu_bytes

    def next_timer_ps(self, can_send: Callable[[Key], bool] | None = None) -> int | None:
        """Earliest time a held (non-empty, not yet eligible by age) queue becomes eligible."""
        if self.hold_ps == 0:
            return None
        best = None
        for k, q in self.queues.items():
            if q and (can_send is None or can_send(k)):
                at = q[0].t_ps + self.hold_ps
                if best is None or at < best:
                    best = at
        return best

    def pack(self, now_ps: int, can_send: Callable[[Key], bool] | None = None) -> Pdu | None:
        """One PDU: as many whole head transactions of the selected eligible queue as fit."""
        keys = [k for k, q in self.queues.items() if q and self.eligible(k, now_ps)
                and (can_send is None or can_send(k))]
        if not keys:
            return None
        k = self.selector(self, keys)
        self.rr_last = self.order[k]
        q = self.queues[k]
        b = self.builder
        b.start(k[0], k[1], now_ps)
        while q and b.add(q[0]):
            t = q.popleft()
            self.queued_bytes[k] -= b.packed_bytes(t)
        full = b.full
        pdus, _ = b.flush()
        pdu = pdus[0]
        s = self.stats
        s.pdus += 1
        s.txns += pdu.info.txns
        s.pdu_bytes += pdu.info.pdu_bytes
        s.data_bytes += pdu.info.data_bytes
        s.full_pdus += int(full)
        s.by_txns[pdu.info.txns] = s.by_txns.get(pdu.info.txns, 0) + 1
        return pdu

    def flush(self, now_ps: int) -> tuple[list[Pdu], list[PduInfo]]:
        """Everything queued, cut into PDUs now regardless of hold (queue by queue, in
        selector order): (PDUs, metadata)."""
        out: list[Pdu] = []
        hold, self.hold_ps = self.hold_ps, 0
        try:
            while (p := self.pack(now_ps)) is not None:
                out.append(p)
        finally:
            self.hold_ps = hold
        return out, [p.info for p in out]

    def get_log_data(self) -> dict[str, Any]:
        s = self.stats
        return {"pdus": s.pdus, "txns": s.txns, "pdu_bytes": s.pdu_bytes,
                "data_bytes": s.data_bytes, "full_pdus": s.full_pdus,
                "queued_txns": len(self)}

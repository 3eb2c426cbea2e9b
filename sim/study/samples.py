"""The per-frame halves of ``lossless replay``'s outputs, compiled with the
simulator's core (``sim/study/samples.pxd``; the same ``.py`` runs interpreted without a
compiler):

* :class:`SampleSink`, the per-sample and per-event half of
  :class:`sim.study.results.Recorder`: a queue depth arrives at every enqueue and dequeue of
  every port and an ingress counter at every admission and release, one to three samples per
  packet-hop; the events it reads (CE marks, PFC, drops, CNPs, rate changes) are counted or
  kept as series and passed on to its ``log``.  Each series is a
  :class:`sim.study.series.Series` of the sink's ``store``, which spills them to a temporary
  file past its budget (bounded memory).
* :class:`ControlIds`, a tap on the hosts' ports remembering which frames they sent are
  control frames (CNPs, ACKs), so that a drop of one is not counted against its flow's data.
* :class:`FrameLog`, the per-frame half of :class:`sim.study.results.Capture` (a port tap: the
  bookkeeping of each frame leaving the captured port; the frames are made and written a
  batch at a time by the Capture), and :class:`CaptureBudget`, the bytes all captures share.
* :class:`RxTap`, a port tap binning the bytes delivered to a receiver per flow (the
  throughput plot's series).

May import the kernel (its ``on_enqueued`` / ``on_dequeued`` are :class:`sim.trace.QueueSampler`'s)
and ``sim.study.series`` only.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable
from typing import Any

from sim.events import (
    CEMarked,
    CNPSent,
    DeadlockCleared,
    DeadlockFound,
    Dequeued,
    Dropped,
    Enqueued,
    PauseExpired,
    PauseReceived,
    PauseSent,
    RateChanged,
    WatchdogRestored,
    WatchdogTriggered,
)
from sim.packet import PLACE_FIRST, PLACE_LAST, STREAM_MESSAGE_FRAMES
from sim.study.series import Series, SeriesStore
from sim.trace import JsonlTracer, QueueSampler, SampleBuffer
from sim.units import PS_PER_NS

__all__ = ["SampleSink", "ControlIds", "CaptureBudget", "FrameLog", "RxTap", "LOGGED",
           "CONTROL_IDS_PRUNE", "PCAP_FILE_HEADER_BYTES",
           "PCAP_RECORD_HEADER_BYTES", "SAMPLE_BUFFER_ROWS", "STREAM_MESSAGE_FRAMES",
           "WRITE_FIRST", "WRITE_MIDDLE", "WRITE_LAST", "WRITE_ONLY"]

#: Classic pcap file header and per-record header sizes (draft-ietf-opsawg-pcap sections 4
#: and 5), bytes: a capture file's size is 24 + the sum of (16 + captured length).
PCAP_FILE_HEADER_BYTES = 24
PCAP_RECORD_HEADER_BYTES = 16


#: The event types a :class:`SampleSink` reads and passes on to its ``log`` (events.jsonl).
LOGGED = (PauseSent, PauseReceived, PauseExpired, CEMarked, Dropped, CNPSent, RateChanged,
          DeadlockFound, DeadlockCleared, WatchdogTriggered, WatchdogRestored)

#: Above this many remembered control-frame ids a :class:`ControlIds` forgets those no longer
#: in flight; the threshold then doubles past what is left.
CONTROL_IDS_PRUNE = 4096


#: A queue or ingress series takes this many samples in a :class:`sim.trace.SampleBuffer`
#: of its own (two int64 arrays written in place: C stores in the compiled core) before they
#: are moved into its typed columns at once (an ``array.extend`` by an array of its type: one
#: copy).  Small, so that many series hold little beyond their spill budget (about 0.5 KB
#: each); read a sink's series after :meth:`SampleSink.flush_samples`.
SAMPLE_BUFFER_ROWS = 32


class _Rates:
    """A flow's rate samples not moved into its series yet: ``n`` of ``cap`` rows of times
    ``t_ps``, rates ``rates_bps``, target rates ``targets_bps`` (int64) and ``alphas``
    (float64), written in place (the arrays ``*_arr``); ``rate_bps`` / ``target_rate_bps``:
    the last recorded."""

    def __init__(self, series: Series) -> None:
        self.series = series
        self.cap = SAMPLE_BUFFER_ROWS
        self.t_ps_arr = array("q", bytes(8 * self.cap))
        self.rates_bps_arr = array("q", bytes(8 * self.cap))
        self.targets_bps_arr = array("q", bytes(8 * self.cap))
        self.alphas_arr = array("d", bytes(8 * self.cap))
        self.t_ps = self.t_ps_arr
        self.rates_bps = self.rates_bps_arr
        self.targets_bps = self.targets_bps_arr
        self.alphas = self.alphas_arr
        self.n = 0
        self.rate_bps = series[1][-1]
        self.target_rate_bps = series[2][-1]


class SampleSink(QueueSampler):
    """Queue depths (``queues``: (node, port, queue) -> t_ps, queue bytes after every change)
    and ingress counters (``ingress``: (node, port, PG) -> t_ps, bytes held after every
    change), as series of ``store``; ``_cap`` is the rows a series may hold before it spills,
    worked out again whenever a series is made (:meth:`_new`: the budget is shared).  The
    latest samples of each series wait in a :class:`sim.trace.SampleBuffer` of
    :data:`SAMPLE_BUFFER_ROWS` (``_qpend``, ``_ipend``; the ports and switches keep theirs and
    add to them), a flow's rates in a buffer of four columns (``_rpend``):
    :meth:`flush_samples` moves them into the series before the series are read.

    :meth:`emit` reads the events of :data:`LOGGED` (its ``wants``): it counts drops, CE
    marks and CNPs, keeps the PFC states and the rates as series, and passes each event on
    to ``log`` (None: nowhere) but a rate change that changes only alpha."""

    #: The event types read as objects (sim.trace.Interest): queue depths come as samples
    #: through ``on_enqueued`` / ``on_dequeued`` instead, so no Enqueued / Dequeued is built.
    wants = frozenset(LOGGED)
    #: A CE mark and a rate change come as fields (``_ce_marked``, ``_rate_changed``): no
    #: event is built for them unless the log is not a :class:`sim.trace.JsonlTracer` (or
    #: for a rate change that changes only alpha, none at all).
    EMIT_HOOKS = True

    def __init__(self, store: SeriesStore) -> None:
        self.store = store
        self._cap = store.cap_rows
        self.queues: dict[tuple[int, int, int], Series] = {}
        self.ingress: dict[tuple[int, int, int], Series] = {}
        self._qpend: dict[tuple[int, int, int], SampleBuffer] = {}
        self._ipend: dict[tuple[int, int, int], SampleBuffer] = {}
        #: Where the events read go on (a :class:`sim.trace.JsonlTracer`), or None.
        self.log: Any = None
        #: (node, port) -> drops there.
        self.drops: dict[tuple[int, int], int] = {}
        #: Every Dropped event (switches, hosts, XPUs): reason -> [packets, bytes].
        self.drops_by_reason: dict[str, list[int]] = {}
        #: flow -> [packets, bytes] of its DATA frames dropped (control frames excluded).
        self.flow_drops: dict[int, list[int]] = {}
        #: The ids of the control frames the hosts sent (None: every frame is data).
        self.control: ControlIds | None = None
        #: (node, port) -> CE marks there.
        self.ce: dict[tuple[int, int], int] = {}
        self.cnps = 0
        #: (node, port, priority) -> columns t_ps, state (int8: 1 paused, 0 not).
        self.pfc_tx: dict[tuple[int, int, int], Series] = {}
        self.pfc_rx: dict[tuple[int, int, int], Series] = {}
        #: flow -> (t_ps, rate_bps, target_rate_bps, alpha) series from RateChanged events.
        self.rates: dict[int, Series] = {}
        self._rpend: dict[int, _Rates] = {}

    def emit(self, e: Any) -> None:
        """Read one event (the runner's tracer)."""
        cls = type(e)
        if cls is CEMarked:
            self._ce_marked(e.t_ps, e.node, e.port, e.queue, e.packet_id, e.flow)
            return
        if cls is RateChanged:
            self._rate_changed(e.t_ps, e.node, e.flow, e.rate_bps, e.target_rate_bps, e.alpha)
            return
        if cls is PauseSent:
            self._state(self.pfc_tx, e, 1 if e.quanta else 0)
        elif cls is PauseReceived:
            self._state(self.pfc_rx, e, 1 if e.quanta else 0)
        elif cls is PauseExpired:
            self._state(self.pfc_rx, e, 0)
        elif cls is CNPSent:
            self.cnps += 1
        elif cls is Dropped:
            self._dropped(e)
        elif cls is Enqueued or cls is Dequeued:
            self.on_enqueued(e.t_ps, e.node, e.port, e.queue, e.packet_id, e.flow, e.nbytes,
                             e.queue_bytes)
            return
        elif cls not in LOGGED:
            return
        if self.log is not None:
            self.log.emit(e)

    def _ce_marked(self, t_ps: int, node: int, port: int, queue: int, packet_id: int,
                   flow: int) -> None:
        k = (node, port)
        self.ce[k] = self.ce.get(k, 0) + 1
        self._log(CEMarked, (t_ps, node, port, queue, packet_id, flow))

    def _rate_changed(self, t_ps: int, node: int, flow: int, rate_bps: int,
                      target_rate_bps: int, alpha: float) -> None:
        p = self._rpend.get(flow)
        if p is None:
            r = self.rates.get(flow)
            logged = r is None
            if logged:
                r = self.rates[flow] = self._new("qqqd")
                r[0].append(t_ps)
                r[1].append(rate_bps)
                r[2].append(target_rate_bps)
                r[3].append(alpha)
            p = self._rpend[flow] = _Rates(r)
            if logged:
                self._log(RateChanged, (t_ps, node, flow, rate_bps, target_rate_bps, alpha))
                return
        # an alpha-only change (vendor DCQCN clocks alpha every 1 us) is kept in the time
        # series, left out of events.jsonl
        logged = p.rate_bps != rate_bps or p.target_rate_bps != target_rate_bps
        n = p.n
        p.t_ps[n] = t_ps
        p.rates_bps[n] = rate_bps
        p.targets_bps[n] = target_rate_bps
        p.alphas[n] = alpha
        p.rate_bps = rate_bps
        p.target_rate_bps = target_rate_bps
        p.n = n = n + 1
        if n >= p.cap:
            self._take(p.series, (p.t_ps_arr, p.rates_bps_arr, p.targets_bps_arr,
                                  p.alphas_arr), n, p.cap)
            p.n = 0
        if logged:
            self._log(RateChanged, (t_ps, node, flow, rate_bps, target_rate_bps, alpha))

    def _log(self, cls: type, values: tuple) -> None:
        """Pass the event ``cls(*values)`` on to ``log`` (a JsonlTracer's line without the
        object)."""
        log = self.log
        if log is None:
            return
        if type(log) is JsonlTracer:
            jsonl = log
            jsonl.emit_fields(cls, values)
        else:
            log.emit(cls(*values))

    def _dropped(self, e: Any) -> None:
        k = (e.node, e.port)
        self.drops[k] = self.drops.get(k, 0) + 1
        r = self.drops_by_reason.get(e.reason)
        if r is None:
            r = self.drops_by_reason[e.reason] = [0, 0]
        r[0] += 1
        r[1] += e.nbytes
        if self.control is None or e.packet_id not in self.control.ids:
            f = self.flow_drops.get(e.flow)
            if f is None:
                f = self.flow_drops[e.flow] = [0, 0]
            f[0] += 1
            f[1] += e.nbytes

    def _state(self, table: dict, e: Any, value: int) -> None:
        key = (e.node, e.port, e.priority)
        s = table.get(key)
        if s is None:
            s = table[key] = self._new("qb")
        s[0].append(e.t_ps)
        s[1].append(value)
        if len(s[0]) >= self._cap:
            self.store.spill(s)

    def _new(self, typecodes: str) -> Series:
        s = self.store.new(typecodes)
        self._cap = self.store.cap_rows  # the budget is shared by one series more
        return s

    def _queue_buffer(self, node: int, port: int, queue: int) -> SampleBuffer:
        return self._buffer(self._qpend, self.queues, (node, port, queue))

    def _ingress_buffer(self, node: int, port: int, pg: int) -> SampleBuffer:
        return self._buffer(self._ipend, self.ingress, (node, port, pg))

    def _buffer(self, pend: dict, table: dict, key: tuple) -> SampleBuffer:
        """The buffer of ``key``'s series in ``pend``, made with the series (in ``table``)
        on first use."""
        b = pend.get(key)
        if b is None:
            b = pend[key] = SampleBuffer(self, self._new("qq"), SAMPLE_BUFFER_ROWS)
            table[key] = b.series
        return b

    def _full(self, b: SampleBuffer) -> None:
        self._take(b.series, (b.t_ps_arr, b.v_arr), b.n, b.cap)
        b.n = 0

    def _take(self, s: Series, arrays: tuple, n: int, cap: int) -> None:
        """Append the first ``n`` rows of a buffer's ``arrays`` (``cap`` rows each) to the
        columns of ``s``; spill ``s`` if it holds its share."""
        for col, arr in zip(s, arrays, strict=True):
            col.extend(arr if n == cap else arr[:n])
        if len(s[0]) >= self._cap:
            self.store.spill(s)

    def flush_samples(self) -> None:
        """Move every buffered queue, ingress and rate sample into its series (before reading
        ``queues``, ``ingress`` or ``rates``)."""
        for b in self._qpend.values():
            if b.n:
                self._full(b)
        for b in self._ipend.values():
            if b.n:
                self._full(b)
        for p in self._rpend.values():
            if p.n:
                self._take(p.series, (p.t_ps_arr, p.rates_bps_arr, p.targets_bps_arr,
                                      p.alphas_arr), p.n, p.cap)
                p.n = 0


class ControlIds:
    """A tap on hosts' ports (``port.taps``): the ids (``ids``) of the frames with real bytes
    they send below flow ``flow_limit`` (their CNPs and ACKs; a simulated data frame has no
    bytes, a replayed capture's frames are told apart by their flow ids), so that a dropped
    control frame is not counted against its flow's data.  Past :data:`CONTROL_IDS_PRUNE`
    ids (and each time their number doubles) the ids of frames no longer in flight are
    forgotten: ``live(fabric)`` gives the packets still in ``fabric``
    (:func:`sim.study.conservation.live_packets`), and a frame delivered or dropped already
    is never dropped again, so the set stays the size of what is in flight instead of
    growing with every CNP and ACK of the run."""

    def __init__(self, live: Callable[[Any], Iterable[Any]], flow_limit: int) -> None:
        self.ids: set[int] = set()
        #: The fabric whose queues and pending events say which frames are in flight.
        self.fabric: Any = None
        self.live = live
        self.flow_limit = flow_limit
        self._prune_at = CONTROL_IDS_PRUNE

    def __call__(self, t_ps: int, pkt: Any) -> None:
        self._tap(pkt)

    def _tap(self, pkt: Any) -> None:
        if pkt.frame is not None and pkt.flow < self.flow_limit:
            ids = self.ids
            ids.add(pkt.id)
            if len(ids) > self._prune_at:
                self.prune()

    def prune(self) -> None:
        """Forget the ids of the frames no longer in ``fabric`` (when it is set).  The next
        prune waits for as many new ids as there were packets to look at, so the look costs
        at most one packet per id (a deep queue is not scanned again every few thousand
        ACKs) and the set stays the size of what was in flight."""
        scanned = 0
        if self.fabric is not None:
            live = set()
            for p in self.live(self.fabric):
                scanned += 1
                if p.frame is not None:
                    live.add(p.id)
            self.ids.intersection_update(live)
        self._prune_at = max(CONTROL_IDS_PRUNE, 2 * len(self.ids), len(self.ids) + scanned)


class CaptureBudget:
    """The bytes all the pcap files of one run may take together (``limit_bytes``; None: no
    limit).  The first frame that would go over it stops every capture of the run
    (``cut_at_ps``); what was written stays a valid pcap."""

    def __init__(self, limit_bytes: int | None) -> None:
        self.limit_bytes = limit_bytes
        self.used_bytes = 0
        self.cut_at_ps: int | None = None


#: The BTH opcodes of an RDMA WRITE message's frames (IBA 9.2, Table 38), by position.
WRITE_FIRST, WRITE_MIDDLE, WRITE_LAST, WRITE_ONLY = 0x06, 0x07, 0x08, 0x0A
#: The 24-bit PSN (IBA 9.7.1) of the capture's own numbering (a flow without RC PSNs).
_PSN_MASK = 0xFFFFFF


class _FlowMsg:
    """One flow at one capture: its next PSN of the capture's own numbering (``psn``), the
    frame bytes of it seen and the end of its current message (``off``, ``end``: packets
    without a place in a message only), and the template of its last frame with what chose
    it (``op``, ``nbytes``, ``ecn``, ``src``, ``dst``, ``ackreq``, ``tc``; ``tpl``)."""

    __slots__ = ("ackreq", "dst", "ecn", "end", "nbytes", "off", "op", "psn", "src", "tc",
                 "tpl")

    def __init__(self) -> None:
        self.psn = 0
        self.off = 0
        self.end = 0
        self.op = -1
        self.nbytes = None
        self.ecn = None
        self.src = None
        self.dst = None
        self.ackreq = None
        self.tc = None
        self.tpl = -1


class FrameLog:
    """What a capture keeps of each frame leaving its port until the next batch is written
    (``_write_batch``, the subclass's, called when ``batch_frames`` records are held): per
    record its time (``_ts_ns``, ns), its template (``_which``: an index in the subclass's
    templates, or -1 for a frame of the fabric, kept in ``_frames``, copied: a later reuse of
    its buffer must not change what is written) and its PSN (``_psns``; 0 for a frame of the
    fabric).  A data packet with no bytes stands for an RDMA WRITE frame of its flow (its
    template: ``_templates`` (flow, src, dst, bytes, ECN, opcode, message bytes, AckReq, class) ->
    index, made by the subclass's ``_new_template``; ``_tpl_bytes`` their sizes):

    * its opcode is its place in its message as the NIC marked it (``SimPacket.place``, a
      resent frame's too): FIRST, MIDDLE, LAST, or ONLY for a message of one frame; a packet
      without a place (no NIC flow's) is cut with the others of its flow into messages of
      :data:`sim.packet.STREAM_MESSAGE_FRAMES` frames of those the capture sees;
    * its PSN is its RC PSN (``SimPacket.psn``, a reliable flow's: a resent frame shows the
      PSN it had), else the flow's next of the capture's own numbering (24 bits, from 0);
    * its BTH AckReq bit is ``SimPacket.ackreq``.

    Per flow seen it keeps one small record (``_state``: flow -> :class:`_FlowMsg`), and one
    template per distinct frame.  ``snaplen_bytes`` (None: whole frames) cuts what is counted
    against ``budget``."""

    def __init__(self, budget: CaptureBudget, snaplen_bytes: int | None,
                 batch_frames: int) -> None:
        self.budget = budget
        self._snap = snaplen_bytes
        self.batch_frames = batch_frames
        self.frames = 0
        self.bytes = PCAP_FILE_HEADER_BYTES
        budget.used_bytes += PCAP_FILE_HEADER_BYTES
        self._ts_ns: list[int] = []
        self._which: list[int] = []
        self._psns: list[int] = []
        self._frames: list[bytes] = []
        self._state: dict[int, _FlowMsg] = {}
        self._templates: dict[tuple[int, ...], int] = {}
        self._tpl_bytes: list[int] = []

    def __call__(self, t_ps: int, pkt: Any) -> None:
        self._tap(t_ps, pkt)

    def _tap(self, t_ps: int, pkt: Any) -> None:
        b = self.budget
        if b.cut_at_ps is not None:
            return
        frame = pkt.frame
        if frame is None:
            tpl, psn = self._next(pkt)
            size = self._tpl_bytes[tpl]
        else:
            tpl = -1
            psn = 0
            size = len(frame)
        n = PCAP_RECORD_HEADER_BYTES + (size if self._snap is None else min(size, self._snap))
        if b.limit_bytes is not None and b.used_bytes + n > b.limit_bytes:
            b.cut_at_ps = t_ps
            return
        b.used_bytes += n
        self.bytes += n
        if frame is not None:
            self._frames.append(bytes(frame))
        self._which.append(tpl)
        self._psns.append(psn)
        self._ts_ns.append(t_ps // PS_PER_NS)
        self.frames += 1
        if len(self._ts_ns) >= self.batch_frames:
            self._write_batch()

    def _synth(self, pkt: Any) -> tuple[int, int]:
        """:meth:`_next` from Python (a C method in the compiled core)."""
        return self._next(pkt)

    def _next(self, pkt: Any) -> tuple[int, int]:
        """(template index, PSN) of the frame standing for a data packet with no bytes."""
        flow = pkt.flow
        st = self._state.get(flow)
        if st is None:
            st = self._state[flow] = _FlowMsg()
        psn = pkt.psn
        if psn is None:
            psn = st.psn
            st.psn = (psn + 1) & _PSN_MASK
        nbytes = pkt.nbytes
        place = pkt.place
        msg = 0
        if place is not None:
            first = (place & PLACE_FIRST) != 0
            last = (place & PLACE_LAST) != 0
            if first:
                msg = place >> 2
        else:  # not a NIC flow's packet: messages of STREAM_MESSAGE_FRAMES frames seen here
            nb = nbytes
            off = st.off
            first = off >= st.end
            if first:
                st.end = off + STREAM_MESSAGE_FRAMES * nb
                msg = st.end - off
            off += nb
            st.off = off
            last = off >= st.end
        if first:
            op = WRITE_ONLY if last else WRITE_FIRST
        else:
            op = WRITE_LAST if last else WRITE_MIDDLE
        ecn = pkt.ecn
        src = pkt.src
        dst = pkt.dst
        ackreq = pkt.ackreq
        tc = pkt.tc
        if (not first and op == st.op and nbytes == st.nbytes and ecn == st.ecn
                and src == st.src and dst == st.dst and ackreq == st.ackreq and tc == st.tc):
            return st.tpl, psn  # the template of the flow's frame before (most frames)
        key = (flow, src, dst, nbytes, ecn, op, msg, ackreq, tc)
        tpl = self._templates.get(key)
        if tpl is None:
            tpl = self._templates[key] = self._new_template(pkt, op, msg)
        st.op = op
        st.nbytes = nbytes
        st.ecn = ecn
        st.src = src
        st.dst = dst
        st.ackreq = ackreq
        st.tc = tc
        st.tpl = tpl
        return tpl, psn

    def _new_template(self, pkt: Any, op: int, msg: int) -> int:  # pragma: no cover
        raise NotImplementedError

    def _write_batch(self) -> None:  # pragma: no cover - the subclass's
        raise NotImplementedError


class RxTap:
    """A tap on a receiving host (``Host.rx_tap``): the bytes of each data packet its NIC
    delivers (a simulated flow's, or a frame of a replayed capture; not control frames, not
    a frame the RC receiver drops out of sequence) added to its flow's row of ``bins``
    (flow -> bytes per bin, shared by the run's taps; ``nbins`` bins of ``bin_ps``) at the
    bin of its delivery."""

    def __init__(self, bins: dict[int, list[int]], bin_ps: int, nbins: int) -> None:
        self.bins = bins
        self.bin_ps = bin_ps
        self.nbins = nbins

    def __call__(self, t_ps: int, pkt: Any) -> None:
        self._tap(t_ps, pkt)

    def _tap(self, t_ps: int, pkt: Any) -> None:
        b = t_ps // self.bin_ps
        if b >= self.nbins:
            return
        flow = pkt.flow
        row = self.bins.get(flow)
        if row is None:
            row = self.bins[flow] = [0] * self.nbins
        row[b] += pkt.nbytes

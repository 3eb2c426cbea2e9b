"""The per-frame halves of ``lossless replay``'s outputs, compiled with the
simulator's core (``sim/study/samples.pxd``; the same ``.py`` runs interpreted without a
compiler):

* :class:`SampleSink`, the per-sample half of :class:`sim.study.results.Recorder`: a queue
  depth arrives at every enqueue and dequeue of every port and an ingress counter at every
  admission and release, one to three samples per packet-hop.  Each series is a
  :class:`sim.study.series.Series` of the sink's ``store``, which spills them to a temporary
  file past its budget (bounded memory).
* :class:`FrameLog`, the per-frame half of :class:`sim.study.results.Capture` (a port tap: the
  bookkeeping of each frame leaving the captured port; the frames are made and written a
  batch at a time by the Capture), and :class:`CaptureBudget`, the bytes all captures share.
* :class:`RxTap`, a port tap binning the bytes delivered to a receiver per flow (the
  throughput plot's series).

May import the kernel (its ``on_enqueued`` / ``on_dequeued`` are :class:`sim.trace.QueueSampler`'s)
and ``sim.study.series`` only.
"""

from __future__ import annotations

from typing import Any

from sim.packet import PLACE_FIRST, PLACE_LAST, STREAM_MESSAGE_FRAMES
from sim.study.series import Series, SeriesStore
from sim.trace import QueueSampler
from sim.units import PS_PER_NS

__all__ = ["SampleSink", "CaptureBudget", "FrameLog", "RxTap", "PCAP_FILE_HEADER_BYTES",
           "PCAP_RECORD_HEADER_BYTES", "SAMPLE_BUFFER_ROWS", "STREAM_MESSAGE_FRAMES",
           "WRITE_FIRST", "WRITE_MIDDLE", "WRITE_LAST", "WRITE_ONLY"]

#: Classic pcap file header and per-record header sizes (draft-ietf-opsawg-pcap sections 4
#: and 5), bytes: a capture file's size is 24 + the sum of (16 + captured length).
PCAP_FILE_HEADER_BYTES = 24
PCAP_RECORD_HEADER_BYTES = 16


#: A queue or ingress series takes this many samples in two Python lists before they are moved
#: into its typed columns at once (``array.extend``): a list append is a few C instructions in
#: the compiled core where an ``array``'s is a method call.  Small, so that many series hold
#: little beyond their spill budget (about 2.5 KB each at most); read a sink's series after
#: :meth:`SampleSink.flush_samples`.
SAMPLE_BUFFER_ROWS = 32


class _Pending:
    """The samples of one series not moved into it yet (times ``t``, values ``v``)."""

    def __init__(self, series: Series) -> None:
        self.series = series
        self.t: list[int] = []
        self.v: list[int] = []


class SampleSink(QueueSampler):
    """Queue depths (``queues``: (node, port, queue) -> t_ps, queue bytes after every change)
    and ingress counters (``ingress``: (node, port, PG) -> t_ps, bytes held after every
    change), as series of ``store``; ``_cap`` is the rows a series may hold before it spills,
    worked out again whenever a series is made (:meth:`_new`: the budget is shared).  The
    latest samples of each series wait in a buffer of up to :data:`SAMPLE_BUFFER_ROWS`
    (``_qpend``, ``_ipend``): :meth:`flush_samples` moves them into the series before the
    series are read."""

    def __init__(self, store: SeriesStore) -> None:
        self.store = store
        self._cap = store.cap_rows
        self.queues: dict[tuple[int, int, int], Series] = {}
        self.ingress: dict[tuple[int, int, int], Series] = {}
        self._qpend: dict[tuple[int, int, int], _Pending] = {}
        self._ipend: dict[tuple[int, int, int], _Pending] = {}

    def _new(self, typecodes: str) -> Series:
        s = self.store.new(typecodes)
        self._cap = self.store.cap_rows  # the budget is shared by one series more
        return s

    def _queue_sample(self, t_ps: int, node: int, port: int, queue: int,
                      queue_bytes: int) -> None:
        key = (node, port, queue)
        p = self._qpend.get(key)
        if p is None:
            p = self._qpend[key] = _Pending(self._new("qq"))
            self.queues[key] = p.series
        p.t.append(t_ps)
        p.v.append(queue_bytes)
        if len(p.t) >= SAMPLE_BUFFER_ROWS:
            self._move(p)

    def ingress_sample(self, t_ps: int, node: int, port: int, pg: int, nbytes: int) -> None:
        """``Switch.ingress_tap``: one sample of an ingress (port, PG) counter (a repeat of
        the last one, same time and value, is left out)."""
        self._ingress_sample(t_ps, node, port, pg, nbytes)

    def _ingress_sample(self, t_ps: int, node: int, port: int, pg: int, nbytes: int) -> None:
        key = (node, port, pg)
        p = self._ipend.get(key)
        if p is None:
            p = self._ipend[key] = _Pending(self._new("qq"))
            self.ingress[key] = p.series
        elif p.t:
            if p.v[-1] == nbytes and p.t[-1] == t_ps:
                return
        else:  # moved already: the series holds the last row (a spill keeps it)
            s = p.series
            if s[1][-1] == nbytes and s[0][-1] == t_ps:
                return
        p.t.append(t_ps)
        p.v.append(nbytes)
        if len(p.t) >= SAMPLE_BUFFER_ROWS:
            self._move(p)

    def _move(self, p: _Pending) -> None:
        """Move ``p``'s samples into its series; spill the series if it holds its share."""
        s = p.series
        s[0].extend(p.t)
        s[1].extend(p.v)
        p.t = []
        p.v = []
        if len(s[0]) >= self._cap:
            self.store.spill(s)

    def flush_samples(self) -> None:
        """Move every buffered queue and ingress sample into its series (before reading
        ``queues`` or ``ingress``)."""
        for p in self._qpend.values():
            if p.t:
                self._move(p)
        for p in self._ipend.values():
            if p.t:
                self._move(p)


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
        b = t_ps // self.bin_ps
        if b >= self.nbins:
            return
        flow = pkt.flow
        row = self.bins.get(flow)
        if row is None:
            row = self.bins[flow] = [0] * self.nbins
        row[b] += pkt.nbytes

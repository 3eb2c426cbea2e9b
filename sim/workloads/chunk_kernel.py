# cython: boundscheck=False, wraparound=False
"""Repeated chunks of a collective, played transfer by transfer in time order (part of the
compiled core).

:func:`sim.workloads.chunk_engine.run_chunks` sets up a tree or NVLS tree call as
*streams* (one per channel, or per channel and head), each a sequence of chunks (one per
NCCL loop) that all have the transfers of one *template*
(:func:`sim.workloads.nccl.tree_chunk_transfers`,
:func:`sim.workloads.nccl.nvls_chunk_transfers`), only their size differing.  A
transfer waits for the transfers its template names (its data) and, from the
``max_inflight``-th chunk of its stream on, for those that free its FIFO slot in the
chunk ``max_inflight`` earlier (its connection carries one transfer per chunk: its twin
there, or :func:`sim.workloads.nccl.nvls_slot_freers`).
:class:`ChunkKernel` keeps a chunk's state only while it is in flight and plays every
transfer as :class:`sim.workloads.collective.CollectiveJob` drives it: NCCL's step
latency and the sending GPU channel, the connection's order, NVLink as
:class:`~sim.workloads.collective.NvlinkDomain` books it, the network QPs one message after
another through the links of their paths, each link a FIFO of messages.  Events are
taken in the order of their times, ties in the order they were made (as the fabric's
engine takes them).

The ``.py`` is the source; ``chunk_kernel.pxd`` types it for Cython (the compiled core,
:mod:`sim._core`), with the same results: integers only, no negative index, ``//`` and
``%`` with Python's semantics.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable

__all__ = ["ChunkKernel"]

#: "no such time": below every time, harmless under max
NEVER = -(1 << 62)

# how a template's transfer goes (ChunkKernel.tp_kind)
K_NVL = 0    # over NVLink to its receiver (inside a node)
K_NET = 1    # from its sender's own NIC
K_PXN = 2    # over NVLink to another GPU's NIC of its node, then from that NIC

# a template transfer's record (ChunkKernel.tp, TPD fields from tj * TPD): its sender and
# receiver, kind, NVLink egress and ingress, how it is pooled (below), whether a GPU channel
# sends it,
# its dependencies' count, its users (tp_users[_TUOFF:_TUEND]), its index among the
# network transfers, the count of transfers that free its slot, the transfers whose slot it
# frees (tp_slot_users[_TSOFF:_TSEND]), whether a GPU channel copies it over NVLink (>= 0), its
# step latency's FIFO (0: inside a node, 1: across; ChunkKernel.step_ps).  Pooled (a node's
# NVLink ports as one, chunk_engine's ``pool_nvlink``): _TPOOL k > 0 stands for k transfers
# on the node's pooled ports, k < 0 for -k copies of the node's GPUs on them, each GPU's
# channel busy for its own copy (ChunkKernel._channels); on the pool a transfer takes
# k / pool_g of one's NVLink time, rounded down to the picosecond; 0 a transfer as it is
_TSRC = 0
_TDST = 1
_TKIND = 2
_TFROM = 3
_TTO = 4
_TPOOL = 5
_TGPU = 6
_TNDEPS = 7
_TUOFF = 8
_TUEND = 9
_TNET = 10
_TNSLOT = 11
_TSOFF = 12
_TSEND = 13
_TCIX = 14
_TFIFO = 15
TPD = 16

# event kinds (the low bits of a heap entry's payload: kind | j << 2 | chunk << KSHIFT)
EV_CHANNEL = 0   # its step latency has passed: the sending GPU channel takes it
EV_READY = 1     # its data are ready: posted in its connection's order
EV_NET = 2       # at the NIC that sends it (after NVLink for PXN)
EV_FINISH = 3    # received
KSHIFT = 22      # a template has fewer than 2**20 transfers

# the event queue (ChunkKernel._push): a bucket's picoseconds (1 << CQ_SHIFT, 16 ns),
# buckets (a ring of them: 268 us), events a block
CQ_SHIFT = 14
CQ_BUCKETS = 16384
CQB = 64

# a transfer's state in a chunk (ChunkKernel.wait): > 0 dependencies left, 0 in NCCL's host
# side, R_DATA data ready (posted when its connection gets to it), R_POSTED posted
R_DATA = -1
R_POSTED = -2


def _filled(count, value) -> array:
    return array("q", [value]) * count


def _grown(values, typecode, extra, fill) -> array:
    """A copy of the ``array`` behind ``values`` (itself, or a memoryview of it) with
    ``extra`` more items ``fill`` (the copy in C, not item by item)."""
    src = values if isinstance(values, array) else values.base
    out = array(typecode, src)
    out.extend(array(typecode, [fill]) * extra)
    return out


class ChunkKernel:
    """The state of one call's chunks (arrays from the engine: flat int64 ``array('q')``,
    the templates' int32 ``array('i')``; ``(a, b)`` arrays are indexed ``i * b + j``).

    ``dims``: streams ``S``, transfers per template ``m``, network transfers per template
    ``mnet``, QPs per connection ``q``, ``max_inflight``, most chunks of a stream
    ``Lmax``, GPUs ``n``, channels ``nc``, pseudo-ranks ``P``, sizes ``nsz``, the first
    transfers' ready time ``ready0_ps``, NVLink latency, frame bytes, the GPUs a pool
    stands for ``pool_g``, NCCL's step latency inside a node and across.  Per template
    transfer (``T x m`` of them) its record in ``tp`` (``TPD`` fields, the ``_T*``
    offsets: sender and receiver (pseudo-ranks), kind (``K_*``), the NVLink egress and
    ingress it takes (GPU ranks or pools ``n + node``, -1: none), how it is pooled,
    whether a GPU channel sends it, its dependencies' count, its users (a range of
    ``tp_users``, template-local), its index among the template's network transfers
    (-1), how many transfers free its slot, the transfers whose slot it frees (a range of
    ``tp_slot_users``), whether it is a GPU channel's copy over NVLink (>= 0), its step
    latency's FIFO); a transfer waits for at most 127 (``wait`` is a signed byte: the
    engine checks).
    Per stream: template, channel, chunks, per (stream, chunk) size index.  Per (stream,
    network transfer, QP): its path's latency and links (``qp_poff`` into ``qp_links``);
    per (link, size, QP piece) the link's time for it (``link_dur_ps``) and per link when
    it is free (``link_free_ps``, moved on).
    Per size: GPU channel time, NVLink time, wire bytes, per QP frame bytes.
    ``egress_free_ps`` and ``ingress_free_ps`` (per GPU) are read and moved on."""

    def __init__(self, dims, templates, streams, qps, sizes, egress_free_ps, ingress_free_ps,
                 flags, trace, init_chunks=0) -> None:
        (self.S, self.m, self.mnet, self.q, self.mi, self.Lmax, self.n, self.nc, self.P,
         self.nsz, self.ready0_ps, self.nvl_lat_ps, self.frame_bytes, self.pool_g, step_in_ps,
         step_out_ps) = dims
        self.step_ps = array("q", [step_in_ps, step_out_ps])
        self.tp, self.tp_users, self.tp_slot_users = templates
        self.st_tpl, self.st_ch, self.st_loops, self.st_sz = streams
        self.lat_ps, self.qp_poff, self.qp_links, self.link_dur_ps, self.link_free_ps = qps
        self.busy_ps, self.nvl_ps, self.wire_bytes, self.qp_frame_bytes = sizes
        self.egress_free_ps, self.ingress_free_ps = egress_free_ps, ingress_free_ps
        self.has_host, self.recv_copy, self.simple = flags
        self.trace = trace
        S, m, q = self.S, self.m, self.q
        self.posted_bytes = _filled(S * self.mnet * q, 0)
        self.frames = _filled(S * self.mnet * q, 0)
        self.chan_free_ps = _filled(self.n * self.nc, NEVER)
        self.recv_free_ps = _filled(self.P * self.nc, NEVER)
        # per (stream, transfer): its next chunk to post and its chunks held back (_ready);
        # per (stream, loop): its chunk slot (-1: none); int32, as the templates (half the
        # memory a cache line holds)
        self.conn = array("i", [0]) * (2 * S * m)
        self.st_chunk = array("i", [-1]) * (S * self.Lmax)
        # chunk slots (grown on demand): per slot its stream, loop, transfers done, and per
        # transfer its state and its channel copy's end
        self.cap = 0
        #: chunk slots made at the first chunk (the most a run is expected to hold, so
        #: that a large run does not copy its chunks' states as it grows)
        self.init_chunks = init_chunks
        self.ck_s = array("q")
        self.ck_loop = array("q")
        self.ck_done = array("q")
        self.wait = array("b")  # per transfer: its state (fits a signed byte)
        # the ends of the GPU channels' copies (Simple, NCCL's host side) of transfers that
        # are ready but held back by their connection's order: a hash table, chunk * m +
        # transfer -> end (open addressing, linear probing; key -1: empty)
        self.cp_key = _filled(1024, -1)
        self.cp_end_ps = _filled(1024, 0)
        self.cp_n = 0
        self.free = array("q")
        self.nfree = 0
        # the event queue (_push): the heap (entry i: time, order, payload at 3 * i); the
        # buckets: per bucket its first and last block (-1: none) and the events in its
        # last, the blocks (CQB events each, a block's next, the free ones); the overflow
        self.hp = _filled(3 * 1024, 0)
        self.hn = 0
        self.cq_shift = CQ_SHIFT
        self.cq_cur = 0
        self.cq_n = 0
        self.cb_head = _filled(CQ_BUCKETS, -1)
        self.cb_tail = _filled(CQ_BUCKETS, -1)
        self.cb_toff = _filled(CQ_BUCKETS, 0)
        self.cq = _filled(3 * CQB * 256, 0)
        self.cq_next = _filled(256, -1)
        self.cq_free = array("q", range(255, -1, -1))
        self.cq_nfree = 256
        self.ov = _filled(3 * 64, 0)
        self.ov_n = 0
        self.ov_min_ps = -NEVER
        self.seq = 0
        # two FIFOs of EV_CHANNEL events (intra- and inter-node step latency): per FIFO f
        # its first entry and length, its entries from f * fq_cap (a ring)
        self.fq_cap = 1024
        self.fq_time_ps = _filled(2 * self.fq_cap, 0)
        self.fq_seq = _filled(2 * self.fq_cap, 0)
        self.fq_p = _filled(2 * self.fq_cap, 0)
        self.fq_head = _filled(2, 0)
        self.fq_n = _filled(2, 0)
        self.count = 0
        self.first_post_ps = -NEVER
        self.last_recv_ps = NEVER
        self.nvl_bytes = 0
        #: most chunks in flight and most events in the heap at once
        self.peak_chunks = 0
        self.open_chunks = 0
        self.peak_events = 0

    # ------------------------------------------------------------------ storage
    def _grow_chunks(self):
        """More chunk slots (the new ones free): twice as many, or ``init_chunks`` first."""
        old, m = self.cap, self.m
        cap = max(64, self.init_chunks, 2 * old)
        for name in ("ck_s", "ck_loop", "ck_done"):
            setattr(self, name, _grown(getattr(self, name), "q", cap - old, 0))
        self.wait = _grown(self.wait, "b", (cap - old) * m, 0)
        fr = _grown(self.free, "q", 0, 0)[:self.nfree]
        fr.extend(array("q", range(cap - 1, old - 1, -1)))
        fr.extend(_filled(cap - len(fr), 0))
        self.free = fr
        self.nfree += cap - old
        self.cap = cap

    def _grow_heap(self):
        self.hp = _grown(self.hp, "q", len(self.hp), 0)

    def _open(self, s, loop):
        """Make chunk ``loop`` of stream ``s`` (if it has one and it is not made)."""
        if loop >= self.st_loops[s] or self.st_chunk[s * self.Lmax + loop] >= 0:
            return
        if self.nfree == 0:
            self._grow_chunks()
        self.nfree -= 1
        c = self.free[self.nfree]
        self.st_chunk[s * self.Lmax + loop] = c
        self.ck_s[c] = s
        self.ck_loop[c] = loop
        self.ck_done[c] = 0
        m = self.m
        tb = self.st_tpl[s] * m
        base = c * m
        for j in range(m):
            r = (tb + j) * TPD
            if loop >= self.mi:
                self.wait[base + j] = self.tp[r + _TNDEPS] + self.tp[r + _TNSLOT]
            else:
                self.wait[base + j] = self.tp[r + _TNDEPS]
        self.open_chunks += 1
        if self.open_chunks > self.peak_chunks:
            self.peak_chunks = self.open_chunks

    # ------------------------------------------------------------------ the event queue
    # A calendar queue: the events of the next picoseconds in a binary heap (``hp``, ``hn``
    # of them: those whose time >> cq_shift is below ``cq_cur``), the later ones appended
    # unsorted to a ring of CQ_BUCKETS buckets (time >> cq_shift from cq_cur on, one a
    # bucket) or, further still, to an overflow list; a bucket goes into the heap when
    # the heap runs dry.  A binary heap of every event (millions at 8,192 GPUs, booked far
    # ahead on FIFO links) walked cache misses at each of its levels; this one stays small.
    def _push(self, t, kind, c, j):
        seq = self.seq
        self.seq += 1
        p = kind | (j << 2) | (c << KSHIFT)
        b = t >> self.cq_shift
        if b < self.cq_cur:
            self._heap_push(t, seq, p)
        elif b < self.cq_cur + CQ_BUCKETS:
            self._cq_append(b & (CQ_BUCKETS - 1), t, seq, p)
            self.cq_n += 1
        else:
            if 3 * self.ov_n == len(self.ov):
                self.ov = _grown(self.ov, "q", len(self.ov), 0)
            self.ov[3 * self.ov_n] = t
            self.ov[3 * self.ov_n + 1] = seq
            self.ov[3 * self.ov_n + 2] = p
            self.ov_n += 1
            if t < self.ov_min_ps:
                self.ov_min_ps = t
        if self.hn + self.cq_n + self.ov_n > self.peak_events:
            self.peak_events = self.hn + self.cq_n + self.ov_n

    def _cq_append(self, b, t, seq, p):
        """Event (t, seq, p) at the tail of bucket ``b``: a chain of blocks of CQB events."""
        if self.cb_toff[b] == CQB or self.cb_tail[b] < 0:
            if self.cq_nfree == 0:  # twice the blocks
                old = len(self.cq_next)
                self.cq = _grown(self.cq, "q", 3 * CQB * old, 0)
                self.cq_next = _grown(self.cq_next, "q", old, -1)
                self.cq_free = _grown(self.cq_free, "q", old, 0)
                for k in range(old):
                    self.cq_free[k] = 2 * old - 1 - k
                self.cq_nfree = old
            self.cq_nfree -= 1
            blk = self.cq_free[self.cq_nfree]
            self.cq_next[blk] = -1
            if self.cb_tail[b] < 0:
                self.cb_head[b] = blk
            else:
                self.cq_next[self.cb_tail[b]] = blk
            self.cb_tail[b] = blk
            self.cb_toff[b] = 0
        i = 3 * (self.cb_tail[b] * CQB + self.cb_toff[b])
        self.cq[i] = t
        self.cq[i + 1] = seq
        self.cq[i + 2] = p
        self.cb_toff[b] += 1

    def _cq_next(self):
        """The heap empty and events in the buckets or the overflow: the next bucket that
        has events into the heap."""
        while self.hn == 0:
            if self.cq_n == 0:  # only the overflow: on to its first event
                b = self.ov_min_ps >> self.cq_shift
                if b > self.cq_cur:
                    self.cq_cur = b
            if self.ov_n > 0 and (self.ov_min_ps >> self.cq_shift) < self.cq_cur + CQ_BUCKETS:
                self._ov_spill()
            b = self.cq_cur & (CQ_BUCKETS - 1)
            self.cq_cur += 1
            blk = self.cb_head[b]
            if self.cb_tail[b] < 0:
                continue
            while blk >= 0:
                k = CQB if blk != self.cb_tail[b] else self.cb_toff[b]
                i = 3 * blk * CQB
                for e in range(i, i + 3 * k, 3):
                    self._heap_push(self.cq[e], self.cq[e + 1], self.cq[e + 2])
                self.cq_n -= k
                nxt = self.cq_next[blk]
                self.cq_free[self.cq_nfree] = blk
                self.cq_nfree += 1
                blk = nxt
            self.cb_head[b] = -1
            self.cb_tail[b] = -1

    def _ov_spill(self):
        """The overflow's events that the buckets now reach into them (or the heap)."""
        keep = 0
        self.ov_min_ps = -NEVER
        for e in range(0, 3 * self.ov_n, 3):
            t = self.ov[e]
            b = t >> self.cq_shift
            if b < self.cq_cur:
                self._heap_push(t, self.ov[e + 1], self.ov[e + 2])
            elif b < self.cq_cur + CQ_BUCKETS:
                self._cq_append(b & (CQ_BUCKETS - 1), t, self.ov[e + 1], self.ov[e + 2])
                self.cq_n += 1
            else:
                self.ov[3 * keep] = t
                self.ov[3 * keep + 1] = self.ov[e + 1]
                self.ov[3 * keep + 2] = self.ov[e + 2]
                keep += 1
                if t < self.ov_min_ps:
                    self.ov_min_ps = t
        self.ov_n = keep

    def _heap_push(self, t, seq, p):
        if 3 * self.hn == len(self.hp):
            self._grow_heap()
        i = self.hn
        self.hn += 1
        while i > 0:
            par = (i - 1) >> 1
            pt = self.hp[3 * par]
            if pt < t or (pt == t and self.hp[3 * par + 1] < seq):
                break
            self.hp[3 * i] = pt
            self.hp[3 * i + 1] = self.hp[3 * par + 1]
            self.hp[3 * i + 2] = self.hp[3 * par + 2]
            i = par
        self.hp[3 * i] = t
        self.hp[3 * i + 1] = seq
        self.hp[3 * i + 2] = p

    def _pop(self):
        """Remove the heap's first entry (read it first)."""
        self.hn -= 1
        n = self.hn
        if n == 0:
            return
        t = self.hp[3 * n]
        seq = self.hp[3 * n + 1]
        p = self.hp[3 * n + 2]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            ct = self.hp[3 * c]
            if c + 1 < n:
                rt = self.hp[3 * c + 3]
                if rt < ct or (rt == ct and self.hp[3 * c + 4] < self.hp[3 * c + 1]):
                    c += 1
                    ct = rt
            if t < ct or (t == ct and seq < self.hp[3 * c + 1]):
                break
            self.hp[3 * i] = ct
            self.hp[3 * i + 1] = self.hp[3 * c + 1]
            self.hp[3 * i + 2] = self.hp[3 * c + 2]
            i = c
        self.hp[3 * i] = t
        self.hp[3 * i + 1] = seq
        self.hp[3 * i + 2] = p

    def _push_step(self, f, t, c, j):
        """An EV_CHANNEL event on FIFO ``f``: a step latency is one of two constants and
        events are made in time order, so each FIFO is in (time, order) order already."""
        if self.fq_n[f] == self.fq_cap:
            self._grow_fifos()
        cap = self.fq_cap
        i = f * cap + (self.fq_head[f] + self.fq_n[f]) % cap
        self.fq_n[f] += 1
        self.fq_time_ps[i] = t
        self.fq_seq[i] = self.seq
        self.seq += 1
        self.fq_p[i] = (j << 2) | (c << KSHIFT)

    def _grow_fifos(self):
        old = self.fq_cap
        cap = 2 * old
        ts, seqs, ps = _filled(2 * cap, 0), _filled(2 * cap, 0), _filled(2 * cap, 0)
        for f in range(2):
            for k in range(self.fq_n[f]):
                i = f * old + (self.fq_head[f] + k) % old
                ts[f * cap + k] = self.fq_time_ps[i]
                seqs[f * cap + k] = self.fq_seq[i]
                ps[f * cap + k] = self.fq_p[i]
            self.fq_head[f] = 0
        self.fq_time_ps, self.fq_seq, self.fq_p = ts, seqs, ps
        self.fq_cap = cap

    # ------------------------------------------------------------------ the copies' ends
    def _cp_slot(self, key):
        h = (key & 0xFFFFFFF) * 40503 + (key >> 28)
        return (h ^ (h >> 15)) & (len(self.cp_key) - 1)

    def _cp_put(self, key, end_ps):
        """Keep ``end_ps`` for ``key`` (not kept yet)."""
        if 2 * (self.cp_n + 1) > len(self.cp_key):  # at most half full: twice the slots
            keys, ends = self.cp_key, self.cp_end_ps
            self.cp_key = _filled(2 * len(keys), -1)
            self.cp_end_ps = _filled(2 * len(keys), 0)
            self.cp_n = 0
            for i in range(len(keys)):
                if keys[i] >= 0:
                    self._cp_put(keys[i], ends[i])
        mask = len(self.cp_key) - 1
        i = self._cp_slot(key)
        while self.cp_key[i] >= 0:
            i = (i + 1) & mask
        self.cp_key[i] = key
        self.cp_end_ps[i] = end_ps
        self.cp_n += 1

    def _cp_take(self, key):
        """The end kept for ``key``, no longer kept (NEVER: none)."""
        mask = len(self.cp_key) - 1
        i = self._cp_slot(key)
        while self.cp_key[i] != key:
            if self.cp_key[i] < 0:
                return NEVER
            i = (i + 1) & mask
        out = self.cp_end_ps[i]
        # the entries after it that it may hold back from their slot move back a place
        j = i
        while True:
            j = (j + 1) & mask
            k = self.cp_key[j]
            if k < 0:
                break
            h = self._cp_slot(k)
            if (i < j and (h <= i or h > j)) or (j < i and h <= i and h > j):
                self.cp_key[i] = k
                self.cp_end_ps[i] = self.cp_end_ps[j]
                i = j
        self.cp_key[i] = -1
        self.cp_n -= 1
        return out

    # ------------------------------------------------------------------ a transfer
    def _deps_done(self, c, j, now):
        """Transfer ``j`` of chunk ``c`` has what it waits for (at ``now``)."""
        if self.has_host:  # NCCL's step latency, then its channel (EV_CHANNEL)
            tj = self.st_tpl[self.ck_s[c]] * self.m + j
            f = self.tp[tj * TPD + _TFIFO]
            self._push_step(f, now + self.step_ps[f], c, j)
        else:
            self._ready(c, j, now)

    def _on_channel(self, c, j, now):
        """The sending GPU channel moves the transfer's bytes, one transfer at a time."""
        s = self.ck_s[c]
        tj = self.st_tpl[s] * self.m + j
        if not self.tp[tj * TPD + _TGPU]:  # an NVLS buffer's sends are the NVSwitch's
            self._ready(c, j, now)
            return
        sz = self.st_sz[s * self.Lmax + self.ck_loop[c]]
        busy = self.busy_ps[sz]
        if busy == 0:
            self._ready(c, j, now)
            return
        if self.tp[tj * TPD + _TPOOL] < 0:  # the copies of a node's GPUs: each its channel
            start = self._channels(
                self.tp[tj * TPD + _TSRC], self.tp[tj * TPD + _TDST]
                if -self.tp[tj * TPD + _TPOOL] < self.pool_g else -1,
                self.st_ch[s], now, busy, self.chan_free_ps) - busy
        else:
            key = self.tp[tj * TPD + _TSRC] * self.nc + self.st_ch[s]
            start = self.chan_free_ps[key]
            if start < now:
                start = now
            self.chan_free_ps[key] = start + busy
        done = start + busy
        if self.tp[tj * TPD + _TKIND] != K_NVL:  # the network: a step into the send buffer
            self._push(done, EV_READY, c, j)
            return
        if start > now:
            self._push(start, EV_READY, c, j)
        else:
            self._ready(c, j, now)

    def _channels(self, pool, dst, ch, now, busy, free_ps):
        """The GPU channels ``ch`` of pool ``pool``'s node (but the head of reduce buffer
        ``dst``, if the pool's copies leave it out) each busy for ``busy`` from ``now`` or
        when free (``free_ps``, moved on): when the last is done."""
        g = self.pool_g
        base = (pool - (self.P - self.n // g)) * g
        skip = -1
        if dst >= 0:  # a copy into head h's reduce buffer: h adds its own (NVLS tree)
            skip = base + (dst - self.n) // 2 % g
        done = NEVER
        for r in range(base, base + g):
            if r == skip:
                continue
            key = r * self.nc + ch
            start = free_ps[key]
            if start < now:
                start = now
            free_ps[key] = start + busy
            if start + busy > done:
                done = start + busy
        return done

    def _ready(self, c, j, now):
        """Data ready: the connection posts its sends in order, as far as they are ready.
        A GPU channel's copy (Simple, NCCL's host side) is ready when its channel starts it
        and ends its step time later: the post waits for that end, kept (``_cp_put``) for
        a send held back by its connection's order.  Per connection ``conn`` holds its next
        chunk to post and how many of its later chunks are ready, held back (so that the
        chunks after the one posted are looked at only when some are)."""
        m = self.m
        self.wait[c * m + j] = R_DATA
        s = self.ck_s[c]
        cn = 2 * (s * m + j)
        copy = (self.has_host and self.simple
                and self.tp[(self.st_tpl[s] * m + j) * TPD + _TCIX] >= 0)
        loop = self.ck_loop[c]
        if self.conn[cn] != loop:  # held back by an earlier chunk
            self.conn[cn + 1] += 1
            if copy:
                self._cp_put(c * m + j, now + self.busy_ps[self.st_sz[s * self.Lmax + loop]])
            return
        self.conn[cn] = loop + 1
        if copy:
            self._post(c, j, now, now + self.busy_ps[self.st_sz[s * self.Lmax + loop]])
        else:
            self._post(c, j, now, NEVER)
        loops = self.st_loops[s]
        while self.conn[cn + 1] > 0:
            loop = self.conn[cn]
            if loop >= loops:
                break
            c2 = self.st_chunk[s * self.Lmax + loop]
            if c2 < 0 or self.wait[c2 * m + j] != R_DATA:
                break
            self.conn[cn] = loop + 1
            self.conn[cn + 1] -= 1
            if copy:
                self._post(c2, j, now, self._cp_take(c2 * m + j))
            else:
                self._post(c2, j, now, NEVER)

    def _post(self, c, j, now, copy_end_ps):
        """Post transfer ``j`` of chunk ``c`` now (over NVLink: received not before
        ``copy_end_ps``)."""
        m = self.m
        self.wait[c * m + j] = R_POSTED
        if now < self.first_post_ps:
            self.first_post_ps = now
        s = self.ck_s[c]
        tj = self.st_tpl[s] * m + j
        if self.trace is not None:
            self.trace[(s, self.ck_loop[c], j)] = [now, None]
        kind = self.tp[tj * TPD + _TKIND]
        if kind == K_NET:
            self._post_net(c, j, now)
            return
        sz = self.st_sz[s * self.Lmax + self.ck_loop[c]]
        wire = self.wire_bytes[sz]
        if wire == 0:
            self._finish(c, j, now)
            return
        # NVLink (NvlinkDomain.reserve): the sender's egress, then the receiver's ingress
        frm = self.tp[tj * TPD + _TFROM]
        to = self.tp[tj * TPD + _TTO]
        dur = self.nvl_ps[sz]
        pool = self.tp[tj * TPD + _TPOOL]
        if pool != 0:  # on a node's pooled ports: pool_g ports' capacity
            k = pool if pool > 0 else -pool
            dur = dur * k // self.pool_g
            wire *= k
        left = now
        if frm >= 0 and self.egress_free_ps[frm] > left:
            left = self.egress_free_ps[frm]
        end = left
        if to >= 0 and self.ingress_free_ps[to] > end:
            end = self.ingress_free_ps[to]
        end += dur
        if frm >= 0:
            self.egress_free_ps[frm] = left + dur
            self.nvl_bytes += wire
        if to >= 0:
            self.ingress_free_ps[to] = end
        at = end + self.nvl_lat_ps
        if copy_end_ps > at:  # NCCL's host side: not before the channel's copy ends
            at = copy_end_ps
        if kind == K_PXN:
            self._push(at, EV_NET, c, j)
            return
        if self.recv_copy and pool < 0:  # each GPU of the node copies it out
            at = self._channels(self.tp[tj * TPD + _TDST], -1, self.st_ch[s], at,
                                self.busy_ps[sz], self.recv_free_ps)
        elif self.recv_copy:  # the receiver's channel copies it out of its FIFO
            key = self.tp[tj * TPD + _TDST] * self.nc + self.st_ch[s]
            start = self.recv_free_ps[key]
            if start < at:
                start = at
            at = start + self.busy_ps[sz]
            self.recv_free_ps[key] = at
        self._push(at, EV_FINISH, c, j)

    def _post_net(self, c, j, now):
        """Its QP pieces, each on every link of its QP's path: a link takes a piece from
        now or when it is free (each link a FIFO of the pieces in the order they are
        posted) and is busy for the piece's bytes at the link's rate; the piece is through
        when its last link is done, and received its path's latency later, when every piece
        is."""
        s = self.ck_s[c]
        m, q, nsz = self.m, self.q, self.nsz
        tj = self.st_tpl[s] * m + j
        sz = self.st_sz[s * self.Lmax + self.ck_loop[c]]
        base = (s * self.mnet + self.tp[tj * TPD + _TNET]) * q
        fin = NEVER
        for x in range(q):
            qb = self.qp_frame_bytes[sz * q + x]
            if qb == 0:
                continue
            i = base + x
            self.posted_bytes[i] += qb
            self.frames[i] += -(-qb // self.frame_bytes)
            end = NEVER
            for k in range(self.qp_poff[i], self.qp_poff[i + 1]):
                li = self.qp_links[k]
                start = self.link_free_ps[li]
                if start < now:
                    start = now
                e = start + self.link_dur_ps[(li * nsz + sz) * q + x]
                self.link_free_ps[li] = e
                if e > end:
                    end = e
            end += self.lat_ps[i]
            if end > fin:
                fin = end
        if fin == NEVER:
            self._finish(c, j, now)
        else:
            self._push(fin, EV_FINISH, c, j)

    def _finish(self, c, j, now):
        """Received: its users wait for one thing less."""
        m = self.m
        s = self.ck_s[c]
        loop = self.ck_loop[c]
        self.count += 1
        if now > self.last_recv_ps:
            self.last_recv_ps = now
        if self.trace is not None:
            self.trace[(s, loop, j)][1] = now
        if self.ck_done[c] == 0:  # the chunk whose slots this one frees
            self._open(s, loop + self.mi)
        self.ck_done[c] += 1
        tj = self.st_tpl[s] * m + j
        for k in range(self.tp[tj * TPD + _TUOFF], self.tp[tj * TPD + _TUEND]):
            u = self.tp_users[k]
            w = self.wait[c * m + u] - 1
            self.wait[c * m + u] = w
            if w == 0:
                self._deps_done(c, u, now)
        if loop + self.mi < self.st_loops[s]:  # the slots it frees mi chunks later
            c2 = self.st_chunk[s * self.Lmax + loop + self.mi]
            for k in range(self.tp[tj * TPD + _TSOFF], self.tp[tj * TPD + _TSEND]):
                u = self.tp_slot_users[k]
                w = self.wait[c2 * m + u] - 1
                self.wait[c2 * m + u] = w
                if w == 0:
                    self._deps_done(c2, u, now)
        if self.ck_done[c] == m:  # every transfer received: the slot is free again
            self.st_chunk[s * self.Lmax + loop] = -1
            self.free[self.nfree] = c
            self.nfree += 1
            self.open_chunks -= 1

    # ------------------------------------------------------------------ running
    def start(self, order: array) -> None:
        """Open the first ``max_inflight`` chunks of every stream and start the transfers
        that wait for nothing, in ``order`` (stream, chunk) pairs flattened: the order the
        schedule lists them."""
        m = self.m
        for k in range(0, len(order), 2):
            s = order[k]
            loop = order[k + 1]
            self._open(s, loop)
        for k in range(0, len(order), 2):
            s = order[k]
            loop = order[k + 1]
            c = self.st_chunk[s * self.Lmax + loop]
            if c < 0:
                continue
            tb = self.st_tpl[s] * m
            for j in range(m):
                if self.tp[(tb + j) * TPD + _TNDEPS] == 0:
                    self.wait[c * m + j] = 0
                    if self.has_host:
                        f = self.tp[(tb + j) * TPD + _TFIFO]
                        self._push_step(f, self.ready0_ps + self.step_ps[f], c, j)
                    else:
                        self._ready(c, j, self.ready0_ps)

    def run(self, progress: Callable[[int, int], None] | None, total: int) -> int:
        """Every event in time order; ``progress(count, total)`` about every second.
        Returns the events left (0: done)."""
        tick = time.monotonic()
        k = 0
        while True:
            # the first of the heap's and the two FIFOs' first events
            f = -1
            if self.hn == 0 and self.cq_n + self.ov_n > 0:
                self._cq_next()
            if self.hn > 0:
                t = self.hp[0]
                sq = self.hp[1]
            else:
                t = -NEVER
                sq = 0
            for g in range(2):
                if self.fq_n[g] > 0:
                    i = g * self.fq_cap + self.fq_head[g]
                    if self.fq_time_ps[i] < t or (self.fq_time_ps[i] == t and self.fq_seq[i] < sq):
                        f = g
                        t = self.fq_time_ps[i]
                        sq = self.fq_seq[i]
            if f >= 0:
                cap = self.fq_cap
                i = f * cap + self.fq_head[f]
                p = self.fq_p[i]
                self.fq_head[f] = (self.fq_head[f] + 1) % cap
                self.fq_n[f] -= 1
            elif self.hn > 0:
                p = self.hp[2]
                self._pop()
            else:
                break
            kind = p & 3
            j = (p >> 2) & ((1 << (KSHIFT - 2)) - 1)
            c = p >> KSHIFT
            if kind == EV_FINISH:
                self._finish(c, j, t)
            elif kind == EV_CHANNEL:
                self._on_channel(c, j, t)
            elif kind == EV_READY:
                self._ready(c, j, t)
            else:
                self._post_net(c, j, t)
            k += 1
            if progress is not None and k >= 65536:
                k = 0
                now = time.monotonic()
                if now - tick >= 1.0:
                    tick = now
                    progress(self.count, total)
        return self.hn + self.cq_n + self.ov_n + self.fq_n[0] + self.fq_n[1]


# Compiled (chunk_kernel.pxd), a cpdef method's Python signature has lost its return
# annotation: put back the ones written above (interpreted, they are there already).
for _name, _ret in (("start", "None"), ("run", "int")):
    vars(ChunkKernel)[_name].__annotations__.setdefault("return", _ret)

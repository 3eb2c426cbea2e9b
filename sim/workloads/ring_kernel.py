# cython: boundscheck=False, wraparound=False
"""The ring engine's sends, one at a time in time order (part of the compiled core).

:func:`sim.workloads.ring_engine.run_ring` sets up a ring call as arrays over its edges
(channel x ring position) and one grid of (loop, hop, slice) positions; :class:`RingKernel`
then plays every send.  An edge posts its next send as soon as what it waits for is known
(the data: the edge before has booked the send this one forwards; its FIFO slot: the send
``max_inflight`` earlier on the edge has been received; one send at a time after NCCL's
host side: the step latency and the sending GPU channel), at the time those give.  Posted
sends are booked in the order of their post times (a heap; ties in the order the schedule
lists sends: loop and hop, channel, piece, slice): each GPU's NVLink egress and ingress a
FIFO, the receiving channel's copy, the network QPs one message after another at their
fixed rates.  Every booking enables sends posted strictly later (a receipt comes a latency
after its post), so the order is the one the sends would have in an event-driven run.

The ``.py`` is the source; ``ring_kernel.pxd`` types it for Cython (the compiled core,
:mod:`sim._core`), with the same results: integers only, no negative index, ``//`` and ``%``
with Python's semantics.
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["RingKernel", "edge_records", "int_array"]

#: "no such time": below every time, harmless under max
NEVER = -(1 << 62)

# An edge's record in RingKernel.ed (es = ED + mi * PD fields from e * es): what it is, its
# state, then its mi send slots
_PREV = 0        # the edge before on its ring
_SUCC = 1        # the edge after
_CH = 2          # its channel
_POS = 3         # its ring position
_SRC = 4         # its GPU (NVLink egress)
_TO = 5          # the GPU whose NVLink ingress it takes
_FLAGS = 6       # _NVL | _USER | _PXN | _NET | _HELD
_STEP_PS = 7     # NCCL's step latency (ps)
_JP = 8          # the next grid position to post
_KP = 9          # sends posted
_KC = 10         # sends booked
_BK = 11         # the last position received
_SZ = 12         # the size index at _JP
_LAST_PS = 13    # the last post (ps)
_CHAN_FREE_PS = 14  # the sending GPU channel free at (ps)
_RECV_FREE_PS = 15  # the receiving channel free at (ps)
_KR = 16         # sends received (booked first: _KC; at packet fidelity the network's later)
ED = 17
_NVL = 1         # sent over NVLink to its receiver
_USER = 2        # takes NVLink ports (NVLink and PXN edges, NVLink modelled)
_PXN = 4         # sent by another GPU's NIC of its node, over NVLink to it first
_NET = 8         # sent over the network
_HELD = 16       # waiting for the next edge to move on (the receipts it keeps)
# a send slot's record (PD fields from e * es + ED + slot * PD)
_PPOS = 0        # its grid position
_PPOST_PS = 1    # posted at (ps)
_PSZ = 2         # its size index
_PCOPY_PS = 3    # its channel copy ends at (ps), NEVER: none
_PTIE = 4        # its order among sends posted at one picosecond
_PRECV_PS = 5    # received at (ps): the slot is then free for the send mi later
PD = 6


def int_array(values: np.ndarray | Sequence[int]) -> array:
    """``values`` (a numpy array or a sequence of ints) as the kernel's int64 array."""
    out = array("q")
    if hasattr(values, "tobytes"):
        out.frombytes(values.astype("<i8", copy=False).tobytes())
    else:
        out.extend(int(v) for v in values)
    return out


def edge_records(prev_e: np.ndarray, succ_e: np.ndarray, ch_of: np.ndarray,
                 pos_of: np.ndarray, src: np.ndarray, to: np.ndarray, nvl_edge: np.ndarray,
                 nvl_user: np.ndarray, pxn_edge: np.ndarray, net_edge: np.ndarray,
                 step_ps: np.ndarray, mi: int) -> array:
    """The edges' records for :class:`RingKernel` (numpy arrays over the edges, the flags
    booleans; ``mi`` send slots each): what each edge is, its state still to set."""
    import numpy as np

    rec = np.full((len(prev_e), ED + mi * PD), NEVER, dtype=np.int64)
    for f, col in ((_PREV, prev_e), (_SUCC, succ_e), (_CH, ch_of), (_POS, pos_of),
                   (_SRC, src), (_TO, to), (_STEP_PS, step_ps)):
        rec[:, f] = col
    rec[:, _FLAGS] = (np.where(nvl_edge, _NVL, 0) | np.where(nvl_user, _USER, 0)
                      | np.where(pxn_edge, _PXN, 0) | np.where(net_edge, _NET, 0))
    return int_array(rec.ravel())


def _filled(count, value) -> array:
    return array("q", [value]) * count


class RingKernel:
    """The state of one ring call's sends (arrays from :func:`~sim.workloads.ring_engine.
    run_ring`, flat, int64; ``(a, b)`` arrays are indexed ``i * b + j``).

    ``edges``: per edge its record (:func:`edge_records`: the edges before and after on its
    ring, its channel, ring position and GPU, the GPU whose NVLink ingress it takes, its
    flags, NCCL's step latency) with room for its state.  Per edge
    and QP ``lat_ps`` (path latency); per size index ``sz`` (0: no send) ``busy_ps`` (a GPU
    channel's time), ``nvl_ps`` (NVLink time), ``wire_bytes``, per size and QP
    ``qp_frame_bytes``, per size, edge and QP ``dur_ps`` (the QP's time at its rate).  The
    grid: per position ``g_loop``, ``g_hop``, ``g_s`` (slice), ``g_S`` (slices of its loop),
    ``g_lh`` (loop x hops + hop); per (loop, channel, ring place, slice) ``inv`` (the size
    index) and ``gap`` (positions to the next one with a send); ``piece_at`` (channel,
    place) the piece an edge sends at hop 0; ``loop_end`` the first position after each
    loop.  ``egress_free_ps`` and ``ingress_free_ps`` (per GPU) are read and moved on."""

    def __init__(self, dims, edges, edge_qp, sizes, grid, egress_free_ps, ingress_free_ps,
                 flags, window, trace, net=None) -> None:
        (self.E, self.n, self.nc, self.q, self.mi, self.Smax, self.J, self.ready0_ps,
         self.nvl_lat_ps, self.frame_bytes) = dims
        self.ed = edges
        self.lat_ps, self.dur_ps = edge_qp
        self.busy_ps, self.nvl_ps, self.wire_bytes, self.qp_frame_bytes = sizes
        (self.g_loop, self.g_hop, self.g_s, self.g_S, self.g_lh, self.inv, self.gap,
         self.piece_at, self.loop_end) = grid
        self.egress_free_ps, self.ingress_free_ps = egress_free_ps, ingress_free_ps
        self.has_host, self.recv_copy, self.simple = flags
        self.W = window
        self.trace = trace
        #: packet fidelity: ``net(e, at_ps, sz)`` posts edge ``e``'s send of size index
        #: ``sz`` on its QPs at ``at_ps``, and :meth:`received` is told when it arrived;
        #: None: the QPs are timed here at their rates (flow fidelity)
        self.net = net
        E, mi, q = self.E, self.mi, self.q
        self.es = ED + mi * PD
        self.recv_at_ps = _filled(E * self.W, NEVER)  # receipts by position (mod W)
        self.qp_free_ps = _filled(E * q, NEVER)
        self.posted_bytes = _filled(E * q, 0)
        self.frames = _filled(E * q, 0)
        # a heap of the edges with a send waiting to be booked, by that send's (post, tie)
        self.hp_post_ps = _filled(E + 1, 0)
        self.hp_tie = _filled(E + 1, 0)
        self.hp_e = _filled(E + 1, 0)
        self.hn = 0
        self.count = 0
        self.first_post_ps = NEVER
        self.last_recv_ps = NEVER
        self.nvl_bytes = 0
        self.held_back = 0
        for e in range(E):
            b = e * self.es
            self.ed[b + _JP] = 0
            self.ed[b + _KP] = 0
            self.ed[b + _KC] = 0
            self.ed[b + _BK] = -1
            self.ed[b + _KR] = 0
            self.ed[b + _LAST_PS] = NEVER
            self.ed[b + _CHAN_FREE_PS] = NEVER
            self.ed[b + _RECV_FREE_PS] = NEVER
            self.ed[b + _SZ] = self._size_at(0, e)

    # ------------------------------------------------------------------ the grid
    def _place(self, j, e):
        """The piece edge ``e`` sends at grid position ``j``."""
        n = self.n
        b = e * self.es
        return self.piece_at[self.ed[b + _CH] * n + (self.ed[b + _POS] - self.g_hop[j]) % n]

    def _size_at(self, j, e):
        return self.inv[((self.g_loop[j] * self.nc + self.ed[e * self.es + _CH]) * self.n
                         + self._place(j, e)) * self.Smax + self.g_s[j]]

    # ------------------------------------------------------------------ the heap
    def _sift_up(self, i, post, tie, e):
        while i > 0:
            p = (i - 1) // 2
            pp = self.hp_post_ps[p]
            if pp < post or (pp == post and self.hp_tie[p] < tie):
                break
            self.hp_post_ps[i] = pp
            self.hp_tie[i] = self.hp_tie[p]
            self.hp_e[i] = self.hp_e[p]
            i = p
        self.hp_post_ps[i] = post
        self.hp_tie[i] = tie
        self.hp_e[i] = e

    def _sift_down(self, post, tie, e):
        """Put (post, tie, e) at the root and move it down to its place."""
        n = self.hn
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            cp = self.hp_post_ps[c]
            if c + 1 < n:
                rp = self.hp_post_ps[c + 1]
                if rp < cp or (rp == cp and self.hp_tie[c + 1] < self.hp_tie[c]):
                    c += 1
                    cp = rp
            if post < cp or (post == cp and tie < self.hp_tie[c]):
                break
            self.hp_post_ps[i] = cp
            self.hp_tie[i] = self.hp_tie[c]
            self.hp_e[i] = self.hp_e[c]
            i = c
        self.hp_post_ps[i] = post
        self.hp_tie[i] = tie
        self.hp_e[i] = e

    # ------------------------------------------------------------------ posting
    def _try_post(self, e):
        """Post edge ``e``'s next sends while what they wait for is there; True if any."""
        J = self.J
        mi = self.mi
        W = self.W
        n = self.n
        b = e * self.es
        limit = W - 2 * self.Smax
        posted = False
        while True:
            j = self.ed[b + _JP]
            if j >= J:
                break
            sz = self.ed[b + _SZ]
            if sz == 0:  # an empty piece: on to the next position with a send
                li = self.g_loop[j]
                step = self.gap[((li * self.nc + self.ed[b + _CH]) * n
                                 + (self.ed[b + _POS] - self.g_hop[j]) % n) * self.Smax
                                + self.g_s[j]]
                nj = min(j + step, self.loop_end[li])
                self.ed[b + _JP] = nj
                self.ed[b + _SZ] = self._size_at(min(nj, J - 1), e)
                continue
            S = self.g_S[j]
            pv = self.ed[b + _PREV]
            hop = self.g_hop[j]
            if hop > 0 and self.ed[pv * self.es + _BK] < j - S:
                break  # its data: not received yet
            kp = self.ed[b + _KP]
            if kp - self.ed[b + _KR] >= mi:
                break  # its slot: not free yet
            if j >= self.ed[self.ed[b + _SUCC] * self.es + _JP] + limit:
                self.ed[b + _FLAGS] |= _HELD  # too far ahead of the next edge: the
                self.held_back += 1           # receipts it keeps would be overwritten
                break
            flags = self.ed[b + _FLAGS]
            ready = self.recv_at_ps[pv * W + (j - S) % W] if hop > 0 else NEVER
            ps = b + ED + kp % mi * PD
            if kp >= mi:  # the slot's last send was received then
                ready = max(ready, self.ed[ps + _PRECV_PS])
            ready = max(ready, self.ready0_ps)
            copy = NEVER
            if self.has_host:  # the step latency, then the sending channel
                t1 = ready + self.ed[b + _STEP_PS]
                bz = self.busy_ps[sz]
                if bz > 0:
                    cs = max(t1, self.ed[b + _CHAN_FREE_PS])
                    self.ed[b + _CHAN_FREE_PS] = cs + bz
                    if flags & _NVL:
                        ready = cs
                        if self.simple:
                            copy = cs + bz
                    else:
                        ready = cs + bz
                else:
                    ready = t1
            post = max(ready, self.ed[b + _LAST_PS])  # the connection's order
            self.ed[b + _LAST_PS] = post
            tie = ((self.g_lh[j] * self.nc + self.ed[b + _CH]) * n
                   + self._place(j, e)) * self.Smax + self.g_s[j]
            self.ed[ps + _PPOS] = j
            self.ed[ps + _PPOST_PS] = post
            self.ed[ps + _PSZ] = sz
            self.ed[ps + _PCOPY_PS] = copy
            self.ed[ps + _PTIE] = tie
            self.ed[b + _KP] = kp + 1
            self.ed[b + _JP] = j + 1
            self.ed[b + _SZ] = self._size_at(min(j + 1, J - 1), e)
            if kp == self.ed[b + _KC]:  # its first send waiting: the edge joins the heap
                self.hn += 1
                self._sift_up(self.hn - 1, post, tie, e)
            posted = True
        return posted

    def _post_chain(self, e):
        """:meth:`_try_post` of ``e``, then of the edges before it that were waiting for
        it to move on."""
        while self._try_post(e):
            x = self.ed[e * self.es + _PREV]
            if not self.ed[x * self.es + _FLAGS] & _HELD:
                break
            self.ed[x * self.es + _FLAGS] &= ~_HELD
            e = x

    # ------------------------------------------------------------------ booking
    def _book(self, e):
        """Book edge ``e``'s oldest waiting send; the heap's root is ``e``: it moves to its
        next waiting send, or leaves."""
        mi = self.mi
        q = self.q
        b = e * self.es
        kc = self.ed[b + _KC]
        ps = b + ED + kc % mi * PD
        post = self.ed[ps + _PPOST_PS]
        sz = self.ed[ps + _PSZ]
        flags = self.ed[b + _FLAGS]
        recv = NEVER
        net_at = post
        if flags & _USER:
            d = self.nvl_ps[sz]
            end = post
            if d > 0:  # the sender's egress, then the receiver's ingress: FIFOs
                g = self.ed[b + _SRC]
                start = max(post, self.egress_free_ps[g])
                self.egress_free_ps[g] = start + d
                h = self.ed[b + _TO]
                end = max(start, self.ingress_free_ps[h]) + d
                self.ingress_free_ps[h] = end
            self.nvl_bytes += self.wire_bytes[sz]
            full = max(end + self.nvl_lat_ps, self.ed[ps + _PCOPY_PS])
            if flags & _NVL:
                if self.has_host and self.recv_copy:  # the receiving channel's copy
                    rc = max(full, self.ed[b + _RECV_FREE_PS]) + self.busy_ps[sz]
                    self.ed[b + _RECV_FREE_PS] = rc
                    full = rc
                recv = full
            if flags & _PXN:
                net_at = full
        network = False
        if flags & _NET:  # each QP's message after the one before
            if self.net is not None:  # packets: received when the network says so
                network = True
            else:
                arrive = NEVER
                any_ = False
                for k in range(q):
                    qb = self.qp_frame_bytes[sz * q + k]
                    if qb > 0:
                        i = e * q + k
                        done = max(net_at, self.qp_free_ps[i]) + self.dur_ps[
                            (sz * self.E + e) * q + k]
                        self.qp_free_ps[i] = done
                        self.posted_bytes[i] += qb
                        self.frames[i] += -(-qb // self.frame_bytes)
                        arrive = max(arrive, done + self.lat_ps[i])
                        any_ = True
                recv = arrive if any_ else post
        kc += 1
        self.ed[b + _KC] = kc
        if self.first_post_ps == NEVER or post < self.first_post_ps:
            self.first_post_ps = post
        if kc < self.ed[b + _KP]:  # its next waiting send takes its place in the heap
            ps2 = b + ED + kc % mi * PD
            self._sift_down(self.ed[ps2 + _PPOST_PS], self.ed[ps2 + _PTIE], e)
        else:
            self.hn -= 1
            last = self.hn
            self._sift_down(self.hp_post_ps[last], self.hp_tie[last], self.hp_e[last])
        if network:
            self.net(e, net_at, sz)
        else:
            self._receive(e, recv)

    def _receive(self, e, recv):
        """Edge ``e``'s oldest send not yet received arrived at ``recv``."""
        mi = self.mi
        b = e * self.es
        kr = self.ed[b + _KR]
        ps = b + ED + kr % mi * PD
        j = self.ed[ps + _PPOS]
        self.recv_at_ps[e * self.W + j % self.W] = recv
        self.ed[ps + _PRECV_PS] = recv
        self.ed[b + _KR] = kr + 1
        self.ed[b + _BK] = j
        self.count += 1
        if recv > self.last_recv_ps:
            self.last_recv_ps = recv
        if self.trace is not None:
            self.trace[(self.g_loop[j], self.g_hop[j], self.g_s[j], self.ed[b + _CH],
                        self.ed[b + _SRC])] = (self.ed[ps + _PPOST_PS], recv)

    def received(self, e: int, recv: int) -> None:
        """Packet fidelity: edge ``e``'s oldest send in the network arrived at ``recv``
        (the engine's time); the sends it lets go are posted."""
        self._receive(e, recv)
        self._post_chain(e)
        self._post_chain(self.ed[e * self.es + _SUCC])

    def next_ps(self) -> int | None:
        """The post time of the next send to book (None: none waiting)."""
        if self.hn == 0:
            return None
        return self.hp_post_ps[0]

    def start(self) -> None:
        """Post every send that waits for nothing."""
        for e in range(self.E):
            self._post_chain(e)

    def run_until(self, limit_ps: int) -> None:
        """Book, in order, every send posted at or before ``limit_ps`` (those it lets go
        too)."""
        while self.hn > 0 and self.hp_post_ps[0] <= limit_ps:
            e = self.hp_e[0]
            self._book(e)
            self._post_chain(e)
            self._post_chain(self.ed[e * self.es + _SUCC])

    def left(self) -> int:
        """The edges with sends not yet posted (0: every send posted)."""
        n = 0
        for e in range(self.E):
            if self.ed[e * self.es + _JP] < self.J:
                n += 1
        return n

    def run(self, progress: Callable[[int, int], None] | None, total: int) -> int:
        """Flow fidelity: post and book every send; ``progress(done, total)`` about once a
        second.  Returns the edges left with sends not posted (0: all done)."""
        told = time.monotonic()
        self.start()
        tick = 0
        while self.hn > 0:
            e = self.hp_e[0]
            self._book(e)
            self._post_chain(e)
            self._post_chain(self.ed[e * self.es + _SUCC])
            tick += 1
            if progress is not None and tick >= 65536:
                tick = 0
                now = time.monotonic()
                if now - told > 1.0:
                    progress(self.count, total)
                    told = now
        return self.left()


# Compiled (ring_kernel.pxd), a cpdef method's Python signature has lost its return
# annotation: put back the ones written above (interpreted, they are there already).
for _name, _ret in (("received", "None"), ("next_ps", "int | None"), ("start", "None"),
                    ("run_until", "None"), ("left", "int"), ("run", "int")):
    vars(RingKernel)[_name].__annotations__.setdefault("return", _ret)

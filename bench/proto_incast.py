"""A prototype of the design the speed targets would need: packet and port state as flat
integer arrays (C arrays once compiled), the event loop and every handler C functions, no
Python object a packet.  Not a model of the project: a measuring stick for
``python -m bench proto`` (:mod:`bench.proto_bench`).

What it simulates: ``senders`` hosts each sending 1082-byte frames at line rate into one
switch port towards one receiver (an N:1 incast, as ``python -m bench sim``'s incast),
links of ``prop_ps``; the switch's shared buffer with a static PFC threshold per ingress
port (XOFF at ``xoff_bytes``, XON ``xon_delta_bytes`` below it: a PAUSE frame to the
sender, which stops between frames until the XON), a drop when the buffer is full, ECN
marking on enqueue, RED-like between ``kmin`` and ``kmax`` (probability ``pmax_ppm`` per
million at kmax, a 64-bit xorshift drawn per frame above kmin).  A packet-hop is a frame
(data or PAUSE) leaving an egress port, as the project counts them.

Left out against the project's engine (so its cost per hop is a floor, not a like-for-like
figure): PFC pause quanta and their refresh, priorities and traffic classes, the NIC's
transport (ACKs, PSNs, retransmission), flows as objects, rate control, tracing, counters
per port, the MMU's reserved and headroom pools.

The ``.py`` is the source; ``proto_incast.pxd`` types it for Cython (integers only, as the
compiled core's kernels): interpreted and compiled runs give the same counts.
"""

from __future__ import annotations

from array import array

__all__ = ["IncastKernel"]

# event kinds (hp[4 * i + 2]): a host's or a switch port's frame is out, a frame arrives
# at a switch port, a frame arrives at a host
EV_HOST_DONE = 0
EV_SWITCH_DONE = 1
EV_AT_SWITCH = 2
EV_AT_HOST = 3
# packet kinds (pk_kind)
PK_DATA = 0
PK_XOFF = 1
PK_XON = 2
MASK64 = (1 << 64) - 1


def _filled(count, value) -> array:
    return array("q", [value]) * count


class IncastKernel:
    """``senders`` hosts (0 .. senders-1) into host ``senders`` through one switch whose port
    ``i`` faces host ``i``.  Times in picoseconds; ``ser_ps`` a data frame's time on the
    wire, ``pause_ser_ps`` a PAUSE frame's."""

    def __init__(self, senders, frame_bytes, ser_ps, pause_ser_ps, prop_ps, buffer_bytes,
                 xoff_bytes, xon_delta_bytes, kmin_bytes, kmax_bytes, pmax_ppm,
                 seed) -> None:
        self.senders = senders
        self.ports = senders + 1
        self.frame_bytes = frame_bytes
        self.ser_ps = ser_ps
        self.pause_ser_ps = pause_ser_ps
        self.prop_ps = prop_ps
        self.buffer_bytes = buffer_bytes
        self.xoff_bytes = xoff_bytes
        self.xon_bytes = xoff_bytes - xon_delta_bytes
        self.kmin_bytes = kmin_bytes
        self.kmax_bytes = kmax_bytes
        self.pmax_ppm = pmax_ppm
        self.rng = seed & MASK64 or 1
        P = self.ports
        # hosts: busy sending, paused by PFC
        self.h_busy = _filled(P, 0)
        self.h_paused = _filled(P, 0)
        # switch ports: busy, the data queue and the PAUSE queue (linked lists of packets:
        # head, tail), the data queue's bytes, per ingress port its bytes and XOFF state
        self.s_busy = _filled(P, 0)
        self.dq_head = _filled(P, -1)
        self.dq_tail = _filled(P, -1)
        self.cq_head = _filled(P, -1)
        self.cq_tail = _filled(P, -1)
        self.q_bytes = _filled(P, 0)
        self.in_bytes = _filled(P, 0)
        self.xoff = _filled(P, 0)
        self.used_bytes = 0
        # packets (a pool, grown on demand): kind, sender, ingress port, ECN CE, next
        self.pk_kind = _filled(64, 0)
        self.pk_src = _filled(64, 0)
        self.pk_in = _filled(64, 0)
        self.pk_ce = _filled(64, 0)
        self.pk_next = _filled(64, -1)
        self.pk_free = array("q", range(63, -1, -1))
        self.nfree = 64
        # the event heap: (time, order, kind, port << 32 | packet) at 4 * i
        self.hp = _filled(4 * 64, 0)
        self.hn = 0
        self.seq = 0
        # what it counts
        self.hops = 0
        self.sent = 0
        self.delivered = 0
        self.marked = 0
        self.pauses = 0
        self.pause_frames = 0
        self.drops = 0
        self.events = 0

    # ------------------------------------------------------------------ storage
    def _alloc(self, kind, src, port):
        if self.nfree == 0:
            old = len(self.pk_kind)
            for name in ("pk_kind", "pk_src", "pk_in", "pk_ce", "pk_next"):
                a = array("q", getattr(self, name))
                a.extend(_filled(old, 0))
                setattr(self, name, a)
            fr = array("q", range(2 * old - 1, old - 1, -1))
            fr.extend(_filled(old, 0))
            self.pk_free = fr
            self.nfree = old
        self.nfree -= 1
        p = self.pk_free[self.nfree]
        self.pk_kind[p] = kind
        self.pk_src[p] = src
        self.pk_in[p] = port
        self.pk_ce[p] = 0
        self.pk_next[p] = -1
        return p

    def _release(self, p):
        self.pk_free[self.nfree] = p
        self.nfree += 1

    # ------------------------------------------------------------------ the event heap
    def _push(self, t, kind, port, p):
        if 4 * self.hn == len(self.hp):
            a = array("q", self.hp)
            a.extend(_filled(len(self.hp), 0))
            self.hp = a
        seq = self.seq
        self.seq += 1
        x = port << 32 | p
        i = self.hn
        self.hn += 1
        while i > 0:
            par = (i - 1) >> 1
            pt = self.hp[4 * par]
            if pt < t or (pt == t and self.hp[4 * par + 1] < seq):
                break
            self.hp[4 * i] = pt
            self.hp[4 * i + 1] = self.hp[4 * par + 1]
            self.hp[4 * i + 2] = self.hp[4 * par + 2]
            self.hp[4 * i + 3] = self.hp[4 * par + 3]
            i = par
        self.hp[4 * i] = t
        self.hp[4 * i + 1] = seq
        self.hp[4 * i + 2] = kind
        self.hp[4 * i + 3] = x

    def _pop(self):
        self.hn -= 1
        n = self.hn
        if n == 0:
            return
        t = self.hp[4 * n]
        seq = self.hp[4 * n + 1]
        kind = self.hp[4 * n + 2]
        x = self.hp[4 * n + 3]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= n:
                break
            ct = self.hp[4 * c]
            if c + 1 < n:
                rt = self.hp[4 * c + 4]
                if rt < ct or (rt == ct and self.hp[4 * c + 5] < self.hp[4 * c + 1]):
                    c += 1
                    ct = rt
            if t < ct or (t == ct and seq < self.hp[4 * c + 1]):
                break
            self.hp[4 * i] = ct
            self.hp[4 * i + 1] = self.hp[4 * c + 1]
            self.hp[4 * i + 2] = self.hp[4 * c + 2]
            self.hp[4 * i + 3] = self.hp[4 * c + 3]
            i = c
        self.hp[4 * i] = t
        self.hp[4 * i + 1] = seq
        self.hp[4 * i + 2] = kind
        self.hp[4 * i + 3] = x

    # ------------------------------------------------------------------ hosts
    def _host_send(self, h, now):
        """Host ``h`` starts its next frame if it is a sender, idle and not paused."""
        if h >= self.senders or self.h_busy[h] or self.h_paused[h]:
            return
        p = self._alloc(PK_DATA, h, h)
        self.h_busy[h] = 1
        self.hops += 1
        self.sent += 1
        self._push(now + self.ser_ps, EV_HOST_DONE, h, 0)
        self._push(now + self.ser_ps + self.prop_ps, EV_AT_SWITCH, h, p)

    def _at_host(self, h, p, now):
        kind = self.pk_kind[p]
        if kind == PK_DATA:
            self.delivered += 1
            self.marked += self.pk_ce[p]
        elif kind == PK_XOFF:
            self.h_paused[h] = 1
        else:
            self.h_paused[h] = 0
            self._host_send(h, now)
        self._release(p)

    # ------------------------------------------------------------------ the switch
    def _draw_ppm(self):
        x = self.rng
        x ^= (x << 13) & MASK64
        x ^= x >> 7
        x ^= (x << 17) & MASK64
        self.rng = x
        return x % 1_000_000

    def _at_switch(self, i, p, now):
        """A data frame from host ``i``: admitted to the shared buffer (or dropped), marked,
        queued to the receiver's port; PFC XOFF to ``i`` past its threshold."""
        fb = self.frame_bytes
        if self.used_bytes + fb > self.buffer_bytes:
            self.drops += 1
            self._release(p)
            return
        self.used_bytes += fb
        self.in_bytes[i] += fb
        e = self.senders
        q = self.q_bytes[e]
        if q > self.kmin_bytes:
            if q >= self.kmax_bytes:
                ppm = self.pmax_ppm
            else:
                ppm = self.pmax_ppm * (q - self.kmin_bytes) // (self.kmax_bytes - self.kmin_bytes)
            if self._draw_ppm() < ppm:
                self.pk_ce[p] = 1
        self.q_bytes[e] = q + fb
        if self.dq_tail[e] < 0:
            self.dq_head[e] = p
        else:
            self.pk_next[self.dq_tail[e]] = p
        self.dq_tail[e] = p
        if not self.xoff[i] and self.in_bytes[i] >= self.xoff_bytes:
            self.xoff[i] = 1
            self.pauses += 1
            self._control(i, PK_XOFF, now)
        self._switch_send(e, now)

    def _control(self, i, kind, now):
        """A PAUSE frame (XOFF or XON) queued on port ``i``, ahead of its data."""
        c = self._alloc(kind, -1, i)
        self.pause_frames += 1
        if self.cq_tail[i] < 0:
            self.cq_head[i] = c
        else:
            self.pk_next[self.cq_tail[i]] = c
        self.cq_tail[i] = c
        self._switch_send(i, now)

    def _switch_send(self, e, now):
        """Port ``e`` starts its next frame if idle: a PAUSE first, else its queue's head
        (leaving the buffer as it starts; XON to its ingress port below the threshold)."""
        if self.s_busy[e]:
            return
        p = self.cq_head[e]
        if p >= 0:
            self.cq_head[e] = self.pk_next[p]
            if self.cq_head[e] < 0:
                self.cq_tail[e] = -1
            dur = self.pause_ser_ps
        else:
            p = self.dq_head[e]
            if p < 0:
                return
            self.dq_head[e] = self.pk_next[p]
            if self.dq_head[e] < 0:
                self.dq_tail[e] = -1
            fb = self.frame_bytes
            self.q_bytes[e] -= fb
            self.used_bytes -= fb
            i = self.pk_in[p]
            self.in_bytes[i] -= fb
            if self.xoff[i] and self.in_bytes[i] <= self.xon_bytes:
                self.xoff[i] = 0
                self._control(i, PK_XON, now)
            dur = self.ser_ps
        self.s_busy[e] = 1
        self.hops += 1
        self._push(now + dur, EV_SWITCH_DONE, e, 0)
        self._push(now + dur + self.prop_ps, EV_AT_HOST, e, p)

    # ------------------------------------------------------------------ running
    def run(self, until_ps: int) -> int:
        """Every event before ``until_ps``, in time order (ties in the order they were
        made).  Returns the events handled."""
        for h in range(self.senders):
            self._host_send(h, 0)
        k = 0
        while self.hn > 0:
            t = self.hp[0]
            if t >= until_ps:
                break
            kind = self.hp[2]
            x = self.hp[3]
            self._pop()
            port = x >> 32
            p = x & 0xFFFFFFFF
            if kind == EV_HOST_DONE:
                self.h_busy[port] = 0
                self._host_send(port, t)
            elif kind == EV_SWITCH_DONE:
                self.s_busy[port] = 0
                self._switch_send(port, t)
            elif kind == EV_AT_SWITCH:
                self._at_switch(port, p, t)
            else:
                self._at_host(port, p, t)
            k += 1
        self.events += k
        return k

# Types of sim/workloads/ring_kernel.py for the compiled core (Cython pure-Python mode: the
# .py is the source, this file only declares).  RingKernel is a cdef class whose arrays are
# int64 memoryviews (array.array('q') objects in both cores) and whose per-send methods are
# C methods; run() is what the ring engine calls.  The record offsets are C globals.
cimport cython

cdef long long NEVER
cdef Py_ssize_t _PREV, _SUCC, _CH, _POS, _SRC, _TO, _FLAGS, _STEP_PS, _JP, _KP, _KC, _BK
cdef Py_ssize_t _SZ, _LAST_PS, _CHAN_FREE_PS, _RECV_FREE_PS, _KR, ED
cdef long long _NVL, _USER, _PXN, _NET, _HELD
cdef Py_ssize_t _PPOS, _PPOST_PS, _PSZ, _PCOPY_PS, _PTIE, _PRECV_PS, PD


cdef class RingKernel:
    cdef public long long E, n, nc, q, mi, Smax, J, ready0_ps, nvl_lat_ps, frame_bytes, W
    cdef public long long[::1] ed, lat_ps, dur_ps, busy_ps, nvl_ps, wire_bytes
    cdef public long long[::1] qp_frame_bytes
    cdef public long long[::1] g_loop, g_hop, g_s, g_S, g_lh, inv, gap, piece_at, loop_end
    cdef public long long[::1] egress_free_ps, ingress_free_ps
    cdef public bint has_host, recv_copy, simple
    cdef public object trace, net
    cdef public long long es
    cdef public long long[::1] recv_at_ps, qp_free_ps, posted_bytes, frames
    cdef public long long[::1] hp_post_ps, hp_tie, hp_e
    cdef public long long hn, count, first_post_ps, last_recv_ps, nvl_bytes, held_back

    @cython.locals(n=cython.longlong, b=cython.longlong)
    cdef long long _place(self, long long j, long long e)
    cdef long long _size_at(self, long long j, long long e)
    @cython.locals(p=cython.longlong, pp=cython.longlong)
    cdef void _sift_up(self, long long i, long long post, long long tie, long long e)
    @cython.locals(n=cython.longlong, i=cython.longlong, c=cython.longlong,
                   cp=cython.longlong, rp=cython.longlong)
    cdef void _sift_down(self, long long post, long long tie, long long e)
    @cython.locals(J=cython.longlong, mi=cython.longlong, W=cython.longlong,
                   n=cython.longlong, b=cython.longlong, limit=cython.longlong, posted=bint,
                   j=cython.longlong, sz=cython.longlong, li=cython.longlong,
                   step=cython.longlong, nj=cython.longlong, S=cython.longlong,
                   pv=cython.longlong, hop=cython.longlong, kp=cython.longlong,
                   kc=cython.longlong, flags=cython.longlong, ready=cython.longlong,
                   ps=cython.longlong, copy=cython.longlong, t1=cython.longlong,
                   bz=cython.longlong, cs=cython.longlong, post=cython.longlong,
                   tie=cython.longlong)
    cdef bint _try_post(self, long long e)
    @cython.locals(x=cython.longlong)
    cdef void _post_chain(self, long long e)
    @cython.locals(mi=cython.longlong, q=cython.longlong, b=cython.longlong,
                   kc=cython.longlong, ps=cython.longlong, ps2=cython.longlong,
                   post=cython.longlong, sz=cython.longlong, flags=cython.longlong,
                   recv=cython.longlong, net_at=cython.longlong, d=cython.longlong,
                   end=cython.longlong, g=cython.longlong, start=cython.longlong,
                   h=cython.longlong, full=cython.longlong, rc=cython.longlong,
                   arrive=cython.longlong, any_=bint, network=bint, k=cython.longlong,
                   qb=cython.longlong, i=cython.longlong, done=cython.longlong,
                   last=cython.longlong)
    cdef void _book(self, long long e)
    @cython.locals(mi=cython.longlong, b=cython.longlong, kr=cython.longlong,
                   ps=cython.longlong, j=cython.longlong)
    cdef void _receive(self, long long e, long long recv)
    cpdef received(self, long long e, long long recv)
    cpdef next_ps(self)
    @cython.locals(e=cython.longlong)
    cpdef start(self)
    @cython.locals(e=cython.longlong)
    cpdef run_until(self, long long limit_ps)
    @cython.locals(e=cython.longlong, n=cython.longlong)
    cpdef long long left(self)
    @cython.locals(e=cython.longlong, tick=cython.longlong)
    cpdef long long run(self, object progress, long long total)

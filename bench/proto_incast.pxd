# Types of bench/proto_incast.py for Cython (pure-Python mode: the .py is the source, this
# file only declares); python -m bench proto compiles it into a temporary folder.
cimport cython

cdef long long EV_HOST_DONE, EV_SWITCH_DONE, EV_AT_SWITCH, EV_AT_HOST
cdef long long PK_DATA, PK_XOFF, PK_XON
cdef unsigned long long MASK64


cdef class IncastKernel:
    cdef public long long senders, ports, frame_bytes, ser_ps, pause_ser_ps, prop_ps
    cdef public long long buffer_bytes, xoff_bytes, xon_bytes, kmin_bytes, kmax_bytes
    cdef public long long pmax_ppm
    cdef public unsigned long long rng
    cdef public long long[::1] h_busy, h_paused, s_busy, dq_head, dq_tail, cq_head, cq_tail
    cdef public long long[::1] q_bytes, in_bytes, xoff
    cdef public long long used_bytes
    cdef public long long[::1] pk_kind, pk_src, pk_in, pk_ce, pk_next, pk_free
    cdef public long long nfree
    cdef public long long[::1] hp
    cdef public long long hn, seq
    cdef public long long hops, sent, delivered, marked, pauses, pause_frames, drops, events

    @cython.locals(p=cython.longlong, old=cython.longlong)
    cdef long long _alloc(self, long long kind, long long src, long long port)
    cdef void _release(self, long long p)
    @cython.locals(seq=cython.longlong, x=cython.longlong, i=cython.longlong,
                   par=cython.longlong, pt=cython.longlong)
    cdef void _push(self, long long t, long long kind, long long port, long long p)
    @cython.locals(n=cython.longlong, t=cython.longlong, seq=cython.longlong,
                   kind=cython.longlong, x=cython.longlong, i=cython.longlong,
                   c=cython.longlong, ct=cython.longlong, rt=cython.longlong)
    cdef void _pop(self)
    @cython.locals(p=cython.longlong)
    cdef void _host_send(self, long long h, long long now)
    @cython.locals(kind=cython.longlong)
    cdef void _at_host(self, long long h, long long p, long long now)
    @cython.locals(x=cython.ulonglong)
    cdef long long _draw_ppm(self)
    @cython.locals(fb=cython.longlong, e=cython.longlong, q=cython.longlong,
                   ppm=cython.longlong)
    cdef void _at_switch(self, long long i, long long p, long long now)
    @cython.locals(c=cython.longlong)
    cdef void _control(self, long long i, long long kind, long long now)
    @cython.locals(p=cython.longlong, dur=cython.longlong, fb=cython.longlong,
                   i=cython.longlong)
    cdef void _switch_send(self, long long e, long long now)
    @cython.locals(h=cython.longlong, k=cython.longlong, t=cython.longlong,
                   kind=cython.longlong, x=cython.longlong, port=cython.longlong,
                   p=cython.longlong)
    cpdef long long run(self, long long until_ps)

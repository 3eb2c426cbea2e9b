# Types of sim/workloads/chunk_kernel.py for the compiled core (Cython pure-Python mode: the
# .py is the source, this file only declares).  ChunkKernel is a cdef class whose arrays are
# int64 memoryviews (array.array('q') objects in both cores, replaced when they grow) and
# whose per-transfer methods are C methods; start() and run() are what the engine calls.
cimport cython

cdef long long NEVER
cdef long long K_NVL, K_NET, K_PXN
cdef long long EV_CHANNEL, EV_READY, EV_NET, EV_FINISH, KSHIFT
cdef long long R_DATA, R_POSTED
cdef long long CQ_SHIFT, CQ_BUCKETS, CQB
cdef Py_ssize_t _TSRC, _TDST, _TKIND, _TFROM, _TTO, _TPOOL, _TGPU, _TNDEPS, _TUOFF, _TUEND
cdef Py_ssize_t _TNET, _TNSLOT, _TSOFF, _TSEND, _TCIX, _TFIFO, TPD


cdef class ChunkKernel:
    cdef public long long S, m, mnet, q, mi, Lmax, n, nc, P, nsz, ready0_ps, nvl_lat_ps
    cdef public long long frame_bytes, pool_g
    cdef public long long[::1] step_ps
    cdef public int[::1] tp, tp_users, tp_slot_users
    cdef public long long[::1] st_tpl, st_ch, st_loops, st_sz
    cdef public long long[::1] lat_ps, qp_poff, qp_links, link_dur_ps, link_free_ps
    cdef public long long[::1] busy_ps, nvl_ps, wire_bytes, qp_frame_bytes
    cdef public long long[::1] egress_free_ps, ingress_free_ps
    cdef public bint has_host, recv_copy, simple
    cdef public object trace
    cdef public long long[::1] posted_bytes, frames, chan_free_ps, recv_free_ps
    cdef public int[::1] conn, st_chunk
    cdef public long long cap, init_chunks
    cdef public long long[::1] ck_s, ck_loop, ck_done, free
    cdef public long long[::1] cp_key, cp_end_ps
    cdef public long long cp_n
    cdef public signed char[::1] wait
    cdef public long long nfree
    cdef public long long[::1] hp, cb_head, cb_tail, cb_toff, cq, cq_next, cq_free, ov
    cdef public long long cq_shift, cq_cur, cq_n, cq_nfree, ov_n, ov_min_ps
    cdef public long long fq_cap
    cdef public long long[::1] fq_time_ps, fq_seq, fq_p, fq_head, fq_n
    cdef public long long hn, seq, count, first_post_ps, last_recv_ps, nvl_bytes
    cdef public long long peak_chunks, open_chunks, peak_events

    cdef void _grow_chunks(self)
    cdef void _grow_heap(self)
    @cython.locals(c=cython.longlong, m=cython.longlong, tb=cython.longlong,
                   base=cython.longlong, j=cython.longlong, r=cython.longlong)
    cdef void _open(self, long long s, long long loop)
    @cython.locals(seq=cython.longlong, p=cython.longlong, b=cython.longlong)
    cdef void _push(self, long long t, long long kind, long long c, long long j)
    @cython.locals(old=cython.longlong, k=cython.longlong, blk=cython.longlong,
                   i=cython.longlong)
    cdef void _cq_append(self, long long b, long long t, long long seq, long long p)
    @cython.locals(b=cython.longlong, blk=cython.longlong, k=cython.longlong,
                   i=cython.longlong, e=cython.longlong, nxt=cython.longlong)
    cdef void _cq_next(self)
    @cython.locals(keep=cython.longlong, e=cython.longlong, t=cython.longlong,
                   b=cython.longlong)
    cdef void _ov_spill(self)
    @cython.locals(i=cython.longlong, par=cython.longlong, pt=cython.longlong)
    cdef void _heap_push(self, long long t, long long seq, long long p)
    @cython.locals(n=cython.longlong, t=cython.longlong, seq=cython.longlong,
                   p=cython.longlong, i=cython.longlong, c=cython.longlong,
                   best=cython.longlong, bt=cython.longlong, end=cython.longlong,
                   k=cython.longlong, kt=cython.longlong)
    cdef void _pop(self)
    @cython.locals(cap=cython.longlong, i=cython.longlong)
    cdef void _push_step(self, long long f, long long t, long long c, long long j)
    @cython.locals(old=cython.longlong, cap=cython.longlong, f=cython.longlong,
                   k=cython.longlong, i=cython.longlong)
    cdef void _grow_fifos(self)
    @cython.locals(h=cython.longlong)
    cdef long long _cp_slot(self, long long key)
    @cython.locals(mask=cython.longlong, i=cython.longlong, keys=cython.longlong[::1],
                   ends=cython.longlong[::1])
    cdef void _cp_put(self, long long key, long long end_ps)
    @cython.locals(mask=cython.longlong, i=cython.longlong, j=cython.longlong,
                   k=cython.longlong, h=cython.longlong, out=cython.longlong)
    cdef long long _cp_take(self, long long key)
    @cython.locals(tj=cython.longlong, f=cython.longlong)
    cdef void _deps_done(self, long long c, long long j, long long now)
    @cython.locals(s=cython.longlong, tj=cython.longlong, sz=cython.longlong,
                   busy=cython.longlong, key=cython.longlong, start=cython.longlong,
                   done=cython.longlong)
    cdef void _on_channel(self, long long c, long long j, long long now)
    @cython.locals(g=cython.longlong, base=cython.longlong, skip=cython.longlong,
                   done=cython.longlong, r=cython.longlong, key=cython.longlong,
                   start=cython.longlong)
    cdef long long _channels(self, long long pool, long long dst, long long ch, long long now,
                             long long busy, long long[::1] free_ps)
    @cython.locals(m=cython.longlong, s=cython.longlong, cn=cython.longlong,
                   loops=cython.longlong, loop=cython.longlong, c2=cython.longlong,
                   copy=cython.bint)
    cdef void _ready(self, long long c, long long j, long long now)
    @cython.locals(m=cython.longlong, s=cython.longlong, tj=cython.longlong,
                   kind=cython.longlong, sz=cython.longlong, wire=cython.longlong,
                   frm=cython.longlong, to=cython.longlong, dur=cython.longlong,
                   left=cython.longlong, end=cython.longlong, at=cython.longlong,
                   cp=cython.longlong, key=cython.longlong, start=cython.longlong,
                   k=cython.longlong, pool=cython.longlong)
    cdef void _post(self, long long c, long long j, long long now, long long copy_end_ps)
    @cython.locals(s=cython.longlong, m=cython.longlong, q=cython.longlong,
                   nsz=cython.longlong, tj=cython.longlong, sz=cython.longlong,
                   base=cython.longlong, fin=cython.longlong, x=cython.longlong,
                   qb=cython.longlong, i=cython.longlong, start=cython.longlong,
                   end=cython.longlong, k=cython.longlong, li=cython.longlong,
                   e=cython.longlong)
    cdef void _post_net(self, long long c, long long j, long long now)
    @cython.locals(m=cython.longlong, s=cython.longlong, loop=cython.longlong,
                   tj=cython.longlong, k=cython.longlong, u=cython.longlong,
                   w=cython.longlong, c2=cython.longlong)
    cdef void _finish(self, long long c, long long j, long long now)
    @cython.locals(m=cython.longlong, k=cython.longlong, s=cython.longlong,
                   loop=cython.longlong, c=cython.longlong, tb=cython.longlong,
                   j=cython.longlong, f=cython.longlong)
    cpdef start(self, long long[::1] order)
    @cython.locals(tick=cython.double, now=cython.double, k=cython.longlong,
                   t=cython.longlong, p=cython.longlong, kind=cython.longlong,
                   j=cython.longlong, c=cython.longlong, f=cython.longlong,
                   sq=cython.longlong, g=cython.longlong, i=cython.longlong,
                   cap=cython.longlong)
    cpdef long long run(self, object progress, long long total)

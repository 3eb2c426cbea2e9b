# Types of sim/flowctl/ib.py for the compiled core (Cython pure-Python mode: the .py is the
# source, this file only declares).  Every packet on an IB link goes through IbLink three or
# four times (the gate, the dequeue, the arrival at the receiver, the release), so it is a
# cdef class whose counters and configuration copies are fields; the per-VL counters stay
# Python lists (read by tests and the deadlock detector).  It has no __dict__ (its attributes
# are all declared here) and no subclass (final: its cdef methods are direct C calls).  The
# public methods ``waiting``, ``blocked`` and ``freed`` are the interface and call the cdef
# ones.
cimport cython

from sim.engine cimport Engine, Timer
from sim.packet cimport SimPacket

cdef long long _SEQ_MOD
cdef long long _MAX_AHEAD
cdef long long _BLOCK
cdef long long _MGMT_VL
cdef long long _NO_FC_PS

cpdef long long ib_blocks(long long nbytes)
cpdef bint may_send(long long fctbs, long long fccl, long long blocks)
cpdef long long fccl_value(long long abr, long long free_blocks)

@cython.final
cdef class IbLink:
    cdef public object port
    cdef public object cfg
    cdef public object reverse
    cdef public Engine engine
    cdef public tuple vl_of
    cdef public tuple classes
    cdef public dict _tcs_of
    cdef public long long buffer_blocks
    cdef public list fctbs
    cdef public list _cr
    cdef public object _fc_q
    cdef public long long _fc_first_at
    cdef public Py_ssize_t _fc_n_evented
    cdef public bint _wake_mode
    cdef public bint _every_fc
    cdef public list abr
    cdef public list occupied_blocks
    cdef public list max_occupied_blocks
    cdef public list fccl_sent
    cdef public long long fc_packets
    cdef public long long resyncs
    cdef public long long lost_blocks
    cdef public Timer _resync_timer
    cdef public long long _period_ps
    cdef public long long stalls
    cdef public list _stall_since
    cdef public list _stall_acc_ps
    cdef public object _fc_fire_cb
    cdef public object _land_cb

    @cython.locals(v=Py_ssize_t)
    cdef bint _waiting(self, Py_ssize_t tc, long long nbytes) except -1
    @cython.locals(w=cython.bint)
    cdef bint _blocked(self, Py_ssize_t tc, long long nbytes) except -1
    @cython.locals(pkt=SimPacket, v=Py_ssize_t, b=cython.longlong)
    cdef _take(self, pkt)
    @cython.locals(pkt=SimPacket, fc=tuple)
    cpdef _land(self, peer, peer_port, pkt)
    @cython.locals(occ=cython.longlong)
    cdef _arrive(self, Py_ssize_t v, long long b)
    @cython.locals(queues=list, tcs=tuple, tc=Py_ssize_t)
    cpdef _fc_arrive(self, Py_ssize_t v, long long fccl)
    @cython.locals(eng=Engine, at=cython.longlong, seq=cython.longlong, v=Py_ssize_t,
                   fccl=cython.longlong, queues=list, tc=Py_ssize_t)
    cdef _sync(self)
    @cython.locals(eng=Engine, i=Py_ssize_t, at=cython.longlong, seq=cython.longlong)
    cdef _idle(self)
    @cython.locals(s=cython.longlong, v=Py_ssize_t, fccl=cython.longlong)
    cpdef _fc_fire(self, seq)
    @cython.locals(eng=Engine, now=cython.longlong, at=cython.longlong, seq=cython.longlong)
    cdef _send_fc(self, Py_ssize_t v, long long fccl)
    @cython.locals(fccl=cython.longlong)
    cdef _update(self, Py_ssize_t v)
    @cython.locals(now=cython.longlong, at=cython.longlong)
    cdef _send(self, port, fn, Py_ssize_t v, long long value)

# Types of sim/net/port.py for the compiled core (Cython pure-Python mode: the .py is
# the source, this file only declares).  Port is a cdef class whose hot attributes are C fields;
# it keeps a __dict__, so the attributes set only by some schedulers or by add_gate, and the
# per-instance overrides (``_pick``, sim/fabric/faults.py's ``enqueue``), stay as in Python.
# Counters and times are C int64 (picoseconds fit for 106 days); all are public so that
# interpreted code (tests, study, cli) reads and writes them as before.
cimport cython

from sim.engine cimport Engine, Timer
from sim.flowctl.ib cimport IbLink, ib_blocks
from sim.packet cimport SimPacket
from sim.trace cimport Interest, QueueSampler, SampleBuffer

cdef class Port:
    cdef dict __dict__
    cdef public object scheduler
    cdef public object weights
    cdef public object quantum_bytes
    cdef public Engine engine
    cdef public object node_id
    cdef public object index
    cdef public object rate_bps
    cdef public object tracer
    cdef public Interest _int
    cdef public QueueSampler _qbuf_owner
    cdef public list _qbufs
    cdef public list strict_tcs
    cdef public frozenset _strict
    cdef public list _rr_orders
    cdef public long long _queued
    cdef public long long _last_tc
    cdef public dict _ser_cache
    cdef public dict _pause_ps
    cdef public object _cached_rate
    cdef public object stack
    cdef public object on_dequeue
    cdef public object peer
    cdef public object peer_port
    cdef public long long prop_ps
    cdef public list queues
    cdef public list queue_bytes
    cdef public list max_queue_bytes
    cdef public object control
    cdef public bint busy
    cdef public long long _rr
    cdef public list _paused_until_ps
    cdef public list _pause_start_ps
    cdef public list _paused_acc_ps
    cdef public list _expiry
    cdef public Timer _wake
    cdef public list taps
    cdef public long long tx_bytes
    cdef public long long tx_packets
    cdef public long long pause_received
    cdef public list pause_rx_prio
    cdef public long long busy_ps
    cdef public long long _tx_end_ps
    cdef public bint _rr_fast
    cdef public bint _rr_pick
    cdef public object _done_cb
    cdef public object deficit
    cdef public object _vl_of
    cdef public object _divert
    # The scheduler and the gate (_pick, _gated_pick) and the VL arbitration's state, read
    # for every frame of a "vlarb" port or a port under link-level credits.
    cdef public long long _sched
    cdef public object _gate
    cdef public IbLink _ib_gate
    cdef public IbLink ib
    cdef public tuple _va_tables
    cdef public object _va_limit
    cdef public long long _va_hi_sent
    cdef public list _va_idx
    cdef public list _va_left
    cdef public list _va_rr
    cdef public list _va_tcs

    # The per-frame work, typed so that a frame's fields are read from its struct (``pkt`` a
    # SimPacket; None passes, any other type is a TypeError).  ``_enq`` (the body of the public
    # ``enqueue``), ``_cut_through`` and ``_send_next`` (the body of ``_start``) are cdef: the
    # NIC's and the switch's calls and Port's own are direct C calls.  (They were cpdef, and a
    # cpdef called from C first looks itself up on the instance, to honour a Python override;
    # its cache of that lookup keeps one object, so with many ports it missed nearly always
    # and made a bound method per call.)  So they cannot be overridden; nothing does, and a
    # down link diverts frames through ``_divert`` (sim/fabric/faults.py).  ``_done`` is the
    # engine's callback, called through Python, so cpdef costs it nothing.
    @cython.locals(pkt=SimPacket, tc=Py_ssize_t, paused_to=cython.longlong)
    cdef _enq(self, pkt)
    @cython.locals(smp=QueueSampler, b=SampleBuffer)
    cdef _sample(self, hook, long long now, Py_ssize_t tc, SimPacket pkt, nbytes, queue_bytes)
    @cython.locals(pkt=SimPacket, now=cython.longlong, t=cython.longlong)
    cdef _cut_through(self, pkt, Py_ssize_t tc)
    @cython.locals(pkt=SimPacket, now=cython.longlong, t=cython.longlong, ib=IbLink)
    cdef _send_next(self)
    cdef long long _ser_ps(self, nbytes) except -1
    @cython.locals(now=cython.longlong, at=cython.longlong, tc=Py_ssize_t,
                   paused_to=cython.longlong, wake=Timer)
    cdef _sleep_until_unpaused(self)
    @cython.locals(queued=cython.longlong, now=cython.longlong, until=list, queues=list,
                   tc=Py_ssize_t, paused_to=cython.longlong)
    cdef _pick_rr(self)
    # The other schedulers and the gate: C calls from _send_next (nothing overrides them).
    cdef _pick(self)
    @cython.locals(sched=cython.longlong, now=cython.longlong, until=list, queues=list,
                   tc=Py_ssize_t)
    cdef _sched_pick(self)
    @cython.locals(ib=IbLink, queues=list, until=list, tc=Py_ssize_t, nbytes=cython.longlong)
    cdef _gated_pick(self)
    @cython.locals(sent=cython.longlong, high_ok=cython.bint)
    cdef _pick_vlarb(self, long long now)
    @cython.locals(entries=tuple, n=Py_ssize_t, queues=list, until=list, i=Py_ssize_t,
                   k=Py_ssize_t, j=Py_ssize_t, vl=Py_ssize_t, weight=cython.longlong,
                   left=cython.longlong, group=tuple, m=Py_ssize_t, r=Py_ssize_t,
                   g=Py_ssize_t, tc=Py_ssize_t, b=cython.longlong)
    cdef _va_arb(self, Py_ssize_t t, long long now)
    @cython.locals(pkt=SimPacket, ib=IbLink)
    cpdef _done(self, pkt)

cdef Py_ssize_t _NPRIO

# Types of sim/engine.py for the compiled core (Cython pure-Python mode: the .py is
# the source, this file only declares).  Attributes read or written from interpreted code are
# public.  A heap entry's key (``at_ps``, ``priority``, ``seq``) is C int64, so the heap's
# comparisons are C comparisons; the engine refuses a time past sim.units.MAX_PS (2**63 - 1
# ps) in both cores.  ``now_ps`` stays a Python int object.
cimport cython

@cython.final
@cython.freelist(256)
cdef class Timer:
    cdef public long long at_ps
    cdef public long long priority
    cdef public long long seq
    cdef public object callback
    cdef public tuple args
    cdef public bint owned

# final (like Timer): no subclass, so its cpdef methods are direct C calls (port.pxd says why).
@cython.final
cdef class Engine:
    cdef public object seed
    cdef public long long now_ps
    cdef public object rng
    cdef public long long events_processed
    cdef public list _heap
    cdef public list _spare
    cdef public Py_ssize_t _nspare
    cdef public long long _seq
    cdef public bint _running
    cdef public long long _cur_priority
    cdef public long long _cur_seq
    cdef public long long _compact_at

    cpdef _push(self, delay_ps, callback, tuple args)
    # Port's and Host's per-frame events: a direct C call with a C delay.
    cdef _after(self, long long delay_ps, callback, tuple args)
    # The same with a priority at an absolute time (the IB link's flow-control packets).
    cdef _at(self, long long at_ps, long long priority, callback, tuple args)
    # An event's key taken now and scheduled later, or never (the IB link's flow-control
    # packets that change nothing but a counter: read when needed, sim/flowctl/ib.py).
    cdef long long _take_seq(self)
    cdef _push_key(self, long long at_ps, long long priority, long long seq, callback,
                   tuple args)
    cdef bint _done_before(self, long long at_ps, long long priority, long long seq)
    @cython.locals(ev=Timer, n=Py_ssize_t)
    cdef Timer _owned(self, long long at_ps, long long priority, long long seq, callback,
                      tuple args)

    @cython.locals(heap=list, spare=list, ev=Timer, stop_ps=cython.longlong,
                   count=cython.longlong, limit=cython.longlong, hit_limit=cython.bint,
                   args=tuple, n=Py_ssize_t)
    cpdef run(self, until_ps=*, max_events=*)

cdef object _check_at(object at_ps, object now_ps, object priority)
cdef long long _LAST_PS
cdef Py_ssize_t _SPARE_MAX

cdef Timer _filled(Timer ev, long long at_ps, long long priority, long long seq,
                   object callback, tuple args)

@cython.locals(ev=Timer)
cdef Timer _entry(long long at_ps, long long priority, long long seq, object callback,
                  tuple args)

cdef bint _before(Timer a, Timer b) noexcept

cdef void _heap_push(list heap, Timer ev)

@cython.locals(up=Py_ssize_t, parent=Timer, at=cython.longlong, pat=cython.longlong)
cdef void _sift_up(list heap, Timer ev, Py_ssize_t i)

@cython.locals(n=Py_ssize_t, child=Py_ssize_t, right=Py_ssize_t, ev=Timer, low=Timer)
cdef void _sift_down(list heap, Py_ssize_t i)

@cython.locals(last=Timer, top=Timer, n=Py_ssize_t, i=Py_ssize_t, child=Py_ssize_t,
               right=Py_ssize_t, low=Timer, other=Timer, rat=cython.longlong,
               lat=cython.longlong)
cdef Timer _heap_pop(list heap)

# Types of sim/engine.py for the compiled core (issue 19; Cython pure-Python mode: the .py is
# the source, this file only declares).  Attributes read or written from interpreted code are
# public.  Times stay Python ints (``now_ps``, ``at_ps``): the engine accepts any integer time,
# 2**63 ps and later included (tests/test_sim_engine.py), which a C int64 would not.

cdef class Timer:
    cdef public object at_ps
    cdef public object callback
    cdef public tuple args

cdef class Engine:
    cdef public object seed
    cdef public object now_ps
    cdef public object rng
    cdef public long long events_processed
    cdef public list _heap
    cdef public long long _seq
    cdef public bint _running
    cdef public long long _compact_at

    # Port's per-frame events: a C call from code that holds a typed Engine (port.pxd).
    cpdef _push(self, delay_ps, callback, tuple args)

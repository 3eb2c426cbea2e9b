# Types of sim/net/mmu.py for the compiled core (Cython pure-Python mode: the .py is
# the source, this file only declares).  Mmu, _Pg and _Egress are cdef classes: the counters
# and the hot-path copies of the configuration are C int64 fields of the object (byte counts
# fit: mmu.py refuses a size or frame above 2**63 - 1 bytes, sim.units.MAX_BYTES).  The public
# methods (admit, release, egress_enqueue, egress_dequeue) check their arguments and call a
# cdef method of C ints (_admit, _release, _egress_add, _egress_sub, _queue_at), which the
# switch calls directly: the admission and release of every frame read and write C fields,
# with no dictionary lookup or Python int.  Mmu keeps a __dict__ (attributes set from outside
# work as in Python); _Pg and _Egress have none (their __slots__ said so).  Every field is
# public: interpreted code reads and writes them as before.  The dynamic threshold stays exact
# Python-int arithmetic (alpha's numerator and denominator are Python ints).

cimport cython

cdef class _Pg:
    cdef public long long reserved_bytes
    cdef public long long shared_bytes
    cdef public long long headroom_bytes
    cdef public object state
    cdef public bint watched

cdef class _Egress:
    cdef public long long held_bytes

# final: nothing subclasses it, so a cpdef method would be a direct C call too (port.pxd).
@cython.final
cdef class Mmu:
    cdef dict __dict__
    cdef public object config
    cdef public long long shared_used_bytes
    cdef public long long offered_bytes
    cdef public long long admitted_bytes
    cdef public long long dropped_bytes
    cdef public long long released_bytes
    cdef public dict _watch
    cdef public object _drops
    cdef public dict _pgs
    cdef public list _pg_at
    cdef public list _egress_at
    cdef public long long _nports
    cdef public long long _npgs
    cdef public long long _reserved
    cdef public long long _headroom_max
    cdef public frozenset _lossless
    cdef public long long _lossless_mask
    cdef public long long _pool
    cdef public bint _static
    cdef public long long _xoff
    cdef public object _alpha_num
    cdef public object _alpha_den
    cdef public long long _xon_delta

    @cython.locals(s=_Pg, lossless=cython.bint, pool_ok=cython.bint)
    cdef _admit(self, Py_ssize_t port, Py_ssize_t pg, long long n)
    cdef long long _threshold(self) except? -1
    @cython.locals(s=_Pg, hdrm=cython.longlong, shared=cython.longlong, rest=cython.longlong,
                   from_shared=cython.longlong)
    cdef tuple _release(self, Py_ssize_t port, Py_ssize_t pg, long long n)
    @cython.locals(shared=cython.longlong, threshold=cython.longlong, delta=cython.longlong,
                   dynamic_sweep=cython.bint, leaves=cython.bint, p=_Pg)
    cdef tuple _update(self, Py_ssize_t port, Py_ssize_t pg, _Pg s, bint pool_changed)
    @cython.locals(eg=_Egress, new=cython.longlong)
    cdef long long _egress_add(self, Py_ssize_t i, long long n) except -1
    @cython.locals(eg=_Egress, held=cython.longlong)
    cdef long long _egress_sub(self, Py_ssize_t i, long long n) except -1
    cdef Py_ssize_t _queue_at(self, Py_ssize_t port, Py_ssize_t queue) except -1
    @cython.locals(s=_Pg)
    cdef long long _held(self, Py_ssize_t port, Py_ssize_t pg) except -1


cdef str _condition(long long headroom_bytes, long long shared_bytes, long long threshold_bytes,
                    long long xon_delta_bytes)

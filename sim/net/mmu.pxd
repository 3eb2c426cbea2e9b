# Types of sim/net/mmu.py for the compiled core (issue 19; Cython pure-Python mode: the .py is
# the source, this file only declares).  Mmu and _Pg are cdef classes: the counters and the
# hot-path copies of the configuration are C int64 fields of the object (byte counts fit:
# mmu.py refuses a size or frame above 2**63 - 1 bytes, sim.units.MAX_BYTES), so the admission
# and release of every frame a switch takes read and write them without a dictionary lookup
# or a Python int.  Mmu keeps a __dict__ (attributes set from outside work as in Python); _Pg
# has none (its __slots__ said so).  Every field is public: interpreted code reads and writes
# them as before.  The dynamic threshold stays exact Python-int arithmetic (alpha's numerator
# and denominator are Python ints).

cimport cython

cdef class _Pg:
    cdef public long long reserved_bytes
    cdef public long long shared_bytes
    cdef public long long headroom_bytes
    cdef public object state
    cdef public bint watched

# final: nothing subclasses it, so its cpdef methods are direct C calls from a switch (a cpdef
# of a class that may be subclassed first looks itself up on the instance: see port.pxd).
@cython.final
cdef class Mmu:
    cdef dict __dict__
    cdef public object config
    cdef public long long shared_used_bytes
    cdef public long long offered_bytes
    cdef public long long admitted_bytes
    cdef public long long dropped_bytes
    cdef public long long released_bytes
    cdef public set _watch
    cdef public object _drops
    cdef public dict _pgs
    cdef public list _pg_at
    cdef public list _egress_at
    cdef public long long _nports
    cdef public long long _npgs
    cdef public long long _reserved
    cdef public long long _headroom_max
    cdef public frozenset _lossless
    cdef public long long _pool
    cdef public bint _static
    cdef public long long _xoff
    cdef public object _alpha_num
    cdef public object _alpha_den
    cdef public long long _xon_delta

    @cython.locals(s=_Pg, n=cython.longlong)
    cpdef admit(self, in_port, pg, nbytes)
    @cython.locals(s=_Pg, n=cython.longlong, hdrm=cython.longlong, shared=cython.longlong,
                   rest=cython.longlong, from_shared=cython.longlong)
    cpdef release(self, in_port, pg, nbytes, where=*)
    @cython.locals(shared=cython.longlong)
    cpdef _update(self, port, pg, _Pg s, bint pool_changed)
    @cython.locals(i=Py_ssize_t)
    cpdef egress_enqueue(self, port, queue, nbytes)
    @cython.locals(i=Py_ssize_t)
    cpdef egress_dequeue(self, port, queue, nbytes)
    @cython.locals(i=Py_ssize_t)
    cdef _Pg _pg(self, port, pg)
    @cython.locals(i=Py_ssize_t)
    cdef Py_ssize_t _egress_index(self, port, queue) except -1

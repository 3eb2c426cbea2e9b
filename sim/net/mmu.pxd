# Types of sim/net/mmu.py for the compiled core (issue 19; Cython pure-Python mode: the .py is
# the source, this file only declares).  Mmu and _Pg are cdef classes: the counters and the
# hot-path copies of the configuration are fields of the object, so the admission and release
# of every frame a switch takes read and write them without a dictionary lookup.  Mmu keeps a
# __dict__ (attributes set from outside work as in Python); _Pg has none (its __slots__ said
# so).  The fields stay Python objects (the .py takes any int) and public, so interpreted code
# reads and writes them as before.

cimport cython

cdef class _Pg:
    cdef public object reserved_bytes
    cdef public object shared_bytes
    cdef public object headroom_bytes
    cdef public object state

cdef class Mmu:
    cdef dict __dict__
    cdef public object config
    cdef public object shared_used_bytes
    cdef public object offered_bytes
    cdef public object admitted_bytes
    cdef public object dropped_bytes
    cdef public object released_bytes
    cdef public set _watch
    cdef public object _drops
    cdef public dict _egress
    cdef public dict _pgs
    cdef public object _nports
    cdef public object _npgs
    cdef public object _reserved
    cdef public object _headroom_max
    cdef public object _lossless
    cdef public object _pool
    cdef public object _static
    cdef public object _xoff
    cdef public object _alpha_num
    cdef public object _alpha_den
    cdef public object _xon_delta

    @cython.locals(s=_Pg)
    cpdef admit(self, in_port, pg, nbytes)
    @cython.locals(s=_Pg)
    cpdef release(self, in_port, pg, nbytes, where=*)
    @cython.locals(s=_Pg)
    cpdef _update(self, port, pg, pool_changed)
    cpdef egress_enqueue(self, port, queue, nbytes)
    cpdef egress_dequeue(self, port, queue, nbytes)

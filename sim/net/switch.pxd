# Types of sim/net/switch.py for the compiled core (Cython pure-Python mode: the .py
# is the source, this file only declares).  Switch is a cdef class whose forwarding-path
# attributes are C fields; it keeps a __dict__ (the routing tables set by set_routes, the rare
# attributes, subclasses such as sim.scaleup.switch.EsunSwitch, per-instance overrides).
# Counters are C int64; every field is public, read and written from interpreted code as before.
cimport cython

from sim.engine cimport Engine
from sim.net.mmu cimport Mmu
from sim.net.port cimport Port
from sim.packet cimport SimPacket
from sim.trace cimport Interest, QueueSampler, SampleBuffer

cdef class Switch:
    cdef dict __dict__
    cdef public Engine engine
    cdef public object node_id
    cdef public Mmu mmu
    cdef public dict _fwd
    cdef public dict ecmp_choices
    cdef public long long adaptive_moves
    cdef public object ecn
    cdef public bint _ib_marking
    cdef public long long _kmin
    cdef public long long _kmax
    cdef public double _pmax
    cdef public object tracer
    cdef public Interest _int
    cdef public dict ports
    cdef public dict _ingress
    cdef public object ids
    cdef public object pfc
    cdef public long long drops
    cdef public dict drops_by_port
    cdef public dict tx_drops_by_port
    cdef public long long ce_marked
    cdef public object max_hops
    cdef public object _ingress_tap
    cdef public QueueSampler _isampler
    cdef public list _ibufs
    cdef public object watchdog
    cdef public set _wd_drop
    cdef public set _wd_ignore

    # The per-frame methods, cpdef with ``pkt`` typed SimPacket (its fields read from the struct;
    # see port.pxd), overridable by subclasses (EsunSwitch.receive) as in Python; switch.py puts
    # back ``receive``'s return annotation (port.pxd).
    @cython.locals(pkt=SimPacket, egress=Port, pg=Py_ssize_t, out=Py_ssize_t,
                   held=cython.longlong)
    cpdef receive(self, port, pkt)
    @cython.locals(pkt=SimPacket, left=cython.longlong)
    cpdef _on_dequeue(self, port, pkt)
    # ECN marking (the body of ``_maybe_mark``): a direct C call from receive / _on_dequeue.
    @cython.locals(pkt=SimPacket, p=cython.double, ecn=cython.int)
    cdef _mark(self, port, pkt, long long queue_bytes)
    # An ingress sample: a C call to the tap's QueueSampler (ingress_tap's setter finds it).
    @cython.locals(b=SampleBuffer, npgs=Py_ssize_t, i=Py_ssize_t)
    cdef _occupancy(self, Py_ssize_t port, Py_ssize_t pg)

# The RED curve (EcnConfig.probability); C arithmetic gives the same doubles as Python's:
# the byte differences are exact int64, each converted to double once, as float() does.
cdef double _red_probability(long long queue_bytes, long long kmin_bytes, long long kmax_bytes,
                             double pmax) except? -1.0

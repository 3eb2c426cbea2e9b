# Types of sim/packet.py for the compiled core (Cython pure-Python mode: the .py is
# the source, this file only declares).  SimPacket is a cdef class: its fields (the names of its
# ``__slots__``) are C struct members, so compiled code that knows a packet's type (Port's and
# Switch's hot methods, port.pxd and switch.pxd) reads them without an attribute lookup.  They
# stay Python objects (a frame's ``nbytes`` or ``id`` can be any int) and public, so interpreted
# code reads and writes them as before; subclasses (sim.scaleup.framing.SuePacket) add slots.

cimport cython

cdef class SimPacket:
    cdef public object ackreq
    cdef public object dst
    cdef public object ecn
    cdef public object fc
    cdef public object flow
    cdef public object frame
    cdef public object hops
    cdef public object id
    cdef public object nbytes
    cdef public object place
    cdef public object psn
    cdef public object src
    cdef public object t_ps
    cdef public object tc

    @staticmethod
    cdef SimPacket _new(object id, object t_ps, object nbytes, object flow, object tc,
                        object ecn, object src, object dst, object frame, object hops)

# The fields of a new packet from SimPacket.trusted, set as struct members (a classmethod's
# ``pkt`` is not typed, so setting them there went through the attribute protocol).
cdef SimPacket _filled(SimPacket pkt, object id, object t_ps, object nbytes, object flow,
                       object tc, object ecn, object src, object dst, object frame, object hops)

# The fabric's packet id counter, called for every frame a host or switch makes (final:
# ``take`` is a direct C call from a host).
@cython.final
cdef class PacketIds:
    cdef public object next
    cpdef take(self)

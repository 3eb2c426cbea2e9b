# Types of sim/trace.py for the compiled core (Cython pure-Python mode: the .py is the
# source, this file only declares).  Interest is a cdef class: a port, switch or host reads
# its fields for every frame (port.pxd, switch.pxd, host.pxd type their ``_int`` as one); the
# rest of the module is compiled as it is.

cdef class QueueSampler:
    cdef _queue_sample(self, t_ps, node, port, queue, queue_bytes)
    cdef _ingress_sample(self, t_ps, node, port, pg, nbytes)

cdef class Interest:
    cdef public frozenset types
    cdef public object enqueued
    cdef public object dequeued
    cdef public QueueSampler sampler

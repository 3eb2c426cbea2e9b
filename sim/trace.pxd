# Types of sim/trace.py for the compiled core (Cython pure-Python mode: the .py is the
# source, this file only declares).  Interest is a cdef class: a port, switch or host reads
# its fields for every frame (port.pxd, switch.pxd, host.pxd type their ``_int`` as one); the
# rest of the module is compiled as it is.

cimport cython

cdef class SampleBuffer

cdef class QueueSampler:
    cdef _queue_sample(self, t_ps, node, port, queue, queue_bytes)
    cdef _ingress_sample(self, t_ps, node, port, pg, nbytes)
    cdef SampleBuffer _queue_buffer(self, node, port, queue)
    cdef SampleBuffer _ingress_buffer(self, node, port, pg)
    cdef _full(self, SampleBuffer b)
    cdef _ce_marked(self, t_ps, node, port, queue, packet_id, flow)
    cdef _rate_changed(self, t_ps, node, flow, rate_bps, target_rate_bps, alpha)

# A series' latest rows: the ports and switches add theirs with C calls and C stores.
cdef class SampleBuffer:
    cdef public QueueSampler owner
    cdef public object series
    cdef public Py_ssize_t cap
    cdef public object t_ps_arr
    cdef public object v_arr
    cdef long long[::1] t_ps
    cdef long long[::1] v
    cdef public Py_ssize_t n
    cdef public bint has_last
    cdef public long long last_t_ps
    cdef public long long last_v
    @cython.locals(n=Py_ssize_t)
    cpdef add(self, long long t_ps, long long value)
    cpdef add_changed(self, long long t_ps, long long value)

cdef class Interest:
    cdef public frozenset types
    cdef public object enqueued
    cdef public object dequeued
    cdef public QueueSampler sampler
    cdef public QueueSampler hooks

# The runner's events.jsonl: the recorder writes a line from an event's fields with a C call.
cdef class JsonlTracer:
    cdef public object _file
    cdef public bint _owned
    cdef public object _dumps
    cdef public dict _plans
    cpdef emit_fields(self, cls, tuple values)
    cdef _line(self, tuple plan, tuple values)

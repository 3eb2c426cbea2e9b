# Types of sim/study/samples.py for the compiled core (issue 19; Cython pure-Python mode: the
# .py is the source, this file only declares).  SampleSink is a cdef class (the Recorder, a
# Python class, subclasses it); the shared body of a queue sample is a C method.

cdef class SampleSink:
    cdef public object store
    cdef public Py_ssize_t _cap
    cdef public dict queues
    cdef public dict ingress

    cdef _queue_sample(self, t_ps, node, port, queue, queue_bytes)

# Types of sim/study/samples.py for the compiled core (Cython pure-Python mode: the
# .py is the source, this file only declares).  SampleSink is a cdef class (the Recorder, a
# Python class, subclasses it); the shared body of a queue sample is a C method, and so are
# the bodies of its events.  ControlIds is a cdef class whose __call__ is a port tap.  FrameLog
# (the Capture, a Python class, subclasses it), CaptureBudget and RxTap are cdef classes whose
# __call__ is what a port calls per frame.

cimport cython

from sim.packet cimport SimPacket
from sim.trace cimport JsonlTracer, QueueSampler, SampleBuffer


cdef class ControlIds:
    cdef public set ids
    cdef public object fabric
    cdef public object live
    cdef public long long flow_limit
    cdef public Py_ssize_t _prune_at
    cdef _tap(self, SimPacket pkt)


cdef class _Rates:
    cdef public object series
    cdef public Py_ssize_t cap
    cdef public object t_ps_arr
    cdef public object rates_bps_arr
    cdef public object targets_bps_arr
    cdef public object alphas_arr
    cdef long long[::1] t_ps
    cdef long long[::1] rates_bps
    cdef long long[::1] targets_bps
    cdef double[::1] alphas
    cdef public Py_ssize_t n
    cdef public object rate_bps
    cdef public object target_rate_bps


cdef class SampleSink(QueueSampler):
    cdef public object store
    cdef public Py_ssize_t _cap
    cdef public dict queues
    cdef public dict ingress
    cdef public dict _qpend
    cdef public dict _ipend
    cdef public object log
    cdef public dict drops
    cdef public dict drops_by_reason
    cdef public dict flow_drops
    cdef public ControlIds control
    cdef public dict ce
    cdef public long long cnps
    cdef public dict pfc_tx
    cdef public dict pfc_rx
    cdef public dict rates
    cdef public dict _rpend

    cdef SampleBuffer _queue_buffer(self, node, port, queue)
    cdef SampleBuffer _ingress_buffer(self, node, port, pg)
    @cython.locals(b=SampleBuffer)
    cdef SampleBuffer _buffer(self, dict pend, dict table, tuple key)
    cdef _full(self, SampleBuffer b)
    cdef _take(self, s, tuple arrays, Py_ssize_t n, Py_ssize_t cap)
    cdef _dropped(self, e)
    cdef _ce_marked(self, t_ps, node, port, queue, packet_id, flow)
    @cython.locals(p=_Rates, n=Py_ssize_t, logged=bint)
    cdef _rate_changed(self, t_ps, node, flow, rate_bps, target_rate_bps, alpha)
    @cython.locals(jsonl=JsonlTracer)
    cdef _log(self, cls, tuple values)
    cdef _state(self, dict table, e, int value)


cdef class CaptureBudget:
    cdef public object limit_bytes
    cdef public long long used_bytes
    cdef public object cut_at_ps


@cython.final
cdef class _FlowMsg:
    cdef public long long psn
    cdef public long long off
    cdef public long long end
    cdef public int op
    cdef public object nbytes
    cdef public object ecn
    cdef public object src
    cdef public object dst
    cdef public object ackreq
    cdef public object tc
    cdef public Py_ssize_t tpl


cdef class FrameLog:
    cdef public CaptureBudget budget
    cdef public object _snap
    cdef public Py_ssize_t batch_frames
    cdef public long long frames
    cdef public long long bytes
    cdef public list _ts_ns
    cdef public list _which
    cdef public list _psns
    cdef public list _frames
    cdef public dict _state
    cdef public dict _templates
    cdef public list _tpl_bytes

    @cython.locals(st=_FlowMsg, nb=cython.longlong, off=cython.longlong,
                   msg=cython.longlong, first=bint, last=bint, op=int)
    cdef tuple _next(self, SimPacket pkt)
    @cython.locals(b=CaptureBudget, n=cython.longlong)
    cdef _tap(self, t_ps, SimPacket pkt)


cdef class RxTap:
    cdef public dict bins
    cdef public long long bin_ps
    cdef public Py_ssize_t nbins
    @cython.locals(b=cython.longlong, row=list)
    cdef _tap(self, long long t_ps, SimPacket pkt)

# Types of sim/nic/rc.py for the compiled core (Cython pure-Python mode: the .py is the
# source, this file only declares).  RcSender and RcReceiver are cdef classes: their counters,
# PSNs and flags are C int64 / bint fields (a PSN is unwrapped, so it only grows; an int64
# holds 2**63 frames), the frame lists Python deques and lists as before.  The methods the
# host calls per frame are cpdef: a C call from sim/nic/host.py (which cimports these
# types), a Python call from anywhere else.  Every field is public: interpreted code and
# tests read and write them as before; the classes themselves cannot be patched (an
# extension type: bench/ooo_gap.py runs the interpreted core for that).  unwrap_psn computes in
# C int64 (_unwrap): a PSN or reference beyond +-2**63 is an OverflowError.

cdef class RcSender:
    cdef public str mode
    cdef public long long timeout_ps
    cdef public long long retry_cnt
    cdef public long long ack_req_every
    cdef public long long _noack
    cdef public long long base
    cdef public long long next_psn
    cdef public object _sizes
    cdef public object _asks
    cdef public object _places
    cdef public object _ask_psns
    cdef public object _sent_at
    cdef public long long _expired_ps
    cdef public object _gbn
    cdef public list _sr
    cdef public long long retries
    cdef public bint error
    cdef public long long acked_bytes
    cdef public long long sent_frames
    cdef public long long sent_bytes
    cdef public long long retransmitted_frames
    cdef public long long retransmitted_bytes
    cdef public long long naks_received
    cdef public long long timeouts

    cpdef bint has_resend(self)
    cpdef long long peek_resend_bytes(self)
    cpdef long long send_new(self, long long nbytes, long long now, bint last=*,
                             object place=*)
    cpdef bint asks_ack(self, long long psn)
    cpdef object place_of(self, long long psn)
    cpdef object pop_resend(self, long long now)
    cdef long long _ack_through(self, long long psn, long long now)
    cdef _sr_add(self, long long psn)
    cpdef long long on_ack(self, long long wire_psn, long long now)
    cpdef bint on_nak(self, long long wire_psn, long long now)
    cpdef bint on_timeout(self, long long now)


cdef class RcReceiver:
    cdef public str mode
    cdef public bint ooo
    cdef public long long timeout_ps
    cdef public long long expected
    cdef public bint _nak_sent
    cdef public dict _held
    cdef public object _gap_ps
    cdef public long long naks_sent
    cdef public long long duplicates
    cdef public long long out_of_sequence
    cdef public long long placed_out_of_order

    cpdef object on_timeout(self, long long now)
    cpdef tuple on_frame(self, long long wire_psn, object item, long long now=*)


cdef long long _unwrap(long long wire_psn, long long ref, long long mod)

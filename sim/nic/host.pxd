# Types of sim/nic/host.py for the compiled core (Cython pure-Python mode: the .py is
# the source, this file only declares).  Host is a cdef class: its attributes are fields of the
# object, which its own methods read and write without a dictionary lookup; the per-flow
# tables are typed dict (set, list), so a lookup in them is a direct dict call.  It keeps a
# __dict__, so attributes set from outside and per-instance overrides of its methods work as
# in Python; its methods stay ``def``, so a subclass or an instance can replace them, but the
# class itself cannot be patched (an extension type: wrap an instance's method, or a Python
# caller such as Fabric.add_flow, as tests/test_fault_outputs.py does).  Every field is public
# (read and written from interpreted code as before).  A typed field (``port`` a Port,
# ``engine`` an Engine, the dict/set/list tables) takes only that type or a subclass (or
# None), compiled; the others are objects, so they hold what the .py puts there.
cimport cython

from sim.engine cimport Engine, Timer
from sim.packet cimport PacketIds, SimPacket
from sim.trace cimport Interest
from sim.net.port cimport Port
from sim.nic.rc cimport RcReceiver, RcSender

cdef class _Tx:
    cdef public object flow
    cdef public object fid
    cdef public object tc
    cdef public object ecn
    cdef public object dst
    cdef public object stop_ps
    cdef public bint on
    cdef public object packet_bytes
    cdef public object message_bytes
    cdef public object size_bytes
    cdef public long long next_send_ps
    cdef public long long msg_end

cdef object _frame_bytes(object packet_bytes, object message_bytes, object size_bytes,
                         object sent)

cdef class Host:
    cdef dict __dict__
    cdef public dict _ack_makers
    cdef public dict _acked_packets
    cdef public list _blocked
    cdef public dict _cc_timer
    cdef public set _ce_in_window
    cdef public dict _cnp_frames
    cdef public object _send_cb
    cdef public dict _cnp_window
    cdef public dict _expected
    cdef public dict _flows
    cdef public dict _gap_ps
    cdef public PacketIds _ids
    cdef public Interest _int
    cdef public dict _last_cnp_ps
    cdef public dict _tx
    cdef public dict _phase
    cdef public dict _posted
    cdef public set _posted_idle
    cdef public set _rc_idle
    cdef public dict _rc_rx
    cdef public dict _rc_rx_timer
    cdef public dict _rc_timer
    cdef public dict _rc_tx
    cdef public object _read_free_ps
    cdef public object _read_timer
    cdef public object _read_wait
    cdef public object _rx_draining
    cdef public object _rx_headroom
    cdef public set _rx_paused
    cdef public object _rx_q
    cdef public object _rx_refresh
    cdef public dict _rx_top_id
    cdef public object _stall_prios
    cdef public object _stall_timers
    cdef public list _wake_due
    cdef public object ack_every
    cdef public object ack_received
    cdef public object ack_sent
    cdef public object ack_tc
    cdef public object ack_timeout
    cdef public object adaptive_routing
    cdef public dict acked_bytes
    cdef public dict cc
    cdef public object cc_name
    cdef public object cc_params
    cdef public object cnp_interval_ps
    cdef public object cnp_mode
    cdef public object cnp_received
    cdef public object cnp_sent
    cdef public object cnp_tc
    cdef public object delivered
    cdef public Engine engine
    cdef public dict fct_ps
    cdef public object node_id
    cdef public object on_data
    cdef public object on_qp_error
    cdef public object ooo
    cdef public object ooo_timeout_ps
    cdef public object rx_tap
    cdef public object pause_sent_count
    cdef public object pause_storm_timeout_ps
    cdef public object pcie_header_bytes
    cdef public object pcie_read_bps
    cdef public object pcie_write_bps
    cdef public Port port
    cdef public object ports
    cdef public dict qp_error_ps
    cdef public object queue_limit_bytes
    cdef public dict rc_drops
    cdef public object rc_timeout_ps
    cdef public object reliable
    cdef public object retransmit
    cdef public object retry_cnt
    cdef public object rx_buffer_bytes
    cdef public object rx_buffer_dropped_bytes
    cdef public object rx_buffer_dropped_packets
    cdef public object rx_buffer_max_bytes
    cdef public object rx_buffer_used_bytes
    cdef public dict rx_bytes
    cdef public dict rx_ce
    cdef public dict rx_first_ps
    cdef public dict rx_last_ps
    cdef public dict rx_message_done_ps
    cdef public dict rx_messages
    cdef public object rx_mtu_bytes
    cdef public dict rx_ooo
    cdef public dict rx_packets
    cdef public object rx_pause_tcs
    cdef public object rx_stall_dropped_bytes
    cdef public object rx_stall_dropped_packets
    cdef public object rx_stalled
    cdef public object rx_xoff_bytes
    cdef public object rx_xon_bytes
    cdef public dict sent_bytes
    cdef public dict sent_packets
    cdef public object stall_pausing
    cdef public object storm_stopped_ps
    cdef public object tracer

    @cython.locals(old=Timer)
    cdef _cc_rearm(self, flow_id, ctl, now)
    @cython.locals(traced=bint)
    cdef _cc_event(self, flow_id, ctl, int hook, nbytes=*)

    # The per-frame receive path: receive and _dequeued are the callbacks of the engine and of
    # the NIC's port (called through Python, so cpdef costs them nothing and types ``pkt``);
    # the helpers they call are C methods (no override: nothing outside host.py calls them).
    @cython.locals(pkt=SimPacket)
    cpdef receive(self, port, pkt)
    @cython.locals(pkt=SimPacket)
    cpdef _dequeued(self, port_index, pkt)
    cdef _on_ce(self, f, src, now)
    @cython.locals(p=SimPacket, rx=RcReceiver)
    cdef _deliver(self, SimPacket pkt, now)
    cdef _deliver_frame(self, SimPacket pkt, now)
    cdef object _place(self, _Tx tx, sent, nbytes)
    cdef _send_cnp(self, flow_id, to_node)
    cdef _send_ack(self, fid, flow_tc, psn, to_node, kind=*)
    @cython.locals(tx=_Tx, now=cython.longlong, at=cython.longlong, rc=RcSender)
    cpdef _send(self, tx, waking=*, reading=*)
    # the RC sender's per-frame and per-ACK calls (nothing outside host.py calls them)
    @cython.locals(rc=RcSender)
    cdef _rc_on_ack(self, fid, psn, kind)
    @cython.locals(old=Timer)
    cdef _rc_arm(self, fid)

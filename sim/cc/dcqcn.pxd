# sim/cc/dcqcn.py in the compiled core (Cython pure-Python mode: the .py is the
# source, this file only declares).  Dcqcn is an extension type: the NIC calls its hooks for
# every frame (on_tx) and reads its rate, so its state is C fields, not an instance dict.
# Integer parameters are checked below 2**63 (_as_int) in both cores.

from sim.cc.base cimport RateControl


cdef class Dcqcn(RateControl):
    cdef public object preset
    cdef public long long line_rate_bps
    cdef public object variant
    cdef public bint _vendor
    cdef public double g
    cdef public double alpha_init
    cdef public long long alpha_period_ps
    cdef public long long rate_reduce_monitor_period_ps
    cdef public long long rate_increase_period_ps
    cdef public object alpha_update_order
    cdef public double rate_on_first_cnp_fraction
    cdef public double max_cut_fraction
    cdef public bint clamp_target_rate
    cdef public bint hyper_halves_period
    cdef public bint target_div8_rule
    cdef public long long byte_counter_bytes
    cdef public long long fast_recovery_stages
    cdef public long long rate_ai_bps
    cdef public long long rate_hai_bps
    cdef public long long min_rate_bps
    cdef public object increase_stage_rule
    cdef public object hyper_increase_multiplier
    cdef public long long _ai_from
    cdef public long long _hai_from
    cdef public double _cut_floor
    cdef public long long _rc
    cdef public long long _rt
    cdef public double _alpha
    cdef public bint _first_cnp
    cdef public bint _alpha_flag
    cdef public bint _dec_flag
    cdef public long long _clock0_ps
    cdef public object _alpha_due
    cdef public object _dec_due
    cdef public object _inc_due
    cdef public object _next_due
    cdef public long long _t_cnt
    cdef public long long _bc_cnt
    cdef public long long _bytes
    cdef public long long _byte_threshold
    cdef public int _phase
    cdef public bint reacts_to_tx
    cdef public long long cnps
    cdef public long long cuts
    cdef dict __dict__

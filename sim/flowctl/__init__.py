"""Link-level flow control, one interface (:mod:`sim.flowctl.base`) and two implementations:
PFC (:mod:`sim.flowctl.pfc`, 802.1Qbb/802.3x) and credits (:mod:`sim.flowctl.credit`, CBFC).

May import the kernel (sim.engine, units, packet, events, trace, addresses) and wire only.
"""

"""The switched network: egress ports, the shared-buffer MMU, switches (routes, ECMP, ECN
marking, PFC generation).

May import the kernel (sim.engine, units, packet, events, trace, addresses), sim.flowctl and wire.
"""

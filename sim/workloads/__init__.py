"""Traffic: patterns (who sends to whom), pcap replay; later collectives.

May import the kernel, sim.flowctl, sim.net, sim.nic, sim.cc, sim.health, sim.fabric and wire.
"""

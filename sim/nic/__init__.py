"""The host NIC: paced flows (CBR, on/off, messages), NP (CNPs), RP (rate-control hooks),
ACKs; later transport reliability and the PCIe link.

May import the kernel, sim.flowctl, sim.net, sim.cc and wire.
"""

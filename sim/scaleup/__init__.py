"""SUE-T over ESUN and other scale-up stacks: the transaction packer, framing, the XPU endpoint
(go-back-N), the ESUN switch and the SUE figures of a run.

May import the kernel, sim.flowctl, sim.net, sim.nic, sim.cc, sim.health, sim.fabric and wire.
"""

"""Health of a lossless fabric: the PFC deadlock detector and the switch PFC watchdog.

May import the kernel, sim.flowctl, sim.net and wire.
"""

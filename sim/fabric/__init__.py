"""A whole fabric: switches and NICs wired together (Fabric, star) and the topology builders
(leaf_spine, ring, custom routes).

May import the kernel, sim.flowctl, sim.net, sim.nic, sim.cc, sim.health and wire.
"""

from sim.fabric.core import Fabric, star

__all__ = ["Fabric", "star"]

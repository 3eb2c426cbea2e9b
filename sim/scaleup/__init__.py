"""SUE-T over ESUN and other scale-up stacks: the transaction packer (packing), framing, the
XPU endpoint with go-back-N (xpu), the ESUN switch (switch) and the SUE figures (summary).

May import the kernel, sim.flowctl, sim.net, sim.nic, sim.cc, sim.health, sim.fabric and wire.

The names of the former ``sim/sue.py`` are re-exported here (``sim.sue`` is an alias of this
package for one release; its ``study``/``plot_study`` moved to :mod:`sim.study.sue`).
"""

from sim.flowctl.credit import CbfcConfig, cbfc_credits
from sim.net.port import CreditPort
from sim.scaleup.framing import (
    ACK_TC,
    DATA_TC,
    ECT0,
    HEADERS,
    OVERHEAD_STACK,
    SueConfig,
    SueFramer,
    SuePacket,
    forward_hop,
    max_frame_bytes,
)
from sim.scaleup.summary import expected_goodput_pct, percentile, sue_summary
from sim.scaleup.switch import EsunSwitch
from sim.scaleup.xpu import CreditXpuPort, Xpu, XpuPort

__all__ = [
    "HEADERS", "OVERHEAD_STACK", "DATA_TC", "ACK_TC", "ECT0", "SueConfig", "SuePacket",
    "SueFramer", "forward_hop", "XpuPort", "Xpu", "EsunSwitch", "sue_summary",
    "expected_goodput_pct", "percentile", "CbfcConfig", "CreditPort", "CreditXpuPort",
    "cbfc_credits", "max_frame_bytes",
]

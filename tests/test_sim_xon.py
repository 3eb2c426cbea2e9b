"""A paused PG resumes (XON) when its occupancy falls to the resume level, so PFC with a
backlog larger than one round trip keeps the bottleneck busy.

The rule under test (sim/net/mmu.py, after HPCC's ns-3 switch MMU): departures are taken from a
PG's counters headroom first, then shared, then reserved, and XON is decided on those counters.
With the older rule (a departure returned its bytes to the region it had been admitted to) the
headroom frames, the newest and so the last to leave a FIFO egress queue, kept every PG paused
until it was empty, and the bottleneck of an 8:1 incast idled once per pause cycle (97.1 %).
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from sim.scenarios.loader import build
from sim.units import frame_ser_time_ps, prop_delay_ps, us_to_ps


def _run_incast(senders: int, cable_m: int, xoff_kb: float, duration_us: float):
    """Run the built-in incast (line-rate senders, PFC, no CC); return the bottleneck port's
    frame start times and sizes, the port, the switch and the scenario."""
    sc = build("incast", {"senders": senders, "cable_m": cable_m, "xoff_kb": xoff_kb,
                          "duration_ms": duration_us / 1000, "pmax": 0.0}, 1)
    node, port_no = sc.bottleneck
    port = sc.fabric.nodes[node].ports[port_no]
    switch = sc.fabric.nodes[node]
    starts: list[tuple[int, int]] = []
    port.taps.append(lambda t_ps, pkt: starts.append((t_ps, pkt.nbytes)))
    switch.max_ingress_bytes = 0

    def ingress(t_ps: int, node: int, port: int, pg: int, nbytes: int) -> None:
        switch.max_ingress_bytes = max(switch.max_ingress_bytes, nbytes)

    switch.ingress_tap = ingress
    sc.fabric.run(sc.duration_ps)
    return starts, port, switch, sc


def _idle_ps_after(starts: list[tuple[int, int]], rate_bps: int, t0_ps: int) -> int:
    """Total time the port spent idle between frames that started after ``t0_ps``."""
    idle = 0
    for (t_a, n_a), (t_b, _) in pairwise(starts):
        if t_a < t0_ps:
            continue
        idle += t_b - (t_a + frame_ser_time_ps(n_a, rate_bps))
    return idle


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(senders=st.integers(2, 8), cable_m=st.sampled_from([10, 50, 100, 200]),
       xoff_kb=st.sampled_from([20.0, 40.0, 80.0]))
def test_bottleneck_never_idles_with_a_backlog(senders: int, cable_m: int,
                                               xoff_kb: float) -> None:
    """Line-rate senders into one port: once the PGs have paused, the egress queue holds
    senders x (XOFF - xon delta) at every XON, more than one round trip of bytes (asserted
    below with a factor of 2), so the port must never idle again."""
    starts, port, switch, _ = _run_incast(senders, cable_m, xoff_kb, 150.0)
    rate = port.rate_bps
    c = switch.mmu.config
    # XON round trip: the switch's PAUSE frame out, the sender's response, the data back.
    rtt_ps = 2 * prop_delay_ps(cable_m) + 2 * frame_ser_time_ps(1082, rate) + us_to_ps(1)
    backlog_bytes = senders * (c.xoff_bytes - c.xon_delta_bytes)
    assume(backlog_bytes * 8 * 10**12 > 2 * rtt_ps * rate)
    first_pause_ps = 30_000_000  # by 30 us every PG has crossed XOFF at >= 2x overload
    assert switch.mmu.drops_by_reason == {}
    assert _idle_ps_after(starts, rate, first_pause_ps) == 0


def test_incast_with_long_cables_stays_busy() -> None:
    """An 8:1 incast, 0.3 ms: 8 line-rate senders, XOFF 40 KB, 200 m cables.  With the older
    rule the port idled 1.39 us of every 48.6 us pause cycle."""
    starts, port, switch, sc = _run_incast(8, 200, 40.0, 300.0)
    assert switch.mmu.drops_by_reason == {}
    assert _idle_ps_after(starts, port.rate_bps, 30_000_000) == 0
    c = switch.mmu.config
    assert 0 < switch.max_ingress_bytes <= c.reserved_bytes + c.xoff_bytes + c.headroom_bytes
    assert port.busy_ps_until(sc.duration_ps) >= 0.99 * sc.duration_ps

"""The GPU-NIC PCIe link applied in the NIC: a receive buffer drained over PCIe
with PFC backpressure (the slow receiver of Guo et al., SIGCOMM 2016, Sec. 4.4), a per-host
send pacer at the PCIe read rate, and the ``pcie_*`` parameters (sim/nic/host.py "PCIe",
docs/explanation/collectives.md "The PCIe budget").

Hand-derived figures: a 1082-byte frame carries 1024 payload bytes (58 bytes of RoCEv2
headers and ICRC the NIC makes itself); writing 1024 bytes at 200 Gb/s takes
1024 * 8 / 200e9 s = 40.96 ns = 40960 ps, reading them at 100 Gb/s 81920 ps.
"""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.events import PauseSent
from sim.fabric import star
from sim.nic.host import PCIE_HEADER_BYTES, Flow, Host, rx_thresholds
from sim.packet import SimPacket
from sim.scenarios.common import host_kw, mmu_config
from sim.trace import ListTracer
from sim.units import gbps
from sim.workloads.collective import fabric_counters
from tests.helpers import run_cli

_P = {"pfc": True, "xoff_kb": 20.0, "buffer_kb": 1000.0, "cable_m": 10, "packet_bytes": 1082}
PROP_PS = 50_000  # 10 m


def _fabric(send_gbps: int, host_kw: dict, senders: int = 1, tracer=None):
    rate = gbps(send_gbps)
    cfg, _ = mmu_config(_P, senders + 2, rate)
    return star(senders, rate, PROP_PS, cfg, host_kw=host_kw, tracer=tracer)


def _run_one_flow(write_gbps: float, buffer_bytes: int, pfc: bool, *, send_gbps: int = 400,
                  packet_bytes: int = 1082, frames: int | None = None,
                  until_ps: int = 100_000_000, tracer=None):
    # unreliable NICs: what the buffer drops is lost (RC resends it: tests/test_rc.py)
    kw = {"pcie_write_bps": gbps(write_gbps), "rx_buffer_bytes": buffer_bytes,
          "rx_pause_tcs": (3,) if pfc else (), "rx_mtu_bytes": max(packet_bytes, 1082),
          "reliable": False}
    fab, recv, (snd,) = _fabric(send_gbps, kw, tracer=tracer)
    size = None if frames is None else frames * packet_bytes
    fab.add_flow(Flow(0, snd, recv, gbps(send_gbps), tc=3, packet_bytes=packet_bytes,
                      size_bytes=size))
    h = fab.nodes[recv]
    times: list[int] = []
    h.on_data = lambda f, got, now: times.append(now)
    fab.engine.run(until_ps=until_ps)
    return fab, h, fab.nodes[snd], times


def test_slow_receiver_delivers_at_the_pcie_rate_and_pauses_its_switch_port() -> None:
    tracer = ListTracer()
    fab, h, snd, times = _run_one_flow(200, 256_000, True, tracer=tracer)
    gaps = {b - a for a, b in pairwise(times)}
    assert gaps == {40_960}  # back to back at 200 Gb/s of payload: the buffer never empties
    assert len(times) > 2000
    sw = fab.nodes[0]
    assert h.rx_buffer_dropped_packets == 0 and sw.drops == 0
    assert fabric_counters(fab)["drops"] == 0
    assert h.pause_sent_count > 0 and sw.ports[h.node_id].paused_ps(3) > 0
    pauses = [e for e in tracer.events if isinstance(e, PauseSent) and e.node == h.node_id]
    assert {e.priority for e in pauses} == {3}
    quanta = {e.quanta for e in pauses}
    assert quanta == {0xFFFF, 0}  # real PAUSE and XON frames
    assert h.rx_xoff_bytes is not None and h.rx_buffer_max_bytes <= h.rx_buffer_bytes
    assert h.rx_buffer_max_bytes >= h.rx_xoff_bytes
    # the sender was held back: it sent about what was delivered plus the buffer
    assert snd.sent_packets[0] * 1082 <= h.rx_bytes[0] + h.rx_buffer_bytes + 50_000


def test_without_pfc_a_full_receive_buffer_drops_and_the_drops_are_counted() -> None:
    fab, h, snd, times = _run_one_flow(200, 256_000, False, frames=2000,
                                       until_ps=10**9)
    assert h.pause_sent_count == 0
    dropped = h.rx_buffer_dropped_packets
    assert dropped > 0
    assert snd.sent_packets[0] == 2000 == h.rx_packets[0] + dropped
    assert fabric_counters(fab)["drops"] == dropped
    # one count of the network's drops: the fabric's summary has them too
    totals = fab.summary()["totals"]
    assert totals["drops"] == dropped
    assert totals["dropped_bytes_by_reason"] == {"rx_buffer_full": dropped * 1082}
    assert h.rx_buffer_max_bytes <= 256_000
    assert {b - a for a, b in pairwise(times)} == {40_960}


@settings(max_examples=25, deadline=None)
@given(send=st.sampled_from([100, 200, 400]), write=st.integers(20, 500),
       buffer_kb=st.integers(80, 400), pfc=st.booleans(),
       packet=st.sampled_from([256, 1082, 4154]))
def test_the_receive_buffer_never_overflows_and_pfc_never_drops(send, write, buffer_kb, pfc,
                                                                packet) -> None:
    frames = 600
    _, h, _, times = _run_one_flow(write, buffer_kb * 1000, pfc, send_gbps=send,
                                       packet_bytes=packet, frames=frames,
                                       until_ps=10**9)
    assert h.rx_buffer_max_bytes <= h.rx_buffer_bytes
    assert h.rx_buffer_used_bytes == 0
    assert h.rx_packets.get(0, 0) + h.rx_buffer_dropped_packets == frames
    if pfc:
        assert h.rx_buffer_dropped_packets == 0  # the headroom holds what is in flight
    # deliveries never faster than PCIe writes them
    need = -(-(packet - PCIE_HEADER_BYTES) * 8 * 10**12 // gbps(write))
    assert all(b - a >= need for a, b in pairwise(times))


def test_the_send_pacer_caps_a_host_at_the_pcie_read_rate_shared_by_its_flows() -> None:
    fab, recv, (snd,) = _fabric(400, {"pcie_read_bps": gbps(100)})
    h = fab.nodes[snd]
    for fid in (0, 1):
        fab.add_flow(Flow(fid, snd, recv, gbps(400), tc=3))
    sent: list[int] = []
    h.port.taps.append(lambda t, pkt: sent.append(t))
    fab.engine.run(until_ps=50_000_000)
    assert {b - a for a, b in pairwise(sent)} == {81_920}
    assert abs(h.sent_packets[0] - h.sent_packets[1]) <= 1


def test_cnp_on_arrival_delivery_after_the_pcie_write() -> None:
    fab, recv, (snd,) = _fabric(400, {"pcie_write_bps": gbps(100)})
    h: Host = fab.nodes[recv]
    pkt = SimPacket(1, 0, 1082, flow=7, tc=3, ecn=3, src=snd, dst=recv)
    fab.engine.schedule(0, h.receive, 0, pkt)
    fab.engine.run(until_ps=1_000)
    assert h.cnp_sent == 1 and h.rx_ce[7] == 1 and h.rx_packets.get(7) is None
    fab.engine.run(until_ps=100_000)
    assert h.rx_packets[7] == 1 and h.rx_first_ps[7] == 81_920


def test_thresholds_follow_mlx5_rule_with_the_headroom_formula() -> None:
    from sim.net.mmu import headroom_bytes

    hr = headroom_bytes(gbps(400), 1, 9216, 1_000_000, propagation_ps_per_m=PROP_PS)
    assert rx_thresholds(256_000, gbps(400), PROP_PS) == (256_000 - hr, 256_000 - hr - 9216, hr)


def test_pcie_parameters_off_by_default_and_gen5_x16_for_collectives() -> None:
    from sim.nic.pcie import PcieLink
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params

    assert "pcie_write_bps" not in host_kw({**_P, "cc": "none"}, gbps(100))
    p = resolve_params(collective_params(), {})
    kw = host_kw(p, gbps(p["link_gbps"]))
    link = PcieLink(5, 16, 256)
    assert kw["pcie_write_bps"] == link.write_bps() and kw["pcie_read_bps"] == link.read_bps()
    assert kw["rx_buffer_bytes"] == 2_048_000 and kw["rx_pause_tcs"] == (3,)


def test_bad_pcie_parameters_are_one_line_errors() -> None:
    for bad, word in (("pcie_gen=7", "pcie_gen"), ("pcie_lanes=3", "pcie_lanes"),
                      ("pcie_mps_bytes=100", "pcie_mps_bytes"),
                      ("nic_rx_buffer_kb=10", "headroom")):
        rc, _, err = run_cli(["collective", "allreduce", "-b", "1M", "-e", "1M",
                                "-p", bad])
        assert rc == 2, (bad, err)
        assert err.count("\n") == 1 and err.startswith("lossless: ") and word in err, err


def test_an_800g_nic_behind_gen5_x16_is_capped_a_400g_one_is_not() -> None:
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    def busbw(gbps_: float, gen: int) -> float:
        p = resolve_params(collective_params(), {"nodes": 4, "gpus_per_node": 1,
                                                 "link_gbps": gbps_, "pcie_gen": gen,
                                                 "nccl_host": False})  # the network alone
        row = run_size("allreduce", 4 << 20, "star", p, algorithm="ring", protocol="simple",
                       inplace=False)
        assert row["error"] is None and row["counters"]["drops"] == 0
        return row["busbw_GB_per_s"]

    capped, free = busbw(800, 5), busbw(800, 0)
    assert capped < 55.5 < 0.7 * free  # Gen5 x16 at MPS 256: 55.48 GB/s of writes
    assert abs(busbw(400, 5) - busbw(400, 0)) < 0.01 * busbw(400, 0)


_SLOW_FILE = """
[run]
duration_ms = 0.1
[topology]
kind = "star"
hosts = 3
[links]
link_gbps = 400.0
[switch]
pfc = {pfc}
buffer_kb = 4000.0
xoff_kb = 200.0
mtu_bytes = 4154
[hosts]
pcie_gen = {gen}
[[flows]]
src = 1
dst = 3
packet_bytes = 4154
[[flows]]
src = 2
dst = 3
packet_bytes = 4154
"""


def test_fabric_file_hosts_take_pcie_gen_and_the_slow_receiver_pauses(tmp_path) -> None:
    import json

    outs = {}
    for gen, pfc in ((4, "true"), (4, "false"), (0, "true"), (9, "true")):
        f = tmp_path / f"slow{gen}{pfc}.toml"
        f.write_text(_SLOW_FILE.format(gen=gen, pfc=pfc))
        out = tmp_path / f"o{gen}{pfc}"
        rc, _, err = run_cli(["replay", str(f), "--out", str(out), "--no-plots",
                              "--no-capture"])
        if gen == 9:
            assert rc == 2 and err.count("\n") == 1 and "pcie_gen" in err, err
            continue
        assert rc == 0, err
        ev = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
        summary = json.loads((out / "summary.json").read_text())
        outs[gen, pfc] = ([e for e in ev if e["event"] == "PauseSent" and e["node"] == 3],
                          summary["totals"])
    nic_pauses, totals = outs[4, "true"]
    assert nic_pauses and totals["drops"] == 0 and totals["pauses"] > 0
    nic_pauses, totals = outs[4, "false"]
    assert not nic_pauses and totals["dropped_packets_by_reason"]["rx_buffer_full"] > 0
    nic_pauses, totals = outs[0, "true"]
    assert not nic_pauses and totals["drops"] == 0  # only the switch pauses (a 2:1 incast)


def test_the_end_of_an_rx_stall_does_not_resume_what_the_full_buffer_pauses() -> None:
    tracer = ListTracer()
    kw = {"pcie_write_bps": gbps(100), "rx_buffer_bytes": 256_000}
    fab, recv, (snd,) = _fabric(400, kw, tracer=tracer)
    fab.add_flow(Flow(0, snd, recv, gbps(400), tc=3))
    h = fab.nodes[recv]
    h.stall_rx(20_000_000, 20_100_000)  # 100 ns, while the buffer sits near XOFF
    fab.engine.run(until_ps=20_099_999)
    assert 3 in h._rx_paused
    fab.engine.run(until_ps=20_100_001)
    xon = [e for e in tracer.events
           if isinstance(e, PauseSent) and e.node == recv and e.t_ps == 20_100_000]
    assert xon == []
    fab.engine.run(until_ps=40_000_000)
    assert h.rx_buffer_dropped_packets == 0 and h.rx_buffer_max_bytes <= 256_000

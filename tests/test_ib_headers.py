"""An InfiniBand fabric carries InfiniBand packets: the header stack of its data packets
(``wire.linkstack``: LRH + BTH + ICRC + VCRC, no Ethernet framing on the wire), in the
collectives, the replayed scenarios and what the commands print and write
(docs/explanation/infiniband.md "IB packets on IB links", docs/explanation/collectives.md)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.engine import Engine
from sim.flowctl.ib import IbConfig, attach_ib
from sim.net.port import Port
from sim.packet import SimPacket
from sim.units import gbps, ser_time_ps, wire_bytes
from tests.helpers import run_cli
from wire.bth import BTH
from wire.ib import ICRC_BYTES, LRH, VCRC_BYTES
from wire.linkstack import IB, ROCE, header_stack

RATE = gbps(100)


def test_the_stacks_are_measured_on_the_field_tables() -> None:
    # IBA 7.7 (LRH 8), 9.2 (BTH 12), 7.8.1 (ICRC 4), 7.8.2 (VCRC 2)
    assert IB.header_bytes == LRH.size_bytes + BTH.size_bytes + ICRC_BYTES + VCRC_BYTES == 26
    assert ROCE.header_bytes == 58  # Eth 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4
    assert (IB.frame_bytes(), ROCE.frame_bytes()) == (4122, 4154)  # the 4096-byte IB MTU
    assert IB.label == "IB headers" and ROCE.label == "RoCE headers"
    assert header_stack("ib") is IB
    with pytest.raises(ValueError, match="unknown header stack"):
        header_stack("fc")


@given(st.integers(0, 9216))
def test_wire_bytes_ethernet_is_the_802_3_framing_and_ib_adds_nothing(n: int) -> None:
    assert ROCE.wire_bytes(n) == wire_bytes(n)  # sim.units: FCS, 64-byte minimum, L1
    assert IB.wire_bytes(n) == n


def test_an_ib_link_serialises_the_packet_bytes_alone() -> None:
    eng = Engine(0)
    a, b = Port(eng, 1, 0, RATE), Port(eng, 2, 0, RATE)
    assert a.ser_time_ps(1024) == ser_time_ps(1024 + 4 + 20, RATE)  # Ethernet until IB
    attach_ib(a, b, IbConfig())
    assert a.stack is IB and b.stack is IB
    assert a.ser_time_ps(1024) == ser_time_ps(1024, RATE) == 81_920
    assert a.wire_bytes(60) == 60  # no padding to 64 bytes, no preamble, no IFG
    got: list[int] = []

    class Sink:
        node_id = 2

        def receive(self, port: int, pkt: SimPacket) -> None:
            got.append(eng.now_ps)

    a.connect(Sink(), 0, 0)
    for i in range(3):
        a.enqueue(SimPacket(i, 0, 1024, tc=3))
    eng.run(10**7)
    assert got == [81_920, 2 * 81_920, 3 * 81_920]  # back to back at the data rate


@pytest.mark.parametrize("flow_control", ["ib", "pfc"])
def test_a_line_rate_flow_fills_its_link_on_either_stack(flow_control: str) -> None:
    """The NIC paces a line-rate flow at its link's wire time: Ethernet's framing on RoCE,
    the packet alone on IB, so both keep the link busy."""
    from sim.fabric.core import star
    from sim.net.mmu import MmuConfig
    from sim.nic.host import Flow

    cfg = MmuConfig(buffer_bytes=10**7, ports=3, xoff_bytes=10**7, lossless_pgs=frozenset())
    fab, recv, (src,) = star(1, RATE, 0, cfg, link_kw={"flow_control": flow_control})
    fab.add_flow(Flow(0, src, recv, RATE, tc=3, packet_bytes=1050))
    fab.run(10**7)  # 10 us
    port = fab.nodes[src].port
    assert port.stack is (IB if flow_control == "ib" else ROCE)
    assert port.busy_ps_until(10**7) == 10**7  # never idle: paced at the wire time
    assert port.tx_packets == 10**7 // port.ser_time_ps(1050)  # back to back


def _replay(tmp_path, *params: str):
    out = tmp_path / "o"
    rc, _so, err = run_cli(["replay", "incast", "-p", "senders=2", "-p", "duration_ms=0.05",
                           *(a for p in params for a in ("-p", p)), "--out", str(out),
                           "--no-plots", "--force"])
    assert rc == 0, err
    return json.loads((out / "summary.json").read_text()), err


def test_replay_on_ib_fills_the_link_with_ib_packets_and_reports_credits(tmp_path) -> None:
    s, err = _replay(tmp_path, "fabric=ib")
    assert s["params"]["packet_bytes"] == 1050  # 1024 B of payload with IB headers
    assert s["bottleneck"]["utilisation"] > 0.99
    t = s["totals"]
    ib_ports = [p for p in s["ports"] if "credit_stall_ps" in p]
    assert len(ib_ports) == len(s["ports"])  # every link is an IB link
    for key in ("credit_stall_ps", "credit_stalls", "fc_packets"):
        assert t[key] == sum(p[key] for p in ib_ports)
    assert t["credit_stall_ps"] > 0 and t["fc_packets"] > 0
    assert all("rx_vl_buffer_max_bytes" in p for p in ib_ports)
    assert f"credit stall {t['credit_stall_ps'] / 1e6:.3f} us ({t['credit_stalls']} stalls)" \
        in err
    # RoCE summaries keep their keys
    s, err = _replay(tmp_path, "fabric=roce")
    assert s["params"]["packet_bytes"] == 1082
    assert "credit_stall_ps" not in s["totals"] and "credit stall" not in err
    assert not any("credit_stall_ps" in p for p in s["ports"])
    # a packet size given stays as given
    s, _ = _replay(tmp_path, "fabric=ib", "packet_bytes=1082")
    assert s["params"]["packet_bytes"] == 1082


def _collective(tmp_path, *params: str):
    out = tmp_path / "c"
    # Ring Simple: whole 4096-byte payloads (LL and LL128 send smaller last packets)
    rc, so, err = run_cli(["collective", "allreduce", "-b", "1M", "-e", "1M", "-p", "nodes=2",
                           "-p", "gpus_per_node=2", "--algo", "ring", "--proto", "simple",
                           *(a for p in params for a in ("-p", p)),
                           "--out", str(out), "--force"])
    assert rc == 0, err
    return so, json.loads((out / "results.json").read_text()), out


def test_collective_on_ib_sends_ib_packets_and_says_so(tmp_path) -> None:
    so, doc, out = _collective(tmp_path, "fabric=ib", "vl_buffer_kb=16.384")
    head = so.splitlines()[0]
    assert "credits on VLs 0-7" in head and "pfc" not in head
    assert doc["header_stack"] == "ib" and doc["params"]["packet_bytes"] == 4122
    row = doc["results"][0]
    # the largest queue is whole 4122-byte packets (4096 B of payload + 26 B of headers)
    assert row["counters"]["max_queue_bytes"] % 4122 == 0
    lines = so.splitlines()
    i = next(k for k, line in enumerate(lines) if "busiest link" in line)
    assert "credit_stall" in lines[i] and "pfc_pauses" not in lines[i] and "(us)" in lines[i + 1]
    stall_us = float(lines[i + 2].split()[4])
    assert stall_us == pytest.approx(row["counters"]["credit_stall_ps"] / 1e6, abs=1e-3)
    assert stall_us > 0
    csv_head = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert "credit_stall_ps" in csv_head
    from sim.study.collective_plots import busbw_bound

    assert "400 Gb/s NIC x 4096/4122 on the wire (26 B IB headers)" in busbw_bound(doc)[1]


def test_ib_carries_more_payload_per_second_than_roce(tmp_path) -> None:
    """The same collective, bounded by the NICs: IB's busbw is RoCE's x the ratio of their
    data shares on the wire, 4096/4122 against 4096/(4154 + 24), within 0.5 %."""
    # the network alone: NCCL's host side would bound part of the time by the GPUs
    _so, ib, _ = _collective(tmp_path, "fabric=ib", "nvlink=false", "nccl_host=false")
    _so, roce, _ = _collective(tmp_path, "nvlink=false", "nccl_host=false")
    assert "header_stack" not in roce and roce["params"]["packet_bytes"] == 4154
    ratio = ib["results"][0]["busbw_GB_per_s"] / roce["results"][0]["busbw_GB_per_s"]
    assert ratio == pytest.approx((4096 / 4122) / (4096 / 4178), rel=5e-3)
    assert ratio > 1


def test_collective_ib_packet_above_the_ib_mtu_is_refused() -> None:
    rc, _so, err = run_cli(["collective", "allreduce", "-b", "1M", "-e", "1M", "-p",
                            "fabric=ib", "-p", "packet_bytes=4154"])
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "packet_bytes" in err and "4096" in err and "Traceback" not in err

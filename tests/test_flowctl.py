"""One link-level flow-control interface (sim/flowctl/): a port consults its gate
before it starts a data frame and is woken when the gate reopens; PFC and credits are two
implementations; credits are selectable per link in the library (``Fabric.connect(...,
flow_control="credit")``, ``star(..., link_kw=)``) and in fabric files (``[links]
flow_control``), with hosts and plain switches as well as SUE XPUs and ESUN switches."""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.engine import Engine
from sim.fabric import Fabric, star
from sim.flowctl.base import FLOW_CONTROLS, check_flow_control
from sim.flowctl.credit import CbfcConfig, CreditFlowControl
from sim.flowctl.pfc import PfcResponder
from sim.net.mmu import Mmu, MmuConfig
from sim.net.port import CreditPort, Port
from sim.net.switch import Switch
from sim.nic.host import Flow
from sim.packet import SimPacket
from sim.units import gbps, prop_delay_ps
from tests.helpers import run_cli


class _Sink:
    def __init__(self) -> None:
        self.got: list[tuple[int, int]] = []  # (t_ps, packet id)
        self.engine: Engine | None = None

    def receive(self, port: int, pkt: SimPacket) -> None:
        assert self.engine is not None
        self.got.append((self.engine.now_ps, pkt.id))


class _Gate:
    """A scripted gate: ``closed`` classes are blocked."""

    def __init__(self, classes: tuple[int, ...]) -> None:
        self.classes = classes
        self.closed: set[int] = set()
        self.asked: list[tuple[int, int]] = []

    def blocked(self, tc: int, nbytes: int) -> bool:
        self.asked.append((tc, nbytes))
        return tc in self.closed


@given(st.lists(st.sampled_from([1, 3]), min_size=1, max_size=12),
       st.sampled_from(["rr", "dwrr"]))
def test_gate_blocks_its_class_only_and_wake_resumes(tcs, scheduler):
    eng = Engine(0)
    sink = _Sink()
    sink.engine = eng
    kw = {"weights": [1] * 8} if scheduler == "dwrr" else {}
    p = Port(eng, 0, 0, gbps(100), scheduler=scheduler, **kw)
    p.connect(sink, 0, 0)
    gate = _Gate((3,))
    gate.closed.add(3)
    p.add_gate(gate)
    pkts = [SimPacket(i, 0, 100, tc=tc) for i, tc in enumerate(tcs)]
    for pkt in pkts:
        p.enqueue(pkt)
    eng.run(10**9)
    # class 1 went, class 3 waits (not paused: the port's pause timers are untouched)
    assert [i for _, i in sink.got] == [pk.id for pk in pkts if pk.tc == 1]
    assert not p.paused(3) and len(p.queues[3]) == tcs.count(3)
    if 3 in tcs:
        assert (3, 100) in gate.asked
    gate.closed.clear()
    eng.schedule(2 * 10**9, p.wake, 3)
    eng.run(3 * 10**9)
    assert sorted(i for _, i in sink.got) == [pk.id for pk in pkts]
    assert all(t >= 2 * 10**9 for t, i in sink.got if pkts[i].tc == 3)


def test_both_implementations_share_the_interface():
    assert FLOW_CONTROLS == ("pfc", "credit", "ib")
    assert check_flow_control("credit") == "credit"
    with pytest.raises(ValueError, match="flow_control must be one of"):
        check_flow_control("xon")
    # credits: a gate (classes + blocked) mixed into the port; PFC: the port's pause timers
    # plus the receiver half every switch has
    assert issubclass(CreditPort, CreditFlowControl) and issubclass(CreditPort, Port)
    assert hasattr(CreditFlowControl, "blocked") and hasattr(CreditFlowControl, "freed")
    eng = Engine(0)
    sw = Switch(eng, 0, Mmu(_cfg(2)), routes={})
    assert isinstance(sw.pfc, PfcResponder)


def _cfg(ports: int) -> MmuConfig:
    return MmuConfig(buffer_bytes=10**6, ports=ports, xoff_bytes=20_000)


def _incast(flow_control: str, pfc: bool, senders: int = 4, duration_ps: int = 200_000_000):
    rate = gbps(100)
    prop = prop_delay_ps(10)
    # a buffer far too small for a 4:1 incast without flow control
    cfg = MmuConfig(buffer_bytes=40_000, ports=senders + 2, headroom_bytes=0,
                    lossless_pgs=frozenset({3}) if pfc else frozenset(), xoff_bytes=8_000)
    link_kw = {"flow_control": flow_control}
    if flow_control == "credit":
        link_kw["cbfc"] = CbfcConfig(limit_credits=8_000 // 128)
    fab, recv, hosts = star(senders, rate, prop, cfg, link_kw=link_kw)
    for i, h in enumerate(hosts):
        fab.add_flow(Flow(i, h, recv, rate, tc=3, packet_bytes=1082, size_bytes=200_000))
    fab.run(duration_ps)
    return fab, fab.summary()


def test_credit_links_in_a_plain_fabric_are_lossless_and_drain():
    fab, s = _incast("pfc", pfc=False)
    assert s["totals"]["drops"] > 0  # the same incast without any flow control drops
    fab, s = _incast("credit", pfc=False, duration_ps=2_000_000_000)
    assert s["totals"]["drops"] == 0
    delivered = sum(f["bytes_delivered"] for f in s["flows"])
    assert delivered == 4 * 200_000
    ports = [p for n in fab.nodes.values() for p in n.ports.values()]
    assert all(isinstance(p, CreditPort) for p in ports)
    assert all(p.credits_used[3] == 0 for p in ports)  # every credit came back
    assert sum(p.cbfc_stalls for p in ports) > 0  # and credits did hold senders back


def test_connect_per_link_and_refusals():
    fab = Fabric(0)
    fab.add_switch(0, Mmu(_cfg(3)), routes={1: 1, 2: 2})
    fab.add_host(1, gbps(100))
    fab.add_host(2, gbps(100))
    cb = CbfcConfig(limit_credits=64)
    fab.connect(0, 1, 1, 0, gbps(100), 1000, flow_control="credit", cbfc=cb)
    fab.connect(0, 2, 2, 0, gbps(100), 1000)  # the fabric's default: pfc
    assert isinstance(fab.nodes[0].ports[1], CreditPort)
    assert isinstance(fab.nodes[1].port, CreditPort)
    assert type(fab.nodes[0].ports[2]) is Port and type(fab.nodes[2].port) is Port
    with pytest.raises(ValueError, match="needs a CbfcConfig"):
        fab.connect(0, 1, 1, 0, gbps(100), 1000, flow_control="credit")
    with pytest.raises(ValueError, match="flow_control must be one of"):
        Fabric(0, flow_control="pause")


_FILE = """
[run]
duration_ms = 0.3
[topology]
kind = "star"
hosts = 5
[links]
link_gbps = 100.0
flow_control = "{fc}"
[switch]
pfc = false
buffer_kb = 600.0
[traffic]
pattern = "incast"
"""


@pytest.mark.parametrize("fc,lossless", [("pfc", False), ("credit", True)])
def test_fabric_file_links_flow_control(tmp_path, fc, lossless):
    from sim.study.results import run_scenario

    f = tmp_path / "f.toml"
    f.write_text(textwrap.dedent(_FILE.format(fc=fc)), encoding="utf-8")
    s = run_scenario(str(f), out_dir=str(tmp_path / "o"), plots=False, progress=False)
    assert (s["totals"]["drops"] == 0) is lossless, s["totals"]


def test_fabric_file_bad_flow_control_is_one_line(tmp_path):
    f = tmp_path / "f.toml"
    f.write_text(textwrap.dedent(_FILE.format(fc="xon")), encoding="utf-8")
    code, _out, err = run_cli(["replay", str(f), "--out", str(tmp_path / "o")])
    assert code == 2
    assert err.count("\n") == 1 and "flow_control" in err and "Traceback" not in err

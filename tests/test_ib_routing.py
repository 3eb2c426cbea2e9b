"""InfiniBand routing in the simulator (docs/explanation/infiniband.md "Routing"):
OpenSM min-hop LFTs (sim.fabric.lft), adaptive routing per packet (sim.net.switch), out-of-order
arrivals counted at the receiver (sim.nic.host), ``[topology] routing`` in fabric files."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
from sim.fabric import Fabric
from sim.fabric.fattree import fat_tree
from sim.fabric.lft import apply_adaptive, apply_lft, apply_routing, min_hop_lft, minimal_ports
from sim.fabric.rail import rail_optimized
from sim.fabric.topology import leaf_spine, route_problem
from sim.net.mmu import Mmu, MmuConfig, headroom_bytes
from sim.net.switch import Switch
from sim.nic.host import Flow, Host
from sim.packet import SimPacket
from sim.units import gbps, prop_delay_ps

RATE = gbps(100)


def _cfg(ports: int = 16) -> MmuConfig:
    return MmuConfig(buffer_bytes=4_000_000, ports=ports, reserved_bytes=2000,
                     headroom_bytes=headroom_bytes(RATE, 10, 1082, 1_000_000),
                     lossless_pgs=frozenset({3}), xoff_mode="static", xoff_bytes=20_000,
                     xon_delta_bytes=2000)


def _hosts(fab: Fabric) -> list[int]:
    return sorted(n for n, x in fab.nodes.items() if isinstance(x, Host))


def _all_routable(fab: Fabric) -> None:
    memo: dict = {}
    hosts = _hosts(fab)
    for s in hosts:
        for d in hosts:
            if s != d:
                assert route_problem(fab, s, d, memo) is None, (s, d)


# ------------------------------------------------------------------------ min-hop LFT
def test_lft_by_hand_two_leaves_two_spines() -> None:
    # spines 0, 1; leaves 2, 3; hosts 4 5 6 under leaf 2, 7 8 9 under leaf 3.  Leaf ports
    # 0..2 down, 3 -> spine 0, 4 -> spine 1; spine port l -> leaf l.
    t = leaf_spine(2, 2, 3, RATE, prop_delay_ps(10), _cfg())
    lft = min_hop_lft(t.fabric)
    # leaf 2: own hosts straight down; remote 7, 8, 9 in LID order over the least-used uplink,
    # ties to the lower port: 7 -> 3 (spine 0), 8 -> 4 (spine 1), 9 -> 3 (spine 0).
    assert lft[2] == {4: 0, 5: 1, 6: 2, 7: 3, 8: 4, 9: 3}
    assert lft[3] == {4: 3, 5: 4, 6: 3, 7: 0, 8: 1, 9: 2}
    assert lft[0] == {4: 0, 5: 0, 6: 0, 7: 1, 8: 1, 9: 1}
    assert lft[1] == lft[0]
    # not the builder's destination-modulo table (it sends 7 and 9 to spine 1)
    assert t.fabric.nodes[2].routes[7] == 4
    apply_lft(t.fabric, lft)
    sw = t.fabric.nodes[2]
    assert sw.routing == "static" and sw.routes == lft[2]
    _all_routable(t.fabric)


@given(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4))
def test_lft_balances_uplinks_and_routes_every_pair(leaves: int, spines: int, h: int) -> None:
    t = leaf_spine(leaves, spines, h, RATE, prop_delay_ps(10), _cfg())
    lft = min_hop_lft(t.fabric)
    for leaf in t.leaves:
        up = Counter(p for d, p in lft[leaf].items() if p >= h)
        counts = [up.get(h + s, 0) for s in range(spines)]
        # OpenSM's least-path-count rule over one least-hop group: counts differ by <= 1
        assert max(counts) - min(counts) <= 1
        assert sum(counts) == (leaves - 1) * h
    apply_lft(t.fabric, lft)
    _all_routable(t.fabric)


@pytest.mark.parametrize("build", [
    lambda: fat_tree(4, link_gbps=100).fabric,
    lambda: rail_optimized(3, 4, spines=2, link_gbps=100).fabric,
], ids=["fat_tree_k4", "rail_3x4"])
def test_lft_and_adaptive_route_every_pair(build) -> None:
    fab = build()
    lft = min_hop_lft(fab)
    groups = minimal_ports(fab)
    for s, table in lft.items():
        for d, port in table.items():
            assert port in groups[s][d]  # always a least-hop port: loop free
        # balance within each least-hop group shared by several destinations
        by_group: dict[tuple[int, ...], Counter] = {}
        for d, port in table.items():
            by_group.setdefault(groups[s][d], Counter())[port] += 1
        for g, c in by_group.items():
            if len(g) > 1 and sum(c.values()) >= len(g):
                assert max(c[p] for p in g) - min(c[p] for p in g) <= 1, (s, g, c)
    apply_lft(fab, lft)
    _all_routable(fab)
    apply_adaptive(fab)
    _all_routable(fab)


def test_static_switch_refuses_a_group_and_unknown_modes() -> None:
    fab = Fabric()
    with pytest.raises(ValueError, match="routing 'static' takes one port"):
        fab.add_switch(0, Mmu(_cfg()), routes={5: (1, 2)}).set_routes({5: (1, 2)}, "static")
    with pytest.raises(ValueError, match="routing must be one of"):
        Switch(fab.engine, 1, Mmu(_cfg()), routes={}, routing="random")
    with pytest.raises(ValueError, match="routing must be one of"):
        apply_routing(fab, "ftree")  # (OpenSM's fat-tree engine: not modelled)


# ------------------------------------------------------------------- adaptive routing
def _ar_switch(routing: str) -> Switch:
    fab = Fabric()
    sw = fab.add_switch(0, Mmu(_cfg()), routes={9: (1, 2, 3)})
    sw.set_routes({9: (1, 2, 3)}, routing)
    for i in (1, 2, 3):
        sw.add_port(i, RATE)
    return sw


def _pkt(flow: int = 7, tc: int = 3) -> SimPacket:
    return SimPacket.trusted(1, 0, 1082, flow, tc, 2, 8, 9)


def test_adaptive_picks_the_port_with_least_queued_for_the_class() -> None:
    sw = _ar_switch("adaptive")
    hashed = sw._resolve(_pkt()).index  # all empty: the flow's hash member
    assert hashed == sw.ecmp_choices[(8, 9, 7)]
    q = {1: 5000, 2: 3000, 3: 4000}
    q[hashed] = 5000
    for i, b in q.items():
        sw.ports[i].queue_bytes[3] = b
    want = min(q, key=lambda i: (q[i], i))
    assert sw._resolve(_pkt()).index == want
    assert sw.adaptive_moves == 1
    # another class's queues do not count: class 5 is empty everywhere -> the hash member
    assert sw._resolve(_pkt(tc=5)).index == hashed
    # ties with the hash member keep it
    for i in (1, 2, 3):
        sw.ports[i].queue_bytes[3] = 2000
    assert sw._resolve(_pkt()).index == hashed
    # among strictly smaller ones, the first in group order
    others = [i for i in (1, 2, 3) if i != hashed]
    for i in others:
        sw.ports[i].queue_bytes[3] = 100
    assert sw._resolve(_pkt()).index == others[0]


def test_ecmp_ignores_queues() -> None:
    sw = _ar_switch("ecmp")
    hashed = sw._resolve(_pkt()).index
    sw.ports[hashed].queue_bytes[3] = 10**6
    assert sw._resolve(_pkt()).index == hashed and sw.adaptive_moves == 0


# --------------------------------------------------------------- out-of-order arrivals
def test_receiver_counts_frames_below_the_highest_id_seen() -> None:
    fab = Fabric()
    h = fab.add_host(1, RATE)
    for pid in (0, 1, 3, 2, 4, 7, 5, 6, 8):
        h.receive(0, SimPacket.trusted(pid, 0, 1082, 4, 3, 2, 0, 1))
    h.receive(0, SimPacket.trusted(0, 0, 1082, 5, 3, 2, 0, 1))  # another flow: its own
    assert h.rx_ooo == {4: 3}  # 2 (after 3), 5 and 6 (after 7)


def _two_paths(routing: str, packets: int = 60):
    """Host 10 -> switch 0 -> two 50 Gb/s links (1 us and 3 us) -> switch 1 -> host 11."""
    fab = Fabric(seed=3)
    s0 = fab.add_switch(0, Mmu(_cfg()), routes={11: (1, 2), 10: 0})
    s1 = fab.add_switch(1, Mmu(_cfg()), routes={11: 0, 10: (1, 2)})
    fab.add_host(10, RATE)
    b = fab.add_host(11, RATE)
    fab.connect(0, 0, 10, 0, RATE, prop_delay_ps(10))
    fab.connect(1, 0, 11, 0, RATE, prop_delay_ps(10))
    fab.connect(0, 1, 1, 1, gbps(50), 1_000_000)
    fab.connect(0, 2, 1, 2, gbps(50), 3_000_000)
    if routing == "static":
        apply_lft(fab, min_hop_lft(fab))
    else:
        for s in (s0, s1):
            s.set_routes(dict(s.routes), routing)
    b.delivered = []
    b.arrived = []  # the data frames in the order they reach host 11 (its link is FIFO)
    s1.ports[0].taps.append(lambda _t, p: b.arrived.append(p) if p.psn is not None else None)
    fab.add_flow(Flow(1, 10, 11, RATE, size_bytes=packets * 1082))
    fab.run(10**9)
    return fab, b


def _reference_ooo(ids: list[int]) -> int:
    return sum(1 for i, x in enumerate(ids) if any(y > x for y in ids[:i]))


def test_ooo_counted_exactly_with_adaptive_and_zero_with_static() -> None:
    """Frames that arrive out of order are counted as they arrive; the RC receiver of an
    adaptively routed fabric places them (no NAK, no resend) and delivers in PSN order."""
    fab, b = _two_paths("adaptive")
    ids = [p.id for p in b.arrived]
    assert len(ids) == 60 == len(set(ids))
    n = _reference_ooo(ids)
    assert n > 0 and fab.nodes[0].adaptive_moves > 0
    assert b.rx_ooo == {1: n}
    assert [p.psn for _, p in b.delivered] == list(range(60))
    assert b.rc_stats(1)["placed_out_of_order"] > 0 and b.rc_stats(1)["naks_sent"] == 0
    assert fab.nodes[10].rc_stats(1)["retransmitted_frames"] == 0
    assert fab.summary()["flows"][0]["ooo_packets"] == n
    for routing in ("static", "ecmp"):
        fab, b = _two_paths(routing)
        assert len(b.delivered) == 60 and b.rx_ooo == {}
        assert fab.summary()["flows"][0]["ooo_packets"] == 0


def _all_to_all(routing: str, **hosts):
    """The leaf_spine 4x2 all_to_all at full load of docs/explanation/infiniband.md
    ("leaf_spine 4x2: ECMP, LFT, adaptive"), 0.5 ms: (goodput b/s, the flows' RC counters
    summed)."""
    from sim.scenarios.description import build

    doc = {"run": {"duration_ms": 0.5},
           "topology": {"kind": "leaf_spine", "leaves": 4, "spines": 2, "hosts_per_leaf": 2,
                        "routing": routing},
           "traffic": {"pattern": "all_to_all", "load": 1.0}, "hosts": dict(hosts)}
    sc = build(doc, "f.toml")
    sc.fabric.run(sc.duration_ps)
    flows = sc.fabric.summary()["flows"]
    rc: Counter = Counter()
    for f in flows:
        rc.update(f["rc"])
    return sum(f["throughput_bps"] for f in flows), rc


def test_adaptive_all_to_all_with_out_of_order_nics_keeps_the_lft_goodput() -> None:
    """With adaptive routing the NICs place out-of-order frames (``ooo`` "auto"): the
    all_to_all gets within 2 % of the static LFT's goodput, and no frame is dropped, NAKed
    or resent for being reordered; ``ooo = false`` (go-back-N NICs) loses about a third."""
    lft, _ = _all_to_all("static")
    ar, rc = _all_to_all("adaptive")
    assert ar >= 0.98 * lft
    assert rc["placed_out_of_order"] > 1000
    assert rc["out_of_sequence"] == rc["naks_sent"] == rc["duplicates"] == 0
    assert rc["retransmitted_frames"] == rc["timeouts"] == 0
    gbn, rc = _all_to_all("adaptive", ooo=False)
    assert gbn < 0.8 * lft and rc["out_of_sequence"] > 0 and "placed_out_of_order" not in rc


# -------------------------------------------------------------------------- fabric files
_FILE = """[run]
duration_ms = 0.02
[topology]
kind = "{kind}"
{extra}
[traffic]
pattern = "all_to_all"
"""


def _replay(tmp_path, capsys, kind: str, extra: str):
    f = tmp_path / "f.toml"
    f.write_text(_FILE.format(kind=kind, extra=extra))
    out = tmp_path / "out"
    capsys.readouterr()
    try:
        rc = main(["replay", str(f), "--out", str(out), "--force", "--no-plots",
                   "--no-capture"])
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().err, out


@pytest.mark.parametrize("routing", ["static", "adaptive"])
def test_fabric_file_routing_and_ooo_in_summary(tmp_path, capsys, routing: str) -> None:
    rc, err, out = _replay(tmp_path, capsys, "leaf_spine",
                           f'leaves = 2\nspines = 2\nhosts_per_leaf = 2\nrouting = "{routing}"')
    assert rc == 0, err
    doc = json.loads((out / "summary.json").read_text())
    assert all("ooo_packets" in f for f in doc["flows"])
    assert doc["totals"]["ooo_packets"] == sum(f["ooo_packets"] for f in doc["flows"])
    if routing == "static":
        assert doc["totals"]["ooo_packets"] == 0


def test_fabric_file_without_routing_keeps_its_summary_keys(tmp_path, capsys) -> None:
    rc, err, out = _replay(tmp_path, capsys, "leaf_spine",
                           "leaves = 2\nspines = 2\nhosts_per_leaf = 2")
    assert rc == 0, err
    doc = json.loads((out / "summary.json").read_text())
    assert "ooo_packets" not in doc["totals"] and "ooo_packets" not in doc["flows"][0]


@pytest.mark.parametrize("kind,extra,msg", [
    ("leaf_spine", 'routing = "clockwise"', "routing: must be one of ['ecmp', 'static'"),
    ("ring", 'routing = "static"', "routing: must be one of ['clockwise', 'shortest']"),
    ("leaf_spine", 'routing = "static"\necmp = true', "ecmp: true contradicts routing"),
    ("star", 'routing = "static"', "do(es) not apply to kind = 'star'"),
])
def test_fabric_file_routing_errors_are_one_line(tmp_path, capsys, kind, extra, msg) -> None:
    rc, err, _ = _replay(tmp_path, capsys, kind, extra)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("lossless: ") and msg in lines[0], err

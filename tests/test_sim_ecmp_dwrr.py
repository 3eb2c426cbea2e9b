"""Per-flow ECMP in switches and leaf-spine, and DWRR egress scheduling on ports.

ECMP: flows spread over the spines, each flow keeps one path (no reordering), choices are
deterministic per seed, ``ecmp=False`` keeps one spine per destination, bad routes are clear
errors.  DWRR (Shreedhar & Varghese 1995): byte shares follow the weights (unlike packet round
robin), strict classes still go first, a paused class neither blocks the others nor banks
credit, the port is work conserving, and the classic fairness bound holds at every step.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.engine import Engine
from sim.fabric import Fabric
from sim.fabric.topology import leaf_spine
from sim.net.mmu import Mmu, MmuConfig, headroom_bytes
from sim.net.port import Port
from sim.net.switch import Switch, _mix64, ecmp_hash, ecmp_salt, pfc_packet
from sim.nic.host import Flow
from sim.packet import SimPacket
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps
from wire.pfc import quanta_to_ps

RATE = gbps(100)


def _cfg(ports: int = 8, lossless=frozenset({3})) -> MmuConfig:
    return MmuConfig(buffer_bytes=4_000_000, ports=ports, reserved_bytes=2000,
                     headroom_bytes=headroom_bytes(RATE, 10, 1082, 1_000_000),
                     lossless_pgs=frozenset(lossless), xoff_mode="static", xoff_bytes=20_000,
                     xon_delta_bytes=2000)


# ------------------------------------------------------------------------------------ ECMP
def test_hash_is_splitmix64_and_salted_per_switch() -> None:
    assert _mix64(0) == 0xE220A8397B1DCDAF  # SplitMix64's first output from state 0
    assert ecmp_hash(4, 9, 17, ecmp_salt(2, 0)) == ecmp_hash(4, 9, 17, ecmp_salt(2, 0))
    keys = [(s, d, f) for s in range(4) for d in range(4, 8) for f in range(20)]
    a = [ecmp_hash(*k, ecmp_salt(2, 0)) % 2 for k in keys]
    b = [ecmp_hash(*k, ecmp_salt(3, 0)) % 2 for k in keys]  # another switch
    c = [ecmp_hash(*k, ecmp_salt(2, 1)) % 2 for k in keys]  # another seed
    for other in (b, c):
        agree = sum(x == y for x, y in zip(a, other, strict=True)) / len(keys)
        assert 0.4 < agree < 0.6  # independent, not polarised
    assert 0.4 < sum(a) / len(a) < 0.6


def _ls_run(*, ecmp: bool, seed: int = 1, pairs_flows: int = 4, pkts: int = 6):
    """leaf_spine(2 leaves, 2 spines, 4 hosts/leaf); ``pairs_flows`` flows per (leaf-0 host,
    leaf-1 host) pair and back; taps on leaf uplinks record which uplink each flow used."""
    t = leaf_spine(2, 2, 4, RATE, prop_delay_ps(10), _cfg(), seed=seed, ecmp=ecmp)
    fab = t.fabric
    used: dict[tuple[int, int], set[int]] = defaultdict(set)  # (leaf, flow) -> uplinks
    dst_of: dict[int, int] = {}
    for leaf in t.leaves:
        for up in (4, 5):
            def tap(_t, pkt, _leaf=leaf, _up=up):
                if pkt.frame is None:
                    used[(_leaf, pkt.flow)].add(_up)
            fab.nodes[leaf].ports[up].taps.append(tap)
    for h in t.all_hosts:
        fab.nodes[h].delivered = []
    fid = 0
    for a in t.hosts[0]:
        for b in t.hosts[1]:
            for s, d in ((a, b), (b, a)):
                for _ in range(pairs_flows):
                    fab.add_flow(Flow(fid, s, d, RATE // 8, size_bytes=pkts * 1082,
                                      start_ps=fid * 10_000))
                    dst_of[fid] = d
                    fid += 1
    fab.run(500_000_000)
    return t, used, dst_of, fab.summary()


def test_ecmp_spreads_flows_over_spines_one_path_per_flow_in_order() -> None:
    t, used, dst_of, summ = _ls_run(ecmp=True)
    fab = t.fabric
    assert summ["totals"]["drops"] == 0
    assert all(f["bytes_delivered"] == 6 * 1082 for f in summ["flows"])
    assert len(used) == len(dst_of) == 128
    assert all(len(ups) == 1 for ups in used.values())  # one spine per flow
    per_uplink = Counter(next(iter(ups)) for ups in used.values())
    assert set(per_uplink) == {4, 5} and min(per_uplink.values()) >= 40  # 64 expected each
    # flows to one destination use both spines (what ecmp=False cannot do)
    by_dst: dict[int, set[int]] = defaultdict(set)
    for (_leaf, f), ups in used.items():
        by_dst[dst_of[f]] |= ups
    assert sum(len(u) == 2 for u in by_dst.values()) >= 6
    # ... and so do the 4 flows of one (src, dst) pair: the flow id is hashed, not only the pair
    by_pair: dict[tuple[int, int], set[int]] = defaultdict(set)
    for (_leaf, f), ups in used.items():
        by_pair[(fab.flows[f].src, fab.flows[f].dst)] |= ups
    assert len(by_pair) == 32 and sum(len(u) == 2 for u in by_pair.values()) >= 16
    # both spines carried data; the leaves' recorded choices match what the taps saw
    for s in t.spines:
        assert sum(p.tx_bytes for p in fab.nodes[s].ports.values()) > 0
    for leaf in t.leaves:
        for (src, dst, flow), out in fab.nodes[leaf].ecmp_choices.items():
            if src == dst_of[flow]:  # the flow's RC ACK going back (the taps see data only)
                assert dst == fab.flows[flow].src
                continue
            assert used[(leaf, flow)] == {out} and dst_of[flow] == dst
            assert src in fab.flows and fab.flows[flow].src == src
    # no reordering at the receivers
    for h in t.all_hosts:
        ids: dict[int, list[int]] = defaultdict(list)
        for _t, pkt in fab.nodes[h].delivered:
            ids[pkt.flow].append(pkt.id)
        for seq in ids.values():
            assert seq == sorted(seq) and len(seq) == 6


def test_ecmp_is_deterministic_per_seed() -> None:
    t1, used1, _, s1 = _ls_run(ecmp=True, seed=5)
    t2, used2, _, s2 = _ls_run(ecmp=True, seed=5)
    _t3, used3, _, _ = _ls_run(ecmp=True, seed=6)
    assert used1 == used2 and s1 == s2
    assert [t1.fabric.nodes[n].ecmp_choices for n in t1.leaves] == \
        [t2.fabric.nodes[n].ecmp_choices for n in t2.leaves]
    assert used1 != used3  # the seed salts the hash


def test_without_ecmp_each_destination_uses_one_spine() -> None:
    t, used, dst_of, summ = _ls_run(ecmp=False)
    assert summ["totals"]["drops"] == 0
    by_dst: dict[int, set[int]] = defaultdict(set)
    for (_leaf, f), ups in used.items():
        by_dst[dst_of[f]] |= ups
    assert len(by_dst) == 8
    for d, ups in by_dst.items():
        assert ups == {4 + d % 2}  # H + dst % S
    assert all(not t.fabric.nodes[n].ecmp_choices for n in t.leaves)


def test_leaf_routes_with_ecmp() -> None:
    t = leaf_spine(2, 2, 2, RATE, prop_delay_ps(10), _cfg(), ecmp=True)
    assert t.fabric.nodes[2].routes == {4: 0, 5: 1, 6: (2, 3), 7: (2, 3)}
    assert t.fabric.nodes[0].routes == {4: 0, 5: 0, 6: 1, 7: 1}


def _two_host_fabric(routes: dict) -> Fabric:
    fab = Fabric()
    fab.add_switch(0, Mmu(_cfg(4)), routes=routes)
    for h in (1, 2):
        fab.add_host(h, RATE)
        fab.connect(0, h, h, 0, RATE, 0)
    return fab


@pytest.mark.parametrize("routes", [{1: 1, 2: 9}, {1: 1, 2: (2, 9)}])
def test_route_to_a_missing_port_is_a_clear_error(routes) -> None:
    fab = _two_host_fabric(routes)
    with pytest.raises(ValueError, match=r"switch 0: route to 2 uses port 9"):
        fab.nodes[0].check_routes()
    # also at first use, inside the run (for a group: when a flow hashes to the bad port)
    for f in range(8):
        fab.add_flow(Flow(f, 1, 2, RATE, size_bytes=1082, start_ps=f * 1_000_000))
    with pytest.raises(ValueError, match=r"switch 0: route to 2 uses port 9"):
        fab.run(100_000_000)


@pytest.mark.parametrize("bad", ["3", (), [], (1, "2"), 1.0, True])
def test_malformed_route_rejected_at_construction(bad) -> None:
    with pytest.raises(ValueError, match=r"switch 0: route to 2"):
        Switch(Engine(), 0, Mmu(_cfg(4)), routes={1: 1, 2: bad})


def test_leaf_spine_checks_routes(monkeypatch) -> None:
    import sim.fabric.core as core

    calls = []

    class Counting(core.Switch):  # the compiled Switch's methods cannot be patched on the class
        def check_routes(self) -> None:
            calls.append(self.node_id)

    monkeypatch.setattr(core, "Switch", Counting)
    leaf_spine(2, 2, 2, RATE, 0, _cfg(), ecmp=True)
    assert sorted(calls) == [0, 1, 2, 3]


# ------------------------------------------------------------------------------------ DWRR
class Sink:
    node_id = 99

    def receive(self, port: int, pkt: SimPacket) -> None:
        pass


def _loaded_port(loads: dict[int, list[int]], **kw):
    """A port with every queue loaded before the scheduler's first data choice: a control
    frame occupies the link while the data is enqueued.  Returns (engine, port, log) where
    log lists (start t_ps, tc, nbytes) of data frames."""
    eng = Engine()
    p = Port(eng, 1, 0, RATE, **kw)
    p.connect(Sink(), 0, 0)
    log: list[tuple[int, int, int]] = []
    p.taps.append(lambda t, pkt: log.append((t, pkt.tc, pkt.nbytes)) if pkt.frame is None
                  else None)
    p.send_control(pfc_packet(10**9, 0, 1, 0, 0, 0))
    pid = 0
    for tc, sizes in loads.items():
        for n in sizes:
            p.enqueue(SimPacket(pid, 0, n, tc=tc))
            pid += 1
    return eng, p, log


def _bytes_by_tc(log, n: int | None = None) -> Counter:
    c: Counter = Counter()
    for _t, tc, nb in log[:n]:
        c[tc] += nb
    return c


def test_dwrr_weights_3_to_1_give_3_to_1_bytes() -> None:
    w = [1] * 8
    w[0] = 3
    eng, _p, log = _loaded_port({0: [1082] * 2000, 1: [1082] * 2000}, scheduler="dwrr",
                                weights=w)
    eng.run(until_ps=800 * frame_ser_time_ps(1082, RATE))
    got = _bytes_by_tc(log)
    assert got[0] / got[1] == pytest.approx(3.0, rel=0.03)
    # packet round robin on the same load: 1:1
    eng, _p, log = _loaded_port({0: [1082] * 2000, 1: [1082] * 2000})
    eng.run(until_ps=800 * frame_ser_time_ps(1082, RATE))
    got = _bytes_by_tc(log)
    assert got[0] / got[1] == pytest.approx(1.0, rel=0.03)


def test_equal_weights_dwrr_shares_bytes_rr_shares_packets() -> None:
    loads = {2: [1500] * 3000, 3: [500] * 9000}
    eng, _p, log = _loaded_port(loads, scheduler="dwrr")
    eng.run(until_ps=2000 * frame_ser_time_ps(1000, RATE))
    b = _bytes_by_tc(log)
    assert b[2] / b[3] == pytest.approx(1.0, rel=0.03)
    eng, _p, log = _loaded_port(loads, scheduler="rr")
    eng.run(until_ps=2000 * frame_ser_time_ps(1000, RATE))
    pk = Counter(tc for _t, tc, _n in log)
    assert pk[2] / pk[3] == pytest.approx(1.0, rel=0.03)
    b = _bytes_by_tc(log)
    assert b[2] / b[3] == pytest.approx(3.0, rel=0.03)


def test_strict_class_goes_first_under_dwrr() -> None:
    eng, _p, log = _loaded_port({0: [1082] * 20, 7: [300] * 10, 1: [1082] * 20},
                                scheduler="dwrr", weights=[1, 4, 1, 1, 1, 1, 1, 0])
    eng.run()
    assert [tc for _t, tc, _n in log[:10]] == [7] * 10
    assert len(log) == 50


def test_paused_class_does_not_block_others_nor_bank_credit() -> None:
    ser = frame_ser_time_ps(1000, RATE)
    eng, p, log = _loaded_port({0: [1000] * 3000, 1: [1000] * 3000}, scheduler="dwrr",
                               weights=[2, 1, 1, 1, 1, 1, 1, 1], quantum_bytes=1000)
    pause_lo, pause_hi = 52 * ser, 50 * ser + quanta_to_ps(5000, RATE)
    eng.schedule(50 * ser, p.pause, 0, 5000)
    seen: list[int] = []
    for at in (pause_lo, pause_hi - 1):
        eng.schedule(at, lambda: seen.append(p.deficit[0]))
    eng.run(until_ps=pause_hi - 1)
    assert seen[0] == seen[1] <= 2000  # no quantum gained while paused
    during = [(t, tc) for t, tc, _n in log if pause_lo <= t < pause_hi]
    assert during and all(tc == 1 for _t, tc in during)
    starts = [t for t, _tc in during]
    assert all(b - a == ser for a, b in itertools.pairwise(starts))  # back to back
    # after the pause ends, the 2:1 share resumes at once (no burst of banked credit)
    eng.run(until_ps=pause_hi + 300 * ser)
    after = [tc for t, tc, _n in log if t >= pause_hi][:300]
    assert 190 <= after.count(0) <= 210
    assert max(len(run) for run in "".join(map(str, after)).split("1")) <= 2


def test_dwrr_is_work_conserving() -> None:
    """Mixed sizes and weights, no pause: the backlog drains back to back; with pauses, the
    port is never idle while an unpaused queue holds a frame."""
    sizes = {0: [64, 9000, 1500] * 30, 1: [1082] * 50, 2: [200, 4000] * 40}
    eng, p, log = _loaded_port(sizes, scheduler="dwrr", weights=[1, 3, 2, 1, 1, 1, 1, 1],
                               quantum_bytes=700)
    eng.run()
    total = sum(frame_ser_time_ps(n, RATE) for q in sizes.values() for n in q)
    ctl = frame_ser_time_ps(60, RATE)
    assert len(log) == sum(map(len, sizes.values()))
    assert eng.now_ps == ctl + total  # never idle from the first frame to the last

    eng, p, log = _loaded_port(sizes, scheduler="dwrr", weights=[1, 3, 2, 1, 1, 1, 1, 1],
                               quantum_bytes=700)
    idle_with_work = []

    def probe() -> None:
        if not p.busy and any(q and not p.paused(tc) for tc, q in enumerate(p.queues)):
            idle_with_work.append(eng.now_ps)

    for k in range(1, 400):
        eng.schedule(k * 7_777_777 + 13, probe)
    for k, tc in enumerate([0, 2, 1, 0, 2, 0]):
        eng.schedule(k * 90_000_000 + 1, p.pause, tc, 3000)
    eng.run()
    assert not idle_with_work
    assert len(log) == sum(map(len, sizes.values()))


def test_scheduler_argument_validation() -> None:
    eng = Engine()
    with pytest.raises(ValueError, match="scheduler"):
        Port(eng, 1, 0, RATE, scheduler="wfq")
    with pytest.raises(ValueError, match="weights"):
        Port(eng, 1, 0, RATE, scheduler="dwrr", weights=[1, 2, 3])
    with pytest.raises(ValueError, match="weights"):
        Port(eng, 1, 0, RATE, scheduler="dwrr", weights=[1, 1, -1, 1, 1, 1, 1, 1])
    with pytest.raises(ValueError, match=r"weights\[2\] is 0"):
        Port(eng, 1, 0, RATE, scheduler="dwrr", weights=[1, 1, 0, 1, 1, 1, 1, 1])
    with pytest.raises(ValueError, match="quantum_bytes"):
        Port(eng, 1, 0, RATE, scheduler="dwrr", quantum_bytes=0)
    with pytest.raises(ValueError, match="weights"):
        Switch(eng, 0, Mmu(_cfg(4)), routes={}, scheduler="dwrr", weights=[1.5] * 8)
    Port(eng, 1, 0, RATE, scheduler="dwrr", weights=[1, 1, 1, 1, 1, 1, 1, 0])  # 7 is strict
    assert Port(eng, 1, 0, RATE).scheduler == "rr"


def test_fabric_and_topology_plumb_the_scheduler() -> None:
    """Two line-rate senders on TC 1 and TC 3 into one receiver through a DWRR switch with
    weights 3:1, both classes lossless: the receiver gets 3:1 bytes."""
    fab = Fabric()
    sw = fab.add_switch(0, Mmu(_cfg(4, lossless={1, 3})), routes={1: 1, 2: 2, 3: 3},
                        scheduler="dwrr", weights=[1, 3, 1, 1, 1, 1, 1, 1])
    for h in (1, 2, 3):
        fab.add_host(h, RATE)
        fab.connect(0, h, h, 0, RATE, prop_delay_ps(10))
    assert all(p.scheduler == "dwrr" and p.quantum == [1500, 4500] + [1500] * 6
               for p in sw.ports.values())
    fab.add_flow(Flow(0, 1, 3, RATE, tc=1))
    fab.add_flow(Flow(1, 2, 3, RATE, tc=3))
    fab.run(200_000_000)
    s = fab.summary()
    assert s["totals"]["drops"] == 0
    got = {f["id"]: f["bytes_delivered"] for f in s["flows"]}
    assert got[0] / got[1] == pytest.approx(3.0, rel=0.05)

    t = leaf_spine(2, 2, 2, RATE, 0, _cfg(), switch_kw={"scheduler": "dwrr",
                                                         "weights": [2] * 8})
    ports = [p for n in t.spines + t.leaves for p in t.fabric.nodes[n].ports.values()]
    assert ports and all(p.scheduler == "dwrr" and p.quantum[0] == 3000 for p in ports)
    assert all(t.fabric.nodes[h].port.scheduler == "rr" for h in t.all_hosts)


@given(weights=st.lists(st.integers(1, 8), min_size=4, max_size=4),
       quantum=st.integers(100, 3000),
       sizes=st.lists(st.integers(64, 9000), min_size=5, max_size=40),
       n=st.integers(50, 300))
def test_dwrr_fairness_bound(weights, quantum, sizes, n) -> None:
    """Classes 0..3 backlogged: at every step, the normalised service ``sent_i / w_i`` of any
    two classes differs by less than 2 quantum units plus one maximum frame over the smaller
    weight (each class has gained a quantum the same number of times +-1, and its deficit
    stays in [0, max frame + its quantum)).  Checked after every frame while all four queues
    are non-empty; at the end the byte shares follow the weights."""
    max_pkt = max(sizes)
    w = weights + [1] * 4
    eng = Engine()
    p = Port(eng, 1, 0, RATE, scheduler="dwrr", weights=w, quantum_bytes=quantum)
    p.connect(Sink(), 0, 0)
    sent = [0] * 4
    checked = []
    violations = []
    backlogged = True

    def tap(_t: int, pkt: SimPacket) -> None:
        nonlocal backlogged
        if pkt.frame is not None or not backlogged:
            return
        sent[pkt.tc] += pkt.nbytes
        if not all(p.queues[:4]):
            backlogged = False
            return
        checked.append(1)
        for i in range(4):
            for j in range(i + 1, 4):
                lhs = abs(sent[i] * w[j] - sent[j] * w[i])
                if lhs >= 2 * quantum * w[i] * w[j] + max_pkt * max(w[i], w[j]):
                    violations.append((tuple(sent), i, j))

    p.taps.append(tap)
    p.send_control(pfc_packet(10**9, 0, 1, 0, 0, 0))
    pid = 0
    for tc in range(4):
        for k in range(n * w[tc]):  # enough to stay backlogged for many rounds
            p.enqueue(SimPacket(pid, 0, sizes[(k * 7 + tc) % len(sizes)], tc=tc))
            pid += 1
    eng.run()
    assert not violations, violations[:3]
    assert len(checked) >= n

"""Max-min fair rates of fluid flows (sim.workloads.fluid): a textbook case, the max-min
conditions on random flow sets (every flow has a bottleneck: a full link where no flow has
more), and the incremental FluidNet against a recomputation of everything."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.workloads import maxmin
from sim.workloads.fluid import FluidNet, max_min_rates
from tests.helpers import interpreted


def test_the_textbook_case():
    """Bertsekas and Gallager's kind of example: B is shared by three flows (10/3 each);
    the flow that shares A with one of them gets what A has left."""
    r = max_min_rates({"A": 10.0, "B": 10.0},
                      {1: ("A",), 2: ("A", "B"), 3: ("B",), 4: ("B",)})
    assert r[2] == r[3] == r[4] == pytest.approx(10 / 3)
    assert r[1] == pytest.approx(10 - 10 / 3)


links = st.integers(0, 7)
instances = st.tuples(
    st.lists(st.integers(1, 100), min_size=8, max_size=8),
    st.dictionaries(st.integers(0, 30), st.lists(links, min_size=1, max_size=4),
                    min_size=1, max_size=20))


@given(instances)
def test_rates_are_max_min_fair(inst):
    caps, paths = inst
    cap = {i: float(c) for i, c in enumerate(caps)}
    paths = {f: tuple(p) for f, p in paths.items()}
    r = max_min_rates(cap, paths)
    load = {i: 0.0 for i in cap}
    for f, p in paths.items():
        for link in set(p):
            load[link] += r[f]
    for link, c in cap.items():
        assert load[link] <= c * (1 + 1e-9)
    for f, p in paths.items():  # a bottleneck: full, and no flow on it has more
        assert any(load[link] >= cap[link] * (1 - 1e-9)
                   and all(r[g] <= r[f] * (1 + 1e-9) for g, q in paths.items() if link in q)
                   for link in set(p)), f


@given(instances, st.lists(st.integers(0, 30), max_size=25))
def test_incremental_rates_equal_a_recomputation(inst, removals):
    """Flows added one by one, some removed: the rates FluidNet keeps are what max-min of
    the remaining flows gives, and each add or remove recomputes only the flows that share
    links with it (transitively)."""
    caps, paths = inst
    net = FluidNet({i: c * 8 * 10**12 for i, c in enumerate(caps)})
    for f, p in paths.items():
        net.add(f, p)
    for f in removals:
        if f in net.paths:
            net.remove(f)
    want = max_min_rates({i: float(c) for i, c in enumerate(caps)},
                         {f: p for f, p in sorted(net.paths.items())})
    assert net.rate_Bpps == want  # the same doubles: fill_flows numbers links as it does


def test_only_the_component_is_recomputed():
    """Two flows on disjoint links: adding a third beside the first recomputes those two,
    not the other; a capacity change moves the rates of the link's flows."""
    net = FluidNet({"a": 8e12, "b": 8e12, "c": 8e12})
    net.add(1, ["a"])
    net.add(2, ["c"])
    before = net.recomputed
    changed = net.add(3, ["a", "b"])
    assert net.recomputed - before == 2 and set(changed) == {1, 3}
    assert net.rate_Bpps == {1: 0.5, 2: 1.0, 3: 0.5}
    assert net.set_capacity("a", 4e12) == {1: 0.25, 3: 0.25}
    with pytest.raises(ValueError, match="no capacity"):
        net.add(4, ["z"])


def _reference_max_min(capacity, paths):
    """Progressive filling written with dicts and heapq over tuples (the algorithm
    max_min_rates documents), to hold the compiled array form to: the same doubles."""
    import heapq
    from collections import defaultdict

    on = defaultdict(list)
    for f, links in paths.items():
        for link in dict.fromkeys(links):
            on[link].append(f)
    residual = {link: float(capacity[link]) for link in on}
    count = {link: len(fs) for link, fs in on.items()}
    order = {link: i for i, link in enumerate(on)}
    heap = [(residual[link] / count[link], order[link], link) for link in on]
    heapq.heapify(heap)
    rate = {}
    while heap:
        share, _, link = heapq.heappop(heap)
        n = count[link]
        if not n or share != residual[link] / n:
            continue
        for f in on[link]:
            if f in rate:
                continue
            rate[f] = share
            for other in dict.fromkeys(paths[f]):
                residual[other] -= share
                count[other] -= 1
                if other != link and count[other]:
                    heapq.heappush(heap, (max(residual[other], 0.0) / count[other],
                                          order[other], other))
        count[link] = 0
    for f in paths:
        rate.setdefault(f, 0.0)
    return rate


@given(st.tuples(
    st.lists(st.sampled_from([0.0, 1.0, 3.0, 10.0, 0.05, 7.5, 1e-3]), min_size=10,
             max_size=10),
    st.dictionaries(st.integers(0, 60), st.lists(st.integers(0, 9), min_size=0, max_size=5),
                    min_size=1, max_size=40)))
def test_the_compiled_filling_gives_the_reference_doubles(inst):
    """Equal shares, links of no capacity, repeated links on a path, flows on no link: the
    rates are exactly (==) the reference's, from the core in use and from the .py."""
    from array import array

    caps, paths = inst
    cap = dict(enumerate(caps))
    paths = {f: tuple(p) for f, p in paths.items()}
    want = _reference_max_min(cap, paths)
    assert max_min_rates(cap, paths) == want
    number: dict = {}
    c, starts, links = array("d"), array("q", [0]), array("q")
    for p in paths.values():
        for link in dict.fromkeys(p):
            if link not in number:
                number[link] = len(c)
                c.append(cap[link])
            links.append(number[link])
        starts.append(len(links))
    py = interpreted(maxmin)
    assert list(py.fill(c, starts, links)) == [want[f] for f in paths]
    # by fixed link numbers (FluidNet's: here the reverse of first use), numbered again
    from sim.workloads.maxmin import fill_flows

    keys = sorted(cap, reverse=True)
    num = {k: g for g, k in enumerate(keys)}
    nums = [array("q", [num[x] for x in dict.fromkeys(p)]) for p in paths.values()]
    for fn in (fill_flows, py.fill_flows):
        scratch = array("q", [-1]) * len(keys)
        assert list(fn(cap, keys, nums, scratch)) == [want[f] for f in paths]
        assert list(scratch) == [-1] * len(keys)

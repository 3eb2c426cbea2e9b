"""Max-min fair rates of fluid flows over shared links (sans-IO, no engine).

A flow-level fidelity moves each transfer as a fluid flow at a rate instead of as packets:
the rates are the max-min fair allocation of the links' capacities among the flows that
cross them (progressive filling: raise every flow's rate together; when a link is full, its
flows keep the rate they have and the others go on; Bertsekas and Gallager, "Data
Networks", 2nd ed., section 6.5.2).  :class:`FluidNet` holds the flows and their links and
keeps the allocation up to date as flows come and go, recomputing only the flows that
share a link with the one that changed, directly or through other flows (its component):
the max-min allocation of one component does not depend on the others, so the result is
the same as recomputing everything (tested).

Rates are in bytes per picosecond (floats); capacities are given in bits per second and
converted once.  A flow's path comes from :func:`sim.fabric.paths.path_links`; its first
link is the sending NIC's, which caps it at the NIC's line rate.
"""

from __future__ import annotations

from array import array
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping

from sim.workloads.maxmin import fill, fill_flows

__all__ = ["FluidNet", "max_min_rates"]

Link = Hashable


def max_min_rates(capacity_Bpps: Mapping[Link, float],
                  paths: Mapping[int, tuple[Link, ...]]) -> dict[int, float]:
    """The max-min fair rates (bytes/ps) of the flows ``paths`` (flow -> its links) over
    links of ``capacity_Bpps``: progressive filling with a heap of the links' fair shares
    (residual capacity over unfrozen flows), ties broken by link order of first use
    (:func:`sim.workloads.maxmin.fill`, compiled with the core)."""
    number: dict[Link, int] = {}
    cap = array("d")
    starts = array("q", [0])
    links = array("q")
    for path in paths.values():
        for link in dict.fromkeys(path):  # a link twice on one path counts once
            m = number.get(link)
            if m is None:
                m = number[link] = len(cap)
                cap.append(float(capacity_Bpps[link]))
            links.append(m)
        starts.append(len(links))
    return dict(zip(paths, fill(cap, starts, links), strict=True))


class FluidNet:
    """Fluid flows over links, with their max-min fair rates kept up to date.

    ``capacity_bps``: link -> capacity in bits per second (any hashable link key, e.g. the
    ``(node, port)`` pairs of :func:`sim.fabric.paths.path_links`).  :meth:`add` and
    :meth:`remove` change the flows and return the flows whose rate changed (with their new
    rate); :attr:`rate_Bpps` holds every active flow's rate (bytes per picosecond);
    :meth:`set_capacity` changes a link's (a degraded or failed link)."""

    def __init__(self, capacity_bps: Mapping[Link, int]) -> None:
        self.capacity_Bpps = {link: c / 8e12 for link, c in capacity_bps.items()}
        self.paths: dict[int, tuple[Link, ...]] = {}
        # each link's fixed number (first seen), each flow's links by number (each once, in
        # path order), and the filling's scratch (-1 per number): maxmin.fill_flows
        self._number: dict[Link, int] = {}
        self._keys: list[Link] = []
        self._numbered: dict[int, array] = {}
        self._scratch = array("q")
        self.on: dict[Link, set[int]] = defaultdict(set)
        self.rate_Bpps: dict[int, float] = {}
        #: flows recomputed so far (a measure of the incremental work)
        self.recomputed = 0

    def add(self, flow: int, links: Iterable[Link], update: bool = True) -> dict[int, float]:
        """Start ``flow`` on ``links``; the rates that changed (``update`` False: none
        recomputed yet, :meth:`refresh` does it)."""
        path = tuple(links)
        if flow in self.paths:
            raise ValueError(f"flow {flow} is already active")
        for link in path:
            if link not in self.capacity_Bpps:
                raise ValueError(f"flow {flow}: link {link!r} has no capacity")
        self.paths[flow] = path
        for link in path:
            self.on[link].add(flow)
        nums = self._numbered[flow] = array("q")
        for link in dict.fromkeys(path):
            g = self._number.get(link)
            if g is None:
                g = self._number[link] = len(self._keys)
                self._keys.append(link)
                self._scratch.append(-1)
            nums.append(g)
        return self._update(self._component((flow,))) if update else {}

    def remove(self, flow: int, update: bool = True) -> dict[int, float] | set[int]:
        """End ``flow``; the rates of the others that changed (``update`` False: the flows
        that shared a link with it, to :meth:`refresh`)."""
        path = self.paths.pop(flow)
        del self._numbered[flow]
        self.rate_Bpps.pop(flow, None)
        for link in path:
            self.on[link].discard(flow)
        touched = {f for link in path for f in self.on[link]}
        return self._update(self._component(touched)) if update else touched

    def refresh(self, flows: Iterable[int]) -> dict[int, float]:
        """Recompute the components of ``flows`` (those still active): the rates that
        changed.  Several adds and removes at one instant then cost one recomputation."""
        return self._update(self._component(f for f in flows if f in self.paths))

    def set_capacity(self, link: Link, capacity_bps: int) -> dict[int, float]:
        """Change ``link``'s capacity; the rates that changed."""
        self.capacity_Bpps[link] = capacity_bps / 8e12
        return self._update(self._component(self.on.get(link, ())))

    def _component(self, seeds: Iterable[int]) -> set[int]:
        """The flows that share a link with ``seeds``, directly or through each other."""
        todo = list(seeds)
        seen = set(todo)
        links_seen: set[Link] = set()
        while todo:
            f = todo.pop()
            for link in self.paths[f]:
                if link in links_seen:
                    continue
                links_seen.add(link)
                for g in self.on[link]:
                    if g not in seen:
                        seen.add(g)
                        todo.append(g)
        return seen

    def _update(self, flows: set[int]) -> dict[int, float]:
        if not flows:
            return {}
        self.recomputed += len(flows)
        order = sorted(flows)  # max_min_rates of these flows in this order, as fill_flows
        new = dict(zip(order, fill_flows(self.capacity_Bpps, self._keys,  # gives it
                                         [self._numbered[f] for f in order], self._scratch),
                       strict=True))
        changed = {f: r for f, r in new.items() if self.rate_Bpps.get(f) != r}
        self.rate_Bpps.update(new)
        return changed

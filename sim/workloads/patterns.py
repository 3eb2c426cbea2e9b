"""Synthetic traffic patterns over a list of hosts (used by the built-in scenarios and by
scenario files' ``[traffic]`` table).

Every pattern returns ``(src, dst)`` pairs in a deterministic order; the caller turns each into
a :class:`sim.nic.host.Flow`.  ``groups`` is the hosts grouped by their first switch (a leaf, a ring
switch): patterns that should cross the fabric avoid pairs inside one group.

* ``shift``: host ``i`` of group ``g`` sends to host ``i`` of group ``g + 1`` (wrapping): every
  flow crosses the fabric and every host sends and receives exactly one flow.
* ``random``: a seeded random permutation of all hosts with no host sending to its own group
  (a derangement across groups, found by rejection sampling with the run's seed); falls back
  to ``shift`` order when the groups make that impossible (one group).
* ``incast``: every other host sends to the first host.
* ``all_to_all``: every ordered pair of distinct hosts.
"""

from __future__ import annotations

import random

__all__ = ["PATTERNS", "pairs"]

PATTERNS = ("shift", "random", "incast", "all_to_all")


def pairs(pattern: str, groups: list[list[int]], seed: int = 0) -> list[tuple[int, int]]:
    hosts = [h for g in groups for h in g]
    if pattern == "shift":
        n = len(groups)
        return [(h, groups[(gi + 1) % n][i % len(groups[(gi + 1) % n])])
                for gi, g in enumerate(groups) for i, h in enumerate(g)
                if groups[(gi + 1) % n][i % len(groups[(gi + 1) % n])] != h]
    if pattern == "random":
        group_of = {h: gi for gi, g in enumerate(groups) for h in g}
        if len(groups) < 2:
            return pairs("shift", groups, seed)
        rng = random.Random(seed)
        for _ in range(10_000):
            dsts = hosts[:]
            rng.shuffle(dsts)
            if all(group_of[s] != group_of[d] for s, d in zip(hosts, dsts, strict=True)):
                return list(zip(hosts, dsts, strict=True))
        return pairs("shift", groups, seed)
    if pattern == "incast":
        return [(h, hosts[0]) for h in hosts[1:]]
    if pattern == "all_to_all":
        return [(s, d) for s in hosts for d in hosts if s != d]
    raise ValueError(f"unknown traffic pattern {pattern!r}; known: {list(PATTERNS)}")

# cython: boundscheck=False, wraparound=False
"""Progressive filling over integer-numbered links (part of the compiled core).

:func:`sim.workloads.fluid.max_min_rates` numbers the links of the flows it is given and
calls :func:`fill`; the arithmetic and the order of every step are the ones its docstring
gives (a link's fair share is its residual capacity over its unfrozen flows; the link of
the smallest share, ties by first use, freezes its flows at that share), so the rates are
the same doubles interpreted or compiled.  The ``.py`` is the source, ``maxmin.pxd`` types
it for Cython (:mod:`sim._core`).
"""

from __future__ import annotations

from array import array

__all__ = ["fill", "fill_flows"]


def fill(cap: array, starts: array, links: array) -> array:
    """Max-min fair rates of flows ``0 .. len(starts) - 2``: flow ``i`` crosses links
    ``links[starts[i]:starts[i + 1]]`` (numbered by first use, each once per flow) of
    capacities ``cap``.  A flow on no link, or only on links with nothing left, gets 0."""
    nflows = len(starts) - 1
    nlinks = len(cap)
    npaths = len(links)
    # the flows on each link, in flow order (CSR)
    count = array("q", [0]) * nlinks
    for p in range(npaths):
        count[links[p]] += 1
    off = array("q", [0]) * (nlinks + 1)
    for m in range(nlinks):
        off[m + 1] = off[m] + count[m]
    on = array("q", [0]) * npaths
    put = array("q", [0]) * nlinks
    for i in range(nflows):
        for p in range(starts[i], starts[i + 1]):
            m = links[p]
            on[off[m] + put[m]] = i
            put[m] += 1
    residual = array("d", [0.0]) * nlinks
    for m in range(nlinks):
        residual[m] = cap[m]
    out = array("d", [0.0]) * nflows
    rate = out
    frozen = array("b", [0]) * nflows
    # a heap of (share, link): at most one entry per link and one per push
    cap_h = nlinks + npaths + 1
    h_share = array("d", [0.0]) * cap_h
    h_link = array("q", [0]) * cap_h
    hn = 0
    for m in range(nlinks):
        if count[m]:
            hn = _push(h_share, h_link, hn, residual[m] / count[m], m)
    while hn > 0:
        share = h_share[0]
        m = h_link[0]
        hn = _pop(h_share, h_link, hn)
        n = count[m]
        if not n or share != residual[m] / n:  # stale entry
            continue
        for k in range(off[m], off[m + 1]):
            i = on[k]
            if frozen[i]:
                continue
            frozen[i] = 1
            rate[i] = share
            for p in range(starts[i], starts[i + 1]):
                o = links[p]
                residual[o] -= share
                count[o] -= 1
                if o != m and count[o]:
                    r = residual[o]
                    if 0.0 > r:
                        r = 0.0
                    hn = _push(h_share, h_link, hn, r / count[o], o)
        count[m] = 0
    return out


def fill_flows(capacity: dict, keys: list, paths: list, scratch: array) -> array:
    """:func:`fill` of flows given by their links' fixed numbers (``paths``: an int64 array
    per flow, each link once, in path order; ``keys[g]`` the link numbered ``g``, of
    capacity ``capacity[keys[g]]``): the links numbered again by first use, with
    ``scratch`` (-1 for every number, as it is left)."""
    nflows = len(paths)
    starts = array("q", [0]) * (nflows + 1)
    total = 0
    for i in range(nflows):
        total += len(paths[i])
        starts[i + 1] = total
    links = array("q", [0]) * total
    cap = array("d")
    glob = array("q")
    scr = scratch
    p = 0
    for i in range(nflows):
        path = paths[i]
        for k in range(len(path)):
            g = path[k]
            m = scr[g]
            if m < 0:
                m = len(glob)
                scr[g] = m
                glob.append(g)
                cap.append(float(capacity[keys[g]]))
            links[p] = m
            p += 1
    for m in range(len(glob)):
        scr[glob[m]] = -1
    return fill(cap, starts, links)


def _before(s1: float, l1: int, s2: float, l2: int) -> bool:
    return s1 < s2 or (s1 == s2 and l1 < l2)


def _push(h_share: array, h_link: array, hn: int, share: float, link: int) -> int:
    i = hn
    while i > 0:
        p = (i - 1) // 2
        if _before(h_share[p], h_link[p], share, link):
            break
        h_share[i] = h_share[p]
        h_link[i] = h_link[p]
        i = p
    h_share[i] = share
    h_link[i] = link
    return hn + 1


def _pop(h_share: array, h_link: array, hn: int) -> int:
    hn -= 1
    share = h_share[hn]
    link = h_link[hn]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= hn:
            break
        if c + 1 < hn and _before(h_share[c + 1], h_link[c + 1], h_share[c], h_link[c]):
            c += 1
        if _before(share, link, h_share[c], h_link[c]):
            break
        h_share[i] = h_share[c]
        h_link[i] = h_link[c]
        i = c
    if hn > 0:
        h_share[i] = share
        h_link[i] = link
    return hn


# Compiled (maxmin.pxd), a cpdef function's Python signature has lost its return annotation:
# put back the one written above (interpreted, it is there already).
fill.__annotations__.setdefault("return", "array")
fill_flows.__annotations__.setdefault("return", "array")

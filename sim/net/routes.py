"""Forwarding tables given by a rule instead of one entry per destination.

A switch of a generated fabric forwards by a formula of the destination (a fat-tree's core
sends to the destination's pod, an edge switch its own hosts down and every other host up):
held as a dict, a 65,536-host fat-tree's 5,120 switches would hold 335 million entries.
:class:`RouteRule` is that table as a read-only mapping, worked out per destination when a
packet or a path first asks (:class:`sim.net.switch.Switch` remembers each answer, as it
remembers the port of a dict entry), equal to the dict it stands for in every use: lookup,
iteration in destination order, comparison.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping

__all__ = ["RouteRule", "route_values"]

Route = int | tuple[int, ...]


class RouteRule(Mapping):
    """``dst -> fn(dst)`` for every ``dst`` in ``dests`` (a ``range`` or a set of node ids);
    ``outs`` lists every value ``fn`` returns (a port, or a tuple of ports: an ECMP group),
    so a switch checks its ports and a report lists its groups without asking every
    destination."""

    __slots__ = ("dests", "fn", "outs")

    def __init__(self, dests: range | frozenset[int], fn: Callable[[int], Route],
                 outs: Iterable[Route]) -> None:
        self.dests = dests
        self.fn = fn
        self.outs = tuple(dict.fromkeys(outs))

    def __getitem__(self, dst: int) -> Route:
        if dst not in self.dests:
            raise KeyError(dst)
        return self.fn(dst)

    def __iter__(self) -> Iterator[int]:
        return iter(self.dests)

    def __len__(self) -> int:
        return len(self.dests)

    def __contains__(self, dst: object) -> bool:
        return dst in self.dests

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        return Mapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"RouteRule({self.dests!r}, {self.fn!r}, outs={list(self.outs)!r})"


def route_values(routes: Mapping[int, Route]) -> Iterable[Route]:
    """Every distinct value of a forwarding table (a rule's without asking each destination)."""
    if isinstance(routes, RouteRule):
        return routes.outs
    return routes.values()

"""Congestion control for the sender NIC (the reaction point): a small registry of algorithms.

The registry is filled by explicit calls (:func:`register`), never by import side effects;
:func:`register_builtins` adds the algorithms shipped here.  An algorithm works without the
engine: it is driven by ``on_tx``, ``on_cnp`` and ``on_timer`` with the time passed in, and
says when it next needs a timer (aioquic's congestion-control shape).

May import the kernel only (it is a leaf: the NIC, sim.nic, drives it).
"""

from __future__ import annotations

from collections.abc import Callable

from sim.cc import dcqcn
from sim.cc.base import RateControl
from sim.cc.dcqcn import Dcqcn
from sim.cc.fixed import FixedRate
from sim.cc.ibcc import IbCc

__all__ = ["RateControl", "FixedRate", "Dcqcn", "IbCc", "dcqcn", "register", "names", "create",
           "register_builtins"]

_REGISTRY: dict[str, Callable[..., RateControl]] = {}


def register(name: str, factory: Callable[..., RateControl]) -> None:
    if name in _REGISTRY:
        raise ValueError(f"congestion control {name!r} is registered already")
    _REGISTRY[name] = factory


def register_builtins() -> None:
    """Register the algorithms this package ships (idempotent)."""
    if "fixed" not in _REGISTRY:
        register("fixed", FixedRate)
    if "dcqcn" not in _REGISTRY:
        register("dcqcn", Dcqcn)
    if "ibcc" not in _REGISTRY:
        register("ibcc", IbCc)  # IBA annex A10 (sim/cc/ibcc.py)


def names() -> list[str]:
    register_builtins()
    return sorted(_REGISTRY)


def create(name: str, *, line_rate_bps: int, preset: str | None = None,
           **overrides: object) -> RateControl:
    """A new instance of algorithm ``name``; an unknown name raises ValueError listing them."""
    register_builtins()
    factory = _REGISTRY.get(name)
    if factory is None:
        raise ValueError(f"unknown congestion control {name!r}; known: {', '.join(names())}")
    return factory(line_rate_bps=line_rate_bps, preset=preset, **overrides)

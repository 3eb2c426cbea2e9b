"""Scenarios: named, parameterised simulation set-ups (docs/reference/builtin-scenarios.md).

A scenario is a built-in name (``incast``) or a TOML file naming a built-in plus ``[params]``
overrides (:mod:`sim.scenarios.loader`).  The registry is filled by explicit
:func:`register` calls; the built-ins are registered on first use of :func:`names`/:func:`get`
(importing this package has no side effects).  The types live in
:mod:`sim.scenarios.base`; running a scenario is :func:`sim.study.results.run_scenario`
(``sim.scenarios.run`` is its old name).

May import the kernel, sim.flowctl, sim.net, sim.nic, sim.cc, sim.health, sim.fabric,
sim.scaleup, sim.workloads and wire.

Each builder is ``build(params: dict) -> Scenario``; it validates its parameters against its
:class:`Param` list (unknown keys and impossible values raise :class:`ScenarioError` naming the
key) and returns a ready-to-run :class:`Scenario`.
"""

from __future__ import annotations

import importlib
import warnings
from typing import Any

from sim.scenarios.base import (
    Param,
    Scenario,
    ScenarioError,
    ScenarioInfo,
    TracerSlot,
    parse_text,
    register,
    registry,
    resolve_params,
)

__all__ = ["Param", "Scenario", "ScenarioError", "ScenarioInfo", "get", "names", "register",
           "TracerSlot", "parse_text", "resolve_params"]

_REGISTRY = registry()


_builtins_done = False


def _register_builtins() -> None:
    global _builtins_done
    if _builtins_done:
        return
    _builtins_done = True
    from sim.scenarios import (
        incast,
        late_joiner,
        leaf_spine,
        pfc_deadlock_loop,
        pfc_deadlock_ring,
        pfc_storm,
        pfc_unfairness,
        ring,
        sue_packing,
    )

    register("incast", incast.build, incast.PARAMS, incast.DOC)
    register("leaf_spine", leaf_spine.build, leaf_spine.PARAMS, leaf_spine.DOC)
    register("ring", ring.build, ring.PARAMS, ring.DOC)
    register("pfc_storm", pfc_storm.build, pfc_storm.PARAMS, pfc_storm.DOC)
    register("pfc_deadlock_ring", pfc_deadlock_ring.build, pfc_deadlock_ring.PARAMS,
             pfc_deadlock_ring.DOC)
    register("pfc_deadlock_loop", pfc_deadlock_loop.build, pfc_deadlock_loop.PARAMS,
             pfc_deadlock_loop.DOC)
    register("pfc_unfairness", pfc_unfairness.build, pfc_unfairness.PARAMS,
             pfc_unfairness.DOC)
    register("sue_packing", sue_packing.build, sue_packing.PARAMS, sue_packing.DOC)
    register("late_joiner", late_joiner.build, late_joiner.PARAMS, late_joiner.DOC)


def names() -> list[str]:
    """Registered scenario names, sorted."""
    _register_builtins()
    return sorted(_REGISTRY)


def get(name: str) -> ScenarioInfo:
    """The registry entry of ``name`` (ScenarioError listing the known names if absent)."""
    _register_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ScenarioError(f"unknown scenario {name!r}; known: {sorted(_REGISTRY)}") from None


def __getattr__(name: str) -> Any:
    """``sim.scenarios.run`` (the old name) is ``sim.study.results.run_scenario`` now; the old
    name works for one release with a DeprecationWarning (docs/howto/use-the-library.md).
    Resolved by name at call time, so this package does not import the study layer above it."""
    if name == "run":
        warnings.warn("sim.scenarios.run moved to sim.study.results.run_scenario "
                      "(docs/howto/use-the-library.md); the old name goes in the next release",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module("sim.study.results").run_scenario
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

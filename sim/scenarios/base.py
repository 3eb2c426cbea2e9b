"""The scenario types and the registry itself: :class:`Param`, :class:`Scenario`,
:class:`ScenarioError`, :class:`TracerSlot`, :func:`resolve_params`, :func:`parse_text`,
:func:`register`.  The built-in scenarios and the loaders import these from here (never the
package ``__init__``, which registers the built-ins on first use), so there is no import
circle."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sim.trace import Interest
from sim.units import quantity_problem

__all__ = ["Param", "Scenario", "ScenarioError", "ScenarioInfo", "TracerSlot", "parse_text",
           "register", "registry", "resolve_params", "PAYLOAD_BYTES", "stack_defaults"]


class ScenarioError(ValueError):
    """A scenario name, file or parameter is not acceptable (the message names the key)."""


@dataclass(frozen=True)
class Param:
    """One scenario parameter: name, typed default, one-line doc and an optional check.

    ``check(value)`` returns None when the value is fine, else a short reason.  Before it,
    every int or float value passes :func:`sim.units.quantity_problem`: finite, and (by the
    unit suffix of the name: ``_ms``, ``_kb``, ``_gbps`` ...) within the simulator's int64
    ps / int64 bytes / 8 Tb/s.
    """

    name: str
    default: Any
    doc: str
    check: Callable[[Any], str | None] | None = None

    @property
    def type(self) -> type:
        return type(self.default)

    def coerce(self, value: Any) -> Any:
        """``value`` converted to this parameter's type, or ScenarioError naming the key."""
        t = self.type
        v = value
        if isinstance(v, str) and t is not str:
            v = parse_text(v)
        if t is bool:
            ok = isinstance(v, bool)
        elif t is int:
            ok = isinstance(v, int) and not isinstance(v, bool)
        elif t is float:
            ok = isinstance(v, int | float) and not isinstance(v, bool)
            if ok and isinstance(v, int):
                why = quantity_problem(self.name, v)  # before float(): 10**400 overflows it
                if why:
                    raise ScenarioError(f"parameter {self.name!r}: {why} (got {v!r})")
            if ok:
                v = float(v)
        else:
            ok = isinstance(v, t)
        if not ok:
            raise ScenarioError(f"parameter {self.name!r}: expected {t.__name__}, "
                                f"got {value!r}")
        if t is int or t is float:
            # the one finiteness/range rule: no inf/nan, and the value in the simulator's
            # integer unit (ps, bytes, b/s, named by the suffix) fits (sim.units)
            why = quantity_problem(self.name, v)
            if why:
                raise ScenarioError(f"parameter {self.name!r}: {why} (got {v!r})")
        if self.check is not None:
            why = self.check(v)
            if why:
                raise ScenarioError(f"parameter {self.name!r}: {why} (got {v!r})")
        return v


def parse_text(text: str) -> Any:
    """A command-line value: TOML-style (true, 3, 0.5, "x"); else the text itself."""
    import tomllib

    low = text.strip()
    if low in ("True", "False"):
        return low == "True"
    try:
        return tomllib.loads(f"v = {low}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def resolve_params(spec: Sequence[Param], params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Defaults overridden by ``params``, each coerced and checked; unknown keys rejected."""
    by_name = {p.name: p for p in spec}
    params = dict(params or {})
    unknown = sorted(set(params) - set(by_name))
    if unknown:
        raise ScenarioError(f"unknown parameter(s) {unknown}; known: {sorted(by_name)}")
    return {p.name: p.coerce(params[p.name]) if p.name in params else p.default for p in spec}


@dataclass
class Scenario:
    """A built, ready-to-run simulation.

    ``fabric`` is a :class:`sim.fabric.Fabric` whose tracer is ``tracer_slot`` (the runner
    points it at its recorders), ``bottleneck`` the (node, port) captured by default.
    """

    name: str
    params: dict[str, Any]
    seed: int
    duration_ps: int
    fabric: Any
    bottleneck: tuple[int, int]
    tracer_slot: Any = None
    info: dict[str, Any] = field(default_factory=dict)
    #: Captures to replay: (path, time scale) pairs (scenario files' ``[[pcap]]``).
    pcaps: list[tuple[str, Any]] = field(default_factory=list)
    #: More (node, port) egress ports to capture besides ``bottleneck``.
    captures: list[tuple[int, int]] = field(default_factory=list)
    #: Extra summary.json sections: name -> function(scenario) -> JSON-able value, called
    #: after the run (e.g. ``"sue"`` for the SUE figures).
    summaries: dict[str, Any] = field(default_factory=dict)
    #: Capture knobs of this scenario (None: not set here; ``sim.study.results.run_scenario``'s
    #: arguments and the command-line options win): the byte budget of all pcap files, the
    #: bytes kept of each frame, and whether pcaps are written at all.
    capture_limit_bytes: int | None = None
    snaplen_bytes: int | None = None
    capture_enabled: bool | None = None


class TracerSlot:
    """A tracer that forwards to ``target`` (set by the runner after the scenario is built).

    The components built with the slot check its live ``interest``
    (:class:`sim.trace.Interest`), recomputed whenever ``target`` is set: while the slot is
    empty they build no event, and with a target only the event types it reads (a target's
    queue samples go straight to its ``on_enqueued`` / ``on_dequeued`` when it has them)."""

    __slots__ = ("_target", "interest")

    def __init__(self) -> None:
        self._target: Any = None
        self.interest = Interest(None)

    @property
    def target(self) -> Any:
        return self._target

    @target.setter
    def target(self, tracer: Any) -> None:
        self._target = tracer
        self.interest.update(tracer)

    @property
    def wants(self) -> Any:
        return self.interest.types

    def emit(self, event: Any) -> None:
        if self._target is not None:
            self._target.emit(event)


@dataclass(frozen=True)
class ScenarioInfo:
    name: str
    builder: Callable[[Mapping[str, Any]], Scenario]
    params_doc: tuple[Param, ...]
    doc: str = ""


_REGISTRY: dict[str, ScenarioInfo] = {}
_builtins_done = False


def register(name: str, builder: Callable[[Mapping[str, Any]], Scenario],
             params_doc: Sequence[Param], doc: str = "") -> None:
    """Add a scenario; ``params_doc`` lists its :class:`Param` (names, defaults, docs).  A
    scenario that takes ``fabric`` and ``packet_bytes`` gets the default frame of an
    InfiniBand fabric when ``fabric = "ib"`` and no ``packet_bytes`` is given
    (:func:`stack_defaults`)."""
    if name in _REGISTRY:
        raise ValueError(f"scenario {name!r} is registered already")
    spec = tuple(params_doc)
    if {"fabric", "packet_bytes"} <= {p.name for p in spec}:
        builder = _stack_default(builder, spec)
    _REGISTRY[name] = ScenarioInfo(name, builder, spec, doc)


#: Payload of the built-in scenarios' default data frame (``packet_bytes``), bytes.
PAYLOAD_BYTES = 1024


def stack_defaults(spec: Sequence[Param], params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` of a scenario (parameters ``spec``) with the default data frame of its
    fabric: with ``fabric = "ib"`` and no ``packet_bytes`` given, :data:`PAYLOAD_BYTES`
    with InfiniBand's headers (1050 B, :data:`wire.linkstack.IB`) instead of RoCEv2's (the
    parameter's default, 1082 B)."""
    from wire.linkstack import IB

    out = dict(params)
    names = {q.name for q in spec}
    if ("packet_bytes" in names and "fabric" in names and "packet_bytes" not in out
            and out.get("fabric") == "ib"):
        out["packet_bytes"] = IB.frame_bytes(PAYLOAD_BYTES)
    return out


def _stack_default(builder: Callable[[Mapping[str, Any]], Scenario], spec: tuple[Param, ...]
                   ) -> Callable[[Mapping[str, Any]], Scenario]:
    """``builder`` given the default frame of its fabric's header stack first."""
    import functools

    @functools.wraps(builder)
    def build(params: Mapping[str, Any]) -> Scenario:
        return builder(stack_defaults(spec, params))
    return build


def registry() -> dict[str, ScenarioInfo]:
    """The registered scenarios by name (built-ins only after :func:`sim.scenarios.names`)."""
    return _REGISTRY

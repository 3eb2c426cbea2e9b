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

__all__ = ["MAX_DEPTH", "PAYLOAD_BYTES", "AutoBoolParam", "Param", "ParamText", "Scenario",
           "ScenarioError", "ScenarioInfo", "TracerSlot", "nesting_problem", "parse_text",
           "register", "registry", "resolve_params", "stack_defaults"]


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
        """``value`` converted to this parameter's type, or ScenarioError naming the key.
        A :class:`ParamText` (a ``-p`` value) is read first (``"1"`` -> 1); any other
        value keeps its type: a plain string (a TOML file's ``node = "1"``) is not a
        number."""
        t = self.type
        v = value
        if isinstance(v, ParamText):
            if t is str:
                return self._checked(str(v))
            try:
                v = parse_text(v)
            except ScenarioError as e:
                raise ScenarioError(f"parameter {self.name!r}: {e}") from None
        if t is bool:
            ok = isinstance(v, bool)
        elif t is int:
            ok = isinstance(v, int) and not isinstance(v, bool)
        elif t is float:
            ok = isinstance(v, int | float) and not isinstance(v, bool)
            if ok and isinstance(v, int):
                why = quantity_problem(self.name, v)  # before float(): 10**400 overflows it
                if why:
                    raise ScenarioError(f"parameter {self.name!r}: {why} (got {_cut(v)})")
            if ok:
                v = float(v)
        else:
            ok = isinstance(v, t)
        if not ok:
            got = f"the string {_cut(value)}" if isinstance(value, str) else _cut(value)
            hint = ""
            if isinstance(value, str) and not isinstance(value, ParamText):
                try:  # the same text unquoted would do
                    self.coerce(ParamText(value))
                    hint = " (write it without quotes)"
                except ScenarioError:
                    pass
            raise ScenarioError(f"parameter {self.name!r}: expected {t.__name__}, got {got}"
                                f"{hint}")
        if t is int or t is float:
            # the one finiteness/range rule: no inf/nan, and the value in the simulator's
            # integer unit (ps, bytes, b/s, named by the suffix) fits (sim.units)
            why = quantity_problem(self.name, v)
            if why:
                raise ScenarioError(f"parameter {self.name!r}: {why} (got {_cut(v)})")
        return self._checked(v)

    def _checked(self, v: Any) -> Any:
        """``v`` (of this parameter's type) after the parameter's own check."""
        if self.check is not None:
            why = self.check(v)
            if why:
                raise ScenarioError(f"parameter {self.name!r}: {why} (got {_cut(v)})")
        return v



@dataclass(frozen=True)
class AutoBoolParam(Param):
    """A boolean parameter whose default is ``"auto"`` (decided by the simulator: the
    parameter's doc says how): ``true``, ``false`` or ``"auto"`` (``-p KEY=auto`` too)."""

    @property
    def type(self) -> type:
        return bool

    def coerce(self, value: Any) -> Any:
        v = parse_text(value) if isinstance(value, ParamText) else value
        if isinstance(v, bool) or v == "auto":
            return self._checked(v)
        raise ScenarioError(f"parameter {self.name!r}: expected true, false or \"auto\", got "
                            f"{_cut(value)}")

#: Deepest nesting of arrays and tables in a scenario file or a ``-p`` value.  A file needs 3
#: levels (``[switch] vlarb_high``'s ``[VL, weight]`` pairs, ``[[collective]]`` ``hosts``);
#: tomllib recurses once per level and fails with a RecursionError near 500, and so would
#: the walks over the values after it (copies, checks, JSON).
MAX_DEPTH = 32


def nesting_problem(value: Any, limit: int = MAX_DEPTH, *, level: int = 0) -> str | None:
    """Where ``value`` (parsed TOML: dicts, lists, scalars; a document is level 0, its
    tables and its keys' arrays level 1, ``level`` for another value) nests arrays or tables
    more than ``limit`` levels deep, or None; walked without recursion.  The place is named
    by its keys (the first three): ``"key 'switch.lossless_tcs': arrays or tables nested
    more than 32 deep"``."""
    stack: list[tuple[Any, int, tuple[str, ...]]] = [(value, level, ())]
    while stack:
        v, depth, keys = stack.pop()
        if isinstance(v, dict):
            inner = [(x, (*keys, str(k))) for k, x in v.items()]
        elif isinstance(v, list):
            inner = [(x, keys) for x in v]
        else:
            continue
        if depth > limit:
            shown = ".".join(keys[:3]) + (".…" if len(keys) > 3 else "")
            where = f"key '{shown}': " if keys else ""
            return f"{where}arrays or tables nested more than {limit} deep"
        stack.extend((x, depth + 1, k) for x, k in inner)
    return None


class ParamText(str):
    """A ``-p KEY=VALUE`` value as typed on the command line: text that
    :meth:`Param.coerce` reads by the parameter's type (TOML-style, :func:`parse_text`).  A
    plain ``str`` (a scenario file's value, or one given from Python) is a string: where a
    number, a boolean or a list is expected it is refused."""

    __slots__ = ()


def parse_text(text: str) -> Any:
    """A command-line value: TOML-style (true, 3, 0.5, "x"); else the text itself.
    ScenarioError for a value that nests arrays or tables more than :data:`MAX_DEPTH` deep."""
    import tomllib

    low = text.strip()
    if low in ("True", "False"):
        return low == "True"
    try:
        v = tomllib.loads(f"v = {low}")["v"]
    except tomllib.TOMLDecodeError:
        return text
    except RecursionError:
        v = None
        why: str | None = f"arrays or tables nested more than {MAX_DEPTH} deep"
    else:
        why = nesting_problem(v, level=1)
    if why:
        raise ScenarioError(f"value {_cut(low)}: {why}")
    return v


def _cut(value: Any, most: int = 80) -> str:
    """``repr(value)``, its middle left out when longer than ``most`` characters."""
    text = repr(value)
    return text if len(text) <= most else f"{text[:most // 2]}…{text[-most // 2:]}"


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
    #: One line per mechanism configured to act after the run's end
    #: (:func:`sim.scenarios.timing.late_mechanisms`, set by ``run_scenario``): printed before
    #: the run and written to summary.json ``warnings``.
    warnings: list[str] = field(default_factory=list)


class TracerSlot:
    """A tracer that forwards to ``target`` (set by the runner after the scenario is built).

    The components built with the slot check its live ``interest``
    (:class:`sim.trace.Interest`), recomputed whenever ``target`` is set: while the slot is
    empty they build no event, and with a target only the event types it reads (a target's
    queue samples go straight to its ``on_enqueued`` / ``on_dequeued`` when it has them)."""

    __slots__ = ("_target", "emit", "interest")

    def __init__(self) -> None:
        self._target: Any = None
        self.interest = Interest(None)
        #: ``emit(event)``: the target's own ``emit`` (a direct call), or one that drops it.
        self.emit: Callable[[Any], None] = _discard

    @property
    def target(self) -> Any:
        return self._target

    @target.setter
    def target(self, tracer: Any) -> None:
        self._target = tracer
        self.emit = _discard if tracer is None else tracer.emit
        self.interest.update(tracer)

    @property
    def wants(self) -> Any:
        return self.interest.types


def _discard(event: Any) -> None:
    """A :class:`TracerSlot`'s ``emit`` while it has no target."""


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

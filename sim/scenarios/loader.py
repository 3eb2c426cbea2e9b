"""Scenario files (TOML).  Two forms (docs/reference/builtin-scenarios.md, "Parameters in a
file"; docs/reference/fabric-file.md):

* a **reference** to a built-in, with parameter overrides:

  .. code-block:: toml

      scenario = "incast"        # required: a registered scenario
      description = "optional free text"
      [params]
      senders = 16
      pfc = false

* a **fabric file** without a ``scenario`` key that describes the whole set-up (topology,
  links, switch buffer and thresholds, ECN, hosts, flows, pcap inputs, captures):
  :mod:`sim.scenarios.description`.

:func:`build` turns a built-in name or either kind of file, plus command-line overrides, into
a ready :class:`sim.scenarios.Scenario`.
"""

from __future__ import annotations

import os
import tomllib
from typing import Any

from sim.scenarios import get
from sim.scenarios.base import MAX_DEPTH, Scenario, ScenarioError, nesting_problem

__all__ = ["build", "is_file_ref", "load", "read_toml", "resolve", "scenario_name"]

_TOP_KEYS = {"scenario", "description", "params"}


def is_file_ref(name_or_path: str) -> bool:
    """True when ``name_or_path`` names a TOML file rather than a registered scenario."""
    return name_or_path.endswith(".toml") or os.sep in name_or_path or (
        "/" in name_or_path) or os.path.isfile(name_or_path)


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A TOML file as a dict; ScenarioError naming the file when it cannot be read or parsed,
    or when it nests arrays or tables more than :data:`sim.scenarios.base.MAX_DEPTH` deep."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ScenarioError(f"{path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: byte {e.start} is not UTF-8 "
                            f"({e.object[e.start:e.start + 1]!r})") from None
    except RecursionError:  # tomllib recurses per level of nesting
        raise ScenarioError(f"{path}: arrays or tables nested more than {MAX_DEPTH} deep "
                            f"(too deep to read)") from None
    why = nesting_problem(data)
    if why:
        raise ScenarioError(f"{path}: {why}")
    return data


def _reference(path: str | os.PathLike[str], data: dict[str, Any]
               ) -> tuple[str, dict[str, Any]]:
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ScenarioError(f"{path}: unknown key(s) {unknown}; known: {sorted(_TOP_KEYS)} "
                            f"(a fabric file has no 'scenario' key)")
    name = data.get("scenario")
    if not isinstance(name, str):
        raise ScenarioError(f"{path}: key 'scenario' (a built-in scenario name) is required")
    try:
        get(name)  # unknown names fail here, listing the known ones
    except ScenarioError as e:
        raise ScenarioError(f"{path}: key 'scenario': {e}") from None
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise ScenarioError(f"{path}: key 'params' must be a table")
    return name, params


def load(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """(scenario name, params) from a reference file; ScenarioError naming the bad key."""
    data = read_toml(path)
    if "scenario" not in data:
        raise ScenarioError(f"{path}: key 'scenario' (a built-in scenario name) is required")
    return _reference(path, data)


def resolve(name_or_path: str, params: dict[str, Any] | None = None
            ) -> tuple[str, dict[str, Any]]:
    """(scenario name, merged params) of a built-in or a reference file: file params first,
    then ``params`` over them.  A fabric file gives (its file stem, ``params``)."""
    if is_file_ref(name_or_path):
        data = read_toml(name_or_path)
        if "scenario" not in data:
            return scenario_name(name_or_path), dict(params or {})
        name, base = _reference(name_or_path, data)
    else:
        name, base = name_or_path, {}
        get(name)
    merged = dict(base)
    merged.update(params or {})
    return name, merged


def scenario_name(name_or_path: str) -> str:
    """The name results are filed under: the built-in's name or the file's stem."""
    if is_file_ref(name_or_path):
        data = read_toml(name_or_path)
        if "scenario" in data:
            return _reference(name_or_path, data)[0]
        return os.path.splitext(os.path.basename(name_or_path))[0]
    get(name_or_path)
    return name_or_path


def build(name_or_path: str, params: dict[str, Any] | None = None,
          seed: int | None = None, *, params_from: str = "-p", replayed: bool = False
          ) -> Scenario:
    """A ready scenario from a built-in name, a reference file or a fabric file.

    ``params`` override the file (for a fabric file: ``TABLE.KEY`` names, and ``seed`` /
    ``duration_ms`` for ``[run]``); ``seed`` overrides the seed.  A bad value in ``params``
    is a ScenarioError starting with ``params_from`` (the command line's ``-p``); one in the
    file names the file and its table.  ``replayed``: captures will be replayed into it
    (``--pcap``), so a fabric file without traffic of its own is accepted.
    """
    from sim.scenarios.common import add_faults, split_fault_params

    # -p fault=, fault.KEY, detect_us, converge_us: faults on any scenario
    faults, params = split_fault_params(params or {})
    if is_file_ref(name_or_path):
        data = read_toml(name_or_path)
        if "scenario" not in data:
            from sim.scenarios.description import apply_overrides
            from sim.scenarios.description import build as build_description

            if seed is not None:
                params["seed"] = seed
            apply_overrides(data, params, str(name_or_path), params_from)
            base = os.path.dirname(os.path.abspath(name_or_path))
            return build_description(data, str(name_or_path), base, fault_params=faults,
                                     replayed=replayed)
    seed_kw = {"seed": seed} if seed is not None else {}
    if is_file_ref(name_or_path):
        where: str | None = str(name_or_path)
        name, base = _reference(name_or_path, data)
    else:
        where, name, base = None, name_or_path, {}
    info = get(name)
    # Each value is checked where it came from, so a message names the file's [params] key
    # or the command line's -p; what only the builder can check is prefixed with the file.
    base_faults, base = split_fault_params(base)
    if where is not None:
        _check(info.params_doc, base, f"{where}: [params]")
    _check(info.params_doc, params, f"{params_from}:")
    merged = {**base, **params, **seed_kw}
    try:
        sc = info.builder(merged)
    except ScenarioError as e:
        if where is None:
            raise
        raise ScenarioError(f"{where}: {e}") from None
    if base_faults:
        add_faults(sc, base_faults, f"{where}: [params]")
    if faults:
        add_faults(sc, faults, params_from)
    if base_faults or faults:  # the fault-free twin (same parameters and seed)
        sc.info.setdefault("fault_free", lambda: info.builder(dict(merged)))
    return sc


def _check(spec, params: dict[str, Any], label: str) -> None:
    """``params`` (a subset) against the scenario's parameters; errors prefixed by ``label``."""
    from sim.scenarios.base import resolve_params

    try:
        resolve_params(spec, params)
    except ScenarioError as e:
        raise ScenarioError(f"{label} {e}") from None

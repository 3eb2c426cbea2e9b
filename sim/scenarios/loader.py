"""Scenario files (TOML): a built-in's name plus parameter overrides.

.. code-block:: toml

    scenario = "incast"        # required: a registered scenario
    description = "optional free text"
    [params]
    senders = 16
    pfc = false
"""

from __future__ import annotations

import os
import tomllib
from typing import Any

from . import ScenarioError, get

__all__ = ["is_file_ref", "load", "resolve"]

_TOP_KEYS = {"scenario", "description", "params"}


def is_file_ref(name_or_path: str) -> bool:
    """True when ``name_or_path`` names a TOML file rather than a registered scenario."""
    return name_or_path.endswith(".toml") or os.sep in name_or_path or (
        "/" in name_or_path) or os.path.isfile(name_or_path)


def load(path: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """(scenario name, params) from a TOML file; ScenarioError naming the bad key."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ScenarioError(f"{path}: {e.strerror or e}") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    unknown = sorted(set(data) - _TOP_KEYS)
    if unknown:
        raise ScenarioError(f"{path}: unknown key(s) {unknown}; known: {sorted(_TOP_KEYS)}")
    name = data.get("scenario")
    if not isinstance(name, str):
        raise ScenarioError(f"{path}: key 'scenario' (a built-in scenario name) is required")
    get(name)  # unknown names fail here, listing the known ones
    params = data.get("params", {})
    if not isinstance(params, dict):
        raise ScenarioError(f"{path}: key 'params' must be a table")
    return name, params


def resolve(name_or_path: str, params: dict[str, Any] | None = None
            ) -> tuple[str, dict[str, Any]]:
    """(scenario name, merged params): file params first, then ``params`` over them."""
    if is_file_ref(name_or_path):
        name, base = load(name_or_path)
    else:
        name, base = name_or_path, {}
        get(name)
    merged = dict(base)
    merged.update(params or {})
    return name, merged

"""The public API is typed (issue 15): a PEP 561 ``py.typed`` marker in ``wire/`` and ``sim/``
that the wheel ships, and annotations on every parameter and return of every public function
and method (``wire.__all__`` and the ``__all__`` of every module of ``wire`` and ``sim``)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import tomllib
import zipfile
from pathlib import Path

import pytest

import sim
import wire

REPO = Path(__file__).resolve().parent.parent


def _modules() -> list[str]:
    out = []
    for pkg in (wire, sim):
        for m in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if not m.name.endswith("__main__"):  # running it is the CLI
                out.append(m.name)
    return out


def _functions(owner: str, obj: object) -> list[tuple[str, object]]:
    """(qualified name, function) for a public function, or a public class's own methods
    (``__init__``/``__call__`` included, properties' getters)."""
    if inspect.isfunction(obj):
        return [(owner, obj)]
    if not inspect.isclass(obj):
        return []
    out = []
    for k, v in vars(obj).items():
        if k.startswith("_") and k not in ("__init__", "__call__"):
            continue
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if isinstance(v, property):
            v = v.fget
        if inspect.isfunction(v):
            out.append((f"{owner}.{k}", v))
    return out


def _public() -> list[tuple[str, object]]:
    seen: dict[object, str] = {}
    items = [(f"wire.{n}", getattr(wire, n)) for n in wire.__all__]
    for name in _modules():
        mod = importlib.import_module(name)
        items += [(f"{name}.{n}", getattr(mod, n)) for n in getattr(mod, "__all__", ())]
    for qual, obj in items:
        for fq, f in _functions(qual, obj):
            if f.__module__.split(".")[0] in ("wire", "sim") and f not in seen:
                seen[f] = fq
    return sorted(((q, f) for f, q in seen.items()), key=lambda x: x[0])


PUBLIC = _public()


def test_the_walk_sees_the_api() -> None:
    names = {q for q, _ in PUBLIC}
    assert {"wire.read_all", "wire.read_columns", "wire.dissect", "wire.build",
            "wire.Decoded.get", "sim.study.results.run_scenario"} <= names
    assert len(PUBLIC) > 300


@pytest.mark.parametrize(("name", "func"), PUBLIC, ids=[q for q, _ in PUBLIC])
def test_public_function_is_annotated(name: str, func) -> None:
    sig = inspect.signature(func)
    params = list(sig.parameters.values())
    missing = [p.name for i, p in enumerate(params)
               if p.annotation is inspect.Parameter.empty
               and not (i == 0 and p.name in ("self", "cls"))]
    if sig.return_annotation is inspect.Signature.empty:
        missing.append("return")
    assert not missing, f"{name}: no annotation for {missing}"


@pytest.mark.parametrize("pkg", ["wire", "sim"])
def test_py_typed_marker(pkg: str) -> None:
    assert (REPO / pkg / "py.typed").is_file()


def test_wheel_ships_py_typed(tmp_path: Path) -> None:
    """The wheel's file selection keeps the markers: every file of the packages is shipped
    unless excluded, and nothing excludes them (built with hatchling when it is installed)."""
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    wheel = cfg["tool"]["hatch"]["build"]["targets"]["wheel"]
    assert {"wire", "sim"} <= set(wheel["packages"])
    assert not any("typed" in x for x in wheel.get("exclude", []))
    builder = pytest.importorskip("hatchling.builders.wheel")
    path = next(iter(builder.WheelBuilder(str(REPO)).build(directory=str(tmp_path))))
    names = zipfile.ZipFile(path).namelist()
    assert "wire/py.typed" in names and "sim/py.typed" in names

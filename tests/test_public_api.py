"""The public API is typed: a PEP 561 ``py.typed`` marker in ``wire/`` and ``sim/`` that the
wheel ships (built by setuptools), and annotations on every parameter
and return of every public function and method (``wire.__all__`` and the ``__all__`` of every
module of ``wire`` and ``sim``)."""

from __future__ import annotations

import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import tarfile
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


def _is_function(obj: object) -> bool:
    """A Python function, or a function of the compiled core (Cython's own type: same
    signature and annotations, docs/explanation/design.md "The compiled core: one source")."""
    return inspect.isfunction(obj) or type(obj).__name__ == "cython_function_or_method"


def _functions(owner: str, obj: object) -> list[tuple[str, object]]:
    """(qualified name, function) for a public function, or a public class's own methods
    (``__init__``/``__call__`` included, properties' getters)."""
    if _is_function(obj):
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
        if _is_function(v):
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


def _build(what: str, src: Path, out: Path) -> Path:
    """Build the sdist or the wheel of ``src`` into ``out`` with setuptools' PEP 517 backend
    in a subprocess, without compiling (``LOSSLESS_BUILD_PURE=1``: the file selection is the
    same, the compiled modules are tested in tests/test_compiled_core.py)."""
    code = (f"from setuptools import build_meta as b; import sys; "
            f"print(b.build_{what}(sys.argv[1]))")
    env = dict(os.environ, LOSSLESS_BUILD_PURE="1")
    r = subprocess.run([sys.executable, "-c", code, str(out)], cwd=src, env=env,
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return out / r.stdout.strip().splitlines()[-1]


def _setuptools_builds_this() -> None:
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:  # pyproject.toml's build-system
        pytest.skip(f"setuptools {setuptools.__version__} < 77 cannot read pyproject.toml")


def test_sdist_and_wheel_contents(tmp_path: Path) -> None:
    """The sdist has the sources, the .pxd files, setup.py, tests and the benchmarks they
    import, docs and the reference captures but no build product; the wheel built from it
    ships both packages with their py.typed markers, the .pxd files and the Wireshark
    dissector."""
    _setuptools_builds_this()
    sdist = _build("sdist", REPO, tmp_path)
    with tarfile.open(sdist) as tf:
        names = [n.split("/", 1)[1] for n in tf.getnames() if "/" in n]
        tf.extractall(tmp_path / "src", filter="data")
    for want in ("setup.py", "pyproject.toml", "MANIFEST.in", "README.md", "sim/engine.py",
                 "sim/engine.pxd", "sim/py.typed", "wire/py.typed", "tests/test_public_api.py",
                 "docs/explanation/performance.md", "wire/wireshark/lossless_scaleup.lua",
                 "bench/golden.py"):  # the tests run bench.golden, bench.scale_bench, ...
        assert want in names, want
    assert any(n.startswith("pcaps/") for n in names)
    assert not [n for n in names if n.endswith((".so", ".c", ".pyc"))]
    root = next((tmp_path / "src").iterdir())
    wheel = _build("wheel", root, tmp_path / "wheel")
    names = zipfile.ZipFile(wheel).namelist()
    for want in ("wire/py.typed", "sim/py.typed", "sim/engine.py", "sim/engine.pxd",
                 "sim/_core.py", "wire/wireshark/lossless_scaleup.lua"):
        assert want in names, want
    assert not [n for n in names if n.startswith(("tests/", "bench/", "docs/"))]

"""The layout of ``sim/`` (docs/explanation/design.md "The simulator's packages"): every module's
imports (read with ``ast``, function-level imports included) point down the package ranks,
no module imports a private name of another package, the module graph has no cycle, every
package's ``__init__`` says what lives there and what it may import, and the old module names
of the flat layout still import (for one release) as the very modules that moved."""

from __future__ import annotations

import ast
import importlib
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SIM = ROOT / "sim"

#: Package ranks: a module may import its own package and packages of a LOWER rank only.
#: ``kernel`` is the top-level modules of sim/ (engine, units, packet, events, trace,
#: addresses) and ``sim/__init__``; ``sim/__main__`` belongs to the CLI.
RANKS = {
    "kernel": 0,
    "flowctl": 1, "cc": 1,
    "net": 2,
    "nic": 3, "health": 3,
    "fabric": 4,
    "scaleup": 5, "workloads": 5,
    "scenarios": 6,
    "study": 7,
    "cli": 8,
}
KERNEL = {"engine", "units", "packet", "events", "trace", "addresses", "_core"}


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(mod: str) -> str:
    """The layout package of a module name (``sim.net.port`` -> ``net``)."""
    parts = mod.split(".")
    if len(parts) == 1:
        return "kernel"
    head = parts[1]
    if head == "__main__":
        return "cli"
    if head in KERNEL:
        return "kernel"
    return head


def imports_of(path: Path, mod: str | None = None) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import of ``sim`` modules
    (``mod``: the module's name, default from its path in the repository)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    mod = module_name(path) if mod is None else mod
    is_pkg = path.name == "__init__.py"
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], node.lineno) for a in node.names
                    if a.name == "sim" or a.name.startswith("sim.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if is_pkg else mod.split(".")[:-1]
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target != "sim" and not target.startswith("sim."):
                continue
            names = [a.name for a in node.names]
            if target == "sim" or _is_package(target):
                # ``from sim.x import y`` where y may be a submodule
                subs = [n for n in names if _module_exists(f"{target}.{n}")]
                out += [(f"{target}.{n}", [], node.lineno) for n in subs]
                names = [n for n in names if n not in subs]
            if names:
                out.append((target, names, node.lineno))
    return out


def _module_exists(mod: str) -> bool:
    p = ROOT.joinpath(*mod.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def _is_package(mod: str) -> bool:
    return (ROOT.joinpath(*mod.split(".")) / "__init__.py").is_file()


MODULES = sorted(SIM.rglob("*.py"))


def _graph() -> dict[str, set[str]]:
    g: dict[str, set[str]] = {}
    for path in MODULES:
        g[module_name(path)] = {t for t, _, _ in imports_of(path) if t != "sim"}
    return g


def test_every_package_is_ranked():
    pkgs = {package_of(module_name(p)) for p in MODULES}
    assert pkgs <= set(RANKS), sorted(pkgs - set(RANKS))


def test_imports_point_down():
    bad = []
    for path in MODULES:
        mod = module_name(path)
        src = package_of(mod)
        for target, _, line in imports_of(path):
            dst = package_of(target)
            if dst != src and RANKS[dst] >= RANKS[src]:
                bad.append(f"{path.relative_to(ROOT)}:{line}: {src} imports {target} ({dst})")
    assert not bad, "\n".join(bad)


def test_no_private_name_across_packages():
    bad = []
    for path in MODULES:
        mod = module_name(path)
        for target, names, line in imports_of(path):
            if package_of(target) == package_of(mod):
                continue
            private = [n for n in names if n.startswith("_")]
            if private or any(p.startswith("_") for p in target.split(".")[1:]
                              if p not in ("__init__", "__main__")):
                bad.append(f"{path.relative_to(ROOT)}:{line}: {target} {private}")
    assert not bad, "\n".join(bad)


def test_no_import_cycle():
    g = _graph()
    # A submodule's import runs its package's __init__ first, but that is not an arrow of
    # ours; the edges are the import statements themselves.
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for n in sorted(g.get(m, ())):
            if n not in g:
                continue
            if state.get(n) == 1:
                cycles.append([*stack[stack.index(n):], n])
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = 2

    for m in sorted(g):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(" -> ".join(c) for c in cycles)


def test_graph_reader_sees_lazy_and_relative_imports(tmp_path):
    """The reader is not blind: function-level imports and relative imports are arrows."""
    src = "def f():\n    from sim.study.results import run_scenario\n"
    p = tmp_path / "probe.py"
    p.write_text(src + "from ..cli import main\nfrom . import port\n", encoding="utf-8")
    got = {t for t, _, _ in imports_of(p, "sim.net.probe")}
    assert {"sim.study.results", "sim.cli", "sim.net.port"} <= got


@pytest.mark.parametrize("pkg", sorted(p.parent.name for p in SIM.glob("*/__init__.py")))
def test_package_init_says_what_and_may_import(pkg):
    doc = ast.get_docstring(ast.parse((SIM / pkg / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"sim/{pkg}/__init__.py has no docstring"
    assert "May import" in doc or "may import" in doc, f"sim/{pkg}: what may it import?"


def test_sue_is_split():
    assert not (SIM / "sue.py").exists()
    assert {"framing", "xpu", "switch", "summary", "packing"} <= {
        p.stem for p in (SIM / "scaleup").glob("*.py")}


def test_old_module_names_alias_the_moved_modules():
    import sim

    for old, new in sim.MOVED.items():
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            sys.modules.pop(old, None)
            m = importlib.import_module(old)
        assert m is importlib.import_module(new), old
        assert any(issubclass(x.category, DeprecationWarning) and new in str(x.message)
                   for x in w), old
    from sim.sue import CreditPort, EsunSwitch, Xpu, sue_summary  # noqa: F401
    from sim.topology import leaf_spine  # noqa: F401

    from sim.fabric import Fabric, star  # noqa: F401  (the package keeps the old names)


def test_sim_scenarios_run_still_works_for_one_release(tmp_path) -> None:
    import warnings

    from sim import scenarios
    from sim.study.results import run_scenario

    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert scenarios.run is run_scenario
    assert any(issubclass(x.category, DeprecationWarning) for x in w)

"""Which simulator core runs: the compiled one (Cython) or the interpreted ``.py`` files.

The hot path (:data:`COMPILED`) has one source of truth, the ``.py`` files.  When a C compiler
is there at install time, ``setup.py`` compiles each of them with Cython in pure-Python mode,
typed by the ``.pxd`` file next to it (docs/explanation/design.md, "The compiled core: one
source"; how to build and check it: docs/explanation/performance.md, "Run the compiled core");
the compiled module (``engine.cpython-311-x86_64-linux-gnu.so``) then sits beside its ``.py``
and Python's import system prefers it.  Without a compiler the build prints one line and the
``.py`` files run as they are.

At run time :func:`install` (called by ``sim/__init__.py`` before any of these modules is
imported) puts a finder in front of ``sys.meta_path`` that loads a listed module from its
``.py`` instead of its compiled form when

* ``LOSSLESS_PURE_PYTHON=1`` is set (forced: e.g. to compare the two cores, or to debug), or
* in a source checkout, a compiled file is older than its ``.py`` or ``.pxd`` (edited, not
  rebuilt yet: running the stale build would silently run old code), or
* a listed module has no compiled file while others have (a build that compiled only some).

It is all or none (:func:`pure_reason`): the compiled modules share their declared types.

:func:`core` says which core runs ("compiled (Cython 3.1.8)" or "interpreted ..."), and
``lossless --version`` prints it.

This module imports nothing but the standard library: ``setup.py`` reads :data:`COMPILED`
from it without importing ``sim``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

__all__ = ["COMPILED", "PURE_ENV", "compiled_modules", "core", "install", "pure_reason"]

#: The modules of the compiled core, each a ``.py`` with a ``.pxd`` beside it (setup.py).
COMPILED: tuple[str, ...] = (
    "sim.engine",
    "sim.packet",
    "sim.net.port",
    "sim.net.mmu",
    "sim.net.switch",
    "sim.nic.rc",
    "sim.nic.host",
    "sim.cc.base",
    "sim.cc.dcqcn",
    "sim.flowctl.pfc",
    "sim.flowctl.ib",
    "sim.trace",
    "sim.study.samples",
    "sim.workloads.ring_kernel",
    "sim.workloads.maxmin",
    "sim.workloads.chunk_kernel",
)

#: Set to ``1`` to run the interpreted core even when the compiled one is installed.
PURE_ENV = "LOSSLESS_PURE_PYTHON"

_CORE_NAMES = frozenset(COMPILED)

_SIM_DIR = os.path.dirname(os.path.abspath(__file__))

#: Staleness is looked for only in a source checkout (setup.py beside the package: an
#: editable install or an in-place build), where a .py can be edited after the build; an
#: installed wheel's file times are the installer's, not the build's.
_IN_CHECKOUT = os.path.isfile(os.path.join(os.path.dirname(_SIM_DIR), "setup.py"))

def _forced() -> bool:
    return os.environ.get(PURE_ENV, "").strip() not in ("", "0")


def _source_paths(name: str) -> tuple[str, str]:
    """(``.py``, ``.pxd``) of a listed module, from this package's folder."""
    base = os.path.join(_SIM_DIR, *name.split(".")[1:])
    return base + ".py", base + ".pxd"


def _compiled_path(name: str) -> str | None:
    """The compiled file of ``name`` next to its ``.py``, or None."""
    base = os.path.join(_SIM_DIR, *name.split(".")[1:])
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if os.path.isfile(base + suffix):
            return base + suffix
    return None


def _stale(name: str, so: str) -> bool:
    so_mtime = os.stat(so).st_mtime
    return any(os.path.isfile(src) and os.stat(src).st_mtime > so_mtime
               for src in _source_paths(name))


def pure_reason() -> str | None:
    """Why the listed modules load from their ``.py`` although a compiled build exists, or
    None (compiled, or nothing compiled at all).  All or none: the compiled modules declare
    each other's types (``port.pxd`` cimports ``Engine``), so a compiled port next to an
    interpreted engine would not import.  Worked out once per process."""
    if _reason:
        return _reason[0]
    built = {name: _compiled_path(name) for name in _CORE_NAMES}
    why: str | None = None
    if any(built.values()):
        missing = [n for n, so in built.items() if so is None]
        stale = [n for n, so in built.items()
                 if so is not None and _IN_CHECKOUT and _stale(n, so)]
        if _forced():
            why = f"{PURE_ENV}=1"
        elif missing:
            why = f"incomplete build: {', '.join(missing)} not compiled"
        elif stale:
            why = (f"stale build: {', '.join(stale)} edited since compiled; rerun "
                   f"pip install -e .")
    _reason.append(why)
    return why


#: pure_reason()'s answer, once worked out (a list so that tests can clear it).
_reason: list[str | None] = []


class _PureFinder(importlib.abc.MetaPathFinder):
    """Loads the modules of :data:`COMPILED` from their ``.py`` when :func:`pure_reason` says
    so (module docstring); otherwise leaves them to the normal finders."""

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname not in _CORE_NAMES or pure_reason() is None:
            return None
        return importlib.util.spec_from_file_location(fullname, _source_paths(fullname)[0])


def install() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _PureFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _PureFinder())


def _is_compiled(module: object) -> bool:
    path = getattr(module, "__file__", None) or ""
    return path.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


def compiled_modules() -> dict[str, bool]:
    """Each module of :data:`COMPILED` (imported if needed) -> True when it runs compiled."""
    out = {}
    for name in COMPILED:
        out[name] = _is_compiled(importlib.import_module(name))
    return out


def _cython_version() -> str | None:
    """The Cython version the loaded modules were built with: Cython 3 modules share their
    function and generator types through one module named ``_cython_X_Y_Z`` in
    ``sys.modules``."""
    for name in sys.modules:
        if name.startswith("_cython_") and name[8:9].isdigit():
            parts = name[8:].split("_")
            return ".".join(parts[:3])
    return None


def core() -> str:
    """``"compiled (Cython X.Y.Z)"`` when every module of :data:`COMPILED` runs compiled,
    ``"interpreted"`` (with the reason when a compiled build exists but is not used) when none
    does, else ``"mixed: ..."`` naming the interpreted ones."""
    status = compiled_modules()
    if all(status.values()):
        version = _cython_version()
        return f"compiled (Cython {version})" if version else "compiled (Cython)"
    pure = [name for name, ok in status.items() if not ok]
    why = pure_reason()
    why = f" ({why})" if why else ""
    if len(pure) == len(status):
        return f"interpreted{why}"
    return f"mixed: interpreted {', '.join(pure)}{why}"

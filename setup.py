"""Build of lossless: the metadata is in pyproject.toml; this file adds the compiled simulator
core (docs/explanation/performance.md, "Run the compiled core").

The modules listed in ``sim/_core.py`` (``COMPILED``) are compiled by Cython in pure-Python mode:
the ``.py`` is the source, typed by the ``.pxd`` beside it.  If Cython or a working C compiler
is missing, or one module fails to compile or link, the build goes on without it and prints one
line saying so: the ``.py`` files then run as they are (``lossless --version`` says which core
runs).  ``LOSSLESS_BUILD_PURE=1`` skips compiling altogether.
"""

from __future__ import annotations

import ast
import os
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:  # setuptools >= 59 re-exports distutils' errors
    from setuptools.errors import CCompilerError, ExecError, PlatformError
except ImportError:  # pragma: no cover - older setuptools
    from distutils.errors import CCompilerError
    from distutils.errors import DistutilsExecError as ExecError
    from distutils.errors import DistutilsPlatformError as PlatformError

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_PURE_ENV = "LOSSLESS_BUILD_PURE"

#: Cython directives of every compiled module.  ``annotation_typing=False``: the ``.py`` files'
#: annotations stay documentation (a ``float`` annotation must not become a C double); only
#: the ``.pxd`` files type.  ``cdivision=False`` (the default, kept explicit): ``//`` and ``%``
#: keep Python's semantics.  ``binding=True``: functions keep their signatures for inspect.
DIRECTIVES = {
    "language_level": "3",
    "annotation_typing": False,
    "cdivision": False,
    "binding": True,
    "embedsignature": False,
}


def compiled_names() -> tuple[str, ...]:
    """``COMPILED`` of sim/_core.py, read without importing ``sim`` (its __init__ imports the
    package's dependencies, which need not be installed while building)."""
    with open(os.path.join(HERE, "sim", "_core.py"), encoding="utf-8") as f:
        src = f.read()
    head = "COMPILED: tuple[str, ...] = "
    start = src.index(head) + len(head)
    return ast.literal_eval(src[start:src.index(")", start) + 1])


def say(msg: str) -> None:
    """The one line the build prints about the core."""
    print(f"lossless: {msg}", file=sys.stderr, flush=True)


def extensions() -> list[Extension]:
    if os.environ.get(BUILD_PURE_ENV, "").strip() not in ("", "0"):
        say(f"{BUILD_PURE_ENV}=1: not compiling the simulator core; it runs as pure Python")
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        say("Cython is not installed: not compiling the simulator core; it runs as pure "
            "Python (slower, same results)")
        return []
    exts = [Extension(name, [name.replace(".", "/") + ".py"]) for name in compiled_names()]
    try:
        return cythonize(exts, compiler_directives=DIRECTIVES, build_dir="build/cython",
                         quiet=True)
    except Exception as e:  # Cython's own errors (CompileError) derive from Exception
        # The core is used whole or not at all (sim/_core.py), so nothing is compiled.
        say(f"Cython could not translate the simulator core ({_why(e)}); it runs as pure "
            f"Python (slower, same results)")
        return []


class OptionalBuildExt(build_ext):
    """``build_ext`` that builds what it can: an extension that fails to compile or link (no
    compiler, a broken one) is left out, and one line at the end names what was left out."""

    def run(self) -> None:
        self._failed: list[tuple[str, str]] = []
        try:
            super().run()
        except (CCompilerError, ExecError, PlatformError, OSError) as e:
            # e.g. no compiler at all: raised before any extension is tried
            self._failed = [(ext.name, _why(e)) for ext in self.extensions]
        if self._failed:
            names = ", ".join(n for n, _ in self._failed)
            say(f"could not compile the simulator core ({names}: {self._failed[0][1]}); "
                f"it runs as pure Python (slower, same results)")

    def build_extension(self, ext: Extension) -> None:
        try:
            super().build_extension(ext)
        except (CCompilerError, ExecError, PlatformError, OSError) as e:
            self._failed.append((ext.name, _why(e)))

    def copy_extensions_to_source(self) -> None:
        """In-place and editable builds copy each built module next to its ``.py``; a module
        that failed has nothing to copy."""
        failed = {n for n, _ in getattr(self, "_failed", [])}
        keep = self.extensions
        self.extensions = [e for e in keep if e.name not in failed]
        try:
            super().copy_extensions_to_source()
        finally:
            self.extensions = keep

    def get_outputs(self) -> list[str]:
        failed = {n for n, _ in getattr(self, "_failed", [])}
        keep = self.extensions
        self.extensions = [e for e in keep if e.name not in failed]
        try:
            return super().get_outputs()
        finally:
            self.extensions = keep


def _why(e: BaseException) -> str:
    text = " ".join(str(e).split())
    return text if len(text) <= 120 else text[:117] + "..."


if __name__ == "__main__":  # setuptools.build_meta runs this file as __main__ too
    setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})

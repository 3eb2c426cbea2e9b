"""The compiled simulator core: one source (the ``.py`` files of ``sim._core.COMPILED``,
typed by their ``.pxd``), compiled by Cython when a compiler works, interpreted otherwise.

* ``LOSSLESS_PURE_PYTHON=1`` forces the interpreted modules; ``lossless --version`` says which
  core runs (always tested, in a subprocess).
* Compiled and interpreted runs give byte-identical outputs on every golden case (bench/golden.py;
  only when the compiled core is installed).
* The build falls back with one line when the C compiler does not work (setup.py's build_ext on a
  tiny extension, ``CC=/bin/false``).
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim import _core

REPO = Path(__file__).resolve().parent.parent


def _env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop(_core.PURE_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env.update(extra)
    return env


def _run(args: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=_env(**extra), cwd=REPO,
                          timeout=300, check=False)


COMPILED_BUILD = all(_core.compiled_modules().values())
needs_build = pytest.mark.skipif(not COMPILED_BUILD, reason="no compiled core built here "
                                 "(pip install -e . with a C compiler builds it)")


def test_every_listed_module_has_its_pxd() -> None:
    for name in _core.COMPILED:
        py, pxd = _core._source_paths(name)
        assert os.path.isfile(py) and os.path.isfile(pxd), name


def _pxd_classes(pxd: str) -> dict[str, tuple[set[str], bool]]:
    """cdef class name -> (declared attribute names, has a __dict__) of a .pxd file."""
    out: dict[str, tuple[set[str], bool]] = {}
    cls = None
    for line in Path(pxd).read_text().splitlines():
        m = re.match(r"cdef class (\w+)", line)
        if m:
            cls = m.group(1)
            out[cls] = (set(), False)
            continue
        m = re.match(r"    cdef (?:public |readonly )?[\w ]*?(\w+)\s*$", line)
        if cls and m:
            names, has_dict = out[cls]
            out[cls] = (names | {m.group(1)}, has_dict or m.group(1) == "__dict__")
    return out


def test_pxd_declares_every_slot() -> None:
    """Each cdef class of a .pxd is a class of its .py, and a class without a __dict__
    declares every name of its __slots__ (a slot added to the .py alone would fail only once
    compiled; this catches it in an interpreted checkout too)."""
    for name in _core.COMPILED:
        py, pxd = _core._source_paths(name)
        tree = ast.parse(Path(py).read_text())
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        for cls, (declared, has_dict) in _pxd_classes(pxd).items():
            assert cls in classes, f"{pxd}: cdef class {cls} is not in {py}"
            if has_dict:
                continue
            slots: set[str] = set()
            for node in classes[cls].body:
                if (isinstance(node, ast.Assign)
                        and any(getattr(t, "id", "") == "__slots__" for t in node.targets)):
                    slots |= set(ast.literal_eval(node.value))
            assert slots <= declared, f"{pxd}: {cls} does not declare {sorted(slots - declared)}"


def test_forced_fallback_runs_interpreted(tmp_path: Path) -> None:
    """LOSSLESS_PURE_PYTHON=1: --version says interpreted, every listed module comes from its
    .py, and a short scenario runs."""
    r = _run([sys.executable, "-m", "sim", "--version"], LOSSLESS_PURE_PYTHON="1")
    assert r.returncode == 0, r.stderr
    assert "core: interpreted" in r.stdout, r.stdout
    code = ("import sim._core as c, importlib; "
            "print([importlib.import_module(n).__file__.endswith('.py') for n in c.COMPILED])")
    r = _run([sys.executable, "-c", code], LOSSLESS_PURE_PYTHON="1")
    assert r.returncode == 0, r.stderr
    assert "False" not in r.stdout and "True" in r.stdout
    out = tmp_path / "incast"
    r = _run([sys.executable, "-m", "sim", "replay", "incast", "-p", "duration_ms=0.05",
              "--no-plots", "--out", str(out)], LOSSLESS_PURE_PYTHON="1")
    assert r.returncode == 0, r.stderr
    assert (out / "summary.json").is_file()


@needs_build
def test_version_says_compiled() -> None:
    r = _run([sys.executable, "-m", "sim", "--version"])
    assert r.returncode == 0, r.stderr
    assert "core: compiled (Cython 3." in r.stdout, r.stdout
    assert _core.core().startswith("compiled (Cython 3.")


def _fake_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, names: tuple[str, ...],
                 mtime: float) -> None:
    """Pretend ``names`` have a compiled file (dated ``mtime``) and the others none."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    files = {}
    for name in names:
        f = tmp_path / (name + suffix)
        f.write_bytes(b"")
        os.utime(f, (mtime, mtime))
        files[name] = str(f)
    monkeypatch.setattr(_core, "_compiled_path", files.get)
    monkeypatch.setattr(_core, "_reason", [])
    monkeypatch.delenv(_core.PURE_ENV, raising=False)


def test_stale_build_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Compiled files older than their .py (an edited checkout not rebuilt) are not loaded:
    the finder hands out the .py, and the reason says why."""
    _fake_builds(tmp_path, monkeypatch, _core.COMPILED, 1)  # 1970: older than any source
    spec = _core._PureFinder().find_spec(_core.COMPILED[-1], None)
    assert spec is not None and spec.origin == _core._source_paths(_core.COMPILED[-1])[0]
    assert "stale build" in _core.pure_reason()
    # an installed wheel (no setup.py beside the package): its file times are the installer's
    monkeypatch.setattr(_core, "_IN_CHECKOUT", False)
    monkeypatch.setattr(_core, "_reason", [])
    assert _core.pure_reason() is None


def test_partial_build_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """All or none: if only some modules were compiled (the others failed), every listed
    module loads from its .py (a compiled port cannot run on an interpreted Engine)."""
    if len(_core.COMPILED) < 2:
        pytest.skip("one compiled module")
    _fake_builds(tmp_path, monkeypatch, _core.COMPILED[:1], 4e9)  # fresh, but not all
    for name in _core.COMPILED:
        spec = _core._PureFinder().find_spec(name, None)
        assert spec is not None and spec.origin == _core._source_paths(name)[0]
    assert "incomplete build" in _core.pure_reason()
    _fake_builds(tmp_path, monkeypatch, _core.COMPILED, 4e9)  # complete and fresh: left alone
    assert _core._PureFinder().find_spec(_core.COMPILED[0], None) is None
    assert _core.pure_reason() is None


@needs_build
def test_compiled_and_interpreted_outputs_are_identical(tmp_path: Path) -> None:
    """Every golden case (bench/golden.py) recorded once compiled and once interpreted, in
    subprocesses, then compared byte for byte."""
    a, b = tmp_path / "compiled", tmp_path / "interpreted"
    ra = _run([sys.executable, "-m", "bench.golden", "record", str(a)])
    assert ra.returncode == 0, ra.stderr[-2000:]
    rb = _run([sys.executable, "-m", "bench.golden", "record", str(b)], LOSSLESS_PURE_PYTHON="1")
    assert rb.returncode == 0, rb.stderr[-2000:]
    from bench.golden import compare_dirs

    diffs = compare_dirs(str(a), str(b))
    assert not diffs, diffs


_TINY_C = """
#include <Python.h>
static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "tiny", NULL, -1, NULL};
PyMODINIT_FUNC PyInit_tiny(void) { return PyModule_Create(&m); }
"""

_TINY_SETUP = """
import runpy
from setuptools import Extension, setup
ns = runpy.run_path({setup_py!r}, run_name="lossless_setup")  # its classes, not its setup()
setup(name="tiny", version="0", py_modules=[], ext_modules=[Extension("tiny", ["tiny.c"])],
      cmdclass={{"build_ext": ns["OptionalBuildExt"]}})
"""


def test_build_falls_back_with_one_line_when_the_compiler_fails(tmp_path: Path) -> None:
    """setup.py's build_ext with a C compiler that fails (CC=/bin/false): the build succeeds,
    nothing is compiled, and it prints exactly one line saying the core runs as pure Python.
    The same build with the real compiler makes the module (when gcc is there)."""
    (tmp_path / "tiny.c").write_text(_TINY_C)
    (tmp_path / "setup.py").write_text(_TINY_SETUP.format(setup_py=str(REPO / "setup.py")))
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=_env(CC="/bin/false", LDSHARED="/bin/false"), check=False)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.startswith("lossless:")]
    assert len(lines) == 1, r.stdout + r.stderr
    assert "could not compile the simulator core (tiny:" in lines[0]
    assert "pure Python" in lines[0]
    assert not list(tmp_path.glob("tiny*.so"))
    if shutil.which("gcc") is None:
        return
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
                       cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env=_env(CC="gcc"), check=False)
    assert r.returncode == 0, r.stderr
    assert "lossless:" not in r.stdout + r.stderr
    assert list(tmp_path.glob("tiny*.so"))


# ------------------------------------------------ step 2: SimPacket compiled, Engine._push
def test_simpacket_is_part_of_the_compiled_core() -> None:
    """sim.packet is compiled with the rest (packet.pxd: SimPacket a cdef class whose fields
    Port and Switch read from the struct); compiled, the class is an extension type."""
    from sim.packet import SimPacket

    assert "sim.packet" in _core.COMPILED
    if COMPILED_BUILD:
        assert _core.compiled_modules()["sim.packet"]
        assert not SimPacket.__flags__ & (1 << 9)  # Py_TPFLAGS_HEAPTYPE: not a Python class
        assert not hasattr(SimPacket(1, 0, 64), "__dict__")


def _roundtrip(obj):  # type: ignore[no-untyped-def]
    import copy
    import pickle

    return [pickle.loads(pickle.dumps(obj, protocol=p)) for p in (2, pickle.HIGHEST_PROTOCOL)] + [
        copy.copy(obj), copy.deepcopy(obj)]


def test_packets_pickle_and_copy_with_every_slot() -> None:
    """A packet and a subclass's packet (SuePacket: slots of its own) pickle and copy whole,
    compiled (the compiled class's own pickling would lose ``pdu``) or not."""
    from sim.packet import SimPacket
    from sim.scaleup.framing import SuePacket

    pkt = SimPacket(7, 10, 1082, flow=3, tc=5, ecn=1, src=2, dst=9, frame=b"\x00" * 64, hops=1)
    pkt.fc, pkt.psn = ("port", 1), 42
    for back in _roundtrip(pkt):
        assert type(back) is SimPacket and repr(back) == repr(pkt)
        assert (back.fc, back.psn, back.frame) == (pkt.fc, pkt.psn, pkt.frame)
    sue = SuePacket(1, 2, 300, tc=1, pdu=("txn", 5), psn=11)
    for back in _roundtrip(sue):
        assert type(back) is SuePacket and repr(back) == repr(sue)
        assert (back.pdu, back.psn, back.fc) == (("txn", 5), 11, None)


_delays = st.one_of(st.integers(-3, 10**15), st.just(2**70), st.sampled_from([1.0, 2.5, True]))


@given(st.lists(_delays, min_size=1, max_size=20))
def test_push_schedules_exactly_like_call_in(delays: list) -> None:  # type: ignore[type-arg]
    """Engine._push (Port's per-frame events; a C call in the compiled core) makes the same
    heap entries as call_in, and for a delay call_in converts or refuses, the same."""
    from sim.engine import Engine

    def noop(*_args: object) -> None:
        pass

    a, b = Engine(), Engine()
    for i, d in enumerate(delays):
        outcome = []
        for fn, args in ((a.call_in, (d, noop, i, "x")), (b._push, (d, noop, (i, "x")))):
            try:
                fn(*args)
                outcome.append(None)
            except (TypeError, ValueError) as e:
                outcome.append((type(e), str(e)))
        assert outcome[0] == outcome[1]
    def entries(eng: Engine) -> list:  # type: ignore[type-arg]
        return [(e.at_ps, e.priority, e.seq, e.callback, e.args) for e in eng._heap]

    assert entries(a) == entries(b) and a._seq == b._seq
    assert a.run() == b.run() and a.now_ps == b.now_ps


def test_public_methods_keep_the_return_annotation_of_their_source() -> None:
    """A public method of a class of the compiled core carries the return annotation written
    in its .py, compiled or interpreted.  A cpdef method loses it when compiled, and the module
    puts it back by name (``vars(Mmu)[...]`` at the end of sim/net/mmu.py, port.py,
    switch.py): this catches a return type changed in the ``def`` but not in that list, or a
    method made cpdef without it.  Every public cpdef method of the .pxd files must be among
    those checked (so the test cannot pass by checking nothing that matters)."""
    import importlib

    checked: set[str] = set()
    cpdefs: set[str] = set()  # the public cpdef methods the .pxd files declare
    for name in _core.COMPILED:
        py, pxd = _core._source_paths(name)
        cls_name = None
        for line in Path(pxd).read_text().splitlines():
            m = re.match(r"cdef class (\w+)", line)
            cls_name = m.group(1) if m else cls_name
            m = re.match(r"\s+cpdef (?:\w+ )?([a-z]\w*)\(", line)
            if m and cls_name:
                cpdefs.add(f"{cls_name}.{m.group(1)}")
        mod = importlib.import_module(name)
        tree = ast.parse(Path(py).read_text())
        for cls_node in (n for n in tree.body if isinstance(n, ast.ClassDef)):
            cls = getattr(mod, cls_node.name)
            for fn in cls_node.body:
                if (not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_")
                        or fn.returns is None):
                    continue
                if any(getattr(d, "id", "") == "property"
                       or getattr(d, "attr", "") in ("setter", "deleter")
                       for d in fn.decorator_list):  # a property's getter or setter
                    continue
                obj = vars(cls)[fn.name]
                obj = getattr(obj, "__func__", obj)  # staticmethod / classmethod
                got = getattr(obj, "__annotations__", {}).get("return")
                assert got == ast.unparse(fn.returns), (
                    f"{name}.{cls_node.name}.{fn.name}: return annotation {got!r}, "
                    f"the .py says {ast.unparse(fn.returns)!r}")
                checked.add(f"{cls_node.name}.{fn.name}")
    # not vacuous: every public cpdef method (the ones that lose the annotation) was checked
    assert cpdefs and cpdefs <= checked, sorted(cpdefs - checked)

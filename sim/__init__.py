"""lossless.sim: the per-hop fabric simulator and the ``lossless`` command line.

Packages by concern, imports pointing down only (docs/explanation/design.md, "The simulator's
packages"):
kernel (engine, units, packet, events, trace, addresses) <- flowctl <- net <- nic, cc, health
<- fabric <- scaleup, workloads <- scenarios <- study <- cli.  ``tests/test_layout.py`` checks it.

The modules that moved to the packages above stay importable at their old names for one release
(:data:`MOVED`: ``import sim.host`` gives :mod:`sim.nic.host` itself, with a
DeprecationWarning); docs/howto/use-the-library.md lists the moves.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

from sim import _core

#: Old module name -> its home in the packages (kept for one release).
MOVED: dict[str, str] = {
    "sim.port": "sim.net.port",
    "sim.mmu": "sim.net.mmu",
    "sim.switch": "sim.net.switch",
    "sim.host": "sim.nic.host",
    "sim.deadlock": "sim.health.deadlock",
    "sim.watchdog": "sim.health.watchdog",
    "sim.topology": "sim.fabric.topology",
    "sim.packing": "sim.scaleup.packing",
    "sim.sue": "sim.scaleup",
    "sim.replay": "sim.workloads.replay",
    "sim.scenarios.traffic": "sim.workloads.patterns",
    "sim.results": "sim.study.results",
    "sim.plot": "sim.study.plot",
    "sim.labels": "sim.study.labels",
    "sim.sweep": "sim.study.sweep",
    "sim.replay_cmd": "sim.cli.replay",
    "sim.sweep_cmd": "sim.cli.sweep",
    "sim.wireshark_cmd": "sim.cli.wireshark",
    "sim.argtypes": "sim.cli.argtypes",
}


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module name as the module at its new home (the same object)."""

    def find_spec(self, fullname, path, target=None):  # type: ignore[no-untyped-def]
        if fullname in MOVED:
            return importlib.util.spec_from_loader(fullname, self)
        return None

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new} (docs/howto/use-the-library.md); the old name "
                      f"goes in the next release", DeprecationWarning, stacklevel=2)
        return importlib.import_module(new)

    def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
        return None


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedFinder())

# The compiled core's switch: LOSSLESS_PURE_PYTHON=1, or a stale build, loads the
# compiled modules from their .py (sim/_core.py).  Before any of them is imported.
_core.install()

#: Which simulator core runs: "compiled (Cython X.Y.Z)" or "interpreted (...)" (sim/_core.py).
core = _core.core

"""``import wire`` stays light: no Scapy, matplotlib, Construct or Hypothesis (they are
imported only by the modules that derive forms from the field tables, on demand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("scapy", "matplotlib", "construct", "hypothesis")


def imported_after(stmt: str) -> list[str]:
    """Top-level packages from HEAVY present in sys.modules after ``stmt``, in a fresh
    interpreter (this test process has Hypothesis loaded already)."""
    code = (
        "import json, sys\n"
        f"{stmt}\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("stmt", [
    "import wire",
    "import wire.stack, wire.spec, wire.ecn, wire.pfc, wire.roce, wire.pcapio",
    "from wire import build, dissect; dissect(build({'ipv4': {}, 'udp': {}, 'bth': {}}))",
])
def test_wire_import_is_light(stmt):
    assert imported_after(stmt) == []


def test_the_check_can_see_an_import():
    """The probe itself works: a heavy import is reported."""
    assert imported_after("import hypothesis") == ["hypothesis"]

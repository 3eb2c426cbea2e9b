"""``python -m bench --quick`` runs (a smoke test: benchmark figures are never pass/fail)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_bench_quick_runs() -> None:
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-m", "bench", "--quick"], cwd=root,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    for heading in ("Single FIFO", "8:1 incast", "wire.batch", "Crafting", "wire.dissect",
                    "Collectives", "Fabric scale", "HPCC's DCQCN incast"):
        assert heading in r.stdout, heading

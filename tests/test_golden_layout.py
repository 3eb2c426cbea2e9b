"""A small subset of the golden outputs of issue 17 (``python -m bench.golden``), pinned by
digest: these runs gave exactly these summary.json, events.jsonl, timeseries.npz arrays and
pcaps BEFORE ``sim/`` was restructured (recorded at commit 97874b0), and must keep giving
them.  A deliberate change of the model's behaviour updates the digests (``python -m
bench.golden record DIR CASE...`` then ``digest DIR CASE...``) and says why in its commit.
This is a guard, not a regression test of a bug: it passes before and after the move."""

from __future__ import annotations

import pytest

from bench import golden

#: Case -> SHA-256 over its compared outputs (bench.golden.case_digest), before the move.
PINNED = {
    "incast-nopfc": "e7e7d4878a052067137fb2f0e5245fcee2f2cdc1858cb151625ab4c643d12897",
    "sue_packing-cbfc": "be5f487220863f01bcc63c36d9e32b86e04602ac22ba36581f5be5027a006857",
    "pfc_deadlock_ring-wd": "3202c03a83a1da7e0e106cdd51bf63be54d2d7cb5552344c79081301a9e4484c",
    "pfc_storm-nicwd": "c899468260873f4ad3edff7528ca16e4ac06226bc754350eb74564c43ea6ee96",
}


@pytest.mark.parametrize("case", sorted(PINNED))
def test_golden_digest(case, tmp_path):
    golden.record(str(tmp_path), [case])
    assert golden.case_digest(str(tmp_path / case)) == PINNED[case]


def test_every_builtin_and_example_has_a_case():
    import glob
    import os

    from sim import scenarios

    names = {spec[0] for spec in golden.cases().values()}
    assert set(scenarios.names()) <= names
    examples = glob.glob(os.path.join(golden._ROOT, "docs", "examples", "*.toml"))
    assert {os.path.abspath(p) for p in examples} <= {os.path.abspath(n) for n in names}

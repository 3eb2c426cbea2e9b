"""A small subset of the golden outputs (``python -m bench.golden``), pinned by
digest: these runs gave exactly these summary.json, events.jsonl, timeseries.npz arrays and
pcaps BEFORE ``sim/`` was restructured (recorded at commit 97874b0), and must keep giving
them.  A deliberate change of the model's behaviour updates the digests (``python -m
bench.golden record DIR CASE...`` then ``digest DIR CASE...``) and says why in its commit.
This is a guard, not a regression test of a bug: it passes before and after the move."""

from __future__ import annotations

import pytest

from bench import golden

#: Case -> SHA-256 over its compared outputs (bench.golden.case_digest), before the move; the
#: three RoCE-host cases re-pinned when RC reliability became the NICs' default.
PINNED = {
    "incast-nopfc": "ab9de250043aac3bc8708501476174e4dc9252bdb106897c22ee3dee4ff16194",
    "sue_packing-cbfc": "be5f487220863f01bcc63c36d9e32b86e04602ac22ba36581f5be5027a006857",
    "pfc_deadlock_ring-wd": "35c7def778786e73fbb4f91c95f25cb88775d6ad03c3e03ebe7a682c4fc920cc",
    "pfc_storm-nicwd": "ac12ca8e1eb3f0b190850f69810235efdc377d613aff7f364c611b5ff2fd98d5",
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

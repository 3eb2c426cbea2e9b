"""A small subset of the golden outputs of issue 17 (``python -m bench.golden``), pinned by
digest: these runs gave exactly these summary.json, events.jsonl, timeseries.npz arrays and
pcaps BEFORE ``sim/`` was restructured (recorded at commit 97874b0), and must keep giving
them.  A deliberate change of the model's behaviour updates the digests (``python -m
bench.golden record DIR CASE...`` then ``digest DIR CASE...``) and says why in its commit.
This is a guard, not a regression test of a bug: it passes before and after the move."""

from __future__ import annotations

import pytest

from bench import golden

#: Case -> SHA-256 over its compared outputs (bench.golden.case_digest), before the move;
#: the pcaps of three of them since the captures' data frames became RDMA WRITE messages to
#: QPs from 0x100 (nothing else of them changed).
PINNED = {
    "incast-nopfc": "922c390f41daf016b0e3765743b6c49235ebd9ebfae2ccc749dc7ac658c1bf22",
    "sue_packing-cbfc": "be5f487220863f01bcc63c36d9e32b86e04602ac22ba36581f5be5027a006857",
    "pfc_deadlock_ring-wd": "a5efd26957a037fa6d3f2583e80e5061a9a780228104e98fa01003712aab6cc7",
    "pfc_storm-nicwd": "ff31476ecfe971d556e94c5bb7d46d823b411a239769d8bc928d36ece65ae888",
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

"""A small subset of the golden outputs (``python -m bench.golden``), pinned by digest:
these runs give exactly these summary.json, events.jsonl, timeseries.npz arrays and pcaps,
and must keep giving them through changes that are not meant to change results (a
restructuring, a faster core).  A deliberate change of the model's behaviour updates the
digests (``python -m bench.golden record DIR CASE...`` then ``digest DIR CASE...``) and says
why in its commit."""

from __future__ import annotations

import pytest

from bench import golden

#: Case -> SHA-256 over its compared outputs (bench.golden.case_digest).  A deliberate change of
#: the model re-pins them and says why in its commit; last: the switch buffer derived from the
#: ports (every params echo), ECN before PFC's XOFF, RC reliability on by default with
#: coalesced ACKs, captures as RDMA WRITE messages with the RC PSN and the class's DSCP, and
#: throughput counted where the NIC delivers; the params echo's `ooo` and `ooo_timeout_us`.
PINNED = {
    "incast-nopfc": "b0f7c73b7b38a3726dbc7ae80460ac0fe27afa6c7a2103a91cfa732e9e51f160",
    "sue_packing-cbfc": "3cb794c7d7b31082e684f159cb6919ccf66ba5bf0ce90cb9e10237c4a1002b2b",
    "pfc_deadlock_ring-wd": "de1a08a65ea9084a59b66a37cbfd6a2799a564c24b2bd0ef556aea3c06c5711a",
    "pfc_storm-nicwd": "1a36feece2b45194af1bedddff04733963deb4072e3a035c6ba8fb941cd4e874",
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

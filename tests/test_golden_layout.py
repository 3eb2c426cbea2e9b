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
#: throughput counted where the NIC delivers; the params echo's `ooo` and `ooo_timeout_us`;
#: summary.json's `tool_counters` (every port as perfquery, ethtool, rdma statistic name it).
PINNED = {
    "incast-nopfc": "3c2926a296678afcd4b82456e615002d286921a4bbe2c68ef70cfdf4c2af83b3",
    "sue_packing-cbfc": "2e0a11ac1ae1c001e701178e895b221a1b7934950aeb27defd4c829492e9a532",
    "pfc_deadlock_ring-wd": "23b9e67ac0e8b0738b31f9ff4e465f2d9ec312e74e09d50433ff10557ae115a5",
    "pfc_storm-nicwd": "807803d09a22acfc43b77421a73a33578172499d2442a96125fcc7a4ff9034bf",
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

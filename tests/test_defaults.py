"""Defaults that follow the set-up: the switch buffer derived from the ports and their rate."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.scenarios.base import ScenarioError
from sim.scenarios.common import (
    BUFFER_BYTES_PER_GBPS,
    FABRIC_PARAMS,
    default_buffer_bytes,
    mmu_config,
)
from sim.scenarios.description import build as build_file
from sim.units import gbps

_LEAF_SPINE_400G = {
    "run": {"duration_ms": 0.002},
    "topology": {"kind": "leaf_spine", "leaves": 2, "spines": 8, "hosts_per_leaf": 8},
    "links": {"link_gbps": 400.0},
    "traffic": {"pattern": "shift"},
}


def _knobs(**kw):
    p = {k: q.default for k, q in FABRIC_PARAMS.items()}
    p.update(kw)
    return p


@given(ports=st.integers(1, 256), rate_gbps=st.sampled_from([10, 25, 40, 100, 200, 400, 800]),
       cable_m=st.integers(0, 5000), packet=st.integers(64, 9216), pfc=st.booleans(),
       xoff_kb=st.floats(0.1, 5000))
def test_the_default_buffer_follows_capacity_and_always_fits(ports, rate_gbps, cable_m,
                                                             packet, pfc, xoff_kb):
    rate = gbps(rate_gbps)
    p = _knobs(link_gbps=float(rate_gbps), cable_m=cable_m, packet_bytes=packet, pfc=pfc,
               xoff_kb=xoff_kb)
    assert p["buffer_kb"] == 0.0  # the default: derived
    cfg, hr = mmu_config(p, ports, rate)  # never refused
    by_capacity = ports * rate_gbps * BUFFER_BYTES_PER_GBPS
    need = ports * (8 * cfg.reserved_bytes + len(cfg.lossless_pgs) * hr) + cfg.xoff_bytes
    # at least a static XOFF threshold on every port: the pool never fills before them
    floor = ports * (8 * cfg.reserved_bytes + len(cfg.lossless_pgs) * hr + cfg.xoff_bytes)
    assert cfg.buffer_bytes == -(-max(by_capacity, floor) // 1000) * 1000 >= need
    assert cfg.buffer_bytes == default_buffer_bytes(ports, rate, floor)
    # a buffer given is kept exactly, or refused naming the key
    given_kb = cfg.buffer_bytes / 1000 + 1
    assert mmu_config({**p, "buffer_kb": given_kb}, ports, rate)[0].buffer_bytes == \
        round(given_kb * 1000)
    if need > 1000:
        with pytest.raises(ScenarioError, match="'buffer_kb'"):
            mmu_config({**p, "buffer_kb": (need - 1000) / 1000}, ports, rate)


def test_a_400g_leaf_spine_file_without_buffer_kb_runs():
    sc = build_file(_LEAF_SPINE_400G, "ls400.toml")
    mmu = sc.fabric.nodes[0].mmu.config
    assert mmu.ports == 16
    assert mmu.buffer_bytes == 16 * 400 * BUFFER_BYTES_PER_GBPS  # 32 MB
    assert sc.params["switch"]["buffer_kb"] == 0.0
    # a file that gives buffer_kb keeps it, and a small one is refused in one line
    doc = {**_LEAF_SPINE_400G, "switch": {"buffer_kb": 2000.0}}
    assert build_file(doc, "f.toml").fabric.nodes[0].mmu.config.buffer_bytes == 2_000_000
    with pytest.raises(ScenarioError, match=r"buffer_kb.*16 ports.*need 1210.24 KB"):
        build_file({**_LEAF_SPINE_400G, "switch": {"buffer_kb": 1000.0}}, "f.toml")


@pytest.mark.parametrize("links", [{"flow_control": "credit"}, {"flow_control": "ib"},
                                   {"fabric": "ib"}])
def test_credit_fabric_files_without_buffer_kb_hold_their_credit_limits(links):
    doc = {**_LEAF_SPINE_400G, "links": {"link_gbps": 400.0, **links}}
    sc = build_file(doc, "f.toml")
    assert sc.fabric.nodes[0].mmu.config.buffer_bytes >= 16 * 400 * BUFFER_BYTES_PER_GBPS


@pytest.mark.parametrize("name, params", [
    ("incast", {"senders": 32}),
    ("incast", {"senders": 16, "link_gbps": 400.0}),
    ("incast", {"cable_m": 1000}),
    ("incast", {"senders": 64, "fabric": "ib"}),
    ("leaf_spine", {"hosts_per_leaf": 30, "spines": 8, "link_gbps": 800.0}),
    ("sue_packing", {"xpus": 128}),
    ("sue_packing", {"xpus": 128, "flow_control": "cbfc"}),
])
def test_builtins_with_many_or_fast_ports_build_on_the_default_buffer(name, params):
    from sim.scenarios import get

    sc = get(name).builder(params)
    assert sc.params["buffer_kb"] == 0.0


# --------------------------------------------------------------------------- ECN before PFC
@given(xoff_kb=st.floats(0.1, 5000), kmin_kb=st.floats(0, 50), mode=st.sampled_from(
    ["static", "dynamic"]), kmax=st.one_of(st.just(-1.0), st.floats(50, 1000)))
def test_the_default_kmax_is_at_most_the_static_xoff(xoff_kb, kmin_kb, mode, kmax):
    from sim.scenarios.common import DCQCN_KMAX_KB, ecn_config

    p = _knobs(xoff_kb=xoff_kb, kmin_kb=kmin_kb, kmax_kb=kmax, xoff_mode=mode)
    ecn = ecn_config(p)
    if kmax >= 0:  # given: kept
        assert ecn.kmax_bytes == round(kmax * 1000)
        return
    want = DCQCN_KMAX_KB if mode == "dynamic" else min(DCQCN_KMAX_KB, xoff_kb)
    assert ecn.kmax_bytes == round(max(kmin_kb, want) * 1000)
    assert ecn.kmin_bytes <= ecn.kmax_bytes
    if mode == "static" and xoff_kb >= kmin_kb:  # every frame marked before XOFF
        assert ecn.probability(round(xoff_kb * 1000) + 1) == 1.0


def test_bad_kmax_is_named():
    from sim.scenarios import get

    with pytest.raises(ScenarioError, match="kmax_kb"):
        get("incast").builder({"kmax_kb": -2.0})
    with pytest.raises(ScenarioError, match="kmin_kb"):
        get("incast").builder({"kmin_kb": 30.0, "kmax_kb": 20.0})


def _incast(tmp_path, **params):
    import json

    from sim.study.results import run_scenario

    out = tmp_path / "_".join(f"{k}{v}" for k, v in params.items())
    s = run_scenario("incast", {"duration_ms": 0.4, **params}, out_dir=str(out), plots=False,
                     write_captures=False)
    events = [json.loads(line) for line in open(out / "events.jsonl")]
    pauses = [e["t_ps"] for e in events if e["event"] == "PauseSent"]
    cuts = sum(1 for e in events if e["event"] == "RateChanged"
               and e["rate_bps"] < 100_000_000_000)
    return s, pauses, cuts


def test_incast_with_dcqcn_on_the_defaults_lets_dcqcn_hold_the_queue(tmp_path):
    """`lossless replay incast -p cc=dcqcn`: CNPs and rate cuts, PFC only in the first
    microseconds, far fewer PAUSE frames than the same incast without DCQCN."""
    _, plain_pauses, _ = _incast(tmp_path)
    s, pauses, cuts = _incast(tmp_path, cc="dcqcn")
    assert s["totals"]["cnps"] > 0 and cuts > 0
    assert len(pauses) < len(plain_pauses) / 2
    assert max(pauses) < 200 * 10**6  # none in the second half of the run
    assert max(plain_pauses) > 390 * 10**6  # without DCQCN PFC acts to the end
    assert s["totals"]["drops"] == 0

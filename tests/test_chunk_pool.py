"""Pooled NVLink in the chunk engine (sim.workloads.chunk_engine, ``pool_nvlink``): a node's
copies into and out of the NVSwitch as one transfer each on the node's ports as one
resource, against the engine without pooling on the same calls."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.fabric.fattree import fat_tree
from sim.fabric.rail import rail_optimized
from sim.scenarios.base import resolve_params
from sim.scenarios.collective import run_size
from sim.scenarios.common import collective_params
from sim.workloads import chunk_engine, chunk_kernel
from sim.workloads.chunk_engine import (
    nvlink_poolable,
    pooled_template,
    run_chunks,
)
from sim.workloads.collective import NVLINK_BPS, NVLINK_LATENCY_PS
from sim.workloads.fluid_transport import fluid_transport
from sim.workloads.nccl import nvls_chunk_transfers, schedule
from tests.helpers import interpreted
from tests.test_chunk_engine import HOST, MIB, MTU, _nvls

#: how far pooling may move a call's time on these small cases (docs/explanation/
#: collectives.md, "Pooled NVLink", measures it on the bench's larger ones)
POOL_GAP = 0.01


@settings(max_examples=30, deadline=None)
@given(nodes=st.integers(1, 6), g=st.integers(2, 8), h=st.data(), which=st.integers(0, 1))
def test_a_pooled_chunk_stands_for_every_transfer_of_the_chunk(nodes, g, h, which):
    """Per node a chunk's GPUs' copies into the reduce buffer become one transfer from the
    node's pool and the multicast copies out one to it; every other transfer is kept with
    its ends; the counts add up to the chunk's transfers; every dependency of the chunk is
    kept (between the transfers that stand for its ends) and points back."""
    sch = _nvls(nodes, g, 1, 4 * MIB)
    head = h.draw(st.integers(0, g - 1))
    trs = nvls_chunk_transfers(sch, which if nodes > 1 else 0, head, 0, 1)
    n = nodes * g
    pool0 = n + sch.buffers
    out, how = pooled_template(trs, n, g, pool0)
    assert sum(-k if k < 0 else 1 for k in how) == len(trs)
    assert [t.id for t in out] == list(range(len(out)))
    pooled_in = [t for t, k in zip(out, how, strict=True) if k < 0 and t.src >= pool0]
    pooled_out = [t for t, k in zip(out, how, strict=True) if k < 0 and t.dst >= pool0]
    assert len(pooled_in) == len(pooled_out) == nodes
    assert sorted(t.src - pool0 for t in pooled_in) == list(range(nodes))
    # the copies in: g of them on one node (NVLS), g - 1 in a tree (the head adds its own)
    ins = {t.id: -k for t, k in zip(out, how, strict=True) if k < 0 and t.src >= pool0}
    assert set(ins.values()) == {g if nodes == 1 else g - 1}
    outs = [-k for t, k in zip(out, how, strict=True) if k < 0 and t.dst >= pool0]
    assert outs == [g] * nodes
    kept = [t for t, k in zip(out, how, strict=True) if k >= 0]
    assert len(kept) == len(trs) - nodes * (g + (g if nodes == 1 else g - 1))
    assert all(k == 0 for t, k in zip(out, how, strict=True) if t.src < n and t.dst < n)
    for t in out:
        assert all(d < t.id for d in t.depends_on)
    # a dependency of the chunk, between the transfers standing for its two ends
    where: dict[int, int] = {}
    i = 0
    for t, k in zip(out, how, strict=True):
        for _ in range(-k if k < 0 else 1):
            where[trs[i].id] = t.id
            i += 1
    for t in trs:
        for d in t.depends_on:
            assert where[d] in out[where[t.id]].depends_on


def _pair(make, sch, host):
    """The engine without and with pooling on fresh fabrics: (run, pooled run)."""
    g = sch.gpus_per_node
    runs, ports, records = [], [], []
    for pool in (False, True):
        f = make()
        runs.append(run_chunks(sch, f.fabric, f.ranks, mtu_bytes=MTU, nvlink_bps=NVLINK_BPS,
                               nvlink_latency_ps=NVLINK_LATENCY_PS, host=host,
                               gpus_per_node=g, pool_nvlink=pool))
        records.append(chunk_engine.LAST_STATS["transfers_per_chunk"])
        ports.append({k: (v[0], v[2]) for k, v in
                      fluid_transport(f.fabric).port_counters().items()})
    # pooled, the kernel played fewer records a chunk: per node the g - 1 (tree) or g
    # copies in and the g copies out became one each
    nodes = sch.nranks // g
    assert records[0] - records[1] == nodes * (2 * g - 2 - (nodes > 1))
    assert ports[0] == ports[1]  # the network's transfers are the same ones on the same QPs
    assert runs[0].posted_bytes == runs[1].posted_bytes
    assert runs[0].transfers == runs[1].transfers  # the transfers pooled ones stand for
    assert runs[0].nvlink_bytes == runs[1].nvlink_bytes > 0  # the GPUs' ports' bytes
    return runs


@pytest.mark.parametrize("make,nodes,g,nc,size,host", [
    (lambda: rail_optimized(1, 8, link_gbps=400), 1, 8, 2, 64 * MIB, HOST),  # NVLS, 1 node
    (lambda: rail_optimized(2, 4, link_gbps=400), 2, 4, 1, 64 * MIB, None),
    (lambda: rail_optimized(4, 8, link_gbps=400), 4, 8, 16, 64 * MIB, HOST),
    (lambda: fat_tree(4, gpus_per_node=8), 2, 8, 16, 64 * MIB, HOST),
    (lambda: fat_tree(8, gpus_per_node=8), 16, 8, 16, 256 * MIB, HOST),
])
def test_pooled_is_near_the_engine_and_moves_the_same_bytes(make, nodes, g, nc, size, host):
    """Pooled, every port and QP carries the same bytes and the call's time stays within
    POOL_GAP of the engine's without pooling (the nodes' ports are the same capacity, only
    how copies queue on them differs)."""
    base, pooled = _pair(make, _nvls(nodes, g, nc, size), host)
    assert abs(pooled.time_ps / base.time_ps - 1) <= POOL_GAP


def test_pooled_runs_the_same_from_the_kernels_py_as_compiled(monkeypatch):
    """One source: pooled, the chunk kernel's .py (interpreted) gives what the module in
    use (compiled, when built) gives."""
    py = interpreted(chunk_kernel).ChunkKernel
    sch = _nvls(4, 4, 4, 8 * MIB)
    got = []
    for kernel in (chunk_kernel.ChunkKernel, py):
        monkeypatch.setattr(chunk_kernel, "ChunkKernel", kernel)
        f = fat_tree(4, gpus_per_node=4)
        run = run_chunks(sch, f.fabric, f.ranks, mtu_bytes=MTU, nvlink_bps=NVLINK_BPS,
                         nvlink_latency_ps=NVLINK_LATENCY_PS, host=HOST, gpus_per_node=4,
                         pool_nvlink=True)
        got.append((run.first_start_ps, run.last_finish_ps, run.posted_bytes,
                    run.nvlink_bytes))
    assert got[0] == got[1]


def test_what_pooling_refuses():
    tree = schedule("allreduce", 8, MIB // 4, nchannels=1, gpus_per_node=4, algorithm="tree",
                    drop_channels=False)
    assert not nvlink_poolable(tree) and nvlink_poolable(_nvls(2, 4, 1, MIB))
    f = rail_optimized(2, 4, link_gbps=400)
    with pytest.raises(ValueError, match="pools the NVLink of NVLS"):
        run_chunks(tree, f.fabric, f.ranks, mtu_bytes=MTU, nvlink_bps=NVLINK_BPS,
                   nvlink_latency_ps=NVLINK_LATENCY_PS, gpus_per_node=4, pool_nvlink=True)


def test_run_size_and_the_command_line(tmp_path, capsys):
    """--pool-nvlink: the row says it was pooled (only a size the chunk engine ran as an
    NVLS tree), the output says so; refused with packets, one line and status 2."""
    from sim.cli import main

    params = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 4})
    kw = dict(fidelity="flow", engine="chunk")
    base = run_size("allreduce", 16 << 20, "rail", params, algorithm="nvls_tree", **kw)
    row = run_size("allreduce", 16 << 20, "rail", params, algorithm="nvls_tree",
                   pool_nvlink=True, **kw)
    assert row["nvlink_pooled"] is True and "nvlink_pooled" not in base
    assert row["transfers"] == base["transfers"]
    assert row["nvlink_bytes"] == base["nvlink_bytes"]
    assert abs(row["time_ps"] / base["time_ps"] - 1) <= POOL_GAP
    tree = run_size("allreduce", 4 << 20, "rail", params, algorithm="tree", pool_nvlink=True,
                    **kw)
    assert tree["engine"] == "chunk" and "nvlink_pooled" not in tree  # nothing to pool
    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-b", "16M", "-e", "16M", "-p", "nodes=2",
                 "-p", "gpus_per_node=4", "--algo", "nvls_tree", "--fidelity", "flow",
                 "--engine", "chunk", "--pool-nvlink", "--json", str(out),
                 "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "NVLink pooled (--pool-nvlink" in text
    assert json.loads(out.read_text())["results"][0]["nvlink_pooled"] is True
    assert main(["collective", "allreduce", "-b", "16M", "-e", "16M", "-p", "nodes=2",
                 "--pool-nvlink", "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "--pool-nvlink" in err and "--fidelity flow" in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_a_sweep_passes_the_switch():
    from sim.cli.sweep import check_collective, collective_argv

    on = collective_argv({"size": "1G", "pool_nvlink": True, "fidelity": "flow"}, None)
    off = collective_argv({"size": "1G", "pool_nvlink": False}, None)
    assert "--pool-nvlink" in on and "--pool-nvlink" not in off
    with pytest.raises(ValueError, match="pool_nvlink=yes: true or false"):
        collective_argv({"size": "1G", "pool_nvlink": "yes"}, None)
    # refused before any run, as lossless collective refuses it
    with pytest.raises(ValueError, match=r"--pool-nvlink: .* add --fidelity flow"):
        check_collective({"size": "1G", "pool_nvlink": True}, None)
    with pytest.raises(ValueError, match="drop --engine job"):
        check_collective({"size": "1G", "pool_nvlink": True, "fidelity": "flow",
                          "engine": "job"}, None)
    check_collective({"size": "1G", "pool_nvlink": True, "fidelity": "flow"}, None)

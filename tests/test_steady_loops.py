"""A call cut to a few of its loops (sim.workloads.nccl.truncated_count) and a ring call's
time from the loops that repeat (sim.workloads.steady), against the whole call."""

from __future__ import annotations

import json

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from sim.scenarios.base import resolve_params
from sim.scenarios.collective import run_size
from sim.scenarios.common import collective_params
from sim.workloads.nccl import ScheduleError, schedule, truncated_count, verify

ALGOS = ("ring", "tree", "nvls", "nvls_tree")


def _kw(algo: str, nodes: int, g: int) -> dict:
    return {"algorithm": algo, "gpus_per_node": g, "nchannels": 4 if algo != "ring" else 2,
            **({"protocol": "simple"})}


def _shape(t, shift: int = 0, id_shift: int = 0):
    return (t.src, t.dst, t.channel, t.nbytes, t.wire_bytes, t.step, t.reduce,
            t.src_block, t.dst_block, t.offset_bytes - shift,
            tuple(d - id_shift for d in t.depends_on), t.qp_bytes)


@settings(max_examples=25, deadline=None)
@given(algo=st.sampled_from(ALGOS), nodes=st.integers(2, 3), g=st.sampled_from([2, 4]),
       extra=st.integers(0, 3 << 20), loops=st.integers(2, 4),
       coll=st.sampled_from(["allreduce", "allgather", "reducescatter"]))
def test_a_truncated_call_is_the_first_and_last_loops_of_the_whole(algo, nodes, g, extra,
                                                                    loops, coll):
    """Built without transfers the schedule has the loops, chunk and channels of the built
    one; cut to ``loops`` loops it has the whole call's first ones transfer for transfer
    and its last one at the same place from the end, and it verifies."""
    if coll != "allreduce" and algo != "ring":
        return
    if algo == "nvls" and nodes > 1:
        algo = "nvls_tree"
    n = nodes * g
    kw = _kw(algo, nodes, g)
    probe = schedule(coll, n, (64 << 20) // 4, build=False, **kw)  # a loop's elements
    count = probe.loop_elems * (loops + 1) + extra % probe.loop_elems
    whole = schedule(coll, n, count, **kw)
    lazy = schedule(coll, n, count, build=False, **kw)
    assert (lazy.loops, lazy.loop_elems, lazy.chunk_bytes, lazy.nchannels, lazy.nthreads,
            lazy.rings) == (whole.loops, whole.loop_elems, whole.chunk_bytes,
                            whole.nchannels, whole.nthreads, whole.rings)
    assume(whole.loops > loops)
    assert not lazy.transfers
    if algo.startswith("nvls"):  # one part of the buffer per channel: not cut
        with pytest.raises(ScheduleError, match="whole-buffer loops"):
            truncated_count(lazy, loops)
        return
    cut = schedule(coll, n, truncated_count(lazy, loops), full_count=count, **kw)
    assert cut.loops == loops and (cut.chunk_bytes, cut.nchannels) == (whole.chunk_bytes,
                                                                       whole.nchannels)
    verify(cut)
    by_loop = {}
    for s in (whole, cut):
        d = by_loop[id(s)] = {}
        for t in s.transfers:
            d.setdefault(t.loop, []).append(t)
    w, c = by_loop[id(whole)], by_loop[id(cut)]
    for k in range(loops - 1):  # the same first loops (ids too: built loop by loop)
        assert [_shape(t) for t in c[k]] == [_shape(t) for t in w[k]]
    shift = (whole.loops - loops) * whole.loop_elems * whole.elem_bytes
    if algo == "ring":  # the last loop: the same transfers, shifted by the loops left out
        id_shift = w[whole.loops - 1][0].id - c[loops - 1][0].id
        assert ([_shape(t, shift, id_shift) for t in w[whole.loops - 1]]
                == [_shape(t, 0, 0) for t in c[loops - 1]])
    else:
        assert ([_shape(t)[:9] for t in w[whole.loops - 1]]
                == [_shape(t)[:9] for t in c[loops - 1]])


def test_calls_without_loops_are_refused():
    with pytest.raises(ScheduleError, match="loops only"):
        schedule("alltoall", 8, 1 << 20, gpus_per_node=4, build=False)
    with pytest.raises(ScheduleError, match="full_count"):
        schedule("allreduce", 8, 1 << 20, gpus_per_node=4, full_count=1 << 19)
    lazy = schedule("allreduce", 8, 1 << 24, gpus_per_node=4, build=False)
    with pytest.raises(ScheduleError, match="2 or more"):
        truncated_count(lazy, 1)


def _row(steady: bool, algo: str = "ring", size: int = 512 << 20) -> dict:
    params = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 2})
    return run_size("allreduce", size, "rail", params, algorithm=algo, protocol="simple",
                    channels=2, fidelity="flow", steady=steady)


def test_a_ring_calls_time_from_its_steady_loops_is_the_whole_calls():
    """2 nodes of 2 GPUs, ring AllReduce of 512 MiB on 2 channels: 32 loops; the loops found
    repeating give the whole call's time to the picosecond, and its transfers' count."""
    fast, whole = _row(True), _row(False)
    st_ = fast["steady"]
    assert st_["loops"] == 32 and st_["loops_run"] < 32 and "steady" not in whole
    assert fast["iteration_times_ps"] == whole["iteration_times_ps"]
    assert fast["inplace"]["iteration_times_ps"] == whole["inplace"]["iteration_times_ps"]
    assert fast["transfers"] == whole["transfers"] and fast["wrong"] == 0
    assert st_["transfers_run"] < fast["transfers"]


def test_trees_run_every_loop():
    """A tree's loops drift against each other (sim.workloads.steady): never cut."""
    row = _row(True, "tree", 64 << 20)
    assert "steady" not in row and row["wrong"] == 0


def test_the_command_says_which_loops_it_ran(tmp_path, capsys):
    from sim.cli import main

    out = tmp_path / "r.json"
    args = ["collective", "allreduce", "-b", "512M", "-e", "512M", "-p", "nodes=2",
            "-p", "gpus_per_node=2", "--algo", "ring", "--proto", "simple", "--channels",
            "2", "--fidelity", "flow", "--json", str(out)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "ring loops simulated" in text and "--every-loop simulates them all" in text
    row = json.loads(out.read_text())["results"][0]
    assert row["steady"]["loops"] == 32
    assert main([*args, "--every-loop"]) == 0
    assert "ring loops simulated" not in capsys.readouterr().out
    assert "steady" not in json.loads(out.read_text())["results"][0]

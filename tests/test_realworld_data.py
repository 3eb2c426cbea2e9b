"""bench/realworld.toml, the published nccl-tests tables `python -m bench realworld` compares
with: every row is what nccl-tests prints for its size and time (busbw = size / time x the
collective's factor for the setup's ranks), so a row mistyped in the copy fails here, and
every setup's options are ones `lossless collective` takes."""

from __future__ import annotations

import re

import pytest

from bench.realworld import setups

FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
          "alltoall": lambda n: (n - 1) / n, "reducescatter": lambda n: (n - 1) / n}


@pytest.mark.parametrize("s", setups(), ids=lambda s: s["name"])
def test_rows_are_consistent_nccl_tests_rows(s):
    p = dict(re.findall(r"-p (\w+)=(\S+)", s["args"]))
    n = int(p["nodes"]) * int(p["gpus_per_node"])
    assert s["source"].startswith("https://") and s["rows"]
    sizes = [r[0] for r in s["rows"]]
    assert sizes == sorted(sizes) and sizes[0] >= 1024
    for size, time_us, busbw in s["rows"]:
        algbw = size / time_us / 1e3
        # busbw is printed with two decimals: 0.06 for 1 KiB in 29.75 us
        assert busbw == pytest.approx(algbw * FACTOR[s["collective"]](n), rel=0.01,
                                      abs=0.006), size


def test_every_setup_parses_as_a_collective_command():
    from sim.cli import build_parser

    for s in setups():
        build_parser().parse_args(["collective", s["collective"], *s["args"].split(),
                                   "-p", f"hw={s['hw']}"])


def test_plot_draws_a_panel_per_setup(tmp_path):
    """--plot: one panel per setup run, real and simulated busbw; written whole."""
    from bench.realworld import plot

    s = setups()[:3]
    rows = [{"setup": x["name"], "size_bytes": size, "real_busbw_GB_per_s": bus,
             "sim_busbw_GB_per_s": bus * 1.1, "ratio": 1.1, "ran": "Ring/Simple",
             "nccl": "NVLSTree/Simple" if i else "Ring/LL"}
            for x in s for i, (size, _t, bus) in enumerate(x["rows"])]
    out = tmp_path / "f.png"
    plot(rows, setups(), str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob("*.tmp.png"))


def test_sizes_run_are_the_ones_nccl_tests_printed():
    """A table's printed sizes are trimmed to its ranks; the bench runs the power of 2 they
    came from, and the simulator prints the same trimmed size (nccl-tests' counts)."""
    from bench.realworld import nominal_bytes
    from sim.workloads.nccl_tests import coll_counts

    for s in setups():
        p = dict(re.findall(r"-p (\w+)=(\S+)", s["args"]))
        n = int(p["nodes"]) * int(p["gpus_per_node"])
        dtype = "double" if "-d double" in s["args"] else "float"
        for size, _t, _b in s["rows"]:
            nominal = nominal_bytes(size)
            assert nominal & (nominal - 1) == 0 and nominal >= size
            assert coll_counts(s["collective"], nominal, dtype, n).size_bytes == size, \
                (s["name"], size)

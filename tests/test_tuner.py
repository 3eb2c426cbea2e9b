"""NCCL's host side (sim.workloads.tuner): its cost model reproduces NCCL 2.30.7's numbers for a
DGX H100 (the latencies and algorithm bandwidths ncclTopoTuneModel computes, worked by hand
from src/graph/tuning.cc), its choice per size, NCCL_ALGO/NCCL_PROTO's grammar, the
environment, and the host latencies the simulator adds."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.workloads.tuner import (
    ALGOS,
    PRESETS,
    PROTOS,
    RUNNABLE_ALGOS,
    HostSide,
    Tuner,
    TunerError,
    from_environment,
    nccl_text,
    parse_nccl_list,
    search,
)

H100 = PRESETS["h100-cx7"]


def test_dgx_h100_graphs_as_nccls_search_finds_them():
    """One node: 6 channels at 60 GB/s doubled to 12 x 30, 24 at run time (NCCL's logs of an
    8 x H100 node print 24 coll channels); several nodes: one 48 GB/s channel per 400G NIC
    (PCIe Gen5 x16 = 48), not doubled, 16 at run time (NVIDIA/nccl#1453, #892)."""
    one = search(H100, 1)
    assert (one.ring.channels, one.ring.bw_intra_GBps, one.runtime_channels) == (12, 30, 24)
    assert (one.nvls.channels, one.nvls.bw_intra_GBps, one.nvls_channels) == (8, 40, 16)
    two = search(H100, 2)
    assert (two.ring.channels, two.ring.bw_inter_GBps, two.runtime_channels) == (8, 48, 16)


@pytest.mark.parametrize("nodes, algo, proto, lat_us, algbw", [
    (1, "ring", "ll", 15.0, 80.6), (1, "ring", "ll128", 40.6, 189.3),
    (1, "ring", "simple", 56.0, 205.7), (1, "tree", "simple", 64.4, 165.6),
    (1, "nvls", "simple", 25.0, 272.0),
    (2, "tree", "ll", 25.2, 19.5), (2, "tree", "ll128", 48.5, 146.8),
    (2, "ring", "simple", 131.6, 204.8), (2, "nvls_tree", "simple", 66.8, 246.2),
])
def test_allreduce_latency_and_bandwidth_as_ncclTopoTuneModel(nodes, algo, proto, lat_us, algbw):
    t = Tuner(H100, 8 * nodes, nodes)
    assert t.latency_us("allreduce", algo, proto) == pytest.approx(lat_us, abs=0.05)
    assert t.algo_bw_GBps("allreduce", algo, proto) == pytest.approx(algbw, abs=0.05)


@pytest.mark.parametrize("nodes, size, nccl, ours", [
    (1, 1 << 20, "Ring/LL", "Ring/LL"), (1, 4 << 20, "NVLS/Simple", "Ring/LL128"),
    (1, 1 << 30, "NVLS/Simple", "Ring/Simple"),
    (2, 64 << 10, "Tree/LL", "Tree/LL"), (2, 1 << 20, "Tree/LL128", "Tree/LL128"),
    (2, 4 << 20, "NVLSTree/Simple", "Tree/LL128"), (2, 1 << 30, "NVLSTree/Simple",
                                                   "Ring/Simple"),
    (4, 4 << 20, "Tree/LL128", "Tree/LL128"), (4, 1 << 30, "Ring/Simple", "Ring/Simple"),
])
def test_choice_per_size(nodes, size, nccl, ours):
    """NCCL's own pick over every algorithm, which the simulator runs too (NVLS and the NVLS
    tree included), and the pick among Ring and Tree only."""
    t = Tuner(H100, 8 * nodes, nodes)
    c = t.choose("allreduce", size, RUNNABLE_ALGOS)
    assert c.nccl_text == nccl
    assert nccl_text(c.nccl_algo, c.nccl_proto) == nccl
    assert t.choose("allreduce", size, ("tree", "ring")).nccl_text == ours


def test_channels_drop_for_small_calls_as_topoGetAlgoInfo():
    t = Tuner(H100, 8, 1)
    assert t.choose("allreduce", 1024, RUNNABLE_ALGOS).channels == 1
    assert t.choose("allreduce", 1 << 30, ("ring",)).channels == 24
    assert t.choose("allreduce", 1 << 30, RUNNABLE_ALGOS).channels == 16  # nvlsChannels
    assert Tuner(H100, 8, 1, max_channels=8).channels == 8
    assert Tuner(H100, 16, 2, min_channels=24).channels == 24


def test_nccl_algo_and_proto_grammar():
    """parseList: a plain list enables only it, '^' all but it, 'Func:' one collective;
    NCCL_PROTO=^LL force-enables LL128 (1, not NCCL's auto 2)."""
    d = {c: {"ll": 1, "ll128": 2, "simple": 1} for c in
         ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")}
    names = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}
    got = parse_nccl_list("^LL", PROTOS, names, d)
    assert got["allreduce"] == {"ll": 0, "ll128": 1, "simple": 1}
    got = parse_nccl_list("simple;AllReduce:ll,LL128", PROTOS, names, d)
    assert got["allgather"] == {"ll": 0, "ll128": 0, "simple": 1}
    assert got["allreduce"] == {"ll": 1, "ll128": 1, "simple": 0}
    with pytest.raises(TunerError, match="unknown name 'LL256'"):
        parse_nccl_list("LL256", PROTOS, names, d)
    with pytest.raises(TunerError, match="unknown collective"):
        parse_nccl_list("Gather:Simple", PROTOS, names, d)
    t = Tuner(H100, 16, 2, algo="Ring", proto="Simple")
    c = t.choose("allreduce", 1 << 20, RUNNABLE_ALGOS)
    assert (c.algo, c.proto) == ("ring", "simple")
    with pytest.raises(TunerError, match="no algorithm"):
        Tuner(H100, 16, 2, algo="NVLS").choose("allreduce", 1 << 20, RUNNABLE_ALGOS)


def test_environment():
    env = {"NCCL_ALGO": "Ring", "NCCL_MIN_NCHANNELS": "24", "NCCL_IB_QPS_PER_CONNECTION": "2",
           "NCCL_NVLS_ENABLE": "0", "UNRELATED": "x"}
    assert from_environment(env) == {"algo": "Ring", "min_channels": 24, "qps": 2,
                                     "nvls": False}
    with pytest.raises(TunerError, match="NCCL_MAX_NCHANNELS='many'"):
        from_environment({"NCCL_MAX_NCHANNELS": "many"})
    with pytest.raises(TunerError, match=r"NCCL_MIN_NCHANNELS=99: expected 0\.\.64"):
        from_environment({"NCCL_MIN_NCHANNELS": "99"})
    # read, and said back where the model does not follow them
    from sim.workloads.tuner import environment_notes

    v = from_environment({"NCCL_COLLNET_ENABLE": "1", "NCCL_CROSS_NIC": "1"})
    assert v == {"collnet": True, "cross_nic": 1}
    notes = environment_notes(v)
    assert len(notes) == 2 and "NCCL_COLLNET_ENABLE=1: no SHARP on this fabric" in notes[0]
    assert "may run on the leaves' SHARP" in environment_notes(v, sharp=True)[0]
    assert environment_notes(from_environment({"NCCL_CROSS_NIC": "2",
                                               "NCCL_COLLNET_ENABLE": "0"})) == []
    with pytest.raises(TunerError, match=r"NCCL_CROSS_NIC=3: expected 0\.\.2"):
        from_environment({"NCCL_CROSS_NIC": "3"})


def test_host_side_is_nccls_per_step_latency_and_channel_bandwidth():
    """Ring Simple on 2 DGX H100: launch 8.4 us, a step inside a node max(3.4, 3 x 1.0 us of
    net overhead) = 3.4 us, between nodes 14 us; each channel moves NCCL's bus bandwidth (8
    x 48 GB/s) over its 16 runtime channels, 24 GB/s, also when NCCL_MIN_NCHANNELS raises the
    channels (more CTAs move more); Ring LL128 is capped by perChMaxRingLL128Bw (8 x 36.7
    GB/s over 16 channels).  With one GPU per node the network step is the tree's (NCCL:
    ppn == 1)."""
    host = HostSide.of(Tuner(H100, 16, 2), "allreduce", "ring", "simple")
    assert (host.launch_ps, host.intra_ps, host.inter_ps) == (8_400_000, 3_400_000, 14_000_000)
    assert host.channel_Bps == 24 * 10**9
    assert host.busy_ps(24_000) == 1_000_000  # 24 kB at 24 GB/s: 1 us
    assert HostSide.of(Tuner(H100, 16, 2, min_channels=24), "allreduce", "ring",
                       "simple").channel_Bps == 24 * 10**9
    ll128 = HostSide.of(Tuner(H100, 16, 2), "allreduce", "ring", "ll128")
    assert ll128.channel_Bps == round(8 * 36.7e9 / 16)
    host = HostSide.of(Tuner(H100, 4, 4), "allreduce", "ring", "ll")
    assert (host.launch_ps, host.inter_ps) == (6_600_000, 5_000_000)
    assert HostSide(1, 2, 3).busy_ps(10**9) == 0  # no channel limit


@given(nodes=st.sampled_from([1, 2, 3, 4, 8, 16]), size=st.integers(0, 1 << 34),
       preset=st.sampled_from(sorted(PRESETS)),
       coll=st.sampled_from(["allreduce", "allgather", "reducescatter", "broadcast"]))
def test_the_choice_is_the_least_time(nodes, size, preset, coll):
    hw = PRESETS[preset]
    t = Tuner(hw, hw.gpus_per_node * nodes, nodes)
    algos = RUNNABLE_ALGOS if coll == "allreduce" else ("ring",)
    c = t.choose(coll, size, algos)
    times = [v for (a, _), v in c.table.items() if v is not None and a in algos]
    assert c.time_us == min(times) and c.algo in algos and c.proto in PROTOS
    everything = [v for v in c.table.values() if v is not None]
    assert c.table[(c.nccl_algo, c.nccl_proto)] == min(everything)
    # NVLS and the NVLS tree run their own channels (32 for the tree on 2 B200 nodes, more
    # than the communicator's 16), the others at most the communicator's
    assert c.nccl_algo in ALGOS and 1 <= c.channels <= t.algo_channels(c.algo)


def test_cli_auto_with_the_environment_and_the_host_side(tmp_path, monkeypatch, capsys):
    """NCCL_ALGO from the environment turns the tuner on: Ring only, NCCL_PROTO unset
    leaves the protocol to it; the tuner's block names what ran and NCCL's own pick; NCCL's
    host side makes a small call latency-bound."""
    from sim.cli import main

    monkeypatch.setenv("NCCL_ALGO", "Ring")
    monkeypatch.setenv("NCCL_IB_QPS_PER_CONNECTION", "2")
    out = tmp_path / "r.json"
    rc = main(["collective", "allreduce", "-b", "1M", "-e", "1M", "-p", "nodes=2",
               "-p", "gpus_per_node=8", "-p", "nccl_host=true", "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0
    assert "algo auto, proto auto, channels auto, qps 2" in text
    assert "NCCL_ALGO=Ring NCCL_IB_QPS_PER_CONNECTION=2; NCCL host side h100-cx7" in text
    row = json.loads(out.read_text())["results"][0]
    assert row["tuner"]["algorithm"] == "ring" and row["tuner"]["nccl"] == "Ring/LL128"
    assert (row["algorithm"], row["protocol"]) == ("ring", "ll128")
    # Ring LL128: NCCL charges 14 + 28 x 1.9 + 2 x 4.0 = 75.2 us of latency, then the data
    assert 40 < row["time_us"] < 200
    monkeypatch.setenv("NCCL_ALGO", "NVLS")
    assert main(["collective", "allreduce", "-p", "nodes=2", "-p", "gpus_per_node=8"]) == 2
    assert "NCCL settings:" in capsys.readouterr().err


def test_a_runs_host_side_launch_steps_and_channel_bandwidth():
    """In the run: the time counts from the launch; a 2-rank ring AllReduce of 1 MiB on one
    channel sends 2 x 512 KiB per rank, each step waits its latency, and a channel moving 1
    GB/s makes the call last its bytes at that rate (the 400G network takes ~25 us); a
    rank's channel moves one transfer at a time."""
    from sim.fabric.rail import collective_star
    from sim.workloads.collective import run_schedule
    from sim.workloads.nccl import schedule

    sch = schedule("allreduce", 2, (1 << 20) // 4, nchannels=1)
    g = collective_star(2, link_gbps=400)
    free = run_schedule(sch, g.fabric, g.ranks)
    f = collective_star(2, link_gbps=400)
    host = HostSide(launch_ps=5_000_000, intra_ps=0, inter_ps=2_000_000, channel_Bps=10**9)
    run = run_schedule(sch, f.fabric, f.ranks, host=host)
    assert run.launch_ps == 0 and min(run.start_ps) >= 5_000_000 + 2_000_000
    per_rank = sum(t.nbytes for t in sch.transfers if t.src == 0)
    assert per_rank == 1 << 20
    assert free.time_ps < 40_000_000
    assert per_rank * 1000 < run.time_ps < per_rank * 1000 * 1.1 + free.time_ps
    spans = sorted((run.start_ps[t.id], t) for t in sch.transfers if t.src == 0)
    for (a, ta), (b, _) in itertools.pairwise(spans):
        assert b - a >= ta.nbytes * 1000  # one transfer at a time: 1 ns per byte


@pytest.mark.parametrize("proto", ["simple", "ll128"])
def test_nvlink_copy_is_the_transfer_simple_waits_for_it_ll128_streams(proto):
    """Inside a node the channel's copy is the NVLink transfer: with Simple a transfer is
    received no sooner than its copy at the channel's rate ends (the receiver waits for the
    step's flag); LL128 streams, its transfer ends with the NVLink's time while the channel
    stays busy (the next one on it waits)."""
    from sim.fabric.rail import collective_star
    from sim.workloads.collective import run_schedule
    from sim.workloads.nccl import schedule

    sch = schedule("allreduce", 2, (1 << 20) // 4, nchannels=1, protocol=proto,
                   gpus_per_node=2)
    f = collective_star(2, gpus_per_node=2, link_gbps=400)
    host = HostSide(launch_ps=0, intra_ps=0, inter_ps=0, channel_Bps=10**9)
    run = run_schedule(sch, f.fabric, f.ranks, gpus_per_node=2, host=host)
    spans = [(run.start_ps[t.id], run.finish_ps[t.id], t.nbytes) for t in sch.transfers]
    copy = [s + n * 1000 for s, _, n in spans]  # 1 GB/s: 1 ns per byte
    if proto == "simple":
        assert all(fin >= c for (_, fin, _), c in zip(spans, copy, strict=True))
    else:
        assert any(fin < c for (_, fin, _), c in zip(spans, copy, strict=True))
    # either way rank 0's channel moves its transfers in turn: each starts after the copy
    # of the one before (streamed, the last one's copy is not waited for at the end [A])
    mine = sorted((run.start_ps[t.id], t.nbytes) for t in sch.transfers if t.src == 0)
    for (a, n), (b, _) in itertools.pairwise(mine):
        assert b >= a + n * 1000
    assert run.time_ps >= sum(n for _, n in mine[:-1]) * 1000


def test_nccl_variables_pasted_as_p_keys(tmp_path, monkeypatch, capsys):
    """-p NCCL_*=... as the job's settings: over the environment's, named on the first line;
    a variable the model does not take is named and ignored; a bad value is one line."""
    from sim.cli import main

    monkeypatch.setenv("NCCL_ALGO", "Tree")
    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-e", "1M", "-p", "nodes=2", "-p",
                 "gpus_per_node=8", "-p", "NCCL_ALGO=Ring", "-p", "NCCL_PROTO=Simple",
                 "-p", "NCCL_SOCKET_IFNAME=eth0", "--json", str(out)]) == 0
    o = capsys.readouterr()
    assert "NCCL_ALGO=Ring NCCL_PROTO=Simple" in o.out
    assert "-p NCCL_SOCKET_IFNAME: not modelled, ignored" in o.err
    row = json.loads(out.read_text())["results"][0]
    assert (row["algorithm"], row["protocol"]) == ("ring", "simple")
    assert main(["collective", "allreduce", "-p", "NCCL_MAX_NCHANNELS=0"]) == 2
    assert "-p: NCCL_MAX_NCHANNELS=0: expected 1..64" in capsys.readouterr().err
    assert main(["collective", "allreduce", "-p", "NCCL_ALGO=Ring", "-p",
                 "NCCL_ALGO=Tree"]) == 2
    assert "-p NCCL_ALGO: given twice" in capsys.readouterr().err
    # read but not modelled: said back once, and named on the first line
    assert main(["collective", "allreduce", "-e", "1M", "-p", "NCCL_COLLNET_ENABLE=1"]) == 0
    o = capsys.readouterr()
    assert o.err.count("NCCL_COLLNET_ENABLE=1: no SHARP on this fabric") == 1
    assert "NCCL_COLLNET_ENABLE=1" in o.out.splitlines()[0]


def test_hw_sets_the_nodes_fabric_defaults(tmp_path, capsys):
    """-p hw=NODE sets that node's GPUs per node, NIC rate, NVLink and PCIe generation on a
    built-in fabric, each unless given, and only the keys the fabric kind takes."""
    from sim.cli import main

    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-e", "1M", "-p", "hw=a100-cx6", "-p",
                 "gpus_per_node=4", "--json", str(out)]) == 0
    p = json.loads(out.read_text())["params"]
    assert (p["gpus_per_node"], p["link_gbps"], p["nvlink_gbps"], p["pcie_gen"]) == \
        (4, 200.0, 2400.0, 4)
    assert main(["collective", "allreduce", "-e", "1M", "-p", "hw=b200-cx7", "--json",
                 str(out)]) == 0
    p = json.loads(out.read_text())["params"]
    assert (p["gpus_per_node"], p["link_gbps"], p["nvlink_gbps"]) == (8, 400.0, 7200.0)
    assert main(["collective", "allreduce", "-e", "1M", "-p", "hw=b200-cx7", "-p",
                 "nodes=1", "--fabric", "star", "--json", str(out)]) == 0
    capsys.readouterr()
    assert main(["collective", "allreduce", "-p", "hw=h200"]) == 2
    assert "hw" in capsys.readouterr().err


def test_a_node_of_fewer_gpus_has_fewer_nics():
    """The search counts the NICs of the node the fabric gives (one per GPU on a DGX H100):
    2 nodes of 4 GPUs find 4 channels of 48 GB/s, which ncclTopoDupChannels doubles (4 is
    not more than 4) to 8 of 24 (busBw 192 GB/s, what 4 x 400G carry), 16 at run time."""
    g = search(H100, 2, 4)
    assert (g.ring.channels, g.ring.bw_inter_GBps, g.runtime_channels) == (8, 24, 16)
    assert Tuner(H100, 8, 2).bus_bw_GBps("allreduce", "ring", "simple") == 192


def test_p2p_channels_as_ncclTopoComputeP2pChannels():
    """One DGX H100 node: the communicator's 24 channels round up to 32 p2p channels, and an
    AllToAll's operations take 32 halved until x 8 ranks fits: 4 per peer."""
    from sim.workloads.tuner import p2p_channels

    assert p2p_channels(Tuner(H100, 8, 1)) == (32, 4)
    assert p2p_channels(Tuner(H100, 4, 1, max_channels=8)) == (8, 2)


@pytest.mark.parametrize("preset, nodes, channels, chunk_k, tree_max_k", [
    ("h100-cx7", 1, 16, 128, 128), ("h100-cx7", 4, 16, 128, 64),  # NVLS_NCHANNELS_SM90
    ("b200-cx7", 1, 24, 128, 128),                # SM100 on one NVLink domain
    ("b200-cx7", 2, 32, 128, 64),                 # 400G NICs: 50 GB/s as NCCL rates them
    ("b200-cx7", 4, 24, 128, 64),
    ("gb300-cx8", 2, 32, 256, 256),               # 800G: 100 GB/s, 4 GPUs a node
    ("gb300-cx8", 4, 24, 256, 256),
    ("gb300-nvl72", 4, 32, 128, 64),              # 800G, 72 GPUs a node
    ("gb200-nvl72", 2, 32, 128, 64),
])
def test_nvls_tuning_as_nccl_tunes_it(preset, nodes, channels, chunk_k, tree_max_k):
    """nvlsChannels, nvlsChunkSize and nvlsTreeMaxChunkSize (ncclNvlsTuning and
    ncclNvlsTreeSm100Tuning, src/transport/nvls.cc, NCCL 2.30.7); the NVLS tree runs on all
    the NVLS channels, across nodes too (getAlgoInfo)."""
    hw = PRESETS[preset]
    t = Tuner(hw, hw.gpus_per_node * nodes, nodes)
    g = t.graphs
    assert (g.nvls_channels, g.nvls_chunk_bytes, g.nvls_tree_max_chunk_bytes) == \
        (channels, chunk_k * 1024, tree_max_k * 1024)
    assert t.algo_channels("nvls_tree") == channels
    assert t.algo_channels("nvls") == (channels if nodes == 1 else
                                       min(channels, t.channels))


def test_nvls_tree_chunk_follows_the_node():
    """The NVLS tree's chunk is min(nvlsChunkSize, nvlsTreeMaxChunkSize), then shrunk for
    small calls (calcCollChunking): with 2 GB300 trays' 256 KiB, 256 KiB for a call of 32 x
    8 concurrent chunks (2 channels x 4 heads), 128 KiB below 16 x 8; NCCL's defaults 128
    KiB."""
    from sim.workloads.nccl import schedule

    count = 64 * 1024 * 1024 // 4
    kw = {"algorithm": "nvls_tree", "gpus_per_node": 4, "nchannels": 2}
    assert schedule("allreduce", 8, count, "float", **kw).chunk_bytes == 128 * 1024
    big = schedule("allreduce", 8, count, "float", nvls_chunk_bytes=256 * 1024,
                   nvls_tree_max_chunk_bytes=256 * 1024, **kw)
    assert big.chunk_bytes == 256 * 1024
    small = schedule("allreduce", 8, count // 4, "float", nvls_chunk_bytes=256 * 1024,
                     nvls_tree_max_chunk_bytes=256 * 1024, **kw)
    assert small.chunk_bytes == 128 * 1024  # 16 MiB is less than 16 x 8 x 256 KiB


def test_run_size_schedules_the_nodes_nvls_chunks(monkeypatch):
    """lossless collective hands the tuner's NVLS chunks to the schedule: 2 GB300 trays run
    the NVLS tree in 256 KiB chunks (ncclNvlsTreeSm100Tuning), a DGX H100 pair in NCCL's
    default 128 KiB."""
    import sim.workloads.nccl as nccl
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    seen = []
    real = nccl.schedule

    def spy(*a, **kw):
        seen.append((kw.get("nvls_chunk_bytes"), kw.get("nvls_tree_max_chunk_bytes")))
        return real(*a, **kw)

    monkeypatch.setattr(nccl, "schedule", spy)
    for hw, want in (("gb300-cx8", (256 << 10, 256 << 10)), ("h100-cx7", (128 << 10, 128 << 10))):
        node = PRESETS[hw]
        params = resolve_params(collective_params(), {
            "nodes": 2, "gpus_per_node": node.gpus_per_node, "hw": hw,
            "link_gbps": node.nic_gbps})
        run_size("allreduce", 1 << 20, "rail", params, algorithm="nvls_tree",
                 protocol="simple", inplace=False)
        assert seen[-1] == want, hw


def test_the_reference_lists_every_preset_with_its_fabric_defaults():
    """docs/reference/collective.md's hw row names every preset and the keys it sets."""
    import pathlib

    text = (pathlib.Path(__file__).parent.parent / "docs" / "reference" /
            "collective.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| `hw` |"))
    for name, hw in PRESETS.items():
        d = hw.fabric_defaults()
        assert f"`{name}`" in row, name
        assert (f"{d['gpus_per_node']}, {d['link_gbps']:g}, {d['nvlink_gbps']:g}, "
                f"{d['pcie_gen']} for {name}") in row, name

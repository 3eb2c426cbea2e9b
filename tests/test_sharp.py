"""NVLS+SHARP (NCCL's CollNet on InfiniBand SHARP switches): the rail fabric's aggregation
nodes (sim.fabric.rail), the run (sim.workloads.collective), NCCL's cost model entries
(sim.workloads.tuner) and ``lossless collective`` with NCCL_COLLNET_ENABLE=1.

Expected values are worked out here from NCCL 2.30.7's formulas (src/graph/tuning.cc) and
from the schedule, not copied from output."""

from __future__ import annotations

import json

import pytest

from sim.fabric.rail import rail_optimized
from sim.nic.host import Host
from sim.workloads.collective import frames_bytes, run_schedule
from sim.workloads.nccl import schedule, sharp_aggregator, verify
from sim.workloads.tuner import PRESETS, Tuner

MIB = 1 << 20


# ------------------------------------------------------------------ the fabric
def test_rail_leaves_get_one_aggregator_each_at_their_members_rate():
    rf = rail_optimized(3, 4, spines=2, link_gbps=100, sharp=True)
    fab = rf.fabric
    assert len(rf.aggregators) == 4
    assert not set(rf.aggregators) & (set(rf.ranks) | set(rf.leaves) | set(rf.spines))
    for g, a in enumerate(rf.aggregators):
        host = fab.nodes[a]
        assert isinstance(host, Host) and host.port.peer.node_id == rf.leaves[g]
        assert host.port.rate_bps == 3 * 100 * 10**9  # 3 nodes x 100 Gb/s
        assert host.port.peer_port == 3 + 2  # after the nodes' and the spines' ports
        assert fab.names[a] == f"sharp{g}"
    plain = rail_optimized(3, 4, spines=2, link_gbps=100)
    assert plain.aggregators == () and len(fab.nodes) == len(plain.fabric.nodes) + 4
    # without sharp the fabric is what it was: same nodes, ports and routes
    for nid, node in plain.fabric.nodes.items():
        assert len(fab.nodes[nid].ports) == len(node.ports) + (nid in rf.leaves)


# ------------------------------------------------------------------ the run
@pytest.mark.parametrize("nodes, algo", [
    (2, "nvls"), (3, "nvls"), (2, "collnet_direct"), (3, "collnet_chain")])
def test_collnet_runs_on_the_leaves_and_halves_a_nics_bytes(nodes, algo):
    """The heads reach their rail's aggregator through their own NIC and leaf: nothing
    crosses a spine, every NIC sends and receives a GPUs-per-node-th of the buffer (the
    ring sends 2 (n - 1) / n of it), and the ranks end with the sum of all."""
    g, size = 4, 8 * MIB
    rf = rail_optimized(nodes, g, link_gbps=100, sharp=True)
    s = schedule("allreduce", nodes * g, size // 4, nchannels=8, algorithm=algo,
                 gpus_per_node=g, sharp=True)
    run = run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=g, aggregators=rf.aggregators)
    assert run.complete and run.counters["drops"] == 0
    order = sorted(range(len(s.transfers)), key=run.start_ps.__getitem__)
    verify(s, order)
    fab = rf.fabric
    for sp in rf.spines:
        assert all(p.tx_bytes == 0 for p in fab.nodes[sp].ports.values())
    want = sum(frames_bytes(b) for t in s.transfers if t.src == 0 and t.dst >= s.nranks
               and s.node_of(t.dst) != 0 for b in t.qp_bytes)
    assert size // g <= want < size // g * 1.1
    for h in rf.ranks:  # its data, and the link's few control frames
        assert want <= fab.nodes[h].port.tx_bytes < want * 1.01
    for a in rf.aggregators:  # it answers every node: nodes x what one head sent it
        assert nodes * want <= fab.nodes[a].port.tx_bytes < nodes * want * 1.01
    # one NIC's bytes bound the time from below
    assert run.time_ps >= want * 8 * 10**12 // (100 * 10**9)


def test_a_sharp_schedule_needs_the_aggregators():
    rf = rail_optimized(2, 2, link_gbps=100, sharp=True)
    s = schedule("allreduce", 4, 1 << 12, nchannels=2, algorithm="nvls", gpus_per_node=2,
                 sharp=True)
    assert sharp_aggregator(s, 1) == 3 * 4 + 1
    with pytest.raises(ValueError, match="SHARP aggregators"):
        run_schedule(s, rf.fabric, rf.ranks, gpus_per_node=2)


# ------------------------------------------------------------------ NCCL's cost model
def test_collnet_entries_as_ncclTopoTuneModel():
    """DGX H100, 8 x 400G, 2 nodes, collnet on: NVLS (+SHARP) busBw 8 x min(40 x 0.85 x 7/8
    x 2, 48) = 384, latency hwLat NVLink 25 + net 18; CollNetDirect 8 x 48 / factor 1 x
    0.85 = 326.4, latency 2 x (3.7 + 7 x 0.4) + 31; CollNetChain 8 x 48, 2 x 7 x 2.8 + 30;
    algBw: n / (2 (n - 1)) for NVLS, 0.5 for CollNet."""
    t = Tuner(PRESETS["h100-cx7"], 16, 2, collnet=True)
    for algo, bus, alg, lat in (("nvls", 384, 384 * 16 / 30, 43.0),
                                ("collnet_direct", 326.4, 163.2, 44.0),
                                ("collnet_chain", 384, 192, 69.2)):
        assert t.bus_bw_GBps("allreduce", algo, "simple") == pytest.approx(bus)
        assert t.algo_bw_GBps("allreduce", algo, "simple") == pytest.approx(alg)
        assert t.latency_us("allreduce", algo, "simple") == pytest.approx(lat)
    off = Tuner(PRESETS["h100-cx7"], 16, 2)
    for algo in ("nvls", "collnet_direct", "collnet_chain"):
        assert off.time_us("allreduce", algo, "simple", MIB) is None
        assert off.time_us("allgather", algo, "simple", MIB) is None
    assert t.time_us("allgather", "collnet_chain", "simple", MIB) is None  # NCCL's rule
    assert t.time_us("allreduce", "collnet_direct", "ll", MIB) is None  # Simple only
    one = Tuner(PRESETS["h100-cx7"], 8, 1, collnet=True)  # NCCL_COLLNET_NODE_THRESHOLD
    assert one.time_us("allreduce", "collnet_chain", "simple", MIB) is None


@pytest.mark.parametrize("nbytes, channels", [
    (64 << 30, 16), (40 * MIB, 16), (30 * MIB, 12), (29 * MIB, 11), (1 * MIB, 2),
    (512 << 10, 1)])
def test_collnet_direct_channels_as_topoGetAlgoInfo(nbytes, channels):
    """CollNet Direct drops channels while nBytes < nc x 640 threads x 8 heads x 512 (1
    thread threshold halved at 24, 12 ... channels): all 16 from 40 MiB (16 x 2.5 MiB)."""
    from sim.workloads.nccl import collnet_direct_channels

    assert collnet_direct_channels(nbytes, 16, 640, 8) == channels


@pytest.mark.parametrize("nodes, size, algo", [
    (2, 128 << 10, "tree"), (2, 256 << 10, "nvls"), (2, 16 * MIB, "nvls"),
    (2, 64 * MIB, "nvls_tree"), (4, 32 << 10, "tree"), (4, 128 << 10, "nvls"),
    (4, 1 << 30, "nvls"), (16, 1 << 10, "nvls")])
def test_collnet_picks_as_nccls_model(nodes, size, algo):
    """What NCCL's model picks with CollNet on, read off this model's times (pinned: a
    change of any entry moves them, and the entries themselves are checked against
    tuning.cc's formulas above): on 2 nodes Tree/LL to 128 KiB, NVLS+SHARP to 32 MiB, the
    NVLS tree (2 nodes: twice the inter bandwidth) above; on 4 nodes NVLS+SHARP from 64 KiB
    on, on 16 from the smallest (its latency has no log2(nodes) term)."""
    t = Tuner(PRESETS["h100-cx7"], 8 * nodes, nodes, collnet=True)
    assert t.choose("allreduce", size).algo == algo


def test_nvls_chunk_is_capped_below_150_gbps():
    """calcCollChunking: across nodes NVLS chunks are 32 KiB when NCCL's NVLS AllReduce
    algBw is below 150 GB/s: H100 with 200 Gb/s NICs (8 x 24 x 16/30 = 102.4), not 400."""
    import dataclasses

    hw = PRESETS["h100-cx7"]
    slow = Tuner(dataclasses.replace(hw, nic_gbps=200.0), 16, 2, collnet=True)
    assert slow.algo_bw_GBps("allreduce", "nvls", "simple") == pytest.approx(102.4)
    assert slow.nvls_max_chunk_bytes() == 32 << 10
    assert Tuner(hw, 16, 2, collnet=True).nvls_max_chunk_bytes() == 128 << 10
    assert Tuner(dataclasses.replace(hw, nic_gbps=200.0), 8, 1).nvls_max_chunk_bytes() \
        == 128 << 10  # one node: no cap


# ------------------------------------------------------------------ lossless collective
def test_collnet_enable_on_an_ib_rail_runs_nvls_sharp(tmp_path, capsys):
    from sim.cli import main

    out = tmp_path / "r.json"
    args = ["collective", "allreduce", "-b", "1M", "-e", "1M", "-p", "nodes=2",
            "-p", "gpus_per_node=8", "-p", "fabric=ib", "--json", str(out)]
    assert main([*args, "-p", "NCCL_COLLNET_ENABLE=1"]) == 0
    o = capsys.readouterr()
    assert "NCCL_COLLNET_ENABLE=1: AllReduce, AllGather and ReduceScatter across nodes may " \
        "run on the leaves' SHARP" in o.err
    row = json.loads(out.read_text())["results"][0]
    assert row["algorithm"] == "nvls" and row["wrong"] == 0
    assert row["tuner"]["nccl"] == "NVLS/Simple"
    sharp_us = row["time_us"]
    assert main(args) == 0  # without: no NVLS across nodes, slower at 1 MiB
    capsys.readouterr()
    row = json.loads(out.read_text())["results"][0]
    assert row["algorithm"] != "nvls" and row["time_us"] > sharp_us


@pytest.mark.parametrize("args, said", [
    (["-p", "NCCL_COLLNET_ENABLE=1"], "no SHARP on this fabric"),
    (["-p", "sharp=true"], "-p sharp=true: SHARP is InfiniBand's"),
    (["-p", "fabric=ib", "--algo", "nvls"], "--algo nvls: across nodes NCCL runs NVLS with "
                                            "CollNet"),
    (["-p", "fabric=ib", "--algo", "collnet_chain"], "--algo collnet_chain: CollNet runs "
                                                     "across nodes on SHARP switches"),
])
def test_sharp_misuse_is_one_line(args, said, capsys):
    from sim.cli import main

    rc = main(["collective", "allreduce", "-b", "64K", "-e", "64K", "-p", "nodes=2",
               "-p", "gpus_per_node=2", *args])
    o = capsys.readouterr()
    assert said in o.err
    if "NCCL_COLLNET_ENABLE=1" in args:  # said, and run without CollNet as NCCL would
        assert rc == 0 and "NVLS" not in o.out.split("tuner")[-1].split("picks")[0]
    else:
        assert rc == 2 and o.out == "" and o.err.count("\n") == 1


def test_trace_names_the_aggregators_and_their_hops_are_network(tmp_path, capsys):
    """The Chrome trace of an NVLS+SHARP AllReduce: each rail's aggregator is a process of
    its own, and only the hops to and from the aggregators cross the network."""
    from sim.cli import main

    out = tmp_path / "t.json"
    assert main(["collective", "allreduce", "-b", "256K", "-e", "256K", "-p", "nodes=2",
                 "-p", "gpus_per_node=2", "-p", "fabric=ib", "-p", "NCCL_COLLNET_ENABLE=1",
                 "--algo", "nvls", "--trace", str(out)]) == 0
    capsys.readouterr()
    ev = json.loads(out.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    n = 4  # ranks; 8 NVLS buffers after them, then the 2 aggregators
    assert names[3 * n] == "SHARP aggregator of rail 0" and len(names) == n + 2 * n + 2
    for e in ev:
        if e["ph"] == "X" and e["cat"] != "wait":
            peer = int(e["name"].split()[-1])
            assert (e["cat"] == "net") == (max(e["pid"], peer) >= 3 * n)


def test_sharp_on_another_fabric_kind_is_one_line(capsys):
    from sim.cli import main

    assert main(["collective", "allreduce", "-b", "64K", "-e", "64K", "--fabric", "star",
                 "-p", "fabric=ib", "-p", "sharp=true"]) == 2
    o = capsys.readouterr()
    assert o.err.count("\n") == 1
    assert "SHARP is modelled on --fabric rail and superpod" in o.err


@pytest.mark.parametrize("hw, extra, picks", [
    ("h100-cx7", ["-p", "NCCL_NVLS_ENABLE=0"], {4 * MIB: "collnet_direct",
                                                 32 * MIB: "collnet_chain"}),
    ("a100-cx6", [], {4 * MIB: "collnet_direct"}),
    ("a100-cx6", ["-p", "nvlink=false"], {4 * MIB: "collnet_chain"}),
])
def test_without_nvls_collnet_direct_and_chain_run(tmp_path, capsys, hw, extra, picks):
    """Without NVLS (NCCL_NVLS_ENABLE=0, or A100s) NCCL's CollNet runs CollNet Direct or
    Chain, and the simulator runs NCCL's pick; the results are right.  A DGX A100 has an
    NVSwitch, so Direct is NCCL's pick there; without NVLink (no NVSwitch) only Chain."""
    from sim.cli import main

    out = tmp_path / "r.json"
    sizes = sorted(picks)
    assert main(["collective", "allreduce", "-b", str(sizes[0]), "-e", str(sizes[-1]),
                 "-f", "8", "-p", "nodes=2", "-p", f"hw={hw}", "-p", "fabric=ib",
                 "-p", "NCCL_COLLNET_ENABLE=1", *extra, "--json", str(out)]) == 0
    capsys.readouterr()
    rows = {r["size_bytes"]: r for r in json.loads(out.read_text())["results"]}
    for size, algo in picks.items():
        r = rows[size]
        assert r["algorithm"] == algo and r["wrong"] == 0
        assert r["tuner"]["nccl"] == {"collnet_direct": "CollNetDirect/Simple",
                                      "collnet_chain": "CollNetChain/Simple"}[algo]


def test_direct_and_chain_layouts():
    """Direct: each channel's loop has a chunk per head at (b x heads + k) x chunk, every
    GPU of a node sends the head its copy; Chain: a chunk per channel at b x chunk, head
    b mod GPUs, the chain reducing up to it one GPU after another."""
    g, nc = 4, 8
    d = schedule("allreduce", 2 * g, (16 * MIB) // 4, nchannels=nc,
                 algorithm="collnet_direct", gpus_per_node=g, sharp=True)
    c = schedule("allreduce", 2 * g, (16 * MIB) // 4, nchannels=nc,
                 algorithm="collnet_chain", gpus_per_node=g, sharp=True)
    for s in (d, c):
        verify(s)
        assert s.buffers == 0 and s.aggregators == g
    agg0 = sharp_aggregator(d, 0)
    for t in d.transfers:
        if t.dst >= agg0:
            k = t.src % g
            assert t.offset_bytes == t.loop * nc * g * d.chunk_bytes + (
                t.channel * g + k) * d.chunk_bytes
    ins = [t for t in d.transfers if t.dst < d.nranks and t.reduce]
    assert all(t.src // g == t.dst // g for t in ins)  # inside the node only
    for t in c.transfers:
        if t.dst >= agg0:
            assert t.src % g == t.channel % g
            assert t.offset_bytes == t.loop * nc * c.chunk_bytes + t.channel * c.chunk_bytes
    ups = [t for t in c.transfers if t.reduce and t.dst < c.nranks and t.loop == 0
           and t.channel == 1 and t.src < g]
    assert [(t.src, t.dst) for t in ups] == [(0, 3), (3, 2), (2, 1)]  # head 1: 1, 2, 3, 0


def test_collnet_allgather_and_reducescatter_entries():
    """AllGather/ReduceScatter with CollNet (tuning.cc): CollNet Direct's busBw is ppn x
    min(bwIntra, 0.9 x bwInter) = 8 x min(48, 43.2), NVLS's 8 channels x 40 x 0.85 x 7/8 x
    7/8, neither converted to an algBw (worked from tuning.cc); the picks that follow, read
    off this model and pinned: Direct on 2 DGX H100 nodes from 1 MiB to 16 MiB, the ring at
    128 MiB, NVLS+SHARP for small calls from 4 nodes."""
    t = Tuner(PRESETS["h100-cx7"], 16, 2, collnet=True)
    for coll in ("allgather", "reducescatter"):
        assert t.algo_bw_GBps(coll, "collnet_direct", "simple") == pytest.approx(345.6)
        assert t.algo_bw_GBps(coll, "nvls", "simple") == pytest.approx(208.25)
        for size, algo in ((MIB, "collnet_direct"), (16 * MIB, "collnet_direct"),
                           (128 * MIB, "ring")):
            assert t.choose(coll, size).nccl_algo == algo
        assert Tuner(PRESETS["h100-cx7"], 32, 4, collnet=True).choose(
            coll, 64 << 10).nccl_algo == "nvls"
    assert Tuner(PRESETS["h100-cx7"], 16, 2).time_us("allgather", "collnet_direct",
                                                     "simple", MIB) is None


@pytest.mark.parametrize("coll", ["allgather", "reducescatter"])
def test_allgather_and_reducescatter_run_on_sharp(tmp_path, capsys, coll):
    from sim.cli import main

    out = tmp_path / "r.json"
    assert main(["collective", coll, "-b", "1M", "-e", "1M", "-p", "nodes=2",
                 "-p", "gpus_per_node=8", "-p", "fabric=ib", "-p", "NCCL_COLLNET_ENABLE=1",
                 "--json", str(out)]) == 0
    capsys.readouterr()
    [r] = json.loads(out.read_text())["results"]
    assert r["algorithm"] == "collnet_direct" and r["wrong"] == 0
    assert r["tuner"]["nccl"] == "CollNetDirect/Simple"
    for algo in ("nvls", "collnet_direct"):  # both run when asked for
        assert main(["collective", coll, "-b", "4M", "-e", "4M", "-p", "nodes=2",
                     "-p", "gpus_per_node=4", "-p", "fabric=ib", "-p", "NCCL_COLLNET_ENABLE=1",
                     "--algo", algo, "--proto", "simple", "--json", str(out)]) == 0
        capsys.readouterr()
        [r] = json.loads(out.read_text())["results"]
        assert r["algorithm"] == algo and r["wrong"] == 0



@pytest.mark.parametrize("algo", ["nvls", "collnet_direct", "collnet_chain"])
def test_a_superpod_of_two_sus_reduces_in_two_levels(algo):
    """On 2 SUs a rail's SHARP tree is its two leaves and a root on a spine: every leaf
    aggregator sends its nodes' sum up once and gets the total back once (a rail's share
    of the buffer each way), the root answers each leaf, and the result is right."""
    from sim.fabric.fattree import superpod

    sp = superpod(2, nodes=34, sharp=True)
    assert len(sp.aggregators) == 2 * 8 + 8 and sp.nodes_per_leaf == 32
    n, size = 34 * 8, 1 * MIB
    s = schedule("allreduce", n, size // 4, algorithm=algo, gpus_per_node=8, sharp=True,
                 nchannels=16, sharp_nodes_per_leaf=sp.nodes_per_leaf)
    assert s.aggregators == 24
    run = run_schedule(s, sp.fabric, sp.ranks, gpus_per_node=8, aggregators=sp.aggregators)
    verify(s, sorted(range(len(s.transfers)), key=run.start_ps.__getitem__))
    leaf0, root = 3 * n, 3 * n + 16  # rail 0's aggregator under SU 0's leaf, its root
    up = sum(t.nbytes for t in s.transfers if t.src == leaf0 and t.dst == root)
    down = sum(t.nbytes for t in s.transfers if t.src == root and t.dst == leaf0)
    head = sum(t.nbytes for t in s.transfers if t.src == 0 and t.dst == leaf0)
    assert up == down == head > 0  # rail 0's share, once each way
    names = sp.fabric.names
    assert names[sp.aggregators[0]] == "sharp0.0" and names[sp.aggregators[16]] == "sharp0"
    from sim.workloads.nccl import rank_label
    assert rank_label(root, n, 8, s.aggregators) == "SHARP aggregator of rail 0 (root)"
    assert rank_label(leaf0 + 8, n, 8, s.aggregators) == "SHARP aggregator of rail 0 (leaf 1)"
    assert rank_label(leaf0, n, 8) == "SHARP aggregator of rail 0"
    steps = {(t.src >= 3 * n, t.dst >= 3 * n, t.src == root or t.dst == root): t.step
             for t in s.transfers if t.loop == 0 and t.channel == 0 and max(t.src, t.dst)
             in (leaf0, root)}  # a chunk's hops in order: up, to the root, back, down
    assert steps[(True, True, True)] > steps[(False, True, False)]
    assert steps[(True, False, False)] > steps[(True, True, True)]


def test_collnet_enable_on_a_superpod(tmp_path, capsys):
    from sim.cli import main

    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--fabric", "superpod",
                 "-p", "sus=2", "-p", "superpod_nodes=34", "-p", "fabric=ib",
                 "-p", "NCCL_COLLNET_ENABLE=1", "--json", str(out)]) == 0
    capsys.readouterr()
    [r] = json.loads(out.read_text())["results"]
    assert r["algorithm"] == "nvls" and r["wrong"] == 0 and r["tuner"]["nccl"] == "NVLS/Simple"



SHARP_FILE = """\
[run]
duration_ms = 2
[topology]
kind = "rail"
nodes = 2
gpus_per_node = 4
spines = 2
sharp = true
[links]
link_gbps = 400.0
cable_m = 100
fabric = "ib"
[switch]
mtu_bytes = 4122
[capture]
enabled = false
"""


@pytest.mark.parametrize("coll, size, algo, proto", [
    ("allreduce", "4M", "auto", "auto"), ("allgather", "1M", "collnet_direct", "simple")])
def test_a_fabric_file_with_sharp_equals_lossless_collective(tmp_path, capsys, coll, size,
                                                             algo, proto):
    """[topology] sharp = true on an InfiniBand rail file: a [[collective]] entry with
    collnet = true runs what `lossless collective --fabric FILE` runs with
    NCCL_COLLNET_ENABLE=1 (NCCL's pick, or the algorithm named), to the picosecond."""
    from sim.cli import main

    f = tmp_path / "s.toml"
    f.write_text(SHARP_FILE + f"""[[collective]]
collective = "{coll}"
size = "{size}"
algo = "{algo}"
proto = "{proto}"
nccl_host = true
collnet = true
""")
    assert main(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"]) == 0
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    [c] = doc["collectives"]
    assert doc["params"]["topology"]["sharp"] and doc["params"]["collective"][0]["collnet"]
    out = tmp_path / "r.json"
    assert main(["collective", coll, "--fabric", str(f), "-b", size, "-e", size,
                 "--algo", algo, "--proto", proto,
                 "-p", "NCCL_COLLNET_ENABLE=1", "--json", str(out)]) == 0
    capsys.readouterr()
    [r] = json.loads(out.read_text())["results"]
    assert r["algorithm"] in ("nvls", "collnet_direct") and c["algo"] == r["algorithm"]
    assert c["wrong"] == 0 and c["time_us"] == pytest.approx(r["time_us"], rel=1e-9)


@pytest.mark.parametrize("change, said", [
    (("fabric = \"ib\"\n", ""), "[topology] sharp: SHARP is InfiniBand's"),
    (("sharp = true\n", ""), "'collnet': CollNet runs on SHARP switches"),
    (("kind = \"rail\"", "kind = \"leaf_spine\"\nleaves = 2\nhosts_per_leaf = 2"),
     "sharp"),
])
def test_a_fabric_file_refuses_sharp_where_it_cannot_run(tmp_path, capsys, change, said):
    from sim.cli import main

    text = SHARP_FILE.replace(*change)
    if "leaf_spine" in text:
        text = text.replace("nodes = 2\ngpus_per_node = 4\n", "")
    f = tmp_path / "s.toml"
    f.write_text(text + '[[collective]]\ncollective = "allreduce"\ncollnet = true\n')
    assert main(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


@pytest.mark.parametrize("extra", ['hosts = [6, 7, 8, 9]', 'gpus_per_node = 2'])
def test_a_collnet_entry_keeps_the_fabrics_ranks_and_nodes(tmp_path, capsys, extra):
    """SHARP's trees are built on the fabric's rails: an entry on other hosts, or with its
    ranks grouped into other nodes, is refused in one line."""
    from sim.cli import main

    f = tmp_path / "s.toml"
    f.write_text(SHARP_FILE + f'[[collective]]\ncollective = "allreduce"\ncollnet = true\n'
                              f'{extra}\n')
    assert main(["replay", str(f), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "CollNet runs on the fabric's own ranks and nodes" in err

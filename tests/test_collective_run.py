"""NCCL schedules driven through the simulated fabric: the runner
(sim.workloads.collective), posted flows of sim.nic.host, rail_optimized (sim.fabric.rail)
and the ``lossless collective`` command.

Bounds are computed here from the schedule (bytes each rank's NIC must send, at the link
rate), not copied from output."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.fabric.rail import collective_star, rail_optimized
from sim.workloads.collective import frames_bytes, run_schedule
from sim.workloads.nccl import finish_times, schedule
from tests.helpers import posted_pair, run_cli

GBPS = 100
PROP_PS = 500_000


def _ser_ps(nbytes: int, gbps: float) -> int:
    return -(-nbytes * 8 * 1000 // int(gbps))  # bytes at gbps Gb/s, in ps


def _nic_bytes(sch, rank: int) -> int:
    """Frame bytes rank's NIC must send for the schedule (all its QP pieces)."""
    return sum(frames_bytes(b) for t in sch.transfers if t.src == rank for b in t.qp_bytes)


def _run_star(sch, **kw):
    f = collective_star(sch.nranks, link_gbps=GBPS, prop_ps=PROP_PS, **kw)
    return f, run_schedule(sch, f.fabric, f.ranks)


# ------------------------------------------------------------------ posted flows (host hook)
def test_posted_flow_sends_only_what_is_posted_in_order():
    _f, fab, a, b, _flow = posted_pair(GBPS)
    seen = []
    b.on_data = lambda fid, got, now: seen.append((fid, got))
    fab.run(10_000_000)
    assert a.sent_bytes[7] == 0 and not seen  # idle until something is posted
    a.post(7, 2000)
    a.post(7, 100)
    fab.run(20_000_000)
    assert [g for _, g in seen] == [1082, 2000, 2100]  # frames cut at message ends
    a.post(7, 50)  # an idle flow wakes on post
    fab.run(30_000_000)
    assert b.rx_bytes[7] == 2150 and a.sent_packets[7] == 4
    with pytest.raises(ValueError):
        a.post(7, 0)


# ------------------------------------------------------------------ runner on a star
def test_ring_allreduce_near_the_bound_on_a_nonblocking_star():
    n, size = 4, 8 * 2**20
    sch = schedule("allreduce", n, size // 4, "float", nchannels=1)
    _, run = _run_star(sch)
    # Each rank's NIC sends 2(n-1)/n x S in 1 MiB slices (+ headers) at C; the last frame then
    # crosses the switch (one more frame time) and two propagation delays.
    per_rank = max(_nic_bytes(sch, r) for r in range(n))
    assert per_rank == 2 * (n - 1) * (size // n // 2**20) * frames_bytes(2**20)
    bound = _ser_ps(per_rank, GBPS) + 2 * PROP_PS + _ser_ps(frames_bytes(1024), GBPS)
    assert bound <= run.time_ps <= 1.05 * bound
    lower = finish_times(sch, lambda t: _ser_ps(frames_bytes(t.wire_bytes), GBPS) + 2 * PROP_PS)
    assert max(lower) <= run.time_ps


def test_every_byte_delivered_and_dependencies_respected():
    sch = schedule("allreduce", 4, 2**20, "float", nchannels=2, qps_per_connection=2)
    f, run = _run_star(sch)
    assert run.complete
    fab = f.fabric
    for fid, (src, dst, _ch, _q, sport) in run.flows.items():
        sh, dh = fab.nodes[f.ranks[src]], fab.nodes[f.ranks[dst]]
        assert sh.sent_bytes[fid] == dh.rx_bytes.get(fid, 0) == run.posted_bytes[fid]
        assert sport >= 0xC000
    assert sum(run.posted_bytes.values()) == sum(
        frames_bytes(b) for t in sch.transfers for b in t.qp_bytes)
    for t in sch.transfers:
        assert run.start_ps[t.id] < run.finish_ps[t.id]
        for d in t.depends_on:
            assert run.finish_ps[d] <= run.start_ps[t.id]
    assert run.counters["drops"] == 0


def test_at_most_the_in_flight_limit_per_connection_and_sends_in_order():
    sch = schedule("allreduce", 3, 3 * 2**20, "float", nchannels=1)  # 6 slices per connection
    _, run = _run_star(sch)
    conns: dict = {}
    for t in sch.transfers:
        conns.setdefault((t.src, t.dst, t.channel), []).append(t)
    for ts in conns.values():
        ts.sort(key=lambda t: t.seq)
        starts = [run.start_ps[t.id] for t in ts]
        assert starts == sorted(starts)
        for t in ts:
            s = run.start_ps[t.id]
            busy = sum(1 for u in ts if run.start_ps[u.id] <= s < run.finish_ps[u.id])
            assert busy <= sch.max_inflight
        assert len(ts) > sch.max_inflight  # the limit was reachable


def test_a_degraded_link_slows_the_whole_ring():
    sch = schedule("allreduce", 4, 2**20, "float", nchannels=1)
    _, base = _run_star(sch)
    _, slow = _run_star(sch, host_gbps={2: GBPS / 2})
    # every chunk crosses rank 2's link, so the ring runs at about half speed
    assert slow.time_ps > 1.8 * base.time_ps
    assert slow.counters["pfc_pauses"] > 0  # the switch holds back the fast senders


@settings(max_examples=15)
@given(coll=st.sampled_from(["allreduce", "allgather", "reducescatter", "alltoall",
                             "sendrecv", "broadcast"]),
       n=st.integers(2, 4), channels=st.integers(1, 2), qps=st.integers(1, 2),
       kib=st.integers(1, 96), proto=st.sampled_from(["simple", "ll", "ll128"]))
def test_any_collective_completes_conserving_bytes(coll, n, channels, qps, kib, proto):
    sch = schedule(coll, n, kib * 256, "float", nchannels=channels, qps_per_connection=qps,
                   protocol=proto)
    f, run = _run_star(sch)
    assert run.complete
    for fid, (_src, dst, *_rest) in run.flows.items():
        assert f.fabric.nodes[f.ranks[dst]].rx_bytes.get(fid, 0) == run.posted_bytes[fid]
    for t in sch.transfers:
        assert all(run.finish_ps[d] <= run.start_ps[t.id] for d in t.depends_on)
    lower = finish_times(sch, lambda t: _ser_ps(frames_bytes(max(t.qp_bytes)), GBPS))
    assert not sch.transfers or max(lower) <= run.time_ps


# ------------------------------------------------------------------ rail_optimized
def test_rail_optimized_puts_gpu_i_on_leaf_i_node_major():
    rf = rail_optimized(3, 4, spines=2, link_gbps=100)
    fab = rf.fabric
    assert len(rf.ranks) == 12 and len(rf.leaves) == 4 and len(rf.spines) == 2
    for rank, h in enumerate(rf.ranks):
        node, gpu = divmod(rank, 4)
        leaf = fab.nodes[h].port.peer
        assert leaf.node_id == rf.leaves[gpu]
        assert fab.nodes[h].port.peer_port == node
    for leaf in rf.leaves:  # every leaf reaches every spine
        peers = {p.peer.node_id for p in fab.nodes[leaf].ports.values()}
        assert set(rf.spines) <= peers


def test_rail_optimized_validates():
    with pytest.raises(ValueError, match="radix"):
        rail_optimized(40, 8, spines=30, radix=64)
    for bad in ({"nodes": 0}, {"nodes": 1, "gpus_per_node": 1}, {"nodes": 2, "spines": 0},
                {"nodes": 2, "link_gbps": float("nan")}):
        with pytest.raises(ValueError):
            rail_optimized(**bad)


def test_ring_allreduce_runs_on_a_rail_fabric():
    rf = rail_optimized(2, 4, link_gbps=GBPS)
    sch = schedule("allreduce", 8, 2**20 // 4, "float", nchannels=2, gpus_per_node=4)
    run = run_schedule(sch, rf.fabric, rf.ranks)
    assert run.complete and run.counters["drops"] == 0
    per_rank = max(_nic_bytes(sch, r) for r in range(8))
    assert run.time_ps >= _ser_ps(per_rank, GBPS)


def test_a_second_iteration_reuses_the_qps_and_takes_as_long():
    sch = schedule("allreduce", 4, 2**18, "float", nchannels=1, qps_per_connection=2)
    f = collective_star(4, link_gbps=GBPS, prop_ps=PROP_PS)
    first = run_schedule(sch, f.fabric, f.ranks)
    second = run_schedule(sch, f.fabric, f.ranks)
    assert second.first_start_ps >= first.last_finish_ps
    assert second.flows == first.flows and len(f.fabric.flows) == len(first.flows)
    assert abs(second.time_ps - first.time_ps) <= 0.01 * first.time_ps
    for fid, (_s, dst, *_r) in second.flows.items():
        assert f.fabric.nodes[f.ranks[dst]].rx_bytes[fid] == 2 * second.posted_bytes[fid]


# ------------------------------------------------------------------ lossless collective
def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of an in-process ``lossless`` call (tests.helpers)."""
    return run_cli(argv)


STAR4 = ["--fabric", "star", "-p", "nodes=4", "-p", "gpus_per_node=1", "-p", "link_gbps=100"]


def test_cli_prints_the_nccl_tests_table_with_nccl_tests_formulas(tmp_path, capsys):
    import json

    out_json = tmp_path / "r.json"
    rc, out, err = _cli(["collective", "allreduce", "-b", "256K", "-e", "512K", *STAR4,
                         "--channels", "1", "-n", "2", "--json", str(out_json)], capsys)
    assert rc == 0, err
    rows = [ln.split() for ln in out.splitlines() if ln and not ln.startswith("#")]
    assert [r[0] for r in rows] == ["262144", "524288"]
    doc = json.loads(out_json.read_text())
    for r, res in zip(rows, doc["results"], strict=True):
        size, count, dtype, redop, root, time_us, alg, bus, wrong = r[:9]
        assert (dtype, redop, root, wrong) == ("float", "sum", "-1", "0")
        # the in-place half: its own iterations on the same fabric, the same formulas
        ip_us, ip_alg, ip_bus, ip_wrong = r[9:]
        ip = res["inplace"]
        assert ip_wrong == "0" and ip["time_ps"] == sum(ip["iteration_times_ps"]) // 2
        assert float(ip_us) == pytest.approx(ip["time_ps"] / 1e6, abs=0.01)
        # (both printed to 0.01: 0.005 x 1.5 + 0.005 apart at most)
        assert float(ip_bus) == pytest.approx(float(ip_alg) * 2 * 3 / 4, abs=0.0125)
        assert int(count) == int(size) // 4
        assert res["time_ps"] == sum(res["iteration_times_ps"]) // 2  # -n 2: the mean
        t_s = res["time_ps"] / 1e12
        assert float(alg) == pytest.approx(int(size) / t_s / 1e9, abs=0.01)
        assert float(bus) == pytest.approx(float(alg) * 2 * 3 / 4, abs=0.0125)
        assert float(time_us) == pytest.approx(res["time_ps"] / 1e6, abs=0.01)
        assert set(res["counters"]) == {"pfc_pauses", "ce_marks", "cnps", "drops",
                                        "max_queue_bytes", "retransmitted_frames",
                                        "retransmitted_bytes", "timeouts", "naks_sent",
                                        "duplicates", "out_of_sequence", "qp_errors"}
    assert "pfc_pauses" in out and "# Avg bus bandwidth" in out


@pytest.mark.parametrize("argv", [
    ["-p", "nodes=0"], ["-p", "link_gbps=nan"], ["-p", "bogus=1"], ["-b", "1M", "-e", "512K"],
    ["-b", "1.5"], ["--channels", "0"], ["-p", "nodes=1", "-p", "nodes=2"], ["-o", "xor"],
    ["--json", "/nonexistent/dir/r.json"], ["-r", "99"],
])
def test_cli_usage_errors_are_one_line_exit_2(argv, capsys):
    rc, _out, err = _cli(["collective", "broadcast", "-b", "64K", "-e", "64K", *STAR4, *argv],
                        capsys)
    assert rc == 2 and len(err.splitlines()) == 1 and err.startswith("lossless: "), err
    assert "Traceback" not in err


def test_cli_unknown_collective_exit_2(capsys):
    rc, _, err = _cli(["collective", "allsum"], capsys)
    assert rc == 2 and err.startswith("lossless: COLLECTIVE") and len(err.splitlines()) == 1


def test_cli_drops_without_pfc_leave_the_size_incomplete_exit_1(capsys):
    # one spine: the cross-rail traffic of 2 nodes x 4 GPUs shares each leaf's one uplink
    # (without NVLink and PXN every send leaves through its own NIC and crosses rails)
    rc, out, err = _cli(["collective", "alltoall", "-b", "1M", "-e", "1M", "-p", "spines=1",
                         "-p", "nvlink=false",
                         "-p", "link_gbps=100", "-p", "pfc=false", "-p", "buffer_kb=200",
                         "-p", "xoff_kb=20", "-p", "limit_ms=1"], capsys)
    assert rc == 1, err
    assert "incomplete" in out
    drops = [ln.split() for ln in out.splitlines() if ln.startswith("#    1048576")]
    assert int(drops[-1][6]) > 0


def test_dcqcn_and_ecn_act_on_the_qps():
    from sim.net.switch import EcnConfig

    sch = schedule("allreduce", 4, 2**20, "float", nchannels=1)
    ecn = EcnConfig(kmin_bytes=5_000, kmax_bytes=200_000, pmax=0.01)
    f = collective_star(4, link_gbps=GBPS, prop_ps=PROP_PS, host_gbps={2: GBPS / 2}, ecn=ecn,
                        host_kw={"cc": "dcqcn"})
    run = run_schedule(sch, f.fabric, f.ranks)
    assert run.complete and run.counters["ce_marks"] > 0 and run.counters["cnps"] > 0
    # the CNPs reach the QPs' DCQCN state: some QP was slowed below the line rate
    rates = [f.fabric.nodes[f.ranks[src]].cc[fid].target_rate_bps
             for fid, (src, *_r) in run.flows.items()]
    assert min(rates) < GBPS * 10**9


# ------------------------------------------------------------------ event-driven jobs
def test_two_jobs_share_hosts_in_one_engine_run():
    """CollectiveJob: two schedules on the same hosts, started inside one engine run (as a
    scenario does), each completes with its own deliveries; on_done fires once per job."""
    from sim.workloads.collective import CollectiveJob

    f = collective_star(4, link_gbps=GBPS, prop_ps=PROP_PS)
    a = schedule("allreduce", 4, 2**18, "float", nchannels=1)
    b = schedule("allgather", 4, 2**16, "float", nchannels=1, qp_base=1000)
    done: list = []
    ja = CollectiveJob(a, f.fabric, f.ranks, on_done=done.append)
    jb = CollectiveJob(b, f.fabric, f.ranks, on_done=done.append)
    f.fabric.engine.call_in(0, ja.start)
    f.fabric.engine.call_in(1_000_000, jb.start)
    f.fabric.run(10**10)
    assert ja.done and jb.done and done == sorted(done, key=lambda j: j.run.last_finish_ps)
    assert len(done) == 2 and {id(j) for j in done} == {id(ja), id(jb)}
    assert jb.run.first_start_ps == 1_000_000
    with pytest.raises(RuntimeError):
        ja.start()


def test_default_channels_one_per_nic_of_a_node(tmp_path):
    """No --channels, the network alone: one ring per NIC of a node (rail 2 x 4: 4
    channels, every NIC carries one), 2 with one GPU per node (star); a [[collective]] entry
    without channels agrees.  With NCCL's host side (the default) the channels are NCCL's
    for the node (-p hw), as its tuner has them."""
    import json

    from sim.workloads.nccl import default_channels
    from sim.workloads.tuner import PRESETS, Tuner

    assert [default_channels(2, 4), default_channels(2, 8), default_channels(1, 8),
            default_channels(8, 1)] == [4, 8, 2, 2]
    net = ["--algo", "ring", "--proto", "simple", "-p", "nccl_host=false"]
    for extra, want in (([], 4), (["--channels", "3"], 3), (STAR4, 2)):
        out = tmp_path / f"r{want}.json"
        rc, _, err = _cli(["collective", "allreduce", "-b", "1M", "-e", "1M", *extra, *net,
                           "--json", str(out)], None)
        assert rc == 0, err
        doc = json.loads(out.read_text())
        assert doc["channels"] == want and doc["results"][0]["nchannels"] == want
    out = tmp_path / "nccl.json"
    rc, _, err = _cli(["collective", "allreduce", "-b", "64M", "-e", "64M", "--algo", "ring",
                       "--json", str(out)], None)
    assert rc == 0, err
    doc = json.loads(out.read_text())
    row = doc["results"][0]
    assert row["nchannels"] == Tuner(PRESETS["h100-cx7"], 8, 2).channels == 16
    assert doc["channels"] is None  # NCCL's per size (it said 4, one per NIC)


def test_a_transfer_on_an_undeclared_connection_is_refused_before_the_fabric_is_touched():
    import dataclasses

    from sim.workloads.collective import CollectiveJob

    sch = schedule("allreduce", 4, 2**16, "float", nchannels=1)
    t = sch.transfers[0]
    key = (t.src, t.dst, t.channel)
    bad = dataclasses.replace(sch, connections={k: v for k, v in sch.connections.items()
                                                if k != key})
    f = collective_star(4, link_gbps=GBPS, prop_ps=PROP_PS)
    before = dict(f.fabric.flows)
    with pytest.raises(ValueError, match=re.escape(f"transfer {t.id} is on connection {key}")):
        CollectiveJob(bad, f.fabric, f.ranks)
    assert f.fabric.flows == before  # no QP was made for the refused schedule


def test_a_hand_made_schedule_sends_each_connection_in_seq_order():
    import dataclasses

    from sim.workloads.collective import CollectiveJob

    sch = schedule("allreduce", 3, 3 * 2**20, "float", nchannels=1)
    t0 = sch.transfers[0]
    key = (t0.src, t0.dst, t0.channel)
    mine = [t for t in sch.transfers if (t.src, t.dst, t.channel) == key]
    assert len(mine) > 2
    # the same transfers, the connection's seq numbers reversed against their ids
    flip = {t.id: len(mine) - 1 - i for i, t in enumerate(mine)}
    ts = [dataclasses.replace(t, seq=flip[t.id]) if t.id in flip else t
          for t in sch.transfers]
    f = collective_star(3, link_gbps=GBPS, prop_ps=PROP_PS)
    job = CollectiveJob(dataclasses.replace(sch, transfers=ts), f.fabric, f.ranks)
    assert [t.id for t in job.conns[key].sends] == [t.id for t in reversed(mine)]


@pytest.mark.parametrize("times", [[None], [None, None], [3, None, 1], [None, 5, 2], [0, 7], [4],
                                   [None, 0], [2, 2, None]])
def test_first_start_and_last_finish_skip_the_unset(times) -> None:
    """CollectiveRun.first_start_ps / last_finish_ps: min / max of the times that are set
    (None: not started or not finished), ValueError when none is."""
    from sim.workloads.collective import _extreme

    got = [t for t in times if t is not None]
    for pick in (min, max):
        if got:
            assert _extreme(pick, times) == pick(got)
        else:
            with pytest.raises(ValueError):
                _extreme(pick, times)


def test_p2p_on_one_node_with_nccls_host_side(tmp_path):
    """AllToAll on one DGX H100 node with NCCL's host side: 32 p2p channels, 4 per peer,
    512 KiB chunks, two SM copies per byte at NCCL's NVLink bandwidth (18 x 20.6 GB/s) shared
    by the 28 channels a rank sends on; so a 32 MiB call (1 MiB per channel: 2 chunks) takes
    at least the launch and 3 chunk copies (2 sent, the last one copied out), and is slower
    than the network alone."""
    import json

    from sim.workloads.tuner import BASE_LAT_US

    out = tmp_path / "r.json"
    rc, _, err = _cli(["collective", "alltoall", "-b", "32M", "-e", "32M", "-p", "nodes=1",
                       "-p", "gpus_per_node=8", "-p", "hw=h100-cx7", "-d", "double",
                       "--json", str(out)], None)
    assert rc == 0, err
    row = json.loads(out.read_text())["results"][0]
    assert row["nchannels"] == 32 and row["wrong"] == 0
    rate = 18 * 20.6e9 / 28
    floor_us = BASE_LAT_US["ring"][2] + 3 * (512 << 10) / rate * 1e6
    assert floor_us <= row["time_us"] <= 1.2 * floor_us
    rc, _, err = _cli(["collective", "alltoall", "-b", "32M", "-e", "32M", "-p", "nodes=1",
                       "-p", "gpus_per_node=8", "-p", "nccl_host=false", "-d", "double",
                       "--json", str(out)], None)
    assert rc == 0, err
    assert json.loads(out.read_text())["results"][0]["time_us"] < row["time_us"] / 1.5


def test_host_side_applies_and_nvls_needs_nvlink(capsys):
    """NCCL's host side: every collective with -p nccl_host, point-to-point sends only on one
    node of several GPUs on NVLink; --algo nvls with NVLink off is one line, exit 2, before
    the table (it failed size by size)."""
    from sim.cli import main
    from sim.scenarios.collective import host_side_applies

    on, off = {"nccl_host": True, "nvlink": True}, {"nccl_host": False, "nvlink": True}
    assert host_side_applies("allreduce", 2, 4, on) and not host_side_applies(
        "allreduce", 2, 4, off)
    assert host_side_applies("alltoall", 1, 8, on)
    assert not host_side_applies("alltoall", 2, 8, on)
    assert not host_side_applies("alltoall", 1, 8, {"nccl_host": True, "nvlink": False})
    for extra in ([], ["--proto", "simple"]):
        assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--algo", "nvls",
                     *extra, "-p", "nodes=1", "-p", "nvlink=false"]) == 2
        o = capsys.readouterr()
        assert o.out == "" and o.err.count("\n") == 1
        assert "--algo nvls: NVLink SHARP needs NVLink between the GPUs of a node " \
               "(-p nvlink=false)" in o.err
    # an AllToAll across nodes runs the network alone, and its first line says so
    alone = "the network alone (NCCL's host side is modelled for point-to-point sends"
    for args, said in ((["-p", "nodes=2", "-p", "gpus_per_node=2"], alone),
                       (["-p", "nodes=1", "-p", "gpus_per_node=4"], "NCCL host side h100-cx7"),
                       (["-p", "nodes=2", "-p", "gpus_per_node=2", "-p", "nccl_host=false"],
                        None)):
        assert main(["collective", "alltoall", "-b", "64K", "-e", "64K", *args]) == 0
        first = capsys.readouterr().out.splitlines()[0]
        if said:
            assert said in first
        else:
            assert "alone" not in first and "host side" not in first


def test_the_first_line_names_only_the_nccl_variables_read(monkeypatch, capsys):
    """With --algo and --proto both given the tuner is off: of NCCL's variables only the QPs
    and CollNet are read, and the first line names only what was read (it named NCCL_ALGO
    too)."""
    from sim.cli import main

    monkeypatch.setenv("NCCL_ALGO", "Tree")
    monkeypatch.setenv("NCCL_COLLNET_ENABLE", "1")
    monkeypatch.setenv("NCCL_IB_QPS_PER_CONNECTION", "2")
    assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--algo", "ring",
                 "--proto", "simple"]) == 0
    o = capsys.readouterr()
    first = o.out.splitlines()[0]
    assert "qps 2" in first and "NCCL_IB_QPS_PER_CONNECTION=2" in first
    assert "NCCL_ALGO" not in first and "NCCL_COLLNET_ENABLE=1" in first
    assert "no SHARP" in o.err  # the default fabric is RoCE
    assert main(["collective", "allreduce", "-b", "1M", "-e", "1M"]) == 0
    o = capsys.readouterr()
    assert "NCCL_ALGO=Tree" in o.out.splitlines()[0] and "no SHARP" in o.err

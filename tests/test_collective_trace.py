"""lossless collective --trace: the largest completed size as Chrome trace events (Perfetto,
chrome://tracing): a process per rank, a track per channel, direction and path, a send and a
receive slice per transfer with the same span, wait slices where a transfer was posted after
its data were ready, times in µs from the launch."""

from __future__ import annotations

import json
import re
from collections import Counter

from sim.cli import main


def test_trace_of_a_collective(tmp_path, capsys):
    out, res = tmp_path / "t.json", tmp_path / "r.json"
    assert main(["collective", "allreduce", "-b", "1M", "-e", "2M", "-p", "nodes=2", "-p",
                 "gpus_per_node=4", "--algo", "auto", "-p", "nccl_host=true", "--trace",
                 str(out), "--json", str(res)]) == 0
    capsys.readouterr()
    doc = json.loads(out.read_text())
    row = json.loads(res.read_text())["results"][-1]
    assert "trace" not in row  # the trace is its own file
    ev = doc["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert names == {r: f"rank {r} (node {r // 4}, GPU {r % 4})" for r in range(8)}
    tracks = {e["args"]["name"] for e in ev if e["name"] == "thread_name"}
    assert {"ch 0 send NVLink", "ch 0 recv NVLink", "ch 0 send net", "ch 0 recv net"} <= tracks
    xs = [e for e in ev if e["ph"] == "X"]
    data = [e for e in xs if e["cat"] != "wait"]
    assert len(data) == 2 * doc["otherData"]["transfers"] == 2 * row["transfers"]
    assert Counter(e["args"]["id"] for e in data) == Counter(
        {i: 2 for i in range(row["transfers"])})
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in xs)
    # NCCL's host side: nothing before the launch latency; every transfer waits its step
    first = min(e["ts"] for e in xs)
    assert first >= 14.0 - 1e-9  # Ring LL128's base latency
    assert any(e["cat"] == "wait" for e in xs)
    end = max(e["ts"] + e["dur"] for e in xs)
    assert abs(end - row["time_us"]) < 1e-3 and doc["otherData"]["time_us"] == row["time_us"]


def test_trace_refuses_a_folder(tmp_path, capsys):
    assert main(["collective", "allreduce", "--trace", str(tmp_path)]) == 2
    assert "--trace: not a file in an existing folder" in capsys.readouterr().err


def test_capture_ports_of_the_largest_size(tmp_path, capsys):
    """--capture PORT (a switch's leaf0:p2, a host's NIC h6, or ids) writes the frames
    leaving it during the largest size into --out as pcaps the decoder reads; the row lists
    them; a port that does not exist, or no --out, is one line and exit 2."""
    from wire.pcapio import read

    out = tmp_path / "o"
    assert main(["collective", "allreduce", "-b", "1M", "-e", "2M", "-p", "nodes=2", "-p",
                 "gpus_per_node=4", "--out", str(out), "--no-plots", "--capture", "h6",
                 "--capture", "6:0", "--capture", "leaf0:p0"]) == 0
    capsys.readouterr()
    row = json.loads((out / "results.json").read_text())["results"][-1]
    caps = {c["port"]: c for c in row["captures"]}
    assert set(caps) == {"h6:p0", "leaf0:p0"}  # 6:0 is h6's NIC again
    assert caps["h6:p0"]["frames"] > 400 and caps["h6:p0"]["cut_at_ps"] is None
    recs = list(read(str(out / "capture_h6_p0.pcap")))
    assert len(recs) == caps["h6:p0"]["frames"]
    assert "captures" not in json.loads((out / "results.json").read_text())["results"][0]
    assert main(["collective", "allreduce", "--capture", "leaf0:p9", "--out",
                 str(tmp_path / "x")]) == 2
    assert "leaf0 has ports" in capsys.readouterr().err
    assert main(["collective", "allreduce", "--capture", "h6"]) == 2
    assert "--capture: needs --out DIR" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_p2p_collectives_with_auto_run_simple_and_say_so(tmp_path, capsys):
    """AllToAll and SendRecv have no algorithm to tune: with --algo auto they run NCCL's
    sends (Simple above 16 KiB) and the first line says what ran; --trace works on them."""
    out = tmp_path / "t.json"
    assert main(["collective", "alltoall", "-e", "1M", "--algo", "auto", "-p",
                 "nccl_host=true", "--trace", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "algo p2p, proto simple, channels 4," in first
    assert json.loads(out.read_text())["otherData"]["trace"] == "alltoall 1048576 B, p2p/simple"


def test_a_size_too_big_for_a_trace_is_said_and_the_smaller_one_kept(tmp_path, capsys,
                                                                       monkeypatch):
    """A size with more transfers than a trace holds is one line on stderr, not a failure;
    the trace is of the largest size that fits."""
    from sim.workloads import collective_stats

    monkeypatch.setattr(collective_stats, "TRACE_MAX_TRANSFERS", 300)
    out = tmp_path / "t.json"
    assert main(["collective", "allreduce", "-b", "64K", "-e", "2M", "-f", "32",
                 "--trace", str(out)]) == 0
    err = capsys.readouterr().err
    assert re.search(r"--trace: size 2097152: \d+ transfers: a trace holds at most 300", err)
    assert json.loads(out.read_text())["otherData"]["trace"].startswith("allreduce 65536 B")


def test_trace_of_nvls_names_the_switch_buffers(tmp_path, capsys):
    """An NVLS AllReduce on one node (the tuner's pick with NCCL's host side): the NVSwitch's
    buffers are processes of their own, every transfer to or from them is on NVLink, and the
    step timeline names them too."""
    out, res = tmp_path / "t.json", tmp_path / "o"
    assert main(["collective", "allreduce", "-b", "16M", "-e", "16M", "-p", "nodes=1", "-p",
                 "gpus_per_node=8", "-p", "hw=h100-cx7", "-p", "nccl_host=true", "--algo",
                 "auto", "--trace", str(out), "--out", str(res)]) == 0
    capsys.readouterr()
    row = json.loads((res / "results.json").read_text())["results"][-1]
    assert (row["algorithm"], row["tuner"]["nccl"]) == ("nvls", "NVLS/Simple")
    ev = json.loads(out.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["name"] == "process_name"}
    assert names[8] == "NVLS reduce of head 0 (node 0)"
    assert names[23] == "NVLS multicast of head 7 (node 0)" and len(names) == 8 + 16
    assert {e["cat"] for e in ev if e["ph"] == "X" and e["cat"] != "wait"} == {"NVLink"}
    assert (res / "step_timeline.png").stat().st_size > 0

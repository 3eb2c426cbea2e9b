"""A run's port counters in the real tools' terms (sim.fabric.counters) agree with the
simulator's own counters, print as perfquery -x prints a real port's, and `lossless counters`
reads them back from both results folders."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
from sim.fabric.counters import (
    PERFQUERY_X_FIELDS,
    XMIT_WAIT_TICK_BYTES,
    ToolOutputError,
    format_ethtool,
    format_perfquery,
    format_rdma_statistic,
    read_perfquery,
    record_problem,
)
from sim.study.results import run_scenario
from sim.units import FCS_BYTES
from tests.helpers import real_file
from wire.ib import VCRC_BYTES

_LINE = re.compile(r"^(\w+):(\.*)(\S+)$")


def _blocks(text: str) -> list[dict[str, str]]:
    """perfquery's output as one dict (field -> value, in order) a port; every field line
    checked against libibmad's layout (the value at column 34)."""
    out: list[dict[str, str]] = []
    for line in text.splitlines():
        if line.startswith("# Port extended counters:") or line.startswith("# Port counters:"):
            out.append({})
            continue
        if not line or line.startswith("#"):
            continue
        m = _LINE.match(line)
        assert m, line
        assert len(m.group(1)) + 1 + len(m.group(2)) == 33, line
        out[-1][m.group(1)] = m.group(3)
    return out


def _run(tmp_path, name, params, sub="out"):
    return run_scenario(name, params, seed=1, out_dir=str(tmp_path / sub), plots=False,
                        write_captures=False, progress=False)


def _by_port(summary):
    return {(r["node_id"], r["port"]): r for r in summary["tool_counters"]}


def test_roce_incast_counters_agree_with_the_summary(tmp_path):
    s = _run(tmp_path, "incast", {"senders": 4, "duration_ms": 0.2, "cc": "dcqcn"})
    tc = _by_port(s)
    assert len(tc) == len(s["ports"])
    assert all(record_problem(r) is None for r in s["tool_counters"])
    for p in s["ports"]:
        r = tc[(p["node"], p["port"])]
        e = r["ethtool"]
        assert r["link"] == "ethernet" and r["pfc_priorities"] == [3]
        assert e["tx_bytes_phy"] == p["tx_bytes"] + FCS_BYTES * e["tx_packets_phy"]
        peer = next(q for q in s["tool_counters"] if q["node"] == r["peer"]
                    and q["peer"] == r["node"])
        assert e["rx_bytes_phy"] == peer["ethtool"]["tx_bytes_phy"]
        assert e.get("tx_pause_ctrl_phy", 0) == p["pause_sent"]
        assert e.get("tx_prio3_pause", 0) == p["pause_sent"]
        assert e.get("rx_prio3_pause", 0) == p["pause_received"]
        assert e.get("rx_prio3_pause_duration", 0) == p["paused_ps"] // 10**6
        # the time a port had its peer paused is the time the peer was paused
        assert e.get("tx_prio3_pause_duration", 0) == peer["ethtool"].get(
            "rx_prio3_pause_duration", 0)
    nics = [r["hw_counters"] for r in s["tool_counters"] if "hw_counters" in r]
    tot = s["totals"]
    assert sum(r.get("np_cnp_sent", 0) for r in nics) == tot["cnps"] > 0
    assert sum(r.get("rp_cnp_handled", 0) for r in nics) == tot["cnps"]
    assert sum(r.get("np_ecn_marked_roce_packets", 0) for r in nics) == tot["ce_marked"] > 0
    assert sum(r["ethtool"].get("tx_prio3_pause", 0) for r in s["tool_counters"]) \
        == tot["pauses"] > 0


def test_drops_and_the_nic_watchdog_are_counted(tmp_path):
    s = _run(tmp_path, "incast", {"senders": 4, "duration_ms": 0.2, "pfc": False}, "lossy")
    by = s["totals"]["dropped_packets_by_reason"]
    drops = sum(r["ethtool"].get("rx_discards_phy", 0) for r in s["tool_counters"])
    assert drops == by["lossy_over_threshold"] > 0  # where they came in: the senders' ports
    # go-back-N's receiver discards what follows a loss: mlx5's out_of_sequence
    oos = sum(r.get("hw_counters", {}).get("out_of_sequence", 0) for r in s["tool_counters"])
    assert oos == by["out_of_sequence"] > 0
    assert drops + oos == s["totals"]["drops"]
    s = _run(tmp_path, "pfc_storm", {"duration_ms": 0.5, "stall_ms": 0.05,
                                     "nic_watchdog": True, "nic_timeout_ms": 0.1}, "storm")
    storms = [r for r in s["tool_counters"]
              if r["ethtool"].get("tx_pause_storm_error_events")]
    assert len(storms) == 1 and "hw_counters" in storms[0]
    assert storms[0]["ethtool"]["tx_pause_ctrl_phy"] > 0  # it paused before it gave up


def test_ib_incast_as_perfquery(tmp_path):
    s = _run(tmp_path, "incast", {"senders": 4, "duration_ms": 0.2, "fabric": "ib"})
    tc = _by_port(s)
    assert all(record_problem(r) is None for r in s["tool_counters"])
    waits = 0
    for p in s["ports"]:
        r = tc[(p["node"], p["port"])]
        c = r["perfquery"]
        assert r["link"] == "ib"
        # 4-octet words of LRH..ICRC: the simulator's IB packet bytes less the 2-byte VCRC
        assert c["PortXmitData"] == (p["tx_bytes"] - VCRC_BYTES * c["PortXmitPkts"]) // 4
        assert c.get("PortXmitWait", 0) == p["credit_stall_ps"] * 100 * 10**9 // (
            8 * XMIT_WAIT_TICK_BYTES * 10**12)
        waits += c.get("PortXmitWait", 0)
        peer = next(q for q in s["tool_counters"] if q["node"] == r["peer"]
                    and q["peer"] == r["node"])
        assert c["PortRcvPkts"] == peer["perfquery"]["PortXmitPkts"]
        assert c["PortRcvData"] == peer["perfquery"]["PortXmitData"]
    assert waits > 0
    # one LID a switch, its ports numbered from 1; a CA's port 1
    sw = [r for r in s["tool_counters"] if r["node"] == "switch"]
    assert {r["lid"] for r in sw} == {1}
    assert sorted(r["port_number"] for r in sw) == [r["port"] + 1 for r in sw]
    blocks = _blocks(format_perfquery(s["tool_counters"]))
    assert len(blocks) == len(s["ports"])
    assert list(blocks[0]) == ["PortSelect", "CounterSelect", *PERFQUERY_X_FIELDS]


def test_perfquery_layout_is_a_real_ports():
    """Our -x block has the fields of a real Quantum switch port's, in its order, each line
    laid out as libibmad lays it out (checked on the real file too); ibsim's perfquery of
    a simulated CA prints the first blocks only (its CapMask)."""
    real = _blocks(real_file("ib/infiniband_exporter/perfquery_x_0x7cfe9003009ce5b0.out")
                   .read_text())
    ours = _blocks(format_perfquery([{"node": "a", "port": 0, "peer": "b", "link": "ib",
                                      "lid": 1719, "port_number": 1, "perfquery": {}}]))
    assert len(real) == 2 and [list(b) for b in real] == [list(ours[0])] * 2
    ibsim = _blocks(real_file("ib/generated/sim_perfquery.txt").read_text())
    assert list(ibsim[0]) == list(ours[0])[:len(ibsim[0])]


@given(st.lists(st.integers(0, 2**64 - 1), min_size=len(PERFQUERY_X_FIELDS),
                max_size=len(PERFQUERY_X_FIELDS)), st.integers(1, 0xBFFF),
       st.integers(1, 254))
def test_perfquery_text_round_trip(values, lid, port):
    fields = [f for f in PERFQUERY_X_FIELDS if f != "CounterSelect2"]
    rec = {"node": "n", "port": port - 1, "peer": "m", "link": "ib", "lid": lid,
           "port_number": port, "perfquery": dict(zip(fields, values, strict=False))}
    text = format_perfquery([rec])
    assert f"# Port extended counters: Lid {lid} port {port} " in text
    (block,) = _blocks(text)
    assert block["PortSelect"] == str(port)
    assert {f: int(block[f]) for f in fields} == rec["perfquery"]
    (back,) = read_perfquery(text)  # the reader --against uses reads it back
    assert (back["lid"], back["port_number"], back["counters"]) == (lid, port, "Port extended")
    assert back["perfquery"] == rec["perfquery"]


def test_read_perfquery_real_outputs_and_bad_lines():
    real = read_perfquery(real_file("ib/infiniband_exporter/perfquery_x_0x7cfe9003009ce5b0.out")
                          .read_text())
    assert [(b["lid"], b["port_number"]) for b in real] == [(1719, 1), (1719, 2)]
    assert real[0]["perfquery"]["PortXmitWait"] == 22730501
    assert real[1]["perfquery"]["PortRcvData"] == 39078804993378
    (det,) = read_perfquery(real_file(
        "ib/infiniband_exporter/perfquery_rcverr_0x7cfe9003009ce5b0-1.out").read_text())
    assert det["counters"] == "PortRcvErrorDetails" and det["perfquery"][
        "PortLocalPhysicalErrors"] == 0
    good = "# Port counters: Lid 3 port 2 (CapMask: 0x1300)\nPortXmitData:....................7\n"
    assert read_perfquery(good)[0]["perfquery"] == {"PortXmitData": 7}
    for text, why in ((good + "PortRcvData:.....................x1\n",
                       "x.txt:3: PortRcvData: 'x1' is not a number"),
                      ("PortXmitData:....1\n", "x.txt:1: not a perfquery line"),
                      ("# Port counters: Lid 3 (CapMask: 0x1300)\n",
                       "x.txt:1: no port number")):
        with pytest.raises(ToolOutputError, match=re.escape(why)):
            read_perfquery(text, "x.txt")


def test_ethtool_and_rdma_forms():
    rec = {"node": "h1", "port": 0, "peer": "leaf0", "link": "ethernet",
           "pfc_priorities": [3], "ethtool": {"rx_prio3_pause": 5, "tx_bytes_phy": 64},
           "hw_counters": {"np_cnp_sent": 7}}
    text = format_ethtool([rec])
    lines = text.splitlines()
    assert lines[:2] == ["# h1:p0 -> leaf0", "NIC statistics:"]
    assert all(re.fullmatch(r" {5}\w+: \d+", ln) for ln in lines[2:])
    assert "     rx_prio3_pause: 5" in lines and "     tx_bytes_phy: 64" in lines
    rdma = format_rdma_statistic([rec]).splitlines()
    assert rdma[0] == "link h1/1 " and "    np_cnp_sent 7 " in rdma
    assert format_perfquery([rec]) == "" and format_rdma_statistic([{**rec, "hw_counters":
                                                                      {}}]) != ""


def test_cli_reads_replay_and_collective_folders(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["replay", "incast", "-p", "senders=2", "-p", "duration_ms=0.05",
                 "-p", "fabric=ib", "--no-plots", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["counters", str(out), "--node", "receiver"]) == 0
    (block,) = _blocks(capsys.readouterr().out)
    assert int(block["PortRcvData"]) > 0
    coll = tmp_path / "c"
    assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--fabric", "star",
                 "-p", "nodes=4", "-p", "gpus_per_node=1", "--out", str(coll), "--no-plots",
                 "--quiet"]) == 0
    capsys.readouterr()
    assert main(["counters", str(coll), "--node", "h*", "--as", "ethtool"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("# size 1048576 B, ") and text.count("NIC statistics:") == 4
    doc = json.loads((coll / "counters.json").read_text())
    assert doc["fidelity"] == "packet" and len(doc["ports"]) == 8
    assert main(["counters", str(coll), "--as", "json", "--node", "switch", "--port", "1"]) == 0
    assert len(json.loads(capsys.readouterr().out)["ports"]) == 1
    # --against: your perfquery beside the simulated port of the same LID and port
    assert main(["counters", str(out), "--node", "receiver"]) == 0
    mine = capsys.readouterr().out.replace(f"PortRcvData:{'.' * 21}{block['PortRcvData']}",
                                           f"PortRcvData:{'.' * 21}{2 * int(block['PortRcvData'])}")
    (tmp_path / "mine.txt").write_text(mine)
    assert main(["counters", str(out), "--against", str(tmp_path / "mine.txt")]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert "1 of its 1 ports matched" in rows[0]
    rcv = next(r for r in rows if "PortRcvData" in r).split()
    assert rcv[-1] == "0.5000" and int(rcv[-2]) == int(block["PortRcvData"])
    (tmp_path / "other.txt").write_text(re.sub(r"Lid \d+ ", "Lid 999 ", mine))
    assert main(["counters", str(out), "--against", str(tmp_path / "other.txt")]) == 2
    assert "none of its 1 ports" in capsys.readouterr().err


@pytest.mark.parametrize("content, why", [
    (None, "no such folder"),
    ("{", "not a readable JSON file"),
    ('{"tool_counters": 3}', "no 'tool_counters' list"),
    ('{"tool_counters": [{"node": "a", "port": "x", "link": "ib"}]}',
     "tool_counters[0]: not a port record (port: missing or not an int)"),
    ('{"tool_counters": [{"node": "a", "port": 1, "peer": "b", "link": "ib", "lid": 1}]}',
     "tool_counters[0]: not a port record (port_number: missing or not an int)"),
    ('{"tool_counters": [{"node": "a", "port": 1, "peer": "b", "link": "ethernet", '
     '"ethtool": {"rx_bytes_phy": "many"}}]}',
     "tool_counters[0]: not a port record (ethtool.rx_bytes_phy: 'many' is not a whole"),
])
def test_cli_bad_input_one_line_exit_2(tmp_path, capsys, content, why):
    d = tmp_path / "bad"
    if content is not None:
        d.mkdir()
        (d / "summary.json").write_text(content)
    assert main(["counters", str(d)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and why in err and "Traceback" not in err


@pytest.mark.parametrize("fabric, corrupt, discards, downs", [
    ("roce", "rx_crc_errors_phy", "tx_discards_phy", "link_down_events_phy"),
    ("ib", "PortRcvErrors", "PortXmitDiscards", "LinkDownedCounter"),
])
def test_faults_show_as_link_errors(tmp_path, fabric, corrupt, discards, downs):
    """A lossy link's corrupt frames are receive errors of the ports they reached, a link
    down's flushed frames discards of the ports that held them, each end one link-down."""
    s = _run(tmp_path, "leaf_spine", {"duration_ms": 0.3, "fabric": fabric, "fault": [
        "link_down:node=2,port=5,at_us=100,until_us=200",
        "loss:node=2,port=4,loss_rate=0.01"]})
    by = s["totals"]["dropped_packets_by_reason"]
    key = "perfquery" if fabric == "ib" else "ethtool"
    c = {(r["node_id"], r["port"]): r[key] for r in s["tool_counters"]}
    assert sum(x.get(corrupt, 0) for x in c.values()) == by["corrupt"] > 0
    assert sum(x.get(discards, 0) for x in c.values()) == by["link_down"] > 0
    down = {k for k, x in c.items() if x.get(downs)}
    assert len(down) == 2 and all(c[k][downs] == 1 for k in down)
    assert (2, 5) in down
    lossy = {k for k, x in c.items() if x.get(corrupt)}
    assert len(lossy) == 2 and (2, 4) in lossy  # both directions of the link


def test_against_your_nics_ethtool(tmp_path, capsys):
    """--against an ethtool -S of one NIC: the counters the run counts, side by side, the
    rest of a real mlx5 listing ignored; one Ethernet port must be named."""
    from sim.fabric.counters import read_ethtool

    out = tmp_path / "r"
    assert main(["replay", "incast", "-p", "senders=2", "-p", "duration_ms=0.05",
                 "--no-plots", "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["counters", str(out), "--node", "h1"]) == 0
    mine = capsys.readouterr().out
    sim = read_ethtool(mine)
    assert sim["tx_bytes_phy"] > 0 and "rx_prio3_pause" in sim
    real = mine.replace(f"tx_bytes_phy: {sim['tx_bytes_phy']}",
                        f"tx_bytes_phy: {2 * sim['tx_bytes_phy']}")
    real += "     rx_vport_unicast_packets: 12\n     ch0_arm: 7\n"
    (tmp_path / "eth.txt").write_text(real)
    assert main(["counters", str(out), "--node", "h1", "--against",
                 str(tmp_path / "eth.txt")]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert rows[0].endswith(f"of its {len(sim) + 2} counters, against h1:p0")
    assert next(r for r in rows if r.startswith("tx_bytes_phy")).split()[-1] == "0.5000"
    assert not any(r.startswith(("ch0_arm", "rx_vport")) for r in rows)
    assert main(["counters", str(out), "--against", str(tmp_path / "eth.txt")]) == 2
    assert "ethtool -S is one NIC's" in capsys.readouterr().err
    (tmp_path / "bad.txt").write_text("NIC statistics:\n     rx_bytes_phy: lots\n")
    assert main(["counters", str(out), "--node", "h1", "--against",
                 str(tmp_path / "bad.txt")]) == 2
    assert "bad.txt:2: not an ethtool -S line" in capsys.readouterr().err

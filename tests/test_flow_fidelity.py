"""Flow fidelity (sim.workloads.fluid_transport): a collective's QPs as fluid flows at
max-min fair rates on their paths, against the packet simulation of the same cases."""

from __future__ import annotations

import json

import pytest

from sim.fabric.fattree import fat_tree
from sim.fabric.rail import rail_optimized
from sim.workloads.collective import run_schedule
from sim.workloads.nccl import schedule, verify

MIB = 1 << 20


def _both(make, sch, tol, **kw):
    times = {}
    for fidelity in ("packet", "flow"):
        f = make()
        run = run_schedule(sch, f.fabric, f.ranks, fidelity=fidelity, **kw)
        verify(sch, sorted(range(len(sch.transfers)), key=run.start_ps.__getitem__))
        times[fidelity] = run.time_ps
    assert times["flow"] == pytest.approx(times["packet"], rel=tol), times
    return times


@pytest.mark.parametrize("qps", [1, 4])
def test_flow_equals_packets_where_nothing_queues(qps):
    """A ring over a k=4 fat-tree (one GPU a host, 1 and 4 QPs; ECMP puts them where the
    packets go) and a ring on a rail fabric with NVLink: within 0.5 % of the packets."""
    _both(lambda: fat_tree(4, 1, link_gbps=100),
          schedule("allreduce", 16, (16 * MIB) // 4, nchannels=2, gpus_per_node=1,
                   qps_per_connection=qps), 0.005)
    _both(lambda: rail_optimized(2, 4, link_gbps=400),
          schedule("allreduce", 8, (16 * MIB) // 4, nchannels=4, gpus_per_node=4), 0.005,
          gpus_per_node=4)


def test_flow_is_close_where_links_are_shared():
    """Without NVLink every ring hop crosses the network and the spines' uplinks are
    shared: max-min shares them as the packets' round robin does, within 5 %."""
    _both(lambda: rail_optimized(2, 4, link_gbps=400),
          schedule("allreduce", 8, (16 * MIB) // 4, nchannels=4, gpus_per_node=4), 0.05,
          gpus_per_node=4, nvlink=False)


def test_the_command_says_its_fidelity(tmp_path, capsys):
    from sim.cli import main

    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-b", "4M", "-e", "4M", "--fidelity", "flow",
                 "--json", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "flow fidelity (fluid max-min rates: no packets" in first
    doc = json.loads(out.read_text())
    assert doc["fidelity"] == "flow" and doc["results"][0]["wrong"] == 0
    assert doc["results"][0]["counters"]["pfc_pauses"] == 0
    for extra, said in ((["-p", "fault=loss:node=0,port=0,loss_rate=0.01"],
                         "a loss fault drops packets"),
                        (["--capture", "h6", "--out", str(tmp_path / "o")],
                         "--capture needs packets"),
                        (["-p", "fabric=ib", "-p", "ib_routing=adaptive"],
                         "adaptive routing picks a port per packet")):
        assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--fidelity", "flow",
                     *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and said in err


def test_the_nics_pcie_bounds_a_flow_as_it_bounds_the_packets():
    """800G NICs behind PCIe Gen5 x16 (the PCIe budget's study): the sender's PCIe read
    is on the flow's path, and the flow takes what the packets take."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 8,
                                             "link_gbps": 800, "pcie_gen": 5,
                                             "nccl_host": False})
    rows = {f: run_size("allreduce", 64 * MIB, "rail", p, algorithm="ring",
                        protocol="simple", inplace=False, fidelity=f)
            for f in ("packet", "flow")}
    assert rows["flow"]["time_us"] == pytest.approx(rows["packet"]["time_us"], rel=0.005)
    free = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 8,
                                                "link_gbps": 800, "pcie_gen": 0,
                                                "nccl_host": False})
    unbound = run_size("allreduce", 64 * MIB, "rail", free, algorithm="ring",
                       protocol="simple", inplace=False, fidelity="flow")
    assert unbound["time_us"] < 0.98 * rows["flow"]["time_us"]  # PCIe did bind


def test_auto_runs_the_large_sizes_without_packets(tmp_path, capsys):
    """--fidelity auto: 16 ranks x 256 MiB (4 GiB) with packets, x 1 GiB (16 GiB) at flow
    fidelity; the rows and a line after the table say which."""
    from sim.cli import main

    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-b", "256M", "-e", "1G", "-f", "4",
                 "-p", "nodes=2", "-p", "gpus_per_node=8", "--fidelity", "auto",
                 "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "# flow fidelity for 1073741824 (auto: from 16 GiB of ranks x size)" in text
    doc = json.loads(out.read_text())
    assert doc["fidelity"] == "auto"
    assert [r.get("fidelity", "packet") for r in doc["results"]] == ["packet", "flow"]
    assert all(r["wrong"] == 0 for r in doc["results"])


def test_link_use_at_flow_fidelity_is_what_the_packets_sent():
    """The link table and busiest link at flow fidelity come from what the fluid flows sent
    through each port (no packet counts it): per port the packets' bytes less their RC
    acknowledgements, within 1 %; the same busiest link."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"nccl_host": False, "nvlink": False})
    rows = {f: run_size("allreduce", 4 * MIB, "rail", p, algorithm="ring", protocol="simple",
                        inplace=False, details=True, fidelity=f) for f in ("packet", "flow")}
    pk = {(x["node"], x["port"]): x["tx_bytes"] for x in rows["packet"]["links"]}
    fl = {(x["node"], x["port"]): x["tx_bytes"] for x in rows["flow"]["links"]}
    assert sum(fl.values()) > 0 and set(pk) == set(fl)
    for key, b in fl.items():
        assert b <= pk[key] and b == pytest.approx(pk[key], rel=0.01, abs=1)
    assert rows["flow"]["busiest_link"]["name"] == rows["packet"]["busiest_link"]["name"]


def _fault_rows(fault: str, *extra: str) -> dict:
    """busbw rows of the same faulted size at both fidelities (2 x 4 GPUs on a rail)."""
    from sim.cli import main

    rows = {}
    for fidelity in ("packet", "flow"):
        import json as _json
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            out = f"{d}/r.json"
            assert main(["collective", "allreduce", "-b", "16M", "-e", "16M", "--algo", "ring",
                         "--proto", "simple", "-p", "nccl_host=false", "--fidelity",
                         fidelity, "-p", f"fault={fault}", *extra, "--json", out,
                         "--quiet"]) == 0
            rows[fidelity] = _json.loads(open(out).read())["results"][0]
    return rows


def test_a_slow_nic_at_flow_fidelity_is_the_packets():
    """A NIC degraded to 100 Gb/s from the start: the ring runs at its pace at both
    fidelities, within 0.5 %, and the fault report sees the stall at both."""
    rows = _fault_rows("degrade:node=6,port=0,rate_gbps=100")
    pk, fl = rows["packet"], rows["flow"]
    assert fl["fidelity"] == "flow" and fl["error"] is None
    assert fl["time_ps"] == pytest.approx(pk["time_ps"], rel=0.005)
    ft, pt = fl["faults"]["time"], pk["faults"]["time"]
    assert ft["faulted_ps"] > 3 * ft["baseline_ps"]
    assert ft["stall_ps"] == pytest.approx(pt["stall_ps"], rel=0.01)


def test_a_link_down_at_flow_fidelity_moves_the_flows_as_the_routes_change():
    """A spine link down mid-run, routes recomputed 10 us later: at flow fidelity the QPs on
    it stop (capacity 0), then follow the new routes (their paths walked again); the
    packets lose frames and resend them (RC).  Within 5 % (flow fast: no resends)."""
    rows = _fault_rows("link_down:node=0,port=0,at_us=100", "-p", "nvlink=false", "-p",
                       "reliable=true", "-p", "ack_timeout=8", "-p", "detect_us=5", "-p",
                       "converge_us=5", "-p", "limit_ms=1000")
    pk, fl = rows["packet"], rows["flow"]
    assert fl["error"] is None and pk["error"] is None
    assert fl["time_ps"] == pytest.approx(pk["time_ps"], rel=0.05)
    ft = fl["faults"]["time"]
    assert ft["stall_ps"] > 0.3 * ft["baseline_ps"]


def test_a_link_down_stalls_the_flows_on_it_until_the_routes_change():
    """Before the routes change (60 ms by default) the QPs through the down link carry
    nothing: a run bounded at 2 ms is incomplete, and says so."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"nvlink": False, "nccl_host": False,
                                             "limit_ms": 2})
    p["faults"] = [{"kind": "link_down", "node": 0, "port": 0, "at_us": 50}]
    row = run_size("allreduce", 16 << 20, "rail", p, algorithm="ring", protocol="simple",
                   fidelity="flow", inplace=False)
    assert row["error"] and "incomplete" in row["error"]


def test_a_nic_link_down_leaves_its_qps_without_a_route_until_it_is_back():
    """A host's link down from 100 to 400 us with routes recomputed 2 us after each change:
    between them no switch has a route to that host, so the QPs to it wait (no path), and
    when the link is back they take their paths again and the call completes, later than
    without the fault by most of the outage."""
    from sim.scenarios.base import resolve_params
    from sim.scenarios.collective import collective_params, run_size

    p = resolve_params(collective_params(), {"nvlink": False, "nccl_host": False,
                                             "detect_us": 1, "converge_us": 1,
                                             "limit_ms": 5})
    kw = dict(algorithm="ring", protocol="simple", fidelity="flow", inplace=False)
    clean = run_size("allreduce", 16 << 20, "rail", p, **kw)
    p["faults"] = [{"kind": "link_down", "node": 4, "port": 0, "at_us": 100, "until_us": 400}]
    row = run_size("allreduce", 16 << 20, "rail", p, **kw)
    assert row["error"] is None and clean["error"] is None
    assert row["time_ps"] > clean["time_ps"] + 150 * 10**6

"""perftest on the simulated fabric (sim.workloads.perftest, lossless perftest): rates and
latencies from first principles on a quiet fabric, shares under an incast, and perftest's
own report layout and statistics."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
from sim.cli.perftest import format_bw, format_lat
from sim.scenarios.base import resolve_params
from sim.scenarios.collective import build_fabric, collective_params
from sim.scenarios.common import collective_packet
from sim.units import gbps, wire_bytes
from sim.workloads.perftest import all_sizes, lat_stats_us, run_bw, run_lat


def _star(nodes=2, link_gbps=400):
    p = collective_packet(resolve_params(collective_params(), {
        "nodes": nodes, "gpus_per_node": 1, "link_gbps": link_gbps}))
    rf = build_fabric("star", p)
    return rf.fabric, list(rf.ranks), p


@pytest.mark.parametrize("op", ["write", "send", "read"])
def test_bandwidth_is_the_links_goodput(op):
    """64 KB messages back to back: the payload's share of the wire (4096 of every
    4154 + 24 bytes with FCS, preamble and gap) of the 400 Gb/s line."""
    fab, ranks, _ = _star()
    r = run_bw(fab, ranks[0], ranks[1], op, 65536, 1000)
    goodput = gbps(400) / 8 * 4096 / wire_bytes(4154)
    assert r.iterations == 1000
    assert goodput * 0.99 < r.average_bytes_per_s <= goodput * 1.0001
    assert r.peak_bytes_per_s >= r.average_bytes_per_s
    assert r.msg_rate_per_s == r.average_bytes_per_s / 65536


def test_latency_is_the_wires():
    """A 2-byte ping-pong through one switch: two links' propagation (500 ns each) and a
    store-and-forward frame time each way (the 60-byte frame padded to 64 with its FCS,
    84 on the wire); a read's round trip is a request and the data back."""
    fab, ranks, _ = _star()
    w = run_lat(fab, ranks[0], ranks[1], "write", 2, 200)
    one_way = 2 * 500_000 + 2 * wire_bytes(2 + 58) * 8 * 10**12 // gbps(400)
    assert all(one_way <= s <= one_way + 5_000 for s in w.samples_ps)
    fab, ranks, _ = _star()
    r = run_lat(fab, ranks[0], ranks[1], "read", 2, 200)
    assert all(2 * one_way <= s <= 2 * one_way + 10_000 for s in r.samples_ps)


def test_an_incast_takes_its_share_and_queues(capsys):
    """Three hosts send to the server at line rate: the test's QP gets a quarter of the
    server's link, and its latency grows by the queue it waits in."""
    got = {}
    for test in ("ib_write_bw", "ib_write_lat"):
        for incast in (0, 3):
            assert main(["perftest", test, "-p", "nodes=5", "-p", "gpus_per_node=1",
                         "--client", "0", "--server", "4", "-n", "500", "--incast",
                         str(incast), "--json"]) == 0
            got[test, incast] = json.loads(capsys.readouterr().out)["results"][0]
    key = "bw_average_bytes_per_s"
    bw = got["ib_write_bw", 3][key] / got["ib_write_bw", 0][key]
    assert 0.24 < bw < 0.27
    assert got["ib_write_lat", 3]["t_typical_us"] > 2 * got["ib_write_lat", 0]["t_typical_us"]


def test_report_rows_are_perftests_printf():
    """The row of a real ConnectX-6 ib_write_bw, printed by perftest's REPORT_FMT."""
    row = {"size_bytes": 65536, "iterations": 5000, "bw_peak_bytes_per_s": 23323.12 * 2**20,
           "bw_average_bytes_per_s": 22714.61 * 2**20, "msg_rate_Mpps": 0.363434}
    assert format_bw(row) == " 65536      5000             23323.12            22714.61\t\t" \
                             "     0.363434"
    small = {"size_bytes": 2, "iterations": 5000, "bw_peak_bytes_per_s": 0.042350 * 125e6,
             "bw_average_bytes_per_s": 0.042185 * 125e6, "msg_rate_Mpps": 2.636533}
    assert format_bw(small, gbits=True) == " 2          5000           0.042350            " \
                                           "0.042185            2.636533"
    lat = format_lat({"size_bytes": 2, "iterations": 1000, **lat_stats_us(
        [1_000_000] * 999)})
    assert lat.startswith(" 2       1000          1.00           1.00         1.00  ")


@given(st.lists(st.integers(1, 10**9), min_size=5, max_size=300))
def test_latency_statistics_as_perftest(samples):
    """perftest's print_report_lat: sorted, the two largest dropped; t_max the largest
    kept; the median of the kept; percentiles at ceil(n p) of the sorted samples."""
    s = lat_stats_us(samples)
    d = sorted(x / 1e6 for x in samples)
    n = len(d) - 2
    assert s["t_min_us"] == d[0] and s["t_max_us"] == d[n]
    assert s["t_min_us"] <= s["t_typical_us"] <= s["t_max_us"]
    # the mean of the kept samples, within float rounding of their range
    assert min(d[:n]) * (1 - 1e-12) <= s["t_avg_us"] <= max(d[:n]) * (1 + 1e-12)
    assert s["p99_us"] <= s["p999_us"] <= d[-1]


def test_all_sizes_and_cli_table(capsys):
    assert all_sizes()[0] == 2 and all_sizes()[-1] == 1 << 23 and len(all_sizes()) == 23
    from sim.cli import main as cli
    assert cli(["perftest", "ib_send_lat", "-p", "nodes=2", "-p", "gpus_per_node=1",
                "-n", "50"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# lossless perftest ib_send_lat: ")
    assert out[1] == "-" * 87 and out[2] == " " * 20 + "Send Latency Test"
    assert out[-3] == (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    "
                       "t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% "
                       "percentile[usec] ")
    assert out[-2].startswith(" 2       50 ") and out[-1] == "-" * 87


@pytest.mark.parametrize("argv, why", [
    (["ib_write_lat", "-D", "1"], "-D: a bandwidth test of one size"),
    (["ib_write_bw", "--client", "0", "--server", "0"], "the same host"),
    (["ib_write_bw", "--client", "nobody"], "'nobody': no host of that name"),
    (["ib_write_bw", "--incast", "9"], "--incast 9: the fabric has"),
    (["ib_write_bw", "-m", "1000"], "-m 1000: an IB MTU"),
])
def test_bad_requests_one_line_exit_2(capsys, argv, why):
    from sim.cli import main as cli
    assert cli(["perftest", *argv, "-p", "nodes=4", "-p", "gpus_per_node=1"]) == 2
    err = capsys.readouterr().err
    assert why in err and err.count("\n") == 1


def test_no_peak_above_20000_iterations_or_with_a_duration(capsys):
    """As perftest: -D, or more than 20,000 iterations, measures no peak (and says so)."""
    from sim.cli import main as cli
    for extra in (["-n", "20001", "-s", "64"], ["-D", "0.0002"]):
        assert cli(["perftest", "ib_write_bw", "-p", "nodes=2", "-p", "gpus_per_node=1",
                    *extra]) == 0
        out = capsys.readouterr().out.splitlines()
        assert out[1] == " WARNING: BW peak won't be measured in this run."
        assert out[-2].split()[2] == "0.00" and float(out[-2].split()[3]) > 0

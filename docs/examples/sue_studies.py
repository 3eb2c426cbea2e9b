"""The measured tables of docs/explanation/sue.md: runs of the ``sue_packing`` scenario in
this process (its builder, the engine, :func:`sim.scaleup.summary.sue_summary`), printed as
the Markdown tables the page shows.

    python docs/examples/sue_studies.py saturation   # efficiency at saturation vs the arithmetic
    python docs/examples/sue_studies.py load         # latency against load
    python docs/examples/sue_studies.py hold         # the packer's hold time
    python docs/examples/sue_studies.py headers      # header stacks below saturation
    python docs/examples/sue_studies.py loss         # link errors and go-back-N
    python docs/examples/sue_studies.py cbfc         # PFC against CBFC
    python docs/examples/sue_studies.py cbfc-limit   # throughput bounded by the credit limit
    python docs/examples/sue_studies.py cbfc-size    # sizing the credit limit
    python docs/examples/sue_studies.py cbfc-spacing # CF_min_spacing

Every figure is simulated by the run; the simulator is deterministic for a seed (seed 0).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from sim.scaleup.summary import sue_summary
from sim.scaleup.switch import EsunSwitch
from sim.scaleup.xpu import Xpu
from sim.scenarios import get
from sim.study.sue import study

ALL_HEADERS = ("esun", "afh_gen1", "afh_gen2", "sunh", "eth_ipv4_udp")


def _run(params: dict[str, Any], drain_us: float = 0.0) -> dict[str, Any]:
    """One ``sue_packing`` run (``drain_us`` more simulated time after its duration)."""
    sc = get("sue_packing").builder(params)
    sc.fabric.run(sc.duration_ps + round(drain_us * 1e6))
    return sue_summary(sc)


def _ns(ps: float | None) -> str:
    return "-" if ps is None else f"{ps / 1000:.1f}"


def _gbps(bps: float) -> str:
    return f"{bps / 1e9:.2f}"


def saturation() -> None:
    """Pairs 1<->2 offered twice the line rate: every PDU after the first few is full."""
    rows = study(txn_bytes=(64, 128, 256), loads=(2.0,), headers=ALL_HEADERS,
                 base={"xpus": 2, "pattern": "pairs", "duration_us": 20.0})
    print("| header | txn_bytes | measured % | arithmetic % | mean txns/frame | "
          "retransmissions |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['header']} | {r['txn_bytes']} | {r['steady_efficiency_pct']:.3f} | "
              f"{r['saturation_goodput_pct']:.4f} | {r['mean_txns_per_frame']:.2f} | "
              f"{r['retransmissions']} |")


def _load_table(rows: list[dict[str, Any]], first: str) -> None:
    print(f"| {first} | goodput Gb/s | p50 ns | p99 ns | txns/frame |")
    print("|---" * (first.count("|") + 5) + "|")
    for r in rows:
        key = {"load": f"{r['txn_bytes']} | {r['load']}", "hold_ns": f"{r['hold_ns']:g}",
               "header": r["header"]}[first.split()[-1]]
        print(f"| {key} | {_gbps(r['goodput_per_xpu_bps'])} | {_ns(r['latency_p50_ps'])} | "
              f"{_ns(r['latency_p99_ps'])} | {r['mean_txns_per_frame']:.2f} |")


def load() -> None:
    """ESUN, 8 XPUs, uniform destinations, Poisson arrivals."""
    rows = study(txn_bytes=(64, 256), loads=(0.1, 0.3, 0.5, 0.7, 0.9), headers=("esun",),
                 base={"xpus": 8, "duration_us": 20.0})
    _load_table(rows, "txn_bytes | load")


def hold() -> None:
    """ESUN, 64-byte transactions, load 0.3, 8 XPUs."""
    rows = study(txn_bytes=(64,), loads=(0.3,), headers=("esun",),
                 hold_ns=(0.0, 100.0, 300.0, 1000.0), base={"xpus": 8, "duration_us": 20.0})
    _load_table(rows, "hold_ns")


def headers() -> None:
    """64-byte transactions, load 0.5, 8 XPUs."""
    rows = study(txn_bytes=(64,), loads=(0.5,),
                 headers=("esun", "afh_gen2", "sunh", "eth_ipv4_udp"),
                 base={"xpus": 8, "duration_us": 20.0})
    _load_table(rows, "header")


def loss() -> None:
    """Defaults (ESUN, 8 XPUs, 256 B, load 0.5), rto_ns 5000, 20 us then 100 us to drain;
    then 1 % loss with the default rto_ns (50 us), drained for 200 us."""
    print("| loss_rate | rto_ns | delivered / offered | lost frames | retransmitted PDUs | "
          "NACKs | timeouts | p50 ns | p99 ns |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rate, rto, drain in ((0.0, 5000.0, 100.0), (0.001, 5000.0, 100.0),
                             (0.01, 5000.0, 100.0), (0.01, 50000.0, 200.0)):
        s = _run({"loss_rate": rate, "rto_ns": rto}, drain_us=drain)
        print(f"| {rate:g} | {rto:g} | {s['txns_delivered']} / {s['txns_offered']} | "
              f"{s['link_errors']} | {s['retransmissions']} | {s['nacks']} | {s['timeouts']} | "
              f"{_ns(s['latency_p50_ps'])} | {_ns(s['latency_p99_ps'])} |")


def cbfc() -> None:
    """PFC against CBFC, default credit limit (32 KB per VC per link), 10 m cables."""
    runs = (("8 XPUs uniform, load 0.5", {"load": 0.5}),
            ("8 XPUs uniform, load 1.0", {"load": 1.0}),
            ("incast 7 -> 1, load 2.0", {"load": 2.0, "pattern": "incast"}))
    print("| run | flow control | goodput (Gb/s, all XPUs) | steady efficiency % | "
          "p50 / p99 latency (ns) | PFC frames | drops | cbfc_stalls | cf_updates |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name, p in runs:
        for fc in ("pfc", "cbfc"):
            s = _run({**p, "flow_control": fc})
            stalls = s.get("cbfc_stalls", "-")
            cfu = s.get("cf_updates", "-")
            pfc, drops = ((s["pfc_frames"], s["switch_drops"]) if fc == "cbfc"
                          else _pfc_frames_and_drops({**p, "flow_control": fc}))
            print(f"| {name} | {fc} | {_gbps(s['goodput_bps'])} | "
                  f"{s['steady_efficiency_pct']:.3f} | {_ns(s['latency_p50_ps'])} / "
                  f"{_ns(s['latency_p99_ps'])} | {pfc} | {drops} | {stalls} | {cfu} |")


def _pfc_frames_and_drops(params: dict[str, Any]) -> tuple[int, int]:
    """PFC frames the switch sent and its drops, in a PFC run of ``params`` (sue_summary
    reports them only with CBFC)."""
    sc = get("sue_packing").builder(params)
    sc.fabric.run(sc.duration_ps)
    sws = [n for n in sc.fabric.nodes.values() if isinstance(n, EsunSwitch)]
    return sum(sum(sw.pause_sent.values()) for sw in sws), sum(sw.drops for sw in sws)


def cbfc_limit() -> None:
    """2 XPUs in pairs, load 2.0, 100 m cables (500 ns each way), CF_min_spacing 800 B,
    40 us: a frame's credits are held for its serialisation + 2 x 500 ns."""
    print("| `cbfc_buffer_kb` | CL (credits) | XPU tx (Gb/s, frame bytes) | "
          "CL x 128 B x 8 / 1332 ns | goodput per XPU (Gb/s) |")
    print("|---|---|---|---|---|")
    for kb in (4.3, 8.5, 12.8):
        sc = get("sue_packing").builder({"xpus": 2, "pattern": "pairs", "load": 2.0,
                                         "cable_m": 100, "flow_control": "cbfc",
                                         "cbfc_buffer_kb": kb, "cbfc_min_spacing_bytes": 800,
                                         "duration_us": 40.0})
        sc.fabric.run(sc.duration_ps)
        s = sue_summary(sc)
        cl = int(kb * 1000 // 128)
        tx = _xpu_tx_bps(sc)
        print(f"| {kb:g} | {cl} | {_gbps(tx)} | {cl * 128 * 8 / 1332:.2f} | "
              f"{_gbps(s['goodput_per_xpu_bps'])} |")


def _xpu_tx_bps(sc: Any) -> float:
    """Mean rate of the frame bytes the XPUs sent over the run."""
    ports = [n.port for n in sc.fabric.nodes.values() if isinstance(n, Xpu)]
    return sum(p.tx_bytes for p in ports) * 8 / len(ports) / (sc.duration_ps / 1e12)


def cbfc_size() -> None:
    """Steady efficiency % against the credit limit, 10 m cables."""
    sizes = (4.3, 8.5, 16.0, 32.0, 64.0)
    print("| `cbfc_buffer_kb` | " + " | ".join(f"{k:g}" for k in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for name, p in (("uniform, load 1.0", {"load": 1.0}),
                    ("incast, load 2.0", {"load": 2.0, "pattern": "incast"})):
        cells = [_run({**p, "flow_control": "cbfc", "cbfc_buffer_kb": k})
                 ["steady_efficiency_pct"] for k in sizes]
        print(f"| {name} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")


def cbfc_spacing() -> None:
    """Incast, load 2.0, 16 KB credit limit, CF_min_spacing 800 / 6400 / 25600 bytes."""
    print("| `cbfc_min_spacing_bytes` | steady efficiency % | CF_Updates |")
    print("|---|---|---|")
    for b in (800, 6400, 25600):
        s = _run({"load": 2.0, "pattern": "incast", "flow_control": "cbfc",
                  "cbfc_buffer_kb": 16.0, "cbfc_min_spacing_bytes": b})
        print(f"| {b} | {s['steady_efficiency_pct']:.3f} | {s['cf_updates']} |")


STUDIES: dict[str, Callable[[], None]] = {
    "saturation": saturation, "load": load, "hold": hold, "headers": headers, "loss": loss,
    "cbfc": cbfc, "cbfc-limit": cbfc_limit, "cbfc-size": cbfc_size,
    "cbfc-spacing": cbfc_spacing,
}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in STUDIES:
        sys.exit(f"usage: python {sys.argv[0]} {'|'.join(STUDIES)}")
    STUDIES[sys.argv[1]]()

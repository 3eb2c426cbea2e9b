"""`lossless overhead` / wire.overhead: goodput counted on frames the codecs build.

The expected figures are independent arithmetic of ours (the closed formula
`eff = k*T / (max(k*(T+h) + H_frame, 64) + 20)` with the header bytes counted by hand from the
layouts in docs/reference/headers.md; docs/explanation/scaleup.md, section "Efficiency"), not
numbers printed by this code.
"""

from __future__ import annotations

import json

import pytest

import wire
from sim.cli import main
from wire.overhead import STACKS, efficiency, frame_for, table

# Table 5.1: in-frame overhead bytes per stack (FCS included, no preamble/IFG).
H_FRAME = {"roce_v2": 62, "sue_ipv4_udp": 58, "afh_gen1": 34, "afh_gen2": 30, "sue_lite": 18,
           "esun": 34, "sunh": 38}
# Table 5.2 (8-byte descriptor rows) and the RoCEv2 row: (stack, T, k) -> goodput %.
PUBLISHED = {
    ("afh_gen2", 64, 1): 52.5, ("afh_gen2", 64, 4): 75.7, ("afh_gen2", 64, 16): 85.2,
    ("afh_gen2", 128, 1): 68.8, ("afh_gen2", 128, 4): 86.2, ("afh_gen2", 128, 16): 92.0,
    ("afh_gen2", 256, 1): 81.5, ("afh_gen2", 256, 4): 92.6,
    ("esun", 64, 1): 50.8, ("esun", 64, 4): 74.9, ("esun", 64, 16): 84.9,
    ("esun", 128, 1): 67.4, ("esun", 128, 4): 85.6, ("esun", 128, 16): 91.8,
    ("esun", 256, 1): 80.5, ("esun", 256, 4): 92.3,
    ("sue_ipv4_udp", 64, 1): 42.7, ("sue_ipv4_udp", 64, 4): 69.9,
    ("sue_ipv4_udp", 64, 16): 83.3, ("sue_ipv4_udp", 128, 1): 59.8,
    ("sue_ipv4_udp", 128, 4): 82.3, ("sue_ipv4_udp", 128, 16): 90.9,
    ("sue_ipv4_udp", 256, 1): 74.9, ("sue_ipv4_udp", 256, 4): 90.3,
    ("roce_v2", 64, 1): 43.8, ("roce_v2", 64, 4): 75.7, ("roce_v2", 64, 16): 92.6,
    ("roce_v2", 128, 1): 61.0, ("roce_v2", 128, 4): 86.2, ("roce_v2", 128, 16): 96.2,
    ("roce_v2", 256, 1): 75.7, ("roce_v2", 256, 4): 92.6, ("roce_v2", 256, 16): 98.0,
}


@pytest.mark.parametrize(("key", "pct"), PUBLISHED.items(), ids=[str(k) for k in PUBLISHED])
def test_matches_published_arithmetic(key, pct) -> None:
    e = efficiency(*key)
    assert e.goodput_pct == pytest.approx(pct, abs=0.05)


@pytest.mark.parametrize("stack", list(STACKS))
@pytest.mark.parametrize("t", [8, 64, 100, 256])
@pytest.mark.parametrize("k", [1, 3, 8])
def test_formula_on_real_frames(stack: str, t: int, k: int) -> None:
    """Every cell equals the closed formula with the table-5.1 header bytes, and the frame
    really decodes to k transactions of t bytes (so the bytes counted are the right ones)."""
    h = 0 if stack == "roce_v2" else 8
    e = efficiency(stack, t, k)
    if e.goodput_pct is None:
        cap = 1024 if stack == "sue_lite" else 4096
        assert k * (t + h) > cap
        return
    wire_bytes = max(k * (t + h) + H_FRAME[stack], 64) + 20
    assert e.wire_bytes == wire_bytes
    assert e.goodput_pct == pytest.approx(100 * k * t / wire_bytes)
    frame = frame_for(stack, t, k)
    cfg = wire.scaleup.DEFAULT_SCALEUP.with_(afh_gen2_form="6" if stack == "sue_lite" else "12")
    d = wire.dissect(frame, scaleup=cfg)
    assert not d.problems, d.problems
    if stack == "roce_v2":
        assert d["payload"]["length"] == k * t and d["icrc"]["valid"]
    else:
        assert [x["length"] for x in d["sue_txn"]] == [t] * k
        assert ("rcrc" in d) == (stack != "sue_lite")


def test_pdu_limits_reported_not_split() -> None:
    e = efficiency("esun", 256, 16)
    assert e.goodput_pct is None and "4096" in e.reason
    e = efficiency("sue_lite", 64, 16)
    assert e.goodput_pct is None and "1024" in e.reason


def test_descriptor_size_option_changes_the_bytes() -> None:
    cfg = wire.scaleup.DEFAULT_SCALEUP.with_(txn_hdr_bytes=16)
    e8, e16 = efficiency("esun", 64, 4), efficiency("esun", 64, 4, cfg)
    assert e16.wire_bytes - e8.wire_bytes == 4 * 8


def test_cli_table_and_json(capsys) -> None:
    assert main(["overhead"]) == 0
    out = capsys.readouterr().out
    lines: dict[str, list[str]] = {}
    for ln in out.splitlines():  # the table rows come before the legend rows
        if ln.split() and ln.split()[0] in STACKS:
            lines.setdefault(ln.split()[0], ln.split())
    assert set(lines) == set(STACKS)
    assert lines["afh_gen2"][1:4] == ["50", "52.5", "75.7"]  # hdr B, 64x1, 64x4
    assert lines["esun"][-1] == "n/a"  # 256 x 16 exceeds the PDU limit
    assert main(["overhead", "--json", "--stack", "roce_v2", "--txn-bytes", "256",
                 "--per-frame", "1"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows == [{"stack": "roce_v2", "txn_bytes": 256, "per_frame": 1, "frame_bytes": 314,
                     "wire_bytes": 338, "overhead_bytes": 82,
                     "goodput_pct": pytest.approx(75.74, abs=0.01), "reason": ""}]
    assert main(["overhead", "--stack", "bogus"]) == 2
    assert "unknown stack" in capsys.readouterr().err


def test_table_covers_every_combination() -> None:
    rows = table((64,), (1, 2))
    assert len(rows) == 2 * len(STACKS)

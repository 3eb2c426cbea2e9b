"""Bulk crafting: RoceTemplate.stamp, craft_flow, CaptureWriter.write_frames and
``lossless craft --flow ... --count N``."""

from __future__ import annotations

import io
import json

import pytest

from sim.cli import main
from wire import build, dissect, read
from wire.pcapio import CaptureWriter
from wire.template import RoceTemplate, craft_flow

LAYERS = {"ipv4": {"src": "10.0.0.1", "dst": "10.0.0.2", "ecn": 2}, "udp": {},
          "bth": {"opcode": "RC_RDMA_WRITE_MIDDLE", "dest_qp": 7, "psn": 0xFFFFFE},
          "payload": {"length": 100}}


def _with(**bth) -> bytes:
    d = json.loads(json.dumps(LAYERS))
    d["bth"].update(bth)
    return build(d)


def test_stamp_counts_up_and_wraps_like_build() -> None:
    t = RoceTemplate(LAYERS, patch=("bth.psn", "bth.dest_qp"))
    got = [bytes(f) for f in t.stamp(4, {"bth.dest_qp": 10})]
    want = [_with(psn=p, dest_qp=q) for p, q in ((0xFFFFFE, 10), (0xFFFFFF, 11), (0, 12),
                                                 (1, 13))]
    assert got == want
    with pytest.raises(ValueError, match="does not fit"):
        list(t.stamp(1, {"bth.psn": -1}))


def test_icrc_prefix_state_and_full_recompute_agree() -> None:
    # a patched IP address is covered by the ICRC: the template falls back to the full CRC
    t = RoceTemplate(LAYERS, patch=("ipv4.src", "bth.psn"))
    f = t.make(**{"ipv4.src": 0x0A000009, "bth.psn": 5})
    d = dissect(bytes(f))
    assert d.get("ipv4")["src"] == "10.0.0.9" and d.get("icrc")["valid"]
    assert d.get("ipv4")["checksum_ok"]


def test_craft_flow_and_write_frames() -> None:
    recs = list(craft_flow(LAYERS, 3, ts_ns=1000, gap_ns=50))
    assert [r.ts_ns for r in recs] == [1000, 1050, 1100]
    assert [dissect(r.data).get("bth")["psn"] for r in recs] == [0xFFFFFE, 0xFFFFFF, 0]
    a, b = io.BytesIO(), io.BytesIO()
    with CaptureWriter(a) as w:
        for r in recs:
            w.write(r)
    with CaptureWriter(b) as w:
        assert w.write_frames((r.data for r in recs), (r.ts_ns for r in recs)) == 3
        assert w.records_written == 3
    assert a.getvalue() == b.getvalue()
    with CaptureWriter(io.BytesIO()) as w, pytest.raises(ValueError, match="negative"):
        w.write_frames([recs[0].data, recs[1].data], [5, -1])
    c = io.BytesIO()
    with CaptureWriter(c, format="pcapng") as w:
        w.write_frames((r.data for r in recs), (r.ts_ns for r in recs))
    c.seek(0)
    assert [r.ts_ns for r in read(c)] == [1000, 1050, 1100]


def test_cli_craft_flow(tmp_path, capsys) -> None:
    out = tmp_path / "f.pcap"
    spec = json.dumps({**LAYERS, "bth": {**LAYERS["bth"], "psn": 0}})
    assert main(["craft", "--flow", spec, "--count", "5", "--rate-gbps", "100",
                 "--start-ns", "7", "-o", str(out), "-q"]) == 0
    recs = list(read(out))
    # 100-byte payload: frame 158 B, wire 182 B = 1456 bits = 14.56 ns at 100 Gb/s
    assert [r.ts_ns for r in recs] == [7, 21, 36, 50, 65]
    assert [dissect(r.data).get("bth")["psn"] for r in recs] == [0, 1, 2, 3, 4]
    assert all(dissect(r.data).get("icrc")["valid"] for r in recs)
    f = tmp_path / "flow.json"
    f.write_text(spec)
    assert main(["craft", "--flow", f"@{f}", "--count", "2", "--gap-ns", "10",
                 "--vary", "bth.dest_qp", "-o", str(out), "-q"]) == 0
    assert [dissect(r.data).get("bth")["dest_qp"] for r in read(out)] == [7, 8]
    capsys.readouterr()
    assert main(["craft", "--flow", "[1]", "--count", "1", "-o", str(out)]) == 2
    assert main(["craft", "--flow", spec, "-o", str(out)]) == 2
    assert main(["craft", "--flow", spec, "--count", "1", "--vary", "udp.sport",
                 "-o", str(out)]) == 2
    assert main(["craft", "--flow", '{"ipv4": {}, "udp": {"dport": 53}}', "--count", "1",
                 "-o", str(out)]) == 2
    assert main(["craft", "--count", "1", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--count" in err and "udp.sport" in err and "RoCEv2" in err

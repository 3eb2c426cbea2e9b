"""Bulk crafting: RoceTemplate.stamp, craft_flow, CaptureWriter.write_frames and
``lossless craft --flow ... --count N``."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

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


@given(rows=st.integers(0, 6), size=st.integers(1, 80),
       ts=st.lists(st.integers(0, (1 << 32) * 10**9 + 5), min_size=6, max_size=6),
       fmt=st.sampled_from([("pcap", True, "little", 262144), ("pcap", False, "big", 262144),
                            ("pcap", True, "little", 40), ("pcapng", True, "little", 262144)]))
def test_write_rows_writes_what_write_frames_writes(rows, size, ts, fmt) -> None:
    """CaptureWriter.write_rows (frames of one length as a uint8 array, headers made by
    numpy) gives the bytes of write_frames of each row, in every format, byte order and
    resolution; a snaplen that cuts the frames and a timestamp past 2106 take the checked
    path (the same cut, the same error)."""
    import numpy as np

    form, ns, order, snaplen = fmt
    data = np.arange(rows * size, dtype=np.int64).reshape(rows, size).astype(np.uint8)
    stamps = ts[:rows]
    outs, errors = [], []
    for bulk in (True, False):
        buf = io.BytesIO()
        w = CaptureWriter(buf, format=form, nanosecond=ns, byte_order=order, snaplen=snaplen)
        try:
            if bulk:
                n = w.write_rows(data, np.array(stamps, dtype=np.int64))
            else:
                n = w.write_frames([bytes(r) for r in data], stamps)
            assert n == rows == w.records_written
            errors.append(None)
        except ValueError as e:
            errors.append(str(e))
        w.close()
        outs.append(buf.getvalue())
    assert errors[0] == errors[1]
    if errors[0] is None:
        assert outs[0] == outs[1]

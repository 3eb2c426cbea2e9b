"""numpy batch columns for native InfiniBand rows (linktype 247): every LRH, GRH and BTH
column of every row equals what ``wire.ib_stack.dissect_ib`` shows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import wire
from wire import batch
from wire import strategies as ws
from wire.ib_stack import dissect_ib

IB_NATIVE = Path(__file__).resolve().parent.parent / "pcaps" / "ib" / "ib_native.pcap"


def _check(cols: batch.Columns, records: list[wire.Record]) -> None:
    assert cols.rows == len(records)
    for i, rec in enumerate(records):
        d = dissect_ib(rec.data, rec.orig_len)
        where = f"record {i} ({rec.data.hex()}, orig_len {rec.orig_len})"
        for layer in ("lrh", "grh", "bth"):
            assert bool(cols[f"has.{layer}"][i]) == (layer in d), f"{where}: has.{layer}"
        for prefix in ("lrh", "grh", "bth"):
            spec = wire.SPECS[prefix]
            got = d.get(prefix)
            for f in spec.fields:
                v = cols[f"{prefix}.{f.name}"][i]
                if got is None:
                    assert (v == 0).all() if f.bits > 64 else v == -1, f"{where}: {prefix}"
                elif f.bits > 64:
                    raw = spec.unpack_raw(rec.data, 8 if prefix == "grh" else 0)
                    assert bytes(v) == raw[f.name].to_bytes(16, "big"), where
                else:
                    want = spec.pack(dict(got))
                    raw = spec.unpack_raw(want)
                    assert int(v) == raw[f.name], f"{where}: {prefix}.{f.name}"
        assert (cols["offset.ib_bth"][i] >= 0) == ("bth" in d), where
    assert not cols["has.eth"].any() and not cols["has.udp"].any()


@given(data=st.data())
def test_ib_columns_match_dissect(data):
    recs = []
    for f in data.draw(st.lists(ws.ib_frames(), min_size=1, max_size=12)):
        f = bytearray(f)
        for _ in range(data.draw(st.integers(0, 2))):
            f[data.draw(st.integers(0, len(f) - 1))] = data.draw(st.integers(0, 255))
        cut = data.draw(st.integers(0, len(f)))
        snapped = data.draw(st.booleans())
        recs.append(wire.Record(0, bytes(f[:cut]), len(f) if snapped else cut, 247))
    _check(batch.frames_to_columns(recs), recs)


def test_reference_capture_columns():
    recs = list(wire.read(IB_NATIVE))
    cols = batch.read_all(IB_NATIVE)
    _check(cols, recs)
    assert int(cols["has.grh"].sum()) == 2 and int(cols["has.bth"].sum()) == 11
    assert np.array_equal(cols["lrh.vl"][4:6], [15, 15])

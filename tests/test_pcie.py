"""sim.nic.pcie: the GPU-NIC PCIe budget.

Figures checked against the public sources the module cites: Intel AN 855 (250 / 500 MB/s
per lane for Gen1 / Gen2 after 8b/10b), Intel AN 708 (Gen3 x8 "about 8 GBps", 5-7 dwords
of overhead per TLP), and the Gen5 x16 budget (63 GB/s raw, 55-58 GB/s at MPS 256).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.nic.pcie import LANES, SIZES, PcieLink, pcie_write_bps

GB = 10**9


def test_raw_rates():
    assert PcieLink(1, 1).raw_bytes_per_s() == 250 * 10**6
    assert PcieLink(2, 1).raw_bytes_per_s() == 500 * 10**6
    assert float(PcieLink(3, 8).raw_bytes_per_s()) == pytest.approx(7.877e9, rel=1e-3)
    assert PcieLink(5, 16).raw_bytes_per_s() == Fraction(32 * 16 * 128 * GB, 130 * 8)
    assert round(float(PcieLink(5, 16).raw_bytes_per_s()) / GB, 2) == 63.02
    assert PcieLink(6, 16).raw_bytes_per_s() == 128 * GB


def test_tlp_overhead_is_five_to_seven_dwords():
    assert PcieLink(2, 4).tlp_overhead_bytes(16) == 24  # STP, seq, 4-DW header, LCRC, END
    assert PcieLink(3, 4).tlp_overhead_bytes(16) == 26  # 4-byte STP token, no END
    assert PcieLink(3, 4).tlp_overhead_bytes(12) == 22
    for gen in range(1, 6):
        for hdr in (12, 16):
            assert 20 <= PcieLink(gen, 4).tlp_overhead_bytes(hdr) <= 28
    assert PcieLink(6, 4).tlp_overhead_bytes(16) == 16  # framing/seq/LCRC live in the FLIT


def test_gen5_x16_budget():
    """63 GB/s raw; about 55-58 GB/s of data at MPS 256; 400G fits, 800G does not."""
    link = PcieLink(5, 16, 256)
    gbs = link.write_bps() / 8 / GB
    assert 55 <= gbs <= 58
    assert round(gbs, 1) == 55.5
    assert 55 <= PcieLink(5, 16, 256, dllps_per_tlp=0).write_bps() / 8 / GB <= 58
    assert 400 * GB < link.write_bps() < 800 * GB  # bits/s: a 400G NIC fits, 800G not
    assert PcieLink(5, 16, 128).write_bps() < link.write_bps() < PcieLink(5, 16, 512).write_bps()
    assert pcie_write_bps(5, 16) == link.write_bps()


def test_reads_and_requests():
    link = PcieLink(5, 16, 256, mrrs_bytes=512)
    assert link.read_bps() > link.write_bps()  # 3-DW completion header
    assert link.read_request_bytes(4096) == 8 * 26
    assert link.read_request_bytes(1) == 26


@given(gen=st.integers(1, 6), lanes=st.sampled_from(LANES), mps=st.sampled_from(SIZES),
       dllps=st.sampled_from([0, Fraction(1, 2), 1, 2]))
def test_efficiency_properties(gen, lanes, mps, dllps):
    link = PcieLink(gen, lanes, mps, dllps_per_tlp=dllps)
    eff = link.write_efficiency()
    assert 0 < eff < 1
    assert link.write_bps() < link.raw_bytes_per_s() * 8
    assert PcieLink(gen, 1, mps, dllps_per_tlp=dllps).write_efficiency() == eff  # per lane
    if mps < 4096:
        assert PcieLink(gen, lanes, mps * 2, dllps_per_tlp=dllps).write_efficiency() > eff
    if gen < 6 and dllps < 2:
        assert PcieLink(gen, lanes, mps, dllps_per_tlp=2).write_efficiency() < eff


@pytest.mark.parametrize("kw", [
    {"gen": 0, "lanes": 16}, {"gen": 7, "lanes": 16}, {"gen": 5, "lanes": 3},
    {"gen": 5, "lanes": 16, "mps_bytes": 100}, {"gen": 5, "lanes": 16, "mrrs_bytes": 8192},
    {"gen": 5, "lanes": 16, "dllps_per_tlp": 3}, {"gen": 5, "lanes": 16, "header_bytes": 8},
])
def test_bad_links_are_refused(kw):
    with pytest.raises(ValueError):
        PcieLink(**kw)

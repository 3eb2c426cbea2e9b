"""A link's raw BER through its FEC (sim.fabric.fec) and what a loss fault by ber does."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.fabric.faults import loss_probability
from sim.fabric.fec import (
    CODES,
    PAYLOAD_BYTES,
    FecCode,
    codeword_error_ratio,
    default_fec,
    frame_loss,
    interleave,
)
from sim.study.results import run_scenario

G = 10**9


def _exact_cer(ber: float, code: FecCode) -> float:
    """P(more than t of n symbols wrong), in exact rationals from the binomial sum."""
    b = Fraction(ber)
    ps = 1 - (1 - b) ** 10
    miss = sum(math.comb(code.n, i) * ps**i * (1 - ps) ** (code.n - i)
               for i in range(code.t + 1))
    return float(1 - miss)


@pytest.mark.parametrize("name", ["rs528", "rs544", "ll272"])
@pytest.mark.parametrize("ber", [1e-2, 2e-3, 1e-3, 5e-4, 2.4e-4, 1e-6])
def test_cer_is_the_binomial_tail(name, ber):
    code = CODES[name]
    assert code is not None
    assert math.isclose(codeword_error_ratio(ber, code), _exact_cer(ber, code), rel_tol=1e-9)


def test_cer_far_in_the_tail():
    """Where 1 - P(<= t) underflows a float, the tail summed directly: its first term
    dominates (ps * n << 1)."""
    code = CODES["rs544"]
    assert code is not None
    ps = 1 - (1 - 1e-6) ** 10
    first = math.comb(544, 16) * ps**16 * (1 - ps) ** 528
    assert math.isclose(codeword_error_ratio(1e-6, code), first, rel_tol=1e-3)


@given(st.floats(1e-9, 0.2), st.integers(1, 600))
def test_no_correction_is_every_symbol_right(ber, n):
    """A code that corrects nothing loses a codeword on any wrong bit of its 10 n."""
    cer = codeword_error_ratio(ber, FecCode("t0", n, n, 0, ""))
    assert math.isclose(cer, -math.expm1(10 * n * math.log1p(-ber)), rel_tol=1e-9,
                        abs_tol=1e-300)


@given(st.floats(1e-7, 0.05), st.floats(1e-7, 0.05))
def test_more_errors_lose_more_and_stronger_codes_less(a, b):
    lo, hi = sorted((a, b))
    for name in ("rs528", "rs544", "ll272"):
        code = CODES[name]
        assert codeword_error_ratio(lo, code) <= codeword_error_ratio(hi, code)  # type: ignore[arg-type]
    # KP4 corrects 15 of 544, KR4 7 of 528: fewer codewords lost at every BER
    assert codeword_error_ratio(lo, CODES["rs544"]) <= codeword_error_ratio(lo, CODES["rs528"])  # type: ignore[arg-type]


def test_frame_loss_spans_and_defaults():
    assert frame_loss(1e-6, 1106, "none", 100 * G) == loss_probability(1082, 1e-6)
    cer = codeword_error_ratio(1e-3, CODES["rs544"])  # type: ignore[arg-type]
    p = frame_loss(1e-3, 4178, "auto", 400 * G)
    assert math.isclose(p, 1 - (1 - cer) ** (4178 / PAYLOAD_BYTES + 2), rel_tol=1e-12)
    assert [default_fec(r * G, False) for r in (25, 50, 100, 200, 400, 800)] == \
        ["none", "none", "rs528", "rs544", "rs544", "rs544"]
    assert [default_fec(r * G, True) for r in (56, 100, 200, 400, 800)] == \
        ["none", "none", "rs544", "rs544", "rs544"]
    assert [interleave(r * G) for r in (100, 200, 400, 800, 1600)] == [1, 2, 2, 4, 4]
    assert frame_loss(0.0, 4178, "rs544", 400 * G) == 0.0
    assert frame_loss(1.0, 64, "rs528", 100 * G) == 1.0


def _leaf_spine(tmp_path, name, fault, **kw):
    return run_scenario("leaf_spine", {"duration_ms": 0.3, "fault": [fault], **kw}, seed=1,
                        out_dir=str(tmp_path / name), plots=False, write_captures=False,
                        progress=False)


def test_a_raw_ber_goes_through_the_links_fec(tmp_path):
    """ber=1e-6 on a 100G link: without FEC about 1 % of 1 KB frames lose a bit; KR4
    corrects them all.  A raw BER of 3e-3 beats KR4 often: the losses drawn match the
    FEC's frame loss."""
    none = _leaf_spine(tmp_path, "none", "loss:node=2,port=4,ber=1e-6,fec=none")
    assert none["totals"]["dropped_packets_by_reason"]["corrupt"] > 0
    fec = _leaf_spine(tmp_path, "auto", "loss:node=2,port=4,ber=1e-6")
    assert "corrupt" not in fec["totals"]["dropped_packets_by_reason"]
    assert fec["params"]["faults"][0]["fec"] == "auto"
    bad = _leaf_spine(tmp_path, "bad", "loss:node=2,port=4,ber=3e-3")
    lost = bad["totals"]["dropped_packets_by_reason"]["corrupt"]
    c = {(r["node_id"], r["port"]): r["ethtool"] for r in bad["tool_counters"]}
    # frames through the link both ways: what its two ends sent (1082-byte frames)
    sent = c[(2, 4)]["tx_packets_phy"] + c[(2, 4)]["rx_packets_phy"]
    p = frame_loss(3e-3, 1082 + 4 + 20, "rs528", 100 * G)
    assert abs(lost - sent * p) < 5 * math.sqrt(sent * p) + 5


def test_plr_resends_instead_of_losing(tmp_path):
    lossy = _leaf_spine(tmp_path, "ib", "loss:node=2,port=4,ber=3e-3", fabric="ib")
    assert lossy["totals"]["dropped_packets_by_reason"]["corrupt"] > 0
    plr = _leaf_spine(tmp_path, "plr", "loss:node=2,port=4,ber=3e-3,plr=true", fabric="ib")
    assert "corrupt" not in plr["totals"]["dropped_packets_by_reason"]
    assert plr["faults"]["plr_resent_frames"] > 0
    assert plr["totals"]["dropped_packets"] == 0 and plr["totals"]["delivered_packets"] > 0


@pytest.mark.parametrize("fault, why", [
    ("loss:node=2,port=4,loss_rate=0.1,fec=rs544", "fec: goes with ber"),
    ("loss:node=2,port=4,loss_rate=0.1,plr=true", "plr: goes with ber"),
    ("loss:node=2,port=4,ber=1e-5,fec=rs999", "'fec': must be one of auto, none, rs528"),
])
def test_fec_keys_refused(tmp_path, capsys, fault, why):
    from sim.cli import main
    assert main(["replay", "leaf_spine", "-p", f"fault={fault}", "--out",
                 str(tmp_path / "x"), "--no-plots"]) == 2
    assert why in capsys.readouterr().err


def test_plr_is_infinibands(tmp_path, capsys):
    from sim.cli import main
    assert main(["replay", "leaf_spine", "-p", "fault=loss:node=2,port=4,ber=1e-5,plr=true",
                 "--out", str(tmp_path / "x"), "--no-plots"]) == 2
    assert "plr: physical-layer retransmission is InfiniBand's" in capsys.readouterr().err

"""A SONiC switch's configuration as the switch model (sim.fabric.sonic): real config_db
sections and pg_profile_lookup tables (tests.helpers.real_file), the example of docs/,
fabric files that take it, and bad input."""

from __future__ import annotations

import json
import re
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sim.cli import main
from sim.fabric.sonic import SonicError, read_pg_lookup, read_sonic, switch_keys
from sim.scenarios.description import build
from tests.helpers import real_file

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "sonic_th4_config_db.json"


def test_real_spectrum_sections_and_lookup_table():
    """An SN4600C's rendered buffer and QoS sections, its lossless PG profile made as
    buffermgrd makes it from the SN5600's table (the one Spectrum table here)."""
    bufs = real_file("sonic/rendered_buffers-mellanox4600c-t1.json")
    qos = real_file("sonic/rendered_qos-mellanox4600c-c64.json")
    ini = real_file("sonic/mellanox_sn5600_pg_profile_lookup.ini")
    sw = read_sonic([bufs, qos], pg_lookup=ini, port="Ethernet0", default_speed_mbps=100000)
    assert (sw.pool_bytes, sw.pool_mode, sw.shared_headroom_bytes) == (44130304, "dynamic",
                                                                       8790016)
    assert sw.lossless == [3, 4] and sw.cable == "300m" and sw.vendor == "spectrum"
    row = read_pg_lookup(ini)[(100000, "300m")]
    assert (sw.size_bytes, sw.xon_bytes, sw.xoff_bytes) == (row["size"], row["xon"],
                                                            row["xoff"]) == (244736, 19456,
                                                                             225280)
    assert sw.dynamic_th == 0 and sw.alpha == 1 and sw.reserved_bytes == 19456
    assert sw.ecn == {"profile": "AZURE_LOSSLESS", "queue": 3, "kmin_bytes": 2000000,
                      "kmax_bytes": 10000000, "pmax": 0.05, "mode": "ecn_all"}
    assert sw.listed_ports == 64
    keys, ecn, notes = switch_keys(sw, 64)
    # 64 ports x 2 lossless PGs x 225,280 B exceed the 8.79 MB shared headroom: split
    assert keys["headroom_kb"] == 8790016 // 128 / 1000 and any("split" in n for n in notes)
    assert keys["buffer_kb"] == (44130304 + 64 * (8 * 19456 + 2 * (8790016 // 128))) / 1000
    assert (keys["xoff_mode"], keys["alpha"]) == ("dynamic", "1")
    assert ecn == {"kmin_kb": 2000.0, "kmax_kb": 10000.0, "pmax": 0.05}
    # without a port: one of the most common (priorities, cable): 2,3,4,6 on 40 m here
    common = read_sonic([bufs, qos], pg_lookup=ini, default_speed_mbps=400000)
    assert common.lossless == [2, 3, 4, 6] and common.cable == "40m"
    assert common.xoff_bytes == read_pg_lookup(ini)[(400000, "40m")]["xoff"]


def test_real_lookup_tables():
    sn = read_pg_lookup(real_file("sonic/mellanox_sn5600_pg_profile_lookup.ini"))
    assert sn[(400000, "5m")] == {"size": 250880, "xon": 19456, "xoff": 231424,
                                  "threshold": 0}
    th = read_pg_lookup(real_file("sonic/broadcom_th4_gen_balanced_pg_profile_lookup.ini"))
    assert th[(100000, "300m")] == {"size": 1248, "xon": 2288, "xoff": 268736,
                                    "threshold": 0, "xon_offset": 2288}
    assert len(th) == 15


def test_qos_without_buffers_is_refused():
    with pytest.raises(SonicError, match=r"BUFFER_POOL\|ingress_lossless_pool: missing"):
        read_sonic([real_file("sonic/rendered_qos-arista7060x6_th5.json")])


def test_the_example_as_tomahawk():
    sw = read_sonic([EXAMPLE])
    assert sw.vendor == "tomahawk" and sw.port == "Ethernet0" and sw.lossless == [3, 4]
    assert (sw.reserved_bytes, sw.xoff_bytes, sw.xon_delta_bytes) == (1248, 165568, 2288)
    assert sw.watchdog == {"action": "drop", "detection_ms": 200, "restoration_ms": 200,
                           "poll_ms": 200}
    keys, ecn, _ = switch_keys(sw, 32)
    assert keys["buffer_kb"] == 37333.333 and keys["headroom_kb"] == 165.568
    assert keys["weights"] == [10, 10, 10, 20, 10, 10, 70, 10]
    assert ecn == {"kmin_kb": 131.072, "kmax_kb": 262.144, "pmax": 0.05}


def _doc(tmp_path, cfg, **switch):
    return {"run": {"duration_ms": 0.05}, "topology": {"kind": "star", "hosts": 5},
            "links": {"link_gbps": 100}, "traffic": {"pattern": "incast"},
            "switch": {"sonic": [str(cfg)], **switch}}


def test_a_fabric_file_takes_the_switch(tmp_path):
    sc = build(_doc(tmp_path, EXAMPLE), "f.toml", str(tmp_path))
    mmu = sc.fabric.nodes[0].mmu.config
    assert (mmu.reserved_bytes, mmu.headroom_bytes, mmu.xon_delta_bytes) == (1248, 165568,
                                                                             2288)
    assert mmu.lossless_pgs == {3, 4} and mmu.xoff_mode == "dynamic" and mmu.alpha == 1
    assert mmu.buffer_bytes == 37333333
    assert sc.params["switch"]["buffer_kb"] == 37333.333  # the echo: what the switch has
    assert sc.params["ecn"]["kmin_kb"] == 131.072
    # a key the file gives wins
    sc = build(_doc(tmp_path, EXAMPLE, headroom_kb=100.0, alpha="1/4"), "f.toml",
               str(tmp_path))
    mmu = sc.fabric.nodes[0].mmu.config
    assert mmu.headroom_bytes == 100000 and mmu.alpha == Fraction(1, 4)


@given(st.integers(-7, 8))
def test_dynamic_th_is_a_power_of_two(dth):
    import tempfile

    doc = json.loads(EXAMPLE.read_text())
    doc["BUFFER_PROFILE"]["pg_lossless_100000_5m_profile"]["dynamic_th"] = str(dth)
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "c.json"
        p.write_text(json.dumps(doc))
        sw = read_sonic([p])
    keys = switch_keys(sw, 32)[0]
    if dth >= 7:  # no limit on a PG's share: XOFF when the shared pool is full
        assert sw.alpha is None and keys["xoff_mode"] == "static"
        assert keys["xoff_kb"] == (37333333 - 32 * (8 * 1248 + 2 * 165568)) / 1000
    else:
        assert Fraction(keys["alpha"]) == Fraction(2) ** dth


@pytest.mark.parametrize("edit, why", [
    (lambda d: d["PORT_QOS_MAP"].clear(), "PORT_QOS_MAP: no port with pfc_enable"),
    (lambda d: d["BUFFER_POOL"]["ingress_lossless_pool"].update(size="lots"),
     "BUFFER_POOL|ingress_lossless_pool.size: 'lots' is not a whole number"),
    (lambda d: d["BUFFER_PROFILE"].pop("pg_lossless_100000_5m_profile"),
     "no lossless PG profile for Ethernet0"),
    (lambda d: d["PORT_QOS_MAP"]["Ethernet0"].update(pfc_enable="3,x"),
     "pfc_enable '3,x' is not a list of priorities"),
    (lambda d: d["BUFFER_POOL"].update(ingress_lossless_pool=3),
     "BUFFER_POOL|ingress_lossless_pool: not an object of fields"),
    (lambda d: d["CABLE_LENGTH"].update(AZURE="5m"), "CABLE_LENGTH|AZURE: not an object"),
])
def test_bad_configurations_name_table_key_and_field(tmp_path, edit, why):
    doc = json.loads(EXAMPLE.read_text())
    edit(doc)
    p = tmp_path / "c.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(SonicError, match=re.escape(why)):
        read_sonic([p], port="Ethernet0" if "pfc_enable '3" in why else None)


def test_cli_report_and_errors(tmp_path, capsys):
    assert main(["fabric", "--sonic", str(EXAMPLE), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["switch"]["headroom_kb"] == 165.568 and doc["vendor"] == "tomahawk"
    assert main(["fabric", "--sonic", str(tmp_path / "none.json")]) == 2
    assert "none.json: cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.ini"
    bad.write_text("100000 5m 1 2\n")
    assert main(["fabric", "--sonic", str(EXAMPLE), "--pg-lookup", str(bad)]) == 0  # unused
    capsys.readouterr()
    # the table is read only when the configuration has no lossless profile; a bad one:
    with pytest.raises(SonicError, match=r"bad\.ini:1: 4 columns"):
        read_pg_lookup(bad)
    toml = tmp_path / "f.toml"
    toml.write_text(f'[topology]\nkind = "star"\nhosts = 3\n[links]\nfabric = "ib"\n'
                    f'[switch]\nsonic = ["{EXAMPLE}"]\n[traffic]\npattern = "incast"\n')
    assert main(["replay", str(toml), "--out", str(tmp_path / "o"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert "[switch] sonic: a SONiC switch runs Ethernet" in err and err.count("\n") == 1


def test_pfc_wd_becomes_the_switch_watchdog(tmp_path):
    """SONiC's PFC_WD (200 ms poll, 200 ms detection and restoration, drop) is the model's
    watchdog on the lossless classes; a file without one echoes no watchdog key."""
    keys = switch_keys(read_sonic([EXAMPLE]), 32)[0]
    assert (keys["watchdog"], keys["wd_poll_ms"], keys["wd_detect_polls"],
            keys["wd_restore_ms"], keys["wd_action"]) == (True, 200.0, 1, 200.0, "drop")
    sc = build(_doc(tmp_path, EXAMPLE), "f.toml", str(tmp_path))
    (wd,) = sc.info["watchdogs"]
    assert wd.config.priorities == {3, 4} and wd.config.poll_ps == 200 * 10**9
    assert "watchdog" in sc.summaries
    doc = _doc(tmp_path, EXAMPLE)
    del doc["switch"]["sonic"]
    plain = build(doc, "f.toml", str(tmp_path))
    assert "watchdogs" not in plain.info
    assert not any(k.startswith("wd_") or k == "watchdog" for k in plain.params["switch"])
    doc = json.loads(EXAMPLE.read_text())
    for k, v in doc["PFC_WD"].items():
        if k != "GLOBAL":
            v["action"] = "alert"
    p = tmp_path / "alert.json"
    p.write_text(json.dumps(doc))
    sw = read_sonic([p])
    assert "watchdog" not in switch_keys(sw, 32)[0]
    assert any("alert" in n for n in sw.notes)

"""End-to-end tests of the ``lossless`` command line: decode, craft, stats, exit codes and
bad input (one clear line naming file and record, good records kept, never a traceback)."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from sim.cli import main
from wire import Record, build, write
from wire.pfc import quanta_to_ns

REPO = Path(__file__).resolve().parent.parent
PCAPS = sorted((REPO / "pcaps").glob("*.pcap"))


def run(args: list[str], capsys) -> tuple[int, str, str]:
    rc = main(args)
    out, err = capsys.readouterr()
    return rc, out, err


def frames() -> list[bytes]:
    return [
        build({"ipv4": {"ecn": 2}, "udp": {}, "bth": {"opcode": "RC_RDMA_WRITE_ONLY",
               "dest_qp": 7, "psn": 1}, "reth": {"va": 1, "rkey": 2, "dma_length": 3},
               "payload": {"data": "010203"}}),
        build({"ipv6": {"ecn": 3}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": 7,
               "psn": 2}, "payload": {"length": 100}}),
        build({"ipv4": {}, "udp": {}, "bth": {"opcode": "CNP", "dest_qp": 9}}),
        build({"pfc": {"quanta": [0, 0, 0, 0xFFFF, 0, 0, 0, 0]}}),
    ]


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    p = tmp_path / "s.pcap"
    write(p, [Record(ts_ns=1_700_000_000_123_456_789 + i * 1000, data=f, orig_len=len(f))
              for i, f in enumerate(frames())])
    return p


def test_decode_table_and_jsonl(sample: Path, capsys) -> None:
    rc, out, err = run(["decode", str(sample)], capsys)
    assert rc == 0 and err == ""
    lines = out.splitlines()
    assert len(lines) == 4
    assert "RC_RDMA_WRITE_ONLY" in lines[0] and "ECN=ECT(0)" in lines[0]
    assert "1700000000.123456789" in lines[0]
    assert "CNP" in lines[2] and "BECN" in lines[2]
    assert "PFC" in lines[3] and "p3=65535" in lines[3]
    rc, out, _ = run(["decode", str(sample), "-f", "jsonl"], capsys)
    recs = [json.loads(x) for x in out.splitlines()]
    assert [r["index"] for r in recs] == [0, 1, 2, 3]
    assert recs[0]["ts_ns"] == 1_700_000_000_123_456_789
    assert recs[0]["bth"]["opcode_name"] == "RC_RDMA_WRITE_ONLY"
    assert recs[0]["icrc"]["valid"] is True
    assert recs[1]["ipv6"]["ecn"] == 3
    assert recs[3]["pfc"]["quanta"][3] == 0xFFFF
    assert all("problems" not in r for r in recs)


def test_decode_craft_round_trip_is_byte_exact(sample: Path, tmp_path: Path, capsys) -> None:
    rc, out, _ = run(["decode", str(sample), "-f", "jsonl"], capsys)
    src = tmp_path / "d.jsonl"
    src.write_text(out)
    dst = tmp_path / "b.pcap"
    rc, _, _ = run(["craft", str(src), "-o", str(dst), "-q"], capsys)
    assert rc == 0
    assert dst.read_bytes() == sample.read_bytes()


@pytest.mark.parametrize("pcap", PCAPS, ids=[p.name for p in PCAPS])
def test_shipped_pcaps_round_trip(pcap: Path, tmp_path: Path, capsys) -> None:
    """decode -f jsonl | craft reproduces every shipped capture byte for byte."""
    rc, out, _ = run(["decode", str(pcap), "-f", "jsonl"], capsys)
    assert rc in (0, 1)
    src = tmp_path / "d.jsonl"
    src.write_text(out)
    dst = tmp_path / "b.pcap"
    assert run(["craft", str(src), "-o", str(dst), "-q"], capsys)[0] == 0
    assert dst.read_bytes() == pcap.read_bytes()


@pytest.mark.parametrize("pcap", PCAPS, ids=[p.name for p in PCAPS])
def test_shipped_pcaps_match_their_jsonl(pcap: Path, tmp_path: Path, capsys) -> None:
    """Each pcaps/X.pcap is what `lossless craft pcaps/X.jsonl -o X.pcap` makes (pcaps/README)."""
    src = pcap.with_suffix(".jsonl")
    assert src.exists(), f"{pcap.name} has no {src.name} to regenerate it from"
    dst = tmp_path / pcap.name
    assert run(["craft", str(src), "-o", str(dst), "-q"], capsys)[0] == 0
    assert dst.read_bytes() == pcap.read_bytes()


def test_pcapng_output_decodes_the_same(sample: Path, tmp_path: Path, capsys) -> None:
    _, out, _ = run(["decode", str(sample), "-f", "jsonl"], capsys)
    src = tmp_path / "d.jsonl"
    src.write_text(out)
    ng = tmp_path / "b.pcapng"
    assert run(["craft", str(src), "-o", str(ng), "--pcapng", "-q"], capsys)[0] == 0
    assert ng.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a"
    _, out2, _ = run(["decode", str(ng), "-f", "jsonl"], capsys)
    # pcapng decodes start with the file's format lines (its SHB and IDBs, docs/reference/jsonl.md)
    meta = ('{"pcapng_shb":', '{"pcapng_idb":')
    assert "".join(x + "\n" for x in out2.splitlines() if not x.startswith(meta)) == out


def test_craft_reports_bad_lines_and_keeps_good_ones(tmp_path: Path, capsys) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join([
        '{"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"}}',
        '{"ipv4": {"ecn": 7}}',
        "not json",
        '{"bth": {"dest_qpn": 1}, "udp": {}, "ipv4": {}}',
        '{"bogus": {}}',
        '{"pause": {"quanta": 10}}',
    ]) + "\n")
    dst = tmp_path / "o.pcap"
    rc, _, err = run(["craft", str(src), "-o", str(dst)], capsys)
    assert rc == 1
    assert f"{src}:2: ipv4.ecn: 7 does not fit in 2 bits" in err
    assert f"{src}:3: not JSON" in err
    assert f"{src}:4: bth: unknown field(s) ['dest_qpn']" in err
    assert f"{src}:5: unknown key(s) ['bogus']" in err
    assert "Traceback" not in err
    rc, out, _ = run(["decode", str(dst)], capsys)
    assert rc == 0 and len(out.splitlines()) == 2


def test_jq_style_edit_with_recompute(sample: Path, tmp_path: Path, capsys) -> None:
    """Editing a decoded record (here: a longer payload) and crafting with --recompute gives
    a valid packet; without it the stale lengths are kept on purpose (a broken packet)."""
    _, out, _ = run(["decode", str(sample), "-f", "jsonl"], capsys)
    rec = json.loads(out.splitlines()[0])
    rec["payload"] = {"length": 64}
    src = tmp_path / "e.jsonl"
    src.write_text(json.dumps(rec) + "\n")
    good, broken = tmp_path / "good.pcap", tmp_path / "broken.pcap"
    assert run(["craft", str(src), "-o", str(good), "--recompute", "-q"], capsys)[0] == 0
    assert run(["craft", str(src), "-o", str(broken), "-q"], capsys)[0] == 0
    rc, out, _ = run(["decode", str(good), "-f", "jsonl"], capsys)
    d = json.loads(out)
    assert rc == 0 and d["payload"]["length"] == 64 and d["icrc"]["valid"] is True
    rc, out, _ = run(["decode", str(broken), "-f", "jsonl"], capsys)
    assert rc == 1 and json.loads(out)["problems"]


def _pcap_header() -> bytes:
    return struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 1)


def _rec(data: bytes, incl: int | None = None) -> bytes:
    n = len(data) if incl is None else incl
    return struct.pack("<IIII", 1, 0, n, len(data)) + data


@pytest.mark.parametrize("case", ["empty", "bad_magic", "cut_body", "absurd_len", "cut_header"])
def test_bad_files_give_one_clear_line(case: str, tmp_path: Path, capsys) -> None:
    f = frames()[0]
    good = _rec(f)
    content = {
        "empty": b"",
        "bad_magic": b"GARBAGE!" * 4,
        "cut_body": _pcap_header() + good + _rec(f)[:40],
        "absurd_len": _pcap_header() + good + _rec(f, 0x7FFFFFFF),
        "cut_header": _pcap_header() + good + _rec(f)[:9],
    }[case]
    p = tmp_path / f"{case}.pcap"
    p.write_bytes(content)
    rc, out, err = run(["decode", str(p)], capsys)
    assert rc == 2
    assert "Traceback" not in err
    err_lines = [x for x in err.splitlines() if x]
    assert len(err_lines) == 1 and str(p) in err_lines[0]
    if case in ("cut_body", "absurd_len", "cut_header"):
        assert "record 1" in err_lines[0]
        assert len(out.splitlines()) == 1  # the good record before the damage is kept
        assert "RC_RDMA_WRITE_ONLY" in out
    if case == "absurd_len":
        assert "incl_len" in err_lines[0]


def test_missing_file_and_records_with_problems(tmp_path: Path, capsys) -> None:
    rc, _, err = run(["decode", str(tmp_path / "nope.pcap")], capsys)
    assert rc == 2 and "nope.pcap" in err
    bad = bytearray(frames()[0])
    bad[-1] ^= 0xFF  # corrupt the ICRC
    p = tmp_path / "p.pcap"
    write(p, [Record(ts_ns=0, data=bytes(bad), orig_len=len(bad))])
    rc, out, _ = run(["decode", str(p), "-v"], capsys)
    assert rc == 1 and "ICRC BAD" in out and "! icrc:" in out


def test_stats(tmp_path: Path, capsys) -> None:
    q = 0xFFFF
    recs = [
        # XOFF on priority 3 at t=0, refreshed at t=100 us, XON at t=150 us.
        (0, build({"pfc": {"quanta": [0, 0, 0, q, 0, 0, 0, 0]}})),
        (100_000, build({"pfc": {"quanta": [0, 0, 0, q, 0, 0, 0, 0]}})),
        (150_000, build({"pfc": {"class_enable": 8, "quanta": [0] * 8}})),
        # priority 5 pause that runs out by itself; a disabled class's time is ignored.
        (200_000, build({"pfc": {"class_enable": 0x20, "quanta": [9, 0, 0, 0, 0, 100, 0, 0]}})),
        (300_000, build({"pause": {"quanta": 1000}})),
        (400_000, build({"ipv4": {"ecn": 3}, "udp": {}, "bth": {"dest_qp": 5},
                         "payload": {"length": 8}})),
        (401_000, build({"ipv4": {"ecn": 2}, "udp": {}, "bth": {"dest_qp": 5},
                         "payload": {"length": 8}})),
        (402_000, build({"ipv4": {"src": "10.0.0.2", "dst": "10.0.0.1"}, "udp": {},
                         "bth": {"opcode": "CNP", "dest_qp": 6}})),
    ]
    p = tmp_path / "st.pcap"
    write(p, [Record(ts_ns=t, data=f, orig_len=len(f)) for t, f in recs])
    rc, out, _ = run(["stats", str(p), "--link-gbps", "25", "--json"], capsys)
    assert rc == 0
    s = json.loads(out)
    rate = 25 * 10**9
    assert s["paused_ns"]["3"] == 150_000
    assert s["paused_ns"]["5"] == quanta_to_ns(100, rate) == 2048
    assert s["paused_ns"]["all"] == quanta_to_ns(1000, rate)
    assert s["pfc"]["3"] == {"frames": 3, "xoff": 2, "xon": 1}
    assert "0" not in s["pfc"]  # class 0 was not enabled in any frame
    assert s["pause_frames"] == 1
    assert s["flows"] == [{"src": "10.0.0.1", "dst": "10.0.0.2", "dest_qp": 5, "packets": 2,
                           "bytes": 2 * len(recs[5][1]), "ce": 1}]
    assert s["cnps"] == [{"src": "10.0.0.2", "dst": "10.0.0.1", "dest_qp": 6, "count": 1}]
    assert s["ecn"]["CE"] == 1 and s["roce_ce_fraction"] == pytest.approx(1 / 3)
    rc, out, _ = run(["stats", str(p)], capsys)
    assert rc == 0 and "PFC / PAUSE at 100 Gb/s" in out


def test_console_script_and_python_m_sim(sample: Path) -> None:
    """The installed entry point and `python -m sim` run the same CLI; decode piped into
    craft through real processes reproduces the file; stderr stays quiet when not a tty."""
    dec = subprocess.run([sys.executable, "-m", "sim", "decode", str(sample), "-f", "jsonl"],
                         capture_output=True, check=True)
    assert dec.stderr == b""
    crafted = subprocess.run([sys.executable, "-m", "sim", "craft", "-o", "-", "-q"],
                             input=dec.stdout, capture_output=True, check=True)
    assert crafted.stdout == sample.read_bytes()
    bad = subprocess.run([sys.executable, "-m", "sim", "decode", "/nonexistent.pcap"],
                         capture_output=True)
    assert bad.returncode == 2 and b"Traceback" not in bad.stderr


def test_reference_pcaps_are_shipped() -> None:
    """The parametrised pcap tests above must not pass vacuously."""
    assert len(PCAPS) >= 5, [p.name for p in PCAPS]


def test_scaleup_options_select_the_placeholders(tmp_path: Path, capsys) -> None:
    """A domain whose ESUN EtherType differs from our placeholder decodes only when told."""
    from wire.scaleup import DEFAULT_SCALEUP

    cfg = DEFAULT_SCALEUP.with_(esun_ethertype=0x1234)
    f = build({"esun": {"ecn": 2, "cos": 5}, "sue_rh": {"xpuid": 3},
               "sue_txn": [{"opcode": "WRITE", "data": "ab" * 40}]}, scaleup=cfg)
    p = tmp_path / "su.pcap"
    write(p, [Record(ts_ns=0, data=f, orig_len=len(f))])
    _, out, _ = run(["decode", str(p), "-f", "jsonl"], capsys)
    assert "esun" not in json.loads(out) and json.loads(out)["eth"]["type"] == 0x1234
    _, out, _ = run(["decode", str(p), "-f", "jsonl", "--esun-ethertype", "0x1234"], capsys)
    rec = json.loads(out)
    assert rec["esun"]["cos"] == 5 and rec["sue_txn"][0]["length"] == 40
    assert rec["rcrc"]["valid"] is True and "problems" not in rec
    # craft with the same option reproduces the frame from the decoded record
    src = tmp_path / "su.jsonl"
    src.write_text(out)
    dst = tmp_path / "b.pcap"
    assert run(["craft", str(src), "-o", str(dst), "-q", "--esun-ethertype", "0x1234"],
               capsys)[0] == 0
    assert dst.read_bytes() == p.read_bytes()
    rc, out, _ = run(["stats", str(p), "--json", "--esun-ethertype", "4660"], capsys)
    assert rc == 0
    s = json.loads(out)
    assert s["scaleup"] == {"esun": 1, "sue_data": 1, "sue_pdus": 1, "sue_txn_bytes": 40,
                            "sue_txns": 1}
    assert s["ecn"]["ECT(0)"] == 1
    with pytest.raises(SystemExit) as e:
        main(["decode", str(p), "--esun-ethertype", "0x88b6"])  # same as SUNH's
    assert e.value.code == 2
    assert "must differ" in capsys.readouterr().err


def test_decode_table_shows_native_infiniband(capsys) -> None:
    """Linktype 247 and ERF records are dissected in table mode too, not skipped."""
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "pcaps" / "ib"
    for name in ("ib_native.pcap", "ib_erf.pcap"):
        main(["decode", str(root / name)])
        lines = capsys.readouterr().out.splitlines()
        assert lines and all(" IB " in x or " IB-link " in x for x in lines), lines[:3]
        assert not any("not decoded" in x for x in lines)


def test_wire_commands_parser_is_the_full_parsers_part() -> None:
    """``main`` builds only the wire commands' parsers for one of sim.cli.WIRE_COMMANDS
    (start-up time): the list is exactly the commands sim.cli.wire and
    sim.cli.wireshark add, and each parses and helps as in the full parser."""
    import argparse

    import sim.cli as cli

    def commands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
        return dict(sub.choices)

    full = commands(cli.build_parser())
    light = commands(cli.build_parser("decode"))
    assert set(light) == set(cli.WIRE_COMMANDS) and set(light) < set(full)
    for name in light:
        assert light[name].format_help() == full[name].format_help()
    assert "collective" in full and "replay" in full
    # the replay family: its commands and the wire ones, each as in the full parser
    middle = commands(cli.build_parser("replay"))
    assert set(middle) == set(cli.WIRE_COMMANDS) | set(cli.REPLAY_COMMANDS) < set(full)
    for name in middle:
        assert middle[name].format_help() == full[name].format_help()

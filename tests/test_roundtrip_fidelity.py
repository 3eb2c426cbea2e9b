"""``decode -f jsonl | craft`` gives back the input byte for byte.

The captures users have: microsecond pcaps (tcpdump's default), both byte orders, odd File
Header fields, non-Ethernet linktypes kept as raw data, pcapng with section and interface
options, several interfaces of several linktypes, EPB options, other blocks, several
sections; files made by Wireshark's editcap/mergecap/text2pcap when installed; Hypothesis
captures.  And the jq recipe of docs/howto/craft-captures.md through the jq Debian ships (1.6).
"""

from __future__ import annotations

import io
import json
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import run_cli
from wire.pcapio import Block, CaptureReader, CaptureWriter, Record
from wire.records import parse_line, record_from_dict

REPO = Path(__file__).resolve().parent.parent
PCAPS = sorted((REPO / "pcaps").glob("*.pcap"))
ETH = bytes.fromhex("020000000002020000000001") + b"\x08\x00" + b"\x45" + bytes(45)
IPV4 = b"\x45\x00\x00\x14" + bytes(16)


def call(args: list[str], stdin: bytes | None = None) -> tuple[int, bytes, str]:
    """Run the CLI in-process: (exit status, stdout bytes, stderr)."""
    rc, out, err = run_cli(args, stdin)
    return rc, out.encode(), err


def roundtrip(src: Path, *craft_opts: str) -> bytes:
    """The bytes of ``decode src -f jsonl | craft [opts]``; no message but the summary."""
    rc, jsonl, err = call(["decode", str(src), "-f", "jsonl"])
    assert rc in (0, 1) and err == "", err
    with tempfile.TemporaryDirectory() as tmp:
        lines = Path(tmp) / "d.jsonl"
        lines.write_bytes(jsonl)
        dst = Path(tmp) / "out"
        rc, _, err = call(["craft", str(lines), "-o", str(dst), "-q", *craft_opts])
        assert rc == 0 and err == "", err
        return dst.read_bytes()


def assert_identity(src: Path) -> None:
    assert roundtrip(src) == src.read_bytes()


# ------------------------------------------------------------------ classic pcap
@pytest.mark.parametrize("byte_order", ["little", "big"])
@pytest.mark.parametrize("nanosecond", [False, True], ids=["us", "ns"])
def test_pcap_byte_order_and_resolution(tmp_path: Path, byte_order: str,
                                        nanosecond: bool) -> None:
    p = tmp_path / "a.pcap"
    with CaptureWriter(p, byte_order=byte_order, nanosecond=nanosecond, snaplen=65535,
                       thiszone=-3600, sigfigs=3, version=(2, 4)) as w:
        for i in range(5):
            w.write(Record(1_700_000_000_123_456_000 + i * 1_001_000, ETH + bytes(i), 60 + i))
        w.write(Record(1_700_000_001_000_000_000, ETH[:20], 1500))  # cut by a snaplen
    head = p.read_bytes()[:4]
    assert head == {("little", False): b"\xd4\xc3\xb2\xa1", ("big", False): b"\xa1\xb2\xc3\xd4",
                    ("little", True): b"\x4d\x3c\xb2\xa1",
                    ("big", True): b"\xa1\xb2\x3c\x4d"}[(byte_order, nanosecond)]
    assert_identity(p)


@pytest.mark.parametrize("linktype", [101, 228, 229, 197, 242, 105, 147])
def test_pcap_other_linktypes_are_kept_as_raw_data(tmp_path: Path, linktype: int) -> None:
    """Raw IP (101, IPv4 228, IPv6 229), ERF 197, IPoIB 242, 802.11 105, user 147: kept as
    raw data, and craft takes the linktype from the format line (no --pcapng needed)."""
    p = tmp_path / "raw.pcap"
    with CaptureWriter(p, linktype=linktype, snaplen=65535, nanosecond=False) as w:
        w.write(Record(5_000_000_000, IPV4, 20, linktype))
        w.write(Record(5_000_001_000, IPV4 + b"xyz", 23, linktype))
    assert_identity(p)


def test_fcs_bits_of_the_linktype_field_are_kept(tmp_path: Path) -> None:
    p = tmp_path / "fcs.pcap"
    with CaptureWriter(p, linktype_flags=0x1000 | 0x2000) as w:  # FCS present, 4 bytes
        w.write(Record(1, ETH, 60))
    assert_identity(p)


def test_default_header_gets_no_format_line() -> None:
    """A file in craft's own default format decodes as records only (docs/reference/jsonl.md)."""
    _rc, out, _ = call(["decode", str(REPO / "pcaps" / "cnp.pcap"), "-f", "jsonl"])
    assert all("index" in json.loads(x) for x in out.decode().splitlines())


# --------------------------------------------------------------------- pcapng
def opt(e: str, code: int, value: bytes) -> bytes:
    return struct.pack(e + "HH", code, len(value)) + value + bytes(-len(value) & 3)


def shb(e: str, *options: bytes, minor: int = 0, section_length: int = -1) -> Block:
    body = struct.pack(e + "IHHq", 0x1A2B3C4D, 1, minor, section_length)
    body += b"".join(options) + (struct.pack(e + "HH", 0, 0) if options else b"")
    return Block(0x0A0D0D0A, body, "little" if e == "<" else "big")


def idb(e: str, linktype: int, snaplen: int, *options: bytes) -> Block:
    body = struct.pack(e + "HHI", linktype, 0, snaplen) + b"".join(options)
    body += struct.pack(e + "HH", 0, 0) if options else b""
    return Block(1, body, "little" if e == "<" else "big")


@pytest.mark.parametrize("e", ["<", ">"], ids=["little", "big"])
def test_pcapng_options_interfaces_and_blocks(tmp_path: Path, e: str) -> None:
    """SHB options (hardware, OS, application), 3 interfaces of 2 linktypes with if_name,
    if_tsresol (ns, default us, 2**-20 s), if_tsoffset; EPB options (epb_flags, comment);
    Name Resolution, Interface Statistics and Custom blocks; a second section."""
    bo = "little" if e == "<" else "big"
    p = tmp_path / "multi.pcapng"
    with CaptureWriter(p, format="pcapng", blocks=True, byte_order=bo) as w:
        w.write_block(shb(e, opt(e, 2, b"x86_64"), opt(e, 3, b"Linux 6.1"),
                          opt(e, 4, b"Dumpcap (Wireshark) 4.0.17")))
        w.write_block(idb(e, 1, 262144, opt(e, 2, b"eth0"), opt(e, 9, b"\x09")))
        w.write_block(idb(e, 101, 65535, opt(e, 2, b"tun0")))
        w.write_block(idb(e, 1, 0, opt(e, 9, b"\x94"), opt(e, 14, struct.pack(e + "q", 10))))
        w.write_block(Block(4, struct.pack(e + "HH", 1, 8) + bytes([10, 0, 0, 1]) + b"h1\0\0"
                            + struct.pack(e + "HH", 0, 0), bo))
        w.write(Record(1_700_000_000_123_456_789, ETH, 60, 1, 0,
                       opt(e, 2, struct.pack(e + "I", 1)) + opt(e, 1, b"a comment")
                       + struct.pack(e + "HH", 0, 0)))
        w.write(Record(1_700_000_000_123_457_000, IPV4, 20, 101, 1))
        w.write(Record(1_700_000_000_500_000_000, ETH, 64, 1, 2))
        w.write(Record(1_700_000_000_123_458_000, IPV4[:10], 20, 101, 1))
        w.write_block(Block(5, struct.pack(e + "III", 1, 0, 7), bo))
        w.write_block(Block(0xBAD, struct.pack(e + "I", 32473) + b"abcd", bo))
        w.write_block(shb(e, minor=2))
        w.write_block(idb(e, 228, 96))
        w.write(Record(1_700_000_001_000_000_000, IPV4, 20, 228, 0))
    assert_identity(p)
    _rc, out, _ = call(["decode", str(p), "-f", "jsonl"])
    lines = [json.loads(x) for x in out.decode().splitlines()]
    assert [next(iter(x)) if "index" not in x else "rec" for x in lines] == [
        "pcapng_shb", "pcapng_idb", "pcapng_idb", "pcapng_idb", "pcapng_block", "rec", "rec",
        "rec", "rec", "pcapng_block", "pcapng_block", "pcapng_shb", "pcapng_idb", "rec"]


def test_pcapng_forced_to_pcap_reports_other_linktypes_per_line(tmp_path: Path) -> None:
    """craft --pcap of a 2-linktype pcapng: the Ethernet records are written, each other one
    is one message (no traceback)."""
    p = tmp_path / "two.pcapng"
    with CaptureWriter(p, format="pcapng") as w:
        w.write(Record(1000, ETH, 60, 1, 0))
        w.write(Record(2000, IPV4, 20, 101, 1))
    rc, jsonl, _ = call(["decode", str(p), "-f", "jsonl"])
    rc, _, err = call(["craft", "-o", str(tmp_path / "o.pcap"), "--pcap"], stdin=jsonl)
    assert rc == 1
    assert err.splitlines()[0] == ("lossless: -:5: linktype: record linktype 101 differs from "
                                   "the file's linktype 1: a classic pcap file holds one "
                                   "linktype (pcapng holds several)")
    assert [r.linktype for r in CaptureReader(str(tmp_path / "o.pcap"))] == [1]


def test_pcap_forced_to_pcapng(tmp_path: Path) -> None:
    p = tmp_path / "us.pcap"
    with CaptureWriter(p, nanosecond=False, byte_order="big") as w:
        w.write(Record(1_000_000, ETH, 60))
    out = roundtrip(p, "--pcapng")
    assert out[:4] == b"\x0a\x0d\x0d\x0a"


# -------------------------------------------------------- files made by Wireshark's tools
TOOLS = all(shutil.which(t) for t in ("editcap", "mergecap", "text2pcap"))


@pytest.mark.skipif(not TOOLS, reason="Wireshark's editcap/mergecap/text2pcap not installed")
@pytest.mark.parametrize("fmt", ["pcap", "nsecpcap", "pcapng"])
def test_editcap_files(tmp_path: Path, fmt: str) -> None:
    for src in PCAPS:
        p = tmp_path / f"{src.stem}.{fmt}"
        subprocess.run(["editcap", "-F", fmt, str(src), str(p)], check=True, timeout=60)
        assert_identity(p)


@pytest.mark.skipif(not TOOLS, reason="Wireshark's editcap/mergecap/text2pcap not installed")
def test_mergecap_and_text2pcap_files(tmp_path: Path) -> None:
    hexdump = tmp_path / "ip.txt"
    hexdump.write_text("0000  45 00 00 1c 00 01 00 00 40 11 00 00 0a 00 00 01\n"
                       "0010  0a 00 00 02 12 b7 12 b7 00 08 00 00\n")
    raw = tmp_path / "raw.pcap"
    subprocess.run(["text2pcap", "-q", "-l", "101", str(hexdump), str(raw)], check=True,
                   timeout=60, capture_output=True)
    assert_identity(raw)
    merged = tmp_path / "merged.pcapng"
    subprocess.run(["mergecap", "-w", str(merged), str(raw), str(PCAPS[0]), str(PCAPS[1])],
                   check=True, timeout=60)
    assert_identity(merged)


# ------------------------------------------------------------------ Hypothesis
@st.composite
def pcap_files(draw) -> bytes:
    buf = io.BytesIO()
    snaplen = draw(st.sampled_from([65535, 262144, 96, 0]))
    linktype = draw(st.sampled_from([1, 101, 197, 228]))
    nanosecond = draw(st.booleans())
    with CaptureWriter(buf, byte_order=draw(st.sampled_from(["little", "big"])), truncate=False,
                       nanosecond=nanosecond, snaplen=snaplen, linktype=linktype,
                       thiszone=draw(st.integers(-(2**31), 2**31 - 1)),
                       sigfigs=draw(st.integers(0, 2**32 - 1)),
                       version=(2, draw(st.integers(0, 65535)))) as w:
        for _ in range(draw(st.integers(0, 6))):
            data = draw(st.binary(max_size=300))  # may exceed the snaplen: kept whole
            ts = draw(st.integers(0, (2**32 - 1) * 10**9))
            if not nanosecond:
                ts -= ts % 1000
            w.write(Record(ts, data, len(data) + draw(st.integers(0, 3)), linktype))
    return buf.getvalue()


@st.composite
def pcapng_files(draw) -> bytes:
    e = draw(st.sampled_from(["<", ">"]))
    bo = "little" if e == "<" else "big"
    buf = io.BytesIO()
    with CaptureWriter(buf, format="pcapng", blocks=True, byte_order=bo) as w:
        for _section in range(draw(st.integers(1, 2))):
            w.write_block(shb(e, *[opt(e, c, draw(st.binary(max_size=9)))
                                   for c in draw(st.lists(st.sampled_from([1, 2, 3, 4]),
                                                          max_size=3))]))
            ifaces = []
            for _ in range(draw(st.integers(1, 3))):
                lt = draw(st.sampled_from([1, 101, 228]))
                res = draw(st.sampled_from([None, 6, 9, 3, 0x80 | 10]))
                opts = [opt(e, 9, bytes([res]))] if res is not None else []
                if draw(st.booleans()):
                    opts.append(opt(e, 2, draw(st.binary(min_size=1, max_size=8))))
                w.write_block(idb(e, lt, draw(st.sampled_from([0, 65535])), *opts))
                ifaces.append((lt, res))
            for _ in range(draw(st.integers(0, 5))):
                k = draw(st.integers(0, len(ifaces) - 1))
                lt, res = ifaces[k]
                step = {None: 1000, 6: 1000, 9: 1, 3: 10**6, 0x80 | 10: None}[res]
                if step is None:  # 2**-10 s units: a timestamp that is a whole unit
                    ts = draw(st.integers(0, 2**40)) * 10**9 >> 10
                    ts = -((-ts * 1024) // 10**9) * 10**9 >> 10
                else:
                    ts = draw(st.integers(0, 2**62 // step)) * step
                data = draw(st.binary(max_size=80))
                options = b""
                if draw(st.booleans()):
                    options = opt(e, 1, draw(st.binary(max_size=7))) + struct.pack(e + "HH",
                                                                                   0, 0)
                w.write(Record(ts, data, len(data) + draw(st.integers(0, 2)), lt, k, options))
                if draw(st.booleans()):
                    w.write_block(Block(draw(st.sampled_from([4, 5, 0xBAD, 0x12345678])),
                                        bytes(4 * draw(st.integers(0, 4))), bo))
    return buf.getvalue()


@given(st.one_of(pcap_files(), pcapng_files()))
def test_decode_craft_is_the_identity_on_generated_captures(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "h.cap"
        p.write_bytes(data)
        assert roundtrip(p) == data


# ------------------------------------------------------------- jq
JQ = Path("/usr/bin/jq")


def docs_jq_recipe() -> tuple[str, str]:
    """The jq commands of docs/howto/craft-captures.md, as the page shows them: the
    byte-for-byte copy and the ECN edit (of pcaps/roce_rc.pcap, into copy.pcap and ce.pcap)."""
    from bench import docs

    cmds = [c.text for b in docs.blocks(REPO / "docs" / "howto" / "craft-captures.md")
            for c in b.commands if "jq" in c.text and "--int-strings" in c.text]
    assert len(cmds) >= 2, "docs/howto/craft-captures.md lost its jq recipe"
    copy = next(c for c in cmds if "jq -c ." in c).replace("\\\n", " ")
    edit = next(c for c in cmds if ".ipv4.ecn = 3" in c).replace("\\\n", " ")
    return copy, edit


@pytest.mark.skipif(not JQ.exists(), reason="/usr/bin/jq (Debian's jq 1.6) not installed")
@pytest.mark.parametrize("pcap", PCAPS, ids=[p.name for p in PCAPS])
def test_docs_jq_recipe_verbatim(pcap: Path, tmp_path: Path) -> None:
    copy, edit = docs_jq_recipe()
    env_path = f"{JQ.parent}:{Path(sys.executable).parent}:/usr/bin:/bin"
    for cmd in (copy, edit):
        shell = cmd.replace("pcaps/roce_rc.pcap", str(pcap))
        r = subprocess.run(["sh", "-c", shell], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120, env={"PATH": env_path})
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert (tmp_path / "copy.pcap").read_bytes() == pcap.read_bytes()
    marked = list(CaptureReader(str(tmp_path / "ce.pcap")))
    assert len(marked) == len(list(CaptureReader(str(pcap))))
    if pcap.name == "roce_rc.pcap":
        assert len(marked) == 40
        rc, out, _ = call(["decode", str(tmp_path / "ce.pcap"), "-f", "jsonl"])
        recs = [json.loads(x) for x in out.decode().splitlines()]
        assert rc == 0 and all(r["ipv4"]["ecn"] == 3 and r["icrc"]["valid"] for r in recs)


def test_int_strings_only_for_integers_beyond_2_53(tmp_path: Path) -> None:
    rc, out, _ = call(["decode", str(REPO / "pcaps" / "roce_rc.pcap"), "-f", "jsonl",
                       "--int-strings"])
    assert rc == 0
    big = []

    def walk(o: object) -> None:
        if isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
        elif isinstance(o, int) and not isinstance(o, bool):
            assert abs(o) <= 2**53
        elif isinstance(o, str) and o.isdigit():
            big.append(int(o))

    recs = [json.loads(x) for x in out.decode().splitlines()]
    for r in recs:
        walk(r)
        assert isinstance(r["ts_ns"], str)
    assert any(v > 2**53 for v in big)


def test_integral_floats_are_ints_and_others_are_refused() -> None:
    assert parse_line('{"ts_ns": 1.7e+18, "x": 3.0, "y": 1.5}') == {
        "ts_ns": 1_700_000_000_000_000_000, "x": 3, "y": 1.5}
    assert parse_line('{"v": 1.8446744073709552e+19}')["v"] == 18446744073709552000
    rec = record_from_dict(parse_line('{"ts_ns": 1.7e+18, "ipv4": {"ttl": 6.4e1}, "udp": {},'
                                      ' "bth": {"psn": 1e2}}'))
    assert rec.ts_ns == 1_700_000_000_000_000_000
    with pytest.raises(ValueError, match="ts_ns"):
        record_from_dict(parse_line('{"ts_ns": 1.5}'))
    with pytest.raises(ValueError, match="psn"):
        record_from_dict(parse_line('{"ipv4": {}, "udp": {}, "bth": {"psn": 2.5}}'))
    with pytest.raises(ValueError, match="va"):  # 2**64 + 2048: out of range, not wrapped
        record_from_dict(parse_line('{"ipv4": {}, "udp": {}, "bth": {"opcode": '
                                    '"RC_RDMA_WRITE_ONLY"}, '
                                    '"reth": {"va": 1.8446744073709554e19}}'))
    rec = record_from_dict({"ts_ns": "1700000000000000123", "ipv4": {}, "udp": {},
                            "bth": {"opcode": "RC_RDMA_WRITE_ONLY"},
                            "reth": {"va": "18446744073709551615"}})
    assert rec.ts_ns == 1_700_000_000_000_000_123

"""Small helpers shared by the codec tests.

* :func:`check_header`: one call checks a header vector both ways (parse, build, size), in
  the style of construct's ``tests/declarativeunittest.py::common``.
* :func:`assert_fields`: a decoded dict contains the expected layers and field values.
* :func:`frame_dict` / :data:`ROCE_FRAMES`: one RoCEv2 frame per opcode of
  :data:`wire.bth.EXT_HEADERS`, built with :func:`wire.build` from seeded random-ish values
  (the frame table of ``test_stack.py`` and ``test_ecn_pfc.py``).
* :func:`posted_pair`: a two-host collective star with one posted flow between them.
* :data:`LEAF_SPINE_FLOWS_TOML`: the ``[topology]`` and ``[[flows]]`` of a fabric file, 2
  leaves x 2 spines x 2 hosts with ECMP and flows 4 -> 6, 5 -> 7 (the fault tests' fabric).
* :func:`geometry`: where the headers, the ICRC and the IP datagram of a valid frame end,
  computed from the field tables (not from the dissector's own bookkeeping).
* :func:`real_file`: a public real-world input (a capture from a real tool), skipped when
  the folder of such files is absent.
* :func:`interpreted`: a module of the compiled core loaded from its ``.py`` (to hold the
  compiled form to its source).
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from wire.bth import EXT_HEADERS
from wire.errors import Truncated
from wire.ib_ext import EXT_SPECS
from wire.spec import HeaderSpec
from wire.stack import build, dissect

__all__ = [
    "LEAF_SPINE_FLOWS_TOML", "ROCE_FRAMES", "Geometry", "assert_fields", "check_header",
    "frame_dict", "geometry", "merge", "posted_pair", "real_file", "unhex",
]

#: Public files from real clusters and tools (each with its source and licence in the
#: folder's README), kept beside the repository, not in it; LOSSLESS_REAL_DIR overrides.
REAL_DIR = Path(os.environ.get("LOSSLESS_REAL_DIR")
                or Path(__file__).resolve().parent.parent.parent / "shared" / "real")


def real_file(rel: str) -> Path:
    """``REAL_DIR / rel``; the test is skipped (with the reason) when it is absent."""
    path = REAL_DIR / rel
    if not path.is_file():
        pytest.skip(f"{rel}: the real-world inputs are not here ({REAL_DIR}; set "
                    f"LOSSLESS_REAL_DIR)")
    return path


def unhex(s: str) -> bytes:
    """Hex text with any whitespace (as copied from a hex dump) -> bytes."""
    return bytes.fromhex("".join(s.split()))


def check_header(spec: HeaderSpec, hex_str: str, fields: Mapping[str, object]) -> dict:
    """Check one header vector both ways.

    ``fields`` are shown values (as :meth:`HeaderSpec.unpack` returns them); fields left out
    must hold their defaults.  Checks: the size, parse (``unpack`` and ``decode``, also at an
    offset inside a larger buffer with garbage either side), build from ``fields`` and from
    the parsed dict, raw-value round trip, and that one byte less raises ``Truncated``.
    Returns the parsed dict.
    """
    data = unhex(hex_str)
    assert spec.size_bytes == len(data), f"{spec.name}: vector is {len(data)} bytes"
    parsed = spec.unpack(data)
    for k, v in fields.items():
        assert parsed[k] == v, f"{spec.name}.{k}: parsed {parsed[k]!r}, expected {v!r}"
    assert spec.pack(fields) == data, f"{spec.name}: build from the vector's fields"
    assert spec.pack(parsed) == data, f"{spec.name}: build from the parsed fields"
    assert spec.pack(spec.unpack_raw(data)) == data
    assert spec.shown(spec.unpack_raw(data)) == parsed
    layer = spec.decode(data)
    assert layer.name == spec.name and dict(layer) == parsed
    framed = b"\xa5" * 3 + data + b"\x5a" * 5
    assert spec.unpack(framed, 3) == parsed
    with pytest.raises(Truncated):
        spec.unpack(data[:-1])
    return parsed


def assert_fields(actual: Mapping, expected: Mapping, where: str = "") -> None:
    """Every key of ``expected`` is in ``actual`` with an equal value; nested dicts and lists
    (VLAN tags) are compared the same way, element by element."""
    for k, want in expected.items():
        path = f"{where}.{k}" if where else str(k)
        assert k in actual, f"{path}: missing (have {sorted(actual)})"
        got = actual[k]
        if isinstance(want, Mapping):
            assert isinstance(got, Mapping), f"{path}: {got!r} is not an object"
            assert_fields(got, want, path)
        elif isinstance(want, list) and want and isinstance(want[0], Mapping):
            assert isinstance(got, list) and len(got) == len(want), f"{path}: {got!r}"
            for i, (g, w) in enumerate(zip(got, want, strict=True)):
                assert_fields(g, w, f"{path}[{i}]")
        else:
            assert got == want, f"{path}: got {got!r}, expected {want!r}"


def merge(a: Mapping, b: Mapping) -> dict:
    """Deep merge of two frame dicts (``b`` wins)."""
    out = {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in a.items()}
    for k, v in b.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = merge(out[k], v)
        else:
            out[k] = v
    return out


# ------------------------------------------------------------------ the RoCE frame table
def _rand_fields(spec: HeaderSpec, rng: random.Random) -> dict:
    out: dict[str, object] = {}
    for f in spec.fields:
        if f.reserved:
            continue
        if f.count == 1:
            out[f.name] = rng.randrange(f.max_value + 1)
        else:
            out[f.name] = [rng.randrange(f.max_value + 1) for _ in range(f.count)]
    return out


def frame_dict(op: int) -> dict:
    """A build() dict for opcode ``op`` with values drawn from a generator seeded by ``op``.

    IPv6 for odd opcodes, IPv4 for even ones; one 802.1Q tag when ``op % 3 == 0``, QinQ when
    ``op % 7 == 0``; payload lengths 0..33 so every PadCnt occurs; ECT(0) so that ECN
    marking applies.
    """
    rng = random.Random(op)
    _name, hdrs = EXT_HEADERS[op]
    d: dict[str, object] = {"eth": {"dst": "02:11:22:33:44:55", "src": "02:66:77:88:99:aa"}}
    if op % 7 == 0:
        d["vlan"] = [{"tpid": 0x88A8, "pcp": rng.randrange(8), "vid": rng.randrange(4096)},
                     {"tpid": 0x8100, "pcp": rng.randrange(8), "vid": rng.randrange(4096)}]
    elif op % 3 == 0:
        d["vlan"] = [{"pcp": rng.randrange(8), "dei": rng.randrange(2),
                      "vid": rng.randrange(4096)}]
    if op % 2:
        d["ipv6"] = {"src": f"fd00::{rng.randrange(1, 1 << 16):x}", "dst": "fd00::1:2",
                     "dscp": 26, "ecn": 2, "flow_label": rng.randrange(1 << 20),
                     "hop_limit": rng.randrange(1, 256)}
    else:
        d["ipv4"] = {"src": f"10.1.{rng.randrange(256)}.{rng.randrange(1, 255)}",
                     "dst": "10.2.0.1", "dscp": 26, "ecn": 2, "id": rng.randrange(1 << 16),
                     "flags": 2, "ttl": rng.randrange(1, 256)}
    d["udp"] = {"sport": rng.randrange(49152, 65536)}
    d["bth"] = {"opcode": op, "dest_qp": rng.randrange(1 << 24), "psn": rng.randrange(1 << 24),
                "ack_req": rng.randrange(2), "se": rng.randrange(2), "m": rng.randrange(2),
                "pkey": rng.choice([0xFFFF, 0x8001, rng.randrange(1 << 16)])}
    for h in hdrs:
        d[h] = {} if h == "cnp" else _rand_fields(EXT_SPECS[h], rng)
    if "cnp" not in hdrs:
        n = rng.choice([0, 1, 2, 3, 4, 5, 7, 16, 33])
        d["payload"] = {"data": bytes(rng.randrange(256) for _ in range(n)).hex()}
    return d


#: (id, frame) for every opcode of EXT_HEADERS.
ROCE_FRAMES: list[tuple[str, bytes]] = [
    (f"{op:#04x}-{EXT_HEADERS[op][0]}", build(frame_dict(op))) for op in EXT_HEADERS
]


@dataclass(frozen=True)
class Geometry:
    """Byte offsets in a valid RoCEv2 frame."""

    ip: int           # IP header start
    udp: int          # UDP header start
    headers_end: int  # end of BTH + extended headers (payload start)
    icrc: int         # ICRC start
    end: int          # end of the IP datagram (= end of the ICRC); Ethernet padding follows


def geometry(frame: bytes) -> Geometry:
    """Offsets of a valid (untruncated, consistent) RoCEv2 frame, from its length fields."""
    d = dissect(frame)
    assert not d.problems, d.problems
    ip = 14 + 4 * len(d.get("vlan", []))
    udp = ip + (d["ipv4"]["ihl"] * 4 if "ipv4" in d else 40)
    ulen = d["udp"]["length"]
    ext = sum(EXT_SPECS[h].size_bytes for h in EXT_HEADERS[d["bth"]["opcode"]][1])
    return Geometry(ip=ip, udp=udp, headers_end=udp + 8 + 12 + ext, icrc=udp + ulen - 4,
                    end=udp + ulen)


def run_cli(args: list[str], stdin: bytes | None = None) -> tuple[int, str, str]:
    """Run ``lossless ARGS`` in-process: (exit status, stdout, stderr).  A usage error's
    ``SystemExit`` becomes its exit status; ``stdin`` (bytes) replaces standard input."""
    import contextlib
    import io
    import sys

    from sim.cli import main

    out, err = io.StringIO(), io.StringIO()
    old_stdin = sys.stdin
    if stdin is not None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(args)
            except SystemExit as e:
                rc = e.code
    finally:
        sys.stdin = old_stdin
    return rc, out.getvalue(), err.getvalue()


#: A fabric file's ``[topology]`` and ``[[flows]]`` (module docstring); prepend a ``[run]``.
LEAF_SPINE_FLOWS_TOML = """[topology]
kind = "leaf_spine"
leaves = 2
spines = 2
hosts_per_leaf = 2
ecmp = true
[[flows]]
src = 4
dst = 6
[[flows]]
src = 5
dst = 7
"""


def posted_pair(link_gbps: float, fid: int = 7, packet_bytes: int = 1082, **star_kw):
    """``(star, fabric, a, b, flow)``: :func:`sim.fabric.rail.collective_star` of 2 ranks at
    ``link_gbps`` and a posted flow ``fid`` from rank 0's host ``a`` to rank 1's ``b``
    (added to both, sending nothing until :meth:`sim.nic.host.Host.post`)."""
    from sim.fabric.rail import collective_star
    from sim.nic.host import Flow

    f = collective_star(2, link_gbps=link_gbps, **star_kw)
    fab = f.fabric
    a, b = (fab.nodes[h] for h in f.ranks)
    flow = Flow(fid, a.node_id, b.node_id, a.port.rate_bps, packet_bytes=packet_bytes)
    fab.flows[fid] = flow
    a.add_posted_flow(flow)
    b.expect(flow)
    return f, fab, a, b, flow


def interpreted(module):
    """``module`` (one of :data:`sim._core.COMPILED`) loaded afresh from its ``.py``, whatever
    the core in use: its functions run as Python."""
    import importlib.util
    import sys

    path = Path(module.__file__).with_name(module.__name__.rsplit(".", 1)[-1] + ".py")
    spec = importlib.util.spec_from_file_location(f"_py_{module.__name__}", path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses and the like look their module up
    try:
        spec.loader.exec_module(mod)
    finally:
        del sys.modules[spec.name]
    return mod

"""Hypothesis strategies derived from the field tables, and whole valid frames.

Per header (any :class:`~wire.spec.HeaderSpec`, e.g. ``wire.SPECS["bth"]``):

* :func:`raw_values` - a dict of raw integers, each in range for its width (lists for arrays),
  every field present (reserved bits and unknown enum values included: every bit round-trips);
* :func:`shown_values` - the same as ``spec.unpack`` shows them: MACs as ``"aa:bb:.."``, dotted
  quads, RFC 5952 IPv6 text, hex strings (drawn as bytes and formatted here, independently of
  :func:`wire.spec.format_value`);
* :func:`header_bytes` - ``spec.size_bytes`` random bytes.

Whole frames, through :func:`wire.build`:

* :func:`frame_dicts` - the dict given to ``build``: RoCEv2 (Ethernet + 0..2 VLAN tags, IPv4
  with or without options or IPv6, UDP to port 4791, a BTH with any opcode of
  :data:`wire.bth.EXT_HEADERS` (CNP included) with the right extended headers holding random
  values and 0..64 bytes of payload), PFC and PAUSE frames;
* :func:`frames` - the same, built to bytes.

"Valid" means what a correct sender emits around the randomised fields: lengths, checksums,
PadCnt and ICRC computed by ``build``, no IP fragments, PFC class-enable vectors with the
reserved high byte zero, MAC Control frames to 01:80:c2:00:00:01.  This module is the only
one that imports Hypothesis; ``import wire`` does not.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from hypothesis import strategies as st

from . import build
from .bth import EXT_HEADERS
from .ethernet import VLAN_TPIDS
from .ib_ext import EXT_SPECS
from .roce import CNP_OPCODE
from .spec import Field, HeaderSpec
from .stack import SPECS

__all__ = [
    "FRAME_KINDS", "OPCODES", "field_values", "frame_dicts", "frames", "header_bytes",
    "ip_options", "raw_values", "shown_values",
]

#: Every opcode with a defined set of extended headers (CNP included).
OPCODES: tuple[int, ...] = tuple(EXT_HEADERS)
#: The kinds of frame :func:`frame_dicts` draws.
FRAME_KINDS = ("roce", "pfc", "pause")


def _element(f: Field) -> st.SearchStrategy[int]:
    # The edges (all zeros, lowest bit, all ones) are drawn often on purpose.
    return st.one_of(st.sampled_from((0, 1, f.max_value)),
                     st.integers(min_value=0, max_value=f.max_value))


def field_values(f: Field) -> st.SearchStrategy:
    """Raw values of one field: an int in range, or a list of ``count`` of them."""
    el = _element(f)
    return el if f.count == 1 else st.lists(el, min_size=f.count, max_size=f.count)


def raw_values(spec: HeaderSpec) -> st.SearchStrategy[dict[str, object]]:
    """Every field of ``spec`` as raw integers in range (lists for arrays)."""
    return st.fixed_dictionaries({f.name: field_values(f) for f in spec.fields})


def _ipv6_text(b: bytes) -> str:
    """RFC 5952 text, IPv4-mapped addresses in mixed notation (section 5) on every Python."""
    if b[:12] == bytes(10) + b"\xff\xff":
        return "::ffff:" + ".".join(str(x) for x in b[12:])
    return str(ipaddress.IPv6Address(b))


def _shown_element(f: Field) -> st.SearchStrategy[object]:
    n = f.bits // 8
    if f.fmt == "mac":
        return st.binary(min_size=6, max_size=6).map(lambda b: ":".join(f"{x:02x}" for x in b))
    if f.fmt == "ipv4":
        return st.binary(min_size=4, max_size=4).map(lambda b: ".".join(str(x) for x in b))
    if f.fmt == "ipv6":
        return st.one_of(
            st.binary(min_size=16, max_size=16),
            st.binary(min_size=4, max_size=4).map(lambda b: bytes(10) + b"\xff\xff" + b),
        ).map(_ipv6_text)
    if f.fmt == "hex":
        return st.binary(min_size=n, max_size=n).map(bytes.hex)
    return _element(f)


def shown_values(spec: HeaderSpec) -> st.SearchStrategy[dict[str, object]]:
    """Every field of ``spec`` as :meth:`HeaderSpec.unpack` shows it."""
    out = {}
    for f in spec.fields:
        el = _shown_element(f)
        out[f.name] = el if f.count == 1 else st.lists(el, min_size=f.count, max_size=f.count)
    return st.fixed_dictionaries(out)


def header_bytes(spec: HeaderSpec) -> st.SearchStrategy[bytes]:
    """``spec.size_bytes`` arbitrary bytes (every bit pattern decodes)."""
    return st.binary(min_size=spec.size_bytes, max_size=spec.size_bytes)


# ---------------------------------------------------------------------- frames
def _mac() -> st.SearchStrategy[str]:
    return _shown_element(SPECS["eth"].field("src"))


@st.composite
def ip_options(draw) -> str:
    """Well-formed IPv4 options (RFC 791 3.1), 4..40 bytes, as hex: NOPs, Router Alert
    (RFC 2113) and unassigned type-length-value options, padded with End of Options."""
    out = b""
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(("nop", "ra", "tlv")))
        if kind == "nop":
            item = b"\x01"
        elif kind == "ra":
            item = b"\x94\x04\x00\x00"
        else:
            data = draw(st.binary(max_size=6))
            item = bytes((draw(st.sampled_from((0x1E, 0x5E, 0x9E))), 2 + len(data))) + data
        if len(out) + len(item) > 40:
            break
        out += item
    out += bytes(-len(out) % 4)
    return out.hex()


def _vlan_tags(max_tags: int, tpids: Iterable[int]) -> st.SearchStrategy[list[dict]]:
    tag = st.fixed_dictionaries({
        "tpid": st.sampled_from(sorted(tpids)),
        "pcp": st.integers(0, 7), "dei": st.integers(0, 1), "vid": st.integers(0, 4095),
    })
    return st.lists(tag, min_size=0, max_size=max_tags)


@st.composite
def _roce(draw, opcodes, ip_versions, max_vlan_tags, tpids, with_options) -> dict:
    d: dict[str, object] = {"eth": {"src": draw(_mac()), "dst": draw(_mac())}}
    tags = draw(_vlan_tags(max_vlan_tags, tpids))
    if tags:
        d["vlan"] = tags
    version = draw(st.sampled_from(sorted(ip_versions)))
    if version == 4:
        ip = {
            "src": draw(_shown_element(SPECS["ipv4"].field("src"))),
            "dst": draw(_shown_element(SPECS["ipv4"].field("dst"))),
            "dscp": draw(st.integers(0, 63)), "ecn": draw(st.integers(0, 3)),
            "id": draw(st.integers(0, 0xFFFF)), "flags": draw(st.sampled_from((0, 2))),
            "ttl": draw(st.integers(1, 255)),
        }
        if with_options and draw(st.booleans()):
            ip["options"] = draw(ip_options())
        d["ipv4"] = ip
    else:
        d["ipv6"] = {
            "src": draw(_shown_element(SPECS["ipv6"].field("src"))),
            "dst": draw(_shown_element(SPECS["ipv6"].field("dst"))),
            "dscp": draw(st.integers(0, 63)), "ecn": draw(st.integers(0, 3)),
            "flow_label": draw(st.integers(0, 0xFFFFF)), "hop_limit": draw(st.integers(1, 255)),
        }
    d["udp"] = {"sport": draw(st.integers(0, 0xFFFF)),
                **({"checksum": "auto"} if draw(st.booleans()) else {})}
    op = draw(st.sampled_from(sorted(opcodes)))
    bth = draw(raw_values(SPECS["bth"]))
    bth["opcode"] = op
    del bth["pad_count"]  # computed by build from the payload length
    d["bth"] = bth
    for h in EXT_HEADERS[op][1]:
        d[h] = draw(raw_values(EXT_SPECS[h]))
    if op == CNP_OPCODE:
        # A CNP carries no payload; its reserved bytes are zero, or anything (every bit
        # round-trips) now and then.
        d["bth"]["becn"] = draw(st.sampled_from((1, 1, 1, 0)))
        if draw(st.integers(0, 3)) != 0:
            d["cnp"] = {"reserved": "00" * 16}
    else:
        d["payload"] = {"data": draw(st.binary(max_size=64)).hex()}
    return d


@st.composite
def _pfc(draw) -> dict:
    return {
        "eth": {"src": draw(_mac())},
        "mac_control": {},
        "pfc": {"class_enable": draw(st.integers(0, 0xFF)),
                "quanta": draw(field_values(SPECS["pfc"].field("quanta")))},
    }


@st.composite
def _pause(draw) -> dict:
    return {"eth": {"src": draw(_mac())}, "mac_control": {},
            "pause": {"quanta": draw(st.integers(0, 0xFFFF))}}


def frame_dicts(kinds: Iterable[str] = FRAME_KINDS, *, opcodes: Iterable[int] = OPCODES,
                ip_versions: Iterable[int] = (4, 6), max_vlan_tags: int = 2,
                tpids: Iterable[int] = VLAN_TPIDS, ipv4_options: bool = True,
                ) -> st.SearchStrategy[dict]:
    """Dicts for :func:`wire.build` describing complete, valid frames of the given kinds.

    ``opcodes``, ``ip_versions``, ``max_vlan_tags``, ``tpids`` and ``ipv4_options`` narrow
    the RoCEv2 frames (e.g. to what another tool supports).
    """
    kinds = tuple(kinds)
    bad = set(kinds) - set(FRAME_KINDS)
    if bad or not kinds:
        raise ValueError(f"kinds must be a non-empty subset of {FRAME_KINDS}, got {kinds}")
    ops = tuple(opcodes)
    unknown = set(ops) - set(OPCODES)
    if unknown:
        raise ValueError(f"opcodes without a defined header layout: {sorted(unknown)}")
    by_kind: dict[str, st.SearchStrategy[dict]] = {}
    if "roce" in kinds:
        by_kind["roce"] = _roce(ops, tuple(ip_versions), max_vlan_tags, tuple(tpids),
                                ipv4_options)
    if "pfc" in kinds:
        by_kind["pfc"] = _pfc()
    if "pause" in kinds:
        by_kind["pause"] = _pause()
    # RoCEv2 frames have far more shapes than MAC Control frames: draw them 4 times as often.
    weighted = [k for k in by_kind for _ in range(4 if k == "roce" else 1)]
    return st.sampled_from(weighted).flatmap(by_kind.__getitem__)


def frames(kinds: Iterable[str] = FRAME_KINDS, **kw) -> st.SearchStrategy[bytes]:
    """Complete valid frames as bytes: :func:`frame_dicts` built with :func:`wire.build`."""
    return frame_dicts(kinds, **kw).map(build)

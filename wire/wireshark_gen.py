"""Generate the Wireshark Lua dissector for the scale-up headers from the field tables.

``python -m wire.wireshark_gen --write`` writes ``wire/wireshark/lossless_scaleup.lua``;
``--check`` exits 1 when the committed file is stale; no option prints the Lua.

Everything a bit position decides comes from :meth:`wire.spec.HeaderSpec.layout`: each field's
ProtoField type (uint8/16/24/32/64 by the bytes it touches, ``ether`` for ``mac``, ``bytes``
for ``hex``), its mask, and the (byte, length, shift, mask) the Lua reads the few values the
framing needs (``op``, ``opcode``, ``last``, ``length``, ``next_header``, ``type``, the R-CRC).
Value strings come from ``Field.enum``; preference defaults from
:data:`wire.scaleup.DEFAULT_SCALEUP`.  Neither this module nor the Lua writes a bit position
by hand.  The hand-written part of the Lua (:data:`_FRAMING`) is the layering of
:mod:`wire.stack` (``_esun``, ``_sunh``, ``_afh_gen1``, ``_afh_gen2``, ``_sue``) transcribed,
with the same problem texts (as expert infos, with frame offsets) so that a test can compare
them one for one.

Protocols (one per layer of our JSON, field abbreviations = our JSON names): ``esun``,
``sunh``, ``afh`` (Gen1 and both Gen2 forms; ``afh.form`` generated), ``sue_rh``, ``sue_txn``
(one tree item per transaction, ``sue_txn.data`` the data bytes), ``rcrc`` (``rcrc.valid`` a
generated boolean).  Bytes after the SUE PDU at the Ethernet level (padding) are
``esun.trailer`` / ``sunh.trailer`` / ``afh.trailer`` (Lua cannot shrink the tvb the way C
dissectors hand the rest back to the Ethernet dissector as ``eth.padding``); bytes left
undissected after a problem (our ``raw``) go to Wireshark's ``data`` dissector.

AFH Gen2 replaces the Ethernet DA/SA, which Wireshark's Ethernet dissector has already
decoded as ``eth.dst``/``eth.src`` by the time the ``ethertype`` table calls us.  The ``afh``
dissector, registered on the SUE EtherType, finds the Ethernet header it follows through a
``Field.new("eth")`` extractor: the ``eth`` item whose raw offset is 14 bytes before its own
tvb (``Tvb:offset()``); ``FieldInfo.range:tvb()`` then gives those 14 frame bytes, from which
the AFH fields are added (so they highlight the DA/SA bytes).  No such item (a VLAN tag in
between, or not an Ethernet frame): the payload is not AFH Gen2 and is shown as data, as
:mod:`wire.stack` does.  The ``eth`` layer stays in the tree beside ``afh``.

UDP after SUNH goes to Wireshark's own ``udp`` dissector (whose ``udp.port`` table hands the
SUE port to ``sue_rh``), except when ``udp.check_checksum`` is on and the checksum is not zero:
Wireshark 4.0's UDP then asserts (it has no pseudo-header but IPv4's and IPv6's), so the Lua
shows the UDP header as data (expert ``sunh.udp_not_dissected``) and dissects the SUE PDU
itself.  Preferences (:data:`PREFS`, one per :class:`~wire.scaleup.ScaleUpConfig` field the
dissector needs) re-register the dissectors in ``prefs_changed``; :func:`prefs_args` turns a
config into tshark ``-o`` options.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from enum import IntEnum
from pathlib import Path

from .esun import ESUN
from .ethernet import ETHERNET
from .ipv4 import IPPROTO_UDP
from .scaleup import DEFAULT_SCALEUP, TRANSPORTS, ScaleUpConfig
from .spec import Field, HeaderSpec
from .sue import (
    AFH_GEN1,
    AFH_GEN2_6,
    AFH_GEN2_12,
    MAX_TXN_DATA_BYTES,
    RCRC,
    SUE_RH,
    SueOp,
    txn_spec,
)
from .sunh import SUNH
from .udp import UDP

__all__ = [
    "LUA_PATH", "PROTOS", "PREFS", "EXPERTS", "LUA_ONLY_EXPERTS", "Pref", "Expert", "render",
    "prefs_args", "expert_for_problem", "main",
]

#: Where the generated dissector lives (shipped inside the ``wire`` package).
LUA_PATH = Path(__file__).resolve().parent / "wireshark" / "lossless_scaleup.lua"

#: Wireshark protocol (= our JSON layer name) -> (description, the field tables it shows).
PROTOS: dict[str, tuple[str, tuple[HeaderSpec, ...]]] = {
    "esun": (ESUN.title, (ESUN,)),
    "sunh": (SUNH.title, (SUNH,)),
    "afh": ("AI Forwarding Header (AFH Gen1 shim, AFH Gen2 12- and 6-byte forms)",
            (AFH_GEN1, AFH_GEN2_12, AFH_GEN2_6)),
    "sue_rh": (SUE_RH.title, (SUE_RH,)),
    "sue_txn": ("SUE packed transaction [A]", (txn_spec(8), txn_spec(16))),
    "rcrc": (RCRC.title, (RCRC,)),
}
#: Output-only keys of the specs (``HeaderSpec.derived``) -> how the Lua shows them.
_DERIVED = {"data": "bytes", "valid": "bool", "form": "string", "reason": "string"}
#: Integer fields shown in hex (EtherTypes, the R-CRC); the rest in decimal.
_HEX_FIELDS = ("type", "value")
#: Protocols registered on an EtherType: bytes after the SUE PDU are their ``trailer``.
_NET_PROTOS = ("esun", "sunh", "afh")


# ============================================================== preferences
@dataclass(frozen=True)
class Pref:
    """A Wireshark preference ``proto.name`` that sets the ScaleUpConfig field ``config``.

    ``kind``: ``id`` (an EtherType or port, a string pref so that ``-o`` takes ``0x88B5`` as
    well as ``34997``: Lua's ``Pref.uint`` parses decimal only), ``uint`` (decimal) or
    ``enum`` (one of ``choices``, given to ``-o`` by name)."""

    config: str
    proto: str
    name: str
    kind: str
    label: str
    lo: int = 0
    hi: int = 0
    choices: tuple = ()


_ETHERTYPE = (0x0600, 0xFFFF)
PREFS: tuple[Pref, ...] = (
    Pref("esun_ethertype", "esun", "ethertype", "id", "ESUN EH EtherType (placeholder)",
         *_ETHERTYPE),
    Pref("esun_transport", "esun", "transport", "enum",
         "Transport after the EH (ESUN has no next-header field)", choices=TRANSPORTS),
    Pref("sunh_ethertype", "sunh", "ethertype", "id", "SUNH EtherType (placeholder)",
         *_ETHERTYPE),
    Pref("sunh_sue_protocol", "sunh", "sue_protocol", "uint",
         "SUNH next_header value of the SUE transport", 0, 255),
    Pref("afh_gen1_ethertype", "afh", "gen1_ethertype", "id",
         "AFH Gen1 shim EtherType (placeholder)", *_ETHERTYPE),
    Pref("sue_ethertype", "afh", "sue_ethertype", "id",
         "SUE EtherType: after AFH Gen2 addresses and in the AFH Gen1 shim (placeholder)",
         *_ETHERTYPE),
    Pref("afh_gen2_form", "afh", "gen2_form", "enum",
         "AFH Gen2 form of frames under the SUE EtherType (bytes)", choices=("12", "6")),
    Pref("afh_gen2_12_transport", "afh", "gen2_12_transport", "enum",
         "Transport after the 12-byte AFH Gen2 form", choices=TRANSPORTS),
    Pref("afh_gen2_6_transport", "afh", "gen2_6_transport", "enum",
         "Transport after the 6-byte AFH Gen2 form (SUE-Lite)", choices=TRANSPORTS),
    Pref("sue_udp_port", "sue_rh", "udp_port", "id",
         "UDP destination port of SUE over IP/UDP or SUNH/UDP (placeholder)", 1, 0xFFFF),
    Pref("txn_hdr_bytes", "sue_txn", "hdr_bytes", "enum",
         "Transaction descriptor size (bytes) [A]", choices=(8, 16)),
    Pref("max_pdu_bytes", "sue_txn", "max_pdu_bytes", "uint",
         "Maximum SUE PDU (descriptors + data, bytes)", 1, 0xFFFFFFFF),
    Pref("max_pdu_lite_bytes", "sue_txn", "max_pdu_lite_bytes", "uint",
         "Maximum SUE-Lite PDU (descriptors + data, bytes)", 1, 0xFFFFFFFF),
)
#: ScaleUpConfig fields without a preference: not used by a dissector.
PREFS_NOT_NEEDED = ("cos_to_tc",)
# Every ScaleUpConfig field is a preference or named in PREFS_NOT_NEEDED.
assert {p.config for p in PREFS} | set(PREFS_NOT_NEEDED) == {f.name for f in fields(ScaleUpConfig)}


def _pref_value_text(p: Pref, v: object) -> str:
    if p.kind == "id":
        return f"0x{v:04X}"
    return str(v)


def prefs_args(cfg: ScaleUpConfig = DEFAULT_SCALEUP, *, all_prefs: bool = False) -> list[str]:
    """tshark ``-o`` options that make the Lua dissector use ``cfg`` (only the settings that
    differ from the defaults unless ``all_prefs``)."""
    out = []
    for p in PREFS:
        v = getattr(cfg, p.config)
        if all_prefs or v != getattr(DEFAULT_SCALEUP, p.config):
            out += ["-o", f"{p.proto}.{p.name}:{_pref_value_text(p, v)}"]
    return out


# ================================================================ expert infos
@dataclass(frozen=True)
class Expert:
    """An expert info of the Lua and the problems of :func:`wire.dissect` it stands for."""

    key: str
    abbr: str
    group: str
    severity: str
    text: str
    problem: str  # regex matched against our problem lines


EXPERTS: tuple[Expert, ...] = (
    Expert("esun_truncated", "esun.truncated", "MALFORMED", "ERROR",
           "ESUN EH truncated", r"esun: truncated"),
    Expert("sunh_truncated", "sunh.truncated", "MALFORMED", "ERROR",
           "SUNH truncated", r"sunh: truncated"),
    Expert("afh_truncated", "afh.truncated", "MALFORMED", "ERROR",
           "AFH truncated", r"afh: truncated"),
    Expert("sue_rh_short", "sue_rh.short_datagram", "MALFORMED", "ERROR",
           "UDP datagram too short for the SUE RH", r"sue_rh: the datagram has"),
    Expert("sue_rh_truncated", "sue_rh.truncated", "MALFORMED", "ERROR",
           "SUE RH truncated", r"sue_rh: truncated"),
    Expert("sue_txn_truncated", "sue_txn.truncated", "MALFORMED", "ERROR",
           "transactions end without a descriptor with last=1 (descriptor truncated)",
           r"sue_txn\[\d+\]: truncated"),
    Expert("sue_txn_opcode_zero", "sue_txn.opcode_zero", "PROTOCOL", "ERROR",
           "opcode 0 is not a transaction (no descriptor with last=1 before it)",
           r"sue_txn\[\d+\]\.opcode: 0 "),
    Expert("sue_txn_length", "sue_txn.length_beyond_frame", "MALFORMED", "ERROR",
           "transaction length exceeds the bytes that follow",
           r"sue_txn\[\d+\]\.length: \d+ but only"),
    Expert("sue_txn_too_long", "sue_txn.too_long", "PROTOCOL", "WARN",
           f"transaction data over {MAX_TXN_DATA_BYTES} bytes",
           r"sue_txn\[\d+\]\.length: \d+ exceeds"),
    Expert("sue_pdu_too_big", "sue_txn.pdu_too_big", "PROTOCOL", "WARN",
           "transactions exceed the PDU limit", r"sue: \d+ bytes of transactions exceed"),
    Expert("rcrc_truncated", "rcrc.truncated", "MALFORMED", "ERROR",
           "R-CRC truncated", r"rcrc: truncated"),
    Expert("rcrc_bad", "rcrc.bad", "CHECKSUM", "ERROR",
           "R-CRC mismatch", r"rcrc: 0x[0-9a-f]{8} on the wire"),
    Expert("sue_extra", "sue_rh.extra_bytes", "PROTOCOL", "WARN",
           "bytes after the SUE PDU inside the UDP datagram", r"sue: \d+ bytes after the end"),
)
#: Expert infos of the Lua with no counterpart among our problems.
LUA_ONLY_EXPERTS: tuple[Expert, ...] = (
    Expert("sunh_udp_not_dissected", "sunh.udp_not_dissected", "UNDECODED", "NOTE",
           "UDP over SUNH not handed to Wireshark's UDP (udp.check_checksum is on)", ""),
)
_EXPERT_RES = [(e, re.compile(e.problem)) for e in EXPERTS]


def expert_for_problem(problem: str) -> str | None:
    """Abbreviation of the expert info the Lua raises for one of our problem lines."""
    for e, rx in _EXPERT_RES:
        if rx.match(problem):
            return e.abbr
    return None


# ================================================================== the fields
@dataclass(frozen=True)
class _Item:
    """One element of a field as the Lua adds it: ``n`` bytes from ``byte``; the value is
    ``(uint >> shift) & mask`` of those bytes (``shift`` None: not readable as a number)."""

    field: Field
    byte: int
    n: int
    shift: int | None
    mask: int | None
    pf: str  # ProtoField constructor call


def _lua_str(s: str) -> str:
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif ch == "\n":
            out.append("\\n")
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            out.extend(f"\\{b}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


def _enum_table(enum: type[IntEnum]) -> str:
    return "{ " + ", ".join(f"[{int(m)}] = {_lua_str(m.name)}" for m in enum) + " }"


def _items(proto: str, spec: HeaderSpec, vs_names: dict[type, str]) -> list[_Item]:
    out = []
    for f, _i, pos in spec.layout():
        b0, b1 = pos // 8, (pos + f.bits - 1) // 8 + 1
        n = b1 - b0
        shift = 8 * n - (pos - 8 * b0) - f.bits
        abbr = _lua_str(f"{proto}.{f.name}")
        desc = _lua_str(f.doc)
        aligned = shift == 0 and pos % 8 == 0
        if f.fmt == "int" and n <= 4:
            ctor = {1: "uint8", 2: "uint16", 3: "uint24", 4: "uint32"}[n]
            full = f.bits == 8 * n
            mask = None if full else f.max_value << shift
            base = "base.HEX" if f.name in _HEX_FIELDS else "base.DEC"
            vs = vs_names[f.enum] if f.enum is not None else "nil"
            pf = (f"ProtoField.{ctor}({abbr}, {_lua_str(f.name)}, {base}, {vs}, "
                  f"{'nil' if mask is None else f'0x{mask:X}'}, {desc})")
            out.append(_Item(f, b0, n, shift, f.max_value, pf))
            continue
        if not aligned:
            raise NotImplementedError(f"{spec.name}.{f.name}: a {f.bits}-bit {f.fmt} field at "
                                      f"bit {pos} spans {n} bytes unaligned")
        if f.fmt == "int" and n == 8:
            vs = vs_names[f.enum] if f.enum is not None else "nil"
            pf = f"ProtoField.uint64({abbr}, {_lua_str(f.name)}, base.DEC, {vs}, nil, {desc})"
        elif f.fmt == "mac" and n == 6:
            pf = f"ProtoField.ether({abbr}, {_lua_str(f.name)}, {desc})"
        elif f.fmt == "ipv4" and n == 4:
            pf = f"ProtoField.ipv4({abbr}, {_lua_str(f.name)}, {desc})"
        elif f.fmt == "ipv6" and n == 16:
            pf = f"ProtoField.ipv6({abbr}, {_lua_str(f.name)}, {desc})"
        elif f.fmt == "hex":
            pf = f"ProtoField.bytes({abbr}, {_lua_str(f.name)}, base.NONE, {desc})"
        else:
            raise NotImplementedError(f"{spec.name}.{f.name}: {f.bits}-bit {f.fmt} field")
        out.append(_Item(f, b0, n, None, None, pf))
    return out


def _derived_pf(proto: str, key: str) -> str:
    kind = _DERIVED.get(key)
    abbr, name = _lua_str(f"{proto}.{key}"), _lua_str(key)
    if kind == "bytes":
        return f"ProtoField.bytes({abbr}, {name}, base.NONE)"
    if kind == "bool":
        return f"ProtoField.bool({abbr}, {name}, base.NONE)"
    if kind == "string":
        return f"ProtoField.string({abbr}, {name})"
    raise NotImplementedError(f"{proto}: no Lua form for the derived key {key!r}")


# ================================================================== rendering
_HEADER = """\
-- lossless_scaleup.lua: Wireshark dissectors for the scale-up Ethernet headers of lossless
-- (OCP ESUN EH, IETF SUNH draft-00, SUE reliability header + packed transactions + R-CRC,
-- AFH Gen1 shim and AFH Gen2 address forms).
--
-- GENERATED by `python -m wire.wireshark_gen --write` from the field tables of wire/esun.py,
-- wire/sunh.py and wire/sue.py and the defaults of wire/scaleup.py.  DO NOT EDIT: change the
-- tables (or wire/wireshark_gen.py) and regenerate; `python -m wire.wireshark_gen --check`
-- fails while this file is stale.  License: GPL-2.0-or-later (as lossless).
--
-- Use:     tshark -X lua_script:lossless_scaleup.lua -r capture.pcap
--   or copy it to ~/.local/lib/wireshark/plugins/ (`lossless wireshark-plugin --install`).
-- Every EtherType, port and protocol number below is a PLACEHOLDER [A] (none is assigned);
-- change them with preferences, e.g. tshark -o esun.ethertype:0x88B5
-- (wire/wireshark/README.md):
"""


def render() -> str:
    """The Lua source."""
    out: list[str] = [_HEADER]
    for p in PREFS:
        v = getattr(DEFAULT_SCALEUP, p.config)
        full = f"{p.proto}.{p.name}"
        out.append(f"--   {full:<28} default {_pref_value_text(p, v):<8} {p.label}\n")
    out.append("\nlocal P, PF, H, E, X, F = {}, {}, {}, {}, {}, {}\n\n")

    out.append("-- ======================================================== protocols\n")
    for name, (title, _specs) in PROTOS.items():
        out.append(f"P[{_lua_str(name)}] = Proto({_lua_str(name)}, {_lua_str(title)})\n")

    out.append("\n-- ============================================= value strings (Field.enum)\n")
    vs_names: dict[type, str] = {}
    for _name, (_t, specs) in PROTOS.items():
        for spec in specs:
            for f in spec.fields:
                if f.enum is not None and f.enum not in vs_names:
                    vs_names[f.enum] = f"VS_{f.enum.__name__}"
                    out.append(f"local {vs_names[f.enum]} = {_enum_table(f.enum)}\n")

    out.append("\n-- ========================== fields and header tables (HeaderSpec.layout)\n"
               "-- Header table entries: the field, its bytes (from `byte`, `n` long) and how\n"
               "-- the Lua reads its value: (uint of those bytes >> shift) & mask.\n")
    pf_index: dict[str, int] = {}
    proto_pfs: dict[str, list[int]] = {name: [] for name in PROTOS}

    def pf_ref(proto: str, ctor: str) -> str:
        if ctor not in pf_index:
            pf_index[ctor] = len(pf_index) + 1
            out.append(f"PF[{pf_index[ctor]}] = {ctor}\n")
            proto_pfs[proto].append(pf_index[ctor])
        return f"PF[{pf_index[ctor]}]"

    tables: list[str] = []
    for proto, (_t, specs) in PROTOS.items():
        for spec in specs:
            rows = []
            for it in _items(proto, spec, vs_names):
                ref = pf_ref(proto, it.pf)
                read = ("" if it.shift is None
                        else f", shift = {it.shift}, mask = 0x{it.mask:X}")
                if it.field.enum is not None:
                    read += f", vs = {vs_names[it.field.enum]}"
                rows.append(f"    {{ name = {_lua_str(it.field.name)}, f = {ref}, "
                            f"byte = {it.byte}, n = {it.n}{read} }},\n")
            tables.append(f"H[{_lua_str(spec.name)}] = {{ proto = P[{_lua_str(proto)}], "
                          f"size = {spec.size_bytes}, fields = {{\n" + "".join(rows) + "} }\n")
            for key in spec.derived:
                ref = pf_ref(proto, _derived_pf(proto, key))
                tables.append(f"F[{_lua_str(f'{proto}.{key}')}] = {ref}\n")
        if proto in _NET_PROTOS:
            ref = pf_ref(proto, f"ProtoField.bytes({_lua_str(proto + '.trailer')}, "
                                f"\"trailer\", base.NONE, "
                                f"\"Ethernet padding/trailer after the PDU\")")
            tables.append(f"F[{_lua_str(proto + '.trailer')}] = {ref}\n")
    out.append("\n")
    out.extend(tables)
    out.append("for _, h in pairs(H) do\n  h.by = {}\n"
               "  for _, e in ipairs(h.fields) do h.by[e.name] = e end\nend\n")
    out.append("local TXN_SPECS = { "
               + ", ".join(f"[{b}] = H[{_lua_str(txn_spec(b).name)}]" for b in (8, 16))
               + " }\n")
    out.append("local AFH_GEN2 = { [\"12\"] = { form = \"gen2_12\", h = H[\"afh_gen2_12\"] },"
               " [\"6\"] = { form = \"gen2_6\", h = H[\"afh_gen2_6\"] } }\n")
    assert AFH_GEN2_12.name == "afh_gen2_12" and AFH_GEN2_6.name == "afh_gen2_6"
    for proto, ids in proto_pfs.items():
        out.append(f"P[{_lua_str(proto)}].fields = {{ "
                   + ", ".join(f"PF[{i}]" for i in ids) + " }\n")

    out.append("\n-- ========================================================== constants\n")
    udp_at = {f.name: pos for f, _i, pos in UDP.layout()}
    udp_len, udp_dport, udp_csum = udp_at["length"], udp_at["dport"], udp_at["checksum"]
    consts = {
        "OP_DATA": int(SueOp.DATA),
        "MAX_TXN_DATA": MAX_TXN_DATA_BYTES,
        "IPPROTO_UDP": IPPROTO_UDP,
        "UDP_HDR": UDP.size_bytes,
        "UDP_LENGTH_BYTE": udp_len // 8,
        "UDP_DPORT_BYTE": udp_dport // 8,
        "UDP_CHECKSUM_BYTE": udp_csum // 8,
        "ETH_HDR": ETHERNET.size_bytes,
        "CRC32_POLY": "0xEDB88320",  # IEEE 802.3 CRC-32, reflected (zlib.crc32)
    }
    assert all(UDP.field(k).bits == 16 and udp_at[k] % 8 == 0
               for k in ("length", "dport", "checksum"))
    for k, v in consts.items():
        out.append(f"local {k} = {v}\n")

    out.append("\n-- ======================================================= expert infos\n")
    for e in EXPERTS:
        out.append(f"E.{e.key} = ProtoExpert.new({_lua_str(e.abbr)}, {_lua_str(e.text)}, "
                   f"expert.group.{e.group}, expert.severity.{e.severity})\n")
    for e in LUA_ONLY_EXPERTS:
        out.append(f"X.{e.key} = ProtoExpert.new({_lua_str(e.abbr)}, {_lua_str(e.text)}, "
                   f"expert.group.{e.group}, expert.severity.{e.severity})\n")
    by_proto: dict[str, list[str]] = {}
    for prefix, group in (("E", EXPERTS), ("X", LUA_ONLY_EXPERTS)):
        for e in group:
            by_proto.setdefault(e.abbr.split(".")[0], []).append(f"{prefix}.{e.key}")
    for proto, keys in by_proto.items():
        out.append(f"P[{_lua_str(proto)}].experts = {{ {', '.join(keys)} }}\n")

    out.append("\n-- ================================ preferences (defaults: DEFAULT_SCALEUP)\n")
    out.append("local PREFS = {\n")
    for p in PREFS:
        v = getattr(DEFAULT_SCALEUP, p.config)
        if p.kind == "enum":
            default = p.choices.index(v)
            choices = "{ " + ", ".join(_lua_str(str(c)) if isinstance(c, str) else str(c)
                                       for c in p.choices) + " }"
            extra = f", choices = {choices}, default = {default}"
        elif p.kind == "id":
            extra = f", lo = 0x{p.lo:X}, hi = 0x{p.hi:X}, default = 0x{v:X}"
        else:
            extra = f", lo = {p.lo}, hi = {p.hi}, default = {v}"
        out.append(f"  {{ config = {_lua_str(p.config)}, proto = {_lua_str(p.proto)}, "
                   f"name = {_lua_str(p.name)}, kind = {_lua_str(p.kind)}, "
                   f"label = {_lua_str(p.label)}{extra} }},\n")
    out.append("}\n")
    out.append(_FRAMING)
    return "".join(out)


# The hand-written layering: wire/stack.py transcribed (same rules, same problem texts).
_FRAMING = r"""
for _, p in ipairs(PREFS) do
  local prefs = P[p.proto].prefs
  if p.kind == "enum" then
    local enum = {}
    for i, c in ipairs(p.choices) do enum[i] = { tostring(c), tostring(c), i - 1 } end
    prefs[p.name] = Pref.enum(p.label, p.default, p.label, enum, false)
  elseif p.kind == "id" then
    prefs[p.name] = Pref.string(p.label, string.format("0x%04X", p.default),
                                p.label .. " (0x hex or decimal)")
  else
    prefs[p.name] = Pref.uint(p.label, p.default, p.label)
  end
end

-- CFG: the settings in effect (ScaleUpConfig field names), read from the preferences.
local CFG = {}
local reported = {}
local function report_once(msg)  -- prefs_changed runs once per protocol
  if not reported[msg] then
    reported[msg] = true
    report_failure(msg)
  end
end

local function read_prefs()
  for _, p in ipairs(PREFS) do
    local v = P[p.proto].prefs[p.name]
    if p.kind == "enum" then
      v = p.choices[v + 1]
    elseif p.kind == "id" then
      local s = v
      v = tonumber(s)
      if v == nil or v % 1 ~= 0 or v < p.lo or v > p.hi then
        report_once(string.format("lossless_scaleup: %s.%s: %q is not a number in "
          .. "0x%X..0x%X (0x hex or decimal); using 0x%04X", p.proto, p.name, tostring(s),
          p.lo, p.hi, p.default))
        v = p.default
      end
    elseif v < p.lo or v > p.hi then
      v = p.default
    end
    CFG[p.config] = v
  end
end

-- ========================================================= helpers
local data_dissector = Dissector.get("data")
local udp_dissector = Dissector.get("udp")
local fx_eth = Field.new("eth")

local CRC_TABLE = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if bit32.band(c, 1) == 1 then
      c = bit32.bxor(CRC32_POLY, bit32.rshift(c, 1))
    else
      c = bit32.rshift(c, 1)
    end
  end
  CRC_TABLE[i] = c
end

local function crc32(tvb, off, len)
  local crc = 0xFFFFFFFF
  if len > 0 then
    local s = tvb:raw(off, len)
    for i = 1, len do
      crc = bit32.bxor(CRC_TABLE[bit32.band(bit32.bxor(crc, s:byte(i)), 0xFF)],
                       bit32.rshift(crc, 8))
    end
  end
  return bit32.bxor(crc, 0xFFFFFFFF)
end

-- Value of a field of header table h at tvb offset off.
local function value(h, name, tvb, off)
  local e = h.by[name]
  return bit32.band(bit32.rshift(tvb(off + e.byte, e.n):uint(), e.shift), e.mask)
end

-- Adds header h at off as a top-level item (a layer of tshark's JSON) with all its fields.
local function add_header(parent, h, tvb, off)
  local item = parent:add(h.proto, tvb(off, h.size))
  for _, e in ipairs(h.fields) do
    item:add(e.f, tvb(off + e.byte, e.n))
  end
  return item
end

-- One dissection: tvb is what follows the EtherType (or the UDP header); base its offset in
-- the frame (problem texts give frame offsets, as wire.dissect does).
local function new_ctx(tvb, pinfo, root)
  return { tvb = tvb, pinfo = pinfo, root = root, n = tvb:len(), base = tvb:offset(),
           snapped = pinfo.len > pinfo.caplen, anchor = nil, net = nil, info = {} }
end

-- Whether Wireshark's UDP dissector verifies checksums (preference udp.check_checksum).
local function udp_checks_checksums()
  if get_preference == nil then return false end
  local ok, v = pcall(get_preference, "udp.check_checksum")
  return ok and v == true
end

local function problem(c, ex, msg)
  (c.anchor or c.root):add_proto_expert_info(ex, msg)
end

-- Bytes [from, to) that are not dissected (our `raw`).
local function raw(c, from, to)
  if to > from then
    data_dissector:call(c.tvb(from, to - from):tvb(), c.pinfo, c.root)
  end
end

-- A header does not fit: the rest is raw; a problem unless the capture was cut (snaplen).
local function short(c, ex, layer, need, have, off)
  if not c.snapped then
    problem(c, ex, string.format("%s: truncated at byte %d: needs %d bytes, %d present",
                                 layer, c.base + off, need, math.max(have, 0)))
  end
  raw(c, off, c.n)
end

-- Bytes after the PDU at the Ethernet level: padding/trailer (our `trailer`).
local function trailer(c, off)
  if off < c.n and c.net ~= nil then
    c.net.item:add(F[c.net.proto .. ".trailer"], c.tvb(off, c.n - off))
  end
end

-- SUE from off: [RH] transactions [R-CRC].  dend: where the UDP datagram ends (tvb
-- coordinates), nil at the Ethernet level where padding may follow (the `last` bit ends
-- the transactions, so padding is never read as one).
local function sue(c, off, dend, rh)
  local tvb = c.tvb
  local limit = c.n
  if dend ~= nil and dend < limit then limit = dend end
  local start = off
  local expect = true
  if rh then
    local h = H.sue_rh
    if limit - off < h.size then
      if dend ~= nil and dend - off < h.size and not c.snapped then
        problem(c, E.sue_rh_short, string.format(
          "sue_rh: the datagram has %d bytes, an RH needs %d", dend - off, h.size))
        raw(c, off, limit)
      else
        short(c, E.sue_rh_truncated, "sue_rh", h.size, limit - off, off)
      end
      return
    end
    c.anchor = add_header(c.root, h, tvb, off)
    local op = value(h, "op", tvb, off)
    expect = op == OP_DATA
    table.insert(c.info, string.format("SUE %s xpu=%d psn=%d apsn=%d vc=%d",
      h.by.op.vs[op] or tostring(op), value(h, "xpuid", tvb, off), value(h, "npsn", tvb, off),
      value(h, "apsn", tvb, off), value(h, "vc", tvb, off)))
    off = off + h.size
  end
  local h = TXN_SPECS[CFG.txn_hdr_bytes]
  local pdu = 0
  if expect then
    local i = 0
    while true do
      if limit - off < h.size then
        if not (off == limit and c.snapped) then
          short(c, E.sue_txn_truncated, string.format("sue_txn[%d]", i), h.size,
                limit - off, off)
        end
        return
      end
      if value(h, "opcode", tvb, off) == 0 then
        problem(c, E.sue_txn_opcode_zero, string.format("sue_txn[%d].opcode: 0 is not a "
          .. "transaction (no descriptor with last=1 before byte %d)", i, c.base + off))
        raw(c, off, limit)
        return
      end
      local length = value(h, "length", tvb, off)
      local dstart = off + h.size
      local explained = c.snapped and (dend == nil or dstart + length <= dend)
      if dstart + length > limit and not explained then
        problem(c, E.sue_txn_length, string.format("sue_txn[%d].length: %d but only %d "
          .. "bytes follow the descriptor", i, length, math.max(limit - dstart, 0)))
        raw(c, off, limit)
        return
      end
      local item = add_header(c.root, h, tvb, off)
      local dlen = math.max(math.min(dstart + length, limit) - dstart, 0)
      if dstart <= c.n then
        item:add(F["sue_txn.data"], tvb(dstart, dlen))
      end
      item:append_text(string.format(" [%d] %s, %d bytes", i,
        h.by.opcode.vs[value(h, "opcode", tvb, off)] or "?", length))
      c.anchor = item
      if length > MAX_TXN_DATA then
        problem(c, E.sue_txn_too_long, string.format(
          "sue_txn[%d].length: %d exceeds the %d-byte SUE limit", i, length, MAX_TXN_DATA))
      end
      pdu = pdu + h.size + length
      local last = value(h, "last", tvb, off)
      off = dstart + length
      if off > limit then return end  -- data cut by the snaplen
      i = i + 1
      if last == 1 then break end
    end
    table.insert(c.info, string.format("%d txn", i))
    local cap = rh and CFG.max_pdu_bytes or CFG.max_pdu_lite_bytes
    if pdu > cap then
      problem(c, E.sue_pdu_too_big, string.format(
        "sue: %d bytes of transactions exceed the %d-byte %s PDU limit", pdu, cap,
        rh and "SUE" or "SUE-Lite"))
    end
  end
  if rh then
    local hc = H.rcrc
    if limit - off < hc.size then
      short(c, E.rcrc_truncated, "rcrc", hc.size, limit - off, off)
      return
    end
    local val = value(hc, "value", tvb, off)
    local calc = crc32(tvb, start, off - start)
    local item = add_header(c.root, hc, tvb, off)
    item:add(F["rcrc.valid"], calc == val):set_generated()
    c.anchor = item
    if calc ~= val then
      problem(c, E.rcrc_bad, string.format("rcrc: 0x%08x on the wire, 0x%08x computed",
                                           val, calc))
      table.insert(c.info, "R-CRC BAD")
    end
    off = off + hc.size
  end
  if dend == nil then
    trailer(c, off)
  elseif off < limit then
    problem(c, E.sue_extra, string.format(
      "sue: %d bytes after the end of the PDU inside the UDP datagram", limit - off))
    raw(c, off, limit)
  end
end

local function transport(c, off, kind, dend)
  if kind == "sue_rh" then
    sue(c, off, dend, true)
  elseif kind == "sue_lite" then
    sue(c, off, dend, false)
  else
    local lim = c.n
    if dend ~= nil and dend < lim then lim = dend end
    raw(c, off, lim)
  end
end

local function finish(c, proto)
  c.pinfo.cols.protocol = proto
  if #c.info > 0 then c.pinfo.cols.info = table.concat(c.info, ", ") end
  return c.n
end

-- ===================================================== the dissectors
function P.esun.dissector(tvb, pinfo, root)
  local c = new_ctx(tvb, pinfo, root)
  local h = H.esun
  if c.n < h.size then
    short(c, E.esun_truncated, "esun", h.size, c.n, 0)
    return finish(c, "ESUN")
  end
  c.net = { proto = "esun", item = add_header(root, h, tvb, 0) }
  c.anchor = c.net.item
  table.insert(c.info, string.format("ESUN cos=%d ecn=%d ttl=%d", value(h, "cos", tvb, 0),
    value(h, "ecn", tvb, 0), value(h, "ttl", tvb, 0)))
  transport(c, h.size, CFG.esun_transport, nil)
  return finish(c, "ESUN")
end

function P.sunh.dissector(tvb, pinfo, root)
  local c = new_ctx(tvb, pinfo, root)
  local h = H.sunh
  if c.n < h.size then
    short(c, E.sunh_truncated, "sunh", h.size, c.n, 0)
    return finish(c, "SUNH")
  end
  c.net = { proto = "sunh", item = add_header(root, h, tvb, 0) }
  c.anchor = c.net.item
  local nh = value(h, "next_header", tvb, 0)
  table.insert(c.info, string.format("SUNH %d -> %d nh=%d", value(h, "src", tvb, 0),
    value(h, "dst", tvb, 0), nh))
  local pay = h.size
  if nh == IPPROTO_UDP then
    -- SUNH has no length: the UDP length says where the datagram ends.
    local dend = c.n
    if c.n - pay >= UDP_HDR then
      local claimed = pay + math.max(tvb(pay + UDP_LENGTH_BYTE, 2):uint(), UDP_HDR)
      if claimed <= c.n then
        dend = claimed
        trailer(c, dend)
      elseif c.snapped and c.base + claimed <= pinfo.len then
        dend = claimed
      end
    end
    local len = math.min(dend, c.n) - pay
    if len > 0 then
      -- Wireshark's own UDP dissector; its "udp.port" table hands the SUE port to sue_rh.
      finish(c, "SUNH")
      if len >= UDP_HDR and tvb(pay + UDP_CHECKSUM_BYTE, 2):uint() ~= 0
          and udp_checks_checksums() then
        -- Wireshark's UDP asserts when it verifies a checksum with neither IPv4 nor IPv6
        -- below it (no pseudo-header): the UDP header is shown as data, SUE to our port
        -- is dissected directly.
        problem(c, X.sunh_udp_not_dissected, "UDP over SUNH is not handed to Wireshark's "
          .. "UDP dissector while udp.check_checksum is on (it supports IPv4/IPv6 only)")
        raw(c, pay, pay + UDP_HDR)
        if tvb(pay + UDP_DPORT_BYTE, 2):uint() == CFG.sue_udp_port then
          P.sue_rh.dissector(tvb(pay + UDP_HDR, len - UDP_HDR):tvb(), pinfo, root)
        else
          raw(c, pay + UDP_HDR, pay + len)
        end
      else
        -- A dissector below UDP that throws (a malformed payload for another port) has
        -- its exception shown by Dissector:call, which then raises a Lua error: not ours.
        pcall(udp_dissector.call, udp_dissector, tvb(pay, len):tvb(), pinfo, root)
      end
    end
    return c.n
  elseif nh == CFG.sunh_sue_protocol then
    transport(c, pay, "sue_rh", nil)
  else
    raw(c, pay, c.n)
  end
  return finish(c, "SUNH")
end

-- The Ethernet header (DA, SA, EtherType) right before tvb, as a Tvb of the frame: nil when
-- something (a VLAN tag) sits in between or the frame is not Ethernet.
local function ethernet_header(tvb)
  local want = tvb:offset() - ETH_HDR
  local found = nil
  for _, fi in ipairs({ fx_eth() }) do
    local r = fi.range
    if r ~= nil and r:offset() == want and r:len() >= ETH_HDR then
      found = r:tvb()
    end
  end
  return found
end

function P.afh.dissector(tvb, pinfo, root)
  local c = new_ctx(tvb, pinfo, root)
  if pinfo.match_uint == CFG.afh_gen1_ethertype then
    local h = H.afh_gen1
    if c.n < h.size then
      short(c, E.afh_truncated, "afh", h.size, c.n, 0)
      return finish(c, "AFH")
    end
    c.net = { proto = "afh", item = add_header(root, h, tvb, 0) }
    c.net.item:add(F["afh.form"], "gen1"):set_generated()
    c.anchor = c.net.item
    table.insert(c.info, "AFH Gen1")
    local nxt = value(h, "type", tvb, 0)
    transport(c, h.size, nxt == CFG.sue_ethertype and "sue_rh" or "raw", nil)
    return finish(c, "AFH")
  end
  -- The SUE EtherType right after the addresses: they are an AFH Gen2 header.
  local head = ethernet_header(tvb)
  if head == nil then
    raw(c, 0, c.n)
    return finish(c, "AFH")
  end
  local g = AFH_GEN2[CFG.afh_gen2_form]
  c.net = { proto = "afh", item = add_header(root, g.h, head, 0) }
  c.net.item:add(F["afh.form"], g.form):set_generated()
  c.anchor = c.net.item
  table.insert(c.info, string.format("AFH %s xpu %d -> %d", g.form,
    value(g.h, "src_xpu", head, 0), value(g.h, "dst_xpu", head, 0)))
  local kind = CFG.afh_gen2_6_transport
  if g.form == "gen2_12" then kind = CFG.afh_gen2_12_transport end
  transport(c, 0, kind, nil)
  return finish(c, "AFH")
end

-- SUE over UDP (IPv4, IPv6 or SUNH): the datagram ends where the UDP length says.
function P.sue_rh.dissector(tvb, pinfo, root)
  local c = new_ctx(tvb, pinfo, root)
  sue(c, 0, tvb:reported_len(), true)
  return finish(c, "SUE")
end

-- ===================================================== registration
local registered = {}
local function register()
  read_prefs()
  for _, r in ipairs(registered) do
    DissectorTable.get(r[1]):remove(r[2], r[3])
  end
  registered = {
    { "ethertype", CFG.esun_ethertype, P.esun },
    { "ethertype", CFG.sunh_ethertype, P.sunh },
    { "ethertype", CFG.afh_gen1_ethertype, P.afh },
    { "ethertype", CFG.sue_ethertype, P.afh },
    { "udp.port", CFG.sue_udp_port, P.sue_rh },
  }
  local seen = {}
  for _, r in ipairs(registered) do
    local key = r[1] .. ":" .. r[2]
    if seen[key] then
      report_once(string.format("lossless_scaleup: %s 0x%04X is set for two protocols",
                                   r[1], r[2]))
    end
    seen[key] = true
    DissectorTable.get(r[1]):add(r[2], r[3])
  end
end

for _, p in pairs(P) do
  p.prefs_changed = register
end
register()
"""


def main(argv: Sequence[str] | None = None) -> int:
    from .docgen import generator_main

    return generator_main("wire.wireshark_gen", LUA_PATH, render, "the Lua dissector", argv)


if __name__ == "__main__":
    raise SystemExit(main())

"""tshark as the referee: run it once per pcap, normalise its JSON, compare with ours.

Not a test module (no ``test_`` prefix): ``tests/test_tshark.py`` and other tests import it.

* :func:`require_tshark` finds the binary (skip without it, fail when
  ``LOSSLESS_REQUIRE_TSHARK=1``, which CI sets so the suite cannot pass without the referee).
* :func:`tshark_decode` runs tshark **once** on a whole capture (start-up costs ~0.5 s, so
  batch many frames per file) and returns, per frame, tshark's decode translated into our
  JSON schema (``docs/reference/jsonl.md``): the same layer and field names, the same units.
  Translations that are plain re-spellings (``ip.hdr_len`` bytes -> ``ihl`` words,
  ``eth.type`` = first TPID -> EtherType after the tags) are done silently; translations
  that work around a known tshark departure (FECN/BECN from the reserved byte, the
  byte-swapped ICRC, CNP and XRC as vendor bytes) name their entry in :data:`DEPARTURES`.
* :func:`compare` compares one of our :class:`wire.Decoded` frames with that dict and returns
  the mismatches.  Every field tshark reports is compared, and a layer present on one side
  only is a mismatch, unless an entry of :data:`DEPARTURES` applies to that frame and field:
  the table is the only place where anything is excused, and every excuse is counted.

The departures are those of tshark 4.0.17 (Debian bookworm) against the IBTA and IEEE layouts
of docs/reference/headers.md; docs/explanation/wireshark.md ("Known departures") lists them.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path

import pytest

import wire
from wire.bth import EXT_HEADERS
from wire.ib_ext import AethKind
from wire.stack import SPECS

__all__ = [
    "DEPARTURES", "HEURISTICS", "Departure", "Stats", "compare", "require_tshark",
    "tshark_args", "tshark_decode", "tshark_layers", "normalise", "check_records",
]

#: Every heuristic sub-dissector registered on ``infiniband.payload`` in tshark 4.0.17, by
#: the short name ``--disable-heuristic`` takes (``tshark -G heuristic-decodes`` shows the
#: protocol names instead; these short names were read from libwireshark 4.0.17).  With them on,
#: short SEND payloads are taken for RPC-over-RDMA and the frame ends "Malformed" (T6).
HEURISTICS = (
    "rpcrdma_infiniband", "eth_over_ib", "mellanox_eoib", "sdp_infiniband",
    "smb_direct_infiniband", "smcr_infiniband", "nvme_rdma", "lnet_ib", "iser_infiniband",
    "fc_infiniband", "drbd_rdma",
)
#: Preferences set on every run (each only if this tshark knows it).
PREFS = (
    "ip.check_checksum:TRUE",
    "udp.check_checksum:TRUE",
    "udp.ignore_ipv6_zero_checksum:TRUE",  # T11: a zero UDP checksum over IPv6 is RoCE's norm
    "eth.fcs:Never",  # linktype 1 records carry no FCS; else tshark guesses one in a trailer
)


# ================================================================== running tshark
def require_tshark() -> str:
    """Path of tshark.  Missing: skip the test, or fail if ``LOSSLESS_REQUIRE_TSHARK=1``."""
    path = shutil.which("tshark")
    if path is None:
        msg = "tshark not installed (the Wireshark referee); apt-get install tshark"
        if os.environ.get("LOSSLESS_REQUIRE_TSHARK") == "1":
            pytest.fail(msg + " -- LOSSLESS_REQUIRE_TSHARK=1 makes this an error")
        pytest.skip(msg)
    return path


@functools.cache
def _known_prefs(tshark: str) -> frozenset[str]:
    out = subprocess.run([tshark, "-G", "defaultprefs"], capture_output=True, text=True,
                         check=False).stdout
    names = set()
    for line in out.splitlines():
        if line.startswith("#") and ":" in line and not line.startswith("# "):
            names.add(line[1:].split(":", 1)[0].strip())
    return frozenset(names)


@functools.cache
def tshark_version(tshark: str) -> str:
    out = subprocess.run([tshark, "--version"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else "unknown"


def tshark_args(tshark: str, pcap: str | os.PathLike) -> list[str]:
    """The command line we run (documented in docs/explanation/wireshark.md)."""
    args = [tshark, "-n", "-r", os.fspath(pcap), "-T", "json", "--no-duplicate-keys"]
    known = _known_prefs(tshark)
    for p in PREFS:
        if p.split(":", 1)[0] in known:
            args += ["-o", p]
    for h in HEURISTICS:
        args += ["--disable-heuristic", h]
    return args


def tshark_layers(pcap: str | os.PathLike) -> list[dict]:
    """tshark's raw JSON ``layers`` object of every frame (one tshark run)."""
    tshark = require_tshark()
    # stderr ("Running as user root...") is ignored; the exit status is not (tshark exits 2
    # on a capture it cannot read to the end, and we never write such files here).
    proc = subprocess.run(tshark_args(tshark, pcap), capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise AssertionError(f"tshark exited {proc.returncode} on {pcap}: "
                             f"{proc.stderr.strip()[-500:]}")
    return [p["_source"]["layers"] for p in json.loads(proc.stdout or "[]")]


def tshark_decode(pcap: str | os.PathLike) -> list[dict]:
    """tshark's decode of every frame of ``pcap`` in our schema (see :func:`normalise`)."""
    return [normalise(layers) for layers in tshark_layers(pcap)]


# =================================================================== normalising
def _find(obj: object, key: str) -> object:
    """First value of ``key`` in a nested JSON object (depth first, in document order)."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            r = _find(v, key)
            if r is not None:
                return r
    elif isinstance(obj, list):
        for v in obj:
            r = _find(v, key)
            if r is not None:
                return r
    return None


def _has_key(obj: object, key: str) -> bool:
    if isinstance(obj, dict):
        return key in obj or any(_has_key(v, key) for v in obj.values())
    if isinstance(obj, list):
        return any(_has_key(v, key) for v in obj)
    return False


def _int(s: object) -> int:
    """tshark prints integers in decimal or 0x-hex."""
    return int(str(s), 0)


def _hexbytes(s: object) -> str:
    """``"de:ad:be:ef"`` -> ``"deadbeef"``."""
    return str(s).replace(":", "").lower()


def _ts_ns(epoch: str) -> int:
    sec, _, frac = epoch.partition(".")
    return int(sec) * 1_000_000_000 + int((frac + "000000000")[:9])


def _ip6(s: str) -> str:
    """Compared in full form: Python < 3.13, Python 3.13, wire (RFC 5952 section 5 mixed
    notation for IPv4-mapped addresses) and tshark do not all print ::ffff:a.b.c.d alike."""
    return ipaddress.IPv6Address(s).exploded


def _fields(tree: Mapping, table: Iterable[tuple[str, str, Callable]]) -> dict:
    out = {}
    for ts_name, ours, conv in table:
        v = tree.get(ts_name) if isinstance(tree, Mapping) else None
        if v is not None:
            out[ours] = conv(v)
    return out


_BTH = (("infiniband.bth.opcode", "opcode", _int), ("infiniband.bth.se", "se", _int),
        ("infiniband.bth.m", "m", _int), ("infiniband.bth.padcnt", "pad_count", _int),
        ("infiniband.bth.tver", "tver", _int), ("infiniband.bth.p_key", "pkey", _int),
        ("infiniband.bth.destqp", "dest_qp", _int), ("infiniband.bth.a", "ack_req", _int),
        ("infiniband.bth.reserved7", "resv7", _int), ("infiniband.bth.psn", "psn", _int))
_RDETH = (("infiniband.reserved", "resv8", lambda v: int(_hexbytes(v), 16)),
          ("infiniband.rdeth.eecnxt", "ee_context", _int))
_DETH = (("infiniband.deth.q_key", "qkey", _int),  # printed as 64-bit hex, value is 32-bit
         ("infiniband.reserved", "resv8", lambda v: int(_hexbytes(v), 16)),
         ("infiniband.deth.srcqp", "src_qp", _int))
_RETH = (("infiniband.reth.va", "va", _int), ("infiniband.reth.r_key", "rkey", _int),
         ("infiniband.reth.dmalen", "dma_length", _int))
# AtomicETH: tshark reuses the RETH field names for VA and R_Key inside atomiceth_tree.
_ATOMIC = (("infiniband.reth.va", "va", _int), ("infiniband.reth.r_key", "rkey", _int),
           ("infiniband.atomiceth.swapdt", "swap_add", _int),
           ("infiniband.atomiceth.cmpdt", "compare", _int))
_AETH_VALUE = ("infiniband.aeth.syndrome.credit_count", "infiniband.aeth.syndrome.timer",
               "infiniband.aeth.syndrome.error_code", "infiniband.aeth.syndrome.reserved_value")
_IP4 = (("ip.version", "version", _int), ("ip.hdr_len", "ihl", lambda v: _int(v) // 4),
        ("ip.len", "total_length", _int), ("ip.id", "id", _int), ("ip.flags", "flags", _int),
        ("ip.frag_offset", "frag_offset", _int), ("ip.ttl", "ttl", _int),
        ("ip.proto", "protocol", _int), ("ip.checksum", "checksum", _int),
        ("ip.src", "src", str), ("ip.dst", "dst", str))
_IP6 = (("ipv6.version", "version", _int), ("ipv6.flow", "flow_label", _int),
        ("ipv6.plen", "payload_length", _int), ("ipv6.nxt", "next_header", _int),
        ("ipv6.hlim", "hop_limit", _int), ("ipv6.src", "src", _ip6), ("ipv6.dst", "dst", _ip6))
_UDP = (("udp.srcport", "sport", _int), ("udp.dstport", "dport", _int),
        ("udp.length", "length", _int), ("udp.checksum", "checksum", _int))
# checksum.status: 0 bad, 1 good, 2 unverified, 3 not present, 4 illegal (zero where required)
_STATUS = {"0": False, "1": True, "2": None, "3": None, "4": False}


def _as_list(v: object) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def _outer(v: object) -> object:
    """The outermost instance of a layer (``--no-duplicate-keys`` turns the layers of a
    tunnelled frame, e.g. VXLAN's inner Ethernet, into a list)."""
    return v[0] if isinstance(v, list) and v else v


#: Protocols of the chains we translate; anything else after UDP (a dissector that took the
#: datagram, T4) or after the Ethernet header ends the translation.
_L2 = ("eth", "ethertype", "vlan", "ieee8021ad")


def normalise(layers: Mapping) -> dict:
    """One frame of tshark's JSON -> our schema, plus ``_frame`` and ``_tshark`` keys.

    ``_frame``: ``ts_ns``, ``len`` (orig), ``cap_len``, ``protocols``.  ``_tshark``:
    ``malformed`` (tshark says "Malformed Packet"), ``experts`` (expert-info names),
    ``vendor`` (hex of an "Unknown/Vendor Specific" blob after the BTH, T3/T12),
    ``after_udp`` (the protocol tshark handed the UDP payload to), ``mapped`` (ids of
    :data:`DEPARTURES` entries used to translate this frame).
    """
    out: dict = {}
    fr = layers.get("frame", {})
    chain = fr.get("frame.protocols", "").split(":")
    after_udp = chain[chain.index("udp") + 1] if "udp" in chain[:-1] else None
    meta = {"malformed": _has_key(layers, "_ws.malformed"), "experts": [], "vendor": None,
            "mapped": [], "short": "_ws.short" in layers, "after_udp": after_udp}
    out["_tshark"] = meta
    out["_frame"] = {"ts_ns": _ts_ns(fr["frame.time_epoch"]), "len": _int(fr["frame.len"]),
                     "cap_len": _int(fr["frame.cap_len"]),
                     "protocols": fr.get("frame.protocols", "")}
    _collect_experts(layers, meta["experts"])

    eth = _outer(layers.get("eth"))
    vlans = _as_list(layers.get("vlan"))
    qinqs = _as_list(layers.get("ieee8021ad"))
    outer_tags = []
    if isinstance(eth, dict) and "eth.type" in eth:
        out["eth"] = {"dst": eth["eth.dst"].lower(), "src": eth["eth.src"].lower(),
                      "type": _int(eth["eth.type"])}
        # tshark: eth.type is the first TPID, each tag's etype the next one; ours: eth.type
        # is the EtherType after the last tag and every tag carries its own TPID.
        pools = {"vlan": list(vlans), "ieee8021ad": list(qinqs)}
        etype_key = {"vlan": "vlan.etype", "ieee8021ad": "ieee8021ah.etype"}
        tags, tpid, etype_shown = [], out["eth"]["type"], True
        for p in chain[1:]:
            if p not in _L2:
                break  # the tags of the outer frame end here
            if p in pools and not pools[p]:
                etype_shown = False  # a tag layer with nothing in it: cut short
                break
            if pools.get(p):
                t = pools[p].pop(0)
                if not isinstance(t, dict) or not any(k.endswith(".dei") for k in t):
                    etype_shown = False
                    break  # a tag cut short: nothing to show
                outer_tags.append(t)
                etype_shown = etype_key[p] in t
                if f"{p}.svid" in t:
                    # An S-tag directly followed by a second 0x88a8 tag: tshark shows both in
                    # one layer (svid, cvid; priority and dei as 2-element lists).
                    pcp, dei = _as_list(t[f"{p}.priority"]), _as_list(t[f"{p}.dei"])
                    tags.append({"tpid": tpid, "pcp": _int(pcp[0]), "dei": _int(dei[0]),
                                 "vid": _int(t[f"{p}.svid"])})
                    tags.append({"tpid": 0x88A8, "pcp": _int(pcp[-1]), "dei": _int(dei[-1]),
                                 "vid": _int(t[f"{p}.cvid"])})
                else:
                    tags.append({"tpid": tpid, "pcp": _int(t[f"{p}.priority"]),
                                 "dei": _int(t[f"{p}.dei"]), "vid": _int(t[f"{p}.id"])})
                if etype_key[p] in t:
                    tpid = _int(t[etype_key[p]])
        if tags:
            out["vlan"] = tags
        if tags or not etype_shown:
            # null: the EtherType after the tags was not captured (as ours)
            out["eth"]["type"] = tpid if etype_shown else None
        trailer = ""
        for lay in [eth, *outer_tags]:
            for k, v in lay.items():
                if k.endswith((".padding", ".trailer")):
                    trailer += "".join(_hexbytes(x) for x in _as_list(v))
        if trailer:
            out["trailer"] = trailer

    ip = _outer(layers.get("ip"))
    if isinstance(ip, dict) and "ip.version" in ip:
        v4 = _fields(ip, _IP4)
        ds = ip.get("ip.dsfield_tree", {})
        if "ip.dsfield.dscp" in ds:
            v4["dscp"] = _int(ds["ip.dsfield.dscp"])
            v4["ecn"] = _int(ds["ip.dsfield.ecn"])
        st = _find(ip, "ip.checksum.status")
        if st is not None:
            v4["checksum_ok"] = _STATUS[st]
        out["ipv4"] = v4
    ip6 = _outer(layers.get("ipv6"))
    if isinstance(ip6, dict) and "ipv6.version" in ip6:
        v6 = _fields(ip6, _IP6)
        tc = ip6.get("ipv6.tclass_tree", {})
        if "ipv6.tclass.dscp" in tc:
            v6["dscp"] = _int(tc["ipv6.tclass.dscp"])
            v6["ecn"] = _int(tc["ipv6.tclass.ecn"])
        out["ipv6"] = v6
    udp = _outer(layers.get("udp"))
    if isinstance(udp, dict) and "udp.srcport" in udp:
        u = _fields(udp, _UDP)
        st = _find(udp, "udp.checksum.status")
        if st is not None:
            u["checksum_ok"] = _STATUS[st]
        u["length_ok"] = not (_has_key(udp, "udp.length.bad")
                              or _has_key(udp, "udp.length.bad_zero"))
        out["udp"] = u
        if _has_key(udp, "udp.length.bad"):
            meta["mapped"].append("T8")  # UDP length beyond the IP payload: values agree
        if u.get("dport") == 4791 and u.get("length") == 8:
            meta["mapped"].append("T10")  # empty RoCE datagram: no BTH on either side
        if "ipv6" in out and u.get("checksum") == 0:
            meta["mapped"].append("T11")  # zero checksum over IPv6 accepted by a preference

    ib = layers.get("infiniband")
    if isinstance(ib, dict) and after_udp == "infiniband":
        _normalise_ib(ib, out, meta)

    data = _outer(layers.get("data"))
    # Only the data right after UDP or InfiniBand is a payload of ours.
    data_ok = after_udp == "data" or (after_udp == "infiniband" and chain[-1] == "data"
                                      and chain[-2] == "infiniband")
    if isinstance(data, dict) and "data.len" in data and data_ok:
        raw = _hexbytes(data.get("data.data", ""))
        n = _int(data["data.len"])
        # data.len counts the pad bytes too; the pad is the last PadCnt bytes (RoCE only).
        pad = out.get("bth", {}).get("pad_count", 0) if "bth" in out else 0
        pad = min(pad, n)
        p = {"length": n - pad, "data": raw[:2 * (n - pad)]}
        if pad:
            p["pad"] = raw[2 * (n - pad):]
        out["payload"] = p

    macc = _outer(layers.get("macc"))
    if isinstance(macc, dict) and "macc.opcode" in macc:
        op = _int(macc["macc.opcode"])
        out["mac_control"] = {"opcode": op}
        if "macc.cbfc.enbv" in macc:
            q = [_find(macc, f"macc.cbfc.pause_time.c{i}") for i in range(8)]
            pfc = {"class_enable": _int(macc["macc.cbfc.enbv"])}
            if all(x is not None for x in q):
                pfc["quanta"] = [_int(x) for x in q]
            out["pfc"] = pfc
        elif "macc.pause_time" in macc:
            out["pause"] = {"quanta": _int(macc["macc.pause_time"])}
    return out


def _collect_experts(obj: object, acc: list[str]) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "_ws.expert":
                for e in _as_list(v):
                    acc.extend(x for x in e if not x.startswith("_ws.expert"))
            else:
                _collect_experts(v, acc)
    elif isinstance(obj, list):
        for v in obj:
            _collect_experts(v, acc)


def _normalise_ib(ib: Mapping, out: dict, meta: dict) -> None:
    bt = ib.get("infiniband.bth_tree")
    if not isinstance(bt, dict):
        return
    bth = _fields(bt, _BTH)
    if "infiniband.reserved" in bt:
        # T1: tshark 4.0.17 has no FECN/BECN fields; BTH byte 4 is an anonymous reserved
        # byte: FECN = bit 7, BECN = bit 6, Resv6 = bits 5..0.
        b4 = int(_hexbytes(bt["infiniband.reserved"]), 16)
        bth.update(fecn=b4 >> 7, becn=(b4 >> 6) & 1, resv6=b4 & 0x3F)
        meta["mapped"].append("T1")
    out["bth"] = bth
    trees = {"rdeth": _RDETH, "deth": _DETH, "reth": _RETH, "atomiceth": _ATOMIC}
    names = {"rdeth": "rdeth", "deth": "deth", "reth": "reth", "atomiceth": "atomic_eth"}
    for ts_name, table in trees.items():
        t = ib.get(f"infiniband.{ts_name}_tree")
        if isinstance(t, dict):
            out[names[ts_name]] = _fields(t, table)
    at = ib.get("infiniband.aeth_tree")
    if isinstance(at, dict):
        syn = _int(at["infiniband.aeth.syndrome"])
        a = {"syndrome": syn, "msn": _int(at["infiniband.aeth.msn"])}
        st = at.get("infiniband.aeth.syndrome_tree", {})
        if "infiniband.aeth.syndrome.opcode" in st:
            a["kind"] = AethKind(_int(st["infiniband.aeth.syndrome.opcode"])).name
        for k in _AETH_VALUE:
            if k in st:
                a["value"] = _int(st[k])
        out["aeth"] = a
    ack = ib.get("infiniband.atomicacketh_tree")
    if isinstance(ack, dict):
        out["atomic_ack_eth"] = {
            "orig_remote_data": _int(ack["infiniband.atomicacketh.origremdt"])}
    for ts_name, ours, key in (("immdt", "immdt", "data"), ("ieth", "ieth", "rkey")):
        v = _find(ib.get(f"infiniband.{ts_name}_tree"), f"infiniband.{ts_name}")
        if v is None:
            v = ib.get(f"infiniband.{ts_name}")
        if v is not None:  # FT_BYTES "de:ad:be:ef"
            out[ours] = {key: int(_hexbytes(v), 16)}
    crc = ib.get("infiniband.invariant.crc")
    if crc is not None:
        # T2: tshark reads the ICRC's wire bytes as a big-endian number; ours (and zlib's)
        # value is those bytes read little-endian.
        out["icrc"] = {"value": int.from_bytes(_int(crc).to_bytes(4, "big"), "little")}
        meta["mapped"].append("T2")
    vt = ib.get("infiniband.vendor_tree")
    if isinstance(vt, dict) and "infiniband.vendor" in vt:
        # The blob under vendor_tree is the whole rest of the datagram (the item above it is
        # a 4-byte header); T3 (CNP) and T12 (XRC) are compared through it.
        meta["vendor"] = _hexbytes(vt["infiniband.vendor"])
        if bth.get("opcode") == 0x81 and len(meta["vendor"]) == 40:
            # T3: CNP unknown to tshark: its 16 reserved bytes + ICRC as one vendor blob.
            blob = bytes.fromhex(meta["vendor"])
            out["cnp"] = {"reserved": blob[:16].hex()}
            out["icrc"] = {"value": int.from_bytes(blob[16:], "little")}
            meta["mapped"].append("T3")
        elif bth.get("opcode", 0) & 0xE0 == 0xA0:
            meta["mapped"].append("T12")  # XRC: compared as one blob in compare()


# ================================================================== departures
def _op(ours: wire.Decoded) -> int | None:
    b = ours.get("bth")
    return None if b is None else b["opcode"]


def _problem(ours: wire.Decoded, prefix: str, text: str = "") -> bool:
    return any(p.startswith(prefix) and text in p for p in ours.problems)


def _other_udp_dissector(ours: wire.Decoded, theirs: Mapping) -> bool:
    """T4: tshark gave the UDP payload to another dissector than we did."""
    u = ours.get("udp")
    if u is None:
        return False
    after = theirs.get("_tshark", {}).get("after_udp")
    if "bth" in ours:  # RoCE to us: excused only when the lower port is the source port
        return u["sport"] < u["dport"] and after != "infiniband"
    if u["dport"] in wire.ROCE_PORTS:
        return False  # RoCE port but no BTH to us: T7/T10, not this
    return "payload" in ours and after != "data"


def _mad(ours: wire.Decoded, theirs: Mapping) -> bool:
    b = ours.get("bth")
    if b is None:
        return False
    d = ours.get("deth")
    return b["dest_qp"] in (0, 1) or (d is not None and d["src_qp"] in (0, 1))


#: Opcodes that carry no payload in IBA 9.2 (ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, CmpSwap,
#: FetchAdd) on RC; RD versions are covered by T5.
_NO_PAYLOAD_OPS = frozenset({0x11, 0x12, 0x13, 0x14})
_IB_LAYERS = ("bth", "rdeth", "deth", "xrceth", "reth", "atomic_eth", "aeth",
              "atomic_ack_eth", "immdt", "ieth", "cnp", "payload", "icrc")


@dataclass(frozen=True)
class Departure:
    """A known place where tshark 4.0.17 departs from the spec (or from our model).

    ``kind`` is ``"mapped"`` (we translate tshark's output and still compare every value;
    :func:`normalise` names the id when it does) or ``"exempt"`` (``fields`` -- glob patterns
    of ``layer.field`` keys, or ``layer`` for presence -- are not compared on frames where
    ``applies(ours, theirs)`` is true; ``absent_fields`` likewise, but only for layers our
    decode does not have), or ``"n/a"`` (never met by these tests: why).
    """

    title: str
    reason: str
    kind: str
    fields: tuple[str, ...] = ()
    applies: Callable[[wire.Decoded, Mapping], bool] | None = None
    #: like ``fields``, but excused only when the key's layer is absent from our decode
    absent_fields: tuple[str, ...] = ()


#: Layers of the scale-up headers (ESUN, SUNH, AFH, SUE): no Wireshark dissector knows them.
_SCALEUP_LAYERS = ("esun", "sunh", "afh", "sue_rh", "sue_txn")


def _scaleup(ours: wire.Decoded) -> bool:
    """A frame with a scale-up header (departure SU)."""
    return any(k in ours for k in _SCALEUP_LAYERS)


#: The one table of excuses.  T1..T11 known before these tests, T12.. found here.
DEPARTURES: dict[str, Departure] = {
    "T1": Departure(
        "no FECN/BECN fields",
        "BTH byte 4 is an anonymous infiniband.reserved byte; FECN = bit 7, BECN = bit 6, "
        "Resv6 = bits 5..0 are taken from it and compared.", "mapped"),
    "T2": Departure(
        "ICRC not verified, read big-endian",
        "infiniband.invariant.crc is the wire bytes as a big-endian number: byte-swapped "
        "and compared with icrc.value.  tshark has no verdict, so icrc.valid is never "
        "compared with it (tests/test_vectors.py and test_tshark.py check our verdict on "
        "the ConnectX-4 Lx capture).",
        "mapped"),
    "T3": Departure(
        "CNP (opcode 0x81) unknown",
        "the 16 reserved bytes and the ICRC come as one 20-byte infiniband.vendor blob; "
        "split into cnp.reserved and icrc.value and compared.", "mapped"),
    "T4": Departure(
        "UDP dissector tries the lower port first",
        "tshark hands a datagram to the dissector of its lower port when one is registered: "
        "a *source* port 4791 is decoded as RoCE (by Annex A17 only the destination port "
        "identifies RoCEv2: we show a UDP payload), and a RoCE datagram from a source port "
        "below 4791 with a registered dissector (7 echo, 53 DNS, 67/68 DHCP, 69 TFTP, "
        "123 NTP, 137 NBNS, 319 PTP, 514 syslog, 520 RIP, 1900 SSDP, 3784 BFD, 4789 VXLAN, "
        "...) is not RoCE to tshark, even when that dissector rejects it; likewise a "
        "non-RoCE datagram (a plain UDP payload to us) that tshark hands to an application "
        "dissector (generalisation found here).  Excused: the layers above UDP.",
        "exempt", ("bth", "bth.*", "rdeth*", "deth*", "xrceth*", "reth*", "atomic_eth*",
                   "aeth*", "atomic_ack_eth*", "immdt*", "ieth*", "cnp*", "icrc", "icrc.*",
                   "payload", "payload.*", "_vendor", "_frame.malformed"),
        lambda o, t: _other_udp_dissector(o, t) and not _scaleup(o)),  # SU owns those
    "T5": Departure(
        "RD opcodes mis-dissected",
        "tshark displaces the RD headers by 8 bytes (RDETH read from the DETH, payload 8 "
        "short, RD ACK's AETH from the ICRC, several 'Malformed'; reserved RD opcodes lose "
        "8 bytes to an RDETH+DETH too, and when those do not fit tshark shows no BTH at "
        "all); only the BTH's fields are compared for opcodes 0x40-0x5f, when tshark shows "
        "them.  No RoCE NIC implements RD.", "exempt",
        ("bth", "rdeth", "rdeth.*", "deth", "deth.*", "reth", "reth.*", "atomic_eth",
         "atomic_eth.*", "aeth", "aeth.*", "atomic_ack_eth", "atomic_ack_eth.*", "immdt",
         "immdt.*", "payload", "payload.*", "icrc", "icrc.*", "_vendor", "_frame.malformed"),
        lambda o, t: (_op(o) or 0) & 0xE0 == 0x40),
    "T6": Departure(
        "payload heuristics and MADs",
        "the payload heuristics are disabled on the command line (--disable-heuristic for "
        "each of HEURISTICS), so no frame meets the RPC-over-RDMA part.  Still met: a "
        "payload to DestQP 0/1, or a UD/RD payload whose DETH SrcQP is 0/1, is taken for a "
        "MAD: tshark shows neither the payload nor the ICRC (or an 'ICRC' from the wrong "
        "place), and 'Malformed' when the bytes are not a valid MAD (SrcQP found here).",
        "exempt", ("payload", "payload.*", "icrc", "icrc.*", "_frame.malformed"),
        lambda o, t: _mad(o, t) and t.get("_tshark", {}).get("vendor") is None),
    "T7": Departure(
        "12-byte UDP payload read as BTH + ICRC",
        "a UDP payload of 12 bytes (BTH only) gets an 'ICRC' read from the BTH's PSN word "
        "(shown as 0), and one of 13..15 bytes a BTH and an overlapping ICRC or vendor "
        "blob (found here); we report no room for a BTH and an ICRC and keep the bytes raw.",
        "exempt", ("bth", "bth.*", "icrc", "icrc.*", "payload", "payload.*", "_vendor"),
        lambda o, t: ("bth" not in o and "udp" in o and 20 <= o["udp"]["length"] < 24
                      and not _scaleup(o))),  # a SUE ACK over UDP is 20 bytes too: SU
    "T8": Departure(
        "UDP length beyond the IP payload",
        "tshark trusts the IP length and shows an ICRC and a payload; we cut the datagram at "
        "the IP payload too and show the same values, but mark icrc.valid unknown.  Met by "
        "broken.jsonl; every value agrees (nothing exempted; kept for the record).", "mapped"),
    "T9": Departure(
        "wiretap mis-reads a valid record before an absurd one",
        "n/a here: we never write a record with incl_len 0x7fffffff (the pcap reader tests "
        "own corrupt files).", "n/a"),
    "T10": Departure(
        "empty UDP payload to 4791 not handed to InfiniBand",
        "agrees in effect: neither side decodes a BTH (we report the 0-byte UDP payload as a "
        "problem).  Nothing exempted.", "mapped"),
    "T11": Departure(
        "IPv6 UDP checksum 0 flagged illegal",
        "-o udp.ignore_ipv6_zero_checksum:TRUE on the command line; the checksum status is "
        "then 'not present', as ours.", "mapped"),
    "T12": Departure(
        "XRC opcodes (0xa0-0xb7) unknown",
        "tshark 4.0.17 shows everything after the BTH as one infiniband.vendor blob "
        "(no XRCETH); the blob is compared byte for byte with our XRCETH + extended headers "
        "+ payload + pad + ICRC re-encoded.", "mapped"),
    "T13": Departure(
        "payload after a no-payload opcode hidden",
        "ACKNOWLEDGE, ATOMIC ACKNOWLEDGE, CmpSwap and FetchAdd carry no payload (IBA 9.2); "
        "when a frame has bytes there anyway, tshark shows neither them nor the ICRC, we "
        "show them as payload and check the ICRC.", "exempt",
        ("payload", "payload.*", "icrc", "icrc.*"),
        lambda o, t: _op(o) in _NO_PAYLOAD_OPS and "payload" in o and "icrc" not in t),
    "T15": Departure(
        "UDP length 0 over IPv6 taken as 'the rest of the payload'",
        "tshark applies the RFC 2675 jumbogram rule (UDP length 0 = up to the end of the "
        "IPv6 payload) to an ordinary IPv6 packet and dissects the RoCE headers (found "
        "here); we report a UDP length below the 8-byte header and keep the bytes raw.  "
        "Excused: layers absent from our decode.", "exempt",
        ("_vendor", "_frame.malformed"),
        lambda o, t: "ipv6" in o and "udp" in o and o["udp"]["length"] == 0,
        absent_fields=("[!_]*",)),
    "CUT": Departure(
        "record cut by the snaplen",
        "when the captured bytes end inside the payload or ICRC, tshark shows no payload "
        "and no ICRC at all (an unknown opcode's vendor blob: the captured part), we show "
        "payload.length from the headers with the captured part of the data, and icrc.value "
        "null.", "exempt",
        ("payload", "payload.*", "icrc", "icrc.*", "udp.checksum_ok", "_vendor"),
        lambda o, t: o.caplen < o.orig_len),
    "T14": Departure(
        "extended headers overlapping the ICRC",
        "when a datagram is too short for its opcode's extended headers plus the ICRC, "
        "tshark dissects the headers anyway and reads the 'ICRC' from the last 4 bytes, "
        "overlapping them (found here); we stop where the ICRC begins, keep the rest raw and "
        "report the frame.  Excused: layers absent from our decode.", "exempt",
        ("_vendor",), lambda o, t: any("bytes here, the datagram has" in p for p in o.problems),
        absent_fields=("[!_]*",)),
    "CUTHDR": Departure(
        "header cut by the snaplen",
        "when the captured bytes end inside a header, tshark shows the fields it could read "
        "of a cut Ethernet/VLAN/IP/UDP header (and '_ws.short') but nothing of the "
        "InfiniBand headers, not even a complete BTH, once one after it is cut; we keep the "
        "bytes of the header cut short as raw and show the complete headers before it (a "
        "VLAN tag cut short: no tag; tshark shows no tag at all for an S-tag followed by a "
        "cut 0x88a8 tag, which it reads as one pair).  Excused: layers absent from our "
        "decode, the VLAN tag list, and the presence of our complete InfiniBand headers.",
        "exempt", ("vlan", "vlan.count", "bth", "rdeth", "deth", "xrceth", "reth",
                   "atomic_eth", "aeth", "atomic_ack_eth", "immdt", "ieth", "cnp"),
        lambda o, t: o.caplen < o.orig_len and (o.cut or bool(o.raw)),
        absent_fields=("[!_]*",)),
    # Not a tshark bug: ESUN, SUE, AFH and SUNH are not standard headers (placeholder
    # EtherTypes and UDP port of wire.scaleup.ScaleUpConfig), refereed by our Lua dissector,
    # see tests/test_wireshark_lua.py.  What tshark does know is still compared: the Ethernet
    # header and VLAN tags of every frame, the IPv4/IPv6 and UDP headers of SUE over UDP.
    "SU": Departure(
        "scale-up headers unknown to tshark",
        "ESUN, SUNH, AFH and SUE are not standard headers: tshark shows the bytes after an "
        "unknown EtherType (0x88b5 ESUN, 0x88b6 SUNH, 0x9a00 AFH Gen1, 0x9a01 SUE; placeholders) "
        "or after UDP port 0xcafe as data.  Excused: our udp after SUNH (tshark stops at "
        "the EtherType), the payload (tshark's data = our SUE PDU), and the Ethernet header "
        "tshark reads from the 12 bytes an AFH Gen2 header puts in place of DA and SA (no "
        "eth layer in our decode).  These headers are refereed by our Lua dissector "
        "(tests/test_wireshark_lua.py).", "exempt",
        ("udp", "payload", "payload.*"),
        lambda o, t: _scaleup(o),
        absent_fields=("eth",)),
}


# ==================================================================== comparing
@dataclass
class Stats:
    """Running totals over many :func:`compare` calls."""

    frames: int = 0
    compared: int = 0
    agreed: int = 0
    exempted: Counter = field(default_factory=Counter)   # departure id -> fields excused
    mapped: Counter = field(default_factory=Counter)     # departure id -> frames translated
    frames_with_departure: dict = field(default_factory=dict)  # id -> [frame labels]
    mismatches: list = field(default_factory=list)

    def summary(self) -> str:
        ex = ", ".join(f"{k}:{v}" for k, v in sorted(self.exempted.items()))
        mp = ", ".join(f"{k}:{v}" for k, v in sorted(self.mapped.items()))
        return (f"{self.frames} frames, {self.agreed}/{self.compared} fields agree; "
                f"exempted fields [{ex}]; translated frames [{mp}]; "
                f"{len(self.mismatches)} mismatches")


def _derived_ours(ours: wire.Decoded) -> dict:
    """Our decode as a dict in the schema, plus the derived values tshark reports."""
    d = ours.to_dict()
    if "ipv6" in d:
        for k in ("src", "dst"):
            d["ipv6"][k] = _ip6(d["ipv6"][k])
    udp = d.get("udp")
    if isinstance(udp, dict):
        if _problem(ours, "udp.checksum:"):
            udp["checksum_ok"] = False
        elif udp["checksum"] == 0 or ours.caplen < ours.orig_len:
            udp["checksum_ok"] = None
        else:
            udp["checksum_ok"] = True
        udp["length_ok"] = not (_problem(ours, "udp.length:", "exceeds")
                                or _problem(ours, "udp.length:", "less than the 8-byte"))
    p = d.get("payload")
    if isinstance(p, dict) and p["length"] == 0 and not p["data"] and not p.get("pad"):
        del d["payload"]  # PadCnt beyond the datagram: an empty layer, kept only for build()
    if "cnp" in d:
        d["cnp"].setdefault("reserved", "00" * 16)
    if "payload" in d and "bth" in d:
        d["payload"].setdefault("pad", "")
    return d


def _after_bth(ours: wire.Decoded) -> str | None:
    """Our bytes after the BTH up to the end of the datagram, re-encoded (for T3/T12)."""
    op = _op(ours)
    if op is None or "icrc" not in ours or ours["icrc"]["value"] is None:
        return None
    out = b""
    for h in EXT_HEADERS.get(op, ("", ()))[1]:
        if h in ours:
            out += SPECS[h].pack(dict(ours[h]))
    p = ours.get("payload")
    if p is not None:
        out += bytes.fromhex(p["data"]) + bytes.fromhex(p.get("pad", ""))
    out += ours["icrc"]["value"].to_bytes(4, "little")
    return out.hex()


def _exempt(key: str, active: list[tuple[str, Departure]], mine: Mapping) -> str | None:
    absent = key.split(".", 1)[0] not in mine
    for did, dep in active:
        if any(fnmatchcase(key, pat) for pat in dep.fields):
            return did
        if absent and any(fnmatchcase(key, pat) for pat in dep.absent_fields):
            return did
    return None


#: Layers whose presence is compared both ways (tshark has one <=> we have one).
_PRESENCE = ("eth", "vlan", "ipv4", "ipv6", "udp", "bth", "rdeth", "deth", "reth",
             "atomic_eth", "aeth", "atomic_ack_eth", "immdt", "ieth", "payload", "icrc",
             "mac_control", "pfc", "pause")


def compare(ours: wire.Decoded, theirs: Mapping, *, ts_ns: int | None = None,
            stats: Stats | None = None, label: str = "") -> list[str]:
    """Mismatches between our decode and tshark's (normalised) decode of the same frame.

    Every field tshark reports is compared with ours; a layer on one side only is a
    mismatch; :data:`DEPARTURES` entries that apply to the frame excuse the fields they name
    (counted in ``stats``).  ``ts_ns`` (the record's timestamp) is compared with
    ``frame.time_epoch`` when given.
    """
    st = stats if stats is not None else Stats()
    st.frames += 1
    mine = _derived_ours(ours)
    active = [(k, d) for k, d in DEPARTURES.items()
              if d.kind == "exempt" and d.applies is not None and d.applies(ours, theirs)]
    for did in theirs.get("_tshark", {}).get("mapped", []):
        st.mapped[did] += 1
    for did, _d in active:
        st.frames_with_departure.setdefault(did, []).append(label)
    out: list[str] = []

    def check(key: str, a: object, b: object) -> None:
        did = _exempt(key, active, mine)
        if did is not None:
            st.exempted[did] += 1
            return
        st.compared += 1
        if a == b:
            st.agreed += 1
        else:
            out.append(f"{label}{key}: ours {a!r}, tshark {b!r}")

    fr = theirs["_frame"]
    check("_frame.len", ours.orig_len, fr["len"])
    check("_frame.cap_len", ours.caplen, fr["cap_len"])
    if ts_ns is not None:
        check("_frame.ts_ns", ts_ns, fr["ts_ns"])
    if theirs["_tshark"]["malformed"]:
        # tshark is more lenient than we are (no ICRC check...), so only this direction.
        check("_frame.malformed", bool(ours.problems), True)

    # Presence of layers, both ways.
    vendor = theirs["_tshark"].get("vendor")
    for name in _PRESENCE:
        a, b = name in mine, name in theirs
        if vendor is not None and name in _IB_LAYERS[1:]:
            continue  # compared as one blob below (T3/T12)
        if a != b:
            check(name, "present" if a else "absent", "present" if b else "absent")

    # Values: every field tshark reports.
    for name, tv in theirs.items():
        if name.startswith("_"):
            continue
        mv = mine.get(name)
        if name == "trailer":
            ours_tr = mine.get("trailer") or ""
            if _problem(ours, "udp.length:", "less than the IP payload"):
                # our trailer starts at the UDP end, tshark's at the IP end: a suffix.
                check("trailer", ours_tr.endswith(tv), True)
            else:
                check("trailer", ours_tr, tv)
            continue
        if name == "vlan":
            mtags = mv or []
            check("vlan.count", len(mtags), len(tv))
            for i, (mt, tt) in enumerate(zip(mtags, tv, strict=False)):
                for k, v in tt.items():
                    check(f"vlan.{i}.{k}", mt.get(k), v)
            continue
        if mv is None:
            continue  # presence already reported (or excused)
        for k, v in tv.items():
            if k == "quanta" and isinstance(v, list):
                for i, q in enumerate(v):
                    check(f"{name}.quanta.{i}", (mv.get("quanta") or [None] * 8)[i], q)
                continue
            check(f"{name}.{k}", mv.get(k), v)
    if "trailer" not in theirs and mine.get("trailer") and ("ipv4" in theirs
                                                            or "ipv6" in theirs):
        # tshark shows padding/trailer after an IP datagram; we must not see more than it.
        tr = mine["trailer"]
        if not _problem(ours, "udp.length:", "less than the IP payload"):
            check("trailer", tr, "")
    if vendor is not None:
        check("_vendor", _after_bth(ours), vendor)
    st.mismatches.extend(out)
    return out


# ====================================================================== batches
def check_records(records: list[wire.Record], pcap: str | os.PathLike,
                  stats: Stats | None = None, labels: list[str] | None = None
                  ) -> tuple[Stats, list[str]]:
    """Write ``records`` to ``pcap``, run tshark once, compare every frame."""
    wire.write(pcap, records)
    return compare_file(pcap, records, stats, labels)


def compare_file(pcap: str | os.PathLike, records: list[wire.Record] | None = None,
                 stats: Stats | None = None, labels: list[str] | None = None
                 ) -> tuple[Stats, list[str]]:
    st = stats if stats is not None else Stats()
    recs = list(wire.read(pcap)) if records is None else records
    theirs = tshark_decode(pcap)
    out: list[str] = []
    if len(theirs) != len(recs):
        out.append(f"{Path(pcap).name}: tshark saw {len(theirs)} frames, we wrote {len(recs)}")
    for i, (rec, t) in enumerate(zip(recs, theirs, strict=False)):
        label = f"{Path(pcap).name}#{i}" + (f" ({labels[i]})" if labels else "") + ": "
        out += compare(wire.dissect(rec.data, rec.orig_len), t, ts_ns=rec.ts_ns, stats=st,
                       label=label)
    return st, out


# ====================================================== native InfiniBand
#: tshark 4.0.17 cannot open a linktype 247 (LINKTYPE_INFINIBAND) pcap ("network type 247
#: unknown or unsupported", TIB1): the same record bytes are given to it as DLT_USER0 (147)
#: with its user_dlts table naming the "infiniband" dissector, which then sees exactly the
#: bytes of our linktype 247 record (frames start at the LRH).
IB_USER_DLT = 147
IB_USER_DLT_UAT = 'uat:user_dlts:"User 0 (DLT=147)","infiniband","0","","0",""'

_LRH = (("infiniband.lrh.vl", "vl", _int), ("infiniband.lrh.lver", "lver", _int),
        ("infiniband.lrh.sl", "sl", _int), ("infiniband.lrh.reserved2", "resv2", _int),
        ("infiniband.lrh.lnh", "lnh", _int), ("infiniband.lrh.dlid", "dlid", _int),
        ("infiniband.lrh.reserved5", "resv5", _int), ("infiniband.lrh.pktlen", "pkt_len", _int),
        ("infiniband.lrh.slid", "slid", _int))
_GRH = (("infiniband.grh.ipver", "ip_ver", _int), ("infiniband.grh.tclass", "tclass", _int),
        ("infiniband.grh.flowlabel", "flow_label", _int),
        ("infiniband.grh.paylen", "pay_len", _int), ("infiniband.grh.nxthdr", "nxt_hdr", _int),
        ("infiniband.grh.hoplmt", "hop_lmt", _int), ("infiniband.grh.sgid", "sgid", _ip6),
        ("infiniband.grh.dgid", "dgid", _ip6))
_RWH = (("infiniband.rwh.etype", "ethertype", _int),)
_MAD = (("infiniband.mad.baseversion", "base_version", _int),
        ("infiniband.mad.mgmtclass", "mgmt_class", _int),
        ("infiniband.mad.classversion", "class_version", _int),
        ("infiniband.mad.method", "method", _int), ("infiniband.mad.status", "status", _int),
        ("infiniband.mad.classspecific", "class_specific", _int),
        ("infiniband.mad.transactionid", "transaction_id", _int),
        ("infiniband.mad.attributeid", "attribute_id", _int),
        ("infiniband.reserved", "resv16", lambda v: int(_hexbytes(v), 16)),
        ("infiniband.mad.attributemodifier", "attribute_modifier", _int))
_IB_FC = (("infiniband_link.op", "op", _int), ("infiniband_link.fctbs", "fctbs", _int),
          ("infiniband_link.vl", "vl", _int), ("infiniband_link.fccl", "fccl", _int),
          ("infiniband_link.lpcrc", "lpcrc", _int))
_ERF = (("erf.types.type", "type", _int), ("erf.types.ext_header", "ext", _int),
        ("erf.flags", "flags", _int), ("erf.rlen", "rlen", _int),
        ("erf.lctr", "lctr", _int), ("erf.wlen", "wlen", _int))


def ib_tshark_layers(pcap: str | os.PathLike) -> list[dict]:
    """tshark's raw JSON layers of every frame of an IB capture (DLT_USER0 or ERF)."""
    tshark = require_tshark()
    args = [*tshark_args(tshark, pcap), "-o", IB_USER_DLT_UAT]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"tshark exited {proc.returncode} on {pcap}: "
                             f"{proc.stderr.strip()[-500:]}")
    return [p["_source"]["layers"] for p in json.loads(proc.stdout or "[]")]


def normalise_native_ib(layers: Mapping) -> dict:
    """One frame of tshark's JSON (ERF and/or InfiniBand) -> our schema (native IB layers),
    plus ``_tshark`` (departures applied while translating, malformed/expert notes)."""
    meta: dict = {"mapped": [], "malformed": "_ws.malformed" in layers}
    out: dict = {"_tshark": meta}
    erf = _outer(layers.get("erf"))
    if isinstance(erf, dict):
        flat = {k: _find(erf, k) for k, _o, _c in _ERF}
        e = _fields({k: v for k, v in flat.items() if v is not None}, _ERF)
        ts = _find(erf, "erf.ts")
        if ts is not None:
            e["ts"] = _int(ts).to_bytes(8, "little").hex()  # the LE number; ours: its bytes
        fr = _outer(layers.get("frame"))
        if isinstance(fr, dict) and "frame.time_epoch" in fr:
            e["ts_ns"] = _ts_ns(fr["frame.time_epoch"])  # Wireshark's time is the ERF one
        experts: list[str] = []
        _collect_experts(erf, experts)
        meta["erf_experts"] = experts
        out["erf"] = e
    data = _outer(layers.get("data"))
    if isinstance(data, dict) and "data.data" in data:  # the payload, pad included
        meta["data"] = _hexbytes(data["data.data"])
    link = _outer(layers.get("infiniband_link"))
    if isinstance(link, dict):
        out["ib_fc"] = _fields(link, _IB_FC)
    ib = _outer(layers.get("infiniband"))
    if not isinstance(ib, dict):
        return out
    ip6 = _outer(ib.get("ipv6", layers.get("ipv6")))
    lnh = _find(ib.get("infiniband.lrh_tree"), "infiniband.lrh.lnh")
    if isinstance(ip6, dict) and lnh is not None and _int(lnh) == 1:
        # LNH 1 (IP non-IBA): tshark's IPv6 dissector, inside IB (a raw packet's IPv6
        # payload, EtherType 0x86DD, is not our ipv6 layer)
        v6 = _fields(ip6, _IP6)
        tc = ip6.get("ipv6.tclass_tree", {})
        if "ipv6.tclass.dscp" in tc:
            v6["dscp"] = _int(tc["ipv6.tclass.dscp"])
            v6["ecn"] = _int(tc["ipv6.tclass.ecn"])
        out["ipv6"] = v6
    for key, table, name in (("infiniband.lrh_tree", _LRH, "lrh"),
                             ("infiniband.grh_tree", _GRH, "grh"),
                             ("infiniband.rwh_tree", _RWH, "rwh"),
                             ("infiniband.mad_tree", _MAD, "mad")):
        t = ib.get(key)
        if isinstance(t, dict):
            out[name] = _fields(t, table)
    ib = dict(ib)
    for k in ("infiniband.invariant.crc", "infiniband.variant.crc"):
        v = ib.get(k)
        if isinstance(v, list):  # TIB7: shown twice (identical) after some headers
            meta["mapped"].append("TIB7")
            meta.setdefault("crc_copies", []).append(v)
            ib[k] = v[0]
    _normalise_ib(ib, out, meta)  # BTH, extended headers, ICRC (T1, T2 as for RoCEv2)
    vc = ib.get("infiniband.variant.crc")
    if vc is not None:
        # TIB3: like the ICRC (T2), the VCRC's wire bytes read big-endian.
        out["vcrc"] = {"value": int.from_bytes(_int(vc).to_bytes(2, "big"), "little")}
        meta["mapped"].append("TIB3")
    return out


#: Where tshark 4.0.17 departs from our decode of native IB (docs/explanation/wireshark.md,
#: "Native InfiniBand and ERF").
#: Each entry: (why, predicate on (ours, theirs)) excusing a *missing* layer on tshark's
#: side; a field tshark does report is never excused.
IB_DEPARTURES: dict[str, str] = {
    "TIB1": "no linktype 247: records are given to tshark as DLT_USER0 with the "
            "infiniband dissector (same bytes)",
    "TIB2": "a link flow-control packet (ERF type 25) is 'Malformed' (an exception, no "
            "field shown) when it is 6 bytes long (wlen 6), and for some values even with "
            "2 more bytes (e.g. FCTBS 0x123); with wlen >= 8 most decode",
    "TIB3": "ICRC and VCRC values are shown as their wire bytes read big-endian",
    "TIB4": "the ICRC/VCRC are shown only when exactly 6, 4 or 2 bytes remain after what "
            "tshark dissected; after a payload tshark shows neither",
    "TIB5": "the payload (and the pad, the ICRC and the VCRC) of a raw or IPv6 LNH packet "
            "is handed to other dissectors, not shown as IB fields",
    "TIB6": "a datagram to QP0/QP1 is dissected as a MAD only when it holds a whole "
            "256-byte MAD; we show the 24-byte common header whenever it fits",
    "TIB7": "after some headers the ICRC and VCRC fields appear twice (same value)",
    "TIB9": "the payload of an IB transport packet is often not shown at all (after a "
            "RETH or ImmDt, in a MAD it does not take, for opcodes IBA gives no payload, "
            "for some SENDs); when shown (tshark's data layer) it is payload + pad",
    "TIB8": "a record without its VCRC (pkt_len reaches the end of the record): tshark "
            "still takes the last 6 bytes as ICRC + VCRC",
}


def compare_native_ib(ours: wire.Decoded, theirs: Mapping, label: str = "",
                      counts: Counter | None = None) -> list[str]:
    """Every field tshark reports is compared with ours; a layer of ours that tshark lacks
    is a mismatch unless an :data:`IB_DEPARTURES` entry explains it (counted)."""
    out: list[str] = []
    counts = counts if counts is not None else Counter()
    for t in theirs["_tshark"]["mapped"]:
        counts[t] += 1
    shown_pay = {k: v for k, v in theirs.items() if not k.startswith("_")}
    no_vcrc = (ours.get("vcrc") or {}).get("absent", False)
    for name, fields in shown_pay.items():
        mine = ours.get(name)
        if no_vcrc and name in ("icrc", "vcrc"):
            counts["TIB8"] += 1  # tshark takes the record's last 6 bytes as ICRC + VCRC
            continue
        if mine is None:
            out.append(f"{label}{name}: tshark shows it, we do not")
            continue
        for k, v in fields.items():
            mv = mine.get(k)
            if k in ("sgid", "dgid", "src", "dst") and isinstance(mv, str):
                mv = _ip6(mv)
            if mv != v:
                out.append(f"{label}{name}.{k}: ours {mv!r}, tshark {v!r}")
    pay = ours.get("payload")
    if pay is not None and "data" in theirs["_tshark"]:
        mine = pay["data"] + pay.get("pad", "")
        if "bth" not in ours:
            counts["TIB5"] += 1  # a raw / IPv6 packet's payload went to other dissectors
        elif no_vcrc:
            counts["TIB8"] += 1  # its payload ends 2 bytes early
        elif mine != theirs["_tshark"]["data"]:
            out.append(f"{label}payload: ours {mine!r} (data + pad), tshark "
                       f"{theirs['_tshark']['data']!r}")
    for name in ours.names:
        if name in shown_pay:
            continue
        if name == "payload":
            if "data" not in theirs["_tshark"]:
                counts["TIB5" if "rwh" in ours or "ipv6" in ours else "TIB9"] += 1
            continue
        if name in ("icrc", "vcrc"):
            why = "TIB4"
        elif name == "ib_fc" and theirs["_tshark"]["malformed"]:
            why = "TIB2"
        elif name == "mad" and (ours.get("payload") or {}).get("length", 0) != 232:
            why = "TIB6"  # tshark takes only a whole 256-byte MAD for one
        else:
            why = None
        if why is None:
            out.append(f"{label}{name}: we show it, tshark does not")
        else:
            counts[why] += 1
    return out

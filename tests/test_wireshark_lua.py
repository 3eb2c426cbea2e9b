"""The generated Wireshark Lua dissector (wire/wireshark/lossless_scaleup.lua) against ours.

Frames of every scale-up stack (crafted, and drawn by Hypothesis) go into one pcap per batch;
one tshark run with ``-X lua_script:`` decodes the batch and EVERY field we report for
``esun``/``sunh``/``afh``/``sue_rh``/``sue_txn[*]``/``rcrc`` is compared with the Lua's field
of the same name, plus the Ethernet trailer (``<net>.trailer``), undissected bytes (``raw``
vs Wireshark's ``data``) and our scale-up problems vs the Lua's expert infos (same text).
Also: the committed Lua is not stale, preferences (``-o``) retarget it, a perturbed mask is
caught, and the ``lossless wireshark-plugin`` command.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import wire
from tests.tshark import require_tshark
from wire import strategies as wst
from wire import wireshark_gen as gen
from wire.scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from wire.sue import AFH_FORMS, AFH_GEN1, SUE_RH, SueOp, rcrc, txn_spec
from wire.sunh import SUNH

ROOT = Path(__file__).resolve().parent.parent
LUA = gen.LUA_PATH
#: Our layers the Lua shows (sue_txn is a list).
LAYERS = ("esun", "sunh", "afh", "sue_rh", "rcrc")
NETS = ("esun", "sunh", "afh")
OUR_EXPERTS = {e.abbr for e in gen.EXPERTS}
SCALEUP_PROBLEM = re.compile(r"(esun|sunh|afh|sue_rh|sue_txn\[\d+\]|sue|rcrc)[.:]")

#: A configuration with every placeholder moved (and the other settings changed).
ALT = ScaleUpConfig(esun_ethertype=0x9B00, sunh_ethertype=0x9B02, afh_gen1_ethertype=0x9B03,
                    sue_ethertype=0x9B04, sue_udp_port=40000, sunh_sue_protocol=254,
                    esun_transport="sue_lite", afh_gen2_form="6", txn_hdr_bytes=16,
                    max_pdu_bytes=2048, max_pdu_lite_bytes=512)

HYPOTHESIS = settings(max_examples=12, deadline=None, database=None,
                      phases=[Phase.explicit, Phase.reuse, Phase.generate],
                      suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                             HealthCheck.large_base_example])


# ================================================================= running tshark
def run_tshark(pcap: Path, opts: list[str] = (), lua: Path = LUA) -> list[dict]:
    tshark = require_tshark()
    args = [tshark, "-n", "-X", f"lua_script:{lua}", "-r", str(pcap), "-T", "json",
            "--no-duplicate-keys", *opts]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, f"tshark exited {proc.returncode}: {proc.stderr[-800:]}"
    assert "Lua: Error" not in proc.stderr and "lossless_scaleup:" not in proc.stderr, \
        proc.stderr
    assert "_ws.lua.error" not in proc.stdout, "a Lua error during dissection"
    return [p["_source"]["layers"] for p in json.loads(proc.stdout or "[]")]


def write_batch(path: Path, dicts: list[dict], cfg: ScaleUpConfig = DEFAULT_SCALEUP,
                frames: list[bytes] | None = None) -> list[wire.Record]:
    recs = []
    for i, d in enumerate(dicts):
        f = frames[i] if frames is not None else wire.build(d, scaleup=cfg)
        orig = d.get("len", len(f)) if isinstance(d, dict) else len(f)
        recs.append(wire.Record(i * 1000, f[:d["caplen"]] if "caplen" in d else f, orig))
    wire.write(path, recs)
    return recs


# ================================================================= normalising
def _as_list(v: object) -> list:
    if v is None:
        return []
    return v if isinstance(v, list) else [v]


def _experts(obj: object, acc: list) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "_ws.expert":
                for e in _as_list(v):
                    names = [x for x in e if not x.startswith("_ws.expert")]
                    acc.extend((n, e.get("_ws.expert.message")) for n in names)
            else:
                _experts(v, acc)
    elif isinstance(obj, list):
        for v in obj:
            _experts(v, acc)


def _fields(proto: str, tree: dict) -> dict:
    out = {}
    for k, v in tree.items():
        if k.startswith(proto + ".") and k != proto + ".trailer":
            out[k[len(proto) + 1:]] = v
    return out


def theirs_of(layers: dict) -> dict:
    """The Lua's decode of one frame: our layers (values as tshark prints them)."""
    out: dict = {}
    for name in LAYERS:
        items = _as_list(layers.get(name))
        if len(items) > 1:
            out[f"{name}.count"] = len(items)
        if items:
            out[name] = _fields(name, items[0])
            if name in NETS and f"{name}.trailer" in items[0]:
                out["trailer"] = items[0][f"{name}.trailer"].replace(":", "")
    out["sue_txn"] = [_fields("sue_txn", t) for t in _as_list(layers.get("sue_txn"))]
    data = _as_list(layers.get("data"))
    if data:
        out["raw"] = "".join(d.get("data.data", "").replace(":", "") for d in data)
    acc: list = []
    _experts(layers, acc)
    out["experts"] = sorted((a, m) for a, m in acc if a in OUR_EXPERTS)
    return out


def ours_of(d: wire.Decoded) -> dict:
    dd = d.to_dict()
    out = {name: dd[name] for name in LAYERS if name in dd}
    out["sue_txn"] = dd.get("sue_txn", [])
    if any(n in dd for n in NETS):
        out["trailer"] = dd.get("trailer") or ""
    if dd.get("raw"):
        out["raw"] = dd["raw"]
    probs = [p for p in d.problems if SCALEUP_PROBLEM.match(p)]
    unmapped = [p for p in probs if gen.expert_for_problem(p) is None]
    assert not unmapped, f"scale-up problems without an expert info in the Lua: {unmapped}"
    out["experts"] = sorted((gen.expert_for_problem(p), p) for p in probs)
    return out


def _same(ours: object, theirs: object) -> bool:
    if isinstance(ours, bool):
        return str(theirs) in (("1", "True", "true") if ours else ("0", "False", "false"))
    if isinstance(ours, int):
        try:
            return int(str(theirs), 0) == ours
        except ValueError:
            return False
    if isinstance(ours, str) and isinstance(theirs, str):
        return ours.replace(":", "").lower() == theirs.replace(":", "").lower()
    return ours == theirs


@dataclass
class Stats:
    frames: int = 0
    compared: int = 0
    agreed: int = 0
    by_layer: dict = field(default_factory=dict)
    mismatches: list = field(default_factory=list)

    def check(self, label: str, key: str, ours: object, theirs: object) -> None:
        self.compared += 1
        layer = key.split(".")[0].split("[")[0]
        ok = _same(ours, theirs)
        tot = self.by_layer.setdefault(layer, [0, 0])
        tot[1] += 1
        if ok:
            self.agreed += 1
            tot[0] += 1
        else:
            self.mismatches.append(f"{label}{key}: ours {ours!r}, lua {theirs!r}")

    def summary(self) -> str:
        per = ", ".join(f"{k} {a}/{n}" for k, (a, n) in sorted(self.by_layer.items()))
        return (f"{self.frames} frames, {self.agreed}/{self.compared} fields agree "
                f"[{per}]; {len(self.mismatches)} mismatches")


def _compare_dict(st_: Stats, label: str, key: str, ours: dict | None, theirs: dict | None):
    if ours is None or theirs is None:
        st_.check(label, key, "present" if ours is not None else "absent",
                  "present" if theirs is not None else "absent")
        return
    for k in sorted(set(ours) | set(theirs)):
        st_.check(label, f"{key}.{k}", ours.get(k), theirs.get(k))


_AROUND_TS = {"eth": "eth", "ipv4": "ip", "udp": "udp"}
_AROUND = {"eth": (("dst", "eth.dst"), ("src", "eth.src"), ("type", "eth.type")),
           "ipv4": (("src", "ip.src"), ("dst", "ip.dst"), ("protocol", "ip.proto")),
           "udp": (("sport", "udp.srcport"), ("dport", "udp.dstport"), ("length", "udp.length"),
                   ("checksum", "udp.checksum"))}


def compare_frame(st_: Stats, label: str, d: wire.Decoded, layers: dict,
                  extra: bool = True, skip: tuple[str, ...] = ()) -> None:
    st_.frames += 1
    ours, theirs = ours_of(d), theirs_of(layers)
    for k in skip:
        ours.pop(k, None)
        theirs.pop(k, None)
    for name in LAYERS:
        if name in ours or name in theirs:
            _compare_dict(st_, label, name, ours.get(name), theirs.get(name))
        if f"{name}.count" in theirs:
            st_.check(label, f"{name}.count", 1, theirs[f"{name}.count"])
    st_.check(label, "sue_txn.count", len(ours["sue_txn"]), len(theirs["sue_txn"]))
    for i, (a, b) in enumerate(zip(ours["sue_txn"], theirs["sue_txn"], strict=False)):
        _compare_dict(st_, label, f"sue_txn[{i}]", a, b)
    if "trailer" in ours or "trailer" in theirs:
        st_.check(label, "trailer", ours.get("trailer", ""), theirs.get("trailer", ""))
    if "payload" not in d and "raw" not in skip:  # a UDP payload for another port: Wireshark's
        st_.check(label, "raw", ours.get("raw", ""), theirs.get("raw", ""))
    st_.check(label, "experts", ours["experts"], theirs["experts"])
    if not extra:
        return
    if "udp" in skip:
        return
    # The layers around ours (eth only when it holds real addresses, not AFH Gen2).
    for name, keys in _AROUND.items():
        tree = layers.get(_AROUND_TS[name])
        if name in d and "vlan" not in d and isinstance(tree, dict):
            for k, ts_key in keys:
                v = tree.get(ts_key)
                st_.check(label, f"{name}.{k}", d[name][k], v.lower() if v else v)


def compare_batch(tmp: Path, name: str, dicts: list[dict], cfg: ScaleUpConfig = DEFAULT_SCALEUP,
                  opts: list[str] | None = None, lua: Path = LUA,
                  labels: list[str] | None = None) -> Stats:
    pcap = tmp / f"{name}.pcap"
    recs = write_batch(pcap, dicts, cfg)
    layers = run_tshark(pcap, gen.prefs_args(cfg) if opts is None else opts, lua)
    st_ = Stats()
    assert len(layers) == len(recs)
    for i, (rec, lay) in enumerate(zip(recs, layers, strict=True)):
        lab = f"{name}#{i}" + (f" ({labels[i]})" if labels else "") + ": "
        compare_frame(st_, lab, wire.dissect(rec.data, rec.orig_len, scaleup=cfg), lay)
    return st_


# ================================================================ crafted frames
def _txns(*lens: int, **kw) -> list[dict]:
    return [{"opcode": "WRITE", "data": "a5" * n, "tag": i, **kw} for i, n in enumerate(lens)]


def crafted(cfg: ScaleUpConfig) -> dict[str, dict]:
    """One frame per stack and per problem the Lua must report."""
    esun_rh = cfg.esun_transport == "sue_rh"
    cap = cfg.max_pdu_bytes if esun_rh else cfg.max_pdu_lite_bytes
    big = cap // (256 + cfg.txn_hdr_bytes) + 1
    out = {
        "esun": {"esun": {"f": 1, "cos": 5, "ecn": 3, "flow_label": 0xBEEF, "ttl": 9, "ud": 2,
                          "rsvd": 1, "rev": 2},
                 "sue_rh": {"xpuid": 1023, "npsn": 65535, "vc": 3, "partition": 513,
                            "apsn": 7, "ver": 3, "rsvd0": 2, "rsvd1": 9},
                 "sue_txn": [{"opcode": "WRITE", "data": "11" * 16, "tag": 0xFFFFFFFF,
                              "flags": 0x7F},
                             {"opcode": "READ_REQ", "data": ""},
                             {"opcode": 0xFF, "data": "22" * 3}]},
        "esun_ack": {"esun": {}, "sue_rh": {"op": "ACK", "apsn": 12}},
        "esun_vlan": {"vlan": [{"vid": 100, "pcp": 3}], "esun": {"cos": 2},
                      "sue_rh": {}, "sue_txn": _txns(8)},
        "esun_bad_rcrc": {"esun": {}, "sue_rh": {}, "sue_txn": _txns(4),
                          "rcrc": {"value": 0x12345678}},
        "esun_opcode0": {"esun": {}, "sue_rh": {}, "sue_txn": [{"opcode": 0, "data": "33"}]},
        "esun_no_last": {"esun": {}, "sue_rh": {}, "sue_txn": _txns(2, last=0)},
        "esun_no_last_unpadded": {"esun": {}, "sue_rh": {}, "sue_txn": _txns(20, last=0),
                                  "trailer": ""},
        "esun_lying_length": {"esun": {}, "sue_rh": {},
                              "sue_txn": [{"opcode": 1, "length": 200, "data": "44" * 4,
                                           "last": 1}], "raw": "", "trailer": ""},
        "esun_too_long": {"esun": {}, "sue_rh": {}, "sue_txn": _txns(300)},
        "esun_pdu_too_big": {"esun": {}, "sue_rh": {}, "sue_txn": _txns(*[256] * big)},
        "esun_truncated": {"eth": {"type": cfg.esun_ethertype}, "raw": "0102",
                           "trailer": ""},
        "esun_rh_truncated": {"esun": {}, "raw": "8000", "trailer": ""},
        "rcrc_truncated": {"esun": {}, "sue_rh": {}, "sue_txn": _txns(3, last=1), "raw": "",
                           "trailer": ""},
        "sunh_truncated": {"eth": {"type": cfg.sunh_ethertype}, "raw": "0102", "trailer": ""},
        "afh_truncated": {"eth": {"type": cfg.afh_gen1_ethertype}, "raw": "01", "trailer": ""},
        "esun_snapped": {"esun": {}, "sue_rh": {}, "sue_txn": _txns(100), "caplen": 60},
        "sunh": {"sunh": {"dscp": 46, "ecn": 1, "hop_limit": 3, "flow_label": 0xABC,
                          "src": 0x1234, "dst": 0xFFFF},
                 "sue_rh": {"xpuid": 9}, "sue_txn": _txns(5, 0, 1)},
        "sunh_udp": {"sunh": {"src": 1, "dst": 2},
                     "udp": {"sport": cfg.sue_udp_port + 1000, "dport": cfg.sue_udp_port},
                     "sue_rh": {"npsn": 3}, "sue_txn": _txns(7)},
        "sunh_udp_checksum": {"sunh": {}, "udp": {"sport": cfg.sue_udp_port + 7,
                                                  "dport": cfg.sue_udp_port,
                                                  "checksum": 0xBEEF},
                              "sue_rh": {"xpuid": 4}, "sue_txn": _txns(2, 1)},
        "sunh_udp_other": {"sunh": {}, "udp": {"sport": 60001, "dport": 60000},
                           "payload": {"data": "abcd"}},
        "sunh_other_nh": {"sunh": {"next_header": 6}, "raw": "deadbeef" * 3},
        "afh_gen1": {"afh": {"form": "gen1", "ar": 1, "f": 1, "c": 1, "cnm": 1, "ttl": 4,
                             "dscp": 63, "ecn": 2},
                     "sue_rh": {"op": "NACK", "npsn": 4}},
        "afh_gen1_txn": {"afh": {"form": "gen1"}, "sue_rh": {}, "sue_txn": _txns(9, 10)},
        "afh_gen1_other": {"afh": {"form": "gen1", "type": 0x0800}, "raw": "45" * 20},
        "afh_gen2": {"afh": {"form": "gen2_12" if cfg.afh_gen2_form == "12" else "gen2_6",
                             "v": 1, "w": 1, "m": 1, "hop_limit": 2, "dst_xpu": 0xABCD,
                             "src_xpu": 0x1234},
                     **({"sue_rh": {"vc": 1}} if cfg.afh_gen2_form == "12" else {}),
                     "sue_txn": _txns(3, 250)},
        "afh_gen2_vlan": {"eth": {"type": cfg.sue_ethertype}, "vlan": [{"vid": 5}],
                          "raw": "80" * 30},
        "ipv4_udp": {"ipv4": {}, "udp": {"sport": cfg.sue_udp_port + 1,
                                         "dport": cfg.sue_udp_port},
                     "sue_rh": {}, "sue_txn": _txns(64, 64)},
        "ipv6_udp": {"ipv6": {}, "udp": {"sport": cfg.sue_udp_port + 2,
                                         "dport": cfg.sue_udp_port},
                     "sue_rh": {"op": "RESERVED"}},
        "udp_extra_bytes": {"ipv4": {}, "udp": {"sport": cfg.sue_udp_port + 3,
                                                "dport": cfg.sue_udp_port},
                            "raw": "0000"},
        "udp_short_rh": {"ipv4": {}, "udp": {"sport": cfg.sue_udp_port + 4,
                                             "dport": cfg.sue_udp_port}, "raw": "abcdef"},
    }
    if not esun_rh:  # SUE-Lite after the EH: no RH, no R-CRC
        for d in out.values():
            if "esun" in d:
                d.pop("sue_rh", None)
                d.pop("rcrc", None)
                if "sue_txn" not in d and "raw" not in d:
                    d["sue_txn"] = _txns(1)
    return out


def _build_crafted(cfg: ScaleUpConfig) -> tuple[list[str], list[dict], list[bytes]]:
    names, dicts, frames = [], [], []
    for name, d in crafted(cfg).items():
        d = dict(d)
        caplen = d.pop("caplen", None)
        if name == "udp_extra_bytes":  # a whole PDU (RH + R-CRC), then 2 bytes in the datagram
            rh = SUE_RH.pack({"op": "ACK"})
            pdu = rh + rcrc(rh).to_bytes(4, "big") + bytes.fromhex(d["raw"])
            f = wire.build({"ipv4": {}, "udp": d["udp"], "payload": {"data": pdu.hex()}},
                           scaleup=cfg)
        elif name == "udp_short_rh":
            f = wire.build({"ipv4": {}, "udp": d["udp"], "payload": {"data": d["raw"]}},
                           scaleup=cfg)
        else:
            f = wire.build(d, scaleup=cfg)
        if caplen is not None:
            d["caplen"], d["len"] = caplen, len(f)
        names.append(name)
        dicts.append(d)
        frames.append(f)
    return names, dicts, frames


def _run_crafted(tmp: Path, cfg: ScaleUpConfig, tag: str) -> Stats:
    names, dicts, frames = _build_crafted(cfg)
    pcap = tmp / f"crafted_{tag}.pcap"
    recs = write_batch(pcap, dicts, cfg, frames)
    layers = run_tshark(pcap, gen.prefs_args(cfg))
    st_ = Stats()
    assert len(layers) == len(recs)
    for i, (rec, lay) in enumerate(zip(recs, layers, strict=True)):
        d = wire.dissect(rec.data, rec.orig_len, scaleup=cfg)
        compare_frame(st_, f"{tag}#{i} ({names[i]}): ", d, lay)
    return st_, names, recs, layers


@pytest.fixture(scope="module", autouse=True)
def _tshark():
    return require_tshark()


def test_crafted_frames_default_config(tmp_path):
    st_, _names, recs, _ = _run_crafted(tmp_path, DEFAULT_SCALEUP, "default")
    print(st_.summary())
    assert not st_.mismatches, "\n".join(st_.mismatches)
    # Every problem kind the Lua reports was exercised.
    seen = {gen.expert_for_problem(p)
            for rec in recs for p in wire.dissect(rec.data, rec.orig_len).problems}
    missing = {e.abbr for e in gen.EXPERTS} - seen
    assert not missing, f"expert infos no crafted frame triggers: {missing}"
    assert st_.compared >= 800, st_.summary()


def test_crafted_frames_other_config(tmp_path):
    """Every placeholder moved through ``-o``: the frames built with that config decode."""
    st_, _names, _recs, _ = _run_crafted(tmp_path, ALT, "alt")
    print(st_.summary())
    assert not st_.mismatches, "\n".join(st_.mismatches)
    assert st_.by_layer.get("afh", [0, 0])[1] > 0 and st_.compared >= 600, st_.summary()
    # ... and without the preferences the same capture is not decoded as ours.
    pcap = tmp_path / "crafted_alt.pcap"
    plain = run_tshark(pcap, [])
    assert not any(theirs_of(lay).get(n) for lay in plain for n in LAYERS if n != "sue_rh")


def test_sunh_udp_with_udp_checksum_checking_on(tmp_path):
    """Wireshark's UDP asserts under SUNH when it checks checksums (no IP pseudo-header), so
    the Lua does not call it then: the UDP header is data, the SUE PDU is still dissected."""
    names, dicts, frames = _build_crafted(DEFAULT_SCALEUP)
    keep = [i for i, n in enumerate(names) if n.startswith("sunh_udp")]
    pcap = tmp_path / "sunh_udp.pcap"
    recs = write_batch(pcap, [dicts[i] for i in keep], frames=[frames[i] for i in keep])
    layers = run_tshark(pcap, ["-o", "udp.check_checksum:TRUE"])
    st_ = Stats()
    for i, (rec, lay) in enumerate(zip(recs, layers, strict=True)):
        d = wire.dissect(rec.data)
        csum = d["udp"]["checksum"] != 0
        compare_frame(st_, f"{names[keep[i]]}: ", d, lay, skip=("raw", "udp") if csum else ())
        if csum:
            acc: list = []
            _experts(lay, acc)
            assert [a for a, _m in acc if a == "sunh.udp_not_dissected"], lay
            assert "Dissector bug" not in json.dumps(lay)
    assert not st_.mismatches, "\n".join(st_.mismatches)
    assert st_.by_layer["sue_txn"][1] >= 12, st_.summary()


def test_reference_capture_scaleup():
    """pcaps/scaleup.pcap (default config, crafted by lossless craft from scaleup.jsonl)."""
    pcap = ROOT / "pcaps" / "scaleup.pcap"
    if not pcap.exists():
        pytest.skip("pcaps/scaleup.pcap not generated")
    recs = list(wire.read(pcap))
    layers = run_tshark(pcap)
    assert len(layers) == len(recs)
    st_ = Stats()
    for i, (rec, lay) in enumerate(zip(recs, layers, strict=True)):
        d = wire.dissect(rec.data, rec.orig_len)
        compare_frame(st_, f"scaleup#{i}: ", d, lay)
    print(st_.summary())
    assert not st_.mismatches, "\n".join(st_.mismatches)
    assert st_.compared >= 20 * len(recs), st_.summary()


def test_pref_override_single_ethertype(tmp_path):
    """The example of the README: ``-o esun.ethertype:0x...`` alone."""
    cfg = DEFAULT_SCALEUP.with_(esun_ethertype=0x88B7)
    d = {"esun": {"cos": 6}, "sue_rh": {"xpuid": 77}, "sue_txn": _txns(5)}
    st_ = compare_batch(tmp_path, "pref", [d], cfg, opts=["-o", "esun.ethertype:0x88B7"])
    assert not st_.mismatches, "\n".join(st_.mismatches)
    assert st_.by_layer["esun"] == [8, 8]
    st2 = compare_batch(tmp_path, "pref_dec", [d], cfg, opts=["-o", "esun.ethertype:34999"])
    assert not st2.mismatches, "\n".join(st2.mismatches)


# ============================================================ Hypothesis frames
def _fields_of(spec, draw, drop=()) -> dict:
    v = draw(wst.raw_values(spec))
    for k in drop:
        v.pop(k, None)
    return v


@st.composite
def scaleup_dicts(draw, cfg: ScaleUpConfig) -> dict:
    """A frame of one scale-up stack, random header fields, sometimes broken: opcode 0, a
    missing or early last bit, data over 256 bytes, a wrong R-CRC (wire.strategies draws
    valid frames only)."""
    stack = draw(st.sampled_from(("esun", "esun_vlan", "sunh", "sunh_udp", "afh_gen1",
                                  "afh_gen2", "ipv4_udp", "ipv6_udp")))
    d: dict = {}
    port = cfg.sue_udp_port
    if stack.startswith("esun"):
        d["esun"] = _fields_of(wire.SPECS["esun"], draw)
        if stack == "esun_vlan":
            d["vlan"] = [{"vid": draw(st.integers(0, 4095)), "pcp": draw(st.integers(0, 7))}]
        rh = cfg.esun_transport == "sue_rh"
    elif stack == "sunh":
        d["sunh"] = _fields_of(SUNH, draw) | {"next_header": cfg.sunh_sue_protocol}
        rh = True
    elif stack == "sunh_udp":
        d["sunh"] = _fields_of(SUNH, draw, ("next_header",))
        d["udp"] = {"sport": draw(st.integers(port + 1, 65535)), "dport": port}
        rh = True
    elif stack == "afh_gen1":
        d["afh"] = _fields_of(AFH_GEN1, draw) | {"form": "gen1", "type": cfg.sue_ethertype}
        rh = True
    elif stack == "afh_gen2":
        form = "gen2_12" if cfg.afh_gen2_form == "12" else "gen2_6"
        d["afh"] = _fields_of(AFH_FORMS[form], draw, ("type",)) | {"form": form}
        kind = cfg.afh_gen2_12_transport if form == "gen2_12" else cfg.afh_gen2_6_transport
        rh = kind == "sue_rh"
    else:
        d["ipv4" if stack == "ipv4_udp" else "ipv6"] = {}
        d["udp"] = {"sport": draw(st.integers(port + 1, 65535)), "dport": port}
        rh = True
    if rh:
        d["sue_rh"] = _fields_of(SUE_RH, draw)
        if draw(st.integers(0, 3)):
            d["sue_rh"]["op"] = int(SueOp.DATA)
        if draw(st.integers(0, 5)) == 0:
            d["rcrc"] = {"value": draw(st.integers(0, 0xFFFFFFFF))}
    if not rh or d["sue_rh"]["op"] == SueOp.DATA:
        spec = txn_spec(cfg.txn_hdr_bytes)
        n = draw(st.integers(1, 5))
        txns = []
        for _ in range(n):
            t = _fields_of(spec, draw, ("length", "last"))
            if draw(st.integers(0, 7)):
                t["opcode"] = draw(st.integers(1, 255))  # opcode 0 now and then
            # Sizes from Hypothesis, contents from a seed: Hypothesis' buffer (8 KB per
            # example) would not hold a batch of frames' worth of drawn bytes.
            size = draw(st.one_of(st.integers(0, 48), st.integers(0, 300)))
            t["data"] = random.Random(draw(st.integers(0, 2**32 - 1))).randbytes(size).hex()
            if draw(st.integers(0, 9)) == 0:
                t["last"] = draw(st.integers(0, 1))  # a missing or early last bit
            txns.append(t)
        d["sue_txn"] = txns
    return d


def _higher_source_port(d: dict, cfg: ScaleUpConfig) -> dict:
    """Wireshark's UDP tries the lower port first (a source port with a dissector of its own
    would take the datagram); wire.dissect looks at the destination port only.  Frames to
    the SUE port get a higher source port (README "Known limits")."""
    udp = d.get("udp")
    if udp and udp.get("dport") == cfg.sue_udp_port and udp.get("sport", 0) <= udp["dport"]:
        d = {**d, "udp": {**udp, "sport": udp["dport"] + 1 + udp.get("sport", 0) % (
            0xFFFF - udp["dport"])}}
    return d


def frames_of(cfg: ScaleUpConfig) -> st.SearchStrategy[dict]:
    """Our local strategy (problems included) and wire.strategies' valid scale-up frames."""
    shared = wst.scaleup_frame_dicts(scaleup=cfg).map(lambda d: _higher_source_port(d, cfg))
    return st.one_of(scaleup_dicts(cfg), shared)


def _hypothesis_batch(tmp: Path, cfg: ScaleUpConfig, tag: str, dicts: list[dict]) -> Stats:
    st_ = compare_batch(tmp, tag, dicts, cfg)
    print(st_.summary())
    assert not st_.mismatches, "\n".join(st_.mismatches[:60])
    assert st_.compared >= 10 * len(dicts), st_.summary()
    return st_


@HYPOTHESIS
@given(st.lists(frames_of(DEFAULT_SCALEUP), min_size=10, max_size=25))
def test_hypothesis_frames_default_config(tmp_path_factory, dicts):
    _hypothesis_batch(tmp_path_factory.mktemp("hyp"), DEFAULT_SCALEUP, "hyp", dicts)


@settings(HYPOTHESIS, max_examples=6)
@given(st.lists(frames_of(ALT), min_size=10, max_size=25))
def test_hypothesis_frames_other_config(tmp_path_factory, dicts):
    _hypothesis_batch(tmp_path_factory.mktemp("hyp_alt"), ALT, "hyp_alt", dicts)


# ================================================================== the test can fail
def test_a_perturbed_mask_is_caught(tmp_path):
    """Move the generated mask of esun.cos one bit: the comparison must report it."""
    src = gen.render()
    bad, n = re.subn(r'(ProtoField\.uint8\("esun\.cos", "cos", base\.DEC, nil, )0x1C',
                     r"\g<1>0x0E", src)
    assert n == 1, "the esun.cos ProtoField line changed shape"
    lua = tmp_path / "perturbed.lua"
    lua.write_text(bad, encoding="utf-8")
    d = {"esun": {"cos": 5, "ecn": 1}, "sue_rh": {}, "sue_txn": _txns(4)}
    st_ = compare_batch(tmp_path, "perturbed", [d], lua=lua)
    assert any("esun.cos" in m for m in st_.mismatches), st_.summary()
    assert all("esun.cos" in m for m in st_.mismatches), st_.mismatches


# ======================================================== generated file and fields
def test_committed_lua_is_not_stale():
    proc = subprocess.run([sys.executable, "-m", "wire.wireshark_gen", "--check"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_check_reports_a_stale_file(tmp_path):
    p = tmp_path / "x.lua"
    p.write_text(gen.render().replace("0x1C", "0x1D", 1), encoding="utf-8")
    assert gen.main(["--check", str(p)]) == 1
    assert gen.main(["--write", str(p)]) == 0
    assert gen.main(["--check", str(p)]) == 0


def test_field_abbreviations_are_our_json_names():
    src = LUA.read_text(encoding="utf-8")
    abbrs = set(re.findall(r'ProtoField\.\w+\("([\w.]+)"', src))
    for proto, (_title, specs) in gen.PROTOS.items():
        for spec in specs:
            want = {f"{proto}.{f.name}" for f in spec.fields}
            want |= {f"{proto}.{k}" for k in spec.derived}
            assert want <= abbrs, (proto, want - abbrs)
    for name in ("esun.cos", "esun.flow_label", "sue_rh.npsn", "sue_txn.opcode",
                 "sue_txn.length", "sue_txn.data", "rcrc.value", "rcrc.valid", "afh.form",
                 "afh.dst_xpu", "sunh.next_header"):
        assert name in abbrs


def test_every_config_setting_is_a_preference():
    from dataclasses import fields as dc_fields

    names = {f.name for f in dc_fields(ScaleUpConfig)}
    assert {p.config for p in gen.PREFS} | set(gen.PREFS_NOT_NEEDED) == names
    args = gen.prefs_args(ALT)
    assert "esun.ethertype:0x9B00" in args and "sue_txn.hdr_bytes:16" in args
    assert gen.prefs_args(DEFAULT_SCALEUP) == []


# ================================================================== the command
def _cli(argv: list[str], capsys) -> tuple[int, str]:
    from sim.cli import wireshark as wireshark_cmd

    ap = argparse.ArgumentParser(prog="lossless")
    sub = ap.add_subparsers(dest="command")
    wireshark_cmd.add_parser(sub)
    args = ap.parse_args(argv)
    rc = args.func(args)
    return rc, capsys.readouterr().out


def test_command_prints_path_and_instructions(capsys):
    rc, out = _cli(["wireshark-plugin"], capsys)
    assert rc == 0
    assert str(LUA) in out and "lua_script:" in out and "-o esun.ethertype:0x88B5" in out
    assert "--install" in out


def test_command_print_is_the_source(capsys):
    rc, out = _cli(["wireshark-plugin", "--print"], capsys)
    assert rc == 0 and out == LUA.read_text(encoding="utf-8")


def test_command_install_loads_in_tshark(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    rc, out = _cli(["wireshark-plugin", "--install"], capsys)
    target = tmp_path / ".local" / "lib" / "wireshark" / "plugins" / "lossless_scaleup.lua"
    assert rc == 0 and str(target) in out
    assert target.read_bytes() == LUA.read_bytes()
    proc = subprocess.run([require_tshark(), "-G", "protocols"], capture_output=True,
                          text=True, check=False, env={**os.environ, "HOME": str(tmp_path)})
    shorts = {line.split("\t")[2] for line in proc.stdout.splitlines() if line.count("\t") >= 2}
    assert {"esun", "sunh", "afh", "sue_rh", "sue_txn", "rcrc"} <= shorts


def test_command_is_wired_into_lossless():
    from sim import cli

    ap = cli.build_parser()
    sub = next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))
    if "wireshark-plugin" not in sub.choices:
        pytest.skip("sim/cli.py does not call wireshark_cmd.add_parser(sub) yet (the lead "
                    "wires it)")
    proc = subprocess.run([sys.executable, "-m", "sim", "wireshark-plugin"], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and "lossless_scaleup.lua" in proc.stdout

"""Per-capture statistics and one-line packet summaries (``lossless stats`` / ``decode``).

Paused time is computed the way a receiver experiences it, not by adding up quanta: per
(sender MAC, priority) a PAUSE/PFC frame sets "paused until ts + quanta x 512 bit times"
(IEEE 802.3 Annex 31B.3.1: a new frame restarts the timer; quanta 0 resumes at once), and
the paused time is the union of those intervals.  Refreshes before expiry therefore do not
count twice.  Frames are taken in file order.
"""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .bth import BTH, EXT_HEADERS, opcode_name
from .ecn import Ecn
from .ethernet import ETHERNET
from .ib import LINKTYPE_ERF, LINKTYPE_INFINIBAND
from .ib_ext import EXT_SPECS
from .ib_stack import dissect_record
from .ipv4 import IPPROTO_UDP, IPV4
from .pcapio import _NS_PER_S, Record
from .pfc import PAUSE_DST, quanta_to_ns
from .roce import CNP_OPCODE, ICRC_BYTES
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .spec import _fmt_ipv4, format_value, parse_value, stack_getter
from .stack import (
    _OPCODE_NAMES,
    ROCE_PORTS,
    SPECS,
    Decoded,
    _check_ok,
    _roce4_cells,
    _roce4_untouched,
)
from .udp import UDP

if TYPE_CHECKING:  # numpy is only imported by the batch path
    import numpy as np

    from .batch import Columns

__all__ = ["CaptureStats", "STATS_FIELDS", "SUMMARY_FIELDS", "summary_columns", "summary_line"]

#: The batch columns :meth:`CaptureStats.add_columns` reads (``read_columns(fields=...)``).
STATS_FIELDS = (
    "eth.src", "eth.dst", "ipv4.version", "ipv4.ihl", "ipv4.ecn", "ipv4.total_length",
    "ipv4.checksum", "ipv4.src", "ipv4.dst", "ipv6.version", "ipv6.ecn", "ipv6.payload_length",
    "ipv6.src", "ipv6.dst", "udp.length", "udp.checksum", "bth.opcode", "bth.dest_qp",
    "bth.pad_count", "pfc.class_enable", "pfc.quanta", "pause.quanta",
)

_ECN_NAMES = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}
_SUE_OPS = {0: "ACK", 1: "NACK", 2: "DATA", 3: "RSVD"}


# What a summary shows of a frame wire.stack's fast path decoded, straight from its bytes.
_ROCE4_SUMMARY = stack_getter((ETHERNET, ()), (IPV4, ("ecn", "src", "dst")),
                              (UDP, ("sport", "dport")),
                              (BTH, ("opcode", "becn", "dest_qp", "psn")))


def summary_line(index: int, ts_ns: int, d: Decoded, orig_len: int) -> str:
    """One readable line per packet, like Wireshark's packet list (an ERF record shows
    its own time, as Wireshark does, not the pcap record's)."""
    fast = _roce4_untouched(d)
    if fast is not None:
        return _roce4_summary(index, ts_ns, d, orig_len, fast)
    erf = d.get("erf")
    if erf is not None:
        ts_ns = erf["ts_ns"]
    ts = f"{ts_ns // _NS_PER_S}.{ts_ns % _NS_PER_S:09d}"
    src = dst = ""
    proto = "Ethernet"
    info: list[str] = []
    eth = d.get("eth")
    if eth is not None:
        src, dst = eth["src"], eth["dst"]
        proto = "Ethernet" if eth["type"] is None else f"0x{eth['type']:04x}"
    tags = d.get("vlan")
    if tags:
        info.append("vlan " + "/".join(f"{t['vid']}p{t['pcp']}" for t in tags))
    ip = d.get("ipv4") or d.get("ipv6")
    if ip is not None:
        src, dst = ip["src"], ip["dst"]
        proto = "IPv4" if "ipv4" in d else "IPv6"
        info.append(f"ECN={_ECN_NAMES[ip['ecn']]}")
    udp = d.get("udp")
    if udp is not None:
        proto = "UDP"
        info.insert(0, f"{udp['sport']} > {udp['dport']}")
    lrh = d.get("lrh")
    if lrh is not None:  # native InfiniBand (wire.ib_stack)
        src, dst = f"lid {lrh['slid']}", f"lid {lrh['dlid']}"
        proto = "IB"
        info.append(f"VL{lrh['vl']} SL{lrh['sl']}")
    grh = d.get("grh")
    if grh is not None:
        src, dst = grh["sgid"], grh["dgid"]
    bth = d.get("bth")
    if bth is not None:
        proto = "RoCEv2" if lrh is None else "IB"
        info = [bth["opcode_name"], f"QP=0x{bth['dest_qp']:06x}", f"PSN={bth['psn']}", *info]
        if bth["becn"]:
            info.append("BECN")
        aeth = d.get("aeth")
        if aeth is not None:
            extra = f" {aeth['nak']}" if "nak" in aeth else ""
            info.append(f"AETH={aeth['kind']}{extra} MSN={aeth['msn']}")
        pay = d.get("payload")
        if pay is not None:
            info.append(f"payload={pay['length']}")
        ic = d.get("icrc")
        if ic is not None and ic["valid"] is False:
            info.append("ICRC BAD")
        elif ic is not None and ic["valid"] is None:
            info.append("ICRC ?")
    afh = d.get("afh")
    if afh is not None:
        if afh["form"] == "gen1":
            proto = "AFH1"
            info.append(f"ttl={afh['ttl']} ECN={_ECN_NAMES[afh['ecn']]}")
        else:
            proto = "AFH2"
            src, dst = f"xpu {afh['src_xpu']}", f"xpu {afh['dst_xpu']}"
            info.append(f"hop_limit={afh['hop_limit']}")
    esun = d.get("esun")
    if esun is not None:
        proto = "ESUN"
        info.append(f"cos={esun['cos']} ECN={_ECN_NAMES[esun['ecn']]} ttl={esun['ttl']}"
                    + (f" FL=0x{esun['flow_label']:04x}" if esun["f"] else ""))
    sunh = d.get("sunh")
    if sunh is not None:
        proto = "SUNH"
        src, dst = f"sunh {sunh['src']}", f"sunh {sunh['dst']}"
        info.append(f"ECN={_ECN_NAMES[sunh['ecn']]} hop_limit={sunh['hop_limit']}")
    rh = d.get("sue_rh")
    if rh is not None:
        proto = f"{proto}/SUE"
        info.append(f"{_SUE_OPS.get(rh['op'], rh['op'])} xpu={rh['xpuid']} vc={rh['vc']} "
                    f"npsn={rh['npsn']} apsn={rh['apsn']}")
    txns = d.get("sue_txn")
    if txns:
        proto = proto if rh is not None else f"{proto}/SUE-Lite"
        info.append(f"txns={len(txns)} ({sum(t['length'] for t in txns)} B)")
    rc = d.get("rcrc")
    if rc is not None and rc["valid"] is False:
        info.append("R-CRC BAD")
    mad = d.get("mad")
    if mad is not None:
        info.append(f"MAD class=0x{mad['mgmt_class']:02x} method=0x{mad['method']:02x} "
                    f"attr=0x{mad['attribute_id']:04x} tid=0x{mad['transaction_id']:x}")
    vc = d.get("vcrc")
    if vc is not None and vc.get("valid") is False:
        info.append("VCRC BAD")
    fc = d.get("ib_fc")
    if fc is not None:
        proto = "IB-link"
        info = [f"{'FC' if fc['op'] == 0 else 'FC-init' if fc['op'] == 1 else fc['op']} "
                f"VL{fc['vl']} FCTBS={fc['fctbs']} FCCL={fc['fccl']}"
                + ("" if fc["valid"] else " LPCRC BAD")]
    pfc = d.get("pfc")
    if pfc is not None:
        proto = "PFC"
        en = pfc["class_enable"]
        parts = [f"p{i}={'XON' if q == 0 else q}" for i, q in enumerate(pfc["quanta"])
                 if en >> i & 1]
        info = [" ".join(parts) or "no class enabled"]
    pause = d.get("pause")
    if pause is not None:
        proto = "PAUSE"
        info = ["XON" if pause["quanta"] == 0 else f"quanta={pause['quanta']}"]
    mc = d.get("mac_control")
    if mc is not None and pfc is None and pause is None:
        proto = "MACCtrl"
        info = [f"opcode=0x{mc['opcode']:04x}"]
    lt = next((p for p in d.problems if p.startswith("linktype ")), None)
    if lt is not None and not d.layers:  # wire.ib_stack.dissect_record: not decoded
        proto = lt.split(" is ")[0]
    if d.caplen < orig_len:
        info.append(f"[captured {d.caplen} of {orig_len} bytes]")
    if d.problems:
        info.append(f"[{len(d.problems)} problem{'s' * (len(d.problems) > 1)}]")
    return f"{index:>7} {ts} {orig_len:>5} {src:>17} > {dst:<17} {proto:<8} {' '.join(info)}"


#: "src > dst" of the IPv4 address pairs seen (raw ints -> text), for _roce4_summary;
#: emptied when it reaches _PAIRS_MAX entries (captures have few pairs; memory stays bounded).
_PAIRS: dict[tuple[int, int], str] = {}
_PAIRS_MAX = 4096
_ECN_TEXT = tuple(f"ECN={_ECN_NAMES[e]}" for e in range(4))


def _roce4_summary(index: int, ts_ns: int, d: Decoded, orig_len: int, fast: tuple) -> str:
    """:func:`summary_line` of an untouched fast-path frame (Ethernet + IPv4 + UDP + BTH,
    nothing cut): the same line, from the few fields it shows, without decoding the layers
    (``tests/test_dissect_speed_paths.py`` compares the two)."""
    frame, icrc_at, pos, pad, exts, _ip_sum, _udp_sum = fast
    ecn, src, dst, sport, dport, op, becn, qp, psn = _ROCE4_SUMMARY(frame)
    aeth_text = ""
    if "aeth" in exts:
        aeth = d["aeth"]
        extra = f" {aeth['nak']}" if "nak" in aeth else ""
        aeth_text = f" AETH={aeth['kind']}{extra} MSN={aeth['msn']}"
    tail = _bth_tail(becn, aeth_text, icrc_at - pad - pos if icrc_at > pos else None)
    problems = d.problems  # runs the deferred checks, the ICRC's among them
    if not _check_ok(_roce4_cells(d)[-1]):  # already run by d.problems: reads its result
        tail += " ICRC BAD"
    if problems:
        tail += f" [{len(problems)} problem{'s' * (len(problems) > 1)}]"
    whole_s, frac_ns = divmod(ts_ns, _NS_PER_S)
    return _ROCE4_LINE(index, whole_s, frac_ns, orig_len, _pair(src, dst), _OPCODE_NAMES[op],
                       qp, psn, sport, dport, _ECN_TEXT[ecn], tail)


def _bth_tail(becn: int, aeth_text: str, payload_bytes: int | None) -> str:
    """The text of a fast-path line after its ECN: BECN, the AETH's text, the payload length
    (None: the frame has no payload), for :func:`_roce4_summary` and
    :func:`summary_columns`."""
    return ((" BECN" if becn else "") + aeth_text
            + ("" if payload_bytes is None else f" payload={payload_bytes}"))


#: The summary line of a fast-path frame from its fields and the text after them (index,
#: whole seconds, nanoseconds past them, orig_len, "src > dst", opcode name, QP, PSN, UDP
#: ports, ECN text, tail): the one place its layout is written, for :func:`_roce4_summary`
#: and :func:`summary_columns` (``str.format``: no Python frame per line).
_ROCE4_LINE = "{:>7} {}.{:09d} {:>5} {} RoCEv2   {} QP=0x{:06x} PSN={} {} > {} {}{}".format


def _pair(src: int, dst: int) -> str:
    """The "src > dst" column of two IPv4 addresses (integers), cached."""
    pair = _PAIRS.get((src, dst))
    if pair is None:
        if len(_PAIRS) >= _PAIRS_MAX:
            _PAIRS.clear()
        pair = _PAIRS[src, dst] = f"{_fmt_ipv4(src):>17} > {_fmt_ipv4(dst):<17}"
    return pair


#: The columns :func:`summary_columns` reads (``read_columns(fields=...)``).
SUMMARY_FIELDS = (
    "ipv4.version", "ipv4.ihl", "ipv4.ecn", "ipv4.total_length", "ipv4.protocol",
    "ipv4.checksum", "ipv4.src", "ipv4.dst",
    "ipv6.version", "ipv6.payload_length", "udp.sport", "udp.dport", "udp.length",
    "udp.checksum", "bth.opcode", "bth.becn", "bth.pad_count", "bth.dest_qp", "bth.psn",
)
#: opcode names and ECN texts as numpy arrays, whether an opcode has an AETH (made once)
_NAMES: list = []


def summary_columns(cols: Columns, first_index: int, *,
                    roce_ports: Iterable[int] = ROCE_PORTS,
                    scaleup: ScaleUpConfig = DEFAULT_SCALEUP
                    ) -> tuple[np.ndarray, list[str]]:
    """The :func:`summary_line` of the rows of one :func:`wire.batch.read_columns` chunk
    (read with :data:`SUMMARY_FIELDS` at least) that can be made from the columns:
    ``(rows, lines)``, ``rows`` ascending, ``lines[k]`` the line of row ``rows[k]`` (record
    ``first_index + rows[k]``; no newline).

    Those rows are the frames :func:`~wire.dissect` takes its fast path for (whole untagged
    Ethernet + IPv4 without options, not a fragment + UDP to a RoCEv2 port + BTH, lengths in
    agreement, at least a minimum frame) and finds nothing wrong with: IPv4 checksum right,
    no UDP checksum, ICRC right (computed here, as ``lossless stats`` does), and no AETH (its
    text needs the layer).  Every other row is the caller's: :func:`summary_line` of its
    dissection (``tests/test_decode_batch.py`` proves the lines are the same).
    """
    import numpy as np

    from .stack import _EXT_PLANS, _FAST_MIN_BYTES, _MIN_ULEN

    if not _NAMES:
        _NAMES.extend((np.array(_OPCODE_NAMES, object), np.array(_ECN_TEXT, object),
                       np.array(["aeth" in _EXT_PLANS[op][1] for op in range(256)])))
    eth_rows = cols["linktype"] == 1
    ok, bad = _clean_roce(cols, eth_rows)
    n = cols["caplen"]
    ok &= ~bad & cols["has.ipv4"] & ~cols["has.vlan"] & (cols["orig_len"] == n)
    ok &= (n >= _FAST_MIN_BYTES) & (cols["ipv4.protocol"] == IPPROTO_UDP)
    # not a fragment: wire.batch finds no UDP (so no BTH) in one
    dport = cols["udp.dport"]
    ok &= np.isin(dport, np.fromiter(frozenset(roce_ports), np.int64))
    ok &= (dport != scaleup.sue_udp_port) & (cols["udp.length"] >= _MIN_ULEN)
    op = cols["bth.opcode"]
    ok &= ~_NAMES[2][op]
    rows = np.flatnonzero(ok)
    if not len(rows):
        return rows, []
    r_op = op[rows].astype(np.int64)
    pos = (cols["offset.udp"][rows] + (UDP.size_bytes + BTH.size_bytes)
           + _ext_bytes()[r_op])
    icrc_at = cols["offset.udp_end"][rows] - ICRC_BYTES
    # payload bytes, -1 for none
    payload_bytes = np.where(icrc_at > pos, icrc_at - cols["bth.pad_count"][rows] - pos, -1)
    # the text after the fields (_bth_tail), the "src > dst" column and the names: made once
    # per distinct value; a tail's key is payload bytes x 2 + BECN
    tail_key, tail_of = np.unique(payload_bytes * 2 + cols["bth.becn"][rows],
                                  return_inverse=True)
    tails = np.array([_bth_tail(k & 1, "", k >> 1 if k >= 0 else None)
                      for k in tail_key.tolist()], object)[tail_of.ravel()]
    # unsigned: a source address of 128.0.0.0 or above shifted into int64 went negative
    src = cols["ipv4.src"][rows].astype(np.uint64)
    dst = cols["ipv4.dst"][rows].astype(np.uint64)
    pair_key, pair_of = np.unique(src << np.uint64(32) | dst, return_inverse=True)
    pairs = np.array([_pair(k >> 32, k & 0xFFFFFFFF) for k in pair_key.tolist()],
                     object)[pair_of.ravel()]
    whole_s, frac_ns = np.divmod(cols["ts_ns"][rows], _NS_PER_S)
    lines = list(map(
        _ROCE4_LINE, (rows + first_index).tolist(), whole_s.tolist(), frac_ns.tolist(),
        cols["orig_len"][rows].tolist(), pairs.tolist(), _NAMES[0][r_op].tolist(),
        cols["bth.dest_qp"][rows].tolist(), cols["bth.psn"][rows].tolist(),
        cols["udp.sport"][rows].tolist(), dport[rows].tolist(),
        _NAMES[1][cols["ipv4.ecn"][rows]].tolist(), tails.tolist()))
    return rows, lines


@dataclass
class _PauseClock:
    until_ns: int = 0
    paused_ns: int = 0
    last_ns: int = 0

    def frame(self, ts_ns: int, duration_ns: int) -> None:
        # Close the interval running up to now, then restart from this frame.
        self.paused_ns += max(0, min(self.until_ns, ts_ns) - self.last_ns)
        self.last_ns = ts_ns
        self.until_ns = ts_ns + duration_ns

    def close(self) -> int:
        """Paused time including the tail of the last pause."""
        return self.paused_ns + max(0, self.until_ns - self.last_ns)


@dataclass
class CaptureStats:
    """Accumulates statistics over the records of one capture."""

    link_bps: int = 100 * 10**9
    records: int = 0
    bytes: int = 0
    problem_records: int = 0
    #: records of another link type than Ethernet (not decoded; ``lossless decode`` lists
    #: each with the problem "linktype N is not decoded")
    other_linktype_records: int = 0
    first_ts_ns: int | None = None
    last_ts_ns: int | None = None
    flows: dict[tuple, dict[str, int]] = field(default_factory=dict)
    opcodes: Counter = field(default_factory=Counter)
    ecn: Counter = field(default_factory=Counter)
    roce_ecn: Counter = field(default_factory=Counter)
    cnps: Counter = field(default_factory=Counter)
    pfc_frames: Counter = field(default_factory=Counter)
    pfc_xoff: Counter = field(default_factory=Counter)
    pfc_xon: Counter = field(default_factory=Counter)
    pause_frames: int = 0
    icrc_bad: int = 0
    icrc_unknown: int = 0
    scaleup: Counter = field(default_factory=Counter)
    #: native InfiniBand: packets, per-VL packets, MADs, bad VCRCs, flow-control packets
    infiniband: Counter = field(default_factory=Counter)
    _clocks: dict[tuple, _PauseClock] = field(default_factory=dict)

    def add(self, ts_ns: int, orig_len: int, d: Decoded) -> None:
        self.records += 1
        self.bytes += orig_len
        if self.first_ts_ns is None or ts_ns < self.first_ts_ns:
            self.first_ts_ns = ts_ns
        if self.last_ts_ns is None or ts_ns > self.last_ts_ns:
            self.last_ts_ns = ts_ns
        if d.problems:
            self.problem_records += 1
        ip = d.get("ipv4") or d.get("ipv6")
        if ip is not None:
            self.ecn[ip["ecn"]] += 1
        for name in ("esun", "sunh", "afh"):
            hd = d.get(name)
            if hd is not None:
                self.scaleup[name if name != "afh" else f"afh_{hd['form']}"] += 1
                if "ecn" in hd:
                    self.ecn[hd["ecn"]] += 1
        rh = d.get("sue_rh")
        if rh is not None:
            self.scaleup[f"sue_{_SUE_OPS.get(rh['op'], rh['op']).lower()}"] += 1
        txns = d.get("sue_txn")
        if txns:
            self.scaleup["sue_pdus" if rh is not None else "sue_lite_pdus"] += 1
            self.scaleup["sue_txns"] += len(txns)
            self.scaleup["sue_txn_bytes"] += sum(t["length"] for t in txns)
        rc = d.get("rcrc")
        if rc is not None and rc["valid"] is False:
            self.scaleup["rcrc_bad"] += 1
        lrh = d.get("lrh")
        if lrh is not None or "ib_fc" in d:
            self._add_ib(d)
        bth = d.get("bth")
        if bth is not None:
            self.opcodes[bth["opcode_name"]] += 1
            if ip is not None:
                self.roce_ecn[ip["ecn"]] += 1
            key = (ip["src"] if ip else "", ip["dst"] if ip else "", bth["dest_qp"])
            if lrh is not None:  # native IB: GIDs when a GRH is there, else the LIDs
                grh = d.get("grh")
                key = ((grh["sgid"], grh["dgid"]) if grh is not None else
                       (f"lid {lrh['slid']}", f"lid {lrh['dlid']}")) + (bth["dest_qp"],)
            if bth["opcode"] == (0x80 if lrh is not None else 0x81):  # IB's CNP, RoCEv2's
                self.cnps[key] += 1
            else:
                f = self.flows.get(key)
                if f is None:
                    f = self.flows[key] = {"packets": 0, "bytes": 0, "ce": 0}
                f["packets"] += 1
                f["bytes"] += orig_len
                if ip is not None and ip["ecn"] == Ecn.CE:
                    f["ce"] += 1
            ic = d.get("icrc")
            if ic is not None:
                if ic["valid"] is False:
                    self.icrc_bad += 1
                elif ic["valid"] is None:
                    self.icrc_unknown += 1
        pfc = d.get("pfc")
        if pfc is not None:
            src = d["eth"]["src"]
            for prio in range(8):
                if not pfc["class_enable"] >> prio & 1:
                    continue  # times of disabled classes are ignored (802.1Qbb)
                q = pfc["quanta"][prio]
                self.pfc_frames[prio] += 1
                (self.pfc_xoff if q else self.pfc_xon)[prio] += 1
                self._clock((src, prio)).frame(ts_ns, quanta_to_ns(q, self.link_bps))
        pause = d.get("pause")
        if pause is not None:
            self.pause_frames += 1
            self._clock((d["eth"]["src"], "all")).frame(
                ts_ns, quanta_to_ns(pause["quanta"], self.link_bps))

    def add_columns(self, cols: Columns, *, roce_ports: Iterable[int] = ROCE_PORTS,
                    scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> None:
        """Add one :func:`wire.batch.read_columns` chunk: the same result as :meth:`add` on
        every Ethernet, InfiniBand (247) and ERF (197) record of it, in file order (records
        of other link types are only counted, in ``other_linktype_records``; IB records are
        dissected one by one, :func:`wire.ib_stack.dissect_record`).

        Well-formed RoCEv2 frames (nothing :func:`~wire.dissect` would call a problem other
        than a bad ICRC) and well-formed PFC/PAUSE frames are counted from the columns; the
        ICRC of each RoCEv2 frame is computed (``zlib.crc32`` over the masked headers the
        columns locate, then the rest of the datagram).  Every other frame goes through
        :func:`~wire.dissect` and :meth:`add`, at its place in the file order.
        """
        import numpy as np

        eth_rows = cols["linktype"] == 1
        # native InfiniBand records (linktype 247, ERF 197) are dissected one by one
        ib_rows = np.isin(cols["linktype"], (LINKTYPE_INFINIBAND, LINKTYPE_ERF))
        self.other_linktype_records += int(cols.rows - eth_rows.sum() - ib_rows.sum())
        roce, icrc_bad = _clean_roce(cols, eth_rows)
        mac = _clean_mac_control(cols, eth_rows)
        fast = roce | mac
        slow = np.flatnonzero((eth_rows & ~fast) | ib_rows)
        ts = cols["ts_ns"]
        olen = cols["orig_len"]
        fr = np.flatnonzero(fast)
        if len(fr):
            self.records += len(fr)
            self.bytes += int(olen[fr].sum())
            lo, hi = int(ts[fr].min()), int(ts[fr].max())
            if self.first_ts_ns is None or lo < self.first_ts_ns:
                self.first_ts_ns = lo
            if self.last_ts_ns is None or hi > self.last_ts_ns:
                self.last_ts_ns = hi
        events: list[tuple[int, int, object]] = []  # (row, kind, what): kept in file order
        rr = np.flatnonzero(roce)
        if len(rr):
            v4 = cols["has.ipv4"][rr]
            ecn = np.where(v4, cols["ipv4.ecn"][rr], cols["ipv6.ecn"][rr]).astype(np.int64)
            for k, c in enumerate(np.bincount(ecn, minlength=4).tolist()):
                if c:
                    self.ecn[k] += c
                    self.roce_ecn[k] += c
            bad = int(icrc_bad[rr].sum())
            self.icrc_bad += bad
            self.problem_records += bad
            ops = cols["bth.opcode"][rr].astype(np.int64)
            uops, first, counts = np.unique(ops, return_index=True, return_counts=True)
            for op, f, c in zip(uops.tolist(), first.tolist(), counts.tolist(), strict=True):
                events.append((int(rr[f]), 0, (opcode_name(op), c)))
            qp = cols["bth.dest_qp"][rr].astype(np.int64)
            is_cnp = ops == CNP_OPCODE
            ce = (ecn == Ecn.CE).astype(np.int64)
            for keys, first_rows, n_pk, n_by, n_ce in _group_flows(cols, rr, qp, v4, olen, ce,
                                                                 ~is_cnp):
                for key, f, p, b, c in zip(keys, first_rows, n_pk, n_by, n_ce, strict=True):
                    events.append((f, 1, (key, p, b, c)))
            for keys, _first, n_pk, _b, _c in _group_flows(cols, rr, qp, v4, olen, ce, is_cnp):
                for key, p in zip(keys, n_pk, strict=True):
                    self.cnps[key] += p
        for i in np.flatnonzero(mac).tolist():
            events.append((i, 2, None))
        for i in slow.tolist():
            events.append((i, 3, None))
        if not events:
            return
        events.sort(key=lambda e: (e[0], e[1]))
        flows = self.flows
        ports = frozenset(roce_ports)
        for i, kind, what in events:
            # counts of the column rows are added at the first row of each key, so that
            # keys appear in the same order as when every record goes through add()
            if kind == 0:
                self.opcodes[what[0]] += what[1]
            elif kind == 1:
                key, p, b, c = what
                f = flows.get(key)
                if f is None:
                    f = flows[key] = {"packets": 0, "bytes": 0, "ce": 0}
                f["packets"] += p
                f["bytes"] += b
                f["ce"] += c
            elif kind == 2:
                self._add_mac_control_row(cols, i)
            elif kind == 3:
                rec = Record(int(ts[i]), cols.frame(i), int(olen[i]), int(cols["linktype"][i]))
                self.add(int(ts[i]), int(olen[i]),
                         dissect_record(rec, roce_ports=ports, scaleup=scaleup))

    def _add_ib(self, d: Decoded) -> None:
        ib = self.infiniband
        fc = d.get("ib_fc")
        if fc is not None:
            ib["flow_control_packets"] += 1
            if fc["valid"] is False:
                ib["lpcrc_bad"] += 1
            return
        ib["packets"] += 1
        ib[f"vl{d['lrh']['vl']}_packets"] += 1
        if "mad" in d:
            ib["mads"] += 1
        vc = d.get("vcrc")
        if vc is not None and vc.get("valid") is False:
            ib["vcrc_bad"] += 1

    def _add_mac_control_row(self, cols: Columns, i: int) -> None:
        """PFC / PAUSE accounting of a well-formed MAC Control row (as :meth:`add`)."""
        ts = int(cols["ts_ns"][i])
        src = format_value(_ETH_SRC, int(cols["eth.src"][i]))
        if cols["has.pfc"][i]:
            en = int(cols["pfc.class_enable"][i])
            quanta = cols["pfc.quanta"][i].tolist()
            for prio in range(8):
                if not en >> prio & 1:
                    continue
                q = quanta[prio]
                self.pfc_frames[prio] += 1
                (self.pfc_xoff if q else self.pfc_xon)[prio] += 1
                self._clock((src, prio)).frame(ts, quanta_to_ns(q, self.link_bps))
        else:
            self.pause_frames += 1
            self._clock((src, "all")).frame(
                ts, quanta_to_ns(int(cols["pause.quanta"][i]), self.link_bps))

    def _clock(self, key: tuple) -> _PauseClock:
        c = self._clocks.get(key)
        if c is None:
            c = self._clocks[key] = _PauseClock()
        return c

    def paused_ns(self) -> dict[str, int]:
        out: Counter = Counter()
        for (_src, prio), c in self._clocks.items():
            out[str(prio)] += c.close()
        return dict(sorted(out.items()))

    @property
    def exit_problems(self) -> int:
        """Records ``lossless decode`` would report with problems: those with problems and
        those of another link type (``lossless stats`` exits 1 when this is non-zero)."""
        return self.problem_records + self.other_linktype_records

    def to_dict(self) -> dict[str, object]:
        roce_total = sum(self.roce_ecn.values())
        ip_total = sum(self.ecn.values())
        return {
            "records": self.records,
            "bytes": self.bytes,
            "records_with_problems": self.problem_records,
            "records_other_linktype": self.other_linktype_records,
            "first_ts_ns": self.first_ts_ns,
            "last_ts_ns": self.last_ts_ns,
            "link_bps": self.link_bps,
            "flows": [
                {"src": k[0], "dst": k[1], "dest_qp": k[2], **v}
                for k, v in sorted(self.flows.items(), key=lambda kv: -kv[1]["bytes"])
            ],
            "opcodes": dict(self.opcodes.most_common()),
            "ecn": {_ECN_NAMES[k]: self.ecn.get(k, 0) for k in range(4)},
            "ce_fraction": (self.ecn.get(3, 0) / ip_total) if ip_total else 0.0,
            "roce_ce_fraction": (self.roce_ecn.get(3, 0) / roce_total) if roce_total else 0.0,
            "cnps": [{"src": k[0], "dst": k[1], "dest_qp": k[2], "count": n}
                     for k, n in sorted(self.cnps.items())],
            "pfc": {str(p): {"frames": self.pfc_frames[p], "xoff": self.pfc_xoff[p],
                             "xon": self.pfc_xon[p]} for p in sorted(self.pfc_frames)},
            "pause_frames": self.pause_frames,
            "paused_ns": self.paused_ns(),
            "icrc_bad": self.icrc_bad,
            "icrc_not_checked": self.icrc_unknown,
            "scaleup": dict(sorted(self.scaleup.items())),
            "infiniband": dict(sorted(self.infiniband.items())),
        }

    def format_text(self) -> str:
        s = self.to_dict()
        lines = [
            f"records {s['records']}   bytes {s['bytes']}   with problems "
            f"{s['records_with_problems']}   ICRC bad {s['icrc_bad']}   ICRC not checked "
            f"{s['icrc_not_checked']}",
        ]
        if s["records_other_linktype"]:
            lines.append(f"records of another link type (not decoded) "
                         f"{s['records_other_linktype']}")
        if s["first_ts_ns"] is not None:
            dur = s["last_ts_ns"] - s["first_ts_ns"]
            lines.append(f"duration {dur} ns")
        lines.append("")
        lines.append("RoCEv2 and InfiniBand flows (src > dst, destination QP)")
        lines.append(f"  {'src':>39} {'dst':>39} {'dest_qp':>8} {'packets':>9} {'bytes':>12} "
                     f"{'CE':>7}")
        for f in s["flows"]:
            lines.append(f"  {f['src']:>39} {f['dst']:>39} {f['dest_qp']:#08x} "
                         f"{f['packets']:>9} {f['bytes']:>12} {f['ce']:>7}")
        lines.append("")
        lines.append("opcodes: " + (", ".join(f"{k} {v}" for k, v in s["opcodes"].items())
                                    or "none"))
        lines.append("ECN: " + ", ".join(f"{k} {v}" for k, v in s["ecn"].items())
                     + f"; CE fraction {s['ce_fraction']:.4f} (RoCEv2 only "
                       f"{s['roce_ce_fraction']:.4f})")
        lines.append("CNPs (sent by the data receiver to the sender's QP)")
        for c in s["cnps"]:
            lines.append(f"  {c['src']:>39} {c['dst']:>39} {c['dest_qp']:#08x} {c['count']:>9}")
        if not s["cnps"]:
            lines.append("  none")
        lines.append("")
        lines.append(f"PFC / PAUSE at {self.link_bps / 1e9:g} Gb/s")
        lines.append(f"  {'priority':>8} {'frames':>8} {'XOFF':>8} {'XON':>8} "
                     f"{'paused_ns':>14}")
        paused = s["paused_ns"]
        for p, v in s["pfc"].items():
            lines.append(f"  {p:>8} {v['frames']:>8} {v['xoff']:>8} {v['xon']:>8} "
                         f"{paused.get(p, 0):>14}")
        if s["pause_frames"]:
            lines.append(f"  {'802.3x':>8} {s['pause_frames']:>8} {'':>8} {'':>8} "
                         f"{paused.get('all', 0):>14}")
        if not s["pfc"] and not s["pause_frames"]:
            lines.append("  none")
        if s["scaleup"]:
            lines.append("")
            lines.append("Scale-up: " + ", ".join(f"{k} {v}" for k, v in s["scaleup"].items()))
        if s["infiniband"]:
            lines.append("")
            lines.append("InfiniBand: " + ", ".join(f"{k} {v}"
                                                     for k, v in s["infiniband"].items()))
        return "\n".join(lines)



# ============================================================ batch (numpy) helpers
_ETH_SRC = SPECS["eth"].field("src")
_PAUSE_DST = parse_value(SPECS["eth"].field("dst"), PAUSE_DST)
#: Header fields the ICRC covers as all ones (IBA Annex A17.8; see wire.roce).
_ICRC_MASKED = {"ipv4": ("dscp", "ecn", "ttl", "checksum"),
                "ipv6": ("dscp", "ecn", "flow_label", "hop_limit"),
                "udp": ("checksum",), "bth": ("fecn", "becn", "resv6")}
_CRC_LRH = zlib.crc32(b"\xff" * 8)


def _ones_mask(name: str):
    """Per-byte OR mask setting the ICRC-masked fields of header ``name`` to ones (from the
    field table)."""
    import numpy as np

    spec = SPECS[name]
    bits = 0
    for f, _i, pos in spec.layout():
        if f.name in _ICRC_MASKED[name]:
            bits |= f.max_value << (spec.size_bytes * 8 - pos - f.bits)
    return np.frombuffer(bits.to_bytes(spec.size_bytes, "big"), np.uint8)


_EXT: list = []


def _ext_bytes():
    """Bytes of extended headers per BTH opcode (0..255), from EXT_HEADERS and the tables."""
    import numpy as np

    if not _EXT:
        out = np.zeros(256, np.int64)
        for op, (_name, hdrs) in EXT_HEADERS.items():
            out[op] = sum(EXT_SPECS[h].size_bytes for h in hdrs)
        _EXT.append(out)
    return _EXT[0]


def _clean_roce(cols: Columns, eth_rows):
    """(rows counted from the columns, ICRC bad per row): RoCEv2 frames, not cut, whose
    headers dissect would find nothing wrong with; their ICRC is checked here."""
    import numpy as np

    rows = cols.rows
    n = cols["caplen"]
    ok = eth_rows & cols["has.bth"] & (cols["orig_len"] <= n)
    ok &= cols["udp.checksum"] == 0  # a UDP checksum to verify: dissect does it
    v4 = cols["has.ipv4"]
    l3 = cols["offset.l3"]
    udp = cols["offset.udp"]
    uend = cols["offset.udp_end"]
    ulen = cols["udp.length"].astype(np.int64)
    tot4 = cols["ipv4.total_length"].astype(np.int64)
    ok4 = v4 & (cols["ipv4.version"] == 4) & (cols["ipv4.ihl"] * 4 == SPECS["ipv4"].size_bytes) \
        & (l3 + tot4 <= n) & (ulen == tot4 - SPECS["ipv4"].size_bytes)
    pl6 = cols["ipv6.payload_length"].astype(np.int64)
    ok6 = cols["has.ipv6"] & (cols["ipv6.version"] == 6) \
        & (l3 + SPECS["ipv6"].size_bytes + pl6 <= n) & (ulen == pl6)
    ok &= ok4 | ok6
    ok &= uend <= n
    boff = udp + SPECS["udp"].size_bytes
    pos = boff + SPECS["bth"].size_bytes + _ext_bytes()[np.where(ok, cols["bth.opcode"], 0)]
    icrc_at = uend - ICRC_BYTES
    ok &= (pos <= icrc_at) & (cols["bth.pad_count"] <= icrc_at - pos)
    bad = np.zeros(rows, bool)
    idx = np.flatnonzero(ok)
    if not len(idx):
        return ok, bad
    a4 = idx[v4[idx]]
    if len(a4):  # IPv4 header checksum, from the 16-bit words of the header
        raw = cols.bytes_at(a4, l3[a4], SPECS["ipv4"].size_bytes)
        words = raw.astype(np.int64).reshape(len(a4), -1, 2)
        words = (words[:, :, 0] << 8) | words[:, :, 1]
        csum_word = SPECS["ipv4"].byte_field("checksum")[0] // 2
        s = words.sum(axis=1) - words[:, csum_word]
        while (s >> 16).any():
            s = (s & 0xFFFF) + (s >> 16)
        good = (~s & 0xFFFF) == cols["ipv4.checksum"][a4]
        ok[a4[~good]] = False
        idx = np.flatnonzero(ok)
    bad[idx] = _icrc_bad(cols, idx)
    return ok, bad


def _icrc_bad(cols: Columns, idx):
    """Whether the ICRC of each row of ``idx`` (well-formed RoCEv2) is wrong.

    The CRC runs over the masked pseudo-LRH + IP header + the UDP/BTH bytes up to the last
    masked one (few distinct values: computed once per distinct prefix), then over the rest
    of the datagram straight from the capture."""
    import numpy as np

    from .batch import _rows

    buf, start = cols.buf, cols.start
    out = np.zeros(len(idx), bool)
    l3 = cols["offset.l3"]
    udp = cols["offset.udp"]
    uend = cols["offset.udp_end"]
    umask = np.concatenate([_ones_mask("udp"), _ones_mask("bth")])
    head = int(np.flatnonzero(umask)[-1]) + 1  # through the last masked byte
    umask = umask[:head]
    crc32 = zlib.crc32
    mv = memoryview(buf)
    for ip in ("ipv4", "ipv6"):
        sel = np.flatnonzero(cols[f"has.{ip}"][idx])
        if not len(sel):
            continue
        r = idx[sel]
        hl = SPECS[ip].size_bytes
        pre = np.ascontiguousarray(np.concatenate(
            [cols.bytes_at(r, l3[r], hl) | _ones_mask(ip),
             cols.bytes_at(r, udp[r], head) | umask], axis=1))
        uniq, inv = np.unique(pre.view(np.dtype((np.void, hl + head))).ravel(),
                              return_inverse=True)
        states = [crc32(u.tobytes(), _CRC_LRH) for u in uniq]
        state = [states[k] for k in inv.ravel().tolist()]
        rest_from = (start[r] + udp[r] + head).tolist()
        rest_to = (start[r] + uend[r] - ICRC_BYTES).tolist()
        wire = _rows(buf, start[r] + uend[r] - ICRC_BYTES, ICRC_BYTES).copy().view("<u4")
        crcs = list(map(crc32, map(mv.__getitem__, map(slice, rest_from, rest_to)), state))
        out[sel] = np.array(crcs, np.uint32) != wire.ravel()
    return out


def _group_flows(cols: Columns, rr, qp, v4, olen, ce, mask):
    """Per (src, dst, dest_qp) key of the rows ``rr[mask]``: yields, per IP version,
    (keys, first row of each key, packets, bytes, CE packets), keys as :meth:`add` makes
    them (address text, QP)."""
    import numpy as np

    for version in (4, 6):
        sel = mask & (v4 if version == 4 else ~v4)
        if not sel.any():
            continue
        r = rr[sel]
        q = qp[sel]
        if version == 4:
            src = cols["ipv4.src"][r].astype(np.uint64)
            dst = cols["ipv4.dst"][r].astype(np.uint64)
            pair = (src << np.uint64(32)) | dst
            _u, pid = np.unique(pair, return_inverse=True)
        else:
            both = np.ascontiguousarray(np.concatenate([cols["ipv6.src"][r],
                                                        cols["ipv6.dst"][r]], axis=1))
            _u, pid = np.unique(both.view(np.dtype((np.void, 32))).ravel(),
                                return_inverse=True)
        key = pid.astype(np.int64) << 24 | q
        ukey, first, inv = np.unique(key, return_index=True, return_inverse=True)
        inv = inv.ravel()
        packets = np.bincount(inv).tolist()
        nbytes = np.bincount(inv, weights=olen[r]).round().astype(np.int64).tolist()
        nce = np.bincount(inv, weights=ce[sel]).round().astype(np.int64).tolist()
        keys = []
        fspec = SPECS[f"ipv{version}"]
        for f in first.tolist():
            i = int(r[f])
            if version == 4:
                s_, d_ = int(cols["ipv4.src"][i]), int(cols["ipv4.dst"][i])
            else:
                s_ = int.from_bytes(cols["ipv6.src"][i].tobytes(), "big")
                d_ = int.from_bytes(cols["ipv6.dst"][i].tobytes(), "big")
            keys.append((format_value(fspec.field("src"), s_),
                         format_value(fspec.field("dst"), d_), int(q[f])))
        yield keys, r[first].tolist(), packets, nbytes, nce
        del ukey


def _clean_mac_control(cols: Columns, eth_rows):
    """Well-formed PFC / PAUSE rows: not cut, sent to the MAC Control address, PFC's
    reserved high byte zero, and the frame no shorter than dissect wants."""
    pfc = cols["has.pfc"] & ((cols["pfc.class_enable"] >> 8) == 0)
    return eth_rows & (pfc | cols["has.pause"]) & (cols["orig_len"] <= cols["caplen"]) \
        & (cols["eth.dst"] == _PAUSE_DST)


"""Per-capture statistics and one-line packet summaries (``lossless stats`` / ``decode``).

Paused time is computed the way a receiver experiences it, not by adding up quanta: per
(sender MAC, priority) a PAUSE/PFC frame sets "paused until ts + quanta x 512 bit times"
(IEEE 802.3 Annex 31B.3.1: a new frame restarts the timer; quanta 0 resumes at once), and
the paused time is the union of those intervals.  Refreshes before expiry therefore do not
count twice.  Frames are taken in file order.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .ecn import Ecn
from .pfc import quanta_to_ns
from .stack import Decoded

__all__ = ["CaptureStats", "summary_line"]

_ECN_NAMES = {0: "Not-ECT", 1: "ECT(1)", 2: "ECT(0)", 3: "CE"}
_SUE_OPS = {0: "ACK", 1: "NACK", 2: "DATA", 3: "RSVD"}


def summary_line(index: int, ts_ns: int, d: Decoded, orig_len: int) -> str:
    """One readable line per packet, like Wireshark's packet list."""
    ts = f"{ts_ns // 10**9}.{ts_ns % 10**9:09d}"
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
    bth = d.get("bth")
    if bth is not None:
        proto = "RoCEv2"
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
    if d.caplen < orig_len:
        info.append(f"[captured {d.caplen} of {orig_len} bytes]")
    if d.problems:
        info.append(f"[{len(d.problems)} problem{'s' * (len(d.problems) > 1)}]")
    return f"{index:>7} {ts} {orig_len:>5} {src:>17} > {dst:<17} {proto:<8} {' '.join(info)}"


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
        bth = d.get("bth")
        if bth is not None:
            self.opcodes[bth["opcode_name"]] += 1
            if ip is not None:
                self.roce_ecn[ip["ecn"]] += 1
            key = (ip["src"] if ip else "", ip["dst"] if ip else "", bth["dest_qp"])
            if bth["opcode"] == 0x81:
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

    def to_dict(self) -> dict[str, object]:
        roce_total = sum(self.roce_ecn.values())
        ip_total = sum(self.ecn.values())
        return {
            "records": self.records,
            "bytes": self.bytes,
            "records_with_problems": self.problem_records,
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
        }

    def format_text(self) -> str:
        s = self.to_dict()
        lines = [
            f"records {s['records']}   bytes {s['bytes']}   with problems "
            f"{s['records_with_problems']}   ICRC bad {s['icrc_bad']}   ICRC not checked "
            f"{s['icrc_not_checked']}",
        ]
        if s["first_ts_ns"] is not None:
            dur = s["last_ts_ns"] - s["first_ts_ns"]
            lines.append(f"duration {dur} ns")
        lines.append("")
        lines.append("RoCEv2 flows (src > dst, destination QP)")
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
        return "\n".join(lines)


"""pcap replay: captured frames injected into a fabric at the hosts that own their source
addresses, at their timestamps.

* Link layer: a capture replays on the fabric of its link layer.  Ethernet records
  (linktype 1: RoCEv2, PFC, any frame) on a RoCE fabric; native InfiniBand packets
  (linktype 247, and ERF records of type 21, linktype 197) on an InfiniBand fabric
  (``Fabric.flow_control == "ib"``: ``-p fabric=ib``, ``[links] fabric = "ib"``).  A
  record of the other link layer is skipped with the reason (when every record is, nothing
  runs): nothing in the capture says what the other fabric's headers would be.  ERF
  link flow-control packets (type 25) are skipped (the fabric's links make their own), so
  are other linktypes and ERF types.
* Ownership: ``owners`` maps an address text to a host node id: IPv4/IPv6 and MAC addresses
  of Ethernet frames, ``lid N`` LIDs and IPv6-text GIDs of InfiniBand packets.  A frame is
  injected at the owner of its source address and routed to the owner of its destination:
  its IP address, else its MAC address; a packet's GID (with a GRH), else its LID.
  Frames whose addresses are not owned are skipped and counted (``ReplayStats.skipped``, with
  a few example address pairs in ``skipped_samples``).  The simulator's own addresses
  (:mod:`sim.addresses`) are :func:`owners_by_address` (IP, MAC and LID);
  a real capture's addresses are mapped to hosts by the user (``lossless replay --map
  ADDRESS=NODE``, :func:`parse_owner`).
* Time: a record at ``ts_ns`` is injected at ``(ts_ns - t0_ns) * 1000 * time_scale`` ps
  (``t0_ns`` defaults to the first record's timestamp), so a capture keeps its spacing; a
  ``time_scale`` below 1 compresses it (an integer ratio, e.g. ``Fraction(1, 10)``).  An
  ERF record's time is its ERF timestamp (ns; the one Wireshark shows), not the pcap one.
* Size: an Ethernet frame cut by the capture's snaplen is simulated at its original length
  (``orig_len``); its frame bytes are not carried (they are incomplete).  An InfiniBand
  packet is simulated at its size from the LRH, ``4 * PktLen`` (LRH to ICRC) + 2 (VCRC),
  whatever the capture kept, and travels without its bytes (the fabric's frames are
  Ethernet: a capture of the run shows it as the simulator's own frame of its flow).
* Class and ECN: Ethernet: the traffic class is the 802.1Q PCP when the frame is tagged, else
  DSCP >> 3 [A]; the ECN codepoint is the IP header's.  A whole frame travels with its
  bytes, so a CE mark by a switch rewrites the real IP header (``wire.mark_ce``, ICRC stays
  valid).  InfiniBand: the class is the LRH's SL (the simulator's SL-to-VL map is the
  identity; an SL above 7 is skipped), a packet with a BTH is ECN-capable (FECN is the
  simulator's CE mark) and arrives CE when its FECN is set; raw and IPv6-LNH packets are not.
* Flow id: one per (source, destination, destination QP or UDP port) of Ethernet frames, per
  (SLID, DLID, destination QP) of InfiniBand packets, in order of appearance, numbered after
  the flows of captures replayed into the fabric before.  Each is registered in
  ``fabric.replayed`` as a :class:`ReplayedFlow` (its frames, bytes, first and last injection
  time, and what was injected so far), so the outputs report it as a flow: its figures and
  conservation in summary.json, its throughput, its name.  A frame enters the fabric (and
  counts as sent) when its injection event fires; until then no packet of it is in the
  fabric.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from sim.fabric import Fabric
from sim.nic.host import Host
from sim.packet import PRIORITIES, REPLAY_FLOW_BASE, SimPacket
from wire import Record, dissect
from wire.ib import LINKTYPE_ERF, LINKTYPE_INFINIBAND, ErfType
from wire.ib_stack import LINKTYPE_ETHERNET, dissect_erf, dissect_ib

__all__ = ["REPLAY_FLOW_BASE", "ReplayStats", "ReplayedFlow", "inject_records",
           "normalize_address", "owners_by_address", "parse_owner", "scale_fraction"]

#: Skip reasons of records of the other link layer (docs/howto/replay-a-capture.md, "InfiniBand
#: captures").
ETHERNET_ON_IB = "Ethernet frame on an InfiniBand fabric, replay it with fabric=roce"
IB_ON_ROCE = "InfiniBand packet on a RoCE fabric, replay it with fabric=ib"
#: The 2-byte VCRC after the LRH's PktLen words (IBA 7.8.2).
_VCRC_BYTES = 2
_NOT_ECT, _ECT0, _CE = 0, 2, 3


@dataclass
class ReplayStats:
    injected: int = 0
    skipped: int = 0
    skipped_reasons: dict[str, int] = field(default_factory=dict)
    flows: dict[tuple, int] = field(default_factory=dict)
    #: A few of the skipped frames' "source -> destination" addresses (distinct), so a user
    #: sees which addresses to map (``--map ADDRESS=NODE``).
    skipped_samples: list[str] = field(default_factory=list)

    def skip(self, reason: str, sample: str | None = None) -> None:
        self.skipped += 1
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1
        if sample is not None and len(self.skipped_samples) < SAMPLES \
                and sample not in self.skipped_samples:
            self.skipped_samples.append(sample)


#: How many skipped address pairs :class:`ReplayStats` keeps as examples.
SAMPLES = 3


@dataclass(eq=False)
class ReplayedFlow:
    """The frames of one replayed flow (one source, destination and QP or UDP port of a
    capture), in ``fabric.replayed``: ``frames`` and ``bytes`` scheduled, injected from
    ``start_ps`` to ``stop_ps`` (each frame's time and length in ``at_ps`` and
    ``frame_bytes``); ``sent_packets`` and ``sent_bytes`` injected so far."""

    id: int
    src: int
    dst: int
    tc: int
    start_ps: int
    stop_ps: int
    frames: int = 0
    bytes: int = 0
    sent_packets: int = 0
    sent_bytes: int = 0
    at_ps: array = field(default_factory=lambda: array("q"))
    frame_bytes: array = field(default_factory=lambda: array("q"))

    @property
    def rate_bps(self) -> int | None:
        """The rate the capture offers: its bits over the time from its first frame to its
        last (None for a flow of one instant)."""
        span = self.stop_ps - self.start_ps
        return self.bytes * 8 * 10**12 // span if span > 0 else None


class _Injection:
    """The event that hands one replayed frame to its source host (and counts it sent)."""

    __slots__ = ("flow", "node", "pkt")

    def __init__(self, node: Host, pkt: SimPacket, flow: ReplayedFlow) -> None:
        self.node, self.pkt, self.flow = node, pkt, flow

    def __call__(self) -> None:
        f = self.flow
        f.sent_packets += 1
        f.sent_bytes += self.pkt.nbytes
        self.node.inject(self.pkt)


def inject_records(fabric: Fabric, records: Iterable[Record], owners: Mapping[str, int], *,
                   time_scale: Fraction | int = 1, t0_ns: int | None = None,
                   flow_base: int | None = None) -> ReplayStats:
    """Schedule every record's injection; run the fabric afterwards.  Flow ids start at
    ``flow_base`` (default: after the flows replayed into ``fabric`` already, from
    :data:`REPLAY_FLOW_BASE`)."""
    registry = fabric.replayed
    if flow_base is None:
        flow_base = max(registry, default=REPLAY_FLOW_BASE - 1) + 1
    scale = Fraction(time_scale)
    if scale <= 0:
        raise ValueError("time_scale must be positive")
    st = ReplayStats()
    ib_fabric = getattr(fabric, "flow_control", "pfc") == "ib"
    for rec in records:
        lt = rec.linktype
        if lt == LINKTYPE_ETHERNET:
            if t0_ns is None:
                t0_ns = rec.ts_ns
            if ib_fabric:
                st.skip(ETHERNET_ON_IB)
                continue
            got = _ethernet(rec, owners, st)
        elif lt in (LINKTYPE_INFINIBAND, LINKTYPE_ERF):
            got = _infiniband(rec, owners, st, not ib_fabric)
            if got is not None and t0_ns is None:
                t0_ns = got[0]
            if got is None or got[1] is None:
                continue
        else:
            if t0_ns is None:
                t0_ns = rec.ts_ns
            st.skip(f"linktype {lt} is not replayed (Ethernet 1, InfiniBand 247, ERF 197)")
            continue
        if got is None:
            continue
        ts_ns, src, dst, fkey, nbytes, tc, ecn, frame = got
        node = fabric.nodes.get(src)
        if not isinstance(node, Host):
            st.skip("source owner is not a host")
            continue
        if ts_ns < t0_ns:
            st.skip("timestamp before t0")
            continue
        flow = st.flows.setdefault(fkey, flow_base + len(st.flows))
        at_ps = int((ts_ns - t0_ns) * 1000 * scale)
        rf = registry.get(flow)
        if rf is None:
            rf = registry[flow] = ReplayedFlow(flow, src, dst, tc, at_ps, at_ps)
        rf.frames += 1
        rf.bytes += nbytes
        rf.at_ps.append(at_ps)
        rf.frame_bytes.append(nbytes)
        rf.start_ps, rf.stop_ps = min(rf.start_ps, at_ps), max(rf.stop_ps, at_ps)
        pkt = SimPacket(fabric.next_packet_id(), 0, nbytes, flow=flow, tc=tc, ecn=ecn,
                        src=src, dst=dst, frame=frame)
        pkt.t_ps = at_ps
        fabric.engine.schedule(at_ps, _Injection(node, pkt, rf))
        st.injected += 1
    return st


#: (time ns, source node, destination node, flow key, bytes, class, ECN, frame or None)
_Packet = tuple[int, Any, Any, tuple, int, int, int, "bytearray | None"]


def _ethernet(rec: Record, owners: Mapping[str, int], st: ReplayStats) -> _Packet | None:
    d = dissect(rec.data, rec.orig_len)
    ip = d.get("ipv4") or d.get("ipv6")
    eth = d.get("eth")
    src_key = ip["src"] if ip else (eth["src"] if eth else None)
    dst_key = ip["dst"] if ip else (eth["dst"] if eth else None)
    src, dst = owners.get(src_key), owners.get(dst_key)
    if ip and eth:  # an IP address not owned: its MAC address may be
        src = owners.get(eth["src"]) if src is None else src
        dst = owners.get(eth["dst"]) if dst is None else dst
    if src is None or dst is None:
        st.skip("address not owned by a host", f"{src_key} -> {dst_key}")
        return None
    tags = d.get("vlan")
    tc = tags[0]["pcp"] if tags else (ip["dscp"] >> 3 if ip else 0)
    bth, udp = d.get("bth"), d.get("udp")
    sub = bth["dest_qp"] if bth else (udp["dport"] if udp else 0)
    whole = len(rec.data) == rec.orig_len
    return (rec.ts_ns, src, dst, (src, dst, sub), rec.orig_len, tc,
            ip["ecn"] if ip else _NOT_ECT, bytearray(rec.data) if whole else None)


def _infiniband(rec: Record, owners: Mapping[str, int], st: ReplayStats,
                wrong_fabric: bool) -> tuple | None:
    """A native IB packet (linktype 247, or an ERF record of type 21) as a :data:`_Packet`;
    ``(time, None)`` when it is skipped after its time is known (for ``t0``), None when
    skipped before."""
    if rec.linktype == LINKTYPE_ERF:
        d = dissect_erf(rec.data, rec.orig_len)
        erf = d.get("erf")
        if erf is None:
            st.skip("ERF record shorter than its header")
            return None
        ts_ns = erf["ts_ns"]
        if erf["type"] != ErfType.INFINIBAND:
            st.skip("InfiniBand link flow-control packet (the fabric's links make their own)"
                    if erf["type"] == ErfType.INFINIBAND_LINK else
                    f"ERF record type {erf['type']} is not replayed (only 21, InfiniBand)")
            return ts_ns, None
    else:
        d = dissect_ib(rec.data, rec.orig_len)
        ts_ns = rec.ts_ns
    if wrong_fabric:
        st.skip(IB_ON_ROCE)
        return ts_ns, None
    lrh = d.get("lrh")
    if lrh is None or lrh["pkt_len"] < 2:
        st.skip("InfiniBand packet without a whole LRH")
        return ts_ns, None
    grh = d.get("grh")
    keys = [(f"lid {lrh['slid']}", f"lid {lrh['dlid']}")]
    if grh is not None:  # the GIDs first, as an Ethernet frame's IP addresses
        keys.insert(0, (grh["sgid"], grh["dgid"]))
    src = next((owners[s] for s, _d in keys if s in owners), None)
    dst = next((owners[d_] for _s, d_ in keys if d_ in owners), None)
    if src is None or dst is None:
        st.skip("address not owned by a host", f"{keys[-1][0]} -> {keys[-1][1]}")
        return ts_ns, None
    if lrh["sl"] >= PRIORITIES:
        st.skip(f"SL above {PRIORITIES - 1} (no traffic class)")
        return ts_ns, None
    bth = d.get("bth")
    ecn = _NOT_ECT if bth is None else (_CE if bth["fecn"] else _ECT0)
    qp = bth["dest_qp"] if bth is not None else None
    nbytes = 4 * lrh["pkt_len"] + _VCRC_BYTES
    return (ts_ns, src, dst, ("ib", lrh["slid"], lrh["dlid"], qp), nbytes, lrh["sl"], ecn,
            None)


def scale_fraction(value: float | int | Fraction) -> Fraction:
    """A user's time scale (``--time-scale``, ``[[pcap]] time_scale``) as an exact fraction
    (a float such as 0.1 becomes 1/10, not its binary approximation)."""
    return Fraction(value).limit_denominator(10**6)


def normalize_address(text: str) -> str:
    """An IPv4/IPv6 or MAC address in the text form :func:`wire.dissect` gives (dotted quad,
    compressed IPv6, lower-case colon-separated MAC), so a user's spelling matches a frame's;
    an InfiniBand LID (a number, decimal or 0x hex, 1..0xFFFF, optionally after ``lid``) as
    ``lid N``; an IPv6-form GID as IPv6.  ValueError for anything else."""
    import ipaddress
    import re

    t = text.strip()
    if re.fullmatch(r"[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}", t):
        return t.lower().replace("-", ":")
    m = re.fullmatch(r"(?i)(?:lid[ :]?)?(0x[0-9a-f]+|[0-9]+)", t)
    if m:
        lid = int(m.group(1), 0)
        if not 1 <= lid <= 0xFFFF:
            raise ValueError(f"{text!r}: a LID is 1..65535 (0x1..0xFFFF)")
        return f"lid {lid}"
    try:
        return str(ipaddress.ip_address(t))
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4, IPv6 or MAC address, nor an InfiniBand "
                         f"LID") from None


def parse_owner(text: str) -> tuple[str, int]:
    """``ADDRESS=NODE`` (``--map``): a capture address (IP, MAC, LID or GID) owned by host
    ``NODE``."""
    addr, sep, node = text.partition("=")
    if not sep:
        raise ValueError(f"expected ADDRESS=NODE, got {text!r}")
    try:
        nid = int(node)
    except ValueError:
        raise ValueError(f"{text!r}: NODE must be a node id (an integer)") from None
    return normalize_address(addr), nid


def owners_by_address(fabric: Fabric) -> dict[str, int]:
    """Every host's simulator addresses (``sim.addresses``: 10.0.N.N, its port-0 MAC and,
    for a node that has one, its InfiniBand LID, ``lid N+1``), so a capture the simulator
    wrote replays without ``--map``."""
    from sim.addresses import node_ip, node_lid, node_mac

    out: dict[str, int] = {}
    for nid, node in fabric.nodes.items():
        if isinstance(node, Host):
            out[node_ip(nid)] = nid
            out[node_mac(nid)] = nid
            try:
                out[f"lid {node_lid(nid)}"] = nid
            except ValueError:
                pass  # no unicast LID for this node id
    return out

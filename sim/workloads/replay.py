"""pcap replay: captured frames injected into a fabric at the hosts that own their source
addresses, at their timestamps.

* Ownership: ``owners`` maps an IP address (text) or a MAC address to a host node id; a frame
  is injected at the owner of its source address and routed to the owner of its destination
  (its IP address, else its MAC address).
  Frames whose addresses are not owned are skipped and counted (``ReplayStats.skipped``, with
  a few example address pairs in ``skipped_samples``).  The simulator's own addresses
  (:mod:`sim.addresses`) are :func:`owners_by_address`; a real capture's addresses are mapped
  to hosts by the user (``lossless replay --map ADDRESS=NODE``, :func:`parse_owner`).
* Time: a record at ``ts_ns`` is injected at ``(ts_ns - t0_ns) * 1000 * time_scale`` ps
  (``t0_ns`` defaults to the first record's timestamp), so a capture keeps its spacing; a
  ``time_scale`` below 1 compresses it (an integer ratio, e.g. ``Fraction(1, 10)``).
* Size: a frame cut by the capture's snaplen is simulated at its original length
  (``orig_len``); its frame bytes are not carried (they are incomplete).
* Class and ECN: the traffic class is the 802.1Q PCP when the frame is tagged, else DSCP >> 3
  [A]; the ECN codepoint is the IP header's.  A whole frame travels with its bytes, so a CE
  mark by a switch rewrites the real IP header (``wire.mark_ce``, ICRC stays valid).
* Flow id: one per (source, destination, destination QP or UDP port) in order of appearance,
  numbered after the flows of captures replayed into the fabric before.  Each is registered
  in ``fabric.replayed`` as a :class:`ReplayedFlow` (its frames, bytes, first and last
  injection time, and what was injected so far), so the outputs report it as a flow: its
  figures and conservation in summary.json, its throughput, its name.  A frame enters the
  fabric (and counts as sent) when its injection event fires; until then no packet of it is
  in the fabric.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from sim.fabric import Fabric
from sim.nic.host import Host
from sim.packet import REPLAY_FLOW_BASE, SimPacket
from wire import Record, dissect

__all__ = ["REPLAY_FLOW_BASE", "ReplayStats", "ReplayedFlow", "inject_records",
           "normalize_address", "owners_by_address", "parse_owner", "scale_fraction"]


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
    for rec in records:
        if t0_ns is None:
            t0_ns = rec.ts_ns
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
            continue
        node = fabric.nodes.get(src)
        if not isinstance(node, Host):
            st.skip("source owner is not a host")
            continue
        if rec.ts_ns < t0_ns:
            st.skip("timestamp before t0")
            continue
        tags = d.get("vlan")
        tc = tags[0]["pcp"] if tags else (ip["dscp"] >> 3 if ip else 0)
        bth, udp = d.get("bth"), d.get("udp")
        sub = bth["dest_qp"] if bth else (udp["dport"] if udp else 0)
        fkey = (src, dst, sub)
        flow = st.flows.setdefault(fkey, flow_base + len(st.flows))
        at_ps = int((rec.ts_ns - t0_ns) * 1000 * scale)
        rf = registry.get(flow)
        if rf is None:
            rf = registry[flow] = ReplayedFlow(flow, src, dst, tc, at_ps, at_ps)
        rf.frames += 1
        rf.bytes += rec.orig_len
        rf.at_ps.append(at_ps)
        rf.frame_bytes.append(rec.orig_len)
        rf.start_ps, rf.stop_ps = min(rf.start_ps, at_ps), max(rf.stop_ps, at_ps)
        whole = len(rec.data) == rec.orig_len
        pkt = SimPacket(fabric.next_packet_id(), 0, rec.orig_len, flow=flow, tc=tc,
                        ecn=ip["ecn"] if ip else 0, src=src, dst=dst,
                        frame=bytearray(rec.data) if whole else None)
        pkt.t_ps = at_ps
        fabric.engine.schedule(at_ps, _Injection(node, pkt, rf))
        st.injected += 1
    return st


def scale_fraction(value: float | int | Fraction) -> Fraction:
    """A user's time scale (``--time-scale``, ``[[pcap]] time_scale``) as an exact fraction
    (a float such as 0.1 becomes 1/10, not its binary approximation)."""
    return Fraction(value).limit_denominator(10**6)


def normalize_address(text: str) -> str:
    """An IPv4/IPv6 or MAC address in the text form :func:`wire.dissect` gives (dotted quad,
    compressed IPv6, lower-case colon-separated MAC), so a user's spelling matches a frame's;
    ValueError for anything else."""
    import ipaddress
    import re

    t = text.strip()
    if re.fullmatch(r"[0-9A-Fa-f]{2}([:-][0-9A-Fa-f]{2}){5}", t):
        return t.lower().replace("-", ":")
    try:
        return str(ipaddress.ip_address(t))
    except ValueError:
        raise ValueError(f"{text!r} is not an IPv4, IPv6 or MAC address") from None


def parse_owner(text: str) -> tuple[str, int]:
    """``ADDRESS=NODE`` (``--map``): a capture address owned by host ``NODE``."""
    addr, sep, node = text.partition("=")
    if not sep:
        raise ValueError(f"expected ADDRESS=NODE, got {text!r}")
    try:
        nid = int(node)
    except ValueError:
        raise ValueError(f"{text!r}: NODE must be a node id (an integer)") from None
    return normalize_address(addr), nid


def owners_by_address(fabric: Fabric) -> dict[str, int]:
    """Every host's simulator addresses (``sim.addresses``: 10.0.N.N and its port-0 MAC)."""
    from sim.addresses import node_ip, node_mac

    out: dict[str, int] = {}
    for nid, node in fabric.nodes.items():
        if isinstance(node, Host):
            out[node_ip(nid)] = nid
            out[node_mac(nid)] = nid
    return out

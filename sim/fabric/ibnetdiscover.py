"""InfiniBand fabrics as ``ibnetdiscover`` wrote them: its topology file and its ``-p``
(``--ports``) listing, read into switches, channel adapters (CAs), routers and the links
between their ports.

The formats are rdma-core's (``infiniband-diags/ibnetdiscover.c``, the topology-file man
page).  The topology file is one block per node::

    vendid=0x2c9
    switchguid=0x2c5eab0300b87b40(2c5eab0300b87b40)
    Switch  65 "S-2c5eab0300b87b40"  # "MF0;A09-P1-IBLEAF-04-04:MQM9701/U1" enhanced port 0 \
    lid 73 lmc 0
    [1]  "H-e09d7303007a4bd8"[1](e09d7303007a4bd8)  # "a08-p1-dgx-04-c01 mlx5_5" lid 647 4xNDR
    [35] "S-2c5eab0300c26280"[32]  # "MF0;A10-P1-IBSPINE-02:MQM9701/U1" lid 236 4xNDR

    Ca  1 "H-e09d7303007a4bd8"  # "a08-p1-dgx-04-c01 mlx5_5"
    [1](e09d7303007a4bd8)  "S-2c5eab0300b87b40"[1]  # lid 647 lmc 0 "MF0;A09-..." lid 73 4xNDR

(the switch's line is one line, cut here): a node's line (``Switch``, ``Ca`` or ``Rt``,
its port count, its id: a type letter and its node GUID, its description, a switch's port
0 LID), then a line per connected port: its number (``[N]``, ``[N][ext M]`` on split
ports), a CA's port GUID, the peer's id and port, the peer's description (a CA's own LID
and LMC before it), the peer's LID and the link's width and speed (``4xNDR``).  Each link
is written from both of its ends; the reader keeps one and checks that the two agree.
``-p`` lists one port per line::

    SW  1719 10 0x7cfe9003009ce5b0 4x EDR - CA   134  1 0x7cfe9003003b4bde ( 'ib-i1l1s01' - \
    'o0001 HCA-1' )
    SW  2052 37 0x506b4b03005c2740 4x ???                                    'ib-i4l1s01'

(one line each, cut here: type, LID, port, GUID, width, speed, then the peer's; a port
with no peer ends after its own description).  Node ids there are the GUIDs it prints: a
switch's node GUID, a CA's port GUID.

A link's rate is its width times its speed's data rate a lane (:data:`LANE_DATA_BPS`): the
signalling rate less the line code (8b/10b up to QDR, 64b/66b from FDR10), so ``4xNDR``
is 400 Gb/s and ``4xQDR`` 32 Gb/s.  Bad input raises :class:`IbnetdiscoverError` naming
the file, the line and the field.
"""

from __future__ import annotations

import gzip
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LANE_DATA_BPS", "IbLink", "IbNode", "IbTopology", "IbnetdiscoverError",
           "format_ibnetdiscover", "is_ibnetdiscover", "osm_guid", "parse_ibnetdiscover",
           "read_ibnetdiscover", "text_lines", "topology_of_fabric"]

#: a lane's data rate (b/s) by speed: InfiniBand Architecture Specification Vol. 2, Rel.
#: 1.5 (and 1.7 for XDR), section 5.2 (signalling rates) and 5.3 (8b/10b to QDR, 64b/66b
#: from FDR10): SDR 2.5, DDR 5, QDR 10 GBd at 8b/10b; FDR10 10.3125, FDR 14.0625, EDR
#: 25.78125 Gb/s at 64b/66b; HDR 53.125 and NDR 106.25 Gb/s (PAM4, RS-FEC) carry 50 and
#: 100 Gb/s; XDR 200 Gb/s a lane
LANE_DATA_BPS: dict[str, int] = {
    "SDR": 2_000_000_000,
    "DDR": 4_000_000_000,
    "QDR": 8_000_000_000,
    "FDR10": 10_000_000_000,
    "FDR": 13_636_363_636,
    "EDR": 25_000_000_000,
    "HDR": 50_000_000_000,
    "NDR": 100_000_000_000,
    "XDR": 200_000_000_000,
}
#: the widths ibnetdiscover prints (lanes)
WIDTHS = (1, 2, 4, 8, 12)

_KINDS = {"Switch": "switch", "Ca": "ca", "Rt": "router", "SW": "switch", "CA": "ca",
          "RT": "router"}
_ID = {"S": "switch", "H": "ca", "R": "router"}


class IbnetdiscoverError(ValueError):
    """A line an ibnetdiscover reader cannot take: ``FILE:LINE: field: why``."""


@dataclass(frozen=True, slots=True)
class IbNode:
    """A switch, CA or router: its kind, GUID (the id ibnetdiscover gives it), port count
    (0: not given), description, LID (a switch's port 0, a CA's first port; None: not
    given) and the line that names it first."""

    kind: str
    guid: int
    nports: int
    desc: str
    lid: int | None
    line: int


@dataclass(frozen=True, slots=True)
class IbLink:
    """A link between port ``a_port`` of node ``a`` and port ``b_port`` of node ``b``
    (GUIDs, ``a`` the end written first), its width (lanes) and speed (``NDR``...)."""

    a: int
    a_port: int
    b: int
    b_port: int
    width: int
    speed: str
    line: int

    @property
    def rate_bps(self) -> int:
        """Its data rate: width times the speed's lane data rate (0: speed unknown)."""
        return self.width * LANE_DATA_BPS.get(self.speed, 0)

    @property
    def label(self) -> str:
        """As ibnetdiscover prints it: ``4xNDR``."""
        return f"{self.width}x{self.speed}" if self.width else f"??{self.speed}"


@dataclass(slots=True)
class IbTopology:
    """What one file describes: its nodes by GUID, its links, and (``-p``) the ports it
    lists without a peer."""

    path: str
    form: str  # "topology" | "ports"
    nodes: dict[int, IbNode] = field(default_factory=dict)
    links: list[IbLink] = field(default_factory=list)
    #: (GUID, port) of ports listed with no peer (``-p``'s ``???``)
    unlinked: list[tuple[int, int]] = field(default_factory=list)

    def by_kind(self, kind: str) -> list[IbNode]:
        return [n for n in self.nodes.values() if n.kind == kind]


def _join(ends: dict, named: dict, a: int, ap: int, b: int, bp: int, width: int, speed: str,
          no: int, where: str) -> bool:
    """Note the end (a, ap) -> (b, bp) read on line ``no`` (``ends``: port -> its peer,
    width, speed, line; ``named``: port -> the port and line that name it as their peer);
    True: a link not seen yet (False: its other end was read before and agrees)."""
    if (a, ap) in ends:
        raise IbnetdiscoverError(f"{where}: port {ap} of {a:#018x}: listed twice (line "
                                 f"{ends[(a, ap)][4]})")
    other = ends.get((b, bp))  # what the peer's own line says it is joined to
    if other is not None and other[:2] != (a, ap):
        raise IbnetdiscoverError(
            f"{where}: port {ap} of {a:#018x} to port {bp} of {b:#018x}, but line {other[4]} "
            f"joins that port to port {other[1]} of {other[0]:#018x}")
    prev = named.get((a, ap))  # a line that names this port as its peer
    if prev is not None and prev[:2] != (b, bp):
        raise IbnetdiscoverError(
            f"{where}: port {ap} of {a:#018x} to port {bp} of {b:#018x}, but line {prev[2]} "
            f"joins port {prev[1]} of {prev[0]:#018x} to it")
    prev = named.get((b, bp))
    if prev is not None and prev[:2] != (a, ap):
        raise IbnetdiscoverError(
            f"{where}: port {ap} of {a:#018x} to port {bp} of {b:#018x}, but line {prev[2]} "
            f"joins port {prev[1]} of {prev[0]:#018x} to that port")
    named[(b, bp)] = (a, ap, no)
    ends[(a, ap)] = (b, bp, width, speed, no)
    seen = ends.get((b, bp))
    if seen is None:
        return True
    if seen[2:4] != (width, speed):
        raise IbnetdiscoverError(f"{where}: width and speed {width}x{speed}, line {seen[4]} "
                                 f"gives the same link {seen[2]}x{seen[3]}")
    return False


# ---------------------------------------------------------------- the topology file
_NODE = re.compile(r'(Switch|Ca|Rt)\s+(\d+)\s+"([SHR])-([0-9A-Fa-f]+)"\s*(?:#\s*"(.*)"'
                   r"((?:\s+(?:base|enhanced)\s+port\s+0\s+lid\s+\d+\s+lmc\s+\d+)?))?\s*$")
_SW_PORT = re.compile(
    r'\[(\d+)\](?:\[ext \d+\])?\s+"([SHR])-([0-9A-Fa-f]+)"\[(\d+)\](?:\[ext \d+\])?'
    r'(?:\(([0-9A-Fa-f]+)\))?\s*#\s*"(.*)"\s+lid\s+(\d+)\s+(\S+)$')
_CA_PORT = re.compile(
    r'\[(\d+)\](?:\(([0-9A-Fa-f]+)\))?\s+"([SHR])-([0-9A-Fa-f]+)"\[(\d+)\](?:\[ext \d+\])?'
    r'(?:\(([0-9A-Fa-f]+)\))?\s*#\s*lid\s+(\d+)\s+lmc\s+(\d+)\s+"(.*)"\s+lid\s+(\d+)\s+(\S+)$')
_WIDTH_SPEED = re.compile(r"(\d+x|\?\?)\s*([A-Z0-9]+|\?\?\?)$")
#: what ibnetdiscover prints for a width or speed it does not know (a link of rate 0)
UNKNOWN_WIDTH, UNKNOWN_SPEED = 0, "???"
_HEADER_KEYS = ("vendid", "devid", "sysimgguid", "switchguid", "caguid", "rtguid")


def _width_speed(text: str, where: str) -> tuple[int, str]:
    m = _WIDTH_SPEED.match(text)
    if m is None:
        raise IbnetdiscoverError(f"{where}: width and speed {text!r}: not like 4xNDR or 4x NDR")
    width = UNKNOWN_WIDTH if m.group(1) == "??" else int(m.group(1)[:-1])
    speed = m.group(2)
    if width not in WIDTHS and width != UNKNOWN_WIDTH:
        raise IbnetdiscoverError(f"{where}: width {width}x: one of "
                                 f"{', '.join(f'{w}x' for w in WIDTHS)}")
    if speed not in LANE_DATA_BPS and speed != UNKNOWN_SPEED:
        raise IbnetdiscoverError(f"{where}: speed {speed!r}: one of "
                                 f"{', '.join(LANE_DATA_BPS)}")
    return width, speed


def _parse_topology(lines: list[str], name: str) -> IbTopology:
    topo = IbTopology(name, "topology")
    ends: dict[tuple[int, int], tuple[int, int, int, str, int]] = {}  # (guid, port) -> peer
    named: dict[tuple[int, int], tuple[int, int, int]] = {}
    cur: IbNode | None = None
    lids: dict[int, int] = {}  # a CA's own LID, from its port lines
    for no, raw in enumerate(lines, 1):
        line = raw.strip()
        where = f"{name}:{no}"
        if not line or line.startswith("#"):
            if not line:
                cur = None
            continue
        if line.split("=", 1)[0] in _HEADER_KEYS and "=" in line:
            continue
        if line[0] == "[":
            if cur is None:
                raise IbnetdiscoverError(f"{where}: a port line outside a node's block")
            m = (_SW_PORT if cur.kind == "switch" else _CA_PORT).match(line)
            if m is None:
                m2 = _CA_PORT.match(line) or _SW_PORT.match(line)
                if m2 is None:
                    raise IbnetdiscoverError(f"{where}: port line: not ibnetdiscover's "
                                             f"[port] \"peer\"[port] # ... lid N WxSPEED")
                m = m2
            if m.re is _SW_PORT:
                port, ptype, pguid, pport, _, _, _plid, ws = m.groups()
            else:
                port, _, ptype, pguid, pport, _, own_lid, _, _, _plid, ws = m.groups()
                lids.setdefault(cur.guid, int(own_lid))
            width, speed = _width_speed(ws, where)
            a, ap, b, bp = cur.guid, int(port), int(pguid, 16), int(pport)
            if cur.nports and not 1 <= ap <= cur.nports:
                raise IbnetdiscoverError(f"{where}: port {ap}: {cur.kind} "
                                         f"{cur.guid:#018x} has ports 1-{cur.nports}")
            if _join(ends, named, a, ap, b, bp, width, speed, no, where):
                topo.links.append(IbLink(a, ap, b, bp, width, speed, no))
            _ = ptype
            continue
        m = _NODE.match(line)
        if m is None:
            raise IbnetdiscoverError(f"{where}: not a node (Switch/Ca/Rt), port or header "
                                     f"line: {line[:60]!r}")
        word, nports, letter, guid_s, desc, rest = m.groups()
        kind = _KINDS[word]
        if _ID[letter] != kind:
            raise IbnetdiscoverError(f"{where}: node id {letter}-{guid_s}: a {word} is "
                                     f"{ {'switch': 'S', 'ca': 'H', 'router': 'R'}[kind]}-")
        guid = int(guid_s, 16)
        lid = None
        if rest:
            lm = re.search(r"\blid\s+(\d+)", rest)
            lid = int(lm.group(1)) if lm else None
        if guid in topo.nodes:
            raise IbnetdiscoverError(f"{where}: node {guid:#018x}: declared again (line "
                                     f"{topo.nodes[guid].line})")
        cur = IbNode(kind, guid, int(nports), desc or "", lid, no)
        topo.nodes[guid] = cur
    for guid, lid in lids.items():
        n = topo.nodes[guid]
        if n.lid is None:
            topo.nodes[guid] = IbNode(n.kind, n.guid, n.nports, n.desc, lid, n.line)
    for ln in topo.links:
        for g, p in ((ln.a, ln.a_port), (ln.b, ln.b_port)):
            if g not in topo.nodes:
                raise IbnetdiscoverError(f"{name}:{ln.line}: peer {g:#018x}: no block "
                                         f"declares this node")
            _ = p
    return topo


# ---------------------------------------------------------------- -p / --ports
_PORTS = re.compile(
    r"(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x([0-9A-Fa-f]+)\s+(\d+x|\?\?)\s+(\S+)\s+"
    r"(?:-\s+(SW|CA|RT)\s+(\d+)\s+(\d+)\s+0x([0-9A-Fa-f]+)\s+\(\s*'(.*)'\s+-\s+'(.*)'\s*\)"
    r"|'(.*)')$")


def _parse_ports(lines: list[str], name: str) -> IbTopology:
    topo = IbTopology(name, "ports")
    ends: dict[tuple[int, int], tuple[int, int, int, str, int]] = {}
    named: dict[tuple[int, int], tuple[int, int, int]] = {}

    def node(kind: str, lid: int, guid: int, desc: str, no: int) -> None:
        n = topo.nodes.get(guid)
        if n is None:
            topo.nodes[guid] = IbNode(_KINDS[kind], guid, 0, desc, lid, no)
        elif n.kind != _KINDS[kind]:
            raise IbnetdiscoverError(f"{name}:{no}: {guid:#018x} is a {_KINDS[kind]} here, "
                                     f"a {n.kind} on line {n.line}")

    for no, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{name}:{no}"
        m = _PORTS.match(line)
        if m is None:
            raise IbnetdiscoverError(f"{where}: not an ibnetdiscover -p line (TYPE LID PORT "
                                     f"GUID WIDTH SPEED - TYPE LID PORT GUID ( 'desc' - "
                                     f"'desc' ))")
        (kind, lid, port, guid, width_s, speed, pkind, plid, pport, pguid, desc, pdesc,
         alone) = m.groups()
        g = int(guid, 16)
        if pkind is None:  # no peer: only the port and its node
            node(kind, int(lid), g, alone, no)
            topo.unlinked.append((g, int(port)))
            continue
        width, speed = _width_speed(f"{width_s} {speed}", where)
        node(kind, int(lid), g, desc, no)
        pg = int(pguid, 16)
        node(pkind, int(plid), pg, pdesc, no)
        a, ap, b, bp = g, int(port), pg, int(pport)
        if _join(ends, named, a, ap, b, bp, width, speed, no, where):
            topo.links.append(IbLink(a, ap, b, bp, width, speed, no))
    return topo


# ---------------------------------------------------------------- reading
def text_lines(path: str | Path, error: type[ValueError] = IbnetdiscoverError) -> list[str]:
    """The lines of the text file at ``path``, gunzipped if it is gzip (the tools' dumps
    often are); a file that does not decompress or is not UTF-8 text raises ``error``
    naming it (and the line)."""
    p = Path(path)
    data = p.read_bytes()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise error(f"{p}:1: gzip that does not decompress ({e})") from None
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise error(f"{p}:{line}: not text (byte {e.start})") from None


def _form(lines: list[str]) -> str | None:
    """"topology", "ports" or None: what the first lines that say something look like."""
    for raw in lines[:200]:
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            if "Topology file" in line:
                return "topology"
            continue
        if _NODE.match(line) or line.split("=", 1)[0] in _HEADER_KEYS:
            return "topology"
        return "ports" if _PORTS.match(line) else None
    return None


def is_ibnetdiscover(path: str | Path) -> bool:
    """Whether the file at ``path`` is ibnetdiscover's output (either form, plain or
    gzipped), from its content."""
    try:
        return _form(text_lines(path)) is not None
    except (OSError, IbnetdiscoverError):
        return False


def parse_ibnetdiscover(text: str, name: str = "<text>") -> IbTopology:
    """Read ibnetdiscover's topology file or ``-p`` listing from ``text``."""
    lines = text.splitlines()
    form = _form(lines)
    if form is None:
        raise IbnetdiscoverError(f"{name}:1: neither an ibnetdiscover topology file nor "
                                 f"its -p listing")
    topo = (_parse_topology if form == "topology" else _parse_ports)(lines, name)
    if not topo.nodes:
        raise IbnetdiscoverError(f"{name}:1: no node")
    return topo


def read_ibnetdiscover(path: str | Path) -> IbTopology:
    """Read ibnetdiscover's output at ``path`` (either form, plain or gzipped)."""
    lines = text_lines(path)
    return parse_ibnetdiscover("\n".join(lines), str(path))


# ---------------------------------------------------------------- writing
_LETTER = {"switch": "S", "ca": "H", "router": "R"}
_WORD = {"switch": "Switch", "ca": "Ca", "router": "Rt"}
_GUID_KEY = {"switch": "switchguid", "ca": "caguid", "router": "rtguid"}


def format_ibnetdiscover(topo: IbTopology) -> str:
    """``topo`` as ibnetdiscover's topology file (switches first, then CAs and routers, in
    GUID order; a node's ports in order), which :func:`parse_ibnetdiscover` reads back and
    ibsim takes as its fabric.  A CA's port GUID is written as its node GUID."""
    peers: dict[int, list[tuple[int, int, int, IbLink]]] = {g: [] for g in topo.nodes}
    for ln in topo.links:
        peers[ln.a].append((ln.a_port, ln.b, ln.b_port, ln))
        peers[ln.b].append((ln.b_port, ln.a, ln.a_port, ln))
    out = ["#", "# Topology file: written by lossless (sim.fabric.ibnetdiscover)", "#", ""]
    order = sorted(topo.nodes.values(), key=lambda n: (n.kind != "switch", n.guid))

    def lid(n: IbNode) -> int:
        return 0 if n.lid is None else n.lid

    for n in order:
        g = f"{n.guid:016x}"
        out += ["vendid=0x2c9", f"sysimgguid=0x{g}",
                f"{_GUID_KEY[n.kind]}=0x{g}" + (f"({g})" if n.kind == "switch" else "")]
        nports = n.nports or max((p for p, *_ in peers[n.guid]), default=1)
        head = f'{_WORD[n.kind]}\t{nports} "{_LETTER[n.kind]}-{g}"\t\t# "{n.desc}"'
        if n.kind == "switch":
            head += f" enhanced port 0 lid {lid(n)} lmc 0"
        out.append(head)
        for port, b, bp, ln in sorted(peers[n.guid], key=lambda x: x[0]):
            pn = topo.nodes[b]
            pid = f'"{_LETTER[pn.kind]}-{pn.guid:016x}"[{bp}]'
            if pn.kind == "ca":
                pid += f"({pn.guid:016x})"
            if n.kind == "switch":
                out.append(f'[{port}]\t{pid} \t\t# "{pn.desc}" lid {lid(pn)} {ln.label}')
            else:
                out.append(f'[{port}]({g}) \t{pid}\t\t# lid {lid(n)} lmc 0 "{pn.desc}" '
                           f"lid {lid(pn)} {ln.label}")
        out.append("")
    return "\n".join(out)


def osm_guid(nid: int) -> int:
    """The GUID :func:`topology_of_fabric` gives node ``nid``: one whose key in OpenSM's
    tables (the GUID in network byte order read as a little-endian integer,
    ``sim.scenarios.description._osm_key``) is ``0x0002c903 << 32`` plus ``nid``, so that
    OpenSM takes the switches in node order, as :func:`sim.fabric.lft.routing_order` does."""
    return int.from_bytes(((0x0002C903 << 32) + nid).to_bytes(8, "little"), "big")


def topology_of_fabric(fabric: object, name: str = "<fabric>") -> IbTopology:
    """A built :class:`sim.fabric.Fabric` as an ibnetdiscover topology (to write with
    :func:`format_ibnetdiscover` for ibsim and OpenSM): node ``i`` has GUID
    :func:`osm_guid` ``(i)`` and LID ``i + 1``, a switch's port ``p`` is its port ``p + 1``
    (an InfiniBand switch's port 0 is its own management port) and a host's port 0 its
    CA's port 1; a link's speed is the 4-lane one of its rate (NDR for
    400 Gb/s, HDR 200, EDR 100, FDR 56, QDR 40... the lane rate that divides it)."""
    from sim.fabric.faults import peer_node
    from sim.net.switch import Switch

    topo = IbTopology(name, "topology")
    nodes = fabric.nodes  # type: ignore[attr-defined]
    guid = {nid: osm_guid(nid) for nid in nodes}
    for nid, node in sorted(nodes.items()):
        sw = isinstance(node, Switch)
        nports = max(node.ports, default=0) + 1 if sw else 1
        topo.nodes[guid[nid]] = IbNode("switch" if sw else "ca", guid[nid], nports,
                                       f"switch {nid}" if sw else f"host {nid} mlx5_0",
                                       nid + 1, 0)
    by_rate: dict[int, tuple[int, str]] = {}  # 4 lanes where a rate allows (400G: 4xNDR)
    for w in (4, 1, 2, 8, 12):
        for k, v in LANE_DATA_BPS.items():
            by_rate.setdefault(w * v, (w, k))
    seen = set()
    for nid, node in sorted(nodes.items()):
        for idx, port in sorted(node.ports.items()):
            peer = peer_node(port)
            if peer is None or (nid, idx) in seen:
                continue
            seen.add((peer.node_id, port.peer_port))
            width, speed = by_rate.get(int(port.rate_bps), (4, "???"))
            a_port = idx + 1 if isinstance(node, Switch) else 1
            b_port = port.peer_port + 1 if isinstance(peer, Switch) else 1
            topo.links.append(IbLink(guid[nid], a_port, guid[peer.node_id], b_port, width,
                                     speed, 0))
    return topo

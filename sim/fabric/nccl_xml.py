"""A node as NCCL sees it: NCCL's topology XML (what ``NCCL_TOPO_DUMP_FILE`` writes and
``NCCL_TOPO_FILE`` reads; NVIDIA/nccl ``src/graph/xml.cc``, ``topo.cc``) read into its
CPUs (NUMA nodes), PCIe tree, GPUs and NICs, and per GPU the NICs nearest to it by NCCL's
path types.

The file is ``<system>`` holding ``<cpu numaid=...>``, each a tree of ``<pci busid=...
class=... link_speed="16.0 GT/s PCIe" link_width="16">`` (a bridge or PCIe switch port has
class ``0x0604xx``), the leaves holding ``<gpu dev rank sm gdr>`` (with ``<nvlink target
count>``) or ``<nic>`` with its ``<net name dev speed port guid gdr>`` (speed in Mb/s).  A
partial file (as cloud images ship, for NCCL to complete at run time) may list a device
by its PCI class only: ``0x0302`` a GPU (3D controller), ``0x0207`` an InfiniBand and
``0x0200`` an Ethernet controller; it is read as such, without its NCCL attributes.

The path types (``src/graph/topo.h``): PIX, through at most one PCIe bridge; PXB, through
more bridges but not the CPU; PHB, through the CPU's host bridge; SYS, across CPUs (NUMA
nodes).  NCCL gives a GPU the NICs of its best path type first.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sim.nic.pcie import GT_PER_S

__all__ = ["PATH_TYPES", "PATTERNS", "Device", "NcclGraph", "NcclTopoError", "NodeTopology",
           "graph_rings", "graph_text", "graph_tree_chains", "is_nccl_graph", "is_nccl_topo",
           "node_report",
           "node_text", "read_nccl_graph", "read_nccl_topo"]

#: NCCL's path types between a GPU and a NIC, best first
PATH_TYPES = ("PIX", "PXB", "PHB", "SYS")
#: PCIe generation by the link speed NCCL writes (GT/s a lane): the inverse of
#: :data:`sim.nic.pcie.GT_PER_S` ("16.0 GT/s PCIe" and "16 GT/s" alike)
_GEN = {f"{float(gt):g}": gen for gen, gt in GT_PER_S.items()}


class NcclTopoError(ValueError):
    """A topology file that cannot be read: ``FILE: element: why``."""


@dataclass(slots=True)
class Device:
    """A GPU or NIC: its kind, PCI bus id, NUMA node, the bus ids of the PCIe bridges above
    it (nearest first), its own PCIe link (generation, lanes; 0: not given) and NCCL's
    attributes (empty in a partial file)."""

    kind: str  # "gpu" | "nic"
    busid: str
    numa: int
    bridges: tuple[str, ...]
    pcie_gen: int
    pcie_lanes: int
    attrs: dict[str, str] = field(default_factory=dict)
    #: a GPU's NVLinks: target bus id -> links
    nvlinks: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        if self.kind == "gpu":
            return f"GPU {self.attrs['dev']}" if "dev" in self.attrs else f"GPU {self.busid}"
        return self.attrs.get("name") or f"NIC {self.busid}"

    @property
    def speed_gbps(self) -> float | None:
        """A NIC's speed (NCCL's Mb/s over 1000), None when not given."""
        s = self.attrs.get("speed")
        return int(s) / 1000 if s and s.isdigit() else None


@dataclass(slots=True)
class NodeTopology:
    path: str
    gpus: list[Device] = field(default_factory=list)
    nics: list[Device] = field(default_factory=list)
    numa_nodes: int = 0
    #: the CPUs' vendor as NCCL's tuner names it: intel, amd or arm ("" unknown)
    cpu_vendor: str = ""

    def path_type(self, a: Device, b: Device) -> str:
        """NCCL's path type between two devices."""
        if a.numa != b.numa:
            return "SYS"
        common = [x for x in a.bridges if x in b.bridges]
        if not common:
            return "PHB"
        lca = common[0]
        up = a.bridges.index(lca) + b.bridges.index(lca)  # bridges below the common one
        return "PIX" if up == 0 else "PXB"

    def nearest_nics(self, gpu: Device) -> tuple[str, list[Device]]:
        """The best path type from ``gpu`` to a NIC and the NICs at it."""
        if not self.nics:
            return "", []
        kinds = {n.busid: self.path_type(gpu, n) for n in self.nics}
        best = min(kinds.values(), key=PATH_TYPES.index)
        return best, [n for n in self.nics if kinds[n.busid] == best]


def _gen(speed: str, where: str) -> int:
    if not speed:
        return 0
    try:
        v = f"{float(speed.split()[0]):g}"
    except ValueError:
        v = ""
    if v not in _GEN:
        raise NcclTopoError(f"{where}: link_speed {speed!r}: not a PCIe rate (2.5 to 64.0 "
                            f"GT/s)")
    return _GEN[v]


def _int(el: ET.Element, attr: str, default: str, where: str, base: int = 10) -> int:
    """Attribute ``attr`` of ``el`` as an integer (``default`` when absent or empty); a
    value that is not one names the file, the element and the attribute."""
    text = el.get(attr, default) or default
    try:
        return int(text, base)
    except ValueError:
        raise NcclTopoError(f"{where}: {attr}={text!r}: not a number") from None


def _root(path: str | Path, tag: str, what: str) -> ET.Element:
    """The root element of NCCL's XML file ``path``, which must be ``<tag>``;
    NcclTopoError naming the file (and the line) otherwise."""
    name = str(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        line = e.position[0] if getattr(e, "position", None) else 1
        raise NcclTopoError(f"{name}:{line}: not XML ({e})") from None
    except OSError as e:
        raise NcclTopoError(f"{name}: cannot read: {e.strerror or e}") from None
    if root.tag != tag:
        raise NcclTopoError(f"{name}: <{root.tag}>: {what}")
    return root


def read_nccl_topo(path: str | Path) -> NodeTopology:
    """NCCL's topology XML at ``path``."""
    name = str(path)
    root = _root(path, "system", "NCCL's topology file is a <system> (a <graphs> file is "
                                 "NCCL_GRAPH_FILE's)")
    topo = NodeTopology(name)
    cpus = root.findall("cpu")
    topo.numa_nodes = len(cpus)

    def walk(el: ET.Element, numa: int, bridges: tuple[str, ...]) -> None:
        for child in el:
            if child.tag != "pci":
                if child.tag == "nic" and el.tag == "cpu":  # NICs without a PCI device
                    for net in child.findall("net"):
                        topo.nics.append(Device("nic", f"cpu{numa}:{net.get('name')}", numa,
                                                bridges, 0, 0, dict(net.attrib)))
                continue
            busid = child.get("busid", "")
            where = f"{name}: <pci busid={busid!r}>"
            cls = _int(child, "class", "0x0", where, 16)
            gen = _gen(child.get("link_speed", ""), where)
            lanes = _int(child, "link_width", "0", where)
            gpu, nic = child.find("gpu"), child.find("nic")
            if cls >> 8 == 0x0604 and gpu is None and nic is None:  # a bridge
                walk(child, numa, (busid, *bridges))
            elif gpu is not None or cls >> 8 == 0x0302:
                d = Device("gpu", busid, numa, bridges, gen, lanes,
                           dict(gpu.attrib) if gpu is not None else {})
                for nv in (gpu.findall("nvlink") if gpu is not None else ()):
                    d.nvlinks[nv.get("target", "")] = _int(nv, "count", "0",
                                                           f"{where} <nvlink>")
                if gpu is not None:
                    _int(gpu, "dev", "0", f"{where} <gpu>")  # (the GPUs' order below)
                topo.gpus.append(d)
            elif nic is not None or cls >> 8 in (0x0200, 0x0207):
                nets = nic.findall("net") if nic is not None else []
                for net in nets or [None]:
                    topo.nics.append(Device("nic", busid, numa, bridges, gen, lanes,
                                            dict(net.attrib) if net is not None else {}))
            else:
                walk(child, numa, (busid, *bridges))

    vendors = {cpu.get("vendor", ""): cpu.get("arch", "") for cpu in cpus}
    topo.cpu_vendor = next((("intel" if v == "GenuineIntel" else "amd" if v == "AuthenticAMD"
                             else "arm" if a in ("arm64", "aarch64") else "")
                            for v, a in vendors.items()), "")
    for cpu in cpus:
        numa = _int(cpu, "numaid", "0", f"{name}: <cpu>")
        walk(cpu, numa, ())
    if not topo.gpus and not topo.nics:
        raise NcclTopoError(f"{name}: no GPU and no NIC")
    topo.gpus.sort(key=lambda d: (int(d.attrs.get("dev", 1 << 20)), d.busid))
    return topo


def is_nccl_topo(path: str | Path) -> bool:
    """Whether the file at ``path`` starts as NCCL's topology XML (``<system``)."""
    try:
        with open(path, "rb") as f:
            head = f.read(512).lstrip()
    except OSError:
        return False
    return head.startswith(b"<system") or (head.startswith(b"<?xml") and b"<system" in head)


def node_report(topo: NodeTopology) -> dict[str, Any]:
    """Per GPU its PCIe link, NVLinks, NUMA node and nearest NICs (by NCCL's path type);
    per NIC its speed, PCIe link and GPUDirect RDMA."""
    gpus = []
    for g in topo.gpus:
        kind, near = topo.nearest_nics(g)
        gpus.append({"gpu": g.name, "busid": g.busid, "numa": g.numa,
                     "pcie": [g.pcie_gen, g.pcie_lanes], "nvlinks": sum(g.nvlinks.values()),
                     "nearest_nics": [n.name for n in near], "path": kind})
    nics = [{"nic": n.name, "busid": n.busid, "numa": n.numa, "speed_gbps": n.speed_gbps,
             "pcie": [n.pcie_gen, n.pcie_lanes], "gdr": n.attrs.get("gdr")} for n in topo.nics]
    return {"source": topo.path, "numa_nodes": topo.numa_nodes, "gpus": gpus, "nics": nics}


def node_text(rep: dict[str, Any]) -> str:
    """:func:`node_report` as text."""
    def link(p: list[int]) -> str:
        return f"Gen{p[0]} x{p[1]}" if p[0] else (f"x{p[1]}" if p[1] else "?")

    def where(d: dict[str, Any], name: str) -> str:
        bus = "" if d["busid"] in name or ":" not in d["busid"] else f"{d['busid']}, "
        return f"{bus}NUMA {d['numa']}, PCIe {link(d['pcie'])}"

    out = [f"node {rep['source']}: {len(rep['gpus'])} GPUs, {len(rep['nics'])} NICs, "
           f"{rep['numa_nodes']} NUMA nodes"]
    for g in rep["gpus"]:
        near = ", ".join(g["nearest_nics"]) or "none"
        nv = f", {g['nvlinks']} NVLinks" if g["nvlinks"] else ""
        out.append(f"  {g['gpu']} ({where(g, g['gpu'])}{nv}): nearest NIC {near} "
                   f"({g['path']})")
    for n in rep["nics"]:
        sp = f"{n['speed_gbps']:g} Gb/s" if n["speed_gbps"] else "speed not given"
        gdr = {"1": ", GPUDirect RDMA", "0": ", no GPUDirect RDMA"}.get(n["gdr"] or "", "")
        out.append(f"  {n['nic']} ({where(n, n['nic'])}): {sp}{gdr}")
    return "\n".join(out)


# ---------------------------------------------------------------------- NCCL_GRAPH_FILE
#: a graph's pattern (NCCL src/include/graph.h, NCCL_TOPO_PATTERN_*)
PATTERNS = {1: "balanced tree", 2: "split tree", 3: "tree", 4: "ring", 5: "nvls",
            6: "collnet direct"}


@dataclass(slots=True)
class NcclGraph:
    """One ``<graph>`` of NCCL's graph file: its ``id`` (0 ring, 1 tree, 2 collnet, 3 NVLS,
    4 collnet direct), ``pattern`` (:data:`PATTERNS`), the channels it found, each the
    node's GPUs in order (``gpus``) and the NICs it enters and leaves by (``nets``), and
    its other attributes."""

    id: int
    pattern: int
    gpus: list[list[int]]
    nets: list[list[int]]
    attrs: dict[str, str]

    @property
    def kind(self) -> str:
        return PATTERNS.get(self.pattern, f"pattern {self.pattern}")


def read_nccl_graph(path: str | Path) -> list[NcclGraph]:
    """NCCL's graph file (``NCCL_GRAPH_FILE``, the ``<graphs>`` NCCL writes with
    ``NCCL_GRAPH_DUMP_FILE``): its graphs in file order; NcclTopoError naming the file and
    the element for what it cannot read."""
    name = str(path)
    root = _root(path, "graphs", "NCCL's graph file is a <graphs>")
    out = []
    for i, g in enumerate(root.findall("graph")):
        where = f"{name}: <graph> #{i + 1}"
        gid = _int(g, "id", str(i), where)
        pattern = _int(g, "pattern", "0", where)
        gpus, nets = [], []
        for c, ch in enumerate(g.findall("channel")):
            gpus.append([_int(el, "dev", "-1", f"{where} channel {c}") for el in ch
                         if el.tag == "gpu"])
            nets.append([_int(el, "dev", "-1", f"{where} channel {c}") for el in ch
                         if el.tag == "net"])
            if not gpus[-1]:
                raise NcclTopoError(f"{where} channel {c}: no <gpu>")
        n = _int(g, "nchannels", str(len(gpus)), where)
        if n != len(gpus):
            raise NcclTopoError(f"{where}: nchannels={n} but {len(gpus)} <channel>s")
        out.append(NcclGraph(gid, pattern, gpus, nets, dict(g.attrib)))
    if not out:
        raise NcclTopoError(f"{name}: no <graph>")
    return out


def is_nccl_graph(path: str | Path) -> bool:
    """Whether ``path`` is NCCL's graph file (by its first element)."""
    try:
        with open(path, "rb") as f:
            return f.read(256).lstrip().startswith(b"<graphs")
    except OSError:
        return False


def graph_rings(graphs: list[NcclGraph], nodes: int, gpus_per_node: int,
                nchannels: int, where: str = "graph") -> list[list[int]]:
    """Each of ``nchannels`` channels' ring over ``nodes`` nodes of ``gpus_per_node`` GPUs
    from the file's ring graph: channel ``c`` visits every node's GPUs in the order of the
    file's channel ``c`` modulo its channels (NCCL duplicates its channels so), the nodes
    in order.  ValueError when the file has no ring or its GPUs are not the node's."""
    ring = next((g for g in graphs if g.pattern == 4), None)
    if ring is None:
        raise ValueError(f"{where}: no ring graph (pattern 4) in it: its graphs are "
                         f"{', '.join(g.kind for g in graphs)}")
    for c, order in enumerate(ring.gpus):
        if sorted(order) != list(range(gpus_per_node)):
            raise ValueError(f"{where}: ring channel {c} visits GPUs {order}: not the "
                             f"node's {gpus_per_node} GPUs (0..{gpus_per_node - 1}) once each")
    return [[n * gpus_per_node + x for n in range(nodes)
             for x in ring.gpus[c % len(ring.gpus)]] for c in range(nchannels)]


def graph_tree_chains(graphs: list[NcclGraph], gpus_per_node: int,
                      where: str = "graph") -> list[list[int]] | None:
    """The chains of the file's tree graph (id 1, or the first of a tree pattern): per
    channel the node's GPUs in order, its head first (None: the file has no tree).
    ValueError when they are not the node's GPUs."""
    tree = next((g for g in graphs if g.id == 1 and g.pattern in (1, 2, 3)), None) or next(
        (g for g in graphs if g.pattern in (1, 2, 3)), None)
    if tree is None:
        return None
    for c, order in enumerate(tree.gpus):
        if sorted(order) != list(range(gpus_per_node)):
            raise ValueError(f"{where}: tree channel {c} chains GPUs {order}: not the "
                             f"node's {gpus_per_node} GPUs (0..{gpus_per_node - 1}) once each")
    return [list(c) for c in tree.gpus]


def graph_text(graphs: list[NcclGraph], path: str) -> str:
    """``lossless fabric GRAPH.xml``: the graphs, channel by channel."""
    out = [f"NCCL graphs {path}"]
    for g in graphs:
        a = g.attrs
        out.append(f"  graph {g.id} ({g.kind}): {len(g.gpus)} channels, intra "
                   f"{a.get('typeintra', '?')} {a.get('speedintra', '?')} GB/s, inter "
                   f"{a.get('typeinter', '?')} {a.get('speedinter', '?')} GB/s")
        for c, (gp, nt) in enumerate(zip(g.gpus, g.nets, strict=True)):
            via = f" (NIC {nt[0]} in, {nt[-1]} out)" if nt else ""
            out.append(f"    channel {c}: GPU {' -> '.join(map(str, gp))}{via}")
    ring = any(g.pattern == 4 for g in graphs)
    tree = any(g.pattern in (1, 2, 3) for g in graphs)
    used = " and ".join(x for x, ok in (("its ring's channel orders", ring),
                                        ("its tree's chains", tree)) if ok) or "nothing"
    out.append(f"lossless collective -p graph=FILE (or NCCL_GRAPH_FILE) runs {used}")
    return "\n".join(out)

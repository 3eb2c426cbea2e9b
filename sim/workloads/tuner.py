"""NCCL's host side as a model of its own (sans-IO): its cost model and tuner, which pick the
algorithm, protocol and channel count of a collective per size, and the host-side latencies
(kernel launch, the per-step path of a protocol on NVLink and on the network) that the
simulator adds to the network's own time.

Everything here follows NVIDIA/nccl at **NCCL 2.30.7** (commit ``5067397c``; file names and
functions are of that repository); each constant names its source.  NCCL's model works in
microseconds and GB/s (``time = lat + bytes / (1000 * bw)``); so does this module's
arithmetic, and what leaves it for the simulator is integer picoseconds
(:meth:`HostSide.step_ps`, :meth:`HostSide.busy_ps`).

The model (``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``, ``src/graph/tuning.cc``;
``topoGetAlgoInfo``, ``src/enqueue.cc``):

* **Graphs.**  NCCL searches, per algorithm, channels of equal bandwidth through the node
  (``ncclTopoCompute``, ``src/graph/search.cc``).  :func:`search` follows its rules for the
  regular nodes of :data:`PRESETS` (every GPU behind one NVSwitch, one NIC per GPU on the
  GPU's PCIe switch): the first speed of the architecture's ladder not above the best
  GPU-NIC path (multi-node) or GPU-GPU path (one node); as many channels as the NVLinks
  carry (one node: ``nvlink / speed``) or as the node's NICs carry (``floor(nic / speed)``
  each, the preset's NICs per GPU times the node's GPUs) while each channel's ``speed`` on
  ``g - 1`` of the node's ``g`` GPUs' NVLinks fits (several nodes: a channel leaves
  through a NIC);
  ``ncclTopoDupChannels`` (twice the channels at half the speed unless ``bwIntra < 25``, or
  ``sm > 80``, ``bwIntra < 50`` and more than 4 channels); the runtime channels are twice
  the search's (``ncclTopoPostset``, ``src/graph/connect.cc``), twice again on sm90+ with
  several nodes, ``bwIntra > 45`` and fewer than 16.  [A] the search's later passes (which
  may raise a speed) are not followed; the NVLS graph takes ``bwIntra`` = the largest ladder
  speed ``s`` with ``(nCh + 1) s`` within a GPU's NVLink and ``bwInter`` = the ring's.
* **Bandwidth** per (algorithm, protocol): ``nChannels x bw`` then NCCL's caps and factors
  (Ring LL: ``min(llMaxBw, bw/2)``; Ring LL128: ``min(0.92 bw, nCh x perChMaxRingLL128Bw)``;
  Tree: ``min(0.92 bw, nCh x perChMaxTreeBw)`` then ``/3.8`` for LL, ``x 120/128`` (``x 7/9``
  on one node) for LL128; NVLS: ``bwIntra x nvlsEfficiency x (nCh-1)/nCh``, twice for
  AllReduce); busBw to algBw: ``nRanks / nsteps`` for Ring and NVLS*, 0.5 for Tree.
* **Latency**: ``baseLat[algo][proto]`` plus, per step, ``hwLat[NVLINK or NET][algo][proto]``
  (Ring: ``(nsteps - nInterSteps) x max(intraLat, netOverhead) + nInterSteps x interLat``;
  Tree: ``2 ((ppn - 1) intraLat + log2(nNodes) interLat)``; NVLS: ``intraLat (+ interLat)``;
  NVLSTree: ``intraLat + 2 log2(nNodes) interLat``); Ring Simple AllReduce on several nodes
  multiplies the latency by 1.4 (1.9 before sm80) once a rank's share per channel is 64
  bytes ("plateau effect of ring"); Tree AllReduce scales its bandwidth by
  ``treeCorrectionFactor[proto][log2(bytes/64)]``.
* **Choice**: the least time over the enabled and available entries, ties to the earlier
  (Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT) x (LL, LL128, Simple);
  channels then dropped while ``bytes < nc x nthreads x threshold`` (``topoGetAlgoInfo``);
  NVLS and the NVLS tree run NCCL's ``nvlsChannels`` in its chunks (:func:`nvls_tuning`).

What the simulator takes from it (:class:`HostSide`): the base latency once, when the
call is launched, and each step's ``hwLat`` when its data are ready (NVLink inside a node,
the network between nodes, ``max(hwLat, netOverhead)`` inside a node of a multi-node ring),
so that the steps of the schedule, which the simulator already runs one by one, pay what
NCCL's model charges for each; and NCCL's modelled bus bandwidth of the algorithm and
protocol as what the GPUs' channels can move (per rank and channel, the bus bandwidth over
the runtime channels; NCCL's per-channel caps, ``perChMaxRingLL128Bw`` and the like, are
how its model bounds what a channel's threads copy and reduce), on top of which the network
may slow them further.  NVLS and the NVLS tree: a GPU sends ``(ppn + 1) / ppn`` of the
buffer (every chunk into the switch, its heads' sums once), so the channel rate is NCCL's
busBw converted to those bytes, and a chunk's four NVLink hops (into the reduce buffer, the
sum out, the store in, the copies out) share the call's NVLink ``hwLat`` (25 µs on Hopper)
a quarter each [A].  The 1.4 plateau factor and the tree correction factors are
NCCL's corrections of its closed formula for what a step-by-step run shows anyway (pipeline
fill, chunk rounding); they are used to choose, not added to the simulated time [A].

Not modelled here yet: tuner plugins, ``NCCL_*_NTHREADS``, CollNet support matrices, the
CPU's PCIe topology beyond the presets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sim.workloads.nccl import (
    COLLNET_THREAD_THRESHOLD,
    NCCL_MAX_NTHREADS,
    NVLS_CHUNK_BYTES,
    collnet_direct_channels,
    nvls_tree_max_chunk_bytes,
)

__all__ = [
    "ALGOS", "PROTOS", "RUNNABLE_ALGOS", "PRESETS", "Hardware", "Graphs", "Graph", "Choice",
    "nvls_tuning", "Tuner", "HostSide", "TunerError", "search", "parse_nccl_list",
    "from_environment",
    "NCCL_VERSION", "NCCL_VARIABLES", "ALGO_NAMES", "PROTO_NAMES", "nccl_text",
    "p2p_channels", "p2p_host_side", "environment_notes",
]

#: The NCCL release the constants are read from (``makefiles/version.mk``).
NCCL_VERSION = "2.30.7"

#: NCCL's algorithm and protocol order (``src/include/plugin/nccl_tuner.h``); the tuner's
#: ties go to the earlier entry.
ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
PROTOS = ("ll", "ll128", "simple")
#: The algorithms the simulator's schedules run (:func:`sim.workloads.nccl.schedule`).
RUNNABLE_ALGOS = ("tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree")
ALGO_NAMES = {"tree": "Tree", "ring": "Ring", "collnet_direct": "CollNetDirect",
               "collnet_chain": "CollNetChain", "nvls": "NVLS", "nvls_tree": "NVLSTree",
               "pat": "PAT"}
PROTO_NAMES = {"ll": "LL", "ll128": "LL128", "simple": "Simple"}


def nccl_text(algo: str, proto: str) -> str:
    """An algorithm and protocol as ``NCCL_DEBUG=INFO`` names them (``Ring/Simple``; ``p2p``
    for point-to-point sends, ``-`` for none)."""
    if not algo:
        return "-"
    return f"{ALGO_NAMES.get(algo, algo)}/{PROTO_NAMES.get(proto, proto)}"

_COLLS = ("broadcast", "reduce", "allgather", "reducescatter", "allreduce")
_COLL_NAMES = {"broadcast": "Broadcast", "reduce": "Reduce", "allgather": "AllGather",
               "reducescatter": "ReduceScatter", "allreduce": "AllReduce"}

# ---- constants: src/graph/tuning.cc (ncclTunerConstantsDefaults, l.139-212) --------------

#: ``baseLatencies[algo][LL, LL128, Simple]`` (µs).
BASE_LAT_US: dict[str, tuple[float, float, float]] = {
    "tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "collnet_direct": (0, 0, 0),
    "collnet_chain": (0, 0, 0), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0),
    "pat": (8.0, 8.0, 8.0)}
#: ``hwLatencies[NVLINK, PCI, NET][algo][LL, LL128, Simple]`` (µs).
HW_LAT_US: dict[str, dict[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (0.6, 1.25, 4.0), "ring": (0.6, 1.9, 3.4),
               "collnet_direct": (0, 0, 3.7), "collnet_chain": (0, 0, 2.8),
               "nvls": (0, 0, 25), "nvls_tree": (0, 0, 25), "pat": (0, 0, 4.0)},
    "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7),
            "collnet_direct": (0, 0, 3.7), "collnet_chain": (0, 0, 2.8),
            "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0), "pat": (0, 0, 4.0)},
    "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0),
            "collnet_direct": (0, 0, 31), "collnet_chain": (0, 0, 30),
            "nvls": (0, 0, 18), "nvls_tree": (0, 0, 20.9), "pat": (0, 0, 14)},
}
#: Bandwidth caps (GB/s) by [row][1 node, 2 nodes, >= 3 nodes]; the row of ``llMaxBws`` is
#: the architecture on one node, the CPU (0 Intel/other, 1 AMD) on several.
LL_MAX_BWS = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0),
              (282.0, 90.0, 70.0))
PER_CH_MAX_RING_LL128_BWS = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7),
                             (40.0, 40.0, 40.0))
PER_CH_MAX_TREE_LL128_BWS = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0),
                             (55.6, 31.67, 20.0))
PER_CH_MAX_TREE_BWS = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0),
                       (70.0, 42.8, 24.0))
PER_CH_MAX_NVLS_TREE_BWS = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5),
                            (0.0, 96.0, 80.0))
#: ``nvlsEfficiency`` per architecture (Volta, Ampere, Hopper, Blackwell).
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)
#: ``treeCorrectionFactor[proto][log2(bytes / 64)]`` (``ncclTopoGetAlgoTime``).
TREE_CORRECTION = {
    "ll": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0,
           1.0, 1.0, 1.0, 1.0),
    "ll128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9,
              .9, .9, 1.0, 1.0, 1.0),
    "simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7,
               .8, .9, .9, .9),
}
#: ``getNetOverhead`` (µs): 2 on AMD CPUs, 1 on Intel and others.
NET_OVERHEAD_US = {"intel": 1.0, "amd": 2.0, "arm": 1.0}
#: Fewest nodes for CollNet (``NCCL_COLLNET_NODE_THRESHOLD``'s default, ``src/init.cc``).
COLLNET_NODE_THRESHOLD = 2
#: Below this NVLS AllReduce algorithm bandwidth across nodes NCCL caps the NVLS chunk at
#: 32 KiB (``calcCollChunking``, ``src/enqueue.cc``): 150 GB/s.
NVLS_SMALL_CHUNK_BELOW_GB_PER_S = 150.0
NVLS_SMALL_CHUNK_BYTES = 32768
#: Bytes per thread before more channels or threads (``NCCL_*_THREAD_THRESHOLD``,
#: ``src/include/comm.h``; Ring LL x nRanks, ``ncclTopoTuneModel``).
THREAD_THRESHOLD = {"ll": 8, "ll128": 8, "simple": 64}
#: Max threads per channel (``ncclTopoTuneModel`` l.244-257; ``src/include/device.h``).
MAX_THREADS = {"ll": 512, "ll128": 640, "simple": 512}
#: Speed ladders of the graph search (GB/s; ``ncclTopoCompute``, ``src/graph/search.cc``).
SPEEDS_INTRA = {
    "hopper": (60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3),
    "blackwell": (90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18),
    "other": (40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3)}
SPEEDS_INTER = {
    "hopper": (48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12),
    "blackwell": (96, 86, 80, 48, 45.1, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2,
                  0.24, 0.12),
    "other": (48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12)}
#: NVLink bandwidth per link (GB/s; ``SM*_NVLINK_BW``, ``src/graph/topo.h``).
NVLINK_LINK_GBPS = {70: 20.0, 80: 20.0, 90: 20.6, 100: 40.1}
#: Most channels (``MAXCHANNELS``, ``device.h``).
MAXCHANNELS = 64
#: NVLS channels before ncclNvlsTreeSm100Tuning (``NVLS_NCHANNELS_SM90``,
#: ``NVLS_NCHANNELS_SM100``: several nodes, ``NVLS_NCHANNELS_SM100_NVL``: one NVLink domain;
#: ``src/transport/nvls.cc``).
NVLS_NCHANNELS_SM90, NVLS_NCHANNELS_SM100, NVLS_NCHANNELS_SM100_NVL = 16, 32, 24
_ARCH_INDEX = {"volta": 0, "ampere": 1, "hopper": 2, "blackwell": 3}


class TunerError(ValueError):
    """A setting the tuner cannot take (an unknown name in NCCL_ALGO, no algorithm left)."""


@dataclass(frozen=True)
class Hardware:
    """A node as NCCL's topology detection sees it: GPU architecture (``sm``: 70, 80, 90,
    100), NVLink links per GPU to the NVSwitch, GPUs and NICs per node, a NIC's rate and the
    PCIe path between a GPU and its NIC (GB/s as NCCL computes them: ``width x GT/s-class /
    80``, ``src/graph/topo.cc``), the CPU vendor (NCCL's ``netOverhead`` and LL caps), and
    where the values come from."""

    name: str
    sm: int
    nvlink_links: int
    gpus_per_node: int
    nics_per_node: int
    nic_gbps: float
    pcie_GBps: float
    cpu: str
    source: str
    #: NVLink per GPU per direction as the vendor states it (Gb/s; the fabric's
    #: ``nvlink_gbps``), and the NICs' PCIe generation (the fabric's ``pcie_gen``)
    nvlink_gbps: float = 3600.0
    pcie_gen: int = 5

    def fabric_defaults(self) -> dict[str, Any]:
        """The ``lossless collective`` keys this node sets when ``-p hw`` names it (each
        unless given): GPUs (one NIC each) per node, the NICs' rate and PCIe generation,
        NVLink per GPU.  A node with fewer NICs than GPUs (GCP A3: 4 NICs for 8 GPUs) gets
        one NIC a GPU at the rate that gives each GPU its share [A: the fabric's nodes have
        a NIC per GPU; NICs shared by GPUs are not modelled]."""
        share = min(1.0, self.nics_per_node / max(1, self.gpus_per_node))
        return {"gpus_per_node": self.gpus_per_node, "link_gbps": self.nic_gbps * share,
                "nvlink_gbps": self.nvlink_gbps, "pcie_gen": self.pcie_gen}

    @property
    def arch(self) -> str:
        return {70: "volta", 80: "ampere", 90: "hopper"}.get(self.sm, "blackwell" if
                                                              self.sm >= 100 else "volta")

    @property
    def nvlink_GBps(self) -> float:
        """One GPU's NVLink bandwidth to the NVSwitch (links x ``SM*_NVLINK_BW``)."""
        return self.nvlink_links * NVLINK_LINK_GBPS[min(self.sm, 100)]

    @property
    def nic_GBps(self) -> float:
        """A NIC as NCCL rates it: ``speed (Mb/s) / 8000`` (``src/graph/topo.cc``)."""
        return self.nic_gbps / 8


#: Named nodes, each value with its source; ``-p`` keys of the same names override them.
PRESETS: dict[str, Hardware] = {
    "h100-cx7": Hardware(
        "h100-cx7", 90, 18, 8, 8, 400.0, 48.0, "intel",
        "NVIDIA DGX H100 User Guide: 8 H100 SXM5 (18 NVLink 4 links each, 4 NVSwitches), 8 "
        "ConnectX-7 400 Gb/s (NDR) on PCIe Gen5 x16 switches, 2 Intel Xeon 8480C; NVLink 4: "
        "900 GB/s per GPU both ways", 3600.0, 5),
    "b200-cx7": Hardware(
        "b200-cx7", 100, 18, 8, 8, 400.0, 48.0, "intel",
        "NVIDIA DGX B200 User Guide: 8 B200 (18 NVLink 5 links each, 2 NVSwitch chips), 8 "
        "ConnectX-7 400 Gb/s on PCIe Gen5 x16, 2 Intel Xeon 8570; NVLink 5: 1.8 TB/s per GPU "
        "both ways", 7200.0, 5),
    "a100-cx6": Hardware(
        "a100-cx6", 80, 12, 8, 8, 200.0, 24.0, "amd",
        "NVIDIA DGX A100 User Guide: 8 A100 SXM4 (12 NVLink 3 links each, 6 NVSwitches), 8 "
        "ConnectX-6 200 Gb/s (HDR) on PCIe Gen4 x16, 2 AMD EPYC 7742; NVLink 3: 600 GB/s per "
        "GPU both ways", 2400.0, 4),
    "gb200-nvl72": Hardware(
        "gb200-nvl72", 100, 18, 72, 72, 400.0, 48.0, "arm",
        "NVIDIA GB200 NVL72: one NVLink domain of 72 B200 GPUs (18 compute trays of 4, 18 "
        "NVLink 5 links per GPU to the 18 NVLink switch chips of 9 switch trays: 1.8 TB/s per "
        "GPU both ways), one ConnectX-7 400 Gb/s per GPU (4 per tray), 36 Grace CPUs (Arm); "
        "NCCL sees the rack as one node (MNNVL); DGX SuperPOD GB200 reference architecture "
        "and DGX GB200 user guide", 7200.0, 5),
    "gb200-cx7": Hardware(
        "gb200-cx7", 100, 18, 4, 4, 400.0, 48.0, "arm",
        "NVIDIA GB200 NVL72 compute tray: 2 Grace CPUs (Arm), 4 B200 (18 NVLink 5 links "
        "each), 4 ConnectX-7 400 Gb/s (the NVL72 rack's NVLink domain across trays is not "
        "modelled: each tray is a node); NVLink 5: 1.8 TB/s per GPU both ways", 7200.0, 5),
    "gb300-nvl72": Hardware(
        "gb300-nvl72", 100, 18, 72, 72, 800.0, 96.0, "arm",
        "NVIDIA GB300 NVL72 (Enterprise Reference Architecture, NVL72 AI factory, 'System "
        "Hardware & Components'): 72 Blackwell Ultra GPUs in one NVLink domain (9 NVSwitch "
        "trays, 130 TB/s: 1.8 TB/s per GPU both ways), 18 compute trays of 4 GPUs and 2 Grace "
        "CPUs (Arm), 4 ConnectX-8 per tray, one per GPU: 800 Gb/s (XDR InfiniBand, or 2 x "
        "400G Ethernet) on PCIe Gen6 x16 to its GPU (NVIDIA, Hot Chips 2025); Blackwell "
        "Ultra is compute capability 10.3, NCCL's Blackwell rows; NCCL sees the rack as one "
        "node (MNNVL)", 7200.0, 6),
    "gb300-cx8": Hardware(
        "gb300-cx8", 100, 18, 4, 4, 800.0, 96.0, "arm",
        "NVIDIA GB300 NVL72 compute tray as a node (the rack's NVLink domain across trays is "
        "not modelled): 2 Grace CPUs (Arm), 4 Blackwell Ultra GPUs (18 NVLink 5 links each), "
        "4 ConnectX-8 800 Gb/s on PCIe Gen6 x16 (sources as gb300-nvl72)", 7200.0, 6),
}


#: NVLink per link per direction by GPU architecture (GB/s as the vendor states it: NVLink 2,
#: 3 and 4 25 GB/s a link, NVLink 5 50 GB/s; the presets' nvlink_gbps are links x this x 8)
NVLINK_LINK_VENDOR_GBPS = {70: 25.0, 80: 25.0, 90: 25.0, 100: 50.0}
#: NCCL's PCIe rate a lane by generation (``kvDictPciGen``, ``src/graph/topo.cc``: 100 Mb/s
#: units; a link's ``width x rate / 80`` GB/s, the presets' pcie_GBps: Gen4 x16 24, Gen5 x16
#: 48); NCCL's fallbacks for a link without speed or width: Gen3 (60), 16 lanes
_PCIE_CLASS = {1: 15, 2: 30, 3: 60, 4: 120, 5: 240, 6: 480}


def node_hardware(hw: str) -> Hardware:
    """The node ``hw`` names: a preset (:data:`PRESETS`), or the path of NCCL's topology
    XML of a node (``NCCL_TOPO_DUMP_FILE``'s, :func:`hardware_of_topology`)."""
    if hw in PRESETS:
        return PRESETS[hw]
    import os

    from sim.fabric.nccl_xml import is_nccl_topo, read_nccl_topo

    if os.path.isfile(hw) and is_nccl_topo(hw):
        return hardware_of_topology(read_nccl_topo(hw))
    raise TunerError(f"hw {hw!r}: one of {', '.join(PRESETS)}, or NCCL's topology XML of "
                     f"a node")


def hardware_of_topology(topo: Any) -> Hardware:
    """A :class:`Hardware` from NCCL's topology XML (:class:`sim.fabric.nccl_xml.
    NodeTopology`): the GPUs' architecture (``sm``) and NVLinks (GPU 0's), their count; the
    NICs nearest to a GPU (NCCL's path types), their count and the fastest's speed; the PCIe
    path between GPU 0 and its nearest NIC (the narrower of the two links, NCCL's ``width x
    class / 80`` GB/s) and its generation; the CPU vendor.  A partial file (devices by
    PCI class only, no ``sm`` or speeds) is refused: NCCL completes those at run time."""
    from sim.fabric.nccl_xml import NcclTopoError

    gpus = topo.gpus
    if not gpus:
        raise NcclTopoError(f"{topo.path}: no GPU")
    sm = gpus[0].attrs.get("sm", "")
    if not sm.isdigit():
        raise NcclTopoError(f"{topo.path}: GPU {gpus[0].busid} has no sm: a partial file "
                            f"(NCCL completes it at run time); give -p hw=PRESET")
    near = {n.busid: n for g in gpus for n in topo.nearest_nics(g)[1]}
    speeds = [n.speed_gbps for n in near.values() if n.speed_gbps]
    if not speeds:
        raise NcclTopoError(f"{topo.path}: the GPUs' nearest NICs have no speed")
    g0 = gpus[0]
    n0 = topo.nearest_nics(g0)[1][0]
    links = [(d.pcie_gen or 3, d.pcie_lanes or 16) for d in (g0, n0)]  # NCCL's fallbacks
    pcie_GBps = min(w * _PCIE_CLASS[gen] / 80 for gen, w in links)
    gen = min(gen for gen, _ in links)
    sm_i = int(sm)
    arch = 100 if sm_i >= 100 else sm_i
    nvl = sum(g0.nvlinks.values())
    vendor = topo.cpu_vendor
    return Hardware(
        f"{topo.path}", sm_i, nvl, len(gpus), len(near), max(speeds), pcie_GBps,
        vendor, f"NCCL topology XML {topo.path}: {len(gpus)} GPUs (sm {sm_i}, {nvl} NVLinks "
        f"each), {len(near)} NICs nearest to them ({max(speeds):g} Gb/s), PCIe Gen{gen}",
        nvl * NVLINK_LINK_VENDOR_GBPS.get(arch, 25.0) * 8, gen)


@dataclass(frozen=True)
class Graph:
    """One algorithm's search result: channels and their bandwidth inside the node
    (``bwIntra``) and between nodes (``bwInter``), GB/s (the intra-node path is NVLink: the
    presets' nodes have an NVSwitch)."""

    channels: int
    bw_intra_GBps: float
    bw_inter_GBps: float


@dataclass(frozen=True)
class Graphs:
    """The graphs of a communicator (ring, tree; NVLS when NVSwitch multicast is there) and
    the runtime channel counts (``comm->nChannels``, ``nvlsChannels``)."""

    ring: Graph
    tree: Graph
    nvls: Graph | None
    runtime_channels: int
    nvls_channels: int
    #: NVLS chunk size and the NVLS tree's largest chunk (``nvlsChunkSize``,
    #: ``nvlsTreeMaxChunkSize``, bytes)
    nvls_chunk_bytes: int = NVLS_CHUNK_BYTES
    nvls_tree_max_chunk_bytes: int = NVLS_CHUNK_BYTES


def nvls_tuning(hw: Hardware, nodes: int, ppn: int) -> tuple[int, int, int]:
    """(nvlsChannels, nvlsChunkSize, nvlsTreeMaxChunkSize) as ``ncclNvlsTuning`` sets them
    (``src/transport/nvls.cc``, NCCL 2.30.7): 16 channels on Hopper, 24 on one Blackwell
    NVLink domain, 32 across nodes, 128 KiB chunks, the tree's chunk at most 64 KiB from 4
    nodes; Blackwell across nodes per ``ncclNvlsTreeSm100Tuning`` by nodes, GPUs per node
    and NIC bandwidth (NCCL's GB/s).  [A] every preset's NIC sits on its GPU's PCIe switch
    (``gpuToNicPathType <= PATH_PXB``)."""
    if hw.sm < 100:
        ch = NVLS_NCHANNELS_SM90
    else:
        ch = NVLS_NCHANNELS_SM100 if nodes > 1 else NVLS_NCHANNELS_SM100_NVL
    kib = 1024
    chunk, tree_max = NVLS_CHUNK_BYTES, 0
    if hw.sm >= 100 and nodes > 1:
        nic = hw.nic_GBps
        if nodes == 2 and nic >= 48:
            ch, tree_max = 32, 128 * kib
            if ppn <= 4:
                chunk = tree_max = 256 * kib
            elif ppn >= 16 or (ppn <= 8 and nic < 96):
                tree_max = 64 * kib
        elif nic >= 96:
            if ppn <= 8:
                ch, chunk, tree_max = 24, 256 * kib, 256 * kib
            else:
                ch, tree_max = 32, (128 * kib if ppn < 32 else 64 * kib)
        elif nic >= 48:
            ch, tree_max = 24, 64 * kib
    if not tree_max:  # NCCL_NVLSTREE_MAX_CHUNKSIZE's default
        tree_max = nvls_tree_max_chunk_bytes(nodes, chunk)
    return ch, chunk, tree_max


def _first(ladder: tuple[float, ...], limit: float) -> float:
    for s in ladder:
        if s <= limit + 1e-9:
            return s
    return ladder[-1]


def search(hw: Hardware, nodes: int, gpus_per_node: int | None = None) -> Graphs:
    """The graphs NCCL's search finds for ``nodes`` nodes of ``hw`` (module docstring)."""
    g = gpus_per_node or hw.gpus_per_node
    arch = hw.arch if hw.arch in ("hopper", "blackwell") else "other"
    nvl = hw.nvlink_GBps
    if nodes == 1:
        s = _first(SPEEDS_INTRA[arch], nvl)
        nch = max(1, int(nvl // s + 1e-9))
        bw_intra = bw_inter = s
        speed = s
    else:
        path = min(hw.pcie_GBps, hw.nic_GBps)
        s = _first(SPEEDS_INTER[arch], path)
        per_nic = max(1, int(hw.nic_GBps // s + 1e-9))
        # the node's NICs: the preset's per GPU, for the GPUs the fabric gives a node
        nics = max(1, hw.nics_per_node * g // hw.gpus_per_node)
        nch = nics * per_nic
        # each channel crosses g - 1 of the node's GPUs' NVLinks (it leaves through a NIC)
        while g > 1 and nch > 1 and math.ceil(nch * (g - 1) / g) * s > nvl + 1e-9:
            nch -= 1
        bw_intra = bw_inter = s
    speed = bw_inter
    # ncclTopoDupChannels
    if not (bw_intra < 25 or (hw.sm > 80 and bw_intra < 50 and nch > 4)):
        nch, bw_intra, bw_inter = nch * 2, bw_intra / 2, bw_inter / 2
    ring = Graph(nch, bw_intra, bw_inter)
    runtime = min(MAXCHANNELS, 2 * nch)
    if hw.sm >= 90 and nodes > 1 and ring.bw_intra_GBps > 45 and runtime < 16:
        runtime *= 2
    nvls = None
    nvls_ch = 0
    if hw.sm >= 90 and g > 1:
        heads = min(g, 32)
        s_nvls = next((s for s in SPEEDS_INTRA[arch] if (heads + 1) * s <= nvl + 1e-9),
                      SPEEDS_INTRA[arch][-1])
        # pass 2 raises only bwInter, up to 2 x bwIntra: on one node the ladder's top that
        # fits, across nodes the ring's (NIC-bound) speed
        top = max((x for x in SPEEDS_INTRA[arch] if x <= 2 * s_nvls), default=s_nvls)
        nvls = Graph(heads, s_nvls, speed if nodes > 1 else top)
    ch, chunk, tree_max = nvls_tuning(hw, nodes, g)
    if nvls is not None:
        nvls_ch = ch
    return Graphs(ring, ring, nvls, runtime, nvls_ch, chunk, tree_max)


def parse_nccl_list(value: str, names: tuple[str, ...], aliases: Mapping[str, str],
                    default: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """``NCCL_ALGO`` / ``NCCL_PROTO`` as NCCL reads them (``parseList``,
    ``src/graph/tuning.cc``): ``[^]list[;func:[^]list]...``; a list without ``func:`` (the
    first only) applies to every collective; per matching collective every element is reset
    (to 0, or to 1 after ``^``) and the listed ones set (1, or 0 after ``^``).  Returns
    collective -> name -> 0/1/2 (2: NCCL's "auto" for LL128).  Names are case-insensitive."""
    out = {c: dict(default[c]) for c in _COLLS}
    lookup = {v.lower(): k for k, v in aliases.items()}
    for i, part in enumerate(value.split(";")):
        part = part.strip()
        if not part:
            continue
        funcs: tuple[str, ...] = _COLLS
        if ":" in part:
            f, part = part.split(":", 1)
            match = [c for c in _COLLS if _COLL_NAMES[c].lower() == f.strip().lower()]
            if not match:
                raise TunerError(f"{value!r}: unknown collective {f.strip()!r} (one of "
                                 f"{', '.join(_COLL_NAMES.values())})")
            funcs = tuple(match)
        elif i:
            raise TunerError(f"{value!r}: only the first list may omit 'collective:'")
        neg = part.startswith("^")
        items = [x.strip() for x in (part[1:] if neg else part).split(",") if x.strip()]
        for x in items:
            if x.lower() not in lookup:
                raise TunerError(f"{value!r}: unknown name {x!r} (one of "
                                 f"{', '.join(aliases[n] for n in names)})")
        for c in funcs:
            for n in names:
                out[c][n] = 1 if neg else 0
            for x in items:
                out[c][lookup[x.lower()]] = 0 if neg else 1
    return out


@dataclass(frozen=True)
class Choice:
    """What the tuner picked for one call: algorithm, protocol, channels and threads, and
    the model's time (µs) of every entry it weighed (None: disabled or unavailable)."""

    algo: str
    proto: str
    channels: int
    threads: int
    time_us: float
    table: dict[tuple[str, str], float | None] = field(default_factory=dict)
    nccl_algo: str = ""
    nccl_proto: str = ""

    @property
    def nccl_text(self) -> str:
        """As ``NCCL_DEBUG=INFO`` names it: ``Ring/Simple``."""
        return nccl_text(self.algo, self.proto)


@dataclass
class Tuner:
    """NCCL's cost model and choice for one communicator: ``nranks`` ranks on ``nodes``
    nodes of ``hw``; ``algo`` / ``proto``: ``NCCL_ALGO`` / ``NCCL_PROTO`` strings ("" =
    NCCL's defaults); ``min_channels`` / ``max_channels``: ``NCCL_MIN_NCHANNELS`` /
    ``NCCL_MAX_NCHANNELS`` (0 = unset); ``nvls``: ``NCCL_NVLS_ENABLE`` (False: off);
    ``collnet``: CollNet on (``NCCL_COLLNET_ENABLE=1`` on a fabric whose switches run
    SHARP): NVLS across nodes (NVLS+SHARP), CollNet Direct and CollNet Chain enter the
    AllReduce choice, NVLS+SHARP and CollNet Direct the AllGather and ReduceScatter one;
    ``nvswitch``: the node's GPUs share an NVSwitch (CollNet Direct needs one; false with
    ``-p nvlink=false`` or one GPU per node); ``graphs``: the search results
    (:func:`search` by default)."""

    hw: Hardware
    nranks: int
    nodes: int
    algo: str = ""
    proto: str = ""
    min_channels: int = 0
    max_channels: int = 0
    nvls: bool = True
    graphs: Graphs | None = None
    collnet: bool = False
    nvswitch: bool = True
    _enabled_algo: dict[str, dict[str, int]] = field(init=False, repr=False)
    _enabled_proto: dict[str, dict[str, int]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.nranks < 2 or self.nodes < 1 or self.nranks % self.nodes:
            raise TunerError(f"{self.nranks} ranks on {self.nodes} nodes: need >= 2 ranks, "
                             f"the same number on every node")
        if self.graphs is None:
            self.graphs = search(self.hw, self.nodes, self.nranks // self.nodes)
        a_def = {c: dict.fromkeys(ALGOS, 1) for c in _COLLS}
        p_def = {c: {"ll": 1, "ll128": 2, "simple": 1} for c in _COLLS}
        self._enabled_algo = parse_nccl_list(self.algo, ALGOS, ALGO_NAMES, a_def) \
            if self.algo else a_def
        self._enabled_proto = parse_nccl_list(self.proto, PROTOS, PROTO_NAMES, p_def) \
            if self.proto else p_def

    @property
    def ppn(self) -> int:
        return self.nranks // self.nodes

    @property
    def channels(self) -> int:
        """The runtime channels (``comm->nChannels``) after NCCL_MIN/MAX_NCHANNELS."""
        g = self.graphs
        assert g is not None
        n = g.runtime_channels
        if self.max_channels:
            n = min(n, self.max_channels)
        return max(n, self.min_channels or 1)

    def algo_channels(self, algo: str) -> int:
        """The channels ``algo`` runs on before any reduction for small calls: NVLS and the
        NVLS tree their own (``nvlsChannels``; NVLS across nodes at most the communicator's:
        ``getAlgoInfo``, ``src/enqueue.cc``), the others the communicator's
        (:attr:`channels`)."""
        if algo in ("nvls", "nvls_tree"):
            g = self.graphs
            assert g is not None
            if algo == "nvls" and self.nodes > 1:
                return min(g.nvls_channels, self.channels)
            return g.nvls_channels
        return self.channels

    def nvls_max_chunk_bytes(self) -> int:
        """The largest NVLS chunk of a call (``calcCollChunking``, ``src/enqueue.cc``):
        ``nvlsChunkSize``, but 32 KiB across nodes when NCCL's NVLS AllReduce algorithm
        bandwidth is below 150 GB/s (e.g. H100 with 200 Gb/s NICs)."""
        g = self.graphs
        assert g is not None
        chunk = g.nvls_chunk_bytes
        if self.nodes > 1 and g.nvls is not None and g.nvls.channels >= 2 \
                and self.algo_bw_GBps("allreduce", "nvls", "simple") \
                < NVLS_SMALL_CHUNK_BELOW_GB_PER_S:
            chunk = min(chunk, NVLS_SMALL_CHUNK_BYTES)
        return chunk

    def _available(self, coll: str, algo: str, proto: str) -> bool:
        if coll in ("broadcast", "reduce"):
            return algo == "ring"
        if coll in ("allgather", "reducescatter"):
            if algo not in ("ring", "pat", "nvls", "collnet_direct"):
                return False
        if algo in ("nvls", "nvls_tree", "pat") and proto != "simple":
            return False
        if algo.startswith("collnet"):
            # CollNet: NCCL_COLLNET_ENABLE and SHARP, from 2 nodes
            # (NCCL_COLLNET_NODE_THRESHOLD), at most 8 GPUs a node (NCCL_MAX_DIRECT_ARITY
            # + 1), Simple only (AllGather and ReduceScatter: Direct only, filtered above);
            # Direct needs an NVSwitch (src/graph/tuning.cc, src/enqueue.cc)
            if not (self.collnet and self.nodes >= COLLNET_NODE_THRESHOLD and self.ppn <= 8
                    and proto == "simple"):
                return False
            if algo == "collnet_direct" and not self.nvswitch:
                return False
        if algo == "pat":
            return False  # NCCL's auto mode needs 1 GPU per node and a host net device
        if algo in ("nvls", "nvls_tree"):
            g = self.graphs
            if not self.nvls or g is None or g.nvls is None or g.nvls.channels < 2:
                return False
            if algo == "nvls_tree" and self.nodes == 1:
                return False
            if algo == "nvls" and self.nodes > 1 and not (
                    self.collnet and self.nodes >= COLLNET_NODE_THRESHOLD):
                return False  # NVLS across nodes needs CollNet (NVLS + SHARP)
            if coll != "allreduce" and self.nodes > 1 and not self.collnet:
                return False  # NVLS AllGather/ReduceScatter across nodes is NVLS+SHARP
        if proto == "ll128" and self._enabled_proto[coll]["ll128"] == 2:
            if self.hw.sm < 70:
                return False
        return bool(self._enabled_algo[coll][algo]) and bool(self._enabled_proto[coll][proto])

    def bus_bw_GBps(self, coll: str, algo: str, proto: str) -> float:
        """NCCL's modelled bus bandwidth (GB/s) of ``algo``/``proto`` for ``coll``: the
        graph's channels x bandwidth with NCCL's caps and factors, before its conversion
        to an algorithm bandwidth."""
        g = self.graphs
        assert g is not None
        graph = g.nvls if algo in ("nvls", "nvls_tree") else (g.tree if algo == "tree"
                                                               else g.ring)
        assert graph is not None
        k = _ARCH_INDEX[self.hw.arch]
        i2 = self.nodes - 1 if self.nodes <= 2 else 2
        i1 = k if self.nodes == 1 else (1 if self.hw.cpu == "amd" else 0)
        nch = graph.channels
        if algo == "collnet_direct":  # a channel per NIC (head), at most 8, at the ring's
            nch = min(nch, self.ppn, 8)  # speed [A]
        bw = graph.bw_intra_GBps if self.nodes <= 2 or algo.startswith("collnet") \
            else graph.bw_inter_GBps
        if algo in ("nvls", "nvls_tree"):
            intra = graph.bw_intra_GBps * NVLS_EFFICIENCY[k] * (nch - 1) / nch
            intra *= 2 if coll == "allreduce" else (self.ppn - 1) / self.ppn
            inter = graph.bw_inter_GBps * (2 if self.nodes <= 2 and algo == "nvls_tree"
                                           else 1)
            bw = min(intra, inter)
            if algo == "nvls_tree":
                bw = min(bw, PER_CH_MAX_NVLS_TREE_BWS[k][i2])
        bus = nch * bw
        if algo == "ring" and proto == "ll":
            bus = min(LL_MAX_BWS[i1][i2], 0.5 * bus)
        if algo == "ring" and proto == "ll128":
            bus = min(0.92 * bus, nch * PER_CH_MAX_RING_LL128_BWS[k][i2])
        if algo == "tree" and coll == "allreduce":
            bus = min(0.92 * bus, nch * PER_CH_MAX_TREE_BWS[k][i2])
        if algo == "tree" and proto == "ll":
            bus = min(bus / 3.8, LL_MAX_BWS[i1][i2])
        if algo == "tree" and proto == "ll128":
            bus = min(bus * (7 / 9 if self.nodes == 1 else 120 / 128),
                      nch * PER_CH_MAX_TREE_LL128_BWS[k][i2])
        if algo == "pat":
            bus *= 0.75
        if algo == "collnet_direct" and coll in ("allgather", "reducescatter"):
            bus = self.ppn * min(graph.bw_intra_GBps, graph.bw_inter_GBps * 0.9)
        elif algo == "collnet_direct":  # "all GPUs need a local NIC to work at full speed"
            factor = self.ppn / nch
            factor -= (factor - 1) / 2
            bus /= factor
            if self.hw.sm >= 90:
                bus *= 0.85
        return bus

    def algo_bw_GBps(self, coll: str, algo: str, proto: str) -> float:
        """NCCL's algorithm bandwidth (``comm->bandwidths``: busBw converted, GB/s)."""
        bus = self.bus_bw_GBps(coll, algo, proto)
        # busBw -> algBw
        if coll in ("allgather", "reducescatter") and algo != "ring":
            return bus
        return bus * (self.nranks / self._nsteps(coll) if algo in ("ring", "nvls",
                                                                   "nvls_tree") else 0.5)

    def _nsteps(self, coll: str) -> int:
        n = self.nranks
        return 2 * (n - 1) if coll == "allreduce" else (n - 1 if coll in (
            "allgather", "reducescatter") else n)

    def latency_us(self, coll: str, algo: str, proto: str) -> float:
        """NCCL's latency of one call (µs, before the ring plateau factor)."""
        p = PROTOS.index(proto)
        lat = BASE_LAT_US[algo][p]
        intra = HW_LAT_US["nvlink"][algo][p]
        inter = (HW_LAT_US["net"]["tree"][p] if self.ppn == 1 else HW_LAT_US["net"][algo][p])
        m = self.nodes
        if algo == "ring":
            over = NET_OVERHEAD_US[self.hw.cpu] * (3 if proto == "simple" else 1) if m > 1 \
                else 0.0
            steps = self._nsteps(coll)
            inter_steps = 0 if m == 1 else (2 * (m - 1) if coll == "allreduce" else m - 1)
            lat += (steps - inter_steps) * max(intra, over) + inter_steps * inter
        elif algo == "tree":
            lat += 2 * ((self.ppn - 1) * intra + _log2i(m) * inter)
        elif algo == "collnet_direct":  # 0.4 us of arity serialisation per local peer
            lat += 2 * (min(1, self.ppn - 1) * intra + (self.ppn - 1) * 0.4) + inter
        elif algo == "collnet_chain":
            lat += 2 * (self.ppn - 1) * intra + inter
        elif algo == "nvls":
            lat = intra + (inter if m > 1 else 0)
        elif algo == "nvls_tree":
            lat += intra + 2 * _log2i(m) * inter
        return lat

    def time_us(self, coll: str, algo: str, proto: str, nbytes: int) -> float | None:
        """``ncclTopoGetAlgoTime``: NCCL's time (µs) of one call of ``nbytes`` (nccl-tests'
        size), None when the entry is disabled or unavailable."""
        if not self._available(coll, algo, proto):
            return None
        bw = self.algo_bw_GBps(coll, algo, proto)
        if bw <= 0:
            return None
        lat = self.latency_us(coll, algo, proto)
        log_size = _log2i(nbytes >> 6)
        if algo == "tree" and coll == "allreduce" and 0 <= log_size < 23:
            bw *= TREE_CORRECTION[proto][log_size]
        if (algo == "ring" and proto == "simple" and self.nodes > 1 and coll == "allreduce"
                and nbytes // (self.channels * self.nranks) >= 64):
            lat *= 1.9 if self.hw.sm < 80 else 1.4
        return lat + nbytes / (1000 * bw)

    def choose(self, coll: str, nbytes: int, runnable: tuple[str, ...] = ALGOS) -> Choice:
        """The entry of least time (ties to the earlier), among ``runnable`` algorithms,
        and its channels and threads (``topoGetAlgoInfo``).  ``nccl_algo``/``nccl_proto``
        of the result: what NCCL itself would pick (over every algorithm)."""
        coll = str(coll)
        table = {(a, p): self.time_us(coll, a, p, nbytes) for a in ALGOS for p in PROTOS}

        def best(algos: tuple[str, ...]) -> tuple[str, str, float] | None:
            out = None
            for a in ALGOS:
                if a not in algos:
                    continue
                for p in PROTOS:
                    t = table[(a, p)]
                    if t is not None and (out is None or t < out[2]):
                        out = (a, p, t)
            return out

        nccl = best(ALGOS)
        mine = best(runnable)
        if mine is None:
            raise TunerError(f"{_COLL_NAMES.get(coll, coll)}: no algorithm and protocol left "
                             f"(NCCL_ALGO={self.algo or '-'}, NCCL_PROTO={self.proto or '-'}; "
                             f"the simulator runs {', '.join(ALGO_NAMES[a] for a in runnable)})")
        a, p, t = mine
        nc = self.algo_channels(a)
        nt = MAX_THREADS[p]
        thr = THREAD_THRESHOLD[p] * (self.nranks if (a == "ring" and p == "ll") else 1)
        if a.startswith("collnet"):  # 640 threads, 512 bytes a thread
            nt, thr = NCCL_MAX_NTHREADS, COLLNET_THREAD_THRESHOLD
        if a == "collnet_direct":
            nc = collnet_direct_channels(nbytes, nc, nt, self.ppn)
        elif a not in ("nvls", "nvls_tree"):
            while nbytes < nc * nt * thr and nc >= 2:
                nc -= 1
            while nbytes < nc * nt * thr and nt % 128 == 0:
                nt //= 2
        return Choice(a, p, nc, nt, t, table, *(nccl[:2] if nccl else ("", "")))


def _log2i(n: int) -> int:
    return n.bit_length() - 1 if n > 0 else -1


@dataclass(frozen=True)
class HostSide:
    """NCCL's host side as the simulator applies it to a collective's steps (module
    docstring): ``launch_ps`` once when the call starts (``baseLat``); per transfer, when its
    data are ready, ``step_ps(crosses_nodes)`` (``hwLat`` of the network or NVLink), then
    its sending GPU channel's time for its bytes at ``channel_Bps`` (data bytes per second
    one rank's channel moves: NCCL's modelled bus bandwidth of the algorithm and protocol
    over the runtime channels its graph gives; each rank's channel handles its transfers one
    at a time; 0: no limit).  How the copy meets the transfer (a whole step before a network
    send; an NVLink transfer received no sooner than its copy ends with Simple, streaming
    with LL and LL128) is :class:`sim.workloads.collective.CollectiveJob`'s."""

    launch_ps: int
    intra_ps: int
    inter_ps: int
    channel_Bps: int = 0
    #: the receiver's channel copies each NVLink transfer out too (NCCL's point-to-point
    #: sends without registered buffers: the sender copies into the peer's FIFO, the
    #: receiver out of it), at the same rate
    recv_copy: bool = False

    def step_ps(self, crosses_nodes: bool) -> int:
        return self.inter_ps if crosses_nodes else self.intra_ps

    def busy_ps(self, nbytes: int) -> int:
        """How long one rank's channel takes to move ``nbytes`` of data."""
        return -(-nbytes * 10**12 // self.channel_Bps) if self.channel_Bps else 0

    @classmethod
    def of(cls, tuner: Tuner, coll: str, algo: str, proto: str) -> HostSide:
        """What NCCL's model charges per step of ``algo``/``proto`` for ``coll`` on the
        tuner's communicator, and its bus bandwidth over the runtime channels."""
        p = PROTOS.index(proto)
        intra = HW_LAT_US["nvlink"][algo][p]
        inter = HW_LAT_US["net"]["tree"][p] if tuner.ppn == 1 else HW_LAT_US["net"][algo][p]
        if tuner.nodes > 1 and algo == "ring":
            intra = max(intra, NET_OVERHEAD_US[tuner.hw.cpu] * (3 if proto == "simple"
                                                                 else 1))
        bus_GBps = tuner.bus_bw_GBps(coll, algo, proto)
        g = tuner.graphs
        assert g is not None
        # per channel: NCCL's model's busBw over the channels it assumes (its graph's, run
        # twice: the runtime channels before NCCL_MIN/MAX_NCHANNELS), so that more channels
        # (NCCL_MIN_NCHANNELS) move more, as more CTAs do
        per = g.nvls_channels if algo in ("nvls", "nvls_tree") else g.runtime_channels
        if algo in ("nvls", "nvls_tree"):
            # NVLS: a GPU sends (ppn + 1) / ppn of the buffer (its copy of every chunk to
            # the switch, then its heads' results once), where busBw counts 2 (n - 1) / n:
            # the rate at which a channel's sends take NCCL's modelled time.  A chunk makes
            # four NVLink hops (in, sum out, store in, copies out): each a quarter of the
            # call's NVLink latency
            # NVLS+SHARP (across nodes): a head also writes its node's sum for the network
            # once, so (ppn + 2) / ppn; the network's step is charged on that send (the
            # SHARP switch's answer has none: sim.workloads.collective)
            n, ppn, m = tuner.nranks, tuner.ppn, tuner.nodes
            if coll == "allgather":  # NVLS+SHARP: its block to the network, its rail's
                bus_GBps *= (1 + m) / n  # window once into the NVSwitch
            elif coll == "reducescatter":  # its copy of every block into the NVSwitch, its
                bus_GBps *= (n + m) / n  # rail's node sums to the network
            else:
                sends = ppn + (2 if algo == "nvls" and m > 1 else 1)
                bus_GBps *= n * sends / (2 * (n - 1) * ppn)
            intra /= 4
        elif algo == "collnet_direct" and coll in ("allgather", "reducescatter"):
            # AllGather: its block to the network, its rail's window to the node's other
            # GPUs; ReduceScatter: its copy of the other rails' blocks to their heads, its
            # rail's node sums to the network; NCCL times the call at busBw
            n, ppn, m = tuner.nranks, tuner.ppn, tuner.nodes
            bus_GBps *= (1 + (ppn - 1) * m) / n if coll == "allgather" else 1
            intra += 0.4 * (ppn - 1)
        elif algo == "collnet_direct":
            # a GPU scatters (ppn - 1) / ppn of the buffer to the heads, sends its head's
            # share to the network and broadcasts the results, (2 ppn - 1) / ppn, where NCCL
            # times it at busBw / 2; NCCL's 0.4 us of arity serialisation per local peer on
            # each of the two NVLink hops
            ppn = tuner.ppn
            bus_GBps *= (2 * ppn - 1) / (2 * ppn)
            intra += 0.4 * (ppn - 1)
        elif algo == "collnet_chain":
            # the chain's GPUs send the buffer up and down it: twice its bytes, timed by NCCL
            # at busBw / 2
            pass
        rate = round(bus_GBps * 1e9 / per) if bus_GBps > 0 and per else 0
        return cls(_ps(BASE_LAT_US[algo][p]), _ps(intra), _ps(inter), rate)


def p2p_channels(tuner: Tuner) -> tuple[int, int]:
    """(channels, channels per peer) of NCCL's point-to-point sends on one node
    (``ncclTopoComputeP2pChannels``, ``src/graph/paths.cc``, and the per-operation channel
    count of ``src/enqueue.cc``, NCCL 2.30.7): ``p2pnChannels`` is the communicator's
    channels rounded up to a power of 2 (at most 64); an operation's channels per peer
    halve from there while they times the ranks exceed ``p2pnChannels``."""
    nc = 1 << max(0, (min(tuner.channels, MAXCHANNELS) - 1).bit_length())
    per = nc
    while per > 1 and per * tuner.nranks > nc:
        per //= 2
    return nc, per


def p2p_host_side(tuner: Tuner, active_channels: int) -> HostSide:
    """NCCL's host side for the point-to-point sends of one node (AllToAll, SendRecv): the
    launch (``baseLat`` of Ring Simple), each chunk's NVLink step (``hwLat`` of Ring Simple
    on NVLink), and two SM copies per byte, the sender's into the peer's FIFO and the
    receiver's out of it, each at NCCL's NVLink bandwidth of a GPU (links x
    ``SM*_NVLINK_BW``, ``src/graph/topo.h``: what an SM copy drives over NVLink) shared by
    the ``active_channels`` a rank copies on.  NCCL has no cost model of its own for
    point-to-point: these are its collective constants applied to its p2p data path [A]."""
    p = PROTOS.index("simple")
    rate = round(tuner.hw.nvlink_GBps * 1e9 / max(1, active_channels))
    return HostSide(_ps(BASE_LAT_US["ring"][p]), _ps(HW_LAT_US["nvlink"]["ring"][p]),
                    _ps(HW_LAT_US["net"]["ring"][p]), rate, recv_copy=True)


def _ps(us: float) -> int:
    return round(us * 1_000_000)


#: The NCCL environment variables the model takes (:func:`from_environment`).
NCCL_VARIABLES = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
                  "NCCL_NVLS_ENABLE", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_COLLNET_ENABLE",
                  "NCCL_CROSS_NIC")


def environment_notes(values: Mapping[str, Any], sharp: bool = False) -> list[str]:
    """What the model does not follow of :func:`from_environment`'s ``values``, one line
    each: CollNet (``NCCL_COLLNET_ENABLE=1``: with ``sharp``, a fabric whose switches run
    SHARP, AllReduce may run on them, as NVLS+SHARP, CollNet Direct or CollNet Chain;
    without, NCCL finds no SHARP and runs without CollNet, as the model does) and
    ``NCCL_CROSS_NIC=1`` (rings are NCCL's crossNic 0 search's: each leaves a node on the
    NIC it came in on, as with the default 2 on a rail-optimised node)."""
    out = []
    if values.get("collnet") and sharp:
        out.append("NCCL_COLLNET_ENABLE=1: AllReduce, AllGather and ReduceScatter across "
                   "nodes may run on the leaves' SHARP aggregators (NVLS+SHARP, CollNet "
                   "Direct, CollNet Chain)")
    elif values.get("collnet"):
        out.append("NCCL_COLLNET_ENABLE=1: no SHARP on this fabric (it is modelled on "
                   "--fabric rail or superpod -p fabric=ib), so NCCL runs without CollNet, "
                   "as here")
    if values.get("cross_nic") == 1:
        out.append("NCCL_CROSS_NIC=1: rings are modelled as crossNic 0 (each leaves a node "
                   "on the NIC it came in on)")
    return out


def from_environment(env: Mapping[str, str]) -> dict[str, Any]:
    """The NCCL environment variables the tuner and the schedule take, as keyword values:
    ``NCCL_ALGO``, ``NCCL_PROTO``, ``NCCL_MIN_NCHANNELS``, ``NCCL_MAX_NCHANNELS``,
    ``NCCL_NVLS_ENABLE``, ``NCCL_IB_QPS_PER_CONNECTION``, ``NCCL_COLLNET_ENABLE``,
    ``NCCL_CROSS_NIC`` (keys ``algo``, ``proto``, ``min_channels``, ``max_channels``,
    ``nvls``, ``qps``, ``collnet``, ``cross_nic``; the last two are only said back:
    :func:`environment_notes`); a bad value is a TunerError naming the variable."""
    out: dict[str, Any] = {}
    for var, key in (("NCCL_ALGO", "algo"), ("NCCL_PROTO", "proto")):
        if env.get(var):
            out[key] = env[var]
    for var, key, lo, hi in (("NCCL_MIN_NCHANNELS", "min_channels", 0, MAXCHANNELS),
                             ("NCCL_MAX_NCHANNELS", "max_channels", 1, MAXCHANNELS),
                             ("NCCL_IB_QPS_PER_CONNECTION", "qps", 1, 128),
                             ("NCCL_NVLS_ENABLE", "nvls", 0, 2),
                             ("NCCL_COLLNET_ENABLE", "collnet", 0, 1),
                             ("NCCL_CROSS_NIC", "cross_nic", 0, 2)):
        v = env.get(var)
        if v is None or v == "":
            continue
        try:
            n = int(v)
        except ValueError:
            raise TunerError(f"{var}={v!r}: expected an integer") from None
        if not lo <= n <= hi:
            raise TunerError(f"{var}={v}: expected {lo}..{hi}")
        out[key] = bool(n) if key in ("nvls", "collnet") else n
    return out

"""How one size of a collective runs (sans engine): NCCL's tuner for the communicator, its
pick, the schedule and NCCL's host side (:func:`plan_size`), shared by ``lossless
collective`` (:func:`sim.scenarios.collective.run_size`) and a fabric file's
``[[collective]]`` entries (:mod:`sim.scenarios.description`), so that both run the same
thing for the same call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

__all__ = ["COLLNET_ALGOS", "SizePlan", "host_side_applies", "plan_size", "tune_size"]

#: The algorithms that run on SHARP's aggregators across nodes (NCCL's CollNet): NVLS (then
#: NVLS+SHARP), CollNet Direct and CollNet Chain.
COLLNET_ALGOS = ("nvls", "collnet_direct", "collnet_chain")


def _tuner(params: Mapping[str, Any], nranks: int, nodes: int,
           nccl: Mapping[str, Any] | None, channels: int | None = None) -> Any:
    """NCCL's tuner for this communicator (:class:`sim.workloads.tuner.Tuner`): the node
    ``params["hw"]`` names, with the fabric's NIC rate (``link_gbps``) as NCCL would detect
    it."""
    import dataclasses

    from sim.workloads.tuner import Tuner, node_hardware

    n = dict(nccl or {})
    lo, hi = n.get("min_channels", 0), n.get("max_channels", 0)
    if channels:
        lo = hi = channels
    hw = node_hardware(str(params.get("hw", "h100-cx7")))
    if params.get("link_gbps") and params["link_gbps"] != hw.nic_gbps:
        hw = dataclasses.replace(hw, nic_gbps=float(params["link_gbps"]))
    # NVLS needs the node's GPUs on NVLink (an NVSwitch): not with -p nvlink=false or one
    # GPU per node
    nvlink = bool(params.get("nvlink", True)) and nranks // max(1, nodes) > 1
    return Tuner(hw, nranks, nodes, algo=n.get("algo", ""),
                 proto=n.get("proto", ""), min_channels=lo, max_channels=hi,
                 nvls=n.get("nvls", True) and nvlink, nvswitch=nvlink,
                 collnet=bool(n.get("collnet")) and bool(params.get("sharp")))


def host_side_applies(collective: str, nodes: int, gpus_per_node: int,
                      params: Mapping[str, Any]) -> bool:
    """Whether NCCL's host side is in the run: ``params["nccl_host"]``, for every
    collective but point-to-point sends (AllToAll, SendRecv), which have it on one node of
    several GPUs on NVLink only (:func:`sim.workloads.tuner.p2p_host_side`)."""
    if not params.get("nccl_host"):
        return False
    if collective not in ("alltoall", "sendrecv"):
        return True
    return nodes == 1 and gpus_per_node > 1 and bool(params["nvlink"])


def tune_size(collective: str, size_bytes: int, algorithm: str, protocol: str,
          channels: int | None, params: Mapping[str, Any], nranks: int, nodes: int,
          nccl: Mapping[str, Any] | None) -> tuple[Any, Any]:
    """(the tuner's choice, the tuner) with ``algorithm`` or ``protocol`` "auto", else
    (None, None).  A fixed algorithm or protocol restricts the choice to it."""
    if "auto" not in (algorithm, protocol) or collective in ("alltoall", "sendrecv"):
        return None, None
    from sim.workloads.tuner import RUNNABLE_ALGOS

    n = dict(nccl or {})
    if protocol != "auto":  # --proto: that protocol only, as NCCL_PROTO=<it>
        n["proto"] = protocol
    tuner = _tuner(params, nranks, nodes, n, channels)
    if collective == "allreduce":
        algos = RUNNABLE_ALGOS
    elif collective in ("allgather", "reducescatter"):  # and on SHARP across nodes
        algos = ("ring", "collnet_direct", *(("nvls",) if nodes > 1 else ()))
    else:
        algos = ("ring",)
    if algorithm != "auto":
        algos = (algorithm,)
    return tuner.choose(str(collective), size_bytes, algos), tuner


class SizePlan(NamedTuple):
    """What runs for one size (:func:`plan_size`): the schedule, the tuner's choice (None
    without the tuner), the algorithm and protocol that run, and NCCL's host side for the
    job (None: the network alone)."""

    schedule: Any
    tuned: Any
    algorithm: str
    protocol: str
    host: Any


def plan_size(collective: str, counts: Any, nodes: int, gpus_per_node: int,
              params: Mapping[str, Any], *, algorithm: str = "auto", protocol: str = "auto",
              channels: int | None = None, qps: int = 1, datatype: str = "float",
              root: int = 0, nccl: Mapping[str, Any] | None = None,
              aggregators: Sequence[int] = (), qp_base: int = 0x100,
              nodes_per_leaf: int = 0, loops: int = 0, build: bool = True) -> SizePlan:
    """The schedule and NCCL's host side of one call (``counts``:
    :func:`sim.workloads.nccl_tests.coll_counts`) of ``nodes`` nodes of ``gpus_per_node``
    GPUs, as :func:`run_size` (``lossless collective``) and a fabric file's
    ``[[collective]]`` run it: ``algorithm`` / ``protocol`` "auto" let NCCL's tuner pick
    them and the channels; ``params["nccl_host"]`` adds NCCL's host side; ``channels`` None
    is NCCL's channel count with the tuner or the host side, else one per NIC of a node
    (:func:`sim.workloads.nccl.default_channels`); NVLS across nodes runs NVLS+SHARP when
    the fabric has SHARP ``aggregators`` (``nodes_per_leaf``: nodes under one rail leaf
    when the rails span several, as in a SuperPOD; 0: one leaf per rail).
    ``loops`` (ring and tree): build the first ``loops - 1`` loops and the
    last loop of the call only, with everything else resolved for the whole call
    (:func:`sim.workloads.nccl.truncated_count`); ``build`` False: the schedule's
    parameters and loops without its transfers (those algorithms only).
    ``ScheduleError`` for what the schedule refuses, ``TunerError`` for NCCL settings that
    leave nothing to run."""
    from sim.workloads.nccl import default_channels, schedule, truncated_count

    nranks = nodes * gpus_per_node
    tuned, tuner = tune_size(collective, counts.size_bytes, algorithm, protocol, channels,
                             params, nranks, nodes, nccl)
    if tuned is not None:
        algorithm, protocol = tuned.algo, tuned.proto
        # NVLS on its own channels; the others on the communicator's, which the schedule
        # drops for small calls as getAlgoInfo does
        channels = tuner.algo_channels(algorithm)
    elif collective in ("alltoall", "sendrecv"):  # NCCL's p2p: no algorithm to tune; its
        # sends above NCCL_P2P_LL_THRESHOLD (16 KiB) are Simple
        algorithm = "ring" if algorithm == "auto" else algorithm
        protocol = "simple" if protocol == "auto" else protocol
    p2p = collective in ("alltoall", "sendrecv")
    host_side = host_side_applies(collective, nodes, gpus_per_node, params)
    if host_side and tuner is None:
        tuner = _tuner(params, nranks, nodes, nccl, channels)
    per_peer = 2  # NCCL_NCHANNELS_PER_NET_PEER, the schedule's default
    if host_side and p2p:
        from sim.workloads.tuner import p2p_channels

        nc, per_peer = p2p_channels(tuner)
        channels = channels or nc
    if not channels:
        if host_side:  # NCCL's channels (its NVLS channels for NVLS)
            channels = tuner.algo_channels(str(algorithm))
        else:
            channels = default_channels(nodes, gpus_per_node)
    nvls_kw: dict[str, Any] = {}
    if tuner is not None and tuner.graphs is not None:  # NCCL's NVLS chunks for the node
        nvls_kw = {"nvls_chunk_bytes": tuner.graphs.nvls_chunk_bytes,
                   "nvls_tree_max_chunk_bytes": tuner.graphs.nvls_tree_max_chunk_bytes}
    if algorithm in COLLNET_ALGOS and nodes > 1 and aggregators:  # CollNet on SHARP
        nvls_kw["sharp"] = True
        nvls_kw["sharp_nodes_per_leaf"] = nodes_per_leaf
        if algorithm == "nvls" and tuner is not None:
            nvls_kw["nvls_chunk_bytes"] = tuner.nvls_max_chunk_bytes()
    if params.get("graph") and str(algorithm) in ("ring", "tree") and not p2p:
        # the job's rings or trees, as NCCL_GRAPH_FILE has them
        from sim.fabric.nccl_xml import graph_rings, graph_tree_chains, read_nccl_graph

        path = str(params["graph"])
        graphs = read_nccl_graph(path)
        if str(algorithm) == "ring":
            nvls_kw["rings"] = graph_rings(graphs, nodes, gpus_per_node, channels,
                                           f"-p graph={path}")
        else:
            chains = graph_tree_chains(graphs, gpus_per_node, f"-p graph={path}")
            if chains:
                nvls_kw["tree_chains"] = chains
    kw = {"nchannels": channels, "algorithm": algorithm, "protocol": protocol, "root": root,
          "gpus_per_node": gpus_per_node, "qps_per_connection": qps,
          "p2p_channels_per_peer": per_peer, "qp_base": qp_base, **nvls_kw}
    count = counts.param_count
    if loops or not build:
        sch = schedule(collective, nranks, count, datatype, build=False, **kw)
        if build:
            sch = schedule(collective, nranks, truncated_count(sch, loops), datatype,
                           full_count=count, **kw)
    else:
        sch = schedule(collective, nranks, count, datatype, **kw)
    host = None
    if host_side and p2p:
        from sim.workloads.tuner import p2p_host_side

        rounds = nranks - 1 if collective == "alltoall" else 1
        host = p2p_host_side(tuner, min(sch.nchannels, rounds * per_peer))
    elif host_side:
        from sim.workloads.tuner import HostSide

        host = HostSide.of(tuner, str(collective), str(algorithm), str(protocol))
    return SizePlan(sch, tuned, str(algorithm), str(protocol), host)

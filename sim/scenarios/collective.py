"""Collectives on a generated fabric, one size at a time: the library behind ``lossless
collective`` (docs/reference/collective.md; the model: docs/explanation/collectives.md).

* :func:`collective_params`: the ``-p`` parameters (the scenarios' fabric-wide ones with
  collective defaults, and the shape of each kind of fabric);
* :func:`build_fabric`: the fabric of a kind (``rail``, ``star``, ``fattree``, ``superpod``)
  for resolved parameters;
* :func:`run_size`: one size: a fresh fabric, NCCL's schedule for nccl-tests' count, warm-up
  and timed iterations back to back (:func:`sim.workloads.collective.run_schedule`), then the
  in-place iterations on the same fabric, nccl-tests' figures and the fabric's counters.

```python
from sim.scenarios.base import resolve_params
from sim.scenarios.collective import collective_params, run_size
p = resolve_params(collective_params(), {"nodes": 2, "gpus_per_node": 4})
row = run_size("allreduce", 16 << 20, "rail", p)
row["busbw_GB_per_s"], row["counters"]["pfc_pauses"]
```
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sim.engine import raise_gc_thresholds
from sim.scenarios.collective_plan import (
    SizePlan,
    host_side_applies,
    plan_size,
    tune_size,
)
from sim.scenarios.common import collective_params

if TYPE_CHECKING:
    from sim.fabric.fattree import FatTree, SuperPod
    from sim.fabric.rail import RailFabric

__all__ = ["AUTO_FLOW_RANK_BYTES", "FABRICS", "FABRIC_KEYS", "FILE_KEYS", "FileFabric",
           "SizePlan", "build_fabric", "plan_size",
           "check_algorithm", "check_fabric_keys", "collective_params", "fabric_file",
           "host_side_applies", "is_fabric_file", "run_size", "split_file_params",
           "transfer_time_us", "tune_size"]

FABRICS = ("rail", "star", "fattree", "superpod", "nvl72")
#: ``--fidelity auto``: flow fidelity from this product of ranks and size (bytes) up: 16 GiB
#: of rank-bytes, about a minute of packets on a 2-core machine (a SuperPOD of 1 SU, 248
#: ranks x 64 MiB: 67 CPU s at packet fidelity, 35 at flow) [A: chosen, not fitted]
AUTO_FLOW_RANK_BYTES = 16 << 30
#: the loops of the first try of a call by its steady loops, doubled until the loops repeat
STEADY_FIRST_LOOPS = 12
#: Flow fidelity: a ring call of this many loops or more runs cut to a few of them until they
#: repeat one period apart, and adds the period of each loop not run
#: (:mod:`sim.workloads.steady`); ``steady=False`` (``--every-loop``) runs them all.  Below,
#: the first try would cost about as much as the whole call.
STEADY_MIN_LOOPS = 2 * STEADY_FIRST_LOOPS
#: Flow fidelity: a ring AllReduce, AllGather or ReduceScatter of this many sends or more
#: runs on the ring engine (:mod:`sim.workloads.ring_engine`: no transfer objects), a tree
#: or NVLS tree AllReduce of this many transfers on the chunk engine
#: (:mod:`sim.workloads.chunk_engine`); below, the job drives its transfers (``engine`` of
#: :func:`run_size`: "ring", "chunk" or "job" always)
RING_ENGINE_SENDS = 500_000
#: --engine's choices (run_size)
ENGINES = ("auto", "ring", "chunk", "job")

#: ``-p`` keys that shape one kind of fabric: given with another ``--fabric`` they are a
#: mistake (a fat-tree's size is ``k``, a SuperPOD's ``sus``; neither has ``nodes``).
FABRIC_KEYS = {
    "rail": {"nodes", "gpus_per_node", "spines"},
    "star": {"nodes", "gpus_per_node"},
    "fattree": {"k", "oversubscription", "gpus_per_node"},
    "superpod": {"sus", "superpod_nodes"},
    "nvl72": {"nodes", "gpus_per_node", "rails", "radix"},
}
_SHAPE_KEYS = set().union(*FABRIC_KEYS.values())


def check_fabric_keys(kind: str, given: Mapping[str, Any]) -> None:
    """Refuse ``-p`` keys that shape another kind of fabric (``ValueError``)."""
    stray = sorted((set(given) & _SHAPE_KEYS) - FABRIC_KEYS[kind])
    if stray:
        raise ValueError(f"-p {stray[0]}: does not apply to --fabric {kind} (its shape: "
                         f"{', '.join(sorted(FABRIC_KEYS[kind]))})")


#: ``-p`` keys (no dot) that still apply with ``--fabric FILE.toml``: the node model and the
#: run's bound; the fabric's own settings are the file's (``-p TABLE.KEY=VALUE``).
#: ``gpus_per_node`` groups the file's ranks into nodes (:func:`fabric_file`).
FILE_KEYS = ("nvlink", "nvlink_gbps", "nvlink_latency_ns", "pxn", "limit_ms", "failover",
             "detect_us", "converge_us", "gpus_per_node", "hw", "nccl_host")
#: Topology kinds whose nodes the file defines itself (rail: ``[topology] gpus_per_node``,
#: superpod: 8 GPUs per DGX).
_OWN_NODES = ("rail", "superpod")
#: The sections of a fabric file that are traffic: left out when the file is only the
#: fabric of ``lossless collective``.
_TRAFFIC = ("traffic", "flows", "pcap", "collective")


@dataclass(frozen=True, slots=True)
class FileFabric:
    """The fabric of a fabric file (``--fabric FILE.toml``): ``fabric``, ``ranks`` (hosts in
    rank order), ``nodes``, ``gpus_per_node`` and ``packet_bytes`` (the file's
    ``[switch] mtu_bytes``), as the generated fabrics have them; ``settings``: the file's
    values of the collective parameters that describe the fabric (``link_gbps``, ``pfc``,
    ``cc``, ``pcie_gen``, ``pcie_lanes``, ``pcie_mps_bytes``, ``packet_bytes``), which
    replace the defaults in the results document."""

    fabric: Any
    ranks: tuple[int, ...]
    nodes: int
    gpus_per_node: int
    packet_bytes: int
    settings: dict[str, Any]
    #: the file's straggler ``[[faults]]`` (label, resolved entry): on the command's
    #: collective (sim.scenarios.common.straggler_delays)
    stragglers: tuple[Any, ...] = ()
    #: ``[topology] sharp``: the SHARP aggregators and the nodes under one rail leaf
    aggregators: tuple[int, ...] = ()
    nodes_per_leaf: int = 0


def is_fabric_file(kind: str) -> bool:
    """``--fabric`` names a file (``*.toml``, or ibnetdiscover's output, recognised by its
    content) rather than a generated kind."""
    return kind not in FABRICS and (kind.endswith(".toml") or _is_ibnetdiscover(kind))


def _is_ibnetdiscover(path: str) -> bool:
    from sim.fabric.ibnetdiscover import is_ibnetdiscover

    return os.path.isfile(path) and is_ibnetdiscover(path)


def _ibnetdiscover_doc(path: str, overrides: dict[str, str]) -> dict[str, Any]:
    """The fabric file an ibnetdiscover file stands for: ``[topology] kind =
    "ibnetdiscover"``, an InfiniBand fabric (``[links] fabric = "ib"``) whose link_gbps is
    its most common link's rate; ``-p topology.lft=FILE`` is read from where the command
    runs."""
    from collections import Counter

    from sim.fabric.ibnetdiscover import read_ibnetdiscover

    rates = Counter(ln.rate_bps for ln in read_ibnetdiscover(path).links if ln.rate_bps)
    gbps_ = rates.most_common(1)[0][0] / 1e9 if rates else 100.0
    if overrides.get("topology.lft"):
        overrides["topology.lft"] = os.path.abspath(str(overrides["topology.lft"]))
    return {"topology": {"kind": "ibnetdiscover", "file": os.path.abspath(path)},
            "links": {"fabric": "ib", "link_gbps": gbps_}}


def split_file_params(given: Mapping[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """``-p`` values with ``--fabric FILE.toml``: (the file's ``TABLE.KEY`` overrides, the
    collective's own :data:`FILE_KEYS`); another key is a ``ValueError`` saying where it
    goes.  ``gpus_per_node`` goes with the overrides (:func:`fabric_file` groups the file's
    ranks into nodes of that many GPUs)."""
    over, own = {}, {}
    if "gpus_per_node" in given:  # read by fabric_file, with the file's ranks
        over["gpus_per_node"] = given["gpus_per_node"]
    for k, v in given.items():
        if k == "gpus_per_node":
            continue
        if k.partition(".")[0] in _TRAFFIC:
            raise ValueError(f"-p {k}: with --fabric FILE.toml the file's traffic "
                             f"({', '.join(_TRAFFIC)}) is left out; the collective is this "
                             f"command's (its options: --qps, --channels, -b ...)")
        if "." in k or k in ("seed", "duration_ms"):
            over[k] = v
        elif k in FILE_KEYS:
            own[k] = v
        else:
            raise ValueError(f"-p {k}: with --fabric FILE.toml the fabric's settings are the "
                             f"file's: give them as TABLE.KEY (e.g. -p links.link_gbps=800, "
                             f"-p switch.pfc=false); plain keys: {', '.join(FILE_KEYS)}")
    return over, own


def fabric_file(path: str, overrides: Mapping[str, str] | None = None, *,
                tracer: Any = None, faults: bool = True) -> FileFabric:
    """Build the fabric of fabric file ``path`` with ``-p TABLE.KEY`` ``overrides``, without
    its traffic (``[traffic]``, ``[[flows]]``, ``[[pcap]]``, ``[[collective]]``):
    :class:`sim.scenarios.ScenarioError` naming the file for a bad file.  ``tracer`` reads
    the fabric's events; ``faults=False`` leaves the file's ``[[faults]]`` out (the
    fault-free run of a size).  ``overrides["gpus_per_node"]`` (``-p gpus_per_node``)
    groups the ranks (the hosts in the file's group order, e.g. leaf by leaf) into nodes of
    that many GPUs: NVLink inside, PXN between; it must divide the ranks, and a rail or
    superpod file's own nodes are refused another size.  Without it: the topology's nodes,
    else one GPU per node."""
    import copy

    from sim.scenarios.base import ScenarioError, resolve_params
    from sim.scenarios.description import apply_overrides, build, is_description
    from sim.scenarios.loader import read_toml

    overrides = dict(overrides or {})
    given_g = overrides.pop("gpus_per_node", None)
    if given_g is not None:
        try:
            given_g = resolve_params(collective_params(),
                                     {"gpus_per_node": given_g})["gpus_per_node"]
        except ScenarioError as e:
            raise ScenarioError(f"-p: {e}") from None
    data = (_ibnetdiscover_doc(path, overrides) if not path.endswith(".toml")
            and _is_ibnetdiscover(path) else read_toml(path))
    if not is_description(data):
        raise ScenarioError(f"{path}: --fabric needs a fabric file (a [topology] and its "
                            f"settings), not a reference to a built-in scenario")
    doc = copy.deepcopy(data)
    for k in (*_TRAFFIC, *(() if faults else ("faults",))):
        doc.pop(k, None)
    apply_overrides(doc, dict(overrides or {}), path)
    sc = build(doc, path, os.path.dirname(os.path.abspath(path)), need_traffic=False)
    if tracer is not None:
        sc.tracer_slot.target = tracer
    ranks, g = sc.info["ranks"], sc.info["gpus_per_node"]
    if len(ranks) < 2:
        raise ScenarioError(f"{path}: a collective needs at least 2 hosts, the file has "
                            f"{len(ranks)}")
    kind = sc.params["topology"]["kind"]
    if given_g is not None and kind in _OWN_NODES and given_g != g:
        raise ScenarioError(f"-p gpus_per_node: {given_g}, but {path}'s {kind} topology has "
                            f"nodes of {g} GPUs (a rail's: -p topology.gpus_per_node)")
    if given_g is not None:
        if len(ranks) % given_g:
            raise ScenarioError(f"-p gpus_per_node: {given_g} does not divide the "
                                f"{len(ranks)} hosts of {path}")
        g = given_g
    if len(ranks) % g:
        g = 1
    lk, sw, h = sc.params["links"], sc.params["switch"], sc.params["hosts"]
    settings = {"link_gbps": lk["link_gbps"], "pfc": sw["pfc"], "cc": h["cc"],
                "pcie_gen": h["pcie_gen"], "pcie_lanes": h["pcie_lanes"],
                "pcie_mps_bytes": h["pcie_mps_bytes"], "packet_bytes": sw["mtu_bytes"]}
    aggs = tuple(sc.info.get("aggregators", ()))
    if aggs and given_g not in (None, sc.info["gpus_per_node"]):
        aggs = ()  # another grouping of the ranks: not the nodes SHARP's rails are built on
    if aggs:
        settings["sharp"] = True
    return FileFabric(sc.fabric, tuple(ranks), len(ranks) // g, g, sc.info["mtu_bytes"],
                      settings,
                      stragglers=sc.info.get("stragglers", ()), aggregators=aggs,
                      nodes_per_leaf=sc.info.get("nodes_per_leaf", 0))


def _ib_counters(fab: Any) -> dict[str, int]:
    """``credit_stall_ps`` summed over the fabric's IB ports and ``ooo_packets`` (frames
    received out of order, all hosts) ({} without IB links, so RoCE results keep their
    keys)."""
    links = [p.ib for n in fab.nodes.values() for p in n.ports.values()
             if getattr(p, "ib", None) is not None]
    if not links:
        return {}
    ooo = sum(sum(getattr(n, "rx_ooo", {}).values()) for n in fab.nodes.values())
    return {"credit_stall_ps": sum(ib.stall_ps() for ib in links), "ooo_packets": ooo}


def _rc_counters(fab: Any) -> dict[str, int]:
    """RC transport counters summed over the hosts ({} unless ``reliable``: other results
    keep their keys): :meth:`sim.nic.host.Host.rc_stats` of every flow."""
    hosts = [n for n in fab.nodes.values() if getattr(n, "reliable", False)]
    if not hosts:
        return {}
    keys = ("retransmitted_frames", "retransmitted_bytes", "timeouts", "naks_sent",
            "duplicates", "out_of_sequence", "qp_error")
    out = dict.fromkeys(keys, 0)
    for h in hosts:
        for fid in h.rc_flows():
            for k, v in h.rc_stats(fid).items():
                if k in out:
                    out[k] += v
    out["qp_errors"] = out.pop("qp_error")
    return out


def build_fabric(kind: str, p: dict[str, Any], *, tracer: Any = None, faults: bool = True
                 ) -> RailFabric | FatTree | SuperPod | FileFabric:
    """The fabric of ``--fabric kind`` for resolved parameters ``p`` (a
    :class:`sim.fabric.rail.RailFabric`, :class:`sim.fabric.fattree.FatTree`,
    :class:`sim.fabric.fattree.SuperPod`, or for a ``*.toml`` path a :class:`FileFabric`
    built with ``p["file_overrides"]``; each has ``fabric``, ``ranks``, ``nodes`` and
    ``gpus_per_node``).  ``tracer`` (None: none) reads its events; ``faults=False``: a
    fabric file without its ``[[faults]]``."""
    if is_fabric_file(kind):
        return fabric_file(kind, p.get("file_overrides"), tracer=tracer, faults=faults)
    if kind not in FABRICS:  # the CLI's choices say so too; a library caller learns it here
        raise ValueError(f"fabric {kind!r}: one of {', '.join(FABRICS)}, or a .toml file")
    from sim.fabric.fattree import fat_tree, superpod
    from sim.fabric.rail import collective_star, rail_optimized
    from sim.scenarios.common import collective_packet, fabric_setup
    from sim.units import gbps

    if p.get("sharp") and kind not in ("rail", "superpod"):
        raise ValueError(f"-p sharp=true: SHARP is modelled on --fabric rail and superpod "
                         f"(rail leaves), not {kind}")
    if p.get("sharp") and p.get("fabric", "roce") != "ib":
        raise ValueError("-p sharp=true: SHARP is InfiniBand's (Quantum switches): add "
                         "-p fabric=ib")
    p = collective_packet(p)  # packet_bytes 0: the fabric's largest packet
    rate = gbps(p["link_gbps"])
    nranks = p["nodes"] * p["gpus_per_node"]
    prop_ps = round(p["prop_ns"] * 1000)

    made: list[Any] = []

    def setup(ports: int) -> dict[str, Any]:
        # the fabric choice (roce | ib) of every generated kind: sim.scenarios.common
        made.append(fabric_setup(p, ports, rate))
        fs = made[0]
        return {"ecn": fs.ecn, "mmu_config": fs.mmu, "host_kw": fs.host_kw,
                "switch_kw": fs.switch_kw, "link_kw": fs.link_kw,
                **({"tracer": tracer} if tracer is not None else {})}

    def done(rf: Any) -> Any:
        made[0].apply(rf.fabric)  # ib_routing, once the fabric exists
        return rf

    if kind == "fattree":
        k, o = p["k"], p["oversubscription"]
        return done(fat_tree(k, o, link_gbps=p["link_gbps"], prop_ps=prop_ps, seed=p["seed"],
                             ecmp=p["ecmp"], gpus_per_node=p["gpus_per_node"],
                             **setup(max(k, (1 + o) * k // 2))))
    if kind == "superpod":
        from sim.fabric.fattree import SU_SLOTS, SUPERPOD_LEAF_UPLINKS

        return done(superpod(p["sus"], nodes=p["superpod_nodes"] or None,
                             link_gbps=p["link_gbps"], prop_ps=prop_ps, seed=p["seed"],
                             ecmp=p["ecmp"], sharp=bool(p.get("sharp")),
                             **setup(SU_SLOTS + SUPERPOD_LEAF_UPLINKS
                                     + bool(p.get("sharp")))))
    if kind == "nvl72":  # p["nodes"] racks (NVLink domains), rails by place in a tray
        from sim.fabric.rail import scale_up_racks

        return done(scale_up_racks(p["nodes"], p["gpus_per_node"], rails=p["rails"],
                                   radix=p["radix"], link_gbps=p["link_gbps"],
                                   prop_ps=prop_ps, seed=p["seed"], ecmp=p["ecmp"],
                                   **setup(p["radix"])))
    if kind == "star":  # p["nodes"] nodes of p["gpus_per_node"] GPUs, one NIC each
        return done(collective_star(nranks, gpus_per_node=p["gpus_per_node"],
                                    link_gbps=p["link_gbps"], prop_ps=prop_ps,
                                    seed=p["seed"], **setup(nranks + 1)))
    g = p["gpus_per_node"]
    if g > 64:  # rail_optimized's spines have a port per rail, 64 at most
        raise ValueError(f"-p gpus_per_node={g}: a rail fabric has a leaf per GPU of a node "
                         f"and 64-port spines, so 64 at most; --fabric nvl72 puts racks of "
                         f"72 GPUs on 4 rails")
    spines = p["spines"] or max(1, -(-g // 2))
    sharp = bool(p.get("sharp"))
    return done(rail_optimized(p["nodes"], g, spines=spines, link_gbps=p["link_gbps"],
                               prop_ps=prop_ps, seed=p["seed"], ecmp=p["ecmp"], sharp=sharp,
                               **setup(max(p["nodes"] + spines + sharp, g))))


def _iterations(sch, rf, n: int, warmup: int, mtu: int, limit_ps: int, progress=None,
                before=None, job_kw=None, failed=None, moved=None, after=None):
    """``warmup`` then ``n`` timed iterations back to back: (times_ps, last run, error).
    ``progress(done)``: transfers received so far over these iterations; ``before()`` is
    called before each iteration, ``after(run)`` after each one that completed; ``failed``
    (a list) gets the QP failure of the iteration that stopped on one
    (:class:`sim.workloads.collective.QpFailure`)."""
    from sim.workloads.collective import QpFailure, RunError, run_schedule

    times, run = [], None
    ntr = len(sch.transfers)
    for it in range(warmup + n):
        if before is not None:
            before()
        prog = None if progress is None else (
            lambda done, _total, base=it * ntr: progress(base + done))
        try:
            run = run_schedule(sch, rf.fabric, rf.ranks, mtu_bytes=mtu, limit_ps=limit_ps,
                               progress=prog, **(job_kw or {}))
        except RunError as e:
            if isinstance(e, QpFailure) and failed is not None:
                failed.append({**e.failed, "iteration": it + 1})
            return times, run, f"iteration {it + 1}: {e}"
        if moved is not None:
            moved += [{**m, "iteration": it + 1} for m in run.failovers]
        if after is not None:
            after(run)
        if it >= warmup:
            times.append(run.time_ps)
    return times, run, None


def _steady_loops(build: Callable[[int], Any], lazy: Any, rf: Any, mtu: int, limit_ps: int,
                  progress: Callable[[int, int], None] | None, before: Any,
                  job_kw: Mapping[str, Any]) -> tuple[Any, Any, Any, str | None]:
    """Flow fidelity, a call of many loops (``lazy``: its schedule without transfers):
    run the call cut to :data:`STEADY_FIRST_LOOPS` of its loops (``build(loops)``), then
    twice as many, until its loops end a fixed period apart (:mod:`sim.workloads.steady`).
    Returns (the schedule run, its run, the :class:`sim.workloads.steady.Steady` found or
    None, an error or None)."""
    from sim.workloads.collective import RunError, run_schedule
    from sim.workloads.steady import Steady, steady_period_ps

    loops, sch, run = STEADY_FIRST_LOOPS, None, None
    while 2 * loops <= lazy.loops:  # else the whole call costs about as much
        sch = build(loops)
        if before is not None:
            before()
        try:
            run = run_schedule(sch, rf.fabric, rf.ranks, mtu_bytes=mtu, limit_ps=limit_ps,
                               progress=progress, **job_kw)
        except RunError as e:
            return sch, run, None, f"iteration 1: {e}"
        found = steady_period_ps(run)
        if found is not None:
            return sch, run, Steady(found[0], found[1], sch.loops, lazy.loops), None
        loops *= 2
    return sch, run, None, None


def _engine_runs(sch: Any, rf: Any, mtu: int, progress: Callable[[int, int], None] | None,
                 before: Any, job_kw: Mapping[str, Any], runs: int = 1, limit_ps: int = 10**12,
                 done_runs: int = 0, all_runs: int = 1, pool_nvlink: bool = False
                 ) -> tuple[list[Any], str | None]:
    """A call without transfer objects, ``runs`` times back to back (packet fidelity: each
    iteration): a ring on the ring engine (:mod:`sim.workloads.ring_engine`), a tree or an
    NVLS tree on the chunk engine (:mod:`sim.workloads.chunk_engine`, flow fidelity).
    Returns (their
    :class:`~sim.workloads.ring_engine.RingRun` s, None) or (those that ran, why the next
    failed).  ``before()`` is called before each; ``progress`` counts the sends of
    ``all_runs`` runs, ``done_runs`` of them before these.  ``pool_nvlink``: an NVLS or
    NVLS tree with each node's NVLink pooled
    (:func:`sim.workloads.chunk_engine.run_chunks`)."""
    from sim.workloads.chunk_engine import nvlink_poolable, run_chunks
    from sim.workloads.ring_engine import ring_engine_problem, run_ring

    kw = {k: job_kw[k] for k in ("header_bytes", "gpus_per_node", "nvlink", "nvlink_bps",
                                 "nvlink_latency_ps", "pxn") if k in job_kw}
    chunks = ring_engine_problem(sch) is not None  # a tree or NVLS tree: the chunk engine
    out: list[Any] = []
    for it in range(runs):
        if before is not None:
            before()
        prog = None if progress is None else (
            lambda done, total, k=done_runs + it: progress(k * total + done, all_runs * total))
        try:
            if chunks:
                out.append(run_chunks(sch, rf.fabric, rf.ranks, mtu_bytes=mtu,
                                      host=job_kw.get("host"), progress=prog,
                                      pool_nvlink=pool_nvlink and nvlink_poolable(sch),
                                      **kw))
                continue
            out.append(run_ring(sch, rf.fabric, rf.ranks, mtu_bytes=mtu,
                                host=job_kw.get("host"), progress=prog,
                                fidelity=job_kw.get("fidelity", "packet"), limit_ps=limit_ps,
                                **kw))
        except (ValueError, RuntimeError) as e:
            return out, f"iteration {it + 1}: {e}"
    return out, None


def _figures(collective: str, count: int, dtype: str, nranks: int, times: list[int]
             ) -> dict[str, Any]:
    from sim.workloads.nccl_tests import algbw_busbw

    t_ps = sum(times) // len(times)
    if t_ps > 0:
        alg, bus = algbw_busbw(collective, count, dtype, nranks, t_ps / 1e12)
    else:
        alg = bus = 0.0
    return {"time_ps": t_ps, "time_us": t_ps / 1e6, "algbw_GB_per_s": alg, "busbw_GB_per_s": bus}


def transfer_time_us(run: Any) -> dict[str, float] | None:
    """p50, p99 and max of the transfers' times (start to full receipt, µs) of a
    :class:`sim.workloads.collective.CollectiveRun`: the step time and its tail (nearest
    rank, over every transfer; None without transfers)."""
    d = sorted(f - s for s, f in zip(run.start_ps, run.finish_ps, strict=True)
               if s is not None and f is not None)
    if not d:
        return None

    def pct(q: float) -> float:
        return d[min(len(d) - 1, max(0, -(-len(d) * q // 100) - 1))] / 1e6

    return {"p50": pct(50), "p99": pct(99), "max": d[-1] / 1e6}


def _gc_thresholds(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` run under the collector thresholds of a simulation run,
    :data:`sim.engine.GC_THRESHOLDS` (its signature and documentation kept).  A schedule is
    millions of small objects (transfers, their tuples, the runner's lists) built before the
    fabric runs and alive until the size ends; with Python's default thresholds the collector
    walked them again and again: 7,036 collections, 11 % of the CPU time of a 248-GPU 16 MiB
    AllReduce on this machine; with these, 40 to 161 collections (two runs), 1 %
    (bench/results/2026-12-collectives.md, "Large collectives: where a SuperPOD run's time
    goes").  The caller's thresholds come back when the call returns."""
    import functools
    import gc

    @functools.wraps(fn)
    def run(*args: Any, **kw: Any) -> Any:
        old = raise_gc_thresholds()
        try:
            return fn(*args, **kw)
        finally:
            if old is not None:
                gc.set_threshold(*old)
    return run


def resolve_port(fabric: Any, text: str) -> tuple[int, int]:
    """A port of ``fabric`` named as the outputs name it: ``leaf0:p2`` (a switch's port),
    ``h12`` (a host's NIC), or ``NODE:PORT`` in ids; ValueError naming what exists."""
    from sim.nic.host import Host

    names = fabric.node_names()
    ids = {v: k for k, v in names.items()}
    node_text, _, port_text = text.partition(":")
    if node_text in ids:
        nid = ids[node_text]
    elif node_text.isdigit() and int(node_text) in fabric.nodes:
        nid = int(node_text)
    else:
        some = ", ".join(list(ids)[:6])
        raise ValueError(f"--capture {text!r}: no node {node_text!r} (the fabric's: {some}, "
                         f"...; or a node id)")
    node = fabric.nodes[nid]
    if not port_text:
        if not isinstance(node, Host):
            raise ValueError(f"--capture {text!r}: a switch's port is NAME:pN "
                             f"(ports {', '.join(f'p{i}' for i in sorted(node.ports))})")
        port = 0
    else:
        digits = port_text[1:] if port_text.startswith("p") else port_text
        port = int(digits) if digits.isdigit() else -1
    if port not in node.ports:
        raise ValueError(f"--capture {text!r}: {names[nid]} has ports "
                         f"{', '.join(f'p{i}' for i in sorted(node.ports))}")
    return nid, port


def check_algorithm(algorithm: str, gpus_per_node: int, params: Mapping[str, Any],
                    nodes: int = 1) -> None:
    """ValueError for an algorithm the fabric's nodes cannot run: NVLS and the NVLS tree
    need NVLink between a node's GPUs, NVLS across ``nodes`` and CollNet Direct and Chain
    SHARP (``params["sharp"]``)."""
    if algorithm in ("nvls", "nvls_tree") and not (params["nvlink"] and gpus_per_node > 1):
        why = "-p nvlink=false" if not params["nvlink"] else "1 GPU per node"
        raise ValueError(f"--algo {algorithm}: NVLink SHARP needs NVLink between the GPUs of "
                         f"a node ({why})")
    if algorithm == "nvls" and nodes > 1 and not params.get("sharp"):
        raise ValueError("--algo nvls: across nodes NCCL runs NVLS with CollNet (NVLS+SHARP), "
                         "which needs SHARP switches (--fabric rail -p fabric=ib "
                         "-p sharp=true); --algo nvls_tree is NVLS without them")
    if algorithm.startswith("collnet") and (nodes < 2 or not params.get("sharp")):
        raise ValueError(f"--algo {algorithm}: CollNet runs across nodes on SHARP switches "
                         f"(two or more nodes, --fabric rail -p fabric=ib -p sharp=true)")

@_gc_thresholds
def run_size(collective: str, nbytes: int, fabric: str, params: Mapping[str, Any], *,
             algorithm: str = "auto", protocol: str = "auto", channels: int | None = None,
             qps: int = 1, datatype: str = "float", root: int = 0, iters: int = 1,
             warmup_iters: int = 0, inplace: bool = True, details: bool = False,
             timeline_rank: int = 0,
             progress: Callable[[int, int], None] | None = None,
             observer: Any = None, faults: bool = True,
             nccl: Mapping[str, Any] | None = None, trace: bool = False,
             fidelity: str = "packet", steady: bool = True,
             engine: str = "auto", tool_counters: bool = False,
             pool_nvlink: bool = False) -> dict[str, Any]:
    """One size of ``lossless collective`` (``nbytes`` is nccl-tests' ``-b`` size): a fresh
    fabric of kind ``fabric`` for resolved ``params`` (:func:`collective_params`), the
    schedule of nccl-tests' count, ``warmup_iters`` + ``iters`` out-of-place iterations back
    to back, then (``inplace``) ``iters`` in-place ones on the same fabric, as nccl-tests
    runs them (the network traffic of both is the same; the in-place ones find the QPs and
    their congestion control warm).  Returns the row of the results: ``size_bytes``,
    ``count``, ``nchannels`` (the channels used: ``channels``, or for None
    :func:`sim.workloads.nccl.default_channels` of the fabric's nodes, fewer for small
    calls), ``transfers``, ``counters`` (all iterations), ``error`` (None or
    why the size failed), ``wrong`` (0 when the ranks end with what the collective promises,
    :func:`sim.workloads.nccl.verify`), ``iteration_times_ps``, ``time_ps``, ``time_us``,
    ``algbw_GB_per_s``, ``busbw_GB_per_s``, ``inplace`` (the same figures of the in-place
    iterations, or None), ``nvlink_bytes`` (all iterations) and ``transfer_time_us``
    (:func:`transfer_time_us` of the last out-of-place iteration).  The fabric's
    ``gpus_per_node`` places ranks on nodes: NVLink inside them (``nvlink``,
    ``nvlink_gbps``, ``nvlink_latency_ns``) and PXN between them (``pxn``), as
    :mod:`sim.workloads.collective` describes.

    ``details`` adds ``links`` (:func:`sim.workloads.collective_stats.link_usage`: every
    port's bytes and utilisation), ``busiest_link`` and ``timeline`` (the transfers of rank
    ``timeline_rank``,
    :func:`sim.workloads.collective_stats.rank_timeline`) of the last out-of-place
    iteration (None when the size failed).  ``tool_counters`` adds ``tool_counters``:
    every port's counters in the real tools' terms (:func:`sim.fabric.counters.
    port_counters`) over what ran of the size (``covers``), at ``fidelity``.
    ``progress(done, total)`` is called as the transfers of all iterations of this size are
    received.

    Output hooks (``lossless collective`` passes
    :class:`sim.study.fault_report.CollectiveProbe`'s): ``observer.tracer`` (if any) reads the
    fabric's events, ``observer.attach(rf)`` is called once the fabric is built and its
    faults scheduled, ``observer.iteration(run)`` after each iteration that completed, and
    ``observer.done(rf)`` at the end.  ``faults=False`` runs the size without any fault
    (``params["faults"]``, the reroute keys, a fabric file's ``[[faults]]``): the fault-free
    run it is compared with.

    NCCL's host side (:mod:`sim.workloads.tuner`): ``algorithm`` / ``protocol`` "auto" (the
    defaults, as ``lossless collective``'s) let NCCL's tuner pick them and the channels for
    this size, among the algorithms the simulator runs (``nccl``: NCCL_ALGO / NCCL_PROTO as
    ``algo`` / ``proto``, ``min_channels``, ``max_channels``, ``nvls``:
    :func:`sim.workloads.tuner.from_environment`; ``channels`` given: NCCL_MIN_NCHANNELS =
    NCCL_MAX_NCHANNELS = it); ``params["hw"]`` is the node it models (with the fabric's NIC
    rate); ``params["nccl_host"]`` (default true) adds NCCL's host side: its launch and
    per-step latencies and its channels' bandwidth (:class:`sim.workloads.tuner.HostSide`;
    AllToAll and SendRecv: on one node only, :func:`sim.workloads.tuner.p2p_host_side`),
    and ``channels`` None is then NCCL's channel count for the algorithm (its p2p channels
    for AllToAll and SendRecv); false runs the network alone (``channels`` None: one per NIC
    of a node, :func:`sim.workloads.nccl.default_channels`).  The row's ``algorithm``, ``protocol``
    and, with the tuner, ``tuner`` (the pick, NCCL's own pick
    over every algorithm, the model's time in µs) say what ran.  ``trace`` adds ``trace``:
    the last out-of-place iteration as Chrome trace events
    (:func:`sim.workloads.collective_stats.chrome_trace`; None when the size failed, and
    ``trace_problem`` says why when it has too many transfers for one).  ``fidelity``
    "flow" runs each QP as a fluid flow at its max-min fair rate on its path instead of as
    packets (:mod:`sim.workloads.fluid_transport`: no queues, PFC, ECN, congestion control
    or losses; faults act on the flows' links and paths, loss faults are refused); "auto"
    runs flow from
    :data:`AUTO_FLOW_RANK_BYTES` of ranks x size up, without faults, and the row then
    says ``fidelity``.  At flow fidelity a ring AllReduce, AllGather or ReduceScatter of
    :data:`RING_ENGINE_SENDS` sends or more runs on the ring engine
    (:mod:`sim.workloads.ring_engine`, no transfer objects: ``engine`` "ring" for any ring
    call, "job" never; the row then has ``engine`` and ``wrong`` None), a tree or NVLS
    tree AllReduce of as many transfers on the chunk engine
    (:mod:`sim.workloads.chunk_engine`: ``engine`` "chunk" for any tree or NVLS AllReduce
    without SHARP or stragglers, with NVLink between a node's GPUs; the row's ``engine``
    "chunk"; at flow fidelity only); at packet fidelity
    only ``engine`` "ring" takes it, every iteration run with its network sends as the
    fabric's packets, without faults, stragglers or failover), and a ring call of
    :data:`STEADY_MIN_LOOPS` loops or more by its steady loops (:mod:`sim.workloads.steady`,
    exact; ``steady`` False runs every loop; the row then has ``steady``); every iteration
    of those takes the first one's time (nothing carries over at flow fidelity).
    ``pool_nvlink`` runs the NVLS and NVLS trees the chunk engine takes with each node's
    NVLink ports pooled (:func:`sim.workloads.chunk_engine.run_chunks`: faster, not
    exact; the row then has ``nvlink_pooled`` True)."""
    from sim.scenarios.common import collective_packet
    from sim.units import gbps
    from sim.workloads.chunk_engine import chunk_engine_problem, chunk_sends, nvlink_poolable
    from sim.workloads.collective import fabric_counters, nvlink_domain
    from sim.workloads.collective_stats import (
        busiest_link,
        link_usage,
        port_counters,
        rank_timeline,
    )
    from sim.workloads.nccl import ScheduleError, verify
    from sim.workloads.nccl_tests import coll_counts
    from sim.workloads.ring_engine import ring_engine_problem, ring_sends
    from sim.workloads.steady import STEADY_ALGORITHMS

    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "chunk" and fidelity == "packet":
        raise ValueError("--engine chunk runs at flow fidelity (--fidelity flow)")
    rf = build_fabric(fabric, dict(params), tracer=getattr(observer, "tracer", None),
                      faults=faults)
    nranks = len(rf.ranks)
    counts = coll_counts(collective, nbytes, datatype, nranks)
    faulted = faults and (params.get("faults") or getattr(rf.fabric, "fault_log", None)
                          is not None)
    if fidelity == "auto":  # flow from AUTO_FLOW_RANK_BYTES of ranks x size, without faults
        fidelity = "flow" if (nranks * counts.size_bytes >= AUTO_FLOW_RANK_BYTES
                              and not faulted) else "packet"

    def plan(**kw: Any) -> Any:
        return plan_size(collective, counts, rf.nodes, rf.gpus_per_node, params,
                         algorithm=algorithm, protocol=protocol, channels=channels, qps=qps,
                         datatype=datatype, root=root, nccl=nccl,
                         aggregators=getattr(rf, "aggregators", ()),
                         nodes_per_leaf=getattr(rf, "nodes_per_leaf", 0), **kw)

    # flow fidelity: a call of many loops runs a few of them until they repeat
    # (sim.workloads.steady); lazy is its plan without transfers
    lazy = ring = None
    if (not faulted and not getattr(rf, "stragglers", ())
            and collective not in ("alltoall", "sendrecv")
            and (fidelity == "flow" or (engine == "ring" and not params.get("failover")))):
        try:
            lazy = plan(build=False)
        except ScheduleError:  # not an algorithm of loops: the whole call runs
            lazy = None
        if lazy is not None and engine != "job" and ring_engine_problem(
                lazy.schedule) is None and (engine == "ring" or ring_sends(
                    lazy.schedule) >= RING_ENGINE_SENDS):
            ring = lazy  # the ring engine, without transfer objects
            lazy = None
        elif lazy is not None and engine in ("auto", "chunk") and chunk_engine_problem(
                lazy.schedule) is None and (params["nvlink"] or rf.gpus_per_node == 1) and (
                    engine == "chunk" or chunk_sends(lazy.schedule) >= RING_ENGINE_SENDS):
            ring = lazy  # the chunk engine, without transfer objects
            lazy = None
        if lazy is not None and (fidelity != "flow" or not steady
                                 or lazy.schedule.loops < STEADY_MIN_LOOPS
                                 or lazy.algorithm not in STEADY_ALGORITHMS):
            lazy = None
    sized = lazy or ring or plan()
    sch, tuned = sized.schedule, sized.tuned
    algorithm, protocol = sized.algorithm, sized.protocol
    p2p = collective in ("alltoall", "sendrecv")
    limit_ps = int(params["limit_ms"] * 10**9)
    # the fabric's header stack (RoCEv2 or InfiniBand, wire.linkstack) and its largest packet
    stack = rf.fabric.stack
    pkt = collective_packet({"packet_bytes": getattr(rf, "packet_bytes", 0)
                             or params["packet_bytes"]}, stack)["packet_bytes"]
    mtu = pkt - stack.header_bytes
    # the fabric's nodes: NVLink inside them, PXN between them (sim.workloads.collective)
    job_kw = {"header_bytes": stack.header_bytes,
              "gpus_per_node": rf.gpus_per_node, "nvlink": params["nvlink"],
              "nvlink_bps": gbps(params["nvlink_gbps"]),
              "nvlink_latency_ps": round(params["nvlink_latency_ns"] * 1000),
              "pxn": params["pxn"]}
    if sch.aggregators:
        job_kw["aggregators"] = rf.aggregators
    if params.get("failover"):  # acts on QP errors: with RC on (-p reliable, a file's [hosts])
        job_kw["failover"] = True
    if sized.host is not None:
        job_kw["host"] = sized.host
    if fidelity != "packet":
        job_kw["fidelity"] = fidelity
    if faults and (params.get("faults") or params.get("detect_us", -1) >= 0 or
                   params.get("converge_us", -1) >= 0 or getattr(rf, "stragglers", ())):
        # -p fault= on this size's fabric, and a fabric file's stragglers
        from sim.scenarios.common import apply_faults, resolve_faults, straggler_delays

        plan = resolve_faults([(f"-p fault #{i + 1}", e) for i, e in
                               enumerate(params.get("faults") or [])],
                              ib=params.get("fabric") == "ib", reroute_params=params)
        lossy = next((label for label, f, _ in plan.faults if f.kind == "loss"), None)
        if fidelity == "flow" and lossy:
            raise ValueError(f"--fidelity flow: {lossy}: a loss fault drops packets, and "
                             f"flow fidelity has none (use --fidelity packet)")
        apply_faults(plan, rf.fabric, rf.ranks)
        plan = plan._replace(stragglers=[*getattr(rf, "stragglers", ()), *plan.stragglers])
        if plan.stragglers:
            job_kw["delay_ps"] = straggler_delays(plan, rf.ranks)
    if observer is not None:
        observer.attach(rf)
    after = getattr(observer, "iteration", None)
    failed: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []  # failover: the QPs moved, every iteration
    snap: list[Any] = [None]
    # the ports' counters: at flow fidelity what the fluid flows sent (no packets counted)
    counters = port_counters
    if fidelity == "flow":
        from sim.workloads.fluid_transport import fluid_transport

        def counters(fab: Any) -> Any:
            return fluid_transport(fab).port_counters()

    def before() -> None:
        snap[0] = counters(rf.fabric)

    found = rrun = None
    if ring is not None and fidelity == "flow":  # every iteration takes as long
        rruns, error = _engine_runs(sch, rf, mtu, progress, before if details else None,
                                    job_kw, pool_nvlink=pool_nvlink)
        rrun = rruns[0] if rruns else None
        times = [] if error is not None else [rrun.time_ps] * iters
    elif ring is not None:  # packets: each iteration on the fabric as the one before left it
        runs = warmup_iters + iters
        rruns, error = _engine_runs(sch, rf, mtu, progress, before if details else None,
                                    job_kw, runs, limit_ps, 0, runs + (iters if inplace else 0))
        rrun = rruns[-1] if rruns else None
        times = [r.time_ps for r in rruns[warmup_iters:]]
    elif lazy is not None:  # a few loops until they repeat; every iteration takes as long
        sch, run, found, error = _steady_loops(
            lambda loops: plan(loops=loops).schedule, lazy.schedule, rf, mtu, limit_ps,
            progress, before if details else None, job_kw)
        if found is None and error is None:  # no steady state: the whole call
            sized = plan()
            sch = sized.schedule
            lazy = None
    ntr = len(sch.transfers)
    total = ntr * (warmup_iters + iters + (iters if inplace else 0))
    if ring is not None:  # the ring engine ran it (or failed: error)
        run = None
    elif found is not None:
        times = [] if error is not None else [run.time_ps + found.extra_ps] * iters
        if after is not None and error is None:
            after(run)
    else:
        times, run, error = _iterations(
            sch, rf, iters, warmup_iters, mtu, limit_ps,
            None if progress is None else (lambda done: progress(done, total)),
            before if details else None, job_kw, failed, moved, after)
    links = timeline = None
    if details and error is None and run is not None and ntr:  # 0 elements: nothing sent
        links = link_usage(rf.fabric, run.first_start_ps, run.last_finish_ps, since=snap[0],
                           ranks=rf.ranks, now=counters(rf.fabric))
        timeline = rank_timeline(run, timeline_rank)
    if details and error is None and rrun is not None and rrun.transfers:
        links = link_usage(rf.fabric, rrun.first_start_ps, rrun.last_finish_ps,
                           since=snap[0], ranks=rf.ranks, now=counters(rf.fabric))
    wrong = None
    if error is None and run is not None:
        # by start time, ties in id order (a stable sort)
        order = sorted(range(len(sch.transfers)), key=run.start_ps.__getitem__)
        try:
            verify(sch, order)
            wrong = 0
        except ScheduleError as e:
            error = f"wrong result: {e}"
    in_times: list[int] = []
    in_ran = False  # the in-place iterations ran (not a copy of the out-of-place times)
    if error is None and inplace and rrun is not None and fidelity == "packet":
        in_ran = True
        rruns, in_error = _engine_runs(sch, rf, mtu, progress, None, job_kw, iters, limit_ps,
                                       warmup_iters + iters, warmup_iters + 2 * iters)
        in_times = [r.time_ps for r in rruns]
        if in_error is not None:
            error = f"in-place {in_error}"
    elif error is None and inplace and (found is not None or rrun is not None):
        in_times = list(times)
    elif error is None and inplace:
        in_ran = True
        base = ntr * (warmup_iters + iters)
        in_times, _, in_error = _iterations(
            sch, rf, iters, 0, mtu, limit_ps,
            None if progress is None else (lambda done: progress(base + done, total)),
            job_kw=job_kw, failed=failed, moved=moved, after=after)
        if in_error is not None:
            error = f"in-place {in_error}"
    row: dict[str, Any] = {
        "size_bytes": counts.size_bytes, "count": counts.param_count,
        "nchannels": sch.nchannels, "transfers": len(sch.transfers),
        "counters": {**fabric_counters(rf.fabric), **_ib_counters(rf.fabric),
                     **_rc_counters(rf.fabric)},
        "nvlink_bytes": nvlink_domain(rf.fabric).nbytes, "error": error, "wrong": wrong,
        "iteration_times_ps": times, "inplace": None,
        "algorithm": "p2p" if p2p else str(algorithm), "protocol": str(protocol),
        **({"fidelity": fidelity} if fidelity != "packet" else {}),
    }
    if ring is not None:  # no transfer objects: their count, and no symbolic replay
        on_ring = ring_engine_problem(sch) is None
        row["engine"] = "ring" if on_ring else "chunk"
        row["transfers"] = ring_sends(sch) if on_ring else chunk_sends(sch)
        if rrun is not None and fidelity == "flow":  # one run stands for every iteration
            row["nvlink_bytes"] = rrun.nvlink_bytes
        if rrun is not None and rrun.held_back:
            row["ring_held_back"] = rrun.held_back
        if pool_nvlink and not on_ring and nvlink_poolable(sch):
            row["nvlink_pooled"] = True
    if found is not None:  # the loops simulated, and the call's
        per_loop = sum(1 for t in sch.transfers if t.loop == 0)
        row["transfers"] = ntr + (found.loops - found.loops_run) * per_loop
        row["steady"] = {"loops_run": found.loops_run, "loops": found.loops,
                         "period_ps": found.period_ps, "spread_ps": found.spread_ps,
                         "transfers_run": ntr}
    if tuned is not None:
        from sim.workloads.tuner import nccl_text as tuner_text

        row["tuner"] = {"algorithm": tuned.algo, "protocol": tuned.proto,
                        "channels": sch.nchannels, "model_time_us": round(tuned.time_us, 3),
                        "nccl": tuner_text(tuned.nccl_algo, tuned.nccl_proto)}
    if failed:  # a QP error stopped it: when and which QP
        row["failed"] = failed[0]
    if moved:
        row["failovers"] = moved
    if details:
        row["links"], row["timeline"] = links, timeline
        row["busiest_link"] = busiest_link(links)
    if tool_counters:  # every port in the real tools' terms, over what ran of this size
        from sim.fabric.counters import port_counters

        if error is not None:
            covers = "the run until it failed"
        elif found is not None:
            covers = f"{found.loops_run} of the {found.loops} loops of one iteration"
        elif ring is not None and fidelity == "flow":
            covers = "one iteration"
        else:
            ran = warmup_iters + iters + (iters if inplace and in_ran else 0)
            covers = f"{ran} iterations"
        row["tool_counters"] = {
            "covers": covers, "fidelity": fidelity,
            "ports": port_counters(rf.fabric, flow_ports=counters(rf.fabric)
                                   if fidelity == "flow" else None)}
    if trace:
        from sim.workloads.collective_stats import chrome_trace

        row["trace"] = None
        if ring is not None:
            row["trace_problem"] = ("the ring engine runs without transfer objects: no "
                                    "trace (--engine job, or a smaller call)")
        if error is None and run is not None:
            try:
                row["trace"] = chrome_trace(
                    run, rf.gpus_per_node, bool(params["nvlink"]),
                    f"{collective} {counts.size_bytes} B, {row['algorithm']}/{protocol}")
            except ValueError as e:  # too many transfers for one trace: said, not fatal
                row["trace_problem"] = str(e)
    if error is None and run is not None:
        row["transfer_time_us"] = transfer_time_us(run)
    if error is None:
        row.update(_figures(collective, counts.param_count, datatype, nranks, times))
        if inplace:
            row["inplace"] = {"iteration_times_ps": in_times,
                              **_figures(collective, counts.param_count, datatype, nranks,
                                         in_times)}
    if observer is not None:
        observer.done(rf)
    return row

"""``lossless collective COLL``: an NCCL collective on a simulated fabric, reported as
nccl-tests reports it (docs/reference/collective.md; the model: docs/explanation/collectives.md).

For every size of ``-b/-e/-f`` (or ``-i``): a fresh fabric (``--fabric
rail|star|fattree|superpod|nvl72`` with its ``-p`` parameters; the rank count is the fabric's),
the schedule of :func:`sim.workloads.nccl.schedule` for nccl-tests' count, ``-w`` warm-up
and ``-n`` timed iterations back to back through :func:`sim.workloads.collective.run_schedule`
(each iteration starts when the previous one is received; the QPs and their congestion
control persist), the mean time of the timed ones, algbw/busbw by nccl-tests' formulas and
``#wrong`` = 0 when the ranks end with what the collective promises in the order the
transfers actually started (:func:`sim.workloads.nccl.verify`).  Below the table, per size:
PFC pauses (on an InfiniBand fabric the credit stall time instead: its links have no PFC),
CE marks, CNPs, drops and the deepest switch queue over all its iterations, and the busiest
link of its last out-of-place iteration (:func:`sim.workloads.collective_stats.busiest_link`).

Outputs (docs/reference/collective-results.md): ``--json FILE``, ``--csv FILE`` (one row per size)
and ``--out DIR`` (written whole or not at all by :func:`wire.atomic.atomic_dir`): ``results.json``,
``results.csv``, ``table.txt`` (the printed table) and the PNGs of
:mod:`sim.study.collective_plots`.  A progress line on stderr while the sizes run (when stderr is a
terminal, or ``--progress``; ``--quiet`` silences it).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TextIO

from sim.cli.argtypes import ArgType, integer
from sim.cli.argtypes import err as _err
from sim.cli.argtypes import key_value as _kv
from sim.scenarios.collective import (
    ENGINES,
    FABRICS,
    RING_ENGINE_SENDS,
    STEADY_MIN_LOOPS,
    build_fabric,
    check_algorithm,
    check_fabric_keys,
    collective_params,
    host_side_applies,
    is_fabric_file,
    run_size,
    split_file_params,
)
from sim.scenarios.collective_plan import COLLNET_ALGOS
from sim.workloads.nccl import Collective, default_channels, schedule

__all__ = ["add_parsers", "FABRICS", "build_fabric", "collective_params", "csv_table",
           "cmd_plot_collective", "Progress", "fault_lines"]

EXIT_OK, EXIT_FAIL, EXIT_USAGE = 0, 1, 2
#: Exit status after Ctrl-C (128 + SIGINT, the shell's convention).
EXIT_INTERRUPTED = 130


def _parse_size(text: str, limits: ArgType | None = None) -> int:
    from fractions import Fraction

    from sim.workloads.nccl_tests import parse_size

    try:
        v = parse_size(text)
        unit = text.strip()[-1:].lower()
        num = text.strip()[:-1] if unit in "kmg" else text.strip()
        exact = Fraction(num) * {"k": 1024, "m": 1024**2, "g": 1024**3}.get(unit, 1)
    except (ValueError, ZeroDivisionError) as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if exact != v:
        raise argparse.ArgumentTypeError(f"not a whole number of bytes: {text!r}")
    (limits or _SIZE).check(v, text)
    return v


#: A ``-b/-e/-i`` size: nccl-tests' ``parsesize`` (K/M/G powers of 1024), whole bytes, at
#: most 16 GiB.
_SIZE = ArgType("int", _parse_size, 0, 1 << 34, name="size")
#: ``-i``: at least 1 byte.  nccl-tests' ``-i 0`` (without ``-f``) adds 0 to the size for ever
#: (src/common.cu, the benchmark loop ``size += stepbytes`` while ``size <= maxbytes``).
_STEP = ArgType("int", lambda text: _parse_size(text, _STEP), 1, 1 << 34, name="step")
#: Most sizes of one ``-b/-e/-i`` run (each is a simulation and a table row).
MAX_SIZES = 10_000


def _body(r: dict[str, Any], wrong: int | None) -> tuple:
    """(time us, algbw, busbw, #wrong) of one half of a results row."""
    return (r["time_us"], r["algbw_GB_per_s"], r["busbw_GB_per_s"], wrong)


def cmd_collective(args: argparse.Namespace) -> int:
    from sim.scenarios import ScenarioError
    from sim.scenarios.base import resolve_params
    from sim.workloads.nccl_tests import (
        NOT_RUN,
        REDOPS,
        format_row,
        header_lines,
        root_of,
        size_list,
    )

    if args.collective not in {str(x) for x in Collective}:
        _err(f"COLLECTIVE: expected one of {', '.join(str(x) for x in Collective)}, got "
             f"{args.collective!r}")
        return EXIT_USAGE
    from sim.workloads.tuner import (
        NCCL_VARIABLES,
        TunerError,
        environment_notes,
        from_environment,
    )

    # NCCL's environment variables, as the job that runs the collective has them: the
    # environment's, then -p NCCL_*=... (pasted from the job's settings) over them
    env = {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}
    pasted: dict[str, str] = {}
    for key, value in args.param or ():
        if key.startswith("NCCL_"):
            if key in pasted:
                _err(f"-p {key}: given twice")
                return EXIT_USAGE
            pasted[key] = str(value)
            if key not in NCCL_VARIABLES and key not in ("NCCL_TOPO_FILE", "NCCL_GRAPH_FILE"):
                _err(f"-p {key}: not modelled, ignored (modelled: "
                     f"{', '.join(NCCL_VARIABLES)}, NCCL_TOPO_FILE, NCCL_GRAPH_FILE)")
    env.update(pasted)
    args.param = [(k, v) for k, v in args.param or () if not k.startswith("NCCL_")]
    try:
        nccl = from_environment(env)
    except TunerError as e:
        _err(f"{'-p' if pasted else 'environment'}: {e}")
        return EXIT_USAGE
    if args.algo is None:
        args.algo = "auto"
    if args.proto is None:
        args.proto = "auto"
    tuned = "auto" in (args.algo, args.proto)
    if args.qps is None:
        args.qps = nccl.get("qps", 1)
    if not tuned:  # --algo and --proto given: of NCCL's variables only the QPs and CollNet
        nccl = {k: v for k, v in nccl.items() if k in ("qps", "collnet")}  # are read
    read = NCCL_VARIABLES if tuned else ("NCCL_IB_QPS_PER_CONNECTION", "NCCL_COLLNET_ENABLE")
    env_text = " ".join(f"{v}={env[v]}" for v in read if env.get(v))
    from sim.scenarios.common import (
        apply_faults,
        check_stragglers,
        collective_packet,
        fault_entries,
        resolve_faults,
        split_fault_params,
    )

    given: dict[str, Any] = {}
    for key, value in args.param or ():
        if key == "fault":  # repeatable: one fault each
            given.setdefault(key, []).append(value)
            continue
        if key in given:
            _err(f"-p {key}: given twice")
            return EXIT_USAGE
        given[key] = value
    if env.get("NCCL_TOPO_FILE") and "hw" not in given:  # the job's node, as NCCL reads it
        given["hw"] = env["NCCL_TOPO_FILE"]
    if env.get("NCCL_GRAPH_FILE") and "graph" not in given:  # its rings, as NCCL reads them
        given["graph"] = env["NCCL_GRAPH_FILE"]
    try:
        fault_keys, given = split_fault_params(given)
        given.update({k: v for k, v in fault_keys.items() if k in ("detect_us", "converge_us")})
        plan = resolve_faults(fault_entries(fault_keys), reroute_params=fault_keys,
                              ib=given.get("fabric", "roce") == "ib")
        if is_fabric_file(args.fabric):
            over, given = split_file_params(given)
            params = resolve_params(collective_params(), given)
            params["file_overrides"] = over
        else:
            if args.fabric not in FABRICS:
                raise ValueError(f"--fabric: expected one of {', '.join(FABRICS)}, a "
                                 f"fabric file FILE.toml or ibnetdiscover's output, got "
                                 f"{args.fabric!r}" + ("" if os.path.exists(args.fabric)
                                                        else " (no such file)"))
            check_fabric_keys(args.fabric, given)
            if nccl.get("collnet") and args.fabric in ("rail", "superpod") \
                    and given.get("fabric") == "ib":
                given.setdefault("sharp", True)  # Quantum leaves: SHARP for CollNet
            if args.fabric == "nvl72":  # racks of 72 GPUs on NVLink 5, unless -p hw says
                given.setdefault("hw", "gb200-nvl72")
            if "hw" in given:  # the named node's GPUs, NICs and NVLink, unless given
                from sim.workloads.tuner import node_hardware

                node = node_hardware(str(given["hw"]))
                for k, v in (node.fabric_defaults() if node else {}).items():
                    if k in given:
                        continue
                    try:
                        check_fabric_keys(args.fabric, {k: v})
                    except ValueError:
                        continue  # a key this fabric kind does not take
                    given[k] = v
            # packet_bytes 0: the fabric's largest packet (4154 B RoCEv2, 4122 B IB)
            params = collective_packet(resolve_params(collective_params(), given))
        factor = args.stepfactor or (1 if args.stepbytes is not None else 2)
        if factor == 1 and (args.maxbytes - args.minbytes) // args.stepbytes >= MAX_SIZES:
            raise ValueError(f"-i {args.stepbytes}: -b {args.minbytes} to -e {args.maxbytes} "
                             f"is {(args.maxbytes - args.minbytes) // args.stepbytes + 1} "
                             f"sizes, more than {MAX_SIZES} (each is a run)")
        sizes = size_list(args.minbytes, args.maxbytes, factor, args.stepbytes or 1 << 20)
        if args.fabric in ("rail", "star") and params["nodes"] * params["gpus_per_node"] < 2:
            raise ValueError("nodes x gpus_per_node: a collective needs at least 2 GPUs")
        rf = build_fabric(args.fabric, params)  # a bad fabric is refused before any run
        for note in environment_notes(nccl, bool(getattr(rf, "aggregators", ()))):
            _err(note)  # read, not modelled: said once
        params.update(getattr(rf, "settings", {}))  # a fabric file's own settings
        if plan.entries:  # faults (-p fault=): checked on this fabric, run on each size's
            apply_faults(plan, rf.fabric, rf.ranks)
            params["faults"] = plan.entries
        # with the stragglers of a fabric file's [[faults]]: ranks of this collective
        check_stragglers(plan._replace(stragglers=[*getattr(rf, "stragglers", ()),
                                                   *plan.stragglers]), [rf.ranks])
        # a fault report per size: -p faults, a fabric file's [[faults]]
        faulty = bool(plan.entries) or getattr(rf.fabric, "fault_log", None) is not None \
            or bool(getattr(rf, "stragglers", ()))
        # the resolved entries: -p faults, then a fabric file's stragglers (its other
        # [[faults]] are in the fabric's timeline)
        fault_list = [*(params.get("faults") or ()),
                      *(e for _, e in getattr(rf, "stragglers", ()))]
        nranks, shape = len(rf.ranks), (rf.nodes, rf.gpus_per_node)
        channels = args.channels or default_channels(*shape)
        check_algorithm(args.algo, rf.gpus_per_node, params, rf.nodes)
        # the schedule's own checks (an algorithm a collective does not take, a root...)
        # before the table starts: a call of no element builds no transfer
        schedule(args.collective, nranks, 0, args.datatype, nchannels=channels,
                 algorithm="ring" if args.algo == "auto" else args.algo,
                 protocol="simple" if args.proto == "auto" else args.proto,
                 root=min(args.root, nranks - 1),
                 gpus_per_node=rf.gpus_per_node, qps_per_connection=args.qps,
                 sharp=args.algo in COLLNET_ALGOS and bool(getattr(rf, "aggregators", ())))
        if "auto" in (args.algo, args.proto) and args.collective not in ("alltoall",
                                                                          "sendrecv"):
            from sim.scenarios.collective import tune_size

            tune_size(args.collective, 1, args.algo, args.proto, args.channels, params, nranks,
                  shape[0], nccl)  # NCCL_ALGO / NCCL_PROTO leave something to run
    except TunerError as e:
        _err(f"NCCL settings: {e}")
        return EXIT_USAGE
    except (ScenarioError, ValueError) as e:
        _err(str(e))
        return EXIT_USAGE
    if args.root >= nranks:
        _err(f"-r: root {args.root} is not one of the {nranks} ranks")
        return EXIT_USAGE
    if not 0 <= args.timeline_rank < nranks:
        _err(f"--timeline-rank: rank {args.timeline_rank} is not one of the {nranks} ranks "
             f"(0..{nranks - 1})")
        return EXIT_USAGE
    from wire.atomic import OutputError, atomic_dir, atomic_file, check_output_dir

    for opt, path in (("--json", args.json), ("--csv", args.csv), ("--trace", args.trace)):
        if path:
            folder = os.path.dirname(os.path.abspath(path))
            if os.path.isdir(path) or not os.path.isdir(folder):
                _err(f"{path}: {opt}: not a file in an existing folder")
                return EXIT_USAGE
    # adaptive routing picks a port per packet: a flow has no single path
    adaptive = any(getattr(n, "routing", "") == "adaptive" for n in rf.fabric.nodes.values())
    if args.fidelity == "auto" and (args.capture or faulty or adaptive):
        args.fidelity = "packet"  # captures, faults and adaptive routing need packets
    lossy = any(str(e.get("kind", "")) == "loss" if isinstance(e, dict) else
                str(e).startswith("loss") for e in fault_list)
    if args.fidelity == "flow" and (args.capture or lossy or adaptive):
        _err("--fidelity flow: " + ("--capture needs packets" if args.capture else
                                    "a loss fault drops packets, and flow fidelity has "
                                    "none" if lossy else
                                    "adaptive routing picks a port per packet, so a flow "
                                    "has no single path") + "; use --fidelity packet")
        return EXIT_USAGE
    why = engine_option_problem(args)
    if why is not None:
        _err(why)
        return EXIT_USAGE
    if args.capture:
        from sim.scenarios.collective import resolve_port

        if not args.out:
            _err("--capture: needs --out DIR (the pcaps go there)")
            return EXIT_USAGE
        try:
            for text in args.capture:
                resolve_port(rf.fabric, text)
        except ValueError as e:
            _err(str(e))
            return EXIT_USAGE
    if args.out:
        try:
            check_output_dir(args.out, force=args.force)  # refuse before running
        except OutputError as e:
            _err(str(e))
            return EXIT_USAGE
    coll = Collective(args.collective)
    reduces = coll in (Collective.ALLREDUCE, Collective.REDUCESCATTER)
    redop = args.op if reduces else "none"
    if args.op not in REDOPS:
        _err(f"-o: expected one of {', '.join(REDOPS)}, got {args.op!r}")
        return EXIT_USAGE
    root = root_of(coll, args.root)
    table: list[str] = []

    def emit(line: str) -> None:
        print(line, flush=True)
        table.append(line)

    ib = rf.fabric.stack.name == "ib"  # an InfiniBand fabric: credits, IB headers
    # AllToAll and SendRecv are NCCL's point-to-point sends: no ring or tree
    p2p = coll in (Collective.ALLTOALL, Collective.SENDRECV)
    algo = "p2p" if p2p else args.algo
    host_side = host_side_applies(str(coll), shape[0], shape[1], params)
    # NCCL's channels with its tuner or its host side (run_size takes them from the model)
    nccl_ch = (tuned and not p2p) or host_side
    auto_ch = "auto" if nccl_ch and not args.channels else ""
    if p2p and args.proto == "auto":  # NCCL's sends above 16 KiB: Simple
        args.proto = "simple"
    emit(f"# lossless collective {coll}: {nranks} ranks ({shape[0]} nodes x "
         f"{shape[1]} GPUs), fabric {args.fabric}, {params['link_gbps']:g} Gb/s,"
         f" {_flow_control(rf.fabric, params)}, cc {params['cc']}; algo {algo}, proto "
         f"{args.proto}, channels {auto_ch if auto_ch else channels}, "
         f"qps {args.qps}; -w {args.warmup_iters} -n {args.iters}"
         + (f"; {env_text}" if env_text else "")
         + (f"; NCCL host side {params['hw']}" if host_side else
            "; the network alone (NCCL's host side is modelled for point-to-point sends on "
            "one node's NVLink only)" if p2p and params.get("nccl_host") else "")
         + ("; flow fidelity (fluid max-min rates: no packets, queues, PFC, ECN, congestion "
            "control or losses)" if args.fidelity == "flow" else
            "; fidelity auto (flow fidelity, fluid max-min rates without packets, from 16 GiB "
            "of ranks x size)" if args.fidelity == "auto" else ""))
    for line in header_lines():
        emit(line)
    show = not args.quiet and (args.progress or sys.stderr.isatty())
    progress = Progress(len(sizes), sys.stderr) if show else None
    rows: list[dict[str, Any]] = []
    kept: dict[str, Any] | None = None  # the largest completed size keeps links, timeline
    trace_doc: dict[str, Any] | None = None  # --trace: the largest completed size's
    tool_doc: dict[str, Any] | None = None  # counters.json: the largest completed size's
    fault_series: dict[str, Any] | None = None  # faults_timeline.png: the largest size's
    problems = 0
    import tempfile

    cap_tmp = tempfile.TemporaryDirectory(prefix=".lossless-capture-") if args.capture \
        else None
    try:
        for i, nbytes in enumerate(sizes):
            # with faults no in-place iterations (fault_lines says why): N/A in the table
            kw = dict(algorithm=args.algo, protocol=args.proto,
                      channels=args.channels if nccl_ch else channels,
                      qps=args.qps, datatype=args.datatype, root=args.root, iters=args.iters,
                      warmup_iters=args.warmup_iters, inplace=not faulty, nccl=nccl,
                      trace=bool(args.trace), fidelity=args.fidelity,
                      steady=not args.every_loop, engine=args.engine,
                      pool_nvlink=args.pool_nvlink)
            caps = None
            if cap_tmp is not None and i == len(sizes) - 1:  # the largest size's frames
                from sim.study.collective_capture import PortCaptures

                caps = PortCaptures(args.capture, cap_tmp.name)
            try:
                obs = base_obs = base_row = None
                if faulty:
                    from sim.study.fault_report import BASELINE_BINS, CollectiveObserver

                    obs = CollectiveObserver()
                    if not args.no_baseline:  # the same size without its faults, same seed
                        base_obs = CollectiveObserver(BASELINE_BINS)
                        base_row = run_size(args.collective, nbytes, args.fabric, params,
                                            **kw, observer=base_obs, faults=False)
                both = obs
                if caps is not None:
                    from sim.study.collective_capture import Observers

                    both = Observers(obs, caps)
                row = run_size(args.collective, nbytes, args.fabric, params, **kw,
                               details=True, tool_counters=bool(args.out),
                               timeline_rank=args.timeline_rank,
                               progress=progress.size(i, nbytes) if progress else None,
                               observer=both)
                if caps is not None:
                    row["captures"] = caps.report
            except (ScenarioError, ValueError) as e:
                if progress:
                    progress.close()
                _err(f"size {nbytes}: {e}")
                return EXIT_USAGE
            if obs is not None:
                row["faults"] = rep = obs.report(row, base_obs, base_row, fault_list)
                fault_series = {"size_bytes": row["size_bytes"],
                                "arrays": obs.series(rep, base_obs), "names": obs.names}
            tc = row.pop("tool_counters", None)
            if tc is not None and row["error"] is None:  # the largest completed size's
                tool_doc = {"size_bytes": row["size_bytes"], **tc}
            tr = row.pop("trace", None)
            if tr is not None:
                trace_doc = tr  # the largest completed size's
            why = row.pop("trace_problem", None)
            if why:
                _err(f"--trace: size {nbytes}: {why}; the trace is of a smaller size")
            rows.append(row)
            if row["error"] is None:
                if kept is not None:
                    del kept["links"], kept["timeline"]
                kept = row
            else:
                row.pop("links", None)
                row.pop("timeline", None)
            if progress:
                progress.close()
            if row["error"] is None:
                body = _body(row, row["wrong"])
                ip = row["inplace"]
                in_body = _body(ip, row["wrong"]) if ip else NOT_RUN if faulty else None
                emit(format_row(row["size_bytes"], row["count"], args.datatype, redop, root,
                                body, in_body))
            else:
                emit(f"# {row['size_bytes']:10d}  {row['error']}")
                if row.get("failed"):  # a QP error stopped the collective, as NCCL's
                    _err(f"size {row['size_bytes']}: {row['error']}")
            bad = (row.get("faults") or {}).get("problems")
            if bad:  # a QP that does not balance: nothing may be lost silently
                problems += 1
                more = f" (and {len(bad) - 1} more QPs)" if len(bad) > 1 else ""
                _err(f"size {row['size_bytes']}: {bad[0]}{more}")
    except KeyboardInterrupt:
        if progress:
            progress.close()
        outs = [p for p in (args.out, args.json, args.csv) if p]
        _err(f"interrupted: nothing written ({', '.join(outs)} left as they were)" if outs
             else "interrupted")
        return EXIT_INTERRUPTED
    ok = [r for r in rows if r["error"] is None]
    if ok:
        emit(f"# Avg bus bandwidth    : {sum(r['busbw_GB_per_s'] for r in ok) / len(ok):g}")
    emit("#")
    # the link layer's column: PFC pause frames on RoCE, credit stall time on IB
    fc_head, fc_unit, w = ("credit_stall", "(us)", 12) if ib else ("pfc_pauses", "", 10)
    emit(f"# {'size':>10}  {'channels':>8}  {'transfers':>9}  {fc_head:>{w}}  "
         f"{'ce_marks':>9}  {'cnps':>7}  {'drops':>7}  {'max_queue':>10}  busiest link")
    emit(f"# {'(B)':>10}  {'':>8}  {'':>9}  {fc_unit:>{w}}  {'':>9}  {'':>7}  {'':>7}  "
         f"{'(B)':>10}  (utilisation)")
    for r in rows:
        c = r["counters"]
        b = r["busiest_link"]
        busiest = f"{b['name']} {100 * b['utilisation']:.1f}%" if b else (
            "none (NVLink only)" if r.get("error") is None and r.get("links") is not None
            else "-")
        fc = (f"{c.get('credit_stall_ps', 0) / 1e6:{w}.3f}" if ib
              else f"{c['pfc_pauses']:{w}d}")
        emit(f"# {r['size_bytes']:10d}  {r['nchannels']:8d}  {r['transfers']:9d}  "
             f"{fc}  {c['ce_marks']:9d}  {c['cnps']:7d}  {c['drops']:7d}  "
             f"{c['max_queue_bytes']:10d}  {busiest}")
    if any("faults" in r for r in rows):
        for line in fault_lines(rows, fault_list):
            emit(line)
    if args.fidelity == "auto":  # which sizes ran without packets
        flow = [r["size_bytes"] for r in rows if r.get("fidelity") == "flow"]
        emit(f"# flow fidelity for {', '.join(map(str, flow))} (auto: from 16 GiB of ranks "
             f"x size)" if flow else "# every size with packets (auto: below 16 GiB of ranks "
             "x size)")
    ring = [str(r["size_bytes"]) for r in rows if r.get("engine") == "ring"]
    if ring:  # the calls the ring engine ran
        how = ("a QP's rate its max-min share with every QP of the ring sending"
               if any(r.get("fidelity") == "flow" for r in rows if r.get("engine") == "ring")
               else "the network sends as packets")
        emit(f"# {', '.join(ring)}: the ring engine (no transfer objects: each ring edge's "
             f"sends worked out in time order; {how}); #wrong N/A: no symbolic replay of "
             f"the data (--engine job runs the transfers)")
        for r in rows:
            if r.get("ring_held_back"):
                emit(f"# {r['size_bytes']}: the ring engine held edges back "
                     f"{r['ring_held_back']} times (one ran further ahead of the next than "
                     f"it keeps receipts for): its figures may be late; --engine job")
    nv = [str(r["size_bytes"]) for r in rows if r.get("engine") == "chunk"]
    if nv:  # the calls the chunk engine ran
        emit(f"# {', '.join(nv)}: the chunk engine (no transfer objects: every chunk of "
             f"the tree worked out in time order, each link a FIFO of messages instead "
             f"of max-min shares); #wrong N/A: no symbolic replay of the data (--engine job "
             f"runs the transfers)")
    pooled = [str(r["size_bytes"]) for r in rows if r.get("nvlink_pooled")]
    if pooled:
        emit(f"# {', '.join(pooled)}: NVLink pooled (--pool-nvlink: each node's NVLink ports "
             f"one resource as fast as its GPUs' together, a node's copies into and out of "
             f"the NVSwitch one transfer each; not exact, docs/explanation/collectives.md)")
    elif args.pool_nvlink:
        emit("# --pool-nvlink: no size ran an NVLS tree on the chunk engine: nothing pooled")
    for r in rows:  # flow fidelity: the calls run by their steady loops
        st = r.get("steady")
        if st:
            emit(f"# {r['size_bytes']}: {st['loops_run']} of {st['loops']} ring loops "
                 f"simulated; loops {st['loops_run'] - 5} to {st['loops_run'] - 3} each "
                 f"repeated the one before {st['period_ps'] / 1e6:.3f} us later, transfer "
                 f"for transfer, and the {st['loops'] - st['loops_run']} others add that "
                 f"each (--every-loop simulates them all)")
    if any("tuner" in r for r in rows):
        for line in tuner_lines(rows, params["hw"]):
            emit(line)
    doc = {"collective": str(coll), "nranks": nranks, "nodes": shape[0],
           "gpus_per_node": shape[1], "fabric": args.fabric,
           # an InfiniBand fabric says so (RoCE documents keep their keys)
           **({"header_stack": "ib", "flow_control": "credits"} if ib else {}),
           "params": params, "algorithm": args.algo, "protocol": args.proto,
           # null when NCCL's model picks them per size (each row's nchannels)
           "channels": None if auto_ch else channels, "qps_per_connection": args.qps,
           "datatype": args.datatype, "op": redop, "root": root,
           "iters": args.iters, "warmup_iters": args.warmup_iters,
           **({"fidelity": args.fidelity} if args.fidelity != "packet" else {}),
           "timeline_rank": args.timeline_rank, "results": rows}
    header, csv_rows = csv_table(doc)
    try:
        if args.json:
            with atomic_file(args.json, "w", encoding="utf-8") as fp:
                _write_json(doc, fp)
        if args.csv:
            with atomic_file(args.csv, "w", encoding="utf-8", newline="") as fp:
                _write_csv(header, csv_rows, fp)
        if args.trace:
            if trace_doc is None:
                _err(f"--trace: no size completed with a trace; {args.trace} holds no event")
            with atomic_file(args.trace, "w", encoding="utf-8") as fp:
                json.dump(trace_doc or {"traceEvents": [], "displayTimeUnit": "ns"}, fp,
                          separators=(",", ":"))
                fp.write("\n")
        if args.out:
            with atomic_dir(args.out, force=args.force) as tmp:
                with open(os.path.join(tmp, "results.json"), "w", encoding="utf-8") as fp:
                    _write_json(doc, fp)
                with open(os.path.join(tmp, "results.csv"), "w", encoding="utf-8",
                          newline="") as fp:
                    _write_csv(header, csv_rows, fp)
                with open(os.path.join(tmp, "table.txt"), "w", encoding="utf-8") as fp:
                    fp.write("\n".join(table) + "\n")
                if tool_doc is not None:  # lossless counters DIR reads it
                    with open(os.path.join(tmp, "counters.json"), "w",
                              encoding="utf-8") as fp:
                        json.dump(tool_doc, fp, separators=(",", ":"))
                        fp.write("\n")
                if cap_tmp is not None:  # --capture: the largest size's pcaps
                    import shutil

                    for name in sorted(os.listdir(cap_tmp.name)):
                        shutil.move(os.path.join(cap_tmp.name, name), os.path.join(tmp, name))
                if not args.no_plots:
                    from sim.study.collective_plots import plot_results

                    plot_results(doc, tmp)
                    # the largest size's (docs/reference/collective-results.md, "The PNGs")
                    if fault_series is not None:
                        from sim.study.fault_plot import write_collective_figure

                        write_collective_figure(doc, fault_series, tmp)
    except OutputError as e:
        _err(str(e))
        return EXIT_USAGE
    except OSError as e:
        _err(f"{e.filename or args.out}: cannot write: {e.strerror or e}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        _err("interrupted while writing: the outputs not yet in place were left as they were")
        return EXIT_INTERRUPTED
    return EXIT_OK if len(ok) == len(rows) and not problems else EXIT_FAIL


def _flow_control(fabric: Any, params: Mapping[str, Any]) -> str:
    """The header line's link-level flow control: ``pfc true|false`` on RoCE, on an
    InfiniBand fabric ``credits on VLs 0-7`` (its data VLs, sim.flowctl.ib)."""
    if fabric.stack.name != "ib":
        return f"pfc {str(params['pfc']).lower()}"
    from sim.flowctl.ib import IbConfig

    cfg = fabric.ib if fabric.ib is not None else IbConfig()
    vls = sorted({cfg.sl2vl[tc] for tc in cfg.vcs})
    span = (f"VL {vls[0]}" if len(vls) == 1 else f"VLs {vls[0]}-{vls[-1]}"
            if vls == list(range(vls[0], vls[-1] + 1)) else
            "VLs " + ",".join(map(str, vls)))
    return f"credits on {span}"


def _us(ps: int | None) -> str:
    return "-" if ps is None else f"{ps / 1e6:.3f}"


def fault_lines(rows: Sequence[Mapping[str, Any]],
                entries: Sequence[Mapping[str, Any]] = ()) -> list[str]:
    """The table footer of a run with faults, one line per size (its ``faults`` block,
    :func:`sim.study.fault_report.collective_report`): the out-of-place time against the
    fault-free run and the stall (µs), bytes retransmitted (RC), the frames the faults
    destroyed by reason, the longest time to recover (µs), the QPs' conservation, and the
    QP error / failovers, or that no fault acted before the size ended (a fault whose
    ``at_us`` is after it changes nothing: ``entries``, the resolved ``-p`` faults, give the
    first start); then why the in-place columns are N/A and what recover means."""
    starts = [e["at_us"] for e in entries if e.get("kind") != "straggler"]
    out = ["#", f"# {'faults':>10}  {'time':>12}  {'fault-free':>12}  {'stall':>12}  "
                f"{'retx':>10}  {'recover':>10}  {'QPs':>9}  drops by reason; QP error, "
                f"failover",
           f"# {'size (B)':>10}  {'(us)':>12}  {'(us)':>12}  {'(us)':>12}  {'(B)':>10}  "
           f"{'(us)':>10}  {'balance':>9}"]
    notes = ["# in-place: N/A: with faults only the out-of-place iterations run (the faults' "
             "times count from the size's start, so in-place iterations run after them would "
             "not meet the same faults; their network traffic is the same)",
             "# recover: from the fault's end (its start if it lasts) until the run keeps the "
             "fault-free run's pace (-: not before its end, or no fault-free run)"]
    for r in rows:
        f = r.get("faults")
        if f is None:
            continue
        t = f["time"]
        rec = [iv["time_to_recover_ps"] for iv in f["intervals"]
               if iv.get("time_to_recover_ps") is not None]
        cons = f["conservation"]
        bal = "ok" if cons["balanced"] else f"{len(cons['unbalanced_flows'])} bad"
        drops = ", ".join(f"{k} {v}" for k, v in f["drops"]["packets_by_reason"].items())
        what = [drops or "no drop"]
        if not f["events"] and (starts or not entries):
            first = f" (the first starts at {min(starts):g} us)" if starts else ""
            what.append(f"no fault acted before the size ended{first}")
        if f["failed"]:
            what.append(f"QP {f['failed']['qp']} error at {_us(f['failed']['t_ps'])} us")
        if f["failovers"]["count"]:
            what.append(f"{f['failovers']['count']} QPs moved, "
                        f"{f['failovers']['resent_bytes']} B re-sent")
        base = "not run" if f["baseline"] != "run" else _us(t["baseline_ps"])
        out.append(f"# {r['size_bytes']:10d}  {_us(t['faulted_ps']):>12}  {base:>12}  "
                   f"{_us(t['stall_ps']):>12}  {f['retransmitted']['bytes']:10d}  "
                   f"{_us(max(rec)) if rec else '-':>10}  {bal:>9}  {'; '.join(what)}")
    return out + notes


def tuner_lines(rows: list[dict[str, Any]], hw: str) -> list[str]:
    """The tuner's picks per size, as NCCL_DEBUG=INFO's tuning lines say them: algorithm,
    protocol and channels run, NCCL's own pick over every algorithm (it differs where NCCL
    picks what the simulator does not run: PAT), and the model's time."""
    from sim.workloads.tuner import NCCL_VERSION, nccl_text

    picks = [(r, nccl_text(t["algorithm"], t["protocol"]), t) for r in rows
             if (t := r.get("tuner")) is not None]
    w = max([15, *(len(x) for _, ran, t in picks for x in (ran, t["nccl"]))])
    out = ["#", f"# {'tuner':>10}  {'ran':>{w}}  {'channels':>8}  {'NCCL picks':>{w}}  "
                f"{'model time':>10}   NCCL {NCCL_VERSION}'s cost model, node {hw}",
           f"# {'size (B)':>10}  {'':>{w}}  {'':>8}  {'':>{w}}  {'(us)':>10}"]
    for r, ran, t in picks:
        out.append(f"# {r['size_bytes']:10d}  {ran:>{w}}  {t['channels']:8d}  "
                   f"{t['nccl']:>{w}}  {t['model_time_us']:10.1f}")
    return out



def _write_json(doc: Mapping[str, Any], fp: TextIO) -> None:
    json.dump(doc, fp, indent=2)
    fp.write("\n")


def _write_csv(header: Sequence[str], rows: Sequence[Sequence[Any]], fp: TextIO) -> None:
    w = csv.writer(fp, lineterminator="\n")
    w.writerow(header)
    w.writerows(rows)


#: CSV columns taken from a results row (``sim.scenarios.collective.run_size``): (column,
#: where in the row).  algbw/busbw are nccl-tests' GB/s (10^9 bytes/s).
_CSV_FIGURES = (("time_us", "time_us"), ("algbw_GB_per_s", "algbw_GB_per_s"),
                ("busbw_GB_per_s", "busbw_GB_per_s"))
_CSV_COUNTERS = ("pfc_pauses", "ce_marks", "cnps", "drops", "max_queue_bytes")


def engine_option_problem(args: argparse.Namespace) -> str | None:
    """Why ``--engine chunk`` or ``--pool-nvlink`` cannot run as ``args`` ask (the chunk
    engine runs at flow fidelity), or None."""
    if args.engine == "chunk" and args.fidelity == "packet":
        return "--engine chunk: the chunk engine runs at flow fidelity; add --fidelity flow"
    if args.pool_nvlink and (args.fidelity == "packet" or args.engine in ("ring", "job")):
        return ("--pool-nvlink: the chunk engine's NVLS trees at flow fidelity only; add "
                "--fidelity flow" + (" and drop --engine " + args.engine
                                     if args.engine in ("ring", "job") else ""))
    return None


def csv_table(doc: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    """``results.csv`` of a results document: the header (units in the names) and one row
    per size: size, count, type, redop, root, the out-of-place time, algbw, busbw and
    #wrong, the same in place (``inplace_*``; empty without in-place iterations), channels,
    transfers, the fabric's counters (and any further counter a row has, e.g.
    ``nvlink_bytes``), the busiest link, the transfers' time p50/p99/max (µs: the step time and
    its tail) and ``error`` (empty when the size completed); with faults also the columns of
    :data:`_CSV_FAULTS`."""
    rows = doc["results"]
    extra: list[str] = []
    for r in rows:
        for k in (*r["counters"], *(["nvlink_bytes"] if "nvlink_bytes" in r else [])):
            if k not in _CSV_COUNTERS and k not in extra:
                extra.append(k)
    header = ["size_bytes", "count", "type", "redop", "root",
              *(c for c, _ in _CSV_FIGURES), "wrong",
              *(f"inplace_{c}" for c, _ in _CSV_FIGURES), "inplace_wrong",
              "channels", "transfers", *_CSV_COUNTERS, *extra, "busiest_link",
              "busiest_link_utilisation", "transfer_p50_us", "transfer_p99_us",
              "transfer_max_us", "error"]
    faulty = any("faults" in r for r in rows)
    if faulty:  # only with faults: other runs keep their columns
        header += list(_CSV_FAULTS)
    out = []
    for r in rows:
        ip = r.get("inplace") or {}
        wrong = "" if r.get("wrong") is None else r["wrong"]

        def fig(src: Mapping[str, Any], key: str) -> Any:
            v = src.get(key)
            return "" if v is None else v

        counters = {**r["counters"], **({"nvlink_bytes": r["nvlink_bytes"]}
                                        if "nvlink_bytes" in r else {})}
        out.append([r["size_bytes"], r["count"], doc["datatype"], doc["op"], doc["root"],
                    *(fig(r, k) for _, k in _CSV_FIGURES), wrong,
                    *(fig(ip, k) for _, k in _CSV_FIGURES), wrong if ip else "",
                    r["nchannels"], r["transfers"],
                    *(counters.get(k, "") for k in (*_CSV_COUNTERS, *extra)),
                    *((b["name"], b["utilisation"]) if (b := r.get("busiest_link"))
                      else ("", "")),
                    *((tt["p50"], tt["p99"], tt["max"]) if (tt := r.get("transfer_time_us"))
                      else ("", "", "")),
                    r.get("error") or ""])
        if faulty:
            out[-1] += _fault_cells(r.get("faults"))
    return header, out


#: results.csv columns of a run with faults (the row's ``faults`` block; µs, bytes, frames).
#: (The bytes RC resent are the counters' ``retransmitted_bytes`` column, not repeated here.)
_CSV_FAULTS = ("fault_free_time_us", "stall_us", "fault_drops", "time_to_recover_us",
               "unbalanced_qps")


def _fault_cells(f: Mapping[str, Any] | None) -> list[Any]:
    """The :data:`_CSV_FAULTS` cells of one row (empty where there is no figure)."""
    if f is None:
        return [""] * len(_CSV_FAULTS)

    def us(ps: int | None) -> Any:
        return "" if ps is None else ps / 1e6

    rec = [iv["time_to_recover_ps"] for iv in f["intervals"]
           if iv.get("time_to_recover_ps") is not None]
    return [us(f["time"]["baseline_ps"]), us(f["time"]["stall_ps"]),
            sum(f["drops"]["packets_by_reason"].values()),
            us(max(rec)) if rec else "", len(f["conservation"]["unbalanced_flows"])]


class Progress:
    """The progress line on ``stream`` (stderr): ``size 2/5 (512K): 123/896 transfers``,
    redrawn in place (``\\r``) on a terminal at most every ``interval_s`` seconds; elsewhere
    (``--progress`` into a file) a line at most every ``interval_s`` x 5 seconds.  Never on
    stdout, which holds the table.  After ``eta_after_s`` seconds of a size it adds an
    estimate of that size's time left, from its transfers received so far (``about 2 min
    left``: the rate so far, so a rough guide)."""

    def __init__(self, nsizes: int, stream: TextIO, interval_s: float = 0.2,
                 clock: Callable[[], float] = time.monotonic, eta_after_s: float = 3.0
                 ) -> None:
        self.nsizes, self.stream, self.clock = nsizes, stream, clock
        self.eta_after_s = eta_after_s
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.interval_s = interval_s if self.tty else 5 * interval_s
        self._last = -1e18
        self._width = 0

    def size(self, i: int, nbytes: int) -> Callable[[int, int], None]:
        """The ``run_size(progress=)`` callback of the ``i``-th size (0-based)."""
        from sim.study.collective_plots import size_text

        self._last = -1e18
        begin = self.clock()

        def update(done: int, total: int) -> None:
            now = self.clock()
            if now - self._last < self.interval_s and done < total:
                return
            self._last = now
            pct = f" ({100 * done // total}%)" if total else ""
            spent = now - begin
            left = ""
            if 0 < done < total and spent >= self.eta_after_s:
                left = f", about {_duration_text(spent * (total - done) / done)} left"
            self._show(f"lossless collective: size {i + 1}/{self.nsizes} "
                       f"({size_text(nbytes)}): {done}/{total} transfers{pct}{left}")

        return update

    def _show(self, text: str) -> None:
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self._width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Erase the line (terminal) before the next output."""
        if self.tty and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
        self._width = 0


def _duration_text(seconds: float) -> str:
    """``12 s``, ``3 min``, ``1 h 20 min``: a time left, rounded as a person reads it."""
    s = max(1, round(seconds))
    if s < 60:
        return f"{s} s"
    m = round(s / 60)
    if m < 60:
        return f"{m} min"
    return f"{m // 60} h {m % 60} min"


def cmd_plot_collective(args: argparse.Namespace) -> int:
    """``lossless plot DIR...`` for ``lossless collective`` results folders: one folder gets
    its three PNGs rewritten; several give one ``busbw_vs_size.png`` overlaying their curves
    (written to ``-o FILE``, default ``busbw_vs_size.png`` here)."""
    from sim.study.collective_plots import figures, load, overlay_figure, write_figures

    dirs = list(args.dir)
    try:
        docs = [load(d) for d in dirs]
    except ValueError as e:
        _err(str(e))
        return EXIT_USAGE
    try:
        if len(docs) == 1 and not getattr(args, "output", None):
            paths = write_figures(figures(docs[0]), dirs[0])
        else:
            out = getattr(args, "output", None) or "busbw_vs_size.png"
            names = [os.path.basename(os.path.normpath(d)) for d in dirs]
            import matplotlib

            matplotlib.use("Agg")
            fig = overlay_figure(docs, names)
            folder = os.path.dirname(os.path.abspath(out))
            paths = write_figures({os.path.basename(out): fig}, folder)
    except (OSError, ValueError, KeyError, TypeError) as e:
        _err(f"{dirs[0] if len(dirs) == 1 else ' '.join(dirs)}: cannot plot: {e}")
        return EXIT_USAGE
    for p in paths:
        print(p)
    return EXIT_OK


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from sim.workloads.nccl import DTYPE_BYTES, MAXCHANNELS, Algorithm, Protocol

    c = sub.add_parser(
        "collective", help="run an NCCL collective on a simulated fabric (nccl-tests table)",
        description="Run an NCCL collective (NCCL's channels, chunks, slices, in-flight "
                    "limit, protocol and QPs) through a simulated RoCE or InfiniBand "
                    "fabric (-p fabric=ib) for each size and print the nccl-tests table, "
                    "then PFC pauses, CE marks, CNPs, drops, the deepest queue and the "
                    "busiest link per size (docs/reference/collective.md).  Exit 1 when a "
                    "size does not complete (e.g. frames lost on NICs that never resend, "
                    "-p reliable=false, or a QP error).")
    c.add_argument("collective", metavar="COLLECTIVE",
                   help=f"{', '.join(str(x) for x in Collective)}")
    c.add_argument("-b", "--minbytes", type=_SIZE, default=1 << 20, metavar="SIZE",
                   help="smallest size (nccl-tests' -b; K/M/G are powers of 1024; default 1M)")
    c.add_argument("-e", "--maxbytes", type=_SIZE, default=16 << 20, metavar="SIZE",
                   help="largest size (default 16M)")
    g = c.add_mutually_exclusive_group()
    g.add_argument("-f", "--stepfactor", type=integer(2, 1024), metavar="N",
                   help="multiply the size by N (default 2)")
    g.add_argument("-i", "--stepbytes", type=_STEP, metavar="SIZE",
                   help=f"add SIZE (>= 1 byte) instead of multiplying; at most {MAX_SIZES} "
                        f"sizes")
    c.add_argument("-n", "--iters", type=integer(1, 1000), default=1, metavar="N",
                   help="timed iterations per size (default 1: the simulator is "
                        "deterministic)")
    c.add_argument("-w", "--warmup_iters", type=integer(0, 1000), default=0, metavar="N",
                   help="warm-up iterations before them (default 0)")
    c.add_argument("-d", "--datatype", choices=list(DTYPE_BYTES), default="float",
                   metavar="TYPE", help=f"datatype: {', '.join(DTYPE_BYTES)} (default float)")
    c.add_argument("-o", "--op", default="sum", metavar="OP",
                   help="reduction: sum, prod, max, min, avg (printed only; default sum)")
    c.add_argument("-r", "--root", type=integer(0, 1 << 16), default=0, metavar="RANK",
                   help="broadcast root (default 0)")
    c.add_argument("--fabric", default="rail", metavar="KIND|FILE.toml",
                   help="rail: rail-optimised leaves and spines; star: one non-blocking "
                        "switch; fattree: 3-tier k-ary fat-tree (-p k=, oversubscription=); "
                        "superpod: DGX H100 SuperPOD scalable units (-p sus=); nvl72: GB200 "
                        "NVL72 racks (72 GPUs on NVLink 5 each; -p nodes= racks, rails=, "
                        "radix=); a fabric file FILE.toml (its hosts are the ranks, its "
                        "traffic is left out; -p TABLE.KEY=VALUE overrides it); or "
                        "ibnetdiscover's output (a GPU per NIC of its nodes; -p "
                        "topology.lft=FILE: OpenSM's tables) (default rail)")
    c.add_argument("-p", "--param", type=_kv, action="append", metavar="KEY=VALUE",
                   help="fabric parameter (repeatable): nodes, gpus_per_node, spines, ecmp, "
                        "k, oversubscription, sus, superpod_nodes, rails, radix, hw, "
                        "nccl_host, nvlink, nvlink_gbps, "
                        "nvlink_latency_ns, pxn, link_gbps, pfc, cc, preset, buffer_kb, "
                        "xoff_kb, kmin_kb, kmax_kb, pmax, packet_bytes, prop_ns, seed, "
                        "limit_ms, reliable, failover, detect_us, converge_us ...; "
                        "fault=KIND:KEY=VALUE,... (repeatable, "
                        "docs/howto/inject-faults.md); NCCL_ALGO=Ring etc.: NCCL's "
                        "variables as in the environment (docs/reference/collective.md)")
    c.add_argument("--fidelity", choices=["packet", "flow", "auto"], default="packet",
                   help="packet (default): every frame through the switches' queues, PFC, "
                        "ECN, congestion control; flow: each QP a fluid flow at its max-min "
                        "fair rate on its path (no packets: no queues, PFC, ECN, congestion "
                        "control or losses; faster; faults act on the flows' links and "
                        "paths; loss faults, --capture and adaptive routing refused); auto: "
                        "flow from 16 GiB of ranks x size, without faults, --capture or "
                        "adaptive routing")
    c.add_argument("--engine", choices=list(ENGINES), default="auto",
                   help=f"auto (default): at flow fidelity a ring AllReduce, AllGather "
                        f"or ReduceScatter of {RING_ENGINE_SENDS:,} sends or more on the "
                        f"ring engine, a tree or NVLS tree AllReduce of as many transfers "
                        f"on the chunk engine (no transfer objects), the rest as transfers "
                        f"driven one by one (job); ring, chunk or job: always that one "
                        f"(ring: ring calls only; with packets too: its NVLink and NCCL's "
                        f"host side worked out by the engine, the network sends as packets; "
                        f"chunk: tree and NVLS AllReduces without SHARP (other calls as "
                        f"auto), flow fidelity only, each link a FIFO; "
                        f"not with faults, stragglers or failover)")
    c.add_argument("--pool-nvlink", action="store_true",
                   help="flow fidelity, the chunk engine's NVLS and NVLS tree AllReduces: "
                        "each node's NVLink ports as one resource as fast as its GPUs' "
                        "together, its copies into and out of the NVSwitch one transfer "
                        "each (2-3x faster at 1,000+ GPUs; not exact: "
                        "docs/explanation/collectives.md, \"Pooled NVLink\")")
    c.add_argument("--every-loop", action="store_true",
                   help=f"flow fidelity: simulate every loop of a ring call of "
                        f"{STEADY_MIN_LOOPS} loops or more (default: only until its loops "
                        f"repeat, one period apart, transfer for transfer; then each loop "
                        f"left adds that period, exactly)")
    c.add_argument("--algo", choices=["auto", *(str(a) for a in Algorithm)], default=None,
                   help="auto (default): NCCL's tuner picks per size among the algorithms "
                        "simulated (ring, tree, nvls on one node, nvls_tree on several; with "
                        "SHARP (-p sharp=true, NCCL_COLLNET_ENABLE=1) nvls, collnet_direct "
                        "and collnet_chain across nodes; all but ring AllReduce only), as "
                        "restricted by NCCL_ALGO")
    c.add_argument("--proto", choices=["auto", *(str(p) for p in Protocol)], default=None,
                   help="auto (default): NCCL's tuner picks per size (NCCL_PROTO restricts "
                        "it)")
    c.add_argument("--channels", type=integer(1, MAXCHANNELS), default=None, metavar="N",
                   help="NCCL channels (NCCL_MIN/MAX_NCHANNELS; small sizes use fewer; "
                        "default: with the tuner NCCL's (the environment's "
                        "NCCL_MIN/MAX_NCHANNELS apply), else one per NIC of a node, "
                        "gpus_per_node, when there are several nodes of several GPUs, else 2)")
    c.add_argument("--qps", type=integer(1, 128), default=None, metavar="N",
                   help="QPs per connection (default: NCCL_IB_QPS_PER_CONNECTION from the "
                        "environment, else 1)")
    c.add_argument("--json", metavar="FILE", help="write the results as JSON")
    c.add_argument("--capture", action="append", metavar="PORT",
                   help="with --out: write the frames leaving PORT during the largest size "
                        "to capture_<node>_p<port>.pcap (leaf0:p2, a host h12, or "
                        "NODE:PORT in ids; repeatable; all together at most 1 GB)")
    c.add_argument("--trace", metavar="FILE.json",
                   help="write the largest completed size's last out-of-place iteration as "
                        "a Chrome trace (Perfetto, chrome://tracing): a process per rank, a "
                        "track per channel, direction and path (NVLink or network)")
    c.add_argument("--csv", metavar="FILE", help="write the results as CSV, one row per size")
    c.add_argument("--out", metavar="DIR",
                   help="write results.json, results.csv, table.txt and the PNG plots to "
                        "DIR, whole or not at all; DIR must be new, empty or an earlier "
                        "output of lossless")
    c.add_argument("--force", action="store_true",
                   help="replace --out even if it is a non-empty folder lossless did not write")
    c.add_argument("--no-plots", action="store_true", help="no PNGs in --out")
    c.add_argument("--no-baseline", action="store_true",
                   help="with faults: do not run each size once more without them (the "
                        "fault-free time, the stall, are then not given)")
    c.add_argument("--timeline-rank", type=integer(0, 1 << 16), default=0, metavar="RANK",
                   help="the rank of step_timeline.png (default 0)")
    c.add_argument("--progress", action="store_true",
                   help="a progress line on stderr even when it is not a terminal")
    c.add_argument("--quiet", action="store_true", help="no progress line")
    c.set_defaults(func=cmd_collective)

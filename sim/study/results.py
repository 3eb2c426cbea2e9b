"""Running a scenario and writing its results (docs/reference/replay.md; the files:
docs/reference/results-folder.md).

:func:`run_scenario` builds a scenario, runs the engine in chunks of simulated time (a tqdm
bar on stderr when it is a terminal), and writes to the output directory:

- ``summary.json``: scenario, params, seed, duration_ps, per-flow and per-port figures, totals;
- ``timeseries.npz``: queue depths, per-flow throughput bins and PFC state (keys documented
  in docs/reference/results-folder.md);
- ``events.jsonl``: every PFC send/receive/expiry, CE mark, drop, CNP and rate change,
  one JSON object per line;
- ``bottleneck.pcap`` (and ``capture_<node>_<port>.pcap`` per extra capture): frames leaving
  the port, data frames synthesised as RDMA WRITEs (:class:`Capture`): RoCEv2 frames
  (:class:`wire.template.RoceTemplate`), native IB packets on an InfiniBand link
  (:class:`wire.template.IbTemplate`);
- PNG plots (:mod:`sim.study.plot`) unless ``plots=False``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import pairwise
from typing import Any

from sim.addresses import flow_qp, node_ip, node_lid, node_mac
from sim.nic.host import Host
from sim.packet import CE
from sim.study.conservation import flow_conservation
from sim.study.conservation import live_packets as _live_packets
from sim.study.samples import (
    PCAP_FILE_HEADER_BYTES,
    PCAP_RECORD_HEADER_BYTES,
    WRITE_FIRST,
    WRITE_ONLY,
    CaptureBudget,
    ControlIds,
    FrameLog,
    RxTap,
    SampleSink,
)
from sim.study.series import SeriesStore, step_integral
from sim.study.series import write_npz as _write_npz
from sim.trace import JsonlTracer
from sim.workloads.replay import REPLAY_FLOW_BASE
from wire.ib import LINKTYPE_INFINIBAND
from wire.ib_ext import RETH
from wire.linkstack import ROCE, HeaderStack
from wire.pcapio import CaptureWriter
from wire.template import IbTemplate, RoceTemplate, make_rows

__all__ = ["Recorder", "run_scenario", "THROUGHPUT_BINS", "jain_index", "queue_mean_bytes",
           "step_mean"]

#: The run is cut into this many throughput bins (bin width = duration / bins, rounded up).
THROUGHPUT_BINS = 200
#: Progress-bar / engine chunks.
_CHUNKS = 100
#: "Take the scenario's value" default of run_scenario's capture knobs.
_SCENARIO = object()
#: Default cap on all the pcap files of one run together (``--capture-limit-mb``), bytes.
DEFAULT_CAPTURE_LIMIT_BYTES = 1024 * 10**6
#: Warn before a run whose captures are estimated to exceed this (or the cap), bytes.
CAPTURE_WARN_BYTES = 256 * 10**6
#: Frame size the capture estimate assumes with ``--snaplen`` (a 1024-B-payload RoCEv2
#: frame, the built-in scenarios' default ``packet_bytes``), bytes.
_ESTIMATE_FRAME_BYTES = 1082


class Recorder(SampleSink):
    """Tracer collecting queue series, per-port counters and PFC state; forwards the logged
    event types (PFC, CE marks, drops, CNPs, rate changes) to ``log``.  The queue and
    ingress samples (``on_enqueued``, ``on_dequeued``, ``ingress_sample``, and the series
    ``queues`` and ``ingress``) and the events (``emit``, and the counters and series it
    keeps: ``drops``, ``drops_by_reason``, ``flow_drops``, ``ce``, ``cnps``, ``pfc_tx``,
    ``pfc_rx``, ``rates``) are :class:`sim.study.samples.SampleSink`'s, compiled with the
    core.

    Every series (``queues``, ``pfc_tx``, ``pfc_rx``, ``ingress``, ``rates``) is a
    :class:`sim.study.series.Series` of ``store`` (typed columns, read like tuples of
    sequences); with a store that spills (``SeriesStore(dir)``, what ``run_scenario`` uses) a
    run of any duration records them in bounded memory.  The default store keeps
    everything in memory.  ``control`` (a :class:`sim.study.samples.ControlIds`, a tap for
    the hosts' ports) tells the control frames the hosts send from their data; with its
    ``fabric`` set, the ids of control frames no longer in flight are forgotten, so nothing
    here grows with the run's length but the spilled series."""

    def __init__(self, log: Any = None, store: SeriesStore | None = None) -> None:
        super().__init__(store if store is not None else SeriesStore())
        self.log = log
        self.control = ControlIds(_live_packets, REPLAY_FLOW_BASE)

    def start_rates(self, fabric: Any) -> None:
        """Initial samples of every flow whose rate control can change its rate."""
        for node in fabric.nodes.values():
            if not isinstance(node, Host) or node.cc_name == "fixed":
                continue
            for fid, ctl in sorted(node.cc.items()):
                f = fabric.flows.get(fid)
                r = self.rates[fid] = self._new("qqqd")
                for col, value in zip(r, (f.start_ps if f else 0, ctl.rate_bps,
                                          ctl.target_rate_bps, float(ctl.alpha)), strict=True):
                    col.append(value)

    def mean_queue_bytes(self, duration_ps: int) -> dict[tuple[int, int], float]:
        """Time-weighted mean depth per (node, port), all queues summed, over [0, duration]
        (each queue's exact integral, read back in chunks, over the duration)."""
        out: dict[tuple[int, int], float] = {}
        if duration_ps <= 0:
            return out
        st = self.store
        self.flush_samples()
        for (node, port, _q), s in self.queues.items():
            area = step_integral(zip(st.chunks(s, 0), st.chunks(s, 1), strict=True), 0,
                                 duration_ps)
            out[(node, port)] = out.get((node, port), 0.0) + area / duration_ps
        return out

    def arrays(self) -> Iterator[tuple[str, Any]]:
        """(timeseries.npz key, column) of every series, in the file's order; a column is a
        (dtype, rows, chunks) triple for :func:`sim.study.series.write_npz`."""
        self.flush_samples()
        col = self.store.column
        for (n, p, q), s in sorted(self.queues.items()):
            yield f"queue_n{n}_p{p}_q{q}_t_ps", col(s, 0)
            yield f"queue_n{n}_p{p}_q{q}_bytes", col(s, 1)
        for kind, table in (("tx", self.pfc_tx), ("rx", self.pfc_rx)):
            for (n, p, pr), s in sorted(table.items()):
                yield f"pfc_{kind}_n{n}_p{p}_prio{pr}_t_ps", col(s, 0)
                yield f"pfc_{kind}_n{n}_p{p}_prio{pr}_state", col(s, 1)
        for (n, p, g), s in sorted(self.ingress.items()):
            yield f"ingress_n{n}_p{p}_pg{g}_t_ps", col(s, 0)
            yield f"ingress_n{n}_p{p}_pg{g}_bytes", col(s, 1)
        for fid, s in sorted(self.rates.items()):
            for i, suffix in enumerate(("t_ps", "bps", "target_bps", "alpha")):
                yield f"rate_f{fid}_{suffix}", col(s, i)


def _write_payload(msg: int, per: int, hdr: int) -> int:
    """Payload bytes of a synthesised WRITE message of ``msg`` frame bytes cut into frames
    of ``per`` bytes with ``hdr`` bytes of headers each, the last one short: each frame's
    bytes past its headers, the first's past its RETH too (none below 0)."""
    full, rem = divmod(msg, per)
    first = per if full else rem
    pay = max(first - hdr - RETH.size_bytes, 0)
    if full:
        pay += (full - 1) * max(per - hdr, 0) + (max(rem - hdr, 0) if rem else 0)
    return pay


#: A Capture holds this many frames before writing them at once (bounded memory: at most
#: this many frames of at most 9 KB each per capture, ~9 MB; typically ~1 MB).
CAPTURE_BATCH_FRAMES = 1024


class Capture(FrameLog):
    """A :class:`sim.net.port.Port` tap writing the frames leaving the port to a pcap, within a
    :class:`CaptureBudget`; frames longer than ``snaplen_bytes`` (None: whole frames) are cut,
    keeping their original length in the record.  Its per-frame half is
    :class:`sim.study.samples.FrameLog` (compiled with the core): records are held until
    :data:`CAPTURE_BATCH_FRAMES` of them, then written at once, the synthesised frames
    made a run of one size at a time straight into the pcap records
    (:func:`wire.template.make_rows`).

    ``stack`` is the header stack of the port's link (:mod:`wire.linkstack`): on RoCEv2
    (the default) an Ethernet capture (linktype 1) whose data frames are RoCEv2 frames; on
    InfiniBand a capture of native IB packets (linktype 247, LINKTYPE_INFINIBAND) whose data
    packets are local IB packets (LRH with the nodes' LIDs, :func:`sim.addresses.node_lid`,
    and the VL of the packet's class, ``vl_of[tc]``, default the class itself; BTH with FECN
    for the simulator's CE mark; ICRC and VCRC).  The NIC's control packets (CNPs, ACKs)
    are written as they were sent, in the link's format.  IB link flow-control packets are
    not captured (the simulator models their effect, not their bytes)."""

    def __init__(self, path: str, budget: CaptureBudget | None = None,
                 snaplen_bytes: int | None = None, stack: HeaderStack = ROCE,
                 vl_of: Sequence[int] | None = None) -> None:
        self.path = path
        self.stack = stack
        self._vl_of = tuple(vl_of) if vl_of is not None else tuple(range(8))
        kw: dict[str, Any] = {} if stack.ethernet else {"linktype": LINKTYPE_INFINIBAND}
        if snaplen_bytes is not None:
            kw["snaplen"] = snaplen_bytes
        self.writer = CaptureWriter(path, **kw)
        super().__init__(budget if budget is not None else CaptureBudget(None),
                         snaplen_bytes, CAPTURE_BATCH_FRAMES)
        self._tpl: list[RoceTemplate | IbTemplate] = []  # the templates of _templates

    def _write_batch(self) -> None:
        """Write the records held so far, in their order: each run of synthesised frames of
        one size made into the records of one write
        (:meth:`wire.pcapio.CaptureWriter.write_made_rows`), each run of the fabric's frames
        through :meth:`~wire.pcapio.CaptureWriter.write_frames`."""
        import numpy as np

        if not self._ts_ns:
            return
        ts = np.array(self._ts_ns, dtype=np.int64)
        which = np.array(self._which, dtype=np.intp)
        psns = np.array(self._psns, dtype=np.int64)
        frames = self._frames
        self._ts_ns, self._which, self._psns, self._frames = [], [], [], []
        sizes = np.array([*self._tpl_bytes, -1], dtype=np.int64)[which]  # -1: the fabric's
        bounds = [0, *(np.flatnonzero(sizes[1:] != sizes[:-1]) + 1).tolist(), len(ts)]
        w = self.writer
        real = 0
        for i, j in pairwise(bounds):
            size = int(sizes[i])
            if size < 0:
                w.write_frames(frames[real:real + j - i], ts[i:j].tolist())
                real += j - i
                continue
            used, local = np.unique(which[i:j], return_inverse=True)
            tpls = [self._tpl[g] for g in used.tolist()]
            vals = psns[i:j]

            def make(view: Any, tpls: list[Any] = tpls, local: Any = local,
                     vals: Any = vals) -> None:
                make_rows(tpls, local, vals, out=view)

            w.write_made_rows(ts[i:j], size, make)

    def _new_template(self, pkt: Any, op: int, msg: int) -> int:
        """A new template for the synthesised frames of ``pkt``'s flow, size, ECN, AckReq
        and WRITE opcode ``op`` (only the PSN is patched per frame, so the IPv4 checksum is
        the template's and the ICRC, and on IB the VCRC, follow from the PSN: make_rows); its
        index.  FIRST and ONLY carry a RETH (out of the frame's payload): VA 0, R_Key the
        QP, DMA length the payload of the message's ``msg`` frame bytes."""
        qp = flow_qp(pkt.flow)
        stack = self.stack
        hdr = stack.header_bytes
        bth: dict[str, Any] = {"opcode": op, "dest_qp": qp, "ack_req": 1 if pkt.ackreq else 0}
        if stack.ethernet:
            layers: dict[str, Any] = {
                "eth": {"dst": node_mac(pkt.dst), "src": node_mac(pkt.src)},
                # DSCP = class x 8, as the NIC's ACKs (and CNPs: 48, class 6): a replay of
                # the capture puts each frame back in its class (DSCP >> 3)
                "ipv4": {"src": node_ip(pkt.src), "dst": node_ip(pkt.dst), "ecn": pkt.ecn,
                         "dscp": pkt.tc << 3},
                "udp": {"sport": 49152 + (pkt.flow & 0x3FFF)},
                "bth": bth,
            }
        else:  # a local IB packet: FECN is the simulator's CE mark (IBA annex A10)
            bth["fecn"] = 1 if pkt.ecn == CE else 0
            layers = {"lrh": {"vl": self._vl_of[pkt.tc], "sl": pkt.tc,
                              "dlid": node_lid(pkt.dst), "slid": node_lid(pkt.src)},
                      "bth": bth}
        if op in (WRITE_FIRST, WRITE_ONLY):
            hdr += RETH.size_bytes
            per = pkt.nbytes  # a FIRST frame is a whole one: the flow's packet size
            layers["reth"] = {"va": 0, "rkey": qp,
                              "dma_length": min(_write_payload(msg, per, stack.header_bytes),
                                                0xFFFFFFFF)}
        layers["payload"] = {"data": "00" * max(pkt.nbytes - hdr, 0)}
        t = (RoceTemplate if stack.ethernet else IbTemplate)(layers, patch=("bth.psn",))
        self._tpl.append(t)
        self._tpl_bytes.append(t.size_bytes)
        return len(self._tpl) - 1

    def _frame(self, tpl: int, psn: int) -> bytearray:
        """One synthesised frame (what :meth:`_write_batch` writes for that record)."""
        return self._tpl[tpl].make(**{"bth.psn": psn})

    def close(self) -> None:
        try:
            self._write_batch()
        finally:
            self.writer.close()


class _RxBins:
    """Bytes delivered per flow per bin, from taps on the receiving hosts
    (:class:`sim.study.samples.RxTap`, compiled with the core)."""

    def __init__(self, bin_ps: int, nbins: int) -> None:
        self.bin_ps = bin_ps
        self.nbins = nbins
        self.bins: dict[int, list[int]] = {}

    def tap(self) -> RxTap:
        return RxTap(self.bins, self.bin_ps, self.nbins)


def queue_mean_bytes(out_dir: str | os.PathLike[str], *, queue: int = 3,
                     port: tuple[int, int] | None = None, from_frac: float = 0.0) -> float:
    """Time-weighted mean depth of egress ``queue`` of ``port`` (default: the bottleneck)
    over the part of the run from ``from_frac`` x duration to the end, from a results
    directory's ``timeseries.npz`` (0.0 when the queue was never used)."""
    import numpy as np

    ts = np.load(os.path.join(os.fspath(out_dir), "timeseries.npz"))
    dur = int(ts["duration_ps"])
    node, idx = port if port is not None else (int(x) for x in ts["bottleneck"])
    key = f"queue_n{node}_p{idx}_q{queue}"
    if f"{key}_t_ps" not in ts.files:
        return 0.0
    return step_mean(ts[f"{key}_t_ps"], ts[f"{key}_bytes"], int(dur * from_frac), dur)


def step_mean(t_ps: Iterable[int], values: Iterable[float], t0_ps: int, t1_ps: int) -> float:
    """Time-weighted mean over [t0_ps, t1_ps] of a step function that is 0 before its first
    sample and takes ``values[i]`` from ``t_ps[i]`` on (samples in time order)."""
    import numpy as np

    if t1_ps <= t0_ps:
        return 0.0
    t = np.asarray(t_ps, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    i = int(np.searchsorted(t, t0_ps, side="right"))
    j = int(np.searchsorted(t, t1_ps, side="right"))
    seg_t = np.concatenate(([t0_ps], t[i:j], [t1_ps]))
    seg_v = np.concatenate(([v[i - 1] if i else 0.0], v[i:j]))
    return float((seg_v * np.diff(seg_t)).sum() / (t1_ps - t0_ps))


def jain_index(values: list[int] | list[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one takes
    all (R. Jain, D. Chiu, W. Hawe, DEC-TR-301, 1984); None without flows or traffic."""
    n = len(values)
    sq = sum(v * v for v in values)
    if not n or not sq:
        return None
    return round(sum(values) ** 2 / (n * sq), 6)


def parse_port(text: str) -> tuple[int, int]:
    """``NODE:PORT`` -> (node, port)."""
    try:
        a, b = text.split(":")
        return int(a), int(b)
    except ValueError:
        raise ValueError(f"expected NODE:PORT, got {text!r}") from None


def run_scenario(name_or_path: Any, params: Mapping[str, Any] | None = None,
                 seed: int | None = None, out_dir: str | os.PathLike[str] | None = None,
                 plots: bool = True, captures: Iterable[tuple[int, int]] = (),
                 progress: bool | None = None, pcaps: Iterable[Any] = (),
                 owners: Mapping[str, int] | None = None, *, force: bool = False,
                 capture_limit_bytes: int | object | None = _SCENARIO,
                 snaplen_bytes: int | object | None = _SCENARIO,
                 write_captures: bool | object = _SCENARIO,
                 warn: Callable[[str], None] | None = None,
                 baseline: bool = True) -> dict[str, Any]:
    """Build, run and record a scenario; returns the summary (also in summary.json).

    ``name_or_path`` is a built-in's name, a scenario file, or a :class:`Scenario` built
    already (e.g. ``sim.scenarios.description.build(doc, "name")`` from a dict; it runs
    once: its fabric keeps the state of the run).

    Outputs go to ``out_dir`` (default ``out/<scenario>``) whole or not at all
    (:func:`wire.atomic.atomic_dir`): everything is written into a fresh sibling folder that
    replaces ``out_dir`` only when complete.  ``out_dir`` must be absent, empty, or an earlier
    output of ours, unless ``force`` (checked before the run; ``wire.atomic.OutputError``).
    An exception or Ctrl-C leaves ``out_dir`` exactly as it was.

    Captures (``bottleneck.pcap`` and ``captures``): ``write_captures=False`` writes none;
    ``snaplen_bytes`` keeps only the first bytes of each frame (records keep ``orig_len``);
    all pcap files together stop at ``capture_limit_bytes`` (default
    :data:`DEFAULT_CAPTURE_LIMIT_BYTES`, None: no limit; summary ``capture.cut_at_ps``).
    Unset, these take the scenario's values (``Scenario.capture_limit_bytes`` /
    ``snaplen_bytes`` / ``capture_enabled`` if it has them), else the defaults.  ``warn``
    (default :func:`warnings.warn`) gets one message before the run when the captures are
    estimated to exceed :data:`CAPTURE_WARN_BYTES` or the limit.
    ``owners`` maps capture addresses (IP or MAC text) to host ids for ``pcaps``
    (default: the simulator's own addresses, :mod:`sim.addresses`).

    With faults (``fabric.fault_log``), summary.json ``faults`` is the report of
    :mod:`sim.study.fault_report`; ``baseline`` (default True) first runs the fault-free twin
    of the scenario (same seed) for its completion figures.  A flow that does not balance
    (sent != delivered + dropped + in flight) is a ``problems`` entry and one ``warn`` line."""
    from sim.scenarios.base import Scenario
    from sim.scenarios.loader import build
    from wire.atomic import atomic_dir, check_output_dir

    if isinstance(name_or_path, Scenario):  # built by the caller (e.g. from a dict)
        if params or seed is not None:
            raise ValueError("params and seed apply to a scenario name or file; a built "
                             "Scenario has them already")
        sc = name_or_path
    else:
        pcaps = list(pcaps)
        sc = build(name_or_path, params, seed, replayed=bool(pcaps))
    out = os.fspath(out_dir) if out_dir is not None else os.path.join("out", sc.name)
    check_output_dir(out, force=force)
    opts = _capture_options(sc, capture_limit_bytes, snaplen_bytes, write_captures)
    fab = sc.fabric
    replay = _inject_pcaps(fab, [*(("[[pcap]]", p) for p in sc.pcaps),
                                 *(("--pcap", p) for p in pcaps)], owners)
    if replay is not None and not (sc.params.get("capture") or {}).get("bottleneck"):
        # the replayed traffic may congest another port than the scenario's (a fabric
        # file's [capture] bottleneck is the user's choice)
        from sim.study.congestion import predicted_bottleneck

        own = sc.bottleneck
        sc.bottleneck, backlog = predicted_bottleneck(fab, sc.duration_ps, own)
        replay["bottleneck"] = {"node": sc.bottleneck[0], "port": sc.bottleneck[1],
                                "offered_backlog_bytes": round(backlog),
                                "scenario_bottleneck": list(own)}
    wanted = [sc.bottleneck]
    for c in [*sc.captures, *captures]:
        if c not in wanted:
            wanted.append(c)
    for node, port in wanted:
        n = fab.nodes.get(node)
        if n is None or port not in n.ports:
            raise ValueError(f"--capture {node}:{port}: no such node/port")
    from sim.scenarios.timing import late_mechanisms

    # mechanisms that cannot act before the run ends (summary.json "warnings")
    sc.warnings = late_mechanisms(sc)
    late = list(sc.warnings)
    if opts["enabled"]:
        msg = _capture_warning(fab, wanted, sc.duration_ps, opts)
        if msg:
            late.append(msg)
    for msg in late:
        if warn is None:
            import warnings

            warnings.warn(msg, stacklevel=2)
        else:
            warn(msg)
    fault_base = None
    if baseline and getattr(fab, "fault_log", None) is not None:  # sim.study.fault_report
        from sim.study.fault_report import run_baseline

        sources = [*(("[[pcap]]", p) for p in sc.pcaps), *(("--pcap", p) for p in pcaps)]
        fault_base = run_baseline(sc, lambda f: _inject_pcaps(f, sources, owners))
    with atomic_dir(out, force=force) as tmp:
        summary = _run_into(sc, tmp, wanted if opts["enabled"] else [], opts, replay, plots,
                            progress, fault_base)
    for problem in summary.get("problems", ()):
        if warn is None:
            import warnings

            warnings.warn(problem, stacklevel=2)
        else:
            warn(problem)
    return summary


def _capture_options(sc: Any, limit: Any, snaplen: Any, enabled: Any) -> dict[str, Any]:
    """The run's capture knobs: arguments, else the scenario's, else the defaults; checked."""
    # a scenario's value None (or no such attribute) means "not set there"
    if limit is _SCENARIO:
        limit = getattr(sc, "capture_limit_bytes", None) or DEFAULT_CAPTURE_LIMIT_BYTES
    if snaplen is _SCENARIO:
        snaplen = getattr(sc, "snaplen_bytes", None)
    if enabled is _SCENARIO:
        enabled = getattr(sc, "capture_enabled", None) is not False
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)
                              or limit <= 0):
        raise ValueError(f"capture limit: must be a positive number of bytes, got {limit!r}")
    if snaplen is not None and (not isinstance(snaplen, int) or isinstance(snaplen, bool)
                                or not 1 <= snaplen <= 262144):
        raise ValueError(f"snaplen: must be 1..262144 bytes, got {snaplen!r}")
    return {"enabled": bool(enabled), "limit_bytes": limit, "snaplen_bytes": snaplen}


def estimate_capture_bytes(fab: Any, ports: Iterable[tuple[int, int]], duration_ps: int,
                           snaplen_bytes: int | None = None) -> int:
    """Upper estimate of the pcap bytes capturing ``ports`` for ``duration_ps`` writes: each
    port busy at its line rate the whole run (with ``snaplen_bytes``, in frames of
    ``_ESTIMATE_FRAME_BYTES`` cut to the snaplen, plus the 16-byte record headers)."""
    total = 0
    for node, port in ports:
        line_bytes = fab.nodes[node].ports[port].rate_bps * duration_ps // (8 * 10**12)
        if snaplen_bytes is not None:
            per = PCAP_RECORD_HEADER_BYTES + min(snaplen_bytes, _ESTIMATE_FRAME_BYTES)
            line_bytes = line_bytes * per // _ESTIMATE_FRAME_BYTES
        total += PCAP_FILE_HEADER_BYTES + line_bytes
    return total


def _capture_warning(fab: Any, ports: list[tuple[int, int]], duration_ps: int,
                     opts: Mapping[str, Any]) -> str | None:
    est = estimate_capture_bytes(fab, ports, duration_ps, opts["snaplen_bytes"])
    limit = opts["limit_bytes"]
    if est <= CAPTURE_WARN_BYTES and (limit is None or est <= limit):
        return None
    where = ", ".join(f"{n}:{p}" for n, p in ports)
    msg = (f"warning: the captures ({where}) may write up to {est / 1e6:.0f} MB "
           f"({duration_ps / 1e9:g} ms at line rate)")
    if limit is not None and est > limit:
        msg += f"; they stop at the limit of {limit / 1e6:g} MB (--capture-limit-mb)"
    return msg + "; --snaplen BYTES keeps only headers, --no-capture writes none"


def _run_into(sc: Any, out: str, *args: Any, **kw: Any) -> dict[str, Any]:
    """Run the built scenario, writing every output file into ``out`` (a fresh folder).  The
    time series spill to an anonymous temporary file there (:class:`SeriesStore`, bounded
    memory), closed and so deleted when this returns or raises."""
    with SeriesStore(out) as store:
        return _record_into(store, sc, out, *args, **kw)


def _record_into(store: SeriesStore, sc: Any, out: str, wanted: list[tuple[int, int]],
                 opts: Mapping[str, Any], replay: dict[str, Any] | None, plots: bool,
                 progress: bool | None, fault_base: dict[str, Any] | None = None
                 ) -> dict[str, Any]:
    import numpy as np

    name = sc.name
    fab = sc.fabric
    dur = sc.duration_ps
    budget = CaptureBudget(opts["limit_bytes"])
    caps: dict[tuple[int, int], Capture] = {}
    for node, port in wanted:
        fname = "bottleneck.pcap" if (node, port) == sc.bottleneck else \
            f"capture_{node}_{port}.pcap"
        p = fab.nodes[node].ports[port]
        ib = getattr(p, "ib", None)  # an InfiniBand link's credits: its SL-to-VL map
        caps[(node, port)] = cap = Capture(os.path.join(out, fname), budget,
                                           opts["snaplen_bytes"], p.stack,
                                           None if ib is None else ib.vl_of)
        p.taps.append(cap)

    bin_ps = -(-dur // THROUGHPUT_BINS)
    rx = _RxBins(bin_ps, THROUGHPUT_BINS)
    replayed = getattr(fab, "replayed", None) or {}
    receivers = {f.dst for f in (*fab.flows.values(), *replayed.values())}
    tap = rx.tap()
    for nid in receivers:
        host = fab.nodes.get(nid)
        if isinstance(host, Host):
            host.rx_tap = tap

    probe = None
    if getattr(fab, "fault_log", None) is not None:  # counters for the faults block and plot
        from sim.study.fault_report import FaultProbe

        probe = FaultProbe(fab, bin_ps, THROUGHPUT_BINS, dur)
    show = sys.stderr.isatty() if progress is None else progress
    bar = None
    if show:
        from tqdm import tqdm

        bar = tqdm(total=dur / 1e6, unit="us", desc=name, file=sys.stderr, leave=False,
                   bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} us simulated [{elapsed}]")
    with JsonlTracer(os.path.join(out, "events.jsonl")) as log:
        rec = Recorder(log, store)
        rec.control.fabric = fab
        rec.start_rates(fab)
        for node in fab.nodes.values():
            if hasattr(node, "ingress_tap"):
                node.ingress_tap = rec.ingress_sample
        for node in fab.nodes.values():
            if isinstance(node, Host):
                node.port.taps.append(rec.control)
        sc.tracer_slot.target = rec
        try:
            step = max(dur // _CHUNKS, 1)
            t = 0
            while t < dur:
                nxt = min(t + step, dur)
                fab.run(nxt)
                if bar is not None:
                    bar.update((nxt - t) / 1e6)
                t = nxt
        finally:
            sc.tracer_slot.target = None
            if bar is not None:
                bar.close()
            for cap in caps.values():
                cap.close()

    if probe is not None:
        probe.finish()
    base = fab.summary()
    from sim.fabric.counters import port_counters as tool_counters
    from sim.study.labels import labels  # names for the plots (sim/study/labels.py)

    names = labels(sc)
    # every port as perfquery, ethtool, rdma statistic show it, named as the plots name it
    counters = tool_counters(fab, names={n["id"]: n["name"] for n in names["nodes"]})
    means = rec.mean_queue_bytes(dur)
    ports = []
    for p in base["ports"]:
        k = (p["node"], p["port"])
        ports.append({
            "node": p["node"], "port": p["port"], "tx_bytes": p["tx_bytes"],
            "busy_ps": p["busy_ps"], "drops": rec.drops.get(k, 0),
            "ce_marked": rec.ce.get(k, 0), "pause_sent": p["pause_sent"],
            "pause_received": p["pause_received"], "paused_ps": p["paused_ps"],
            "max_queue_bytes": p["max_queue_bytes"],
            "mean_queue_bytes": round(means.get(k, 0.0), 3),
        })
        if "credit_stall_ps" in p:  # an InfiniBand link's counters (sim.flowctl.ib)
            ports[-1].update({c: p[c] for c in IB_PORT_COUNTERS})
    base["flows"] += replayed_flow_figures(fab)  # the replayed captures' flows after them
    flows = [{k: f[k] for k in ("id", "src", "dst", "bytes_delivered", "throughput_bps",
                                 "fct_ps", "ce_received")} for f in base["flows"]]
    conservation = flow_conservation(fab, rec)
    for f in flows:
        f.update(conservation[f["id"]])
    ib_routed = getattr(fab, "ib_routing", None) is not None  # set by sim.fabric.lft
    if ib_routed:  # [topology] routing (static LFT, adaptive, ecmp): out-of-order arrivals
        for f, b in zip(flows, base["flows"], strict=True):
            f["ooo_packets"] = b["ooo_packets"]
    for f, b in zip(flows, base["flows"], strict=True):
        if "rc" in b:  # only with [hosts] reliable (sim.nic.rc)
            f["rc"] = b["rc"]
    bnode, bport = sc.bottleneck
    bp = fab.nodes[bnode].ports[bport]
    totals = base["totals"]
    summary = {
        "scenario": name, "params": sc.params, "seed": sc.seed, "duration_ps": dur,
        "jain_index": jain_index([f["throughput_bps"] for f in flows]),
        "bottleneck": {"node": bnode, "port": bport, "tx_bytes": bp.tx_bytes,
                       "utilisation": round(bp.busy_ps_until(dur) / dur, 6) if dur else 0.0},
        "flows": flows, "ports": ports, "tool_counters": counters,
        "totals": {"drops": sum(n for n, _ in rec.drops_by_reason.values()), "cnps": rec.cnps,
                   "pauses": totals["pauses_sent"], "ce_marked": totals["ce_marked"],
                   "dropped_bytes_by_reason":
                       {k: v[1] for k, v in sorted(rec.drops_by_reason.items())},
                   "dropped_packets_by_reason":
                       {k: v[0] for k, v in sorted(rec.drops_by_reason.items())},
                   **{k: sum(c[k] for c in conservation.values()) for k in _CONSERVED}},
        "captures": {f"{n}:{p}": {"file": os.path.basename(c.path), "frames": c.frames,
                                  "bytes": c.bytes}
                     for (n, p), c in caps.items()},
        "capture": {"enabled": opts["enabled"], "limit_bytes": opts["limit_bytes"],
                    "snaplen_bytes": opts["snaplen_bytes"], "written_bytes": budget.used_bytes
                    if caps else 0, "cut_at_ps": budget.cut_at_ps},
    }
    if ib_routed:
        summary["totals"]["ooo_packets"] = sum(f["ooo_packets"] for f in flows)
    ib_ports = [p for p in ports if "credit_stall_ps" in p]
    if ib_ports:  # InfiniBand links: their counters summed (other summaries keep their keys)
        summary["totals"].update({c: sum(p[c] for p in ib_ports) for c in IB_TOTALS})
    for key, fn in sc.summaries.items():
        summary[key] = fn(sc)
    summary["labels"] = names
    if replay is not None:
        replay["delivered_bytes"] = sum(
            b for n in fab.nodes.values() if isinstance(n, Host)
            for f, b in n.rx_bytes.items() if f >= REPLAY_FLOW_BASE)
        summary["replay"] = replay
    from sim.study.fault_report import conservation_problems

    if probe is not None:  # replaces the scenario's timeline with the whole report
        summary["faults"] = probe.report(summary, sc, fault_base)
    problems = conservation_problems(flows)
    if problems:  # nothing lost silently: one line each on stderr too (run_scenario)
        summary["problems"] = problems
    if getattr(sc, "warnings", None):  # only then: other runs keep their summary.json
        summary["warnings"] = list(sc.warnings)
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=2, sort_keys=False)
        f.write("\n")

    arrays: dict[str, Any] = {
        "duration_ps": np.array(dur, dtype=np.int64),
        "bottleneck": np.array(sc.bottleneck, dtype=np.int64),
        "bin_ps": np.array(bin_ps, dtype=np.int64),
        "bin_t_ps": np.arange(THROUGHPUT_BINS, dtype=np.int64) * bin_ps,
    }
    series = list(rec.arrays())  # (key, (dtype, rows, chunks)): streamed by _write_npz
    arrays.update(kv for kv in series if kv[0].startswith("queue_"))
    for fid in sorted([*fab.flows, *replayed]):
        arrays[f"flow_{fid}_rx_bytes"] = np.array(rx.bins.get(fid, [0] * THROUGHPUT_BINS),
                                                 dtype=np.int64)
    arrays.update(kv for kv in series if not kv[0].startswith("queue_"))
    from sim.health.deadlock import pfc_failure_arrays

    arrays.update(pfc_failure_arrays(sc))  # deadlock onsets, watchdog triggers (if any)
    if probe is not None:
        arrays.update(probe.arrays(summary["faults"]["links"]))
    # as np.savez_compressed, each spilled column copied through in chunks
    _write_npz(os.path.join(out, "timeseries.npz"), arrays.items())
    store.close()  # the spill file is not needed by the plots

    if plots:
        from sim.study.plot import plot_dir

        plot_dir(out)
    return summary


#: summary.json keys of a port on an InfiniBand link (:meth:`sim.flowctl.ib.IbLink.counters`):
#: time its head packets waited for credits, the stall episodes, the flow-control packets its
#: link's receiver sent, the peak occupancy of that receiver's VL buffers.
IB_PORT_COUNTERS = ("credit_stall_ps", "credit_stalls", "fc_packets", "rx_vl_buffer_max_bytes")
#: The ones summed into ``totals`` when the fabric has InfiniBand links.
IB_TOTALS = ("credit_stall_ps", "credit_stalls", "fc_packets")


def replayed_flow_figures(fab: Any) -> list[dict[str, Any]]:
    """The per-flow figures of :meth:`sim.fabric.Fabric.summary` for the replayed captures'
    flows (``fab.replayed``): delivered bytes, throughput over the time from the flow's first
    injection to its last delivery when every frame arrived (``fct_ps``), else to the end of
    the run (or its last injection or arrival, when it stopped before:
    :func:`sim.fabric.core.throughput_span_ps`), CE marks and out-of-order arrivals."""
    from sim.fabric.core import throughput_span_ps

    now = fab.engine.now_ps
    out = []
    for fid, f in sorted((getattr(fab, "replayed", None) or {}).items()):
        dst = fab.nodes[f.dst]
        got, n = dst.rx_bytes.get(fid, 0), dst.rx_packets.get(fid, 0)
        last = dst.rx_last_ps.get(fid)
        fct = last - f.start_ps if last is not None and n >= f.frames else None
        span = throughput_span_ps(f, fct, last, now)
        out.append({"id": fid, "src": f.src, "dst": f.dst, "bytes_delivered": got,
                    "throughput_bps": got * 8 * 10**12 // span if span > 0 else 0,
                    "fct_ps": fct, "first_rx_ps": dst.rx_first_ps.get(fid),
                    "ce_received": dst.rx_ce.get(fid, 0),
                    "ooo_packets": dst.rx_ooo.get(fid, 0)})
    return out


#: Per-flow (and total) packet and byte counts of summary.json: sent = delivered + dropped
#: + in flight, each counted on its own.
_CONSERVED = tuple(f"{k}_{u}" for k in ("sent", "delivered", "dropped", "in_flight")
                   for u in ("packets", "bytes"))


def _inject_pcaps(fab, pcaps: Iterable[tuple[str, Any]], owners: Mapping[str, int] | None
                  ) -> dict[str, Any] | None:
    """Inject the records of each pcap into the fabric; None when there are none.  ``pcaps``
    holds (origin, pcap) pairs: origin ``"--pcap"`` or ``"[[pcap]]"`` (named in errors), pcap a
    path or a (path, time scale) pair.  ``owners`` (``--map``) says which host owns each
    address, and then only those addresses are owned: a real capture's addresses (its LIDs
    1, 2, ..., its 10.0.x.x) must not land on the simulator's hosts of the same address
    unasked.  Without ``owners`` the simulator's own addresses own the frames
    (:func:`sim.workloads.replay.owners_by_address`: a capture the simulator wrote).
    ValueError (naming the origin and file) for a capture that cannot be read, an owner that
    is not a host, or when not one frame of all the captures could be injected."""
    from sim.workloads.replay import inject_records, normalize_address, owners_by_address
    from wire import CaptureError, read

    files = [(o, *((p, 1) if isinstance(p, str | os.PathLike) else p)) for o, p in pcaps]
    if not files:
        return None
    own = {} if owners else owners_by_address(fab)
    for addr, nid in (owners or {}).items():
        if not isinstance(fab.nodes.get(nid), Host):
            hosts = sorted(n for n, x in fab.nodes.items() if isinstance(x, Host))
            raise ValueError(f"--map {addr}={nid}: node {nid} is not a host (hosts: "
                             f"{', '.join(map(str, hosts))})")
        own[normalize_address(addr)] = nid
    stats: dict[str, Any] = {"files": [], "frames": 0, "injected": 0, "skipped": 0,
                             "skipped_reasons": {}, "skipped_samples": []}
    for origin, path, scale in files:
        if not os.path.isfile(path):
            why = "no such file" if not os.path.exists(path) else "not a file"
            raise ValueError(f"{os.fspath(path)}: {origin}: {why}")
        try:
            records = list(read(path))
        except (CaptureError, OSError) as e:
            raise ValueError(f"{origin} input {e}") from None
        st = inject_records(fab, records, own, time_scale=scale)
        stats["files"].append(os.path.basename(os.fspath(path)))
        stats["frames"] += len(records)
        stats["injected"] += st.injected
        stats["skipped"] += st.skipped
        for k, v in st.skipped_reasons.items():
            stats["skipped_reasons"][k] = stats["skipped_reasons"].get(k, 0) + v
        for x in st.skipped_samples:
            if x not in stats["skipped_samples"]:
                stats["skipped_samples"].append(x)
    if stats["frames"] and not stats["injected"]:
        raise ValueError(f"{', '.join(os.fspath(f[1]) for f in files)}: {files[0][0]}: "
                         f"{replay_problem(stats)}")
    return stats


def collective_figures(c: Mapping[str, Any]) -> str:
    """``"[[collective]] #1 allreduce 16M on 8 ranks"``: a ``collectives`` item of
    summary.json named as the file gives it (entry, collective, nccl-tests size, ranks)."""
    from sim.study.collective_plots import size_label

    return (f"[[collective]] #{c['entry']} {c['collective']} {size_label(c['size_bytes'])} "
            f"on {c['ranks']} ranks")


def collective_result(c: Mapping[str, Any]) -> str | None:
    """A complete ``collectives`` item in one phrase: its time (mean over its iterations,
    µs) and busbw (GB/s); None when it did not complete."""
    if not c.get("complete") or c.get("time_ps") is None:
        return None
    n = c.get("iterations_done", 1)
    mean = f" (mean of {n} iterations)" if n > 1 else ""
    return (f"{collective_figures(c)}: {c['time_ps'] / 1e6:.2f} us{mean}, busbw "
            f"{c['busbw_GB_per_s']:.2f} GB/s")


def collective_problem(c: Mapping[str, Any], duration_ps: int) -> str | None:
    """One line saying how far a ``collectives`` item got when it did not complete within
    the run (a QP error's ``failed`` entry has its own line); None when it completed."""
    if c.get("complete") or c.get("failed"):
        return None
    done, iters = c["iterations_done"], c["iterations"]
    line = (f"{collective_figures(c)} did not complete in the {duration_ps / 1e6:g} us run: "
            f"{done} of {iters} iteration(s) done, {c['transfers_received']} of "
            f"{c['transfers']} transfers of iteration {done + 1} received")
    if c.get("error"):
        line += f" ({c['error']})"
    return line + "; lengthen the run (-p duration_ms=...) or look for drops and pauses"


def replay_problem(stats: Mapping[str, Any]) -> str | None:
    """One phrase saying how many replayed frames were skipped and why (None if none)."""
    if not stats.get("skipped"):
        return None
    why = "; ".join(f"{k}: {v}" for k, v in stats["skipped_reasons"].items())
    text = f"{stats['skipped']} of {stats['frames']} frame(s) skipped ({why})"
    if stats.get("skipped_samples"):
        text += (f", e.g. {', '.join(stats['skipped_samples'])}; map capture addresses to "
                 "hosts with --map ADDRESS=NODE (docs/howto/replay-a-capture.md)")
    return text

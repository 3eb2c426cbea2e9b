"""What the faults of a run cost: the ``faults`` block of summary.json and the series of
``faults_timeline.png`` (docs/reference/results-folder.md, "faults"; how each figure is defined:
docs/explanation/faults.md, "How a fault's cost is measured").

:class:`FaultProbe` is installed by :func:`sim.study.results.run_scenario` on a fabric with
faults (``fabric.fault_log``, :mod:`sim.fabric.faults`) before the run.  It samples counters at
every throughput-bin edge (an engine event that runs after every other event of that instant,
so it changes nothing in the run): the bytes each flow's receiver has delivered, the bytes each
port has sent, the RC senders' retransmitted frames and bytes and their timeouts
(:meth:`sim.nic.host.Host.rc_stats`) and the frames the faults destroyed
(:class:`sim.fabric.faults.FaultLog`).  After the run :meth:`FaultProbe.report` gives the
``faults`` block:

* ``events``: the timeline of :class:`sim.fabric.faults.FaultLog` (``t_ps``, ``what``, ...);
* ``intervals``: one per fault occurrence (:func:`fault_intervals`), with its
  ``time_to_recover_ps`` (:func:`recovery`) and ``time_to_reroute_ps``;
* ``completion``: completion against the fault-free run of the same scenario and seed
  (:func:`run_baseline`; per flow its last delivery, the workload's last delivery, and each
  ``[[collective]]`` entry's mean iteration time);
* ``retransmitted``: RC bytes and frames resent, per flow and in total;
* ``drops``: the frames the faults destroyed, by reason (every drop of the run, by reason,
  is ``totals.dropped_packets_by_reason``);
* ``conservation``: per flow sent = delivered + dropped + in flight (RC: every transmission is
  sent, resends too, which are also given on their own), and the flows that do not balance.

:func:`conservation_problems` is the check every run makes (faults or not): a flow that does
not balance is a ``problems`` entry of summary.json and one warning line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sim.net.routes import route_values
from sim.units import us_to_ps

__all__ = ["FaultProbe", "RECOVERY_TOLERANCE", "PRE_FAULT_BINS", "fault_intervals",
           "recovery", "progress_recovery", "lag_behind", "run_baseline",
           "completion_figures", "compare_completion",
           "conservation_problems", "MAX_LINKS", "COLLECTIVE_BINS", "COLLECTIVE_FIRST_BIN_PS",
           "BASELINE_BINS",
           "CollectiveObserver", "CollectiveProbe", "DropCounter", "collective_report",
           "straggler_intervals"]

#: Goodput is "back" when it is within this fraction of the pre-fault rate (10 %) [A: a
#: choice of this model, not a published figure].
RECOVERY_TOLERANCE = 0.10
#: The pre-fault rate is the mean goodput over this many throughput bins before the fault's
#: bin (fewer when the fault starts earlier) [A].
PRE_FAULT_BINS = 10
#: At most this many links in the timeline plot (the faulted ones first).
MAX_LINKS = 12
#: Link-state events: what opens an interval -> what closes it (sim.fabric.faults).
_OPEN = {"link_down": "link_up", "nic_down": "nic_up", "switch_down": "switch_up",
         "loss_start": "loss_end"}
_KIND = {"link_down": "link_down", "nic_down": "nic_down", "switch_down": "switch_down",
         "loss_start": "loss", "rate": "degrade", "pcie": "slow_pcie"}
#: Events that open an interval on their target and, the next time, close it (a rate back).
_TOGGLE = ("rate", "pcie")
#: Kinds after which the switches reroute (a link changed state).
_LINK_STATE = ("link_down", "nic_down", "switch_down")


def _real(peer: Any) -> Any:
    """The node behind a port's peer (a faulted link's peer is a wrapper with ``real``)."""
    return getattr(peer, "real", peer)



def _rc_totals(hosts: Any) -> tuple[int, int, int]:
    """(frames retransmitted, bytes retransmitted, ACK timeouts) over every RC flow of
    ``hosts``: one sample of the probes' RC columns."""
    fr = by = to = 0
    for h in hosts:
        for f in h.rc_flows():
            s = h.rc_stats(f)
            fr += s.get("retransmitted_frames", 0)
            by += s.get("retransmitted_bytes", 0)
            to += s.get("timeouts", 0)
    return fr, by, to


def _fault_lost(fab: Any) -> int:
    """Frames the fabric's faults have lost so far (0 without a fault log)."""
    log = getattr(fab, "fault_log", None)
    return sum(log.drops.values()) if log is not None else 0

class FaultProbe:
    """Counters sampled at every bin edge of a run with faults (module docstring).
    ``bin_ps`` x ``nbins`` must cover the run (:data:`sim.study.results.THROUGHPUT_BINS`)."""

    def __init__(self, fab: Any, bin_ps: int, nbins: int, duration_ps: int) -> None:
        import numpy as np

        from sim.net.switch import Switch
        from sim.nic.host import Host

        self.fab = fab
        self.bin_ps = bin_ps
        self.nbins = nbins
        self.duration_ps = duration_ps
        self.ports = [(nid, idx, p) for nid, node in sorted(fab.nodes.items())
                      for idx, p in sorted(node.ports.items())]
        self.flows = sorted(fab.flows)
        self.hosts = [n for n in fab.nodes.values() if isinstance(n, Host)]
        #: ECMP / adaptive groups of every switch before the run (the original routes).
        self.groups: dict[int, list[tuple[int, ...]]] = {
            nid: sorted({tuple(r) for r in route_values(s.routes) if not isinstance(r, int)})
            for nid, s in fab.nodes.items() if isinstance(s, Switch)}
        self.tx = np.zeros((nbins, len(self.ports)), dtype=np.int64)
        self.rx = np.zeros((nbins, len(self.flows)), dtype=np.int64)
        self.rc = np.zeros((nbins, 3), dtype=np.int64)  # retx frames, retx bytes, timeouts
        self.lost = np.zeros(nbins, dtype=np.int64)
        self.row = 0
        eng = fab.engine
        for b in range(1, nbins):
            if b * bin_ps < duration_ps:  # the last sample is taken after the run
                eng.call_at(b * bin_ps, self.sample, priority=1 << 30)

    def sample(self) -> None:
        """Cumulative counters now, into the next row."""
        r = self.row
        if r >= self.nbins:
            return
        self.row = r + 1
        fab = self.fab
        self.tx[r] = [p.tx_bytes for _, _, p in self.ports]
        nodes = fab.nodes
        self.rx[r] = [nodes[fab.flows[f].dst].rx_bytes.get(f, 0) for f in self.flows]
        self.rc[r] = _rc_totals(self.hosts)
        self.lost[r] = _fault_lost(fab)

    def finish(self) -> None:
        """The last sample (end of the run); rows never reached copy it."""
        self.sample()
        last = self.row - 1
        for a in (self.tx, self.rx, self.rc):
            a[last + 1:] = a[last]
        self.lost[last + 1:] = self.lost[last]

    @staticmethod
    def _per_bin(a: Any) -> Any:
        import numpy as np

        return np.diff(a, axis=0, prepend=np.zeros_like(a[:1]))

    # ------------------------------------------------------------------ outputs
    def plotted_links(self, intervals: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        """The egress ports of the faulted links (both directions) and of their ECMP siblings
        (the other members of a group holding a faulted port), at most :data:`MAX_LINKS`."""
        nodes = self.fab.nodes
        faulted: list[tuple[int, int]] = []

        def add(lst: list, key: tuple[int, int]) -> None:
            if key not in lst and key[0] in nodes and key[1] in nodes[key[0]].ports:
                lst.append(key)

        for iv in intervals:
            node = nodes.get(iv["node"])
            if node is None:
                continue
            idxs = sorted(node.ports) if iv["kind"] == "switch_down" else \
                [iv.get("port", 0)]
            for idx in idxs:
                p = node.ports.get(idx)
                if p is None:
                    continue
                add(faulted, (iv["node"], idx))
                if p.peer is not None:
                    add(faulted, (_real(p.peer).node_id, p.peer_port))
        siblings: list[tuple[int, int]] = []
        for nid, idx in faulted:
            for g in self.groups.get(nid, ()):
                if idx in g:
                    for o in g:
                        if (nid, o) not in faulted:
                            add(siblings, (nid, o))
        out = [{"node": n, "port": p, "role": "faulted"} for n, p in faulted]
        out += [{"node": n, "port": p, "role": "ecmp sibling"} for n, p in siblings]
        return out[:MAX_LINKS]

    def arrays(self, links: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """timeseries.npz arrays (per bin; only in runs with faults): ``fault_link_n<N>_p<P>
        _tx_bytes`` for the plotted links, ``fault_retx_frames``, ``fault_retx_bytes``,
        ``fault_timeouts``, ``fault_lost_frames`` (frames the faults destroyed),
        ``fault_delivered_bytes`` (all flows), ``fault_qp_error_t_ps``."""
        import numpy as np

        col = {(n, i): k for k, (n, i, _) in enumerate(self.ports)}
        tx = self._per_bin(self.tx)
        out: dict[str, Any] = {}
        for ln in links:
            out[f"fault_link_n{ln['node']}_p{ln['port']}_tx_bytes"] = \
                tx[:, col[(ln["node"], ln["port"])]].copy()
        rc = self._per_bin(self.rc)
        out["fault_retx_frames"] = rc[:, 0].copy()
        out["fault_retx_bytes"] = rc[:, 1].copy()
        out["fault_timeouts"] = rc[:, 2].copy()
        out["fault_lost_frames"] = self._per_bin(self.lost)
        out["fault_delivered_bytes"] = self._per_bin(self.rx).sum(axis=1).astype(np.int64)
        qp = sorted(t for h in self.hosts for t in getattr(h, "qp_error_ps", {}).values())
        out["fault_qp_error_t_ps"] = np.array(qp, dtype=np.int64)
        return out

    def report(self, summary: Mapping[str, Any], sc: Any,
               baseline: Mapping[str, Any] | None) -> dict[str, Any]:
        """The summary.json ``faults`` block (module docstring); ``baseline`` from
        :func:`run_baseline` (None: not run, ``completion.baseline`` says why)."""
        log = self.fab.fault_log
        events = list(log.events)
        intervals = fault_intervals(events, self.duration_ps)
        good = self._per_bin(self.rx)
        done_at = {}
        for f in summary["flows"]:
            fl = self.fab.flows[f["id"]]
            if f.get("fct_ps") is not None:
                done_at[f["id"]] = fl.start_ps + f["fct_ps"]
        ends = [done_at.get(f) for f in self.flows]
        for iv in intervals:
            until = max(self.duration_ps if iv["end_ps"] is None else iv["end_ps"],
                        iv["start_ps"] + (iv["time_to_reroute_ps"] or 0)) + self.bin_ps
            iv["recover_from_ps"] = iv["start_ps"] if iv["end_ps"] is None else iv["end_ps"]
            iv.update(recovery(good, self.bin_ps, iv["start_ps"], ends, self.flows,
                               until_ps=until, from_ps=iv["recover_from_ps"]))
        links = self.plotted_links(intervals)
        flows_rc = {f["id"]: f["rc"] for f in summary["flows"] if "rc" in f}
        retx = [{"id": fid, "retransmitted_packets": rc.get("retransmitted_frames", 0),
                 "retransmitted_bytes": rc.get("retransmitted_bytes", 0),
                 "timeouts": rc.get("timeouts", 0), "qp_error": rc.get("qp_error", 0)}
                for fid, rc in sorted(flows_rc.items())]
        cons = []
        for f in summary["flows"]:
            rc = flows_rc.get(f["id"], {})
            cons.append({"id": f["id"], **_balance(f),
                         "retransmitted_packets": rc.get("retransmitted_frames", 0),
                         "retransmitted_bytes": rc.get("retransmitted_bytes", 0)})
        bad = [c["id"] for c in cons if c["unaccounted_packets"] or c["unaccounted_bytes"]]
        return {
            "events": events,
            "intervals": intervals,
            "completion": compare_completion(completion_figures(sc), baseline),
            "retransmitted": {
                "packets": sum(r["retransmitted_packets"] for r in retx),
                "bytes": sum(r["retransmitted_bytes"] for r in retx),
                "timeouts": sum(r["timeouts"] for r in retx),
                "qp_errors": sum(r["qp_error"] for r in retx),
                "flows": retx,
            },
            "drops": {"packets_by_reason": dict(sorted(log.drops.items())),
                      "bytes_by_reason": dict(sorted(log.dropped_bytes.items())),
                      "all_drops": "totals.dropped_packets_by_reason"},
            "recovery_tolerance": RECOVERY_TOLERANCE,
            "pre_fault_bins": PRE_FAULT_BINS,
            "bin_ps": self.bin_ps,
            "links": links,
            "conservation": {"balanced": not bad, "unbalanced_flows": bad, "flows": cons},
            # physical-layer retransmission (a loss fault's plr): frames resent, not lost
            **({"plr_resent_frames": sum(log.plr_resent.values())} if log.plr_resent
               else {}),
        }


def _balance(f: Mapping[str, Any]) -> dict[str, int]:
    """sent - delivered - dropped - in flight of one summary.json flow, packets and bytes."""
    return {f"unaccounted_{u}": f[f"sent_{u}"] - f[f"delivered_{u}"] - f[f"dropped_{u}"]
            - f[f"in_flight_{u}"] for u in ("packets", "bytes")}


def conservation_problems(flows: Iterable[Mapping[str, Any]]) -> list[str]:
    """One phrase per summary.json flow whose sent != delivered + dropped + in flight
    (packets or bytes): nothing may be lost silently.  Empty when every flow balances."""
    out = []
    for f in flows:
        if "sent_packets" not in f:
            continue
        b = _balance(f)
        if b["unaccounted_packets"] or b["unaccounted_bytes"]:
            out.append(
                f"flow {f['id']}: conservation: sent {f['sent_packets']} packets / "
                f"{f['sent_bytes']} bytes != delivered {f['delivered_packets']} / "
                f"{f['delivered_bytes']} + dropped {f['dropped_packets']} / "
                f"{f['dropped_bytes']} + in flight {f['in_flight_packets']} / "
                f"{f['in_flight_bytes']} ({b['unaccounted_packets']} packets / "
                f"{b['unaccounted_bytes']} bytes unaccounted)")
    return out


def fault_intervals(events: Iterable[Mapping[str, Any]], end_ps: int) -> list[dict[str, Any]]:
    """One interval per fault occurrence, from the timeline ``events``: ``kind``
    (``link_down``, ``nic_down``, ``switch_down``, ``loss``, ``degrade``), ``node`` (and
    ``port`` for a link), ``start_ps``, ``end_ps`` (null: lasted to the end of the run, which
    is ``end_ps``) and, after a link-state change, ``time_to_reroute_ps``: the time from the
    start to the first reroute at or after it (null: none in the run).  A ``rate`` event opens
    a ``degrade`` interval on a link and the next one on the same link closes it (``pcie``:
    ``slow_pcie`` on a host, likewise).  In order of start."""
    out: list[dict[str, Any]] = []
    open_: dict[tuple, dict[str, Any]] = {}
    reroutes = []
    for e in events:
        what = e["what"]
        if what == "reroute":
            reroutes.append(e["t_ps"])
            continue
        target = (e.get("node"), e.get("port"))
        if what in _OPEN or what in _TOGGLE:
            key = (_KIND[what], *target)
            iv = open_.pop(key, None) if what in _TOGGLE else None
            if iv is not None:  # the old rate back: the degrade / slow PCIe ends
                iv["end_ps"] = e["t_ps"]
                continue
            iv = {"kind": _KIND[what], "node": e.get("node")}
            if e.get("port") is not None:
                iv["port"] = e["port"]
            for k in ("rate_bps", "write_bps", "read_bps"):
                if k in e:
                    iv[k] = e[k]
            iv.update(start_ps=e["t_ps"], end_ps=None)
            open_[key] = iv
            out.append(iv)
            continue
        closes = {v: k for k, v in _OPEN.items()}.get(what)
        if closes is not None:
            iv = open_.pop((_KIND[closes], *target), None)
            if iv is not None:
                iv["end_ps"] = e["t_ps"]
    for iv in out:
        r = None
        if iv["kind"] in _LINK_STATE:
            r = next((t - iv["start_ps"] for t in reroutes if t >= iv["start_ps"]), None)
        iv["time_to_reroute_ps"] = r
    del end_ps  # an open interval's end is the run's: end_ps null says so
    return out


def recovery(good: Any, bin_ps: int, start_ps: int, done_at: Sequence[int | None],
             flows: Sequence[int], tolerance: float = RECOVERY_TOLERANCE,
             pre_bins: int = PRE_FAULT_BINS, until_ps: int | None = None,
             from_ps: int | None = None) -> dict[str, Any]:
    """Time to recover from a fault starting at ``start_ps`` (docs/explanation/faults.md "Time to
    recover"), for steady flows whose rate before the fault is their fault-free rate.

    ``good[b][i]`` is the bytes flow ``flows[i]`` delivered in bin ``b`` (``bin_ps`` wide),
    ``done_at[i]`` when it completed (None: it did not).  Fault bin s = start // bin.
    Pre-fault rate of a flow: its mean over bins [s - pre_bins, s) (fewer at the start of the
    run).  A bin counts for a flow while the flow is not complete at the bin's start.  The
    *affected* flows: those with a pre-fault rate > 0 that have a counted bin b >= s, and
    up to the bin of ``until_ps`` (None: to the end of the run), with goodput < (1 -
    tolerance) x that rate (:meth:`FaultProbe.report` passes the fault's end or the end of its
    reroute, whichever is later, plus one bin).  Recovery bin r: the first bin after the first such
    dip in which the affected flows' goodput together (the flows still counted there) is at
    least (1 - tolerance) x their pre-fault rates together (or none is counted any more).
    ``recovered_at_ps`` = r x bin (the start when no flow dipped), ``time_to_recover_ps`` =
    max(0, r x bin - ``from_ps``), the time from the fault's end (``from_ps``; None: its
    start) until then: 0 when no flow dipped or the flows were back before the fault ended,
    both null when the run ended first.  One bin of resolution."""
    import numpy as np

    g = np.asarray(good, dtype=np.float64)
    nb = g.shape[0]
    s = min(start_ps // bin_ps, nb - 1) if nb else 0
    lo = max(0, s - pre_bins)
    ref = start_ps if from_ps is None else from_ps
    base = {"affected_flows": [], "pre_fault_bps": None, "time_to_recover_ps": None,
            "recovered_at_ps": None, "recovered": False}
    if s == lo or not len(flows):
        return {**base, "why": "no throughput bin before the fault: no pre-fault rate"}
    pre = g[lo:s].mean(axis=0)
    starts = np.arange(nb) * bin_ps
    counted = np.ones_like(g, dtype=bool)
    for i, t in enumerate(done_at):
        if t is not None:
            counted[:, i] = starts < t
    thr = (1.0 - tolerance) * pre
    dip = (g < thr[None, :]) & counted & (pre[None, :] > 0)
    dip[:s] = False
    if until_ps is not None:
        dip[until_ps // bin_ps + 1:] = False
    hit = dip.any(axis=0)
    aff = np.flatnonzero(hit)
    if not len(aff):
        return {**base, "pre_fault_bps": _bps(pre.sum(), bin_ps), "time_to_recover_ps": 0,
                "recovered_at_ps": start_ps, "recovered": True}
    first = int(np.flatnonzero(dip[:, aff].any(axis=1))[0])
    r = None
    for b in range(first + 1, nb):
        live = aff[counted[b, aff]]
        if not len(live) or g[b, live].sum() >= (1.0 - tolerance) * pre[live].sum():
            r = b
            break
    out = {**base, "affected_flows": [int(flows[i]) for i in aff],
           "pre_fault_bps": _bps(pre[aff].sum(), bin_ps)}
    if r is not None:
        out.update(time_to_recover_ps=max(0, r * bin_ps - ref), recovered_at_ps=r * bin_ps,
                   recovered=True)
    return out


def _bps(nbytes_per_bin: float, bin_ps: int) -> int:
    return round(nbytes_per_bin * 8 * 10**12 / bin_ps)


# ---------------------------------------------------------------- the fault-free run
def completion_figures(sc: Any) -> dict[str, Any]:
    """Completion of a scenario after its run: per flow the last delivery (``rx_last_ps``,
    null: nothing delivered), its bytes delivered and whether it completed; the workload's
    last delivery; each ``[[collective]]`` entry's ``time_ps`` (mean iteration time) and
    ``complete``."""
    fab = sc.fabric
    flows = {}
    for fid in sorted(fab.flows):
        f = fab.flows[fid]
        dst = fab.nodes[f.dst]
        flows[fid] = {"last_delivery_ps": dst.rx_last_ps.get(fid),
                      "delivered_bytes": dst.rx_bytes.get(fid, 0),
                      "complete": dst.fct_ps.get(fid) is not None}
    last = [v["last_delivery_ps"] for v in flows.values() if v["last_delivery_ps"] is not None]
    out: dict[str, Any] = {"flows": flows, "last_delivery_ps": max(last) if last else None}
    coll = sc.summaries.get("collectives") if getattr(sc, "summaries", None) else None
    if coll is not None:
        out["collectives"] = [{"entry": c.get("entry", i + 1), "time_ps": c.get("time_ps"),
                               "complete": c.get("complete")}
                              for i, c in enumerate(coll(sc))]
    return out


def run_baseline(sc: Any, inject: Callable[[Any], Any] | None = None
                 ) -> dict[str, Any] | None:
    """Run the fault-free twin of ``sc`` (``sc.info["fault_free"]``: a function building the
    same scenario, same seed, without its faults; set by the fabric-file builder) for the same
    duration, nothing recorded, and return its :func:`completion_figures`.  ``inject`` puts
    the same replayed captures into its fabric.  None when ``sc`` has no such function."""
    build = (getattr(sc, "info", None) or {}).get("fault_free")
    if build is None:
        return None
    twin = build()
    if inject is not None:
        inject(twin.fabric)
    twin.fabric.run(twin.duration_ps)
    return completion_figures(twin)


def _vs(faulted: int | None, base: int | None) -> dict[str, Any]:
    return {"faulted_ps": faulted, "baseline_ps": base,
            "extra_ps": None if faulted is None or base is None else faulted - base,
            "ratio": None if faulted is None or not base else round(faulted / base, 6)}


def compare_completion(faulted: Mapping[str, Any], baseline: Mapping[str, Any] | None
                       ) -> dict[str, Any]:
    """Faulted completion against the fault-free one (:func:`completion_figures` of both):
    ``workload`` (last delivery of any flow), per flow (``flows``: last delivery, bytes
    delivered, complete) and per collective entry (mean iteration time), each
    ``{faulted_ps, baseline_ps, extra_ps, ratio}``.  ``baseline`` None: ``baseline`` is
    ``"not run"`` and only the faulted figures are given.  A workload that did not complete
    in the faulted run has ``complete`` false: its last delivery is not a completion time."""
    b = baseline or {}
    bf = b.get("flows", {})
    flows = []
    for fid, f in faulted["flows"].items():
        g = bf.get(fid, {})
        flows.append({"id": fid, **_vs(f["last_delivery_ps"], g.get("last_delivery_ps")),
                      "delivered_bytes": f["delivered_bytes"],
                      "baseline_delivered_bytes": g.get("delivered_bytes"),
                      "complete": f["complete"], "baseline_complete": g.get("complete")})
    out: dict[str, Any] = {
        "baseline": "run" if baseline is not None else "not run",
        "workload": {**_vs(faulted["last_delivery_ps"], b.get("last_delivery_ps")),
                     "complete": all(f["complete"] for f in faulted["flows"].values()),
                     "baseline_complete": None if baseline is None else
                     all(f["complete"] for f in bf.values())},
        "flows": flows,
    }
    if "collectives" in faulted:
        bc = {c["entry"]: c for c in b.get("collectives", ())}
        out["collectives"] = [
            {"entry": c["entry"], **_vs(c["time_ps"], bc.get(c["entry"], {}).get("time_ps")),
             "complete": c["complete"],
             "baseline_complete": bc.get(c["entry"], {}).get("complete")}
            for c in faulted["collectives"]]
    return out



# ------------------------------------------------------------ lossless collective
#: The first bin of a collective's fault series: 10 ns [A: a choice of this model].  The run's
#: length is not known in advance (a QP error may stop it, a retransmission timeout may
#: stretch it to seconds), so the bin doubles whenever 2 x :data:`COLLECTIVE_BINS` bins are
#: filled: a collective of any length ends with COLLECTIVE_BINS..2 x COLLECTIVE_BINS bins,
#: the same with or without the fault-free run.
COLLECTIVE_FIRST_BIN_PS = 10_000
#: At least this many bins over a collective's run (once it is 2 x 10 ns x this long).
COLLECTIVE_BINS = 200
#: The fault-free run's bins: its progress is the reference of the time to recover, whose
#: resolution is two of its bins [A].
BASELINE_BINS = 1000


class DropCounter:
    """A tracer reading only :class:`sim.events.Dropped`: every drop by reason, and the data
    frames dropped per flow (``flow_drops``, what :func:`sim.study.results.flow_conservation`
    reads).  A control frame (CNP, ACK/NAK: real bytes, its data flow's id) is told apart by
    the ids ``control`` (a :class:`sim.study.samples.ControlIds` on the hosts' ports) saw
    leave the hosts, as :class:`sim.study.results.Recorder` does; ids no longer in its
    ``fabric`` are forgotten when they double."""

    def __init__(self) -> None:
        from sim.events import Dropped
        from sim.study.conservation import live_packets
        from sim.study.samples import ControlIds

        self.wants = frozenset({Dropped})
        #: reason -> [packets, bytes] of every Dropped event.
        self.drops_by_reason: dict[str, list[int]] = {}
        #: flow -> [packets, bytes] of its data frames dropped.
        self.flow_drops: dict[int, list[int]] = {}
        #: The tap on the hosts' ports (every flow id: a collective replays no capture).
        self.control = ControlIds(live_packets, _ANY_FLOW)

    def emit(self, e: Any) -> None:
        r = self.drops_by_reason.setdefault(e.reason, [0, 0])
        r[0] += 1
        r[1] += e.nbytes
        if e.flow >= 0 and e.packet_id not in self.control.ids:
            f = self.flow_drops.setdefault(e.flow, [0, 0])
            f[0] += 1
            f[1] += e.nbytes


#: A flow limit no flow id reaches (:class:`sim.study.samples.ControlIds`).
_ANY_FLOW = 2**62


class CollectiveProbe(FaultProbe):
    """The counters of :class:`FaultProbe` for ``lossless collective``, sampled from time 0
    of a size's fabric at every bin edge while its iterations run, the bin doubling as
    :data:`COLLECTIVE_FIRST_BIN_PS` says.  One goodput column: the bytes every QP's receiver
    has delivered (NVLink transfers are not network traffic), and the PFC pauses sent
    (switches and NICs).  :meth:`iteration` is told each iteration's span: only the bins
    inside one count for the time to recover (between iterations the fabric is idle)."""

    def __init__(self, fab: Any, nbins: int = COLLECTIVE_BINS,
                 first_bin_ps: int = COLLECTIVE_FIRST_BIN_PS) -> None:
        import numpy as np

        from sim.net.switch import Switch
        from sim.nic.host import Host

        self.fab = fab
        self.bin_ps = first_bin_ps
        self.nbins = nbins
        self.ports = [(nid, idx, p) for nid, node in sorted(fab.nodes.items())
                      for idx, p in sorted(node.ports.items())]
        self.flows = [-1]
        self.hosts = [n for n in fab.nodes.values() if isinstance(n, Host)]
        self.switches = [n for n in fab.nodes.values() if isinstance(n, Switch)]
        self.groups = {nid: sorted({tuple(r) for r in route_values(s.routes)
                                    if not isinstance(r, int)})
                       for nid, s in fab.nodes.items() if isinstance(s, Switch)}
        cap = 2 * nbins + 1
        self.tx = np.zeros((cap, len(self.ports)), dtype=np.int64)
        self.rx = np.zeros((cap, 1), dtype=np.int64)
        self.rc = np.zeros((cap, 3), dtype=np.int64)
        self.lost = np.zeros(cap, dtype=np.int64)
        self.pauses = np.zeros(cap, dtype=np.int64)
        self.row = 0
        self.end_ps: int | None = None
        #: (first start, last delivery) of every iteration that completed, in order.
        self.spans: list[tuple[int, int]] = []
        fab.engine.call_at(first_bin_ps, self._tick, priority=1 << 30)

    def _take(self, r: int) -> None:
        from sim.workloads.fluid_transport import transport_of

        fab = self.fab
        nodes = fab.nodes
        fluid = transport_of(fab)
        if fluid is not None:  # flow fidelity: what the fluid flows sent and handed over
            sent = fluid.sent
            self.tx[r] = [sent[(nid, idx)][0] if (nid, idx) in sent else 0
                          for nid, idx, _ in self.ports]
            self.rx[r, 0] = sum(q.delivered_bytes for q in fluid.qps.values())
        else:
            self.tx[r] = [p.tx_bytes for _, _, p in self.ports]
            self.rx[r, 0] = sum(nodes[f.dst].rx_bytes.get(fid, 0)
                                for fid, f in fab.flows.items())
        self.rc[r] = _rc_totals(self.hosts)
        self.lost[r] = _fault_lost(fab)
        self.pauses[r] = (sum(sum(s.pause_sent.values()) for s in self.switches)
                          + sum(h.pause_sent_count for h in self.hosts))

    def _tick(self) -> None:
        if self.end_ps is not None:
            return
        self._take(self.row)
        self.row += 1
        if self.row == 2 * self.nbins:  # merge pairs of bins: keep every other edge
            n = self.nbins
            for a in (self.tx, self.rx, self.rc, self.lost, self.pauses):
                a[:n] = a[1:2 * n:2]
            self.row = n
            self.bin_ps *= 2
        self.fab.engine.call_at((self.row + 1) * self.bin_ps, self._tick, priority=1 << 30)

    def iteration(self, run: Any) -> None:
        """A completed iteration (:class:`sim.workloads.collective.CollectiveRun`)."""
        if run.schedule.transfers:
            self.spans.append((run.first_start_ps, run.last_finish_ps))

    def finish(self, end_ps: int | None = None) -> None:  # type: ignore[override]
        """Stop sampling; the last row is the counters now (a partial bin when the clock is
        not on a bin edge).  ``end_ps``: the run's end (default: the engine's time)."""
        now = self.fab.engine.now_ps
        self.full = self.row  # whole bins
        self.last_ps = now
        if now > self.row * self.bin_ps:
            self._take(self.row)
            self.row += 1
        self.end_ps = now if end_ps is None else end_ps

    def edges_ps(self) -> Any:
        """The bin edges (ps): 0, bin, 2 bin, ..., and the last sample's time."""
        import numpy as np

        e = np.arange(self.row + 1, dtype=np.int64) * self.bin_ps
        if self.row > self.full:
            e[-1] = self.last_ps
        return e

    def delivered(self) -> tuple[list[int], list[int]]:
        """(t_ps, cumulative bytes delivered) at every edge from 0: the progress curve."""
        e = self.edges_ps()
        return [int(x) for x in e], [0, *(int(x) for x in self.rx[:self.row, 0])]

    def arrays(self, links: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """:meth:`FaultProbe.arrays` of the sampled rows, with ``bin_edges_ps`` and
        ``fault_pauses`` (PFC pauses sent per bin)."""
        import numpy as np

        full = (self.tx, self.rx, self.rc, self.lost)
        self.tx, self.rx, self.rc, self.lost = (a[:self.row] for a in full)
        try:
            out = super().arrays(links)
        finally:
            self.tx, self.rx, self.rc, self.lost = full
        out["fault_pauses"] = self._per_bin(self.pauses[:self.row])
        out["bin_edges_ps"] = self.edges_ps()
        out["bin_ps"] = np.array(self.bin_ps, dtype=np.int64)
        return out


def _stall(faulted: int | None, base: int | None) -> dict[str, Any]:
    """``{faulted_ps, baseline_ps, stall_ps, ratio}``: stall = faulted - fault-free."""
    v = _vs(faulted, base)
    v["stall_ps"] = v.pop("extra_ps")
    return v


def _active_progress(probe: CollectiveProbe) -> tuple[Any, Any, Any]:
    """(t_ps, active_ps, delivered bytes) at the probe's bin edges: active_ps is the time spent
    inside the size's iterations (first start to last delivery of each) up to t, so the
    gaps between iterations, which differ between two runs, do not count."""
    import numpy as np

    t, d = probe.delivered()
    t = np.asarray(t, dtype=np.int64)
    act = np.zeros_like(t)
    for a, b in probe.spans:
        act += np.clip(t, a, b) - a
    return t, act, np.asarray(d, dtype=np.int64)


def lag_behind(probe: CollectiveProbe, base: CollectiveProbe) -> tuple[Any, Any, Any]:
    """How far the faulted run is behind the fault-free one: at each bin edge ``t`` of
    ``probe``, (``t``, active time so far, lag).  The lag is the active time the faulted run
    took to deliver its bytes so far minus the time the fault-free run (``base``) took for
    as many (linear between its edges); where the fault-free run held that many bytes for a
    while (idle, or an iteration's first frames still on their way) the last time it held
    them (the least lag).  At the end of the size the lag is the stall of all its
    iterations together (``total_time``).  Both runs must have completed."""
    import numpy as np

    t, act, d = _active_progress(probe)
    _, bact, bd = _active_progress(base)
    first = np.r_[True, np.diff(bd) > 0]  # the first edge at which each total was reached
    last = np.r_[np.diff(bd) > 0, True]  # the last edge that still had it
    need = np.interp(d, bd[first], bact[first])
    need = np.where(np.isin(d, bd), np.interp(d, bd[last], bact[last]), need)
    return t, act, act - need


def progress_recovery(t_ps: Any, act_ps: Any, lag_ps: Any, from_ps: int,
                      spans: Sequence[tuple[int, int]], base_spans: Sequence[tuple[int, int]],
                      tolerance: float = RECOVERY_TOLERANCE, slack_ps: int = 0,
                      min_active_ps: int = 0) -> dict[str, Any]:
    """Time to recover of a collective (:func:`lag_behind`'s arrays; ``spans``,
    ``base_spans``: each iteration's first start and last delivery in the faulted and the
    fault-free run): the first bin edge r at or after ``from_ps`` (the fault's end) from
    which the faulted run keeps the fault-free run's pace: between any two edges from r up
    to the start of the next iteration its lag grows by at most ``tolerance`` x the active
    time between them + ``slack_ps`` (the resolution of the fault-free run's progress), and
    every
    later iteration takes at most (1 + ``tolerance``) x its fault-free time + ``slack_ps``
    (the progress inside two runs of an iteration differs by a few frames' time, their
    ends do not); and the run still works at least ``min_active_ps`` after r (``slack_ps`` /
    ``tolerance``, so that the slack is within the tolerance: a run that is behind until
    its last delivery never showed the fault-free pace again).
    ``recovered_at_ps`` = t[r] and ``time_to_recover_ps`` = t[r] - ``from_ps`` (``from_ps``
    and 0 when r is the first edge at or after it: back at once, to one bin), both null
    (``recovered`` false) when no such edge comes before the end of the run."""
    import numpy as np

    t = np.asarray(t_ps)
    act = np.asarray(act_ps, dtype=np.float64)
    lo = np.asarray(lag_ps, dtype=np.float64) - tolerance * act
    starts = np.array([a for a, _ in spans], dtype=np.int64)
    # an iteration is on pace when it took at most (1 + tolerance) x its fault-free time
    paced = [b - a <= (1 + tolerance) * (bb - ba) + slack_ps
             for (a, b), (ba, bb) in zip(spans, base_spans, strict=False)]
    # at the end of each iteration: the active time so far and the lag (the stalls so far)
    ends_act = np.cumsum([b - a for a, b in spans])
    ends_lo = np.cumsum([(b - a) - (bb - ba) for (a, b), (ba, bb)
                         in zip(spans, base_spans, strict=False)]) - tolerance * ends_act
    after = np.flatnonzero(t >= from_ps)
    for r in after:
        if act[-1] - act[r] < min_active_ps:
            break
        k = int(np.searchsorted(starts, t[r], side="right"))  # the next iteration to start
        until = starts[k] if k < len(starts) else None
        seg = lo[r:None if until is None else int(np.searchsorted(t, until))]
        if k and t[r] < spans[k - 1][1] and k - 1 < len(ends_lo):  # inside iteration k - 1:
            seg = np.append(seg, ends_lo[k - 1])  # its end, exact, however wide the bins
        # the most it falls behind (beyond the tolerance) between any two edges from r on
        rise = (seg[1:] - np.minimum.accumulate(seg)[:-1]).max() if len(seg) > 1 else 0.0
        if rise <= slack_ps and all(paced[k:]):
            at = from_ps if r == after[0] else int(t[r])
            return {"time_to_recover_ps": at - from_ps, "recovered_at_ps": at,
                    "recovered": True}
    return {"time_to_recover_ps": None, "recovered_at_ps": None, "recovered": False}


def straggler_intervals(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``straggler`` entries of ``params.faults`` as intervals (kind, rank or node,
    delay_ps, start_ps, end_ps: null for no end): they are the collective's, not the
    fabric's timeline."""
    out = []
    for f in entries:
        if f.get("kind") != "straggler":
            continue
        iv: dict[str, Any] = {"kind": "straggler"}
        if f.get("rank", -1) >= 0:
            iv["rank"] = f["rank"]
        else:
            iv["node"] = f["node"]
        iv.update(delay_ps=us_to_ps(f["delay_us"]), start_ps=us_to_ps(f["at_us"]),
                  end_ps=us_to_ps(f["until_us"]) or None, time_to_reroute_ps=None)
        out.append(iv)
    return out


class CollectiveObserver:
    """The ``observer`` of :func:`sim.scenarios.collective.run_size` for one size of
    ``lossless collective`` with faults: a :class:`DropCounter` as the fabric's tracer
    (and on the hosts' ports), a :class:`CollectiveProbe` of ``nbins`` from the start (the
    fault-free run's: :data:`BASELINE_BINS`, the resolution of the lag), the names of the
    nodes and ports (:func:`sim.workloads.collective_stats.link_usage`'s) at the end.
    :meth:`report` gives the size's ``faults`` block, :meth:`series` the arrays of its
    ``faults_timeline.png``."""

    def __init__(self, nbins: int = COLLECTIVE_BINS) -> None:
        self.tracer = DropCounter()
        self.nbins = nbins
        self.probe: CollectiveProbe | None = None
        self.ranks: tuple[int, ...] = ()
        self.names: dict[str, Any] = {}

    def attach(self, rf: Any) -> None:
        self.ranks = tuple(rf.ranks)
        self.tracer.control.fabric = rf.fabric
        self.probe = CollectiveProbe(rf.fabric, self.nbins)
        for h in self.probe.hosts:
            h.port.taps.append(self.tracer.control)

    def iteration(self, run: Any) -> None:
        assert self.probe is not None
        self.probe.iteration(run)

    def done(self, rf: Any) -> None:
        from sim.workloads.collective_stats import link_usage

        assert self.probe is not None
        self.probe.finish()
        fab = rf.fabric
        ports, nodes, peers = {}, {}, {}
        for ln in link_usage(fab, 0, max(fab.engine.now_ps, 1), ranks=rf.ranks):
            ports[(ln["node"], ln["port"])] = ln["name"]
            nodes[ln["node"]] = ln["name"].split(":")[0]
            nodes[ln["peer"]] = ln["peer_name"]
            peers[(ln["node"], ln["port"])] = ln["peer"]
        self.names = {"nodes": nodes, "ports": ports, "peers": peers}

    def end_ps(self, row: Mapping[str, Any]) -> int | None:
        """The size's end: its last delivery (every iteration complete), else the QP
        error's time, else (a run cut by its time limit) the clock's."""
        p = self.probe
        assert p is not None
        if row.get("failed"):
            return row["failed"]["t_ps"]
        if row.get("error") is None and p.spans:
            return p.spans[-1][1]
        return p.end_ps

    def report(self, row: Mapping[str, Any], baseline: CollectiveObserver | None,
               baseline_row: Mapping[str, Any] | None, entries: Sequence[Mapping[str, Any]]
               ) -> dict[str, Any]:
        """:func:`collective_report` of this size against the fault-free run's observer
        and row (None: not run)."""
        assert self.probe is not None
        base = None
        if baseline is not None and baseline_row is not None:
            base = {"row": baseline_row, "end_ps": baseline.end_ps(baseline_row),
                    "total_ps": baseline.total_ps(baseline_row), "probe": baseline.probe}
        return collective_report(self.probe, self.tracer, row, base, entries, self.ranks,
                                 end_ps=self.end_ps(row), total_ps=self.total_ps(row))

    def total_ps(self, row: Mapping[str, Any]) -> int | None:
        """The time of all the size's iterations together (warm-up, timed, in place: first
        start to last delivery of each), None when one did not complete."""
        assert self.probe is not None
        if row.get("error") is not None:
            return None
        return sum(b - a for a, b in self.probe.spans)

    def series(self, report: Mapping[str, Any], baseline: CollectiveObserver | None
               ) -> dict[str, Any]:
        """The arrays of the figure (:meth:`CollectiveProbe.arrays` of the report's links),
        with the fault-free run's progress (``baseline_t_ps``, ``baseline_delivered_bytes``:
        cumulative) and the iterations' spans (``iteration_spans_ps``, ``baseline_spans_ps``:
        first start, last delivery)."""
        import numpy as np

        assert self.probe is not None
        out = self.probe.arrays(report["links"])
        t, d = self.probe.delivered()
        out["delivered_t_ps"], out["delivered_bytes"] = np.array(t), np.array(d)
        if baseline is not None and baseline.probe is not None:
            bt, bd = baseline.probe.delivered()
            out["baseline_t_ps"], out["baseline_delivered_bytes"] = np.array(bt), np.array(bd)
            out["baseline_spans_ps"] = np.array(baseline.probe.spans,
                                                dtype=np.int64).reshape(-1, 2)
        out["iteration_spans_ps"] = np.array(self.probe.spans, dtype=np.int64).reshape(-1, 2)
        out["duration_ps"] = np.array(self.probe.end_ps, dtype=np.int64)
        return out


def collective_report(probe: CollectiveProbe, counter: DropCounter, row: Mapping[str, Any],
                      baseline: Mapping[str, Any] | None, entries: Sequence[Mapping[str, Any]],
                      ranks: Sequence[int], end_ps: int | None = None,
                      total_ps: int | None = None) -> dict[str, Any]:
    """The ``faults`` block of one size of ``lossless collective``
    (docs/reference/collective-results.md, "The faults block"): ``row`` is the size's results row,
    ``baseline`` the fault-free run's (``{"row", "end_ps", "total_ps"}``; None: not run),
    ``entries`` the resolved ``params.faults``, ``end_ps`` the size's end on its fabric's clock
    (default: the probe's), ``total_ps`` the time of all its iterations
    (:meth:`CollectiveObserver.total_ps`).  Call after the run (``probe.finish()`` done)."""
    from sim.study.conservation import flow_conservation

    fab = probe.fab
    log = getattr(fab, "fault_log", None)
    events = list(log.events) if log is not None else []
    end = probe.end_ps if end_ps is None else end_ps
    intervals = fault_intervals(events, end) + straggler_intervals(entries)
    intervals.sort(key=lambda iv: iv["start_ps"])
    for iv in intervals:
        if "rank" in iv:
            iv["node"] = ranks[iv["rank"]] if iv["rank"] < len(ranks) else None
    base_probe = (baseline or {}).get("probe")
    lag = None
    if base_probe is not None and row.get("error") is None and \
            ((baseline or {}).get("row") or {}).get("error") is None:
        lag = lag_behind(probe, base_probe)
    for iv in intervals:
        iv["recover_from_ps"] = ref = (iv["end_ps"] if iv["end_ps"] is not None
                                       and iv["end_ps"] <= end else iv["start_ps"])
        if lag is None:
            iv.update(time_to_recover_ps=None, recovered_at_ps=None, recovered=False,
                      why="no fault-free run (--no-baseline)" if base_probe is None
                      else "the size did not complete")
        else:
            slack = 2 * base_probe.bin_ps
            iv.update(progress_recovery(*lag, ref, probe.spans, base_probe.spans,
                                        slack_ps=slack,
                                        min_active_ps=round(slack / RECOVERY_TOLERANCE)))
    links = probe.plotted_links([iv for iv in intervals if iv.get("node") is not None])
    cons = flow_conservation(fab, counter)
    hosts = {h.node_id: h for h in probe.hosts}
    qps = []
    for fid in sorted(cons):
        c = cons[fid]
        src = hosts.get(fab.flows[fid].src)
        rc = src.rc_stats(fid) if src is not None and getattr(src, "reliable", False) else {}
        qps.append({"id": fid, **c, **_balance(c),
                    "retransmitted_packets": rc.get("retransmitted_frames", 0),
                    "retransmitted_bytes": rc.get("retransmitted_bytes", 0),
                    "timeouts": rc.get("timeouts", 0), "qp_error": rc.get("qp_error", 0)})
    bad = [q["id"] for q in qps if q["unaccounted_packets"] or q["unaccounted_bytes"]]
    keys = ("sent", "delivered", "dropped", "in_flight")
    totals = {f"{k}_{u}": sum(q[f"{k}_{u}"] for q in qps) for k in keys
              for u in ("packets", "bytes")}
    b = (baseline or {}).get("row") or {}
    ip, bip = row.get("inplace") or {}, b.get("inplace") or {}
    moved = row.get("failovers") or []
    return {
        "baseline": "run" if baseline is not None else "not run",
        "complete": row.get("error") is None,
        "time": _stall(row.get("time_ps"), b.get("time_ps")),
        "inplace_time": _stall(ip.get("time_ps"), bip.get("time_ps")) if ip else None,
        "total_time": _stall(total_ps, (baseline or {}).get("total_ps")),
        "end_ps": end,
        "failed": row.get("failed"),
        "failovers": {"count": len(moved), "resent_bytes": sum(m["resent_bytes"] for m in moved)},
        "events": events,
        "intervals": intervals,
        "retransmitted": {
            "packets": sum(q["retransmitted_packets"] for q in qps),
            "bytes": sum(q["retransmitted_bytes"] for q in qps),
            "timeouts": sum(q["timeouts"] for q in qps),
            "qp_errors": sum(q["qp_error"] for q in qps)},
        "drops": {"packets_by_reason": dict(sorted(log.drops.items())) if log else {},
                  "bytes_by_reason": dict(sorted(log.dropped_bytes.items())) if log else {},
                  "all_packets_by_reason": {k: v[0] for k, v in
                                            sorted(counter.drops_by_reason.items())},
                  "all_bytes_by_reason": {k: v[1] for k, v in
                                          sorted(counter.drops_by_reason.items())}},
        "recovery_tolerance": RECOVERY_TOLERANCE,
        "bin_ps": probe.bin_ps,
        "links": links,
        "conservation": {
            "balanced": not bad, "unbalanced_flows": bad, **totals,
            "flows": [q for q in qps if q["id"] in bad or q["dropped_packets"]
                      or q["retransmitted_packets"] or q["qp_error"]]},
        "problems": conservation_problems(q for q in qps if q["id"] in bad),
    }

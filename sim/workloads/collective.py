"""Run an NCCL :class:`sim.workloads.nccl.Schedule` through a simulated fabric.

:func:`run_schedule` maps rank ``r`` to host ``hosts[r]`` of a built
:class:`sim.fabric.Fabric` and drives the schedule's transfers as RDMA messages:

* One simulator flow per QP (``Schedule.connections``: ``qps_per_connection`` QPs per
  (src, dst, channel)), a *posted* flow (:meth:`sim.nic.host.Host.add_posted_flow`) that sends
  only the messages given to it, in order, like a QP fed work requests.  Its flow id is the
  QP's local QP number (unique within the schedule), which is also the DestQP of the CNPs the
  receiver returns; switches hash ``(src, dst, flow id)`` for ECMP, standing for the QP's
  5-tuple with its own UDP source port (``Connection.udp_sports``, recorded in
  :attr:`CollectiveRun.flows`), so different QPs of one host pair may take different paths.
* Each :class:`~sim.workloads.nccl.Transfer` becomes one message per QP of its ``qp_bytes``
  (NCCL stripes a send over the QPs, ``ncclIbMultiSend``), cut into packets of ``mtu_bytes``
  of payload plus the headers of the fabric's stack (:attr:`sim.fabric.Fabric.stack`:
  RoCEv2's 58 bytes, :data:`ROCE_HEADER_BYTES`, or InfiniBand's 26, ``wire.linkstack``),
  the last packet short.
  A QP piece of 0 bytes sends nothing.
* Running a schedule again on the same fabric (the next iteration) reuses its QPs' flows,
  with their congestion-control state, as NCCL reuses its connections.
* Dataflow: a transfer is posted when every transfer in its ``depends_on`` has been fully
  received (the schedule already holds the FIFO limit: the send ``max_inflight`` places
  earlier on the connection is one of them) and the previous send of its connection has
  been posted (sends leave in ``seq`` order).  It is received when the last frame of each of
  its QP pieces has arrived (:attr:`sim.nic.host.Host.on_data`).

Faults (docs/explanation/faults.md "A collective's QP error and failover"):

* A straggler: ``delay_ps={rank: ps}`` (or ``{rank: (ps, at_ps, until_ps)}``: only for the
  transfers that become ready in ``[at_ps, until_ps)``, ``until_ps`` None: to the end): every
  transfer the rank sends becomes ready that much later than its dependencies allow.
* A QP error (RC reliability on, the retries used up: :mod:`sim.nic.rc`): NCCL's IB
  transport sees the work completion with an error status (``IBV_WC_RETRY_EXC_ERR``) in
  ``ncclIbTest`` (src/transport/net_ib.cc of github.com/NVIDIA/nccl: a completion whose
  status is not ``IBV_WC_SUCCESS`` logs "NET/IB : Got completion from peer ... with error
  12" and returns ``ncclRemoteError``); the proxy stops, the communicator is in
  error (``ncclCommGetAsyncError``) and the framework aborts it (PyTorch's ProcessGroupNCCL
  watchdog).  So the job stops at that moment: :attr:`CollectiveJob.failed` holds the time
  and the QP, nothing more is posted, ``on_fail(job)`` is called and :func:`run_schedule`
  raises :class:`QpFailure`.  The transport's timeout *is* NCCL's timeout here: the QP errs
  ``(retry_cnt + 1)`` local ACK timeouts after the last progress (``NCCL_IB_TIMEOUT`` 20,
  ``NCCL_IB_RETRY_CNT`` 7: about 34 s).  The framework's own watchdog poll (PyTorch: about
  100 ms) is not added [A].
* ``failover=True`` [A: an option, not NCCL's default behaviour]: the failed QP's unfinished
  messages move to a new QP on another rail of the same nodes: from the NIC of the next GPU
  of the sending node (rail ``(r + 1) mod G``) to the NIC on that rail of the receiving node,
  with NVLink hops from the sender's GPU and to the receiver's GPU; only the bytes that did
  not arrive (in order) are re-sent (:attr:`CollectiveRun.failovers`, ``resent_bytes``), and
  later sends of that QP take the new one (also in later iterations on the fabric).  With
  one GPU per node, or every rail tried, the job fails as above.

PFC, ECN and DCQCN act as the fabric and its hosts are configured (flows use the hosts'
``cc``; data goes on class ``tc``, 3 by default, the lossless class of the MMU defaults).
The collective's time is the last delivery minus the first start.  Without ``host``
NCCL's own latencies (kernel launch, proxy, GPU copies, PCIe) are not modelled: every rank's
NIC is a host of the fabric and each transfer starts the moment its data is there.  With
``host`` (:class:`sim.workloads.tuner.HostSide`, NCCL's cost model): the call is launched at
:meth:`CollectiveJob.start` and its first transfers become ready ``launch_ps`` later; every
transfer, once its data are ready, waits its step latency (``inter_ps`` between nodes,
``intra_ps`` inside one), then its sender's channel moves its bytes at ``channel_Bps`` (one
transfer at a time per rank and channel), then it is posted; the time counts from the
launch.

Nodes, NVLink and PXN (``gpus_per_node`` > 1; ranks ``n*G .. n*G+G-1`` are node ``n``, and
``hosts[r]`` is the fabric host of rank ``r``'s own NIC, the NIC map):

* A transfer between two GPUs of one node goes over NVLink (``nvlink``, default on), not
  the NIC: no packets, engine timers only.  Each GPU has an NVLink egress and an ingress of
  ``nvlink_bps`` through a non-blocking NVSwitch (:class:`NvlinkDomain`, one per fabric, so
  jobs sharing GPUs share their NVLink).  A transfer holds its sender's egress for
  ``wire_bytes * 8 / nvlink_bps`` from when it is free, and its receiver's ingress as long
  from when that is free (not before the bytes left; FIFO in the order transfers are
  posted, so two on one port serialise, but a busy receiver does not hold the sender's
  other transfers), and is received ``nvlink_latency_ps`` after its last byte entered.
  Wire bytes are the protocol's (LL, LL128 flags count; NVLink has no RoCE headers).
* NVLS (NVLink SHARP): a transfer to or from an NVLS buffer (a schedule's ranks from
  ``sch.nranks`` on, :func:`sim.workloads.nccl.nvls_buffer`) holds only its GPU's link, in
  or out: the switch reduces what the GPUs send in and copies a stored result out to each
  GPU on that GPU's own link.  The buffer's sends use no GPU channel (NCCL's host side).
* A transfer to another node is a network transfer from the NIC that
  :func:`sim.workloads.nccl.send_nic_rank` names: with ``pxn`` (default) the NIC of the
  sender's node on the receiver's rail, reached first over NVLink (the same egress model)
  when that is another GPU's NIC; it is then posted on that NIC like any other send, and
  received by the receiver's own NIC.  ``nvlink=False`` sends every transfer, even inside a
  node, through the sender's own NIC (the behaviour before nodes were modelled).
* SHARP (NCCL's CollNet, :func:`sim.workloads.nccl.sharp_aggregator`): a head sends its
  node's share to its rail's aggregator (a host on the rail's leaf, ``aggregators``) from
  its own NIC, never by PXN; the aggregators answer each other (a tree of two levels) and
  the heads directly.  Their sends are the switches': no NCCL step latency and no GPU
  channel.
* Flow fidelity (``fidelity="flow"``): each QP is a fluid flow on its packets' path at its
  max-min fair rate (:mod:`sim.workloads.fluid_transport`) instead of packets; everything
  above is the same.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from weakref import WeakKeyDictionary

from sim.fabric import Fabric
from sim.net.switch import Switch
from sim.nic.host import ROCE_HEADER_BYTES, Flow, Host
from sim.workloads.nccl import Protocol, Schedule, Transfer, send_nic_rank
from sim.workloads.tuner import HostSide

__all__ = ["ROCE_HEADER_BYTES", "NVLINK_BPS", "NVLINK_LATENCY_PS", "CollectiveJob",
           "CollectiveRun", "NvlinkDomain", "QpFailure", "RunError", "failure_text",
           "frames_bytes", "open_packet_qp",
           "nvlink_domain", "run_schedule", "fabric_counters"]

# ROCE_HEADER_BYTES (58, from the field tables) is sim.nic.host's, re-exported here.
#: How a collective's network sends are simulated: ``packet`` (every frame through the
#: switches' queues, PFC, ECN, congestion control) or ``flow`` (each QP a fluid flow at its
#: max-min fair rate on its path, :mod:`sim.workloads.fluid_transport`).
FIDELITIES = ("packet", "flow")
#: RoCE payload per frame at a 1024-byte MTU (the simulator's default packet).
DEFAULT_MTU_BYTES = 1024
#: How long the engine runs between checks for the last delivery.
DEFAULT_SLICE_PS = 20_000_000
#: NVLink per direction of one DGX H100 GPU: NVLink 4, 18 links x 25 GB/s = 450 GB/s, the
#: "900 GB/s" (both directions) of NVIDIA's H100 Tensor Core GPU datasheet (H100 SXM) and the
#: 18 fourth-generation links of the "NVIDIA H100 Tensor Core GPU Architecture" whitepaper.
NVLINK_BPS = 450 * 8 * 10**9
#: NVLink latency of one transfer, 1 µs: an assumption (the NVSwitch hop and the FIFO's
#: flag handshake of one NCCL step), not a published figure.
NVLINK_LATENCY_PS = 1_000_000


class RunError(RuntimeError):
    """The collective did not complete (e.g. a deadlock, drops without retransmission)."""


class QpFailure(RunError):
    """The collective failed on a QP error (module docstring): ``failed`` is
    :attr:`CollectiveJob.failed`."""

    def __init__(self, msg: str, failed: dict[str, Any]) -> None:
        super().__init__(msg)
        self.failed = failed


def failure_text(failed: Mapping[str, Any]) -> str:
    """One line about a failed collective (:attr:`CollectiveJob.failed`)."""
    return (f"failed at {failed['t_ps'] / 1e6:.3f} us: QP {failed['qp']} (rank "
            f"{failed['src_rank']} -> {failed['dst_rank']}, channel {failed['channel']}, "
            f"host {failed['host']} -> {failed['peer']}) in error after its retries"
            + (f"; {failed['why']}" if failed.get("why") else ""))


def frames_bytes(payload_bytes: int, mtu_bytes: int = DEFAULT_MTU_BYTES,
                 header_bytes: int = ROCE_HEADER_BYTES) -> int:
    """Frame bytes on the wire for one message of ``payload_bytes``: the payload plus the
    headers of its ``ceil(payload / mtu)`` frames (0 for an empty message)."""
    if payload_bytes <= 0:
        return 0
    return payload_bytes + -(-payload_bytes // mtu_bytes) * header_bytes


@dataclass(slots=True)
class CollectiveRun:
    """What :func:`run_schedule` measured.  Times in ps of the fabric's clock."""

    schedule: Schedule
    hosts: tuple[int, ...]
    start_ps: list[int | None]
    finish_ps: list[int | None]
    #: flow id -> (src rank, dst rank, channel, QP index, UDP source port)
    flows: dict[int, tuple[int, int, int, int, int]] = field(default_factory=dict)
    #: flow id -> frame bytes posted by this run (what the receiver must get)
    posted_bytes: dict[int, int] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    #: failover: one dict per QP moved: t_ps, qp, to_qp, from_host, to_host,
    #: resent_bytes (frame bytes re-sent: what had not arrived)
    failovers: list[dict[str, Any]] = field(default_factory=list)
    #: transfer id -> when its dependencies were met (its data ready; it is posted at
    #: ``start_ps``, later by NCCL's host side and its connection's order)
    ready_ps: list[int | None] = field(default_factory=list)
    #: when the call was launched, with NCCL's host side (``host``):
    #: the time counts from it; None: from the first transfer's start
    launch_ps: int | None = None

    @property
    def complete(self) -> bool:
        return all(f is not None for f in self.finish_ps)

    @property
    def first_start_ps(self) -> int:
        return _extreme(min, self.start_ps)

    @property
    def last_finish_ps(self) -> int:
        return _extreme(max, self.finish_ps)

    @property
    def time_ps(self) -> int:
        """Last delivery minus the launch (with host-side latencies) or the first start
        (0 for a schedule without transfers)."""
        if not self.schedule.transfers:
            return 0
        start = self.first_start_ps if self.launch_ps is None else self.launch_ps
        return self.last_finish_ps - start


def fabric_counters(fabric: Fabric) -> dict[str, int]:
    """Totals over the fabric: PFC pauses sent (switches and NICs), CE marks, CNPs sent,
    drops (every frame the network lost: switches, stalled receivers, full NIC receive
    buffers and the faults of :mod:`sim.fabric.faults`, a down link or a lossy one) and the
    deepest egress queue of any switch port."""
    sw = [n for n in fabric.nodes.values() if isinstance(n, Switch)]
    hs = [n for n in fabric.nodes.values() if isinstance(n, Host)]
    return {
        "pfc_pauses": sum(sum(s.pause_sent.values()) for s in sw)
        + sum(h.pause_sent_count for h in hs),
        "ce_marks": sum(s.ce_marked for s in sw),
        "cnps": sum(h.cnp_sent for h in hs),
        "drops": fabric.dropped_packets(),
        "max_queue_bytes": max((max(p.max_queue_bytes) for s in sw for p in s.ports.values()),
                               default=0),
    }


class NvlinkDomain:
    """The NVLink of one fabric's GPUs (keyed by their NIC's host id) behind a non-blocking
    NVSwitch: when each GPU's egress and ingress are next free, and the bytes the GPUs sent
    into it (an NVLS buffer's copies out of the switch are not counted again)."""

    __slots__ = ("egress_free_ps", "ingress_free_ps", "nbytes")

    def __init__(self) -> None:
        self.egress_free_ps: dict[int, int] = {}
        self.ingress_free_ps: dict[int, int] = {}
        self.nbytes = 0

    def reserve(self, src: int, dst: int, nbytes: int, rate_bps: int, latency_ps: int,
                now_ps: int) -> int:
        """Book ``nbytes`` from GPU ``src`` to GPU ``dst`` at ``rate_bps`` from ``now_ps``:
        they leave ``src``'s egress from when it is free and enter ``dst``'s ingress from
        when that is free (not before they left), each port held for ``nbytes * 8 /
        rate_bps``; received ``latency_ps`` after the last byte entered.  Returns that
        time (ps).  A busy receiver does not hold the sender's egress: the NVSwitch takes
        the bytes in the meantime [A], so a GPU's transfers to other GPUs go on (holding
        both ports from when both are free made many-to-many copies wait behind one busy
        receiver, a head-of-line blocking no NVSwitch has).  A negative ``src`` or ``dst``
        is an NVLS buffer in the NVSwitch (:func:`sim.workloads.nccl.nvls_buffer`), which
        holds no port of its own."""
        dur = -(-nbytes * 8 * 10**12 // rate_bps)
        left = max(now_ps, self.egress_free_ps.get(src, 0))
        end = max(left, self.ingress_free_ps.get(dst, 0)) + dur
        if src >= 0:  # a negative key is the NVSwitch's side of an NVLS buffer: each GPU's
            self.egress_free_ps[src] = left + dur  # link is what limits it
            self.nbytes += nbytes  # bytes GPUs sent into NVLink
        if dst >= 0:
            self.ingress_free_ps[dst] = end
        return end + latency_ps


_DOMAINS: WeakKeyDictionary[Fabric, NvlinkDomain] = WeakKeyDictionary()
#: failover: per fabric, a failed QP -> (its replacement QP, sending rank's NIC, receiving
#: rank's NIC), so that later iterations send on the replacement
_MOVED: WeakKeyDictionary[Fabric, dict[int, tuple[int, int, int]]] = WeakKeyDictionary()


def nvlink_domain(fabric: Fabric) -> NvlinkDomain:
    """The fabric's :class:`NvlinkDomain` (made on first use); its ``nbytes`` are the bytes
    every job has moved over NVLink on this fabric."""
    dom = _DOMAINS.get(fabric)
    if dom is None:
        dom = _DOMAINS[fabric] = NvlinkDomain()
    return dom


class _Dispatch:
    """A host's ``on_data`` shared by the jobs whose QPs it receives: flow id -> job."""

    __slots__ = ("jobs",)

    def __init__(self) -> None:
        self.jobs: dict[int, Callable[[int, int, int], None]] = {}

    def __call__(self, fid: int, got: int, now: int) -> None:
        cb = self.jobs.get(fid)
        if cb is not None:
            cb(fid, got, now)


def _dispatch(host: Any) -> _Dispatch:
    """The :class:`_Dispatch` on ``host.on_data`` (installed on first use), through which every
    job's QPs receive their data; ValueError if the host has another ``on_data`` callback."""
    disp = host.on_data
    if not isinstance(disp, _Dispatch):
        if disp is not None:
            raise ValueError(f"host {host.node_id} already has an on_data callback")
        disp = host.on_data = _Dispatch()
    return disp


def open_packet_qp(fabric: Fabric, qpn: int, sh: Host, dh: Host, *, tc: int,
                   packet_bytes: int, conn: str,
                   on_data: Callable[[int, int, int], None]) -> int:
    """QP ``qpn`` from host ``sh`` to host ``dh`` as a flow of ``fabric`` (made now, or the
    one an earlier iteration left, which must join the same hosts with nothing in flight),
    its deliveries to ``on_data(fid, delivered bytes, now)``; returns what it had delivered
    before.  ValueError (naming its connection ``conn``) for a flow id another flow holds
    or a QP still sending."""
    old = fabric.flows.get(qpn)
    if old is None:
        flow = Flow(qpn, sh.node_id, dh.node_id, sh.port.rate_bps, tc=tc,
                    packet_bytes=packet_bytes, start_ps=fabric.engine.now_ps)
        fabric.flows[qpn] = flow
        sh.add_posted_flow(flow)
        dh.expect(flow)
    elif (old.src, old.dst, old.packet_bytes) != (sh.node_id, dh.node_id, packet_bytes):
        raise ValueError(f"flow id {qpn} (QP of {conn}) is another flow of the fabric")
    elif sh.sent_bytes[qpn] != dh.rx_bytes.get(qpn, 0):
        raise ValueError(f"QP {qpn} of {conn} still has bytes in flight")
    _dispatch(dh).jobs[qpn] = on_data
    return dh.rx_bytes.get(qpn, 0)


class _QpDispatch:
    """A host's ``on_qp_error`` shared by the jobs whose QPs it sends: flow id -> job."""

    __slots__ = ("jobs",)

    def __init__(self) -> None:
        self.jobs: dict[int, Callable[[int, int], None]] = {}

    def __call__(self, fid: int, now: int) -> None:
        cb = self.jobs.get(fid)
        if cb is not None:
            cb(fid, now)


class _Conn:
    """A connection's sends in ``seq`` order, how many have been posted (``next``), the
    rank whose NIC sends them (``nic``; None: over NVLink to the receiver) and its QPs'
    flow ids (``qps``)."""

    __slots__ = ("next", "nic", "qps", "sends")

    def __init__(self) -> None:
        self.sends: list[Transfer] = []
        self.next = 0
        self.qps: list[int] = []  # the flow id of each QP (a failed QP: its replacement)


def _extreme(pick: Callable[[list[int]], int], times: list[int | None]) -> int:
    """``pick`` (min or max) of the times that are not None: of the whole list at C speed when
    none is (a complete run), else of those that are set (ValueError when none is)."""
    try:
        out = pick(times)  # type: ignore[arg-type]
    except TypeError:  # some are None (int and None do not compare)
        out = None
    return out if out is not None else pick([t for t in times if t is not None])


def _seq(t: Transfer) -> int:
    return t.seq


class CollectiveJob:
    """One schedule driven through a fabric by the fabric's own events (no engine loop of
    its own): :meth:`start` posts the transfers without dependencies at the engine's current
    time, and the rest follow as data arrives; ``on_done(job)`` is called at the last
    delivery.  :func:`run_schedule` is a job plus a loop that runs the engine until it is
    done; a scenario (``[[collective]]`` of a fabric file) starts jobs inside its own run.
    Several jobs may share hosts (each QP's deliveries go to its own job).

    ``gpus_per_node`` (default 1: every rank its own node), ``nvlink``, ``nvlink_bps``,
    ``nvlink_latency_ps`` and ``pxn``: see the module docstring.  ``aggregators``: the
    hosts of a schedule's SHARP aggregators (CollNet), in :func:`sim.workloads.nccl.
    sharp_aggregator`'s order (:attr:`sim.fabric.rail.RailFabric.aggregators`,
    :attr:`sim.fabric.fattree.SuperPod.aggregators`).  ``fidelity``: ``"packet"`` or
    ``"flow"`` (module docstring).  ``reliable`` (True, or
    the options of :meth:`sim.nic.host.Host.set_reliable`: ``retransmit``, ``ack_timeout``,
    ``retry_cnt``) turns RC reliability on in the job's hosts (sim.nic.rc); None leaves
    them as they are."""

    def __init__(self, sch: Schedule, fabric: Fabric, hosts: Sequence[int], *, tc: int = 3,
                 mtu_bytes: int = DEFAULT_MTU_BYTES, header_bytes: int | None = None,
                 on_done: Callable[[CollectiveJob], None] | None = None,
                 gpus_per_node: int = 1, nvlink: bool = True, nvlink_bps: int = NVLINK_BPS,
                 nvlink_latency_ps: int = NVLINK_LATENCY_PS, pxn: bool = True,
                 delay_ps: Mapping[int, Any] | None = None,
                 reliable: Mapping[str, Any] | bool | None = None,
                 failover: bool = False,
                 on_fail: Callable[[CollectiveJob], None] | None = None,
                 host: HostSide | None = None,
                 aggregators: Sequence[int] = (), fidelity: str = "packet") -> None:
        #: NCCL's host side (sim.workloads.tuner.HostSide): the launch, then each
        #: transfer's step latency and its channel's time when its data are ready; None: none
        self.host = host
        if fidelity not in FIDELITIES:
            raise ValueError(f"fidelity must be one of {', '.join(FIDELITIES)}, got "
                             f"{fidelity!r}")
        #: flow fidelity: the fabric's QPs as fluid flows (sim.workloads.fluid_transport)
        self.fluid = None
        if fidelity == "flow":
            from sim.workloads.fluid_transport import fluid_transport

            self.fluid = fluid_transport(fabric)
        #: (rank, channel) -> when that GPU channel is free again (with ``host``); transfer
        #: id -> when its channel's copy ends (NVLink transfers, with ``host``)
        self.channel_free_ps: dict[tuple[int, int], int] = {}
        self.copy_done_ps: dict[int, int] = {}
        #: (rank, channel) -> when its receiving copy is free (host.recv_copy)
        self.recv_free_ps: dict[tuple[int, int], int] = {}
        if reliable is not None:  # RC in the job's hosts (Host.set_reliable)
            opts = {} if isinstance(reliable, bool) else dict(reliable)
            on = reliable if isinstance(reliable, bool) else bool(opts.pop("reliable", True))
            for h in dict.fromkeys(hosts):
                fabric.nodes[h].set_reliable(on, **opts)
        #: Stragglers: rank -> (ps every transfer it sends starts late by, from,
        #: until or None).
        self.delay_ps = {r: (d, 0, None) if isinstance(d, int) else tuple(d)
                         for r, d in (delay_ps or {}).items() if d}
        if any(len(d) != 3 or d[0] < 0 or not 0 <= r < sch.nranks
               for r, d in self.delay_ps.items()):
            raise ValueError(f"delay_ps: ranks 0..{sch.nranks - 1}, delays >= 0; got "
                             f"{dict(delay_ps or {})}")
        self.failover, self.on_fail = bool(failover), on_fail
        #: None, or why the job stopped: t_ps, qp, src_rank, dst_rank, channel, qp_index,
        #: host, peer (the QP's NICs), why
        self.failed: dict[str, Any] | None = None
        #: flow id -> (rank whose NIC receives it, rank it is for): an NVLink hop after it
        self.hop: dict[int, tuple[int, int]] = {}
        self.tried: dict[tuple[int, int, int, int], int] = {}
        if len(hosts) < sch.nranks:
            raise ValueError(f"{sch.nranks} ranks need {sch.nranks} hosts, got {len(hosts)}")
        hosts = tuple(hosts[:sch.nranks])
        if len(set(hosts)) != sch.nranks:
            raise ValueError("two ranks on one host")
        if header_bytes is None:  # the fabric's header stack (RoCEv2 or InfiniBand)
            header_bytes = fabric.stack.header_bytes
        if mtu_bytes <= 0 or header_bytes < 0:
            raise ValueError("mtu_bytes must be > 0 and header_bytes >= 0")
        g = gpus_per_node
        if not isinstance(g, int) or g < 1:
            raise ValueError(f"gpus_per_node must be an int >= 1, got {g!r}")
        if nvlink_bps <= 0 or nvlink_latency_ps < 0:
            raise ValueError("nvlink_bps must be > 0 and nvlink_latency_ps >= 0")
        self.gpn, self.nvlink, self.pxn = g, bool(nvlink) and g > 1, bool(pxn)
        if sch.buffers and not self.nvlink:  # (CollNet's aggregators need no NVLink)
            raise ValueError(f"{sch.algorithm.value} needs NVLink between the GPUs of a node "
                             f"(nvlink on, gpus_per_node >= 2)")
        if sch.buffers and g != sch.gpus_per_node:
            raise ValueError(f"{sch.algorithm.value}: the schedule's nodes have "
                             f"{sch.gpus_per_node} GPUs, the job's {g}")
        if len(aggregators) < sch.aggregators:
            raise ValueError(f"the schedule sums on {sch.aggregators} SHARP aggregators "
                             f"(CollNet); aggregators has {len(aggregators)} hosts "
                             f"(rail_optimized(sharp=True) and superpod(sharp=True) make "
                             f"them)")
        #: the first SHARP aggregator's pseudo-rank (past every rank when there are none)
        self.agg0 = 3 * sch.nranks if sch.aggregators else sch.nranks + sch.buffers
        #: pseudo-rank -> its node: the GPUs' (by the job's nodes), the NVLS buffers' and
        #: the SHARP aggregators' (-1: no such rank)
        self.node = [r // g for r in range(sch.nranks)] + [
            sch.node_of(r) for r in range(sch.nranks, sch.nranks + sch.buffers)]
        if sch.aggregators:
            self.node += [-1] * (self.agg0 - len(self.node)) + [
                sch.node_of(self.agg0 + i) for i in range(sch.aggregators)]
        #: rank -> its key in the NVLink domain: a GPU's host id, an NVLS buffer's -1 - i
        self.nvlink_bps, self.nvlink_latency_ps = nvlink_bps, nvlink_latency_ps
        self.nvl = nvlink_domain(fabric) if self.nvlink else None
        self.on_done = on_done
        self.sch, self.fabric, self.hosts = sch, fabric, hosts
        #: pseudo-rank -> host: the ranks', none (-1) for NVLS buffers, the SHARP
        #: aggregators'
        self.host_of = hosts + (-1,) * (self.agg0 - sch.nranks) + tuple(
            aggregators[:sch.aggregators])
        self.nvl_key = hosts + tuple(-1 - i for i in range(sch.buffers))
        self.mtu, self.hdr = mtu_bytes, header_bytes
        n = len(sch.transfers)
        self.run = CollectiveRun(sch, self.hosts, [None] * n, [None] * n)
        self.run.ready_ps = [None] * n
        self.waiting = [len(t.depends_on) for t in sch.transfers]
        self.users: dict[int, list[int]] = defaultdict(list)
        #: connection (src, dst, channel) -> its _Conn; transfer id -> its connection's _Conn
        self.conns: dict[tuple[int, int, int], _Conn] = {}
        self.conn_of: list[_Conn] = []
        conns, conn_of, users = self.conns, self.conn_of, self.users
        for t in sch.transfers:
            for d in t.depends_on:
                users[d].append(t.id)
            key = (t.src, t.dst, t.channel)
            c = conns.get(key)
            if c is None:
                c = conns[key] = _Conn()
            c.sends.append(t)
            conn_of.append(c)
        for c in conns.values():  # sends leave in seq order (a hand-made schedule's may not
            s = c.sends           # follow its ids)
            seqs = list(map(_seq, s))
            if seqs != sorted(seqs):
                s.sort(key=_seq)
        for key, c in conns.items():  # before the fabric is touched
            if key not in sch.connections:
                raise ValueError(f"transfer {c.sends[0].id} is on connection {key} (src, dst, "
                                 f"channel), which the schedule's connections do not have")
        self.data_ready = [False] * n
        self.pieces_left = [0] * n
        #: flow id -> deque of (cumulative frame bytes at the end of a piece, transfer id)
        self.rx_ends: dict[int, deque[tuple[int, int]]] = {}
        self.qp_flow: dict[tuple[int, int, int, int], int] = {}
        #: QP split (wire bytes per QP) -> frame bytes per QP
        self.qp_frame_bytes: dict[tuple[int, ...], tuple[int, ...]] = {}
        self.ndone = 0
        self.started = False
        #: flow id -> bytes the QP had delivered before this run (a QP reused by the next
        #: iteration of a collective keeps its counters and its congestion-control state)
        self.base: dict[int, int] = {}
        for key, conn in sch.connections.items():
            src, dst, ch = key
            # the rank whose NIC sends the connection, or None for NVLink inside a node
            c = conns.get(key)
            if c is None:  # a connection without transfers
                c = conns[key] = _Conn()
            if self.nvlink and self.node[src] == self.node[dst]:
                c.nic = None
                continue
            relay = send_nic_rank(src, dst, g, self.pxn) if self.nvlink else src
            if relay >= sch.nranks or max(src, dst) >= self.agg0:
                # a last node with fewer GPUs has no NIC on that rail; a head talks to its
                # rail's SHARP aggregator on its own NIC (no PXN), which answers it directly
                relay = src
            c.nic = relay
            moved = _MOVED.get(fabric, {})
            for q, (qpn, sport) in enumerate(zip(conn.qpns, conn.udp_sports, strict=True)):
                sh, dh = self._host(relay), self._host(dst)
                if self.fluid is not None:  # a fluid flow on the QP's path
                    self.base[qpn] = self.fluid.open(qpn, sh.node_id, dh.node_id,
                                                     self._on_data, mtu_bytes + header_bytes,
                                                     header_bytes)
                    self.qp_flow[(src, dst, ch, q)] = qpn
                    c.qps.append(qpn)
                    self.run.flows[qpn] = (src, dst, ch, q, sport)
                    self.run.posted_bytes[qpn] = 0
                    self.rx_ends[qpn] = deque()
                    continue
                while qpn in moved:  # failed in an earlier iteration: its replacement
                    qpn, a, b = moved[qpn]
                    sh, dh = self._host(a), self._host(b)
                    if b != dst:
                        self.hop[qpn] = (b, dst)
                self.base[qpn] = open_packet_qp(fabric, qpn, sh, dh, tc=tc,
                                                packet_bytes=mtu_bytes + header_bytes,
                                                conn=str(key), on_data=self._on_data)
                self._watch(sh, qpn)
                self.qp_flow[(src, dst, ch, q)] = qpn
                c.qps.append(qpn)
                self.run.flows[qpn] = (src, dst, ch, q, sport)
                self.run.posted_bytes[qpn] = 0
                self.rx_ends[qpn] = deque()


    def _host(self, rank: int) -> Host:
        if not 0 <= rank < len(self.host_of) or self.host_of[rank] < 0:
            raise ValueError(f"rank {rank} has no host (hosts has {len(self.hosts)})")
        node = self.fabric.nodes.get(self.host_of[rank])
        if not isinstance(node, Host):
            raise ValueError(f"rank {rank}: node {self.host_of[rank]} is not a host")
        return node

    @property
    def done(self) -> bool:
        """Every transfer received."""
        return self.ndone == len(self.sch.transfers)

    def start(self) -> None:
        """Start the schedule now (``fabric.engine.now_ps``); call once."""
        if self.started:
            raise RuntimeError("a CollectiveJob starts once; make another for the next "
                               "iteration")
        self.started = True
        if not self.sch.transfers and self.on_done is not None:
            self.on_done(self)
        host = self.host
        if host is not None:
            self.run.launch_ps = self.fabric.engine.now_ps
            self.fabric.engine.call_in(host.launch_ps, self._launched)
            return
        now = self.fabric.engine.now_ps
        for t in self.sch.transfers:
            if not self.waiting[t.id]:
                self.run.ready_ps[t.id] = now
                self._ready(t)

    def _launched(self) -> None:
        """The kernel runs (``host.launch_ps`` after :meth:`start`): the transfers without
        dependencies start their step."""
        now = self.fabric.engine.now_ps
        for t in self.sch.transfers:
            if not self.waiting[t.id]:
                self.run.ready_ps[t.id] = now
                self._ready_after_step(t)

    def _ready_after_step(self, t: Transfer) -> None:
        """``t``'s data are ready: after NCCL's step latency (network between nodes, NVLink
        inside one) its channel moves it (:meth:`_on_channel`)."""
        host = self.host
        assert host is not None
        node = self.node
        if t.src >= self.agg0:  # a SHARP aggregator's answer: the switch's, no NCCL step
            self._on_channel(t)
            return
        self.fabric.engine.call_in(host.step_ps(node[t.src] != node[t.dst]), self._on_channel,
                                   t)

    def _on_channel(self, t: Transfer) -> None:
        """The sender's GPU channel moves ``t``'s bytes (``host.busy_ps``), one transfer at a
        time.  To another node the channel writes the step into the send buffer and the
        proxy posts it when it is whole (store and forward); inside a node the channel's
        copy *is* the NVLink transfer: it is posted when the channel is free and, with
        Simple (the receiver waits for the step's flag), received no sooner than the copy
        ends (``copy_done_ps``); LL and LL128 stream line by line [A]."""
        host = self.host
        assert host is not None
        # an NVLS buffer's sends are the NVSwitch's, no GPU channel's
        busy = host.busy_ps(t.nbytes) if t.src < self.sch.nranks else 0
        if not busy:
            self._ready(t)
            return
        eng = self.fabric.engine
        key = (t.src, t.channel)
        start = max(eng.now_ps, self.channel_free_ps.get(key, 0))
        self.channel_free_ps[key] = done = start + busy
        if self.node[t.src] != self.node[t.dst] or not self.nvlink:  # the network: a step
            eng.call_at(done, self._ready, t)
            return
        if self.sch.protocol is Protocol.SIMPLE:  # a whole step, then its flag
            self.copy_done_ps[t.id] = done
        if start > eng.now_ps:
            eng.call_at(start, self._ready, t)
        else:
            self._ready(t)

    def _ready(self, t: Transfer) -> None:
        late = self.delay_ps.get(t.src) if self.delay_ps else None
        if late:  # a straggler: its transfer becomes ready delay_ps later (in its window)
            now = self.fabric.engine.now_ps
            if late[1] <= now and (late[2] is None or now < late[2]):
                self.fabric.engine.call_in(late[0], self._ready_now, t)
                return
        self._ready_now(t)

    def _ready_now(self, t: Transfer) -> None:
        if self.failed is not None:
            return
        data_ready = self.data_ready
        data_ready[t.id] = True
        c = self.conn_of[t.id]
        sends, i = c.sends, c.next
        while i < len(sends) and data_ready[sends[i].id]:
            self._post(sends[i], c.nic)
            i += 1
        c.next = i

    def _post(self, t: Transfer, nic: int | None) -> None:
        """Post ``t`` now; ``nic``: the rank whose NIC sends it, None over NVLink to its
        receiver (its connection's)."""
        if self.failed is not None:
            return
        eng = self.fabric.engine
        now = eng.now_ps
        self.run.start_ps[t.id] = now
        if nic == t.src:
            self._post_net(t, nic)
            return
        if not t.wire_bytes:
            self._finish(t.id, now)
            return
        # over NVLink: to the receiver itself (inside a node) or to the GPU whose NIC sends
        to = t.dst if nic is None else nic
        at = self.nvl.reserve(self.nvl_key[t.src], self.nvl_key[to], t.wire_bytes,
                              self.nvlink_bps, self.nvlink_latency_ps, now)
        if self.copy_done_ps:  # NCCL's host side: not before the channel's copy ends
            at = max(at, self.copy_done_ps.pop(t.id, 0))
        host = self.host
        if host is not None and host.recv_copy and nic is None:
            # the receiver's channel copies it out of its FIFO once it is there
            key = (t.dst, t.channel)
            start = max(at, self.recv_free_ps.get(key, 0))
            at = self.recv_free_ps[key] = start + host.busy_ps(t.nbytes)
        if nic is None:  # received at ``at``: _finish(t.id, at) then
            eng.call_at(at, self._finish, t.id, at)
        else:
            eng.call_at(at, self._post_net, t, nic)

    def _post_net(self, t: Transfer, nic: int) -> None:
        """Post ``t``'s QP pieces on the NIC of rank ``nic`` (now)."""
        if self.failed is not None:
            return
        now = self.fabric.engine.now_ps
        nodes, flows = self.fabric.nodes, self.fabric.flows
        src = nodes[self.host_of[nic]]
        qps = self.conn_of[t.id].qps
        split = self.qp_frame_bytes.get(t.qp_bytes)
        if split is None:  # a schedule has few sizes: each QP split's frame bytes once
            split = self.qp_frame_bytes[t.qp_bytes] = tuple(
                frames_bytes(p, self.mtu, self.hdr) for p in t.qp_bytes)
        pieces = 0
        for q, nbytes in enumerate(split):
            if not nbytes:
                continue
            fid = qps[q]
            if self.fluid is not None:
                pieces += 1
                self._send_piece(fid, src, nbytes, t.id)
                continue
            host = nodes[flows[fid].src]
            pieces += 1
            if host is src:
                self._send_piece(fid, src, nbytes, t.id)
                continue
            # a QP moved by failover: over NVLink to its NIC first
            at = nvlink_domain(self.fabric).reserve(
                src.node_id, host.node_id, nbytes, self.nvlink_bps, self.nvlink_latency_ps, now)
            self.fabric.engine.call_at(at, self._send_piece, fid, host, nbytes, t.id)
        self.pieces_left[t.id] = pieces
        if not pieces:
            self._finish(t.id, now)

    def _send_piece(self, fid: int, src: Host, nbytes: int, tid: int) -> None:
        if self.failed is not None:
            return
        end = self.run.posted_bytes[fid] + nbytes
        self.run.posted_bytes[fid] = end
        self.rx_ends[fid].append((self.base[fid] + end, tid))
        if self.fluid is not None:
            self.fluid.post(fid, nbytes)
        else:
            src.post(fid, nbytes)

    def _on_data(self, fid: int, got: int, now: int) -> None:
        ends = self.rx_ends.get(fid)
        hop = self.hop.get(fid) if self.hop else None
        while ends and got >= ends[0][0]:
            _, tid = ends.popleft()
            if hop is not None:  # received by another GPU's NIC: NVLink to the receiver
                nvl = nvlink_domain(self.fabric)
                at = nvl.reserve(self.hosts[hop[0]], self.hosts[hop[1]],
                                 self.sch.transfers[tid].qp_bytes[self.run.flows[fid][3]],
                                 self.nvlink_bps, self.nvlink_latency_ps, now)
                self.fabric.engine.call_at(at, self._piece_done, tid)
                continue
            self._piece_done(tid, now)

    def _piece_done(self, tid: int, now: int | None = None) -> None:
        if self.failed is not None:
            return
        self.pieces_left[tid] -= 1
        if not self.pieces_left[tid]:
            self._finish(tid, self.fabric.engine.now_ps if now is None else now)

    # ------------------------------------------------------------ QP errors
    def _watch(self, host: Host, fid: int) -> None:
        """Be told when QP ``fid``, sent by ``host``, goes to error."""
        disp = host.on_qp_error
        if not isinstance(disp, _QpDispatch):
            if disp is not None:
                raise ValueError(f"host {host.node_id} already has an on_qp_error callback")
            disp = host.on_qp_error = _QpDispatch()
        disp.jobs[fid] = self._qp_error

    def _qp_error(self, fid: int, now: int) -> None:
        if self.failed is not None or self.done or fid not in self.rx_ends:
            return  # a collective done before its QP erred completed
        key = next(k for k, v in self.qp_flow.items() if v == fid)
        why = self._failover(key, fid, now) if self.failover else None
        if why is None and self.failover:
            return
        src_h = self.fabric.flows[fid].src
        dst_h = self.fabric.flows[fid].dst
        self.failed = {"t_ps": now, "qp": fid, "src_rank": key[0], "dst_rank": key[1],
                       "channel": key[2], "qp_index": key[3], "host": src_h, "peer": dst_h,
                       "why": why}
        if self.on_fail is not None:
            self.on_fail(self)

    def _failover(self, key: tuple[int, int, int, int], fid: int, now: int) -> str | None:
        """Move QP ``fid`` of ``key`` (src, dst, channel, QP index) to another rail; None
        when done, else why it could not be."""
        src, dst, _ch, q = key
        g = self.gpn
        if g < 2:
            return "failover: no other rail (one GPU per node)"
        n = self.sch.nranks
        tries = self.tried.get(key, 0) + 1
        self.tried[key] = tries
        fab = self.fabric
        rail = self.hosts.index(fab.flows[fid].src) % g
        if tries >= g:
            return f"failover: every rail tried ({g})"
        new_rail = (rail + tries) % g
        a = (src // g) * g + new_rail
        b = (dst // g) * g + new_rail
        if a >= n or b >= n:
            return "failover: the nodes have no NIC on the next rail"
        sh, dh = self._host(a), self._host(b)
        old = fab.flows[fid]
        nfid = max(fab.flows) + 1
        flow = Flow(nfid, sh.node_id, dh.node_id, sh.port.rate_bps, tc=old.tc,
                    packet_bytes=old.packet_bytes, start_ps=now)
        fab.flows[nfid] = flow
        sh.add_posted_flow(flow)
        dh.expect(flow)
        _dispatch(dh).jobs[nfid] = self._on_data
        self._watch(sh, nfid)
        _MOVED.setdefault(fab, {})[fid] = (nfid, a, b)
        self.qp_flow[key] = nfid
        self.conns[key[:3]].qps[q] = nfid
        if b != dst:
            self.hop[nfid] = (b, dst)
        self.run.flows[nfid] = (*self.run.flows[fid][:3], q, self.run.flows[fid][4])
        self.base[nfid], self.run.posted_bytes[nfid] = 0, 0
        self.rx_ends[nfid] = deque()
        # re-send what did not arrive, in order, from the sender's GPU over NVLink to a
        got = self._host(self.hop[fid][0] if fid in self.hop else dst).rx_bytes.get(fid, 0)
        prev = self.base[fid]
        resend = []
        for end, tid in self.rx_ends.pop(fid):
            left = end - max(prev, got)
            prev = end
            if left > 0:
                resend.append((tid, left))
        total = sum(x for _, x in resend)
        self.run.failovers.append({"t_ps": now, "qp": fid, "to_qp": nfid,
                                   "from_host": sh.node_id, "to_host": dh.node_id,
                                   "resent_bytes": total})
        if total:
            at = now if a == src else nvlink_domain(fab).reserve(
                self.hosts[src], self.hosts[a], total, self.nvlink_bps, self.nvlink_latency_ps,
                now)
            fab.engine.call_at(at, self._resend, nfid, sh, resend)
        return None

    def _resend(self, nfid: int, sh: Host, resend: list[tuple[int, int]]) -> None:
        if self.failed is not None:
            return
        for tid, nbytes in resend:
            self._send_piece(nfid, sh, nbytes, tid)

    def _finish(self, tid: int, now: int) -> None:
        self.run.finish_ps[tid] = now
        self.ndone += 1
        if self.ndone == len(self.sch.transfers) and self.on_done is not None:
            self.on_done(self)
        users = self.users.get(tid)
        if users:
            waiting = self.waiting
            ready = (self._ready_after_step if self.host is not None
                     else self._ready if self.delay_ps else self._ready_now)
            ready_ps = self.run.ready_ps
            for u in users:
                w = waiting[u] - 1
                waiting[u] = w
                if not w:
                    ready_ps[u] = now
                    ready(self.sch.transfers[u])


def run_schedule(sch: Schedule, fabric: Fabric, hosts: Sequence[int], *, tc: int = 3,
                 mtu_bytes: int = DEFAULT_MTU_BYTES, header_bytes: int | None = None,
                 limit_ps: int = 10**12, slice_ps: int | None = None,
                 check: bool = True,
                 progress: Callable[[int, int], None] | None = None,
                 gpus_per_node: int = 1, nvlink: bool = True, nvlink_bps: int = NVLINK_BPS,
                 nvlink_latency_ps: int = NVLINK_LATENCY_PS, pxn: bool = True,
                 delay_ps: Mapping[int, Any] | None = None,
                 reliable: Mapping[str, Any] | bool | None = None,
                 failover: bool = False,
                 host: HostSide | None = None,
                 aggregators: Sequence[int] = (), fidelity: str = "packet"
                 ) -> CollectiveRun:
    """Drive ``sch`` through ``fabric`` (rank ``r`` on host ``hosts[r]``) from the fabric's
    current time until every transfer is received; see the module docstring.

    The engine runs in slices of ``slice_ps`` (default 20 µs)
    until the last delivery, so background timers do not keep it going.  ``limit_ps``
    (default 1 s) bounds the run: with ``check`` a collective still incomplete then raises
    :class:`RunError` (saying how many transfers were received), else the partial run is
    returned.  The fabric's counters (:func:`fabric_counters`) are in ``run.counters``.
    ``progress(done, total)``, if given, is called after each slice with the transfers
    received so far (a progress line; it must not touch the fabric).  ``gpus_per_node``,
    ``nvlink``, ``nvlink_bps``, ``nvlink_latency_ps``, ``pxn``: as for
    :class:`CollectiveJob` (the default, one GPU per node, sends everything over the
    network); ``reliable``, ``delay_ps``, ``failover``, ``aggregators``, ``fidelity``: as
    for :class:`CollectiveJob`.  A
    QP error stops the run at once: :class:`QpFailure` (with ``check``; else the partial
    run).  The NVLink bytes are in ``nvlink_domain(fabric).nbytes``."""
    runner = CollectiveJob(sch, fabric, hosts, tc=tc, mtu_bytes=mtu_bytes,
                           header_bytes=header_bytes, gpus_per_node=gpus_per_node,
                           nvlink=nvlink, nvlink_bps=nvlink_bps,
                           nvlink_latency_ps=nvlink_latency_ps, pxn=pxn, delay_ps=delay_ps,
                           reliable=reliable, failover=failover,
                           host=host, aggregators=aggregators, fidelity=fidelity)
    eng = fabric.engine
    t0 = eng.now_ps
    step = slice_ps if slice_ps is not None else DEFAULT_SLICE_PS
    runner.start()
    total = len(sch.transfers)
    while runner.ndone < total and eng.now_ps - t0 < limit_ps and runner.failed is None:
        fabric.run(min(eng.now_ps + step, t0 + limit_ps))
        if progress is not None:
            progress(runner.ndone, total)
    run = runner.run
    run.counters = fabric_counters(fabric)
    if check and runner.failed is not None:
        raise QpFailure(f"collective {failure_text(runner.failed)}", runner.failed)
    if check and runner.ndone < total:
        drops = run.counters["drops"]
        hint = ""
        if drops and not all(getattr(fabric.nodes[h], "reliable", False) for h in hosts):
            hint = ("; lost frames are not resent with reliable off (-p reliable=true, or "
                    "[hosts] reliable = true in a fabric file)")
        else:
            hint = _waiting_timers_text(fabric, hosts, t0, t0 + limit_ps)
        raise RunError(f"collective incomplete after {_time_text(limit_ps)}: {runner.ndone} "
                       f"of {total} transfers received (pauses {run.counters['pfc_pauses']}, "
                       f"drops {drops}){hint}")
    return run


def _waiting_timers_text(fabric: Any, hosts: Sequence[int], t0_ps: int, end_ps: int) -> str:
    """"; N QPs wait for their local ACK timeout ..." when RC senders of the job's hosts
    still hold unacknowledged frames whose timer expires after ``end_ps`` (a loss that no
    NAK reported: the run stopped before the timer could recover it), else ""."""
    due = []
    for h in hosts:
        node = fabric.nodes[h]
        for rc in getattr(node, "_rc_tx", {}).values():
            d = rc.deadline_ps
            if rc.outstanding and d is not None and d > end_ps:
                due.append((d, node.ack_timeout))
    if not due:
        return ""
    first, t = min(due)
    n = len(due)
    return (f"; {n} QP{'s wait' if n > 1 else ' waits'} for the local ACK timeout "
            f"(ack_timeout {t}: 4.096 us x 2^{t}; the first expires "
            f"{_time_text(first - t0_ps)} after the start): a larger -p limit_ms waits for it"
            + (", a smaller -p ack_timeout recovers sooner" if t > 1 else ""))


def _time_text(t_ps: int) -> str:
    """A time for people: µs below 1 ms, else ms."""
    return f"{t_ps / 1e6:g} us" if t_ps < 10**9 else f"{t_ps / 1e9:g} ms"

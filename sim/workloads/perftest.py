"""perftest on the simulated fabric: what ``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``,
``ib_write_lat``, ``ib_send_lat`` and ``ib_read_lat`` (linux-rdma/perftest) measure
between two hosts of a built fabric, the first test an engineer runs on a new one.

Each QP is an RC connection from the client to the server (:func:`sim.workloads.collective.
open_packet_qp`: a posted flow of the fabric, its messages cut into frames of the fabric's
MTU with its headers).  A message completes when its last byte is delivered (the sender's
completion, one ACK's flight later on a real NIC, is not waited for: it moves a run's end by
that flight, not its rate).

* Bandwidth (``bw``): every QP keeps ``tx_depth`` messages of ``size_bytes`` posted and
  posts the next as one completes, ``iterations`` per QP (or for ``duration_ps``).  A read
  (``ib_read_bw``) is a request (its headers and a 16-byte RETH) from the client and the
  data back from the server, at most ``outstanding_reads`` in flight per QP.  The average
  bandwidth is the bytes of every message over the time from the first post to the last
  completion; the peak, perftest's, the size over the least time a message took over any
  run of them (``(completed[j] - posted[i]) / (j - i + 1)``).
* Latency (``lat``): ping-pong on one QP each way: the client sends, the server sends back
  when it has the message, and so on; a write's or send's latency is half the round trip,
  a read's the whole of it (request and data), each iteration one sample.

What is not modelled: the NICs' and hosts' own latency (doorbell, PCIe, DMA, completion
polling), so the simulated latency is the network's (serialisation, propagation, switch
queues); the NIC's message rate unless given (``msg_gap_ps``: small messages otherwise go
at the wire's rate); inline data; CQ moderation.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sim.units import PS_PER_S
from sim.workloads.collective import frames_bytes
from wire.ib_ext import RETH

__all__ = ["TESTS", "BwResult", "LatResult", "all_sizes", "lat_stats_us", "pick_hosts",
           "run_bw", "run_lat"]

#: perftest's programs: (operation, kind)
TESTS = {
    "ib_write_bw": ("write", "bw"), "ib_read_bw": ("read", "bw"), "ib_send_bw": ("send", "bw"),
    "ib_write_lat": ("write", "lat"), "ib_read_lat": ("read", "lat"),
    "ib_send_lat": ("send", "lat"),
}
#: a read request's extended transport header (IBA 9.3.3 RETH: VA, R_Key, DMA length), from
#: its field table
RETH_BYTES = RETH.size_bytes
#: how long the engine runs between checks for the last completion
SLICE_PS = 20 * 10**6
#: above this many messages perftest measures no peak (perftest_parameters.c: "BW peak
#: won't be measured in this run")
PEAK_MAX_ITERS = 20000


@dataclass(frozen=True, slots=True)
class BwResult:
    """One size of a bandwidth test: messages completed, the average and peak rates, and
    the run's first post and last completion."""

    size_bytes: int
    iterations: int
    average_bytes_per_s: float
    peak_bytes_per_s: float
    first_post_ps: int
    last_done_ps: int

    @property
    def msg_rate_per_s(self) -> float:
        """Messages a second, as perftest's MsgRate (average bandwidth / size)."""
        return self.average_bytes_per_s / self.size_bytes


@dataclass(frozen=True, slots=True)
class LatResult:
    """One size of a latency test: every iteration's latency (ps; half the round trip of a
    write or send, a read's whole)."""

    size_bytes: int
    samples_ps: tuple[int, ...]

    def stats_us(self) -> dict[str, float]:
        """perftest's report of this run (:func:`lat_stats_us`): its samples are the times
        between the client's posts, so the last iteration, which no post follows, is not
        one."""
        return lat_stats_us(self.samples_ps[:-1])


def lat_stats_us(samples_ps: Sequence[int]) -> dict[str, float]:
    """perftest's ``print_report_lat`` of latency samples, in µs: sorted, the 2 largest
    dropped; ``t_min_us`` the least, ``t_max_us`` the largest kept, ``t_typical_us`` their
    median, ``t_avg_us`` their mean, ``t_stdev_us`` from whole microseconds of deviation
    (perftest casts each to an int), ``p99_us`` and ``p999_us`` the samples at index
    ceil(n x p) of the sorted ones."""
    d = sorted(x / 1e6 for x in samples_ps)
    n = max(len(d) - 2, 1)
    med = d[n // 2] if n % 2 else (d[n // 2 - 1] + d[n // 2]) / 2
    avg = sum(d[:n]) / n
    var = sum(int(avg - x) ** 2 for x in d[:n]) / n
    return {"t_min_us": d[0], "t_max_us": d[min(n, len(d) - 1)], "t_typical_us": med,
            "t_avg_us": avg, "t_stdev_us": math.sqrt(var),
            "p99_us": d[min(math.ceil(n * 0.99), len(d) - 1)],
            "p999_us": d[min(math.ceil(n * 0.999), len(d) - 1)]}


class _Qp:
    """One direction of a connection: a posted flow, the message ends it waits for."""

    def __init__(self, fabric: Any, qpn: int, sh: Any, dh: Any, tc: int, packet_bytes: int,
                 on_msg: Callable[[Any, int], None]) -> None:
        from sim.workloads.collective import open_packet_qp

        self.src = sh
        self.qpn = qpn
        self.on_msg = on_msg
        self.base = open_packet_qp(fabric, qpn, sh, dh, tc=tc, packet_bytes=packet_bytes,
                                   conn=f"perftest QP {qpn}", on_data=self._data)
        self.posted = 0
        self.ends: deque[tuple[int, Any]] = deque()

    def post(self, frame_bytes: int, tag: Any = None) -> None:
        self.posted += frame_bytes
        self.ends.append((self.base + self.posted, tag))
        self.src.post(self.qpn, frame_bytes)

    def _data(self, fid: int, got: int, now: int) -> None:
        while self.ends and got >= self.ends[0][0]:
            _, tag = self.ends.popleft()
            self.on_msg(tag, now)


def _run(fabric: Any, done: Callable[[], bool], limit_ps: int, what: str) -> None:
    eng = fabric.engine
    t0 = eng.now_ps
    while not done():
        if eng.now_ps - t0 >= limit_ps:
            raise RuntimeError(f"{what}: not done after {limit_ps / 1e9:g} ms of simulated "
                               f"time")
        fabric.run(eng.now_ps + SLICE_PS)


def run_bw(fabric: Any, client: int, server: int, op: str, size_bytes: int,
           iterations: int, *, qps: int = 1, tx_depth: int = 128,
           outstanding_reads: int = 16, mtu_bytes: int = 4096, header_bytes: int = 58,
           tc: int = 3, qpn_base: int = 1 << 24, duration_ps: int | None = None,
           msg_gap_ps: int = 0, limit_ps: int = 10**13) -> BwResult:
    """A bandwidth test of ``op`` ("write", "send" or "read") from host ``client`` to host
    ``server`` (node ids) of ``fabric``: ``qps`` QPs, ``iterations`` messages of
    ``size_bytes`` each (or as many as complete in ``duration_ps``).  ``msg_gap_ps``: a
    QP starts a message at most every this long (the NIC's message rate; 0: the wire's)."""
    if op not in ("write", "send", "read"):
        raise ValueError(f"op {op!r}: write, send or read")
    if size_bytes < 1 or iterations < 1 or qps < 1 or tx_depth < 1:
        raise ValueError("size_bytes, iterations, qps and tx_depth must be >= 1")
    eng = fabric.engine
    ch, sh = fabric.nodes[client], fabric.nodes[server]
    msg = frames_bytes(size_bytes, mtu_bytes, header_bytes)
    req = header_bytes + RETH_BYTES
    depth = min(tx_depth, outstanding_reads) if op == "read" else tx_depth
    first = eng.now_ps
    end_ps = None if duration_ps is None else first + duration_ps
    state = {"done": 0, "inflight": 0, "last": first}
    posts: list[int] = []  # every post's time, and every completion's, in time order
    dones: list[int] = []
    posted = [0] * qps
    data: list[_Qp] = []
    reqs: list[_Qp] = []

    def more(q: int) -> bool:
        if end_ps is not None:
            return eng.now_ps < end_ps
        return posted[q] < iterations

    next_ps = [0] * qps  # the NIC's message rate: when a QP may start its next message

    def post(q: int) -> None:
        posted[q] += 1
        posts.append(eng.now_ps)
        at = max(eng.now_ps, next_ps[q])
        next_ps[q] = at + msg_gap_ps
        if at > eng.now_ps:
            eng.call_at(at, send, q)
        else:
            send(q)

    def send(q: int) -> None:
        if op == "read":
            reqs[q].post(req, q)
        else:
            data[q].post(msg, q)

    def completed(q: int, now: int) -> None:
        if end_ps is None or now <= end_ps:
            state["done"] += 1
            state["last"] = now
            dones.append(now)
        if more(q):
            post(q)
        else:
            state["inflight"] -= 1

    def requested(q: int, now: int) -> None:  # the server has the read request: the data
        data[q].post(msg, q)

    for q in range(qps):
        qpn = qpn_base + 2 * q
        if op == "read":
            data.append(_Qp(fabric, qpn, sh, ch, tc, mtu_bytes + header_bytes, completed))
            reqs.append(_Qp(fabric, qpn + 1, ch, sh, tc, mtu_bytes + header_bytes,
                            requested))
        else:
            data.append(_Qp(fabric, qpn, ch, sh, tc, mtu_bytes + header_bytes, completed))
    for q in range(qps):
        for _ in range(depth):
            if not more(q):
                break
            state["inflight"] += 1
            post(q)
    _run(fabric, lambda: state["inflight"] == 0, limit_ps, f"{op} bandwidth test")
    span = max(state["last"] - first, 1) if end_ps is None else duration_ps
    n = state["done"]
    avg = n * size_bytes * PS_PER_S / span
    return BwResult(size_bytes, n, avg, _peak_bytes_per_s(posts, dones, size_bytes), first,
                    state["last"])


def _peak_bytes_per_s(posts: Sequence[int], dones: Sequence[int], size_bytes: int) -> float:
    """perftest's peak: the size over the least time a message took over any run of
    messages, ``(done[j] - posted[i]) / (j - i + 1)`` for i <= j; 0 above
    :data:`PEAK_MAX_ITERS` messages, as perftest (it measures no peak then)."""
    import numpy as np

    if not dones or len(dones) > PEAK_MAX_ITERS:
        return 0.0
    p = np.asarray(posts[:len(dones)], dtype=np.float64)
    best = math.inf
    for j, c in enumerate(dones):
        w = (c - p[:j + 1]) / np.arange(j + 1, 0, -1)
        best = min(best, float(w.min()))
    return size_bytes * PS_PER_S / best if best > 0 else 0.0


def run_lat(fabric: Any, client: int, server: int, op: str, size_bytes: int,
            iterations: int, *, mtu_bytes: int = 4096, header_bytes: int = 58, tc: int = 3,
            qpn_base: int = 1 << 24, limit_ps: int = 10**13) -> LatResult:
    """A latency test of ``op`` between ``client`` and ``server``: ``iterations`` ping-pongs
    (a read: request and data back), each one sample."""
    if op not in ("write", "send", "read"):
        raise ValueError(f"op {op!r}: write, send or read")
    if size_bytes < 1 or iterations < 1:
        raise ValueError("size_bytes and iterations must be >= 1")
    eng = fabric.engine
    ch, sh = fabric.nodes[client], fabric.nodes[server]
    msg = frames_bytes(size_bytes, mtu_bytes, header_bytes)
    req = header_bytes + RETH_BYTES
    samples: list[int] = []
    t_post = [0]

    def start() -> None:
        t_post[0] = eng.now_ps
        if op == "read":
            back.post(req)
        else:
            fwd.post(msg)

    def at_server(_tag: Any, now: int) -> None:
        (data_back if op == "read" else ret).post(msg)

    def at_client(_tag: Any, now: int) -> None:
        rtt = now - t_post[0]
        samples.append(rtt if op == "read" else rtt // 2)
        if len(samples) < iterations:
            start()

    if op == "read":  # the request to the server, the data back
        back = _Qp(fabric, qpn_base, ch, sh, tc, mtu_bytes + header_bytes, at_server)
        data_back = _Qp(fabric, qpn_base + 1, sh, ch, tc, mtu_bytes + header_bytes,
                        at_client)
    else:
        fwd = _Qp(fabric, qpn_base, ch, sh, tc, mtu_bytes + header_bytes, at_server)
        ret = _Qp(fabric, qpn_base + 1, sh, ch, tc, mtu_bytes + header_bytes, at_client)
    start()
    _run(fabric, lambda: len(samples) >= iterations, limit_ps, f"{op} latency test")
    return LatResult(size_bytes, tuple(samples))


def all_sizes(lo: int = 2, hi: int = 1 << 23) -> list[int]:
    """``-a``: every power of two from 2 to 2^23 bytes."""
    out, s = [], lo
    while s <= hi:
        out.append(s)
        s *= 2
    return out


def pick_hosts(ranks: Sequence[int], names: dict[int, str], client: str | None,
               server: str | None) -> tuple[int, int]:
    """The client and server node ids: a rank number or a node name each; default the
    first rank and the last."""

    def one(text: str | None, default: int) -> int:
        if text is None:
            return default
        if text.isdigit():
            r = int(text)
            if r >= len(ranks):
                raise ValueError(f"rank {r}: the fabric has {len(ranks)} ranks")
            return ranks[r]
        hits = [n for n, name in names.items() if name == text and n in set(ranks)]
        if not hits:
            raise ValueError(f"{text!r}: no host of that name (a rank number, or a name "
                             f"as the outputs give it)")
        return hits[0]

    c, s = one(client, ranks[0]), one(server, ranks[-1])
    if c == s:
        raise ValueError("the client and the server are the same host")
    return c, s

"""Simulator speed benchmarks: ours beside ns.py, simpy and a bare heapq loop, same run.

Workload ``fifo`` (line rate): one sender at line rate (100 Gb/s, 1082-byte frames = 1106
bytes on the wire with FCS, preamble/SFD and IFG, so one frame every 88,480 ps) into one FIFO
egress port that serialises at 100 Gb/s, a 10 m wire (50 ns) and a sink.  Every model does
the same work: ``packets`` frames generated, queued, serialised, propagated and counted at
the sink (the count is checked).  Packet-hops = link traversals (frames that finished leaving
an egress port).
Every frame finds the port idle, so ours takes the idle-port fast path (``Port._cut_through``).

* ``ours host->port->sink``: a :class:`sim.nic.host.Host` (fixed-rate flow) whose port feeds a
  counting sink: 1 hop per packet, the exact shape of the peers' models.
* ``ours host->switch->host``: ``sim.fabric.star(1, ...)``: host, switch (MMU admission,
  PFC-capable, routing) and receiving host: 2 hops per packet.
* ``ns.py``: ``DistPacketGenerator -> Port -> Wire -> PacketSink`` (time in float seconds).
* ``simpy``: generator process -> ``Store`` FIFO -> server process (``timeout`` of the
  serialisation time) -> a timeout of the propagation delay -> a sink callback.
* ``heapq floor``: the same three events per packet (generate, end of serialisation,
  arrival) in a bare ``heapq`` loop with integer ps: the Python floor for this event count.

Workload ``poisson`` (the peers' workload): 16 flows with Poisson arrivals whose total load is
0.9 of the 100 Gb/s port (fixed 1082-byte frames; mean gap between frames 88,480 / 0.9 ps),
so frames queue behind each other.  The arrival times are drawn once (:func:`poisson_arrivals`,
integer ps, seeded) and the SAME times are fed to every model: ours (one source per flow that
enqueues into a :class:`sim.net.port.Port` at its times, a 10 m wire, a counting sink), ns.py
(a ``DistPacketGenerator`` per flow whose gaps land on the drawn times), simpy (a generator
process per flow) and the heapq floor (the same generate / end-of-serialisation / arrival events
with 16 pending generators).  Per-flow counts are checked for every model.

Workload ``incast``: 8:1 incast through one switch with PFC (static XOFF) and ECN marking on
(``Kmin`` 5 KB, ``Kmax`` 200 KB, ``Pmax`` 1 %); ours only; packet-hops/s and events/s.

Workload ``replay``: the built-in ``incast`` scenario (same simulated time, ``cc`` none and
dcqcn) run twice: from the library (``sim.scenarios.loader.build`` + ``fabric.run``, nothing
traced) and through the runner of ``lossless replay`` (``sim.study.results.run_scenario``:
Recorder, events.jsonl, timeseries.npz, bottleneck.pcap; no plots), so ``replay/lib`` is what
the CLI's outputs cost over the core.  CPU time (``time.process_time``).

Each figure is the median wall time of ``runs`` runs (build + run, ``time.perf_counter``).
"""

from __future__ import annotations

import argparse
import datetime
import heapq
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from sim.fabric import star
from sim.net.mmu import MmuConfig, headroom_bytes
from sim.net.switch import EcnConfig
from sim.nic.host import Flow, Host
from sim.packet import SimPacket
from sim.units import frame_ser_time_ps, gbps, prop_delay_ps, wire_bytes

RATE = gbps(100)
FRAME = 1082
WIRE = wire_bytes(FRAME)                    # 1106
SER_PS = frame_ser_time_ps(FRAME, RATE)     # 88,480
PROP_PS = prop_delay_ps(10)                 # 50,000
SER_S = WIRE * 8 / 100e9
PROP_S = 50e-9

# --------------------------------------------------------------------------- fifo models


class _CountingSink:
    node_id = -1

    def __init__(self) -> None:
        self.packets = 0

    def receive(self, port: int, pkt) -> None:
        self.packets += 1


def ours_port(n: int) -> tuple[int, int]:
    """Host -> its egress port -> counting sink.  Returns (delivered, packet-hops)."""
    from sim.engine import Engine

    eng = Engine()
    host = Host(eng, 1, RATE, reliable=False)  # the sink sends no ACKs
    sink = _CountingSink()
    host.port.connect(sink, 0, PROP_PS)
    host.add_flow(Flow(0, 1, 2, RATE, packet_bytes=FRAME, size_bytes=n * FRAME))
    eng.run()
    return sink.packets, host.port.tx_packets


def _lossless_cfg(ports: int) -> MmuConfig:
    return MmuConfig(buffer_bytes=1_000_000, ports=ports, reserved_bytes=2000,
                     headroom_bytes=headroom_bytes(RATE, 10, FRAME, 1_000_000),
                     lossless_pgs=frozenset({3}), xoff_mode="static", xoff_bytes=20_000,
                     xon_delta_bytes=2000)


def ours_switch(n: int) -> tuple[int, int]:
    """Host -> switch -> host (``star(1)``).  Returns (delivered, packet-hops)."""
    # unreliable NICs: the data frames only, as the other simulators' runs
    fab, recv, (src,) = star(1, RATE, PROP_PS, _lossless_cfg(3), host_kw={"reliable": False})
    fab.add_flow(Flow(0, src, recv, RATE, packet_bytes=FRAME, size_bytes=n * FRAME))
    fab.engine.run()
    s = fab.summary()
    hops = sum(p.tx_packets for node in fab.nodes.values() for p in node.ports.values())
    return s["flows"][0]["bytes_delivered"] // FRAME, hops


def nspy_fifo(n: int) -> tuple[int, int]:
    import simpy
    from ns.packet.dist_generator import DistPacketGenerator
    from ns.packet.sink import PacketSink
    from ns.port.port import Port
    from ns.port.wire import Wire

    env = simpy.Environment()
    gen = DistPacketGenerator(env, "gen", lambda: SER_S, lambda: WIRE, size=n * WIRE,
                              flow_id=0)
    port = Port(env, rate=100e9)
    wire = Wire(env, lambda: PROP_S)
    sink = PacketSink(env, rec_arrivals=False, rec_waits=False)
    gen.out, port.out, wire.out = port, wire, sink
    env.run()
    got = sink.packets_received[0]
    return got, got


def simpy_fifo(n: int) -> tuple[int, int]:
    import simpy

    env = simpy.Environment()
    fifo = simpy.Store(env)
    got = [0]

    def sink(_event) -> None:
        got[0] += 1

    def generator():
        for i in range(n):
            yield env.timeout(SER_S)
            fifo.put(i)

    def server():
        while True:
            pkt = yield fifo.get()
            yield env.timeout(SER_S)
            env.timeout(PROP_S, pkt).callbacks.append(sink)

    env.process(generator())
    env.process(server())
    env.run()
    return got[0], got[0]


def heapq_floor(n: int) -> tuple[int, int]:
    """Generate / end-of-serialisation / arrival events in a bare heap, integer ps."""
    GEN, DONE, ARRIVE = 0, 1, 2
    heap: list[tuple[int, int, int, int]] = [(0, 0, GEN, 0)]
    push, pop = heapq.heappush, heapq.heappop
    seq = 1
    queue: list[int] = []
    head = 0
    busy = False
    made = got = hops = 0
    while heap:
        now, _, kind, pkt = pop(heap)
        if kind == GEN:
            queue.append(made)
            made += 1
            if made < n:
                push(heap, (now + SER_PS, seq, GEN, 0))
                seq += 1
            if not busy:
                busy = True
                pkt = queue[head]
                head += 1
                push(heap, (now + SER_PS, seq, DONE, pkt))
                seq += 1
        elif kind == DONE:
            hops += 1
            push(heap, (now + PROP_PS, seq, ARRIVE, pkt))
            seq += 1
            if head < len(queue):
                pkt = queue[head]
                head += 1
                push(heap, (now + SER_PS, seq, DONE, pkt))
                seq += 1
            else:
                busy = False
        else:
            got += 1
    return got, hops


FIFO_MODELS: list[tuple[str, Callable[[int], tuple[int, int]], str | None]] = [
    ("ours host->port->sink", ours_port, None),
    ("ours host->switch->host", ours_switch, None),
    ("ns.py", nspy_fifo, "ns"),
    ("simpy", simpy_fifo, "simpy"),
    ("heapq floor", heapq_floor, None),
]

# ------------------------------------------------------------------- poisson (peers' workload)

POISSON_FLOWS = 16
POISSON_LOAD = 0.9
POISSON_SEED = 19


def poisson_arrivals(n: int, flows: int = POISSON_FLOWS, load: float = POISSON_LOAD,
                     seed: int = POISSON_SEED) -> list[list[int]]:
    """The arrival times (integer ps) of ``n`` frames from ``flows`` Poisson sources whose
    total rate is ``load`` of the port's frame rate (1 / ``SER_PS``): the merged stream has
    exponential gaps of mean ``SER_PS / load`` (rounded to whole ps, at least 1, so no two
    frames arrive at the same ps and every model sees the same order) and each frame belongs to
    a flow drawn uniformly, which makes each flow a Poisson process of ``load / flows``
    (superposition / thinning of Poisson processes).  Returns one sorted list per flow."""
    if n < 1 or flows < 1 or not 0 < load:
        raise ValueError("n and flows must be >= 1 and load > 0")
    rng = random.Random(seed)
    mean_ps = SER_PS / load
    per: list[list[int]] = [[] for _ in range(flows)]
    expo, pick = rng.expovariate, rng.randrange
    t = 0
    for _ in range(n):
        t += max(1, round(expo(1.0) * mean_ps))
        per[pick(flows)].append(t)
    return per


def _merged(arrivals: list[list[int]]) -> list[tuple[int, int]]:
    """(t_ps, flow) of every arrival in time order."""
    return sorted((t, f) for f, ts in enumerate(arrivals) for t in ts)


class _FlowSink:
    """Counts frames per flow (the check of every Poisson model)."""

    node_id = -1

    def __init__(self, flows: int) -> None:
        self.per_flow = [0] * flows

    def receive(self, port: int, pkt) -> None:
        self.per_flow[pkt.flow] += 1


class _Source:
    """Enqueues flow ``flow``'s frames into ``port`` at the pre-drawn times (one pending event
    per source, like the peers' generators)."""

    def __init__(self, engine, port, flow: int, times: list[int], ids, record) -> None:
        self.engine, self.port, self.flow, self.times = engine, port, flow, times
        self.ids, self.record, self.i = ids, record, 0
        if times:
            engine.call_at(times[0], self.fire)

    def fire(self) -> None:
        now = self.engine.now_ps
        if self.record is not None:
            self.record.append((now, self.flow))
        self.port.enqueue(SimPacket.trusted(next(self.ids), now, FRAME, self.flow, 0, 0, 1, 2))
        self.i = i = self.i + 1
        if i < len(self.times):
            self.engine.call_at(self.times[i], self.fire)


def ours_poisson(arrivals: list[list[int]], record: list | None = None
                 ) -> tuple[list[int], int]:
    """Sources -> one FIFO :class:`sim.net.port.Port` -> 10 m wire -> counting sink.
    Returns (frames delivered per flow, packet-hops); ``record`` gets (t_ps, flow) per
    injected frame."""
    import itertools

    from sim.engine import Engine
    from sim.net.port import Port

    eng = Engine()
    port = Port(eng, 1, 0, RATE)
    sink = _FlowSink(len(arrivals))
    port.connect(sink, 0, PROP_PS)
    ids = itertools.count()
    for f, ts in enumerate(arrivals):
        _Source(eng, port, f, ts, ids, record)
    eng.run()
    return sink.per_flow, port.tx_packets


def nspy_poisson(arrivals: list[list[int]], record: list | None = None
                 ) -> tuple[list[int], int]:
    """A ``DistPacketGenerator`` per flow (its gap lands on the drawn time) -> ``Port`` ->
    ``Wire`` -> ``PacketSink`` (ns-py).  ``record`` gets (t_s, flow) per injected frame."""
    import simpy
    from ns.packet.dist_generator import DistPacketGenerator
    from ns.packet.sink import PacketSink
    from ns.port.port import Port
    from ns.port.wire import Wire

    env = simpy.Environment()
    port = Port(env, rate=100e9)
    wire = Wire(env, lambda: PROP_S)
    sink = PacketSink(env, rec_arrivals=False, rec_waits=False)
    port.out, wire.out = wire, sink
    entry = port
    if record is not None:
        class _Rec:
            def put(self, pkt) -> None:
                record.append((env.now, pkt.flow_id))
                port.put(pkt)
        entry = _Rec()  # type: ignore[assignment]
    for f, ts in enumerate(arrivals):
        it = iter([t * 1e-12 for t in ts])
        gen = DistPacketGenerator(env, f"flow{f}", lambda it=it: next(it) - env.now,
                                  lambda: WIRE, size=len(ts) * WIRE, flow_id=f)
        gen.out = entry
    env.run()
    got = [sink.packets_received.get(f, 0) for f in range(len(arrivals))]
    return got, sum(got)


def simpy_poisson(arrivals: list[list[int]], record: list | None = None
                  ) -> tuple[list[int], int]:
    """A generator process per flow -> ``Store`` FIFO -> server process -> propagation
    timeout -> sink callback (simpy).  ``record`` gets (t_s, flow) per injected frame."""
    import simpy

    env = simpy.Environment()
    fifo = simpy.Store(env)
    got = [0] * len(arrivals)

    def sink(event) -> None:
        got[event.value] += 1

    def generator(f: int, times_s: list[float]):
        for t in times_s:
            yield env.timeout(t - env.now)
            if record is not None:
                record.append((env.now, f))
            fifo.put(f)

    def server():
        while True:
            f = yield fifo.get()
            yield env.timeout(SER_S)
            env.timeout(PROP_S, f).callbacks.append(sink)

    for f, ts in enumerate(arrivals):
        env.process(generator(f, [t * 1e-12 for t in ts]))
    env.process(server())
    env.run()
    return got, sum(got)


def heapq_poisson(arrivals: list[list[int]], record: list | None = None
                  ) -> tuple[list[int], int]:
    """The same events in a bare heap (integer ps): per flow a chained generate event, end of
    serialisation, arrival.  ``record`` gets (t_ps, flow) per generated frame."""
    GEN, DONE, ARRIVE = 0, 1, 2
    push, pop = heapq.heappush, heapq.heappop
    heap: list[tuple[int, int, int, int]] = []
    seq = 0
    for f, ts in enumerate(arrivals):
        if ts:
            heap.append((ts[0], seq, GEN, f))
            seq += 1
    heapq.heapify(heap)
    nxt = [1] * len(arrivals)
    queue: list[int] = []
    head = 0
    busy = False
    got = [0] * len(arrivals)
    hops = 0
    while heap:
        now, _, kind, f = pop(heap)
        if kind == GEN:
            if record is not None:
                record.append((now, f))
            ts = arrivals[f]
            i = nxt[f]
            if i < len(ts):
                push(heap, (ts[i], seq, GEN, f))
                seq += 1
                nxt[f] = i + 1
            if busy:
                queue.append(f)
            else:
                busy = True
                push(heap, (now + SER_PS, seq, DONE, f))
                seq += 1
        elif kind == DONE:
            hops += 1
            push(heap, (now + PROP_PS, seq, ARRIVE, f))
            seq += 1
            if head < len(queue):
                push(heap, (now + SER_PS, seq, DONE, queue[head]))
                seq += 1
                head += 1
            else:
                busy = False
        else:
            got[f] += 1
    return got, hops


POISSON_MODELS: list[tuple[str, Callable[..., tuple[list[int], int]], str | None]] = [
    ("ours source->port->sink", ours_poisson, None),
    ("ns.py", nspy_poisson, "ns"),
    ("simpy", simpy_poisson, "simpy"),
    ("heapq floor", heapq_poisson, None),
]

# ------------------------------------------------------------------------------ incast


#: The incast's ECN marking (also bench.proto_bench's prototype's).
INCAST_ECN = EcnConfig(kmin_bytes=5_000, kmax_bytes=200_000, pmax=0.01)


def incast_fabric(duration_ps: int, senders: int = 8) -> tuple[Any, int]:
    """8:1 incast, PFC and ECN on, run for ``duration_ps``: (the fabric, events)."""
    fab, recv, hosts = star(senders, RATE, PROP_PS, _lossless_cfg(senders + 2),
                            ecn=INCAST_ECN)
    for i, h in enumerate(hosts):
        fab.add_flow(Flow(i, h, recv, RATE, packet_bytes=FRAME))
    return fab, fab.run(duration_ps)


def packet_hops(fab: Any) -> int:
    """Frames every port of ``fab`` sent."""
    return sum(p.tx_packets for node in fab.nodes.values() for p in node.ports.values())


def incast(duration_ps: int, senders: int = 8) -> tuple[int, int, int]:
    """8:1 incast, PFC and ECN on.  Returns (packet-hops, events, drops)."""
    fab, events = incast_fabric(duration_ps, senders)
    return packet_hops(fab), events, fab.summary()["totals"]["drops"]


# ------------------------------------------------------------------------------ driver


def scenario_library(duration_ps: int, cc: str) -> int:
    """The ``incast`` scenario from the library, nothing traced.  Returns packet-hops."""
    from sim.scenarios.loader import build

    sc = build("incast", {"duration_ms": duration_ps / 1e9, "cc": cc}, None)
    sc.fabric.run(sc.duration_ps)
    return sum(p.tx_packets for node in sc.fabric.nodes.values() for p in node.ports.values())


def scenario_replay(duration_ps: int, cc: str) -> None:
    """The same through ``lossless replay``'s runner, default outputs but no plots."""
    import tempfile

    from sim.study.results import run_scenario

    with tempfile.TemporaryDirectory() as tmp:
        run_scenario("incast", {"duration_ms": duration_ps / 1e9, "cc": cc},
                     out_dir=f"{tmp}/out", plots=False, progress=False)


def run_replay(duration_ps: int, runs: int) -> None:
    print(f"\nincast scenario, {duration_ps / 1e9:g} ms simulated; CPU s, median of {runs}")
    print(f"{'model':<26}{'lib s':>9}{'replay s':>10}{'pkt-hops':>11}{'lib hops/s':>12}"
          f"{'replay hops/s':>15}{'replay/lib':>11}")
    for cc in ("none", "dcqcn"):
        lib, rep, hops = [], [], 0
        for _ in range(runs):  # interleaved, so both see the same machine state
            t0 = time.process_time()
            hops = scenario_library(duration_ps, cc)
            lib.append(time.process_time() - t0)
            t0 = time.process_time()
            scenario_replay(duration_ps, cc)
            rep.append(time.process_time() - t0)
        a, b = statistics.median(lib), statistics.median(rep)
        print(f"{'incast cc=' + cc:<26}{a:>9.3f}{b:>10.3f}{hops:>11,}{hops / a:>12,.0f}"
              f"{hops / b:>15,.0f}{b / a:>10.2f}x")


def _available(module: str | None) -> bool:
    if module is None:
        return True
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _median_time(fn: Callable[[], tuple], runs: int) -> tuple[float, tuple]:
    times, result = [], ()
    for _ in range(runs):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def run_fifo(packets: int, runs: int, only: set[str] | None = None) -> dict[str, dict]:
    """The line-rate workload: every model, median of ``runs``; the count is checked."""
    rows: dict[str, dict] = {}
    for name, fn, module in FIFO_MODELS:
        if only and not any(o in name for o in only):
            continue
        if not _available(module):
            print(f"  skip {name}: `{module}` not installed (pip install ns-py simpy)")
            continue
        wall, (got, hops) = _median_time(lambda fn=fn: fn(packets), runs)
        if got != packets:
            raise AssertionError(f"{name}: delivered {got} of {packets} packets")
        rows[name] = {"wall_s": wall, "pkts_s": packets / wall, "hops_s": hops / wall,
                      "hops": hops}
        print(f"  {name}: {wall:.3f} s", file=sys.stderr)
    return rows


def check_poisson(name: str, arrivals: list[list[int]], per_flow: list[int], hops: int) -> None:
    """Every flow's frames all delivered and one hop per frame, else AssertionError."""
    want = [len(ts) for ts in arrivals]
    if per_flow != want or hops != sum(want):
        raise AssertionError(f"{name}: delivered {per_flow} ({hops} hops) of {want} per flow")


def run_poisson(packets: int, runs: int, only: set[str] | None = None) -> dict[str, dict]:
    """The peers' workload: the same pre-drawn arrivals into every model (drawing not timed),
    median of ``runs``; every flow's count is checked."""
    arrivals = poisson_arrivals(packets)
    rows: dict[str, dict] = {}
    for name, fn, module in POISSON_MODELS:
        if only and not any(o in name for o in only):
            continue
        if not _available(module):
            print(f"  skip {name}: `{module}` not installed (pip install ns-py simpy)")
            continue
        wall, (per_flow, hops) = _median_time(lambda fn=fn: fn(arrivals), runs)
        check_poisson(name, arrivals, per_flow, hops)
        rows[name] = {"wall_s": wall, "pkts_s": packets / wall, "hops_s": hops / wall,
                      "hops": hops}
        print(f"  poisson {name}: {wall:.3f} s", file=sys.stderr)
    return rows


def print_fifo(rows: dict[str, dict], packets: int, runs: int, title: str | None = None) -> None:
    """The table: wall time, packets/s, packet-hops/s and ratios to ns.py, simpy and the
    heapq floor of the same run."""
    print("\n" + (title or f"Single FIFO, line rate, {packets:,} packets at 100 Gb/s, 1082-byte "
                           "frames\n(one sender: every frame finds the port idle, the idle-port "
                           "fast path)") + f"; median of {runs}")
    print(f"{'model':<26}{'wall s':>9}{'packets/s':>13}{'pkt-hops/s':>13}"
          f"{'vs ns.py':>10}{'vs simpy':>10}{'vs heapq':>10}")
    refs = ("ns.py", "simpy", "heapq floor")
    ref = {k: rows[k]["pkts_s"] for k in refs if k in rows}
    for name, r in rows.items():
        ratios = [f"{r['pkts_s'] / ref[k]:.2f}x" if k in ref else "-" for k in refs]
        print(f"{name:<26}{r['wall_s']:>9.3f}{r['pkts_s']:>13,.0f}{r['hops_s']:>13,.0f}"
              f"{ratios[0]:>10}{ratios[1]:>10}{ratios[2]:>10}")
    print("(ratios are packets/s over the peer's packets/s, same run)")


def poisson_title(packets: int) -> str:
    return (f"Single FIFO, Poisson, {packets:,} packets at 100 Gb/s, 1082-byte frames\n"
            f"(the peers' workload: {POISSON_FLOWS} flows, total load {POISSON_LOAD:g}, the "
            f"same pre-drawn arrivals for every model)")


def run_incast(duration_ps: int, runs: int) -> None:
    wall, (hops, events, drops) = _median_time(lambda: incast(duration_ps), runs)
    print(f"\n8:1 incast, PFC + ECN on, {duration_ps / 1e9:g} ms simulated; median of {runs}")
    print(f"{'model':<26}{'wall s':>9}{'pkt-hops':>11}{'pkt-hops/s':>13}{'events/s':>12}"
          f"{'drops':>7}")
    print(f"{'ours star(8)':<26}{wall:>9.3f}{hops:>11,}{hops / wall:>13,.0f}"
          f"{events / wall:>12,.0f}{drops:>7}")


def profile(packets: int, top: int = 25) -> None:
    import cProfile
    import pstats

    for fn in (ours_port, ours_switch):
        prof = cProfile.Profile()
        prof.runcall(fn, packets)
        print(f"\ncProfile of {fn.__name__}({packets:,}), by tottime:")
        pstats.Stats(prof).sort_stats("tottime").print_stats(top)
    prof = cProfile.Profile()
    prof.runcall(incast, 2_000_000_000)
    print("\ncProfile of incast(2 ms), by tottime:")
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    ap.add_argument("--packets", type=int, default=1_000_000, help="FIFO packets per run")
    ap.add_argument("--runs", type=int, default=3, help="runs per model (median reported)")
    ap.add_argument("--incast-ms", type=float, default=20.0, help="simulated incast time")
    ap.add_argument("--only", action="append", help="FIFO models whose name contains this")
    ap.add_argument("--skip-incast", action="store_true")
    ap.add_argument("--skip-fifo", action="store_true", help="skip the line-rate FIFO table")
    ap.add_argument("--skip-poisson", action="store_true", help="skip the Poisson FIFO table")
    ap.add_argument("--replay-ms", type=float, default=5.0,
                    help="simulated time of the incast scenario, library vs lossless replay")
    ap.add_argument("--skip-replay", action="store_true")
    ap.add_argument("--profile", action="store_true",
                    help="cProfile our FIFO models and a 2 ms incast instead")
    a = ap.parse_args(argv)
    if a.packets < 1 or a.runs < 1:
        ap.error("--packets and --runs must be >= 1")
    if a.profile:
        profile(a.packets)
        return 0
    print(f"python -m bench {' '.join(argv if argv is not None else sys.argv[1:])}".rstrip())
    print(f"{datetime.date.today().isoformat()}, Python {platform.python_version()}, "
          f"{platform.machine()}")
    if not a.skip_fifo:
        print_fifo(run_fifo(a.packets, a.runs, set(a.only) if a.only else None),
                   a.packets, a.runs)
    if not a.skip_poisson:
        print_fifo(run_poisson(a.packets, a.runs, set(a.only) if a.only else None),
                   a.packets, a.runs, poisson_title(a.packets))
    if not a.skip_incast:
        run_incast(int(a.incast_ms * 1e9), a.runs)
    if not a.skip_replay:
        run_replay(int(a.replay_ms * 1e9), a.runs)
    return 0

"""What ``lossless replay``'s runner costs over the core: the per-frame work of its
default outputs is batched without changing a byte of them."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from sim.packet import SimPacket
from sim.study import results
from sim.study.results import Capture, CaptureBudget
from wire.linkstack import ROCE
from wire.pcapio import CaptureWriter


def _packet(frame=None, flow=0, src=0, dst=4, nbytes=64, ecn=0, psn=None, place=None,
            ackreq=False, tc=0) -> SimPacket:
    """A packet as a port's taps see it (a SimPacket: the compiled taps read its fields)."""
    p = SimPacket(0, 0, nbytes, flow=flow, tc=tc, ecn=ecn, src=src, dst=dst, frame=frame)
    p.psn = psn
    p.place = place
    p.ackreq = ackreq
    return p


_fields = st.fixed_dictionaries(dict(
    frame=st.one_of(st.none(), st.binary(min_size=14, max_size=200),
                    st.binary(min_size=14, max_size=64).map(bytearray)),
    flow=st.integers(0, 5), src=st.integers(0, 3), dst=st.integers(4, 6),
    nbytes=st.sampled_from([64, 1082, 4000]), ecn=st.integers(0, 3), psn=st.none(),
    place=st.none(), ackreq=st.just(False), tc=st.sampled_from([0, 3, 6])))
_pkt = _fields.map(lambda d: _packet(**d))


def _per_frame(path: str, frames: list[tuple[int, bytes]], snaplen: int | None) -> bytes:
    w = CaptureWriter(path) if snaplen is None else CaptureWriter(path, snaplen=snaplen)
    for t_ns, f in frames:
        w.write(f, ts_ns=t_ns)
    w.close()
    with open(path, "rb") as fp:
        return fp.read()


@given(pkts=st.lists(_pkt, max_size=40), snaplen=st.sampled_from([None, 100, 65535]),
       limit=st.sampled_from([None, 2_000, 20_000]), batch=st.sampled_from([1, 3, 1024]))
def test_batched_capture_writes_the_same_file(tmp_path_factory, pkts, snaplen, limit,
                                             batch) -> None:
    """Whatever the batch size, the pcap (and the frame / byte counts and the budget's cut)
    are those of writing each frame as it leaves, a shared frame as it was then."""
    saved, results.CAPTURE_BATCH_FRAMES = results.CAPTURE_BATCH_FRAMES, batch
    try:
        _check_capture(tmp_path_factory.mktemp("cap"), pkts, snaplen, limit)
    finally:
        results.CAPTURE_BATCH_FRAMES = saved


def _check_capture(d, pkts, snaplen, limit) -> None:
    cap = Capture(str(d / "a.pcap"), CaptureBudget(limit), snaplen)
    synth = Capture(str(d / "s.pcap"))  # the same synthesiser, for the expected frames
    want: list[tuple[int, bytes]] = []
    for i, p in enumerate(pkts):
        t_ps = 1000 * i + 7
        cut = cap.budget.cut_at_ps is not None
        frame = None if cut else bytes(p.frame if p.frame is not None
                                       else synth._frame(*synth._synth(p)))
        before = cap.frames
        cap(t_ps, p)
        if cap.frames > before:
            want.append((t_ps // 1000, frame))
        if isinstance(p.frame, bytearray):
            p.frame[0] ^= 0xFF  # the fabric reuses it: must not change what was written
    cap.close()
    synth.close()
    assert cap.frames == len(want)
    assert (d / "a.pcap").read_bytes() == _per_frame(str(d / "b.pcap"), want, snaplen)


def test_capture_uses_the_bulk_path(tmp_path, monkeypatch) -> None:
    """3,000 frames leave through a handful of bulk writes, not one writer call each (the
    per-call checks of CaptureWriter.write were ~15% of the runner's extra CPU), and the
    synthesised ones are made a batch at a time (wire.template.make_rows, into the records
    written), not one by one."""
    import wire.template as template

    calls = {"write": 0, "write_frames": 0, "write_made_rows": 0, "make": 0}
    real = {name: getattr(CaptureWriter, name) for name in ("write", "write_frames",
                                                            "write_made_rows")}
    real_make = template.RoceTemplate.make

    def counting(name):
        def wrapper(self, *a, **k):
            calls[name] += 1
            return real[name](self, *a, **k)
        return wrapper

    def make(self, *a, **k):
        calls["make"] += 1
        return real_make(self, *a, **k)

    for name in real:
        monkeypatch.setattr(CaptureWriter, name, counting(name))
    monkeypatch.setattr(template.RoceTemplate, "make", make)
    cap = Capture(str(tmp_path / "x.pcap"))
    for i in range(3000):
        cap(i * 1000, _packet(frame=None, flow=1 + i % 3, src=0, dst=4, nbytes=1082,
                              ecn=0, psn=None, place=None, ackreq=False, tc=3))
    cap.close()
    assert cap.frames == 3000
    assert calls["write"] == calls["write_frames"] == calls["make"] == 0
    assert 0 < calls["write_made_rows"] <= 3000 // results.CAPTURE_BATCH_FRAMES + 1


def _built_synth(pkt, psn: int, op: str, dma: int | None) -> bytes:
    """The frame the capture stands for ``pkt`` with, built whole by wire.build (its QP
    0x100 + flow, its class's DSCP, its WRITE opcode, a RETH on FIRST and ONLY, the frame
    ``nbytes`` long)."""
    import wire
    from sim.addresses import node_ip, node_mac

    qp = 0x100 + pkt.flow
    d = {"eth": {"dst": node_mac(pkt.dst), "src": node_mac(pkt.src)},
         "ipv4": {"src": node_ip(pkt.src), "dst": node_ip(pkt.dst), "ecn": pkt.ecn,
                  "dscp": pkt.tc << 3},  # the class as DSCP
         "udp": {"sport": 49152 + (pkt.flow & 0x3FFF)},
         "bth": {"opcode": f"RC_RDMA_WRITE_{op}", "dest_qp": qp, "psn": psn}}
    head = ROCE.header_bytes
    if dma is not None:
        d["reth"] = {"va": 0, "rkey": qp, "dma_length": dma}
        head += 16
    d["payload"] = {"length": max(pkt.nbytes - head, 0)}
    return wire.build(d)


@given(pkts=st.lists(_fields.map(lambda d: _packet(**{**d, "frame": None})), max_size=150))
@example(pkts=[_packet(frame=None, flow=0, src=0, dst=4, nbytes=64, ecn=0, psn=None,
                       place=None, ackreq=False, tc=tc) for tc in (0, 0, 3)])
def test_synthesised_frames_are_writes_of_64_frame_messages(tmp_path_factory, pkts) -> None:
    """Packets without a place in a message (no NIC flow's) are cut into messages of 64
    frames (the first frame's size each, the last one where the bytes reach it): FIRST,
    MIDDLE ..., LAST, each frame exactly what wire.build makes of it (IPv4 checksum, ICRC),
    PSNs counting from 0."""
    cap = Capture(str(tmp_path_factory.mktemp("syn") / "x.pcap"))
    state: dict[int, list[int]] = {}
    for p in pkts:
        psn, off, end = state.setdefault(p.flow, [0, 0, 0])
        first = off >= end
        if first:
            end = off + 64 * p.nbytes
        last = off + p.nbytes >= end
        state[p.flow] = [psn + 1, off + p.nbytes, end]
        op = ("ONLY" if last else "FIRST") if first else ("LAST" if last else "MIDDLE")
        pay = max(p.nbytes - ROCE.header_bytes, 0)  # a frame's payload without a RETH
        dma = max(pay - 16, 0) + (63 * pay if op == "FIRST" else 0) if first else None
        assert bytes(cap._frame(*cap._synth(p))) == _built_synth(p, psn, op, dma)
    cap.close()


def test_synthesised_frames_reuse_the_ipv4_checksum(tmp_path, monkeypatch) -> None:
    """Per synthesised frame only the PSN changes: the IPv4 header checksum is computed when
    a template is made, not once per frame (it was, ECN being patched into each)."""
    import wire.template as template

    calls = [0]
    real = template.internet_checksum

    def counted(*a):
        calls[0] += 1
        return real(*a)

    monkeypatch.setattr(template, "internet_checksum", counted)
    cap = Capture(str(tmp_path / "x.pcap"))
    for i in range(2000):
        cap._synth(_packet(frame=None, flow=1, src=0, dst=4, nbytes=1082, ecn=i % 2,
                           psn=None, place=None, ackreq=False, tc=3))
    cap.close()
    assert calls[0] <= 2 * 2  # the two templates (ECN 0 and 1), at most twice each


def test_rx_bins_count_what_the_nic_delivers_at_its_time() -> None:
    """The receivers' throughput bins: each data frame the NIC delivers, in the bin of its
    delivery; a frame past the last bin is left out."""
    bins = results._RxBins(1_000_000, 1000)
    tap = bins.tap()
    want = [0] * 1000
    for i in range(3000):
        pkt = _packet(flow=1, nbytes=(64, 1082)[i % 2])
        t_ps = i * 400_000
        if t_ps // 1_000_000 < 1000:
            want[t_ps // 1_000_000] += pkt.nbytes
        tap(t_ps, pkt)
    assert bins.bins[1] == want


def test_throughput_counts_only_frames_delivered_in_order(tmp_path) -> None:
    """A lossy incast with RC (go-back-N): the receivers drop the frames after a gap until
    the resends come, so timeseries.npz's delivered bytes are the flows' in-order bytes
    (summary.json bytes_delivered), not every frame that reached the NIC (the tap on the
    switch port counted those: 97 Gb/s in a run whose flows got 7.5)."""
    import numpy as np

    s = results.run_scenario("incast", {"duration_ms": 0.2, "pfc": False}, out_dir=str(tmp_path),
                             plots=False, write_captures=False)
    assert s["totals"]["dropped_packets_by_reason"].get("out_of_sequence", 0) > 0
    with np.load(tmp_path / "timeseries.npz") as ts:
        for f in s["flows"]:
            assert int(ts[f"flow_{f['id']}_rx_bytes"].sum()) == f["bytes_delivered"]

"""What ``lossless replay``'s runner costs over the core (issue 19): the per-frame work of its
default outputs is batched without changing a byte of them."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from sim.study import results, samples
from sim.study.results import Capture, CaptureBudget
from wire.pcapio import CaptureWriter

_pkt = st.builds(
    SimpleNamespace,
    frame=st.one_of(st.none(), st.binary(min_size=14, max_size=200),
                    st.binary(min_size=14, max_size=64).map(bytearray)),
    flow=st.integers(0, 5), src=st.integers(0, 3), dst=st.integers(4, 6),
    nbytes=st.sampled_from([64, 1082, 4000]), ecn=st.integers(0, 3))


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
        cap(i * 1000, SimpleNamespace(frame=None, flow=1 + i % 3, src=0, dst=4, nbytes=1082,
                                      ecn=0))
    cap.close()
    assert cap.frames == 3000
    assert calls["write"] == calls["write_frames"] == calls["make"] == 0
    assert 0 < calls["write_made_rows"] <= 3000 // results.CAPTURE_BATCH_FRAMES + 1


def _old_synth(pkt, psn: int) -> bytes:
    """The frame the capture synthesised before (one template, PSN and ECN patched)."""
    from sim.addresses import node_ip, node_mac
    from wire.template import RoceTemplate

    tpl = RoceTemplate({
        "eth": {"dst": node_mac(pkt.dst), "src": node_mac(pkt.src)},
        "ipv4": {"src": node_ip(pkt.src), "dst": node_ip(pkt.dst), "ecn": 0},
        "udp": {"sport": 49152 + (pkt.flow & 0x3FFF)},
        "bth": {"opcode": "RC_RDMA_WRITE_MIDDLE", "dest_qp": pkt.flow & 0xFFFFFF},
        "payload": {"data": "00" * max(pkt.nbytes - results._HDR_BYTES, 0)},
    }, patch=("bth.psn", "ipv4.ecn"))
    return bytes(tpl.make(**{"bth.psn": psn, "ipv4.ecn": pkt.ecn}))


@given(pkts=st.lists(_pkt.map(lambda p: SimpleNamespace(**{**vars(p), "frame": None})),
                     max_size=30))
def test_synthesised_frames_are_those_of_one_patched_template(tmp_path_factory, pkts) -> None:
    """A template per ECN codepoint gives the very frames (IPv4 checksum, ICRC) of patching
    ECN into one template, frame after frame of each flow's PSN sequence."""
    cap = Capture(str(tmp_path_factory.mktemp("syn") / "x.pcap"))
    psn: dict[int, int] = {}
    for p in pkts:
        n = psn.get(p.flow, 0)
        psn[p.flow] = n + 1
        assert bytes(cap._frame(*cap._synth(p))) == _old_synth(p, n)
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
        cap._synth(SimpleNamespace(frame=None, flow=1, src=0, dst=4, nbytes=1082, ecn=i % 2))
    cap.close()
    assert calls[0] <= 2 * 2  # the two templates (ECN 0 and 1), at most twice each


def test_rx_bins_compute_a_serialisation_time_once_per_size_and_rate(monkeypatch) -> None:
    """The receivers' throughput bins: a frame's arrival time needs its serialisation time,
    computed once per (size, port rate) and not per frame; a changed rate (a fault) is
    honoured, and every frame lands in the bin of its arrival."""
    from sim.units import frame_ser_time_ps

    calls = [0]

    def counted(*a):
        calls[0] += 1
        return frame_ser_time_ps(*a)

    monkeypatch.setattr(samples, "frame_ser_time_ps", counted)
    port = SimpleNamespace(rate_bps=100 * 10**9, prop_ps=500_000)
    bins = results._RxBins(1_000_000, 1000)
    tap = bins.tap_for(port)
    want = [0] * 1000
    for i in range(3000):
        if i == 1500:
            port.rate_bps = 25 * 10**9  # degraded link
        pkt = SimpleNamespace(frame=None, flow=1, nbytes=(64, 1082)[i % 2])
        t_ps = i * 300_000
        at = t_ps + frame_ser_time_ps(pkt.nbytes, port.rate_bps) + port.prop_ps
        if at // 1_000_000 < 1000:
            want[at // 1_000_000] += pkt.nbytes
        tap(t_ps, pkt)
    assert bins.bins[1] == want
    assert calls[0] == 4

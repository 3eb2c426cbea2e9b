"""The C-structures prototype of bench/proto_incast.py: the same incast as the engine (frames
delivered, PAUSE frames within a few per cent), its own counts consistent, and the same counts
interpreted and compiled."""

from __future__ import annotations

import importlib.util

import pytest

from bench import proto_bench, proto_incast

MS = 1_000_000_000


def test_the_prototype_runs_the_engines_incast():
    """The prototype reads the engine's incast (buffer, thresholds, marking, frames)."""
    k = proto_bench._kernel(proto_incast, 2 * MS)
    e = proto_bench.engine_incast(2 * MS)
    assert k.delivered == e["delivered"]  # line rate into the receiver: the same frames
    # PAUSE frames: the same thresholds, without the engine's quanta and their refresh (the
    # prototype sends one XOFF and one XON a crossing): a bound, not a measured figure
    assert abs(k.pause_frames / e["pause_frames"] - 1) < 0.1
    assert abs(k.hops / e["hops"] - 1) < 0.02 and k.drops == e["drops"] == 0
    # every frame a sender started is delivered, queued in the switch or on a link (at most
    # two a link: one on the wire, one propagating)
    queued = k.q_bytes[k.senders] // k.frame_bytes
    assert k.used_bytes == sum(k.in_bytes) == k.q_bytes[k.senders] == queued * k.frame_bytes
    assert 0 <= k.sent - k.delivered - queued <= 2 * (k.senders + 1)
    out = k.hops - k.sent - k.pause_frames  # the switch's data frames to the receiver
    assert 0 <= out - k.delivered <= 2
    assert k.drops == 0 and 0 < k.marked < k.delivered and k.pauses > 0


@pytest.mark.skipif(importlib.util.find_spec("Cython") is None, reason="no Cython")
def test_interpreted_and_compiled_count_the_same(tmp_path):
    """Compiled from any folder (setup.py's directives found beside bench/)."""
    mod = proto_bench.compiled_kernel(str(tmp_path))
    a, b = proto_bench._kernel(proto_incast, MS), proto_bench._kernel(mod, MS)
    fields = ("hops", "pauses", *proto_bench.COUNTS, "used_bytes", "rng")
    assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields]
    assert type(b).__module__ == "proto_incast" and not hasattr(b, "__dict__")

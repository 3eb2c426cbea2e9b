"""The lazy ``wire.dissect`` gives exactly what the eager one gave.

The oracle is the eager implementation as committed before the change (``git show`` of
``ORACLE_COMMIT:wire/stack.py``, loaded into a temporary module that lives only in this test);
``wire/ib_stack.py`` is loaded a second time on top of it, so native InfiniBand and ERF
records are compared too.  For every input the new and old results must agree on the
problems, the layer names, every layer (decoded in any order), ``raw``/``trailer``/``cut``
and the JSON of ``to_dict()`` byte for byte: the committed pcaps (every record, whole and cut
at every byte, with and without a snaplen), every Hypothesis strategy of
:mod:`wire.strategies`, and mutated or random frames.
"""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wire.ib_stack as ib_new
import wire.stack as new
from wire import read
from wire.scaleup import ScaleUpConfig
from wire.strategies import frames, ib_fc_dicts, ib_frames, scaleup_frames

ROOT = Path(__file__).resolve().parent.parent
#: The last commit of the eager wire/stack.py (the parent state of the lazy decoder).
ORACLE_COMMIT = "eb886e5939eccf0524a08dda863ca093082d7d4c"


def _module(name: str, src: str) -> types.ModuleType:
    mod = types.ModuleType(f"wire.{name}")
    mod.__package__ = "wire"
    mod.__file__ = f"<{name}>"
    sys.modules[mod.__name__] = mod
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


def _oracles() -> tuple[types.ModuleType, types.ModuleType]:
    try:
        src = subprocess.run(["git", "show", f"{ORACLE_COMMIT}:wire/stack.py"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:  # not a git checkout
        pytest.skip(f"the oracle needs git history ({e})", allow_module_level=True)
    old = _module("_oracle_stack", src)
    # the IB dissector of today runs on the old stack; builders the old stack did not have yet
    # (shared with today's RoCE builder) come from today's module: only dissect is compared
    for name in ("build_transport", "not_captured"):
        if not hasattr(old, name):
            setattr(old, name, getattr(new, name))
    ib_src = (ROOT / "wire" / "ib_stack.py").read_text()
    assert "from .stack import (" in ib_src
    old_ib = _module("_oracle_ib_stack",
                     ib_src.replace("from .stack import (", "from ._oracle_stack import ("))
    return old, old_ib


OLD, OLD_IB = _oracles()


def _same(new_d, old_d, access: int = 0) -> None:
    # problems and names are decided before any layer is decoded
    assert new_d.problems == old_d.problems
    assert new_d.names == list(old_d.layers)
    names = list(old_d.layers)
    if names:  # decode one layer first: the result must not depend on the order of access
        first = names[access % len(names)]
        assert new_d[first] == old_d.layers[first]
    for name in names:
        a, b = new_d[name], old_d.layers[name]
        assert type(a) is type(b) and a == b, name
        if not isinstance(a, list):
            assert a.name == b.name and list(a) == list(b), name
    assert (new_d.raw, new_d.trailer, new_d.cut, new_d.caplen, new_d.orig_len) == (
        old_d.raw, old_d.trailer, old_d.cut, old_d.caplen, old_d.orig_len)
    assert json.dumps(new_d.to_dict()) == json.dumps(old_d.to_dict())


def _check(frame: bytes, orig_len: int | None = None, access: int = 0, **kw) -> None:
    _same(new.dissect(frame, orig_len, **kw), OLD.dissect(frame, orig_len, **kw), access)


def _check_record(rec, access: int = 0) -> None:
    _same(ib_new.dissect_record(rec), OLD_IB.dissect_record(rec), access)


PCAPS = sorted((ROOT / "pcaps").glob("*.pcap")) + sorted((ROOT / "pcaps" / "ib").glob("*.pcap"))


def test_the_oracle_is_the_eager_decoder() -> None:
    # The oracle must be the old code, not the package's: else the comparisons prove nothing.
    assert OLD.Decoded is not new.Decoded
    assert not hasattr(OLD.dissect(frames_example()), "_layers")


def frames_example() -> bytes:
    return new.build({"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
                      "payload": {"length": 40}})


@pytest.mark.parametrize("path", PCAPS, ids=lambda p: p.name)
def test_pcaps_whole_and_cut(path: Path) -> None:
    recs = list(read(path))
    assert recs
    for i, rec in enumerate(recs):
        _check_record(rec, i)
        if rec.linktype != 1:
            continue
        data = bytes(rec.data)
        for cut in range(len(data)):
            _check(data[:cut], None, cut)          # the record shortened: problems
            _check(data[:cut], len(data), cut)     # cut by the snaplen: not captured


def test_decoded_layers_are_lazy() -> None:
    d = new.dissect(frames_example())
    assert d.problems == []
    assert all(type(v).__name__ == "_Lazy" for v in d._layers.values() if v.__class__ is not
               new.Layer)
    assert type(d._layers["payload"]).__name__ == "_Lazy"
    assert d["bth"].opcode_name == "RC_SEND_ONLY"
    assert type(d._layers["bth"]) is new.Layer  # decoded once, then kept
    assert type(d._layers["payload"]).__name__ == "_Lazy"


def test_layers_dict_is_live() -> None:
    # ``d.layers`` is the dict itself (wire.ib_stack and users write into it).
    d = new.dissect(frames_example())
    d.layers["extra"] = new.Layer("extra", {"a": 1})
    assert "extra" in d and d["extra"].a == 1 and d.names[-1] == "extra"
    e = new.dissect(frames_example())
    assert e == new.dissect(frames_example()) and e != d


@given(frames(), st.integers(0, 30))
def test_pickle_and_copy(frame: bytes, access: int) -> None:
    # A Decoded pickles and copies (a deferred layer holds compiled code; a Layer's default
    # unpickling recursed through its __getattr__ before its name was set).
    import copy
    import pickle

    d = new.dissect(frame)
    if d.names:
        d[d.names[access % len(d.names)]]
    for e in (pickle.loads(pickle.dumps(d)), copy.deepcopy(d), copy.copy(d)):
        assert e == d and json.dumps(e.to_dict()) == json.dumps(OLD.dissect(frame).to_dict())


@st.composite
def _cut(draw, frame: bytes) -> tuple[bytes, int | None]:
    n = draw(st.integers(0, len(frame)))
    return frame[:n], draw(st.sampled_from([None, len(frame)]))


@given(frames(), st.data())
def test_strategy_frames(frame: bytes, data) -> None:
    _check(frame, access=data.draw(st.integers(0, 30)))
    cut, orig = data.draw(_cut(frame))
    _check(cut, orig, access=data.draw(st.integers(0, 30)))


@given(frames(kinds=["roce"]), st.integers(0, 0xFFFF), st.integers(0, 30))
def test_other_roce_ports(frame: bytes, port: int, access: int) -> None:
    _check(frame, access=access, roce_ports={4791, port})
    _check(frame, access=access, roce_ports=frozenset({port}))


@given(scaleup_frames(), st.data())
def test_scaleup_frames(frame: bytes, data) -> None:
    _check(frame, access=data.draw(st.integers(0, 30)))
    cut, orig = data.draw(_cut(frame))
    _check(cut, orig, access=data.draw(st.integers(0, 30)))


_OTHER_SC = ScaleUpConfig(afh_gen2_form="6", txn_hdr_bytes=16)


@given(scaleup_frames(scaleup=_OTHER_SC), st.integers(0, 30))
def test_scaleup_frames_other_config(frame: bytes, access: int) -> None:
    _check(frame, access=access, scaleup=_OTHER_SC)


@given(ib_frames(), st.data())
def test_ib_frames(frame: bytes, data) -> None:
    from wire.pcapio import Record

    orig = data.draw(st.sampled_from([None, len(frame)]))
    cut = frame[:data.draw(st.integers(0, len(frame)))]
    for f, o in ((frame, None), (cut, orig)):
        _same(ib_new.dissect_ib(f, o), OLD_IB.dissect_ib(f, o), data.draw(st.integers(0, 30)))
    _check_record(Record(0, frame, len(frame), linktype=247))


@given(ib_fc_dicts(), st.integers(0, 30))
def test_erf_flow_control(d: dict, access: int) -> None:
    frame = ib_new.build_erf(d)
    _same(ib_new.dissect_erf(frame), OLD_IB.dissect_erf(frame), access)


@st.composite
def mutated_frames(draw) -> bytes:
    data = bytearray(draw(st.one_of(frames(), scaleup_frames())))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "cut", "u16", "insert", "delete"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "cut":
            del data[at:]
        elif kind == "u16":  # a lying length, type or port
            data[at:at + 2] = draw(st.integers(0, 0xFFFF)).to_bytes(2, "big")
        elif kind == "insert":
            data[at:at] = draw(st.binary(max_size=40))
        else:
            del data[at:at + draw(st.integers(1, 8))]
    return bytes(data)


@given(mutated_frames(), st.sampled_from([None, 0, 1, 64, 4000]), st.integers(0, 30))
def test_mutated_frames(frame: bytes, extra: int | None, access: int) -> None:
    _check(frame, None if extra is None else len(frame) + extra, access)


@given(st.binary(max_size=200), st.integers(0, 30))
def test_random_bytes(frame: bytes, access: int) -> None:
    _check(frame, access=access)
    _check(b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x08\x00" + frame, access=access)
    _check(b"\x02\x00\x00\x00\x00\x02\x02\x00\x00\x00\x00\x01\x88\x08" + frame, access=access)


def _ones_sum_by_folding(data: bytes) -> int:
    # RFC 1071 section 4.1, literally: add 16-bit words, fold the carries back in.
    if len(data) % 2:
        data += b"\0"
    total = sum(int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data), 2))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


@given(st.one_of(st.binary(max_size=1100), st.integers(0, 600).map(lambda n: b"\xff" * n),
                 st.integers(0, 60).map(bytes)))
def test_ones_sum_is_rfc1071(data: bytes) -> None:
    # wire.checksum.ones_sum reads the data as one integer (mod 0xFFFF).
    from wire.checksum import ones_sum

    assert ones_sum(data) == _ones_sum_by_folding(data)
    assert ones_sum(bytearray(data)) == ones_sum(memoryview(data)) == ones_sum(data)

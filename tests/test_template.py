"""wire.template.RoceTemplate: patched frames are byte-identical to wire.build."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from wire import build, dissect
from wire.template import RoceTemplate


def _layers(v6: bool, psn: int, ecn: int, qp: int, vlan: bool, pay: int, opcode: str):
    ip = ({"src": "fe80::1", "dst": "fe80::2", "ecn": ecn} if v6
          else {"src": "10.0.0.1", "dst": "10.0.0.2", "ecn": ecn})
    d = {"eth": {}}
    if vlan:
        d["vlan"] = [{"pcp": 3, "vid": 10}]
    d.update({"ipv6" if v6 else "ipv4": ip, "udp": {},
              "bth": {"opcode": opcode, "dest_qp": qp, "psn": psn}})
    if opcode == "RC_ACKNOWLEDGE":
        d["aeth"] = {"kind": "ACK", "value": 31, "msn": 0}
    else:
        d["payload"] = {"data": "ab" * pay}
    return d



def _made(tpls, which, values, strided):
    """make_rows of ``tpls``, into a fresh array or (``strided``) into the last columns of
    wider records whose first 16 bytes it must leave alone."""
    import numpy as np

    from wire.template import make_rows

    if not strided:
        return make_rows(tpls, which, values)
    size = tpls[0].size_bytes
    records = np.full((len(values), 16 + size), 0xEE, dtype=np.uint8)
    got = make_rows(tpls, which, values, out=records[:, 16:])
    assert (records[:, :16] == 0xEE).all()
    return got

@given(v6=st.booleans(), vlan=st.booleans(), pay=st.integers(0, 300),
       opcode=st.sampled_from(["RC_RDMA_WRITE_MIDDLE", "RC_ACKNOWLEDGE"]),
       values=st.lists(st.tuples(st.integers(0, 0xFFFFFF), st.integers(0, 3),
                                 st.integers(0, 0xFFFFFF)), min_size=1, max_size=5))
def test_patched_frames_equal_build(v6, vlan, pay, opcode, values) -> None:
    ipn = "ipv6" if v6 else "ipv4"
    t = RoceTemplate(_layers(v6, 0, 0, 0, vlan, pay, opcode),
                     patch=("bth.psn", f"{ipn}.ecn", "bth.dest_qp"))
    for psn, ecn, qp in values:
        got = t.make(**{"bth.psn": psn, f"{ipn}.ecn": ecn, "bth.dest_qp": qp})
        assert got == build(_layers(v6, psn, ecn, qp, vlan, pay, opcode))
        assert dissect(bytes(got)).get("icrc")["valid"]


def test_aeth_msn_patch_and_errors() -> None:
    t = RoceTemplate(_layers(False, 0, 0, 5, False, 0, "RC_ACKNOWLEDGE"),
                     patch=("bth.psn", "aeth.msn"))
    got = t.make(**{"bth.psn": 9, "aeth.msn": 4})
    d = dissect(bytes(got))
    assert d.get("bth")["psn"] == 9 and d.get("aeth")["msn"] == 4 and d.get("icrc")["valid"]
    with pytest.raises(ValueError, match="does not fit"):
        t.make(**{"bth.psn": 1 << 24})
    with pytest.raises(ValueError, match=r"cannot patch 'udp\.sport'"):
        RoceTemplate(_layers(False, 0, 0, 5, False, 0, "RC_ACKNOWLEDGE"), patch=("udp.sport",))
    with pytest.raises(ValueError, match="RoCEv2"):
        RoceTemplate({"eth": {}, "ipv4": {}, "udp": {"dport": 53}})


@given(v6=st.booleans(), vlan=st.booleans(), pay=st.integers(0, 300),
       opcode=st.sampled_from(["RC_RDMA_WRITE_MIDDLE", "RC_ACKNOWLEDGE"]),
       field=st.sampled_from(["bth.psn", "bth.dest_qp", "bth.pkey", "IP.ecn", "bth.se"]),
       start=st.integers(0, 0xFFFFFF),
       values=st.lists(st.integers(0, 0xFFFFFF), max_size=12))
def test_make_array_rows_equal_make(v6, vlan, pay, opcode, field, start, values) -> None:
    """Each row of make_array is make's frame for that value, whether the ICRC comes from
    the per-byte tables (a byte-aligned multi-byte field: PSN, QP, P_Key) or from make
    (a one-byte field, an IP field the checksum covers): the same bytes, a valid ICRC."""
    import numpy as np

    field = field.replace("IP", "ipv6" if v6 else "ipv4")
    t = RoceTemplate(_layers(v6, start, 0, start, vlan, pay, opcode), patch=(field,))
    mask = (1 << 24) - 1 if field in ("bth.psn", "bth.dest_qp") else \
        0xFFFF if field == "bth.pkey" else 3 if field.endswith("ecn") else 1
    values = [v & mask for v in values]
    rows = t.make_array(values)
    assert rows.dtype == np.uint8 and rows.shape == (len(values), t.size_bytes)
    for row, v in zip(rows, values, strict=True):
        assert bytes(row) == bytes(t.make(**{field: v}))
        assert dissect(bytes(row)).get("icrc")["valid"]
    with pytest.raises(ValueError, match="does not fit"):
        t.make_array([mask + 1])


@given(v6=st.booleans(), vlan=st.booleans(), pay=st.integers(0, 64),
       field=st.sampled_from(["bth.psn", "bth.dest_qp", "IP.ecn", "bth.se"]),
       flows=st.lists(st.tuples(st.integers(0, 0xFFFFFF), st.integers(0, 3)), min_size=1,
                      max_size=4),
       rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 0xFFFFFF)), max_size=20),
       strided=st.booleans())
def test_make_rows_of_several_templates_equal_make(v6, vlan, pay, field, flows, rows,
                                                   strided) -> None:
    """make_rows (a capture's flows: templates of one length differing in addresses, QP,
    ECN and so checksums) gives row i as templates[which[i]].make(value i), into a strided
    view too (the frame columns of pcap records)."""
    from wire.template import make_rows

    field = field.replace("IP", "ipv6" if v6 else "ipv4")
    tpls = [RoceTemplate(_layers(v6, 0, ecn, qp, vlan, pay, "RC_RDMA_WRITE_MIDDLE"),
                         patch=(field,)) for qp, ecn in flows]
    mask = (1 << 24) - 1 if field in ("bth.psn", "bth.dest_qp") else \
        3 if field.endswith("ecn") else 1
    which = [g % len(tpls) for g, _ in rows]
    values = [v & mask for _, v in rows]
    got = _made(tpls, which, values, strided)
    size = tpls[0].size_bytes
    assert got.shape == (len(rows), size)
    for row, g, v in zip(got, which, values, strict=True):
        assert bytes(row) == bytes(tpls[g].make(**{field: v}))
    with pytest.raises(ValueError, match="out of range"):
        make_rows(tpls, [len(tpls)], [0])
    other = RoceTemplate(_layers(v6, 0, 0, 0, vlan, pay + 4, "RC_RDMA_WRITE_MIDDLE"),
                         patch=(field,))
    with pytest.raises(ValueError, match="one length"):
        make_rows([tpls[0], other], [0], [0])


def _ib_layers(psn: int, qp: int, fecn: int, ackreq: int, vl: int, pay: int, opcode: str,
               msn: int = 0) -> dict:
    d = {"lrh": {"vl": vl, "sl": vl, "dlid": 0x21, "slid": 0x12},
         "bth": {"opcode": opcode, "dest_qp": qp, "psn": psn, "fecn": fecn,
                 "ack_req": ackreq}}
    if opcode == "RC_ACKNOWLEDGE":
        d["aeth"] = {"kind": "ACK", "value": 31, "msn": msn}
    else:
        if opcode.endswith("FIRST"):
            d["reth"] = {"va": 0, "rkey": qp, "dma_length": 99}
        d["payload"] = {"data": "cd" * pay}
    return d


@given(pay=st.integers(0, 300), opcode=st.sampled_from(
           ["RC_RDMA_WRITE_MIDDLE", "RC_RDMA_WRITE_FIRST", "RC_ACKNOWLEDGE"]),
       fecn=st.integers(0, 1), vl=st.integers(0, 7),
       values=st.lists(st.tuples(st.integers(0, 0xFFFFFF), st.integers(0, 0xFFFFFF)),
                       min_size=1, max_size=5))
def test_ib_patched_packets_equal_build_ib(pay, opcode, fecn, vl, values) -> None:
    """IbTemplate: a native IB packet with its PSN (and an ACK's MSN) patched is byte for
    byte what wire.build_ib makes (ICRC and VCRC made again), and dissects clean."""
    from wire.ib_stack import build_ib, dissect_ib
    from wire.template import IbTemplate

    ack = opcode == "RC_ACKNOWLEDGE"
    patch = ("bth.psn", "aeth.msn") if ack else ("bth.psn",)
    t = IbTemplate(_ib_layers(0, 0x100, fecn, 1, vl, pay, opcode), patch=patch)
    for psn, msn in values:
        got = t.make(**{"bth.psn": psn, **({"aeth.msn": msn} if ack else {})})
        assert bytes(got) == build_ib(_ib_layers(psn, 0x100, fecn, 1, vl, pay, opcode,
                                                 msn if ack else 0))
        d = dissect_ib(bytes(got))
        assert not d.problems and d["icrc"]["valid"] and d["vcrc"]["valid"]


@given(pay=st.integers(0, 200), flows=st.lists(
           st.tuples(st.integers(0x100, 0x1FF), st.integers(0, 1), st.integers(0, 1),
                     st.integers(0, 7)), min_size=1, max_size=4),
       rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 0xFFFFFF)), max_size=20),
       strided=st.booleans())
def test_make_rows_of_ib_templates_equal_make(pay, flows, rows, strided) -> None:
    """make_rows of IbTemplates (a capture of an IB link): row i is templates[which[i]]
    .make(psn i), the ICRC and the VCRC (which covers the ICRC) from their linear parts."""
    from wire.template import IbTemplate

    tpls = [IbTemplate(_ib_layers(0, qp, fecn, ack, vl, pay, "RC_RDMA_WRITE_MIDDLE"))
            for qp, fecn, ack, vl in flows]
    which = [g % len(tpls) for g, _ in rows]
    values = [v for _, v in rows]
    got = _made(tpls, which, values, strided)
    for row, g, v in zip(got, which, values, strict=True):
        assert bytes(row) == bytes(tpls[g].make(**{"bth.psn": v}))


#: Patchable fields of an RDMA WRITE FIRST frame, of every width the maker stores: a bit
#: field (1 byte), 2, 3, 4 and 8 bytes, IP fields the ICRC masks or covers.
_MAKER_FIELDS = {"bth.se": 1, "bth.pkey": 0xFFFF, "bth.psn": 0xFFFFFF, "bth.dest_qp": 0xFFFFFF,
                 "bth.ack_req": 1, "reth.rkey": 0xFFFFFFFF, "reth.va": (1 << 64) - 1,
                 "reth.dma_length": 0xFFFFFFFF, "IP.ecn": 3, "IP.ttl": 255}
#: The IP fields' names in each header.
_IP_NAMES = {"ipv4": {"IP.ecn": "ipv4.ecn", "IP.ttl": "ipv4.ttl"},
             "ipv6": {"IP.ecn": "ipv6.ecn", "IP.ttl": "ipv6.hop_limit"}}


@given(kind=st.sampled_from(["ipv4", "ipv6", "ib"]), vlan=st.booleans(),
       pay=st.integers(0, 64),
       fields=st.lists(st.sampled_from(sorted(_MAKER_FIELDS)), min_size=1, max_size=4,
                       unique=True),
       data=st.data())
def test_maker_gives_what_make_gives(kind, vlan, pay, fields, data) -> None:
    """maker()'s straight-line function (struct stores, a 3-byte field with the byte before
    it, the ICRC inlined or through _finish) gives make's bytes for every value, and refuses
    a value that does not fit as make does."""
    from wire.template import IbTemplate

    tail = {"bth": {"opcode": "RC_RDMA_WRITE_FIRST", "dest_qp": 7, "psn": 5, "ack_req": 1},
            "reth": {"va": 0x1122334455667788, "rkey": 9, "dma_length": 4096},
            "payload": {"data": "cd" * pay}}
    if kind == "ib":
        fields = [f for f in fields if not f.startswith("IP.")] or ["bth.psn"]
        t = IbTemplate({"lrh": {"dlid": 3, "slid": 4}, **tail}, patch=tuple(fields))
    else:
        ip = ({"src": "fe80::1", "dst": "fe80::2", "dscp": 46} if kind == "ipv6"
              else {"src": "10.0.0.1", "dst": "10.0.0.2", "dscp": 46})  # 46: high bits set
        eth = {"eth": {}, **({"vlan": [{"pcp": 3, "vid": 10}]} if vlan else {})}
        t = RoceTemplate({**eth, kind: ip, "udp": {}, **tail},
                         patch=tuple(_IP_NAMES[kind].get(f, f) for f in fields))
    make = t.maker()
    names = t.names
    for _ in range(3):
        values = [data.draw(st.integers(0, _MAKER_FIELDS[f])) for f in fields]
        assert make(*values) == t.make(**dict(zip(names, values, strict=True)))
    bad = data.draw(st.integers(0, len(fields) - 1))
    values[bad] = _MAKER_FIELDS[fields[bad]] + 1
    with pytest.raises(ValueError, match="does not fit") as fast:
        make(*values)
    with pytest.raises(ValueError, match="does not fit") as slow:
        t.make(**dict(zip(names, values, strict=True)))
    assert str(fast.value) == str(slow.value)

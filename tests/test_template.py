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

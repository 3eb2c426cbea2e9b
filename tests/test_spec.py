"""The field-table machinery of :mod:`wire.spec`, exercised on every header of
``wire.stack.SPECS``: raw and shown values round trip, range and key checks on build raise
``BadValue`` naming the field, short input raises ``Truncated`` (never ``struct.error`` or
``IndexError``), and reserved bits survive a round trip."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.helpers import check_header
from wire.errors import BadValue, DecodeError, Truncated
from wire.spec import Field, HeaderSpec, Layer, format_value, parse_value
from wire.stack import SPECS

SPEC_IDS = sorted(SPECS)
ALL_FIELDS = [(s, f.name) for s in SPEC_IDS for f in SPECS[s].fields]


def raw_values(spec: HeaderSpec) -> st.SearchStrategy[dict]:
    """Random raw integer values for every field of ``spec`` (edges included)."""

    def ints(f: Field) -> st.SearchStrategy[int]:
        return st.one_of(st.sampled_from([0, 1, f.max_value]), st.integers(0, f.max_value))

    parts = {}
    for f in spec.fields:
        el = ints(f)
        parts[f.name] = el if f.count == 1 else st.lists(el, min_size=f.count,
                                                           max_size=f.count)
    return st.fixed_dictionaries(parts)


# ------------------------------------------------------------------------- round trips
@pytest.mark.parametrize("name", SPEC_IDS)
@given(data=st.data())
def test_raw_values_round_trip(name, data):
    spec = SPECS[name]
    raw = data.draw(raw_values(spec))
    packed = spec.pack(raw)
    assert len(packed) == spec.size_bytes
    assert spec.unpack_raw(packed) == raw
    shown = spec.unpack(packed)
    assert spec.shown(raw) == shown
    assert spec.pack(shown) == packed


@pytest.mark.parametrize("name", SPEC_IDS)
@given(data=st.data())
def test_any_bytes_round_trip(name, data):
    """Every bit pattern (reserved bits, invalid versions...) decodes and rebuilds exactly."""
    spec = SPECS[name]
    buf = data.draw(st.binary(min_size=spec.size_bytes, max_size=spec.size_bytes))
    assert spec.pack(spec.unpack(buf)) == buf
    assert spec.pack(spec.unpack_raw(buf)) == buf
    layer = spec.decode(buf)
    assert isinstance(layer, Layer) and layer.name == name
    assert spec.pack(layer) == buf


@pytest.mark.parametrize("name", SPEC_IDS)
def test_defaults_build_and_parse(name):
    spec = SPECS[name]
    packed = spec.pack()
    raw = spec.unpack_raw(packed)
    for f in spec.fields:
        want = f.default if f.count == 1 else [f.default] * f.count
        assert raw[f.name] == want, f"{name}.{f.name}"


@pytest.mark.parametrize("name", SPEC_IDS)
def test_layout_covers_every_bit_once(name):
    spec = SPECS[name]
    pos = 0
    for f, _i, off in spec.layout():
        assert off == pos
        pos += f.bits
    assert pos == spec.size_bytes * 8
    assert spec.field_names == tuple(f.name for f in spec.fields)


@pytest.mark.parametrize("name", SPEC_IDS)
def test_each_field_owns_its_bits(name):
    """Setting one field to all ones sets exactly its bits (catches overlapping shifts)."""
    spec = SPECS[name]
    for f, i, off in spec.layout():
        raw = {g.name: (0 if g.count == 1 else [0] * g.count) for g in spec.fields}
        if f.count == 1:
            raw[f.name] = f.max_value
        else:
            raw[f.name][i] = f.max_value
        want = f.max_value << (spec.size_bytes * 8 - off - f.bits)
        assert int.from_bytes(spec.pack(raw), "big") == want, f"{name}.{f.name}[{i}]"
        assert spec.unpack_raw(want.to_bytes(spec.size_bytes, "big")) == raw


# ------------------------------------------------------------------------- shown values
MAC_CASES = [
    ("01:80:c2:00:00:01", 0x0180C2000001, "01:80:c2:00:00:01"),
    ("FF:FF:FF:FF:FF:FF", 0xFFFFFFFFFFFF, "ff:ff:ff:ff:ff:ff"),
    ("24-8a-07-a8-fa-22", 0x248A07A8FA22, "24:8a:07:a8:fa:22"),
    ("00:00:00:00:00:00", 0, "00:00:00:00:00:00"),
]


@pytest.mark.parametrize(("text", "raw", "shown"), MAC_CASES)
def test_mac_text(text, raw, shown):
    f = SPECS["eth"].field("dst")
    assert parse_value(f, text) == raw
    assert format_value(f, raw) == shown
    assert parse_value(f, shown) == raw
    assert parse_value(f, raw) == raw  # raw integers are accepted too


@pytest.mark.parametrize("text", ["10.0.17.1", "0.0.0.0", "255.255.255.255", "192.168.0.7"])
def test_ipv4_text(text):
    f = SPECS["ipv4"].field("src")
    raw = parse_value(f, text)
    assert raw == int(ipaddress.IPv4Address(text))
    assert format_value(f, raw) == text


@pytest.mark.parametrize(("text", "shown"), [
    ("fd00::1", "fd00::1"),
    ("FD00:0:0:0:0:0:0:1", "fd00::1"),          # RFC 5952: lower case, longest zero run
    ("2001:db8:0:0:1:0:0:1", "2001:db8::1:0:0:1"),
    ("::", "::"),
    ("fe80::b8ce:f6ff:fe01:203", "fe80::b8ce:f6ff:fe01:203"),
])
def test_ipv6_text(text, shown):
    f = SPECS["ipv6"].field("dst")
    raw = parse_value(f, text)
    assert format_value(f, raw) == shown
    assert parse_value(f, shown) == raw


def test_ipv6_text_ipv4_mapped_is_stable():
    """RFC 5952 section 5 recommends the mixed notation for ::ffff:0:0/96; Python < 3.13's
    ipaddress prints ::ffff:a00:1, 3.13+ prints ::ffff:10.0.0.1, so the JSON would change
    with the interpreter."""
    f = SPECS["ipv6"].field("dst")
    assert format_value(f, parse_value(f, "::ffff:10.0.0.1")) == "::ffff:10.0.0.1"


def test_hex_text():
    f = SPECS["cnp"].field("reserved")
    raw = parse_value(f, "00" * 15 + "2a")
    assert raw == 0x2A
    assert format_value(f, raw) == "00" * 15 + "2a"
    assert parse_value(f, ":".join(["ab"] * 16)) == int("ab" * 16, 16)


@given(data=st.data())
def test_shown_values_round_trip_through_header(data):
    """Addresses given as text build the same bytes as the raw integers."""
    ip6 = data.draw(st.integers(0, (1 << 128) - 1))
    mac = data.draw(st.integers(0, (1 << 48) - 1))
    ip4 = data.draw(st.integers(0, (1 << 32) - 1))
    eth, v4, v6 = SPECS["eth"], SPECS["ipv4"], SPECS["ipv6"]
    assert eth.pack(eth.unpack(eth.pack(dst=mac))) == eth.pack(dst=mac)
    assert eth.unpack(eth.pack(src=mac))["src"] == format_value(eth.field("src"), mac)
    assert v4.pack(src=str(ipaddress.IPv4Address(ip4))) == v4.pack(src=ip4)
    assert v6.pack(dst=str(ipaddress.IPv6Address(ip6))) == v6.pack(dst=ip6)
    a6 = ipaddress.IPv6Address(ip6)
    # RFC 5952 5: IPv4-mapped addresses in mixed notation on every Python version.
    want = f"::ffff:{a6.ipv4_mapped}" if a6.ipv4_mapped is not None else str(a6)
    assert v6.unpack(v6.pack(dst=ip6))["dst"] == want


def test_enum_names_and_integer_text_accepted():
    bth = SPECS["bth"]
    assert bth.pack(opcode="RC_SEND_ONLY") == bth.pack(opcode=0x04)
    assert bth.pack(opcode="CNP") == bth.pack(opcode=0x81)
    assert bth.pack(opcode="0x81") == bth.pack(opcode=129) == bth.pack(opcode=" 129 ")
    assert bth.pack(se=True) == bth.pack(se=1)


def test_array_field_list_or_broadcast():
    pfc = SPECS["pfc"]
    q = [0xFFFF, 0, 1, 2, 3, 4, 5, 0x1234]
    assert pfc.unpack(pfc.pack(quanta=q))["quanta"] == q
    assert pfc.unpack(pfc.pack(quanta=(7,) * 8))["quanta"] == [7] * 8
    assert pfc.pack(quanta=9) == pfc.pack(quanta=[9] * 8)


def test_header_vector_helper():
    # The CNP's BTH from the ConnectX-4 Lx capture (Scapy test/contrib/roce.uts).
    check_header(SPECS["bth"], "8100ffff 40000118 00000000",
                 {"opcode": 0x81, "pkey": 0xFFFF, "becn": 1, "dest_qp": 0x118, "psn": 0})


# ------------------------------------------------------------------------- range errors
def _too_big(spec: HeaderSpec, fname: str) -> dict:
    f = spec.field(fname)
    bad = f.max_value + 1
    return {fname: bad if f.count == 1 else [0] * (f.count - 1) + [bad]}


@pytest.mark.parametrize(("name", "fname"), ALL_FIELDS)
def test_out_of_range_raises_bad_value_naming_field(name, fname):
    spec = SPECS[name]
    with pytest.raises(BadValue) as e:
        spec.pack(_too_big(spec, fname))
    assert e.value.layer == name and e.value.field == fname
    assert f"{name}.{fname}" in str(e.value)
    f = spec.field(fname)
    neg = -1 if f.count == 1 else [-1] * f.count
    with pytest.raises(BadValue) as e:
        spec.pack({fname: neg})
    assert e.value.field == fname


@pytest.mark.parametrize(("name", "fname", "value"), [
    ("eth", "dst", "zz:zz:zz:zz:zz:zz"),
    ("eth", "dst", "01:02:03:04:05"),           # 5 bytes
    ("eth", "src", "01:02:03:04:05:06:07"),     # 7 bytes
    ("ipv4", "src", "10.0.0"),
    ("ipv4", "dst", "300.0.0.1"),
    ("ipv4", "dst", "fd00::1"),
    ("ipv6", "src", "10.0.0.1"),
    ("ipv6", "src", "fd00:::1"),
    ("cnp", "reserved", "00" * 15),             # 15 bytes for a 16-byte field
    ("cnp", "reserved", "zz" * 16),
    ("bth", "opcode", "NOT_AN_OPCODE"),
    ("bth", "psn", 1.5),
    ("bth", "psn", None),
    ("udp", "dport", b"\x12\xb7"),
    ("pfc", "quanta", [1, 2, 3]),               # wrong element count
    ("pfc", "quanta", "ffff"),
])
def test_bad_shown_values(name, fname, value):
    with pytest.raises(BadValue) as e:
        SPECS[name].pack({fname: value})
    assert e.value.layer == name and e.value.field == fname
    assert fname in str(e.value)


@pytest.mark.parametrize("text", ["0x0102030405", "a_bbccddeeff", "+abbccddeeff"])
def test_mac_text_rejects_non_mac_strings(text):
    with pytest.raises(BadValue):
        parse_value(SPECS["eth"].field("dst"), text, "eth")


@pytest.mark.parametrize("name", SPEC_IDS)
def test_unknown_keys_rejected(name):
    spec = SPECS[name]
    with pytest.raises(BadValue) as e:
        spec.pack({"no_such_field": 1})
    assert e.value.layer == name
    assert "no_such_field" in str(e.value)
    with pytest.raises(BadValue):
        spec.pack(no_such_field=1)


@pytest.mark.parametrize(("name", "key", "value"), [
    ("bth", "opcode_name", "RC_SEND_ONLY"),
    ("ipv4", "checksum_ok", False),
    ("aeth", "kind", "NAK"),
])
def test_derived_keys_accepted_and_ignored(name, key, value):
    spec = SPECS[name]
    assert key in spec.derived
    assert spec.pack({key: value}) == spec.pack()


# ------------------------------------------------------------------------- truncation
@pytest.mark.parametrize("name", SPEC_IDS)
def test_truncated_input_raises_truncated(name):
    spec = SPECS[name]
    full = bytes(range(1, spec.size_bytes + 1))
    for n in range(spec.size_bytes):
        for buf in (full[:n], bytearray(full[:n]), memoryview(full[:n])):
            for fn in (spec.unpack, spec.unpack_raw, spec.decode):
                with pytest.raises(Truncated) as e:
                    fn(buf)
                assert isinstance(e.value, DecodeError) and e.value.layer == name
                assert f"need {spec.size_bytes} bytes" in str(e.value)
        # The same shortfall at an offset inside a longer buffer.
        with pytest.raises(Truncated) as e:
            spec.unpack(b"\0" * 5 + full[:n], 5)
        assert e.value.offset == 5
    with pytest.raises(Truncated):
        spec.unpack(full, spec.size_bytes + 3)  # offset past the end
    assert spec.unpack(full) == spec.unpack(full + b"\xff" * 9)  # extra bytes are not read


# ------------------------------------------------------------------------- reserved bits
RESERVED = [(s, f.name) for s in SPEC_IDS for f in SPECS[s].fields if f.reserved]


def test_specs_declare_reserved_fields():
    assert ("bth", "resv6") in RESERVED and ("bth", "resv7") in RESERVED
    assert ("deth", "resv8") in RESERVED and ("cnp", "reserved") in RESERVED


@pytest.mark.parametrize(("name", "fname"), RESERVED)
def test_reserved_bits_round_trip(name, fname):
    spec = SPECS[name]
    f = spec.field(fname)
    packed = spec.pack({fname: f.max_value})
    assert packed != spec.pack({fname: 0})
    assert spec.unpack_raw(packed)[fname] == f.max_value
    assert spec.pack(spec.unpack(packed)) == packed


# ------------------------------------------------------------------------- machinery
def test_spec_definition_errors():
    with pytest.raises(ValueError, match="bits"):
        Field("x", 0)
    with pytest.raises(ValueError, match="fmt"):
        Field("x", 8, fmt="float")
    with pytest.raises(ValueError, match="whole bytes"):
        Field("x", 12, fmt="hex")
    with pytest.raises(ValueError, match="whole number of bytes"):
        HeaderSpec("odd", [Field("a", 3)])
    with pytest.raises(ValueError, match="duplicate"):
        HeaderSpec("dup", [Field("a", 4), Field("a", 4)])


def test_layer_attribute_access():
    layer = SPECS["bth"].decode(SPECS["bth"].pack(psn=77))
    assert layer.psn == 77 == layer["psn"]
    with pytest.raises(AttributeError, match="no_field"):
        _ = layer.no_field
    assert repr(layer).startswith("bth(opcode=4")


def test_wide_field_not_truncated_to_machine_word():
    """128-bit and 64-bit fields keep every bit (Python ints, not struct)."""
    ae = SPECS["atomic_eth"]
    v = {"va": (1 << 64) - 2, "rkey": 0xDEADBEEF, "swap_add": 1 << 63, "compare": 3}
    assert ae.unpack_raw(ae.pack(v)) == v


def test_byte_field_positions_come_from_the_tables() -> None:
    """In-place rewriters read positions from the tables (ECN, TTL, IPv4 checksum)."""
    from wire.esun import ESUN
    from wire.ipv4 import IPV4
    from wire.ipv6 import IPV6

    assert ESUN.byte_field("ttl") == (3, 4, 15)
    assert ESUN.byte_field("ecn") == (0, 0, 3)
    assert IPV6.byte_field("ecn") == (1, 4, 3)
    assert IPV4.byte_field("checksum") == (10, 0, 0xFFFF)
    with pytest.raises(ValueError):
        IPV4.byte_field("frag_offset")  # 13 bits across a byte boundary
    with pytest.raises(KeyError):
        IPV4.byte_field("nope")

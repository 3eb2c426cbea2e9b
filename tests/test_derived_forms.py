"""Every form derived from a field table agrees with the table's own codec.

For every header of ``wire.stack.SPECS``, on Hypothesis values (:mod:`wire.strategies`):

* raw values -> ``spec.pack`` == Construct ``build`` (:mod:`wire.construct_defs`) == bytes of
  the Scapy layer built from those values (:mod:`wire.scapy_layers`);
* bytes -> ``spec.unpack_raw`` == Construct ``parse`` == the Scapy layer's fields, and each
  form serialises the bytes back unchanged;
* shown values (MAC/IP text, hex strings) round trip through every form;
* sizes and field order agree;

plus: ``docs/reference/headers.md`` is what ``python -m wire.docgen`` generates, no module
under ``wire/`` other than the derived ones writes a bit position or a width by hand, and
``import wire`` imports none of construct / Scapy / Hypothesis.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wire import docgen, scapy_layers
from wire import strategies as ws
from wire.construct_defs import STRUCTS, struct_for
from wire.errors import BadValue
from wire.stack import SPECS

NAMES = sorted(SPECS)
WIRE_DIR = Path(__file__).resolve().parent.parent / "wire"
#: The modules allowed to name Construct/Scapy field types: they generate them from the tables.
DERIVED_MODULES = {"construct_defs.py", "scapy_layers.py"}
#: These tests run once per spec (28 times): a third of the profile's examples each keeps the
#: file at a few seconds in ``dev`` and well under a minute in ``ci``.
per_spec = settings(max_examples=max(10, settings().max_examples // 3))


def _scapy_raw(name: str, values: dict) -> bytes:
    return bytes(scapy_layers.from_values(name, values))


# ------------------------------------------------------------------ values -> bytes
@pytest.mark.parametrize("name", NAMES)
@per_spec
@given(data=st.data())
def test_raw_values_build_the_same_bytes(name, data):
    spec = SPECS[name]
    raw = data.draw(ws.raw_values(spec), label="raw")
    packed = spec.pack(raw)
    assert len(packed) == spec.size_bytes
    assert STRUCTS[name].build(raw) == packed
    assert _scapy_raw(name, raw) == packed
    # fields left out take the same defaults in every form
    keep = data.draw(st.sets(st.sampled_from(spec.field_names)), label="keep")
    partial = {k: v for k, v in raw.items() if k in keep}
    packed = spec.pack(partial)
    assert STRUCTS[name].build(partial) == packed
    assert _scapy_raw(name, partial) == packed


# ------------------------------------------------------------------ bytes -> values
@pytest.mark.parametrize("name", NAMES)
@per_spec
@given(data=st.data())
def test_bytes_parse_to_the_same_values(name, data):
    spec = SPECS[name]
    buf = data.draw(ws.header_bytes(spec), label="bytes")
    raw = spec.unpack_raw(buf)
    assert STRUCTS[name].parse(buf) == raw
    layer = scapy_layers.LAYERS[name](buf)
    assert scapy_layers.to_raw(layer) == raw
    # and each form writes the bytes back unchanged
    assert spec.pack(raw) == buf
    assert STRUCTS[name].build(STRUCTS[name].parse(buf)) == buf
    assert bytes(layer) == buf
    assert bytes(scapy_layers.LAYERS[name](**layer.fields)) == buf


# ------------------------------------------------------------------ shown values
@pytest.mark.parametrize("name", NAMES)
@per_spec
@given(data=st.data())
def test_shown_values_round_trip(name, data):
    spec = SPECS[name]
    shown = data.draw(ws.shown_values(spec), label="shown")
    packed = spec.pack(shown)
    assert spec.unpack(packed) == shown
    assert spec.shown(spec.unpack_raw(packed)) == shown
    assert STRUCTS[name].build(shown) == packed
    assert _scapy_raw(name, shown) == packed
    assert scapy_layers.to_raw(scapy_layers.LAYERS[name](packed)) == spec.unpack_raw(packed)


# ------------------------------------------------------------------ structure
@pytest.mark.parametrize("name", NAMES)
def test_sizes_and_field_order_agree(name):
    spec = SPECS[name]
    assert STRUCTS[name].sizeof() == spec.size_bytes
    assert struct_for(spec).sizeof() == spec.size_bytes
    cls = scapy_layers.LAYERS[name]
    assert len(cls()) == spec.size_bytes
    expected = [n for f in spec.fields for n in scapy_layers.element_names(spec, f)]
    assert [f.name for f in cls.fields_desc] == expected
    assert cls.__name__.startswith("LL_")
    assert cls().name.startswith("lossless ")
    assert bytes(cls()) == spec.pack({}) == STRUCTS[name].build({})


def test_every_spec_has_every_derived_form():
    assert set(STRUCTS) == set(SPECS)
    assert set(scapy_layers.LAYERS) == set(SPECS)
    assert len({c.__name__ for c in scapy_layers.LAYERS.values()}) == len(SPECS)


#: The scale-up headers and their Scapy class names (documented in wire/scapy_layers.py).
SCALEUP_CLASSES = {
    "esun": "LL_ESUN", "sunh": "LL_SUNH", "afh_gen1": "LL_AFHGen1",
    "afh_gen2_12": "LL_AFHGen2_12", "afh_gen2_6": "LL_AFHGen2_6", "sue_rh": "LL_SUE_RH",
    "sue_txn8": "LL_SUE_TXN8", "sue_txn16": "LL_SUE_TXN16", "rcrc": "LL_RCRC",
}


def test_scaleup_specs_are_covered():
    """The scale-up specs are in SPECS, so every agreement test above runs on them."""
    assert set(SCALEUP_CLASSES) <= set(NAMES)
    for name, cls_name in SCALEUP_CLASSES.items():
        assert scapy_layers.LAYERS[name].__name__ == cls_name
        assert getattr(scapy_layers, cls_name) is scapy_layers.LAYERS[name]
        assert cls_name in scapy_layers.__all__


@pytest.mark.parametrize("name", sorted(SCALEUP_CLASSES))
def test_scaleup_values_at_the_edges_agree(name):
    """All fields at 0, then at their maximum, in every form (the edges Hypothesis may miss
    for the 64-bit address and the 48-bit SA)."""
    spec = SPECS[name]
    for values in ({f.name: 0 for f in spec.fields},
                   {f.name: f.max_value for f in spec.fields}):
        packed = spec.pack(values)
        assert STRUCTS[name].build(values) == packed == _scapy_raw(name, values)
        assert scapy_layers.to_raw(scapy_layers.LAYERS[name](packed)) == values


@pytest.mark.parametrize("name", ["bth", "pfc", "eth"])
def test_bad_values_are_rejected_like_spec_pack(name):
    spec = SPECS[name]
    too_big = {spec.fields[0].name: (1 << spec.fields[0].total_bits) + 1}
    with pytest.raises(BadValue):
        spec.pack(too_big)
    with pytest.raises(BadValue):
        STRUCTS[name].build(too_big)
    with pytest.raises(BadValue):
        scapy_layers.from_values(name, too_big)
    with pytest.raises(BadValue):
        STRUCTS[name].build({"no_such_field": 1})


def test_construct_parse_gives_plain_ints_not_enum_wrappers():
    # The Construct trap: Enum values compare unequal to IntEnum members.  Ours are ints.
    raw = STRUCTS["bth"].parse(SPECS["bth"].pack({"opcode": "CNP"}))
    assert type(raw["opcode"]) is int and raw["opcode"] == 0x81
    assert type(raw) is dict and "_io" not in raw
    quanta = STRUCTS["pfc"].parse(SPECS["pfc"].pack({"quanta": [1, 2, 3, 4, 5, 6, 7, 8]}))
    assert quanta["quanta"] == [1, 2, 3, 4, 5, 6, 7, 8] and type(quanta["quanta"]) is list


# ------------------------------------------------------------------ docs
def test_docs_headers_md_is_up_to_date():
    assert docgen.DOC_PATH.exists(), "run: python -m wire.docgen --write"
    assert docgen.DOC_PATH.read_text(encoding="utf-8") == docgen.render(), (
        "docs/reference/headers.md is stale: run python -m wire.docgen --write")


@pytest.mark.parametrize("name", NAMES)
def test_docs_list_every_assumption(name):
    """Every ``[A]`` of a spec (source, notes, field descriptions) is listed under its
    header's "Assumptions" note; a spec without one has no such note."""
    spec = SPECS[name]
    items = docgen.assumptions(spec)
    texts = [spec.source, spec.doc, *(f.doc for f in spec.fields)]
    assert bool(items) == any(docgen.ASSUMPTION_MARK in t for t in texts)
    doc = docgen.render()
    section = doc.split(f"## {name}: ", 1)[1].split("\n## ", 1)[0]
    assert ("**Assumptions [A]**" in section) == bool(items)
    for item in items:
        assert f"- {item}" in section
    for f in spec.fields:
        if docgen.ASSUMPTION_MARK in f.doc:
            assert f"- `{f.name}`: {f.doc}" in section


def test_scaleup_placeholders_are_documented():
    table = docgen.scaleup_table()
    assert "| `esun_ethertype` | `0x88B5 (34997)` |" in table
    assert "| `sue_udp_port` | `0xCAFE (51966)` |" in table
    assert "## Scale-up placeholders" in docgen.render()


@pytest.mark.parametrize("name", NAMES)
def test_doc_diagram_covers_every_bit(name):
    spec = SPECS[name]
    diagram = docgen.bit_diagram(spec)
    rows = [ln for ln in diagram.splitlines() if ln.startswith("|")]
    # every row is 2 characters per bit + 1; all but the last are 32 bits wide
    widths = [(len(r) - 1) // 2 for r in rows]
    assert sum(widths) == spec.size_bytes * 8
    assert all(w == docgen.ROW_BITS for w in widths[:-1])
    table = docgen.field_table(spec)
    for f in spec.fields:
        assert f"`{f.name}`" in table


def test_opcode_table_lists_every_opcode():
    table = docgen.opcode_table()
    from wire.bth import EXT_HEADERS
    for op, (op_name, _hdrs) in EXT_HEADERS.items():
        assert f"| 0x{op:02x} | {op_name} |" in table


# ------------------------------------------------------------------ one source of truth
_FIELD_TYPES = re.compile(
    r"\b(BitField|BitEnumField|XBitField|BitsInteger|BitStruct|BitsSwapped|FlagsField|"
    r"ByteField|ShortField|IntField|LongField|MACField|IPField|IP6Field|Int\d+u[bl]?|"
    r"Int\d+s[bl]?)\b")
_GENERATOR_CALLS = ("BitField", "BitEnumField", "XBitField", "BitsInteger", "Array",
                    "MACField", "IPField", "IP6Field")


def _wire_modules():
    return sorted(WIRE_DIR.rglob("*.py"))


#: Third-party packages only the generator modules may import.
_ONLY_IN = {"construct": {"construct_defs.py"}, "scapy": {"scapy_layers.py"},
            "hypothesis": {"strategies.py"}}


def test_no_hand_written_field_types_outside_the_derived_modules():
    """Code (not prose) naming a Scapy/Construct field type, or importing construct, Scapy or
    Hypothesis, is only allowed in the modules that generate from the field tables."""
    offenders = []
    for path in _wire_modules():
        rel = path.relative_to(WIRE_DIR.parent)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Name):
                ident = node.id
            elif isinstance(node, ast.Attribute):
                ident = node.attr
            elif isinstance(node, ast.alias):
                ident = node.name.rsplit(".", 1)[-1]
            else:
                ident = None
            if ident and _FIELD_TYPES.fullmatch(ident) and path.name not in DERIVED_MODULES:
                offenders.append(f"{rel}:{getattr(node, 'lineno', '?')}: {ident}")
            if isinstance(node, ast.Import | ast.ImportFrom):
                mods = ([a.name for a in node.names] if isinstance(node, ast.Import)
                        else [node.module or ""] if node.level == 0 else [])
                for mod in mods:
                    top = mod.split(".")[0]
                    if top in _ONLY_IN and path.name not in _ONLY_IN[top]:
                        offenders.append(f"{rel}:{node.lineno}: import {mod}")
    assert not offenders, "bit layouts must come from the field tables:\n" + "\n".join(offenders)


@pytest.mark.parametrize("module", sorted(DERIVED_MODULES))
def test_derived_modules_take_every_width_from_the_tables(module):
    """In the generators, no field constructor gets a literal number (a width, an offset or a
    default): they all come from the Field objects."""
    tree = ast.parse((WIRE_DIR / module).read_text(encoding="utf-8"))
    calls = 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        fn = node.func
        fname = fn.attr if isinstance(fn, ast.Attribute) else getattr(fn, "id", "")
        if fname not in _GENERATOR_CALLS:
            continue
        calls += 1
        for arg in [*node.args, *(k.value for k in node.keywords)]:
            literals = [n for n in ast.walk(arg)
                        if isinstance(n, ast.Constant) and isinstance(n.value, int)]
            assert not literals, f"{module}:{node.lineno}: {fname}() with a literal number"
    assert calls, f"{module}: no generated fields found"


def test_import_wire_imports_no_heavy_dependency():
    code = ("import sys, wire; bad = [m for m in ('construct', 'scapy', 'hypothesis', "
            "'matplotlib') if m in sys.modules]; print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=WIRE_DIR.parent)
    assert out.stdout.strip() == ""

"""Generate ``docs/reference/headers.md`` from the field tables (``python -m wire.docgen``).

For every spec in :data:`wire.stack.SPECS`: its title, source and notes, an RFC-style bit
diagram 32 bits wide (bit numbers across the top; a separator is left open where a field
continues into the next row, as RFC 8200 draws its addresses), a table of the fields (width,
offset in bits and as byte.bit, default, description, enum values) and, for the headers with
no public bit-exact specification (ESUN, SUE, AFH, SUNH), a note listing the assumptions
marked ``[A]`` in the spec's source, notes and field descriptions.  Then the table of
opcodes -> extended headers from :data:`wire.bth.EXT_HEADERS` and the placeholder values of
:class:`wire.scaleup.ScaleUpConfig`.

Usage::

    python -m wire.docgen            # print the Markdown
    python -m wire.docgen --write    # write docs/reference/headers.md (next to the wire package)
    python -m wire.docgen --check    # exit 1 if docs/reference/headers.md is not up to date

``tests/test_derived_forms.py`` fails when the committed file differs from this output.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from .bth import EXT_HEADERS, Opcode
from .scaleup import DEFAULT_SCALEUP
from .spec import Field, HeaderSpec, format_value
from .stack import SPECS

__all__ = ["ASSUMPTION_MARK", "DOC_PATH", "assumptions", "bit_diagram", "field_table",
           "opcode_table", "render", "main", "scaleup_table"]

#: Where the generated document lives in the repository.
DOC_PATH = Path(__file__).resolve().parent.parent / "docs" / "reference" / "headers.md"
ROW_BITS = 32
#: Enums with more members than this are listed elsewhere, not in a table cell.
_MAX_INLINE_ENUM = 12
#: How the field tables mark an assumption: a value or layout no public specification fixes,
#: which the project adopts and labels as such (docs/explanation/scaleup.md).
ASSUMPTION_MARK = "[A]"


def _element_label(f: Field, index: int) -> str:
    return f.name if f.count == 1 else f"{f.name}[{index}]"


def _fit(label: str, width: int) -> str:
    """``label`` centred in ``width`` characters; cut (ending in '.') when it does not fit."""
    if len(label) > width:
        label = label[:1].upper() if width < 3 else label[:width - 1] + "."
    return label.center(width)


def bit_diagram(spec: HeaderSpec) -> str:
    """An RFC 791-style diagram of ``spec``, 32 bits per row, generated from its layout."""
    total = spec.size_bytes * 8
    owner: list[int] = []  # bit -> index of the field element that holds it
    labels: list[str] = []
    for idx, (f, i, _off) in enumerate(spec.layout()):
        owner += [idx] * f.bits
        labels.append(_element_label(f, i))
    rows = [owner[r:r + ROW_BITS] for r in range(0, total, ROW_BITS)]

    # The row in which each element's label goes: the middle one of its widest segments.
    segs: dict[int, list[tuple[int, int]]] = {}
    for r, row in enumerate(rows):
        for idx in set(row):
            segs.setdefault(idx, []).append((row.count(idx), r))
    label_row = {}
    for idx, lst in segs.items():
        widest = max(n for n, _r in lst)
        candidates = [r for n, r in lst if n == widest]
        label_row[idx] = candidates[(len(candidates) - 1) // 2]

    def separator(above: list[int] | None, below: list[int] | None) -> str:
        width = max(len(above or ()), len(below or ()))
        chars = []
        for c in range(width):
            same = (above is not None and below is not None and c < len(above)
                    and c < len(below) and above[c] == below[c])
            chars.append(" " if same else "-")
        out = "+"
        for c in range(width):
            out += chars[c]
            if c + 1 < width:
                out += " " if chars[c] == " " and chars[c + 1] == " " else "+"
        return out + "+"

    def row_line(r: int, row: list[int]) -> str:
        out = "|"
        c = 0
        while c < len(row):
            idx = row[c]
            n = 1
            while c + n < len(row) and row[c + n] == idx:
                n += 1
            text = labels[idx] if label_row[idx] == r else ""
            out += _fit(text, 2 * n - 1) + "|"
            c += n
        return out

    lines = [
        " " + "".join((str(c // 10) if c % 10 == 0 else " ") + " "
                      for c in range(ROW_BITS)).rstrip(),
        " " + " ".join(str(c % 10) for c in range(ROW_BITS)),
    ]
    prev = None
    for r, row in enumerate(rows):
        lines.append(separator(prev, row))
        lines.append(row_line(r, row))
        prev = row
    lines.append(separator(prev, None))
    return "\n".join(lines)


def _abbreviations(spec: HeaderSpec) -> list[str]:
    """Labels the diagram had to cut, with their full names."""
    out = []
    for f, i, off in spec.layout():
        width = 2 * min(f.bits, ROW_BITS - off % ROW_BITS) - 1
        label = _element_label(f, i)
        if len(label) > width and f.bits < ROW_BITS:
            out.append(f"`{_fit(label, width).strip()}` = {label}")
    return out


def _enum_cell(f: Field) -> str:
    if f.enum is None:
        return ""
    if f.enum is Opcode:
        return "see [Opcodes and extended headers](#opcodes-and-extended-headers)"
    if len(f.enum) > _MAX_INLINE_ENUM:
        return f"{len(f.enum)} values ({f.enum.__name__})"
    width = (f.bits + 3) // 4
    return ", ".join(f"0x{int(m):0{width}x} {m.name}" for m in f.enum)


def _default_cell(f: Field) -> str:
    shown = format_value(f, int(f.default))
    v = int(f.default)
    if f.fmt == "int" and f.enum is not None:
        text = f"0x{v:0{(f.bits + 3) // 4}x}"
        if v in f.enum._value2member_map_:
            text += f" ({f.enum(v).name})"
    elif f.fmt == "int":
        text = str(v) if v < 256 else f"{v} (0x{v:x})"
    else:
        text = f"`{shown}`"
    return text + (f" (each of {f.count})" if f.count > 1 else "")


def field_table(spec: HeaderSpec) -> str:
    """The Markdown table of ``spec``'s fields."""
    lines = [
        "| field | bits | offset (bits) | offset (byte.bit) | default | description | values |",
        "|---|---|---|---|---|---|---|",
    ]
    pos = 0
    for f in spec.fields:
        bits = str(f.bits) if f.count == 1 else f"{f.count} x {f.bits}"
        name = f"`{f.name}`" + (f"[0..{f.count - 1}]" if f.count > 1 else "")
        desc = f.doc + (" (reserved)" if f.reserved and "reserved" not in f.doc else "")
        desc = desc.replace("|", "\\|")
        lines.append(f"| {name} | {bits} | {pos} | {pos // 8}.{pos % 8} | {_default_cell(f)} "
                     f"| {desc} | {_enum_cell(f)} |")
        pos += f.total_bits
    return "\n".join(lines)


def _clauses(text: str) -> list[str]:
    """``text`` cut into sentences and ``;``-separated clauses."""
    parts = re.split(r"(?<=[.;])\s+", text.strip())
    return [p.strip().rstrip(";").strip() for p in parts if p.strip()]


def assumptions(spec: HeaderSpec) -> list[str]:
    """The ``[A]`` items of ``spec``: clauses of its source and notes, then its fields."""
    out = [f"source: {c}" for c in _clauses(spec.source) if ASSUMPTION_MARK in c]
    out += [c for c in _clauses(spec.doc) if ASSUMPTION_MARK in c]
    out += [f"`{f.name}`: {f.doc}" for f in spec.fields if ASSUMPTION_MARK in f.doc]
    return out


def scaleup_table() -> str:
    """Markdown table of the :class:`~wire.scaleup.ScaleUpConfig` defaults (placeholders)."""
    lines = ["| setting | default |", "|---|---|"]
    for f in dataclasses.fields(DEFAULT_SCALEUP):
        v = getattr(DEFAULT_SCALEUP, f.name)
        shown = f"0x{v:04X} ({v})" if f.name.endswith(("ethertype", "_port")) else repr(v)
        lines.append(f"| `{f.name}` | `{shown}` |")
    return "\n".join(lines)


def opcode_table() -> str:
    """Markdown table: every opcode of EXT_HEADERS -> its extended headers in wire order."""
    lines = ["| opcode | name | extended headers after the BTH (wire order) | bytes |",
             "|---|---|---|---|"]
    for op, (name, hdrs) in EXT_HEADERS.items():
        nbytes = sum(SPECS[h].size_bytes for h in hdrs)
        shown = " ".join(f"`{h}`" for h in hdrs) or "-"
        lines.append(f"| 0x{op:02x} | {name} | {shown} | {nbytes} |")
    return "\n".join(lines)


def render() -> str:
    """The whole of ``docs/reference/headers.md``."""
    out = [
        "# Header layouts",
        "",
        "<!-- Generated by `python -m wire.docgen --write` from the field tables in `wire/`."
        " Do not edit: change the field table and regenerate. -->",
        "",
        "Every header below is drawn from its field table (`wire.stack.SPECS`), the one place "
        "a bit position is written. Bits are numbered from the most significant bit of the "
        "first byte (network order), 32 to a row. Every field is big-endian on the wire; the "
        "ICRC (not a header: the 4-byte trailer of a RoCEv2 datagram) is little-endian. "
        f"`{ASSUMPTION_MARK}` marks an assumption: a value or layout no public specification "
        "fixes (ESUN, SUE, AFH, SUNH); each such header lists its assumptions.",
        "",
        "Headers: " + ", ".join(f"[{name}](#{name.replace('_', '-')})" for name in SPECS)
        + ", [opcodes](#opcodes-and-extended-headers), "
        "[scale-up placeholders](#scale-up-placeholders).",
        "",
    ]
    for name, spec in SPECS.items():
        out += [f'<a id="{name.replace("_", "-")}"></a>', "",
                f"## {name}: {spec.title or name}", ""]
        meta = f"**{spec.size_bytes} bytes.** Source: {spec.source or 'n/a'}."
        out += [meta, ""]
        if spec.doc:
            out += [spec.doc, ""]
        out += ["```", bit_diagram(spec), "```", ""]
        abbrev = _abbreviations(spec)
        if abbrev:
            out += ["Labels cut to fit: " + "; ".join(abbrev) + ".", ""]
        out += [field_table(spec), ""]
        if spec.derived:
            out += ["Output-only keys added by the dissector (ignored on build): "
                    + ", ".join(f"`{k}`" for k in spec.derived) + ".", ""]
        items = assumptions(spec)
        if items:
            out += [f"**Assumptions {ASSUMPTION_MARK}** (not fixed by a public "
                    "specification; see [scaleup.md](../explanation/scaleup.md)):", ""]
            out += [f"- {i.replace('|', chr(92) + '|')}" for i in items] + [""]
    out += [
        '<a id="opcodes-and-extended-headers"></a>', "",
        "## Opcodes and extended headers", "",
        "From `wire.bth.EXT_HEADERS` (IBA vol. 1 9.2, table 38; CNP: Annex A17.9.3; XRC: "
        "the XRC annex). Opcodes not listed are reserved or vendor-specific: their bytes up to "
        "the ICRC are kept as payload.", "",
        opcode_table(), "",
        '<a id="scale-up-placeholders"></a>', "",
        "## Scale-up placeholders", "",
        "The defaults of `wire.scaleup.ScaleUpConfig`: none of these EtherTypes, ports or "
        "protocol numbers is assigned, and ESUN has no next-header field, so each is an "
        f"assumption {ASSUMPTION_MARK} a user can change (`scaleup=` in the library, the "
        "`--esun-ethertype` ... options of `lossless`).", "",
        scaleup_table(), "",
    ]
    return "\n".join(out)


def generator_main(module: str, default_path: Path, render_text: Callable[[], str],
                   what: str, argv: Sequence[str] | None = None) -> int:
    """Command line of a generated file: print it, ``--write`` it, or ``--check`` that the
    committed copy is current (exit 1 if not).  Shared by docgen and wireshark_gen."""
    ap = argparse.ArgumentParser(prog=f"python -m {module}", description=f"Generate {what}.")
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", nargs="?", const=str(default_path), metavar="PATH",
                       help=f"write {what} (default {default_path})")
    group.add_argument("--check", nargs="?", const=str(default_path), metavar="PATH",
                       help=f"exit 1 if {what} differs from the generated one")
    args = ap.parse_args(argv)
    text = render_text()
    if args.write:
        Path(args.write).parent.mkdir(parents=True, exist_ok=True)
        Path(args.write).write_text(text, encoding="utf-8")
        return 0
    if args.check:
        p = Path(args.check)
        current = p.read_text(encoding="utf-8") if p.exists() else None
        if current != text:
            print(f"{p} is out of date: run python -m {module} --write", file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return generator_main("wire.docgen", DOC_PATH, render, "the header document", argv)


if __name__ == "__main__":
    raise SystemExit(main())

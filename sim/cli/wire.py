"""The ``wire`` commands of ``lossless``: decode, craft, stats, overhead (docs/reference/cli.md).

Exit codes (documented in docs/reference/cli.md):
  0  every record read and decoded cleanly
  1  some records have problems (listed in ``problems``), or some craft input lines were bad
  2  an input file could not be read (bad magic, truncated file...) or a usage error; the
     records read before the failure are still printed
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from sim.cli.argtypes import ETHERTYPE, UDP_PORT, csv_ints, finite_float, integer
from sim.cli.argtypes import err as _err
from wire.atomic import OutputError, atomic_file
from wire.errors import CaptureError, DecodeError
from wire.ib_stack import LINKTYPE_ETHERNET, dissect_record
from wire.overhead import MAX_DATA_BYTES, STACKS, table
from wire.pcapio import Block, CaptureReader, CaptureWriter, Record, is_classic_pcap
from wire.records import (
    int_strings,
    meta_from_dict,
    meta_to_dict,
    parse_line,
    pcap_header_to_dict,
    record_from_dict,
    record_to_dict,
)
from wire.scaleup import DEFAULT_SCALEUP, TRANSPORTS, ScaleUpConfig
from wire.stack import ROCE_PORTS, dissect
from wire.stats import (
    STATS_FIELDS,
    SUMMARY_FIELDS,
    CaptureStats,
    summary_columns,
    summary_line,
)

if TYPE_CHECKING:  # numpy (wire.batch) is imported only when a capture is read by columns
    from wire.batch import Columns

EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE = 0, 1, 2
#: Files smaller than this never show a progress bar.
_PROGRESS_MIN_BYTES = 8 << 20
#: Bytes a progress bar counts per record besides its data: a classic pcap record header
#: (draft-ietf-opsawg-pcap section 5; a pcapng block's is larger: the bar is an estimate).
_RECORD_HEAD_BYTES = 16


def _progress(path: str, total_bytes: int | None):
    """A tqdm bar on stderr for big files when stderr is a terminal; otherwise None."""
    if not sys.stderr.isatty() or not total_bytes or total_bytes < _PROGRESS_MIN_BYTES:
        return None
    from tqdm import tqdm

    return tqdm(total=total_bytes, unit="B", unit_scale=True, desc=os.path.basename(path),
                file=sys.stderr, leave=False)


@contextlib.contextmanager
def _capture_source(path: str, state: dict, before_err=None):
    """(source, progress bar or None) for a capture path ('-' = stdin).  A file-level error
    inside the block prints one line and sets state['status'] = EXIT_UNREADABLE (what was
    read before it stays counted).  ``before_err()`` is called before any line goes to
    stderr (a caller that batches its stdout writes flushes them, keeping the order)."""
    src = sys.stdin.buffer if path == "-" else path
    size = None
    if path != "-":
        with contextlib.suppress(OSError):
            size = os.path.getsize(path)
    bar = _progress(path, size)
    try:
        yield src, bar
    except CaptureError as e:
        if before_err is not None:
            before_err()
        _err(str(e))
        state["status"] = EXIT_UNREADABLE
    except OSError as e:
        if before_err is not None:
            before_err()
        _err(f"{path}: {e.strerror or e}")
        state["status"] = EXIT_UNREADABLE
    finally:
        if bar is not None:
            bar.close()


def _records(path: str, state: dict, *, meta: bool = False, before_err=None
             ) -> Iterator[tuple[int | None, Record | dict]]:
    """Yield (index, record) from a capture; on a file-level error print one line and set
    state['status'] = EXIT_UNREADABLE (the records before it were already yielded).
    ``meta=True`` also yields (None, format line) for the file's format (wire.records: a
    non-default pcap File Header; every pcapng SHB, IDB and other block, in file order).
    ``before_err``: see :func:`_capture_source`."""
    with _capture_source(path, state, before_err) as (src, bar), \
            CaptureReader(src, keep_blocks=meta) as reader:
        if meta:
            head = pcap_header_to_dict(reader)
            if head is not None:
                yield None, head
        i = 0
        for rec in reader:
            if type(rec) is Block:
                yield None, meta_to_dict(rec)
                continue
            if bar is not None:
                bar.update(len(rec.data) + _RECORD_HEAD_BYTES)
            yield i, rec
            i += 1
        warnings = getattr(reader, "warnings", [])
        if warnings and before_err is not None:
            before_err()
        for idx, msg in warnings:
            _err(f"{path}: record {idx}: {msg}")


def _column_chunks(path: str, state: dict, fields: Iterable[str], ports: frozenset[int],
                   sc: ScaleUpConfig, before_err=None) -> Iterator[Columns]:
    """The :func:`wire.batch.read_columns` chunks of a capture, with its progress bar; errors
    and warnings reported as :func:`_records` does (``before_err`` first: see
    :func:`_capture_source`)."""
    from wire.batch import read_columns

    warnings: list[tuple[int, str]] = []
    with _capture_source(path, state, before_err) as (src, bar):
        for cols in read_columns(src, fields=fields, roce_ports=ports, scaleup=sc,
                                 warnings=warnings):
            yield cols
            if bar is not None:
                bar.update(int(cols["caplen"].sum()) + _RECORD_HEAD_BYTES * cols.rows)
        if warnings and before_err is not None:
            before_err()
        for idx, msg in warnings:
            _err(f"{path}: record {idx}: {msg}")


def _ports(args: argparse.Namespace) -> frozenset[int]:
    return ROCE_PORTS | frozenset(args.roce_port or ())


_SCALEUP_OPTS = {  # option -> ScaleUpConfig field
    "esun_ethertype": "esun_ethertype", "sunh_ethertype": "sunh_ethertype",
    "afh_gen1_ethertype": "afh_gen1_ethertype", "sue_ethertype": "sue_ethertype",
    "sue_udp_port": "sue_udp_port", "esun_transport": "esun_transport",
    "afh_gen2_form": "afh_gen2_form", "txn_hdr_bytes": "txn_hdr_bytes",
}


def scaleup_config(args: argparse.Namespace) -> ScaleUpConfig:
    """The ScaleUpConfig the options ask for (ValueError with a clear message if invalid:
    ScaleUpConfig's checks, with its field names replaced by the options' names)."""
    changes = {f: getattr(args, o) for o, f in _SCALEUP_OPTS.items()
               if getattr(args, o, None) is not None}
    try:
        return DEFAULT_SCALEUP.with_(**changes) if changes else DEFAULT_SCALEUP
    except ValueError as e:
        msg = str(e)
        for opt, fld in _SCALEUP_OPTS.items():  # the options' names, not the fields'
            name = "--" + opt.replace("_", "-")
            msg = msg.replace(fld, name if fld in changes else f"{name}'s default")
        raise ValueError(msg) from None


#: Timestamps in ns: pcapng holds 64 bits of them (a classic pcap less; the writer checks).
_NS = integer(0, 2**64 - 1, name="ns")
#: A link rate in Gb/s: 1 b/s .. 1 Pb/s (rates are rounded to whole b/s).
_GBPS = finite_float(1e-9, 1e6, name="gbps")


# ---------------------------------------------------------------------- decode
#: Lines ``decode`` writes to stdout at once (one write call per batch, not per line: with
#: PYTHONUNBUFFERED or a pipe each write can be a system call); 1 on a terminal.
_DECODE_BATCH_LINES = 1024
#: ``decode``'s table of a classic pcap goes through the numpy batch reader (False: record by
#: record, as on a terminal; the tests compare the two).
_DECODE_COLUMNS = True


def cmd_decode(args: argparse.Namespace) -> int:
    state = {"status": EXIT_OK}
    ports = _ports(args)
    sc = args.scaleup
    out = sys.stdout
    problems = 0
    jsonl = args.format == "jsonl"
    verbose = args.verbose
    fix = int_strings if args.int_strings else (lambda o: o)
    dumps = json.dumps
    pending: list[str] = []
    write = out.write
    isatty = getattr(out, "isatty", None)
    batch = 1 if isatty is not None and isatty() else _DECODE_BATCH_LINES

    def flush() -> None:
        if pending:
            write("".join(pending))
            pending.clear()

    add = pending.append

    def table_line(i: int, rec: Record) -> int:
        """Add the summary line of record ``i`` (and with -v its problems); 1 if it has
        problems."""
        if rec.linktype == LINKTYPE_ETHERNET:  # dissect_record's first case, inline
            d = dissect(rec.data, rec.orig_len, roce_ports=ports, scaleup=sc)
        else:
            d = dissect_record(rec, roce_ports=ports, scaleup=sc)
        add(summary_line(i, rec.ts_ns, d, rec.orig_len) + "\n")
        if not d.problems:
            return 0
        if verbose:
            for p in d.problems:
                add(f"{'':>8}! {p}\n")
        return 1

    for path in args.files:
        if (not jsonl and batch > 1 and _DECODE_COLUMNS and path != "-"
                and is_classic_pcap(path)):
            problems += _decode_columns(path, state, ports, sc, table_line, add, flush)
            continue
        for i, rec in _records(path, state, meta=jsonl, before_err=flush):
            if i is None:  # a format line (jsonl only)
                add(dumps(fix(rec), separators=(",", ":")) + "\n")
            elif jsonl:
                obj = record_to_dict(i, rec, roce_ports=ports, scaleup=sc)
                if "problems" in obj:
                    problems += 1
                add(dumps(fix(obj), separators=(",", ":")) + "\n")
            else:
                problems += table_line(i, rec)
            if len(pending) >= batch:
                flush()
    flush()
    if state["status"] != EXIT_OK:
        return state["status"]
    return EXIT_PROBLEMS if problems else EXIT_OK


def _decode_columns(path: str, state: dict, ports: frozenset[int], sc: ScaleUpConfig,
                    table_line, add, flush) -> int:
    """``decode``'s table of one classic pcap through the numpy batch reader: the lines of
    clean RoCEv2 frames are made from the columns (``wire.stats.summary_columns``), every
    other record goes through ``table_line`` (dissect + summary_line) at its place; the
    same output as record by record.  Returns the number of records with problems."""
    import numpy as np

    problems = 0
    first = 0
    for cols in _column_chunks(path, state, SUMMARY_FIELDS, ports, sc, before_err=flush):
        rows, lines = summary_columns(cols, first, roce_ports=ports, scaleup=sc)
        slow = np.flatnonzero(np.isin(np.arange(cols.rows), rows, invert=True))
        at = np.searchsorted(rows, slow).tolist()
        ts, olen, lt = cols["ts_ns"], cols["orig_len"], cols["linktype"]
        done = 0
        for r, k in zip(slow.tolist(), at, strict=True):
            if k > done:
                add("\n".join(lines[done:k]) + "\n")
                done = k
            problems += table_line(first + r, Record(int(ts[r]), cols.frame(r),
                                                     int(olen[r]), int(lt[r])))
        if len(lines) > done:
            add("\n".join(lines[done:]) + "\n")
        flush()
        first += cols.rows
    return problems


# ----------------------------------------------------------------------- craft
#: A craft input line longer than this is refused (and skipped) without being held whole.
_MAX_LINE_BYTES = 64 << 20


class _AllBad(Exception):
    """Every input line was bad: nothing is written (the output file is left as it was)."""


def _input_lines(fin) -> Iterator[tuple[int, bytes | None]]:
    """(line number, line bytes) of a binary file; None for a line over _MAX_LINE_BYTES
    (skipped to its end in bounded reads)."""
    lineno = 0
    while True:
        line = fin.readline(_MAX_LINE_BYTES + 1)
        if not line:
            return
        lineno += 1
        if len(line) > _MAX_LINE_BYTES and not line.endswith(b"\n"):
            while True:
                more = fin.readline(_MAX_LINE_BYTES)
                if not more or more.endswith(b"\n"):
                    break
            yield lineno, None
            continue
        yield lineno, line


def _out_name(output: object) -> str:
    return output if isinstance(output, str) else "stdout"


class _Crafter:
    """Turns JSON Lines into records and format lines and writes them to ``fp``: the writer
    is made at the first format line or record (so its format follows the input's format
    lines unless --pcap/--pcapng say otherwise); every line is checked whole before anything
    of it is written, so a bad line is reported and skipped and the file stays valid."""

    def __init__(self, fp, args: argparse.Namespace, name: str) -> None:
        self.fp = fp
        self.args = args
        self.name = name
        self.ports = _ports(args)
        self.forced = "pcapng" if args.pcapng else "pcap" if args.pcap else None
        self.w: CaptureWriter | None = None
        self.pcap_kw: dict | None = None
        self.prev_ts: int | None = None
        self.written = 0
        self.bad = 0

    def bad_line(self, lineno: int, msg: str) -> None:
        _err(f"{self.name}:{lineno}: {msg}")
        self.bad += 1

    def line(self, lineno: int, raw: bytes | None) -> None:
        if raw is None:
            return self.bad_line(lineno, f"line longer than {_MAX_LINE_BYTES} bytes")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            return self.bad_line(lineno, f"not UTF-8: byte 0x{raw[e.start]:02x} at column "
                                         f"{e.start + 1}")
        if not text.strip():
            return None
        try:
            obj = parse_line(text)
        except json.JSONDecodeError as e:
            return self.bad_line(lineno, f"not JSON: {e.msg} at column {e.colno}")
        except RecursionError:
            return self.bad_line(lineno, "not JSON: nested too deeply")
        except ValueError as e:  # an integer literal of over 4300 digits
            return self.bad_line(lineno, f"not JSON: {e}")
        try:
            self.item(obj)
        except (DecodeError, ValueError, TypeError, OverflowError) as e:
            return self.bad_line(lineno, str(e))
        except RecursionError:
            return self.bad_line(lineno, "nested too deeply")
        return None

    def item(self, obj: object) -> None:
        if not isinstance(obj, dict):
            raise DecodeError(f"a line must be a JSON object, got {type(obj).__name__}")
        w = self.w
        meta = meta_from_dict(obj, w.byte_order if w is not None else "little")
        if meta is None:
            rec = record_from_dict(obj, self.prev_ts, recompute=self.args.recompute,
                                   roce_ports=self.ports, scaleup=self.args.scaleup)
            if w is None:
                if self.forced == "pcapng":
                    w = CaptureWriter(self.fp, format="pcapng")
                else:
                    w = CaptureWriter(self.fp, format="pcap", linktype=rec.linktype)
                self.w = w
            if not w.blocks and rec.options:  # EPB options go only where the EPBs are kept
                rec = dataclasses.replace(rec, options=b"")
            w.write(rec)
            self.prev_ts = rec.ts_ns
            self.written += 1
            return
        if isinstance(meta, tuple):  # a classic pcap File Header
            kw = meta[1]
            if self.forced == "pcapng":
                return  # told otherwise: the header is not used
            if w is None:
                self.w = CaptureWriter(self.fp, format="pcap", **kw)
                self.pcap_kw = kw
            elif kw != self.pcap_kw:
                raise DecodeError("a second, different pcap File Header: one output file has "
                                  "one header (this one is ignored)", layer="pcap")
            return
        if self.forced == "pcap":
            return  # told otherwise: pcapng blocks have no place in a classic pcap
        if w is None:
            if meta.type != 0x0A0D0D0A:
                raise DecodeError("a pcapng block before any Section Header Block (pcapng_shb)",
                                  layer="pcapng_block")
            w = self.w = CaptureWriter(self.fp, format="pcapng", blocks=True,
                                       byte_order=meta.byte_order)
        elif not w.blocks:
            raise DecodeError(f"pcapng block after the records of a {w.format} file of "
                              "craft's own format: ignored (put the format lines first)",
                              layer=next(iter(obj)))
        try:
            w.write_block(meta)
        except ValueError as e:
            raise DecodeError(str(e), layer=next(iter(obj))) from None

    def finish(self) -> None:
        if self.w is None:
            if self.bad:
                raise _AllBad
            self.w = CaptureWriter(self.fp, format=self.forced or "pcap")
        self.w.close()


def cmd_craft(args: argparse.Namespace) -> int:
    if args.flow is not None:
        return _craft_flow(args)
    if args.count is not None or args.vary or args.gap_ns is not None or args.rate_gbps:
        _err("--count, --vary, --gap-ns and --rate-gbps go with --flow")
        return EXIT_UNREADABLE
    name = args.input or "-"
    out = _out_name(args.output)
    try:
        fin = sys.stdin.buffer if name == "-" else open(name, "rb")
    except OSError as e:
        _err(f"{name}: {e.strerror or e}")
        return EXIT_UNREADABLE
    try:
        with fin:
            lines = _input_lines(fin)
            first = next(lines, None)
            if first is not None and first[1] is not None and b"\0" in first[1]:
                _err(f"{name}: not JSON Lines (binary data on line 1); {out} left as it was")
                return EXIT_UNREADABLE
            dest = (atomic_file(args.output, "wb") if isinstance(args.output, str)
                    else contextlib.nullcontext(args.output))
            with dest as fp:
                c = _Crafter(fp, args, name)
                if first is not None:
                    c.line(*first)
                for lineno, raw in lines:
                    c.line(lineno, raw)
                c.finish()
    except _AllBad:
        _err(f"{out}: nothing written: all {c.bad} input line(s) were bad; {out} left as it "
             "was")
        return EXIT_UNREADABLE
    except OutputError as e:
        _err(str(e))
        return EXIT_UNREADABLE
    except OSError as e:
        _err(f"{getattr(e, 'filename', None) or out}: {e.strerror or e}")
        return EXIT_UNREADABLE
    if not args.quiet:
        _err(f"wrote {c.written} record(s) to {out}"
             + (f"; skipped {c.bad} bad line(s)" if c.bad else ""))
    return EXIT_PROBLEMS if c.bad else EXIT_OK


def _craft_flow(args: argparse.Namespace) -> int:
    """``craft --flow LAYERS --count N``: a templated RoCEv2 flow (wire.template)."""
    from sim.units import wire_bytes
    from wire.template import RoceTemplate

    text = args.flow
    src = "--flow"
    if text.startswith("@"):
        src = text[1:]
        try:
            with open(src, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            _err(f"{src}: {e.strerror or e}")
            return EXIT_UNREADABLE
    try:
        layers = json.loads(text)
        if not isinstance(layers, dict):
            raise ValueError("expected a JSON object of layers")
    except (json.JSONDecodeError, ValueError) as e:
        _err(f"{src}: not a JSON object of layers: {e}")
        return EXIT_UNREADABLE
    if args.count is None or args.count < 0:
        _err("--flow needs --count N (N >= 0)")
        return EXIT_UNREADABLE
    if args.input is not None:
        _err("give either INPUT (JSON Lines) or --flow, not both")
        return EXIT_UNREADABLE
    try:
        t = RoceTemplate(layers, patch=tuple(args.vary or ("bth.psn",)))
    except (DecodeError, ValueError, KeyError) as e:
        _err(f"{src}: {e}")
        return EXIT_UNREADABLE
    n = args.count
    start = args.start_ns
    if args.rate_gbps:
        # one frame per wire time (FCS, preamble/SFD, IFG) at the rate: exact ps, floored to ns
        bits = wire_bytes(t.size_bytes) * 8
        rate_bps = round(args.rate_gbps * 10**9)
        stamps = (start + i * bits * 10**9 // rate_bps for i in range(n))
    else:
        gap = args.gap_ns or 0
        stamps = range(start, start + n * gap, gap) if gap else (start for _ in range(n))
    fmt = "pcapng" if args.pcapng else "pcap"
    out = _out_name(args.output)
    dest = (atomic_file(args.output, "wb") if isinstance(args.output, str)
            else contextlib.nullcontext(args.output))
    try:
        with dest as fp, CaptureWriter(fp, format=fmt) as w:
            written = w.write_frames(t.stamp(n), stamps)
    except OutputError as e:
        _err(str(e))
        return EXIT_UNREADABLE
    except OSError as e:
        _err(f"{out}: {e.strerror or e}")
        return EXIT_UNREADABLE
    except ValueError as e:
        _err(f"{out}: {e}" + ("; nothing written" if isinstance(args.output, str) else ""))
        return EXIT_UNREADABLE
    if not args.quiet:
        _err(f"wrote {written} record(s) to {out}")
    return EXIT_OK


# ----------------------------------------------------------------------- stats
def cmd_stats(args: argparse.Namespace) -> int:
    state = {"status": EXIT_OK}
    ports = _ports(args)
    st = CaptureStats(link_bps=round(args.link_gbps * 10**9))  # >= 1: sim.cli.argtypes
    for path in args.files:
        _stats_file(path, st, ports, args.scaleup, state)
    if args.json:
        print(json.dumps(st.to_dict(), indent=2))
    else:
        print(st.format_text())
    if state["status"] != EXIT_OK:
        return state["status"]
    return EXIT_PROBLEMS if st.exit_problems else EXIT_OK


def _stats_file(path: str, st: CaptureStats, ports: frozenset[int], sc: ScaleUpConfig,
                state: dict) -> None:
    """One capture into ``st`` through the numpy batch decoder (wire.batch): well-formed
    RoCEv2 and PFC/PAUSE frames are counted from columns, every other frame is dissected
    (CaptureStats.add_columns).  Errors and warnings are reported as ``_records`` does."""
    for cols in _column_chunks(path, state, STATS_FIELDS, ports, sc):
        st.add_columns(cols, roce_ports=ports, scaleup=sc)


# -------------------------------------------------------------------- overhead
def cmd_overhead(args: argparse.Namespace) -> int:
    stacks = args.stack or list(STACKS)
    unknown = [s for s in stacks if s not in STACKS]
    if unknown:
        _err(f"unknown stack(s) {unknown}; known: {', '.join(STACKS)}")
        return EXIT_UNREADABLE
    rows = table(args.txn_bytes, args.per_frame, stacks, args.scaleup)
    for t in args.txn_bytes:
        for k in args.per_frame:
            cells = [r for r in rows if r.txn_bytes == t and r.per_frame == k]
            if all(r.goodput_pct is None for r in cells):
                _err(f"--txn-bytes/--per-frame: {t}x{k}: no stack given carries it in one frame "
                     f"({cells[0].reason})")
                return EXIT_UNREADABLE
    if args.json:
        print(json.dumps({"txn_hdr_bytes": args.scaleup.txn_hdr_bytes,
                          "rows": [dataclasses.asdict(r) for r in rows]},
                         indent=2))
        return EXIT_OK
    cols = [(t, k) for t in args.txn_bytes for k in args.per_frame]
    print(f"Goodput as % of line rate: k transactions of T bytes per frame (T x k); on the "
          f"SUE stacks each carries its {args.scaleup.txn_hdr_bytes}-byte descriptor [A];")
    print("counted on frames built by the codecs + FCS 4, 64-byte minimum, preamble/SFD 8, "
          "IFG 12.")
    head = "  ".join(f"{f'{t}x{k}':>7}" for t, k in cols)
    print(f"{'stack':<14} {'hdr B':>5}  {head}")
    by = {(r.stack, r.txn_bytes, r.per_frame): r for r in rows}
    for s in stacks:
        one = by[(s, cols[0][0], cols[0][1])]
        hdr = "" if one.overhead_bytes is None else str(
            one.wire_bytes - one.txn_bytes * one.per_frame
            - (0 if s == "roce_v2" else one.per_frame * args.scaleup.txn_hdr_bytes))
        cells = "  ".join(
            f"{'n/a':>7}" if by[(s, t, k)].goodput_pct is None else
            f"{by[(s, t, k)].goodput_pct:>7.1f}" for t, k in cols)
        print(f"{s:<14} {hdr:>5}  {cells}")
    print()
    for s in stacks:
        print(f"  {s:<14} {STACKS[s][0]}")
    print("  hdr B: bytes on the wire per frame besides the data and descriptors, for the "
          "first column (includes minimum-frame padding)")
    na: dict[tuple[int, int, str], list[str]] = {}
    for r in rows:
        if r.goodput_pct is None:
            na.setdefault((r.txn_bytes, r.per_frame, r.reason), []).append(r.stack)
    for (t, k, why), names in sorted(na.items(), key=lambda x: cols.index(x[0][:2])):
        print(f"  n/a {t}x{k}: {why} ({', '.join(names)})")
    return EXIT_OK


#: --txn-bytes / --per-frame: no stack carries more than MAX_DATA_BYTES of data per frame,
#: so a larger size or count is refused at once (and a list of more than 64 values).
_TXN_LIST = csv_ints(1, MAX_DATA_BYTES, name="sizes")


def add_parsers(sub: argparse._SubParsersAction) -> None:
    """The decode, craft, stats and overhead subcommands."""
    def scaleup_opts(sp: argparse.ArgumentParser) -> None:
        g = sp.add_argument_group(
            "scale-up headers",
            "placeholder values [A] (docs/explanation/scaleup.md); defaults in brackets")
        d0 = DEFAULT_SCALEUP
        for opt, what in (("esun-ethertype", "ESUN EH EtherType"),
                          ("sunh-ethertype", "SUNH EtherType"),
                          ("afh-gen1-ethertype", "AFH Gen1 shim EtherType"),
                          ("sue-ethertype", "SUE transport EtherType (AFH Gen2, after AFH Gen1)"),
                          ("sue-udp-port", "UDP destination port of SUE over IP")):
            default = getattr(d0, opt.replace("-", "_"))
            g.add_argument(f"--{opt}", type=UDP_PORT if "port" in opt else ETHERTYPE,
                           metavar="N",
                           help=f"{what} [0x{default:04x}]")
        g.add_argument("--esun-transport", choices=TRANSPORTS,
                       help=f"what follows the ESUN EH [{d0.esun_transport}]")
        g.add_argument("--afh-gen2-form", choices=("12", "6"),
                       help=f"AFH Gen2 address form on the SUE EtherType [{d0.afh_gen2_form}]")
        g.add_argument("--txn-hdr-bytes", type=integer(8, 16), choices=(8, 16),
                       help=f"SUE transaction descriptor size [{d0.txn_hdr_bytes}]")

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--roce-port", type=UDP_PORT, action="append", metavar="PORT",
                        help="extra UDP destination port to decode as RoCEv2 (repeatable; "
                             "4791 always)")
        scaleup_opts(sp)

    d = sub.add_parser("decode", help="decode pcap/pcapng files",
                       description="Decode every record of pcap/pcapng files (format detected "
                                   "by magic number). '-' reads stdin.")
    d.add_argument("files", nargs="+", metavar="FILE")
    d.add_argument("-f", "--format", choices=("table", "jsonl"), default="table",
                   help="table: one line per packet; jsonl: one JSON object per record "
                        "(docs/reference/jsonl.md)")
    d.add_argument("-v", "--verbose", action="store_true",
                   help="table: print each record's problems under it")
    d.add_argument("--int-strings", action="store_true",
                   help="jsonl: write integers beyond 2**53 (ts_ns, 64-bit fields) as decimal "
                        "strings, which craft reads back; for jq 1.6 and other tools that "
                        "read numbers as doubles")
    common(d)
    d.set_defaults(func=cmd_decode)

    c = sub.add_parser("craft", help="build a pcap from JSON Lines, or a templated RoCEv2 flow",
                       description="Build a capture from JSON Lines in the decode schema. "
                                   "Omitted fields take defaults; lengths, checksums, PadCnt and "
                                   "the ICRC are computed unless given.  With --flow and "
                                   "--count, stamp out one RoCEv2 frame N times instead "
                                   "(docs/reference/craft.md).")
    c.add_argument("input", nargs="?", metavar="INPUT", help="JSON Lines file (default stdin)")
    c.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="output capture file ('-' for stdout)")
    fmt = c.add_mutually_exclusive_group()
    fmt.add_argument("--pcapng", action="store_true",
                     help="write pcapng (ns), whatever format lines the input has; its pcapng "
                          "blocks are kept")
    fmt.add_argument("--pcap", action="store_true",
                     help="write a classic pcap, whatever format lines the input has (default: "
                          "the input's format lines say, else a ns pcap)")
    c.add_argument("--recompute", action="store_true",
                   help="ignore given lengths, checksums, PadCnt and ICRC and compute them "
                        "(after editing decoded records)")
    c.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    f = c.add_argument_group("templated flow (fast, RoCEv2 only)")
    f.add_argument("--flow", metavar="JSON|@FILE",
                   help="one frame's layers as a JSON object (the decode schema); with "
                        "--count, writes N copies with --vary fields counting up")
    f.add_argument("--count", type=integer(0), metavar="N", help="frames to write")
    f.add_argument("--vary", action="append", metavar="LAYER.FIELD",
                   help="field that counts up by one per frame (default bth.psn; repeatable)")
    g = f.add_mutually_exclusive_group()
    g.add_argument("--gap-ns", type=_NS, metavar="NS", help="time between frames")
    g.add_argument("--rate-gbps", type=_GBPS, metavar="R",
                   help="space frames back to back at this line rate (wire size: FCS, "
                        "preamble, IFG)")
    f.add_argument("--start-ns", type=_NS, default=0, metavar="NS",
                   help="timestamp of the first frame")
    common(c)
    c.set_defaults(func=cmd_craft)

    s = sub.add_parser("stats", help="per-flow, ECN, CNP and PFC statistics",
                       description="Per-QP flows, opcode mix, ECN codepoints and CE fraction, "
                                   "CNPs per QP, PFC/PAUSE frames per priority with paused time "
                                   "at the link rate, ICRC failures.")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--link-gbps", type=_GBPS, default=100.0,
                   help="link rate for converting pause quanta to time (default 100)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    common(s)
    s.set_defaults(func=cmd_stats)

    o = sub.add_parser("overhead", help="header overhead and goodput of each header stack",
                       description="Goodput as a percentage of line rate for each header stack, "
                                   "counted on frames built by the codecs (FCS, 64-byte minimum, "
                                   "preamble and IFG included).")
    o.add_argument("--txn-bytes", type=_TXN_LIST, default=[64, 128, 256], metavar="T,...",
                   help="transaction sizes in bytes (default 64,128,256)")
    o.add_argument("--per-frame", type=_TXN_LIST, default=[1, 4, 16], metavar="K,...",
                   help="transactions per frame (default 1,4,16)")
    o.add_argument("--stack", action="append", metavar="NAME",
                   help=f"only these stacks (repeatable): {', '.join(STACKS)}")
    o.add_argument("--json", action="store_true", help="machine-readable output")
    scaleup_opts(o)
    o.set_defaults(func=cmd_overhead)

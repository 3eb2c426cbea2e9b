"""The ``lossless`` command line (also ``python -m sim``).

Exit codes (documented in docs/cli.md):
  0  every record read and decoded cleanly
  1  some records have problems (listed in ``problems``), or some craft input lines were bad
  2  an input file could not be read (bad magic, truncated file...) or a usage error; the
     records read before the failure are still printed
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from collections.abc import Iterator

from wire.errors import CaptureError, DecodeError
from wire.pcapio import CaptureReader, CaptureWriter, Record
from wire.records import record_from_dict, record_to_dict
from wire.stack import ROCE_PORTS, dissect
from wire.stats import CaptureStats, summary_line

EXIT_OK, EXIT_PROBLEMS, EXIT_UNREADABLE = 0, 1, 2
#: Files smaller than this never show a progress bar.
_PROGRESS_MIN_BYTES = 8 << 20


def _err(msg: str) -> None:
    print(f"lossless: {msg}", file=sys.stderr)


def _progress(path: str, total_bytes: int | None):
    """A tqdm bar on stderr for big files when stderr is a terminal; otherwise None."""
    if not sys.stderr.isatty() or not total_bytes or total_bytes < _PROGRESS_MIN_BYTES:
        return None
    from tqdm import tqdm

    return tqdm(total=total_bytes, unit="B", unit_scale=True, desc=os.path.basename(path),
                file=sys.stderr, leave=False)


def _records(path: str, state: dict) -> Iterator[tuple[int, Record]]:
    """Yield (index, record) from a capture; on a file-level error print one line and set
    state['status'] = EXIT_UNREADABLE (the records before it were already yielded)."""
    src = sys.stdin.buffer if path == "-" else path
    size = None
    if path != "-":
        with contextlib.suppress(OSError):
            size = os.path.getsize(path)
    bar = _progress(path, size)
    try:
        with CaptureReader(src) as reader:
            for i, rec in enumerate(reader):
                if bar is not None:
                    bar.update(len(rec.data) + 16)
                yield i, rec
            for idx, msg in getattr(reader, "warnings", []):
                _err(f"{path}: record {idx}: {msg}")
    except CaptureError as e:
        _err(str(e))
        state["status"] = EXIT_UNREADABLE
    except OSError as e:
        _err(f"{path}: {e.strerror or e}")
        state["status"] = EXIT_UNREADABLE
    finally:
        if bar is not None:
            bar.close()


def _ports(args: argparse.Namespace) -> frozenset[int]:
    return ROCE_PORTS | frozenset(args.roce_port or ())


# ---------------------------------------------------------------------- decode
def cmd_decode(args: argparse.Namespace) -> int:
    state = {"status": EXIT_OK}
    ports = _ports(args)
    out = sys.stdout
    problems = 0
    for path in args.files:
        for i, rec in _records(path, state):
            if args.format == "jsonl":
                obj = record_to_dict(i, rec, roce_ports=ports)
                if "problems" in obj:
                    problems += 1
                out.write(json.dumps(obj, separators=(",", ":")) + "\n")
            else:
                if rec.linktype != 1:
                    out.write(f"{i:>7} linktype {rec.linktype} not decoded\n")
                    problems += 1
                    continue
                d = dissect(rec.data, rec.orig_len, roce_ports=ports)
                if d.problems:
                    problems += 1
                out.write(summary_line(i, rec.ts_ns, d, rec.orig_len) + "\n")
                if args.verbose:
                    for p in d.problems:
                        out.write(f"{'':>8}! {p}\n")
    if state["status"] != EXIT_OK:
        return state["status"]
    return EXIT_PROBLEMS if problems else EXIT_OK


# ----------------------------------------------------------------------- craft
def cmd_craft(args: argparse.Namespace) -> int:
    ports = _ports(args)
    name = args.input or "-"
    try:
        fin = sys.stdin if name == "-" else open(name, encoding="utf-8")
    except OSError as e:
        _err(f"{name}: {e.strerror or e}")
        return EXIT_UNREADABLE
    bad = 0
    written = 0
    prev_ts: int | None = None
    fmt = "pcapng" if args.pcapng else "pcap"
    try:
        with fin, CaptureWriter(args.output, format=fmt) as w:
            for lineno, line in enumerate(fin, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                    rec = record_from_dict(obj, prev_ts, recompute=args.recompute,
                                           roce_ports=ports)
                except json.JSONDecodeError as e:
                    _err(f"{name}:{lineno}: not JSON: {e.msg} at column {e.colno}")
                    bad += 1
                    continue
                except (DecodeError, ValueError) as e:
                    _err(f"{name}:{lineno}: {e}")
                    bad += 1
                    continue
                prev_ts = rec.ts_ns
                w.write(rec)
                written += 1
    except OSError as e:
        _err(f"{args.output}: {e.strerror or e}")
        return EXIT_UNREADABLE
    if not args.quiet:
        _err(f"wrote {written} record(s) to {args.output}"
             + (f"; skipped {bad} bad line(s)" if bad else ""))
    return EXIT_PROBLEMS if bad else EXIT_OK


# ----------------------------------------------------------------------- stats
def cmd_stats(args: argparse.Namespace) -> int:
    state = {"status": EXIT_OK}
    ports = _ports(args)
    link_bps = round(args.link_gbps * 10**9)
    if link_bps <= 0:
        _err("--link-gbps must be positive")
        return EXIT_UNREADABLE
    st = CaptureStats(link_bps=link_bps)
    for path in args.files:
        for _i, rec in _records(path, state):
            if rec.linktype != 1:
                continue
            st.add(rec.ts_ns, rec.orig_len, dissect(rec.data, rec.orig_len, roce_ports=ports))
    if args.json:
        print(json.dumps(st.to_dict(), indent=2))
    else:
        print(st.format_text())
    return state["status"]


# ------------------------------------------------------------------------ main
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lossless",
        description="Read, write and reason about RoCEv2, PFC, ECN and scale-up Ethernet "
                    "traffic.",
        epilog="Exit codes: 0 clean, 1 records with problems, 2 unreadable input or usage "
               "error. See docs/cli.md.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    def common(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--roce-port", type=int, action="append", metavar="PORT",
                        help="extra UDP destination port to decode as RoCEv2 (repeatable; "
                             "4791 always)")

    d = sub.add_parser("decode", help="decode pcap/pcapng files",
                       description="Decode every record of pcap/pcapng files (format detected "
                                   "by magic number). '-' reads stdin.")
    d.add_argument("files", nargs="+", metavar="FILE")
    d.add_argument("-f", "--format", choices=("table", "jsonl"), default="table",
                   help="table: one line per packet; jsonl: one JSON object per record "
                        "(docs/schema.md)")
    d.add_argument("-v", "--verbose", action="store_true",
                   help="table: print each record's problems under it")
    common(d)
    d.set_defaults(func=cmd_decode)

    c = sub.add_parser("craft", help="build a pcap from JSON Lines",
                       description="Build a capture from JSON Lines in the decode schema. "
                                   "Omitted fields take defaults; lengths, checksums, PadCnt and "
                                   "the ICRC are computed unless given.")
    c.add_argument("input", nargs="?", metavar="INPUT", help="JSON Lines file (default stdin)")
    c.add_argument("-o", "--output", required=True, metavar="OUT",
                   help="output capture file ('-' for stdout)")
    c.add_argument("--pcapng", action="store_true", help="write pcapng instead of pcap (ns)")
    c.add_argument("--recompute", action="store_true",
                   help="ignore given lengths, checksums, PadCnt and ICRC and compute them "
                        "(after editing decoded records)")
    c.add_argument("-q", "--quiet", action="store_true", help="no summary line on stderr")
    common(c)
    c.set_defaults(func=cmd_craft)

    s = sub.add_parser("stats", help="per-flow, ECN, CNP and PFC statistics",
                       description="Per-QP flows, opcode mix, ECN codepoints and CE fraction, "
                                   "CNPs per QP, PFC/PAUSE frames per priority with paused time "
                                   "at the link rate, ICRC failures.")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument("--link-gbps", type=float, default=100.0,
                   help="link rate for converting pause quanta to time (default 100)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    common(s)
    s.set_defaults(func=cmd_stats)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "output", None) == "-":
        args.output = sys.stdout.buffer
    try:
        return args.func(args)
    except BrokenPipeError:
        # Output closed early (e.g. piped into head): not an error of ours.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")
        return EXIT_OK
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""Streaming reader and writer for classic pcap and pcapng capture files.

Formats and the sources this module follows:

* classic pcap, "the libpcap file format", as written down in
  draft-ietf-opsawg-pcap (PCAP Capture File Format): section 4 (File Header,
  24 bytes: magic, version 2.4, two reserved words, SnapLen, LinkType) and
  section 5 (Packet Record: 16-byte header of seconds, fraction, captured
  length ``incl_len`` and original length ``orig_len``, then the data).  The
  magic 0xA1B2C3D4 means microsecond fractions, 0xA1B23C4D nanosecond
  fractions; either may appear in either byte order, which gives the byte
  order of every other field.
* pcapng, draft-ietf-opsawg-pcapng (PCAP Next Generation Capture File
  Format): section 3.1 (general block structure: type, total length, body
  padded to 32 bits, trailing copy of the total length), 3.5 (options),
  4.1 (Section Header Block, SHB), 4.2 (Interface Description Block, IDB,
  with the ``if_tsresol`` and ``if_tsoffset`` options), 4.3 (Enhanced Packet
  Block, EPB), 4.4 (Simple Packet Block, SPB), 4.5-4.8 (Name Resolution,
  Interface Statistics, Decryption Secrets and Custom Blocks, all skipped
  here) and Appendix A (the obsolete Packet Block, read like an EPB).

The format is detected from the magic number only, never from the file name.

Timestamps are integer nanoseconds since the Unix epoch everywhere, never
floats.  Conversion from pcapng units (``if_tsresol``, default 10**-6 s):

* a base-10 resolution 10**-k with k <= 9 is multiplied exactly by
  10**(9-k);
* a base-10 resolution finer than 1 ns (k > 9) cannot be represented in
  integer nanoseconds and is floor-divided: ``ts // 10**(k-9)``;
* a base-2 resolution 2**-n is converted as ``floor(ts * 10**9 / 2**n)``,
  computed exactly in integers as ``(ts * 10**9) >> n``.

``if_tsoffset`` (seconds, signed 64-bit) is added as ``if_tsoffset * 10**9``.

Reading streams records with constant memory: record headers and bodies are
read incrementally from a buffered binary file (never the whole file, never
mmap), so non-seekable streams such as ``sys.stdin.buffer`` or a pipe work.

Bad input never surfaces as anything but a :class:`~wire.errors.CaptureError`
(``BadMagic``, ``TruncatedFile`` or the base class), and never hides the good
records before the fault: iteration yields every good record, then raises an
error naming the path, the 0-based index of the record that failed (for
pcapng: the number of records yielded so far, i.e. the index the next record
would have had), the byte offset of the start of the record or block at
fault (of the field, for the file header) and the field name.  Errors in the
file header (the pcap File Header, or the first SHB of a pcapng file) are
raised by the :class:`CaptureReader` constructor, with ``record=None``; all
others during iteration.  See :class:`CaptureReader` for the list.
"""

from __future__ import annotations

import itertools
import os
import stat
import struct
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass, fields
from typing import Any, BinaryIO

from .errors import BadMagic, BadValue, CaptureError, TruncatedFile

__all__ = ["Record", "Block", "CaptureReader", "CaptureWriter", "is_classic_pcap", "read",
           "write"]

_NS_PER_S = 1_000_000_000
_US_PER_S = 1_000_000
#: Records longer than max(snaplen, this) are treated as corrupt (libpcap
#: and Wireshark use the same 256 KiB ceiling for ordinary link types).
_DEFAULT_MAX_SNAPLEN = 262_144
#: Reading unwanted bytes (skipped blocks, big options) goes in chunks this big.
_SKIP_CHUNK = 1 << 16
#: The reader keeps at most this many warnings (constant memory).
_MAX_WARNINGS = 1000
_PCAP_TS_LIMIT_NS = (0xFFFFFFFF + 1) * 1_000_000_000  # 32-bit seconds
_U32_MAX = 0xFFFF_FFFF
_U64_MAX = 0xFFFF_FFFF_FFFF_FFFF

# --- classic pcap (draft-ietf-opsawg-pcap sections 4 and 5) -------------------
_PCAP_MAGIC_US = 0xA1B2C3D4
_PCAP_MAGIC_NS = 0xA1B23C4D
# magic bytes as found at offset 0 -> (byte order, ns per fraction unit)
_PCAP_MAGICS = {
    b"\xd4\xc3\xb2\xa1": ("<", 1000),
    b"\xa1\xb2\xc3\xd4": (">", 1000),
    b"\x4d\x3c\xb2\xa1": ("<", 1),
    b"\xa1\xb2\x3c\x4d": (">", 1),
}


def is_classic_pcap(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a regular file that starts with a classic pcap magic number
    (either byte order, micro- or nanosecond); False for pcapng, anything else, an
    unreadable path (reading it then reports why) and a pipe or device, which is not
    opened (its first bytes would be gone for the reader)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as fp:
            return fp.read(4) in _PCAP_MAGICS
    except OSError:
        return False


_PCAP_KUZNETZOV = (b"\x34\xcd\xb2\xa1", b"\xa1\xb2\xcd\x34")
_PCAP_FILE_HEADER = {e: struct.Struct(e + "HHiIII") for e in "<>"}  # after the magic
_PCAP_RECORD_HEADER = {e: struct.Struct(e + "IIII") for e in "<>"}
# (end offset, field name) of each file-header field, to name the one a cut hits
_PCAP_FILE_LAYOUT = ((4, "magic"), (6, "version_major"), (8, "version_minor"),
                     (12, "thiszone"), (16, "sigfigs"), (20, "snaplen"), (24, "linktype"))

# --- pcapng (draft-ietf-opsawg-pcapng) ------------------------------------------
_BT_SHB = 0x0A0D0D0A          # section 4.1
_BT_IDB = 0x00000001          # section 4.2
_BT_PB = 0x00000002           # Appendix A (obsolete Packet Block)
_BT_SPB = 0x00000003          # section 4.4
_BT_EPB = 0x00000006          # section 4.3
_SHB_MAGIC = b"\x0a\x0d\x0d\x0a"
_BOM_LE = b"\x4d\x3c\x2b\x1a"  # byte-order magic 0x1A2B3C4D written little-endian
_BOM_BE = b"\x1a\x2b\x3c\x4d"
_OPT_ENDOFOPT = 0
_OPT_IF_TSRESOL = 9
_OPT_IF_TSOFFSET = 14
_U32 = {e: struct.Struct(e + "I") for e in "<>"}
_BLOCK_HEADER = {e: struct.Struct(e + "II") for e in "<>"}
_SHB_FIXED = {e: struct.Struct(e + "HHq") for e in "<>"}  # major, minor, section length
_IDB_FIXED = {e: struct.Struct(e + "HHI") for e in "<>"}  # linktype, reserved, snaplen
_OPT_HEADER = {e: struct.Struct(e + "HH") for e in "<>"}
_I64 = {e: struct.Struct(e + "q") for e in "<>"}
# interface id, timestamp high, timestamp low, captured length, original length
_EPB_FIXED = {e: struct.Struct(e + "IIIII") for e in "<>"}
_PB_FIXED = {e: struct.Struct(e + "H2xIIII") for e in "<>"}  # drops_count skipped
# Field layouts relative to the byte after the block type (offset 4 of a block).
_SHB_LAYOUT = ((4, "block_total_length"), (8, "byte_order_magic"), (10, "major_version"),
               (12, "minor_version"), (20, "section_length"))
_IDB_LAYOUT = ((4, "block_total_length"), (6, "linktype"), (8, "reserved"), (12, "snaplen"))
_EPB_LAYOUT = ((4, "block_total_length"), (8, "interface_id"), (12, "timestamp_high"),
               (16, "timestamp_low"), (20, "captured_len"), (24, "orig_len"))
_PB_LAYOUT = ((4, "block_total_length"), (6, "interface_id"), (8, "drops_count"),
              (12, "timestamp_high"), (16, "timestamp_low"), (20, "captured_len"),
              (24, "orig_len"))
_SPB_LAYOUT = ((4, "block_total_length"), (8, "orig_len"))

_EOF = object()  # sentinel returned by CaptureReader._next_block at a clean end


def _field_at(layout: tuple[tuple[int, str], ...], got: int) -> str:
    """Name of the first field of ``layout`` not wholly inside the first ``got`` bytes."""
    for end, name in layout:
        if got < end:
            return name
    return layout[-1][1]


def _pad4(n: int) -> int:
    return (n + 3) & ~3


@dataclass(slots=True, frozen=True)
class Record:
    """One captured packet.

    ``ts_ns`` is integer nanoseconds since the Unix epoch, ``data`` the
    captured bytes, ``orig_len`` the packet's length on the wire, ``linktype``
    a LINKTYPE_* value (1 = Ethernet) and ``interface`` the pcapng interface
    id within its section (0 for classic pcap).
    """

    ts_ns: int
    data: bytes
    orig_len: int
    linktype: int = 1
    interface: int = 0
    #: pcapng only: the raw options area of the Enhanced Packet Block (after the padded
    #: data, before the trailing length; file byte order), kept by a reader made with
    #: ``keep_blocks=True`` and written back by :class:`CaptureWriter`.
    options: bytes = b""


def _record_maker():
    """``make(ts_ns, data, orig_len, linktype, interface, options=b"")`` -> :class:`Record`,
    what ``Record(...)`` gives, without the frozen dataclass's ``__init__`` (a Python frame and
    six ``object.__setattr__`` lookups): the slots' own setters, for readers' hot loops."""
    new = object.__new__
    s_ts, s_data, s_orig, s_lt, s_if, s_opt = (
        getattr(Record, f.name).__set__ for f in fields(Record))

    def make(ts_ns: int, data: bytes, orig_len: int, linktype: int, interface: int,
             options: bytes = b"") -> Record:
        r = new(Record)
        s_ts(r, ts_ns)
        s_data(r, data)
        s_orig(r, orig_len)
        s_lt(r, linktype)
        s_if(r, interface)
        s_opt(r, options)
        return r
    return make


_make_record = _record_maker()


@dataclass(slots=True, frozen=True)
class Block:
    """A pcapng block that is not a packet: a Section Header Block (``type`` 0x0A0D0D0A),
    an Interface Description Block (1), or any other (Name Resolution 4, Interface
    Statistics 5, Decryption Secrets 10, Custom 0xBAD/0x40000BAD, unknown...).

    ``body`` is every byte between the block total length and its trailing copy, in the
    byte order of its section (``byte_order``, "little" or "big"): for an SHB the byte-order
    magic, version, section length and options; for an IDB the linktype, reserved field,
    snaplen and options (draft-ietf-opsawg-pcapng sections 3.1, 4.1, 4.2).  A reader made
    with ``keep_blocks=True`` yields them in file order between the records, and
    :meth:`CaptureWriter.write_block` writes them back unchanged.
    """

    type: int
    body: bytes
    byte_order: str = "little"


def _open(target, mode: str) -> tuple[str, BinaryIO, bool]:
    """(name for messages, binary file, whether we own it) for a path or a file object."""
    if isinstance(target, (str, os.PathLike)):
        return os.fsdecode(os.fspath(target)), open(target, mode), True
    method = "read" if "r" in mode else "write"
    if not hasattr(target, method):
        verb = "read a capture from" if method == "read" else "write a capture to"
        raise TypeError(f"cannot {verb} {type(target).__name__}")
    name = getattr(target, "name", None)
    return (name if isinstance(name, str) else "<stream>"), target, False


class CaptureReader:
    """Iterate over the records of a pcap or pcapng file, streaming.

    ``source`` is a path or a binary file object (``read(n)`` returning
    bytes; it need not be seekable, and short reads are retried).  A file
    object is never closed by the reader; a path is opened and closed by it.
    Raw byte strings are refused: wrap them in :class:`io.BytesIO`.

    Attributes: ``format`` ("pcap" or "pcapng", from the magic number),
    ``path`` (the path, the file object's string ``name``, else
    "<stream>"), ``linktype``, ``snaplen`` and ``ts_units_per_second`` (of
    the pcap file header, or of the first pcapng interface; ``None`` for a
    pcapng file that declares no interface), ``ts_resolution_ns`` (property),
    ``version`` ((major, minor) of the file header / first SHB),
    ``byte_order`` ("little" or "big", of the file / first section),
    ``records_read`` and ``warnings``: a list of ``(record_index, message)``
    for oddities that are tolerated (a captured length above the original
    length; SPBs, which carry no timestamp), capped at 1000 entries.

    Bad input, and what it raises (all :class:`CaptureError`; ``field``
    given in brackets):

    * empty file: :class:`BadMagic` "empty file" [magic] -- Wireshark shows
      a 0-byte file as an empty capture, but a 0-byte file is no pcap or
      pcapng file (both need a header), so this is an error here;
    * unknown magic: :class:`BadMagic` [magic]; a file cut inside the file
      header: :class:`TruncatedFile` naming the first missing field;
    * classic pcap major version other than 2 [version_major], pcapng major
      version other than 1 [major_version]: :class:`CaptureError`; a bad
      pcapng byte-order magic: :class:`BadMagic` [byte_order_magic];
    * file ending inside a record header [record_header] or pcapng block
      [the field cut]: :class:`TruncatedFile`; inside record data [data],
      naming ``incl_len``/``captured_len`` and the bytes left;
    * a captured length above ``max(snaplen, 262144)`` or above
      ``max_record_bytes``: :class:`CaptureError` [incl_len, or captured_len
      for pcapng]; nothing of that size is allocated;
    * ``incl_len > orig_len``: tolerated, the record is yielded and a
      warning recorded;
    * pcapng block total length below 12 / below the block type's minimum /
      not a multiple of 4 [block_total_length], trailing copy different
      [trailing_block_total_length], EPB/PB captured length beyond the block
      [captured_len], packet block naming an undeclared interface
      [interface_id], a malformed ``if_tsresol``/``if_tsoffset`` option or an
      option running past its block [the option name / options].

    A zero-length record is valid and yields ``Record(data=b"")``.
    """

    def __init__(self, source: str | os.PathLike | BinaryIO, *,
                 max_record_bytes: int = 1 << 24, keep_blocks: bool = False) -> None:
        if not isinstance(max_record_bytes, int) or max_record_bytes < 1:
            raise ValueError(f"max_record_bytes must be a positive int, not {max_record_bytes!r}")
        self.max_record_bytes = max_record_bytes
        self.keep_blocks = bool(keep_blocks)
        self._kept: list[Block] = []  # blocks read by the constructor, yielded first
        self.thiszone = 0
        self.sigfigs = 0
        self.linktype_field: int | None = None
        self.records_read = 0
        self.warnings: list[tuple[int, str]] = []
        self.format = ""
        self.linktype: int | None = None
        self.snaplen: int | None = None
        self.ts_units_per_second: int | None = None
        self.version: tuple[int, int] = (0, 0)
        self.byte_order = ""
        self._offset = 0
        self._options = b""
        self._gen: Generator[Record, None, None] | None = None
        self._closed = False
        self._own = False
        self._pending_error: CaptureError | None = None
        self._at_eof = False
        self._spb_warned = False
        # pcapng section state
        self._e = "<"
        self._ifaces: list[tuple[int, int, int, int, int, int]] = []
        if isinstance(source, (bytes, bytearray, memoryview)):
            raise TypeError("CaptureReader wants a path or a binary file object; "
                            "wrap raw bytes in io.BytesIO")
        self.path, fp, self._own = _open(source, "rb")
        self._fp = fp
        self._read = fp.read
        try:
            self._read_file_header()
        except BaseException:
            self.close()
            raise

    # --- plumbing -------------------------------------------------------------
    def __enter__(self) -> CaptureReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<CaptureReader {self.path!r} format={self.format} linktype={self.linktype} "
                f"records_read={self.records_read}>")

    def close(self) -> None:
        """Stop reading; close the file if the reader opened it.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        gen, self._gen = self._gen, None
        if gen is not None:
            gen.close()
        if self._own:
            self._fp.close()

    def __iter__(self) -> Iterator[Record]:
        if self._closed:
            raise ValueError(f"{self.path}: reader is closed")
        if self._gen is None:
            self._gen = self._iter_pcap() if self.format == "pcap" else self._iter_pcapng()
        return self._gen

    def __next__(self) -> Record:
        return next(iter(self))

    @property
    def ts_resolution_ns(self) -> int | None:
        """Length of one timestamp unit in whole ns (1000 for µs, 1 for ns).

        ``None`` when it is not a whole number of nanoseconds (base-2 or
        sub-nanosecond pcapng resolutions; see ``ts_units_per_second``) or
        when no interface is known.
        """
        units = self.ts_units_per_second
        if units is None or _NS_PER_S % units:
            return None
        return _NS_PER_S // units

    def _fill(self, buf: bytes, n: int) -> bytes:
        """Complete a short read of ``n`` bytes; shorter only at end of file."""
        if not isinstance(buf, bytes):
            raise TypeError(f"{self.path}: the stream must be binary, read() returned "
                            f"{type(buf).__name__}")
        parts = [buf]
        got = len(buf)
        read = self._read
        while got < n:
            more = read(n - got)
            if not more:
                break
            parts.append(more)
            got += len(more)
        return b"".join(parts)

    def _read_n(self, n: int) -> bytes:
        buf = self._read(n)
        if len(buf) != n:
            buf = self._fill(buf, n)
        return buf

    def _skip(self, n: int, offset: int, record: int | None, what: str, field: str) -> None:
        """Read and discard ``n`` bytes, in bounded chunks."""
        read = self._read
        left = n
        while left > 0:
            chunk = read(min(left, _SKIP_CHUNK))
            if not chunk:
                raise TruncatedFile(f"file ends inside {what}: {left} of {n} bytes missing",
                                    path=self.path, record=record, offset=offset, field=field)
            left -= len(chunk)

    def _warn(self, index: int, message: str) -> None:
        warnings = self.warnings
        if len(warnings) < _MAX_WARNINGS:
            warnings.append((index, message))
        elif len(warnings) == _MAX_WARNINGS:
            warnings.append((index, "further warnings suppressed"))

    def _absurd(self, length: int, limit_bytes: int, snaplen: int, field: str, offset: int,
                record: int) -> CaptureError:
        return CaptureError(
            f"{field} {length} is absurd (limit {limit_bytes} bytes: max(snaplen {snaplen}, "
            f"{_DEFAULT_MAX_SNAPLEN}) capped by max_record_bytes {self.max_record_bytes}); "
            "file corrupt?", path=self.path, record=record, offset=offset, field=field)

    def _limit(self, snaplen: int) -> int:
        return min(max(snaplen, _DEFAULT_MAX_SNAPLEN), self.max_record_bytes)

    # --- file header ------------------------------------------------------------
    def _read_file_header(self) -> None:
        magic = self._read(4)
        if not isinstance(magic, bytes):
            raise TypeError(f"{self.path}: the stream must be binary, read() returned "
                            f"{type(magic).__name__}")
        if len(magic) != 4:
            magic = self._fill(magic, 4)
        path = self.path
        if not magic:
            raise BadMagic("empty file (0 bytes): not a pcap or pcapng capture",
                           path=path, offset=0, field="magic")
        if len(magic) < 4:
            known = (*_PCAP_MAGICS, _SHB_MAGIC)
            if any(m.startswith(magic) for m in known):
                raise TruncatedFile(f"file is only {len(magic)} bytes long, cut inside the magic "
                                    "number", path=path, offset=0, field="magic")
            raise BadMagic(f"not a pcap or pcapng file: {len(magic)} bytes 0x{magic.hex()}",
                           path=path, offset=0, field="magic")
        if magic in _PCAP_MAGICS:
            self._read_pcap_header(magic)
        elif magic == _SHB_MAGIC:
            self.format = "pcapng"
            self._offset = 0
            shb = self._read_shb(self._read_n(4), 0, None)
            if shb is not None:
                self._kept.append(shb)
            self._prime_pcapng()
        else:
            if magic in _PCAP_KUZNETZOV:
                hint = " (Kuznetzov's modified pcap format is not supported)"
            elif magic[:2] == b"\x1f\x8b":
                hint = " (gzip-compressed? decompress it first)"
            elif magic == b"\x28\xb5\x2f\xfd":
                hint = " (zstd-compressed? decompress it first)"
            else:
                hint = ""
            raise BadMagic(f"unknown magic number 0x{magic.hex()}: not a pcap or pcapng "
                           f"file{hint}", path=path, offset=0, field="magic")

    def _read_pcap_header(self, magic: bytes) -> None:
        """File Header, draft-ietf-opsawg-pcap section 4."""
        e, frac_ns = _PCAP_MAGICS[magic]
        rest = self._read_n(20)
        if len(rest) < 20:
            got = 4 + len(rest)
            field = _field_at(_PCAP_FILE_LAYOUT, got)
            raise TruncatedFile(f"file header cut by end of file: {got} of 24 bytes present",
                                path=self.path, offset=got, field=field)
        major, minor, thiszone, sigfigs, snaplen, linktype_field = \
            _PCAP_FILE_HEADER[e].unpack(rest)
        if major != 2:
            raise CaptureError(f"unknown pcap major version {major}.{minor} (only 2.x is known)",
                               path=self.path, offset=4, field="version_major")
        self.format = "pcap"
        self.version = (major, minor)
        self.byte_order = "little" if e == "<" else "big"
        self.snaplen = snaplen
        self.thiszone = thiszone
        self.sigfigs = sigfigs
        self.linktype_field = linktype_field
        # The upper 16 bits hold FCS-length flags (or are reserved): not a linktype.
        self.linktype = linktype_field & 0xFFFF
        self.ts_units_per_second = _NS_PER_S if frac_ns == 1 else _US_PER_S
        self._e = e
        self._frac_ns = frac_ns
        self._offset = 24

    # --- classic pcap records (draft-ietf-opsawg-pcap section 5) ------------------
    def _iter_pcap(self) -> Generator[Record, None, None]:
        read = self._read
        unpack = _PCAP_RECORD_HEADER[self._e].unpack
        frac_ns = self._frac_ns
        snaplen = self.snaplen or 0
        limit = self._limit(snaplen)
        linktype = self.linktype or 0
        path = self.path
        index = self.records_read
        offset = self._offset
        make = _make_record
        while True:
            header = read(16)
            if len(header) != 16:
                if not header:
                    return
                header = self._fill(header, 16)
                if len(header) != 16:
                    raise TruncatedFile(f"file ends inside a record header: {len(header)} of 16 "
                                        "bytes present", path=path, record=index, offset=offset,
                                        field="record_header")
            sec, frac, incl_len, orig_len = unpack(header)
            if incl_len > limit:
                raise self._absurd(incl_len, limit, snaplen, "incl_len", offset, index)
            data = read(incl_len)
            if len(data) != incl_len:
                data = self._fill(data, incl_len)
                if len(data) != incl_len:
                    raise TruncatedFile(f"record data cut by end of file: incl_len is {incl_len} "
                                        f"but only {len(data)} bytes are left", path=path,
                                        record=index, offset=offset, field="data")
            if incl_len > orig_len:
                self._warn(index, f"incl_len {incl_len} > orig_len {orig_len}")
            index += 1
            offset += 16 + incl_len
            self.records_read = index
            self._offset = offset
            yield make(sec * _NS_PER_S + frac * frac_ns, data, orig_len, linktype, 0)

    # --- pcapng -------------------------------------------------------------------
    def _prime_pcapng(self) -> None:
        """Read blocks up to the first IDB so ``linktype`` is known after __init__.

        Only non-packet blocks can come before the first IDB (a packet block
        would reference an undeclared interface); an error met here is kept
        and raised when iteration starts.
        """
        while self.linktype is None:
            try:
                result = self._next_block()
            except CaptureError as exc:
                self._pending_error = exc
                return
            if result is _EOF:
                self._at_eof = True
                return
            if isinstance(result, Block):
                self._kept.append(result)

    def _iter_pcapng(self) -> Generator[Record, None, None]:
        kept, self._kept = self._kept, []
        yield from kept  # type: ignore[misc]
        if self._pending_error is not None:
            exc, self._pending_error = self._pending_error, None
            raise exc
        if self._at_eof:
            return
        step = self._next_block
        while True:
            result = step()
            if result is None:
                continue
            if result is _EOF:
                return
            yield result  # type: ignore[misc]

    def _check_block_length(self, total_len: int, minimum: int, kind: str, offset: int,
                            record: int | None) -> None:
        if total_len & 3 or total_len < minimum:
            why = "not a multiple of 4" if total_len & 3 else f"below the minimum of {minimum}"
            raise CaptureError(f"{kind} total length {total_len} is {why}", path=self.path,
                               record=record, offset=offset, field="block_total_length")

    def _check_trailer(self, trailer: bytes, total_len: int, kind: str, offset: int,
                       record: int | None) -> None:
        if len(trailer) != 4:
            raise TruncatedFile(f"file ends inside the trailing length of a {kind}",
                                path=self.path, record=record, offset=offset,
                                field="trailing_block_total_length")
        (copy,) = _U32[self._e].unpack(trailer)
        if copy != total_len:
            raise CaptureError(f"{kind}: trailing block total length {copy} differs from the "
                               f"leading {total_len}", path=self.path, record=record,
                               offset=offset, field="trailing_block_total_length")

    def _read_shb(self, raw_len: bytes, offset: int, record: int | None) -> Block | None:
        """Section Header Block, draft-ietf-opsawg-pcapng section 4.1.

        The block type has been read; ``raw_len`` holds the (up to 4) bytes
        of the total length, whose byte order the byte-order magic tells.
        """
        path = self.path
        head = raw_len + self._read_n(16) if len(raw_len) == 4 else raw_len
        if len(head) < 20:
            field = _field_at(_SHB_LAYOUT, len(head))
            raise TruncatedFile(f"file ends inside a Section Header Block: {4 + len(head)} of "
                                "at least 28 bytes present", path=path, record=record,
                                offset=offset + 4 + len(head) if record is None else offset,
                                field=field)
        bom = head[4:8]
        if bom == _BOM_LE:
            e = "<"
        elif bom == _BOM_BE:
            e = ">"
        else:
            raise BadMagic(f"bad Section Header Block byte-order magic 0x{bom.hex()} "
                           "(want 0x1a2b3c4d)", path=path, record=record, offset=offset + 8,
                           field="byte_order_magic")
        (total_len,) = _U32[e].unpack_from(head, 0)
        self._check_block_length(total_len, 28, "Section Header Block", offset, record)
        major, minor, _section_len = _SHB_FIXED[e].unpack_from(head, 8)
        if major != 1:
            raise CaptureError(f"unknown pcapng major version {major}.{minor} (only 1.x is "
                               "known)", path=path, record=record, offset=offset + 12,
                               field="major_version")
        self._e = e  # the trailer and all blocks of this section use this byte order
        block = None
        if self.keep_blocks:
            opts = self._read_body(total_len - 28, offset, record, "Section Header Block")
            block = Block(_BT_SHB, head[4:20] + opts, "little" if e == "<" else "big")
        else:
            self._skip(total_len - 28, offset, record, "Section Header Block options",
                       "options")
        self._check_trailer(self._read_n(4), total_len, "Section Header Block", offset, record)
        self._ifaces = []  # interface ids restart with every section
        self._offset = offset + total_len
        if record is None:
            self.version = (major, minor)
            self.byte_order = "little" if e == "<" else "big"
        return block

    def _read_body(self, n: int, offset: int, record: int | None, kind: str) -> bytes:
        """The ``n`` bytes of a block body kept whole (``keep_blocks``), bounded by
        ``max_record_bytes``."""
        if n > self.max_record_bytes:
            raise CaptureError(f"{kind} of {n + 12} bytes is absurd (over max_record_bytes "
                               f"{self.max_record_bytes})", path=self.path, record=record,
                               offset=offset, field="block_total_length")
        body = self._read_n(n)
        if len(body) != n:
            raise TruncatedFile(f"file ends inside a {kind}: {len(body)} of {n} body bytes "
                                "present", path=self.path, record=record, offset=offset,
                                field="block_body")
        return body

    def _next_block(self) -> object:
        """Read one pcapng block: a Record, ``None`` (no packet) or ``_EOF``."""
        offset = self._offset
        record = self.records_read
        header = self._read(8)
        if len(header) != 8:
            if not header:
                return _EOF
            header = self._fill(header, 8)
            if len(header) != 8:
                field = "block_type" if len(header) < 4 else "block_total_length"
                raise TruncatedFile(f"file ends inside a block header: {len(header)} of 8 bytes "
                                    "present", path=self.path, record=record, offset=offset,
                                    field=field)
        e = self._e
        block_type, total_len = _BLOCK_HEADER[e].unpack(header)
        if block_type == _BT_EPB:
            if total_len & 3 or total_len < 32:
                self._check_block_length(total_len, 32, "Enhanced Packet Block", offset, record)
            return self._read_packet(total_len, offset, record, _EPB_FIXED[e], _EPB_LAYOUT,
                                     "Enhanced Packet Block")
        if block_type == _BT_SHB:
            return self._read_shb(header[4:], offset, record)
        self._check_block_length(total_len, 12, f"block type 0x{block_type:08x}", offset,
                                 record)
        if block_type == _BT_IDB:
            return self._read_idb(total_len, offset, record)
        if block_type == _BT_SPB:
            return self._read_spb(total_len, offset, record)
        if block_type == _BT_PB:
            self._check_block_length(total_len, 32, "Packet Block", offset, record)
            return self._read_packet(total_len, offset, record, _PB_FIXED[e], _PB_LAYOUT,
                                     "Packet Block")
        # NRB, ISB, DSB, Custom Blocks, anything unknown: skip by its length.
        kind = f"block of type 0x{block_type:08x}"
        block = None
        if self.keep_blocks:
            block = Block(block_type, self._read_body(total_len - 12, offset, record, kind),
                          "little" if e == "<" else "big")
        else:
            self._skip(total_len - 12, offset, record, kind, "block_body")
        self._check_trailer(self._read_n(4), total_len, kind, offset, record)
        self._offset = offset + total_len
        return block

    def _read_idb(self, total_len: int, offset: int, record: int) -> Block | None:
        """Interface Description Block, draft-ietf-opsawg-pcapng section 4.2."""
        path = self.path
        e = self._e
        self._check_block_length(total_len, 20, "Interface Description Block", offset, record)
        body_len = total_len - 12
        if body_len > self.max_record_bytes:
            raise CaptureError(f"Interface Description Block of {total_len} bytes is absurd "
                               f"(over max_record_bytes {self.max_record_bytes})", path=path,
                               record=record, offset=offset, field="block_total_length")
        body = self._read_n(body_len)
        if len(body) != body_len:
            field = "options" if len(body) >= 8 else _field_at(_IDB_LAYOUT, 4 + len(body))
            raise TruncatedFile(f"file ends inside an Interface Description Block: "
                                f"{len(body)} of {body_len} body bytes present", path=path,
                                record=record, offset=offset, field=field)
        self._check_trailer(self._read_n(4), total_len, "Interface Description Block", offset,
                            record)
        try:
            linktype, snaplen, units, tsoffset_s = _parse_idb(body, e)
        except ValueError as exc:
            raise CaptureError(exc.args[0], path=path, record=record, offset=offset,
                               field=exc.args[1]) from None
        ns_per_unit = _NS_PER_S // units if _NS_PER_S % units == 0 else 0
        self._ifaces.append((linktype, self._limit(snaplen), ns_per_unit, units,
                             tsoffset_s * _NS_PER_S, snaplen))
        if self.linktype is None:
            self.linktype = linktype
            self.snaplen = snaplen
            self.ts_units_per_second = units
        self._offset = offset + total_len
        if self.keep_blocks:
            return Block(_BT_IDB, body, "little" if e == "<" else "big")
        return None

    def _read_tail(self, cap_len: int, tail_len: int, total_len: int, offset: int,
                   record: int, kind: str) -> bytes:
        """Read packet data, padding, options and the trailer; return the data.

        ``tail_len`` counts every byte of the block still unread, trailer
        included.  Small option areas are read with the data in one call;
        large ones are skipped in chunks.
        """
        path = self.path
        if tail_len - cap_len <= _SKIP_CHUNK:
            chunk = self._read(tail_len)
            if len(chunk) != tail_len:
                chunk = self._fill(chunk, tail_len)
            got = len(chunk)
            if got != tail_len:
                if got < cap_len:
                    raise TruncatedFile(f"packet data cut by end of file: captured_len is "
                                        f"{cap_len} but only {got} bytes are left", path=path,
                                        record=record, offset=offset, field="data")
                if got < tail_len - 4:
                    raise TruncatedFile(f"file ends inside the padding/options of a {kind}",
                                        path=path, record=record, offset=offset,
                                        field="options")
                raise TruncatedFile(f"file ends inside the trailing length of a {kind}",
                                    path=path, record=record, offset=offset,
                                    field="trailing_block_total_length")
            (copy,) = _U32[self._e].unpack_from(chunk, tail_len - 4)
            if copy != total_len:
                raise CaptureError(f"{kind}: trailing block total length {copy} differs from "
                                   f"the leading {total_len}", path=path, record=record,
                                   offset=offset, field="trailing_block_total_length")
            if self.keep_blocks:
                self._options = chunk[_pad4(cap_len):tail_len - 4]
            return chunk[:cap_len]
        data = self._read_n(cap_len)
        if len(data) != cap_len:
            raise TruncatedFile(f"packet data cut by end of file: captured_len is {cap_len} but "
                                f"only {len(data)} bytes are left", path=path, record=record,
                                offset=offset, field="data")
        if self.keep_blocks:
            rest = self._read_body(tail_len - cap_len - 4, offset, record, kind)
            self._options = rest[_pad4(cap_len) - cap_len:]
        else:
            self._skip(tail_len - cap_len - 4, offset, record, f"the options of a {kind}",
                       "options")
        self._check_trailer(self._read_n(4), total_len, kind, offset, record)
        return data

    def _read_packet(self, total_len: int, offset: int, record: int, fixed: struct.Struct,
                     layout: tuple[tuple[int, str], ...], kind: str) -> Record:
        """Enhanced Packet Block (section 4.3) or obsolete Packet Block (Appendix A)."""
        path = self.path
        head = self._read(20)
        if len(head) != 20:
            head = self._fill(head, 20)
            if len(head) != 20:
                raise TruncatedFile(f"file ends inside a {kind} header: {8 + len(head)} of 28 "
                                    "bytes present", path=path, record=record, offset=offset,
                                    field=_field_at(layout, 4 + len(head)))
        iface, ts_high, ts_low, cap_len, orig_len = fixed.unpack(head)
        ifaces = self._ifaces
        if iface >= len(ifaces):
            raise CaptureError(f"{kind} names interface {iface}, but this section declares "
                               f"{len(ifaces)} interface(s)", path=path, record=record,
                               offset=offset, field="interface_id")
        linktype, limit, ns_per_unit, units, tsoffset_ns, snaplen = ifaces[iface]
        if _pad4(cap_len) > total_len - 32:
            raise CaptureError(f"captured_len {cap_len} does not fit in the {kind} (total "
                               f"length {total_len} leaves {total_len - 32} bytes for data)",
                               path=path, record=record, offset=offset, field="captured_len")
        if cap_len > limit:
            raise self._absurd(cap_len, limit, snaplen, "captured_len", offset, record)
        data = self._read_tail(cap_len, total_len - 28, total_len, offset, record, kind)
        ts = (ts_high << 32) | ts_low
        if ns_per_unit:
            ts_ns = ts * ns_per_unit + tsoffset_ns
        else:
            ts_ns = ts * _NS_PER_S // units + tsoffset_ns
        if cap_len > orig_len:
            self._warn(record, f"captured_len {cap_len} > orig_len {orig_len}")
        self.records_read = record + 1
        self._offset = offset + total_len
        if self.keep_blocks:
            opts, self._options = self._options, b""
            return Record(ts_ns, data, orig_len, linktype, iface, opts)
        return Record(ts_ns, data, orig_len, linktype, iface)

    def _read_spb(self, total_len: int, offset: int, record: int) -> Record:
        """Simple Packet Block, draft-ietf-opsawg-pcapng section 4.4.

        It belongs to interface 0 and carries no timestamp: ``ts_ns`` is 0
        (a warning says so once).  Its captured length is
        ``min(orig_len, snaplen of interface 0)`` (``orig_len`` if that
        snaplen is 0, i.e. unlimited).
        """
        path = self.path
        self._check_block_length(total_len, 16, "Simple Packet Block", offset, record)
        head = self._read_n(4)
        if len(head) != 4:
            raise TruncatedFile("file ends inside a Simple Packet Block header", path=path,
                                record=record, offset=offset, field="orig_len")
        (orig_len,) = _U32[self._e].unpack(head)
        if not self._ifaces:
            raise CaptureError("Simple Packet Block uses interface 0, but this section "
                               "declares no interface", path=path, record=record,
                               offset=offset, field="interface_id")
        linktype, limit, _ns_per_unit, _units, _tsoffset_ns, snaplen = self._ifaces[0]
        cap_len = min(orig_len, snaplen) if snaplen else orig_len
        if _pad4(cap_len) > total_len - 16:
            raise CaptureError(f"captured length {cap_len} (min of orig_len {orig_len} and "
                               f"snaplen {snaplen}) does not fit in the Simple Packet Block "
                               f"(total length {total_len})", path=path, record=record,
                               offset=offset, field="captured_len")
        if cap_len > limit:
            raise self._absurd(cap_len, limit, snaplen, "captured_len", offset, record)
        data = self._read_tail(cap_len, total_len - 12, total_len, offset, record,
                               "Simple Packet Block")
        if not self._spb_warned:
            self._spb_warned = True
            self._warn(record, "Simple Packet Blocks carry no timestamp: ts_ns set to 0")
        self.records_read = record + 1
        self._offset = offset + total_len
        return Record(0, data, orig_len, linktype, 0)


def _parse_idb(body: bytes, e: str) -> tuple[int, int, int, int]:
    """(linktype, snaplen, timestamp units per second, if_tsoffset in s) of an IDB body
    (draft-ietf-opsawg-pcapng section 4.2; if_tsresol default 6 = microseconds).  Raises
    ``ValueError(message, field)`` for a malformed option."""
    if len(body) < 8:
        raise ValueError(f"Interface Description Block body of {len(body)} bytes is below 8",
                         "block_total_length")
    body_len = len(body)
    linktype, _reserved, snaplen = _IDB_FIXED[e].unpack_from(body, 0)
    tsresol = 6
    tsoffset_s = 0
    opt_header = _OPT_HEADER[e]
    pos = 8
    while pos + 4 <= body_len:
        code, length = opt_header.unpack_from(body, pos)
        if code == _OPT_ENDOFOPT:
            break
        pos += 4
        if pos + length > body_len:
            raise ValueError(f"IDB option {code} of length {length} runs past the end of the "
                             "block", "options")
        if code == _OPT_IF_TSRESOL:
            if length != 1:
                raise ValueError(f"if_tsresol option has length {length}, not 1", "if_tsresol")
            tsresol = body[pos]
        elif code == _OPT_IF_TSOFFSET:
            if length != 8:
                raise ValueError(f"if_tsoffset option has length {length}, not 8",
                                 "if_tsoffset")
            (tsoffset_s,) = _I64[e].unpack_from(body, pos)
        pos += _pad4(length)
    # if_tsresol: MSB clear -> 10**-n seconds per unit, MSB set -> 2**-n.
    exponent = tsresol & 0x7F
    units = 1 << exponent if tsresol & 0x80 else 10 ** exponent
    return linktype, snaplen, units, tsoffset_s


def read(source: str | os.PathLike | BinaryIO, **kw: int) -> Iterator[Record]:
    """Yield the records of a capture file (see :class:`CaptureReader`)."""
    with CaptureReader(source, **kw) as reader:
        yield from reader


class CaptureWriter:
    """Write a classic pcap or a pcapng file.

    * ``format="pcap"`` (draft-ietf-opsawg-pcap): a 24-byte File Header with ``snaplen``
      and ``linktype`` (``linktype_flags`` go in the upper 16 bits of that field: the
      FCS-length bits of section 4), ``version`` (default 2.4), ``thiszone`` and
      ``sigfigs`` (default 0), in ``byte_order`` ("little", the default, or "big");
      magic 0xA1B23C4D (nanosecond fractions) by default, or 0xA1B2C3D4 with
      ``nanosecond=False``, where the ns timestamp is floor-divided to microseconds
      (sub-microsecond digits are lost).  All records must have the file's linktype (else
      ``ValueError``);
      ``Record.interface`` is not stored.  Seconds must fit in 32 bits.  ``snaplen`` 0
      means no limit.
    * ``format="pcapng"`` (draft-ietf-opsawg-pcapng): an SHB (section 4.1, version 1.0,
      section length -1, in ``byte_order``), then an IDB (section 4.2, ``snaplen``,
      ``if_tsresol`` 9, or 6 with ``nanosecond=False``) the first time each distinct
      ``(record.interface, record.linktype)`` pair is used, and one EPB (section 4.3) per
      record, data padded to 32 bits, then ``Record.options`` (the EPB options, written
      as given).  Interface ids in the output are numbered 0, 1, ... in order of first
      appearance of those pairs.  A file with no record still gets one IDB for
      ``linktype`` at ``close()``.
    * ``format="pcapng", blocks=True``: the file's structure is the caller's: nothing is
      written until :meth:`write_block` writes a Section Header Block, and every IDB and
      other block comes from :meth:`write_block` too (kept byte for byte, e.g. from a
      reader made with ``keep_blocks=True``).  ``Record.interface`` is then the interface
      id within the current section and must name an IDB already written; the EPB
      timestamp is converted to that interface's ``if_tsresol``/``if_tsoffset``
      (exactly for decimal resolutions down to 1 ns; otherwise the smallest timestamp
      that reads back as ``ts_ns``).

    ``write()`` takes a :class:`Record`, or raw bytes with ``ts_ns`` (required) and
    ``orig_len`` (default ``len(data)``; raw bytes use interface 0 and the writer's
    ``linktype``).  It checks everything before writing a byte: a record that raises
    (``ValueError``/``TypeError``) leaves the file as it was, so a caller may report it
    and go on.  Data longer than a nonzero ``snaplen`` is cut to ``snaplen``, keeping
    ``orig_len`` (unless ``truncate=False``; with ``blocks=True`` nothing is cut).  An
    ``orig_len`` below the data length is written as given.  Timestamps are written
    exactly (seconds + ns fraction); negative ones raise ``ValueError``.  A file object
    ``dest`` is flushed but not closed by ``close()``.
    """

    def __init__(self, dest: str | os.PathLike | BinaryIO, *, format: str = "pcap",
                 linktype: int = 1, snaplen: int = 262144, nanosecond: bool = True,
                 byte_order: str = "little", version: tuple[int, int] = (2, 4),
                 thiszone: int = 0, sigfigs: int = 0, linktype_flags: int = 0,
                 blocks: bool = False, truncate: bool = True) -> None:
        if format not in ("pcap", "pcapng"):
            raise ValueError(f"format must be 'pcap' or 'pcapng', not {format!r}")
        if byte_order not in ("little", "big"):
            raise ValueError(f"byte_order must be 'little' or 'big', not {byte_order!r}")
        if blocks and format != "pcapng":
            raise ValueError("blocks=True is for format='pcapng'")
        _check_uint("linktype", linktype, 0xFFFF)
        _check_uint("linktype_flags", linktype_flags, 0xFFFF)
        _check_uint("snaplen", snaplen, _U32_MAX)
        if format == "pcap":
            if not (isinstance(version, tuple | list) and len(version) == 2):
                raise TypeError(f"version must be (major, minor), not {version!r}")
            _check_uint("version_major", version[0], 0xFFFF)
            _check_uint("version_minor", version[1], 0xFFFF)
            if not isinstance(thiszone, int) or not -(1 << 31) <= thiszone < 1 << 31:
                raise ValueError(f"thiszone {thiszone!r} is not a signed 32-bit int")
            _check_uint("sigfigs", sigfigs, _U32_MAX)
        self.format = format
        self.linktype = linktype
        self.snaplen = snaplen
        self.nanosecond = bool(nanosecond)
        self.byte_order = byte_order
        self.blocks = bool(blocks)
        self.truncate = bool(truncate) and not self.blocks
        self.records_written = 0
        self._closed = False
        self._own = False
        self._ids: dict[tuple[int, int], int] = {}
        # blocks=True: the current section's interfaces (linktype, units/s, tsoffset ns)
        self._section: list[tuple[int, int, int]] | None = None
        e = "<" if byte_order == "little" else ">"
        self._e = e
        self.path, fp, self._own = _open(dest, "wb")
        self._fp = fp
        self._write = fp.write
        self._u32 = _U32[e]
        self._epb_header = struct.Struct(e + "IIIIIII")
        try:
            if format == "pcap":
                magic = _PCAP_MAGIC_NS if self.nanosecond else _PCAP_MAGIC_US
                self._write(struct.pack(e + "IHHiIII", magic, version[0], version[1], thiszone,
                                        sigfigs, snaplen, linktype | linktype_flags << 16))
                self._record_header = _PCAP_RECORD_HEADER[e]
            elif not self.blocks:
                self._write(struct.pack(e + "IIIHHqI", _BT_SHB, 28, 0x1A2B3C4D, 1, 0, -1, 28))
        except BaseException:
            if self._own:
                fp.close()
            raise

    def __enter__(self) -> CaptureWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"<CaptureWriter {self.path!r} format={self.format} linktype={self.linktype} "
                f"records_written={self.records_written}>")

    def _add_idb(self, linktype: int) -> int:
        """Write an IDB (section 4.2) with if_tsresol; return its interface id."""
        tsresol = 9 if self.nanosecond else 6
        # fixed part (8) + if_tsresol option (4 + 1 + 3 padding) + opt_endofopt (4)
        total_len = 8 + 8 + 8 + 4 + 4
        self._write(struct.pack(self._e + "IIHHIHHB3xHHI", _BT_IDB, total_len, linktype, 0,
                                self.snaplen, _OPT_IF_TSRESOL, 1, tsresol, _OPT_ENDOFOPT, 0,
                                total_len))
        return len(self._ids)

    def write_block(self, block: Block) -> None:
        """Write a non-packet pcapng block as given (``blocks=True`` writers only).

        An SHB starts a new section in its own byte order (its body's byte-order magic);
        every other block must be in the byte order of the current section.  An IDB's
        options are checked (``if_tsresol``/``if_tsoffset``) so records can use it.
        """
        if self._closed:
            raise ValueError(f"{self.path}: writer is closed")
        if not self.blocks:
            raise ValueError("write_block() needs a writer made with format='pcapng', "
                             "blocks=True")
        if not isinstance(block, Block):
            raise TypeError(f"write_block() takes a Block, not {type(block).__name__}")
        btype, body = block.type, bytes(block.body)
        _check_uint("block type", btype, _U32_MAX)
        if len(body) & 3:
            raise ValueError(f"block body of {len(body)} bytes is not a multiple of 4")
        if len(body) + 12 > _U32_MAX:
            raise ValueError(f"block body of {len(body)} bytes is too long")
        if btype == _BT_SHB:
            if len(body) < 16:
                raise ValueError(f"Section Header Block body of {len(body)} bytes is below 16")
            bom = body[:4]
            if bom not in (_BOM_LE, _BOM_BE):
                raise ValueError(f"bad Section Header Block byte-order magic 0x{bom.hex()}")
            e = "<" if bom == _BOM_LE else ">"
            major = struct.unpack_from(e + "H", body, 4)[0]
            if major != 1:
                raise ValueError(f"pcapng major version {major} (only 1 is known)")
            section: list[tuple[int, int, int]] = []
        else:
            if self._section is None:
                raise ValueError("the first pcapng block must be a Section Header Block")
            e = self._e
            if block.byte_order != ("little" if e == "<" else "big"):
                raise ValueError(f"block in {block.byte_order}-endian order inside a "
                                 f"{'little' if e == '<' else 'big'}-endian section")
            if btype in (_BT_EPB, _BT_PB, _BT_SPB):
                raise ValueError(f"packet block type {btype} must be written as a Record")
            if btype == _BT_IDB:
                linktype, _snaplen, units, tsoffset_s = _parse_idb(body, e)
                self._section.append((linktype, units, tsoffset_s * _NS_PER_S))
        u32 = _U32[e]
        total_len = len(body) + 12
        self._write(u32.pack(btype) + u32.pack(total_len) + body + u32.pack(total_len))
        if btype == _BT_SHB:
            self._section = section
            self._e = e
            self._u32 = u32
            self._epb_header = struct.Struct(e + "IIIIIII")
            self.byte_order = "little" if e == "<" else "big"

    def write(self, record_or_data: Record | bytes, ts_ns: int | None = None,
              orig_len: int | None = None) -> None:
        """Write one record (see the class docstring)."""
        if self._closed:
            raise ValueError(f"{self.path}: writer is closed")
        options = b""
        if isinstance(record_or_data, Record):
            if ts_ns is not None or orig_len is not None:
                raise TypeError("ts_ns and orig_len are taken from the Record; pass them only "
                                "with raw bytes")
            rec = record_or_data
            data, ts, orig, linktype, iface = (rec.data, rec.ts_ns, rec.orig_len, rec.linktype,
                                               rec.interface)
            options = rec.options
        elif isinstance(record_or_data, (bytes, bytearray, memoryview)):
            if ts_ns is None:
                raise TypeError("ts_ns (integer nanoseconds) is required when writing raw bytes")
            data = record_or_data
            ts = ts_ns
            orig = len(data) if orig_len is None else orig_len
            linktype = self.linktype
            iface = 0
        else:
            raise TypeError(f"cannot write {type(record_or_data).__name__}: want a Record or "
                            "bytes")
        if type(data) is not bytes and type(data) is not bytearray:
            if not isinstance(data, (bytes, bytearray, memoryview)):
                raise TypeError(f"record data must be bytes, not {type(data).__name__}")
            data = bytes(data)
        if type(ts) is not int and (not isinstance(ts, int) or isinstance(ts, bool)):
            raise TypeError(f"ts_ns must be an int number of nanoseconds, not {ts!r}")
        if ts < 0:
            raise BadValue(f"negative timestamp {ts} ns cannot be written", field="ts_ns")
        if type(orig) is not int or not 0 <= orig <= _U32_MAX:
            if isinstance(orig, int) and not isinstance(orig, bool):
                raise BadValue(f"{orig} is out of range 0..{_U32_MAX}", field="len")
            _check_uint("orig_len", orig, _U32_MAX)
        snaplen = self.snaplen
        if snaplen and len(data) > snaplen and self.truncate:
            data = data[:snaplen]
        cap_len = len(data)
        if cap_len > _U32_MAX - 64:
            raise BadValue(f"record of {cap_len} bytes is too long for a capture file",
                           field="caplen")
        if self.format == "pcap":
            if linktype != self.linktype:
                raise BadValue(f"record linktype {linktype} differs from the file's linktype "
                               f"{self.linktype}: a classic pcap file holds one linktype "
                               "(pcapng holds several)", field="linktype")
            if options:
                raise BadValue("a classic pcap record has no options (pcapng EPB only)",
                               field="epb_options")
            sec, frac = divmod(ts, _NS_PER_S)
            if sec > _U32_MAX:
                raise BadValue(f"timestamp {ts} ns is past 2106: classic pcap seconds are "
                               "32-bit", field="ts_ns")
            if not self.nanosecond:
                frac //= 1000
            self._write(self._record_header.pack(sec, frac, cap_len, orig))
            self._write(data)
        else:
            if isinstance(linktype, int) and not 0 <= linktype <= 0xFFFF:
                raise BadValue(f"{linktype} is out of range 0..65535", field="linktype")
            _check_uint("linktype", linktype, 0xFFFF)
            if not isinstance(iface, int) or isinstance(iface, bool):
                raise TypeError(f"interface must be an int, not {iface!r}")
            if not isinstance(options, bytes | bytearray) or len(options) & 3:
                raise BadValue("EPB options must be bytes, a multiple of 4 long",
                               field="epb_options")
            if self.blocks:
                ifaces = self._section
                if ifaces is None:
                    raise BadValue("no Section Header Block written before the first record",
                                   field="interface")
                if not 0 <= iface < len(ifaces):
                    raise BadValue(f"interface {iface} is not declared in this section "
                                   f"({len(ifaces)} interface(s))", field="interface")
                if_linktype, units_per_s, tsoffset_ns = ifaces[iface]
                if linktype != if_linktype:
                    raise BadValue(f"record linktype {linktype} differs from the linktype "
                                   f"{if_linktype} of interface {iface}", field="linktype")
                rel = ts - tsoffset_ns
                if _NS_PER_S % units_per_s == 0:
                    units = rel // (_NS_PER_S // units_per_s)
                else:  # the smallest unit count that reads back as ts (ceil)
                    units = -((-rel * units_per_s) // _NS_PER_S)
                out_id = iface
            else:
                units = ts if self.nanosecond else ts // 1000
                out_id = None
            if not 0 <= units <= _U64_MAX:
                raise BadValue(f"timestamp {ts} ns does not fit a 64-bit pcapng timestamp",
                               field="ts_ns")
            total_len = 32 + _pad4(cap_len) + len(options)
            if total_len > _U32_MAX:
                raise BadValue(f"Enhanced Packet Block of {total_len} bytes is too long",
                               field="caplen")
            if out_id is None:
                key = (iface, linktype)
                out_id = self._ids.get(key)
                if out_id is None:
                    out_id = self._add_idb(linktype)
                    self._ids[key] = out_id
            pad = -cap_len & 3
            self._write(self._epb_header.pack(_BT_EPB, total_len, out_id, units >> 32,
                                              units & _U32_MAX, cap_len, orig))
            self._write(data)
            self._write(b"\0" * pad + bytes(options) + self._u32.pack(total_len))
        self.records_written += 1

    def write_frames(self, frames: Iterable[bytes | bytearray], ts_ns: Iterable[int]) -> int:
        """Write many whole frames (the file's linktype, interface 0) with their timestamps;
        the bulk path of :meth:`write` (same checks, less per-call work).  Returns the count."""
        if self.format != "pcap" or self.snaplen < 65536:
            n = 0
            for frame, ts in zip(frames, ts_ns, strict=False):
                self.write(frame, ts_ns=ts)
                n += 1
            return n
        if self._closed:
            raise ValueError(f"{self.path}: writer is closed")
        pack, wr = self._record_header.pack, self._write
        div = 1 if self.nanosecond else 1000
        snaplen = self.snaplen
        n = 0
        buf = bytearray()
        for frame, ts in zip(frames, ts_ns, strict=False):
            if type(ts) is not int or ts < 0 or ts >= _PCAP_TS_LIMIT_NS:
                wr(buf)
                buf = bytearray()
                self.write(frame, ts_ns=ts)  # the checked path (raises with its message)
                self.records_written -= 1  # counted below with the others
                n += 1
                continue
            size = len(frame)
            if size > snaplen:
                frame, cap = frame[:snaplen], snaplen
            else:
                cap = size
            sec, frac = divmod(ts, _NS_PER_S)
            buf += pack(sec, frac // div, cap, size)
            buf += frame
            n += 1
            if len(buf) >= 1 << 20:
                wr(buf)
                buf = bytearray()
        wr(buf)
        self.records_written += n
        return n

    def write_rows(self, rows: Any, ts_ns: Any) -> int:
        """Write whole frames of one length, given as the rows of a 2-D ``uint8`` numpy array,
        with their timestamps (a sequence or numpy array of ints, ns): the same records as
        :meth:`write_frames` of ``bytes(row)`` each, with the record headers made by numpy
        and the records written in one piece.  Returns the count."""
        import numpy as np

        rows = np.asarray(rows)
        if rows.ndim != 2 or rows.dtype != np.uint8 or len(ts_ns) != len(rows):
            raise ValueError("write_rows takes a 2-D uint8 array and one timestamp per row")

        def copy(view: Any) -> None:
            view[...] = rows

        return self.write_made_rows(ts_ns, rows.shape[1], copy)

    def write_made_rows(self, ts_ns: Any, size_bytes: int, make: Callable[[Any], None]) -> int:
        """:meth:`write_rows` for frames made in place: ``make(view)`` writes frame ``i`` into
        row ``i`` of the ``(len(ts_ns), size_bytes)`` ``uint8`` array it is given, which is
        (where the records allow it) the frame bytes of the records about to be written, so
        the frames are not copied again (e.g. :func:`wire.template.make_rows`).  The same
        records as :meth:`write_frames`.  Returns the count."""
        import numpy as np

        ts = np.asarray(ts_ns)
        n = len(ts)
        if ts.ndim != 1 or size_bytes < 0:
            raise ValueError("write_made_rows takes one timestamp per row and a frame length")
        if (self.format != "pcap" or self.snaplen < max(size_bytes, 65536) or not n
                or ts.dtype.kind not in "iu"
                or int(ts.min()) < 0 or int(ts.max()) >= _PCAP_TS_LIMIT_NS):
            # the per-record path: its checks and messages (a bad timestamp), cuts, pcapng
            rows = np.empty((n, size_bytes), dtype=np.uint8)
            make(rows)
            return self.write_frames([bytes(r) for r in rows], [int(t) for t in ts])
        if self._closed:
            raise ValueError(f"{self.path}: writer is closed")
        ts = ts.astype(np.int64)
        hb = self._record_header.size
        out = np.empty((n, hb + size_bytes), dtype=np.uint8)
        head = np.empty((n, 4), dtype=self._e + "u4")
        head[:, 0] = ts // _NS_PER_S
        head[:, 1] = ts % _NS_PER_S // (1 if self.nanosecond else 1000)
        head[:, 2] = size_bytes
        head[:, 3] = size_bytes
        out[:, :hb] = head.view(np.uint8)
        make(out[:, hb:])
        self._write(out.data)
        self.records_written += n
        return n

    def close(self) -> None:
        """Finish the file: flush, and close it if the writer opened it.  Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.format == "pcapng" and not self._ids and not self.blocks:
                self._ids[(0, self.linktype)] = self._add_idb(self.linktype)
            flush = getattr(self._fp, "flush", None)
            if flush is not None:
                flush()
        finally:
            if self._own:
                self._fp.close()


def _check_uint(name: str, value: object, maximum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {value!r}")
    if not 0 <= value <= maximum:
        raise ValueError(f"{name} {value} is out of range 0..{maximum}")


def write(dest: str | os.PathLike | BinaryIO, records: Iterable[Record], **kw: object) -> int:
    """Write ``records`` to ``dest`` (see :class:`CaptureWriter`); return the count.

    Without a ``linktype`` keyword the file's linktype is that of the first
    record (so a classic pcap of, say, raw-IP records needs no argument).
    """
    it = iter(records)
    if "linktype" not in kw:
        first = next(it, None)
        if first is None:
            it = iter(())
        else:
            if isinstance(first, Record):
                kw["linktype"] = first.linktype
            it = itertools.chain((first,), it)
    with CaptureWriter(dest, **kw) as writer:  # type: ignore[arg-type]
        for rec in it:
            writer.write(rec)
        return writer.records_written

"""Batch decoding of large captures into numpy columns: ``wire.batch.read_columns(path)``.

Every record of a pcap or pcapng file becomes one row; each chunk is a :class:`Columns` (a
dict of equal-length numpy arrays).  Chunks are bounded (``chunk_frames`` rows and about
``chunk_bytes`` of file per chunk), so memory stays flat whatever the file size.

Where the bits come from: no bit position is written here.  :func:`spec_columns` turns a
:class:`~wire.spec.HeaderSpec` and a vector of header offsets into one column per field,
with the byte gathers, shifts and masks computed from ``spec.layout()``; the offsets of the
fields the layering needs (EtherType, TPID, UDP length...) come from the same tables.  What is
written here is only the layering (which header follows which), and it follows
:func:`wire.dissect` rule for rule: a layer is present in a row exactly when ``dissect`` shows
it for that frame, and its values are the ones ``dissect`` shows (``tests/test_batch.py``
checks every column against ``dissect`` on the reference captures and on Hypothesis files).

Columns (``N`` rows):

* record: ``ts_ns`` (int64 ns since the epoch), ``caplen``, ``orig_len`` (int64),
  ``linktype``, ``interface`` (int32).  Linktype 1 (Ethernet) rows are dissected, and the
  LRH, GRH and BTH of linktype 247 (native InfiniBand) rows: ``has.lrh``, ``has.grh``,
  ``lrh.*``, ``grh.*`` (``grh.sgid``/``dgid`` as ``(N, 16)`` uint8), and ``has.bth`` /
  ``bth.*`` hold the IB BTH on those rows (``wire.ib_stack.dissect_ib``'s rules);
  ``offset.ib_bth`` is where it starts and ``offset.ib_end`` where the packet ends before its
  VCRC (-1 elsewhere).  ERF (197) rows are not dissected here.
* presence (bool): ``has.eth``, ``has.vlan``, ``has.ipv4``, ``has.ipv6``, ``has.udp``,
  ``has.bth``, ``has.cnp`` (the CNP's 16-byte header was decoded), ``has.mac_control``,
  ``has.pfc``, ``has.pause``; and ``cnp`` (bool): a BTH with the CNP opcode 0x81.
* one column per field of the ETHERNET (``eth.*``; ``eth.type`` is the EtherType after the
  VLAN tags, -1 when it was not captured), VLAN (``vlan.*``: the outer tag, plus
  ``vlan.count``), IPV4, IPV6, UDP, BTH, MAC_CONTROL, PFC and PAUSE field tables, named
  ``layer.field``.  Integer fields are signed numpy ints wide enough for the field plus the
  sentinel **-1 when the layer is absent** (int8 up to 7 bits, int16 up to 15, int32 up to
  31, int64 up to 63: MACs and IPv4 addresses are int64).  Fields wider than 64 bits (IPv6
  addresses, ``ipv6.src``/``ipv6.dst``) are ``(N, 16)`` uint8 arrays in wire order, zero
  when absent.  Array fields (``pfc.quanta``) are ``(N, count)``, -1 when absent.
* offsets (int64, -1 when absent): ``offset.l3`` (the IP / MAC Control header),
  ``offset.udp`` and ``offset.udp_end`` (where the UDP datagram ends as ``dissect`` takes
  it: clamped to the IP datagram; may exceed ``caplen`` when the snaplen cut the record).

``fields=`` restricts the field columns produced (record, presence and offset columns are
always there); asking for less is faster.
"""

from __future__ import annotations

import contextlib
import os
import stat
import struct
import sys
import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO

import numpy as np

from .bth import BTH
from .errors import CaptureError, TruncatedFile
from .ethernet import ETHERNET, VLAN_TAG, VLAN_TPIDS, EtherType
from .ib import GRH, GRH_NXT_HDR_IBA, LINKTYPE_INFINIBAND, LRH, VCRC_BYTES, Lnh
from .ib_ext import CNP
from .ipv4 import IPPROTO_UDP, IPV4
from .ipv6 import IPV6
from .pcapio import _PCAP_MAGICS, CaptureReader, is_classic_pcap
from .pfc import MAC_CONTROL, PAUSE, PFC, MacControlOpcode
from .roce import CNP_OPCODE, ICRC_BYTES
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .spec import HeaderSpec
from .stack import ROCE_PORTS
from .sunh import SUNH
from .udp import UDP

__all__ = ["Columns", "read_columns", "read_all", "decode_frames", "frames_to_columns",
           "spec_columns", "column_names", "BATCH_SPECS", "LAYERS"]

#: The headers decoded into columns, by column prefix.
BATCH_SPECS: dict[str, HeaderSpec] = {
    "eth": ETHERNET, "vlan": VLAN_TAG, "ipv4": IPV4, "ipv6": IPV6, "udp": UDP, "bth": BTH,
    "mac_control": MAC_CONTROL, "pfc": PFC, "pause": PAUSE, "lrh": LRH, "grh": GRH,
}
#: Layers with a ``has.<layer>`` presence column.
LAYERS = ("eth", "vlan", "ipv4", "ipv6", "udp", "bth", "cnp", "mac_control", "pfc", "pause",
          "lrh", "grh")
_RECORD_COLS = ("ts_ns", "caplen", "orig_len", "linktype", "interface")
_OFFSET_COLS = ("offset.l3", "offset.udp", "offset.udp_end", "offset.ib_bth", "offset.ib_end")

DEFAULT_CHUNK_FRAMES = 65536
DEFAULT_CHUNK_BYTES = 16 << 20
#: Leading bytes of every frame gathered at once (headers beyond are read from the buffer).
HEAD_BYTES = 128
_LINKTYPE_ETHERNET = 1
_PCAP_HEADER_BYTES = 24
_PCAP_RECORD_BYTES = 16
_DEFAULT_MAX_SNAPLEN = 262_144  # as wire.pcapio
_MAX_WARNINGS = 1000  # as wire.pcapio
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1  # the ts_ns column is int64


# ------------------------------------------------------------------------ columns
class Columns(dict):
    """One chunk: column name -> numpy array, every array ``len(self)`` rows long.

    ``len(cols)`` is the number of rows (records), not of columns; ``cols.rows`` says the
    same.  ``cols.present(layer)`` is ``cols["has." + layer]``.  ``cols.frame(i)`` is the
    captured bytes of row ``i``: only while the chunk is the current one of
    :func:`read_columns` (the window of the file it points into is released when the next
    chunk is read; afterwards it raises ``ValueError``).
    """

    __slots__ = ("buf", "head", "rows", "start")

    def __init__(self, rows: int, items: Iterable[tuple[str, np.ndarray]] = (),
                 buf: np.ndarray | None = None,
                 start: np.ndarray | None = None) -> None:
        super().__init__(items)
        self.rows = rows
        self.buf = buf
        self.start = start
        self.head: tuple[np.ndarray, int] | None = None

    def bytes_at(self, rows: np.ndarray, rel: np.ndarray, width: int) -> np.ndarray:
        """``(len(rows), width)`` bytes of the frames ``rows`` from offsets ``rel`` (relative
        to each frame; whole inside the captured bytes), while the chunk is current."""
        if self.buf is None:
            raise ValueError("the frame bytes of this chunk are gone (read the next chunk)")
        if self.head is not None and len(rows):
            hmat, skip = self.head
            if int(rel.max()) + width <= hmat.shape[1] - skip:
                flat = hmat.reshape(-1)
                return _rows(flat, rows * hmat.shape[1] + skip + rel, width)
        return _rows(self.buf, self.start[rows] + rel, width)

    def frame(self, i: int) -> bytes:
        if self.buf is None:
            raise ValueError("the frame bytes of this chunk are gone (read the next chunk)")
        a = int(self.start[i])
        return self.buf[a:a + int(self["caplen"][i])].tobytes()

    def release(self) -> None:
        """Forget the frame bytes (``frame()`` no longer works)."""
        self.buf = self.start = self.head = None

    def __len__(self) -> int:  # rows, so that ``len(cols)`` reads naturally
        return self.rows

    def present(self, layer: str) -> np.ndarray:
        return self["has." + layer]

    def __repr__(self) -> str:
        return f"<Columns rows={self.rows} columns={dict.__len__(self)}>"


def _dtype(bits: int) -> np.dtype:
    for width, dt in ((7, np.int8), (15, np.int16), (31, np.int32), (63, np.int64)):
        if bits <= width:
            return np.dtype(dt)
    raise ValueError(bits)


def column_names(fields: Iterable[str] | None = None) -> list[str]:
    """Every column :func:`decode_frames` produces (given ``fields``), in a stable order."""
    out = list(_RECORD_COLS) + [f"has.{name}" for name in LAYERS] + ["cnp", "vlan.count"]
    out += list(_OFFSET_COLS)
    want = None if fields is None else set(fields)
    for prefix, spec in BATCH_SPECS.items():
        for f in spec.fields:
            name = f"{prefix}.{f.name}"
            if want is None or name in want:
                out.append(name)
    return out


def spec_columns(spec: HeaderSpec, buf: np.ndarray | None, base: np.ndarray | None,
                 names: Iterable[str] | None = None, *,
                 matrix: tuple[np.ndarray, int] | None = None) -> dict[str, np.ndarray]:
    """Field columns of ``spec`` for headers starting at ``buf[base]`` (every header whole in
    ``buf``): the numpy form of :meth:`HeaderSpec.unpack_raw`, derived from ``spec.layout()``.

    Fields of up to 64 bits give integer arrays of the dtype described in the module doc;
    wider (byte-aligned) fields give ``(len(base), bits // 8)`` uint8 arrays; array fields
    give ``(len(base), count)``.  ``matrix=(m, c)`` instead of ``buf``/``base``: a
    C-contiguous 2-D uint8 array whose every row holds one header starting at column ``c``.
    """
    plan = _plan(spec)
    wanted = [p for p in plan if names is None or p[0].name in set(names)]
    out: dict[str, np.ndarray] = {}
    if not wanted:
        return out
    if matrix is None:
        # One gather of the bytes the wanted fields span, row by row (cache friendly).
        lo = min(p[1][0][1] for p in wanted)
        hi = max(p[1][-1][2] for p in wanted) + 1
        mat, col = _rows(buf, base + lo, hi - lo), -lo
    else:
        mat, col = matrix
    n, row = mat.shape
    # A field of up to 8 bytes is read in one strided pass over the rows as a big-endian
    # integer of 1, 2, 4 or 8 bytes starting at its first byte (an unaligned view), then
    # shifted and masked; near the end of a row, byte by byte.
    for f, elems in wanted:
        if f.bits > 64:
            first = col + elems[0][1]
            out[f.name] = mat[:, first:first + f.bits // 8]
            continue
        dt = _dtype(f.bits)
        cols = []
        for pos, first, last, shift in elems:
            nb = last - first + 1
            width = 1 if nb == 1 else 2 if nb == 2 else 4 if nb <= 4 else 8
            c = col + first
            if c + width <= row and n:
                v = np.ndarray((n,), dtype=f">u{width}", buffer=mat, offset=c,
                               strides=(row,))
                rs = 8 * (width - nb) + shift
                if rs:
                    v = v >> rs  # native unsigned, the field in the low bits
                    if pos % 8:  # bits of the first byte before the field
                        v &= f.max_value
                    cols.append(v.astype(dt))
                elif pos % 8 or f.bits % 8:
                    cols.append(v & f.max_value)
                    cols[-1] = cols[-1].astype(dt)
                else:
                    cols.append(v.astype(dt))
                continue
            wide = np.uint64
            v = mat[:, c].astype(wide)
            for j in range(c + 1, c + nb):
                v <<= wide(8)
                v |= mat[:, j]
            if shift:
                v >>= wide(shift)
            if f.bits % 8 or pos % 8:
                v &= wide(f.max_value)
            cols.append(v.astype(dt))
        out[f.name] = cols[0] if f.count == 1 else (
            np.stack(cols, axis=1) if n else np.empty((0, f.count), dt))
    return out


_PLANS: dict[int, tuple] = {}


def _plan(spec: HeaderSpec) -> tuple:
    """(field, [(bit offset, first byte, last byte, right shift) per element]) for every
    field of ``spec``, from ``spec.layout()``; computed once per spec."""
    plan = _PLANS.get(id(spec))
    if plan is None or plan[0] is not spec:
        by: dict[str, list] = {}
        for f, _i, pos in spec.layout():
            first, last = pos // 8, (pos + f.bits - 1) // 8
            by.setdefault(f.name, []).append((pos, first, last, 8 * (last + 1) - (pos + f.bits)))
        plan = _PLANS[id(spec)] = (spec, tuple((f, tuple(by[f.name])) for f in spec.fields))
    return plan[1]


def _rows(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """``buf[at[i]:at[i] + width]`` for every i, as an ``(len(at), width)`` array (one gather
    of whole rows through a sliding-window view: no per-byte index array)."""
    if len(buf) < width:
        return np.empty((len(at), width), np.uint8)
    # every byte offset of buf as the start of one ``width``-byte opaque item
    items = np.ndarray((len(buf) - width + 1,), dtype=np.dtype((np.void, width)), buffer=buf,
                       strides=(1,))
    return items[at].view(np.uint8).reshape(len(at), width)


def _rows_padded(buf: np.ndarray, at: np.ndarray, width: int) -> np.ndarray:
    """:func:`_rows`, zero-filled where a row would run past the end of ``buf``."""
    ok = at + width <= len(buf)
    if ok.all():
        return _rows(buf, at, width)
    out = np.zeros((len(at), width), np.uint8)
    out[ok] = _rows(buf, at[ok], width)
    for i in np.flatnonzero(~ok).tolist():
        a = int(at[i])
        k = max(0, min(width, len(buf) - a))
        out[i, :k] = buf[a:a + k]
    return out


def _offset_of(spec: HeaderSpec, name: str) -> int:
    """Byte offset of a byte-aligned field (from the field table)."""
    byte, shift, _mask = spec.byte_field(name)
    if shift:
        raise ValueError(f"{spec.name}.{name} is not byte-aligned")
    return byte


def _be(buf: np.ndarray, idx: np.ndarray, nbytes: int) -> np.ndarray:
    """Big-endian unsigned integers of ``nbytes`` at ``buf[idx]`` (int64)."""
    v = buf[idx].astype(np.int64)
    for j in range(1, nbytes):
        v = (v << 8) | buf[idx + j]
    return v


# Where the layering reads fields, all from the field tables.
_ETH_TYPE_AT = _offset_of(ETHERNET, "type")
_ETH_TYPE_BYTES = ETHERNET.field("type").bits // 8
_TAG_BYTES = VLAN_TAG.size_bytes
_TPID_AT = _offset_of(VLAN_TAG, "tpid")
_UDP_LEN_AT = _offset_of(UDP, "length")
_TPIDS = np.array(sorted(int(t) for t in VLAN_TPIDS), dtype=np.int64)


def decode_frames(buf: np.ndarray, start: np.ndarray, caplen: np.ndarray,
                  orig_len: np.ndarray | None = None, linktype: np.ndarray | int = 1, *,
                  fields: Iterable[str] | None = None,
                  roce_ports: Iterable[int] = ROCE_PORTS,
                  scaleup: ScaleUpConfig = DEFAULT_SCALEUP,
                  head: tuple[np.ndarray, int] | None = None) -> Columns:
    """Columns for frames held in one uint8 buffer: frame ``i`` is
    ``buf[start[i]:start[i] + caplen[i]]``, ``orig_len[i]`` long on the wire (default: not
    cut).  The record columns ``ts_ns`` and ``interface`` are zero; :func:`read_columns`
    fills them.  ``head`` is (rows of the first bytes of every frame, where the frame starts
    in a row) when the caller already gathered them."""
    start = np.asarray(start, dtype=np.int64)
    n = np.asarray(caplen, dtype=np.int64)
    rows = len(start)
    o = n if orig_len is None else np.asarray(orig_len, dtype=np.int64)
    lt = np.broadcast_to(np.asarray(linktype, dtype=np.int32), (rows,))
    want = None if fields is None else set(fields)
    cols = Columns(rows, buf=buf, start=start)
    cols["ts_ns"] = np.zeros(rows, np.int64)
    cols["caplen"] = n
    cols["orig_len"] = o
    cols["linktype"] = np.ascontiguousarray(lt)
    cols["interface"] = np.zeros(rows, np.int32)
    snapped = o > n
    sc = scaleup
    ports = sorted(int(p) for p in roce_ports)
    # The first bytes of every frame are gathered once into a small matrix (one pass over
    # the big buffer).  A header at the same offset in every row is read from that matrix's
    # columns without any gather; otherwise it is gathered for the rows that have it.
    if head is None:
        head = (_rows_padded(buf, start, HEAD_BYTES), 0)
    hmat, skip = head
    hmat = np.ascontiguousarray(hmat, dtype=np.uint8)
    cols.head = (hmat, skip)
    width = hmat.shape[1] - skip

    def uniform(rel: np.ndarray | int, mask: np.ndarray) -> int | None:
        """The offset shared by every row, when every row is in ``mask``."""
        if isinstance(rel, int):
            return rel
        if not rows or not mask.all() or rel.min() != rel.max():
            return None
        return int(rel[0])

    def values(spec: HeaderSpec, rel: np.ndarray | int, mask: np.ndarray,
               names: Iterable[str]) -> dict[str, np.ndarray]:
        """Fields ``names`` of ``spec`` at relative offset ``rel``: full-length arrays, right
        on the rows of ``mask`` (anything elsewhere)."""
        names = tuple(names)
        if not names:
            return {}
        u = uniform(rel, mask)
        if u is not None and u + spec.size_bytes <= width:
            return spec_columns(spec, None, None, names, matrix=(hmat, skip + u))
        idx = np.flatnonzero(mask)
        out = {}
        if isinstance(rel, int):
            rel = np.full(rows, rel, np.int64)
        part = spec_columns(spec, buf, start[idx] + rel[idx], names) if len(idx) else {}
        for f, _e in _plan(spec):
            if f.name not in names:
                continue
            shape = (rows,) if f.count == 1 else (rows, f.count)
            if f.bits > 64:
                col = np.zeros((rows, f.bits // 8), np.uint8)
            else:
                col = np.zeros(shape, _dtype(f.bits))
            if len(idx):
                col[idx] = part[f.name]
            out[f.name] = col
        return out

    def put(prefix: str, spec: HeaderSpec, mask: np.ndarray, rel: np.ndarray | int,
            names: Iterable[str] = (), skip_: tuple[str, ...] = ()) -> dict[str, np.ndarray]:
        """Fill the wanted columns of ``spec`` (sentinel off ``mask``); return ``names``."""
        wanted = [f for f in spec.fields if f.name not in skip_
                  and (want is None or f"{prefix}.{f.name}" in want)]
        if not mask.any():
            for f in wanted:
                if f.bits > 64:
                    cols[f"{prefix}.{f.name}"] = np.zeros((rows, f.bits // 8), np.uint8)
                else:
                    shape = (rows,) if f.count == 1 else (rows, f.count)
                    cols[f"{prefix}.{f.name}"] = np.full(shape, -1, _dtype(f.bits))
            return {k: np.zeros(rows, np.int64) for k in names}
        got = values(spec, rel, mask, {f.name for f in wanted} | set(names))
        every = mask.all()
        for f in wanted:
            v = got[f.name]
            if not every:
                m = mask if v.ndim == 1 else mask[:, None]
                v = np.where(m, v, 0 if f.bits > 64 else -1).astype(v.dtype)
            cols[f"{prefix}.{f.name}"] = v
        return {k: got[k] for k in names}

    def be(rel: np.ndarray | int, nbytes: int, mask: np.ndarray) -> np.ndarray:
        """Big-endian ``nbytes`` at ``rel`` (int64, full length, right on ``mask``)."""
        u = uniform(rel, mask) if not isinstance(rel, int) else rel
        if u is None and not isinstance(rel, int) and rows and rel.min() == rel.max():
            u = int(rel[0])  # same offset everywhere: the rows off the mask do not matter
        if u is not None and u + nbytes <= width:
            c = skip + u
            v = hmat[:, c].astype(np.int64)
            for j in range(1, nbytes):
                v = (v << 8) | hmat[:, c + j]
            return v
        idx = np.flatnonzero(mask)
        out = np.zeros(rows, np.int64)
        if len(idx):
            out[idx] = _be(buf, start[idx] + rel[idx], nbytes)
        return out

    # ---- Ethernet and VLAN tags
    eth0 = (lt == _LINKTYPE_ETHERNET) & (n >= ETHERNET.size_bytes)
    off: np.ndarray | int = _ETH_TYPE_AT  # relative offset of the next TPID / EtherType
    ntags = np.zeros(rows, np.int64)
    active = eth0
    first_tag = np.zeros(rows, bool)
    level = 0
    while True:
        cand = active & (n - off >= _TAG_BYTES)
        if not cand.any():
            break
        hit = cand & _in(be(off + _TPID_AT, _ETH_TYPE_BYTES, cand), _TPIDS)
        if not hit.any():
            break
        if level == 0:
            first_tag = hit
        off = off + _TAG_BYTES * hit
        ntags += hit
        active = hit
        level += 1
    has2 = eth0 & (n - off >= _ETH_TYPE_BYTES)
    et = be(off, _ETH_TYPE_BYTES, has2)
    type_ok = has2 & ~_in(et, _TPIDS)  # a TPID here: a tag cut short, no EtherType captured
    etype = np.where(type_ok, et, -1)
    gen2 = type_ok & (etype == sc.sue_ethertype) & (ntags == 0)
    has_eth = eth0 & ~gen2
    cols["has.eth"] = has_eth
    put("eth", ETHERNET, has_eth, 0, skip_=("type",))
    if want is None or "eth.type" in want:
        cols["eth.type"] = np.where(has_eth, etype, -1).astype(
            _dtype(ETHERNET.field("type").bits))
    has_vlan = first_tag & has_eth
    cols["has.vlan"] = has_vlan
    cols["vlan.count"] = np.where(has_eth, ntags, 0).astype(np.int8)
    put("vlan", VLAN_TAG, has_vlan, _ETH_TYPE_AT)
    l3 = off + _ETH_TYPE_BYTES  # relative; an int when no row has a tag
    cols["offset.l3"] = np.where(type_ok & has_eth, l3, -1)
    room = n - l3

    # ---- IPv4
    cand4 = has_eth & (etype == EtherType.IPV4) & (room >= IPV4.size_bytes)
    hlen = values(IPV4, l3, cand4, ("ihl",))["ihl"].astype(np.int64) * 4
    has4 = cand4 & ((hlen < IPV4.size_bytes) | (room >= hlen))
    cols["has.ipv4"] = has4
    v4 = put("ipv4", IPV4, has4, l3, ("total_length", "flags", "frag_offset", "protocol"))
    go4 = has4 & (hlen >= IPV4.size_bytes) & (v4["protocol"] == IPPROTO_UDP) \
        & (v4["frag_offset"] == 0) & ((v4["flags"] & 1) == 0)
    total = v4["total_length"].astype(np.int64)
    end4 = np.where(total < hlen, n, _extent(l3 + total, n, o, snapped))

    # ---- IPv6
    has6 = has_eth & (etype == EtherType.IPV6) & (room >= IPV6.size_bytes)
    cols["has.ipv6"] = has6
    v6 = put("ipv6", IPV6, has6, l3, ("payload_length", "next_header"))
    go6 = has6 & (v6["next_header"] == IPPROTO_UDP)
    pay6 = l3 + IPV6.size_bytes
    end6 = _extent(pay6 + v6["payload_length"].astype(np.int64), n, o, snapped)

    # UDP over IPv4, IPv6 or SUNH: where its header is, where the datagram under it ends
    upay = np.where(go4, l3 + hlen, pay6)
    ip_end = np.where(go4, end4, end6)
    over_ip = go4 | go6
    # ---- SUNH + UDP (no pseudo-header: never RoCEv2)
    hsun = has_eth & (etype == sc.sunh_ethertype) & (etype != EtherType.IPV4) \
        & (etype != EtherType.IPV6) & (etype != EtherType.MAC_CONTROL) \
        & (etype != sc.esun_ethertype) & (room >= SUNH.size_bytes)
    gos = hsun & False
    if hsun.any():
        gos = hsun & (values(SUNH, l3, hsun, ("next_header",))["next_header"] == IPPROTO_UDP)
        pays = l3 + SUNH.size_bytes
        big = gos & (n - pays >= UDP.size_bytes)
        ulen_bytes = UDP.field("length").bits // 8
        claimed = pays + np.maximum(be(pays + _UDP_LEN_AT, ulen_bytes, big), UDP.size_bytes)
        keep = big & ((claimed <= n) | (snapped & (claimed <= o)))
        upay = np.where(gos, pays, upay)
        ip_end = np.where(gos, np.where(keep, claimed, n), ip_end)

    # ---- UDP
    hasu = (over_ip | gos) & (np.minimum(ip_end, n) - upay >= UDP.size_bytes)
    cols["has.udp"] = hasu
    cols["offset.udp"] = np.where(hasu, upay, -1)
    vu = put("udp", UDP, hasu, upay, ("dport", "length"))
    ulen = vu["length"].astype(np.int64)
    dport = vu["dport"].astype(np.int64)
    uend = np.minimum(upay + ulen, ip_end)
    udp_ok = hasu & (ulen >= UDP.size_bytes)
    cols["offset.udp_end"] = np.where(udp_ok, uend, -1)

    # ---- BTH (+ the CNP header)
    boff = upay + UDP.size_bytes
    roce = udp_ok & over_ip & (dport != sc.sue_udp_port) & _in(dport, ports) \
        & (uend - boff >= BTH.size_bytes + ICRC_BYTES) \
        & (np.minimum(uend, n) - boff >= BTH.size_bytes)
    cols["has.bth"] = roce
    vb = put("bth", BTH, roce, boff, ("opcode",))
    cnp = roce & (vb["opcode"] == CNP_OPCODE)
    cols["cnp"] = cnp
    cend = boff + BTH.size_bytes + CNP.size_bytes
    cols["has.cnp"] = cnp & (cend <= uend - ICRC_BYTES) & (cend <= n)

    # ---- native InfiniBand (linktype 247): wire.ib_stack.dissect_ib, rule for rule
    ib = (lt == LINKTYPE_INFINIBAND) & (n >= LRH.size_bytes)
    cols["has.lrh"] = ib
    vl = put("lrh", LRH, ib, 0, ("lnh", "pkt_len"))
    lnh = vl["lnh"].astype(np.int64)
    declared = 4 * vl["pkt_len"].astype(np.int64)
    pkt_end = np.select(
        [declared < LRH.size_bytes, declared == n, declared + VCRC_BYTES <= n,
         snapped & (declared + VCRC_BYTES <= o)],
        [n - VCRC_BYTES, n, declared, declared], n - VCRC_BYTES)
    ib_ok = ib & (pkt_end >= LRH.size_bytes)
    after_lrh = LRH.size_bytes
    hasg = ib_ok & (lnh == Lnh.IBA_GLOBAL) & (pkt_end - after_lrh >= GRH.size_bytes) \
        & (n - after_lrh >= GRH.size_bytes)
    cols["has.grh"] = hasg
    vg = put("grh", GRH, hasg, after_lrh, ("nxt_hdr",))
    ib_boff = np.where(lnh == Lnh.IBA_GLOBAL, after_lrh + GRH.size_bytes, after_lrh)
    ib_tr = ib_ok & ((lnh == Lnh.IBA_LOCAL) | (hasg & (vg["nxt_hdr"] == GRH_NXT_HDR_IBA)))
    ib_bth = ib_tr & (pkt_end - ib_boff >= BTH.size_bytes + ICRC_BYTES) \
        & (n - ib_boff >= BTH.size_bytes)
    if ib_bth.any():  # the BTH columns hold the IB BTH on these rows
        vib = values(BTH, ib_boff, ib_bth, [f.name for f in BTH.fields
                                            if want is None or f"bth.{f.name}" in want])
        for name, v in vib.items():
            cols[f"bth.{name}"] = np.where(ib_bth, v, cols[f"bth.{name}"]).astype(v.dtype)
        cols["has.bth"] = roce | ib_bth
    cols["offset.ib_bth"] = np.where(ib_bth, ib_boff, -1)
    cols["offset.ib_end"] = np.where(ib_ok, pkt_end, -1)

    # ---- MAC Control: PFC, PAUSE
    hasm = has_eth & (etype == EtherType.MAC_CONTROL) & (room >= MAC_CONTROL.size_bytes)
    cols["has.mac_control"] = hasm
    vm = put("mac_control", MAC_CONTROL, hasm, l3, ("opcode",))
    after = l3 + MAC_CONTROL.size_bytes
    for name, spec, op in (("pfc", PFC, MacControlOpcode.PFC),
                           ("pause", PAUSE, MacControlOpcode.PAUSE)):
        h = hasm & (vm["opcode"] == op) & (n - after >= spec.size_bytes)
        cols[f"has.{name}"] = h
        put(name, spec, h, after)
    return cols


def _in(a: np.ndarray, values: Iterable[int]) -> np.ndarray:
    """``np.isin`` for a handful of values (faster)."""
    out = np.zeros(a.shape, bool)
    for v in values:
        out |= a == v
    return out


def _extent(end: np.ndarray, n: np.ndarray, o: np.ndarray, snapped: np.ndarray) -> np.ndarray:
    """Where an IP datagram ends (``dissect``'s ``_ip_extent``): the claimed end when captured
    or explained by the snaplen, else the end of the captured frame."""
    return np.where((end <= n) | (snapped & (end <= o)), end, n)


# ------------------------------------------------------------------------ reading
def frames_to_columns(frames: Iterable, **kw: Any) -> Columns:
    """Columns for an iterable of frames (bytes) or :class:`~wire.pcapio.Record` s."""
    datas, origs, ts, lts, ifs = [], [], [], [], []
    for f in frames:
        if isinstance(f, bytes | bytearray | memoryview):
            datas.append(bytes(f))
            origs.append(len(f))
            ts.append(0)
            lts.append(_LINKTYPE_ETHERNET)
            ifs.append(0)
        else:
            datas.append(f.data)
            origs.append(f.orig_len)
            ts.append(f.ts_ns)
            lts.append(f.linktype)
            ifs.append(f.interface)
    return _pack(datas, origs, ts, lts, ifs, **kw)


def _pack(datas, origs, ts, lts, ifs, **kw) -> Columns:
    lens = np.fromiter((len(d) for d in datas), np.int64, len(datas))
    starts = np.zeros(len(datas), np.int64)
    if len(datas) > 1:
        np.cumsum(lens[:-1], out=starts[1:])
    buf = np.frombuffer(b"".join(datas), np.uint8)
    cols = decode_frames(buf, starts, lens, np.array(origs, np.int64),
                         np.array(lts, np.int32), **kw)
    cols["ts_ns"] = np.array(ts, np.int64)
    cols["interface"] = np.array(ifs, np.int32)
    return cols


def read_columns(source: str | os.PathLike | BinaryIO, *,
                 chunk_frames: int | None = None,
                 chunk_bytes: int | None = None,
                 fields: Iterable[str] | None = None,
                 roce_ports: Iterable[int] = ROCE_PORTS,
                 scaleup: ScaleUpConfig = DEFAULT_SCALEUP,
                 max_record_bytes: int = 1 << 24,
                 warnings: list | None = None) -> Iterator[Columns]:
    """Yield :class:`Columns` chunks of at most ``chunk_frames`` rows for every record of a
    pcap or pcapng file, in file order (defaults: :data:`DEFAULT_CHUNK_FRAMES`,
    :data:`DEFAULT_CHUNK_BYTES`, read when called).

    A classic pcap file given by path is read in ``chunk_bytes`` blocks and its record
    headers are located with numpy; pcapng files and file objects go through
    :class:`~wire.pcapio.CaptureReader`.  Errors are those of ``CaptureReader``
    (:class:`~wire.errors.CaptureError` naming the file, record, offset and field), raised
    after every good record before the fault has been yielded.  ``warnings``, when a list,
    receives the reader's ``(record index, message)`` warnings (captured length above the
    original length; pcapng Simple Packet Blocks).

    A classic pcap is read with ``readinto`` into buffers of its own (no memory map), so a
    file cut or shrunk while it is read is no crash: the records before the cut are
    yielded, then :class:`~wire.errors.TruncatedFile` says so.  A timestamp beyond the
    int64 ``ts_ns`` column (pcapng can hold ~2**64 units of a coarse resolution) is a
    :class:`~wire.errors.CaptureError` naming the record [timestamp].
    """
    chunk_frames = DEFAULT_CHUNK_FRAMES if chunk_frames is None else chunk_frames
    chunk_bytes = DEFAULT_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
    if chunk_frames < 1 or chunk_bytes < 1:
        raise ValueError("chunk_frames and chunk_bytes must be positive")
    kw = {"fields": fields, "roce_ports": frozenset(roce_ports), "scaleup": scaleup}
    if isinstance(source, str | os.PathLike) and is_classic_pcap(source):
        # a regular file only: a pipe's first bytes are left for the one reader below
        yield from _read_pcap(os.fspath(source), chunk_frames, chunk_bytes,
                              max_record_bytes, kw, warnings)
        return
    reader = CaptureReader(source, max_record_bytes=max_record_bytes)
    with reader:
        try:
            yield from _read_generic(reader, chunk_frames, chunk_bytes, kw)
        finally:
            if warnings is not None:
                warnings.extend(reader.warnings)


def _read_generic(reader: CaptureReader, chunk_frames: int, chunk_bytes: int, kw: dict
                  ) -> Iterator[Columns]:
    datas, origs, ts, lts, ifs = [], [], [], [], []
    size = 0
    try:
        for rec in reader:
            if not _I64_MIN <= rec.ts_ns <= _I64_MAX:
                raise CaptureError(f"timestamp {rec.ts_ns} ns does not fit the int64 ts_ns "
                                   "column (beyond year 2262); file corrupt?", path=reader.path,
                                   record=reader.records_read - 1, field="timestamp")
            datas.append(rec.data)
            origs.append(rec.orig_len)
            ts.append(rec.ts_ns)
            lts.append(rec.linktype)
            ifs.append(rec.interface)
            size += len(rec.data)
            if len(datas) >= chunk_frames or size >= chunk_bytes:
                yield _pack(datas, origs, ts, lts, ifs, **kw)
                datas, origs, ts, lts, ifs = [], [], [], [], []
                size = 0
    except CaptureError:
        if datas:
            yield _pack(datas, origs, ts, lts, ifs, **kw)
        raise
    if datas:
        yield _pack(datas, origs, ts, lts, ifs, **kw)


def _read_pcap(path: str, chunk_frames: int, chunk_bytes: int, max_record_bytes: int,
               kw: dict, warnings: list | None) -> Iterator[Columns]:
    """Classic pcap through windows of about ``chunk_bytes`` read with ``readinto`` (each
    dropped before the next is needed, so resident memory stays bounded whatever the file
    size).  Not a memory map: a file truncated under a map kills the process (SIGBUS)."""
    with open(path, "rb") as fp:
        st = os.fstat(fp.fileno())
        head = fp.read(_PCAP_HEADER_BYTES)
        major = struct.unpack(_PCAP_MAGICS[head[:4]][0] + "H", head[4:6])[0] \
            if len(head) >= 6 else 0
        if not stat.S_ISREG(st.st_mode) or len(head) < _PCAP_HEADER_BYTES or major != 2:
            # not a regular file, or a bad header: the reader does it (and says what is wrong)
            yield from _resume(path, _PCAP_HEADER_BYTES, 0, chunk_frames, chunk_bytes,
                               max_record_bytes, kw, warnings)
            return
        e, frac_ns = _PCAP_MAGICS[head[:4]]
        _major, _minor, _z, _s, snaplen, lt_field = struct.unpack(e + "HHiIII", head[4:])
        limit = min(max(snaplen, _DEFAULT_MAX_SNAPLEN), max_record_bytes)
        linktype = lt_field & 0xFFFF
        u32 = np.dtype(e + "u4")
        rec_fmt = struct.Struct(e + "I")
        size = st.st_size
        window = max(chunk_bytes, limit + _PCAP_RECORD_BYTES)
        stage1 = _locate(fp.fileno(), size, window, rec_fmt, u32, limit, chunk_frames)
        index = 0
        # Two stages in a pipeline: a worker thread maps the next window, finds its records
        # and gathers their first bytes while this thread decodes the current chunk (numpy
        # releases the GIL in both), one chunk ahead.
        with ThreadPoolExecutor(1, thread_name_prefix="wire.batch") as ex:
            fut = ex.submit(next, stage1, None)
            try:
                while True:
                    item = fut.result()
                    if item is None:
                        return
                    if item[0] == "resume":
                        # an absurd length, or a record cut by the end of the file: the
                        # reader says what is wrong (after the records before it)
                        yield from _resume(path, item[1], index, chunk_frames, chunk_bytes,
                                           max_record_bytes, kw, warnings)
                        if len(item) > 2:  # the file shrank, but at a record boundary
                            raise TruncatedFile(
                                f"file shrank from {item[2]} to {item[3]} bytes while being "
                                "read (truncated under us?)", path=path, record=index,
                                offset=item[1], field="record_header")
                        return
                    fut = ex.submit(next, stage1, None)
                    _kind, win, starts, hm = item
                    rh = np.ascontiguousarray(hm[:, :_PCAP_RECORD_BYTES]).view(u32)
                    sec, frac, incl, orig = (rh[:, j].astype(np.int64) for j in range(4))
                    cols = decode_frames(win.arr, starts + _PCAP_RECORD_BYTES, incl, orig,
                                         linktype, head=(hm, _PCAP_RECORD_BYTES), **kw)
                    cols["ts_ns"] = sec * 1_000_000_000 + frac * frac_ns
                    if warnings is not None and (incl > orig).any():
                        for i in np.flatnonzero(incl > orig).tolist():
                            _warn(warnings, index + i,
                                  f"incl_len {incl[i]} > orig_len {orig[i]}")
                    index += len(starts)
                    del rh, hm, item
                    try:
                        yield cols
                    finally:
                        cols.release()
                        del cols
                        win.drop()
            finally:
                # stop the worker cleanly (the consumer may have stopped early)
                with contextlib.suppress(BaseException):
                    fut.result()
                stage1.close()


class _Window:
    """A window of the file read into memory, dropped when the locating stage is done with it
    and no chunk in use points into it (the two stages run in different threads)."""

    __slots__ = ("arr", "lock", "owner", "pool", "refs")

    def __init__(self, owner: np.ndarray, size: int, pool: list) -> None:
        self.owner = owner
        self.arr = owner[:size]
        self.pool = pool
        self.refs = 1  # the locating stage
        self.lock = threading.Lock()

    def take(self) -> None:
        with self.lock:
            self.refs += 1

    def drop(self) -> None:
        with self.lock:
            self.refs -= 1
            if self.refs:
                return
            self.arr = None
            owner, self.owner = self.owner, None
            # Reuse the buffer (no fresh pages to fault in) unless something still views
            # it: a view holds a reference to its owner (ours + getrefcount's = 2).
            if sys.getrefcount(owner) <= 2 and len(self.pool) < 4:
                self.pool.append(owner)


def _locate(fd: int, size: int, window: int, rec_fmt: struct.Struct, u32: np.dtype,
            limit: int, chunk_frames: int) -> Iterator[tuple]:
    """The first stage: ("chunk", window, record offsets, first bytes of each record) per
    chunk, then ("resume", file offset) if a record is absurd or cut by the end of file, or
    ("resume", file offset, size at the start, size now) if the file shrank meanwhile."""
    at = _PCAP_HEADER_BYTES  # file offset of the next record
    first_size = size
    shrunk = False
    pool: list[np.ndarray] = []  # buffers of ``window`` bytes no chunk uses any more
    while at < size:
        wstart = at
        wlen = min(size - wstart, window)
        try:
            arr = pool.pop()
        except IndexError:
            arr = np.empty(window, np.uint8)
        got = 0
        view = memoryview(arr)[:wlen]
        while got < wlen:
            n = os.preadv(fd, [view[got:]], wstart + got)
            if n <= 0:
                break
            got += n
        del view
        if got < wlen:  # the file shrank under us: take what is there, then say so
            shrunk = True
            size = wstart + got
            wlen = got
        win = _Window(arr, wlen, pool)
        del arr
        try:
            pos = at - wstart
            bad = False
            while True:
                starts, hm, pos, bad = _walk(win.arr, pos, wlen, rec_fmt, u32, limit,
                                             chunk_frames, _PCAP_RECORD_BYTES + HEAD_BYTES)
                if not len(starts):
                    break
                win.take()
                yield "chunk", win, starts, hm
                if bad:
                    break
        finally:
            win.drop()
        moved = wstart + pos != at
        at = wstart + pos
        if bad or (not moved and at < size):
            yield ("resume", at, first_size, size) if shrunk else ("resume", at)
            return
    if shrunk:
        yield "resume", at, first_size, size


def _warn(warnings: list, index: int, message: str) -> None:
    """As CaptureReader._warn: at most 1000 warnings, then one saying the rest were dropped."""
    if len(warnings) < _MAX_WARNINGS:
        warnings.append((index, message))
    elif len(warnings) == _MAX_WARNINGS:
        warnings.append((index, "further warnings suppressed"))


def _walk(arr: np.ndarray, pos: int, end: int, rec_fmt: struct.Struct, u32: np.dtype,
          limit: int, max_n: int, width: int) -> tuple[np.ndarray, np.ndarray, int, bool]:
    """Complete records in ``arr[pos:end]`` (at most ``max_n``): (their offsets, the first
    ``width`` bytes of each, zero-padded past ``end``), the offset after the last record
    taken, and whether an absurd length stopped the walk.

    Runs of equal-sized records (the common case) are found with numpy: the next ``k``
    records are guessed to have the same length as this one and the guess is checked in
    bulk, on the rows gathered anyway; where it fails, a short Python walk takes over."""
    out: list[tuple[np.ndarray, np.ndarray | None]] = []
    small: list[int] = []
    count = 0
    unpack = rec_fmt.unpack_from
    hdr = _PCAP_RECORD_BYTES
    bad = False
    while count < max_n and pos + hdr <= end:
        length = unpack(arr, pos + 8)[0]
        if length > limit:
            bad = True
            break
        step = hdr + length
        k = min((end - pos) // step, max_n - count)
        if k == 0:
            break  # the record is not all in the buffer
        if k >= 16:
            cand = pos + step * np.arange(k, dtype=np.int64)
            probe = _rows(arr, cand[:64] + 8, 4).view(u32).ravel()
            wrong = np.flatnonzero(probe != length)
            if len(wrong):
                m, rows = int(wrong[0]), None
            else:  # looks like a run: gather the rows, check every length on them
                rows = _rows_padded(arr[:end], cand, width)
                lens = np.ascontiguousarray(rows[:, 8:12]).view(u32).ravel()
                wrong = np.flatnonzero(lens != length)
                m = int(wrong[0]) if len(wrong) else k
                rows = rows[:m]
            if small:
                out.append((np.array(small, np.int64), None))
                small = []
            out.append((cand[:m], rows))
            count += m
            pos += step * m
            if m >= 16:
                continue
        for _ in range(256):  # a short Python walk over records of varying size
            if count >= max_n or pos + hdr > end:
                break
            length = unpack(arr, pos + 8)[0]
            if length > limit:
                bad = True
                break
            if pos + hdr + length > end:
                break
            small.append(pos)
            pos += hdr + length
            count += 1
        if bad:
            break
    if small:
        out.append((np.array(small, np.int64), None))
    if not out:
        return np.empty(0, np.int64), np.empty((0, width), np.uint8), pos, bad
    heads = [h if h is not None else _rows_padded(arr[:end], st, width) for st, h in out]
    if len(out) == 1:
        return out[0][0], heads[0], pos, bad
    return np.concatenate([st for st, _h in out]), np.concatenate(heads), pos, bad


def _resume(path: str, offset: int, index: int, chunk_frames: int, chunk_bytes: int,
            max_record_bytes: int, kw: dict, warnings: list | None = None
            ) -> Iterator[Columns]:
    """Continue with :class:`CaptureReader` from record ``index`` at file ``offset`` (for
    what the fast path does not handle: cut or absurd records, bad headers)."""
    reader = CaptureReader(path, max_record_bytes=max_record_bytes)
    with reader:
        if index or offset != _PCAP_HEADER_BYTES:
            reader._fp.seek(offset)
            reader._offset = offset
            reader.records_read = index
        try:
            yield from _read_generic(reader, chunk_frames, chunk_bytes, kw)
        finally:
            if warnings is not None:
                for i, msg in reader.warnings:
                    _warn(warnings, i, msg)


def read_all(source: str | os.PathLike | BinaryIO, **kw: Any) -> Columns:
    """Every record of a capture as one :class:`Columns` (the chunks concatenated): for files
    that fit in memory."""
    chunks = list(read_columns(source, **kw))
    if not chunks:
        return frames_to_columns([], fields=kw.get("fields"))
    if len(chunks) == 1:
        return chunks[0]
    out = Columns(sum(c.rows for c in chunks))
    for key in chunks[0]:
        out[key] = np.concatenate([c[key] for c in chunks])
    return out

"""pcap records <-> JSON objects (the ``lossless decode -f jsonl`` / ``lossless craft`` schema).

A JSON record is the layer dict of :meth:`wire.Decoded.to_dict` plus record keys:
``index`` (0-based, output only), ``ts_ns`` (integer ns since the epoch), ``caplen``
(captured bytes), ``len`` (bytes on the wire), and, when not the defaults, ``interface``
(pcapng interface id) and ``linktype``.  See ``docs/schema.md``.

On craft: a record with ``caplen < len`` was cut by the capture's snaplen, so the built frame
is cut to ``caplen`` and keeps ``len``; a record with ``caplen`` but no ``len`` is cut to
``caplen`` with ``len`` = the built length; otherwise (``caplen == len``) the record is
complete and both lengths are taken from the built frame, so editing a decoded record with jq
never truncates it.  A
missing ``ts_ns`` is the previous record's plus 1 µs (0 for the first).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .errors import BadValue
from .pcapio import Record
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .stack import ROCE_PORTS, build, dissect

__all__ = ["LINKTYPE_ETHERNET", "record_to_dict", "record_from_dict", "DEFAULT_TS_STEP_NS"]

#: LINKTYPE_ETHERNET (tcpdump.org link-layer header types).
LINKTYPE_ETHERNET = 1
DEFAULT_TS_STEP_NS = 1000


def record_to_dict(index: int, rec: Record, *, roce_ports: Iterable[int] = ROCE_PORTS,
                   scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> dict[str, object]:
    """Decode one record into the JSON schema."""
    out: dict[str, object] = {"index": index, "ts_ns": rec.ts_ns, "caplen": len(rec.data),
                              "len": rec.orig_len}
    if rec.interface:
        out["interface"] = rec.interface
    if rec.linktype != LINKTYPE_ETHERNET:
        out["linktype"] = rec.linktype
        out["raw"] = rec.data.hex()
        out["problems"] = [f"linktype {rec.linktype} is not decoded (only Ethernet, 1)"]
        return out
    out.update(dissect(rec.data, rec.orig_len, roce_ports=roce_ports,
                       scaleup=scaleup).to_dict())
    return out


def _int_key(obj: Mapping, key: str, default: int | None) -> int | None:
    v = obj.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise BadValue(f"expected a non-negative integer, got {v!r}", field=key)
    return v


def record_from_dict(obj: Mapping[str, object], prev_ts_ns: int | None = None, *,
                     recompute: bool = False, roce_ports: Iterable[int] = ROCE_PORTS,
                     scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> Record:
    """Build one record from the JSON schema.  Raises :class:`~wire.errors.BadValue`."""
    if not isinstance(obj, Mapping):
        raise BadValue(f"a record must be a JSON object, got {type(obj).__name__}")
    default_ts = 0 if prev_ts_ns is None else prev_ts_ns + DEFAULT_TS_STEP_NS
    ts_ns = _int_key(obj, "ts_ns", default_ts)
    linktype = _int_key(obj, "linktype", LINKTYPE_ETHERNET)
    interface = _int_key(obj, "interface", 0)
    caplen = _int_key(obj, "caplen", None)
    orig_len = _int_key(obj, "len", None)
    layers = {k: v for k, v in obj.items() if k not in ("index", "ts_ns", "caplen", "len",
                                                         "interface", "linktype")}
    if linktype != LINKTYPE_ETHERNET:
        raw = layers.get("raw", "")
        try:
            data = bytes.fromhex(raw) if isinstance(raw, str) else b""
        except ValueError:
            raise BadValue(f"expected hex bytes, got {raw!r}", layer="raw") from None
    else:
        data = build(layers, recompute=recompute, roce_ports=roce_ports, scaleup=scaleup)
    full = len(data)
    if caplen is not None and not recompute:
        if orig_len is None and caplen < full:  # hand-written: "capture only caplen bytes"
            data = data[:caplen]
        elif orig_len is not None and caplen < orig_len:  # cut by snaplen: reproduce the cut
            data = data[:caplen]
            full = orig_len
        elif orig_len is not None and caplen > orig_len and caplen == len(data):
            full = orig_len  # an odd record (incl_len > orig_len) kept as it was
    assert ts_ns is not None and linktype is not None and interface is not None
    return Record(ts_ns=ts_ns, data=data, orig_len=full, linktype=linktype, interface=interface)

"""lossless.wire: RoCEv2, PFC/PAUSE, ECN, scale-up Ethernet and native InfiniBand codecs
and pcap I/O.

The public surface is small and stable::

    import wire
    d = wire.dissect(frame)               # -> wire.Decoded; d["bth"].psn, d.to_dict()
    frame = wire.build({"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"}})
    for rec in wire.read("capture.pcapng"): ...   # wire.Record(ts_ns, data, orig_len, ...)
    wire.write("out.pcap", records)
    for cols in wire.read_columns("big.pcap"): ... # numpy columns per chunk (wire.batch)
    d = wire.dissect_record(rec)          # by linktype: 1 Ethernet, 247 InfiniBand, 197 ERF
    f = wire.build_ib({"lrh": {"dlid": 5}, "bth": {}})  # native IB (wire.ib_stack)

Importing this package imports neither Scapy nor matplotlib (Scapy layers live in
:mod:`wire.scapy_layers`, installed explicitly with ``install()``), nor numpy: the batch
decoder (:mod:`wire.batch`: ``read_columns``, ``read_all``, ``Columns``) is imported on first
use of those names.
"""

from typing import TYPE_CHECKING, Any

from .bth import Opcode, opcode_name
from .ecn import Ecn, get_ecn, mark_ce, set_ecn
from .errors import (
    BadLength,
    BadMagic,
    BadValue,
    CaptureError,
    DecodeError,
    Truncated,
    TruncatedFile,
)
from .ib_stack import build_erf, build_ib, dissect_erf, dissect_ib, dissect_record
from .pcapio import CaptureReader, CaptureWriter, Record, read, write
from .pfc import ps_to_quanta, quanta_to_ns, quanta_to_ps
from .roce import icrc
from .spec import Field, HeaderSpec, Layer
from .stack import ROCE_PORTS, SPECS, Decoded, build, dissect

if TYPE_CHECKING:  # type checkers see the lazily imported batch API's real signatures
    from .batch import Columns, read_all, read_columns

__version__ = "0.1.0"

__all__ = [
    "SPECS", "ROCE_PORTS", "BadLength", "BadMagic", "BadValue", "CaptureError", "CaptureReader",
    "CaptureWriter", "DecodeError", "Decoded", "Ecn", "Field", "HeaderSpec", "Layer", "Opcode",
    "Record", "Truncated", "TruncatedFile", "build", "dissect", "get_ecn", "icrc", "mark_ce",
    "opcode_name", "ps_to_quanta", "quanta_to_ns", "quanta_to_ps", "read", "set_ecn", "write",
    "Columns", "read_columns", "read_all", "dissect_ib", "build_ib", "dissect_erf",
    "build_erf", "dissect_record",
]

_BATCH = ("Columns", "read_columns", "read_all")


def __getattr__(name: str) -> Any:
    """The batch API (numpy) is imported lazily: ``import wire`` stays light."""
    if name in _BATCH:
        from . import batch

        return getattr(batch, name)
    raise AttributeError(f"module 'wire' has no attribute {name!r}")

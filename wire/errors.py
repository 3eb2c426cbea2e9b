"""Exceptions raised by :mod:`wire`.

Every decoding failure is a :class:`DecodeError` (a ``ValueError``), never a
``struct.error`` or ``IndexError``.  Capture-file failures are
:class:`CaptureError` and carry the file name, the record index and the
field that was wrong, so a command-line tool can print one clear line.
"""

from __future__ import annotations

__all__ = [
    "describe",
    "DecodeError",
    "Truncated",
    "BadLength",
    "BadValue",
    "CaptureError",
    "BadMagic",
    "TruncatedFile",
]


def describe(v: object) -> str:
    """What a value is, for "expected ..., got X" messages: ``a dict``, ``a list of 2 items``,
    ``the string 'x'``, ``the number 5``, ``null``."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return f"the boolean {str(v).lower()}"
    if isinstance(v, int | float):
        return f"the number {v!r}"
    if isinstance(v, str):
        return f"the string {v[:40]!r}" + ("..." if len(v) > 40 else "")
    if isinstance(v, dict):
        return "a dict"
    if isinstance(v, list | tuple):
        return {0: "an empty list", 1: "a list of 1 item"}.get(len(v), f"a list of {len(v)} items")
    return f"a {type(v).__name__}"


class DecodeError(ValueError):
    """Bytes that cannot be decoded as the header they should hold."""

    def __init__(self, message: str, *, layer: str | None = None, field: str | None = None,
                 offset: int | None = None) -> None:
        self.layer = layer
        self.field = field
        self.offset = offset
        where = ".".join(p for p in (layer, field) if p)
        if offset is not None:
            where = f"{where} at byte {offset}" if where else f"byte {offset}"
        super().__init__(f"{where}: {message}" if where else message)


class Truncated(DecodeError):
    """The input ends before the header does."""


class BadLength(DecodeError):
    """A length field disagrees with the bytes that are there."""


class BadValue(DecodeError):
    """A field holds a value the codec cannot accept (e.g. out of range on build)."""


class CaptureError(ValueError):
    """A pcap/pcapng file that cannot be read further.

    ``path`` names the file, ``record`` the 0-based index of the record that
    failed (``None`` when the file header itself is bad), ``offset`` the byte
    offset in the file and ``field`` the header field at fault.
    """

    def __init__(self, message: str, *, path: str | None = None, record: int | None = None,
                 offset: int | None = None, field: str | None = None) -> None:
        self.path = path
        self.record = record
        self.offset = offset
        self.field = field
        self.message = message
        parts = [path or "<stream>"]
        if record is not None:
            parts.append(f"record {record}")
        if offset is not None:
            parts.append(f"offset {offset}")
        if field is not None:
            parts.append(f"field {field}")
        super().__init__(f"{': '.join(parts)}: {message}")


class BadMagic(CaptureError):
    """The file does not start with a pcap or pcapng magic number."""


class TruncatedFile(CaptureError):
    """The file ends inside a record or block header or body."""

"""Construct structs for every header, *derived* from the field tables (not hand-written).

Nothing in this module states a bit position: :func:`struct_for` walks a
:class:`~wire.spec.HeaderSpec`'s fields in order and emits one ``BitsInteger`` per field (an
``Array`` of ``BitsInteger`` for fields with ``count > 1``, such as PFC's eight quanta) inside
a ``BitStruct``.  Change a field table and the struct follows; ``tests/test_derived_forms.py``
proves on random values that the struct, :meth:`HeaderSpec.pack`/``unpack_raw`` and the Scapy
layer of :mod:`wire.scapy_layers` agree bit for bit.

Values are converted at the boundary (the trap of Construct's ``Enum``, whose parsed values
compare unequal to our ``IntEnum`` members, is avoided by not using it):

* ``parse(buf)`` returns a plain ``dict`` of raw integers (lists for arrays) equal to
  ``spec.unpack_raw(buf)``: no ``Container``, no ``_io`` key, no enum wrappers.
* ``build(values)`` accepts what ``spec.pack`` accepts: raw integers, ``IntEnum`` members, shown
  values (``"aa:bb:cc:dd:ee:ff"``, dotted quads, IPv6 text, hex strings, enum names); missing
  fields take the spec's defaults.  Out-of-range values raise :class:`~wire.errors.BadValue`.

Construct costs tens of microseconds per header: use it for interoperability and tests, never
on a hot path (:mod:`wire.spec` and :mod:`wire.batch` are the fast codecs).  This module is the
only one that imports ``construct``; ``import wire`` does not.

    >>> from wire.construct_defs import STRUCTS
    >>> STRUCTS["bth"].parse(bytes(12))["opcode"]
    0
"""

from __future__ import annotations

from collections.abc import Mapping

import construct as cs

from .errors import BadValue
from .spec import HeaderSpec, parse_value
from .stack import SPECS

__all__ = ["STRUCTS", "struct_for"]


class _RawValues(cs.Adapter):
    """Container of the generated ``BitStruct`` <-> plain dict of raw integers."""

    def __init__(self, subcon: cs.Construct, spec: HeaderSpec) -> None:
        super().__init__(subcon)
        self.spec = spec

    def _decode(self, obj, context, path):
        out: dict[str, object] = {}
        for f in self.spec.fields:
            v = obj[f.name]
            out[f.name] = [int(x) for x in v] if f.count > 1 else int(v)
        return out

    def _encode(self, obj, context, path):
        if not isinstance(obj, Mapping):
            raise BadValue(f"expected a mapping of field values, got {type(obj).__name__}",
                           layer=self.spec.name)
        unknown = set(obj) - set(self.spec.field_names) - set(self.spec.derived)
        if unknown:
            raise BadValue(f"unknown field(s) {sorted(unknown)}", layer=self.spec.name)
        out: dict[str, object] = {}
        for f in self.spec.fields:
            v = obj.get(f.name, f.default)
            if f.count == 1:
                out[f.name] = parse_value(f, v, self.spec.name)
                continue
            if isinstance(v, int):
                v = [v] * f.count
            if not isinstance(v, list | tuple) or len(v) != f.count:
                raise BadValue(f"expected a list of {f.count} values", layer=self.spec.name,
                               field=f.name)
            out[f.name] = [parse_value(f, x, self.spec.name) for x in v]
        return out


def struct_for(spec: HeaderSpec) -> cs.Construct:
    """A Construct struct for ``spec``, generated from its field table (a new object each call).

    ``struct.parse(buf)`` == ``spec.unpack_raw(buf)``; ``struct.build(values)`` ==
    ``spec.pack(values)``; ``struct.sizeof()`` == ``spec.size_bytes``.
    """
    members = []
    for f in spec.fields:
        element = cs.BitsInteger(f.bits)
        sub = element if f.count == 1 else cs.Array(f.count, element)
        members.append(f.name / sub)
    return _RawValues(cs.BitStruct(*members), spec)


#: layer name -> Construct struct, one for every spec in :data:`wire.stack.SPECS`.
STRUCTS: dict[str, cs.Construct] = {name: struct_for(spec) for name, spec in SPECS.items()}

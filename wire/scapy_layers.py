"""Scapy layers for every header, *derived* from the field tables (not hand-written).

Each class is generated from a :class:`~wire.spec.HeaderSpec` by walking
``spec.layout()``: one Scapy field per field element, in wire order:

* ``fmt="mac"`` / ``"ipv4"`` / ``"ipv6"`` fields that start and end on a byte boundary and
  are 48 / 32 / 128 bits wide become ``MACField`` / ``IPField`` / ``IP6Field`` (they map 1:1
  to the bits); a field with an enum becomes ``BitEnumField`` (names from the ``IntEnum``);
  ``fmt="hex"`` becomes ``XBitField``; everything else ``BitField`` (Scapy's ``BitField``
  handles any width: 24, 48, 64 and 128 bits are all tested).
* An array field (``count > 1``) becomes one field per element named ``<name><index>``: PFC's
  ``quanta`` are ``quanta0`` ... ``quanta7``.  :func:`to_raw` regroups them into a list, and
  :func:`from_values` accepts the list.

Class names carry the prefix ``LL_`` (``LL_BTH``, ``LL_RETH``, ``LL_PFC`` ...; Packet ``name``
"lossless BTH") so that they never clash with Scapy's own ``BTH``/``AETH``/``MACControl``.
:data:`LAYERS` maps every layer name of :data:`wire.stack.SPECS` to its class.
``LL_Ether``, ``LL_VLAN``, ``LL_IPv4``, ``LL_IPv6`` and ``LL_UDP`` are plain header views
(no lengths or checksums computed, never chained): frames are carried by Scapy's own
``Ether``/``Dot1Q``/``IP``/``IPv6``/``UDP``, on which the RoCE and MAC Control layers sit.

The ICRC is **not** part of the BTH (Scapy's ``scapy.contrib.roce`` makes it a field of its
BTH, so a bare BTH cannot be dissected): it is the separate 4-byte little-endian trailer layer
:class:`LL_ICRC`.  When an ``LL_BTH`` is dissected on top of a UDP layer, Scapy's UDP has
already cut its payload at the UDP length (so the Ethernet padding of short frames is a
``Padding`` layer after the datagram); ``LL_BTH`` then splits the last 4 bytes of the datagram
off as ``LL_ICRC`` before dissecting the extended headers and payload.  A bare ``LL_BTH`` (no
UDP below it) does not know where the datagram ends and takes no ICRC: everything after the
headers is payload.  Payload and RoCE pad bytes (PadCnt) stay together in one ``Raw``.
On build, an ``LL_ICRC`` whose ``value`` is ``None`` is computed by :func:`wire.roce.icrc`
from the IP and UDP layers below the BTH; :meth:`LL_ICRC.expected` / :meth:`LL_ICRC.valid`
check a dissected one (the datagram ends at the UDP length, so Ethernet padding is never
counted in, unlike Scapy's S1 bug).

**Native InfiniBand** (:mod:`wire.ib`): ``LL_LRH``, ``LL_GRH``, ``LL_RWH``, ``LL_MAD``,
``LL_IB_FC`` and ``LL_ERF`` are generated like the others; ``install()`` chains ``LL_LRH`` to
``LL_GRH`` (LNH 3), ``LL_BTH`` (LNH 2) and ``LL_RWH`` (LNH 0), and ``LL_GRH`` to ``LL_BTH``
(NxtHdr 0x1B).  A BTH over an LRH takes no ICRC (no UDP length bounds it): the ICRC and the
VCRC stay at the end of its payload; ``wire.ib_stack`` is the dissector that splits them.

**Layer chaining only happens in** :func:`install` **and is fully reverted by**
:func:`uninstall`.  Importing this module defines the classes (Scapy registers every Packet
class in ``conf.layers``, which changes no dissection) but binds nothing.  ``install()`` adds:

* ``UDP`` dport 4791 (or the given ``ports``) -> ``LL_BTH``;
* ``LL_BTH`` -> its first extended header, by opcode, per :data:`wire.bth.EXT_HEADERS`; each
  extended header -> the next one for that opcode (looked up through the ``LL_BTH`` below it);
  ``LL_BTH`` / ``LL_CNP`` sets opcode 0x81 when built;
* ``Ether`` and ``Dot1Q`` (hence ``Dot1AD``) type 0x8808 -> ``LL_MACControl``;
  ``LL_MACControl`` opcode 0x0101 -> ``LL_PFC``, 0x0001 -> ``LL_PAUSE``.

**Coexistence with Scapy's own layers.**  ``scapy.contrib.roce`` binds UDP dport 4791 to its
``BTH`` and ``scapy.contrib.mac_control`` binds EtherType 0x8808 to its ``MACControl``.  Scapy
takes the *first* matching entry of a layer's ``payload_guess`` list, and ``bind_layers``
appends.  So:

* ``install(prefer=True)`` (the default) inserts our entries at the *front* of ``UDP``,
  ``Ether`` and ``Dot1Q``'s ``payload_guess``: ours win over contrib whether contrib was
  loaded before or after ``install()``.
  This also puts ``dport=4791`` ahead of Scapy's ~34 UDP *source*-port bindings (a RoCEv2
  datagram from source port 1812 is RADIUS to stock Scapy), so only the destination port
  identifies RoCEv2, as IBA Annex A17 says.
* ``install(prefer=False)`` appends, as ``bind_layers`` would: whichever was bound first wins
  (contrib, if it was loaded before ``install()``; Scapy's source-port bindings too).
* ``uninstall()`` removes exactly the entries ``install()`` added (by identity) and restores
  the very list objects Scapy had when nothing else was bound in between: contrib's bindings
  work again unchanged, in their original order.

**Scale-up headers** (ESUN, SUNH, AFH, SUE; all placeholders of a
:class:`~wire.scaleup.ScaleUpConfig`, ``install(scaleup=...)``):

* ``Ether`` / ``Dot1Q`` type ``esun_ethertype`` -> ``LL_ESUN`` -> the configured
  ``esun_transport`` (``LL_SUE_RH``; ``sue_lite``: transactions directly; ``raw``: nothing);
  ``sunh_ethertype`` -> ``LL_SUNH`` (``next_header`` ``sunh_sue_protocol`` -> ``LL_SUE_RH``,
  17 -> Scapy's ``UDP``, whose checksum Scapy leaves 0 there: no pseudo-header is defined);
  ``afh_gen1_ethertype`` -> ``LL_AFHGen1`` (its ``type`` ``sue_ethertype`` -> ``LL_SUE_RH``);
  ``UDP`` dport ``sue_udp_port`` -> ``LL_SUE_RH`` (in front, like RoCEv2, with ``prefer``).
* A SUE PDU is a chain: ``LL_SUE_RH`` (op DATA) / ``LL_SUE_TXN8`` / ``LL_SUE_Data`` /
  ``LL_SUE_TXN8`` / ``LL_SUE_Data`` ... / ``LL_RCRC``: each descriptor (``LL_SUE_TXN16`` with
  ``txn_hdr_bytes=16``) is followed by an ``LL_SUE_Data`` holding its ``length`` data bytes;
  the descriptor with the ``last`` bit ends the transactions, then come the 4-byte R-CRC and
  the Ethernet padding (``Padding``).  An RH with another op (ACK, NACK) is followed by the
  R-CRC directly.  SUE-Lite (no RH) ends after the last transaction.  On build, a
  descriptor's ``length`` and ``last`` that were not set are computed from the chain (the
  ``LL_SUE_Data`` above it, whether another descriptor follows), and an ``LL_RCRC`` whose
  ``value`` was not set is computed by the ``LL_SUE_RH`` below it (:func:`wire.sue.rcrc`).
  :func:`sue_layers` makes such a chain from dicts; :func:`transactions` lists the
  ``(descriptor, data)`` pairs of a dissected packet; :meth:`LL_RCRC.valid` checks a
  dissected R-CRC.
* **AFH Gen2** has no Ethernet header: its 12- or 6-byte form *is* the DA and SA.  Scapy's
  ``Ether`` is left alone: with ``install()``, ``Ether`` type ``sue_ethertype`` (untagged) ->
  the transport of the configured ``afh_gen2_form`` (so ``Ether(frame)`` shows the AFH
  bytes as ``dst``/``src`` and the SUE layers correctly); to see the AFH fields, dissect the
  frame with the standalone class: ``LL_AFHGen2_12(frame)`` or ``LL_AFHGen2_6(frame)``
  (its ``type`` ``sue_ethertype`` -> the form's configured transport).

This module imports Scapy; ``import wire`` does not.  Usage::

    from scapy.layers.l2 import Ether
    from wire import scapy_layers as sl

    with sl.installed():                 # or sl.install() ... sl.uninstall()
        pkt = Ether(frame)
        pkt[sl.LL_BTH].psn, pkt[sl.LL_ICRC].valid(), sl.to_raw(pkt[sl.LL_BTH])
    pfc = Ether(dst="01:80:c2:00:00:01", type=0x8808) / sl.LL_MACControl() / sl.from_values(
        "pfc", class_enable=0x08, quanta=[0, 0, 0, 0xFFFF, 0, 0, 0, 0])
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from scapy.compat import raw
from scapy.config import conf
from scapy.fields import (
    BitEnumField,
    BitField,
    IP6Field,
    IPField,
    MACField,
    StrLenField,
    XBitField,
    XLEIntField,
)
from scapy.layers.inet import IP, UDP
from scapy.layers.inet6 import IPv6
from scapy.layers.l2 import Dot1Q, Ether
from scapy.packet import NoPayload, Packet

from .bth import EXT_HEADERS, opcode_name
from .errors import BadValue
from .ethernet import EtherType
from .ib import GRH_NXT_HDR_IBA, Lnh
from .ipv4 import IPPROTO_UDP
from .pfc import MacControlOpcode
from .roce import CNP_OPCODE, ICRC_BYTES, icrc, icrc_bytes
from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .spec import Field, HeaderSpec, format_value, parse_value
from .stack import ROCE_PORTS, SPECS
from .sue import SueOp, rcrc

__all__ = [
    "LAYERS", "LL_AETH", "LL_AFHGen1", "LL_AFHGen2_12", "LL_AFHGen2_6", "LL_AtomicAckETH",
    "LL_AtomicETH", "LL_BTH", "LL_CNP", "LL_DETH", "LL_ESUN", "LL_Ether", "LL_ICRC", "LL_IETH",
    "LL_IPv4", "LL_IPv6", "LL_ImmDt", "LL_MACControl", "LL_PAUSE", "LL_PFC", "LL_RCRC",
    "LL_RDETH", "LL_RETH", "LL_SUE_Data", "LL_SUE_RH", "LL_SUE_TXN16", "LL_SUE_TXN8",
    "LL_SUNH", "LL_UDP", "LL_VLAN", "LL_XRCETH", "LL_ERF", "LL_LRH", "LL_GRH", "LL_RWH",
    "LL_IB_FC", "LL_MAD", "element_names", "from_values", "install",
    "installed", "is_installed", "sue_layers", "to_raw", "transactions", "uninstall",
]

# Scapy field classes for the address formats, used only when the field maps 1:1 to them.
_ADDRESS_FIELDS = {("mac", 48): MACField, ("ipv4", 32): IPField, ("ipv6", 128): IP6Field}


def element_names(spec: HeaderSpec, f: Field) -> list[str]:
    """The Scapy field name(s) of spec field ``f``: ``[name]``, or ``name0..name<count-1>``."""
    return [f.name] if f.count == 1 else [f"{f.name}{i}" for i in range(f.count)]


def _address_class(f: Field, bit_offset: int):
    if bit_offset % 8 or f.bits % 8:
        return None
    return _ADDRESS_FIELDS.get((f.fmt, f.bits))


def _scapy_fields(spec: HeaderSpec) -> list:
    """One Scapy field per field element of ``spec``, generated from ``spec.layout()``."""
    out = []
    for f, i, off in spec.layout():
        name = element_names(spec, f)[i]
        addr = _address_class(f, off)
        if addr is not None:
            out.append(addr(name, format_value(f, int(f.default))))
        elif f.enum is not None:
            names = {int(m): m.name for m in f.enum}
            out.append(BitEnumField(name, int(f.default), f.bits, names))
        elif f.fmt == "hex":
            out.append(XBitField(name, int(f.default), f.bits))
        else:
            out.append(BitField(name, int(f.default), f.bits))
    return out


# ------------------------------------------------------------------ base classes
class _LLHeader(Packet):
    """Base of every generated header layer (``_ll_spec`` is the field table)."""

    _ll_spec: HeaderSpec | None = None


class _LLTrailerHeader(_LLHeader):
    """A header after which the rest of the frame is padding (PFC / PAUSE reserved zeros)."""

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s


class _LLExtHeader(_LLHeader):
    """An IBA extended transport header: what follows depends on the BTH's opcode."""

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        bth = self.underlayer
        while bth is not None and not isinstance(bth, LL_BTH):
            bth = bth.underlayer
        if bth is not None:
            nxt = _STATE.chain.get((bth.opcode, type(self)))
            if nxt is not None:
                return nxt
        return super().guess_payload_class(payload)


class _LLBTHBase(_LLHeader):
    """BTH behaviour: split the ICRC off the datagram; compute it on build."""

    def dissect(self, s):
        s = self.post_dissect(self.do_dissect(self.pre_dissect(s)))
        body, pad = self.extract_padding(s)
        trailer = b""
        # The UDP layer below has cut its payload at the UDP length: the datagram ends here,
        # so its last 4 bytes are the ICRC.  A bare BTH has no known end and takes no ICRC.
        if isinstance(self.underlayer, UDP) and len(body) >= ICRC_BYTES:
            body, trailer = body[:-ICRC_BYTES], body[-ICRC_BYTES:]
        self.do_dissect_payload(body)
        if trailer:
            self.add_payload(LL_ICRC(trailer, _internal=1))
        if pad and conf.padding:
            self.add_payload(conf.padding_layer(pad))

    def post_build(self, pkt, pay):
        out = pkt + pay
        trailer = self.getlayer(LL_ICRC)
        if trailer is None or trailer.value is not None:
            return out
        end = len(out) - len(raw(trailer.payload)) - ICRC_BYTES
        value = _icrc_below(self, out[:end], udp_payload_len=len(out))
        if value is None:
            return out
        return out[:end] + icrc_bytes(value) + out[end + ICRC_BYTES:]

    def mysummary(self) -> str | tuple[str, list[type[Packet]]]:
        return (f"lossless BTH {opcode_name(self.opcode)} qp={self.dest_qp:#x} psn={self.psn}",
                [UDP])


class _LLSueRHBase(_LLHeader):
    """SUE RH behaviour: transactions (op DATA) or the R-CRC next; compute the R-CRC."""

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if not _STATE.installed:
            return super().guess_payload_class(payload)
        if self.op == SueOp.DATA:
            return _STATE.txn_class
        return LL_RCRC

    def post_build(self, pkt, pay):
        out = pkt + pay
        trailer = self.getlayer(LL_RCRC)
        if trailer is None or "value" in trailer.fields:
            return out
        size = _spec_of(LL_RCRC).size_bytes
        end = len(out) - len(raw(trailer.payload)) - size
        value = _spec_of(LL_RCRC).pack({"value": rcrc(out[:end])})
        return out[:end] + value + out[end + size:]

    def mysummary(self) -> str | tuple[str, list[type[Packet]]]:
        return (f"lossless SUE RH {SueOp(self.op).name} xpu={self.xpuid} npsn={self.npsn} "
                f"apsn={self.apsn}")


class _LLTxnBase(_LLHeader):
    """SUE transaction descriptor: its data (``LL_SUE_Data``) follows; on build, ``length``
    and ``last`` not set by the user are computed from the chain above it."""

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        if not _STATE.installed:
            return super().guess_payload_class(payload)
        return LL_SUE_Data

    def post_build(self, pkt, pay):
        if isinstance(self.payload, NoPayload):
            return pkt + pay  # a bare descriptor: the values as set
        changes: dict[str, int] = {}
        if "length" not in self.fields:
            data = self.payload
            changes["length"] = len(data.load) if isinstance(data, LL_SUE_Data) else 0
        if "last" not in self.fields:
            layer, more = self.payload, False
            while not isinstance(layer, NoPayload):
                if isinstance(layer, _LLTxnBase):
                    more = True
                    break
                layer = layer.payload
            changes["last"] = int(not more)
        if changes:
            spec = _spec_of(self)
            pkt = spec.pack({**to_raw(self), **changes})
        return pkt + pay


def _data_length(pkt: Packet) -> int:
    """Bytes of an ``LL_SUE_Data``: its descriptor's ``length`` (all that is left when it
    stands alone)."""
    txn = pkt.underlayer
    if isinstance(txn, _LLTxnBase):
        return int(txn.length)
    return len(pkt.original) if pkt.original else 0


class LL_SUE_Data(Packet):
    """The data bytes of one SUE transaction (``length`` of the descriptor below it)."""

    name = "lossless SUE data"
    fields_desc = [StrLenField("load", b"", length_from=_data_length)]

    def guess_payload_class(self, payload: bytes) -> type[Packet]:
        txn = self.underlayer
        if not _STATE.installed or not isinstance(txn, _LLTxnBase):
            return super().guess_payload_class(payload)
        if txn.last:
            below = txn.underlayer
            while below is not None and not isinstance(below, _LLSueRHBase):
                below = below.underlayer
            return LL_RCRC if below is not None else conf.padding_layer
        if len(payload) < _spec_of(txn).size_bytes:
            return conf.raw_layer
        return type(txn)

    def mysummary(self) -> str | tuple[str, list[type[Packet]]]:
        return f"lossless SUE data {len(self.load)} B"


class _LLRCRCBase(_LLHeader):
    """SUE R-CRC: the end of the PDU (the rest is padding); ``valid()`` checks it."""

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s

    def expected(self) -> int | None:
        """The R-CRC of the PDU this trailer ends (None: no ``LL_SUE_RH`` below it)."""
        rh = self.underlayer
        while rh is not None and not isinstance(rh, _LLSueRHBase):
            rh = rh.underlayer
        if rh is None:
            return None
        data = raw(rh)
        return rcrc(data[:len(data) - len(raw(self))])

    def valid(self) -> bool | None:
        """True if ``value`` is the expected R-CRC (None when it cannot be computed)."""
        exp = self.expected()
        return None if exp is None else exp == self.value


def _ip_below(bth: Packet):
    udp = bth.underlayer
    if not isinstance(udp, UDP):
        return None, None
    ip = udp.underlayer
    if not isinstance(ip, IP | IPv6):
        return udp, None
    return udp, ip


def _icrc_below(bth: Packet, body: bytes, udp_payload_len: int) -> int | None:
    """ICRC of a BTH being built: ``body`` is BTH ... pad (what the ICRC covers after UDP)."""
    udp, ip = _ip_below(bth)
    if ip is None:
        return None  # no IP/UDP below: nothing to compute the ICRC over (value stays 0)
    udp_len = udp.len if udp.len is not None else 8 + udp_payload_len
    # The IP header as Scapy will emit it for a datagram of udp_len bytes (lengths computed
    # the same way); the masked fields (TOS/TTL/checksum, TC/flow/hop limit) do not matter.
    head = ip.copy()
    if isinstance(ip, IP):
        head.proto = ip.proto
    else:
        head.nh = ip.nh
    head.remove_payload()
    head.add_payload(conf.raw_layer(bytes(udp_len)))
    built = raw(head)
    hlen = (built[0] & 0x0F) * 4 if isinstance(ip, IP) else 40
    udp_hdr = (int(udp.sport).to_bytes(2, "big") + int(udp.dport).to_bytes(2, "big")
               + int(udp_len).to_bytes(2, "big") + b"\0\0")
    return icrc(built[:hlen], udp_hdr + body)


# ------------------------------------------------------------------ generation
_CLASS_NAMES = {
    "eth": "LL_Ether", "vlan": "LL_VLAN", "ipv4": "LL_IPv4", "ipv6": "LL_IPv6",
    "udp": "LL_UDP", "bth": "LL_BTH", "rdeth": "LL_RDETH", "deth": "LL_DETH",
    "xrceth": "LL_XRCETH", "reth": "LL_RETH", "atomic_eth": "LL_AtomicETH", "aeth": "LL_AETH",
    "atomic_ack_eth": "LL_AtomicAckETH", "immdt": "LL_ImmDt", "ieth": "LL_IETH",
    "cnp": "LL_CNP", "mac_control": "LL_MACControl", "pfc": "LL_PFC", "pause": "LL_PAUSE",
    "esun": "LL_ESUN", "sunh": "LL_SUNH", "afh_gen1": "LL_AFHGen1", "afh_gen2_12": "LL_AFHGen2_12",
    "afh_gen2_6": "LL_AFHGen2_6", "sue_rh": "LL_SUE_RH", "sue_txn8": "LL_SUE_TXN8",
    "sue_txn16": "LL_SUE_TXN16", "rcrc": "LL_RCRC",
}
_EXT_NAMES = frozenset(h for _n, hs in EXT_HEADERS.values() for h in hs)


def _make(name: str) -> type[Packet]:
    spec = SPECS[name]
    if name == "bth":
        base: type[Packet] = _LLBTHBase
    elif name == "sue_rh":
        base = _LLSueRHBase
    elif name in ("sue_txn8", "sue_txn16"):
        base = _LLTxnBase
    elif name == "rcrc":
        base = _LLRCRCBase
    elif name in _EXT_NAMES:
        base = _LLExtHeader
    elif name in ("pfc", "pause"):
        base = _LLTrailerHeader
    else:
        base = _LLHeader
    cls_name = _CLASS_NAMES.get(name, "LL_" + name.upper())
    dct = {
        "__module__": __name__,
        "__doc__": f"{spec.title or spec.name} ({spec.source}); generated from "
                   f"wire.stack.SPECS[{name!r}].",
        "name": "lossless " + cls_name.removeprefix("LL_"),
        "fields_desc": _scapy_fields(spec),
        "_ll_spec": spec,
    }
    return type(base)(cls_name, (base,), dct)


LL_Ether = _make("eth")
LL_VLAN = _make("vlan")
LL_IPv4 = _make("ipv4")
LL_IPv6 = _make("ipv6")
LL_UDP = _make("udp")
LL_BTH = _make("bth")
LL_RDETH = _make("rdeth")
LL_DETH = _make("deth")
LL_XRCETH = _make("xrceth")
LL_RETH = _make("reth")
LL_AtomicETH = _make("atomic_eth")
LL_AETH = _make("aeth")
LL_AtomicAckETH = _make("atomic_ack_eth")
LL_ImmDt = _make("immdt")
LL_IETH = _make("ieth")
LL_CNP = _make("cnp")
LL_MACControl = _make("mac_control")
LL_PFC = _make("pfc")
LL_PAUSE = _make("pause")
LL_ESUN = _make("esun")
LL_SUNH = _make("sunh")
LL_AFHGen1 = _make("afh_gen1")
LL_AFHGen2_12 = _make("afh_gen2_12")
LL_AFHGen2_6 = _make("afh_gen2_6")
LL_SUE_RH = _make("sue_rh")
LL_SUE_TXN8 = _make("sue_txn8")
LL_SUE_TXN16 = _make("sue_txn16")
LL_RCRC = _make("rcrc")
LL_ERF = _make("erf")
LL_LRH = _make("lrh")
LL_GRH = _make("grh")
LL_RWH = _make("rwh")
LL_IB_FC = _make("ib_fc")
LL_MAD = _make("mad")

#: layer name -> generated class, one for every spec in :data:`wire.stack.SPECS`.
LAYERS: dict[str, type[Packet]] = {
    c._ll_spec.name: c for c in (
        LL_Ether, LL_VLAN, LL_IPv4, LL_IPv6, LL_UDP, LL_BTH, LL_RDETH, LL_DETH, LL_XRCETH,
        LL_RETH, LL_AtomicETH, LL_AETH, LL_AtomicAckETH, LL_ImmDt, LL_IETH, LL_CNP,
        LL_MACControl, LL_PFC, LL_PAUSE, LL_ESUN, LL_SUNH, LL_AFHGen1, LL_AFHGen2_12,
        LL_AFHGen2_6, LL_SUE_RH, LL_SUE_TXN8, LL_SUE_TXN16, LL_RCRC, LL_ERF, LL_LRH, LL_GRH,
        LL_RWH, LL_IB_FC, LL_MAD)
}
if set(LAYERS) != set(SPECS):  # a spec added to SPECS needs its line above
    raise ImportError(f"wire.scapy_layers: no class for {sorted(set(SPECS) - set(LAYERS))}")


class LL_ICRC(Packet):
    """RoCEv2 invariant CRC: the 4-byte trailer of the UDP datagram, least significant byte
    first (IBA Annex A17.8).  ``value`` None on build = computed (see :class:`LL_BTH`)."""

    name = "lossless ICRC"
    fields_desc = [XLEIntField("value", None)]

    def extract_padding(self, s: bytes) -> tuple[bytes, bytes]:
        return b"", s

    def expected(self) -> int | None:
        """The ICRC computed over the packet this trailer belongs to (None: no BTH/UDP/IP).

        Uses the bytes as Scapy serialises the IP layer (a dissected packet: the captured
        bytes); the datagram is cut at the UDP length, so Ethernet padding is not counted.
        """
        bth = self.underlayer
        while bth is not None and not isinstance(bth, LL_BTH):
            bth = bth.underlayer
        if bth is None:
            return None
        _udp, ip = _ip_below(bth)
        if ip is None:
            return None
        data = raw(ip)
        hlen = (data[0] & 0x0F) * 4 if isinstance(ip, IP) else 40
        ulen = int.from_bytes(data[hlen + 4:hlen + 6], "big")
        if ulen < 8 + ICRC_BYTES or hlen + ulen > len(data):
            return None
        return icrc(data[:hlen], data[hlen:hlen + ulen - ICRC_BYTES])

    def valid(self) -> bool | None:
        """True if ``value`` is the expected ICRC (None when it cannot be computed)."""
        exp = self.expected()
        return None if exp is None else exp == self.value


# ------------------------------------------------------------------ raw values
def _spec_of(layer: Packet | type[Packet]) -> HeaderSpec:
    spec = getattr(layer, "_ll_spec", None)
    if spec is None:
        raise TypeError(f"{type(layer).__name__} is not a generated lossless layer")
    return spec


def to_raw(layer: Packet) -> dict[str, object]:
    """The layer's field values as raw integers (lists for arrays) = ``spec.unpack_raw``."""
    spec = _spec_of(layer)
    out: dict[str, object] = {}
    for f in spec.fields:
        vals = []
        for n in element_names(spec, f):
            v = layer.getfieldval(n)
            vals.append(parse_value(f, v, spec.name) if isinstance(v, str) else int(v))
        out[f.name] = vals[0] if f.count == 1 else vals
    return out


def from_values(name: str, values: Mapping[str, object] | None = None, /,
                **kw: object) -> Packet:
    """A layer instance from spec field values (raw ints or shown values, lists for arrays).

    Fields not given keep their defaults; derived keys of the spec are ignored.
    """
    cls = LAYERS[name]
    spec = _spec_of(cls)
    vals = dict(values or {}, **kw)
    unknown = set(vals) - set(spec.field_names) - set(spec.derived)
    if unknown:
        raise BadValue(f"unknown field(s) {sorted(unknown)}", layer=name)
    args: dict[str, object] = {}
    for f, i, off in spec.layout():
        if f.name not in vals:
            continue
        v = vals[f.name]
        if f.count > 1:
            if isinstance(v, int):
                v = [v] * f.count
            if not isinstance(v, list | tuple) or len(v) != f.count:
                raise BadValue(f"expected a list of {f.count} values", layer=name, field=f.name)
            v = v[i]
        r = parse_value(f, v, name)
        args[element_names(spec, f)[i]] = format_value(f, r) if _address_class(f, off) else r
    return cls(**args)


# ------------------------------------------------------------------ SUE PDUs
def _txn_class(txn_hdr_bytes: int) -> type[Packet]:
    for cls in (LL_SUE_TXN8, LL_SUE_TXN16):
        if _spec_of(cls).size_bytes == txn_hdr_bytes:
            return cls
    raise BadValue(f"txn_hdr_bytes {txn_hdr_bytes!r}: no such transaction descriptor",
                   layer="sue_txn")


def sue_layers(txns: Iterable[Mapping[str, object]] = (), *,
               rh: Mapping[str, object] | None = None,
               rcrc_value: int | None = None,
               txn_hdr_bytes: int = DEFAULT_SCALEUP.txn_hdr_bytes) -> Packet:
    """The Scapy chain of a SUE PDU from dicts in the ``sue_rh`` / ``sue_txn`` schema.

    ``rh`` None: SUE-Lite (transactions only, no R-CRC).  Each transaction dict may carry
    ``data`` (hex or bytes); its ``length`` and ``last`` are computed unless given.  The
    R-CRC is computed unless ``rcrc_value`` is given.
    """
    layers: list[Packet] = []
    if rh is not None:
        layers.append(from_values("sue_rh", rh))
    cls = _txn_class(txn_hdr_bytes)
    name = _spec_of(cls).name
    for t in txns:
        data = t.get("data", b"")
        data = bytes.fromhex(data) if isinstance(data, str) else bytes(data)
        layers.append(from_values(name, {k: v for k, v in t.items() if k != "data"}))
        layers.append(LL_SUE_Data(load=data))
    if rh is not None:
        layers.append(LL_RCRC() if rcrc_value is None else LL_RCRC(value=rcrc_value))
    if not layers:
        raise BadValue("a SUE PDU needs an RH or at least one transaction", layer="sue_txn")
    pkt = layers[0]
    for layer in layers[1:]:
        pkt = pkt / layer
    return pkt


def transactions(pkt: Packet) -> list[tuple[Packet, bytes]]:
    """``(descriptor layer, data bytes)`` of every SUE transaction in ``pkt``, in order."""
    out: list[tuple[Packet, bytes]] = []
    layer = pkt
    while not isinstance(layer, NoPayload):
        if isinstance(layer, _LLTxnBase):
            data = layer.payload
            out.append((layer, bytes(data.load) if isinstance(data, LL_SUE_Data) else b""))
        layer = layer.payload
    return out


# ------------------------------------------------------------------ install
@dataclass
class _State:
    installed: bool = False
    prefer: bool = True
    ports: tuple[int, ...] = ()
    scaleup: ScaleUpConfig = DEFAULT_SCALEUP
    #: the transaction descriptor class of the installed ``txn_hdr_bytes``
    txn_class: type[Packet] | None = None
    #: (lower class, entry tuple) for every payload_guess entry we added
    guesses: list[tuple[type[Packet], tuple]] = field(default_factory=list)
    #: lower class -> (it had its own payload_guess, that list object) before install()
    saved_guess: dict[type[Packet], tuple[bool, list]] = field(default_factory=dict)
    #: upper class -> (it had its own _overload_fields, that dict) before install()
    saved_overload: dict[type[Packet], tuple[bool, dict]] = field(default_factory=dict)
    #: (opcode, extended header class) -> next extended header class
    chain: dict[tuple[int, type[Packet]], type[Packet]] = field(default_factory=dict)


_STATE = _State()


def _bottom_up(lower: type[Packet], upper: type[Packet], front: bool, **fval: int) -> None:
    if lower not in _STATE.saved_guess:
        _STATE.saved_guess[lower] = ("payload_guess" in lower.__dict__, lower.payload_guess)
    entry = (dict(fval), upper)
    lst = list(lower.payload_guess)
    if front:
        ours_in_front = sum(1 for lw, _e in _STATE.guesses if lw is lower)
        lst.insert(ours_in_front, entry)
    else:
        lst.append(entry)
    lower.payload_guess = lst
    _STATE.guesses.append((lower, entry))


def _top_down(lower: type[Packet], upper: type[Packet], **fval: int) -> None:
    if upper not in _STATE.saved_overload:
        _STATE.saved_overload[upper] = ("_overload_fields" in upper.__dict__,
                                        upper._overload_fields)
    over = dict(upper._overload_fields)
    over[lower] = dict(fval)
    upper._overload_fields = over


def _transport_class(kind: str) -> type[Packet] | None:
    """The first layer of a transport of :data:`wire.scaleup.TRANSPORTS` (None: raw)."""
    return {"sue_rh": LL_SUE_RH, "sue_lite": _STATE.txn_class}.get(kind)


def _install_scaleup(sc: ScaleUpConfig, front: bool) -> None:
    _STATE.txn_class = _txn_class(sc.txn_hdr_bytes)
    for lower in (Ether, Dot1Q):
        for upper, etype in ((LL_ESUN, sc.esun_ethertype), (LL_SUNH, sc.sunh_ethertype),
                             (LL_AFHGen1, sc.afh_gen1_ethertype)):
            _bottom_up(lower, upper, front, type=etype)
            _top_down(lower, upper, type=etype)
    esun_next = _transport_class(sc.esun_transport)
    if esun_next is not None:
        _bottom_up(LL_ESUN, esun_next, False)
    _bottom_up(LL_SUNH, LL_SUE_RH, False, next_header=sc.sunh_sue_protocol)
    _top_down(LL_SUNH, LL_SUE_RH, next_header=sc.sunh_sue_protocol)
    _bottom_up(LL_SUNH, UDP, False, next_header=IPPROTO_UDP)
    _top_down(LL_SUNH, UDP, next_header=IPPROTO_UDP)
    _bottom_up(LL_AFHGen1, LL_SUE_RH, False, type=sc.sue_ethertype)
    _top_down(LL_AFHGen1, LL_SUE_RH, type=sc.sue_ethertype)
    _bottom_up(UDP, LL_SUE_RH, front, dport=sc.sue_udp_port)
    _top_down(UDP, LL_SUE_RH, dport=sc.sue_udp_port)
    # AFH Gen2: the standalone classes, and Scapy's Ether (whose dst/src are then the AFH
    # bytes) on an untagged frame, as wire.dissect reads it.
    for cls, kind in ((LL_AFHGen2_12, sc.afh_gen2_12_transport),
                      (LL_AFHGen2_6, sc.afh_gen2_6_transport)):
        nxt = _transport_class(kind)
        if nxt is not None:
            _bottom_up(cls, nxt, False, type=sc.sue_ethertype)
            _top_down(cls, nxt, type=sc.sue_ethertype)
    gen2 = _transport_class(sc.afh_gen2_12_transport if sc.afh_gen2_form == "12"
                            else sc.afh_gen2_6_transport)
    if gen2 is not None:
        _bottom_up(Ether, gen2, front, type=sc.sue_ethertype)


def install(prefer: bool = True, ports: Iterable[int] = ROCE_PORTS, *,
            scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> None:
    """Bind the lossless layers into Scapy's dissection (see the module docstring).

    ``prefer=True`` puts our bindings ahead of any existing ones (Scapy's
    ``scapy.contrib.roce`` / ``mac_control``), ``prefer=False`` after them.  ``ports`` are the
    UDP destination ports taken as RoCEv2; ``scaleup`` the placeholder EtherTypes, port and
    transports of the scale-up headers.  Calling it again re-installs with the new options.
    """
    if _STATE.installed:
        uninstall()
    _STATE.prefer = bool(prefer)
    _STATE.ports = tuple(sorted({int(p) for p in ports}))
    _STATE.scaleup = scaleup
    front = _STATE.prefer
    try:
        for port in _STATE.ports:
            _bottom_up(UDP, LL_BTH, front, dport=port)
        if _STATE.ports:
            _top_down(UDP, LL_BTH, dport=_STATE.ports[0])
        for op, (_name, hdrs) in EXT_HEADERS.items():
            classes = [LAYERS[h] for h in hdrs]
            if classes:
                _bottom_up(LL_BTH, classes[0], False, opcode=op)
            for here, nxt in itertools.pairwise(classes):
                _STATE.chain[(op, here)] = nxt
        _top_down(LL_BTH, LL_CNP, opcode=CNP_OPCODE)
        for lower in (Ether, Dot1Q):
            _bottom_up(lower, LL_MACControl, front, type=int(EtherType.MAC_CONTROL))
            _top_down(lower, LL_MACControl, type=int(EtherType.MAC_CONTROL))
        for upper, op in ((LL_PFC, MacControlOpcode.PFC), (LL_PAUSE, MacControlOpcode.PAUSE)):
            _bottom_up(LL_MACControl, upper, False, opcode=int(op))
            _top_down(LL_MACControl, upper, opcode=int(op))
        _install_scaleup(scaleup, front)
        # Native InfiniBand (wire.ib): LRH -> GRH / BTH / RWH by LNH, GRH -> BTH by NxtHdr.
        # Over an LRH the BTH takes no ICRC (no UDP length bounds it): the ICRC and VCRC
        # stay at the end of its payload.
        for upper, lnh in ((LL_GRH, Lnh.IBA_GLOBAL), (LL_BTH, Lnh.IBA_LOCAL),
                           (LL_RWH, Lnh.RAW)):
            _bottom_up(LL_LRH, upper, False, lnh=int(lnh))
            _top_down(LL_LRH, upper, lnh=int(lnh))
        _bottom_up(LL_GRH, LL_BTH, False, nxt_hdr=GRH_NXT_HDR_IBA)
        _top_down(LL_GRH, LL_BTH, nxt_hdr=GRH_NXT_HDR_IBA)
    except BaseException:
        _STATE.installed = True
        uninstall()
        raise
    _STATE.installed = True


def uninstall() -> None:
    """Remove exactly what :func:`install` added; a no-op when not installed."""
    if not _STATE.installed:
        return
    for lower, (had_own, original) in _STATE.saved_guess.items():
        ours = [e for lw, e in _STATE.guesses if lw is lower]
        remaining = [e for e in lower.payload_guess if not any(e is o for o in ours)]
        unchanged = len(remaining) == len(original) and all(
            a is b for a, b in zip(remaining, original, strict=True))
        if unchanged and not had_own:
            if "payload_guess" in lower.__dict__:
                delattr(lower, "payload_guess")
        elif unchanged:
            lower.payload_guess = original
        else:  # someone else bound to `lower` meanwhile: keep theirs, drop ours
            lower.payload_guess = remaining
    for upper, (had_own, original) in _STATE.saved_overload.items():
        if had_own:
            upper._overload_fields = original
        elif "_overload_fields" in upper.__dict__:
            delattr(upper, "_overload_fields")
    _STATE.guesses.clear()
    _STATE.saved_guess.clear()
    _STATE.saved_overload.clear()
    _STATE.chain.clear()
    _STATE.txn_class = None
    _STATE.installed = False


def is_installed() -> bool:
    return _STATE.installed


@contextlib.contextmanager
def installed(prefer: bool = True, ports: Iterable[int] = ROCE_PORTS, *,
              scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> Iterator[None]:
    """``with installed(): ...``: install for the block, then restore the previous state."""
    before = (_STATE.installed, _STATE.prefer, _STATE.ports, _STATE.scaleup)
    install(prefer=prefer, ports=ports, scaleup=scaleup)
    try:
        yield
    finally:
        uninstall()
        if before[0]:
            install(prefer=before[1], ports=before[2], scaleup=before[3])

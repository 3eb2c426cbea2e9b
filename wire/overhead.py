"""Header overhead and goodput of each header stack, measured on frames the codecs build.

For ``k`` transactions of ``T`` bytes per frame, a frame of each stack is built with
:func:`wire.build` (so every header byte is the real one: lengths, descriptors, R-CRC, ICRC)
and its cost on the wire is counted as

    wire_bytes = max(len(frame) + 4 FCS, 64) + 8 preamble/SFD + 12 inter-frame gap

(IEEE 802.3 clauses 3.1.1 and 4.4.2: minimum frame 64 bytes with FCS; 7-byte preamble + SFD;
96-bit minimum IPG).  Goodput is ``k * T / wire_bytes`` of the line rate.  A stack whose PDU
limit the frame would exceed (4096 B of transactions for SUE, 1024 B for SUE-Lite; 4096 B of
payload for RoCEv2, the largest InfiniBand path MTU) is reported as not possible (with the
reason) rather than silently split, and no frame is built for it.

RoCEv2 carries the ``k * T`` bytes as one SEND ONLY payload (no per-transaction descriptor);
the SUE stacks carry ``k`` transactions, each with its ``txn_hdr_bytes`` descriptor [A].
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .scaleup import DEFAULT_SCALEUP, ScaleUpConfig
from .stack import build

__all__ = ["STACKS", "FCS_BYTES", "L1_BYTES", "MIN_FRAME_WITH_FCS_BYTES", "Efficiency",
           "ROCE_MAX_PAYLOAD_BYTES", "MAX_DATA_BYTES", "frame_for", "efficiency", "table"]

FCS_BYTES = 4
#: Preamble + SFD (8) and minimum inter-packet gap (12) per frame.
L1_BYTES = 20
MIN_FRAME_WITH_FCS_BYTES = 64
#: Largest RoCEv2 payload per packet: the largest InfiniBand path MTU, 4096 bytes (IBTA
#: InfiniBand Architecture Specification Vol. 1, MTU values 256..4096; RoCEv2 uses the IB
#: MTU, Annex A17; Linux ``enum ib_mtu`` in include/rdma/ib_verbs.h stops at IB_MTU_4096).
ROCE_MAX_PAYLOAD_BYTES = 4096
#: No stack carries more data bytes per frame than this (the SUE PDU limits are smaller or
#: equal, wire.scaleup.ScaleUpConfig.max_pdu_bytes): bigger sizes are impossible everywhere.
MAX_DATA_BYTES = ROCE_MAX_PAYLOAD_BYTES

#: name -> (description, network layers of the build dict, uses an RH, is SUE-Lite)
STACKS: dict[str, tuple[str, dict, bool, bool]] = {
    "roce_v2": ("RoCEv2: Eth + IPv4 + UDP + BTH + ICRC", {}, False, False),
    "sue_ipv4_udp": ("SUE over IPv4/UDP: Eth + IPv4 + UDP + RH + R-CRC",
                     {"ipv4": {}, "udp": {}}, True, False),
    "afh_gen1": ("SUE over AFH Gen1: Eth + shim/EtherType + RH + R-CRC",
                 {"afh": {"form": "gen1"}}, True, False),
    "afh_gen2": ("SUE over AFH Gen2 (12 B): addresses + EtherType + RH + R-CRC",
                 {"afh": {"form": "gen2_12"}}, True, False),
    "sue_lite": ("SUE-Lite over AFH Gen2 (6 B): addresses + EtherType, no RH, no R-CRC",
                 {"afh": {"form": "gen2_6"}}, False, True),
    "esun": ("ESUN: Eth + EH + RH + R-CRC", {"esun": {}}, True, False),
    "sunh": ("SUNH: Eth + SUNH + RH + R-CRC", {"sunh": {}}, True, False),
}


@dataclass(frozen=True, slots=True)
class Efficiency:
    stack: str
    txn_bytes: int
    per_frame: int
    frame_bytes: int | None        # built frame, without FCS
    wire_bytes: int | None         # FCS, minimum-frame padding, preamble and IFG included
    overhead_bytes: int | None     # wire_bytes - goodput bytes
    goodput_pct: float | None      # None: not possible (PDU limit)
    reason: str = ""


def frame_for(stack: str, txn_bytes: int, per_frame: int,
              scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> bytes:
    """The frame of ``stack`` carrying ``per_frame`` transactions of ``txn_bytes`` bytes.

    No Ethernet padding is added here (the 64-byte minimum is applied when counting)."""
    if stack not in STACKS:
        raise ValueError(f"unknown stack {stack!r}; known: {list(STACKS)}")
    _desc, net, rh, _lite = STACKS[stack]
    data = "00" * txn_bytes
    if stack == "roce_v2":
        d: dict = {"ipv4": {}, "udp": {}, "bth": {"opcode": "RC_SEND_ONLY"},
                   "payload": {"length": txn_bytes * per_frame}}
    else:
        d = {k: dict(v) for k, v in net.items()}
        if rh:
            d["sue_rh"] = {"op": "DATA"}
        d["sue_txn"] = [{"opcode": "WRITE", "data": data} for _ in range(per_frame)]
    d["trailer"] = ""
    cfg = scaleup.with_(afh_gen2_form="6") if stack == "sue_lite" else scaleup
    return build(d, scaleup=cfg)


def efficiency(stack: str, txn_bytes: int, per_frame: int,
               scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> Efficiency:
    """Goodput of ``stack`` for ``per_frame`` transactions of ``txn_bytes`` bytes per frame
    (``goodput_pct`` None and a ``reason`` when the stack cannot carry them in one frame)."""
    if stack not in STACKS:
        raise ValueError(f"unknown stack {stack!r}; known: {list(STACKS)}")
    if txn_bytes < 1 or per_frame < 1:
        raise ValueError(f"txn_bytes and per_frame must be >= 1, got {txn_bytes}, {per_frame}")
    _desc, _net, _rh, lite = STACKS[stack]
    if stack == "roce_v2":
        if txn_bytes * per_frame > ROCE_MAX_PAYLOAD_BYTES:
            return Efficiency(stack, txn_bytes, per_frame, None, None, None, None,
                              f"{txn_bytes * per_frame} B of payload exceed the "
                              f"{ROCE_MAX_PAYLOAD_BYTES}-byte largest IB MTU")
    else:
        pdu = per_frame * (txn_bytes + scaleup.txn_hdr_bytes)
        cap = scaleup.max_pdu_lite_bytes if lite else scaleup.max_pdu_bytes
        if pdu > cap:
            return Efficiency(stack, txn_bytes, per_frame, None, None, None, None,
                              f"{pdu} B of transactions exceed the {cap}-byte PDU limit")
    frame = frame_for(stack, txn_bytes, per_frame, scaleup)
    wire = max(len(frame) + FCS_BYTES, MIN_FRAME_WITH_FCS_BYTES) + L1_BYTES
    good = txn_bytes * per_frame
    return Efficiency(stack, txn_bytes, per_frame, len(frame), wire, wire - good,
                      100.0 * good / wire)


def table(txn_sizes: Iterable[int] = (64, 128, 256), per_frame: Iterable[int] = (1, 4, 16),
          stacks: Iterable[str] = tuple(STACKS),
          scaleup: ScaleUpConfig = DEFAULT_SCALEUP) -> list[Efficiency]:
    """Every (stack, transaction size, transactions per frame) combination."""
    sizes, ks = list(txn_sizes), list(per_frame)
    return [efficiency(s, t, k, scaleup) for s in stacks for t in sizes for k in ks]

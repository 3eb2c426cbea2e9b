"""SimPacket: the small record a packet is inside the simulator.

It carries only what every component needs (identity, size, flow, class, ECN, endpoints) plus,
when the simulation replays or crafts real traffic, the real frame bytes.  Component-specific
state (queue entry times, ...) belongs to the component, not here; the one exception is ``fc``,
the ticket of the credits a frame holds on the link it is on (:mod:`sim.flowctl.credit`),
and ``psn``, the RC transport's packet sequence number of a data frame of a reliable flow
(:mod:`sim.nic.rc`; None otherwise), and ``ackreq``, its AckReq bit (the sender asks the
receiver for an ACK), which the real frame's BTH would carry, and ``place``, where a data
packet a NIC sends sits in its message (:func:`place_of`), which the real frame's opcode
would say (RDMA WRITE FIRST, MIDDLE, LAST or ONLY: captures show it).
"""

from __future__ import annotations

from wire.ecn import mark_ce as _mark_frame_ce

__all__ = ["SimPacket", "NOT_ECT", "CE", "PRIORITIES", "PacketIds", "REPLAY_FLOW_BASE",
           "PLACE_FIRST", "PLACE_LAST", "STREAM_MESSAGE_FRAMES", "place_of"]

NOT_ECT = 0
CE = 3
#: Traffic classes / priorities 0..7 (IEEE 802.1Q PCP, 802.1Qbb PFC).
PRIORITIES = 8
#: Flow ids from here on are replayed captures' (:mod:`sim.workloads.replay`), apart from the
#: simulated flows: the simulated NICs carry their frames as they are (a replayed ACK or CNP is
#: not taken for one of their own) and send no CNP for them.
REPLAY_FLOW_BASE = 1 << 20
#: ``SimPacket.place`` of a data packet a NIC sends: bit 0 (PLACE_FIRST) it starts its
#: message, bit 1 (PLACE_LAST) it ends it (both: a message of one packet), and, on a packet
#: that starts its message, the message's frame bytes (headers included, as
#: ``Flow.message_bytes``) from bit 2 up (:func:`place_of`).  None: a packet no NIC flow sent.
PLACE_FIRST = 1
PLACE_LAST = 2
#: A stream (a flow without ``message_bytes`` that is not posted) is cut into messages of this
#: many frames, the last one cut by the flow's size [A]: at 1024 bytes of payload a frame,
#: 65,536 bytes, perftest's default message size (``ib_write_bw -s``).
STREAM_MESSAGE_FRAMES = 64


def place_of(first: bool, last: bool, message_bytes: int = 0) -> int:
    """``SimPacket.place`` of a packet that starts (``first``: of a message of
    ``message_bytes`` frame bytes) and/or ends its message, or neither."""
    return (message_bytes << 2 if first else 0) | (PLACE_FIRST if first else 0) | (
        PLACE_LAST if last else 0)


class PacketIds:
    """Packet id source shared by the nodes of one fabric (deterministic).  ``next``: the last
    id handed out (each call returns ``next + 1``), or the start value before the first."""

    def __init__(self) -> None:
        self.next = 1 << 40  # control frames; data packets count from 0

    def __call__(self) -> int:
        return self.take()

    def take(self) -> int:
        """The next id (``ids()`` is ``ids.take()``; in the compiled core a C call)."""
        self.next += 1
        return self.next

class SimPacket:
    """One packet: ``nbytes`` is the Ethernet frame length WITHOUT FCS.

    ``t_ps`` is the creation/injection time, ``tc`` the traffic class (0..7), ``ecn`` the RFC 3168
    codepoint (0..3), ``src``/``dst`` node ids, ``frame`` the real frame (a bytearray so CE marking
    can rewrite it in place) or None, ``hops`` the number of switches traversed.  ``fc`` is
    link-level flow control's ticket for the link the frame is on (credits: the sending port,
    VC and credits held, :mod:`sim.flowctl.credit`), None on a link without credits.
    """

    __slots__ = ("ackreq", "dst", "ecn", "fc", "flow", "frame", "hops", "id", "nbytes", "place",
                 "psn", "src", "t_ps", "tc")

    def __init__(
        self,
        id: int,
        t_ps: int,
        nbytes: int,
        flow: int = 0,
        tc: int = 0,
        ecn: int = NOT_ECT,
        src: int = 0,
        dst: int = 0,
        frame: bytes | bytearray | None = None,
        hops: int = 0,
    ) -> None:
        if not 0 <= tc <= 7:
            raise ValueError(f"tc must be 0..7, got {tc}")
        if not 0 <= ecn <= 3:
            raise ValueError(f"ecn must be 0..3, got {ecn}")
        if nbytes < 0:
            raise ValueError(f"nbytes must be >= 0, got {nbytes}")
        self.id = id
        self.t_ps = t_ps
        self.nbytes = nbytes
        self.flow = flow
        self.tc = tc
        self.ecn = ecn
        self.src = src
        self.dst = dst
        self.frame = bytearray(frame) if isinstance(frame, bytes) else frame
        self.hops = hops
        self.fc = None
        self.psn = None
        self.ackreq = False
        self.place = None

    @classmethod
    def trusted(cls, id: int, t_ps: int, nbytes: int, flow: int, tc: int, ecn: int, src: int,
                dst: int, frame: bytearray | None = None, hops: int = 0) -> SimPacket:
        """Build a packet without validation, for internal callers whose values are already
        known good (``0 <= tc <= 7``, ``0 <= ecn <= 3``, ``nbytes >= 0``, ``frame`` None or a
        bytearray: it is stored as is, not copied).  Positional arguments: several times
        cheaper than ``SimPacket(...)`` with keywords on the per-packet path."""
        # no __init__ (compiled: the type's tp_new at C level, and _filled sets the fields as
        # struct members)
        return _filled(SimPacket.__new__(cls), id, t_ps, nbytes, flow, tc, ecn, src, dst, frame,
                       hops)

    @staticmethod
    def _new(id: int, t_ps: int, nbytes: int, flow: int, tc: int, ecn: int, src: int, dst: int,
             frame: bytearray | None, hops: int) -> SimPacket:
        """:meth:`trusted` of a SimPacket, every argument given: a C call from compiled code
        (packet.pxd), where ``trusted``, a classmethod, is a Python call."""
        return _filled(SimPacket.__new__(SimPacket), id, t_ps, nbytes, flow, tc, ecn, src, dst,
                       frame, hops)

    def __reduce__(self) -> tuple:
        """Pickle (and copy) every slot that is set, a subclass's (SuePacket's ``pdu``)
        included: the same state whether SimPacket is a Python class or compiled (a compiled
        class's own pickling would know only the fields of packet.pxd)."""
        state = {}
        for klass in type(self).__mro__:
            for name in klass.__dict__.get("__slots__", ()):
                if name not in state and hasattr(self, name):
                    state[name] = getattr(self, name)
        return _restore, (type(self), state)

    @property
    def ecn_capable(self) -> bool:
        """ECT(0), ECT(1) or CE: a congested switch may mark it (RFC 3168 5)."""
        return self.ecn != NOT_ECT

    def mark_ce(self) -> bool:
        """Mark CE if ECN-capable (also in ``frame``, in place, via :func:`wire.mark_ce`).

        Returns True if the packet is ECN-capable (it now carries CE), False otherwise
        (a Not-ECT packet is never marked, RFC 3168 5).
        """
        if self.ecn == NOT_ECT:
            return False
        self.ecn = CE
        if self.frame is not None:
            if not isinstance(self.frame, bytearray):
                self.frame = bytearray(self.frame)
            _mark_frame_ce(self.frame)
        return True

    def __repr__(self) -> str:
        return (
            f"SimPacket(id={self.id}, t_ps={self.t_ps}, nbytes={self.nbytes}, flow={self.flow}, "
            f"tc={self.tc}, ecn={self.ecn}, src={self.src}, dst={self.dst}, "
            f"frame={'None' if self.frame is None else f'<{len(self.frame)} B>'}, "
            f"hops={self.hops})"
        )


def _filled(pkt: SimPacket, id: int, t_ps: int, nbytes: int, flow: int, tc: int, ecn: int,
            src: int, dst: int, frame: bytearray | None, hops: int) -> SimPacket:
    """``pkt`` (new, no field set) with its fields set (:meth:`SimPacket.trusted`)."""
    pkt.id = id
    pkt.t_ps = t_ps
    pkt.nbytes = nbytes
    pkt.flow = flow
    pkt.tc = tc
    pkt.ecn = ecn
    pkt.src = src
    pkt.dst = dst
    pkt.frame = frame
    pkt.hops = hops
    pkt.fc = None
    pkt.psn = None
    pkt.ackreq = False
    pkt.place = None
    return pkt


def _restore(cls: type, state: dict) -> SimPacket:
    """A pickled packet back (:meth:`SimPacket.__reduce__`)."""
    pkt = SimPacket.__new__(cls)
    for name, value in state.items():
        setattr(pkt, name, value)
    return pkt


# Compiled (packet.pxd), a cpdef method's Python signature has lost its return annotation: put
# back the one written above (interpreted, it is there already and this does nothing).
vars(PacketIds)["take"].__annotations__.setdefault("return", "int")

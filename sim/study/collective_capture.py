"""Pcaps of chosen ports during one size of ``lossless collective`` (``--capture``): an
observer of :func:`sim.scenarios.collective.run_size` that puts a
:class:`sim.study.results.Capture` on each port once the size's fabric is built and closes
them at its end, and :class:`Observers`, which lets it share a run with another observer
(the faults report's)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from sim.scenarios.collective import resolve_port
from sim.study.results import Capture
from sim.study.samples import CaptureBudget

__all__ = ["Observers", "PortCaptures", "CAPTURE_LIMIT_BYTES"]

#: All the captures of a run together (as ``lossless replay``'s default).
CAPTURE_LIMIT_BYTES = 1 << 30


class PortCaptures:
    """Capture the frames leaving ``ports`` (names as :func:`resolve_port` takes them) into
    ``folder/capture_<node>_p<port>.pcap``, all within ``limit_bytes``; ``report`` (after
    the size) lists per port ``port``, ``file``, ``frames``, ``bytes``, ``cut_at_ps``."""

    tracer = None

    def __init__(self, ports: Sequence[str], folder: str,
                 limit_bytes: int | None = CAPTURE_LIMIT_BYTES) -> None:
        self.ports, self.folder, self.limit_bytes = list(ports), folder, limit_bytes
        self.caps: dict[str, Capture] = {}
        self.report: list[dict[str, Any]] = []

    def attach(self, rf: Any) -> None:
        fabric = rf.fabric
        budget = CaptureBudget(self.limit_bytes)
        names = fabric.node_names()
        for text in self.ports:
            nid, port = resolve_port(fabric, text)
            key = f"{names[nid]}:p{port}"
            if key in self.caps:
                continue
            p = fabric.nodes[nid].ports[port]
            ib = getattr(p, "ib", None)
            cap = Capture(os.path.join(self.folder, f"capture_{names[nid]}_p{port}.pcap"),
                          budget, None, p.stack, None if ib is None else ib.vl_of)
            p.taps.append(cap)
            self.caps[key] = cap

    def done(self, rf: Any) -> None:
        for c in self.caps.values():
            c.close()
        self.report = [{"port": k, "file": os.path.basename(c.path), "frames": c.frames,
                        "bytes": c.bytes, "cut_at_ps": c.budget.cut_at_ps}
                       for k, c in self.caps.items()]


class Observers:
    """Several observers of one size: ``attach``, ``iteration`` and ``done`` go to each in
    turn; ``tracer`` is the first one's that has one."""

    def __init__(self, *observers: Any) -> None:
        self.observers = [o for o in observers if o is not None]
        self.tracer = next((o.tracer for o in self.observers
                            if getattr(o, "tracer", None) is not None), None)
        its = [o.iteration for o in self.observers if getattr(o, "iteration", None)]
        if its:
            def iteration(run: Any) -> None:
                for f in its:
                    f(run)
            self.iteration = iteration

    def attach(self, rf: Any) -> None:
        for o in self.observers:
            o.attach(rf)

    def done(self, rf: Any) -> None:
        for o in self.observers:
            o.done(rf)

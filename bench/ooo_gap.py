"""The data :data:`sim.nic.rc.OOO_TIMEOUT_PS` is fitted to: how long a gap in a QP's PSNs
stays open at an out-of-order receiver when nothing is lost, only reordered by adaptive
routing.  ``python -m bench.ooo_gap`` runs the all_to_all at full load of an adaptively
routed leaf_spine 4x2 (the case of docs/explanation/infiniband.md) for 1 ms with RoCE links and
with IB links, the receivers' gap timer set far out of reach (1 ms), and prints the longest
time a gap stayed open and whether any frame was NAKed or resent.  Pure Python (the
receiver is instrumented)."""

from __future__ import annotations

import os
import sys


def longest_gap_ps(links: str, duration_ms: float = 1.0) -> tuple[int, int]:
    """(longest time a gap stayed open in ps, frames resent) for ``links`` "roce" or "ib"."""
    from sim.nic import rc
    from sim.scenarios.description import build

    worst = [0]
    orig = rc.RcReceiver.on_frame

    def on_frame(self, psn, item, now=0):
        gap = self._gap_ps
        out = orig(self, psn, item, now)
        if gap is not None and self._gap_ps != gap:  # the gap opened at `gap` is filled
            worst[0] = max(worst[0], now - gap)
        return out

    rc.RcReceiver.on_frame = on_frame
    try:
        doc = {"run": {"duration_ms": duration_ms},
               "topology": {"kind": "leaf_spine", "leaves": 4, "spines": 2,
                            "hosts_per_leaf": 2, "routing": "adaptive"},
               "traffic": {"pattern": "all_to_all", "load": 1.0},
               "hosts": {"ooo": True, "ooo_timeout_us": 1000.0}}
        if links == "ib":
            doc["links"] = {"flow_control": "ib"}
            doc["switch"] = {"buffer_kb": 4000}
        sc = build(doc, "ooo_gap.toml")
        sc.fabric.run(sc.duration_ps)
        resent = sum(f["rc"].get("retransmitted_frames", 0)
                     for f in sc.fabric.summary()["flows"])
    finally:
        rc.RcReceiver.on_frame = orig
    return worst[0], resent


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("LOSSLESS_PURE_PYTHON") != "1":  # the receiver must be Python's
        os.environ["LOSSLESS_PURE_PYTHON"] = "1"
        os.execv(sys.executable, [sys.executable, "-m", "bench.ooo_gap", *(argv or [])])
    from sim.nic.rc import OOO_TIMEOUT_PS

    for links in ("roce", "ib"):
        gap, resent = longest_gap_ps(links)
        print(f"{links:>4} links: longest gap open {gap / 1e6:.2f} us, frames resent {resent}; "
              f"OOO_TIMEOUT_PS {OOO_TIMEOUT_PS / 1e6:g} us = {OOO_TIMEOUT_PS / gap:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

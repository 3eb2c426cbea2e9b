"""The C-structures prototype against the engine: ``python -m bench proto [--ms N] [--runs N]``.

:mod:`bench.proto_incast` (packet and port state as flat integer arrays, C methods, no Python
object a packet) is compiled by Cython into a temporary folder and run on the 8:1 incast of
``python -m bench sim`` (100 Gb/s, 1082-byte frames, 10 m links, static PFC threshold 20 KB,
ECN 5-200 KB at 1 %); beside it, in turn, the engine on that incast (``bench.sim_bench.
incast``) and the prototype interpreted (a tenth of the time).  Prints each one's
packet-hops per CPU second, the ratios, and what each counted, so that the prototype's
traffic can be seen to be the same kind (frames delivered, PAUSEs, CE marks).  The
prototype leaves out much of what the engine does (its docstring): its rate is a floor
under the design's cost, not a like-for-like figure.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time

#: What the prototype counts and the engine's run is read as (engine_incast).
COUNTS = ("events", "delivered", "pause_frames", "marked", "drops")


def _setup_module():
    """The project's setup.py (its Cython directives), loaded from beside ``bench/``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("_lossless_setup",
                                                  os.path.join(root, "setup.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def compiled_kernel(build_dir: str):
    """bench/proto_incast.py compiled with its .pxd (the compiled core's directives) into
    ``build_dir``; its module."""
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension

    here = os.path.dirname(os.path.abspath(__file__))
    for name in ("proto_incast.py", "proto_incast.pxd"):
        shutil.copy(os.path.join(here, name), build_dir)
    ext = Extension("proto_incast", [os.path.join(build_dir, "proto_incast.py")],
                    extra_compile_args=["-O2"])
    dist = Distribution({"ext_modules": cythonize(
        [ext], quiet=True, compiler_directives=_setup_module().DIRECTIVES)})
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace = False
    cmd.build_lib = build_dir
    cmd.build_temp = os.path.join(build_dir, "tmp")
    cmd.ensure_finalized()
    cmd.run()
    path = cmd.get_ext_fullpath("proto_incast")
    spec = importlib.util.spec_from_file_location("proto_incast", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _kernel(mod, duration_ps: int):
    """The prototype (module ``mod``'s) on bench.sim_bench's incast: its buffer, PFC
    thresholds, ECN marking, links and frames, PAUSE frames of the switch's size."""
    from bench.sim_bench import FRAME, INCAST_ECN, PROP_PS, RATE, SER_PS, _lossless_cfg
    from sim.net.switch import PFC_FRAME_BYTES
    from sim.units import frame_ser_time_ps

    senders = 8
    cfg = _lossless_cfg(senders + 2)
    k = mod.IncastKernel(senders, FRAME, SER_PS, frame_ser_time_ps(PFC_FRAME_BYTES, RATE),
                         PROP_PS, cfg.buffer_bytes, cfg.xoff_bytes, cfg.xon_delta_bytes,
                         INCAST_ECN.kmin_bytes, INCAST_ECN.kmax_bytes,
                         round(INCAST_ECN.pmax * 1_000_000), 0x9E3779B97F4A7C15)
    k.run(duration_ps)
    return k


def engine_incast(duration_ps: int) -> dict[str, int]:
    """bench.sim_bench's incast on the engine: its packet-hops and :data:`COUNTS`."""
    from bench.sim_bench import FRAME, incast_fabric, packet_hops

    fab, events = incast_fabric(duration_ps)
    s = fab.summary()
    t = s["totals"]
    return {"hops": packet_hops(fab), "events": events,
            "delivered": sum(f["bytes_delivered"] for f in s["flows"]) // FRAME,
            "pause_frames": t["pauses_sent"], "marked": t["ce_marked"], "drops": t["drops"]}


def _counts(c: dict[str, int]) -> str:
    return (f"{c['events']:,} events, {c['delivered']:,} delivered, "
            f"{c['pause_frames']:,} PAUSE frames, {c['marked']:,} CE, {c['drops']} drops")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench proto", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ms", type=float, default=20.0, help="simulated ms (default 20)")
    ap.add_argument("--runs", type=int, default=3, help="interleaved runs (default 3)")
    a = ap.parse_args(argv)
    if not a.ms > 0 or a.runs < 1:
        ap.error("--ms must be above 0 and --runs at least 1")
    from bench import proto_incast
    from sim.units import ms_to_ps

    dur = ms_to_ps(a.ms)
    with tempfile.TemporaryDirectory(prefix="proto_") as tmp:
        t0 = time.perf_counter()
        mod = compiled_kernel(tmp)
        print(f"python -m bench proto {' '.join(argv or sys.argv[1:])}".rstrip())
        print(f"compiled bench/proto_incast.py in {time.perf_counter() - t0:.1f} s")
        # interpreted and compiled count the same on the same run
        short = dur // 10
        ki, kc = _kernel(proto_incast, short), _kernel(mod, short)
        same = all(getattr(ki, f) == getattr(kc, f) for f in ("hops", "pauses", *COUNTS))
        print(f"interpreted and compiled, {short / 1e9:g} ms: "
              f"{'the same counts' if same else 'DIFFERENT counts'}")
        rows: dict[str, list[float]] = {"engine": [], "prototype": [],
                                        "prototype interpreted": []}
        hops: dict[str, int] = {}
        counts: dict[str, str] = {}
        for _ in range(a.runs):
            t = time.process_time()
            c = engine_incast(dur)
            rows["engine"].append(time.process_time() - t)
            hops["engine"], counts["engine"] = c["hops"], _counts(c)
            for name, m, d in (("prototype", mod, dur), ("prototype interpreted",
                                                         proto_incast, short)):
                t = time.process_time()
                k = _kernel(m, d)
                rows[name].append(time.process_time() - t)
                hops[name] = k.hops
                counts[name] = _counts({f: getattr(k, f) for f in COUNTS})
    print(f"\n8:1 incast, PFC + ECN; CPU s, median of {a.runs} (interleaved)")
    print(f"{'':<24}{'sim ms':>8}{'CPU s':>9}{'packet-hops':>13}{'hops/CPU s':>14}  "
          f"what it counted")
    rate = {}
    for name, ts in rows.items():
        m = statistics.median(ts)
        ms = a.ms / (10 if name.endswith("interpreted") else 1)
        rate[name] = hops[name] / m
        print(f"{name:<24}{ms:>8g}{m:>9.3f}{hops[name]:>13,}{rate[name]:>14,.0f}  "
              f"{counts[name]}")
    print(f"\nprototype / engine, packet-hops per CPU s: {rate['prototype'] / rate['engine']:.1f}x"
          f"; prototype compiled / interpreted: "
          f"{rate['prototype'] / rate['prototype interpreted']:.1f}x")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())

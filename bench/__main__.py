"""``python -m bench [--quick]``: every benchmark (simulator, pcap decoding, crafting);
``python -m bench sim|wire|craft|coll|scale|mem|realworld|flow|ring|proto|hpcc [options]``:
one of them with its own options (``python -m bench sim --packets 50000``; the old ``python -m bench
--packets N`` form still runs the simulator benchmark)."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    from bench import (
        coll_bench,
        craft_bench,
        flow_bench,
        hpcc_bench,
        mem_bench,
        proto_bench,
        realworld,
        ring_bench,
        scale_bench,
        sim_bench,
        wire_bench,
    )

    suites = {"sim": sim_bench.main, "wire": wire_bench.main, "craft": craft_bench.main,
              "coll": coll_bench.main, "scale": scale_bench.main,
              "mem": mem_bench.main,  # peak RSS of lossless replay
              "realworld": realworld.main,  # against published nccl-tests tables
              "flow": flow_bench.main,  # flow fidelity against packets
              "ring": ring_bench.main,  # the ring engine and steady loops; 1,024 GPUs
              "proto": proto_bench.main,  # the C-structures prototype against the engine
              "hpcc": hpcc_bench.main}  # HPCC's incast file: dynamic vs static, CLI vs library
    if argv and argv[0] in suites:
        return suites[argv[0]](argv[1:])
    if argv and argv != ["--quick"]:
        return sim_bench.main(argv)  # python -m bench --packets N ... (simulator options)
    quick = bool(argv)
    rc = 0
    for name, args in (("sim", ["--packets", "50000", "--runs", "1", "--incast-ms", "2"]
                        if quick else []),
                       ("wire", ["--quick"] if quick else []),
                       ("craft", ["--quick"] if quick else []),
                       ("coll", ["--quick"] if quick else []),
                       ("scale", ["--quick"] if quick else []),
                       ("flow", ["--quick"] if quick else []),
                       ("ring", ["--quick"] if quick else []),
                       ("hpcc", ["--runs", "1", "--ms", "1"] if quick else [])):
        print(f"\n===== python -m bench {name} {' '.join(args)}".rstrip(), flush=True)
        rc |= suites[name](args)
    return rc


raise SystemExit(main(sys.argv[1:]))

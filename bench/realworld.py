"""``python -m bench realworld [--only NAME] [--max SIZE] [--network-only] [--json FILE]``:
``lossless collective`` against published nccl-tests tables of real clusters.

Each setup of ``bench/realworld.toml`` (where it was published, the cluster as published,
the options that describe it, the out-of-place rows: size, time, busbw) runs as ``lossless
collective COLL -b MIN -e MAX ARGS --algo auto --proto auto -p hw=HW -p nccl_host=true``
with the setup's NCCL environment variables in the environment, one process per setup, and
prints per size the real and simulated busbw, their ratio, what the simulator ran and what
NCCL's tuner picks over every algorithm (a row where NCCL picks one the simulator does not
run, PAT or CollNet without SHARP switches, is marked). ``--network-only`` runs each setup a
second time without NCCL's host side (the network alone) and prints that ratio too.
``model`` is the same ratio for the time NCCL's own cost model gives the algorithm and
protocol the simulator ran (what NCCL's tuner compares; NCCL's pick unless the row is
marked; none for point-to-point sends). A ratio is the real time over the simulated one (the
busbw ratio, without the rounding of small busbw figures). The summary counts the sizes
within +-15 % from 1 MiB up and within +-30 % below (the targets of the comparison)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from typing import Any

from sim.workloads.tuner import nccl_text

HERE = os.path.dirname(os.path.abspath(__file__))
#: A size within this factor of the real busbw counts as matched: from 1 MiB up, and below.
TOLERANCE = 0.15
SMALL_TOLERANCE = 0.30
SMALL_BYTES = 1 << 20


def tolerance(size_bytes: int) -> float:
    return TOLERANCE if size_bytes >= SMALL_BYTES else SMALL_TOLERANCE


def setups() -> list[dict[str, Any]]:
    with open(os.path.join(HERE, "realworld.toml"), "rb") as fp:
        return tomllib.load(fp)["setup"]


def nominal_bytes(printed: int) -> int:
    """The -b/-e size nccl-tests printed ``printed`` for: its sizes double from -b and each is
    printed trimmed to the ranks (80 ranks: 32M prints 33553920), so the power of 2 at or
    above it (the tables' sizes are powers of 2 before the trim)."""
    return 1 << (printed - 1).bit_length()


def run_setup(s: dict[str, Any], max_bytes: int, nccl_host: bool) -> dict[int, dict]:
    """The simulated rows of setup ``s`` up to ``max_bytes``: size -> results row."""
    sizes = [r[0] for r in s["rows"] if r[0] <= max_bytes]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "r.json")
        cmd = [sys.executable, "-m", "sim", "collective", s["collective"], "-b",
               str(nominal_bytes(min(sizes))), "-e", str(nominal_bytes(max(sizes))),
               *s["args"].split(), "--algo", "auto", "--proto", "auto", "-p", f"hw={s['hw']}",
               "-p",
               f"nccl_host={'true' if nccl_host else 'false'}", "--json", out,
               "--quiet"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_")}
        env.update(s.get("env", {}))
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
        with open(out, encoding="utf-8") as fp:
            doc = json.load(fp)
    return {r["size_bytes"]: r for r in doc["results"]}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench realworld", description=__doc__)
    ap.add_argument("--only", action="append", help="setup name (repeatable)")
    ap.add_argument("--max", type=int, default=1 << 30, help="largest size, bytes")
    ap.add_argument("--network-only", action="store_true",
                    help="also run without NCCL's host side")
    ap.add_argument("--json", help="write every row as JSON")
    ap.add_argument("--plot", metavar="FILE.png",
                    help="draw real and simulated busbw against size, a panel per setup")
    a = ap.parse_args(argv)
    rows_out = []
    within = total = small_within = small_total = 0
    for s in setups():
        if a.only and s["name"] not in a.only:
            continue
        print(f"\n== {s['name']}: {s['collective']}, {s['gpu']}; {s['fabric']}")
        print(f"   source: {s['source']} ({s['date']})")
        env = " ".join(f"{k}={v}" for k, v in s.get("env", {}).items())
        print(f"   lossless collective {s['collective']} {s['args']} -p hw={s['hw']} "
              f"-p nccl_host=true --algo auto --proto auto" + (f"  [{env}]" if env else ""))
        if s.get("note"):
            print(f"   note: {s['note']}")
        sim = run_setup(s, a.max, True)
        net = run_setup(s, a.max, False) if a.network_only else {}
        head = (f"   {'size (B)':>11} {'real':>8} {'sim':>8} {'sim/real':>8} {'model':>6}"
                + (f" {'net-only':>8} {'ratio':>6}" if net else "")
                + f"  {'ran':>12}  NCCL picks")
        print(head)
        for size, real_us, real in s["rows"]:
            r = sim.get(size)
            if r is None:
                continue
            bus = r.get("busbw_GB_per_s")
            if bus is None:
                print(f"   {size:>11} {real:8.2f}  {r['error']}")
                continue
            ratio = real_us / r["time_us"]
            ok = abs(ratio - 1) <= tolerance(size)
            if size >= SMALL_BYTES:
                total += 1
                within += ok
            else:
                small_total += 1
                small_within += ok
            t = r.get("tuner") or {}
            ran = nccl_text(r["algorithm"], r["protocol"])
            nccl = t.get("nccl", "-")
            mark = "" if nccl in (ran, "-") else "  (NCCL's pick not simulated)"
            # NCCL's own cost model's time for what it picks, as the same ratio
            model_us = t.get("model_time_us")
            model = real_us / model_us if model_us else None
            line = (f"   {size:>11} {real:8.2f} {bus:8.2f} {ratio:8.2f} "
                    + (f"{model:6.2f}" if model else f"{'-':>6}"))
            if net:
                nb = net[size].get("busbw_GB_per_s") or 0.0
                net_us = net[size].get("time_us")
                line += f" {nb:8.2f} {real_us / net_us if net_us else 0.0:6.2f}"
            print(f"{line}  {ran:>12}  {nccl}{mark}")
            rows_out.append({"setup": s["name"], "size_bytes": size,
                             "real_busbw_GB_per_s": real, "sim_busbw_GB_per_s": bus,
                             "ratio": round(ratio, 4), "ran": ran,
                             "nccl_model_ratio": round(model, 4) if model else None,
                             "nccl": nccl,
                             **({"network_only_busbw_GB_per_s": net[size].get("busbw_GB_per_s")}
                                if net else {})})
    print(f"\n{within} of {total} sizes from 1 MiB within +-{TOLERANCE:.0%} of the real busbw"
          + (f"; {small_within} of {small_total} below 1 MiB within "
             f"+-{SMALL_TOLERANCE:.0%}" if small_total else ""))
    if a.plot:
        plot(rows_out, setups(), a.plot)
        print(f"figure: {a.plot}")
    if a.json:
        from wire.atomic import atomic_file

        with atomic_file(a.json, "w", encoding="utf-8") as fp:  # whole or not at all
            json.dump(rows_out, fp, indent=1)
    return 0



def plot(rows: list[dict[str, Any]], all_setups: list[dict[str, Any]], path: str) -> None:
    """A panel per setup: the real busbw, the simulated one with NCCL's host side, NCCL's own
    cost model's and, when run, the network alone, against size (log2); sizes where NCCL
    picks an algorithm the simulator does not run are marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from sim.study.collective_plots import size_label

    names = [s["name"] for s in all_setups if any(r["setup"] == s["name"] for r in rows)]
    title = {s["name"]: s for s in all_setups}
    cols = 2
    nrows = -(-len(names) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(12, 3.4 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        rs = sorted((r for r in rows if r["setup"] == name), key=lambda r: r["size_bytes"])
        x = [r["size_bytes"] for r in rs]
        ax.plot(x, [r["real_busbw_GB_per_s"] for r in rs], "o-", color="black", label="real")
        ax.plot(x, [r["sim_busbw_GB_per_s"] for r in rs], "s-", color="tab:blue",
                label="lossless, NCCL's host side")
        model = [(r["size_bytes"], r["real_busbw_GB_per_s"] * r["nccl_model_ratio"])
                 for r in rs if r.get("nccl_model_ratio")]
        if model:  # the busbw NCCL's own cost model gives what ran
            ax.plot(*zip(*model, strict=True), ":", color="tab:orange",
                    label="NCCL's cost model")
        if all(r.get("network_only_busbw_GB_per_s") for r in rs):
            ax.plot(x, [r["network_only_busbw_GB_per_s"] for r in rs], "--", color="tab:gray",
                    label="lossless, network alone")
        other = [r for r in rs if r["nccl"] not in (r["ran"], "-")]
        if other:
            ax.plot([r["size_bytes"] for r in other],
                    [r["real_busbw_GB_per_s"] for r in other], "x",
                    color="tab:red", markersize=9, label="NCCL picks what is not simulated")
        ax.set_xscale("log", base=2)
        every = -(-len(x) // 12)  # at most 12 size labels a panel
        ax.set_xticks(x[::every], [size_label(v) for v in x[::every]], fontsize=8)
        ax.minorticks_off()
        s = title[name]
        wide = x[0] < SMALL_BYTES  # kilobytes to gigabytes: busbw over 4 decades
        ax.set_title(f"{name}: {s['collective']}" + (" (busbw on a log scale)" if wide
                                                       else ""), fontsize=10)
        ax.set_ylabel("busbw (GB/s)")
        ax.grid(True, alpha=0.3)
        if wide:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="best")
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle("Published nccl-tests tables against lossless collective "
                 "(python -m bench realworld)", fontsize=11)
    fig.tight_layout(rect=(0, 0, 1, 0.98))  # the suptitle above the first row's titles
    from wire.atomic import atomic_file

    try:
        with atomic_file(path, "wb") as f:  # whole or not at all
            fig.savefig(f, format="png", dpi=110)
    finally:
        plt.close(fig)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""Golden outputs: ``python -m bench.golden record DIR`` / ``compare DIR``.

Runs every built-in scenario (:func:`sim.scenarios.names`) and every ``docs/examples/*.toml``
at short durations, with and without a few key options (``pfc=false``, ``cc=dcqcn``,
watchdogs, ``flow_control=cbfc``...), into ``DIR/CASE/`` and, for ``compare``, checks that a
fresh run gives byte-identical ``summary.json``, ``events.jsonl``, every ``timeseries.npz``
array and every ``*.pcap``; and a few ``lossless collective`` runs (``coll_*``: their
``results.json``, ``results.csv`` and ``table.txt``).  Plots are not written (matplotlib
output is not part of the contract).  A restructuring of ``sim/`` must leave ``compare``
reporting identical.

``python -m bench.golden compare DIR [CASE...]`` runs only the named cases;
``python -m bench.golden list`` prints the case names.  ``digest DIR`` prints one SHA-256 per
case (what ``tests/test_golden_layout.py`` may pin).
"""

from __future__ import annotations

import glob
import hashlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

__all__ = ["CASES", "case_digest", "cases", "compare_dirs", "main", "record"]

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Short runs in which the interesting events happen (PFC pauses, deadlocks and their
# detection, storms and watchdogs, CBFC stalls, DCQCN rate changes, a late joiner).
_BUILTIN: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "incast": [
        ("", {"duration_ms": 0.2}),
        ("nopfc", {"duration_ms": 0.2, "pfc": False}),
        ("dcqcn", {"duration_ms": 0.2, "cc": "dcqcn"}),
    ],
    "leaf_spine": [
        ("", {"duration_ms": 0.15}),
        ("nopfc", {"duration_ms": 0.15, "pfc": False}),
        ("dcqcn", {"duration_ms": 0.15, "cc": "dcqcn", "ecmp": False}),
    ],
    "ring": [
        ("", {"duration_ms": 0.2, "rate_frac": 0.9}),
        ("dcqcn", {"duration_ms": 0.2, "cc": "dcqcn", "rate_frac": 0.9, "stop_ms": 0.1}),
    ],
    "pfc_storm": [
        ("", {"duration_ms": 0.3, "stall_ms": 0.05}),
        ("wd", {"duration_ms": 0.3, "stall_ms": 0.05, "watchdog": True, "wd_poll_ms": 0.02,
                "wd_restore_ms": 0.05, "deadlock_confirm_us": 20.0}),
        ("nicwd", {"duration_ms": 0.3, "stall_ms": 0.05, "stall_end_ms": 0.2,
                   "nic_watchdog": True, "nic_timeout_ms": 0.05}),
    ],
    "pfc_deadlock_ring": [
        ("", {"duration_ms": 0.4, "stop_ms": 0.2, "rate_frac": 0.8,
              "deadlock_confirm_us": 20.0}),
        ("wd", {"duration_ms": 0.4, "stop_ms": 0.2, "rate_frac": 0.8, "watchdog": True,
                "wd_poll_ms": 0.02, "wd_restore_ms": 0.05, "deadlock_confirm_us": 20.0}),
        ("nopfc", {"duration_ms": 0.3, "stop_ms": 0.2, "pfc": False}),
    ],
    "pfc_deadlock_loop": [
        ("", {"duration_ms": 0.4, "stop_ms": 0.2, "rate_frac": 0.4,
              "deadlock_confirm_us": 20.0}),
        ("wd", {"duration_ms": 0.4, "stop_ms": 0.2, "rate_frac": 0.4, "watchdog": True,
                "wd_poll_ms": 0.02, "wd_restore_ms": 0.05, "wd_action": "drop"}),
    ],
    "pfc_unfairness": [
        ("", {"duration_ms": 0.3}),
        ("novictim", {"duration_ms": 0.2, "victim": False}),
    ],
    "sue_packing": [
        ("", {"duration_us": 20.0}),
        ("cbfc", {"duration_us": 20.0, "flow_control": "cbfc", "load": 0.9,
                  "pattern": "incast", "cbfc_buffer_kb": 8.0}),
        ("pfc_hot", {"duration_us": 20.0, "flow_control": "pfc", "load": 0.9,
                     "pattern": "incast", "xoff_kb": 5.0}),
        ("loss", {"duration_us": 20.0, "loss_rate": 0.01, "read_frac": 0.3, "vcs": 2}),
        ("nopfc", {"duration_us": 20.0, "pfc": False, "load": 0.9}),
    ],
    "late_joiner": [
        ("", {"duration_ms": 0.3, "join_ms": 0.1}),
        ("nopfc", {"duration_ms": 0.3, "join_ms": 0.1, "pfc": False, "cc": "none"}),
    ],
}

#: ``lossless collective`` runs (the transfer-level runner, sim.workloads.collective, and
#: NCCL's schedule): case -> CLI arguments after ``collective``; compared: results.json
#: (timeline and link usage included: ``--out``), results.csv and table.txt.
_COLLECTIVES: dict[str, list[str]] = {
    "coll_rail_allreduce": ["allreduce", "-b", "256K", "-e", "1M", "--fabric", "rail"],
    "coll_superpod_allreduce": ["allreduce", "-b", "512K", "-e", "512K", "--fabric",
                                "superpod", "-p", "sus=1"],
    "coll_tree_ll": ["allreduce", "-b", "64K", "-e", "256K", "--algo", "tree", "--proto",
                     "ll", "--fabric", "rail", "-p", "nodes=4"],
    "coll_alltoall_dcqcn": ["alltoall", "-b", "1M", "-e", "1M", "--fabric", "rail", "-p",
                            "nodes=4", "-p", "cc=dcqcn", "-p", "pxn=false", "--qps", "2"],
    "coll_nonvlink_fattree": ["reducescatter", "-b", "512K", "-e", "512K", "--fabric",
                              "fattree", "-p", "nvlink=false", "-n", "2", "-w", "1"],
    "coll_failover": ["allreduce", "-b", "1M", "-e", "1M", "--fabric", "rail", "-p",
                      "nodes=2", "-p", "gpus_per_node=2", "-p", "reliable=true", "-p",
                      "fault=nic_down:rank=1,at_us=5", "-p", "ack_timeout=1", "-p",
                      "retry_cnt=1", "-p", "failover=true"],
    "coll_straggler": ["allgather", "-b", "1M", "-e", "1M", "--fabric", "rail", "-p",
                       "fault=straggler:rank=2,delay_us=3"],
}

_EXAMPLE_VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("", {"duration_ms": 0.2}),
    ("nopfc", {"duration_ms": 0.2, "switch.pfc": False}),
    ("dcqcn", {"duration_ms": 0.2, "hosts.cc": "dcqcn"}),
]


def cases() -> dict[str, tuple[str, Any]]:
    """Case name -> (scenario name or file, params), or ("collective", CLI arguments); every
    built-in and example has one."""
    import sim.scenarios as scenarios

    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for name in scenarios.names():
        variants = _BUILTIN.get(name, [("", {})])
        for tag, params in variants:
            out[f"{name}-{tag}" if tag else name] = (name, params)
    for path in sorted(glob.glob(os.path.join(_ROOT, "docs", "examples", "*.toml"))):
        stem = os.path.splitext(os.path.basename(path))[0]
        for tag, params in _EXAMPLE_VARIANTS:
            out[f"ex_{stem}-{tag}" if tag else f"ex_{stem}"] = (path, params)
    for case, args in _COLLECTIVES.items():
        out[case] = ("collective", args)
    return out


CASES = cases


def _run(case: str, spec: tuple[str, Any], out_dir: str) -> None:
    from sim.study.results import run_scenario

    name, params = spec
    if name == "collective":  # lossless collective ARGS --out DIR, no plots, no output
        import contextlib

        from sim.cli import main as cli_main

        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            status = cli_main(["collective", *params, "--out", out_dir, "--force",
                               "--no-plots", "--quiet"])
        if status not in (0, 1):
            raise RuntimeError(f"{case}: lossless collective exited {status}")
        return
    run_scenario(name, params=dict(params), out_dir=out_dir, plots=False, progress=False,
                 force=True, warn=lambda _msg: None)


def record(root: str, only: list[str] | None = None) -> None:
    """Run the cases into ``root/CASE/``."""
    all_cases = cases()
    for case in only or list(all_cases):
        _run(case, all_cases[case], os.path.join(root, case))
        print(f"recorded {case}", flush=True)


def _files(d: str) -> Iterator[tuple[str, bytes]]:
    """(part name, bytes) of the compared outputs of one case folder, in a fixed order."""
    for name in sorted(os.listdir(d)):
        path = os.path.join(d, name)
        if name in ("summary.json", "events.jsonl", "results.json", "results.csv",
                    "table.txt") or name.endswith(".pcap"):
            with open(path, "rb") as f:
                yield name, f.read()
        elif name.endswith(".npz"):
            import numpy as np

            with np.load(path, allow_pickle=False) as z:
                for key in sorted(z.files):
                    a = z[key]
                    buf = io.BytesIO()
                    np.save(buf, a, allow_pickle=False)  # dtype, shape and bytes
                    yield f"{name}:{key}", buf.getvalue()


def _summary_json(raw: bytes) -> bytes:
    """summary.json without the keys that name the output folder (the runs are elsewhere)."""
    import json

    doc = json.loads(raw)

    def strip(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: _in_checkout(v) if k == "file" else strip(v) for k, v in x.items()
                    if k not in _VOLATILE_KEYS}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x

    return json.dumps(strip(doc), sort_keys=True).encode()


def _in_checkout(path: Any) -> Any:
    """A docs/examples scenario file's path (``params.file``) from ``docs/examples/`` on: the
    same case run from another checkout (a ``git worktree`` of the commit before) compares
    equal."""
    if isinstance(path, str) and _EXAMPLES in path:
        return path[path.rfind(_EXAMPLES):]
    return path


_EXAMPLES = os.path.join("docs", "examples", "")

#: summary.json keys whose values depend on where or how fast the run happened.
_VOLATILE_KEYS = {"out_dir", "wall_s", "wall_clock_s", "elapsed_s", "events_per_s"}


def _parts(d: str) -> dict[str, bytes]:
    parts = dict(_files(d))
    for name in ("summary.json", "results.json"):
        if name in parts:
            parts[name] = _summary_json(parts[name])
    return parts


def case_digest(d: str) -> str:
    """One SHA-256 over every compared part of a case folder."""
    h = hashlib.sha256()
    for name, data in _parts(d).items():
        h.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    return h.hexdigest()


def compare_dirs(before: str, after: str) -> list[str]:
    """Differences between two case folders (empty: identical)."""
    a, b = _parts(before), _parts(after)
    diffs = [f"only before: {k}" for k in sorted(set(a) - set(b))]
    diffs += [f"only after: {k}" for k in sorted(set(b) - set(a))]
    diffs += [f"differs: {k}" for k in sorted(set(a) & set(b)) if a[k] != b[k]]
    return diffs


def compare(root: str, only: list[str] | None = None) -> int:
    all_cases = cases()
    names = only or list(all_cases)
    missing = sorted(set(os.listdir(root)) - set(all_cases)) if not only else []
    bad = 0
    with tempfile.TemporaryDirectory(prefix="golden-") as tmp:
        for case in names:
            before = os.path.join(root, case)
            if not os.path.isdir(before):
                print(f"{case}: NOT RECORDED in {root}")
                bad += 1
                continue
            after = os.path.join(tmp, case)
            _run(case, all_cases[case], after)
            diffs = compare_dirs(before, after)
            n = len(_parts(after))
            if diffs:
                bad += 1
                print(f"{case}: DIFFERENT ({'; '.join(diffs[:6])})", flush=True)
            else:
                print(f"{case}: identical ({n} parts)", flush=True)
    for case in missing:
        print(f"{case}: recorded but no longer a case")
        bad += 1
    print(f"{len(names) - bad}/{len(names)} cases identical" if bad else
          f"all {len(names)} cases identical")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("record", "compare", "list", "digest"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "list":
        print("\n".join(cases()))
        return 0
    if not rest:
        print(f"lossless: bench.golden {cmd}: DIR is required", file=sys.stderr)
        return 2
    root, only = rest[0], rest[1:] or None
    unknown = sorted(set(only or ()) - set(cases()))
    if unknown:
        print(f"lossless: bench.golden: unknown case(s) {unknown}", file=sys.stderr)
        return 2
    if cmd == "record":
        record(root, only)
        return 0
    if cmd == "digest":
        for case in only or list(cases()):
            print(case, case_digest(os.path.join(root, case)))
        return 0
    return compare(root, only)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


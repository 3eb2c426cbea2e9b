"""`lossless replay` outputs: a results folder appears whole or not at all and never mixes runs
or a user's files; bad --out / --pcap / plot inputs give one line and exit 2; captures have a
size cap, a snaplen and an off switch; a foreign capture's addresses can be mapped to hosts; the
reference lists every replay option (docs/reference/replay.md), every scenario
(docs/reference/builtin-scenarios.md) and the address scheme (docs/reference/results-folder.md).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

import wire
from sim import scenarios
from sim.addresses import node_ip, node_mac
from sim.cli import build_parser, main
from sim.study.results import run_scenario
from sim.workloads.replay import normalize_address
from wire.atomic import MARKER, OutputError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: A few microseconds of a small incast: enough frames to capture, fast.
SMALL = ["-p", "senders=2", "-p", "duration_ms=0.02", "--no-plots"]


def _replay(capsys, *argv: str) -> tuple[int, list[str]]:
    code = main(["replay", "incast", *argv])
    return code, capsys.readouterr().err.splitlines()


def _partials(folder) -> list[str]:
    return [n for n in os.listdir(folder) if ".partial-" in n or ".old-" in n]


# ------------------------------------------------------------------ whole or nothing
def test_earlier_output_is_replaced_whole_no_stale_file(tmp_path, capsys) -> None:
    out = tmp_path / "o"
    code, _ = _replay(capsys, *SMALL, "--out", str(out))
    assert code == 0 and (out / MARKER).is_file()
    (out / "pfc_timeline.png").write_bytes(b"from an earlier PFC run")  # a stale output
    code, _ = _replay(capsys, *SMALL, "-p", "pfc=false", "--out", str(out))
    assert code == 0
    assert not (out / "pfc_timeline.png").exists()
    assert json.loads((out / "summary.json").read_text())["params"]["pfc"] is False
    assert _partials(tmp_path) == []


def test_default_out_folder_is_atomic_too(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "out" / "incast").mkdir(parents=True)
    (tmp_path / "out" / "incast" / "keep.txt").write_text("a user's file")
    code, err = _replay(capsys, *SMALL)
    assert code == 2 and len(err) == 1 and "out/incast" in err[0]
    (tmp_path / "out" / "incast" / "keep.txt").unlink()
    code, err = _replay(capsys, *SMALL)
    assert code == 0 and (tmp_path / "out" / "incast" / MARKER).is_file()
    assert _partials(tmp_path / "out") == []


def test_user_folder_refused_before_the_run_unless_force(tmp_path, capsys, monkeypatch) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    import sim.study.results

    ran = []
    real = sim.study.results._run_into
    monkeypatch.setattr(sim.study.results, "_run_into",
                        lambda *a, **k: ran.append(1) or real(*a, **k))
    code, err = _replay(capsys, *SMALL, "--out", str(out))
    assert code == 2 and len(err) == 1 and "--force" in err[0] and str(out) in err[0]
    assert ran == [] and os.listdir(out) == ["notes.txt"]
    code, _ = _replay(capsys, *SMALL, "--out", str(out), "--force")
    assert code == 0 and ran == [1]
    assert not (out / "notes.txt").exists() and (out / "summary.json").is_file()


def test_library_out_dir_semantics(tmp_path) -> None:
    empty = tmp_path / "empty"  # sim/sweep.py passes a fresh mkdtemp folder
    empty.mkdir()
    s = run_scenario("incast", {"senders": 2, "duration_ms": 0.01}, out_dir=empty, plots=False,
                     progress=False)
    assert (empty / "summary.json").is_file() and s["scenario"] == "incast"
    user = tmp_path / "user"
    user.mkdir()
    (user / "x").write_text("x")
    with pytest.raises(OutputError):
        run_scenario("incast", {"senders": 2, "duration_ms": 0.01}, out_dir=user,
                     plots=False, progress=False)
    run_scenario("incast", {"senders": 2, "duration_ms": 0.01}, out_dir=user, plots=False,
                 progress=False, force=True)
    assert not (user / "x").exists()


@pytest.mark.parametrize("existed", [True, False])
def test_ctrl_c_keeps_the_folder_as_it_was(tmp_path, capsys, monkeypatch, existed) -> None:
    out = tmp_path / "o"
    if existed:
        assert _replay(capsys, *SMALL, "--out", str(out))[0] == 0
    before = {n: (out / n).read_bytes() for n in os.listdir(out)} if existed else None
    from sim.fabric import Fabric

    calls = []

    def run(self, until_ps):
        calls.append(until_ps)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return Fabric.run.__wrapped__(self, until_ps)

    run.__wrapped__ = Fabric.run  # type: ignore[attr-defined]
    monkeypatch.setattr(Fabric, "run", run)
    code, err = _replay(capsys, *SMALL, "-p", "pfc=false", "--out", str(out))
    assert code == 130 and len(err) == 1 and err[0].startswith("lossless: interrupted: ")
    assert ("left as it was" in err[0]) == existed
    if existed:
        assert {n: (out / n).read_bytes() for n in os.listdir(out)} == before
    else:
        assert not out.exists()
    assert _partials(tmp_path) == []


def test_sigint_subprocess_exit_130_no_partial(tmp_path) -> None:
    out = tmp_path / "o"
    # a run far longer than the wait before the signal (50 ms of incast took about 0.3 s
    # and once ended before the signal came): it stops at the signal anyway
    # SIGINT as a terminal gives it: a shell that starts the tests in the background (as
    # `./.ci/run &` does) passes SIGINT on ignored, and Python then installs no handler
    p = subprocess.Popen([sys.executable, "-m", "sim", "replay", "incast", "-p",
                          "duration_ms=2000", "--no-plots", "--out", str(out)],
                         stderr=subprocess.PIPE, text=True, cwd=ROOT,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 60
        while not any(".partial-" in n for n in os.listdir(tmp_path)):  # it has started
            assert p.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        err = p.communicate(timeout=60)[1].splitlines()
    finally:
        if p.poll() is None:  # a failed test leaves no run behind
            p.kill()
            p.wait()
    assert p.returncode == 130
    assert err[-1] == f"lossless: interrupted: nothing written ({out} not created)"
    assert os.listdir(tmp_path) == []


# ------------------------------------------------------------------ bad --out
def test_out_is_a_file_or_unwritable(tmp_path, capsys) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    for out in (f, f / "sub"):
        code, err = _replay(capsys, *SMALL, "--out", str(out))
        assert code == 2 and len(err) == 1 and err[0].startswith(f"lossless: {out}")
    assert f.read_text() == "x" and _partials(tmp_path) == []


# ------------------------------------------------------------------ capture size
def test_capture_limit_cuts_all_captures_and_says_so(tmp_path, capsys) -> None:
    out = tmp_path / "o"
    code, err = _replay(capsys, "-p", "senders=2", "-p", "duration_ms=0.05", "--no-plots",
                        "--capture", "0:1", "--capture-limit-mb", "0.02", "--out", str(out))
    assert code == 0
    assert "warning" in err[0] and "0.02 MB" in err[0]  # said up front
    assert "captures CUT at" in err[-1]
    s = json.loads((out / "summary.json").read_text())
    assert s["capture"]["cut_at_ps"] is not None and s["capture"]["limit_bytes"] == 20_000
    total = 0
    for c in s["captures"].values():
        size = os.path.getsize(out / c["file"])
        assert size == c["bytes"]
        assert len(list(wire.read(out / c["file"]))) == c["frames"]  # still a valid pcap
        total += size
    assert total == s["capture"]["written_bytes"] <= 20_000


def test_snaplen_keeps_orig_len_and_no_capture_writes_none(tmp_path) -> None:
    kw = dict(params={"senders": 2, "duration_ms": 0.02}, plots=False, progress=False)
    run_scenario("incast", out_dir=tmp_path / "a", **kw)
    run_scenario("incast", out_dir=tmp_path / "b", snaplen_bytes=60, **kw)
    full = list(wire.read(tmp_path / "a" / "bottleneck.pcap"))
    cut = list(wire.read(tmp_path / "b" / "bottleneck.pcap"))
    assert len(full) == len(cut) > 0
    for x, y in zip(full, cut, strict=True):
        assert y.data == x.data[:60] and y.orig_len == x.orig_len == len(x.data)
    s = run_scenario("incast", out_dir=tmp_path / "c", write_captures=False,
                     captures=[(0, 1)], **kw)
    assert s["captures"] == {} and s["capture"]["written_bytes"] == 0
    assert not [n for n in os.listdir(tmp_path / "c") if n.endswith(".pcap")]


def test_big_capture_warned_before_the_run(tmp_path) -> None:
    msgs = []
    run_scenario("incast", {"senders": 2, "duration_ms": 0.01}, out_dir=tmp_path / "o",
                 plots=False, progress=False, capture_limit_bytes=1000, warn=msgs.append)
    assert len(msgs) == 1 and "may write up to" in msgs[0] and "0.001 MB" in msgs[0]
    quiet = []
    run_scenario("incast", {"senders": 2, "duration_ms": 0.01}, out_dir=tmp_path / "o",
                 plots=False, progress=False, warn=quiet.append)
    assert quiet == []


# ------------------------------------------------------------------ --pcap / --map
def _foreign_pcap(path, n: int = 12) -> None:
    with wire.CaptureWriter(path) as w:
        for i in range(n):
            src = "192.168.1.5" if i % 3 else "192.168.1.7"
            w.write(wire.build({"eth": {"src": "7c:fe:90:64:3b:32", "dst": "7c:fe:90:64:3b:33"},
                                "ipv4": {"src": src, "dst": "192.168.1.9"}, "udp": {},
                                "bth": {"opcode": "RC_SEND_ONLY", "dest_qp": 5, "psn": i},
                                "payload": {"length": 200}}), ts_ns=10**9 + i * 1000)


def test_foreign_capture_refused_then_mapped(tmp_path, capsys) -> None:
    pcap = tmp_path / "real.pcap"
    _foreign_pcap(pcap)
    out = tmp_path / "o"
    code, err = _replay(capsys, *SMALL, "--pcap", str(pcap), "--out", str(out))
    assert code == 2 and len(err) == 1
    assert "12 of 12 frame(s) skipped" in err[0] and "192.168.1.5 -> 192.168.1.9" in err[0]
    assert "--map" in err[0] and not out.exists()
    # all mapped (one by IP, one by MAC spelled in capitals): every frame replayed, exit 0
    code, err = _replay(capsys, *SMALL, "--pcap", str(pcap), "--map", "192.168.1.5=1",
                        "--map", "192.168.1.7=2", "--map", "7C-FE-90-64-3B-33=3",
                        "--out", str(out))
    assert code == 0, err
    s = json.loads((out / "summary.json").read_text())
    assert s["replay"]["injected"] == 12 and s["replay"]["skipped"] == 0
    # only some mapped: results written, the skipped frames said, exit 1
    code, err = _replay(capsys, *SMALL, "--pcap", str(pcap), "--map", "192.168.1.5=1",
                        "--map", "192.168.1.9=3", "--out", str(out))
    assert code == 1 and "4 of 12 frame(s) skipped" in err[-1]
    assert "192.168.1.7 -> 192.168.1.9" in err[-1]


def test_pcap_missing_and_map_to_a_switch(tmp_path, capsys) -> None:
    code, err = _replay(capsys, *SMALL, "--pcap", str(tmp_path / "nope.pcap"),
                        "--out", str(tmp_path / "o"))
    assert code == 2 and err == [f"lossless: {tmp_path / 'nope.pcap'}: --pcap: no such file"]
    pcap = tmp_path / "real.pcap"
    _foreign_pcap(pcap)
    code, err = _replay(capsys, *SMALL, "--pcap", str(pcap), "--map", "192.168.1.5=0",
                        "--out", str(tmp_path / "o"))
    assert code == 2 and len(err) == 1 and "node 0 is not a host" in err[0]
    assert not (tmp_path / "o").exists()


@given(st.binary(min_size=6, max_size=6), st.sampled_from([":", "-"]), st.booleans())
def test_mac_spellings_match_the_dissector(mac: bytes, sep: str, upper: bool) -> None:
    text = sep.join(f"{b:02x}" for b in mac)
    frame = wire.build({"eth": {"src": ":".join(f"{b:02x}" for b in mac)}, "ipv4": {},
                        "udp": {}})
    assert normalize_address(text.upper() if upper else text) == wire.dissect(frame)["eth"]["src"]


# ------------------------------------------------------------------ plot inputs
@pytest.mark.parametrize("case", ["npz_garbage", "npz_truncated", "npz_missing", "json_bad",
                                  "json_missing", "json_list", "npz_key"])
def test_plot_bad_results_one_line(tmp_path, capsys, case) -> None:
    out = tmp_path / "o"
    run_scenario("incast", {"senders": 2, "duration_ms": 0.01}, out_dir=out, plots=False,
                 progress=False)
    npz, js = out / "timeseries.npz", out / "summary.json"
    if case == "npz_garbage":
        npz.write_bytes(b"garbage")
    elif case == "npz_truncated":
        npz.write_bytes(npz.read_bytes()[:2000])
    elif case == "npz_missing":
        npz.unlink()
    elif case == "json_bad":
        js.write_text('{"scenario": ')
    elif case == "json_missing":
        js.unlink()
    elif case == "json_list":
        js.write_text("[]")
    else:
        import numpy as np

        with np.load(npz) as ts:
            keep = {k: ts[k] for k in ts.files if k != "duration_ps"}
        np.savez(npz, **keep)
    code = main(["plot", str(out)])
    err = capsys.readouterr().err.splitlines()
    named = npz if case.startswith("npz") else js
    assert code == 2 and len(err) == 1 and err[0].startswith(f"lossless: {named}: "), err


# ------------------------------------------------------------------ the docs
def _reference(page: str) -> str:
    with open(os.path.join(ROOT, "docs", "reference", page), encoding="utf-8") as f:
        return f.read()


def test_docs_list_every_scenario_and_replay_option() -> None:
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices")
               and isinstance(a.choices, dict) and "replay" in a.choices)
    replay = sub.choices["replay"]
    opts = [o for a in replay._actions for o in a.option_strings if o.startswith("--")]
    assert "--force" in opts and "--map" in opts
    text = _reference("replay.md")
    missing = [o for o in opts if o != "--help" and not re.search(rf"`{o}\b", text)]
    assert missing == [], f"replay options not in docs/reference/replay.md: {missing}"
    text = _reference("builtin-scenarios.md")
    missing = [n for n in scenarios.names() if not re.search(rf"^#+ .*`{n}`", text, re.M)]
    assert missing == [], f"scenarios without a section in builtin-scenarios.md: {missing}"


#: The section of docs/reference/results-folder.md that gives the address scheme's examples.
ADDRESSES = "Names of nodes and ports"


def test_docs_address_scheme_matches_the_code() -> None:
    """docs/reference/results-folder.md 'Names of nodes and ports' gives worked examples
    ("node 258 is `02:00:01:02:00:00`, `10.0.1.2`", "port 3 of node 0 is `...`"); each must
    be what sim.addresses produces (the module docstring is the one description)."""
    text = _reference("results-folder.md")
    section = text[text.index(f"## {ADDRESSES}"):]
    section = " ".join(section[:section.index("\n## ", 1)].split())
    ex = [(node, "0", mac, ip) for node, mac, ip in
          re.findall(r"(?<!of )\bnode (\d+) is `([0-9a-f:]{17})`(?:, `([\d.]+)`)?", section)]
    ex += [(node, port, mac, "") for port, node, mac in
           re.findall(r"\bport (\d+) of node (\d+) is `([0-9a-f:]{17})`", section)]
    assert len(ex) >= 3 and any(ip for *_, ip in ex) and any(p != "0" for _, p, *_ in ex)
    for node, port, mac, ip in ex:
        assert node_mac(int(node), int(port)) == mac
        if ip:
            assert node_ip(int(node)) == ip
    sub = next(a for a in build_parser()._actions if hasattr(a, "choices")
               and isinstance(a.choices, dict) and "replay" in a.choices)
    pcap = next(a for a in sub.choices["replay"]._actions if "--pcap" in a.option_strings)
    help_text = " ".join(pcap.help.split())
    assert "docs/reference/results-folder.md" in help_text and ADDRESSES in help_text
    assert "02:00:" not in help_text  # points there, no copy


def test_deadlock_line_names_the_cycle_as_the_plots_do(tmp_path, capsys) -> None:
    """The summary line's deadlock cycle uses the nodes' names (summary.json labels, the
    plots' names), not node ids."""
    code = main(["replay", "pfc_deadlock_ring", "-p", "duration_ms=0.4", "-p", "stop_ms=0.2",
                 "-p", "rate_frac=0.8", "-p", "deadlock_confirm_us=20", "--no-plots",
                 "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    names = {n["id"]: n["name"] for n in s["labels"]["nodes"]}
    cycle = " -> ".join(f"{names[n]}:p{p}" for n, p, _prio in s["deadlock"]["cycle"])
    assert code == 0 and cycle.startswith("sw0:p1 -> sw1:p1")
    assert f"(cycle of egress ports {cycle})" in err, err

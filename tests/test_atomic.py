"""wire.atomic: outputs appear whole or not at all (issue 15's one mechanism)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from wire.atomic import MARKER, OutputError, atomic_dir, atomic_file, check_output_dir, is_ours


def test_file_replaced_only_on_success(tmp_path):
    dest = tmp_path / "a.bin"
    dest.write_bytes(b"old")
    os.chmod(dest, 0o640)
    with atomic_file(dest) as f:
        f.write(b"new")
        assert dest.read_bytes() == b"old"  # nothing visible before the block ends
    assert dest.read_bytes() == b"new"
    assert oct(dest.stat().st_mode & 0o777) == oct(0o640)  # permission bits kept
    assert sorted(os.listdir(tmp_path)) == ["a.bin"]


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_file_untouched_on_error(tmp_path, exc):
    dest = tmp_path / "a.bin"
    dest.write_bytes(b"old")
    with pytest.raises(exc), atomic_file(dest) as f:
        f.write(b"half")
        raise exc()
    assert dest.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["a.bin"]  # the temporary file is gone


def test_file_refuses_folder_and_missing_parent(tmp_path):
    with pytest.raises(OutputError, match="is a folder"), atomic_file(tmp_path):
        pass
    with pytest.raises(OutputError, match="does not exist"), atomic_file(tmp_path / "no" / "x"):
        pass


def test_sigkill_leaves_no_partial_under_final_name(tmp_path):
    dest = tmp_path / "out.bin"
    dest.write_bytes(b"precious")
    code = textwrap.dedent(f"""
        import os, sys, time
        from wire.atomic import atomic_file
        with atomic_file({str(dest)!r}) as f:
            f.write(b"x" * 100000)
            f.flush()
            print("ready", flush=True)
            time.sleep(60)
    """)
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert p.stdout.readline().strip() == b"ready"
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert dest.read_bytes() == b"precious"
    leftovers = [n for n in os.listdir(tmp_path) if n != "out.bin"]
    assert all(n.startswith(".out.bin.partial-") for n in leftovers)


def test_dir_replaces_earlier_output_whole(tmp_path):
    dest = tmp_path / "run"
    with atomic_dir(dest) as d:
        open(os.path.join(d, "pfc_timeline.png"), "w").close()
        open(os.path.join(d, "summary.json"), "w").close()
    assert is_ours(dest)
    with atomic_dir(dest) as d:
        assert not os.path.exists(dest / "x")
        open(os.path.join(d, "summary.json"), "w").close()
    assert sorted(os.listdir(dest)) == sorted([MARKER, "summary.json"])  # no file left behind
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_dir_refuses_users_folder_and_keeps_it(tmp_path):
    dest = tmp_path / "mine"
    dest.mkdir()
    (dest / "notes.txt").write_text("mine")
    with pytest.raises(OutputError, match="not empty"), atomic_dir(dest):
        pass
    assert os.listdir(dest) == ["notes.txt"]
    with atomic_dir(dest, force=True) as d:
        open(os.path.join(d, "summary.json"), "w").close()
    assert sorted(os.listdir(dest)) == sorted([MARKER, "summary.json"])


def test_dir_interrupted_leaves_earlier_output(tmp_path):
    dest = tmp_path / "run"
    with atomic_dir(dest) as d:
        open(os.path.join(d, "old.json"), "w").close()
    with pytest.raises(KeyboardInterrupt), atomic_dir(dest) as d:
        open(os.path.join(d, "new.json"), "w").close()
        raise KeyboardInterrupt
    assert sorted(os.listdir(dest)) == sorted([MARKER, "old.json"])
    assert sorted(os.listdir(tmp_path)) == ["run"]


def test_check_output_dir(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(OutputError, match="not a folder"):
        check_output_dir(tmp_path / "f")
    with pytest.raises(OutputError, match="not a folder"):
        check_output_dir(tmp_path / "f" / "sub")
    check_output_dir(tmp_path / "new" / "deeper")  # creatable
    (tmp_path / "empty").mkdir()
    check_output_dir(tmp_path / "empty")

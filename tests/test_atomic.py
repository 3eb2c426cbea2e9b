"""wire.atomic: outputs appear whole or not at all (one mechanism for every output)."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import threading

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


# ------------------------------------------------- destinations that are not regular files
def _mknod(path, major: int, minor: int) -> None:
    """A character device node in a test folder (root only): 1,3 is null, 1,7 is full."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    except PermissionError:
        pytest.skip("mknod needs root")


def test_char_device_is_written_through_not_replaced(tmp_path):
    dev = tmp_path / "null"
    _mknod(dev, 1, 3)
    with atomic_file(dev) as f:
        f.write(b"x" * 10000)
    assert stat.S_ISCHR(os.lstat(dev).st_mode)  # still the device node
    assert os.listdir(tmp_path) == ["null"]  # no temporary file was made


def test_fifo_is_written_through(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    with atomic_file(fifo, "w", encoding="utf-8") as f:
        f.write("hello\n")
    reader.join(10)
    assert got == [b"hello\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_symlink_is_followed_and_kept(tmp_path):
    (tmp_path / "sub").mkdir()
    target = tmp_path / "sub" / "real.bin"
    target.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(os.path.join("sub", "real.bin"))  # relative, as ln -s makes them
    with atomic_file(link) as f:
        f.write(b"new")
    assert link.is_symlink() and os.readlink(link) == os.path.join("sub", "real.bin")
    assert target.read_bytes() == b"new"
    assert sorted(os.listdir(tmp_path / "sub")) == ["real.bin"]


def test_dangling_symlink_creates_the_file_it_names(tmp_path):
    link = tmp_path / "link.bin"
    link.symlink_to(tmp_path / "made.bin")
    with atomic_file(link) as f:
        f.write(b"new")
    assert link.is_symlink() and (tmp_path / "made.bin").read_bytes() == b"new"
    dangling = tmp_path / "nowhere"
    dangling.symlink_to(tmp_path / "no" / "x.bin")
    with pytest.raises(OutputError, match="does not exist"), atomic_file(dangling):
        pass
    assert dangling.is_symlink()


def test_symlink_to_a_folder_output_replaces_the_folder(tmp_path):
    real = tmp_path / "run"
    with atomic_dir(real) as d:
        open(os.path.join(d, "a.json"), "w").close()
    link = tmp_path / "latest"
    link.symlink_to("run")
    with atomic_dir(link) as d:
        open(os.path.join(d, "b.json"), "w").close()
    assert link.is_symlink() and sorted(os.listdir(real)) == sorted([MARKER, "b.json"])


def test_full_device_is_one_error_naming_the_destination(tmp_path):
    full = tmp_path / "full"
    _mknod(full, 1, 7)  # the device of /dev/full, in a folder of the test's own
    with pytest.raises(OutputError, match=rf"^{full}: cannot write: No space left on device$"):
        with atomic_file(full) as f:
            f.write(b"x" * 100)
    assert stat.S_ISCHR(os.lstat(full).st_mode)


def test_block_device_and_socket_are_refused(tmp_path):
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(tmp_path / "s"))
        with pytest.raises(OutputError, match="is a socket"), atomic_file(tmp_path / "s"):
            pass
    finally:
        sock.close()
    blk = tmp_path / "blk"
    try:
        os.mknod(blk, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    except PermissionError:
        return
    with pytest.raises(OutputError, match="is a block device"), atomic_file(blk):
        pass


def _one_line_exit_2(rc: int, err: str, dest) -> None:
    assert rc == 2, (rc, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{dest}: cannot write: No space left on device" in err, err


def test_commands_keep_device_nodes(tmp_path):
    """craft -o, collective --json/--csv write through a device node (and report a full one
    in one line, exit 2) instead of replacing it with a file."""
    pytest.importorskip("matplotlib")
    from tests.helpers import run_cli

    (tmp_path / "x.jsonl").write_text('{"eth": {}}\n')
    null, full = tmp_path / "null", tmp_path / "full"
    _mknod(null, 1, 3)
    _mknod(full, 1, 7)
    rc, _, err = run_cli(["craft", str(tmp_path / "x.jsonl"), "-o", str(null)])
    assert rc == 0 and stat.S_ISCHR(os.lstat(null).st_mode), err
    rc, _, err = run_cli(["craft", str(tmp_path / "x.jsonl"), "-o", str(full)])
    _one_line_exit_2(rc, err, full)
    tiny = ["collective", "allreduce", "--fabric", "star", "-p", "nodes=1", "-p",
            "gpus_per_node=2", "-p", "link_gbps=100", "-b", "64K", "-e", "64K"]
    for opt in ("--json", "--csv"):
        rc, _, err = run_cli([*tiny, opt, str(full)])
        _one_line_exit_2(rc, err, full)
        rc, _, err = run_cli([*tiny, opt, str(null)])
        assert rc == 0, err
    assert stat.S_ISCHR(os.lstat(null).st_mode) and stat.S_ISCHR(os.lstat(full).st_mode)

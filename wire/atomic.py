"""Outputs that appear whole or not at all: the one mechanism every command uses to write a
user's file or results folder.

* :func:`atomic_file` writes to a hidden temporary file in the destination's folder and
  renames it over the destination only when the block ends without an exception (POSIX
  ``rename`` is atomic within a file system).  An exception, Ctrl-C or SIGKILL leaves the
  destination as it was: a killed process leaves at most a ``.NAME.partial-PID`` file, never a
  valid-looking partial file under the final name.
* :func:`atomic_dir` does the same for a results folder: the block fills a fresh temporary
  sibling folder, which replaces the destination when complete.  The destination must be
  absent, empty, or an earlier output of ours (it holds the :data:`MARKER` file), unless
  ``force=True``; :func:`check_output_dir` applies the same rule up front, so a command can
  refuse before it spends minutes computing.  An earlier output is replaced whole, so no file of
  an earlier run is ever left beside the new ones.

Reading a file while it is replaced is safe: readers keep the old inode.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import IO, Any

__all__ = ["MARKER", "OutputError", "atomic_file", "atomic_dir", "check_output_dir",
           "is_ours"]

#: File that marks a folder as written by lossless (so a later run may replace it).
MARKER = ".lossless-output"


class OutputError(ValueError):
    """An output that must not be written there (a user's folder, a file, no permission)."""


def _partial_name(path: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.partial-{os.getpid()}")


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], mode: str = "wb",
                **open_kw: Any) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` for writing; on a clean exit flush, fsync and
    rename it to ``path``; on any exception (KeyboardInterrupt included) delete it and
    re-raise, leaving ``path`` untouched.  An existing ``path`` keeps its permission bits."""
    if "w" not in mode and "x" not in mode:
        raise ValueError(f"atomic_file writes; mode {mode!r} has no 'w'")
    dest = os.fspath(path)
    if os.path.isdir(dest):
        raise OutputError(f"{dest}: is a folder, not a file")
    folder = os.path.dirname(os.path.abspath(dest))
    if not os.path.isdir(folder):
        raise OutputError(f"{dest}: folder {folder} does not exist")
    tmp = _partial_name(dest)
    try:
        fp = open(tmp, mode.replace("x", "w"), **open_kw)
    except OSError as e:
        raise OutputError(f"{dest}: cannot write here: {e.strerror or e}") from None
    try:
        with fp:
            yield fp
            fp.flush()
            with contextlib.suppress(OSError):
                os.fsync(fp.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, os.stat(dest).st_mode & 0o7777)
        if "x" in mode and os.path.exists(dest):
            raise OutputError(f"{dest}: exists")
        os.replace(tmp, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def is_ours(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` is a folder an earlier lossless run wrote (it holds MARKER)."""
    return os.path.isfile(os.path.join(os.fspath(path), MARKER))


def check_output_dir(path: str | os.PathLike[str], *, force: bool = False) -> None:
    """Raise :class:`OutputError` unless ``path`` may become a results folder: absent (its
    parent creatable), an empty folder, an earlier output of ours, or any folder with
    ``force``.  A file is always refused."""
    dest = os.fspath(path)
    if os.path.lexists(dest) and not os.path.isdir(dest):
        raise OutputError(f"{dest}: exists and is not a folder")
    if os.path.isdir(dest):
        if not force and os.listdir(dest) and not is_ours(dest):
            raise OutputError(f"{dest}: folder is not empty and was not written by lossless; "
                              "choose another --out or pass --force to replace it")
        parent = os.path.dirname(os.path.abspath(dest))
    else:
        parent = os.path.dirname(os.path.abspath(dest))
        while not os.path.isdir(parent):
            if os.path.lexists(parent):
                raise OutputError(f"{dest}: {parent} is not a folder")
            parent = os.path.dirname(parent)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{dest}: cannot write in {parent}: permission denied")


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str], *, force: bool = False) -> Iterator[str]:
    """Yield a fresh temporary folder beside ``path``; when the block ends cleanly, write
    :data:`MARKER` into it and put it in place of ``path`` (an earlier output, or with
    ``force`` any folder, is removed only after the new one is complete).  On an exception the
    temporary folder is deleted and ``path`` is left exactly as it was."""
    dest = os.path.abspath(os.fspath(path))
    check_output_dir(dest, force=force)
    parent = os.path.dirname(dest)
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(dest)}.partial-", dir=parent)
    except OSError as e:
        raise OutputError(f"{path}: cannot write here: {e.strerror or e}") from None
    try:
        yield tmp
        with open(os.path.join(tmp, MARKER), "w", encoding="utf-8") as f:
            f.write("written by lossless; a later run may replace this folder whole\n")
        check_output_dir(dest, force=force)  # nobody put a user's file there meanwhile
        old = None
        if os.path.isdir(dest):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(dest)}.old-", dir=parent)
            os.rename(dest, os.path.join(old, "d"))
        os.chmod(tmp, 0o777 & ~_umask())
        os.rename(tmp, dest)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask

"""Outputs that appear whole or not at all: the one mechanism every command uses to write a
user's file or results folder.

* :func:`atomic_file` writes to a hidden temporary file in the destination's folder and
  renames it over the destination only when the block ends without an exception (POSIX
  ``rename`` is atomic within a file system).  An exception, Ctrl-C or SIGKILL leaves the
  destination as it was: a killed process leaves at most a ``.NAME.partial-PID`` file, never a
  valid-looking partial file under the final name.  That is for regular files: a symbolic
  link is followed (the file it names is replaced, the link stays, a dangling link's file is
  created), a character device or a FIFO (``/dev/null``, ``/dev/stdout``, a named pipe) is
  written straight through (nothing can be renamed over a device), and a block device or a
  socket is refused.  A write that fails (``ENOSPC`` of a full disk or ``/dev/full``) is an
  :class:`OutputError` naming the destination.
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
import errno
import os
import shutil
import stat
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


#: errno values only a write gives: such an OSError raised inside an :func:`atomic_file`
#: block is the destination's failure (a read of the block's input never gives them).
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _cannot_write(dest: str, e: OSError) -> OutputError:
    return OutputError(f"{dest}: cannot write: {e.strerror or e}")


def _kind(dest: str) -> tuple[str, str]:
    """(what to do, the path to write) for a destination: ``("replace", real path)`` for a
    regular file or a new one (symbolic links followed), ``("through", dest)`` for a
    character device or a FIFO.  Raises :class:`OutputError` for anything else."""
    try:
        mode = os.stat(dest).st_mode  # follows symbolic links
    except FileNotFoundError:
        # absent, or a dangling link: the file the link names is created, the link kept
        return "replace", os.path.realpath(dest) if os.path.islink(dest) else dest
    except OSError as e:
        raise OutputError(f"{dest}: cannot write here: {e.strerror or e}") from None
    if stat.S_ISREG(mode):
        return "replace", os.path.realpath(dest)
    if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode):
        return "through", dest
    if stat.S_ISDIR(mode):
        raise OutputError(f"{dest}: is a folder, not a file")
    what = "a block device" if stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(
        mode) else "not a regular file"
    raise OutputError(f"{dest}: is {what}; write to a file, a character device or a FIFO")


@contextlib.contextmanager
def atomic_file(path: str | os.PathLike[str], mode: str = "wb",
                **open_kw: Any) -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path`` for writing; on a clean exit flush, fsync and
    rename it to ``path``; on any exception (KeyboardInterrupt included) delete it and
    re-raise, leaving ``path`` untouched.  An existing ``path`` keeps its permission bits.

    A symbolic link is followed (its target is replaced, the link kept); a character device
    or a FIFO is opened and written straight through; a block device, a socket or a folder
    is refused.  Write failures (no space, quota, file too large) become
    :class:`OutputError` naming ``path``."""
    if "w" not in mode and "x" not in mode:
        raise ValueError(f"atomic_file writes; mode {mode!r} has no 'w'")
    dest = os.fspath(path)
    how, real = _kind(dest)
    if how == "through":
        if "x" in mode:
            raise OutputError(f"{dest}: exists")
        yield from _through(dest, mode, open_kw)
        return
    folder = os.path.dirname(os.path.abspath(real))
    if not os.path.isdir(folder):
        raise OutputError(f"{dest}: folder {folder} does not exist")
    tmp = _partial_name(real)
    try:
        fp = open(tmp, mode.replace("x", "w"), **open_kw)
    except OSError as e:
        raise OutputError(f"{dest}: cannot write here: {e.strerror or e}") from None
    try:
        with fp:
            try:
                yield fp
            except OSError as e:
                if e.errno in _WRITE_ERRNOS:
                    raise _cannot_write(dest, e) from None
                raise
            try:
                fp.flush()
            except OSError as e:
                raise _cannot_write(dest, e) from None
            with contextlib.suppress(OSError):
                os.fsync(fp.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, os.stat(real).st_mode & 0o7777)
        if "x" in mode and os.path.lexists(dest):
            raise OutputError(f"{dest}: exists")
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _through(dest: str, mode: str, open_kw: dict) -> Iterator[IO[Any]]:
    """The body of :func:`atomic_file` for a character device or a FIFO: no temporary file
    (a FIFO's open waits for its reader, as a shell redirection does)."""
    try:
        fp = open(dest, mode, **open_kw)
    except OSError as e:
        raise OutputError(f"{dest}: cannot write here: {e.strerror or e}") from None
    try:
        try:
            yield fp
        except OSError as e:
            if e.errno in _WRITE_ERRNOS:
                raise _cannot_write(dest, e) from None
            raise
        try:
            fp.flush()
        except OSError as e:
            raise _cannot_write(dest, e) from None
    finally:
        with contextlib.suppress(OSError):
            fp.close()


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
    dest = os.path.realpath(os.fspath(path))  # a link to a folder: the folder is replaced
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

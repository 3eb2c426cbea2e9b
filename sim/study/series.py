"""Time series recorded during a run in bounded memory, and ``timeseries.npz`` written by
streaming (docs/explanation/performance.md, "Bounded memory").

A :class:`Series` is a tuple of typed columns (``array.array``: ``'q'`` int64, ``'b'`` int8,
``'d'`` float64), one row per sample, appended to by the recorder.  A :class:`SeriesStore`
with a ``spill_dir`` bounds the memory of all its series together: when a series holds
:attr:`SeriesStore.cap_rows` rows (the budget shared by all series, never below
:data:`MIN_ROWS`) the recorder calls :meth:`SeriesStore.spill`, which appends the rows but the
last one to one anonymous temporary file in ``spill_dir`` (``tempfile.TemporaryFile``: it has
no name in the folder and is gone when closed or when the process ends, success, error or
kill) and empties the columns.  Without a ``spill_dir`` nothing is spilled (everything stays in
memory).

:func:`write_npz` writes an ``.npz`` as :func:`numpy.savez_compressed` does (one ZIP_DEFLATED
member ``NAME.npy`` per array, zip64 forced, the ``.npy`` format version 1.0 header of
:mod:`numpy.lib.format`) but at deflate level :data:`NPZ_COMPRESSLEVEL` (1, where
``savez_compressed`` takes zlib's default, 6), taking a series column as a stream of chunks
(the spilled segments, then the rows still in memory), so no column is ever held whole.
``np.load`` reads it as before and every array is equal, byte for byte, to the one
``savez_compressed`` wrote.

:func:`iter_npy_chunks` reads one array of an ``.npz`` in chunks (the plots decimate long
series with it without loading them) and :func:`step_integral` is the exact integral of a
step series given as chunks (the time-weighted means of summary.json).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import zipfile
from array import array
from collections.abc import Iterable, Iterator
from typing import IO, Any

__all__ = ["MIN_ROWS", "SPILL_BUDGET_BYTES", "Series", "SeriesStore", "iter_npy_chunks",
           "npy_header", "step_integral", "write_npz"]

#: Bytes all the series of one store may hold in memory together before they spill (a
#: 10M-hop run records about 320 MB of samples; this keeps 16 MiB of them).
SPILL_BUDGET_BYTES = 16 * 2**20
#: A series spills no sooner than at this many rows (so a fabric with many queues writes
#: segments of at least a few KB; memory is then bounded by the number of series).
MIN_ROWS = 512
#: numpy dtype of each ``array`` typecode used (machine order: what ``np.array`` makes).
_DTYPES = {"q": "int64", "b": "int8", "d": "float64"}


class Series(tuple):
    """The columns of one series (``array.array`` objects, equal lengths), plus the segments
    already spilled (``segs``: file offset, rows, offset, rows, ... in order, int64) and
    ``rows_spilled``."""

    typecodes: str
    segs: array
    rows_spilled: int

    def __new__(cls, typecodes: str) -> Series:
        s = super().__new__(cls, tuple(array(c) for c in typecodes))
        s.typecodes = typecodes
        s.segs = array("q")
        s.rows_spilled = 0
        return s

    @property
    def rows(self) -> int:
        """Rows recorded so far (spilled and in memory)."""
        return self.rows_spilled + len(self[0])


class SeriesStore:
    """Makes :class:`Series` and spills them to one temporary file in ``spill_dir`` (None:
    never) so that together they hold about ``budget_bytes`` in memory."""

    def __init__(self, spill_dir: str | os.PathLike[str] | None = None,
                 budget_bytes: int | None = None, min_rows: int | None = None) -> None:
        self.spill_dir = None if spill_dir is None else os.fspath(spill_dir)
        self.budget_bytes = SPILL_BUDGET_BYTES if budget_bytes is None else budget_bytes
        self.min_rows = max(int(MIN_ROWS if min_rows is None else min_rows), 2)
        self._row_bytes = 0  # one row of every series together
        self._file: IO[bytes] | None = None
        self.spilled_bytes = 0
        #: A series holding this many rows should be spilled (sys.maxsize: never).
        self.cap_rows = sys.maxsize

    def new(self, typecodes: str) -> Series:
        """A new empty series with columns of these ``array`` typecodes ('q', 'b', 'd')."""
        s = Series(typecodes)
        if self.spill_dir is not None:
            self._row_bytes += sum(a.itemsize for a in s)
            self.cap_rows = max(self.min_rows, self.budget_bytes // self._row_bytes)
        return s

    def spill(self, s: Series) -> None:
        """Append the rows of ``s`` but its last one to the temporary file and drop them from
        memory (the last row stays, so ``s[i][-1]`` always reads the latest value)."""
        n = len(s[0]) - 1
        if n <= 0 or self.spill_dir is None:
            return
        f = self._file
        if f is None:
            f = self._file = tempfile.TemporaryFile(prefix=".series-", dir=self.spill_dir)
        off = f.seek(0, os.SEEK_END)
        for col in s:
            f.write(memoryview(col)[:n])
            del col[:n]
        s.segs.extend((off, n))
        s.rows_spilled += n
        self.spilled_bytes += f.tell() - off

    def chunks(self, s: Series, col: int) -> Iterator[Any]:
        """Column ``col`` of ``s`` in order, as numpy arrays (spilled segments, then memory)."""
        import numpy as np

        dtype = np.dtype(_DTYPES[s.typecodes[col]])
        before = sum(array(c).itemsize for c in s.typecodes[:col])
        segs = s.segs
        for i in range(0, len(segs), 2):
            off, n = segs[i], segs[i + 1]
            f = self._file
            assert f is not None
            f.seek(off + before * n)
            raw = f.read(n * dtype.itemsize)
            if len(raw) != n * dtype.itemsize:
                raise OSError(f"series spill file: short read at {off}")
            yield np.frombuffer(raw, dtype=dtype)
        if len(s[col]):
            yield np.frombuffer(s[col], dtype=dtype)

    def column(self, s: Series, col: int) -> tuple[Any, int, Iterator[Any]]:
        """(dtype, rows, chunks) of a column, what :func:`write_npz` takes."""
        import numpy as np

        return np.dtype(_DTYPES[s.typecodes[col]]), s.rows, self.chunks(s, col)

    def close(self) -> None:
        """Close (and so delete) the temporary file."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> SeriesStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


#: Deflate level of :func:`write_npz`.  The series are int64 times and counters: on the time
#: series of a 50 ms DCQCN incast (55 MB of arrays) level 1 took 0.32 CPU s for 11.7 MB and
#: level 6 (zlib's default, numpy's) 1.45 s for 10.6 MB (bench/results/2026-11-simulator-core.md).
NPZ_COMPRESSLEVEL = 1


def write_npz(path: str | os.PathLike[str], members: Iterable[tuple[str, Any]]) -> None:
    """Write ``path`` as :func:`numpy.savez_compressed` would, from (name, value) pairs in
    order; a value is an array (anything ``np.asanyarray`` takes) or a (dtype, rows, chunks)
    triple: a 1-D array of ``rows`` elements given as an iterable of numpy chunks."""
    import numpy as np
    from numpy.lib import format as npformat

    with zipfile.ZipFile(os.fspath(path), mode="w", compression=zipfile.ZIP_DEFLATED,
                         compresslevel=NPZ_COMPRESSLEVEL, allowZip64=True) as zf:
        for name, value in members:
            with zf.open(name + ".npy", "w", force_zip64=True) as fp:
                if not isinstance(value, tuple):
                    npformat.write_array(fp, np.asanyarray(value), allow_pickle=False)
                    continue
                dtype, rows, chunks = value
                dtype = np.dtype(dtype)
                npformat.write_array_header_1_0(fp, {"descr": npformat.dtype_to_descr(dtype),
                                                     "fortran_order": False,
                                                     "shape": (rows,)})
                written = 0
                for c in chunks:
                    c = np.ascontiguousarray(c, dtype=dtype)
                    fp.write(c.data)
                    written += len(c)
                if written != rows:
                    raise ValueError(f"{name}: {written} rows written, {rows} announced")


def _read_header(fp: IO[bytes]) -> tuple[tuple[int, ...], bool, Any]:
    """(shape, fortran_order, dtype) from the header of an ``.npy`` stream."""
    from numpy.lib import format as npformat

    version = npformat.read_magic(fp)
    read = (npformat.read_array_header_1_0 if version == (1, 0)
            else npformat.read_array_header_2_0)
    return read(fp)


@contextlib.contextmanager
def _archive(npz: str | os.PathLike[str] | zipfile.ZipFile) -> Iterator[zipfile.ZipFile]:
    """``npz`` opened (and closed after), or as it is if it is an open ZipFile already: the
    directory of an archive of hundreds of arrays is read once per opening."""
    if isinstance(npz, zipfile.ZipFile):
        yield npz
    else:
        with zipfile.ZipFile(os.fspath(npz)) as zf:
            yield zf


def npy_header(npz: str | os.PathLike[str] | zipfile.ZipFile, key: str
               ) -> tuple[tuple[int, ...], bool, Any]:
    """(shape, fortran_order, dtype) of array ``key`` of an ``.npz`` (a path or an open
    ZipFile), from its header only."""
    with _archive(npz) as zf, zf.open(key + ".npy") as fp:
        return _read_header(fp)


def iter_npy_chunks(npz: str | os.PathLike[str] | zipfile.ZipFile, key: str,
                    chunk_rows: int = 1 << 18) -> Iterator[Any]:
    """Array ``key`` of an ``.npz`` (a path or an open ZipFile; 1-D, as :func:`write_npz`
    and savez write them) in chunks of at most ``chunk_rows`` elements, decompressed as they
    are read."""
    import numpy as np

    with _archive(npz) as zf, zf.open(key + ".npy") as fp:
        shape, _fortran, dtype = _read_header(fp)
        if len(shape) > 1 or dtype.hasobject:
            raise ValueError(f"{key}: not a 1-D numeric array")
        left = shape[0] if shape else 1
        while left:
            n = min(left, chunk_rows)
            raw = fp.read(n * dtype.itemsize)
            if len(raw) != n * dtype.itemsize:
                raise ValueError(f"{key}: array data cut short")
            yield np.frombuffer(raw, dtype=dtype)
            left -= n


def step_integral(chunks: Iterable[tuple[Any, Any]], t0_ps: int, t1_ps: int) -> int:
    """Exact integral over [t0_ps, t1_ps] (an int: value x ps) of a step function that is 0
    before its first sample and takes ``v[i]`` from ``t[i]`` on, given as (t, v) chunks of
    integer numpy arrays in time order.  Divided by ``t1_ps - t0_ps`` it is the time-weighted
    mean (:func:`sim.study.results.step_mean` computes the same from whole arrays)."""
    import numpy as np

    total = 0
    prev_t, prev_v = t0_ps, 0
    for t, v in chunks:
        if not len(t):
            continue
        t = np.clip(t, t0_ps, t1_ps).astype(np.int64)
        v = np.asarray(v, dtype=np.int64)
        starts = np.concatenate(([prev_t], t[:-1]))
        vals = np.concatenate(([prev_v], v[:-1]))
        dt = t - starts
        # int64 is exact while the largest value x the chunk's span fits; else Python ints
        vmax = int(np.abs(vals).max()) if len(vals) else 0
        if vmax * int(dt.sum()) < 2**62:
            total += int((vals * dt).sum())
        else:
            total += sum(int(a) * int(b) for a, b in zip(vals.tolist(), dt.tolist(),
                                                         strict=True))
        prev_t, prev_v = int(t[-1]), int(v[-1])
    return total + prev_v * (t1_ps - prev_t)

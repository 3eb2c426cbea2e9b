"""nccl-tests' reporting: the S it divides by, algbw, busbw, the size list and the table.

Everything here follows NVIDIA/nccl-tests (files of that repository):

* ``setupArgs`` (``src/common.cu``): ``count = size / wordSize(type)``, then the collective's
  ``*GetCollByteCount`` gives the send count, receive count and the count passed to NCCL
  (``paramcount``): AllReduce, Broadcast, SendRecv ``count``; AllGather ``count/n`` per rank
  (receive ``(count/n)*n``); ReduceScatter ``count/n`` per rank (send ``(count/n)*n``);
  AlltoAll ``count/n`` per peer (send and receive ``(count/n)*n``), ``count/n`` trimmed to
  a multiple of 16 bytes (``& -(16/eltSize)``) (``src/all_reduce.cu``,
  ``all_gather.cu``, ``reduce_scatter.cu``, ``alltoall.cu``, ``broadcast.cu``,
  ``sendrecv.cu``).  The ``size`` column is ``max(sendBytes, recvBytes)``, the ``count``
  column ``paramcount``.
* ``*GetBw``: ``algbw = S / 1e9 / sec`` with S = ``paramcount x typesize`` for AllReduce,
  Broadcast, SendRecv and ``paramcount x typesize x nranks`` for AllGather, ReduceScatter,
  AlltoAll (for AllGather the whole output, for ReduceScatter the whole input); ``busbw =
  algbw x`` 2(n-1)/n (AllReduce), (n-1)/n (AllGather, ReduceScatter, AlltoAll), 1 (Broadcast,
  SendRecv).  GB/s are 10**9 bytes per second.
* The table: ``writeResultHeader``, ``writeBenchmarkLinePreamble``,
  ``writeBenchmarkLineBody`` and ``getFloatStr`` (``src/util.cu``): ``%12li  %12li  %8s  %6s
  %6s`` then, out-of-place and in-place, ``  %7s  %6s  %6s  %6g`` where each number is
  printed with two decimals, then fewer as it grows, then in exponent form.  This is the
  layout of ``src/util.cu`` at commit 0fdb00a3; older releases (e.g. the 2023 output quoted
  in github.com/NVIDIA/nccl-tests issue #128) printed one space fewer before ``#wrong``.
* ``-b/-e/-f/-i``: sizes from ``minBytes`` while ``<= maxBytes``, times ``stepFactor`` or plus
  ``stepBytes`` (``TimeTest``, ``src/common.cu``); ``parsesize`` reads ``1K``/``1M``/``1G`` as
  powers of 1024.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sim.workloads.nccl import DTYPE_BYTES, Collective

__all__ = [
    "CollCounts", "coll_counts", "bus_factor", "algbw_busbw", "s_bytes", "parse_size",
    "size_list", "float_str", "header_lines", "format_row", "REDOPS", "root_of", "NOT_RUN",
]

#: Reduction operation names nccl-tests prints (``test_opnames``, ``src/common.cu``);
#: collectives without a reduction print ``none``.
REDOPS = ("sum", "prod", "max", "min", "avg")


@dataclass(frozen=True, slots=True)
class CollCounts:
    """What nccl-tests derives from one ``-b`` size: bytes sent and received per rank, and the
    element count handed to NCCL (``paramcount``)."""

    send_bytes: int
    recv_bytes: int
    param_count: int

    @property
    def size_bytes(self) -> int:
        """The ``size`` column: ``max(sendBytes, expectedBytes)``."""
        return max(self.send_bytes, self.recv_bytes)


def coll_counts(collective: Collective | str, size_bytes: int, dtype: str, nranks: int
                ) -> CollCounts:
    """``*GetCollByteCount`` of nccl-tests for one size (bytes) and datatype."""
    coll = Collective(collective)
    elt = DTYPE_BYTES[dtype]
    if size_bytes < 0 or nranks < 1:
        raise ValueError("size_bytes must be >= 0 and nranks >= 1")
    count = size_bytes // elt
    # a rank's share is trimmed to a multiple of 16 bytes (nccl-tests since December 2024,
    # commit 29f4114: aligned buffers for any rank count)
    per = (count // nranks) & -max(1, 16 // elt)
    if coll is Collective.ALLGATHER:
        send, recv, param = per, per * nranks, per
    elif coll is Collective.REDUCESCATTER:
        send, recv, param = per * nranks, per, per
    elif coll is Collective.ALLTOALL:
        send, recv, param = per * nranks, per * nranks, per
    else:  # allreduce, broadcast, sendrecv
        send, recv, param = count, count, count
    return CollCounts(send * elt, recv * elt, param)


def bus_factor(collective: Collective | str, nranks: int) -> float:
    """busbw / algbw (``*GetBw``): 2(n-1)/n, (n-1)/n or 1."""
    coll = Collective(collective)
    if coll is Collective.ALLREDUCE:
        return 2 * (nranks - 1) / nranks
    if coll in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLTOALL):
        return (nranks - 1) / nranks
    return 1.0


def s_bytes(collective: Collective | str, param_count: int, dtype: str, nranks: int) -> int:
    """The S of ``algbw = S / t``: ``paramcount x typesize``, times nranks for AllGather,
    ReduceScatter and AlltoAll."""
    coll = Collective(collective)
    s = param_count * DTYPE_BYTES[dtype]
    if coll in (Collective.ALLGATHER, Collective.REDUCESCATTER, Collective.ALLTOALL):
        s *= nranks
    return s


def algbw_busbw(collective: Collective | str, param_count: int, dtype: str, nranks: int,
                time_s: float) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (10**9 B/s) for one iteration time ``time_s`` in seconds."""
    if time_s <= 0:
        raise ValueError(f"time_s must be > 0, got {time_s}")
    alg = s_bytes(collective, param_count, dtype, nranks) / 1.0e9 / time_s
    return alg, alg * bus_factor(collective, nranks)


_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z]?)\s*$")
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def parse_size(text: str) -> int:
    """A ``-b``/``-e``/``-i`` size as nccl-tests' ``parsesize`` reads it: a number with an
    optional K, M or G (powers of 1024, either case), truncated to whole bytes.
    ValueError for anything else."""
    m = _SIZE.match(text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"{text!r}: expected a size such as 8, 64K, 1M or 1G")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def size_list(min_bytes: int, max_bytes: int, step_factor: int = 1,
              step_bytes: int = 1024 * 1024) -> list[int]:
    """The sizes nccl-tests runs for ``-b min -e max`` and ``-f factor`` (used when > 1) or
    ``-i step_bytes``: from ``min`` while ``<= max``.  nccl-tests' defaults are ``-b 32M -e 32M
    -i 1M``."""
    if min_bytes < 0 or max_bytes < min_bytes:
        raise ValueError(f"sizes: need 0 <= min ({min_bytes}) <= max ({max_bytes})")
    if step_factor < 1 or (step_factor == 1 and step_bytes < 1):
        raise ValueError("step: -f must be >= 2, or -i >= 1 byte")
    if step_factor > 1 and min_bytes == 0:
        raise ValueError("-b 0 with -f never grows")
    out, size = [], min_bytes
    while size <= max_bytes:
        out.append(size)
        size = size * step_factor if step_factor > 1 else size + step_bytes
    return out


def float_str(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: two decimals while the integer part leaves room, then one,
    then none, then exponent form (``%.1e`` at width 7, ``%.0e`` below)."""
    power, v = 0, 1
    while value >= v:
        power += 1
        v *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    return f"{value:{width}.1e}" if width >= 7 else f"{value:{width}.0e}"


def header_lines(time_label: str = "time") -> list[str]:
    """The three header lines nccl-tests prints above its table (``writeResultHeader``,
    without the per-iteration and timestamp columns), after a ``#`` line."""
    e = ""
    return [
        "#",
        f"# {e:>10}  {e:>12}  {e:>8}  {e:>6}  {e:>6}           out-of-place"
        "                       in-place          ",
        f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}  "
        f"{time_label:>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}  "
        f"{time_label:>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6} ",
        f"# {'(B)':>10}  {'(elements)':>12}  {e:>8}  {e:>6}  {e:>6}  "
        f"{'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {e:>6}  "
        f"{'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {e:>6} ",
    ]


#: A half of a result line that was not run, printed N/A in each column.
NOT_RUN = "N/A"


def _body(result: tuple[float, float, float, int | None] | str | None) -> str:
    if result is None:  # writeBenchMarkLineNullBody
        return " " * 32
    if result == NOT_RUN:
        return f"  {'N/A':>7}  {'N/A':>6}  {'N/A':>6}  {'N/A':>6}"
    time_us, alg, bus, wrong = result
    nums = f"  {float_str(time_us, 7)}  {float_str(alg, 6)}  {float_str(bus, 6)}"
    return nums + ("    N/A" if wrong is None else f"  {wrong:6g}")


def format_row(size_bytes: int, count: int, dtype: str, redop: str, root: int,
               out_of_place: tuple[float, float, float, int | None] | None,
               in_place: tuple[float, float, float, int | None] | str | None = None) -> str:
    """One result line as nccl-tests prints it: size, count, type, redop, root, then
    (time in us, algbw, busbw, #wrong) out-of-place and in-place; #wrong None prints N/A, a
    missing half prints blanks, :data:`NOT_RUN` N/A in each column."""
    return (f"{size_bytes:12d}  {count:12d}  {dtype:>8}  {redop:>6}  {root:6d}"
            f"{_body(out_of_place)}{_body(in_place)}")


def root_of(collective: Collective | str, root: int = 0) -> int:
    """The root column: -1 for collectives without one, else ``-r`` (default 0)."""
    return root if Collective(collective) is Collective.BROADCAST else -1

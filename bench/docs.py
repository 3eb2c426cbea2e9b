"""The commands shown in the README and docs, run and compared with what the pages say.

``python -m bench.docs check [PAGE ...] [--slow] [-k TEXT]`` runs every ```` ```console ````
block of ``README.md`` and ``docs/**/*.md`` (or of the pages named) and prints each command
whose output differs from the page; ``update`` writes the new outputs into the pages instead
(then read the diff: a figure the prose quotes must be updated by hand); ``list`` prints the
blocks with where they are and how they are marked.  ``tests/test_docs_commands.py`` runs
``check`` on every block not marked slow.

A block is a fence ```` ```console ```` holding ``$ COMMAND`` lines (a line ending in ``\\``
continues on the next), each followed by the output it prints (standard output and error,
merged).  In the expected output a line ``...`` stands for any number of lines (none
included) and ``...`` inside a line for any text; trailing spaces do not count.  The blocks of
one page run in order, in one fresh folder holding links to the repository's ``pcaps/`` and
``docs/`` (so a page can create a file in one block and read it in the next); ``$ cat FILE``
of a file that does not exist creates it with the text shown (a page shows the input it uses).

An HTML comment on the line before the fence marks the block:
``<!-- docs-test: slow -->`` (too long for the test suite: ``check --slow`` runs it) or
``<!-- docs-test: skip REASON -->`` (never run: e.g. it needs a Dask cluster).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Block", "Command", "blocks", "check_page", "matches", "pages", "run_block"]

REPO = Path(__file__).resolve().parent.parent
_MARK = re.compile(r"^<!--\s*docs-test:\s*(slow|skip)\b\s*(.*?)\s*-->\s*$")
#: Folders of the repository a page's commands may read (linked into the work folder).
LINKED = ("pcaps", "docs")


@dataclass
class Command:
    """One ``$ COMMAND`` of a block and the output the page shows for it."""

    line: int  # 1-based line of the ``$``
    text: str  # the command, continuation lines joined with newlines
    expected: list[str] = field(default_factory=list)
    first_out: int = 0  # 1-based line of the first expected line
    end_out: int = 0  # the line after the last expected line


@dataclass
class Block:
    """A ```` ```console ```` block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    mark: str  # "" | "slow" | "skip"
    why: str
    commands: list[Command]

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """README.md and every page under docs/, in a stable order."""
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def blocks(page: Path) -> list[Block]:
    """The console blocks of ``page``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        m = _MARK.match(lines[i - 1].strip()) if i else None
        block = Block(page, i + 1, m.group(1) if m else "", m.group(2) if m else "", [])
        i += 1
        cur: Command | None = None
        while i < len(lines) and not lines[i].startswith("```"):
            text = lines[i]
            if text.startswith("$ "):
                cmd_lines = [text[2:]]
                start = i
                while _continues(cmd_lines) and i + 1 < len(lines):
                    i += 1
                    cmd_lines.append(lines[i])
                cur = Command(start + 1, "\n".join(cmd_lines), [], i + 2, i + 2)
                block.commands.append(cur)
            elif cur is not None:
                cur.expected.append(text)
                cur.end_out = i + 2
            i += 1
        out.append(block)
        i += 1
    return out


def _continues(cmd_lines: list[str]) -> bool:
    """The command goes on on the next line: a trailing backslash or an open quote."""
    text = "\n".join(cmd_lines)
    return text.endswith("\\") or _open_quote(text)


def _open_quote(text: str) -> bool:
    quote = ""
    i = 0
    while i < len(text):
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
            elif c == "\\" and quote == '"':
                i += 1
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 1
        elif c == "#" and (i == 0 or text[i - 1] in " \t"):
            break  # a comment: quotes after it do not count
        i += 1
    return bool(quote)


def _line_rx(expected: str) -> re.Pattern[str]:
    parts = expected.rstrip().split("...")
    return re.compile(".*".join(re.escape(p) for p in parts) + r"\Z", re.S)


def matches(expected: Sequence[str], actual: Sequence[str]) -> bool:
    """``actual`` lines fit ``expected`` (``...`` lines and ``...`` inside lines as wildcards)."""
    exp = [e.rstrip() for e in expected]
    act = [a.rstrip() for a in actual]
    # trailing empty lines do not count on either side
    while exp and not exp[-1]:
        exp.pop()
    while act and not act[-1]:
        act.pop()
    memo: dict[tuple[int, int], bool] = {}

    def go(i: int, j: int) -> bool:
        key = (i, j)
        if key in memo:
            return memo[key]
        if i == len(exp):
            r = j == len(act)
        elif exp[i] == "...":
            r = any(go(i + 1, k) for k in range(j, len(act) + 1))
        else:
            r = j < len(act) and bool(_line_rx(exp[i]).match(act[j])) and go(i + 1, j + 1)
        memo[key] = r
        return r

    return go(0, 0)


#: Programs a block may call that are not ours: a block calling one that is not installed is
#: not run (CI installs them; ``LOSSLESS_REQUIRE_TSHARK=1`` runs tshark's blocks regardless,
#: so a missing tshark fails as the tshark tests do).
TOOLS = ("tshark", "jq")


def missing_tools(block: Block) -> list[str]:
    """The programs of :data:`TOOLS` ``block`` calls that are not on the PATH."""
    import shutil

    text = "\n".join(c.text for c in block.commands)
    required = os.environ.get("LOSSLESS_REQUIRE_TSHARK", "") not in ("", "0")
    return [t for t in TOOLS if re.search(rf"(?<![\w.-]){t}\b", text)
            and shutil.which(t) is None and not (t == "tshark" and required)]


def _workdir(tmp: str) -> str:
    for name in LINKED:
        os.symlink(REPO / name, os.path.join(tmp, name))
    return tmp


def run_command(cmd: Command, cwd: str, timeout_s: float) -> tuple[list[str], float]:
    """(output lines, seconds) of ``cmd`` run by bash in ``cwd``."""
    first = cmd.text.split("\n", 1)[0]
    m = re.fullmatch(r"cat (\S+)", first.strip())
    if m and "\n" not in cmd.text and not os.path.exists(os.path.join(cwd, m.group(1))):
        with open(os.path.join(cwd, m.group(1)), "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in cmd.expected))
    env = dict(os.environ, COLUMNS="100", LC_ALL="C.UTF-8")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(["bash", "-c", cmd.text], cwd=cwd, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=timeout_s)
        text = p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        text = (e.stdout or b"").decode("utf-8", "replace") + f"\n[timed out after {timeout_s} s]"
    return text.splitlines(), time.perf_counter() - t0


def run_block(block: Block, cwd: str, timeout_s: float = 600.0
              ) -> Iterator[tuple[Command, list[str], float]]:
    for cmd in block.commands:
        out, secs = run_command(cmd, cwd, timeout_s)
        yield cmd, out, secs


def check_page(page: Path, *, slow: bool = False, only: str = "", timeout_s: float = 600.0,
               update: bool = False, say: Iterable | None = None) -> list[str]:
    """Run the blocks of ``page``; the differences as lines (empty: the page is right).
    ``update`` writes the actual outputs into the page instead."""
    problems: list[str] = []
    edits: list[tuple[Command, list[str]]] = []
    todo = [b for b in blocks(page) if b.mark != "skip" and (slow or b.mark != "slow")
            and (not only or any(only in c.text for c in b.commands))
            and not missing_tools(b)]
    if not todo:
        return problems
    with tempfile.TemporaryDirectory(prefix="lossless-docs-") as tmp:
        cwd = _workdir(tmp)
        for block in todo:
            for cmd, out, secs in run_block(block, cwd, timeout_s):
                ok = matches(cmd.expected, out)
                where = f"{page.relative_to(REPO)}:{cmd.line}"
                if say is not None:
                    print(f"{'ok  ' if ok else 'DIFF'} {secs:7.1f} s  {where}  "
                          f"{cmd.text.splitlines()[0][:80]}", file=sys.stderr, flush=True)
                if not ok:
                    problems.append(_diff(where, cmd, out))
                    edits.append((cmd, out))
    if update and edits:
        lines = page.read_text(encoding="utf-8").split("\n")
        for cmd, out in sorted(edits, key=lambda e: -e[0].line):
            lines[cmd.first_out - 1:cmd.end_out - 1] = merged(cmd.expected, out)
        page.write_text("\n".join(lines), encoding="utf-8")
    return problems


def merged(expected: Sequence[str], actual: Sequence[str]) -> list[str]:
    """What ``update`` writes: the actual lines, except that a line of the page that still
    matches its actual line (a wall time written as ``...``) is kept as it was.  With a whole
    ``...`` line on the page the lines cannot be paired: the actual output, whole."""
    if "..." in (e.strip() for e in expected) or len(expected) != len(actual):
        return list(actual)
    return [e if _line_rx(e).match(a.rstrip()) else a for e, a in zip(expected, actual,
                                                                        strict=True)]


def _diff(where: str, cmd: Command, out: list[str]) -> str:
    import difflib

    body = "\n".join(difflib.unified_diff([e.rstrip() for e in cmd.expected],
                                          [a.rstrip() for a in out], "the page", "the command",
                                          lineterm="", n=1))
    return f"{where}: $ {cmd.text}\n{body}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.docs", description=__doc__.split("\n\n")[0])
    ap.add_argument("action", choices=("check", "update", "list"))
    ap.add_argument("page", nargs="*", help="pages to run (default: README.md and docs/)")
    ap.add_argument("--slow", action="store_true", help="run the blocks marked slow too")
    ap.add_argument("-k", default="", help="only blocks with a command containing this text")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per command")
    a = ap.parse_intermixed_args(argv)  # options before or after the pages
    todo = [Path(p).resolve() for p in a.page] or pages()
    if a.action == "list":
        for page in todo:
            for b in blocks(page):
                print(f"{b.where}  {b.mark or '-':4} {len(b.commands)} command(s)  {b.why}")
        return 0
    bad = 0
    for page in todo:
        probs = check_page(page, slow=a.slow, only=a.k, timeout_s=a.timeout,
                           update=a.action == "update", say=True)
        for p in probs:
            print(p, end="\n\n")
        bad += len(probs)
    print(f"{bad} command(s) differ{' (pages updated)' if a.action == 'update' and bad else ''}",
          file=sys.stderr)
    return 1 if bad and a.action == "check" else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

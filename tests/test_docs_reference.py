"""Every command has its reference page (docs/reference/COMMAND.md) and the page names every
option the command takes, in backticks, so a new option cannot go undocumented; every page
of docs/reference/ is listed in the index (docs/README.md); and no page or code comment
points at an issue number a user cannot look up."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from sim.cli import build_parser

REPO = Path(__file__).resolve().parent.parent
REF = REPO / "docs" / "reference"


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    out: dict[str, argparse.ArgumentParser] = {}
    for name, p in sub.choices.items():
        if p not in out.values():  # an alias names the same parser
            out[name] = p
    return out


COMMANDS = _commands()


def _options(p: argparse.ArgumentParser) -> list[str]:
    """The longest spelling of every option but --help."""
    out = []
    for a in p._actions:
        if not a.option_strings or isinstance(a, argparse._HelpAction):
            continue
        out.append(max(a.option_strings, key=len))
    return out


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_has_a_reference_page_naming_every_option(command):
    page = REF / f"{command}.md"
    assert page.exists(), f"no reference page {page.relative_to(REPO)}"
    text = page.read_text(encoding="utf-8")
    missing = [o for o in _options(COMMANDS[command])
               if not re.search(rf"`{re.escape(o)}(?![\w-])[^`]*`", text)]
    assert not missing, f"{page.relative_to(REPO)} does not name {missing}"


def test_every_reference_page_is_in_the_index():
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in REF.glob("*.md"))
    assert pages
    unlisted = [p for p in pages if f"reference/{p}" not in index]
    assert not unlisted, f"docs/README.md does not link {unlisted}"


_ISSUE = re.compile(r"\b[Ii]ssues? \d+\b|\(#\d+\)")


def test_no_issue_numbers_in_the_docs_or_the_code():
    """Our issue numbers mean nothing to a user (the tracker is not public): pages and code
    comments say what and why instead."""
    paths = [REPO / "README.md", *(REPO / "docs").rglob("*.md"),
             *(p for d in ("sim", "wire", "bench", "tests") for p in (REPO / d).rglob("*.py")),
             *(REPO / "sim").rglob("*.pxd"), *(REPO / "docs" / "examples").glob("*.py"),
             *(REPO / "docs" / "examples").glob("*.toml"), REPO / "setup.py",
             REPO / "pyproject.toml"]
    hits = [f"{p.relative_to(REPO)}:{n}: {line.strip()[:100]}"
            for p in paths for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(),
                                                     1)
            if _ISSUE.search(line)]
    assert not hits, "\n".join(hits[:40]) + (f"\n... {len(hits)} in all" if len(hits) > 40
                                             else "")

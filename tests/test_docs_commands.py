"""The commands the README and the docs show print what the pages say (``bench.docs``: every
```` ```console ```` block not marked slow or skip, page by page, in a fresh folder).  A page
that shows an output the command no longer prints fails here; ``python -m bench.docs update
PAGE`` writes the new output into the page (then the prose around it is read again)."""

from __future__ import annotations

import shutil

import pytest

from bench import docs

PAGES = [p for p in docs.pages()
         if any(b.mark not in ("slow", "skip") for b in docs.blocks(p))]


@pytest.mark.skipif(shutil.which("lossless") is None, reason="the lossless command is not "
                    "installed (pip install -e .)")
@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(docs.REPO)) for p in PAGES])
def test_the_pages_commands_print_what_the_page_shows(page):
    problems = docs.check_page(page, timeout_s=300)
    assert not problems, "\n\n".join(problems)


def test_the_matcher_takes_wildcards_and_nothing_else():
    assert docs.matches(["a ... c"], ["a bb c"])
    assert docs.matches(["x", "...", "z"], ["x", "z"])
    assert docs.matches(["x", "...", "z"], ["x", "1", "2", "z"])
    assert not docs.matches(["x", "z"], ["x", "y", "z"])
    assert not docs.matches(["pauses 1029"], ["pauses 4113"])
    assert docs.matches(["a  "], ["a"])  # trailing spaces do not count
    assert not docs.matches(["a.c"], ["abc"])  # only ... is a wildcard


def test_a_console_block_is_parsed_into_commands_and_outputs(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("text\n<!-- docs-test: slow -->\n```console\n$ echo 'a\nb'\na\nb\n"
                    "$ printf x \\\n    y\nx\n```\n", encoding="utf-8")
    (b,) = docs.blocks(page)
    assert b.mark == "slow" and [c.text for c in b.commands] == ["echo 'a\nb'",
                                                                   "printf x \\\n    y"]
    assert [c.expected for c in b.commands] == [["a", "b"], ["x"]]

"""The README and docs/*.md reference only files of this repository or public sources: no
``shared/`` notes, no section numbers of notes that are not published ("spec 2.4"),
every relative link and every backticked repository path exists, and every ``*.md`` named is
one of ours.  The ``.py`` files under sim/, wire/, bench/ and tests/ cite no such note either."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
#: The repository's top-level folders: a backticked path starting with one of them is a claim
#: that the file is in the repository.
TOP = sorted(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
             and p.name not in ("out", "build", "dist"))
OUR_MD = {p.name for p in REPO.rglob("*.md") if ".git" not in p.parts}

_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_CODE = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(rf"^(?:\./)?(?:{'|'.join(map(re.escape, TOP))})/[\w./\-]*$")
_MD_NAME = re.compile(r"(?<![\w/.\-])([\w\-]+\.md)\b")
_BAD = [
    (re.compile(r"(?<![\w/.\-])shared/"), "a shared/ note (not in this repository)"),
    (re.compile(r"/work/"), "an absolute path of a development machine"),
    (re.compile(r"\bspec(?: note)?(?: section)? \d+\.\d+"), "a section of an unpublished note"),
    (re.compile(r"\b(?:research|spec|reference) note\b"), "an unpublished note"),
]


def _lines(page: Path):
    for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        yield f"{page.relative_to(REPO)}:{n}", line


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but - and _ dropped,
    spaces made hyphens (backticks and links' targets do not count)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """The anchors of ``page``'s headings (a repeated one gets -1, -2... as on GitHub)."""
    seen: dict[str, int] = {}
    out = set()
    fence = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fence = not fence
        out.update(re.findall(r'<a id="([^"]+)"></a>', line))  # explicit anchors
        if fence or not line.startswith("#"):
            continue
        slug = _slug(line.lstrip("#").strip())
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _problems(page: Path) -> list[str]:
    out = []
    for where, line in _lines(page):
        for rx, why in _BAD:
            if rx.search(line):
                out.append(f"{where}: {why}: {line.strip()[:120]}")
        for m in _LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # a URL
            file, _, anchor = target.partition("#")
            dest = page if not file else page.parent / file
            if not dest.exists():
                out.append(f"{where}: link to a missing file: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                out.append(f"{where}: {target}: no heading of {dest.name} has that anchor")
        for m in _CODE.finditer(line):
            for tok in m.group(1).split():
                tok = tok.strip("(),;:'\"")
                if _PATH.match(tok):
                    path = tok.split("#")[0].rstrip(".")
                    if "<" not in path and "*" not in path and not (REPO / path).exists():
                        out.append(f"{where}: no such file in the repository: {tok}")
        for m in _MD_NAME.finditer(line):
            if m.group(1) not in OUR_MD:
                out.append(f"{where}: {m.group(1)} is not a page of this repository")
    return out


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_page_references_exist(page: Path) -> None:
    problems = _problems(page)
    assert not problems, "\n".join(problems)


def test_the_checks_catch_what_they_should(tmp_path: Path) -> None:
    bad = tmp_path / "bad.md"
    bad.write_text("see `shared/specs/x.md`\n[a](nowhere.md)\n`wire/nosuch.py`\nspec 2.4\n"
                   "esun_sue.md 1.1\n/work/main\n", encoding="utf-8")
    global REPO
    saved = REPO
    try:
        REPO = tmp_path.parent  # relative_to() needs a parent of the page
        problems = _problems(bad)
    finally:
        REPO = saved
    assert len(problems) == 7, problems  # shared/ twice (the pattern, the .md name) + 5
    # anchors: a heading's GitHub anchor, an explicit <a id>, and one that is not there
    (tmp_path / "t.md").write_text('# The `x` model (IBA 7.9)\n<a id="y"></a>\n',
                                   encoding="utf-8")
    (tmp_path / "a.md").write_text("[1](t.md#the-x-model-iba-79) [2](t.md#y) [3](t.md#z)\n",
                                   encoding="utf-8")
    try:
        REPO = tmp_path.parent
        problems = _problems(tmp_path / "a.md")
    finally:
        REPO = saved
    assert [p.split(": ", 1)[1] for p in problems if "anchor" in p] == [
        "t.md#z: no heading of t.md has that anchor"]


#: The code's docstrings and comments cite primary public sources too: never the
#: unpublished notes outside the repository, by path, file name or section ("spec 1.4").
CODE_DIRS = ("sim", "wire", "bench", "tests")
_CODE_BAD = [
    (re.compile(r"(?<![\w.\-])shared/|\.\./shared\b"), "a shared/ note (cite its primary source)"),
    (re.compile(r"/work/"), "an absolute path of a development machine"),
    (re.compile(r"\b(?:esun_sue|dcqcn_pfc|roce_pfc_wire|collectives_ib_faults)\.md\b"),
     "an unpublished note by name"),
    (re.compile(r"\bspec(?: note)?(?: section)? \d+\.\d+"), "a section of an unpublished note"),
    (re.compile(r"\b(?:research|spec|reference) note\b|\bspec file\b"), "an unpublished note"),
]


def _code_problems(where: str, text: str) -> list[str]:
    return [f"{where}:{n}: {why}: {line.strip()[:100]}"
            for n, line in enumerate(text.splitlines(), 1)
            for rx, why in _CODE_BAD if rx.search(line)]


def test_code_cites_no_unpublished_note() -> None:
    me = Path(__file__).resolve()
    problems = [pr for d in CODE_DIRS for f in sorted((REPO / d).rglob("*.py")) if f.resolve() != me
                for pr in _code_problems(str(f.relative_to(REPO)),
                                         f.read_text(encoding="utf-8"))]
    assert not problems, "\n".join(problems)


def test_the_code_checks_catch_what_they_should() -> None:
    bad = ("# shared/specs/esun_sue.md 2.1\n# see ../shared\n# /work/shared/specs/x.md\n"
           "#: (spec 1.4)\n# [M in the spec note]\n# dcqcn_pfc.md\n# spec section 2.3\n"
           "# from the spec file\n")
    good = ("# DCQCN, SIGCOMM 2015, Sec. 3; IEEE 802.3 Annex 31B; docs/explanation/pfc.md; "
            "wire/shared_x.py\n")
    assert [len(_code_problems("x.py", line)) > 0 for line in bad.splitlines()] == [True] * 8
    assert _code_problems("x.py", good) == []


#: Where the code names documentation pages for its readers: docstrings, comments, --help and
#: error texts.  A page named must be a current one (linked from the index, docs/README.md),
#: and a section quoted after it ("docs/reference/cli.md, 'Exit status'") one of its headings.
CITING = sorted({*(p for d in CODE_DIRS for p in (REPO / d).rglob("*.py")),
                 *(REPO / "sim").rglob("*.pxd"), *(REPO / "docs" / "examples").glob("*.py"),
                 *(REPO / "docs" / "examples").glob("*.toml"), REPO / "setup.py",
                 REPO / "pyproject.toml"})
_PAGE_REF = re.compile(r"docs/((?:[\w-]+/)*[\w-]+\.md)")
#: A section quoted right after a page: ``docs/x.md "S"``, ``docs/x.md, 'S'``, ``(docs/x.md,
#: section "S")``, ``docs/x.md ("S")``.
_SECTION = re.compile(r"""["'`]*[,;]?\s*(?:section\s+)?\(?"""
                      r"""(?:"([A-Za-z`][^"/]{0,79}?)"|'([A-Za-z`][^'/]{0,79}?)')""")


def _joined(text: str) -> str:
    """``text`` with its wrapped lines joined: a comment's or docstring's next line, and a
    string literal continued on the next line ("... docs/x.md " "'Section' ...")."""
    text = re.sub(r"""(["'])\s*\n\s*f?\1""", "", text)
    return re.sub(r"\n\s*(?:#:?\s*)?", " ", text)


def _index_pages() -> set[str]:
    index = (REPO / "docs" / "README.md").read_text(encoding="utf-8")
    return {"README.md", *(m.group(1) for m in re.finditer(r"\]\(([\w/-]+\.md)\)", index))}


def _headings(page: Path) -> list[str]:
    out, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            out.append(m.group(1).replace("`", "").strip())
    return out


def _page_ref_problems(where: str, text: str, current: set[str]) -> list[str]:
    out = []
    text = _joined(text)
    for m in _PAGE_REF.finditer(text):
        page = m.group(1)
        if Path(page).stem.isupper():
            continue  # a placeholder: docs/reference/COMMAND.md
        if page not in current:
            out.append(f"{where}: docs/{page} is not a page of the index (docs/README.md)")
            continue
        s = _SECTION.match(text, m.end())
        path = REPO / "docs" / page
        if s and path.exists():  # a page of the index that is missing: test_page_references
            want = (s.group(1) or s.group(2)).replace("`", "").strip()
            if not any(h == want or h.startswith(want) for h in _headings(path)):
                out.append(f"{where}: docs/{page} has no section {want!r}")
    return out


def test_code_names_current_pages_and_their_sections() -> None:
    current = _index_pages()
    me = Path(__file__).resolve()
    problems = [pr for f in CITING if f.resolve() != me
                for pr in _page_ref_problems(str(f.relative_to(REPO)),
                                             f.read_text(encoding="utf-8"), current)]
    assert not problems, "\n".join(problems)


def test_the_page_checks_catch_what_they_should() -> None:
    current = _index_pages()
    bad = ['# the engine (docs/sim.md)\n',
           '#: docs/explanation/pfc.md "No such section"\n',
           '"""Routing (docs/explanation/design.md,\n    section "Nowhere")."""\n',
           'help="see (docs/reference/cli.md "\n     "\'Exit codes\')"\n']
    good = ['# PFC (docs/explanation/pfc.md "TTL"; docs/reference/cli.md, \'Exit status\')\n',
            '"""docs/explanation/design.md, section\n    "The simulator\'s packages"; '
            'docs/reference/COMMAND.md"""\n',
            'help="(docs/reference/cli.md "\n     "\'Numbers\')"\n']
    assert [len(_page_ref_problems("x.py", t, current)) for t in bad] == [1] * len(bad)
    assert [_page_ref_problems("x.py", t, current) for t in good] == [[]] * len(good)

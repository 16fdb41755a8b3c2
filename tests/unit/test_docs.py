"""The docs hold together: every relative link and anchor of README.md and docs/*.md leads somewhere, every page is
reachable from the README, and the README stays a short way in."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 250
MAX_LINE = 120

FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"(`+).*?\1")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = re.sub(r"<[^>]+>", "", text).lower()
    text = "".join(c for c in text if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading's anchor on a page; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(page.read_text()):
        match = HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(2).replace("`", ""))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    """The targets of a page's links; one in code (a block or inline) is an example, not a link."""
    lines = [INLINE_CODE.sub("", line) for line in prose_lines(page.read_text())]
    return [match.group(1) for line in lines for match in LINK.finditer(line)]


def broken_links(page: Path) -> list[str]:
    """The relative links of a page that name no file, or a heading its target does not have."""
    broken = []
    for target in links(page):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no such file")
        elif anchor and (file.suffix != ".md" or anchor not in anchors(file)):
            broken.append(f"{target}: no such heading")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_names_an_existing_file_and_heading(page):
    assert broken_links(page) == []


def test_a_broken_link_or_anchor_is_reported(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## Spark: jobs, `local[2]` and EMR_Serverless\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Two words\n\n"
        "[ok](other.md) [ok](other.md#spark-jobs-local2-and-emr_serverless) [ok](#two-words) [ok](https://x.org/#y)\n"
        "[gone](missing.md) [gone](other.md#nowhere) [gone](#three-words) `[code](not-a-link.md)`\n"
        "```\n[in a code block](not-a-link-either.md)\n```\n"
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: no such heading",
        "#three-words: no such heading",
    ]


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in links(ROOT / "README.md")}
    assert [page.name for page in PAGES[1:] if page.resolve() not in linked] == []


def test_the_readme_is_at_most_250_lines():
    assert len((ROOT / "README.md").read_text().splitlines()) <= README_MAX_LINES


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_line_fits_120_characters(page):
    long = [n for n, line in enumerate(page.read_text().splitlines(), 1) if len(line) > MAX_LINE]
    assert long == []

"""A student's page speaks of the lesson, not of how the book is made: no build talk in the prose.

What the build checks (hidden cells, tests, the glossary file, the site's scripts, where a figure
was measured) belongs in the tests and the README. This reads the built site (_build/html, both
editions) and fails on such talk in a page's prose: outside code, outside the printed outputs, and
outside the instructor guide, whose reader is the one who builds the book.

Cheap: parses HTML that is already built; skipped when the site has not been built.
"""

from __future__ import annotations

import re

import pytest
from book_pages import ROOT

bs4 = pytest.importorskip("bs4")

SITE = ROOT / "_build" / "html"
EDITIONS = {"en": SITE / "book", "zh": SITE / "book" / "zh"}
PAGES = [
    "index",
    "ch11_cross_attention",
    "ch12_what_you_trained",
    "ch13_generation",
    "historical_notes",
    "widgets_gallery",
    "glossary",
]

pytestmark = pytest.mark.skipif(
    not (SITE / "book" / "index.html").is_file(), reason="the book is not built (make book)"
)

# The repository's own folders (a student's page names the exercises' folders, never these).
PATHS = r"\b(book|tests|scripts|encdec|autograder|solutions|mk|bench|deploy|binder)/[\w./<>-]*"
# Build talk, in either language: the book's checks, its making, its files, its earlier versions.
BUILD_TALK = {
    "en": re.compile(
        r"\btest(s|ed|ing)?\b|\bassert(s|ed|ion)?\b|\bbuild\b|build time|at (each|every) build|\bthe build\b"
        r"|book built|builds this book|make book|earlier versions? of|hidden cell|the cell checks|this machine"
        r"|window\.encdec|_config\.yml|_build\b|\.yml\b|" + PATHS,
        re.I,
    ),
    "zh": re.compile(
        r"测试|断言|单元格?会检查|构建时|构建到|构建本书|本书的构建|自己构建的书|早先的版本|以前的版本|隐藏的单元|隐藏单元"
        r"|本机|这台机器|window\.encdec|_config\.yml|_build\b|\.yml\b|" + PATHS
    ),
}


BLOCKS = ["p", "li", "td", "th", "h1", "h2", "h3", "h4", "summary", "figcaption", "dt", "dd"]


def prose(edition: str, name: str) -> list[str]:
    """The page's paragraphs, list items, table cells and headings (inline code and link texts
    included), each once (a paragraph inside a list item is read with its item), without code
    cells, code blocks or outputs."""
    html = (EDITIONS[edition] / f"{name}.html").read_text(encoding="utf-8")
    doc = bs4.BeautifulSoup(html, "html.parser")
    main = doc.select_one("article") or doc
    for node in main.select("div.cell, pre, div.highlight, .language-switch, script, style"):
        node.decompose()
    found = []
    for node in main.find_all(BLOCKS):
        if node.find_parent(BLOCKS):
            continue
        text = " ".join(node.get_text(" ").split())
        if text:
            found.append(text)
    return found


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("name", PAGES)
def test_a_students_page_has_no_build_talk(edition, name):
    talk = [(m.group(0), text[:160]) for text in prose(edition, name) for m in [BUILD_TALK[edition].search(text)] if m]
    assert not talk, f"{edition}/{name}: build talk in the prose (say it in the tests or the README): {talk}"


@pytest.mark.parametrize("edition", EDITIONS)
@pytest.mark.parametrize("name", PAGES + ["instructor_guide"])
def test_every_table_of_the_prose_names_its_columns(edition, name):
    """A table in the text has a header row, and every header cell says what its column holds (a
    Markdown table written without one renders an empty first row)."""
    html = (EDITIONS[edition] / f"{name}.html").read_text(encoding="utf-8")
    main = bs4.BeautifulSoup(html, "html.parser").select_one("article")
    for table in main.select("table"):
        if table.find_parent(class_="cell_output"):
            continue  # a cell's output: what the code prints
        header = [th.get_text(" ", strip=True) for th in table.select("thead th")]
        assert header and all(header), (
            f"{edition}/{name}: a table without column names: {table.get_text(' ', strip=True)[:100]}"
        )

"""Issue 50, invariant 2, on the site: `make book ASSESSED=1` publishes no graded answer.

Searches the built site (_build/html) as a reader can download it: every page, its sources
(``_sources/``), the executed notebooks, the search index, the exercise downloads, the PDFs
(their text) and, where the site carries one, the student release (``student/``, which the
Pages workflow adds). ``term.txt`` (scripts/book_assessed.py) says which term the site was built
for: an assessed site holds no answer (of an assignment still open); a self-study site's pages show
every answer its chapters list, so the search is held to real pages too. `make test` builds the self-study site; `make test-assessed`
builds the assessed one and runs this module (the scheduled workflow runs it).
"""

from __future__ import annotations

import re
from pathlib import Path

import answers_given
import pytest

from autograder import assessed

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_build" / "html"

pytestmark = pytest.mark.skipif(not (SITE / "term.txt").is_file(), reason="the book is not built (make book)")


def listed() -> set[str]:
    """The answers the chapters list with ``literalinclude`` (a class listed shows its methods)."""
    shown = set()
    for page in (ROOT / "book").rglob("*.md"):
        text = page.read_text(encoding="utf-8")
        for module, obj in re.findall(r"```\{literalinclude\} [./]*encdec/(\w+)\.py\n:pyobject: ([\w.]+)", text):
            shown |= {
                a
                for a in assessed.answers()
                if a == f"encdec.{module}.{obj}" or a.startswith(f"encdec.{module}.{obj}.")
            }
    return shown


def test_an_assessed_site_holds_no_answer_and_a_self_study_one_shows_those_listed():
    term, *setting = (SITE / "term.txt").read_text().split()
    assert term in ("assessed", "self-study")
    if term == "assessed":  # at the term's start (ASSESSED=1) none at all; later, none of an open assignment
        found = answers_given.scan(SITE)
        assert answers_given.unread(SITE) == []
        open_ = assessed.still_open(setting[0] if setting else "1")
        held = {a for names in found.values() for a in names}
        assert not {a for a in held if open_ & set(assessed.answers()[a])}, found
    else:  # the pages alone, cheap enough for `make test`
        pages = {
            a
            for page in (SITE / "book").rglob("*.html")
            for a in answers_given.held(answers_given._readable(page.name, page.read_bytes()))
        }
        assert listed() and listed() <= pages, sorted(listed() - pages)

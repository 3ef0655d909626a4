"""Issue 10, teaching: quick checks the page marks, ch13's scaffolding, summaries, further
reading and the welcome page's prerequisites.

Fast: reads the markdown sources, builds nothing (helpers in book_pages.py).
"""

from __future__ import annotations

import ast
import re

import pytest
from book_pages import CELL_OPTION, EXERCISE_TARGETS, blocks, read


@pytest.mark.parametrize("page", list(EXERCISE_TARGETS))
def test_quick_checks_are_page_marked_widgets(page):
    """'Before we start' holds one QuickCheck, input hidden (its code names the answers), with
    valid questions of both kinds."""
    section = read(page).split("## Before we start", 1)[1].split("\n## ", 1)[0]
    cells = [body for info, body, _ in blocks(section) if info.startswith("{code-cell}") and "QuickCheck([" in body]
    assert len(cells) == 1, f"{page}: expected one QuickCheck under 'Before we start', found {len(cells)}"
    assert re.match(r":tags: \[remove-input\]", cells[0]), f"{page}: the answers would show"
    tree = ast.parse(CELL_OPTION.sub("", cells[0]))
    namespace: dict = {}
    exec(compile(ast.Module(tree.body[:-1], []), page, "exec"), namespace)
    widget = eval(compile(ast.Expression(tree.body[-1].value), page, "eval"), namespace)
    assert len(widget.questions) >= 3 and {q["kind"] for q in widget.questions} == {"choice", "number"}
    assert all(q["explain"] for q in widget.questions), f"{page}: a quick check without its explanation"
    assert not re.search(r"\{dropdown\}", section), f"{page}: quick-check answers also printed in a dropdown"


def test_ch13_links_back_instead_of_reteaching_mask_and_teacher_forcing():
    text = read("ch13_generation")
    for heading, chapter in (
        ("### The key technique: causal masking", "ch11_cross_attention"),
        ("### Training: teacher forcing", "ch12_what_you_trained"),
    ):
        section = text.split(heading, 1)[1].split("\n#", 1)[0]
        prose = "\n".join(line for line in section.split("```")[0::2][0].splitlines())
        assert f"{{doc}}`{chapter}`" in prose, f"ch13 {heading!r} does not link {chapter}"
        assert len(prose.split()) <= 90, f"ch13 {heading!r} re-teaches ({len(prose.split())} words)"


@pytest.mark.parametrize("page", list(EXERCISE_TARGETS))
def test_chapters_end_with_summary_and_real_further_reading(page):
    text = read(page)
    summary = text.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert len(re.findall(r"^\d+\. ", summary, flags=re.M)) >= 3, f"{page}: the summary has fewer than 3 points"
    reading = text.split("## Further reading", 1)[1].split("\n## ", 1)[0]
    items = re.findall(r"^- ", reading, flags=re.M)
    assert len(items) >= 3, f"{page}: fewer than 3 references"
    assert "Attention Is All You Need" in reading and "arXiv:1706.03762" in reading
    for label, url in re.findall(r"\[([^\]]+)\]\((https?://[^)]+)\)", reading):
        host = url.split("/")[2]
        assert host in {"arxiv.org", "nlp.seas.harvard.edu"}, f"{page}: unexpected link {url}"
        if host == "arxiv.org":
            assert (
                re.fullmatch(r"https://arxiv\.org/abs/\d{4}\.\d{4,5}", url)
                and label == f"arXiv:{url.rsplit('/', 1)[1]}"
            ), url


def test_welcome_page_states_the_prerequisites():
    text = read("index")
    box = next(body for info, body, _ in blocks(text) if info.startswith("{admonition}") and "assumes" in info)
    assert "lesson 11" in box and len(re.findall(r"^- ", box, flags=re.M)) >= 3
    assert text.index("{admonition}") < text.index("## For students")

"""The built book in headless chromium, offline: every request to another host is blocked.

Needs `make book` first (these tests fail, not skip, when _build/html is missing). Screenshots
of every chapter and the gallery go to build/test-artifacts/screenshots/.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qs, urlparse

import pytest
from browser_support import (
    BOOK_HTML,
    CHAPTERS,
    DARK_TONE,
    GALLERY,
    GALLERY_WIDGETS,
    ROOT,
    WIDGET_TONES_JS,
    PageLog,
    block_external,
    expected_launch_links,
    notebook_pages,
    require_built_book,
    wait_for_widget,
    widget_states,
)

from encdec.widgets._base import text

pytestmark = pytest.mark.browser
SCREENSHOTS = ROOT / "build" / "test-artifacts" / "screenshots"


def test_missing_build_fails_with_a_clear_message(tmp_path):
    with pytest.raises(AssertionError, match="run `make book` first"):
        require_built_book(tmp_path / "html")


def test_widget_assets_match_the_python_packages():
    import anywidget

    manifest = json.loads((require_built_book() / "_widget_assets" / "manifest.json").read_text())
    assert manifest["versions"]["anywidget"] == anywidget.__version__
    page = (BOOK_HTML / f"{GALLERY}.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', page)
    assert not [s for s in scripts if "://" in s], "a page loads a script from another host"
    assert [s.split("?")[0] for s in scripts if "_widget_assets/" in s] == ["../_static/../_widget_assets/widgets.js"]
    assert not any("_static/_widget_assets" in s for s in scripts)


@pytest.mark.parametrize("path", CHAPTERS + [GALLERY])
def test_page_loads_offline_and_renders_its_widgets(open_page, path):
    p = open_page(path)
    n = p.widgets_rendered()
    if p.page.locator(".math").count():  # MathJax is a local copy too
        p.page.wait_for_selector("mjx-container", timeout=20000)
    p.page.wait_for_timeout(300)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    p.page.screenshot(path=str(SCREENSHOTS / f"{path.removeprefix('book/').replace('/', '_')}.png"), full_page=True)
    assert p.log.problems() == {}, f"{path}: {p.log.problems()}"
    if path.endswith("widgets_gallery"):  # both editions' galleries
        assert n == GALLERY_WIDGETS == 11


@pytest.mark.parametrize("path", ["book/ch11_cross_attention", "book/zh/ch11_cross_attention"])
def test_chapter_11s_cross_attention_grid_holds_the_trained_weights(open_page, path):
    """The explorer of chapter 11 opens at the running example's shape, Ka = 4 (the decoder is fed
    BOS POSITIVE 0 4, no EOS row), its grid of A filled with the trained model's weights."""
    from browser_support import fmt

    from encdec.train import load_run
    from encdec.widgets import CrossAttentionExplorer

    p = open_page(path)
    w = wait_for_widget(p.page, "CrossAttentionExplorer")
    assert w.locator("[data-testid='shape-A'] td").first.inner_text() == "[N, 4, 9]"
    A = CrossAttentionExplorer.from_model(load_run("modern")[0]).shown_weights()
    assert w.locator("td.encdec-acell").all_inner_texts() == [fmt(x, 2) for row in A for x in row]
    assert w.locator("[data-testid='weights-note']").get_attribute("data-own") == "yes"
    w.locator("[data-testid='Ka-input']").fill("5")  # a shape of the reader's own: made-up weights, said so
    assert w.locator("[data-testid='weights-note']").get_attribute("data-own") == "no"
    assert p.log.problems() == {}


@pytest.mark.parametrize("path", ["book/ch11_cross_attention", "book/zh/ch11_cross_attention"])
def test_chapter_11s_score_explorer_opens_on_the_weight_its_text_reads(open_page, path):
    """The score explorer of chapter 11 opens on layer 2, head 2 of the cross-attention, the units row
    against the 0 of 30: its row of weights is the trained module's own, drawn with no weights loaded."""
    from browser_support import fmt

    from encdec.data import encode_question
    from encdec.train import load_run
    from encdec.widgets._base import LESSON_QUESTION_TEXT
    from encdec.widgets.score_explorer import score_parts

    row = score_parts(load_run("modern")[0], encode_question(LESSON_QUESTION_TEXT))["cross"][1]["weights"][1][2]
    p = open_page(path)
    w = wait_for_widget(p.page, "ScoreExplorer")
    assert [w.locator(f"[data-testid='weight-{j}']").inner_text() for j in range(len(row))] == [fmt(x) for x in row]
    assert w.locator("tr.encdec-chosen").get_attribute("data-key") == "3"
    assert p.page.evaluate("() => window.encdecWeights === undefined")
    assert p.log.problems() == {}


@pytest.mark.parametrize("path", [c for c in CHAPTERS if "/ch" in c])
def test_chapter_works_as_file_url(open_page, path):
    p = open_page(path, url=(require_built_book() / f"{path}.html").as_uri())
    p.widgets_rendered()
    p.page.wait_for_timeout(300)
    assert p.log.problems() == {}, f"{path} as file://: {p.log.problems()}"


def test_site_works_as_file_url(open_page):
    html = require_built_book()
    p = open_page(GALLERY, url=(html / f"{GALLERY}.html").as_uri())
    assert p.widgets_rendered() == GALLERY_WIDGETS
    w = wait_for_widget(p.page, "MaskToggle")
    w.locator("td[data-row='1'][data-col='2']").click()
    assert w.locator("td[data-row='1'][data-col='2'] .w").inner_text() != "✕"
    assert w.locator("[data-testid='rowsum-1']").inner_text() == "1.000"
    p.page.wait_for_timeout(300)
    assert p.log.problems() == {}


QUICK_CHECK_PAGES = [c for c in CHAPTERS if "/ch1" in c]


@pytest.mark.parametrize("path", QUICK_CHECK_PAGES)
def test_quick_check_marks_answers_offline(open_page, path):
    """From file://: a wrong answer is marked wrong, the right one right, and the score follows."""
    from playwright.sync_api import expect

    p = open_page(path, url=(require_built_book() / f"{path}.html").as_uri())
    p.widgets_rendered()
    lang = "zh" if "/zh/" in path else "en"
    (state,) = widget_states(p.page, "questions")  # the page's own questions and answers
    questions = state["questions"]
    w = wait_for_widget(p.page, "QuickCheck")
    score = w.locator("[data-testid='score']")
    expect(score).to_have_text(text("quick_check.score", lang, right=0, total=len(questions)))
    assert {q["kind"] for q in questions} == {"choice", "number"}
    for i, q in enumerate(questions):
        item = w.locator(f"[data-question='{i}']")
        expect(item).to_have_attribute("data-state", "unanswered")
        assert w.locator(f"[data-testid='explain-{i}']").count() == 0, "the explanation shows before any answer"
        if q["kind"] == "choice":
            wrong = next(j for j in range(len(q["options"])) if j != q["answer"])
            item.locator(f"[data-option='{wrong}']").click()
            expect(item.locator(f"[data-option='{wrong}']")).to_have_class(re.compile(r"\bwrong\b"))
        else:
            box = item.locator(f"[data-testid='number-{i}']")
            box.fill(f"{q['answer'] + 1 + 2 * q['tolerance']:g}")
            item.locator(f"[data-testid='check-{i}']").click()
        expect(item).to_have_attribute("data-state", "wrong")
        expect(w.locator(f"[data-testid='status-{i}']")).to_have_text(text("quick_check.status_wrong", lang))
        expect(score).to_have_text(text("quick_check.score", lang, right=i, total=len(questions)))
        if i == 0:  # the reader gives up once: the right option is marked, the explanation opens
            w.locator("[data-testid='reveal-0']").click()
            expect(item).to_have_attribute("data-state", "revealed")
            if q["kind"] == "choice":
                expect(item.locator(f"[data-option='{q['answer']}']")).to_have_class(re.compile(r"\bright\b"))
        if q["kind"] == "choice":
            item.locator(f"[data-option='{q['answer']}']").click()
        else:
            item.locator(f"[data-testid='number-{i}']").fill(f"{q['answer']:g}")
            item.locator(f"[data-testid='number-{i}']").press("Enter")
        expect(item).to_have_attribute("data-state", "revealed" if i == 0 else "right")
        if q["explain"]:
            expect(w.locator(f"[data-testid='explain-{i}']")).to_be_visible()
        expect(score).to_have_text(text("quick_check.score", lang, right=i + 1, total=len(questions)))
    assert p.log.problems() == {}


@pytest.mark.parametrize("path", notebook_pages())
def test_launch_and_download_buttons(open_page, path):
    """Every notebook page links Colab, Binder and JupyterHub to its notebook copy in the book's
    repository (none where no repository is known), and offers its executed .ipynb from the site
    itself; offline, from file://."""
    import jupytext

    html = require_built_book()
    expected = expected_launch_links(path)
    assert (ROOT / f"{path}.ipynb").is_file(), f"the launch buttons open {path}.ipynb, which the repository lacks"
    p = open_page(path, url=(html / f"{path}.html").as_uri())
    if not expected:  # no repository known (a local clone): no launch button leads anywhere made up
        assert p.page.locator(".dropdown-launch-buttons").count() == 0
    else:
        p.page.locator(".dropdown-launch-buttons button").click()
        assert p.page.locator(".dropdown-launch-buttons a", has_text="Colab").is_visible()
        links = {
            a.text_content().strip(): a.get_attribute("href")
            for a in p.page.locator(".dropdown-launch-buttons a").all()
        }
        assert set(links) == set(expected)
        for name, href in links.items():
            parts = urlparse(href)
            assert (f"{parts.scheme}://{parts.netloc}{parts.path}", parse_qs(parts.query)) == expected[name], name

    href = p.page.locator(".dropdown-download-buttons a[href$='.ipynb']").get_attribute("href")
    downloaded = ((html / path).parent / href).resolve()
    assert downloaded.is_relative_to(html.resolve()) and downloaded.is_file(), href
    executed = json.loads(downloaded.read_text())
    source = jupytext.read(ROOT / f"{path}.md")
    code = [c for c in executed["cells"] if c["cell_type"] == "code"]
    assert ["".join(c["source"]) for c in code] == [c.source for c in source.cells if c.cell_type == "code"]
    assert any(c["outputs"] for c in code), "the download is not the executed notebook"
    assert p.log.problems() == {}


def _notebook(*sources: str) -> str:
    cells = [
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s} for s in sources
    ]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return json.dumps({"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5})


def test_widget_syncs_both_ways_in_jupyterlab_by_mouse_and_keyboard_and_in_its_dark_theme(tmp_path, chromium):
    """Live in JupyterLab, where students meet the widgets: a click in the grid reaches Python, a
    Python assignment redraws the grid; then by keyboard alone Tab reaches the grid, the arrow keys
    move inside it (JupyterLab's own arrow shortcuts do not take them: the notebook's active cell
    stays) and Space changes the mask Python reads; and under JupyterLab's dark theme the widget
    turns dark with light text."""
    from browser_support import jupyterlab

    (tmp_path / "live.ipynb").write_text(
        _notebook(
            "from encdec.widgets import MaskToggle\nw = MaskToggle()\nw",
            "print('STATE', w.preset, w.mask[2][3])",
            "w.preset = 'none'",
            "print('FORBIDDEN', [(i, j) for i, row in enumerate(w.mask) for j, v in enumerate(row) if v])",
        )
    )
    with jupyterlab(tmp_path) as base:
        log = PageLog()
        context = chromium.new_context(viewport={"width": 1280, "height": 900})
        block_external(context, log)
        page = context.new_page()
        page.goto(f"{base}/lab/tree/live.ipynb", wait_until="load")
        page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=90000)
        cells = page.locator(".jp-Notebook .jp-Cell")

        def run(k):
            # On a loaded machine JupyterLab may ask which kernel to start (its session was slow to
            # come up): accept the proposed one, as a user would, before clicking the cell.
            accept = page.locator(".jp-Dialog .jp-mod-accept")
            if accept.count():
                accept.first.click()
                page.wait_for_selector(".jp-Dialog", state="detached", timeout=10000)
            cells.nth(k).click()
            page.keyboard.press("Shift+Enter")

        try:
            w = page.locator(".encdec-widget[data-widget='MaskToggle']")
            # A Shift+Enter that lands while the kernel is still connecting is dropped: retry.
            for attempt in range(5):
                run(0)
                try:
                    w.wait_for(timeout=20000)
                    break
                except Exception:
                    if attempt == 4:
                        raise
            cell = w.locator("td[data-row='2'][data-col='3']")
            cell.click()  # allow reader 2 to read source 3
            page.wait_for_function(
                "el => !el.classList.contains('forbidden')", arg=cell.element_handle(), timeout=10000
            )
            page.wait_for_timeout(500)
            run(1)
            out = cells.nth(1).locator(".jp-OutputArea-output")
            out.wait_for(timeout=60000)
            assert out.inner_text().strip() == "STATE custom False"  # Python saw the click
            assert w.locator("td[data-row='1'][data-col='3'] .w").inner_text() == "✕"  # 4 x 4: BOS POSITIVE 0 4
            run(2)
            page.wait_for_function(
                "() => document.querySelector(\".encdec-widget td[data-row='1'][data-col='3'] .w\").textContent !== '✕'",
                timeout=30000,
            )
            assert w.locator("[data-testid='preset']").inner_text() == text(
                "mask_toggle.status_none", "en"
            )  # Python's change, drawn

            # keyboard alone: from the first cell's editor, Escape (JupyterLab's command mode), then Tab
            cells.nth(0).locator(".cm-content").click()
            page.keyboard.press("Escape")
            in_grid = "() => !!document.activeElement?.closest(\".encdec-widget [role='grid']\")"
            for _ in range(40):
                page.keyboard.press("Tab")
                if page.evaluate(in_grid):
                    break
            assert page.evaluate(in_grid), "Tab never reached the mask grid in JupyterLab"
            at = "() => [document.activeElement.dataset.row, document.activeElement.dataset.col]"
            active = "() => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].findIndex((c) => c.classList.contains('jp-mod-active'))"
            assert page.evaluate(at) == ["2", "3"]  # the grid's tab stop: the cell last clicked
            before = page.evaluate(active)
            for key in ("ArrowDown", "ArrowUp", "ArrowLeft"):
                page.keyboard.press(key)
            assert page.evaluate(at) == ["2", "2"]  # the arrows moved inside the grid ...
            assert page.evaluate(active) == before  # ... and not the notebook's cell selection
            page.keyboard.press("Space")  # forbid reader 2 to read source 2 (itself)
            page.wait_for_function("() => document.activeElement.classList.contains('forbidden')", timeout=10000)
            page.wait_for_timeout(500)
            run(3)
            out = cells.nth(3).locator(".jp-OutputArea-output")
            out.wait_for(timeout=60000)
            assert out.inner_text().strip() == "FORBIDDEN [(2, 2)]"  # Python saw the key

            # JupyterLab's dark theme, chosen from its Settings menu as a student would
            page.locator(".lm-MenuBar-itemLabel", has_text="Settings").click()
            page.locator(".lm-Menu-itemLabel", has_text="Theme").first.hover()
            page.locator(".lm-Menu-itemLabel", has_text=re.compile("^JupyterLab Dark$")).click()
            page.wait_for_selector("body[data-jp-theme-light='false']", state="attached", timeout=30000)
            try:  # the theme's stylesheet arrives after its switch: wait for the colours, then read them
                page.wait_for_function(
                    f"(w) => {{ const [b, t] = ({WIDGET_TONES_JS})(w); return b < {DARK_TONE} && t > {DARK_TONE}; }}",
                    arg=w.element_handle(),
                    timeout=15000,
                )
            except Exception:
                pass  # the assertion below says what the colours are
            background, ink = w.evaluate(WIDGET_TONES_JS)
            assert background < DARK_TONE < ink, (
                f"the widget under JupyterLab Dark: background {background:.0f}, text {ink:.0f} (0-255)"
            )
            assert log.problems() == {}, log.problems()
        except Exception:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "jupyterlab-failure.png"))
            raise
        finally:
            context.close()

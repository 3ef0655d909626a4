"""The built book in headless chromium, offline: every request to another host is blocked.

Needs `make book` first (these tests fail, not skip, when _build/html is missing). Screenshots
of every chapter and the gallery go to build/test-artifacts/screenshots/.
"""

from __future__ import annotations

import json
import math
import re
from urllib.parse import parse_qs, urlparse

import pytest

from browser_support import (
    BOOK_HTML,
    CHAPTERS,
    GALLERY,
    ROOT,
    Opened,
    PageLog,
    block_external,
    browser,
    expected_launch_links,
    fmt,
    notebook_pages,
    require_built_book,
    serve,
    softmax,
    wait_for_widget,
    watch_page,
    widget_states,
)

pytestmark = pytest.mark.browser
SCREENSHOTS = ROOT / "build" / "test-artifacts" / "screenshots"
# One widget per gallery cell that imports from encdec.widgets (eight: seven figures, a quick check).
GALLERY_WIDGETS = (ROOT / f"{GALLERY}.md").read_text(encoding="utf-8").count("\nfrom encdec.widgets import ")


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:  # one Playwright per module: a second one inside it is refused
        yield b


@pytest.fixture(scope="module")
def site(chromium):
    html = require_built_book()
    with serve(html) as base:
        yield base, chromium


@pytest.fixture
def open_page(site):
    base, chromium = site
    opened = []

    def _open(path: str, url: str | None = None) -> Opened:
        page = Opened(chromium, url or f"{base}{path}.html")
        opened.append(page)
        return page

    yield _open
    for page in opened:
        page.context.close()


def test_missing_build_fails_with_a_clear_message(tmp_path):
    with pytest.raises(AssertionError, match="run `make book` first"):
        require_built_book(tmp_path / "html")


def test_widget_assets_match_the_python_packages():
    import anywidget

    manifest = json.loads((require_built_book() / "_widget_assets" / "manifest.json").read_text())
    assert manifest["versions"]["anywidget"] == anywidget.__version__
    assert manifest["versions"]["@jupyter-widgets/html-manager"].startswith("1.0.")
    page = (BOOK_HTML / f"{GALLERY}.html").read_text()
    scripts = re.findall(r'<script[^>]*src="([^"]+)"', page)
    assert not [s for s in scripts if "://" in s], "a page loads a script from another host"
    assert any("_widget_assets/html-manager/embed-amd.js" in s for s in scripts)
    assert not any("_static/_widget_assets" in s for s in scripts)


@pytest.mark.parametrize("path", CHAPTERS + [GALLERY])
def test_page_loads_offline_and_renders_its_widgets(open_page, path):
    p = open_page(path)
    n = p.widgets_rendered()
    if p.page.locator(".math").count():  # MathJax is a local copy too
        p.page.wait_for_selector("mjx-container", timeout=20000)
    p.page.wait_for_timeout(300)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    p.page.screenshot(path=str(SCREENSHOTS / f"{path.split('/')[-1]}.png"), full_page=True)
    assert p.log.problems() == {}, f"{path}: {p.log.problems()}"
    if path == GALLERY:
        assert n == GALLERY_WIDGETS == 8


def test_mask_toggle_click_gives_the_new_softmax(open_page):
    from encdec.widgets.numerics import DEFAULT_SCORES_5

    p = open_page(GALLERY)
    w = wait_for_widget(p.page, "MaskToggle")
    cell = w.locator("td[data-row='2'][data-col='3']")
    assert "forbidden" in cell.get_attribute("class")
    cell.click()  # allow reader 2 ("0") to read source 3 ("4")
    expected = softmax(DEFAULT_SCORES_5[2][:4]) + [0.0]
    shown = [w.locator(f"td[data-row='2'][data-col='{j}'] .w").inner_text() for j in range(4)]
    assert shown == [fmt(x) for x in expected[:4]]
    assert w.locator("td[data-row='2'][data-col='4'] .w").inner_text() == "✕"
    assert [w.locator(f"[data-testid='rowsum-{i}']").inner_text() for i in range(5)] == ["1.000"] * 5
    assert w.locator("[data-testid='preset']").inner_text() == "custom mask"
    w.locator("button[data-preset='none']").click()
    assert w.locator("td[data-row='0'][data-col='4'] .w").inner_text() == fmt(softmax(DEFAULT_SCORES_5[0])[4])
    w.locator("button[data-preset='padding']").click()  # the last position is padding: nobody reads it
    assert w.locator("td[data-row='1'][data-col='4'] .w").inner_text() == "✕"
    assert w.locator("td[data-row='1'][data-col='3'] .w").inner_text() == fmt(softmax(DEFAULT_SCORES_5[1][:4])[3])
    assert p.log.problems() == {}


def test_softmax_compare_slider(open_page):
    p = open_page(GALLERY)
    w = wait_for_widget(p.page, "SoftmaxMaskCompare")
    scores = [float(w.locator(f"[data-testid='score-{j}']").inner_text()) for j in range(5)]
    for future in ("3", "6.5"):
        w.locator("[data-testid='future-slider']").fill(future)
        row = scores[:3] + [float(future)] * 2
        assert w.locator("[data-testid='sum-mask']").inner_text() == "1.000"
        wrong = sum(softmax(row)[:3])
        assert wrong < 1
        assert w.locator("[data-testid='sum-zero']").inner_text() == fmt(wrong)
        assert w.locator("[data-testid='w-mask-0']").locator(".w").inner_text() == fmt(softmax(scores[:3])[0])
    assert p.log.problems() == {}


def test_cross_entropy_slider(open_page):
    p = open_page(GALLERY)
    w = wait_for_widget(p.page, "CrossEntropySlider")
    assert w.locator("[data-testid='loss']").inner_text() == "1.609"
    w.locator("[data-testid='p-slider']").fill("0.4")
    assert w.locator("[data-testid='loss']").inner_text() == fmt(-math.log(0.4)) == "0.916"
    assert w.locator("[data-testid='grad-4']").text_content() == "-0.600"
    assert w.locator("[data-testid='grad-3']").text_content() == fmt(0.55 * 0.6 / 0.8)
    assert p.log.problems() == {}


def test_cross_attention_explorer_hover_and_swap(open_page):
    p = open_page(GALLERY)
    w = wait_for_widget(p.page, "CrossAttentionExplorer")
    assert w.locator("[data-testid='shape-A'] td").first.inner_text() == "[N, 5, 9]"
    w.locator("td[data-row='3'][data-col='7']").hover()
    assert w.locator("[data-testid='hover-info']").inner_text() == \
        "A[:, 3, 7]: answer position 3 (4) reads question position 7 (4)"
    w.locator("td[data-row='0'][data-col='1']").hover()
    assert "answer position 0 (BOS) reads question position 1 (NEGATIVE)" in w.locator("[data-testid='hover-info']").inner_text()
    w.locator("[data-testid='swap-q']").check()
    assert w.locator("[data-testid='shape-A'] td").first.inner_text() == "[N, 9, 5]"
    assert w.locator("[data-testid='shape-output'] td").first.inner_text() == "[N, 9, M]"
    assert w.locator("td.encdec-acell").count() == 45
    w.locator("[data-testid='Ka-input']").fill("3")
    assert w.locator("[data-testid='shape-Q'] td").first.inner_text() == "[N, 9, M]"
    assert w.locator("td.encdec-acell").count() == 27
    assert p.log.problems() == {}


def test_shift_and_teacher_forcing_leaks(open_page):
    p = open_page(GALLERY)
    w = wait_for_widget(p.page, "ShiftTeacherForcing")
    status = w.locator("[data-testid='leak-status']")
    assert status.inner_text().startswith("No leak")
    w.locator("[data-testid='toggle-shift']").uncheck()
    assert status.inner_text().startswith("Leak at 5 of 5 positions")
    assert w.locator("tr[data-leak='yes']").count() == 5
    w.locator("[data-testid='toggle-shift']").check()
    w.locator("[data-testid='toggle-causal_mask']").uncheck()
    assert status.inner_text().startswith("Leak at 3 of 4 positions (0, 1, 2)")
    assert p.log.problems() == {}


def test_prefill_decode_stepper_grows_the_cache(open_page):
    p = open_page(GALLERY)
    w = wait_for_widget(p.page, "PrefillDecodeStepper")
    L = w.locator("[data-testid^='self-cache-']").count()  # decoder layers of the gallery's model
    assert L >= 1

    def rows():
        return [int(w.locator(f"[data-testid='self-cache-{l}']").get_attribute("data-rows")) for l in range(L)]

    assert rows() == [0] * L
    w.locator("[data-testid='next']").click()
    assert rows() == [1] * L and "prefill" in w.locator("[data-testid='step-label']").inner_text()
    assert w.locator("[data-testid='cross-cache-0']").get_attribute("data-rows") == "9"
    w.locator("[data-testid='next']").click()
    w.locator("[data-testid='next']").click()
    assert rows() == [3] * L
    assert "unchanged at step 3" in w.locator("[data-testid='memory-status']").inner_text()
    assert w.locator(f"[data-testid='cross-cache-{L - 1}']").get_attribute("data-rows") == "9"
    w.locator("[data-testid='back']").click()
    assert rows() == [2] * L
    w.locator("[data-testid='reset']").click()
    assert rows() == [0] * L
    assert p.log.problems() == {}


def test_attention_map_viewer_switches_head(open_page):
    from encdec.train import load_run
    from encdec.widgets import attention_maps

    expected = attention_maps(load_run("modern")[0])["maps"]  # the gallery's model and question
    p = open_page(GALLERY)
    w = wait_for_widget(p.page, "AttentionMapViewer")

    def shown():
        return [[c.inner_text() for c in row.locator("td").all()] for row in w.locator("tbody tr").all()]

    def as_text(m):
        return [[fmt(x, 2) for x in row] for row in m]

    assert shown() == as_text(expected["cross"][0][0])
    w.locator("button[data-head='1']").click()
    assert shown() == as_text(expected["cross"][0][1])
    w.locator("button[data-kind='encoder_self']").click()
    last = len(expected["encoder_self"]) - 1
    w.locator(f"button[data-layer='{last}']").click()
    assert shown() == as_text(expected["encoder_self"][last][1])
    assert f"layer {last + 1}, head 2" in w.locator("[data-testid='map-title']").inner_text()
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
    (state,) = widget_states(p.page, "questions")  # the page's own questions and answers
    questions = state["questions"]
    w = wait_for_widget(p.page, "QuickCheck")
    score = w.locator("[data-testid='score']")
    expect(score).to_have_text(f"0 of {len(questions)} right")
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
        expect(w.locator(f"[data-testid='status-{i}']")).to_contain_text("Not quite")
        expect(score).to_have_text(f"{i} of {len(questions)} right")
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
        expect(score).to_have_text(f"{i + 1} of {len(questions)} right")
    assert p.log.problems() == {}


@pytest.mark.parametrize("path", notebook_pages())
def test_launch_and_download_buttons(open_page, path):
    """Every notebook page links Colab, Binder and JupyterHub to its notebook copy in the
    configured repository, and offers its executed .ipynb from the site itself; offline, from file://."""
    import jupytext

    html = require_built_book()
    expected = expected_launch_links(path)
    assert (ROOT / f"{path}.ipynb").is_file(), f"the launch buttons open {path}.ipynb, which the repository lacks"
    p = open_page(path, url=(html / f"{path}.html").as_uri())
    p.page.locator(".dropdown-launch-buttons button").click()
    assert p.page.locator(".dropdown-launch-buttons a", has_text="Colab").is_visible()
    links = {a.text_content().strip(): a.get_attribute("href") for a in p.page.locator(".dropdown-launch-buttons a").all()}
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
    cells = [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": s} for s in sources]
    kernel = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return json.dumps({"cells": cells, "metadata": {"kernelspec": kernel}, "nbformat": 4, "nbformat_minor": 5})


def test_widget_syncs_both_ways_in_jupyterlab(tmp_path, chromium):
    """Live in JupyterLab: a click in the grid reaches Python, a Python assignment redraws the grid."""
    from browser_support import jupyterlab

    (tmp_path / "live.ipynb").write_text(_notebook(
        "from encdec.widgets import MaskToggle\nw = MaskToggle()\nw",
        "print('STATE', w.preset, w.mask[2][3])",
        "w.preset = 'none'",
    ))
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
            page.wait_for_function("el => !el.classList.contains('forbidden')", arg=cell.element_handle(), timeout=10000)
            page.wait_for_timeout(500)
            run(1)
            out = cells.nth(1).locator(".jp-OutputArea-output")
            out.wait_for(timeout=60000)
            assert out.inner_text().strip() == "STATE custom False"  # Python saw the click
            assert w.locator("td[data-row='2'][data-col='4'] .w").inner_text() == "✕"
            run(2)
            page.wait_for_function(
                "() => document.querySelector(\".encdec-widget td[data-row='2'][data-col='4'] .w\").textContent !== '✕'",
                timeout=30000,
            )
            assert w.locator("[data-testid='preset']").inner_text() == "none mask"  # Python's change, drawn
        except Exception:
            SCREENSHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SCREENSHOTS / "jupyterlab-failure.png"))
            raise
        finally:
            context.close()

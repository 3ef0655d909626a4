"""Every page of both editions as every reader meets it: WCAG 2.1 A/AA (axe-core), light and dark;
the widgets operable without a mouse; a phone's 390 px; the page's weight.

Each page is opened once, in the built site served on 127.0.0.1 (every other host blocked), with
its widgets rendered; what it requested is weighed there (``reader_pages``). The widgets' own
keyboard, live-region and phone behaviour, state by state, is tested widget by widget in
tests/test_browser_widgets_a11y.py; this module holds every page of the site to the same rules.
"""

from __future__ import annotations

import pytest
from book_published import published_book
from browser_support import (
    DARK_TONE,
    GALLERY_WIDGETS,
    ROOT,
    WIDGET_TONES_JS,
    Opened,
    serve,
    site_pages,
    switch_theme,
)

from encdec.widgets._base import text as widget_text

pytestmark = pytest.mark.browser

AXE = ROOT / "node_modules" / "axe-core" / "axe.min.js"
WCAG_21_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# Bytes a page may load before its reader does anything, everything it requests included (a
# mid-range phone); the trained weights come later, when the reader first asks the model.
PAGE_BUDGET = 1_500_000
PHONE = {"width": 390, "height": 844}
PAGES = site_pages()

AXE_RUN = """async (tags) => {
  const result = await axe.run(document, { runOnly: { type: "tag", values: tags }, resultTypes: ["violations"] });
  return result.violations.map((v) => ({ id: v.id, nodes: v.nodes.slice(0, 5).map((n) => [n.target.join(" "), n.failureSummary]) }));
}"""


def _open(chromium, url, dark=False) -> Opened:
    """A page opened offline (browser_support.Opened), its widgets drawn, as the reader finds it."""
    opened = Opened(chromium, url, dark=dark)
    opened.widgets_rendered()
    opened.network_quiet()
    return opened


@pytest.fixture(scope="module")
def served(chromium):
    """The site as published (with its repository and launch buttons: book_published.py)."""
    with serve(published_book()) as base:
        yield base


def _axe(page) -> list[dict]:
    if not AXE.is_file():
        raise AssertionError(f"axe-core is missing ({AXE}): run `make book` (npm ci installs it)")
    page.add_script_tag(path=str(AXE))
    return page.evaluate(AXE_RUN, WCAG_21_AA)


FITS_JS = """() => {
  const root = document.documentElement;
  const widgets = [...document.querySelectorAll('.encdec-widget')].map((w) => {
    const box = w.getBoundingClientRect();
    const out = [...w.querySelectorAll('*')].filter((e) => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && (r.right > box.right + 1 || r.left < box.left - 1);
    }).length;
    return [w.dataset.widget, Math.round(box.width), w.scrollWidth - w.clientWidth, out];
  });
  // a drawn figure shrunk to the column (its tick labels 3 px tall) instead of scrolling in its box
  const shrunk = [...document.querySelectorAll('div.cell_output img')]
    .filter((i) => i.naturalWidth >= 560 && i.getBoundingClientRect().width < 559).map((i) => i.src.split('/').pop());
  return { page: root.scrollWidth - root.clientWidth, viewport: window.innerWidth, widgets, shrunk };
}"""

_reports: dict[str, dict] = {}


def reader_report(chromium, served, path) -> dict:
    """One visit of ``path`` (made once, read by each test below): axe in the light theme and after
    the theme's switch to dark, what the page requested with its sizes, and at 390x844 how far the
    page and each widget reach past their width."""
    if path not in _reports:
        opened = _open(chromium, f"{served}{path}.html")
        page = opened.page
        try:
            light = _axe(page)
            sizes = sorted(
                ((r.sizes()["responseBodySize"], r.url.removeprefix(served)) for r in opened.requests), reverse=True
            )
            switch_theme(page, "dark")
            dark = _axe(page)
            switch_theme(page, "light")
            page.set_viewport_size(PHONE)
            page.wait_for_timeout(200)
            phone = page.evaluate(FITS_JS)
        finally:
            opened.context.close()
        _reports[path] = {
            "problems": opened.log.problems(),
            "light": light,
            "dark": dark,
            "sizes": sizes,
            "phone": phone,
        }
    return _reports[path]


@pytest.mark.parametrize("path", PAGES)
def test_page_meets_wcag_21_aa_in_light_and_dark(chromium, served, path):
    report = reader_report(chromium, served, path)
    assert report["problems"] == {}, f"{path}: {report['problems']}"
    assert report["light"] == [], f"{path}, light: {report['light']}"
    assert report["dark"] == [], f"{path}, dark: {report['dark']}"


@pytest.mark.parametrize("path", PAGES)
def test_page_loads_at_most_its_budget(chromium, served, path):
    """Everything the page as published requested before its reader did anything: its own HTML
    with the repository and launch buttons, the theme, fonts, scripts, from this site only (other
    hosts are blocked and logged). The trained weights wait for the reader's first question."""
    report = reader_report(chromium, served, path)
    weight = sum(size for size, _ in report["sizes"])
    assert report["problems"] == {}, f"{path}: {report['problems']}"
    assert 0 < weight <= PAGE_BUDGET, (
        f"{path} loads {weight:,} bytes (budget {PAGE_BUDGET:,}); heaviest {report['sizes'][:4]}"
    )


def test_the_pages_weighed_are_the_pages_as_published():
    """A local build has no repository and launch buttons; the pages weighed here have them."""
    site = published_book()
    for page in ("book/ch13_generation", "book/zh/ch13_generation"):
        html = (site / f"{page}.html").read_text(encoding="utf-8")
        assert "btn-source-repository-button" in html and "logo_colab.png" in html and "logo_binder.svg" in html, page


@pytest.mark.parametrize("path", ["book/ch13_generation", "book/zh/ch13_generation", "book/widgets_gallery"])
def test_the_trained_weights_load_when_the_reader_first_asks(chromium, served, path):
    """The "ask the model" figure waits for its reader: the page loads no weights and says what a
    question will do; asked, the figure says it is loading, then answers from the site's weights."""
    from encdec.widgets.export_weights import SITE_WEIGHTS

    opened = _open(chromium, f"{served}{path}.html")
    page = opened.page
    try:
        w = page.locator(".encdec-AskTheModel")
        status = w.locator("[data-testid='status']")
        assert status.get_attribute("data-weights") == "idle"
        assert [r.url for r in opened.requests if r.url.endswith(SITE_WEIGHTS)] == []
        said = w.evaluate(
            "(w) => { w.querySelector('[data-testid=ask]').click(); return w.querySelector('[data-testid=status]').dataset.weights; }"
        )
        assert said == "loading"  # at once, before the script has arrived
        w.locator("[data-testid='answer-modern']").wait_for(timeout=20000)
        assert status.get_attribute("data-weights") == "ready"
        assert [r.url for r in opened.requests if r.url.endswith(SITE_WEIGHTS)] == [f"{served}{SITE_WEIGHTS}"]
        assert opened.log.problems() == {}
    finally:
        opened.context.close()


@pytest.mark.parametrize("path", ["book/ch13_generation", "book/zh/ch13_generation"])
def test_the_generation_view_loads_the_weights_on_its_readers_first_change(chromium, served, path):
    """Chapter 13's prefill stepper shows its first run, recorded in Python, with no weights; a change of
    its prefix loads the site's weights (once) and runs the model in the page: greedy_decode's tokens."""
    from encdec.train import load_run
    from encdec.widgets.export_weights import SITE_WEIGHTS
    from encdec.widgets.prefill_decode import decode_trace

    opened = _open(chromium, f"{served}{path}.html")
    try:
        w = opened.page.locator(".encdec-PrefillDecodeStepper").first
        w.locator("[data-testid='next']").click()  # the recorded run steps without the weights
        assert [r.url for r in opened.requests if r.url.endswith(SITE_WEIGHTS)] == []
        w.locator("[data-testid='prefix-pick']").select_option("BOS POSITIVE 0 4")
        w.locator("[data-testid='self-cache-0'][data-rows='4']").wait_for(timeout=20000)  # the page's run: P = 4
        want = decode_trace(load_run("modern")[0], prefix="BOS POSITIVE 0 4")["steps"]
        assert w.locator("[data-testid='produced']").inner_text() == want[0] == "EOS"
        assert [r.url for r in opened.requests if r.url.endswith(SITE_WEIGHTS)] == [f"{served}{SITE_WEIGHTS}"]
        assert opened.log.problems() == {}
    finally:
        opened.context.close()


@pytest.mark.parametrize("path", PAGES)
def test_page_fits_a_phone(chromium, served, path):
    """At 390x844 the page never scrolls sideways and no widget is wider than the text column
    (nothing in a widget sticks out of it, and it does not scroll sideways either)."""
    found = reader_report(chromium, served, path)["phone"]
    assert found["viewport"] == PHONE["width"]
    assert found["page"] <= 0, f"{path}: the page scrolls sideways by {found['page']} px at 390 px"
    wide = [w for w in found["widgets"] if w[2] > 1 or w[3] > 0]
    assert wide == [], f"{path}: widgets wider than the column (name, width, overflow px, parts outside): {wide}"
    assert found["shrunk"] == [], f"{path}: figures shrunk to the phone's column: {found['shrunk']}"


CLIPPED_IN_PRINT_JS = """() => [...document.querySelectorAll('article pre')]
  .filter((e) => e.scrollWidth > e.clientWidth + 1)
  .map((e) => [e.textContent.split('\\n').reduce((a, b) => (b.length > a.length ? b : a), '').slice(0, 60),
               e.scrollWidth - e.clientWidth])"""


@pytest.mark.parametrize("path", ["book/ch12_what_you_trained.html", "book/zh/ch12_what_you_trained.html"])
def test_printed_code_wraps_at_the_margin(chromium, served, path):
    """Printed (print media, an A4-wide page), no code block or output scrolls sideways, where paper
    would clip it: its long lines wrap. On screen the same block keeps its own horizontal scroll."""
    opened = Opened(chromium, f"{served}{path}", width=700)
    page = opened.page
    assert page.evaluate(CLIPPED_IN_PRINT_JS), f"{path}: no code line is wider than a 700 px screen (nothing to test)"
    page.emulate_media(media="print")
    clipped = page.evaluate(CLIPPED_IN_PRINT_JS)
    opened.context.close()
    assert clipped == [], f"{path}: printed code clipped at the margin (longest line, px cut off): {clipped[:5]}"


def test_a_dark_page_is_dark_behind_the_widgets_too(chromium, served):
    """The widgets follow the theme's switch: dark page, dark widget, light text (not a white box)."""
    opened = _open(chromium, f"{served}book/widgets_gallery.html", dark=True)
    page = opened.page
    try:
        colours = page.evaluate(f"""() => [...document.querySelectorAll('.encdec-widget')].map((w) =>
          [w.dataset.widget, ...({WIDGET_TONES_JS})(w)])""")
    finally:
        opened.context.close()
    assert len(colours) == GALLERY_WIDGETS
    for name, background, text in colours:
        assert background < DARK_TONE < text, (
            f"{name} in the dark theme: background {background:.0f}, text {text:.0f} (0-255)"
        )


CHROME_COLOURS_JS = """() => [...document.querySelectorAll('.search-button__default-text, .theme-switch-button, .bd-header, .encdec-widget')]
  .map((e) => { const s = getComputedStyle(e), b = getComputedStyle(e.closest('button') || e); return [s.color, b.backgroundColor]; })"""


def test_the_switch_to_dark_arrives_at_the_colours_of_a_page_loaded_dark(chromium, served):
    """What the axe check reads after switch_theme is the dark theme itself, not a blend of the two
    on the way (the theme eases its colours; a check read mid-way once failed on a loaded machine):
    every colour of the chrome and the widgets equals that of the same page loaded dark."""
    url = f"{served}book/zh/widgets_gallery.html"
    switched, loaded = _open(chromium, url), _open(chromium, url, dark=True)
    try:
        light = switched.page.evaluate(CHROME_COLOURS_JS)
        switch_theme(switched.page, "dark")
        after, dark = switched.page.evaluate(CHROME_COLOURS_JS), loaded.page.evaluate(CHROME_COLOURS_JS)
    finally:
        switched.context.close()
        loaded.context.close()
    assert len(dark) > 9 and after != light
    assert after == dark


ICON_CLEAR_JS = """() => [...document.querySelectorAll('form.bd-search')].filter((f) => f.getClientRects().length).map((f) => {
  const icon = f.querySelector('.fa-magnifying-glass').getBoundingClientRect(), field = f.querySelector('input');
  const text = field.getBoundingClientRect().left + parseFloat(getComputedStyle(field).paddingLeft);
  return [Math.round(icon.left), Math.round(icon.right), Math.round(text)];
})"""


@pytest.mark.parametrize(
    "page,query,finds",
    [
        ("book/ch11_cross_attention", "teacher forcing", "Training: teacher forcing"),
        ("book/zh/ch11_cross_attention", "交叉注意力", "11 · 编码器"),
    ],
)
def test_search_finds_the_pages_and_the_query_is_clear_of_the_icon(chromium, served, page, query, finds):
    """The search index is loaded by the search page only (book/_templates/layout.html): Ctrl+K on
    a chapter opens the field, the query goes to the search page, which lists the pages that hold
    it. In the field, the dialog's and the search page's, the typed text starts after the
    magnifier, which is drawn from the icon font (no fontawesome.js) and once covered the first
    letter."""
    opened = _open(chromium, f"{served}{page}.html")
    try:
        opened.page.keyboard.press("Control+k")
        opened.page.wait_for_selector("#pst-search-dialog[open] input", timeout=10000)
        opened.page.keyboard.type(query)
        in_dialog = opened.page.evaluate(ICON_CLEAR_JS)
        opened.page.keyboard.press("Enter")
        opened.page.wait_for_url("**/search.html?q=*", timeout=10000)
        found = opened.page.locator("#search-results ul.search li a")
        found.first.wait_for(timeout=20000)
        titles = found.all_inner_texts()
        on_page = opened.page.evaluate(ICON_CLEAR_JS)
        problems = opened.log.problems()
    finally:
        opened.context.close()
    assert problems == {}, problems
    assert any(finds in t for t in titles), f"searching {query!r} found {titles}"
    for where, boxes in (("the Ctrl+K dialog", in_dialog), ("the search page", on_page)):
        assert boxes, f"no search field shown in {where}"
        assert all(right <= text for _, right, text in boxes), (
            f"{where}: icon (left, right) over the text's start: {boxes}"
        )


@pytest.mark.parametrize("path", [p for p in PAGES if "ch1" in p or "gallery" in p])
def test_every_control_of_every_widget_is_reachable_by_keyboard_and_named(chromium, served, path):
    """What a mouse can press, Tab can reach: every element a widget draws as clickable (a pointer
    cursor, a button, a field) is focusable itself or is a cell of a grid with one tab stop (arrow
    keys move inside it), and has an accessible name. Tab from the top of the page reaches every
    widget."""
    opened = _open(chromium, f"{served}{path}.html")
    page = opened.page
    try:
        found = page.evaluate("""() => {
          const widgets = [...document.querySelectorAll('.encdec-widget')];
          const unreachable = [], unnamed = [];
          for (const w of widgets) {
            for (const e of w.querySelectorAll('*')) {
              const clickable = getComputedStyle(e).cursor === 'pointer' || e.matches('button, input, select, textarea, [role=button], [role=gridcell], [role=option]');
              if (!clickable || e.disabled || e.closest('[hidden]') || e.getClientRects().length === 0) continue;
              if (e.parentElement && getComputedStyle(e.parentElement).cursor === 'pointer' && e.tabIndex < 0 && !e.matches('[role=gridcell]')) continue;  // a part of a clickable
              if (e.matches('label') && e.control && e.control.tabIndex >= 0) continue;  // its field takes the focus
              const grid = e.closest('[role=grid]');
              const inGrid = grid && grid.querySelector('[tabindex="0"]');
              if (e.tabIndex < 0 && !inGrid) unreachable.push(w.dataset.widget + ': ' + e.outerHTML.slice(0, 90));
              const name = (e.getAttribute('aria-label') || e.getAttribute('aria-labelledby') || e.labels?.length || e.textContent.trim() || e.title || '');
              if (!name) unnamed.push(w.dataset.widget + ': ' + e.outerHTML.slice(0, 90));
            }
          }
          return { count: widgets.length, names: widgets.map((w) => w.dataset.widget), unreachable, unnamed };
        }""")
        reached = set()
        page.locator("body").focus()
        for _ in range(400):  # every widget has a tab stop, reached from the top in page order
            page.keyboard.press("Tab")
            name = page.evaluate(
                "() => document.activeElement && document.activeElement.closest('.encdec-widget')?.dataset.widget"
            )
            if name:
                reached.add(name)
            if reached == set(found["names"]):
                break
    finally:
        opened.context.close()
    assert found["count"] > 0, f"{path} has no widget"
    assert found["unreachable"] == [], f"{path}: clickable but not reachable by keyboard: {found['unreachable'][:5]}"
    assert found["unnamed"] == [], f"{path}: controls without an accessible name: {found['unnamed'][:5]}"
    assert reached == set(found["names"]), f"{path}: Tab never reached {set(found['names']) - reached}"


# A saved state whose module is lost, or names what is not a widget of the site's map (static_page.js's
# MODULES, written from encdec/widgets/registry.py): a path out of the module folder, an object's own
# key, a registered name with a path after it. None loads a script; each place says why.
BROKEN_MODULES = {
    "lost": (None, "no saved state of an anywidget"),
    "path": ("encdec-esm:../widgets", "not a widget of the site"),
    "object key": ("encdec-esm:__proto__", "not a widget of the site"),
    "name and path": ("encdec-esm:mask_toggle/../../x", "not a widget of the site"),
}


@pytest.mark.parametrize(
    "broken", ["lost", "object key", "name and path", pytest.param("path", marks=pytest.mark.matrix)]
)
def test_the_static_renderer_draws_each_widget_and_names_one_it_cannot(chromium, tmp_path, broken):
    """widgets.js (encdec/widgets/static_page.js) on a page of two widgets, the first named as the built
    book names it (its module from the site's script), the second's saved module broken: the first still
    draws and works (a click changes its numbers, locally), the second's place says the figure could
    not be shown and why, and no script is loaded for it; nothing else breaks."""
    import json

    from browser_support import standalone_widget_page

    from encdec.widgets import CrossEntropySlider, MaskToggle
    from encdec.widgets._base import SITE_ESM_NAME

    slider, mask = CrossEntropySlider(), MaskToggle()
    page_file = standalone_widget_page([mask, slider], tmp_path)
    html = page_file.read_text(encoding="utf-8")
    start = html.index('<script type="application/vnd.jupyter.widget-state+json">') + len(
        '<script type="application/vnd.jupyter.widget-state+json">'
    )
    end = html.index("</script>", start)
    state = json.loads(html[start:end])
    # the page saves every widget the process holds (other tests' too): change these two's own states
    state["state"][mask.model_id]["state"]["_esm"] = SITE_ESM_NAME + "mask_toggle"
    module, why = BROKEN_MODULES[broken]
    if module is None:
        del state["state"][slider.model_id]["state"]["_esm"]
    else:
        state["state"][slider.model_id]["state"]["_esm"] = module
    page_file.write_text(html[:start] + json.dumps(state) + html[end:], encoding="utf-8")
    opened = Opened(chromium, page_file.as_uri())
    page = opened.page
    try:
        page.wait_for_selector(".encdec-MaskToggle")
        page.wait_for_function(
            "() => [...document.querySelectorAll('.encdec-widget-view')].some((v) => v.textContent.includes('could not be shown'))"
        )
        views = page.locator(".encdec-widget-view")
        assert views.count() == 2
        message = views.nth(1).inner_text()
        before = page.locator(".encdec-MaskToggle [data-testid='rowsum-0']").inner_text()
        page.locator(".encdec-MaskToggle [data-preset='none']").click()
        status = page.locator(".encdec-MaskToggle [data-testid='preset']").inner_text()
        scripts = page.evaluate("() => [...document.scripts].map((s) => s.getAttribute('src')).filter(Boolean)")
    finally:
        opened.context.close()
    assert "This figure could not be shown" in message and why in message
    assert before == "1.000" and widget_text("mask_toggle.status_none") in status  # the status the none preset sets
    assert sorted(scripts) == ["_widget_assets/esm/mask_toggle.js", "_widget_assets/widgets.js"]
    assert opened.log.page_errors == []

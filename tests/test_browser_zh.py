"""The Chinese edition in headless Chromium, offline: CJK text renders as glyphs (not the boxes a
missing font gives), the language link lands on the same page in the other language, and nothing
is fetched from another host. (Every page of both editions is also loaded, its widgets rendered
and its errors checked by tests/test_browser.py, which goes over every page of _toc.yml.)"""

from __future__ import annotations

import pytest
from browser_support import ROOT, Opened, browser, require_built_book, toc_pages

pytestmark = pytest.mark.browser
ZH_PAGES = [p for p in toc_pages() if p.startswith("book/zh/")]
SCREENSHOTS = ROOT / "build" / "test-artifacts" / "screenshots"

# Draws each character in the page's own font on a canvas; a character with no glyph is drawn as
# the font's "missing" box, so it looks exactly like an unassigned private-use character.
GLYPHS = """(chars) => {
  const font = getComputedStyle(document.querySelector('article') || document.body).fontFamily;
  const draw = (ch) => {
    const c = document.createElement('canvas'); c.width = 48; c.height = 48;
    const g = c.getContext('2d'); g.font = `32px ${font}`; g.fillStyle = '#000';
    g.fillText(ch, 4, 36);
    return Array.from(g.getImageData(0, 0, 48, 48).data).join(',');
  };
  const missing = draw('\\ue000');
  return chars.map(ch => ({ch, ink: draw(ch) !== draw(' '), box: draw(ch) === missing}));
}"""


@pytest.fixture(scope="module")
def chromium():
    with browser() as b:
        yield b


@pytest.mark.parametrize("path", ZH_PAGES)
def test_chinese_page_renders_cjk_glyphs_offline(chromium, path):
    html = require_built_book()
    p = Opened(chromium, (html / f"{path}.html").as_uri())
    try:
        p.widgets_rendered()
        article = p.page.locator("article").inner_text()
        chars = sorted({ch for ch in article if "\u4e00" <= ch <= "\u9fff"})
        assert len(chars) > 50, f"{path}: only {len(chars)} distinct Chinese characters on the page"
        sample = chars[:: max(1, len(chars) // 40)]
        drawn = p.page.evaluate(GLYPHS, sample)
        boxes = [d["ch"] for d in drawn if d["box"] or not d["ink"]]
        assert not boxes, f"{path}: drawn as boxes (no CJK font): {''.join(boxes)}"
        assert p.page.evaluate("document.documentElement.lang") == "zh-CN"
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        p.page.screenshot(path=str(SCREENSHOTS / f"zh_{path.split('/')[-1]}.png"))
        assert p.log.problems() == {}, f"{path}: {p.log.problems()}"
    finally:
        p.context.close()


@pytest.mark.parametrize("path", ["book/ch11_cross_attention", "book/zh/ch13_generation"])
def test_language_link_lands_on_the_same_page(chromium, path):
    html = require_built_book()
    p = Opened(chromium, (html / f"{path}.html").as_uri())
    try:
        p.page.locator(".language-switch a").click()
        p.page.wait_for_load_state("load")
        other = path.replace("book/zh/", "book/") if "/zh/" in path else path.replace("book/", "book/zh/")
        assert p.page.url == (html / f"{other}.html").as_uri()
        p.page.locator(".language-switch a").click()
        p.page.wait_for_load_state("load")
        assert p.page.url == (html / f"{path}.html").as_uri()
        assert p.log.problems() == {}
    finally:
        p.context.close()

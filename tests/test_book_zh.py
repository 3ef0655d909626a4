"""The Chinese edition (issue 14): every page in both languages, the same code, one glossary.

Source checks read the MyST files and build nothing; the last tests read the built site
(`make book` first) for the language links and each page's language.
"""

from __future__ import annotations

import re
import sys
from html import escape as html_escape

import pytest
import yaml
from book_pages import BOOK, ROOT

sys.path.insert(0, str(BOOK))  # book/zh_sync.py is a script of the book, not a package module
import zh_sync

ZH = BOOK / "zh"
GLOSSARY = yaml.safe_load((BOOK / "glossary.yml").read_text(encoding="utf-8"))["terms"]


def toc() -> list[str]:
    data = yaml.safe_load((ROOT / "_toc.yml").read_text())
    return [data["root"]] + [c["file"] for part in data["parts"] for c in part["chapters"]]


def english_pages() -> list[str]:
    return [p[len("book/") :] for p in toc() if not p.startswith("book/zh/")]


def test_every_page_has_its_chinese_page_in_the_book():
    pages = toc()
    for page in english_pages():
        assert (ZH / f"{page}.md").is_file(), f"book/zh/{page}.md is missing: every page has a Chinese edition"
        assert f"book/zh/{page}" in pages, f"book/zh/{page} is not in _toc.yml"
    assert sorted(p.stem for p in ZH.glob("*.md")) == sorted(english_pages()), "a Chinese page without an English one"


@pytest.mark.parametrize("page", sorted(p.stem for p in ZH.glob("*.md")))
def test_chinese_code_cells_are_the_english_ones(page):
    """The same executed cells in both editions: the Chinese page's code is its English page's,
    with only the display strings of book/zh/strings/<page>.yml in Chinese (book/zh_sync.py)."""
    zh_text = (ZH / f"{page}.md").read_text(encoding="utf-8")
    en_text = (BOOK / f"{page}.md").read_text(encoding="utf-8")
    zh_cells, en_cells = zh_sync.code_cells(zh_text), zh_sync.translated_cells(page)
    assert len(zh_cells) == len(en_cells), f"{page}: {len(zh_cells)} code cells, the English page has {len(en_cells)}"
    for i, (zh, en) in enumerate(zip(zh_cells, en_cells)):
        assert zh == en, (
            f"book/zh/{page}.md, code cell {i + 1} differs from the English page's: run python book/zh_sync.py"
        )
    front = zh_sync.FRONT.match(en_text)
    assert (front is None) or zh_text.startswith(front.group(0)), f"{page}: the notebook header differs"


def placeholders(text: str) -> list[str]:
    """The code inside a string's {...} fields: quoted labels in them and alignment widths may be
    translated (Chinese characters are two columns wide) and the order may follow Chinese word order;
    names and expressions may not change."""
    fields = re.findall(r"\{[^{}]*\}", text)
    return [re.sub(r":[<>^]?\d*(\.\d+)?[a-z%]?\}$", "}", re.sub(r"'[^']*'|\"[^\"]*\"", "''", f)) for f in fields]


def test_display_strings_are_translations_of_strings_in_the_code():
    for path in sorted((ZH / "strings").glob("*.yml")):
        table = zh_sync.display_strings(path.stem)
        code = "\n".join(zh_sync.code_cells((BOOK / f"{path.stem}.md").read_text(encoding="utf-8")))
        for en, zh in table.items():
            assert en in code, f"{path.name}: {en!r} is not in the English page's code"
            assert zh != en, f"{path.name}: {en!r} is not translated"
            assert sorted(placeholders(en)) == sorted(placeholders(zh)), (
                f"{path.name}: the placeholders of {en!r} changed"
            )


def test_glossary_has_one_translation_per_term():
    zh = [t["zh"] for t in GLOSSARY]
    en = [t["en"].lower() for t in GLOSSARY]
    assert len(set(zh)) == len(zh) and len(set(en)) == len(en)


def test_glossary_defines_every_term_in_one_line_in_each_language():
    for t in GLOSSARY:
        assert {"zh", "en", "en_def", "zh_def"} <= set(t), f"{t.get('en')}: a term needs zh, en, en_def and zh_def"
        for key in ("en_def", "zh_def"):
            assert t[key].strip() and "\n" not in t[key].strip(), f"{t['en']}: {key} is one line"
        assert re.search(r"[\u4e00-\u9fff]", t["zh_def"]) and not re.search(r"[\u4e00-\u9fff]", t["en_def"]), t["en"]


# Everything a reader of the Chinese edition reads: its pages, the display strings of their code,
# the widgets' strings, the grader's feedback and the Chinese exercises' texts.
CHINESE_TEXTS = [
    *ZH.glob("*.md"),
    *(ZH / "strings").glob("*.yml"),
    ROOT / "encdec" / "widgets" / "strings" / "zh.json",
    *(ROOT / "encdec" / "grading").glob("messages*.py"),
    ROOT / "encdec" / "grading" / "misconceptions_zh.py",
    *ROOT.glob("solutions/*/zh.yml"),
]


def test_no_chinese_text_uses_another_translation_of_a_term():
    """One Chinese word per term: the glossary lists the other words a term has been given
    (``avoid``), and none of them appears anywhere a reader of the Chinese edition reads."""
    avoided = {word: t["zh"] for t in GLOSSARY for word in t.get("avoid", [])}
    assert avoided, "the glossary lists no other translation to avoid"
    for path in CHINESE_TEXTS:
        text = path.read_text(encoding="utf-8")
        for word, term in avoided.items():
            assert word not in text, f"{path.relative_to(ROOT)} says {word}: the glossary's word is {term}"


CODE_INFO = re.compile(r"^(\{(code-cell|code-block|code|literalinclude|math)\}.*|[\w+-]*)$")


def prose(text: str) -> str:
    """What a reader reads as text: without the front matter, code, inline code, math and link targets
    (each replaced by a space, so no term is made across them). Fences are matched as MyST does: a
    directive's block holds prose, a code block or code directive does not."""
    lines, out, i = zh_sync.FRONT.sub("", text).splitlines(), [], 0
    while i < len(lines):
        m = re.match(r"^(`{3,}|~{3,})(.*)$", lines[i])
        if not m:
            out.append(lines[i])
            i += 1
            continue
        fence, info = m.group(1), m.group(2).strip()
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != fence:
            j += 1
        body = lines[i + 1 : j]
        if not CODE_INFO.match(info):  # a directive: its title and body are prose (options are not)
            out.append(re.sub(r"^\{[\w-]+\}", "", info))
            out.append(prose("\n".join(ln for ln in body if not ln.startswith(":"))))
        i = j + 1
    text = "\n".join(out)
    text = re.sub(r"\$\$.*?\$\$|\$[^$\n]+\$", " ", text, flags=re.S)  # math
    text = re.sub(r"`[^`\n]*`", " ", text)  # inline code, roles' targets
    text = re.sub(r"\]\([^)]*\)", "]", text)  # link targets
    return text


def term_uses(text: str) -> list[tuple[dict, int]]:
    """(term, end offset) of each glossary term in reading order, longest match first at each place."""
    terms = sorted(GLOSSARY, key=lambda t: -len(t["zh"]))
    uses, i = [], 0
    while i < len(text):
        term = next((t for t in terms if text.startswith(t["zh"], i)), None)
        if term is None:
            i += 1
            continue
        uses.append((term, i + len(term["zh"])))
        i += len(term["zh"])
    return uses


def test_term_matching_prefers_the_longest_term():
    uses = term_uses("编码器记忆来自编码器，解码器读它")
    assert [t["en"] for t, _ in uses] == ["encoder memory", "encoder", "decoder"]


@pytest.mark.parametrize("page", sorted(p.stem for p in ZH.glob("*.md")))
def test_first_use_of_each_term_gives_the_english(page):
    text = prose((ZH / f"{page}.md").read_text(encoding="utf-8"))
    seen = set()
    for term, end in term_uses(text):
        if term["zh"] in seen:
            continue
        seen.add(term["zh"])
        after = text[end : end + len(term["en"]) + 40]
        assert re.match(r"\**\s?[（(]\s*" + re.escape(term["en"]) + r"\s*[）),，;；]", after, re.I), (
            f"book/zh/{page}.md: the first use of {term['zh']} is not followed by （{term['en']}）: "
            f"...{text[max(0, end - 30) : end + 30]}..."
        )


def test_chinese_pages_are_written_in_chinese():
    for path in ZH.glob("*.md"):
        text = prose(path.read_text(encoding="utf-8"))
        han = len(re.findall(r"[\u4e00-\u9fff]", text))
        latin_words = len(re.findall(r"\b[A-Za-z]{4,}\b", text))
        assert han > 2 * latin_words, f"{path.name}: {han} Chinese characters, {latin_words} English words in its prose"


# --- the built site ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site():
    from browser_support import require_built_book

    return require_built_book()


@pytest.mark.browser
@pytest.mark.parametrize("page", toc())
def test_each_page_has_its_language_and_a_link_to_the_other_edition(site, page):
    html = (site / f"{page}.html").read_text(encoding="utf-8")
    zh = page.startswith("book/zh/")
    assert re.search(r'<html[^>]* lang="%s"' % ("zh-CN" if zh else "en"), html), page
    m = re.search(r'<p class="language-switch"[^>]*><a href="([^"]+)"', html)
    assert m, f"{page}: no language link"
    target = (site / page).parent / m.group(1)
    other = page.replace("book/zh/", "book/") if zh else page.replace("book/", "book/zh/", 1)
    assert target.resolve() == (site / f"{other}.html").resolve() and target.is_file(), (page, m.group(1))


@pytest.mark.browser
@pytest.mark.parametrize("page", ["book/glossary", "book/zh/glossary"])
def test_the_glossary_page_shows_every_term(site, page):
    html = (site / f"{page}.html").read_text(encoding="utf-8")
    shown = re.findall(r'<tr><td>([^<]+)</td><td lang="zh-CN">([^<]+)</td><td>([^<]+)</td></tr>', html)
    definition = "zh_def" if "/zh/" in page else "en_def"  # each edition shows its own language's
    assert [(zh, en, d) for en, zh, d in shown] == [(t["zh"], t["en"], html_escape(t[definition])) for t in GLOSSARY]


# The theme's own words (Sphinx, pydata-sphinx-theme, sphinx-book-theme, myst-nb's hidden cells,
# sphinx-togglebutton): a Chinese page shows none of them, an English page shows them all.
THEME_WORDS = [
    "Search",
    "Contents",
    "Skip to main content",
    "Color mode",
    "Click to show",
    "Click to hide",
    "Show code cell",
    "Hide code cell",
    "Back to top",
    "previous",
    "next",
    "Download",
    "Fullscreen",
    "Print to PDF",
    "Toggle",
    "sidebar",
    "Site navigation",
    "On this page",
    "Link to this",
    "Copyright",
    "By",
    "Main",
    "Version warning",
    "Launch",
    "logo",
    "Page",
    "The Transformer encoder–decoder",
]
# What an English chapter with hidden cells shows of them (the header, sidebars, a cell's toggle, the hints).
SHOWN_IN_ENGLISH = [
    "Search",
    "Contents",
    "Skip to main content",
    "Color mode",
    "Click to show",
    "Show code cell source",
    "Hide code cell source",
    "Back to top",
    "previous",
    "next",
    "Toggle primary sidebar",
    "Link to this heading",
    "Launch interactive content",
    "Launch on Binder",
]
NAMING_ATTRIBUTES = ("title", "aria-label", "data-bs-title", "placeholder", "alt")


def interface_text(html: str) -> list[str]:
    """What a page shows or names besides its content: the texts and names (title, aria-label,
    placeholder) outside the article, the article's own controls (hidden cells' toggles, headings'
    link titles) and the dropdowns' hints that sphinx-togglebutton's script writes."""
    from bs4 import BeautifulSoup, Comment

    soup = BeautifulSoup(html, "html.parser")
    hints = [h for s in soup("script") for h in re.findall(r"let toggleHint\w+ = '([^']*)'", s.string or "")]
    controls = [s.get_text(" ", strip=True) for s in soup.select("article details.hide > summary")]
    controls += [a["title"] for a in soup.select("article a.headerlink[title]")]
    for node in soup(["script", "style", "article"]):
        node.decompose()
    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    texts = [t.strip() for t in soup.find_all(string=True) if t.strip()]
    names = [el[a] for el in soup.find_all(True) for a in NAMING_ATTRIBUTES if el.get(a)]
    return hints + controls + texts + names


def theme_words_in(texts: list[str]) -> set[str]:
    return {w for w in THEME_WORDS for t in texts if re.search(rf"\b{re.escape(w)}\b", t, re.I)}


@pytest.fixture(scope="module")
def published():
    """The site as published: its pages have the repository and launch buttons too."""
    from book_published import published_book

    return published_book()


@pytest.mark.browser
@pytest.mark.parametrize("page", [p for p in toc() if p.startswith("book/zh/")])
def test_a_chinese_page_shows_its_interface_in_chinese(published, page):
    html = (published / f"{page}.html").read_text(encoding="utf-8")
    texts = interface_text(html)
    assert not theme_words_in(texts), f"{page} shows the theme's English: {sorted(theme_words_in(texts))}"
    assert {"搜索", "跳转至主要内容", "颜色模式", "上一页", "回到顶部"} <= set(texts), page
    if "ch1" in page:  # a notebook page: its launch buttons speak Chinese too
        assert "启动交互式内容" in html and "启动于 Binder" in html, page


@pytest.mark.browser
def test_an_english_page_shows_its_interface_in_english(published):
    texts = interface_text((published / "book/ch11_cross_attention.html").read_text(encoding="utf-8"))
    shown = "\n".join(texts)
    assert [w for w in SHOWN_IN_ENGLISH if w not in shown] == []


def sidebar_captions(html: str) -> list[str]:
    return re.findall(
        r'<p aria-level="2" class="caption" role="heading"><span class="caption-text">([^<]+)</span>', html
    )


@pytest.mark.browser
@pytest.mark.parametrize("page", ["book/ch11_cross_attention", "book/zh/ch11_cross_attention", "book/zh/index"])
def test_the_sidebar_lists_the_pages_edition_first(site, page):
    """Each edition's parts first, in _toc.yml's order, then the other edition's."""
    captions = sidebar_captions((site / f"{page}.html").read_text(encoding="utf-8"))
    parts = yaml.safe_load((ROOT / "_toc.yml").read_text())["parts"]
    zh_parts = [p["caption"] for p in parts if p["chapters"][0]["file"].startswith("book/zh/")]
    en_parts = [p["caption"] for p in parts if not p["chapters"][0]["file"].startswith("book/zh/")]
    assert captions == (zh_parts + en_parts if page.startswith("book/zh/") else en_parts + zh_parts), page
    # the sidebar's first link: its edition's home page (no English home link above a Chinese page's parts)
    first = re.search(
        r'<nav class="bd-links bd-docs-nav"[^>]*>.*?<a class="[^"]*reference internal[^"]*" href="[^"]*">\s*([^<]+?)\s*</a>',
        (site / f"{page}.html").read_text(encoding="utf-8"),
        flags=re.S,
    ).group(1)
    home = {"en": "book/index.md", "zh": "book/zh/index.md"}["zh" if page.startswith("book/zh/") else "en"]
    title = re.search(r"^# (.+)$", (ROOT / home).read_text(encoding="utf-8"), flags=re.M).group(1)
    assert first == re.sub(r"[`*]", "", title), (page, first, title)


# The Chinese prose as a reader meets it: the built pages (link texts included, which name other
# pages by their titles), not the sources. Cheap: parses HTML that is already built.
built = pytest.mark.skipif(
    not (ROOT / "_build" / "html" / "book" / "zh" / "index.html").is_file(), reason="the book is not built (make book)"
)
# English words the Chinese prose always translates (outside code): the word it uses instead.
TRANSLATED = {"batch": "批次", "block": "块"}


def built_prose(page: str) -> list[str]:
    from test_book_prose import prose as site_prose  # the built page's text blocks, without code or outputs

    return site_prose("zh", page)


@built
@pytest.mark.parametrize("page", sorted(p.stem for p in ZH.glob("*.md") if p.stem != "glossary"))
def test_a_chinese_page_gives_each_terms_english_once(page):
    """The English in parentheses goes with a term's first use on the page, not with every use: a link
    whose text is another page's title (which gives its terms' English) does not repeat it."""
    text = "\n".join(built_prose(page))
    for term in GLOSSARY:
        glossed = re.compile(re.escape(term["zh"]) + r"\s?[（(]\s*" + re.escape(term["en"]) + r"\s*[）)，,;；]", re.I)
        uses = [text[max(0, m.start() - 20) : m.end()] for m in glossed.finditer(text)]
        assert len(uses) <= 1, f"zh/{page}: {term['zh']}（{term['en']}） given {len(uses)} times: {uses}"
    for en, zh in TRANSLATED.items():
        found = re.findall(r".{0,20}\b" + en + r"(?:e?s)?\b.{0,20}", text, re.I)
        assert not found, f"zh/{page}: {en!r} left in English (the edition's word is {zh}): {found}"


@built
@pytest.mark.parametrize("page", sorted(p.stem for p in ZH.glob("*.md")))
def test_chinese_quotes_open_and_close(page):
    """In each paragraph the double quotes alternate “ ” (a pair opened with ” reads backwards)."""
    for text in built_prose(page):
        quotes = "".join(re.findall(r"[“”]", text))
        assert quotes == "“”" * (len(quotes) // 2) and len(quotes) % 2 == 0, f"zh/{page}: quotes {quotes}: {text[:160]}"


def commands(text: str) -> list[str]:
    """The lines of a page's fenced blocks other than code cells (shell commands, configuration),
    without their comments, which a translation may word in its own language."""
    found = []
    for _fence, info, body in re.findall(r"^(`{3,}|~{3,})([^\n`]*)\n(.*?)^\1[ \t]*$", text, re.M | re.S):
        if info.strip().startswith("{"):
            continue  # a directive (code cells come from zh_sync; prose directives are translated)
        found += [line for line in (re.sub(r"\s+#.*$", "", ln).strip() for ln in body.splitlines()) if line]
    return found


def test_the_chinese_instructor_guide_gives_the_same_commands():
    """A command a Chinese instructor copies is the English guide's command: the guides' fenced blocks
    agree line by line, comments aside (the Chinese guide once left a test module out of one)."""
    en, zh = (
        commands((BOOK / p).read_text(encoding="utf-8")) for p in ("instructor_guide.md", "zh/instructor_guide.md")
    )
    assert en and en == zh, [(a, b) for a, b in zip(en, zh) if a != b][:3] or (len(en), len(zh))

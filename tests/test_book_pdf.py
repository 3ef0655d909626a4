"""Issue 40, item 8: the book as a PDF, one per edition, which `make book` prints from the built site
(scripts/book_pdf.py) into `_build/html/_downloads/`, and which each edition's first page links.

Read from the built site and its two PDFs (pypdf): one bookmark per page in _toc.yml order, each at
the page's title; the Chinese edition's text and CJK glyphs; every line of every code block the
pages show, tail included (a clipped line loses its end at the margin); none of the site's on-screen
links printed; each edition's first page links its own PDF.
"""

from __future__ import annotations

import functools
import json
import re
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from browser_support import BOOK_HTML, ROOT, require_built_book

sys.path.insert(0, str(ROOT / "scripts"))
from book_languages import LABEL, counterpart
from book_pdf import INDEX, LINK, PDF, edition_pages

pytestmark = pytest.mark.browser
bs4 = pytest.importorskip("bs4")
pypdf = pytest.importorskip("pypdf")

EDITIONS = sorted(INDEX)
# a line this long cannot fit the printed column in the code font: it wraps, or loses its tail
LONG_LINE = 90


def squeeze(text: str) -> str:
    """Text without whitespace: a PDF's extracted text breaks lines and spaces runs its own way."""
    return re.sub(r"\s+", "", text)


@functools.cache
def soup(page: str):
    return bs4.BeautifulSoup((require_built_book() / f"{page}.html").read_text(encoding="utf-8"), "html.parser")


def title(page: str) -> str:
    h1 = soup(page).select_one("main h1")
    for link in h1.select("a.headerlink"):
        link.decompose()
    return h1.get_text(" ", strip=True)


@functools.cache
def pdf(edition: str):
    path = require_built_book() / PDF.format(edition=edition)
    assert path.is_file(), f"{path} is missing: `make book` prints both editions' PDFs"
    return pypdf.PdfReader(path)


@functools.cache
def page_texts(edition: str) -> tuple[str, ...]:
    return tuple(page.extract_text() for page in pdf(edition).pages)


@pytest.mark.parametrize("edition", EDITIONS)
def test_each_edition_is_one_pdf_with_a_bookmark_per_page_in_toc_order(edition):
    reader, pages = pdf(edition), edition_pages()[edition]
    marks = [(item.title, reader.get_destination_page_number(item)) for item in reader.outline]
    assert [squeeze(t) for t, _ in marks] == [squeeze(title(p)) for p in pages], (
        "one bookmark per page, in _toc.yml order"
    )
    starts = [n for _, n in marks]
    assert starts[0] == 0 and starts == sorted(set(starts)) and starts[-1] < len(reader.pages), starts
    texts = page_texts(edition)
    for (name, start), page in zip(marks, pages):
        # each bookmark lands on its page's first sheet, which opens with the page's title:
        # nothing of the site (header, buttons, language link) is printed above it
        assert squeeze(texts[start]).startswith(squeeze(name)), (page, texts[start][:200])


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_site_s_own_links_and_buttons_are_not_printed(edition):
    """The language link, the PDF link and the theme's printed contents list are screen-only."""
    other = counterpart(INDEX[edition])[1]
    first_sheets = [
        page_texts(edition)[item_page]
        for item_page in (pdf(edition).get_destination_page_number(item) for item in pdf(edition).outline)
    ]
    for text in first_sheets:
        lines = [line.strip() for line in text.splitlines()]
        assert LABEL[other] not in lines, text[:300]  # the language switch: a line of its own
        assert squeeze(LINK[edition]) not in squeeze(text)
        assert not {"Contents", "目录"} & set(lines), text[:300]


def test_the_chinese_pdf_embeds_cjk_glyphs_and_searchable_titles():
    reader = pdf("zh")
    cjk = set()
    for page in reader.pages:
        for ref in page["/Resources"].get("/Font", {}).values():
            font = ref.get_object()
            descendant = (font.get("/DescendantFonts") or [None])[0]  # a Type 0 font's glyphs and descriptor
            descriptor = font.get("/FontDescriptor") or (
                descendant.get_object().get("/FontDescriptor") if descendant else None
            )
            name = str(descriptor.get_object().get("/FontName", "")) if descriptor else str(font.get("/BaseFont", ""))
            embedded = "/CharProcs" in font or (
                descriptor is not None
                and any(k in descriptor.get_object() for k in ("/FontFile", "/FontFile2", "/FontFile3"))
            )
            if ("CJK" in name or "WenQuanYi" in name) and embedded:
                cjk.add(name.split("+")[-1])
            assert font.get("/Subtype") != "/Type3", f"a font printed as Type 3 glyphs: {name or font}"
    assert cjk, "no embedded CJK font in the Chinese PDF"
    text = squeeze("".join(page_texts("zh")))
    for page in edition_pages()["zh"]:
        assert squeeze(title(page)) in text, f"{page}: its title is not in the PDF's text"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_figure_is_printed_drawn(edition):
    """The "ask the model" figure prints the model's answers, not its wait for the weights."""
    strings = json.loads((ROOT / "encdec" / "widgets" / "strings" / f"{edition}.json").read_text(encoding="utf-8"))
    text = squeeze("".join(page_texts(edition)))
    for key in ("weights_loading", "weights_failed"):
        waiting = squeeze(strings["ask_model"][key].split("{")[0])
        assert waiting not in text, f"a figure printed before it was drawn: {waiting}"
    # the figure's table of answers, each judged: the model ran in the page before it was printed
    assert squeeze(strings["ask_model"]["right"]) in text, "no answer of the model in the PDF"


@pytest.mark.parametrize("edition", EDITIONS)
def test_a_search_finds_the_text_as_printed(edition):
    """No radical that shares its glyph with an ideograph (⽣ for 生) and no ligature (ﬁ for fi)
    stands in the PDF's text for what the page shows."""
    misread = sorted(set(re.findall("[\u2e80-\u2fdf\ufb00-\ufb06]", "".join(page_texts(edition)))))
    assert not misread, f"characters a search would not find: {misread}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_no_line_of_a_code_block_is_clipped(edition):
    """Every line the pages show in a code block (input or output) is in the PDF whole: its tail too."""
    text = squeeze("".join(page_texts(edition)))
    long, missing = 0, []
    for page in edition_pages()[edition]:
        for pre in soup(page).select("main pre"):
            if pre.find_parent("details") or pre.find_parent(class_="encdec-widget"):
                continue  # folded on the page (and so on paper), or a figure's own text
            for line in pre.get_text().splitlines():
                if len(line) > LONG_LINE:
                    long += 1
                    tail = squeeze(line)[-16:]
                    if tail not in text:
                        missing.append(f"{page}: …{line[-60:]}")
    assert long >= 20, f"only {long} long code lines in the {edition} edition: the check checks nothing"
    assert not missing, f"{len(missing)} code lines lose their tail in print:\n" + "\n".join(missing[:20])


def pdf_links(page: str, selector: str = "a[href]") -> set[Path]:
    """The files the PDF links of ``page`` that ``selector`` picks lead to."""
    return {
        (BOOK_HTML / Path(page).parent / unquote(urlsplit(a["href"]).path)).resolve()
        for a in soup(page).select(selector)
        if urlsplit(a["href"]).path.endswith(".pdf")
    }


@pytest.mark.parametrize("edition", EDITIONS)
def test_each_edition_links_its_own_pdf_from_its_first_page_and_every_download_menu(edition):
    own = (BOOK_HTML / PDF.format(edition=edition)).resolve()
    assert own.is_file()
    assert pdf_links(INDEX[edition], "article a[href]") == {own}, "the first page's body links its edition's PDF"
    for page in edition_pages()[edition]:
        assert pdf_links(page) == {own}, f"{page}: links another edition's PDF, or none"
        assert pdf_links(page, ".dropdown-download-buttons a[href]") == {own}, f"{page}: no PDF in its download menu"


@pytest.mark.parametrize("edition", EDITIONS)
def test_every_folded_answer_prints_open(edition):
    """Paper cannot unfold a dropdown: each answer the pages fold (quick checks, deep checks, transfer
    questions) is in the PDF, its opening words at least."""
    text = squeeze("".join(page_texts(edition)))
    folded, missing = 0, []
    for page in edition_pages()[edition]:
        for box in soup(page).select("main details"):
            if "above-input" in (box.get("class") or []) or box.find_parent(class_="encdec-widget"):
                continue  # a cell's hidden code, or a figure's own control
            body = [c for c in box.children if getattr(c, "name", None) not in (None, "summary")]
            words = squeeze(" ".join(c.get_text(" ") for c in body))[:24]
            if words:
                folded += 1
                if words not in text:
                    missing.append(
                        f"{page}: {box.summary.get_text(' ', strip=True)[:40] if box.summary else ''}: {words}"
                    )
    assert folded >= 15, f"only {folded} folded answers in the {edition} edition: the check checks nothing"
    assert not missing, f"{len(missing)} folded answers missing from the PDF:\n" + "\n".join(missing[:20])


@pytest.mark.parametrize("edition", EDITIONS)
def test_no_sheet_is_blank(edition):
    """Every sheet holds text or a drawing: a cell taller than a sheet kept whole left one with an empty frame."""
    blank = [
        i + 1
        for i, (page, words) in enumerate(zip(pdf(edition).pages, page_texts(edition)))
        if not words.strip() and "/XObject" not in (page.get("/Resources") or {})
    ]
    assert not blank, f"blank sheets in the {edition} PDF: {blank}"


@pytest.mark.parametrize("edition", EDITIONS)
def test_the_generation_view_prints_at_its_end(edition):
    strings = json.loads((ROOT / "encdec" / "widgets" / "strings" / f"{edition}.json").read_text(encoding="utf-8"))
    text = squeeze("".join(page_texts(edition)))
    step_0 = squeeze(strings["prefill_decode"]["step_0"].split("{total}")[1])
    assert step_0 not in text, "a generation view printed at step 0, nothing computed"


@pytest.mark.parametrize("edition", EDITIONS)
def test_cross_references_are_links_within_the_pdf(edition):
    """A page's link to another page of the book leads to that page's sheet in the PDF; no link
    leads to a file of the machine that printed it."""
    inside, outside = 0, []
    for sheet in pdf(edition).pages:
        for ref in sheet.get("/Annots") or []:
            note = ref.get_object()
            uri = str((note.get("/A") or {}).get("/URI", ""))
            if uri.startswith("file:") or "://127.0.0.1" in uri or "://localhost" in uri:
                outside.append(uri)
            elif "/Dest" in note or str((note.get("/A") or {}).get("/S", "")) == "/GoTo":
                inside += 1
    assert not outside, f"links to the printing machine's files: {outside[:5]}"
    assert inside >= 10, f"only {inside} links within the {edition} PDF"

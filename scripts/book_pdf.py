"""The book as one PDF per edition, printed from the built site (`make book`, after the HTML build).

No LaTeX: headless Chromium (Debian's ``chromium``, driven by Playwright) prints every page of an
edition in ``_toc.yml`` order with the site's own print stylesheet (``book/_static/encdec-print.css``:
no sidebars, header buttons or page navigation; code wrapped at the margin, never clipped), each
figure drawn from its saved state as the page shows it; pypdf then merges the pages into one file
with one outline entry (bookmark) per page. The Chinese edition's glyphs come from the CJK font the
set-up installs (fonts-noto-cjk), embedded in the PDF. Links to the site's other pages are left
as plain text (a PDF has no site beside it); links to other hosts are kept.

The files are written into the site, ``_downloads/encdec-book-en.pdf`` and
``_downloads/encdec-book-zh.pdf``, where each edition's first page links its own, and so does every
page's download menu: this module is also the Sphinx extension that adds those links (_config.yml).

Usage: python scripts/book_pdf.py [--html _build/html] [--edition en|zh]
"""

from __future__ import annotations

import argparse
import functools
import posixpath
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ZH_DIR = "book/zh/"
PDF = "_downloads/encdec-book-{edition}.pdf"  # relative to the site's root
INDEX = {"en": "book/index", "zh": "book/zh/index"}  # each edition's first page: it links its PDF
TITLE = {"en": "The Transformer encoder–decoder", "zh": "Transformer 编码器–解码器"}
LANG = {"en": "en", "zh": "zh-CN"}
LINK = {"en": "The whole book as one PDF", "zh": "全书 PDF"}
BUTTON = {"en": "book .pdf", "zh": "全书 .pdf"}  # in the download menu, below the page's own .pdf
LINK_HTML = (
    '<p class="encdec-pdf-link" lang="{lang}"><a href="{href}" download>'
    '<i class="fas fa-file-pdf" aria-hidden="true"></i> {label}</a></p>\n'
)
PAGE_FORMAT = {
    "format": "A4",
    "print_background": True,
    "margin": {"top": "16mm", "bottom": "16mm", "left": "14mm", "right": "14mm"},
}

# Before printing: wait until every saved widget view has rendered; ask each figure that runs the
# model its question (ask the model: its saved one; break it: the lesson's) (on screen the weights load on a reader's first question; paper has no reader)
# and wait for the weights (two frames more, for what a figure draws then); step each generation
# view to its end (at step 0 it shows nothing computed); open every folded answer; give each line
# of code its own box whose wrapped rest hangs under the line's own indentation. Links to the site's
# own pages stay: the merge turns each into a link to that page's first sheet (``cross_links``).
WIDGETS_DRAWN_JS = """() => document.querySelectorAll('.encdec-widget').length >=
  document.querySelectorAll('script[type="application/vnd.jupyter.widget-view+json"]').length"""
SETTLE_JS = """async () => {
  await document.fonts.ready;
  for (const ask of document.querySelectorAll('.encdec-AskTheModel [data-testid="ask"], .encdec-BreakIt [data-testid="lesson"]')) ask.click();
  if (window.encdecWeightsLoading) await window.encdecWeightsLoading.catch(() => null);
  const frame = () => new Promise((done) => requestAnimationFrame(() => done()));
  await frame(); await frame();
  for (const end of document.querySelectorAll('.encdec-AskTheModel [data-testid="end"]')) end.click();
  for (const next of document.querySelectorAll('.encdec-PrefillDecodeStepper [data-testid="next"]')) {
    for (let i = 0; i < 16 && !next.disabled; i++) next.click();
  }
  for (const d of document.querySelectorAll('details:not(.above-input)')) d.open = true;
  for (const pre of document.querySelectorAll('div.highlight pre')) {
    const lines = [[]];
    for (const node of [...pre.childNodes]) {
      const parts = node.nodeType === Node.TEXT_NODE ? node.textContent.split('\\n') : null;
      if (!parts) { lines[lines.length - 1].push(node); continue; }
      parts.forEach((part, i) => { if (i) lines.push([]); if (part) lines[lines.length - 1].push(document.createTextNode(part)); });
    }
    if (lines.length > 1 && !lines[lines.length - 1].length) lines.pop();  // the newline that ends the block
    pre.replaceChildren(...lines.map((nodes) => {
      const line = document.createElement('span');
      line.className = 'encdec-line';
      line.append(...nodes);
      const indent = line.textContent.match(/^ */)[0].length;
      line.style.paddingLeft = `${indent + 4}ch`;
      line.style.textIndent = `-${indent + 4}ch`;
      if (!line.textContent) line.append('\\u200b');
      return line;
    }));
  }
  await frame();
}"""


def edition_pages(toc: Path = ROOT / "_toc.yml") -> dict[str, list[str]]:
    """Every page of each edition, in _toc.yml order (the root, book/index, opens the English one)."""
    import yaml

    data = yaml.safe_load(toc.read_text(encoding="utf-8"))
    pages = [data["root"]] + [c["file"] for part in data.get("parts", []) for c in part.get("chapters", [])]
    return {"en": [p for p in pages if not p.startswith(ZH_DIR)], "zh": [p for p in pages if p.startswith(ZH_DIR)]}


def chromium_path() -> str:
    import shutil

    path = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    if path is None:
        raise SystemExit("the book's PDFs are printed with Debian's chromium: apt-get install chromium")
    return path


def print_page(context, url: str) -> tuple[bytes, str]:
    """(the page printed as PDF, its title as the sidebar shows it)."""
    page = context.new_page()
    try:
        page.goto(url, wait_until="load")
        page.wait_for_function(WIDGETS_DRAWN_JS, timeout=60000)
        page.evaluate(SETTLE_JS)
        title = page.locator("main h1").first.evaluate("h => h.cloneNode(true).textContent").strip().rstrip("#").strip()
        return page.pdf(**PAGE_FORMAT), title
    finally:
        page.close()


# Text a search or a copy finds as the page shows it. Chromium draws a CFF font such as Noto Sans
# CJK as Type 3 glyphs whose text map (ToUnicode) comes from the font's own character map read
# backwards, where a glyph shared by an ideograph and a radical (一 U+4E00 and ⼀ U+2F00, 生 and ⽣,
# 页 and ⻚) maps to the radical: the PDF shows 生成 but a search finds ⽣成 only. A ligature maps
# to its one character (ﬁ U+FB01: "prefill" is not found). The maps are rewritten: a radical as
# the ideograph its font draws with the same glyph (else its NFKC form), a ligature as its letters.
RADICALS = re.compile("[\u2e80-\u2fdf]")
MISREAD = re.compile("[\u2e80-\u2fdf\ufb00-\ufb06]")  # radicals, Latin ligatures
HEX = re.compile(rb"<([0-9a-fA-F]+)>|\[|\]")


def _ideograph(cp: int) -> bool:
    return 0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2FFFF


@functools.cache
def radical_ideographs(family: str) -> dict[str, str]:
    """radical -> the ideograph that ``family`` (as fontconfig finds it) draws with the same glyph."""
    import subprocess

    from fontTools.ttLib import TTFont

    found = subprocess.run(["fc-match", "--format=%{file}\t%{index}", family], capture_output=True, text=True)
    if found.returncode or "\t" not in found.stdout:
        return {}
    path, index = found.stdout.split("\t")
    cmap = TTFont(path, fontNumber=int(index or 0), lazy=True).getBestCmap()
    drawn: dict[str, list[int]] = {}
    for cp, glyph in cmap.items():
        drawn.setdefault(glyph, []).append(cp)
    return {
        chr(cp): chr(min(c for c in drawn[glyph] if _ideograph(c)))
        for cp, glyph in cmap.items()
        if RADICALS.match(chr(cp)) and any(map(_ideograph, drawn[glyph]))
    }


def _cmap_entries(cmap: bytes) -> dict[int, str]:
    """code -> text of a ToUnicode CMap (its bfchar and bfrange entries)."""
    entries: dict[int, str] = {}
    text = lambda h: bytes.fromhex(h.decode()).decode("utf-16-be", "replace")  # noqa: E731 (a one-line helper named where it is used)
    for block in re.findall(rb"beginbfchar(.*?)endbfchar", cmap, re.S):
        hexes = re.findall(rb"<([0-9a-fA-F]+)>", block)
        for src, dst in zip(hexes[::2], hexes[1::2]):
            entries[int(src, 16)] = text(dst)
    for block in re.findall(rb"beginbfrange(.*?)endbfrange", cmap, re.S):
        tokens, i = [m.group(0) for m in HEX.finditer(block)], 0
        while i + 2 < len(tokens):
            lo, hi = int(tokens[i][1:-1], 16), int(tokens[i + 1][1:-1], 16)
            if tokens[i + 2] == b"[":
                end = tokens.index(b"]", i + 3)
                for k, dst in enumerate(tokens[i + 3 : end]):
                    entries[lo + k] = text(dst[1:-1])
                i = end + 1
            else:
                first = text(tokens[i + 2][1:-1])
                for k in range(hi - lo + 1):
                    entries[lo + k] = first[:-1] + chr(ord(first[-1]) + k)
                i += 3
    return entries


def searchable_text_maps(writer) -> int:
    """Rewrite every ToUnicode map of ``writer`` that names a radical or a ligature; return how many."""
    import unicodedata

    from pypdf.generic import DictionaryObject

    fixed, seen = 0, set()

    def fonts(resources):
        resources = resources.get_object() if resources is not None else DictionaryObject()
        yield from (f.get_object() for f in resources.get("/Font", DictionaryObject()).get_object().values())
        for xobject in resources.get("/XObject", DictionaryObject()).get_object().values():
            yield from fonts(xobject.get_object().get("/Resources"))

    for page in writer.pages:
        for font in fonts(page.get("/Resources")):
            ref = font.get("/ToUnicode")
            if ref is None or getattr(ref, "idnum", id(ref)) in seen:
                continue
            seen.add(getattr(ref, "idnum", id(ref)))
            stream = ref.get_object()
            cmap = stream.get_data()
            entries = _cmap_entries(cmap)
            if not any(MISREAD.search(t) for t in entries.values()):
                continue
            same = radical_ideographs(str(font.get("/FontDescriptor", {}).get("/FontFamily", "")))
            entries = {
                c: MISREAD.sub(
                    lambda m, same=same: same.get(m.group(0)) or unicodedata.normalize("NFKC", m.group(0)), t
                )
                for c, t in entries.items()
            }
            width = len(re.search(rb"begincodespacerange\s*<([0-9a-fA-F]+)>", cmap).group(1))
            head = cmap[: cmap.index(b"endcodespacerange") + len(b"endcodespacerange")]
            body = []
            items = sorted(entries.items())
            for start in range(0, len(items), 100):
                chunk = items[start : start + 100]
                body.append(f"{len(chunk)} beginbfchar".encode())
                body += [f"<{c:0{width}X}> <{t.encode('utf-16-be').hex().upper()}>".encode() for c, t in chunk]
                body.append(b"endbfchar")
            stream.set_data(
                head
                + b"\n"
                + b"\n".join(body)
                + b"\nendcmap\nCMapName currentdict /CMap defineresource pop\nend\nend\n"
            )
            fixed += 1
    return fixed


def cross_links(writer, starts: dict[str, int]) -> int:
    """Each link to a page of the site (a ``file:`` address, as the pages were printed from disk)
    becomes a link to that page's first sheet in ``writer``; a link to a page this PDF does not hold
    is dropped (it would open a file of the machine that printed it). Returns the links made."""
    from pypdf.generic import ArrayObject, NameObject, NullObject

    made = 0
    for sheet in writer.pages:
        kept = ArrayObject()
        for ref in sheet.get("/Annots") or []:
            note = ref.get_object()
            uri = str((note.get("/A") or {}).get("/URI", ""))
            if not uri.startswith("file:"):
                kept.append(ref)
                continue
            target = starts.get(uri.split("#")[0])
            if target is not None:
                del note[NameObject("/A")]
                note[NameObject("/Dest")] = ArrayObject(
                    [
                        writer.pages[target].indirect_reference,
                        NameObject("/XYZ"),
                        NullObject(),
                        NullObject(),
                        NullObject(),
                    ]
                )
                kept.append(ref)
                made += 1
        if "/Annots" in sheet:
            sheet[NameObject("/Annots")] = kept
    return made


def merge(printed: list[tuple[bytes, str, str]], edition: str, out: Path) -> int:
    """One PDF of the printed pages (PDF, title, the page's address), a bookmark at each page's
    start and the pages' links to each other kept as links; return its page count."""
    import io

    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import NameObject, TextStringObject

    writer = PdfWriter()
    starts: dict[str, int] = {}
    for data, title, url in printed:
        start = starts[url] = len(writer.pages)
        writer.append(PdfReader(io.BytesIO(data)), import_outline=False)
        writer.add_outline_item(title=title, page_number=start)
    cross_links(writer, starts)
    writer.add_metadata({"/Title": TITLE[edition], "/Author": "The course team"})
    writer.root_object[NameObject("/Lang")] = TextStringObject(LANG[edition])  # for screen readers
    writer.page_mode = "/UseOutlines"
    searchable_text_maps(writer)
    writer.compress_identical_objects(remove_duplicates=True, remove_unreferenced=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:
        writer.write(f)
    return len(writer.pages)


def build_pdfs(html: Path, editions: list[str]) -> None:
    from playwright.sync_api import sync_playwright

    pages = edition_pages()
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(), headless=True, args=["--no-sandbox", "--disable-gpu", "--no-first-run"]
        )
        # offline: the site is read from disk and any other host is refused
        context = browser.new_context(viewport={"width": 1000, "height": 1400})
        context.route(
            "**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort()
        )
        context.add_init_script("localStorage.setItem('mode', 'light'); localStorage.setItem('theme', 'light');")
        try:
            for edition in editions:
                start = time.monotonic()
                printed = []
                for name in pages[edition]:
                    path = html / f"{name}.html"
                    if not path.is_file():
                        raise SystemExit(f"{path} is missing: build the site first (jupyter-book build)")
                    printed.append((*print_page(context, path.resolve().as_uri()), path.resolve().as_uri()))
                out = html / PDF.format(edition=edition)
                printing = time.monotonic() - start
                count = merge(printed, edition, out)
                print(
                    f"{out.relative_to(html)}: {len(printed)} pages of the book, {count} PDF pages, "
                    f"{out.stat().st_size / 1e6:.1f} MB; printed in {printing:.0f} s, "
                    f"merged in {time.monotonic() - start - printing:.0f} s"
                )
        finally:
            browser.close()


# --- the Sphinx extension: each edition's first page links its PDF ---------------------------------


def _page_context(app, pagename, templatename, context, doctree) -> None:
    edition = next((e for e, index in INDEX.items() if index == pagename), None)
    if edition is None or doctree is None or "body" not in context:
        return
    href = posixpath.relpath(PDF.format(edition=edition), posixpath.dirname(pagename))
    context["body"] = LINK_HTML.format(lang=LANG[edition], href=href, label=LINK[edition]) + context["body"]


def _header_button(app, pagename, templatename, context, doctree) -> None:
    """Every page's download menu (the theme's, built at priority 501) offers its edition's PDF
    beside the page's own files."""
    group = next((b for b in context.get("header_buttons", []) if b.get("label") == "download-buttons"), None)
    if group is None:
        return
    edition = "zh" if pagename.startswith(ZH_DIR) else "en"
    group["buttons"].append(
        {
            "type": "link",
            "url": posixpath.relpath(PDF.format(edition=edition), posixpath.dirname(pagename)),
            "text": BUTTON[edition],
            "tooltip": LINK[edition],
            "icon": "fas fa-book",
            "label": "download-book-pdf-button",
        }
    )


def setup(app):
    app.connect("html-page-context", _page_context)
    app.connect("html-page-context", _header_button, priority=550)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument(
        "--edition", choices=sorted(INDEX), action="append", help="one edition only (repeatable); default both"
    )
    args = parser.parse_args(argv)
    build_pdfs(args.html, args.edition or sorted(INDEX))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The theme's icon fonts, cut to the icons the site names (scripts/book_icons.py): every icon a page
or a script of the site names keeps its glyph, in the font that had it, and nothing else is kept."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from book_published import published_book
from browser_support import require_built_book
from fontTools.ttLib import TTFont

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))
import book_icons  # the book's Sphinx extensions live in scripts/

STYLESHEET = (
    '.fa-bars:before,.fa-navicon:before{content:"\\f0c9"}.fa-lg{font-size:1.25em}'
    '.fa-github:before{content:"\\f09b"}.fa-sun:after{content:"\\f185"}'
)


def test_names_are_resolved_to_code_points_by_the_stylesheet():
    points = book_icons.code_points(STYLESHEET)
    assert points == {"fa-bars": 0xF0C9, "fa-navicon": 0xF0C9, "fa-github": 0xF09B, "fa-sun": 0xF185}


def test_a_cut_font_keeps_the_named_icons_it_had_and_no_other(tmp_path):
    """A cut of the whole font (the theme's .ttf, the same glyphs as its .woff2) to three names."""
    site = require_built_book()
    fonts = tmp_path / book_icons.FONTS
    fonts.mkdir(parents=True)
    whole = TTFont(site / book_icons.FONTS / "fa-solid-900.ttf")
    whole.flavor = "woff2"
    whole.save(fonts / "fa-solid-900.woff2")
    (tmp_path / book_icons.STYLESHEET).parent.mkdir(parents=True)
    (tmp_path / book_icons.STYLESHEET).write_text((site / book_icons.STYLESHEET).read_text(encoding="utf-8"))
    (tmp_path / "page.html").write_text('<i class="fa-solid fa-bars"></i><i class="fa-solid fa-lg fa-sun"></i>')
    (tmp_path / "theme.js").write_text('button.className = "fa-solid fa-moon";')
    [(name, before, after)] = book_icons.cut(tmp_path)
    kept = set(TTFont(fonts / name).getBestCmap())
    assert kept == {0xF0C9, 0xF185, 0xF186}  # bars, sun, moon: the page's and the script's
    assert after < before / 20


@pytest.mark.parametrize("kind", ["built", "published"])
def test_every_icon_the_site_names_is_in_the_font_it_loads(kind):
    site = require_built_book() if kind == "built" else published_book()
    used = book_icons.used_points(site)
    assert len(used) >= 10, "the theme's buttons name a dozen icons"
    for cut in sorted((site / book_icons.FONTS).glob("*.woff2")):
        had = set(TTFont(cut.with_suffix(".ttf")).getBestCmap())  # the theme's whole font
        kept = set(TTFont(cut).getBestCmap() or {})  # none kept: no cmap at all
        assert kept == had & used, (cut.name, sorted(map(hex, (had & used) ^ kept)))
        assert cut.stat().st_size < 10_000, cut.name

"""Sphinx extension of the course book (loaded from _config.yml): the site's icon fonts cut to the
icons its pages name.

The theme ships Font Awesome's whole fonts: ``fa-solid-900.woff2`` alone is 156 kB of the bytes every
page loads before its reader acts (the chapter pages' budget is 1.5 MB), for the dozen icons the
theme's buttons show. When the build has finished, each ``.woff2`` of the theme's Font Awesome folder
keeps the glyphs of the icons named anywhere in the site (every ``fa-<name>`` in its pages and in
its scripts, which a theme's script may set on a button; the names resolved to code points through
the theme's own stylesheet) and drops the rest; the ``.ttf`` fallbacks stay whole. A name that the
stylesheet does not know (``fa-solid``, ``fa-lg``: styles, not glyphs) keeps nothing.
``tests/test_book_icons.py`` holds every icon a page names to its glyph in the font it loads.

    python scripts/book_icons.py _build/html   # the same cut, on a built site
"""

from __future__ import annotations

import logging
import re
import sys
from pathlib import Path

FONTS = Path("_static") / "vendor" / "fontawesome" / "webfonts"
STYLESHEET = Path("_static") / "styles" / "pydata-sphinx-theme.css"
NAME = re.compile(r"fa-[a-z0-9]+(?:-[a-z0-9]+)*")
# a rule of the stylesheet: its selectors (`.fa-bars:before,.fa-navicon:before`) and its code point
RULE = re.compile(r"((?:\.fa-[a-z0-9-]+:(?:before|after),?)+)\{content:\"\\([0-9a-f]+)\"\}")
SKIPPED = ("fontawesome.js",)  # Font Awesome's own script (not loaded by the pages): names every icon


def code_points(stylesheet: str) -> dict[str, int]:
    """Icon name -> its code point, as the stylesheet's ``content`` rules give them."""
    points = {}
    for selectors, point in RULE.findall(stylesheet):
        for name in re.findall(r"\.(fa-[a-z0-9-]+):", selectors):
            points[name] = int(point, 16)
    return points


def named(site: Path) -> set[str]:
    """Every ``fa-<name>`` the site's pages and scripts hold."""
    names: set[str] = set()
    for path in [*site.rglob("*.html"), *site.rglob("*.js")]:
        if path.name not in SKIPPED:
            names.update(NAME.findall(path.read_text(encoding="utf-8", errors="replace")))
    return names


def used_points(site: Path) -> set[int]:
    """The code points of the icons the site names (the theme's stylesheet resolves each name)."""
    points = code_points((site / STYLESHEET).read_text(encoding="utf-8"))
    return {points[name] for name in named(site) if name in points}


def cut(site: Path) -> list[tuple[str, int, int]]:
    """Each ``.woff2`` of the site's Font Awesome folder cut to the icons the site names; returns
    (file, bytes before, bytes after) of each."""
    from fontTools import subset

    logging.getLogger("fontTools").setLevel(logging.WARNING)  # its subsetter says every table it prunes
    points = used_points(site)
    done = []
    for font_file in sorted((site / FONTS).glob("*.woff2")):
        before = font_file.stat().st_size
        options = subset.Options()
        options.flavor = "woff2"
        options.layout_features = ["*"]
        options.name_IDs = ["*"]
        options.notdef_outline = True
        font = subset.load_font(str(font_file), options)
        kept = points & set(font.getBestCmap())
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=sorted(kept) or [0x20])
        subsetter.subset(font)
        subset.save_font(font, str(font_file), options)
        done.append((font_file.name, before, font_file.stat().st_size))
    return done


def _finished(app, exception) -> None:
    from sphinx.util import logging as sphinx_logging

    if exception is None and app.builder.format == "html" and (Path(app.outdir) / FONTS).is_dir():
        for name, before, after in cut(Path(app.outdir)):
            sphinx_logging.getLogger(__name__).info(
                f"book_icons: {name} cut to the site's icons, {before:,} -> {after:,} bytes"
            )


def setup(app):
    app.connect("build-finished", _finished)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    for name, before, after in cut(Path(sys.argv[1])):
        print(f"{name}: {before:,} -> {after:,} bytes")

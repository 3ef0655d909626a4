"""Sphinx extension of the course book (loaded from _config.yml): what the theme and myst-nb write
that a screen reader would meet wrongly named (axe-core's WCAG 2.1 rules; tests/test_browser_reader.py
runs them on every page of both editions).

- A hidden code cell's toggle (myst-nb's ``<summary aria-label="Toggle hidden content">``) is named
  by the words it shows, "Show code cell source", as a reader who speaks what they see expects
  (label-content-name-mismatch): the label is dropped and the visible title names it.

The theme's own buttons are restated in ``book/_templates``; the book's stylesheet is
``book/_static/encdec-book.css``. Sphinx copies static files only when it writes a page, so a change
to that stylesheet alone marks every page to be written again (``_stylesheet_changed``).
"""

from __future__ import annotations

from pathlib import Path

HIDDEN_CELL_TOGGLE = '<summary aria-label="Toggle hidden content">'


def _named_by_what_they_show(app, pagename, templatename, context, doctree) -> None:
    body = context.get("body")
    if body and HIDDEN_CELL_TOGGLE in body:
        context["body"] = body.replace(HIDDEN_CELL_TOGGLE, "<summary>")


def _stylesheet_changed(app, env, added, changed, removed) -> list[str]:
    """Every page, when one of the book's own static files is newer than its published copy."""
    for folder in app.config.html_static_path:
        source = Path(app.confdir) / folder
        for path in source.rglob("*") if source.is_dir() else []:
            published = Path(app.outdir) / "_static" / path.relative_to(source)
            if path.is_file() and (not published.is_file() or path.stat().st_mtime > published.stat().st_mtime):
                return sorted(env.found_docs)
    return []


def setup(app):
    app.connect("html-page-context", _named_by_what_they_show)
    app.connect("env-get-outdated", _stylesheet_changed)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

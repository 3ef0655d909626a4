"""Sphinx extension of the course book (loaded from _config.yml): two editions in one site.

The Chinese edition lives in ``book/zh/`` with the English page names. On every page that has a
counterpart in the other language, this puts a language link at the top of the page body that
lands on that counterpart (a plain relative link: it works from ``file://`` and offline), and
gives each page its own language in ``<html lang>`` (``zh-CN`` under ``book/zh/``), which the
widgets read to pick their strings and the browser uses to pick CJK glyphs.
"""

from __future__ import annotations

import posixpath

ZH_DIR = "book/zh/"
LANG = {"en": "en", "zh": "zh-CN"}
SWITCH = '<p class="language-switch" lang="{lang}" style="text-align: right"><a href="{href}" hreflang="{lang}">{label}</a></p>\n'
LABEL = {"en": "English", "zh": "中文"}


def counterpart(pagename: str) -> tuple[str, str]:
    """(the page of the same name in the other edition, that edition's language)."""
    if pagename.startswith(ZH_DIR):
        return "book/" + pagename[len(ZH_DIR) :], "en"
    if pagename.startswith("book/"):
        return ZH_DIR + pagename[len("book/") :], "zh"
    return ZH_DIR + pagename, "zh"


def edition(pagename: str) -> str:
    return "zh" if pagename.startswith(ZH_DIR) else "en"


def _page_context(app, pagename, templatename, context, doctree) -> None:
    context["language"] = LANG[edition(pagename)]
    if doctree is None or "body" not in context:
        return
    other, lang = counterpart(pagename)
    if other not in app.env.found_docs:
        return
    href = posixpath.relpath(other, posixpath.dirname(pagename) or ".") + app.builder.out_suffix
    context["body"] = SWITCH.format(lang=LANG[lang], href=href, label=LABEL[lang]) + context["body"]


def setup(app):
    app.connect("html-page-context", _page_context)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

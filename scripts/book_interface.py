"""Sphinx extension of the course book (loaded from _config.yml): each edition's interface in its
own language.

The site is one Sphinx project in English; the Chinese edition's pages (``book/zh/``) show the
theme's words in Chinese: search, contents, the skip link, the colour switch, previous / next, the
sidebars' buttons, the footer, the headings' links, the hidden code cells' toggles (myst-nb) and the
dropdowns' hints (sphinx-togglebutton). The words come from the Chinese catalogues that Sphinx,
pydata-sphinx-theme, sphinx-book-theme and sphinx-togglebutton ship; the few that none of them has
(or words the book's templates name, ``book/_templates``) come from the table ``ZH`` below, which is
looked up first.

Sphinx translates through one translator per catalogue (``sphinx.locale.translators``), which the
themes' Python code and the HTML writer ask when they make their words: this puts the page's
edition's translators in place before the page's body is written (``doctree-resolved``) and before
its template is rendered (``html-page-context``), and hands the templates' ``_`` its edition's. The
pages are written one after another (so ``parallel_write_safe`` is False).

On a Chinese page the sidebar lists the Chinese edition's parts first, then the English ones, and
shows no link to the English home page above them (``book/_templates/sbt-sidebar-nav.html``).
"""

from __future__ import annotations

import gettext
from pathlib import Path

import pydata_sphinx_theme
import sphinx
import sphinx_book_theme
import sphinx_togglebutton
from book_languages import edition
from docutils import nodes
from myst_nb.sphinx_ import HideCodeCellNode
from sphinx import addnodes
from sphinx.environment.adapters.toctree import global_toctree_for_doc
from sphinx.locale import translators

# The book's own Chinese words: what no catalogue has, and where the book words it otherwise.
ZH = {
    # book/_templates: the colour switch, the sidebars' buttons, the navigation's names
    "Color mode": "颜色模式",
    "Toggle primary sidebar": "显示或隐藏导航栏",
    "Toggle secondary sidebar": "显示或隐藏本页目录",
    "Main": "全书导航",
    # Jupyter Book's search box (its theme option search_bar_text)
    "Search this book...": "搜索本书…",
    # myst-nb's hidden cells (nb_code_prompt_show / nb_code_prompt_hide, "{type}" filled in)
    "Show code cell source": "显示代码",
    "Hide code cell source": "隐藏代码",
    "Show code cell output": "显示输出",
    "Hide code cell output": "隐藏输出",
    "Show code cell outputs": "显示输出",
    "Hide code cell outputs": "隐藏输出",
    "Show code cell content": "显示代码单元",
    "Hide code cell content": "隐藏代码单元",
    # Sphinx 7's words since its last Chinese catalogue
    "Link to this heading": "链接到此标题",
    "Link to this code": "链接到此代码",
    "Link to this table": "链接到此表格",
    "Link to this image": "链接到此图片",
    "Link to this equation": "链接到此公式",
    "Link to this definition": "链接到此定义",
    # where the catalogues' Chinese is not the book's
    "© Copyright %(copyright)s.": "© 版权所有 %(copyright)s。",
    "Print to PDF": "打印为 PDF",
    "By": "作者：",
    # _config.yml's author, shown after "By", and its title (the header's and each tab's)
    "The course team": "课程团队",
    "The Transformer encoder–decoder": "Transformer 编码器–解码器",
    # sphinx-book-theme's launch buttons (a published page's, with its repository) and the print
    # table of contents (book/_templates/layout.html names it)
    "Launch interactive content": "启动交互式内容",
    "Launch on": "启动于",
    "logo": "标志",
    "Page": "本页",
}

# The catalogues translated per page: (namespace, catalogue) -> the folders of their translations,
# first found first (Sphinx's own before pydata-sphinx-theme's, as Sphinx itself orders them).
CATALOGUES = {
    ("general", "sphinx"): [
        Path(sphinx.__file__).parent / "locale",
        Path(pydata_sphinx_theme.__file__).parent / "locale",
    ],
    ("general", "booktheme"): [
        Path(sphinx_book_theme.__file__).parent / "theme" / "sphinx_book_theme" / "static" / "locales"
    ],
    ("general", "togglebutton"): [Path(sphinx_togglebutton.__file__).parent / "translations" / "locales"],
}
ZH_LOCALES = ["zh_CN", "zh", "zh-cn"]  # the names the packages file their Chinese under
TOGGLE_HINTS = ("toggleHintShow", "Click to show"), ("toggleHintHide", "Click to hide")  # sphinx-togglebutton's script


class _Table(gettext.NullTranslations):
    """A translator from a dict, asking its fallback for what the dict does not have."""

    def __init__(self, table: dict[str, str]):
        super().__init__()
        self.table = table

    def gettext(self, message):
        return self.table[message] if message in self.table else super().gettext(message)


def _zh_translator(catalogue: str, folders: list[Path]) -> gettext.NullTranslations:
    translator = _Table(ZH)
    for folder in folders:
        translator.add_fallback(gettext.translation(catalogue, str(folder), ZH_LOCALES, fallback=True))
    return translator


_EDITIONS: dict[str, dict] = {}


def _load(app) -> None:
    _EDITIONS["en"] = {key: translators[key] for key in CATALOGUES}
    _EDITIONS["zh"] = {key: _zh_translator(key[1], folders) for key, folders in CATALOGUES.items()}


def _use(language: str) -> gettext.NullTranslations:
    """The edition's translators in Sphinx's place; its translator of Sphinx's catalogue."""
    translators.update(_EDITIONS[language])
    return _EDITIONS[language][("general", "sphinx")]


def _body_in_its_language(app, doctree, docname) -> None:
    """Before the body is written: its edition's words, and the hidden cells' toggles in them."""
    translator = _use(edition(docname))
    if edition(docname) == "zh":
        for node in doctree.findall(HideCodeCellNode):
            node["prompt_show"] = translator.gettext(node["prompt_show"])
            node["prompt_hide"] = translator.gettext(node["prompt_hide"])


def _page_in_its_language(app, pagename, templatename, context, doctree) -> None:
    """Before the themes add their buttons: the edition's translators, and the templates' ``_``."""
    translator = _use(edition(pagename))
    if edition(pagename) != "zh":
        return
    context["gettext"], context["ngettext"] = translator.gettext, translator.ngettext
    if "toctree" in context:
        context["toctree"] = _edition_first(app, pagename)


def _words_of_the_themes_context(app, pagename, templatename, context, doctree) -> None:
    """After the themes: what they put in the page's context in English."""
    if edition(pagename) != "zh":
        return
    words = _EDITIONS["zh"][("general", "sphinx")].gettext
    for key in ("theme_search_bar_text", "author", "docstitle"):
        if key in context:
            context[key] = words(context[key])
    hints = _EDITIONS["zh"][("general", "togglebutton")].gettext
    context["script_files"] = [_translated_hint(script, hints) for script in context.get("script_files", [])]


def _translated_hint(script, hints):
    body = script.attributes.get("body", "") if not script.filename else ""
    for name, message in TOGGLE_HINTS:
        if body.startswith(f"let {name} = "):
            return type(script)(
                None, priority=script.priority, **{**script.attributes, "body": f"let {name} = '{hints(message)}';"}
            )
    return script


def _edition_first(app, pagename):
    """The template's ``toctree()`` (Sphinx's global one), with the page's edition's parts first."""

    def toctree(collapse=True, **kwargs):
        kwargs.setdefault("includehidden", False)
        if kwargs.get("maxdepth") == "":
            kwargs.pop("maxdepth")
        tree = global_toctree_for_doc(app.env, pagename, app.builder, collapse=collapse, **kwargs)
        if tree is None:
            return ""
        parts, current = [], None
        for child in list(tree.children):  # each part: its caption (a title), then its list
            if isinstance(child, nodes.title) or current is None:
                current = []
                parts.append(current)
            current.append(child)
        own = edition(pagename)
        ordered = [p for p in parts if _part_edition(app, p) == own] + [
            p for p in parts if _part_edition(app, p) != own
        ]
        tree.children = []
        for part in ordered:
            tree.extend(part)
        return app.builder.render_partial(tree)["fragment"]

    return toctree


def _part_edition(app, part) -> str:
    """The edition of a sidebar part: that of the first page it links to."""
    for caption in (n for n in part if isinstance(n, nodes.title)):
        for toc in app.env.master_doctree.findall(addnodes.toctree):
            if toc.get("caption") == caption.astext() and toc["entries"]:
                return edition(toc["entries"][0][1])
    return "en"


def setup(app):
    app.connect("builder-inited", _load)
    app.connect("doctree-resolved", _body_in_its_language)
    app.connect("html-page-context", _page_in_its_language, priority=100)
    app.connect("html-page-context", _words_of_the_themes_context, priority=600)
    app.connect("build-finished", lambda app, exception: _use("en") if _EDITIONS else None)
    return {"parallel_read_safe": True, "parallel_write_safe": False}

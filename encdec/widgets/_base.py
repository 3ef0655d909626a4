"""The base of every book widget: an anywidget whose ESM is ``common.js`` + the widget's own file."""

from __future__ import annotations

from importlib import resources

import anywidget


def asset_text(name: str) -> str:
    """The text of a JS or CSS file shipped next to this module."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def esm(name: str) -> str:
    """A widget's ES module: the shared helpers, then the widget's own render code.

    The browser imports the ESM from one string (a blob URL), so helpers are concatenated
    rather than imported.
    """
    return asset_text("common.js") + "\n" + asset_text(name)


class BookWidget(anywidget.AnyWidget):
    """Shared CSS for every figure; subclasses set ``_esm``."""

    _css = asset_text("widgets.css")

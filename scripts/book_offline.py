"""Sphinx extension of the course book (loaded from _config.yml): keep every page offline.

- Drops duplicate inline scripts (sphinx-thebe adds its ``const THEBE_JS_URL = ...`` twice under
  Jupyter Book 1.x, and the second declaration is a page error).
- Warns (an error under ``--warningiserror``) when a page would load a script or stylesheet from
  another host: the built book must work with no network.
"""

from __future__ import annotations

from sphinx.util import logging

logger = logging.getLogger(__name__)


def _key(asset) -> tuple:
    return (asset.filename or "", tuple(sorted((k, str(v)) for k, v in asset.attributes.items())))


def _offline_page(app, pagename, templatename, context, doctree) -> None:
    for kind in ("script_files", "css_files"):
        assets = context.get(kind)
        if not assets:
            continue
        seen, kept = set(), []
        for asset in assets:
            key = _key(asset)
            if key in seen:
                continue
            seen.add(key)
            kept.append(asset)
            if asset.filename and "://" in str(asset.filename):
                logger.warning(f"{pagename}: loads {asset.filename} from another host; the book must work offline")
        context[kind] = kept


def setup(app):
    app.connect("html-page-context", _offline_page, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

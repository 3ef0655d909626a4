"""Sphinx extension of the course book (loaded from _config.yml): links to the repository only
where the repository is known.

The launch buttons (Colab, Binder, JupyterHub) and the repository button all point into one
GitHub repository. It is `repository.url` in _config.yml when that is set; otherwise the
`origin` remote of the checkout being built, when that is on GitHub (the Pages workflow's
checkout is). With neither, the book is built without those buttons rather than with links to a
placeholder: a reader of a local build meets no dead end. The download button keeps offering
each chapter's executed notebook either way.

book/launch_copies.py reads the same address (``repository_url``) for the launch copies' install
cell, so the buttons and the notebooks they open never disagree.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
GITHUB = re.compile(r"(?:https://github\.com/|git@github\.com:|ssh://git@github\.com/)([\w.-]+)/([\w.-]+?)(?:\.git)?/?")
# Values that name no repository of this course: unset, a placeholder, Jupyter Book's default.
NOT_A_REPOSITORY = re.compile(r"^$|/OWNER/|/REPOSITORY$|^https://github\.com/executablebooks/jupyter-book/?$")
LAUNCH_PROVIDERS = ("binderhub_url", "colab_url", "jupyterhub_url", "deepnote_url", "jupyterlite_url")


def github_url(url: str) -> str | None:
    """``https://github.com/OWNER/REPO`` for a GitHub address (https or ssh), else None."""
    url = (url or "").strip()
    m = GITHUB.fullmatch(url)
    if not m or NOT_A_REPOSITORY.search(url):
        return None
    return f"https://github.com/{m.group(1)}/{m.group(2)}"


def origin_remote(root: Path = ROOT) -> str | None:
    """The checkout's `origin` remote, if git knows one."""
    try:
        out = subprocess.run(
            ["git", "config", "--get", "remote.origin.url"], cwd=root, capture_output=True, text=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def repository_url(root: Path = ROOT, configured: str | None = None) -> str | None:
    """The book's repository: _config.yml's `repository.url` if real, else a GitHub `origin`."""
    if configured is None:
        config = yaml.safe_load((root / "_config.yml").read_text(encoding="utf-8"))
        configured = (config.get("repository") or {}).get("url") or ""
    return github_url(configured) or github_url(origin_remote(root) or "")


PLACEHOLDER_HOST = re.compile(r"^https?://([\w-]+\.)*example\.(org|com|net)(/|$)")


def _config_inited(app, config) -> None:
    options = config.html_theme_options
    launch = dict(options.get("launch_buttons") or {})
    for provider in LAUNCH_PROVIDERS:  # a hub left at its placeholder address gets no button
        if PLACEHOLDER_HOST.match(str(launch.get(provider) or "")):
            launch.pop(provider)
    options["launch_buttons"] = launch
    url = repository_url(Path(app.confdir), options.get("repository_url") or "")
    if url:
        options["repository_url"] = url
        options["use_repository_button"] = True
        return
    options.pop("repository_url", None)
    for button in ("use_repository_button", "use_edit_page_button", "use_issues_button"):
        options[button] = False
    for provider in LAUNCH_PROVIDERS:
        launch.pop(provider, None)


def _offer_executed_notebook(app, pagename, templatename, context, doctree) -> None:
    """Without launch buttons the theme no longer copies a page's executed notebook next to its
    sources for the download button; do it here (the theme's own steps, before its buttons)."""
    if app.config.html_theme_options.get("repository_url") or "ipynb_source" in context:
        return
    if not str(context.get("sourcename", "")).endswith((".md", ".md.txt")):
        return
    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


SOLID_REPOSITORY_ICON = "fa-solid fa-code-branch"


def _repository_icon_from_the_solid_font(app, pagename, templatename, context, doctree) -> None:
    """The repository button's icon (sphinx-book-theme gives it the provider's mark, ``fab
    fa-github``) taken from the theme's solid icon font, which every page loads anyway: the mark
    alone would make every published page load the brands font too (118 KB for one glyph)."""
    for button in context.get("header_buttons", []):
        for item in [button, *button.get("buttons", [])]:
            if str(item.get("icon", "")).startswith(("fab ", "fa-brands ")):
                item["icon"] = SOLID_REPOSITORY_ICON


def executed_notebook_with_outputs(path: Path, cache_dir: Path) -> bool:
    """Give the executed notebook at ``path`` its outputs back from the execution cache, when it has
    none; True when it was rewritten. myst-nb (1.4) writes the notebook it read, not the one it merged
    the cached outputs into, so after a prose-only edit (a cache hit) the page renders its outputs
    but the notebook the download button offers has none."""
    import nbformat

    if not path.is_file() or not cache_dir.is_dir():
        return False
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    if not code or any(c.get("outputs") for c in code):
        return False
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(cache_dir).merge_match_into_notebook(notebook)
    except KeyError:  # no cached execution of this code: nothing to give back
        return False
    nbformat.write(merged, path)
    return True


def _restore_outputs(app, doctree) -> None:
    """After a page is read: its executed notebook keeps its outputs (``executed_notebook_with_outputs``)."""
    build = Path(app.outdir).parent
    executed_notebook_with_outputs(build / "jupyter_execute" / f"{app.env.docname}.ipynb", build / ".jupyter_cache")


def setup(app):
    app.connect("config-inited", _config_inited)
    app.connect("doctree-read", _restore_outputs)
    app.connect("html-page-context", _offer_executed_notebook, priority=500)
    app.connect("html-page-context", _repository_icon_from_the_solid_font, priority=510)  # after the theme's buttons
    return {"parallel_read_safe": True, "parallel_write_safe": True}

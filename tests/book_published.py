"""The built book as published, for the tests and benchmarks that weigh or read what a reader
downloads: with the repository and launch buttons, which a local build (no known repository:
scripts/book_repository.py) leaves out."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from browser_support import BOOK_HTML, ROOT, require_built_book

# The site as published, for what a reader downloads: the repository and launch buttons, which a
# local build (no known repository) leaves out, with a stand-in repository of a real one's length.
PUBLISHED = ROOT / "build" / "published-book"
STAND_IN_REPOSITORY = "https://github.com/course-team/encdec-book"


def published_book(html: Path = BOOK_HTML) -> Path:
    """The built site as published: with the repository and launch buttons. A site built with a
    repository is that already; a local build's pages are written again with the stand-in repository
    into ``PUBLISHED``, once per build, from copies of its executed notebooks and caches (nothing
    executes again: a few seconds)."""
    html = require_built_book(html)
    if "btn-source-repository-button" in (html / "book" / "index.html").read_text(encoding="utf-8"):
        return html
    PUBLISHED.parent.mkdir(parents=True, exist_ok=True)
    with open(PUBLISHED.parent / "published-book.lock", "w") as lock:  # test workers write it one at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _write_published(html)


def _write_published(html: Path) -> Path:
    import subprocess
    import sys

    import yaml

    from encdec.widgets._base import SITE_CSS, SITE_CSS_ENV, SITE_ESM, SITE_ESM_ENV
    from encdec.widgets.export_weights import SITE_WEIGHTS, SITE_WEIGHTS_ENV

    build, out = html.parent, PUBLISHED / "_build"
    stamp = f"{html.resolve()} {(html / 'book' / 'index.html').stat().st_mtime_ns}"
    if (PUBLISHED / "stamp").is_file() and (PUBLISHED / "stamp").read_text() == stamp:
        return out / "html"
    shutil.rmtree(PUBLISHED, ignore_errors=True)
    out.mkdir(parents=True)
    for part in (".doctrees", ".jupyter_cache", "jupyter_execute", ".math-svg", ".matplotlib"):
        if (build / part).exists():
            shutil.copytree(build / part, out / part)
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    config["repository"]["url"] = STAND_IN_REPOSITORY
    extensions = config["sphinx"]["local_extensions"]
    config["sphinx"]["local_extensions"] = {name: str(ROOT / folder) for name, folder in extensions.items()}
    (PUBLISHED / "_config.yml").write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    env = {
        **os.environ,
        SITE_WEIGHTS_ENV: SITE_WEIGHTS,
        SITE_CSS_ENV: SITE_CSS,
        SITE_ESM_ENV: SITE_ESM,
        "MPLCONFIGDIR": str(out / ".matplotlib"),
        "MATPLOTLIBRC": str(ROOT / "book" / "matplotlibrc"),
        "PYTHONHASHSEED": "0",
    }
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "jupyter-book"),
            "build",
            str(ROOT),
            "--path-output",
            str(PUBLISHED),
            "--config",
            str(PUBLISHED / "_config.yml"),
            "--warningiserror",
            "--keep-going",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0 or not (out / "html" / "book" / "index.html").is_file():
        raise AssertionError(f"the published build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    (PUBLISHED / "stamp").write_text(stamp)
    return out / "html"

"""Give the launch buttons' notebook copies (book/<chapter>.ipynb) their first cell, and leave out
the build's own checks (cells tagged remove-cell).

A chapter opened on Colab, Binder or a JupyterHub starts without the course package. The copies
that the buttons open therefore begin with one cell that installs the student wheel (the package
with its trained checkpoints, made by `make student-release`) from the published site, and
fetches nothing else; where `encdec` is already importable (a clone of the repository, a prepared
hub) the cell does nothing. The book's own pages (.md) never hold this cell, so the local and
offline builds are unchanged.

The wheel's address is derived from the one repository setting of _config.yml, as the buttons'
links are (scripts/book_repository.py: `repository.url`, else the checkout's GitHub `origin`):
the GitHub Pages site of that repository (https://github.com/OWNER/REPO is served at
https://OWNER.github.io/REPO/), its student/ folder (where .github/workflows/book.yml publishes
the student release), and the wheel's file name from pyproject.toml's name and version. Where no
repository is known, the cell fetches nothing and says how to install the package by hand.

    python book/launch_copies.py book/ch11_cross_attention.ipynb ...   # after jupytext (mk/book.mk)
    python book/launch_copies.py --url                                  # print the wheel's address
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
from book_repository import repository_url  # noqa: E402  (the buttons' own resolution)

CELL_ID = "install-course-package"  # fixed, so that rebuilding a copy changes nothing

# What a reader of a copy meets in an assessed term (ASSESSED=1: the wheel folds the graded answers out,
# autograder/assessed.py), said before any cell runs, in the copy's language (book/zh/: Chinese)
TERM_NOTE = {
    "en": """\
# In an assessed term this package leaves out the functions the exercises ask you to write: a cell
# of this chapter that calls one stops with NotImplementedError, which names its exercise; the
# book's page shows what that cell prints.
""",
    "zh": """\
# 计分学期的课程包里没有练习要你自己写的函数：本章调用其中之一的单元会以 NotImplementedError 停下，
# 错误信息写明是哪个练习；书中的页面给出了这个单元的输出。
""",
}

INSTALL = """\
# Launched from the course book (Colab, Binder, a JupyterHub): install the course package from the
# book's site, the student wheel that carries the trained checkpoints (pip adds only those of its
# dependencies this environment lacks). Skipped where `encdec` is already installed.
import importlib.util
import subprocess
import sys

WHEEL = "{url}"
if importlib.util.find_spec("encdec") is None:
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", WHEEL], check=True)"""

# The same cell for a copy made where no repository is known: it names no address.
INSTALL_BY_HAND = """\
# Launched from the course book: this copy was made without the book's repository setting
# (repository.url in _config.yml), so it knows no site to install the course package from.
# Install the student wheel by hand (`make student-release` in the repository writes it to
# dist/student/), then run this cell again. Skipped where `encdec` is already installed.
import importlib.util

if importlib.util.find_spec("encdec") is None:
    raise ModuleNotFoundError("install the course package first: pip install <the student wheel {wheel}>")"""


def site_url(repository_url: str) -> str:
    """The GitHub Pages address of a repository (a user or organisation site for OWNER.github.io)."""
    m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)/?", repository_url)
    if not m:
        raise ValueError(f"repository.url {repository_url!r} is not https://github.com/OWNER/REPOSITORY")
    owner, repo = m.group(1).lower(), m.group(2)
    host = f"https://{owner}.github.io/"
    return host if repo.lower() == f"{owner}.github.io" else f"{host}{repo}/"


def wheel_name(root: Path = ROOT) -> str:
    """The student wheel's file name, from pyproject.toml."""
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return f"{project['name'].replace('-', '_')}-{project['version']}-py3-none-any.whl"


def wheel_url(root: Path = ROOT) -> str | None:
    """Where the published site serves the student wheel (None: no repository is known)."""
    repository = repository_url(root)
    return f"{site_url(repository)}student/{wheel_name(root)}" if repository else None


def install_source(url: str | None, root: Path = ROOT, lang: str = "en") -> str:
    return TERM_NOTE[lang] + (INSTALL.format(url=url) if url else INSTALL_BY_HAND.format(wheel=wheel_name(root)))


def add_install_cell(path: Path, url: str | None) -> None:
    """Put the install cell first in the notebook at ``path`` (replacing an older one)."""
    nb = nbformat.read(path, as_version=4)
    cell = nbformat.v4.new_code_cell(install_source(url, lang="zh" if path.parent.name == "zh" else "en"), id=CELL_ID)
    cell.metadata["tags"] = ["launch-setup"]
    # the build's own checks (cells tagged remove-cell: hidden from the page) are no part of a copy
    kept = [c for c in nb.cells if c.get("id") != CELL_ID and "remove-cell" not in c.metadata.get("tags", [])]
    nb.cells = [cell, *kept]
    nbformat.write(nb, path)


def main(argv: list[str]) -> None:
    if argv == ["--url"]:
        print(wheel_url() or "no repository is known: set repository.url in _config.yml")
        return
    url = wheel_url()
    for name in argv:
        add_install_cell(Path(name), url)


if __name__ == "__main__":
    main(sys.argv[1:])

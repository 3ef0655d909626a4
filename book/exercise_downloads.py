"""Write the chapters' exercise downloads: one zip per exercise and release language, built from the
student release (``exercises/<name>/``, ``exercises/zh/<name>/``), never from ``solutions/``.

A notebook alone cannot run its visible checks: they read ``reference/<check>.npz`` next to it, and
they need the course package. So each zip holds the folder as released (the notebook, its
``reference/`` and its ``nbgrader_config.py``, with which ``nbgrader validate`` reports a missing
test cell) and a README in the release's language that says how to install the package: the student
wheel from the published site's ``student/`` folder (the launch copies' address,
``book/launch_copies.py``), or by hand where no repository is known. The words come from the
message tables (``encdec.grading.messages``). Fixed timestamps: the same release gives the same bytes.

    python book/exercise_downloads.py [--out build/exercise_downloads]   # before jupyter-book (mk/book.mk)

Chapters link ``build/exercise_downloads/<name>.zip`` (and ``zh/<name>.zip``) with ``{download}``.
"""

from __future__ import annotations

import argparse
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "book"))
sys.path.insert(0, str(ROOT))
OUT = ROOT / "build" / "exercise_downloads"
STAMP = (1980, 1, 1, 0, 0, 0)  # zip's earliest date: reproducible archives


def releases(root: Path = ROOT) -> list[tuple[str, Path]]:
    """(language, released folder) of every exercise: ``exercises/<name>/`` and ``exercises/<lang>/<name>/``."""
    from encdec.grading import language

    out = []
    for lang in language.LANGUAGES:
        base = root / "exercises" if lang == language.DEFAULT else root / "exercises" / lang
        out += [(lang, d) for d in sorted(base.iterdir()) if (d / f"{d.name}.ipynb").is_file()]
    return out


def readme(name: str, lang: str, url: str | None, wheel: str) -> str:
    from encdec.grading import language

    with language.speaking(lang):
        where = (
            language.text("download_wheel_url", url=url, folder=url.rsplit("/", 1)[0] + "/")
            if url
            else language.text("download_wheel_by_hand", wheel=wheel)
        )
        return language.text("download_readme", name=name, wheel=url or wheel, where=where) + "\n"


def build(out: Path = OUT, root: Path = ROOT) -> list[Path]:
    """Write every exercise's zip under ``out`` (``zh/`` for the Chinese release); return the paths."""
    from launch_copies import wheel_name, wheel_url

    url, wheel = wheel_url(root), wheel_name(root)
    written = []
    for lang, folder in releases(root):
        name = folder.name
        path = out / ("" if folder.parent.name == "exercises" else lang) / f"{name}.zip"
        path.parent.mkdir(parents=True, exist_ok=True)
        files = sorted(
            p
            for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.name != ".ipynb_checkpoints"
        )
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.writestr(zipfile.ZipInfo(f"{name}/{p.relative_to(folder).as_posix()}", STAMP), p.read_bytes())
            z.writestr(zipfile.ZipInfo(f"{name}/README.md", STAMP), readme(name, lang, url, wheel))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    for path in build(args.out):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()

"""The student release in another language, generated from the same instructor sources.

    python -m autograder.release --lang zh [--out exercises/zh] [assignment ...]   # or: make exercises-zh

For each assignment, the English source ``solutions/<a>/<a>.ipynb`` with every markdown cell
replaced by its translation from ``solutions/<a>/<lang>.yml`` (cell id -> text; every markdown
cell must have one, and no other id may appear) and the notebook's metadata
``encdec.language = "<lang>"``; code, solution and test cells are the English ones, untouched,
so the grade ids, test cells and points are those of the course's gradebook. That source goes
into a temporary course folder, with the stored references of the visible checks (their
metadata says the language, so the student's own run words its feedback in it:
``encdec.grading.language``), and stock ``nbgrader generate_assignment`` releases it into
``<out>/<a>/`` with a scratch gradebook (the course's own is untouched). The grader reads the
language of a submission from the same metadata (``autograder.preprocessors.TrustedVerdict``).
Running it again gives the same files (``tests/test_exercises_zh.py``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from autograder import ROOT
from autograder import assignments as course
from encdec.grading import language, wire

SOLUTIONS = ROOT / "solutions"


def translations(assignment: str, lang: str, solutions: Path = SOLUTIONS) -> dict[str, str]:
    """The markdown translations of one assignment: cell id -> text."""
    table = yaml.safe_load((solutions / assignment / f"{lang}.yml").read_text(encoding="utf-8")) or {}
    return {str(k): str(v) for k, v in table.items()}


def translated_source(assignment: str, lang: str, solutions: Path = SOLUTIONS) -> dict:
    """The instructor notebook with its markdown cells in ``lang`` (every other cell untouched)."""
    nb = json.loads((solutions / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8"))
    table = translations(assignment, lang, solutions)
    ids = [c["id"] for c in nb["cells"] if c["cell_type"] == "markdown"]
    missing, extra = sorted(set(ids) - set(table)), sorted(set(table) - set(ids))
    if missing or extra:
        raise ValueError(
            f"solutions/{assignment}/{lang}.yml: markdown cells without a translation {missing}, "
            f"ids that are not markdown cells {extra}"
        )
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            text = table[cell["id"]]
            cell["source"] = text.splitlines(keepends=True)
    nb["metadata"].setdefault("encdec", {})["language"] = lang
    return nb


def _localized_reference(src: Path, dest: Path, lang: str) -> None:
    """A visible check's stored file, its metadata saying the language of the feedback."""
    meta, arrays = wire.load(src)
    wire.save(dest, {**meta, "language": lang}, arrays)


def folder(lang: str) -> Path:
    """Where the release in ``lang`` lives: ``exercises/`` (English, nbgrader's release folder), or
    ``exercises/<lang>/``."""
    if lang not in language.LANGUAGES:
        raise ValueError(f"no release language {lang!r} (expected one of {list(language.LANGUAGES)})")
    return ROOT / "exercises" if lang == language.DEFAULT else ROOT / "exercises" / lang


def release(lang: str, out: Path, names: list[str] | None = None) -> list[Path]:
    """Write ``out/<a>/`` for each assignment (all by default); return the notebooks written."""
    if lang not in language.LANGUAGES or lang == language.DEFAULT:
        raise ValueError(
            f"no release language {lang!r} (choose from {sorted(set(language.LANGUAGES) - {language.DEFAULT})})"
        )
    names = names or course.names()
    written = []
    with tempfile.TemporaryDirectory(prefix=f"encdec-release-{lang}-") as tmp:
        top = Path(tmp)
        for a in names:
            src = top / "source" / a
            (src / "reference").mkdir(parents=True)
            nb = translated_source(a, lang)
            (src / f"{a}.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            for ref in sorted((SOLUTIONS / a / "reference").glob("*.npz")):
                _localized_reference(ref, src / "reference" / ref.name, lang)
            shutil.copy(SOLUTIONS / a / "nbgrader_config.py", src / "nbgrader_config.py")  # validation in the folder
            cmd = [
                sys.executable,
                "-m",
                "nbgrader",
                "generate_assignment",
                a,
                "--force",
                f"--CourseDirectory.root={top}",
                "--CourseDirectory.source_directory=source",
                "--CourseDirectory.release_directory=release",
                f"--CourseDirectory.db_url=sqlite:///{top / 'gradebook.db'}",
            ]
            done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                raise RuntimeError(f"nbgrader generate_assignment {a} ({lang}) failed:\n{done.stdout}{done.stderr}")
            dest = out / a
            if dest.exists():
                shutil.rmtree(dest)
            shutil.copytree(top / "release" / a, dest)
            written.append(dest / f"{a}.ipynb")
    return written


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--lang", required=True, help="the release's language (a table in encdec.grading.language)")
    p.add_argument("--out", type=Path, help="release folder (default: exercises/<lang>)")
    p.add_argument("assignments", nargs="*", help="default: every assignment")
    args = p.parse_args(argv)
    for path in release(args.lang, args.out or folder(args.lang), args.assignments or None):
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

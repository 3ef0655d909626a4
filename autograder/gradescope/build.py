"""Build the Gradescope autograder archive of an assignment (`make gradescope`).

    python -m autograder.gradescope.build [ASSIGNMENT ...] [--lang zh] [--out dist/gradescope]

Each `<assignment>.zip` (which Gradescope unpacks into `/autograder/source/`) holds, at its
top, Gradescope's `setup.sh` (run once when Gradescope
builds the image: Python 3.11, bubblewrap, the pinned packages, this project installed) and
`run_autograder` (copied to `/autograder/`, run per submission: `autograder.gradescope.run`), `gradescope.json` naming
the assignment and the release's language, and the project files grading needs: the package, the grader, the course
configuration, the pins, the assignment's source notebook and visible references, and its
grading edition. Nothing of the course's grading state (gradebook, submissions, secret) and no
test fixture goes in.

One archive per release language: ``--lang zh`` (default out ``dist/gradescope/zh/``) is the
archive for the exercises released in Chinese (``exercises/zh/``, ``autograder/release.py``):
the same source, edition and grading, with that release's visible references (their metadata
says the language) where ``run`` looks for them. The feedback speaks the submission's language
(its notebook's ``encdec.language``, ``autograder.preprocessors``), the score is the same in both.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

from autograder import ROOT, edition, release
from autograder.state import grading_state
from encdec.grading import language

HERE = Path(__file__).resolve().parent
TOP_FILES = ["nbgrader_config.py", "pyproject.toml", "requirements.txt", "constraints.txt", "README.md"]
TREES = ["encdec", "autograder"]
# test material and the trained checkpoints (grading loads none): never in an archive; nor the
# grading state, wherever $ENCDEC_GRADING_DIR puts it
SKIP_PARTS = {"__pycache__", "fixtures", "hostile", "checkpoints"}
STATE = grading_state(ROOT).root.resolve()


def _files(top: Path):
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(ROOT)
        if path.is_file() and not SKIP_PARTS & set(rel.parts) and not path.resolve().is_relative_to(STATE):
            yield path, rel


def released(assignment: str, lang: str = language.DEFAULT) -> Path:
    """The release of ``assignment`` in ``lang`` (``autograder.release.folder``)."""
    try:
        return release.folder(lang) / assignment
    except ValueError as err:
        raise SystemExit(str(err)) from err


def archive(assignment: str, out: Path, lang: str = language.DEFAULT) -> Path:
    """Write ``out/<assignment>.zip`` for the release in ``lang``; return its path."""
    if assignment not in edition.assignments():
        raise SystemExit(f"no assignment {assignment!r} in solutions/ (expected one of {edition.assignments()})")
    references = released(assignment, lang) / "reference"
    if not references.is_dir():
        raise SystemExit(f"{references.relative_to(ROOT)} is missing: run `make exercises` first")
    ed = edition.ensure(assignment, edition.DEFAULT_OUT)
    out.mkdir(parents=True, exist_ok=True)
    dest = out / f"{assignment}.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for name in ("setup.sh", "run_autograder"):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # executable, as Gradescope runs them
            z.writestr(info, (HERE / name).read_text())
        z.writestr("gradescope.json", json.dumps({"assignment": assignment, "language": lang}))
        for name in TOP_FILES:
            z.write(ROOT / name, f"{name}")
        for tree in TREES:
            for path, rel in _files(ROOT / tree):
                z.write(path, f"{rel}")
        for path, rel in _files(ROOT / "solutions" / assignment):
            z.write(path, f"{rel}")
        for path, _ in _files(references):  # where `run` finds them, whatever the release's folder
            z.write(path, f"exercises/{assignment}/reference/{path.name}")
        for path in sorted(ed.parent.rglob("*")):  # the edition as the sandbox will look for it
            if path.is_file():
                z.write(path, f"{path.relative_to(ROOT)}")
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autograder.gradescope.build", description=__doc__.splitlines()[0])
    p.add_argument("assignments", nargs="*", help="default: every assignment in solutions/")
    p.add_argument(
        "--lang",
        default=language.DEFAULT,
        choices=language.LANGUAGES,
        help="the release the students work from (default: English, exercises/)",
    )
    p.add_argument("--out", type=Path, help="default: dist/gradescope/, or dist/gradescope/<lang>/")
    args = p.parse_args(argv)
    out = args.out or ROOT / "dist" / "gradescope" / ("" if args.lang == language.DEFAULT else args.lang)
    for a in args.assignments or edition.assignments():
        path = archive(a, out, args.lang)
        print(f"{a}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

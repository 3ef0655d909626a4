"""Build the Gradescope autograder archive of an assignment (`make gradescope`).

    python -m autograder.gradescope.build [ASSIGNMENT ...] [--out dist/gradescope]

Each `<assignment>.zip` (which Gradescope unpacks into `/autograder/source/`) holds, at its
top, Gradescope's `setup.sh` (run once when Gradescope
builds the image: Python 3.11, bubblewrap, the pinned packages, this project installed) and
`run_autograder` (copied to `/autograder/`, run per submission: `autograder.gradescope.run`), `gradescope.json` naming
the assignment, and the project files grading needs: the package, the grader, the course
configuration, the pins, the assignment's source notebook and visible references, and its
grading edition. Nothing of the course's grading state (gradebook, submissions, secret) and no
test fixture goes in.
"""
from __future__ import annotations

import argparse
import json
import sys
import zipfile
from pathlib import Path

from autograder import edition
from autograder.state import grading_state

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
TOP_FILES = ["nbgrader_config.py", "pyproject.toml", "requirements.txt", "constraints.txt", "README.md"]
TREES = ["encdec", "autograder"]
# test material: never in an archive; nor the grading state, wherever $ENCDEC_GRADING_DIR puts it
SKIP_PARTS = {"__pycache__", "fixtures", "hostile"}
STATE = grading_state(ROOT).root.resolve()


def _files(top: Path):
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(ROOT)
        if path.is_file() and not SKIP_PARTS & set(rel.parts) and not path.resolve().is_relative_to(STATE):
            yield path, rel


def archive(assignment: str, out: Path) -> Path:
    """Write ``out/<assignment>.zip``; return its path."""
    if assignment not in edition.assignments():
        raise SystemExit(f"no assignment {assignment!r} in solutions/ (expected one of {edition.assignments()})")
    ed = edition.ensure(assignment, edition.DEFAULT_OUT)
    out.mkdir(parents=True, exist_ok=True)
    dest = out / f"{assignment}.zip"
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
        for name in ("setup.sh", "run_autograder"):
            info = zipfile.ZipInfo(name)
            info.external_attr = 0o100755 << 16  # executable, as Gradescope runs them
            z.writestr(info, (HERE / name).read_text())
        z.writestr("gradescope.json", json.dumps({"assignment": assignment}))
        for name in TOP_FILES:
            z.write(ROOT / name, f"{name}")
        for tree in TREES:
            for path, rel in _files(ROOT / tree):
                z.write(path, f"{rel}")
        for tree in (ROOT / "solutions" / assignment, ROOT / "exercises" / assignment / "reference"):
            for path, rel in _files(tree):
                z.write(path, f"{rel}")
        for path in sorted(ed.parent.rglob("*")):  # the edition as the sandbox will look for it
            if path.is_file():
                z.write(path, f"{path.relative_to(ROOT)}")
    return dest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autograder.gradescope.build", description=__doc__.splitlines()[0])
    p.add_argument("assignments", nargs="*", help="default: every assignment in solutions/")
    p.add_argument("--out", type=Path, default=ROOT / "dist" / "gradescope")
    args = p.parse_args(argv)
    for a in args.assignments or edition.assignments():
        path = archive(a, args.out)
        print(f"{a}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

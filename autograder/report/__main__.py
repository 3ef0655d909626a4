"""Command line of the class report: ``python -m autograder.report ASSIGNMENT... [--out DIR]``.

The folders default to the course configuration (``nbgrader_config.py`` at the repository root:
its source, autograded and submitted folders), so after ``nbgrader autograde`` (or the batch
driver) the assignment names are all it needs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder import ROOT
from autograder.state import grading_state

from . import write_report


def course_folders() -> dict[str, Path]:
    """nbgrader's source, autograded and submitted folders, as the course configuration sets them."""
    from traitlets.config.loader import PyFileConfigLoader

    config = PyFileConfigLoader("nbgrader_config.py", path=str(ROOT)).load_config()
    course = config.CourseDirectory
    root = Path(course.get("root", ROOT))
    return {
        name: root / str(course.get(f"{name}_directory", default))
        for name, default in (("source", "source"), ("autograded", "autograded"), ("submitted", "submitted"))
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m autograder.report", description=__doc__.splitlines()[0])
    p.add_argument("assignments", nargs="+", help="assignment names, e.g. decoder_block target_slicing kv_cache")
    p.add_argument(
        "--out",
        type=Path,
        default=grading_state(ROOT).export / "misconceptions",
        help="folder for misconceptions.csv and misconceptions.html (default: %(default)s)",
    )
    p.add_argument("--source", type=Path, help="nbgrader's source folder (default: the course configuration's)")
    p.add_argument("--autograded", type=Path, help="nbgrader's autograded folder (default: the course configuration's)")
    p.add_argument(
        "--submitted",
        type=Path,
        help="nbgrader's submitted folder, to list submissions autograde "
        "could not grade (default: the course configuration's)",
    )
    p.add_argument("--lang", choices=["en", "zh"], default="en", help="the language of the keys' meanings")
    args = p.parse_args(argv)
    folders = course_folders() if None in (args.source, args.autograded, args.submitted) else {}
    source = args.source or folders["source"]
    autograded = args.autograded or folders["autograded"]
    submitted = args.submitted or folders["submitted"]
    if not autograded.is_dir():
        p.error(
            f"expected the autograded notebooks in {autograded}/ (run `nbgrader autograde` first, "
            "or pass --autograded DIR)"
        )
    try:
        collected, csv_path, html_path = write_report(
            args.assignments, args.out, source, autograded, submitted, args.lang
        )
    except FileNotFoundError as err:
        p.error(str(err))
    for a in collected:
        print(
            f"{a.name}: {len(a.students)} student(s), {len(a.items)} graded item(s), "
            f"{len(a.problems)} notebook(s) could not be read"
        )
    print(f"wrote {html_path} and {csv_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate the stored files of the visible checks, for the student's own run.

    python autograder/make_references.py [--out ROOT]

writes ``solutions/<assignment>/reference/<check_id>.npz`` (nbgrader copies them into the
student release ``exercises/<assignment>/reference/``) and the folder's ``nbgrader_config.py`` (with
it, ``nbgrader validate`` run there reports a missing test cell: ``encdec/grading/validation.py``): the check's fixed inputs, the expected
outputs computed with the package, the outputs of known mistakes (so the student's own run can
name them) and the exercise's targets (so it can say when a solution calls the package's own
version). Graded runs never use these files: their inputs are drawn by the grader. Written with
fixed zip timestamps, so running it again gives byte-identical files
(``tests/test_grading_references.py`` proves it).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from autograder import ROOT


def make_references(root: Path) -> list[Path]:
    """Write every visible check's stored file under ``root/solutions``; return the paths."""
    import torch

    from autograder import edition, judge
    from encdec.grading import validation, wire

    torch.set_num_threads(1)  # one thread: the same float sums on every machine we run on
    written = []
    for assignment in sorted({check_id.split(".", 1)[0] for check_id in judge.checks()}):
        # the exercise folder's nbgrader config: validation there reports a missing test cell
        config = root / "solutions" / assignment / "nbgrader_config.py"
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(validation.FOLDER_CONFIG)
        written.append(config)
    for check_id, check in sorted(judge.checks().items()):
        if check.hidden:
            continue
        assignment = check_id.split(".", 1)[0]
        path = root / "solutions" / assignment / "reference" / f"{check_id}.npz"
        meta, arrays = judge.reference_file(check_id, edition.targets(assignment))
        wire.save(path, meta, arrays)
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="root under which solutions/ is written")
    args = parser.parse_args(argv)
    for path in make_references(args.out):
        print(path.relative_to(args.out))


if __name__ == "__main__":
    sys.exit(main())

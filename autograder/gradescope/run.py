"""What Gradescope's `run_autograder` runs: grade the one submitted notebook, write results.json.

    python -m autograder.gradescope.run [--root /autograder]

``root`` is Gradescope's folder: `source/` (the archive: this project, `gradescope.json` naming
the assignment), `submission/` (what the student uploaded), `results/` (where `results.json`
goes). Grading is stock `nbgrader autograde` run from `source/` with the course configuration,
every nbgrader folder and the gradebook in a temporary folder: the sandbox, the grading edition
and the verdict outside the kernel are those of the instructor's batch. Whatever goes wrong,
`results.json` is written (0 points and what was expected), never a traceback alone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from encdec.grading import language

from . import results

STUDENT = "submission"


def find_notebook(submission: Path, assignment: str) -> Path:
    """The submitted notebook: `<assignment>.ipynb`, or the only notebook uploaded."""
    named = [p for p in submission.rglob(f"{assignment}.ipynb") if ".ipynb_checkpoints" not in p.parts]
    found = named or [p for p in submission.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts]
    if len(found) != 1:
        raise LookupError(
            language.text(
                "notebook_not_found",
                name=f"{assignment}.ipynb",
                n=len(found),
                found=sorted(p.name for p in found) or "-",
            )
        )
    return found[0]


def grade(source: Path, notebook: Path, assignment: str, work: Path) -> dict:
    """Autograde ``notebook`` with the course configuration; its results.json as a dict."""
    from nbgrader.api import Gradebook, MissingEntry

    from autograder.grade_fixtures import course_args
    from autograder.integrity import flagged_submissions
    from autograder.state import GradingState

    state = GradingState(work)  # the layout course_args gives nbgrader
    folder = state.submitted / STUDENT / assignment
    folder.mkdir(parents=True)
    shutil.copy(notebook, folder / f"{assignment}.ipynb")
    reference = source / "exercises" / assignment / "reference"
    if reference.is_dir():  # what `nbgrader collect` brings along: the release's visible references
        shutil.copytree(reference, folder / "reference")
    log = work / "nbgrader.log"
    for step in (["generate_assignment", assignment, "--force"], ["autograde", assignment]):
        with open(log, "a") as out:
            subprocess.run(
                [sys.executable, "-m", "nbgrader", *step, *course_args(work)],
                cwd=source,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=3600,
            )
    url = state.db_url
    with Gradebook(url) as gb:
        try:
            nb = gb.find_submission_notebook(assignment, assignment, STUDENT)
        except MissingEntry:
            return results.failed(language.text("not_a_notebook", log=_tail(log)))
        by_name = {g.name: (g.score, g.max_score) for g in nb.grades}
    order = _grade_ids(source / "solutions" / assignment / f"{assignment}.ipynb")
    grades = [(n, *by_name[n]) for n in order if n in by_name]
    note = ""
    if any(f["student"] == STUDENT for f in flagged_submissions(url)):
        note = language.text("held_for_review")
    hidden = results.hidden_items(source / "solutions" / assignment / f"{assignment}.ipynb")
    outputs = results.cell_outputs(state.autograded / STUDENT / assignment / f"{assignment}.ipynb")
    return results.build(grades, outputs, hidden, note)


def _grade_ids(source_notebook: Path) -> list[str]:
    nb = json.loads(source_notebook.read_text())
    return [
        c["metadata"]["nbgrader"]["grade_id"]
        for c in nb["cells"]
        if c.get("metadata", {}).get("nbgrader", {}).get("grade")
    ]


def _tail(log: Path, lines: int = 5) -> str:
    text = log.read_text(errors="replace").splitlines() if log.is_file() else []
    errors = [line for line in text if "ERROR" in line or "Error" in line]
    return "\n".join(errors[-lines:])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=Path("/autograder"), help="Gradescope's folder")
    args = p.parse_args(argv)
    source, out = args.root / "source", args.root / "results" / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    config = json.loads((source / "gradescope.json").read_text())
    assignment = config["assignment"]
    work = Path(tempfile.mkdtemp(prefix="encdec-gradescope-"))
    # the wrapper's own lines speak the archive's release language (the verdicts: the notebook's own)
    with language.speaking(config.get("language")):
        try:
            notebook = find_notebook(args.root / "submission", assignment)
            data = grade(source, notebook, assignment, work)
        except LookupError as err:
            data = results.failed(str(err))
        except Exception as err:
            data = results.failed(language.text("grading_failed", error=f"{type(err).__name__}: {err}"))
        finally:
            shutil.rmtree(work, ignore_errors=True)
    results.check_schema(data)
    out.write_text(json.dumps(data, indent=1))
    print(f"{assignment}: {data['score']:g} points, {len(data['tests'])} tests -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

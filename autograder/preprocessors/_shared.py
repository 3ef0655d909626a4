"""What the course's nbgrader preprocessors share: where a kernel works, which checks a test cell
calls, the keys they keep in nbgrader's resources, and a submission's graded inputs (drawn once,
or read from the records drawn ahead, kept in the grader's memory)."""

from __future__ import annotations

from pathlib import Path

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from traitlets import Unicode
from traitlets.config import LoggingConfigurable

from autograder import assignments
from autograder.sandbox import safefs
from autograder.state import grading_state
from encdec.grading import wire

INPUTS_KEY, OUTPUTS_KEY = "encdec_inputs", "encdec_outputs"  # in resources["nbgrader"]
VERDICT_KEY = "encdec_verdict"  # in a graded cell's metadata: what each check concluded (labels)


class TrustedGrading(LoggingConfigurable):
    """The grader's own settings (``c.TrustedGrading.*`` in ``nbgrader_config.py``): where the course
    secret lives, outside the sandbox, never in the repository."""

    secret_file = Unicode(
        str(grading_state().secret),
        help="File holding the course secret that seeds the graded runs' inputs (made on first use). "
        "Keep it to regrade reproducibly; it must not be readable by students.",
    ).tag(config=True)


def recorded_verdicts(cell) -> list[dict] | None:
    """What ``TrustedVerdict`` recorded in a graded cell's metadata (``VERDICT_KEY``: check, ok,
    label, credit, missed per check), or None where the cell holds no well-formed record (a notebook
    graded before verdicts were recorded)."""
    recorded = cell.get("metadata", {}).get(VERDICT_KEY)
    if isinstance(recorded, list) and recorded and all(isinstance(v, dict) for v in recorded):
        return recorded
    return None


def workdir(resources: dict) -> Path:
    path = resources.get("metadata", {}).get("path") or "."
    return Path(path)


def check_ids(cell: NotebookNode, resources: dict) -> list[str]:
    """The check a graded test cell runs, from the release's record (``assignments.checks``) by the
    cell's grade_id (nbgrader's, restored from the gradebook): never read from the cell's text."""
    if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
        return []
    check = assignments.checks(str(resources.get("nbgrader", {}).get("assignment", ""))).get(
        cell.metadata.nbgrader.get("grade_id")
    )
    return [check] if check else []


def graded_inputs(preprocessor, resources: dict, check_id: str) -> dict:
    """The inputs of ``check_id`` for this submission: drawn once, kept in the grader's memory."""
    from autograder import judge
    from autograder.judge import ahead

    cache = resources.setdefault("nbgrader", {}).setdefault(INPUTS_KEY, {})
    if check_id not in cache:
        nbg = resources["nbgrader"]
        secret_file = TrustedGrading(parent=preprocessor).secret_file
        secret = judge.load_secret(secret_file)
        seed = judge.check_seed(secret, str(nbg.get("student", "")), str(nbg.get("assignment", "")), check_id)
        cache[check_id] = judge.graded_inputs(check_id, seed, drawn_ahead=ahead.folder_of(secret_file))
    return cache[check_id]


def deliver(workdir: Path, check_id: str, data: bytes) -> None:
    """Write ``.grading-in/<check_id>.npz`` into the kernel's folder without following links."""
    safefs.write_new(workdir, wire.INPUTS_DIR, f"{check_id}.npz", data)


def withdraw(workdir: Path, check_id: str) -> bytes | None:
    """After the cell: take the kernel's saved outputs (bounded, no links) and remove the inputs."""
    try:
        saved = safefs.read_bounded(workdir, wire.OUTPUTS_DIR, f"{check_id}.npz", wire.MAX_BYTES)
    except (OSError, ValueError):
        saved = None
    safefs.unlink_in(workdir, wire.INPUTS_DIR, f"{check_id}.npz")
    return saved

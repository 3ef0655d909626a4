"""nbgrader preprocessors that decide the verdict outside the student's kernel.

Registered by the root ``nbgrader_config.py`` in ``Autograde.autograde_preprocessors``:

- ``TrustedSeed`` (before execution): clears ``.grading/`` in the notebook's folder and writes a
  fresh seed to ``.grading/seed.json``; the hidden checks draw their inputs from it. The seed is
  also kept in the grader's memory, so a kernel that rewrites the file only grades itself on
  inputs the grader does not use.
- ``ResilientExecute`` (nbgrader's ``Execute``): a kernel that dies (``os._exit``, killed by a
  limit) ends the run of that notebook only; the cells it did not reach score 0.
- ``TrustedVerdict`` (after execution, before ``SaveAutoGrades``): for every graded test cell
  that calls ``checks.run("<id>", ...)`` it judges ``.grading/<id>.npz`` with
  ``encdec.grading.checks.verify`` (reference recomputed here, files read with
  ``allow_pickle=False``) and replaces the cell's outputs: a clean "passed" line, or an error
  carrying the diagnosis. Whatever the kernel printed or raised there (patched asserts, fake
  output, tracebacks quoting hidden tests) is discarded. A test cell that nbgrader had to put
  back because the submission deleted it scores 0.
- ``SafeOverwriteCells`` (nbgrader's ``OverwriteCells``, in the sanitizing step): puts deleted
  test cells back even when the cell before them was deleted too (nbgrader's own version stops
  the notebook with a KeyError then).
- ``HideHiddenTests`` (in ``GenerateFeedback``): the feedback HTML shows a placeholder instead
  of the hidden test code.
"""

from __future__ import annotations

import json
import re
import secrets
import shutil
from pathlib import Path

from nbclient.exceptions import DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import Execute, NbGraderPreprocessor, OverwriteCells

CHECK_CALL = re.compile(r"""checks\.run\(\s*["']([\w.]+)["']""")
DELETED_MARK = "was missing from the submission"  # nbgrader's OverwriteCells.missing_cell_notification
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
SEED_KEY = "encdec_trusted_seed"


def _workdir(resources: dict) -> Path:
    path = resources.get("metadata", {}).get("path") or "."
    return Path(path)


class TrustedSeed(NbGraderPreprocessor):
    """Before execution: an empty ``.grading/`` holding a fresh seed for the hidden checks."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        from encdec.grading.checks import GRADING_DIR, SEED_FILE

        d = _workdir(resources) / GRADING_DIR
        if d.is_symlink() or d.is_file():
            d.unlink()
        elif d.exists():
            shutil.rmtree(d)
        d.mkdir()
        seed = secrets.randbelow(2**31)
        (d / SEED_FILE).write_text(json.dumps({"seed": seed}))
        resources.setdefault("nbgrader", {})[SEED_KEY] = seed
        return nb, resources


class ResilientExecute(Execute):
    """nbgrader's Execute, except that a dead kernel ends this notebook's run, not the batch."""

    def preprocess(self, nb: NotebookNode, resources: dict, km=None):
        try:
            return super().preprocess(nb, resources, km=km)
        except DeadKernelError as exc:
            self.log.warning("The kernel died while running %s (%s); the cells it did not reach score 0.",
                             resources.get("nbgrader", {}).get("notebook", "?"), exc)
            for cell in nb.cells:
                if cell.cell_type == "code" and cell.get("execution_count") is None and utils.is_grade(cell):
                    cell.outputs = [_error("DeadKernelError", "The kernel died before this cell ran.")]
            return nb, resources


def _error(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message.splitlines()[0] if message else "",
                        traceback=[f"{ename}: {line}" if i == 0 else line for i, line in enumerate(message.splitlines())])


def _stream(text: str) -> NotebookNode:
    return NotebookNode(output_type="stream", name="stdout", text=text)


class TrustedVerdict(NbGraderPreprocessor):
    """After execution: judge every graded check from its saved outputs, in the grader's process."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        seed = resources.get("nbgrader", {}).get(SEED_KEY)
        if seed is None:
            raise RuntimeError("TrustedVerdict needs TrustedSeed to run before execution (see nbgrader_config.py)")
        from encdec.grading.checks import CHECKS, verify

        workdir = _workdir(resources)
        for cell in nb.cells:
            if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
                continue
            ids = CHECK_CALL.findall(cell.source)
            if not ids:
                continue  # a test cell without checks keeps nbgrader's own verdict
            if DELETED_MARK in cell.source:
                cell.outputs = [_error("GradingFailure", "This test cell was deleted from the submission, so it scores 0.")]
                continue
            messages, ok = [], True
            for check_id in ids:
                if check_id not in CHECKS:
                    ok, msg = False, f"{check_id}: unknown check"
                else:
                    result = verify(check_id, workdir, seed)
                    ok, msg = ok and result.ok, result.message
                messages.append(msg)
            if ok:
                cell.outputs = [_stream("".join(f"passed (checked by the grader): {m}\n" for m in messages))]
            else:
                cell.outputs = [_error("AssertionError", "\n".join(messages))]
            self.log.info("Trusted verdict for %s: %s", cell.metadata["nbgrader"]["grade_id"], "pass" if ok else "fail")
        return nb, resources


class HideHiddenTests(NbGraderPreprocessor):
    """For feedback: replace the code between the hidden-test markers with a placeholder."""

    def preprocess_cell(self, cell: NotebookNode, resources: dict, index: int):
        if cell.cell_type == "code" and HIDDEN_BEGIN in cell.source:
            kept, hiding = [], False
            for line in cell.source.splitlines():
                if HIDDEN_BEGIN in line:
                    hiding = True
                    kept.append(line[: line.index(HIDDEN_BEGIN)] + "# (hidden test: its code is not shown)")
                elif HIDDEN_END in line:
                    hiding = False
                elif not hiding:
                    kept.append(line)
            cell.source = "\n".join(kept)
        return cell, resources


class SafeOverwriteCells(OverwriteCells):
    """OverwriteCells whose re-added grade cells go after the nearest earlier cell still present."""

    def add_missing_grade_cells(self, nb: NotebookNode, resources: dict):
        source_nb = self.gradebook.find_notebook(self.notebook_id, self.assignment_id)
        source_ids = [cell.name for cell in source_nb.source_cells]
        source_by_id = {cell.name: cell for cell in source_nb.source_cells}
        solution_ids = {cell.name for cell in source_nb.solution_cells}
        for grade_cell in source_nb.grade_cells:
            present = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
            if grade_cell.name in present:
                continue
            self.log.warning("Missing grade cell %s encountered, adding to notebook", grade_cell.name)
            new = self.missing_cell_transform(source_by_id[grade_cell.name], grade_cell.max_score,
                                              is_solution=grade_cell.name in solution_ids)
            earlier = source_ids[: source_ids.index(grade_cell.name)]
            at = max((present.index(g) + 1 for g in earlier if g in present), default=0)
            nb.cells.insert(at, new)
        return nb, resources

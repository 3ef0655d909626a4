"""``TrustedVerdict`` (after execution, before ``SaveAutoGrades``): every graded test cell that
calls ``checks.run("<id>", ...)`` is judged in the grader's process: the reference computed with
the real package (``autograder.judge``) on the same inputs, against the outputs read after that
cell. The cell's outputs are replaced: a clean "passed" line, an error carrying the diagnosis, or,
for an item with parts of which some passed, the parts missed and the score (nbgrader's partial
credit). Whatever the kernel printed or raised there is discarded. A test cell that nbgrader had
to put back because the submission deleted it scores 0. Each verdict's label goes to the cell's
metadata for the class report."""

from __future__ import annotations

from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import NbGraderPreprocessor

from encdec.grading import language
from encdec.grading.cells import undefined_in  # a check whose function's cell is missing says so by name
from encdec.grading.words import words

from ._shared import OUTPUTS_KEY, VERDICT_KEY, check_ids, graded_inputs

DELETED_MARK = "was missing from the submission"  # nbgrader's OverwriteCells.missing_cell_notification


def _error(ename: str, message: str) -> NotebookNode:
    return NotebookNode(
        output_type="error",
        ename=ename,
        evalue=message.splitlines()[0] if message else "",
        traceback=[f"{ename}: {line}" if i == 0 else line for i, line in enumerate(message.splitlines())],
    )


def _stream(text: str) -> NotebookNode:
    return NotebookNode(output_type="stream", name="stdout", text=text)


class TrustedVerdict(NbGraderPreprocessor):
    """After execution: judge every graded check in the grader's process, from its own inputs.

    A cell whose checks all passed shows a clean "passed" line; one that earned nothing shows an
    error (nbgrader: 0 points); one whose item has parts (``judge.Verdict.parts``) and earned some
    of them says which parts passed and which were missed, and ends with its score as the cell's
    result (nbgrader's partial credit). The labels of the verdicts go to the cell's metadata
    (``VERDICT_KEY``) for the class report (``autograder.report``)."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        from autograder import judge

        nbg = resources.setdefault("nbgrader", {})
        if OUTPUTS_KEY not in nbg:
            raise RuntimeError(
                "TrustedVerdict needs ClearGradingFiles and GradedExecute before it (see nbgrader_config.py)"
            )
        saved = nbg[OUTPUTS_KEY]
        lang = submission_language(nb)
        for cell in nb.cells:
            ids = check_ids(cell, resources)
            if not ids:
                continue  # a test cell without checks keeps nbgrader's own verdict
            if DELETED_MARK in cell.source:
                verdicts = [(i, judge.Verdict(False, words("deleted"), label="deleted")) for i in ids[:1]]
            else:
                verdicts = []
                for check_id in ids:
                    if judge.find(check_id) is None:
                        verdict = judge.Verdict(False, words("unknown_check", check_id=check_id), label="unknown_check")
                    else:
                        # decided from the values the kernel returned and what the grader measured
                        # outside it; the integrity scan is advice for review and changes no score
                        verdict = judge.verify(
                            check_id,
                            saved.get(check_id),
                            graded_inputs(self, resources, check_id),
                            undefined=undefined_in(nb, cell),
                        )
                    verdicts.append((check_id, verdict))
            with language.speaking(lang):  # judged once above; worded here, in the submission's language
                cell.outputs = verdict_outputs(cell, [v for _, v in verdicts])
            cell.metadata[VERDICT_KEY] = [
                {"check": i, "ok": v.ok, "label": v.label, "credit": v.credit, "missed": v.missed} for i, v in verdicts
            ]
            self.log.info(
                "Trusted verdict for %s: %s",
                cell.metadata["nbgrader"]["grade_id"],
                "pass" if all(v.ok for _, v in verdicts) else "fail",
            )
        return nb, resources


def verdict_outputs(cell: NotebookNode, verdicts: list) -> list[NotebookNode]:
    """A graded cell's outputs: passed, failed (an error: 0 points) or partly passed (its score)."""
    if all(v.ok for v in verdicts):
        return [_stream("".join(language.text("graded_passed", message=str(v.words)) + "\n" for v in verdicts))]
    credit = sum(v.credit for v in verdicts) / len(verdicts)
    message = "\n".join(str(v.words) for v in verdicts if not v.ok)  # in the language spoken here
    if credit <= 0:
        return [_error("AssertionError", message)]
    points = float(cell.metadata["nbgrader"]["points"])
    score = round(points * credit, 6)
    lines = [language.text("partly_passed", score=score, points=points)]
    for v in verdicts:
        lines += [language.text("part_passed", name=name) for name, ok in v.parts if ok] + [
            language.text("part_missed", name=name) for name in v.missed
        ]
    # nbgrader's partial credit: no error, and the cell's result is its score
    return [
        _stream("\n".join(lines) + "\n" + message + "\n"),
        NotebookNode(
            output_type="execute_result",
            execution_count=cell.get("execution_count"),
            metadata={},
            data={"text/plain": repr(score)},
        ),
    ]


def submission_language(nb: NotebookNode) -> str:
    """The language the feedback speaks: the notebook's ``encdec.language`` (set by a release in
    another language, ``autograder/release.py``), else English. It changes the wording only."""
    meta = nb.metadata.get("encdec") if isinstance(nb.metadata.get("encdec"), dict) else {}
    lang = meta.get("language")
    return lang if isinstance(lang, str) and lang in language.LANGUAGES else language.DEFAULT

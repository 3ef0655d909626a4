"""nbgrader preprocessors that decide the verdict outside the student's kernel.

Registered by the root ``nbgrader_config.py``:

- ``ClearGradingFiles`` (before execution): removes ``.grading/`` and ``.grading-in/`` from the
  autograded copy, so nothing a submission carried in is mistaken for the grader's files.
- ``GradedExecute`` (the sandboxed execution step): just before a graded test cell runs, draws
  the inputs of the checks it calls, from a seed that only the grader can compute (an HMAC of
  the student, the assignment and the check under the course secret, ``judge.seeds``), and
  writes them to ``.grading-in/<check_id>.npz`` in the kernel's folder (its scratch copy,
  ``SandboxKernelManager.kernel_dir``, never nbgrader's folder); right after the cell, it reads
  the outputs the kernel saved (``.grading/<check_id>.npz``) into the grader's memory and removes
  the inputs, never following a link the kernel planted.
  So the kernel cannot know the inputs before its code runs on them, and nothing it does later
  changes what it answered.
- ``TrustedVerdict`` (after execution, before ``SaveAutoGrades``): for every graded test cell
  that calls ``checks.run("<id>", ...)`` it computes the reference with the real package
  (``autograder.judge``) on the same inputs, judges the outputs read after that cell, and
  replaces the cell's outputs: a clean "passed" line, an error carrying the diagnosis, or, for
  an item with parts of which some passed, the parts missed and the score (nbgrader's partial
  credit). Whatever the kernel printed or raised there (patched asserts, fake output) is
  discarded. A test cell that nbgrader had to put back because the submission deleted it scores
  0. Each verdict's label goes to the cell's metadata for the class report.
- ``SafeOverwriteCells`` (nbgrader's ``OverwriteCells``, in the sanitizing step): puts deleted
  test cells back even when the cell before them was deleted too (nbgrader's own version stops
  the notebook with a KeyError then).
- ``SanitizeOutputs`` (before the grades are saved, and again in ``GenerateFeedback``): no
  script, event handler or ``javascript:`` link from a student's cell reaches the formgrader or
  the feedback HTML.
- ``HideHiddenTests`` (in ``GenerateFeedback``): the feedback HTML shows a placeholder instead
  of the hidden test code.
"""

from __future__ import annotations

import os
import re
import secrets
import stat
from pathlib import Path

from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from bleach import ALLOWED_TAGS
from nbconvert.preprocessors.sanitize import SanitizeHTML
from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells
from traitlets import Bool, Unicode, default
from traitlets.config import LoggingConfigurable

from autograder.integrity import scan_notebook
from autograder.sandbox import safefs
from autograder.sandbox.execute import SandboxedExecute
from autograder.state import grading_state
from encdec.grading import language, wire

CHECK_CALL = re.compile(r"""checks\.run\(\s*["']([\w.]+)["']""")
DELETED_MARK = "was missing from the submission"  # nbgrader's OverwriteCells.missing_cell_notification
HIDDEN_BEGIN, HIDDEN_END = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
INPUTS_KEY, OUTPUTS_KEY = "encdec_inputs", "encdec_outputs"  # in resources["nbgrader"]
VERDICT_KEY = "encdec_verdict"  # in a graded cell's metadata: what each check concluded (labels)


class TrustedGrading(LoggingConfigurable):
    """Where the course secret lives: outside the sandbox, never in the repository."""

    secret_file = Unicode(
        str(grading_state().secret),
        help="File holding the course secret that seeds the graded runs' inputs (made on first use). "
             "Keep it to regrade reproducibly; it must not be readable by students.",
    ).tag(config=True)


def _workdir(resources: dict) -> Path:
    path = resources.get("metadata", {}).get("path") or "."
    return Path(path)


def _check_ids(cell: NotebookNode) -> list[str]:
    if cell.cell_type != "code" or not utils.is_grade(cell) or utils.is_solution(cell):
        return []
    return CHECK_CALL.findall(cell.source)


class ClearGradingFiles(NbGraderPreprocessor):
    """Before execution: no ``.grading/`` or ``.grading-in/`` left from the submission."""

    def preprocess(self, nb: NotebookNode, resources: dict):
        for name in (wire.OUTPUTS_DIR, wire.INPUTS_DIR):  # rm -rf, whatever the submission put there
            safefs.remove_tree(_workdir(resources) / name)
        resources.setdefault("nbgrader", {})[INPUTS_KEY] = {}
        resources["nbgrader"][OUTPUTS_KEY] = {}
        return nb, resources


def _open_dir(parent_fd: int, name: str, create: bool) -> int:
    """A folder inside ``parent_fd``, never through a symbolic link the kernel planted."""
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)


def deliver(workdir: Path, check_id: str, data: bytes) -> None:
    """Write ``.grading-in/<check_id>.npz`` into the kernel's folder without following links."""
    top = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        d = _open_dir(top, wire.INPUTS_DIR, create=True)
        try:
            name = f"{check_id}.npz"
            try:
                os.unlink(name, dir_fd=d)
            except FileNotFoundError:
                pass
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=d)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        finally:
            os.close(d)
    finally:
        os.close(top)


def withdraw(workdir: Path, check_id: str) -> bytes | None:
    """After the cell: take the kernel's saved outputs (bounded, no links) and remove the inputs."""
    saved = None
    try:
        top = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            d = _open_dir(top, wire.OUTPUTS_DIR, create=False)
            try:
                saved = _read_bounded(d, f"{check_id}.npz")
            finally:
                os.close(d)
        finally:
            os.close(top)
    except (OSError, ValueError):
        pass
    try:
        top = os.open(workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            d = _open_dir(top, wire.INPUTS_DIR, create=False)
            try:
                os.unlink(f"{check_id}.npz", dir_fd=d)
            finally:
                os.close(d)
        finally:
            os.close(top)
    except OSError:
        pass
    return saved


def _read_bounded(dir_fd: int, name: str) -> bytes:
    """A regular file of the folder ``dir_fd``, at most ``wire.MAX_BYTES`` (links and FIFOs fail)."""
    fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError(f"{name} is not a regular file")
        data = f.read(wire.MAX_BYTES + 1)
    if len(data) > wire.MAX_BYTES:
        raise ValueError(f"{name} is larger than {wire.MAX_BYTES} bytes, more than a check writes")
    return data


def graded_inputs(preprocessor, resources: dict, check_id: str) -> dict:
    """The inputs of ``check_id`` for this submission: drawn once, kept in the grader's memory."""
    from autograder import judge

    cache = resources.setdefault("nbgrader", {}).setdefault(INPUTS_KEY, {})
    if check_id not in cache:
        nbg = resources["nbgrader"]
        secret = judge.load_secret(TrustedGrading(parent=preprocessor).secret_file)
        seed = judge.check_seed(secret, str(nbg.get("student", "")), str(nbg.get("assignment", "")), check_id)
        cache[check_id] = judge.graded_inputs(check_id, seed)
    return cache[check_id]


class GradedExecute(SandboxedExecute):
    """The sandboxed execution step, handing each graded test cell its inputs just in time."""

    def preprocess_cell(self, cell, resources, index):
        from autograder import judge

        ids = [i for i in _check_ids(cell) if i in judge.CHECKS]
        workdir = self._kernel_folder(resources)
        # A hidden check runs under a one-time name: neither its id nor its code enters the kernel.
        names = {i: f"check_{secrets.token_hex(8)}" if judge.CHECKS[i].hidden else i for i in ids}
        for check_id in ids:
            try:
                if workdir is None:
                    raise FileNotFoundError("no kernel is running")
                deliver(workdir, names[check_id], judge.wire_bytes(check_id, graded_inputs(self, resources, check_id)))
            except OSError as err:  # the kernel replaced the folder by something else: the check scores 0
                self.log.warning("could not hand %s its inputs (%s); it scores 0", check_id, err)
        source = cell.source
        if any(names[i] != i for i in ids):
            cell.source = _as_run(source, names)
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        finally:
            cell.source = source
        outputs = resources.setdefault("nbgrader", {}).setdefault(OUTPUTS_KEY, {})
        for check_id in ids:
            outputs[check_id] = withdraw(workdir, names[check_id]) if workdir is not None else None
        return cell, resources

    def _kernel_folder(self, resources: dict) -> Path | None:
        """Where the kernel works, as the grader reaches it: the sandbox's scratch folder (None
        once its kernel is gone), not nbgrader's folder, which the kernel never sees."""
        km = getattr(self, "km", None)
        if km is not None and hasattr(km, "kernel_dir"):
            return km.kernel_dir
        return _workdir(resources)


def _as_run(source: str, names: dict[str, str]) -> str:
    """A test cell's source as the kernel runs it: comments dropped, hidden ids renamed."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith("#")]
    for check_id, name in names.items():
        lines = [re.sub(rf"""(["']){re.escape(check_id)}\1""", f'"{name}"', line) for line in lines]
    return "\n".join(lines)


def _error(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message.splitlines()[0] if message else "",
                        traceback=[f"{ename}: {line}" if i == 0 else line for i, line in enumerate(message.splitlines())])


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
            raise RuntimeError("TrustedVerdict needs ClearGradingFiles and GradedExecute before it (see nbgrader_config.py)")
        saved = nbg[OUTPUTS_KEY]
        lang = submission_language(nb)
        flags = None  # the integrity scan, run once if an item measured in the kernel needs it
        for cell in nb.cells:
            ids = _check_ids(cell)
            if not ids:
                continue  # a test cell without checks keeps nbgrader's own verdict
            if DELETED_MARK in cell.source:
                with language.speaking(lang):
                    deleted = language.text("deleted")
                verdicts = [(i, judge.Verdict(False, deleted, label="deleted")) for i in ids[:1]]
            else:
                verdicts = []
                for check_id in ids:
                    if check_id not in judge.CHECKS:
                        with language.speaking(lang):
                            unknown = language.text("unknown_check", check_id=check_id)
                        verdict = judge.Verdict(False, unknown, label="unknown_check")
                    else:
                        verdict = judge.verify(check_id, saved.get(check_id), graded_inputs(self, resources, check_id), lang)
                        if verdict.credit > 0 and judge.CHECKS[check_id].measured_in_kernel:
                            flags = scan_notebook(nb) if flags is None else flags
                            if flags:
                                verdict = untrusted(check_id, flags, lang)
                    verdicts.append((check_id, verdict))
            with language.speaking(lang):
                cell.outputs = _verdict_outputs(cell, [v for _, v in verdicts])
            cell.metadata[VERDICT_KEY] = [{"check": i, "ok": v.ok, "label": v.label, "credit": v.credit, "missed": v.missed}
                                          for i, v in verdicts]
            self.log.info("Trusted verdict for %s: %s", cell.metadata["nbgrader"]["grade_id"],
                          "pass" if all(v.ok for _, v in verdicts) else "fail")
        return nb, resources


def _verdict_outputs(cell: NotebookNode, verdicts: list) -> list[NotebookNode]:
    """A graded cell's outputs: passed, failed (an error: 0 points) or partly passed (its score)."""
    if all(v.ok for v in verdicts):
        return [_stream("".join(language.text("graded_passed", message=v.message) + "\n" for v in verdicts))]
    credit = sum(v.credit for v in verdicts) / len(verdicts)
    message = "\n".join(v.message for v in verdicts if not v.ok)
    if credit <= 0:
        return [_error("AssertionError", message)]
    points = float(cell.metadata["nbgrader"]["points"])
    score = round(points * credit, 6)
    lines = [language.text("partly_passed", score=score, points=points)]
    for v in verdicts:
        lines += ([language.text("part_passed", name=name) for name, ok in v.parts if ok]
                  + [language.text("part_missed", name=name) for name in v.missed])
    # nbgrader's partial credit: no error, and the cell's result is its score
    return [_stream("\n".join(lines) + "\n" + message + "\n"),
            NotebookNode(output_type="execute_result", execution_count=cell.get("execution_count"), metadata={},
                         data={"text/plain": repr(score)})]


def submission_language(nb: NotebookNode) -> str:
    """The language the feedback speaks: the notebook's ``encdec.language`` (set by a release in
    another language, ``autograder/release.py``), else English. It changes the wording only."""
    meta = nb.metadata.get("encdec") if isinstance(nb.metadata.get("encdec"), dict) else {}
    lang = meta.get("language")
    return lang if isinstance(lang, str) and lang in language.LANGUAGES else language.DEFAULT


def untrusted(check_id: str, flags, lang: str = language.DEFAULT) -> "judge.Verdict":
    """A verdict measured in the student's process, from a submission that touched the instruments
    (worded in ``lang``)."""
    from autograder import judge

    with language.speaking(lang):
        reasons = "; ".join(sorted({language.term(f.reason) for f in flags}))
        message = language.fill(language.text("instruments", check_id=check_id, reasons=reasons))
    return judge.Verdict(False, message, label="instruments_touched")


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


class SanitizeOutputs(SanitizeHTML):
    """Student-made HTML (outputs, markdown and raw cells) with no active content left.

    The autograded notebook is what the formgrader renders in the instructor's Jupyter session,
    and the feedback HTML is opened by whoever gets it: a cell's ``<script>``, ``onerror=`` or
    ``javascript:`` link must arrive as inert text. nbconvert's ``SanitizeHTML`` (bleach) keeps
    a short list of tags and attributes and drops every output type that could run code
    (JavaScript, widget views); this allows the harmless tags a plot or a table needs.
    """

    enabled = Bool(True, help="nbconvert's preprocessors are off unless enabled; this one always runs.").tag(config=True)

    @default("tags")
    def _tags_default(self):
        return sorted(set(ALLOWED_TAGS) | {"p", "div", "span", "pre", "br", "hr", "table", "thead", "tbody",
                                           "tr", "th", "td", "h1", "h2", "h3", "h4", "h5", "h6", "sub", "sup", "img"})

    @default("attributes")
    def _attributes_default(self):
        return {"a": ["href", "title"], "img": ["src", "alt", "width", "height"], "abbr": ["title"],
                "acronym": ["title"], "*": ["class"]}

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if cell.cell_type == "markdown":
            # bleach escapes every ">" and "&" it keeps as text, which markdown then shows as
            # "&gt;" (in code spans too: `j > i`). Only "<" can open a tag, and it stays escaped.
            cell.source = cell.source.replace("&gt;", ">").replace("&amp;", "&")
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

"""nbgrader configuration of the course; run every nbgrader command from the repository root.

Instructor sources are ``solutions/<assignment>/``, the generated student release is
``exercises/<assignment>/``; submissions, autograded notebooks, feedback, exports, the gradebook
and the course secret live under one folder outside the sources, ``GRADING`` below
(``grading/``, ignored by git, or ``$ENCDEC_GRADING_DIR``). ``autograder/README.md`` explains the
grading architecture; ``autograder/preprocessors/`` holds the preprocessors registered here, one a file.
"""

import os
from pathlib import Path

from autograder.environment import prepare
from autograder.state import LEFT_BEHIND, grading_state

ROOT = Path(__file__).resolve().parent

# Grading's mutable state, one folder: grading/ here, or $ENCDEC_GRADING_DIR (relative to this
# folder, or absolute); the names inside it come from autograder/state.py.
GRADING = grading_state(ROOT)

c = get_config()  # noqa: F821 (provided by traitlets when nbgrader loads this file)

c.CourseDirectory.root = str(ROOT)
# The course id and nbgrader's exchange are the hub's: students' nbgrader reads them from the
# hub-wide configuration (/etc/jupyter/nbgrader_config.py, deploy/hub/), so this file sets the
# exchange only when ENCDEC_EXCHANGE names one (else nbgrader's default, /srv/nbgrader/exchange, or
# the hub-wide setting stands), and the id from ENCDEC_COURSE_ID (default "encdec").
c.CourseDirectory.course_id = os.environ.get("ENCDEC_COURSE_ID") or "encdec"
if os.environ.get("ENCDEC_EXCHANGE"):
    c.Exchange.root = os.environ["ENCDEC_EXCHANGE"]
# What a student hands in stays theirs: a sticky inbound folder, and each student's own submissions
# collected only, their data and no links, within bounds (autograder/exchange.py, autograder/collected.py;
# the students' side is encdec/exchange.py).
c.ExchangeFactory.release_assignment = "autograder.exchange.ReleaseAssignment"
c.ExchangeFactory.collect = "autograder.exchange.Collect"
c.ExchangeFactory.release_feedback = "autograder.exchange.ReleaseFeedback"  # each page readable by its student only
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "exercises"
c.CourseDirectory.submitted_directory = str(GRADING.submitted)
c.CourseDirectory.autograded_directory = str(GRADING.autograded)
c.CourseDirectory.feedback_directory = str(GRADING.feedback)
c.CourseDirectory.db_url = GRADING.db_url
c.CourseDirectory.ignore = [
    ".ipynb_checkpoints",
    "*.pyc",
    "__pycache__",
    "feedback",
    ".grading",
    ".grading-in",
    "zh.yml",  # a release's translations (autograder/release.py), not a student's file
    LEFT_BEHIND,
]  # what collect left behind: read by the grader, not carried on
c.TrustedGrading.secret_file = str(GRADING.secret)
# Grades out: `nbgrader export` writes a gradebook CSV that Canvas imports (autograder/lms/canvas.py;
# `--exporter=nbgrader.plugins.CsvExportPlugin` gives nbgrader's own CSV, to grades.csv).
c.ExportApp.plugin_class = "autograder.lms.canvas.CanvasExport"
c.ExportPlugin.to = str(GRADING.export / "canvas.csv")
c.CsvExportPlugin.to = str(GRADING.export / "grades.csv")
c.CanvasExport.id_column = "SIS Login ID"  # the Canvas column that holds nbgrader's student ids
# Late submissions (autograder/lms/late_policy.py): 10 % of the score per day or part of a day
# after the due date, at most 50 %; extensions from nbgrader's gradebook and from a CSV file
# student_id,assignment,days (empty: none).
c.AssignLatePenalties.plugin_class = "autograder.lms.late_policy.LatePolicy"
c.LatePolicy.percent_per_day = 10.0
c.LatePolicy.max_percent = 50.0
c.LatePolicy.grace_minutes = 0.0
c.LatePolicy.extensions_file = ""

# Grading: a cell that runs longer than this is interrupted and scores 0.
c.Execute.timeout = 60
# A graded cell deleted from a submission is put back (and then scored 0 by TrustedVerdict).
c.OverwriteCells.add_missing_cells = True
# No grade lost by a failed run: the last good autograde and feedback of each submission are kept
# and put back when a regrade fails, crashes or is killed (autograder/keep.py).
# nbgrader imports each hook named here when it builds the converter.
c.BaseConverter.post_convert_hook = "autograder.keep.after"
# Every notebook handed in is graded, with a reason: one under another name than the release's, or
# one that is no notebook, is read by the course's exporter (autograder/handed_in.py), and a mangled
# one is matched to the release before nbgrader's own steps (MatchRelease), each repair stated.
c.Autograde.pre_convert_hook = "autograder.handed_in.renamed"
c.Autograde.exporter_class = "autograder.handed_in.HandedInExporter"
c.Autograde.sanitize_preprocessors = [
    "autograder.keep.KeepLastGrade",
    "autograder.preprocessors.MatchRelease",
    "nbgrader.preprocessors.ClearOutput",
    "nbgrader.preprocessors.DeduplicateIds",
    "nbgrader.preprocessors.OverwriteKernelspec",
    "autograder.preprocessors.SafeOverwriteCells",
    "nbgrader.preprocessors.CheckCellMetadata",
]
# The verdict is decided outside the kernel: the grader hands each test cell its inputs when it
# runs, keeps what came out, and judges it before the grades are saved (autograder/preprocessors/).
c.Autograde.autograde_preprocessors = [
    "autograder.preprocessors.ClearGradingFiles",
    "autograder.preprocessors.GradedExecute",
    "nbgrader.preprocessors.IgnorePattern",
    "nbconvert.preprocessors.ClearMetadataPreprocessor",
    "nbgrader.preprocessors.LimitOutput",
    "autograder.preprocessors.TrustedVerdict",
    "autograder.preprocessors.SanitizeOutputs",  # the formgrader renders this notebook: no active content
    "nbgrader.preprocessors.SaveAutoGrades",
    "autograder.preprocessors.FlagIntegrity",  # reaching into the grader: needs_manual_grade + a record
    "nbgrader.preprocessors.AssignLatePenalties",
    "nbgrader.preprocessors.CheckCellMetadata",
    # the student just graded gets their account's full name where the gradebook has none
    # (autograder/roster.py): the formgrader lists "None, None" for a student without one
    "autograder.roster.NameStudent",
]
# The feedback page: nbgrader's, drawn by the course's template, which escapes every string that is no
# cell (a comment is text, whoever wrote it); a notebook whose page cannot be made gets a short page
# and the batch goes on (autograder/feedback.py). Feedback never shows hidden test code.
c.GenerateFeedback.exporter_class = "autograder.feedback.FeedbackExporter"  # its templates: autograder/templates/
c.GenerateFeedback.preprocessors = [
    "autograder.keep.KeepLastGrade",
    "nbgrader.preprocessors.GetGrades",
    "autograder.preprocessors.HideHiddenTests",
    "autograder.preprocessors.SanitizeOutputs",  # again, for notebooks graded before it was configured
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# The grader's environment: the grading state created 0700 before anything is written into it, the
# venv's tools on PATH (nbgrader runs `alembic` from there), one thread per kernel, the gradebook's
# and exports' folders (autograder/environment.py). The sandbox and privacy are the execution step's:
# GradedExecute starts no kernel unless the sandbox can start and the grading state and solutions/
# are closed to other users of the machine (autograder/sandbox/execute.py, autograder/privacy.py).
prepare(c, GRADING.root)
c.SandboxedExecute.private_folders = [str(GRADING.root), str(ROOT / "solutions")]

# Validation: the release records its test cells (RecordTestCells), and `nbgrader validate`
# reports one that is missing before the notebook runs (encdec/grading/validation.py; each exercise
# folder's own nbgrader_config.py sets the same hook for a student who validates there).
from nbgrader.converters import GenerateAssignment  # noqa: E402 (this file's validation settings come after the steps above)

from encdec.grading.validation import configure as _validation  # noqa: E402 (this file's validation settings come after the steps above)

c.GenerateAssignment.preprocessors = [
    *GenerateAssignment.class_traits()["preprocessors"].default(),
    "autograder.preprocessors.record_test_cells.RecordTestCells",
]
_validation(c)

# This course's own settings without editing this file (it is tracked): an untracked
# nbgrader_config.local.py beside it is read last, so it can set any of the above (the exchange,
# the folders, the timeout, the late policy).
if (ROOT / "nbgrader_config.local.py").is_file():
    load_subconfig(str(ROOT / "nbgrader_config.local.py"))  # noqa: F821 (traitlets provides it)

"""The course's nbgrader preprocessors, one per file named after its class, as nbgrader's own
``nbgrader/preprocessors/`` (registered by the root ``nbgrader_config.py``):

- ``ClearGradingFiles`` (before execution): no ``.grading/`` or ``.grading-in/`` from a submission.
- ``GradedExecute`` (the sandboxed execution step): each graded test cell's inputs handed to the
  kernel just in time, its outputs taken back right after the cell.
- ``TrustedVerdict`` (before ``SaveAutoGrades``): every graded check judged in the grader's process.
- ``SanitizeOutputs`` (before the grades are saved, and in ``GenerateFeedback``): no active content.
- ``MatchRelease`` (the sanitizing step, first): a mangled notebook matched to the release, each repair stated.
- ``SafeOverwriteCells`` (the sanitizing step): deleted test cells put back in their place.
- ``FlagIntegrity`` (after ``SaveAutoGrades``) and ``HideIntegrityFlags`` (feedback: the instructor's
  comment or nbgrader's own, never a course note): review flags;
  ``RecordRepairs`` (after ``SaveAutoGrades``): a mangled notebook's repairs in the gradebook.
- ``HideHiddenTests`` (feedback): nbgrader's ``ClearHiddenTests`` with a placeholder, on test cells only.

``TrustedGrading`` holds the grader's settings (the course secret's file).
"""

from ._shared import CHECK_CALL, VERDICT_KEY, deliver, recorded_verdicts, withdraw
from .clear_grading_files import ClearGradingFiles
from .flag_integrity import FlagIntegrity
from .graded_execute import GradedExecute
from .hide_hidden_tests import HideHiddenTests
from .hide_integrity_flags import HideIntegrityFlags
from .match_release import MatchRelease
from .record_repairs import RecordRepairs
from .safe_overwrite_cells import SafeOverwriteCells
from .sanitize_outputs import SanitizeOutputs
from .trusted_grading import TrustedGrading
from .trusted_verdict import TrustedVerdict, submission_language, verdict_outputs

__all__ = [
    "CHECK_CALL",
    "VERDICT_KEY",
    "recorded_verdicts",
    "ClearGradingFiles",
    "FlagIntegrity",
    "GradedExecute",
    "HideHiddenTests",
    "HideIntegrityFlags",
    "MatchRelease",
    "RecordRepairs",
    "SafeOverwriteCells",
    "SanitizeOutputs",
    "TrustedGrading",
    "TrustedVerdict",
    "deliver",
    "submission_language",
    "verdict_outputs",
    "withdraw",
]

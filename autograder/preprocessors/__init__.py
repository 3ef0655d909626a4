"""The course's nbgrader preprocessors, one per file named after its class, as nbgrader's own
``nbgrader/preprocessors/`` (registered by the root ``nbgrader_config.py``):

- ``ClearGradingFiles`` (before execution): no ``.grading/`` or ``.grading-in/`` from a submission.
- ``GradedExecute`` (the sandboxed execution step): each graded test cell's inputs handed to the
  kernel just in time, its outputs taken back right after the cell.
- ``TrustedVerdict`` (before ``SaveAutoGrades``): every graded check judged in the grader's process.
- ``SanitizeOutputs`` (before the grades are saved, and in ``GenerateFeedback``): no active content.
- ``MatchRelease`` (the sanitizing step, first): a mangled notebook matched to the release, each repair stated.
- ``SafeOverwriteCells`` (the sanitizing step): deleted test cells put back in their place.
- ``FlagIntegrity`` (after ``SaveAutoGrades``): review flags, as records beside the gradebook's rows.
- ``HideHiddenTests`` (feedback): nbgrader's ``ClearHiddenTests`` with a placeholder, on test cells only.

``TrustedGrading`` holds the grader's settings (the course secret's file).
"""

from ._shared import VERDICT_KEY, deliver, recorded_verdicts, withdraw
from .clear_grading_files import ClearGradingFiles
from .flag_integrity import FlagIntegrity
from .graded_execute import GradedExecute
from .hide_hidden_tests import HideHiddenTests
from .match_release import MatchRelease
from .safe_overwrite_cells import SafeOverwriteCells
from .sanitize_outputs import SanitizeOutputs
from .trusted_grading import TrustedGrading
from .trusted_verdict import TrustedVerdict, submission_language, verdict_outputs

__all__ = [
    "VERDICT_KEY",
    "recorded_verdicts",
    "ClearGradingFiles",
    "FlagIntegrity",
    "GradedExecute",
    "HideHiddenTests",
    "MatchRelease",
    "SafeOverwriteCells",
    "SanitizeOutputs",
    "TrustedGrading",
    "TrustedVerdict",
    "deliver",
    "submission_language",
    "verdict_outputs",
    "withdraw",
]

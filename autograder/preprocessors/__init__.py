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
- ``HideHiddenTests`` (feedback): what ``ClearHiddenTests`` does to a release, with a placeholder, on test cells only.

``TrustedGrading`` holds the grader's settings (the course secret's file).
"""

from importlib import import_module

# name -> the module of this package that defines it: imported on first use, so naming one step
# (nbgrader imports ``autograder.preprocessors.MatchRelease`` by that name) loads that step's
# module and what it needs, not every step's (the sandbox, the judges)
_WHERE = {
    "VERDICT_KEY": "_shared",
    "deliver": "_shared",
    "recorded_verdicts": "_shared",
    "withdraw": "_shared",
    "ClearGradingFiles": "clear_grading_files",
    "FlagIntegrity": "flag_integrity",
    "GradedExecute": "graded_execute",
    "HideHiddenTests": "hide_hidden_tests",
    "MatchRelease": "match_release",
    "SafeOverwriteCells": "safe_overwrite_cells",
    "SanitizeOutputs": "sanitize_outputs",
    "TrustedGrading": "_shared",
    "TrustedVerdict": "trusted_verdict",
    "submission_language": "trusted_verdict",
    "verdict_outputs": "trusted_verdict",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_WHERE[name]}", __name__), name)

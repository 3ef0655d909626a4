"""The exercises' checks as they run in the student's kernel (chapters 11-13).

``checks.run`` calls the student's code and, in a graded run, only saves what came out; the
verdict is the grader's (``autograder.judge``, outside the sandbox). ``calls`` says how each
kind of exercise is called, ``stages`` records what the given submodules received and returned
(data for the grader's stage-by-stage diagnosis), ``wire`` the file format, ``selfcheck`` the
student's own run against stored reference outputs, ``compare`` and ``misconceptions`` the
wording both sides share.
``language`` the table of messages per language (``set_language("zh")``).
Nothing in this package computes an expected answer.
"""

from .language import set_language  # noqa: F401 (re-exported: encdec.grading.set_language)

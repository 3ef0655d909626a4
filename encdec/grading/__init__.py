"""Grading for the book's exercises (chapters 11-13): checks, their diagnoses, the trusted verdict.

``checks`` runs in the student's kernel (``run``) and in the grader (``verify``); ``variants``
holds the known-buggy versions whose outputs name a student's misconception. See
``autograder/README.md`` for how nbgrader uses them.
"""

from .checks import CHECKS, Result, run, verify  # noqa: F401

"""The course's grading side: nbgrader's steps and the exchange for this course (``autograder/README.md``).

``ROOT`` is the course's root folder: the repository, where ``nbgrader_config.py``, ``solutions/``
and ``exercises/`` live; every module of the grader takes it from here."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

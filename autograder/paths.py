"""The course's root folder: the repository, where ``nbgrader_config.py``, ``solutions/`` and
``exercises/`` live. Computed here once; every module of the grader imports it."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

"""Integrity flags: submissions whose code reaches into the grader's machinery, marked for review.

A flag never changes a score. It marks the notebook for manual review in nbgrader's gradebook, so
the formgrader lists it as "needs manual grade", and says why in one line:

- ``scan_source`` reads one code cell with ``ast`` (IPython magics and ``!`` lines are turned into
  Python first, as IPython does) and returns the reasons it matches in ``RULES``: one table of
  (pattern, rule family) rows over the *facts* a cell states, each a ``kind:value`` string:

  ``name:``   a name or dotted attribute chain, imports and simple aliases resolved
              (``import torch.nn.functional as F; F.softmax`` -> ``name:torch.nn.functional.softmax``)
  ``attr:``   an attribute or imported name, whatever object it is taken from (``attr:f_back``)
  ``import:`` a module imported, statically or with ``__import__``/``importlib``
  ``assign:`` an assignment target (``assign:numpy.allclose``), ``setattr`` included
  ``str:``    a string constant (docstrings excepted)
  ``magic:`` / ``shell:``  an IPython magic's name, a shell command's text

  Honest solutions in any style must match nothing: the rules name what no exercise needs (stack
  frames, hooks, the check library, the grading files, interpreter internals, environment probes,
  file access, torch's ready-made Transformer layers), never a tensor operation.
- ``scan_notebook`` scans every code cell except the autograder test cells (the grader restores
  their source from the gradebook), carrying the imports of one cell into the next.
- ``FlagIntegrity`` runs in ``Autograde.autograde_preprocessors`` right after nbgrader's
  ``SaveAutoGrades``: on a flagged notebook it sets ``Grade.needs_manual_grade`` on every
  autograded test cell (an attack anywhere can forge the result of any check, even an earlier
  one, since the verdict is judged after the whole notebook has run), and it records each flag
  (cell, rule family's key, what was used) in the course's table beside nbgrader's in the
  gradebook (``review.py``), never in a comment: the feedback, made from the notebook and nbgrader's
  comments, has no flag to show. ``auto_score`` is left alone. The next autograde run rewrites
  both, so a resubmission is judged afresh. The words are the message table's (``flag_<key>``).
- ``python -m autograder.integrity report [--db-url URL] [--csv PATH]`` lists every flagged
  submission; ``python -m autograder.integrity scan NOTEBOOK...`` scans notebooks offline.

One module per part: ``rules.py`` (the table), ``scan.py`` (cells to facts to reasons),
the nbgrader step ``autograder/preprocessors/flag_integrity.py``, ``review.py`` (the flags' records in
the gradebook, and the flagged submissions),
``cli.py`` (the command line, ``__main__``'s only).
"""

from .review import FIELDS, course_db_url, flagged_submissions
from .rules import RULES
from .scan import Flag, scan_notebook, scan_source

__all__ = [
    "FIELDS",
    "RULES",
    "Flag",
    "course_db_url",
    "flagged_submissions",
    "scan_notebook",
    "scan_source",
]

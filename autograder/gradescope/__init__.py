"""Feedback at submission through Gradescope: an autograder archive per assignment.

`build.py` makes `dist/gradescope/<assignment>.zip` (`make gradescope`): Gradescope's
`setup.sh` and `run_autograder`, the pinned environment, the package, the grader, the
assignment's source notebook and its grading edition. `run.py` is what `run_autograder` runs:
stock `nbgrader autograde` with the course configuration (the same sandbox and the same verdict
as the instructor's batch) on the one submitted notebook, then `results.py` turns the gradebook
and the graded notebook into Gradescope's `results.json`: one test per graded item, its
diagnosis as its output, hidden items shown only after the due date.
"""

# `make gradescope` builds a Gradescope autograder archive per assignment and release language
# (autograder/gradescope/): dist/gradescope/<a>.zip for the exercises released in English
# (exercises/), dist/gradescope/zh/<a>.zip for those released in Chinese (exercises/zh/). Upload
# the one of the release your students work from: the feedback at submission speaks its
# language, the scores are the same. Feedback at submission, with the course's sandbox and verdict.
.PHONY: gradescope
gradescope: $(VENV)/.installed
	$(PY) -m autograder.gradescope.build
	$(PY) -m autograder.gradescope.build --lang zh

# Every fixture through the archive's run_autograder (`make test` runs a few of them).
.PHONY: gradescope-check
gradescope-check: $(VENV)/.installed system
	ENCDEC_GRADESCOPE_ALL=1 $(PY) -m pytest -q tests/test_gradescope.py

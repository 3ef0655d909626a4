# `make gradescope` builds a Gradescope autograder archive per assignment in dist/gradescope/
# (autograder/gradescope/): feedback at submission, with the course's sandbox and verdict.
.PHONY: gradescope
gradescope: $(VENV)/.installed
	$(PY) -m autograder.gradescope.build

# Every fixture through the archive's run_autograder (`make test` runs a few of them).
.PHONY: gradescope-check
gradescope-check: $(VENV)/.installed system
	ENCDEC_GRADESCOPE_ALL=1 $(PY) -m pytest -q tests/test_gradescope.py

# Exercises and their grader (nbgrader; see autograder/README.md).
#   make exercises      reference outputs, then the student release exercises/ and the fixture
#                       submissions, all regenerated from solutions/ (the one source of truth)
#   make grading-test   the grading tests: check library, regeneration, nbgrader validate, and
#                       every fixture submission through the real `nbgrader autograde`
ASSIGNMENTS := decoder_block target_slicing kv_cache

.PHONY: exercises grading-test grade-fixtures
exercises: $(VENV)/.installed
	$(PY) autograder/make_references.py
	for a in $(ASSIGNMENTS); do $(BIN)/nbgrader generate_assignment $$a --force || exit 1; done
	$(PY) autograder/fixtures/make_fixtures.py

grading-test: $(VENV)/.installed
	$(PY) -m pytest -q tests/test_grading_checks.py tests/test_grading_references.py \
		tests/test_exercises_notebooks.py tests/test_grading_fixtures.py

# The fixture table (expected vs actual score, diagnosis) without pytest.
grade-fixtures: $(VENV)/.installed
	$(PY) autograder/grade_fixtures.py

# Exercises and their grader (nbgrader; see autograder/README.md).
#   make exercises      stored visible-check files, then the student release exercises/ (and its
#                       Chinese edition exercises/zh/, mk/exercises_zh.mk), the
#                       fixture and hostile submissions and the grading editions, all
#                       regenerated from solutions/ and encdec/ (the one source of truth)
#   make grading-edition  the package as graded kernels import it (exercise targets removed);
#                       the grader also rebuilds it by itself when it is stale
#   make grading-test   the grading tests (marker `grading`, less the matrices): regeneration,
#                       nbgrader validate, the fixture submissions through the real `nbgrader autograde`
#   make grading-report after `nbgrader autograde` (or the driver): the class-wide misconception
#                       report, HTML and CSV, in grading/export/misconceptions/
ASSIGNMENTS := $(notdir $(patsubst %/,%,$(dir $(wildcard solutions/*/*.ipynb))))

.PHONY: exercises grading-test grade-fixtures grading-edition grading-report
exercises: $(VENV)/.installed
	$(PY) autograder/make_references.py
	for a in $(ASSIGNMENTS); do $(BIN)/nbgrader generate_assignment $$a --force || exit 1; done
	$(PY) -m autograder.release --lang zh
	$(PY) -m autograder.fixtures.make
	$(PY) -m autograder.edition

grading-edition: $(VENV)/.installed
	$(PY) -m autograder.edition

grading-test: $(VENV)/.installed
	$(PY) -m pytest -q -m "grading and not matrix" tests

# The fixture table (expected vs actual score, diagnosis) without pytest.
grade-fixtures: $(VENV)/.installed
	$(PY) autograder/grade_fixtures.py

# Per assignment and graded item: how many students passed, hit each named misconception or an
# unnamed observation, one anonymised example each (static HTML and CSV; see autograder/README.md).
grading-report: $(VENV)/.installed
	$(PY) -m autograder.report $(ASSIGNMENTS)

# Every fixture through stock `nbgrader autograde`, the driver and two RQ workers, into PostgreSQL
# and into SQLite (tests/test_grading_queue.py; `make test` runs one pair of each kind, each once).
.PHONY: queue-check
queue-check: $(VENV)/.installed system
	ENCDEC_QUEUE_ALL=1 $(PY) -m pytest -q tests/test_grading_queue.py -k fixture_table

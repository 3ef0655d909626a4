# The student release in Chinese (issue 14), from the same instructor sources as the English one:
#   make exercises-zh   exercises/zh/<assignment>/: the English source with its markdown cells
#                       replaced from solutions/<assignment>/zh.yml, released by stock
#                       `nbgrader generate_assignment` (autograder/release.py); the same code, test
#                       cells, grade ids and points, graded by the course's gradebook, with
#                       feedback in Chinese (encdec/grading/language.py)
.PHONY: exercises-zh
exercises-zh: $(VENV)/.installed
	$(PY) -m autograder.release --lang zh

# Every fixture of the table handed in from the English and from the Chinese release, graded by
# stock nbgrader: the same scores per item and in total, the Chinese feedback with no English
# diagnosis (`make test` grades five of them; this takes about 10 minutes).
.PHONY: zh-check
zh-check: $(VENV)/.installed system
	ENCDEC_ZH_ALL=1 $(PY) -m pytest -q tests/test_exercises_zh.py -k chinese_submissions_grade_exactly_as_the_english_ones

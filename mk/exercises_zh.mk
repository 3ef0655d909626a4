# The student release in Chinese (issue 14), from the same instructor sources as the English one:
#   make exercises-zh   exercises/zh/<assignment>/: the English source with its markdown cells
#                       replaced from solutions/<assignment>/zh.yml, released by stock
#                       `nbgrader generate_assignment` (autograder/release.py); the same code, test
#                       cells, grade ids and points, graded by the course's gradebook, with
#                       feedback in Chinese (encdec/grading/language.py)
.PHONY: exercises-zh
exercises-zh: $(VENV)/.installed
	$(PY) -m autograder.release --lang zh

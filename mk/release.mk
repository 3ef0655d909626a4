# `make student-release`: dist/student/, everything a student needs and nothing an instructor
# keeps back. Generated, never edited: SHA256SUMS lists every file.
#   - a wheel of the `encdec` package (model, data, training, decoding, widgets and the kernel
#     side of the visible checks, encdec/grading); not the grader (autograder/), no solutions,
#     no hidden tests. It carries the three trained presets as package data
#     (encdec/checkpoints/<preset>/, versioned in git), so nobody retrains; this is the wheel a launched
#     chapter's first cell installs from the published site's student/ folder;
#   - exercises/<name>/: the released notebooks (stubs) and their visible checks' reference/*.npz;
#   - exercises/zh/<name>/: the same exercises released in Chinese (`make exercises-zh`): the
#     same code and checks, instructions and feedback in Chinese; the instructor tells students
#     which of the two to use, and either grades alike;
#   - README.md for students (English, then Chinese).
# tests/test_student_release.py installs it in a fresh virtual environment and runs the checks.
#
# ASSESSED, the one setting of an assessed term (issue 50), for `make student-release` and
# `make book` alike (the Pages workflow takes it from the repository variable ASSESSED):
#   ASSESSED=0  self-study, the default: the wheel ships the package whole, the reference version of
#               every function the exercises ask for included, and its README says so;
#   ASSESSED=1  an assessed term: the wheel is built from the package's assessed edition
#               (autograder/assessed.py), where the body of every graded answer is its exercise's
#               stub, raise NotImplementedError; the book shows those listings folded out the same way;
#   ASSESSED=kv_cache,target_slicing  a later release of the term: only the answers of the assignments
#               named (those still open) are folded out. The term-start wheel has no DecoderBlock.forward
#               (decoder_block's answer), which kv_cache's and target_slicing's checks run: release those
#               with a wheel built so once decoder_block is closed.
# tests/test_assessed_release.py and `make test-assessed` (the site) search them for every answer.
ASSESSED ?= 0
comma := ,
space := $(subst ,, )
ASSESSED_TERM = $(if $(filter 0,$(ASSESSED)),0,1)
ASSESSED_OPEN := $(filter-out 0 1,$(subst $(comma), ,$(ASSESSED)))
ifneq ($(or $(if $(strip $(ASSESSED)),,empty),$(filter-out $(ASSIGNMENTS),$(ASSESSED_OPEN)),$(and $(ASSESSED_OPEN),$(filter 0 1,$(subst $(comma), ,$(ASSESSED))))),)
$(error ASSESSED is 0 (self-study), 1 (an assessed term) or the assignments still open ($(subst $(space),$(comma),$(ASSIGNMENTS))), not '$(ASSESSED)')
endif
STUDENT := dist/student
STUDENT_STAGE := build/student-wheel

define STUDENT_README
# The Transformer encoder–decoder: student release

- `encdec-*.whl`: the course package (the model, data, training, decoding, the book's widgets,
  the visible checks your notebooks run, and the trained `overfit`, `historical` and `modern`
  models the chapters and exercises load, so you never retrain). No solutions, no hidden tests,
  no grader.
- `exercises/`: the warm-up and the three exercises, one folder each, with the stored inputs and
  outputs of their visible checks (`reference/`): `warmup` (chapters 11–13, stretch parts
  included), `decoder_block` (chapter 11), `target_slicing` (chapter 12) and `kv_cache`
  (chapter 13).
- `exercises/zh/`: the same four exercises in Chinese (instructions and feedback); the code,
  the checks and the grading are the same. Use the language your instructor tells you.

## Set up (Python 3.11 or newer)

    python -m venv .venv
    .venv/bin/pip install encdec-*.whl jupyterlab
    .venv/bin/jupyter lab

(On Windows: `.venv\Scripts\pip` and `.venv\Scripts\jupyter`.) Keep each exercise next to its
`reference/` folder.

## Work on an exercise

Open `exercises/<name>/<name>.ipynb` and run it from top to bottom. Each visible test cell
compares your code with stored references: before you write anything it says "not implemented
yet"; when something is wrong it says what was expected, what came out, and which known mistake
it looks like. Your instructor's grading also runs hidden tests on fresh inputs, so make the
visible checks pass by getting the code right, not by matching their numbers. Submit the
notebook as your instructor tells you. The grader reads a notebook file of up to 32 MB with up to
1,000 cells and 2 MB of code and text (printed outputs do not count: they are cleared before
grading); past that it is graded 0, with the reason.

`SHA256SUMS` lists every file of this release (`sha256sum -c SHA256SUMS` checks them).

## 中文版

`exercises/zh/<name>/<name>.ipynb` 是同样四个练习（热身练习和三个练习）的中文版：说明和检查的反馈都是中文，代码、检查和评分与英文版完全相同。
安装方法同上；同样要让每个练习与它的 `reference/` 文件夹放在一起，从上到下运行。
写代码之前，可见的检查会说“尚未实现”；出错时，它会说明期望的结果、实际的结果，以及这像是哪一种常见错误。
使用哪个语言版本、如何提交，请听从教师的安排。评分程序读取的 notebook 文件最大 32 MB，最多 1,000 个单元、2 MB 的代码和文字（打印的输出不计入：评分前会被清除）；超出时得 0 分，并说明原因。
endef
export STUDENT_README

# The paragraph that says which release this is (ASSESSED), in English, then in Chinese.
define STUDENT_TERM_0
## Self-study release

The package holds the course's reference version of every function the exercises ask you to
write: try each exercise before you read it.

本版本供自学使用：课程包中含有练习要求编写的每个函数的参考实现，请先自己完成练习再阅读它们。
endef
define STUDENT_TERM_1
## Release for an assessed term

The functions the exercises ask you to write are left out of the package: each raises
`NotImplementedError` naming its exercise, as the released notebooks' stubs do. The book's figures
that run them were computed when the book was built.

本版本用于计分的学期：练习要求编写的函数不在课程包中，调用时会抛出 `NotImplementedError` 并指明所属练习。
endef
export STUDENT_TERM = $(STUDENT_TERM_$(ASSESSED_TERM))

.PHONY: student-release
student-release: $(VENV)/.installed $(WIDGET_BUNDLES)  # the wheel carries the widgets' bundles
	rm -rf $(STUDENT) $(STUDENT_STAGE)
	mkdir -p $(STUDENT) $(STUDENT_STAGE)
	cp -r encdec $(STUDENT_STAGE)/encdec
	$(if $(filter 1,$(ASSESSED_TERM)),$(PY) -m autograder.assessed $(STUDENT_STAGE)/encdec --assessed '$(ASSESSED)')
	find $(STUDENT_STAGE) -name __pycache__ -prune -exec rm -rf {} +
	sed 's/^include = \["encdec\*", "autograder\*"\]$$/include = ["encdec*"]  # the student wheel: no grader/' \
		pyproject.toml > $(STUDENT_STAGE)/pyproject.toml
	grep -q '^include = \["encdec\*"\]' $(STUDENT_STAGE)/pyproject.toml || \
		{ echo "pyproject.toml's package list changed: update mk/release.mk"; exit 1; }
	$(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(STUDENT) $(abspath $(STUDENT_STAGE))
	for ex in exercises/*/ exercises/zh/*/; do \
		name=$$(basename $$ex); [ -f $$ex$$name.ipynb ] || continue; \
		dest=$(STUDENT)/$${ex%/}; mkdir -p $$dest/reference; \
		cp $$ex$$name.ipynb $$ex/nbgrader_config.py $$dest/; \
		cp $$ex/reference/*.npz $$dest/reference/; \
	done
	printf '%s\n\n%s\n' "$$STUDENT_README" "$$STUDENT_TERM" > $(STUDENT)/README.md
	cd $(STUDENT) && find . -type f ! -name SHA256SUMS | LC_ALL=C sort | xargs sha256sum > SHA256SUMS
	@echo "student release in $(STUDENT)"

# `make test-assessed`: the assessed term end to end (issue 50): the book built with ASSESSED=1, then
# the no-answer search over the site and over the assessed release (tests/test_assessed_site.py,
# tests/test_assessed_release.py). It leaves the assessed site in _build/html (`make book` builds the
# self-study one again; the chapters' execution cache serves both). The scheduled workflow runs it.
.PHONY: test-assessed
test-assessed: $(VENV)/.installed
	$(MAKE) --no-print-directory book ASSESSED=1
	$(PY) -m pytest -q -n0 tests/test_assessed_site.py tests/test_assessed_release.py

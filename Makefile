# The two commands of the README: `make book` builds the course book, `make test` runs every
# test. Both set up everything first (virtual environment, pinned packages, Debian packages).
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
# nbgrader, alembic and jupyter-book are found on PATH without activating the venv.
export PATH := $(abspath $(BIN)):$(PATH)
export PYTHONHASHSEED := 0

.PHONY: all book test test-all unit venv system system-book checkpoints experiments bench clean
all: book

# torch: its CPU build on x86-64 Linux unless TORCH=gpu (PyPI's torch there is the CUDA build,
# 5.6 GB, 2.7 GB of it GPU libraries; elsewhere PyPI's is the CPU build). The CPU wheel is found on the configured indexes and wheel folders first
# (a mirror, or an offline machine's own wheels), else on PyTorch's CPU index (TORCH_CPU_INDEX).
TORCH_VERSION := $(shell sed -n 's/^torch==//p' constraints.txt)
TORCH ?= cpu
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
define INSTALL_TORCH_CPU
$(PY) -m pip install -q --no-deps "torch==$(TORCH_VERSION)+cpu" 2>/dev/null \
  || $(PY) -m pip install -q --no-deps --index-url $(TORCH_CPU_INDEX) "torch==$(TORCH_VERSION)+cpu"
endef

FORMGRADER_GUARD := deploy/jupyter-config/autograder.formgrader_guard.json
$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml $(FORMGRADER_GUARD)
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11 or newer is needed (found $$($(PYTHON) --version 2>&1)): set PYTHON=/path/to/python3.11"; exit 1; }
	@test -x $(PY) || $(PYTHON) -c 'import ensurepip, venv' 2>/dev/null || { echo "$(PYTHON) has no venv module with pip: install python3-venv (Debian/Ubuntu: apt-get install python3-venv)"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(if $(filter cpu-Linux-x86_64,$(TORCH)-$(shell uname -s)-$(shell uname -m)),$(INSTALL_TORCH_CPU))
	$(PY) -m pip install -q -r requirements.txt -c constraints.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation --config-settings editable_mode=compat -e .
	@# every Jupyter server of the environment loads the formgrader's guard (autograder/formgrader_guard.py)
	install -D -m 644 $(FORMGRADER_GUARD) $(VENV)/etc/jupyter/jupyter_server_config.d/$(notdir $(FORMGRADER_GUARD))
	touch $@
# solutions/ (reference solutions, hidden tests) unreadable by other users of the machine: a
# checkout is made with the user's umask, and grading refuses to start while it is open
# (autograder/privacy.py)
venv: $(VENV)/.installed
	@chmod -R o-rwx solutions

system:
	bash scripts/setup-system.sh

system-book:
	bash scripts/setup-system.sh book

# The presets' trained runs are versioned in git (encdec/checkpoints/<preset>/: model.pt and
# metrics.json, with the command that made it); nothing trains them at set-up. `make checkpoints`
# retrains all four on request, in place, one thread each (about 3 hours on this course's 2-core
# machine, most of it the historical run to its plateau; an interrupted run goes on from its saved
# state in build/train-state/ when started again), and `make bench` includes a reproduction of one run.
PRESET_NAMES := overfit historical historical_early modern
checkpoints: | $(VENV)/.installed
	for p in $(PRESET_NAMES); do $(PY) -m encdec.train --preset $$p --out encdec/checkpoints/$$p --threads 1 --state build/train-state/$$p.pt || exit 1; done

# The chapters' experiments (encdec/experiments/), versioned like the runs: small JSON records in
# encdec/checkpoints/experiments/, each with the command that made it; chapter 12's two take about 3
# minutes on one idle thread, chapter 13's positions (four 40-epoch runs) about 20.
experiments: | $(VENV)/.installed
	$(PY) -m encdec.experiments.norms --out encdec/checkpoints/experiments/norms.json --threads 1
	$(PY) -m encdec.experiments.attention_learns --out encdec/checkpoints/experiments/attention_learns.json --threads 1
	$(PY) -m encdec.experiments.positions --threads 1

-include mk/*.mk

unit: venv
	$(PY) -m pytest -q -m "not browser and not grading" tests

# `make test`: the set-up, timed by block, then every test but the exhaustive matrices (marker
# `matrix`); it closes with its slowest tests and its time by block (tests/conftest.py), where the
# 25-minute budget is watched. `make test-all` runs the matrices too, and every fixture of the
# named checks (zh-check, queue-check, gradescope-check) and every warm-up fixture through stock
# nbgrader (ENCDEC_FIXTURES_ALL), and the page's broken models on every question of the task, not
# every third (ENCDEC_SPACE_ALL): the scheduled workflow runs it.
# The suite runs on two pytest-xdist workers (TEST_WORKERS=0: one process): a module, or the
# modules of one of GROUPS, is one unit of work, the long ones handed out first (tests/conftest.py).
TEST_WORKERS ?= 2
XDIST = $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder)

test:
	@mkdir -p build && rm -f build/make-test-blocks.txt
	@bash scripts/timed.sh "virtual environment" $(MAKE) --no-print-directory venv
	@bash scripts/timed.sh "Debian packages" $(MAKE) --no-print-directory system
	@bash scripts/timed.sh "lint and format check" $(MAKE) --no-print-directory lint
	@bash scripts/timed.sh "book, both editions" $(MAKE) --no-print-directory book
	ENCDEC_SETUP_TIMED=1 $(PY) -m pytest -q $(XDIST) -m "not matrix" --durations=25 tests

test-all: venv system book
	ENCDEC_ZH_ALL=1 ENCDEC_SPACE_ALL=1 ENCDEC_QUEUE_ALL=1 ENCDEC_GRADESCOPE_ALL=1 ENCDEC_FIXTURES_ALL=1 $(PY) -m pytest -q $(XDIST) --durations=25 tests

bench: venv
	$(PY) bench/run_all.py

clean:
	rm -rf build _build

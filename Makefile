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

.PHONY: all book test unit venv system checkpoints bench clean
all: book

$(VENV)/.installed: requirements.txt constraints.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Python 3.11+ is needed (found $$($(PYTHON) --version))"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt -c constraints.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@
venv: $(VENV)/.installed

system:
	bash scripts/setup-system.sh

# Checkpoints the book loads: trained once, retrained only when the package changes.
CHECKPOINTS := build/checkpoints
PRESET_NAMES := overfit historical modern
ENCDEC_SRC := $(wildcard encdec/*.py)
$(CHECKPOINTS)/%/model.pt: $(ENCDEC_SRC) | $(VENV)/.installed
	$(PY) -m encdec.train --preset $* --out $(CHECKPOINTS)/$* --threads 2
checkpoints: $(foreach p,$(PRESET_NAMES),$(CHECKPOINTS)/$(p)/model.pt)

-include mk/*.mk

unit: venv
	$(PY) -m pytest -q -m "not browser and not grading" tests

# --durations: the slowest tests close the report, where the 30-minute budget is watched
test: venv system book
	$(PY) -m pytest -q --durations=25 tests

bench: venv checkpoints
	$(PY) bench/run_all.py

clean:
	rm -rf build _build

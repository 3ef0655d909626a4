# The grading sandbox (autograder/sandbox/). `make sandbox-check` starts one sandboxed process
# and says whether grading can run here (bubblewrap, prlimit and setpriv come from `make system`).
# The hostile submissions (built into build/fixtures/hostile/submitted/) are rows of autograder/fixtures/table.py,
# written with all other fixtures by `make exercises` (python -m autograder.fixtures.make).
.PHONY: sandbox-check
sandbox-check: $(VENV)/.installed system
	$(PY) -c "from autograder.sandbox.sandbox import check_available; check_available(); print('grading sandbox: ok')"

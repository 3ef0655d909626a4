# The grading sandbox (autograder/sandbox/). `make sandbox-check` starts one sandboxed process
# and says whether grading can run here (bubblewrap, prlimit and setpriv come from `make system`).
# `make hostile-fixtures` regenerates autograder/hostile/ from solutions/decoder_block/ (after
# editing the exercise; tests/test_sandbox.py checks that the committed files match).
.PHONY: sandbox-check hostile-fixtures
sandbox-check: $(VENV)/.installed system
	$(PY) -c "from autograder.sandbox.sandbox import check_available; check_available(); print('grading sandbox: ok')"

hostile-fixtures: $(VENV)/.installed
	$(PY) autograder/hostile/make_hostile.py

# A class on one JupyterHub (deploy/hub/; book/instructor_guide.md, "A class on one JupyterHub").
#   make hub-setup   as root: the student release, then nbgrader's exchange, the hub-wide nbgrader
#                    config, the students' environment built from the student wheel and the proxy
#                    (deploy/hub/setup-hub.sh all; settings in deploy/hub/hub.env)
#   make hub-test    the round trip on a real hub on 127.0.0.1 with real users (tests/test_hub.py)
.PHONY: hub-setup hub-test
hub-setup: student-release
	bash deploy/hub/setup-hub.sh all

hub-test: $(VENV)/.installed system
	@test -d node_modules/configurable-http-proxy || npm ci --ignore-scripts --no-audit --no-fund
	$(PY) -m pytest -q -s tests/test_hub.py

#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image (an Ubuntu base):
# Python 3.11, bubblewrap and libseccomp2 (the grading sandbox), the pinned packages (pyseccomp,
# libseccomp's bindings, among them) and this project.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends python3.11 python3.11-venv bubblewrap util-linux libseccomp2
python3.11 -m venv /autograder/venv
/autograder/venv/bin/pip install -q --upgrade pip
/autograder/venv/bin/pip install -q -r /autograder/source/requirements.txt -c /autograder/source/constraints.txt
/autograder/venv/bin/pip install -q --no-deps --no-build-isolation -e /autograder/source
# Can this image grade? (bubblewrap needs user namespaces or root with CAP_SYS_ADMIN; the seccomp
# filter needs libseccomp: without it this stops the build)
cd /autograder/source && /autograder/venv/bin/python -c \
  "from autograder.sandbox.sandbox import check_available; check_available(); print('sandbox ok')"

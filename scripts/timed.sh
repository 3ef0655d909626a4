#!/usr/bin/env bash
# timed.sh LABEL COMMAND...: run COMMAND and append "LABEL SECONDS" to build/make-test-blocks.txt,
# so `make test` reports its set-up's time by block beside the tests' (tests/conftest.py).
set -uo pipefail
label=$1; shift
start=$(date +%s%N)
"$@"; status=$?
mkdir -p build
ms=$(( ($(date +%s%N) - start) / 1000000 ))
printf '%s %d.%03d\n' "$label" $((ms / 1000)) $((ms % 1000)) >> build/make-test-blocks.txt
exit $status

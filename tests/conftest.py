"""The suite's budget, visible: seconds per block (each test module, and the set-up steps that
`make test` timed before pytest started) close the report, beside pytest's slowest tests."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# `make test` writes one "label seconds" line per set-up step here (scripts/timed.sh)
SETUP_TIMES = ROOT / "build" / "make-test-blocks.txt"
_seconds: dict[str, float] = defaultdict(float)
_shared: dict[str, float] = defaultdict(float)  # session fixtures several modules use: a block each
_started = time.monotonic()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start, shared = time.monotonic(), sum(_shared.values())
    yield
    # a shared fixture made during this test is its own block, not the module's that came first
    _seconds[item.nodeid.split("::")[0]] += time.monotonic() - start - (sum(_shared.values()) - shared)


def pytest_terminal_summary(terminalreporter):
    if not _seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time by block")
    if os.environ.get("ENCDEC_SETUP_TIMED") and SETUP_TIMES.is_file():
        for line in SETUP_TIMES.read_text().splitlines():
            label, seconds = line.rsplit(" ", 1)
            write(f"{float(seconds):8.1f} s  set-up: {label}")
    blocks = {**_seconds, **{f"{name} (shared, tests/conftest.py)": t for name, t in _shared.items()}}
    for module, seconds in sorted(blocks.items(), key=lambda kv: -kv[1]):
        write(f"{seconds:8.1f} s  {module}")
    write(f"{time.monotonic() - _started:8.1f} s  pytest in all")


def pytest_sessionstart(session):
    """The fixture submissions are products of their table, made into build/ (never committed):
    made again here whenever the table, the release or the solutions changed, so every test, and
    a test's parametrisation, reads current ones."""
    from autograder.fixtures.make import built

    built()


@pytest.fixture(scope="session")
def stock_batch(request, tmp_path_factory):
    """The fixture submissions through stock `nbgrader autograde`, graded once a session
    (grading_course.stock_batch): the union of what the modules that use it name in their
    `STOCK_BATCH` (handed in from the English release) and `STOCK_BATCH_ZH` (from the Chinese
    one), among the tests this session runs: a grading_course.StockBatch."""
    from grading_course import stock_batch as grade

    modules = {item.module for item in request.session.items if "stock_batch" in getattr(item, "fixturenames", ())}
    names = sorted({n for m in modules for n in getattr(m, "STOCK_BATCH", ())})
    zh = sorted({n for m in modules for n in getattr(m, "STOCK_BATCH_ZH", ())})
    start = time.monotonic()
    try:
        return grade(tmp_path_factory.mktemp("stock-batch"), names, zh)
    finally:
        _shared["stock nbgrader batch"] += time.monotonic() - start

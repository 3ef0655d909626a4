"""The suite's budget, visible: seconds per block (each test module, and the set-up steps that
`make test` timed before pytest started) close the report, beside pytest's slowest tests.

`make test` runs the suite on two pytest-xdist workers (`TEST_WORKERS=0`: one process): a module is one unit of
work, so its module fixtures are made once, and the modules of one of `GROUPS` (they share a session
fixture or a fixed port) are one unit together. The long units are handed out first (`LONG_FIRST`)."""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import pytest

# The browser tests' fixtures (chromium, site, open_page), found by name in every module.
pytest_plugins = ["browser_support"]

# One OMP thread in each test process, as the grader has (autograder/environment.py), unless told
# otherwise: two xdist workers each spinning two OMP threads on two cores made the decoding judges'
# tests 35x slower (test_grading_structure: 643 s beside test_grading_decoding, 17 s alone). Set
# before any test module imports torch; kernels and commands the tests start inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]
# `make test` writes one "label seconds" line per set-up step here (scripts/timed.sh)
SETUP_TIMES = ROOT / "build" / "make-test-blocks.txt"
# Modules that share a session fixture or a fixed port, or must not run beside each other: each
# group runs in one worker, one module after another. The stock batch (`stock_batch` below) is made
# once for the modules that read it (a session fixture is made once a worker: a module that reads
# it outside the group has a second worker grade the whole batch again); the hostile fixtures
# connect to payloads.LISTEN_PORTS, where one listener at a time counts them; and the sandbox's batch
# tests beside the stock batch once saw a fork server fail to start (exit 1) and a memory fixture's
# outcome change, so the two batches take turns.
GROUPS = {
    "grading-batches": [
        "tests/test_sandbox.py",
        "tests/test_sandbox_hostile.py",
        "tests/test_unprivileged.py",
        "tests/test_grading_fixtures.py",
        "tests/test_grading_intake.py",
        "tests/test_message_cap.py",
        "tests/test_exercises_zh.py",
        "tests/test_report.py",
        "tests/test_ontime.py",
        "tests/test_hub.py",
    ]
}
GROUP_OF = {module: group for group, modules in GROUPS.items() for module in modules}
# the units (a group, else a module) that take longest, longest first (the time by block of a
# fresh-clone run): handed out first, so the last unit to start is a short one
LONG_FIRST = [
    "grading-batches",
    "tests/test_browser.py",
    "tests/test_gradescope.py",
    "tests/test_contributing_recipe.py",
    "tests/test_grading_queue.py",
    "tests/test_grading_decoding.py",
    "tests/test_model_broken_js.py",
    "tests/test_model_forward_js.py",
    "tests/test_browser_inert.py",
    "tests/test_formgrader.py",
    "tests/test_feedback_zh.py",
    "tests/test_exercises_notebooks.py",
    "tests/test_browser_reader.py",
    "tests/test_browser_widgets_a11y.py",
    "tests/test_browser_zh.py",
    "tests/test_browser_gallery.py",
]
SHARED = (
    "encdec-shared-block"  # a user property: (SHARED, (name, seconds)) of a session fixture made in a test's set-up
)
_seconds: dict[str, float] = defaultdict(float)
_made: list[tuple[str, float]] = []  # session fixtures made in the set-up under way: (block, seconds)
_started = time.monotonic()


def _unit(nodeid: str) -> str:
    module = nodeid.split("::")[0]
    return GROUP_OF.get(module, module)


def pytest_collection_modifyitems(config, items):
    if not hasattr(config, "workerinput"):  # not an xdist worker: the tests keep their order
        return
    rank = {u: i for i, u in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(_unit(item.nodeid), len(rank)))  # stable: the rest keep their order


def pytest_xdist_make_scheduler(config, log):
    """xdist's scope scheduling with a unit per group or module (`_unit`), in collection order."""
    from xdist.scheduler import LoadScopeScheduling

    class ByUnit(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return ByUnit(config, log)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    """A session fixture made in this set-up goes into the set-up's report (the one xdist sends)."""
    yield
    item.user_properties.extend((SHARED, made) for made in _made)
    _made.clear()


def pytest_runtest_logreport(report):
    """Every phase's seconds to its module (in the process that reports: xdist's controller, or the
    one process); a shared session fixture made in a set-up is a block of its own."""
    shared = [value for name, value in report.user_properties if name == SHARED] if report.when == "setup" else []
    for block, seconds in shared:
        _seconds[f"{block} (shared, tests/conftest.py)"] += seconds
    _seconds[report.nodeid.split("::")[0]] += report.duration - sum(s for _, s in shared)


def pytest_terminal_summary(terminalreporter):
    if not _seconds:
        return
    write = terminalreporter.write_line
    terminalreporter.section("time by block")
    if os.environ.get("ENCDEC_SETUP_TIMED") and SETUP_TIMES.is_file():
        for line in SETUP_TIMES.read_text().splitlines():
            label, seconds = line.rsplit(" ", 1)
            write(f"{float(seconds):8.1f} s  set-up: {label}")
    workers = getattr(terminalreporter.config.option, "numprocesses", None)  # xdist's -n (None without it)
    for block, seconds in sorted(_seconds.items(), key=lambda kv: -kv[1]):
        write(f"{seconds:8.1f} s  {block}")
    write(f"{sum(_seconds.values()):8.1f} s  the blocks together" + (f" (on {workers} workers)" if workers else ""))
    write(f"{time.monotonic() - _started:8.1f} s  pytest in all")


@pytest.hookimpl(tryfirst=True)  # before xdist starts its workers, which find them made
def pytest_sessionstart(session):
    """The fixture submissions are products of their table, made into build/ (never committed):
    made again here whenever the table, the release or the solutions changed, so every test, and
    a test's parametrisation, reads current ones."""
    from autograder.fixtures.make import built

    built()
    if not hasattr(session.config, "workerinput"):  # once, before the workers start
        _bundle_widgets()


def _bundle_widgets() -> None:
    """The widgets' bundles and constants.js, products of their sources (scripts/widgets_bundle.py, under a
    second): made again at every session, so a test never reads a bundle older than the JS it tests.
    Without npm's esbuild (no `make widgets` yet) a widget says so when it is made."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("widgets_bundle", ROOT / "scripts" / "widgets_bundle.py")
    bundle = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bundle)
    out = ROOT / "encdec" / "widgets" / "bundle"
    # a user who may not write the checkout (test_unprivileged's plain user) reads the set-up's bundles
    if bundle.ESBUILD.exists() and os.access(out if out.exists() else out.parent, os.W_OK):
        bundle.build()


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
        _made.append(("stock nbgrader batch", time.monotonic() - start))

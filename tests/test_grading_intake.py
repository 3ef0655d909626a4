"""Bounded at intake (issue 37, autograder/handed_in.py): a notebook handed in past the intake limits
(``Intake``: its bytes, its cells) is never read whole; it is graded 0 as the release with no
answers, the limit and the size found stated in the gradebook and the feedback, through stock
`nbgrader autograde` and through the driver, and the file handed in stays as it is. So is a
submission whose only notebook the exchange's collect left behind (issue 49)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path

import nbformat
import pytest
from grading_course import PY

from autograder import handed_in
from autograder.fixtures import table
from autograder.fixtures.make import graded_notebook
from autograder.repairs import repairs
from autograder.state import grading_state
from encdec.grading import language

ROOT = Path(__file__).resolve().parents[1]
PAST_LIMITS = {"broken_huge_comment": "too_large", "broken_too_many_cells": "too_many_cells"}
STOCK_BATCH = [*PAST_LIMITS, "db_pass_all"]  # graded in the session's stock batch (conftest.py)
RELEASE = ROOT / "exercises" / "decoder_block" / "decoder_block.ipynb"


def test_the_releases_and_the_fixtures_sit_on_the_right_side_of_the_limits():
    limits = handed_in.LIMITS
    for nb in ROOT.glob("exercises/*/*.ipynb"):
        assert nb.stat().st_size < limits.notebook_bytes / 10 and len(nbformat.read(nb, 4).cells) < limits.cells / 10
    assert graded_notebook("broken_huge_comment").stat().st_size > limits.notebook_bytes
    raw = json.loads(graded_notebook("broken_too_many_cells").read_text())
    assert (
        len(raw["cells"]) > limits.cells
        and graded_notebook("broken_too_many_cells").stat().st_size < limits.notebook_bytes
    )


def test_a_file_past_the_byte_limit_is_refused_unread(tmp_path):
    """A sparse 4 GB file: refused from its size, in milliseconds, without the memory to hold it."""
    big = tmp_path / "decoder_block.ipynb"
    with open(big, "wb") as f:
        f.truncate(4_000_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    with pytest.raises(handed_in.Refused) as refused:
        handed_in.read_handed_in(big)
    assert time.monotonic() - start < 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before < 50_000  # KiB: nothing of it was read
    limit_mb = f"{handed_in.LIMITS.notebook_bytes / 1e6:.1f}"
    assert (refused.value.key, refused.value.params) == ("too_large", {"size_mb": "4000.0", "limit_mb": limit_mb})


def test_too_many_cells_are_counted_not_converted(tmp_path):
    nb = nbformat.read(RELEASE, 4)
    nb.cells += [nbformat.v4.new_code_cell("") for _ in range(handed_in.LIMITS.cells + 1 - len(nb.cells))]
    path = tmp_path / "decoder_block.ipynb"
    nbformat.write(nb, path)
    with pytest.raises(handed_in.Refused) as refused:
        handed_in.read_handed_in(path)
    assert refused.value.key == "too_many_cells" and refused.value.params["cells"] == handed_in.LIMITS.cells + 1
    nb.cells.pop()  # at the limit: read
    nbformat.write(nb, path)
    assert len(handed_in.read_handed_in(path).cells) == handed_in.LIMITS.cells


def test_a_fifo_is_unreadable_never_waited_on(tmp_path):
    fifo = tmp_path / "decoder_block.ipynb"
    os.mkfifo(fifo)
    with pytest.raises(ValueError):
        handed_in.read_handed_in(fifo)
    assert len(handed_in.read_handed_in(RELEASE).cells) == len(nbformat.read(RELEASE, 4).cells)


def test_the_repairs_are_worded_in_both_languages_with_the_limit_and_the_size():
    params = {"file": "decoder_block.ipynb", "size_mb": "42.0", "limit_mb": "10.0", "cells": 1143, "limit": 1000}
    for lang in ("en", "zh"):
        with language.speaking(lang):
            assert all(
                p in language.text("repair_too_large", **params) for p in ("42.0", "10.0", "decoder_block.ipynb")
            )
            assert all(p in language.text("repair_too_many_cells", **params) for p in ("1143", "1000"))


# the canonical intake's records (autograder/handed_in.py, autograder/canonical.py): each key's
# parameters, every one of them said in both languages
INTAKE_RECORDS = {
    "too_many_values": {"file": "a.ipynb", "values": 3000017, "limit": 3000000},
    "too_deep": {"file": "a.ipynb", "limit": 1000},
    "source_too_large": {"file": "a.ipynb", "size_mb": "2.4", "limit_mb": "2.0"},
    "untyped": {"field": "nbgrader.grade_id", "cells": 3, "cell": 17},
    "not_handed_in": {"file": "warmup.ipynb"},
    "copies": {"file": "warmup-Copy1.ipynb", "name": "warmup.ipynb", "copies": 2, "others": "warmup (1).ipynb"},
}


@pytest.mark.parametrize("key", INTAKE_RECORDS)
def test_the_intakes_records_say_every_parameter_in_both_languages(key):
    from autograder.repairs import NO_ANSWERS

    params = INTAKE_RECORDS[key]
    for lang in ("en", "zh"):
        with language.speaking(lang):
            text = language.text(f"repair_{key}", **params)
        assert all(str(v) in text for v in params.values()), (lang, text)
    # those grade the release with no answers
    assert (key in NO_ANSWERS) == key.startswith(("too_", "source_", "not_handed_in"))


@pytest.mark.grading
@pytest.mark.parametrize("name", PAST_LIMITS)
def test_stock_autograde_grades_it_zero_with_the_limit_stated(stock_batch, name):
    row = stock_batch.rows[name]
    assert row.actual == 0 == table.grading()[name]["expected_score"]
    graded = stock_batch.autograded(name) / "decoder_block" / "decoder_block.ipynb"
    nb = nbformat.read(graded, nbformat.NO_CONVERT)
    [record] = repairs(nb)
    assert record["key"] == PAST_LIMITS[name]
    html = row.feedback_html.read_text()
    stated = (
        [f"is {record['size_mb']} MB", f"the {record['limit_mb']} MB"]
        if record["key"] == "too_large"
        else [f"has {record['cells']} cells", f"the {record['limit']} a notebook"]
    )
    assert all(s in html for s in stated), stated  # the limit and the size found, in the feedback
    # the release was graded in its place: nothing of the file reaches the autograded notebook or the feedback
    assert graded.stat().st_size < 200_000 and row.feedback_html.stat().st_size < 400_000
    assert stock_batch.rows["db_pass_all"].actual == 11


@pytest.mark.grading
def test_the_driver_grades_them_zero_and_goes_on(tmp_path):
    """Through `python -m autograder.driver`: each notebook past a limit is graded 0 with its reason
    (status graded, not failed), the honest one beside them full marks, the batch exits 0."""
    from test_sandbox_hostile import make_course

    course = make_course(tmp_path)
    subprocess.run(
        [PY, "-m", "nbgrader", "generate_assignment", "decoder_block", "--force"],
        cwd=course,
        check=True,
        capture_output=True,
    )
    for name in STOCK_BATCH:
        sub = grading_state(course).submitted / name / "decoder_block"
        sub.mkdir(parents=True)
        (sub / "decoder_block.ipynb").write_bytes(graded_notebook(name).read_bytes())
    linker = collected_link(tmp_path, course)
    run = subprocess.run(
        [PY, "-m", "autograder.driver", "decoder_block", "--json", "r.json"],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=900,
    )
    results = {r["student"]: r for r in json.loads((course / "r.json").read_text())}
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    for name, key in PAST_LIMITS.items():
        assert (results[name]["status"], results[name]["score"]) == ("graded", 0), results[name]
        graded = grading_state(course).autograded / name / "decoder_block" / "decoder_block.ipynb"
        assert [r["key"] for r in repairs(nbformat.read(graded, nbformat.NO_CONVERT))] == [key]
        handed = grading_state(course).submitted / name / "decoder_block" / "decoder_block.ipynb"
        assert handed.read_bytes() == graded_notebook(name).read_bytes()  # kept as it was
    assert (results["db_pass_all"]["status"], results["db_pass_all"]["score"]) == ("graded", 11)
    # handed in as a link only, collected by the exchange's collect: the blank graded, 0, both said
    assert (results[linker]["status"], results[linker]["score"]) == ("graded", 0), results[linker]
    graded = grading_state(course).autograded / linker / "decoder_block" / "decoder_block.ipynb"
    assert [r["key"] for r in repairs(nbformat.read(graded, nbformat.NO_CONVERT))] == [
        "left_behind_link",
        "left_behind_no_notebook",
    ]


def collected_link(tmp_path: Path, course: Path) -> str:
    """A submission whose only notebook is a link to the solutions (autograder/fixtures/inbound.py's
    notebook_link), handed in by this process's user and collected into ``course`` by the course's
    ``Collect`` as ``nbgrader collect`` runs it; returns the student's name."""
    import pwd

    from nbgrader.auth import Authenticator
    from nbgrader.coursedir import CourseDirectory
    from traitlets.config import Config

    from autograder.exchange import Collect

    student = pwd.getpwuid(os.getuid()).pw_name
    handed = tmp_path / "exchange" / "course" / "inbound" / f"{student}+decoder_block+2026-12-06 10:00:00.000000 UTC+x"
    handed.mkdir(parents=True)
    (handed / "decoder_block.ipynb").symlink_to(ROOT / "solutions" / "decoder_block" / "decoder_block.ipynb")
    cfg = Config()
    cfg.Exchange.root = str(tmp_path / "exchange")
    state = grading_state(course)
    cfg.CourseDirectory.update(
        course_id="course",
        assignment_id="decoder_block",
        root=str(course),
        db_url=state.db_url,
        submitted_directory=str(state.submitted),
        release_directory=str(course / "exercises"),
    )
    Collect(coursedir=CourseDirectory(config=cfg), authenticator=Authenticator(config=cfg), config=cfg).start()
    return student

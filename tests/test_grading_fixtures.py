"""The grader through the real `nbgrader autograde` (run from the repo root, state in the session's
stock batch: tests/conftest.py, tests/grading_course.py): every fixture submission gets its expected
score and its named diagnosis, broken ones do not stop the batch, and the feedback HTML names the
mistake without showing hidden test code."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from autograder import grade_fixtures
from autograder.fixtures import table
from autograder.fixtures.big_messages import SAMPLE
from autograder.fixtures.make import built, graded_notebook, hostile_folder
from autograder.state import grading_state

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.grading
MANIFEST = table.grading()
# ENCDEC_FIXTURES=attacks (the plain-user pass of tests/test_unprivileged.py): the fixtures whose
# code attacks the grader, its process or the batch (cheats, tampering, crashes, hostile output),
# the honest ones, and the bug the tampering tests compare with. The other bugs and styles are
# judged by the same grader code in either sandbox mode, and their kernels do nothing the mode
# changes: the pass as root grades them.
ATTACKS = ("cheat_", "tamper_", "broken_", "hostile_")
# The warm-up's rows: `make test` hands in the solution, the stub and one mistake per part through
# stock nbgrader (the plumbing of each kind of check), and judges every row in process
# (tests/test_grading_warmup.py: the same judges on the same cells, a fraction of the time);
# ENCDEC_FIXTURES_ALL=1 (`make test-all`) hands every row in.
# The warm-up's cheats are judged in process too; the helper file handed in beside the notebook is
# handed to stock nbgrader, since only the sandbox shows that no file but the notebook reaches the kernel.
WARMUP_SAMPLE = (
    "wu_pass_all",
    "wu_stub",
    "wu_bug_kv_length_from_queries",
    "wu_bug_mask_after_softmax",
    "wu_bug_padding_on_queries",
    "wu_bug_sdpa_not_inverted",
    "wu_bug_top_p_crossing_token",
    "cheat_wu_helper_file",
    "wu_download_copies",
)  # two downloads: which one stock nbgrader grades (autograder/handed_in.py)
IN_FULL = os.environ.get("ENCDEC_FIXTURES_ALL") == "1"
# kv_cache's mistakes: `make test` hands in one of each kind of judgement (a structure judged by the
# kernel's CPU time, wrong tokens named, a prefill mistake, a beam-search one) through stock nbgrader,
# where each costs some 13 s of drawing and timing; every mistake is judged in process by the same
# judges (tests/test_grading_structure.py, test_grading_decoding.py, test_grading_beam.py).
# ENCDEC_FIXTURES_ALL=1 (`make test-all`) hands every one in.
KV_SAMPLE = (
    "kv_bug_encoder_every_step",
    "kv_bug_pos_ahead",
    "kv_bug_prefill_no_mask",
    "kv_bug_beam_cache_not_reordered",
)
# Of the kernels that send the grader too much (autograder/fixtures/big_messages.py), one of each cut.
MESSAGE_SAMPLE = {f"hostile_message_{kind}" for kind in SAMPLE}
SELECTED = sorted(
    n
    for n in MANIFEST
    if (
        os.environ.get("ENCDEC_FIXTURES") != "attacks"
        or n.startswith(ATTACKS)
        or n.endswith("_pass_all")
        or n == "db_bug_mlp_skipped"
    )
    and (IN_FULL or not n.startswith(("wu_", "cheat_wu_")) or n in WARMUP_SAMPLE)
    and (IN_FULL or not n.startswith("hostile_message_") or n in MESSAGE_SAMPLE)
    and (IN_FULL or not n.startswith("kv_bug_") or n in KV_SAMPLE)
)


def test_one_table_names_every_built_submission_once():
    """Each row of the table has one name, and each built submission is a row (none left over)."""
    names = [f.name for f in table.FIXTURES]
    assert len(names) == len(set(names)) == len(MANIFEST) + len(table.hostile())
    made = {p.parent.name for p in (built() / "fixtures").glob("*/*.ipynb")}
    made |= {p.name for p in hostile_folder().iterdir()}
    assert made == set(names)


STOCK_BATCH = SELECTED  # graded in the session's stock batch (conftest.py), with other modules' fixtures


@pytest.fixture(scope="module")
def graded(stock_batch):
    return stock_batch, {n: stock_batch.rows[n] for n in SELECTED}


def test_manifest_covers_what_the_grader_must_prove():
    names = set(MANIFEST)
    bugs = [n for n in names if "_bug_" in n]
    assert len(bugs) >= 10
    assert all(MANIFEST[n]["expected_score"] < MANIFEST[n]["max_score"] and MANIFEST[n]["label"] for n in bugs)
    for style in ("db_style", "ts_style", "kv_style"):
        assert MANIFEST[style]["expected_score"] == MANIFEST[style]["max_score"]
    for broken in (
        "broken_raises",
        "broken_infinite_loop",
        "broken_os_exit",
        "broken_invalid_json",
        "tamper_assert_true",
        "tamper_deleted_cell",
        "tamper_patched",
        "tamper_replay",
    ):
        assert broken in names


@pytest.mark.parametrize("name", SELECTED)
def test_fixture_gets_expected_score_and_diagnosis(graded, name):
    _, rows = graded
    row = rows[name]
    assert row.actual == row.expected, f"{name}: expected {row.expected}, got {row.actual}"
    assert row.label_found, f"{name}: label {row.label!r} not among those recorded, {row.labels}"
    assert row.flag_ok, f"{name}: expected flag {row.flag!r}, the gradebook holds {row.flags!r}"


@pytest.mark.parametrize("name", [n for n in SELECTED if "_bug_" in n])
def test_no_fixture_is_named_as_a_mistake_it_does_not_have(graded, name):
    """Every misconception a bug fixture's verdicts name is its own mistake; one whose evidence fits
    several says what was observed and names nothing (read from the keys the grader recorded)."""
    from autograder.judge import labels

    _, rows = graded
    expected = MANIFEST[name]["label"]
    named = {k for k in rows[name].labels if labels.kind(k) == "named"}
    assert named <= {expected}, f"{name} is also named {named - {expected}}"


def test_every_way_to_the_points_without_the_work_scores_below_full():
    cheats = [n for n in MANIFEST if n.startswith("cheat_")]
    assert len(cheats) >= 10
    for n in cheats:
        assert MANIFEST[n]["expected_score"] < MANIFEST[n]["max_score"], n
    # honest work in any style is never flagged
    for n in MANIFEST:
        if n.startswith(("db_", "ts_", "kv_")):
            assert MANIFEST[n]["flag"] is None, n


def test_feedback_names_the_mistake_and_hides_hidden_tests(graded):
    from autograder import judge

    _, rows = graded
    html = " ".join(rows["db_bug_mlp_skipped"].feedback_html.read_text().split())
    assert "MLP was skipped" in html
    assert "expected: shape" in html and "first mismatch at index" in html
    hidden = [c for c, check in judge.checks().items() if check.hidden]
    for name, row in rows.items():
        if row.feedback_html is None:
            continue
        text = row.feedback_html.read_text()
        visible = [c for c, check in judge.checks().items() if c.startswith(f"{row.assignment}.") and not check.hidden]
        assert any(c in text for c in visible), f"{name}: no visible test is shown"
        if name != "hostile_page_markup":  # that row writes the marker in its own cells
            assert "BEGIN HIDDEN TESTS" not in text, name
        assert "_hidden&quot;" not in text, f"{name}: a hidden check call is shown"
        # a diagnosis may name a hidden check, but its code (the quoted call) never shows
        for check_id in hidden:
            for quoted in (f'"{check_id}"', f"&quot;{check_id}&quot;", f"&#34;{check_id}&#34;", f"'{check_id}'"):
                assert quoted not in text, (name, quoted)


def test_hidden_test_markers_in_a_students_cells_are_their_text(graded):
    """The markers mean something in the release's test cells only: written in an answer (unclosed),
    in a cell of the student's (nested) and in Markdown, they are shown as written, the test cells
    still show the placeholder and no hidden code, and the student has a page."""
    _, rows = graded
    html = rows["hostile_page_markup"].feedback_html.read_text()
    assert "### BEGIN HIDDEN TESTS (my notes)" in html.replace("&#39;", "'")  # the answer, as written
    assert html.count("BEGIN HIDDEN TESTS") >= 4  # the answer's, the Markdown cell's and the code cell's two
    assert "hidden test: its code is not shown" in html


def test_hidden_test_code_never_reaches_the_kernel(graded):
    """A submission that prints its input history shows what the kernel ran: no hidden check."""
    batch, rows = graded
    nb = (batch.autograded("hostile_print_history") / "decoder_block" / "decoder_block.ipynb").read_text()
    printed = json.loads(nb)["cells"][-1]["outputs"][0]["text"]
    printed = "".join(printed) if isinstance(printed, list) else printed
    assert "checks.run(" in printed  # the history was printed ...
    assert "BEGIN HIDDEN TESTS" not in printed and "_hidden" not in printed  # ... without a hidden check
    html = rows["hostile_print_history"].feedback_html.read_text()
    assert "BEGIN HIDDEN TESTS" not in html and not re.search(r"decoder_block\.\w+_hidden", html)


def test_tampering_cannot_flip_the_verdict(graded):
    batch, rows = graded
    outputs = grade_fixtures._graded_text(batch.autograded("tamper_patched") / "decoder_block" / "decoder_block.ipynb")
    assert "MLP was skipped" in " ".join(outputs.split())
    assert "passed: all tests passed" not in outputs  # the fake output printed in test cells was discarded
    assert rows["tamper_patched"].actual == rows["db_bug_mlp_skipped"].actual


def test_a_broken_submission_does_not_stop_the_batch(graded):
    """Every submission of the batch is graded, the unreadable and mangled ones too (issue 37)."""
    batch, rows = graded
    assert rows["broken_invalid_json"].actual == 0
    assert all((batch.autograded(n) / r.assignment / f"{r.assignment}.ipynb").exists() for n, r in rows.items())


REPAIRED = [n for n in SELECTED if MANIFEST[n]["repair"]]


@pytest.mark.parametrize("name", REPAIRED)
def test_a_mangled_notebook_is_graded_with_its_repair_stated(graded, name):
    """A notebook nbgrader alone would stop on (or grade to nothing) records its repair, states it at
    the top of the graded notebook and of the feedback, and what was handed in stays as it was."""
    from autograder.repairs import NOTICE_ID, repairs
    from encdec.grading import language

    batch, rows = graded
    row = rows[name]
    nb = json.loads((batch.autograded(name) / row.assignment / f"{row.assignment}.ipynb").read_text())
    assert MANIFEST[name]["repair"] in [r["key"] for r in repairs(_node(nb))]
    assert all(
        f"repair_{r['key']}" in language.MESSAGES["en"] and "forged" not in json.dumps(r) for r in repairs(_node(nb))
    )  # the grader's records only, none the file brought
    assert nb["cells"][0]["id"] == NOTICE_ID  # the instructor reads it at the top of the graded notebook
    html = row.feedback_html.read_text()
    assert html.replace("&#39;", "'").replace("&quot;", '"').count(language.text("repair_head")) == 1
    comments = gradebook_comments(batch, name, row.assignment)  # records, not comment lines: nbgrader's own
    assert set(comments) <= {"No response."}, comments
    handed_in = batch.state(name).submitted / name / row.assignment / graded_notebook(name).name
    assert handed_in.read_bytes() == graded_notebook(name).read_bytes()


def gradebook_comments(batch, name: str, assignment: str) -> list[str]:
    """Every automatic comment of a student's notebook in the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(batch.state(name).db_url) as gb:
        nb = gb.find_submission(assignment, name).notebooks[0]
        return [c.auto_comment for c in nb.comments if c.auto_comment]


def _node(nb: dict):
    import nbformat

    return nbformat.from_dict(nb)


def through_the_driver(tmp_path, names: list[str]) -> None:
    """Fixtures through `python -m autograder.driver` (parallel workers, the zygote): each gets its
    expected score and flag."""
    import shutil
    import subprocess
    import sys

    from nbgrader.api import Gradebook
    from test_sandbox_hostile import make_course

    from autograder.integrity import flagged_submissions

    course = make_course(tmp_path)
    assignments = sorted({MANIFEST[n]["assignment"] for n in names})
    for a in assignments:
        subprocess.run(
            [sys.executable, "-m", "nbgrader", "generate_assignment", a, "--force"],
            cwd=course,
            check=True,
            capture_output=True,
        )
    for n in names:
        a = MANIFEST[n]["assignment"]
        dest = grading_state(course).submitted / n / a
        dest.mkdir(parents=True)
        shutil.copy(graded_notebook(n), dest / graded_notebook(n).name)
        shutil.copytree(ROOT / "exercises" / a / "reference", dest / "reference")
    run = subprocess.run(
        [sys.executable, "-m", "autograder.driver", *assignments, "--workers", "2"],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    db = grading_state(course).db_url
    flags = {f["student"]: str(f["reasons"]) for f in flagged_submissions(db)}
    with Gradebook(db) as gb:
        for n in names:
            spec = MANIFEST[n]
            score = gb.find_submission(spec["assignment"], n).score
            assert score == spec["expected_score"], f"{n}: {score}\n{run.stdout[-2000:]}"
            assert (spec["flag"] in flags.get(n, "")) if spec["flag"] else n not in flags, n


# The matrix (`make test-all`): the driver grades with the same unit and single writer as the
# queue's workers; `make test` has the driver on the hostile batch (tests/test_sandbox_hostile.py),
# on the structure items below, and the writer's integrity flags through the queue
# (tests/test_grading_queue.py).
@pytest.mark.matrix
def test_cheats_score_the_same_through_the_batch_driver(tmp_path):
    through_the_driver(
        tmp_path,
        sorted(n for n in MANIFEST if n.startswith("cheat_"))
        + ["db_pass_all", "ts_style", "kv_style", "kv_float64_preallocated", "kv_prefill_token_by_token"],
    )


# The items judged by cost read the kernel's CPU time from outside it, and the driver's zygote starts
# kernels otherwise than stock nbgrader. One notebook shows both ways a reading could go wrong: a
# prefill fed one token a call loses the prefill part (the cost is seen) and keeps every other
# structure part (no more is counted than the kernel spent); every structure row in the matrix above.
STRUCTURE = ["kv_prefill_token_by_token"]


def test_the_structure_items_score_the_same_through_the_batch_driver(tmp_path):
    through_the_driver(tmp_path, STRUCTURE)


def test_no_active_content_from_a_submission_reaches_the_formgrader_or_the_feedback(graded):
    """The formgrader renders the autograded notebook; students and instructors open the feedback."""
    import re

    from autograder.fixtures.submissions import XSS

    batch, rows = graded
    html = rows["hostile_xss"].feedback_html.read_text()
    active = [
        rf"<script[^>]*>[^<]*{XSS}",  # a script element that would run
        rf"""\son\w+\s*=\s*["']?[^"'>]*{XSS}""",  # an event handler attribute
        rf"""href\s*=\s*["']?\s*javascript:[^"'>]*{XSS}""",  # a javascript: link
    ]
    for pattern in active:
        assert not re.search(pattern, html, re.I), pattern
    assert XSS in html  # the payload is there, as inert text
    nb = json.loads((batch.autograded("hostile_xss") / "decoder_block" / "decoder_block.ipynb").read_text())
    for cell in nb["cells"]:
        text = cell["source"] if cell["cell_type"] == "markdown" else json.dumps(cell.get("outputs", []))
        text = "".join(text) if isinstance(text, list) else text
        assert not re.search(rf"<script[^>]*>[^<]*{XSS}", text, re.I), cell["cell_type"]
        assert "application/javascript" not in text


def test_a_deleted_solution_cell_is_named_in_the_verdict(graded):
    """The solution cell that defines get_subsequent_mask is deleted: the hidden check that needs it
    names it, instead of a bare "did not run to the end"."""
    batch, _ = graded
    text = grade_fixtures._graded_text(
        batch.autograded("tamper_deleted_solution_and_test") / "decoder_block" / "decoder_block.ipynb"
    )
    assert "get_subsequent_mask is not defined in the notebook: the cell that defines it is missing" in " ".join(
        text.split()
    )

"""The formgrader as instructors use it: JupyterLab started on a copy of the course, with its
nbgrader configuration, driven in Chromium with no network. The three assignments are listed;
the autograded submissions show their scores, diagnoses and the flagged one awaiting review; a
manual score is changed through the page and reaches the gradebook and the export. Any page
error, console error or failed local request fails the test.

nbgrader's grading page loads MathJax 2 from a CDN (its template names the URL) and calls it
unconditionally; offline, the test answers that one URL with a stand-in that has the calls the
page makes (`MATHJAX_STAND_IN`), so the page runs as it would online, without typesetting.
"""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from browser_support import PageLog, block_external, browser, jupyterlab, watch_page
from test_sandbox_hostile import HOSTILE, PY, course_base, make_course

from autograder import assignments
from autograder.fixtures.make import BUILT
from autograder.fixtures.page_markup import FIRE, FORMGRADER_PLAIN, FORMGRADER_URLS
from autograder.state import grading_state

pytestmark = [pytest.mark.browser, pytest.mark.grading]
ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = assignments.names()
MATHJAX_CDN = "https://cdnjs.cloudflare.com/ajax/libs/mathjax/**"
MATHJAX_STAND_IN = """
window.MathJax = {
  Hub: {
    Config: function () {},
    Queue: function () {},
    Typeset: function () {},
    Startup: { signal: { Interest: function (f) { setTimeout(function () { f("End"); }, 0); } } },
  },
};
"""
# student -> where its notebook comes from, and its expected total
STUDENTS = {
    "pass_all": (HOSTILE / "submitted" / "pass_all" / "decoder_block" / "decoder_block.ipynb", 11),
    "wrong_block": (HOSTILE / "submitted" / "h_honest_wrong" / "decoder_block" / "decoder_block.ipynb", 5),
    "flagged": (BUILT / "fixtures" / "cheat_db_stack_walk" / "decoder_block.ipynb", 4),  # flagged: reads stack frames
}


@pytest.fixture(scope="module")
def course():
    course = make_course(Path(tempfile.mkdtemp(prefix="formgrader-", dir=course_base())))

    def nbgrader(*args):
        run = subprocess.run([PY, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, (args, run.stderr[-3000:])

    for a in ASSIGNMENTS:
        nbgrader("generate_assignment", a, "--force")
    for student, (notebook, _) in STUDENTS.items():
        folder = grading_state(course).submitted / student / "decoder_block"
        folder.mkdir(parents=True)
        shutil.copy(notebook, folder / "decoder_block.ipynb")
    nbgrader("autograde", "decoder_block")
    yield course
    shutil.rmtree(course, ignore_errors=True)


def gradebook(page, base: str) -> None:
    """The formgrader's list of decoder_block submissions, with the students' names shown."""
    page.goto(base + "/formgrader/gradebook/decoder_block/decoder_block")
    page.locator("table tbody tr td a").first.wait_for()  # filled from the API
    page.get_by_text("Show All Names").click()


def first_failure(course: Path, student: str) -> str:
    """The first line of the first failed check's message in the student's graded notebook."""
    nb = json.loads((grading_state(course).autograded / student / "decoder_block" / "decoder_block.ipynb").read_text())
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" and cell["metadata"].get("nbgrader", {}).get("grade"):
                return out["evalue"]
    raise AssertionError(f"{student}: no failed check in the graded notebook")


def test_formgrader_review_adjust_export(course):
    log = PageLog()
    with jupyterlab(course, timeout_s=120) as base, browser() as chromium:
        context = chromium.new_context(viewport={"width": 1300, "height": 1000})
        block_external(context, log)
        context.route(MATHJAX_CDN, lambda route: route.fulfill(body=MATHJAX_STAND_IN, content_type="text/javascript"))
        page = context.new_page()
        watch_page(page, log)

        page.goto(base + "/formgrader/manage_assignments")
        page.locator("#main-table td.name a").first.wait_for()  # the table is filled from the API
        assert sorted(page.locator("#main-table td.name").all_inner_texts()) == sorted(ASSIGNMENTS)

        gradebook(page, base)
        rows = {}
        for i in range(page.locator("#main-table tr").count()):
            row = page.locator("#main-table tr").nth(i)
            rows[row.locator("td.name a.name-shown").inner_text().strip()] = row
        assert {s: rows[s].locator("td.score").inner_text().strip() for s in STUDENTS} == {
            s: f"{score} / 11" for s, (_, score) in STUDENTS.items()
        }
        needs_review = {s for s, row in rows.items() if row.locator("td.needs-manual-grade .glyphicon-ok").count()}
        assert needs_review == {"flagged"}  # the integrity flag: held for the instructor's review

        page.get_by_role("link", name="wrong_block").first.click()
        page.locator("input.score").first.wait_for()
        page.wait_for_load_state("networkidle")  # its grades and comments loaded, before we leave
        assert first_failure(course, "wrong_block") in page.locator("body").inner_text()

        gradebook(page, base)
        page.get_by_role("link", name="flagged").first.click()
        score = page.locator("input.score").first
        score.wait_for()
        page.wait_for_load_state("networkidle")
        score.fill("0")  # the instructor takes the mask item's point back after review
        with page.expect_response(lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT") as saved:
            score.press("Tab")  # saved through the formgrader's API on change
        assert saved.value.ok
        gradebook(page, base)
        row = page.locator("#main-table tr").filter(has=page.locator("a.name-shown", has_text="flagged"))
        assert row.locator("td.score").inner_text().strip() == "3 / 11"
        context.close()
    assert log.problems() == {}

    export = course / "export.csv"
    run = subprocess.run(
        [PY, "-m", "nbgrader", "export", "--to", str(export)], cwd=course, capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr[-2000:]
    with open(export, newline="") as f:
        scores = {r[3]: r[4 + 1 + ASSIGNMENTS.index("decoder_block")] for r in list(csv.reader(f))[2:]}
    assert scores == {"pass_all": "11", "wrong_block": "5", "flagged": "3"}


def test_no_address_or_name_runs_script(course):
    """Every crafted address of autograder/fixtures/page_markup.py (markup in the path a formgrader
    page writes into its text or a script) is refused (a 404 in plain text) by the course's
    guard (autograder/formgrader_guard.py), and nothing of it runs on load, on a hover of every element
    or a click of every element of the refused page; the honest addresses still answer. A link to the
    formgrader with a course folder outside the server's root (`?path=`) runs nothing of that folder. A student's name that is markup (in the gradebook,
    whoever put it there) is text in the lists and on the grading page that show it."""
    from nbgrader.api import Gradebook

    with Gradebook(grading_state(course).db_url) as gb:
        gb.update_or_create_student(
            "wrong_block", first_name=f"<img src=x onerror={FIRE}>", last_name=f"<svg onload={FIRE}>"
        )
        graded = f"submissions/{gb.find_submission_notebook('decoder_block', 'decoder_block', 'wrong_block').id}"
    fired = []
    with jupyterlab(course, timeout_s=120) as base, browser() as chromium:
        context = chromium.new_context()
        context.route(MATHJAX_CDN, lambda route: route.fulfill(body=MATHJAX_STAND_IN, content_type="text/javascript"))
        page = context.new_page()
        page.on("dialog", lambda dialog: (fired.append(dialog.message), dialog.dismiss()))
        for path in (
            FORMGRADER_URLS + FORMGRADER_PLAIN + ["manage_students", "gradebook/decoder_block/decoder_block", graded]
        ):
            answer = page.goto(f"{base}/formgrader/{path}")
            page.wait_for_load_state("load")
            if path in FORMGRADER_URLS:
                assert answer.status == 404, (path, answer.status)
            else:
                page.wait_for_load_state("networkidle")  # the lists are filled from the API
                assert answer.ok and (
                    path not in FORMGRADER_PLAIN or path.rsplit("/", 1)[-1] in page.locator("body").inner_text()
                ), path
            if page.locator("text=Show All Names").count():
                page.get_by_text("Show All Names").click()
            # every element hovered; on a refused page clicked too (an honest page's buttons grade and release)
            page.evaluate(
                """refused => { for (const el of document.querySelectorAll('body *')) { try {
                el.dispatchEvent(new Event('mouseover', {bubbles: true})); if (refused) el.click(); } catch (e) {} } }""",
                path in FORMGRADER_URLS,
            )
            page.wait_for_timeout(100)
            if page.evaluate("() => window.__fired"):
                fired.append(path)
        # a course folder outside the server's root (a student's): its nbgrader_config.py is never run
        outside = Path(tempfile.mkdtemp(prefix="elsewhere-", dir=course.parent))
        (outside / "nbgrader_config.py").write_text(f"open({str(outside / 'ran')!r}, 'w').close()\n")
        for where in (outside, course / "solutions" / ".." / ".." / outside.name):
            assert page.goto(f"{base}/formgrader?path={where}").status == 404, where
        assert page.goto(f"{base}/formgrader?path={course}").ok and page.url.endswith("/formgrader/manage_assignments")
        context.close()
    assert fired == [] and not (outside / "ran").exists()
    shutil.rmtree(outside)

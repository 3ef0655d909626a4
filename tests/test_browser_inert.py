"""Inert output, in Chromium: the hostile rows whose outputs and Markdown carry active content
(an image whose metadata width is `1 onerror=fetch(...)`, Markdown with a `javascript:` link and a
remote image, SVG with script and onload, HTML with script, iframe, img onerror, meta refresh,
form, link and style, a widget, attachments, raw HTML in a Markdown cell; markup in the integrity flag's
and the repair notes' quotes of a file name, a cell id (after a newline too) and a schema version, in
the notebook's title and kernel name; hidden-test markers in a student's own cells) are graded together by stock
`nbgrader autograde` on a copy of the course, with every address they name moved to a beacon: an
HTTP server on 127.0.0.1 that records every hit. Their feedback pages (`nbgrader generate_feedback`)
and the formgrader's view of each submission are opened in Chromium with a listener on every
request and dialog; on load, and after a click on every element, nothing reaches the beacon, no
request leaves the page's own resources and no script opens a dialog. The same run proves the output cap (tests/test_output_cap.py).
"""

from __future__ import annotations

import atexit
import base64
import functools
import html.parser
import http.server
import json
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
from browser_support import browser, jupyterlab
from test_formgrader import MATHJAX_CDN, MATHJAX_STAND_IN
from test_sandbox_hostile import PY, course_base, make_course

from autograder.fixtures import table
from autograder.fixtures.make import graded_notebook
from autograder.fixtures.payloads import BEACON_PORT, PNG_1PX
from autograder.state import grading_state

pytestmark = pytest.mark.grading
ASSIGNMENT = "decoder_block"
# the rows graded in the one run: active content, and the display flood (tests/test_output_cap.py)
ACTIVE = [
    "hostile_xss",
    "hostile_active_metadata",
    "hostile_markdown_javascript",
    "hostile_active_html",
    "hostile_integrity_comment",
    "hostile_page_markup",
]
STUDENTS = ACTIVE + ["hostile_display_update_flood"]
ATTACHED_SVG = "<svg xmlns='http://www.w3.org/2000/svg' onload=\"fetch('{beacon}/attachment-svg')\"></svg>"


class Beacon(http.server.ThreadingHTTPServer):
    """An HTTP server on 127.0.0.1 (a free port) that records the path of every request."""

    def __init__(self):
        self.hits: list[str] = []
        beacon = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _hit(self):
                beacon.hits.append(f"{self.command} {self.path}")
                self.send_response(204)
                self.end_headers()

            do_GET = do_POST = do_HEAD = do_PUT = _hit

            def log_message(self, *args):
                pass

        super().__init__(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


def submission(name: str, beacon: Beacon) -> str:
    """The row's notebook, every beacon address on the live beacon; the Markdown row's cell also
    carries attachments (an SVG with onload, a PNG) that it shows."""
    text = (
        graded_notebook(name).read_text().replace(f"127.0.0.1:{BEACON_PORT}", f"127.0.0.1:{beacon.server_address[1]}")
    )
    nb = json.loads(text)
    for cell in nb["cells"]:
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and "md-cell-js" in source:
            svg = ATTACHED_SVG.format(beacon=beacon.url).encode()
            cell["attachments"] = {
                "beacon.svg": {"image/svg+xml": base64.b64encode(svg).decode()},
                "pixel.png": {"image/png": PNG_1PX},
            }
            cell["source"] = source + "\n\n![svg](attachment:beacon.svg) ![png](attachment:pixel.png)"
    return json.dumps(nb)


@functools.cache
def inert_course() -> tuple[Path, Beacon]:
    """The rows graded once (one `nbgrader autograde`, one `generate_feedback`), for every test."""
    beacon = Beacon()
    course = make_course(Path(tempfile.mkdtemp(prefix="inert-", dir=course_base())))
    atexit.register(shutil.rmtree, course, True)
    for name in STUDENTS:
        folder = grading_state(course).submitted / name / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / graded_notebook(name).name).write_text(submission(name, beacon))  # under its row's file name
    for args in (
        ["generate_assignment", ASSIGNMENT, "--force"],
        ["autograde", ASSIGNMENT],
        ["generate_feedback", ASSIGNMENT],
    ):
        run = subprocess.run([PY, "-m", "nbgrader", *args], cwd=course, capture_output=True, text=True, timeout=900)
        assert run.returncode == 0, (args, run.stderr[-3000:])
    return course, beacon


def scores(course: Path) -> dict[str, float]:
    from nbgrader.api import Gradebook

    with Gradebook(grading_state(course).db_url) as gb:
        return {s: gb.find_submission(ASSIGNMENT, s).score for s in STUDENTS}


def test_every_row_keeps_its_score():
    course, _ = inert_course()
    expected = table.grading()
    assert scores(course) == {s: expected[s]["expected_score"] for s in STUDENTS}


def feedback_page(course: Path, student: str) -> Path:
    return grading_state(course).feedback / student / ASSIGNMENT / f"{ASSIGNMENT}.html"


class Markup(html.parser.HTMLParser):
    """The active parts of a page's markup: handlers, frames, forms, refreshes, addresses, scripts."""

    ACTIVE_TAGS = {"iframe", "frame", "object", "embed", "form", "base", "link", "svg"}

    def __init__(self, beacon: str):
        super().__init__()
        self.beacon, self.found, self._in_script = beacon, [], False

    def handle_starttag(self, tag, attrs):
        self._in_script = tag == "script"
        for name, raw in attrs:
            value = (raw or "").strip()
            if name.startswith("on") or (
                not value.startswith("#") and (self.beacon in value or "javascript:" in value.lower())
            ):
                self.found.append(f"<{tag} {name}={value!r}>")
        if tag in self.ACTIVE_TAGS or (tag == "meta" and any(n == "http-equiv" for n, _ in attrs)):
            self.found.append(f"<{tag}>")

    def handle_data(self, data):
        if self._in_script and ("fetch(" in data or "encdec_xss_payload" in data):
            self.found.append(f"<script>{data[:80]}")


def active_markup(text: str, beacon: str) -> list[str]:
    parser = Markup(beacon)
    parser.feed(text)
    return parser.found


def test_what_is_rendered_names_no_active_content():
    """The pages' markup (and the autograded notebook's Markdown and rich outputs, which the
    formgrader renders): no handler, frame, form, refresh, script or beacon address from a student
    survives as a tag or an attribute (the student's code is shown as text)."""
    course, beacon = inert_course()
    for student in ACTIVE:
        nb = json.loads((grading_state(course).autograded / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text())
        assert not any(c.get("attachments") for c in nb["cells"]), student
        assert "widgets" not in nb["metadata"], student  # no widget state for a page to load a manager for
        rendered = ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown"]
        rendered += [
            str(o.get("data", {}).get(mime, ""))  # text/plain is shown as text
            for c in nb["cells"]
            if c["cell_type"] == "code"
            for o in c.get("outputs", [])
            for mime in ("text/html", "text/markdown", "image/svg+xml", "application/javascript")
        ]
        assert all(
            set(o.get("metadata", {})) <= {"image/png", "image/jpeg"}
            for c in nb["cells"]
            if c["cell_type"] == "code"
            for o in c.get("outputs", [])
        ), student
        for text in [*rendered, feedback_page(course, student).read_text()]:
            assert active_markup(text, beacon.url) == [], student


# the paths the payloads fetch (autograder/fixtures/payloads.py), e.g. /md-cell-image, /html-onerror
PAYLOAD_PATH = re.compile(r"/(md|html|svg|metadata|attachment|widget|javascript|integrity|repair|nb)-[\w-]+")


class Watch:
    """Every request a page makes, and which of them leave the page's own resources."""

    def __init__(self, own: tuple[str, ...]):
        self.own = own
        self.requests: list[str] = []

    def leaked(self) -> list[str]:
        return [u for u in self.requests if not self.allowed(u)]

    def allowed(self, url: str) -> bool:
        parsed = urlparse(url)
        if PAYLOAD_PATH.search(parsed.path):
            return False  # a payload's own address, wherever it points (the page's own server too)
        if parsed.scheme == "data":
            return url.startswith(("data:image/png;base64,", "data:image/jpeg;base64,"))  # nbconvert's own images
        if parsed.scheme == "about":
            return True
        if url.startswith("https://cdnjs.cloudflare.com/ajax/libs/mathjax/"):
            return True  # the template's MathJax (answered by a stand-in: offline)
        return url.split("#")[0].startswith(self.own)


def watched(context, page, watch: Watch) -> None:
    context.route(MATHJAX_CDN, lambda route: route.fulfill(body=MATHJAX_STAND_IN, content_type="text/javascript"))
    page.on("request", lambda req: watch.requests.append(req.url))
    page.on("popup", lambda popup: watch.requests.append(f"popup {popup.url}"))
    page.on("dialog", lambda dialog: (watch.requests.append(f"dialog {dialog.message}"), dialog.dismiss()))


# click every element of the student's part of the page (all of it for feedback): a link, a button,
# an image, a form; and the events a reader's pointer makes
CLICK_ALL = """selector => {
  let n = 0;
  for (const el of document.querySelectorAll(selector)) {
    for (const type of ["mouseover", "mouseenter", "focus"]) el.dispatchEvent(new Event(type, {bubbles: true}));
    try { el.click(); n++; } catch (e) {}
  }
  for (const form of document.querySelectorAll("form")) { try { form.submit(); } catch (e) {} }
  return n;
}"""


def visit(page, url: str, selector: str) -> int:
    page.goto(url)
    page.wait_for_load_state("load")
    page.wait_for_timeout(700)  # a refresh of 0 s, an onerror, a lazy image
    clicked = page.evaluate(CLICK_ALL, selector)
    page.wait_for_timeout(700)
    return clicked


@pytest.mark.browser
def test_feedback_pages_make_no_request_on_load_or_click():
    course, beacon = inert_course()
    with browser() as chromium:
        for student in ACTIVE:
            path = feedback_page(course, student)
            watch = Watch((path.as_uri(),))
            context = chromium.new_context()
            page = context.new_page()
            watched(context, page, watch)
            clicked = visit(page, path.as_uri(), "body *")
            assert clicked > 100, student  # the whole page was clicked through
            context.close()
            assert watch.leaked() == [], (student, watch.leaked())
    assert beacon.hits == []


@pytest.mark.browser
def test_the_formgrader_view_makes_no_request_on_load_or_click():
    from nbgrader.api import Gradebook

    course, beacon = inert_course()
    with Gradebook(grading_state(course).db_url) as gb:
        ids = {s: gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, s).id for s in ACTIVE}
    with jupyterlab(course, timeout_s=120) as base, browser() as chromium:
        for student, sid in ids.items():
            watch = Watch((base,))
            context = chromium.new_context()
            page = context.new_page()
            watched(context, page, watch)
            # every element of the notebook as the formgrader shows it, none of the formgrader's controls
            clicked = visit(
                page,
                f"{base}/formgrader/submissions/{sid}/?index=0",
                ".cell *:not(input):not(textarea):not(button):not(.btn)",
            )
            assert clicked > 50, student
            context.close()
            assert watch.leaked() == [], (student, watch.leaked())
    assert beacon.hits == []

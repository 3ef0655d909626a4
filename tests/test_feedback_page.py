"""The feedback page (autograder/feedback.py, autograder/templates/feedback/encdec.html.j2): every
string that is not a cell is escaped where the page is drawn, a comment is text with its line breaks
whoever wrote it, a notebook whose page cannot be made gets a short page; hidden-test markers mean
something in the release's test cells only (HideHiddenTests). In process, no grading: milliseconds."""

from __future__ import annotations

import html.parser
from pathlib import Path

import nbformat
from nbconvert.preprocessors import Preprocessor
from traitlets.config import Config

from autograder.feedback import TEMPLATE_BASEDIRS, FeedbackExporter
from autograder.preprocessors import HideHiddenTests
from encdec.grading import language

MARKUP = "x\n<img src=x onerror=alert(1)>\n[a](javascript:alert(2)) ![b](http://127.0.0.1:9/c) <svg onload=alert(3)>"


def exporter(*preprocessors) -> FeedbackExporter:
    c = Config()
    c.FeedbackExporter.extra_template_basedirs = TEMPLATE_BASEDIRS
    c.FeedbackExporter.template_name = "feedback"  # as GenerateFeedback sets them
    c.FeedbackExporter.extra_template_paths = [
        str(Path(TEMPLATE_BASEDIRS[1]).parent / "static" / "node_modules" / "bootstrap" / "dist" / "css")
    ]
    ex = FeedbackExporter(config=c)
    for p in preprocessors:
        ex.register_preprocessor(p, enabled=True)
    return ex


def graded_notebook() -> nbformat.NotebookNode:
    answer = nbformat.v4.new_code_cell("def f():\n    return 1")
    answer.metadata.nbgrader = {
        "solution": True,
        "grade": False,
        "locked": False,
        "grade_id": "f_solution",
        "comment": MARKUP,
    }
    task = nbformat.v4.new_markdown_cell("my answer")
    task.metadata.nbgrader = {
        "solution": True,
        "grade": True,
        "locked": False,
        "grade_id": "essay",
        "points": 1,
        "score": 1,
        "comment": MARKUP,
    }
    return nbformat.v4.new_notebook(cells=[answer, task])


def resources(notebook: str = "decoder_block") -> dict:
    return {"nbgrader": {"notebook": notebook, "score": 1.0, "max_score": 2.0, "late_penalty": 0}}


class Tags(html.parser.HTMLParser):
    """The tags and attributes of a page, and its text."""

    def __init__(self, page: str):
        super().__init__()
        self.tags, self.text = [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)


def test_a_comment_is_text_with_its_line_breaks_whoever_wrote_it():
    page, _ = exporter().from_notebook_node(graded_notebook(), resources())
    parsed = Tags(page)
    assert not [t for t, _ in parsed.tags if t in ("img", "svg")]
    assert not [a for _, a in parsed.tags for k, v in a.items() if k.startswith("on") or "javascript:" in (v or "")]
    assert not [a for _, a in parsed.tags if "127.0.0.1:9" in str(a)]
    assert "".join(parsed.text).count(MARKUP) == 2  # each comment whole, its newlines kept, as text
    assert page.count('style="white-space: pre-wrap"') == 2


def test_the_repairs_notice_is_text_drawn_from_the_records():
    """The notice's cell is Markdown for the formgrader (sanitized there as a student's Markdown is);
    the feedback page draws it from the records, as text: every quote whole and inert."""
    from autograder.repairs import NOTICE_ID, notice, reset

    nb = graded_notebook()
    for c in nb.cells:
        c.metadata.nbgrader.pop("comment")
    records = [
        {"key": "unknown_cell", "cell": MARKUP},
        {"key": "schema", "cell": "a", "version": "<svg/onload=alert()>"},
        {"key": "renamed", "file": "<img src=x onerror=alert(4)>.ipynb", "name": "decoder_block.ipynb"},
    ]
    reset(nb, records)
    cell = nbformat.v4.new_markdown_cell("the cell's own source, sanitized")
    cell.id = NOTICE_ID
    nb.cells.insert(0, cell)
    page, _ = exporter().from_notebook_node(nb, resources())
    parsed = Tags(page)
    assert not [t for t, _ in parsed.tags if t in ("img", "svg")] and "javascript:" not in str(parsed.tags)
    assert notice(records, "en") in "".join(parsed.text)  # the notice whole, its lines kept
    assert "the cell's own source" not in page


def test_the_page_escapes_the_notebooks_name():
    page, _ = exporter().from_notebook_node(graded_notebook(), resources("<b>nb</b>"))
    assert "<b>nb</b> (Score" not in page and "&lt;b&gt;nb&lt;/b&gt; (Score" in page


class Raises(Preprocessor):
    def preprocess(self, nb, resources):
        raise RuntimeError("a step that fails on this notebook")


def test_a_notebook_whose_page_cannot_be_made_gets_a_short_page():
    nb = graded_notebook()
    nb.metadata["encdec"] = {"language": "zh"}
    page, _ = exporter(Raises).from_notebook_node(nb, resources("<img src=x onerror=alert(1)>"))
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    with language.speaking("zh"):
        assert language.text("feedback_short_page", score="1.00", max_score="2.00") in page


def cell(source: str, **flags) -> nbformat.NotebookNode:
    c = nbformat.v4.new_code_cell(source)
    c.metadata.nbgrader = {"grade_id": "c", "grade": False, "solution": False, "locked": False, **flags}
    return c


def hide(c):
    return HideHiddenTests().preprocess_cell(c, {}, 0)[0].source


def test_hidden_test_markers_mean_something_in_test_cells_only():
    marker = "### BEGIN HIDDEN TESTS\nsecret()\n### END HIDDEN TESTS"
    assert (
        hide(cell("visible()\n" + marker, grade=True, points=1)) == "visible()\n# (hidden test: its code is not shown)"
    )
    for answer in ("### BEGIN HIDDEN TESTS\nmine()", "### BEGIN HIDDEN TESTS\n### BEGIN HIDDEN TESTS", marker):
        assert hide(cell(answer, solution=True)) == answer  # an answer's text, shown as written
        assert hide(nbformat.v4.new_code_cell(answer)) == answer  # a cell of the student's own
    for broken in ("### BEGIN HIDDEN TESTS\nsecret()", "### BEGIN HIDDEN TESTS\n### BEGIN HIDDEN TESTS\nsecret()"):
        assert hide(cell(broken, grade=True, points=1)) == "# (hidden test: its code is not shown)"


def test_the_markers_are_those_generate_assignment_cleared():
    """An instructor who set ClearHiddenTests' markers for the release gets them hidden in feedback."""
    from traitlets.config import Config

    config = Config({"ClearHiddenTests": {"begin_test_delimeter": "BEGIN SECRET", "end_test_delimeter": "END SECRET"}})
    source = "for x in xs:\n    # BEGIN SECRET\n    secret(x)\n    # END SECRET\nshown()"
    c = HideHiddenTests(config=config).preprocess_cell(cell(source, grade=True, points=1), {}, 0)[0]
    assert c.source == "for x in xs:\n    # (hidden test: its code is not shown)\nshown()"

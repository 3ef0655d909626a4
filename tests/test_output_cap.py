"""The sandboxed executor caps what the kernel's messages add to the notebook while they arrive:
one budget per cell and one per notebook, charged by every message that changes the notebook
(streams, display data, display updates of a display made in an earlier cell, clear_output,
errors, widget messages). The last test grades the hostile rows that flood the notebook through
stock `nbgrader autograde` and finds no autograded notebook or feedback page over the cap."""

from __future__ import annotations

import json

import nbformat
import pytest

from autograder.sandbox.execute import MESSAGE_COST, SandboxedExecute


def _msg(msg_type: str, content: dict, parent: str = "p") -> dict:
    return {
        "msg_type": msg_type,
        "parent_header": {"msg_id": parent},
        "header": {"msg_type": msg_type},
        "content": content,
    }


def _stream(text: str) -> dict:
    return _msg("stream", {"name": "stdout", "text": text})


def _display(text: str, display_id: str | None = None, update: bool = False) -> dict:
    content = {"data": {"text/plain": text}, "metadata": {}}
    if display_id:
        content["transient"] = {"display_id": display_id}
    return _msg("update_display_data" if update else "display_data", content)


def executor(cells: int = 3, **limits) -> tuple[SandboxedExecute, nbformat.NotebookNode]:
    """An executor in the state nbclient leaves it in when a notebook of `cells` code cells runs."""
    ex = SandboxedExecute(**limits)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("") for _ in range(cells)])
    ex.nb = nb
    ex.reset_execution_trackers()  # what nbclient does before a notebook runs
    ex.reset_output_budget()  # ... and SandboxedExecute
    ex.clear_before_next_output = False  # ... and before each cell
    return ex, nb


def send(ex, nb, index: int, msg: dict):
    return ex.process_message(msg, nb.cells[index], index)


def size(nb) -> int:
    return len(nbformat.writes(nb))


def test_a_flood_of_output_is_dropped_as_it_arrives():
    ex, nb = executor(max_output_bytes=10_000)
    for _ in range(1000):  # 1 MB in 1,000 messages
        send(ex, nb, 0, _stream("x" * 1000))
    outs = nb.cells[0].outputs
    assert sum(len(o.get("text", "")) for o in outs if o.get("name") == "stdout") <= 10_000
    notices = [o for o in outs if o.get("name") == "stderr"]
    assert len(notices) == 1 and "output cut by the grader" in notices[0]["text"]
    assert len(outs) <= 11  # nothing piles up past the budget


def test_each_cell_has_its_own_budget_within_the_notebooks():
    ex, nb = executor(max_output_bytes=5_000, max_notebook_output_bytes=9_000)
    for _ in range(10):
        send(ex, nb, 0, _stream("y" * 1000))
    send(ex, nb, 1, _stream("z" * 1000))
    assert any(o.get("name") == "stderr" for o in nb.cells[0].outputs)
    assert [o["text"] for o in nb.cells[1].outputs] == ["z" * 1000]
    for _ in range(20):  # the notebook's budget ends the next cells' output too
        send(ex, nb, 2, _stream("w" * 1000))
    assert "for the notebook" in nb.cells[2].outputs[-1]["text"]
    assert sum(len(o["text"]) for c in nb.cells for o in c.outputs if o["name"] == "stdout") <= 9_000


def test_display_updates_of_an_earlier_cell_count_once_per_output_they_rewrite():
    """The side door: 100 displays of one id in cell 0, then updates from cell 1, each of which
    nbclient writes into every output of the id (100 copies of 1 MB: 100 MB)."""
    ex, nb = executor(max_output_bytes=1_000_000, max_notebook_output_bytes=2_000_000)
    for _ in range(100):
        send(ex, nb, 0, _display("small", "d"))
    for _ in range(50):
        send(ex, nb, 1, _display("u" * 1_000_000, "d", update=True))
        send(ex, nb, 1, _display("v" * 5_000, "d", update=True))  # 100 copies: 0.5 MB
    assert size(nb) < 2_000_000 + 100_000
    assert not any(o["data"]["text/plain"].startswith("u") for o in nb.cells[0].outputs)
    assert "output cut by the grader" in nb.cells[1].outputs[-1]["text"]


def test_an_update_is_charged_once_per_output_it_rewrites_and_no_more():
    """One update that fits once, of 100 outputs (90 MB written), is refused; once the cell that
    held them cleared its output, the same update rewrites one output, and arrives."""
    ex, nb = executor(max_output_bytes=1_000_000, max_notebook_output_bytes=2_000_000)
    for _ in range(100):
        send(ex, nb, 0, _display("small", "d"))
    send(ex, nb, 1, _display("u" * 900_000, "d", update=True))
    assert size(nb) < 200_000 and {o["data"]["text/plain"] for o in nb.cells[0].outputs} == {"small"}
    ex, nb = executor(max_output_bytes=1_000_000, max_notebook_output_bytes=2_000_000)
    for _ in range(100):
        send(ex, nb, 0, _display("small", "d"))
    send(ex, nb, 0, _msg("clear_output", {"wait": False}))
    send(ex, nb, 0, _display("small", "d"))
    send(ex, nb, 1, _display("u" * 900_000, "d", update=True))
    assert [o["data"]["text/plain"] for o in nb.cells[0].outputs] == ["u" * 900_000]


def test_a_small_update_of_a_display_still_arrives():
    ex, nb = executor()
    send(ex, nb, 0, _display("0 %", "progress"))
    send(ex, nb, 1, _display("100 %", "progress", update=True))
    assert nb.cells[0].outputs[0]["data"]["text/plain"] == "100 %"


def test_clear_output_and_widget_messages_count_and_errors_are_kept_cut():
    ex, nb = executor(max_output_bytes=1_000_000, max_notebook_output_bytes=50 * MESSAGE_COST)
    for _ in range(10_000):  # a flood of clear_output and comm messages ends at the budget
        send(ex, nb, 0, _msg("clear_output", {"wait": False}))
        send(ex, nb, 0, _msg("comm_msg", {"comm_id": "c", "data": {"state": {"x": 1}}}))
    assert ex._notebook_bytes <= 50 * MESSAGE_COST
    # past the budget an error is still kept (its cell must keep failing), cut to a bounded size
    send(
        ex,
        nb,
        1,
        _msg("error", {"ename": "AssertionError", "evalue": "e" * 10_000_000, "traceback": ["t" * 1_000_000] * 1_000}),
    )
    errors = [o for o in nb.cells[1].outputs if o["output_type"] == "error"]
    assert len(errors) == 1 and errors[0]["ename"] == "AssertionError"
    assert len(json.dumps(errors[0])) < 200_000


def test_an_error_added_from_the_reply_counts_against_the_notebook():
    """nbgrader adds the execute reply's error when the kernel sent none: 50 cells whose replies
    carry 1 MB errors leave the notebook within its budget, each cell still failing."""
    ex, nb = executor(cells=50, max_output_bytes=1_000_000, max_notebook_output_bytes=2_000_000)
    for i, cell in enumerate(nb.cells):
        cell.outputs.append(nbformat.v4.new_output("error", ename="ValueError", evalue="e" * 1_000_000, traceback=[]))
        ex.settle_outputs(cell, i)
    assert all(any(o["output_type"] == "error" for o in c.outputs) for c in nb.cells)
    assert size(nb) < 2_000_000 + 50 * 30_000


def test_a_message_nested_too_deep_to_measure_is_refused():
    ex, nb = executor()
    deep = "x" * 100
    for _ in range(40):
        deep = [deep]
    send(ex, nb, 0, _msg("display_data", {"data": {"application/json": deep}, "metadata": {}}))
    assert [o["output_type"] for o in nb.cells[0].outputs] == ["stream"]  # only the notice


def test_what_is_escaped_on_the_feedback_page_is_charged_as_escaped():
    """`&` becomes `&amp;` in the feedback HTML, a newline an indented line in the notebook's JSON:
    a budget of characters would let them grow the page fivefold."""
    ex, nb = executor(max_output_bytes=1_000_000, max_notebook_output_bytes=1_000_000)
    for _ in range(100):
        send(ex, nb, 0, _stream("&\n" * 5_000))  # 10 kB of characters each
    kept = sum(len(o["text"]) for o in nb.cells[0].outputs if o["name"] == "stdout")
    assert 0 < kept <= 1_000_000 / 6


@pytest.mark.grading
def test_no_autograded_notebook_or_feedback_page_passes_the_cap():
    """The display flood (105 outputs of one display id, rewritten with 1 MB from a later cell: once
    a 105 MB notebook and a 105 MB feedback page) graded by stock `nbgrader autograde` and
    `generate_feedback`, in the same run as the active-content rows (tests/test_browser_inert.py)."""
    from test_browser_inert import ASSIGNMENT, STUDENTS, feedback_page, inert_course

    from autograder.fixtures.make import graded_notebook
    from autograder.state import grading_state

    course, _ = inert_course()
    cap = SandboxedExecute.class_traits()["max_notebook_output_bytes"].default_value
    flood = "hostile_display_update_flood"
    notebook = grading_state(course).autograded / flood / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    assert notebook.stat().st_size <= graded_notebook(flood).stat().st_size + cap + 100_000
    assert "output cut by the grader" in notebook.read_text()
    smallest_page = min(feedback_page(course, s).stat().st_size for s in STUDENTS)
    for student in STUDENTS:
        assert feedback_page(course, student).stat().st_size <= smallest_page + cap + 100_000, student

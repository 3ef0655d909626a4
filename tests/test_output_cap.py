"""The sandboxed executor caps a cell's outputs while they stream in, not after the cell."""

from __future__ import annotations

from autograder.sandbox.execute import SandboxedExecute


def _stream(text: str, parent: str = "p") -> dict:
    return {"msg_type": "stream", "parent_header": {"msg_id": parent}, "header": {"msg_type": "stream"},
            "content": {"name": "stdout", "text": text}}


def test_a_flood_of_output_is_dropped_as_it_arrives():
    ex = SandboxedExecute(max_output_bytes=10_000)
    ex.reset_execution_trackers()  # what nbclient does before a notebook runs
    ex.clear_before_next_output = False  # ... and before each cell
    ex._output_bytes = {}
    outs: list = []
    chunk = "x" * 1000
    for _ in range(1000):  # 1 MB in 1,000 messages
        ex.output(outs, _stream(chunk), None, 0)
    kept = sum(len(o.get("text", "")) for o in outs if o.get("name") == "stdout")
    assert kept <= 10_000
    notices = [o for o in outs if o.get("name") == "stderr"]
    assert len(notices) == 1 and "output cut by the grader" in notices[0]["text"]
    assert len(outs) <= 11  # nothing piles up past the budget


def test_each_cell_has_its_own_budget():
    ex = SandboxedExecute(max_output_bytes=5_000)
    ex.reset_execution_trackers()  # what nbclient does before a notebook runs
    ex.clear_before_next_output = False  # ... and before each cell
    ex._output_bytes = {}
    a, b = [], []
    for _ in range(10):
        ex.output(a, _stream("y" * 1000), None, 0)
    ex.output(b, _stream("z" * 1000), None, 1)
    assert any(o.get("name") == "stderr" for o in a)
    assert [o["text"] for o in b] == ["z" * 1000]

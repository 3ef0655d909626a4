"""Gradescope's `results.json` from what `nbgrader autograde` left: the gradebook's scores and
the graded notebook's test-cell outputs (the verdicts of autograder/preprocessors/).

Schema (Gradescope's autograder specification): `{"score", "output", "tests": [{"name",
"score", "max_score", "output", "visibility"}], "stdout_visibility"}`; a test's visibility is
`visible`, or `after_due_date` for an item whose test cell holds hidden tests.
"""

from __future__ import annotations

import json
from pathlib import Path

from nbgrader.preprocessors import ClearHiddenTests

from encdec.grading import language

# nbgrader's own delimiter (ClearHiddenTests' setting, which the course does not change)
HIDDEN_MARK = ClearHiddenTests.class_traits()["begin_test_delimeter"].default_value
VISIBILITIES = {"visible", "hidden", "after_due_date", "after_published"}


def hidden_items(source_notebook: Path) -> set[str]:
    """The grade ids of the source notebook's test cells that hold hidden tests."""
    nb = json.loads(source_notebook.read_text())
    out = set()
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        if meta.get("grade") and HIDDEN_MARK in source:
            out.add(meta["grade_id"])
    return out


def cell_outputs(graded_notebook: Path) -> dict[str, str]:
    """grade id -> the text of its test cell's outputs in the graded notebook."""
    if not graded_notebook.is_file():
        return {}
    nb = json.loads(graded_notebook.read_text())
    out = {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if not meta.get("grade"):
            continue
        parts = []
        for o in cell.get("outputs", []):
            text = o.get("text", "")
            parts.append(text if isinstance(text, str) else "".join(text))
            parts.extend(line for line in o.get("traceback", []))
            if o.get("output_type") in ("execute_result", "display_data"):
                plain = o.get("data", {}).get("text/plain", "")
                parts.append(plain if isinstance(plain, str) else "".join(plain))
        out[meta["grade_id"]] = "\n".join(p.rstrip("\n") for p in parts if p).strip()
    return out


def build(grades: list[tuple[str, float, float]], outputs: dict[str, str], hidden: set[str], note: str = "") -> dict:
    """`results.json` from (grade id, score, max score) per item, in notebook order."""
    tests = []
    for name, score, max_score in grades:
        text = outputs.get(name) or language.text("item_passed" if score == max_score else "item_no_output")
        tests.append(
            {
                "name": name,
                "score": float(score),
                "max_score": float(max_score),
                "output": text,
                "visibility": "after_due_date" if name in hidden else "visible",
            }
        )
    return {
        "score": float(sum(t["score"] for t in tests)),
        "output": note,
        "tests": tests,
        "stdout_visibility": "hidden",
    }


def failed(message: str) -> dict:
    """`results.json` for a submission that could not be graded: 0, and why."""
    return {"score": 0.0, "output": message, "tests": [], "stdout_visibility": "hidden"}


def check_schema(results: dict) -> None:
    """Raise ValueError where ``results`` is not what Gradescope reads."""
    if not isinstance(results.get("score"), float) or not isinstance(results.get("tests"), list):
        raise ValueError("results.json needs a float score and a list of tests")
    for t in results["tests"]:
        if set(t) != {"name", "score", "max_score", "output", "visibility"}:
            raise ValueError(f"a test needs name, score, max_score, output, visibility: {sorted(t)}")
        if t["visibility"] not in VISIBILITIES or not 0 <= t["score"] <= t["max_score"]:
            raise ValueError(f"bad test entry: {t}")

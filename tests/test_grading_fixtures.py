"""The grader through the real `nbgrader autograde` (run from the repo root, state in tmp_path):
every fixture submission gets its expected score and its named diagnosis, broken ones do not stop
the batch, and the feedback HTML names the mistake without showing hidden test code."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from autograder import grade_fixtures  # noqa: E402

pytestmark = pytest.mark.grading
MANIFEST = json.loads((ROOT / "autograder" / "fixtures" / "manifest.json").read_text())


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    work = tmp_path_factory.mktemp("grading")
    rows = grade_fixtures.grade(work, timeout=10)
    return work, {r.name: r for r in rows}


def test_manifest_covers_what_the_grader_must_prove():
    names = set(MANIFEST)
    bugs = [n for n in names if "_bug_" in n]
    assert len(bugs) >= 10
    assert all(MANIFEST[n]["expected_score"] < MANIFEST[n]["max_score"] and MANIFEST[n]["diagnosis"] for n in bugs)
    for style in ("db_style", "ts_style", "kv_style"):
        assert MANIFEST[style]["expected_score"] == MANIFEST[style]["max_score"]
    for broken in ("broken_raises", "broken_infinite_loop", "broken_os_exit", "broken_invalid_json",
                   "tamper_assert_true", "tamper_deleted_cell", "tamper_patched", "tamper_replay"):
        assert broken in names


@pytest.mark.parametrize("name", sorted(MANIFEST))
def test_fixture_gets_expected_score_and_diagnosis(graded, name):
    _, rows = graded
    row = rows[name]
    assert row.actual == row.expected, f"{name}: expected {row.expected}, got {row.actual}"
    assert row.diagnosis_found, f"{name}: diagnosis {row.diagnosis!r} not in the graded outputs"


def test_feedback_names_the_mistake_and_hides_hidden_tests(graded):
    work, rows = graded
    html = " ".join(rows["db_bug_mlp_skipped"].feedback_html.read_text().split())
    assert "MLP was skipped" in html
    assert "expected: shape" in html and "first mismatch at index" in html
    for name, row in rows.items():
        if row.feedback_html is None:
            continue
        text = row.feedback_html.read_text()
        assert "BEGIN HIDDEN TESTS" not in text, name
        assert "_hidden&quot;" not in text, f"{name}: a hidden check call is shown"


def test_tampering_cannot_flip_the_verdict(graded):
    work, rows = graded
    outputs = grade_fixtures._graded_text(work / "autograded" / "tamper_patched" / "decoder_block" / "decoder_block.ipynb")
    assert "MLP was skipped" in " ".join(outputs.split())
    assert "passed: all tests passed" not in outputs  # the fake output printed in test cells was discarded
    assert rows["tamper_patched"].actual == rows["db_bug_mlp_skipped"].actual


def test_a_broken_submission_does_not_stop_the_batch(graded):
    work, rows = graded
    assert rows["broken_invalid_json"].actual in (0, None)
    graded_ok = [n for n, r in rows.items() if n != "broken_invalid_json"]
    assert all((work / "autograded" / n).exists() for n in graded_ok)

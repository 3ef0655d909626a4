"""The class-wide misconception report, built from fixture submissions graded by the real
`nbgrader autograde`: counts per item and verdict match what each fixture is known to have,
students are anonymised, student text is escaped, and a notebook that cannot be read is listed
without stopping the report."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from autograder.fixtures import table
from autograder.judge.labels import PASSED
from autograder.preprocessors import VERDICT_KEY
from autograder.report import collect, write_report
from autograder.report.__main__ import main
from encdec.grading.misconceptions import MISCONCEPTIONS

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.grading
MANIFEST = table.grading()
# a few students per kind of verdict: passed, named twice (a bug and a tampered copy of it),
# observed, partial credit, and a submission that nbgrader cannot read
FIXTURES = [
    "db_pass_all",
    "db_bug_mlp_skipped",
    "tamper_assert_true",
    "db_bug_active_dropout",
    "broken_invalid_json",
    "kv_bug_encoder_every_step",
]
ASSIGNMENTS = sorted({MANIFEST[n]["assignment"] for n in FIXTURES})
SOURCE = ROOT / "solutions"


STOCK_BATCH = FIXTURES  # graded in the session's stock batch (conftest.py)


@pytest.fixture(scope="module")
def graded(stock_batch, tmp_path_factory):
    """These students' submitted and autograded folders, out of the session's stock batch (the
    report reads only them: a class of these students)."""
    work = tmp_path_factory.mktemp("report")
    for name in FIXTURES:
        shutil.copytree(stock_batch.state(name).submitted / name, work / "submitted" / name)
        if stock_batch.autograded(name).is_dir():  # nbgrader writes no copy of a notebook it cannot read
            shutil.copytree(stock_batch.autograded(name), work / "autograded" / name)
    return work


@pytest.fixture(scope="module")
def report(graded, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-out")
    collected, csv_path, html_path = write_report(ASSIGNMENTS, out, SOURCE, graded / "autograded", graded / "submitted")
    with open(csv_path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return collected, rows, html_path.read_text(encoding="utf-8")


def expected_label(name: str) -> str:
    """The label a fixture's failing block item must get: its manifest's key."""
    return MANIFEST[name]["label"] or PASSED


def test_counts_per_item_match_what_each_student_has(report):
    _, rows, _ = report
    graded_db = [n for n in FIXTURES if MANIFEST[n]["assignment"] == "decoder_block" and n != "broken_invalid_json"]
    for item in ("block_output", "block_output_hidden"):
        got = {r["label"]: int(r["students"]) for r in rows if r["assignment"] == "decoder_block" and r["item"] == item}
        assert got == dict(Counter(expected_label(n) for n in graded_db)), item
        assert all(int(r["of_students"]) == len(graded_db) for r in rows if r["item"] == item)
    # every item of the assignment counts every graded student exactly once
    by_item = Counter()
    for r in rows:
        if r["assignment"] == "decoder_block" and r["item"] != "(whole notebook)":
            by_item[r["item"]] += int(r["students"])
    assert set(by_item.values()) == {len(graded_db)}
    kinds = {r["kind"] for r in rows if r["assignment"] == "decoder_block"}
    assert {"passed", "named", "observed", "unreadable"} <= kinds


def test_the_mistakes_by_key_count_each_student_once_in_either_language(report, graded, tmp_path):
    """misconceptions_by_key.csv: per assignment, each key with the students who got it on any item."""
    collected, rows, html = report
    out = tmp_path / "zh"
    write_report(ASSIGNMENTS, out, SOURCE, graded / "autograded", graded / "submitted", lang="zh")
    with open(out / "misconceptions_by_key.csv", newline="", encoding="utf-8") as f:
        keys = list(csv.DictReader(f))
    for a in collected:
        students = {}
        for outcomes in a.outcomes.values():
            for o in outcomes:
                if o.label in MISCONCEPTIONS or o.label.startswith("observed"):
                    students.setdefault(o.label, set()).add(o.student)
        mine = [r for r in keys if r["assignment"] == a.name]
        assert {r["label"]: int(r["students"]) for r in mine} == {k: len(v) for k, v in students.items()}
        assert [int(r["students"]) for r in mine] == sorted((int(r["students"]) for r in mine), reverse=True)
    named = next(r for r in keys if r["label"] == "mlp_skipped")
    assert named["meaning"].startswith("诊断") and named["kind"] == "named"
    assert "mlp_skipped" in html and "mistake (key)" in html


def test_partial_credit_shows_as_a_mean_score_between_zero_and_the_points(report):
    _, rows, _ = report
    row = next(r for r in rows if r["item"] == "structure_hidden")
    assert row["label"] == expected_label("kv_bug_encoder_every_step") and row["kind"] == "named"
    assert 0 < float(row["mean_score"]) < float(row["points"])


def test_no_student_id_reaches_the_report_and_examples_are_numbered(report):
    _, rows, html = report
    text = html + json.dumps(rows)
    for name in FIXTURES:
        assert name not in text, name
    examples = {r["example_student"] for r in rows}
    assert examples and all(e.startswith("student ") for e in examples)
    numbers = {int(e.split()[-1]) for e in examples}
    assert numbers <= set(range(1, len(FIXTURES) + 1))


def test_a_submission_autograde_could_not_read_is_listed(report):
    collected, rows, _ = report
    problems = [r for r in rows if r["item"] == "(whole notebook)"]
    broken = MANIFEST["broken_invalid_json"]["assignment"]
    assert [r["assignment"] for r in problems] == [broken] and "could not be read" in problems[0]["example"]
    assert sum(len(a.problems) for a in collected) == 1


def test_an_unreadable_notebook_is_reported_and_the_rest_still_counted(graded, tmp_path, capsys):
    autograded = tmp_path / "autograded"
    shutil.copytree(graded / "autograded", autograded)
    victim = autograded / "db_bug_mlp_skipped" / "decoder_block" / "decoder_block.ipynb"
    victim.write_text('{"cells": [ broken')
    # a student's output quoting markup and its own id: escaped, and anonymised
    hostile = autograded / "db_pass_all" / "decoder_block" / "decoder_block.ipynb"
    nb = json.loads(hostile.read_text())
    cell = next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == "block_output")
    cell["outputs"].append(
        {
            "output_type": "stream",
            "name": "stdout",
            "text": "<script>alert(1)</script><img src=x onerror=alert(2)> db_pass_all",
        }
    )
    hostile.write_text(json.dumps(nb))
    out = tmp_path / "out"
    assert (
        main(
            [
                "decoder_block",
                "--out",
                str(out),
                "--source",
                str(SOURCE),
                "--autograded",
                str(autograded),
                "--submitted",
                str(graded / "submitted"),
            ]
        )
        == 0
    )
    assert "2 notebook(s) could not be read" in capsys.readouterr().out
    html = (out / "misconceptions.html").read_text()
    assert "<script" not in html.lower() and "<img" not in html.lower() and "&lt;script&gt;" in html
    assert "db_pass_all" not in html and "http://" not in html and "https://" not in html
    with open(out / "misconceptions.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    problems = [r for r in rows if r["item"] == "(whole notebook)"]
    assert len(problems) == 2 and any("could not be read" in r["example"] for r in problems)
    counted = sum(int(r["students"]) for r in rows if r["item"] == "block_output")
    assert counted == len([n for n in FIXTURES if MANIFEST[n]["assignment"] == "decoder_block"]) - 2


def test_notebooks_graded_before_labels_were_recorded_are_unlabelled_not_read(graded, tmp_path):
    """Without the recorded keys a failed item is ``unlabelled``: its text (which the student's code
    may have printed) is never parsed for a label; a pass still counts from its score."""
    autograded = tmp_path / "autograded"
    shutil.copytree(graded / "autograded", autograded)
    stripped = 0
    for path in autograded.glob("*/*/*.ipynb"):
        nb = json.loads(path.read_text())
        for c in nb["cells"]:
            stripped += c["metadata"].pop(VERDICT_KEY, None) is not None
        path.write_text(json.dumps(nb))
    assert stripped > 0
    for a in ASSIGNMENTS:
        new = collect(a, SOURCE, graded / "autograded", graded / "submitted")
        old = collect(a, SOURCE, autograded, graded / "submitted")
        for g, outcomes in old.outcomes.items():
            recorded = {o.student: o.label for o in new.outcomes[g]}
            for o in outcomes:
                assert o.label in ("passed", "unlabelled"), (a, g, o.student, o.label)
                assert (o.label == "passed") <= (recorded[o.student] == "passed"), (a, g, o.student)

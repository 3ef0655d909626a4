"""Feedback at submission: the Gradescope archive (autograder/gradescope/) built, unpacked into a
folder shaped like Gradescope's `/autograder`, and its `run_autograder` run on fixture
submissions; every score must be the one `nbgrader autograde` gives (the fixture table), and
results.json must follow Gradescope's schema. The archive for the Chinese release
(`--lang zh`) scores a submission of that release exactly as the English archive scores the
English one, and its feedback is in Chinese."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from autograder import assignments
from autograder.fixtures import table
from autograder.fixtures.make import graded_notebook
from autograder.gradescope import build, results
from encdec.grading.misconceptions import MISCONCEPTIONS

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = table.grading()
ASSIGNMENTS = assignments.names()
# what the run must carry over from nbgrader's, each once: a full score, a named bug (the Chinese
# archive is compared on it), an integrity flag, an unreadable notebook. Every fixture goes through
# `nbgrader autograde` in tests/test_grading_fixtures.py, and every assignment's archive is the same
# code on other files (test_every_archive_holds_what_grading_needs_and_nothing_more); one Gradescope
# run costs a fresh grader, ~15 s.
CASES = {"decoder_block": ["db_pass_all", "db_bug_mask_after_softmax", "cheat_db_ref_forward", "broken_invalid_json"]}
if os.environ.get("ENCDEC_GRADESCOPE_ALL"):  # `make gradescope-check`: every fixture (about 15 minutes)
    CASES = {a: sorted(n for n, spec in MANIFEST.items() if spec["assignment"] == a) for a in ASSIGNMENTS}


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    out = tmp_path_factory.mktemp("gradescope")
    return {a: build.archive(a, out) for a in ASSIGNMENTS}


@pytest.fixture(scope="module")
def archive_zh(tmp_path_factory):
    """The decoder block's archive for the Chinese release."""
    return build.archive("decoder_block", tmp_path_factory.mktemp("gradescope-zh"), "zh")


@pytest.fixture(scope="module")
def graded(archives, tmp_path_factory):
    """fixture -> the results.json of its English submission, each run once in the module."""
    done = {}

    def run(name: str) -> dict:
        if name not in done:
            a = MANIFEST[name]["assignment"]
            done[name] = run_archive(
                archives[a],
                tmp_path_factory.mktemp(name) / "autograder",
                a,
                graded_notebook(name).read_text(encoding="utf-8"),
            )
        return done[name]

    return run


def unpack(archive: Path, root: Path) -> Path:
    """As Gradescope does: the archive into `source/`, `run_autograder` copied next to it."""
    with zipfile.ZipFile(archive) as z:
        z.extractall(root / "source")
        modes = {i.filename: i.external_attr >> 16 for i in z.infolist()}
    for name in ("setup.sh", "run_autograder"):
        assert modes[name] & 0o111, f"{name} must be executable"
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    os.chmod(root / "run_autograder", 0o755)
    return root


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_every_archive_holds_what_grading_needs_and_nothing_more(archives, assignment):
    with zipfile.ZipFile(archives[assignment]) as z:
        names = z.namelist()
        assert json.loads(z.read("gradescope.json")) == {"assignment": assignment, "language": "en"}
        refs = sorted(n for n in names if n.startswith("exercises/"))
        ours = ROOT / "exercises" / assignment / "reference"
        assert refs == sorted(f"exercises/{assignment}/reference/{p.name}" for p in ours.glob("*.npz"))
        assert all(z.read(n) == (ours / Path(n).name).read_bytes() for n in refs)
        for script in ("setup.sh", "run_autograder"):
            assert subprocess.run(["bash", "-n"], input=z.read(script).decode(), text=True).returncode == 0, script
    assert {
        "setup.sh",
        "run_autograder",
        "gradescope.json",
        "nbgrader_config.py",
        "constraints.txt",
        f"solutions/{assignment}/{assignment}.ipynb",
        f"build/grading-edition/{assignment}/STAMP",
    } <= set(names)
    assert any(n.startswith("encdec/") for n in names) and any(n.startswith("autograder/sandbox/") for n in names)
    others = [f"solutions/{a}/" for a in ASSIGNMENTS if a != assignment]
    assert not [
        n
        for n in names
        if "/fixtures/" in n
        or "/hostile/" in n
        or "course-secret" in n
        or "gradebook.db" in n
        or n.startswith(tuple(others))
        or "__pycache__" in n
    ]


def run_archive(archive: Path, root: Path, assignment: str, notebook: str) -> dict:
    """Gradescope's run of one submission (the notebook's text) with ``archive``: results.json."""
    root = unpack(archive, root)
    (root / "submission").mkdir()
    (root / "submission" / f"{assignment}.ipynb").write_text(notebook, encoding="utf-8")
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), ENCDEC_PYTHON=sys.executable)
    run = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-3000:]
    data = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
    results.check_schema(data)
    return data


@pytest.mark.grading
@pytest.mark.parametrize("name", [n for names in CASES.values() for n in names])
def test_run_autograder_scores_like_nbgrader(graded, name):
    spec = MANIFEST[name]
    data = graded(name)
    assert data["score"] == spec["expected_score"], (name, data)
    if data["tests"]:  # a notebook that could not be read has no tests, and says why
        assert sum(t["max_score"] for t in data["tests"]) == spec["max_score"]
        hidden = [t["name"] for t in data["tests"] if t["visibility"] == "after_due_date"]
        assert hidden and all("hidden" in n for n in hidden), hidden  # the hidden items, after the due date
        if spec["label"] in MISCONCEPTIONS:  # the key's sentence is what the student reads
            said = " ".join(" ".join(t["output"] for t in data["tests"]).split())
            assert " ".join(MISCONCEPTIONS[spec["label"]].split()) in said
    else:
        assert spec["expected_score"] == 0 and "could not be graded" in data["output"]
    if spec.get("flag"):
        assert "instructor's review" in data["output"]


def test_the_chinese_archive_has_the_chinese_release_references(archive_zh):
    with zipfile.ZipFile(archive_zh) as z:
        assert json.loads(z.read("gradescope.json")) == {"assignment": "decoder_block", "language": "zh"}
        refs = sorted(n for n in z.namelist() if n.startswith("exercises/"))
        ours = ROOT / "exercises" / "zh" / "decoder_block" / "reference"
        assert refs == sorted(f"exercises/decoder_block/reference/{p.name}" for p in ours.glob("*.npz"))
        assert all(z.read(n) == (ours / Path(n).name).read_bytes() for n in refs)
        assert not [n for n in z.namelist() if n.startswith("exercises/zh")]


@pytest.mark.grading
def test_the_chinese_archive_scores_alike_and_gives_feedback_in_chinese(graded, archive_zh, tmp_path):
    """A known bug handed in from each release to its archive: the same items and scores, the
    diagnosis in each release's language (the English run is test_run_autograder_scores_like_nbgrader's)."""
    from grading_course import zh_submission

    from encdec.grading.misconceptions_zh import MISCONCEPTIONS_ZH

    name, bug = "db_bug_mask_after_softmax", "mask_after_softmax"
    a = MANIFEST[name]["assignment"]
    en = graded(name)
    zh = run_archive(archive_zh, tmp_path / "zh", a, zh_submission(name))
    assert en["score"] == zh["score"] == MANIFEST[name]["expected_score"]
    assert [(t["name"], t["score"], t["max_score"], t["visibility"]) for t in en["tests"]] == [
        (t["name"], t["score"], t["max_score"], t["visibility"]) for t in zh["tests"]
    ]
    said_en, said_zh = ("".join("".join(t["output"] for t in r["tests"]).split()) for r in (en, zh))
    assert "".join(MISCONCEPTIONS[bug].split()) in said_en and not re.search(r"[\u4e00-\u9fff]", said_en)
    assert "".join(MISCONCEPTIONS_ZH[bug].split()) in said_zh and "Diagnosis" not in said_zh


def test_results_refuse_what_gradescope_cannot_read():
    good = results.build([("a", 1.0, 2.0), ("b_hidden", 0.0, 1.0)], {"a": "half"}, {"b_hidden"})
    results.check_schema(good)
    assert [t["visibility"] for t in good["tests"]] == ["visible", "after_due_date"] and good["score"] == 1.0
    for bad in (
        {"score": 1, "tests": []},
        {"score": 1.0, "tests": [{"name": "a"}]},
        {"score": 1.0, "tests": [{"name": "a", "score": 3.0, "max_score": 2.0, "output": "", "visibility": "visible"}]},
    ):
        with pytest.raises(ValueError):
            results.check_schema(bad)


def test_the_wrapper_speaks_the_archive_language(archives, archive_zh, tmp_path):
    """results.json's own lines (an item's fallback, a submission that cannot be graded) come from
    the message table, in the archive's release language."""
    from encdec.grading import language

    cjk = re.compile(r"[\u4e00-\u9fff]")
    for lang in ("en", "zh"):
        with language.speaking(lang):
            fallbacks = [t["output"] for t in results.build([("a", 1.0, 1.0), ("b", 0.0, 1.0)], {}, set())["tests"]]
        assert fallbacks == [language.MESSAGES[lang]["item_passed"], language.MESSAGES[lang]["item_no_output"]]
        root = unpack(archives["decoder_block"] if lang == "en" else archive_zh, tmp_path / lang)
        (root / "submission").mkdir()  # nothing uploaded: no notebook to grade
        env = dict(os.environ, AUTOGRADER_ROOT=str(root), ENCDEC_PYTHON=sys.executable)
        run = subprocess.run([str(root / "run_autograder")], env=env, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr[-3000:]
        data = json.loads((root / "results" / "results.json").read_text(encoding="utf-8"))
        assert data["score"] == 0.0 and "decoder_block.ipynb" in data["output"]
        assert bool(cjk.search(data["output"])) == (lang == "zh"), data["output"]
    assert language.current() == "en"

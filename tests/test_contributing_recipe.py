"""CONTRIBUTING.md's recipe "Add an exercise", followed to the letter in a copy of the project: a
throwaway fourth assignment (`mask_drill`: the causal mask alone) gets its instructor notebook,
its judge module and its fixture rows, and nothing else is edited. `make exercises` must then
release it, and the grading tests must grade it, with no list anywhere typed again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
NAME = "mask_drill"
pytestmark = pytest.mark.grading

# Step 4: the grader side (the mask's inputs, reference and judge are the decoder block's own).
JUDGE = f'''"""Grader side of the throwaway `{NAME}` exercise (CONTRIBUTING.md's recipe test)."""
from encdec import attention as A

from .core import Check
from .decoder_block import _build_mask, _judge_mask, _mask_variants

CHECKS: list[Check] = []
for _cid, _hidden, _seed in (("{NAME}.mask", False, 1101), ("{NAME}.mask_hidden", True, 0)):
    _c = Check(id=_cid, title="get_subsequent_mask", task="get_subsequent_mask(seq)", kind="mask",
               hidden=_hidden, seed=_seed, build=(lambda s, h=_hidden: _build_mask(s, h)),
               wire=lambda inp: ({{}}, {{"seq": inp["seq"].numpy()}}),
               reference=lambda inp: {{"mask": A.get_subsequent_mask(inp["seq"]).numpy()}}, variants=_mask_variants)
    _c.judge = _judge_mask(_c)
    CHECKS.append(_c)
'''

# Step 5: the fixture rows (added to the table, as the recipe says).
FIXTURE_ROWS = f'''
    Fixture("md_pass_all", assignment="{NAME}", score=2, label=None, edits={{}}),
    Fixture("md_bug_mask_inverted", assignment="{NAME}", score=0, label="mask_inverted", edits={{
        "mask_solution": [("torch.triu(torch.ones((K, K), dtype=torch.bool), diagonal=1)",
                           "torch.tril(torch.ones((K, K), dtype=torch.bool))")]}}),'''


def _copy_project(dest: Path) -> None:
    """The project's files as a fresh clone has them, plus the built venv (linked); its own build/."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    (dest / ".venv").symlink_to(ROOT / ".venv")


def _instructor_notebook(dest: Path) -> None:
    """Step 2: the instructor notebook, made of the decoder block's first part (the mask), and
    its Chinese instructions."""
    nb = json.loads((ROOT / "solutions" / "decoder_block" / "decoder_block.ipynb").read_text())
    keep = []
    for cell in nb["cells"]:
        gid = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if cell["cell_type"] == "markdown" and "## 2." in "".join(cell["source"]):
            break
        if gid is None or gid.startswith("mask"):
            cell["source"] = "".join(cell["source"]).replace("decoder_block.", f"{NAME}.")
            keep.append(cell)
    nb["cells"] = keep
    nb["metadata"]["encdec"]["targets"] = ["encdec.attention.get_subsequent_mask"]
    folder = dest / "solutions" / NAME
    folder.mkdir(parents=True)
    (folder / f"{NAME}.ipynb").write_text(json.dumps(nb, indent=1) + "\n")
    # its Chinese instructions: the same markdown cells, so the decoder block's translations
    zh = yaml.safe_load((ROOT / "solutions" / "decoder_block" / "zh.yml").read_text(encoding="utf-8"))
    ids = [c["id"] for c in keep if c["cell_type"] == "markdown"]
    (folder / "zh.yml").write_text(yaml.safe_dump({i: zh[i] for i in ids}, allow_unicode=True), encoding="utf-8")


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    dest = tmp_path_factory.mktemp("recipe")
    _copy_project(dest)
    _instructor_notebook(dest)
    (dest / "autograder" / "judge" / f"{NAME}.py").write_text(JUDGE)
    fixtures = dest / "autograder" / "fixtures" / "table.py"
    text = fixtures.read_text()
    anchor = "\nFIXTURES: list[Fixture] = ["
    assert anchor in text, "table.py no longer has the place the recipe adds rows after"
    fixtures.write_text(text.replace(anchor, anchor + FIXTURE_ROWS, 1))
    env = {**os.environ, "PYTHONPATH": str(dest)}  # the copy's packages, not the installed ones
    run = subprocess.run(
        ["make", "-s", "-o", ".venv/.installed", "exercises"],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    installed = subprocess.run(
        [sys.executable, "-c", "import autograder; print(autograder.__file__)"], cwd="/", capture_output=True, text=True
    ).stdout
    assert installed.startswith(str(ROOT)), f"the copy re-installed the shared venv's package: {installed}"
    return dest, env


def test_make_exercises_releases_the_new_assignment(course):
    dest, env = course
    listed = subprocess.run(
        [sys.executable, "-m", "autograder.assignments"], cwd=dest, env=env, check=True, capture_output=True, text=True
    ).stdout
    assert f"{NAME}\t2" in listed.splitlines()  # its points, from its own grade cells
    release = json.loads((dest / "exercises" / NAME / f"{NAME}.ipynb").read_text())
    text = json.dumps(release)
    assert "BEGIN SOLUTION" not in text and "BEGIN HIDDEN TESTS" not in text
    assert (dest / "exercises" / NAME / "reference" / f"{NAME}.mask.npz").is_file()
    assert (dest / "exercises" / "zh" / NAME / f"{NAME}.ipynb").is_file()  # and its Chinese release
    table = "from autograder.fixtures import table; print(table.grading()['md_pass_all']['max_score'])"
    top = subprocess.run([sys.executable, "-c", table], cwd=dest, env=env, check=True, capture_output=True, text=True)
    assert top.stdout.split() == ["2"]


def test_the_grading_tests_pick_it_up(course):
    """The tests made per assignment run on it, and the table's rows grade to their scores. (The
    regeneration tests loop over the same list, `python -m autograder.assignments`, which names it:
    above; in this copy they would only repeat the commands `make exercises` has just run.)"""
    dest, env = course
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-v",
            "-p",
            "no:cacheprovider",
            "tests/test_grading_references.py",
            "tests/test_exercises_notebooks.py",
            "-k",
            f"{NAME} or release_hides",
        ],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = run.stdout[-4000:] + run.stderr[-2000:]
    assert run.returncode == 0, out
    assert f"test_solution_passes_and_stub_says_not_implemented[{NAME}] PASSED" in run.stdout, out
    graded = subprocess.run(
        [sys.executable, "autograder/grade_fixtures.py", "--only", "md_pass_all", "md_bug_mask_inverted"],
        cwd=dest,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert graded.returncode == 0, graded.stdout[-3000:] + graded.stderr[-3000:]
    rows = {line.split()[0]: line.split() for line in graded.stdout.splitlines() if line.startswith("md_")}
    assert rows["md_pass_all"][1:3] == ["2.0", "2.0"] and rows["md_bug_mask_inverted"][1:3] == ["0.0", "0.0"], (
        graded.stdout
    )

"""Issue 50, invariant 2: in an assessed term, what students are given holds no graded answer.

`make student-release ASSESSED=1` builds the wheel from the assessed edition of the package
(autograder/assessed.py); the no-answer test (tests/answers_given.py) searches every file of the
release, every member of its wheel, for every graded answer. The detector itself is held to the
package, where it must find each answer, and to a copy of it re-indented with its comments gone.
The site is searched by tests/test_assessed_site.py (`make test-assessed` builds it assessed).
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import answers_given
import pytest

from autograder import assessed, edition

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent


# ASSESSED -> the exercises a student can work on with that release's wheel: their visible checks
# run only given code that answers no open exercise. At the term's start (1) kv_cache's and
# target_slicing's run the given decoder, whose DecoderBlock.forward is decoder_block's answer and so
# is folded out too; a later release, once decoder_block and the warm-up are closed, names the two
# still open (the exhaustive variant, marker matrix).
TERMS = {"1": ("decoder_block", "warmup"), "kv_cache,target_slicing": ("kv_cache", "target_slicing")}


@pytest.fixture(scope="module", params=[pytest.param(s, marks=[pytest.mark.matrix] if s != "1" else []) for s in TERMS])
def setting(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def release(setting, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("assessed")
    made = subprocess.run(
        [
            "make",
            "-s",
            "student-release",
            f"ASSESSED={setting}",
            f"STUDENT={tmp / 'student'}",
            f"STUDENT_STAGE={tmp / 'stage'}",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-3000:]
    return tmp / "student"


def folded(setting: str) -> dict[str, tuple[str, ...]]:
    """The answers a setting folds out: those of an assignment it keeps open."""
    return {n: w for n, w in assessed.answers().items() if assessed.still_open(setting) & set(w)}


def test_a_later_release_folds_out_only_the_open_assignments_answers(tmp_path):
    """Cheap, without the wheel: the edition of a later release keeps the closed assignments' answers
    and none of the open ones'."""
    assessed.build(tmp_path / "encdec", "kv_cache,target_slicing")
    held = set().union(*answers_given.scan(tmp_path).values())
    assert held and not held & set(folded("kv_cache,target_slicing"))
    assert "encdec.model.DecoderBlock.forward" in held and "encdec.generate.greedy_decode" not in held


def test_a_stub_names_the_exercise_that_asks_for_it_in_every_language():
    """What a launched chapter's cell shows when it calls a folded answer: whose exercise it is."""
    from encdec.grading.messages import MESSAGES

    space: dict = {}
    exec(f"def greedy_decode(*args):\n    {assessed.stub('encdec.generate.greedy_decode', ('kv_cache',))}", space)
    with pytest.raises(NotImplementedError) as raised:
        space["greedy_decode"]()
    for lang in MESSAGES:
        assert MESSAGES[lang]["yours_to_write"].format(name="greedy_decode", exercises="kv_cache") in str(raised.value)


@pytest.fixture(scope="module")
def package(release, tmp_path_factory) -> Path:
    """The assessed wheel unpacked: a folder to put on PYTHONPATH."""
    out = tmp_path_factory.mktemp("wheel")
    zipfile.ZipFile(next(release.glob("encdec-*.whl"))).extractall(out)
    return out


def test_every_target_of_every_assignment_is_an_answer():
    found = assessed.answers()
    for a in edition.assignments():
        assert all(a in found[t] for t in edition.targets(a)), a
    assert all(answers_given.distinctive()[name] for name in found), "an answer the search cannot see"


def test_the_search_finds_every_answer_in_the_package_however_it_is_laid_out(tmp_path):
    assert set().union(*answers_given.scan(ROOT / "encdec").values()) == set(assessed.answers())
    # the same code with its comments gone, unparsed (other quotes, other line breaks) and as a page shows it
    for path in (ROOT / "encdec").glob("*.py"):
        plain = ast.unparse(ast.parse(path.read_text()))
        (tmp_path / f"{path.stem}.html").write_text(
            "<pre>" + "".join(f"<span>{c}</span>" for c in plain.replace("&", "&amp;").replace("<", "&lt;")) + "</pre>"
        )
    assert set().union(*answers_given.scan(tmp_path).values()) == set(assessed.answers())


def test_the_assessed_release_holds_no_answer_of_an_open_assignment(release, setting):
    held = set().union(*answers_given.scan(release).values())
    assert not held & set(folded(setting)), sorted(held & set(folded(setting)))
    assert held == set(assessed.answers()) - set(folded(setting))  # at the term's start: none at all
    assert answers_given.unread(release) == []
    wheel = zipfile.ZipFile(next(release.glob("encdec-*.whl")))
    assert {"encdec/model.py", "encdec/sampling.py", "encdec/widgets/quick_check.js"} <= set(wheel.namelist())


def test_the_assessed_release_says_so(release, setting):
    readme = (release / "README.md").read_text()
    assert "Release for an assessed term" in readme and "NotImplementedError" in readme
    assert "Self-study" not in readme


# Run in the wheel's package before the notebooks: every module imports, each answer raises (called
# with placeholders), the given heads attend.
PROBE = r"""
import importlib, inspect, json, pkgutil, sys, torch, encdec
for m in pkgutil.walk_packages(encdec.__path__, "encdec."):
    importlib.import_module(m.name)
said = {}
for name in ANSWERS:
    module, *qual = name.split(".")[1:]
    obj = importlib.import_module(f"encdec.{module}")
    for part in qual:
        obj = getattr(obj, part)
    try:
        obj(*[None] * len(inspect.signature(obj).parameters))
        said[name] = "returned"
    except NotImplementedError as err:
        said[name] = str(err)
    except Exception:  # its own body ran, on placeholders
        said[name] = "not folded"
from encdec.attention import MultiHeadAttention
out = MultiHeadAttention(2, 8)(torch.randn(1, 3, 8), torch.randn(1, 4, 8), torch.randn(1, 4, 8))
print(json.dumps({"said": said, "attends": list(out.shape)}))
"""


def test_each_answer_raises_its_stub_and_the_rest_runs(in_wheel, setting):
    """Every answer folded out raises NotImplementedError naming its exercises; every module imports,
    and the given heads still attend (through the grading edition's twin where attention is open)."""
    got = in_wheel["probe"]
    assert got["attends"] == [1, 3, 8]
    assert {n for n, said in got["said"].items() if said != "not folded"} == set(folded(setting))
    for name, where in folded(setting).items():
        assert got["said"][name] == re.search(r"NotImplementedError\('(.*)'\)", assessed.stub(name, where))[1]
        assert all(a in got["said"][name] for a in where), name


def test_the_pages_workflow_builds_book_and_release_with_the_one_setting():
    """make reads ASSESSED from the job's environment, set from the repository variable."""
    import yaml

    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "book.yml").read_text())
    job = flow["jobs"]["build"]
    assert job["env"]["ASSESSED"] == "${{ vars.ASSESSED || '0' }}"
    runs = " ".join(step.get("run", "") for step in job["steps"])
    assert "make book" in runs and "make student-release" in runs and "ASSESSED=" not in runs
    made = subprocess.run(
        ["make", "-n", "student-release", "STUDENT=/nowhere"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "ASSESSED": "1"},
    )
    assert "autograder.assessed" in made.stdout, made.stdout[-2000:] + made.stderr[-2000:]
    wrong = subprocess.run(["make", "-n", "student-release", "ASSESSED=yes"], cwd=ROOT, capture_output=True, text=True)
    assert wrong.returncode != 0 and "ASSESSED is 0" in wrong.stderr


@pytest.fixture(scope="module")
def in_wheel(package, setting, tmp_path_factory) -> dict:
    """One interpreter on the wheel's package: PROBE, then the visible checks of each exercise
    workable with it (TERMS) on its stub and on its reference solution (test_student_release's RUNNER)."""
    import copy

    import test_student_release as release_tests

    from autograder.fixtures.make import solution_sources

    tmp, names = tmp_path_factory.mktemp("runs"), []
    for assignment in TERMS[setting]:
        stub = json.loads((ROOT / "exercises" / assignment / f"{assignment}.ipynb").read_text(encoding="utf-8"))
        solved = copy.deepcopy(stub)
        solutions = solution_sources(assignment)
        for cell in solved["cells"]:
            grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
            if grade_id in solutions:
                cell["source"] = solutions[grade_id]
        for kind, nb in (("stub", stub), ("solved", solved)):
            folder = tmp / f"{assignment}-{kind}"
            (folder / "reference").mkdir(parents=True)
            for ref in (ROOT / "exercises" / assignment / "reference").glob("*.npz"):
                (folder / "reference" / ref.name).write_bytes(ref.read_bytes())
            (folder / "run.ipynb").write_text(json.dumps(nb))
            names.append(folder / "run.ipynb")
    script = (
        f"ANSWERS = {sorted(assessed.answers())!r}\n"
        + PROBE
        + release_tests.RUNNER.replace(
            "for path in sys.argv[1:]:", "import os\nfor path in sys.argv[1:]:\n    os.chdir(os.path.dirname(path))"
        )
    )
    env = {**os.environ, "PYTHONPATH": str(package)}
    done = subprocess.run(
        [sys.executable, "-c", script, *map(str, names)], env=env, cwd=tmp, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    probe, report = (json.loads(line) for line in done.stdout.strip().splitlines()[-2:])
    assert Path(report["encdec"]).is_relative_to(package)
    return {"probe": probe, "runs": report["runs"]}


def test_visible_checks_fail_on_the_stub_and_pass_on_the_solution_with_the_assessed_wheel(in_wheel, setting):
    runs = iter(in_wheel["runs"])
    for assignment in TERMS[setting]:
        on_stub, on_solution = next(runs), next(runs)
        assert on_stub and all(not r["ok"] and "not implemented yet" in r["message"] for r in on_stub), on_stub
        assert on_solution and all(r["ok"] for r in on_solution), (assignment, on_solution)

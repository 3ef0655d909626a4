"""`make student-release`: what it ships, what it keeps back, and that a student can use it.

The release is built into a temporary folder, and its wheel is installed in a fresh virtual
environment by running the launch copies' first cell there (with the wheel's local path in place
of its address on the site; its third-party dependencies, torch above all, come from this
project's environment instead of the network). That environment loads every preset's trained
checkpoint from the wheel, and every exercise's visible checks run
there from the released folder: against the released stub they fail with "not implemented yet",
with the reference solution's code in the solution cells they pass. The Chinese release
(``exercises/zh/``) ships beside the English one and says the same in Chinese.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import nbformat
import pytest

from autograder.fixtures.make import solution_sources
from encdec.presets import PRESETS
from encdec.train import PACKAGED_CHECKPOINTS, load_checkpoint
from encdec.widgets.registry import WIDGETS

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if (p / f"{p.name}.ipynb").is_file())
SECRET_MARKERS = ("BEGIN SOLUTION", "BEGIN HIDDEN TESTS", "END SOLUTION")
# release language -> where its exercises are, what a stub's check and a passing one say
LANGUAGES = {"en": ("exercises", "not implemented yet", "passed"), "zh": ("exercises/zh", "尚未实现", "通过")}
# what a structure check (judged by cost in the graded run) says on a right solution: not "passed"
NOT_JUDGED_HERE = {"en": "not judged here", "zh": "这里不作评判"}

# Runs exercise notebooks' code cells in order, each notebook in a namespace of its own as a fresh
# kernel would, and reports each visible check (graded cells whose id does not end in _hidden):
# passed, or the error it raised. One interpreter for the notebooks of a test: torch is imported once.
RUNNER = r"""
import contextlib, io, json, sys
runs = []
for path in sys.argv[1:]:
    nb = json.load(open(path, encoding="utf-8"))
    ns, results = {"__name__": "__main__"}, []
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        meta = cell["metadata"].get("nbgrader", {})
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile("".join(cell["source"]), meta.get("grade_id", "given"), "exec"), ns)
            ok, message = True, out.getvalue()
        except Exception as exc:
            ok, message = False, f"{type(exc).__name__}: {exc}"
        if meta.get("grade") and not meta["grade_id"].endswith("_hidden"):
            results.append({"id": meta["grade_id"], "ok": ok, "message": message})
        elif not ok:
            raise SystemExit(f"{path}: cell {meta.get('grade_id', 'given')} failed: {message}")
    runs.append(results)
import encdec
print(json.dumps({"runs": runs, "encdec": encdec.__file__}))
"""


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Path:
    return _make_release(tmp_path_factory)


@pytest.fixture(scope="module")
def fresh_python(release, tmp_path_factory) -> Path:
    """A new virtual environment with the release's wheel installed (and nothing of this repository)."""
    venv = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Third-party dependencies from this project's environment: a plain path entry, so the
    # editable install of the repository that lives there (a .pth hook) is not activated.
    (purelib / "course_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = release.glob("encdec-*.whl")
    # The launch copies' install cell, as a launched chapter runs it, fetching the wheel from here:
    # the cell made for a repository (the committed copies carry the one for this checkout's
    # setting, which may know none: test_launch_cell_names_the_wheel_...)
    launch = _launch_copies()
    cell = launch.install_source(
        f"{launch.site_url('https://github.com/course-owner/encdec-book')}student/{wheel.name}"
    )
    (url,) = re.findall(r'^WHEEL = "(https://[^"]+)"$', cell, flags=re.M)
    assert url.rsplit("/", 1)[1] == wheel.name, f"the launch cell installs {url}, the release builds {wheel.name}"
    # Offline: the dependencies must all be satisfied from here. Python 3.11's venv bundles an old
    # setuptools that would shadow this environment's (torch requires a newer one); drop it.
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"], check=True, capture_output=True)
    env = {**os.environ, "PIP_NO_INDEX": "1"}
    done = subprocess.run(
        [str(python), "-c", cell.replace(url, str(wheel))], capture_output=True, text=True, env=env, cwd=venv
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return python


def test_release_ships_exercises_wheel_checkpoints_and_readme(release):
    names = zipfile.ZipFile(next(release.glob("encdec-*.whl"))).namelist()
    assert {"encdec/model.py", "encdec/grading/checks.py", "encdec/widgets/quick_check.js"} <= set(names)
    # the widgets' bundles (make widgets): a student's figures load them
    assert {f"encdec/widgets/bundle/{name}.js" for name in WIDGETS.values()} <= set(names)
    assert not [n for n in names if n.split("/")[0] not in {"encdec", "encdec-0.1.0.dist-info"}], names
    assert sorted(p.name for p in (release / "exercises").iterdir()) == sorted([*ASSIGNMENTS, "zh"])
    assert sorted(p.name for p in (release / "exercises" / "zh").iterdir()) == ASSIGNMENTS
    for folder, _, _ in LANGUAGES.values():
        for name in ASSIGNMENTS:
            ours, theirs = release / folder / name, ROOT / folder / name
            assert (ours / f"{name}.ipynb").read_bytes() == (theirs / f"{name}.ipynb").read_bytes()
            assert sorted(p.name for p in (ours / "reference").iterdir()) == sorted(
                p.name for p in (theirs / "reference").glob("*.npz")
            )
            for ref in (ours / "reference").iterdir():
                assert ref.read_bytes() == (theirs / "reference" / ref.name).read_bytes(), ref
    # The checkpoints travel inside the wheel as package data: the versioned ones, byte for byte.
    with zipfile.ZipFile(next(release.glob("encdec-*.whl"))) as wheel:
        for preset in PRESETS:
            for file in ("model.pt", "metrics.json"):
                packaged = wheel.read(f"encdec/checkpoints/{preset}/{file}")
                assert packaged == (PACKAGED_CHECKPOINTS / preset / file).read_bytes(), (preset, file)
        for record in ("norms", "attention_learns"):  # chapter 12's experiment records, which it reads
            packaged = wheel.read(f"encdec/checkpoints/experiments/{record}.json")
            assert packaged == (PACKAGED_CHECKPOINTS / "experiments" / f"{record}.json").read_bytes(), record
    readme = (release / "README.md").read_text()
    assert all(name in readme for name in ASSIGNMENTS) and "pip install" in readme
    english, chinese = readme.split("## 中文版")  # the Chinese paragraph comes last
    assert "`exercises/zh/`" in english and "exercises/zh/<name>/<name>.ipynb" in chinese


def test_release_keeps_solutions_hidden_tests_and_grader_back(release):
    assert not list(release.rglob("solutions")) and not list(release.rglob("autograder"))
    for path in release.rglob("*"):
        if path.suffix in {".ipynb", ".md"}:
            text = path.read_text(encoding="utf-8")
            assert not [m for m in SECRET_MARKERS if m in text], path
    with zipfile.ZipFile(next(release.glob("encdec-*.whl"))) as wheel:
        for name in wheel.namelist():
            text = wheel.read(name).decode("utf-8", errors="replace")
            assert not [m for m in SECRET_MARKERS if m in text] and "import autograder" not in text, name


def test_release_checksums_cover_every_file(release):
    listed = {}
    for line in (release / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        listed[name.removeprefix("./")] = digest
    files = {str(p.relative_to(release)) for p in release.rglob("*") if p.is_file() and p.name != "SHA256SUMS"}
    assert set(listed) == files
    for name, digest in listed.items():
        assert hashlib.sha256((release / name).read_bytes()).hexdigest() == digest, name


def _run_visible_checks(python: Path, folder: Path, *notebooks: dict) -> tuple[str, list[list[dict]]]:
    """The notebooks run one after the other in `folder` (RUNNER): where encdec was imported from,
    and each notebook's visible checks."""
    names = [f"run{i}.ipynb" for i in range(len(notebooks))]
    for name, notebook in zip(names, notebooks):
        (folder / name).write_text(json.dumps(notebook))
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "ENCDEC_CHECKPOINTS", "VIRTUAL_ENV"}}
    done = subprocess.run(
        [str(python), "-c", RUNNER, *names], cwd=folder, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    return report["encdec"], report["runs"]


def test_fresh_environment_has_the_package_and_not_the_grader(fresh_python, release):
    probe = "import importlib.util, encdec; print(encdec.__file__, importlib.util.find_spec('autograder'))"
    out = subprocess.run([str(fresh_python), "-c", probe], cwd=release, check=True, capture_output=True, text=True)
    location, grader = out.stdout.split()
    assert Path(location).is_relative_to(fresh_python.parent.parent), f"encdec imported from {location}"
    assert grader == "None", "the grader is importable in the student's environment"


def _launch_copies():
    sys.path.insert(0, str(ROOT / "book"))
    import launch_copies

    return launch_copies


def test_launch_cell_names_the_wheel_on_the_site_of_the_repository_setting(release):
    """Each launch copy installs the wheel from the site of the book's repository, or, where none
    is known, says how to install it by hand; a repository's site is OWNER.github.io/REPO."""
    launch = _launch_copies()
    (wheel,) = release.glob("encdec-*.whl")
    assert launch.wheel_name(ROOT) == wheel.name
    assert (
        launch.site_url("https://github.com/Course-Owner/encdec-book") == "https://course-owner.github.io/encdec-book/"
    )
    url = launch.wheel_url(ROOT)
    for launch_copy in sorted((ROOT / "book").glob("*.ipynb")):
        cell = nbformat.read(launch_copy, as_version=4).cells[0].source
        assert cell == launch.install_source(url, ROOT), launch_copy.name
        assert (f'WHEEL = "{url}"' in cell) if url else (wheel.name in cell and "WHEEL" not in cell), copy.name


def test_fresh_environment_loads_the_presets_from_the_wheel_without_build(fresh_python, tmp_path):
    """No ENCDEC_CHECKPOINTS and no project folder in sight: the wheel's copies."""
    probe = (
        "import hashlib, json, sys\n"
        "from encdec.train import checkpoint_root, load_run\n"
        "out = {'root': str(checkpoint_root())}\n"
        "for preset in sys.argv[1:]:\n"
        "    model, metrics = load_run(preset)\n"
        "    digest = hashlib.sha256(b''.join(t.numpy().tobytes() for t in model.state_dict().values()))\n"
        "    out[preset] = {'metrics': metrics, 'weights': digest.hexdigest(), 'training': model.training}\n"
        "print(json.dumps(out))\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "ENCDEC_CHECKPOINTS", "VIRTUAL_ENV"}}
    done = subprocess.run(
        [str(fresh_python), "-c", probe, *PRESETS], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert Path(report["root"]).is_relative_to(fresh_python.parent.parent), report["root"]
    for preset in PRESETS:
        ours = PACKAGED_CHECKPOINTS / preset
        weights = load_checkpoint(ours / "model.pt").state_dict().values()
        digest = hashlib.sha256(b"".join(t.numpy().tobytes() for t in weights)).hexdigest()
        assert report[preset] == {
            "metrics": json.loads((ours / "metrics.json").read_text()),
            "weights": digest,
            "training": False,
        }, preset


@pytest.mark.parametrize("lang", LANGUAGES)
@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_visible_checks_fail_on_the_stub_and_pass_on_the_solution(fresh_python, release, assignment, lang):
    where, not_yet, passed = LANGUAGES[lang]
    folder = release / where / assignment
    stub = json.loads((folder / f"{assignment}.ipynb").read_text(encoding="utf-8"))
    solved = copy.deepcopy(stub)
    solutions = solution_sources(assignment)  # the reference solution's code, the nbgrader markers dropped
    for cell in solved["cells"]:
        grade_id = cell["metadata"].get("nbgrader", {}).get("grade_id")
        if grade_id in solutions:
            cell["source"] = solutions[grade_id]
    encdec, (on_stub, on_solution) = _run_visible_checks(fresh_python, folder, stub, solved)
    assert Path(encdec).is_relative_to(fresh_python.parent.parent)
    assert on_stub, f"{assignment}: no visible checks ran"
    for r in on_stub:
        assert not r["ok"] and not_yet in r["message"], r
    assert on_solution and all(
        r["ok"] and (passed in r["message"] or NOT_JUDGED_HERE[lang] in r["message"]) for r in on_solution
    ), on_solution
    assert any(passed in r["message"] for r in on_solution), on_solution


def test_the_release_readme_states_the_graders_limits():
    """What the student README says the grader reads is what the intake reads (autograder/handed_in.py)."""
    from autograder.handed_in import Intake

    text = (Path(__file__).resolve().parents[1] / "mk" / "release.mk").read_text(encoding="utf-8")
    limits = Intake()
    for said in (
        f"{limits.notebook_bytes // 10**6} MB",
        f"{limits.cells:,} cells",
        f"{limits.source_bytes // 10**6} MB of code",
    ):
        assert said in text, said
    assert f"{limits.cells:,} 个单元" in text and f"{limits.source_bytes // 10**6} MB 的代码" in text


@pytest.fixture
def untouched_release(tmp_path_factory) -> Path:
    """A release of its own: other tests of this module write solved notebooks into the shared one."""
    return _make_release(tmp_path_factory)


def _make_release(tmp_path_factory) -> Path:
    """``make student-release`` into a folder of its own."""
    tmp = tmp_path_factory.mktemp("release")
    made = subprocess.run(
        ["make", "-s", "student-release", f"STUDENT={tmp / 'student'}", f"STUDENT_STAGE={tmp / 'stage'}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-3000:]
    return tmp / "student"


def test_self_study_release_ships_every_answer_and_says_so(untouched_release):
    """The default (ASSESSED=0, issue 50) keeps the reference bodies: the no-answer search finds
    every one in the wheel, and the README tells the student (tests/test_assessed_release.py: ASSESSED=1)."""
    import answers_given

    from autograder import assessed

    release = untouched_release
    found = answers_given.scan(release)
    assert set().union(*found.values()) == set(assessed.answers())
    assert all(name.split("!")[0].endswith(".whl") for name in found), sorted(found)
    assert "## Self-study release" in (release / "README.md").read_text()

"""What the grading tests that take fixture submissions (built from autograder/fixtures/table.py)
share: the session's one stock `nbgrader autograde` batch (`stock_batch`, conftest.py), and a
scratch copy of the course whose folders come from nbgrader's loaded configuration, never typed here."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from autograder.fixtures import table
from autograder.fixtures.make import graded_notebook
from autograder.state import GradingState

ROOT = Path(__file__).resolve().parents[1]
MANIFEST = table.grading()
PY = sys.executable
ZH = ROOT / "exercises" / "zh"


def zh_submission(name: str) -> str:
    """An English fixture submission as a student of the Chinese release hands it in: the same code
    cells (the fixture's edits), the Chinese release's markdown and notebook metadata (a file that
    is no notebook stays as it is)."""
    a = MANIFEST[name]["assignment"]
    text = graded_notebook(name).read_text(encoding="utf-8")
    try:
        nb = json.loads(text)
    except json.JSONDecodeError:
        return text
    zh = json.loads((ZH / a / f"{a}.ipynb").read_text(encoding="utf-8"))
    markdown = {c["id"]: c["source"] for c in zh["cells"] if c["cell_type"] == "markdown"}
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown" and cell.get("id") in markdown:
            cell["source"] = markdown[cell["id"]]
    nb["metadata"] = zh["metadata"]
    return json.dumps(nb, indent=1, ensure_ascii=False)


@dataclass
class StockBatch:
    """Fixture submissions graded by stock `nbgrader autograde`: each assignment's in a folder of
    its own (grade_fixtures' layout: submitted/, autograded/, feedback/, its gradebook)."""

    folders: dict[str, Path]  # student -> the folder of its assignment's batch
    rows: dict  # fixture -> grade_fixtures' row of its English submission

    def state(self, student: str) -> GradingState:
        return GradingState(self.folders[student])

    def autograded(self, student: str) -> Path:
        """nbgrader's autograded folder of `student` (<assignment>/ inside)."""
        return self.state(student).autograded / student


# A notebook's grading time, in units of the plainest assignment's (some 3 s): a kv_cache notebook
# draws and times eight structure runs (some 17 s when this weight was set; some 8 s since the cache
# run was shortened, where 3 would do: either splits kv_cache over both cores)
COST = {"kv_cache": 6}


def stock_batch(work: Path, names: list[str], zh_names: list[str] = ()) -> StockBatch:
    """Fixture submissions graded by stock `nbgrader autograde`, one run per batch folder
    (autograder/grade_fixtures.py): `names` handed in from the English release, `zh_names` from the
    Chinese one as students `<name>_zh` (`zh_submission`, with that release's references).
    The folders are graded side by side, one per core (each kernel is held to one CPU:
    sandbox/policy.py); a dear assignment's fixtures are split over several folders (`units`), so
    that no core waits on one long assignment."""
    from nbgrader.api import Gradebook

    from autograder import edition, grade_fixtures

    lanes = max(1, os.cpu_count() or 1)
    empty = work / "empty-gradebook.db"
    with Gradebook(f"sqlite:///{empty}"):  # made once (alembic takes seconds); each folder's is a copy
        pass
    folders, plan = {}, units(sorted({*names, *zh_names}), lanes)
    for folder, (a, fixtures) in plan.items():
        GradingState(work / folder).root.mkdir(parents=True)
        shutil.copy(empty, GradingState(work / folder).gradebook)
        folders.update(dict.fromkeys(fixtures, work / folder))
        for name in set(fixtures) & set(zh_names):
            dest = GradingState(work / folder).submitted / f"{name}_zh" / a
            dest.mkdir(parents=True)
            (dest / graded_notebook(name).name).write_text(zh_submission(name), encoding="utf-8")
            shutil.copytree(ZH / a / "reference", dest / "reference")
            folders[f"{name}_zh"] = work / folder
    for a in {a for a, _ in plan.values()}:
        edition.ensure(a, edition.DEFAULT_OUT)  # made here, not by two graders at once
    dearest_first = sorted(plan, key=lambda f: -len(plan[f][1]) * COST.get(plan[f][0], 1))
    with ThreadPoolExecutor(min(len(plan), lanes)) as pool:
        graded = [pool.submit(grade_fixtures.grade, work / f, only=plan[f][1]) for f in dearest_first]
        rows = {r.name: r for done in graded for r in done.result()}
    return StockBatch(folders, rows)


def units(names: list[str], lanes: int) -> dict[str, tuple[str, list[str]]]:
    """The batch's folders: folder -> (assignment, fixtures). An assignment whose notebooks cost more
    than half a lane's share of the batch (`COST`) is split into folders `<assignment>-<i>`."""
    by_assignment: dict[str, list[str]] = {}
    for name in names:
        by_assignment.setdefault(MANIFEST[name]["assignment"], []).append(name)
    cost = {a: len(f) * COST.get(a, 1) for a, f in by_assignment.items()}
    piece = max(1.0, sum(cost.values()) / (2 * lanes))
    plan = {}
    for a, fixtures in by_assignment.items():
        k = min(len(fixtures), max(1, round(cost[a] / piece)))
        plan.update({a if k == 1 else f"{a}-{i}": (a, fixtures[i::k]) for i in range(k)})
    return plan


def scratch_course(dest: Path, assignments: list[str], db_url: str | None = None) -> Path:
    """A copy of the course's grading set-up in `dest` (optionally on another gradebook), with the
    assignments generated into its gradebook."""
    from test_sandbox_hostile import make_course

    course = make_course(dest)
    if db_url:
        with open(course / "nbgrader_config.py", "a") as f:
            f.write(f"c.CourseDirectory.db_url = {db_url!r}\n")
    for a in assignments:
        made = subprocess.run(
            [PY, "-m", "nbgrader", "generate_assignment", a, "--force"], cwd=course, capture_output=True, text=True
        )
        assert made.returncode == 0, made.stderr[-3000:]
    return course


def coursedir(course: Path):
    from autograder.taskqueue.course import coursedir_for, load_config

    return coursedir_for(load_config(course))


def submit(course: Path, fixture: str, student: str | None = None) -> None:
    """Hand in a fixture's notebook (with the release's reference files) as `student`."""
    from autograder.taskqueue.course import submission_dir

    a = MANIFEST[fixture]["assignment"]
    dest = submission_dir(coursedir(course), a, student or fixture)
    dest.mkdir(parents=True)
    shutil.copy(graded_notebook(fixture), dest / graded_notebook(fixture).name)
    shutil.copytree(ROOT / "exercises" / a / "reference", dest / "reference")


def scores(course: Path, assignment: str) -> dict[str, float]:
    """student -> score of `assignment`, from the course's gradebook."""
    from nbgrader.api import Gradebook

    cd = coursedir(course)
    with Gradebook(cd.db_url, cd.course_id) as gb:
        return {s.student.id: float(s.score) for s in gb.find_assignment(assignment).submissions}

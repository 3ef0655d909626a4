"""Hostile submissions graded through the real path: course config, sandbox, trusted verdict, driver.

One batch (build/fixtures/hostile/submitted/, the hostile rows of autograder/fixtures/table.py, made
by `python -m autograder.fixtures.make`) is graded by `python -m autograder.driver` in a copy of
the course in a temporary folder; the tests then check every fixture's expected outcome
(`table.hostile()`), that the batch finished, the gradebook is intact, no sandbox process and no
kernel cgroup is left, the repository is unchanged, a re-run is idempotent, the feedback shows no
hidden test code, and two kernels graded one after the other do not share a uid or a keyring.
Fixtures marked `needs_cgroup` are skipped where the grader has no cgroup (it then says so, once).

Nothing a kernel writes is copied back (it works in a scratch copy of its folder), so what a
fixture records is read from what it printed (`printed`), and the tests check that nbgrader's
folders hold only what nbgrader wrote, that no kernel folder is left in the grader's temporary
folder, and that the grader's log shows nothing of what a kernel linked its log to.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from autograder.fixtures import payloads, table
from autograder.fixtures.make import BUILT
from autograder.state import grading_state

ROOT = Path(__file__).resolve().parents[1]
HOSTILE = BUILT / "hostile"  # made from autograder/fixtures/table.py (conftest.py)
ASSIGNMENT = "decoder_block"
EXPECTED = table.hostile()
PY = sys.executable

pytestmark = [pytest.mark.grading, pytest.mark.slow]


def tree_digest(*folders: Path) -> dict[str, str]:
    """Checksums of the repository's source files (grading's state lives outside them: autograder/state.py)."""
    out = {}
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.relative_to(ROOT).parts:
                out[str(path.relative_to(ROOT))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def make_course(dest: Path) -> Path:
    """A copy of the course's grading set-up (config, sources, grader code) in `dest`."""
    shutil.copy(ROOT / "nbgrader_config.py", dest / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions", dest / "solutions")
    shutil.copytree(ROOT / "autograder", dest / "autograder", ignore=shutil.ignore_patterns("__pycache__", "hostile"))
    (dest / "tmp").mkdir()  # the kernels' scratch and socket folders: checked for leftovers
    # short limits keep the run to minutes (the course's cell limit is 60 s); 40 s, not 20: the memory
    # fixtures' cells wait for the cgroup's OOM kill, 7 s on an idle 2-core machine, 11 s busy, and
    # past 20 s in a loaded fresh-clone run (children_memory was stopped before it could report)
    with open(dest / "nbgrader_config.py", "a") as f:
        f.write("\nc.SandboxedExecute.timeout = 40\nc.SandboxedExecute.interrupt_grace = 8\n")
        f.write(f"c.SandboxKernelManager.temp_dir = {str(dest / 'tmp')!r}\n")
    return dest


def printed(course: Path, student: str) -> dict:
    """The JSON files a fixture wrote in its (scratch) folder, as it printed them in its graded
    notebook: `hostile-result <file> <json>` lines (payloads.REPORT)."""
    path = grading_state(course).autograded / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    if not path.is_file():
        return {}
    nb = json.loads(path.read_text())
    found = {}
    for cell in nb["cells"]:
        text = "".join(
            "".join(o["text"]) if isinstance(o["text"], list) else o["text"]
            for o in cell.get("outputs", [])
            if o.get("output_type") == "stream" and o.get("name") == "stdout"
        )
        for line in text.splitlines():
            if line.startswith("hostile-result "):
                _, name, value = line.split(" ", 2)
                found[name] = json.loads(value)
    return found


class Listener:
    """A TCP listener on 127.0.0.1, outside the sandbox, counting who reaches it."""

    def __init__(self, ports) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for port in ports:
            try:
                self.sock.bind(("127.0.0.1", port))
                break
            except OSError:
                continue
        else:
            raise RuntimeError(f"no free port in {ports}")
        self.port = self.sock.getsockname()[1]
        self.sock.listen(8)
        self.sock.settimeout(0.5)
        self.connections = 0
        self.stop = False
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        self.sock.close()


def cgroup_hierarchy():
    """The cgroup hierarchy kernels get their cgroups in here (None: rlimits only, and a warning)."""
    from autograder.sandbox import cgroups
    from autograder.sandbox.sandbox import Policy

    return cgroups.probe(**Policy().cgroup_limits())


def kernel_cgroups() -> set[Path]:
    from autograder.sandbox import cgroups

    h = cgroup_hierarchy()
    return set(cgroups.leftovers(h)) if h is not None else set()


def sandbox_pids(course: Path) -> list[int]:
    """Processes working in `course` under a sandbox uid (root's mode) or, without root, in
    another pid namespace (other graders may run beside the test). Written apart from the
    grader's own `processes._pids_working_in` on purpose: the test does not trust what it tests."""
    from autograder.sandbox.sandbox import UID_BASE, UID_SLOTS, privileged

    own_ns = os.readlink("/proc/self/ns/pid")
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                uid = entry.stat().st_uid
                sandboxed = (
                    UID_BASE <= uid < UID_BASE + UID_SLOTS
                    if privileged()
                    else uid == os.getuid() and os.readlink(f"/proc/{entry.name}/ns/pid") != own_ns
                )
                if sandboxed and os.readlink(f"/proc/{entry.name}/cwd").startswith(str(course)):
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def course_base() -> Path:
    """Where the test courses go: outside /tmp by default, because the fork server once showed
    a kernel the folders made for earlier kernels only when the course was not under /tmp
    (whose every kernel gets a fresh one). ENCDEC_TEST_COURSES overrides it."""
    base = Path(os.environ.get("ENCDEC_TEST_COURSES") or ROOT / "build" / "test-courses")
    base.mkdir(parents=True, exist_ok=True)
    return base


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    if shutil.which("bwrap") is None:
        pytest.fail("bubblewrap is missing: run `make system` (the sandbox is required for grading)")
    course = make_course(Path(tempfile.mkdtemp(prefix="hostile-", dir=course_base())))
    before = tree_digest(ROOT / "solutions", ROOT / "exercises", ROOT / "encdec", ROOT / "autograder")
    course_before = {
        p: hashlib.sha256((course / p).read_bytes()).hexdigest()
        for p in ["nbgrader_config.py", f"solutions/{ASSIGNMENT}/{ASSIGNMENT}.ipynb"]
    }
    subprocess.run(
        [PY, "-m", "nbgrader", "generate_assignment", ASSIGNMENT, "--force"],
        cwd=course,
        check=True,
        capture_output=True,
    )
    shutil.copytree(HOSTILE / "submitted", grading_state(course).submitted)
    listener = Listener(payloads.LISTEN_PORTS)
    try:
        run = subprocess.run(
            [PY, "-m", "autograder.driver", ASSIGNMENT, "--workers", "2", "--timeout", "90", "--json", "results.json"],
            cwd=course,
            capture_output=True,
            text=True,
            timeout=900,
        )
    finally:
        listener.close()
    results = {r["student"]: r for r in json.loads((course / "results.json").read_text())}
    yield {
        "course": course,
        "run": run,
        "results": results,
        "listener": listener,
        "before": before,
        "course_before": course_before,
    }
    shutil.rmtree(course, ignore_errors=True)


def grades(course: Path, student: str) -> dict[str, tuple[float, float]]:
    """grade cell -> (score, max score) of the student's notebook, read from the gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(grading_state(course).db_url, "encdec") as gb:
        nb = gb.find_submission_notebook(ASSIGNMENT, ASSIGNMENT, student)
        return {g.name: (float(g.score), float(g.max_score)) for g in nb.grades}


def check_reported(course: Path, student: str, expect: dict) -> None:
    """What the fixture printed (`printed`) against its `file_equals` and `file_at_most`."""
    reported = printed(course, student) if expect.get("file_equals") or expect.get("file_at_most") else {}
    from autograder.sandbox.sandbox import privileged

    for name, value in expect.get("file_equals", {}).items():
        if name == expect.get("host_untouched") and not privileged():
            # Without root the kernel owns the folders bwrap made in its private /tmp on the way to
            # its working folder (a course under /tmp): a write there succeeds in the sandbox's
            # /tmp and nowhere else. Each one must be there, and none may have reached the host.
            for path in reported.get(name, []):
                assert path.startswith("/tmp/"), f"{student}: wrote {path} outside its private /tmp"
                host = Path(path)
                assert not host.exists() or b"pwned" not in host.read_bytes(), f"{student}: {path} reached the host"
            continue
        assert reported.get(name) == value, f"{student}: {name}"
    for name, tops in expect.get("file_at_most", {}).items():
        got = reported[name]
        assert all(got[key] <= top for key, top in tops.items()), f"{student}: {name} {got} > {tops}"


def test_batch_finishes_with_every_fixture(batch):
    assert set(batch["results"]) == set(EXPECTED), batch["run"].stdout[-3000:] + batch["run"].stderr[-3000:]
    assert "student" in batch["run"].stdout and "graded:" in batch["run"].stdout  # the summary table


@pytest.mark.parametrize("student", sorted(EXPECTED))
def test_fixture_outcome(batch, student):
    expect, result = EXPECTED[student], batch["results"][student]
    course = batch["course"]
    if expect.get("needs_cgroup") and cgroup_hierarchy() is None:
        pytest.skip("no usable cgroup here: the grader falls back to per-process limits (and says so)")
    assert result["status"] == expect["status"], (student, result)
    got = grades(course, student)
    assert got, f"{student}: no grades in the gradebook"
    passed = sorted(name for name, (score, top) in got.items() if score == top)
    assert passed == sorted(expect["passed"]), f"{student}: {expect['why']}; result {result}"
    assert result["score"] == sum(got[n][1] for n in expect["passed"])
    folder = grading_state(course).autograded / student / ASSIGNMENT
    # (a fixture graded into no notebook, invalid_json or not_submitted, reports nothing)
    check_reported(course, student, expect)
    if "output_contains" in expect:
        assert expect["output_contains"] in (folder / f"{ASSIGNMENT}.ipynb").read_text()
    if "max_bytes" in expect:
        assert (folder / f"{ASSIGNMENT}.ipynb").stat().st_size < expect["max_bytes"]


def test_nothing_escaped(batch):
    course = batch["course"]
    assert batch["listener"].connections == 0
    assert sandbox_pids(course) == []
    # every kernel's cgroup is gone: none is named after a worker of the batch (the pids in its
    # log; graders of other runs on this machine may have theirs)
    log = (grading_state(course).autograded / ".driver" / f"{ASSIGNMENT}.log").read_text(errors="replace")
    workers = set(re.findall(r"^\S+ \S+ \[(\d+)\]", log, flags=re.M))
    assert workers
    assert [d for d in kernel_cgroups() if d.name.split("-")[1] in workers] == []
    if cgroup_hierarchy() is not None:
        assert "falling back to per-process limits" not in batch["run"].stderr
    for path, digest in batch["course_before"].items():
        assert hashlib.sha256((course / path).read_bytes()).hexdigest() == digest, path
    assert not list(course.rglob("pwned.txt"))
    db = sqlite3.connect(grading_state(course).gradebook)
    assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    db.close()
    # The repository's sources (the sandbox must not even see them). Someone editing the tree
    # while the test runs would show up here too.
    after = tree_digest(ROOT / "solutions", ROOT / "exercises", ROOT / "encdec", ROOT / "autograder")
    changed = sorted(k for k in set(after) | set(batch["before"]) if after.get(k) != batch["before"].get(k))
    assert changed == [], f"changed during grading: {changed}"
    # Every kernel's scratch and socket folder (and each worker's zygote's) is gone, deep trees,
    # mode-000 folders and all.
    assert sorted(p.name for p in (course / "tmp").iterdir()) == []


def solution_tail(course: Path) -> set[str]:
    """The distinctive lines at the end of the solution notebook (the launcher shows a log's end)."""
    tail = (course / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes()[-4000:].decode(errors="replace")
    lines = {line.strip() for line in tail.splitlines() if len(line.strip()) >= 30}
    assert lines
    return lines


def test_grader_log_shows_nothing_a_kernel_linked_its_log_to(batch):
    """log_symlink made its kernel.log a link to the solution notebook, log_zero to /dev/zero: the
    launcher (root) reads neither, so no line of the notebook's end reaches the grader's log."""
    course = batch["course"]
    lines = solution_tail(course)
    log = (grading_state(course).autograded / ".driver" / f"{ASSIGNMENT}.log").read_text(errors="replace")
    for text in (log, batch["run"].stdout, batch["run"].stderr):
        assert [line for line in lines if line in text] == []
    assert "kernel.log is unreadable" in log  # the launcher saw the link, and said so


def nbgrader_files(course: Path, student: str) -> set[str]:
    """What nbgrader itself puts in a student's autograded folder: the graded notebook, the
    source folder's other files, and the submission's own files."""
    allowed = {f"{ASSIGNMENT}.ipynb"}
    for top in (course / "solutions" / ASSIGNMENT, grading_state(course).submitted / student / ASSIGNMENT):
        allowed |= {str(p.relative_to(top)) for p in top.rglob("*") if p.is_file() and p.suffix != ".ipynb"}
    return allowed


def test_kernel_files_never_reach_nbgrader_folders(batch):
    """The kernel works in a scratch copy: deep trees, mode-000 folders, a far-future
    timestamp.txt, 240 MiB and 3,005 files, escape.json... none of it is in autograded/ or, after
    generate_feedback, in feedback/."""
    course = batch["course"]
    autograded = grading_state(course).autograded
    for student, expect in EXPECTED.items():
        if expect["status"] != "graded":
            continue
        folder = autograded / student / ASSIGNMENT
        files = {str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir()}
        assert files <= nbgrader_files(course, student), (student, sorted(files - nbgrader_files(course, student))[:10])
        assert not any(p.is_symlink() for p in folder.rglob("*")), student
        assert sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) < 5_000_000, student
    student = "timestamp_freeze"
    folder = autograded / student / ASSIGNMENT
    assert not (folder / "timestamp.txt").exists()
    subprocess.run(
        [PY, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--student", student, "--force"],
        cwd=course,
        check=True,
        capture_output=True,
        timeout=300,
    )
    feedback = grading_state(course).feedback / student / ASSIGNMENT
    got = {str(p.relative_to(feedback)) for p in feedback.rglob("*") if not p.is_dir()}
    graded = {str(p.relative_to(folder)) for p in folder.rglob("*") if not p.is_dir()}
    assert got == {f"{ASSIGNMENT}.html"} | (graded - {f"{ASSIGNMENT}.ipynb"})


def test_rerun_is_idempotent(batch):
    course = batch["course"]
    before = {s: grades(course, s) for s in EXPECTED}
    run = subprocess.run(
        [PY, "-m", "autograder.driver", ASSIGNMENT, "--workers", "2", "--json", "again.json"],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=600,
    )
    again = {r["student"]: r for r in json.loads((course / "again.json").read_text())}
    # Graded notebooks are skipped (the unreadable one too: graded as the release with no answers).
    assert {s for s, r in again.items() if r["reason"] != "already graded"} == {
        s for s, e in EXPECTED.items() if e["status"] != "graded"
    }, run.stdout
    assert {s: grades(course, s) for s in EXPECTED} == before


# The matrix: feedback is made from the assignment's source, whatever graded it; make test checks
# every fixture's feedback from the stock batch (tests/test_grading_fixtures.py), and the feedback
# of a notebook the driver graded here (test_kernel_files_never_reach_nbgrader_folders).
@pytest.mark.matrix
def test_feedback_hides_hidden_tests(batch):
    course = batch["course"]
    for student in ["pass_all", "patched_asserts"]:
        subprocess.run(
            [PY, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--student", student, "--force"],
            cwd=course,
            check=True,
            capture_output=True,
        )
        html = (grading_state(course).feedback / student / ASSIGNMENT / f"{ASSIGNMENT}.html").read_text()
        assert "decoder_block.output" in html  # visible tests are shown
        assert "BEGIN HIDDEN TESTS" not in html
        # The hidden checks may be named in a diagnosis, but their code (the quoted call) never shows.
        for hidden in ["decoder_block.output_hidden", "decoder_block.causal_hidden", "decoder_block.mask_hidden"]:
            for quoted in (f'"{hidden}"', f"&quot;{hidden}&quot;", f"&#34;{hidden}&#34;", f"'{hidden}'"):
                assert quoted not in html, (student, quoted)


def kernel_uid(course: Path, student: str) -> int:
    text = (grading_state(course).autograded / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_text()
    return int(re.search(r"kernel uid (\d+)", text).group(1))


def test_keyring_not_carried_over(batch):
    """The keyring fixtures once more, one after the other in one worker: the second kernel runs
    under another uid (slots rotate), and neither may touch the keyring (seccomp)."""
    course = batch["course"]
    students = ["keyring_1_write", "keyring_2_read"]
    run = subprocess.run(
        [PY, "-m", "autograder.driver", ASSIGNMENT, "--workers", "1", "--force", *(f"--student={s}" for s in students)],
        cwd=course,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    uids = [kernel_uid(course, s) for s in students]
    from autograder.sandbox.sandbox import privileged

    if privileged():
        assert uids[0] != uids[1], uids
    else:  # no uid of its own without root (the line the grader prints says so): seccomp alone
        assert uids == [os.getuid()] * 2, uids
    for s in students:
        for name, value in EXPECTED[s]["file_equals"].items():
            assert printed(course, s).get(name) == value, s


def test_mode_is_stated(batch):
    """Without root the grader says, in one line at the start, what it cannot guarantee; as root it
    prints no such line."""
    from autograder.sandbox.sandbox import privileged

    lines = [line for line in batch["run"].stderr.splitlines() if "unprivileged mode" in line]
    if privileged():
        assert lines == []
    else:
        assert len(set(lines)) == 1 and "no separate uid per kernel" in lines[0], batch["run"].stderr[-2000:]

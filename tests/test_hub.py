"""A class on one JupyterHub, set up as the instructor guide says, tested as a round trip.

The test is the hub's administrator and its users at once: it creates an instructor and two
students as real Linux users (passwords through chpasswd, so PAM logs them in), runs
deploy/hub/setup-hub.sh (the exchange 1777, the hub-wide nbgrader_config.py, the students'
environment from the student wheel, configurable-http-proxy, then each user), and starts
JupyterHub with deploy/hub/jupyterhub_config.py on free ports of 127.0.0.1. Then the term:

    instructor: generate_assignment, release_assignment     (as the instructor's user)
    students:   fetch_assignment, work (one solves, one leaves the stub), validate, submit; one
                hands in a link to the instructor's solutions as their notebook, one two download
                copies of it instead
    instructor: collect (the link left behind, the release's blank graded in its place, and said in
                that student's feedback; the copies graded as one); autograde one student with nbgrader, the other with the formgrader's
                Autograde button in Chromium, logged in through the hub; generate_feedback,
                release_feedback (each page readable by its student only)
    students:   fetch_feedback (another student reads none of theirs)

Grading runs as the instructor's user, not root (the hub's case): `make sandbox-check` passes as
that user once setup-hub.sh has delegated its kernel cgroups. The scores are read from the
gradebook and held equal to what the graded notebooks, the formgrader and the feedback say.
Then the isolation checks: a student reads neither the instructor's course (solutions, gradebook)
nor another student's work, and changes no one else's submission.

What differs from a real hub, and why: the students' environment reuses this project's installed
packages through a path entry (as tests/test_student_release.py does; a fresh torch would take
minutes), so setup-hub.sh installs only the student wheel into it; the instructor's checkout is
a copy of the course's config, sources and release, whose `.venv` is this repository's (its
`encdec` and `autograder` are this checkout's, built for grading by root beforehand, as
tests/test_unprivileged.py does); and the hub-wide Jupyter configuration goes to a temporary
folder named by JUPYTER_CONFIG_PATH instead of /etc/jupyter. Everything is removed afterwards.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path

import nbformat
import pytest
from browser_support import browser
from test_unprivileged import course_group, traversable

from autograder import assignments, collected
from autograder.fixtures.inbound import ROWS
from autograder.fixtures.make import solution_sources
from autograder.repairs import repairs
from encdec.grading import language

pytestmark = [
    pytest.mark.grading,
    pytest.mark.slow,
    pytest.mark.browser,
    pytest.mark.skipif(os.geteuid() != 0, reason="creates Linux users and starts a hub: needs root"),
]
ROOT = Path(__file__).resolve().parents[1]
HUB = ROOT / "deploy" / "hub"
VENV_BIN = Path(sys.executable).parent
ASSIGNMENT = "decoder_block"
COURSE_ID = "encdec-hubtest"
# every name this test makes holds the run's own tag, so two runs on one machine (two checkouts'
# `make test`) never remove or reuse each other's users and groups
TAG = f"eh{os.getpid() % 100_000}"
INSTRUCTOR = f"{TAG}-teach"
# student -> does the student write the solution (else the released stub is submitted)
STUDENTS = {f"{TAG}-ada": True, f"{TAG}-bob": False, f"{TAG}-cy": True}  # (the class: three students)
# each student's full name on their account, and the (first, last) name the gradebook then holds
# (autograder/roster.py): ada graded by nbgrader, bob by the formgrader's button; cy's full name is
# markup, which the formgrader would write into its page unescaped, so cy gets no name
FULL_NAMES = {
    f"{TAG}-ada": ("Ada Lovelace", ("Ada", "Lovelace")),
    f"{TAG}-bob": ("Jean-Luc O'Brien", ("Jean-Luc", "O'Brien")),
    f"{TAG}-cy": ("<img src=x onerror=document.title='named'>", (None, None)),
}
PLANTER = f"{TAG}-bob"  # hands in a link to the solutions as their notebook (autograder/fixtures/inbound.py)
COPIER = f"{TAG}-cy"  # hands in two download copies of the notebook instead of it (autograder/handed_in.py)
COPIES = (f"{ASSIGNMENT} (1).ipynb", f"{ASSIGNMENT}-Copy1.ipynb")
GROUPS = {"ENCDEC_STUDENTS_GROUP": f"{TAG}-students", "ENCDEC_INSTRUCTORS_GROUP": f"{TAG}-instructors"}
PASSWORD = "hub-test-Pw-7"  # the test's own users, removed afterwards
WAIT_S = 90  # the longest a server may take to answer
NBCONVERT = "from nbconvert.nbconvertapp import main; main()"  # `jupyter nbconvert`, by module: see student_env
SCREENSHOT = ROOT / "build" / "test-hub" / "formgrader.png"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Hub:
    base: Path
    settings: dict[str, str]
    url: str = ""
    process: subprocess.Popen | None = None
    times: dict[str, float] = field(default_factory=dict)
    screenshot: Path | None = None

    @property
    def exchange(self) -> Path:
        return Path(self.settings["ENCDEC_EXCHANGE_ROOT"])

    @property
    def student_env(self) -> Path:
        return Path(self.settings["ENCDEC_HUB_PREFIX"]) / "env"

    def course(self) -> Path:
        return home(INSTRUCTOR) / "encdec"

    def timed(self, label: str, started: float) -> None:
        self.times[label] = time.monotonic() - started


def home(user: str) -> Path:
    return Path(pwd.getpwnam(user).pw_dir)


def run(args: list[str], timeout: int = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, **kw)


def as_user(
    hub: Hub, user: str, args: list[str], cwd: Path | None = None, timeout: int = 300, path: Path | None = None
) -> subprocess.CompletedProcess:
    """`args` as `user`, in a clean environment with the hub-wide Jupyter configuration, as a
    terminal in that user's server would run it (students: the students' environment first on PATH)."""
    bin_dir = path or (VENV_BIN if user == INSTRUCTOR else hub.student_env / "bin")
    env = {
        "HOME": str(home(user)),
        "USER": user,
        "LOGNAME": user,
        "LANG": "C.UTF-8",
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "JUPYTER_CONFIG_PATH": hub.settings["ENCDEC_JUPYTER_ETC"],
        "ENCDEC_COURSE_ID": COURSE_ID,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return run(
        ["runuser", "-u", user, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()), *args],
        timeout=timeout,
        cwd=cwd or home(user),
    )


def ok(done: subprocess.CompletedProcess, what: str) -> subprocess.CompletedProcess:
    assert done.returncode == 0, f"{what}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    return done


def setup_hub(hub: Hub, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, **hub.settings, "PATH": f"{VENV_BIN}:/usr/bin:/bin:/usr/sbin:/sbin"}
    return ok(run(["bash", str(HUB / "setup-hub.sh"), *args], env=env, timeout=600), f"setup-hub.sh {' '.join(args)}")


def make_users() -> None:
    for user in [INSTRUCTOR, *STUDENTS]:
        full = ["--comment", FULL_NAMES[user][0]] if user in FULL_NAMES else []
        ok(run(["useradd", "--create-home", "--shell", "/bin/bash", *full, user]), f"useradd {user}")
    ok(run(["chpasswd"], input="".join(f"{u}:{PASSWORD}\n" for u in [INSTRUCTOR, *STUDENTS])), "chpasswd")


def remove_users() -> None:
    for user in [INSTRUCTOR, *STUDENTS]:
        try:
            uid = pwd.getpwnam(user).pw_uid
        except KeyError:
            continue
        # whatever the test's users left running (servers, kernels): only those users' processes
        for pid in run(["ps", "-o", "pid=", "-u", str(uid)]).stdout.split():
            try:
                os.kill(int(pid), 9)
            except ProcessLookupError:
                pass
        run(["userdel", "--remove", "--force", user])
    for group in GROUPS.values():
        run(["groupdel", group])


def instructor_checkout(hub: Hub) -> Path:
    """The instructor's checkout, as a clone would be: the course's config, sources and release,
    and its virtual environment (this repository's)."""
    course = hub.course()
    course.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", course / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions", course / "solutions")
    shutil.copytree(ROOT / "exercises" / ASSIGNMENT, course / "exercises" / ASSIGNMENT)
    (course / ".venv").symlink_to(VENV_BIN.parent)
    user = pwd.getpwnam(INSTRUCTOR)
    for path in [course, *course.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
    return course


def student_env(hub: Hub) -> None:
    """The students' environment before setup-hub.sh fills it: a fresh venv whose third-party
    packages are this project's (a path entry: the editable install of the repository is not
    activated, so neither `autograder` nor the repository's `encdec` is importable). Their
    console scripts are not in it, so the students' commands run by module (`python -m nbgrader`)."""
    import sysconfig

    env = hub.student_env
    ok(run([sys.executable, "-m", "venv", str(env)]), "venv")
    python = env / "bin" / "python"
    purelib = Path(
        ok(
            run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]), "purelib"
        ).stdout.strip()
    )
    (purelib / "course_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    # the one console script the hub starts a student's server with (the rest run by module)
    server = env / "bin" / "jupyterhub-singleuser"
    server.write_text(f'#!/bin/sh\nexec {python} -m jupyterhub.singleuser "$@"\n')
    server.chmod(0o755)
    run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"])  # torch needs the newer one


def start_hub(hub: Hub) -> None:
    env = {
        "PATH": f"{VENV_BIN}:/usr/bin:/bin:/usr/sbin:/sbin",
        "LANG": "C.UTF-8",
        **hub.settings,
        "JUPYTER_CONFIG_PATH": hub.settings["ENCDEC_JUPYTER_ETC"],
    }
    log = open(hub.base / "jupyterhub.log", "w")  # noqa: SIM115 (the hub writes it until the fixture ends)
    hub.process = subprocess.Popen(
        [str(VENV_BIN / "jupyterhub"), "-f", str(HUB / "jupyterhub_config.py")],
        cwd=hub.settings["ENCDEC_HUB_STATE"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    hub.url = f"http://127.0.0.1:{hub.settings['ENCDEC_HUB_PORT']}"
    deadline = time.monotonic() + WAIT_S
    while True:
        try:
            with urllib.request.urlopen(hub.url + "/hub/api/", timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            pass
        if hub.process.poll() is not None or time.monotonic() > deadline:
            raise AssertionError("JupyterHub did not start:\n" + (hub.base / "jupyterhub.log").read_text()[-4000:])
        time.sleep(0.5)


def stop_hub(hub: Hub) -> None:
    if hub.process is None or hub.process.poll() is not None:
        return
    os.killpg(hub.process.pid, 15)  # the hub and the proxy it started (its own session)
    try:
        hub.process.wait(20)
    except subprocess.TimeoutExpired:
        os.killpg(hub.process.pid, 9)
        hub.process.wait(10)


@pytest.fixture(scope="module")
def at_submission():
    """hub.env's settings of feedback at submission, with a Redis of the test's own on 127.0.0.1."""
    from redis_server import redis_server

    with redis_server() as url:
        yield {
            "ENCDEC_FEEDBACK_AT_SUBMISSION": AT_SUBMISSION,
            "ENCDEC_ATTEMPTS": "1",
            "ENCDEC_GRADER": INSTRUCTOR,
            "ENCDEC_GRADER_WORKERS": "1",
            "ENCDEC_REDIS_URL": url,
        }


@pytest.fixture(scope="module")
def hub(at_submission):
    for tool in ("runuser", "useradd", "chpasswd", "bwrap", "node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(f"{tool} is needed for the hub test (make system; Node.js with npm)")
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="encdec-hub-"))
    os.chmod(base, 0o755)  # the exchange and the students' environment are under it
    ports = {key: str(free_port()) for key in ("ENCDEC_HUB_PORT", "ENCDEC_HUB_API_PORT", "ENCDEC_PROXY_API_PORT")}
    settings = {
        "ENCDEC_HUB_PREFIX": str(base / "prefix"),
        "ENCDEC_HUB_STATE": str(base / "state"),
        "ENCDEC_EXCHANGE_ROOT": str(base / "srv" / "exchange"),
        "ENCDEC_JUPYTER_ETC": str(base / "etc"),
        "ENCDEC_COURSE_ID": COURSE_ID,
        "ENCDEC_HUB_IP": "127.0.0.1",
        "ENCDEC_PROFILE_D": str(base / "profile.d"),
        "ENCDEC_SERVER_MEMORY_MB": str(SERVER_MEMORY_MB),
        **ports,
        **GROUPS,
        **at_submission,
    }
    hub = Hub(base, settings)
    restore: list[tuple[Path, int]] = []
    shared: list[tuple[Path, int]] = []
    release = base / "student-release"
    try:
        # what `make hub-setup` does: the student release, then the shared set-up steps
        made = run(
            ["make", "-s", "student-release", f"STUDENT={release}", f"STUDENT_STAGE={base / 'stage'}"],
            cwd=ROOT,
            timeout=600,
        )
        ok(made, "make student-release")
        built = run(
            [sys.executable, "-m", "autograder.edition"], cwd=ROOT, timeout=600
        )  # as tests/test_unprivileged.py
        ok(built, "grading editions")
        restore = traversable([Path(sys.executable).resolve(), VENV_BIN.parent / "lib", ROOT / "nbgrader_config.py"])
        student_env(hub)
        wheel = next(release.glob("encdec-*.whl"))
        setup_hub(hub, "exchange")
        setup_hub(hub, "config")
        env_done = run(
            ["bash", str(HUB / "setup-hub.sh"), "student-env"],
            timeout=600,
            env={
                **os.environ,
                **hub.settings,
                "PIP_NO_INDEX": "1",
                "ENCDEC_STUDENT_WHEEL": str(wheel),
                "PATH": f"{VENV_BIN}:/usr/bin:/bin:/usr/sbin:/sbin",
            },
        )
        ok(env_done, "setup-hub.sh student-env")
        page_config = json.loads((hub.student_env / "etc" / "jupyter" / "labconfig" / "page_config.json").read_text())
        instructor_parts = {f"@jupyter/nbgrader:{p}" for p in ("formgrader", "create-assignment", "course-list")}
        assert all(page_config.get("lockedExtensions", {}).get(p) for p in instructor_parts), page_config
        setup_hub(hub, "proxy")
        make_users()
        # the instructor's checkout here grades with this repository's grader, which reads its
        # solutions/ (closed to other users by the set-up): through the course's group, as in
        # tests/test_unprivileged.py (the same group of modules: one runs after the other)
        shared = course_group(pwd.getpwnam(INSTRUCTOR))
        instructor_checkout(hub)
        setup_hub(hub, "instructor", INSTRUCTOR)
        setup_hub(hub, "student", *STUDENTS)
        hub.timed("set-up (release, environment, users)", started)
        t = time.monotonic()
        start_hub(hub)
        hub.timed("hub started", t)
        yield hub
    finally:
        stop_hub(hub)
        # the delegation first: it finds the user's cgroup folders by the user's uid
        run([sys.executable, "-m", "autograder.sandbox.cgroups", "undelegate", INSTRUCTOR], cwd=ROOT)
        remove_users()
        for folder, mode in restore:
            os.chmod(folder, mode)
        for path, gid in shared:
            os.chown(path, -1, gid)
        for student in STUDENTS:  # the servers' cgroups (their processes died with the users)
            for folder in [
                *Path("/sys/fs/cgroup").glob(f"*/encdec-servers/{student}"),
                *Path("/sys/fs/cgroup").glob(f"encdec-servers/{student}"),
            ]:
                try:
                    folder.rmdir()
                except OSError:
                    pass
        if (base / "jupyterhub.log").is_file():  # kept for a failure's reading
            SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(base / "jupyterhub.log", SCREENSHOT.parent / "jupyterhub.log")
        shutil.rmtree(base, ignore_errors=True)
        print("\nhub round trip, seconds by step:")
        for label, seconds in hub.times.items():
            print(f"{seconds:8.1f}  {label}")


def nbgrader(hub: Hub, user: str, *args: str, cwd: Path | None = None, timeout: int = 300):
    return ok(
        as_user(hub, user, ["python", "-m", "nbgrader", *args], cwd=cwd, timeout=timeout),
        f"{user}: nbgrader {' '.join(args)}",
    )


def solve(notebook: Path, assignment: str = ASSIGNMENT) -> None:
    """A student's work: the instructor's solution in every solution cell of the fetched notebook."""
    nb = nbformat.read(notebook, as_version=4)
    sources = solution_sources(assignment)
    filled = 0
    for cell in nb.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if cell.metadata.get("nbgrader", {}).get("solution") and grade_id in sources:
            cell.source, filled = sources[grade_id], filled + 1
    assert filled, "no solution cell in the fetched notebook"
    nbformat.write(nb, notebook)


def graded_cells(notebook: Path) -> dict[str, bool]:
    """grade id -> whether the graded notebook shows the check failing (an error output)."""
    nb = nbformat.read(notebook, as_version=4)
    return {
        c.metadata["nbgrader"]["grade_id"]: any(o.get("output_type") == "error" for o in c.get("outputs", []))
        for c in nb.cells
        if c.metadata.get("nbgrader", {}).get("grade") and c.cell_type == "code"
    }


def gradebook_scores(hub: Hub) -> dict[str, dict]:
    from nbgrader.api import Gradebook

    db = f"sqlite:///{hub.course() / 'grading' / 'gradebook.db'}"
    with Gradebook(db) as gb:
        out = {}
        for student in STUDENTS:
            sub = gb.find_submission(ASSIGNMENT, student)
            cells = {g.name: (g.score, g.max_score) for nb in sub.notebooks for g in nb.grades}
            out[student] = {
                "score": sub.score,
                "max_score": sub.max_score,
                "cells": cells,
                "name": (sub.student.first_name, sub.student.last_name),
            }
        return out


SERVER_MEMORY_MB = 384  # the test hub's limit on a student's server (hub.env: ENCDEC_SERVER_MEMORY_MB)


def login(chromium, hub: Hub, user: str):
    """`user` logged in through the hub's login page, their server spawned; the page, at their lab."""
    page = chromium.new_context(viewport={"width": 1300, "height": 900}).new_page()
    page.set_default_timeout(WAIT_S * 1000)
    page.goto(hub.url + "/hub/login")
    page.fill("input[name=username]", user)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(f"**/user/{user}/lab**", timeout=WAIT_S * 1000)  # the server spawned
    return page


def student_server_is_limited(hub: Hub, student: str) -> None:
    """A student logs in through the hub's page and gets a server; the server runs in a cgroup of
    its own with hub.env's limits, and what it starts there (here, a runaway standing for a cell
    that tries to take the machine) is stopped at the memory limit, while the same outside it runs."""
    with browser() as chromium:
        login(chromium, hub, student).context.close()
    uid = pwd.getpwnam(student).pw_uid
    servers = [
        line.split(None, 1)
        for line in run(["ps", "-o", "pid=,args=", "-u", str(uid)]).stdout.splitlines()
        if "jupyterhub-singleuser" in line or "jupyterhub.singleuser" in line
    ]
    assert servers, f"{student} has no server process"
    lines = [line.split(":", 2) for line in Path(f"/proc/{servers[0][0].strip()}/cgroup").read_text().splitlines()]
    v1 = [path for _, controllers, path in lines if "memory" in controllers.split(",")]
    memory = v1[0] if v1 else next(path for number, _, path in lines if number == "0")
    assert memory.endswith(f"encdec-servers/{student}"), memory
    mount = None
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, _, right = line.partition(" - ")
        fstype, _, options = right.split()[:3]
        if (fstype == "cgroup" and v1 and "memory" in options.split(",")) or (fstype == "cgroup2" and not v1):
            mount = Path(left.split()[4])
    procs = mount / memory.lstrip("/") / "cgroup.procs"
    runaway = f"x = b'x' * (2 * {SERVER_MEMORY_MB} * 2**20); print('survived')"
    inside = run([sys.executable, "-c", runaway], preexec_fn=lambda: procs.write_text("0"))
    outside = run([sys.executable, "-c", runaway])
    assert inside.returncode == -9 and "survived" not in inside.stdout, (inside.returncode, inside.stderr[-500:])
    assert outside.returncode == 0 and "survived" in outside.stdout, "the runaway alone is no problem outside the limit"


def formgrader_autograde(hub: Hub, student: str) -> tuple[str, dict[str, str]]:
    """Log in to the hub as the instructor, open the formgrader's submissions of the assignment,
    press Autograde on `student`'s row; returns the score the page then shows for that row, and the
    name it shows for each student after a reload."""
    with browser() as chromium:
        page = login(chromium, hub, INSTRUCTOR)
        context = page.context
        page.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_assignments")
        page.locator("#main-table td.name a").first.wait_for()
        listed = page.locator("#main-table td.name").all_inner_texts()
        assert ASSIGNMENT in [name.strip() for name in listed], listed
        page.goto(f"{hub.url}/user/{INSTRUCTOR}/formgrader/manage_submissions/{ASSIGNMENT}")
        row = page.locator("#main-table tr").filter(has=page.locator("td.student-id", has_text=student))
        row.locator("td.autograde a").wait_for()
        with page.expect_response(lambda r: r.url.endswith(f"/{student}/autograde"), timeout=300_000) as graded:
            row.locator("td.autograde a").click()
        assert graded.value.ok
        answer = json.loads(graded.value.text())
        answer = json.loads(answer) if isinstance(answer, str) else answer  # nbgrader sends JSON in a JSON string
        assert answer["success"], answer
        page.locator(".modal-dialog", has_text="Successfully autograded").wait_for()
        page.locator(".modal-footer button", has_text="OK").click()
        page.locator(".modal").wait_for(state="detached")
        score = row.locator("td.score")
        page.wait_for_function("el => el.innerText.includes('/')", arg=score.element_handle())
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        hub.screenshot = SCREENSHOT
        page.screenshot(path=str(hub.screenshot), full_page=True)
        text = score.inner_text().strip()
        page.reload()
        page.locator("#main-table td.student-id", has_text=student).wait_for()
        names = {}
        for tr in page.locator("#main-table tr").filter(has=page.locator("td.student-id")).all():
            names[tr.locator("td.student-id").inner_text().strip()] = tr.locator("td.student-name").inner_text().strip()
        assert page.title() != "named", "a student's full name ran in the formgrader"
        context.close()
        return text, names


def test_round_trip(hub):
    course = hub.course()
    t = time.monotonic()
    ok(
        as_user(hub, INSTRUCTOR, ["make", "-s", "-C", str(ROOT), "sandbox-check"], path=VENV_BIN),
        "make sandbox-check as the instructor",
    )
    nbgrader(hub, INSTRUCTOR, "generate_assignment", ASSIGNMENT, "--force", cwd=course)
    nbgrader(hub, INSTRUCTOR, "release_assignment", ASSIGNMENT, cwd=course)
    hub.timed("instructor: sandbox check, generate, release", t)

    # a terminal of a student's server is a login shell: /etc/profile resets PATH, the hub's profile
    # script puts the server's environment first again (here sourced by hand: the test's profile.d
    # is not the machine's)
    student = next(iter(STUDENTS))
    login = ok(
        run(
            [
                "runuser",
                "-u",
                student,
                "--",
                "env",
                "-i",
                f"HOME={home(student)}",
                "LANG=C.UTF-8",
                f"ENCDEC_SERVER_BIN={hub.student_env / 'bin'}",
                "bash",
                "-l",
                "-c",
                f". {hub.settings['ENCDEC_PROFILE_D']}/encdec-hub.sh && command -v python && python -m nbgrader --version",
            ]
        ),
        "a login shell's nbgrader",
    )
    assert login.stdout.splitlines()[0] == str(hub.student_env / "bin" / "python"), login.stdout

    t = time.monotonic()
    student_server_is_limited(hub, student)
    hub.timed(f"{student}: a server of their own, limited", t)

    t = time.monotonic()
    for student, solves in STUDENTS.items():
        nbgrader(hub, student, "fetch_assignment", ASSIGNMENT)
        notebook = home(student) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
        assert notebook.is_file() and (notebook.parent / "reference").is_dir()
        if solves:
            solve(notebook)  # written as root, given back to the student
            os.chown(notebook, pwd.getpwnam(student).pw_uid, pwd.getpwnam(student).pw_gid)
        ok(
            as_user(
                hub,
                student,
                [
                    "python",
                    "-c",
                    NBCONVERT,
                    "--to",
                    "notebook",
                    "--execute",
                    "--inplace",
                    "--allow-errors",
                    str(notebook),
                ],
            ),
            f"{student}: runs the notebook",
        )
        ran = graded_cells(notebook)
        assert ran and not any(ran.values()) if solves else any(ran.values()), (student, ran)
        validated = as_user(hub, student, ["python", "-m", "nbgrader", "validate", str(notebook)], timeout=300)
        assert ("Success!" in validated.stdout) == solves, (student, validated.stdout[-2000:])
        nbgrader(hub, student, "submit", ASSIGNMENT)
    hub.timed("students: fetch, work, validate, submit", t)
    # a student who plants a link (issue 49): their notebook replaced by a link to the instructor's
    # solutions, which the instructor's collect can read; collect copies data, not links, and grades
    # the release's blank notebook in its place, saying why
    solutions = course / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    planted = ROWS["notebook_link"].left
    ok(
        as_user(
            hub,
            PLANTER,
            [
                "python",
                "-c",
                "import os, sys; os.remove(sys.argv[2]); os.symlink(*sys.argv[1:])",
                str(solutions),
                str(submission(hub, PLANTER) / planted),
            ],
        ),
        f"{PLANTER} plants a link",
    )
    # a student who hands in two download copies instead of the notebook (issue 49): graded from one
    ok(
        as_user(
            hub,
            COPIER,
            [
                "python",
                "-c",
                "import os, shutil, sys; os.rename(*sys.argv[1:3]); shutil.copyfile(*sys.argv[2:])",
                *(str(submission(hub, COPIER) / n) for n in (f"{ASSIGNMENT}.ipynb", *COPIES)),
            ],
        ),
        f"{COPIER} hands in copies",
    )

    t = time.monotonic()
    nbgrader(hub, INSTRUCTOR, "collect", ASSIGNMENT, cwd=course)
    for student in STUDENTS:
        handed_in = COPIES if student == COPIER else (f"{ASSIGNMENT}.ipynb",)
        assert all((course / "grading" / "submitted" / student / ASSIGNMENT / n).is_file() for n in handed_in)
    kept = course / "grading" / "submitted" / PLANTER / ASSIGNMENT
    assert (kept / planted).read_bytes() == (course / "exercises" / ASSIGNMENT / planted).read_bytes()  # the blank
    assert solutions.read_bytes() not in [p.read_bytes() for p in kept.rglob("*") if p.is_file()]
    assert [(r["key"], r["files"]) for r in json.loads((kept / collected.RECORD).read_text())] == [
        ("left_behind_link", [planted]),
        ("left_behind_no_notebook", [planted]),
    ]
    by_button = f"{TAG}-bob"  # the formgrader's Autograde button grades one student, nbgrader the others
    by_cli = [s for s in STUDENTS if s != by_button]
    for student in by_cli:
        nbgrader(hub, INSTRUCTOR, "autograde", ASSIGNMENT, "--student", student, cwd=course, timeout=600)
    hub.timed(f"instructor: collect, autograde {', '.join(by_cli)} (nbgrader)", t)
    t = time.monotonic()
    shown, names_shown = formgrader_autograde(hub, by_button)
    hub.timed(f"instructor: autograde {by_button} (formgrader's button, through the hub)", t)

    t = time.monotonic()
    nbgrader(hub, INSTRUCTOR, "generate_feedback", ASSIGNMENT, cwd=course, timeout=600)
    nbgrader(hub, INSTRUCTOR, "release_feedback", ASSIGNMENT, cwd=course)
    feedback = {}
    released = {p.read_bytes(): p for p in (hub.exchange / COURSE_ID / "feedback").glob("*.html")}
    for student, other in zip(STUDENTS, [*list(STUDENTS)[1:], next(iter(STUDENTS))]):
        nbgrader(hub, student, "fetch_feedback", ASSIGNMENT)
        (html,) = (home(student) / ASSIGNMENT / "feedback").glob(f"*/{ASSIGNMENT}.html")
        feedback[student] = html.read_text()
        # the page in the exchange is its student's only (issue 52), as a submission is
        assert attempt(hub, other, "read", released[html.read_bytes()]) == "PermissionError", (other, student)
    hub.timed("feedback: generate, release, fetch", t)

    # the scores: the gradebook against the graded notebooks, the formgrader and the feedback
    scores = gradebook_scores(hub)
    max_score = assignments.max_scores()[ASSIGNMENT]
    for student, solves in STUDENTS.items():
        got = scores[student]
        assert got["max_score"] == max_score
        failed = graded_cells(course / "grading" / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
        for grade_id, fails in failed.items():
            score, most = got["cells"][grade_id]
            assert (score < most) == fails, (student, grade_id, score, most, fails)
        if solves:
            assert got["score"] == max_score and not any(failed.values()), (student, got)
        else:
            assert got["score"] < max_score and any(failed.values()), (student, got)
        # nbgrader's feedback template: "<notebook> (Score: 11.0 / 11.0)"
        assert (
            f"{ASSIGNMENT} (Score: {round(float(got['score']), 2)} / {round(float(max_score), 2)})" in feedback[student]
        ), student
    assert shown == f"{scores[by_button]['score']:g} / {max_score:g}", shown
    # each student's name: their account's full name where it is plain text, none otherwise
    for student, (_, name) in FULL_NAMES.items():
        assert scores[student]["name"] == name, (student, scores[student]["name"])
        assert names_shown.get(student) == (f"{name[1]}, {name[0]}" if name[0] else "None, None"), names_shown
    # the planted link, and the blank graded in its place, said at the top of that student's feedback only;
    # the copies graded as one, said in that student's
    for student in STUDENTS:
        graded = nbformat.read(course / "grading" / "autograded" / student / ASSIGNMENT / f"{ASSIGNMENT}.ipynb", 4)
        assert [r["key"] for r in repairs(graded)] == {
            PLANTER: ["left_behind_link", "left_behind_no_notebook"],
            COPIER: ["copies"],
        }.get(student, []), student
    with language.speaking("en"):
        said = language.text("repair_left_behind_no_notebook", files=planted)
    assert [said in unescape(feedback[s]) for s in STUDENTS] == [s == PLANTER for s in STUDENTS]
    assert [COPIES[1] in unescape(feedback[s]) for s in STUDENTS] == [s == COPIER for s in STUDENTS]
    print(
        "scores:",
        {s: f"{v['score']:g} / {v['max_score']:g}" for s, v in scores.items()},
        "formgrader screenshot:",
        hub.screenshot,
    )


# Isolation: what one user tries against another's files, as that user. Each attempt prints
# "done" or the error's name; a check is one comparison with the expected outcome.
ATTEMPT = r"""
import os, sys
action, path = sys.argv[1], sys.argv[2]
try:
    if action == "read":
        open(path, "rb").read(1)
    elif action == "list":
        os.listdir(path)
    elif action == "write":
        open(path, "a").write("# changed by another student\\n")
    elif action == "delete":
        os.unlink(path)
    elif action == "rename":
        os.rename(path, path + ".moved")
    print("done")
except OSError as err:
    print(type(err).__name__)
"""


def attempt(hub: Hub, user: str, action: str, path: Path) -> str:
    done = as_user(hub, user, ["python", "-c", ATTEMPT, action, str(path)], timeout=60)
    return done.stdout.strip() or done.stderr[-500:]


def submission(hub: Hub, student: str) -> Path:
    """`student`'s submission in the exchange's inbound folder (the test, as root, can list it)."""
    inbound = hub.exchange / COURSE_ID / "inbound"
    (found,) = [p for p in inbound.iterdir() if p.name.startswith(f"{student}+{ASSIGNMENT}+")]
    return found


def test_students_read_neither_the_course_nor_each_other(hub):
    course = hub.course()
    ada, bob = list(STUDENTS)[:2]
    private = {
        "the instructor's solutions": course / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
        "the gradebook": course / "grading" / "gradebook.db",
        "a graded notebook": course / "grading" / "autograded" / ada / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
        "the course secret's folder": course / "grading",
        "another student's work": home(ada) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
        "another student's feedback": home(ada) / ASSIGNMENT / "feedback",
    }
    for what, path in private.items():
        assert path.exists(), what
        action = "list" if path.is_dir() else "read"
        assert attempt(hub, bob, action, path) == "PermissionError", f"{bob} could {action} {what}: {path}"
    # the exchange's inbound folder: students write their submissions, and list nobody's
    assert attempt(hub, bob, "list", hub.exchange / COURSE_ID / "inbound") == "PermissionError"


def test_students_change_no_one_elses_submission(hub):
    ada, bob = list(STUDENTS)[:2]
    notebook = submission(hub, ada) / f"{ASSIGNMENT}.ipynb"
    assert attempt(hub, bob, "write", notebook) == "PermissionError", f"{bob} could change {ada}'s submitted notebook"
    assert attempt(hub, bob, "write", home(ada) / ASSIGNMENT / f"{ASSIGNMENT}.ipynb") == "PermissionError"


# Known to a student, the name of another's submission folder opens nothing: nbgrader's own
# `submit` made that folder 0777 and its files 0644, under an inbound folder without the sticky bit;
# the hub's exchange classes close it (encdec/exchange.py, autograder/exchange.py). Each line below
# is what the name would otherwise give away.
BY_NAME = {"read": "{nb}", "delete": "{nb}", "write": "{folder}/extra.py", "rename": "{folder}"}


@pytest.mark.parametrize("action", list(BY_NAME))
def test_a_submission_is_closed_even_to_who_knows_its_name(hub, action):
    ada, bob = list(STUDENTS)[:2]
    folder = submission(hub, ada)
    target = Path(BY_NAME[action].format(nb=folder / f"{ASSIGNMENT}.ipynb", folder=folder))
    outcome = attempt(hub, bob, action, target)
    if outcome == "done" and action == "rename":  # put it back for the next attempt
        os.rename(f"{folder}.moved", folder)
    assert outcome == "PermissionError", f"{bob} could {action} {target}"


AT_SUBMISSION = "warmup"  # graded as it is handed in, by the hub's service (autograder/ontime.py), once a student


def test_feedback_at_submission(hub):
    """The hub's feedback service (run as the instructor): a student hands in the warm-up and
    fetches its feedback with nbgrader's own fetch_feedback, without the instructor doing anything
    after the release; a second hand-in, past the limit of one, gets a page that says it was not graded."""
    course, student = hub.course(), list(STUDENTS)[-1]
    t = time.monotonic()
    nbgrader(hub, INSTRUCTOR, "generate_assignment", AT_SUBMISSION, "--force", cwd=course)
    nbgrader(hub, INSTRUCTOR, "release_assignment", AT_SUBMISSION, cwd=course)
    nbgrader(hub, student, "fetch_assignment", AT_SUBMISSION)
    notebook = home(student) / AT_SUBMISSION / f"{AT_SUBMISSION}.ipynb"
    solve(notebook, AT_SUBMISSION)
    os.chown(notebook, pwd.getpwnam(student).pw_uid, pwd.getpwnam(student).pw_gid)
    outbound = hub.exchange / COURSE_ID / "feedback"
    pages = {}
    for attempt in (1, 2):
        before = set(outbound.glob("*.html")) if outbound.is_dir() else set()
        nbgrader(hub, student, "submit", AT_SUBMISSION)
        handed_in = time.monotonic()
        while not (outbound.is_dir() and set(outbound.glob("*.html")) - before):
            assert time.monotonic() - handed_in < 300, (hub.base / "jupyterhub.log").read_text()[-4000:]
            time.sleep(1)
        hub.timed(f"{student}: hand-in {attempt} of {AT_SUBMISSION} to its feedback in the exchange", handed_in)
        nbgrader(hub, student, "fetch_feedback", AT_SUBMISSION)
        pages.update(
            {p.parent.name: p.read_text() for p in (home(student) / AT_SUBMISSION / "feedback").glob("*/*.html")}
        )
    first, second = (pages[k] for k in sorted(pages))  # by the hand-in's time
    top = assignments.max_scores()[AT_SUBMISSION]
    assert f"{AT_SUBMISSION} (Score: {float(top)} / {float(top)})" in first, first[-2000:]
    assert "not graded" in second and "Score" not in second, second
    hub.timed(f"{student}: feedback at submission, two hand-ins (from the release)", t)

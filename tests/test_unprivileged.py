"""The fixture and hostile suites once more, as a plain user: the sandbox's unprivileged mode.

`make test` runs as root (CI, the grading container); this module creates a system user for the
test (`USER`), delegates kernel cgroups to it as an administrator would (`python -m
autograder.sandbox.cgroups delegate`), and runs tests/test_sandbox_hostile.py,
tests/test_sandbox.py (stock `nbgrader autograde`) and tests/test_grading_fixtures.py as that
user, where the grader runs bubblewrap in a user namespace under its own uid
(autograder/sandbox/sandbox.py). Every expectation is the same as root's, except what the mode
says it cannot give (the kernel keeps the grader's uid). The fixture suite grades the fixtures
that attack the grader (ENCDEC_FIXTURES=attacks: cheats, tampering, crashes, hostile output, and
the honest ones); a plain bug's kernel does nothing the sandbox mode changes. It also checks that,
without a delegated cgroup, the grader says so and names what it loses.

Run as a plain user, the whole suite is already the unprivileged run: this module then has
nothing to add and is skipped (it needs root to create a user).
"""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
USER = "encdec-grader-test"
GROUP = "encdec-course-test"  # the course's group that lets the plain user read solutions/
SUITES = ["tests/test_sandbox_hostile.py", "tests/test_sandbox.py", "tests/test_grading_fixtures.py"]
# `make test`: two representatives, stock `nbgrader autograde` in the unprivileged sandbox with the
# hostile students that attack it (reading hidden files, writing outside, the network, fork
# bombs, ...), and with the kernels whose one message is past the relay's limit (relay.py: its
# thread starts after the launcher's own namespace, which a plain user's launcher makes);
# `make test-all` (marker matrix): all three suites.
REPRESENTATIVE = [
    "tests/test_sandbox.py::test_stock_nbgrader_autograde_runs_in_the_sandbox",
    "tests/test_message_cap.py::test_the_relay_cuts_in_a_kernel_of_this_user",
]
# while developing: other pytest arguments for the run as a plain user
SELECT = os.environ.get("ENCDEC_UNPRIVILEGED_ARGS", "").split()

pytestmark = [
    pytest.mark.grading,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="run as a plain user, every test is unprivileged already"),
]


def ensure_user() -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER], check=True)
        return pwd.getpwnam(USER)


def traversable(paths: list[Path]) -> list[tuple[Path, int]]:
    """Let others pass (not list) the folders above `paths` that forbid it (a Python under
    /root, say); returns what to put back."""
    changed = []
    for path in paths:
        for folder in reversed(path.resolve().parents):
            mode = folder.stat().st_mode
            if not mode & stat.S_IXOTH:
                os.chmod(folder, stat.S_IMODE(mode) | stat.S_IXOTH)
                changed.append((folder, stat.S_IMODE(mode)))
    return changed


def course_group(user: pwd.struct_passwd) -> list[tuple[Path, int]]:
    """Let the plain user read solutions/, which the set-up closed to other users (the grader it plays
    reads the course's sources): through a group of the course's, as teaching assistants would share
    it, so that solutions/ stays closed to others. Returns what to put back."""
    import grp

    try:
        grp.getgrnam(GROUP)
    except KeyError:
        subprocess.run(["groupadd", "--system", GROUP], check=True)
    subprocess.run(["usermod", "-a", "-G", GROUP, user.pw_name], check=True)
    gid = grp.getgrnam(GROUP).gr_gid
    changed = []
    for path in [ROOT / "solutions", *(ROOT / "solutions").rglob("*")]:
        changed.append((path, path.stat().st_gid))
        os.chown(path, -1, gid)
        os.chmod(path, stat.S_IMODE(path.stat().st_mode) | stat.S_IRGRP | (stat.S_IXGRP if path.is_dir() else 0))
    return changed


def as_user(user: pwd.struct_passwd, home: Path, args: list[str], timeout: int) -> subprocess.CompletedProcess:
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "ENCDEC_TEST_COURSES": str(home / "courses"),
        "TMPDIR": str(home / "tmp"),
        "ENCDEC_FIXTURES": "attacks",
    }
    return subprocess.run(
        ["runuser", "-u", user.pw_name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def delegation(action: str) -> subprocess.CompletedProcess:
    """`python -m autograder.sandbox.cgroups delegate|undelegate USER`, as an administrator runs it."""
    return subprocess.run(
        [sys.executable, "-m", "autograder.sandbox.cgroups", action, USER], cwd=ROOT, capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def plain_user():
    if shutil.which("runuser") is None or shutil.which("useradd") is None:
        pytest.fail("runuser and useradd (util-linux, passwd) are needed to test the unprivileged mode")
    user = ensure_user()
    # the grading editions a plain user's grader reads but cannot write: built by the administrator
    # (root) first, as a deployment does with `make grading-edition`
    built = subprocess.run([sys.executable, "-m", "autograder.edition"], cwd=ROOT, capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    home = Path(tempfile.mkdtemp(prefix="encdec-unpriv-"))
    for sub in ("courses", "tmp"):
        (home / sub).mkdir()
    for path in [home, *home.rglob("*")]:
        os.chown(path, user.pw_uid, user.pw_gid)
    restore = traversable([Path(sys.executable).resolve(), ROOT])
    shared = course_group(user)
    try:
        yield user, home
    finally:
        for folder, mode in restore:
            os.chmod(folder, mode)
        for path, gid in shared:
            os.chown(path, -1, gid)
        delegation("undelegate")
        shutil.rmtree(home, ignore_errors=True)


def test_without_a_cgroup_the_grader_says_what_it_loses(plain_user):
    user, home = plain_user
    delegation("undelegate")
    probe = as_user(
        user,
        home,
        [
            sys.executable,
            "-c",
            "from autograder.sandbox.sandbox import check_available; check_available(); print('sandbox ok')",
        ],
        timeout=120,
    )
    assert probe.returncode == 0 and "sandbox ok" in probe.stdout, probe.stderr[-2000:]
    lines = [line for line in probe.stderr.splitlines() if "unprivileged mode" in line]
    assert len(lines) == 1, probe.stderr
    for lost in (
        "no separate uid per kernel",
        "no fork server",
        "socket folder is a folder on the host",
        "no per-kernel cgroup",
    ):
        assert lost in lines[0]
    assert "falling back to per-process limits" in probe.stderr


@pytest.mark.parametrize(
    "suites",
    [REPRESENTATIVE, pytest.param(SUITES, marks=pytest.mark.matrix)],
    ids=["stock-nbgrader-hostile", "all-suites"],
)
def test_suites_pass_as_a_plain_user(plain_user, suites):
    user, home = plain_user
    delegated = delegation("delegate")
    assert delegated.returncode == 0, delegated.stderr
    run = as_user(
        user,
        home,
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-rs",
            "--basetemp",
            str(home / "tmp" / "pytest"),
            *(SELECT or suites),
        ],
        timeout=2400,
    )
    summary = run.stdout.strip().splitlines()[-1] if run.stdout.strip() else ""
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
    # nothing skipped: the cgroup fixtures ran, under the delegated cgroup
    assert "skipped" not in summary, run.stdout[-3000:]

"""Issue 52, item 1: nothing the instructor controls runs as root.

`setup-hub.sh instructor USER` runs as root and delegates kernel cgroups to the instructor; it ran
`~/encdec/.venv/bin/python -m autograder.sandbox.cgroups` from the instructor's own checkout, so a
one-line `.pth` there ran as root. Here the instructor's environment is a real virtual environment
with three plants, each writing its effective uid to a file when it runs: a `.pth`, a
`sitecustomize.py` and a `python3` on the PATH of the user's login files. The step runs, the
grading sandbox is checked as the user (so the plants do run, as the user), and no plant ever ran
with uid 0.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from test_unprivileged import traversable

pytestmark = [pytest.mark.grading, pytest.mark.skipif(os.geteuid() != 0, reason="creates a Linux user: needs root")]
ROOT = Path(__file__).resolve().parents[1]
USER = f"ep{os.getpid() % 100_000}"  # the run's own: two runs on one machine never share it
GROUP = f"{USER}-instructors"


def run(args, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture
def instructor(tmp_path):
    run(["userdel", "--remove", "--force", USER])
    assert run(["useradd", "--create-home", "--shell", "/bin/bash", USER]).returncode == 0
    home = Path(pwd.getpwnam(USER).pw_dir)
    shared = Path(tempfile.mkdtemp(prefix="encdec-plants-"))  # a file every user can write (tmp_path is root's alone)
    shared.chmod(0o755)
    marks = shared / "ran-as"
    marks.touch()
    marks.chmod(0o666)
    opened = traversable([Path(sys.executable).resolve(), ROOT])  # the user's venv runs this interpreter
    try:
        yield home, marks
    finally:
        for folder, mode in opened:
            os.chmod(folder, mode)
        run(["bash", str(ROOT / "deploy" / "hub" / "setup-hub.sh"), "undelegate", USER], env=settings(tmp_path))
        for pid in run(["ps", "-o", "pid=", "-u", str(pwd.getpwnam(USER).pw_uid)]).stdout.split():
            run(["kill", "-9", pid])
        run(["userdel", "--remove", "--force", USER])
        run(["groupdel", GROUP])
        shutil.rmtree(shared, ignore_errors=True)


def settings(tmp_path: Path) -> dict[str, str]:
    return {
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": "/root",
        "LANG": "C.UTF-8",
        "ENCDEC_HUB_PREFIX": str(tmp_path / "prefix"),
        "ENCDEC_INSTRUCTORS_GROUP": GROUP,
        "ENCDEC_CHECKOUT": "encdec",
    }


def plant(home: Path, marks: Path) -> None:
    """The instructor's checkout, with a real venv of this interpreter carrying the plants."""
    checkout = home / "encdec"
    checkout.mkdir()
    (checkout / "nbgrader_config.py").write_text((ROOT / "nbgrader_config.py").read_text())
    run([sys.executable, "-m", "venv", "--without-pip", str(checkout / ".venv")], check=True)
    venv_python = checkout / ".venv" / "bin" / "python"
    purelib = Path(
        run(
            [str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], check=True
        ).stdout.strip()
    )
    record = f"import os; open({str(marks)!r}, 'a').write(f'{{0}} {{os.geteuid()}}\\n')"
    # the course's packages (the grader checks its sandbox as the user), then the plants
    (purelib / "course.pth").write_text(
        f"{ROOT}\n{sysconfig.get_paths()['purelib']}\n" + record.replace("{0}", "pth") + "\n"
    )
    (purelib / "sitecustomize.py").write_text(record.replace("{0}", "sitecustomize") + "\n")
    bin_dir = home / ".local" / "bin"
    bin_dir.mkdir(parents=True)
    for name in ("python3", "python", "env", "install"):
        fake = bin_dir / name
        fake.write_text(f'#!/bin/sh\necho "PATH-{name} $(id -u)" >> {marks}\nexec /usr/bin/{name} "$@"\n')
        fake.chmod(0o755)
    for login in (".profile", ".bashrc", ".bash_profile"):
        (home / login).write_text(f'PATH="{bin_dir}:$PATH"\nexport PATH\n')
    uid, gid = pwd.getpwnam(USER).pw_uid, pwd.getpwnam(USER).pw_gid
    for path in [
        checkout,
        *checkout.rglob("*"),
        home / ".local",
        *(home / ".local").rglob("*"),
        *(home / n for n in (".profile", ".bashrc", ".bash_profile")),
    ]:
        os.chown(path, uid, gid, follow_symlinks=False)


def test_the_instructor_step_runs_no_code_of_the_instructor_as_root(instructor, tmp_path):
    home, marks = instructor
    plant(home, marks)
    done = run(["bash", str(ROOT / "deploy" / "hub" / "setup-hub.sh"), "instructor", USER], env=settings(tmp_path))
    assert done.returncode == 0, (
        f"setup-hub.sh instructor: exit {done.returncode}\n{done.stdout}\n{done.stderr[-3000:]}"
    )
    assert "grading sandbox: ok" in done.stdout
    ran = [line.split() for line in marks.read_text().splitlines()]
    uid = str(pwd.getpwnam(USER).pw_uid)
    assert {what for what, _ in ran} >= {"pth", "sitecustomize"}, f"the plants never ran, so prove nothing: {ran}"
    assert all(who == uid for _, who in ran), f"a plant of the instructor's ran as another user (root is 0): {ran}"
    copy = tmp_path / "prefix" / "system" / "cgroups.py"
    assert (
        copy.stat().st_uid == 0 and copy.read_bytes() == (ROOT / "autograder" / "sandbox" / "cgroups.py").read_bytes()
    )

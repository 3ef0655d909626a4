"""Private by default (autograder/privacy.py): the grading state is created unreadable by other
users, and the execution step starts no kernel while it or solutions/ is open to them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from autograder.privacy import GradingStateOpen, open_to_others

ROOT = Path(__file__).resolve().parents[1]
READ = (
    "from traitlets.config.loader import PyFileConfigLoader\n"
    "c = PyFileConfigLoader('nbgrader_config.py', path='.').load_config()\n"
    "print(c.Autograde.autograde_preprocessors)\n"
    "print(c.SandboxedExecute.private_folders)\n"
)


@pytest.fixture
def reachable():
    """A folder other users can pass into (pytest's own tmp folders are 0700: everything under them
    is private already)."""
    folder = Path(tempfile.mkdtemp(prefix="encdec-privacy-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_open_means_others_have_bits_and_can_reach_it(reachable):
    (reachable / "open").mkdir(mode=0o755)
    (reachable / "open").chmod(0o755)
    (reachable / "group").mkdir()
    (reachable / "group").chmod(0o750)  # a course shared with its teaching assistants' group
    (reachable / "home").mkdir()
    (reachable / "home" / "course").mkdir()
    (reachable / "home" / "course").chmod(0o777)
    (reachable / "home").chmod(0o700)  # a private home: nothing under it is open
    assert "open to other users (mode 755)" in open_to_others(reachable / "open")
    assert open_to_others(reachable / "group") is None
    assert open_to_others(reachable / "home" / "course") is None
    assert open_to_others(reachable / "absent") is None


def _course(folder: Path) -> Path:
    shutil.copy(ROOT / "nbgrader_config.py", folder / "nbgrader_config.py")
    shutil.copytree(ROOT / "solutions", folder / "solutions")
    subprocess.run(["chmod", "-R", "o-rwx", str(folder / "solutions")], check=True)
    return folder


def test_the_grading_state_is_created_private(reachable):
    course = _course(reachable)
    out = subprocess.run([sys.executable, "-c", READ], cwd=course, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (course / "grading").stat().st_mode & 0o777 == 0o700
    assert "warning" not in out.stderr
    assert eval(out.stdout.splitlines()[1]) == [str(course / "grading"), str(course / "solutions")]


def test_an_open_grading_state_of_ones_own_is_closed(reachable):
    """A grading state an earlier version made with the user's umask is closed on the next command."""
    course = _course(reachable)
    (course / "grading").mkdir()
    (course / "grading").chmod(0o755)
    out = subprocess.run([sys.executable, "-c", READ], cwd=course, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "open to other users" not in out.stderr, out.stderr[-2000:]
    assert (course / "grading").stat().st_mode & 0o777 == 0o750


@pytest.mark.parametrize("opened", ["grading", "solutions"])
def test_no_kernel_starts_while_open(reachable, opened):
    """solutions/, or a grading state that another user owns (which the grader does not change): the
    execution step refuses before it starts a kernel, whichever command grades (nbgrader autograde,
    the formgrader's button, the driver and the queue all grade through it); loading the
    configuration, as every other command does, goes on."""
    import nbformat

    from autograder.sandbox.execute import SandboxedExecute

    course = _course(reachable)
    (course / "grading").mkdir(mode=0o700)
    (course / opened).chmod(0o755)
    if opened == "grading":  # one of the user's own is closed when the configuration loads
        if os.geteuid() != 0:
            pytest.skip("only root can hand a folder to another user")
        os.chown(course / "grading", 65534, 65534)  # nobody's
    loaded = subprocess.run([sys.executable, "-c", READ], cwd=course, capture_output=True, text=True, timeout=120)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    folders = eval(loaded.stdout.splitlines()[1])
    step = SandboxedExecute(private_folders=folders)
    step.create_kernel_manager = lambda: pytest.fail("a kernel was started")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
    with pytest.raises(GradingStateOpen) as refused:
        step.preprocess(nb, {"nbgrader": {"assignment": "decoder_block"}})
    assert str(refused.value) == (
        f"grading refused: {course / opened} is open to other users (mode 755): run `chmod -R o-rwx {course / opened}`"
    )


def test_the_set_up_closes_solutions_to_other_users():
    """`make venv` takes other users' bits off solutions/ (a checkout follows the user's umask)."""
    modes = {p: p.stat().st_mode & 0o007 for p in [ROOT / "solutions", *(ROOT / "solutions").rglob("*")]}
    assert not any(modes.values()), [str(p) for p, m in modes.items() if m][:5]

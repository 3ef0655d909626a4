"""Draws made ahead (autograder/judge/ahead.py): a record read back is the draw, bit for bit; a record
that cannot be trusted is drawn again; grading reads the record instead of drawing."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder import judge
from autograder.judge import ahead

ROOT = Path(__file__).resolve().parents[1]
SEED = 424242
KV = [c.id for c in judge.checks().values() if c.id.startswith("kv_cache.")]


def _wire(check_id: str, inputs: dict) -> list[bytes]:
    runs = inputs.get("runs")
    return [judge.wire_bytes(check_id, i) for i in (runs.values() if runs else [inputs])]


@pytest.fixture(scope="module")
def drawn():
    torch.set_num_threads(1)
    return {c: judge.graded_inputs(c, SEED) for c in KV}


@pytest.mark.parametrize("check_id", KV)
def test_a_record_read_back_is_the_draw_bit_for_bit(check_id, drawn, tmp_path):
    assert ahead.save(tmp_path, check_id, SEED, drawn[check_id])
    kept = ahead.load(tmp_path, check_id, SEED)
    assert _wire(check_id, kept) == _wire(check_id, drawn[check_id])
    check = judge.checks()[check_id]
    for mine, theirs in zip(
        (kept["runs"].values() if check.runs else [kept]),
        (drawn[check_id]["runs"].values() if check.runs else [drawn[check_id]]),
    ):
        ours, ref = judge.reference(check, mine), judge.reference(check, theirs)
        assert ours.keys() == ref.keys() and all(np.array_equal(ours[k], ref[k]) for k in ours)


def test_a_record_is_small_beside_its_weights(drawn, tmp_path):
    ahead.save(tmp_path, "kv_cache.structure_hidden", SEED, drawn["kv_cache.structure_hidden"])
    (record,) = tmp_path.iterdir()
    weights = sum(
        sum(v.numel() * v.element_size() for v in run["model"].state_dict().values())
        for run in drawn["kv_cache.structure_hidden"]["runs"].values()
    )
    assert record.stat().st_size < weights / 10, (record.stat().st_size, weights)


def test_grading_reads_the_record_and_draws_nothing(drawn, tmp_path, monkeypatch):
    ahead.save(tmp_path, "kv_cache.tokens_hidden", SEED, drawn["kv_cache.tokens_hidden"])
    check = judge.checks()["kv_cache.tokens_hidden"]
    monkeypatch.setattr(check, "build", lambda seed: pytest.fail("drawn again"))
    got = judge.graded_inputs("kv_cache.tokens_hidden", SEED, drawn_ahead=tmp_path)
    assert _wire("kv_cache.tokens_hidden", got) == _wire("kv_cache.tokens_hidden", drawn["kv_cache.tokens_hidden"])


class Payload:
    """Code a pickle runs when it is loaded: it leaves ``marker`` behind."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _tamper(path: Path, how: str, marker: Path) -> None:
    if how == "other_owner":
        os.chown(path, 65534, 65534)
    elif how == "group_writable":
        path.chmod(0o664)
    elif how == "link":
        target = path.with_name("elsewhere.pt")
        path.rename(target)
        path.symlink_to(target)
    elif how == "torn":
        path.write_bytes(path.read_bytes()[:100])
    elif how == "code":
        buf = io.BytesIO()
        torch.save(
            {"version": ahead.version(), "check": "kv_cache.tokens_hidden", "seed": SEED, "inputs": Payload(marker)},
            buf,
        )
        path.write_bytes(buf.getvalue())
    elif how == "other_seed":
        other = path.with_name("other.pt")
        ahead.save(path.parent, "kv_cache.tokens_hidden", SEED + 1, {"n": 3})
        newest = max(path.parent.glob("*.pt"), key=lambda p: p.stat().st_mtime_ns)
        newest.rename(other)
        other.replace(path)
    elif how == "too_large":
        with open(path, "ab") as f:
            f.truncate(ahead.MAX_BYTES + 1)


@pytest.mark.parametrize("how", ["other_owner", "group_writable", "link", "torn", "code", "other_seed", "too_large"])
def test_a_record_that_cannot_be_trusted_is_drawn_again(how, drawn, tmp_path):
    if how == "other_owner" and os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    marker = tmp_path / "payload-ran"
    ahead.save(tmp_path, "kv_cache.tokens_hidden", SEED, drawn["kv_cache.tokens_hidden"])
    (path,) = tmp_path.glob("*.pt")
    _tamper(path, how, marker)
    assert ahead.load(tmp_path, "kv_cache.tokens_hidden", SEED) is None
    assert not marker.exists()
    got = judge.graded_inputs("kv_cache.tokens_hidden", SEED, drawn_ahead=tmp_path)
    assert _wire("kv_cache.tokens_hidden", got) == _wire("kv_cache.tokens_hidden", drawn["kv_cache.tokens_hidden"])


def test_the_command_draws_the_roster_once(tmp_path):
    """`python -m autograder.judge.ahead`, from a course root, for two named students: the
    assignment's checks drawn, then kept (a second run draws nothing), in a folder only its user reads."""
    from grading_course import scratch_course

    (tmp_path / "course").mkdir()
    course = scratch_course(tmp_path / "course", [])
    cmd = [
        sys.executable,
        "-m",
        "autograder.judge.ahead",
        "target_slicing",
        "--student",
        "ann",
        "--student",
        "bo",
        "--jobs",
        "2",
    ]
    first = subprocess.run(cmd, cwd=course, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    second = subprocess.run(cmd, cwd=course, capture_output=True, text=True, timeout=300)
    assert "drawn 0" in second.stdout and "drawn 0" not in first.stdout, (first.stdout, second.stdout)
    folders = list(course.rglob(ahead.FOLDER))
    assert len(folders) == 1 and folders[0].stat().st_mode & 0o777 == 0o700


def test_records_of_other_judges_are_pruned(drawn, tmp_path):
    ahead.save(tmp_path, "kv_cache.tokens_hidden", SEED, drawn["kv_cache.tokens_hidden"])
    (tmp_path / "0123456789ab-old.pt").write_bytes(b"a record of judges since changed")
    assert ahead.prune(tmp_path) == 1
    assert [p.name.split("-")[0] for p in tmp_path.iterdir()] == [ahead.version()[:12]]


def test_the_roster_is_read_from_the_gradebook_without_making_it(tmp_path):
    """The service draws ahead when it starts, while the instructor's first nbgrader command may be
    making the gradebook: reading its students never makes a gradebook, nor any of its tables (two
    makers at once collide: "table solution_cells already exists")."""
    from nbgrader.api import Gradebook

    db = tmp_path / "gradebook.db"
    url = f"sqlite:///{db}"
    assert ahead.gradebook_students(url) == set() and not db.exists()
    db.touch()  # a gradebook nbgrader has begun to make: the file, no tables yet
    assert ahead.gradebook_students(url) == set() and db.stat().st_size == 0
    db.unlink()
    with Gradebook(url, "c") as gb:
        gb.add_student("ada")
        gb.add_student("bo")
    assert ahead.gradebook_students(url) == {"ada", "bo"}


def test_processes_starting_at_once_share_one_course_secret(tmp_path):
    """The course secret is made on first use, by whichever grader process comes first; the others
    read the one it made, never a half-written one."""
    path = tmp_path / "state" / ".course-secret"
    code = (
        "import sys\nfrom autograder.judge.seeds import load_secret\nsys.stdout.write(load_secret(sys.argv[1]).hex())"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code, str(path)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(12)
    ]
    outs = [p.communicate(timeout=120)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1 and outs[0]
    assert sorted(os.listdir(path.parent)) == [path.name]  # no half-made file left beside it

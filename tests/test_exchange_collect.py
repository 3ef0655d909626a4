"""Collect copies data, not links (autograder/collected.py, autograder/exchange.py): every attempt
of autograder/fixtures/inbound.py planted in an honest submission folder of a real inbound, collected
with the course's ``Collect`` as nbgrader runs it, and held to the invariant: the secret's bytes
arrive in no collected file, and what was left behind is named with its key in the collected
folder's record, in the log, and at the top of the graded notebook. An honest submission collects
as nbgrader's own collect does.

Run as root (the test gives files to another user: the student is ``nobody``, the collecting user
root, who can read everything, the worst case).
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import secrets
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import nbformat
import pytest
from nbgrader.auth import Authenticator
from nbgrader.coursedir import CourseDirectory
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.utils import parse_utc
from traitlets.config import Config

from autograder import assignments, collected
from autograder.exchange import Collect
from autograder.fixtures.inbound import INBOUND, MARKUP, NOTEBOOK, ROWS
from autograder.handed_in import HandedInExporter
from autograder.preprocessors.sanitize_outputs import SanitizeOutputs
from autograder.repairs import notice, repairs
from encdec.grading import language

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="gives files to another user: needs root")
ROOT = Path(__file__).resolve().parents[1]
STUDENT = "nobody"
ASSIGNMENT = "decoder_block"
STAMP = "2026-12-06 10:00:00.000000 UTC"


class Term:
    """An exchange with one honest submission of STUDENT's in its inbound, and a secret."""

    def __init__(self, base: Path, gradebook: str) -> None:
        self.base, self.gradebook = base, gradebook
        self.secret = base / "instructor" / "solutions" / NOTEBOOK
        self.secret.parent.mkdir(parents=True)
        self.secret_bytes = f"SOLUTIONS {secrets.token_hex(16)}\n".encode()
        self.secret.write_bytes(self.secret_bytes)
        self.inbound = base / "exchange" / "course" / "inbound"
        self.inbound.mkdir(parents=True, mode=0o3733)
        self.folder = self.inbound / f"{STUDENT}+{ASSIGNMENT}+{STAMP}+{secrets.token_urlsafe(9)}"
        shutil.copytree(ROOT / "exercises" / ASSIGNMENT, self.folder)
        (self.folder / "timestamp.txt").write_text(STAMP)
        (self.folder / "submission_secret.txt").write_text(secrets.token_hex(64))
        self.user = pwd.getpwnam(STUDENT)
        for path in [self.folder, *self.folder.rglob("*")]:
            os.chown(path, self.user.pw_uid, self.user.pw_gid)

    def collect(self, cls=Collect, into: str = "submitted", before_duedate=False) -> tuple[Path, list[str]]:
        """``cls`` run as ``nbgrader collect`` runs it; the collected folder and the log's lines."""
        cfg = Config()
        cfg.ExchangeCollect.before_duedate = before_duedate
        cfg.Exchange.root = str(self.base / "exchange")
        cfg.CourseDirectory.update(
            course_id="course",
            assignment_id=ASSIGNMENT,
            root=str(self.base / "instructor"),
            db_url=self.gradebook,
            submitted_directory=into,
            release_directory=str(ROOT / "exercises"),
            ignore=[".ipynb_checkpoints", collected.RECORD],
        )
        log = logging.getLogger(f"test-collect-{secrets.token_hex(4)}")
        lines: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda r: lines.append(r.getMessage())
        log.addHandler(handler)
        coursedir = CourseDirectory(config=cfg)
        cls(coursedir=coursedir, authenticator=Authenticator(config=cfg), config=cfg, log=log).start()
        return self.base / "instructor" / into / STUDENT / ASSIGNMENT, lines


@pytest.fixture(scope="module")
def gradebook(tmp_path_factory):
    """One gradebook for every term (collect only reads it): nbgrader makes one in a second."""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path_factory.mktemp('gradebook') / 'gradebook.db'}"
    with Gradebook(url, "course"):
        pass
    return url


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def record(folder: Path) -> dict[str, dict]:
    return {r["key"]: r for r in json.loads((folder / collected.RECORD).read_text())}


def test_every_release_sits_well_within_the_bounds():
    """An honest submission is a release with answers: each is a tenth of the bounds at most."""
    bounds = collected.BOUNDS
    for name in assignments.names():
        for release in (ROOT / "exercises" / name, ROOT / "exercises" / "zh" / name):
            found = [p for p in release.rglob("*") if p.is_file()]
            depth = max(len(p.relative_to(release).parts) - 1 for p in found)
            assert len(found) * 10 <= bounds.files and depth < bounds.depth, release
            assert sum(p.stat().st_size for p in found) * 10 <= bounds.megabytes * 10**6, release


def test_an_honest_submission_collects_as_nbgraders_own_collect(tmp_path, gradebook):
    term = Term(tmp_path, gradebook)
    ours, lines = term.collect()
    stock, _ = term.collect(ExchangeCollect, into="stock")
    stamp = files(ours).pop("timestamp.txt")  # the server's clock: see test_the_server_s_clock_times_a_submission
    assert {k: v for k, v in files(ours).items() if k != "timestamp.txt"} == {
        k: v for k, v in files(stock).items() if k != "timestamp.txt"
    } and NOTEBOOK in files(ours)
    assert stamp.decode().endswith(" UTC")
    assert {p.relative_to(ours): p.stat().st_mode for p in ours.rglob("*") if p.is_file()} == {
        p.relative_to(stock): p.stat().st_mode for p in stock.rglob("*") if p.is_file()
    }
    assert not (ours / collected.RECORD).exists() and not any("Left behind" in line for line in lines)


@pytest.mark.parametrize("row", INBOUND, ids=[r.name for r in INBOUND])
def test_a_planted_entry_is_left_behind_and_said(tmp_path, gradebook, row):
    term = Term(tmp_path, gradebook)
    row.plant(term.folder, term.secret, term.user.pw_uid, term.user.pw_gid)
    folder, lines = term.collect()
    got = files(folder) if folder.exists() else {}
    assert not any(term.secret_bytes in data for data in got.values()), row.name
    if row.key is None:  # the whole submission refused: nothing collected, and the log says so
        assert not folder.exists() and any("Not collected" in line and term.folder.name in line for line in lines)
        return
    said = record(folder)[f"left_behind_{row.key}"]
    assert row.left in said["files"] or said["count"] > len(said["files"]) == collected.NAMES_SAID, said
    assert any("Left behind" in line and f"left_behind_{row.key}" in line for line in lines), lines
    # the only notebook left behind: the release's own, with no answers, graded in its place and said
    blank = record(folder).get("left_behind_no_notebook")
    assert (blank and blank["files"]) == ([NOTEBOOK] if row.left == NOTEBOOK else None), row.name
    assert blank or (row.left not in got and not (folder / row.left).exists())
    assert got[NOTEBOOK] == (ROOT / "exercises" / ASSIGNMENT / NOTEBOOK).read_bytes()


def test_nothing_of_the_students_own_record_or_time_is_read(tmp_path, gradebook):
    """The student's timestamp.txt (a link to the secret here) and a forged record are never read:
    the collected stamp is the one in the folder's name, and no record says what was not done."""
    term = Term(tmp_path, gradebook)
    (term.folder / "timestamp.txt").unlink()
    (term.folder / "timestamp.txt").symlink_to(term.secret)
    (term.folder / collected.RECORD).write_text(json.dumps([{"key": "left_behind_link", "count": 1, "files": ["x"]}]))
    os.chown(term.folder / collected.RECORD, term.user.pw_uid, term.user.pw_gid)
    folder, lines = term.collect()
    assert parse_utc((folder / "timestamp.txt").read_text()) > parse_utc(STAMP)  # the server's, not the secret
    assert not (folder / collected.RECORD).exists() and not any("Left behind" in line for line in lines)


def test_the_server_s_clock_times_a_submission(tmp_path, gradebook):
    """A forged time in the name (nbgrader submit '--Exchange.timestamp_format=...') and in
    timestamp.txt changes nothing: the collected time is the latest status change the kernel
    recorded for the folder and its files, which only root could set back; a file changed later
    (its content, in place) moves it later."""
    term = Term(tmp_path, gradebook)  # named and stamped 2026-12-06 10:00, made now
    before = datetime.now(UTC).replace(tzinfo=None)
    folder, lines = term.collect()
    handed_in = parse_utc((folder / "timestamp.txt").read_text())
    assert abs((handed_in - before).total_seconds()) < 30, (handed_in, before)
    assert any("by the server's clock" in line and "not used" in line for line in lines), lines
    time.sleep(1.1)
    with open(term.folder / NOTEBOOK, "ab") as f:  # changed in place: the folder's own time stays
        f.write(b" ")
    shutil.rmtree(folder)
    again, _ = term.collect()
    assert parse_utc((again / "timestamp.txt").read_text()) > handed_in + timedelta(seconds=1)


def test_the_feedback_states_what_was_left_behind(tmp_path, gradebook):
    """The records the grader makes of the collected folder's, worded in both languages, and inert
    where the formgrader and the feedback draw them (SanitizeOutputs, as on every markdown cell)."""
    term = Term(tmp_path, gradebook)
    for name in ("extra_link", "markup_name", "fifo"):
        ROWS[name].plant(term.folder, term.secret, term.user.pw_uid, term.user.pw_gid)
    folder, _ = term.collect()
    output, _ = HandedInExporter().from_filename(str(folder / NOTEBOOK))
    records = repairs(nbformat.reads(output, as_version=4))
    assert [(r["key"], sorted(r["files"].split(", ")), r["count"]) for r in records] == [
        ("left_behind_link", sorted(["warmup.ipynb", MARKUP]), 2),
        ("left_behind_not_regular", ["pipe.ipynb"], 1),
    ]
    for lang in language.LANGUAGES:
        words = notice(records, lang)
        assert all(name in words for name in ("warmup.ipynb", MARKUP, "pipe.ipynb")) and words.count("\n- ") == 2
        assert "{" not in words  # every parameter given
        shown, _ = SanitizeOutputs().preprocess_cell(nbformat.v4.new_markdown_cell(words), {}, 0)
        assert "onerror" not in shown.source and "warmup.ipynb" in shown.source  # an <img> left, inert


def test_a_submission_whose_only_notebook_was_left_behind_is_graded_blank_and_said(tmp_path, gradebook):
    """Its only notebook a link: the release's own notebook, with no answers, is graded in its place,
    and the records say both (the link, and the blank), in both languages."""
    term = Term(tmp_path, gradebook)
    ROWS["notebook_link"].plant(term.folder, term.secret, term.user.pw_uid, term.user.pw_gid)
    folder, lines = term.collect()
    output, _ = HandedInExporter().from_filename(str(folder / NOTEBOOK))
    records = repairs(nbformat.reads(output, as_version=4))
    assert [(r["key"], r["files"]) for r in records] == [
        ("left_behind_link", NOTEBOOK),
        ("left_behind_no_notebook", NOTEBOOK),
    ]
    assert any("left_behind_no_notebook" in line for line in lines), lines
    for lang in language.LANGUAGES:
        assert "{" not in notice(records, lang) and notice(records, lang).count(NOTEBOOK) == 2


def test_a_folder_with_no_time_in_its_name_stops_no_collect(tmp_path, gradebook):
    """nbgrader's own collect stops for the whole class on a name whose time does not parse."""
    term = Term(tmp_path, gradebook)
    for stamp in ("not a time", "9" * 40):
        undated = term.inbound / f"{STUDENT}+{ASSIGNMENT}+{stamp}"
        undated.mkdir()
        os.chown(undated, term.user.pw_uid, term.user.pw_gid)
    folder, lines = term.collect()
    assert parse_utc((folder / "timestamp.txt").read_text()) > parse_utc(STAMP) and NOTEBOOK in files(folder)
    (term.inbound / term.folder.name).rename(term.inbound / "elsewhere")  # the undated ones alone
    shutil.rmtree(folder)
    folder, lines = term.collect()
    assert not folder.exists() and sum("no time in its name" in line for line in lines) == 2  # each said


def test_the_newest_submission_the_student_owns_is_collected_late_or_not(tmp_path):
    """A newer folder in the student's name that the student does not own (put there by another,
    or by hand) is passed over, and so is one on time when the student's own is late: with
    ``--before-duedate`` the student's own late one is collected, not nothing."""
    from nbgrader.api import Gradebook

    url = f"sqlite:///{tmp_path / 'gradebook.db'}"
    term = Term(tmp_path, url)
    own = (term.folder / "submission_secret.txt").read_text()
    time.sleep(0.02)
    planted = term.inbound / f"{STUDENT}+{ASSIGNMENT}+{STAMP}+planted"
    shutil.copytree(term.folder, planted)  # root's
    (planted / "submission_secret.txt").write_text("planted")
    time.sleep(0.02)
    due = datetime.now(UTC).replace(tzinfo=None)
    with Gradebook(url, "course") as gb:
        gb.update_or_create_assignment(ASSIGNMENT, duedate=due)
    for before_duedate in (False, True):
        folder, lines = term.collect(before_duedate=before_duedate)
        assert (folder / "submission_secret.txt").read_text() == own, before_duedate
        assert sum("owned by root" in line for line in lines) == 1
        shutil.rmtree(folder)
        time.sleep(0.02)
        os.chmod(term.folder, 0o755)  # the student's own: changed after the due date, so late


def test_what_is_swapped_after_the_check_is_judged_on_what_is_opened(tmp_path, gradebook, monkeypatch):
    """The races a student who read the source would run: an entry swapped for a link between the
    listing and the open, and the submission folder swapped for a link after collect ranked it."""
    term = Term(tmp_path, gradebook)
    opened = os.open

    def swap_then_open(path, flags, mode=0o777, *, dir_fd=None):
        if path == NOTEBOOK and dir_fd is not None:  # listed as a regular file; now a link
            os.unlink(NOTEBOOK, dir_fd=dir_fd)
            os.symlink(term.secret, NOTEBOOK, dir_fd=dir_fd)
        return opened(path, flags, mode, dir_fd=dir_fd)

    inbound = opened(term.inbound, os.O_RDONLY | os.O_DIRECTORY)
    try:
        monkeypatch.setattr(collected.os, "open", swap_then_open)
        left = collected.copy_submission(inbound, term.folder.name, str(tmp_path / "out"), term.user.pw_uid)
        monkeypatch.undo()
        assert (NOTEBOOK, "link") in left and NOTEBOOK not in files(tmp_path / "out")
        assert not any(term.secret_bytes in data for data in files(tmp_path / "out").values())
        os.rename(term.folder, tmp_path / "real")
        term.folder.symlink_to(tmp_path / "real", target_is_directory=True)
        os.chown(term.folder, term.user.pw_uid, term.user.pw_gid, follow_symlinks=False)
        with pytest.raises(OSError):  # ELOOP: the folder itself is never followed
            collected.copy_submission(inbound, term.folder.name, str(tmp_path / "out2"), term.user.pw_uid)
        with pytest.raises(PermissionError):  # a real folder, of someone else's
            collected.copy_submission(inbound, "../../../real", str(tmp_path / "out3"), 0)
        assert not (tmp_path / "out2").exists() and not (tmp_path / "out3").exists()
    finally:
        os.close(inbound)

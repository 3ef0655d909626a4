"""The instructor's side of nbgrader's exchange on a shared hub: what a student hands in stays
theirs (the course configuration names these classes in ``c.ExchangeFactory``; the students'
side is ``encdec.exchange``).

nbgrader's own exchange makes the inbound folder 2733 at every release (students write into it
and list nothing) but without the sticky bit, so a student who learns the name of another's
submission folder can rename or replace it; and ``collect`` only warns when a submission is
owned by someone else than the student it names. Here:

- ``ReleaseAssignment`` adds the sticky bit to the inbound folder (3733): only a folder's owner
  (and the instructor) can rename or remove it;
- ``Collect`` collects for each student only the submissions that student owns, and says which
  it left out (an impersonation, or a folder put there by hand, or one whose name holds no time:
  nbgrader's own collect stops for the whole class on ``bob+decoder_block+x``);
- and copies data, not links: nbgrader's copy (``shutil.copytree``) follows a link, so a link the
  student planted to a file the instructor can read (the solutions, the gradebook) arrived as the
  student's work. ``Collect.do_copy`` copies through ``autograder/collected.py`` instead: only the
  student's own regular files, opened without following links, within ``collected.Bounds`` (which
  stand for nbgrader's ``max_file_size`` and ``max_dir_size``); what it leaves behind is said in the
  log and recorded for the feedback, and a folder left with no notebook gets the release's, with no
  answers, so that every submission collected is graded (0, and the reason in its feedback);
- ``ReleaseFeedback`` makes each feedback page in the exchange readable by its student only (0600,
  and a POSIX ACL entry that lets that student's account read it), as a submission is; nbgrader's
  leaves it 0644, closed only by the secret in its name;
- and times each submission by the server's clock (the latest status change of its folder and
  files, ``collected.py``), never by the time in its name or its ``timestamp.txt``, which the student
  sets: the late policy and the choice of the newest submission read the server's.
"""

from __future__ import annotations

import glob
import os
import pwd
import stat
import struct
from datetime import UTC, datetime

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment
from nbgrader.exchange.default.release_feedback import ExchangeReleaseFeedback
from nbgrader.utils import check_mode, notebook_hash, parse_utc

from autograder import collected


class ReleaseAssignment(ExchangeReleaseAssignment):
    """nbgrader's release, with a sticky inbound folder."""

    def init_dest(self):
        super().init_dest()
        mode = stat.S_IMODE(os.stat(self.inbound_path).st_mode)
        if not mode & stat.S_ISVTX:
            os.chmod(self.inbound_path, mode | stat.S_ISVTX)


# a POSIX access ACL as Linux stores it (acl_ea.h): version 2, then (tag, permissions, id) entries in
# tag order; the owner reads and writes, the named user (the student) reads, nobody else anything
_ACL = "system.posix_acl_access"
_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER, _UNNAMED = 0x01, 0x02, 0x04, 0x10, 0x20, 0xFFFFFFFF


def readable_by(path: str, uid: int) -> None:
    """``path`` (the caller's file) readable by its owner and the user ``uid`` only."""
    os.chmod(path, 0o600)
    entries = [
        (_USER_OBJ, 6, _UNNAMED),
        (_USER, 4, uid),
        (_GROUP_OBJ, 0, _UNNAMED),
        (_MASK, 4, _UNNAMED),
        (_OTHER, 0, _UNNAMED),
    ]
    os.setxattr(path, _ACL, struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries))


class ReleaseFeedback(ExchangeReleaseFeedback):
    """nbgrader's release of feedback, each page readable by its student only."""

    def copy_files(self):
        super().copy_files()
        for page in glob.glob(os.path.join(self.src_path, "*.html")):  # nbgrader's feedback/<student>/<assignment>/
            folder = os.path.dirname(page)
            with open(os.path.join(folder, "submission_secret.txt")) as f:
                name = notebook_hash(secret=f.read(), notebook_id=os.path.basename(page)[: -len(".html")])
            released, student = os.path.join(self.dest_path, f"{name}.html"), os.path.basename(os.path.dirname(folder))
            try:
                if os.path.isfile(released):
                    readable_by(released, pwd.getpwnam(student).pw_uid)
            except (KeyError, OSError) as error:  # no such account, no ACLs on this file system: as nbgrader left it
                self.log.warning("Feedback %s left as nbgrader released it (%s)", released, type(error).__name__)


def _owner(path: str) -> str | None:
    try:
        return pwd.getpwuid(os.stat(path, follow_symlinks=False).st_uid).pw_name
    except (KeyError, OSError):
        return None


def _record(path: str) -> dict:
    """A submission folder of inbound as nbgrader's collect records it, with ``undated`` for a name
    that holds no time (nbgrader's own stops the whole collect on one), and timed by the server's
    clock: the folder's last status change, naive UTC as nbgrader's. The name's time is the
    student's: read only to know that the name is well formed."""
    name = os.path.basename(path)
    parts = name.rsplit("+", 3)
    record = {"username": parts[0], "filename": name, "timestamp": datetime.min}
    try:
        parse_utc(parts[2])
        record["timestamp"] = datetime.fromtimestamp(os.lstat(path).st_ctime, UTC).replace(tzinfo=None)
    except (IndexError, ValueError, OverflowError):
        record["undated"] = True
    except OSError:  # gone since the listing: refused as no folder
        pass
    return record


class Collect(ExchangeCollect):
    """nbgrader's collect, of the submissions each student owns only, their data and no links.

    Through the exchange's public steps (``init_src``, ``do_copy``): for each student, the newest
    submission that student owns (the newest before the due date when ``before_duedate`` is set and
    there is one), by the server's clock; every folder left out is said in the log."""

    def init_src(self):
        if not self.coursedir.course_id:
            self.fail("No course id specified. Re-run with --course flag.")
        self.course_path = os.path.join(self.root, self.coursedir.course_id)
        self.inbound_path = os.path.join(self.course_path, "inbound")
        if not os.path.isdir(self.inbound_path):
            self.fail(f"Course not found: {self.inbound_path}")
        if not check_mode(self.inbound_path, read=True, execute=True):
            self.fail(f"You don't have read permissions for the directory: {self.inbound_path}")
        student = self.coursedir.student_id or "*"
        pattern = os.path.join(self.inbound_path, f"{student}+{self.coursedir.assignment_id}+*")
        with Gradebook(self.coursedir.db_url, self.coursedir.course_id) as gb:
            try:
                self.duedate = gb.find_assignment(self.coursedir.assignment_id).duedate
            except MissingEntry:
                self.duedate = None
        due = self.duedate if self.before_duedate else None
        ranked = sorted(map(_record, glob.glob(pattern)), key=lambda r: r["timestamp"], reverse=True)
        owned = []
        for record in ranked:
            if why := self._why_not(record):
                self.log.error("Not collected: %r names %s, but %s", record["filename"], record["username"], why)
            else:
                owned.append(record)
        first = {}
        for record in sorted(owned, key=lambda r: due is not None and r["timestamp"] > due):  # stable: newest first
            first.setdefault(record["username"], record)
        self.src_records = list(first.values())

    def _why_not(self, record) -> str | None:
        """Why ``record`` is not collected (None: it is)."""
        if record.get("undated"):
            return "it has no time in its name"
        path = os.path.join(self.inbound_path, record["filename"])
        if os.path.islink(path) or not os.path.isdir(path):
            return "it is no folder"
        owner = _owner(path)
        return None if owner == record["username"] else f"it is owned by {owner or 'an unknown user'}"

    def do_copy(self, src, dest, log=None):
        """``src`` (a submission folder in inbound) into ``dest`` as ``autograder/collected.py`` copies:
        checked again on what it opens, so a folder swapped since ``_why_not`` is refused here."""
        name = os.path.basename(src)
        student = _record(src)["username"]
        parent = os.open(self.inbound_path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            when, records = collected.collect(
                parent,
                name,
                dest,
                pwd.getpwnam(student).pw_uid,
                ignore=tuple(self.coursedir.ignore),
                include=tuple(self.coursedir.include),
                release=self._release(),
            )
        except (KeyError, OSError) as error:
            self.log.error("Not collected: %r is no folder of %s's own (%s)", name, student, type(error).__name__)
            return
        finally:
            os.close(parent)
        named = parse_utc(name.rsplit("+", 3)[2]).replace(tzinfo=UTC)
        if abs((when - named).total_seconds()) > 120:
            self.log.warning(
                "%r: handed in at %s by the server's clock; its name says %s (not used)",
                name,
                when.isoformat(" ", "seconds"),
                named.isoformat(" ", "seconds"),
            )
        for r in records:
            self.log.error(
                "Left behind in %r: %d item(s), %s: %s", name, r["count"], r["key"], ", ".join(map(repr, r["files"]))
            )

    def _release(self) -> str:
        """The release folder of the assignment being collected (its blank notebooks)."""
        return self.coursedir.format_path(self.coursedir.release_directory, ".", self.coursedir.assignment_id)

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
  it left out (an impersonation, or a folder put there by hand).
"""
from __future__ import annotations

import os
import pwd
import stat

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.exchange.default.release_assignment import ExchangeReleaseAssignment


class ReleaseAssignment(ExchangeReleaseAssignment):
    """nbgrader's release, with a sticky inbound folder."""

    def init_dest(self):
        super().init_dest()
        mode = stat.S_IMODE(os.stat(self.inbound_path).st_mode)
        if not mode & stat.S_ISVTX:
            os.chmod(self.inbound_path, mode | stat.S_ISVTX)


def _owner(path: str) -> str | None:
    try:
        return pwd.getpwuid(os.stat(path).st_uid).pw_name
    except (KeyError, OSError):
        return None


class Collect(ExchangeCollect):
    """nbgrader's collect, of the submissions each student owns only."""

    def _owned(self, record) -> bool:
        return _owner(os.path.join(self.inbound_path, record["filename"])) == record["username"]

    def _sort_by_timestamp(self, records):
        # nbgrader keeps the first of each student's records: the newest one the student owns
        ranked = super()._sort_by_timestamp(records)
        return [r for r in ranked if self._owned(r)] + [r for r in ranked if not self._owned(r)]

    def copy_files(self):
        for record in [r for r in self.src_records if not self._owned(r)]:
            self.log.error("Not collected: %s names %s but is owned by %s", record["filename"], record["username"],
                           _owner(os.path.join(self.inbound_path, record["filename"])) or "an unknown user")
        self.src_records = [r for r in self.src_records if self._owned(r)]
        super().copy_files()

"""The students' side of nbgrader's exchange on a shared hub (the hub-wide nbgrader configuration
names ``Submit`` in ``c.ExchangeFactory.submit``: deploy/hub/nbgrader_config.py).

nbgrader's ``submit`` leaves a submission folder 0777 and its files 0644 (so that the instructor
can delete it later): another student who learns the folder's name can read, change or add to it.
``Submit`` closes it to everyone but its owner and the instructor: folders 2750, files 0640, of
the inbound folder's group, the instructor's. A student cannot give a file a group they are not
in, but a folder made inside a set-group-id folder takes its group (and a file made inside that
folder too): so the submission is copied again into a folder made in inbound, which then takes
the place of nbgrader's copy (whose copying had reset the inherited bit). Imported by nbgrader
only; it decides nothing about a score.
"""

from __future__ import annotations

import os
import secrets
import shutil

from nbgrader.exchange.default.submit import ExchangeSubmit

FOLDER_MODE, FILE_MODE = 0o2750, 0o640


def _copy_into(src: str, dest: str) -> None:
    """``src``'s files into the existing folder ``dest``: new folders and files, contents only, so
    that each takes ``dest``'s group."""
    for entry in os.scandir(src):
        target = os.path.join(dest, entry.name)
        if entry.is_dir(follow_symlinks=False):
            os.mkdir(target, FOLDER_MODE)
            _copy_into(entry.path, target)
        elif entry.is_file(follow_symlinks=False):
            shutil.copyfile(entry.path, target)


class Submit(ExchangeSubmit):
    """nbgrader's submit, with a submission only its owner and the instructor can read."""

    def copy_files(self):
        super().copy_files()
        dest = os.path.join(self.inbound_path, self.assignment_filename)
        fresh = os.path.join(
            self.inbound_path, f".closing-{secrets.token_hex(8)}"
        )  # no student's name: collect skips it
        os.mkdir(fresh)  # inbound's group, and its set-group-id bit
        _copy_into(dest, fresh)
        shutil.rmtree(dest)
        os.rename(fresh, dest)
        self.set_perms(dest, fileperms=FILE_MODE, dirperms=FOLDER_MODE)

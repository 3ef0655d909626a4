"""The students' side of nbgrader's exchange on a shared hub (the hub-wide nbgrader configuration
names ``Submit`` in ``c.ExchangeFactory.submit``: deploy/hub/nbgrader_config.py).

nbgrader's ``submit`` leaves a submission folder 0777 and its files 0644 (so that the instructor
can delete it later): another student who learns the folder's name can read, change or add to it.
``Submit`` closes it to everyone but its owner and the inbound folder's group, the instructor's
(the folder inherits it: inbound is set-group-id), who collects it: folders 0750, files 0640.
Imported by nbgrader only; it decides nothing about a score.
"""
from __future__ import annotations

import os

from nbgrader.exchange.default.submit import ExchangeSubmit

FOLDER_MODE, FILE_MODE = 0o2750, 0o640


class Submit(ExchangeSubmit):
    """nbgrader's submit, with a submission only its owner and the instructor can read."""

    def copy_files(self):
        super().copy_files()
        self.set_perms(os.path.join(self.inbound_path, self.assignment_filename), fileperms=FILE_MODE,
                       dirperms=FOLDER_MODE)

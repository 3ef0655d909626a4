"""The course configuration takes a hub's exchange and this course's own settings without an edit of
the tracked nbgrader_config.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
READ = (
    "from traitlets.config.loader import PyFileConfigLoader\n"
    "c = PyFileConfigLoader('nbgrader_config.py', path='.').load_config()\n"
    "print(c.Exchange.get('root', 'unset'), c.CourseDirectory.course_id, c.Execute.timeout)\n"
)


def _read(folder: Path, **env) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", READ],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in {**os.environ, **env}.items() if v is not None},
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_the_exchange_is_the_hubs_unless_named(tmp_path):
    """Students' nbgrader reads the exchange from the hub-wide configuration; the course's own file
    leaves it alone (it used to point it into the instructor's checkout, where no student looked)."""
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    assert _read(tmp_path, ENCDEC_EXCHANGE=None, ENCDEC_COURSE_ID=None)[:2] == ["unset", "encdec"]
    assert _read(tmp_path, ENCDEC_EXCHANGE="/srv/other/exchange", ENCDEC_COURSE_ID="tx101")[:2] == [
        "/srv/other/exchange",
        "tx101",
    ]


def test_an_untracked_local_file_is_read_last(tmp_path):
    shutil.copy(ROOT / "nbgrader_config.py", tmp_path)
    (tmp_path / "nbgrader_config.local.py").write_text(
        'c.Exchange.root = "/srv/course/exchange"\nc.CourseDirectory.course_id = "tx202"\nc.Execute.timeout = 90\n'
    )
    assert _read(tmp_path, ENCDEC_EXCHANGE="/ignored", ENCDEC_COURSE_ID=None) == ["/srv/course/exchange", "tx202", "90"]
    ignored = subprocess.run(["git", "check-ignore", "nbgrader_config.local.py"], cwd=ROOT, capture_output=True)
    assert ignored.returncode == 0, "nbgrader_config.local.py must be ignored by git"

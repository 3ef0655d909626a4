"""The set-up on the machines users have: Debian 12's Python, a checkout folder named like the
package, a font check that does not flake."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.specifiers import SpecifierSet

ROOT = Path(__file__).resolve().parents[1]
DEBIAN_12_PYTHON = "3.11.2"  # the oldest Python the README's floor admits that a user is likely to have


def test_every_pinned_package_runs_on_the_readmes_python_floor():
    """The README says Python 3.11+, and `make` checks 3.11: every installed distribution (the
    constraints' pins) must admit Debian 12's 3.11.2 (soupsieve 3 and later need 3.11.5)."""
    readme = (ROOT / "README.md").read_text()
    assert "Python 3.11+" in readme
    assert "(3, 11)" in (ROOT / "Makefile").read_text()
    refused = []
    for dist in metadata.distributions():
        spec = dist.metadata.get("Requires-Python")
        if spec and not SpecifierSet(spec).contains(DEBIAN_12_PYTHON):
            refused.append(f"{dist.metadata['Name']}=={dist.version} ({spec})")
    assert not refused, f"pinned packages that refuse Python {DEBIAN_12_PYTHON}: {refused}"


def test_the_constraints_pin_every_installed_package():
    """One version of everything: a package the venv has but constraints.txt does not pin would
    follow whatever the index serves next (setuptools carries the editable install's mode)."""
    pinned = {
        re.split(r"[=<>\[ ]", line)[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line and not line.startswith("#")
    }
    installed = [
        d
        for d in metadata.distributions()  # (not the copies setuptools vendors for itself)
        if Path(str(d.locate_file(""))).name != "_vendor"
    ]
    missing = sorted(
        d.metadata["Name"]
        for d in installed
        if d.metadata["Name"].lower().replace("_", "-") not in pinned | {"encdec", "pip"}
    )
    assert not missing, f"installed but not pinned in constraints.txt: {missing}"


def test_a_checkout_folder_named_like_the_package_does_not_hide_it(tmp_path):
    """A hub's server starts in the home folder, with it on sys.path; a checkout there named
    ``encdec`` (its grading state in ``encdec/grading/``) was imported as a namespace package
    instead of the installed one, and the formgrader's autograde failed with "cannot import name
    'wire' from 'encdec.grading'". The editable install puts the package's folder on sys.path
    (compat mode), where a regular package wins over a namespace one."""
    (tmp_path / "encdec" / "grading").mkdir(parents=True)
    code = "from encdec.grading import wire; import encdec; print(encdec.__file__)"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert Path(out.stdout.strip()) == ROOT / "encdec" / "__init__.py"


def test_the_font_check_reads_fc_lists_whole_output(tmp_path):
    """Under pipefail, ``fc-list | grep -q`` exits 141 when grep stops early and fc-list is still
    writing: an installed font then read as missing, about one run in ten. A long fc-list (as on a
    machine with many fonts) makes that near-certain; the check must still find the fonts."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "fc-list").write_text(
        "#!/bin/sh\n"
        "echo '/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf: DejaVu Sans:style=Book'\n"
        "echo '/usr/share/fonts/truetype/wqy/wqy-microhei.ttc: WenQuanYi Micro Hei'\n"
        "yes '/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc: Noto Sans CJK SC' "
        "| head -n 200000\n"
    )
    (bin_ / "apt-get").write_text("#!/bin/sh\necho 'apt-get was called' >&2\nexit 1\n")
    for tool in bin_.iterdir():
        tool.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_}:/usr/bin:/bin"}
    for _ in range(5):
        out = subprocess.run(
            ["bash", str(ROOT / "scripts" / "setup-system.sh"), "book"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0 and not out.stdout and "apt-get" not in out.stderr, (out.stdout, out.stderr)

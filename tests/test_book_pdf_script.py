"""The scripts scripts/book_pdf.py runs in each page before printing parse as JavaScript (a Python
string's escapes once turned a '\\n' into a line break inside a JavaScript string: no PDF at all)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import book_pdf  # noqa: E402 (after the sys.path line that lets it be found)


@pytest.mark.parametrize("name", ["WIDGETS_DRAWN_JS", "SETTLE_JS"])
def test_the_page_scripts_parse(tmp_path, name):
    node = shutil.which("node")
    assert node, "Node.js is needed (the book's set-up uses it)"
    script = tmp_path / "script.js"
    script.write_text(f"const run = {getattr(book_pdf, name)};\n")
    done = subprocess.run([node, "--check", str(script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr

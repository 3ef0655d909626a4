"""Every linter suppression in the project says which rule it silences and why, on its own line
(issue 53: "every remaining suppression justified on its line"): ``# noqa: CODE (reason)``."""

from __future__ import annotations

import io
import re
import subprocess
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JUSTIFIED = re.compile(r"noqa: [A-Z]+[0-9]+(, ?[A-Z]+[0-9]+)* *(\(.+\)| - .+)")


def test_every_noqa_names_its_rule_and_its_reason():
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    bare = []
    for name in files.split():
        source = (ROOT / name).read_text(encoding="utf-8")
        if "noqa" not in source:
            continue
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):  # comments only, not strings
            if tok.type == tokenize.COMMENT and "noqa" in tok.string and not JUSTIFIED.search(tok.string):
                bare.append(f"{name}:{tok.start[0]}: {tok.string}")
    assert not bare, "\n".join(bare)

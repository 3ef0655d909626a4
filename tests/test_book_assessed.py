"""Issue 50: the book's listings in an assessed term (scripts/book_assessed.py), on a two-page Sphinx
project instead of the whole book (seconds; `make test-assessed` searches the real site): a listing of
a graded answer shows its stub, one of given code shows the package's code, and the self-study setting
shows the answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import answers_given
import pytest

from autograder import assessed

ROOT = Path(__file__).resolve().parent.parent
PAGE = """Page
====

.. literalinclude:: {attention}
   :pyobject: KVCache

.. literalinclude:: {generate}
   :pyobject: greedy_decode

.. literalinclude:: {attention}
   :pyobject: MultiHeadAttention._split_heads
"""


def build(tmp: Path, setting: str) -> tuple[str, str]:
    src, out = tmp / f"src-{setting}", tmp / f"out-{setting}"
    src.mkdir()
    (src / "conf.py").write_text(
        f"import sys\nsys.path.insert(0, {str(ROOT / 'scripts')!r})\nextensions = ['book_assessed']\n"
    )
    rel = os.path.relpath(ROOT / "encdec", src)
    (src / "index.rst").write_text(PAGE.format(attention=f"{rel}/attention.py", generate=f"{rel}/generate.py"))
    edition = tmp / "edition" / "encdec"
    if not edition.is_dir():
        assessed.build(edition)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-q",
            "-W",
            "-b",
            "html",
            "-D",
            f"encdec_assessed={setting}",
            "-D",
            f"encdec_assessed_edition={edition}",
            str(src),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return (out / "index.html").read_text(encoding="utf-8"), (out / "term.txt").read_text().strip()


@pytest.mark.parametrize("setting", ["1", "0"])
def test_a_listing_of_an_answer_shows_its_stub_in_an_assessed_term_only(tmp_path, setting):
    page, term = build(tmp_path, setting)
    held = set(answers_given.held(answers_given._readable("index.html", page.encode())))
    listed = {"encdec.attention.KVCache.update", "encdec.generate.greedy_decode"}
    if setting == "1":
        assert term == "assessed 1" and not held and "NotImplementedError" in page
    else:
        assert term == "self-study" and listed <= held and "NotImplementedError" not in page
    assert "_split_heads" in page and "transpose" in page  # given code listed as the package has it

"""SanitizeOutputs (autograder/preprocessors/) on markdown: no active content, and the lesson's text
intact (the formgrader showed `j &gt; i` where the exercise says `j > i`)."""
from __future__ import annotations

import re

import nbformat

from autograder.preprocessors import SanitizeOutputs


def sanitized(markdown: str) -> str:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(markdown)])
    nb, _ = SanitizeOutputs().preprocess(nb, {})
    return nb.cells[0].source


def test_markdown_keeps_comparisons_and_ampersands():
    text = "reader `i` may not read `j > i`; tokens & positions; $a > b$"
    assert sanitized(text) == text


def test_markdown_loses_active_content():
    out = sanitized('Notes <script>window.x = 5</script> <img src=x onerror="window.x = 6"> '
                    '<a href="javascript:window.x = 7">l</a> &lt;script&gt;')
    assert "<script" not in out and "onerror" not in out and "javascript:" not in out
    assert set(re.findall(r"<\s*/?\s*(\w+)", out)) == {"img", "a"}  # harmless tags only; the rest is text
    assert out.count("&lt;script>") == 2 and "&lt;/script>" in out  # the escaped tags, as text

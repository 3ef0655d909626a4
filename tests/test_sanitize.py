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


def test_markdown_links_images_and_attachments_lead_nowhere_active():
    out = sanitized("[a](javascript:alert(1)) [b]( JavaScript:x) ![c](data:image/svg+xml,<svg onload=x>) "
                    "<javascript:y> ![d](attachment:missing.png)\n[ref]: vbscript:z\n"
                    "[fine](https://example.org) see `x: y`")
    assert not re.search(r"(?i)(javascript|vbscript|data|attachment):", out), out
    assert "[fine](https://example.org)" in out and "`x: y`" in out


def test_output_metadata_keeps_only_numeric_image_sizes_and_markdown_output_is_text():
    out = nbformat.v4.new_output("display_data", data={"image/png": "iVBORw0KGgo=", "text/markdown": "[x](javascript:y)"},
                                 metadata={"image/png": {"width": "1 onerror=fetch(1)", "height": 40},
                                           "unconfined": True, "text/html": {"isolated": True}})
    cell = nbformat.v4.new_code_cell("display(...)", outputs=[out])
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb, _ = SanitizeOutputs().preprocess(nb, {})
    kept = nb.cells[0].outputs[0]
    assert kept.metadata == {"image/png": {"height": 40}}
    assert "text/markdown" not in kept.data and kept.data["text/plain"] == "[x](javascript:y)"

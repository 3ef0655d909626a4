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
    out = sanitized(
        'Notes <script>window.x = 5</script> <img src=x onerror="window.x = 6"> '
        '<a href="javascript:window.x = 7">l</a> &lt;script&gt;'
    )
    assert "<script" not in out and "onerror" not in out and "javascript:" not in out
    assert set(re.findall(r"<\s*/?\s*(\w+)", out)) == {"img", "a"}  # harmless tags only; the rest is text
    assert out.count("&lt;script>") == 2 and "&lt;/script>" in out  # the escaped tags, as text


def test_markdown_links_images_and_attachments_lead_nowhere_active():
    out = sanitized(
        "[a](javascript:alert(1)) [b]( JavaScript:x) ![c](data:image/svg+xml,<svg onload=x>) "
        "<javascript:y> ![d](attachment:missing.png)\n[ref]: vbscript:z\n"
        "[fine](https://example.org) see `x: y`"
    )
    assert not re.search(r"(?i)(javascript|vbscript|data|attachment):", out), out
    assert "[fine](#https://example.org)" in out and "`x: y`" in out  # readable, followed nowhere


def test_markdown_and_html_load_nothing_and_link_out_of_nothing():
    """What would fetch on load (an image, an iframe, a refresh) or leave the page on a click (a
    link out, a form, a bare address Markdown links) is inert; links within the course stay."""
    out = sanitized(
        "![pic](http://127.0.0.1:9/img) ![rel](local.png) [out](https://example.org) "
        "[course](../../book/ch11_cross_attention.md) [here](#top) bare http://127.0.0.1:9/bare\n"
        "[ref]: //127.0.0.1:9/ref\n"
        '<a href="http://127.0.0.1:9/a">a</a> <a href="#x">x</a> <img src="http://127.0.0.1:9/i" '
        'width="3" height="1 onerror=x"> <iframe src="http://127.0.0.1:9/f"></iframe> '
        '<form action="http://127.0.0.1:9/form"><button>b</button></form> '
        '<meta http-equiv="refresh" content="0;url=http://127.0.0.1:9/m">'
    )
    assert "![" not in out and "[pic](#http://127.0.0.1:9/img)" in out and "[rel](local.png)" in out
    assert "[out](#https://example.org)" in out and "[course](../../book/ch11_cross_attention.md)" in out
    assert "[here](#top)" in out and "[ref]: #//127.0.0.1:9/ref" in out
    assert "http://127.0.0.1:9/bare" not in out and "http:\u2060//127.0.0.1:9/bare" in out
    tags = re.findall(r"<(\w+)([^>]*)>", out)
    assert {t for t, _ in tags} == {"a", "img"}  # iframe, form, button and meta are text
    assert sorted(attrs.strip() for _, attrs in tags) == ["", 'href="#x"', 'width="3"']


def test_output_metadata_keeps_only_numeric_image_sizes_and_markdown_output_is_text():
    out = nbformat.v4.new_output(
        "display_data",
        data={"image/png": "iVBORw0KGgo=", "text/markdown": "[x](javascript:y)"},
        metadata={
            "image/png": {"width": "1 onerror=fetch(1)", "height": 40},
            "unconfined": True,
            "text/html": {"isolated": True},
        },
    )
    cell = nbformat.v4.new_code_cell("display(...)", outputs=[out])
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb, _ = SanitizeOutputs().preprocess(nb, {})
    kept = nb.cells[0].outputs[0]
    assert kept.metadata == {"image/png": {"height": 40}}
    assert "text/markdown" not in kept.data and kept.data["text/plain"] == "[x](javascript:y)"


def test_typeset_math_links_nowhere():
    """MathJax (which the feedback page and the formgrader load) makes a link of ``\\href``."""
    out = sanitized(r"$\href{http://127.0.0.1:9/m}{x} + \frac{a}{b}$")
    assert out.startswith(r"$\text{http:") and out.endswith(r"{x} + \frac{a}{b}$") and r"\href" not in out
    out = nbformat.v4.new_output("display_data", data={"text/latex": r"$\href {javascript:x}{y}$", "text/plain": "y"})
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[out])])
    nb, _ = SanitizeOutputs().preprocess(nb, {})
    assert nb.cells[0].outputs[0].data["text/latex"] == r"$\text {javascript:x}{y}$"
    # math in an HTML output: MathJax typesets the page's text, HTML outputs' included
    out = nbformat.v4.new_output(
        "display_data", data={"text/html": r"<p>$\href{http://127.0.0.1:9/h}{z}$</p>", "text/plain": "z"}
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("", outputs=[out])])
    nb, _ = SanitizeOutputs().preprocess(nb, {})
    assert nb.cells[0].outputs[0].data["text/html"] == r"<p>$\text{http://127.0.0.1:9/h}{z}$</p>"


def test_no_widget_state_is_kept():
    nb = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("")],
        metadata={
            "widgets": {"application/vnd.jupyter.widget-state+json": {"state": {}}},
            "kernelspec": {"name": "python3", "display_name": "Python 3"},
        },
    )
    nb, _ = SanitizeOutputs().preprocess(nb, {})
    assert "widgets" not in nb.metadata and nb.metadata.kernelspec.name == "python3"

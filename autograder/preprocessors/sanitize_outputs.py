"""``SanitizeOutputs`` (before the grades are saved, and again in ``GenerateFeedback``): no script,
event handler or ``javascript:`` link from a student's cell reaches the formgrader or the
feedback HTML."""

from __future__ import annotations

import numbers
import re

from bleach import ALLOWED_TAGS
from nbconvert.preprocessors.sanitize import SanitizeHTML
from traitlets import Bool, default


class SanitizeOutputs(SanitizeHTML):
    """Student-made HTML (outputs, markdown and raw cells) with no active content left.

    The autograded notebook is what the formgrader renders in the instructor's Jupyter session,
    and the feedback HTML is opened by whoever gets it: a cell's ``<script>``, ``onerror=`` or
    ``javascript:`` link must arrive as inert text. nbconvert's ``SanitizeHTML`` (bleach) keeps
    a short list of tags and attributes and drops every output type that could run code
    (JavaScript, widget views); this allows the harmless tags a plot or a table needs.
    """

    enabled = Bool(True, help="nbconvert's preprocessors are off unless enabled; this one always runs.").tag(
        config=True
    )

    @default("tags")
    def _tags_default(self):
        return sorted(
            set(ALLOWED_TAGS)
            | {
                "p",
                "div",
                "span",
                "pre",
                "br",
                "hr",
                "table",
                "thead",
                "tbody",
                "tr",
                "th",
                "td",
                "h1",
                "h2",
                "h3",
                "h4",
                "h5",
                "h6",
                "sub",
                "sup",
                "img",
            }
        )

    @default("attributes")
    def _attributes_default(self):
        return {"*": inert_attribute}

    def preprocess(self, nb, resources):
        # the widget state the kernel left (nbclient keeps it in the notebook's metadata): a page or
        # a JupyterLab that finds it loads a widget manager and renders the student's models
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if cell.cell_type == "markdown":
            # bleach escapes every ">" and "&" it keeps as text, which markdown then shows as
            # "&gt;" (in code spans too: `j > i`). Only "<" can open a tag, and it stays escaped.
            cell.source = inert_math(inert_links(cell.source.replace("&gt;", ">").replace("&amp;", "&")))
            cell.pop("attachments", None)  # a student's attachment is never shown, nor looked up
        return cell, resources

    def sanitize_code_outputs(self, outputs):
        """nbconvert's rules, and: output metadata reduced to numeric image sizes (the template
        writes a width unquoted, so a string there becomes an attribute of the page), and
        Markdown output shown as its text (a Markdown link or image is a URL the page would follow,
        or an attachment nbconvert would look up), and TeX (a ``text/latex`` output, or math in a
        ``text/html`` one, which MathJax typesets on the page) with no ``\\href``."""
        for output in outputs:
            if output.get("output_type") in ("display_data", "execute_result", "update_display_data"):
                data = output.get("data", {})
                if "text/markdown" in data:
                    data.setdefault("text/plain", data["text/markdown"])
                    del data["text/markdown"]
                for mime in ("text/latex", "text/html"):  # MathJax typesets the TeX of HTML outputs too
                    if isinstance(data.get(mime), str):
                        data[mime] = inert_math(data[mime])
                output["metadata"] = _image_sizes(output.get("metadata"))
        return super().sanitize_code_outputs(outputs)


def inert_attribute(tag: str, name: str, value: str) -> bool:
    """Whether an attribute of a student's HTML may stay: nothing that loads or leads anywhere.
    A link keeps only an in-page target (``#...``), an image no source (the output images the
    page shows are embedded by nbconvert itself, never through a student's ``<img>``), sizes are
    numbers."""
    if name in ("class", "title", "alt"):
        return True
    if tag == "a" and name == "href":
        return value.strip().startswith("#")
    if tag == "img" and name in ("width", "height"):
        return value.strip().isdigit()
    return False


def _image_sizes(metadata) -> dict:
    """Only {mimetype: {"width": number, "height": number}} survives of an output's metadata."""
    kept = {}
    for mime, value in (metadata or {}).items() if isinstance(metadata, dict) else ():
        if isinstance(mime, str) and mime.startswith("image/") and isinstance(value, dict):
            sizes = {
                k: v
                for k, v in value.items()
                if k in ("width", "height")
                and isinstance(v, numbers.Real)
                and not isinstance(v, bool)
                and 0 < v < 100_000
            }
            if sizes:
                kept[mime] = sizes
    return kept


# a link or image target, an autolink or a reference definition whose scheme can run or fetch
_ACTIVE = re.compile(
    r"(?i)(\]\(\s*(?:<|&lt;)?|<|&lt;|^\s*\[[^\]]*\]:\s*(?:<|&lt;)?)\s*"
    r"(javascript|vbscript|data|file|attachment)\s*:",
    re.M,
)
# an image (it would load its source when the page opens): shown as a link instead
_IMAGE = re.compile(r"!(\[[^\]\n]*\]\s*[(\[])")
# a link target or reference definition that leaves the page (a scheme, or //host)
_REMOTE = re.compile(r"(?i)(\]\(\s*(?:<|&lt;)?|^\s*\[[^\]]*\]:\s*(?:<|&lt;)?)\s*(?=[a-z][a-z0-9+.-]*:|//)", re.M)
# a bare web address (Markdown makes it a link)
_BARE_URL = re.compile(r"(?i)(?<![#\w])(https?):(?=//)")


def inert_links(markdown: str) -> str:
    """Markdown whose links and images lead nowhere and load nothing: ``javascript:``,
    ``vbscript:``, ``data:``, ``file:`` and ``attachment:`` targets lose their scheme
    (``javascript :x`` is no scheme, only a harmless name), an image is shown as a link to its
    source, a link out of the page becomes an in-page one (``#https://...``: the address stays
    readable, nothing is fetched on a click) and a bare web address is no link (a word joiner
    after its scheme). Links within the course (relative ones) stay."""
    markdown = _ACTIVE.sub(lambda m: f"{m.group(1)}{m.group(2)} :", markdown)
    markdown = _IMAGE.sub(r"\1", markdown)
    markdown = _REMOTE.sub(lambda m: f"{m.group(1)}#", markdown)
    return _BARE_URL.sub("\\1:\u2060", markdown)


# MathJax's \href makes a link of typeset math (its Safe extension, which the pages load, still
# allows web addresses): shown as text instead
_TEX_LINK = re.compile(r"\\href(?=\s*\{)")


def inert_math(tex: str) -> str:
    """TeX (in Markdown or a ``text/latex`` output) with no link: ``\\href{url}{text}`` is typeset as text."""
    return _TEX_LINK.sub(r"\\text", tex)

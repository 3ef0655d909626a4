"""``SanitizeOutputs`` (before the grades are saved, and again in ``GenerateFeedback``): no script,
event handler or ``javascript:`` link from a student's cell reaches the formgrader or the
feedback HTML."""
from __future__ import annotations

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

    enabled = Bool(True, help="nbconvert's preprocessors are off unless enabled; this one always runs.").tag(config=True)

    @default("tags")
    def _tags_default(self):
        return sorted(set(ALLOWED_TAGS) | {"p", "div", "span", "pre", "br", "hr", "table", "thead", "tbody",
                                           "tr", "th", "td", "h1", "h2", "h3", "h4", "h5", "h6", "sub", "sup", "img"})

    @default("attributes")
    def _attributes_default(self):
        return {"a": ["href", "title"], "img": ["src", "alt", "width", "height"], "abbr": ["title"],
                "acronym": ["title"], "*": ["class"]}

    def preprocess_cell(self, cell, resources, index):
        cell, resources = super().preprocess_cell(cell, resources, index)
        if cell.cell_type == "markdown":
            # bleach escapes every ">" and "&" it keeps as text, which markdown then shows as
            # "&gt;" (in code spans too: `j > i`). Only "<" can open a tag, and it stays escaped.
            cell.source = cell.source.replace("&gt;", ">").replace("&amp;", "&")
        return cell, resources

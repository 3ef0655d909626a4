"""The feedback page (``GenerateFeedback.exporter_class``): nbgrader's HTML exporter with the course's
template, and a page for every notebook.

- **One escape, at render.** ``templates/feedback/encdec.html.j2`` extends nbgrader's feedback template
  and draws every string that is not a cell (a comment, a grade id, the notebook's name) as escaped
  text; a comment keeps its line breaks and nothing in it is Markdown, HTML or TeX, whoever wrote it.
  The cell that states a notebook's repairs (``autograder/repairs.py``) is shown as text too. No
  writer of a comment or a note escapes or quotes anything for the page.
- **A page for every notebook.** nbgrader stops a student's feedback on the first exception of a
  step or the template and ends ``generate_feedback`` with exit 1 for the whole batch. Here a
  notebook whose page cannot be made gets a short page instead (its name, its score when the
  gradebook gave one, and a sentence in the submission's language), and the error is logged for the
  instructor: what one student handed in never stops the batch.
"""

from __future__ import annotations

import html
from pathlib import Path

import nbgrader
from nbconvert.exporters import HTMLExporter
from traitlets import Unicode, default, validate

from autograder.repairs import NOTICE_ID, notice, repairs
from encdec.grading import language

# the course's templates first, then nbgrader's (the course's template extends nbgrader's feedback)
TEMPLATE_BASEDIRS = [
    str(Path(__file__).resolve().parent / "templates"),
    str(Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates"),
]


class FeedbackExporter(HTMLExporter):
    """nbgrader's feedback page drawn by the course's template; a short page where it cannot be made."""

    @default("extra_template_basedirs")
    def _default_extra_template_basedirs(self):
        return list(TEMPLATE_BASEDIRS)

    @validate("extra_template_basedirs")
    def _course_templates_first(self, proposal):
        """The course's folder first whatever is configured (``GenerateFeedback`` configures nbgrader's)."""
        return [TEMPLATE_BASEDIRS[0], *(d for d in proposal["value"] if d != TEMPLATE_BASEDIRS[0])]

    template_file = Unicode(
        "encdec.html.j2", help="The course's feedback template (in TEMPLATE_BASEDIRS' feedback/ folder)."
    ).tag(config=True, affects_environment=True)

    def from_notebook_node(self, nb, resources=None, **kw):
        from autograder.preprocessors.trusted_verdict import submission_language

        resources = {**(resources or {}), "encdec_notice_id": NOTICE_ID}
        try:
            # the cell that states the repairs is drawn from the records, as text (its source, Markdown
            # for the formgrader, was sanitized as a student's Markdown is)
            done = repairs(nb)
            resources["encdec_notice"] = notice(done, submission_language(nb)) if done else ""
            return super().from_notebook_node(nb, resources, **kw)
        except Exception:
            self.log.exception("the feedback page of %s could not be made; a short page stands for it", _who(resources))
            return short_page(nb, resources), resources


def short_page(nb, resources: dict) -> str:
    """The page that stands for a feedback page that could not be made: every value escaped."""
    from autograder.preprocessors.trusted_verdict import submission_language

    info = resources.get("nbgrader", {})
    score = info.get("score")
    with language.speaking(submission_language(nb)):
        text = language.text(
            "feedback_short_page",
            score="?" if score is None else f"{float(score):.2f}",
            max_score="?" if info.get("max_score") is None else f"{float(info['max_score']):.2f}",
        )
    name = html.escape(str(info.get("notebook", "")))
    return (
        f'<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>{name}</title></head>\n'
        f"<body><h4>{name}</h4><p>{html.escape(text)}</p></body></html>\n"
    )


def _who(resources) -> str:
    info = (resources or {}).get("nbgrader", {})
    return "/".join(str(info.get(k, "?")) for k in ("student", "assignment", "notebook"))

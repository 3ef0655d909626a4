"""The formgrader's addresses are plain names, or no page: a Jupyter server extension of the course
(enabled in every Jupyter server of the environment: ``make venv`` installs
``deploy/jupyter-config/``'s file into its ``etc/jupyter``).

nbgrader's formgrader writes parts of its URL path into its pages with no escape: into the page's
text (``<li class="active">{{ assignment_id }}</li>``) and into a script (``var student_id =
"{{ student_id }}";``, where even an escaped string could carry ``\\u003c`` to a later use). So a link
to ``/formgrader/manage_students/<img src=x onerror=...>`` ran script in the instructor's origin.

**Invariant: no string from a formgrader URL reaches a page.** Every formgrader address (its pages,
its API, its files) whose path holds a character outside ``PLAIN`` (letters, digits, ``_``, ``.``,
``-`` and the ``/`` between names; a percent sign, so every escape, is outside) is answered here
with a 404 in plain text that shows nothing of the address, before nbgrader's handler sees the request. The
names the course makes are plain (assignments: ``autograder/edition.py``; students: account names;
their full names: ``autograder/roster.py``), so no honest address is refused.

**No string of the gradebook reaches the grading page unescaped.** nbgrader's page of one submission
(``/formgrader/submissions/<id>``) writes the student's id and names and the notebook's name into its
markup and scripts as they are; ``GradingPage`` hands its template those strings escaped.

nbgrader's ``/formgrader?path=<folder>`` (JupyterLab's "Formgrader (local)") makes the formgrader load
and run ``<folder>/nbgrader_config.py``: a link to a folder of a student's ran the student's Python as
the instructor. ``LocalFormgrader`` takes such a folder only inside the server's root folder (the
instructor's, where no student writes), links resolved; any other is not found.

The rules are added when the server loads this extension, before nbgrader's formgrader (extensions load
in the order of their names, and a request goes to the first rule that matches it).
"""

from __future__ import annotations

import html
import os

from jupyter_server.utils import url_path_join
from nbgrader.server_extensions.formgrader.handlers import FormgraderHandler, SubmissionHandler
from tornado import web

PLAIN = "A-Za-z0-9_./-"  # the characters of a formgrader address (nbgrader's `/formgrader/...` routes)
REFUSED = rf"/formgrader/[{PLAIN}]*[^{PLAIN}].*"  # matched on the raw path: `%3C` holds a `%`


class NotPlain(web.RequestHandler):
    """A formgrader address that names something with a character outside ``PLAIN``: not found, in
    words of its own (nothing of the address is shown)."""

    def prepare(self):
        self.set_status(404)
        self.set_header("Content-Type", "text/plain; charset=UTF-8")
        self.finish("Not found: the formgrader's addresses hold letters, digits, '_', '.', '-' and '/' only.\n")


class LocalFormgrader(FormgraderHandler):
    """nbgrader's entry to the formgrader, with a course folder (``?path=``) inside the server's root only."""

    def get(self):
        root, path = os.path.realpath(self.settings["server_root_dir"]), self.get_argument("path", "")
        if path and os.path.commonpath([root, os.path.realpath(path)]) != root:
            raise web.HTTPError(404)
        return super().get()


def _escaped(resources: dict) -> dict:
    return {k: html.escape(v) if isinstance(v, str) else v for k, v in resources.items()}


class GradingPage(SubmissionHandler):
    """nbgrader's page of one submission, drawn from the gradebook's strings escaped (its template and
    its page for a missing file write them as they are)."""

    @property
    def exporter(self):
        exporter = super().exporter

        class Escaping:
            def from_filename(self, filename, resources=None, **kw):
                return exporter.from_filename(filename, resources=_escaped(resources or {}), **kw)

        return Escaping()

    def render(self, name, **ns):
        return super().render(name, **{k: _escaped(v) if k == "resources" else v for k, v in ns.items()})


def _jupyter_server_extension_points():
    return [{"module": "autograder.formgrader_guard"}]


def _load_jupyter_server_extension(serverapp) -> None:
    web_app = serverapp.web_app
    base = web_app.settings["base_url"]
    web_app.add_handlers(
        ".*$",
        [
            (url_path_join(base, REFUSED), NotPlain),
            (url_path_join(base, "/formgrader/?"), LocalFormgrader),
            (url_path_join(base, r"/formgrader/submissions/([^/]+)/?"), GradingPage),
        ],
    )

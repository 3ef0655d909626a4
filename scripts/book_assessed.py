"""Sphinx extension of the course book (loaded from _config.yml): the assessed term's listings (issue 50).

With ``ENCDEC_ASSESSED=1`` (``make book ASSESSED=1``) a ``literalinclude`` of a file of the package
(``encdec/``) shows that file of its assessed edition instead, ``build/assessed/encdec/`` (written
by ``python -m autograder.assessed`` before the build, mk/book.mk): a graded answer's body is its
exercise's stub, everything else as in the package. Only what a page *shows* changes: the executed
cells import the package itself, on the instructor's side at build, so every figure and output
stays, and since their code is unchanged the execution cache serves them again. The setting is a
configuration value that rebuilds the environment, so switching it reads every page again.

The built site says which it is in ``term.txt``, ``self-study`` or ``assessed <ASSESSED>``
(tests/test_assessed_site.py reads it).
"""

from __future__ import annotations

import os
from pathlib import Path

from sphinx.directives.code import LiteralInclude
from sphinx.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "encdec"
ASSESSED = ROOT / "build" / "assessed" / "encdec"
SETTING = "ENCDEC_ASSESSED"


def setting() -> str:
    """ASSESSED as make book passes it: 0 (self-study), 1, or the assignments still open (mk/release.mk)."""
    value = os.environ.get(SETTING, "0").strip() or "0"
    if not all(part.strip().replace("_", "").isalnum() for part in value.split(",")):
        raise ConfigError(f"{SETTING} (ASSESSED of make book) is 0, 1 or a list of assignments, not {value!r}")
    return value


class PackageInclude(LiteralInclude):
    """``literalinclude``, reading a file of the package from its assessed edition in an assessed term."""

    def run(self):
        config = self.env.config
        if config.encdec_assessed != "0":
            _, path = self.env.relfn2path(self.arguments[0], self.env.docname)
            path = Path(path).resolve()
            if path.is_relative_to(PACKAGE):
                edition = Path(config.encdec_assessed_edition) / path.relative_to(PACKAGE)
                if not edition.is_file():
                    raise self.error(f"{edition} is missing: make book ASSESSED=1 writes the assessed edition first")
                self.arguments[0] = "/" + os.path.relpath(edition, Path(self.env.srcdir).resolve())
        return super().run()


def _say_which_term(app, exception) -> None:
    if exception is None:
        (Path(app.outdir) / "term.txt").write_text(
            "self-study\n" if app.config.encdec_assessed == "0" else f"assessed {app.config.encdec_assessed}\n"
        )


def setup(app):
    app.add_config_value("encdec_assessed", setting(), "env")
    app.add_config_value("encdec_assessed_edition", str(ASSESSED), "env")  # where mk/book.mk writes it
    app.add_directive("literalinclude", PackageInclude, override=True)
    app.connect("build-finished", _say_which_term)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

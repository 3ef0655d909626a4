"""Sphinx extension of the course book (loaded from _config.yml): math typeset at build, as SVG.

The book has two formulas per edition; MathJax in the page would cost every reader 1.2 MB of
script and fonts for them. Here MathJax runs once, at build, in Node (the ``mathjax`` package that
``npm ci`` installs, package.json): each formula becomes inline SVG drawn in ``currentColor`` (so it
follows the dark theme) with MathML beside it for screen readers (MathJax's assistive MathML,
hidden visually by ``book/_static/encdec-book.css``). Pages load no math script at all.

Typeset formulas are kept in ``_build/.math-svg/<sha256 of the TeX>.html``, so an unchanged
formula costs no Node run. A formula MathJax cannot typeset is a build error that names it.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

from docutils import nodes
from sphinx.errors import ExtensionError

ROOT = Path(__file__).resolve().parent.parent
RENDERER = "encdec_svg"

# Reads [{"tex", "display"}, ...] as JSON on stdin, writes the typeset HTML of each, in order.
TYPESET_JS = r"""
let input = "";
process.stdin.on("data", (chunk) => { input += chunk; });
process.stdin.on("end", () => {
  require("mathjax").init({
    loader: { load: ["input/tex", "output/svg", "a11y/assistive-mml"] },
    svg: { fontCache: "none" },  // each formula self-contained
    startup: { typeset: false },
  }).then((MathJax) => {
    const out = JSON.parse(input).map(({ tex, display }) => {
      const node = MathJax.tex2svg(tex, { display });
      const error = node.querySelector && node.querySelector("[data-mjx-error]");
      if (error) throw new Error(`${tex}: ${error.getAttribute("data-mjx-error")}`);
      return MathJax.startup.adaptor.outerHTML(node);
    });
    process.stdout.write(JSON.stringify(out));
  }).catch((err) => { process.stderr.write(String(err && err.message || err)); process.exit(1); });
});
"""


def typeset(formulas: list[tuple[str, bool]], cache: Path, node_modules: Path = ROOT / "node_modules") -> list[str]:
    """The SVG-with-MathML HTML of each (TeX, display) formula; uncached ones in one Node run."""
    cache.mkdir(parents=True, exist_ok=True)

    def path(tex, display):
        return cache / (hashlib.sha256(f"{int(display)}\0{tex}".encode()).hexdigest() + ".html")

    missing = [(tex, display) for tex, display in dict.fromkeys(formulas) if not path(tex, display).is_file()]
    if missing:
        node = shutil.which("node")
        if node is None or not (node_modules / "mathjax" / "package.json").is_file():
            raise ExtensionError("typesetting the book's math needs Node.js and `npm ci` (the mathjax package)")
        run = subprocess.run(
            [node, "-e", TYPESET_JS],
            input=json.dumps([{"tex": t, "display": d} for t, d in missing]),
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={"NODE_PATH": str(node_modules), "PATH": str(Path(node).parent)},
        )
        if run.returncode != 0:
            raise ExtensionError(f"MathJax could not typeset the book's math: {run.stderr.strip()}")
        for (tex, display), html in zip(missing, json.loads(run.stdout)):
            path(tex, display).write_text(html, encoding="utf-8")
    return [path(tex, display).read_text(encoding="utf-8") for tex, display in formulas]


def _cache(translator) -> Path:
    return Path(translator.builder.outdir).parent / ".math-svg"


def visit_math(self, node) -> None:
    [html] = typeset([(node.astext(), False)], _cache(self))
    self.body.append(f'<span class="math encdec-math">{html}</span>')
    raise nodes.SkipNode


def visit_displaymath(self, node) -> None:
    tex = node.astext()
    [html] = typeset([(tex, True)], _cache(self))
    self.body.append(self.starttag(node, "div", CLASS="math encdec-math"))
    if node.get("number"):
        self.body.append(f'<span class="eqno">({node["number"]})</span>')
    self.body.append(html + "</div>\n")
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer(RENDERER, (visit_math, None), (visit_displaymath, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""Bundle the widgets (``make widgets``): each widget's ES module and what it imports, one module each.

anywidget takes a widget's module as one text, so each entry of ``encdec.widgets.registry.WIDGETS``
(``encdec/widgets/<name>.js``, which imports ``common.js``, ``model_forward.js``, ``task.js``,
``constants.js``) is bundled by esbuild (npm, ``package.json``) into ``encdec/widgets/bundle/<name>.js``.
First ``constants.js`` is written from ``encdec/data.py`` (the vocabulary, the lengths, the ids a question
is made of), so the JavaScript never types them again. Both are build products, never tracked; the
book build and the student wheel run this first (mk/book.mk, mk/release.mk), and the tests too
(tests/conftest.py).

Usage: python scripts/widgets_bundle.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WIDGETS_DIR = ROOT / "encdec" / "widgets"
ESBUILD = ROOT / "node_modules" / ".bin" / "esbuild"


def constants_js() -> str:
    """``constants.js``: the facts of ``encdec/data.py`` the widgets compute with."""
    from encdec import data

    ids = data.TOKEN_TO_ID
    facts = {
        "TOKENS": list(data.VOCAB),  # a token's id is its index
        "BOS_ID": data.BOS_ID,
        "EOS_ID": data.EOS_ID,
        "SIGN_IDS": {s: ids[s] for s in data.SIGNS},
        "OP_IDS": {o: ids[o] for o in data.OPERATORS},
        "QUESTION_LEN": data.QUESTION_LEN,
        "ANSWER_LEN": data.ANSWER_LEN,  # Kq, Ka
        "OPERAND_MAX": data.OPERAND_MAX,
        # per question position, the ids allowed there (encode_question's layout)
        "QUESTION_LAYOUT": [[ids[tok] for tok in allowed] for allowed in data._QUESTION_LAYOUT],
    }
    lines = [f"export const {name} = {json.dumps(value)};" for name, value in facts.items()]
    return (
        "// Written by scripts/widgets_bundle.py from encdec/data.py (make widgets): never edit, never tracked.\n"
        + "\n".join(lines)
        + "\n"
    )


def build() -> list[Path]:
    """Write constants.js, then bundle every registered widget; return the bundles' paths."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from encdec.widgets.registry import WIDGETS

    if not ESBUILD.exists():
        raise SystemExit(f"{ESBUILD.relative_to(ROOT)} is missing: run `make widgets` (npm ci installs esbuild)")
    constants = WIDGETS_DIR / "constants.js"
    text = constants_js()
    if not constants.is_file() or constants.read_text(encoding="utf-8") != text:
        constants.write_text(text, encoding="utf-8")
    out = WIDGETS_DIR / "bundle"
    out.mkdir(exist_ok=True)
    names = sorted(set(WIDGETS.values()))
    with tempfile.TemporaryDirectory(dir=out) as staging:  # then each file replaced whole: a reader never sees half
        subprocess.run(
            [
                str(ESBUILD),
                *(str(WIDGETS_DIR / f"{n}.js") for n in names),
                "--bundle",
                "--format=esm",
                "--charset=utf8",
                # blanks and syntax shortened, names kept (a reader's console still names the function):
                # the site's heaviest page stays within its budget (tests/test_browser_reader.py)
                "--minify-whitespace",
                "--minify-syntax",
                "--log-level=warning",
                f"--outdir={staging}",
            ],
            check=True,
        )
        for n in names:
            os.replace(Path(staging) / f"{n}.js", out / f"{n}.js")
    return [out / f"{n}.js" for n in names]


if __name__ == "__main__":
    print(f"{len(build())} widget bundles in encdec/widgets/bundle")

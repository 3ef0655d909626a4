"""A folder in which node runs the page's JavaScript against the package: a module that takes the names a
runner imports from the widgets' own ES modules (each from the file that defines it), the runner, and
each checkpoint's exported weights. Shared by the tests that hold the page's numbers to Python's."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from encdec.widgets import export_weights

WIDGETS_DIR = Path(__file__).resolve().parents[1] / "encdec" / "widgets"


def widget_module(names, files) -> str:
    """An ES module exporting ``names`` from the widgets' modules ``files`` (constants.js too), each name
    from the file that defines it: node imports the sources, as the bundle step does."""
    lines, left = [], list(names)
    for file in (*files, "constants.js"):
        text = (WIDGETS_DIR / file).read_text(encoding="utf-8")
        mine = [
            n for n in left if re.search(rf"^export (?:async )?(?:function|const|let) {re.escape(n)}\b", text, re.M)
        ]
        left = [n for n in left if n not in mine]
        if mine:
            lines.append(f"export {{ {', '.join(mine)} }} from {json.dumps((WIDGETS_DIR / file).as_uri())};")
    assert not left, f"no module of {files} exports {left}"
    return "\n".join(lines) + "\n"


def node_folder(
    folder: Path, module: str, parts: tuple[str, ...], names: tuple[str, ...], runner: str, presets: tuple[str, ...]
) -> tuple[str, list[Path]]:
    """Write ``module`` (exporting ``names`` from the widgets' modules ``parts``) and ``run.mjs``
    (``runner``) into ``folder``, with the weights of ``presets``; return node's path and the weights' paths."""
    node = shutil.which("node")
    assert node, "node is needed (the book build needs it too: install Node.js)"
    (folder / module).write_text(widget_module(names, parts), encoding="utf-8")
    (folder / "run.mjs").write_text(runner, encoding="utf-8")
    return node, export_weights.write(folder / "weights", presets)

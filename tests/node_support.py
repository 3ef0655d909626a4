"""A folder in which node runs the page's JavaScript against the package: the widget module's parts
joined as the page joins them (``esm``), the names a runner imports, the runner, and each checkpoint's
exported weights. Shared by the tests that hold an in-page model to PyTorch."""

from __future__ import annotations

import shutil
from pathlib import Path

from encdec.widgets import export_weights
from encdec.widgets._base import esm


def node_folder(folder: Path, module: str, parts: tuple[str, ...], names: tuple[str, ...], runner: str,
                presets: tuple[str, ...]) -> tuple[str, list[Path]]:
    """Write ``module`` (``parts`` joined, exporting ``names``) and ``run.mjs`` (``runner``) into
    ``folder``, with the weights of ``presets``; return node's path and the weights' paths."""
    node = shutil.which("node")
    assert node, "node is needed (the book build needs it too: install Node.js)"
    (folder / module).write_text(esm(*parts) + f"\nexport {{ {', '.join(names)} }};\n", encoding="utf-8")
    (folder / "run.mjs").write_text(runner, encoding="utf-8")
    return node, export_weights.write(folder / "weights", presets)

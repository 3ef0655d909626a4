"""Results over the whole question space (all 19,602 questions), computed once per checkpoint.

Chapter 13 and the widget gallery show counts over every question of the task (how many answers a
broken model still gets right); each page runs in its own kernel, in each edition, so a count made
in the page would be made four times per build. ``cached`` keeps each result as a small JSON file
named by what it depends on: the checkpoint's bytes and the source of the package modules that
compute it. Another checkpoint or another line of those modules is another file; nothing goes
stale, and every page and edition reads the one result.

The book's build makes every result before any page runs (``python -m encdec.whole_space``, in
``make book``), so a page only reads it: no cell of a page pays for the count against the build's
cell timeout, however busy the machine.

Where: ``$ENCDEC_CACHE``, else ``build/whole-space/`` in a checkout of the course (ignored by git),
else the user's cache folder. A folder that cannot be written only costs the computation.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from .train import checkpoint_root


def cache_dir() -> Path:
    """The folder of the cached results."""
    if os.environ.get("ENCDEC_CACHE"):
        return Path(os.environ["ENCDEC_CACHE"])
    root = Path(__file__).resolve().parents[1]
    if (root / "pyproject.toml").is_file():  # a checkout of the course: next to the book's build
        return root / "build" / "whole-space"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "encdec" / "whole-space"


def key(preset: str, modules: tuple[ModuleType, ...]) -> str:
    """What a result depends on, as one digest: the preset's checkpoint and the modules' source."""
    digest = hashlib.sha256((checkpoint_root() / preset / "model.pt").read_bytes())
    for module in modules:
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:20]


def cached(name: str, preset: str, modules: tuple[ModuleType, ...], compute: Callable[[], object]):
    """``compute()`` for ``preset``, read from the cache when the same checkpoint and modules made it."""
    path = cache_dir() / f"{name}-{preset}-{key(preset, modules)}.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pass
    value = compute()
    try:  # written whole or not at all: two kernels may make the same result at once
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, encoding="utf-8") as f:
            json.dump(value, f)
        os.replace(f.name, path)
    except OSError:
        pass
    return value


# Every whole-space result a page reads: (module, function of one preset), made by ``warm``.
RESULTS = (("encdec.widgets.break_it", "mistake_table"), ("encdec.decoders", "decoding_table"))


def warm(presets: tuple[str, ...] | None = None) -> None:
    """Make (or find) every result of ``RESULTS`` for every preset the figures show."""
    import importlib

    from .widgets.export_weights import PRESETS

    for module, function in RESULTS:
        for preset in presets or PRESETS:
            getattr(importlib.import_module(module), function)(preset)


if __name__ == "__main__":
    warm()

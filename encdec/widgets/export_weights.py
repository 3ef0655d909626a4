"""A trained checkpoint's weights for the browser's forward pass (``model_forward.js``), chapter 13.

The "ask the model" figure (``AskTheModel``, chapter 13 and the gallery) runs the trained
``historical`` and ``modern`` models in the reader's browser. In a notebook its weights travel
inside the widget (``export_preset`` for each checkpoint, in a synced trait). In the built book
they travel once per site: the build writes one script, ``SITE_WEIGHTS``, with the widget assets
(``write_site_script``, from ``scripts/book_assets.py`` at every build, so it cannot lag behind a
checkpoint), and the executed pages' widgets name it (``SITE_WEIGHTS_ENV``, set by ``mk/book.mk``)
instead of carrying 1.4 MB each. A classic ``<script>``, unlike ``fetch``, loads from ``file://``,
so the site still works opened from disk with no network. Nothing here is committed.

The same export as files, for the node parity test or a page of one's own (one command)::

    python -m encdec.widgets.export_weights --out DIR [--preset modern --preset historical]

writes ``DIR/<preset>.json``. Format 1: ``{"format", "preset", "config", "tensors": [[name, shape,
offset], ...], "data"}``, ``data`` the base64 of every tensor of the state dict in little-endian
float32, one after another (``offset`` counts floats). Float32 exactly as trained, never float16:
the parity test holds the browser's greedy answers equal to Python's on every question of the
task, which rounded weights would not guarantee. Sizes: ``historical`` 86,544 floats (346 KB),
``modern`` 169,488 (678 KB), a third more as base64.
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

FORMAT = 1
PRESETS = ("modern", "historical")  # the two runs the figure compares (``overfit`` answers nothing new)
# The built book's weights: one script per site that every page with the figure loads once (a
# classic <script> loads from file://, where fetch may not), named by this variable in the build's
# environment (mk/book.mk); its path is relative to the site's root.
SITE_WEIGHTS_ENV = "ENCDEC_SITE_WEIGHTS"
SITE_WEIGHTS = "_widget_assets/encdec-weights.js"


def export_model(model, preset: str = "") -> dict:
    """One model's configuration and weights as a JSON-ready dict (format above)."""
    tensors, chunks, offset = [], [], 0
    for name, value in model.state_dict().items():
        array = value.detach().cpu().numpy().astype("<f4")  # float32, little-endian whatever the machine
        tensors.append([name, list(array.shape), offset])
        chunks.append(array.ravel())
        offset += array.size
    data = np.concatenate(chunks).tobytes()
    return {
        "format": FORMAT,
        "preset": preset,
        "config": asdict(model.config),
        "tensors": tensors,
        "data": base64.b64encode(data).decode("ascii"),
    }


def export_preset(preset: str) -> dict:
    """The shipped checkpoint of ``preset`` (``encdec.train.load_run``), exported."""
    from ..train import load_run

    model, _ = load_run(preset)
    return export_model(model, preset)


def tensor(exported: dict, name: str) -> np.ndarray:
    """One tensor back from an export (float32, its shape): the inverse the tests use."""
    data = np.frombuffer(base64.b64decode(exported["data"]), dtype="<f4")
    for tensor_name, shape, offset in exported["tensors"]:
        if tensor_name == name:
            return data[offset : offset + int(np.prod(shape, dtype=np.int64))].reshape(shape)
    raise KeyError(f"no tensor {name!r} in the export of {exported.get('preset')!r}")


def write(out: Path, presets=PRESETS) -> list[Path]:
    """Write ``out/<preset>.json`` for each preset; return the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for preset in presets:
        path = out / f"{preset}.json"
        path.write_text(json.dumps(export_preset(preset)), encoding="utf-8")
        paths.append(path)
    return paths


def write_site_script(path: Path, presets=PRESETS) -> Path:
    """The site's weights script: ``window.encdecWeights = {preset: export, ...}``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    exports = {preset: export_preset(preset) for preset in presets}
    path.write_text("// written by encdec.widgets.export_weights from the shipped checkpoints\n"
                    f"window.encdecWeights = {json.dumps(exports)};\n", encoding="utf-8")
    return path


def main(argv: list[str] | None = None) -> list[Path]:
    from ..presets import PRESETS as ALL_PRESETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for <preset>.json")
    parser.add_argument("--preset", action="append", choices=sorted(ALL_PRESETS),
                        help=f"a checkpoint to export (repeatable; default: {' and '.join(PRESETS)})")
    args = parser.parse_args(argv)
    paths = write(Path(args.out), args.preset or PRESETS)
    for path in paths:
        print(f"{path}: {path.stat().st_size / 1000:.0f} kB")
    return paths


if __name__ == "__main__":
    main(sys.argv[1:])

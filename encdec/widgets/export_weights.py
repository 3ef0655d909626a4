"""A trained checkpoint's weights for the browser's forward pass (``model_forward.js``), chapter 13.

The "ask the model" figure (``AskTheModel``, chapter 13 and the gallery) runs the trained
``historical`` and ``modern`` models in the reader's browser. In a notebook its weights travel
inside the widget (``export_preset`` for each checkpoint, in a synced trait). In the built book
they travel once per site: the build writes one script, ``SITE_WEIGHTS``, with the widget assets
(``write_site_script``, from ``scripts/book_assets.py`` at every build, so it cannot lag behind a
checkpoint), and the executed pages' widgets name it (``SITE_WEIGHTS_ENV``, set by ``mk/book.mk``)
instead of carrying the weights each; the figure loads it when its reader first asks a question. A classic ``<script>``, unlike ``fetch``, loads from
``file://``, so the site still works opened from disk with no network. In that script the weights
are packed (``pack``: byte planes, deflate, base64; ``site_weights.js`` unpacks them in the page):
1.02 MB of float32 become 1.16 MB of script instead of 1.36 MB as plain base64, bit for bit the
same floats. Nothing here is committed.

The same export as files, for the node parity test or a page of one's own (one command)::

    python -m encdec.widgets.export_weights --out DIR [--preset modern --preset historical]

writes ``DIR/<preset>.json``. Format 1: ``{"format", "preset", "config", "tensors": [[name, shape,
offset], ...], "data"}``, ``data`` the base64 of every tensor of the state dict in little-endian
float32, one after another (``offset`` counts floats). Float32 exactly as trained, never rounded:
the parity test holds the browser's greedy answers equal to Python's on every question of the
task, and rounding breaks that. Measured on all 19,602 questions, ``modern`` keeps every answer
with its weights rounded to float16, bfloat16 or 8-bit (per row), but ``historical``, whose
plateau answers many questions by a small margin, changes 9 answers in float16, 76 in bfloat16
and 185 in 8 bits. Sizes: ``historical`` 86,544 floats (346 KB), ``modern`` 169,488 (678 KB).
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import zlib
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


def figure_weights(presets, weights: dict | None) -> tuple[list[str], dict, str]:
    """What a figure that runs the model carries (``AskTheModel``, ``BreakIt``): its presets, the
    exports it holds (none in the built book, whose pages name the site's script instead: ``src``)
    and that script's path, relative to the site's root ("" in a notebook)."""
    import os

    presets = list(presets)
    if not presets:
        raise ValueError("presets must name at least one checkpoint, e.g. ('modern', 'historical')")
    src = os.environ.get(SITE_WEIGHTS_ENV, "") if weights is None else ""
    if src:
        return presets, {}, src
    if weights is None:
        weights = {preset: export_preset(preset) for preset in presets}
    missing = [p for p in presets if p not in weights]
    if missing:
        raise ValueError(f"no weights for {missing}: expected exports of every preset in {presets}")
    return presets, weights, src


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


def pack(exported: dict) -> dict:
    """An export with its data packed for the site's script: the float32 bytes as four byte planes
    (all first bytes, then all second bytes...), raw deflate, base64 (``site_weights.js`` inverts it)."""
    raw = np.frombuffer(base64.b64decode(exported["data"]), dtype=np.uint8)  # (4 N,)
    planes = raw.reshape(-1, 4).T.tobytes()  # (4, N): byte b of every float, for b = 0..3
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: DecompressionStream("deflate-raw")
    return {**exported, "data": base64.b64encode(deflate.compress(planes) + deflate.flush()).decode("ascii")}


def unpack(packed: dict) -> dict:
    """``pack`` inverted: the export as ``export_model`` wrote it."""
    planes = np.frombuffer(zlib.decompress(base64.b64decode(packed["data"]), -15), dtype=np.uint8)
    raw = planes.reshape(4, -1).T.tobytes()  # (N, 4): each float's four bytes again
    return {**packed, "data": base64.b64encode(raw).decode("ascii")}


SITE_PACKED = "encdecUnpackWeights("  # the call in the site script that carries the packed exports


def write_site_script(path: Path, presets=PRESETS) -> Path:
    """The site's weights script: the unpacking code (``site_weights.js``), then
    ``window.encdecWeightsReady = encdecUnpackWeights({preset: packed export, ...});``."""
    from ._base import asset_text

    path.parent.mkdir(parents=True, exist_ok=True)
    packed = {preset: pack(export_preset(preset)) for preset in presets}
    path.write_text(
        "// written by encdec.widgets.export_weights from the shipped checkpoints\n"
        + asset_text("site_weights.js")
        + f"window.encdecWeightsReady = {SITE_PACKED}{json.dumps(packed)});\n",
        encoding="utf-8",
    )
    return path


def read_site_script(path: Path) -> dict:
    """The exports a site script carries, unpacked: {preset: export} (the tests' inverse)."""
    text = path.read_text(encoding="utf-8")
    body = text[text.rindex(SITE_PACKED) + len(SITE_PACKED) :].rstrip().removesuffix(";").removesuffix(")")
    return {preset: unpack(packed) for preset, packed in json.loads(body).items()}


def main(argv: list[str] | None = None) -> list[Path]:
    from ..presets import PRESETS as ALL_PRESETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for <preset>.json")
    parser.add_argument(
        "--preset",
        action="append",
        choices=sorted(ALL_PRESETS),
        help=f"a checkpoint to export (repeatable; default: {' and '.join(PRESETS)})",
    )
    args = parser.parse_args(argv)
    paths = write(Path(args.out), args.preset or PRESETS)
    for path in paths:
        print(f"{path}: {path.stat().st_size / 1000:.0f} kB")
    return paths


if __name__ == "__main__":
    main(sys.argv[1:])

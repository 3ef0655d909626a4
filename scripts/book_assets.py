"""Write the front-end assets the static book needs into build/widget_assets/_widget_assets.

The built site works with no network and as file://, and a page loads only what it uses:

- ``widgets.js``: renders the saved widget views of a page (``encdec/widgets/static_page.js``: every
  book widget is an anywidget whose state carries its own ES module, so no Jupyter widgets HTML
  manager, RequireJS or icon font is needed). Only pages with widgets load it (myst-nb adds
  ``nb_ipywidgets_js``, _config.yml, to those pages alone).
- ``widgets.css``: the widgets' stylesheet, once per site: the built pages' figures name it
  (``encdec.widgets._base.SITE_CSS``) and widgets.js links it, instead of each figure carrying it.
- ``esm/<name>.js``: each registered widget's module (its bundle, ``make widgets``) once per site, a
  classic script: the built pages' figures name their widget (``encdec.widgets._base.SITE_ESM_NAME``)
  and widgets.js loads its script through its map of the registry, instead of each figure carrying
  its whole module (a chapter's four model-running figures carried model_forward.js four times).
- ``encdec-weights.js``: the trained checkpoints' weights for the "ask the model" figure, once per
  site (``encdec.widgets.export_weights.write_site_script``); only that figure loads it, when its
  reader first asks a question (a page weighs no more for carrying the figure).

Math needs no script: ``scripts/book_math.py`` typesets it at build. Sphinx publishes the folder at
the site root through ``html_extra_path`` (``_config.yml``). The assets stay out of any ``_static``
folder: Jupyter Book 1.x would inject every script there into every page. ``--check-cache`` also
clears the notebook execution cache when the package (widgets included) or a checkpoint changed,
since a cache hit would keep old widget JavaScript.

Usage: python scripts/book_assets.py [--out build/widget_assets] [--check-cache _build]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSETS = "_widget_assets"  # the folder name pages refer to (see _config.yml)
WIDGETS_JS = "widgets.js"  # encdec/widgets/static_page.js, as the pages name it


def build_assets(out: Path) -> dict:
    """Write every asset under ``out / ASSETS``; return the manifest (versions, files)."""
    import anywidget

    from encdec.widgets._base import SITE_CSS, asset_text, renderer_js, site_esm_path, site_esm_script
    from encdec.widgets.export_weights import SITE_WEIGHTS, write_site_script
    from encdec.widgets.registry import WIDGETS

    staging = out / (ASSETS + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    (staging / WIDGETS_JS).write_text(renderer_js(), encoding="utf-8")
    (staging / Path(SITE_CSS).relative_to(ASSETS)).write_text(asset_text("widgets.css"), encoding="utf-8")
    # every widget's module, once per site: the built pages' figures name their widget (SITE_ESM_NAME)
    for name in sorted(set(WIDGETS.values())):
        script = staging / Path(site_esm_path(name)).relative_to(ASSETS)
        script.parent.mkdir(exist_ok=True)
        script.write_text(site_esm_script(name), encoding="utf-8")
    # the trained models' weights, once per site, for the "ask the model" figure of every page
    write_site_script(staging / Path(SITE_WEIGHTS).relative_to(ASSETS))
    # anywidget wrote the widget state the pages carry; widgets.js reads it
    manifest = {
        "versions": {"anywidget": anywidget.__version__},
        "files": sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file()),
    }
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    final = out / ASSETS
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    return manifest


def _fonts() -> bytes:
    """The CJK fonts the figures can fall back to (``fc-list``): installing one changes every
    Chinese label, so it must invalidate the cached outputs too."""
    if shutil.which("fc-list") is None:
        return b"no fontconfig"
    listed = subprocess.run(["fc-list", ":lang=zh-cn", "file"], capture_output=True, check=False).stdout
    return b"\n".join(sorted(listed.splitlines()))


def source_hash(root: Path = ROOT) -> str:
    """Hash of what executed chapters depend on beyond their own text: the package (its shipped
    checkpoints included), the figures' matplotlibrc and the fonts they can use."""
    digest = hashlib.sha256()
    files = [
        p
        for p in (root / "encdec").rglob("*")
        if p.suffix in {".py", ".js", ".css", ".json", ".pt"} and "__pycache__" not in p.parts
    ]
    if os.environ.get("ENCDEC_CHECKPOINTS"):  # as encdec.train.checkpoint_root
        files += list(Path(os.environ["ENCDEC_CHECKPOINTS"]).glob("*/model.pt"))
    files += [p for p in [root / "book" / "matplotlibrc"] if p.is_file()]
    for path in sorted(files):
        name = path.relative_to(root) if path.is_relative_to(root) else path
        digest.update(str(name).encode() + b"\0" + path.read_bytes() + b"\0")
    digest.update(_fonts())
    return digest.hexdigest()


def check_cache(build_dir: Path, root: Path = ROOT) -> bool:
    """Clear the execution cache and Sphinx environment of ``build_dir`` when the package, a
    checkpoint or the fonts changed since the last build; True if something was cleared."""
    stamp = build_dir / ".encdec_source_hash"
    current = source_hash(root)
    previous = stamp.read_text().strip() if stamp.is_file() else None
    cleared = False
    if previous != current:
        # Both: the execution cache (old outputs) and Sphinx's environment, which would
        # otherwise skip re-reading (so re-executing) chapters whose own text did not change.
        # And matplotlib's font list (MPLCONFIGDIR, mk/book.mk), which never sees a new font.
        for stale in (build_dir / ".jupyter_cache", build_dir / ".doctrees", build_dir / ".matplotlib"):
            if stale.exists():
                shutil.rmtree(stale)
                cleared = True
    build_dir.mkdir(parents=True, exist_ok=True)
    stamp.write_text(current + "\n")
    return cleared


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "widget_assets")
    parser.add_argument(
        "--check-cache",
        type=Path,
        metavar="BUILD_DIR",
        help="clear BUILD_DIR/.jupyter_cache if the package or a checkpoint changed",
    )
    args = parser.parse_args(argv)
    manifest = build_assets(args.out)
    print(f"widget assets in {args.out / ASSETS}: " + ", ".join(f"{k} {v}" for k, v in manifest["versions"].items()))
    if args.check_cache and check_cache(args.check_cache):
        print(f"package or checkpoints changed: cleared the execution cache and environment in {args.check_cache}")


if __name__ == "__main__":
    sys.exit(main())

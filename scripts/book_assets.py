"""Copy the front-end assets the static book needs into build/widget_assets/_widget_assets.

The book's widgets run in the browser through the Jupyter widgets HTML manager, which loads
modules with RequireJS; math is typeset by MathJax. By default myst-nb and Sphinx point pages at
CDNs; this script makes local copies so the built site works with no network and as file://:

- RequireJS and ``@jupyter-widgets/html-manager`` (with its fonts) and MathJax, from
  ``node_modules`` (``npm ci`` installs the versions pinned in package-lock.json);
- anywidget's AMD front end, from the installed anywidget wheel (so its version always matches
  the Python package that wrote the widget state);
- ``config.js``, which tells RequireJS where those modules are, relative to itself;
- ``encdec-weights.js``, the trained checkpoints' weights for the "ask the model" figure, once per
  site (``encdec.widgets.export_weights.write_site_script``): the book's pages carry none.

Sphinx publishes the folder at the site root through ``html_extra_path`` (``_config.yml``). The
assets stay out of any ``_static`` folder: Jupyter Book 1.x would inject every script there into
every page. ``--check-cache`` also clears the notebook execution cache when the package
(widgets included) or a checkpoint changed, since a cache hit would keep old widget JavaScript.

Usage: python scripts/book_assets.py [--out build/widget_assets] [--check-cache _build]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASSETS = "_widget_assets"  # the folder name pages refer to (see _config.yml)
HTML_MANAGER_SERIES = "1.0."  # html-manager 1.0.x renders ipywidgets 8 state

# AMD modules the HTML manager's bundle defines by name. Pointing them at the bundle's own path
# makes each module's ``module.uri`` (which webpack uses to find its fonts) the bundle folder.
BUNDLED_MODULES = (
    "@jupyter-widgets/base",
    "@jupyter-widgets/base7",
    "@jupyter-widgets/controls",
    "@jupyter-widgets/controls7",
    "@jupyter-widgets/html-manager",
    "@jupyter-widgets/html-manager/dist/libembed-amd",
)

CONFIG_JS = """\
// Written by scripts/book_assets.py: RequireJS module paths, relative to this file, so the
// widgets load from the book itself (served or opened as file://), never from a CDN.
(function () {
  var base = document.currentScript.src.replace(/[^/]*$/, "");
  var bundle = base + "html-manager/embed-amd";
  var paths = { anywidget: base + "anywidget/index" };
  %(bundled)s.forEach(function (name) { paths[name] = bundle; });
  window.require.config({ paths: paths });
})();
"""

SOURCE_MAP = re.compile(rb"^//# sourceMappingURL=.*$", re.MULTILINE)


def _package_version(folder: Path) -> str:
    return json.loads((folder / "package.json").read_text())["version"]


def _copy_js(src: Path, dst: Path) -> None:
    """Copy a script without its sourceMappingURL comment (the maps are not shipped)."""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(SOURCE_MAP.sub(b"", src.read_bytes()))


MATHJAX_ENTRY = "tex-mml-chtml.js"  # what Sphinx loads (mathjax_path in _config.yml)


def _mathjax_unused(folder: str, names: list[str]) -> list[str]:
    """Skip MathJax's other combined builds and its SVG output: pages load only MATHJAX_ENTRY,
    which fetches components (TeX extensions, accessibility, fonts) from the folders kept."""
    top = Path(folder).name == "es5"
    return [n for n in names if n.endswith(".map") or n.startswith("node-main")
            or (top and n.endswith(".js") and n != MATHJAX_ENTRY)
            or (Path(folder).name == "output" and n.startswith("svg"))]


def build_assets(out: Path, node_modules: Path = ROOT / "node_modules") -> dict:
    """Write every asset under ``out / ASSETS``; return the manifest (versions, files)."""
    import anywidget

    manager = node_modules / "@jupyter-widgets" / "html-manager"
    requirejs = node_modules / "requirejs"
    mathjax = node_modules / "mathjax"
    for folder in (manager, requirejs, mathjax):
        if not (folder / "package.json").is_file():
            raise SystemExit(f"{folder} is missing: run `npm ci` in the repository root first")
    versions = {
        "@jupyter-widgets/html-manager": _package_version(manager),
        "requirejs": _package_version(requirejs),
        "mathjax": _package_version(mathjax),
        "anywidget": anywidget.__version__,
    }
    if not versions["@jupyter-widgets/html-manager"].startswith(HTML_MANAGER_SERIES):
        raise SystemExit(
            f"@jupyter-widgets/html-manager {versions['@jupyter-widgets/html-manager']} found; "
            f"expected {HTML_MANAGER_SERIES}x (ipywidgets 8): check package-lock.json and run `npm ci`"
        )
    anywidget_amd = Path(anywidget.__file__).parent / "nbextension" / "index.js"
    if not anywidget_amd.is_file():
        raise SystemExit(f"anywidget's AMD front end is missing from the installed wheel: {anywidget_amd}")

    staging = out / (ASSETS + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    _copy_js(requirejs / "require.js", staging / "require.js")
    dist = manager / "dist"
    _copy_js(dist / "embed-amd.js", staging / "html-manager" / "embed-amd.js")
    for font in dist.iterdir():  # the bundle's fonts sit next to it, named by content hash
        if font.suffix in {".woff", ".woff2", ".ttf", ".eot", ".svg"}:
            shutil.copy2(font, staging / "html-manager" / font.name)
    _copy_js(anywidget_amd, staging / "anywidget" / "index.js")
    shutil.copytree(mathjax / "es5", staging / "mathjax", ignore=_mathjax_unused)
    (staging / "config.js").write_text(CONFIG_JS % {"bundled": json.dumps(list(BUNDLED_MODULES))})
    # the trained models' weights, once per site, for the "ask the model" figure of every page
    from encdec.widgets.export_weights import SITE_WEIGHTS, write_site_script

    write_site_script(staging / Path(SITE_WEIGHTS).relative_to(ASSETS))
    manifest = {"versions": versions, "files": sorted(str(p.relative_to(staging)) for p in staging.rglob("*") if p.is_file() and "mathjax" not in p.parts)}
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
    files = [p for p in (root / "encdec").rglob("*")
             if p.suffix in {".py", ".js", ".css", ".json", ".pt"} and "__pycache__" not in p.parts]
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
    parser.add_argument("--check-cache", type=Path, metavar="BUILD_DIR",
                        help="clear BUILD_DIR/.jupyter_cache if the package or a checkpoint changed")
    args = parser.parse_args(argv)
    manifest = build_assets(args.out)
    print(f"widget assets in {args.out / ASSETS}: " + ", ".join(f"{k} {v}" for k, v in manifest["versions"].items()))
    if args.check_cache and check_cache(args.check_cache):
        print(f"package or checkpoints changed: cleared the execution cache and environment in {args.check_cache}")


if __name__ == "__main__":
    sys.exit(main())

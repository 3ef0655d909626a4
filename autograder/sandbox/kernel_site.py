"""What of the installed packages a graded kernel can import: the distributions a kernel needs
(``ROOTS``: ipykernel to be a kernel, numpy and torch for the exercises) and every distribution
they require, nothing else. The sandbox mounts an empty folder over each site-packages folder and
binds back, read-only, the files of those distributions alone (``Policy.mounts``). So a model
library the course installs for other reasons (``transformers``, say) is not there in a graded run,
whatever name or alias a notebook uses for it: a fact of the mounts, not a list of names."""
from __future__ import annotations

import functools
import importlib.metadata as md
import re
import site
import sysconfig
from pathlib import Path

from packaging.requirements import Requirement

ROOTS = ("ipykernel", "numpy", "torch")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def distributions(roots: tuple[str, ...] = ROOTS) -> list[md.Distribution]:
    """``roots`` and everything they require (no extras), each once; a root that is not installed
    is an error, a requirement that is not installed is skipped (an optional platform one)."""
    found: dict[str, md.Distribution] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if _key(name) in found:
            continue
        try:
            dist = md.distribution(name)
        except md.PackageNotFoundError:
            if name in roots:
                raise RuntimeError(f"a graded kernel needs {name}, which is not installed") from None
            continue
        found[_key(name)] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [found[k] for k in sorted(found)]


def site_folders() -> list[Path]:
    """The folders installed distributions live in (site-packages, dist-packages)."""
    folders = {Path(sysconfig.get_path(k)) for k in ("purelib", "platlib")} | {Path(p) for p in site.getsitepackages()}
    return sorted(p.resolve() for p in folders if p.is_dir())


def entries(roots: tuple[str, ...] = ROOTS) -> list[Path]:
    """The top-level files and folders of site-packages that belong to the kernel's distributions:
    their packages and modules (from each one's RECORD) and their metadata folders."""
    sites = site_folders()
    out: set[Path] = set()
    for dist in distributions(roots):
        files = dist.files
        if files is None:
            raise RuntimeError(f"{dist.metadata['Name']} has no RECORD: its files cannot be listed for the sandbox")
        for f in files:
            path = Path(dist.locate_file(f)).resolve()
            for folder in sites:
                if folder in path.parents:
                    out.add(folder / path.relative_to(folder).parts[0])
    return sorted(p for p in out if p.exists())


@functools.lru_cache(maxsize=1)
def sites() -> dict[Path, list[Path]]:
    """Each folder of installed packages -> the entries of it a graded kernel sees."""
    kept = entries()
    return {folder: [p for p in kept if p.parent == folder] for folder in site_folders()}


def _check() -> None:
    """Executable check: the roots are in, the requirement closure is, and nothing else."""
    names = {_key(d.metadata["Name"]) for d in distributions()}
    assert set(map(_key, ROOTS)) <= names and "jupyter-client" in names
    assert all(any(p.parent == s for s in site_folders()) for p in entries())


if __name__ == "__main__":
    _check()
    print(f"{len(distributions())} distributions, {len(entries())} entries of site-packages a kernel sees")

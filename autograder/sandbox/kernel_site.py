"""What of the installed packages a graded kernel can import: the standard library and the
distributions a kernel needs (``ROOTS``: ipykernel to be a kernel, numpy and torch for the
exercises) with every distribution they require, nothing else, whatever the base interpreter or
Debian has installed beside them.

Every folder of installed packages the kernel's file system shows is found from the interpreters
themselves (`package_folders`): the virtual environment's, the base interpreter's and every other
Python of the system (Debian's ``/usr/bin/python3``), each asked (``python -S``, so no installed
code runs) for its ``sys.path`` beyond its standard library, its site folders and its user site;
the usual ``lib*/python*/{site,dist}-packages`` of ``/usr``, ``/usr/local`` and both prefixes;
every folder a ``.pth`` file in those names; and Debian's ``/usr/share/python-wheels``. The
sandbox mounts an empty folder over each of them and binds back, read-only, the files of the
kernel's distributions alone (``Policy.mounts``). So a library the course or the machine installs
for other reasons (``transformers``, ``scipy``, Debian's ``yaml``) is not there in a graded run,
whatever name, alias, ``sys.path`` entry, loader or interpreter a notebook uses for it: a fact of
the mounts, not a list of names."""
from __future__ import annotations

import functools
import importlib.metadata as md
import json
import os
import re
import subprocess
import sys
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


# Asked of each interpreter with -S (no site module: nothing installed runs): the folders its
# imports may come from beyond its standard library, and that library's own folders.
_ASK = ("import json, site, sys, sysconfig\n"
        "std = [sysconfig.get_path(k) for k in ('stdlib', 'platstdlib')] + [sysconfig.get_config_var('DESTSHARED')]\n"
        "more = list(getattr(site, 'getsitepackages', lambda: [])()) + [site.getusersitepackages()]\n"
        "print(json.dumps({'path': [p for p in sys.path + more if p], 'std': [p for p in std if p]}))")
_PYTHON = re.compile(r"^python[0-9.]*$")
_GLOBS = ("lib*/python*/site-packages", "lib*/python*/dist-packages")


def interpreters() -> list[str]:
    """The Pythons a kernel could run: its own, the base one and those of the system's bin folders."""
    base = getattr(sys, "_base_executable", sys.executable)
    bins = {Path(sys.prefix) / "bin", Path(sys.base_prefix) / "bin", Path("/usr/bin"), Path("/usr/local/bin"),
            Path("/bin")}
    found = [sys.executable, base] + sorted(str(f) for b in bins if b.is_dir() for f in b.iterdir()
                                            if _PYTHON.match(f.name) and os.access(f, os.X_OK))
    seen, out = set(), []
    for exe in found:  # one of each: a file, with the virtual environment (pyvenv.cfg) it starts in
        here = Path(exe).parent
        cfg = [str(c.resolve()) for c in (here / "pyvenv.cfg", here.parent / "pyvenv.cfg") if c.is_file()][:1]
        key = (os.path.realpath(exe), *cfg)
        if key not in seen and os.path.isfile(key[0]):
            seen.add(key)
            out.append(exe)
    return out


def _ask(exe: str) -> dict[str, list[str]]:
    try:
        run = subprocess.run([exe, "-S", "-c", _ASK], capture_output=True, text=True, timeout=30, cwd="/")
        return json.loads(run.stdout) if run.returncode == 0 else {"path": [], "std": []}
    except (OSError, ValueError, subprocess.SubprocessError):  # not a Python 3 we can ask: nothing to add
        return {"path": [], "std": []}


def _pth_paths(folder: Path) -> list[Path]:
    """The folders the ``.pth`` files of ``folder`` add to ``sys.path`` (as `site.addpackage` reads them)."""
    out = []
    for pth in sorted(folder.glob("*.pth")):
        try:
            lines = pth.read_text(errors="replace").splitlines()
        except OSError:
            continue
        out += [folder / line.rstrip() for line in lines
                if line.strip() and not line.startswith(("#", "import ", "import\t"))]
    return out


def _inside(path: Path, tree: Path) -> bool:
    return path == tree or tree in path.parents


@functools.lru_cache(maxsize=4)
def package_folders(trees: tuple[Path, ...]) -> list[Path]:
    """Every folder of installed packages that the sandbox shows (it binds ``trees``): a folder
    that is in one of ``trees``, holds no standard library and neither prefix (the interpreter and
    its environment), and is in no other such folder."""
    asked = [_ask(exe) for exe in interpreters()]
    std = {Path(p).resolve() for a in asked for p in a["std"]}
    found = {Path(p) for a in asked for p in a["path"]}
    for root in {Path(sys.prefix), Path(sys.base_prefix), Path(sys.base_exec_prefix), Path("/usr"), Path("/usr/local")}:
        for pattern in _GLOBS:
            found |= set(root.glob(pattern))
    found.add(Path("/usr/share/python-wheels"))  # Debian's wheels of pip, setuptools, ... (python3-pip-whl)
    found |= {p for f in list(found) if f.is_dir() for p in _pth_paths(f)}
    protected = std | {Path(p).resolve() for p in (sys.prefix, sys.base_prefix)}
    roots = [t.resolve() for t in trees]
    folders = {f.resolve() for f in found if f.is_dir()}
    folders = {f for f in folders if any(_inside(f, t) for t in roots) and not any(_inside(p, f) for p in protected)}
    return sorted(f for f in folders if not any(g != f and g in f.parents for g in folders))


def entries(sites: list[Path], roots: tuple[str, ...] = ROOTS) -> list[Path]:
    """What of the folders ``sites`` belongs to the kernel's distributions: their top-level packages,
    modules and metadata folders (from each one's RECORD); in a top-level folder that is no regular
    package (``__pycache__``, a namespace package: other distributions may have files there too),
    their own entries of it alone."""
    out: set[Path] = set()
    for dist in distributions(roots):
        files = dist.files
        if files is None:
            raise RuntimeError(f"{dist.metadata['Name']} has no RECORD: its files cannot be listed for the sandbox")
        # a RECORD names files relative to its site folder: only its first parts and the few files
        # outside it (`../../../bin/...`) need resolving
        base = Path(dist.locate_file("")).resolve()
        paths = {base.joinpath(*f.parts[:2]) for f in files if f.parts and f.parts[0] != ".."}
        paths |= {Path(dist.locate_file(f)).resolve() for f in files if f.parts[:1] == ("..",)}
        for path in paths:
            for folder in sites:
                if folder in path.parents:
                    out.add(_entry(folder, path.relative_to(folder).parts))
    return sorted(p for p in out if p.exists())


def _entry(folder: Path, parts: tuple[str, ...]) -> Path:
    """What to bind back for a file ``folder/parts...`` of an allowed distribution."""
    top = folder / parts[0]
    shared = len(parts) > 1 and not top.name.endswith((".dist-info", ".egg-info")) and top.is_dir() \
        and not (top / "__init__.py").exists()
    return top / parts[1] if shared else top


@functools.lru_cache(maxsize=4)
def sites(trees: tuple[Path, ...], keep: tuple[Path, ...] = ()) -> dict[Path, list[Path]]:
    """Each folder of installed packages the sandbox shows (`package_folders`) -> the entries of it a
    graded kernel sees: the allowed distributions' and, of ``keep`` (what else the sandbox binds: the
    course's package installed there, say), what lies in it."""
    folders = package_folders(tuple(trees))
    kept = set(entries(folders)) | {Path(k) for k in keep if any(f in Path(k).parents for f in folders)}
    return {folder: sorted(p for p in kept if folder in p.parents) for folder in folders}


def _check() -> None:
    """Executable check: the roots are in, the requirement closure is, and nothing else."""
    names = {_key(d.metadata["Name"]) for d in distributions()}
    assert set(map(_key, ROOTS)) <= names and "jupyter-client" in names
    folders = package_folders((Path("/usr"), Path(sys.prefix), Path(sys.base_prefix)))
    assert Path(sysconfig.get_path("purelib")).resolve() in folders
    assert all(any(s in p.parents for s in folders) for p in entries(folders))


if __name__ == "__main__":
    _check()
    folders = package_folders((Path("/usr"), Path(sys.prefix), Path(sys.base_prefix)))
    print(f"{len(distributions())} distributions, {len(entries(folders))} entries a kernel sees of "
          f"{len(folders)} folders of packages:", *folders, sep="\n")

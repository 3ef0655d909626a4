"""What of the machine a graded kernel sees, by construction: its interpreter, that interpreter's
standard library, the files of the distributions a kernel needs (``ROOTS``: ipykernel to be a
kernel, numpy and torch for the exercises, with every distribution they require), the shared
libraries all of these link against, and a few files of ``/etc`` (`Policy.etc`). Nothing else of
``/usr``, ``/etc`` or the interpreter's installation is mounted: whatever the base interpreter,
Debian or ``/usr`` hold (``transformers``, the base Python's ``scipy``, Debian's ``yaml``, a
program's own Python tree under ``/usr/lib`` or ``/usr/share``), it is absent from a graded run,
by any name, path, loader or interpreter. The view is the list `Policy.mounts` turns into mounts:

- `stdlib`: the standard library's folders, bound whole; every folder of installed packages in them
  (a base interpreter's ``site-packages``) and every one that holds an allowed distribution is
  emptied, and only those distributions' files bound back (`sites`);
- `files`: the interpreter as the kernel starts it (``sys.executable``, its links), a virtual
  environment's ``pyvenv.cfg``, the sandbox's own tools, and the ELF ``DT_NEEDED`` closure of the
  interpreter, the standard library's extension modules, the allowed distributions' compiled files
  and the tools (`libraries`: read from the files themselves, resolved as the loader does, no
  program run)."""

from __future__ import annotations

import functools
import importlib.metadata as md
import os
import re
import shutil
import site
import struct
import subprocess
import sys
import sysconfig
from pathlib import Path

from packaging.requirements import Requirement

ROOTS = ("ipykernel", "numpy", "torch")


def _key(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.lru_cache(maxsize=2)
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


def _outermost(paths) -> list[Path]:
    paths = {Path(p).resolve() for p in paths if p and os.path.isdir(p)}
    return sorted(p for p in paths if not any(q != p and q in p.parents for q in paths))


def stdlib() -> list[Path]:
    """The folders of this interpreter's standard library (of its base installation, not a virtual
    environment's): its pure and platform-specific modules and its extension modules."""
    base = {
        "base": sys.base_prefix,
        "platbase": sys.base_exec_prefix,
        "installed_base": sys.base_prefix,
        "installed_platbase": sys.base_exec_prefix,
    }
    return _outermost(
        [
            sysconfig.get_path("stdlib", vars=base),
            sysconfig.get_path("platstdlib", vars=base),
            sysconfig.get_config_var("DESTSHARED"),
        ]
    )


def package_folders() -> list[Path]:
    """This interpreter's folders of installed packages (of each of its prefixes) and every folder
    that holds an allowed distribution."""
    prefixes = [sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix]
    found = site.getsitepackages(prefixes) + [sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]
    found += [str(d.locate_file("")) for d in distributions()]
    return sorted({Path(p).resolve() for p in found if os.path.isdir(p)})


@functools.lru_cache(maxsize=2)
def records(roots: tuple[str, ...] = ROOTS) -> list[tuple[Path, list[str]]]:
    """(site folder, the paths its RECORD lists) of each distribution a kernel needs: read as text
    once (a PackagePath per line of torch's RECORD costs a second)."""
    out = []
    for dist in distributions(roots):
        text = dist.read_text("RECORD")
        if text is None:
            raise RuntimeError(f"{dist.metadata['Name']} has no RECORD: its files cannot be listed for the sandbox")
        # path,hash,size (csv: a path with a comma is quoted; hash and size hold none)
        paths = [line.rsplit(",", 2)[0] for line in text.splitlines() if line.count(",") >= 2]
        out.append(
            (Path(dist.locate_file("")).resolve(), [p[1:-1].replace('""', '"') if p[:1] == '"' else p for p in paths])
        )
    return out


def entries(sites: list[Path], roots: tuple[str, ...] = ROOTS) -> list[Path]:
    """What of the folders ``sites`` belongs to the kernel's distributions: their top-level packages,
    modules and metadata folders (from each one's RECORD); in a top-level folder that is no regular
    package (``__pycache__``, a namespace package: other distributions may have files there too),
    their own entries of it alone."""
    out: set[Path] = set()
    for base, files in records(roots):
        # a RECORD names files relative to its site folder: only its first parts and the few files
        # outside it (`../../../bin/...`) need resolving
        paths = {base / top for top in {"/".join(f.split("/")[:2]) for f in files if not f.startswith("../")}}
        paths |= {(base / f).resolve() for f in files if f.startswith("../")}
        for path in paths:
            for folder in sites:
                if folder in path.parents:
                    out.add(_entry(folder, path.relative_to(folder).parts))
    return sorted(p for p in out if p.exists())


def _entry(folder: Path, parts: tuple[str, ...]) -> Path:
    """What to bind back for a file ``folder/parts...`` of an allowed distribution."""
    top = folder / parts[0]
    shared = (
        len(parts) > 1
        and not top.name.endswith((".dist-info", ".egg-info"))
        and top.is_dir()
        and not (top / "__init__.py").exists()
    )
    return top / parts[1] if shared else top


@functools.lru_cache(maxsize=4)
def sites(trees: tuple[Path, ...], keep: tuple[Path, ...] = ()) -> dict[Path, list[Path]]:
    """Each folder of installed packages in the kernel's view (inside ``trees``, the folders the
    sandbox binds whole, or holding an allowed distribution) -> the entries of it a graded kernel
    sees: the allowed distributions' and, of ``keep`` (what else the sandbox binds: the course's
    package installed there, say), what lies in it. The sandbox empties each and binds those back."""
    roots = [Path(t).resolve() for t in trees]
    folders = package_folders()
    kept = set(entries(folders)) | {Path(k) for k in keep if any(f in Path(k).parents for f in folders)}
    out = {f: sorted(p for p in kept if f in p.parents) for f in folders}
    shown = {f for f, k in out.items() if k or any(t == f or t in f.parents for t in roots)}
    return {f: out[f] for f in sorted(shown) if not any(g != f and g in f.parents for g in shown)}


# --- the shared libraries: the DT_NEEDED closure, resolved as the loader does (64-bit ELF)


@functools.cache
def _elf(path: str) -> tuple[int, str | None, list[str], list[str]] | None:
    """(machine, program interpreter, DT_NEEDED names, run paths) of a 64-bit little-endian ELF
    file, read from its program headers; None for anything else."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[4:6] != b"\x02\x01":
                return None
            (machine,) = struct.unpack_from("<H", head, 18)
            (phoff,) = struct.unpack_from("<Q", head, 32)
            size, count = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(size * count)
            # p_type, p_flags, p_offset, p_vaddr, p_paddr, p_filesz, p_memsz, p_align
            segments = [struct.unpack_from("<IIQQQQQQ", table, i * size) for i in range(count)]

            def read(offset: int, n: int) -> bytes:
                f.seek(offset)
                return f.read(n)

            interp, tags = None, []
            for kind, _, offset, _, _, filesz, _, _ in segments:
                if kind == 3:  # PT_INTERP
                    interp = read(offset, filesz).split(b"\0")[0].decode()
                elif kind == 2:  # PT_DYNAMIC
                    dyn = read(offset, filesz)
                    for i in range(0, len(dyn) - 15, 16):
                        tag, value = struct.unpack_from("<qQ", dyn, i)
                        if tag == 0:
                            break
                        tags.append((tag, value))
            strtab = [v for t, v in tags if t == 5]  # DT_STRTAB, an address: to a file offset by PT_LOAD
            base = [
                off + strtab[0] - va
                for kind, _, off, va, _, sz, _, _ in segments
                if strtab and kind == 1 and va <= strtab[0] < va + sz
            ]
            if not base:
                return machine, interp, [], []

            def text(v: int) -> str:
                return read(base[0] + v, 4096).split(b"\0")[0].decode(errors="replace")

            runpath = [d for t, v in tags if t in (15, 29) for d in text(v).split(":") if d]  # DT_RPATH, DT_RUNPATH
            return machine, interp, [text(v) for t, v in tags if t == 1], runpath  # DT_NEEDED
    except (OSError, struct.error, ValueError):
        return None


@functools.lru_cache(maxsize=1)
def _loader_cache() -> dict[str, list[str]]:
    """soname -> paths, from the loader's cache (``ldconfig -p``), then the multiarch default folders."""
    out: dict[str, list[str]] = {}
    ldconfig = shutil.which("ldconfig") or shutil.which("ldconfig", path="/sbin:/usr/sbin")
    if ldconfig:
        try:
            listed = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            listed = ""
        for name, path in re.findall(r"^\s+(\S+) \(.*\) => (\S+)$", listed, flags=re.M):
            out.setdefault(name, []).append(path)
    arch = sysconfig.get_config_var("MULTIARCH") or ""
    for folder in (f"/lib/{arch}", f"/usr/lib/{arch}", "/lib64", "/usr/lib64", "/lib", "/usr/lib"):
        if os.path.isdir(folder):
            for name in os.listdir(folder):
                out.setdefault(name, []).append(os.path.join(folder, name))
    return out


def libraries(objects: list[str]) -> list[str]:
    """The shared libraries ``objects`` need, transitively (each object's run paths first, with
    ``$ORIGIN``, then the loader's cache and default folders), with the program interpreter."""
    machine = (_elf(os.path.realpath(sys.executable)) or (0,))[0]
    seen, todo, out = set(), list(objects), set()
    while todo:
        path = todo.pop()
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        info = _elf(real)
        if info is None:
            continue
        _, interp, needed, runpath = info
        here = os.path.dirname(real)
        folders = [re.sub(r"\$(ORIGIN|\{ORIGIN\})", here, d) for d in runpath]
        for name in needed:
            candidates = (
                [name] if "/" in name else [os.path.join(d, name) for d in folders] + _loader_cache().get(name, [])
            )
            hit = next((c for c in candidates if os.path.isfile(c) and (_elf(c) or (None,))[0] == machine), None)
            if hit:
                out.add(hit)
                todo.append(hit)
        if interp:
            out.add(interp)
    return sorted(out)


def _compiled() -> list[str]:
    """The ELF files (extension modules, bundled libraries, programs) of the allowed distributions."""
    named = [
        str(base / f)
        for base, files in records(ROOTS)
        for f in files
        if f.endswith(".so") or ".so." in f or "/bin/" in f
    ]
    return [path for path in named if _elf(path)]


@functools.lru_cache(maxsize=4)
def files(tools: tuple[str, ...] = ()) -> list[str]:
    """What the sandbox binds file by file (each with the links on its way, `Policy.mounts`): the
    interpreter as the kernel starts it, a virtual environment's pyvenv.cfg, ``tools`` and every
    shared library these, the standard library and the allowed distributions need."""
    exe = sys.executable
    cfg = [str(c) for c in (Path(exe).parent / "pyvenv.cfg", Path(exe).parent.parent / "pyvenv.cfg") if c.is_file()]
    dynload = sysconfig.get_config_var("DESTSHARED") or ""
    modules = [os.path.join(dynload, n) for n in sorted(os.listdir(dynload))] if os.path.isdir(dynload) else []
    libs = libraries([exe, *tools, *modules, *_compiled()])
    # the libraries a bound folder holds already (a wheel's bundled ones) need no mount of their own
    inside = [*stdlib(), *package_folders()]
    libs = [p for p in libs if not any(f in Path(os.path.realpath(p)).parents for f in inside)]
    return [exe, *cfg[:1], *tools, *libs]


if __name__ == "__main__":
    shown = sites(tuple(stdlib()))
    print(
        f"{len(distributions())} distributions; standard library:",
        *stdlib(),
        "folders of packages:",
        *(f"{f} ({len(k)} entries)" for f, k in shown.items()),
        "files:",
        *files(),
        sep="\n",
    )

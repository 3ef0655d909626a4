"""A graded kernel can import only what the exercises need (issue: honest scores by construction):
Python's standard library, numpy, torch (its ready-made layers removed: test_edition.py) and the
grading edition of the course package, with ipykernel to be a kernel. Invariant: a graded kernel sees,
of the machine's Python code, only the standard library of the interpreter it runs and the files of
those distributions; whatever the virtual environment, the base interpreter, Debian or /usr hold
(another library, a program's own Python tree under /usr/lib or /usr/share), no other module is
importable or even readable, by construction of its mounts (autograder/sandbox/kernel_site.py),
whatever name, alias, path, loader or interpreter a notebook uses for it."""

from __future__ import annotations

import glob
import importlib.metadata as md
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from autograder.sandbox import kernel_site
from autograder.sandbox.policy import Policy
from autograder.sandbox.sandbox import readonly_paths

# One cell, one round trip: every way a student who has read the source reaches for a library
# the machine has. ARGS (from the grader's side) names what to reach: the top-level names of the
# machine's packages, their folders, a module file, a compiled extension and a wheel or egg of each
# folder, and the machine's other Pythons.
PROBE = r"""
import ctypes, importlib, importlib.util, json, os, runpy, site, subprocess, sys, sysconfig, zipimport
A = json.loads(ARGS)
out = {"imports": {}, "loaders": {}}
def found(names):
    importlib.invalidate_caches()
    hits = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is not None:
                hits.append(name)
        except Exception:  # something answered: count it as there
            hits.append(name)
    return hits
def attempt(what, call):
    try:
        call()
        out["loaders"][what] = "ok"
    except BaseException as e:
        out["loaders"][what] = type(e).__name__
for name in ("torch", "numpy", "ipykernel", "encdec.model", "transformers", "tokenizers", "safetensors", "yaml",
             "scipy"):
    try:
        importlib.import_module(name)
        out["imports"][name] = "ok"
    except Exception as e:
        out["imports"][name] = type(e).__name__
out["found"] = found(A["names"])
out["listing"] = {f: sorted(os.listdir(f)) if os.path.isdir(f) else None for f in A["folders"]}
sys.path += A["folders"]  # the machine's folders named outright
out["found_appended"] = found(A["names"])
for folder in A["folders"]:  # and as site folders (their .pth files followed)
    site.addsitedir(folder)
out["found_sitedir"] = found(A["names"])
out["exists"] = [p for p in A["files"] + A["libs"] + A["archives"] + A["pycs"] if os.path.lexists(p)]
for f in A["files"]:  # loaders pointed at a file where the library is on the machine
    spec = importlib.util.spec_from_file_location("by_path", f)
    attempt("spec " + f, lambda: spec.loader.exec_module(importlib.util.module_from_spec(spec)))
    attempt("SourceFileLoader " + f, lambda: importlib.machinery.SourceFileLoader("by_loader", f).load_module())
    attempt("runpy " + f, lambda: runpy.run_path(f))
for f in A["pycs"]:  # the bytecode another module left in a shared __pycache__
    attempt("SourcelessFileLoader " + f, lambda: importlib.machinery.SourcelessFileLoader("by_pyc", f).load_module())
for f in A["libs"]:  # a compiled extension loaded as a shared library
    attempt("ctypes " + f, lambda: ctypes.CDLL(f))
    spec = importlib.util.spec_from_file_location(os.path.basename(f).split(".")[0], f)
    attempt("extension " + f, lambda: importlib.util.module_from_spec(spec))
for f in A["archives"]:  # a wheel or egg imported from its zip
    attempt("zipimport " + f, lambda: zipimport.zipimporter(f))
ask = ("import importlib.util, json, site, sys\nA = json.loads(sys.argv[1])\nsys.path += A['folders']\n"
       "for f in A['folders']: site.addsitedir(f)\n"
       "print(json.dumps({'path': sys.path, 'found': [n for n in A['names'] if importlib.util.find_spec(n)]}))")
out["pythons"] = {}
for exe in A["pythons"]:  # the machine's other interpreters, run from the kernel
    if not os.path.exists(exe):
        out["pythons"][exe] = "absent"
        continue
    run = subprocess.run([exe, "-c", ask, json.dumps(A)], capture_output=True, text=True, timeout=60)
    out["pythons"][exe] = json.loads(run.stdout) if run.returncode == 0 else run.stderr[-500:]
std = [sysconfig.get_path(k) for k in ("stdlib", "platstdlib")]
out["customize"] = {n: getattr(importlib.util.find_spec(n), "origin", None) for n in ("sitecustomize", "usercustomize")}
out["std"] = std
print("PROBE" + json.dumps(out))
"""


def machine_folders() -> list[Path]:
    """The machine's folders of installed packages, found from the grader's side without
    kernel_site: the virtual environment's, the base interpreter's and Debian's Python's (each asked
    with its site module, .pth files and all), and the usual site and dist folders of the system."""
    found = {sysconfig.get_path("purelib"), sysconfig.get_path("platlib"), "/usr/share/python-wheels"}
    ask = "import json, site, sys; print(json.dumps(site.getsitepackages() + sys.path))"
    for exe in {getattr(sys, "_base_executable", sys.executable), "/usr/bin/python3"}:
        if os.path.exists(exe):
            run = subprocess.run([exe, "-c", ask], capture_output=True, text=True, cwd="/")
            found |= {p for p in json.loads(run.stdout) if p.endswith(("site-packages", "dist-packages"))}
    for pattern in (
        "/usr/lib/python3*/*-packages",
        "/usr/local/lib/python3*/*-packages",
        "/usr/lib/python3/dist-packages",
    ):
        found |= set(glob.glob(pattern))
    return sorted({Path(p).resolve() for p in found if os.path.isdir(p)})


def module_name(entry: Path) -> str | None:
    """The top-level module an entry of a site folder holds, if any."""
    name = entry.name
    if entry.is_dir():
        return name if name.isidentifier() and name != "__pycache__" else None
    if name.endswith(".py"):
        return name[:-3]
    if name.endswith((".so", ".pyd")):
        return name.split(".")[0]
    return None


def attack_args(folders: list[Path]) -> tuple[dict, set[str]]:
    """What the probe reaches for (see PROBE), and the names the kernel may find (stdlib, allowed)."""
    allowed = {p.name.split(".")[0] for p in kernel_site.entries(folders)} | {"encdec"}
    allowed |= set(sys.stdlib_module_names)
    names, files, libs, archives, pycs, outside_venv = set(), [], [], [], [], set()
    venv = Path(sysconfig.get_path("purelib")).resolve()
    for folder in folders:
        entries = sorted(folder.iterdir())
        archives += [str(e) for e in entries if e.suffix in (".whl", ".egg")][:2]
        mine = [(e, n) for e in entries if (n := module_name(e)) and n not in allowed]
        names |= {n for _, n in mine}
        if folder != venv:
            outside_venv |= {n for _, n in mine}
        py = [e / "__init__.py" if e.is_dir() else e for e, _ in mine]
        files += [str(p) for p in py if p.is_file() and p.suffix == ".py"][:1]
        so = [p for e, _ in mine for p in ([e] if e.is_file() else sorted(e.glob("*.so"))) if p.suffix == ".so"]
        libs += [str(p) for p in so[:1]]
        pycs += [str(p) for p in sorted(folder.glob("__pycache__/*.pyc")) if p.name.split(".")[0] not in allowed][:2]
    pythons = sorted(
        {
            p
            for p in glob.glob("/usr/bin/python3*")
            + glob.glob("/usr/local/bin/python3*")
            + [getattr(sys, "_base_executable", sys.executable)]
            if not p.endswith("-config")
        }
    )
    files += usr_code()
    args = {
        "names": sorted(names),
        "folders": [str(f) for f in folders],
        "files": files,
        "libs": libs,
        "archives": archives,
        "pycs": pycs,
        "pythons": pythons,
    }
    return args, outside_venv


def usr_code(n: int = 200) -> list[str]:
    """Up to ``n`` of the Python files under /usr outside the kernel's standard library, spread evenly
    over all of them in name order (Debian's Python's own library, programs' vendored trees)."""
    std = [str(p) + "/" for p in kernel_site.stdlib()]
    found = []
    for folder, dirs, names in os.walk("/usr"):
        dirs.sort()
        found += [
            f
            for f in (os.path.join(folder, name) for name in sorted(names) if name.endswith(".py"))
            if not f.startswith(tuple(std))
        ]
    return found[:: max(1, len(found) // n)][:n]


def test_the_kernel_sees_the_closure_of_what_it_needs_and_nothing_else():
    names = {kernel_site._key(d.metadata["Name"]) for d in kernel_site.distributions()}
    for root in kernel_site.ROOTS:
        assert kernel_site._key(root) in names
        for line in md.distribution(root).requires or []:  # a root's unconditional requirements are in
            req = Requirement(line)
            if req.marker is None:
                assert kernel_site._key(req.name) in names, (root, req.name)
    installed = {kernel_site._key(d.metadata["Name"]) for d in md.distributions()}
    assert "transformers" in installed and "transformers" not in names  # the course installs it; kernels never see it


def test_every_folder_of_packages_the_sandbox_shows_is_emptied_then_only_its_entries_bound_back():
    readonly = readonly_paths()
    sites = kernel_site.sites(tuple(readonly), tuple(readonly))
    # every folder of packages of the machine in a tree the kernel sees whole is covered, and the environment's
    visible = [f for f in machine_folders() if any(f == t or t in f.parents for t in readonly)]
    assert Path(sysconfig.get_path("purelib")).resolve() in sites and set(visible) <= set(sites), visible
    rows = Policy().mounts(readonly, [], sites)
    # a folder several distributions share (__pycache__) is not bound whole: only the allowed files of it
    assert all(p.parent.name != "__pycache__" or p.suffix == ".pyc" for kept in sites.values() for p in kept)
    assert not any(p.name == "__pycache__" for kept in sites.values() for p in kept)
    for folder, kept in sites.items():
        i = rows.index(("empty", str(folder)))
        made = [("dir", str(p)) for p in dict.fromkeys(p.parent for p in kept if p.parent != folder)]
        assert rows[i + 1 : i + 1 + len(made) + len(kept)] == made + [("ro-bind", str(p), str(p)) for p in kept]
    assert not any(p.name.startswith("transformers") for kept in sites.values() for p in kept)
    # none hides the interpreter (its standard library, its prefixes); what else the sandbox binds
    # in one (the course's package, were it installed there) is bound back
    interpreter = [
        Path(p).resolve()
        for p in (sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib"), sys.prefix, sys.base_prefix)
    ]
    for folder, kept in sites.items():
        assert not any(folder == p or folder in p.parents for p in interpreter), folder
        assert all(p in kept for p in readonly if folder in p.parents), folder


def test_what_the_sandbox_binds_in_a_folder_of_packages_is_bound_back():
    """The course's package installed into the environment (not editable) stays visible, as its
    grading edition is bound over it."""
    readonly = readonly_paths()
    venv = Path(sysconfig.get_path("purelib")).resolve()
    package = venv / "encdec"  # where a plain `pip install .` puts it
    sites = kernel_site.sites(tuple(readonly), (*readonly, package))
    assert package in sites[venv] and package not in kernel_site.sites(tuple(readonly), tuple(readonly))[venv]


def test_the_view_binds_folders_only_of_the_standard_library_the_package_and_allowed_entries():
    """Of the system, file by file: the interpreter, the shared libraries (the loader's own among them)
    and a few files of /etc; no folder of /usr or /etc is bound, and nothing that is not an ELF file,
    a link on the way to one, or the interpreter's configuration."""
    readonly = readonly_paths()
    sites = kernel_site.sites(tuple(readonly), tuple(readonly))
    files = kernel_site.files(("/usr/bin/setpriv",))
    rows = Policy().mounts(readonly, [], sites, files)
    entries = {str(p) for kept in sites.values() for p in kept}
    binds = [r[1] for r in rows if r[0] == "ro-bind" and r[1] not in entries and Path(r[1]) not in readonly]
    assert not [b for b in binds if os.path.isdir(b)], [b for b in binds if os.path.isdir(b)]
    assert all(
        kernel_site._elf(b) or b.endswith("pyvenv.cfg") or b.startswith(("/etc/", "/usr/share/zoneinfo/"))
        for b in binds
    ), binds
    assert any(os.path.basename(b).startswith("libc.so") for b in binds) and "/etc/ld.so.cache" in binds
    loader = kernel_site._elf(os.path.realpath(sys.executable))[1]
    assert ("ro-bind", os.path.realpath(loader), os.path.realpath(loader)) in rows
    assert not any(r[0] == "ro-bind" and r[1] in ("/usr", "/etc", "/usr/lib", "/usr/share") for r in rows)


def test_a_chain_of_links_is_made_as_on_the_host(tmp_path):
    from autograder.sandbox.policy import _chain

    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "lib.so.1.2").write_text("")
    (tmp_path / "top").symlink_to("real")
    (tmp_path / "real" / "lib.so.1").symlink_to("../top/lib.so.1.2")
    assert _chain(str(tmp_path / "top" / "lib.so.1")) == [
        ("symlink", "real", str(tmp_path / "top")),
        ("symlink", "../top/lib.so.1.2", str(tmp_path / "real" / "lib.so.1")),
        ("ro-bind", str(tmp_path / "real" / "lib.so.1.2"), str(tmp_path / "real" / "lib.so.1.2")),
    ]


def _kernel_round_trip(prefork: bool, cwd: Path, code: str) -> str:
    from jupyter_core.utils import run_sync

    from autograder.sandbox.kernel import SandboxKernelManager

    km = SandboxKernelManager(prefork=prefork)
    km.assignment = "kv_cache"
    run_sync(km.start_kernel)(cwd=str(cwd))
    kc = km.client()
    kc.start_channels()
    printed: list[str] = []
    try:
        run_sync(kc.wait_for_ready)(timeout=120)
        run_sync(kc.execute_interactive)(
            code,
            timeout=180,
            output_hook=lambda m: printed.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None,
        )
    finally:
        kc.stop_channels()
        run_sync(km.shutdown_kernel)()
        run_sync(km.cleanup_resources)()
    return "".join(printed)


@pytest.mark.skipif(os.geteuid() != 0, reason="the fork server needs root")
def test_a_forked_kernel_whose_folder_is_in_the_course_keeps_its_view():
    """The fork server mounts a fresh tmpfs over the deepest folder of a kernel's working path that
    it has: with nbgrader run from the course root, the course itself, where the environment and the
    package are. What of the view is there (links, files, folders of packages) is put back."""
    work = Path(__file__).resolve().parents[1] / "build" / "kernel-site-work"
    work.mkdir(parents=True, exist_ok=True)
    printed = _kernel_round_trip(True, work, "import sys, numpy, torch, encdec.model\nprint('VIEW', sys.executable)")
    assert f"VIEW {sys.executable}" in printed, printed[-3000:]


# the fork server needs root; as a plain user both rows are the per-kernel sandbox, so one is run
@pytest.mark.parametrize("prefork", [True, False] if os.geteuid() == 0 else [False])
def test_a_graded_kernel_cannot_reach_another_library(prefork, tmp_path):
    folders = machine_folders()
    args, outside_venv = attack_args(folders)
    # the proof needs a library outside the environment too: Debian's python3-yaml (scripts/setup-system.sh)
    assert outside_venv, "no package outside the virtual environment to prove the invariant on"
    printed = _kernel_round_trip(prefork, tmp_path, f"ARGS = {json.dumps(json.dumps(args))}\n" + PROBE)
    line = next((x for x in printed.splitlines() if x.startswith("PROBE")), None)
    assert line is not None, printed[-3000:]
    seen = json.loads(line[len("PROBE") :])
    assert seen["imports"]["torch"] == seen["imports"]["numpy"] == seen["imports"]["encdec.model"] == "ok"
    for absent in ("transformers", "tokenizers", "safetensors", "yaml", "scipy"):
        assert seen["imports"][absent] == "ModuleNotFoundError", (absent, seen["imports"][absent])
    for key in ("found", "found_appended", "found_sitedir", "exists"):
        assert seen[key] == [], (key, seen[key])
    assert seen["loaders"] and not [k for k, v in seen["loaders"].items() if v == "ok"], seen["loaders"]
    for loader in ("ctypes ", "runpy ", "SourceFileLoader ", "SourcelessFileLoader "):  # each route was tried
        assert any(k.startswith(loader) for k in seen["loaders"]), loader
    for exe, answer in seen["pythons"].items():  # another Python of the machine, run from the kernel
        assert answer == "absent" or (isinstance(answer, dict) and answer["found"] == []), (exe, answer)
    readonly = readonly_paths()
    sites = kernel_site.sites(tuple(readonly), tuple(readonly))
    for folder, kept in sites.items():  # each folder of packages holds the allowed entries alone
        tops = sorted({p.relative_to(folder).parts[0] for p in kept})
        assert seen["listing"].get(str(folder), tops) == tops, folder
    for name, origin in seen["customize"].items():
        assert origin is None or any(origin.startswith(s + "/") for s in seen["std"]), (name, origin)

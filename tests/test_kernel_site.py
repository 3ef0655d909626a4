"""A graded kernel can import only what the exercises need (issue: honest scores by construction):
Python's standard library, numpy, torch (its ready-made layers removed: test_edition.py) and the
grading edition of the course package, with ipykernel to be a kernel. Invariant: any other
installed library is absent from the kernel's file system, by construction of its mounts
(autograder/sandbox/kernel_site.py), whatever name, alias or loader a notebook uses for it."""
from __future__ import annotations

import importlib.metadata as md
import json
import os

import pytest
from packaging.requirements import Requirement

from autograder.sandbox import kernel_site
from autograder.sandbox.policy import Policy

PROBE = r"""
import importlib, importlib.util, json, os, sys, sysconfig
site = sysconfig.get_path("purelib")
out = {"site": sorted(os.listdir(site)), "imports": {}}
for name in ("torch", "numpy", "ipykernel", "encdec.model", "transformers", "tokenizers", "safetensors", "huggingface_hub"):
    try:
        importlib.import_module(name)
        out["imports"][name] = "ok"
    except Exception as e:
        out["imports"][name] = type(e).__name__
# another route than import: a loader pointed at where the package was on the host
spec = importlib.util.spec_from_file_location("t", os.path.join(site, "transformers", "__init__.py"))
try:
    spec.loader.exec_module(importlib.util.module_from_spec(spec))
    out["by_path"] = "ok"
except Exception as e:
    out["by_path"] = type(e).__name__
print("PROBE" + json.dumps(out))
"""


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


def test_each_site_folder_is_emptied_then_only_its_entries_bound_back():
    sites = kernel_site.sites()
    rows = Policy().mounts([], [], sites)
    for folder, kept in sites.items():
        i = rows.index(("empty", str(folder)))
        assert rows[i + 1 : i + 1 + len(kept)] == [("ro-bind", str(p), str(p)) for p in kept]
    assert not any(p.name.startswith("transformers") for kept in sites.values() for p in kept)


@pytest.mark.skipif(os.geteuid() != 0, reason="the sandbox runs as root here; the unprivileged test covers the rest")
@pytest.mark.parametrize("prefork", [True, False])
def test_a_graded_kernel_cannot_reach_another_library(prefork, tmp_path):
    from jupyter_core.utils import run_sync

    from autograder.sandbox.kernel import SandboxKernelManager

    km = SandboxKernelManager(prefork=prefork)
    km.assignment = "kv_cache"
    run_sync(km.start_kernel)(cwd=str(tmp_path))
    kc = km.client()
    kc.start_channels()
    printed: list[str] = []
    try:
        run_sync(kc.wait_for_ready)(timeout=120)
        run_sync(kc.execute_interactive)(PROBE, timeout=120, output_hook=lambda m: printed.append(
            m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
    finally:
        kc.stop_channels()
        run_sync(km.shutdown_kernel)()
        run_sync(km.cleanup_resources)()
    line = next(x for x in "".join(printed).splitlines() if x.startswith("PROBE"))
    seen = json.loads(line[len("PROBE"):])
    assert seen["imports"]["torch"] == seen["imports"]["numpy"] == seen["imports"]["encdec.model"] == "ok"
    for absent in ("transformers", "tokenizers", "safetensors", "huggingface_hub"):
        assert seen["imports"][absent] == "ModuleNotFoundError", (absent, seen["imports"][absent])
    assert seen["by_path"] in ("FileNotFoundError", "ModuleNotFoundError")
    folder = next(iter(kernel_site.sites()))
    kept = {p.name for p in kernel_site.sites()[folder]}
    assert set(seen["site"]) == kept, sorted(set(seen["site"]) ^ kept)

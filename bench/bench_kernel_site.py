"""What a kernel's view of the installed packages costs to make (autograder/sandbox/kernel_site.py):
the folders of packages the sandbox empties, the entries it binds back, and the time to compute
them, which every per-kernel launcher pays once (sandbox.bwrap_command) and the grader once.

Measured in one run: `sites` itself (asking each interpreter with `python -S`, reading each
allowed distribution's RECORD by its first parts), against two floors, starting one interpreter
(`python -S -c pass`, what one ask costs at least) and resolving every file of every allowed
distribution's RECORD (how the listing was made before). CPU time includes the children.

    python bench/bench_kernel_site.py
"""
from __future__ import annotations

import resource
import subprocess
import sys
import time
from pathlib import Path

from autograder.sandbox import kernel_site
from autograder.sandbox.policy import Policy
from autograder.sandbox.sandbox import readonly_paths


def cpu() -> float:
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def timed(call) -> tuple[float, float, object]:
    c, w = cpu(), time.perf_counter()
    out = call()
    return cpu() - c, time.perf_counter() - w, out


def every_file_resolved(folders: list[Path]) -> int:
    """The former listing: every file of every allowed distribution resolved one by one."""
    out = set()
    for dist in kernel_site.distributions():
        for f in dist.files or []:
            path = Path(dist.locate_file(f)).resolve()
            out |= {folder / path.relative_to(folder).parts[0] for folder in folders if folder in path.parents}
    return len(out)


def main() -> None:
    readonly = readonly_paths()
    trees = Policy().trees(readonly)
    c_sites, w_sites, sites = timed(lambda: kernel_site.sites(trees, tuple(readonly)))
    c_one, w_one, _ = timed(lambda: subprocess.run([sys.executable, "-S", "-c", "pass"], check=True))
    c_all, w_all, n_all = timed(lambda: every_file_resolved(list(sites)))
    for folder, kept in sites.items():
        print(f"{folder}: emptied, {len(kept)} entries bound back")
    n = sum(len(k) for k in sites.values())
    print(f"interpreters asked: {len(kernel_site.interpreters())}; entries bound back: {n} (every file resolved: {n_all})")
    print(f"sites: cpu {c_sites:.2f} s, wall {w_sites:.2f} s; one interpreter started: cpu {c_one:.3f} s, "
          f"wall {w_one:.3f} s; every file resolved: cpu {c_all:.2f} s, wall {w_all:.2f} s")
    print(f"sites / one interpreter: {c_sites / c_one:.1f}x cpu; every file resolved / sites: "
          f"{c_all / c_sites:.1f}x cpu, {w_all / w_sites:.1f}x wall")


if __name__ == "__main__":
    main()

"""What a kernel's view of the machine holds and costs (autograder/sandbox/kernel_site.py), before
and after it was built file by file, measured in one run:

- listing the view (the standard library's folders, the folders of packages and their allowed
  entries, the ELF closure of shared libraries), in a fresh process, as each per-kernel launcher
  pays it once (sandbox.bwrap_command; the grader and the zygote once), against a floor: starting
  one interpreter (`python -S -c pass`);
- bwrap building the view and running `python -S -c pass` in it, per kernel: the view now against the
  one it replaced (`/usr`, `/etc`, the base installation and the environment bound whole, the same
  folders of packages emptied) and against a floor (bwrap with `/usr` alone, no folder emptied);
- what each view holds: the Python files (`.py`, and extension modules) found under its root.

    python bench/bench_kernel_site.py
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from autograder.sandbox import kernel_site, sandbox
from autograder.sandbox.policy import Policy
from autograder.sandbox.sandbox import _system_mounts, _view, package_path, readonly_paths

ROOT = Path(__file__).resolve().parents[1]
LIST = (
    "import time; from pathlib import Path; from autograder.sandbox import sandbox\n"
    "t = time.perf_counter(); sandbox._view(sandbox.Policy(), sandbox.readonly_paths(), [])\n"
    "print(time.perf_counter() - t)"
)
COUNT = (
    "import json, os, sys\nn = {'py': 0, 'so': 0}\n"
    "for d, ds, fs in os.walk('/'):\n"
    "    ds[:] = [x for x in ds if not (d == '/' and x in ('proc', 'dev', 'sys'))]\n"
    "    n['py'] += sum(f.endswith('.py') for f in fs)\n"
    "    n['so'] += sum('.cpython-' in f and f.endswith('.so') for f in fs)\n"
    "print(json.dumps(n))"
)


def wall(cmd: list[str], runs: int = 5) -> float:
    """Median wall time of ``cmd`` in ms."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, cwd="/")
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def rows_to_args(rows: list[tuple[str, ...]]) -> list[str]:
    """What `sandbox._system_mounts` makes of rows (the sizes aside)."""
    out: list[str] = []
    for kind, *paths in rows:
        out += {"empty": ["--tmpfs"], "tmpfs": ["--tmpfs"], "dir": ["--perms", "0755", "--dir"]}.get(
            kind, [f"--{kind}"]
        )
        out += paths
    return out


def main() -> None:
    exe, env = sys.executable, dict(os.environ, PYTHONPATH=str(ROOT))
    floor_python = wall([exe, "-S", "-c", "pass"])
    listing = statistics.median(
        float(subprocess.run([exe, "-c", LIST], capture_output=True, text=True, check=True, env=env, cwd=ROOT).stdout)
        * 1000
        for _ in range(3)
    )
    policy, readonly = Policy(), readonly_paths()
    now = _system_mounts(_view(policy, readonly, []), policy)
    # the view it replaced: the system and both installations whole, the same folders of packages emptied
    whole = sorted(
        {Path("/usr"), Path("/etc"), Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), package_path()}
    )
    before = rows_to_args(
        dataclasses.replace(policy, etc=()).mounts(whole, [], kernel_site.sites(tuple(whole), tuple(whole)))
    )
    floor = rows_to_args(policy.mounts([Path("/usr"), Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()], []))
    bwrap = [sandbox._tools()["bwrap"], "--unshare-pid", "--die-with-parent"]
    py = ["--", exe, "-S", "-c", "pass"]
    t_now, t_before, t_floor = (wall(bwrap + args + py) for args in (now, before, floor))
    held = {
        name: json.loads(
            subprocess.run(
                bwrap + args + ["--", exe, "-S", "-c", COUNT], capture_output=True, text=True, check=True
            ).stdout
        )
        for name, args in (("now", now), ("before", before))
    }
    print(
        f"view now: {now.count('--ro-bind')} read-only binds, {now.count('--symlink')} links; "
        f"before: {before.count('--ro-bind')} binds"
    )
    print(
        f"python files a kernel's root holds: now {held['now']['py']} .py and {held['now']['so']} extension "
        f"modules; before {held['before']['py']} .py and {held['before']['so']} extension modules"
    )
    print(
        f"listing the view (fresh process): {listing:.0f} ms; one interpreter started: {floor_python:.0f} ms "
        f"({listing / floor_python:.1f}x)"
    )
    print(
        f"bwrap + python -S, per kernel: view now {t_now:.0f} ms, before {t_before:.0f} ms, floor (/usr bound "
        f"alone) {t_floor:.0f} ms; now / before {t_now / t_before:.2f}x, now - floor {t_now - t_floor:.0f} ms"
    )


if __name__ == "__main__":
    main()

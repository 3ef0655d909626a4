"""Run every benchmark in this folder, one after another, each printing its own figures.

make bench            # all of them
python bench/run_all.py bench_generation   # only the named ones
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    scripts = sorted(p for p in HERE.glob("bench_*.py") if not names or p.stem in names)
    if names and len(scripts) != len(names):
        known = ", ".join(p.stem for p in sorted(HERE.glob("bench_*.py")))
        raise SystemExit(f"unknown benchmark among {names}: expected some of {known}")
    failed = []
    for script in scripts:
        print(f"== {script.stem}", flush=True)
        start = time.perf_counter()
        if subprocess.call([sys.executable, str(script)], cwd=HERE.parent) != 0:
            failed.append(script.stem)
        print(f"== {script.stem} took {time.perf_counter() - start:.0f} s", flush=True)
    if failed:
        print("failed:", ", ".join(failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

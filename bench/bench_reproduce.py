"""Reproduce shipped training runs: retrain a preset from scratch with the command its
metrics.json names and print the fresh figures beside the shipped ones (and the seconds).

    python bench/bench_reproduce.py                 # overfit and modern (a few minutes)
    python bench/bench_reproduce.py historical      # the original's recipe to its plateau (~20 min)

Same seeds, same data: on this CPU the figures agree; on another, a float near a tie may flip an
argmax, so the difference is printed, not asserted.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from encdec.train import PACKAGED_CHECKPOINTS

FIGURES = (
    "val_token_accuracy",
    "best_val_token_accuracy",
    "best_epoch",
    "val_exact_match",
    "val_unseen_exact_match",
    "space_wrong",
    "train_seconds",
)


def reproduce(preset: str) -> dict:
    shipped = json.loads((PACKAGED_CHECKPOINTS / preset / "metrics.json").read_text())
    args = shlex.split(shipped["command"])[3:]  # after "python -m encdec.train"
    with tempfile.TemporaryDirectory() as out:
        args[args.index("--out") + 1] = out
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "encdec.train", *args],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wall = time.perf_counter() - start
        fresh = json.loads((Path(out) / "metrics.json").read_text())
    row = {k: {"shipped": shipped.get(k), "fresh": fresh.get(k)} for k in FIGURES}
    row["wall_seconds"] = round(wall, 1)
    row["train_seconds_ratio_fresh_over_shipped"] = round(fresh["train_seconds"] / shipped["train_seconds"], 3)
    return row


def main(argv: list[str]) -> int:
    for preset in argv or ["overfit", "modern"]:
        print(preset, json.dumps(reproduce(preset)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Regenerate the stored reference outputs of the visible checks from the encdec reference code.

    python autograder/make_references.py [--out ROOT]

writes ``solutions/<assignment>/reference/<check_id>.npz`` (nbgrader copies them into the
student release ``exercises/<assignment>/reference/``). The inputs come from fixed seeds
(``encdec.grading.checks``), and the files are written with fixed zip timestamps, so running
it again gives byte-identical files (``tests/test_grading_references.py`` proves it).
"""

from __future__ import annotations

import argparse
import io
import sys
import zipfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """An ``np.load``-able .npz whose bytes depend only on the arrays (no timestamps)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name in sorted(arrays):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.array(arrays[name], order="C"), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, buf.getvalue())


def make_references(root: Path) -> list[Path]:
    """Write every visible check's reference outputs under ``root/solutions``; return the paths."""
    import torch

    from encdec.grading.checks import CHECKS, reference_outputs

    torch.set_num_threads(1)  # one thread: the same float sums on every machine we run on
    written = []
    for check_id, check in sorted(CHECKS.items()):
        if check.hidden:
            continue
        assignment = check_id.split(".", 1)[0]
        path = root / "solutions" / assignment / "reference" / f"{check_id}.npz"
        write_npz(path, reference_outputs(check_id))
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT, help="root under which solutions/ is written")
    args = parser.parse_args(argv)
    for path in make_references(args.out):
        print(path.relative_to(args.out))


if __name__ == "__main__":
    sys.exit(main())

"""A digest of every check's inputs and references, to hold them equal across machines.

    python -m autograder.judge.fingerprint [--seeds 11 12]

prints one JSON object: check id (and seed) -> the SHA-256 of what the kernel is sent (the
wire bytes) and of the reference (or, for a check judged by runs, of each run's inputs and
reference tokens). Run it on two machines, or on one under other kernel choices
(``ATEN_CPU_CAPABILITY=default|avx2|avx512``, ``--threads``), and the outputs must be equal: a
student graded on the instructor's server, on Gradescope or in a regrade gets the same inputs
and the same verdict (``tests/test_grading_references.py``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys

import numpy as np


def _digest(arrays: dict) -> str:
    h = hashlib.sha256()
    for key in sorted(arrays):
        a = np.ascontiguousarray(arrays[key])
        h.update(f"{key}:{a.dtype.str}:{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def fingerprints(hidden_seeds: list[int]) -> dict[str, str]:
    """Check id (with ``@seed`` for hidden checks) -> digest of its inputs and reference."""
    from . import checks, graded_inputs, reference, wire_bytes

    out = {}
    for check_id, check in sorted(checks().items()):
        for seed in hidden_seeds if check.hidden else [check.seed]:
            drawn = graded_inputs(check_id, seed)
            key = f"{check_id}@{seed}" if check.hidden else check_id
            h = hashlib.sha256()
            for inputs in drawn["runs"].values() if check.runs else [drawn]:
                h.update(wire_bytes(check_id, inputs) + _digest(reference(check, inputs)).encode())
            out[key] = h.hexdigest()
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=[11, 12], help="hidden checks' seeds")
    parser.add_argument("--threads", type=int, default=None, help="torch's thread count while building")
    args = parser.parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    json.dump(fingerprints(args.seeds), sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()

"""What travels between the grader and the student's kernel: plain arrays in ``.npz`` files.

Nothing is pickled. A file holds named arrays and one JSON string ``__meta__`` (what kind of
call it is, the sizes, the model configuration). Three folders next to the notebook:

- ``.grading-in/<check_id>.npz``: a graded run's inputs, written by the grader just before the
  test cell that uses them runs (the kernel cannot know them earlier);
- ``.grading/<check_id>.npz``: what the student's code returned, written by the kernel;
- ``reference/<check_id>.npz``: a visible check's fixed inputs, expected outputs and the
  outputs of known mistakes, for the student's own run (made by ``autograder/make_references.py``).
"""

from __future__ import annotations

import io
import json
import os
import stat
import zipfile
from pathlib import Path

import numpy as np

INPUTS_DIR = ".grading-in"
OUTPUTS_DIR = ".grading"
REFERENCE_DIR = "reference"
META = "__meta__"
# Limits of a file, well above what any check writes (the largest, a kv_cache run decoding 64 rows
# for 64 steps, is 2.3 MB and 66 arrays; a block's outputs with their stage record 0.2 MB and 54):
# the grader holds every check's file of a notebook at once and judges them in its own process, so
# a file past them is refused unread.
MAX_BYTES = 8_000_000  # a file larger than this (packed or unpacked) is not read
MAX_ARRAYS = 2_000  # nor one with more arrays than this


def to_bytes(meta: dict, arrays: dict[str, np.ndarray]) -> bytes:
    """An ``np.load``-able .npz whose bytes depend only on its content (no timestamps)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED) as zf:
        items = {META: np.array(json.dumps(meta, sort_keys=True)), **arrays}
        for name in sorted(items):
            one = io.BytesIO()
            np.lib.format.write_array(one, np.array(items[name], order="C"), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            zf.writestr(info, one.getvalue())
    return buf.getvalue()


def save(path: Path, meta: dict, arrays: dict[str, np.ndarray]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(to_bytes(meta, arrays))


def read_bounded(path: Path) -> bytes:
    """The bytes of a regular file, at most ``MAX_BYTES`` (a symbolic link or a FIFO fails)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise ValueError(f"{Path(path).name} is not a regular file")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise ValueError(f"{Path(path).name} is larger than {MAX_BYTES} bytes, more than a check writes")
    return data


def load(path: Path) -> tuple[dict, dict[str, np.ndarray]]:
    """Read a file with numpy's safe loader: no links, no pickles, no archive bombs."""
    return loads(read_bounded(path), Path(path).name)


def load_meta(path: Path) -> dict:
    """Only a file's metadata (``load``'s checks, none of its other arrays unpacked)."""
    return loads(read_bounded(path), Path(path).name, arrays=False)[0]


def loads(data: bytes, name: str = "outputs", arrays: bool = True) -> tuple[dict, dict[str, np.ndarray]]:
    """The metadata and the arrays (with ``arrays=False``: the metadata alone) of a file's bytes."""
    if len(data) > MAX_BYTES:
        raise ValueError(f"{name} is larger than {MAX_BYTES} bytes, more than a check writes")
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
    unpacked = sum(info.file_size for info in infos)
    if unpacked > MAX_BYTES:
        raise ValueError(f"{name} unpacks to {unpacked} bytes, more than a check writes")
    if len(infos) > MAX_ARRAYS:
        raise ValueError(f"{name} holds {len(infos)} arrays, more than a check writes")
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        found = {k: np.array(z[k]) for k in z.files if arrays or k == META}
    meta = json.loads(str(found.pop(META, np.array("{}"))))
    if not isinstance(meta, dict):
        raise ValueError(f"{name}: its metadata is not a JSON object")
    return meta, found


def section(arrays: dict[str, np.ndarray], prefix: str) -> dict[str, np.ndarray]:
    """The arrays under ``prefix/``, with the prefix removed."""
    p = prefix + "/"
    return {k[len(p) :]: v for k, v in arrays.items() if k.startswith(p)}


def case(name: str, i: int) -> str:
    """The array name of probe ``i`` of a check that calls the student's code several times:
    ``name`` for the first, then ``name_1``, ``name_2``, ..."""
    return name if i == 0 else f"{name}_{i}"


def prefixed(prefix: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {f"{prefix}/{k}": np.asarray(v) for k, v in arrays.items()}

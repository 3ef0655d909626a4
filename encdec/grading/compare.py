"""Comparing a student's output with an expected one, and saying where they differ.

Pure numpy, no reference code: the student's own checks (``checks``) and the grader's judges
(``autograder.judge``) use the same comparison and the same wording.
"""

from __future__ import annotations

import numpy as np

from .words import Words, words

ATOL = RTOL = 1e-4


def describe(a: np.ndarray) -> Words:
    return words("shape_dtype", shape=tuple(a.shape), dtype=str(a.dtype))


def fmt(x: np.generic) -> str:
    v = x.item()
    return f"{v:.6g}" if isinstance(v, float) else repr(v)


def is_exact(a: np.ndarray) -> bool:
    """Integer and boolean outputs (token ids, masks, counts) must match exactly."""
    return a.dtype == bool or np.issubdtype(a.dtype, np.integer)


def same(got: np.ndarray, exp: np.ndarray, exact: bool = False) -> bool:
    if got.shape != exp.shape:
        return False
    if exact:
        if exp.dtype == bool and got.dtype != bool:  # a mask of 0s and 1s is not a mask
            return False
        return bool(np.array_equal(got, exp))
    if not (np.issubdtype(got.dtype, np.number) or got.dtype == bool):
        return False
    return bool(np.allclose(got.astype(np.float64), exp.astype(np.float64), atol=ATOL, rtol=RTOL, equal_nan=False))


def first_mismatch(got: np.ndarray, exp: np.ndarray, exact: bool) -> Words:
    if exact:
        bad = got != exp
    else:
        bad = ~np.isclose(got.astype(np.float64), exp.astype(np.float64), atol=ATOL, rtol=RTOL)
        bad |= np.isnan(got) != np.isnan(exp)
    if not bad.any():  # equal values of another dtype (a mask of 0s and 1s)
        return words("dtype_differs", got=str(got.dtype), exp=str(exp.dtype))
    idx = tuple(int(i) for i in np.argwhere(bad)[0])
    n = int(bad.sum())
    return words("first_mismatch", idx=idx, exp=fmt(exp[idx]), got=fmt(got[idx]), n=n, size=bad.size)


def mismatch_details(got: np.ndarray, exp: np.ndarray, exact: bool) -> list[Words]:
    """The lines under "did not match": both shapes, and the first differing entry (worded when shown)."""
    details = [words("expected", desc=describe(exp)), words("got", desc=describe(got))]
    if got.shape == exp.shape:
        details.append("  " + first_mismatch(got, exp, exact))
    return details


def error_match(patterns, msg: str, dims: dict | None = None) -> str | None:
    """The first misconception whose pattern fits an exception message. ``patterns``: a dict or a
    list of (name, pattern) pairs, tried in order; a pattern is substrings joined by ``&&`` (with
    ``{Ka}``-style sizes filled in from ``dims``), all of which must occur, except those written
    ``!text``, which must not."""
    for name, pat in patterns.items() if isinstance(patterns, dict) else patterns:
        parts = [p.format(**dims) if dims else p for p in pat.split("&&")]
        if all((p[1:] not in msg) if p.startswith("!") else (p in msg) for p in parts):
            return name
    return None


def where(origin: dict) -> Words:
    """'\n(raised in ...)': the function of the student's code a failure came from, or ''."""
    student, inner = str(origin.get("student", "")), str(origin.get("innermost", ""))
    if not student:
        return Words()
    if inner and inner != student:
        return words("raised_in", inner=inner, student=student)
    return words("raised_in_yours", student=student)


def cache_blame(shapes: np.ndarray | None, N: int, H: int, Dh: int, origin: dict) -> Words | None:
    """When a decoding failure came from ``KVCache.update``, say so: it raised inside it, or a decoder
    layer's self-attention cache held keys or values that are not (N, H, T, Dh). ``shapes``
    (layers, 2, 4) as the kernel recorded them (-1: nothing cached). None when the cache looks fine."""
    student = str(origin.get("student", ""))
    if student.endswith("update"):
        return words("blame_update", student=student)
    for i, (k, v) in enumerate(np.asarray(shapes if shapes is not None else np.zeros((0, 2, 4)), dtype=np.int64)):
        for name, s in (("keys", k), ("values", v)):
            if s[0] >= 0 and (s[0] != N or s[1] != H or s[3] != Dh):
                return words("blame_shape", name=words(name), layer=i, shape=tuple(int(x) for x in s), N=N, H=H, Dh=Dh)
    return None

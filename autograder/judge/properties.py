"""Diagnosis by property: what a tutor checks first, computed on the student's own outputs and on
the probe inputs the grader chose, for the small functions (the mask, the masked softmax, the
shift, the loss, the cache update) where no listed variant matched.

Grader side only. Each function returns a misconception's key (``encdec.grading.misconceptions``)
only when the property is certain on the probes: the student's outputs equal, to float tolerance,
what that one mistake gives on every probe, and differ from the lesson's. Anything else returns
None, and the verdict keeps its observation (what did not match, where) with no guess.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from encdec.data import EOS_ID

TOL = {"rtol": 1e-4, "atol": 1e-5}


def _close(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.allclose(a.astype(np.float64), b.astype(np.float64), equal_nan=True, **TOL))


# --- the causal mask --------------------------------------------------------------------------------


def mask(m: np.ndarray, seq: np.ndarray) -> str | None:
    """``m``: the student's mask for ``seq`` (N, K); the lesson's is triu(ones(K, K), 1), per sequence."""
    N, K = seq.shape
    if not (m.dtype == bool or np.issubdtype(m.dtype, np.number)) or m.ndim not in (2, 3) or m.shape[-2:] != (K, K):
        return None
    as_bool = m != 0 if m.dtype != bool else m
    rows = as_bool.reshape(-1, K, K)
    if len(rows) > 1 and any(not np.array_equal(r, rows[0]) for r in rows[1:]):
        distinct_seqs = len({tuple(s) for s in seq.tolist()}) > 1
        return "mask_from_values" if distinct_seqs and rows.shape[0] == N else None
    P = rows[0]
    ones = np.ones((K, K), dtype=bool)
    pattern = None
    if np.array_equal(P, np.triu(ones, 1)):
        pattern = "right"
    elif np.array_equal(P, np.triu(ones, 0)):
        pattern = "mask_diagonal"
    elif K > 2 and any(np.array_equal(P, np.triu(ones, k)) for k in range(2, K)):
        pattern = "mask_offset"
    elif np.array_equal(P, np.tril(ones, 0)):
        pattern = "mask_inverted"
    elif np.array_equal(P, np.tril(ones, -1)):
        pattern = "mask_transposed"
    if pattern is None:
        return None
    if pattern != "right":
        return pattern
    if m.shape != (N, K, K):
        return "mask_not_expanded"
    if m.dtype != bool:
        return "mask_not_bool"
    return None


# --- the masked softmax ------------------------------------------------------------------------------


def _softmax(s: np.ndarray, axis: int = -1) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        z = s - np.max(s, axis=axis, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=axis, keepdims=True)


def softmax(w: np.ndarray, scores: np.ndarray, mask_: np.ndarray) -> str | None:
    """``w``: the student's weights for ``scores`` (N, L, L) and ``mask_`` (True = forbidden)."""
    if w.shape != scores.shape or not np.issubdtype(w.dtype, np.floating):
        return None
    s = scores.astype(np.float64)
    m = np.broadcast_to(mask_, s.shape)
    ref = _softmax(np.where(m, -np.inf, s))
    if _close(w, ref):
        return None
    if not np.isfinite(w).all():
        return "softmax_wrong_axis" if any(_close(w, _softmax(np.where(m, -np.inf, s), ax)) for ax in (0, 1)) else None
    sums = w.sum(-1, keepdims=True)
    if (sums > 0).all() and _close(w / sums, ref):  # the right proportions, a wrong sum
        plain = _softmax(s) * ~m
        return "mask_after_softmax" if _close(w, plain) else "softmax_not_normalised"
    for ax in (0, 1):  # over another axis, masked first or not
        if _close(w, _softmax(np.where(m, -np.inf, s), ax)) or _close(w, _softmax(s, ax) * ~m):
            return "softmax_wrong_axis"
    fill = _fitted_fill(w, s, m)
    if fill is not None and _close(w, _softmax(np.where(m, fill, s))):
        return "softmax_fill_finite"
    scale = _fitted_scale(w, s, m)
    if scale is not None and abs(scale - 1) > 1e-3 and _close(w, _softmax(np.where(m, -np.inf, s * scale))):
        return "softmax_scaled"
    return None


def _fitted_fill(w, s, m) -> float | None:
    """The one finite value the masked scores would have had: log(w_masked / w_kept) + s_kept, the
    same for every masked entry (None when the weights say otherwise)."""
    if not m.any() or (w <= 0).any():
        return None
    kept = np.where(m, np.nan, s)
    anchor = np.nanargmax(kept, axis=-1)[..., None]  # each row's largest kept score
    s_a = np.take_along_axis(s, anchor, -1)
    w_a = np.take_along_axis(w.astype(np.float64), anchor, -1)
    c = np.log(w.astype(np.float64) / w_a) + s_a  # (N, L, L): the score each entry had
    values = c[m]
    return float(np.median(values)) if values.size and np.ptp(values) < 1e-2 else None


def _fitted_scale(w, s, m) -> float | None:
    """The factor the scores were multiplied by: log-weight differences against score differences
    over the kept entries, one least-squares fit (None when the weights are not positive there)."""
    kept = ~m
    if (w[kept] <= 0).any():
        return None
    logw = np.log(np.where(kept, w.astype(np.float64), 1.0))
    d_log = (logw - np.where(kept, logw, 0).sum(-1, keepdims=True) / kept.sum(-1, keepdims=True))[kept]
    d_s = (s - np.where(kept, s, 0).sum(-1, keepdims=True) / kept.sum(-1, keepdims=True))[kept]
    denom = float(d_s @ d_s)
    return float(d_log @ d_s) / denom if denom > 0 else None


# --- the shift ------------------------------------------------------------------------------------


def _as_slice(x: np.ndarray, ans: np.ndarray) -> tuple | None:
    """What ``x`` is of ``ans`` (N, Ka): ("slice", axis, start, stop) or ("roll", axis, steps)."""
    if x.ndim != 2 or not np.issubdtype(x.dtype, np.integer):
        return None
    for axis in (1, 0):
        other = 1 - axis
        if x.shape[other] != ans.shape[other]:
            continue
        n = ans.shape[axis]
        width = x.shape[axis]
        for a in range(n - width + 1):
            if np.array_equal(x, np.take(ans, range(a, a + width), axis=axis)):
                return ("slice", axis, a, a + width)
        if width == n:
            for k in range(1, n):
                if np.array_equal(x, np.roll(ans, k, axis=axis)):
                    return ("roll", axis, k)
    return None


def shift(dec_in: np.ndarray, labels: np.ndarray, ans: np.ndarray) -> str | None:
    """``dec_in``, ``labels``: the student's pair for ``ans`` (N, Ka); the lesson's is
    (ans[:, :-1], ans[:, 1:])."""
    if len({tuple(r) for r in ans.T.tolist()}) < ans.shape[1] or len({tuple(r) for r in ans.tolist()}) < ans.shape[0]:
        return None  # repeated columns or rows: a slice could not be told from another
    a, b = _as_slice(dec_in, ans), _as_slice(labels, ans)
    found = [d for d in (a, b) if d is not None]
    if any(d[0] == "roll" and d[1] == 1 for d in found):
        return "shift_wraps"
    if any(d[1] == 0 for d in found):
        return "shift_wrong_axis"
    if a is None or b is None:
        return None
    K = ans.shape[1]
    pair = (a[2:], b[2:])
    named = {
        ((0, K - 1), (1, K)): None,
        ((1, K), (0, K - 1)): "shift_reversed",
        ((0, K), (0, K)): "no_shift",
        ((0, K - 1), (0, K)): "labels_not_sliced",
        ((0, K), (1, K)): "input_not_sliced",
        ((0, K - 1), (0, K - 1)): "no_shift",
    }  # the labels are the input itself: no shift between them
    if pair in named:
        return named[pair]
    return "shift_off_by_one"


# --- the loss ---------------------------------------------------------------------------------------


def _ce(
    x: torch.Tensor, labels: torch.Tensor, reduction: str = "mean", ignore: int = -100, smoothing: float = 0.0
) -> torch.Tensor:
    N, K1, V = x.shape
    return F.cross_entropy(
        x.reshape(-1, V), labels.reshape(-1), reduction=reduction, ignore_index=ignore, label_smoothing=smoothing
    )


def _nll(x: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    return F.nll_loss(x.reshape(-1, x.shape[-1]), labels.reshape(-1))


# one mistake each: (logits, ans) -> the loss it gives
LOSS_MISTAKES = {
    "loss_on_probabilities": lambda x, ans: _ce(torch.softmax(x, -1), ans[:, 1:]),
    "nll_on_logits": lambda x, ans: _nll(x, ans[:, 1:]),
    "nll_on_probabilities": lambda x, ans: _nll(torch.softmax(x, -1), ans[:, 1:]),
    "labels_not_shifted": lambda x, ans: _ce(x, ans[:, :-1]),
    "loss_class_axis": lambda x, ans: F.cross_entropy(x.reshape(x.shape[0], x.shape[2], x.shape[1]), ans[:, 1:]),
    "loss_sum": lambda x, ans: _ce(x, ans[:, 1:], "sum"),
    "loss_reduction": lambda x, ans: _ce(x, ans[:, 1:], "sum") / x.shape[0],
    "loss_reduction_per_position": lambda x, ans: _ce(x, ans[:, 1:], "sum") / x.shape[1],
    "loss_ignores_eos": lambda x, ans: _ce(x, ans[:, 1:], ignore=EOS_ID),
}


def loss(values: list[float], cases: list[tuple[torch.Tensor, torch.Tensor]]) -> str | None:
    """``values``: the student's loss on each probe ``cases`` (logits (N, Ka-1, V), ans_b (N, Ka)).
    A mistake is named when it gives every probe's value; label smoothing when one smoothing
    factor, fitted on the first probe, gives all of them."""
    got = np.asarray(values, dtype=np.float64)
    if got.shape != (len(cases),) or not np.isfinite(got).all():
        return None
    with torch.no_grad():
        right = np.array([float(_ce(x, a[:, 1:])) for x, a in cases])
        if np.allclose(got, right, **TOL):
            return None
        for name, make in LOSS_MISTAKES.items():
            try:
                theirs = np.array([float(make(x, a)) for x, a in cases])
            except Exception:
                continue
            if not np.allclose(theirs, right, **TOL) and np.allclose(got, theirs, **TOL):
                return "loss_reduction" if name.startswith("loss_reduction") else name
        for ignored in range(cases[0][0].shape[-1]):  # an ignore_index on some other token
            theirs = np.array([float(_ce(x, a[:, 1:], ignore=ignored)) for x, a in cases])
            if np.isfinite(theirs).all() and not np.allclose(theirs, right, **TOL) and np.allclose(got, theirs, **TOL):
                return "loss_ignores_eos"
        uniform = np.array([float(-torch.log_softmax(x, -1).mean(-1).mean()) for x, _ in cases])
        if abs(uniform[0] - right[0]) > 1e-6:
            eps = (got[0] - right[0]) / (uniform[0] - right[0])  # the loss is linear in the smoothing
            if 1e-3 < eps < 1 and len(cases) > 1 and np.allclose(got, right + eps * (uniform - right), **TOL):
                return "loss_label_smoothing"
    return None


# --- the cache update -------------------------------------------------------------------------------


def update(got: dict[str, np.ndarray], steps: list[tuple[np.ndarray, np.ndarray]]) -> str | None:
    """``got``: what update returned after each step (k{i}, v{i}, len{i}); ``steps``: the (k_new,
    v_new) fed, each (N, H, t, Dh). Judged at the first step whose keys or values are wrong."""
    ks, vs = [k for k, _ in steps], [v for _, v in steps]
    for i in range(len(steps)):
        k, v, n = got.get(f"k{i}"), got.get(f"v{i}"), got.get(f"len{i}")
        right_k, right_v = np.concatenate(ks[: i + 1], 2), np.concatenate(vs[: i + 1], 2)
        if k is None or v is None:
            return None
        if _close(k, right_k) and _close(v, right_v):
            continue
        if _close(k, right_v) and _close(v, right_k):
            return "cache_kv_swapped"
        if i and _close(k, np.concatenate(ks[i::-1], 2)) and _close(v, np.concatenate(vs[i::-1], 2)):
            return "cache_prepends"
        for j in range(1, i):  # the newest few steps only: the cache lost the older ones
            if _close(k, np.concatenate(ks[j : i + 1], 2)) and _close(v, np.concatenate(vs[j : i + 1], 2)):
                return "cache_overwrites"
        if i and _close(k, ks[i]) and _close(v, vs[i]):
            held = int(np.asarray(n).reshape(-1)[0]) if n is not None and np.asarray(n).size == 1 else None
            if held == right_k.shape[2]:
                return "cache_returns_new"
            if held == ks[i].shape[2]:
                return "cache_overwrites"
            return None
        for axis in (0, 1, 3):
            try:
                if _close(k, np.concatenate(ks[: i + 1], axis)) and _close(v, np.concatenate(vs[: i + 1], axis)):
                    return "cache_wrong_axis"
            except ValueError:
                continue
        return None
    return None

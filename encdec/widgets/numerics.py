"""Plain-Python numerics behind the book's widgets (no torch, no front end).

The widgets' JavaScript computes the same quantities in the browser, so the static site needs
no kernel; these functions are the Python side of each figure, used by the widgets' methods and
checked in ``tests/test_widgets.py`` against the package (``encdec.attention.masked_softmax``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..data import VOCAB

#: The lesson's example (chapter 11): question and answer tokens, as ``decode`` prints them.
LESSON_QUESTION = ("BOS", "NEGATIVE", "3", "0", "subtract", "NEGATIVE", "3", "4", "EOS")
LESSON_ANSWER = ("BOS", "POSITIVE", "0", "4", "EOS")
LESSON_QUESTION_TEXT = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"

#: A fixed 5x5 score matrix (reader rows, source columns) for the mask figure.
DEFAULT_SCORES_5 = (
    (2.0, 0.5, -1.0, 0.3, 1.2),
    (1.0, 2.2, 0.4, -0.5, 0.8),
    (0.2, 1.5, 1.8, 0.9, -0.3),
    (-0.4, 0.6, 1.1, 2.5, 0.7),
    (0.9, -0.2, 0.5, 1.3, 2.1),
)

MASK_PRESETS = ("causal", "padding", "none")


def default_scores(K: int) -> list[list[float]]:
    """The fixed score matrix for K positions: the table above for K=5, a smooth pattern otherwise."""
    if K == 5:
        return [list(row) for row in DEFAULT_SCORES_5]
    return [[round(2.0 * math.cos(0.9 * i - 1.3 * j) + (0.5 if i == j else 0.0), 2) for j in range(K)] for i in range(K)]


def preset_mask(preset: str, K: int, num_padding: int = 1) -> list[list[bool]]:
    """A K x K mask (True = forbidden; row = reader, column = source) for a named preset.

    ``causal``: reader i may not read a later source j > i. ``padding``: nobody reads the last
    ``num_padding`` positions (padding tokens). ``none``: everything allowed.
    """
    if K < 1:
        raise ValueError(f"K must be at least 1, got {K}")
    if preset == "causal":
        return [[j > i for j in range(K)] for i in range(K)]
    if preset == "padding":
        if not 0 <= num_padding < K:
            raise ValueError(f"num_padding must be in [0, {K - 1}] for {K} positions, got {num_padding}")
        return [[j >= K - num_padding for j in range(K)] for _ in range(K)]
    if preset == "none":
        return [[False] * K for _ in range(K)]
    raise ValueError(f"unknown mask preset {preset!r}: expected one of {', '.join(MASK_PRESETS)}")


def softmax(row: Sequence[float]) -> list[float]:
    """Numerically stable softmax of one row."""
    top = max(row)
    exps = [math.exp(x - top) for x in row]
    total = sum(exps)
    return [e / total for e in exps]


def masked_softmax_row(scores: Sequence[float], forbidden: Sequence[bool]) -> list[float]:
    """Mask, then softmax: forbidden sources leave the denominator and get weight 0.

    Like ``encdec.attention.masked_softmax`` (which fills with the most negative float), a row
    with every source forbidden spreads evenly over all of them.
    """
    if len(scores) != len(forbidden):
        raise ValueError(f"{len(scores)} scores but {len(forbidden)} mask entries")
    allowed = [i for i, f in enumerate(forbidden) if not f]
    if not allowed:
        return [1.0 / len(scores)] * len(scores)
    sub = softmax([scores[i] for i in allowed])
    out = [0.0] * len(scores)
    for i, w in zip(allowed, sub):
        out[i] = w
    return out


def masked_softmax_rows(scores: Sequence[Sequence[float]], mask: Sequence[Sequence[bool]]) -> list[list[float]]:
    """``masked_softmax_row`` for every reader row of a square score matrix."""
    if len(scores) != len(mask):
        raise ValueError(f"scores have {len(scores)} rows but the mask has {len(mask)}")
    return [masked_softmax_row(s, m) for s, m in zip(scores, mask)]


def future_row(scores: Sequence[float], reader: int, future_score: float) -> list[float]:
    """The row the softmax figure shows: sources after ``reader`` all get ``future_score``."""
    if not 0 <= reader < len(scores):
        raise ValueError(f"reader must be in [0, {len(scores) - 1}], got {reader}")
    return [float(s) if j <= reader else float(future_score) for j, s in enumerate(scores)]


def mask_then_softmax(row: Sequence[float], reader: int) -> list[float]:
    """The right order: forbid sources after ``reader``, then softmax (the row sums to 1)."""
    return masked_softmax_row(row, [j > reader for j in range(len(row))])


def softmax_then_zero(row: Sequence[float], reader: int) -> list[float]:
    """The wrong order: softmax over every source, then zero the future (the row sums to < 1)."""
    return [w if j <= reader else 0.0 for j, w in enumerate(softmax(row))]


def cross_attention_shapes(Ka: int, Kq: int, swap_q: bool = False) -> dict[str, tuple]:
    """Shapes in one cross-attention: Q from the decoder (Ka rows), K and V from the encoder (Kq rows).

    With ``swap_q`` the Q source is the encoder instead (and K, V come from the decoder): the
    scores become (N, Kq, Ka) and the output has one row per question position.
    """
    for name, k in (("Ka", Ka), ("Kq", Kq)):
        if not isinstance(k, int) or k < 1:
            raise ValueError(f"{name} must be a positive integer, got {k!r}")
    q_len, kv_len = (Kq, Ka) if swap_q else (Ka, Kq)
    return {
        "Q": ("N", q_len, "M"),
        "K": ("N", kv_len, "M"),
        "V": ("N", kv_len, "M"),
        "scores": ("N", q_len, kv_len),
        "A": ("N", q_len, kv_len),
        "output": ("N", q_len, "M"),
    }


def teacher_forcing_table(tokens: Sequence[str], shift: bool = True, causal_mask: bool = True) -> list[dict]:
    """One row per decoder position: its input, its label, the answer tokens it could read, any leak.

    Indices refer to the answer ``tokens``. With the shift, input t is token t and label t is
    token t+1; without it, input and label of position t are both token t. Position t reads the
    inputs 0..t under the causal mask, all of them without it. A leak: the label is readable.
    """
    K = len(tokens)
    if K < 2:
        raise ValueError(f"an answer needs at least 2 tokens, got {K}")
    inputs = list(range(K - 1)) if shift else list(range(K))
    rows = []
    for t, inp in enumerate(inputs):
        label = t + 1 if shift else t
        readable = inputs[: t + 1] if causal_mask else list(inputs)
        rows.append(
            {
                "position": t,
                "input": tokens[inp],
                "label": tokens[label],
                "label_index": label,
                "readable": readable,
                "leak": label in readable,
            }
        )
    return rows


#: The chapter-12 worked example: the correct label is "4", the model prefers "3".
CE_CORRECT, CE_RIVAL = "4", "3"
CE_REFERENCE = {"p_correct": 0.20, "p_rival": 0.55}


def cross_entropy_example(p_correct: float) -> dict:
    """The worked example at a given P(correct): probabilities, loss -log p, gradient p - one_hot.

    At the reference P(4) = 0.20, P(3) = 0.55 and the other 14 tokens share 0.25 evenly; other
    values of P(4) rescale the wrong tokens in those proportions so everything sums to 1.
    """
    if not 0.0 < p_correct < 1.0:
        raise ValueError(f"p_correct must be strictly between 0 and 1, got {p_correct}")
    ref_rest = 1.0 - CE_REFERENCE["p_correct"]  # 0.80 shared by the wrong tokens at the reference
    others = [t for t in VOCAB if t not in (CE_CORRECT, CE_RIVAL)]
    scale = (1.0 - p_correct) / ref_rest
    probs = {}
    for tok in VOCAB:
        if tok == CE_CORRECT:
            probs[tok] = p_correct
        elif tok == CE_RIVAL:
            probs[tok] = CE_REFERENCE["p_rival"] * scale
        else:
            probs[tok] = (ref_rest - CE_REFERENCE["p_rival"]) / len(others) * scale
    grad = {tok: p - (1.0 if tok == CE_CORRECT else 0.0) for tok, p in probs.items()}
    return {"probs": probs, "loss": -math.log(p_correct), "grad": grad}

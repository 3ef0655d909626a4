"""Figures for chapter 11: the causal mask grid, mask-before-softmax, and cross-attention shapes."""

from __future__ import annotations

import traitlets as t

from ._base import BookWidget, esm
from .numerics import (
    LESSON_ANSWER,
    LESSON_QUESTION,
    MASK_PRESETS,
    cross_attention_shapes,
    default_scores,
    future_row,
    mask_then_softmax,
    masked_softmax_rows,
    preset_mask,
    softmax_then_zero,
)


def _square(name: str, rows, K: int, cast) -> list[list]:
    rows = [[cast(x) for x in r] for r in rows]
    if len(rows) != K or any(len(r) != K for r in rows):
        shape = (len(rows), *{len(r) for r in rows})
        raise t.TraitError(f"{name} must be {K} x {K} (one row per token), got rows of shape {shape}")
    return rows


class MaskToggle(BookWidget):
    """The reader (row) x source (column) grid: click a cell to allow or forbid it.

    Each row shows mask-then-softmax weights and its sum. ``mask[i][j]`` is True when reader i
    may not read source j (the package's convention); clicking in the browser updates ``mask``.
    """

    _esm = esm("mask_toggle.js")
    tokens = t.List(t.Unicode()).tag(sync=True)
    scores = t.List(t.List(t.Float())).tag(sync=True)
    mask = t.List(t.List(t.Bool())).tag(sync=True)
    preset = t.Unicode("causal").tag(sync=True)  # one of MASK_PRESETS, or "custom" after a click
    num_padding = t.Int(1).tag(sync=True)  # how many trailing positions the padding preset hides

    def __init__(self, tokens=LESSON_ANSWER, scores=None, preset="causal", num_padding=1, mask=None, **kwargs):
        tokens = [str(x) for x in tokens]
        K = len(tokens)
        if K < 2:
            raise ValueError(f"MaskToggle needs at least 2 tokens, got {tokens}")
        scores = default_scores(K) if scores is None else _square("scores", scores, K, float)
        if mask is not None:  # an explicit mask wins over the preset
            mask, preset = _square("mask", mask, K, bool), "custom"
        elif preset not in MASK_PRESETS:
            raise ValueError(f"unknown mask preset {preset!r}: expected one of {', '.join(MASK_PRESETS)}")
        else:
            mask = preset_mask(preset, K, num_padding)
        super().__init__(tokens=tokens, scores=scores, mask=mask, preset=preset, num_padding=num_padding, **kwargs)

    @t.validate("mask")
    def _check_mask(self, proposal):
        return _square("mask", proposal["value"], len(self.tokens), bool)

    @t.validate("scores")
    def _check_scores(self, proposal):
        return _square("scores", proposal["value"], len(self.tokens), float)

    @t.validate("preset")
    def _check_preset(self, proposal):
        if proposal["value"] not in (*MASK_PRESETS, "custom"):
            raise t.TraitError(f"preset must be one of {', '.join(MASK_PRESETS)} or 'custom', got {proposal['value']!r}")
        return proposal["value"]

    @t.observe("preset", "num_padding")
    def _apply_preset(self, change):
        if self.preset != "custom":
            self.mask = preset_mask(self.preset, len(self.tokens), self.num_padding)

    def toggle(self, reader: int, source: int) -> None:
        """Flip one cell, as a click in the grid does."""
        mask = [list(r) for r in self.mask]
        mask[reader][source] = not mask[reader][source]
        self.preset = "custom"
        self.mask = mask

    def weights(self) -> list[list[float]]:
        """Attention weights of every reader row: mask, then softmax."""
        return masked_softmax_rows(self.scores, self.mask)


class SoftmaxMaskCompare(BookWidget):
    """One reader's row of scores: mask-then-softmax (sums to 1) beside softmax-then-zero (< 1).

    Sources after ``reader`` are the future; the slider sets their score, ``future_score``.
    """

    _esm = esm("softmax_compare.js")
    tokens = t.List(t.Unicode()).tag(sync=True)
    scores = t.List(t.Float()).tag(sync=True)
    reader = t.Int(2).tag(sync=True)
    future_score = t.Float(3.0).tag(sync=True)

    def __init__(self, scores=(1.2, 0.4, 2.0, 3.0, 3.0), reader=2, future_score=3.0, tokens=LESSON_ANSWER, **kwargs):
        tokens = [str(x) for x in tokens]
        scores = [float(x) for x in scores]
        if len(scores) != len(tokens):
            raise ValueError(f"{len(scores)} scores for {len(tokens)} tokens: give one score per token")
        super().__init__(tokens=tokens, scores=scores, reader=reader, future_score=future_score, **kwargs)

    @t.validate("reader")
    def _check_reader(self, proposal):
        if not 0 <= proposal["value"] < len(self.scores or self.tokens):
            raise t.TraitError(f"reader must be in [0, {len(self.tokens) - 1}], got {proposal['value']}")
        return proposal["value"]

    def row(self) -> list[float]:
        return future_row(self.scores, self.reader, self.future_score)

    def mask_then_softmax(self) -> list[float]:
        return mask_then_softmax(self.row(), self.reader)

    def softmax_then_zero(self) -> list[float]:
        return softmax_then_zero(self.row(), self.reader)


class CrossAttentionExplorer(BookWidget):
    """Shapes of one cross-attention for answer length Ka and question length Kq, and the grid of A.

    Hovering cell (i, j) reads "answer position i reads question position j"; clicking stores it in
    ``selected``. ``swap_q`` takes Q from the encoder instead, giving A of shape (N, Kq, Ka).
    """

    _esm = esm("cross_attention.js")
    Ka = t.Int(5).tag(sync=True)
    Kq = t.Int(9).tag(sync=True)
    swap_q = t.Bool(False).tag(sync=True)
    selected = t.List(t.Int(), default_value=[3, 7]).tag(sync=True)  # the lesson's A[:, 3, 7]
    answer_tokens = t.List(t.Unicode(), default_value=list(LESSON_ANSWER)).tag(sync=True)
    question_tokens = t.List(t.Unicode(), default_value=list(LESSON_QUESTION)).tag(sync=True)
    max_len = t.Int(12).tag(sync=True)

    def __init__(self, Ka=5, Kq=9, **kwargs):
        super().__init__(Ka=Ka, Kq=Kq, **kwargs)

    @t.validate("Ka", "Kq")
    def _check_len(self, proposal):
        v = proposal["value"]
        if not 1 <= v <= self.max_len:
            raise t.TraitError(f"{proposal['trait'].name} must be in [1, {self.max_len}], got {v}")
        return v

    def shapes(self) -> dict[str, tuple]:
        return cross_attention_shapes(self.Ka, self.Kq, self.swap_q)

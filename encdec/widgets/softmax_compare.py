"""Mask before softmax, or after? The figure of chapter 11 (``softmax_compare.js``).

``mask_then_softmax`` (the right order, the row sums to 1) and ``softmax_then_zero`` (the wrong
one, the row sums to less) are the Python twins of what ``softmax_compare.js`` draws.
"""

from __future__ import annotations

from collections.abc import Sequence

import traitlets as t

from ._base import LESSON_DECODER_INPUT, BookWidget, masked_softmax_row, softmax


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


class SoftmaxMaskCompare(BookWidget):
    """One reader's row of scores: mask-then-softmax (sums to 1) beside softmax-then-zero (< 1).

    Sources after ``reader`` are the future; the slider sets their score, ``future_score``. The
    tokens are by default the decoder's input ``BOS POSITIVE 0 4`` (never ``EOS``), so the last
    reader has no future and both orders agree there.
    """

    _section = "softmax_compare"
    tokens = t.List(t.Unicode()).tag(sync=True)
    scores = t.List(t.Float()).tag(sync=True)
    reader = t.Int(2).tag(sync=True)
    future_score = t.Float(3.0).tag(sync=True)

    def __init__(self, scores=(1.0, 0.5, 2.0, 3.0), reader=2, future_score=3.0, tokens=LESSON_DECODER_INPUT, **kwargs):
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

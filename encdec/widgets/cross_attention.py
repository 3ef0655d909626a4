"""Cross-attention's shapes and its grid of weights, the figure of chapter 11 (``cross_attention.js``).

``cross_attention_shapes`` is the Python twin of the shapes ``cross_attention.js`` shows.
"""

from __future__ import annotations

import traitlets as t

from ._base import LESSON_ANSWER, LESSON_QUESTION, BookWidget, esm


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


class CrossAttentionExplorer(BookWidget):
    """Shapes of one cross-attention for answer length Ka and question length Kq, and the grid of A.

    Hovering cell (i, j) reads "answer position i reads question position j"; clicking stores it in
    ``selected``. ``swap_q`` takes Q from the encoder instead, giving A of shape (N, Kq, Ka).
    """

    _esm = esm("cross_attention.js")
    _section = "cross_attention"
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

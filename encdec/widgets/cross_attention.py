"""Cross-attention's shapes and its grid of weights, the figure of chapter 11 (``cross_attention.js``).

``cross_attention_shapes`` is the Python twin of the shapes ``cross_attention.js`` shows, and
``example_weights`` of the made-up weights its grid shows where no model's are given.
``CrossAttentionExplorer.from_model`` gives it a trained model's (``attention_maps_of``).
"""

from __future__ import annotations

import math

import traitlets as t

from ._base import LESSON_DECODER_INPUT, LESSON_QUESTION, LESSON_QUESTION_TEXT, BookWidget, softmax


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


def example_weights(rows: int, cols: int) -> list[list[float]]:
    """Made-up weights of an (rows, cols) ``A``, only to show the shape: a softmax over each row of a
    fixed smooth pattern of scores (twin of ``exampleWeights`` in ``cross_attention.js``)."""
    return [softmax([2.0 * math.cos(0.9 * i - 1.3 * j) for j in range(cols)]) for i in range(rows)]


class CrossAttentionExplorer(BookWidget):
    """Shapes of one cross-attention for answer length Ka and question length Kq, and the grid of A.

    Hovering cell (i, j) reads "answer position i reads question position j"; clicking stores it in
    ``selected``. ``swap_q`` takes Q from the encoder instead, giving A of shape (N, Kq, Ka).
    By default Ka = 4: the decoder is fed ``BOS POSITIVE 0 4``, never ``EOS``. The grid shows
    ``weights`` (a model's A, from ``from_model``) at their own shape, and made-up weights
    (``example_weights``) at any other.
    """

    _section = "cross_attention"
    Ka = t.Int(5).tag(sync=True)
    Kq = t.Int(9).tag(sync=True)
    swap_q = t.Bool(False).tag(sync=True)
    selected = t.List(t.Int(), default_value=[3, 7]).tag(sync=True)  # the lesson's A[:, 3, 7]
    answer_tokens = t.List(t.Unicode(), default_value=list(LESSON_DECODER_INPUT)).tag(sync=True)
    question_tokens = t.List(t.Unicode(), default_value=list(LESSON_QUESTION)).tag(sync=True)
    max_len = t.Int(12).tag(sync=True)
    weights = t.List(t.List(t.Float())).tag(sync=True)  # a model's A (Ka rows, Kq columns), or [] for none
    source = t.Unicode("").tag(sync=True)  # whose weights: "trained" (common.source_*), or ""

    def __init__(self, Ka=4, Kq=9, **kwargs):
        super().__init__(Ka=Ka, Kq=Kq, **kwargs)

    @classmethod
    def from_model(cls, model, question_text: str = LESSON_QUESTION_TEXT, **kwargs):
        """The figure on a model's cross-attention: its last decoder layer, heads averaged, with the
        decoder fed the model's own greedy answer shifted (the lesson's ``BOS POSITIVE 0 4``)."""
        from .attention_maps import attention_maps_of

        data = attention_maps_of(model, question_text)
        heads = data["maps"]["cross"][-1]  # (H, Ka, Kq)
        A = [
            [round(sum(h[i][j] for h in heads) / len(heads), 4) for j in range(len(heads[0][0]))]
            for i in range(len(heads[0]))
        ]
        kwargs.setdefault("source", "trained")
        return cls(
            Ka=len(A),
            Kq=len(A[0]),
            weights=A,
            answer_tokens=data["answer"][:-1],
            question_tokens=data["question"],
            **kwargs,
        )

    def shown_weights(self) -> list[list[float]]:
        """The numbers the grid shows: ``weights`` at their shape (Q from the decoder), else made up."""
        rows, cols = self.shapes()["A"][1:]
        if not self.swap_q and self.weights and (len(self.weights), len(self.weights[0])) == (rows, cols):
            return self.weights
        return example_weights(rows, cols)

    @t.validate("Ka", "Kq")
    def _check_len(self, proposal):
        v = proposal["value"]
        if not 1 <= v <= self.max_len:
            raise t.TraitError(f"{proposal['trait'].name} must be in [1, {self.max_len}], got {v}")
        return v

    def shapes(self) -> dict[str, tuple]:
        return cross_attention_shapes(self.Ka, self.Kq, self.swap_q)

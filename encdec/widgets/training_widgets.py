"""Figures for chapter 12: target shift and teacher forcing, and the cross-entropy worked example."""

from __future__ import annotations

import traitlets as t

from ..data import VOCAB
from ._base import BookWidget, esm
from .numerics import CE_CORRECT, CE_REFERENCE, CE_RIVAL, LESSON_ANSWER, cross_entropy_example, teacher_forcing_table


class ShiftTeacherForcing(BookWidget):
    """Decoder input, label and readable answer tokens per position; leaks light up.

    Turn off ``shift`` and position t's input is its own label; turn off ``causal_mask`` and
    positions read later ground-truth tokens.
    """

    _esm = esm("shift_teacher_forcing.js")
    tokens = t.List(t.Unicode(), default_value=list(LESSON_ANSWER)).tag(sync=True)
    shift = t.Bool(True).tag(sync=True)
    causal_mask = t.Bool(True).tag(sync=True)

    def table(self) -> list[dict]:
        return teacher_forcing_table(self.tokens, self.shift, self.causal_mask)


class CrossEntropySlider(BookWidget):
    """P(correct) -> loss -log p and the gradient p - one_hot for every vocabulary token."""

    _esm = esm("cross_entropy.js")
    p_correct = t.Float(CE_REFERENCE["p_correct"]).tag(sync=True)
    vocab = t.List(t.Unicode(), default_value=list(VOCAB)).tag(sync=True)
    correct = t.Unicode(CE_CORRECT).tag(sync=True)
    rival = t.Unicode(CE_RIVAL).tag(sync=True)
    rival_reference = t.Float(CE_REFERENCE["p_rival"]).tag(sync=True)
    p_reference = t.Float(CE_REFERENCE["p_correct"]).tag(sync=True)

    def __init__(self, p_correct=0.20, **kwargs):
        super().__init__(p_correct=p_correct, **kwargs)

    @t.validate("p_correct")
    def _check_p(self, proposal):
        p = proposal["value"]
        if not 0.0 < p < 1.0:
            raise t.TraitError(f"p_correct must be strictly between 0 and 1, got {p}")
        return p

    def example(self) -> dict:
        return cross_entropy_example(self.p_correct)

"""The cross-entropy worked example of chapter 12 (``cross_entropy.js``): P(correct) -> loss, gradient.

``cross_entropy_example`` is the Python twin of ``ceExample`` in the JS file.
"""

from __future__ import annotations

import math

import traitlets as t

from ..data import VOCAB
from ._base import BookWidget

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
    others = [tok for tok in VOCAB if tok not in (CE_CORRECT, CE_RIVAL)]
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


class CrossEntropySlider(BookWidget):
    """P(correct) -> loss -log p and the gradient p - one_hot for every vocabulary token."""

    _section = "cross_entropy"
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

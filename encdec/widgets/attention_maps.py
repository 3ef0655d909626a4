"""The attention map viewer of chapter 11 (``attention_maps.js``): a model's attention, as heatmaps.

``attention_maps_of`` runs the real model once in Python (``AttentionMapViewer.from_model``) and
records every map; the browser only draws the recorded numbers, so the static book needs no
kernel. Without a model the figure shows an untrained one (fixed seed) on the lesson's example.
"""

from __future__ import annotations

import traitlets as t

from ..data import VOCAB
from ._base import LESSON_QUESTION_TEXT, BookWidget, question_ids

ATTENTION_KINDS = ("encoder_self", "decoder_self", "cross")


def attention_maps_of(model, question_text: str = LESSON_QUESTION_TEXT, max_new_tokens: int = 4) -> dict:
    """Teacher-forced forward on the question and the model's own greedy answer; every map.

    Returns ``question`` and ``answer`` tokens (the decoder reads ``answer[:-1]``) and ``maps``:
    for each kind of ``ATTENTION_KINDS`` a nested list [layer][head][row][column] of weights,
    taken from each ``MultiHeadAttention.last_attention`` (rounded to 4 decimals).
    """
    import torch

    from ..generate import greedy_decode

    ques = question_ids(question_text)  # (1, Kq)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            ans = greedy_decode(model, ques, max_new_tokens)  # (1, Ka)
            model(ques, model.positions(ques.shape[1]), ans, model.positions(ans.shape[1]))
    finally:
        model.train(was_training)

    def grab(mha) -> list:
        return torch.round(mha.last_attention[0], decimals=4).tolist()  # (H, Lq, Lk)

    return {
        "question": [VOCAB[i] for i in ques[0].tolist()],
        "answer": [VOCAB[i] for i in ans[0].tolist()],
        "maps": {
            "encoder_self": [grab(layer.attention_self) for layer in model.encoder.layers],  # (L, H, Kq, Kq)
            "decoder_self": [grab(layer.attention_self) for layer in model.decoder.layers],  # (L, H, Ka-1, Ka-1)
            "cross": [grab(layer.attention_cross) for layer in model.decoder.layers],  # (L, H, Ka-1, Kq)
        },
    }


class AttentionMapViewer(BookWidget):
    """Heatmaps of a model's attention on one question: pick encoder self, decoder self or cross
    attention, a layer and a head. Rows are readers (queries), columns sources (keys)."""

    _section = "attention_maps"
    question = t.List(t.Unicode()).tag(sync=True)
    answer = t.List(t.Unicode()).tag(sync=True)
    maps = t.Dict().tag(sync=True)
    kind = t.Unicode("cross").tag(sync=True)
    layer = t.Int(0).tag(sync=True)
    head = t.Int(0).tag(sync=True)
    source = t.Unicode("").tag(sync=True)  # as PrefillDecodeStepper.source

    def __init__(self, question=None, answer=None, maps=None, **kwargs):
        if maps is None:  # no model given: an untrained model (fixed seed) on the lesson's example
            data = attention_maps_of(_untrained_model())
            question, answer, maps = data["question"], data["answer"], data["maps"]
            kwargs.setdefault("source", "untrained")
        if set(maps) != set(ATTENTION_KINDS):
            raise ValueError(f"maps must have the keys {ATTENTION_KINDS}, got {sorted(maps)}")
        super().__init__(question=list(question), answer=list(answer), maps=maps, **kwargs)

    @classmethod
    def from_model(cls, model, question_text: str = LESSON_QUESTION_TEXT, **kwargs):
        kwargs.setdefault("source", "trained")
        return cls(**attention_maps_of(model, question_text), **kwargs)

    @t.validate("kind")
    def _check_kind(self, proposal):
        if proposal["value"] not in ATTENTION_KINDS:
            raise t.TraitError(f"kind must be one of {ATTENTION_KINDS}, got {proposal['value']!r}")
        return proposal["value"]

    def current(self) -> list[list[float]]:
        """The map on show: rows are readers, columns sources."""
        return self.maps[self.kind][self.layer][self.head]


def _untrained_model():
    import torch

    from ..model import Transformer

    with torch.random.fork_rng():  # a fixed picture without touching the caller's random state
        torch.manual_seed(0)
        return Transformer().eval()

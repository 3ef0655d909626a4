"""Figures that show the trained model (chapters 12 and 13): the prefill/decode stepper and
the attention map viewer. ``from_model`` runs the real model in Python once; the browser only
replays the recorded numbers, so the static book needs no kernel.
"""

from __future__ import annotations

import traitlets as t

from ..data import VOCAB
from ._base import BookWidget, esm
from .numerics import LESSON_ANSWER, LESSON_QUESTION, LESSON_QUESTION_TEXT

ATTENTION_KINDS = ("encoder_self", "decoder_self", "cross")


def _question_ids(question_text: str):
    import torch

    from ..data import encode_question

    return torch.tensor([encode_question(question_text)], dtype=torch.long)  # (1, Kq)


def decode_trace(
    model, question_text: str = LESSON_QUESTION_TEXT, max_new_tokens: int | None = None, prefix: str = "BOS"
) -> dict:
    """Greedy-decode one question with ``encdec.generate`` and record what each step did.

    The question goes to the encoder (once). Step 1 is the decoder's prefill: every token of the
    known answer ``prefix`` (``BOS`` alone, or a longer forced prefix such as ``BOS POSITIVE``)
    in one pass under the causal mask; each later step feeds only the newest token.
    ``max_new_tokens`` defaults to filling an answer of the training length (5 tokens).
    Returns the question, the prefix and the produced tokens (up to the first EOS), the
    probability of each produced token, and per step the length of every decoder layer's self-
    and cross-attention KV cache, read from real ``KVCache`` objects.
    """
    import torch

    from ..attention import get_subsequent_mask
    from ..data import ANSWER_LEN, encode
    from ..generate import greedy_decode, new_caches

    ques = _question_ids(question_text)  # (1, Kq)
    prefix_ids = torch.tensor([encode(prefix)], dtype=torch.long)  # (1, P)
    P = prefix_ids.shape[1]
    if P < 1 or VOCAB[int(prefix_ids[0, 0])] != "BOS":
        raise ValueError(f"the answer prefix must start with BOS, got {prefix!r}")
    if max_new_tokens is None:
        max_new_tokens = ANSWER_LEN - P
    if max_new_tokens < 1:
        raise ValueError(f"nothing to generate: prefix {prefix!r} with max_new_tokens={max_new_tokens}")
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            ids = greedy_decode(model, ques, max_new_tokens, prefix=prefix_ids)  # (1, P + max_new_tokens)
            memory = model.encode(ques)  # (1, Kq, M): computed once
            caches = new_caches(model)
            ans_pos = model.positions(ids.shape[1])  # (1, Ka, M)
            steps, probs, self_lens, cross_lens = [], [], [], []
            fed = 0  # answer positions already in the caches
            for last in range(P - 1, ids.shape[1] - 1):
                new = ids[:, fed : last + 1]  # (1, P) at the prefill, then (1, 1)
                mask = get_subsequent_mask(new) if new.shape[1] > 1 else None  # (1, P, P) at the prefill
                x = model.emb_layer(new) + ans_pos[:, fed : last + 1]  # (1, P or 1, M)
                h = model.decoder(x, memory, mask, caches=caches)  # (1, P or 1, M)
                fed = last + 1
                p = torch.softmax(model.proj_to_vocab(h[:, -1]), dim=-1)[0]  # (V,)
                nxt = int(ids[0, last + 1])
                if int(p.argmax()) != nxt:
                    raise RuntimeError("cached stepping disagrees with greedy_decode: the KV cache is broken")
                steps.append(VOCAB[nxt])
                probs.append(round(float(p[nxt]), 4))
                self_lens.append([len(c_self) for c_self, _ in caches])
                cross_lens.append([len(c_cross) for _, c_cross in caches])
                if VOCAB[nxt] == "EOS":
                    break
    finally:
        model.train(was_training)
    return {
        "question": [VOCAB[i] for i in ques[0].tolist()],
        "prefix": [VOCAB[i] for i in prefix_ids[0].tolist()],
        "steps": steps,
        "probs": probs,
        "self_cache_lens": self_lens,
        "cross_cache_lens": cross_lens,
        "num_layers": len(model.decoder.layers),
        "num_heads": model.config.num_heads,
        "emb_dim": model.config.emb_dim,
    }


class PrefillDecodeStepper(BookWidget):
    """Step through greedy generation: prefill, then one new token per decode step.

    The question goes to the encoder, whose memory (Kq, M) is computed once and never changes.
    The decoder's prefill feeds the known answer ``prefix`` (P tokens, ``BOS`` alone by default)
    in one pass and leaves P rows in each layer's self-attention KV cache; each decode step
    feeds one token and adds one row. The cross-attention cache holds the Kq memory rows,
    projected at the prefill. ``step`` is 0 before anything runs.
    """

    _esm = esm("prefill_decode.js")
    question = t.List(t.Unicode()).tag(sync=True)
    prefix = t.List(t.Unicode(), default_value=["BOS"]).tag(sync=True)  # the decoder's prefill input
    steps = t.List(t.Unicode()).tag(sync=True)  # token produced at step 1 (the prefill), 2, ...
    probs = t.List(t.Float()).tag(sync=True)  # its probability (empty without a model)
    self_cache_lens = t.List(t.List(t.Int())).tag(sync=True)  # [step][layer]
    cross_cache_lens = t.List(t.List(t.Int())).tag(sync=True)
    num_layers = t.Int(4).tag(sync=True)
    num_heads = t.Int(4).tag(sync=True)
    emb_dim = t.Int(32).tag(sync=True)
    step = t.Int(0).tag(sync=True)
    source = t.Unicode("the lesson's example").tag(sync=True)

    def __init__(self, question=LESSON_QUESTION, steps=LESSON_ANSWER[1:], num_layers=4, prefix=("BOS",), **kwargs):
        question = [str(x) for x in question]
        steps = [str(x) for x in steps]
        prefix = [str(x) for x in prefix]
        if not steps:
            raise ValueError("steps must name at least one produced token")
        if not prefix or prefix[0] != "BOS":
            raise ValueError(f"the answer prefix must start with BOS, got {prefix}")
        P = len(prefix)  # rows each self-attention cache holds after the prefill
        kwargs.setdefault("self_cache_lens", [[P + s] * num_layers for s in range(len(steps))])
        kwargs.setdefault("cross_cache_lens", [[len(question)] * num_layers for _ in steps])
        super().__init__(question=question, steps=steps, num_layers=num_layers, prefix=prefix, **kwargs)

    @classmethod
    def from_model(
        cls, model, question_text: str = LESSON_QUESTION_TEXT, max_new_tokens: int | None = None, prefix: str = "BOS", **kwargs
    ):
        """The real model's greedy decoding of ``question_text`` after the answer ``prefix``, step by step."""
        trace = decode_trace(model, question_text, max_new_tokens, prefix)
        return cls(source="the trained model", **trace, **kwargs)

    @t.validate("step")
    def _check_step(self, proposal):
        if not 0 <= proposal["value"] <= len(self.steps):
            raise t.TraitError(f"step must be in [0, {len(self.steps)}], got {proposal['value']}")
        return proposal["value"]


def attention_maps(model, question_text: str = LESSON_QUESTION_TEXT, max_new_tokens: int = 4) -> dict:
    """Teacher-forced forward on the question and the model's own greedy answer; every map.

    Returns ``question`` and ``answer`` tokens (the decoder reads ``answer[:-1]``) and ``maps``:
    for each kind of ``ATTENTION_KINDS`` a nested list [layer][head][row][column] of weights,
    taken from each ``MultiHeadAttention.last_attention`` (rounded to 4 decimals).
    """
    import torch

    from ..generate import greedy_decode

    ques = _question_ids(question_text)  # (1, Kq)
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

    _esm = esm("attention_maps.js")
    question = t.List(t.Unicode()).tag(sync=True)
    answer = t.List(t.Unicode()).tag(sync=True)
    maps = t.Dict().tag(sync=True)
    kind = t.Unicode("cross").tag(sync=True)
    layer = t.Int(0).tag(sync=True)
    head = t.Int(0).tag(sync=True)
    source = t.Unicode("").tag(sync=True)

    def __init__(self, question=None, answer=None, maps=None, **kwargs):
        if maps is None:  # no model given: an untrained model (fixed seed) on the lesson's example
            data = attention_maps(_untrained_model())
            question, answer, maps = data["question"], data["answer"], data["maps"]
            kwargs.setdefault("source", "an untrained model (random weights)")
        if set(maps) != set(ATTENTION_KINDS):
            raise ValueError(f"maps must have the keys {ATTENTION_KINDS}, got {sorted(maps)}")
        super().__init__(question=list(question), answer=list(answer), maps=maps, **kwargs)

    @classmethod
    def from_model(cls, model, question_text: str = LESSON_QUESTION_TEXT, **kwargs):
        kwargs.setdefault("source", "the trained model")
        return cls(**attention_maps(model, question_text), **kwargs)

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

"""The prefill/decode stepper of chapter 13 (``prefill_decode.js``): greedy generation step by step.

``decode_trace`` runs the real model once in Python (``PrefillDecodeStepper.from_model``) and
records what each step did; the browser only replays the recorded numbers, so the static book
needs no kernel. Without a model the figure shows the lesson's example.
"""

from __future__ import annotations

import traitlets as t

from ..data import VOCAB
from ._base import LESSON_ANSWER, LESSON_QUESTION, LESSON_QUESTION_TEXT, BookWidget, esm, question_ids, watch_greedy


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
    and cross-attention KV cache, read from real ``KVCache`` objects, and the multiply-adds of the
    step, [encoder, decoder] (the encoder's at the prefill only).
    """
    import torch

    from ..data import ANSWER_LEN, encode

    ques = question_ids(question_text)  # (1, Kq)
    prefix_ids = torch.tensor([encode(prefix)], dtype=torch.long)  # (1, P)
    P = prefix_ids.shape[1]
    if P < 1 or VOCAB[int(prefix_ids[0, 0])] != "BOS":
        raise ValueError(f"the answer prefix must start with BOS, got {prefix!r}")
    if max_new_tokens is None:
        max_new_tokens = ANSWER_LEN - P
    if max_new_tokens < 1:
        raise ValueError(f"nothing to generate: prefix {prefix!r} with max_new_tokens={max_new_tokens}")
    ids, calls = watch_greedy(model, ques, max_new_tokens, prefix_ids)  # P + max_new_tokens ids
    probs_seen = [torch.softmax(call["logits"], dim=-1) for call in calls]  # (V,) per decoder pass
    produced = ids[P : P + len(probs_seen)]  # one token per pass, up to the first EOS
    steps = [VOCAB[i] for i in produced]
    probs = [round(float(p[i]), 4) for p, i in zip(probs_seen, produced)]
    return {
        "question": [VOCAB[i] for i in ques[0].tolist()],
        "prefix": [VOCAB[i] for i in prefix_ids[0].tolist()],
        "steps": steps,
        "probs": probs,
        "self_cache_lens": [call["self_rows"] for call in calls],
        "cross_cache_lens": [call["cross_rows"] for call in calls],
        "work": [[call["work"]["encoder"], call["work"]["decoder"]] for call in calls],
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
    _section = "prefill_decode"
    question = t.List(t.Unicode()).tag(sync=True)
    prefix = t.List(t.Unicode(), default_value=["BOS"]).tag(sync=True)  # the decoder's prefill input
    steps = t.List(t.Unicode()).tag(sync=True)  # token produced at step 1 (the prefill), 2, ...
    probs = t.List(t.Float()).tag(sync=True)  # its probability (empty without a model)
    self_cache_lens = t.List(t.List(t.Int())).tag(sync=True)  # [step][layer]
    cross_cache_lens = t.List(t.List(t.Int())).tag(sync=True)
    work = t.List(t.List(t.Int())).tag(sync=True)  # [step][encoder, decoder] multiply-adds (empty without a model)
    num_layers = t.Int(4).tag(sync=True)
    num_heads = t.Int(4).tag(sync=True)
    emb_dim = t.Int(32).tag(sync=True)
    step = t.Int(0).tag(sync=True)
    source = t.Unicode("lesson").tag(sync=True)  # "lesson", "trained" or "untrained" (words in the string tables), or any text

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
        return cls(source="trained", **trace, **kwargs)

    @t.validate("step")
    def _check_step(self, proposal):
        if not 0 <= proposal["value"] <= len(self.steps):
            raise t.TraitError(f"step must be in [0, {len(self.steps)}], got {proposal['value']}")
        return proposal["value"]

"""One attention score at a time, the figure of chapter 11 (``score_explorer.js``).

For the trained ``modern`` checkpoint and a question of the task, the reader picks an attention
(encoder self, decoder self, cross), a layer, a head, a query position and a key position; the
figure shows that head's query and key vectors (Dh numbers each), their products and their sum
(the dot product), the division by sqrt(Dh), and the query's whole row of scaled scores with its
softmax, the keys the causal mask forbids shown as masked (``finfo.min`` before the softmax, as
``encdec.attention.masked_softmax`` fills them). The page computes it: ``model_forward.js`` runs the
checkpoint on the site's weights, which load when the reader first asks for another question,
attention or layer; until then the figure draws the numbers of ``score_parts`` it carries for its
first setting (a few kB), so the static page and the PDF show it whole with no weights.

``score_parts`` and ``score_step`` are the Python twins of ``attentionParts`` and ``scoreStep``:
the package's own model, teacher-forced on the question and its true answer as training feeds it,
with every attention's projected Q and K read through forward hooks on its ``q_proj`` and ``k_proj``.
"""

from __future__ import annotations

import math

import traitlets as t

from ..data import VOCAB, encode_answer
from ._base import LESSON_QUESTION_TEXT, BookWidget, masked_softmax_row
from .ask_model import parse_question
from .attention_maps import ATTENTION_KINDS
from .export_weights import figure_weights

PRESET = "modern"  # the checkpoint the figure opens (its weights are the site's, shared with AskTheModel)
#: Questions offered in the figure's list: the lesson's example, the one chapter 11 compares it with,
#: and a sum whose answer is negative.
EXAMPLES = (LESSON_QUESTION_TEXT, "BOS POSITIVE 12 add POSITIVE 07 EOS", "BOS NEGATIVE 45 add POSITIVE 19 EOS")
#: What the figure opens on: the last decoder layer's cross-attention, the units row (input ``0``,
#: which predicts ``4``) reading the units digit ``0`` of 30 (question slot 3), in head 2, which splits
#: that row between slot 3 and ``subtract`` (tests/test_score_explorer.py holds the checkpoint to it).
FIRST = {"kind": "cross", "layer": 1, "head": 1, "query": 2, "key": 3}


def score_parts(model, question_ids) -> dict:
    """The projected queries and keys of every attention of ``model`` on one question, teacher-forced.

    The decoder is fed the question's true answer shifted (``BOS sign d d``, never ``EOS``), at the
    positions of a five-token answer, as in training. Returns ``question`` and ``answer`` ids and, for
    each kind of ``ATTENTION_KINDS``, a list over layers of ``{"q": (Lq, M), "k": (Lk, M), "weights":
    (H, Lq, Lk)}`` as nested lists: q and k the outputs of ``q_proj`` and ``k_proj``, the weights the
    module's own ``last_attention``.
    """
    import torch

    answer = true_answer(question_ids)  # (Ka,) = BOS sign d d EOS
    stacks = {
        "encoder_self": [layer.attention_self for layer in model.encoder.layers],
        "decoder_self": [layer.attention_self for layer in model.decoder.layers],
        "cross": [layer.attention_cross for layer in model.decoder.layers],
    }
    seen: dict[int, dict] = {}

    def keep(mha, name):
        return lambda module, args, out: seen.setdefault(id(mha), {}).__setitem__(name, out[0].tolist())  # (L, M)

    hooks = [
        proj.register_forward_hook(keep(mha, name))
        for layers in stacks.values()
        for mha in layers
        for name, proj in (("q", mha.q_proj), ("k", mha.k_proj))
    ]
    ques = torch.tensor([list(question_ids)])  # (1, Kq)
    ans = torch.tensor([answer])  # (1, Ka)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            model(ques, model.positions(ques.shape[1]), ans, model.positions(ans.shape[1]))  # (1, Ka-1, V)
    finally:
        for hook in hooks:
            hook.remove()
        model.train(was_training)
    return {
        "question": list(question_ids),
        "answer": answer,
        **{
            kind: [{**seen[id(mha)], "weights": mha.last_attention[0].tolist()} for mha in layers]  # (H, Lq, Lk)
            for kind, layers in stacks.items()
        },
    }


def score_step(q, k, heads: int, head: int, query: int, key: int, causal: bool) -> dict:
    """One query and one key in one head (twin of ``scoreStep``): q (Lq, M) and k (Lk, M) projected.

    Returns the head's slices ``q`` and ``k`` (Dh,), their ``products`` and their sum ``dot``, ``scale``
    = sqrt(Dh) and ``score`` = dot / scale; the query's whole row ``scores`` (Lk,), the same for every
    key; ``masked``, the keys the causal mask forbids (j > query, decoder self-attention only), and
    ``weights``, the row's softmax with those keys filled with the most negative float first (0 for them),
    written as exp(score - ``top``) / ``total``.
    """
    Dh = len(q[0]) // heads
    cols = slice(head * Dh, (head + 1) * Dh)
    qv, kv = q[query][cols], k[key][cols]
    scale = math.sqrt(Dh)
    scores = [sum(a * b for a, b in zip(qv, row[cols])) / scale for row in k]  # (Lk,)
    masked = [causal and j > query for j in range(len(k))]  # mask before softmax: the future leaves the row
    products = [a * b for a, b in zip(qv, kv)]
    top = max(s for s, m in zip(scores, masked) if not m)
    return {
        "q": qv,
        "k": kv,
        "products": products,
        "dot": sum(products),
        "scale": scale,
        "score": sum(products) / scale,
        "scores": scores,
        "masked": masked,
        "weights": masked_softmax_row(scores, masked),
        "top": top,  # the largest score the query may read, and the softmax's denominator
        "total": sum(math.exp(s - top) for s, m in zip(scores, masked) if not m),
    }


def packed(rows) -> str:
    """Rows of numbers as little-endian float32 in base64 (``exportedFloats`` of model_forward.js reads it)."""
    import base64

    import numpy as np

    return base64.b64encode(np.asarray(rows, dtype="<f4").tobytes()).decode("ascii")


def true_answer(question_ids) -> list[int]:
    """The answer ids ``BOS sign d d EOS`` of a question's ids (twin of task.js's ``trueAnswer``)."""
    from ..data import answer_text

    words = [VOCAB[i] for i in question_ids]  # BOS sign a a op sign b b EOS

    def operand(k):
        return (-1 if words[k] == "NEGATIVE" else 1) * int(words[k + 1] + words[k + 2])

    a, b = operand(1), operand(5)
    return encode_answer(answer_text(a + b if words[4] == "add" else a - b))


class ScoreExplorer(BookWidget):
    """One query, one key, one head of the trained model: q, k, their products, the dot product, the
    scale and the row's softmax, computed in the page.

    ``kind`` is one of ``ATTENTION_KINDS``; ``layer``, ``head``, ``query`` and ``key`` count from 0 (the
    figure shows layers and heads from 1, as the book does). ``shown`` carries ``score_parts``' queries and
    keys of one question, kind and layer (the first setting): the page draws them with no weights.
    """

    _section = "score_explorer"
    weights = t.Dict().tag(sync=True)  # {preset: export}; empty when weights_src names the site's file
    weights_src = t.Unicode("").tag(sync=True)  # the built book's weights script (as AskTheModel's)
    preset = t.Unicode(PRESET).tag(sync=True)
    question = t.Unicode(LESSON_QUESTION_TEXT).tag(sync=True)  # as the reader typed or picked it
    examples = t.List(t.Unicode(), default_value=list(EXAMPLES)).tag(sync=True)
    kind = t.Unicode(FIRST["kind"]).tag(sync=True)
    layer = t.Int(FIRST["layer"]).tag(sync=True)
    head = t.Int(FIRST["head"]).tag(sync=True)
    query = t.Int(FIRST["query"]).tag(sync=True)
    key = t.Int(FIRST["key"]).tag(sync=True)
    shown = t.Dict().tag(sync=True)  # the first setting's numbers (score_parts), drawn before any weights
    source = t.Unicode("trained").tag(sync=True)

    def __init__(self, weights: dict | None = None, **kwargs):
        _, weights, site = figure_weights((PRESET,), weights)
        if site:
            kwargs.setdefault("weights_src", site)
        super().__init__(weights=weights, **kwargs)
        self.shown = self._first_numbers()

    def _first_numbers(self) -> dict:
        """What the page draws before it has weights: the queries and keys of this question, kind and
        layer as the model computed them, float32 in base64 (``packed``: 4.4 kB, where six decimals took
        8.9 kB), with the model's shape."""
        import torch

        from ..train import load_run

        model, _ = load_run(self.preset)
        parts = self.parts(model)
        c = model.config
        layer = parts[self.kind][self.layer]
        return {
            "question": parts["question"],
            "answer": parts["answer"],
            "kind": self.kind,
            "layer": self.layer,
            "q": packed(layer["q"]),  # (Lq, M)
            "k": packed(layer["k"]),  # (Lk, M)
            "width": c.emb_dim,
            "heads": c.num_heads,
            "fill": torch.finfo(torch.float32).min,  # what masked_softmax puts in a masked score, as the figure says
            "layers": {"encoder_self": c.num_enc_layers, "decoder_self": c.num_dec_layers, "cross": c.num_dec_layers},
        }

    def parts(self, model) -> dict:
        """``score_parts`` of ``model`` on this figure's question."""
        ids, error = parse_question(self.question)
        if error:
            raise ValueError(f"not a question of the task: {self.question!r} ({error[0]})")
        return score_parts(model, ids)

    def step(self, model) -> dict:
        """``score_step`` of ``model`` at this figure's setting: what the page shows."""
        layer = self.parts(model)[self.kind][self.layer]
        causal = self.kind == "decoder_self"
        return score_step(layer["q"], layer["k"], model.config.num_heads, self.head, self.query, self.key, causal)

    @t.validate("kind")
    def _check_kind(self, proposal):
        if proposal["value"] not in ATTENTION_KINDS:
            raise t.TraitError(f"kind must be one of {ATTENTION_KINDS}, got {proposal['value']!r}")
        return proposal["value"]

    @t.validate("layer", "head", "query", "key")
    def _check_index(self, proposal):
        if proposal["value"] < 0:
            raise t.TraitError(f"{proposal['trait'].name} counts from 0, got {proposal['value']}")
        return proposal["value"]

"""The prefill/decode stepper of chapter 13 (``prefill_decode.js``): generation step by step.

``decode_trace`` runs the real model once in Python (``PrefillDecodeStepper.from_model``) and
records what each step did; the browser replays the recorded numbers, so the static book needs no
kernel. Without a model the figure shows the lesson's example. Made from a shipped checkpoint
(``PrefillDecodeStepper.from_run``), the figure also runs the model in the page (``model_forward.js``
on the weights ``export_weights`` exports, loaded on the reader's first change of setting): any
question, a forced answer prefix of 1 to 4 tokens, greedy or sampled decoding (temperature, top-k,
top-p, a seed), the distribution each step draws from and the token it takes.

The Python twins of what the page computes: ``decode_trace`` (greedy, the package's own cached
loop), ``sample_trace`` (sampling: each step's distribution from ``encdec.sampling.sampling_probs``,
the draw from ``mulberry32``, the page's seeded generator, whose numbers are not torch's) and
``step_work`` (each step's multiply-adds from the shapes, which ``watch_greedy`` counts through hooks).
"""

from __future__ import annotations

import traitlets as t

from ..data import VOCAB
from ._base import LESSON_ANSWER, LESSON_QUESTION, LESSON_QUESTION_TEXT, BookWidget, question_ids, watch_greedy
from .ask_model import EXAMPLES
from .export_weights import PRESETS, figure_weights

MODES = ("greedy", "sample")
_U32 = 0xFFFFFFFF


def mulberry32(seed: int):
    """The page's seeded random numbers in [0, 1) (``mulberry32`` in prefill_decode.js), an endless
    iterator: the same seed gives the page's numbers, bit for bit. Not torch's generator."""
    a = seed & _U32
    while True:
        a = (a + 0x6D2B79F5) & _U32
        x = a
        x = ((x ^ (x >> 15)) * (x | 1)) & _U32
        x ^= (x + (((x ^ (x >> 7)) * (x | 61)) & _U32)) & _U32
        yield ((x ^ (x >> 14)) & _U32) / 4294967296


def draw_token(probs, u: float) -> int:
    """The first token whose cumulative probability passes ``u`` (inverse CDF, vocabulary order); the
    last token with any mass if rounding leaves ``u`` beyond the total. Twin of ``drawToken``."""
    cum, last = 0.0, 0
    for v, p in enumerate(probs):
        if p > 0:
            last = v
        cum += p
        if u < cum:
            return v
    return last


def step_work(config, Kq: int, t: int, T: int, prefill: bool) -> list[int]:
    """[encoder, decoder] multiply-adds of one decoder call of ``t`` new positions with ``T`` cached rows
    after it (the encoder's and the cross-attention K, V projection at the prefill only), from the
    shapes: what ``watch_greedy`` counts through hooks, and the twin of ``stepWork``."""
    M, F, V = config.emb_dim, config.feedforward_dim, config.vocab_size
    encoder = config.num_enc_layers * (4 * Kq * M * M + 2 * Kq * Kq * M + 2 * Kq * M * F) if prefill else 0
    per_layer = (
        4 * t * M * M
        + 2 * t * T * M  # self-attention: Q, K, V, out; scores and values over T rows
        + 2 * t * M * M
        + 2 * t * Kq * M
        + (2 * Kq * M * M if prefill else 0)  # cross: Q, out; over Kq; K, V once
        + 2 * t * M * F
    )  # the MLP
    return [encoder, config.num_dec_layers * per_layer + M * V]  # + the readout of the last position


def sample_trace(
    model,
    question_text: str = LESSON_QUESTION_TEXT,
    prefix: str = "BOS",
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    seed: int = 0,
) -> dict:
    """A sampled generation as the page runs it, in PyTorch: the twin of ``pageRun`` in sample mode.

    Each step's distribution is ``sampling_probs`` of the model's logits at the prefix's last position
    (teacher-forced over the tokens so far, at the positions of a 5-token answer, as the cached loop
    computes them); the draw is ``draw_token`` with the next number of ``mulberry32(seed)``. Stops at
    EOS or after an answer of 5 tokens. Returns ``decode_trace``'s keys, and per step in ``dists`` the
    model's distribution after the temperature (``p``), the one drawn from (``q``) and the number (``u``).
    """
    import torch

    from ..data import ANSWER_LEN, EOS_ID, encode
    from ..sampling import sampling_probs

    ques = question_ids(question_text)  # (1, Kq)
    tokens = encode(prefix)
    P, Kq, L = len(tokens), ques.shape[1], len(model.decoder.layers)
    if P < 1 or VOCAB[tokens[0]] != "BOS" or P >= ANSWER_LEN:
        raise ValueError(f"the answer prefix must start with BOS and leave a token to draw, got {prefix!r}")
    random = mulberry32(seed)
    out = {"steps": [], "probs": [], "dists": [], "self_cache_lens": [], "cross_cache_lens": [], "work": []}
    was_training = model.training
    model.eval()
    with torch.no_grad():
        while len(tokens) < ANSWER_LEN and EOS_ID not in tokens:
            T = len(tokens)
            ans = torch.tensor([tokens + [EOS_ID] * (ANSWER_LEN - T)])  # (1, Ka): what follows T is never read
            logits = model(ques, model.positions(Kq), ans, model.positions(ANSWER_LEN))[:, T - 1].double()  # (1, V)
            p = torch.softmax(logits / temperature if temperature > 0 else logits, dim=-1)[0]  # (V,)
            q = sampling_probs(logits, temperature, top_k, top_p)[0]  # (V,)
            u = next(random)
            token = draw_token(q.tolist(), u)
            out["steps"].append(VOCAB[token])
            out["probs"].append(float(q[token]))
            out["dists"].append({"p": p.tolist(), "q": q.tolist(), "u": u})
            out["self_cache_lens"].append([T] * L)  # the prefill leaves P rows, each decode step one more
            out["cross_cache_lens"].append([Kq] * L)  # the memory's rows, projected once
            out["work"].append(step_work(model.config, Kq, P if T == P else 1, T, T == P))
            tokens.append(token)
    model.train(was_training)
    return {
        "question": [VOCAB[i] for i in ques[0].tolist()],
        "prefix": prefix.split(),
        **out,
        "num_layers": L,
        "num_heads": model.config.num_heads,
        "emb_dim": model.config.emb_dim,
    }


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
    probs_seen = [torch.softmax(call["logits"].double(), dim=-1) for call in calls]  # (V,) per decoder pass
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
        "dists": [{"p": p.tolist(), "q": None, "u": None} for p in probs_seen],  # greedy takes the argmax of p
        "num_layers": len(model.decoder.layers),
        "num_heads": model.config.num_heads,
        "emb_dim": model.config.emb_dim,
    }


class PrefillDecodeStepper(BookWidget):
    """Step through generation: prefill, then one new token per decode step.

    The question goes to the encoder, whose memory (Kq, M) is computed once and never changes.
    The decoder's prefill feeds the known answer ``prefix`` (P tokens, ``BOS`` alone by default)
    in one pass and leaves P rows in each layer's self-attention KV cache; each decode step
    feeds one token and adds one row. The cross-attention cache holds the Kq memory rows,
    projected at the prefill. ``step`` is 0 before anything runs.

    ``preset`` names the shipped checkpoint the page may run itself ("" replays only: the lesson's
    example, ``from_model``); ``from_run`` sets it, with the settings the reader can change: the
    question (one of ``examples`` or any), the prefix, ``mode`` ("greedy" or "sample") and, when
    sampling, ``temperature``, ``top_k`` and ``top_p`` (None: not applied) and ``seed``.
    """

    _section = "prefill_decode"
    question = t.List(t.Unicode()).tag(sync=True)
    prefix = t.List(t.Unicode(), default_value=["BOS"]).tag(sync=True)  # the decoder's prefill input
    steps = t.List(t.Unicode()).tag(sync=True)  # token produced at step 1 (the prefill), 2, ...
    probs = t.List(t.Float()).tag(sync=True)  # its probability in the distribution it came from (empty without a model)
    dists = t.List(t.Dict()).tag(sync=True)  # per step {"p", "q", "u"}: sample_trace (empty without a model)
    self_cache_lens = t.List(t.List(t.Int())).tag(sync=True)  # [step][layer]
    cross_cache_lens = t.List(t.List(t.Int())).tag(sync=True)
    work = t.List(t.List(t.Int())).tag(sync=True)  # [step][encoder, decoder] multiply-adds (empty without a model)
    num_layers = t.Int(4).tag(sync=True)
    num_heads = t.Int(4).tag(sync=True)
    emb_dim = t.Int(32).tag(sync=True)
    step = t.Int(0).tag(sync=True)
    source = t.Unicode("lesson").tag(
        sync=True
    )  # "lesson", "trained", "untrained", "page" (words in the string tables), or any text
    # the in-page model (from_run): which checkpoint, its weights or the built site's weights script
    preset = t.Unicode("").tag(sync=True)
    presets = t.List(t.Unicode()).tag(sync=True)
    weights = t.Dict().tag(sync=True)  # {preset: export}; empty when weights_src names the site's file
    weights_src = t.Unicode("").tag(sync=True)
    examples = t.List(t.Unicode()).tag(sync=True)  # questions offered in the figure's list
    mode = t.Unicode("greedy").tag(sync=True)
    temperature = t.Float(1.0).tag(sync=True)
    top_k = t.Int(None, allow_none=True).tag(sync=True)
    top_p = t.Float(None, allow_none=True).tag(sync=True)
    seed = t.Int(0).tag(sync=True)

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
        cls,
        model,
        question_text: str = LESSON_QUESTION_TEXT,
        max_new_tokens: int | None = None,
        prefix: str = "BOS",
        **kwargs,
    ):
        """The real model's greedy decoding of ``question_text`` after the answer ``prefix``, step by step."""
        trace = decode_trace(model, question_text, max_new_tokens, prefix)
        return cls(source="trained", **trace, **kwargs)

    @classmethod
    def from_run(
        cls,
        preset: str = "modern",
        question_text: str = LESSON_QUESTION_TEXT,
        prefix: str = "BOS",
        mode: str = "greedy",
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int = 0,
        presets=PRESETS,
        weights: dict | None = None,
        **kwargs,
    ):
        """A shipped checkpoint's generation, recorded here (``decode_trace`` or ``sample_trace``) for the
        figure's first view, and run in the page on whatever the reader chooses next."""
        from ..train import load_run

        presets, weights, site = figure_weights(presets, weights)
        if preset not in presets:
            raise ValueError(f"preset must be one of {presets}, got {preset!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        model, _ = load_run(preset)
        trace = (
            decode_trace(model, question_text, None, prefix)
            if mode == "greedy"
            else sample_trace(model, question_text, prefix, temperature, top_k, top_p, seed)
        )
        kwargs.setdefault("examples", list(EXAMPLES))
        return cls(
            source="trained",
            preset=preset,
            presets=presets,
            weights=weights,
            weights_src=site,
            mode=mode,
            temperature=temperature,
            top_k=top_k,
            top_p=top_p,
            seed=seed,
            **trace,
            **kwargs,
        )

    @t.validate("step")
    def _check_step(self, proposal):
        if not 0 <= proposal["value"] <= len(self.steps):
            raise t.TraitError(f"step must be in [0, {len(self.steps)}], got {proposal['value']}")
        return proposal["value"]

    @t.validate("mode")
    def _check_mode(self, proposal):
        if proposal["value"] not in MODES:
            raise t.TraitError(f"mode must be one of {MODES}, got {proposal['value']!r}")
        return proposal["value"]

    @t.validate("temperature")
    def _check_temperature(self, proposal):
        if proposal["value"] < 0:
            raise t.TraitError(f"temperature must be >= 0, got {proposal['value']}")
        return proposal["value"]

    @t.validate("top_k")
    def _check_top_k(self, proposal):
        if proposal["value"] is not None and proposal["value"] < 1:
            raise t.TraitError(f"top_k must be None or >= 1, got {proposal['value']}")
        return proposal["value"]

    @t.validate("top_p")
    def _check_top_p(self, proposal):
        if proposal["value"] is not None and not 0 < proposal["value"] <= 1:
            raise t.TraitError(f"top_p must be None or in (0, 1], got {proposal['value']}")
        return proposal["value"]

    @t.validate("seed")
    def _check_seed(self, proposal):
        if not 0 <= proposal["value"] <= 0xFFFFFFFF:
            raise t.TraitError(f"seed must be in [0, 2**32), got {proposal['value']}")
        return proposal["value"]

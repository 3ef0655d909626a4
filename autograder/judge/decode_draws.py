"""The inputs of the kv_cache decoding checks (chapter 13): models and questions drawn until every
known decoding mistake returns other tokens than the reference, at a clear choice, so that the
tokens alone decide. The token checks' models make one row finish early (``_set_eos_readout``);
the structure runs' are drawn alike (``run_draws.py``). Every draw is made of integers or rounded
coarsely, so every machine builds the same inputs (draws.py)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from encdec import attention as A
from encdec import model as Mdl
from encdec.config import ModelConfig
from encdec.data import BOS_ID, EOS_ID, encode
from encdec.generate import greedy_decode

from . import variants as Var
from .core import gen, randomize_
from .draws import coarse, in_double, normal


def ints(g, lo, hi) -> int:
    return int(torch.randint(lo, hi, (1,), generator=g))


def reference_tokens(inputs) -> np.ndarray:
    """The reference tokens (N, 1 + n): the package's greedy decoding (cached and uncached agree:
    tests/test_generate.py)."""
    return greedy_decode(inputs["model"], inputs["ques"], inputs["n"]).numpy()


def _config(layers: int) -> ModelConfig:
    """A decoding check's model shape: ``layers`` encoder and decoder layers, width 16."""
    return ModelConfig(
        emb_dim=16,
        num_heads=2,
        feedforward_dim=32,
        num_enc_layers=layers,
        num_dec_layers=layers,
        dropout=0.2,
        position_encoding="sinusoid",
    )


def _drawn_model(cfg: ModelConfig, seed: int, attempt: int) -> Mdl.Transformer:
    """The model of one attempt at a check's inputs: random weights from (seed, attempt), the
    embeddings scaled by _EMB_SCALE."""
    model = randomize_(Mdl.Transformer(cfg), seed + 100_003 * attempt)
    with torch.no_grad():
        model.emb_layer.weight.mul_(_EMB_SCALE)
    return model


def build_decode(seed: int, hidden: bool) -> dict:
    """A decoding check's model and questions. The score is the tokens alone (nothing recorded in
    the kernel decides it), so the inputs are drawn until the tokens tell every known mistake apart
    (``_apart``): a readout that follows the decoder's state (``_sharpen_readout``)
    and an EOS that wins at exactly one step of one row, before the last (``_set_eos_readout``)."""
    g = gen(seed)
    layers = 2 if not hidden else ints(g, 2, 4)
    cfg = _config(layers)
    N, n = _SIZES["visible"] if not hidden else (ints(g, *_SIZES["N"]), ints(g, *_SIZES["n"]))
    with one_thread():
        for attempt in range(_ATTEMPTS):
            model = _drawn_model(cfg, seed, attempt)
            ques = torch.randint(0, 16, (N, 9), generator=g)
            drawn = _Drawn.of(model, ques)
            _sharpen_readout(drawn, n, g)
            found = _set_eos_readout(drawn, n, g)  # (the reference tokens, the clear gap) or None
            if found is not None and _apart(Var.decode_variants(model, ques, n), *found):
                return {"model": model, "config": cfg, "ques": ques, "n": n, "dims": {"N": N, "n": n}}
    raise RuntimeError(
        f"kv_cache seed {seed}: no model whose tokens tell the known mistakes apart, with a row that "
        f"finishes early, in {_ATTEMPTS} draws"
    )


# rows and steps: each is another chance for a wrong decoding to return another token
_SIZES = {"visible": (12, 12), "N": (10, 17), "n": (10, 17)}


# token vectors a tenth of their usual length: the decoder's state then follows the positions and
# the prefix more than the newest token, so a wrong position or cache changes the tokens
_EMB_SCALE = 0.1


_ATTEMPTS = 100


_TIE = 1e-3  # the smallest gap between the best and second-best logit a greedy choice may have


_SPLIT = 1.0  # how far the EOS logit is set from the best other logit where a row must finish or not


@dataclass
class _Drawn:
    """One attempt's model (float32), its questions, and what every step of the draw reads again:
    the question's encoding, in float32 and in float64 (``model64``, the model's float64 copy). A draw
    changes only ``proj_to_vocab`` after the model is made, so both encodings and the copy's
    encoder and decoder stay the model's own; float64 logits read the model's current readout
    (``logits64``). Each is bit for bit what encoding again, or copying again, would give."""

    model: object
    ques: Tensor  # (N, Kq)
    memory: Tensor  # (N, Kq, M)
    model64: object
    memory64: Tensor  # (N, Kq, M), float64

    @classmethod
    @torch.no_grad()
    def of(cls, model, ques) -> _Drawn:
        model64 = in_double(model)
        return cls(model, ques, model.encode(ques), model64, model64.encode(ques))

    def logits64(self, h64: Tensor) -> Tensor:
        """The model's readout, in float64, of float64 decoder states (..., M) -> (..., V)."""
        proj = self.model.proj_to_vocab
        return F.linear(h64, proj.weight.double(), proj.bias.double())


@torch.no_grad()
def _states(model, ques, tokens, memory: Tensor | None = None) -> Tensor:
    """Decoder outputs (N, n, M) of each decoding step, computed uncached along ``tokens`` (N, 1+n)
    (``memory``: the question's encoding, when made already)."""
    n = tokens.shape[1] - 1
    memory = model.encode(ques) if memory is None else memory  # (N, Kq, M)
    x = model.emb_layer(tokens[:, :-1]) + model.positions(1 + n)[:, :n]  # (N, n, M)
    return model.decoder(x, memory, A.get_subsequent_mask(tokens[:, :-1]))  # (N, n, M)


def _best_other(logits: Tensor) -> Tensor:
    """The largest logit that is not EOS: (..., V) -> (...)."""
    return torch.cat([logits[..., :EOS_ID], logits[..., EOS_ID + 1 :]], dim=-1).max(dim=-1).values


@torch.no_grad()
def _set_eos_readout(drawn: _Drawn, n, g) -> tuple[Tensor, float] | None:
    """Choose the EOS row of ``proj_to_vocab`` (which ``_sharpen_readout`` left losing everywhere)
    so that EOS wins at one step of one row, before the last step, and nowhere else on the greedy
    path, nor at the step after that EOS (the model would go on with another token there: only
    pick_next keeps the row at EOS). The EOS logit is k (<u, h> - c) on the decoder state h, with
    u pointing from the other states to the chosen one, c halfway between it and the nearest other
    state along u, and k just large enough. The EOS row changes only the EOS logit, so the greedy
    path that never picks EOS stays as it was. Returns the greedy tokens (N, 1 + n) with that row
    and the gap a choice needs to be clear on this model (``_clear``); None (row restored) when no
    step works."""
    model, ques = drawn.model, drawn.ques
    proj = model.proj_to_vocab
    w0, b0 = proj.weight[EOS_ID].clone(), proj.bias[EOS_ID].clone()
    path = greedy_decode(model, ques, n, use_cache=False)  # (N, 1 + n): EOS never wins yet
    # the EOS row divides by a small gap between states: computed in float64 and rounded coarsely,
    # so that every machine builds the same row (draws.py)
    model64, memory64 = drawn.model64, drawn.memory64
    h = _states(model64, ques, path, memory64)  # (N, n, M)
    top = _best_other(drawn.logits64(h))  # (N, n)
    N = h.shape[0]
    for flat in torch.randperm(N * (n - 1), generator=g)[:16].tolist():
        r, s = divmod(flat, n - 1)  # the early row and its EOS step
        fed = path.clone()
        fed[r, s + 1] = EOS_ID
        after = _states(model64, ques, fed, memory64)[r, s + 1]  # (M,): the step after that EOS
        others = torch.ones(N, n, dtype=torch.bool)  # every other state on the path...
        others[r, s:] = False  # ... but the early row's from its EOS on (pick_next keeps EOS there)
        rest = torch.cat([h[others], after[None]])  # (k, M): with the step after the EOS
        rest_top = torch.cat([top[others], _best_other(drawn.logits64(after))[None]])  # (k,)
        u = h[r, s] - rest.mean(dim=0)
        u = u / u.norm()  # (M,)
        gap = float(h[r, s] @ u - (rest @ u).max())
        if gap <= 0:  # the state is not apart from the others along u
            continue
        c = float(h[r, s] @ u) - gap / 2
        # k gap / 2 above the early step's best other logit, and below every other one by _SPLIT
        k = 2 * (max(float(top[r, s]), float(-rest_top.min()), 0.0) + _SPLIT) / gap
        # up to a power of two (rounded up, it only makes EOS win or lose by more): k u is then
        # u's coarse rounding, moved in exponent only
        k = 2.0 ** math.ceil(math.log2(k))
        proj.weight[EOS_ID], proj.bias[EOS_ID] = coarse(k * u), coarse(torch.tensor(-k * c))
        tokens = greedy_decode(model, ques, n, use_cache=False)  # (N, 1 + n): the reference now
        logits = teacher_forced_logits(model, ques, tokens, drawn.memory)  # (n, N, V)
        # a near-tie would let a correct cached decoder, which rounds in another order, pick another token
        clear = _clear(drawn, tokens, logits)
        if _exercises_eos(tokens, logits) and _min_margins(logits).min() >= clear:
            return tokens, clear
    proj.weight[EOS_ID], proj.bias[EOS_ID] = w0, b0
    return None


@torch.no_grad()
def rounding(model, ques, tokens, single: Tensor, drawn: _Drawn | None = None) -> Tensor:
    """How far the float32 step logits ``single`` (n, N, V) along ``tokens`` (N, 1 + n) are from
    the same model's in float64: (n, N, V), the model's own rounding (``drawn``: its float64 copy
    and encoding, when made already)."""
    if drawn is None:
        double = teacher_forced_logits(in_double(model), ques, tokens)  # (n, N, V)
    else:
        h64 = _states(drawn.model64, ques, tokens, drawn.memory64)  # (N, n, M)
        double = drawn.logits64(h64).transpose(0, 1)  # (N, n, V) -> (n, N, V)
    return (single.double() - double).abs()


@torch.no_grad()
def _clear(drawn: _Drawn, tokens, single) -> float:
    """The smallest gap between the best and second-best logit that counts as a clear choice on
    this model: _TIE, or ten times the model's own float rounding along the greedy ``tokens``
    (N, 1 + n) (their float32 logits ``single`` (n, N, V) against float64, the tokens other than
    EOS), whichever is larger."""
    off = rounding(drawn.model, drawn.ques, tokens, single, drawn)  # (n, N, V)
    off[..., EOS_ID] = 0  # EOS is kept _SPLIT away from the best other logit on the path (_set_eos_readout)
    return max(_TIE, 10 * float(off.max()))


@torch.no_grad()
def _apart(variants: dict[str, tuple[Tensor, Tensor]], ref: Tensor, clear: float) -> bool:
    """Each mistake of ``variants`` (name -> tokens (N, 1 + n), step logits (n, N, V)) returns other
    tokens than the reference ``ref`` (N, 1 + n) and than every other mistake, and its first token
    off the reference is a clear choice of its own (a gap of ``clear``, ``_clear``): a decoder with
    that mistake cannot return the reference tokens, however it rounds."""
    if len({tuple(tokens.flatten().tolist()) for tokens, _ in variants.values()}) < len(variants):
        return False  # two mistakes with the same tokens could not be named apart
    for tokens, steps in variants.values():  # (N, 1 + n), (n, N, V)
        differs = tokens[:, 1:] != ref[:, 1:]  # (N, n)
        if not differs.any():
            return False
        row = int(differs.any(dim=1).int().argmax())
        t = int(differs[row].int().argmax())
        top2 = steps[t, row].topk(2).values
        if float(top2[0] - top2[1]) < clear:
            return False
    return True


@torch.no_grad()
def _exercises_eos(tokens: Tensor, logits: Tensor) -> bool:
    """Along the greedy tokens (N, 1 + n) and their step logits (n, N, V): some row finishes before
    the last step and the model's own next choice for it is not EOS (so a decoder that ignores
    finished rows answers differently), and some row never finishes."""
    n = logits.shape[0]
    is_eos = tokens[:, 1:] == EOS_ID  # (N, n)
    never = ~is_eos.any(dim=1)  # (N,)
    first = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), n)  # (N,) step of the first EOS
    early = [r for r in range(len(first)) if first[r] < n - 1]
    if not never.any() or not early:
        return False
    after = [logits[first[r] + 1, r] for r in early]  # (V,) each: the step after the row's EOS
    return any(float(a.max() - a[EOS_ID]) > _SPLIT / 2 and int(a.argmax()) != EOS_ID for a in after)


def _min_margins(logits: Tensor) -> Tensor:
    """Per question, the smallest gap between the best and second-best logit along the greedy
    path, from its step logits (n, N, V)."""
    top2 = logits.topk(2, dim=-1).values  # (n, N, 2)
    return (top2[..., 0] - top2[..., 1]).min(dim=0).values  # (N,)


@torch.no_grad()
def teacher_forced_logits(model, ques, tokens, memory: Tensor | None = None) -> Tensor:
    """Logits (n, N, V) of each decoding step, computed uncached along ``tokens`` (N, 1+n)
    (``memory``: the question's encoding, when made already)."""
    h = _states(model, ques, tokens, memory)  # (N, n, M)
    return model.proj_to_vocab(h).transpose(0, 1)  # (N, n, V) -> (n, N, V)


@torch.no_grad()
def _sharpen_readout(drawn: _Drawn, n, g) -> None:
    """proj_to_vocab reads the decoder state's deviation from its mean (over random prefixes), with
    a gain that puts the logits' spread at about 3: the greedy token then changes with the state."""
    model, ques = drawn.model, drawn.ques
    M = model.config.emb_dim
    tokens = torch.randint(0, 16, (ques.shape[0], n + 1), generator=g)  # (N, 1 + n)
    # in float64, rounded coarsely: the same weights on every machine (draws.py)
    h = _states(drawn.model64, ques, tokens, drawn.memory64).reshape(-1, M)  # (N * n, M)
    mean, spread = h.mean(0), (h - h.mean(0)).std()
    W = coarse(normal(g, model.config.vocab_size, M).double() * (3.0 / (spread * math.sqrt(M))))  # (V, M)
    model.proj_to_vocab.weight.copy_(W)
    model.proj_to_vocab.bias.copy_(coarse(-(W.double() @ mean)))
    model.proj_to_vocab.weight[EOS_ID] = 0.0
    model.proj_to_vocab.bias[EOS_ID] = -1e4


@contextlib.contextmanager
def one_thread():
    """Torch on one thread, as in the kernel: the runs' costs are timed so, and a grader process
    that shares its cores with kernels and other graders is not slowed by idle threads spinning."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


# --- the stretch: a decoder prefix of P > 1 tokens, prefilled at once ------------------------------

# rows, new tokens and prefix length (P counts BOS): the visible check's, and the hidden one's ranges
_PREFILL_SIZES = {"visible": (8, 6, 3), "N": (6, 11), "n": (4, 9), "P": (2, 6)}


def build_prefill(seed: int, hidden: bool) -> dict:
    """A prefill check's model, questions and decoder prefixes (N, P): BOS, then P - 1 tokens drawn
    from the vocabulary's words (never BOS or EOS; the visible check's first row is the lesson's
    ``BOS POSITIVE 0``). Drawn until every known prefill mistake (``Var.PREFILL``) returns other
    tokens than the reference and than each other, at a clear choice, and every greedy choice of
    the reference is clear; EOS never wins (every row decodes all its tokens)."""
    g = gen(seed)
    layers = 2 if not hidden else ints(g, 2, 4)  # a prefill without the mask shows from layer 2 on
    cfg = _config(layers)
    N, n, P = _PREFILL_SIZES["visible"] if not hidden else (ints(g, *_PREFILL_SIZES[k]) for k in "NnP")
    with one_thread():
        for attempt in range(_ATTEMPTS):
            model = _drawn_model(cfg, seed, attempt)
            ques = torch.randint(0, 16, (N, 9), generator=g)
            words = torch.randint(0, min(BOS_ID, EOS_ID), (N, P - 1), generator=g)  # (N, P - 1)
            prefix = torch.cat([torch.full((N, 1), BOS_ID, dtype=torch.long), words], dim=1)  # (N, P)
            if not hidden:
                prefix[0] = torch.tensor(encode("BOS POSITIVE 0")[:P])
            drawn = _Drawn.of(model, ques)
            _sharpen_readout(drawn, P + n - 1, g)
            tokens = greedy_decode(model, ques, n, use_cache=False, prefix=prefix)  # (N, P + n)
            logits = teacher_forced_logits(model, ques, tokens, drawn.memory)  # (P + n - 1, N, V)
            clear = _clear(drawn, tokens, logits)
            variants = {
                k: (t[:, P - 1 :], s) for k, (t, s) in Var.prefill_variants(model, ques, prefix, n).items()
            }  # from the last prefix token
            if _min_margins(logits[P - 1 :]).min() >= clear and _apart(variants, tokens[:, P - 1 :], clear):
                return {
                    "model": model,
                    "config": cfg,
                    "ques": ques,
                    "prefix": prefix,
                    "n": n,
                    "dims": {"N": N, "n": n, "P": P},
                }
    raise RuntimeError(
        f"kv_cache seed {seed}: no model on which every prefill mistake changes the tokens in {_ATTEMPTS} draws"
    )

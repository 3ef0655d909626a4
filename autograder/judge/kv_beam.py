"""Grader side of the kv_cache exercise's stretch part 4 (chapter 13, "Beam search"): the k best
answers and their scores, judged case by case (``cases.by_case``'s rule: a known mistake is named only
when it gives the student's tokens and scores on every case). Its checks join kv_cache's
(``kv_cache.CHECKS``); the reference is ``encdec.beam.beam_search``, computed in float64.

The inputs (one model, three cases of questions, beam width, steps and alpha) are drawn until every
known mistake returns other tokens or scores than the reference and than each other, and every step of
the search and of each mistake's is clear of a tie (``_clear``: no near-tie that a float32 search, in
another order of sums, could break the other way)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from encdec.beam import beam_search
from encdec.data import BOS_ID, EOS_ID
from encdec.generate import new_caches
from encdec.grading import wire
from encdec.grading.words import words
from encdec.model import Transformer

from . import decode_draws as D
from .cases import add, agreeing, ints
from .core import Check, Verdict, compare, gen, named_by_property, randomize_, state_arrays
from .draws import in_double

CHECKS: list[Check] = []

MISTAKES = ("beam_cache_not_reordered", "beam_no_length_norm", "beam_finished_extended")
_ALPHAS = (0.5, 0.75, 1.0)  # exact in binary: the kernel and the grader raise lengths to the same number
_CLEAR = 1e-3  # the least score difference by which a known mistake must differ, where its tokens do not
# the least gap between two candidates' scores: ten times a float32 search's rounding of a score (a sum of
# at most 8 log-probs of order 1, each within 1e-7 relative)
_TIE = 1e-5
_CASES = 3


@torch.no_grad()
def mistaken_search(
    model, ques, k: int, n: int, alpha: float, mistake: str | None, gaps: list | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """A beam search with one known mistake (None: none), written as a student does: k rows per
    question from the start (beam 0 live, the others at -inf), tokens (N, k, 1 + n) and scores (N, k),
    best first. ``gaps`` (a list) receives each step's smallest gap between two of the k + 1 best
    candidates' scores: how near the search came to a tie."""
    N, V = ques.shape[0], model.config.vocab_size
    memory = model.encode(ques).repeat_interleave(k, dim=0)  # (N*k, Kq, M)
    pos = model.positions(1 + n)  # (1, 1+n, M)
    caches = new_caches(model)
    tokens = torch.full((N, k, 1), BOS_ID, dtype=torch.long)  # (N, k, 1)
    total = torch.full((N, k), float("-inf"), dtype=memory.dtype)
    total[:, 0] = 0.0  # (N, k): one live beam until the first step
    length = torch.zeros(N, k, dtype=memory.dtype)
    done = torch.zeros(N, k, dtype=torch.bool)
    a = 0.0 if mistake == "beam_no_length_norm" else alpha
    score = total
    for t in range(n):
        x = model.emb_layer(tokens[:, :, -1].reshape(N * k, 1)) + pos[:, t : t + 1]  # (N*k, 1, M)
        h = model.decoder(x, memory, None, caches=caches)  # (N*k, 1, M)
        logp = torch.log_softmax(model.proj_to_vocab(h[:, -1]), dim=-1).view(N, k, V)  # (N, k, V)
        live = torch.ones_like(done) if mistake == "beam_finished_extended" else ~done  # (N, k)
        kept = torch.full((V,), float("-inf"), dtype=logp.dtype)
        kept[EOS_ID] = 0.0
        logp = torch.where(live[..., None], logp, kept)
        cand_total = total[..., None] + logp  # (N, k, V)
        cand_length = (length + live.to(length.dtype))[..., None].expand(N, k, V)  # (N, k, V)
        top, idx = (cand_total / cand_length**a).reshape(N, k * V).topk(k + 1, dim=1)  # (N, k + 1)
        if gaps is not None:  # between finite scores only (-inf is no candidate)
            d = top[:, :-1] - top[:, 1:]
            gaps.append(float(torch.where(torch.isfinite(top[:, :-1]), d, float("inf")).min()))
        score, idx = top[:, :k], idx[:, :k]  # (N, k)
        parent, token = idx // V, idx % V
        total = cand_total.reshape(N, k * V).gather(1, idx)
        length = cand_length.reshape(N, k * V).gather(1, idx)
        done = done.gather(1, parent) | (token == EOS_ID)
        tokens = torch.cat([tokens.gather(1, parent[..., None].expand(N, k, t + 1)), token[..., None]], dim=2)
        if mistake != "beam_cache_not_reordered":
            rows = (torch.arange(N)[:, None] * k + parent).reshape(N * k)  # (N*k,)
            for cache_self, _ in caches:
                cache_self.k, cache_self.v = cache_self.k.index_select(0, rows), cache_self.v.index_select(0, rows)
    return tokens, score


def _outputs(pairs) -> dict[str, np.ndarray]:
    """(tokens, scores) per case -> the arrays the kernel returns (scores in float32)."""
    out = {}
    for i, (tokens, scores) in enumerate(pairs):
        out[wire.case("tokens", i)] = tokens.numpy()
        out[wire.case("scores", i)] = scores.to(torch.float32).numpy()
    return out


def reference(inputs) -> dict[str, np.ndarray]:
    model64 = in_double(inputs["model"])
    return _outputs(beam_search(model64, q, k, n, alpha) for q, (k, n, alpha) in zip(inputs["ques"], inputs["cases"]))


def variants(inputs) -> dict[str, dict]:
    model64 = in_double(inputs["model"])
    return {
        m: _outputs(mistaken_search(model64, q, k, n, a, m) for q, (k, n, a) in zip(inputs["ques"], inputs["cases"]))
        for m in MISTAKES
    }


def _differ(a: dict, b: dict) -> bool:
    """Two searches' outputs differ: other tokens in some case, or a score by ``_CLEAR``."""
    return any(
        a[key].shape != b[key].shape
        or (
            not np.array_equal(a[key], b[key])
            if key.startswith("tokens")
            else np.abs(a[key].astype(np.float64) - b[key]).max() > _CLEAR
        )
        for key in a
    )


def _clear(inputs) -> bool:
    """No step of the correct search or of a known mistake's comes within ``_TIE`` of a tie between
    two of its k + 1 best candidates (in float64): a float32 search, in any order of sums, keeps the
    same beams in the same order, on every machine."""
    model64 = in_double(inputs["model"])
    for q, (k, n, alpha) in zip(inputs["ques"], inputs["cases"]):
        for mistake in (None, *MISTAKES):
            gaps: list[float] = []
            mistaken_search(model64, q, k, n, alpha, mistake, gaps)
            if min(gaps) < _TIE:
                return False
    return True


def build(seed: int) -> dict:
    """One model (decode_draws' shape) with an EOS bias that finishes
    some beams early, and three cases, drawn until every known mistake is told apart."""
    g = gen(seed)
    cfg = D._config(2)
    with D.one_thread():
        for attempt in range(100):
            model = randomize_(Transformer(cfg), seed + 100_003 * attempt)  # tokens of full length: they matter
            with (
                torch.no_grad()
            ):  # EOS among the best tokens now and then (2 to 4 above its draw): some beams finish early
                model.proj_to_vocab.bias[EOS_ID] = float(ints(g, 8, 17)) / 4
            cases = [(ints(g, 2, 5), ints(g, 5, 9), _ALPHAS[ints(g, 0, 3)]) for _ in range(_CASES)]
            ques = [torch.randint(0, 16, (ints(g, 3, 7), 9), generator=g) for _ in range(_CASES)]
            inputs = {"model": model, "config": cfg, "ques": ques, "cases": cases}
            ref = reference(inputs)
            outs = [ref, *variants(inputs).values()]
            apart = all(_differ(a, b) for i, a in enumerate(outs) for b in outs[i + 1 :])
            if apart and _clear(inputs):
                return inputs
    raise RuntimeError(f"kv_cache beam seed {seed}: no model that tells the known mistakes apart in 100 draws")


def _wire(inputs):
    return (
        {"config": dataclasses.asdict(inputs["config"]), "cases": [list(c) for c in inputs["cases"]]},
        {**state_arrays(inputs["model"]), **{wire.case("ques", i): q.numpy() for i, q in enumerate(inputs["ques"])}},
    )


def _judge(check):
    """Each case's tokens (exact), then its scores; the first that fails is the verdict. A known mistake
    is named when its tokens and scores are the student's on every case."""

    def judge(got, ref, inputs):
        said = [f"beam_size = {k}, max_new_tokens = {n}, length_penalty = {a}" for k, n, a in inputs["cases"]]
        for i, case in enumerate(said):
            for what, key, exact in (("the beams' tokens", "tokens", True), ("the beams' scores", "scores", False)):
                name = wire.case(key, i)
                r = compare(check, what, got.get(name), ref[name], exact=exact)
                if not r.ok:
                    named_by_property(r, _named(got, variants(inputs)))
                    r.words += words("case_of", case=case)
                    return r
        return Verdict(True, words("matched", title=check.title, what="the beams"))

    return judge


def _named(got: dict, candidates: dict[str, dict]) -> str | None:
    """The known mistake whose tokens and scores are the student's on every case."""
    tokens = [wire.case("tokens", i) for i in range(_CASES)]
    scores = [wire.case("scores", i) for i in range(_CASES)]
    by_tokens = agreeing(got, candidates, tokens, exact=True)
    by_scores = agreeing(got, {m: candidates[m] for m in [by_tokens] if m}, scores, exact=False)
    return by_scores


for _cid, _hidden, _seed in (("kv_cache.beam", False, 1306), ("kv_cache.beam_hidden", True, 0)):
    add(
        CHECKS,
        _cid,
        _hidden,
        _seed,
        title="stretch: beam search with the KV cache" + (" on a fresh model" if _hidden else ""),
        task="beam_search(model, ques_b, beam_size, max_new_tokens, length_penalty)",
        kind="beam",
        build=build,
        wire=_wire,
        reference=reference,
        variants=variants,
        judge=_judge,
    )

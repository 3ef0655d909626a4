"""Grader side of the ``kv_cache`` exercise (chapter 13): ``KVCache.update`` and cached greedy
decoding: references and judges (the decoding checks' inputs: decode_draws.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from encdec.data import BOS_ID
from encdec.generate import greedy_decode, pick_next
from encdec.grading.compare import cache_blame
from encdec.grading.words import observation, words

from . import decode_draws as D
from . import kv_beam, kv_update
from . import run_draws as R
from . import stages as St
from . import variants as Var
from .cases import agreeing
from .core import ATOL, Check, Verdict, compare, diagnosis, first_failure, named_by_property, state_arrays

CHECKS: list[Check] = [*kv_update.CHECKS]  # KVCache.update first, as the notebook asks


# --- cached greedy decoding --------------------------------------------------------------------------


def _wire_decode(inputs):
    return (
        {"config": dataclasses.asdict(inputs["config"]), "n": inputs["n"]},
        {**state_arrays(inputs["model"]), "ques": inputs["ques"].numpy()},
    )


def _ref_decode(inputs):
    """The reference: the tokens alone (the score is decided on them, in the grader and in the
    student's own run alike); a structure run's, drawn with it (run_draws.build_run)."""
    return {"tokens": inputs["tokens"].numpy() if "tokens" in inputs else D.reference_tokens(inputs)}


def _decode_variants(inputs) -> dict:
    out = Var.decode_variants(inputs["model"], inputs["ques"], inputs["n"])
    return {k: {"tokens": v[0].numpy()} for k, v in out.items()}


def _run_variants(inputs) -> dict:
    out = Var.decode_variants(inputs["model"], inputs["ques"], inputs["n"], R.ON_RUNS)
    return {k: {"tokens": v[0].numpy()} for k, v in out.items()}


def _judge_tokens(check, variants_of):
    """The tokens decide (the inputs are drawn so that every known mistake returns other tokens:
    ``D.build_decode``), and they name a known mistake. The step logits the kernel
    recorded (a hook on proj_to_vocab) only word the feedback: the first step that went wrong."""

    def judge(got, ref, inputs):
        variants = {}
        tok, steps = got.get("tokens"), got.get("step_logits")

        def named():
            """Known mistakes by their tokens (the inputs are drawn so that each one's differ from
            the reference's and from each other's)."""
            if not variants:
                variants.update(variants_of(inputs))
            return {k: v["tokens"] for k, v in variants.items()}

        r = compare(check, "the generated tokens", tok, ref["tokens"], exact=True, candidates=named)
        if not r.ok and not r.words.diagnoses() and _replayable(inputs, tok):
            named_by_property(r, _replayed_mistake(inputs, tok, steps))
        if not r.ok and not r.words.diagnoses():
            r.words += _observed(inputs, tok, steps)
        if not r.ok and _replayable(inputs, tok):
            m = inputs["model"]
            with torch.no_grad():
                emb, pos = m.emb_layer.weight.numpy(), m.positions(1 + inputs["n"]).numpy()
            r.words += St.stage_note(r.words, St.locate(St.decode_stage, got, tok, emb, pos), "decoding")
        return r

    return judge


def _replayed_mistake(inputs, tok, steps) -> str | None:
    """The decoding mistake whose step logits, replayed along the student's own tokens, are the
    step logits the kernel recorded at every step (and the lesson's are not); None otherwise. The
    recorded logits only word the feedback: the score is the tokens'."""
    model, ques, n = inputs["model"], inputs["ques"], inputs["n"]
    if steps is None or steps.shape != (n, ques.shape[0], model.config.vocab_size):
        return None
    tokens = torch.from_numpy(tok.astype(np.int64))
    if np.allclose(steps, D.teacher_forced_logits(model, ques, tokens).numpy(), atol=1e-4, rtol=1e-4):
        return None
    for mode in Var.REPLAYED:
        if np.allclose(steps, Var.replayed_step_logits(model, ques, tokens, mode).numpy(), atol=1e-4, rtol=1e-4):
            return mode
    return None


def _replayable(inputs, tok) -> bool:
    """The student's tokens are a prefix the model can replay: (N, 1+n) ids in range, BOS first."""
    model, ques, n = inputs["model"], inputs["ques"], inputs["n"]
    return not (
        tok is None
        or tok.shape != (ques.shape[0], 1 + n)
        or not np.issubdtype(tok.dtype, np.integer)
        or tok.min() < 0
        or tok.max() >= model.config.vocab_size
        or (tok[:, 0] != BOS_ID).any()
    )


def _observed(inputs, tok, steps) -> str:
    """What the decoding did wrong, stage by stage, when no known mistake fits: the first step whose
    logits differ from the model's on the same prefix (the student's own tokens, run uncached), or,
    when every step's logits are right, the first token that was not the greedy choice."""
    model, ques, n = inputs["model"], inputs["ques"], inputs["n"]
    N = ques.shape[0]
    if not _replayable(inputs, tok):
        return ""  # no prefix to replay: the shapes above say what is wrong
    tokens = torch.from_numpy(tok.astype(np.int64))
    own32 = D.teacher_forced_logits(model, ques, tokens)  # (n, N, V) along the student's tokens
    own = own32.numpy()
    # off the reference path this model's float rounding may pass ATOL: ten times it is the tolerance
    tol = max(ATOL, 10 * float(D.rounding(model, ques, tokens, own32).max()))
    k = 0 if steps is None or steps.ndim != 3 or steps.shape[1:] != own.shape[1:] else min(len(steps), n)
    for t in range(k):
        bad = ~np.isclose(steps[t], own[t], atol=tol, rtol=ATOL).all(axis=-1)  # (N,)
        if bad.any():
            return words("observed_step_logits", step=t + 1, row=int(np.argmax(bad)), t=t) + observation("step_logits")
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(k):
        greedy, now_done = pick_next(torch.from_numpy(own[t]), done)  # (N,): the package's choice
        greedy = greedy.numpy()
        bad = tok[:, t + 1] != greedy
        if bad.any():
            row = int(np.argmax(bad))
            if done[row]:
                return words("observed_after_eos", row=row, token=int(tok[row, t + 1]), step=t + 1) + diagnosis(
                    "ignores_done"
                )
            return words(
                "observed_not_argmax", step=t + 1, row=row, token=int(tok[row, t + 1]), best=int(greedy[row])
            ) + observation("not_argmax")
        done = now_done
    return ""


def _blame(got, inputs, origin) -> str | None:
    """The failure came from KVCache.update (it raised, or it returned keys of the wrong shape)."""
    cfg = inputs["config"]
    return cache_blame(
        got.get("cache_shapes"), inputs["ques"].shape[0], cfg.num_heads, cfg.emb_dim // cfg.num_heads, origin
    )


def _failed_decode(check):
    """A decoding run that raised: the tokens are lost; the feedback says when the failure came
    from KVCache.update (it raised, or it returned keys of the wrong shape)."""

    def judge_failed(got, inputs, origin, failed):
        blame = _blame(got, inputs, origin)
        if blame is not None:
            failed.words += "\n" + blame
            failed.label = "raised_in_update"
        return failed

    return judge_failed


# --- the structure: encoder once, one token per step, prefill in one call: judged by cost ----------
# Each part is a run of the test cell on inputs where the wrong structure is dear (run_draws.RUNS);
# it passes when the tokens are the reference's and the kernel's CPU time, read outside it, stays
# within the bound timed on the package's own structure in the same run (judge/budget.py).

PARTS = {
    "encoder": "the encoder runs once",
    "cache": "one new token per decoder step",
    "prefill": "the prefill is one call",
}
WRONG = {"encoder": "encoder_every_step", "cache": "no_cache", "prefill": "prefill_not_one_call"}


def _judge_runs(check, by_tokens, variants_of):
    """Every run of the item: its tokens (``by_tokens``, the item's own judge), then its cost; an
    item of several runs earns the parts whose run passed. Wrong tokens name a known mistake
    (``variants_of``: a run's inputs -> its mistakes' tokens) only when it gives the student's tokens
    on every run (``cases.agreeing``), as the warm-up's cases do."""

    def judge(results, _ref, inputs):
        verdicts = [
            (PARTS[p], _judge_run(check, p, by_tokens, results.get(p) or {}, inputs["runs"][p])) for p in check.runs
        ]
        if all(v.ok for _, v in verdicts):
            return Verdict(True, words("ok", title=check.title))
        failed = first_failure(*[v for _, v in verdicts])
        failed = dataclasses.replace(failed, parts=tuple((p, v.ok) for p, v in verdicts) if len(verdicts) > 1 else ())
        return (
            failed
            if failed.words.diagnoses()
            else named_by_property(failed, _named_by_runs(check, results, inputs, variants_of))
        )

    return judge


def _named_by_runs(check, results: dict, inputs: dict, variants_of) -> str | None:
    """The known mistake whose tokens are the student's on every run of the item; None when a run
    returned no tokens (it raised, or was stopped at its bound) or no mistake fits them all."""
    from . import loaded

    got = {}
    for p in check.runs:
        saved = loaded(check, (results.get(p) or {}).get("saved"), inputs["runs"][p])
        if isinstance(saved, Verdict) or not isinstance(saved.get("tokens"), np.ndarray):
            return None
        got[p] = saved["tokens"]
    candidates: dict[str, dict] = {}
    for p in check.runs:
        for name, outs in variants_of(inputs["runs"][p]).items():
            candidates.setdefault(name, {})[p] = outs["tokens"]
    return agreeing(got, candidates, list(check.runs), exact=True)


def _judge_run(check, part: str, by_tokens, result: dict, inputs: dict) -> Verdict:
    from . import loaded, reference

    cpu, lesson, limit = (result.get(k) for k in ("cpu", "lesson", "bound"))
    got = loaded(check, result.get("saved"), inputs)
    if cpu is None or not lesson or limit is None:  # no kernel, or no reading of it
        return (
            got
            if isinstance(got, Verdict)
            else Verdict(False, words("not_measured", check_id=check.id, part=PARTS[part]), label="not_measured")
        )
    if cpu >= limit:  # interrupted at the bound, or returned past it: whatever it returned
        return Verdict(
            False,
            words(
                "over_budget",
                check_id=check.id,
                part=PARTS[part],
                ratio=f"{cpu / lesson:.1f}",
                allowed=f"{limit / lesson:.1f}",
            )
            + diagnosis(WRONG[part]),
        )
    return got if isinstance(got, Verdict) else by_tokens(got, reference(check, inputs), inputs)


def _expected_counts(parts):
    """What the student's own run of a visible structure item stores (the graded run judges its
    cost): the reference tokens and what the kernel's counters should read."""

    def expected(inputs):
        out = {"tokens": D.reference_tokens(inputs) if "prefix" not in inputs else _ref_prefill(inputs)["tokens"]}
        if "encoder" in parts:
            out["encoder_calls"] = np.array(1)
        if "cache" in parts:  # the prefix once, then one token a step
            P = inputs["prefix"].shape[1] if "prefix" in inputs else 1
            out["decoder_lengths"] = np.array([P] + [1] * (inputs["n"] - 1), dtype=np.int64)
        return out

    return expected


def _lesson_decode(model, ques_b, n):
    return greedy_decode(model, ques_b, n)


def _lesson_prefill(model, ques_b, prefix, n):
    return greedy_decode(model, ques_b, n, prefix=prefix)


for _cid, _hidden, _seed, _parts, _title in (
    ("kv_cache.tokens", False, 1302, (), "cached greedy decoding, tokens"),
    ("kv_cache.encoder_once", False, 1303, ("encoder",), "encoder runs once"),
    ("kv_cache.one_token_per_step", False, 1304, ("cache",), "one new token per decoder step"),
    ("kv_cache.tokens_hidden", True, 0, (), "cached greedy decoding on a fresh model"),
    (
        "kv_cache.structure_hidden",
        True,
        0,
        ("encoder", "cache"),
        "encoder once and one token per step on a fresh model",
    ),
):
    _c = Check(
        id=_cid,
        title=_title,
        task="greedy_decode_cached(model, ques_b, max_new_tokens)",
        kind="decode",
        hidden=_hidden,
        seed=_seed,
        build=(lambda s, h=_hidden: D.build_decode(s, h)),
        wire=_wire_decode,
        reference=_ref_decode,
        variants=_decode_variants,
        expected=_expected_counts(_parts) if _parts else None,
        when_larger={"encoder_calls": "encoder_every_step", "decoder_lengths": "no_cache"},
        runs={p: (lambda s, p=p: R.build_run(p, s)) for p in _parts},
        lesson=_lesson_decode,
    )
    _c.judge_failed = _failed_decode(_c)
    # a structure run's tokens name a mistake only when every run agrees (its inputs are drawn for their cost)
    _c.judge = (
        _judge_runs(_c, _judge_tokens(_c, lambda inputs: {}), _run_variants)
        if _parts
        else _judge_tokens(_c, _decode_variants)
    )
    CHECKS.append(_c)


# --- the stretch: prefill a decoder prefix of P > 1 tokens at once, then one token per step ---------
# The tokens are judged as the decoding items' and name a known prefill mistake (the student's own run:
# a model drawn so that each one returns other tokens, decode_draws.build_prefill); the graded run judges
# by cost too: a long prefix fed one token a call, or a prefix re-run at every step, is over the bound.


def _wire_prefill(inputs):
    meta, arrays = _wire_decode(inputs)
    return meta, {**arrays, "prefix": inputs["prefix"].numpy()}


def _ref_prefill(inputs):
    """The reference: the package's greedy decoding that continues the prefix (its tokens); a
    structure run's, drawn with it (run_draws.build_run)."""
    if "tokens" in inputs:
        return {"tokens": inputs["tokens"].numpy()}
    return {"tokens": greedy_decode(inputs["model"], inputs["ques"], inputs["n"], prefix=inputs["prefix"]).numpy()}


def _prefill_variants(inputs) -> dict:
    out = Var.prefill_variants(inputs["model"], inputs["ques"], inputs["prefix"], inputs["n"])
    return {k: {"tokens": v[0].numpy()} for k, v in out.items()}


for _cid, _hidden, _seed, _title in (
    ("kv_cache.prefill", False, 1305, "stretch: prefill of a decoder prefix, then cached decoding"),
    ("kv_cache.prefill_hidden", True, 0, "stretch: prefill of a decoder prefix on a fresh model"),
):
    _c = Check(
        id=_cid,
        title=_title,
        task="greedy_decode_prefix(model, ques_b, prefix, max_new_tokens)",
        kind="prefill",
        hidden=_hidden,
        seed=_seed,
        build=(lambda s, h=_hidden: D.build_prefill(s, h)),
        wire=_wire_prefill,
        reference=_ref_prefill,
        variants=_prefill_variants,
        expected=_expected_counts(("cache",)),
        when_larger={"decoder_lengths": "no_cache"},
        runs={p: (lambda s, p=p: R.build_run(p, s, prefix=True)) for p in ("prefill", "cache")},
        lesson=_lesson_prefill,
    )
    _c.judge_failed = _failed_decode(_c)
    # the tokens of one run decide (a prefix is no answer to replay); a mistake is named over every run
    _c.judge = _judge_runs(_c, _judge_tokens(_c, lambda inputs: {}), _prefill_variants)
    CHECKS.append(_c)


# --- the stretch part 4: beam search with the KV cache (kv_beam.py) ------------------------------------
CHECKS += kv_beam.CHECKS

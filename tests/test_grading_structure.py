"""The kv_cache structure items are judged by cost, measured where the student cannot reach (issue:
only the work earns the points).

Invariant: "the encoder runs once", "one new token per decoder step" and "the prefill is one call"
are decided by the CPU time the run cost (in a graded run, read from the kernel's cgroup or process
tree by the grader; here, this process's, stopped at the bound as the grader's interrupt stops a
kernel), against a bound timed in the same run on the package's own structure, on inputs where the
wrong structure costs ten times the lesson's or more (bench/bench_structure.py). Nothing the code
can replace, restore or skip (hooks, the model's classes, a copy of the model) decides it; an
honest decoding in another style passes. Each attempt below is kept as a test."""

from __future__ import annotations

import pytest
import torch
from grading_support import cached_decoder, graded, uncached

from autograder import judge as J
from autograder.judge import budget
from encdec import attention as A
from encdec.data import BOS_ID
from encdec.generate import greedy_decode, pick_next
from encdec.model import Decoder, Encoder, Transformer

SECRET = b"a course secret for this test only"


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def seed(check_id: str, student: str = "student00") -> int:
    return J.check_seed(SECRET, student, "kv_cache", check_id)


@torch.no_grad()
def per_question(model, ques_b, n):
    """Honest, in another style: each question decoded alone (the encoder runs once per question)."""
    return torch.cat([cached_decoder()(model, ques_b[i : i + 1], n) for i in range(ques_b.shape[0])])


@torch.no_grad()
def in_float64(model, ques_b, n):
    """Honest: the lesson's decoding on a float64 copy of the model."""
    return cached_decoder()(model.double(), ques_b, n)


@torch.no_grad()
def preallocated(model, ques_b, n):
    """Honest: the tokens written into a buffer allocated up front, the lesson's caches."""
    N = ques_b.shape[0]
    tokens = torch.full((N, 1 + n), BOS_ID, dtype=torch.long)
    pos, memory = model.positions(1 + n), model.encode(ques_b)
    caches = [(A.KVCache(), A.KVCache(static=True)) for _ in model.decoder.layers]
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(n):
        h = model.decoder(model.emb_layer(tokens[:, t : t + 1]) + pos[:, t : t + 1], memory, None, caches=caches)
        tokens[:, t + 1], done = pick_next(model.proj_to_vocab(h[:, -1]), done)
    return tokens


@torch.no_grad()
def plain_copy_uncached(model, ques_b, n):
    """The issue's first cheat: a plain Transformer(model.config) with the given weights, uncached."""
    twin = Transformer(model.config)
    twin.load_state_dict(model.state_dict())
    return greedy_decode(twin.eval(), ques_b, n, use_cache=False)


@torch.no_grad()
def classes_restored_uncached(model, ques_b, n):
    """The issue's second cheat: each module's class set back to the package's own, then uncached."""
    model.__class__, model.encoder.__class__, model.decoder.__class__ = Transformer, Encoder, Decoder
    for m in model.modules():
        m._forward_pre_hooks.clear()
        m._forward_hooks.clear()
    return uncached(model, ques_b, n)


@torch.no_grad()
def layers_and_fresh_cache_every_step(model, ques_b, n):
    """The issue's third cheat: ``model.encoder.layers`` called directly at every step, and a fresh
    cache refilled token by token at every step (quadratic decoding, the lesson's tokens)."""
    N = ques_b.shape[0]
    tokens, pos = torch.full((N, 1), BOS_ID), model.positions(1 + n)
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(n):
        memory = model.emb_layer(ques_b) + model.positions(ques_b.shape[1])
        for layer in model.encoder.layers:
            memory = layer(memory)
        caches = [(A.KVCache(), A.KVCache(static=True)) for _ in model.decoder.layers]
        for i in range(t + 1):
            h = model.decoder(model.emb_layer(tokens[:, i : i + 1]) + pos[:, i : i + 1], memory, None, caches=caches)
        nxt, done = pick_next(model.proj_to_vocab(h[:, -1]), done)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens


HONEST = {
    "lesson": cached_decoder(),
    "per_question": per_question,
    "in_float64": in_float64,
    "preallocated": preallocated,
}
# decoder -> the parts of the hidden item it must miss (the visible items are the same runs, one each)
WRONG = {
    "encoder_every_step": (cached_decoder(encoder_every_step=True), {"encoder"}),
    "plain_copy_uncached": (plain_copy_uncached, {"cache"}),
    "classes_restored_uncached": (classes_restored_uncached, {"cache"}),
    "layers_and_fresh_cache_every_step": (layers_and_fresh_cache_every_step, {"encoder", "cache"}),
}
LABELS = {"encoder": "encoder_every_step", "cache": "no_cache"}


@pytest.mark.parametrize("name", HONEST)
def test_an_honest_decoding_in_any_style_passes_the_structure_items(name, workdir):
    verdict, _ = graded("kv_cache.structure_hidden", HONEST[name], workdir, seed=seed("kv_cache.structure_hidden"))
    assert verdict.ok, (name, verdict.message)


@pytest.mark.parametrize("name", WRONG)
def test_each_wrong_structure_misses_its_part_whatever_it_replaces(name, workdir):
    decode, missed = WRONG[name]
    hidden, _ = graded("kv_cache.structure_hidden", decode, workdir, seed=seed("kv_cache.structure_hidden"))
    assert set(hidden.missed) == {J.kv_cache.PARTS[p] for p in missed}, (name, hidden.parts)
    assert hidden.label == LABELS[next(p for p in LABELS if p in missed)], (name, hidden.label)


@torch.no_grad()
def prefill_token_by_token(model, ques_b, prefix, n):
    """A prefill that feeds the prefix one token a call through the cache: the lesson's tokens."""
    N, P = prefix.shape
    pos, memory = model.positions(P + n), model.encode(ques_b)
    caches = [(A.KVCache(), A.KVCache(static=True)) for _ in model.decoder.layers]
    tokens = prefix
    for t in range(P + n - 1):
        h = model.decoder(model.emb_layer(tokens[:, t : t + 1]) + pos[:, t : t + 1], memory, None, caches=caches)
        if t >= P - 1:
            tokens = torch.cat([tokens, model.proj_to_vocab(h[:, -1]).argmax(-1, keepdim=True)], dim=1)
    return tokens


PREFILLS = {  # decoder -> the parts of the prefill item it misses
    "lesson": (lambda m, q, p, n: greedy_decode(m, q, n, prefix=p), set()),
    "token_by_token": (prefill_token_by_token, {"prefill"}),
    "no_prefill_no_cache": (lambda m, q, p, n: greedy_decode(m, q, n, use_cache=False, prefix=p), {"prefill", "cache"}),
}


@pytest.mark.parametrize("name", PREFILLS)
def test_the_prefill_stretch_asks_for_one_call_and_one_position_per_step(name, workdir):
    decode, missed = PREFILLS[name]
    verdict, _ = graded("kv_cache.prefill", decode, workdir, seed=seed("kv_cache.prefill"))
    assert set(verdict.missed) == {J.kv_cache.PARTS[p] for p in missed} and verdict.ok == (not missed), (
        name,
        verdict.message,
    )


def test_a_run_that_was_not_measured_or_ran_over_its_bound_fails(workdir):
    inputs = J.graded_inputs("kv_cache.encoder_once", 3)
    saved = {"encoder": {"saved": None, "cpu": None, "lesson": 0.1, "bound": budget.bound(0.1, "encoder")}}
    assert J.verify("kv_cache.encoder_once", saved, inputs).label == "did_not_run"
    over = {"encoder": {"saved": None, "cpu": 10.0, "lesson": 0.1, "bound": budget.bound(0.1, "encoder")}}
    verdict = J.verify("kv_cache.encoder_once", over, inputs)
    assert not verdict.ok and verdict.label == "encoder_every_step" and "100.0" in verdict.message


@torch.no_grad()
def prefill_positions_restarted(model, ques_b, prefix, n):
    """The lesson's prefill, then each new token placed from position 0 again (Var.PREFILL's
    ``prefill_pos_restarted``): one call of P positions, one position a step, the wrong tokens."""
    from autograder.judge import variants as Var

    return Var.prefill_decode(model, ques_b, prefix, n, "prefill_pos_restarted")[0]


# a token mistake on structure runs: named by the tokens when every run agrees, as the token items do
TOKEN_MISTAKES = {
    "kv_cache.structure_hidden": (cached_decoder(position=lambda t: t + 1), "pos_ahead"),
    "kv_cache.prefill": (prefill_positions_restarted, "prefill_pos_restarted"),
}


@pytest.mark.parametrize("check_id", TOKEN_MISTAKES)
def test_wrong_tokens_on_the_structure_runs_name_their_mistake(check_id, workdir):
    decode, key = TOKEN_MISTAKES[check_id]
    verdict, _ = graded(check_id, decode, workdir, seed=seed(check_id))
    assert not verdict.ok and verdict.label == key and set(verdict.missed) == set(verdict_parts(check_id)), (
        verdict.message
    )


def verdict_parts(check_id: str) -> list[str]:
    """Every part of the item: wrong tokens fail each run, however cheap."""
    return [J.kv_cache.PARTS[p] for p in J.checks()[check_id].runs]


def test_a_mistake_that_fits_one_run_only_is_not_named():
    """Agreement of every run (cases.agreeing): tokens a mistake gives on one run only name nothing."""
    from autograder.judge.kv_cache import _named_by_runs
    from encdec.grading import wire

    check = J.checks()["kv_cache.structure_hidden"]
    runs = J.graded_inputs(check.id, 5)["runs"]
    tokens = {p: r["tokens"].numpy() for p, r in runs.items()}  # the student's: the lesson's on every run
    saved = {p: {"saved": wire.to_bytes({"status": "ok"}, {"tokens": t})} for p, t in tokens.items()}
    mistake = {p: t + 1 for p, t in tokens.items()}  # a mistake's tokens, run by run

    def variants_of(run):
        return {"pos_ahead": {"tokens": mistake[next(p for p in runs if runs[p] is run)]}}

    assert _named_by_runs(check, saved, {"runs": runs}, variants_of) is None
    mistake["encoder"] = tokens["encoder"]
    assert _named_by_runs(check, saved, {"runs": runs}, variants_of) is None  # one run of two
    mistake["cache"] = tokens["cache"]
    assert _named_by_runs(check, saved, {"runs": runs}, variants_of) == "pos_ahead"

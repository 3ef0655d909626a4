"""The decoding checks (kv_cache) on their own, no nbgrader: the cached decoders the lesson's
mistakes make, the rule ``pick_next`` states (a finished row keeps producing EOS) exercised on
every seed, and a crash that costs only the items of the function it came from."""

from __future__ import annotations

import pytest
import torch
from grading_support import (
    DropsOldestCache,
    ScalesValuesCache,
    cached_decoder,
    graded,
    graded_inputs,
    own_run,
    plain_argmax,
)

from autograder import judge as J
from encdec import attention as A
from encdec.data import EOS_ID
from encdec.generate import greedy_decode, new_caches, pick_next


@pytest.fixture()
def workdir(tmp_path):
    return tmp_path


def test_cached_reference_decoder_matches_greedy_decode():
    inputs = J.checks()["kv_cache.tokens"].build(J.checks()["kv_cache.tokens"].seed)
    ours = cached_decoder()(inputs["model"], inputs["ques"], inputs["n"])
    assert torch.equal(ours, greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=True))
    assert len(new_caches(inputs["model"])) == inputs["model"].config.num_dec_layers


# --- the rule pick_next states is exercised on every seed ---------------------------------------

# a right cached decoder that chooses with a plain argmax: a finished row goes on decoding
plain_argmax_decoder = cached_decoder(choose=plain_argmax)
STUDENTS = [f"student{i:02d}" for i in range(20)]


def test_decoding_inputs_have_rows_that_finish_early_and_rows_that_never_finish():
    secret = b"a course secret for this test only"
    # (the structure checks decode every row to the end by design: EOS never wins on their models)
    for check_id in ("kv_cache.tokens", "kv_cache.tokens_hidden"):
        for student in STUDENTS:
            inputs = graded_inputs(check_id, J.check_seed(secret, student, "kv_cache", check_id))
            tokens = greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=False)  # (N, 1 + n)
            eos = tokens[:, 1:] == EOS_ID  # (N, n)
            assert (~eos.any(dim=1)).any(), f"{check_id}/{student}: every row finishes"
            assert eos[:, :-1].any(), f"{check_id}/{student}: no row finishes before the last step"


@pytest.mark.parametrize("check_id", ["kv_cache.tokens", "kv_cache.tokens_hidden"])
def test_a_decoder_that_ignores_finished_rows_fails_for_every_student(check_id, workdir):
    secret = b"a course secret for this test only"
    for student in STUDENTS:
        verdict, _ = graded(
            check_id, plain_argmax_decoder, workdir, seed=J.check_seed(secret, student, "kv_cache", check_id)
        )
        assert not verdict.ok, f"{student}: a plain argmax passed {check_id}"
        assert "Diagnosis: a row that had already produced EOS went on decoding" in " ".join(verdict.message.split())
    with pytest.raises(AssertionError, match="already produced EOS"):  # the student's own run says it too
        own_run("kv_cache.tokens", plain_argmax_decoder, workdir)


def test_positions_one_ahead_are_named_the_same_on_every_seed(workdir):
    ahead = cached_decoder(position=lambda t: t + 1)  # the token fed at step t placed at position t + 1
    for seed in range(8):
        verdict, _ = graded("kv_cache.tokens_hidden", ahead, workdir, seed=seed)
        message = " ".join(verdict.message.split())
        assert not verdict.ok and "position encodings one ahead" in message, message
        assert message.count("Diagnosis:") == 1


class WrongAxisCache(A.KVCache):
    """One torch.cat on the wrong axis: the keys grow along Dh."""

    def update(self, k_new, v_new):
        self.k = k_new if self.k is None else torch.cat([self.k, k_new], dim=3)  # (N, H, 1, Dh) -> (N, H, 1, 2 Dh)
        self.v = v_new if self.v is None else torch.cat([self.v, v_new], dim=2)  # (N, H, T, Dh)
        return self.k, self.v


def test_a_crash_in_the_cache_stops_the_decoding_and_says_where(workdir):
    """A decoding that cannot finish returns no tokens: every decoding item
    is lost, and the feedback says the failure came from KVCache.update."""
    decode = cached_decoder(cache=WrongAxisCache)
    for check_id in ("kv_cache.encoder_once", "kv_cache.structure_hidden", "kv_cache.tokens", "kv_cache.tokens_hidden"):
        verdict, err = graded(check_id, decode, workdir)
        assert (err is not None or J.checks()[check_id].runs) and not verdict.ok and verdict.credit == 0, (
            verdict.message
        )
    for check_id in ("kv_cache.tokens", "kv_cache.tokens_hidden"):
        verdict, _ = graded(check_id, decode, workdir)
        message = " ".join(verdict.message.split())
        assert "The failure came from KVCache.update: the keys it returned" in message, message
    with pytest.raises(AssertionError, match="The failure came from KVCache.update"):  # the own run says it too
        own_run("kv_cache.tokens", decode, workdir)


def test_a_crash_in_the_decoder_itself_still_costs_the_structure_items(workdir):
    def broken(model, ques_b, n):
        model.encode(ques_b)
        raise IndexError("the decoder's own mistake")

    for check_id in ("kv_cache.encoder_once", "kv_cache.structure_hidden"):
        verdict, _ = graded(check_id, broken, workdir)
        assert not verdict.ok and "raised IndexError" in verdict.message and "came from KVCache" not in verdict.message


# --- the tokens alone decide (nothing recorded inside the kernel changes a score) ---------------


def _recorded_replaced(saved: bytes, step_logits) -> bytes:
    """The kernel's outputs with its recorded step logits (a hook on proj_to_vocab) replaced:
    removed when ``step_logits`` is None."""
    from encdec.grading import wire

    meta, arrays = wire.loads(saved)
    arrays.pop("step_logits", None)
    if step_logits is not None:
        arrays["step_logits"] = step_logits
    return wire.to_bytes(meta, arrays)


@pytest.mark.parametrize("check_id", ["kv_cache.tokens", "kv_cache.tokens_hidden"])
def test_the_recorded_step_logits_never_change_a_decoding_score(check_id, workdir):
    """A right decoding whose recorded logits are garbage or missing still passes; a wrong one
    whose recorded logits are forged to the reference's still fails."""
    import numpy as np

    from autograder.fixtures.in_process import run_once as _run_once

    inputs = graded_inputs(check_id, 7)
    right, _ = _run_once(check_id, cached_decoder(), workdir, inputs)
    ahead, _ = _run_once(check_id, cached_decoder(position=lambda t: t + 1), workdir, inputs)
    ref_logits = J.loaded(J.checks()[check_id], right, inputs)["step_logits"]
    for forged in (None, np.zeros_like(ref_logits), ref_logits + 1.0):
        assert J.verify(check_id, _recorded_replaced(right, forged), inputs).ok
    for forged in (None, ref_logits):
        verdict = J.verify(check_id, _recorded_replaced(ahead, forged), inputs)
        assert not verdict.ok and "position encodings one ahead" in " ".join(verdict.message.split())


@pytest.mark.parametrize(
    "name, decode",
    [
        ("positions skip one from step 2", cached_decoder(position=lambda t: t if t < 2 else t + 1)),
        ("positions stop advancing at 3", cached_decoder(position=lambda t: min(t, 3))),
        ("the oldest key dropped", cached_decoder(cache=DropsOldestCache)),
        ("values scaled by 1.05", cached_decoder(cache=ScalesValuesCache)),
    ],
)
def test_mistakes_no_judge_lists_return_other_tokens_for_every_student(name, decode):
    """The inputs are drawn so that the listed mistakes change the tokens; mistakes nobody listed
    must change them too, or the tokens could not decide alone (bench/bench_decode_detection.py
    prints the rate over many more students)."""
    secret = b"a course secret for this test only"
    for check_id in ("kv_cache.tokens", "kv_cache.tokens_hidden"):
        for student in STUDENTS[:10]:
            inputs = graded_inputs(check_id, J.check_seed(secret, student, "kv_cache", check_id))
            ref = greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=False)
            assert not torch.equal(decode(inputs["model"], inputs["ques"], inputs["n"]), ref), (name, check_id, student)


# --- the stretch: a decoder prefix of P > 1 tokens, prefilled at once ------------------------------


def test_every_student_gets_a_longer_prefix_and_the_visible_one_starts_with_the_lessons():
    """Every draw has P > 1 and no BOS or EOS after the first token; the inputs tell each prefill
    mistake apart by its tokens (build_prefill); the visible check's first row is BOS POSITIVE 0."""
    from encdec.data import BOS_ID, encode

    secret = b"a course secret for this test only"
    visible = J.checks()["kv_cache.prefill"].build(J.checks()["kv_cache.prefill"].seed)["prefix"]
    assert visible[0].tolist() == encode("BOS POSITIVE 0")
    for student in STUDENTS[:3]:
        drawn = graded_inputs(
            "kv_cache.prefill_hidden", J.check_seed(secret, student, "kv_cache", "kv_cache.prefill_hidden")
        )
        prefix = drawn["runs"]["prefill"]["prefix"]
        assert prefix.shape[1] > 1 and (prefix[:, 0] == BOS_ID).all()
        assert not ((prefix[:, 1:] == BOS_ID) | (prefix[:, 1:] == EOS_ID)).any()


@pytest.mark.parametrize("mode", ["prefill_no_mask", "prefill_last_only", "prefill_pos_restarted", "stepwise"])
def test_each_prefill_mistake_loses_the_item_and_a_stepwise_prefill_misses_one_part(mode, workdir):
    """Feeding the prefix one token at a time through the cache returns the right tokens but misses the
    part "the prefill is one call" (judged by cost, tests/test_grading_structure.py); each prefill
    mistake loses the item on every draw."""
    from autograder.judge import variants as Var

    def decode(model, ques, prefix, n):
        if mode != "stepwise":
            return Var.prefill_decode(model, ques, prefix, n, mode)[0]
        (N, P), caches = prefix.shape, new_caches(model)
        memory, pos = model.encode(ques), model.positions(P + n)
        tokens, done = prefix, torch.zeros(N, dtype=torch.bool)
        for i in range(P + n - 1):  # every token through the cache, one at a time, the prefix's too
            h = model.decoder(model.emb_layer(tokens[:, i : i + 1]) + pos[:, i : i + 1], memory, None, caches=caches)
            if i >= P - 1:
                nxt, done = pick_next(model.proj_to_vocab(h[:, -1]), done)
                tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        return tokens

    secret = b"a course secret for this test only"
    for student in STUDENTS[:3]:  # the visible check's inputs: the fixtures and the catalogue
        seed = J.check_seed(secret, student, "kv_cache", "kv_cache.prefill_hidden")
        verdict, _ = graded("kv_cache.prefill_hidden", decode, workdir, seed=seed)
        if mode == "stepwise":
            assert verdict.label == "prefill_not_one_call" and verdict.missed == ["the prefill is one call"], (
                verdict.message
            )
        else:  # the graded runs' inputs are drawn for their cost: the tokens fail both parts (named where they can be)
            assert not verdict.ok and verdict.credit == 0, (student, verdict.message)


# Seeds on which the "prefill" run, drawn for its cost alone, let a prefill mistake return the
# reference tokens (a 1,024-token prefix averages a missing mask away): kv_bug_prefill_no_mask scored
# half the item on a fresh clone's secret. Found by search over seeds 0-39, kept as fixtures.
PREFILL_RUN_SEEDS = {10: ("prefill_no_mask", "prefill_last_only"), 11: ("prefill_no_mask", "prefill_pos_restarted")}


@pytest.mark.parametrize("seed", sorted(PREFILL_RUN_SEEDS))
def test_each_prefill_mistake_changes_the_tokens_of_every_structure_run(seed):
    """A structure run's tokens decide its part of the prefill item, so each run is drawn until every
    known prefill mistake returns other tokens than the reference (run_draws.build_run)."""
    from autograder.judge import run_draws as R
    from autograder.judge import variants as Var

    drawn = R.build_run("prefill", seed, prefix=True)
    mistakes = Var.prefill_variants(drawn["model"], drawn["ques"], drawn["prefix"], drawn["n"])
    assert set(mistakes) == set(Var.PREFILL)
    for name, (tokens, _) in mistakes.items():
        assert not torch.equal(tokens, drawn["tokens"]), (seed, name, PREFILL_RUN_SEEDS[seed])

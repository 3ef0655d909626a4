"""The decoding checks (kv_cache) on their own, no nbgrader: the cached decoders the lesson's
mistakes make, the rule ``pick_next`` states (a finished row keeps producing EOS) exercised on
every seed, and a crash that costs only the items of the function it came from."""

from __future__ import annotations

import pytest
import torch

from autograder import judge as J
from encdec import attention as A
from encdec.data import EOS_ID
from encdec.generate import greedy_decode, new_caches

from grading_support import cached_decoder, graded, own_run, plain_argmax


@pytest.fixture()
def workdir(tmp_path):
    return tmp_path


def test_cached_reference_decoder_matches_greedy_decode():
    inputs = J.CHECKS["kv_cache.tokens"].build(J.CHECKS["kv_cache.tokens"].seed)
    ours = cached_decoder()(inputs["model"], inputs["ques"], inputs["n"])
    assert torch.equal(ours, greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=True))
    assert len(new_caches(inputs["model"])) == inputs["model"].config.num_dec_layers


# --- the rule pick_next states is exercised on every seed ---------------------------------------

# a right cached decoder that chooses with a plain argmax: a finished row goes on decoding
plain_argmax_decoder = cached_decoder(choose=plain_argmax)
STUDENTS = [f"student{i:02d}" for i in range(20)]


def test_decoding_inputs_have_rows_that_finish_early_and_rows_that_never_finish():
    secret = b"a course secret for this test only"
    # (the structure checks' runs decode every row to the end by design: no EOS, the cost is the structure's)
    for check_id in ("kv_cache.tokens", "kv_cache.tokens_hidden"):
        for student in STUDENTS:
            inputs = J.graded_inputs(check_id, J.check_seed(secret, student, "kv_cache", check_id))
            tokens = greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=False)  # (N, 1 + n)
            eos = tokens[:, 1:] == EOS_ID  # (N, n)
            assert (~eos.any(dim=1)).any(), f"{check_id}/{student}: every row finishes"
            assert eos[:, :-1].any(), f"{check_id}/{student}: no row finishes before the last step"


@pytest.mark.parametrize("check_id", ["kv_cache.tokens", "kv_cache.tokens_hidden"])
def test_a_decoder_that_ignores_finished_rows_fails_for_every_student(check_id, workdir):
    secret = b"a course secret for this test only"
    for student in STUDENTS:
        verdict, _ = graded(check_id, plain_argmax_decoder, workdir, seed=J.check_seed(secret, student, "kv_cache", check_id))
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
    """A decoding that cannot finish returns no tokens and has no cost to judge: every decoding item
    is lost, and the feedback says the failure came from KVCache.update."""
    decode = cached_decoder(cache=WrongAxisCache)
    for check_id in ("kv_cache.encoder_once", "kv_cache.structure_hidden", "kv_cache.tokens", "kv_cache.tokens_hidden"):
        verdict, err = graded(check_id, decode, workdir)
        assert err is not None and not verdict.ok and verdict.credit == 0, verdict.message
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

"""The hidden checks exercise every rule the spec states, for every student: for the block,
batch items whose masks differ, one head and several, a batch of one, and Kq != Ka (a block that
reads only the first item's mask passes the visible check and fails the hidden ones); for the
model, a batch of one and several; for the cache, one sequence and head as well as several."""

from __future__ import annotations

import pytest
import torch
from grading_support import block_with, graded, lesson_forward

from autograder import judge as J
from encdec import attention as A
from encdec import model as M

SEEDS = range(40)


@pytest.fixture
def workdir(tmp_path):
    return tmp_path


def _differ(mask: torch.Tensor) -> bool:
    return any(not torch.equal(mask[0], m) for m in mask[1:])


def test_every_seed_has_differing_masks_one_head_several_heads_and_a_batch_of_one():
    for seed in SEEDS:
        plain = J.graded_inputs("decoder_block.output_hidden", seed)
        causal = J.graded_inputs("decoder_block.causal_hidden", seed)
        question = J.graded_inputs("decoder_block.question_hidden", seed)
        for inputs in (plain, causal):
            assert inputs["dims"]["N"] >= 2 and _differ(inputs["mask"]), seed
        assert causal["dims"]["H"] == 1 and plain["dims"]["H"] > 1 and question["dims"]["H"] > 1, seed
        assert question["dims"]["N"] == 1, seed
        for inputs in (plain, causal, question):
            d = inputs["dims"]
            assert d["Kq"] != d["Ka"], seed
            causal_part = torch.triu(torch.ones(d["Ka"], d["Ka"], dtype=torch.bool), diagonal=1)
            assert (inputs["mask"] >= causal_part).all(), "the future stays masked"
            assert not inputs["mask"][..., 0].any(), "every query keeps a key"


def test_a_block_that_reads_only_the_first_items_mask_fails_the_hidden_checks(workdir):
    first_only = block_with(lambda s, x, e, m: lesson_forward(s, x, e, m[:1].expand_as(m)))
    visible, _ = graded("decoder_block.output", first_only, workdir)
    assert visible.ok  # the visible inputs share one mask: this mistake hides there
    for check_id in ("decoder_block.output_hidden", "decoder_block.causal_hidden"):
        verdict, _ = graded(check_id, first_only, workdir)
        assert not verdict.ok and "did not match the reference" in verdict.message, check_id
        assert "Diagnosis:" not in verdict.message  # no known mistake has this output: nothing is named


def test_the_models_hidden_checks_run_a_batch_of_one_and_larger_batches():
    for seed in SEEDS:
        sizes = {
            c: J.graded_inputs(f"target_slicing.{c}_hidden", seed)["dims"] for c in ("forward", "causal", "question")
        }
        assert sizes["question"]["N"] == 1 and sizes["forward"]["N"] >= 2 and sizes["causal"]["N"] >= 2, seed
        assert all(d["Kq"] != d["Ka"] for d in sizes.values()), seed


def test_the_caches_hidden_check_is_a_batch_of_one_with_one_head_and_the_visible_one_is_not():
    visible = J.graded_inputs("kv_cache.update", 0)["dims"]
    assert visible["N"] > 1 and visible["H"] > 1
    for seed in SEEDS:
        dims = J.graded_inputs("kv_cache.update_hidden", seed)["dims"]
        assert dims["N"] == 1 and dims["H"] == 1, seed


class RecomputedPositions(M.Transformer):
    """A forward that makes its own positions instead of adding the ones it is given (right on the
    model's own positions, for any encoding: positions(Ka)[:, :-1] is what the lesson adds)."""

    def forward(self, ques_b, ques_pos, ans_b, ans_pos):
        enc_out = self.encode(ques_b)  # (N, Kq, M), with the model's own question positions
        x = self.emb_layer(ans_b[:, :-1]) + self.positions(ans_b.shape[1])[:, :-1]  # (N, Ka-1, M)
        return self.proj_to_vocab(self.decoder(x, enc_out, A.get_subsequent_mask(ans_b[:, :-1])))


@pytest.mark.parametrize(
    "check_id", ["target_slicing.forward_hidden", "target_slicing.causal_hidden", "target_slicing.question_hidden"]
)
def test_a_forward_that_makes_its_own_positions_fails_every_hidden_probe_for_every_student(check_id, workdir):
    """The hidden probes call the model with positions of the grader's drawing, so a forward that
    ignores them fails each probe by construction (the probes once drew the encoding by the seed's
    parity, and such a forward passed all three with probability 1/8)."""
    for student in range(12):
        verdict, _ = graded(
            check_id, RecomputedPositions, workdir, seed=J.check_seed(b"s", f"s{student}", "ts", check_id)
        )
        assert not verdict.ok, (check_id, student)
    passed, _ = graded("target_slicing.forward", RecomputedPositions, workdir)  # on its own positions it is right
    assert passed.ok

"""Stage-by-stage diagnosis: for a wrong block or model, the feedback says which given submodule
first received something the lesson's wiring does not give it (which tensor fed Q, K or V, which
residual went to which norm, whether the MLP ran, where the mask went, whether something random
ran in eval mode). The kernel only records (``encdec.grading.stages``); the grader compares
(``autograder.judge.stages``). Known variants keep their names; the stage is then a supporting line.
"""

from __future__ import annotations

import ast
from pathlib import Path

import grading_support as support
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autograder import judge as J
from autograder.judge import labels as L
from autograder.judge import stages as St
from encdec import model as M
from encdec.grading import wire
from encdec.grading.calls import call
from encdec.grading.stages import BLOCK, MODEL, recording

ROOT = Path(__file__).resolve().parents[1]
BLOCK_CHECKS = (
    "decoder_block.output",
    "decoder_block.output_hidden",
    "decoder_block.causal_hidden",
    "decoder_block.question_hidden",
)
MODEL_CHECKS = (
    "target_slicing.forward",
    "target_slicing.forward_hidden",
    "target_slicing.causal_hidden",
    "target_slicing.question_hidden",
)


def graded(check_id, impl, workdir, seed=7):
    """The verdict of a graded run (the grader judges what was saved, even after a crash)."""
    return support.graded(check_id, impl, workdir, seed)[0]


def block(
    ln2_res="out_2", ff_in="out_4", self_mask=True, cross_mask=False, self_kv="dec", cross_q="out_2", dropout=False
):
    """A DecoderBlock whose forward is the lesson's with one wire moved."""

    class Block(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            kv = enc_inp if self_kv == "enc" else dec_inp
            out_1 = self.attention_self(dec_inp, kv, kv, mask if self_mask else None)
            out_1 = F.dropout(out_1, 0.1) if dropout else out_1
            out_2 = self.layer_norm_1(dec_inp + out_1)
            q = {"out_2": out_2, "enc": enc_inp, "dec": dec_inp}[cross_q]
            kv2 = out_2 if cross_q == "enc" else enc_inp
            out_3 = self.attention_cross(q, kv2, kv2, mask) if cross_mask else self.attention_cross(q, kv2, kv2)
            out_4 = self.layer_norm_2((dec_inp if ln2_res == "dec" else out_2) + out_3)
            out_5 = self.feed_forward(out_2 if ff_in == "out_2" else out_4)
            return self.layer_norm_3(out_4 + out_5)

    return Block


def model(memory="encoder", dropout=False):
    class Model(M.Transformer):
        def forward(self, ques_b, ques_pos, ans_b, ans_pos):
            q_emb_inp = self.emb_layer(ques_b) + ques_pos
            enc_out = self.encoder(q_emb_inp)
            x = self.emb_layer(ans_b)[:, :-1] + ans_pos[:, :-1]
            out = self.decoder(x, enc_out if memory == "encoder" else q_emb_inp, M.get_subsequent_mask(ans_b[:, :-1]))
            return self.proj_to_vocab(F.dropout(out, 0.1) if dropout else out)

    return Model


def flat(text: str) -> str:
    return " ".join(text.split())


def test_the_lessons_own_wiring_shows_no_differing_stage():
    b = M.DecoderBlock(2, 16, 32, 0.1).eval()
    dec, enc = torch.randn(2, 4, 16), torch.randn(2, 7, 16)
    mask = M.get_subsequent_mask(torch.zeros(2, 4, dtype=torch.long))
    with recording(b, "trace/out") as trace, torch.no_grad():
        y = b(dec, enc, mask)
    assert {k.split("/")[3] for k in trace} == set(BLOCK)  # every given part, once
    got = {**trace, "out": y.numpy()}
    assert St.block_stage(got, "out", dec.numpy(), enc.numpy(), mask.numpy()) is None
    got["out"] = y.numpy() + 1.0
    assert "the returned output" in str(St.block_stage(got, "out", dec.numpy(), enc.numpy(), mask.numpy()))


UNNAMED = [  # (implementation, what the first differing stage must say)
    (block(ln2_res="dec"), "layer_norm_2 (the norm after cross-attention): its input was dec_inp + out_3"),
    (block(ff_in="out_2"), "feed_forward (the MLP): its input was out_2"),
    (block(self_mask=False, cross_mask=True), "it received no mask (it went to attention_cross)"),
    (block(self_kv="enc"), "attention_self (masked self-attention): its key was enc_inp"),
]


@pytest.mark.parametrize("impl,stage", UNNAMED, ids=[s[:30] for _, s in UNNAMED])
@pytest.mark.parametrize("check_id", BLOCK_CHECKS)
def test_a_mistake_no_variant_reproduces_is_located_and_observed_not_named(check_id, impl, stage, tmp_path):
    verdict = graded(check_id, impl, tmp_path)
    message = flat(verdict.message)
    assert not verdict.ok and stage in message, message
    assert "Diagnosis:" not in message
    assert verdict.label.startswith("observed:stage:") and L.kind(verdict.label) == "observed"


def test_the_same_mistake_gets_the_same_label_whatever_the_sizes(tmp_path):
    found = {graded(c, block(ln2_res="dec"), tmp_path, seed=s).label for c in BLOCK_CHECKS for s in (1, 2)}
    assert found == {"observed:stage:argument_was:layer_norm_2:input"}


@pytest.mark.parametrize("check_id", BLOCK_CHECKS)
def test_a_known_variant_keeps_its_name_and_the_stage_supports_it(check_id, tmp_path):
    verdict = graded(check_id, block(self_mask=False), tmp_path)
    message = flat(verdict.message)
    assert "Diagnosis: no mask" in message and verdict.label == "no_mask"
    assert "Stage by stage, the first stage that differs from the lesson's block is attention_self" in message
    verdict = graded(check_id, block(cross_q="dec"), tmp_path)
    assert "its query was dec_inp" in flat(verdict.message) and verdict.label == "cross_reads_dec_inp"


@pytest.mark.parametrize("check_id", BLOCK_CHECKS)
def test_active_dropout_is_located_at_the_first_stage_whose_input_was_random(check_id, tmp_path):
    verdict = graded(check_id, block(dropout=True), tmp_path)
    message = flat(verdict.message)
    assert "Observed: the modules are in eval mode" in message and verdict.label == "observed_random"
    assert "layer_norm_1's input differed between the two runs" in message and "attention_self's output" in message


@pytest.mark.parametrize("check_id", MODEL_CHECKS)
def test_the_model_stage_says_what_the_decoder_read_as_memory(check_id, tmp_path):
    verdict = graded(check_id, model(memory="embeddings"), tmp_path)
    message = flat(verdict.message)
    assert "decoder (the decoder stack): its enc_out was emb_layer(ques_b) + ques_pos" in message
    assert "Diagnosis:" not in message and L.kind(verdict.label) == "observed"
    verdict = graded(check_id, model(dropout=True), tmp_path)
    assert "proj_to_vocab's input differed between the two runs" in flat(verdict.message)


@pytest.mark.parametrize("check_id", BLOCK_CHECKS[:2] + MODEL_CHECKS[:2])
def test_a_right_solution_records_every_stage_and_still_passes(check_id, tmp_path):
    impl = block() if check_id.startswith("decoder_block") else model()
    assert graded(check_id, impl, tmp_path).ok
    meta, arrays = wire.loads(J.wire_bytes(check_id, J.graded_inputs(check_id, 7)))
    saved = call(meta, arrays, impl)  # what the kernel saves: outputs and the stages' record
    given = BLOCK if check_id.startswith("decoder_block") else MODEL
    assert {k.split("/")[3] for k in saved if k.startswith("trace/")} == set(given)


def test_the_recorder_is_data_only():
    """The kernel side records; it imports nothing that knows an answer."""
    tree = ast.parse((ROOT / "encdec" / "grading" / "stages.py").read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert names <= {"__future__", "collections.abc", "contextlib", "typing", "numpy", "torch"}, names


def test_norms_in_each_others_places_are_traced_to_the_other_norms_output(tmp_path):
    class Swapped(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            out_2 = self.layer_norm_2(dec_inp + self.attention_self(dec_inp, dec_inp, dec_inp, mask))
            out_4 = self.layer_norm_1(out_2 + self.attention_cross(out_2, enc_inp, enc_inp))
            return self.layer_norm_3(out_4 + self.feed_forward(out_4))

    message = flat(graded("decoder_block.output", Swapped, tmp_path).message)
    assert "Diagnosis: layer norms used in the wrong places" in message
    assert (
        "layer_norm_1 (the norm after self-attention): its input was layer_norm_2's output + attention_cross's output"
        in message
    )


def test_a_forged_record_loses_the_stage_line_never_the_verdict(tmp_path):
    inputs = J.graded_inputs("decoder_block.output", 7)
    saved = {
        "out": np.zeros((2, 5, 16), np.float32),
        "out_again": np.zeros((2, 5, 16), np.float32),
        "trace/out/00/attention_self/query": np.array(["not", "a", "tensor"]),
        "trace/out/01/layer_norm_1/input": np.zeros((3,), np.int8),
        "trace/out/xx/feed_forward/input": np.ones(2),
    }
    verdict = J.verify("decoder_block.output", wire.to_bytes({"status": "ok"}, saved), inputs)
    assert not verdict.ok and "did not match the reference" in verdict.message


DECODING = [  # one token per step: a cache that keeps only the newest holds 1 position
    (support.cached_decoder(), None),
    (support.cached_decoder(position=lambda t: t + 1), "step 1: token 0 was fed at position 1 (ans_pos[:, 1:2])"),
    (
        support.cached_decoder(cache=support.OverwritingCache),
        "step 3, decoder layer 0: its self-attention got a cache whose keys cache.k held 1 position",
    ),
]


@pytest.mark.parametrize("impl,stage", DECODING, ids=["lesson", "positions ahead", "newest only"])
@pytest.mark.parametrize("check_id", ("kv_cache.tokens", "kv_cache.tokens_hidden"))
def test_decoding_names_the_first_step_and_layer_whose_token_position_or_cache_differs(check_id, impl, stage, tmp_path):
    verdict = graded(check_id, impl, tmp_path)
    if stage is None:
        assert verdict.ok, verdict.message
        return
    message = flat(verdict.message)
    assert not verdict.ok and f"the first stage that differs from the lesson's decoding is {stage}" in message, message

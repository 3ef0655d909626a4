"""The check library on its own (no nbgrader): reference code passes every check, known bugs are
named, stubs say "not implemented", and the trusted ``verify`` judges only what it can trust."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from encdec import attention as A
from encdec import model as M
from encdec.data import BOS_ID, EOS_ID
from encdec.generate import greedy_decode, new_caches
from encdec.grading import checks as C


def _pick_next(logits, done):
    nxt = logits.argmax(-1)
    nxt = torch.where(done, torch.full_like(nxt, EOS_ID), nxt)
    return nxt, done | (nxt == EOS_ID)


def make_decoder(pos_bug=False, encoder_every_step=False, cache_class=A.KVCache):
    @torch.no_grad()
    def decode(model, ques_b, n):
        N = ques_b.shape[0]
        tokens = torch.full((N, 1), BOS_ID, dtype=torch.long)
        ans_pos = model.positions(1 + n)
        memory = model.encode(ques_b)
        caches = [(cache_class(), cache_class(static=True)) for _ in model.decoder.layers]
        done = torch.zeros(N, dtype=torch.bool)
        for t in range(n):
            if encoder_every_step:
                memory = model.encode(ques_b)
            x = model.emb_layer(tokens[:, -1:]) + (ans_pos[:, :1] if pos_bug else ans_pos[:, t : t + 1])
            h = model.decoder(x, memory, None, caches=caches)
            nxt, done = _pick_next(model.proj_to_vocab(h[:, -1]), done)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        return tokens

    return decode


class OverwritingCache(A.KVCache):
    def update(self, k_new, v_new):
        self.k, self.v = k_new, v_new
        return self.k, self.v


def block_with(body):
    class Block(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            return body(self, dec_inp, enc_inp, mask)

    return Block


def _post(s, x, enc, mask, self_mask="mask", q="out_2", res2=True, mlp=True):
    out_1 = s.attention_self(x, x, x, mask if self_mask == "mask" else None)
    out_2 = s.layer_norm_1(x + out_1)
    out_3 = s.attention_cross(out_2 if q == "out_2" else x, enc, enc)
    out_4 = s.layer_norm_2(out_2 + out_3 if res2 else out_3)
    out_5 = s.feed_forward(out_4) if mlp else torch.zeros_like(out_4)
    return s.layer_norm_3(out_4 + out_5)


class ShiftedPositions(M.Transformer):
    def forward(self, ques_b, ques_pos, ans_b, ans_pos):
        enc = self.encoder(self.emb_layer(ques_b) + ques_pos)
        x = self.emb_layer(ans_b[:, :-1]) + ans_pos[:, 1:]
        return self.proj_to_vocab(self.decoder(x, enc, M.get_subsequent_mask(ans_b[:, :-1])))


class UnslicedPositions(M.Transformer):
    def forward(self, ques_b, ques_pos, ans_b, ans_pos):
        enc = self.encoder(self.emb_layer(ques_b) + ques_pos)
        x = self.emb_layer(ans_b)[:, :-1] + ans_pos
        return self.proj_to_vocab(self.decoder(x, enc, M.get_subsequent_mask(ans_b[:, :-1])))


REFERENCE = {
    "decoder_block.mask": A.get_subsequent_mask,
    "decoder_block.masked_softmax": A.masked_softmax,
    "decoder_block.shapes": M.DecoderBlock,
    "decoder_block.output": M.DecoderBlock,
    "decoder_block.causal": M.DecoderBlock,
    "decoder_block.question": M.DecoderBlock,
    "target_slicing.shift": M.shift_targets,
    "target_slicing.forward_shapes": M.Transformer,
    "target_slicing.forward": M.Transformer,
    "target_slicing.causal": M.Transformer,
    "target_slicing.question": M.Transformer,
    "target_slicing.loss": lambda logits, ans: M.sequence_loss(logits, ans[:, 1:]),
    "kv_cache.update": A.KVCache,
    "kv_cache.tokens": make_decoder(),
    "kv_cache.encoder_once": make_decoder(),
    "kv_cache.one_token_per_step": make_decoder(),
    "kv_cache.structure": make_decoder(),
}


def reference_impl(check_id):
    return REFERENCE[check_id.removesuffix("_hidden")]


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / C.GRADING_DIR).mkdir()
    (tmp_path / C.GRADING_DIR / C.SEED_FILE).write_text(json.dumps({"seed": 12345}))
    return tmp_path


@pytest.mark.parametrize("check_id", sorted(C.CHECKS))
def test_reference_passes_every_check_in_kernel_and_trusted(check_id, workdir):
    C.run(check_id, reference_impl(check_id))
    result = C.verify(check_id, workdir, 12345)
    assert result.ok, result.message


BUGS = [
    # (check, implementation, diagnosis substring)
    ("decoder_block.mask", lambda seq: torch.tril(torch.ones(seq.shape[1], seq.shape[1], dtype=torch.bool)).expand(seq.shape[0], -1, -1), "mask inverted"),
    ("decoder_block.masked_softmax", lambda s, m: torch.softmax(s, -1).masked_fill(m, 0.0), "mask applied after softmax"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, m, self_mask=None)), "no mask"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, m, q="dec")), "read the decoder input"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, m, res2=False)), "residual is missing"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, m, mlp=False)), "MLP was skipped"),
    ("decoder_block.output", block_with(lambda s, x, e, m: _post(s, x, e, ~m)), "mask inverted"),
    ("target_slicing.shift", lambda a: (a[:, 1:], a[:, :-1]), "shift reversed"),
    ("target_slicing.shift", lambda a: (a, a), "no shift"),
    ("target_slicing.shift", lambda a: (a[:, :-1], a), "labels not sliced"),
    ("target_slicing.forward", ShiftedPositions, "sliced from the wrong end"),
    ("target_slicing.forward", UnslicedPositions, "position encodings not sliced"),
    ("target_slicing.loss", lambda lg, a: M.sequence_loss(lg, a[:, :-1]), "labels not shifted"),
    ("kv_cache.update", OverwritingCache, "only the newest"),
    ("kv_cache.tokens", make_decoder(pos_bug=True), "not position 0"),
    ("kv_cache.tokens", make_decoder(cache_class=OverwritingCache), "only the newest token"),
    ("kv_cache.encoder_once", make_decoder(encoder_every_step=True), "encoder re-ran every decoding step"),
]


@pytest.mark.parametrize("check_id,impl,diagnosis", BUGS, ids=[f"{b[0]}-{b[2]}" for b in BUGS])
def test_known_bug_fails_with_its_diagnosis(check_id, impl, diagnosis, workdir):
    with pytest.raises(AssertionError) as err:
        C.run(check_id, impl)
    trusted = C.verify(check_id, workdir, 12345)
    assert not trusted.ok
    if diagnosis is not None:  # messages are wrapped: compare with single spaces
        assert diagnosis in " ".join(str(err.value).split())
        assert diagnosis in " ".join(trusted.message.split())
    # the message says what was expected and what came out
    assert "expected" in trusted.message or "raised" in trusted.message


def test_at_least_eight_misconceptions_are_named_by_the_bug_table():
    named = {d for _, _, d in BUGS if d}
    assert len(named) >= 8


def test_cross_attention_query_from_encoder_is_named(workdir):
    body = block_with(lambda s, x, e, m: s.layer_norm_2(s.layer_norm_1(x + s.attention_self(x, x, x, m)) + s.attention_cross(e, x, x)))
    with pytest.raises(AssertionError) as err:
        C.run("decoder_block.output", body)
    assert "Q taken from the encoder" in " ".join(str(err.value).split())


def test_stub_reports_not_implemented(workdir):
    def stub(*args):
        raise NotImplementedError()

    with pytest.raises(AssertionError, match="not implemented yet"):
        C.run("target_slicing.shift", stub)
    assert "not implemented" in C.verify("target_slicing.shift", workdir, 12345).message


def test_verify_without_saved_outputs_scores_zero(workdir):
    result = C.verify("decoder_block.output", workdir, 12345)
    assert not result.ok and "did not run" in result.message


def test_verify_refuses_pickled_outputs(workdir):
    np.savez(workdir / C.GRADING_DIR / "target_slicing.shift.npz", dec_in=np.array([object()], dtype=object))
    result = C.verify("target_slicing.shift", workdir, 12345)
    assert not result.ok and "safely" in result.message


def test_verify_refuses_links_and_zip_bombs(workdir):
    secret = workdir / "secret.npz"
    np.savez(secret, dec_in=np.zeros(3))
    (workdir / C.GRADING_DIR / "target_slicing.shift.npz").symlink_to(secret)
    result = C.verify("target_slicing.shift", workdir, 12345)
    assert not result.ok and "symbolic link" in result.message
    np.savez_compressed(workdir / C.GRADING_DIR / "target_slicing.loss.npz", loss=np.zeros(C.MAX_OUTPUT_BYTES // 8 + 1))
    result = C.verify("target_slicing.loss", workdir, 12345)
    assert not result.ok and "unpacks to" in result.message


def test_hidden_inputs_come_from_the_graders_seed_not_the_file(workdir):
    # The kernel rewrites seed.json before running: its outputs are for inputs the grader does not use.
    (workdir / C.GRADING_DIR / C.SEED_FILE).write_text(json.dumps({"seed": 999}))
    C.run("decoder_block.output_hidden", M.DecoderBlock)
    assert C.verify("decoder_block.output_hidden", workdir, 999).ok
    assert not C.verify("decoder_block.output_hidden", workdir, 12345).ok


def test_replaying_visible_outputs_fails_hidden_checks(workdir):
    stored = C.reference_outputs("decoder_block.output")["out"]

    class Replay(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            return torch.from_numpy(stored) if stored.shape == tuple(dec_inp.shape) else torch.zeros_like(dec_inp)

    C.run("decoder_block.output", Replay)
    assert C.verify("decoder_block.output", workdir, 12345).ok
    with pytest.raises(AssertionError):
        C.run("decoder_block.output_hidden", Replay)
    assert not C.verify("decoder_block.output_hidden", workdir, 12345).ok


def test_layer_norms_have_distinct_nontrivial_parameters():
    block = C.randomize_(M.DecoderBlock(2, 16, 32, 0.1), 1)
    norms = [block.layer_norm_1, block.layer_norm_2, block.layer_norm_3]
    for ln in norms:
        assert not torch.allclose(ln.weight, torch.ones_like(ln.weight))
        assert not torch.allclose(ln.bias, torch.zeros_like(ln.bias))
    assert not torch.allclose(norms[0].weight, norms[1].weight)
    assert not block.training


def test_hidden_inputs_use_different_question_and_answer_lengths():
    for seed in range(5):
        inputs = C.CHECKS["decoder_block.output_hidden"].build(seed)
        assert inputs["dims"]["Kq"] != inputs["dims"]["Ka"]


def test_cached_reference_decoder_matches_greedy_decode():
    inputs = C.CHECKS["kv_cache.tokens"].build(C.CHECKS["kv_cache.tokens"].seed)
    ours = make_decoder()(inputs["model"], inputs["ques"], inputs["n"])
    assert torch.equal(ours, greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=True))
    assert len(new_caches(inputs["model"])) == inputs["model"].config.num_dec_layers

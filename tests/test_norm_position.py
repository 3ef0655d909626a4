"""The pre-norm option (ModelConfig.norm_position, chapter 12's norm experiment): a pre-norm model's
forward is the hand computation x + sublayer(norm(x)) with one norm closing each stack, and the
default is the post-norm model every shipped checkpoint was trained as."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from encdec.config import ModelConfig
from encdec.generate import greedy_decode
from encdec.model import Transformer, get_subsequent_mask
from encdec.train import PACKAGED_CHECKPOINTS, load_checkpoint

TINY = {"emb_dim": 4, "num_heads": 2, "feedforward_dim": 6, "num_enc_layers": 2, "num_dec_layers": 2, "dropout": 0.0}


def norm(ln, x):
    """Layer norm by hand: mean 0, variance 1 over the M features, then gain and bias."""
    mean, var = x.mean(-1, keepdim=True), x.var(-1, unbiased=False, keepdim=True)
    return (x - mean) / torch.sqrt(var + ln.eps) * ln.weight + ln.bias


def attend(mha, q_in, kv_in, forbidden=None):
    """Multi-head attention by hand, one head at a time."""
    H, M = mha.num_heads, q_in.shape[-1]
    Dh = M // H
    q, k, v = (x @ p.weight.T + p.bias for x, p in ((q_in, mha.q_proj), (kv_in, mha.k_proj), (kv_in, mha.v_proj)))
    heads = []
    for h in range(H):
        cols = slice(h * Dh, (h + 1) * Dh)
        scores = q[..., cols] @ k[..., cols].transpose(-1, -2) / Dh**0.5
        if forbidden is not None:
            scores = scores.masked_fill(forbidden, float("-inf"))
        heads.append(torch.softmax(scores, -1) @ v[..., cols])
    return torch.cat(heads, -1) @ mha.out_proj.weight.T + mha.out_proj.bias


def mlp(ff, x):
    return F.relu(x @ ff.linear_1.weight.T + ff.linear_1.bias) @ ff.linear_2.weight.T + ff.linear_2.bias


def by_hand(model, ques_b, ans_b):
    """The pre-norm forward written out: every sublayer reads norm(x) and adds to the raw x."""
    Kq, Ka = ques_b.shape[1], ans_b.shape[1]
    x = model.emb_layer.weight[ques_b] + model.positions(Kq)
    for b in model.encoder.layers:
        x = x + attend(b.attention_self, norm(b.layer_norm_1, x), norm(b.layer_norm_1, x))
        x = x + mlp(b.feed_forward, norm(b.layer_norm_2, x))
    memory = norm(model.encoder.layer_norm_final, x)
    y = model.emb_layer.weight[ans_b[:, :-1]] + model.positions(Ka)[:, :-1]
    future = torch.triu(torch.ones(Ka - 1, Ka - 1, dtype=torch.bool), 1)
    for b in model.decoder.layers:
        y = y + attend(b.attention_self, norm(b.layer_norm_1, y), norm(b.layer_norm_1, y), future)
        y = y + attend(b.attention_cross, norm(b.layer_norm_2, y), memory)
        y = y + mlp(b.feed_forward, norm(b.layer_norm_3, y))
    y = norm(model.decoder.layer_norm_final, y)
    return y @ model.proj_to_vocab.weight.T + model.proj_to_vocab.bias


def test_a_pre_norm_forward_is_the_hand_computation():
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**TINY, norm_position="pre")).eval()
    for p in model.parameters():  # gains and biases away from 1 and 0, so a misplaced norm shows
        torch.nn.init.normal_(p)
    ques_b, ans_b = torch.randint(0, 16, (3, 9)), torch.randint(0, 16, (3, 5))
    logits = model(ques_b, model.positions(9), ans_b, model.positions(5))
    torch.testing.assert_close(logits, by_hand(model, ques_b, ans_b), rtol=1e-5, atol=1e-4)
    assert get_subsequent_mask(ans_b[:, :-1]).shape == (3, 4, 4)


def test_pre_norm_decodes_the_same_with_and_without_the_cache():
    torch.manual_seed(1)
    model = Transformer(ModelConfig(**TINY, norm_position="pre")).eval()
    ques_b = torch.randint(0, 16, (4, 9))
    assert torch.equal(
        greedy_decode(model, ques_b, 4, use_cache=True), greedy_decode(model, ques_b, 4, use_cache=False)
    )


def test_post_is_the_default_and_adds_no_parameter():
    """Every shipped run loads strictly into the default model (a parameter more or less would fail
    the load) and its logits are its blocks chained with nothing after them; the shipped figures
    themselves are recomputed by tests/test_checkpoints.py."""
    assert ModelConfig().norm_position == "post"
    model = load_checkpoint(PACKAGED_CHECKPOINTS / "modern" / "model.pt")
    assert model.config.norm_position == "post"
    assert not any("layer_norm_final" in name for name in model.state_dict())
    ques_b, ans_b = torch.randint(0, 16, (2, 9)), torch.randint(0, 16, (2, 5))
    x = model.emb_layer(ques_b) + model.positions(9)
    for b in model.encoder.layers:
        x = b(x)
    y = model.emb_layer(ans_b[:, :-1]) + model.positions(5)[:, :-1]
    for b in model.decoder.layers:
        y = b(y, x, get_subsequent_mask(ans_b[:, :-1]))
    assert torch.equal(model(ques_b, model.positions(9), ans_b, model.positions(5)), model.proj_to_vocab(y))


def test_an_unknown_norm_position_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown norm_position 'middle'"):
        Transformer(ModelConfig(**TINY, norm_position="middle"))

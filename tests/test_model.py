"""The encoder-decoder: shapes, causality, the question's influence, lesson 12's numbers,
which parameters learn, parity with torch.nn, and the errors bad input gets."""

import math

import pytest
import torch
from torch import nn

from encdec.config import ModelConfig
from encdec.data import encode_answer, encode_question
from encdec.model import (
    DecoderBlock,
    EncoderBlock,
    MultiHeadAttention,
    Transformer,
    _check_shapes,
    position_encoding_simple,
    position_encoding_sinusoid,
    sequence_loss,
    shift_targets,
)

SMALL = ModelConfig(emb_dim=16, num_heads=4, feedforward_dim=32, num_enc_layers=2, num_dec_layers=2, dropout=0.0)
QUESTION = "BOS NEGATIVE 30 subtract NEGATIVE 34 EOS"
ANSWER = "BOS POSITIVE 04 EOS"


@pytest.fixture
def model():
    torch.manual_seed(0)
    return Transformer(SMALL).eval()


def lesson_batch():
    return torch.tensor([encode_question(QUESTION)]), torch.tensor([encode_answer(ANSWER)])


def logits_of(model, ques_b, ans_b):
    return model(ques_b, model.positions(ques_b.shape[1]), ans_b, model.positions(ans_b.shape[1]))


def test_module_shape_check_runs():
    _check_shapes()


def test_logits_shape_after_the_shift(model):
    ans_b = torch.randint(0, 16, (32, 5))
    ques_b = torch.randint(0, 16, (32, 9))
    assert logits_of(model, ques_b, ans_b).shape == (32, 4, 16)  # [32, 5] answers -> [32, 4, V]


def test_shift_targets_is_the_lesson_table():
    _, ans_b = lesson_batch()
    dec_in, labels = shift_targets(ans_b)
    assert dec_in.tolist() == [[14, 10, 0, 4]]  # BOS POSITIVE 0 4
    assert labels.tolist() == [[10, 0, 4, 15]]  # POSITIVE 0 4 EOS


def test_causality_changing_a_later_answer_token_leaves_earlier_logits(model):
    ques_b, ans_b = lesson_batch()
    base = logits_of(model, ques_b, ans_b)
    for t in range(1, 4):
        changed = ans_b.clone()
        changed[0, t] = (changed[0, t] + 3) % 16
        out = logits_of(model, ques_b, changed)
        assert torch.allclose(out[:, :t], base[:, :t], atol=1e-6), f"position < {t} saw token {t}"
        assert not torch.allclose(out[:, t], base[:, t])  # position t does read its own input


def test_without_the_mask_earlier_logits_would_change(model):
    ques_b, ans_b = lesson_batch()
    pos = model.positions(5)
    memory = model.encode(ques_b)
    x = model.emb_layer(ans_b[:, :-1]) + pos[:, :-1]
    changed = ans_b.clone()
    changed[0, 3] = 9
    x2 = model.emb_layer(changed[:, :-1]) + pos[:, :-1]
    unmasked = model.decoder(x, memory), model.decoder(x2, memory)
    assert not torch.allclose(unmasked[0][:, 0], unmasked[1][:, 0])  # label leakage


def test_cross_attention_carries_the_question(model):
    ques_b, ans_b = lesson_batch()
    other = torch.tensor([encode_question("BOS POSITIVE 12 add NEGATIVE 07 EOS")])
    assert not torch.allclose(logits_of(model, ques_b, ans_b), logits_of(model, other, ans_b))


def test_without_cross_attention_the_question_cannot_reach_the_logits(model):
    for block in model.decoder.layers:
        block.attention_cross.forward = lambda q, k, v, mask=None, cache=None: torch.zeros_like(q)
    ques_b, ans_b = lesson_batch()
    other = torch.tensor([encode_question("BOS POSITIVE 12 add NEGATIVE 07 EOS")])
    assert torch.allclose(logits_of(model, ques_b, ans_b), logits_of(model, other, ans_b))


def test_lesson_12_worked_numbers():
    assert -math.log(0.20) == pytest.approx(1.609, abs=5e-4)
    assert -math.log(0.40) == pytest.approx(0.916, abs=5e-4)
    # logits whose softmax is P(3)=0.55, P(4)=0.20, the remaining 14 tokens share 0.25
    p = torch.full((16,), 0.25 / 14)
    p[3], p[4] = 0.55, 0.20
    logits = p.log().requires_grad_()
    loss = nn.functional.cross_entropy(logits[None], torch.tensor([4]))
    loss.backward()
    assert loss.item() == pytest.approx(1.609, abs=5e-4)
    expected = p.clone()
    expected[4] -= 1  # p - one_hot
    assert torch.allclose(logits.grad, expected, atol=1e-6)
    assert logits.grad[4] < 0 < logits.grad[3]  # descent raises token 4, lowers token 3


def test_who_receives_gradient(model):
    model.train()
    ques_b, ans_b = lesson_batch()
    logits = logits_of(model, ques_b, ans_b)
    sequence_loss(logits, shift_targets(ans_b)[1]).backward()
    grad = model.emb_layer.weight.grad  # (V, M)
    used_by_question = set(ques_b[0].tolist())
    used_by_decoder_input = set(ans_b[0, :-1].tolist())
    used = used_by_question | used_by_decoder_input
    for token in range(16):
        nonzero = grad[token].abs().sum().item() > 0
        assert nonzero == (token in used), f"token {token}: gradient {nonzero}, used {token in used}"
    # Question-only rows (NEGATIVE=11, subtract=13, 3=3) learn through cross-attention alone.
    for token in used_by_question - used_by_decoder_input:
        assert grad[token].abs().sum() > 0
    named = dict(model.named_parameters())
    for name in [
        "decoder.layers.0.attention_cross.q_proj.weight",
        "encoder.layers.0.attention_self.k_proj.weight",
        "decoder.layers.1.feed_forward.linear_1.weight",
        "decoder.layers.0.layer_norm_2.weight",
        "proj_to_vocab.weight",
    ]:
        assert named[name].grad is not None and named[name].grad.abs().sum() > 0, name
    assert not any("mask" in name for name in named)  # the mask is a constraint, not a parameter


def copy_mha(ours: MultiHeadAttention, theirs: nn.MultiheadAttention):
    M = ours.emb_dim
    with torch.no_grad():
        for i, proj in enumerate((ours.q_proj, ours.k_proj, ours.v_proj)):
            proj.weight.copy_(theirs.in_proj_weight[i * M : (i + 1) * M])
            proj.bias.copy_(theirs.in_proj_bias[i * M : (i + 1) * M])
        ours.out_proj.weight.copy_(theirs.out_proj.weight)
        ours.out_proj.bias.copy_(theirs.out_proj.bias)


def randomise_norms(*norms):
    with torch.no_grad():
        for norm in norms:
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.5, 0.5)


def test_parity_multi_head_attention_with_torch():
    torch.manual_seed(2)
    theirs = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    ours = MultiHeadAttention(4, 16).eval()
    copy_mha(ours, theirs)
    q, kv = torch.randn(3, 5, 16), torch.randn(3, 9, 16)
    mask = torch.rand(5, 9) > 0.7
    mask[:, 0] = False  # keep one source per row
    expected, expected_w = theirs(q, kv, kv, attn_mask=mask, average_attn_weights=False)
    got = ours(q, kv, kv, mask)
    assert torch.allclose(got, expected, atol=1e-5)
    assert torch.allclose(ours.last_attention, expected_w, atol=1e-5)


def test_parity_decoder_block_with_torch():
    torch.manual_seed(3)
    theirs = nn.TransformerDecoderLayer(16, 4, 32, dropout=0.1, batch_first=True).eval()
    ours = DecoderBlock(4, 16, 32, 0.1).eval()
    randomise_norms(theirs.norm1, theirs.norm2, theirs.norm3)
    copy_mha(ours.attention_self, theirs.self_attn)
    copy_mha(ours.attention_cross, theirs.multihead_attn)
    ours.feed_forward.linear_1.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.linear_2.load_state_dict(theirs.linear2.state_dict())
    for a, b in (
        (ours.layer_norm_1, theirs.norm1),
        (ours.layer_norm_2, theirs.norm2),
        (ours.layer_norm_3, theirs.norm3),
    ):
        a.load_state_dict(b.state_dict())
    dec, enc = torch.randn(2, 5, 16), torch.randn(2, 9, 16)
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)
    expected = theirs(dec, enc, tgt_mask=causal)
    got = ours(dec, enc, causal.expand(2, 5, 5))
    assert torch.allclose(got, expected, atol=1e-5)


def test_parity_encoder_block_with_torch():
    torch.manual_seed(4)
    theirs = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.1, batch_first=True).eval()
    ours = EncoderBlock(4, 16, 32, 0.1).eval()
    randomise_norms(theirs.norm1, theirs.norm2)
    copy_mha(ours.attention_self, theirs.self_attn)
    ours.feed_forward.linear_1.load_state_dict(theirs.linear1.state_dict())
    ours.feed_forward.linear_2.load_state_dict(theirs.linear2.state_dict())
    ours.layer_norm_1.load_state_dict(theirs.norm1.state_dict())
    ours.layer_norm_2.load_state_dict(theirs.norm2.state_dict())
    x = torch.randn(2, 9, 16)
    assert torch.allclose(ours(x), theirs(x), atol=1e-5)


def test_position_encodings():
    simple = position_encoding_simple(5, 4)
    assert simple.shape == (1, 5, 4) and torch.allclose(simple[0, :, 0], torch.arange(5) / 5)
    sin = position_encoding_sinusoid(6, 8)
    p, i = 3, 1  # feature 2i = 2 has frequency 1 / 10000^(2/8)
    assert sin[0, p, 2].item() == pytest.approx(math.sin(p / 10000 ** (2 * i / 8)), abs=1e-6)
    assert sin[0, p, 3].item() == pytest.approx(math.cos(p / 10000 ** (2 * i / 8)), abs=1e-6)
    assert not torch.allclose(sin[0, :, 2], sin[0, :, 0])  # frequencies differ (the original's did not)
    assert position_encoding_sinusoid(4, 7).shape == (1, 4, 7)  # odd widths work too


def test_transformer_errors_name_the_shapes(model):
    ques_b, ans_b = lesson_batch()
    qp, ap = model.positions(9), model.positions(5)
    with pytest.raises(ValueError, match=r"ans_pos of shape \(1, 4, 16\).*\(1, 5\).*expected"):
        model(ques_b, qp, ans_b, ap[:, :4])
    with pytest.raises(ValueError, match=r"batch sizes differ.*\(1, 9\).*\(2, 5\)"):
        model(ques_b, qp, ans_b.repeat(2, 1), ap)
    with pytest.raises(ValueError, match=r"ques_b must be integer token ids of shape \(N, K\)"):
        model(ques_b[0], qp, ans_b, ap)
    with pytest.raises(ValueError, match=r"logits \(1, 4, 16\) do not align with labels \(1, 5\)"):
        sequence_loss(logits_of(model, ques_b, ans_b), ans_b)
    with pytest.raises(ValueError, match="position_encoding"):
        Transformer(ModelConfig(position_encoding="learned"))
    with pytest.raises(ValueError, match=r"\(N, Ka\)"):
        shift_targets(ans_b[0])

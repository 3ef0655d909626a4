"""Greedy decoding: the encoder runs once, the cache changes speed but never tokens."""

import pytest
import torch

from encdec.config import ModelConfig
from encdec.data import BOS_ID, EOS_ID
from encdec.generate import exact_match, greedy_decode
from encdec.model import Transformer


@pytest.fixture
def model():
    torch.manual_seed(0)
    config = ModelConfig(
        emb_dim=32,
        num_heads=4,
        feedforward_dim=64,
        num_enc_layers=2,
        num_dec_layers=3,
        dropout=0.0,
        position_encoding="sinusoid",
    )
    m = Transformer(config).eval()
    with torch.no_grad():  # make EOS unlikely so sequences run long and the cache is exercised
        m.proj_to_vocab.bias[EOS_ID] = -50.0
    return m


def test_cached_and_uncached_decoding_give_identical_tokens(model):
    ques_b = torch.randint(0, 14, (8, 9))
    cached = greedy_decode(model, ques_b, max_new_tokens=40, use_cache=True)
    uncached = greedy_decode(model, ques_b, max_new_tokens=40, use_cache=False)
    assert cached.shape == (8, 41) and (cached[:, 0] == BOS_ID).all()
    assert torch.equal(cached, uncached)
    assert len(set(map(tuple, cached.tolist()))) > 1  # different questions, different answers


def test_prefill_of_a_longer_prefix_matches_too(model):
    ques_b = torch.randint(0, 14, (4, 9))
    prefix = torch.tensor([[BOS_ID, 10, 3]] * 4)
    cached = greedy_decode(model, ques_b, 10, use_cache=True, prefix=prefix)
    assert torch.equal(cached, greedy_decode(model, ques_b, 10, use_cache=False, prefix=prefix))
    assert torch.equal(cached[:, :3], prefix)


def count_calls(module):
    calls = []
    module.register_forward_hook(lambda *_: calls.append(1))
    return calls


def test_encoder_runs_once_and_cached_steps_feed_one_token(model):
    ques_b = torch.randint(0, 14, (2, 9))
    encoder_calls = count_calls(model.encoder)
    widths = []
    model.decoder.layers[0].register_forward_pre_hook(lambda mod, args: widths.append(args[0].shape[1]))
    greedy_decode(model, ques_b, max_new_tokens=6, use_cache=True)
    assert len(encoder_calls) == 1
    assert widths == [1] * 6  # prefill of BOS, then one new token per step
    widths.clear()
    greedy_decode(model, ques_b, max_new_tokens=6, use_cache=False)
    assert widths == [1, 2, 3, 4, 5, 6]  # the uncached loop re-runs the growing prefix
    assert len(encoder_calls) == 2


def test_finished_sequences_are_padded_with_eos():
    torch.manual_seed(0)
    m = Transformer(ModelConfig(emb_dim=16, num_heads=2, feedforward_dim=16, num_enc_layers=1, num_dec_layers=1)).eval()
    with torch.no_grad():
        m.proj_to_vocab.bias[EOS_ID] = 50.0  # every sequence ends at once
    out = greedy_decode(m, torch.randint(0, 14, (3, 9)), 4)
    assert out[:, 1:].eq(EOS_ID).all()


def test_exact_match_counts_whole_answers(model):
    ques_b = torch.randint(0, 14, (6, 9))
    answers = greedy_decode(model, ques_b, 4)
    assert exact_match(model, ques_b, answers) == 1.0
    wrong = answers.clone()
    wrong[:3, 2] = (wrong[:3, 2] + 1) % 16
    assert exact_match(model, ques_b, wrong) == 0.5
    with pytest.raises(ValueError, match="at least one"):
        exact_match(model, ques_b[:0], answers[:0])


def test_bad_arguments_raise(model):
    with pytest.raises(ValueError, match=r"\(N, Kq\)"):
        greedy_decode(model, torch.zeros(9, dtype=torch.long), 4)
    with pytest.raises(ValueError, match="max_new_tokens"):
        greedy_decode(model, torch.zeros(1, 9, dtype=torch.long), -1)
    with pytest.raises(ValueError, match="prefix"):
        greedy_decode(model, torch.zeros(2, 9, dtype=torch.long), 4, prefix=torch.zeros(3, 1, dtype=torch.long))

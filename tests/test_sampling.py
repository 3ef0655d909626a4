"""Sampling (chapter 13): temperature, top-k and top-p reshape the distribution a step draws from."""

import pytest
import torch

from encdec.config import ModelConfig
from encdec.data import EOS_ID
from encdec.generate import greedy_decode
from encdec.model import Transformer
from encdec.sampling import sample_decode, sampling_probs


@pytest.fixture
def model():
    torch.manual_seed(0)
    config = ModelConfig(
        emb_dim=32,
        num_heads=4,
        feedforward_dim=64,
        num_enc_layers=2,
        num_dec_layers=2,
        dropout=0.0,
        position_encoding="sinusoid",
    )
    m = Transformer(config).eval()
    with torch.no_grad():  # long answers: EOS unlikely
        m.proj_to_vocab.bias[EOS_ID] = -50.0
    return m


def logits(seed=0, N=6, V=16):
    return torch.randn(N, V, generator=torch.Generator().manual_seed(seed)) * 3  # (N, V)


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"temperature": 0.5},
        {"temperature": 3.0},
        {"top_k": 4},
        {"top_p": 0.7},
        {"temperature": 2.0, "top_k": 5, "top_p": 0.9},
    ],
)
def test_every_distribution_sums_to_one(kw):
    probs = sampling_probs(logits(), **kw)
    assert probs.shape == (6, 16) and (probs >= 0).all()
    assert torch.allclose(probs.sum(-1), torch.ones(6))


def test_temperature_one_is_the_softmax_and_temperature_flattens():
    lg = logits()
    assert torch.allclose(sampling_probs(lg), torch.softmax(lg, -1))
    entropy = [-(p * p.clamp_min(1e-30).log()).sum(-1) for p in (sampling_probs(lg, t) for t in (0.5, 1.0, 2.0))]
    assert (entropy[0] < entropy[1]).all() and (entropy[1] < entropy[2]).all()


def test_top_k_keeps_the_k_largest():
    lg = logits()
    probs = sampling_probs(lg, top_k=3)
    assert ((probs > 0).sum(-1) == 3).all()
    kept = probs > 0
    assert torch.equal(kept, torch.zeros_like(kept).scatter(-1, lg.topk(3).indices, True))
    # renormalised: the kept tokens keep their ratios
    soft = torch.softmax(lg, -1)
    assert torch.allclose(probs[kept], (soft * kept / (soft * kept).sum(-1, keepdim=True))[kept])


@pytest.mark.parametrize("p", [0.05, 0.5, 0.9, 0.99, 1.0])
def test_top_p_keeps_the_smallest_set_whose_mass_reaches_p(p):
    lg = logits(seed=3)
    soft = torch.softmax(lg, -1)
    probs = sampling_probs(lg, top_p=p)
    for row in range(len(lg)):
        ranked = soft[row].sort(descending=True).values
        mass = ranked.cumsum(0)
        smallest = int((mass < p).sum()) + 1  # the first prefix of the ranking whose mass reaches p
        smallest = min(smallest, len(ranked))
        kept = probs[row] > 0
        assert kept.sum() == smallest
        assert soft[row][kept].sum() >= p - 1e-6  # reaches p ...
        assert soft[row][kept].min() >= soft[row][~kept].max() if (~kept).any() else True  # ... with the largest
        if smallest > 1:  # ... and one token fewer would not
            assert ranked[: smallest - 1].sum() < p


def test_top_k_one_and_temperature_zero_are_greedy(model):
    ques_b = torch.randint(0, 14, (16, 9), generator=torch.Generator().manual_seed(1))
    greedy = greedy_decode(model, ques_b, 12)
    for kw in ({"top_k": 1}, {"temperature": 0.0}, {"temperature": 1e-6}, {"top_p": 1e-9}):
        sampled = sample_decode(model, ques_b, 12, torch.Generator().manual_seed(5), **kw)
        assert torch.equal(sampled, greedy), kw


def test_sampling_is_seeded_and_differs_from_greedy(model):
    ques_b = torch.randint(0, 14, (16, 9), generator=torch.Generator().manual_seed(1))
    hot = {"temperature": 3.0}
    a = sample_decode(model, ques_b, 12, torch.Generator().manual_seed(7), **hot)
    b = sample_decode(model, ques_b, 12, torch.Generator().manual_seed(7), **hot)
    c = sample_decode(model, ques_b, 12, torch.Generator().manual_seed(8), **hot)
    assert torch.equal(a, b) and not torch.equal(a, c)
    assert not torch.equal(a, greedy_decode(model, ques_b, 12))


def test_sampled_tokens_follow_the_distribution():
    lg = logits(seed=4, N=1)
    probs = sampling_probs(lg, temperature=1.5, top_k=6)  # (1, V)
    g = torch.Generator().manual_seed(0)
    draws = torch.multinomial(probs.expand(20000, -1), 1, replacement=True, generator=g)[:, 0]
    freq = torch.bincount(draws, minlength=16) / 20000
    assert (freq[probs[0] == 0] == 0).all()
    assert torch.allclose(freq, probs[0], atol=0.015)


def test_bad_settings_are_refused():
    for kw in ({"temperature": -1.0}, {"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}):
        with pytest.raises(ValueError):
            sampling_probs(logits(), **kw)


def test_sample_decode_refuses_bad_shapes(model):
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError):
        sample_decode(model, torch.zeros(9, dtype=torch.long), 4, g)
    with pytest.raises(ValueError):
        sample_decode(model, torch.zeros(2, 9, dtype=torch.long), -1, g)
    with pytest.raises(ValueError):
        sample_decode(model, torch.zeros(2, 9, dtype=torch.long), 4, g, prefix=torch.zeros(3, 1, dtype=torch.long))


def test_a_finished_answer_keeps_producing_eos(model):
    with torch.no_grad():
        model.proj_to_vocab.bias[EOS_ID] = 0.0  # EOS possible again
    ques_b = torch.randint(0, 14, (64, 9), generator=torch.Generator().manual_seed(2))
    out = sample_decode(model, ques_b, 10, torch.Generator().manual_seed(3), temperature=5.0)
    assert (out[:, 1:-1] == EOS_ID).any(), "some answer finished early"
    for row in out.tolist():
        if EOS_ID in row:
            first = row.index(EOS_ID)
            assert all(t == EOS_ID for t in row[first:])

"""Beam search (encdec/beam.py): one beam is greedy, the cache reorder is the uncached search, the
trained model's beam never scores below its greedy answer, a finished beam is kept and not extended."""

import pytest
import torch

from encdec.beam import beam_search, sequence_score
from encdec.config import ModelConfig
from encdec.data import BOS_ID, EOS_ID, problem_space
from encdec.generate import greedy_decode
from encdec.model import Transformer
from encdec.train import load_run


@pytest.fixture
def model():
    torch.manual_seed(0)
    config = ModelConfig(emb_dim=32, num_heads=4, feedforward_dim=64, num_enc_layers=2, num_dec_layers=2, dropout=0.0)
    return Transformer(config).eval()


def test_one_beam_is_greedy_decoding(model):
    ques = torch.randint(0, 14, (16, 9))
    tokens, score = beam_search(model, ques, beam_size=1, max_new_tokens=8)
    assert tokens.shape == (16, 1, 9) and score.shape == (16, 1)
    assert torch.equal(tokens[:, 0], greedy_decode(model, ques, 8))
    assert torch.allclose(score[:, 0], sequence_score(model, ques, tokens[:, 0]), atol=1e-5)


@pytest.mark.parametrize("k", [2, 4])
def test_the_cache_reorder_equals_recomputing_without_cache(model, k):
    ques = torch.randint(0, 14, (12, 9))
    cached, s_cached = beam_search(model, ques, k, 8)
    uncached, s_uncached = beam_search(model, ques, k, 8, use_cache=False)
    assert torch.equal(cached, uncached)
    assert torch.allclose(s_cached, s_uncached, atol=1e-5)
    # each returned beam's score is its own tokens' score, best first
    for b in range(k):
        assert torch.allclose(s_cached[:, b], sequence_score(model, ques, cached[:, b]), atol=1e-5)
    assert (s_cached[:, :-1] >= s_cached[:, 1:]).all()


def test_without_the_reorder_the_beams_differ(model, monkeypatch):
    """The reorder is what makes the cached search right: skipped, other beams come out."""
    import encdec.beam as B

    ques = torch.randint(0, 14, (12, 9))
    right, _ = beam_search(model, ques, 3, 8)
    monkeypatch.setattr(B, "reorder", lambda caches, rows, cross: cross and _expand_only(caches, rows))
    wrong, _ = B.beam_search(model, ques, 3, 8)
    assert not torch.equal(right, wrong)


def _expand_only(caches, rows):
    for cache_self, cache_cross in caches:
        for c in (cache_self, cache_cross):
            c.k, c.v = c.k.index_select(0, rows), c.v.index_select(0, rows)


def test_a_finished_beam_is_kept_and_padded_with_eos(model):
    with torch.no_grad():
        model.proj_to_vocab.bias[EOS_ID] = 3.0  # EOS likely: beams finish at different steps
    ques = torch.randint(0, 14, (12, 9))
    tokens, score = beam_search(model, ques, 4, 8)
    assert (tokens[..., 0] == BOS_ID).all()
    eos = tokens[..., 1:] == EOS_ID  # (N, k, n)
    assert eos.any()
    after_first = (eos.long().cumsum(dim=-1) - eos.long()) > 0
    assert eos[after_first].all()  # after a beam's EOS, only EOS
    assert torch.isfinite(score).all()


def test_refuses_a_beam_wider_than_the_vocabulary(model):
    with pytest.raises(ValueError, match="beam_size"):
        beam_search(model, torch.zeros(1, 9, dtype=torch.long), 0, 4)


def test_on_the_trained_model_beam_never_scores_below_greedy():
    model, _ = load_run("historical")
    model.eval()
    ques, _ = problem_space()
    ques = ques[::97]  # a spread of the question space (203 questions)
    greedy = sequence_score(model, ques, greedy_decode(model, ques, 4))
    for k in (2, 4):
        _, score = beam_search(model, ques, k, 4)
        assert (score[:, 0] >= greedy - 1e-5).all()


def test_the_decoding_table_compares_every_decoder_with_greedy(monkeypatch, tmp_path):
    """decoders.decoding_table on a sample of 20 questions (the book's reads 3,921): a row per decoder,
    greedy changes nothing, and beam search changes no more answers than there are."""
    import encdec.decoders as D

    monkeypatch.setenv("ENCDEC_CACHE", str(tmp_path))
    monkeypatch.setattr(D, "STRIDE", 19602 // 20 + 1)
    table = D.decoding_table("modern")
    names = [r["decoder"] for r in table["rows"]]
    assert names == ["greedy", "beam, k = 2", "beam, k = 4", *(f"sampling, {s}" for s in D.SAMPLING)]
    assert table["questions"] == 20 and table["rows"][0]["changed"] == 0
    assert all(0 <= r["right"] <= 20 and 0 <= r["changed"] <= 20 for r in table["rows"])
    assert list(tmp_path.glob("decoding_table-modern-*.json")), "cached, for the page to read"

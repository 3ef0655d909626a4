"""Rotary positions (RoPE, ``position_encoding="rope"``): scores see offsets only, the cache reads
the same from any start, cached decoding equals uncached, and the default configs are untouched.
Also: the shipped sinusoid-against-RoPE measurement is the one its command makes."""

from __future__ import annotations

import json
import math
import shlex
from dataclasses import asdict

import pytest
import torch

from encdec.attention import KVCache, MultiHeadAttention, get_subsequent_mask, rope_rotate
from encdec.config import ModelConfig
from encdec.data import EOS_ID
from encdec.experiments import positions
from encdec.generate import greedy_decode
from encdec.model import Transformer
from encdec.presets import PRESETS

SMALL = {"emb_dim": 32, "num_heads": 4, "feedforward_dim": 64, "num_enc_layers": 2, "num_dec_layers": 2, "dropout": 0.0}


def _score(q: torch.Tensor, k: torch.Tensor, m: int, n: int) -> float:
    """The attention score of q at position m and k at position n, both (Dh,)."""
    return float(rope_rotate(q[None], m)[0] @ rope_rotate(k[None], n)[0])


def test_a_score_depends_only_on_the_offset():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)
    for m, n in ((3, 1), (0, 4), (7, 7)):
        for shift in (1, 10, 250):
            assert _score(q, k, m + shift, n + shift) == pytest.approx(_score(q, k, m, n), abs=1e-4)
    assert abs(_score(q, k, 3, 1) - _score(q, k, 1, 1)) > 1e-2  # another offset, another score
    x = torch.randn(2, 3, 6, 16, generator=g)
    assert torch.allclose(rope_rotate(x, 5).norm(dim=-1), x.norm(dim=-1), atol=1e-5)  # a rotation
    assert torch.equal(rope_rotate(x)[..., 0, :], x[..., 0, :])  # position 0: the identity


def _decode_steps(att: MultiHeadAttention, x: torch.Tensor, start: int) -> torch.Tensor:
    """A prefill of two rows, then one row a step, into a cache whose first row sits at ``start``."""
    cache = KVCache(start=start)
    out = [att(x[:, :2], x[:, :2], x[:, :2], get_subsequent_mask(x[:, :2, 0]), cache=cache)]
    out += [att(x[:, t : t + 1], x[:, t : t + 1], x[:, t : t + 1], cache=cache) for t in range(2, x.shape[1])]
    return torch.cat(out, dim=1)  # (N, L, M)


@torch.no_grad()
def test_a_rope_cache_reads_the_same_from_any_start_and_as_one_pass():
    torch.manual_seed(1)
    att = MultiHeadAttention(4, 32).eval()
    att.rope = True
    x = torch.randn(3, 6, 32)  # (N, L, M)
    whole = att(x, x, x, get_subsequent_mask(x[..., 0]))  # uncached, one pass from position 0
    assert torch.allclose(_decode_steps(att, x, 0), whole, atol=1e-5)
    assert torch.allclose(_decode_steps(att, x, 500), whole, atol=1e-4)
    att.rope = False  # the rotation is in use: without it the output differs
    assert not torch.allclose(att(x, x, x, get_subsequent_mask(x[..., 0])), whole, atol=1e-3)


@pytest.fixture
def rope_model():
    torch.manual_seed(0)
    m = Transformer(ModelConfig(**SMALL, position_encoding="rope")).eval()
    with torch.no_grad():  # make EOS unlikely so sequences run long and the cache is exercised
        m.proj_to_vocab.bias[EOS_ID] = -50.0
    return m


def test_cached_decoding_equals_uncached_on_a_rope_model(rope_model):
    ques_b = torch.randint(0, 14, (8, 9), generator=torch.Generator().manual_seed(2))
    cached = greedy_decode(rope_model, ques_b, max_new_tokens=30, use_cache=True)
    assert torch.equal(cached, greedy_decode(rope_model, ques_b, max_new_tokens=30, use_cache=False))
    assert len(set(map(tuple, cached.tolist()))) > 1
    prefix = cached[:, :4]  # a prefill of four positions, then decode steps
    assert torch.equal(greedy_decode(rope_model, ques_b, 6, prefix=prefix), cached[:, :10])


def test_rope_adds_nothing_and_rotates_self_attention_only(rope_model):
    assert not rope_model.positions(5).any()
    blocks = (*rope_model.encoder.layers, *rope_model.decoder.layers)
    assert all(b.attention_self.rope for b in blocks)
    assert not any(b.attention_cross.rope for b in rope_model.decoder.layers)
    sinusoid = Transformer(ModelConfig(**SMALL, position_encoding="sinusoid"))
    assert {k: v.shape for k, v in sinusoid.state_dict().items()} == {
        k: v.shape for k, v in rope_model.state_dict().items()
    }  # no new parameter: the same checkpoint layout
    with pytest.raises(ValueError, match="must be even"):
        Transformer(ModelConfig(emb_dim=12, num_heads=4, position_encoding="rope"))


def test_the_default_and_the_presets_have_no_rotation():
    assert ModelConfig().position_encoding == "simple"
    for model_config, _ in PRESETS.values():
        assert model_config.position_encoding != "rope"
        assert not any(getattr(m, "rope", False) for m in Transformer(model_config).modules())


def test_the_shipped_measurement_is_its_command():
    """positions.json was made by the module as it is now, with the command it records."""
    shipped = positions.load()
    args = shlex.split(shipped["command"])
    assert args[:3] == ["python", "-m", "encdec.experiments.positions"]
    epochs = int(args[args.index("--epochs") + 1]) if "--epochs" in args else positions.EPOCHS
    assert shipped["epochs"] == epochs and shipped["preset"] == positions.PRESET
    assert tuple(shipped["runs"]) == positions.ENCODINGS and shipped["seeds"] == list(positions.SEEDS)
    for encoding, seeds in shipped["runs"].items():
        assert list(seeds) == [str(seed) for seed in positions.SEEDS]
        for seed, run in seeds.items():
            model_config, train_config = positions.configs(encoding, int(seed), epochs)
            # a field ModelConfig gained after the run is absent from its record: the run had its default
            assert {**asdict(ModelConfig()), **run["model_config"]} == asdict(model_config), "the recipe changed: rerun"
            assert run["train_config"] == json.loads(json.dumps(asdict(train_config))), "rerun the command"
            assert [r["epoch"] for r in run["history"]] == list(range(positions.EVERY, epochs + 1, positions.EVERY))
            assert run["history"][-1]["val_exact_match"] == run["val_exact_match"]
            assert all(math.isfinite(r["val_loss"]) for r in run["history"])


def test_the_two_runs_of_a_seed_differ_in_the_encoding_alone():
    """The chapter's claim: the same recipe, starting weights and batches; only the position encoding differs."""
    for seed in positions.SEEDS:
        (m_sin, t_sin), (m_rope, t_rope) = (positions.configs(e, seed) for e in positions.ENCODINGS)
        assert t_sin == t_rope and t_sin.seed == seed and t_sin.epochs == positions.EPOCHS
        assert asdict(m_sin) | {"position_encoding": "rope"} == asdict(m_rope)
        weights = []
        for model_config in (m_sin, m_rope):
            torch.manual_seed(seed)  # as train() does before it builds the model
            weights.append(Transformer(model_config).state_dict())
        assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_the_chapters_printouts_of_a_stale_or_shifted_position():
    """What chapter 13 prints: a cache read from position 500 as from 0 with RoPE, not with added
    sinusoids; an added stale position moves most of a token's features; the stale-position mistake
    of ``broken`` has nothing to swap in a RoPE model."""
    assert positions.cache_start_gap(True, start=500) < 1e-5 < 0.1 < positions.cache_start_gap(False, start=500)
    sinusoid = Transformer(ModelConfig(**SMALL, position_encoding="sinusoid")).eval()
    moved, share = positions.stale_added(sinusoid, token_id=4, position=3)
    assert moved > 16 and share > 0.1 and positions.stale_added(sinusoid, 4, position=0) == (0, 0.0)
    questions = torch.randint(0, 14, (50, 9), generator=torch.Generator().manual_seed(3))
    assert positions.stale_rope_unchanged(ModelConfig(**SMALL), questions) == 50

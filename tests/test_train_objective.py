"""Label smoothing's loss floor and the learning-rate schedules (chapter 12)."""

import math

import pytest
import torch
import torch.nn.functional as F

from encdec.config import ModelConfig, TrainConfig
from encdec.data import load_arithmetic
from encdec.model import Transformer
from encdec.presets import get_preset
from encdec.train import learning_rates, loss_by_mode, smoothed_target, smoothing_floor, token_accuracy


@pytest.mark.parametrize("V,eps", [(16, 0.1), (16, 0.3), (5, 0.1)])
def test_smoothed_target_is_what_cross_entropy_trains_towards(V, eps):
    q = smoothed_target(2, V, eps)
    assert math.isclose(q.sum().item(), 1.0) and math.isclose(q[2].item(), 1 - eps + eps / V)
    logits = torch.randn(50, V, dtype=torch.float64)
    labels = torch.full((50,), 2)
    # cross_entropy with label_smoothing is the cross-entropy against q
    assert torch.allclose(
        F.cross_entropy(logits, labels, label_smoothing=eps), -(q * logits.log_softmax(-1)).sum(-1).mean()
    )


@pytest.mark.parametrize("V,eps", [(16, 0.1), (16, 0.3), (5, 0.1)])
def test_the_floor_is_reached_at_the_target_and_nowhere_lower(V, eps):
    floor = smoothing_floor(V, eps)
    q = smoothed_target(0, V, eps)
    label = torch.zeros(1, dtype=torch.long)
    at_target = F.cross_entropy(q.log()[None], label, label_smoothing=eps).item()
    assert math.isclose(at_target, floor, rel_tol=1e-9)
    g = torch.Generator().manual_seed(0)
    others = torch.randn(200, V, dtype=torch.float64, generator=g) * 4
    losses = F.cross_entropy(others, label.expand(200), label_smoothing=eps, reduction="none")
    assert (losses > floor).all()
    one_hot_ish = torch.full((1, V), -30.0, dtype=torch.float64)
    one_hot_ish[0, 0] = 30.0  # a certain, correct model pays far more than the floor
    assert F.cross_entropy(one_hot_ish, label, label_smoothing=eps).item() > 5 * floor


def test_the_floor_of_the_historical_preset():
    assert round(smoothing_floor(16, 0.1), 4) == 0.5650
    assert smoothing_floor(16, 0.0) == 0.0


def test_learning_rates_follow_each_schedule():
    _, historical = get_preset("historical")
    rates = learning_rates(historical, steps_per_epoch=141, steps=1500)
    assert rates[:1000] == [historical.warmup_lr] * 1000
    assert rates[1000:] == pytest.approx([historical.lr] * 500)
    _, modern = get_preset("modern")
    rates = learning_rates(modern, steps_per_epoch=71)
    assert len(rates) == modern.epochs * 71
    peak = max(range(len(rates)), key=rates.__getitem__)
    assert math.isclose(rates[peak], modern.lr) and abs(peak - 0.2 * len(rates)) <= 1  # pct_start=0.2
    assert rates[0] < modern.lr / 20 and rates[-1] < modern.lr / 1e4
    assert all(a <= b for a, b in zip(rates[:peak], rates[1 : peak + 1]))  # warm up
    assert all(a >= b for a, b in zip(rates[peak:], rates[peak + 1 :]))  # then anneal
    assert learning_rates(TrainConfig(schedule="constant", epochs=2, lr=0.01), 3) == [0.01] * 6


def test_loss_by_mode_separates_smoothing_and_dropout():
    torch.manual_seed(0)
    model = Transformer(
        ModelConfig(emb_dim=16, num_heads=2, feedforward_dim=32, num_enc_layers=1, num_dec_layers=1, dropout=0.3)
    ).eval()
    data = load_arithmetic()
    q, a = data.train_questions[:64], data.train_answers[:64]
    losses = loss_by_mode(model, q, a, 0.1)
    assert not model.training  # the mode is put back
    assert math.isclose(losses[("eval", 0.0)], token_accuracy(model, q, a)[0], rel_tol=1e-6)
    assert losses[("train", 0.0)] != losses[("eval", 0.0)]  # dropout was on in train mode
    assert losses == loss_by_mode(model, q, a, 0.1)  # seeded dropout: the same figures again

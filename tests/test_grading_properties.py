"""Diagnosis by property (``autograder.judge.properties``): a mistake is named when the student's
outputs are exactly what that one mistake gives on every probe; a correct output, and an output
that fits no property, names nothing (never a guess)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from autograder.judge import properties as P
from encdec import attention as A
from encdec.data import EOS_ID

g = torch.Generator().manual_seed(0)
SEQ = torch.randint(0, 14, (3, 6), generator=g)
N, K = SEQ.shape
TRI = torch.triu(torch.ones(K, K, dtype=torch.bool), 1)


@pytest.mark.parametrize(
    "mask,key",
    [
        (TRI.expand(N, K, K), None),
        (torch.tril(torch.ones(K, K, dtype=torch.bool), -1).expand(N, K, K), "mask_transposed"),
        (torch.tril(torch.ones(K, K, dtype=torch.bool)).expand(N, K, K), "mask_inverted"),
        (torch.triu(torch.ones(K, K, dtype=torch.bool)).expand(N, K, K), "mask_diagonal"),
        (torch.triu(torch.ones(K, K, dtype=torch.bool), 3).expand(N, K, K), "mask_offset"),
        (TRI[None], "mask_not_expanded"),
        (TRI.float().expand(N, K, K), "mask_not_bool"),
        (SEQ[:, None, :] > SEQ[:, :, None], "mask_from_values"),
        (torch.rand(K, K, generator=g).expand(N, K, K) > 0.5, None),  # some other pattern: observed, not named
    ],
)
def test_the_mask_is_named_by_its_pattern(mask, key):
    assert P.mask(mask.numpy(), SEQ.numpy()) == key


SCORES = 3 * torch.randn(2, 5, 5, generator=g)
MASK = torch.triu(torch.ones(5, 5, dtype=torch.bool), 1).expand(2, 5, 5)


@pytest.mark.parametrize(
    "weights,key",
    [
        (A.masked_softmax(SCORES, MASK), None),
        ((lambda w: w / w.sum(-1, keepdim=True))(torch.softmax(SCORES, -1).masked_fill(MASK, 0)), None),  # honest
        (torch.softmax(SCORES.masked_fill(MASK, 0.0), -1), "softmax_fill_finite"),
        (torch.softmax(SCORES.masked_fill(MASK, -3.5), -1), "softmax_fill_finite"),
        (torch.softmax(SCORES.masked_fill(MASK, float("-inf")), 1), "softmax_wrong_axis"),
        (torch.exp(SCORES).masked_fill(MASK, 0), "softmax_not_normalised"),
        (torch.softmax(SCORES, -1).masked_fill(MASK, 0), "mask_after_softmax"),
        (A.masked_softmax(SCORES / 2, MASK), "softmax_scaled"),
        (torch.softmax(SCORES + MASK, -1), None),  # the mask added as 1s: fits no property
    ],
)
def test_the_masked_softmax_is_named_by_its_property(weights, key):
    assert P.softmax(weights.numpy(), SCORES.numpy(), MASK.numpy()) == key


ANS = torch.cat([torch.full((4, 1), 14), torch.randint(0, 14, (4, 5), generator=g), torch.full((4, 1), 15)], 1)


@pytest.mark.parametrize(
    "pair,key",
    [
        ((ANS[:, :-1], ANS[:, 1:]), None),
        ((ANS, torch.roll(ANS, -1, 1)), "shift_wraps"),
        ((ANS[:-1], ANS[1:]), "shift_wrong_axis"),
        ((ANS[:, :-2], ANS[:, 2:]), "shift_off_by_one"),
        ((ANS[:, :-1], ANS[:, 1:-1]), "shift_off_by_one"),
        ((ANS[:, 1:], ANS[:, :-1]), "shift_reversed"),
        ((ANS[:, :-1], ANS[:, :-1]), "no_shift"),
        ((ANS[:, :-1], ANS[:, 1:] * 0), None),
    ],
)
def test_the_shift_is_named_by_what_each_output_is_a_slice_of(pair, key):
    assert P.shift(pair[0].numpy(), pair[1].numpy(), ANS.numpy()) == key


CASES = [
    (2 * torch.randn(4, 6, 16, generator=g), ANS),
    (3 * torch.randn(4, 6, 16, generator=g), ANS),
    (torch.randn(4, 6, 16, generator=g), ANS.flip(0)),
]


def _ce(x, a, **kw):
    return F.cross_entropy(x.transpose(1, 2), a[:, 1:], **kw)


@pytest.mark.parametrize(
    "loss,key",
    [
        (_ce, None),
        (lambda x, a: _ce(torch.log_softmax(x, -1), a), None),  # honest: log_softmax is idempotent
        (lambda x, a: _ce(torch.softmax(x, -1), a), "loss_on_probabilities"),
        (lambda x, a: F.nll_loss(x.transpose(1, 2), a[:, 1:]), "nll_on_logits"),
        (lambda x, a: F.nll_loss(torch.softmax(x, -1).transpose(1, 2), a[:, 1:]), "nll_on_probabilities"),
        (lambda x, a: F.cross_entropy(x.reshape(x.shape[0], x.shape[2], x.shape[1]), a[:, 1:]), "loss_class_axis"),
        (lambda x, a: _ce(x, a, label_smoothing=0.05), "loss_label_smoothing"),
        (lambda x, a: _ce(x, a, ignore_index=EOS_ID), "loss_ignores_eos"),
        (lambda x, a: _ce(x, a, ignore_index=int(ANS[0, 2])), "loss_ignores_eos"),  # a token that is there
        (lambda x, a: _ce(x, a, reduction="sum"), "loss_sum"),
        (lambda x, a: _ce(x, a, reduction="none").sum(1).mean(), "loss_reduction"),
        (lambda x, a: _ce(x, a) * 1.01, None),  # off by a factor no mistake gives
    ],
)
def test_the_loss_is_named_only_when_one_mistake_gives_every_probe(loss, key):
    values = [float(loss(x, a)) for x, a in CASES]
    assert P.loss(values, CASES) == key


def test_label_smoothing_is_not_fitted_from_a_single_value():
    """One value always fits some smoothing factor: the second and third probes decide."""
    x, a = CASES[0]
    assert P.loss([float(_ce(x, a) + 0.01)], CASES[:1]) is None
    values = [float(_ce(x, a, label_smoothing=0.1)) + (0.0 if i == 0 else 0.01) for i, (x, a) in enumerate(CASES)]
    assert P.loss(values, CASES) is None


STEPS = [(torch.randn(2, 2, t, 4, generator=g), torch.randn(2, 2, t, 4, generator=g)) for t in (3, 1, 1)]


def _run(update) -> dict:
    out, held = {}, {"k": None, "v": None, "n": 0}
    for i, (k, v) in enumerate(STEPS):
        kk, vv, n = update(held, k, v)
        out[f"k{i}"], out[f"v{i}"], out[f"len{i}"] = kk.numpy(), vv.numpy(), np.array(n)
    return out


def _append(h, k, v, first=False, dim=2):
    h["k"] = k if h["k"] is None else torch.cat([k, h["k"]] if first else [h["k"], k], dim)
    h["v"] = v if h["v"] is None else torch.cat([v, h["v"]] if first else [h["v"], v], dim)
    return h["k"].shape[2]


@pytest.mark.parametrize(
    "update,key",
    [
        (lambda h, k, v: (n := _append(h, k, v)) and (h["k"], h["v"], n), None),
        (lambda h, k, v: (n := _append(h, k, v, first=True)) and (h["k"], h["v"], n), "cache_prepends"),
        (lambda h, k, v: (n := _append(h, k, v)) and (h["v"], h["k"], n), "cache_kv_swapped"),
        (lambda h, k, v: (n := _append(h, k, v)) and (k, v, n), "cache_returns_new"),
        (lambda h, k, v: (k, v, k.shape[2]), "cache_overwrites"),
        (lambda h, k, v: (n := _append(h, k, v)) and (h["k"] * 1.05, h["v"], n), None),  # fits no property
    ],
)
def test_the_cache_update_is_named_at_its_first_wrong_step(update, key):
    steps = [(k.numpy(), v.numpy()) for k, v in STEPS]
    assert P.update(_run(update), steps) == key


def test_a_cache_that_appends_on_another_axis_is_named_where_the_sizes_let_it_run():
    steps = [(torch.randn(2, 2, 1, 4, generator=g), torch.randn(2, 2, 1, 4, generator=g)) for _ in range(3)]
    out, k_all, v_all = {}, None, None
    for i, (k, v) in enumerate(steps):
        k_all = k if k_all is None else torch.cat([k_all, k], 1)
        v_all = v if v_all is None else torch.cat([v_all, v], 1)
        out[f"k{i}"], out[f"v{i}"], out[f"len{i}"] = k_all.numpy(), v_all.numpy(), np.array(1)
    assert P.update(out, [(k.numpy(), v.numpy()) for k, v in steps]) == "cache_wrong_axis"


@pytest.mark.parametrize("mode", [None, "layers_not_chained", "memory_without_positions", "one_cache_for_all_layers"])
def test_a_decoding_mistake_is_named_when_its_replay_gives_the_recorded_step_logits(mode, tmp_path):
    from grading_support import cached_decoder, graded

    verdict, _ = graded("kv_cache.tokens_hidden", cached_decoder(mistake=mode), tmp_path)
    assert verdict.label == (mode or "passed"), verdict.message

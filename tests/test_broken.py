"""encdec.broken: each mistake changes what it should, on its path, and nothing else."""

from __future__ import annotations

import pytest
import torch

from encdec import broken
from encdec.attention import masked_softmax
from encdec.data import encode_question, problem_space
from encdec.generate import greedy_decode
from encdec.train import load_run

SAMPLE = slice(0, None, 97)  # 203 questions spread over the space


@pytest.fixture(scope="module")
def modern():
    return load_run("modern")[0]


@pytest.fixture(scope="module")
def sample():
    questions, answers = problem_space()
    return questions[SAMPLE], answers[SAMPLE]


def test_shape_check_runs():
    broken._check_shapes()


def test_mask_after_softmax_keeps_the_future_in_the_denominator():
    torch.manual_seed(0)
    N, H, L, D = 2, 2, 4, 3
    q, k, v = (torch.randn(N, H, L, D) for _ in range(3))
    mask = torch.triu(torch.ones(L, L, dtype=torch.bool), diagonal=1).expand(N, L, L)
    _, weights = broken.attention_mask_after_softmax(q, k, v, mask)
    scores = q @ k.transpose(-2, -1) / D**0.5
    assert torch.equal(weights, torch.softmax(scores, -1).masked_fill(mask[:, None], 0.0))  # zeroed after
    assert not torch.allclose(weights, masked_softmax(scores, mask[:, None]))  # not the right weights
    assert torch.allclose(weights[..., -1, :].sum(-1), torch.ones(N, H))  # the last row has no future
    assert bool((weights[..., :-1, :].sum(-1) < 1 - 1e-6).all())  # every other row lost its future's share


def test_intact_is_greedy_decode_and_the_block_leaves_no_trace(modern, sample):
    questions, _ = sample
    before = greedy_decode(modern, questions, 4)

    def attrs():  # every module's own attributes
        return [sorted(vars(m)) for m in modern.modules()]

    own = attrs()
    got, error = broken.broken_answers(modern, questions, "intact")
    assert error is None and torch.equal(got, before)
    for name in broken.MISTAKES:
        broken.broken_answers(modern, questions, name)
        assert attrs() == own, name  # every swap undone
        assert all("forward" not in vars(m) for m in modern.modules()) and "positions" not in vars(modern)
    assert torch.equal(greedy_decode(modern, questions, 4), before)


@pytest.mark.parametrize("name", ["mask_after_softmax", "no_causal_mask"])
def test_a_mask_mistake_changes_only_a_pass_of_several_positions(modern, sample, name):
    """With the cache each decode step has one query and no future: the answers are the intact ones;
    re-running the prefix (the mistake's path) changes some."""
    questions, _ = sample
    intact = greedy_decode(modern, questions, 4)
    assert broken.MISTAKES[name].use_cache is False
    with broken.broken(modern, name):
        assert torch.equal(greedy_decode(modern, questions, 4, use_cache=True), intact)
        assert not torch.equal(greedy_decode(modern, questions, 4, use_cache=False), intact)


def test_a_stale_position_leaves_the_encoder_alone(modern, sample):
    questions, _ = sample
    memory = modern.encode(questions)
    with broken.broken(modern, "stale_position"):
        assert torch.equal(modern.encode(questions), memory)  # the question keeps its positions
        table = modern.positions(5)
        assert bool((table == table[:, :1]).all())  # every answer position is position 0's
        got = greedy_decode(modern, questions, 4)
    assert not torch.equal(got, greedy_decode(modern, questions, 4))


def test_q_from_the_encoder_cannot_run_and_says_why(modern):
    question = torch.tensor([encode_question("BOS NEGATIVE 30 subtract NEGATIVE 34 EOS")])
    got, error = broken.broken_answers(modern, question, "q_from_encoder")
    assert got is None
    assert error.startswith("ValueError: mask of shape (1, 1, 1) does not fit attention scores"), error


def test_without_cross_attention_every_question_gets_one_answer(modern, sample):
    questions, answers = sample
    got, _ = broken.broken_answers(modern, questions, "no_cross_attention")
    assert (got == got[0]).all()  # the question has no path to the logits
    assert not torch.equal(got, answers)


def test_still_right_counts_whole_answers(modern, sample):
    questions, answers = sample
    intact = broken.still_right(modern, questions, answers, "intact")
    assert intact == {"mistake": "intact", "right": len(questions), "total": len(questions), "error": None}
    failed = broken.still_right(modern, questions, answers, "q_from_encoder")
    assert failed["right"] == 0 and failed["error"].startswith("ValueError")


def test_an_unknown_mistake_is_refused(modern):
    with pytest.raises(ValueError, match="unknown mistake"), broken.broken(modern, "dropout_at_inference"):
        pass

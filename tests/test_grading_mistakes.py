"""The catalogue of realistic mistakes (``autograder/fixtures/mistakes/``), each graded in process
on every check of its target: the feedback names each mistake in the lesson's words and never
names one a submission does not have; honest code in unusual styles passes. The held-out entries
were kept out of the development of the properties: at least 90 % of them must be named, and
none misnamed. The warm-up's targets are held to the same, and on their own: every key the warm-up
judge names has a tuned entry, every target an honest one, and the held-out rate is reported."""

from __future__ import annotations

import functools

import pytest

from autograder.fixtures.mistakes import KEYS, PASSED, WARMUP, evaluate, held_out, tuned

ENTRIES = [("tuned", m) for m in tuned.MISTAKES] + [("held_out", m) for m in held_out.MISTAKES]


@functools.cache
def _outcome(kind: str, name: str) -> str:
    """One entry graded on every check of its target: named, unnamed, misnamed or passed."""
    (m,) = [m for k, m in ENTRIES if (k, m.name) == (kind, name)]
    return evaluate.outcome(m, evaluate.graded_labels(m))


@pytest.fixture(scope="module")
def results():
    return {(kind, m.name): _outcome(kind, m.name) for kind, m in ENTRIES}


def test_the_catalogue_keeps_a_quarter_out_and_honest_styles_in():
    mistakes = [m for _, m in ENTRIES if m.expect != "passed"]
    kept_out = [m for m in held_out.MISTAKES if m.expect != "passed"]
    assert len(mistakes) - len(kept_out) >= 40 and len(kept_out) >= len(mistakes) / 4 - 1
    assert sum(m.expect == "passed" for _, m in ENTRIES) >= 6
    assert {m.target for m in kept_out} == set(evaluate.CHECKS)  # every target has entries kept out


@pytest.mark.parametrize("kind,name", [(k, m.name) for k, m in ENTRIES])
def test_no_entry_is_misnamed_and_every_honest_style_passes(results, kind, name):
    assert results[(kind, name)] != "misnamed"


def test_every_tuned_mistake_is_named(results):
    unnamed = [name for (kind, name), r in results.items() if kind == "tuned" and r == "unnamed"]
    assert unnamed == []


def test_nine_in_ten_held_out_mistakes_are_named(results):
    outcomes = [results[("held_out", m.name)] for m in held_out.MISTAKES if m.expect != "passed"]
    assert sum(r == "named" for r in outcomes) >= 0.9 * len(outcomes), outcomes


# --- the warm-up's targets (a few seconds alone: pytest -k warmup) ----------------------------------


def test_every_warmup_key_has_a_tuned_entry_and_every_warmup_target_an_honest_one():
    for target in WARMUP:
        mine = [m for m in tuned.MISTAKES if m.target == target]
        assert set(KEYS[target]) <= {m.expect for m in mine}, (target, set(KEYS[target]) - {m.expect for m in mine})
        assert any(m.expect == PASSED for m in mine), target
        assert any(m.expect == PASSED for m in held_out.MISTAKES if m.target == target), target
        assert evaluate.CHECKS[target][0] == "warmup"


def test_every_warmup_tuned_entry_is_named_by_its_key_or_passes():
    wrong = {
        m.name: _outcome("tuned", m.name)
        for m in tuned.MISTAKES
        if m.target in WARMUP
        if _outcome("tuned", m.name) != ("passed" if m.expect == PASSED else "named")
    }
    assert wrong == {}


def test_the_warmup_held_out_rate_is_reported():
    """Honest entries pass, nothing is misnamed, and the named rate (printed) is at least nine in ten."""
    entries = [m for m in held_out.MISTAKES if m.target in WARMUP]
    outcomes = {m.name: _outcome("held_out", m.name) for m in entries}
    assert all(outcomes[m.name] == "passed" for m in entries if m.expect == PASSED), outcomes
    assert "misnamed" not in outcomes.values(), outcomes
    mistakes = [outcomes[m.name] for m in entries if m.expect != PASSED]
    named = sum(r == "named" for r in mistakes)
    print(
        f"warm-up held out: named {named} of {len(mistakes)} mistakes ({named / len(mistakes):.0%}); unnamed: "
        + (", ".join(n for n, r in outcomes.items() if r == "unnamed") or "none")
    )
    assert named >= 0.9 * len(mistakes), outcomes

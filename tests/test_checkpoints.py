"""The shipped checkpoints (encdec/checkpoints/<preset>/, versioned in git): each one, evaluated
here, has the metrics its metrics.json claims, was made by the preset the package defines now,
and says which command made it. Retraining them is `make checkpoints`; reproducing a run is a
benchmark (bench/bench_reproduce.py), not a test."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from encdec.config import TrainConfig
from encdec.data import load_arithmetic, problem_space
from encdec.generate import exact_match
from encdec.presets import PRESETS, get_preset
from encdec.train import PACKAGED_CHECKPOINTS, checkpoint_root, load_checkpoint, load_run, token_accuracy

# An argmax within float rounding of a tie may fall the other way on another CPU: one answer
# (or one token) either way, never more.
ONE = 1.000001


@pytest.fixture(scope="module")
def data():
    return load_arithmetic()


@pytest.fixture(scope="module")
def space():
    return problem_space()


def _claims(preset: str) -> dict:
    return json.loads((PACKAGED_CHECKPOINTS / preset / "metrics.json").read_text())


def test_the_problem_space_is_every_question_once(space):
    questions, answers = space
    assert questions.shape == (19602, 9) and answers.shape == (19602, 5)
    assert len({tuple(q) for q in questions.tolist()}) == 19602


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_shipped_checkpoint_has_the_metrics_it_claims(preset, data, space):
    claimed = _claims(preset)
    model = load_checkpoint(PACKAGED_CHECKPOINTS / preset / "model.pt")
    loss, accuracy = token_accuracy(model, data.val_questions, data.val_answers)
    tokens = 4 * len(data.val_questions)
    assert abs(accuracy - claimed["val_token_accuracy"]) * tokens <= ONE, (accuracy, claimed["val_token_accuracy"])
    assert loss == pytest.approx(claimed["val_loss"], rel=1e-3)
    assert abs(exact_match(model, data.val_questions, data.val_answers) - claimed["val_exact_match"]) * 500 <= ONE
    unseen_q, unseen_a = data.unseen()
    assert abs(exact_match(model, unseen_q, unseen_a) - claimed["val_unseen_exact_match"]) * len(unseen_q) <= ONE
    wrong = round((1 - exact_match(model, *space)) * len(space[0]))
    assert abs(wrong - claimed["space_wrong"]) <= 1, (wrong, claimed["space_wrong"])
    if preset == "overfit":
        q, a = data.train_questions[:8], data.train_answers[:8]
        assert token_accuracy(model, q, a)[1] == claimed["train_token_accuracy"] == 1.0


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_shipped_checkpoint_is_the_current_preset_and_names_its_command(preset):
    claimed = _claims(preset)
    model_config, train_config = get_preset(preset)
    assert claimed["preset"] == preset
    assert claimed["model_config"] == asdict(model_config), "the preset changed: retrain with `make checkpoints`"
    # a field TrainConfig gained after the run is absent from its record: the run had its default
    recorded = {**json.loads(json.dumps(asdict(TrainConfig()))), **claimed["train_config"]}
    assert recorded == json.loads(json.dumps(asdict(train_config))), \
        "the preset changed: retrain with `make checkpoints`"
    assert claimed["command"].startswith(f"python -m encdec.train --preset {preset} --out encdec/checkpoints/{preset}")
    assert claimed["epochs_run"] == len(claimed["history"])
    if train_config.stop_when_space_exact:  # it stops at the first pass with every question right
        assert claimed["epochs_run"] <= train_config.epochs and claimed["history"][-1]["space_wrong"] == 0
    elif train_config.plateau_patience:  # it stops once the validation loss has had no new low for that long
        lowest = min(claimed["history"], key=lambda r: r["val_loss"])["epoch"]
        assert claimed["epochs_run"] < train_config.epochs, "the cap was reached: no plateau"
        assert claimed["epochs_run"] - lowest == train_config.plateau_patience
    else:
        assert claimed["epochs_run"] == train_config.epochs


def test_ch12_reads_the_historical_run_as_it_is():
    """Chapter 12 says whether the run is still creeping up at its end (its last sixth of epochs
    against the sixth before, more than half a point), and that one run's figure moves over its
    last stretch by as much as the gap to the notebook's, or more."""
    from book_pages import read

    claimed = _claims("historical")
    accuracy = [r["val_token_accuracy"] for r in claimed["history"]]
    stretch = len(accuracy) // 6  # as the chapter's cell
    before, last = accuracy[-2 * stretch : -stretch], accuracy[-stretch:]
    mean = sum(last) / stretch
    for page in ("ch12_what_you_trained", "zh/ch12_what_you_trained"):
        says_climbing = ("still creeping up" in read(page)) or ("仍在缓慢上升" in read(page))
        assert says_climbing == (mean - sum(before) / stretch > 0.005), page
    assert max(last) - min(last) >= abs(claimed["original"]["val_token_accuracy"] - mean)
    assert claimed["best_val_token_accuracy"] == max(accuracy)


def test_modern_is_exact_on_every_question_from_the_original_training_pairs():
    """The book's claim to beat the original, measured where nobody chose the questions."""
    claimed = _claims("modern")
    assert claimed["space_wrong"] == 0 and claimed["space_exact_match"] == 1.0
    assert claimed["train_config"]["train_subset"] is None  # the original's 4,500 pairs, no more


def test_load_run_reads_the_package_unless_told_otherwise(tmp_path, monkeypatch):
    monkeypatch.delenv("ENCDEC_CHECKPOINTS", raising=False)
    monkeypatch.chdir(tmp_path)  # no folder above decides it
    assert checkpoint_root() == PACKAGED_CHECKPOINTS
    _, metrics = load_run("overfit")
    assert metrics == _claims("overfit")
    monkeypatch.setenv("ENCDEC_CHECKPOINTS", str(tmp_path / "elsewhere"))
    with pytest.raises(FileNotFoundError, match="expected one folder per preset"):
        checkpoint_root()


def test_the_readme_quotes_the_shipped_figures():
    """README.md's training table is a copy of the shipped metrics: it must not drift from them."""
    readme = (PACKAGED_CHECKPOINTS.parents[1] / "README.md").read_text()
    rows = {line.split("|")[1].strip().strip("`"): line for line in readme.splitlines() if line.startswith("| `")}
    for preset in PRESETS:
        m, row = _claims(preset), rows[preset]
        figures = [f"{m['val_token_accuracy']:.3f}" if preset != "historical" else f"{m['val_token_accuracy']:.4f}",
                   f"{m['epochs_run']} epochs", f"{m['train_seconds']:.0f} s"]
        if preset == "historical":
            figures += [f"{m['best_val_token_accuracy']:.4f}", f"epoch {m['best_epoch']}", f"{m['val_exact_match']:.3f}",
                        f"{m['val_unseen_exact_match']:.3f}", f"{m['num_space'] - m['space_wrong']:,}"]
        for figure in figures:
            assert figure in row, f"README.md's {preset} row does not say {figure!r}: {row}"

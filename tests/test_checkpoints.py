"""The shipped checkpoints (encdec/checkpoints/<preset>/, versioned in git): each one, evaluated
here, has the metrics its metrics.json claims, was made by the preset the package defines now,
and says which command made it. Retraining them is `make checkpoints`; reproducing a run is a
benchmark (bench/bench_reproduce.py), not a test."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from encdec.config import ModelConfig, TrainConfig
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
    # a field ModelConfig or TrainConfig gained after the run is absent from its record: the run had its default
    recorded_model = {**asdict(ModelConfig()), **claimed["model_config"]}
    assert recorded_model == asdict(model_config), "the preset changed: retrain with `make checkpoints`"
    recorded = {**json.loads(json.dumps(asdict(TrainConfig()))), **claimed["train_config"]}
    assert recorded == json.loads(json.dumps(asdict(train_config))), (
        "the preset changed: retrain with `make checkpoints`"
    )
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
    """Chapter 12 says the run trained to its plateau (no new low of the validation loss for the
    preset's patience), that the plateau's accuracy no longer climbs (its mean against the epochs
    before it, within half a point), that the notebook's figure lies below the plateau's whole
    range, and that the run passed that figure early, a few hundred epochs in."""
    from book_pages import read

    claimed = _claims("historical")
    original = claimed["original"]["val_token_accuracy"]
    accuracy = [r["val_token_accuracy"] for r in claimed["history"]]
    stretch = claimed["train_config"]["plateau_patience"]  # as the chapter's cell
    before, last = accuracy[-2 * stretch : -stretch], accuracy[-stretch:]
    mean = sum(last) / stretch
    assert abs(mean - sum(before) / stretch) <= 0.005, "the plateau still climbs or falls"
    assert min(last) > original, "the notebook's figure is inside the plateau's range"
    window = 50
    reached = next(
        i + 1 for i in range(window - 1, len(accuracy)) if sum(accuracy[i - window + 1 : i + 1]) / window >= original
    )
    assert reached < 1000, "not 'a few hundred epochs in'"
    for page, words in (
        ("ch12_what_you_trained", ("to its plateau", "far below that whole range", "still creeping up")),
        ("zh/ch12_what_you_trained", ("训练到平台期", "远低于这整个范围", "仍在缓慢上升")),
    ):
        text = read(page)
        assert words[0] in text and words[1] in text and words[2] not in text, page
    assert claimed["best_val_token_accuracy"] == max(accuracy)


def test_historical_early_is_the_plateau_run_stopped_early():
    """The notebook-level checkpoint is the same run as the plateau's, not another one: its every
    epoch's losses and accuracy are the plateau run's, and it stops where that run's 50-epoch mean
    of validation token accuracy first reaches the notebook's figure."""
    early, full = _claims("historical_early"), _claims("historical")
    keys = ("epoch", "train_loss", "val_loss", "val_token_accuracy")
    assert [{k: r[k] for k in keys} for r in early["history"]] == [
        {k: r[k] for k in keys} for r in full["history"][: early["epochs_run"]]
    ]
    accuracy = [r["val_token_accuracy"] for r in full["history"]]
    window, original = 50, full["original"]["val_token_accuracy"]
    reached = next(
        i + 1 for i in range(window - 1, len(accuracy)) if sum(accuracy[i - window + 1 : i + 1]) / window >= original
    )
    assert early["epochs_run"] == reached


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
        figures = [
            f"{m['val_token_accuracy']:.3f}" if preset != "historical" else f"{m['val_token_accuracy']:.4f}",
            f"{m['epochs_run']} epochs",
            f"{m['train_seconds']:.0f} s",
        ]
        if preset == "historical":
            figures += [
                f"{m['best_val_token_accuracy']:.4f}",
                f"epoch {m['best_epoch']}",
                f"{m['val_exact_match']:.3f}",
                f"{m['val_unseen_exact_match']:.3f}",
                f"{m['num_space'] - m['space_wrong']:,}",
            ]
        for figure in figures:
            assert figure in row, f"README.md's {preset} row does not say {figure!r}: {row}"

"""Training: the tiny-set overfit, honest metrics over every batch, checkpoints, the CLI."""

import json

import pytest
import torch

from encdec.config import ModelConfig
from encdec.data import load_arithmetic
from encdec.model import Transformer
from encdec.presets import PRESETS, get_preset
from encdec.train import load_checkpoint, main, save_checkpoint, token_accuracy


def test_presets_are_the_four_of_the_book():
    assert set(PRESETS) == {"overfit", "historical", "historical_early", "modern"}
    early, full = get_preset("historical_early"), get_preset("historical")
    assert early[0] == full[0] and early[1].epochs < full[1].epochs  # the same recipe, stopped sooner
    model_config, train_config = get_preset("historical")
    assert model_config.position_encoding == "simple" and train_config.betas == (0.9, 0.995)
    assert train_config.schedule == "step_warmup"
    with pytest.raises(ValueError, match="unknown preset 'fast'"):
        get_preset("fast")


def test_token_accuracy_counts_every_batch_not_the_last():
    torch.manual_seed(0)
    data = load_arithmetic()
    model = Transformer(ModelConfig(emb_dim=16, num_heads=2, feedforward_dim=16, num_enc_layers=1, num_dec_layers=1))
    q, a = data.val_questions, data.val_answers
    whole = token_accuracy(model, q, a, batch_size=500)
    for batch_size in (7, 64, 256):
        loss, accuracy = token_accuracy(model, q, a, batch_size=batch_size)
        assert accuracy == whole[1]  # exact: the same counts, whatever the batching
        assert loss == pytest.approx(whole[0], rel=1e-6)
    logits = model.eval()(q, model.positions(9), a, model.positions(5))
    manual = (logits.argmax(-1) == a[:, 1:]).float().mean().item()
    assert whole[1] == pytest.approx(manual, abs=1e-6)


def test_overfit_preset_memorises_its_tiny_set_and_cli_writes_files(tmp_path):
    metrics = main(["--preset", "overfit", "--out", str(tmp_path)])
    assert metrics["train_token_accuracy"] == 1.0 and metrics["train_exact_match"] == 1.0
    written = json.loads((tmp_path / "metrics.json").read_text())
    for key in ("val_token_accuracy", "val_exact_match", "val_unseen_exact_match", "train_seconds", "history"):
        assert key in written
    assert written["num_val"] == 500 and 0 < written["num_val_unseen"] < 500
    model = load_checkpoint(tmp_path / "model.pt")
    assert not model.training
    q = load_arithmetic().train_questions[:8]
    a = load_arithmetic().train_answers[:8]
    assert token_accuracy(model, q, a)[1] == 1.0  # the checkpoint is the trained model


def test_checkpoint_round_trip_and_errors(tmp_path):
    model = Transformer(ModelConfig(emb_dim=16, num_heads=2, feedforward_dim=16, num_enc_layers=1, num_dec_layers=1))
    save_checkpoint(model, tmp_path / "m.pt")
    loaded = load_checkpoint(tmp_path / "m.pt")
    for (name, p), (_, q) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(p, q), name
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_checkpoint(tmp_path / "missing.pt")
    torch.save({"weights": 1}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not an encdec checkpoint"):
        load_checkpoint(tmp_path / "other.pt")


def _small_run():
    """A short run with dropout, a shuffled order and a warm-up schedule: every random stream and
    every piece of optimiser state a resumed run must carry over."""
    data = load_arithmetic()
    model_config = ModelConfig(
        emb_dim=16, num_heads=2, feedforward_dim=16, num_enc_layers=1, num_dec_layers=1, dropout=0.2
    )
    _, train_config = get_preset("historical")
    train_config.epochs, train_config.train_subset, train_config.warmup_steps = 4, 64, 5
    return model_config, train_config, data


def test_a_run_resumed_from_its_state_is_the_run_uninterrupted(tmp_path, monkeypatch):
    from dataclasses import replace

    import encdec.train as T

    model_config, train_config, data = _small_run()
    whole, whole_metrics = T.train(model_config, train_config, data, progress=False)
    state = tmp_path / "run.state"
    save = T._save_state

    def save_then_stop(path, epoch, *args):  # an interruption right after epoch 2's state is saved
        save(path, epoch, *args)
        if epoch == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(T, "_save_state", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        T.train(model_config, train_config, data, progress=False, state=state, save_every=1)
    monkeypatch.setattr(T, "_save_state", save)
    with pytest.raises(ValueError, match="another recipe"):  # a state is only resumed by its own recipe
        T.train(model_config, replace(train_config, lr=2e-3), data, progress=False, state=state)
    resumed, resumed_metrics = T.train(model_config, train_config, data, progress=False, state=state)
    for (name, p), (_, q) in zip(whole.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(p, q), name
    strip = lambda h: [{k: v for k, v in row.items() if k != "train_seconds"} for row in h]  # noqa: E731 (a one-line helper named where it is used)
    assert strip(resumed_metrics["history"]) == strip(whole_metrics["history"])
    assert resumed_metrics["epochs_run"] == 4


def test_a_run_with_a_patience_stops_on_its_plateau(monkeypatch):
    """plateau_patience: the run ends once the validation loss has gone that many epochs without a
    new low, ``epochs`` being only a cap; the history then ends exactly that far after the lowest."""
    from dataclasses import replace

    import encdec.train as T

    model_config, train_config, data = _small_run()
    rising = iter([1.0, 0.5, 0.7, 0.6, 0.8, 0.4, 0.9])  # the lowest at epoch 2, none lower until epoch 6
    real = T.token_accuracy
    monkeypatch.setattr(T, "token_accuracy", lambda *a, **k: (next(rising), real(*a, **k)[1]))
    _, metrics = T.train(model_config, replace(train_config, epochs=7, plateau_patience=3), data, progress=False)
    assert metrics["epochs_run"] == 5 and [r["val_loss"] for r in metrics["history"]] == [1.0, 0.5, 0.7, 0.6, 0.8]

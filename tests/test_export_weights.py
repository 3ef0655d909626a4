"""The checkpoints' weights for the page (encdec/widgets/export_weights.py): every tensor of the state
dict, bit for bit, in float32; the one command writes them; anything else is refused."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest
import torch

from encdec.config import ModelConfig
from encdec.model import Transformer
from encdec.train import load_run
from encdec.widgets import export_weights


@pytest.mark.parametrize("preset", export_weights.PRESETS)
def test_export_holds_every_tensor_of_the_checkpoint_bit_for_bit(preset):
    model, _ = load_run(preset)
    exported = export_weights.export_preset(preset)
    state = model.state_dict()
    assert exported["format"] == export_weights.FORMAT and exported["preset"] == preset
    assert exported["config"] == vars(model.config)
    assert [name for name, _, _ in exported["tensors"]] == list(state)
    data = base64.b64decode(exported["data"])
    assert len(data) == 4 * sum(v.numel() for v in state.values())  # float32, nothing else
    offsets = [offset for _, _, offset in exported["tensors"]]
    assert offsets == sorted(offsets) and offsets[0] == 0
    for name, shape, _ in exported["tensors"]:
        got = export_weights.tensor(exported, name)
        assert list(got.shape) == shape == list(state[name].shape)
        assert np.array_equal(got, state[name].numpy()), name  # exact: the parity test needs it


def test_sizes_stay_small():
    """A few hundred kB per checkpoint (base64 adds a third): what the page carries."""
    sizes = {p: len(json.dumps(export_weights.export_preset(p))) for p in export_weights.PRESETS}
    assert sizes["historical"] < 500_000 and sizes["modern"] < 1_000_000, sizes


def test_the_command_writes_one_file_per_preset(tmp_path, capsys):
    paths = export_weights.main(["--out", str(tmp_path / "w"), "--preset", "historical"])
    assert [p.name for p in paths] == ["historical.json"]
    assert "historical.json" in capsys.readouterr().out
    again = json.loads(paths[0].read_text())
    assert again == export_weights.export_preset("historical")  # the same export, regenerated
    assert [p.name for p in export_weights.main(["--out", str(tmp_path / "both")])] == [
        "modern.json",
        "historical.json",
    ]
    with pytest.raises(SystemExit):
        export_weights.main(["--out", str(tmp_path), "--preset", "nonsense"])


def test_any_model_exports_and_an_unknown_tensor_is_named():
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = Transformer(ModelConfig(emb_dim=8, num_heads=2, feedforward_dim=16, num_enc_layers=1, num_dec_layers=1))
    exported = export_weights.export_model(model, "tiny")
    assert np.array_equal(export_weights.tensor(exported, "emb_layer.weight"), model.emb_layer.weight.detach().numpy())
    with pytest.raises(KeyError, match="no tensor 'nope' in the export of 'tiny'"):
        export_weights.tensor(exported, "nope")

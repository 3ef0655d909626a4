"""Chapter 12's experiment records (encdec/checkpoints/experiments/, versioned in git like the
checkpoints): each was made by the settings the package defines now and says which command made
it, and holds what the page reads in the shape it reads it. Rerunning them is `make experiments`."""

from __future__ import annotations

import json

import pytest
import torch

from encdec.data import decode, encode_answer
from encdec.experiments import EXPERIMENTS, attention_learns, norms
from encdec.train import load_run


def _record(name: str) -> dict:
    return json.loads((EXPERIMENTS / f"{name}.json").read_text())


def test_the_norms_record_is_the_current_experiment_and_names_its_command():
    record = _record("norms")
    assert record["command"].startswith(
        "python -m encdec.experiments.norms --out encdec/checkpoints/experiments/norms.json"
    )
    assert {k: record[k] for k in norms.settings()} == json.loads(json.dumps(norms.settings())), (
        "the experiment changed: rerun it with `make experiments`"
    )
    layers = [f"encoder {i}" for i in range(norms.MODEL.num_enc_layers)]
    layers += [f"decoder {i}" for i in range(norms.MODEL.num_dec_layers)]
    steps = norms.BASE.epochs * -(-4500 // norms.BASE.batch_size)  # every optimiser step of the run
    assert list(record["runs"]) == list(norms.NORMS)
    for norm, runs in record["runs"].items():
        assert list(runs) == list(norms.RECIPES), norm
        for recipe, run in runs.items():
            assert sorted(run["grad_norm"]) == sorted([*layers, "total"]), (norm, recipe)
            assert len(run["loss"]) == steps and {len(v) for v in run["grad_norm"].values()} == {steps}
            # the layers' norms are parts of the total: their squares add up to at most its square
            for i in range(steps):
                assert sum(run["grad_norm"][k][i] ** 2 for k in layers) <= run["grad_norm"]["total"][i] ** 2 * 1.001
    assert (EXPERIMENTS / "norms.json").stat().st_size < 100_000, "a few tens of kB"


def test_layer_of_names_the_blocks_only():
    assert norms.layer_of("decoder.layers.3.attention_cross.q_proj.weight") == "decoder 3"
    assert norms.layer_of("encoder.layers.0.layer_norm_1.bias") == "encoder 0"
    assert norms.layer_of("encoder.layer_norm_final.weight") is None and norms.layer_of("emb_layer.weight") is None


def test_the_gradient_log_is_the_gradient_before_clipping():
    """One step by hand: the log holds each layer's gradient norm as backward left it, and the total
    that clip_grad_norm_ reports before it scales the gradients down."""
    from dataclasses import replace

    from encdec.model import Transformer, sequence_loss

    torch.manual_seed(0)
    model = Transformer(replace(norms.MODEL, norm_position="pre"))
    log = norms.GradientLog(0.0)
    log.attach(model)
    q, a = torch.randint(0, 16, (4, 9)), torch.randint(0, 16, (4, 5))
    loss = sequence_loss(model(q, model.positions(9), a, model.positions(5)), a[:, 1:])
    loss.backward()
    layer = torch.cat([p.grad.flatten() for p in model.decoder.layers[1].parameters()]).norm().item()
    reported = torch.nn.utils.clip_grad_norm_(model.parameters(), 1e-3).item()
    record = log.record()
    assert record["loss"] == [pytest.approx(loss.item(), rel=1e-3)]
    assert record["grad_norm"]["decoder 1"] == [pytest.approx(layer, rel=1e-3)]
    assert record["grad_norm"]["total"] == [pytest.approx(reported, rel=1e-3)] and reported > 1e-2


def test_the_attention_record_is_the_current_run_and_its_last_maps_are_the_checkpoints():
    record = _record("attention_learns")
    assert record["command"].startswith(
        "python -m encdec.experiments.attention_learns --out encdec/checkpoints/experiments/attention_learns.json"
    )
    model, metrics = load_run(attention_learns.PRESET)
    assert (record["preset"], record["question"], record["answer"]) == (
        attention_learns.PRESET,
        attention_learns.QUESTION,
        attention_learns.ANSWER,
    )
    assert (
        record["epochs"]
        == [*attention_learns.EPOCHS, metrics["epochs_run"]]
        == [
            *attention_learns.EPOCHS,
            record["shipped_epoch"],
        ]
    )
    Ka, H, L = len(encode_answer(record["answer"])), model.config.num_heads, model.config.num_dec_layers
    for snap in record["snapshots"]:
        maps = torch.tensor(snap["maps"])
        assert maps.shape == (L, H, Ka - 1, 9)
        assert torch.allclose(maps.sum(-1), torch.ones(L, H, Ka - 1), atol=0.01), "each row a distribution"
    now = attention_learns.snapshot(model)  # the last maps are the shipped checkpoint's (3 digits kept)
    assert torch.allclose(torch.tensor(record["snapshots"][-1]["maps"]), torch.tensor(now["maps"]), atol=2e-3)
    assert record["snapshots"][-1]["answer"] == now["answer"]
    assert record["snapshots"][-1]["answer"] == decode(encode_answer(record["answer"]))


def test_a_small_figure_is_the_same_picture_in_few_colours():
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from PIL import Image

    from encdec.figures import SmallFigure

    def drawn():
        fig, ax = plt.subplots(figsize=(6, 3))
        ax.plot(torch.randn(300, generator=torch.Generator().manual_seed(0)).cumsum(0), lw=0.6)
        return fig

    full = io.BytesIO()
    drawn().savefig(full, format="png", bbox_inches="tight")
    small = SmallFigure(drawn(), colors=16)
    image, original = Image.open(io.BytesIO(small._repr_png_())), Image.open(full)
    assert image.size == original.size and len(image.getcolors(256)) <= 16
    assert len(small.png) < len(full.getvalue()) / 2

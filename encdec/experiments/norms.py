"""Post-norm against pre-norm, with and without warm-up and clipping; ``python -m encdec.experiments.norms``.

Chapter 12 draws its record: six short runs of one deep, narrow model (the ``historical`` shape,
4 + 4 layers of width 32), post-norm and pre-norm (``ModelConfig.norm_position``), each with three
recipes at the ``modern`` peak rate: (a) a step warm-up, (b) no warm-up, (c) no warm-up with
gradient clipping. Every optimiser step records the loss and each layer's gradient norm *before*
clipping (what the clip sees), read through hooks from ``encdec.train.train``'s own loop.

    python -m encdec.experiments.norms --out encdec/checkpoints/experiments/norms.json --threads 1
"""

from __future__ import annotations

import sys
from dataclasses import asdict, replace

from ..config import ModelConfig, TrainConfig
from ..model import sequence_loss
from ..train import train
from . import EXPERIMENTS, arguments, significant, write

NORMS = ("post", "pre")
MODEL = ModelConfig(  # the historical shape: deep and narrow, where the norm's place should matter most
    emb_dim=32,
    num_heads=4,
    feedforward_dim=64,
    num_enc_layers=4,
    num_dec_layers=4,
    dropout=0.1,
    position_encoding="sinusoid",
)
BASE = TrainConfig(  # the modern recipe's optimiser and peak rate, run for a few epochs only
    epochs=3,
    batch_size=64,
    lr=3e-3,  # the modern recipe's peak, from the first step unless warmed up
    optimizer="adamw",
    betas=(0.9, 0.98),
    eps=1e-9,
    weight_decay=0.01,
    schedule="constant",
    eval_every=3,  # validation once, at the end
    seed=0,
)
RECIPES = {
    # the historical recipe's step warm-up (6e-6, then a jump), shortened from 1,000 steps to 100
    "warm-up": replace(BASE, schedule="step_warmup", warmup_lr=6e-6, warmup_steps=100),
    "no warm-up": BASE,
    "no warm-up, clipped": replace(BASE, grad_clip=1.0),  # the modern recipe's clip
}
OUT = EXPERIMENTS / "norms.json"


def layer_of(name: str) -> str | None:
    """The layer a parameter belongs to ("encoder 0" ... "decoder 3"), None outside the blocks."""
    parts = name.split(".")
    return f"{parts[0]} {parts[2]}" if parts[1:2] == ["layers"] else None


class GradientLog:
    """Per optimiser step: the training loss and each layer's gradient norm, before any clipping.

    A forward hook opens a step's record when the model runs in train mode (it recomputes the
    step's loss from the logits, as ``train`` does); each parameter's post-accumulate hook adds its
    squared gradient norm to its layer's sum and to the total. Evaluation passes are not recorded."""

    def __init__(self, label_smoothing: float):
        self.label_smoothing = label_smoothing
        self.steps: list[dict] = []

    def attach(self, model) -> None:
        model.register_forward_hook(self._forward)
        for name, p in model.named_parameters():
            p.register_post_accumulate_grad_hook(self._grad(layer_of(name)))

    def _forward(self, model, args, logits) -> None:
        if model.training:
            labels = args[2][:, 1:]  # (n, Ka-1): the answer without BOS, as shift_targets gives
            loss = sequence_loss(logits.detach(), labels, self.label_smoothing).item()
            self.steps.append({"loss": loss, "sq": {}})

    def _grad(self, layer: str | None):
        """The hook of one parameter of ``layer``: its squared gradient norm into the step's sums."""

        def hook(p) -> None:
            sq, g = self.steps[-1]["sq"], p.grad.detach().pow(2).sum().item()
            sq["total"] = sq.get("total", 0.0) + g
            if layer is not None:
                sq[layer] = sq.get(layer, 0.0) + g

        return hook

    def record(self) -> dict:
        layers = list(self.steps[0]["sq"])
        return {
            "loss": [significant(s["loss"]) for s in self.steps],
            "grad_norm": {k: [significant(s["sq"][k] ** 0.5, 3) for s in self.steps] for k in layers},
        }


def run(norm: str, tc: TrainConfig) -> dict:
    """One run: its per-step log and the validation figures it ended with."""
    log = GradientLog(tc.label_smoothing)
    _, metrics = train(
        replace(MODEL, norm_position=norm), tc, progress=False, watch=lambda e, m: e == 0 and log.attach(m)
    )
    return {
        **log.record(),
        "val_loss": significant(metrics["val_loss"]),
        "val_token_accuracy": significant(metrics["val_token_accuracy"]),
    }


def settings() -> dict:
    """What the runs are, as the record states it (tests hold the shipped record to it)."""
    return {
        "model_config": asdict(MODEL),
        "norms": list(NORMS),
        "recipes": {name: asdict(tc) for name, tc in RECIPES.items()},
    }


def main(argv: list[str] | None = None) -> dict:
    args = arguments(__doc__, OUT, argv)
    record = {
        "command": " ".join(["python -m encdec.experiments.norms", *(argv if argv is not None else sys.argv[1:])])
    }
    record |= settings()
    record["runs"] = {norm: {name: run(norm, tc) for name, tc in RECIPES.items()} for norm in NORMS}
    return write(args.out, record)


if __name__ == "__main__":
    main()

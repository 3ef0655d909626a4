"""Sinusoid against RoPE, measured: the modern recipe trained with each position encoding, on two seeds.

Taught in chapter 13 ("Positions beyond sinusoids"), which also prints what each encoding does with a
stale or a shifted position (``stale_added``, ``cache_start_gap``, ``stale_rope_unchanged``). For each seed both runs start from the same
weights (RoPE has no parameter of its own) and see the same batches in the same order for the same
epochs; only ``ModelConfig.position_encoding`` differs. The one-cycle schedule is planned over the
short run (``EPOCHS``), so each run warms up and anneals within it. The result, with the command that made
it, ships as ``encdec/checkpoints/experiments/positions.json`` with the other experiment records; the
chapter reads it and never trains:

    python -m encdec.experiments.positions --threads 1
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, replace
from pathlib import Path

import torch

from ..attention import KVCache, MultiHeadAttention
from ..broken import broken
from ..config import ModelConfig, TrainConfig
from ..generate import greedy_decode
from ..model import Transformer, position_encoding_sinusoid
from ..presets import get_preset
from ..train import train
from . import EXPERIMENTS

PRESET = "modern"
ENCODINGS = ("sinusoid", "rope")
SEEDS = (1, 2)  # the preset's own seed, and one more: a difference one seed shows could be luck
EPOCHS = 40  # a run of this many epochs takes about four minutes on one thread
EVERY = 5  # epochs between validation passes (loss, token accuracy, exact match)
RESULT = EXPERIMENTS / "positions.json"
KEPT = ("epoch", "train_loss", "val_loss", "val_token_accuracy", "val_exact_match")  # of each history row
FINAL = ("val_loss", "val_token_accuracy", "val_exact_match", "val_unseen_exact_match", "space_wrong", "num_space")


def configs(encoding: str, seed: int, epochs: int = EPOCHS) -> tuple[ModelConfig, TrainConfig]:
    """The preset's recipe with this position encoding and seed, planned over ``epochs`` and run to the end."""
    model_config, train_config = get_preset(PRESET)
    return replace(model_config, position_encoding=encoding), replace(
        train_config,
        seed=seed,
        epochs=epochs,
        stop_when_space_exact=False,  # a fixed length: both runs see the same number of steps
        eval_every=EVERY,
        exact_match_every=EVERY,
    )


def run(epochs: int = EPOCHS, progress: bool = True) -> dict:
    """Every run: per encoding and seed, the history every ``EVERY`` epochs, the final figures, the configs."""
    runs = {encoding: {} for encoding in ENCODINGS}
    for seed in SEEDS:
        for encoding in ENCODINGS:
            runs[encoding][str(seed)] = one_run(encoding, seed, epochs, progress)
    return {"preset": PRESET, "epochs": epochs, "seeds": list(SEEDS), "runs": runs}


def one_run(encoding: str, seed: int, epochs: int, progress: bool) -> dict:
    """One training run of the comparison, as the JSON keeps it."""
    model_config, train_config = configs(encoding, seed, epochs)
    _, metrics = train(model_config, train_config, progress=progress)
    return {
        "history": [{k: row[k] for k in KEPT} for row in metrics["history"] if "val_exact_match" in row],
        **{k: metrics[k] for k in FINAL},
        "train_seconds": round(metrics["train_seconds"], 1),
        "model_config": asdict(model_config),
        "train_config": asdict(train_config),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    parser.add_argument(
        "--out", default=None, help=f"where to write the JSON (default: encdec/checkpoints/experiments/{RESULT.name})"
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    result = run(args.epochs)
    given = list(argv if argv is not None else sys.argv[1:])
    if "--out" in given:  # where the file went does not change the run
        del given[given.index("--out") : given.index("--out") + 2]
    result["command"] = " ".join(["python -m encdec.experiments.positions", *given])
    out = Path(args.out) if args.out else RESULT
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({e: {s: r["val_exact_match"] for s, r in seeds.items()} for e, seeds in result["runs"].items()}))
    return result


@torch.no_grad()
def stale_added(model: Transformer, token_id: int, position: int, K: int = 5) -> tuple[int, float]:
    """Added positions: how many of the M features of a token's input vector move when it is fed with
    position 0 instead of ``position`` (the stale step), and the move's length over the vector's."""
    pos = model.positions(K)[0]  # (K, M)
    token = model.emb_layer.weight[token_id]  # (M,)
    right, stale = token + pos[position], token + pos[0]  # (M,) each: its position, then step 1's
    return int((right - stale).abs().gt(1e-6).sum()), float((right - stale).norm() / right.norm())


@torch.no_grad()
def cache_start_gap(rope: bool, start: int = 500, M: int = 64, L: int = 6, seed: int = 0) -> float:
    """One untrained self-attention layer decodes L tokens one a step into a cache whose first row is at
    position 0, then at ``start``: the largest difference between the two outputs, with RoPE or with
    the sinusoids added (the property is the rotation's, not the training's)."""
    torch.manual_seed(seed)
    att = MultiHeadAttention(4, M).eval()
    att.rope = rope
    x = torch.randn(1, L, M)  # (1, L, M)
    table = position_encoding_sinusoid(start + L, M)  # (1, start + L, M)
    outs = []
    for first in (0, start):
        rows = x if rope else x + table[:, first : first + L]  # RoPE adds nothing
        cache = KVCache(start=first)
        steps = [att(rows[:, t : t + 1], rows[:, t : t + 1], rows[:, t : t + 1], cache=cache) for t in range(L)]
        outs.append(torch.cat(steps, dim=1))  # L x (1, 1, M) -> (1, L, M)
    return float((outs[0] - outs[1]).abs().max())


@torch.no_grad()
def stale_rope_unchanged(model_config: ModelConfig, questions: torch.Tensor, seed: int = 0) -> int:
    """How many answers of an untrained RoPE model of this shape ``broken``'s stale position leaves
    unchanged: it swaps the added positions, which a RoPE model does not have."""
    torch.manual_seed(seed)
    model = Transformer(replace(model_config, position_encoding="rope")).eval()
    intact = greedy_decode(model, questions, max_new_tokens=4)  # (N, Ka)
    with broken(model, "stale_position"):
        stale = greedy_decode(model, questions, max_new_tokens=4)  # (N, Ka)
    return int((stale == intact).all(dim=1).sum())


def load() -> dict:
    """The shipped measurement (what chapter 13 reads)."""
    return json.loads(RESULT.read_text())


if __name__ == "__main__":
    main()

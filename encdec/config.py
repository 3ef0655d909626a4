"""Hyperparameters in one place: the model's shape and the training recipe.

The presets that fill them in live in ``encdec/presets.py``; chapter 12 compares them.
"""

from __future__ import annotations

from dataclasses import dataclass

from .data import VOCAB


@dataclass
class ModelConfig:
    """Shape of the encoder-decoder (the letters of the lesson in brackets)."""

    vocab_size: int = len(VOCAB)  # V
    emb_dim: int = 32  # M
    num_heads: int = 4  # H; emb_dim must divide by it
    feedforward_dim: int = 64  # hidden width of the position-wise MLP
    num_enc_layers: int = 4
    num_dec_layers: int = 4
    dropout: float = 0.2  # on each sublayer's output, before its residual add
    # "simple" (n/K, the historical recipe's), "sinusoid" (both added to the embeddings) or "rope"
    # (nothing added: self-attention rotates q and k by position, chapter 13)
    position_encoding: str = "simple"
    # "post": norm(x + sublayer(x)), the original's and every shipped run's; "pre": x + sublayer(norm(x))
    norm_position: str = "post"


@dataclass
class TrainConfig:
    """How to train: optimiser, schedule, batches and what to evaluate."""

    epochs: int = 100
    batch_size: int = 64
    lr: float = 1e-3  # peak learning rate
    optimizer: str = "adam"  # "adam" (the historical recipe's) or "adamw"
    betas: tuple[float, float] = (0.9, 0.995)  # the historical recipe's Adam betas
    eps: float = 1e-9
    weight_decay: float = 0.0
    schedule: str = "step_warmup"  # "step_warmup" (the historical recipe's), "onecycle" or "constant"
    warmup_lr: float = 6e-6  # step_warmup: learning rate before the switch
    warmup_steps: int = 1000  # step_warmup: optimiser steps before the switch to ``lr``
    label_smoothing: float = 0.0
    grad_clip: float | None = None
    train_subset: int | None = None  # train on the first k pairs only (the tiny-set overfit)
    eval_every: int = 1  # epochs between validation passes (teacher-forced accuracy)
    exact_match_every: int = 0  # epochs between greedy exact-match passes; 0 = only at the end
    stop_at_exact_match: float | None = None  # stop once validation exact match reaches this
    # stop at the first exact-match pass where every question of the task (all 19,602) is right
    stop_when_space_exact: bool = False
    # stop once the validation loss has gone this many epochs without a new low (``epochs`` is then a cap)
    plateau_patience: int | None = None
    seed: int = 0

"""Padding: a batch of answers of different lengths through the real model, and its three masks.

Taught in chapter 12 ("Padding in a real batch"). The toy's answers all have 5 tokens, so a
batch of different lengths is made here, of answer prefixes: each row is padded to the batch's
length, on the right (training) or on the left (a batch of prompts that must all end at the same
column). Three masks then do three different jobs:

- the **causal mask** (``get_subsequent_mask``): no position reads a later one;
- the **padding attention mask** (``padding_mask``): no position reads a padding position;
- the **loss mask** (``masked_loss``): no padding position's logits count in the objective.

Letters: ``N`` batch, ``K`` padded length, ``Kq`` question length, ``M`` model width, ``V``
vocabulary. A mask is boolean and True means *forbidden*, as in ``encdec.attention``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from .model import Transformer

IGNORE = -100  # the label cross_entropy skips (its default ignore_index)


def pad_batch(rows: list[list[int]], pad_id: int, side: str = "right") -> tuple[Tensor, Tensor]:
    """Token rows of different lengths -> ids (N, K) and ``real`` (N, K), True on each row's own
    tokens; K is the longest row's length and the others are filled with ``pad_id`` on ``side``."""
    if side not in ("right", "left"):
        raise ValueError(f"side must be 'right' or 'left', got {side!r}")
    if not rows or any(len(r) == 0 for r in rows):
        raise ValueError("pad_batch needs at least one row, and no empty row")
    K = max(len(r) for r in rows)
    ids = torch.full((len(rows), K), pad_id, dtype=torch.long)  # (N, K)
    real = torch.zeros((len(rows), K), dtype=torch.bool)  # (N, K)
    for i, r in enumerate(rows):
        cols = slice(0, len(r)) if side == "right" else slice(K - len(r), K)
        ids[i, cols] = torch.tensor(r, dtype=torch.long)
        real[i, cols] = True
    return ids, real


def padding_mask(real: Tensor) -> Tensor:
    """``real`` (N, K) -> (N, K, K): True where the source (column) is padding, for every reader."""
    N, K = real.shape
    return (~real)[:, None, :].expand(N, K, K)  # (N, 1, K) -> (N, K, K)


def row_positions(model: Transformer, real: Tensor, Ka: int) -> Tensor:
    """Each row's positions counted from its own first token, in the encoding of an answer of
    ``Ka`` tokens (the toy's "simple" encoding n / Ka depends on it): (N, K, M). A left-padded
    row's first token is at position 0, as it would be alone; padding takes position 0 too."""
    index = (real.long().cumsum(dim=1) - 1).clamp(min=0)  # (N, K): 0, 1, 2, ... from the first real token
    if index.max().item() >= Ka:
        raise ValueError(f"a row has {index.max().item() + 1} tokens: more than the answer's Ka = {Ka}")
    table = model.positions(Ka)[0]  # (Ka, M)
    return table[index]  # (N, K) -> (N, K, M)


def decoder_logits(model: Transformer, ques_b: Tensor, dec_in: Tensor, dec_pos: Tensor, mask: Tensor | None) -> Tensor:
    """The model's logits (N, K, V) for decoder inputs ``dec_in`` (N, K) at positions ``dec_pos``
    (N, K, M) under ``mask`` (N, K, K) or None: the model's own parts, with the mask the caller
    chooses instead of the causal mask ``Transformer.forward`` builds."""
    enc_out = model.encode(ques_b)  # (N, Kq, M)
    x = model.emb_layer(dec_in) + dec_pos  # (N, K) -> (N, K, M)
    return model.proj_to_vocab(model.decoder(x, enc_out, mask))  # (N, K, M) -> (N, K, V)


def masked_loss(logits: Tensor, labels: Tensor, real: Tensor | None) -> Tensor:
    """Mean cross-entropy of logits (N, K, V) against labels (N, K) over the positions ``real``
    (N, K) marks (the loss mask: padding labels become ``IGNORE``); None counts every position."""
    if real is not None:
        labels = labels.masked_fill(~real, IGNORE)  # (N, K)
    V = logits.shape[-1]
    return nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=IGNORE)


def _check_shapes() -> None:
    """Executable shape check of this module (the same assertions live in tests/)."""
    ids, real = pad_batch([[1, 2, 3], [4]], pad_id=0, side="left")
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]] and real.sum().item() == 4
    assert padding_mask(real).shape == (2, 3, 3)
    model = Transformer(
        vocab_size=16, emb_dim=8, num_heads=2, feedforward_dim=16, num_enc_layers=1, num_dec_layers=1, dropout=0.0
    )
    assert row_positions(model, real, 5).shape == (2, 3, 8)
    with torch.no_grad():
        lg = decoder_logits(model, torch.zeros(2, 9, dtype=torch.long), ids, row_positions(model, real, 5), None)
    assert lg.shape == (2, 3, 16)  # (N, K, V)

"""The post-norm encoder-decoder of the original assignment, with the lesson's names.

``ModelConfig.norm_position="pre"`` swaps in the pre-norm blocks (chapter 12's norm experiment).

Taught in chapter 11 (EncoderBlock, DecoderBlock: masked self-attention, then cross-attention
reading encoder memory), chapter 12 (Transformer.forward: the target shift) and chapter 13
(``position_encoding="rope"``: positions rotated into self-attention instead of added).

Letters: ``N`` batch, ``Kq`` question length, ``Ka`` answer length, ``M`` model width,
``V`` vocabulary, ``H`` heads.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from .attention import (  # noqa: F401  (re-exported: the lesson finds them in encdec.model)
    KVCache,
    MultiHeadAttention,
    get_subsequent_mask,
    masked_softmax,
    scaled_dot_product_attention,
)
from .config import ModelConfig


def position_encoding_simple(K: int, M: int) -> Tensor:
    """The historical recipe's encoding (this course's reconstruction: the lesson cards do not show the
    original's): position n of K gets the value n / K in every feature. (1, K, M)."""
    pos = torch.arange(K, dtype=torch.float32) / K  # (K,)
    return pos[None, :, None].expand(1, K, M).clone()  # (1, K, M)


def position_encoding_sinusoid(K: int, M: int) -> Tensor:
    """Sinusoids of "Attention Is All You Need": PE[p, 2i] = sin(p / 10000^(2i/M)), cos at 2i+1. (1, K, M).

    The historical notes infer (no record shows the original's code) that the original took
    ``int(2i / M)``, which is 0 for every feature and collapses every frequency to sin(p) and cos(p).
    """
    pos = torch.arange(K, dtype=torch.float32)[:, None]  # (K, 1)
    two_i = torch.arange(0, M, 2, dtype=torch.float32)  # (ceil(M/2),)
    angles = pos / 10000 ** (two_i / M)  # (K, 1) / (ceil(M/2),) -> (K, ceil(M/2))
    y = torch.zeros(K, M)
    y[:, 0::2] = torch.sin(angles)
    y[:, 1::2] = torch.cos(angles[:, : M // 2])
    return y[None]  # (1, K, M)


def position_encoding_rope(K: int, M: int) -> Tensor:
    """Nothing added: with RoPE the position lives in self-attention's rotation of q and k
    (``attention.rope_rotate``), so the embeddings get zeros. (1, K, M)."""
    return torch.zeros(1, K, M)


POSITION_ENCODINGS = {
    "simple": position_encoding_simple,
    "sinusoid": position_encoding_sinusoid,
    "rope": position_encoding_rope,
}


class FeedForwardBlock(nn.Module):
    """Position-wise MLP: Linear(M, F) -> ReLU -> Linear(F, M), the same on every token."""

    def __init__(self, emb_dim: int, feedforward_dim: int):
        super().__init__()
        self.linear_1 = nn.Linear(emb_dim, feedforward_dim)
        self.linear_2 = nn.Linear(feedforward_dim, emb_dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.linear_2(torch.relu(self.linear_1(x)))  # (N, K, M) -> (N, K, F) -> (N, K, M)


class EncoderBlock(nn.Module):
    """Self-attention over the question, then the MLP; post-norm residuals."""

    def __init__(self, num_heads: int, emb_dim: int, feedforward_dim: int, dropout: float):
        super().__init__()
        self.attention_self = MultiHeadAttention(num_heads, emb_dim)
        self.layer_norm_1 = nn.LayerNorm(emb_dim)
        self.feed_forward = FeedForwardBlock(emb_dim, feedforward_dim)
        self.layer_norm_2 = nn.LayerNorm(emb_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, enc_inp: Tensor, mask: Tensor | None = None) -> Tensor:
        """enc_inp (N, Kq, M) -> (N, Kq, M); every question position may read every other."""
        out_1 = self.attention_self(enc_inp, enc_inp, enc_inp, mask)  # (N, Kq, M)
        out_2 = self.layer_norm_1(enc_inp + self.dropout(out_1))  # residual, then norm
        out_3 = self.feed_forward(out_2)  # (N, Kq, M)
        return self.layer_norm_2(out_2 + self.dropout(out_3))  # (N, Kq, M)


class DecoderBlock(nn.Module):
    """Masked self-attention -> residual/norm -> cross-attention -> residual/norm -> MLP -> residual/norm.

    Self-attention answers "what have I already produced?" (Q, K, V all from the answer prefix);
    cross-attention answers "what should I read from the question?" (Q from the decoder state,
    K and V from the encoder memory).
    """

    def __init__(self, num_heads: int, emb_dim: int, feedforward_dim: int, dropout: float):
        super().__init__()
        self.attention_self = MultiHeadAttention(num_heads, emb_dim)
        self.layer_norm_1 = nn.LayerNorm(emb_dim)
        self.attention_cross = MultiHeadAttention(num_heads, emb_dim)
        self.layer_norm_2 = nn.LayerNorm(emb_dim)
        self.feed_forward = FeedForwardBlock(emb_dim, feedforward_dim)
        self.layer_norm_3 = nn.LayerNorm(emb_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        dec_inp: Tensor,
        enc_inp: Tensor,
        mask: Tensor | None = None,
        cache: tuple[KVCache, KVCache] | None = None,
    ) -> Tensor:
        """dec_inp (N, Ka, M), enc_inp (N, Kq, M), mask (N, Ka, Ka) -> (N, Ka, M).

        ``cache`` = (self-attention cache, cross-attention cache) during cached decoding.
        """
        cache_self, cache_cross = cache if cache is not None else (None, None)
        out_1 = self.attention_self(dec_inp, dec_inp, dec_inp, mask, cache=cache_self)  # (N, Ka, M)
        out_2 = self.layer_norm_1(dec_inp + self.dropout(out_1))  # answer-so-far
        out_3 = self.attention_cross(out_2, enc_inp, enc_inp, cache=cache_cross)  # (N, Ka, Kq) weights -> (N, Ka, M)
        out_4 = self.layer_norm_2(out_2 + self.dropout(out_3))  # answer-so-far + question information
        out_5 = self.feed_forward(out_4)  # (N, Ka, M)
        return self.layer_norm_3(out_4 + self.dropout(out_5))  # (N, Ka, M)


class PreNormEncoderBlock(EncoderBlock):
    """The same sublayers in the pre-norm order, x + sublayer(norm(x)): the residual path skips every norm."""

    def forward(self, enc_inp: Tensor, mask: Tensor | None = None) -> Tensor:
        x = self.layer_norm_1(enc_inp)  # (N, Kq, M)
        out_2 = enc_inp + self.dropout(self.attention_self(x, x, x, mask))  # (N, Kq, M)
        return out_2 + self.dropout(self.feed_forward(self.layer_norm_2(out_2)))  # (N, Kq, M)


class PreNormDecoderBlock(DecoderBlock):
    """DecoderBlock's sublayers in the pre-norm order: each reads a normed copy, adds to the raw stream."""

    def forward(self, dec_inp, enc_inp, mask=None, cache=None) -> Tensor:
        cache_self, cache_cross = cache if cache is not None else (None, None)
        x = self.layer_norm_1(dec_inp)  # (N, Ka, M)
        out_2 = dec_inp + self.dropout(self.attention_self(x, x, x, mask, cache=cache_self))
        out_3 = self.attention_cross(self.layer_norm_2(out_2), enc_inp, enc_inp, cache=cache_cross)  # (N, Ka, M)
        out_4 = out_2 + self.dropout(out_3)
        return out_4 + self.dropout(self.feed_forward(self.layer_norm_3(out_4)))  # (N, Ka, M)


# norm_position -> (encoder block, decoder block); "pre" also closes each stack with one more norm
BLOCKS = {"post": (EncoderBlock, DecoderBlock), "pre": (PreNormEncoderBlock, PreNormDecoderBlock)}


def _final_norm(emb_dim: int, norm_position: str) -> nn.Module:
    """Pre-norm never norms its residual stream, so the stack's output gets one norm; post-norm's is normed."""
    return nn.LayerNorm(emb_dim) if norm_position == "pre" else nn.Identity()


class Encoder(nn.Module):
    """A stack of EncoderBlocks: question embeddings (N, Kq, M) -> memory (N, Kq, M)."""

    def __init__(self, num_heads, emb_dim, feedforward_dim, num_layers, dropout, norm_position="post"):
        super().__init__()
        block = BLOCKS[norm_position][0]
        self.layers = nn.ModuleList(block(num_heads, emb_dim, feedforward_dim, dropout) for _ in range(num_layers))
        self.layer_norm_final = _final_norm(emb_dim, norm_position)

    def forward(self, src_seq: Tensor) -> Tensor:
        for layer in self.layers:
            src_seq = layer(src_seq)  # (N, Kq, M)
        return self.layer_norm_final(src_seq)


class Decoder(nn.Module):
    """A stack of DecoderBlocks: answer embeddings (N, Ka, M) + memory -> states (N, Ka, M)."""

    def __init__(self, num_heads, emb_dim, feedforward_dim, num_layers, dropout, norm_position="post"):
        super().__init__()
        block = BLOCKS[norm_position][1]
        self.layers = nn.ModuleList(block(num_heads, emb_dim, feedforward_dim, dropout) for _ in range(num_layers))
        self.layer_norm_final = _final_norm(emb_dim, norm_position)

    def forward(self, target_seq: Tensor, enc_out: Tensor, mask: Tensor | None = None, caches=None) -> Tensor:
        out = target_seq
        for i, layer in enumerate(self.layers):
            out = layer(out, enc_out, mask, cache=None if caches is None else caches[i])  # (N, Ka, M)
        return self.layer_norm_final(out)


class Transformer(nn.Module):
    """Encoder-decoder with one shared ``emb_layer`` for question and answer, and ``proj_to_vocab``."""

    def __init__(self, config: ModelConfig | None = None, **overrides):
        super().__init__()
        config = config or ModelConfig(**overrides)
        if config.position_encoding not in POSITION_ENCODINGS:
            raise ValueError(
                f"unknown position_encoding {config.position_encoding!r}: expected one of {sorted(POSITION_ENCODINGS)}"
            )
        if config.norm_position not in BLOCKS:
            raise ValueError(f"unknown norm_position {config.norm_position!r}: expected one of {sorted(BLOCKS)}")
        self.config = config
        c = config
        self.emb_layer = nn.Embedding(c.vocab_size, c.emb_dim)
        shape = (c.num_heads, c.emb_dim, c.feedforward_dim)
        self.encoder = Encoder(*shape, c.num_enc_layers, c.dropout, c.norm_position)
        self.decoder = Decoder(*shape, c.num_dec_layers, c.dropout, c.norm_position)
        self.proj_to_vocab = nn.Linear(c.emb_dim, c.vocab_size)
        if c.position_encoding == "rope":
            if (c.emb_dim // c.num_heads) % 2:
                raise ValueError(
                    f"rope pairs a head's features: emb_dim / num_heads must be even, got {c.emb_dim // c.num_heads}"
                )
            # Self-attention only: its queries and keys share one sequence, so m - n is an offset within
            # it. Cross-attention compares an answer position with a question position, two sequences
            # whose offset means nothing; it reads the memory by content (the encoder's own rotations
            # already put the question's order into it), as relative-position encoder-decoders do.
            for block in (*self.encoder.layers, *self.decoder.layers):
                block.attention_self.rope = True
        for p in self.parameters():
            if p.dim() > 1:
                nn.init.xavier_uniform_(p)  # as torch.nn.Transformer does: keeps early logits small

    def positions(self, K: int) -> Tensor:
        """The model's position encoding for a sequence of length K: (1, K, M)."""
        return POSITION_ENCODINGS[self.config.position_encoding](K, self.config.emb_dim).to(
            self.emb_layer.weight.device
        )

    def _check_ids(self, name: str, ids: Tensor) -> None:
        if ids.dim() != 2 or ids.dtype not in (torch.int64, torch.int32):
            raise ValueError(f"{name} must be integer token ids of shape (N, K), got {tuple(ids.shape)} {ids.dtype}")

    def _check_pos(self, name: str, pos: Tensor, ids: Tensor) -> None:
        N, K = ids.shape
        M = self.config.emb_dim
        if pos.dim() != 3 or pos.shape[0] not in (1, N) or pos.shape[1:] != (K, M):
            raise ValueError(
                f"{name} of shape {tuple(pos.shape)} does not fit ids of shape {tuple(ids.shape)}: "
                f"expected {(N, K, M)} or {(1, K, M)}"
            )

    def encode(self, ques_b: Tensor, ques_pos: Tensor | None = None) -> Tensor:
        """Question ids (N, Kq) -> encoder memory (N, Kq, M): Kq contextual slots, not one summary."""
        self._check_ids("ques_b", ques_b)
        if ques_pos is None:
            ques_pos = self.positions(ques_b.shape[1])
        self._check_pos("ques_pos", ques_pos, ques_b)
        q_emb_inp = self.emb_layer(ques_b) + ques_pos  # (N, Kq) -> (N, Kq, M)
        return self.encoder(q_emb_inp)  # (N, Kq, M)

    def forward(self, ques_b: Tensor, ques_pos: Tensor, ans_b: Tensor, ans_pos: Tensor) -> Tensor:
        """Teacher-forced logits (N, Ka-1, V): position t predicts answer token t+1."""
        self._check_ids("ques_b", ques_b)
        self._check_ids("ans_b", ans_b)
        self._check_pos("ans_pos", ans_pos, ans_b)
        if ques_b.shape[0] != ans_b.shape[0]:
            raise ValueError(f"batch sizes differ: ques_b {tuple(ques_b.shape)}, ans_b {tuple(ans_b.shape)}")
        enc_out = self.encode(ques_b, ques_pos)  # (N, Kq, M)
        a_emb = self.emb_layer(ans_b)  # (N, Ka) -> (N, Ka, M)
        # Shift: drop the last answer token (it has no successor to predict) and its position.
        a_emb_inp = a_emb[:, :-1] + ans_pos[:, :-1]  # (N, Ka-1, M)
        mask = get_subsequent_mask(ans_b[:, :-1])  # (N, Ka-1, Ka-1)
        dec_out = self.decoder(a_emb_inp, enc_out, mask)  # (N, Ka-1, M)
        return self.proj_to_vocab(dec_out)  # (N, Ka-1, M) -> (N, Ka-1, V)


def shift_targets(ans_b: Tensor) -> tuple[Tensor, Tensor]:
    """Teacher forcing: decoder input ``ans_b[:, :-1]`` and labels ``ans_b[:, 1:]``, both (N, Ka-1)."""
    if ans_b.dim() != 2:
        raise ValueError(f"ans_b must be token ids of shape (N, Ka), got {tuple(ans_b.shape)}")
    return ans_b[:, :-1], ans_b[:, 1:]


def sequence_loss(logits: Tensor, labels: Tensor, label_smoothing: float = 0.0) -> Tensor:
    """Mean cross-entropy of logits (N, Ka-1, V) against labels (N, Ka-1)."""
    if logits.shape[:2] != labels.shape:
        raise ValueError(f"logits {tuple(logits.shape)} do not align with labels {tuple(labels.shape)}")
    V = logits.shape[-1]
    return nn.functional.cross_entropy(
        logits.reshape(-1, V), labels.reshape(-1), label_smoothing=label_smoothing
    )  # (N*(Ka-1), V) vs (N*(Ka-1),)


def _check_shapes() -> None:
    """Executable shape check of this module (the same assertions live in tests/)."""
    N, Kq, Ka = 3, 9, 5
    model = Transformer(ModelConfig(emb_dim=16, num_heads=2, feedforward_dim=32, num_enc_layers=1, num_dec_layers=1))
    V, M = model.config.vocab_size, model.config.emb_dim
    ques_b = torch.randint(0, V, (N, Kq))
    ans_b = torch.randint(0, V, (N, Ka))
    logits = model(ques_b, model.positions(Kq), ans_b, model.positions(Ka))
    assert logits.shape == (N, Ka - 1, V), logits.shape
    assert model.encode(ques_b).shape == (N, Kq, M)
    assert position_encoding_sinusoid(Ka, M).shape == (1, Ka, M)
    assert not math.isnan(sequence_loss(logits, shift_targets(ans_b)[1]).item())


if __name__ == "__main__":
    _check_shapes()
    print("model shapes ok")

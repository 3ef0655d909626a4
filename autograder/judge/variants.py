"""Known-buggy versions of the exercises, each named in the lesson's words.

The grader runs them on the same inputs and weights as the student's code: when the student's
wrong output equals a variant's output, the feedback names that misconception. Chapter 11
(decoder block, mask), chapter 12 (target shift, loss) and chapter 13 (KV cache) teach the
correct versions; ``encdec.model`` and ``encdec.generate`` hold them.

Every variant takes the reference module with the check's weights and the check's inputs.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from encdec.attention import KVCache, get_subsequent_mask, masked_softmax
from encdec.data import BOS_ID
from encdec.generate import new_caches, pick_next
from encdec.grading.misconceptions import MISCONCEPTIONS, base_name  # noqa: F401 (re-exported)
from encdec.model import sequence_loss

# --- chapter 11: mask and masked softmax ------------------------------------------------------


def mask_variants(seq: Tensor) -> dict[str, Tensor]:
    N, K = seq.shape
    ones = torch.ones((K, K), dtype=torch.bool)
    return {
        "mask_inverted": ~torch.triu(ones, diagonal=1).expand(N, K, K),
        "mask_diagonal": torch.triu(ones, diagonal=0).expand(N, K, K),
        "mask_not_expanded": torch.triu(ones, diagonal=1),
    }


def softmax_variants(scores: Tensor, mask: Tensor) -> dict[str, Tensor]:
    return {
        "mask_after_softmax": torch.softmax(scores, dim=-1).masked_fill(mask, 0.0),
        "no_mask": torch.softmax(scores, dim=-1),
        "mask_inverted": masked_softmax(scores, ~mask),
    }


# --- chapter 11: the decoder block ------------------------------------------------------------


def block_variants(b: nn.Module, dec: Tensor, enc: Tensor, mask: Tensor) -> dict[str, Tensor]:
    """Buggy DecoderBlock.forward bodies, run with block ``b``'s submodules."""
    sa, ca, ff = b.attention_self, b.attention_cross, b.feed_forward
    ln1, ln2, ln3 = b.layer_norm_1, b.layer_norm_2, b.layer_norm_3

    def post(self_mask=mask, q_cross="out_2", res=(True, True, True), norms=(ln1, ln2, ln3), mlp=True, cross=True):
        n1, n2, n3 = norms
        out_1 = sa(dec, dec, dec, self_mask)
        out_2 = n1(dec + out_1 if res[0] else out_1)
        q = out_2 if q_cross == "out_2" else dec
        out_3 = ca(q, enc, enc)
        out_4 = (n2(out_2 + out_3 if res[1] else out_3)) if cross else n2(out_2)
        if not mlp:
            return out_4
        out_5 = ff(out_4)
        return n3(out_4 + out_5 if res[2] else out_5)

    def prenorm():
        x = dec + sa(ln1(dec), ln1(dec), ln1(dec), mask)
        x = x + ca(ln2(x), enc, enc)
        return x + ff(ln3(x))

    def norm_inside():
        out_2 = dec + ln1(sa(dec, dec, dec, mask))
        out_4 = out_2 + ln2(ca(out_2, enc, enc))
        return out_4 + ln3(ff(out_4))

    makers = {
        "no_mask": lambda: post(self_mask=None),
        "mask_inverted": lambda: post(self_mask=~mask),
        "cross_reads_dec_inp": lambda: post(q_cross="dec"),
        "cross_skipped": lambda: post(cross=False),
        "residual_1_missing": lambda: post(res=(False, True, True)),
        "residual_2_missing": lambda: post(res=(True, False, True)),
        "residual_3_missing": lambda: post(res=(True, True, False)),
        "prenorm": prenorm,
        "norm_inside_residual": norm_inside,
        "norms_swapped": lambda: post(norms=(ln2, ln1, ln3)),
        "norms_swapped_23": lambda: post(norms=(ln1, ln3, ln2)),
        "mlp_skipped": lambda: post(mlp=False),
        "mlp_skipped_no_norm": lambda: ln3(post(mlp=False)),
    }
    return _run_all(makers)


# --- chapter 12: shift, forward, loss ---------------------------------------------------------


def shift_variants(ans_b: Tensor) -> dict[str, tuple[Tensor, Tensor]]:
    return {
        "no_shift": (ans_b, ans_b),
        "shift_reversed": (ans_b[:, 1:], ans_b[:, :-1]),
        "labels_not_sliced": (ans_b[:, :-1], ans_b),
        "input_not_sliced": (ans_b, ans_b[:, 1:]),
    }


def forward_variants(m: nn.Module, ques_b, ques_pos, ans_b, ans_pos) -> dict[str, Tensor]:
    """Buggy Transformer.forward bodies, run with model ``m``'s submodules."""

    def run(dec_ids, dec_pos, mask="causal", qpos=True):
        q = m.emb_layer(ques_b) + (ques_pos if qpos else 0)
        enc_out = m.encoder(q)
        x = m.emb_layer(dec_ids) + dec_pos
        if mask == "causal":
            mk = get_subsequent_mask(dec_ids)
        elif mask == "inverted":
            mk = ~get_subsequent_mask(dec_ids)
        else:
            mk = None
        return m.proj_to_vocab(m.decoder(x, enc_out, mk))

    makers = {
        "no_shift": lambda: run(ans_b, ans_pos),
        "shift_reversed": lambda: run(ans_b[:, 1:], ans_pos[:, 1:]),
        "pos_shifted": lambda: run(ans_b[:, :-1], ans_pos[:, 1:]),
        "no_mask": lambda: run(ans_b[:, :-1], ans_pos[:, :-1], mask=None),
        "mask_inverted": lambda: run(ans_b[:, :-1], ans_pos[:, :-1], mask="inverted"),
        "no_question_positions": lambda: run(ans_b[:, :-1], ans_pos[:, :-1], qpos=False),
    }
    return _run_all(makers)


def loss_variants(logits: Tensor, ans_b: Tensor) -> dict[str, Tensor]:
    V = logits.shape[-1]
    return _run_all(
        {
            "labels_not_shifted": lambda: sequence_loss(logits, ans_b[:, :-1]),
            "shift_reversed": lambda: sequence_loss(logits, ans_b[:, :-1]),
            "loss_sum": lambda: nn.functional.cross_entropy(
                logits.reshape(-1, V), ans_b[:, 1:].reshape(-1), reduction="sum"
            ),
        }
    )


# --- chapter 13: KV cache and cached greedy decoding ------------------------------------------


def update_variants(steps: list[tuple[Tensor, Tensor]]) -> dict[str, list[Tensor]]:
    """Keys returned after each update, for caches that overwrite or append on the wrong axis."""
    out: dict[str, list[Tensor]] = {"cache_overwrites": [k for k, _ in steps]}
    for dim, name in ((-1, "cache_wrong_axis"), (1, "cache_wrong_axis_heads"), (0, "cache_wrong_axis_batch")):
        ks, acc = [], None
        try:
            for k, _ in steps:
                acc = k if acc is None else torch.cat([acc, k], dim=dim)
                ks.append(acc)
        except RuntimeError:  # the sizes do not fit that axis: ks stops where the student's did
            pass
        out[name] = ks
    return out


DECODE = ("pos_not_advanced", "pos_ahead", "prefix_refed_into_cache", "cache_overwrites", "ignores_done")


@torch.no_grad()
def decode_variants(
    model: nn.Module, ques_b: Tensor, max_new_tokens: int, modes: tuple[str, ...] = DECODE
) -> dict[str, tuple[Tensor, Tensor]]:
    """Buggy cached decoders (``modes`` of ``DECODE``): token ids (N, 1+n) and each step's
    last-position logits (n, N, V)."""

    def loop(mode: str) -> tuple[Tensor, Tensor]:
        N = ques_b.shape[0]
        tokens = torch.full((N, 1), BOS_ID, dtype=torch.long)
        ans_pos = model.positions(1 + max_new_tokens)
        memory = model.encode(ques_b)
        caches = new_caches(model)
        done = torch.zeros(N, dtype=torch.bool)
        steps = []
        for _ in range(max_new_tokens):
            T = tokens.shape[1]
            if mode == "pos_not_advanced":
                x = model.emb_layer(tokens[:, -1:]) + ans_pos[:, :1]
                h = model.decoder(x, memory, None, caches=caches)
            elif mode == "pos_ahead":  # the token fed at step t placed at position t + 1
                x = model.emb_layer(tokens[:, -1:]) + ans_pos[:, T : T + 1]
                h = model.decoder(x, memory, None, caches=caches)
            elif mode == "ignores_done":  # a right cached step, then plain argmax
                x = model.emb_layer(tokens[:, -1:]) + ans_pos[:, T - 1 : T]
                h = model.decoder(x, memory, None, caches=caches)
            elif mode == "prefix_refed_into_cache":  # no mask fits T new + cached keys
                h = model.decoder(model.emb_layer(tokens) + ans_pos[:, :T], memory, None, caches=caches)
            else:  # cache_overwrites: self-attention sees the newest token only
                h = model.decoder(model.emb_layer(tokens[:, -1:]) + ans_pos[:, T - 1 : T], memory, None)
            logits = model.proj_to_vocab(h[:, -1])  # (N, V)
            steps.append(logits)
            if mode == "ignores_done":  # the mistake: a finished row goes on decoding
                nxt = logits.argmax(-1)
            else:
                nxt, done = pick_next(logits, done)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
        return tokens, torch.stack(steps)

    return _run_all({m: (lambda m=m: loop(m)) for m in modes})


# The stretch: a decoder prefix (N, P) prefilled at once, then one token per step. Each mistake is a
# prefill the lesson's loop can be turned into by one wrong line.
PREFILL = ("prefill_no_mask", "prefill_last_only", "prefill_pos_restarted", "cache_overwrites")


@torch.no_grad()
def prefill_decode(
    model: nn.Module, ques_b: Tensor, prefix: Tensor, max_new_tokens: int, mode: str | None = None
) -> tuple[Tensor, Tensor]:
    """Cached greedy decoding that continues ``prefix`` (N, P): the lesson's (``mode`` None) or with
    one mistake of ``PREFILL``. Returns the tokens (N, P + n) and each step's last-position logits
    (n, N, V)."""
    N, P = prefix.shape
    ans_pos = model.positions(P + max_new_tokens)  # (1, P + n, M), as greedy_decode
    memory = model.encode(ques_b)  # (N, Kq, M)
    caches = new_caches(model)
    done = torch.zeros(N, dtype=torch.bool)
    tokens, steps = prefix, []
    for t in range(max_new_tokens):
        T = tokens.shape[1]
        if t == 0 and mode == "prefill_last_only":  # the cache gets the last prefix position only
            h = model.decoder(model.emb_layer(prefix[:, -1:]) + ans_pos[:, P - 1 : P], memory, None, caches=caches)
        elif t == 0:  # the prefill: P positions at once, (N, P, M)
            mask = None if mode == "prefill_no_mask" else get_subsequent_mask(prefix)  # (N, P, P)
            h = model.decoder(model.emb_layer(prefix) + ans_pos[:, :P], memory, mask, caches=caches)
        else:  # the newest token (index T - 1) at its position, T - 1; restarted: at t - 1, from 0
            p = t - 1 if mode == "prefill_pos_restarted" else T - 1
            x = model.emb_layer(tokens[:, -1:]) + ans_pos[:, p : p + 1]  # (N, 1, M)
            # cache_overwrites: the self-attention of a step sees the newest token only
            h = model.decoder(x, memory, None, caches=None if mode == "cache_overwrites" else caches)
        steps.append(model.proj_to_vocab(h[:, -1]))  # (N, V)
        nxt, done = pick_next(steps[-1], done)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)  # (N, T + 1)
    V = model.proj_to_vocab.out_features
    return tokens, (torch.stack(steps) if steps else torch.zeros(0, N, V))


def prefill_variants(
    model: nn.Module, ques_b: Tensor, prefix: Tensor, max_new_tokens: int
) -> dict[str, tuple[Tensor, Tensor]]:
    """Buggy prefills (``PREFILL``): tokens (N, P + n) and step logits (n, N, V) of each."""
    return _run_all({m: (lambda m=m: prefill_decode(model, ques_b, prefix, max_new_tokens, m)) for m in PREFILL})


# Cached decodings with one mistake, replayed along a student's own tokens: named by their step logits
# (the tokens alone cannot tell them from each other on every model).
REPLAYED = ("layers_not_chained", "memory_without_positions", "one_cache_for_all_layers")


@torch.no_grad()
def replayed_step_logits(model: nn.Module, ques: Tensor, tokens: Tensor, mode: str) -> Tensor:
    """The step logits (n, N, V) a cached decoding with one mistake (``REPLAYED``) gives along the
    student's own tokens (N, 1 + n): each step feeds token t at position t, as the lesson does."""
    n = tokens.shape[1] - 1
    pos = model.positions(1 + n)
    layers = model.decoder.layers
    if mode == "memory_without_positions":
        memory = model.encoder(model.emb_layer(ques))  # (N, Kq, M) without ques_pos
    else:
        memory = model.encode(ques)
    if mode == "one_cache_for_all_layers":
        pair = (KVCache(), KVCache(static=True))
        caches = [pair] * len(layers)  # e.g. [(KVCache(), KVCache(static=True))] * L: one pair shared
    else:
        caches = [(KVCache(), KVCache(static=True)) for _ in layers]
    steps = []
    for t in range(n):
        x = model.emb_layer(tokens[:, t : t + 1]) + pos[:, t : t + 1]  # (N, 1, M)
        h = x
        for layer, cache in zip(layers, caches):
            h = layer(x if mode == "layers_not_chained" else h, memory, None, cache=cache)  # (N, 1, M)
        steps.append(model.proj_to_vocab(h[:, -1]))  # (N, V)
    return torch.stack(steps)  # (n, N, V)


def _run_all(makers: dict) -> dict:
    """Run every variant; one that raises on these inputs simply cannot match."""
    out = {}
    with torch.no_grad():
        for name, make in makers.items():
            try:
                out[name] = make()
            except Exception:
                continue
    return out

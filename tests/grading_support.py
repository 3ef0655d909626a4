"""What the grading tests share: one check run outside nbgrader (graded, or the student's own run)
and hand-written student solutions, right or with one mistake: decoder blocks and cached decoders.

A decoder here chooses its tokens with the package's ``pick_next`` (the function the exercise
gives students) unless a test hands it another choice; its cache is the test's own, since the
package's ``KVCache.update`` is an exercise target.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

from autograder.fixtures import in_process
from autograder.fixtures.in_process import graded_inputs  # noqa: F401 (the tests draw inputs through it)
from encdec import attention as A
from encdec import model as M
from encdec.data import BOS_ID
from encdec.generate import pick_next
from encdec.grading import checks as C
from encdec.grading import wire

ROOT = Path(__file__).resolve().parents[1]
SEED = 12345


def graded(check_id, impl, workdir, seed=SEED):
    """A graded run of one check, as the grader does it: inputs in, the student's code, verdict.
    Returns the verdict and the error the kernel side raised (None when the student's code ran)."""
    return in_process.verdict(check_id, impl, workdir, seed)


def own_run(check_id, impl, workdir):
    """The student's own run of a visible check, against the stored reference file."""
    assignment = check_id.split(".")[0]
    ref = workdir / wire.REFERENCE_DIR
    if not ref.exists():
        shutil.copytree(ROOT / "solutions" / assignment / "reference", ref)
    C.run(check_id, impl, workdir)


def block_with(body):
    """A student's DecoderBlock whose forward is ``body(self, dec_inp, enc_inp, mask)``."""

    class Block(M.DecoderBlock):
        def forward(self, dec_inp, enc_inp, mask=None):
            return body(self, dec_inp, enc_inp, mask)

    return Block


def lesson_forward(s, x, enc, mask, self_mask="mask", q="out_2", res2=True, mlp=True):
    """The lesson's post-norm block on ``s``'s parts; the keywords move one wire each (no self-attention
    mask, the cross-attention query, the second residual, the MLP)."""
    out_1 = s.attention_self(x, x, x, mask if self_mask == "mask" else None)
    out_2 = s.layer_norm_1(x + out_1)
    out_3 = s.attention_cross(out_2 if q == "out_2" else x, enc, enc)
    out_4 = s.layer_norm_2(out_2 + out_3 if res2 else out_3)
    out_5 = s.feed_forward(out_4) if mlp else torch.zeros_like(out_4)
    return s.layer_norm_3(out_4 + out_5)


class AppendingCache(A.KVCache):
    """The lesson's cache, the test's own copy: new keys and values appended along the positions."""

    def update(self, k_new, v_new):
        self.k = k_new if self.k is None else torch.cat([self.k, k_new], dim=2)  # (N, H, T, Dh)
        self.v = v_new if self.v is None else torch.cat([self.v, v_new], dim=2)
        return self.k, self.v


class OverwritingCache(A.KVCache):
    """A known mistake: the cache keeps only what the last update brought."""

    def update(self, k_new, v_new):
        self.k, self.v = k_new, v_new
        return self.k, self.v


def plain_argmax(logits_last, done):
    """A known mistake: the greedy choice without pick_next's rule, so a finished row goes on."""
    return logits_last.argmax(-1), done


def cached_decoder(
    position=lambda t: t, encoder_every_step=False, cache=AppendingCache, choose=pick_next, mistake=None
):
    """Cached greedy decoding as the lesson writes it: step t feeds its newest token at the
    answer position ``position(t)`` through caches of class ``cache``, and ``choose`` picks the
    next tokens; ``encoder_every_step`` re-runs the encoder at every step. ``mistake``: one of
    ``memory_without_positions`` (the encoder reads the embeddings alone),
    ``one_cache_for_all_layers`` (a list built with *) or ``layers_not_chained`` (each layer reads
    the embedding)."""

    @torch.no_grad()
    def decode(model, ques_b, n):
        N = ques_b.shape[0]
        tokens = torch.full((N, 1), BOS_ID, dtype=torch.long)  # (N, 1)
        ans_pos = model.positions(1 + n)  # (1, 1 + n, M)
        memory = (
            model.encoder(model.emb_layer(ques_b)) if mistake == "memory_without_positions" else model.encode(ques_b)
        )  # (N, Kq, M)
        layers = model.decoder.layers
        if mistake == "one_cache_for_all_layers":
            caches = [(cache(), cache(static=True))] * len(layers)
        else:
            caches = [(cache(), cache(static=True)) for _ in layers]
        done = torch.zeros(N, dtype=torch.bool)  # (N,)
        for t in range(n):
            if encoder_every_step:
                memory = model.encode(ques_b)
            p = position(t)
            x = model.emb_layer(tokens[:, -1:]) + ans_pos[:, p : p + 1]  # (N, 1, M)
            if mistake == "layers_not_chained":
                for layer, pair in zip(layers, caches):
                    h = layer(x, memory, None, cache=pair)  # (N, 1, M): every layer fed the embedding
            else:
                h = model.decoder(x, memory, None, caches=caches)  # (N, 1, M)
            nxt, done = choose(model.proj_to_vocab(h[:, -1]), done)  # (N,), (N,)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)  # (N, t + 2)
        return tokens

    return decode


@torch.no_grad()
def uncached(model, ques_b, n):
    """No cache: the whole prefix goes through the decoder at every step."""
    tokens = torch.full((ques_b.shape[0], 1), BOS_ID, dtype=torch.long)  # (N, 1)
    ans_pos, memory = model.positions(1 + n), model.encode(ques_b)
    done = torch.zeros(ques_b.shape[0], dtype=torch.bool)
    for t in range(n):
        h = model.decoder(model.emb_layer(tokens) + ans_pos[:, : t + 1], memory, A.get_subsequent_mask(tokens))
        nxt, done = pick_next(model.proj_to_vocab(h[:, -1]), done)
        tokens = torch.cat([tokens, nxt[:, None]], dim=1)
    return tokens


class DropsOldestCache(AppendingCache):
    """Keeps all but the oldest key once it holds three: a cache mistake no judge names."""

    def update(self, k_new, v_new):
        k, v = super().update(k_new, v_new)
        return (k[:, :, 1:], v[:, :, 1:]) if k.shape[2] > 2 else (k, v)


class ScalesValuesCache(AppendingCache):
    """Returns its values scaled by 1.05: another cache mistake no judge names."""

    def update(self, k_new, v_new):
        k, v = super().update(k_new, v_new)
        return k, v * 1.05

"""Grader side of the ``kv_cache`` exercise (chapter 13): ``KVCache.update`` and cached greedy
decoding: inputs, references, judges."""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from torch import Tensor

from encdec import attention as A
from encdec import model as Mdl
from encdec.config import ModelConfig
from encdec.generate import greedy_decode

from . import variants as Var
from .core import Check, Verdict, compare, diagnosis, first_failure, gen, randomize_, state_arrays

CHECKS: list[Check] = []


def _ints(g, lo, hi) -> int:
    return int(torch.randint(lo, hi, (1,), generator=g))


# --- KVCache.update --------------------------------------------------------------------------------

def _build_update(seed: int, hidden: bool) -> dict:
    g = gen(seed)
    N, H, Dh = (2, 2, 4) if not hidden else (_ints(g, 1, 4), 2, _ints(g, 3, 7))
    lengths = (3, 1, 1) if not hidden else (_ints(g, 2, 5), 1, 2, 1)
    steps = [(torch.randn(N, H, t, Dh, generator=g), torch.randn(N, H, t, Dh, generator=g)) for t in lengths]
    return {"steps": steps, "dims": {"N": N, "H": H, "Dh": Dh}}


def _wire_update(inputs):
    arrays = {}
    for i, (k, v) in enumerate(inputs["steps"]):
        arrays[f"k/{i}"], arrays[f"v/{i}"] = k.numpy(), v.numpy()
    return {"steps": len(inputs["steps"])}, arrays


def _ref_update(inputs):
    cache = A.KVCache()
    out = {}
    for i, (k, v) in enumerate(inputs["steps"]):
        kk, vv = cache.update(k, v)
        out[f"k{i}"], out[f"v{i}"], out[f"len{i}"] = kk.numpy(), vv.numpy(), np.array(len(cache))
    return out


def _update_variants(inputs) -> dict:
    return {name: {f"k{i}": k.numpy() for i, k in enumerate(ks)} for name, ks in Var.update_variants(inputs["steps"]).items()}


def _judge_update(check):
    def judge(got, ref, inputs):
        cands = Var.update_variants(inputs["steps"])
        results = []
        for i in range(len(inputs["steps"])):
            name = f"k{i}"
            results.append(compare(check, f"the keys after update {i + 1}", got.get(name), ref[name],
                                   candidates=lambda i=i: {n: ks[i] for n, ks in cands.items() if len(ks) > i}))
            results.append(compare(check, f"the values after update {i + 1}", got.get(f"v{i}"), ref[f"v{i}"]))
            results.append(compare(check, f"len(cache) after update {i + 1}", got.get(f"len{i}"), ref[f"len{i}"], exact=True))
            if not all(r.ok for r in results):
                break
        return first_failure(*results)
    return judge


for _cid, _hidden, _seed in (("kv_cache.update", False, 1301), ("kv_cache.update_hidden", True, 0)):
    _c = Check(id=_cid, title="KVCache.update", task="KVCache.update(k_new, v_new)", kind="update", hidden=_hidden,
               seed=_seed, build=(lambda s, h=_hidden: _build_update(s, h)), wire=_wire_update,
               reference=_ref_update, variants=_update_variants)
    _c.judge = _judge_update(_c)
    CHECKS.append(_c)


# --- cached greedy decoding --------------------------------------------------------------------------

def _build_decode(seed: int, hidden: bool) -> dict:
    g = gen(seed)
    layers = 2 if not hidden else _ints(g, 2, 4)
    cfg = ModelConfig(emb_dim=16, num_heads=2, feedforward_dim=32, num_enc_layers=layers, num_dec_layers=layers,
                      dropout=0.2, position_encoding="sinusoid")
    model = randomize_(Mdl.Transformer(cfg), seed)
    N, n = (6, 5) if not hidden else (_ints(g, 4, 9), _ints(g, 4, 8))
    ques = torch.randint(0, 16, (N, 9), generator=g)
    # Keep only questions whose greedy path has no near-tie, so a correct cached decoder cannot
    # pick a different token because of float rounding.
    for _ in range(20):
        small = _min_margins(model, ques, n) < 1e-3
        if not small.any():
            break
        ques[small] = torch.randint(0, 16, (int(small.sum()), 9), generator=g)
    return {"model": model, "config": cfg, "ques": ques, "n": n, "dims": {"N": N, "n": n}}


def _wire_decode(inputs):
    return ({"config": dataclasses.asdict(inputs["config"]), "n": inputs["n"]},
            {**state_arrays(inputs["model"]), "ques": inputs["ques"].numpy()})


def _min_margins(model, ques, n) -> Tensor:
    """Per question, the smallest gap between the best and second-best logit along the greedy path."""
    tokens = greedy_decode(model, ques, n, use_cache=False)
    top2 = _teacher_forced_logits(model, ques, tokens).topk(2, dim=-1).values  # (n, N, 2)
    return (top2[..., 0] - top2[..., 1]).min(dim=0).values  # (N,)


@torch.no_grad()
def _teacher_forced_logits(model, ques, tokens) -> Tensor:
    """Logits (n, N, V) of each decoding step, computed uncached along ``tokens`` (N, 1+n)."""
    n = tokens.shape[1] - 1
    pos = model.positions(1 + n)
    x = model.emb_layer(tokens[:, :-1]) + pos[:, :n]
    h = model.decoder(x, model.encode(ques), A.get_subsequent_mask(tokens[:, :-1]))
    return model.proj_to_vocab(h).transpose(0, 1)  # (N, n, V) -> (n, N, V)


def _ref_decode(inputs):
    tokens = greedy_decode(inputs["model"], inputs["ques"], inputs["n"], use_cache=False)
    return {"tokens": tokens.numpy(),
            "step_logits": _teacher_forced_logits(inputs["model"], inputs["ques"], tokens).numpy()}


def _decode_variants(inputs) -> dict:
    out = Var.decode_variants(inputs["model"], inputs["ques"], inputs["n"])
    return {k: {"tokens": v[0].numpy(), "step_logits": v[1].numpy()} for k, v in out.items()}


def _expected_structure(what: str):
    def expected(inputs):
        if what == "encoder":
            return {"encoder_calls": np.array(1)}
        return {"decoder_lengths": np.ones(inputs["n"], dtype=np.int64)}
    return expected


def _judge_tokens(check):
    def judge(got, ref, inputs):
        variants = {}

        def cands(i):
            if not variants:
                variants.update(Var.decode_variants(inputs["model"], inputs["ques"], inputs["n"]))
            return {k: v[i].numpy() for k, v in variants.items()}

        r = compare(check, "the generated tokens", got.get("tokens"), ref["tokens"], exact=True, candidates=lambda: cands(0))
        if not r.ok:
            return r
        # Same tokens: the logits of every step must match too (a random model often repeats one
        # token, so a wrong position or a lost cache can hide behind the argmax).
        steps = got.get("step_logits")
        k = 0 if steps is None or steps.ndim != 3 else min(len(steps), len(ref["step_logits"]))
        if k == 0:
            return Verdict(False, f"{check.id}: no logits of model.proj_to_vocab were recorded; decode with the model's own parts.")
        return compare(check, "the logits of each decoding step (last position)", steps[:k], ref["step_logits"][:k],
                       candidates=lambda: {n: v[:k] for n, v in cands(1).items()})
    return judge


def _judge_structure(check, what: str):
    def judge(got, ref, inputs):
        n = inputs["n"]
        results = []
        tok = got.get("tokens")
        if tok is None or tok.shape != ref["tokens"].shape:
            results.append(Verdict(False, f"{check.id}: greedy_decode_cached should return ids of shape (N, 1 + max_new_tokens) = "
                                          f"{ref['tokens'].shape}; got {None if tok is None else tok.shape}."))
        if what in ("encoder", "both"):
            calls = int(got.get("encoder_calls", np.array(-1)))
            if calls != 1:
                name = "encoder_every_step" if calls > 1 else None
                results.append(Verdict(False, f"{check.id}: the encoder ran {calls} times for one call that decoded {n} tokens; "
                                              "expected exactly once." + diagnosis(name)))
        if what in ("cache", "both"):
            lens = [int(x) for x in got.get("decoder_lengths", np.array([], dtype=np.int64)).reshape(-1)]
            ok = len(lens) >= 1 and lens[0] == 1 and all(x == 1 for x in lens[1:])
            if not ok:
                growing = len(lens) > 1 and lens[1] > 1
                results.append(Verdict(False, f"{check.id}: the decoder was fed {lens} tokens per step; expected the BOS prefix once, "
                                              "then 1 token per step ([1, 1, 1, ...])." + diagnosis("no_cache" if growing else None)))
        if results:
            return first_failure(*results)
        return Verdict(True, f"{check.title}: ok.")
    return judge


for _cid, _hidden, _seed, _what, _title in (
    ("kv_cache.tokens", False, 1302, "tokens", "cached greedy decoding, tokens"),
    ("kv_cache.encoder_once", False, 1302, "encoder", "encoder runs once"),
    ("kv_cache.one_token_per_step", False, 1302, "cache", "one new token per decoder step"),
    ("kv_cache.tokens_hidden", True, 0, "tokens", "cached greedy decoding on a fresh model"),
    ("kv_cache.structure_hidden", True, 0, "both", "encoder once and one token per step on a fresh model"),
):
    _c = Check(id=_cid, title=_title, task="greedy_decode_cached(model, ques_b, max_new_tokens)", kind="decode",
               hidden=_hidden, seed=_seed, build=(lambda s, h=_hidden: _build_decode(s, h)), wire=_wire_decode,
               reference=_ref_decode, variants=_decode_variants if _what == "tokens" else (lambda inputs: {}),
               expected=None if _what in ("tokens", "both") else _expected_structure(_what),
               when_larger={"encoder_calls": "encoder_every_step", "decoder_lengths": "no_cache"},
               measured_in_kernel=_what != "tokens")
    _c.judge = _judge_tokens(_c) if _what in ("tokens",) else _judge_structure(_c, _what)
    CHECKS.append(_c)

"""Grader side of the ``kv_cache`` exercise (chapter 13): ``KVCache.update`` and cached greedy
decoding: inputs, references, judges."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import torch
from torch import Tensor

from encdec import attention as A
from encdec import model as Mdl
from encdec.config import ModelConfig
from encdec.data import BOS_ID, EOS_ID
from encdec.grading import language
from encdec.grading.compare import cache_blame
from encdec.generate import greedy_decode, pick_next

from . import stages as St
from . import variants as Var
from .core import ATOL, Check, Verdict, compare, diagnosis, first_failure, gen, randomize_, same, state_arrays
from .labels import label_of

CHECKS: list[Check] = []


def _ints(g, lo, hi) -> int:
    return int(torch.randint(lo, hi, (1,), generator=g))


# --- KVCache.update --------------------------------------------------------------------------------

def _build_update(seed: int, hidden: bool) -> dict:
    g = gen(seed)
    # the visible check has several sequences and heads; the hidden one a batch of one with one head
    N, H, Dh = (2, 2, 4) if not hidden else (1, 1, _ints(g, 3, 7))
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
    for attempt in range(_ATTEMPTS):
        if attempt and attempt % 5 == 0:  # a model whose rows barely depend on the question: draw another
            model = randomize_(Mdl.Transformer(cfg), seed + 100_003 * attempt)
        ques = torch.randint(0, 16, (N, 9), generator=g)
        if _set_eos_readout(model, ques, n, g):
            return {"model": model, "config": cfg, "ques": ques, "n": n, "dims": {"N": N, "n": n}}
    raise RuntimeError(f"kv_cache seed {seed}: no questions with rows that finish early and rows that never finish "
                       f"in {_ATTEMPTS} draws")


_ATTEMPTS = 100
_TIE = 1e-3  # the smallest gap between the best and second-best logit a greedy choice may have
_NORM = 50.0  # the longest EOS row allowed (other rows are ~1.5 long): float noise in the kernel grows with it
_RIDGES = (1.0, 0.1, 0.01, 1e-3)
_SPLIT = 1.0  # how far the EOS logit is set from the best other logit where a row must finish or not


@torch.no_grad()
def _states(model, ques, tokens) -> Tensor:
    """Decoder outputs (N, n, M) of each decoding step, computed uncached along ``tokens`` (N, 1+n)."""
    n = tokens.shape[1] - 1
    x = model.emb_layer(tokens[:, :-1]) + model.positions(1 + n)[:, :n]  # (N, n, M)
    return model.decoder(x, model.encode(ques), A.get_subsequent_mask(tokens[:, :-1]))  # (N, n, M)


def _best_other(logits: Tensor) -> Tensor:
    """The largest logit that is not EOS: (..., V) -> (...)."""
    return torch.cat([logits[..., :EOS_ID], logits[..., EOS_ID + 1:]], dim=-1).max(dim=-1).values


@torch.no_grad()
def _set_eos_readout(model, ques, n, g) -> bool:
    """Choose the EOS row of ``proj_to_vocab`` so that, on these questions, a row finishes before the
    last step (and the model would continue it with another token: only pick_next keeps it at EOS)
    and another row never finishes, with no near-tie on the greedy path. The EOS row changes only
    the EOS logit, so the greedy path that never picks EOS is fixed: a least-squares fit puts the
    EOS logit above or below the best other one where wanted. False (row restored) when no try works."""
    proj = model.proj_to_vocab
    w0, b0 = proj.weight[EOS_ID].clone(), proj.bias[EOS_ID].clone()
    N = ques.shape[0]
    path = torch.full((N, 1), BOS_ID, dtype=torch.long)  # (N, 1): the greedy path that never picks EOS
    for _ in range(n):
        nxt = proj(_states(model, ques, torch.cat([path, path[:, -1:]], dim=1))[:, -1])  # (N, V)
        nxt[:, EOS_ID] = -math.inf
        path = torch.cat([path, nxt.argmax(dim=-1, keepdim=True)], dim=1)  # (N, t + 2)
    h = _states(model, ques, path)  # (N, n, M)
    top = _best_other(proj(h))  # (N, n)
    for _ in range(16):
        early, never = torch.randperm(N, generator=g)[:2].tolist()
        s = _ints(g, 0, n - 1)  # the early row's EOS step, before the last one
        fed = path.clone()
        fed[early, s + 1] = EOS_ID
        after = _states(model, ques, fed)[early, s + 1]  # (M,) the step after that EOS
        feats = torch.cat([h[early, : s + 1], after[None], h[never]])  # (s + 2 + n, M)
        target = torch.cat([top[early, : s + 1] - _SPLIT, _best_other(proj(after))[None] - _SPLIT, top[never] - _SPLIT])
        target[s] += 2 * _SPLIT  # EOS wins at step s of the early row
        X = torch.cat([feats, torch.ones(len(feats), 1)], dim=1).double()  # (s + 2 + n, M + 1): weights and bias
        wins = torch.zeros(len(X), dtype=torch.bool)
        wins[s] = True
        for ridge in _RIDGES:  # the shortest EOS row that still does it: a long one makes the EOS logit
            # sensitive to float rounding in the kernel
            wb = torch.linalg.solve(X.T @ X + ridge * torch.eye(X.shape[1], dtype=X.dtype), X.T @ target.double())  # (M + 1,)
            fit, line = (X @ wb).float(), target + torch.where(wins, -_SPLIT, _SPLIT)  # line: the best other logit
            if wb[:-1].norm() > _NORM or not torch.where(wins, fit > line + _SPLIT / 4, fit < line - _SPLIT / 4).all():
                continue
            proj.weight[EOS_ID], proj.bias[EOS_ID] = wb[:-1].float(), wb[-1].float()
            # a near-tie would let a correct cached decoder pick another token through float rounding
            if _exercises_eos(model, ques, n) and _min_margins(model, ques, n).min() >= _TIE \
                    and _rounding_safe(model, ques, n):
                return True
    proj.weight[EOS_ID], proj.bias[EOS_ID] = w0, b0
    return False


@torch.no_grad()
def _rounding_safe(model, ques, n) -> bool:
    """The step logits in float32 stay within a tenth of the judge's tolerance of their float64
    values: a cached decoder, which rounds in another order, then still matches."""
    import copy

    tokens = greedy_decode(model, ques, n, use_cache=False)  # (N, 1 + n)
    single = _teacher_forced_logits(model, ques, tokens).double()  # (n, N, V)
    double = _teacher_forced_logits(copy.deepcopy(model).double(), ques, tokens)  # (n, N, V)
    return bool(((single - double).abs() <= 0.1 * (ATOL + ATOL * double.abs())).all())


@torch.no_grad()
def _exercises_eos(model, ques, n) -> bool:
    """Some row finishes before the last step and the model's own next choice for it is not EOS
    (so a decoder that ignores finished rows answers differently), and some row never finishes."""
    tokens = greedy_decode(model, ques, n, use_cache=False)  # (N, 1 + n)
    logits = _teacher_forced_logits(model, ques, tokens)  # (n, N, V)
    is_eos = tokens[:, 1:] == EOS_ID  # (N, n)
    never = ~is_eos.any(dim=1)  # (N,)
    first = torch.where(is_eos.any(dim=1), is_eos.int().argmax(dim=1), n)  # (N,) step of the first EOS
    early = [r for r in range(len(first)) if first[r] < n - 1]
    if not never.any() or not early:
        return False
    after = [logits[first[r] + 1, r] for r in early]  # (V,) each: the step after the row's EOS
    return any(float(a.max() - a[EOS_ID]) > _SPLIT / 2 and int(a.argmax()) != EOS_ID for a in after)


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
        tok, steps = got.get("tokens"), got.get("step_logits")

        def confirmed():
            """Known mistakes whose tokens *and* step logits both equal the student's: a name is
            only given then (a random model repeats tokens, so tokens alone can match by chance)."""
            if not variants:
                variants.update(Var.decode_variants(inputs["model"], inputs["ques"], inputs["n"]))
            if steps is None:
                return {}
            return {k: v[0].numpy() for k, v in variants.items() if same(steps, v[1].numpy())}

        r = compare(check, "the generated tokens", tok, ref["tokens"], exact=True, candidates=confirmed)
        if r.ok:
            # Same tokens: the logits of every step must match too (a random model often repeats one
            # token, so a wrong position or a lost cache can hide behind the argmax).
            k = 0 if steps is None or steps.ndim != 3 else min(len(steps), len(ref["step_logits"]))
            if k == 0:
                return Verdict(False, language.text("no_step_logits", check_id=check.id))
            r = compare(check, "the logits of each decoding step (last position)", steps[:k], ref["step_logits"][:k],
                        candidates=lambda: {n: steps[:k] for n, t in confirmed().items() if same(tok, t, True)})
        if not r.ok and language.head("diagnosis") not in r.message:
            r.message += _observed(inputs, tok, steps)
        if not r.ok and _replayable(inputs, tok):
            m = inputs["model"]
            with torch.no_grad():
                emb, pos = m.emb_layer.weight.numpy(), m.positions(1 + inputs["n"]).numpy()
            r.message += St.stage_note(r.message, St.locate(St.decode_stage, got, tok, emb, pos), "decoding")
        return r
    return judge


def _replayable(inputs, tok) -> bool:
    """The student's tokens are a prefix the model can replay: (N, 1+n) ids in range, BOS first."""
    model, ques, n = inputs["model"], inputs["ques"], inputs["n"]
    return not (tok is None or tok.shape != (ques.shape[0], 1 + n) or not np.issubdtype(tok.dtype, np.integer)
                or tok.min() < 0 or tok.max() >= model.config.vocab_size or (tok[:, 0] != BOS_ID).any())


def _observed(inputs, tok, steps) -> str:
    """What the decoding did wrong, stage by stage, when no known mistake fits: the first step whose
    logits differ from the model's on the same prefix (the student's own tokens, run uncached), or,
    when every step's logits are right, the first token that was not the greedy choice."""
    model, ques, n = inputs["model"], inputs["ques"], inputs["n"]
    N = ques.shape[0]
    if not _replayable(inputs, tok):
        return ""  # no prefix to replay: the shapes above say what is wrong
    tokens = torch.from_numpy(tok.astype(np.int64))
    own = _teacher_forced_logits(model, ques, tokens).numpy()  # (n, N, V) along the student's tokens
    k = 0 if steps is None or steps.ndim != 3 or steps.shape[1:] != own.shape[1:] else min(len(steps), n)
    for t in range(k):
        bad = ~np.isclose(steps[t], own[t], atol=ATOL, rtol=ATOL).all(axis=-1)  # (N,)
        if bad.any():
            return language.text("observed_step_logits", step=t + 1, row=int(np.argmax(bad)), t=t)
    done = torch.zeros(N, dtype=torch.bool)
    for t in range(k):
        greedy, now_done = pick_next(torch.from_numpy(own[t]), done)  # (N,): the package's choice
        greedy = greedy.numpy()
        bad = tok[:, t + 1] != greedy
        if bad.any():
            row = int(np.argmax(bad))
            if done[row]:
                return (language.text("observed_after_eos", row=row, token=int(tok[row, t + 1]), step=t + 1)
                        + diagnosis("ignores_done"))
            return language.text("observed_not_argmax", step=t + 1, row=row, token=int(tok[row, t + 1]),
                                 best=int(greedy[row]))
        done = now_done
    return ""


def _blame(got, inputs, origin) -> str | None:
    """The failure came from KVCache.update (it raised, or it returned keys of the wrong shape)."""
    cfg = inputs["config"]
    return cache_blame(got.get("cache_shapes"), inputs["ques"].shape[0], cfg.num_heads, cfg.emb_dim // cfg.num_heads, origin)


def _failed_decode(check, what: str):
    """A decoding run that raised: the tokens are lost, but whether the encoder ran once and the
    decoder was fed one token per step can be judged on the steps that ran, when the failure came
    from KVCache.update (an item costs only the function it tests)."""
    def judge_failed(got, inputs, origin, failed):
        blame = _blame(got, inputs, origin)
        if blame is None:
            return failed
        failed.message += "\n" + blame
        failed.label = "raised_in_update"
        if what == "tokens":
            return failed
        steps = len(got.get("decoder_lengths", ()))
        if steps < 2:
            return Verdict(False, failed.message + language.text("too_few_steps", steps=steps), label=failed.label)
        r = _judge_structure(check, what, need_tokens=False)(got, None, inputs)
        if r.ok:
            return Verdict(True, language.text("ok_before_failure", title=check.title, steps=steps))
        # the blame quotes the student's function name: the label comes from the structure verdict alone
        return Verdict(False, r.message + language.text("in_parens", text=blame), parts=r.parts, label=label_of(r.message))
    return judge_failed


def _judge_structure(check, what: str, need_tokens: bool = True):
    def judge(got, ref, inputs):
        n = inputs["n"]
        results, parts = [], []
        tok = got.get("tokens")
        shaped = not need_tokens or (tok is not None and tok.shape == ref["tokens"].shape)
        if not shaped:
            results.append(Verdict(False, language.text("decode_shape", check_id=check.id, exp=ref["tokens"].shape,
                                                        got=None if tok is None else tok.shape)))
        if what in ("encoder", "both"):
            calls = int(got.get("encoder_calls", np.array(-1)))
            parts.append(("the encoder runs once", calls == 1))
            if calls != 1:
                name = "encoder_every_step" if calls > 1 else None
                results.append(Verdict(False, language.text("encoder_calls", check_id=check.id, calls=calls, n=n)
                                       + diagnosis(name)))
        if what in ("cache", "both"):
            lens = [int(x) for x in got.get("decoder_lengths", np.array([], dtype=np.int64)).reshape(-1)]
            ok = len(lens) >= 1 and lens[0] == 1 and all(x == 1 for x in lens[1:])
            parts.append(("one new token per decoder step", ok))
            if not ok:
                growing = len(lens) > 1 and lens[1] > 1
                results.append(Verdict(False, language.text("decoder_lengths", check_id=check.id, lens=lens)
                                       + diagnosis("no_cache" if growing else None)))
        if results:
            # an item that checks both earns each part on its own, once the decoding returned its tokens
            return dataclasses.replace(first_failure(*results), parts=tuple(parts) if what == "both" and shaped else ())
        return Verdict(True, language.text("ok", title=check.title))
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
               measured_in_kernel=_what != "tokens", judge_failed=None)
    _c.judge_failed = _failed_decode(_c, _what)
    _c.judge = _judge_tokens(_c) if _what in ("tokens",) else _judge_structure(_c, _what)
    CHECKS.append(_c)

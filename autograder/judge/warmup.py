"""Grader side of the ``warmup`` exercise (chapters 11-13, before the graded ones): the shapes through
attention, the causal mask by hand and applied before the softmax, and two stretch parts, the padding
mask and the distribution a sampling step draws from: inputs, references, judges.

Every input is drawn from integers (``draws``); every value is judged case by case, and a wrong case
is named when one known mistake (``_*_variants``) gives exactly what the student's code gave on it."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from encdec.grading import wire
from encdec.grading.words import words
from encdec.sampling import sampling_probs

from . import properties as Prop
from .core import Check, Verdict, compare, diagnosis, gen, named_by_property
from .draws import normal

CHECKS: list[Check] = []


def _ints(g, lo, hi) -> int:
    return int(torch.randint(lo, hi, (1,), generator=g))


def _close(got: np.ndarray, cand: np.ndarray, exact: bool) -> bool:
    """``got`` is what a known mistake gives (NaN where it gives NaN: a row with every key forbidden)."""
    if got.shape != cand.shape:
        return False
    if exact:
        return got.dtype == cand.dtype and bool(np.array_equal(got, cand))
    if not np.issubdtype(got.dtype, np.floating):
        return False
    return bool(np.allclose(got.astype(np.float64), cand.astype(np.float64), atol=1e-4, rtol=1e-4, equal_nan=True))


def _named(got: np.ndarray | None, candidates: dict[str, np.ndarray], exact: bool) -> str | None:
    if got is None or not isinstance(got, np.ndarray):
        return None
    return next((name for name, cand in candidates.items() if _close(got, cand, exact)), None)


def _by_case(check: Check, what: str, key: str, cases: list[str], got: dict, ref: dict,
             variants, exact: bool, prop=None) -> Verdict:
    """Each case compared in turn; the first that fails is the verdict, its case said and, where one
    known mistake gives exactly the student's output on it, named (else ``prop``'s diagnosis).
    ``variants``: a function that makes the known mistakes' outputs, called only for a failed case."""
    for i, label in enumerate(cases):
        name = wire.case(key, i)
        g = got.get(name)
        r = compare(check, what, g, ref[name], exact=exact)
        if r.ok:
            continue
        named_by_property(r, _named(g, {k: v[name] for k, v in variants().items() if name in v}, exact))
        if prop is not None and isinstance(g, np.ndarray):
            named_by_property(r, prop(i, g))
        r.words += words("case_of", case=label)
        return r
    return Verdict(True, words("matched", title=check.title, what=what))


def _add(cid: str, hidden: bool, seed: int, **fields) -> Check:
    judge = fields.pop("judge")
    check = Check(id=cid, hidden=hidden, seed=seed, **fields)
    check.judge = judge(check)
    CHECKS.append(check)
    return check


# --- part 1: shapes through attention --------------------------------------------------------------

SHAPE_KEYS = ("Q", "K", "V", "scores", "out")


def attention_shapes(N: int, Lq: int, Lk: int, M: int, H: int, mistake: str | None = None) -> dict[str, tuple]:
    """The shapes inside multi-head attention (H heads of width M // H; queries of length Lq read keys
    and values of length Lk), or the ones a known mistake gives."""
    Dh = M if mistake == "heads_not_split" else M // H
    Lkv = Lq if mistake == "kv_length_from_queries" else Lk
    return {"Q": (N, H, Lq, Dh), "K": (N, H, Lkv, Dh), "V": (N, H, Lkv, Dh),
            "scores": (N, H, Lk, Lq) if mistake == "scores_transposed" else (N, H, Lq, Lkv),
            "out": (N, H, Lq, Dh) if mistake == "heads_not_merged" else (N, Lq, M)}


SHAPE_MISTAKES = ("scores_transposed", "heads_not_split", "kv_length_from_queries", "heads_not_merged")


def _build_shapes(seed: int, hidden: bool) -> dict:
    if not hidden:  # one head, several heads, and cross-attention's Lq != Lk
        return {"cases": [dict(N=2, Lq=5, Lk=9, M=16, H=2), dict(N=3, Lq=4, Lk=6, M=8, H=1),
                          dict(N=1, Lq=7, Lk=3, M=12, H=4)]}
    g = gen(seed)
    cases = []
    for H in (_ints(g, 2, 5), 1, _ints(g, 2, 9)):  # always several heads somewhere, and one head
        Lq = _ints(g, 2, 12)
        Lk = Lq + _ints(g, 1, 8) * (1 if _ints(g, 0, 2) else -1)  # never the queries' length
        Lk = Lk if Lk >= 1 else Lq + 1
        cases.append(dict(N=_ints(g, 1, 7), Lq=Lq, Lk=Lk, M=H * _ints(g, 2, 9), H=H))
    return {"cases": cases}


def _shape_outputs(inputs: dict, mistake: str | None = None) -> dict:
    return {wire.case(k, i): np.array(v, dtype=np.int64)
            for i, sizes in enumerate(inputs["cases"]) for k, v in attention_shapes(**sizes, mistake=mistake).items()}


def _sizes(sizes: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in sizes.items())


def _judge_shapes(check):
    def judge(got, ref, inputs):
        variants = {m: _shape_outputs(inputs, m) for m in SHAPE_MISTAKES}
        for i, sizes in enumerate(inputs["cases"]):
            for key in SHAPE_KEYS:
                name = wire.case(key, i)
                g = got.get(name)
                if g is None:
                    return Verdict(False, words("not_saved", check_id=check.id, what=key))
                if g.shape == ref[name].shape and np.array_equal(g, ref[name]):
                    continue
                # the mistake whose every shape of this case is the student's, else one that gives this one
                case_keys = [wire.case(k, i) for k in SHAPE_KEYS]
                whole = [m for m, v in variants.items()
                         if all(got.get(c) is not None and np.array_equal(got[c], v[c]) for c in case_keys)]
                one = [m for m, v in variants.items() if g.shape == v[name].shape and np.array_equal(g, v[name])]
                shown = tuple(int(n) for n in g.reshape(-1)[:8])  # a shape has a few numbers: the first 8 say it
                return Verdict(False, words("shape_answer_bad", check_id=check.id, title=check.title,
                                            sizes=_sizes(sizes), what=key, exp=tuple(int(n) for n in ref[name]),
                                            got=shown) + diagnosis((whole or one or [None])[0]))
        return Verdict(True, words("matched_all", title=check.title))
    return judge


for _cid, _hidden, _seed in (("warmup.shapes", False, 4001), ("warmup.shapes_hidden", True, 0)):
    _add(_cid, _hidden, _seed, title="attention_shapes", task="attention_shapes(N, Lq, Lk, M, H)", kind="shapes",
         build=(lambda s, h=_hidden: _build_shapes(s, h)),
         wire=lambda inp: ({"cases": inp["cases"], "keys": list(SHAPE_KEYS)}, {}),
         reference=_shape_outputs, variants=lambda inp: {m: _shape_outputs(inp, m) for m in SHAPE_MISTAKES},
         judge=_judge_shapes)


# --- part 2: the causal mask by hand, and applied before the softmax --------------------------------

def _triu(T: int, k: int) -> Tensor:
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=k)


def causal_mask(T: int) -> Tensor:
    """(T, T), True above the diagonal: reader i may not read j > i."""
    return _triu(T, 1)


def _mask_variants_of(T: int) -> dict[str, Tensor]:
    return {"mask_inverted": ~_triu(T, 1), "mask_transposed": _triu(T, 1).T.contiguous(), "mask_diagonal": _triu(T, 0),
            "mask_offset": _triu(T, 2), "mask_not_bool": _triu(T, 1).float(),
            "mask_not_bool_additive": torch.zeros(T, T).masked_fill(_triu(T, 1), float("-inf"))}


def _build_causal_mask(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"sizes": [4, 7]}
    g = gen(seed)
    return {"sizes": [_ints(g, 3, 7), _ints(g, 7, 13)]}


def _mask_cases(inputs) -> list[str]:
    return [f"T = {T}" for T in inputs["sizes"]]


def _mask_variants(inputs) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for i, T in enumerate(inputs["sizes"]):
        for name, m in _mask_variants_of(T).items():
            out.setdefault(name, {})[wire.case("mask", i)] = m.numpy()
    return out


def _judge_causal_mask(check):
    def judge(got, ref, inputs):
        def prop(i, m):
            T = inputs["sizes"][i]
            return Prop.mask(m[None], np.zeros((1, T), dtype=np.int64)) if m.shape == (T, T) else None
        return _by_case(check, "the mask", "mask", _mask_cases(inputs), got, ref, lambda: _mask_variants(inputs), True, prop)
    return judge


for _cid, _hidden, _seed in (("warmup.causal_mask", False, 4002), ("warmup.causal_mask_hidden", True, 0)):
    _add(_cid, _hidden, _seed, title="causal_mask", task="causal_mask(T)", kind="causal_mask",
         build=(lambda s, h=_hidden: _build_causal_mask(s, h)), wire=lambda inp: ({"sizes": inp["sizes"]}, {}),
         reference=lambda inp: {wire.case("mask", i): causal_mask(T).numpy() for i, T in enumerate(inp["sizes"])},
         variants=_mask_variants, judge=_judge_causal_mask)


def _softmax_masked(scores: Tensor, forbidden: Tensor, fill: float = float("-inf")) -> Tensor:
    return torch.softmax(scores.masked_fill(forbidden, fill), dim=-1)


def _build_causal_softmax(seed: int, hidden: bool) -> dict:
    g = gen(seed)
    shapes = [(2, 5), (1, 3)] if not hidden else [(_ints(g, 2, 5), _ints(g, 3, 9)), (1, _ints(g, 4, 10))]
    return {"scores": [3 * normal(g, N, T, T) for N, T in shapes]}


def _softmax_variants(inputs) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for i, s in enumerate(inputs["scores"]):
        T = s.shape[-1]
        m = _triu(T, 1)
        lowest = torch.finfo(s.dtype).min  # a finite fill: a row with every key forbidden is uniform, not NaN
        for name, w in {"mask_after_softmax": torch.softmax(s, dim=-1).masked_fill(m, 0.0),
                        "softmax_fill_finite": _softmax_masked(s, m, 0.0), "no_mask": torch.softmax(s, dim=-1),
                        "mask_inverted": _softmax_masked(s, ~m), "mask_inverted_lowest": _softmax_masked(s, ~m, lowest),
                        "mask_transposed": _softmax_masked(s, m.T),
                        "mask_diagonal": _softmax_masked(s, _triu(T, 0)),
                        "mask_diagonal_lowest": _softmax_masked(s, _triu(T, 0), lowest),
                        "mask_offset": _softmax_masked(s, _triu(T, 2))}.items():
            out.setdefault(name, {})[wire.case("weights", i)] = w.numpy()
    return out


def _stored(variants):
    """A visible check's stored mistakes: those with a number in every entry (NaN equals nothing in the
    student's own run, and a stored file must regenerate bit for bit)."""
    def stored(inputs) -> dict[str, dict]:
        return {k: v for k, v in variants(inputs).items() if all(not np.isnan(a).any() for a in v.values()
                                                                     if np.issubdtype(a.dtype, np.floating))}
    return stored


def _judge_causal_softmax(check):
    def judge(got, ref, inputs):
        scores = inputs["scores"]

        def prop(i, w):
            T = scores[i].shape[-1]
            return Prop.softmax(w, scores[i].numpy(), np.triu(np.ones((T, T), dtype=bool), 1))
        cases = [f"scores {tuple(s.shape)}" for s in scores]
        return _by_case(check, "the attention weights", "weights", cases, got, ref, lambda: _softmax_variants(inputs),
                        False, prop)
    return judge


for _cid, _hidden, _seed in (("warmup.causal_softmax", False, 4003), ("warmup.causal_softmax_hidden", True, 0)):
    _add(_cid, _hidden, _seed, title="causal_softmax", task="causal_softmax(scores)", kind="causal_softmax",
         build=(lambda s, h=_hidden: _build_causal_softmax(s, h)),
         wire=lambda inp: ({"cases": len(inp["scores"])},
                           {wire.case("scores", i): s.numpy() for i, s in enumerate(inp["scores"])}),
         reference=lambda inp: {wire.case("weights", i): _softmax_masked(s, _triu(s.shape[-1], 1)).numpy()
                                for i, s in enumerate(inp["scores"])},
         variants=_stored(_softmax_variants), judge=_judge_causal_softmax)


# --- part 3 (stretch): the padding mask, alone and with the causal mask -----------------------------

def padding_mask(lengths: Tensor, Tq: int, Tk: int, mistake: str | None = None) -> Tensor:
    """(B, 1, Tq, Tk), True where key j is padding (j >= its sequence's length), for every reader;
    or what a known mistake gives."""
    B = lengths.shape[0]
    L = lengths[:, None, None, None]  # (B, 1, 1, 1)
    i = torch.arange(Tq)[None, None, :, None]  # (1, 1, Tq, 1): the readers
    j = torch.arange(Tk)[None, None, None, :]  # (1, 1, 1, Tk): the keys
    pad = {"padding_on_queries": i >= L, "padding_off_by_one": j > L, "padding_off_by_one_early": j >= L - 1,
           "padding_inverted": j < L}.get(mistake, j >= L)
    pad = pad.expand(B, 1, Tq, Tk)
    if mistake == "padding_no_head_axis":
        return pad[:, 0]  # (B, Tq, Tk)
    if mistake == "mask_not_bool":
        return pad.float()
    return pad


PADDING_MISTAKES = ("padding_on_queries", "padding_off_by_one", "padding_off_by_one_early", "padding_inverted",
                    "padding_no_head_axis", "mask_not_bool")


def causal_padding_mask(lengths: Tensor, T: int, mistake: str | None = None) -> Tensor:
    """(B, 1, T, T): forbidden when in the reader's future or padding; or what a known mistake gives."""
    causal = _triu(T, 1)[None, None]  # (1, 1, T, T)
    if mistake == "masks_combined_with_and":
        return padding_mask(lengths, T, T) & causal
    pad = padding_mask(lengths, T, T, mistake)
    return (pad | causal[0]) if mistake == "padding_no_head_axis" else (pad.bool() | causal).to(pad.dtype)


COMBINED_MISTAKES = ("masks_combined_with_and", "padding_on_queries", "padding_off_by_one", "padding_off_by_one_early",
                     "padding_inverted", "padding_no_head_axis", "mask_not_bool")


def _lengths(g, B: int, Tk: int) -> Tensor:
    """Key lengths in 1..Tk: one full row, one padded by at least two, the rest drawn."""
    L = torch.randint(1, Tk + 1, (B,), generator=g)
    L[0], L[1] = Tk, _ints(g, 1, Tk - 1)
    return L


def _build_padding(seed: int, hidden: bool, combined: bool) -> dict:
    g = gen(seed)
    if not hidden:
        sizes = [(6, 6)] if combined else [(4, 6)]
        lengths = [torch.tensor([6, 3, 1])]
    else:
        sizes, lengths = [], []
        for _ in range(2):
            B, Tk = _ints(g, 2, 6), _ints(g, 3, 10)
            Tq = Tk if combined else max(2, Tk + _ints(g, 1, 5) * (1 if _ints(g, 0, 2) else -1))
            sizes.append((Tq, Tk))  # Tq != Tk: the readers' axis is never the keys' length
            lengths.append(_lengths(g, B, Tk))
    return {"sizes": sizes, "lengths": lengths}


def _padding_ref(combined: bool, mistake: str | None = None):
    def ref(inputs):
        return {wire.case("mask", i): (causal_padding_mask(L, T, mistake) if combined else padding_mask(L, Tq, T, mistake)).numpy()
                for i, (L, (Tq, T)) in enumerate(zip(inputs["lengths"], inputs["sizes"]))}
    return ref


def _padding_variants(combined: bool):
    return lambda inputs: {m: _padding_ref(combined, m)(inputs) for m in (COMBINED_MISTAKES if combined else PADDING_MISTAKES)}


def _padding_cases(inputs, combined: bool) -> list[str]:
    return [f"key_lengths = {L.tolist()}, " + (f"T = {T}" if combined else f"Tq = {Tq}, Tk = {T}")
            for L, (Tq, T) in zip(inputs["lengths"], inputs["sizes"])]


def _judge_padding(combined: bool):
    def make(check):
        def judge(got, ref, inputs):
            return _by_case(check, "the mask", "mask", _padding_cases(inputs, combined), got, ref,
                            lambda: _padding_variants(combined)(inputs), True)
        return judge
    return make


def _padding_wire(combined: bool):
    def wire_(inputs):
        sizes = [T for _, T in inputs["sizes"]] if combined else [list(s) for s in inputs["sizes"]]
        return {"sizes": sizes}, {wire.case("lengths", i): L.numpy() for i, L in enumerate(inputs["lengths"])}
    return wire_


for _combined, _name, _task, _seeds in ((False, "padding_mask", "padding_mask(key_lengths, Tq, Tk)", (4004, 0)),
                                        (True, "combined_mask", "causal_padding_mask(key_lengths, T)", (4005, 0))):
    for _cid, _hidden, _seed in ((f"warmup.{_name}", False, _seeds[0]), (f"warmup.{_name}_hidden", True, _seeds[1])):
        _add(_cid, _hidden, _seed, title=_task.split("(")[0], task=_task, kind=_name,
             build=(lambda s, h=_hidden, c=_combined: _build_padding(s, h, c)), wire=_padding_wire(_combined),
             reference=_padding_ref(_combined), variants=_padding_variants(_combined), judge=_judge_padding(_combined))


# --- part 4 (stretch): the distribution a sampling step draws from ---------------------------------

def _probs(logits: Tensor, temperature: float, top_k: int | None, top_p: float | None, mistake: str | None = None) -> Tensor:
    """``sampling_probs``'s pipeline with one known mistake (the reference is ``encdec.sampling``)."""
    if mistake == "temperature_after_softmax":
        probs = torch.softmax(logits, dim=-1) / temperature
    elif mistake == "temperature_after_softmax_renormalised":
        probs = torch.softmax(logits, dim=-1)
    else:
        probs = torch.softmax(logits / temperature, dim=-1)  # (N, V)
    renorm = (lambda p: p) if mistake == "sampling_not_renormalised" else (lambda p: p / p.sum(-1, keepdim=True))
    if top_k is not None:
        k = top_k + (1 if mistake == "top_k_off_by_one_more" else 0)
        kth = probs.topk(min(k, probs.shape[-1]), dim=-1).values[:, -1:]  # (N, 1)
        keep = probs > kth if mistake == "top_k_off_by_one" else probs >= kth
        probs = renorm(torch.where(keep, probs, torch.zeros_like(probs)))
    if top_p is not None:
        sorted_p, order = probs.sort(dim=-1, descending=True)  # (N, V)
        cum = sorted_p.cumsum(dim=-1)
        ahead = cum - sorted_p  # the mass of the tokens ahead of each
        keep_sorted = {"top_p_crossing_token": cum <= top_p,  # the token that crosses p dropped
                       "top_p_crossing_token_one_more": (ahead - torch.cat([torch.zeros_like(sorted_p[:, :1]),
                                                                             sorted_p[:, :-1]], -1)) < top_p}.get(
            mistake, ahead < top_p)
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = renorm(torch.where(keep, probs, torch.zeros_like(probs)))
    return probs


SAMPLING_MISTAKES = ("temperature_after_softmax", "temperature_after_softmax_renormalised", "top_k_off_by_one",
                     "top_k_off_by_one_more", "top_p_crossing_token", "top_p_crossing_token_one_more",
                     "sampling_not_renormalised")
_TEMPERATURES = (0.5, 0.75, 1.25, 1.5, 2.0)  # exact in binary: the kernel and the grader divide by the same number
_TOP_P = (0.5, 0.625, 0.75, 0.875)
_MARGIN = 0.02  # no row's cumulative mass lies this close to p: float32 and float64 keep the same tokens


def _good_p(probs: Tensor, choices) -> float | None:
    """The first p of ``choices`` no row's cumulative mass is within ``_MARGIN`` of, and where some row
    keeps more than its top token (so that the boundary matters)."""
    sorted_p = probs.sort(dim=-1, descending=True).values.double()
    cum = sorted_p.cumsum(-1)
    for p in choices:
        if (cum - p).abs().min() > _MARGIN and bool((cum[:, 0] < p).any()):
            return p
    return None


def _build_sampling(seed: int, hidden: bool) -> dict:
    g = gen(seed)
    for _ in range(100):  # until the logits are clear of ties and a p is clear of every row's mass
        N, V = (3, 8) if not hidden else (_ints(g, 2, 5), _ints(g, 8, 17))
        temps = (0.5, 1.0, 1.0, 1.5) if not hidden else tuple(_TEMPERATURES[_ints(g, 0, 5)] for _ in range(4))
        ks = (3, 4) if not hidden else (_ints(g, 2, V - 2), _ints(g, 3, V - 1))
        p_order = [_TOP_P[(i + _ints(g, 0, 4)) % 4] for i in range(4)]
        logits = [2 * normal(g, N, V) for _ in range(4)]
        gaps = [torch.diff(x.sort(dim=-1).values, dim=-1).min() for x in logits]
        if min(gaps) < 1e-3:
            continue
        settings = [dict(temperature=temps[0], top_k=None, top_p=None), dict(temperature=temps[1], top_k=ks[0], top_p=None),
                    dict(temperature=temps[2], top_k=None, top_p=None), dict(temperature=temps[3], top_k=ks[1], top_p=None)]
        p2 = _good_p(sampling_probs(logits[2].double(), temps[2]), p_order)
        p3 = _good_p(sampling_probs(logits[3].double(), temps[3], ks[1]), p_order)
        if p2 is None or p3 is None:
            continue
        settings[2]["top_p"], settings[3]["top_p"] = p2, p3
        inputs = {"logits": logits, "settings": settings}
        if _every_mistake_shows(inputs):
            return inputs
    raise RuntimeError("no sampling inputs clear of ties in 100 draws")


_CLEAR = 0.01  # the least difference by which every known mistake must change some probability


def _every_mistake_shows(inputs: dict) -> bool:
    """Every known mistake changes some probability by ``_CLEAR`` at least (or gives NaN): none hides
    in the comparison's tolerance (a (k+1)-th token of probability 1e-5 kept, say)."""
    ref = _sampling_ref()(inputs)
    for outs in _sampling_variants(inputs).values():
        gaps = [np.nan_to_num(np.abs(outs[k] - ref[k]), nan=1.0).max() for k in ref]
        if max(gaps) < _CLEAR:
            return False
    return True


def _sampling_ref(mistake: str | None = None):
    def ref(inputs):
        return {wire.case("probs", i): (_probs(x, **s, mistake=mistake) if mistake else sampling_probs(x, **s)).numpy()
                for i, (x, s) in enumerate(zip(inputs["logits"], inputs["settings"]))}
    return ref


def _sampling_variants(inputs) -> dict[str, dict]:
    return {m: _sampling_ref(m)(inputs) for m in SAMPLING_MISTAKES}


def _judge_sampling(check):
    def judge(got, ref, inputs):
        cases = [", ".join(f"{k} = {v}" for k, v in s.items()) for s in inputs["settings"]]
        return _by_case(check, "the distribution", "probs", cases, got, ref, lambda: _sampling_variants(inputs), False)
    return judge


for _cid, _hidden, _seed in (("warmup.sampling", False, 4006), ("warmup.sampling_hidden", True, 0)):
    _add(_cid, _hidden, _seed, title="sampling_probs", task="sampling_probs(logits, temperature, top_k, top_p)",
         kind="sampling", build=(lambda s, h=_hidden: _build_sampling(s, h)),
         wire=lambda inp: ({"settings": inp["settings"]},
                           {wire.case("logits", i): x.numpy() for i, x in enumerate(inp["logits"])}),
         reference=_sampling_ref(), variants=_stored(_sampling_variants), judge=_judge_sampling)

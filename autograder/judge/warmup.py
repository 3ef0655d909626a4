"""Grader side of the ``warmup`` exercise (chapters 11-13, before the graded ones): the shapes through
attention, the causal mask by hand and applied before the softmax, and two stretch parts, the padding
mask and the distribution a sampling step draws from: inputs, references, judges.

Every input is drawn from integers (``draws``) and from the student's seed, the visible checks' as the
hidden ones'; every value is judged case by case, and a mistake is named only when one known mistake
(``_*_variants``) gives exactly what the student's code gave on every case (``cases``). The padding
and masks-in-the-wild part is ``masks.py``, the sampling part ``sampling.py``."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from encdec.grading import wire
from encdec.grading.words import words

from . import masks, sampling
from . import properties as Prop
from .cases import add, agreeing, by_case, ints, stored
from .core import Check, Verdict, diagnosis, gen
from .draws import normal
from .masks import triu

CHECKS: list[Check] = []


# --- part 1: shapes through attention --------------------------------------------------------------

SHAPE_KEYS = ("Q", "K", "V", "scores", "out")


def attention_shapes(N: int, Lq: int, Lk: int, M: int, H: int, mistake: str | None = None) -> dict[str, tuple]:
    """The shapes inside multi-head attention (H heads of width M // H; queries of length Lq read keys
    and values of length Lk), or the ones a known mistake gives."""
    Dh = M if mistake == "heads_not_split" else M // H
    Lkv = Lq if mistake == "kv_length_from_queries" else Lk
    if mistake == "heads_after_length":  # (N, L, H, Dh): the view before its transpose(1, 2)
        return {
            "Q": (N, Lq, H, Dh),
            "K": (N, Lk, H, Dh),
            "V": (N, Lk, H, Dh),
            "scores": (N, H, Lq, Lk),
            "out": (N, Lq, M),
        }
    return {
        "Q": (N, H, Lq, Dh),
        "K": (N, H, Lkv, Dh),
        "V": (N, H, Lkv, Dh),
        "scores": (N, H, Lk, Lq) if mistake == "scores_transposed" else (N, H, Lq, Lkv),
        "out": (N, H, Lq, Dh) if mistake == "heads_not_merged" else (N, Lq, M),
    }


SHAPE_MISTAKES = (
    "scores_transposed",
    "heads_not_split",
    "kv_length_from_queries",
    "heads_not_merged",
    "heads_after_length",
)


def _build_shapes(seed: int) -> dict:
    g = gen(seed)
    cases = []
    for H in (ints(g, 2, 5), 1, ints(g, 2, 9)):  # always several heads somewhere, and one head
        Lq = ints(g, 2, 12)
        Lk = Lq + ints(g, 1, 8) * (1 if ints(g, 0, 2) else -1)  # never the queries' length
        Lk = Lk if Lk >= 1 else Lq + 1
        N = ints(g, 1, 6)
        N = N + 1 if N >= H else N  # never the number of heads: (N, H, ...) and (H, N, ...) differ
        cases.append({"N": N, "Lq": Lq, "Lk": Lk, "M": H * ints(g, 2, 9), "H": H})
    return {"cases": cases}


def _shape_outputs(inputs: dict, mistake: str | None = None) -> dict:
    return {
        wire.case(k, i): np.array(v, dtype=np.int64)
        for i, sizes in enumerate(inputs["cases"])
        for k, v in attention_shapes(**sizes, mistake=mistake).items()
    }


def _shape_variants(inputs: dict) -> dict[str, dict]:
    return {m: _shape_outputs(inputs, m) for m in SHAPE_MISTAKES}


def _judge_shapes(check):
    def judge(got, ref, inputs):
        for i, sizes in enumerate(inputs["cases"]):
            for key in SHAPE_KEYS:
                name = wire.case(key, i)
                g = got.get(name)
                if g is None:
                    return Verdict(False, words("not_saved", check_id=check.id, what=key))
                if g.shape == ref[name].shape and np.array_equal(g, ref[name]):
                    continue
                shown = tuple(int(n) for n in g.reshape(-1)[:8])  # a shape has a few numbers: the first 8 say it
                named = agreeing(got, _shape_variants(inputs), list(ref), exact=True)
                return Verdict(
                    False,
                    words(
                        "shape_answer_bad",
                        check_id=check.id,
                        title=check.title,
                        sizes=", ".join(f"{k}={v}" for k, v in sizes.items()),
                        what=key,
                        exp=tuple(int(n) for n in ref[name]),
                        got=shown,
                    )
                    + diagnosis(named),
                )
        return Verdict(True, words("matched_all", title=check.title))

    return judge


for _cid, _hidden, _seed in (("warmup.shapes", False, 4001), ("warmup.shapes_hidden", True, 0)):
    add(
        CHECKS,
        _cid,
        _hidden,
        _seed,
        title="attention_shapes",
        task="attention_shapes(N, Lq, Lk, M, H)",
        kind="shapes",
        build=_build_shapes,
        wire=lambda inp: ({"cases": inp["cases"], "keys": list(SHAPE_KEYS)}, {}),
        reference=_shape_outputs,
        variants=_shape_variants,
        judge=_judge_shapes,
    )


# --- part 2: the causal mask by hand, and applied before the softmax --------------------------------


def causal_mask(T: int) -> Tensor:
    """(T, T), True above the diagonal: reader i may not read j > i."""
    return triu(T, 1)


def _mask_variants_of(T: int) -> dict[str, Tensor]:
    return {
        "mask_inverted": ~triu(T, 1),
        "mask_transposed": triu(T, 1).T.contiguous(),
        "mask_diagonal": triu(T, 0),
        "mask_offset": triu(T, 2),
        "mask_not_bool": triu(T, 1).float(),
        "mask_not_bool_additive": torch.zeros(T, T).masked_fill(triu(T, 1), float("-inf")),
    }


def _build_causal_mask(seed: int) -> dict:
    g = gen(seed)
    return {"sizes": [ints(g, 3, 7), ints(g, 7, 13)]}


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

        return by_case(
            check, "the mask", "mask", _mask_cases(inputs), got, ref, lambda: _mask_variants(inputs), True, prop
        )

    return judge


for _cid, _hidden, _seed in (("warmup.causal_mask", False, 4002), ("warmup.causal_mask_hidden", True, 0)):
    add(
        CHECKS,
        _cid,
        _hidden,
        _seed,
        title="causal_mask",
        task="causal_mask(T)",
        kind="causal_mask",
        build=_build_causal_mask,
        wire=lambda inp: ({"sizes": inp["sizes"]}, {}),
        reference=lambda inp: {wire.case("mask", i): causal_mask(T).numpy() for i, T in enumerate(inp["sizes"])},
        variants=_mask_variants,
        judge=_judge_causal_mask,
    )


def _softmax_masked(scores: Tensor, forbidden: Tensor, fill: float = float("-inf")) -> Tensor:
    return torch.softmax(scores.masked_fill(forbidden, fill), dim=-1)


def _build_causal_softmax(seed: int) -> dict:
    g = gen(seed)
    shapes = [(ints(g, 2, 5), ints(g, 3, 9)), (1, ints(g, 4, 10))]
    return {"scores": [3 * normal(g, N, T, T) for N, T in shapes]}


def _softmax_variants(inputs) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for i, s in enumerate(inputs["scores"]):
        T = s.shape[-1]
        m = triu(T, 1)
        lowest = torch.finfo(s.dtype).min  # a finite fill: a row with every key forbidden is uniform, not NaN
        for name, w in {
            "mask_after_softmax": torch.softmax(s, dim=-1).masked_fill(m, 0.0),
            "softmax_fill_finite": _softmax_masked(s, m, 0.0),
            "no_mask": torch.softmax(s, dim=-1),
            "mask_inverted": _softmax_masked(s, ~m),
            "mask_inverted_lowest": _softmax_masked(s, ~m, lowest),
            "mask_transposed": _softmax_masked(s, m.T),
            "mask_diagonal": _softmax_masked(s, triu(T, 0)),
            "mask_diagonal_lowest": _softmax_masked(s, triu(T, 0), lowest),
            "mask_offset": _softmax_masked(s, triu(T, 2)),
        }.items():
            out.setdefault(name, {})[wire.case("weights", i)] = w.numpy()
    return out


def _judge_causal_softmax(check):
    def judge(got, ref, inputs):
        scores = inputs["scores"]

        def prop(i, w):
            T = scores[i].shape[-1]
            return Prop.softmax(w, scores[i].numpy(), np.triu(np.ones((T, T), dtype=bool), 1))

        cases = [f"scores {tuple(s.shape)}" for s in scores]
        return by_case(
            check, "the attention weights", "weights", cases, got, ref, lambda: _softmax_variants(inputs), False, prop
        )

    return judge


for _cid, _hidden, _seed in (("warmup.causal_softmax", False, 4003), ("warmup.causal_softmax_hidden", True, 0)):
    add(
        CHECKS,
        _cid,
        _hidden,
        _seed,
        title="causal_softmax",
        task="causal_softmax(scores)",
        kind="causal_softmax",
        build=_build_causal_softmax,
        wire=lambda inp: (
            {"cases": len(inp["scores"])},
            {wire.case("scores", i): s.numpy() for i, s in enumerate(inp["scores"])},
        ),
        reference=lambda inp: {
            wire.case("weights", i): _softmax_masked(s, triu(s.shape[-1], 1)).numpy()
            for i, s in enumerate(inp["scores"])
        },
        variants=stored(_softmax_variants),
        judge=_judge_causal_softmax,
    )


CHECKS += masks.CHECKS
CHECKS += sampling.CHECKS

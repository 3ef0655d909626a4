"""Grader side of the ``warmup`` exercise (chapters 11-13, before the graded ones): the shapes through
attention, the causal mask by hand and applied before the softmax, and two stretch parts, the padding
mask and the distribution a sampling step draws from: inputs, references, judges.

Every input is drawn from integers (``draws``) and from the student's seed, the visible checks' as the
hidden ones'; every value is judged case by case, and a mistake is named only when one known mistake
(``_*_variants``) gives exactly what the student's code gave on every case (``cases``). The sampling
part is ``sampling.py``."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from encdec.grading import wire
from encdec.grading.words import words

from . import properties as Prop
from . import sampling
from .cases import add, agreeing, by_case, ints, stored
from .core import Check, Verdict, diagnosis, gen
from .draws import normal

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


def _triu(T: int, k: int) -> Tensor:
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=k)


def causal_mask(T: int) -> Tensor:
    """(T, T), True above the diagonal: reader i may not read j > i."""
    return _triu(T, 1)


def _mask_variants_of(T: int) -> dict[str, Tensor]:
    return {
        "mask_inverted": ~_triu(T, 1),
        "mask_transposed": _triu(T, 1).T.contiguous(),
        "mask_diagonal": _triu(T, 0),
        "mask_offset": _triu(T, 2),
        "mask_not_bool": _triu(T, 1).float(),
        "mask_not_bool_additive": torch.zeros(T, T).masked_fill(_triu(T, 1), float("-inf")),
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
        m = _triu(T, 1)
        lowest = torch.finfo(s.dtype).min  # a finite fill: a row with every key forbidden is uniform, not NaN
        for name, w in {
            "mask_after_softmax": torch.softmax(s, dim=-1).masked_fill(m, 0.0),
            "softmax_fill_finite": _softmax_masked(s, m, 0.0),
            "no_mask": torch.softmax(s, dim=-1),
            "mask_inverted": _softmax_masked(s, ~m),
            "mask_inverted_lowest": _softmax_masked(s, ~m, lowest),
            "mask_transposed": _softmax_masked(s, m.T),
            "mask_diagonal": _softmax_masked(s, _triu(T, 0)),
            "mask_diagonal_lowest": _softmax_masked(s, _triu(T, 0), lowest),
            "mask_offset": _softmax_masked(s, _triu(T, 2)),
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
            wire.case("weights", i): _softmax_masked(s, _triu(s.shape[-1], 1)).numpy()
            for i, s in enumerate(inp["scores"])
        },
        variants=stored(_softmax_variants),
        judge=_judge_causal_softmax,
    )


# --- part 3 (stretch): the padding mask, alone and with the causal mask -----------------------------


def padding_mask(lengths: Tensor, Tq: int, Tk: int, mistake: str | None = None) -> Tensor:
    """(B, 1, Tq, Tk), True where key j is padding (j >= its sequence's length), for every reader;
    or what a known mistake gives."""
    B = lengths.shape[0]
    L = lengths[:, None, None, None]  # (B, 1, 1, 1)
    i = torch.arange(Tq)[None, None, :, None]  # (1, 1, Tq, 1): the readers
    j = torch.arange(Tk)[None, None, None, :]  # (1, 1, 1, Tk): the keys
    pad = {
        "padding_on_queries": i >= L,
        "padding_off_by_one": j > L,
        "padding_off_by_one_early": j >= L - 1,
        "padding_inverted": j < L,
    }.get(mistake, j >= L)
    pad = pad.expand(B, 1, Tq, Tk)
    if mistake == "padding_no_head_axis":
        return pad[:, 0]  # (B, Tq, Tk)
    if mistake == "mask_not_bool":
        return pad.float()
    return pad


PADDING_MISTAKES = (
    "padding_on_queries",
    "padding_off_by_one",
    "padding_off_by_one_early",
    "padding_inverted",
    "padding_no_head_axis",
    "mask_not_bool",
)


def causal_padding_mask(lengths: Tensor, T: int, mistake: str | None = None) -> Tensor:
    """(B, 1, T, T): forbidden when in the reader's future or padding; or what a known mistake gives."""
    causal = _triu(T, 1)[None, None]  # (1, 1, T, T)
    if mistake == "masks_combined_with_and":
        return padding_mask(lengths, T, T) & causal
    pad = padding_mask(lengths, T, T, mistake)
    return (pad | causal[0]) if mistake == "padding_no_head_axis" else (pad.bool() | causal).to(pad.dtype)


COMBINED_MISTAKES = (
    "masks_combined_with_and",
    "padding_on_queries",
    "padding_off_by_one",
    "padding_off_by_one_early",
    "padding_inverted",
    "padding_no_head_axis",
    "mask_not_bool",
)


def _lengths(g, B: int, Tk: int) -> Tensor:
    """Key lengths in 1..Tk: one full row, one padded by at least two, the rest drawn."""
    L = torch.randint(1, Tk + 1, (B,), generator=g)
    L[0], L[1] = Tk, ints(g, 1, Tk - 1)
    return L


def _build_padding(seed: int, combined: bool) -> dict:
    g = gen(seed)
    sizes, lengths = [], []
    for _ in range(2):
        B, Tk = ints(g, 2, 6), ints(g, 3, 10)
        Tq = Tk if combined else max(2, Tk + ints(g, 1, 5) * (1 if ints(g, 0, 2) else -1))
        sizes.append((Tq, Tk))  # Tq != Tk: the readers' axis is never the keys' length
        lengths.append(_lengths(g, B, Tk))
    return {"sizes": sizes, "lengths": lengths}


def _padding_ref(combined: bool, mistake: str | None = None):
    def ref(inputs):
        return {
            wire.case("mask", i): (
                causal_padding_mask(L, T, mistake) if combined else padding_mask(L, Tq, T, mistake)
            ).numpy()
            for i, (L, (Tq, T)) in enumerate(zip(inputs["lengths"], inputs["sizes"]))
        }

    return ref


def _padding_variants(combined: bool):
    return lambda inputs: {
        m: _padding_ref(combined, m)(inputs) for m in (COMBINED_MISTAKES if combined else PADDING_MISTAKES)
    }


def _padding_cases(inputs, combined: bool) -> list[str]:
    return [
        f"key_lengths = {L.tolist()}, " + (f"T = {T}" if combined else f"Tq = {Tq}, Tk = {T}")
        for L, (Tq, T) in zip(inputs["lengths"], inputs["sizes"])
    ]


def _judge_padding(combined: bool):
    def make(check):
        def judge(got, ref, inputs):
            return by_case(
                check,
                "the mask",
                "mask",
                _padding_cases(inputs, combined),
                got,
                ref,
                lambda: _padding_variants(combined)(inputs),
                True,
            )

        return judge

    return make


def _padding_wire(combined: bool):
    def wire_(inputs):
        sizes = [T for _, T in inputs["sizes"]] if combined else [list(s) for s in inputs["sizes"]]
        return {"sizes": sizes}, {wire.case("lengths", i): L.numpy() for i, L in enumerate(inputs["lengths"])}

    return wire_


for _combined, _name, _task, _seeds in (
    (False, "padding_mask", "padding_mask(key_lengths, Tq, Tk)", (4004, 0)),
    (True, "combined_mask", "causal_padding_mask(key_lengths, T)", (4005, 0)),
):
    for _cid, _hidden, _seed in ((f"warmup.{_name}", False, _seeds[0]), (f"warmup.{_name}_hidden", True, _seeds[1])):
        add(
            CHECKS,
            _cid,
            _hidden,
            _seed,
            title=_task.split("(")[0],
            task=_task,
            kind=_name,
            build=(lambda s, c=_combined: _build_padding(s, c)),
            wire=_padding_wire(_combined),
            reference=_padding_ref(_combined),
            variants=_padding_variants(_combined),
            judge=_judge_padding(_combined),
        )


# --- part 3 (stretch), masks in the wild: the course's mask in F.scaled_dot_product_attention's convention


def _build_sdpa(seed: int) -> dict:
    """A padding mask (Tq != Tk) and a causal padding mask of the course (True = forbidden)."""
    p = _build_padding(seed, combined=False)
    (L0, L1), ((Tq, Tk), (_, T)) = p["lengths"], p["sizes"]
    return {"masks": [padding_mask(L0, Tq, Tk), causal_padding_mask(L1, T)]}


def _sdpa_ref(mistake: str | None = None):
    """SDPA's boolean attn_mask, True = may attend; or what a known mistake gives."""

    def ref(inputs):
        made = {None: lambda m: ~m, "sdpa_mask_not_inverted": lambda m: m, "mask_not_bool": lambda m: (~m).float()}
        return {wire.case("attn_mask", i): made[mistake](m).numpy() for i, m in enumerate(inputs["masks"])}

    return ref


def _sdpa_variants(inputs) -> dict[str, dict]:
    return {m: _sdpa_ref(m)(inputs) for m in ("sdpa_mask_not_inverted", "mask_not_bool")}


def _judge_sdpa(check):
    def judge(got, ref, inputs):
        cases = [f"mask {tuple(m.shape)}" for m in inputs["masks"]]
        return by_case(check, "the attn_mask", "attn_mask", cases, got, ref, lambda: _sdpa_variants(inputs), True)

    return judge


for _cid, _hidden, _seed in (("warmup.sdpa_mask", False, 4007), ("warmup.sdpa_mask_hidden", True, 0)):
    add(
        CHECKS,
        _cid,
        _hidden,
        _seed,
        title="sdpa_mask",
        task="sdpa_mask(mask)",
        kind="sdpa_mask",
        build=_build_sdpa,
        wire=lambda inp: (
            {"cases": len(inp["masks"])},
            {wire.case("mask", i): m.numpy() for i, m in enumerate(inp["masks"])},
        ),
        reference=_sdpa_ref(),
        variants=_sdpa_variants,
        judge=_judge_sdpa,
    )

CHECKS += sampling.CHECKS

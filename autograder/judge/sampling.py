"""Grader side of the warm-up's stretch part 4 (chapter 13): the distribution a sampling step draws from
after temperature, top-k and top-p, judged as a distribution on the grader's logits, never on a draw.
Its checks join the warm-up's (``warmup.CHECKS``); the reference is ``encdec.sampling``."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from encdec.grading import wire
from encdec.sampling import sampling_probs

from .cases import add, by_case, ints, stored
from .core import Check
from .draws import gen, normal

CHECKS: list[Check] = []


def _probs(
    logits: Tensor, temperature: float, top_k: int | None, top_p: float | None, mistake: str | None = None
) -> Tensor:
    """``sampling_probs``'s pipeline with one known mistake."""
    if mistake == "temperature_after_softmax":
        probs = torch.softmax(logits, dim=-1) / temperature
    elif mistake == "temperature_after_softmax_renormalised":
        probs = torch.softmax(logits, dim=-1)
    else:
        probs = torch.softmax(logits / temperature, dim=-1)  # (N, V)

    def renorm(p: Tensor, skipped: tuple[str, ...]) -> Tensor:
        return p if mistake in ("sampling_not_renormalised", *skipped) else p / p.sum(-1, keepdim=True)

    if top_k is not None:
        k = top_k + (1 if mistake == "top_k_off_by_one_more" else 0)
        kth = probs.topk(min(k, probs.shape[-1]), dim=-1).values[:, -1:]  # (N, 1)
        keep = probs > kth if mistake == "top_k_off_by_one" else probs >= kth
        probs = renorm(torch.where(keep, probs, torch.zeros_like(probs)), ("top_k_not_renormalised",))
    if top_p is not None:
        sorted_p, order = probs.sort(dim=-1, descending=True)  # (N, V)
        cum = sorted_p.cumsum(dim=-1)
        ahead = cum - sorted_p  # the mass of the tokens ahead of each
        before_previous = ahead - torch.cat([torch.zeros_like(sorted_p[:, :1]), sorted_p[:, :-1]], -1)
        keep_sorted = {
            "top_p_crossing_token": cum <= top_p,  # the token that crosses p dropped
            "top_p_crossing_token_one_more": before_previous < top_p,
        }.get(mistake, ahead < top_p)
        keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
        probs = renorm(torch.where(keep, probs, torch.zeros_like(probs)), ("sampling_not_renormalised_top_p",))
    return probs


MISTAKES = (
    "temperature_after_softmax",
    "temperature_after_softmax_renormalised",
    "top_k_off_by_one",
    "top_k_off_by_one_more",
    "top_p_crossing_token",
    "top_p_crossing_token_one_more",
    "sampling_not_renormalised",
    "top_k_not_renormalised",
    "sampling_not_renormalised_top_p",
)
_TEMPERATURES = (0.5, 0.75, 1.25, 1.5, 2.0)  # exact in binary: the kernel and the grader divide by the same number
_TOP_P = (0.5, 0.625, 0.75, 0.875)
MARGIN = 0.02  # no row's cumulative mass lies this close to p: float32 and float64 keep the same tokens
_CLEAR = 0.01  # the least difference by which every known mistake must change some probability


def _good_p(probs: Tensor, choices) -> float | None:
    """The first p of ``choices`` no row's cumulative mass is within ``MARGIN`` of, and above every row's
    top token (so that the boundary matters on every row, and no known mistake empties a row)."""
    cum = probs.sort(dim=-1, descending=True).values.double().cumsum(-1)
    return next((p for p in choices if (cum - p).abs().min() > MARGIN and bool((cum[:, 0] < p).all())), None)


def build(seed: int) -> dict:
    """Four settings (temperature alone; with top-k; with top-p; with both) on logits drawn from ``seed``:
    the visible check's and the hidden one's alike, each student's own."""
    g = gen(seed)
    for _ in range(200):  # until the logits are clear of ties and a p is clear of every row's mass
        N, V = ints(g, 2, 5), ints(g, 8, 17)
        temps = tuple(_TEMPERATURES[ints(g, 0, 5)] for _ in range(4))
        ks = (ints(g, 2, V - 2), ints(g, 3, V - 1))
        p_order = [_TOP_P[(i + ints(g, 0, 4)) % 4] for i in range(4)]
        logits = [2 * normal(g, N, V) for _ in range(4)]
        if min(torch.diff(x.sort(dim=-1).values, dim=-1).min() for x in logits) < 1e-3:
            continue
        p2 = _good_p(sampling_probs(logits[2].double(), temps[2]), p_order)
        p3 = _good_p(sampling_probs(logits[3].double(), temps[3], ks[1]), p_order)
        if p2 is None or p3 is None:
            continue
        settings = [
            {"temperature": temps[0], "top_k": None, "top_p": None},
            {"temperature": temps[1], "top_k": ks[0], "top_p": None},
            {"temperature": temps[2], "top_k": None, "top_p": p2},
            {"temperature": temps[3], "top_k": ks[1], "top_p": p3},
        ]
        inputs = {"logits": logits, "settings": settings}
        if _told_apart(inputs):
            return inputs
    raise RuntimeError("no sampling inputs clear of ties in 200 draws")


def _told_apart(inputs: dict) -> bool:
    """Every known mistake changes some probability by ``_CLEAR`` at least, from the reference and from
    every other mistake: none hides in the comparison's tolerance (a (k+1)-th token of probability 1e-5
    kept, say), and every case agreeing with one mistake names that one."""
    outs = [reference()(inputs), *variants(inputs).values()]
    for i, a in enumerate(outs):
        for b in outs[i + 1 :]:
            if max(np.nan_to_num(np.abs(a[k] - b[k]), nan=1.0).max() for k in a) < _CLEAR:
                return False
    return True


def reference(mistake: str | None = None):
    def ref(inputs):
        return {
            wire.case("probs", i): (_probs(x, **s, mistake=mistake) if mistake else sampling_probs(x, **s)).numpy()
            for i, (x, s) in enumerate(zip(inputs["logits"], inputs["settings"]))
        }

    return ref


def variants(inputs) -> dict[str, dict]:
    return {m: reference(m)(inputs) for m in MISTAKES}


def _judge(check):
    def judge(got, ref, inputs):
        cases = [", ".join(f"{k} = {v}" for k, v in s.items()) for s in inputs["settings"]]
        return by_case(check, "the distribution", "probs", cases, got, ref, lambda: variants(inputs), False)

    return judge


for _cid, _hidden, _seed in (("warmup.sampling", False, 4006), ("warmup.sampling_hidden", True, 0)):
    add(
        CHECKS,
        _cid,
        _hidden,
        _seed,
        title="sampling_probs",
        task="sampling_probs(logits, temperature, top_k, top_p)",
        kind="sampling",
        build=build,
        wire=lambda inp: (
            {"settings": inp["settings"]},
            {wire.case("logits", i): x.numpy() for i, x in enumerate(inp["logits"])},
        ),
        reference=reference(),
        variants=stored(variants),
        judge=_judge,
    )

"""Grader side of the ``warmup`` exercise, its third part (a stretch): the padding mask, alone and with
the causal mask, and the course's mask in ``F.scaled_dot_product_attention``'s convention (masks in the
wild): inputs, references, judges, as ``warmup.py`` draws and judges its own parts."""

from __future__ import annotations

import torch
from torch import Tensor

from encdec.grading import wire

from .cases import add, by_case, ints
from .core import Check, gen

CHECKS: list[Check] = []


def triu(T: int, k: int) -> Tensor:
    return torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=k)


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
    causal = triu(T, 1)[None, None]  # (1, 1, T, T)
    if mistake == "masks_combined_with_and":
        return padding_mask(lengths, T, T) & causal
    pad = padding_mask(lengths, T, T, mistake)
    return (pad | causal[0]) if mistake == "padding_no_head_axis" else (pad.bool() | causal).to(pad.dtype)


COMBINED_MISTAKES = ("masks_combined_with_and", *PADDING_MISTAKES)  # and each of the padding mask's


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

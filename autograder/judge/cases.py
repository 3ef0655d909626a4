"""Judging a value case by case, as the warm-up's checks do (``warmup.py``, ``sampling.py``): the first
case that fails is the verdict and is said; a known mistake is named only when it gives exactly the
student's outputs on *every* case (one case can fit several mistakes: a top-p mistake can give on one
seed what a top-k mistake gives), and a property's diagnosis only when it finds the same mistake on
every case. Anything less is an observation: what did not match, where."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from encdec.grading import wire
from encdec.grading.words import words

from .core import Check, Verdict, compare, named_by_property


def ints(g: torch.Generator, lo: int, hi: int) -> int:
    """An integer in [lo, hi) drawn from ``g``."""
    return int(torch.randint(lo, hi, (1,), generator=g))


def close(got, cand: np.ndarray, exact: bool) -> bool:
    """``got`` is what a known mistake gives (NaN where it gives NaN: a row with every key forbidden)."""
    if not isinstance(got, np.ndarray) or got.shape != cand.shape:
        return False
    if exact:
        return got.dtype == cand.dtype and bool(np.array_equal(got, cand))
    if not np.issubdtype(got.dtype, np.floating):
        return False
    return bool(np.allclose(got.astype(np.float64), cand.astype(np.float64), atol=1e-4, rtol=1e-4, equal_nan=True))


def agreeing(got: dict, candidates: dict[str, dict], names: list[str], exact: bool) -> str | None:
    """The first known mistake whose outputs equal the student's on every one of ``names``."""
    return next(
        (m for m, outs in candidates.items() if all(n in outs and close(got.get(n), outs[n], exact) for n in names)),
        None,
    )


def unanimous(keys: list[str | None]) -> str | None:
    """The key every case gave, or None when one gave none or another."""
    return keys[0] if keys and keys[0] is not None and all(k == keys[0] for k in keys) else None


def by_case(
    check: Check,
    what: str,
    key: str,
    cases: list[str],
    got: dict,
    ref: dict,
    variants: Callable[[], dict],
    exact: bool,
    prop=None,
) -> Verdict:
    """Each case compared in turn; the first that fails is the verdict, its case said. ``variants``
    (made only when a case failed): the known mistakes' outputs; ``prop(i, output)``: a property's
    diagnosis of case ``i`` (``properties``), consulted when no mistake agrees on every case."""
    names = [wire.case(key, i) for i in range(len(cases))]
    for name, label in zip(names, cases):
        r = compare(check, what, got.get(name), ref[name], exact=exact)
        if r.ok:
            continue
        named_by_property(r, agreeing(got, variants(), names, exact))
        if prop is not None:
            named_by_property(
                r,
                unanimous(
                    [prop(i, got.get(n)) if isinstance(got.get(n), np.ndarray) else None for i, n in enumerate(names)]
                ),
            )
        r.words += words("case_of", case=label)
        return r
    return Verdict(True, words("matched", title=check.title, what=what))


def stored(variants):
    """A visible check's stored mistakes: those with a number in every entry (NaN equals nothing in the
    student's own run, and a stored file must regenerate bit for bit)."""

    def kept(inputs) -> dict[str, dict]:
        return {
            k: v
            for k, v in variants(inputs).items()
            if all(not np.isnan(a).any() for a in v.values() if np.issubdtype(a.dtype, np.floating))
        }

    return kept


def add(checks: list[Check], cid: str, hidden: bool, seed: int, **fields) -> Check:
    """A Check appended to ``checks``; ``judge``: a function of the check that makes its judge."""
    judge = fields.pop("judge")
    check = Check(id=cid, hidden=hidden, seed=seed, **fields)
    check.judge = judge(check)
    checks.append(check)
    return check

"""What every check of the grader is made of: inputs, the reference, the judge, the verdict.

Grader side only (the student's kernel never imports ``autograder``). A check builds its inputs
from a seed, turns them into plain arrays for the kernel (``wire``), computes the reference
with the real package and judges what the kernel returned.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from encdec.grading import language
from encdec.grading.arguments import as_array
from encdec.grading.compare import ATOL, error_match, mismatch_details, same
from encdec.grading.misconceptions import MISCONCEPTIONS, base_name
from encdec.grading.words import Words, as_words, words
from encdec.grading.words import diagnosis as diagnosis_words  # (this module has its own diagnosis())

from .draws import gen, normal

__all__ = [
    "ATOL",
    "Check",
    "Verdict",
    "compare",
    "diagnosis",
    "first_failure",
    "format_patterns",
    "gen",
    "randomize_",
    "state_arrays",
    "same",
    "as_array",
]


@dataclass
class Verdict:
    """A check's verdict: ``ok``, and its message as data (``Words``: table entries, diagnoses),
    worded only when shown (``words.render(lang)``) in the language asked for.

    ``parts``: where the item checks several things the lesson teaches separately, each part's
    name and whether it passed; a failed verdict with some parts passed earns their share of the
    item's points (nbgrader's partial credit, ``autograder.preprocessors``). ``label``: what kind of
    verdict it is, a key (``judge.labels``): the outcome a judge set with the verdict, else the first
    misconception named or observation made in it, each a record its judge set beside the line that
    says it (``Diag``, ``Seen``), never its words."""

    ok: bool
    words: Words
    parts: tuple[tuple[str, bool], ...] = ()
    label: str | None = None
    lang: str = language.DEFAULT  # the language ``message`` speaks (the submission's)

    def __post_init__(self):
        self.words = as_words(self.words)

    @property
    def message(self) -> str:
        """The message in the verdict's language."""
        return self.words.render(self.lang)

    @property
    def credit(self) -> float:
        """The share of the item's points earned: 1 when passed, else the share of parts passed."""
        if self.ok:
            return 1.0
        return sum(ok for _, ok in self.parts) / len(self.parts) if self.parts else 0.0

    @property
    def missed(self) -> list[str]:
        return [name for name, ok in self.parts if not ok]


@dataclass
class Check:
    """One graded check: its inputs, what the kernel is sent, the reference, and the judge."""

    id: str
    title: str  # what is checked, in one line
    task: str  # what the student writes (named in the "not implemented" message)
    kind: str  # how the kernel calls the student's code (encdec.grading.calls)
    build: Callable[[int], dict]  # seed -> inputs (tensors, modules)
    wire: Callable[[dict], tuple[dict, dict]]  # inputs -> (meta, arrays) sent to the kernel
    reference: Callable[[dict], dict]  # inputs -> reference outputs
    judge: Callable[[dict, dict, dict], Verdict] | None = None  # (got, ref, inputs)
    hidden: bool = False
    seed: int = 0  # a visible check's fixed seed (the student's own run)
    variants: Callable[[dict], dict[str, dict]] = field(default=lambda inputs: {})  # known mistakes' outputs
    expected: Callable[[dict], dict] | None = None  # stored for the student's own run (default: reference)
    shape_only: tuple[str, ...] = ()
    when_larger: dict[str, str] = field(default_factory=dict)  # output -> misconception when it exceeds the expected
    # inputs -> {a wrong shape of an output: the misconception that gives it}, for the grader and the
    # student's own run alike (stored with a visible check's file)
    shape_hints: Callable[[dict], dict[tuple, str]] = field(default=lambda inputs: {})
    error_patterns: dict[str, str] = field(default_factory=dict)  # misconception -> substrings of an error
    # (got, inputs, raised_in, verdict) -> verdict: what can still be judged when the student's code
    # raised part-way (got: what the kernel observed until then; verdict: the failure as reported)
    judge_failed: Callable[[dict, dict, dict, Verdict], Verdict] | None = None
    # a check judged by cost: part -> seed -> one run's inputs; a graded run executes the test cell once
    # per run and the grader reads the kernel's CPU time around it (judge/budget.py), the bound timed on
    # ``lesson`` (the package's own structure, called as the kernel calls the student's code)
    runs: dict[str, Callable[[int], dict]] = field(default_factory=dict)
    lesson: Callable | None = None

    def judge_error(self, msg: str, inputs: dict) -> str | None:
        """The misconception an exception message points to (patterns formatted with the sizes)."""
        return error_match(self.error_patterns, msg, inputs.get("dims", {}))


MAX_ELEMENTS = 1 << 20  # the most numbers of a kernel's array compared with another of the kernel's


def randomize_(module: nn.Module, seed: int) -> nn.Module:
    """Weights that make every parameter matter: each LayerNorm has its own non-trivial gain
    and bias, so skipping or swapping a norm changes the output. Returns the module in eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            r = normal(g, *p.shape)  # the same bits on every machine (draws.py)
            owner = module.get_submodule(name.rsplit(".", 1)[0]) if "." in name else module
            if isinstance(owner, nn.LayerNorm):
                p.copy_(1.0 + 0.5 * r if name.endswith("weight") else 0.5 * r)
            elif isinstance(owner, nn.Embedding):
                p.copy_(r)  # token vectors of norm ~sqrt(M), like nn.Embedding's default
            elif p.dim() > 1:
                p.copy_(r * (1.5 / math.sqrt(p.shape[1])))  # (out, in): outputs of order 1
            else:
                p.copy_(0.3 * r)
    module.randomized_from = seed  # so a record drawn ahead keeps only what differs (ahead.py)
    return module.eval()


def state_arrays(module: nn.Module) -> dict[str, np.ndarray]:
    return {f"state/{k}": v.detach().numpy() for k, v in module.state_dict().items()}


def diagnosis(name: str | None) -> Words:
    """'\nDiagnosis: ...' (a named misconception) or '\nObserved: ...' (what was seen, when it fits
    more than one), as data: worded with the rest of the verdict. Empty for None."""
    if name is None:
        return Words()
    key = base_name(name)
    if key not in MISCONCEPTIONS:
        raise KeyError(key)
    return diagnosis_words(key)


def not_repeatable(
    check: Check, task: str, first: np.ndarray | None, again: np.ndarray | None, expected: np.ndarray | None = None
) -> Verdict | None:
    """A failed verdict when two runs on the same inputs (eval mode) disagree, else None: then every
    other comparison is noise, so nothing is named. Two outputs of the kernel are compared only when
    they have the expected output's shape (given), or at most ``MAX_ELEMENTS`` numbers."""
    if first is None or again is None or first.shape != again.shape:
        return None
    if (first.shape != expected.shape) if expected is not None else first.size > MAX_ELEMENTS:
        return None
    if same(first, again):
        return None
    return Verdict(
        False, words("not_repeatable", check_id=check.id, title=check.title, task=task) + diagnosis("observed_random")
    )


def is_not_repeatable(verdict: Verdict) -> bool:
    """Whether ``verdict`` is `not_repeatable`'s."""
    return "observed_random" in verdict.words.diagnoses()


def names_a_mask_mistake(message: Words) -> bool:
    """Whether ``message`` diagnoses a missing or inverted mask (then a causality probe adds no
    observation of its own)."""
    return any(key in ("no_mask", "mask_inverted") for key in message.diagnoses())


def _match(got: np.ndarray, candidates: dict[str, Any], exact: bool = False) -> str | None:
    for name, cand in candidates.items():
        c = cand if isinstance(cand, np.ndarray) else as_array(cand, name)
        if same(got, c, exact):
            return base_name(name)
    return None


def compare(
    check: Check,
    what: str,
    got: np.ndarray | None,
    exp: np.ndarray,
    *,
    exact: bool = False,
    candidates: Callable[[], dict] | None = None,
    shape_hint: Callable[[tuple], str | None] | None = None,
) -> Verdict:
    """Compare one output with the reference; on a mismatch say what and why.

    ``got`` comes from the kernel: its shape is checked against an array the grader made (the
    reference, a known mistake's output) before any of its values is read (``same``), and a
    mismatch of shapes is worded from the shapes alone, so its size never decides the work done."""
    if got is None or not isinstance(got, np.ndarray):
        return Verdict(False, words("not_saved", check_id=check.id, what=what))
    if same(got, exp, exact):
        return Verdict(True, words("matched", title=check.title, what=what))
    name = None
    if got.shape != exp.shape and shape_hint is not None:
        name = shape_hint(tuple(got.shape))
    if name is None and candidates is not None:
        name = _match(got, candidates(), exact)
    head = words("did_not_match", check_id=check.id, title=check.title, what=what) + diagnosis(name)
    return Verdict(False, Words.join("\n", [head, *mismatch_details(got, exp, exact)]))


def named_by_property(verdict: Verdict, key: str | None) -> Verdict:
    """A failed verdict that names nothing yet gets the property's diagnosis (``properties``), if any."""
    if not verdict.ok and key is not None and not verdict.words.diagnoses():
        first, *rest = verdict.words.parts or ("",)
        verdict.words = Words(first, diagnosis(key), *rest)  # under its first line, as a variant's name
        verdict.label = base_name(key)  # the misconception it names, whatever kind of failure it was
    return verdict


def first_failure(*verdicts: Verdict) -> Verdict:
    """The first failure (the others usually repeat it), or the first verdict when all passed."""
    bad = [r for r in verdicts if not r.ok]
    if bad:
        more = words("more_failed", n=len(bad) - 1) if len(bad) > 1 else ""
        return Verdict(False, bad[0].words + more, label=bad[0].label)
    return verdicts[0]


def format_patterns(patterns: dict[str, str], dims: dict) -> list[list[str]]:
    """The error patterns with this check's sizes filled in, in order (stored for the student's own run)."""
    return [[name, pat.format(**dims)] for name, pat in patterns.items()]


def numpy_dict(d: dict[str, Tensor | np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v.detach().numpy() if isinstance(v, Tensor) else np.asarray(v) for k, v in d.items()}

"""The five probes of a module's behaviour, one family of checks and one judge for both modules that
are checked this way (``decoder_block``'s ``DecoderBlock``, ``target_slicing``'s ``Transformer``): its
output's shape, its values (on the visible seed and on hidden inputs), whether a later position
changes an earlier output (causal), whether the encoder side is read (question). A module gives the
differences as a ``Probe`` row: its output's key, its words, its known mistakes and its stages."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from encdec.grading.words import Words, words

from . import stages as St
from .core import (
    ATOL,
    Check,
    Verdict,
    compare,
    diagnosis,
    first_failure,
    is_not_repeatable,
    names_a_mask_mistake,
    not_repeatable,
)


@dataclass(frozen=True)
class Probe:
    """What differs between the modules probed: the output's key (``out``: ``out_again`` is the same
    run twice, ``out_changed`` the run on changed inputs), the task named when two runs disagree,
    the message tables' prefix (``<prefix>_shape_ok``/``_shape_bad``), what each comparison compares,
    the causal and question probes' messages, and, from the inputs: the expected shape, the hint a
    wrong shape gives, the known mistakes' outputs (on the inputs a probe changed: ``None``, the later
    positions or the question side) and the stage note that says where a failed run left the lesson."""

    key: str
    task: str
    prefix: str
    whats: tuple[str, str, str]  # plain, causal, question
    not_causal: str
    ignores: str
    shape: Callable[[dict], tuple]
    shape_hint: Callable[[dict], Callable[[tuple], str | None]]
    candidates: Callable[[dict, str | None], Callable[[], dict]]
    stage_note: Callable[[dict, dict, Words], Words]
    finite: bool = False  # the shape probe also asks for finite values


def probe_judge(check: Check, probe: str, row: Probe):
    """The judge of one probe: compared, then a failure explained (two runs that disagree, or the
    stage where the run left the lesson)."""

    def judge(got, ref, inputs):
        verdict = decide(got, ref, inputs)
        if verdict.ok:
            return verdict
        if is_not_repeatable(verdict):
            verdict.words += St.random_run_note(got, row.key, f"{row.key}_again")
            return verdict
        verdict.words += row.stage_note(got, inputs, verdict.words)
        return verdict

    def decide(got, ref, inputs):
        out, hint = got.get(row.key), row.shape_hint(inputs)
        if probe == "shape":
            exp = row.shape(inputs)
            if out is not None and out.shape == exp and (not row.finite or np.isfinite(out).all()):
                return Verdict(True, words(f"{row.prefix}_shape_ok", title=check.title, exp=exp))
            shape = None if out is None else tuple(out.shape)
            bad = words(f"{row.prefix}_shape_bad", check_id=check.id, exp=exp, got=shape)
            return Verdict(False, bad + diagnosis(hint(shape) if shape else None))
        random = not_repeatable(check, row.task, out, got.get(f"{row.key}_again"))
        if random is not None:
            return random
        r = compare(check, row.whats[0], out, ref[row.key], candidates=row.candidates(inputs, None), shape_hint=hint)
        if probe == "plain":
            return r
        changed = got.get(f"{row.key}_changed")
        if probe == "causal":
            j = inputs["j"]  # outputs before position j read nothing at or after it
            if (
                out is not None
                and changed is not None
                and out.shape == changed.shape == ref[row.key].shape
                and not np.allclose(out[:, :j], changed[:, :j], atol=ATOL)
            ):
                # named only when a mask variant reproduces the output; otherwise what was seen
                named = names_a_mask_mistake(r.words)
                return Verdict(
                    False,
                    words(row.not_causal, check_id=check.id, last=j - 1, j=j)
                    + ("" if named else diagnosis("observed_not_causal"))
                    + ("\n" + r.words if not r.ok else ""),
                )
        elif (
            out is not None
            and changed is not None
            and out.shape == changed.shape
            and np.allclose(out, changed, atol=ATOL)
        ):
            return Verdict(False, words(row.ignores, check_id=check.id) + diagnosis("ignores_question"))
        what = row.whats[1 if probe == "causal" else 2]
        cands = row.candidates(inputs, probe)
        r2 = compare(check, what, changed, ref[f"{row.key}_changed"], candidates=cands, shape_hint=hint)
        return first_failure(r, r2)

    return judge


PROBES = ("shape", "plain", "plain", "causal", "question")


def probe_checks(
    ids: tuple[str, ...],
    titles: tuple[str, ...],
    seeds: tuple[int, int],
    *,
    build: Callable[[int, bool, str], dict],
    wire: Callable[[str], Callable],
    reference: Callable[[str], Callable],
    judge: Probe,
    variants: Callable[[dict], dict],
    **fields: Any,
) -> list[Check]:
    """The five checks of one module, one per probe in the order of ``PROBES`` (``ids``,
    ``titles``): the first two visible (on ``seeds``), the rest hidden. ``build(seed, hidden, probe)`` makes the inputs;
    ``wire`` and ``reference`` are made per probe, the judge from the ``Probe`` row; the value probes also match known
    mistakes (``variants``). ``fields``: the Check's other fields, the same for all five."""
    out = []
    for i, (check_id, probe, title) in enumerate(zip(ids, PROBES, titles, strict=True)):
        hidden = i >= 2
        check = Check(
            id=check_id,
            title=title,
            hidden=hidden,
            seed=0 if hidden else seeds[i],
            build=(lambda s, h=hidden, p=probe: build(s, h, p)),
            wire=wire(probe),
            reference=reference(probe),
            variants=variants if probe == "plain" else (lambda inputs: {}),
            shape_only=(judge.key,) if probe == "shape" else (),
            **fields,
        )
        check.judge = probe_judge(check, probe, judge)
        out.append(check)
    return out

"""The grader's side of the checks: inputs, references computed with the real package, verdicts.

Runs only in the grader (nbgrader's preprocessors in ``autograder.preprocessors``), never in a
student's kernel: the kernel gets plain-array inputs (``wire``) and returns plain-array outputs,
and everything that knows a correct answer is here. One module per assignment, named after it
(``judge/<assignment>.py``), imported when a check of its assignment is first looked up (``find``);
``checks()`` is their union over the course's assignments
(``autograder/assignments.py``), keyed by the check ids the test cells name.
"""

from __future__ import annotations

import functools
from importlib import import_module
from pathlib import Path

import numpy as np

from autograder import assignments
from encdec.grading import language, wire
from encdec.grading.compare import where
from encdec.grading.words import words

from . import labels
from .core import Check, Verdict, diagnosis, format_patterns
from .draws import in_double, in_single
from .seeds import check_seed, load_secret  # noqa: F401 (re-exported: judge.check_seed, judge.load_secret)

# The errors a graded run raises where a part calls what it may not (the class's name, as the kernel
# records it beside the message): the package's own target (autograder/edition.py), torch's
# ready-made layers (autograder/torch_edition.py), torch's attention to a part written by hand
# (encdec/grading/by_hand.py). The label comes from that field, never from the message's words.
PACKAGE_CODE = ("GradedRunUsesYourCode", "GradedRunUsesTorchLayer", "ReadyMadeAttention")


@functools.cache
def of_assignment(assignment: str) -> dict[str, Check]:
    """Check id -> Check of one assignment: its judge module alone is imported, on first use
    (importing this package reads no notebook and imports no judge module)."""
    if assignment not in assignments.names():
        return {}
    return {c.id: c for c in import_module(f"{__name__}.{assignment}").CHECKS}


def _of_check(check_id: str) -> dict[str, Check]:
    return of_assignment(check_id.split(".", 1)[0])  # a check id is ``<assignment>.<name>``


def find(check_id: str) -> Check | None:
    """The check ``check_id`` names, or None."""
    return _of_check(check_id).get(check_id)


@functools.cache
def checks() -> dict[str, Check]:
    """Check id -> Check over the course's assignments."""
    return {i: c for name in assignments.names() for i, c in of_assignment(name).items()}


def graded_inputs(check_id: str, seed: int, drawn_ahead: Path | None = None) -> dict:
    """The inputs of one check in a graded run: drawn from ``seed``, visible sizes for visible checks
    (``drawn_ahead``: the folder of the records drawn before the hand-in, ``ahead.py``, read first)."""
    if drawn_ahead is not None:
        from . import ahead

        kept = ahead.load(drawn_ahead, check_id, seed)
        if kept is not None:
            return kept
    check = _of_check(check_id)[check_id]
    if check.runs:  # one set of inputs per run of the cell (judged by cost: Check.runs)
        return {"runs": {part: build(seed) for part, build in check.runs.items()}}
    return check.build(seed)


def wire_bytes(check_id: str, inputs: dict) -> bytes:
    """The file the kernel reads: the kind of call, its metadata and the input arrays."""
    check = _of_check(check_id)[check_id]
    meta, arrays = check.wire(inputs)
    meta = {**meta, "kind": check.kind, "task": check.task, "title": check.title}
    return wire.to_bytes(meta, wire.prefixed("in", arrays))


def reference_file(check_id: str, targets: list[str]) -> tuple[dict, dict[str, np.ndarray]]:
    """A visible check's stored file for the student's own run: fixed inputs, expected outputs and
    the outputs of known mistakes (``autograder/make_references.py`` writes it)."""
    check = _of_check(check_id)[check_id]
    if check.hidden:
        raise ValueError(f"{check_id} is hidden: its inputs are drawn at grading time")
    inputs = check.build(check.seed)
    meta, arrays = check.wire(inputs)
    meta = {
        **meta,
        "kind": check.kind,
        "task": check.task,
        "title": check.title,
        "targets": targets,
        "shape_only": list(check.shape_only),
        "error_patterns": format_patterns(check.error_patterns, inputs.get("dims", {})),
        "when_larger": check.when_larger,
        "shape_hints": [[list(shape), key] for shape, key in check.shape_hints(inputs).items()],
    }
    expected = reference(check, inputs, stored=True)
    out = {**wire.prefixed("in", arrays), **wire.prefixed("expected", expected)}
    for name, outs in check.variants(in_double(inputs)).items():  # in float64, as the reference
        out.update(wire.prefixed(f"variant/{name}", in_single(outs)))
    return meta, out


def reference(check: Check, inputs: dict, stored: bool = False) -> dict:
    """The reference outputs of ``inputs`` (``stored``: what a visible check's file holds for the
    student's own run), computed in float64 and rounded to float32: the same on every machine,
    where float32 sums follow the CPU's kernels and thread count (``draws``)."""
    return in_single(((check.expected if stored else None) or check.reference)(in_double(inputs)))


def verify(
    check_id: str, saved: bytes | None, inputs: dict, lang: str = language.DEFAULT, undefined: str | None = None
) -> Verdict:
    """The verdict: judge what the student's kernel saved (``saved``, the bytes of its outputs file
    read right after the test cell ran) against the reference computed here from ``inputs``.

    The check is judged once; its message is data (``Verdict.words``), worded when shown in any
    language (``Verdict.words.render``), so a submission scores the same in every language. Its ``label``
    is the record its judge set where it decided (an outcome with the verdict; a misconception's or an
    observation's beside its line: ``labels.of``): the evidence of the grader only. ``lang`` is kept
    for callers that want ``verdict.message`` in the submission's language. ``undefined``: the object
    the test cell hands to the check when no cell of the notebook defines it (``encdec.grading.cells``):
    a check that saved nothing then says so by name."""
    check = _of_check(check_id)[check_id]
    verdict = _not_defined(check, saved, undefined) or _verify(check, saved, inputs)
    if verdict.label is None:
        verdict.label = labels.PASSED if verdict.ok else labels.of(verdict.words)
    verdict.lang = lang if lang in language.LANGUAGES else language.DEFAULT
    return verdict


def _not_defined(check: Check, saved, undefined: str | None) -> Verdict | None:
    """The check saved nothing and the object its cell hands it is defined by no
    cell: its cell is missing, named."""
    ran = (
        any(isinstance(r, dict) and r.get("saved") is not None for r in saved.values())
        if isinstance(saved, dict)
        else saved is not None
    )
    if undefined is None or ran:
        return None
    return Verdict(False, words("not_defined", check_id=check.id, name=undefined), label="did_not_run")


def _verify(check: Check, saved, inputs: dict) -> Verdict:
    if check.runs:  # saved: {part: {"saved": bytes | None, "cpu", "lesson", "bound": seconds | None}}
        return check.judge(saved if isinstance(saved, dict) else {}, None, inputs)
    got = loaded(check, saved, inputs)
    if isinstance(got, Verdict):
        return got
    try:
        return check.judge(got, reference(check, inputs), inputs)
    except Exception as exc:
        return Verdict(
            False,
            words("unjudgeable", check_id=check.id, error=f"{type(exc).__name__}: {exc}"),
            label="unreadable_outputs",
        )


def loaded(check: Check, saved: bytes | None, inputs: dict) -> dict | Verdict:
    """What the kernel saved for one run of a check, as arrays; or the verdict when it saved nothing
    usable (the cell did not run, the file is unreadable, the code raised or is not written)."""
    check_id = check.id
    if saved is None:
        return Verdict(False, words("did_not_run", check_id=check_id), label="did_not_run")
    try:
        meta, got = wire.loads(saved, f"{check_id}.npz")
    except Exception as exc:
        return Verdict(
            False,
            words("unreadable", check_id=check_id, error=f"{type(exc).__name__}: {exc}"),
            label="unreadable_outputs",
        )
    status = str(meta.get("status", "ok"))
    if status == "not_implemented":
        return Verdict(False, words("not_implemented", check_id=check_id, task=check.task), label="not_implemented")
    if status == "error":
        # the message quotes the student's exception: the label comes from the evidence, not from it
        msg = str(meta.get("error", ""))[:2000]
        origin = meta.get("raised_in") if isinstance(meta.get("raised_in"), dict) else {}
        named = check.judge_error(msg, inputs)
        label = named or ("package_code" if meta.get("error_class") in PACKAGE_CODE else "raised")
        failed = Verdict(
            False,
            words("raised", check_id=check_id, task=check.task, msg=msg) + where(origin) + diagnosis(named),
            label=label,
        )
        if check.judge_failed is None:
            return failed
        try:
            return check.judge_failed(got, inputs, origin, failed)
        except Exception:
            return failed
    return got

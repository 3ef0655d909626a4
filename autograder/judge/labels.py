"""What kind of verdict a check gave, as one short key: the class report counts them.

Grader side only. A label is ``passed``; a misconception's key (``no_mask``, ``observed_random``:
the named and the observed ones of ``encdec.grading.misconceptions``); ``observed:<what>`` (an
observation that names no misconception, keyed by the table entry that words it and, for a stage,
the given part and argument it was about, never by its numbers, so that two students with the
same kind of mistake share it); or one of the ``OUTCOMES`` below. A label is the record of a
decision, set by the judge where it decides: an outcome's with the verdict, a misconception's
(``Diag``) and an observation's (``Seen``) beside the line that says it; never read from the
words, nor from what the student's code printed or raised.
"""

from __future__ import annotations

from collections import defaultdict

from encdec.grading import language
from encdec.grading.misconceptions import MISCONCEPTIONS
from encdec.grading.words import Words

PASSED = "passed"
OUTCOMES = (  # labels that are kinds of outcome (each worded by the table entry "outcome_<label>")
    PASSED,
    "not_implemented",
    "did_not_run",
    "deleted",
    "package_code",
    "instruments_touched",
    "unreadable_outputs",
    "raised_in_update",
    "raised",
    "mismatch",
    "unknown_check",
    "unlabelled",
)


def of(message: Words) -> str:
    """The label of a failed verdict's message: the first misconception it names, else the first
    observation it makes (``observed:<label>``, the record its judge set beside the line:
    ``words.observation``), else ``mismatch``. Verdicts of another kind of outcome carry their label
    from where they are made (``judge.loaded``, ``TrustedVerdict``)."""
    named = message.diagnoses()
    if named:
        return named[0]
    seen = message.seen()
    return "observed:" + seen[0] if seen else "mismatch"


def describe(label: str, lang: str = language.DEFAULT) -> str:
    """What a label means, in one line, in ``lang`` (the report's wording)."""
    with language.speaking(lang):
        if label in OUTCOMES:
            return language.text(f"outcome_{label}")
        if label in MISCONCEPTIONS:
            head = language.head("observed" if label.startswith("observed_") else "diagnosis")
            return f"{head} {' '.join(language.misconceptions()[label].split())}"
        if label.startswith("observed:"):
            return _describe_observed(label.removeprefix("observed:"))
    return label


def _template(key: str, **known) -> str:
    """A table entry with the fields it does not know shown as #."""
    table = language.MESSAGES[language.current()]
    fields = defaultdict(lambda: "#", known)
    return " ".join(table[key].format_map(fields).split()) if key in table else key


def _describe_observed(what: str) -> str:
    """``step_logits`` or ``stage:<finding>[:<module>][:<argument>]`` (``_observation``), worded."""
    first, *rest = what.split(":")
    if first != "stage":
        return _template(f"observed_{first}").lstrip()
    finding, module, arg = (rest + ["#", "#"])[:3]
    known = f"role_{module}" in language.MESSAGES[language.current()]
    role = _template("role", module=module, role=_template(f"role_{module}")) if known else "#"
    return _template("stage_observed", what="#", stage=_template(finding, module=module, arg=arg, role=role))


def kind(label: str) -> str:
    """``passed``, ``named`` (a misconception), ``observed`` (seen, not named) or ``failed``."""
    if label == PASSED:
        return "passed"
    if label.startswith("observed"):
        return "observed"
    if label in MISCONCEPTIONS:
        return "named"
    return "failed"

"""What kind of verdict a check gave, as one short label: the class report counts them.

Grader side only. A label is ``passed``, a misconception's key (``no_mask``, ``observed_random``:
the named and the observed ones of ``encdec.grading.misconceptions``), ``observed: ...`` (an
unnamed observation whose numbers are replaced by ``#``, so that two students with the same
kind of mistake share it), or one of the ``OUTCOMES`` below. Labels are decided from the grader's
own text only: where a message quotes the student's exception, the label is set from the
grader's own evidence (``verify``), never read back from that text.
"""

from __future__ import annotations

import re

from encdec.grading.misconceptions import MISCONCEPTIONS

PASSED = "passed"
OUTCOMES = {  # label -> what it means, for the report
    PASSED: "passed",
    "not_implemented": "not implemented: the function still raises NotImplementedError",
    "did_not_run": "the check did not run to the end (an earlier error, the kernel died or timed out)",
    "deleted": "the test cell was deleted from the submission",
    "package_code": "called the package's own implementation, which is not available in a graded run",
    "instruments_touched": "integrity flag: the code touched the instruments of an item measured in the kernel "
                           "(older gradebooks only: a flag changes no score now)",
    "not_measured": "the grader could not measure the kernel's CPU time for a structure item",
    "unreadable_outputs": "the outputs the kernel saved could not be read or judged",
    "raised_in_update": "raised: the failure came from the student's KVCache.update",
    "raised": "raised an exception that matches no known mistake",
    "mismatch": "wrong output that matches no known mistake and no observation",
    "unknown_check": "the test cell names a check the grader does not know",
}
_HEADS = ("Diagnosis", "Observed")
_WORDING = (  # how the grader's messages word each kind of failure (autograder.judge, autograder.preprocessors)
    ("not available in a graded run", "package_code"), ("touched the instruments", "instruments_touched"),
    ("not implemented yet", "not_implemented"), ("did not run to the end", "did_not_run"),
    ("deleted from the submission", "deleted"), ("could not be read safely", "unreadable_outputs"),
    ("could not be judged", "unreadable_outputs"), ("unknown check", "unknown_check"),
)


def _squash(text: str) -> str:
    return " ".join(text.split())


def label_of(message: str) -> str:
    """The label of a failed verdict's message (grader text): the first diagnosis it gives, else
    the first unnamed observation, else the kind of failure."""
    flat = _squash(message)
    found = []
    for key, text in MISCONCEPTIONS.items():
        for head in _HEADS:
            at = flat.find(f"{head}: {_squash(text)}")
            if at >= 0:
                found.append((at, key))
    if found:
        return min(found)[1]
    observed = re.search(r"(?:^|\n)Observed: (.+(?:\n  .+)*)", message)  # with its wrapped lines
    if observed:
        return "observed: " + observation(observed.group(1))
    for needle, label in _WORDING:
        if needle in flat:
            return label
    return "mismatch"


def observation(text: str) -> str:
    """An unnamed observation as a template: its first clause, every number replaced by ``#``."""
    first = re.split(r";\s|:\s", _squash(text), maxsplit=1)[0]
    return re.sub(r"\d+", "#", first).rstrip(".")


def describe(label: str) -> str:
    """What a label means, in one line (the report's wording)."""
    if label in OUTCOMES:
        return OUTCOMES[label]
    if label in MISCONCEPTIONS:
        head = "Observed" if label.startswith("observed_") else "Diagnosis"
        return f"{head}: {_squash(MISCONCEPTIONS[label])}"
    if label.startswith("observed: "):
        return "Observed: " + label.removeprefix("observed: ")
    return label


def kind(label: str) -> str:
    """``passed``, ``named`` (a misconception), ``observed`` (seen, not named) or ``failed``."""
    if label == PASSED:
        return "passed"
    if label.startswith("observed"):
        return "observed"
    if label in MISCONCEPTIONS:
        return "named"
    return "failed"

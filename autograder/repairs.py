"""The repairs made to a mangled notebook before grading, as records in the notebook (a key and its
parameters, in nb.metadata["encdec"]["repairs"]), and their words for the top of the graded notebook
and the feedback (``encdec/grading/messages.py``, ``repair_<key>``). Made by ``autograder/handed_in.py``
and ``autograder/canonical.py`` (a renamed, refused or untyped file) and ``autograder/preprocessors/match_release.py`` (cells)."""

from __future__ import annotations

from encdec.grading import language

REPAIRS_KEY = "repairs"  # in nb.metadata["encdec"]: [{"key": ..., parameters}], in the order made
NOTICE_ID = "encdec-repairs"  # the id of the markdown cell that states them
# the repairs that grade the release with no answers in the file's place (autograder/handed_in.py)
NO_ANSWERS = (
    "not_handed_in",
    "unreadable",
    "too_large",
    "too_many_values",
    "too_deep",
    "too_many_cells",
    "source_too_large",
)


def repairs(nb) -> list[dict]:
    """The repairs recorded in a notebook (``[]``: none). The intake keeps none of a student's
    metadata (``autograder/canonical.py``); a notebook graded before it may hold anything."""
    meta = nb.metadata.get("encdec")
    found = meta.get(REPAIRS_KEY) if isinstance(meta, dict) else None
    return [r for r in found if isinstance(r, dict) and "key" in r] if isinstance(found, list) else []


INTAKE_KEY = "encdec_intake"  # in resources: the repairs the exporter made as it read the file (handed_in.py)


def record(nb, key: str, **params) -> dict:
    """Record one repair of ``nb``; returns the record."""
    made = {"key": key, **params}
    _meta(nb).setdefault(REPAIRS_KEY, []).append(made)
    return made


def reset(nb, records: list[dict]) -> None:
    """The repairs of ``nb`` are ``records``, whatever the file handed in said of itself."""
    _meta(nb)[REPAIRS_KEY] = list(records)


def _meta(nb) -> dict:
    if not isinstance(nb.metadata.get("encdec"), dict):  # a student's own value: not a record of ours
        nb.metadata["encdec"] = {}
    return nb.metadata["encdec"]


def notice(records: list[dict], lang: str) -> str:
    """The repairs in words (plain text: a head and one item a line), in ``lang``. The feedback page
    shows the notice's cell as escaped text (``autograder/feedback.py``): what it quotes (a file name,
    a cell id) is never Markdown there."""
    with language.speaking(lang):
        lines = [language.text(f"repair_{r['key']}", **{k: v for k, v in r.items() if k != "key"}) for r in records]
        return "\n".join([language.text("repair_head"), "", *[f"- {line}" for line in lines]])

"""The repairs made to a mangled notebook before grading, as records in the notebook (a key and its
parameters, in nb.metadata["encdec"]["repairs"]), and their words for the top of the graded notebook
and the feedback (``encdec/grading/messages.py``, ``repair_<key>``). Made by ``autograder/handed_in.py``
and ``autograder/canonical.py`` (a renamed, refused or untyped file) and ``autograder/preprocessors/match_release.py`` (cells)."""
from __future__ import annotations

from encdec.grading import language

REPAIRS_KEY = "repairs"  # in nb.metadata["encdec"]: [{"key": ..., parameters}], in the order made
NOTICE_ID = "encdec-repairs"  # the id of the markdown cell that states them
# the repairs that grade the release with no answers in the file's place (autograder/handed_in.py)
NO_ANSWERS = ("unreadable", "too_large", "too_many_values", "too_deep", "too_many_cells", "source_too_large")


def repairs(nb) -> list[dict]:
    """The repairs recorded in a notebook (``[]``: none). The intake keeps none of a student's
    metadata (``autograder/canonical.py``); a notebook graded before it may hold anything."""
    meta = nb.metadata.get("encdec")
    found = meta.get(REPAIRS_KEY) if isinstance(meta, dict) else None
    return [r for r in found if isinstance(r, dict) and "key" in r] if isinstance(found, list) else []


def record(nb, key: str, **params) -> None:
    """Record one repair of ``nb``."""
    meta = nb.metadata.setdefault("encdec", {})
    meta.setdefault(REPAIRS_KEY, []).append({"key": key, **params})


def notice(records: list[dict], lang: str) -> str:
    """The repairs in words (markdown: a head and one item each), in ``lang``."""
    with language.speaking(lang):
        lines = [language.text(f"repair_{r['key']}", **{k: v for k, v in r.items() if k != "key"}) for r in records]
        return "\n".join([f"**{language.text('repair_head')}**", "", *[f"- {line}" for line in lines]])

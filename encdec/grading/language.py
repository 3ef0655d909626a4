"""The language the checks' feedback speaks: one table of messages per language.

Both sides read it: the student's own run (``checks``, ``selfcheck``, ``compare``) and the grader
(``autograder.judge``, ``autograder.preprocessors``), so a message and a diagnosis are worded the same
wherever they are shown. English is the default; a release in another language
(``python -m autograder.release --lang zh``) stores its language in the metadata of the visible
checks' reference files and of the notebook, and the run speaks it from there. A notebook can
also choose: ``encdec.grading.language.set_language("zh")``. Plain text only: no answer here.
"""

from __future__ import annotations

import re
import textwrap
from contextlib import contextmanager

from .messages import MESSAGES, TERMS  # the tables; this module picks and fills them
from .misconceptions import MISCONCEPTIONS
from .misconceptions_zh import MISCONCEPTIONS_ZH

DEFAULT = "en"

_TERM_FIELDS = ("title", "what", "name", "part")
MISCONCEPTIONS_BY_LANGUAGE = {"en": MISCONCEPTIONS, "zh": MISCONCEPTIONS_ZH}
LANGUAGES = tuple(MESSAGES)

_current = DEFAULT


def set_language(lang: str) -> None:
    """Speak ``lang`` from now on (``"en"``, ``"zh"``)."""
    global _current  # noqa: PLW0603 (the kernel's one language, as the student set it)
    if lang not in MESSAGES:
        raise ValueError(f"no messages in {lang!r}; languages: {', '.join(LANGUAGES)}")
    _current = lang


def current() -> str:
    return _current


@contextmanager
def speaking(lang: str | None):
    """Speak ``lang`` inside the block (``None`` or an unknown language: keep the current one)."""
    global _current  # noqa: PLW0603 (the kernel's one language, for the block)
    previous = _current
    if lang in MESSAGES:
        _current = lang
    try:
        yield _current
    finally:
        _current = previous


def text(key: str, **fields) -> str:
    """One message in the current language, its fields filled in (titles, what was compared and
    part names in that language too, where ``TERMS`` has them)."""
    if _current != DEFAULT:
        fields = {k: term(v) if k in _TERM_FIELDS and isinstance(v, str) else v for k, v in fields.items()}
    return MESSAGES[_current][key].format(**fields)


def term(phrase: str) -> str:
    """A check's English phrase in the current language (itself when ``TERMS`` has no entry)."""
    table = TERMS.get(_current, {})
    if phrase in table:
        return table[phrase]
    for english, local in table.items():  # the numbered ones: regular expressions
        if "\\d" in english and re.fullmatch(english, phrase):
            return re.sub(f"^{english}$", local, phrase)
    for english, local in table.items():  # the ones with a "{}": what fills it stays as it is
        before, _, after = english.partition("{}")
        if _ and phrase.startswith(before) and phrase.endswith(after) and len(phrase) >= len(before) + len(after):
            return local.format(phrase[len(before) : len(phrase) - len(after)])
    return phrase


def misconceptions(lang: str | None = None) -> dict[str, str]:
    """The misconception table of ``lang`` (default: the current language)."""
    return MISCONCEPTIONS_BY_LANGUAGE[lang or _current]


def fill(message: str, width: int = 88) -> str:
    """``message`` wrapped to ``width`` columns for feedback (HTML does not wrap), continuation lines
    indented. Chinese breaks between two characters or at a space, never inside code or a number."""
    if _current == DEFAULT:
        return textwrap.fill(message, width=width, subsequent_indent="  ")
    return _fill_cjk(message, width, "  ")


_CJK = re.compile(r"[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]")
_NO_LINE_START = set("，。：；、！？）》”’")
_UNITS = re.compile(r"\s+|[\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]|[^\s\u3000-\u30ff\u4e00-\u9fff\uff00-\uffef]+")


def _columns(text: str) -> int:
    return sum(2 if _CJK.match(ch) else 1 for ch in text)


def _fill_cjk(message: str, width: int, indent: str) -> str:
    units = []  # unbreakable pieces: one Chinese character (with the punctuation after it), an ASCII word, a space
    for unit in _UNITS.findall(" ".join(message.split())):
        if units and (
            unit in _NO_LINE_START
            or (
                not unit.isspace()
                and not units[-1].isspace()
                and not _CJK.match(unit[0])
                and not _CJK.match(units[-1][-1])
            )
        ):
            units[-1] += unit
        else:
            units.append(unit)
    lines, line = [], ""
    for unit in units:
        if line and _columns(line) + _columns(unit) > width:
            lines.append(line.rstrip())
            line = indent
            if unit.isspace():
                continue
        line += unit
    lines.append(line.rstrip())
    return "\n".join(lines)


def head(kind: str = "diagnosis") -> str:
    """The start of a diagnosis ('Diagnosis:') or an observation ('Observed:') in the current
    language, to find one in a message already worded."""
    return text(kind) + ("：" if _current == "zh" else ":")


def diagnosis_line(key: str) -> str:
    """'\\nDiagnosis: ...' (or 'Observed: ...' for an ``observed_`` key), wrapped; key must be known."""
    head = text("observed" if key.startswith("observed_") else "diagnosis")
    sep = "：" if _current == "zh" else ": "
    return "\n" + fill(f"{head}{sep}{misconceptions()[key]}")

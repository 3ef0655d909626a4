"""A message as data: which entries of the message tables it is made of, with their fields, worded
only when it is shown (``render``), in the language asked for.

The grader's verdicts are made of these (``autograder.judge``): a check is judged once, and its
message is worded afterwards in the submission's language, from the same judgment. What a verdict
decides is read from the structure (the diagnoses it names, the observations it makes), never
from its text. Plain data only: no answer here.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass


@dataclass(frozen=True)
class Msg:
    """One entry of the message tables (``messages.MESSAGES``) with its fields (strings, numbers,
    shapes, or Words of their own)."""

    key: str
    fields: tuple[tuple[str, object], ...] = ()


@dataclass(frozen=True)
class Diag:
    """A diagnosis line (a misconception's key, ``misconceptions``), or an observation line for an
    ``observed_`` key: '\\nDiagnosis: ...' wrapped to 88 columns."""

    key: str


@dataclass(frozen=True)
class Seen:
    """What an observation line saw, as the key the class report counts it by (``observed:<label>``),
    set by the judge that makes the observation. Worded as nothing: the line beside it says it."""

    label: str


@dataclass(frozen=True)
class Fill:
    """Words wrapped to 88 columns once worded (feedback HTML does not wrap)."""

    words: Words


Part = str | Msg | Diag | Seen | Fill


class Words:
    """A message not yet worded: literal text (code, numbers), table entries, diagnoses."""

    __slots__ = ("parts",)

    def __init__(self, *parts: Part | Words):
        flat: list[Part] = []
        for p in parts:
            if isinstance(p, Words):
                flat.extend(p.parts)
            elif isinstance(p, (str, Msg, Diag, Seen, Fill)):
                if p != "":
                    flat.append(p)
            else:
                raise TypeError(f"a message is made of text, table entries and diagnoses, not {type(p).__name__}")
        self.parts = tuple(flat)

    def __add__(self, other: Words | str) -> Words:
        return Words(self, other)

    def __radd__(self, other: str) -> Words:
        return Words(other, self)

    def __bool__(self) -> bool:
        return bool(self.parts)

    def __eq__(self, other) -> bool:
        return isinstance(other, Words) and self.parts == other.parts

    def __hash__(self) -> int:
        return hash(self.parts)

    def __repr__(self) -> str:
        return f"Words{self.parts!r}"

    def __str__(self) -> str:
        """Worded in the current language (``language.current()``)."""
        from . import language

        return self.render(language.current())

    def render(self, lang: str) -> str:
        """The message in ``lang``."""
        from . import language

        with language.speaking(lang):
            return _text(self)

    @staticmethod
    def join(sep: str, items) -> Words:
        out: list = []
        for i, item in enumerate(items):
            if i:
                out.append(sep)
            out.append(item)
        return Words(*out)

    # --- what the message says, read from its structure ---------------------------------------

    def walk(self) -> Iterator[Part]:
        """Every part, depth first, fields' Words included."""
        for p in self.parts:
            yield p
            if isinstance(p, Msg):
                for _, v in p.fields:
                    if isinstance(v, Words):
                        yield from v.walk()
            elif isinstance(p, Fill):
                yield from p.words.walk()

    def diagnoses(self) -> list[str]:
        """The misconception keys of its diagnosis and observation lines, in order."""
        return [p.key for p in self.walk() if isinstance(p, Diag)]

    def keys(self) -> list[str]:
        """The message-table keys it uses, in order."""
        return [p.key for p in self.walk() if isinstance(p, Msg)]

    def seen(self) -> list[str]:
        """The labels of its observation lines, in order."""
        return [p.label for p in self.walk() if isinstance(p, Seen)]

    def names_something(self) -> bool:
        """Whether it already has a diagnosis or an observation line of its own."""
        return any(isinstance(p, Diag | Seen) for p in self.walk())


def words(key: str, **fields) -> Words:
    """One table entry, not yet worded."""
    return Words(Msg(key, tuple(fields.items())))


def diagnosis(key: str) -> Words:
    return Words(Diag(key))


def observation(label: str) -> Words:
    """The record of an observation (``Seen``), set beside the line that words it."""
    return Words(Seen(label))


def fill(message: Words | str) -> Words:
    return Words(Fill(Words(message)))


def as_words(message: Words | str | None) -> Words:
    return message if isinstance(message, Words) else Words(message or "")


def _text(message: Words) -> str:
    """``message`` worded in the current language."""
    return "".join(_word(p) for p in message.parts)


def _word(part: Part) -> str:
    from . import language

    if isinstance(part, str):
        return part
    if isinstance(part, Msg):
        return language.text(part.key, **{k: _text(v) if isinstance(v, Words) else v for k, v in part.fields})
    if isinstance(part, Diag):
        return language.diagnosis_line(part.key)
    if isinstance(part, Seen):
        return ""
    return language.fill(_text(part.words))

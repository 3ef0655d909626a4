"""Quick checks the page marks itself (the "Before we start" questions of chapters 11-13).

``QuickCheck`` holds a few questions, each multiple-choice (``choice``) or numeric
(``number``). Its JavaScript marks an answer right or wrong in the browser, so the checks work on
the static book opened from ``file://``; in JupyterLab the reader's answers reach Python
(``responses``). The rule that marks an answer is ``is_right`` here and ``isRight`` in
``quick_check.js``; the tests hold the two to the same verdicts.

These are self-checks, not graded work: the answers travel with the page. The questions are the
page's own words (the Chinese edition passes Chinese ones); the widget's words (Check, Show answer,
the status lines) come from the string tables, ``strings/<lang>.json``, in Python too (``status``).
"""

from __future__ import annotations

import math
import re

import traitlets as t

from ._base import BookWidget

KINDS = ("choice", "number")
NUMBER = re.compile(r"-?(\d+\.?\d*|\.\d+)(e[-+]?\d+)?", re.IGNORECASE)  # what a reader may type, as in the JS


def choice(prompt: str, options: list[str], answer: int, explain: str = "") -> dict:
    """A multiple-choice question: ``options`` in display order, ``answer`` the right one's index."""
    return {"kind": "choice", "prompt": prompt, "options": list(options), "answer": int(answer), "explain": explain}


def number(prompt: str, answer: float, tolerance: float = 0.0, explain: str = "") -> dict:
    """A numeric question: right when the typed number is within ``tolerance`` of ``answer``."""
    return {
        "kind": "number",
        "prompt": prompt,
        "answer": float(answer),
        "tolerance": float(tolerance),
        "explain": explain,
    }


def validate_question(q: dict) -> dict:
    """``q`` unchanged, or a ValueError that says what is wrong with it."""
    kind = q.get("kind")
    if kind not in KINDS:
        raise ValueError(f"question kind must be one of {KINDS}, got {kind!r}")
    if not str(q.get("prompt", "")).strip():
        raise ValueError("a question needs a prompt")
    if kind == "choice":
        options = q.get("options", [])
        if len(options) < 2:
            raise ValueError(f"a choice question needs at least two options, got {len(options)}")
        if len(set(options)) != len(options):
            raise ValueError(f"options repeat: {options}")
        if not isinstance(q.get("answer"), int) or not 0 <= q["answer"] < len(options):
            raise ValueError(f"answer must index one of the {len(options)} options, got {q.get('answer')!r}")
    else:
        if not math.isfinite(q.get("answer", math.nan)):
            raise ValueError(f"a number question needs a finite answer, got {q.get('answer')!r}")
        if not q.get("tolerance", 0.0) >= 0.0:
            raise ValueError(f"tolerance must be >= 0, got {q.get('tolerance')!r}")
    return q


def is_right(q: dict, response) -> bool | None:
    """True or False for an answer to ``q``; None when nothing (or no number) was given.

    A number is right within the tolerance, with a relative slack of 1e-9 for typed decimals.
    """
    if response is None or response == "":
        return None
    if q["kind"] == "choice":
        return int(response) == q["answer"]
    text = str(response).strip().removeprefix("+")
    if not NUMBER.fullmatch(text) or not math.isfinite(x := float(text)):
        return None
    return abs(x - q["answer"]) <= q["tolerance"] + 1e-9 * max(1.0, abs(q["answer"]))


class QuickCheck(BookWidget):
    """A few questions the page marks: click an option, or type a number and press Check.

    ``responses`` holds the reader's latest answer per question (an option index, the typed
    text of a number, or None); ``revealed`` which answers the reader chose to see.
    """

    _section = "quick_check"
    title = t.Unicode("").tag(sync=True)  # empty: the string table's title, in the page's language
    questions = t.List(t.Dict()).tag(sync=True)
    responses = t.List().tag(sync=True)
    revealed = t.List(t.Bool()).tag(sync=True)

    def __init__(self, questions=(), title: str = "", **kwargs):
        questions = [validate_question(dict(q)) for q in questions]
        kwargs.setdefault("responses", [None] * len(questions))
        kwargs.setdefault("revealed", [False] * len(questions))
        super().__init__(questions=questions, title=title, **kwargs)

    @t.validate("responses", "revealed")
    def _one_per_question(self, proposal):
        value = proposal["value"]
        if len(value) != len(self.questions):
            raise t.TraitError(
                f"{proposal['trait'].name} needs one entry per question ({len(self.questions)}), got {len(value)}"
            )
        return value

    def answer(self, index: int, response) -> bool | None:
        """Answer question ``index`` as a reader would (what a click sends); return the verdict."""
        responses = list(self.responses)
        responses[index] = response
        self.responses = responses
        return is_right(self.questions[index], response)

    def results(self) -> list[bool | None]:
        """The verdict of every question's latest answer (None: not answered)."""
        return [is_right(q, r) for q, r in zip(self.questions, self.responses, strict=True)]

    def score(self) -> tuple[int, int]:
        """(right answers, questions)."""
        return sum(r is True for r in self.results()), len(self.questions)

    def state(self, index: int) -> str:
        """What the page marks question ``index``: right, wrong, revealed or unanswered."""
        if self.revealed[index]:
            return "revealed"
        verdict = is_right(self.questions[index], self.responses[index])
        return "unanswered" if verdict is None else "right" if verdict else "wrong"

    def status(self, index: int) -> str:
        """The line the page shows under question ``index`` (as ``statusText`` in quick_check.js),
        in the widget's language (English for "auto")."""
        state, response = self.state(index), self.responses[index]
        if state == "right":
            return self.text("quick_check.status_right")
        if state == "wrong":
            return self.text("quick_check.status_wrong")
        if state == "revealed":
            return self.text("quick_check.status_revealed")
        return self.text("quick_check.status_not_a_number") if response not in (None, "") else ""

"""Ask the trained model anything (chapter 13 and the gallery): ``ask_model.js`` runs the checkpoints.

The reader types a question of the task (or picks one); the page runs the ``modern`` and
``historical`` checkpoints itself, with the forward pass of ``model_forward.js`` on the weights this
widget carries (``export_weights.py`` says why they travel in the widget's state), and shows greedy
generation step by step: the prefill, each decode step's input token and position, the top
next-token probabilities, the cross-attention of that step over the question (per layer and head),
the self-attention cache growing by one row per layer, the cross K, V fixed since the prefill. Two
experiments: force the first answer token (free running against teacher forcing), and switch the
cache off (more positions computed, the same tokens). No kernel is needed: it works on the static
book, served or from ``file://``.

The Python twins of what the JavaScript computes: ``parse_question`` (what the reader typed) and
``ask_trace`` (the steps, from ``encdec.generate.greedy_decode`` watched through hooks).
"""

from __future__ import annotations

import re

import traitlets as t

from ..data import BOS_ID, EOS_ID, OPERAND_MAX, QUESTION_LEN, TOKEN_TO_ID, VOCAB, encode_question, question_text
from ._base import LESSON_QUESTION_TEXT, BookWidget, watch_greedy
from .export_weights import PRESETS, figure_weights

#: Questions offered in the figure's list: the lesson's example, then two the historical run gets
#: wrong (tests/test_widgets.py checks it, and chapter 13's build the first of them: a retrained
#: checkpoint must still get them wrong, or the list and the chapter's text change).
EXAMPLES = (
    LESSON_QUESTION_TEXT,
    "BOS POSITIVE 12 add POSITIVE 13 EOS",  # historical answers 26
    "BOS POSITIVE 49 subtract NEGATIVE 28 EOS",  # historical answers 76
)
_ARITHMETIC = re.compile(r"^([+-]?)\s*(\d+)\s*(\+|-|add|subtract)\s*([+-]?)\s*(\d+)$", re.IGNORECASE)


def parse_question(text: str) -> tuple[list[int] | None, tuple[str, dict] | None]:
    """What the reader typed -> (the 9 question ids, None), or (None, (code, values)) for the figure
    to word: ``no_text``, ``bad_format`` (not a question of the task) or ``out_of_range`` (an operand
    beyond ±49).

    Accepts ``-30 - -34``, ``12 + 7``, ``12 add -7``, ``−30 subtract −34`` and the tokens
    ``NEGATIVE 30 subtract NEGATIVE 34`` with or without BOS and EOS. Twin of ``parseQuestion``.
    """
    clean = re.sub("[\u2212\u2013]", "-", str(text or "")).strip()
    if not clean:
        return None, ("no_text", {})
    m = _ARITHMETIC.match(clean)
    if m:
        sa, da, op, sb, db = m.groups()
        a, b = (-1 if sa == "-" else 1) * int(da), (-1 if sb == "-" else 1) * int(db)
        for value, digits in ((a, da), (b, db)):
            if len(digits) > 2 or abs(value) > OPERAND_MAX:
                return None, ("out_of_range", {"value": str(value)})
        op = "add" if op == "+" or op.lower() == "add" else "subtract"
        return encode_question(question_text(a, op, b)), None
    lower = {token.lower(): token for token in VOCAB}
    words = [lower.get(word.lower(), word) for word in clean.split()]
    if words[0] != "BOS":
        words.insert(0, "BOS")
    if words[-1] != "EOS":
        words.append("EOS")
    ids: list[int] = []
    for word in words:
        if word in TOKEN_TO_ID:
            ids.append(TOKEN_TO_ID[word])
        elif re.fullmatch(r"\d{1,2}", word):
            ids.extend(int(d) for d in word)
        elif re.fullmatch(r"\d+", word):
            return None, ("out_of_range", {"value": word})
        else:
            return None, ("bad_format", {"text": clean})
    try:
        encode_question(" ".join(VOCAB[i] for i in ids))
    except ValueError:
        if len(ids) == QUESTION_LEN:
            for k in (2, 6):  # a well-formed operand above 49
                value = 10 * ids[k] + ids[k + 1]
                if ids[k] <= 9 and ids[k + 1] <= 9 and value > OPERAND_MAX:
                    return None, ("out_of_range", {"value": f"{'-' if VOCAB[ids[k - 1]] == 'NEGATIVE' else ''}{value}"})
        return None, ("bad_format", {"text": clean})
    return ids, None


def ask_trace(model, question_ids, forced: str | None = None, use_cache: bool = True) -> dict:
    """Greedy decoding of one question as the figure shows it, from ``greedy_decode`` itself.

    The prefix is ``BOS`` (or ``BOS`` and the ``forced`` token); the answer has the training length,
    5 tokens. Per decoder call: the positions fed, the next-token probabilities of the last position,
    every layer's cross-attention weights of that position over the question (read from the real
    ``attention_cross.last_attention``) and the rows of every self-attention cache.
    """
    import torch

    from ..data import ANSWER_LEN

    ques = torch.tensor([list(question_ids)], dtype=torch.long)  # (1, Kq)
    prefix = [BOS_ID] if forced is None else [BOS_ID, TOKEN_TO_ID[forced]]
    ids, calls = watch_greedy(
        model, ques, ANSWER_LEN - len(prefix), torch.tensor([prefix], dtype=torch.long), use_cache=use_cache
    )
    steps = [
        {
            "fed": call["fed"],
            "cross": call["cross"],
            "self_rows": call["self_rows"],
            "probs": torch.softmax(call["logits"].double(), dim=-1).tolist(),
        }
        for call in calls
    ]  # (V,) each
    tokens = ids[: ids.index(EOS_ID) + 1] if EOS_ID in ids else ids
    return {
        "tokens": tokens,
        "prefix": prefix,
        "steps": steps,
        "positions_computed": sum(step["fed"] for step in steps),
    }


class AskTheModel(BookWidget):
    """Type a question; the trained checkpoints answer it in the page, one greedy step at a time.

    ``weights`` holds each preset's export (``export_weights.export_preset``), made from the shipped
    checkpoints when the widget is made; ``preset`` is the one stepped through, ``step`` 0 before
    anything runs, 1 the prefill, then one per decode step. ``forced`` names a token forced after
    ``BOS`` ("" lets the model choose), ``use_cache`` switches the KV cache.
    """

    _section = "ask_model"
    weights = t.Dict().tag(sync=True)  # {preset: export}; empty when weights_src names the site's file
    # the built book's one weights script per site, relative to its root (the book build sets it:
    # SITE_WEIGHTS_ENV); a page then carries no weights of its own
    weights_src = t.Unicode("").tag(sync=True)
    presets = t.List(t.Unicode()).tag(sync=True)
    preset = t.Unicode("modern").tag(sync=True)
    question = t.Unicode(LESSON_QUESTION_TEXT).tag(sync=True)  # as the reader typed it
    examples = t.List(t.Unicode(), default_value=list(EXAMPLES)).tag(sync=True)
    forced = t.Unicode("").tag(sync=True)
    use_cache = t.Bool(True).tag(sync=True)
    step = t.Int(0).tag(sync=True)
    source = t.Unicode("trained").tag(sync=True)

    def __init__(self, presets=PRESETS, weights: dict | None = None, **kwargs):
        presets, weights, site = figure_weights(presets, weights)
        if site:
            kwargs.setdefault("weights_src", site)
        kwargs.setdefault("preset", presets[0])
        super().__init__(presets=presets, weights=weights, **kwargs)

    @t.validate("forced")
    def _check_forced(self, proposal):
        value = proposal["value"]
        if value and (value not in TOKEN_TO_ID or value == "BOS"):
            raise t.TraitError(f"forced must be '' or a token other than BOS ({' '.join(VOCAB)}), got {value!r}")
        return value

    @t.validate("preset")
    def _check_preset(self, proposal):
        if self.presets and proposal["value"] not in self.presets:
            raise t.TraitError(f"preset must be one of {self.presets}, got {proposal['value']!r}")
        return proposal["value"]

    @t.validate("step")
    def _check_step(self, proposal):
        if proposal["value"] < 0:
            raise t.TraitError(f"step must be >= 0, got {proposal['value']}")
        return proposal["value"]

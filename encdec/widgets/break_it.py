"""Break it on purpose (chapter 13 and the gallery): ``break_it.js`` runs the trained model with one mistake.

The reader switches one mistake of the lessons into the trained checkpoint (``encdec.broken``: mask
after softmax, no causal mask, a stale cache position, Q from the encoder, cross-attention removed),
asks a question, and sees the broken model's greedy answer beside the intact one, computed in the
page (``model_forward.js``'s ``greedyGenerate`` for both: the broken one with the one piece the mistake
concerns swapped, ``MISTAKES`` in ``break_it.js``, as ``encdec.broken`` swaps it for ``greedy_decode``,
each mistake on the decoding path where it can matter), and how many of the 19,602 questions of
the task each broken model still gets right, counted in PyTorch when the widget is made
(``mistake_table``) and shipped with it (``tests/test_model_broken_js.py`` holds the page's answers
equal to PyTorch's on every question, so the count is the page's too).

The Python twins: ``mistake_table`` (the counts and PyTorch's words where a broken model cannot run)
and ``break_answer`` (one question's answer under one mistake, from ``encdec.broken``).
"""

from __future__ import annotations

import functools

import traitlets as t

from ..data import EOS_ID, OPERAND_MAX, OPERATORS, encode_question, question_text
from ._base import BookWidget
from .export_weights import PRESETS, figure_weights

LESSON = (-30, "subtract", -34)  # the lesson's example, BOS NEGATIVE 30 subtract NEGATIVE 34 EOS
DEFAULT_MISTAKE = "no_causal_mask"


def break_answer(model, question_ids, mistake: str) -> tuple[list[int] | None, str | None]:
    """The greedy answer (BOS through EOS) of ``model`` with ``mistake`` to one question, or
    (None, PyTorch's error) when the broken model cannot run."""
    import torch

    from ..broken import broken_answers

    got, error = broken_answers(model, torch.tensor([list(question_ids)], dtype=torch.long), mistake)
    if got is None:
        return None, error
    ids = got[0].tolist()
    return (ids[: ids.index(EOS_ID) + 1] if EOS_ID in ids else ids), None


@functools.cache
def mistake_table(preset: str) -> list[dict]:
    """Per mistake of ``encdec.broken.MISTAKES`` (the intact model first), on the trained ``preset``:
    ``{"name", "use_cache", "right", "total", "error"}``: how many of the 19,602 questions the model
    with that mistake still answers right on the mistake's path, and, where it cannot run, PyTorch's
    error for one question (the lesson's). Counted once per checkpoint and read by every page
    (``encdec.whole_space``)."""
    from .. import attention, broken, data, generate
    from .. import model as model_module
    from ..train import load_run
    from ..whole_space import cached

    def count() -> list[dict]:
        model, _ = load_run(preset)
        questions, answers = data.problem_space()
        lesson = encode_question(question_text(*LESSON))
        rows = []
        for name, mistake in broken.MISTAKES.items():
            counted = broken.still_right(model, questions, answers, name)
            error = break_answer(model, lesson, name)[1] if counted["error"] else None
            rows.append(
                {
                    "name": name,
                    "use_cache": mistake.use_cache,
                    "right": counted["right"],
                    "total": counted["total"],
                    "error": error,
                }
            )
        return rows

    return cached("break_it", preset, (attention, broken, data, generate, model_module), count)


class BreakIt(BookWidget):
    """Switch one mistake into the trained model; its answer beside the intact one, and its count.

    ``mistake`` is a key of ``encdec.broken.MISTAKES`` other than ``intact``; the question is
    ``a op b`` (operands from -49 to 49); ``tables`` holds each preset's ``mistake_table``;
    ``weights`` each preset's export, or ``weights_src`` the built site's weights script.
    """

    _section = "break_it"
    weights = t.Dict().tag(sync=True)  # {preset: export}; empty when weights_src names the site's file
    weights_src = t.Unicode("").tag(sync=True)
    presets = t.List(t.Unicode()).tag(sync=True)
    preset = t.Unicode("modern").tag(sync=True)
    tables = t.Dict().tag(sync=True)  # {preset: mistake_table(preset)}
    mistake = t.Unicode(DEFAULT_MISTAKE).tag(sync=True)
    a = t.Int(LESSON[0]).tag(sync=True)
    op = t.Unicode(LESSON[1]).tag(sync=True)
    b = t.Int(LESSON[2]).tag(sync=True)
    source = t.Unicode("trained").tag(sync=True)

    def __init__(self, presets=PRESETS, weights: dict | None = None, **kwargs):
        presets, weights, site = figure_weights(presets, weights)
        if site:
            kwargs.setdefault("weights_src", site)
        kwargs.setdefault("tables", {preset: mistake_table(preset) for preset in presets})
        kwargs.setdefault("preset", presets[0])
        super().__init__(presets=presets, weights=weights, **kwargs)

    def question_ids(self) -> list[int]:
        """The question the figure asks, as the model reads it."""
        return encode_question(question_text(self.a, self.op, self.b))

    @t.validate("mistake")
    def _check_mistake(self, proposal):
        from ..broken import MISTAKES

        if proposal["value"] not in MISTAKES or proposal["value"] == "intact":
            raise t.TraitError(
                f"mistake must be one of {[m for m in MISTAKES if m != 'intact']}, got {proposal['value']!r}"
            )
        return proposal["value"]

    @t.validate("a", "b")
    def _check_operand(self, proposal):
        if abs(proposal["value"]) > OPERAND_MAX:
            raise t.TraitError(f"an operand is from -{OPERAND_MAX} to {OPERAND_MAX}, got {proposal['value']}")
        return proposal["value"]

    @t.validate("op")
    def _check_op(self, proposal):
        if proposal["value"] not in OPERATORS:
            raise t.TraitError(f"op must be one of {OPERATORS}, got {proposal['value']!r}")
        return proposal["value"]

    @t.validate("preset")
    def _check_preset(self, proposal):
        if self.presets and proposal["value"] not in self.presets:
            raise t.TraitError(f"preset must be one of {self.presets}, got {proposal['value']!r}")
        return proposal["value"]

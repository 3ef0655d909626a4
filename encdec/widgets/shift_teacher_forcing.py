"""Target shift and teacher forcing, the figure of chapter 12 (``shift_teacher_forcing.js``).

``teacher_forcing_table`` is the Python twin of ``teacherForcingTable`` in the JS file.
"""

from __future__ import annotations

from collections.abc import Sequence

import traitlets as t

from ._base import LESSON_ANSWER, BookWidget


def teacher_forcing_table(tokens: Sequence[str], shift: bool = True, causal_mask: bool = True) -> list[dict]:
    """One row per decoder position: its input, its label, the answer tokens it could read, any leak.

    Indices refer to the answer ``tokens``. With the shift, input t is token t and label t is
    token t+1; without it, input and label of position t are both token t. Position t reads the
    inputs 0..t under the causal mask, all of them without it. A leak: the label is readable.
    """
    K = len(tokens)
    if K < 2:
        raise ValueError(f"an answer needs at least 2 tokens, got {K}")
    inputs = list(range(K - 1)) if shift else list(range(K))
    rows = []
    for pos, inp in enumerate(inputs):
        label = pos + 1 if shift else pos
        readable = inputs[: pos + 1] if causal_mask else list(inputs)
        rows.append(
            {
                "position": pos,
                "input": tokens[inp],
                "label": tokens[label],
                "label_index": label,
                "readable": readable,
                "leak": label in readable,
            }
        )
    return rows


class ShiftTeacherForcing(BookWidget):
    """Decoder input, label and readable answer tokens per position; leaks light up.

    Turn off ``shift`` and position t's input is its own label; turn off ``causal_mask`` and
    positions read later ground-truth tokens.
    """

    _section = "shift_teacher_forcing"
    tokens = t.List(t.Unicode(), default_value=list(LESSON_ANSWER)).tag(sync=True)
    shift = t.Bool(True).tag(sync=True)
    causal_mask = t.Bool(True).tag(sync=True)

    def table(self) -> list[dict]:
        return teacher_forcing_table(self.tokens, self.shift, self.causal_mask)

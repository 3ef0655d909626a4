"""The causal mask grid of chapter 11 (``mask_toggle.js``): click a cell to allow or forbid it.

``preset_mask`` and ``masked_softmax_rows`` are the Python twins of ``presetMask`` in
``mask_toggle.js`` and of ``maskedSoftmaxRow`` (``common.js``) applied to every row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import traitlets as t

from ._base import LESSON_DECODER_INPUT, BookWidget, masked_softmax_row

#: A fixed 5x5 score matrix (reader rows, source columns) for the mask figure.
DEFAULT_SCORES_5 = (
    (2.0, 0.5, -1.0, 0.3, 1.2),
    (1.0, 2.2, 0.4, -0.5, 0.8),
    (0.2, 1.5, 1.8, 0.9, -0.3),
    (-0.4, 0.6, 1.1, 2.5, 0.7),
    (0.9, -0.2, 0.5, 1.3, 2.1),
)

MASK_PRESETS = ("causal", "padding", "none")


def default_scores(K: int) -> list[list[float]]:
    """The fixed score matrix for K positions: the table above for K=5, a smooth pattern otherwise."""
    if K == 5:
        return [list(row) for row in DEFAULT_SCORES_5]
    return [
        [round(2.0 * math.cos(0.9 * i - 1.3 * j) + (0.5 if i == j else 0.0), 2) for j in range(K)] for i in range(K)
    ]


def preset_mask(preset: str, K: int, num_padding: int = 1) -> list[list[bool]]:
    """A K x K mask (True = forbidden; row = reader, column = source) for a named preset.

    ``causal``: reader i may not read a later source j > i. ``padding``: nobody reads the last
    ``num_padding`` positions (padding tokens). ``none``: everything allowed.
    """
    if K < 1:
        raise ValueError(f"K must be at least 1, got {K}")
    if preset == "causal":
        return [[j > i for j in range(K)] for i in range(K)]
    if preset == "padding":
        if not 0 <= num_padding < K:
            raise ValueError(f"num_padding must be in [0, {K - 1}] for {K} positions, got {num_padding}")
        return [[j >= K - num_padding for j in range(K)] for _ in range(K)]
    if preset == "none":
        return [[False] * K for _ in range(K)]
    raise ValueError(f"unknown mask preset {preset!r}: expected one of {', '.join(MASK_PRESETS)}")


def masked_softmax_rows(scores: Sequence[Sequence[float]], mask: Sequence[Sequence[bool]]) -> list[list[float]]:
    """``masked_softmax_row`` for every reader row of a square score matrix."""
    if len(scores) != len(mask):
        raise ValueError(f"scores have {len(scores)} rows but the mask has {len(mask)}")
    return [masked_softmax_row(s, m) for s, m in zip(scores, mask)]


def _square(name: str, rows, K: int, cast) -> list[list]:
    rows = [[cast(x) for x in r] for r in rows]
    if len(rows) != K or any(len(r) != K for r in rows):
        shape = (len(rows), *{len(r) for r in rows})
        raise t.TraitError(f"{name} must be {K} x {K} (one row per token), got rows of shape {shape}")
    return rows


class MaskToggle(BookWidget):
    """The reader (row) x source (column) grid: click a cell to allow or forbid it.

    Each row shows mask-then-softmax weights and its sum. ``mask[i][j]`` is True when reader i
    may not read source j (the package's convention); clicking in the browser updates ``mask``.
    The tokens are by default what the decoder is fed, ``BOS POSITIVE 0 4``: a 4 x 4 grid.
    """

    _section = "mask_toggle"
    tokens = t.List(t.Unicode()).tag(sync=True)
    scores = t.List(t.List(t.Float())).tag(sync=True)
    mask = t.List(t.List(t.Bool())).tag(sync=True)
    preset = t.Unicode("causal").tag(sync=True)  # one of MASK_PRESETS, or "custom" after a click
    num_padding = t.Int(1).tag(sync=True)  # how many trailing positions the padding preset hides

    def __init__(self, tokens=LESSON_DECODER_INPUT, scores=None, preset="causal", num_padding=1, mask=None, **kwargs):
        tokens = [str(x) for x in tokens]
        K = len(tokens)
        if K < 2:
            raise ValueError(f"MaskToggle needs at least 2 tokens, got {tokens}")
        scores = default_scores(K) if scores is None else _square("scores", scores, K, float)
        if mask is not None:  # an explicit mask wins over the preset
            mask, preset = _square("mask", mask, K, bool), "custom"
        elif preset not in MASK_PRESETS:
            raise ValueError(f"unknown mask preset {preset!r}: expected one of {', '.join(MASK_PRESETS)}")
        else:
            mask = preset_mask(preset, K, num_padding)
        super().__init__(tokens=tokens, scores=scores, mask=mask, preset=preset, num_padding=num_padding, **kwargs)

    @t.validate("mask")
    def _check_mask(self, proposal):
        return _square("mask", proposal["value"], len(self.tokens), bool)

    @t.validate("scores")
    def _check_scores(self, proposal):
        return _square("scores", proposal["value"], len(self.tokens), float)

    @t.validate("preset")
    def _check_preset(self, proposal):
        if proposal["value"] not in (*MASK_PRESETS, "custom"):
            raise t.TraitError(
                f"preset must be one of {', '.join(MASK_PRESETS)} or 'custom', got {proposal['value']!r}"
            )
        return proposal["value"]

    @t.observe("preset", "num_padding")
    def _apply_preset(self, change):
        if self.preset != "custom":
            self.mask = preset_mask(self.preset, len(self.tokens), self.num_padding)

    def toggle(self, reader: int, source: int) -> None:
        """Flip one cell, as a click in the grid does."""
        mask = [list(r) for r in self.mask]
        mask[reader][source] = not mask[reader][source]
        self.preset = "custom"
        self.mask = mask

    def weights(self) -> list[list[float]]:
        """Attention weights of every reader row: mask, then softmax."""
        return masked_softmax_rows(self.scores, self.mask)

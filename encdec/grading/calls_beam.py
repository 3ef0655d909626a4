"""How the kv_cache stretch part 4 calls the student's ``beam_search`` (a kind of ``calls.CALLS``).

Runs in the student's kernel: builds the model the grader drew, calls the student's search once per
case and returns its tokens and scores as arrays. Nothing here computes an expected answer.
"""

from __future__ import annotations

import numpy as np
import torch

from .arguments import as_array, config_of, state_of, tensor_of
from .wire import case


@torch.no_grad()
def call_beam(impl, meta, a) -> dict[str, np.ndarray]:
    """Each case: ``impl(model, ques_b, beam_size, max_new_tokens, length_penalty)`` -> (tokens, scores)."""
    from ..model import Transformer

    model = Transformer(config_of(meta))
    model.load_state_dict(state_of(a))
    model.eval()
    out = {}
    for i, (k, n, alpha) in enumerate(meta["cases"]):
        res = impl(model, tensor_of(a[case("ques", i)]), int(k), int(n), float(alpha))
        if not isinstance(res, tuple) or len(res) != 2:
            raise TypeError(f"beam_search must return (tokens, scores), got {type(res).__name__}")
        out[case("tokens", i)] = as_array(res[0], "the beams' tokens (N, beam_size, 1 + max_new_tokens)")
        out[case("scores", i)] = as_array(res[1], "the beams' scores (N, beam_size)")
    return out
